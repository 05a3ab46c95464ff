//! Leader election on a coordination.k8s.io Lease (kube-leader-election), published as a watch channel.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_leader_election::{LeaseLock, LeaseLockParams, LeaseLockResult};
use tokio::sync::{mpsc, watch};
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

/// Longer than one get → patch round trip of a competing replica, short next to the lease duration.
const VERIFY_DELAY: Duration = Duration::from_millis(100);

fn holder_of(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// How long until `lease` may be taken over, judged the way kube-leader-election judges it.
fn until_expiry(lease: &Lease) -> Option<Duration> {
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref()?.0;
    let expires = renewed
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(i64::from(
            spec.lease_duration_seconds?,
        )))
        .ok()?;
    let left = expires.duration_since(k8s_openapi::jiff::Timestamp::now());
    Some(Duration::try_from(left).unwrap_or(Duration::ZERO))
}

/// Runs the election until `shutdown` fires, then releases the lease if held.
pub async fn run_election(
    client: Client,
    config: LeaderConfig,
    state: watch::Sender<Leadership>,
    mut shutdown: watch::Receiver<bool>,
) {
    let lock = LeaseLock::new(
        client.clone(),
        &config.namespace,
        LeaseLockParams {
            lease_name: config.lease_name.clone(),
            holder_id: config.identity.clone(),
            lease_ttl: config.lease_duration,
        },
    );
    // A standby watches the Lease so that a release (SIGTERM of the leader) or an expiry is acted on at
    // once instead of at the next poll: takeover then costs about the 1 s a released lease stays valid.
    let (lease_tx, mut lease_rx) = mpsc::channel::<Lease>(16);
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let verify_api = api.clone();
    // Spreads standbys' attempts on an expired Lease so they do not all patch it in the same instant.
    let jitter = Duration::from_millis(
        20 + std::hash::BuildHasher::hash_one(
            &std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default(),
            &config.identity,
        ) % 100,
    );
    let fields = format!("metadata.name={}", config.lease_name);
    let lease_watch = tokio::spawn(async move {
        let stream = watcher::watcher(api, watcher::Config::default().fields(&fields)).applied_objects();
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            if let Ok(lease) = item
                && lease_tx.send(lease).await.is_err()
            {
                return;
            }
        }
    });

    let mut last_renewed: Option<Instant> = None;
    loop {
        let leading_before = state.borrow().is_leading();
        let mut next = config.retry_period;
        match lock.try_acquire_or_renew().await {
            Ok(LeaseLockResult::Acquired(_)) if leading_before => {
                last_renewed = Some(Instant::now());
            }
            Ok(LeaseLockResult::Acquired(_)) => {
                // kube-leader-election takes an expired Lease with a patch that carries no resourceVersion, so
                // two standbys racing for it can both be told they won; the later write is the real holder.
                // Read it back once the race window has passed before acting as leader.
                tokio::time::sleep(VERIFY_DELAY).await;
                match verify_api.get(&config.lease_name).await {
                    Ok(lease) if holder_of(&lease).as_deref() == Some(config.identity.as_str()) => {
                        last_renewed = Some(Instant::now());
                        info!(identity = %config.identity, lease = %config.lease_name, "became leader");
                        state.send_replace(Leadership::Leading);
                    }
                    Ok(lease) => {
                        info!(holder = ?holder_of(&lease), "lost the race for the lease");
                        state.send_replace(Leadership::Following(holder_of(&lease)));
                    }
                    Err(e) => warn!(error = %e, "could not confirm the acquired lease; retrying"),
                }
            }
            Ok(LeaseLockResult::NotAcquired(lease)) => {
                if leading_before {
                    warn!("lost leadership");
                }
                last_renewed = None;
                if let Some(left) = until_expiry(&lease) {
                    next = next.min(left + jitter);
                    debug!(next_attempt_in = ?next, "following");
                }
                state.send_replace(Leadership::Following(holder_of(&lease)));
            }
            Err(e) => {
                warn!(error = %e, "lease acquire/renew failed");
                // A leader that cannot renew within the deadline must stop acting: another replica may take
                // the lease once it expires, and two leaders would fight over the same objects.
                let expired = last_renewed.is_none_or(|t| t.elapsed() >= config.renew_deadline);
                if leading_before && expired {
                    warn!("could not renew the lease within the deadline; stepping down");
                    state.send_replace(Leadership::Following(None));
                    last_renewed = None;
                }
            }
        }
        let sleep = tokio::time::sleep(next);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                _ = shutdown.changed() => {
                    lease_watch.abort();
                    release(&lock, &state).await;
                    return;
                }
                Some(lease) = lease_rx.recv() => {
                    if state.borrow().is_leading() { continue; }
                    if let Some(left) = until_expiry(&lease) {
                        let at = Instant::now() + left + jitter;
                        debug!(expires_in = ?left, "lease changed");
                        if at < sleep.deadline() {
                            sleep.as_mut().reset(at);
                        }
                    }
                }
            }
        }
    }
}

async fn release(lock: &LeaseLock, state: &watch::Sender<Leadership>) {
    if state.borrow().is_leading() {
        state.send_replace(Leadership::Following(None));
        match lock.step_down().await {
            Ok(()) => info!("released the lease"),
            Err(e) => warn!(error = %e, "could not release the lease; it expires on its own"),
        }
    }
}
