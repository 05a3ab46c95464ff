//! A pod with everything the plugins read from it parsed once: requests, host ports, pod-affinity terms.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};
use k8s_openapi::jiff::Timestamp;

use super::field::{FieldError, FieldPath};
use super::kept::Kept;
use super::labels::{Labels, Selector};
use super::resources::{InvalidQuantity, ParsedPodResources, PodResources};
use super::storage::{StorageVolume, VolumeOwner};

/// A host port a pod binds (`ContainerPort` with `hostPort > 0`), sanitised as `HostPortInfo` stores it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// Host IP, `0.0.0.0` when unset.
    pub ip: String,
    /// Protocol, `TCP` when unset.
    pub protocol: String,
    /// The port.
    pub port: i32,
}

/// A parsed pod (anti-)affinity term (`fwk.AffinityTerm`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    /// Namespaces the term applies to (the pod's own when neither namespaces nor a selector is given).
    pub namespaces: BTreeSet<String>,
    /// Which pods the term selects.
    pub selector: Selector,
    /// The topology domain label.
    pub topology_key: String,
    /// Which namespaces (by their labels) the term applies to.
    pub namespace_selector: Selector,
    /// Whether the namespace selector is neither absent nor `{}`, i.e. needs namespace labels to evaluate.
    pub needs_namespace_labels: bool,
}

impl AffinityTerm {
    fn parse(pod_namespace: &str, term: &PodAffinityTerm, path: &FieldPath) -> Result<AffinityTerm, Vec<FieldError>> {
        let selector = Selector::from_label_selector(term.label_selector.as_ref(), &path.key("labelSelector"))?;
        let namespace_selector =
            Selector::from_label_selector(term.namespace_selector.as_ref(), &path.key("namespaceSelector"))?;
        let listed = term.namespaces.as_deref().unwrap_or_default();
        let namespaces = if listed.is_empty() && term.namespace_selector.is_none() {
            BTreeSet::from([pod_namespace.to_string()])
        } else {
            listed.iter().cloned().collect()
        };
        let needs_namespace_labels = !namespace_selector.is_empty() && namespace_selector != Selector::Nothing;
        Ok(AffinityTerm {
            namespaces,
            selector,
            topology_key: term.topology_key.clone(),
            namespace_selector,
            needs_namespace_labels,
        })
    }

    /// Whether `pod` is selected: in a listed namespace or one whose labels match, and with matching labels.
    pub fn matches(&self, pod: &PodInfo, namespace_labels: &Labels) -> bool {
        (self.namespaces.contains(&pod.namespace) || self.namespace_selector.matches(namespace_labels))
            && self.selector.matches(pod.labels())
    }
}

/// A weighted pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightedAffinityTerm {
    /// The term.
    pub term: AffinityTerm,
    /// Its weight (1–100).
    pub weight: i32,
}

