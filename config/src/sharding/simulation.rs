//! A deterministic simulation of replicas running the unit protocol against a model apiserver: every step checks
//! that no unit's work runs on two replicas, and after the faults stop every live replica is a member again and
//! every unit runs on its owner within a bounded time.
//!
//! Each replica carries out the manager's own plan ([`plan_tick`], [`after_refusal`], a [`LeaseView`] fed by a
//! watch) against a model apiserver that stores Leases with a resourceVersion and refuses a write based on any
//! other version (a replace of a deleted Lease included, as the real one refuses it on its uid precondition).
//! Faults, in a random interleaving: watches that lag, break (a `410 Expired`) and relist — missing every event
//! of the gap, deletes included; the whole apiserver gone for longer than a lease, while replicas keep ticking;
//! peers deleting a member Lease they saw expire; lost answers of stored writes; replicas that crash, pause, join
//! or leave; each replica's clock drifting ±2%. Now and then nobody ticks for up to 40 s at once (the whole
//! cluster stalled). Wall clocks are not modelled: no decision reads one.
//!
//! Longer than most files: the model apiserver, the replicas' watches and their checks are one model, read together.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{
    Action, AfterRefusal, Event, LeaseRecord, LeaseView, Local, Slot, TickInput, Timings, Unit, after_refusal, assign,
    based_on_seen, member_lease_name, plan_tick, unit_lease_name, units,
};

const PREFIX: &str = "ruleplane";

/// After the faults stop, every live replica is a member and every unit runs on its owner within this long:
/// a crashed member's Lease expires (15 s), the units it held expire after it (15 s more, counted from the
/// last version seen), and a handover or two follow.
const CONVERGENCE_BOUND: Duration = Duration::from_secs(75);

/// SplitMix64: small, deterministic, good enough to drive a simulation.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }

    fn per_mille(&mut self, chance: u64) -> bool {
        self.below(1000) < chance
    }
}

/// A Lease as the model apiserver stores it.
#[derive(Debug, Clone)]
struct Stored {
    version: String,
    record: LeaseRecord,
}

/// Why the model apiserver refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    Conflict,
    NotFound,
    /// No answer: the apiserver is down.
    Down,
}

#[derive(Default)]
struct Apiserver {
    leases: BTreeMap<String, Stored>,
    last_version: u64,
    /// Down until this time (ms).
    down_until: u64,
}

impl Apiserver {
    fn up(&self, t: u64) -> bool {
        t >= self.down_until
    }

    fn get(&self, name: &str, t: u64) -> Result<Option<Stored>, Refused> {
        if !self.up(t) {
            return Err(Refused::Down);
        }
        Ok(self.leases.get(name).cloned())
    }

    /// A create (`based_on` None: refused if the Lease exists) or a replace preconditioned on `based_on` (refused
    /// if the Lease is gone).
    fn write(&mut self, name: &str, based_on: Option<&str>, record: LeaseRecord, t: u64) -> Result<Stored, Refused> {
        if !self.up(t) {
            return Err(Refused::Down);
        }
        let current = self.leases.get(name).map(|stored| stored.version.as_str());
        if current != based_on {
            return Err(Refused::Conflict);
        }
        self.last_version += 1;
        let stored = Stored {
            version: self.last_version.to_string(),
            record,
        };
        self.leases.insert(name.to_owned(), stored.clone());
        Ok(stored)
    }

    /// A delete preconditioned on `version`.
    fn delete(&mut self, name: &str, version: &str, t: u64) -> Result<(), Refused> {
        if !self.up(t) {
            return Err(Refused::Down);
        }
        match self.leases.get(name) {
            None => Err(Refused::NotFound),
            Some(stored) if stored.version != version => Err(Refused::Conflict),
            Some(_) => {
                self.leases.remove(name);
                Ok(())
            }
        }
    }

    fn holder(&self, name: &str) -> Option<&str> {
        self.leases.get(name).and_then(|stored| stored.record.holder.as_deref())
    }
}

/// Takes a stored version into a replica's view.
fn see(view: &mut LeaseView<Stored>, name: &str, stored: Stored, now: Duration) {
    let (version, record) = (stored.version.clone(), stored.record.clone());
    view.see(name, &version, record, stored, now);
}

/// How a replica keeps its view: as the manager does, or as it did before a relist replaced the view (the
/// simulation must catch that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keeping {
    /// A relist replaces the view; a read that finds nothing forgets.
    Replaces,
    /// A relist only adds what it lists; a read that finds nothing changes nothing.
    KeepsStale,
}

