//! The PodGroup condition a pod-group cycle ends with (v1.36+), written as kube-scheduler writes it (decided by `ruleplane_config::scheduler::pod_group_cycle`).

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use ruleplane_config::scheduler::gang::{GroupKey, WorkloadApi};
use ruleplane_config::scheduler::pod_group_cycle::{Condition, GroupCondition, set_condition};
use serde_json::json;
use tracing::{debug, warn};

use super::PodScheduler;

impl PodScheduler {
    /// Sets `condition` on the group's PodGroup, in the background: read now (its status and generation), set as
    /// `updatePodGroupCondition` sets it, and patched with the read `resourceVersion` as a precondition. A conflict
    /// or a PodGroup gone is left to the next cycle, as kube-scheduler leaves a failed patch.
    pub(super) fn set_pod_group_condition(&self, group: &GroupKey, condition: GroupCondition) {
        let api = WorkloadApi::of(self.ctx.kubernetes_version);
        let Some((group_name, version)) = api.api_version().split_once('/') else {
            return;
        };
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group_name, version, api.policy_kind()));
        let pod_groups: Api<DynamicObject> = Api::namespaced_with(self.ctx.client.clone(), &group.namespace, &resource);
        let name = group.workload.clone();
        tokio::spawn(async move {
            let object = match pod_groups.get_opt(&name).await {
                Ok(Some(object)) => object,
                Ok(None) => return,
                Err(error) => {
                    warn!(%error, pod_group = %name, "could not read the PodGroup to set its condition");
                    return;
                }
            };
            let existing: Vec<Condition> = object
                .data
                .pointer("/status/conditions")
                .cloned()
                .and_then(|conditions| serde_json::from_value(conditions).ok())
                .unwrap_or_default();
            let now = crate::workers::now();
            let Some(conditions) = set_condition(&existing, &condition, object.metadata.generation, &now) else {
                return;
            };
            let patch = json!({
                "metadata": {"resourceVersion": object.metadata.resource_version},
                "status": {"conditions": conditions},
            });
            if let Err(error) = pod_groups
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                debug!(%error, pod_group = %name, "the PodGroup's condition was not written; the next cycle writes it");
            }
        });
    }
}
