//! SchedulerPolicy worker: pods whose `spec.schedulerName` names the policy wait in the policy's scheduling queue,
//! are decided one at a time by the engine on the shared cluster cache, assumed at once, bound through
//! `pods/binding`, and reported as kube-scheduler reports them (fetch → decide → apply → report).
//!
//! The queue (`ruleplane_config::scheduler::queue`) is the one owner of where each pod waits; this loop feeds it
//! the pods of the policy, the cluster events the cache applies and the time, and runs what it pops.

mod binding;
mod cache;
mod cycle;
mod gang_cycle;
mod gangs;
mod late_kinds;
mod nominations;
mod pod_group_status;
mod preempt;
mod queue_loop;
mod reports;
mod storage;
mod volumes;
mod writer;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use ruleplane_config::SchedulerPolicy;
use ruleplane_config::scheduler::engine::queueing_hints::{HintPod, QueueingHints};
use ruleplane_config::scheduler::engine::{Engine, Nominate, ScheduleError};
use ruleplane_config::scheduler::queue::{Failure, Moment};
use tokio_util::sync::CancellationToken;
use tracing::warn;

pub use cache::ClusterCache;
use cache::LIVE_PODS;
use queue_loop::Loop;

use crate::context::WorkerContext;
use crate::context::WorkerError;
use crate::health::WorkerState;
use crate::metrics::PolicyLabels;
use writer::{ApiWriter, PodWriter};

const KIND: &str = "SchedulerPolicy";
/// Bindings in flight per policy: the next pods are decided while these are sent (kube-scheduler binds
/// asynchronously too).
const DEFAULT_BINDINGS_IN_FLIGHT: usize = 32;
/// How long a worker waits at start for the Workload watch to list before it schedules anyway.
const WORKLOADS_SYNC: Duration = Duration::from_secs(10);
/// Watch notifications taken in at once before the loop turns to its other work.
const MAX_DRAINED: usize = 4096;

/// A pending pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

impl PodKey {
    fn of(object: &DynamicObject) -> PodKey {
        PodKey {
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
        }
    }
}

/// Why a pod was not bound this time.
#[derive(Debug, thiserror::Error)]
pub enum SchedulingError {
    /// No node fits; the message is kube-scheduler's FailedScheduling text (PostFilter part included), and
    /// `nominate` what happens to the pod's `status.nominatedNodeName` (set when preemption chose a node).
    #[error("{message}")]
    Unschedulable { message: String, nominate: Nominate },
    /// The pod cannot be evaluated (an invalid quantity): a change of the pod is needed.
    #[error("{0}")]
    Invalid(#[from] ScheduleError),
    /// The engine could not run (a PreFilter error).
    #[error("{0}")]
    Engine(String),
    /// A background preemption failed (kube-scheduler logs it and retries the preemptor at once).
    #[error("preemption failed: {0}")]
    Preemption(String),
    /// VolumeBinding's PreBind failed (kube-scheduler's text); the pod was unreserved, forgotten and is retried.
    #[error("{0}")]
    PreBind(String),
    /// v1.37 refused the pod's Workload API group before its cycle (`validatePodGroup`: a member without the
    /// group's priority, scheduler name or preemption policy): kube-scheduler's SchedulerError text.
    #[error("{0}")]
    PodGroup(String),
    /// The binding failed; the pod was forgotten and is retried.
    #[error("binding to {node} failed: {source}")]
    Binding { node: String, source: kube::Error },
}

impl SchedulingError {
    fn category(&self) -> &'static str {
        match self {
            SchedulingError::Unschedulable { .. } => "unschedulable",
            SchedulingError::Preemption(_) => "preemption",
            SchedulingError::Invalid(_) => "invalid",
            SchedulingError::Engine(_) => "engine",
            SchedulingError::Binding { .. } => "binding",
            SchedulingError::PreBind(_) => "prebind",
            SchedulingError::PodGroup(_) => "pod-group",
        }
    }

    /// Whether the error marks the policy degraded in `/readyz` (a pod that fits nowhere is an outcome, not a
    /// fault of the scheduler, nor is a group its owner must correct).
    fn degrades_rule(&self) -> bool {
        !matches!(
            self,
            SchedulingError::Unschedulable { .. } | SchedulingError::PodGroup(_)
        )
    }

