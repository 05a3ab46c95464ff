//! A deterministic simulation of replicas running the unit protocol against a model apiserver: every step checks
//! that no unit's work runs on two replicas, and every run ends with each unit held by its desired owner.
//!
//! The model apiserver stores Leases with a resourceVersion and refuses a write based on any other version, as
//! the real one does. Replicas tick in a random interleaving; each observes every Lease with a lag (a watch that
//! has not delivered the latest version yet), has its own monotonic clock drifting ±2% from the others', loses
//! the answer of some writes that were stored, and may crash (never ticks again), pause (ticks again later, its
//! clock having moved on), join, or leave gracefully. Now and then nobody ticks for up to 40 s at once (the
//! whole cluster stalled, then time steps forward for everyone). Wall clocks are not modelled: no decision
//! reads one.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{
    Action, Event, LeaseRecord, Local, Observed, Timings, Unit, UnitView, assign, decide, member_lease_name,
    member_lease_prefix, members, unit_lease_name, units,
};

const PREFIX: &str = "ruleplane";

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

#[derive(Debug)]
struct Conflict;

#[derive(Default)]
struct Apiserver {
    leases: BTreeMap<String, Stored>,
    last_version: u64,
}

impl Apiserver {
    fn get(&self, name: &str) -> Option<Stored> {
        self.leases.get(name).cloned()
    }

    /// A create (`based_on` None: refused if the Lease exists) or a replace preconditioned on `based_on`.
    fn write(&mut self, name: &str, based_on: Option<&str>, record: LeaseRecord) -> Result<Stored, Conflict> {
        let current = self.leases.get(name).map(|stored| stored.version.as_str());
        if current != based_on {
            return Err(Conflict);
        }
        self.last_version += 1;
        let stored = Stored {
            version: self.last_version.to_string(),
            record,
        };
        self.leases.insert(name.to_owned(), stored.clone());
        Ok(stored)
    }

