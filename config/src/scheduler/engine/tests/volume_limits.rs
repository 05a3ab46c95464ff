//! NodeVolumeLimits through the engine: hand-computed counts against CSINode limits, after upstream's
//! `csi_test.go` cases (behaviour and exact reasons).

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass, VolumeAttachment};
use serde_json::{Value, json};

use crate::scheduler::engine::features::Feature;
use crate::scheduler::engine::{
    Code, CsiObjects, Decision, Engine, FilterEntry, FilterPlugin, Profile, Snapshot, Storage,
};

const REASON: &str = "node(s) exceed max volume count";

fn node(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap()
}

fn pod(name: &str, volumes: Value, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c"}], "volumes": volumes, "nodeName": node}
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

/// A claim bound to `volume` (or unbound with class `class` when `volume` is empty).
fn claim(name: &str, volume: &str, class: &str) -> PersistentVolumeClaim {
    let annotations = match volume {
        "" => json!({}),
        _ => json!({"pv.kubernetes.io/bind-completed": "yes"}),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"volumeName": (!volume.is_empty()).then_some(volume),
                 "storageClassName": (!class.is_empty()).then_some(class)}
    }))
    .unwrap()
}

fn csi_volume(name: &str, driver: &str, handle: &str) -> PersistentVolume {
    serde_json::from_value(json!({"metadata": {"name": name},
                                   "spec": {"csi": {"driver": driver, "volumeHandle": handle}}}))
    .unwrap()
}

fn csi_node(name: &str, limits: &[(&str, i32)]) -> CSINode {
    let drivers: Vec<Value> = limits
        .iter()
        .map(|(d, count)| json!({"name": d, "nodeID": name, "allocatable": {"count": count}}))
        .collect();
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"drivers": drivers}})).unwrap()
}

fn class(name: &str, provisioner: &str) -> StorageClass {
    serde_json::from_value(json!({"metadata": {"name": name}, "provisioner": provisioner,
                                   "volumeBindingMode": "WaitForFirstConsumer"}))
    .unwrap()
}

/// The default profile; claims need VolumeBinding, ignored here to look at NodeVolumeLimits alone.
fn decide(pods: Vec<Pod>, new: &Pod, storage: Storage) -> Decision {
    let mut profile = Profile::default_provider();
    profile
        .ignored_features
        .extend([Feature::PersistentVolumeClaims, Feature::InTreeDiskVolumes]);
    let mut snapshot = Snapshot::build(vec![node("n1")], pods).unwrap();
    snapshot.set_storage(storage);
    Engine::new(&profile, 1).unwrap().schedule(&snapshot, new).unwrap()
}

fn verdict(decision: &Decision) -> Option<(String, Code, String)> {
    let rejection = decision.node("n1")?.rejection.as_ref()?;
    Some((rejection.plugin.to_string(), rejection.code, rejection.message()))
}

fn exceeded() -> Option<(String, Code, String)> {
    Some(("NodeVolumeLimits".to_string(), Code::Unschedulable, REASON.to_string()))
}

/// Four bound CSI volumes of driver `ebs` (a, b on the node's pods; c, d for the new pod).
fn four_volumes(limit: i32) -> Storage {
    Storage::new(
        ["a", "b", "c", "d"].map(|c| claim(c, &format!("pv-{c}"), "")),
        ["a", "b", "c", "d"].map(|c| csi_volume(&format!("pv-{c}"), "ebs", &format!("h-{c}"))),
        [],
    )
    .with_csi(CsiObjects {
        nodes: vec![csi_node("n1", &[("ebs", limit)])],
        ..CsiObjects::default()
    })
}

#[test]
fn attached_plus_new_volumes_over_the_driver_limit_reject_the_node() {
    let placed = vec![pod("old", claims(&["a", "b"]), Some("n1"))];
    let new = pod("new", claims(&["c", "d"]), None);
    // 2 attached + 2 new = 4.
    assert_eq!(verdict(&decide(placed.clone(), &new, four_volumes(4))), None);
    assert_eq!(verdict(&decide(placed, &new, four_volumes(3))), exceeded());
}

#[test]
fn a_volume_already_attached_to_the_node_does_not_count_again() {
    let placed = vec![pod("old", claims(&["a", "b"]), Some("n1"))];
    // b is attached already: 2 attached + 1 new (c) = 3.
    let new = pod("new", claims(&["b", "c"]), None);
    assert_eq!(verdict(&decide(placed, &new, four_volumes(3))), None);
}