/// One change a watch delivers.
#[derive(Debug, Clone)]
enum Change {
    Stored(String, Stored),
    Deleted(String),
}

/// A replica's Lease watch.
#[derive(Debug, Clone)]
enum Watch {
    /// Delivers the changes made since it connected, in order, with a lag.
    Connected(Vec<Change>),
    /// Failed (a 410, the apiserver gone): relists at `relist_at`, once the apiserver answers.
    Broken { relist_at: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Up,
    Paused {
        until: u64,
    },
    Crashed,
    /// Left gracefully, everything released.
    Gone,
}

struct Replica {
    id: String,
    /// This replica's clock: `offset + t ± drift` (parts per million) for the simulation's time `t` in ms.
    offset: u64,
    drift_ppm: i64,
    run: Run,
    leaving: bool,
    view: LeaseView<Stored>,
    watch: Watch,
    local: BTreeMap<Slot, Local>,
    /// Its member Lease was stored once: creating it again means a peer deleted it.
    was_member: bool,
}

impl Replica {
    fn clock(&self, t: u64) -> Duration {
        let t = i64::try_from(t).unwrap_or(i64::MAX);
        let ms = i64::try_from(self.offset).unwrap_or(0) + t + t * self.drift_ppm / 1_000_000;
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    fn local(&self, slot: Slot) -> Local {
        self.local.get(&slot).copied().unwrap_or(Local::Idle)
    }

    fn works_on(&self, unit: Unit, t: u64, timings: &Timings) -> bool {
        matches!(self.run, Run::Up | Run::Paused { .. })
            && self.local(Slot::Unit(unit)).runs_work(self.clock(t), timings)
    }
}

/// What happened over a run, so the test can show the interesting paths were taken.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    conflicts: usize,
    lost_answers: usize,
    acquisitions: usize,
    expired_takeovers: usize,
    marks: usize,
    handovers: usize,
    abandons: usize,
    lost_holds: usize,
    crashes: usize,
    pauses: usize,
    joins: usize,
    leaves: usize,
    stalls: usize,
    outages: usize,
    relists: usize,
    forgotten_by_relists: usize,
    member_deletes: usize,
    members_rejoined: usize,
    /// The longest time from the faults' end to convergence, in ms.
    slowest_convergence: u64,
}

impl Stats {
    fn add(&mut self, other: Stats) {
        self.conflicts += other.conflicts;
        self.lost_answers += other.lost_answers;
        self.acquisitions += other.acquisitions;
        self.expired_takeovers += other.expired_takeovers;
        self.marks += other.marks;
        self.handovers += other.handovers;
        self.abandons += other.abandons;
        self.lost_holds += other.lost_holds;
        self.crashes += other.crashes;
        self.pauses += other.pauses;
        self.joins += other.joins;
        self.leaves += other.leaves;
        self.stalls += other.stalls;
        self.outages += other.outages;
        self.relists += other.relists;
        self.forgotten_by_relists += other.forgotten_by_relists;
        self.member_deletes += other.member_deletes;
        self.members_rejoined += other.members_rejoined;
        self.slowest_convergence = self.slowest_convergence.max(other.slowest_convergence);
    }
}

struct Sim {
    seed: u64,
    rng: Rng,
    api: Apiserver,
    replicas: Vec<Replica>,
    /// Milliseconds since the start.
    t: u64,
    timings: Timings,
    units: Vec<Unit>,
    keeping: Keeping,
    stats: Stats,
    joined: usize,
}

impl Sim {
    fn new(seed: u64, replicas: usize, shards: u32, keeping: Keeping) -> Sim {
        let mut sim = Sim {
            seed,
            rng: Rng(seed),
            api: Apiserver::default(),
            replicas: Vec::new(),
            t: 0,
            timings: Timings::default(),
            units: units(shards),
            keeping,
            stats: Stats::default(),
            joined: 0,
        };
        for _ in 0..replicas {
            sim.join();
        }
        sim.stats.joins = 0;
        sim
    }

    fn join(&mut self) {
        let offset = self.rng.range(0, 1_000_000);
        let drift_ppm = i64::try_from(self.rng.below(40_001)).unwrap_or(0) - 20_000;
        self.replicas.push(Replica {
            id: format!("ruleplane-{:x}-r{}", self.rng.below(0xfffff), self.joined),
            offset,
            drift_ppm,
            run: Run::Up,
            leaving: false,
            view: LeaseView::default(),
            watch: Watch::Broken { relist_at: self.t },
            local: BTreeMap::new(),
            was_member: false,
        });
        self.joined += 1;
        self.stats.joins += 1;
    }

