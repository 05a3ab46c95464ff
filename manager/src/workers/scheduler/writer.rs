//! Where the scheduler's writes go: the apiserver ([`ApiWriter`]), or a recording in the worker's unit tests.

// The worker decides nothing here: every method is one write kube-scheduler makes (binding, a pod's status, a
// victim's condition and deletion, PreBind's volume updates, a PodGroup's condition, an Event), and its caller
// decides what an error means. A plugin with API writes at PreBind (DynamicResources' claim allocations) adds its
// writes here, and Unreserve's API work beside them.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use ruleplane_config::KubernetesVersion;
use ruleplane_config::scheduler::engine::Nominate;
use ruleplane_config::scheduler::gang::{GroupKey, WorkloadApi};
use ruleplane_config::scheduler::pod_group_cycle::{Condition, GroupCondition, set_condition};
use serde_json::json;

use super::PodKey;
use crate::events::{EventLane, Report};

/// One write's answer: the apiserver's error as it came.
pub(super) type Write<'a, T> = BoxFuture<'a, Result<T, kube::Error>>;

/// The `PodScheduled=False` condition kube-scheduler sets on a pod it did not bind, with what becomes of the pod's
/// `status.nominatedNodeName` (written in the same status patch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct NotScheduled {
    /// `Unschedulable`, or `SchedulerError` for a failed binding cycle.
    pub reason: &'static str,
    pub message: String,
    pub nominate: Nominate,
}

/// How an Event is sent: once (`Scheduled` is unique per pod), or folded into the series of its repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Publish {
    Once,
    Series,
}

/// The scheduler's writes. The apiserver's in [`ApiWriter`]; a test writer records them.
pub(super) trait PodWriter: Send + Sync {
    /// `pods/binding`: the pod (by its UID) to `node`.
    fn bind<'a>(&'a self, pod: &'a Pod, node: &'a str) -> Write<'a, ()>;

    /// The pod's `PodScheduled=False` condition and its nomination, in one strategic-merge status patch.
    fn set_not_scheduled<'a>(&'a self, pod: &'a PodKey, status: &'a NotScheduled) -> Write<'a, ()>;

    /// The pod's `status.nominatedNodeName` set (`Some`) or cleared (`None`), in a merge status patch.
    fn set_nominated_node<'a>(&'a self, pod: &'a PodKey, node: Option<&'a str>) -> Write<'a, ()>;

    /// A victim's `DisruptionTarget=True` condition with kube-scheduler's reason and `message`.
    fn set_disruption_target<'a>(&'a self, victim: &'a Pod, message: &'a str) -> Write<'a, ()>;

    /// A victim's deletion, only while its UID is the one decided on (a pod recreated under its name is spared).
    fn delete_victim<'a>(&'a self, victim: &'a Pod) -> Write<'a, ()>;

    /// VolumeBinding's PreBind: a PersistentVolume updated as planned; answers it as stored.
    fn replace_volume<'a>(&'a self, volume: &'a PersistentVolume) -> Write<'a, PersistentVolume>;

    /// VolumeBinding's PreBind: a claim to provision updated as planned; answers it as stored.
    fn replace_claim<'a>(&'a self, claim: &'a PersistentVolumeClaim) -> Write<'a, PersistentVolumeClaim>;

    /// `condition` set on the group's PodGroup as `updatePodGroupCondition` sets it, conditional on the version
    /// read; a PodGroup gone or a condition already so writes nothing.
    fn set_pod_group_condition<'a>(&'a self, group: &'a GroupKey, condition: &'a GroupCondition) -> Write<'a, ()>;

    /// An Event through the Event lane (never waits).
    fn publish(&self, report: Report, how: Publish);
}

/// The apiserver, through the manager's client and Event lane.
pub(super) struct ApiWriter {
    pub client: Client,
    pub events: EventLane,
    pub version: KubernetesVersion,
}

