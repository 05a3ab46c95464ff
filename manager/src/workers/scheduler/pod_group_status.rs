//! The PodGroup condition a pod-group cycle ends with (v1.36+), written as kube-scheduler writes it (decided by `ruleplane_config::scheduler::pod_group_cycle`).

use ruleplane_config::scheduler::gang::GroupKey;
use ruleplane_config::scheduler::pod_group_cycle::GroupCondition;
use tracing::debug;

use super::PodScheduler;

impl PodScheduler {
    /// Sets `condition` on the group's PodGroup, in the background: read now (its status and generation), set as
    /// `updatePodGroupCondition` sets it, and patched with the read `resourceVersion` as a precondition. A conflict
    /// or a PodGroup gone is left to the next cycle, as kube-scheduler leaves a failed patch.
    pub(super) fn set_pod_group_condition(&self, group: &GroupKey, condition: GroupCondition) {
        let writer = self.writer.clone();
        let group = group.clone();
        tokio::spawn(async move {
            if let Err(error) = writer.set_pod_group_condition(&group, &condition).await {
                debug!(%error, pod_group = %group.workload, "the PodGroup's condition was not written; the next cycle writes it");
            }
        });
    }
}
