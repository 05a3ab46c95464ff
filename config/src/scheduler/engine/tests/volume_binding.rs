//! VolumeBinding's PreFilter and Filter through the engine: hand-computed cases after upstream's
//! `volume_binding_test.go` and `binder_test.go` (behaviour and exact reasons).

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass};
use serde_json::{Value, json};

use crate::scheduler::engine::features::Feature;
use crate::scheduler::engine::{
    Code, CsiObjects, Decision, Engine, FilterEntry, FilterPlugin, Profile, Snapshot, Storage,
};

const ZONE: &str = "topology.kubernetes.io/zone";
const NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
const BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
const NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
const PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// Nodes `a` and `b` in zones of the same names.
fn nodes() -> Vec<Node> {
    ["a", "b"]
        .map(|zone| {
            serde_json::from_value(json!({
                "metadata": {"name": zone, "labels": {ZONE: zone}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
            }))
            .unwrap()
        })
        .to_vec()
}

fn pod(volumes: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": {"containers": [{"name": "c"}], "volumes": volumes}
    }))
    .unwrap()
}

fn claims(names: &[&str]) -> Value {
    Value::Array(
        names
            .iter()
            .map(|c| json!({"name": format!("v-{c}"), "persistentVolumeClaim": {"claimName": c}}))
            .collect(),
    )
}

/// A claim: bound to `volume` (with the binder's annotation) or unbound, of `class`, requesting `size`.
fn claim(name: &str, volume: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    let annotations = match volume {
        "" => json!({}),
        _ => json!({"pv.kubernetes.io/bind-completed": "yes"}),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"volumeName": (!volume.is_empty()).then_some(volume), "storageClassName": class,
                 "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    }))
    .unwrap()
}

/// An `Available` volume of `class` and `size`, allowing the nodes of `zones` (any node when empty).
fn volume(name: &str, class: &str, size: &str, zones: &[&str]) -> PersistentVolume {
    let affinity = (!zones.is_empty()).then(|| {
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": zones}
        ]}]}})
    });
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"storageClassName": class, "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "nodeAffinity": affinity},
        "status": {"phase": "Available"}
    }))
    .unwrap()
}

