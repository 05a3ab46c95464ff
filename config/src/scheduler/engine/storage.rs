//! The storage objects volume plugins read (claims, volumes, classes, CSI nodes/drivers/capacities, attachments),
//! as listers.

// kube-scheduler's volume plugins read these through informer listers; a missing object is a NotFound error whose
// text (`persistentvolumeclaim "x" not found`) becomes the plugin's reason, so the lookups here return that text.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Volume};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation that names a claim's class before `spec.storageClassName` (still read first, as upstream).
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// A storage object: an entry of a [`Storage`] and what a storage event is about (the same allocation).
#[derive(Clone, Debug)]
pub enum StorageObject {
    Claim(Arc<PersistentVolumeClaim>),
    Volume(Arc<PersistentVolume>),
    Class(Arc<StorageClass>),
    CsiNode(Arc<CSINode>),
    CsiDriver(Arc<CSIDriver>),
    Capacity(Arc<CSIStorageCapacity>),
    Attachment(Arc<VolumeAttachment>),
}

/// PersistentVolumeClaims (by namespace and name), PersistentVolumes, StorageClasses, CSINodes and CSIDrivers (by
/// name), CSIStorageCapacities and VolumeAttachments. Built whole ([`Storage::new`]) or kept up to date object by
/// object ([`Storage::apply`], [`Storage::remove`]); a clone shares the objects.
#[derive(Clone, Debug, Default)]
pub struct Storage {
    claims: HashMap<(String, String), Arc<PersistentVolumeClaim>>,
    volumes: HashMap<String, Arc<PersistentVolume>>,
    classes: HashMap<String, Arc<StorageClass>>,
    /// Boxed: most stores (tests, `simulate`) have none.
    csi: Box<CsiStore>,
}

#[derive(Clone, Debug, Default)]
struct CsiStore {
    nodes: HashMap<String, Arc<CSINode>>,
    drivers: HashMap<String, Arc<CSIDriver>>,
    /// By namespace and name.
    capacities: HashMap<(String, String), Arc<CSIStorageCapacity>>,
    /// By `spec.nodeName` (immutable), then name: NodeVolumeLimits reads a node's own for every node it checks.
    attachments: HashMap<String, HashMap<String, Arc<VolumeAttachment>>>,
}

/// The CSI objects of a [`Storage`] (NodeVolumeLimits and VolumeBinding read them; none is fine).
#[derive(Clone, Debug, Default)]
pub struct CsiObjects {
    pub nodes: Vec<CSINode>,
    pub drivers: Vec<CSIDriver>,
    pub capacities: Vec<CSIStorageCapacity>,
    pub attachments: Vec<VolumeAttachment>,
}