    /// A replica that is up and not leaving, picked at random.
    fn pick_active(&mut self) -> Option<usize> {
        let active: Vec<usize> = (0..self.replicas.len())
            .filter(|i| self.replicas[*i].run == Run::Up && !self.replicas[*i].leaving)
            .collect();
        (!active.is_empty()).then(|| active[self.rng.below(active.len() as u64) as usize])
    }

    fn active_count(&self) -> usize {
        self.replicas
            .iter()
            .filter(|r| matches!(r.run, Run::Up | Run::Paused { .. }) && !r.leaving)
            .count()
    }

    /// Something happens to the cluster, now and then.
    fn fault(&mut self) {
        if self.rng.per_mille(2) {
            self.t += self.rng.range(5_000, 40_000);
            self.stats.stalls += 1;
        }
        if self.rng.per_mille(2) && self.api.up(self.t) {
            // Longer than a lease, as a control-plane upgrade or an etcd outage: the replicas keep ticking.
            self.api.down_until = self.t + self.rng.range(16_000, 45_000);
            self.stats.outages += 1;
        }
        if self.rng.per_mille(6)
            && self.active_count() > 1
            && let Some(i) = self.pick_active()
        {
            self.replicas[i].run = Run::Crashed;
            self.stats.crashes += 1;
        }
        if self.rng.per_mille(8) && self.active_count() < 7 {
            self.join();
        }
        if self.rng.per_mille(5)
            && self.active_count() > 1
            && let Some(i) = self.pick_active()
        {
            self.replicas[i].leaving = true;
            self.stats.leaves += 1;
        }
        if self.rng.per_mille(6)
            && let Some(i) = self.pick_active()
        {
            let until = self.t + self.rng.range(1_000, 30_000);
            self.replicas[i].run = Run::Paused { until };
            self.stats.pauses += 1;
        }
        if self.rng.per_mille(10)
            && let Some(i) = self.pick_active()
        {
            // A 410 Expired (etcd compacted past the watch's version).
            let relist_at = self.t + self.rng.range(100, 5_000);
            self.replicas[i].watch = Watch::Broken { relist_at };
        }
    }

    /// One step: time moves on, maybe a fault, then some replicas tick in a random order, the invariant
    /// checked after each.
    fn step(&mut self, chaos: bool) {
        self.t += self.rng.range(50, 600);
        if chaos {
            self.fault();
        }
        for replica in &mut self.replicas {
            if let Run::Paused { until } = replica.run
                && self.t >= until
            {
                replica.run = Run::Up;
            }
        }
        let mut order: Vec<usize> = (0..self.replicas.len())
            .filter(|i| self.replicas[*i].run == Run::Up)
            .collect();
        for i in (1..order.len()).rev() {
            order.swap(i, self.rng.below(i as u64 + 1) as usize);
        }
        for i in order {
            if self.rng.per_mille(700) {
                self.tick(i);
                self.check_no_overlap();
            }
        }
    }

    /// A change stored by the model apiserver reaches every connected watch.
    fn broadcast(&mut self, change: &Change) {
        for replica in &mut self.replicas {
            if let Watch::Connected(queue) = &mut replica.watch {
                queue.push(change.clone());
            }
        }
    }

    /// The watch of replica `i`: it breaks while the apiserver is down, relists once it is back, and delivers
    /// the changes since in order, some of them not yet.
    fn watch(&mut self, i: usize, now: Duration) {
        let t = self.t;
        let up = self.api.up(t);
        let relist = match &self.replicas[i].watch {
            Watch::Connected(_) if !up => {
                let relist_at = self.api.down_until + self.rng.range(100, 3_000);
                self.replicas[i].watch = Watch::Broken { relist_at };
                return;
            }
            Watch::Broken { relist_at } => up && t >= *relist_at,
            Watch::Connected(_) => false,
        };
        let keeping = self.keeping;
        if relist {
            let replica = &mut self.replicas[i];
            match keeping {
                Keeping::Replaces => replica.view.begin_relist(),
                Keeping::KeepsStale => {}
            }
            for (name, stored) in &self.api.leases {
                replica
                    .view
                    .relisted(name, &stored.version, stored.record.clone(), stored.clone(), now);
            }
            self.stats.forgotten_by_relists += replica.view.end_relist(now).len();
            replica.watch = Watch::Connected(Vec::new());
            self.stats.relists += 1;
            return;
        }
        let Watch::Connected(queue) = &mut self.replicas[i].watch else {
            return;
        };
        let lagging = self.rng.per_mille(200);
        let delivered = if lagging {
            self.rng.below(queue.len() as u64 + 1) as usize
        } else {
            queue.len()
        };
        let changes: Vec<Change> = queue.drain(..delivered).collect();
        let view = &mut self.replicas[i].view;
        for change in changes {
            match change {
                Change::Stored(name, stored) => {
                    see(view, &name, stored, now);
                }
                Change::Deleted(name) => view.forget(&name),
            }
        }
    }

