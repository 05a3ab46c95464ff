//! SchedulerPolicy worker: pods whose `spec.schedulerName` names the policy are decided by the engine on the
//! shared cluster cache, assumed at once, bound through `pods/binding`, and reported as kube-scheduler reports
//! them (fetch → decide → apply → report, on the shared runner).

mod cache;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use ruleplane_config::SchedulerPolicy;
use ruleplane_config::scheduler::engine::{Engine, Outcome, ScheduleError};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

pub use cache::ClusterCache;
use cache::LIVE_PODS;

use crate::context::WorkerContext;
use crate::context::WorkerError;
use crate::health::WorkerState;
use crate::metrics::{PolicyLabels, PolicyOnlyLabels};
use crate::runner::{Action, Backoff, Reconcile, ReconcileError, Reconciled, Requeued, Runner};
use crate::watch_hub::{Change, KindKey};

const KIND: &str = "SchedulerPolicy";
/// Bindings in flight per policy: the next pods are decided while these are sent (kube-scheduler binds
/// asynchronously too).
const DEFAULT_BINDINGS_IN_FLIGHT: usize = 32;
/// kube-scheduler's pod backoff: 1 s doubling to 10 s.
const POD_BACKOFF: Backoff = Backoff {
    start: Duration::from_secs(1),
    cap: Duration::from_secs(10),
};
/// kube-scheduler moves unschedulable pods back to the active queue after this long without a helpful change.
const UNSCHEDULABLE_MAX_WAIT: Duration = Duration::from_secs(300);

/// A pending pod's place in the queue: when it was first seen (for the e2e latency) and its priority (the
/// queue's order, noted here so ordering never reads the pod from the cache).
#[derive(Clone, Copy, Debug)]
struct Pending {
    first_seen: Instant,
    priority: i64,
}

impl Pending {
    fn of(object: &DynamicObject) -> Pending {
        Pending {
            first_seen: Instant::now(),
            priority: object
                .data
                .pointer("/spec/priority")
                .and_then(|p| p.as_i64())
                .unwrap_or(0),
        }
    }
}

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
    /// No node fits; the message is kube-scheduler's FailedScheduling text.
    #[error("{0}")]
    Unschedulable(String),
    /// The pod cannot be evaluated (an invalid quantity): a change of the pod is needed.
    #[error("{0}")]
    Invalid(#[from] ScheduleError),
    /// The engine could not run (a PreFilter error).
    #[error("{0}")]
    Engine(String),
    /// The binding failed; the pod was forgotten and is retried.
    #[error("binding to {node} failed: {source}")]
    Binding { node: String, source: kube::Error },
}

impl ReconcileError for SchedulingError {
    fn category(&self) -> &'static str {
        match self {
            SchedulingError::Unschedulable(_) => "unschedulable",
            SchedulingError::Invalid(_) => "invalid",
            SchedulingError::Engine(_) => "engine",
            SchedulingError::Binding { .. } => "binding",
        }
    }

    /// Unschedulable pods wait for a cluster change (or 5 minutes); invalid pods for a change of the pod.
    fn is_permanent(&self) -> bool {
        matches!(self, SchedulingError::Unschedulable(_) | SchedulingError::Invalid(_))
    }

    fn retry_after(&self) -> Option<Duration> {
        matches!(self, SchedulingError::Unschedulable(_)).then_some(UNSCHEDULABLE_MAX_WAIT)
    }

    fn degrades_rule(&self) -> bool {
        !matches!(self, SchedulingError::Unschedulable(_))
    }
}

/// Which pods are waiting where, for the pending-pods gauge and for moving unschedulable pods on a change.
#[derive(Default)]
struct Queues {
    /// Pods of this policy seen pending.
    pending: HashMap<PodKey, Pending>,
    unschedulable: HashSet<PodKey>,
    backoff: HashSet<PodKey>,
}