/// A namespaced object's key (`default` when the namespace is unset).
fn namespaced_key(meta: &ObjectMeta) -> (String, String) {
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".to_string());
    (namespace, name_of(meta))
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// `seen` is a newer version than `assumed` (resource versions compared as numbers, as the apiserver's versioner).
fn newer(seen: &ObjectMeta, assumed: &ObjectMeta) -> bool {
    let version = |m: &ObjectMeta| {
        m.resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    version(seen) > version(assumed)
}

/// A lookup that found nothing: the lister's NotFound text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{resource} \"{name}\" not found")]
pub struct NotFound {
    /// The resource as apimachinery's `GroupResource` prints it.
    pub resource: &'static str,
    /// The name looked up.
    pub name: String,
}

impl Storage {
    /// A store of these objects; claims without a namespace are in `default`.
    pub fn new(
        claims: impl IntoIterator<Item = PersistentVolumeClaim>,
        volumes: impl IntoIterator<Item = PersistentVolume>,
        classes: impl IntoIterator<Item = StorageClass>,
    ) -> Storage {
        let mut storage = Storage::default();
        let objects = (claims.into_iter().map(|c| StorageObject::Claim(Arc::new(c))))
            .chain(volumes.into_iter().map(|v| StorageObject::Volume(Arc::new(v))))
            .chain(classes.into_iter().map(|c| StorageObject::Class(Arc::new(c))));
        for object in objects {
            storage.apply(object);
        }
        storage
    }

    /// The same store with these CSI objects.
    pub fn with_csi(mut self, csi: CsiObjects) -> Storage {
        let objects = (csi.nodes.into_iter().map(|n| StorageObject::CsiNode(Arc::new(n))))
            .chain(csi.drivers.into_iter().map(|d| StorageObject::CsiDriver(Arc::new(d))))
            .chain(csi.capacities.into_iter().map(|c| StorageObject::Capacity(Arc::new(c))))
            .chain(
                csi.attachments
                    .into_iter()
                    .map(|a| StorageObject::Attachment(Arc::new(a))),
            );
        for object in objects {
            self.apply(object);
        }
        self
    }

    /// Adds an object or replaces its version (a watch's add or update); returns the version replaced.
    pub fn apply(&mut self, object: StorageObject) -> Option<StorageObject> {
        use StorageObject as S;
        match object {
            S::Claim(c) => self.claims.insert(namespaced_key(&c.metadata), c).map(S::Claim),
            S::Volume(v) => self.volumes.insert(name_of(&v.metadata), v).map(S::Volume),
            S::Class(c) => self.classes.insert(name_of(&c.metadata), c).map(S::Class),
            S::CsiNode(n) => self.csi.nodes.insert(name_of(&n.metadata), n).map(S::CsiNode),
            S::CsiDriver(d) => self.csi.drivers.insert(name_of(&d.metadata), d).map(S::CsiDriver),
            S::Capacity(c) => self
                .csi
                .capacities
                .insert(namespaced_key(&c.metadata), c)
                .map(S::Capacity),
            S::Attachment(a) => self
                .csi
                .attachments
                .entry(a.spec.node_name.clone())
                .or_default()
                .insert(name_of(&a.metadata), a)
                .map(S::Attachment),
        }
    }

    /// Removes an object (a watch's delete, known by its last version); returns the version removed.
    pub fn remove(&mut self, object: &StorageObject) -> Option<StorageObject> {
        use StorageObject as S;
        match object {
            S::Claim(c) => self.claims.remove(&namespaced_key(&c.metadata)).map(S::Claim),
            S::Volume(v) => self.volumes.remove(&name_of(&v.metadata)).map(S::Volume),
            S::Class(c) => self.classes.remove(&name_of(&c.metadata)).map(S::Class),
            S::CsiNode(n) => self.csi.nodes.remove(&name_of(&n.metadata)).map(S::CsiNode),
            S::CsiDriver(d) => self.csi.drivers.remove(&name_of(&d.metadata)).map(S::CsiDriver),
            S::Capacity(c) => self
                .csi
                .capacities
                .remove(&namespaced_key(&c.metadata))
                .map(S::Capacity),
            S::Attachment(a) => {
                let on_node = self.csi.attachments.get_mut(&a.spec.node_name)?;
                let removed = on_node.remove(&name_of(&a.metadata));
                if on_node.is_empty() {
                    self.csi.attachments.remove(&a.spec.node_name);
                }
                removed.map(S::Attachment)
            }
        }
    }

    /// The CSINode of a node (the same name), if any.
    pub fn csi_node(&self, node: &str) -> Option<&CSINode> {
        self.csi.nodes.get(node).map(|n| &**n)
    }

    /// A CSIDriver, if any.
    pub(crate) fn csi_driver(&self, name: &str) -> Option<&CSIDriver> {
        self.csi.drivers.get(name).map(|d| &**d)
    }

    /// Every CSIStorageCapacity, in no particular order.
    pub fn capacities(&self) -> impl Iterator<Item = &CSIStorageCapacity> {
        self.csi.capacities.values().map(|c| &**c)
    }

    /// The VolumeAttachments to a node, in no particular order.
    pub(crate) fn attachments_to(&self, node: &str) -> impl Iterator<Item = &VolumeAttachment> {
        self.csi
            .attachments
            .get(node)
            .into_iter()
            .flat_map(|a| a.values().map(|a| &**a))
    }

    /// Every PersistentVolume, in no particular order.
    pub fn volumes(&self) -> impl Iterator<Item = &PersistentVolume> {
        self.volumes.values().map(|v| &**v)
    }

    /// A claim of a namespace.
    pub fn claim(&self, namespace: &str, name: &str) -> Result<&PersistentVolumeClaim, NotFound> {
        self.claims
            .get(&(namespace.to_string(), name.to_string()))
            .map(|c| &**c)
            .ok_or_else(|| NotFound {
                resource: "persistentvolumeclaim",
                name: name.to_string(),
            })
    }

    /// A PersistentVolume.
    pub fn volume(&self, name: &str) -> Result<&PersistentVolume, NotFound> {
        self.volumes.get(name).map(|v| &**v).ok_or_else(|| NotFound {
            resource: "persistentvolume",
            name: name.to_string(),
        })
    }

    /// Reserve's assumed version of a volume (VolumeBinding's assume cache): it replaces the watched one unless the
    /// watch already holds a newer version (the write landed, or someone else changed the volume).
    pub fn assume_volume(&mut self, volume: PersistentVolume) {
        let name = name_of(&volume.metadata);
        if self
            .volumes
            .get(&name)
            .is_none_or(|seen| !newer(&seen.metadata, &volume.metadata))
        {
            self.volumes.insert(name, Arc::new(volume));
        }
    }

    /// Reserve's assumed version of a claim, as [`Storage::assume_volume`].
    pub fn assume_claim(&mut self, claim: PersistentVolumeClaim) {
        let key = namespaced_key(&claim.metadata);
        if self
            .claims
            .get(&key)
            .is_none_or(|seen| !newer(&seen.metadata, &claim.metadata))
        {
            self.claims.insert(key, Arc::new(claim));
        }
    }

    /// A StorageClass.
    pub fn class(&self, name: &str) -> Result<&StorageClass, NotFound> {
        self.classes.get(name).map(|c| &**c).ok_or_else(|| NotFound {
            resource: "storageclass.storage.k8s.io",
            name: name.to_string(),
        })
    }
}

/// A claim's class (`GetPersistentVolumeClaimClass`): the beta annotation first, then `spec.storageClassName`.
pub(crate) fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .map(String::as_str)
        .or_else(|| claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()))
        .unwrap_or_default()
}

