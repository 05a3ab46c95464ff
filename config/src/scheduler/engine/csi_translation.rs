//! csi-translation-lib's in-tree → CSI mapping (plugin and driver names, volume handles, zone topology), as the scheduler reads it.

// k8s.io/csi-translation-lib@v0.35.4 `plugins/`: the seven in-tree plugins with a CSI migration (GCE PD, AWS EBS,
// Azure Disk, Azure File, Cinder, vSphere, Portworx). NodeVolumeLimits counts a migrated volume under its CSI
// driver with the handle the translation gives it; only the handle rules of the plugins whose migration
// NodeVolumeLimits can see on (`isCSIMigrationOn`: GCE PD, EBS, Azure Disk, Cinder, Portworx) are needed.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, Volume};
use k8s_openapi::api::storage::v1::CSINode;

/// An in-tree plugin with a CSI migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InTreePlugin {
    GcePd,
    AwsEbs,
    AzureDisk,
    AzureFile,
    Cinder,
    VSphere,
    Portworx,
}

/// Every plugin, in csi-translation-lib's order.
const ALL: [InTreePlugin; 7] = [
    InTreePlugin::GcePd,
    InTreePlugin::AwsEbs,
    InTreePlugin::Cinder,
    InTreePlugin::AzureDisk,
    InTreePlugin::AzureFile,
    InTreePlugin::VSphere,
    InTreePlugin::Portworx,
];

/// `v1.MigratedPluginsAnnotationKey`: the in-tree plugins a node's CSINode says are migrated, comma-separated.
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";

/// GCE PD's placeholder for a project or zone it does not know.
const UNSPECIFIED: &str = "UNSPECIFIED";

impl InTreePlugin {
    /// The in-tree plugin's name (`kubernetes.io/gce-pd`, ...), also the provisioner of its StorageClasses.
    pub fn name(self) -> &'static str {
        match self {
            InTreePlugin::GcePd => "kubernetes.io/gce-pd",
            InTreePlugin::AwsEbs => "kubernetes.io/aws-ebs",
            InTreePlugin::AzureDisk => "kubernetes.io/azure-disk",
            InTreePlugin::AzureFile => "kubernetes.io/azure-file",
            InTreePlugin::Cinder => "kubernetes.io/cinder",
            InTreePlugin::VSphere => "kubernetes.io/vsphere-volume",
            InTreePlugin::Portworx => "kubernetes.io/portworx-volume",
        }
    }

    /// The CSI driver it migrates to.
    pub fn driver(self) -> &'static str {
        match self {
            InTreePlugin::GcePd => "pd.csi.storage.gke.io",
            InTreePlugin::AwsEbs => "ebs.csi.aws.com",
            InTreePlugin::AzureDisk => "disk.csi.azure.com",
            InTreePlugin::AzureFile => "file.csi.azure.com",
            InTreePlugin::Cinder => "cinder.csi.openstack.org",
            InTreePlugin::VSphere => "csi.vsphere.vmware.com",
            InTreePlugin::Portworx => "pxd.portworx.com",
        }
    }

    /// The plugin of an in-tree name (`IsMigratableIntreePluginByName`).
    pub(crate) fn by_name(name: &str) -> Option<InTreePlugin> {
        ALL.into_iter().find(|p| p.name() == name)
    }

    /// The plugin of an inline volume (`IsInlineMigratable`).
    pub(crate) fn of_volume(volume: &Volume) -> Option<InTreePlugin> {
        if volume.gce_persistent_disk.is_some() {
            Some(InTreePlugin::GcePd)
        } else if volume.aws_elastic_block_store.is_some() {
            Some(InTreePlugin::AwsEbs)
        } else if volume.cinder.is_some() {
            Some(InTreePlugin::Cinder)
        } else if volume.azure_disk.is_some() {
            Some(InTreePlugin::AzureDisk)
        } else if volume.azure_file.is_some() {
            Some(InTreePlugin::AzureFile)
        } else if volume.vsphere_volume.is_some() {
            Some(InTreePlugin::VSphere)
        } else if volume.portworx_volume.is_some() {
            Some(InTreePlugin::Portworx)
        } else {
            None
        }
    }

    /// The plugin of a PersistentVolume's source (`IsPVMigratable`).
    pub(crate) fn of_persistent_volume(volume: &PersistentVolume) -> Option<InTreePlugin> {
        let spec = volume.spec.as_ref()?;
        if spec.gce_persistent_disk.is_some() {
            Some(InTreePlugin::GcePd)
        } else if spec.aws_elastic_block_store.is_some() {
            Some(InTreePlugin::AwsEbs)
        } else if spec.cinder.is_some() {
            Some(InTreePlugin::Cinder)
        } else if spec.azure_disk.is_some() {
            Some(InTreePlugin::AzureDisk)
        } else if spec.azure_file.is_some() {
            Some(InTreePlugin::AzureFile)
        } else if spec.vsphere_volume.is_some() {
            Some(InTreePlugin::VSphere)
        } else if spec.portworx_volume.is_some() {
            Some(InTreePlugin::Portworx)
        } else {
            None
        }
    }
}

