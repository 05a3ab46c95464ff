//! The one loop under every worker: watch notifications → keyed work queue → reconcile with bounded
//! concurrency → requeue, back off or wait for a change; with the metrics and reporting every worker shares.
//!
//! A worker supplies a [`Reconcile`]: which keys a change concerns, and how to reconcile one key (fetch →
//! decide → apply → report). Errors are categorised: transient ones back off per key (controllers: 500 ms
//! doubling to 60 s), permanent ones wait for a change of what the key reads. Each distinct error of a key is logged
//! and handed to [`Reconcile::report_error`] once, not on every retry.

mod errors;
mod queue;

use std::collections::{HashMap, VecDeque};
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::SelectAll;
use futures::{FutureExt, StreamExt};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub use errors::{ErrorReports, Failure};
pub use queue::WorkQueue;

use crate::context::WorkerError;
use crate::health::{Health, WorkerState};
use crate::metrics::{Metrics, UnitLabels};
use crate::sharding::{QueuedShare, ShardGate, WorkGuard};
use crate::watch_hub::{Change, KindKey, Subscription};
use ruleplane_config::sharding::Unit;

/// What to do with a key after a successful reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Reconcile again after this long even without a change (resync).
    RequeueAfter(Duration),
    /// Reconcile again only when a watched change concerns the key.
    AwaitChange,
}

/// A successful reconcile: what to do with the key next, and what the reconcile leaves to report.
#[derive(Debug)]
pub struct Reconciled<P> {
    pub action: Action,
    /// Written by [`Reconcile::report`] after the reconcile, with fewer in flight than reconciles: see
    /// [`reports_in_flight`].
    pub report: Option<P>,
}

impl<P> From<Action> for Reconciled<P> {
    fn from(action: Action) -> Self {
        Reconciled { action, report: None }
    }
}

/// Reports (a parent's status) in flight at once for a worker reconciling `concurrency` keys at once: a quarter
/// (at least one). Reports go out after their reconcile has freed its slot, so in a burst the work that converges
/// (children applied) takes most of the apiserver and the reports follow; a reconcile's slot is not held for the
/// report's round trip.
pub fn reports_in_flight(concurrency: usize) -> usize {
    concurrency.div_ceil(4).max(1)
}

/// An error a reconcile can end with.
pub trait ReconcileError: Display {
    /// Short, bounded category: the `category` label of `ruleplane_reconcile_errors_total`.
    fn category(&self) -> &'static str;
    /// Permanent errors need a change (of the rule, the object or the cluster) to go away: no retry until one.
    fn is_permanent(&self) -> bool;
    /// Whether the error marks the rule degraded in `/readyz` (a pod that fits nowhere is an outcome, not a
    /// fault of the scheduler).
    fn degrades_rule(&self) -> bool {
        true
    }
}

/// A worker's reconcile logic, driven by [`Runner`].
pub trait Reconcile: Send + Sync + 'static {
    type Key: Clone + Eq + Hash + Ord + Debug + Send + Sync + 'static;
    type Error: ReconcileError + Send + 'static;

    /// The keys a change of a watched kind concerns; for [`Change::Resync`], every key the worker knows of.
    fn keys_for(&self, kind: &KindKey, change: &Change) -> Vec<Self::Key>;

    /// About how many cached objects `keys_for` reads for a [`Change::Resync`] (default: too many to count):
    /// a few are read in place, many are a [`whole_cache_step`].
    fn resync_reads(&self) -> usize {
        usize::MAX
    }

    /// The shard a key belongs to, for a worker whose keys are sharded over replicas (default: none). A key of a
    /// shard the runner's gate has closed is dropped when due, not reconciled: another replica owns it now.
    fn shard(&self, _key: &Self::Key) -> Option<u32> {
        None
    }

    /// What a reconcile may leave to report (e.g. a status to write); `Infallible` for workers that report
    /// within the reconcile.
    type Report: Send + 'static;

    /// Reconciles one key.
    fn reconcile(&self, key: &Self::Key) -> impl Future<Output = Result<Reconciled<Self::Report>, Self::Error>> + Send;

    /// Writes what a reconcile of `key` left to report. The key counts as being reconciled until it is written
    /// (a change meanwhile reconciles it again afterwards, never concurrently), except while the report waits for
    /// its turn: a change then drops it, since the reconcile that change brings decides the report anew. An error
    /// is handled as the reconcile's own (backoff, `report_error`).
    fn report(&self, _key: &Self::Key, _report: Self::Report) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async { Ok(()) }
    }

    /// Called once per distinct error of a key (e.g. to publish a Warning Event), not on every retry.
    fn report_error(&self, _key: &Self::Key, _error: &Self::Error) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Asks the runner to reconcile a key again, from inside a reconcile: for a change the worker learns of only
