//! The storage objects volume plugins read (claims, volumes, classes, CSI nodes/drivers/capacities, attachments),
//! as listers.

// kube-scheduler's volume plugins read these through informer listers; a missing object is a NotFound error whose
// text (`persistentvolumeclaim "x" not found`) becomes the plugin's reason, so the lookups here return that text.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Volume};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};

/// The annotation that names a claim's class before `spec.storageClassName` (still read first, as upstream).
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// PersistentVolumeClaims (by namespace and name), PersistentVolumes, StorageClasses, CSINodes and CSIDrivers (by
/// name), CSIStorageCapacities and VolumeAttachments.
#[derive(Clone, Debug, Default)]
pub struct Storage {
    claims: HashMap<(String, String), PersistentVolumeClaim>,
    volumes: HashMap<String, PersistentVolume>,
    classes: HashMap<String, StorageClass>,
    /// Boxed: most stores (tests, `simulate`) have none.
    csi: Box<CsiStore>,
}

#[derive(Clone, Debug, Default)]
struct CsiStore {
    nodes: HashMap<String, CSINode>,
    drivers: HashMap<String, CSIDriver>,
    capacities: Vec<CSIStorageCapacity>,
    /// By `spec.nodeName`: NodeVolumeLimits reads a node's own for every node it checks.
    attachments: HashMap<String, Vec<VolumeAttachment>>,
}

/// The CSI objects of a [`Storage`] (NodeVolumeLimits and VolumeBinding read them; none is fine).
#[derive(Clone, Debug, Default)]
pub struct CsiObjects {
    pub nodes: Vec<CSINode>,
    pub drivers: Vec<CSIDriver>,
    pub capacities: Vec<CSIStorageCapacity>,
    pub attachments: Vec<VolumeAttachment>,
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// `seen` is a newer version than `assumed` (resource versions compared as numbers, as the apiserver's versioner).
fn newer(
    seen: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    assumed: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    let version = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
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
        let name =
            |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| meta.name.clone().unwrap_or_default();
        Storage {
            claims: claims
                .into_iter()
                .map(|c| {
                    let namespace = c.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
                    ((namespace, name(&c.metadata)), c)
                })
                .collect(),
            volumes: volumes.into_iter().map(|v| (name(&v.metadata), v)).collect(),
            classes: classes.into_iter().map(|c| (name(&c.metadata), c)).collect(),
            ..Storage::default()
        }
    }

    /// The same store with these CSI objects.
    pub fn with_csi(mut self, csi: CsiObjects) -> Storage {
        self.csi = Box::new(CsiStore {
            nodes: csi.nodes.into_iter().map(|n| (name_of(&n.metadata), n)).collect(),
            drivers: csi.drivers.into_iter().map(|d| (name_of(&d.metadata), d)).collect(),
            capacities: csi.capacities,
            attachments: csi
                .attachments
                .into_iter()
                .fold(HashMap::new(), |mut by_node, attachment| {
                    by_node
                        .entry(attachment.spec.node_name.clone())
                        .or_insert_with(Vec::new)
                        .push(attachment);
                    by_node
                }),
        });
        self
    }

    /// The CSINode of a node (the same name), if any.
    pub fn csi_node(&self, node: &str) -> Option<&CSINode> {
        self.csi.nodes.get(node)
    }

    /// A CSIDriver, if any.
    pub fn csi_driver(&self, name: &str) -> Option<&CSIDriver> {
        self.csi.drivers.get(name)
    }

    /// Every CSIStorageCapacity.
    pub fn capacities(&self) -> &[CSIStorageCapacity] {
        &self.csi.capacities
    }

    /// The VolumeAttachments to a node.
    pub fn attachments_to(&self, node: &str) -> &[VolumeAttachment] {
        self.csi.attachments.get(node).map_or(&[], Vec::as_slice)
    }

    /// Every PersistentVolume, in no particular order.
    pub fn volumes(&self) -> impl Iterator<Item = &PersistentVolume> {
        self.volumes.values()
    }

    /// A claim of a namespace.
    pub fn claim(&self, namespace: &str, name: &str) -> Result<&PersistentVolumeClaim, NotFound> {
        self.claims
            .get(&(namespace.to_string(), name.to_string()))
            .ok_or_else(|| NotFound {
                resource: "persistentvolumeclaim",
                name: name.to_string(),
            })
    }

    /// A PersistentVolume.
    pub fn volume(&self, name: &str) -> Result<&PersistentVolume, NotFound> {
        self.volumes.get(name).ok_or_else(|| NotFound {
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
            self.volumes.insert(name, volume);
        }
    }

    /// Reserve's assumed version of a claim, as [`Storage::assume_volume`].
    pub fn assume_claim(&mut self, claim: PersistentVolumeClaim) {
        let namespace = claim
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let key = (namespace, name_of(&claim.metadata));
        if self
            .claims
            .get(&key)
            .is_none_or(|seen| !newer(&seen.metadata, &claim.metadata))
        {
            self.claims.insert(key, claim);
        }
    }

    /// A StorageClass.
    pub fn class(&self, name: &str) -> Result<&StorageClass, NotFound> {
        self.classes.get(name).ok_or_else(|| NotFound {
            resource: "storageclass.storage.k8s.io",
            name: name.to_string(),
        })
    }
}

/// A claim's class (`GetPersistentVolumeClaimClass`): the beta annotation first, then `spec.storageClassName`.
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
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
pub fn ephemeral_claim_name(
    pod: &k8s_openapi::api::core::v1::Pod,
    volume: &k8s_openapi::api::core::v1::Volume,
) -> String {
    ephemeral_claim_name_of(VolumeOwner::of(pod), volume)
}

/// [`ephemeral_claim_name`] of a pod known by its [`VolumeOwner`].
pub fn ephemeral_claim_name_of(owner: VolumeOwner<'_>, volume: &k8s_openapi::api::core::v1::Volume) -> String {
    format!("{}-{}", owner.name, volume.name)
}

/// Why an ephemeral volume's claim is not the pod's (`ephemeral.VolumeIsForPod`): another namespace, or not
/// controlled by the pod.
pub fn ephemeral_owner_error(
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
pub fn ephemeral_owner_error_of(owner: VolumeOwner<'_>, claim: &PersistentVolumeClaim) -> Option<String> {
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

/// Whether NodeVolumeLimits looks at a volume (claims, ephemeral volumes, migratable in-tree inline volumes).
pub fn is_counted_kind(volume: &Volume) -> bool {
    volume.persistent_volume_claim.is_some()
        || volume.ephemeral.is_some()
        || super::csi_translation::InTreePlugin::of_volume(volume).is_some()
}

/// The volumes whose conflicts VolumeRestrictions checks (`needsRestrictionsCheck`).
pub fn needs_restrictions_check(volume: &Volume) -> bool {
    volume.gce_persistent_disk.is_some()
        || volume.aws_elastic_block_store.is_some()
        || volume.rbd.is_some()
        || volume.iscsi.is_some()
}
