//! VolumeBinding's Reserve and PreBind as a plan: for the chosen node, the static volumes to bind and the claims to
//! provision (what the worker assumes and writes), and the check of the writes' progress while it waits.

// kube-scheduler v1.35's `volumebinding` Reserve (`AssumePodVolumes`), PreBind (`BindPodVolumes`: update every PV,
// then every claim to provision, then poll every second up to `bindTimeoutSeconds` with `checkBindings`). The
// engine decides; the worker writes, waits and forgets. Not ported: the CSI translation of a migrated in-tree
// volume before the node-affinity check (as in the Filter).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};

use super::csi_translation::translated_for_node;
use super::labels::Labels;
use super::plugins::volume_binding::{
    SELECTED_NODE_ANNOTATION, affinity_matches, annotation, compare_requests, find_matching_volume, is_delay_binding,
    is_fully_bound, labels_only, pod_claims, volume_class, volume_name,
};
use super::storage::{Storage, claim_class};

/// The annotation `GetBindVolumeToClaim` sets on a volume it binds that was not pre-bound to the claim.
pub const BOUND_BY_CONTROLLER_ANNOTATION: &str = "pv.kubernetes.io/bound-by-controller";

/// One static binding: the volume as it is to be written (its `claimRef` naming the claim) and the claim.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticBinding {
    pub volume: PersistentVolume,
    pub claim: PersistentVolumeClaim,
}

/// The pod's volume work on the chosen node (`PodVolumes`): empty when every claim is bound (PreBindPreFlight's
/// Skip: no nomination patch, no write, no wait).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumePlan {
    /// Static volumes to bind, in the claims' request order (smallest first, as the Filter matched them).
    pub bindings: Vec<StaticBinding>,
    /// Claims to provision, with `volume.kubernetes.io/selected-node` set to the node.
    pub provisions: Vec<PersistentVolumeClaim>,
}

impl VolumePlan {
    /// Nothing to bind or provision.
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty() && self.provisions.is_empty()
    }
}

fn claim_namespace(claim: &PersistentVolumeClaim) -> &str {
    claim.metadata.namespace.as_deref().unwrap_or("default")
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// `GetBindVolumeToClaim`: the volume with `claimRef` naming the claim (kind, namespace, name, UID, resource
/// version) unless it already does, and `pv.kubernetes.io/bound-by-controller: "yes"` unless it was pre-bound.
pub(crate) fn bind_volume_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> PersistentVolume {
    let pre_bound = super::plugins::volume_binding::is_bound_to(volume, claim);
    let mut bound = volume.clone();
    let spec = bound.spec.get_or_insert_with(Default::default);
    let current = spec.claim_ref.as_ref();
    let same = current.is_some_and(|r| {
        r.name.as_deref() == claim.metadata.name.as_deref()
            && r.namespace.as_deref().unwrap_or_default() == claim_namespace(claim)
            && r.uid.as_deref().unwrap_or_default() == claim.metadata.uid.as_deref().unwrap_or_default()
    });
    if !same {
        spec.claim_ref = Some(ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("PersistentVolumeClaim".to_string()),
            namespace: Some(claim_namespace(claim).to_string()),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            ..ObjectReference::default()
        });
    }
    if !pre_bound {
        bound
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .entry(BOUND_BY_CONTROLLER_ANNOTATION.to_string())
            .or_insert_with(|| "yes".to_string());
    }
    bound
}

