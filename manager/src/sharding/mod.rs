//! Active-active replicas: one loop keeps this replica's member Lease and a Lease per unit of work, and publishes
//! which units' work runs here (the protocol's decisions are `ruleplane_config::sharding`'s; this is its I/O).

mod gate;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use ruleplane_config::sharding::{
    Action, Event, Local, Observed, Timings, Unit, UnitView, acquired, assign, decide, marked, member_lease_name,
    member_lease_prefix, members, observe, released, renewed, unit_lease_name, unit_lease_prefix, units,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use gate::{Open, QueuedShare, ShardGate, ShardScope, WorkGuard};

use crate::metrics::Metrics;

/// What runs on this replica, as the unit loop last published it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owned {
    /// Reconciler shards whose work runs here.
    pub shards: BTreeSet<u32>,
    pub resource_definitions: bool,
    pub schedulers: bool,
    /// Counts holds that ended while their work ran (an abandoned or lost Lease): the work still running must be
    /// aborted at once, not drained.
    pub aborts: u64,
    /// The live members this replica counts (itself included while its member Lease is confirmed); 0 before the
    /// first tick.
    pub members: usize,
}

impl Owned {
    /// Every unit, for good: a process without Leases.
    pub fn everything(shards: u32) -> Self {
        Owned {
            shards: (0..shards).collect(),
            resource_definitions: true,
            schedulers: true,
            aborts: 0,
            members: 1,
        }
    }

    /// Whether any unit runs here.
    pub fn any(&self) -> bool {
        !self.shards.is_empty() || self.resource_definitions || self.schedulers
    }

    /// One line for `/readyz?verbose`.
    pub fn describe(&self, shards: u32) -> String {
        let mut parts = vec![format!(
            "{} of {shards} reconciler shards{}",
            self.shards.len(),
            if self.shards.is_empty() || self.shards.len() == shards as usize {
                String::new()
            } else {
                format!(
                    " ({})",
                    self.shards.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                )
            }
        )];
        if self.resource_definitions {
            parts.push("resource-definitions".into());
        }
        if self.schedulers {
            parts.push("schedulers".into());
        }
        format!("{}; {} member(s)", parts.join(", "), self.members)
    }
}

/// Where the Leases are and how they are timed.
#[derive(Debug, Clone)]
pub struct ShardingConfig {
    pub namespace: String,
    /// `--leader-election-id`: the Leases' name prefix.
    pub prefix: String,
    pub identity: String,
    pub timings: Timings,
    pub shards: u32,
}

impl ShardingConfig {
    /// Each Lease request is bounded: a hung request must not hold a tick past the renew deadline.
    fn request_timeout(&self) -> Duration {
        self.timings.retry_period.max(Duration::from_secs(1))
    }
}

#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the Lease changed since it was read")]
    Conflict,
    #[error(transparent)]
    Api(kube::Error),
}

impl From<kube::Error> for LeaseError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) if status.code == 409 => LeaseError::Conflict,
            e => LeaseError::Api(e),
        }
    }
}

struct Leases {
    api: Api<Lease>,
    timeout: Duration,
}

impl Leases {
    async fn bounded<T>(&self, request: impl Future<Output = Result<T, kube::Error>>) -> Result<T, LeaseError> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(answer) => answer.map_err(LeaseError::from),
            Err(_) => Err(LeaseError::Timeout(self.timeout)),
        }
    }

    /// Deletes the version `observed` of a Lease (a 409 if it changed since, a 404 if it is gone).
    async fn delete(&self, name: &str, observed: &str) -> Result<(), LeaseError> {
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: Some(observed.to_owned()),
                uid: None,
            }),
            ..Default::default()
        };
        self.bounded(self.api.delete(name, &params)).await.map(|_| ())
    }

    async fn get(&self, name: &str) -> Result<Option<Lease>, LeaseError> {
        self.bounded(self.api.get_opt(name)).await
    }

    /// A create (no resourceVersion) or a replace preconditioned on the body's resourceVersion.
    async fn write(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        match lease.metadata.resource_version {
            None => self.bounded(self.api.create(&PostParams::default(), lease)).await,
            Some(_) => {
                self.bounded(self.api.replace(&lease.name_any(), &PostParams::default(), lease))
                    .await
            }
        }
    }
}

