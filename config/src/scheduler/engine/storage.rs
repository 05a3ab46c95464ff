//! The storage objects volume plugins read (PersistentVolumeClaims, PersistentVolumes, StorageClasses), as listers.

// kube-scheduler's volume plugins read these through informer listers; a missing object is a NotFound error whose
// text (`persistentvolumeclaim "x" not found`) becomes the plugin's reason, so the lookups here return that text.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

/// The annotation that names a claim's class before `spec.storageClassName` (still read first, as upstream).
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// PersistentVolumeClaims (by namespace and name), PersistentVolumes and StorageClasses (by name).
#[derive(Clone, Debug, Default)]
pub struct Storage {
    claims: HashMap<(String, String), PersistentVolumeClaim>,
    volumes: HashMap<String, PersistentVolume>,
    classes: HashMap<String, StorageClass>,
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
        }
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
