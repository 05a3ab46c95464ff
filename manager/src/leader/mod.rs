//! Leader election on a coordination.k8s.io Lease, published as a watch channel: never two leaders at once.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// kube-scheduler's defaults: a 15 s lease, retried every 2 s, given up by a leader after 10 s without renewal.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// Timings under which two leaders could overlap, refused at startup: the same check as every shard unit's Lease.
pub use ruleplane_config::sharding::TimingError;

impl LeaderConfig {
    /// client-go's checks (`NewLeaderElector`): the safety argument needs renew deadline < lease duration.
    pub fn check(&self) -> Result<(), TimingError> {
        ruleplane_config::sharding::Timings {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
        .check()
    }

    /// How long one Lease request may take. An apiserver answers a Lease write in milliseconds; a request that
    /// hangs (a half-dead connection) must not use up the renew deadline, and dropping it closes its connection,
    /// so the next attempt goes over a new one.
    pub fn request_timeout(&self) -> Duration {
        self.retry_period.max(Duration::from_secs(1))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// No answer from the apiserver yet.
    Unknown,
    Leading,
    /// Someone else holds the lease (their identity, when known).
    Following(Option<String>),
}

impl Leadership {
    pub fn is_leading(&self) -> bool {
        matches!(self, Leadership::Leading)
    }
}

/// Why a Lease request did not do what it asked.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The Lease is not the version the write was based on (or, for a create, it exists): someone else wrote it.
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

fn holder_of(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// The holder check of every write's answer: leadership is what the apiserver stored, not what was asked for.
/// `Err` carries the holder it names instead.
fn check_holder(answer: &Lease, identity: &str) -> Result<(), Option<String>> {
    match holder_of(answer) {
        Some(holder) if holder == identity => Ok(()),
        other => Err(other),
    }
}

/// The Lease as this replica last saw it, and when, on its own clock (client-go's `observedTime`).
#[derive(Debug, Clone)]
struct Observed {
    version: Option<String>,
    holder: Option<String>,
    duration: Duration,
    at: Instant,
}

impl Observed {
    /// Records `lease` as seen at `now`, unless this very version was seen before: its clock then keeps running.
    fn see(previous: Option<Observed>, lease: &Lease, default_duration: Duration, now: Instant) -> Observed {
        let version = lease.metadata.resource_version.clone();
        if let Some(previous) = previous
            && previous.version.is_some()
            && previous.version == version
        {
            return previous;
        }
        let duration = lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(default_duration, Duration::from_secs);
        Observed {
            version,
            holder: holder_of(lease),
            duration,
            at: now,
        }
    }

    /// When a standby may take the Lease: at once if nobody holds it (a release), else once the version seen
    /// has stayed unchanged for the whole lease duration. The holder's clock is never read.
    fn free_at(&self) -> Instant {
        match self.holder {
            None => self.at,
            Some(_) => self.at + self.duration,
        }
    }
}

fn micro_now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// `observed` taken over by `identity`: every other field of it (resourceVersion above all) kept.
fn taken_over(observed: &Lease, identity: &str, duration: Duration, now: MicroTime) -> Lease {
    let mut lease = observed.clone();
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(identity) {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX));
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    lease
}

fn renewed(held: &Lease, now: MicroTime) -> Lease {
    let mut lease = held.clone();
    lease.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now);
    lease
}

/// As client-go and kube-leader-election release: no holder, valid for one more second.
fn released(held: &Lease, now: MicroTime) -> Lease {
    let mut lease = held.clone();
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    lease
}

/// The Lease's requests, each bounded by the request timeout, every write a `replace` carrying the
/// resourceVersion it was based on.
///
/// kube-leader-election 0.44 is not called any more, because none of its calls is safe here:
/// `try_acquire_or_renew` takes an expired Lease and renews it with merge patches that carry no
/// resourceVersion, so two standbys racing for an expired Lease are both answered with a Lease naming
/// themselves (the later patch wins silently), and a renewal that finds the Lease expired under another holder
/// takes it over the same way; `step_down` reads, then clears the holder without a precondition, so a release
/// landing late clears a new leader's hold. Its requests have no timeout either.
struct LeaseApi {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    timeout: Duration,
}

impl LeaseApi {
    async fn bounded<T>(&self, request: impl Future<Output = Result<T, kube::Error>>) -> Result<T, LeaseError> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(answer) => answer.map_err(LeaseError::from),
            Err(_) => Err(LeaseError::Timeout(self.timeout)),
        }
    }

    async fn get(&self) -> Result<Option<Lease>, LeaseError> {
        self.bounded(self.api.get_opt(&self.name)).await
    }

    /// A create cannot race: the second one is answered 409 (AlreadyExists).
    async fn create(&self) -> Result<Lease, LeaseError> {
        let now = micro_now();
        let mut lease = Lease::default();
        lease.metadata.name = Some(self.name.clone());
        let mut lease = taken_over(&lease, &self.identity, self.duration, now);
        if let Some(spec) = lease.spec.as_mut() {
            spec.lease_transitions = Some(0);
        }
        self.bounded(self.api.create(&PostParams::default(), &lease)).await
    }

    async fn write(&self, lease: Lease) -> Result<Lease, LeaseError> {
        debug_assert!(lease.metadata.resource_version.is_some(), "a precondition");
        self.bounded(self.api.replace(&self.name, &PostParams::default(), &lease))
            .await
    }

    async fn take_over(&self, observed: &Lease) -> Result<Lease, LeaseError> {
        self.write(taken_over(observed, &self.identity, self.duration, micro_now()))
            .await
    }

    async fn renew(&self, held: &Lease) -> Result<Lease, LeaseError> {
        self.write(renewed(held, micro_now())).await
    }

    async fn release(&self, held: &Lease) -> Result<Lease, LeaseError> {
        self.write(released(held, micro_now())).await
    }
}