    fn tick(&mut self, i: usize) {
        let timings = self.timings;
        let now = self.replicas[i].clock(self.t);
        self.watch(i, now);
        // The units' workers get on with their work.
        for unit in self.units.clone() {
            let slot = Slot::Unit(unit);
            let local = self.replicas[i].local(slot);
            let next = match local {
                Local::Starting { .. } if self.rng.per_mille(500) => local.on(Event::Started),
                Local::Stopping { in_flight, .. } => local.on(Event::Drained {
                    left: in_flight.saturating_sub(self.rng.below(3) as usize),
                }),
                _ => local,
            };
            self.replicas[i].local.insert(slot, next);
        }
        let replica = &self.replicas[i];
        let plan = plan_tick(&TickInput {
            me: &replica.id,
            prefix: PREFIX,
            units: &self.units,
            view: &replica.view,
            local: &replica.local,
            leaving: replica.leaving,
            now,
            timings: &timings,
        });
        for (name, version) in plan.deletes {
            match self.api.delete(&name, &version, self.t) {
                Ok(()) => {
                    self.stats.member_deletes += 1;
                    self.broadcast(&Change::Deleted(name.clone()));
                    self.replicas[i].view.forget(&name);
                }
                Err(Refused::NotFound) => self.replicas[i].view.forget(&name),
                Err(Refused::Conflict | Refused::Down) => {}
            }
        }
        for (slot, name, action) in plan.actions {
            self.act(i, slot, &name, action, now);
        }
        let replica = &mut self.replicas[i];
        if replica.leaving && replica.local.values().all(|local| *local == Local::Idle) {
            replica.run = Run::Gone;
        }
    }

    /// Carries `action` out as the manager's unit loop does: the write based on the Lease as last seen, then
    /// the state change its answer allows; a refusal reads the Lease back.
    fn act(&mut self, i: usize, slot: Slot, name: &str, action: Action, now: Duration) {
        let replica = &self.replicas[i];
        let me = replica.id.clone();
        let local = replica.local(slot);
        let base = replica
            .view
            .body(name)
            .filter(|seen| based_on_seen(action, local != Local::Idle, Some(&seen.record), &me))
            .cloned();
        let record = match (action, &base) {
            (Action::Acquire, _) => LeaseRecord {
                holder: Some(me.clone()),
                duration: self.timings.lease_duration,
                handover_to: None,
            },
            (Action::Renew, Some(held)) => held.record.clone(),
            (Action::Release, Some(held)) => LeaseRecord {
                holder: None,
                duration: Duration::from_secs(1),
                handover_to: held.record.handover_to.clone(),
            },
            (Action::MarkForHandover, Some(observed)) => LeaseRecord {
                handover_to: Some(me.clone()),
                ..observed.record.clone()
            },
            (Action::Renew | Action::Release | Action::MarkForHandover, None) => {
                self.read_back(i, slot, name, action, now);
                return;
            }
            (Action::StopWork, _) => {
                // A member Lease has no work of its own to drain.
                let in_flight = match slot {
                    Slot::Member => 0,
                    Slot::Unit(_) => self.rng.below(4) as usize,
                };
                self.replicas[i]
                    .local
                    .insert(slot, local.on(Event::StopRequested { in_flight }));
                return;
            }
            (Action::Abandon, _) => {
                self.replicas[i].local.insert(slot, local.on(Event::Abandoned));
                self.stats.abandons += 1;
                return;
            }
            (Action::Wait, _) => return,
        };
        let taken_from = base.as_ref().and_then(|b| b.record.holder.clone());
        let again = slot == Slot::Member && base.is_none() && self.replicas[i].was_member;
        let answer = self
            .api
            .write(name, base.as_ref().map(|b| b.version.as_str()), record, self.t);
        match answer {
            Ok(stored) => {
                self.broadcast(&Change::Stored(name.to_owned(), stored.clone()));
                if self.rng.per_mille(50) {
                    self.stats.lost_answers += 1;
                    return;
                }
                let ours = stored.record.holder.as_deref() == Some(me.as_str());
                let event = match action {
                    Action::Acquire if ours => {
                        self.stats.acquisitions += 1;
                        if taken_from.is_some_and(|holder| holder != me) {
                            self.stats.expired_takeovers += 1;
                        }
                        if again {
                            self.stats.members_rejoined += 1;
                        }
                        if slot == Slot::Member {
                            self.replicas[i].was_member = true;
                        }
                        Some(Event::Acquired { sent: now })
                    }
                    Action::Renew if ours => Some(Event::Renewed { sent: now }),
                    Action::Renew => Some(Event::Lost),
                    Action::Release => {
                        if local != Local::Idle {
                            self.stats.handovers += 1;
                        }
                        Some(Event::Released)
                    }
                    Action::MarkForHandover => {
                        self.stats.marks += 1;
                        None
                    }
                    _ => None,
                };
                let replica = &mut self.replicas[i];
                if let Some(event) = event {
                    replica.local.insert(slot, local.on(event));
                }
                see(&mut replica.view, name, stored, now);
            }
            Err(Refused::Conflict | Refused::NotFound) => {
                self.stats.conflicts += 1;
                self.read_back(i, slot, name, action, now);
            }
            Err(Refused::Down) => {}
        }
    }

