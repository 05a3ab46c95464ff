//! The cluster as the scheduler sees it: nodes with precomputed accounting and the pods on them.

// The cluster as the scheduler sees it: nodes with precomputed accounting, the pods on them, image spread, namespace
// labels and the workload objects default spreading reads. Placing a pod updates it in place.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController, Service, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use serde_json::Value;

use super::kept::Kept;
use super::labels::{Labels, labels_of};
use super::pod_index::{DomainCounts, DomainQuery, ExistingTerms, PodIndex};
use super::pod_info::{HostPort, PodInfo};
use super::resources::{InvalidQuantity, Resource, parse_list};
use super::storage::{Storage, StorageVolume};
use crate::jsonpath::CompiledPath;

/// Why the snapshot refused a change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// A node without `metadata.name`.
    #[error("a node has no metadata.name")]
    NodeWithoutName,
    /// A pod names a node the snapshot does not have.
    #[error("pod {pod} is bound to node {node}, which is not in the snapshot")]
    UnknownNode {
        /// The pod (`namespace/name`).
        pod: String,
        /// The node it names.
        node: String,
    },
    /// A pod added to the snapshot has no `spec.nodeName`.
    #[error("pod {pod} has no spec.nodeName; only pods placed on nodes belong in the snapshot")]
    PodWithoutNode {
        /// The pod (`namespace/name`).
        pod: String,
    },
    /// The pod is already in the snapshot.
    #[error("pod {pod} is already in the snapshot")]
    DuplicatePod {
        /// The pod's key.
        pod: String,
    },
    /// No such pod in the snapshot.
    #[error("pod {pod} is not in the snapshot")]
    UnknownPod {
        /// The pod's key.
        pod: String,
    },
    /// No such node in the snapshot.
    #[error("node {node} is not in the snapshot")]
    NodeNotFound {
        /// The node's name.
        node: String,
    },
    /// A quantity of a node or pod does not parse.
    #[error("{object}: {source}")]
    InvalidQuantity {
        /// The object (`node/<name>` or `pod/<namespace>/<name>`).
        object: String,
        /// The parse error.
        #[source]
        source: InvalidQuantity,
    },
}

/// The objects default topology spreading derives a pod's selector from (services and controllers).
#[derive(Clone, Debug, Default)]
pub struct Workloads {
    /// Services (their selectors select the pods they serve).
    pub services: Vec<Service>,
    /// Replication controllers.
    pub replication_controllers: Vec<ReplicationController>,
    /// Replica sets.
    pub replica_sets: Vec<ReplicaSet>,
    /// Stateful sets.
    pub stateful_sets: Vec<StatefulSet>,
}

/// A node and what is placed on it.
///
/// The node object is kept as JSON text beside what filters and scores read of it (labels, taints,
/// `spec.unschedulable`, allocatable, images): a typed node takes several times its text, and the snapshot holds
/// every node of the cluster. [`NodeInfo::node`] parses it once where something reads it whole (a declarative
/// plugin's JSONPath).
#[derive(Debug)]
pub struct NodeInfo {
    node: Kept<Node>,
    name: Arc<str>,
    labels: Labels,
    taints: Vec<Taint>,
    unschedulable: bool,
    /// `status.allocatable`.
    pub allocatable: Resource,
    /// Sum of the requests of the pods on the node.
    pub requested: Resource,
    /// CPU and memory requested, with scoring defaults for containers that request none.
    pub non_zero_requested: (i64, i64),
    used_ports: HashMap<String, HashSet<(String, i32)>>,
    pods: Vec<Arc<PodInfo>>,
    /// Pods with pod (anti-)affinity, and with required anti-affinity: pod-affinity plugins visit only nodes
    /// that have some, like kube-scheduler's `PodsWithAffinity` lists.
    affinity_pods: usize,
    required_anti_affinity_pods: usize,
    /// The node's images and their sizes (`status.images`).
    images: HashMap<String, i64>,
    zone: String,
    /// The node as JSON and the values JSONPaths selected from it, computed on first use: declarative plugins
    /// evaluate the same paths for every pod.
    json: OnceLock<Value>,
    selections: Mutex<HashMap<String, Option<Value>>>,
}

