//! One SchedulerPolicy's scheduling queue as kube-scheduler v1.35 keeps it, pure and told the time.

// activeQ, backoffQ, the unschedulable pool, in-flight pods and the events they missed, moved by the queueing hints.
//
// Upstream: `backend/queue/scheduling_queue.go`, `active_queue.go`, `backoff_queue.go` and `unschedulable_pods.go`
// under `pkg/scheduler/` of k8s.io/kubernetes@v1.35.4. With SchedulerQueueingHints (GA) and
// SchedulerPopFromBackoffQ (beta, on):
//
// - activeQ is ordered by PrioritySort: higher `spec.priority` first, then the earlier queue timestamp (the time
//   the pod was added, or last failed). A PodGroup member of a policy that gang-schedules in the Coscheduling
//   dialect sorts instead by Coscheduling's QueueSort (`coscheduling.go` `Less`): its group's time, then its
//   `namespace/name` (the worker says which pods, [`SchedulingQueue::sort_in_group`]); the others keep PrioritySort.
// - A failure with rejecting plugins counts an unschedulable attempt, one without (an error) a consecutive error;
//   the backoff is 1 s doubling per count up to 10 s from the failure, its expiry truncated to the whole second,
//   and a pod is backing off while its expiry is not before the current whole second (`backoff_queue.go:222-260`).
// - The pods a hint moves while still backing off wait in backoffQ, flushed every whole second; when activeQ is
//   empty the next pod is popped from backoffQ anyway (PopFromBackoffQ, `active_queue.go:282-306`), but never from
//   the errors' backoff.
// - Unschedulable pods older than 5 minutes are retried by a flush every 30 s (`scheduling_queue.go:942-963`).
// - Events heard while a pod is in its scheduling cycle are replayed through the hints when it fails
//   (`determineSchedulingHintForInFlightPod`, `scheduling_queue.go:783`), so a change racing the cycle is not
//   lost. Ruleplane numbers the events its cache applies: an event the failed decision already saw is not
//   replayed (the decision took it into account).

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use super::engine::queueing_hints::{ClusterEvent, DEFAULT_PREEMPTION, Hint, HintPod, QueueingHints, SCHEDULING_GATES};

/// A point in time: the wall clock since the Unix epoch (whole seconds matter: backoff expiries are aligned to
/// them, as kube-scheduler aligns them to Go's wall-clock seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Moment(pub Duration);

impl Moment {
    /// Truncated to the whole second (`time.Time.Truncate(time.Second)`).
    pub(crate) fn whole_second(self) -> Moment {
        Moment(Duration::from_secs(self.0.as_secs()))
    }

    /// The start of the next whole second.
    pub(crate) fn next_second(self) -> Moment {
        Moment(Duration::from_secs(self.0.as_secs() + 1))
    }

    fn after(self, duration: Duration) -> Moment {
        Moment(self.0.saturating_add(duration))
    }

    fn since(self, earlier: Moment) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

/// The queue's timings (kube-scheduler's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// `podInitialBackoffSeconds`: 1 s.
    pub initial_backoff: Duration,
    /// `podMaxBackoffSeconds`: 10 s.
    pub max_backoff: Duration,
    /// `podMaxInUnschedulablePodsDuration`: 5 minutes.
    pub max_unschedulable: Duration,
    /// How often unschedulable pods are checked against that limit: 30 s.
    pub leftover_flush: Duration,
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_unschedulable: Duration::from_secs(300),
            leftover_flush: Duration::from_secs(30),
        }
    }
}

impl Timings {
    /// `calculateBackoffDuration`: initial × 2^(count−1), capped.
    fn backoff(&self, count: u32) -> Duration {
        if count == 0 {
            return Duration::ZERO;
        }
        let shift = count - 1;
        if shift >= 31 || self.initial_backoff > self.max_backoff / (1u32 << shift) {
            return self.max_backoff;
        }
        self.initial_backoff * (1u32 << shift)
    }
}

/// Where a pod is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Active,
    /// Waiting out its backoff after a rejection.
    Backoff,
    /// Waiting out its backoff after an error.
    ErrorBackoff,
    /// Waiting for a change a hint says could help (or gated by PreEnqueue).
    Unschedulable,
    /// Popped, in its scheduling cycle.
    InFlight,
    /// Assumed and being bound: out of the queue until the binding succeeds or fails.
    Binding,
}

