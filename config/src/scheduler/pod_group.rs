//! Which gang a pod belongs to, in either dialect: the Workload API's reference or Coscheduling's label.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::workload_api::WorkloadApi;

/// The plugin's name (`names.GangScheduling`): the name a policy disables it by, and the rejecting plugin of a
/// gated or rejected member.
pub const GANG_SCHEDULING: &str = "GangScheduling";

/// How a pod names its group: the two dialects share one gang mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dialect {
    /// kube-scheduler's Workload API (`spec.workloadRef` in v1.35, `spec.schedulingGroup` since v1.36: see
    /// `super::workload_api`), plugin GangScheduling.
    Workload,
    /// scheduler-plugins' Coscheduling (label `scheduling.x-k8s.io/pod-group`, a `PodGroup`), plugin Coscheduling
    /// (`super::cosched`).
    PodGroup,
}

/// One instance of a pod group (`podGroupKey`): the pods that are gang-scheduled together.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    pub dialect: Dialect,
    pub namespace: String,
    /// The object holding the group's policy: the Workload's name (v1.35), or the PodGroup's name (the Workload
    /// API since v1.36, and the Coscheduling dialect).
    pub workload: String,
    /// The Workload's pod group (v1.35); empty when the object is the PodGroup itself.
    pub pod_group: String,
    /// `podGroupReplicaKey`, empty when not set: each replica is its own gang.
    pub replica_key: String,
}

impl GroupKey {
    /// The group a pod names in `api` (its `spec` as JSON), if it names one. A pod naming both a Workload API group
    /// and a PodGroup belongs to the former (the in-tree API wins; its label is then ignored: `docs/scheduler.md`,
    /// Coscheduling).
    pub fn of(
        api: WorkloadApi,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
        spec: Option<&Value>,
    ) -> Option<GroupKey> {
        spec.and_then(|spec| api.group_of(namespace, spec))
            .or_else(|| group_of(namespace, labels))
    }

    /// The plugin that gang-schedules the group: the name a policy disables it by and the rejecting plugin.
    pub fn plugin(&self) -> &'static str {
        match self.dialect {
            Dialect::Workload => GANG_SCHEDULING,
            Dialect::PodGroup => COSCHEDULING,
        }
    }
}

impl fmt::Display for GroupKey {
    /// `<namespace>/<workload>/<podGroup>`, with `/<replicaKey>` when the pod names one; a PodGroup (of either
    /// dialect) is `<namespace>/<name>` (its full name).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pod_group.is_empty() {
            return write!(f, "{}/{}", self.namespace, self.workload);
        }
        write!(f, "{}/{}/{}", self.namespace, self.workload, self.pod_group)?;
        if !self.replica_key.is_empty() {
            write!(f, "/{}", self.replica_key)?;
        }
        Ok(())
    }
}

/// The plugin's name (`coscheduling.Name`): the name a policy disables it by, and the rejecting plugin of a
/// member held or rejected with its group.
pub const COSCHEDULING: &str = "Coscheduling";

/// The label a pod names its PodGroup by (`v1alpha1.PodGroupLabel`).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

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