/// One SchedulerPolicy's scheduling of one pod.
pub struct PodScheduler {
    policy: SchedulerPolicy,
    ctx: WorkerContext,
    cache: Arc<ClusterCache>,
    engine: Mutex<Engine>,
    queues: Mutex<Queues>,
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
        use crate::watch_hub::Storage;
        use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
        use k8s_openapi::api::core::v1::{Namespace, Node, ReplicationController, Service};
        // Every decision and cache rebuild reads these: kept parsed.
        let nodes = ctx
            .hub
            .watch_stored(&ApiResource::erase::<Node>(&()), None, None, Storage::Parsed);
        let pods = ctx
            .hub
            .watch_stored(&pods_resource(), None, Some(LIVE_PODS), Storage::Parsed);
        let context = cache::Context {
            namespaces: ctx.hub.watch(&ApiResource::erase::<Namespace>(&())),
            services: ctx.hub.watch(&ApiResource::erase::<Service>(&())),
            replication_controllers: ctx.hub.watch(&ApiResource::erase::<ReplicationController>(&())),
            replica_sets: ctx.hub.watch(&ApiResource::erase::<ReplicaSet>(&())),
            stateful_sets: ctx.hub.watch(&ApiResource::erase::<StatefulSet>(&())),
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
    let mut engine = policy.engine(seed()).map_err(|error| WorkerError::Unrunnable {
        rule: name.clone(),
        reason: error.to_string(),
    })?;
    // The worker binds; nobody reads per-plugin scores (Events carry the verdict, not the breakdown).
    engine.set_score_breakdown(false);
    let cache = shared_cache(&scheduling, &ctx);
    let subscriptions = vec![cache.nodes.subscribe(), cache.pods.subscribe()];
    tokio::select! {
        _ = stop.cancelled() => return Ok(()),
        _ = cache.synced() => {}
    }
    let scheduler = Arc::new(PodScheduler {
        policy,
        ctx: ctx.clone(),
        cache,
        engine: Mutex::new(engine),
        queues: Mutex::new(Queues::default()),
    });
    let initial = scheduler.all_pending();
    ctx.health.set_rule(&name, KIND, WorkerState::Running);
    scheduler.update_gauges();
    let runner = Runner {
        gate: None,
        rule: name,
        kind: KIND,
        concurrency: DEFAULT_BINDINGS_IN_FLIGHT,
        backoff: POD_BACKOFF,
        metrics: ctx.metrics.clone(),
        health: ctx.health.clone(),
    };
    runner
        .run(scheduler, subscriptions, Requeued::none(), initial, stop)
        .await
}

/// Tie-breaking seed: differs per process, as kube-scheduler's random choice among the best does.
fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id())
}

impl PodScheduler {
    fn scheduler_name(&self) -> &str {
        &self.policy.spec.scheduler_name
    }

    /// A pod this policy should place: ours, not bound, not being deleted.
    fn is_pending_ours(&self, object: &DynamicObject) -> bool {
        let spec = object.data.get("spec");
        let scheduler = spec.and_then(|s| s.get("schedulerName")).and_then(|v| v.as_str());
        let node = spec
            .and_then(|s| s.get("nodeName"))
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        scheduler == Some(self.scheduler_name()) && node.is_empty() && object.metadata.deletion_timestamp.is_none()
    }

    fn all_pending(&self) -> Vec<PodKey> {
        let pending: Vec<(PodKey, Pending)> = self
            .cache
            .pods
            .store
            .state()
            .iter()
            .filter(|o| self.is_pending_ours(o))
            .map(|o| (PodKey::of(o), Pending::of(o)))
            .collect();
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let mut keys = Vec::with_capacity(pending.len());
        for (key, entry) in pending {
            queues.pending.entry(key.clone()).or_insert(entry).priority = entry.priority;
            keys.push(key);
        }
        keys
    }

    /// Unschedulable pods go back to the queue on a change that could help them.
    fn move_unschedulable(&self) -> Vec<PodKey> {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.unschedulable.iter().cloned().collect()
    }