/// How a failed attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Rejected: the plugins that rejected the pod or nodes (`UnschedulablePlugins`) and those that asked it to
    /// wait (`PendingPlugins`).
    Unschedulable {
        plugins: BTreeSet<Arc<str>>,
        pending: BTreeSet<Arc<str>>,
    },
    /// An error (a plugin failed, the binding failed): no plugin rejected the pod.
    Error,
}

/// `queueingStrategy`: what an event means for a waiting pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strategy {
    Skip,
    AfterBackoff,
    Immediately,
}

/// A pod moved out of the unschedulable pool (or kept from entering it) by an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requeue<K> {
    pub key: K,
    /// The event's label (`ClusterEvent.Label`).
    pub event: String,
    pub to: Place,
}

/// Coscheduling's QueueSort place of a PodGroup member among pods of its priority (`Coscheduling.Less`): its group's
/// time (the group's last rejection, else the PodGroup's creation), then its `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOrder {
    pub time: Moment,
    pub name: Arc<str>,
}

/// Where a pod sorts in activeQ (and among equal expiries in backoffQ): higher priority first, then the earlier
/// time; ties fall to PrioritySort's earlier entry, or to Coscheduling's name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Order {
    priority: Reverse<i32>,
    time: Moment,
    /// `namespace/name` of a pod sorted by Coscheduling; `None` under PrioritySort.
    name: Option<Arc<str>>,
    sequence: u64,
}

/// `QueuedPodInfo`: a pod and its queue bookkeeping.
#[derive(Debug)]
struct QueuedPod {
    pod: Arc<HintPod>,
    priority: i32,
    /// When it was added, or last failed.
    timestamp: Moment,
    attempts: u32,
    unschedulable_count: u32,
    consecutive_errors: u32,
    unschedulable_plugins: BTreeSet<Arc<str>>,
    pending_plugins: BTreeSet<Arc<str>>,
    /// The PreEnqueue plugin holding it: SchedulingGates, or DefaultPreemption while its preemption runs.
    gating: Option<&'static str>,
    /// An event that would have moved it came while DefaultPreemption held it.
    missed_while_held: bool,
    backoff_expiry: Moment,
    place: Place,
    /// Ties in the orders fall to the earlier entry.
    sequence: u64,
    /// The last cache event its last decision saw.
    seen: u64,
    /// Sorted by Coscheduling's QueueSort rather than PrioritySort.
    group_order: Option<GroupOrder>,
}

impl QueuedPod {
    fn order(&self) -> Order {
        match &self.group_order {
            Some(group) => Order {
                priority: Reverse(self.priority),
                time: group.time,
                name: Some(group.name.clone()),
                sequence: 0,
            },
            None => Order {
                priority: Reverse(self.priority),
                time: self.timestamp,
                name: None,
                sequence: self.sequence,
            },
        }
    }
}

/// Pods waiting in a queue, counted by place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub in_flight: usize,
}

/// One policy's scheduling queue, keyed by `K` (the worker's pod key).
#[derive(Debug)]
pub struct SchedulingQueue<K> {
    timings: Timings,
    pods: HashMap<K, QueuedPod>,
    /// The queue sort's order.
    active: BTreeSet<(Order, K)>,
    /// `podBackoffQ`: earlier expiry, then the queue sort's order.
    backoff: BTreeSet<(Moment, Order, K)>,
    /// `podErrorBackoffQ`: earlier expiry.
    error_backoff: BTreeSet<(Moment, u64, K)>,
    unschedulable: BTreeSet<K>,
    /// Events heard since each in-flight pod was popped: (cache sequence, event).
    in_flight: HashMap<K, Vec<(u64, Arc<ClusterEvent>)>>,
    /// Preemptors whose victims are being deleted (async preemption): DefaultPreemption's PreEnqueue holds them.
    preempting: HashSet<K>,
    sequence: u64,
}

impl<K: Clone + Eq + Hash + Ord> SchedulingQueue<K> {
    pub fn new(timings: Timings) -> SchedulingQueue<K> {
        SchedulingQueue {
            timings,
            pods: HashMap::new(),
            active: BTreeSet::new(),
            backoff: BTreeSet::new(),
            error_backoff: BTreeSet::new(),
            unschedulable: BTreeSet::new(),
            in_flight: HashMap::new(),
            preempting: HashSet::new(),
            sequence: 0,
        }
    }

    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// Where the pod is, if the queue holds it.
    pub fn place(&self, key: &K) -> Option<Place> {
        self.pods.get(key).map(|p| p.place)
    }