impl Clone for NodeInfo {
    fn clone(&self) -> NodeInfo {
        NodeInfo {
            node: self.node.clone(),
            name: self.name.clone(),
            labels: self.labels.clone(),
            taints: self.taints.clone(),
            unschedulable: self.unschedulable,
            allocatable: self.allocatable.clone(),
            requested: self.requested.clone(),
            non_zero_requested: self.non_zero_requested,
            used_ports: self.used_ports.clone(),
            pods: self.pods.clone(),
            affinity_pods: self.affinity_pods,
            required_anti_affinity_pods: self.required_anti_affinity_pods,
            images: self.images.clone(),
            zone: self.zone.clone(),
            json: OnceLock::new(),
            selections: Mutex::new(HashMap::new()),
        }
    }
}

impl NodeInfo {
    fn new(node: Node) -> Result<NodeInfo, SnapshotError> {
        let name: Arc<str> = node
            .metadata
            .name
            .as_deref()
            .ok_or(SnapshotError::NodeWithoutName)?
            .into();
        let allocatable_list = parse_list(
            node.status.as_ref().and_then(|s| s.allocatable.as_ref()),
            "status.allocatable",
        )
        .map_err(|source| SnapshotError::InvalidQuantity {
            object: format!("node/{name}"),
            source,
        })?;
        let mut allocatable = Resource::default();
        allocatable.add_list(&allocatable_list);
        let images = node
            .status
            .iter()
            .flat_map(|s| s.images.iter().flatten())
            .flat_map(|image| image.names.iter().flatten())
            .map(|name| (name.clone(), image_size(&node, name)))
            .collect();
        Ok(NodeInfo {
            zone: zone_key(labels_of(&node.metadata.labels)),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: super::labels::node_taints(&node).to_vec(),
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            node: Kept::text(Arc::new(node)),
            name,
            allocatable,
            requested: Resource::default(),
            non_zero_requested: (0, 0),
            used_ports: HashMap::new(),
            pods: Vec::new(),
            affinity_pods: 0,
            required_anti_affinity_pods: 0,
            images,
            json: OnceLock::new(),
            selections: Mutex::new(HashMap::new()),
        })
    }