/// then (one it held back while its own write was in flight, and the answer shows was not its write).
pub struct Requeue<K>(tokio::sync::mpsc::UnboundedSender<K>);

/// The runner's end of [`Requeue`].
pub struct Requeued<K>(Option<tokio::sync::mpsc::UnboundedReceiver<K>>);

impl<K> Requeue<K> {
    pub fn channel() -> (Requeue<K>, Requeued<K>) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        (Requeue(sender), Requeued(Some(receiver)))
    }

    /// Queues `key` now; a key being reconciled runs again once it is done.
    pub fn key(&self, key: K) {
        // Only fails once the runner has stopped, when nothing is reconciled any more.
        let _ = self.0.send(key);
    }
}

impl<K> Requeued<K> {
    /// For workers that never requeue from inside a reconcile.
    pub fn none() -> Self {
        Requeued(None)
    }

    async fn next(&mut self) -> Option<K> {
        match &mut self.0 {
            Some(receiver) => receiver.recv().await,
            None => std::future::pending().await,
        }
    }

    /// The next requeued key if one is waiting (tests).
    #[cfg(test)]
    pub fn try_next(&mut self) -> Option<K> {
        self.0.as_mut()?.try_recv().ok()
    }
}

tokio::task_local! {
    /// When the key being reconciled became due: the change that queued it arrived, or its requeue time came.
    static DUE: tokio::time::Instant;
}

/// Time since the key being reconciled became due (inside a reconcile the runner started; else `None`): the
/// start of an "event → child applied" latency.
pub fn since_due() -> Option<Duration> {
    DUE.try_with(tokio::time::Instant::elapsed).ok()
}

/// A reconcile that ended: its key, its result, how long it took, and its shard's guard.
type Finished<R> = (
    <R as Reconcile>::Key,
    Result<Reconciled<<R as Reconcile>::Report>, <R as Reconcile>::Error>,
    Duration,
    Option<WorkGuard>,
);
/// A report written: its key, how the write went, and the action its reconcile chose.
type Written<R> = (<R as Reconcile>::Key, Result<(), <R as Reconcile>::Error>, Action);

/// How transient errors are retried: after `start`, doubling per failure, never longer than `cap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub start: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// Controllers' backoff: 500 ms doubling to 60 s.
    pub const CONTROLLER: Backoff = Backoff {
        start: Duration::from_millis(500),
        cap: Duration::from_secs(60),
    };

    /// The wait before retry number `failures` (0-based).
    pub fn delay(&self, failures: u32) -> Duration {
        self.start
            .saturating_mul(2u32.saturating_pow(failures.min(16)))
            .min(self.cap)
    }
}

/// Notifications taken in at once before dispatching work (bounds the time the loop spends not dispatching).
const MAX_DRAINED: usize = 4096;

/// Runs one worker's reconcile loop with shared metrics and health reporting.
pub struct Runner {
    pub rule: String,
    pub kind: &'static str,
    pub concurrency: usize,
    pub backoff: Backoff,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    /// Which shards' keys may be reconciled now, and how many reconciles of each run (a handover waits for
    /// them); `None`: every key, uncounted.
    pub gate: Option<Arc<ShardGate>>,
}