    /// The pod as the queue holds it.
    pub fn pod(&self, key: &K) -> Option<&Arc<HintPod>> {
        self.pods.get(key).map(|p| &p.pod)
    }

    /// How many times the pod was popped.
    pub fn attempts(&self, key: &K) -> u32 {
        self.pods.get(key).map_or(0, |p| p.attempts)
    }

    /// The plugins that rejected the pod's last attempt (and SchedulingGates while it is gated).
    #[cfg(test)]
    pub(crate) fn unschedulable_plugins(&self, key: &K) -> Option<&BTreeSet<Arc<str>>> {
        self.pods.get(key).map(|p| &p.unschedulable_plugins)
    }

    pub fn counts(&self) -> Counts {
        let binding = self.pods.values().filter(|p| p.place == Place::Binding).count();
        Counts {
            active: self.active.len(),
            backoff: self.backoff.len() + self.error_backoff.len(),
            unschedulable: self.unschedulable.len(),
            in_flight: self.in_flight.len() + binding,
        }
    }

    /// A new pending pod (`Add`): to activeQ, or to the unschedulable pool while SchedulingGates holds it. A pod
    /// already queued is updated instead.
    pub fn add(&mut self, key: K, pod: Arc<HintPod>, now: Moment, hints: &QueueingHints) {
        if self.pods.contains_key(&key) {
            self.update(key, pod, now, hints);
            return;
        }
        self.sequence += 1;
        let queued = QueuedPod {
            priority: pod.priority(),
            pod,
            timestamp: now,
            attempts: 0,
            unschedulable_count: 0,
            consecutive_errors: 0,
            unschedulable_plugins: BTreeSet::new(),
            pending_plugins: BTreeSet::new(),
            gating: None,
            missed_while_held: false,
            backoff_expiry: Moment::default(),
            place: Place::Unschedulable,
            sequence: self.sequence,
            seen: 0,
            group_order: None,
        };
        self.pods.insert(key.clone(), queued);
        self.move_to_active(&key, false);
    }

    /// The pending pod changed (`Update`). In flight, the change is kept for its failure; queued, the pod is
    /// updated in place; in the unschedulable pool, each kind of change is offered to the hints of the plugins
    /// that rejected it, and the first that is worth it moves the pod.
    pub fn update(&mut self, key: K, pod: Arc<HintPod>, now: Moment, hints: &QueueingHints) -> Option<Requeue<K>> {
        let Some(queued) = self.pods.get(&key) else {
            self.add(key, pod, now, hints);
            return None;
        };
        let place = queued.place;
        // Only a pod in flight or waiting is told what changed (a pod kept as text is parsed for it).
        let mut events: Vec<Arc<ClusterEvent>> = Vec::new();
        if matches!(place, Place::InFlight | Place::Unschedulable) {
            let (old, new) = (queued.pod.pod().clone(), pod.pod().clone());
            events = super::engine::queueing_hints::pod_update_actions(&old, &new)
                .into_iter()
                .map(|action| Arc::new(ClusterEvent::pod(action, Some(old.clone()), Some(new.clone()))))
                .collect();
        }
        match place {
            Place::InFlight => {
                // The pod's own change is always news to its decision.
                if let Some(seen) = self.in_flight.get_mut(&key) {
                    seen.extend(events.into_iter().map(|e| (u64::MAX, e)));
                }
                self.set_pod(&key, pod);
                None
            }
            Place::Active | Place::Backoff | Place::ErrorBackoff | Place::Binding => {
                self.unlink(&key);
                self.set_pod(&key, pod);
                self.link(&key);
                None
            }
            Place::Unschedulable => {
                self.set_pod(&key, pod);
                for event in events {
                    let strategy = self.worth_requeuing(&key, &event, hints);
                    if strategy == Strategy::Skip {
                        continue;
                    }
                    let to = self.requeue(&key, strategy, now);
                    if to != Place::Unschedulable {
                        return Some(Requeue {
                            key,
                            event: event.label(),
                            to,
                        });
                    }
                }
                None
            }
        }
    }