/// What the ephemeral-claim rules read of a pod: its namespace, name and UID.
#[derive(Clone, Copy, Debug)]
pub struct VolumeOwner<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
}

impl<'a> VolumeOwner<'a> {
    /// A pod's (namespace `default` when unset).
    pub fn of(pod: &'a k8s_openapi::api::core::v1::Pod) -> VolumeOwner<'a> {
        VolumeOwner {
            namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
            name: pod.metadata.name.as_deref().unwrap_or_default(),
            uid: pod.metadata.uid.as_deref(),
        }
    }
}

/// The claim of a generic ephemeral volume (`ephemeral.VolumeClaimName`): `<pod name>-<volume name>`.
pub(crate) fn ephemeral_claim_name(
    pod: &k8s_openapi::api::core::v1::Pod,
    volume: &k8s_openapi::api::core::v1::Volume,
) -> String {
    ephemeral_claim_name_of(VolumeOwner::of(pod), &volume.name)
}

/// [`ephemeral_claim_name`] of a pod known by its [`VolumeOwner`], for the volume named `volume`.
pub(crate) fn ephemeral_claim_name_of(owner: VolumeOwner<'_>, volume: &str) -> String {
    format!("{}-{volume}", owner.name)
}

/// Why an ephemeral volume's claim is not the pod's (`ephemeral.VolumeIsForPod`): another namespace, or not
/// controlled by the pod.
pub(crate) fn ephemeral_owner_error(
    pod: &k8s_openapi::api::core::v1::Pod,
    namespace: &str,
    claim: &PersistentVolumeClaim,
) -> Option<String> {
    ephemeral_owner_error_of(
        VolumeOwner {
            namespace,
            ..VolumeOwner::of(pod)
        },
        claim,
    )
}

/// [`ephemeral_owner_error`] of a pod known by its [`VolumeOwner`].
pub(crate) fn ephemeral_owner_error_of(owner: VolumeOwner<'_>, claim: &PersistentVolumeClaim) -> Option<String> {
    let claim_namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
    let controlled = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|reference| reference.controller == Some(true) && Some(reference.uid.as_str()) == owner.uid);
    (claim_namespace != owner.namespace || !controlled).then(|| {
        format!(
            "PVC {claim_namespace}/{} was not created for pod {}/{} (pod is not owner)",
            claim.metadata.name.as_deref().unwrap_or_default(),
            owner.namespace,
            owner.name
        )
    })
}