/// The CSI volume handle of an inline volume of a plugin NodeVolumeLimits counts
/// (`TranslateInTreeInlineVolumeToCSI`); `Ok(None)` for plugins it never counts. The error is the library's.
pub(crate) fn inline_handle(volume: &Volume) -> Result<Option<String>, String> {
    if let Some(pd) = &volume.gce_persistent_disk {
        return Ok(Some(format!(
            "projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{}",
            pd.pd_name
        )));
    }
    if let Some(ebs) = &volume.aws_elastic_block_store {
        return ebs_volume_id(&ebs.volume_id)
            .map(Some)
            .map_err(|e| format!("failed to translate Kubernetes ID to EBS Volume ID {e}"));
    }
    if let Some(disk) = &volume.azure_disk {
        check_azure_kind(disk.kind.as_deref())?;
        return Ok(Some(disk.disk_uri.clone()));
    }
    if let Some(cinder) = &volume.cinder {
        return Ok(Some(cinder.volume_id.clone()));
    }
    if let Some(portworx) = &volume.portworx_volume {
        return Ok(Some(portworx.volume_id.clone()));
    }
    Ok(None)
}

/// The CSI volume handle of an in-tree PersistentVolume of a plugin NodeVolumeLimits counts
/// (`TranslateInTreePVToCSI`); `Ok(None)` for the others.
pub(crate) fn persistent_volume_handle(volume: &PersistentVolume) -> Result<Option<String>, String> {
    let Some(spec) = volume.spec.as_ref() else {
        return Ok(None);
    };
    if let Some(pd) = &spec.gce_persistent_disk {
        let labels = volume.metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str).unwrap_or_default();
        let mut zones_label = label("failure-domain.beta.kubernetes.io/zone");
        if zones_label.is_empty() {
            zones_label = label("topology.kubernetes.io/zone");
        }
        let zones: Vec<&str> = zones_label.split("__").collect();
        let handle = if zones.len() == 1 && !zones[0].is_empty() {
            format!("projects/{UNSPECIFIED}/zones/{}/disks/{}", zones[0], pd.pd_name)
        } else if zones.len() > 1 {
            let region = gce_region(&zones).map_err(|e| format!("failed to get region from zones: {e}"))?;
            format!("projects/{UNSPECIFIED}/regions/{region}/disks/{}", pd.pd_name)
        } else {
            format!("projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{}", pd.pd_name)
        };
        return Ok(Some(handle));
    }
    if let Some(ebs) = &spec.aws_elastic_block_store {
        return ebs_volume_id(&ebs.volume_id)
            .map(Some)
            .map_err(|e| format!("failed to translate Kubernetes ID to EBS Volume ID {e}"));
    }
    if let Some(disk) = &spec.azure_disk {
        check_azure_kind(disk.kind.as_deref())?;
        return Ok(Some(disk.disk_uri.clone()));
    }
    if let Some(cinder) = &spec.cinder {
        return Ok(Some(cinder.volume_id.clone()));
    }
    if let Some(portworx) = &spec.portworx_volume {
        return Ok(Some(portworx.volume_id.clone()));
    }
    Ok(None)
}

/// Only managed Azure disks migrate.
fn check_azure_kind(kind: Option<&str>) -> Result<(), String> {
    match kind {
        Some(kind) if !kind.eq_ignore_ascii_case("Managed") => {
            Err(format!("kind({kind}) is not supported in csi migration"))
        }
        _ => Ok(()),
    }
}

/// `KubernetesVolumeIDToEBSVolumeID`: `aws://<zone>/<vol-…>` or a bare ID.
fn ebs_volume_id(id: &str) -> Result<String, String> {
    let Some(rest) = id.strip_prefix("aws://") else {
        return Ok(id.to_string());
    };
    // The URL's path: what follows the host.
    let path = rest.find('/').map_or("", |at| &rest[at..]);
    let volume = path.trim_matches('/');
    if volume.starts_with("vol-") && !volume.contains('/') {
        Ok(volume.to_string())
    } else {
        Err(format!("Invalid format for AWS volume ({id})"))
    }
}