    /// Sorts the pod by Coscheduling's QueueSort at `order` (a PodGroup member), or by PrioritySort (`None`). Its
    /// place in the queue is kept; only its rank among the pods waiting there changes.
    pub fn sort_in_group(&mut self, key: &K, order: Option<GroupOrder>) {
        if self.pods.get(key).is_none_or(|p| p.group_order == order) {
            return;
        }
        self.unlink(key);
        if let Some(queued) = self.pods.get_mut(key) {
            queued.group_order = order;
        }
        self.link(key);
    }

    fn set_pod(&mut self, key: &K, pod: Arc<HintPod>) {
        if let Some(queued) = self.pods.get_mut(key) {
            queued.priority = pod.priority();
            queued.pod = pod;
        }
    }

    /// The pod is gone (deleted, bound by someone else, no longer this policy's).
    pub fn delete(&mut self, key: &K) {
        self.unlink(key);
        self.in_flight.remove(key);
        self.preempting.remove(key);
        self.pods.remove(key);
    }

    /// The next pod to schedule: the first of activeQ, else the first of backoffQ (PopFromBackoffQ). It is in
    /// flight until [`Self::assumed`] or [`Self::failed`].
    pub fn pop(&mut self) -> Option<K> {
        let key = match self.active.pop_first() {
            Some((_, key)) => key,
            None => self.backoff.pop_first()?.2,
        };
        if let Some(queued) = self.pods.get_mut(&key) {
            queued.attempts += 1;
            queued.place = Place::InFlight;
        }
        self.in_flight.insert(key.clone(), Vec::new());
        Some(key)
    }

    /// Pops a named pod that waits in the queue (any place but in flight or binding), as [`Self::pop`] does: the
    /// other members of a gang popped with the first one. `false` when the pod is not waiting.
    pub fn take(&mut self, key: &K) -> bool {
        if !self.pods.get(key).is_some_and(|p| {
            matches!(
                p.place,
                Place::Active | Place::Backoff | Place::ErrorBackoff | Place::Unschedulable
            )
        }) {
            return false;
        }
        self.unlink(key);
        if let Some(queued) = self.pods.get_mut(key) {
            queued.attempts += 1;
            queued.place = Place::InFlight;
        }
        self.in_flight.insert(key.clone(), Vec::new());
        true
    }

