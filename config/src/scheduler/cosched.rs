//! Gang scheduling in scheduler-plugins' Coscheduling dialect: a pod's PodGroup label, the PodGroup's spec, and
//! Coscheduling's PreFilter verdicts and messages, mapped onto the Workload dialect's gang run (`super::gang`).

// Upstream: `pkg/coscheduling/` and `apis/scheduling/v1alpha1/types.go` of sigs.k8s.io/scheduler-plugins
// (behaviour and messages, not code; `docs/scheduler-plan.md` §4.3):
//
// - A pod joins the PodGroup named by its label `scheduling.x-k8s.io/pod-group`, in its own namespace.
// - PreFilter refuses (UnschedulableAndUnresolvable) a member while fewer than `minMember` pods carry the label:
//   `pre-filter pod <pod> cannot find enough sibling pods, current pods number: <n>, minMember of group: <m>`.
// - A labelled pod whose PodGroup does not exist passes PreFilter and is rejected at Permit with `PodGroup not
//   found` (Unschedulable).
// - Permit waits until `minMember` members reached it. Ruleplane runs the group as a unit instead (`GangRun`):
//   no member waits at Permit across runs, so `scheduleTimeoutSeconds` and `permitWaitingTimeSeconds` never
//   apply. PodGroup `status` is written by scheduler-plugins' PodGroup controller, not by the scheduler plugin,
//   so Ruleplane does not write it either.

use std::collections::BTreeMap;

use super::gang::{Dialect, GroupKey};

/// The plugin's name (`coscheduling.Name`): the name a policy disables it by, and the rejecting plugin of a
/// member held or rejected with its group.
pub const COSCHEDULING: &str = "Coscheduling";

/// The label a pod names its PodGroup by (`v1alpha1.PodGroupLabel`).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// The PodGroup kind's group/version (scheduler-plugins' CRD, not installed by Ruleplane).
pub const POD_GROUP_API: &str = "scheduling.x-k8s.io/v1alpha1";

/// The group a pod's labels name, if they name one (an empty label names none).
pub fn group_of(namespace: &str, labels: Option<&BTreeMap<String, String>>) -> Option<GroupKey> {
    let name = labels?.get(POD_GROUP_LABEL)?;
    if name.is_empty() {
        return None;
    }
    Some(GroupKey {
        dialect: Dialect::PodGroup,
        namespace: namespace.to_string(),
        workload: name.clone(),
        pod_group: String::new(),
        replica_key: String::new(),
    })
}

/// What the gang run reads of a PodGroup's spec. The object comes from the cluster (untrusted): a field of the
/// wrong type reads as absent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGroupSpec {
    /// `spec.minMember` (0 when absent or negative: the group is not held).
    pub min_member: usize,
}

impl PodGroupSpec {
    /// Reads a PodGroup object's spec (its JSON, as the watch has it).
    pub fn of(object: &serde_json::Value) -> PodGroupSpec {
        let min_member = object
            .pointer("/spec/minMember")
            .and_then(serde_json::Value::as_i64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        PodGroupSpec { min_member }
    }
}

/// Coscheduling's verdict on a popped member, before its group's run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// The group has `minMember` pods: the run goes ahead with that quorum.
    Pass { min_member: usize },
    /// Held with this FailedScheduling text, until a member pod or the PodGroup is added or changed.
    Held(String),
}

/// Coscheduling's PreFilter (and Permit's `PodGroup not found`) for a member of a group with `known_members`
/// labelled live pods; `num_all_nodes` is the cluster's node count, as in kube-scheduler's FitError.
pub fn pre_filter(
    pod_name: &str,
    pod_group: Option<&PodGroupSpec>,
    known_members: usize,
    num_all_nodes: usize,
) -> Gate {
    let Some(spec) = pod_group else {
        // Upstream passes PreFilter and rejects at Permit (Unschedulable), on the one node the pod was assumed on.
        return Gate::Held("0/1 nodes are available: 1 PodGroup not found.".to_string());
    };
    if known_members < spec.min_member {
        // A PreFilter rejection: kube-scheduler's `0/N nodes are available: <PreFilter message>.`
        return Gate::Held(format!(
            "0/{num_all_nodes} nodes are available: pre-filter pod {pod_name} cannot find enough sibling pods, \
             current pods number: {known_members}, minMember of group: {}.",
            spec.min_member
        ));
    }
    Gate::Pass {
        min_member: spec.min_member,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod(labels: serde_json::Value, workload_ref: Option<serde_json::Value>) -> Pod {
        let mut spec = json!({"containers": [{"name": "c"}]});
        if let Some(reference) = workload_ref {
            spec["workloadRef"] = reference;
        }
        serde_json::from_value(json!({"metadata": {"name": "w-0", "namespace": "ns", "labels": labels}, "spec": spec}))
            .expect("pod")
    }

    #[test]
    fn a_pod_joins_the_pod_group_its_label_names() {
        let group = GroupKey::of(&pod(json!({POD_GROUP_LABEL: "train"}), None)).expect("a member");
        assert_eq!(group.dialect, Dialect::PodGroup);
        assert_eq!(group.to_string(), "ns/train");
        assert_eq!(group.plugin(), COSCHEDULING);
        assert_eq!(GroupKey::of(&pod(json!({POD_GROUP_LABEL: ""}), None)), None);
        assert_eq!(GroupKey::of(&pod(json!({"app": "x"}), None)), None);
    }

    #[test]
    fn a_pod_naming_a_workload_and_a_pod_group_belongs_to_the_workload() {
        let both = pod(
            json!({POD_GROUP_LABEL: "train"}),
            Some(json!({"name": "job", "podGroup": "workers"})),
        );
        let group = GroupKey::of(&both).expect("a member");
        assert_eq!(group.dialect, Dialect::Workload);
        assert_eq!(group.to_string(), "ns/job/workers");
        assert_eq!(group.plugin(), super::super::gang::GANG_SCHEDULING);
    }

    #[test]
    fn the_spec_reads_min_member_and_ignores_what_is_malformed() {
        let spec = |value| PodGroupSpec::of(&value);
        assert_eq!(spec(json!({"spec": {"minMember": 3}})).min_member, 3);
        assert_eq!(spec(json!({"spec": {"minMember": -1}})).min_member, 0);
        assert_eq!(spec(json!({"spec": {"minMember": "3"}})).min_member, 0);
        assert_eq!(spec(json!({})).min_member, 0);
    }

    #[test]
    fn pre_filter_holds_a_short_group_and_a_missing_pod_group_with_upstreams_messages() {
        let group = PodGroupSpec { min_member: 3 };
        assert_eq!(
            pre_filter("w-0", Some(&group), 2, 4),
            Gate::Held(
                "0/4 nodes are available: pre-filter pod w-0 cannot find enough sibling pods, current pods number: 2, \
                 minMember of group: 3."
                    .into()
            )
        );
        assert_eq!(pre_filter("w-0", Some(&group), 3, 4), Gate::Pass { min_member: 3 });
        assert_eq!(
            pre_filter("w-0", None, 3, 4),
            Gate::Held("0/1 nodes are available: 1 PodGroup not found.".into())
        );
        assert_eq!(
            pre_filter("w-0", Some(&PodGroupSpec { min_member: 0 }), 1, 4),
            Gate::Pass { min_member: 0 }
        );
    }
}
