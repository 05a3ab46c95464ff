//! NodeVolumeLimits: a node's CSI drivers attach at most `allocatable.count` volumes each (its CSINode).

// kube-scheduler's `nodevolumelimits/csi.go`. Volumes are counted as `<driver>/<handle>`: a bound claim's
// PersistentVolume (its CSI source, or an in-tree source translated when the node's CSINode has the migration on),
// an unbound claim's class provisioner with a handle unique to the claim, a migrated in-tree inline volume. The
// volumes of the node's pods and its VolumeAttachments are attached already; a new volume already attached does
// not count again. From v1.37 a new volume's driver that opts in with its CSIDriver's `preventPodSchedulingIfMissing`
// must be on the node's CSINode, limit or not. Reads the storage objects, so it skips pods when the snapshot holds
// none.
//
// Where upstream fails the whole cycle with an error (a volume of the pod that does not translate, an ephemeral
// claim the pod does not own, a claim without a name), the node is rejected UnschedulableAndUnresolvable with the
// same text: in the default profile VolumeBinding's PreFilter rejects the last two first.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::CSINode;

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::behaviour::Behaviour;
use crate::scheduler::engine::csi_translation::{
    InTreePlugin, inline_handle, migrated_on_node, persistent_volume_handle,
};
use crate::scheduler::engine::pod_info::PodInfo;
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;
use crate::scheduler::engine::storage::{
    Storage, StorageVolume, VolumeOwner, claim_class, ephemeral_claim_name_of, ephemeral_owner_error_of,
    is_counted_kind,
};

/// The reason for nodes whose driver limit the pod's new volumes would exceed.
pub const REASON: &str = "node(s) exceed max volume count";

/// The reason for a node without an opted-in driver of the pod's new volumes (`VolumeLimitScaling`, v1.37).
fn driver_not_installed(driver: &str) -> String {
    format!("{driver} CSI driver is not installed on the node")
}

/// Stands for upstream's per-process random prefix of an unbound claim's handle (it only has to differ from real
/// handles).
const UNBOUND_HANDLE_PREFIX: &str = "ruleplane-unbound-claim";

/// The plugin.
#[derive(Debug)]
pub struct NodeVolumeLimits {
    /// Portworx counts as migrated only when the CSINode's annotation lists it (v1.35; from v1.36 always).
    portworx_by_annotation: bool,
    /// Opted-in drivers must be on the node's CSINode (v1.37's `VolumeLimitScaling`).
    opted_in_drivers_required: bool,
}

impl NodeVolumeLimits {
    /// The plugin as `behaviour`'s kube-scheduler filters.
    pub fn new(behaviour: Behaviour) -> NodeVolumeLimits {
        NodeVolumeLimits {
            portworx_by_annotation: !behaviour.portworx_migrates_without_annotation(),
            opted_in_drivers_required: behaviour.requires_opted_in_csi_drivers_on_node(),
        }
    }
}

struct Check<'a> {
    pod: &'a PodInfo,
    storage: &'a Storage,
    portworx_by_annotation: bool,
    opted_in_drivers_required: bool,
    /// The pod's attachable volumes, per [`Migration::case`] of a node's CSINode (all that they depend on), made
    /// at the first node of each case rather than for every node.
    new_volumes: [OnceLock<Result<HashMap<String, String>, Verdict>>; 3],
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let Some(storage) = cycle.snapshot.storage() else {
            return PreFilter::Skip;
        };
        let counted = |volume: &StorageVolume| volume.inline().is_none_or(is_counted_kind);
        if !cycle.pod.storage_volumes.iter().any(counted) {
            return PreFilter::Skip;
        }
        PreFilter::run(Check {
            pod: cycle.pod,
            storage,
            portworx_by_annotation: self.portworx_by_annotation,
            opted_in_drivers_required: self.opted_in_drivers_required,
            new_volumes: Default::default(),
        })
    }
}

/// Which in-tree plugins a node's CSINode has migrated, as `isCSIMigrationOn` sees it.
#[derive(Clone, Copy)]
struct Migration<'a> {
    csi_node: Option<&'a CSINode>,
    /// v1.35: Portworx only when the CSINode's annotation lists it.
    portworx_by_annotation: bool,
}