    fn holder(&self, name: &str) -> Option<&str> {
        self.leases.get(name).and_then(|stored| stored.record.holder.as_deref())
    }
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

/// One replica's side of one unit: its state and the Lease as it last wrote it.
#[derive(Debug, Clone)]
struct Held {
    local: Local,
    lease: Option<Stored>,
}

struct Replica {
    id: String,
    /// This replica's clock: `offset + t ± drift` (parts per million) for the simulation's time `t` in ms.
    offset: u64,
    drift_ppm: i64,
    run: Run,
    leaving: bool,
    observed: BTreeMap<String, Observed>,
    units: BTreeMap<Unit, Held>,
}

impl Replica {
    fn clock(&self, t: u64) -> Duration {
        let t = i64::try_from(t).unwrap_or(i64::MAX);
        let ms = i64::try_from(self.offset).unwrap_or(0) + t + t * self.drift_ppm / 1_000_000;
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    fn works_on(&self, unit: Unit, t: u64, timings: &Timings) -> bool {
        matches!(self.run, Run::Up | Run::Paused { .. })
            && self
                .units
                .get(&unit)
                .is_some_and(|held| held.local.runs_work(self.clock(t), timings))
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
    stats: Stats,
    joined: usize,
}

impl Sim {
    fn new(seed: u64, replicas: usize, shards: u32) -> Sim {
        let mut sim = Sim {
            seed,
            rng: Rng(seed),
            api: Apiserver::default(),
            replicas: Vec::new(),
            t: 0,
            timings: Timings::default(),
            units: units(shards),
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
            observed: BTreeMap::new(),
            units: BTreeMap::new(),
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

    /// One step: time moves on, maybe something happens to the membership, then some replicas tick in a random
    /// order, the invariant checked after each.
    fn step(&mut self, chaos: bool) {
        self.t += self.rng.range(50, 600);
        if chaos {
            if self.rng.per_mille(2) {
                self.t += self.rng.range(5_000, 40_000);
                self.stats.stalls += 1;
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

    fn tick(&mut self, i: usize) {
        let timings = self.timings;
        let t = self.t;
        let now = self.replicas[i].clock(t);
        // The watch: each Lease's latest version arrives, or not yet.
        for (name, stored) in &self.api.leases {
            if self.rng.per_mille(800) {
                let replica = &mut self.replicas[i];
                let previous = replica.observed.remove(name);
                let seen = Observed::see(previous, &stored.version, stored.record.clone(), now);
                replica.observed.insert(name.clone(), seen);
            }
        }
        self.member_lease(i, now);
        let replica = &self.replicas[i];
        let member_prefix = member_lease_prefix(PREFIX);
        let live = members(
            replica
                .observed
                .iter()
                .filter(|(name, _)| name.starts_with(&member_prefix))
                .map(|(_, observed)| observed),
            now,
        );
        let assignment = assign(live.iter().map(String::as_str), &self.units);
        for unit in self.units.clone() {
            let name = unit_lease_name(PREFIX, unit);
            let replica = &self.replicas[i];
            let mut held = replica.units.get(&unit).cloned().unwrap_or(Held {
                local: Local::Idle,
                lease: None,
            });
            // The unit's workers get on with their work.
            match held.local {
                Local::Starting { .. } if self.rng.per_mille(500) => held.local = held.local.on(Event::Started),
                Local::Stopping { in_flight, .. } => {
                    let left = in_flight.saturating_sub(self.rng.below(3) as usize);
                    held.local = held.local.on(Event::Drained { left });
                }
                _ => {}
            }
            let observed = replica.observed.get(&name).cloned();
            let view = UnitView {
                me: &replica.id,
                lease: observed.as_ref(),
                local: held.local,
                desired_owner: assignment.owner(unit),
                leaving: replica.leaving,
                now,
            };
            let action = decide(&view, &timings);
            let me = replica.id.clone();
            self.act(i, unit, &name, &me, action, &mut held, observed, now);
            self.replicas[i].units.insert(unit, held);
        }
        let replica = &mut self.replicas[i];
        if replica.leaving && replica.units.values().all(|held| held.local == Local::Idle) {
            replica.run = Run::Gone;
        }
    }

    /// Keeps this replica's member Lease (only it writes that Lease); a leaving replica releases it first.
    fn member_lease(&mut self, i: usize, now: Duration) {
        let replica = &self.replicas[i];
        let name = member_lease_name(PREFIX, &replica.id);
        let current = self.api.get(&name);
        let record = LeaseRecord {
            holder: (!replica.leaving).then(|| replica.id.clone()),
            duration: if replica.leaving {
                Duration::from_secs(1)
            } else {
                self.timings.lease_duration
            },
            handover_to: None,
        };
        if replica.leaving && current.as_ref().is_none_or(|stored| stored.record.holder.is_none()) {
            return;
        }
        if let Ok(stored) = self
            .api
            .write(&name, current.as_ref().map(|s| s.version.as_str()), record)
        {
            let replica = &mut self.replicas[i];
            let previous = replica.observed.remove(&name);
            let seen = Observed::see(previous, &stored.version, stored.record, now);
            replica.observed.insert(name, seen);
        }
    }

    /// Carries `action` out as the manager would: the write, then the state change its answer allows.
    #[allow(clippy::too_many_arguments)]
    fn act(
        &mut self,
        i: usize,
        unit: Unit,
        name: &str,
        me: &str,
        action: Action,
        held: &mut Held,
        observed: Option<Observed>,
        now: Duration,
    ) {
        let lost_answer = self.rng.per_mille(50);
        let answer = match action {
            Action::Acquire => {
                let record = LeaseRecord {
                    holder: Some(me.to_owned()),
                    duration: self.timings.lease_duration,
                    handover_to: None,
                };
                let taken_from = observed.as_ref().and_then(|o| o.record.holder.clone());
                let answer = self
                    .api
                    .write(name, observed.as_ref().map(|o| o.version.as_str()), record);
                if let Ok(stored) = &answer
                    && !lost_answer
                {
                    held.local = held.local.on(Event::Acquired { sent: now });
                    held.lease = Some(stored.clone());
                    self.stats.acquisitions += 1;
                    if taken_from.is_some_and(|holder| holder != me) {
                        self.stats.expired_takeovers += 1;
                    }
                }
                answer
            }
            Action::Renew => {
                let Some(lease) = held.lease.clone() else {
                    panic!("seed {}: {me} renews {unit} without its Lease", self.seed);
                };
                let answer = self.api.write(name, Some(&lease.version), lease.record);
                match &answer {
                    Ok(stored) if !lost_answer => {
                        held.local = held.local.on(Event::Renewed { sent: now });
                        held.lease = Some(stored.clone());
                    }
                    Ok(_) => {}
                    Err(Conflict) => self.read_back(name, me, held),
                }
                answer
            }
            Action::Release => {
                let base = held.lease.clone().or_else(|| {
                    observed.as_ref().map(|o| Stored {
                        version: o.version.clone(),
                        record: o.record.clone(),
                    })
                });
                let Some(base) = base else {
                    panic!("seed {}: {me} releases {unit}, never seen", self.seed);
                };
                let record = LeaseRecord {
                    holder: None,
                    duration: Duration::from_secs(1),
                    handover_to: base.record.handover_to.clone(),
                };
                let answer = self.api.write(name, Some(&base.version), record);
                match &answer {
                    Ok(_) if !lost_answer => {
                        if held.local != Local::Idle {
                            self.stats.handovers += 1;
                        }
                        held.local = held.local.on(Event::Released);
                        held.lease = None;
                    }
                    Ok(_) => {}
                    Err(Conflict) if held.lease.is_some() => self.read_back(name, me, held),
                    Err(Conflict) => {}
                }
                answer
            }
            Action::MarkForHandover => {
                let Some(observed) = observed.as_ref() else {
                    panic!("seed {}: {me} marks {unit}, never seen", self.seed);
                };
                let mut record = observed.record.clone();
                record.handover_to = Some(me.to_owned());
                let answer = self.api.write(name, Some(&observed.version), record);
                if answer.is_ok() {
                    self.stats.marks += 1;
                }
                answer
            }
            Action::StopWork => {
                let in_flight = self.rng.below(4) as usize;
                held.local = held.local.on(Event::StopRequested { in_flight });
                return;
            }
            Action::Abandon => {
                held.local = held.local.on(Event::Abandoned);
                held.lease = None;
                self.stats.abandons += 1;
                return;
            }
            Action::Wait => return,
        };
        match answer {
            Ok(stored) if !lost_answer => {
                let replica = &mut self.replicas[i];
                let previous = replica.observed.remove(name);
                let seen = Observed::see(previous, &stored.version, stored.record, now);
                replica.observed.insert(name.to_owned(), seen);
            }
            Ok(_) => self.stats.lost_answers += 1,
            Err(Conflict) => self.stats.conflicts += 1,
        }
    }

    /// After a refused write of a held Lease: read it back; still ours → write on that version next; else the
    /// hold is over.
    fn read_back(&mut self, name: &str, me: &str, held: &mut Held) {
        match self.api.get(name) {
            Some(current) if current.record.holder.as_deref() == Some(me) => held.lease = Some(current),
            _ => {
                held.local = held.local.on(Event::Lost);
                held.lease = None;
                self.stats.lost_holds += 1;
            }
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

    /// With membership stable, every unit is running on its desired owner and nowhere else.
    fn check_converged(&self) {
        let live: Vec<&str> = self
            .replicas
            .iter()
            .filter(|replica| replica.run == Run::Up)
            .map(|replica| replica.id.as_str())
            .collect();
        for replica in &self.replicas {
            assert!(
                !replica.leaving || replica.run == Run::Gone || replica.run == Run::Crashed,
                "seed {}: {} never finished leaving",
                self.seed,
                replica.id
            );
        }
        let assignment = assign(live.iter().copied(), &self.units);
        for unit in &self.units {
            let owner = assignment.owner(*unit).expect("a live replica");
            for replica in self.replicas.iter().filter(|replica| replica.run == Run::Up) {
                let local = replica.units.get(unit).map_or(Local::Idle, |held| held.local);
                if replica.id == owner {
                    assert!(
                        matches!(local, Local::Running { .. }),
                        "seed {}: {unit} is {local:?} on its owner {owner}",
                        self.seed
                    );
                } else {
                    assert_eq!(
                        local,
                        Local::Idle,
                        "seed {}: {unit} on {} (owner {owner})",
                        self.seed,
                        replica.id
                    );
                }
            }
            assert_eq!(
                self.api.holder(&unit_lease_name(PREFIX, *unit)),
                Some(owner),
                "seed {}: {unit}'s Lease",
                self.seed
            );
        }
    }

    /// Chaos for `steps`, then two minutes of stable membership.
    fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            self.step(true);
        }
        let settle_until = self.t + 120_000;
        while self.t < settle_until {
            self.step(false);
        }
        self.check_converged();
    }
}

#[test]
fn no_unit_ever_runs_on_two_replicas_and_every_unit_ends_on_its_owner() {
    let mut total = Stats::default();
    for seed in 0..30 {
        let mut sim = Sim::new(seed, 1 + (seed as usize % 4), 8);
        sim.run(2_500);
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
        ("crashes", total.crashes),
        ("pauses", total.pauses),
        ("joins", total.joins),
        ("leaves", total.leaves),
        ("cluster-wide stalls", total.stalls),
    ];
    for (what, count) in taken {
        assert!(count > 0, "no {what} in any run: {total:?}");
    }
    assert!(total.acquisitions > 0);
}

#[test]
fn a_stable_set_of_replicas_with_the_default_shards_settles_on_the_assignment() {
    for seed in 100..104 {
        let mut sim = Sim::new(seed, 3 + seed as usize % 3, super::DEFAULT_SHARDS);
        sim.run(0);
        assert_eq!(
            sim.stats.abandons, 0,
            "seed {seed}: nobody misses a deadline here: {:?}",
            sim.stats
        );
    }
}
