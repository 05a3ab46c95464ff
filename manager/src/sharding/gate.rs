//! Which units' work may start on this replica right now, and how much of each unit's work is still running.
//!
//! The unit loop opens a unit until its renew deadline and closes it on a stop, a loss or an abandoned hold; the
//! Reconciler runner asks before each reconcile and holds a [`WorkGuard`] while it runs, the supervisor holds one
//! while a whole-set unit's worker runs. A handover releases a unit's Lease only once its count is zero.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::UnitLabels;

use ruleplane_config::sharding::{Unit, shard_of};
use tokio::time::Instant;

/// Until when a unit's work may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    Closed,
    /// Until this replica's renew deadline: the unit loop moves it on with every confirmed renewal. A loop that
    /// stops ticking (stuck, starved) closes the unit by letting the deadline pass.
    Until(Instant),
    /// No Leases (`--leader-elect=false`, a single replica): always.
    Always,
}

impl Open {
    fn admits(self, now: Instant) -> bool {
        match self {
            Open::Closed => false,
            Open::Until(deadline) => now < deadline,
            Open::Always => true,
        }
    }
}

/// The gate of every unit of this replica.
#[derive(Debug)]
pub struct ShardGate {
    count: u32,
    /// Whether the units are shared through Leases (else always open: one replica without Leases).
    shared: bool,
    /// Indexed by shard, then the two whole-set units.
    open: Mutex<Vec<Open>>,
    in_flight: Vec<AtomicUsize>,
    /// Keys waiting per shard, summed over every runner's [`QueuedShare`].
    queued: Vec<AtomicI64>,
}

impl ShardGate {
    /// A gate with every unit closed.
    pub fn closed(count: u32) -> Arc<Self> {
        Self::with(count, Open::Closed)
    }

    /// A gate with every unit open for good: the process runs without Leases.
    pub fn always_open(count: u32) -> Arc<Self> {
        Self::with(count, Open::Always)
    }

    fn with(count: u32, open: Open) -> Arc<Self> {
        let slots = count as usize + 2;
        Arc::new(ShardGate {
            count,
            shared: open != Open::Always,
            open: Mutex::new(vec![open; slots]),
            in_flight: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
            queued: (0..count).map(|_| AtomicI64::new(0)).collect(),
        })
    }

    /// How many shards parents are split into.
    pub fn count(&self) -> u32 {
        self.count
    }

    fn slot(&self, unit: Unit) -> usize {
        match unit {
            Unit::ReconcilerShard(shard) => (shard.min(self.count.saturating_sub(1))) as usize,
            Unit::ResourceDefinitions => self.count as usize,
            Unit::Schedulers => self.count as usize + 1,
        }
    }

    /// Opens or closes one unit.
    pub fn set(&self, unit: Unit, open: Open) {
        let slot = self.slot(unit);
        self.open.lock().unwrap_or_else(|e| e.into_inner())[slot] = open;
    }

    /// Whether work of `unit` may start now.
    pub fn admits(&self, unit: Unit) -> bool {
        let slot = self.slot(unit);
        self.open.lock().unwrap_or_else(|e| e.into_inner())[slot].admits(Instant::now())
    }

    /// Starts one piece of `unit`'s work if the unit is open: counted until the guard drops (a finished or
    /// aborted reconcile alike).
    pub fn enter(self: &Arc<Self>, unit: Unit) -> Option<WorkGuard> {
        self.admits(unit).then(|| self.count_in(unit))
    }

    /// Counts work of `unit` that runs whatever the gate says (a whole-set worker the supervisor started).
    pub fn count_in(self: &Arc<Self>, unit: Unit) -> WorkGuard {
        let slot = self.slot(unit);
        self.in_flight[slot].fetch_add(1, Ordering::SeqCst);
        WorkGuard {
            gate: self.clone(),
            slot,
        }
    }