    /// After a refused write (or one with nothing to base it on): the Lease read back decides, as
    /// [`after_refusal`] says; a renewal still ours is sent again on the version read.
    fn read_back(&mut self, i: usize, slot: Slot, name: &str, action: Action, now: Duration) {
        let Ok(current) = self.api.get(name, self.t) else {
            return;
        };
        let me = self.replicas[i].id.clone();
        let local = self.replicas[i].local(slot);
        let verdict = after_refusal(local != Local::Idle, current.as_ref().map(|c| &c.record), &me);
        let mut current = current;
        if verdict == AfterRefusal::StillHeld
            && action == Action::Renew
            && let Some(held) = current.clone()
            && let Ok(stored) = self.api.write(name, Some(&held.version), held.record, self.t)
        {
            self.broadcast(&Change::Stored(name.to_owned(), stored.clone()));
            self.replicas[i]
                .local
                .insert(slot, local.on(Event::Renewed { sent: now }));
            current = Some(stored);
        }
        if verdict == AfterRefusal::Lost {
            self.replicas[i].local.insert(slot, local.on(Event::Lost));
            self.stats.lost_holds += 1;
        }
        let view = &mut self.replicas[i].view;
        match current {
            Some(stored) => see(view, name, stored, now),
            None if self.keeping == Keeping::Replaces => view.forget(name),
            None => {}
        }
    }

    /// The invariant: at most one replica works on a unit, and it is the holder the apiserver stores.
    fn check_no_overlap(&self) {
        for unit in &self.units {
            let working: Vec<&str> = self
                .replicas
                .iter()
                .filter(|replica| replica.works_on(*unit, self.t, &self.timings))
                .map(|replica| replica.id.as_str())
                .collect();
            assert!(
                working.len() <= 1,
                "seed {} at {} ms: {unit} worked on by {working:?}",
                self.seed,
                self.t
            );
            if let [worker] = working[..] {
                assert_eq!(
                    self.api.holder(&unit_lease_name(PREFIX, *unit)),
                    Some(worker),
                    "seed {} at {} ms: {unit} worked on by a replica that does not hold it",
                    self.seed,
                    self.t
                );
            }
        }
    }