/// One renewal attempt's outcome, as the leader's loop needs it.
#[derive(Debug)]
enum Renewal {
    /// The apiserver stored our renewal; `sent` is when the request that did it left (no later than the
    /// renewTime a standby will see, and the leader's deadline counts from it).
    Confirmed { sent: Instant },
    /// Someone else holds the Lease (their identity when known, None when released or deleted).
    Lost(Option<String>),
    /// No answer we can act on; tried again until the deadline.
    Failed(LeaseError),
}

/// How a leader's hold on the Lease ended.
#[derive(Debug, PartialEq, Eq)]
enum HoldEnd {
    DeadlinePassed,
    Lost(Option<String>),
    Shutdown,
}

/// Something that renews the Lease: the apiserver in the manager, a scripted sequence in the tests of [`hold`].
trait Renew {
    fn renew(&mut self) -> impl Future<Output = Renewal> + Send;
}

/// The Lease as this leader last wrote it: the next renewal is based on its version.
struct Held<'a> {
    api: &'a LeaseApi,
    lease: Lease,
}

impl Renew for Held<'_> {
    async fn renew(&mut self) -> Renewal {
        let mut sent = Instant::now();
        let mut answer = self.api.renew(&self.lease).await;
        if let Err(LeaseError::Conflict) = answer {
            // Someone wrote the Lease since our last write: most often our own earlier renewal that timed out
            // here but landed there. Still ours: renew on top of that version at once.
            match self.api.get().await {
                Ok(Some(lease)) if check_holder(&lease, &self.api.identity).is_ok() => {
                    sent = Instant::now();
                    answer = self.api.renew(&lease).await;
                }
                Ok(Some(lease)) => return Renewal::Lost(holder_of(&lease)),
                Ok(None) => return Renewal::Lost(None),
                Err(e) => return Renewal::Failed(e),
            }
        }
        match answer {
            Ok(lease) => match check_holder(&lease, &self.api.identity) {
                Ok(()) => {
                    self.lease = lease;
                    Renewal::Confirmed { sent }
                }
                Err(holder) => Renewal::Lost(holder),
            },
            Err(LeaseError::Conflict) => Renewal::Failed(LeaseError::Conflict),
            Err(e) => Renewal::Failed(e),
        }
    }
}

