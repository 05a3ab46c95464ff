//! The Workload API as each Kubernetes version serves it: the pod group a pod names and that group's gang policy.

// Upstream (behaviour, not code): `pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go` and
// `staging/src/k8s.io/api/scheduling/` of k8s.io/kubernetes@v1.35.4, @v1.36.3 and @v1.37.2.
//
// - v1.35, `scheduling.k8s.io/v1alpha1`: a pod names `spec.workloadRef {name, podGroup, podGroupReplicaKey}`; the
//   Workload's `spec.podGroups[].policy` is `basic: {}` or `gang: {minCount}`.
// - v1.36, `v1alpha2`, and v1.37, `v1beta1`: `workloadRef` is gone; a pod names a standalone, runtime PodGroup by
//   `spec.schedulingGroup.podGroupName`, and the PodGroup's `spec.schedulingPolicy` is the policy. The Workload
//   only holds `podGroupTemplates` a controller makes PodGroups from: the scheduler never reads it.
//
// The model is one for all three: a group is (namespace, object, group inside the object, replica key), where the
// object is the Workload (v1.35) or the PodGroup itself (v1.36+, no group inside, no replica key).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::gang::GroupPolicy;
use super::pod_group::{Dialect, GroupKey};
use crate::KubernetesVersion;

/// The API group both dialects of the in-tree API share.
const GROUP: &str = "scheduling.k8s.io";

/// Which Workload API a server speaks, hence where a pod names its group and where the group's policy is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WorkloadApi {
    /// v1.35: `spec.workloadRef` and the Workload's `podGroups`.
    V1Alpha1,
    /// v1.36: `spec.schedulingGroup.podGroupName` and the PodGroup's `schedulingPolicy`.
    V1Alpha2,
    /// v1.37: as v1.36, beta.
    #[default]
    V1Beta1,
}

impl WorkloadApi {
    /// The API kube-scheduler of `version` reads.
    pub fn of(version: KubernetesVersion) -> WorkloadApi {
        match version {
            KubernetesVersion::V1_35 => WorkloadApi::V1Alpha1,
            KubernetesVersion::V1_36 => WorkloadApi::V1Alpha2,
            KubernetesVersion::V1_37 => WorkloadApi::V1Beta1,
        }
    }

    /// `scheduling.k8s.io/<version>`.
    pub fn api_version(self) -> &'static str {
        match self {
            WorkloadApi::V1Alpha1 => "scheduling.k8s.io/v1alpha1",
            WorkloadApi::V1Alpha2 => "scheduling.k8s.io/v1alpha2",
            WorkloadApi::V1Beta1 => "scheduling.k8s.io/v1beta1",
        }
    }

    /// The kind whose objects hold the groups' policies: the Workload (v1.35) or the PodGroup.
    pub fn policy_kind(self) -> &'static str {
        match self {
            WorkloadApi::V1Alpha1 => "Workload",
            WorkloadApi::V1Alpha2 | WorkloadApi::V1Beta1 => "PodGroup",
        }
    }

    /// Whether `api_version`/`kind` is this API's policy kind (a PodGroup of `scheduling.x-k8s.io` is
    /// Coscheduling's, not this).
    pub(crate) fn holds_policies(self, api_version: &str, kind: &str) -> bool {
        api_version == self.api_version() && kind == self.policy_kind()
    }

    /// Whether `api_version` is the in-tree scheduling group (any version).
    pub fn is_in_tree(api_version: &str) -> bool {
        api_version.split_once('/').is_some_and(|(group, _)| group == GROUP)
    }

    /// The group a pod's `spec` (as JSON) names in this API, `None` when it names none here. Read from JSON, not
    /// a typed pod: the typed model of v1.37 has no `workloadRef`, and a server drops the other API's field.
    pub fn group_of(self, namespace: &str, spec: &Value) -> Option<GroupKey> {
        let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str).map(str::to_string);
        let (workload, pod_group, replica_key) = match self {
            WorkloadApi::V1Alpha1 => {
                spec.pointer("/workloadRef")?;
                (
                    text("/workloadRef/name")?,
                    text("/workloadRef/podGroup")?,
                    text("/workloadRef/podGroupReplicaKey").unwrap_or_default(),
                )
            }
            WorkloadApi::V1Alpha2 | WorkloadApi::V1Beta1 => {
                (text("/schedulingGroup/podGroupName")?, String::new(), String::new())
            }
        };
        Some(GroupKey {
            dialect: Dialect::Workload,
            namespace: namespace.to_string(),
            workload,
            pod_group,
            replica_key,
        })
    }

    /// PreEnqueue's message for a group whose policy object is not known (`gangscheduling.go` PreEnqueue; the
    /// typo "pods's" is upstream's).
    pub(crate) fn missing_message(self, group: &GroupKey) -> String {
        match self {
            WorkloadApi::V1Alpha1 => format!(
                "waiting for pods's workload {:?} to appear in scheduling queue",
                group.workload
            ),
            WorkloadApi::V1Alpha2 | WorkloadApi::V1Beta1 => format!(
                "waiting for pods's pod group {:?} to appear in scheduling queue",
                group.workload
            ),
        }
    }
}

