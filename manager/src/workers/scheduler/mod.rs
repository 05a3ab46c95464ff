//! SchedulerPolicy worker: pods whose `spec.schedulerName` names the policy wait in the policy's scheduling queue,
//! are decided one at a time by the engine on the shared cluster cache, assumed at once, bound through
//! `pods/binding`, and reported as kube-scheduler reports them (fetch → decide → apply → report).
//!
//! The queue (`ruleplane_config::scheduler::queue`) is the one owner of where each pod waits; this loop feeds it
//! the pods of the policy, the cluster events the cache applies and the time, and runs what it pops.

mod cache;
mod gangs;
mod late_kinds;
mod nominations;
mod pod_group_status;
mod preempt;
mod storage;
mod volumes;
mod writer;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::SelectAll;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::{Resource, ResourceExt};
use ruleplane_config::SchedulerPolicy;
use ruleplane_config::scheduler::engine::queueing_hints::{ClusterEvent, HintPod, QueueingHints, SCHEDULING_GATES};
use ruleplane_config::scheduler::engine::{Engine, Nominate, Outcome, ScheduleError};
use ruleplane_config::scheduler::queue::{Counts, Failure, Moment, Place, Requeue, SchedulingQueue, Timings};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use cache::ClusterCache;
use cache::{ClusterEvents, LIVE_PODS};

use crate::context::WorkerContext;
use crate::context::WorkerError;
use crate::events::EventType;
use crate::health::WorkerState;
use crate::metrics::{PolicyLabels, PolicyOnlyLabels, RequeueLabels, RuleErrorLabels};
use crate::watch_hub::{Change, KindKey, Subscription};
use writer::{ApiWriter, NotScheduled, PodWriter, Publish};

const KIND: &str = "SchedulerPolicy";
/// Bindings in flight per policy: the next pods are decided while these are sent (kube-scheduler binds
/// asynchronously too).
const DEFAULT_BINDINGS_IN_FLIGHT: usize = 32;
/// How long a worker waits at start for the Workload watch to list before it schedules anyway.
const WORKLOADS_SYNC: Duration = Duration::from_secs(10);
/// Watch notifications taken in at once before the loop turns to its other work.
const MAX_DRAINED: usize = 4096;

/// A pending pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

impl PodKey {
    fn of(object: &DynamicObject) -> PodKey {
        PodKey {
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
        }
    }
}

/// Why a pod was not bound this time.
#[derive(Debug, thiserror::Error)]
pub enum SchedulingError {
    /// No node fits; the message is kube-scheduler's FailedScheduling text (PostFilter part included), and
    /// `nominate` what happens to the pod's `status.nominatedNodeName` (set when preemption chose a node).
    #[error("{message}")]
    Unschedulable { message: String, nominate: Nominate },
    /// The pod cannot be evaluated (an invalid quantity): a change of the pod is needed.
    #[error("{0}")]
    Invalid(#[from] ScheduleError),
    /// The engine could not run (a PreFilter error).
    #[error("{0}")]
    Engine(String),
    /// A background preemption failed (kube-scheduler logs it and retries the preemptor at once).
    #[error("preemption failed: {0}")]
    Preemption(String),
    /// VolumeBinding's PreBind failed (kube-scheduler's text); the pod was unreserved, forgotten and is retried.
    #[error("{0}")]
    PreBind(String),
    /// v1.37 refused the pod's Workload API group before its cycle (`validatePodGroup`: a member without the
    /// group's priority, scheduler name or preemption policy): kube-scheduler's SchedulerError text.
    #[error("{0}")]
    PodGroup(String),
    /// The binding failed; the pod was forgotten and is retried.
    #[error("binding to {node} failed: {source}")]
    Binding { node: String, source: kube::Error },
}

impl SchedulingError {
    fn category(&self) -> &'static str {
        match self {
            SchedulingError::Unschedulable { .. } => "unschedulable",
            SchedulingError::Preemption(_) => "preemption",
            SchedulingError::Invalid(_) => "invalid",
            SchedulingError::Engine(_) => "engine",
            SchedulingError::Binding { .. } => "binding",
            SchedulingError::PreBind(_) => "prebind",
            SchedulingError::PodGroup(_) => "pod-group",
        }
    }

    /// Whether the error marks the policy degraded in `/readyz` (a pod that fits nowhere is an outcome, not a
    /// fault of the scheduler, nor is a group its owner must correct).
    fn degrades_rule(&self) -> bool {
        !matches!(
            self,
            SchedulingError::Unschedulable { .. } | SchedulingError::PodGroup(_)
        )
    }