impl Migration<'_> {
    /// GCE PD, EBS, Azure Disk and Cinder whenever the node has a CSINode; Portworx too, but before v1.36 only when
    /// its CSINode lists the plugin as migrated; never Azure File or vSphere.
    fn on(self, plugin: InTreePlugin) -> bool {
        let Some(csi_node) = self.csi_node else { return false };
        match plugin {
            InTreePlugin::GcePd | InTreePlugin::AwsEbs | InTreePlugin::AzureDisk | InTreePlugin::Cinder => true,
            InTreePlugin::Portworx => !self.portworx_by_annotation || portworx_migrated(csi_node),
            InTreePlugin::AzureFile | InTreePlugin::VSphere => false,
        }
    }

    /// What [`Migration::on`] answers depend on: no CSINode, one, one with Portworx migrated.
    fn case(self) -> usize {
        match self.csi_node {
            None => 0,
            Some(_) if self.on(InTreePlugin::Portworx) => 2,
            Some(_) => 1,
        }
    }
}

fn portworx_migrated(csi_node: &CSINode) -> bool {
    migrated_on_node(InTreePlugin::Portworx, Some(csi_node))
}

/// A pod's attachable volumes (`filterAttachableVolumes`): unique name → driver. For the pod being scheduled a
/// missing claim or a volume that cannot be counted rejects the node; another pod's are left out.
fn attachable_volumes(
    volumes: &[StorageVolume],
    owner: VolumeOwner<'_>,
    storage: &Storage,
    migration: Migration<'_>,
    new_pod: bool,
    out: &mut HashMap<String, String>,
) -> Result<(), Verdict> {
    let namespace = owner.namespace;
    for volume in volumes {
        let (claim_name, ephemeral) = match volume {
            StorageVolume::Claim(claim) => (claim.clone(), false),
            StorageVolume::Ephemeral(name) => (ephemeral_claim_name_of(owner, name), true),
            StorageVolume::Inline(volume) => {
                if let Some(plugin) = InTreePlugin::of_volume(volume)
                    && migration.on(plugin)
                {
                    match inline_handle(volume) {
                        Ok(Some(handle)) => insert(out, plugin.driver(), &handle),
                        Ok(None) => {}
                        Err(error) if new_pod => {
                            return Err(Verdict::unresolvable(format!(
                                "converting volume({}) from inline to csi: {error}",
                                volume.name
                            )));
                        }
                        Err(_) => {}
                    }
                }
                continue;
            }
        };
        if claim_name.is_empty() {
            if new_pod {
                return Err(Verdict::unresolvable("PersistentVolumeClaim had no name"));
            }
            continue;
        }
        let claim = match storage.claim(namespace, &claim_name) {
            Ok(claim) => claim,
            Err(not_found) if new_pod => {
                return Err(Verdict::unresolvable(format!(
                    "looking up PVC {namespace}/{claim_name}: {not_found}"
                )));
            }
            Err(_) => continue,
        };
        if ephemeral && let Some(error) = ephemeral_owner_error_of(owner, claim) {
            if new_pod {
                return Err(Verdict::unresolvable(error));
            }
            continue;
        }
        if let Some((driver, handle)) = claim_driver(storage, migration, namespace, claim) {
            insert(out, &driver, &handle);
        }
    }
    Ok(())
}

/// Records a volume under its unique name `<driver>/<handle>`.
fn insert(out: &mut HashMap<String, String>, driver: &str, handle: &str) {
    out.insert(format!("{driver}/{handle}"), driver.to_string());
}

/// A bound claim's driver and handle (its PersistentVolume's CSI source, or the translated in-tree source); an
/// unbound claim's (or one whose volume is missing) from its class (`getCSIDriverInfo`).
fn claim_driver(
    storage: &Storage,
    migration: Migration<'_>,
    namespace: &str,
    claim: &PersistentVolumeClaim,
) -> Option<(String, String)> {
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default();
    let volume = (!volume_name.is_empty())
        .then(|| storage.volume(volume_name).ok())
        .flatten();
    let Some(volume) = volume else {
        return class_driver(storage, migration, namespace, claim);
    };
    if let Some(csi) = volume.spec.as_ref().and_then(|s| s.csi.as_ref()) {
        return Some((csi.driver.clone(), csi.volume_handle.clone()));
    }
    let plugin = InTreePlugin::of_persistent_volume(volume)?;
    if !migration.on(plugin) {
        return None;
    }
    let handle = persistent_volume_handle(volume).ok().flatten()?;
    Some((plugin.driver().to_string(), handle))
}

/// `getCSIDriverInfoFromSC`: the class's provisioner (translated when it is a migrated in-tree one) and a handle
/// unique to the claim; nothing without a class.
fn class_driver(
    storage: &Storage,
    migration: Migration<'_>,
    namespace: &str,
    claim: &PersistentVolumeClaim,
) -> Option<(String, String)> {
    let class_name = claim_class(claim);
    if class_name.is_empty() {
        return None;
    }
    let class = storage.class(class_name).ok()?;
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let handle = format!("{UNBOUND_HANDLE_PREFIX}-{namespace}/{name}");
    match InTreePlugin::by_name(&class.provisioner) {
        Some(plugin) if !migration.on(plugin) => None,
        Some(plugin) => Some((plugin.driver().to_string(), handle)),
        None => Some((class.provisioner.clone(), handle)),
    }
}