fn micro_now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn holds(lease: &Lease, identity: &str) -> bool {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(identity)
}

/// The member Lease or one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Member,
    Unit(Unit),
}

/// What one Lease request came back with.
struct Outcome {
    slot: Slot,
    events: Vec<Event>,
    stored: Option<Lease>,
    transition: Option<&'static str>,
}

/// The loop's state: the Leases as last seen, and this replica's own state of each unit.
struct UnitLoop {
    config: ShardingConfig,
    leases: Leases,
    gate: std::sync::Arc<ShardGate>,
    metrics: std::sync::Arc<Metrics>,
    units: Vec<Unit>,
    origin: Instant,
    objects: HashMap<String, Lease>,
    observed: HashMap<String, Observed>,
    local: BTreeMap<Slot, Local>,
    owned: Owned,
    member_name: String,
}

impl UnitLoop {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn name(&self, slot: Slot) -> String {
        match slot {
            Slot::Member => self.member_name.clone(),
            Slot::Unit(unit) => unit_lease_name(&self.config.prefix, unit),
        }
    }

    fn ours(&self, name: &str) -> bool {
        name.starts_with(&unit_lease_prefix(&self.config.prefix))
            || name.starts_with(&member_lease_prefix(&self.config.prefix))
    }

    /// Takes in a Lease read from the watch or returned by a write; an older version than the one known is
    /// ignored (a watch event can trail a write's answer).
    fn see(&mut self, lease: Lease) {
        let name = lease.name_any();
        if !self.ours(&name) {
            return;
        }
        let version = |l: &Lease| {
            l.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        if let (Some(known), Some(new)) = (self.objects.get(&name).and_then(version), version(&lease))
            && new < known
        {
            return;
        }
        let now = self.now();
        if let Some(seen) = observe(
            self.observed.remove(&name),
            &lease,
            self.config.timings.lease_duration,
            now,
        ) {
            self.observed.insert(name.clone(), seen);
        }
        self.objects.insert(name, lease);
    }

    fn forget(&mut self, name: &str) {
        self.objects.remove(name);
        self.observed.remove(name);
    }

    fn local(&self, slot: Slot) -> Local {
        self.local.get(&slot).copied().unwrap_or(Local::Idle)
    }

    /// One round: drained work noted, each Lease decided and written, what runs here published.
    async fn tick(&mut self, leaving: bool) -> Owned {
        let timings = self.config.timings;
        let slots: Vec<Slot> = std::iter::once(Slot::Member)
            .chain(self.units.iter().map(|u| Slot::Unit(*u)))
            .collect();
        for slot in &slots {
            if let (Slot::Unit(unit), Local::Stopping { .. }) = (*slot, self.local(*slot)) {
                let left = self.gate.in_flight(unit);
                self.local.insert(*slot, self.local(*slot).on(Event::Drained { left }));
            }
        }
        let now = self.now();
        let member_prefix = member_lease_prefix(&self.config.prefix);
        let member_leases: Vec<&Observed> = self
            .observed
            .iter()
            .filter(|(name, _)| name.starts_with(&member_prefix) && **name != self.member_name)
            .map(|(_, seen)| seen)
            .collect();
        // Member Leases of replicas gone (released, or expired by this replica's own count) are deleted, each on
        // the version seen to expire: a replica joining later would otherwise count such a member alive for a
        // whole lease duration of its own, and every rollout would leave its pods' Leases behind.
        let gone: Vec<(String, String)> = self
            .observed
            .iter()
            .filter(|(name, seen)| name.starts_with(&member_prefix) && **name != self.member_name && seen.is_free(now))
            .map(|(name, seen)| (name.clone(), seen.version.clone()))
            .collect();
        let mut live = members(member_leases, now);
        live.remove(&self.config.identity);
        if self.local(Slot::Member).runs_work(now, &timings) && !leaving {
            live.insert(self.config.identity.clone());
        }
        let assignment = assign(live.iter().map(String::as_str), &self.units);
        let me = self.config.identity.clone();
        let mut requests = Vec::new();
        let mut aborted = false;
        for slot in &slots {
            let name = self.name(*slot);
            let desired = match slot {
                Slot::Member => (!leaving).then_some(me.as_str()),
                Slot::Unit(unit) => assignment.owner(*unit),
            };
            let local = self.local(*slot);
            let view = UnitView {
                me: &me,
                lease: self.observed.get(&name),
                local,
                desired_owner: desired,
                leaving,
                now,
            };
            match decide(&view, &timings) {
                Action::Wait => {}
                Action::StopWork => {
                    let left = match slot {
                        Slot::Unit(unit) => {
                            self.gate.set(*unit, Open::Closed);
                            self.gate.in_flight(*unit)
                        }
                        Slot::Member => 0,
                    };
                    debug!(lease = %name, in_flight = left, "stopping the unit's work for a handover");
                    self.local
                        .insert(*slot, local.on(Event::StopRequested { in_flight: left }));
                }
                Action::Abandon => {
                    warn!(lease = %name, "no renewal confirmed within the renew deadline; abandoning the unit at once");
                    if let Slot::Unit(unit) = slot {
                        self.gate.set(*unit, Open::Closed);
                    }
                    aborted |= !matches!(local, Local::Stopped { .. });
                    self.local.insert(*slot, local.on(Event::Abandoned));
                    self.transition("abandoned");
                }
                Action::MarkForHandover
                    if self
                        .observed
                        .get(&name)
                        .and_then(|seen| seen.record.holder.as_deref())
                        .is_some_and(|holder| !live.contains(holder)) =>
                {
                    // A holder that is no member any more (its member Lease expired) cannot answer: a mark would
                    // only change the Lease's version and so restart the expiry count of every replica waiting
                    // for it (a takeover after a kill -9 took 29 s instead of 15).
                }
                action => {
                    let base = self.objects.get(&name).cloned();
                    requests.push((*slot, name, action, base));
                }
            }
        }
        let this = &*self;
        let deleted = futures::future::join_all(gone.iter().map(|(name, version)| async move {
            match this.leases.delete(name, version).await {
                Ok(()) => {
                    debug!(lease = %name, "deleted the member Lease of a replica gone");
                    Some(name.clone())
                }
                Err(LeaseError::Api(kube::Error::Api(status))) if status.code == 404 => Some(name.clone()),
                Err(_) => None,
            }
        }));
        let outcomes = futures::future::join_all(
            requests
                .into_iter()
                .map(|(slot, name, action, base)| this.request(slot, name, action, base)),
        )
        .await;
        for name in deleted.await.into_iter().flatten() {
            self.forget(&name);
        }
        for outcome in outcomes {
            if let Some(lease) = outcome.stored {
                self.see(lease);
            }
            if let Some(transition) = outcome.transition {
                self.transition(transition);
            }
            for event in outcome.events {
                let before = self.local(outcome.slot);
                if event == Event::Lost {
                    if let Slot::Unit(unit) = outcome.slot {
                        self.gate.set(unit, Open::Closed);
                    }
                    aborted |= !matches!(before, Local::Stopped { .. } | Local::Idle);
                }
                self.local.insert(outcome.slot, before.on(event));
            }
        }
        self.publish(live.len(), aborted)
    }

    fn transition(&self, what: &'static str) {
        self.metrics
            .unit_transitions
            .get_or_create(&crate::metrics::ResultLabels { result: what.into() })
            .inc();
    }

    /// Opens the units whose work may run (until their renew deadline), marks the started ones running, and
    /// says what runs here.
    fn publish(&mut self, members: usize, aborted: bool) -> Owned {
        let timings = self.config.timings;
        let now = self.now();
        let mut owned = Owned {
            aborts: self.owned.aborts + u64::from(aborted),
            members,
            ..Owned::default()
        };
        for unit in &self.units {
            let slot = Slot::Unit(*unit);
            let local = self.local(slot);
            let runs =
                matches!(local, Local::Starting { .. } | Local::Running { .. }) && local.runs_work(now, &timings);
            if runs && let Some(confirmed) = local.confirmed() {
                self.gate
                    .set(*unit, Open::Until(self.origin + confirmed + timings.renew_deadline));
                if let Local::Starting { .. } = local {
                    self.local.insert(slot, local.on(Event::Started));
                }
                match unit {
                    Unit::ReconcilerShard(shard) => {
                        owned.shards.insert(*shard);
                    }
                    Unit::ResourceDefinitions => owned.resource_definitions = true,
                    Unit::Schedulers => owned.schedulers = true,
                }
            } else if !matches!(local, Local::Stopping { .. }) {
                self.gate.set(*unit, Open::Closed);
            }
            self.metrics
                .unit_owned
                .get_or_create(&crate::metrics::UnitLabels { unit: unit.to_string() })
                .set(i64::from(runs));
        }
        self.owned = owned.clone();
        owned
    }

    /// One Lease request for `action`, based on `base` (the Lease as last known).
    fn request(
        &self,
        slot: Slot,
        name: String,
        action: Action,
        base: Option<Lease>,
    ) -> impl Future<Output = Outcome> + use<'_> {
        let identity = self.config.identity.clone();
        let duration = self.config.timings.lease_duration;
        async move {
            let mut outcome = Outcome {
                slot,
                events: Vec::new(),
                stored: None,
                transition: None,
            };
            let sent = self.now();
            let answer = match action {
                Action::Acquire => {
                    self.leases
                        .write(&acquired(base.as_ref(), &name, &identity, duration, micro_now()))
                        .await
                }
                Action::Renew => match &base {
                    Some(held) => match self.leases.write(&renewed(held, micro_now())).await {
                        Err(LeaseError::Conflict) => match self.leases.get(&name).await {
                            Ok(Some(now)) if holds(&now, &identity) => {
                                let again = self.now();
                                let answer = self.leases.write(&renewed(&now, micro_now())).await;
                                if let Ok(lease) = &answer
                                    && holds(lease, &identity)
                                {
                                    outcome.events.push(Event::Renewed { sent: again });
                                    outcome.stored = Some(lease.clone());
                                    return outcome;
                                }
                                answer
                            }
                            Ok(other) => {
                                info!(lease = %name, holder = ?other.as_ref().and_then(|l| l.spec.as_ref()).and_then(|s| s.holder_identity.clone()), "lost the unit's Lease");
                                outcome.events.push(Event::Lost);
                                outcome.transition = Some("lost");
                                outcome.stored = other;
                                return outcome;
                            }
                            Err(e) => Err(e),
                        },
                        answer => answer,
                    },
                    None => Err(LeaseError::Conflict),
                },
                Action::Release => match &base {
                    Some(held) => self.leases.write(&released(held, micro_now())).await,
                    None => Err(LeaseError::Conflict),
                },
                Action::MarkForHandover => match &base {
                    Some(observed) => self.leases.write(&marked(observed, &identity)).await,
                    None => Err(LeaseError::Conflict),
                },
                Action::Wait | Action::StopWork | Action::Abandon => return outcome,
            };
            match answer {
                Ok(lease) => {
                    let ours = holds(&lease, &identity);
                    match action {
                        Action::Acquire if ours => {
                            outcome.events.push(Event::Acquired { sent });
                            outcome.transition = Some("acquired");
                            if slot != Slot::Member {
                                info!(lease = %name, "acquired");
                            }
                        }
                        Action::Renew if ours => outcome.events.push(Event::Renewed { sent }),
                        Action::Renew => {
                            outcome.events.push(Event::Lost);
                            outcome.transition = Some("lost");
                        }
                        Action::Release => {
                            outcome.events.push(Event::Released);
                            outcome.transition = Some("released");
                            if slot != Slot::Member {
                                info!(lease = %name, "released for a handover");
                            }
                        }
                        Action::MarkForHandover => {
                            outcome.transition = Some("marked");
                            debug!(lease = %name, "asked its holder to hand it over");
                        }
                        _ => {}
                    }
                    outcome.stored = Some(lease);
                }
                Err(LeaseError::Conflict) => {
                    debug!(lease = %name, ?action, "conflict; deciding again on the next version");
                    if let Ok(Some(fresh)) = self.leases.get(&name).await {
                        outcome.stored = Some(fresh);
                    }
                }
                Err(e) => warn!(lease = %name, ?action, error = %e, "Lease request failed"),
            }
            outcome
        }
    }