    fn update_gauges(&self) {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let policy = self.policy.metadata.name.clone();
        let gauge = |state: &str, value: usize| {
            self.ctx
                .metrics
                .pending_pods
                .get_or_create(&PolicyLabels {
                    policy: policy.clone(),
                    state: state.to_string(),
                })
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        };
        let waiting = queues.unschedulable.len() + queues.backoff.len();
        let active = queues.pending.len().saturating_sub(waiting);
        gauge("unschedulable", queues.unschedulable.len());
        gauge("backoff", queues.backoff.len());
        gauge("active", active);
        self.ctx.health.set_rule_detail(
            &policy,
            format!(
                "scheduler {}: pending {active} active, {} backoff, {} unschedulable",
                self.scheduler_name(),
                queues.backoff.len(),
                queues.unschedulable.len()
            ),
        );
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

    fn settle(&self, key: &PodKey) {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.pending.remove(key);
        queues.unschedulable.remove(key);
        queues.backoff.remove(key);
    }

    async fn bind(&self, pod: &Pod, node: &str) -> Result<(), kube::Error> {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &namespace);
        api.create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
            .await
            .map(|_| ())
    }

    /// Publishes an Event without holding up the next pod: the binding is what placement waits for, the Event is
    /// a report (kube-scheduler records events asynchronously too).
    fn publish(&self, pod: &Pod, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        let recorder = self.ctx.recorder.clone();
        let regarding = pod.object_ref(&());
        tokio::spawn(async move {
            if let Err(error) = recorder.publish(&event, &regarding).await {
                warn!(%error, "could not publish an Event");
            }
        });
    }

    /// The `Scheduled` Event, through the Event lane: unique per pod (the recorder's series aggregation buys
    /// nothing), and sent behind the bindings so a burst binds first.
    fn publish_scheduled(&self, pod: &Pod, node: &str) {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        self.ctx.events.publish(crate::events::Report {
            regarding: pod.object_ref(&()),
            reason: "Scheduled".into(),
            action: "Binding".into(),
            note: format!("Successfully assigned {namespace}/{name} to {node}"),
        });
    }
}

impl Reconcile for PodScheduler {
    type Key = PodKey;
    type Error = SchedulingError;
    type Report = std::convert::Infallible;

    fn keys_for(&self, kind: &KindKey, change: &Change) -> Vec<PodKey> {
        let is_pods = kind.kind == "Pod";
        match change {
            Change::Resync => {
                let mut keys = self.all_pending();
                keys.extend(self.move_unschedulable());
                keys
            }
            Change::Applied(object) if is_pods => {
                let key = PodKey::of(object);
                if self.is_pending_ours(object) {
                    let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
                    let entry = Pending::of(object);
                    queues.pending.entry(key.clone()).or_insert(entry).priority = entry.priority;
                    vec![key]
                } else {
                    // Bound (by us or someone else) or deleting: nothing to do for it but forget it.
                    let was_ours = self
                        .queues
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .pending
                        .contains_key(&key);
                    if was_ours { vec![key] } else { Vec::new() }
                }
            }
            Change::Deleted(object) if is_pods => {
                let key = PodKey::of(object);
                let mut keys = Vec::new();
                if self
                    .queues
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pending
                    .contains_key(&key)
                {
                    keys.push(key);
                }
                // A deleted bound pod frees room.
                if object
                    .data
                    .pointer("/spec/nodeName")
                    .and_then(|v| v.as_str())
                    .is_some_and(|n| !n.is_empty())
                {
                    keys.extend(self.move_unschedulable());
                }
                keys
            }
            // A node added or changed (allocatable, labels, taints, unschedulable) or removed.
            Change::Applied(_) | Change::Deleted(_) => self.move_unschedulable(),
        }
    }

    /// kube-scheduler's queue order: higher priority first (then first in, first out).
    fn rank(&self, key: &PodKey) -> i64 {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.pending.get(key).map_or(0, |pending| -pending.priority)
    }

