//! VolumeBinding's Score (v1.37's StorageCapacityScoring): nodes where the pod's new volumes leave most room first.

// kube-scheduler's `volumebinding` `Score` and `scorer.go` with the default shape (utilization 0 → 100, 100 → 0):
// per storage class, the claims' requests against the capacity they would use on the node — the matched volumes'
// capacity when any claim binds to an existing volume, else the CSIStorageCapacity each provisioned claim was
// checked against — averaged over the classes. Before v1.37 the gate is off and the plugin has no scorer, so it
// skips; a pod without unbound claims scores 0 everywhere, which changes nothing.

use std::collections::BTreeMap;

use super::node_resources_fit::broken_linear;
use super::volume_binding::{Check, NodeVolumes, capacity, requested};
use super::{Cycle, NodeScorer, PreScore, PreScorePlugin};
use crate::scheduler::engine::quantity::parse;
use crate::scheduler::engine::snapshot::NodeInfo;

/// The default shape, kube-scheduler's `SetDefaults_VolumeBindingArgs` with scores scaled to 0–100.
const SHAPE: [(i64, i64); 2] = [(0, 100), (100, 0)];
const MAX_UTILIZATION: i128 = 100;

/// The plugin.
#[derive(Debug)]
pub struct VolumeBindingScore {
    /// The `StorageCapacityScoring` gate (on by default from v1.37).
    pub enabled: bool,
}

struct Scorer<'a> {
    check: Option<Check<'a>>,
}

impl PreScorePlugin for VolumeBindingScore {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        if !self.enabled {
            return PreScore::Skip;
        }
        // Nodes are only scored once the Filter passed them, so PreFilter found the claims usable.
        let check = cycle
            .snapshot
            .storage()
            .and_then(|storage| Check::of(cycle, storage).ok().flatten());
        PreScore::Run(Box::new(Scorer { check }))
    }
}

impl NodeScorer for Scorer<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        match self.check.as_ref().map(|check| check.node_volumes(node)) {
            Some(Ok((None, volumes))) => capacity_score(&volumes),
            _ => 0,
        }
    }
}

/// `Quantity.Value()` of nano-units: whole units rounded up.
fn whole_units(nano: i128) -> i128 {
    (nano + 999_999_999).div_euclid(1_000_000_000)
}

/// Requested and capacity per storage class, averaged over classes (`buildScorerFunction`).
fn capacity_score(volumes: &NodeVolumes<'_>) -> i64 {
    let mut classes: BTreeMap<&str, (i128, i128)> = BTreeMap::new();
    if !volumes.static_bindings.is_empty() {
        for (claim, volume) in &volumes.static_bindings {
            // `BindingInfo.StorageClassName`: the volume's field (not the beta annotation).
            let class = volume
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
                .unwrap_or_default();
            let entry = classes.entry(class).or_default();
            entry.0 += whole_units(requested(claim));
            entry.1 += whole_units(capacity(volume));
        }
    } else {
        for (claim, node_capacity) in &volumes.provisions {
            let Some(node_capacity) = node_capacity else { continue };
            let class = claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
                .unwrap_or_default();
            let entry = classes.entry(class).or_default();
            entry.0 += whole_units(requested(claim));
            // The class's capacity on the node, once (two claims of one class share it).
            entry.1 = node_capacity
                .capacity
                .as_ref()
                .and_then(|q| parse(&q.0).ok())
                .map_or(0, |q| i128::from(q.value()));
        }
    }
    if classes.is_empty() {
        return 0;
    }
    let utilization_score = |(requested, capacity): (i128, i128)| {
        let utilization = if capacity == 0 || requested > capacity {
            MAX_UTILIZATION
        } else {
            requested * MAX_UTILIZATION / capacity
        };
        broken_linear(&SHAPE, i64::try_from(utilization).unwrap_or(100))
    };
    let sum: i64 = classes.values().map(|&c| utilization_score(c)).sum();
    (sum as f64 / classes.len() as f64).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::CSIStorageCapacity;
    use serde_json::json;

    fn claim(request: &str, class: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {"storageClassName": class,
            "resources": {"requests": {"storage": request}}}}))
        .unwrap()
    }

    fn volume(size: &str, class: &str) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "v"},
            "spec": {"storageClassName": class, "capacity": {"storage": size}}}))
        .unwrap()
    }

    fn node_capacity(size: &str) -> CSIStorageCapacity {
        serde_json::from_value(json!({"metadata": {"name": "cap"}, "storageClassName": "fast", "capacity": size}))
            .unwrap()
    }

    #[test]
    fn static_bindings_score_by_the_matched_volumes_utilization_per_class() {
        let (small, big) = (claim("1Gi", "a"), claim("3Gi", "b"));
        let (v4, v6) = (volume("4Gi", "a"), volume("6Gi", "b"));
        // Class a: 1/4 = 25% → 75; class b: 3/6 = 50% → 50; the average 62.5 rounds to 63.
        let volumes = NodeVolumes {
            static_bindings: vec![(&small, &v4), (&big, &v6)],
            provisions: Vec::new(),
        };
        assert_eq!(capacity_score(&volumes), 63);
        // Two claims of one class add up: (1 + 3) / (4 + 4) = 50%.
        let (a2, v4b) = (claim("3Gi", "a"), volume("4Gi", "a"));
        let volumes = NodeVolumes {
            static_bindings: vec![(&small, &v4), (&a2, &v4b)],
            provisions: Vec::new(),
        };
        assert_eq!(capacity_score(&volumes), 50);
        // A request over the capacity (or a volume without one) scores as full.
        let (over, none) = (claim("5Gi", "a"), volume("0", "a"));
        for v in [&v4, &none] {
            let volumes = NodeVolumes {
                static_bindings: vec![(&over, v)],
                provisions: Vec::new(),
            };
            assert_eq!(capacity_score(&volumes), 0);
        }
    }

    #[test]
    fn provisions_score_by_the_capacity_they_were_checked_against_unless_a_claim_binds() {
        let (c1, c2) = (claim("10Gi", "fast"), claim("10Gi", "fast"));
        let cap = node_capacity("100Gi");
        // Two claims of one class: 20Gi of the class's 100Gi (not 200Gi) → 80.
        let volumes = NodeVolumes {
            static_bindings: Vec::new(),
            provisions: vec![(&c1, Some(&cap)), (&c2, Some(&cap))],
        };
        assert_eq!(capacity_score(&volumes), 80);
        // Capacity not checked (no CSIDriver opting in): nothing to score.
        let unchecked = NodeVolumes {
            static_bindings: Vec::new(),
            provisions: vec![(&c1, None)],
        };
        assert_eq!(capacity_score(&unchecked), 0);
        // With a static binding, only the bindings count.
        let (bound, v) = (claim("1Gi", "a"), volume("2Gi", "a"));
        let mixed = NodeVolumes {
            static_bindings: vec![(&bound, &v)],
            provisions: vec![(&c1, Some(&cap))],
        };
        assert_eq!(capacity_score(&mixed), 50);
    }
}