/// A volume the volume plugins read of a pod on a node, kept small: most are claims, and a typed volume is large
/// (every kind of source is inline).
#[derive(Clone, Debug, PartialEq)]
pub enum StorageVolume {
    /// A `persistentVolumeClaim` volume: the claim's name.
    Claim(String),
    /// A generic ephemeral volume: the volume's name (its claim is `<pod>-<volume>`).
    Ephemeral(String),
    /// An inline volume (an in-tree disk), whole.
    Inline(Box<Volume>),
}

impl StorageVolume {
    /// The volume, if a volume plugin reads it: NodeVolumeLimits' kinds and VolumeRestrictions'.
    pub fn of(volume: &Volume) -> Option<StorageVolume> {
        if let Some(claim) = &volume.persistent_volume_claim {
            Some(StorageVolume::Claim(claim.claim_name.clone()))
        } else if volume.ephemeral.is_some() {
            Some(StorageVolume::Ephemeral(volume.name.clone()))
        } else {
            (is_counted_kind(volume) || needs_restrictions_check(volume))
                .then(|| StorageVolume::Inline(Box::new(volume.clone())))
        }
    }

    /// The inline volume, if this is one.
    pub fn inline(&self) -> Option<&Volume> {
        match self {
            StorageVolume::Inline(volume) => Some(volume),
            _ => None,
        }
    }
}

/// Whether NodeVolumeLimits looks at a volume (claims, ephemeral volumes, migratable in-tree inline volumes).
pub(crate) fn is_counted_kind(volume: &Volume) -> bool {
    volume.persistent_volume_claim.is_some()
        || volume.ephemeral.is_some()
        || super::csi_translation::InTreePlugin::of_volume(volume).is_some()
}

/// The volumes whose conflicts VolumeRestrictions checks (`needsRestrictionsCheck`).
pub(crate) fn needs_restrictions_check(volume: &Volume) -> bool {
    volume.gce_persistent_disk.is_some()
        || volume.aws_elastic_block_store.is_some()
        || volume.rbd.is_some()
        || volume.iscsi.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attachment(name: &str, node: &str) -> StorageObject {
        StorageObject::Attachment(Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"attacher": "ebs", "nodeName": node, "source": {"persistentVolumeName": "pv"}}
            }))
            .unwrap(),
        ))
    }

    fn names(storage: &Storage, node: &str) -> Vec<String> {
        let mut names: Vec<String> = storage
            .attachments_to(node)
            .filter_map(|a| a.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn objects_are_applied_replaced_and_removed_one_by_one() {
        let mut storage = Storage::default();
        assert!(storage.apply(attachment("a", "n1")).is_none());
        assert!(storage.apply(attachment("b", "n1")).is_none());
        assert!(storage.apply(attachment("c", "n2")).is_none());
        assert!(matches!(
            storage.apply(attachment("a", "n1")),
            Some(StorageObject::Attachment(_))
        ));
        assert_eq!(names(&storage, "n1"), ["a", "b"]);
        assert!(storage.remove(&attachment("a", "n1")).is_some());
        assert!(storage.remove(&attachment("a", "n1")).is_none(), "removed once");
        assert_eq!(names(&storage, "n1"), ["b"]);
        assert!(storage.remove(&attachment("c", "n2")).is_some());
        assert!(names(&storage, "n2").is_empty());
        assert!(
            !storage.csi.attachments.contains_key("n2"),
            "an emptied node's entry goes"
        );

        let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "data"}})).unwrap();
        storage.apply(StorageObject::Claim(Arc::new(claim.clone())));
        assert!(storage.claim("default", "data").is_ok(), "no namespace is `default`");
        let clone = storage.clone();
        storage.remove(&StorageObject::Claim(Arc::new(claim)));
        assert!(storage.claim("default", "data").is_err());
        assert!(clone.claim("default", "data").is_ok(), "a clone keeps its own entries");
    }
}