/// Reserve's plan for the pod on `node` (whose labels are `labels`), from the view the Filter read: the delayed
/// claims (unbound, WaitForFirstConsumer) matched to static volumes as `FindPodVolumes` matches them, the rest to
/// be provisioned there. Errors are the Filter's (the claim lookups, a class without a binding mode, a selector
/// that does not compile): they cannot happen for a node the Filter passed on the same view.
pub fn plan(pod: &Pod, namespace: &str, storage: &Storage, node: &str, labels: &Labels) -> Result<VolumePlan, String> {
    let claims = pod_claims(pod, namespace, storage)?;
    let mut delayed = Vec::new();
    for claim in claims {
        if !is_fully_bound(claim) && volume_name(claim).is_empty() && is_delay_binding(storage, claim)? {
            delayed.push(claim);
        }
    }
    delayed.sort_by(|a, b| compare_requests(a, b));
    let as_seen = labels_only(labels);
    let mut result = VolumePlan::default();
    let mut chosen = BTreeSet::new();
    for claim in delayed {
        if annotation(&claim.metadata, SELECTED_NODE_ANNOTATION).is_none() {
            let class = claim_class(claim);
            let volumes: Vec<&PersistentVolume> = storage.volumes().filter(|v| volume_class(v) == class).collect();
            if let Some(volume) = find_matching_volume(claim, &volumes, &as_seen, &chosen)? {
                chosen.insert(name(&volume.metadata));
                result.bindings.push(StaticBinding {
                    volume: bind_volume_to_claim(volume, claim),
                    claim: claim.clone(),
                });
                continue;
            }
        }
        let mut provision = claim.clone();
        provision
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(SELECTED_NODE_ANNOTATION.to_string(), node.to_string());
        result.provisions.push(provision);
    }
    Ok(result)
}

/// `versioner.CompareResourceVersion(written, seen) > 0`: the watch has not caught up with what was written.
fn older(seen: Option<&str>, written: Option<&str>) -> bool {
    let parse = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    parse(written) > parse(seen)
}