/// A pod and its parsed scheduling inputs.
///
/// A pod placed in the snapshot is kept [compact](PodInfo::compact): its object as JSON text beside the fields
/// below, which are all that filters, scores and preemption read of the pods on a node. A typed pod takes several
/// times its text (every optional field of a container, probe and status is inline), and the snapshot holds
/// every pod of the cluster. [`PodInfo::pod`] parses a compact pod's text once, when something reads it whole.
#[derive(Clone, Debug)]
pub struct PodInfo {
    /// The pod object, parsed or (a compact pod) as text.
    pod: Kept<Pod>,
    /// Identity in the snapshot: the UID, or `namespace/name` when the pod has none.
    pub key: String,
    /// Namespace (`default` when unset, as the API server defaults it).
    pub namespace: String,
    name: String,
    labels: Labels,
    node_name: Option<String>,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// `status.startTime`.
    pub start_time: Option<Timestamp>,
    /// `spec.schedulerName`.
    pub scheduler_name: Option<String>,
    /// Being deleted with a True `DisruptionTarget` condition of reason `PreemptionByScheduler`
    /// (`podTerminatingByPreemption`).
    pub terminating_by_preemption: bool,
    /// The volumes the volume plugins read of the pods on a node (claims, ephemeral volumes, in-tree disks); most
    /// pods have none.
    pub storage_volumes: Box<[StorageVolume]>,
    /// Parsed quantities.
    pub parsed_resources: ParsedPodResources,
    /// What the pod adds to a node's accounting.
    pub resources: PodResources,
    /// Host ports of containers and sidecars.
    pub host_ports: Vec<HostPort>,
    /// Required pod-affinity terms (empty when they failed to parse, as kube-scheduler ignores them then).
    pub required_affinity: Vec<AffinityTerm>,
    /// Required pod-anti-affinity terms.
    pub required_anti_affinity: Vec<AffinityTerm>,
    /// Preferred pod-affinity terms.
    pub preferred_affinity: Vec<WeightedAffinityTerm>,
    /// Preferred pod-anti-affinity terms.
    pub preferred_anti_affinity: Vec<WeightedAffinityTerm>,
    /// Why affinity terms failed to parse, if they did.
    pub affinity_errors: Vec<FieldError>,
    /// `affinity.podAffinity` or `affinity.podAntiAffinity` is set.
    pub has_pod_affinity: bool,
    /// Required anti-affinity terms are set.
    pub has_required_anti_affinity: bool,
    /// A term has a namespace selector that needs namespace labels.
    pub needs_namespace_labels: bool,
    /// The pod is being deleted.
    pub terminating: bool,
}

/// `corev1helpers.PodPriority`: `spec.priority`, 0 when unset.
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// A pod's identity in the snapshot: its UID, or `namespace/name` when it has none.
pub fn key_of(pod: &Pod) -> String {
    match pod.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

impl PodInfo {
    /// Parses a pod (a shared one is kept as it is, not copied).
    pub fn new(pod: impl Into<Arc<Pod>>) -> Result<PodInfo, InvalidQuantity> {
        let pod: Arc<Pod> = pod.into();
        let parsed_resources = ParsedPodResources::parse(&pod)?;
        let resources = PodResources::of(&parsed_resources);
        let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
        let key = key_of(&pod);
        let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        let pod_anti_affinity = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let mut errors = Vec::new();
        let root = FieldPath::root().key("spec").key("affinity");
        let mut required = |terms: Option<&Vec<PodAffinityTerm>>, path: FieldPath| {
            parse_terms(
                &namespace,
                terms.map(Vec::as_slice).unwrap_or_default(),
                &path,
                &mut errors,
            )
        };
        let required_affinity = required(
            pod_affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            root.key("podAffinity")
                .key("requiredDuringSchedulingIgnoredDuringExecution"),
        );
        let required_anti_affinity = required(
            pod_anti_affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            root.key("podAntiAffinity")
                .key("requiredDuringSchedulingIgnoredDuringExecution"),
        );
        let mut preferred = |terms: Option<&Vec<WeightedPodAffinityTerm>>, path: FieldPath| {
            parse_weighted(
                &namespace,
                terms.map(Vec::as_slice).unwrap_or_default(),
                &path,
                &mut errors,
            )
        };
        let preferred_affinity = preferred(
            pod_affinity.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            root.key("podAffinity")
                .key("preferredDuringSchedulingIgnoredDuringExecution"),
        );
        let preferred_anti_affinity = preferred(
            pod_anti_affinity.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            root.key("podAntiAffinity")
                .key("preferredDuringSchedulingIgnoredDuringExecution"),
        );
        let has_required_anti_affinity = pod_anti_affinity
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
            .is_some_and(|terms| !terms.is_empty());
        let needs_namespace_labels = required_affinity
            .iter()
            .chain(&required_anti_affinity)
            .chain(preferred_affinity.iter().map(|w| &w.term))
            .chain(preferred_anti_affinity.iter().map(|w| &w.term))
            .any(|term| term.needs_namespace_labels);
        let spec = pod.spec.as_ref();
        Ok(PodInfo {
            needs_namespace_labels,
            host_ports: host_ports(&pod),
            has_pod_affinity: pod_affinity.is_some() || pod_anti_affinity.is_some(),
            has_required_anti_affinity,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            node_name: spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()),
            priority: priority(&pod),
            start_time: pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            scheduler_name: spec.and_then(|s| s.scheduler_name.clone()),
            terminating_by_preemption: terminating_by_preemption(&pod),
            storage_volumes: spec
                .and_then(|s| s.volumes.as_deref())
                .unwrap_or_default()
                .iter()
                .filter_map(StorageVolume::of)
                .collect(),
            pod: Kept::parsed(pod),
            key,
            namespace,
            parsed_resources,
            resources,
            required_affinity,
            required_anti_affinity,
            preferred_affinity,
            preferred_anti_affinity,
            affinity_errors: errors,
        })
    }

    /// The pod object (a compact pod's text is parsed on the first call and kept).
    pub fn pod(&self) -> &Arc<Pod> {
        self.pod.get()
    }

    /// The pod object, without keeping a compact pod parsed: for a pod read whole once (an event, a victim).
    pub fn to_pod(&self) -> Arc<Pod> {
        self.pod.to_shared()
    }

    /// What the ephemeral-claim rules read of the pod.
    pub(crate) fn volume_owner(&self) -> VolumeOwner<'_> {
        VolumeOwner {
            namespace: &self.namespace,
            name: &self.name,
            // The key is the UID when the pod has one, `namespace/name` (never a UID) when it has none.
            uid: (!self.key.contains('/')).then_some(self.key.as_str()),
        }
    }

    /// The pod kept as JSON text instead of parsed (for the snapshot's placed pods).
    pub fn compact(mut self) -> PodInfo {
        self.pod = self.pod.into_text();
        self
    }

    /// Whether the pod is kept as text and not parsed (yet).
    #[cfg(test)]
    pub(crate) fn is_compact(&self) -> bool {
        self.pod.if_parsed().is_none()
    }

    /// The pod's labels.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The pod's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `spec.nodeName`, when set.
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }
}

