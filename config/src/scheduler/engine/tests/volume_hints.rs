//! The volume plugins' queueing hints on storage events: Queue exactly when v1.35's hint function does.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::scheduler::engine::queueing_hints::{ActionType, ClusterEvent, Hint, QueueingHints, StorageObject};
use crate::scheduler::engine::{Profile, Workloads};

const Q: Option<Hint> = Some(Hint::Queue);
const S: Option<Hint> = Some(Hint::Skip);

/// A pending pod in `default` using claim `data` and a generic ephemeral volume `scratch`.
fn waiting_pod() -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u-p"},
            "spec": {"containers": [{"name": "c"}], "volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
            ]}
        }))
        .unwrap(),
    )
}

fn ask(plugin: &str, event: &ClusterEvent) -> Option<Hint> {
    let hints = QueueingHints::new(&Profile::default_provider());
    let pod = hints.prepare(waiting_pod(), &Workloads::default());
    hints.hint(plugin, &pod, event)
}

fn object(kind: &str, value: Value) -> Arc<StorageObject> {
    fn parse<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }
    Arc::new(match kind {
        "claim" => StorageObject::Claim(std::sync::Arc::new(parse(value))),
        "volume" => StorageObject::Volume(std::sync::Arc::new(parse(value))),
        "class" => StorageObject::Class(std::sync::Arc::new(parse(value))),
        "csiNode" => StorageObject::CsiNode(std::sync::Arc::new(parse(value))),
        "attachment" => StorageObject::Attachment(std::sync::Arc::new(parse(value))),
        _ => StorageObject::Capacity(std::sync::Arc::new(parse(value))),
    })
}

fn added(kind: &str, value: Value) -> ClusterEvent {
    ClusterEvent::storage(ActionType::ADD, None, Some(object(kind, value)))
}

fn updated(kind: &str, old: Value, new: Value) -> ClusterEvent {
    ClusterEvent::storage(ActionType::UPDATE, Some(object(kind, old)), Some(object(kind, new)))
}

fn claim(namespace: &str, name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": namespace}, "spec": {}})
}

fn csi_node(count: i32, migrated: &str) -> Value {
    json!({"metadata": {"name": "n", "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": migrated}},
           "spec": {"drivers": [{"name": "ebs", "nodeID": "n", "allocatable": {"count": count}}]}})
}

#[test]
fn claim_events_queue_the_pods_using_the_claim() {
    assert_eq!(ask("VolumeZone", &added("claim", claim("default", "data"))), Q);
    assert_eq!(ask("VolumeZone", &added("claim", claim("other", "data"))), S);
    assert_eq!(
        ask("VolumeZone", &added("claim", claim("default", "p-scratch"))),
        S,
        "VolumeZone reads claims only"
    );
    assert_eq!(
        ask("VolumeBinding", &added("claim", claim("default", "p-scratch"))),
        Q,
        "the ephemeral claim"
    );
    assert_eq!(
        ask("NodeVolumeLimits", &added("claim", claim("default", "p-scratch"))),
        Q
    );
    assert_eq!(ask("VolumeRestrictions", &added("claim", claim("default", "data"))), Q);
    let update = updated("claim", claim("default", "data"), claim("default", "data"));
    assert_eq!(
        ask("VolumeRestrictions", &update),
        None,
        "VolumeRestrictions registers additions only"
    );
    assert_eq!(ask("VolumeBinding", &update), Q);
}