    /// What makes two reports of a pod the same report: the text and, for an unschedulable pod, the nomination.
    fn report_key(&self) -> String {
        match self {
            SchedulingError::Unschedulable { message, nominate } => format!("{message}\n{nominate:?}"),
            other => other.to_string(),
        }
    }
}

/// What a scheduling or binding task tells the loop.
enum Done {
    /// The pod is no longer this policy's to place (bound elsewhere, deleted, not ours any more).
    Gone(PodKey),
    /// Assumed on a node: the scheduling cycle is over, the binding runs.
    Assumed(PodKey),
    /// The pod's attempt failed; `seen` is the last cluster event the decision saw. `preempting`: its preemption
    /// runs in the background, and DefaultPreemption's PreEnqueue holds it until [`Done::Preempted`].
    Failed {
        key: PodKey,
        failure: Failure,
        prepared: Option<Arc<HintPod>>,
        seen: u64,
        error: Box<SchedulingError>,
        preempting: bool,
    },
    /// The pod's preemption ended (every victim's deletion sent), with the first API error if any.
    Preempted { key: PodKey, error: Option<String> },
    /// Bound (or found bound by someone else, `conflict`).
    Bound { key: PodKey, conflict: bool },
    /// The pod has scheduling gates: it waits for them to go.
    Gated(PodKey),
    /// The end of a gang's run: what each member's cycle came to (never itself a `Run`).
    Run(Vec<Done>),
    /// The task gives its binding slot back: its pod waits at PreBind for its volumes (up to
    /// `bindTimeoutSeconds`), which must not hold up other pods' bindings (kube-scheduler has no cap at all).
    Released(tokio::task::Id),
    /// A PodGroup's run was rejected (its group may back off).
    GroupRejected(ruleplane_config::scheduler::gang::GroupKey),
    /// A PodGroup's run met its quorum.
    GroupAllowed(ruleplane_config::scheduler::gang::GroupKey),
    /// A gang member whose run waits for a sibling's preemption: back to the queue, rejected by its group's
    /// `plugin`, unreported (a preemptor's retry pops it again with its siblings).
    Waiting {
        key: PodKey,
        plugin: &'static str,
        seen: u64,
    },
}

/// One SchedulerPolicy's scheduling of pods.
pub struct PodScheduler {
    policy: SchedulerPolicy,
    ctx: WorkerContext,
    cache: Arc<ClusterCache>,
    engine: Mutex<Engine>,
    hints: QueueingHints,
    /// Where the writes go: the apiserver, or a recording in the unit tests.
    writer: Arc<dyn PodWriter>,
}

fn pods_resource() -> ApiResource {
    ApiResource::erase::<Pod>(&())
}

/// The slot of the manager's one scheduling cache: the supervisor holds it, the first SchedulerPolicy worker fills
/// it, every other shares it (and a new leader finds it warm).
pub type SchedulingCache = Arc<std::sync::OnceLock<Arc<ClusterCache>>>;

/// The shared scheduling cache, made now if no worker made it before.
fn shared_cache(slot: &SchedulingCache, ctx: &WorkerContext) -> Arc<ClusterCache> {
    slot.get_or_init(|| {
        use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
        use k8s_openapi::api::core::v1::{Namespace, Node, ReplicationController, Service};
        // Both caches keep text, like every watch's: the snapshot keeps its own typed copy of each node and bound
        // pod, and an attempt parses its pending pod (a few microseconds) where a JSON tree per pod would take
        // several times the text's bytes.
        let nodes = ctx.hub.watch(&ApiResource::erase::<Node>(&()));
        let pods = ctx.hub.watch_filtered(&pods_resource(), None, Some(LIVE_PODS));
        let context = cache::Context {
            namespaces: ctx.hub.watch(&ApiResource::erase::<Namespace>(&())),
            services: ctx.hub.watch(&ApiResource::erase::<Service>(&())),
            replication_controllers: ctx.hub.watch(&ApiResource::erase::<ReplicationController>(&())),
            replica_sets: ctx.hub.watch(&ApiResource::erase::<ReplicaSet>(&())),
            stateful_sets: ctx.hub.watch(&ApiResource::erase::<StatefulSet>(&())),
            pod_disruption_budgets: ctx
                .hub
                .watch(&ApiResource::erase::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(&())),
            storage: storage::StorageWatches::new(&ctx.hub),
        };
        ClusterCache::new(nodes, pods, context)
    })
    .clone()
}