    /// What a JSONPath selects from the node (cached per path).
    pub fn select(&self, path: &CompiledPath) -> Option<Value> {
        if let Ok(cache) = self.selections.lock()
            && let Some(selected) = cache.get(path.source())
        {
            return selected.clone();
        }
        let json = self.json.get_or_init(|| match self.node.json_text() {
            Some(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            None => serde_json::to_value(&**self.node()).unwrap_or(Value::Null),
        });
        let selected = path.select_one(json);
        if let Ok(mut cache) = self.selections.lock() {
            cache.insert(path.source().to_string(), selected.clone());
        }
        selected
    }

    /// The node object (parsed from its text on the first call, and kept).
    pub fn node(&self) -> &Arc<Node> {
        self.node.get()
    }

    /// The node object, without keeping it parsed: for a node read whole once (an event).
    pub fn to_node(&self) -> Arc<Node> {
        self.node.to_shared()
    }

    /// Whether the node is kept as text and not parsed (yet).
    #[cfg(test)]
    pub(crate) fn is_compact(&self) -> bool {
        self.node.if_parsed().is_none()
    }

    /// `spec.taints`.
    pub fn taints(&self) -> &[Taint] {
        &self.taints
    }

    /// `spec.unschedulable`.
    pub fn unschedulable(&self) -> bool {
        self.unschedulable
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's name, shared.
    pub(crate) fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    /// The node's labels.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The pods on the node.
    pub fn pods(&self) -> &[Arc<PodInfo>] {
        &self.pods
    }

    /// Whether a host port (as the pod would bind it) conflicts with one in use (`HostPortInfo.CheckConflict`).
    pub(crate) fn port_conflicts(&self, port: &HostPort) -> bool {
        let key = (port.protocol.clone(), port.port);
        if port.ip == "0.0.0.0" {
            return self.used_ports.values().any(|set| set.contains(&key));
        }
        ["0.0.0.0", port.ip.as_str()]
            .iter()
            .any(|ip| self.used_ports.get(*ip).is_some_and(|set| set.contains(&key)))
    }

    /// Whether the node lists the image under this exact name.
    pub(crate) fn has_image(&self, name: &str) -> bool {
        self.images.contains_key(name)
    }

    /// Removes a pod from this copy of the node (a preemption dry run), as kube-scheduler's `NodeInfo.RemovePod`:
    /// the last pod moves into the gap.
    /// The node's labels and pods, as the snapshot's per-domain counts read a node.
    pub(crate) fn labels_and_pods(&self) -> (&Labels, &[Arc<PodInfo>]) {
        (self.labels(), &self.pods)
    }

    pub(crate) fn remove_pod(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let position = self.pods.iter().position(|p| p.key == key)?;
        let removed = self.pods.swap_remove(position);
        self.account(&removed, -1);
        Some(removed)
    }

    /// Adds a pod to this copy of the node (a preemption dry run's reprieve).
    pub(crate) fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.account(&pod, 1);
        self.pods.push(pod);
    }

    fn account(&mut self, pod: &PodInfo, sign: i64) {
        let count = |counter: &mut usize, flag: bool| {
            if flag {
                *counter = if sign > 0 {
                    *counter + 1
                } else {
                    counter.saturating_sub(1)
                };
            }
        };
        count(&mut self.affinity_pods, pod.has_pod_affinity);
        count(&mut self.required_anti_affinity_pods, pod.has_required_anti_affinity);
        self.requested.accumulate(&pod.resources.requested, sign);
        self.non_zero_requested.0 += sign * pod.resources.non_zero_milli_cpu;
        self.non_zero_requested.1 += sign * pod.resources.non_zero_memory;
        for port in &pod.host_ports {
            let key = (port.protocol.clone(), port.port);
            if sign > 0 {
                self.used_ports.entry(port.ip.clone()).or_default().insert(key);
            } else if let Some(set) = self.used_ports.get_mut(&port.ip) {
                set.remove(&key);
                if set.is_empty() {
                    self.used_ports.remove(&port.ip);
                }
            }
        }
    }
}

/// `GetZoneKey`: region and zone labels (beta labels first), the key nodes are interleaved by.
fn zone_key(labels: &Labels) -> String {
    let pick = |beta: &str, ga: &str| labels.get(beta).or_else(|| labels.get(ga)).cloned().unwrap_or_default();
    let zone = pick("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone");
    let region = pick(
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    );
    if zone.is_empty() && region.is_empty() {
        String::new()
    } else {
        format!("{region}:\u{0}:{zone}")
    }
}

/// An image's size (as first reported) and how many nodes have it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSummary {
    /// Size in bytes.
    pub size: i64,
    /// Nodes listing the image.
    pub nodes: usize,
}

/// Nodes, pods on them and cluster objects plugins read.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    nodes: Vec<NodeInfo>,
    by_name: HashMap<Arc<str>, usize>,
    order: Vec<usize>,
    pod_nodes: HashMap<String, Arc<str>>,
    /// Pods whose affinity terms need namespace labels.
    namespace_selector_pods: usize,
    images: HashMap<String, ImageSummary>,
    namespaces: Option<BTreeMap<String, Labels>>,
    workloads: Workloads,
    /// PodDisruptionBudgets of every namespace (preemption prefers victims whose budgets allow it).
    pdbs: Arc<Vec<PodDisruptionBudget>>,
    /// Pending pods nominated to a node (`status.nominatedNodeName`), by node.
    nominated: Arc<BTreeMap<String, Vec<Arc<PodInfo>>>>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, when known (volume plugins skip what needs
    /// them otherwise).
    storage: Option<Arc<Storage>>,
    /// Placed pods counted per topology domain, kept current by every change below.
    index: PodIndex,
}

impl Snapshot {
    /// An empty snapshot.
    pub fn new() -> Snapshot {
        Snapshot::default()
    }

