//! What every worker gets from the process (clients, shared watches, metrics, health, Events, the child signer)
//! and the failure it gives back to be restarted from: below the runner, the supervisor and the workers alike.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::Recorder;

use crate::health::Health;
use crate::metrics::Metrics;
use crate::watch_hub::WatchHub;

/// Everything a worker needs from the process; cheap to clone.
#[derive(Clone)]
pub struct WorkerContext {
    pub client: Client,
    pub hub: Arc<WatchHub>,
    /// What the apiserver serves, asked once per group/version however many workers start together.
    pub discovery: Arc<crate::kube_client::KindDiscovery>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    /// Warnings (series-aggregated by kube-runtime).
    pub recorder: Recorder,
    /// Normal Events, sent behind the work they report.
    pub events: crate::events::EventLane,
    /// The manager's own Pod, for Events that have no better object to hang on (None outside a Pod).
    pub self_ref: Option<ObjectReference>,
    /// Signs the children Reconcilers apply and proves observed ones ours (`crate::child_signing`).
    pub signer: ruleplane_config::provenance::ChildSigner,
    /// The Reconciler parents this replica works on (every one without Leases).
    pub shards: crate::sharding::ShardScope,
    /// The Kubernetes version the apiserver runs, as the supported version Ruleplane behaves as
    /// (`docs/compatibility.md`): kube-scheduler's rules and the APIs spoken follow it.
    pub kubernetes_version: ruleplane_config::KubernetesVersion,
}

/// A worker failure the supervisor restarts from; errors a worker can live with are handled inside it.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("watch for {0} ended")]
    WatchEnded(String),
    #[error("a reconcile of rule {0} panicked")]
    ReconcilePanicked(String),
    #[error("kind not served by the apiserver (yet?): {0}")]
    Discovery(String),
    #[error("rule {rule} cannot run: {reason}")]
    Unrunnable { rule: String, reason: String },
}

/// A context whose client points nowhere: for tests of workers that never call the API (their writes go to a
/// recording, their caches are fed synthetic events).
#[cfg(test)]
pub(crate) fn offline_context() -> WorkerContext {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
    let client = Client::try_from(config).expect("client");
    WorkerContext {
        signer: ruleplane_config::provenance::ChildSigner::Unsigned,
        hub: WatchHub::new(client.clone(), Default::default()),
        discovery: Arc::new(crate::kube_client::KindDiscovery::new(client.clone())),
        recorder: Recorder::new(
            client.clone(),
            kube::runtime::events::Reporter {
                controller: "test".into(),
                instance: None,
            },
        ),
        events: crate::events::EventLane::new(client.clone(), "test", "test", Default::default()),
        client,
        metrics: Arc::new(Metrics::new()),
        health: Arc::new(Health::default()),
        self_ref: None,
        shards: crate::sharding::ShardScope::everything(ruleplane_config::sharding::DEFAULT_SHARDS),
        kubernetes_version: ruleplane_config::KubernetesVersion::NEWEST,
    }
}
