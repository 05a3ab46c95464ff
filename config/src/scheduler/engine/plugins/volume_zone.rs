//! VolumeZone: the zone and region labels of the pod's bound PersistentVolumes must match the node's.

// kube-scheduler v1.35's `volumezone` plugin. It reads claims, volumes and classes, so it skips pods when the
// snapshot holds no storage objects (their claims are then refused or ignored by `features.rs`, as before).

use std::collections::BTreeSet;

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;
use crate::scheduler::engine::storage::claim_class;

/// The reason for nodes outside the volumes' zones.
pub const REASON: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The labels compared, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

/// The plugin.
#[derive(Debug)]
pub struct VolumeZone;

/// A volume's topology label: the key and the values it allows.
struct Topology {
    key: &'static str,
    values: BTreeSet<String>,
}

struct Check {
    topologies: Vec<Topology>,
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let Some(storage) = cycle.snapshot.storage() else {
            return PreFilter::Skip;
        };
        let pod = cycle.pod;
        let volumes = pod
            .pod()
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_deref())
            .unwrap_or_default();
        let mut topologies = Vec::new();
        for claim in volumes.iter().filter_map(|v| v.persistent_volume_claim.as_ref()) {
            if claim.claim_name.is_empty() {
                return PreFilter::Reject(Verdict::unresolvable("PersistentVolumeClaim had no name"));
            }
            let found = match storage.claim(&pod.namespace, &claim.claim_name) {
                Ok(found) => found,
                Err(not_found) => return PreFilter::Reject(Verdict::unresolvable(not_found.to_string())),
            };
            let volume_name = found
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .unwrap_or_default();
            if volume_name.is_empty() {
                let class_name = claim_class(found);
                if class_name.is_empty() {
                    return PreFilter::Reject(Verdict::unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name",
                    ));
                }
                let class = match storage.class(class_name) {
                    Ok(class) => class,
                    Err(not_found) => return PreFilter::Reject(Verdict::unresolvable(not_found.to_string())),
                };
                match class.volume_binding_mode.as_deref() {
                    None => {
                        return PreFilter::Reject(Verdict::unresolvable(format!(
                            "VolumeBindingMode not set for StorageClass {class_name:?}"
                        )));
                    }
                    // Such a claim is bound (or provisioned) for the chosen node; VolumeBinding checks it.
                    Some("WaitForFirstConsumer") => continue,
                    Some(_) => return PreFilter::Reject(Verdict::unresolvable("PersistentVolume had no name")),
                }
            }
            let volume = match storage.volume(volume_name) {
                Ok(volume) => volume,
                Err(not_found) => return PreFilter::Reject(Verdict::unresolvable(not_found.to_string())),
            };
            let labels = volume.metadata.labels.as_ref();
            for key in TOPOLOGY_LABELS {
                // A value that does not parse is ignored, as upstream (which logs it).
                if let Some(values) = labels.and_then(|l| l.get(key)).and_then(|v| zones(v)) {
                    topologies.push(Topology { key, values });
                }
            }
        }
        if topologies.is_empty() {
            return PreFilter::Skip;
        }
        PreFilter::run(Check { topologies })
    }
}

/// `LabelZonesToSet`: values separated by `__`, trimmed; `None` if one is empty.
fn zones(value: &str) -> Option<BTreeSet<String>> {
    value
        .split("__")
        .map(|zone| Some(zone.trim()).filter(|z| !z.is_empty()).map(str::to_string))
        .collect()
}

/// The GA key for a beta key.
fn ga_key(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}

impl NodeFilter for Check {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        let labels = node.labels();
        // A node without any topology label accepts every volume.
        if !TOPOLOGY_LABELS.iter().any(|key| labels.contains_key(*key)) {
            return None;
        }
        let fits = |topology: &Topology| {
            labels
                .get(topology.key)
                .or_else(|| labels.get(ga_key(topology.key)))
                .is_some_and(|value| topology.values.contains(value))
        };
        (!self.topologies.iter().all(fits)).then(|| Verdict::unresolvable(REASON))
    }
}