    /// A snapshot of these nodes and the pods placed on them. Terminated pods (Succeeded/Failed) are left out,
    /// as kube-scheduler's informer filters them.
    pub fn build(nodes: Vec<Node>, pods: Vec<Pod>) -> Result<Snapshot, SnapshotError> {
        let mut snapshot = Snapshot::new();
        for node in nodes {
            snapshot.add_node_unordered(node)?;
        }
        snapshot.order_nodes();
        for pod in pods {
            snapshot.add_pod(pod)?;
        }
        Ok(snapshot)
    }

    /// [`Snapshot::upsert_node`] without ordering the nodes: for many nodes in a row (each kept compact as it
    /// comes, never all typed at once), followed by [`Snapshot::order_nodes`] before any decision.
    pub fn add_node_unordered(&mut self, node: Node) -> Result<(), SnapshotError> {
        self.insert_node(node)
    }

    /// Orders the nodes (kube-scheduler's node tree) after [`Snapshot::add_node_unordered`].
    pub fn order_nodes(&mut self) {
        self.rebuild_order();
    }

    /// Adds a node, or replaces the node object of the same name keeping its pods.
    pub fn upsert_node(&mut self, node: Node) -> Result<(), SnapshotError> {
        self.insert_node(node)?;
        self.rebuild_order();
        Ok(())
    }

    fn insert_node(&mut self, node: Node) -> Result<(), SnapshotError> {
        let mut info = NodeInfo::new(node)?;
        for (image, &size) in &info.images {
            match self.images.get_mut(image) {
                Some(summary) => summary.nodes += 1,
                None => {
                    self.images.insert(image.clone(), ImageSummary { size, nodes: 1 });
                }
            }
        }
        match self.by_name.get(&info.name).copied() {
            Some(index) => {
                let relabelled = self.nodes[index].labels() != info.labels();
                if relabelled {
                    self.index.node_changed(self.nodes[index].labels_and_pods(), -1);
                }
                let old = &mut self.nodes[index];
                let old_images = std::mem::take(&mut old.images);
                info.pods = std::mem::take(&mut old.pods);
                self.forget_images(&old_images);
                for pod in info.pods.clone() {
                    info.account(&pod, 1);
                }
                // The node tree moves a node whose zone changed to the end of its new zone.
                if relabelled {
                    self.index.node_changed(info.labels_and_pods(), 1);
                }
                if info.zone != self.nodes[index].zone {
                    self.nodes.remove(index);
                    self.nodes.push(info);
                    self.reindex();
                } else {
                    self.nodes[index] = info;
                }
            }
            None => {
                self.index.node_changed(info.labels_and_pods(), 1);
                self.by_name.insert(info.name.clone(), self.nodes.len());
                self.nodes.push(info);
            }
        }
        Ok(())
    }

    /// Removes a node and the pods on it; returns the removed pods.
    pub fn remove_node(&mut self, name: &str) -> Result<Vec<Arc<PodInfo>>, SnapshotError> {
        let index = *self
            .by_name
            .get(name)
            .ok_or_else(|| SnapshotError::NodeNotFound { node: name.to_string() })?;
        let removed = self.nodes.remove(index);
        self.index.node_changed(removed.labels_and_pods(), -1);
        self.forget_images(&removed.images);
        for pod in &removed.pods {
            self.pod_nodes.remove(&pod.key);
            self.namespace_selector_pods -= usize::from(pod.needs_namespace_labels);
        }
        self.reindex();
        self.rebuild_order();
        Ok(removed.pods)
    }

    fn forget_images(&mut self, images: &HashMap<String, i64>) {
        for image in images.keys() {
            if let Some(summary) = self.images.get_mut(image) {
                summary.nodes -= 1;
                if summary.nodes == 0 {
                    self.images.remove(image);
                }
            }
        }
    }

    fn reindex(&mut self) {
        self.by_name = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
    }