#[test]
fn no_limit_for_the_driver_or_no_csi_node_passes() {
    let placed = vec![pod("old", claims(&["a", "b"]), Some("n1"))];
    let new = pod("new", claims(&["c", "d"]), None);
    let other_driver = Storage::new(
        ["a", "b", "c", "d"].map(|c| claim(c, &format!("pv-{c}"), "")),
        ["a", "b", "c", "d"].map(|c| csi_volume(&format!("pv-{c}"), "ebs", &format!("h-{c}"))),
        [],
    );
    let with_limit_elsewhere = other_driver.clone().with_csi(CsiObjects {
        nodes: vec![csi_node("n1", &[("gce", 1)])],
        ..CsiObjects::default()
    });
    assert_eq!(verdict(&decide(placed.clone(), &new, other_driver)), None);
    assert_eq!(verdict(&decide(placed, &new, with_limit_elsewhere)), None);
}

#[test]
fn volume_attachments_of_the_node_count_as_attached() {
    let attachment: VolumeAttachment = serde_json::from_value(json!({
        "metadata": {"name": "va"},
        "spec": {"attacher": "ebs", "nodeName": "n1", "source": {"persistentVolumeName": "pv-a"}}
    }))
    .unwrap();
    let storage = four_volumes(2);
    let storage = storage.with_csi(CsiObjects {
        nodes: vec![csi_node("n1", &[("ebs", 2)])],
        attachments: vec![attachment],
        ..CsiObjects::default()
    });
    // 1 attachment + 2 new = 3 > 2; without pods on the node.
    assert_eq!(
        verdict(&decide(
            Vec::new(),
            &pod("new", claims(&["c", "d"]), None),
            storage.clone()
        )),
        exceeded()
    );
    // The attached volume itself is not new: 1 + 1 (c) = 2.
    assert_eq!(
        verdict(&decide(Vec::new(), &pod("new", claims(&["c"]), None), storage)),
        None
    );
}

#[test]
fn unbound_claims_count_under_their_class_provisioner_each_once() {
    let storage = Storage::new(
        [claim("u1", "", "fast"), claim("u2", "", "fast"), claim("none", "", "")],
        [],
        [class("fast", "ebs")],
    )
    .with_csi(CsiObjects {
        nodes: vec![csi_node("n1", &[("ebs", 1)])],
        ..CsiObjects::default()
    });
    // Two claims of the provisioner `ebs`: 2 > 1. A claim without a class is not counted.
    assert_eq!(
        verdict(&decide(
            Vec::new(),
            &pod("new", claims(&["u1", "u2"]), None),
            storage.clone()
        )),
        exceeded()
    );
    assert_eq!(
        verdict(&decide(Vec::new(), &pod("new", claims(&["u1", "none"]), None), storage)),
        None
    );
}

