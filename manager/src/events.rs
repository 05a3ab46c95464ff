//! The Event lane: Events (a pod scheduled or failing to be, victims preempted, children created) sent behind the
//! writes they report, from a bounded queue with a few requests in flight, so a burst of bindings or applies is not
//! slowed by its own reports.
//!
//! Why a lane rather than a request per Event as the work happens: on a busy apiserver an Event costs about as
//! much as the binding it reports, and kube-scheduler's own Events are asynchronous too (its broadcaster queues
//! them and drops them when the queue is full). Here the queue holds [`QUEUE_CAPACITY`] Events; beyond that an
//! Event is dropped and counted (`ruleplane_events_total{result="dropped"}`), never blocking the worker.
//! Reports that repeat (FailedScheduling, Preempted, the gang Events) go through [`EventLane::publish_series`]: a
//! repeat folds into the first Event's `series`, as client-go's broadcaster (kube-scheduler's) and kube-runtime's
//! `Recorder` fold them. The lane keeps that cache itself, looked up by key, rather than through the `Recorder`,
//! whose every publish scans its whole cache under a write lock and spawns a task.
//! The Reconciler's Warnings still go through the `Recorder`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
pub use kube::runtime::events::EventType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::metrics::ResultLabels;

/// Events waiting to be sent before new ones are dropped (about 1 KiB each).
pub const QUEUE_CAPACITY: usize = 10_000;
/// Event requests in flight: few, so bindings and applies (with many in flight) get most of the apiserver in a
/// burst, and the queue drains as soon as they are done.
const IN_FLIGHT: usize = 4;
/// How long after its last repeat a series is remembered (client-go's and kube-runtime's six minutes): a repeat
/// later than that starts a new Event.
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);
/// How often the series cache forgets series older than [`SERIES_TTL`] (at a publish, never per publish).
const SERIES_SWEEP: Duration = Duration::from_secs(60);
/// A series' first Event may still be in flight when its repeat is sent: the repeat waits this long and tries once
/// more.
const SERIES_RETRY: Duration = Duration::from_millis(250);

/// What an Event says; the lane adds who reports it and when.
#[derive(Clone, Debug)]
pub struct Report {
    pub type_: EventType,
    pub regarding: ObjectReference,
    /// The second object involved (a preemptor for its victim's `Preempted`).
    pub related: Option<ObjectReference>,
    pub reason: String,
    pub action: String,
    pub note: String,
}

/// What the sender task sends.
#[derive(Debug)]
enum Send {
    Create(Box<Event>),
    /// A repeat: the series of the Event `name` now counts `count` (client-go's `series` patch).
    Repeat {
        namespace: String,
        name: String,
        count: i32,
        at: k8s_openapi::jiff::Timestamp,
    },
}

/// What makes two reports the same Event (client-go's `getKey`: everything but the note and the time).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    warning: bool,
    action: String,
    reason: String,
    regarding: [Option<String>; 4],
    related: Option<[Option<String>; 4]>,
}

fn reference_key(reference: &ObjectReference) -> [Option<String>; 4] {
    [
        reference.kind.clone(),
        reference.namespace.clone(),
        reference.name.clone(),
        reference.uid.clone(),
    ]
}

impl SeriesKey {
    fn of(report: &Report) -> SeriesKey {
        SeriesKey {
            warning: report.type_ == EventType::Warning,
            action: report.action.clone(),
            reason: report.reason.clone(),
            regarding: reference_key(&report.regarding),
            related: report.related.as_ref().map(reference_key),
        }
    }
}

/// The Event a series folds into.
#[derive(Debug)]
struct Recorded {
    namespace: String,
    name: String,
    count: i32,
    last: Instant,
}

/// What a report is for the series cache.
#[derive(Debug, PartialEq, Eq)]
enum Observed {
    /// Not seen within [`SERIES_TTL`]: a new Event.
    First,
    /// The `count`th observation of the Event `name`.
    Repeat {
        namespace: String,
        name: String,
        count: i32,
    },
}

/// The series cache: each recent Event by its key, swept of old series once a [`SERIES_SWEEP`].
#[derive(Debug)]
struct Series {
    recorded: HashMap<SeriesKey, Recorded>,
    swept: Instant,
}

impl Series {
    fn new(now: Instant) -> Series {
        Series {
            recorded: HashMap::new(),
            swept: now,
        }
    }