    /// How much of `unit`'s work is running.
    pub fn in_flight(&self, unit: Unit) -> usize {
        self.in_flight[self.slot(unit)].load(Ordering::SeqCst)
    }

    /// The shard of a Reconciler parent.
    pub fn shard_of(&self, namespace: Option<&str>, name: &str) -> u32 {
        shard_of(namespace.unwrap_or_default(), name, self.count)
    }
}

/// One runner's share of the keys waiting per shard: added to the gate's totals (and the
/// `ruleplane_shard_queue_depth` gauges), taken back when the runner ends.
pub struct QueuedShare {
    gate: Arc<ShardGate>,
    gauges: Family<UnitLabels, Gauge>,
    mine: Vec<i64>,
}

impl QueuedShare {
    pub fn new(gate: Arc<ShardGate>, gauges: Family<UnitLabels, Gauge>) -> Self {
        let mine = vec![0; gate.count as usize];
        QueuedShare { gate, gauges, mine }
    }

    /// Replaces this runner's counts (keys waiting per shard).
    pub fn set(&mut self, counts: &[i64]) {
        for (shard, (mine, now)) in self
            .mine
            .iter_mut()
            .zip(counts.iter().chain(std::iter::repeat(&0)))
            .enumerate()
        {
            let delta = *now - *mine;
            if delta == 0 {
                continue;
            }
            *mine = *now;
            let total = self.gate.queued[shard].fetch_add(delta, Ordering::SeqCst) + delta;
            self.gauges
                .get_or_create(&UnitLabels {
                    unit: Unit::ReconcilerShard(u32::try_from(shard).unwrap_or(u32::MAX)).to_string(),
                })
                .set(total);
        }
    }

    /// Whether this runner counts any key waiting.
    pub fn any(&self) -> bool {
        self.mine.iter().any(|n| *n != 0)
    }
}

impl Drop for QueuedShare {
    fn drop(&mut self) {
        self.set(&[]);
    }
}

/// One running piece of a unit's work.
#[derive(Debug)]
pub struct WorkGuard {
    gate: Arc<ShardGate>,
    slot: usize,
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        self.gate.in_flight[self.slot].fetch_sub(1, Ordering::SeqCst);
    }
}

/// The Reconciler parents a worker caches and works on: fixed for the worker's life (a change of owned shards
/// restarts the Reconciler workers), while the gate says at each reconcile whether its shard is still open.
#[derive(Debug, Clone)]
pub struct ShardScope {
    pub count: u32,
    /// The shards owned when the worker started; `None`: all of them (no filter at the watches).
    pub owned: Option<Arc<BTreeSet<u32>>>,
    pub gate: Arc<ShardGate>,
}

impl ShardScope {
    /// Every shard, always open: a process without Leases.
    #[cfg(test)]
    pub fn everything(count: u32) -> Self {
        ShardScope {
            count,
            owned: None,
            gate: ShardGate::always_open(count),
        }
    }

    /// The scope of `owned` shards, or of all of them when `owned` holds every shard.
    pub fn of(gate: Arc<ShardGate>, owned: &BTreeSet<u32>) -> Self {
        let count = gate.count();
        let all = owned.len() == count as usize;
        ShardScope {
            count,
            owned: (!all).then(|| Arc::new(owned.clone())),
            gate,
        }
    }

    /// Whether the parent `namespace/name` is in this scope.
    pub fn covers(&self, namespace: Option<&str>, name: &str) -> bool {
        match &self.owned {
            None => true,
            Some(owned) => owned.contains(&self.gate.shard_of(namespace, name)),
        }
    }

    /// The label selector term that picks this scope's children (`None`: every shard).
    pub fn child_selector(&self) -> Option<String> {
        let owned = self.owned.as_ref()?;
        let values: Vec<String> = owned.iter().map(u32::to_string).collect();
        Some(format!(
            "{} in ({})",
            ruleplane_config::ownership::SHARD_LABEL,
            values.join(",")
        ))
    }