impl Runner {
    /// Runs until `stop`; `initial` keys are reconciled first, `requeued` ones whenever the worker asks. Fails when
    /// every watch has ended.
    pub async fn run<R: Reconcile>(
        &self,
        reconciler: Arc<R>,
        subscriptions: Vec<Subscription>,
        mut requeued: Requeued<R::Key>,
        initial: Vec<R::Key>,
        stop: CancellationToken,
    ) -> Result<(), WorkerError> {
        let labels = Metrics::labels(&self.rule, self.kind);
        let mut changes: SelectAll<_> = subscriptions.into_iter().map(|s| Box::pin(s.into_stream())).collect();
        let watching = !changes.is_empty();
        let mut queue = WorkQueue::new();
        let mut reports = Reports::<R>::new(reports_in_flight(self.concurrency));
        for key in initial {
            reports.enqueue(&mut queue, key);
        }
        let mut failures: HashMap<R::Key, u32> = HashMap::new();
        let mut reported = ErrorReports::new(&self.rule, self.kind, self.metrics.clone(), self.health.clone());
        // Changes heard while the caches filled (a watch's first list ends in a resync) are taken in before the
        // first reconcile starts. Taken in after, such a resync queued every key a second time and fell on the
        // first writes in flight, which a worker then cannot trust: 1,000 rules starting together sent a few
        // dozen children a second create.
        while let Some(Some((kind, change))) = changes.next().now_or_never() {
            for key in keys_for(&*reconciler, &kind, &change, &reported) {
                reports.enqueue(&mut queue, key);
            }
        }
        let mut in_flight: JoinSet<Finished<R>> = JoinSet::new();
        let concurrency = self.concurrency.max(1);
        // Keys waiting per shard, sampled about once a second: counting them is a pass over the queue.
        let mut depths = self.gate.as_ref().map(|gate| {
            (
                QueuedShare::new(gate.clone(), self.metrics.shard_queue_depth.clone()),
                gate.count(),
            )
        });
        let mut depths_at = tokio::time::Instant::now();
        loop {
            while in_flight.len() < concurrency
                && let Some((key, waited)) = queue.pop_due_waited()
            {
                self.metrics
                    .queue_wait
                    .get_or_create(&labels)
                    .observe(waited.as_secs_f64());
                let guard = match (&self.gate, reconciler.shard(&key)) {
                    (Some(gate), Some(shard)) => match gate.enter(Unit::ReconcilerShard(shard)) {
                        Some(guard) => {
                            self.metrics
                                .shard_reconciles
                                .get_or_create(&UnitLabels {
                                    unit: Unit::ReconcilerShard(shard).to_string(),
                                })
                                .inc();
                            Some(guard)
                        }
                        None => {
                            queue.done(&key);
                            failures.remove(&key);
                            continue;
                        }
                    },
                    _ => None,
                };
                let reconciler = reconciler.clone();
                let started = tokio::time::Instant::now();
                // A waited time longer than the clock's age cannot happen; were it to, the start is the safe answer.
                let due = started.checked_sub(waited).unwrap_or(started);
                in_flight.spawn(DUE.scope(due, async move {
                    let result = reconciler.reconcile(&key).await;
                    (key, result, started.elapsed(), guard)
                }));
            }
            reports.start(&reconciler);
            if let Some((share, shards)) = depths.as_mut()
                && (depths_at.elapsed() >= Duration::from_secs(1) || (queue.len() == 0 && share.any()))
            {
                depths_at = tokio::time::Instant::now();
                let mut counts = vec![0_i64; *shards as usize];
                for shard in queue.keys().filter_map(|key| reconciler.shard(key)) {
                    if let Some(count) = counts.get_mut(shard as usize) {
                        *count += 1;
                    }
                }
                share.set(&counts);
            }
            self.metrics
                .queue_depth
                .get_or_create(&labels)
                .set(i64::try_from(queue.len()).unwrap_or(i64::MAX));
            self.metrics
                .reports_waiting
                .get_or_create(&labels)
                .set(i64::try_from(reports.waiting.len()).unwrap_or(i64::MAX));
            let next_due = queue.next_due();
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                change = changes.next(), if watching => match change {
                    Some((kind, change)) => {
                        for key in keys_for(&*reconciler, &kind, &change, &reported) {
                            reports.enqueue(&mut queue, key);
                        }
                        // Take in everything already waiting before dispatching: under churn, ten changes of
                        // one object become one reconcile instead of one now and another right after.
                        for _ in 0..MAX_DRAINED {
                            let Some(Some((kind, change))) = changes.next().now_or_never() else { break };
                            for key in keys_for(&*reconciler, &kind, &change, &reported) {
                                reports.enqueue(&mut queue, key);
                            }
                        }
                    }
                    None => return Err(WorkerError::WatchEnded(self.rule.clone())),
                },
                Some(key) = requeued.next() => {
                    reports.enqueue(&mut queue, key);
                }
                Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                    let Ok((key, result, elapsed, guard)) = done else {
                        // A panicking reconcile: the supervisor's restart is the right response.
                        return Err(WorkerError::ReconcilePanicked(self.rule.clone()));
                    };
                    self.metrics.reconciles.get_or_create(&labels).inc();
                    self.metrics.reconcile_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
                    match result {
                        // The key stays active until its report is written; a change heard during the
                        // reconcile already made the report stale: the reconcile it brings decides anew.
                        Ok(Reconciled { action, report: Some(report) }) if !queue.is_queued_again(&key) => {
                            reports.hold(key, report, action, guard);
                        }
                        result => {
                            queue.done(&key);
                            let result = result.map(|reconciled| reconciled.action);
                            self.finish(&*reconciler, &mut queue, &mut failures, &mut reported, key, result).await;
                        }
                    }
                }
                Some(done) = reports.writing.join_next(), if !reports.writing.is_empty() => {
                    let Ok((key, result, action)) = done else {
                        return Err(WorkerError::ReconcilePanicked(self.rule.clone()));
                    };
                    queue.done(&key);
                    let result = result.map(|()| action);
                    self.finish(&*reconciler, &mut queue, &mut failures, &mut reported, key, result).await;
                }
                _ = sleep_until(next_due), if next_due.is_some() && in_flight.len() < concurrency => {}
            }
        }
    }

    async fn finish<R: Reconcile>(
        &self,
        reconciler: &R,
        queue: &mut WorkQueue<R::Key>,
        failures: &mut HashMap<R::Key, u32>,
        reported: &mut ErrorReports<R::Key>,
        key: R::Key,
        result: Result<Action, R::Error>,
    ) {
        match result {
            Ok(action) => {
                failures.remove(&key);
                if reported.forget(&key) {
                    info!(rule = %self.rule, key = ?key, "reconciled after earlier errors");
                }
                if reported.is_empty() {
                    self.health.set_rule(&self.rule, self.kind, WorkerState::Running);
                }
                if let Action::RequeueAfter(delay) = action {
                    queue.add_after(key, delay);
                }
            }
            Err(error) => {
                let message = error.to_string();
                let failure = Failure {
                    category: error.category(),
                    degrades: error.degrades_rule(),
                    message: &message,
                    same_as: message.clone(),
                };
                if reported.failed(&key, failure, "reconcile failed") {
                    reconciler.report_error(&key, &error).await;
                }
                if !error.is_permanent() {
                    let count = failures.entry(key.clone()).or_insert(0);
                    queue.add_after(key, self.backoff.delay(*count));
                    *count = count.saturating_add(1);
                }
            }
        }
    }
}