    /// Liveness: every live replica is a member (its member Lease stored and confirmed), and every unit runs on
    /// its owner among them and nowhere else.
    fn converged(&self) -> Result<(), String> {
        let seed = self.seed;
        let up: Vec<&Replica> = self.replicas.iter().filter(|replica| replica.run == Run::Up).collect();
        let now = |replica: &Replica| replica.clock(self.t);
        for replica in &up {
            if replica.leaving {
                return Err(format!(
                    "seed {seed}: {} never finished leaving: {:?}",
                    replica.id, replica.local
                ));
            }
            let member = member_lease_name(PREFIX, &replica.id);
            if self.api.holder(&member) != Some(replica.id.as_str())
                || !replica.local(Slot::Member).runs_work(now(replica), &self.timings)
            {
                return Err(format!(
                    "seed {seed}: {} is not a member (its Lease: {:?}, its state {:?})",
                    replica.id,
                    self.api.leases.get(&member),
                    replica.local(Slot::Member)
                ));
            }
        }
        let assignment = assign(up.iter().map(|replica| replica.id.as_str()), &self.units);
        for unit in &self.units {
            let owner = assignment.owner(*unit).ok_or(format!("seed {seed}: no live replica"))?;
            for replica in &up {
                let local = replica.local(Slot::Unit(*unit));
                let right = if replica.id == owner {
                    matches!(local, Local::Running { .. })
                } else {
                    local == Local::Idle
                };
                if !right {
                    return Err(format!(
                        "seed {seed}: {unit} is {local:?} on {} (owner {owner})",
                        replica.id
                    ));
                }
            }
            if self.api.holder(&unit_lease_name(PREFIX, *unit)) != Some(owner) {
                return Err(format!("seed {seed}: {unit}'s Lease is not held by its owner {owner}"));
            }
        }
        Ok(())
    }

    /// Chaos for `steps`, then stable membership: convergence within [`CONVERGENCE_BOUND`] of the last fault
    /// (or of the apiserver's return), and still converged two minutes on.
    fn run(&mut self, steps: usize) -> Result<(), String> {
        for _ in 0..steps {
            self.step(true);
        }
        let quiet_from = self.t.max(self.api.down_until);
        let bound = quiet_from + u64::try_from(CONVERGENCE_BOUND.as_millis()).unwrap_or(u64::MAX);
        while self.t < quiet_from || self.converged().is_err() {
            if self.t > bound {
                return self
                    .converged()
                    .map_err(|e| format!("{e}, {CONVERGENCE_BOUND:?} after the faults"));
            }
            self.step(false);
        }
        self.stats.slowest_convergence = self.t - quiet_from;
        let settle_until = self.t + 120_000;
        while self.t < settle_until {
            self.step(false);
        }
        self.converged()
    }
}

#[test]
fn no_unit_ever_runs_on_two_replicas_and_every_replica_rejoins_after_the_faults() {
    let mut total = Stats::default();
    for seed in 0..30 {
        let mut sim = Sim::new(seed, 1 + (seed as usize % 4), 8, Keeping::Replaces);
        if let Err(failure) = sim.run(2_500) {
            panic!("{failure}: {:?}", sim.stats);
        }
        total.add(sim.stats);
    }
    // The paths that matter were all taken (counts over every seed).
    let taken = [
        ("conflicts", total.conflicts),
        ("lost answers", total.lost_answers),
        ("takeovers of another's expired Lease", total.expired_takeovers),
        ("handover marks", total.marks),
        ("handovers (releases after a stop)", total.handovers),
        ("abandoned holds", total.abandons),
        ("lost holds", total.lost_holds),
        ("crashes", total.crashes),
        ("pauses", total.pauses),
        ("joins", total.joins),
        ("leaves", total.leaves),
        ("cluster-wide stalls", total.stalls),
        ("apiserver outages", total.outages),
        ("watch relists", total.relists),
        ("Leases a relist forgot", total.forgotten_by_relists),
        ("member Leases deleted by a peer", total.member_deletes),
        (
            "member Leases created again by their live owner",
            total.members_rejoined,
        ),
    ];
    for (what, count) in taken {
        assert!(count > 0, "no {what} in any run: {total:?}");
    }
    assert!(total.acquisitions > 0);
}

#[test]
fn a_view_that_keeps_what_a_relist_did_not_list_leaves_replicas_out_for_good() {
    // The manager before relists replaced its view: some seed must end with a live replica that is no member.
    let stuck: Vec<String> = (0..30)
        .filter_map(|seed| {
            let mut sim = Sim::new(seed, 2 + (seed as usize % 3), 8, Keeping::KeepsStale);
            sim.run(2_500).err()
        })
        .collect();
    assert!(
        stuck.iter().any(|failure| failure.contains("is not a member")),
        "the simulation no longer catches a stale view: {stuck:?}"
    );
}

#[test]
fn a_stable_set_of_replicas_with_the_default_shards_settles_on_the_assignment() {
    for seed in 100..104 {
        let mut sim = Sim::new(seed, 3 + seed as usize % 3, super::DEFAULT_SHARDS, Keeping::Replaces);
        if let Err(failure) = sim.run(0) {
            panic!("{failure}");
        }
        assert_eq!(
            sim.stats.abandons, 0,
            "seed {seed}: nobody misses a deadline here: {:?}",
            sim.stats
        );
    }
}
