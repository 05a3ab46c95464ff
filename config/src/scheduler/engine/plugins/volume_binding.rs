//! VolumeBinding's PreFilter and Filter: bound claims' PersistentVolume node affinity, unbound claims matched to
//! static volumes or provisioned on the node.

// kube-scheduler's `volumebinding` (`volume_binding.go` PreFilter/Filter, `binder.go` `FindPodVolumes`,
// component-helpers' `FindMatchingVolume`). The Filter only decides: Reserve's plan is `engine/volume_plan.rs`, and
// assuming and writing the bindings (PreBind) are the worker's. Reads the storage objects, so it skips pods when
// the snapshot holds none. Its Score (v1.37's StorageCapacityScoring) is `volume_binding_score.rs`, over what
// the Filter found on each node ([`NodeVolumes`]).
//
// Not ported: the CSI translation of a migrated in-tree PersistentVolume's node affinity before the bound-claim
// check (`tryTranslatePVToCSI`), which adds the CSI driver's topology key to GCE PD, EBS, Azure Disk and Cinder
// volumes on nodes whose CSINode lists the plugin as migrated.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, TopologySelectorTerm};
use k8s_openapi::api::storage::v1::CSIStorageCapacity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::csi_translation::translated_for_node;
use crate::scheduler::engine::field::FieldPath;
use crate::scheduler::engine::labels::{Labels, NodeSelector, Selector};
use crate::scheduler::engine::quantity::parse;
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::{Code, Reason, Verdict};
use crate::scheduler::engine::storage::{
    BETA_STORAGE_CLASS_ANNOTATION, Storage, claim_class, ephemeral_claim_name, ephemeral_owner_error,
};

/// A bound claim's volume does not allow the node.
pub const NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// No volume to bind and none can be provisioned on the node.
pub const BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// The driver's storage capacity on the node is too small.
pub const NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// A bound claim's volume does not exist.
pub const PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// PreFilter: a claim is neither bound nor waiting for the first consumer.
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The annotation a claim gets when it is to be provisioned for a node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The annotation the volume binder sets once a claim's binding is complete.
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";
/// The provisioner of classes whose volumes are created by hand.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// The plugin.
#[derive(Debug)]
pub struct VolumeBinding;

/// The pod's claims, split as `GetPodVolumeClaims` splits them.
pub(super) struct Check<'a> {
    storage: &'a Storage,
    bound: Vec<&'a PersistentVolumeClaim>,
    /// Unbound claims of WaitForFirstConsumer classes, smallest request first (`byPVCSize`) once they are matched.
    delayed: Vec<&'a PersistentVolumeClaim>,
    /// The volumes of each delayed claim's class.
    volumes_by_class: HashMap<&'a str, Vec<&'a PersistentVolume>>,
}

pub(crate) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

pub(crate) fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

/// Bound and the binder finished (`isPVCFullyBound`).
pub(crate) fn is_fully_bound(claim: &PersistentVolumeClaim) -> bool {
    !volume_name(claim).is_empty() && annotation(&claim.metadata, BIND_COMPLETED_ANNOTATION).is_some()
}

/// `IsDelayBindingMode`: the claim's class exists and binds at the first consumer; a class without a binding mode
/// is an error.
pub(crate) fn is_delay_binding(storage: &Storage, claim: &PersistentVolumeClaim) -> Result<bool, String> {
    let class_name = claim_class(claim);
    if class_name.is_empty() {
        return Ok(false);
    }
    let Ok(class) = storage.class(class_name) else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        None => Err(format!("VolumeBindingMode not set for StorageClass {class_name:?}")),
        Some(mode) => Ok(mode == "WaitForFirstConsumer"),
    }
}