/// Reports left by reconciles: waiting for their turn (first come, first served), and being written.
struct Reports<R: Reconcile> {
    /// With the reconcile's shard guard: a handover waits until the report is written too.
    waiting: HashMap<R::Key, (R::Report, Action, Option<WorkGuard>)>,
    /// The waiting keys in arrival order; a key whose report was dropped is skipped when its turn comes.
    order: VecDeque<R::Key>,
    writing: JoinSet<Written<R>>,
    limit: usize,
}

impl<R: Reconcile> Reports<R> {
    fn new(limit: usize) -> Self {
        Reports {
            waiting: HashMap::new(),
            order: VecDeque::new(),
            writing: JoinSet::new(),
            limit: limit.max(1),
        }
    }

    /// Queues `key` for a reconcile now. A report of the key still waiting for its turn is dropped: it was
    /// decided before this change, and the reconcile the change brings decides it anew (one status write
    /// instead of a stale one and then the right one). A report being written is not stopped: the key is
    /// reconciled again once it is written.
    fn enqueue(&mut self, queue: &mut WorkQueue<R::Key>, key: R::Key) {
        if self.waiting.remove(&key).is_some() {
            queue.done(&key);
        }
        queue.add_after(key, Duration::ZERO);
    }

    /// Keeps a reconcile's report until its turn.
    fn hold(&mut self, key: R::Key, report: R::Report, action: Action, guard: Option<WorkGuard>) {
        self.waiting.insert(key.clone(), (report, action, guard));
        self.order.push_back(key);
    }