fn class(name: &str, provisioner: &str, mode: &str, zones: &[&str]) -> StorageClass {
    let topologies = (!zones.is_empty()).then(|| json!([{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]));
    serde_json::from_value(json!({
        "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode,
        "allowedTopologies": topologies
    }))
    .unwrap()
}

fn profile(only_binding: bool) -> Profile {
    let mut profile = Profile::default_provider();
    if only_binding {
        profile.filters = vec![FilterEntry::Plugin(FilterPlugin::VolumeBinding)];
    }
    profile.ignored_features.insert(Feature::PersistentVolumeClaims);
    profile
}

fn decide_with(profile: &Profile, pod: &Pod, storage: Storage) -> Decision {
    let mut snapshot = Snapshot::build(nodes(), Vec::new()).unwrap();
    snapshot.set_storage(storage);
    Engine::new(profile, 1).unwrap().schedule(&snapshot, pod).unwrap()
}

fn decide(pod: &Pod, storage: Storage) -> Decision {
    decide_with(&profile(false), pod, storage)
}

/// The VolumeBinding reasons of a node (`None` when it passed).
fn reasons(decision: &Decision, node: &str) -> Option<Vec<String>> {
    let rejection = decision.node(node)?.rejection.as_ref()?;
    assert_eq!(
        (&*rejection.plugin, rejection.code),
        ("VolumeBinding", Code::UnschedulableAndUnresolvable)
    );
    Some(rejection.reasons.iter().map(|r| r.to_string()).collect())
}

fn just(reason: &str) -> Option<Vec<String>> {
    Some(vec![reason.to_string()])
}

#[test]
fn a_bound_claim_allows_only_the_nodes_of_its_volume_affinity() {
    let storage = Storage::new(
        [claim("data", "pv", "manual", "1Gi")],
        [volume("pv", "manual", "1Gi", &["a"])],
        [class(
            "manual",
            "kubernetes.io/no-provisioner",
            "WaitForFirstConsumer",
            &[],
        )],
    );
    let decision = decide(&pod(claims(&["data"])), storage);
    assert_eq!(decision.chosen(), Some("a"));
    assert_eq!(reasons(&decision, "b"), just(NODE_CONFLICT));
}

#[test]
fn a_bound_claim_whose_volume_is_gone_fails_every_node() {
    // Alone: in the default profile VolumeZone's PreFilter finds the missing volume first.
    let storage = Storage::new([claim("data", "gone", "", "1Gi")], [], []);
    let decision = decide_with(&profile(true), &pod(claims(&["data"])), storage);
    assert_eq!(reasons(&decision, "a"), just(PV_NOT_EXIST));
    assert_eq!(
        decision.message(),
        Some(format!("0/2 nodes are available: 2 {PV_NOT_EXIST}.").as_str())
    );
}

#[test]
fn an_unbound_immediate_claim_is_rejected_at_pre_filter() {
    let storage = Storage::new(
        [claim("data", "", "standard", "1Gi")],
        [],
        [class("standard", "example.com/csi", "Immediate", &[])],
    );
    let decision = decide(&pod(claims(&["data"])), storage);
    assert_eq!(
        decision.message(),
        Some("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
    );
    // A claim naming a volume the binder has not finished with is not bound yet either.
    let mut half_bound = claim("data", "pv", "standard", "1Gi");
    half_bound.metadata.annotations = None;
    let storage = Storage::new(
        [half_bound],
        [volume("pv", "standard", "1Gi", &[])],
        [class("standard", "example.com/csi", "WaitForFirstConsumer", &[])],
    );
    assert_eq!(
        decide(&pod(claims(&["data"])), storage).message(),
        Some("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
    );
}

#[test]
fn a_delayed_claim_binds_a_static_volume_allowing_the_node() {
    let local = class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer", &[]);
    // 1Gi in zone a only; 5Gi anywhere but too small for 8Gi; another class's volume never matches.
    let volumes = [
        volume("small-a", "local", "1Gi", &["a"]),
        volume("five", "local", "5Gi", &[]),
        volume("other-class", "fast", "10Gi", &[]),
    ];
    let fits = Storage::new([claim("data", "", "local", "1Gi")], volumes.clone(), [local.clone()]);
    let decision = decide(&pod(claims(&["data"])), fits);
    assert_eq!(reasons(&decision, "a"), None);
    assert_eq!(reasons(&decision, "b"), None, "the 5Gi volume fits on b");
    let too_big = Storage::new([claim("data", "", "local", "8Gi")], volumes.clone(), [local.clone()]);
    let decision = decide(&pod(claims(&["data"])), too_big);
    assert_eq!(reasons(&decision, "a"), just(BIND_CONFLICT));
    assert_eq!(
        decision.message(),
        Some(format!("0/2 nodes are available: 2 {BIND_CONFLICT}.").as_str())
    );
    // Two claims of the pod never take the same volume: on b only `five` is there for both.
    let two = Storage::new(
        [claim("one", "", "local", "1Gi"), claim("two", "", "local", "1Gi")],
        volumes,
        [local],
    );
    let decision = decide(&pod(claims(&["one", "two"])), two);
    assert_eq!(decision.chosen(), Some("a"));
    assert_eq!(reasons(&decision, "b"), just(BIND_CONFLICT));
}

#[test]
fn a_volume_pre_bound_to_the_claim_is_the_only_candidate() {
    let local = class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer", &[]);
    let mut reserved = volume("reserved", "local", "1Gi", &["a"]);
    reserved.spec.as_mut().unwrap().claim_ref =
        Some(serde_json::from_value(json!({"name": "data", "namespace": "default"})).unwrap());
    // On b the reserved volume's affinity fails: the free volume that fits b is not taken instead.
    let storage = Storage::new(
        [claim("data", "", "local", "1Gi")],
        [reserved, volume("free", "local", "1Gi", &[])],
        [local],
    );
    let decision = decide(&pod(claims(&["data"])), storage);
    assert_eq!(decision.chosen(), Some("a"));
    assert_eq!(reasons(&decision, "b"), just(BIND_CONFLICT));
}

#[test]
fn dynamic_provisioning_follows_the_class_allowed_topologies_and_selected_node() {
    let zoned = class("zoned", "example.com/csi", "WaitForFirstConsumer", &["b"]);
    let storage = Storage::new([claim("data", "", "zoned", "1Gi")], [], [zoned.clone()]);
    let decision = decide(&pod(claims(&["data"])), storage);
    assert_eq!(decision.chosen(), Some("b"));
    assert_eq!(reasons(&decision, "a"), just(BIND_CONFLICT));
    // Provisioning already started for node a: only a will do, whatever the class allows.
    let mut selected = claim("data", "", "zoned", "1Gi");
    selected
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("volume.kubernetes.io/selected-node".to_string(), "a".to_string());
    let decision = decide(&pod(claims(&["data"])), Storage::new([selected], [], [zoned]));
    assert_eq!(reasons(&decision, "b"), just(BIND_CONFLICT));
    assert_eq!(
        reasons(&decision, "a"),
        just(BIND_CONFLICT),
        "a is outside the allowed topologies"
    );
}

#[test]
fn provisioning_checks_capacity_only_for_drivers_that_publish_it() {
    let class = class("fast", "example.com/csi", "WaitForFirstConsumer", &[]);
    let capacity: CSIStorageCapacity = serde_json::from_value(json!({
        "metadata": {"name": "cap-a", "namespace": "kube-system"},
        "storageClassName": "fast", "capacity": "10Gi",
        "nodeTopology": {"matchLabels": {ZONE: "a"}}
    }))
    .unwrap();
    let driver = |publishes: bool| -> CSIDriver {
        serde_json::from_value(json!({"metadata": {"name": "example.com/csi"},
                                       "spec": {"storageCapacity": publishes}}))
        .unwrap()
    };
    let storage = |size: &str, publishes: bool| {
        Storage::new([claim("data", "", "fast", size)], [], [class.clone()]).with_csi(CsiObjects {
            drivers: vec![driver(publishes)],
            capacities: vec![capacity.clone()],
            ..CsiObjects::default()
        })
    };
    let decision = decide(&pod(claims(&["data"])), storage("5Gi", true));
    assert_eq!(decision.chosen(), Some("a"));
    assert_eq!(reasons(&decision, "b"), just(NOT_ENOUGH_SPACE));
    let decision = decide(&pod(claims(&["data"])), storage("20Gi", true));
    assert_eq!(reasons(&decision, "a"), just(NOT_ENOUGH_SPACE));
    let decision = decide(&pod(claims(&["data"])), storage("20Gi", false));
    assert_eq!(reasons(&decision, "b"), None, "the driver does not publish capacity");
}

#[test]
fn reasons_come_in_upstreams_order() {
    // A bound claim in zone a, a delayed claim provisioned only in zone a: b fails both checks.
    let storage = Storage::new(
        [claim("bound", "pv", "", "1Gi"), claim("later", "", "zoned", "1Gi")],
        [volume("pv", "", "1Gi", &["a"])],
        [class("zoned", "example.com/csi", "WaitForFirstConsumer", &["a"])],
    );
    let decision = decide(&pod(claims(&["bound", "later"])), storage);
    assert_eq!(decision.chosen(), Some("a"));
    assert_eq!(
        reasons(&decision, "b"),
        Some(vec![NODE_CONFLICT.to_string(), BIND_CONFLICT.to_string()])
    );
}

#[test]
fn ephemeral_volumes_need_their_claim_created_for_the_pod() {
    let ephemeral = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
    let decision = decide(&pod(ephemeral.clone()), Storage::default());
    assert_eq!(
        decision.message(),
        Some(
            "0/2 nodes are available: waiting for ephemeral volume controller to create the persistentvolumeclaim \
             \"p-scratch\"."
        )
    );
    let foreign = claim("p-scratch", "", "", "1Gi");
    let decision = decide(&pod(ephemeral.clone()), Storage::new([foreign], [], []));
    assert_eq!(
        decision.message(),
        Some("0/2 nodes are available: PVC default/p-scratch was not created for pod default/p (pod is not owner).")
    );
    let mut owned = claim("p-scratch", "pv", "", "1Gi");
    owned.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p",
                                       "controller": true}))
        .unwrap(),
    ]);
    let storage = Storage::new([owned], [volume("pv", "", "1Gi", &["b"])], []);
    assert_eq!(decide(&pod(ephemeral), storage).chosen(), Some("b"));
}