    /// A short text naming the scope, part of a sharded watch's key: `None` only without Leases (the shards never
    /// change). With Leases even the scope of every shard is named, so that its watches end like the others
    /// when the replica's shards change (a replica that held every unit alone kept caching every parent and child
    /// after a second replica took half).
    pub fn key_text(&self) -> Option<String> {
        if !self.gate.shared {
            return None;
        }
        let selector = self.child_selector().unwrap_or_else(|| "all".to_owned());
        Some(format!("{}:{selector}", self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn work_starts_only_while_its_unit_is_open_and_is_counted_until_it_ends() {
        let gate = ShardGate::closed(4);
        let shard = Unit::ReconcilerShard(2);
        assert!(gate.enter(shard).is_none(), "closed");
        gate.set(shard, Open::Until(Instant::now() + Duration::from_secs(10)));
        let first = gate.enter(shard).expect("open");
        let second = gate.enter(shard).expect("open");
        assert_eq!(gate.in_flight(shard), 2);
        assert_eq!(gate.in_flight(Unit::ReconcilerShard(1)), 0, "counted per unit");
        drop(first);
        assert_eq!(gate.in_flight(shard), 1);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(gate.enter(shard).is_none(), "the renew deadline closes it on its own");
        drop(second);
        assert_eq!(gate.in_flight(shard), 0);
        let running = gate.count_in(Unit::Schedulers);
        assert_eq!(gate.in_flight(Unit::Schedulers), 1);
        assert_eq!(gate.in_flight(Unit::ResourceDefinitions), 0);
        drop(running);
        assert!(ShardGate::always_open(4).enter(shard).is_some());
    }

    #[test]
    fn queue_depths_are_summed_over_runners_and_taken_back_when_one_ends() {
        let gate = ShardGate::closed(3);
        let gauges = Family::<UnitLabels, Gauge>::default();
        let depth = |shard: u32| {
            gauges
                .get_or_create(&UnitLabels {
                    unit: Unit::ReconcilerShard(shard).to_string(),
                })
                .get()
        };
        let mut one = QueuedShare::new(gate.clone(), gauges.clone());
        let mut two = QueuedShare::new(gate.clone(), gauges.clone());
        one.set(&[2, 0, 5]);
        two.set(&[1, 4, 0]);
        assert_eq!((depth(0), depth(1), depth(2)), (3, 4, 5));
        one.set(&[0, 0, 1]);
        assert_eq!((depth(0), depth(1), depth(2)), (1, 4, 1));
        assert!(two.any());
        drop(two);
        assert_eq!(
            (depth(0), depth(1), depth(2)),
            (0, 0, 1),
            "a runner's share goes with it"
        );
        drop(one);
        assert_eq!(depth(2), 0);
    }

    #[test]
    fn a_scope_of_some_shards_filters_parents_and_children_and_of_all_shards_does_not() {
        let gate = ShardGate::closed(32);
        let owned: BTreeSet<u32> = [19, 6].into();
        let scope = ShardScope::of(gate.clone(), &owned);
        assert!(scope.covers(Some("default"), "web"), "shard 19");
        assert!(scope.covers(Some("team-a"), "db"), "shard 6");
        assert!(!scope.covers(None, "cluster-wide"), "shard 18");
        assert_eq!(scope.child_selector().as_deref(), Some("ruleplane.dev/shard in (6,19)"));
        assert_eq!(scope.key_text().as_deref(), Some("32:ruleplane.dev/shard in (6,19)"));
        let all = ShardScope::of(gate, &(0..32).collect());
        assert!(all.owned.is_none() && all.child_selector().is_none());
        assert!(all.covers(None, "cluster-wide"));
        assert_eq!(
            all.key_text().as_deref(),
            Some("32:all"),
            "ended like the others when shards change"
        );
        assert_eq!(
            ShardScope::everything(32).key_text(),
            None,
            "without Leases: plain watches"
        );
    }
}
