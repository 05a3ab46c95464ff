//! VolumeRestrictions and VolumeZone through the engine, from the cases of upstream's test tables (behaviour and
//! exact reasons), plus the snapshot-without-storage behaviour that must stay as before.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use crate::scheduler::engine::features::Feature;
use crate::scheduler::engine::{
    Code, Decision, Engine, FilterEntry, FilterPlugin, Outcome, Profile, Rejection, Snapshot, Storage,
};

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";

fn node(name: &str, labels: Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap()
}

/// A pod with these volumes, optionally placed on a node.
fn pod(name: &str, volumes: Value, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c"}], "volumes": volumes, "nodeName": node}
    }))
    .unwrap()
}

fn claim_volume(claim: &str) -> Value {
    json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])
}

/// A claim; one naming a volume is fully bound (the binder's annotation), as the plane's claims are.
fn claim(name: &str, spec: Value) -> PersistentVolumeClaim {
    let annotations = match spec.get("volumeName") {
        Some(_) => json!({"pv.kubernetes.io/bind-completed": "yes"}),
        None => json!({}),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": spec
    }))
    .unwrap()
}

fn volume(name: &str, labels: Value) -> PersistentVolume {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn class(name: &str, mode: Option<&str>) -> StorageClass {
    serde_json::from_value(json!({"metadata": {"name": name}, "provisioner": "p", "volumeBindingMode": mode})).unwrap()
}

/// The default profile, ignoring the features whose plugins (VolumeBinding, NodeVolumeLimits) are not evaluated.
fn engine() -> Engine {
    let mut profile = Profile::default_provider();
    profile
        .ignored_features
        .extend([Feature::PersistentVolumeClaims, Feature::InTreeDiskVolumes]);
    Engine::new(&profile, 1).unwrap()
}

fn decide(snapshot: &Snapshot, pod: &Pod) -> Decision {
    engine().schedule(snapshot, pod).unwrap()
}

/// The rejecting plugin, code and message of a node.
fn rejection(decision: &Decision, node: &str) -> Option<(String, Code, String)> {
    let rejection = decision.node(node)?.rejection.as_ref()?;
    Some((rejection.plugin.to_string(), rejection.code, rejection.message()))
}

/// The PreFilter rejection of an unschedulable decision.
fn pre_filter_rejection(decision: &Decision) -> Option<&Rejection> {
    match &decision.outcome {
        Outcome::Unschedulable { pre_filter, .. } => pre_filter.as_ref(),
        _ => None,
    }
}

fn zone_storage() -> Storage {
    Storage::new(
        [
            claim("PVC_1", json!({"volumeName": "Vol_1"})),
            claim("PVC_2", json!({"volumeName": "Vol_2"})),
            claim("PVC_4", json!({"volumeName": "Vol_not_exist"})),
            claim("PVC_Stable_1", json!({"volumeName": "Vol_Stable_1"})),
            claim("PVC_Stable_3", json!({"volumeName": "Vol_Stable_3"})),
            claim("PVC_Multi", json!({"volumeName": "Vol_Multi"})),
            claim("PVC_NoSC", json!({"storageClassName": "Class_0"})),
            claim("PVC_EmptySC", json!({})),
            claim("PVC_WaitSC", json!({"storageClassName": "Class_Wait"})),
            claim("PVC_ImmediateSC", json!({"storageClassName": "Class_Immediate"})),
            claim(
                "PVC_BoundImmediate",
                json!({"storageClassName": "Class_Bound_Immediate"}),
            ),
        ],
        [
            volume("Vol_1", json!({BETA_ZONE: "us-west1-a"})),
            volume("Vol_2", json!({BETA_REGION: "us-west1", "uselessLabel": "none"})),
            volume("Vol_Stable_1", json!({ZONE: "us-west1-a"})),
            volume("Vol_Stable_3", json!({ZONE: "us-west1-a", REGION: "us-west1-a"})),
            volume("Vol_Multi", json!({ZONE: "us-west1-a__us-west1-b"})),
        ],
        [
            class("Class_Immediate", None),
            class("Class_Wait", Some("WaitForFirstConsumer")),
            class("Class_Bound_Immediate", Some("Immediate")),
        ],
    )
}

fn with_storage(nodes: Vec<Node>, pods: Vec<Pod>, storage: Storage) -> Snapshot {
    let mut snapshot = Snapshot::build(nodes, pods).unwrap();
    snapshot.set_storage(storage);
    snapshot
}

/// `TestSingleZone`: each row is (claim, node labels, whether the node fits).
#[test]
fn volume_zone_compares_volume_labels_with_node_labels() {
    let rows = [
        ("PVC_1", json!({}), true),
        ("PVC_1", json!({BETA_ZONE: "us-west1-a", "uselessLabel": "none"}), true),
        ("PVC_2", json!({BETA_REGION: "us-west1", "uselessLabel": "none"}), true),
        (
            "PVC_2",
            json!({BETA_REGION: "no_us-west1", "uselessLabel": "none"}),
            false,
        ),
        (
            "PVC_1",
            json!({BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            false,
        ),
        (
            "PVC_Stable_1",
            json!({ZONE: "us-west1-a", "uselessLabel": "none"}),
            true,
        ),
        (
            "PVC_Stable_1",
            json!({ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            false,
        ),
        // A volume with zone and region on a node with only the zone.
        ("PVC_Stable_3", json!({ZONE: "us-west1-a"}), false),
        // A GA-labelled volume does not fall back to a node's beta label.
        ("PVC_Stable_1", json!({BETA_ZONE: "us-west1-a"}), false),
        // A beta-labelled volume falls back to the node's GA label.
        ("PVC_1", json!({ZONE: "us-west1-a"}), true),
        ("PVC_1", json!({ZONE: "us-west1-b"}), false),
        // Several zones separated by `__` (`TestMultiZone`).
        ("PVC_Multi", json!({ZONE: "us-west1-b"}), true),
        ("PVC_Multi", json!({ZONE: "us-west1-c"}), false),
    ];
    for (claim, labels, fits) in rows {
        let snapshot = with_storage(vec![node("host1", labels.clone())], Vec::new(), zone_storage());
        let decision = decide(&snapshot, &pod("pod_1", claim_volume(claim), None));
        let expected = (!fits).then(|| {
            (
                "VolumeZone".to_string(),
                Code::UnschedulableAndUnresolvable,
                "node(s) had no available volume zone".to_string(),
            )
        });
        assert_eq!(rejection(&decision, "host1"), expected, "{claim} on {labels}");
        if fits {
            assert_eq!(decision.chosen(), Some("host1"), "{claim} on {labels}");
        } else {
            assert_eq!(
                decision.message(),
                Some("0/1 nodes are available: 1 node(s) had no available volume zone.")
            );
        }
    }
}

/// `TestWithBinding` and the lookups: unbound claims by class binding mode, missing objects.
#[test]
fn volume_zone_prefilter_handles_unbound_and_missing_objects() {
    let rows = [
        (
            "PVC_EmptySC",
            Some("PersistentVolumeClaim had no pv name and storageClass name"),
        ),
        ("PVC_NoSC", Some("storageclass.storage.k8s.io \"Class_0\" not found")),
        (
            "PVC_ImmediateSC",
            Some("VolumeBindingMode not set for StorageClass \"Class_Immediate\""),
        ),
        ("PVC_BoundImmediate", Some("PersistentVolume had no name")),
        ("PVC_4", Some("persistentvolume \"Vol_not_exist\" not found")),
        ("PVC_missing", Some("persistentvolumeclaim \"PVC_missing\" not found")),
        ("PVC_WaitSC", None),
    ];
    let labels = json!({BETA_ZONE: "us-west1-a", "uselessLabel": "none"});
    // VolumeZone's own PreFilter, as upstream's table tests it: without VolumeBinding, whose PreFilter runs first
    // in the default profile (`volume_binding_speaks_first_for_unbound_claims`).
    let mut profile = Profile::default_provider();
    profile
        .filters
        .retain(|f| *f != FilterEntry::Plugin(FilterPlugin::VolumeBinding));
    profile.ignored_features.insert(Feature::PersistentVolumeClaims);
    for (claim, reason) in rows {
        let snapshot = with_storage(vec![node("host1", labels.clone())], Vec::new(), zone_storage());
        let decision = Engine::new(&profile, 1)
            .unwrap()
            .schedule(&snapshot, &pod("pod_1", claim_volume(claim), None))
            .unwrap();
        match reason {
            Some(reason) => {
                // A missing claim is found first by VolumeRestrictions, which runs earlier with the same text.
                let plugin = if claim == "PVC_missing" {
                    "VolumeRestrictions"
                } else {
                    "VolumeZone"
                };
                let rejection = pre_filter_rejection(&decision).expect("a PreFilter rejection");
                assert_eq!(
                    (&*rejection.plugin, rejection.code, rejection.message()),
                    (plugin, Code::UnschedulableAndUnresolvable, reason.to_string()),
                    "{claim}"
                );
                assert_eq!(
                    decision.message(),
                    Some(format!("0/1 nodes are available: {reason}.").as_str())
                );
            }
            None => {
                assert_eq!(decision.chosen(), Some("host1"), "{claim}");
                assert!(decision.skipped_filters.iter().any(|f| &**f == "VolumeZone"), "{claim}");
            }
        }
    }
}

/// The same claims in the default profile: VolumeBinding's PreFilter runs before VolumeZone's.
#[test]
fn volume_binding_speaks_first_for_unbound_claims() {
    let labels = json!({BETA_ZONE: "us-west1-a"});
    let unbound = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.";
    let rows = [
        ("PVC_EmptySC", Some(unbound)),
        ("PVC_NoSC", Some(unbound)),
        ("PVC_BoundImmediate", Some(unbound)),
        // Bound: VolumeBinding's PreFilter passes, VolumeZone's finds the volume missing.
        (
            "PVC_4",
            Some("0/1 nodes are available: persistentvolume \"Vol_not_exist\" not found."),
        ),
        ("PVC_WaitSC", None),
    ];
    for (claim, message) in rows {
        let snapshot = with_storage(vec![node("host1", labels.clone())], Vec::new(), zone_storage());
        let decision = decide(&snapshot, &pod("pod_1", claim_volume(claim), None));
        assert_eq!(decision.message(), message, "{claim}");
    }
    // A class without a binding mode is an error of VolumeBinding's PreFilter.
    let snapshot = with_storage(vec![node("host1", labels)], Vec::new(), zone_storage());
    let decision = decide(&snapshot, &pod("pod_1", claim_volume("PVC_ImmediateSC"), None));
    assert!(
        matches!(&decision.outcome, Outcome::Error { message }
            if message == "running PreFilter plugin \"VolumeBinding\": VolumeBindingMode not set for StorageClass \"Class_Immediate\""),
        "{:?}",
        decision.outcome
    );
}

#[test]
fn in_tree_disks_conflict_as_upstream() {
    let gce =
        |pd: &str, read_only: bool| json!([{"name": "d", "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}]);
    let ebs = |id: &str| json!([{"name": "d", "awsElasticBlockStore": {"volumeID": id}}]);
    let iscsi = |iqn: &str, read_only: bool| json!([{"name": "d", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": read_only}}]);
    let rbd = |monitors: &[&str], pool: &str, image: &str, read_only: bool| json!([{"name": "d", "rbd": {"monitors": monitors, "pool": pool, "image": image, "readOnly": read_only}}]);
    // (existing pod's volumes, new pod's volumes, conflict)
    let rows = [
        (gce("foo", false), gce("foo", false), true),
        (gce("foo", false), gce("bar", false), false),
        (gce("foo", true), gce("foo", true), false),
        (gce("foo", true), gce("foo", false), true),
        (ebs("foo"), ebs("foo"), true),
        (ebs("foo"), ebs("bar"), false),
        (iscsi("iqn.a", false), iscsi("iqn.a", false), true),
        (iscsi("iqn.a", false), iscsi("iqn.b", false), false),
        (iscsi("iqn.a", true), iscsi("iqn.a", true), false),
        (
            rbd(&["a", "b"], "p", "i", false),
            rbd(&["c", "a"], "p", "i", false),
            true,
        ),
        (
            rbd(&["a", "b"], "p", "i", false),
            rbd(&["c", "d"], "p", "i", false),
            false,
        ),
        (rbd(&["a"], "p", "i", false), rbd(&["a"], "p", "other", false), false),
        (rbd(&["a"], "p", "i", true), rbd(&["a"], "p", "i", true), false),
    ];
    for (existing, new, conflict) in rows {
        // No storage objects: the disk check needs only the pods on the node.
        let snapshot = Snapshot::build(
            vec![node("n1", json!({})), node("n2", json!({}))],
            vec![pod("existing", existing.clone(), Some("n1"))],
        )
        .unwrap();
        let decision = decide(&snapshot, &pod("new", new.clone(), None));
        let expected = conflict.then(|| {
            (
                "VolumeRestrictions".to_string(),
                Code::Unschedulable,
                "node(s) had no available disk".to_string(),
            )
        });
        assert_eq!(rejection(&decision, "n1"), expected, "{existing} vs {new}");
        assert_eq!(rejection(&decision, "n2"), None);
    }
    // A pod without restricted volumes skips the plugin ("one state").
    let snapshot = Snapshot::build(
        vec![node("n1", json!({}))],
        vec![pod("existing", gce("foo", false), Some("n1"))],
    )
    .unwrap();
    let decision = decide(&snapshot, &pod("new", json!([{"name": "e", "emptyDir": {}}]), None));
    assert!(decision.skipped_filters.iter().any(|f| &**f == "VolumeRestrictions"));
    assert_eq!(decision.chosen(), Some("n1"));
}

#[test]
fn a_read_write_once_pod_claim_in_use_is_unschedulable_everywhere() {
    let storage = || {
        Storage::new(
            [
                claim("rwop", json!({"accessModes": ["ReadWriteOncePod"], "volumeName": "pv"})),
                claim("rwo", json!({"accessModes": ["ReadWriteOnce"], "volumeName": "pv2"})),
            ],
            [volume("pv", json!({})), volume("pv2", json!({}))],
            [],
        )
    };
    let nodes = || vec![node("n1", json!({})), node("n2", json!({}))];
    let reason = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

    let snapshot = with_storage(nodes(), vec![pod("user", claim_volume("rwop"), Some("n1"))], storage());
    let decision = decide(&snapshot, &pod("new", claim_volume("rwop"), None));
    for node in ["n1", "n2"] {
        assert_eq!(
            rejection(&decision, node),
            Some((
                "VolumeRestrictions".to_string(),
                Code::Unschedulable,
                reason.to_string()
            ))
        );
    }
    assert_eq!(
        decision.message(),
        Some(format!("0/2 nodes are available: 2 {reason}.").as_str())
    );

    // Unused, or used only in another namespace: fits.
    let snapshot = with_storage(nodes(), Vec::new(), storage());
    assert!(
        decide(&snapshot, &pod("new", claim_volume("rwop"), None))
            .chosen()
            .is_some()
    );
    let mut elsewhere = pod("user", claim_volume("rwop"), Some("n1"));
    elsewhere.metadata.namespace = Some("other".to_string());
    let snapshot = with_storage(nodes(), vec![elsewhere], storage());
    assert!(
        decide(&snapshot, &pod("new", claim_volume("rwop"), None))
            .chosen()
            .is_some()
    );

    // A ReadWriteOnce claim in use is not this plugin's concern.
    let snapshot = with_storage(nodes(), vec![pod("user", claim_volume("rwo"), Some("n1"))], storage());
    assert!(
        decide(&snapshot, &pod("new", claim_volume("rwo"), None))
            .chosen()
            .is_some()
    );
}

#[test]
fn without_storage_objects_claims_are_refused_or_ignored_as_before() {
    let snapshot = Snapshot::build(vec![node("n1", json!({ZONE: "a"}))], Vec::new()).unwrap();
    let claimed = pod("new", claim_volume("missing"), None);
    let refused = Engine::new(&Profile::default_provider(), 1)
        .unwrap()
        .schedule(&snapshot, &claimed)
        .unwrap();
    assert_eq!(
        refused.message(),
        Some(
            "0/1 nodes are available: pod uses PersistentVolumeClaims, which need VolumeBinding and \
             NodeVolumeLimits (not evaluated by Ruleplane)."
        )
    );
    // Ignored: both volume plugins skip (no lookups of claims the snapshot cannot hold).
    let decision = decide(&snapshot, &claimed);
    assert_eq!(decision.chosen(), Some("n1"));
    for plugin in ["VolumeRestrictions", "VolumeZone"] {
        assert!(decision.skipped_filters.iter().any(|f| &**f == plugin), "{plugin}");
    }
}

#[test]
fn preemption_frees_a_read_write_once_pod_claim_by_evicting_its_user() {
    let storage = Storage::new(
        [claim(
            "rwop",
            json!({"accessModes": ["ReadWriteOncePod"], "volumeName": "pv"}),
        )],
        [volume("pv", json!({}))],
        [],
    );
    let mut user = pod("user", claim_volume("rwop"), Some("n2"));
    user.spec.as_mut().unwrap().priority = Some(0);
    let mut bystander = pod("bystander", json!([]), Some("n1"));
    bystander.spec.as_mut().unwrap().priority = Some(0);
    let snapshot = with_storage(
        vec![node("n1", json!({})), node("n2", json!({}))],
        vec![bystander, user],
        storage,
    );
    let mut preemptor = pod("high", claim_volume("rwop"), None);
    preemptor.spec.as_mut().unwrap().priority = Some(10);
    let mut engine = engine();
    engine.enable_preemption();
    let decision = engine.schedule(&snapshot, &preemptor).unwrap();
    // Only evicting the claim's user helps: on n1 removing the bystander leaves the claim in use.
    let preemption = decision
        .post_filter()
        .and_then(|p| p.preemption.as_ref())
        .expect("a preemption");
    assert_eq!(&*preemption.node, "n2");
    let victims: Vec<&str> = preemption.victims.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(victims, ["user"]);
}
