//! Active-active replicas: one loop keeps this replica's member Lease and a Lease per unit of work, and publishes
//! which units' work runs here (the protocol's decisions are `ruleplane_config::sharding`'s; this is its I/O).

mod gate;
mod owned;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use ruleplane_config::sharding::{
    Action, AfterRefusal, Event, LeaseView, Local, Slot, TickInput, Timings, Unit, acquired, after_refusal,
    based_on_seen, marked, member_lease_name, member_lease_prefix, plan_tick, record_of, released, renewed,
    slot_lease_name, unit_lease_prefix, units,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use gate::{Open, QueuedShare, ShardGate, ShardScope, WorkGuard};
pub use owned::{Membership, Owned};

use crate::metrics::Metrics;

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
    #[error("the Lease does not exist")]
    NotFound,
    #[error(transparent)]
    Api(kube::Error),
}

impl From<kube::Error> for LeaseError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) if status.code == 409 => LeaseError::Conflict,
            kube::Error::Api(status) if status.code == 404 => LeaseError::NotFound,
            e => LeaseError::Api(e),
        }
    }
}

impl LeaseError {
    /// Whether the apiserver answered (a status of its own), as opposed to no answer at all.
    fn answered(&self) -> bool {
        matches!(
            self,
            LeaseError::Conflict | LeaseError::NotFound | LeaseError::Api(kube::Error::Api(_))
        )
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

    /// Deletes the version `observed` of a Lease (a conflict if it changed since, NotFound if it is gone).
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

/// What one Lease request came back with.
struct Outcome {
    slot: Slot,
    events: Vec<Event>,
    stored: Option<Lease>,
    /// The Lease was read back and does not exist: forget it, so the next write is a create.
    gone: bool,
    transition: Option<&'static str>,
    /// Whether the apiserver answered the request.
    answered: bool,
}

impl Outcome {
    fn new(slot: Slot) -> Self {
        Outcome {
            slot,
            events: Vec::new(),
            stored: None,
            gone: false,
            transition: None,
            answered: true,
        }
    }
}

/// The loop's state: the Leases as last seen, and this replica's own state of each unit.
struct UnitLoop {
    config: ShardingConfig,
    leases: Leases,
    gate: std::sync::Arc<ShardGate>,
    metrics: std::sync::Arc<Metrics>,
    units: Vec<Unit>,
    origin: Instant,
    view: LeaseView<Lease>,
    local: BTreeMap<Slot, Local>,
    owned: Owned,
    member_name: String,
    /// Whether the apiserver answered every request of the last tick that sent any.
    answered: bool,
    /// When this replica was last a member, and when it last warned that it is not.
    member_at: Option<Instant>,
    warned_at: Option<Instant>,
}

impl UnitLoop {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn ours(&self, name: &str) -> bool {
        name.starts_with(&unit_lease_prefix(&self.config.prefix))
            || name.starts_with(&member_lease_prefix(&self.config.prefix))
    }

    /// Takes in a Lease read from the watch or returned by a write; an older version than the one known is
    /// ignored (a watch event can trail a write's answer). One without a resourceVersion was never stored.
    fn see(&mut self, lease: Lease) {
        let name = lease.name_any();
        let Some(version) = lease.metadata.resource_version.clone() else {
            return;
        };
        if self.ours(&name) {
            let record = record_of(&lease, self.config.timings.lease_duration);
            let now = self.now();
            self.view.see(&name, &version, record, lease, now);
        }
    }

    fn forget(&mut self, name: &str) {
        self.view.forget(name);
    }

    /// One event of the Lease watch. A relist replaces the view: a Lease deleted while the watch was down (a
    /// peer deleting this replica's expired member Lease during an outage) is forgotten at its end.
    fn take_in(&mut self, event: watcher::Event<Lease>) {
        match event {
            watcher::Event::Apply(lease) => self.see(lease),
            watcher::Event::Delete(lease) => self.forget(&lease.name_any()),
            watcher::Event::Init => self.view.begin_relist(),
            watcher::Event::InitApply(lease) => {
                let name = lease.name_any();
                if let (true, Some(version)) = (self.ours(&name), lease.metadata.resource_version.clone()) {
                    let record = record_of(&lease, self.config.timings.lease_duration);
                    let now = self.now();
                    self.view.relisted(&name, &version, record, lease, now);
                }
            }
            watcher::Event::InitDone => {
                let now = self.now();
                for name in self.view.end_relist(now) {
                    debug!(lease = %name, "deleted while the Lease watch was down: forgotten");
                }
            }
        }
    }

    fn local(&self, slot: Slot) -> Local {
        self.local.get(&slot).copied().unwrap_or(Local::Idle)
    }

    /// One round: drained work noted, each Lease decided and written, what runs here published.
    async fn tick(&mut self, leaving: bool) -> Owned {
        for unit in &self.units {
            let slot = Slot::Unit(*unit);
            if let Local::Stopping { .. } = self.local(slot) {
                let left = self.gate.in_flight(*unit);
                self.local.insert(slot, self.local(slot).on(Event::Drained { left }));
            }
        }
        let now = self.now();
        let plan = plan_tick(&TickInput {
            me: &self.config.identity,
            prefix: &self.config.prefix,
            units: &self.units,
            view: &self.view,
            local: &self.local,
            leaving,
            now,
            timings: &self.config.timings,
        });
        let mut requests = Vec::new();
        let mut aborted = false;
        for (slot, name, action) in plan.actions {
            let local = self.local(slot);
            match action {
                Action::StopWork => {
                    let left = match slot {
                        Slot::Unit(unit) => {
                            self.gate.set(unit, Open::Closed);
                            self.gate.in_flight(unit)
                        }
                        Slot::Member => 0,
                    };
                    debug!(lease = %name, in_flight = left, "stopping the unit's work for a handover");
                    self.local
                        .insert(slot, local.on(Event::StopRequested { in_flight: left }));
                }
                Action::Abandon => {
                    warn!(lease = %name, "no renewal confirmed within the renew deadline; abandoning the unit at once");
                    if let Slot::Unit(unit) = slot {
                        self.gate.set(unit, Open::Closed);
                    }
                    aborted |= !matches!(local, Local::Stopped { .. });
                    self.local.insert(slot, local.on(Event::Abandoned));
                    self.transition("abandoned");
                }
                action => {
                    let holding = local != Local::Idle;
                    // The view's reading of the Lease was taken when it was seen: no need to read the body again.
                    let seen = self.view.observed(&name).map(|observed| &observed.record);
                    let base = based_on_seen(action, holding, seen, &self.config.identity)
                        .then(|| self.view.body(&name).cloned())
                        .flatten();
                    requests.push((slot, name, action, base, holding));
                }
            }
        }
        let this = &*self;
        let deleted = futures::future::join_all(plan.deletes.iter().map(|(name, version)| async move {
            match this.leases.delete(name, version).await {
                Ok(()) => {
                    debug!(lease = %name, "deleted the member Lease of a replica gone");
                    (Some(name.clone()), true)
                }
                Err(LeaseError::NotFound) => (Some(name.clone()), true),
                Err(e) => (None, e.answered()),
            }
        }));
        let outcomes = futures::future::join_all(
            requests
                .into_iter()
                .map(|(slot, name, action, base, holding)| this.request(slot, name, action, base, holding)),
        )
        .await;
        let mut answered = true;
        for (name, reply) in deleted.await {
            answered &= reply;
            if let Some(name) = name {
                self.forget(&name);
            }
        }
        for outcome in outcomes {
            answered &= outcome.answered;
            self.take_outcome(outcome, &mut aborted);
        }
        self.answered = answered;
        self.publish(plan.live.len(), aborted, leaving)
    }

    /// Takes in what one request came back with: the Lease stored or read back (or its absence), the slot's
    /// events.
    fn take_outcome(&mut self, outcome: Outcome, aborted: &mut bool) {
        if let Some(lease) = outcome.stored {
            self.see(lease);
        } else if outcome.gone {
            let name = slot_lease_name(&self.config.prefix, &self.config.identity, outcome.slot);
            self.forget(&name);
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
                *aborted |= !matches!(before, Local::Stopped { .. } | Local::Idle);
            }
            self.local.insert(outcome.slot, before.on(event));
        }
    }

    fn transition(&self, what: &'static str) {
        self.metrics
            .unit_transitions
            .get_or_create(&crate::metrics::ResultLabels { result: what.into() })
            .inc();
    }

    /// Whether this replica is a member now, and what it says about it (a warning while it should be one and the
    /// apiserver answers, at most every lease duration).
    fn membership(&mut self, leaving: bool) -> Membership {
        let timings = self.config.timings;
        let state = if leaving {
            Membership::Leaving
        } else if self.local(Slot::Member).runs_work(self.now(), &timings) {
            self.member_at = Some(Instant::now());
            Membership::Member
        } else if self.member_at.is_none() && self.origin.elapsed() < timings.lease_duration {
            Membership::Joining
        } else {
            Membership::Retrying {
                answered: self.answered,
            }
        };
        if let Membership::Retrying { answered: true } = state
            && self.warned_at.is_none_or(|at| at.elapsed() >= timings.lease_duration)
        {
            warn!(
                lease = %self.member_name,
                "not a member: the apiserver answers but this replica's member Lease is not confirmed; no unit \
                 is assigned to it while it retries"
            );
            self.warned_at = Some(Instant::now());
        }
        for candidate in ["joining", "member", "retrying", "leaving"] {
            self.metrics
                .membership_state
                .get_or_create(&crate::metrics::StateLabels {
                    state: candidate.into(),
                })
                .set(i64::from(candidate == state.label()));
        }
        state
    }

    /// Opens the units whose work may run (until their renew deadline), marks the started ones running, and
    /// says what runs here.
    fn publish(&mut self, members: usize, aborted: bool, leaving: bool) -> Owned {
        let timings = self.config.timings;
        let now = self.now();
        let mut owned = Owned {
            aborts: self.owned.aborts + u64::from(aborted),
            members,
            membership: self.membership(leaving),
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

    /// One Lease request for `action`, based on `base` (the Lease as last known); `holding` when the slot's
    /// state holds the Lease.
    fn request(
        &self,
        slot: Slot,
        name: String,
        action: Action,
        base: Option<Lease>,
        holding: bool,
    ) -> impl Future<Output = Outcome> + use<'_> {
        let identity = self.config.identity.clone();
        let duration = self.config.timings.lease_duration;
        async move {
            let mut outcome = Outcome::new(slot);
            let sent = self.now();
            let body = match (action, &base) {
                (Action::Acquire, base) => acquired(base.as_ref(), &name, &identity, duration, micro_now()),
                (Action::Renew, Some(held)) => renewed(held, micro_now()),
                (Action::Release, Some(held)) => released(held, micro_now()),
                (Action::MarkForHandover, Some(observed)) => marked(observed, &identity),
                // Nothing known to base the write on: read it, as after a refusal.
                (Action::Renew | Action::Release | Action::MarkForHandover, None) => {
                    self.after_refusal(&name, action, holding, &mut outcome).await;
                    return outcome;
                }
                (Action::Wait | Action::StopWork | Action::Abandon, _) => return outcome,
            };
            match self.leases.write(&body).await {
                Ok(lease) => {
                    self.stored(&name, slot, action, sent, &lease, &mut outcome);
                    outcome.stored = Some(lease);
                }
                // A replace of a Lease deleted since it was read is refused (409 on its uid precondition, or 404):
                // read it back; the answer decides, and a Lease that is gone is forgotten.
                Err(LeaseError::Conflict | LeaseError::NotFound) => {
                    debug!(lease = %name, ?action, "refused; reading the Lease back");
                    self.after_refusal(&name, action, holding, &mut outcome).await;
                }
                Err(e) => {
                    outcome.answered = e.answered();
                    warn!(lease = %name, ?action, error = %e, "Lease request failed");
                }
            }
            outcome
        }
    }

    /// What a stored write means for the slot.
    fn stored(&self, name: &str, slot: Slot, action: Action, sent: Duration, lease: &Lease, outcome: &mut Outcome) {
        let ours = holds(lease, &self.config.identity);
        match action {
            Action::Acquire if ours => {
                outcome.events.push(Event::Acquired { sent });
                outcome.transition = Some("acquired");
                match slot {
                    Slot::Unit(_) => info!(lease = %name, "acquired"),
                    Slot::Member if self.member_at.is_some() => info!(lease = %name, "a member again"),
                    Slot::Member => {}
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
    }

    /// Reads the Lease back after a refused write of `action` and carries out [`after_refusal`]'s answer: a
    /// renewal still ours is sent again on the version read.
    async fn after_refusal(&self, name: &str, action: Action, holding: bool, outcome: &mut Outcome) {
        let identity = &self.config.identity;
        let current = match self.leases.get(name).await {
            Ok(current) => current,
            Err(e) => {
                outcome.answered = e.answered();
                warn!(lease = %name, ?action, error = %e, "reading the Lease back failed");
                return;
            }
        };
        let record = current
            .as_ref()
            .map(|lease| record_of(lease, self.config.timings.lease_duration));
        outcome.gone = current.is_none();
        match after_refusal(holding, record.as_ref(), identity) {
            AfterRefusal::StillHeld if action == Action::Renew => {
                let Some(now) = current else { return };
                let again = self.now();
                match self.leases.write(&renewed(&now, micro_now())).await {
                    Ok(lease) if holds(&lease, identity) => {
                        outcome.events.push(Event::Renewed { sent: again });
                        outcome.stored = Some(lease);
                    }
                    Ok(lease) => outcome.stored = Some(lease),
                    Err(e) => {
                        outcome.answered = e.answered();
                        outcome.stored = Some(now);
                    }
                }
            }
            AfterRefusal::StillHeld | AfterRefusal::Refreshed => outcome.stored = current,
            AfterRefusal::Lost => {
                info!(lease = %name, holder = ?record.and_then(|r| r.holder), "lost the Lease");
                outcome.events.push(Event::Lost);
                outcome.transition = Some("lost");
                outcome.stored = current;
            }
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
                    warn!(error = %e, "Lease watch error; relisting");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    });
    let mut state = UnitLoop::new(api, gate, metrics, config);
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
                state.take_in(event);
                // Changes come in bursts (a handover touches several Leases): take the rest in before deciding.
                tokio::time::sleep(Duration::from_millis(20)).await;
                while let Ok(event) = changes.try_recv() {
                    state.take_in(event);
                }
            }
        }
    }
    lease_watch.abort();
    owned.send_replace(Owned::default());
}

impl UnitLoop {
    fn new(
        api: Api<Lease>,
        gate: std::sync::Arc<ShardGate>,
        metrics: std::sync::Arc<Metrics>,
        config: ShardingConfig,
    ) -> Self {
        UnitLoop {
            leases: Leases {
                api,
                timeout: config.request_timeout(),
            },
            units: units(config.shards),
            gate,
            metrics,
            origin: Instant::now(),
            view: LeaseView::default(),
            local: BTreeMap::new(),
            owned: Owned::default(),
            member_name: member_lease_name(&config.prefix, &config.identity),
            answered: true,
            member_at: None,
            warned_at: None,
            config,
        }
    }
}

#[cfg(test)]
mod tests;