/// The pod's claims in volume order (none when it has no claim), or the PreFilter rejection of the first that
/// cannot be used (`podHasPVCs`).
pub(crate) fn pod_claims<'a>(
    pod: &Pod,
    namespace: &str,
    storage: &'a Storage,
) -> Result<Vec<&'a PersistentVolumeClaim>, String> {
    let mut claims = Vec::new();
    for volume in pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default() {
        let (name, ephemeral) = match (&volume.persistent_volume_claim, &volume.ephemeral) {
            (Some(source), _) => (source.claim_name.clone(), false),
            (None, Some(_)) => (ephemeral_claim_name(pod, volume), true),
            _ => continue,
        };
        let claim = match storage.claim(namespace, &name) {
            Ok(claim) => claim,
            Err(_) if ephemeral => {
                return Err(format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                ));
            }
            Err(not_found) => return Err(not_found.to_string()),
        };
        if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            return Err(format!(
                "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {:?}",
                volume_name(claim)
            ));
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim {name:?} is being deleted"));
        }
        if ephemeral && let Some(error) = ephemeral_owner_error(pod, namespace, claim) {
            return Err(error);
        }
        claims.push(claim);
    }
    Ok(claims)
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let Some(storage) = cycle.snapshot.storage() else {
            return PreFilter::Skip;
        };
        match Check::of(cycle, storage) {
            Ok(Some(check)) => PreFilter::run(check),
            Ok(None) => PreFilter::Skip,
            Err(rejected) => rejected,
        }
    }
}

impl<'a> Check<'a> {
    /// PreFilter's work: the pod's claims split, `None` when it has none, or PreFilter's rejection or error.
    pub(super) fn of(cycle: &Cycle<'a>, storage: &'a Storage) -> Result<Option<Check<'a>>, PreFilter<'a>> {
        let claims = match pod_claims(cycle.pod.pod(), &cycle.pod.namespace, storage) {
            Ok(claims) => claims,
            Err(reason) => return Err(PreFilter::Reject(Verdict::unresolvable(reason))),
        };
        if claims.is_empty() {
            return Ok(None);
        }
        let (mut bound, mut delayed, mut immediate) = (Vec::new(), Vec::new(), 0);
        for claim in claims {
            if is_fully_bound(claim) {
                bound.push(claim);
                continue;
            }
            match is_delay_binding(storage, claim) {
                Err(error) => return Err(PreFilter::Error(error)),
                Ok(true) if volume_name(claim).is_empty() => delayed.push(claim),
                Ok(_) => immediate += 1,
            }
        }
        if immediate > 0 {
            return Err(PreFilter::Reject(Verdict::unresolvable(UNBOUND_IMMEDIATE)));
        }
        let classes: BTreeSet<&str> = delayed.iter().map(|c| claim_class(c)).collect();
        let volumes_by_class = classes
            .into_iter()
            .map(|class| {
                let volumes = storage.volumes().filter(|v| volume_class(v) == class).collect();
                (class, volumes)
            })
            .collect();
        delayed.sort_by(|a, b| compare_requests(a, b));
        Ok(Some(Check {
            storage,
            bound,
            delayed,
            volumes_by_class,
        }))
    }
}

/// `GetPersistentVolumeClass`: the beta annotation first, then `spec.storageClassName`.
pub(crate) fn volume_class(volume: &PersistentVolume) -> &str {
    annotation(&volume.metadata, BETA_STORAGE_CLASS_ANNOTATION)
        .or_else(|| volume.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()))
        .unwrap_or_default()
}

/// A claim's requested storage in nano-units (0 when absent or unparsable, as a zero `Quantity`).
pub(super) fn requested(claim: &PersistentVolumeClaim) -> i128 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get("storage"))
        .and_then(|q| parse(&q.0).ok())
        .map_or(0, |a| a.nano())
}

/// A volume's storage capacity in nano-units (0 when absent or unparsable).
pub(super) fn capacity(volume: &PersistentVolume) -> i128 {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref()?.get("storage"))
        .and_then(|q| parse(&q.0).ok())
        .map_or(0, |a| a.nano())
}

pub(crate) fn compare_requests(a: &PersistentVolumeClaim, b: &PersistentVolumeClaim) -> Ordering {
    requested(a).cmp(&requested(b))
}