/// The gang policies one object holds, by group name: a Workload's pod groups (v1.35), or a PodGroup's own
/// policy under the empty name (v1.36+, whose pods name no group inside it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupPolicies {
    policies: BTreeMap<String, GroupPolicy>,
    /// Why Ruleplane does not place the object's members: it uses a field kube-scheduler honours only with a gate
    /// beyond GenericWorkload, which Ruleplane does not evaluate (held with this text rather than placed wrongly).
    refusal: Option<String>,
    /// A PodGroup's `spec.priority` (v1.37; the Priority admission plugin fills it from its class).
    priority: Option<i32>,
}

/// PodGroup fields kube-scheduler v1.37 honours only with further gates (the apiserver drops them without those
/// gates, so with GenericWorkload alone they never reach a scheduler): a member of a PodGroup that has one is held.
const UNEVALUATED: [(&str, &str); 3] = [
    ("schedulingConstraints", "TopologyAwareWorkloadScheduling"),
    ("parentCompositePodGroupName", "CompositePodGroup"),
    ("resourceClaims", "DynamicResourceAllocation for pod groups"),
];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchedulingPolicy {
    #[serde(default)]
    gang: Option<Gang>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Gang {
    min_count: i64,
}

/// v1alpha1's `WorkloadSpec` (the typed model of v1.37 no longer has it).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadSpec {
    #[serde(default)]
    pod_groups: Vec<WorkloadPodGroup>,
}

#[derive(Deserialize)]
struct WorkloadPodGroup {
    name: String,
    policy: SchedulingPolicy,
}

/// v1alpha2's and v1beta1's `PodGroupSpec`, what the scheduler reads of it without `TopologyAwareWorkloadScheduling`
/// (its `schedulingConstraints` need that gate: see `docs/scheduler.md`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroupSpec {
    scheduling_policy: SchedulingPolicy,
    #[serde(default)]
    priority: Option<i32>,
}

impl GroupPolicies {
    /// The policies of an object of `api`'s policy kind (its `spec` is read; metadata is not needed). Only an object
    /// written by hand offline can fail to read: the apiserver validated the others.
    pub fn of(api: WorkloadApi, object: &Value) -> Result<GroupPolicies, serde_json::Error> {
        let spec = object.get("spec").cloned().unwrap_or(Value::Null);
        let policy = |policy: SchedulingPolicy| match policy.gang {
            Some(gang) => GroupPolicy::Gang {
                min_count: usize::try_from(gang.min_count).unwrap_or(0),
            },
            None => GroupPolicy::Basic,
        };
        let policies = match api {
            WorkloadApi::V1Alpha1 => {
                let spec: WorkloadSpec = serde_json::from_value(spec)?;
                spec.pod_groups
                    .into_iter()
                    .map(|group| (group.name, policy(group.policy)))
                    .collect()
            }
            WorkloadApi::V1Alpha2 | WorkloadApi::V1Beta1 => {
                let refusal = UNEVALUATED.iter().find_map(|(field, gate)| {
                    let set = spec.get(*field).is_some_and(|value| !value.is_null());
                    set.then(|| {
                        format!(
                            "PodGroup spec.{field} ({gate}) is not evaluated by Ruleplane: its members are not \
                             placed (docs/scheduler.md, \"Gangs by Kubernetes version\")"
                        )
                    })
                });
                let spec: PodGroupSpec = serde_json::from_value(spec)?;
                let policies = BTreeMap::from([(String::new(), policy(spec.scheduling_policy))]);
                return Ok(GroupPolicies {
                    policies,
                    refusal,
                    priority: spec.priority,
                });
            }
        };
        Ok(GroupPolicies {
            policies,
            refusal: None,
            priority: None,
        })
    }

