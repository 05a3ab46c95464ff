//! VolumeRestrictions: in-tree disks already in use on the node, and ReadWriteOncePod claims in use anywhere.

// kube-scheduler v1.35's `volumerestrictions` plugin. The disk check needs only the pods on the node; the
// ReadWriteOncePod check reads the pod's claims, so it runs only when the snapshot holds storage objects (without
// them the pod's claims are refused or ignored by `features.rs`, as before).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Volume;

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;
use crate::scheduler::engine::storage::{StorageVolume, needs_restrictions_check as needs_check};

/// The reason for nodes where an in-tree disk of the pod is in use.
pub const DISK_CONFLICT: &str = "node(s) had no available disk";
/// The reason when a ReadWriteOncePod claim of the pod is used by another pod.
pub const READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";

/// The plugin.
#[derive(Debug)]
pub struct VolumeRestrictions;

struct Check<'a> {
    volumes: &'a [Volume],
    /// ReadWriteOncePod claims of the pod that a placed pod already uses (counted once per claim).
    claims_in_use: usize,
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let pod = cycle.pod;
        let volumes = pod
            .pod()
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_deref())
            .unwrap_or_default();
        let mut read_write_once_pod = BTreeSet::new();
        if let Some(storage) = cycle.snapshot.storage() {
            for claim in volumes.iter().filter_map(|v| v.persistent_volume_claim.as_ref()) {
                let found = match storage.claim(&pod.namespace, &claim.claim_name) {
                    Ok(found) => found,
                    Err(not_found) => return PreFilter::Reject(Verdict::unresolvable(not_found.to_string())),
                };
                let modes = found.spec.as_ref().and_then(|s| s.access_modes.as_deref());
                if modes.unwrap_or_default().iter().any(|m| m == READ_WRITE_ONCE_POD) {
                    read_write_once_pod.insert(claim.claim_name.as_str());
                }
            }
        }
        let claims_in_use = read_write_once_pod
            .iter()
            .filter(|claim| cycle.snapshot.is_claim_used(&pod.namespace, claim))
            .count();
        if claims_in_use == 0 && !volumes.iter().any(needs_check) {
            return PreFilter::Skip;
        }
        PreFilter::run(Check { volumes, claims_in_use })
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        let conflict = self.volumes.iter().filter(|v| needs_check(v)).any(|volume| {
            node.pods()
                .iter()
                .any(|other| conflicts(volume, other.storage_volumes.iter().filter_map(StorageVolume::inline)))
        });
        if conflict {
            return Some(Verdict::unschedulable(DISK_CONFLICT));
        }
        (self.claims_in_use > 0).then(|| Verdict::unschedulable(READ_WRITE_ONCE_POD_CONFLICT))
    }
}

/// Whether `volume` conflicts with a volume of `pod` (`isVolumeConflict`): the same GCE PD unless both are
/// read-only, the same EBS volume ID, the same iSCSI IQN unless both are read-only, or the same RBD pool and image
/// with a shared monitor unless both are read-only.
pub(crate) fn conflicts<'a>(volume: &Volume, mut existing: impl Iterator<Item = &'a Volume>) -> bool {
    existing.any(|other| {
        if let (Some(disk), Some(theirs)) = (&volume.gce_persistent_disk, &other.gce_persistent_disk)
            && disk.pd_name == theirs.pd_name
            && !(disk.read_only.unwrap_or(false) && theirs.read_only.unwrap_or(false))
        {
            return true;
        }
        if let (Some(ebs), Some(theirs)) = (&volume.aws_elastic_block_store, &other.aws_elastic_block_store)
            && ebs.volume_id == theirs.volume_id
        {
            return true;
        }
        if let (Some(iscsi), Some(theirs)) = (&volume.iscsi, &other.iscsi)
            && iscsi.iqn == theirs.iqn
            && !(iscsi.read_only.unwrap_or(false) && theirs.read_only.unwrap_or(false))
        {
            return true;
        }
        if let (Some(rbd), Some(theirs)) = (&volume.rbd, &other.rbd)
            && rbd.monitors.iter().any(|m| theirs.monitors.contains(m))
            && rbd.pool == theirs.pool
            && rbd.image == theirs.image
            && !(rbd.read_only.unwrap_or(false) && theirs.read_only.unwrap_or(false))
        {
            return true;
        }
        false
    })
}