    async fn reconcile(&self, key: &PodKey) -> Result<Reconciled<Self::Report>, SchedulingError> {
        let result = self.schedule_one(key).await;
        match &result {
            Err(SchedulingError::Unschedulable(_)) => {
                let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
                queues.unschedulable.insert(key.clone());
                queues.backoff.remove(key);
            }
            Err(_) => {
                let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
                queues.backoff.insert(key.clone());
                queues.unschedulable.remove(key);
            }
            Ok(_) => {}
        }
        self.update_gauges();
        result.map(Into::into)
    }

    async fn report_error(&self, key: &PodKey, error: &SchedulingError) {
        let Some(pod) = self.cache.pods.store.get_typed::<Pod>(Some(&key.namespace), &key.name) else {
            return;
        };
        let message = error.to_string();
        self.publish(
            &pod,
            EventType::Warning,
            "FailedScheduling",
            "Scheduling",
            message.clone(),
        );
        if let SchedulingError::Unschedulable(message) = error {
            // The pod condition kube-scheduler sets, so `kubectl describe pod` tells the story.
            let patch = json!({"status": {"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                "lastTransitionTime": crate::workers::now(),
            }]}});
            let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &key.namespace);
            if let Err(error) = api
                .patch_status(&key.name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                debug!(%error, pod = %key.name, "could not set the PodScheduled condition");
            }
        }
    }
}

impl PodScheduler {
    async fn schedule_one(&self, key: &PodKey) -> Result<Action, SchedulingError> {
        // Fetch: the pod as the watch has it; pods bound meanwhile, deleted or no longer ours are dropped.
        let Some(object) = self.cache.pods.get(Some(&key.namespace), &key.name) else {
            self.settle(key);
            return Ok(Action::AwaitChange);
        };
        if !self.is_pending_ours(&object) {
            self.settle(key);
            return Ok(Action::AwaitChange);
        }
        // Read in place from the cached object (the pod watch keeps objects parsed).
        let Ok(pod) = crate::watch_hub::typed::<Pod>(&object) else {
            self.settle(key);
            return Ok(Action::AwaitChange);
        };
        // Decide (and assume) on the shared cache.
        let decision = self.cache.schedule(&self.engine, &pod).await?;
        match decision.outcome {
            Outcome::Scheduled { node } => {
                // Apply: the binding.
                let started = Instant::now();
                let result = self.bind(&pod, &node).await;
                let labels = PolicyOnlyLabels {
                    policy: self.policy.metadata.name.clone(),
                };
                self.ctx
                    .metrics
                    .binding_duration
                    .get_or_create(&labels)
                    .observe(started.elapsed().as_secs_f64());
                match result {
                    Ok(()) => {}
                    // Already bound (by another replica before a takeover, or another scheduler): not an error;
                    // the watch accounts the pod where it really is.
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        self.cache.forget(&pod).await;
                        self.settle(key);
                        return Ok(Action::AwaitChange);
                    }
                    Err(source) => {
                        self.cache.forget(&pod).await;
                        self.count("error");
                        return Err(SchedulingError::Binding {
                            node: node.to_string(),
                            source,
                        });
                    }
                }
                // Report.
                self.count("scheduled");
                let first_seen = self
                    .queues
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pending
                    .get(key)
                    .map(|pending| pending.first_seen);
                if let Some(first_seen) = first_seen {
                    self.ctx
                        .metrics
                        .scheduling_e2e
                        .get_or_create(&labels)
                        .observe(first_seen.elapsed().as_secs_f64());
                }
                self.settle(key);
                self.publish_scheduled(&pod, &node);
                Ok(Action::AwaitChange)
            }
            Outcome::Unschedulable { message, .. } => {
                self.count("unschedulable");
                Err(SchedulingError::Unschedulable(message))
            }
            // Gates are lifted by an update of the pod, which queues it again.
            Outcome::Gated { .. } => Ok(Action::AwaitChange),
            Outcome::Error { message } => {
                self.count("error");
                Err(SchedulingError::Engine(message))
            }
        }
    }
}