impl Check<'_> {
    fn verdict(&self, node: &NodeInfo) -> Result<(), Verdict> {
        let csi_node = self.storage.csi_node(node.name());
        let migration = Migration {
            csi_node,
            portworx_by_annotation: self.portworx_by_annotation,
        };
        let new = self.new_volumes[migration.case()]
            .get_or_init(|| {
                let mut new = HashMap::new();
                let (volumes, owner) = (&self.pod.storage_volumes, self.pod.volume_owner());
                attachable_volumes(volumes, owner, self.storage, migration, true, &mut new).map(|()| new)
            })
            .as_ref()
            .map_err(Clone::clone)?;
        if new.is_empty() {
            return Ok(());
        }
        if self.opted_in_drivers_required
            && let Some(driver) = self.missing_opted_in_driver(new.values(), csi_node)
        {
            return Err(Verdict::unschedulable(driver_not_installed(driver)));
        }
        let limits: BTreeMap<&str, i64> = csi_node
            .map(|c| c.spec.drivers.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|d| Some((d.name.as_str(), i64::from(d.allocatable.as_ref()?.count?))))
            .collect();
        if limits.is_empty() {
            return Ok(());
        }
        let mut attached = HashMap::new();
        for other in node.pods().iter().filter(|p| !p.storage_volumes.is_empty()) {
            // Another pod's volumes that cannot be counted are left out (upstream fails the cycle on some).
            let _ = attachable_volumes(
                &other.storage_volumes,
                other.volume_owner(),
                self.storage,
                migration,
                false,
                &mut attached,
            );
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for driver in attached.values() {
            *attached_count.entry(driver.as_str()).or_default() += 1;
        }
        for (volume, driver) in self.attachments_of(node.name()) {
            if !attached.contains_key(&volume) {
                *attached_count.entry(driver).or_default() += 1;
            }
        }
        // A new volume already attached does not count again.
        let mut new_count: HashMap<&str, i64> = HashMap::new();
        for (volume, driver) in new {
            if !attached.contains_key(volume) {
                *new_count.entry(driver.as_str()).or_default() += 1;
            }
        }
        for (driver, count) in new_count {
            if let Some(limit) = limits.get(driver)
                && attached_count.get(driver).copied().unwrap_or(0) + count > *limit
            {
                return Err(Verdict::unschedulable(REASON));
            }
        }
        Ok(())
    }

    /// The first (by name) of `drivers` whose CSIDriver sets `preventPodSchedulingIfMissing` and that the node's
    /// CSINode does not list (`checkCSIDriverOnNode`; no CSINode lists none). A driver without a CSIDriver may not
    /// be a CSI driver at all and passes. Upstream walks a map, so with two such drivers missing its text names
    /// either; the engine names the first.
    fn missing_opted_in_driver<'d>(
        &self,
        drivers: impl Iterator<Item = &'d String>,
        csi_node: Option<&CSINode>,
    ) -> Option<&'d str> {
        let on_node = |driver: &str| csi_node.is_some_and(|c| c.spec.drivers.iter().any(|d| d.name == driver));
        let opted_in = |driver: &str| {
            self.storage
                .csi_driver(driver)
                .and_then(|d| d.spec.prevent_pod_scheduling_if_missing)
                .unwrap_or(false)
        };
        drivers
            .map(String::as_str)
            .filter(|driver| opted_in(driver) && !on_node(driver))
            .min()
    }

    /// The node's VolumeAttachments of CSI PersistentVolumes (`getNodeVolumeAttachmentInfo`): unique name → driver.
    fn attachments_of<'s>(&'s self, node: &'s str) -> impl Iterator<Item = (String, &'s str)> + 's {
        self.storage.attachments_to(node).filter_map(move |attachment| {
            let spec = &attachment.spec;
            if spec.attacher.is_empty() {
                return None;
            }
            let volume = self
                .storage
                .volume(spec.source.persistent_volume_name.as_deref()?)
                .ok()?;
            let csi = volume.spec.as_ref()?.csi.as_ref()?;
            Some((
                format!("{}/{}", spec.attacher, csi.volume_handle),
                spec.attacher.as_str(),
            ))
        })
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        self.verdict(node).err()
    }
}