/// The node as `CheckNodeAffinity` sees it: its labels only (a `matchFields` term never matches).
pub(crate) fn labels_only(labels: &Labels) -> Node {
    Node {
        metadata: ObjectMeta {
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

/// `CheckNodeAffinity`: the volume's required node affinity matches the node's labels (no affinity: any node).
pub(crate) fn affinity_matches(volume: &PersistentVolume, node: &Node) -> bool {
    let required = volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref());
    required.is_none_or(|required| NodeSelector::compile(required, &FieldPath::root()).matches(node))
}

/// `IsVolumeBoundToClaim`: the volume's `claimRef` names the claim (and its UID, when set).
pub(crate) fn is_bound_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    let claim_namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
    reference.name.as_deref() == claim.metadata.name.as_deref()
        && reference.namespace.as_deref().unwrap_or_default() == claim_namespace
        && reference
            .uid
            .as_deref()
            .is_none_or(|uid| uid.is_empty() || Some(uid) == claim.metadata.uid.as_deref())
}

/// `FindMatchingVolume` for one node: a volume pre-bound to the claim wins if it allows the node (else nothing);
/// otherwise the smallest `Available` volume of the claim's class, selector, size, mode, attributes class, access
/// modes and node affinity. Errors are the selector's.
pub(crate) fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &[&'a PersistentVolume],
    node: &Node,
    excluded: &BTreeSet<&str>,
) -> Result<Option<&'a PersistentVolume>, String> {
    let spec = claim.spec.as_ref();
    let requested = requested(claim);
    let class = claim_class(claim);
    let selector = match spec.and_then(|s| s.selector.as_ref()) {
        None => None,
        Some(selector) => Some(
            Selector::from_label_selector(Some(selector), &FieldPath::root()).map_err(|_| {
                format!(
                    "error creating internal label selector for claim: {}/{}",
                    claim.metadata.namespace.as_deref().unwrap_or("default"),
                    claim.metadata.name.as_deref().unwrap_or_default()
                )
            })?,
        ),
    };
    let mode = |m: Option<&str>| m.unwrap_or("Filesystem").to_string();
    let claim_mode = mode(spec.and_then(|s| s.volume_mode.as_deref()));
    let claim_attributes = spec
        .and_then(|s| s.volume_attributes_class_name.as_deref())
        .unwrap_or_default();
    let mut smallest: Option<(&PersistentVolume, i128)> = None;
    for volume in volumes {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        let volume_spec = volume.spec.as_ref();
        if excluded.contains(name) {
            continue;
        }
        if volume_spec.and_then(|s| s.claim_ref.as_ref()).is_some() && !is_bound_to(volume, claim) {
            continue;
        }
        let size = capacity(volume);
        if size < requested {
            continue;
        }
        if mode(volume_spec.and_then(|s| s.volume_mode.as_deref())) != claim_mode {
            continue;
        }
        if volume_spec
            .and_then(|s| s.volume_attributes_class_name.as_deref())
            .unwrap_or_default()
            != claim_attributes
        {
            continue;
        }
        if volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity = affinity_matches(volume, node);
        if is_bound_to(volume, claim) {
            return Ok(affinity.then_some(*volume));
        }
        if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available") {
            continue;
        }
        if let Some(selector) = &selector
            && !selector.matches(volume.metadata.labels.as_ref().unwrap_or(&Labels::new()))
        {
            continue;
        }
        if volume_class(volume) != class || !affinity {
            continue;
        }
        let modes = volume_spec.and_then(|s| s.access_modes.as_deref()).unwrap_or_default();
        let claim_modes = spec.and_then(|s| s.access_modes.as_deref()).unwrap_or_default();
        if !claim_modes.iter().all(|m| modes.contains(m)) {
            continue;
        }
        if smallest.is_none_or(|(_, smallest_size)| smallest_size > size) {
            smallest = Some((volume, size));
        }
    }
    Ok(smallest.map(|(volume, _)| volume))
}

/// `MatchTopologySelectorTerms`: no terms allow every node; otherwise some term's every expression has the node's
/// label among its values.
fn topology_allows(terms: Option<&[TopologySelectorTerm]>, labels: &Labels) -> bool {
    let terms = terms.unwrap_or_default();
    terms.is_empty()
        || terms.iter().any(|term| {
            term.match_label_expressions
                .iter()
                .flatten()
                .all(|e| labels.get(&e.key).is_some_and(|v| e.values.contains(v)))
        })
}