    /// Looks the report up at `now`: a repeat counts one more; a first is remembered under `namespace`/`name`.
    fn observe(&mut self, key: SeriesKey, namespace: &str, name: &str, now: Instant) -> Observed {
        if now.saturating_duration_since(self.swept) >= SERIES_SWEEP {
            self.recorded
                .retain(|_, recorded| now.saturating_duration_since(recorded.last) < SERIES_TTL);
            self.swept = now;
        }
        match self.recorded.get_mut(&key) {
            Some(recorded) if now.saturating_duration_since(recorded.last) < SERIES_TTL => {
                recorded.count += 1;
                recorded.last = now;
                Observed::Repeat {
                    namespace: recorded.namespace.clone(),
                    name: recorded.name.clone(),
                    count: recorded.count,
                }
            }
            _ => {
                self.recorded.insert(
                    key,
                    Recorded {
                        namespace: namespace.to_owned(),
                        name: name.to_owned(),
                        count: 1,
                        last: now,
                    },
                );
                Observed::First
            }
        }
    }

    /// A first Event that was dropped: its repeats start a new one.
    fn forget(&mut self, key: &SeriesKey) {
        self.recorded.remove(key);
    }
}

/// A cheap handle to the manager's one lane.
#[derive(Clone)]
pub struct EventLane {
    sender: mpsc::Sender<Send>,
    /// Taken by the first publish, which starts the sender task (a runtime is only sure to exist then).
    receiver: Arc<Mutex<Option<mpsc::Receiver<Send>>>>,
    series: Arc<Mutex<Series>>,
    client: Client,
    controller: String,
    instance: String,
    counts: Family<ResultLabels, Counter>,
    /// Events being sent right now (for the drain at shutdown).
    sending: Arc<AtomicUsize>,
}