#[test]
fn with_storage_objects_no_volume_is_refused() {
    let storage = || {
        Storage::new(
            [claim("bound", "pv", "", "1Gi"), claim("later", "", "local", "1Gi")],
            [volume("pv", "", "1Gi", &["b"]), volume("free", "local", "1Gi", &[])],
            [class(
                "local",
                "kubernetes.io/no-provisioner",
                "WaitForFirstConsumer",
                &[],
            )],
        )
    };
    // No ignoredFeatures: a pod whose claims are all bound is evaluated by every volume plugin.
    let default = Profile::default_provider();
    let decision = decide_with(&default, &pod(claims(&["bound"])), storage());
    assert_eq!(decision.chosen(), Some("b"));
    // A claim to bind at the first consumer is matched by the Filter and bound by the worker's PreBind.
    let decision = decide_with(&default, &pod(claims(&["bound", "later"])), storage());
    assert_eq!(decision.chosen(), Some("b"));
    // In-tree disks are counted and checked with the storage objects: no refusal.
    let disk = json!([{"name": "d", "awsElasticBlockStore": {"volumeID": "vol-1"}}]);
    assert!(decide_with(&default, &pod(disk), storage()).chosen().is_some());
}

/// A node `name` with `labels`, and its CSINode listing `migrated` in-tree plugins (no CSINode when `None`).
fn labelled_node(name: &str, labels: Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap()
}

