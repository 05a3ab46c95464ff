//! Carries out a preemption the engine decided, in the background, as kube-scheduler v1.35's async preemption
//! (`prepareCandidateAsync`): lower nominations are cleared; each victim gets the `DisruptionTarget` condition, is
//! deleted and gets a `Preempted` Event.

// kube-scheduler (`framework/preemption/preemption.go`, `PreemptPod`): a victim already being deleted is skipped;
// the condition is patched only when it changes; the deletion uses default options, so the pod's own grace period
// applies, and NotFound is success. Here the deletion also carries the victim's UID as a precondition, so a pod
// recreated under the same name since the decision is never deleted in its place.

use crate::events::EventType;
use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt};
use ruleplane_config::scheduler::engine::Preemption;
use tracing::{debug, info};

use super::writer::Publish;
use super::{PodKey, PodScheduler};

/// The condition type, reason and message kube-scheduler writes on a victim.
pub(super) const DISRUPTION_TARGET: &str = "DisruptionTarget";
pub(super) const PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

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
    /// The victims still to evict, as the cache has them now: a victim gone, replaced by another pod of the same
    /// name, or already being deleted is left out (kube-scheduler sends no second deletion). None left: the
    /// preemption has nothing to carry out, and kube-scheduler starts no background work for it.
    pub(super) fn victims_to_evict(&self, preemption: &Preemption) -> Vec<Pod> {
        preemption
            .victims
            .iter()
            .filter_map(|victim| {
                let pod = self
                    .cache
                    .pods
                    .store
                    .get_typed::<Pod>(Some(&victim.namespace), &victim.name)?;
                // The decision names the pod by UID: a different pod of that name is not the victim.
                let same = pod.metadata.uid.as_deref() == Some(victim.key.as_str());
                (same && pod.metadata.deletion_timestamp.is_none()).then_some(pod)
            })
            .collect()
    }

    /// Carries out a preemption in the background, as kube-scheduler v1.35's `prepareCandidateAsync`: the lower
    /// nominations on the node are cleared, every victim but the last is evicted concurrently, then the last.
    /// A victim gone meanwhile is skipped; the first other API error is returned once all were tried.
    pub(super) async fn preempt(
        &self,
        preemptor: &Pod,
        preemption: &Preemption,
        victims: Vec<Pod>,
    ) -> Result<(), String> {
        self.clear_lower_nominations(preemption).await;
        let message = disruption_message(preemptor);
        let Some((last, others)) = victims.split_last() else {
            return Ok(());
        };
        let evictions = others
            .iter()
            .map(|victim| self.evict(victim, preemptor, &preemption.node, &message));
        let mut errors: Vec<String> = futures::future::join_all(evictions)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        if let Err(error) = self.evict(last, preemptor, &preemption.node, &message).await {
            errors.push(error);
        }
        match errors.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// One victim: the `DisruptionTarget` condition (unless already so), the deletion with the victim's UID as a
    /// precondition, and the `Preempted` Event. Gone (or the name another pod's now) is success.
    async fn evict(&self, pod: &Pod, preemptor: &Pod, node: &str, message: &str) -> Result<(), String> {
        let name = pod.name_any();
        let namespace = pod.namespace().unwrap_or_default();
        if !has_condition(pod, message) {
            match self.writer.set_disruption_target(pod, message).await {
                Ok(()) => {}
                Err(error) if is_not_found(&error) => return Ok(()),
                Err(error) => return Err(format!("DisruptionTarget on {name}: {error}")),
            }
        }
        match self.writer.delete_victim(pod).await {
            Ok(()) => {}
            // Gone, or the UID precondition failed (the name is another pod's now): nothing to evict.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => return Ok(()),
            Err(error) => return Err(format!("deleting {name}: {error}")),
        }
        info!(victim = %name, %namespace, preemptor = %preemptor.name_any(), %node, "preempted");
        self.publish_preempted(pod, preemptor, node);
        Ok(())
    }

    /// Clears `status.nominatedNodeName` on the lower-priority pods nominated to the node; kube-scheduler logs a
    /// failure and goes on: the nomination is advisory.
    async fn clear_lower_nominations(&self, preemption: &Preemption) {
        for nominated in &preemption.lower_nominated_to_clear {
            let key = PodKey {
                namespace: nominated.namespace.clone(),
                name: nominated.name.clone(),
            };
            match self.writer.set_nominated_node(&key, None).await {
                Ok(()) => {}
                Err(error) if is_not_found(&error) => {}
                Err(error) => debug!(%error, pod = %nominated.name, "could not clear a lower nomination"),
            }
        }
    }

    /// kube-scheduler's Normal `Preempted` Event on the victim, related to the preemptor, naming it by UID.
    fn publish_preempted(&self, victim: &Pod, preemptor: &Pod, node: &str) {
        let report = crate::events::Report {
            type_: EventType::Normal,
            regarding: victim.object_ref(&()),
            related: Some(preemptor.object_ref(&())),
            reason: "Preempted".into(),
            action: "Preempting".into(),
            note: format!(
                "Preempted by pod {} on node {node}",
                preemptor.metadata.uid.as_deref().unwrap_or_default()
            ),
        };
        self.writer.publish(report, Publish::Series);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