/// Keeps renewing every `retry_period` from `confirmed` (when the last confirmed write was sent) until a
/// renewal shows another holder, `shutdown` resolves, or `confirmed + renew_deadline` passes without a newer
/// confirmation. The deadline is a timer of its own, raced against the request: a renewal that hangs does not
/// hold it back.
async fn hold(
    renewer: &mut impl Renew,
    mut confirmed: Instant,
    renew_deadline: Duration,
    retry_period: Duration,
    shutdown: impl Future<Output = ()>,
) -> HoldEnd {
    tokio::pin!(shutdown);
    let mut next = confirmed + retry_period;
    loop {
        let stop_at = confirmed + renew_deadline;
        let (at, renewer) = (next, &mut *renewer);
        let attempt = async move {
            tokio::time::sleep_until(at).await;
            let started = Instant::now();
            (started, renewer.renew().await)
        };
        tokio::select! {
            // Checked first: an answer arriving in the same instant as the deadline does not extend it.
            biased;
            _ = tokio::time::sleep_until(stop_at) => return HoldEnd::DeadlinePassed,
            _ = &mut shutdown => return HoldEnd::Shutdown,
            (started, outcome) = attempt => match outcome {
                Renewal::Confirmed { sent } => {
                    confirmed = sent;
                    next = sent + retry_period;
                }
                Renewal::Lost(holder) => return HoldEnd::Lost(holder),
                Renewal::Failed(e) => {
                    let left = stop_at.saturating_duration_since(Instant::now());
                    warn!(error = %e, deadline_in = ?left, "could not renew the lease");
                    // At most one attempt per retry period; at once after a request that took longer.
                    next = started + retry_period;
                }
            },
        }
    }
}

/// What a standby's attempt found.
enum Attempt {
    Won {
        lease: Lease,
        sent: Instant,
    },
    /// Not ours (yet): the Lease as read, if it was.
    NotWon(Option<Lease>),
}

/// One acquisition attempt: create the Lease if there is none, take it over if it is free by our own
/// observation, else report it held.
async fn try_acquire(api: &LeaseApi, observed: Option<&Observed>) -> Result<Attempt, LeaseError> {
    let Some(lease) = api.get().await? else {
        let sent = Instant::now();
        return match api.create().await {
            Ok(lease) => Ok(won_or_not(api, lease, sent)),
            Err(LeaseError::Conflict) => Ok(Attempt::NotWon(None)),
            Err(e) => Err(e),
        };
    };
    let ours = check_holder(&lease, &api.identity).is_ok();
    // The same version seen long enough ago, or no holder at all. Judged on what was observed before this read
    // when it is the same version, so the clock started at the first sighting.
    let now = Instant::now();
    let seen = Observed::see(observed.cloned(), &lease, api.duration, now);
    if !ours && seen.free_at() > now {
        return Ok(Attempt::NotWon(Some(lease)));
    }
    // Ours in the apiserver's eyes but not here (a takeover that timed out here and landed there, or this
    // identity's previous process): renewing it on its version is as safe as a takeover.
    let sent = Instant::now();
    let written = if ours {
        api.renew(&lease).await
    } else {
        api.take_over(&lease).await
    };
    match written {
        Ok(answer) => Ok(won_or_not(api, answer, sent)),
        // Another replica's write landed first: it won.
        Err(LeaseError::Conflict) => Ok(Attempt::NotWon(Some(lease))),
        Err(e) => Err(e),
    }
}

fn won_or_not(api: &LeaseApi, answer: Lease, sent: Instant) -> Attempt {
    match check_holder(&answer, &api.identity) {
        Ok(()) => Attempt::Won { lease: answer, sent },
        Err(_) => Attempt::NotWon(Some(answer)),
    }
}