/// The four flags of `FindPodVolumes`, turned into its reasons in its order.
struct Flags {
    bound_satisfied: bool,
    unbound_satisfied: bool,
    sufficient_storage: bool,
    bound_volumes_found: bool,
}

impl Flags {
    fn verdict(&self) -> Option<Verdict> {
        let reasons: Vec<Reason> = [
            (!self.bound_satisfied, NODE_CONFLICT),
            (!self.unbound_satisfied, BIND_CONFLICT),
            (!self.sufficient_storage, NOT_ENOUGH_SPACE),
            (!self.bound_volumes_found, PV_NOT_EXIST),
        ]
        .into_iter()
        .filter(|(failed, _)| *failed)
        .map(|(_, reason)| Reason::Borrowed(reason))
        .collect();
        (!reasons.is_empty()).then_some(Verdict {
            code: Code::UnschedulableAndUnresolvable,
            reasons,
        })
    }
}

/// What the Filter found for the pod's unbound claims on a node (`PodVolumes`): a volume for each claim it binds,
/// and the claims it provisions with the CSIStorageCapacity that holds each (none when capacity is not checked).
#[derive(Default)]
pub(super) struct NodeVolumes<'a> {
    /// Claims matched to existing volumes.
    pub static_bindings: Vec<(&'a PersistentVolumeClaim, &'a PersistentVolume)>,
    /// Claims to provision.
    pub provisions: Vec<(&'a PersistentVolumeClaim, Option<&'a CSIStorageCapacity>)>,
}

/// Whether a claim to provision fits the storage the node can reach (`hasEnoughCapacity`).
enum CapacityCheck<'a> {
    /// Not checked: no request, no CSIDriver, or the driver does not publish capacity.
    NotChecked,
    /// The first CSIStorageCapacity that holds the request.
    Found(&'a CSIStorageCapacity),
    Insufficient,
}

impl<'a> Check<'a> {
    /// The Filter's verdict on a node and, when it passes, what it would bind and provision there.
    pub(super) fn node_volumes(&self, node: &NodeInfo) -> Result<(Option<Verdict>, NodeVolumes<'a>), String> {
        let mut volumes = NodeVolumes::default();
        let flags = self.flags(node, &mut volumes)?;
        Ok((flags.verdict(), volumes))
    }

    fn flags(&self, node: &NodeInfo, found: &mut NodeVolumes<'a>) -> Result<Flags, String> {
        let mut flags = Flags {
            bound_satisfied: true,
            unbound_satisfied: true,
            sufficient_storage: true,
            bound_volumes_found: true,
        };
        let labels = node.labels();
        let as_seen = labels_only(labels);
        let csi_node = self.storage.csi_node(node.name());
        // `checkBoundClaims`: stops at the first missing volume or affinity conflict; an in-tree volume migrated on
        // the node is checked as its CSI translation.
        for claim in &self.bound {
            match self.storage.volume(volume_name(claim)) {
                Err(_) => {
                    flags.bound_volumes_found = false;
                    break;
                }
                Ok(volume) if !affinity_matches(&translated_for_node(volume, csi_node), &as_seen) => {
                    flags.bound_satisfied = false;
                    break;
                }
                Ok(_) => {}
            }
        }
        if self.delayed.is_empty() {
            return Ok(flags);
        }
        let mut to_match = Vec::new();
        let mut to_provision = Vec::new();
        for claim in &self.delayed {
            match annotation(&claim.metadata, SELECTED_NODE_ANNOTATION) {
                Some(selected) if selected != node.name() => {
                    flags.unbound_satisfied = false;
                    return Ok(flags);
                }
                Some(_) => to_provision.push(*claim),
                None => to_match.push(*claim),
            }
        }
        if !to_match.is_empty() {
            let mut chosen = BTreeSet::new();
            let mut all_found = true;
            for claim in to_match {
                let volumes = self
                    .volumes_by_class
                    .get(claim_class(claim))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                match find_matching_volume(claim, volumes, &as_seen, &chosen)? {
                    Some(volume) => {
                        chosen.insert(volume.metadata.name.as_deref().unwrap_or_default());
                        found.static_bindings.push((claim, volume));
                    }
                    None => {
                        all_found = false;
                        to_provision.push(claim);
                    }
                }
            }
            flags.unbound_satisfied = all_found;
        }
        if !to_provision.is_empty() {
            let (satisfied, sufficient) = self.provisions(&to_provision, labels, &mut found.provisions)?;
            flags.unbound_satisfied = satisfied;
            flags.sufficient_storage = sufficient;
        }
        Ok(flags)
    }