impl EventLane {
    /// `counts` is `ruleplane_events_total` by result (`created`, `repeated`, `failed`, `dropped`).
    pub fn new(client: Client, controller: &str, instance: &str, counts: Family<ResultLabels, Counter>) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
        EventLane {
            sender,
            receiver: Arc::new(Mutex::new(Some(receiver))),
            series: Arc::new(Mutex::new(Series::new(Instant::now()))),
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

    /// Queues an Event that reports a thing done once (a binding, a write); never waits.
    pub fn publish(&self, report: Report) {
        self.queue(Send::Create(Box::new(self.event(report))));
    }

    /// Queues an Event whose repeats (the same type, reason, action and objects; any note) within [`SERIES_TTL`]
    /// fold into the first one's series, its note staying the first's; never waits.
    pub fn publish_series(&self, report: Report) {
        let key = SeriesKey::of(&report);
        let event = self.event(report);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let observed = self.series.lock().unwrap_or_else(|e| e.into_inner()).observe(
            key.clone(),
            &namespace,
            &name,
            Instant::now(),
        );
        let send = match observed {
            Observed::First => Send::Create(Box::new(event)),
            Observed::Repeat { namespace, name, count } => Send::Repeat {
                namespace,
                name,
                count,
                at: k8s_openapi::jiff::Timestamp::now(),
            },
        };
        let first = matches!(send, Send::Create(_));
        if !self.queue(send) && first {
            self.series.lock().unwrap_or_else(|e| e.into_inner()).forget(&key);
        }
    }

    /// Queues without waiting; false when the queue was full and the Event dropped.
    fn queue(&self, send: Send) -> bool {
        self.start();
        match self.sender.try_send(send) {
            Ok(()) => true,
            Err(error) => {
                self.count("dropped");
                debug!(%error, "Event queue full; Event dropped");
                false
            }
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
            type_: Some(
                match report.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            regarding: Some(report.regarding),
            related: report.related,
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
                .for_each_concurrent(IN_FLIGHT, |send| {
                    let lane = lane.clone();
                    async move { lane.send(send).await }
                })
                .await;
        });
    }

    async fn send(&self, send: Send) {
        self.sending.fetch_add(1, Ordering::SeqCst);
        match send {
            Send::Create(event) => self.create(*event).await,
            Send::Repeat {
                namespace,
                name,
                count,
                at,
            } => self.repeat(&namespace, &name, count, at).await,
        }
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

    /// The series patch of a repeat; when the first Event is not there yet (its create still in flight beside
    /// this request), once more after a moment.
    async fn repeat(&self, namespace: &str, name: &str, count: i32, at: k8s_openapi::jiff::Timestamp) {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let patch = json!({"series": {"count": count, "lastObservedTime": MicroTime(at)}});
        let mut result = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await;
        if matches!(&result, Err(kube::Error::Api(status)) if status.code == 404) {
            tokio::time::sleep(SERIES_RETRY).await;
            result = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await;
        }
        match result {
            Ok(_) => self.count("repeated"),
            Err(error) => {
                self.count("failed");
                warn!(%error, "could not count a repeated Event");
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
            type_: EventType::Normal,
            related: None,
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

    fn failed(note: &str) -> Report {
        Report {
            type_: EventType::Warning,
            reason: "FailedScheduling".into(),
            action: "Scheduling".into(),
            note: note.into(),
            ..report("Pod", Some("shop"))
        }
    }

    #[tokio::test]
    async fn a_warning_is_written_as_a_warning_with_its_related_object() {
        let lane = lane(&Family::default());
        let preemptor = ObjectReference {
            name: Some("big".into()),
            ..Default::default()
        };
        let event = lane.event(Report {
            related: Some(preemptor),
            ..failed("0/1 nodes are available")
        });
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.related.and_then(|r| r.name).as_deref(), Some("big"));
    }

    #[test]
    fn a_repeat_within_the_ttl_counts_in_the_first_events_series_whatever_its_note() {
        let start = Instant::now();
        let mut series = Series::new(start);
        let first = SeriesKey::of(&failed("0/3 nodes are available"));
        let other_note = SeriesKey::of(&failed("0/4 nodes are available"));
        assert_eq!(series.observe(first, "shop", "web.1", start), Observed::First);
        let later = start + Duration::from_secs(5);
        assert_eq!(
            series.observe(other_note.clone(), "shop", "web.2", later),
            Observed::Repeat {
                namespace: "shop".into(),
                name: "web.1".into(),
                count: 2
            }
        );
        assert_eq!(
            series.observe(other_note, "shop", "web.3", later + Duration::from_secs(1)),
            Observed::Repeat {
                namespace: "shop".into(),
                name: "web.1".into(),
                count: 3
            }
        );
    }

    #[test]
    fn another_reason_or_object_is_another_event() {
        let start = Instant::now();
        let mut series = Series::new(start);
        assert_eq!(
            series.observe(SeriesKey::of(&failed("a")), "shop", "web.1", start),
            Observed::First
        );
        let scheduled = SeriesKey::of(&report("Pod", Some("shop")));
        assert_eq!(series.observe(scheduled, "shop", "web.2", start), Observed::First);
        let mut other = failed("a");
        other.regarding.uid = Some("u-2".into());
        assert_eq!(
            series.observe(SeriesKey::of(&other), "shop", "web.3", start),
            Observed::First
        );
    }

    #[test]
    fn a_series_silent_for_the_ttl_starts_a_new_event_and_old_series_are_swept() {
        let start = Instant::now();
        let mut series = Series::new(start);
        let key = SeriesKey::of(&failed("a"));
        assert_eq!(series.observe(key.clone(), "shop", "web.1", start), Observed::First);
        let other = SeriesKey::of(&Report {
            reason: "Preempted".into(),
            ..failed("b")
        });
        assert_eq!(
            series.observe(other, "shop", "web.2", start + Duration::from_secs(10)),
            Observed::First
        );
        let after = start + Duration::from_secs(10) + SERIES_TTL;
        assert_eq!(series.observe(key, "shop", "web.3", after), Observed::First);
        // The sweep at that publish forgot the other series, silent for the TTL too.
        assert_eq!(series.recorded.len(), 1);
    }

    /// A first Event dropped from a full queue is forgotten: its repeat is created, not counted on nothing.
    #[tokio::test]
    async fn a_dropped_first_event_leaves_no_series_behind() {
        let counts = Family::<ResultLabels, Counter>::default();
        let lane = lane(&counts);
        for _ in 0..QUEUE_CAPACITY {
            lane.publish(report("Pod", Some("shop")));
        }
        lane.publish_series(failed("a"));
        let key = SeriesKey::of(&failed("a"));
        assert!(!lane.series.lock().expect("series").recorded.contains_key(&key));
    }
}