pub async fn run(
    policy: SchedulerPolicy,
    scheduling: SchedulingCache,
    ctx: WorkerContext,
    stop: CancellationToken,
) -> Result<(), WorkerError> {
    let name = policy.metadata.name.clone();
    // DefaultPreemption (with DynamicResources' PostFilter before it) is on when the profile has it; the engine
    // behaves as the kube-scheduler of the apiserver's minor.
    let mut engine = policy
        .engine_with_post_filters(seed(), ctx.kubernetes_version)
        .map_err(|error| WorkerError::Unrunnable {
            rule: name.clone(),
            reason: error.to_string(),
        })?;
    // The worker binds; nobody reads per-plugin scores (Events carry the verdict, not the breakdown).
    engine.set_score_breakdown(false);
    let hints = QueueingHints::for_version(policy.profile(), ctx.kubernetes_version);
    let cache = shared_cache(&scheduling, &ctx);
    // Any policy gang-schedules a pod that names a pod group (unless it disables GangScheduling / Coscheduling); a
    // kind the apiserver serves only later is watched from then on (`late_kinds`).
    let gangs = gangs::Gangs::start(&ctx, policy.gang_scheduling(), policy.coscheduling()).await;
    // Subscribed before the caches sync, so nothing applied from here on is missed.
    let mut subscriptions = vec![cache.nodes.subscribe(), cache.pods.subscribe()];
    subscriptions.extend(gangs.iter().flat_map(|g| g.watches()).map(|w| w.subscribe()));
    let events = cache.listen().await;
    // Not waited for forever: without permission to list Workloads (RBAC from before gangs) the watch never lists,
    // and only gang members should wait for it (held at PreEnqueue until their Workload is seen), not every pod.
    let workloads_synced = async {
        for watch in gangs.iter().flat_map(|g| g.watches()) {
            if tokio::time::timeout(WORKLOADS_SYNC, watch.synced()).await.is_err() {
                warn!(rule = %name, "the Workload / PodGroup watch has not listed yet (RBAC: list/watch?); gang members wait for it");
            }
        }
    };
    tokio::select! {
        _ = stop.cancelled() => return Ok(()),
        _ = async { tokio::join!(cache.synced(), workloads_synced) } => {}
    }
    let writer = Arc::new(ApiWriter {
        client: ctx.client.clone(),
        events: ctx.events.clone(),
        version: ctx.kubernetes_version,
    });
    let scheduler = Arc::new(PodScheduler {
        policy,
        ctx: ctx.clone(),
        cache,
        engine: Mutex::new(engine),
        hints,
        writer,
    });
    ctx.health.set_rule(&name, KIND, WorkerState::Running);
    Loop::new(scheduler, gangs).run(subscriptions, events, stop).await
}

/// The next gang kind served after the start; pending forever without a receiver (no gangs, or all served).
async fn next_late(late: &mut Option<mpsc::UnboundedReceiver<late_kinds::LateKind>>) -> Option<late_kinds::LateKind> {
    match late {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// Tie-breaking seed: differs per process, as kube-scheduler's random choice among the best does.
fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id())
}