/// `gceGetRegionFromZones`: every zone `{locale}-{region}-{zone}` in one region.
fn gce_region(zones: &[&str]) -> Result<String, String> {
    let mut regions = std::collections::BTreeSet::new();
    for zone in zones {
        let parts: Vec<&str> = zone.split('-').collect();
        if parts.len() != 3 {
            return Err(format!(
                "zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {zone}"
            ));
        }
        regions.insert(parts[..2].join("-"));
    }
    match regions.len() {
        1 => Ok(regions.into_iter().next().unwrap_or_default()),
        _ => Err(format!("multiple or no regions gotten from zones, got: {regions:?}")),
    }
}

/// `csiplugins.<Plugin>TopologyKey`: the zone key a plugin's CSI driver labels nodes with, for the plugins whose
/// translation moves a volume's zone topology onto it (`translateTopologyFromInTreeToCSI`: GCE PD, AWS EBS, Cinder).
fn csi_topology_key(plugin: InTreePlugin) -> Option<&'static str> {
    match plugin {
        InTreePlugin::GcePd => Some("topology.gke.io/zone"),
        InTreePlugin::AwsEbs => Some("topology.ebs.csi.aws.com/zone"),
        InTreePlugin::Cinder => Some("topology.cinder.csi.openstack.org/zone"),
        _ => None,
    }
}

/// `isPluginMigratedToCSIOnNode`: the node's CSINode lists the plugin in its migrated-plugins annotation.
pub(crate) fn migrated_on_node(plugin: InTreePlugin, csi_node: Option<&CSINode>) -> bool {
    csi_node
        .and_then(|c| c.metadata.annotations.as_ref())
        .and_then(|a| a.get(MIGRATED_PLUGINS_ANNOTATION))
        .is_some_and(|list| list.split(',').any(|p| p == plugin.name()))
}

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";

/// VolumeBinding's `tryTranslatePVToCSI`, as far as a node affinity check sees it: a bound in-tree volume whose
/// plugin is migrated on the node (GCE PD, AWS EBS, Cinder: the ones whose translation changes topology) is checked
/// with its zone requirement under the CSI driver's key (or, without one, a requirement made from its zone label,
/// `a__b` for several zones), and a beta region key becomes the GA one. Other volumes are returned as they are. A
/// volume whose handle does not translate is left as it is (upstream fails the check with the translation error).
pub(crate) fn translated_for_node<'v>(
    volume: &'v PersistentVolume,
    csi_node: Option<&CSINode>,
) -> Cow<'v, PersistentVolume> {
    let Some(plugin) = InTreePlugin::of_persistent_volume(volume) else {
        return Cow::Borrowed(volume);
    };
    let Some(key) = csi_topology_key(plugin) else {
        return Cow::Borrowed(volume);
    };
    if !migrated_on_node(plugin, csi_node) || persistent_volume_handle(volume).is_err() {
        return Cow::Borrowed(volume);
    }
    let mut translated = volume.clone();
    translate_topology(&mut translated, key);
    Cow::Owned(translated)
}

fn terms(volume: &mut PersistentVolume) -> Option<&mut Vec<NodeSelectorTerm>> {
    let required = volume.spec.as_mut()?.node_affinity.as_mut()?.required.as_mut()?;
    Some(&mut required.node_selector_terms)
}

fn affinity_has_key(volume: &PersistentVolume, key: &str) -> bool {
    topology_values(volume, key).is_some()
}

/// The values of `key` in the volume's node affinity, `None` when no requirement names it.
fn topology_values(volume: &PersistentVolume, key: &str) -> Option<Vec<String>> {
    let required = volume.spec.as_ref()?.node_affinity.as_ref()?.required.as_ref()?;
    let mut found = false;
    let mut values = std::collections::BTreeSet::new();
    for term in &required.node_selector_terms {
        for requirement in term.match_expressions.iter().flatten().filter(|r| r.key == key) {
            found = true;
            values.extend(requirement.values.iter().flatten().cloned());
        }
    }
    found.then(|| values.into_iter().collect())
}

fn replace_key(volume: &mut PersistentVolume, old: &str, new: &str) {
    for term in terms(volume).into_iter().flatten() {
        for requirement in term.match_expressions.iter_mut().flatten() {
            if requirement.key == old {
                requirement.key = new.to_string();
            }
        }
    }
}

