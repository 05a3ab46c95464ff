//! The Event lane: Normal Events (a pod scheduled, children created) sent behind the writes they report, from a
//! bounded queue with a few requests in flight, so a burst of bindings or applies is not slowed by its own
//! reports.
//!
//! Why a lane rather than a request per Event as the work happens: on a busy apiserver an Event costs about as
//! much as the binding it reports, and kube-scheduler's own Events are asynchronous too (its broadcaster queues
//! them and drops them when the queue is full). Here the queue holds [`QUEUE_CAPACITY`] Events; beyond that an
//! Event is dropped and counted (`ruleplane_events_total{result="dropped"}`), never blocking the worker.
//! Warnings (render errors, FailedScheduling) keep going through kube-runtime's `Recorder`, whose series
//! aggregation keeps repeated failures to one Event with a count.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::metrics::ResultLabels;

/// Events waiting to be sent before new ones are dropped (about 1 KiB each).
pub const QUEUE_CAPACITY: usize = 10_000;
/// Event requests in flight: few, so bindings and applies (with many in flight) get most of the apiserver in a
/// burst, and the queue drains as soon as they are done.
const IN_FLIGHT: usize = 4;

/// What an Event says; the lane adds who reports it and when.
#[derive(Clone, Debug)]
pub struct Report {
    pub regarding: ObjectReference,
    pub reason: String,
    pub action: String,
    pub note: String,
}

/// A cheap handle to the manager's one lane.
#[derive(Clone)]
pub struct EventLane {
    sender: mpsc::Sender<Event>,
    /// Taken by the first publish, which starts the sender task (a runtime is only sure to exist then).
    receiver: Arc<Mutex<Option<mpsc::Receiver<Event>>>>,
    client: Client,
    controller: String,
    instance: String,
    counts: Family<ResultLabels, Counter>,
    /// Events being sent right now (for the drain at shutdown).
    sending: Arc<AtomicUsize>,
}

impl EventLane {
    /// `counts` is `ruleplane_events_total` by result (`created`, `failed`, `dropped`).
    pub fn new(client: Client, controller: &str, instance: &str, counts: Family<ResultLabels, Counter>) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
        EventLane {
            sender,
            receiver: Arc::new(Mutex::new(Some(receiver))),
            client,
            controller: controller.to_owned(),
            instance: instance.to_owned(),
            counts,
            sending: Arc::default(),
        }
    }

    /// Waits until every queued Event is sent, or `limit` has passed: a stopping manager still reports what it
    /// did in its last moments.
    pub async fn drain(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while (self.sender.capacity() < self.sender.max_capacity() || self.sending.load(Ordering::SeqCst) > 0)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Queues a Normal Event; never waits.
    pub fn publish(&self, report: Report) {
        self.start();
        let event = self.event(report);
        if let Err(error) = self.sender.try_send(event) {
            self.count("dropped");
            debug!(%error, "Event queue full; Event dropped");
        }
    }

    /// The Event as kube-scheduler writes it (events.k8s.io/v1): named after the object and the time, in the
    /// object's namespace (`default` for cluster-scoped objects), reported by this controller and replica.
    fn event(&self, report: Report) -> Event {
        let now = k8s_openapi::jiff::Timestamp::now();
        let name = report.regarding.name.clone().unwrap_or_default();
        let namespace = report
            .regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(report.action),
            reason: Some(report.reason),
            note: Some(report.note),
            type_: Some("Normal".into()),
            regarding: Some(report.regarding),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        }
    }

    fn count(&self, result: &str) {
        self.counts
            .get_or_create(&ResultLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    fn start(&self) {
        let Some(receiver) = self.receiver.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        let lane = self.clone();
        let mut receiver = receiver;
        tokio::spawn(async move {
            futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
                .for_each_concurrent(IN_FLIGHT, |event| {
                    let lane = lane.clone();
                    async move { lane.send(event).await }
                })
                .await;
        });
    }

    async fn send(&self, event: Event) {
        self.sending.fetch_add(1, Ordering::SeqCst);
        self.create(event).await;
        self.sending.fetch_sub(1, Ordering::SeqCst);
    }

    async fn create(&self, event: Event) {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => self.count("created"),
            Err(error) => {
                self.count("failed");
                warn!(%error, "could not create an Event");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(counts: &Family<ResultLabels, Counter>) -> EventLane {
        // A client pointing nowhere: these tests never let the sender task run.
        let client = Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().expect("url"))).expect("client");
        EventLane::new(client, "ruleplane", "replica-1", counts.clone())
    }

    fn report(kind: &str, namespace: Option<&str>) -> Report {
        Report {
            regarding: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some(kind.into()),
                name: Some("web".into()),
                namespace: namespace.map(Into::into),
                uid: Some("u-1".into()),
                ..Default::default()
            },
            reason: "Scheduled".into(),
            action: "Binding".into(),
            note: "Successfully assigned shop/web to node-1".into(),
        }
    }

    #[tokio::test]
    async fn events_are_written_as_kube_scheduler_writes_them() {
        let lane = lane(&Family::default());
        let event = lane.event(report("Pod", Some("shop")));
        assert!(event.metadata.name.as_deref().is_some_and(|n| n.starts_with("web.")));
        assert_eq!(event.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(event.reason.as_deref(), Some("Scheduled"));
        assert_eq!(event.action.as_deref(), Some("Binding"));
        assert_eq!(event.note.as_deref(), Some("Successfully assigned shop/web to node-1"));
        assert_eq!(event.reporting_controller.as_deref(), Some("ruleplane"));
        assert_eq!(event.reporting_instance.as_deref(), Some("replica-1"));
        assert_eq!(event.regarding.and_then(|r| r.uid).as_deref(), Some("u-1"));
        assert!(event.event_time.is_some());
        let cluster_scoped = lane.event(report("Namespace", None));
        assert_eq!(cluster_scoped.metadata.namespace.as_deref(), Some("default"));
    }

    /// At shutdown the queue is sent before the process goes (here every send fails at once: nothing listens).
    #[tokio::test]
    async fn drain_waits_for_the_queue_to_be_sent() {
        let counts = Family::<ResultLabels, Counter>::default();
        let lane = lane(&counts);
        for _ in 0..3 {
            lane.publish(report("Pod", Some("shop")));
        }
        lane.drain(Duration::from_secs(20)).await;
        let failed = counts
            .get_or_create(&ResultLabels {
                result: "failed".into(),
            })
            .get();
        assert_eq!(failed, 3, "all three were tried before drain returned");
    }

    /// A full queue drops and counts instead of making the worker wait.
    #[tokio::test]
    async fn a_full_queue_drops_and_counts_without_waiting() {
        let counts = Family::<ResultLabels, Counter>::default();
        let lane = lane(&counts);
        // The current-thread test runtime does not run the sender task before this loop yields (it never does).
        for _ in 0..QUEUE_CAPACITY + 5 {
            lane.publish(report("Pod", Some("shop")));
        }
        let dropped = counts
            .get_or_create(&ResultLabels {
                result: "dropped".into(),
            })
            .get();
        assert_eq!(dropped, 5);
    }
}