/// Runs the election until `shutdown` fires, then releases the lease if held. `client` is the Lease's own
/// client (`kube_client::lease_client`), not the workers'.
///
/// The guarantee rests on three things:
/// - every write of the Lease (create, takeover, renewal, release) carries the resourceVersion it was based on,
///   so of two replicas racing for it exactly one write lands and the other is answered 409;
/// - a standby counts a Lease's expiry from the moment *it* saw that version (client-go's `observedTime`), on
///   its own monotonic clock, so wall-clock skew between replicas does not matter, only their rate drift;
/// - a leader stops at `last confirmed renewal (when it was sent) + renew deadline` on a timer of its own,
///   whatever its requests are doing. With the defaults that is 10 s after a renewal that a standby cannot
///   take over before 15 s after: the 5 s between cover rate drift and the workers' abort.
///
/// Every request is bounded by a timeout and goes through the Lease's own client, outside the workers' rate
/// and in-flight limits, so a busy rule set never delays a renewal.
pub async fn run_election(
    client: Client,
    config: LeaderConfig,
    state: watch::Sender<Leadership>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api = LeaseApi {
        api: Api::namespaced(client, &config.namespace),
        name: config.lease_name.clone(),
        identity: config.identity.clone(),
        duration: config.lease_duration,
        timeout: config.request_timeout(),
    };
    // A standby watches the Lease so that a release (SIGTERM of the leader) or a renewal is seen at once: a
    // release is taken over in milliseconds, and an expiry is counted from the last version actually seen.
    let (lease_tx, mut lease_rx) = watch::channel::<Option<Lease>>(None);
    // Spreads standbys' attempts on a free Lease so they do not all write it in the same instant (the
    // resourceVersion precondition makes a tie safe; the spread makes it rare).
    let jitter = Duration::from_millis(
        20 + std::hash::BuildHasher::hash_one(
            &std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default(),
            &config.identity,
        ) % 100,
    );
    let fields = format!("metadata.name={}", config.lease_name);
    let watch_api = api.api.clone();
    let _lease_watch = AbortOnDrop(tokio::spawn(async move {
        let stream = watcher::watcher(watch_api, watcher::Config::default().fields(&fields)).applied_objects();
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            if let Ok(lease) = item {
                lease_tx.send_replace(Some(lease));
            }
        }
    }));

    let mut observed: Option<Observed> = None;
    loop {
        // Following (or not yet known): try, then wait for the Lease to be free.
        let mut next = Instant::now() + config.retry_period;
        match try_acquire(&api, observed.as_ref()).await {
            Ok(Attempt::Won { lease, sent }) => {
                info!(identity = %config.identity, lease = %config.lease_name, "became leader");
                state.send_replace(Leadership::Leading);
                let mut held = Held { api: &api, lease };
                let stop = shutdown.clone();
                let end = hold(
                    &mut held,
                    sent,
                    config.renew_deadline,
                    config.retry_period,
                    async move {
                        let mut stop = stop;
                        let _ = stop.wait_for(|s| *s).await;
                    },
                )
                .await;
                match end {
                    HoldEnd::Shutdown => {
                        release(&api, &held.lease, &state).await;
                        return;
                    }
                    HoldEnd::DeadlinePassed => {
                        warn!(
                            deadline = ?config.renew_deadline,
                            "no renewal confirmed within the renew deadline; stepping down"
                        );
                        state.send_replace(Leadership::Following(None));
                    }
                    HoldEnd::Lost(holder) => {
                        warn!(holder = ?holder, "lost leadership: the lease names another holder");
                        state.send_replace(Leadership::Following(holder));
                    }
                }
                observed = None;
                continue;
            }
            Ok(Attempt::NotWon(lease)) => {
                if let Some(lease) = lease {
                    let seen = Observed::see(observed.take(), &lease, config.lease_duration, Instant::now());
                    state.send_replace(Leadership::Following(seen.holder.clone()));
                    next = next.min(seen.free_at() + jitter);
                    debug!(free_in = ?seen.free_at().saturating_duration_since(Instant::now()), "following");
                    observed = Some(seen);
                }
            }
            Err(e) => warn!(error = %e, "lease acquire failed"),
        }
        let sleep = tokio::time::sleep_until(next);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                _ = shutdown.wait_for(|s| *s) => return,
                Ok(()) = lease_rx.changed() => {
                    let Some(lease) = lease_rx.borrow_and_update().clone() else { continue };
                    let seen = Observed::see(observed.take(), &lease, config.lease_duration, Instant::now());
                    let at = seen.free_at() + jitter;
                    debug!(free_in = ?at.saturating_duration_since(Instant::now()), "lease changed");
                    if at < sleep.deadline() {
                        sleep.as_mut().reset(at);
                    }
                    observed = Some(seen);
                }
            }
        }
    }
}

/// Gives the Lease up (based on the version last written, so a release never clears another holder's) and
/// publishes that we no longer lead before the request, whatever its outcome.
async fn release(api: &LeaseApi, held: &Lease, state: &watch::Sender<Leadership>) {
    state.send_replace(Leadership::Following(None));
    match api.release(held).await {
        Ok(_) => info!("released the lease"),
        Err(e) => warn!(error = %e, "could not release the lease; it expires on its own"),
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests;