/// `translateTopologyFromInTreeToCSI`.
fn translate_topology(volume: &mut PersistentVolume, csi_key: &str) {
    let labels = volume.metadata.labels.clone().unwrap_or_default();
    // `getTopologyLabel`: GA keys in the affinity, beta keys there, then the volume's own labels, else GA.
    let (zone, region) = if affinity_has_key(volume, ZONE) {
        (ZONE, REGION)
    } else if affinity_has_key(volume, BETA_ZONE) {
        (BETA_ZONE, BETA_REGION)
    } else if labels.contains_key(ZONE) {
        (ZONE, REGION)
    } else if labels.contains_key(BETA_ZONE) {
        (BETA_ZONE, BETA_REGION)
    } else {
        (ZONE, REGION)
    };
    if topology_values(volume, zone).is_some_and(|values| !values.is_empty()) {
        replace_key(volume, zone, csi_key);
    } else if let Some(label) = labels.get(zone) {
        add_topology(volume, csi_key, label.split("__"));
    }
    if region == BETA_REGION && topology_values(volume, region).is_some_and(|values| !values.is_empty()) {
        replace_key(volume, region, REGION);
    }
}

/// `addTopology`: `key In zones` added to every term (one term made when there is none); no valid zone, no change.
fn add_topology<'z>(volume: &mut PersistentVolume, key: &str, zones: impl Iterator<Item = &'z str>) {
    let zones: std::collections::BTreeSet<String> = zones
        .map(str::trim)
        .filter(|z| !z.is_empty())
        .map(str::to_string)
        .collect();
    if zones.is_empty() {
        return;
    }
    let spec = volume.spec.get_or_insert_with(Default::default);
    let required = spec
        .node_affinity
        .get_or_insert_with(Default::default)
        .required
        .get_or_insert_with(Default::default);
    if required.node_selector_terms.is_empty() {
        required.node_selector_terms.push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        term.match_expressions
            .get_or_insert_with(Vec::new)
            .push(NodeSelectorRequirement {
                key: key.to_string(),
                operator: "In".to_string(),
                values: Some(zones.iter().cloned().collect()),
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pv(value: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn gce_handles_carry_the_zone_or_region_of_the_volume_labels() {
        let zonal = pv(
            json!({"metadata": {"name": "a", "labels": {"topology.kubernetes.io/zone": "us-east1-b"}},
                              "spec": {"gcePersistentDisk": {"pdName": "d"}}}),
        );
        assert_eq!(
            persistent_volume_handle(&zonal).unwrap().as_deref(),
            Some("projects/UNSPECIFIED/zones/us-east1-b/disks/d")
        );
        let regional = pv(json!({"metadata": {"name": "a",
                                  "labels": {"failure-domain.beta.kubernetes.io/zone": "us-east1-b__us-east1-c"}},
                                 "spec": {"gcePersistentDisk": {"pdName": "d"}}}));
        assert_eq!(
            persistent_volume_handle(&regional).unwrap().as_deref(),
            Some("projects/UNSPECIFIED/regions/us-east1/disks/d")
        );
        let unlabelled = pv(json!({"metadata": {"name": "a"}, "spec": {"gcePersistentDisk": {"pdName": "d"}}}));
        assert_eq!(
            persistent_volume_handle(&unlabelled).unwrap().as_deref(),
            Some("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d")
        );
    }

    #[test]
    fn ebs_ids_lose_their_url_form_and_bad_ones_are_errors() {
        assert_eq!(ebs_volume_id("aws://us-east-1a/vol-0123").unwrap(), "vol-0123");
        assert_eq!(ebs_volume_id("vol-0123").unwrap(), "vol-0123");
        assert_eq!(
            ebs_volume_id("aws://us-east-1a/disk-1").unwrap_err(),
            "Invalid format for AWS volume (aws://us-east-1a/disk-1)"
        );
    }

    #[test]
    fn only_managed_azure_disks_translate() {
        let volume: Volume = serde_json::from_value(
            json!({"name": "v", "azureDisk": {"diskName": "d", "diskURI": "uri", "kind": "Dedicated"}}),
        )
        .unwrap();
        assert_eq!(
            inline_handle(&volume).unwrap_err(),
            "kind(Dedicated) is not supported in csi migration"
        );
        assert_eq!(InTreePlugin::of_volume(&volume), Some(InTreePlugin::AzureDisk));
        assert_eq!(InTreePlugin::AzureDisk.driver(), "disk.csi.azure.com");
    }
}