fn csi_node_migrating(name: &str, migrated: &str) -> k8s_openapi::api::storage::v1::CSINode {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": migrated}},
        "spec": {"drivers": []}
    }))
    .unwrap()
}

#[test]
fn a_bound_in_tree_volume_migrated_on_the_node_is_checked_as_its_csi_translation() {
    const EBS_ZONE: &str = "topology.ebs.csi.aws.com/zone";
    // An EBS volume in zone a by its node affinity, another only by its zone label (two zones, `a__b`).
    let by_affinity: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "pv-affinity"},
        "spec": {"awsElasticBlockStore": {"volumeID": "aws://a/vol-1"}, "capacity": {"storage": "1Gi"},
                 "accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": ZONE, "operator": "In", "values": ["a"]}]}]}}}
    }))
    .unwrap();
    let by_label: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "pv-label", "labels": {ZONE: "a__b"}},
        "spec": {"awsElasticBlockStore": {"volumeID": "vol-2"}, "capacity": {"storage": "1Gi"},
                 "accessModes": ["ReadWriteOnce"], "storageClassName": "manual"}
    }))
    .unwrap();
    let nodes = vec![
        // Migrated, but the EBS driver's zone label missing: the translated affinity does not match.
        labelled_node("migrated-unlabelled", json!({ZONE: "a"})),
        // Migrated and labelled by the driver.
        labelled_node("migrated-labelled", json!({ZONE: "a", EBS_ZONE: "a"})),
        // Migrated, driver zone c: neither volume's zone.
        labelled_node("migrated-elsewhere", json!({ZONE: "a", EBS_ZONE: "c"})),
        // Not migrated (the CSINode lists another plugin), or no CSINode: checked as the in-tree volume.
        labelled_node("other-plugin", json!({ZONE: "a"})),
        labelled_node("no-csi-node", json!({ZONE: "a"})),
    ];
    let csi = CsiObjects {
        nodes: vec![
            csi_node_migrating("migrated-unlabelled", "kubernetes.io/gce-pd,kubernetes.io/aws-ebs"),
            csi_node_migrating("migrated-labelled", "kubernetes.io/aws-ebs"),
            csi_node_migrating("migrated-elsewhere", "kubernetes.io/aws-ebs"),
            csi_node_migrating("other-plugin", "kubernetes.io/gce-pd"),
        ],
        ..CsiObjects::default()
    };
    for (claimed, pv) in [("pv-affinity", by_affinity), ("pv-label", by_label)] {
        let storage = Storage::new([claim("data", claimed, "manual", "1Gi")], [pv], []).with_csi(csi.clone());
        let mut snapshot = Snapshot::build(nodes.clone(), Vec::new()).unwrap();
        snapshot.set_storage(storage);
        let decision = Engine::new(&profile(true), 1)
            .unwrap()
            .schedule(&snapshot, &pod(claims(&["data"])))
            .unwrap();
        assert_eq!(
            reasons(&decision, "migrated-unlabelled"),
            just(NODE_CONFLICT),
            "{claimed}"
        );
        assert_eq!(reasons(&decision, "migrated-labelled"), None, "{claimed}");
        assert_eq!(
            reasons(&decision, "migrated-elsewhere"),
            just(NODE_CONFLICT),
            "{claimed}"
        );
        assert_eq!(reasons(&decision, "other-plugin"), None, "{claimed}");
        assert_eq!(reasons(&decision, "no-csi-node"), None, "{claimed}");
    }
}

