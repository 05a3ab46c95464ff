//! Pod features the engine does not evaluate: such pods are refused explicitly instead of placed silently wrong.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::pod_info::PodInfo;
use super::snapshot::Snapshot;
use super::status::{Code, Reason, Verdict};

/// A pod feature that needs a kube-scheduler plugin Ruleplane does not implement (or data it lacks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Feature {
    /// `persistentVolumeClaim` or generic `ephemeral` volumes when the snapshot holds no storage objects (with them,
    /// every volume plugin is evaluated and the worker carries out VolumeBinding's Reserve and PreBind).
    PersistentVolumeClaims,
    /// Inline CSI volumes, when the snapshot holds no storage objects (NodeVolumeLimits).
    InlineCsiVolumes,
    /// In-tree disk volumes (gcePersistentDisk, awsElasticBlockStore, azureDisk, cinder, rbd, iscsi, …) when the
    /// snapshot holds no storage objects: NodeVolumeLimits counts their attachments (their conflicts,
    /// VolumeRestrictions, are evaluated when ignored).
    InTreeDiskVolumes,
    /// `spec.resourceClaims` (DynamicResources).
    ResourceClaims,
    /// A pod-affinity `namespaceSelector` while the snapshot has no namespace labels.
    NamespaceSelectorWithoutNamespaces,
}

impl Feature {
    /// Every feature.
    pub const ALL: [Feature; 5] = [
        Feature::PersistentVolumeClaims,
        Feature::InlineCsiVolumes,
        Feature::InTreeDiskVolumes,
        Feature::ResourceClaims,
        Feature::NamespaceSelectorWithoutNamespaces,
    ];

    /// The camelCase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::PersistentVolumeClaims => "persistentVolumeClaims",
            Feature::InlineCsiVolumes => "inlineCsiVolumes",
            Feature::InTreeDiskVolumes => "inTreeDiskVolumes",
            Feature::ResourceClaims => "resourceClaims",
            Feature::NamespaceSelectorWithoutNamespaces => "namespaceSelectorWithoutNamespaces",
        }
    }

    /// The kube-scheduler plugin that would evaluate it (reported as the rejecting plugin).
    pub fn plugin(self) -> &'static str {
        match self {
            Feature::PersistentVolumeClaims => "VolumeBinding",
            Feature::InlineCsiVolumes | Feature::InTreeDiskVolumes => "NodeVolumeLimits",
            Feature::ResourceClaims => "DynamicResources",
            Feature::NamespaceSelectorWithoutNamespaces => "InterPodAffinity",
        }
    }

    /// The reason shown to users.
    pub fn reason(self) -> &'static str {
        match self {
            Feature::PersistentVolumeClaims => {
                "pod uses PersistentVolumeClaims, which need VolumeBinding and NodeVolumeLimits (not evaluated by Ruleplane)"
            }
            Feature::InlineCsiVolumes => {
                "pod uses inline CSI volumes, which need NodeVolumeLimits (not evaluated by Ruleplane)"
            }
            Feature::InTreeDiskVolumes => {
                "pod uses in-tree disk volumes, which need NodeVolumeLimits (not evaluated by Ruleplane)"
            }
            Feature::ResourceClaims => {
                "pod uses resource claims, which need DynamicResources (not evaluated by Ruleplane)"
            }
            Feature::NamespaceSelectorWithoutNamespaces => {
                "pod affinity uses a namespaceSelector, which needs namespace labels (not in Ruleplane's snapshot)"
            }
        }
    }
}

/// The features the pod needs that the engine cannot evaluate, in `Feature::ALL` order.
pub(crate) fn needed_features(pod: &PodInfo, snapshot: &Snapshot) -> Vec<Feature> {
    let mut needed = Vec::new();
    let spec = pod.pod().spec.as_ref();
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    // With storage objects every volume plugin is evaluated (the worker binds the claims at PreBind).
    if snapshot.storage().is_none()
        && volumes
            .iter()
            .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
    {
        needed.push(Feature::PersistentVolumeClaims);
    }
    if snapshot.storage().is_none() && volumes.iter().any(|v| v.csi.is_some()) {
        needed.push(Feature::InlineCsiVolumes);
    }
    let in_tree = |v: &k8s_openapi::api::core::v1::Volume| {
        v.gce_persistent_disk.is_some()
            || v.aws_elastic_block_store.is_some()
            || v.azure_disk.is_some()
            || v.cinder.is_some()
            || v.rbd.is_some()
            || v.iscsi.is_some()
            || v.portworx_volume.is_some()
            || v.vsphere_volume.is_some()
    };
    if snapshot.storage().is_none() && volumes.iter().any(in_tree) {
        needed.push(Feature::InTreeDiskVolumes);
    }
    if spec
        .and_then(|s| s.resource_claims.as_deref())
        .is_some_and(|claims| !claims.is_empty())
    {
        needed.push(Feature::ResourceClaims);
    }
    if snapshot.namespaces().is_none() && needs_namespace_labels(pod, snapshot) {
        needed.push(Feature::NamespaceSelectorWithoutNamespaces);
    }
    needed
}

/// Whether evaluating pod affinity for this pod reads namespace labels: its own terms' namespace selectors, or
/// existing pods' terms' selectors matched against this pod's namespace.
fn needs_namespace_labels(pod: &PodInfo, snapshot: &Snapshot) -> bool {
    pod.needs_namespace_labels || snapshot.has_pods_with_namespace_selectors()
}

/// The verdict for features that are needed and not ignored, if any: one reason per feature.
pub(crate) fn unsupported_verdict(needed: &[Feature]) -> Option<(&'static str, Verdict)> {
    let first = needed.first()?;
    Some((
        first.plugin(),
        Verdict {
            code: Code::UnschedulableAndUnresolvable,
            reasons: needed.iter().map(|f| Reason::Borrowed(f.reason())).collect(),
        },
    ))
}
