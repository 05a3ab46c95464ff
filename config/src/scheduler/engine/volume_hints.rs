//! The volume plugins' queueing hints (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone) and the
//! storage objects their events carry.

// kube-scheduler v1.35.4 (hints on): `volumerestrictions/volume_restrictions.go:340-420`,
// `nodevolumelimits/csi.go:88-233`, `volumebinding/volume_binding.go:106-300`, `volumezone/volume_zone.go:270-400`.
// Each function answers whether the event may make the pod schedulable (Queue) or cannot (Skip).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::csi_translation::{InTreePlugin, MIGRATED_PLUGINS_ANNOTATION, inline_handle};
use super::plugins::volume_restrictions;
use super::quantity::parse;
use super::storage::ephemeral_claim_name;

pub use super::storage::StorageObject;

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default()
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// Whether `claim` is one of the pod's: same namespace, named by a `persistentVolumeClaim` volume (or, with
/// `ephemeral`, a generic ephemeral volume's claim).
pub(crate) fn is_claim_of_pod(pod: &Pod, claim: Option<&PersistentVolumeClaim>, ephemeral: bool) -> bool {
    let Some(claim) = claim else { return false };
    if claim.metadata.namespace.as_deref().unwrap_or("default") != namespace(pod) {
        return false;
    }
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    volumes(pod)
        .iter()
        .any(|volume| match (&volume.persistent_volume_claim, &volume.ephemeral) {
            (Some(source), _) => source.claim_name == name,
            (None, Some(_)) if ephemeral => ephemeral_claim_name(pod, volume) == name,
            _ => false,
        })
}

/// `VolumeRestrictions.isSchedulableAfterPodDeleted`: a deleted pod of the same namespace whose disks conflicted
/// with the pod's, or that used one of its claims.
pub(crate) fn restrictions_pod_deleted(pod: &Pod, deleted: Option<&Pod>) -> bool {
    let Some(deleted) = deleted else { return true };
    if namespace(deleted) != namespace(pod) {
        return false;
    }
    if volumes(pod)
        .iter()
        .any(|volume| volume_restrictions::conflicts(volume, volumes(deleted).iter()))
    {
        return true;
    }
    let claims: BTreeSet<&str> = volumes(pod)
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
        .collect();
    volumes(deleted)
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .any(|c| claims.contains(c.claim_name.as_str()))
}

/// `CSILimits.isSchedulableAfterPodDeleted`: the deleted pod was bound or nominated and had a claim, an
/// ephemeral volume or a migratable in-tree volume.
pub(crate) fn limits_pod_deleted(deleted: Option<&Pod>) -> bool {
    let Some(deleted) = deleted else { return true };
    let bound = deleted
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let nominated = deleted
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    (bound || nominated)
        && volumes(deleted).iter().any(|v| {
            v.persistent_volume_claim.is_some() || v.ephemeral.is_some() || InTreePlugin::of_volume(v).is_some()
        })
}

/// `CSILimits.isSchedulableAfterVolumeAttachmentDeleted`: the pod has a claim, or a migratable inline volume of
/// the detached volume's driver.
pub(crate) fn limits_attachment_deleted(pod: &Pod, deleted: Option<&VolumeAttachment>) -> bool {
    let Some(deleted) = deleted else { return true };
    volumes(pod).iter().any(|volume| {
        // A volume that does not translate answers Queue, as the hint's error does upstream.
        volume.persistent_volume_claim.is_some()
            || InTreePlugin::of_volume(volume)
                .is_some_and(|plugin| plugin.driver() == deleted.spec.attacher || inline_handle(volume).is_err())
    })
}

/// `CSILimits.isSchedulableAfterCSINodeUpdated`: some driver's `allocatable.count` grew.
pub(crate) fn limits_csi_node_updated(old: Option<&CSINode>, new: Option<&CSINode>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return true;
    };
    let count = |node: &CSINode, driver: &str| {
        node.spec
            .drivers
            .iter()
            .find(|d| d.name == driver)
            .and_then(|d| d.allocatable.as_ref()?.count)
            .unwrap_or(0)
    };
    new.spec
        .drivers
        .iter()
        .any(|d| count(new, &d.name) > count(old, &d.name))
}

/// `VolumeBinding.isSchedulableAfterStorageClassChange`: a class added, or its `allowedTopologies` changed.
pub(crate) fn binding_class_changed(old: Option<&StorageClass>, new: Option<&StorageClass>) -> bool {
    match (old, new) {
        (Some(old), Some(new)) => old.allowed_topologies != new.allowed_topologies,
        _ => true,
    }
}

/// `VolumeBinding.isSchedulableAfterCSINodeChange`: a CSINode added, or its migrated-plugins annotation changed.
pub(crate) fn binding_csi_node_changed(old: Option<&CSINode>, new: Option<&CSINode>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return true;
    };
    let annotation = |node: &CSINode| {
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MIGRATED_PLUGINS_ANNOTATION))
            .cloned()
    };
    annotation(old) != annotation(new)
}

/// `VolumeBinding.isSchedulableAfterCSIStorageCapacityChange`: a capacity added, or its limit (maximum volume
/// size, else capacity) appeared or grew.
pub(crate) fn binding_capacity_changed(old: Option<&CSIStorageCapacity>, new: Option<&CSIStorageCapacity>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return true;
    };
    let limit = |c: &CSIStorageCapacity| -> Option<i128> {
        let quantity: &Quantity = c.maximum_volume_size.as_ref().or(c.capacity.as_ref())?;
        // A limit that does not parse answers Queue, as a hint's error does.
        Some(parse(&quantity.0).map_or(i128::MAX, |q| i128::from(q.value())))
    };
    match (limit(old), limit(new)) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(old), Some(new)) => new > old,
    }
}

/// `VolumeBinding.isSchedulableAfterCSIDriverChange`: an inline CSI volume's driver stopped requiring storage
/// capacity.
pub(crate) fn binding_csi_driver_changed(pod: &Pod, old: Option<&CSIDriver>, new: Option<&CSIDriver>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return true;
    };
    let name = new.metadata.name.as_deref().unwrap_or_default();
    let capacity = |d: &CSIDriver| d.spec.storage_capacity.unwrap_or(false);
    volumes(pod)
        .iter()
        .filter_map(|v| v.csi.as_ref())
        .any(|csi| csi.driver == name && capacity(old) && !capacity(new))
}

/// `VolumeZone.isSchedulableAfterStorageClassAdded`: the added class binds at the first consumer.
pub(crate) fn zone_class_added(new: Option<&StorageClass>) -> bool {
    new.is_none_or(|class| class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
}

/// `VolumeZone.isSchedulableAfterPersistentVolumeChange`: a volume added, or its zone/region labels changed.
pub(crate) fn zone_volume_changed(old: Option<&PersistentVolume>, new: Option<&PersistentVolume>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return true;
    };
    const KEYS: [&str; 4] = [
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
    ];
    let topology = |v: &PersistentVolume| -> Vec<(&str, BTreeSet<String>)> {
        let labels = v.metadata.labels.as_ref();
        KEYS.iter()
            .filter_map(|key| {
                let value = labels?.get(*key)?;
                let zones: Option<BTreeSet<String>> = value
                    .split("__")
                    .map(|z| Some(z.trim()).filter(|z| !z.is_empty()).map(str::to_string))
                    .collect();
                Some((*key, zones?))
            })
            .collect()
    };
    topology(old) != topology(new)
}
