//! Carries out a preemption the engine decided, as kube-scheduler v1.35's `prepareCandidate` does: each victim
//! gets the `DisruptionTarget` condition, is deleted and gets a `Preempted` Event; lower nominations are cleared.

// kube-scheduler (`framework/preemption/preemption.go`, `PreemptPod`): a victim already being deleted is skipped;
// the condition is patched only when it changes; the deletion uses default options, so the pod's own grace period
// applies, and NotFound is success. Here the deletion also carries the victim's UID as a precondition, so a pod
// recreated under the same name since the decision is never deleted in its place.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use ruleplane_config::scheduler::engine::Preemption;
use serde_json::json;
use tracing::{debug, info, warn};

use super::PodScheduler;

/// The condition type, reason and message kube-scheduler writes on a victim.
const DISRUPTION_TARGET: &str = "DisruptionTarget";
const PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// The `DisruptionTarget` message: `<preemptor's schedulerName>: preempting to accommodate a higher priority pod`.
pub(super) fn disruption_message(preemptor: &Pod) -> String {
    let scheduler = preemptor
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or_default();
    format!("{scheduler}: preempting to accommodate a higher priority pod")
}

/// Whether the victim already has the condition as kube-scheduler would write it (then it is not patched again).
fn has_condition(victim: &Pod, message: &str) -> bool {
    victim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.type_ == DISRUPTION_TARGET
                    && c.status == "True"
                    && c.reason.as_deref() == Some(PREEMPTION_BY_SCHEDULER)
                    && c.message.as_deref() == Some(message)
            })
        })
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

impl PodScheduler {
    /// Evicts the victims of `preemption` for `preemptor` and clears the lower nominations on its node. A victim
    /// gone (or replaced by another pod of the same name) meanwhile is skipped; any other API error ends the
    /// preemption with that error, as kube-scheduler's synchronous preemption does.
    pub(super) async fn preempt(&self, preemptor: &Pod, preemption: &Preemption) -> Result<(), String> {
        let message = disruption_message(preemptor);
        for victim in &preemption.victims {
            let Some(pod) = self
                .cache
                .pods
                .store
                .get_typed::<Pod>(Some(&victim.namespace), &victim.name)
            else {
                continue;
            };
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            // The decision names the pod by UID: a different pod of that name is not the victim.
            if uid != victim.key || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &victim.namespace);
            if !has_condition(&pod, &message) {
                let patch = json!({"status": {"conditions": [{
                    "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
                    "message": message, "lastTransitionTime": crate::workers::now(),
                }]}});
                match api
                    .patch_status(&victim.name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    Ok(_) => {}
                    Err(error) if is_not_found(&error) => continue,
                    Err(error) => return Err(format!("DisruptionTarget on {}: {error}", victim.name)),
                }
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&victim.name, &params).await {
                Ok(_) => {}
                // Gone, or the UID precondition failed (the name is another pod's now): nothing to evict.
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => continue,
                Err(error) => return Err(format!("deleting {}: {error}", victim.name)),
            }
            info!(
                victim = %victim.name, namespace = %victim.namespace, preemptor = %preemptor.name_any(),
                node = %preemption.node, "preempted"
            );
            self.publish_preempted(&pod, preemptor, &preemption.node);
        }
        for nominated in &preemption.lower_nominated_to_clear {
            let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &nominated.namespace);
            let patch = json!({"status": {"nominatedNodeName": null}});
            match api
                .patch_status(&nominated.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(error) if is_not_found(&error) => {}
                Err(error) => {
                    // kube-scheduler logs this and goes on: the nomination is advisory.
                    debug!(%error, pod = %nominated.name, "could not clear a lower nomination");
                }
            }
        }
        Ok(())
    }

    /// kube-scheduler's Normal `Preempted` Event on the victim, related to the preemptor, naming it by UID.
    fn publish_preempted(&self, victim: &Pod, preemptor: &Pod, node: &str) {
        let event = Event {
            type_: EventType::Normal,
            reason: "Preempted".into(),
            note: Some(format!(
                "Preempted by pod {} on node {node}",
                preemptor.metadata.uid.as_deref().unwrap_or_default()
            )),
            action: "Preempting".into(),
            secondary: Some(preemptor.object_ref(&())),
        };
        let recorder = self.ctx.recorder.clone();
        let regarding = victim.object_ref(&());
        tokio::spawn(async move {
            if let Err(error) = recorder.publish(&event, &regarding).await {
                warn!(%error, "could not publish an Event");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disruption_message_names_the_preemptors_scheduler() {
        let preemptor: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"}, "spec": {"schedulerName": "batch", "containers": []}
        }))
        .expect("pod");
        assert_eq!(
            disruption_message(&preemptor),
            "batch: preempting to accommodate a higher priority pod"
        );
    }
}