    /// kube-scheduler's node tree order: zones in order of first appearance, nodes taken round-robin.
    fn rebuild_order(&mut self) {
        let mut zones: Vec<(&str, Vec<usize>)> = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            match zones.iter_mut().find(|(zone, _)| *zone == node.zone) {
                Some((_, members)) => members.push(index),
                None => zones.push((&node.zone, vec![index])),
            }
        }
        let mut order = Vec::with_capacity(self.nodes.len());
        let longest = zones.iter().map(|(_, members)| members.len()).max().unwrap_or(0);
        for round in 0..longest {
            order.extend(zones.iter().filter_map(|(_, members)| members.get(round)));
        }
        self.order = order;
    }

    /// Adds a pod that is placed on a node (`spec.nodeName` set). Terminated pods are ignored.
    pub fn add_pod(&mut self, pod: Pod) -> Result<(), SnapshotError> {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return Ok(());
        }
        let object = pod_ref(&pod);
        let info = PodInfo::new(pod).map_err(|source| SnapshotError::InvalidQuantity {
            object: format!("pod/{object}"),
            source,
        })?;
        let info = info.compact();
        let node = info
            .node_name()
            .ok_or(SnapshotError::PodWithoutNode { pod: object.clone() })?
            .to_string();
        self.place(Arc::new(info), &node, &object)
    }

    /// Accounts a pod on a node as if bound there (kube-scheduler's assume): the next decision sees it.
    pub fn assume(&mut self, pod: &Pod, node: &str) -> Result<(), SnapshotError> {
        let mut bound = pod.clone();
        bound.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
        let object = pod_ref(&bound);
        let info = PodInfo::new(bound).map_err(|source| SnapshotError::InvalidQuantity {
            object: format!("pod/{object}"),
            source,
        })?;
        self.place(Arc::new(info.compact()), node, &object)
    }

    fn place(&mut self, info: Arc<PodInfo>, node: &str, object: &str) -> Result<(), SnapshotError> {
        if self.pod_nodes.contains_key(&info.key) {
            return Err(SnapshotError::DuplicatePod { pod: info.key.clone() });
        }
        let index = *self.by_name.get(node).ok_or_else(|| SnapshotError::UnknownNode {
            pod: object.to_string(),
            node: node.to_string(),
        })?;
        let node_info = &mut self.nodes[index];
        node_info.account(&info, 1);
        self.namespace_selector_pods += usize::from(info.needs_namespace_labels);
        self.pod_nodes.insert(info.key.clone(), node_info.name.clone());
        self.index.pod_changed(node_info.labels(), &info, 1);
        node_info.pods.push(info);
        Ok(())
    }

    /// A placed pod by key (UID, or `namespace/name`).
    pub fn pod(&self, key: &str) -> Option<&Arc<PodInfo>> {
        let node = self.pod_nodes.get(key)?;
        let index = *self.by_name.get(node)?;
        self.nodes[index].pods.iter().find(|p| p.key == key)
    }

    /// Removes a pod (by UID, or `namespace/name` for pods without one): deletion, or a failed binding.
    pub fn remove_pod(&mut self, key: &str) -> Result<Arc<PodInfo>, SnapshotError> {
        let node = self
            .pod_nodes
            .remove(key)
            .ok_or_else(|| SnapshotError::UnknownPod { pod: key.to_string() })?;
        let index = *self
            .by_name
            .get(&node)
            .ok_or_else(|| SnapshotError::UnknownPod { pod: key.to_string() })?;
        let node_info = &mut self.nodes[index];
        let position = node_info
            .pods
            .iter()
            .position(|p| p.key == key)
            .ok_or_else(|| SnapshotError::UnknownPod { pod: key.to_string() })?;
        // Same removal as kube-scheduler (last pod moves into the gap).
        let removed = node_info.pods.swap_remove(position);
        node_info.account(&removed, -1);
        self.index.pod_changed(node_info.labels(), &removed, -1);
        self.namespace_selector_pods -= usize::from(removed.needs_namespace_labels);
        Ok(removed)
    }

    /// Whether some placed pod has affinity terms with a namespace selector.
    pub(crate) fn has_pods_with_namespace_selectors(&self) -> bool {
        self.namespace_selector_pods > 0
    }

    /// Sets the labels of every namespace (needed for pod-affinity `namespaceSelector`s).
    pub fn set_namespaces(&mut self, namespaces: BTreeMap<String, Labels>) {
        self.namespaces = Some(namespaces);
    }

    /// The labels of every namespace, when known.
    pub fn namespaces(&self) -> Option<&BTreeMap<String, Labels>> {
        self.namespaces.as_ref()
    }

    /// Sets the PersistentVolumeClaims, PersistentVolumes and StorageClasses volume plugins read.
    pub fn set_storage(&mut self, storage: Storage) {
        self.storage = Some(Arc::new(storage));
    }

    /// The storage objects, when known.
    pub fn storage(&self) -> Option<&Storage> {
        self.storage.as_deref()
    }

    /// Whether a placed pod uses the claim `namespace/name` in a `persistentVolumeClaim` volume (kube-scheduler's
    /// `IsPVCUsedByPods`, from the nodes' PVC reference counts).
    pub(crate) fn is_claim_used(&self, namespace: &str, name: &str) -> bool {
        self.nodes
            .iter()
            .flat_map(|node| &node.pods)
            .any(|pod| pod.namespace == namespace && uses_claim(&pod.storage_volumes, name))
    }

    /// Sets the services and controllers default topology spreading derives selectors from.
    pub fn set_workloads(&mut self, workloads: Workloads) {
        self.workloads = workloads;
    }

    /// Services and controllers.
    pub fn workloads(&self) -> &Workloads {
        &self.workloads
    }

    /// Sets the PodDisruptionBudgets of every namespace (kube-scheduler's preemption lists them all).
    pub fn set_pod_disruption_budgets(&mut self, pdbs: Vec<PodDisruptionBudget>) {
        self.pdbs = Arc::new(pdbs);
    }

    /// The PodDisruptionBudgets (none unless set).
    pub fn pod_disruption_budgets(&self) -> &[PodDisruptionBudget] {
        &self.pdbs
    }

    /// Sets the pending pods nominated to nodes: those of `pods` with a `status.nominatedNodeName` and no
    /// `spec.nodeName` (a pod with an invalid quantity is left out: no decision can count it). Filter counts the
    /// ones of priority at least the pod's (kube-scheduler's `RunFilterPluginsWithNominatedPods`); preemption clears
    /// the lower-priority ones on the node it chooses.
    pub fn set_nominated_pods(&mut self, pods: impl IntoIterator<Item = Pod>) {
        self.set_nominated(
            pods.into_iter()
                .filter(|pod| nominated_node(pod).is_some())
                .filter_map(|pod| PodInfo::new(pod).ok().map(Arc::new)),
        );
    }

    /// [`Self::set_nominated_pods`] with the pods parsed already: the scheduler worker keeps its nominated pods
    /// parsed, so one nomination changing does not parse every other nominated pod again.
    pub fn set_nominated(&mut self, pods: impl IntoIterator<Item = Arc<PodInfo>>) {
        let mut nominated: BTreeMap<String, Vec<Arc<PodInfo>>> = BTreeMap::new();
        for info in pods {
            if let Some(node) = nominated_node(info.pod()) {
                nominated.entry(node.to_string()).or_default().push(info);
            }
        }
        self.nominated = Arc::new(nominated);
    }

    /// The pending pods nominated to a node.
    pub(crate) fn nominated_pods(&self, node: &str) -> &[Arc<PodInfo>] {
        self.nominated.get(node).map(Vec::as_slice).unwrap_or_default()
    }

    /// Records what a decision did to nominations (kube-scheduler's nominator updates after a failed cycle): `pod`
    /// nominated to `node`, or its nomination dropped with `None`. A pod with an invalid quantity is only dropped.
    pub fn nominate(&mut self, pod: &Pod, node: Option<&str>) {
        self.drop_nomination(&super::pod_info::key_of(pod));
        let Some(node) = node else { return };
        let mut pod = pod.clone();
        pod.status.get_or_insert_default().nominated_node_name = Some(node.to_string());
        if let Ok(info) = PodInfo::new(pod) {
            Arc::make_mut(&mut self.nominated)
                .entry(node.to_string())
                .or_default()
                .push(Arc::new(info));
        }
    }

    /// Drops the nomination of the pod with this key (preemption cleared it), if any.
    pub fn drop_nomination(&mut self, key: &str) {
        if !self.nominated.values().flatten().any(|p| p.key == key) {
            return;
        }
        Arc::make_mut(&mut self.nominated).retain(|_, pods| {
            pods.retain(|p| p.key != key);
            !pods.is_empty()
        });
    }

    /// Whether any pod is nominated to any node.
    pub(crate) fn has_nominated_pods(&self) -> bool {
        !self.nominated.is_empty()
    }

    /// Replaces a node's pods and accounting with those of a copy (a preemption dry run's node, or the original
    /// it restores), pod order included.
    pub(crate) fn set_node(&mut self, original: &NodeInfo) -> Result<(), SnapshotError> {
        let index = *self
            .by_name
            .get(original.name())
            .ok_or_else(|| SnapshotError::NodeNotFound {
                node: original.name().to_string(),
            })?;
        for pod in &self.nodes[index].pods {
            self.pod_nodes.remove(&pod.key);
            self.namespace_selector_pods -= usize::from(pod.needs_namespace_labels);
        }
        for pod in &original.pods {
            self.pod_nodes.insert(pod.key.clone(), original.name.clone());
            self.namespace_selector_pods += usize::from(pod.needs_namespace_labels);
        }
        self.index.node_changed(self.nodes[index].labels_and_pods(), -1);
        self.index.node_changed(original.labels_and_pods(), 1);
        self.nodes[index] = original.clone();
        Ok(())
    }

    /// Placed pods' (anti-)affinity terms, grouped by distinct term with their weight per domain.
    pub(crate) fn existing_terms(&self) -> &ExistingTerms {
        self.index.existing()
    }

    /// The placed pods a query counts, per domain: kept current, or counted over every node the first time.
    pub(crate) fn domain_counts(&self, query: DomainQuery) -> Arc<DomainCounts> {
        self.index
            .counts(query, self.nodes.iter().map(NodeInfo::labels_and_pods))
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes in kube-scheduler's list order.
    pub fn list(&self) -> impl ExactSizeIterator<Item = &NodeInfo> + Clone {
        self.order.iter().map(|&i| &self.nodes[i])
    }

    /// The node at a position of the list order.
    pub fn at(&self, position: usize) -> Option<&NodeInfo> {
        self.order.get(position).map(|&i| &self.nodes[i])
    }

    /// A node by name.
    pub fn get(&self, name: &str) -> Option<&NodeInfo> {
        self.by_name.get(name).map(|&i| &self.nodes[i])
    }

    /// Position of a node in the list order.
    pub fn position(&self, name: &str) -> Option<usize> {
        let index = *self.by_name.get(name)?;
        self.order.iter().position(|&i| i == index)
    }

    /// Size and spread of an image name.
    pub fn image(&self, name: &str) -> Option<ImageSummary> {
        self.images.get(name).copied()
    }

    /// The node a pod (by key) is on.
    pub fn node_of_pod(&self, key: &str) -> Option<&str> {
        self.pod_nodes.get(key).map(|n| &**n)
    }
}

/// Whether the pod has a `persistentVolumeClaim` volume naming this claim.
pub(crate) fn uses_claim(volumes: &[StorageVolume], claim: &str) -> bool {
    volumes
        .iter()
        .any(|v| matches!(v, StorageVolume::Claim(name) if name == claim))
}

fn image_size(node: &Node, name: &str) -> i64 {
    node.status
        .iter()
        .flat_map(|s| s.images.iter().flatten())
        .find(|image| image.names.iter().flatten().any(|n| n == name))
        .and_then(|image| image.size_bytes)
        .unwrap_or(0)
}

/// `namespace/name` of a pod.
pub fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The node a pending pod is nominated to (`status.nominatedNodeName`, not empty, and no `spec.nodeName`).
fn nominated_node(pod: &Pod) -> Option<&str> {
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty() && !bound)
}

impl super::labels::NodeFields for NodeInfo {
    fn node_name(&self) -> &str {
        &self.name
    }

    fn node_labels(&self) -> &Labels {
        &self.labels
    }

    fn node_taints(&self) -> &[Taint] {
        &self.taints
    }
}