    /// What makes two reports of a pod the same report: the text and, for an unschedulable pod, the nomination.
    fn report_key(&self) -> String {
        match self {
            SchedulingError::Unschedulable { message, nominate } => format!("{message}\n{nominate:?}"),
            other => other.to_string(),
        }
    }
}

/// What a scheduling or binding task tells the loop.
enum Done {
    /// The pod is no longer this policy's to place (bound elsewhere, deleted, not ours any more).
    Gone(PodKey),
    /// Assumed on a node: the scheduling cycle is over, the binding runs.
    Assumed(PodKey),
    /// The pod's attempt failed; `seen` is the last cluster event the decision saw. `preempting`: its preemption
    /// runs in the background, and DefaultPreemption's PreEnqueue holds it until [`Done::Preempted`].
    Failed {
        key: PodKey,
        failure: Failure,
        prepared: Option<Arc<HintPod>>,
        seen: u64,
        error: Box<SchedulingError>,
        preempting: bool,
    },
    /// The pod's preemption ended (every victim's deletion sent), with the first API error if any.
    Preempted { key: PodKey, error: Option<String> },
    /// Bound (or found bound by someone else, `conflict`).
    Bound { key: PodKey, conflict: bool },
    /// The pod has scheduling gates: it waits for them to go.
    Gated(PodKey),
    /// The end of a gang's run: what each member's cycle came to (never itself a `Run`).
    Run(Vec<Done>),
    /// The task gives its binding slot back: its pod waits at PreBind for its volumes (up to
    /// `bindTimeoutSeconds`), which must not hold up other pods' bindings (kube-scheduler has no cap at all).
    Released(tokio::task::Id),
    /// A PodGroup's run was rejected (its group may back off).
    GroupRejected(ruleplane_config::scheduler::gang::GroupKey),
    /// A PodGroup's run met its quorum.
    GroupAllowed(ruleplane_config::scheduler::gang::GroupKey),
    /// A gang member whose run waits for a sibling's preemption: back to the queue, rejected by its group's
    /// `plugin`, unreported (a preemptor's retry pops it again with its siblings).
    Waiting {
        key: PodKey,
        plugin: &'static str,
        seen: u64,
    },
}

/// One SchedulerPolicy's scheduling of pods.
pub struct PodScheduler {
    policy: SchedulerPolicy,
    ctx: WorkerContext,
    cache: Arc<ClusterCache>,
    engine: Mutex<Engine>,
    hints: QueueingHints,
    /// Where the writes go: the apiserver, or a recording in the unit tests.
    writer: Arc<dyn PodWriter>,
}

fn pods_resource() -> ApiResource {
    ApiResource::erase::<Pod>(&())
}

/// The slot of the manager's one scheduling cache: the supervisor holds it, the first SchedulerPolicy worker fills
/// it, every other shares it (and a new leader finds it warm).
pub type SchedulingCache = Arc<std::sync::OnceLock<Arc<ClusterCache>>>;

/// The shared scheduling cache, made now if no worker made it before.
fn shared_cache(slot: &SchedulingCache, ctx: &WorkerContext) -> Arc<ClusterCache> {
    slot.get_or_init(|| {
        use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
        use k8s_openapi::api::core::v1::{Namespace, Node, ReplicationController, Service};
        // Both caches keep text, like every watch's: the snapshot keeps its own typed copy of each node and bound
        // pod, and an attempt parses its pending pod (a few microseconds) where a JSON tree per pod would take
        // several times the text's bytes.
        let nodes = ctx.hub.watch(&ApiResource::erase::<Node>(&()));
        let pods = ctx.hub.watch_filtered(&pods_resource(), None, Some(LIVE_PODS));
        let context = cache::Context {
            namespaces: ctx.hub.watch(&ApiResource::erase::<Namespace>(&())),
            services: ctx.hub.watch(&ApiResource::erase::<Service>(&())),
            replication_controllers: ctx.hub.watch(&ApiResource::erase::<ReplicationController>(&())),
            replica_sets: ctx.hub.watch(&ApiResource::erase::<ReplicaSet>(&())),
            stateful_sets: ctx.hub.watch(&ApiResource::erase::<StatefulSet>(&())),
            pod_disruption_budgets: ctx
                .hub
                .watch(&ApiResource::erase::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(&())),
            storage: storage::StorageWatches::new(&ctx.hub),
        };
        ClusterCache::new(nodes, pods, context)
    })
    .clone()
}