/// `checkBindings` on the watch's (unassumed) view after the writes of `plan` (the objects as the apiserver
/// returned them): `Ok(true)` when every claim is fully bound, `Ok(false)` to poll again, `Err` with
/// kube-scheduler's text when the binding must be retried. `pod_exists`: the pod is still in the cluster.
pub fn check(
    plan: &VolumePlan,
    storage: &Storage,
    node: &str,
    labels: &Labels,
    pod_exists: bool,
) -> Result<bool, String> {
    if !pod_exists {
        return Err("pod does not exist any more".to_string());
    }
    let as_seen = labels_only(labels);
    // An in-tree volume migrated on the node is checked as its CSI translation (`tryTranslatePVToCSI`).
    let csi_node = storage.csi_node(node);
    for binding in &plan.bindings {
        let volume_name = name(&binding.volume.metadata);
        let volume = storage
            .volume(volume_name)
            .map_err(|e| format!("failed to check binding: {e}"))?;
        let claim = storage
            .claim(claim_namespace(&binding.claim), name(&binding.claim.metadata))
            .map_err(|e| format!("failed to check binding: {e}"))?;
        if older(
            volume.metadata.resource_version.as_deref(),
            binding.volume.metadata.resource_version.as_deref(),
        ) {
            return Ok(false);
        }
        if !affinity_matches(&translated_for_node(volume, csi_node), &as_seen) {
            return Err(format!(
                "pv {volume_name:?} node affinity doesn't match node {node:?}: no matching NodeSelectorTerms"
            ));
        }
        let reference = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if reference.is_none_or(|r| r.uid.as_deref().unwrap_or_default().is_empty()) {
            return Err(format!("ClaimRef got reset for pv {volume_name:?}"));
        }
        if !is_fully_bound(claim) {
            return Ok(false);
        }
    }
    for written in &plan.provisions {
        let claim_name = name(&written.metadata);
        let claim = storage
            .claim(claim_namespace(written), claim_name)
            .map_err(|e| format!("failed to check provisioning pvc: {e}"))?;
        if older(
            claim.metadata.resource_version.as_deref(),
            written.metadata.resource_version.as_deref(),
        ) {
            return Ok(false);
        }
        if claim.metadata.annotations.is_none() {
            return Err(format!("selectedNode annotation reset for PVC {claim_name:?}"));
        }
        if annotation(&claim.metadata, SELECTED_NODE_ANNOTATION) != Some(node) {
            return Err(format!("provisioning failed for PVC {claim_name:?}"));
        }
        let bound_to = volume_name(claim);
        if !bound_to.is_empty() {
            // A volume not seen yet is waited for, as upstream tolerates NotFound here.
            let Ok(volume) = storage.volume(bound_to) else {
                return Ok(false);
            };
            if !affinity_matches(&translated_for_node(volume, csi_node), &as_seen) {
                return Err(format!(
                    "pv {bound_to:?} node affinity doesn't match node {node:?}: no matching NodeSelectorTerms"
                ));
            }
        }
        if !is_fully_bound(claim) {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::storage::v1::StorageClass;
    use serde_json::json;

    use super::*;

    fn class(name: &str, provisioner: &str) -> StorageClass {
        serde_json::from_value(json!({
            "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"
        }))
        .unwrap()
    }

    fn volume(name: &str, size: &str, host: &str) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": name, "resourceVersion": "5"},
            "spec": {
                "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                "local": {"path": "/data"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
                ]}]}}
            },
            "status": {"phase": "Available"}
        }))
        .unwrap()
    }

    fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "7"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                     "resources": {"requests": {"storage": size}}}
        }))
        .unwrap()
    }

    fn pod(claims: &[&str]) -> Pod {
        let volumes: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes}
        }))
        .unwrap()
    }

    fn host(name: &str) -> Labels {
        Labels::from([("kubernetes.io/hostname".to_string(), name.to_string())])
    }

    fn storage() -> Storage {
        Storage::new(
            [
                claim("small", "local", "1Gi"),
                claim("big", "local", "5Gi"),
                claim("fresh", "fast", "1Gi"),
            ],
            [
                volume("a-10", "10Gi", "a"),
                volume("a-5", "5Gi", "a"),
                volume("b-5", "5Gi", "b"),
            ],
            [
                class("local", "kubernetes.io/no-provisioner"),
                class("fast", "example.com/csi"),
            ],
        )
    }

    #[test]
    fn static_claims_bind_the_smallest_fitting_volumes_of_the_node_smallest_claim_first() {
        let plan = plan(&pod(&["big", "small"]), "ns", &storage(), "a", &host("a")).unwrap();
        let pairs: Vec<(&str, &str)> = plan
            .bindings
            .iter()
            .map(|b| (name(&b.volume.metadata), name(&b.claim.metadata)))
            .collect();
        // `small` (1Gi) goes first and takes a-5; `big` (5Gi) gets a-10.
        assert_eq!(pairs, [("a-5", "small"), ("a-10", "big")]);
        assert!(plan.provisions.is_empty());
        let bound = &plan.bindings[0].volume;
        let reference = bound.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(reference.uid.as_deref(), Some("uid-small"));
        assert_eq!(reference.namespace.as_deref(), Some("ns"));
        assert_eq!(reference.kind.as_deref(), Some("PersistentVolumeClaim"));
        assert_eq!(annotation(&bound.metadata, BOUND_BY_CONTROLLER_ANNOTATION), Some("yes"));
        // The resource version stays the one read: the update is conditional on it.
        assert_eq!(bound.metadata.resource_version.as_deref(), Some("5"));
    }

    #[test]
    fn a_pre_bound_volume_keeps_its_reference_and_gets_no_controller_annotation() {
        let claim = claim("small", "local", "1Gi");
        let mut pre_bound = volume("a-5", "5Gi", "a");
        pre_bound.spec.as_mut().unwrap().claim_ref = Some(ObjectReference {
            namespace: Some("ns".into()),
            name: Some("small".into()),
            uid: Some("uid-small".into()),
            ..ObjectReference::default()
        });
        let bound = bind_volume_to_claim(&pre_bound, &claim);
        assert_eq!(bound, pre_bound);
    }

    #[test]
    fn claims_without_a_static_volume_are_provisioned_on_the_node() {
        let plan = plan(&pod(&["fresh", "small"]), "ns", &storage(), "b", &host("b")).unwrap();
        assert_eq!(plan.bindings.len(), 1);
        assert_eq!(name(&plan.bindings[0].volume.metadata), "b-5");
        let provisioned: Vec<_> = plan
            .provisions
            .iter()
            .map(|c| (name(&c.metadata), annotation(&c.metadata, SELECTED_NODE_ANNOTATION)))
            .collect();
        assert_eq!(provisioned, [("fresh", Some("b"))]);
    }

    #[test]
    fn assumed_versions_hide_the_taken_volume_until_the_watch_is_newer() {
        let mut view = storage();
        let first = plan(&pod(&["small"]), "ns", &view, "a", &host("a")).unwrap();
        view.assume_volume(first.bindings[0].volume.clone());
        // The next pod's claim of the same size gets the other volume of node a, not the assumed one.
        let mut other = claim("other", "local", "1Gi");
        other.metadata.uid = Some("uid-other".into());
        view.assume_claim(other);
        let next = plan(&pod(&["other"]), "ns", &view, "a", &host("a")).unwrap();
        assert_eq!(name(&next.bindings[0].volume.metadata), "a-10");
        // A watched version newer than the assumed one wins; an older one does not replace it.
        let mut newer = volume("a-5", "5Gi", "a");
        newer.metadata.resource_version = Some("9".into());
        let mut watched = Storage::new([], [newer.clone()], []);
        watched.assume_volume(first.bindings[0].volume.clone());
        assert_eq!(watched.volume("a-5").unwrap(), &newer);
        let mut stale = Storage::new([], [volume("a-5", "5Gi", "a")], []);
        stale.assume_volume(first.bindings[0].volume.clone());
        assert_eq!(stale.volume("a-5").unwrap(), &first.bindings[0].volume);
    }

    #[test]
    fn bound_claims_leave_nothing_to_do() {
        let mut bound = claim("small", "local", "1Gi");
        bound.spec.as_mut().unwrap().volume_name = Some("a-5".into());
        bound.metadata.annotations = Some([("pv.kubernetes.io/bind-completed".to_string(), "yes".to_string())].into());
        let storage = Storage::new([bound], [volume("a-5", "5Gi", "a")], [class("local", "x")]);
        let plan = plan(&pod(&["small"]), "ns", &storage, "a", &host("a")).unwrap();
        assert!(plan.is_empty());
    }

    #[test]
    fn the_check_waits_for_the_binder_and_the_provisioner_then_passes() {
        let before = storage();
        let plan = plan(&pod(&["fresh", "small"]), "ns", &before, "b", &host("b")).unwrap();
        // The writes as the apiserver returned them.
        let mut written = plan.clone();
        written.bindings[0].volume.metadata.resource_version = Some("20".into());
        written.provisions[0].metadata.resource_version = Some("21".into());
        // The watch has not seen the writes yet.
        assert_eq!(check(&written, &before, "b", &host("b"), true), Ok(false));
        // Seen, not bound yet.
        let mut volume = written.bindings[0].volume.clone();
        let mut small = written.bindings[0].claim.clone();
        let mut fresh = written.provisions[0].clone();
        let seen = Storage::new(
            [small.clone(), fresh.clone()],
            [volume.clone()],
            [class("local", "x"), class("fast", "example.com/csi")],
        );
        assert_eq!(check(&written, &seen, "b", &host("b"), true), Ok(false));
        // The binder and the provisioner finished.
        let completed = || Some([("pv.kubernetes.io/bind-completed".to_string(), "yes".to_string())].into());
        small.spec.as_mut().unwrap().volume_name = Some("b-5".into());
        small.metadata.annotations = completed();
        fresh.spec.as_mut().unwrap().volume_name = Some("pvc-fresh".into());
        fresh
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
        let provisioned = {
            let mut v = volume.clone();
            v.metadata.name = Some("pvc-fresh".into());
            v
        };
        let done = Storage::new(
            [small.clone(), fresh.clone()],
            [volume.clone(), provisioned],
            [class("local", "x"), class("fast", "example.com/csi")],
        );
        assert_eq!(check(&written, &done, "b", &host("b"), true), Ok(true));
        assert_eq!(
            check(&written, &done, "b", &host("b"), false),
            Err("pod does not exist any more".to_string())
        );
        // The provisioner gave up (the annotation removed), or the binder dropped the volume's claim.
        fresh.metadata.annotations = completed();
        let failed = Storage::new([small.clone(), fresh], [volume.clone()], [class("fast", "x")]);
        assert_eq!(
            check(&written, &failed, "b", &host("b"), true),
            Err("provisioning failed for PVC \"fresh\"".to_string())
        );
        volume.spec.as_mut().unwrap().claim_ref = None;
        let reset = Storage::new([small], [volume], [class("local", "x")]);
        assert_eq!(
            check(&written, &reset, "b", &host("b"), true),
            Err("ClaimRef got reset for pv \"b-5\"".to_string())
        );
    }
}