/// `podTerminatingByPreemption`: being deleted, and the first `DisruptionTarget` condition is True with reason
/// `PreemptionByScheduler`.
fn terminating_by_preemption(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == "DisruptionTarget")
        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler"))
}

/// All terms, or none when any fails to parse (kube-scheduler drops the whole list).
fn parse_terms(
    namespace: &str,
    terms: &[PodAffinityTerm],
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Vec<AffinityTerm> {
    let mut parsed = Vec::with_capacity(terms.len());
    for (i, term) in terms.iter().enumerate() {
        match AffinityTerm::parse(namespace, term, &path.index(i)) {
            Ok(term) => parsed.push(term),
            Err(mut e) => {
                errors.append(&mut e);
                return Vec::new();
            }
        }
    }
    parsed
}

fn parse_weighted(
    namespace: &str,
    terms: &[WeightedPodAffinityTerm],
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Vec<WeightedAffinityTerm> {
    let mut parsed = Vec::with_capacity(terms.len());
    for (i, weighted) in terms.iter().enumerate() {
        match AffinityTerm::parse(
            namespace,
            &weighted.pod_affinity_term,
            &path.index(i).key("podAffinityTerm"),
        ) {
            Ok(term) => parsed.push(WeightedAffinityTerm {
                term,
                weight: weighted.weight,
            }),
            Err(mut e) => {
                errors.append(&mut e);
                return Vec::new();
            }
        }
    }
    parsed
}

/// `GetHostPorts`: host ports of sidecars (restartable init containers) and regular containers.
pub(crate) fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| HostPort {
            ip: p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| "0.0.0.0".to_string()),
            protocol: p
                .protocol
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "TCP".to_string()),
            port: p.host_port.unwrap_or(0),
        })
        .collect()
}