#[test]
fn class_and_volume_events_queue_by_what_changed() {
    let class = |mode: &str, zones: &[&str]| {
        json!({"metadata": {"name": "c"}, "provisioner": "p", "volumeBindingMode": mode,
               "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": zones}]}]})
    };
    assert_eq!(
        ask("VolumeZone", &added("class", class("WaitForFirstConsumer", &["a"]))),
        Q
    );
    assert_eq!(ask("VolumeZone", &added("class", class("Immediate", &["a"]))), S);
    let same_topologies = updated(
        "class",
        class("Immediate", &["a"]),
        class("WaitForFirstConsumer", &["a"]),
    );
    assert_eq!(ask("VolumeBinding", &same_topologies), S);
    let new_topologies = updated("class", class("Immediate", &["a"]), class("Immediate", &["a", "b"]));
    assert_eq!(ask("VolumeBinding", &new_topologies), Q);
    let volume = |labels: Value| json!({"metadata": {"name": "v", "labels": labels}});
    let relabelled = updated(
        "volume",
        volume(json!({"topology.kubernetes.io/zone": "a"})),
        volume(json!({"topology.kubernetes.io/zone": "a__b"})),
    );
    assert_eq!(ask("VolumeZone", &relabelled), Q);
    let unrelated = updated(
        "volume",
        volume(json!({"topology.kubernetes.io/zone": "a"})),
        volume(json!({"topology.kubernetes.io/zone": "a", "team": "x"})),
    );
    assert_eq!(ask("VolumeZone", &unrelated), S);
    assert_eq!(
        ask("VolumeBinding", &unrelated),
        Q,
        "VolumeBinding's volume events have no hint"
    );
}

#[test]
fn csi_events_queue_for_more_room_or_a_changed_migration() {
    assert_eq!(
        ask(
            "NodeVolumeLimits",
            &updated("csiNode", csi_node(2, ""), csi_node(3, ""))
        ),
        Q
    );
    assert_eq!(
        ask(
            "NodeVolumeLimits",
            &updated("csiNode", csi_node(3, ""), csi_node(2, ""))
        ),
        S
    );
    assert_eq!(ask("NodeVolumeLimits", &added("csiNode", csi_node(1, ""))), Q);
    let migrated = updated("csiNode", csi_node(3, ""), csi_node(2, "kubernetes.io/aws-ebs"));
    assert_eq!(ask("VolumeBinding", &migrated), Q);
    assert_eq!(
        ask("VolumeBinding", &updated("csiNode", csi_node(2, ""), csi_node(3, ""))),
        S
    );
    let detached = ClusterEvent::storage(
        ActionType::DELETE,
        Some(object(
            "attachment",
            json!({"metadata": {"name": "va"},
            "spec": {"attacher": "ebs", "nodeName": "n", "source": {"persistentVolumeName": "v"}}}),
        )),
        None,
    );
    assert_eq!(ask("NodeVolumeLimits", &detached), Q, "the pod has a claim");
    let capacity = |size: &str| {
        json!({"metadata": {"name": "c", "namespace": "d"}, "storageClassName": "c",
                                       "capacity": size})
    };
    assert_eq!(
        ask("VolumeBinding", &updated("capacity", capacity("1Gi"), capacity("2Gi"))),
        Q
    );
    assert_eq!(
        ask("VolumeBinding", &updated("capacity", capacity("2Gi"), capacity("1Gi"))),
        S
    );
}

#[test]
fn deleted_pods_queue_when_they_freed_a_claim_or_an_attachment() {
    let deleted = |namespace: &str, node: Option<&str>, volumes: Value| {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "gone", "namespace": namespace, "uid": "u-gone"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes, "nodeName": node}
        }))
        .unwrap();
        ClusterEvent::pod(ActionType::DELETE, Some(Arc::new(pod)), None)
    };
    let sharing = json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]);
    assert_eq!(
        ask("VolumeRestrictions", &deleted("default", Some("n"), sharing.clone())),
        Q
    );
    assert_eq!(
        ask("VolumeRestrictions", &deleted("other", Some("n"), sharing.clone())),
        S
    );
    assert_eq!(
        ask("NodeVolumeLimits", &deleted("other", Some("n"), sharing.clone())),
        Q
    );
    assert_eq!(
        ask("NodeVolumeLimits", &deleted("default", None, sharing)),
        S,
        "neither bound nor nominated"
    );
    assert_eq!(
        ask(
            "NodeVolumeLimits",
            &deleted("default", Some("n"), json!([{"name": "e", "emptyDir": {}}]))
        ),
        S
    );
}