#[test]
fn from_v1_37_nodes_are_scored_by_the_room_the_new_volumes_leave() {
    // One delayed claim of 1Gi; a free 2Gi volume in zone a and a free 8Gi one in zone b.
    let storage = Storage::new(
        [claim("c", "", "wffc", "1Gi")],
        [
            volume("small", "wffc", "2Gi", &["a"]),
            volume("big", "wffc", "8Gi", &["b"]),
        ],
        [class("wffc", "csi.example", "WaitForFirstConsumer", &[])],
    );
    let mut snapshot = Snapshot::build(nodes(), Vec::new()).unwrap();
    snapshot.set_storage(storage);
    let volume_binding_score = |version, node: &str| {
        let decision = Engine::for_version(&profile(false), version, 1)
            .unwrap()
            .schedule(&snapshot, &pod(claims(&["c"])))
            .unwrap();
        let scores = &decision.node(node).unwrap().scores;
        scores
            .iter()
            .find(|s| &*s.plugin == "VolumeBinding")
            .map(|s| s.weighted)
    };
    // 1/2 used → 50; 1/8 (12% in integers) → 88.
    assert_eq!(volume_binding_score(crate::KubernetesVersion::V1_37, "a"), Some(50));
    assert_eq!(volume_binding_score(crate::KubernetesVersion::V1_37, "b"), Some(88));
    // Before v1.37 the plugin has no scorer: no score at all.
    assert_eq!(volume_binding_score(crate::KubernetesVersion::V1_36, "a"), None);
    let chosen = Engine::for_version(&profile(false), crate::KubernetesVersion::V1_37, 7)
        .unwrap()
        .schedule(&snapshot, &pod(claims(&["c"])))
        .unwrap();
    assert_eq!(chosen.chosen(), Some("b"));
}