    /// Starts writing waiting reports while fewer than the limit are being written.
    fn start(&mut self, reconciler: &Arc<R>) {
        while self.writing.len() < self.limit
            && let Some(key) = self.order.pop_front()
        {
            let Some((report, action, guard)) = self.waiting.remove(&key) else {
                continue;
            };
            let reconciler = reconciler.clone();
            self.writing.spawn(async move {
                let result = reconciler.report(&key, report).await;
                drop(guard);
                (key, result, action)
            });
        }
    }
}

/// The keys a change concerns; a resync reads every cached object of a kind (30,000 metadata parses, a
/// quarter of a second, after a relist of 10,000 parents), so it is a [`whole_cache_step`].
///
/// A resync also brings back every key whose last reconcile failed (`reported`): a key deleted while the watch
/// was down is in no cache any more, so no other change names it, and its error (a permanent one is never
/// retried) would keep the rule degraded. Its reconcile finds it gone and clears that.
fn keys_for<R: Reconcile>(
    reconciler: &R,
    kind: &KindKey,
    change: &Change,
    reported: &ErrorReports<R::Key>,
) -> Vec<R::Key> {
    if !matches!(change, Change::Resync) {
        return reconciler.keys_for(kind, change);
    }
    let mut keys = whole_cache_step(reconciler.resync_reads(), || reconciler.keys_for(kind, change));
    let listed: std::collections::HashSet<&R::Key> = keys.iter().collect();
    let failed: Vec<R::Key> = reported.keys().filter(|key| !listed.contains(key)).cloned().collect();
    keys.extend(failed);
    keys
}

/// Below this many objects a whole-cache step runs in place (about 10 ms of metadata parsing at most): handing
/// the thread's tasks over costs a thread of its own per step running at once, and 200 small rules resyncing
/// together started 200 threads.
const WHOLE_CACHE_STEP_IN_PLACE: usize = 1_000;

/// Runs a synchronous step that reads a whole cache of about `objects` objects. A large one runs with the
/// thread's other tasks handed to another thread meanwhile (on a multi-thread runtime): a Lease renewal, a
/// probe's answer or another rule's watch never waits behind it, however few worker threads the manager runs.
pub fn whole_cache_step<T>(objects: usize, step: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi_thread = Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    if multi_thread && objects >= WHOLE_CACHE_STEP_IN_PLACE {
        tokio::task::block_in_place(step)
    } else {
        step()
    }
}

/// Runs a CPU-bound step whose length data read from the cluster decides (rendering a parent's templates: up to
/// the render budget) with the thread's other tasks handed to another thread meanwhile, so a hostile parent
/// never delays a Lease renewal or a probe.
pub fn cpu_step<T>(step: impl FnOnce() -> T) -> T {
    whole_cache_step(usize::MAX, step)
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
