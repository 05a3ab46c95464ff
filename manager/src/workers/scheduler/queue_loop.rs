//! The queue loop (kube-scheduler's `ScheduleOne` loop and its event handlers): pods of the policy, cluster events and time fed to the queue, one scheduling cycle at a time popped from it, and what each cycle and binding ends with taken back.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::SelectAll;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use ruleplane_config::scheduler::engine::queueing_hints::{ClusterEvent, HintPod, SCHEDULING_GATES};
use ruleplane_config::scheduler::queue::{Counts, Failure, Place, Requeue, SchedulingQueue, Timings};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::cache::ClusterEvents;
use super::gangs::Watched;
use super::{
    DEFAULT_BINDINGS_IN_FLIGHT, Done, KIND, MAX_DRAINED, PodKey, PodScheduler, SchedulingError, gangs, late_kinds, now,
    until,
};
use crate::context::WorkerError;
use crate::health::WorkerState;
use crate::metrics::{PolicyLabels, PolicyOnlyLabels, RequeueLabels};
use crate::runner::ErrorReports;
use crate::watch_hub::{Change, KindKey, Subscription};

/// The next gang kind served after the start; pending forever without a receiver (no gangs, or all served).
async fn next_late(late: &mut Option<mpsc::UnboundedReceiver<late_kinds::LateKind>>) -> Option<late_kinds::LateKind> {
    match late {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// The scheduling loop of one policy: it owns the queue, runs one scheduling cycle at a time (as kube-scheduler's
/// one scheduling goroutine) and up to [`DEFAULT_BINDINGS_IN_FLIGHT`] bindings behind it, not counting those
/// waiting at PreBind for their volumes.
pub(super) struct Loop {
    pub(super) scheduler: Arc<PodScheduler>,
    pub(super) queue: SchedulingQueue<PodKey>,
    /// When each pending pod was first seen (the e2e latency).
    pub(super) first_seen: HashMap<PodKey, Instant>,
    /// The last error reported per pod: each distinct one is reported (Event, condition) once.
    pub(super) reported: ErrorReports<PodKey>,
    /// Per pod, the number of the report last written, behind a lock its report tasks take in turn: two failures
    /// reported moments apart are written in order, so the condition ends with the newer text (a task that finds
    /// a newer report written skips its own).
    pub(super) report_order: HashMap<PodKey, (u64, Arc<tokio::sync::Mutex<u64>>)>,
    /// Pods whose last error degraded the policy.
    pub(super) faults: HashSet<PodKey>,
    /// Tasks: the one scheduling cycle and the bindings behind it.
    pub(super) tasks: JoinSet<()>,
    /// The tasks not joined yet, and those of them that gave their binding slot back ([`Done::Released`]).
    pub(super) live: HashSet<tokio::task::Id>,
    pub(super) released: HashSet<tokio::task::Id>,
    pub(super) done: (mpsc::UnboundedSender<Done>, mpsc::UnboundedReceiver<Done>),
    pub(super) cycle_running: bool,
    /// Gang scheduling's state, when the policy keeps GangScheduling or Coscheduling.
    pub(super) gangs: Option<gangs::Gangs>,
}

impl Loop {
    pub(super) fn new(scheduler: Arc<PodScheduler>, gangs: Option<gangs::Gangs>) -> Loop {
        let reported = ErrorReports::new(
            &scheduler.policy.metadata.name,
            KIND,
            scheduler.ctx.metrics.clone(),
            scheduler.ctx.health.clone(),
        );
        Loop {
            gangs,
            queue: SchedulingQueue::new(Timings::default()),
            scheduler,
            first_seen: HashMap::new(),
            reported,
            report_order: HashMap::new(),
            faults: HashSet::new(),
            tasks: JoinSet::new(),
            live: HashSet::new(),
            released: HashSet::new(),
            done: mpsc::unbounded_channel(),
            cycle_running: false,
        }
    }

    pub(super) fn rule(&self) -> &str {
        &self.scheduler.policy.metadata.name
    }

    pub(super) async fn run(
        mut self,
        subscriptions: Vec<Subscription>,
        mut events: ClusterEvents,
        stop: CancellationToken,
    ) -> Result<(), WorkerError> {
        let mut changes: SelectAll<_> = subscriptions.into_iter().map(|s| Box::pin(s.into_stream())).collect();
        let mut late = self.gangs.as_mut().and_then(|gangs| gangs.take_late());
        self.on_gang_change(Watched::Pods, &Change::Resync);
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
                    self.on_gang_change(Watched::of(&key), &Change::Resync);
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
    pub(super) fn start_next_cycle(&mut self) {
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
    pub(super) fn spawn(&mut self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = self.tasks.spawn(task);
        self.live.insert(handle.id());
    }

    /// Tasks holding a binding slot: all but those whose pods wait at PreBind for their volumes.
    pub(super) fn busy_slots(&self) -> usize {
        self.tasks.len().saturating_sub(self.released.len())
    }

    /// A pod or node notification of the watches: pods of this policy join, change in or leave the queue.
    pub(super) async fn on_change(&mut self, kind: &KindKey, change: &Change) {
        let watched = Watched::of(kind);
        let is_pods = watched == Watched::Pods;
        self.on_gang_change(watched, change);
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
    pub(super) fn resync_pending(&mut self) {
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
    pub(super) fn on_event(&mut self, sequence: u64, event: &Arc<ClusterEvent>) {
        let moved = self.queue.on_event(sequence, event, now(), &self.scheduler.hints);
        self.count_requeues(&moved);
    }

    pub(super) fn count_requeues(&self, moved: &[Requeue<PodKey>]) {
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

    pub(super) async fn on_done(&mut self, done: Done) {
        // A gang's run ends in one message, so no pod is popped before every member is back in the queue.
        if let Done::Run(all) = done {
            for done in all {
                self.on_member_done(done).await;
            }
            return;
        }
        self.on_member_done(done).await;
    }

    pub(super) async fn on_member_done(&mut self, done: Done) {
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
    pub(super) async fn preempted(&mut self, key: PodKey, error: Option<String>) {
        let moved = self.queue.preemption_finished(&key, error.is_some(), now());
        self.count_requeues(moved.as_slice());
        if let Some(error) = error {
            self.report(key, SchedulingError::Preemption(error)).await;
        }
    }

    /// Forgets a pod that left: its queue entry, its reports and faults.
    pub(super) fn settle(&mut self, key: &PodKey) {
        self.queue.delete(key);
        self.first_seen.remove(key);
        self.reported.forget(key);
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

    pub(super) fn update_gauges(&self) {
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