    /// `checkVolumeProvisions`: (unbound satisfied, sufficient storage) for claims to provision on the node.
    fn provisions(
        &self,
        claims: &[&'a PersistentVolumeClaim],
        labels: &Labels,
        provisions: &mut Vec<(&'a PersistentVolumeClaim, Option<&'a CSIStorageCapacity>)>,
    ) -> Result<(bool, bool), String> {
        for claim in claims {
            let class_name = claim_class(claim);
            let claim_key = format!(
                "{}/{}",
                claim.metadata.namespace.as_deref().unwrap_or("default"),
                claim.metadata.name.as_deref().unwrap_or_default()
            );
            if class_name.is_empty() {
                return Err(format!("no class for claim {claim_key:?}"));
            }
            let class = self
                .storage
                .class(class_name)
                .map_err(|_| format!("failed to find storage class {class_name:?}"))?;
            if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
                return Ok((false, true));
            }
            if !topology_allows(class.allowed_topologies.as_deref(), labels) {
                return Ok((false, true));
            }
            match self.enough_capacity(&class.provisioner, class_name, claim, labels) {
                CapacityCheck::Insufficient => return Ok((true, false)),
                CapacityCheck::NotChecked => provisions.push((claim, None)),
                CapacityCheck::Found(capacity) => provisions.push((claim, Some(capacity))),
            }
        }
        Ok((true, true))
    }

    /// `hasEnoughCapacity`: only a claim requesting storage of a driver with `storageCapacity: true` is checked; a
    /// CSIStorageCapacity of the class whose node topology selects the node must hold the request.
    fn enough_capacity(
        &self,
        provisioner: &str,
        class: &str,
        claim: &PersistentVolumeClaim,
        labels: &Labels,
    ) -> CapacityCheck<'a> {
        let has_request = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get("storage"))
            .is_some();
        if !has_request {
            return CapacityCheck::NotChecked;
        }
        let Some(driver) = self.storage.csi_driver(provisioner) else {
            return CapacityCheck::NotChecked;
        };
        if driver.spec.storage_capacity != Some(true) {
            return CapacityCheck::NotChecked;
        }
        // `Quantity.Value()`: whole units rounded up.
        let size = parse_value(requested(claim));
        let found = self.storage.capacities().find(|capacity| {
            let limit = capacity.maximum_volume_size.as_ref().or(capacity.capacity.as_ref());
            let sufficient = limit
                .and_then(|q| parse(&q.0).ok())
                .is_some_and(|limit| i128::from(limit.value()) >= size);
            let accessible = capacity.node_topology.as_ref().is_some_and(|topology| {
                Selector::from_label_selector(Some(topology), &FieldPath::root()).is_ok_and(|s| s.matches(labels))
            });
            capacity.storage_class_name == class && sufficient && accessible
        });
        found.map_or(CapacityCheck::Insufficient, CapacityCheck::Found)
    }
}

/// Nano-units to whole units rounded up (`Quantity.Value()` for the non-negative sizes of claims).
fn parse_value(nano: i128) -> i128 {
    (nano + 999_999_999).div_euclid(1_000_000_000)
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        match self.node_volumes(node) {
            Ok((verdict, _)) => verdict,
            // Upstream fails the cycle with this error; the node is rejected with its text.
            Err(error) => Some(Verdict::unresolvable(error)),
        }
    }
}