    /// The group's priority (`PodGroupPriority`: a PodGroup's `spec.priority`, 0 when unset).
    pub fn priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }

    /// Why the object's members are not placed, when it uses a field Ruleplane does not evaluate.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// The policy of `group` (`podGroupPolicy`); `None` when the object holds no such group (a Workload without
    /// the pod's `podGroup`).
    pub fn policy(&self, group: &GroupKey) -> Option<GroupPolicy> {
        self.policies.get(&group.pod_group).copied()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_version_reads_its_own_reference_and_ignores_the_other() {
        let spec = json!({"workloadRef": {"name": "train", "podGroup": "workers", "podGroupReplicaKey": "r1"},
                          "schedulingGroup": {"podGroupName": "train-0"}});
        let old = WorkloadApi::V1Alpha1.group_of("ns", &spec).expect("a member");
        assert_eq!(old.to_string(), "ns/train/workers/r1");
        for api in [WorkloadApi::V1Alpha2, WorkloadApi::V1Beta1] {
            let group = api.group_of("ns", &spec).expect("a member");
            assert_eq!(group.to_string(), "ns/train-0");
            assert_eq!(group.plugin(), "GangScheduling");
        }
        let only_old = json!({"workloadRef": {"name": "train", "podGroup": "workers"}});
        assert_eq!(WorkloadApi::V1Beta1.group_of("ns", &only_old), None);
        assert_eq!(WorkloadApi::V1Alpha1.group_of("ns", &json!({"containers": []})), None);
    }

    #[test]
    fn the_version_chooses_the_api_its_kind_and_the_missing_text() {
        assert_eq!(
            WorkloadApi::of(KubernetesVersion::V1_35).api_version(),
            "scheduling.k8s.io/v1alpha1"
        );
        assert_eq!(WorkloadApi::of(KubernetesVersion::V1_36).policy_kind(), "PodGroup");
        let api = WorkloadApi::of(KubernetesVersion::V1_37);
        assert!(api.holds_policies("scheduling.k8s.io/v1beta1", "PodGroup"));
        assert!(!api.holds_policies("scheduling.x-k8s.io/v1alpha1", "PodGroup"));
        let group = api
            .group_of("ns", &json!({"schedulingGroup": {"podGroupName": "pg"}}))
            .expect("a member");
        assert_eq!(
            api.missing_message(&group),
            "waiting for pods's pod group \"pg\" to appear in scheduling queue"
        );
    }

    #[test]
    fn policies_come_from_a_workloads_groups_or_a_pod_groups_own_policy() {
        let workload = json!({"spec": {"podGroups": [
            {"name": "workers", "policy": {"gang": {"minCount": 3}}}, {"name": "ps", "policy": {"basic": {}}}]}});
        let policies = GroupPolicies::of(WorkloadApi::V1Alpha1, &workload).expect("reads");
        let spec = json!({"workloadRef": {"name": "train", "podGroup": "workers"}});
        let group = WorkloadApi::V1Alpha1.group_of("ns", &spec).expect("a member");
        assert_eq!(policies.policy(&group), Some(GroupPolicy::Gang { min_count: 3 }));
        let ps = GroupKey {
            pod_group: "ps".into(),
            ..group.clone()
        };
        assert_eq!(policies.policy(&ps), Some(GroupPolicy::Basic));
        let absent = GroupKey {
            pod_group: "none".into(),
            ..group
        };
        assert_eq!(policies.policy(&absent), None);

        let pod_group = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}});
        let policies = GroupPolicies::of(WorkloadApi::V1Beta1, &pod_group).expect("reads");
        assert_eq!(policies.refusal(), None);
        let member = WorkloadApi::V1Beta1
            .group_of("ns", &json!({"schedulingGroup": {"podGroupName": "pg"}}))
            .expect("a member");
        assert_eq!(policies.policy(&member), Some(GroupPolicy::Gang { min_count: 2 }));
        let basic = json!({"spec": {"schedulingPolicy": {"basic": {}}}});
        let basic = GroupPolicies::of(WorkloadApi::V1Alpha2, &basic).expect("reads");
        assert_eq!(basic.policy(&member), Some(GroupPolicy::Basic));
        assert!(GroupPolicies::of(WorkloadApi::V1Beta1, &json!({"spec": {}})).is_err());
    }

    #[test]
    fn a_pod_group_with_fields_only_further_gates_honour_is_refused_with_the_field() {
        let pod_group = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                                         "schedulingConstraints": {"topology": [{"key": "zone"}]}}});
        let policies = GroupPolicies::of(WorkloadApi::V1Beta1, &pod_group).expect("reads");
        let refusal = policies.refusal().expect("refused");
        assert!(
            refusal
                .starts_with("PodGroup spec.schedulingConstraints (TopologyAwareWorkloadScheduling) is not evaluated"),
            "{refusal}"
        );
        let child = json!({"spec": {"schedulingPolicy": {"basic": {}}, "parentCompositePodGroupName": "root"}});
        let policies = GroupPolicies::of(WorkloadApi::V1Beta1, &child).expect("reads");
        assert!(policies.refusal().is_some_and(|r| r.contains("CompositePodGroup")));
    }
}