#[test]
fn migrated_in_tree_volumes_count_under_their_csi_driver() {
    let inline = json!([
        {"name": "a", "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}},
        {"name": "b", "awsElasticBlockStore": {"volumeID": "vol-2"}}
    ]);
    let in_tree_volume: PersistentVolume = serde_json::from_value(
        json!({"metadata": {"name": "pv-x"}, "spec": {"awsElasticBlockStore": {"volumeID": "vol-1"}}}),
    )
    .unwrap();
    let storage = Storage::new([claim("x", "pv-x", "")], [in_tree_volume], []).with_csi(CsiObjects {
        nodes: vec![csi_node("n1", &[("ebs.csi.aws.com", 2)])],
        ..CsiObjects::default()
    });
    // vol-1 (inline) and vol-1 (the in-tree PV) are the same `ebs.csi.aws.com/vol-1`: 2 volumes in all.
    let mut volumes = inline.as_array().unwrap().clone();
    volumes.extend(claims(&["x"]).as_array().unwrap().iter().cloned());
    let new = pod("new", Value::Array(volumes), None);
    assert_eq!(verdict(&decide(Vec::new(), &new, storage.clone())), None);
    let placed = vec![pod(
        "old",
        json!([{"name": "c", "awsElasticBlockStore": {"volumeID": "vol-3"}}]),
        Some("n1"),
    )];
    assert_eq!(verdict(&decide(placed, &new, storage)), exceeded());
    // Without a CSINode the migration is off: nothing counts.
    let no_csi_node = Storage::new([claim("x", "pv-x", "")], [], []);
    assert_eq!(verdict(&decide(Vec::new(), &new, no_csi_node)), None);
}

#[test]
fn a_missing_claim_of_the_new_pod_is_unresolvable_with_the_lookup_text() {
    // Alone in a profile: in the default one VolumeRestrictions' PreFilter finds the missing claim first.
    let mut profile = Profile::default_provider();
    profile.filters = vec![FilterEntry::Plugin(FilterPlugin::NodeVolumeLimits)];
    profile.ignored_features.insert(Feature::PersistentVolumeClaims);
    let mut snapshot = Snapshot::build(vec![node("n1")], Vec::new()).unwrap();
    snapshot.set_storage(Storage::default());
    let decision = Engine::new(&profile, 1)
        .unwrap()
        .schedule(&snapshot, &pod("new", claims(&["gone"]), None))
        .unwrap();
    assert_eq!(
        verdict(&decision),
        Some((
            "NodeVolumeLimits".to_string(),
            Code::UnschedulableAndUnresolvable,
            "looking up PVC default/gone: persistentvolumeclaim \"gone\" not found".to_string()
        ))
    );
}

#[test]
fn each_node_counts_the_new_pods_volumes_under_its_own_csi_nodes_migration() {
    // One decision over three nodes whose CSINodes differ in what is migrated: the pod's volumes are worked out
    // once per case, and each node is judged by its own.
    let new = pod(
        "new",
        json!([
            {"name": "p", "portworxVolume": {"volumeID": "px-1"}},
            {"name": "e", "awsElasticBlockStore": {"volumeID": "vol-1"}}
        ]),
        None,
    );
    let mut portworx_migrated = csi_node("n1", &[("pxd.portworx.com", 0), ("ebs.csi.aws.com", 5)]);
    portworx_migrated.metadata.annotations = Some(
        [(
            "storage.alpha.kubernetes.io/migrated-plugins".to_string(),
            "kubernetes.io/portworx-volume".to_string(),
        )]
        .into(),
    );
    let storage = Storage::new([], [], []).with_csi(CsiObjects {
        nodes: vec![
            portworx_migrated,
            csi_node("n2", &[("pxd.portworx.com", 0), ("ebs.csi.aws.com", 0)]),
        ],
        ..CsiObjects::default()
    });
    let mut profile = Profile::default_provider();
    profile.filters = vec![FilterEntry::Plugin(FilterPlugin::NodeVolumeLimits)];
    let mut snapshot = Snapshot::build(vec![node("n1"), node("n2"), node("n3"), node("n4")], Vec::new()).unwrap();
    snapshot.set_storage(storage);
    let decision = Engine::new(&profile, 1).unwrap().schedule(&snapshot, &new).unwrap();
    let rejected = |name: &str| decision.node(name).unwrap().rejection.as_ref().map(|r| r.message());
    // n1: Portworx migrated, its limit 0 is exceeded; n2: only EBS is migrated, and its EBS limit is 0;
    // n3, n4: no CSINode, nothing migrated, nothing counted.
    assert_eq!(rejected("n1").as_deref(), Some(REASON));
    assert_eq!(rejected("n2").as_deref(), Some(REASON));
    assert_eq!(rejected("n3"), None);
    assert_eq!(rejected("n4"), None);
    let relaxed = csi_node("n2", &[("pxd.portworx.com", 0), ("ebs.csi.aws.com", 1)]);
    let storage = Storage::new([], [], []).with_csi(CsiObjects {
        nodes: vec![relaxed],
        ..CsiObjects::default()
    });
    snapshot.set_storage(storage);
    let decision = Engine::new(&profile, 1).unwrap().schedule(&snapshot, &new).unwrap();
    // Portworx is not migrated on n2: only the EBS volume counts, within its limit of 1.
    assert_eq!(
        decision.node("n2").unwrap().rejection.as_ref().map(|r| r.message()),
        None
    );
}

#[test]
fn placed_pods_with_claims_and_disks_stay_compact_while_the_volume_plugins_read_them() {
    let disk = json!({"name": "disk", "gcePersistentDisk": {"pdName": "shared"}});
    let mut volumes = claims(&["a", "b"]);
    volumes.as_array_mut().unwrap().push(disk.clone());
    let placed = pod("old", volumes, Some("n1"));
    let mut snapshot = Snapshot::build(vec![node("n1")], vec![placed]).unwrap();
    snapshot.set_storage(four_volumes(3));
    let mut engine = Engine::new(&Profile::default_provider(), 1).unwrap();
    // NodeVolumeLimits counts the placed pod's two claims: 2 + 2 new > 3.
    let decision = engine
        .schedule(&snapshot, &pod("new", claims(&["c", "d"]), None))
        .unwrap();
    assert_eq!(verdict(&decision), exceeded());
    // VolumeRestrictions sees the placed pod's disk; VolumeBinding sees its claim in use.
    let decision = engine
        .schedule(&snapshot, &pod("same-disk", json!([disk]), None))
        .unwrap();
    assert_eq!(
        verdict(&decision),
        Some((
            "VolumeRestrictions".to_string(),
            Code::Unschedulable,
            "node(s) had no available disk".to_string()
        ))
    );
    assert!(snapshot.is_claim_used("default", "a"));
    assert!(!snapshot.is_claim_used("default", "c"));
    let old = snapshot.pod("uid-old").expect("placed");
    assert!(old.is_compact(), "the volume plugins parsed the placed pod");
    assert_eq!(old.storage_volumes.len(), 3);
}

#[test]
fn portworx_counts_as_migrated_without_the_csi_nodes_annotation_from_v1_36() {
    // A CSINode that does not list Portworx as migrated, with a Portworx limit of 0.
    let new = pod(
        "new",
        json!([{"name": "p", "portworxVolume": {"volumeID": "px-1"}}]),
        None,
    );
    let storage = Storage::new([], [], []).with_csi(CsiObjects {
        nodes: vec![csi_node("n1", &[("pxd.portworx.com", 0)])],
        ..CsiObjects::default()
    });
    let mut profile = Profile::default_provider();
    profile.filters = vec![FilterEntry::Plugin(FilterPlugin::NodeVolumeLimits)];
    let mut snapshot = Snapshot::build(vec![node("n1")], Vec::new()).unwrap();
    snapshot.set_storage(storage);
    let rejected = |version| {
        let mut engine = Engine::for_version(&profile, version, 1).unwrap();
        let decision = engine.schedule(&snapshot, &new).unwrap();
        decision.node("n1").unwrap().rejection.as_ref().map(|r| r.message())
    };
    // v1.35: not migrated, so not counted against the driver's limit.
    assert_eq!(rejected(crate::KubernetesVersion::V1_35), None);
    assert_eq!(rejected(crate::KubernetesVersion::V1_36).as_deref(), Some(REASON));
    assert_eq!(rejected(crate::KubernetesVersion::V1_37).as_deref(), Some(REASON));
}

#[test]
fn an_opted_in_driver_missing_from_the_csi_node_rejects_the_node_from_v1_37() {
    let driver = |name: &str, prevent: Option<bool>| -> CSIDriver {
        serde_json::from_value(json!({"metadata": {"name": name},
                                       "spec": {"preventPodSchedulingIfMissing": prevent}}))
        .unwrap()
    };
    // Unbound claims of classes provisioned by `strict` (opted in), `lax` (a CSIDriver that does not opt in) and
    // `plain` (no CSIDriver: maybe not a CSI driver at all).
    let storage = |nodes: Vec<CSINode>| {
        Storage::new(
            [claim("s", "", "strict"), claim("l", "", "lax"), claim("p", "", "plain")],
            [],
            [class("strict", "strict"), class("lax", "lax"), class("plain", "plain")],
        )
        .with_csi(CsiObjects {
            nodes,
            drivers: vec![driver("strict", Some(true)), driver("lax", Some(false))],
            ..CsiObjects::default()
        })
    };
    let mut profile = Profile::default_provider();
    profile.filters = vec![FilterEntry::Plugin(FilterPlugin::NodeVolumeLimits)];
    let rejected = |version, nodes: Vec<CSINode>, uses: &[&str]| {
        let mut snapshot = Snapshot::build(vec![node("n1")], Vec::new()).unwrap();
        snapshot.set_storage(storage(nodes));
        let mut engine = Engine::for_version(&profile, version, 1).unwrap();
        let decision = engine.schedule(&snapshot, &pod("new", claims(uses), None)).unwrap();
        decision
            .node("n1")
            .unwrap()
            .rejection
            .as_ref()
            .map(|r| (r.code, r.message()))
    };
    let missing = Some((
        Code::Unschedulable,
        "strict CSI driver is not installed on the node".to_string(),
    ));
    let v37 = crate::KubernetesVersion::V1_37;
    // No CSINode, or one without the driver: rejected, even without any limit.
    assert_eq!(rejected(v37, vec![], &["s"]), missing);
    assert_eq!(rejected(v37, vec![csi_node("n1", &[("lax", 5)])], &["s", "l"]), missing);
    // Listed (its limit is then checked as before): passes.
    assert_eq!(rejected(v37, vec![csi_node("n1", &[("strict", 1)])], &["s"]), None);
    assert_eq!(
        rejected(v37, vec![csi_node("n1", &[("strict", 0)])], &["s"]),
        exceeded().map(|(_, code, text)| (code, text))
    );
    // Drivers that do not opt in, or have no CSIDriver, are never required.
    assert_eq!(rejected(v37, vec![], &["l", "p"]), None);
    // Before v1.37 the gate is off.
    for version in [crate::KubernetesVersion::V1_35, crate::KubernetesVersion::V1_36] {
        assert_eq!(rejected(version, vec![], &["s"]), None);
    }
}
