//! The one scheduling cache of the manager: nodes and the pods on them (bound or assumed by any policy), kept
//! from the shared node and pod watches, so two policies never overcommit a node between them.
//!
//! The cache is brought up to date under its lock right before each decision by draining its watch
//! subscriptions: a worker requeues a pod because of a change it was notified of, and the same change is
//! already waiting in the cache's subscription (one broadcast), so the decision always sees it.
//!
//! Each change it applies becomes kube-scheduler's cluster event (a node added, its labels or taints updated, an
//! assigned pod deleted, ...) with the old and new objects, numbered and sent to every policy's queue, whose
//! queueing hints decide which unschedulable pods it could help. A decision reports the number of the last
//! event it saw, so a queue never retries a pod for a change its failed decision already took into account.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::DynamicObject;
use ruleplane_config::scheduler::cosched::{self, PodGroupSpec};
use ruleplane_config::scheduler::engine::queueing_hints::{
    ActionType, ClusterEvent, HintPod, QueueingHints, node_update_actions,
};
use ruleplane_config::scheduler::engine::volume_plan::{self, VolumePlan};
use ruleplane_config::scheduler::engine::{Decision, Engine, Nominate, ScheduleError, Snapshot, Workloads};
use ruleplane_config::scheduler::gang::GroupKey;
use ruleplane_config::scheduler::pod_group_cycle::GroupPreemption;
use tokio::sync::{Mutex, mpsc};
use tracing::{debug, warn};

use super::nominations::{Nominations, nominated_pending};
use super::storage::{StorageChanges, StorageWatches};
use crate::watch_hub::{Change, SharedWatch, Subscription};

#[path = "cache_pods.rs"]
mod pods;
use pods::{apply_pod, nomination_key};

/// kube-scheduler's pod informer filter: terminated pods hold no resources.
pub const LIVE_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

pub struct ClusterCache {
    pub nodes: Arc<SharedWatch>,
    pub pods: Arc<SharedWatch>,
    /// What else decisions read, as kube-scheduler does: namespaces (labels for pod-affinity namespace
    /// selectors) and the workloads default topology spreading derives a pod's selector from.
    context: Context,
    state: Mutex<State>,
}

/// The watches of namespaces and workloads.
pub struct Context {
    pub namespaces: Arc<SharedWatch>,
    pub services: Arc<SharedWatch>,
    pub replication_controllers: Arc<SharedWatch>,
    pub replica_sets: Arc<SharedWatch>,
    pub stateful_sets: Arc<SharedWatch>,
    /// PodDisruptionBudgets (`policy/v1`), which preemption counts.
    pub pod_disruption_budgets: Arc<SharedWatch>,
    /// Claims, volumes, classes and CSI objects, which the volume plugins read.
    pub storage: StorageWatches,
}

impl Context {
    fn all(&self) -> [&Arc<SharedWatch>; 6] {
        [
            &self.namespaces,
            &self.services,
            &self.replication_controllers,
            &self.replica_sets,
            &self.stateful_sets,
            &self.pod_disruption_budgets,
        ]
    }
}

struct State {
    snapshot: Snapshot,
    node_changes: Subscription,
    pod_changes: Subscription,
    context_changes: Vec<Subscription>,
    /// Namespaces or workloads changed since they were last given to the snapshot.
    context_dirty: bool,
    /// The storage watches' changes (each one a cluster event for the volume plugins' hints).
    storage_changes: StorageChanges,
    /// Pods a policy placed whose binding the watch has not shown yet: snapshot key → node.
    assumed: HashMap<String, String>,
    /// VolumeBinding's Reserve for assumed pods with volume work (snapshot key → plan, or Reserve's error); the
    /// plans' objects are the assume cache the snapshot's storage view overlays.
    volumes: HashMap<String, Result<VolumePlan, String>>,
    /// The nominator: pending pods with a `status.nominatedNodeName` and the nominations decided here.
    nominations: Nominations,
    /// Set when an incremental update could not be applied: the next decision rebuilds from the watch caches.
    stale: bool,
    /// Pods the watch shows bound to a node the snapshot does not have (yet, or no longer): node → the pods'
    /// `namespace/name`. A node joining reads only these from the pod watch's cache, which keeps pods as text: a
    /// node joining a cluster of 10,000 pods must not cost 10,000 parses.
    waiting_for_node: HashMap<String, HashSet<String>>,
    /// The number of the last cluster event sent.
    sequence: u64,
    /// The policies' queues listening for cluster events.
    listeners: Vec<mpsc::UnboundedSender<(u64, Arc<ClusterEvent>)>>,
}

