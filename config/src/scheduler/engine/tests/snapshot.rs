//! Snapshot accounting: assume and remove, node order, images, errors.

use k8s_openapi::api::core::v1::Pod;

use super::harness::{TestNode, TestPod};
use crate::scheduler::engine::{Engine, Profile, Snapshot, SnapshotError};

fn node(yaml: &str) -> k8s_openapi::api::core::v1::Node {
    serde_saphyr::from_str::<TestNode>(yaml)
        .map(|n| n.to_node())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn pod(yaml: &str) -> Pod {
    serde_saphyr::from_str::<TestPod>(yaml)
        .map(|p| p.to_pod())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn assume_accounts_the_pod_and_remove_releases_it() {
    let mut snapshot = Snapshot::build(
        vec![node("{name: n1, allocatable: {cpu: '2', memory: 4Gi, pods: '110'}}")],
        vec![],
    )
    .unwrap();
    let incoming = pod(
        "{name: p, requests: {cpu: 1500m, memory: 1Gi}, spec: {containers: [{name: c, ports: [{containerPort: 1, hostPort: 80}]}]}}",
    );
    snapshot.assume(&incoming, "n1").unwrap();
    let info = snapshot.get("n1").unwrap();
    assert_eq!(info.requested.milli_cpu, 1500);
    assert_eq!(info.requested.memory, 1024 * 1024 * 1024);
    assert_eq!(info.non_zero_requested, (1500, 1024 * 1024 * 1024));
    assert_eq!(info.pods().len(), 1);
    assert_eq!(snapshot.node_of_pod("default/p"), Some("n1"));

    // The next decision sees the pod: 1 CPU more no longer fits, and the host port is taken.
    let mut engine = Engine::new(&Profile::default_provider(), 7).unwrap();
    let decision = engine
        .schedule(&snapshot, &pod("{name: q, requests: {cpu: '1'}}"))
        .unwrap();
    assert_eq!(decision.message(), Some("0/1 nodes are available: 1 Insufficient cpu."));

    assert_eq!(
        snapshot.assume(&incoming, "n1"),
        Err(SnapshotError::DuplicatePod {
            pod: "default/p".into()
        })
    );
    let removed = snapshot.remove_pod("default/p").unwrap();
    assert_eq!(removed.name(), "p");
    let info = snapshot.get("n1").unwrap();
    assert_eq!(
        (info.requested.milli_cpu, info.requested.memory, info.pods().len()),
        (0, 0, 0)
    );
    assert_eq!(info.non_zero_requested, (0, 0));
    let decision = engine
        .schedule(&snapshot, &pod("{name: q, requests: {cpu: '1'}}"))
        .unwrap();
    assert_eq!(decision.chosen(), Some("n1"));
    assert!(matches!(
        snapshot.remove_pod("default/p"),
        Err(SnapshotError::UnknownPod { .. })
    ));
}

#[test]
fn best_effort_pods_count_scoring_defaults_only() {
    let mut snapshot = Snapshot::build(vec![node("{name: n1, allocatable: {cpu: '2', pods: '110'}}")], vec![]).unwrap();
    snapshot.assume(&pod("{name: a, uid: u-1}"), "n1").unwrap();
    let info = snapshot.get("n1").unwrap();
    assert_eq!((info.requested.milli_cpu, info.requested.memory), (0, 0));
    assert_eq!(info.non_zero_requested, (100, 200 * 1024 * 1024));
    // Pods with a UID are keyed by it.
    assert_eq!(snapshot.node_of_pod("u-1"), Some("n1"));
}

#[test]
fn errors_name_the_problem() {
    let nodes = vec![node("{name: n1, allocatable: {cpu: '2'}}")];
    let err = Snapshot::build(nodes.clone(), vec![pod("{name: a, node: n9}")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod default/a is bound to node n9, which is not in the snapshot"
    );
    let err = Snapshot::build(nodes.clone(), vec![pod("{name: a}")]).unwrap_err();
    assert_eq!(
        err,
        SnapshotError::PodWithoutNode {
            pod: "default/a".into()
        }
    );
    let err = Snapshot::build(nodes, vec![pod("{name: a, node: n1, requests: {cpu: 2x}}")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod/default/a: spec.containers[0].resources.requests[cpu]: invalid quantity `2x`: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    let err = Snapshot::build(vec![node("{name: n1, allocatable: {cpu: lots}}")], vec![]).unwrap_err();
    assert!(matches!(err, SnapshotError::InvalidQuantity { ref object, .. } if object == "node/n1"));
}

#[test]
fn nodes_are_listed_round_robin_across_zones() {
    let zone = |name: &str, zone: &str| {
        node(&format!(
            "{{name: {name}, labels: {{topology.kubernetes.io/zone: {zone}}}}}"
        ))
    };
    let snapshot = Snapshot::build(
        vec![
            zone("a1", "a"),
            zone("a2", "a"),
            zone("a3", "a"),
            zone("b1", "b"),
            node("{name: x1}"),
            zone("b2", "b"),
        ],
        vec![],
    )
    .unwrap();
    let order: Vec<&str> = snapshot.list().map(|n| n.name()).collect();
    assert_eq!(order, ["a1", "b1", "x1", "a2", "b2", "a3"]);
}

#[test]
fn node_updates_keep_pods_and_removal_drops_them() {
    let mut snapshot = Snapshot::build(
        vec![
            node("{name: n1, allocatable: {cpu: '2', pods: '110'}}"),
            node("{name: n2, allocatable: {cpu: '2'}}"),
        ],
        vec![pod("{name: a, node: n1, requests: {cpu: 500m}}")],
    )
    .unwrap();
    snapshot
        .upsert_node(node("{name: n1, allocatable: {cpu: '4', pods: '110'}, labels: {x: y}}"))
        .unwrap();
    let info = snapshot.get("n1").unwrap();
    assert_eq!(
        (info.allocatable.milli_cpu, info.requested.milli_cpu, info.pods().len()),
        (4000, 500, 1)
    );
    let removed = snapshot.remove_node("n1").unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(snapshot.num_nodes(), 1);
    assert_eq!(snapshot.node_of_pod("default/a"), None);
    assert!(matches!(
        snapshot.remove_node("n1"),
        Err(SnapshotError::NodeNotFound { .. })
    ));
}

#[test]
fn images_are_counted_per_node_with_the_first_reported_size() {
    let mut snapshot = Snapshot::build(
        vec![
            node("{name: n1, images: [{names: ['nginx:1', 'docker.io/nginx:1'], sizeBytes: 100}]}"),
            node("{name: n2, images: [{names: ['nginx:1'], sizeBytes: 999}]}"),
        ],
        vec![],
    )
    .unwrap();
    let summary = snapshot.image("nginx:1").unwrap();
    assert_eq!((summary.size, summary.nodes), (100, 2));
    assert_eq!(snapshot.image("docker.io/nginx:1").map(|s| s.nodes), Some(1));
    snapshot.remove_node("n1").unwrap();
    assert_eq!(snapshot.image("nginx:1").map(|s| s.nodes), Some(1));
    assert_eq!(snapshot.image("docker.io/nginx:1"), None);
}
