//! The scheduling cycle of one pod (kube-scheduler's `schedulingCycle`): fetched from the watch, decided and assumed on the shared cache, and its outcome turned into a binding, a failure, a nomination or a preemption.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ruleplane_config::scheduler::engine::{Nominate, Outcome, Preemption, ScheduleError};
use ruleplane_config::scheduler::queue::Failure;
use tokio::sync::mpsc;

use super::{Done, PodKey, PodScheduler, SchedulingError};

impl PodScheduler {
    /// Fetch: the pod as the watch has it, `None` when it was bound meanwhile, deleted or is no longer ours.
    /// `queued` (the queue's copy) is used when it is current: most pods are attempted in the version they were
    /// queued in; else the pod is parsed from the cached text.
    pub(super) fn pending_pod(&self, key: &PodKey, queued: Option<Arc<Pod>>) -> Option<Arc<Pod>> {
        // Straight from the cached text into a pod: one parse (a JSON tree first, then the pod, was two).
        let pod = self
            .cache
            .pods
            .store
            .get_typed::<Pod>(Some(&key.namespace), &key.name)?;
        let spec = pod.spec.as_ref();
        if !self.is_pending(
            spec.and_then(|s| s.scheduler_name.as_deref()),
            spec.and_then(|s| s.node_name.as_deref()),
            pod.metadata.deletion_timestamp.is_some(),
        ) {
            return None;
        }
        match queued {
            Some(queued) if queued.metadata.resource_version == pod.metadata.resource_version => Some(queued),
            _ => Some(Arc::new(pod)),
        }
    }

    /// One pod's scheduling cycle and, when it is assumed, its binding; each step's end is sent to the loop.
    /// `queued` is the pod as the queue holds it, used as it is when the watch still has that version.
    /// `without_pod_group`: the pod names a PodGroup that does not exist, and Coscheduling decides its cycle.
    pub(super) async fn attempt(
        self: &Arc<Self>,
        key: PodKey,
        queued: Option<Arc<Pod>>,
        without_pod_group: bool,
        done: mpsc::UnboundedSender<Done>,
    ) {
        let send = |message: Done| {
            // Only fails once the loop has stopped, when nothing is scheduled any more.
            let _ = done.send(message);
        };
        let Some(pod) = self.pending_pod(&key, queued) else {
            return send(Done::Gone(key));
        };
        // Decide (and assume) on the shared cache.
        let cycle = match self.cache.schedule(&self.engine, &self.hints, &pod).await {
            Ok(cycle) => cycle,
            Err(error) => return send(self.invalid(key, error)),
        };
        if without_pod_group
            && matches!(
                cycle.decision.outcome,
                Outcome::Scheduled { .. } | Outcome::Unschedulable { .. }
            )
        {
            return send(self.without_pod_group(key, &pod, cycle).await);
        }
        // kube-scheduler's full FailedScheduling text: the FitError and the PostFilter chain's part.
        let message = cycle.decision.event_message().unwrap_or_default();
        let (failure, error, preemption) = match self.verdict(cycle.decision.outcome, message) {
            Verdict::Scheduled(node) => {
                send(Done::Assumed(key.clone()));
                return send(self.bind_assumed(key, &pod, &node, &done).await);
            }
            // The queue holds gated pods back; one gated since it was queued waits for its gates to go,
            // unreported, as kube-scheduler never attempts it.
            Verdict::Gated => return send(Done::Gated(key)),
            Verdict::Failed {
                failure,
                error,
                preemption,
            } => (failure, error, preemption),
        };
        let carried = self.to_carry_out(preemption);
        send(Done::Failed {
            key: key.clone(),
            failure,
            prepared: cycle.prepared,
            seen: cycle.seen,
            error: Box::new(error),
            preempting: carried.is_some(),
        });
        // kube-scheduler v1.35's async preemption: the cycle ends now, with the pod nominated; the victims are
        // evicted in the background while DefaultPreemption's PreEnqueue holds the pod. A victim's deletion is the
        // assigned-pod-delete event the queueing hints retry it on.
        if let Some((preemption, victims)) = carried {
            self.spawn_preemption(key, pod, preemption, victims, done.clone());
        }
    }

    /// A pod the engine cannot evaluate (an invalid quantity): an error until the pod changes.
    pub(super) fn invalid(&self, key: PodKey, error: ScheduleError) -> Done {
        self.count("error");
        Done::Failed {
            key,
            failure: Failure::Error,
            prepared: None,
            seen: 0,
            error: Box::new(error.into()),
            preempting: false,
        }
    }

    /// [`verdict`], counted in the attempts metric.
    pub(super) fn verdict(&self, outcome: Outcome, message: String) -> Verdict {
        let verdict = verdict(outcome, message);
        match &verdict {
            Verdict::Failed {
                failure: Failure::Error,
                ..
            } => self.count("error"),
            Verdict::Failed { .. } => self.count("unschedulable"),
            Verdict::Scheduled(_) | Verdict::Gated => {}
        }
        verdict
    }

    /// The preemption a failed cycle's PostFilter chose, with the victims still to evict; `None` when there is
    /// none or nothing is left to evict (kube-scheduler then starts no background work).
    pub(super) fn to_carry_out(&self, preemption: Option<Preemption>) -> Option<(Preemption, Vec<Pod>)> {
        let preemption = preemption?;
        let victims = self.victims_to_evict(&preemption);
        (!victims.is_empty()).then_some((preemption, victims))
    }

    /// Evicts the victims in the background; the loop hears [`Done::Preempted`] when every deletion was sent.
    pub(super) fn spawn_preemption(
        self: &Arc<Self>,
        key: PodKey,
        pod: Arc<Pod>,
        preemption: Preemption,
        victims: Vec<Pod>,
        done: mpsc::UnboundedSender<Done>,
    ) {
        let scheduler = self.clone();
        tokio::spawn(async move {
            let result = scheduler.preempt(&pod, &preemption, victims).await;
            let _ = done.send(Done::Preempted {
                key,
                error: result.err(),
            });
        });
    }
}

/// What a scheduling cycle's outcome comes to, for a pod alone and for a gang member alike.
#[derive(Debug)]
pub(super) enum Verdict {
    /// A node was chosen; the pod is assumed there.
    Scheduled(String),
    /// Gated since it was queued: it waits for its gates to go, unreported.
    Gated,
    /// Not placed: how the queue takes it back, what it is told (its nomination included), and the preemption
    /// its PostFilter chain chose, if any.
    Failed {
        failure: Failure,
        error: SchedulingError,
        preemption: Option<Preemption>,
    },
}

/// The engine's outcome as the queue, the report and the preemption take it; `message` is the FailedScheduling
/// text of an unschedulable pod.
pub(super) fn verdict(outcome: Outcome, message: String) -> Verdict {
    match outcome {
        Outcome::Scheduled { node } => Verdict::Scheduled(node.to_string()),
        Outcome::Unschedulable {
            plugins, post_filter, ..
        } => {
            let (nominate, preemption) = match post_filter {
                Some(post_filter) => (post_filter.nominate, post_filter.preemption),
                None => (Nominate::Leave, None),
            };
            Verdict::Failed {
                failure: Failure::Unschedulable {
                    plugins,
                    pending: BTreeSet::new(),
                },
                error: SchedulingError::Unschedulable { message, nominate },
                preemption,
            }
        }
        Outcome::Gated { .. } => Verdict::Gated,
        Outcome::Error { message } => Verdict::Failed {
            failure: Failure::Error,
            error: SchedulingError::Engine(message),
            preemption: None,
        },
    }
}