/// VolumeBinding's Reserve (`AssumePodVolumes`) for a pod just assumed on `node`, on the view the decision read;
/// only plans with work are kept (PreBindPreFlight skips the others).
fn reserve_volumes(state: &mut State, pod: &Pod, node: &str) {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    if !volumes
        .iter()
        .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
    {
        return;
    }
    let Some(storage) = state.snapshot.storage() else {
        return;
    };
    let Some(labels) = state.snapshot.get(node).map(|n| n.labels().clone()) else {
        return;
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let plan = volume_plan::plan(pod, namespace, storage, node, &labels);
    if plan.as_ref().is_ok_and(VolumePlan::is_empty) {
        return;
    }
    state.volumes.insert(pod_key(pod), plan);
    state.storage_changes.dirty = true;
}

/// Cluster events as the cache applied them, each with its number.
pub type ClusterEvents = mpsc::UnboundedReceiver<(u64, Arc<ClusterEvent>)>;

/// One scheduling cycle's result on the cache.
pub struct Cycle {
    pub decision: Decision,
    /// The number of the last cluster event the decision saw.
    pub seen: u64,
    /// The pod prepared for the queueing hints, when it was not placed.
    pub prepared: Option<Arc<HintPod>>,
}

impl State {
    /// Numbers an event and sends it to every listening queue.
    fn emit(&mut self, event: ClusterEvent) {
        if self.listeners.is_empty() {
            return;
        }
        self.sequence += 1;
        let sequence = self.sequence;
        let event = Arc::new(event);
        self.listeners
            .retain(|listener| listener.send((sequence, event.clone())).is_ok());
    }

    fn listening(&self) -> bool {
        !self.listeners.is_empty()
    }
}

/// The engine's key of a pod: its UID (namespace/name without one), as in the snapshot.
pub fn pod_key(pod: &Pod) -> String {
    match pod.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => ruleplane_config::scheduler::engine::snapshot::pod_ref(pod),
    }
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn typed<T: serde::de::DeserializeOwned>(object: &DynamicObject) -> Option<T> {
    match crate::watch_hub::typed::<T>(object) {
        Ok(typed) => Some(typed),
        Err(error) => {
            warn!(name = ?object.metadata.name, %error, "object from the watch does not parse; ignored");
            None
        }
    }
}

impl ClusterCache {
    /// A cache over these watches; it subscribes now, so nothing applied from here on is missed.
    pub fn new(nodes: Arc<SharedWatch>, pods: Arc<SharedWatch>, context: Context) -> Arc<ClusterCache> {
        let state = State {
            snapshot: Snapshot::new(),
            node_changes: nodes.subscribe(),
            pod_changes: pods.subscribe(),
            context_changes: context.all().iter().map(|w| w.subscribe()).collect(),
            context_dirty: true,
            storage_changes: context.storage.subscribe(),
            assumed: HashMap::new(),
            volumes: HashMap::new(),
            nominations: Nominations::default(),
            stale: true,
            waiting_for_node: HashMap::new(),
            sequence: 0,
            listeners: Vec::new(),
        };
        Arc::new(ClusterCache {
            nodes,
            pods,
            context,
            state: Mutex::new(state),
        })
    }

    /// Waits until every watch the cache reads has listed once.
    pub async fn synced(&self) {
        self.nodes.synced().await;
        self.pods.synced().await;
        for watch in self.context.all().into_iter().chain(self.context.storage.all()) {
            watch.synced().await;
        }
    }

    /// A queue's subscription to the cluster events the cache applies from now on.
    pub async fn listen(&self) -> ClusterEvents {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.state.lock().await.listeners.push(sender);
        receiver
    }

    /// Applies the changes waiting in the subscriptions now (sending their cluster events), rather than at the
    /// next decision: a queue waiting for a change hears of it without a decision to bring it.
    pub async fn refresh(&self) {
        let mut state = self.state.lock().await;
        self.sync(&mut state);
    }

    /// Prepares a pod for the queueing hints with the workloads the snapshot holds.
    pub async fn prepare(&self, hints: &QueueingHints, pod: Arc<Pod>) -> Arc<HintPod> {
        let state = self.state.lock().await;
        Arc::new(hints.prepare(pod, state.snapshot.workloads()))
    }

    /// Decides for `pod` on the current cluster state and, when a node is chosen, assumes the pod there at once
    /// so the next decision (of any policy) sees it; a pod not placed comes back prepared for the hints.
    pub async fn schedule(
        &self,
        engine: &std::sync::Mutex<Engine>,
        hints: &QueueingHints,
        pod: &Arc<Pod>,
    ) -> Result<Cycle, ScheduleError> {
        self.schedule_as(engine, hints, pod, false).await
    }

    /// [`ClusterCache::schedule`] for a pod that may be a member of a Workload API gang, whose cycle runs the
    /// PostFilter chain only where the version's pod-group cycle does (`Engine::schedule_gang_member`).
    pub async fn schedule_as(
        &self,
        engine: &std::sync::Mutex<Engine>,
        hints: &QueueingHints,
        pod: &Arc<Pod>,
        workload_gang: bool,
    ) -> Result<Cycle, ScheduleError> {
        let mut state = self.state.lock().await;
        self.sync(&mut state);
        let decision = {
            let mut engine = engine.lock().unwrap_or_else(|e| e.into_inner());
            if workload_gang {
                engine.schedule_gang_member(&state.snapshot, pod)?
            } else {
                engine.schedule(&state.snapshot, pod)?
            }
        };
        // kube-scheduler's nominator takes the nomination at once: the next cycle keeps the room.
        if let Some(post_filter) = decision.post_filter() {
            state.nominations.record(pod_key(pod), pod, &post_filter.nominate);
        }
        if let Some(node) = decision.chosen() {
            match state.snapshot.assume(pod, node) {
                Ok(()) => {
                    state.assumed.insert(pod_key(pod), node.to_string());
                    reserve_volumes(&mut state, pod, node);
                }
                Err(error) => {
                    // The pod is somehow accounted already (a watch event raced the decision): rebuild.
                    warn!(%error, "could not assume the pod; the cache is rebuilt before the next decision");
                    state.stale = true;
                }
            }
        }
        let prepared = decision
            .chosen()
            .is_none()
            .then(|| Arc::new(hints.prepare(pod.clone(), state.snapshot.workloads())));
        Ok(Cycle {
            decision,
            seen: state.sequence,
            prepared,
        })
    }

    /// What a Workload API gang's PodGroupPostFilter would say on the current cluster state (`GroupPreemption::of`).
    pub async fn group_preemption(&self, member: &Pod) -> GroupPreemption {
        let mut state = self.state.lock().await;
        self.sync(&mut state);
        GroupPreemption::of(&state.snapshot, member)
    }

    /// Coscheduling's `minResources` check for `group` on the current cluster state (`cosched::resource_gap`).
    pub async fn resource_gap(&self, group: &GroupKey, spec: &PodGroupSpec) -> Option<String> {
        let mut state = self.state.lock().await;
        self.sync(&mut state);
        cosched::resource_gap(&state.snapshot, group, spec)
    }

    /// Records a nomination decided outside a cycle (a gang's preemptor that does not preempt after all).
    pub async fn nominate(&self, pod: &Pod, nominate: &Nominate) {
        self.state.lock().await.nominations.record(pod_key(pod), pod, nominate);
    }

    /// Forgets an assumed pod whose binding failed. Its room is freed, so the queues hear of an assigned pod
    /// deleted, as kube-scheduler offers `AssignedPodDelete` to every unschedulable pod after a binding cycle fails
    /// (`schedule_one.go:356-388`).
    pub async fn forget(&self, pod: &Pod) {
        let mut state = self.state.lock().await;
        let key = pod_key(pod);
        // Unreserve: the assumed volume versions go with the pod.
        if state.volumes.remove(&key).is_some() {
            state.storage_changes.dirty = true;
        }
        if state.assumed.remove(&key).is_none() {
            return;
        }
        let assumed = state.snapshot.pod(&key).map(|info| info.to_pod());
        if state.snapshot.remove_pod(&key).is_err() {
            state.stale = true;
            return;
        }
        if let Some(assumed) = assumed {
            state.emit(ClusterEvent::pod(ActionType::DELETE, Some(assumed), None));
        }
    }

    /// VolumeBinding's Reserve for an assumed pod: its plan (none when it has no volume work), or Reserve's error.
    pub async fn reserved_volumes(&self, pod: &Pod) -> Option<Result<VolumePlan, String>> {
        self.state.lock().await.volumes.get(&pod_key(pod)).cloned()
    }

    /// The pod's volumes are bound (the watch shows it): its assumed versions are dropped, as the assume cache
    /// drops them once the informer is newer.
    pub async fn volumes_bound(&self, pod: &Pod) {
        let mut state = self.state.lock().await;
        if state.volumes.remove(&pod_key(pod)).is_some() {
            state.storage_changes.dirty = true;
        }
    }

    /// `checkBindings` on the watches' objects (not the assumed versions) for the pod bound to `node`.
    pub fn check_volumes(&self, written: &VolumePlan, pod: &Pod, node: &str) -> Result<bool, String> {
        let labels = self
            .nodes
            .store
            .get_typed::<Node>(None, node)
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default();
        let exists = self
            .pods
            .get(pod.metadata.namespace.as_deref(), &pod.name_any())
            .is_some();
        let key = |c: &k8s_openapi::api::core::v1::PersistentVolumeClaim| {
            (
                c.metadata.namespace.clone().unwrap_or_else(|| "default".to_string()),
                c.name_any(),
            )
        };
        let claims: Vec<(String, String)> = written
            .bindings
            .iter()
            .map(|b| key(&b.claim))
            .chain(written.provisions.iter().map(key))
            .collect();
        let volumes: Vec<String> = written.bindings.iter().map(|b| b.volume.name_any()).collect();
        let storage = self.context.storage.claims_and_volumes(&claims, &volumes);
        volume_plan::check(written, &storage, node, &labels, exists)
    }

    /// Forgets the assumed pods of a rejected gang's run and returns the number of the last cluster event sent: the
    /// room they give back is not news to the run's members (it was theirs), so their retry is not triggered by it.
    pub async fn forget_run(&self, pods: &[&Pod]) -> u64 {
        for pod in pods {
            self.forget(pod).await;
        }
        self.state.lock().await.sequence
    }

    /// Applies every change waiting in the subscriptions; rebuilds when told to resync or after a failure.
    fn sync(&self, state: &mut State) {
        while let Some(Some(change)) = state.node_changes.recv().now_or_never() {
            if !state.stale {
                self.apply_node(state, change);
            }
        }
        while let Some(Some(change)) = state.pod_changes.recv().now_or_never() {
            if !state.stale {
                apply_pod(state, change);
            }
        }
        for subscription in &mut state.context_changes {
            while let Some(Some(_)) = subscription.recv().now_or_never() {
                state.context_dirty = true;
            }
        }
        if state.stale {
            crate::runner::whole_cache_step(usize::MAX, || self.rebuild(state));
            if !state.stale {
                // What changed during the relist is unknown: every pod that failed is worth another attempt.
                state.emit(ClusterEvent::wildcard("CacheRebuilt"));
            }
        }
        if state.context_dirty {
            crate::runner::whole_cache_step(usize::MAX, || self.give_context(state));
        }
        self.sync_storage(state);
        if let Some(nominated) = state.nominations.take_changed() {
            state.snapshot.set_nominated(nominated);
        }
    }

    /// Sends the storage changes' events and gives the snapshot the storage objects whole when they changed (they
    /// change rarely next to pods). A relisted storage watch may have hidden changes: every failed pod is retried.
    fn sync_storage(&self, state: &mut State) {
        let (events, resynced) = state.storage_changes.drain(state.listening());
        for event in events {
            state.emit(event);
        }
        if resynced {
            state.emit(ClusterEvent::wildcard("CacheRebuilt"));
        }
        if state.storage_changes.dirty {
            let mut storage = state.storage_changes.store().clone();
            for plan in state.volumes.values().flatten() {
                for binding in &plan.bindings {
                    storage.assume_volume(binding.volume.clone());
                }
                for claim in &plan.provisions {
                    storage.assume_claim(claim.clone());
                }
            }
            state.snapshot.set_storage(storage);
            state.storage_changes.dirty = false;
        }
    }

    /// Namespaces and workloads change rarely next to pods: they are given to the snapshot whole.
    fn give_context(&self, state: &mut State) {
        let namespaces = self
            .context
            .namespaces
            .store
            .map_metadata(|meta| Some((meta.name.clone()?, meta.labels.clone().unwrap_or_default())))
            .into_iter()
            .collect();
        state.snapshot.set_namespaces(namespaces);
        fn all<T: serde::de::DeserializeOwned>(watch: &Arc<SharedWatch>) -> Vec<T> {
            let mut all = Vec::new();
            watch.store.for_each_typed(|object| all.extend(object.ok()));
            all
        }
        state.snapshot.set_workloads(Workloads {
            services: all(&self.context.services),
            replication_controllers: all(&self.context.replication_controllers),
            replica_sets: all(&self.context.replica_sets),
            stateful_sets: all(&self.context.stateful_sets),
        });
        state
            .snapshot
            .set_pod_disruption_budgets(all(&self.context.pod_disruption_budgets));
        state.context_dirty = false;
    }

    fn apply_node(&self, state: &mut State, change: Change) {
        match change {
            Change::Applied(object) => {
                let Some(node) = typed::<Node>(&object) else { return };
                let name = node.metadata.name.clone().unwrap_or_default();
                let new = state.snapshot.get(&name).is_none();
                // The events of this change, with the node before and after (the new one cloned only when
                // something the scheduler reads changed: heartbeats change nothing).
                let events: Vec<ClusterEvent> = if !state.listening() {
                    Vec::new()
                } else if let Some(old) = state.snapshot.get(&name).map(|info| info.to_node()) {
                    let actions = node_update_actions(&old, &node);
                    if actions.is_empty() {
                        Vec::new()
                    } else {
                        let new = Arc::new(node.clone());
                        actions
                            .into_iter()
                            .map(|action| ClusterEvent::node(action, Some(old.clone()), Some(new.clone())))
                            .collect()
                    }
                } else {
                    vec![ClusterEvent::node(ActionType::ADD, None, Some(Arc::new(node.clone())))]
                };
                if state.snapshot.upsert_node(node).is_err() {
                    state.stale = true;
                    return;
                }
                if new {
                    // Pods the watch showed bound to this node before the node itself.
                    for pod_name in state.waiting_for_node.remove(&name).unwrap_or_default() {
                        let (namespace, pod_name) = pod_name.split_once('/').unwrap_or(("", &pod_name));
                        if let Some(pod) = self.pods.store.get_typed::<Pod>(Some(namespace), pod_name)
                            && node_name(&pod) == Some(name.as_str())
                            && state.snapshot.node_of_pod(&pod_key(&pod)).is_none()
                            && state.snapshot.add_pod(pod).is_err()
                        {
                            state.stale = true;
                        }
                    }
                }
                for event in events {
                    state.emit(event);
                }
            }
            Change::Deleted(object) => {
                let name = object.metadata.name.clone().unwrap_or_default();
                if state.listening()
                    && let Some(old) = state.snapshot.get(&name).map(|info| info.to_node())
                {
                    state.emit(ClusterEvent::node(ActionType::DELETE, Some(old), None));
                }
                if let Ok(pods) = state.snapshot.remove_node(&name) {
                    // Their binding stays: should the node come back, they are on it again.
                    let waiting = state.waiting_for_node.entry(name).or_default();
                    for pod in pods {
                        if state.assumed.remove(&pod.key).is_none() {
                            waiting.insert(format!("{}/{}", pod.namespace, pod.name()));
                        }
                    }
                }
            }
            Change::Resync => state.stale = true,
        }
    }

    fn rebuild(&self, state: &mut State) {
        // Nodes, then pods, each parsed and placed in the snapshot as it is read (kept compact there: never all
        // typed together).
        let mut snapshot = Snapshot::new();
        let mut names: HashSet<String> = HashSet::new();
        let mut failed = None;
        self.nodes.store.for_each_typed(|node: Result<Node, _>| {
            if let Ok(node) = node {
                names.extend(node.metadata.name.clone());
                if let Err(error) = snapshot.add_node_unordered(node) {
                    failed.get_or_insert(error);
                }
            }
        });
        snapshot.order_nodes();
        // One pass over the pods: bound ones for the snapshot, pending nominated ones for the nominator, and those
        // assumed here whose binding the watch has not shown yet.
        let mut bound: HashSet<String> = HashSet::new();
        let mut observed = HashMap::new();
        let mut assumed_pods: HashMap<String, Pod> = HashMap::new();
        let mut waiting_for_node: HashMap<String, HashSet<String>> = HashMap::new();
        let assumed = &state.assumed;
        let nominations = &state.nominations;
        // The pods with a nomination made here that are still pending: the others' nominations are forgotten.
        let mut made_pending: HashSet<String> = HashSet::new();
        self.pods.store.for_each(|o| {
            if let Some(uid) = o.metadata.uid.as_deref()
                && assumed.contains_key(uid)
                && let Some(pod) = typed::<Pod>(o)
            {
                assumed_pods.insert(uid.to_string(), pod);
            }
            // Pending pods (most of them in a burst) are recognised without converting them.
            let node = o
                .data
                .pointer("/spec/nodeName")
                .and_then(|n| n.as_str())
                .filter(|n| !n.is_empty());
            if node.is_none() && nominations.is_made(&nomination_key(o)) {
                made_pending.insert(nomination_key(o));
            }
            if node.is_some_and(|n| names.contains(n)) {
                if let Some(pod) = typed::<Pod>(o) {
                    bound.insert(pod_key(&pod));
                    if let Err(error) = snapshot.add_pod(pod) {
                        failed.get_or_insert(error);
                    }
                }
            } else if let Some(node) = node {
                waiting_for_node.entry(node.to_string()).or_default().insert(format!(
                    "{}/{}",
                    o.metadata.namespace.as_deref().unwrap_or_default(),
                    o.name_any()
                ));
            } else if nominated_pending(o)
                && let Some(pod) = typed::<Pod>(o)
            {
                observed.insert(pod_key(&pod), pod);
            }
        });
        if let Some(error) = failed {
            warn!(%error, "cannot build the scheduling snapshot; retried at the next decision");
            return;
        }
        state.nominations.replace_observed(observed, &made_pending);
        state.waiting_for_node = waiting_for_node;
        state.snapshot = snapshot;
        state.context_dirty = true;
        state.storage_changes.dirty = true;
        // Assumed pods the watch has not shown bound yet stay accounted where they were placed.
        let assumed = std::mem::take(&mut state.assumed);
        for (key, node) in assumed {
            if bound.contains(&key) {
                continue;
            }
            let Some(pod) = assumed_pods.remove(&key) else {
                continue;
            };
            if state.snapshot.assume(&pod, &node).is_ok() {
                state.assumed.insert(key, node);
            }
        }
        debug!(nodes = state.snapshot.num_nodes(), "scheduling cache rebuilt");
        state.stale = false;
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
pub(super) mod tests;