/// The queue's clock: the wall clock, as kube-scheduler aligns backoffs to wall-clock seconds.
fn now() -> Moment {
    Moment(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// How long from now until `at` on the queue's clock.
fn until(at: Moment) -> Duration {
    at.0.saturating_sub(now().0)
}

/// The scheduling loop of one policy: it owns the queue, runs one scheduling cycle at a time (as kube-scheduler's
/// one scheduling goroutine) and up to [`DEFAULT_BINDINGS_IN_FLIGHT`] bindings behind it, not counting those
/// waiting at PreBind for their volumes.
struct Loop {
    scheduler: Arc<PodScheduler>,
    queue: SchedulingQueue<PodKey>,
    /// When each pending pod was first seen (the e2e latency).
    first_seen: HashMap<PodKey, Instant>,
    /// The last error reported per pod: each distinct one is reported (Event, condition) once.
    reported: HashMap<PodKey, String>,
    /// Per pod, the number of the report last written, behind a lock its report tasks take in turn: two failures
    /// reported moments apart are written in order, so the condition ends with the newer text (a task that finds
    /// a newer report written skips its own).
    report_order: HashMap<PodKey, (u64, Arc<tokio::sync::Mutex<u64>>)>,
    /// Pods whose last error degraded the policy.
    faults: HashSet<PodKey>,
    /// Tasks: the one scheduling cycle and the bindings behind it.
    tasks: JoinSet<()>,
    /// The tasks not joined yet, and those of them that gave their binding slot back ([`Done::Released`]).
    live: HashSet<tokio::task::Id>,
    released: HashSet<tokio::task::Id>,
    done: (mpsc::UnboundedSender<Done>, mpsc::UnboundedReceiver<Done>),
    cycle_running: bool,
    /// Gang scheduling's state, when the policy keeps GangScheduling or Coscheduling.
    gangs: Option<gangs::Gangs>,
}

impl Loop {
    fn new(scheduler: Arc<PodScheduler>, gangs: Option<gangs::Gangs>) -> Loop {
        Loop {
            gangs,
            queue: SchedulingQueue::new(Timings::default()),
            scheduler,
            first_seen: HashMap::new(),
            reported: HashMap::new(),
            report_order: HashMap::new(),
            faults: HashSet::new(),
            tasks: JoinSet::new(),
            live: HashSet::new(),
            released: HashSet::new(),
            done: mpsc::unbounded_channel(),
            cycle_running: false,
        }
    }

    fn rule(&self) -> &str {
        &self.scheduler.policy.metadata.name
    }

    async fn run(
        mut self,
        subscriptions: Vec<Subscription>,
        mut events: ClusterEvents,
        stop: CancellationToken,
    ) -> Result<(), WorkerError> {
        let mut changes: SelectAll<_> = subscriptions.into_iter().map(|s| Box::pin(s.into_stream())).collect();
        let mut late = self.gangs.as_mut().and_then(|gangs| gangs.take_late());
        self.on_gang_change("v1", "Pod", &Change::Resync);
        self.resync_pending();
        // Changes heard while the caches filled are taken in before the first pod is popped.
        while let Some(Some((kind, change))) = changes.next().now_or_never() {
            self.on_change(&kind, &change).await;
        }
        self.scheduler.cache.refresh().await;
        let timings = self.queue.timings();
        let mut leftover = tokio::time::interval(timings.leftover_flush);
        leftover.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        leftover.tick().await;
        loop {
            self.start_next_cycle();
            self.update_gauges();
            let flush_in = self.queue.next_backoff_flush(now()).map(until);
            // Ends of cycles and bindings first: a pod's own end is handled before what the watches say of it; the
            // queue's timers (ready only when due) before the notifications, which a busy cluster never runs out of.
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Ok(()),
                Some(done) = self.done.1.recv() => self.on_done(done).await,
                Some(joined) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    let Ok((id, ())) = joined else {
                        // A panicking cycle or binding: the supervisor's restart is the right response.
                        return Err(WorkerError::ReconcilePanicked(self.rule().to_string()));
                    };
                    self.live.remove(&id);
                    self.released.remove(&id);
                }
                _ = sleep_for(flush_in), if flush_in.is_some() => {
                    self.queue.flush_backoff_completed(now());
                }
                _ = leftover.tick() => {
                    let moved = self.queue.flush_unschedulable_leftover(now(), &self.scheduler.hints);
                    self.count_requeues(&moved);
                }
                Some((sequence, event)) = events.recv() => {
                    self.on_event(sequence, &event);
                    for _ in 0..MAX_DRAINED {
                        let Some(Some((sequence, event))) = events.recv().now_or_never() else { break };
                        self.on_event(sequence, &event);
                    }
                }
                Some(kind) = next_late(&mut late) => {
                    let Some(gangs) = self.gangs.as_mut() else { continue };
                    let watch = gangs.served_late(kind);
                    changes.push(Box::pin(watch.subscribe().into_stream()));
                    // Listed before it was subscribed to: its objects are taken in as after a relist.
                    let key = watch.key.clone();
                    self.on_gang_change(&key.api_version, &key.kind, &Change::Resync);
                }
                change = changes.next() => {
                    let Some((kind, change)) = change else {
                        return Err(WorkerError::WatchEnded(self.rule().to_string()));
                    };
                    self.on_change(&kind, &change).await;
                    // Take in what is already waiting before turning to the queue: one cache refresh per burst.
                    for _ in 0..MAX_DRAINED {
                        let Some(Some((kind, change))) = changes.next().now_or_never() else { break };
                        self.on_change(&kind, &change).await;
                    }
                    self.scheduler.cache.refresh().await;
                }
            }
        }
    }

    /// Pops the next pod and starts its scheduling cycle, unless a cycle runs or the bindings are at their limit.
    fn start_next_cycle(&mut self) {
        if self.cycle_running || self.busy_slots() >= DEFAULT_BINDINGS_IN_FLIGHT {
            return;
        }
        // A gang member held at PreEnqueue goes back to wait: the next pod is popped.
        let (key, popped) = loop {
            let Some(key) = self.queue.pop() else { return };
            match self.gang_of(&key) {
                gangs::Popped::Held => continue,
                popped => break (key, popped),
            }
        };
        self.cycle_running = true;
        let scheduler = self.scheduler.clone();
        let done = self.done.0.clone();
        if let gangs::Popped::Run(run, members, pod_group) = popped {
            let members = members
                .into_iter()
                .map(|member| {
                    let queued = self.queue.pod(&member).and_then(|p| p.parsed_pod().cloned());
                    (member, queued)
                })
                .collect();
            self.spawn(async move {
                scheduler
                    .run_gang(*run, members, pod_group.map(|spec| *spec), done)
                    .await
            });
            return;
        }
        let without_pod_group = matches!(popped, gangs::Popped::WithoutPodGroup);
        let queued = self.queue.pod(&key).and_then(|p| p.parsed_pod().cloned());
        self.spawn(async move { scheduler.attempt(key, queued, without_pod_group, done).await });
    }

    /// Every task starts here, so a [`Done::Released`] is honoured only from a task not yet joined.
    fn spawn(&mut self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = self.tasks.spawn(task);
        self.live.insert(handle.id());
    }

    /// Tasks holding a binding slot: all but those whose pods wait at PreBind for their volumes.
    fn busy_slots(&self) -> usize {
        self.tasks.len().saturating_sub(self.released.len())
    }

    /// A pod or node notification of the watches: pods of this policy join, change in or leave the queue.
    async fn on_change(&mut self, kind: &KindKey, change: &Change) {
        let is_pods = kind.kind == "Pod";
        if is_pods || kind.kind == "Workload" || kind.kind == "PodGroup" {
            self.on_gang_change(&kind.api_version, &kind.kind, change);
        }
        match change {
            Change::Resync => self.resync_pending(),
            Change::Applied(object) if is_pods => {
                let key = PodKey::of(object);
                if !self.scheduler.is_pending_ours(object) {
                    // Bound (by us or someone else), deleting, or handed to another scheduler.
                    if self.queue.place(&key).is_some_and(|p| p != Place::Binding) {
                        self.settle(&key);
                    }
                    return;
                }
                let Ok(pod) = crate::watch_hub::typed::<Pod>(object) else {
                    return;
                };
                let pod = Arc::new(pod);
                match self.queue.place(&key) {
                    None => {
                        self.first_seen.entry(key.clone()).or_insert_with(Instant::now);
                        self.queue
                            .add(key.clone(), Arc::new(HintPod::new(pod)), now(), &self.scheduler.hints);
                        self.sort_pod(&key, object);
                    }
                    Some(place) => {
                        let unchanged = self.queue.pod(&key).is_some_and(|queued| {
                            queued.resource_version() == pod.metadata.resource_version.as_deref()
                        });
                        if unchanged {
                            return;
                        }
                        // A waiting pod is asked again by the hints: prepared as a failed one is.
                        let prepared = if place == Place::Unschedulable {
                            self.scheduler.cache.prepare(&self.scheduler.hints, pod).await
                        } else {
                            Arc::new(HintPod::new(pod))
                        };
                        let moved = self.queue.update(key.clone(), prepared, now(), &self.scheduler.hints);
                        self.sort_pod(&key, object);
                        self.count_requeues(moved.as_slice());
                    }
                }
            }
            Change::Deleted(object) if is_pods => {
                let key = PodKey::of(object);
                if self.queue.place(&key).is_some_and(|p| p != Place::Binding) {
                    self.settle(&key);
                }
            }
            // Nodes: the cache turns their changes into cluster events.
            Change::Applied(_) | Change::Deleted(_) => {}
        }
    }

    /// Every pending pod of the policy is queued; queued pods no longer pending leave.
    fn resync_pending(&mut self) {
        // Every pending pod's key, and the pods the queue does not hold yet (only those are parsed, each kept as
        // the queue keeps it at once: a burst of pending pods is never held typed all together).
        let (keys, new): (HashSet<PodKey>, Vec<(PodKey, HintPod)>) =
            crate::runner::whole_cache_step(usize::MAX, || {
                let mut keys = HashSet::new();
                let mut new = Vec::new();
                self.scheduler.cache.pods.store.for_each(|object| {
                    if !self.scheduler.is_pending_ours(object) {
                        return;
                    }
                    let key = PodKey::of(object);
                    if self.queue.place(&key).is_none()
                        && let Ok(pod) = crate::watch_hub::typed::<Pod>(object)
                    {
                        new.push((key.clone(), HintPod::new(Arc::new(pod))));
                    }
                    keys.insert(key);
                });
                (keys, new)
            });
        // Pods no longer pending (deleted while the watch was down, or bound) leave, with every trace kept of them:
        // those queued, and those only reported on (a fault would keep the policy degraded). A pod being bound is
        // its binding's to settle.
        let known = self
            .first_seen
            .keys()
            .chain(self.faults.iter())
            .chain(self.reported.keys());
        let gone: Vec<PodKey> = known
            .filter(|key| !keys.contains(*key) && self.queue.place(key) != Some(Place::Binding))
            .cloned()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        for key in gone {
            self.settle(&key);
        }
        for (key, pod) in new {
            self.first_seen.entry(key.clone()).or_insert_with(Instant::now);
            self.queue.add(key, Arc::new(pod), now(), &self.scheduler.hints);
        }
        // Coscheduling's QueueSort for the PodGroups' members.
        self.sort_all_groups();
    }

    /// A cluster event the cache applied: the hints decide which unschedulable pods it moves.
    fn on_event(&mut self, sequence: u64, event: &Arc<ClusterEvent>) {
        let moved = self.queue.on_event(sequence, event, now(), &self.scheduler.hints);
        self.count_requeues(&moved);
    }

    fn count_requeues(&self, moved: &[Requeue<PodKey>]) {
        for requeue in moved {
            self.scheduler
                .ctx
                .metrics
                .scheduler_requeues
                .get_or_create(&RequeueLabels {
                    policy: self.rule().to_string(),
                    event: requeue.event.clone(),
                })
                .inc();
        }
    }

    async fn on_done(&mut self, done: Done) {
        // A gang's run ends in one message, so no pod is popped before every member is back in the queue.
        if let Done::Run(all) = done {
            for done in all {
                self.on_member_done(done).await;
            }
            return;
        }
        self.on_member_done(done).await;
    }

    async fn on_member_done(&mut self, done: Done) {
        match done {
            // A run's members are never runs themselves ([`Loop::on_done`] unpacks the one level).
            Done::Run(_) => {}
            Done::Released(id) => {
                // Only a task still running holds a slot to give back.
                if self.live.contains(&id) {
                    self.released.insert(id);
                }
            }
            Done::Gone(key) => {
                self.cycle_running = false;
                self.settle(&key);
            }
            Done::Assumed(key) => {
                self.cycle_running = false;
                self.queue.assumed(&key);
            }
            Done::Gated(key) => {
                self.cycle_running = false;
                let failure = Failure::Unschedulable {
                    plugins: BTreeSet::from([Arc::from(SCHEDULING_GATES)]),
                    pending: BTreeSet::new(),
                };
                self.queue.failed(&key, failure, None, 0, now(), &self.scheduler.hints);
            }
            Done::GroupRejected(group) => self.group_rejected(&group),
            Done::GroupAllowed(group) => self.group_allowed(&group),
            Done::Waiting { key, plugin, seen } => {
                self.cycle_running = false;
                let failure = Failure::Unschedulable {
                    plugins: BTreeSet::from([Arc::from(plugin)]),
                    pending: BTreeSet::new(),
                };
                self.queue
                    .failed(&key, failure, None, seen, now(), &self.scheduler.hints);
            }
            Done::Preempted { key, error } => self.preempted(key, error).await,
            Done::Bound { key, conflict } => {
                if !conflict && let Some(first_seen) = self.first_seen.get(&key) {
                    self.scheduler
                        .ctx
                        .metrics
                        .scheduling_e2e
                        .get_or_create(&PolicyOnlyLabels {
                            policy: self.rule().to_string(),
                        })
                        .observe(first_seen.elapsed().as_secs_f64());
                }
                self.on_bound(&key);
                self.settle(&key);
            }
            Done::Failed {
                key,
                failure,
                prepared,
                seen,
                error,
                preempting,
            } => {
                if preempting {
                    self.queue.preempting(&key);
                }
                // A binding's failure comes after its cycle ended; a cycle's own failure ends it.
                if !matches!(*error, SchedulingError::Binding { .. } | SchedulingError::PreBind(_)) {
                    self.cycle_running = false;
                }
                // A rejection naming plugins; one naming none (no nodes at all) backs off as an error does.
                let rejected = matches!(&failure, Failure::Unschedulable { plugins, pending }
                    if !plugins.is_empty() || !pending.is_empty());
                let Some(place) = self
                    .queue
                    .failed(&key, failure, prepared, seen, now(), &self.scheduler.hints)
                else {
                    // Deleted or bound meanwhile: nothing to retry or report.
                    return;
                };
                if rejected && place != Place::Unschedulable {
                    // An event heard during the cycle could help: retried without waiting in the pool.
                    self.count_requeues(&[Requeue {
                        key: key.clone(),
                        event: "ScheduleAttemptFailure".to_string(),
                        to: place,
                    }]);
                }
                self.report(key, *error).await;
            }
        }
    }

    /// A background preemption ended: the hold on its preemptor ends; a failure retries the pod at once (kube-scheduler
    /// `Activate`s it) and is reported.
    async fn preempted(&mut self, key: PodKey, error: Option<String>) {
        let moved = self.queue.preemption_finished(&key, error.is_some(), now());
        self.count_requeues(moved.as_slice());
        if let Some(error) = error {
            self.report(key, SchedulingError::Preemption(error)).await;
        }
    }

    /// Forgets a pod that left: its queue entry, its reports and faults.
    fn settle(&mut self, key: &PodKey) {
        self.queue.delete(key);
        self.first_seen.remove(key);
        self.reported.remove(key);
        self.report_order.remove(key);
        if self.faults.remove(key) {
            info!(rule = %self.rule(), key = ?key, "pod placed or gone after earlier errors");
        }
        if self.faults.is_empty() {
            self.scheduler
                .ctx
                .health
                .set_rule(self.rule(), KIND, WorkerState::Running);
        }
    }

    /// Counts a failure, and reports it once per distinct message: a Warning Event and, for an unschedulable
    /// pod, the PodScheduled condition.
    async fn report(&mut self, key: PodKey, error: SchedulingError) {
        let message = error.to_string();
        let report_key = error.report_key();
        let ctx = &self.scheduler.ctx;
        ctx.metrics
            .reconcile_errors
            .get_or_create(&RuleErrorLabels {
                rule: self.rule().to_string(),
                kind: KIND.to_owned(),
                category: error.category().to_owned(),
            })
            .inc();
        if error.degrades_rule() {
            self.faults.insert(key.clone());
            ctx.health
                .set_rule(self.rule(), KIND, WorkerState::Degraded(message.clone()));
        }
        if self.reported.get(&key) == Some(&report_key) {
            return;
        }
        warn!(rule = %self.rule(), key = ?key, category = error.category(), error = %message, "pod not scheduled");
        self.reported.insert(key.clone(), report_key);
        self.spawn_report(key, error);
    }

    /// Writes a pod's report behind the loop, as the runner wrote reports (the next pod is decided meanwhile), after
    /// the pod's earlier reports and not at all once a newer one is written.
    fn spawn_report(&mut self, key: PodKey, error: SchedulingError) {
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

    fn update_gauges(&self) {
        let Counts {
            active,
            backoff,
            unschedulable,
            in_flight,
        } = self.queue.counts();
        let policy = self.rule().to_string();
        let metrics = &self.scheduler.ctx.metrics;
        let gauge = |state: &str, value: usize| {
            metrics
                .pending_pods
                .get_or_create(&PolicyLabels {
                    policy: policy.clone(),
                    state: state.to_string(),
                })
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        };
        gauge("unschedulable", unschedulable);
        gauge("backoff", backoff);
        gauge("active", active + in_flight);
        self.scheduler.ctx.health.set_rule_detail(
            &policy,
            format!(
                "scheduler {}: pending {} active, {backoff} backoff, {unschedulable} unschedulable",
                self.scheduler.scheduler_name(),
                active + in_flight,
            ),
        );
    }
}

async fn sleep_for(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

impl PodScheduler {
    fn scheduler_name(&self) -> &str {
        &self.policy.spec.scheduler_name
    }

    /// A pod this policy should place: ours, not bound, not being deleted.
    fn is_pending_ours(&self, object: &DynamicObject) -> bool {
        let spec = object.data.get("spec");
        let field = |name| spec.and_then(|s| s.get(name)).and_then(|v| v.as_str());
        self.is_pending(
            field("schedulerName"),
            field("nodeName"),
            object.metadata.deletion_timestamp.is_some(),
        )
    }

    /// [`Self::is_pending_ours`] on a pod's `spec.schedulerName`, `spec.nodeName` and deletion.
    fn is_pending(&self, scheduler: Option<&str>, node: Option<&str>, deleting: bool) -> bool {
        scheduler == Some(self.scheduler_name()) && node.unwrap_or_default().is_empty() && !deleting
    }

    fn count(&self, result: &str) {
        self.ctx
            .metrics
            .scheduling_attempts
            .get_or_create(&PolicyLabels {
                policy: self.policy.metadata.name.clone(),
                state: result.to_string(),
            })
            .inc();
    }

    /// Publishes a scheduling Event (FailedScheduling, the gang Events) through the Event lane, without holding up
    /// the next pod: repeats fold into the first one's series, as kube-scheduler's broadcaster folds them.
    fn publish(&self, pod: &Pod, type_: EventType, reason: &str, action: &str, note: String) {
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

    /// The `Scheduled` Event, through the Event lane: unique per pod (no series to keep), and sent behind the
    /// bindings so a burst binds first.
    fn publish_scheduled(&self, pod: &Pod, node: &str) {
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

    /// The FailedScheduling Event and, for an unschedulable pod, the PodScheduled condition kube-scheduler sets,
    /// so `kubectl describe pod` tells the story.
    async fn report_error(&self, key: &PodKey, error: &SchedulingError) {
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

    /// Fetch: the pod as the watch has it, `None` when it was bound meanwhile, deleted or is no longer ours.
    /// `queued` (the queue's copy) is used when it is current: most pods are attempted in the version they were
    /// queued in; else the pod is parsed from the cached text.
    fn pending_pod(&self, key: &PodKey, queued: Option<Arc<Pod>>) -> Option<Arc<Pod>> {
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
    async fn attempt(
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
            Err(error) => {
                self.count("error");
                return send(Done::Failed {
                    key,
                    failure: Failure::Error,
                    prepared: None,
                    seen: 0,
                    error: Box::new(error.into()),
                    preempting: false,
                });
            }
        };
        if without_pod_group
            && matches!(
                cycle.decision.outcome,
                Outcome::Scheduled { .. } | Outcome::Unschedulable { .. }
            )
        {
            return send(self.without_pod_group(key, &pod, cycle).await);
        }
        let failed_preempting = |failure: Failure, error: SchedulingError, preempting: bool| Done::Failed {
            key: key.clone(),
            failure,
            prepared: cycle.prepared.clone(),
            seen: cycle.seen,
            error: Box::new(error),
            preempting,
        };
        let failed = |failure: Failure, error: SchedulingError| failed_preempting(failure, error, false);
        // kube-scheduler's full FailedScheduling text: the FitError and the PostFilter chain's part.
        let event_message = cycle.decision.event_message().unwrap_or_default();
        let node = match cycle.decision.outcome {
            Outcome::Scheduled { node } => node,
            Outcome::Unschedulable {
                plugins, post_filter, ..
            } => {
                self.count("unschedulable");
                let failure = Failure::Unschedulable {
                    plugins,
                    pending: BTreeSet::new(),
                };
                let (nominate, preemption) = match post_filter {
                    Some(post_filter) => (post_filter.nominate, post_filter.preemption),
                    None => (Nominate::Leave, None),
                };
                let error = SchedulingError::Unschedulable {
                    message: event_message,
                    nominate,
                };
                // kube-scheduler v1.35's async preemption: the cycle ends now, with the pod nominated; the victims
                // are evicted in the background while DefaultPreemption's PreEnqueue holds the pod. A victim's
                // deletion is the assigned-pod-delete event the queueing hints retry it on.
                let victims = preemption
                    .as_ref()
                    .map(|p| self.victims_to_evict(p))
                    .unwrap_or_default();
                let Some(preemption) = preemption.filter(|_| !victims.is_empty()) else {
                    return send(failed(failure, error));
                };
                send(failed_preempting(failure, error, true));
                let scheduler = self.clone();
                tokio::spawn(async move {
                    let result = scheduler.preempt(&pod, &preemption, victims).await;
                    let _ = done.send(Done::Preempted {
                        key,
                        error: result.err(),
                    });
                });
                return;
            }
            // The queue holds gated pods back; one gated since it was queued waits for its gates to go,
            // unreported, as kube-scheduler never attempts it.
            Outcome::Gated { .. } => return send(Done::Gated(key)),
            Outcome::Error { message } => {
                self.count("error");
                return send(failed(Failure::Error, SchedulingError::Engine(message)));
            }
        };
        send(Done::Assumed(key.clone()));
        send(self.bind_assumed(key, &pod, &node, &done).await);
    }

    /// Apply and report for an assumed pod: the binding (a pod already bound elsewhere is a conflict, not an
    /// error; a failed binding forgets the pod) and the `Scheduled` Event. Returns what to tell the loop.
    /// `done` hears when the task gives its binding slot back, at PreBind's wait for the volumes.
    async fn bind_assumed(&self, key: PodKey, pod: &Pod, node: &str, done: &mpsc::UnboundedSender<Done>) -> Done {
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
}

#[cfg(test)]
mod recording;
#[cfg(test)]
mod tests;