pub async fn run(
    policy: SchedulerPolicy,
    scheduling: SchedulingCache,
    ctx: WorkerContext,
    stop: CancellationToken,
) -> Result<(), WorkerError> {
    let name = policy.metadata.name.clone();
    // DefaultPreemption (with DynamicResources' PostFilter before it) is on when the profile has it; the engine
    // behaves as the kube-scheduler of the apiserver's minor.
    let mut engine = policy
        .engine_with_post_filters(seed(), ctx.kubernetes_version)
        .map_err(|error| WorkerError::Unrunnable {
            rule: name.clone(),
            reason: error.to_string(),
        })?;
    // The worker binds; nobody reads per-plugin scores (Events carry the verdict, not the breakdown).
    engine.set_score_breakdown(false);
    let hints = QueueingHints::for_version(policy.profile(), ctx.kubernetes_version);
    let cache = shared_cache(&scheduling, &ctx);
    // Any policy gang-schedules a pod that names a pod group (unless it disables GangScheduling / Coscheduling); a
    // kind the apiserver serves only later is watched from then on (`late_kinds`).
    let gangs = gangs::Gangs::start(&ctx, policy.gang_scheduling(), policy.coscheduling()).await;
    // Subscribed before the caches sync, so nothing applied from here on is missed.
    let mut subscriptions = vec![cache.nodes.subscribe(), cache.pods.subscribe()];
    subscriptions.extend(gangs.iter().flat_map(|g| g.watches()).map(|w| w.subscribe()));
    let events = cache.listen().await;
    // Not waited for forever: without permission to list Workloads (RBAC from before gangs) the watch never lists,
    // and only gang members should wait for it (held at PreEnqueue until their Workload is seen), not every pod.
    let workloads_synced = async {
        for watch in gangs.iter().flat_map(|g| g.watches()) {
            if tokio::time::timeout(WORKLOADS_SYNC, watch.synced()).await.is_err() {
                warn!(rule = %name, "the Workload / PodGroup watch has not listed yet (RBAC: list/watch?); gang members wait for it");
            }
        }
    };
    tokio::select! {
        _ = stop.cancelled() => return Ok(()),
        _ = async { tokio::join!(cache.synced(), workloads_synced) } => {}
    }
    let writer = Arc::new(ApiWriter {
        client: ctx.client.clone(),
        events: ctx.events.clone(),
        version: ctx.kubernetes_version,
    });
    let scheduler = Arc::new(PodScheduler {
        policy,
        ctx: ctx.clone(),
        cache,
        engine: Mutex::new(engine),
        hints,
        writer,
    });
    ctx.health.set_rule(&name, KIND, WorkerState::Running);
    Loop::new(scheduler, gangs).run(subscriptions, events, stop).await
}

/// Tie-breaking seed: differs per process, as kube-scheduler's random choice among the best does.
fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id())
}

/// The queue's clock: the wall clock, as kube-scheduler aligns backoffs to wall-clock seconds.
fn now() -> Moment {
    Moment(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// How long from now until `at` on the queue's clock.
fn until(at: Moment) -> Duration {
    at.0.saturating_sub(now().0)
}

impl PodScheduler {
    fn scheduler_name(&self) -> &str {
        &self.policy.spec.scheduler_name
    }

    /// A pod this policy should place: ours, not bound, not being deleted.
    fn is_pending_ours(&self, object: &DynamicObject) -> bool {
        let spec = object.data.get("spec");
        let field = |name| spec.and_then(|s| s.get(name)).and_then(|v| v.as_str());
        self.is_pending(
            field("schedulerName"),
            field("nodeName"),
            object.metadata.deletion_timestamp.is_some(),
        )
    }

    /// [`Self::is_pending_ours`] on a pod's `spec.schedulerName`, `spec.nodeName` and deletion.
    fn is_pending(&self, scheduler: Option<&str>, node: Option<&str>, deleting: bool) -> bool {
        scheduler == Some(self.scheduler_name()) && node.unwrap_or_default().is_empty() && !deleting
    }

    fn count(&self, result: &str) {
        self.ctx
            .metrics
            .scheduling_attempts
            .get_or_create(&PolicyLabels {
                policy: self.policy.metadata.name.clone(),
                state: result.to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod recording;
#[cfg(test)]
mod tests;