    /// Whether every unit and the member Lease are let go.
    fn all_idle(&self) -> bool {
        self.local.values().all(|l| matches!(l, Local::Idle))
    }

    /// When the next tick is due at the latest.
    fn next_tick(&self, leaving: bool) -> Duration {
        let timings = self.config.timings;
        let stopping = self
            .local
            .values()
            .any(|l| matches!(l, Local::Stopping { .. } | Local::Stopped { .. }));
        if leaving || stopping {
            return Duration::from_millis(100);
        }
        let now = self.now();
        let due = self
            .local
            .values()
            .filter_map(|l| l.confirmed())
            .map(|confirmed| (confirmed + timings.retry_period).saturating_sub(now))
            .min()
            .unwrap_or(timings.retry_period);
        due.min(timings.retry_period).max(Duration::from_millis(50))
    }
}

/// Runs the unit loop until `shutdown`, then hands every unit back (released, not left to expire) and returns.
/// `owned` says what runs here after each tick; `gate` is opened and closed to match.
pub async fn run_units(
    client: Client,
    config: ShardingConfig,
    gate: std::sync::Arc<ShardGate>,
    metrics: std::sync::Arc<Metrics>,
    owned: watch::Sender<Owned>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let (changes_tx, mut changes) = tokio::sync::mpsc::channel::<watcher::Event<Lease>>(256);
    let watch_api = api.clone();
    let lease_watch = tokio::spawn(async move {
        let stream = watcher::watcher(watch_api, watcher::Config::default());
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    if changes_tx.send(event).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "Lease watch error; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    });
    let member_name = member_lease_name(&config.prefix, &config.identity);
    let mut state = UnitLoop {
        leases: Leases {
            api,
            timeout: config.request_timeout(),
        },
        units: units(config.shards),
        gate,
        metrics,
        origin: Instant::now(),
        objects: HashMap::new(),
        observed: HashMap::new(),
        local: BTreeMap::new(),
        owned: Owned::default(),
        member_name,
        config,
    };
    info!(
        identity = %state.config.identity,
        namespace = %state.config.namespace,
        units = state.units.len(),
        "sharing the work with the other replicas through Leases"
    );
    let mut leaving = false;
    let mut left_by: Option<Instant> = None;
    loop {
        let published = state.tick(leaving).await;
        owned.send_if_modified(|current| {
            let changed = *current != published;
            *current = published;
            changed
        });
        if leaving && (state.all_idle() || left_by.is_some_and(|by| Instant::now() >= by)) {
            break;
        }
        let sleep = tokio::time::sleep(state.next_tick(leaving));
        tokio::pin!(sleep);
        tokio::select! {
            _ = &mut sleep => {}
            _ = async { let _ = shutdown.wait_for(|s| *s).await; }, if !leaving => {
                info!("shutting down: handing every unit back");
                leaving = true;
                left_by = Some(Instant::now() + Duration::from_secs(5));
            }
            Some(event) = changes.recv() => {
                take_in(&mut state, event);
                // Changes come in bursts (a handover touches several Leases): take the rest in before deciding.
                tokio::time::sleep(Duration::from_millis(20)).await;
                while let Ok(event) = changes.try_recv() {
                    take_in(&mut state, event);
                }
            }
        }
    }
    lease_watch.abort();
    owned.send_replace(Owned::default());
}

fn take_in(state: &mut UnitLoop, event: watcher::Event<Lease>) {
    match event {
        watcher::Event::Apply(lease) | watcher::Event::InitApply(lease) => state.see(lease),
        watcher::Event::Delete(lease) => state.forget(&lease.name_any()),
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;

    fn unit_loop(shards: u32) -> UnitLoop {
        let client = crate::context::offline_context().client;
        let config = ShardingConfig {
            namespace: "ns".into(),
            prefix: "ruleplane".into(),
            identity: "me".into(),
            timings: Timings::default(),
            shards,
        };
        UnitLoop {
            leases: Leases {
                api: Api::namespaced(client, "ns"),
                timeout: config.request_timeout(),
            },
            gate: ShardGate::closed(shards),
            metrics: std::sync::Arc::new(Metrics::new()),
            units: units(shards),
            origin: Instant::now(),
            objects: HashMap::new(),
            observed: HashMap::new(),
            local: BTreeMap::new(),
            owned: Owned::default(),
            member_name: member_lease_name("ruleplane", "me"),
            config,
        }
    }

    fn lease(name: &str, version: &str, holder: &str) -> Lease {
        let mut lease = Lease::default();
        lease.metadata.name = Some(name.into());
        lease.metadata.resource_version = Some(version.into());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        });
        lease
    }

    #[tokio::test(start_paused = true)]
    async fn an_older_version_of_a_lease_never_replaces_a_newer_one_and_other_leases_are_ignored() {
        let mut state = unit_loop(4);
        state.see(lease("ruleplane-unit-schedulers", "12", "b"));
        state.see(lease("ruleplane-unit-schedulers", "9", "a"));
        let seen = &state.observed["ruleplane-unit-schedulers"];
        assert_eq!(
            (seen.version.as_str(), seen.record.holder.as_deref()),
            ("12", Some("b"))
        );
        state.see(lease("kube-scheduler", "3", "x"));
        assert!(!state.objects.contains_key("kube-scheduler"), "not one of ours");
        state.forget("ruleplane-unit-schedulers");
        assert!(state.observed.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn held_units_open_their_gate_until_the_renew_deadline_and_a_stopping_one_stays_closed() {
        let mut state = unit_loop(4);
        let confirmed = state.now();
        state
            .local
            .insert(Slot::Unit(Unit::ReconcilerShard(1)), Local::Starting { confirmed });
        state
            .local
            .insert(Slot::Unit(Unit::Schedulers), Local::Running { confirmed });
        state.local.insert(
            Slot::Unit(Unit::ReconcilerShard(2)),
            Local::Stopping {
                confirmed,
                in_flight: 1,
            },
        );
        let owned = state.publish(2, false);
        assert_eq!(owned.shards, BTreeSet::from([1]));
        assert!(owned.schedulers && !owned.resource_definitions);
        assert_eq!(
            owned.describe(4),
            "1 of 4 reconciler shards (1), schedulers; 2 member(s)"
        );
        assert!(state.gate.admits(Unit::ReconcilerShard(1)));
        assert!(!state.gate.admits(Unit::ReconcilerShard(2)), "stopping: no new work");
        assert_eq!(
            state.local(Slot::Unit(Unit::ReconcilerShard(1))),
            Local::Running { confirmed },
            "started"
        );
        tokio::time::advance(Timings::default().renew_deadline).await;
        assert!(
            !state.gate.admits(Unit::ReconcilerShard(1)),
            "the gate closes at the renew deadline without the loop"
        );
        let later = state.publish(2, true);
        assert!(
            later.shards.is_empty() && !later.schedulers,
            "past the deadline nothing runs"
        );
        assert_eq!(later.aborts, 1);
    }
}