    /// `Activate`: pods waiting in the unschedulable pool or in backoff go to activeQ at once (PreEnqueue still
    /// runs), as a plugin asks for pods a change it saw could help (GangScheduling: a member pod or the Workload
    /// added). Returns the pods moved.
    pub fn activate<'a>(&mut self, keys: impl IntoIterator<Item = &'a K>) -> Vec<K>
    where
        K: 'a,
    {
        let mut moved = Vec::new();
        for key in keys {
            let waiting = self
                .pods
                .get(key)
                .is_some_and(|p| matches!(p.place, Place::Backoff | Place::ErrorBackoff | Place::Unschedulable));
            if waiting && self.move_to_active(key, false) == Place::Active {
                moved.push(key.clone());
            }
        }
        moved
    }

    /// The pod was assumed on a node (`Done`): out of flight, bound next.
    pub fn assumed(&mut self, key: &K) {
        self.in_flight.remove(key);
        if let Some(queued) = self.pods.get_mut(key) {
            queued.place = Place::Binding;
        }
    }

    /// The pod's attempt failed (`AddUnschedulableIfNotPresent`): its counts and timestamp are updated and the
    /// events it missed while in flight decide whether it waits in the unschedulable pool or is retried. `pod`
    /// is the pod as it was decided on; `seen` the last cache event that decision saw.
    pub fn failed(
        &mut self,
        key: &K,
        failure: Failure,
        pod: Option<Arc<HintPod>>,
        seen: u64,
        now: Moment,
        hints: &QueueingHints,
    ) -> Option<Place> {
        let missed = self.in_flight.remove(key).unwrap_or_default();
        let timings = self.timings;
        let queued = self.pods.get_mut(key)?;
        if !matches!(queued.place, Place::InFlight | Place::Binding) {
            return Some(queued.place);
        }
        if let Some(pod) = pod {
            queued.priority = pod.priority();
            queued.pod = pod;
        }
        match failure {
            Failure::Unschedulable { plugins, pending } if !(plugins.is_empty() && pending.is_empty()) => {
                queued.unschedulable_count += 1;
                queued.consecutive_errors = 0;
                queued.unschedulable_plugins = plugins;
                queued.pending_plugins = pending;
            }
            _ => {
                queued.consecutive_errors += 1;
                queued.unschedulable_plugins.clear();
                queued.pending_plugins.clear();
            }
        }
        queued.timestamp = now;
        queued.seen = queued.seen.max(seen);
        let count = if queued.consecutive_errors > 0 {
            queued.consecutive_errors
        } else {
            queued.unschedulable_count
        };
        queued.backoff_expiry = if count == 0 {
            Moment::default()
        } else {
            now.after(timings.backoff(count)).whole_second()
        };
        queued.place = Place::Unschedulable;
        let seen = queued.seen;
        let strategy = self.strategy_for_missed(key, &missed, seen, hints);
        Some(self.requeue(key, strategy, now))
    }

    /// `determineSchedulingHintForInFlightPod`.
    fn strategy_for_missed(
        &self,
        key: &K,
        missed: &[(u64, Arc<ClusterEvent>)],
        seen: u64,
        hints: &QueueingHints,
    ) -> Strategy {
        let Some(queued) = self.pods.get(key) else {
            return Strategy::Skip;
        };
        if queued.unschedulable_plugins.is_empty() && queued.pending_plugins.is_empty() {
            return Strategy::AfterBackoff;
        }
        let mut strategy = Strategy::Skip;
        for (sequence, event) in missed {
            if *sequence <= seen {
                continue;
            }
            match self.worth_requeuing(key, event, hints) {
                Strategy::Skip => {}
                Strategy::Immediately => return Strategy::Immediately,
                Strategy::AfterBackoff => {
                    strategy = Strategy::AfterBackoff;
                    if queued.pending_plugins.is_empty() {
                        return strategy;
                    }
                }
            }
        }
        strategy
    }

    /// A cluster event (`MoveAllToActiveOrBackoffQueue`): each unschedulable pod whose rejecting plugins' hints
    /// say the event could help moves to backoffQ or activeQ; pods in flight keep it for their failure.
    /// `sequence` is the cache's number of the event.
    pub fn on_event(
        &mut self,
        sequence: u64,
        event: &Arc<ClusterEvent>,
        now: Moment,
        hints: &QueueingHints,
    ) -> Vec<Requeue<K>> {
        let candidates: Vec<K> = self
            .unschedulable
            .iter()
            .filter(|key| self.pods.get(*key).is_some_and(|p| p.seen < sequence))
            .cloned()
            .collect();
        let moved = self.move_pods(candidates, event, now, hints);
        for missed in self.in_flight.values_mut() {
            missed.push((sequence, event.clone()));
        }
        moved
    }

    /// `movePodsToActiveOrBackoffQueue`.
    fn move_pods(
        &mut self,
        candidates: Vec<K>,
        event: &ClusterEvent,
        now: Moment,
        hints: &QueueingHints,
    ) -> Vec<Requeue<K>> {
        let mut moved = Vec::new();
        for key in candidates {
            let Some(queued) = self.pods.get(&key) else { continue };
            // A gated pod moves only on an event of its gating plugin (wildcards included: they do not match
            // the gating plugin's registrations).
            if queued
                .gating
                .is_some_and(|plugin| event.is_wildcard() || !hints.is_registered(plugin, event))
            {
                continue;
            }
            let strategy = self.worth_requeuing(&key, event, hints);
            if strategy == Strategy::Skip {
                continue;
            }
            let to = self.requeue(&key, strategy, now);
            if to != Place::Unschedulable {
                moved.push(Requeue {
                    key,
                    event: event.label(),
                    to,
                });
            }
        }
        moved
    }

    /// `isPodWorthRequeuing` (`scheduling_queue.go:456-544`).
    fn worth_requeuing(&self, key: &K, event: &ClusterEvent, hints: &QueueingHints) -> Strategy {
        let Some(queued) = self.pods.get(key) else {
            return Strategy::Skip;
        };
        if queued.unschedulable_plugins.is_empty() && queued.pending_plugins.is_empty() {
            return Strategy::AfterBackoff;
        }
        if event.is_wildcard() {
            return Strategy::AfterBackoff;
        }
        let mut strategy = Strategy::Skip;
        for plugin in queued.unschedulable_plugins.union(&queued.pending_plugins) {
            if hints.hint(plugin, &queued.pod, event) != Some(Hint::Queue) {
                continue;
            }
            if queued.pending_plugins.contains(plugin) {
                return Strategy::Immediately;
            }
            if queued.pending_plugins.is_empty() {
                return Strategy::AfterBackoff;
            }
            strategy = Strategy::AfterBackoff;
        }
        strategy
    }

    /// `requeuePodWithQueueingStrategy`: where a pod of the unschedulable pool goes. A move DefaultPreemption's
    /// hold stopped is remembered for the end of the hold.
    fn requeue(&mut self, key: &K, strategy: Strategy, now: Moment) -> Place {
        let to = match strategy {
            Strategy::Skip => {
                self.move_to_unschedulable(key);
                return Place::Unschedulable;
            }
            Strategy::AfterBackoff if self.is_backing_off(key, now) => self.move_to_backoff(key),
            _ => self.move_to_active(key, false),
        };
        if to == Place::Unschedulable
            && let Some(queued) = self.pods.get_mut(key)
            && queued.gating == Some(DEFAULT_PREEMPTION)
        {
            queued.missed_while_held = true;
        }
        to
    }

    /// `isPodBackingoff`: its expiry is not before the current whole second.
    fn is_backing_off(&self, key: &K, now: Moment) -> bool {
        self.pods.get(key).is_some_and(|p| {
            let count = if p.consecutive_errors > 0 {
                p.consecutive_errors
            } else {
                p.unschedulable_count
            };
            count > 0 && p.backoff_expiry >= now.whole_second()
        })
    }

    /// Runs PreEnqueue (SchedulingGates, then DefaultPreemption's hold): whether the pod may be queued.
    fn pre_enqueue(&mut self, key: &K) -> bool {
        let preempting = self.preempting.contains(key);
        let Some(queued) = self.pods.get_mut(key) else {
            return false;
        };
        let gating = if queued.pod.is_gated() {
            Some(SCHEDULING_GATES)
        } else if preempting {
            Some(DEFAULT_PREEMPTION)
        } else {
            None
        };
        queued.gating = gating;
        if let Some(plugin) = gating {
            queued.unschedulable_plugins.insert(Arc::from(plugin));
            return false;
        }
        queued.missed_while_held = false;
        true
    }

    /// The pod's preemption runs (its victims are being deleted): until [`Self::preemption_finished`],
    /// DefaultPreemption's PreEnqueue holds it (`waiting for the preemption for this pod to be finished`, kube-scheduler's async preemption).
    pub fn preempting(&mut self, key: &K) {
        self.preempting.insert(key.clone());
    }

    /// Whether the pod's preemption runs.
    #[cfg(test)]
    pub(crate) fn is_preempting(&self, key: &K) -> bool {
        self.preempting.contains(key)
    }

    /// The pod's preemption is over. The hold only ends: the pod moves on the next event its rejecting plugins'
    /// hints accept, as in kube-scheduler; one that came while it was held (the last victim's deletion seen before
    /// the end was) moves it now. `failed`: the preemption failed, and the pod is retried at once
    /// (kube-scheduler's `Activate`).
    pub fn preemption_finished(&mut self, key: &K, failed: bool, now: Moment) -> Option<Requeue<K>> {
        if !self.preempting.remove(key) {
            return None;
        }
        let queued = self.pods.get(key)?;
        let (event, strategy) = match queued.place {
            // `Activate`: out of the unschedulable pool or backoff, whatever held it.
            Place::Unschedulable | Place::Backoff | Place::ErrorBackoff if failed => {
                ("ForceActivate", Strategy::Immediately)
            }
            Place::Unschedulable if queued.gating == Some(DEFAULT_PREEMPTION) && queued.missed_while_held => {
                ("PreemptionFinished", Strategy::AfterBackoff)
            }
            _ => return None,
        };
        let to = self.requeue(key, strategy, now);
        (to != Place::Unschedulable).then(|| Requeue {
            key: key.clone(),
            event: event.to_string(),
            to,
        })
    }

    /// `moveToActiveQ` (PreEnqueue skipped for a pod that completed its backoff).
    fn move_to_active(&mut self, key: &K, completed_backoff: bool) -> Place {
        if !completed_backoff && !self.pre_enqueue(key) {
            self.move_to_unschedulable(key);
            return Place::Unschedulable;
        }
        self.unlink(key);
        if let Some(queued) = self.pods.get_mut(key) {
            queued.place = Place::Active;
        }
        self.link(key);
        Place::Active
    }

    /// `moveToBackoffQ`.
    fn move_to_backoff(&mut self, key: &K) -> Place {
        if !self.pre_enqueue(key) {
            self.move_to_unschedulable(key);
            return Place::Unschedulable;
        }
        self.unlink(key);
        let place = match self.pods.get(key) {
            Some(p) if p.unschedulable_plugins.is_empty() && p.pending_plugins.is_empty() => Place::ErrorBackoff,
            _ => Place::Backoff,
        };
        if let Some(queued) = self.pods.get_mut(key) {
            queued.place = place;
        }
        self.link(key);
        place
    }

    fn move_to_unschedulable(&mut self, key: &K) {
        self.unlink(key);
        if let Some(queued) = self.pods.get_mut(key) {
            queued.place = Place::Unschedulable;
            self.unschedulable.insert(key.clone());
        }
    }

    /// Removes the pod from its place's order (not from the queue).
    fn unlink(&mut self, key: &K) {
        let Some(p) = self.pods.get(key) else { return };
        match p.place {
            Place::Active => {
                self.active.remove(&(p.order(), key.clone()));
            }
            Place::Backoff => {
                self.backoff.remove(&(p.backoff_expiry, p.order(), key.clone()));
            }
            Place::ErrorBackoff => {
                self.error_backoff.remove(&(p.backoff_expiry, p.sequence, key.clone()));
            }
            Place::Unschedulable => {
                self.unschedulable.remove(key);
            }
            Place::InFlight | Place::Binding => {}
        }
    }

    /// Puts the pod into its place's order.
    fn link(&mut self, key: &K) {
        let Some(p) = self.pods.get(key) else { return };
        match p.place {
            Place::Active => {
                self.active.insert((p.order(), key.clone()));
            }
            Place::Backoff => {
                self.backoff.insert((p.backoff_expiry, p.order(), key.clone()));
            }
            Place::ErrorBackoff => {
                self.error_backoff.insert((p.backoff_expiry, p.sequence, key.clone()));
            }
            Place::Unschedulable => {
                self.unschedulable.insert(key.clone());
            }
            Place::InFlight | Place::Binding => {}
        }
    }

    /// `flushBackoffQCompleted`, run at each whole second: pods whose backoff is over go to activeQ.
    pub fn flush_backoff_completed(&mut self, now: Moment) -> usize {
        let mut done = Vec::new();
        for (_, _, key) in &self.backoff {
            if self.is_backing_off(key, now) {
                break;
            }
            done.push(key.clone());
        }
        for (_, _, key) in &self.error_backoff {
            if self.is_backing_off(key, now) {
                break;
            }
            done.push(key.clone());
        }
        for key in &done {
            self.move_to_active(key, true);
        }
        done.len()
    }

    /// `flushUnschedulablePodsLeftover`, run every 30 s: pods unschedulable for longer than 5 minutes are retried
    /// (after their backoff), as for a wildcard event.
    pub fn flush_unschedulable_leftover(&mut self, now: Moment, hints: &QueueingHints) -> Vec<Requeue<K>> {
        let limit = self.timings.max_unschedulable;
        let old: Vec<K> = self
            .unschedulable
            .iter()
            .filter(|key| self.pods.get(*key).is_some_and(|p| now.since(p.timestamp) > limit))
            .cloned()
            .collect();
        let event = ClusterEvent::wildcard("UnschedulableTimeout");
        self.move_pods(old, &event, now, hints)
    }

    /// When the next backoff flush is due: the next whole second, while backoffQ holds pods.
    pub fn next_backoff_flush(&self, now: Moment) -> Option<Moment> {
        (!self.backoff.is_empty() || !self.error_backoff.is_empty()).then(|| now.next_second())
    }

    /// Whether a pod can be popped now.
    #[cfg(test)]
    pub(crate) fn has_next(&self) -> bool {
        !self.active.is_empty() || !self.backoff.is_empty()
    }

    /// The pods in the unschedulable pool.
    #[cfg(test)]
    pub(crate) fn unschedulable_pods(&self) -> impl Iterator<Item = &K> {
        self.unschedulable.iter()
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
