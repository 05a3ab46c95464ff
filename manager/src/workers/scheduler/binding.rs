//! The binding cycle of an assumed pod (kube-scheduler's `bindingCycle`): PreBind, `pods/binding`, the `Scheduled` Event; a failure unreserves and forgets the assumption.

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt};
use ruleplane_config::scheduler::queue::Failure;
use tokio::sync::mpsc;

use super::writer::Publish;
use super::{Done, PodKey, PodScheduler, SchedulingError};
use crate::events::EventType;
use crate::metrics::PolicyOnlyLabels;

impl PodScheduler {
    /// Apply and report for an assumed pod: the binding (a pod already bound elsewhere is a conflict, not an
    /// error; a failed binding forgets the pod) and the `Scheduled` Event. Returns what to tell the loop.
    /// `done` hears when the task gives its binding slot back, at PreBind's wait for the volumes.
    pub(super) async fn bind_assumed(
        &self,
        key: PodKey,
        pod: &Pod,
        node: &str,
        done: &mpsc::UnboundedSender<Done>,
    ) -> Done {
        // Apply: VolumeBinding's PreBind, then the binding.
        let release = || {
            let _ = done.send(Done::Released(tokio::task::id()));
        };
        if let Err(message) = self.pre_bind_volumes(pod, node, release).await {
            self.cache.forget(pod).await;
            self.count("error");
            return Done::Failed {
                key,
                failure: Failure::Error,
                prepared: None,
                seen: 0,
                error: Box::new(SchedulingError::PreBind(message)),
                preempting: false,
            };
        }
        let started = Instant::now();
        let result = self.writer.bind(pod, node).await;
        let labels = PolicyOnlyLabels {
            policy: self.policy.metadata.name.clone(),
        };
        self.ctx
            .metrics
            .binding_duration
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(()) => {}
            // Already bound (by another replica before a takeover, or another scheduler): not an error; the
            // watch accounts the pod where it really is.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                self.cache.forget(pod).await;
                return Done::Bound { key, conflict: true };
            }
            Err(source) => {
                self.cache.forget(pod).await;
                self.count("error");
                return Done::Failed {
                    key,
                    failure: Failure::Error,
                    prepared: None,
                    seen: 0,
                    error: Box::new(SchedulingError::Binding {
                        node: node.to_string(),
                        source,
                    }),
                    preempting: false,
                };
            }
        }
        // Report.
        self.count("scheduled");
        self.publish_scheduled(pod, node);
        Done::Bound { key, conflict: false }
    }

    /// The `Scheduled` Event, through the Event lane: unique per pod (no series to keep), and sent behind the
    /// bindings so a burst binds first.
    pub(super) fn publish_scheduled(&self, pod: &Pod, node: &str) {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let report = crate::events::Report {
            type_: EventType::Normal,
            regarding: pod.object_ref(&()),
            related: None,
            reason: "Scheduled".into(),
            action: "Binding".into(),
            note: format!("Successfully assigned {namespace}/{name} to {node}"),
        };
        self.writer.publish(report, Publish::Once);
    }
}
