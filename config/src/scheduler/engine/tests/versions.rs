//! kube-scheduler's differences between v1.35, v1.36 and v1.37, each seen from both sides through the engine.

use serde_json::{Value, json};

use super::preemption::{node, on, pod, snapshot};
use crate::KubernetesVersion::{self, V1_35, V1_36, V1_37};
use crate::scheduler::engine::{Decision, Engine, Profile, Snapshot};

fn engine(version: KubernetesVersion) -> Engine {
    Engine::for_version(&Profile::default_provider(), version, 1).unwrap()
}

fn decide(version: KubernetesVersion, snapshot: &Snapshot, pod: Value) -> Decision {
    engine(version)
        .schedule(snapshot, &serde_json::from_value(pod).unwrap())
        .unwrap()
}

fn raw_score(decision: &Decision, node: &str, plugin: &str) -> i64 {
    decision.node(node).and_then(|n| n.score(plugin)).expect("scored").raw
}

/// A pod requesting `cpu` and `memory`.
fn sized(name: &str, cpu: &str, memory: &str, extra: Value) -> Value {
    let mut pod = pod(name, cpu, 0, extra);
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!(memory);
    pod
}

#[test]
fn balanced_allocation_scores_the_balance_with_the_pod_until_v1_36_then_the_change_it_makes() {
    // Node `busy` (4 cpu, 8Gi) has 2 cpu requested: the pod's 4Gi makes it balanced (75 → 100). Node `idle` is
    // balanced until the pod makes it lopsided (100 → 75).
    let snapshot = snapshot(
        vec![node("busy", "4"), node("idle", "4")],
        vec![sized("running", "2", "0", on("busy"))],
    );
    let incoming = || sized("p", "0", "4Gi", json!({}));
    let scores = |version| {
        let decision = decide(version, &snapshot, incoming());
        let balanced = |node| raw_score(&decision, node, "NodeResourcesBalancedAllocation");
        (balanced("busy"), balanced("idle"))
    };
    assert_eq!(scores(V1_35), (100, 75), "the balance with the pod");
    // 50 + (50 + 100 − 75) / 2 and 50 + (50 + 75 − 100) / 2, in Go's integer division.
    assert_eq!(scores(V1_36), (87, 62), "the change the pod makes");
    assert_eq!(scores(V1_37), (87, 62));
}

#[test]
fn image_locality_counts_image_volumes_in_the_sum_from_v1_36_and_in_the_threshold_from_v1_37() {
    // A 500MB image on one node of two: scaled by its spread to 250MB.
    let mut with_image = node("with-image", "4");
    with_image["status"]["images"] = json!([{"names": ["registry/data:1"], "sizeBytes": 500 * 1024 * 1024}]);
    let snapshot = snapshot(vec![with_image, node("without", "4")], Vec::new());
    let incoming = pod(
        "p",
        "1",
        0,
        json!({"spec": {"volumes": [{"name": "data", "image": {"reference": "registry/data:1"}}]}}),
    );
    let score = |version| {
        raw_score(
            &decide(version, &snapshot, incoming.clone()),
            "with-image",
            "ImageLocality",
        )
    };
    assert_eq!(score(V1_35), 0, "an image volume is not counted");
    // 100 · (250 − 23) / (1000 · 1 container − 23).
    assert_eq!(score(V1_36), 23);
    // 100 · (250 − 23) / (1000 · 2 images − 23).
    assert_eq!(score(V1_37), 11);
}

#[test]
fn node_name_filters_before_node_unschedulable_from_v1_37() {
    let first_two = |version| {
        engine(version)
            .filter_names()
            .take(2)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(first_two(V1_35), ["NodeUnschedulable", "NodeName"]);
    assert_eq!(first_two(V1_36), ["NodeUnschedulable", "NodeName"]);
    assert_eq!(first_two(V1_37), ["NodeName", "NodeUnschedulable"]);
}

#[test]
fn a_successful_preemption_says_where_it_placed_the_pod_from_v1_37() {
    let snapshot = snapshot(vec![node("n1", "2")], vec![pod("low", "2", 0, on("n1"))]);
    let event = |version| {
        let mut engine = engine(version);
        engine.enable_preemption();
        let decision = engine
            .schedule(
                &snapshot,
                &serde_json::from_value(pod("high", "1", 10, json!({}))).unwrap(),
            )
            .unwrap();
        assert_eq!(
            decision
                .post_filter()
                .and_then(|p| p.preemption.as_ref())
                .map(|p| &*p.node),
            Some("n1")
        );
        decision.event_message().unwrap()
    };
    assert_eq!(event(V1_35), "0/1 nodes are available: 1 Insufficient cpu.");
    assert_eq!(event(V1_36), "0/1 nodes are available: 1 Insufficient cpu.");
    assert_eq!(
        event(V1_37),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n1, \
         preempting 1 victims"
    );
}

#[test]
fn dynamic_resources_explains_a_pod_without_claims_until_v1_37() {
    // Nothing to preempt: the node's pod has the same priority.
    let snapshot = snapshot(vec![node("n1", "2")], vec![pod("peer", "2", 10, on("n1"))]);
    let event = |version| {
        let mut engine = engine(version);
        engine.enable_preemption();
        let pod = serde_json::from_value(pod("p", "1", 10, json!({}))).unwrap();
        engine.schedule(&snapshot, &pod).unwrap().event_message().unwrap()
    };
    let preemption = "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    let fit = "0/1 nodes are available: 1 Insufficient cpu.";
    assert_eq!(event(V1_35), format!("{fit} no new claims to deallocate, {preemption}"));
    assert_eq!(event(V1_36), format!("{fit} no new claims to deallocate, {preemption}"));
    assert_eq!(event(V1_37), format!("{fit} {preemption}"));
}

#[test]
fn a_pod_needing_a_node_feature_goes_only_to_nodes_declaring_it_from_v1_36() {
    let mut declaring = node("declaring", "4");
    declaring["status"]["declaredFeatures"] = json!(["RestartAllContainersOnContainerExits"]);
    let snapshot = snapshot(vec![declaring, node("plain", "4")], Vec::new());
    let rule = json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]);
    let restarts_all = json!({"spec": {"containers": [
        {"name": "c", "restartPolicyRules": rule, "resources": {"requests": {"cpu": "1"}}}
    ]}});
    let decision = |version| decide(version, &snapshot, pod("p", "1", 0, restarts_all.clone()));
    let rejected = |decision: &Decision| decision.node("plain").and_then(|n| n.rejection.clone());

    let before = decision(V1_35);
    assert_eq!(rejected(&before), None, "not in v1.35's default profile");
    assert!(!engine(V1_35).filter_names().any(|f| f == "NodeDeclaredFeatures"));

    for version in [V1_36, V1_37] {
        let after = decision(version);
        assert_eq!(after.chosen(), Some("declaring"));
        let rejection = rejected(&after).expect("the plain node is rejected");
        assert_eq!(rejection.plugin.as_ref(), "NodeDeclaredFeatures");
        assert_eq!(rejection.message(), "node(s) didn't match Pod's required features");
    }
    // A pod needing nothing skips the plugin.
    let plain = decide(V1_37, &snapshot, pod("q", "1", 0, json!({})));
    assert!(plain.skipped_filters.iter().any(|f| &**f == "NodeDeclaredFeatures"));
}