impl ApiWriter {
    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl PodWriter for ApiWriter {
    fn bind<'a>(&'a self, pod: &'a Pod, node: &'a str) -> Write<'a, ()> {
        Box::pin(async move {
            let namespace = pod.namespace().unwrap_or_default();
            let name = pod.name_any();
            let binding = json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": pod.metadata.uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            });
            self.pods(&namespace)
                .create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
                .await
                .map(|_| ())
        })
    }

    fn set_not_scheduled<'a>(&'a self, pod: &'a PodKey, status: &'a NotScheduled) -> Write<'a, ()> {
        Box::pin(async move {
            let mut patch = json!({"status": {"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": status.reason, "message": status.message,
                "lastTransitionTime": crate::workers::now(),
            }]}});
            match &status.nominate {
                Nominate::Leave => {}
                Nominate::Set(node) => patch["status"]["nominatedNodeName"] = json!(&**node),
                Nominate::Clear => patch["status"]["nominatedNodeName"] = serde_json::Value::Null,
            }
            self.pods(&pod.namespace)
                .patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
                .map(|_| ())
        })
    }

    fn set_nominated_node<'a>(&'a self, pod: &'a PodKey, node: Option<&'a str>) -> Write<'a, ()> {
        Box::pin(async move {
            let patch = json!({"status": {"nominatedNodeName": node}});
            self.pods(&pod.namespace)
                .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        })
    }

    fn set_disruption_target<'a>(&'a self, victim: &'a Pod, message: &'a str) -> Write<'a, ()> {
        Box::pin(async move {
            let patch = json!({"status": {"conditions": [{
                "type": super::preempt::DISRUPTION_TARGET, "status": "True",
                "reason": super::preempt::PREEMPTION_BY_SCHEDULER,
                "message": message, "lastTransitionTime": crate::workers::now(),
            }]}});
            self.pods(&victim.namespace().unwrap_or_default())
                .patch_status(&victim.name_any(), &PatchParams::default(), &Patch::Strategic(&patch))
                .await
                .map(|_| ())
        })
    }

    fn delete_victim<'a>(&'a self, victim: &'a Pod) -> Write<'a, ()> {
        Box::pin(async move {
            let params = DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    uid: Some(victim.metadata.uid.clone().unwrap_or_default()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            self.pods(&victim.namespace().unwrap_or_default())
                .delete(&victim.name_any(), &params)
                .await
                .map(|_| ())
        })
    }

    fn replace_volume<'a>(&'a self, volume: &'a PersistentVolume) -> Write<'a, PersistentVolume> {
        Box::pin(async move {
            let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
            volumes
                .replace(&volume.name_any(), &PostParams::default(), volume)
                .await
        })
    }

    fn replace_claim<'a>(&'a self, claim: &'a PersistentVolumeClaim) -> Write<'a, PersistentVolumeClaim> {
        Box::pin(async move {
            let claims: Api<PersistentVolumeClaim> =
                Api::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default());
            claims.replace(&claim.name_any(), &PostParams::default(), claim).await
        })
    }

    fn set_pod_group_condition<'a>(&'a self, group: &'a GroupKey, condition: &'a GroupCondition) -> Write<'a, ()> {
        Box::pin(async move {
            let api = WorkloadApi::of(self.version);
            let Some((group_name, version)) = api.api_version().split_once('/') else {
                return Ok(());
            };
            let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group_name, version, api.policy_kind()));
            let pod_groups: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &group.namespace, &resource);
            let Some(object) = pod_groups.get_opt(&group.workload).await? else {
                return Ok(());
            };
            let existing: Vec<Condition> = object
                .data
                .pointer("/status/conditions")
                .cloned()
                .and_then(|conditions| serde_json::from_value(conditions).ok())
                .unwrap_or_default();
            let now = crate::workers::now();
            let Some(conditions) = set_condition(&existing, condition, object.metadata.generation, &now) else {
                return Ok(());
            };
            let patch = json!({
                "metadata": {"resourceVersion": object.metadata.resource_version},
                "status": {"conditions": conditions},
            });
            pod_groups
                .patch_status(&group.workload, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        })
    }

    fn publish(&self, report: Report, how: Publish) {
        match how {
            Publish::Once => self.events.publish(report),
            Publish::Series => self.events.publish_series(report),
        }
    }
}
