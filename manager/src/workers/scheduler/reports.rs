//! What a pod is told: each distinct failure reported once (a Warning Event and the `PodScheduled` condition), in order, behind the loop.

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use ruleplane_config::scheduler::engine::Nominate;
use tracing::debug;

use super::queue_loop::Loop;
use super::writer::{NotScheduled, Publish};
use super::{PodKey, PodScheduler, SchedulingError};
use crate::events::EventType;
use crate::runner::Failure;

impl Loop {
    /// Counts a failure, and reports it once per distinct message: a Warning Event and, for an unschedulable
    /// pod, the PodScheduled condition.
    pub(super) async fn report(&mut self, key: PodKey, error: SchedulingError) {
        let message = error.to_string();
        let failure = Failure {
            category: error.category(),
            degrades: error.degrades_rule(),
            message: &message,
            same_as: error.report_key(),
        };
        if error.degrades_rule() {
            self.faults.insert(key.clone());
        }
        if self.reported.failed(&key, failure, "pod not scheduled") {
            self.spawn_report(key, error);
        }
    }

    /// Writes a pod's report behind the loop, as the runner wrote reports (the next pod is decided meanwhile), after
    /// the pod's earlier reports and not at all once a newer one is written.
    pub(super) fn spawn_report(&mut self, key: PodKey, error: SchedulingError) {
        let scheduler = self.scheduler.clone();
        let (number, written) = self.report_order.entry(key.clone()).or_default();
        *number += 1;
        let (number, written) = (*number, written.clone());
        self.spawn(async move {
            let mut last = written.lock().await;
            if *last < number {
                scheduler.report_error(&key, &error).await;
                *last = number;
            }
        });
    }
}

impl PodScheduler {
    /// Publishes a scheduling Event (FailedScheduling, the gang Events) through the Event lane, without holding up
    /// the next pod: repeats fold into the first one's series, as kube-scheduler's broadcaster folds them.
    pub(super) fn publish(&self, pod: &Pod, type_: EventType, reason: &str, action: &str, note: String) {
        let report = crate::events::Report {
            type_,
            regarding: pod.object_ref(&()),
            related: None,
            reason: reason.into(),
            action: action.into(),
            note,
        };
        self.writer.publish(report, Publish::Series);
    }

    /// The FailedScheduling Event and, for an unschedulable pod, the PodScheduled condition kube-scheduler sets,
    /// so `kubectl describe pod` tells the story.
    pub(super) async fn report_error(&self, key: &PodKey, error: &SchedulingError) {
        let Some(pod) = self.cache.pods.store.get_typed::<Pod>(Some(&key.namespace), &key.name) else {
            return;
        };
        let message = error.to_string();
        self.publish(
            &pod,
            EventType::Warning,
            "FailedScheduling",
            "Scheduling",
            message.clone(),
        );
        // A failed PreBind is a binding-cycle error: kube-scheduler clears the nomination its expectation set.
        let status = match error {
            SchedulingError::Unschedulable { message, nominate } => NotScheduled {
                reason: "Unschedulable",
                message: message.clone(),
                nominate: nominate.clone(),
            },
            SchedulingError::PreBind(message) | SchedulingError::PodGroup(message) => NotScheduled {
                reason: "SchedulerError",
                message: message.clone(),
                nominate: Nominate::Clear,
            },
            _ => return,
        };
        if let Err(error) = self.writer.set_not_scheduled(key, &status).await {
            debug!(%error, pod = %key.name, "could not set the PodScheduled condition");
        }
    }
}
