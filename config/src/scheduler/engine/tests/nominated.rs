//! Filter with nominated pods (kube-scheduler's `RunFilterPluginsWithNominatedPods`): which nominations count and
//! both passes, for resources, inter-pod (anti-)affinity and topology spread, each against a hand-computed verdict.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::preemption::{node, on, pod, snapshot};
use crate::scheduler::engine::{Decision, Engine, Profile, Snapshot};

/// A pending pod nominated to `node`.
fn nominated(name: &str, cpu: &str, priority: i32, node: &str, extra: Value) -> Pod {
    let mut value = pod(name, cpu, priority, json!({"status": {"nominatedNodeName": node}}));
    super::preemption::merge(&mut value, extra);
    serde_json::from_value(value).unwrap()
}

fn decide(engine: &mut Engine, snapshot: &Snapshot, pod: Value) -> Decision {
    engine
        .schedule(snapshot, &serde_json::from_value(pod).unwrap())
        .unwrap()
}

fn engine() -> Engine {
    Engine::new(&Profile::default_provider(), 1).unwrap()
}

fn labels(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}})
}

fn required(kind: &str, app: &str) -> Value {
    json!({"spec": {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}}})
}

fn one_node_with(pods: Vec<Pod>) -> Snapshot {
    let mut snapshot = snapshot(vec![node("n1", "2")], vec![]);
    snapshot.set_nominated_pods(pods);
    snapshot
}

#[test]
fn the_room_of_a_higher_or_equal_priority_nomination_is_kept() {
    for priority in [10, 20] {
        let snapshot = one_node_with(vec![nominated("h", "2", priority, "n1", json!({}))]);
        let decision = decide(&mut engine(), &snapshot, pod("p", "1", 10, json!({})));
        assert_eq!(
            decision.message(),
            Some("0/1 nodes are available: 1 Insufficient cpu."),
            "nominated priority {priority}"
        );
    }
}

#[test]
fn a_lower_priority_nomination_does_not_count() {
    let snapshot = one_node_with(vec![nominated("l", "2", 5, "n1", json!({}))]);
    let decision = decide(&mut engine(), &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(decision.chosen(), Some("n1"));
}

#[test]
fn the_pod_does_not_make_room_for_itself() {
    let snapshot = one_node_with(vec![nominated("p", "2", 10, "n1", json!({}))]);
    let decision = decide(
        &mut engine(),
        &snapshot,
        pod("p", "2", 10, json!({"status": {"nominatedNodeName": "n1"}})),
    );
    assert_eq!(decision.chosen(), Some("n1"));
}

#[test]
fn the_pod_goes_to_another_node_when_the_nominated_one_is_kept() {
    let mut snapshot = snapshot(vec![node("n1", "2"), node("n2", "2")], vec![]);
    snapshot.set_nominated_pods([nominated("h", "2", 20, "n1", json!({}))]);
    let decision = decide(&mut engine(), &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(decision.chosen(), Some("n2"));
    let n1 = decision
        .node("n1")
        .and_then(|n| n.rejection.as_ref())
        .expect("n1 rejected");
    assert_eq!(n1.plugin.as_ref(), "NodeResourcesFit");
}

#[test]
fn only_the_nominations_of_the_managers_schedulers_count() {
    let other = json!({"spec": {"schedulerName": "other-scheduler"}});
    let snapshot = one_node_with(vec![nominated("h", "2", 20, "n1", other)]);
    let mut engine = engine();
    engine.nominate_only_for(["my-scheduler".to_owned()].into());
    let decision = decide(&mut engine, &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(
        decision.chosen(),
        Some("n1"),
        "another scheduler's nomination is not in the nominator"
    );
    let decision = decide(&mut self::engine(), &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(decision.chosen(), None, "offline, every nomination of the input counts");
}

#[test]
fn a_nominated_pod_already_placed_is_counted_once() {
    // h is assumed on n1 (1 of 2 cpu) while its nomination is not cleared yet: p (1 cpu) still fits.
    let mut snapshot = snapshot(vec![node("n1", "2")], vec![pod("h", "1", 20, on("n1"))]);
    let mut h = nominated("h", "1", 20, "n1", json!({}));
    h.spec.as_mut().unwrap().node_name = None;
    snapshot.set_nominated_pods([h]);
    let decision = decide(&mut engine(), &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(decision.chosen(), Some("n1"));
}

#[test]
fn anti_affinity_to_a_nominated_pod_rejects_in_the_first_pass() {
    let snapshot = one_node_with(vec![nominated("web", "0", 20, "n1", labels("web"))]);
    let decision = decide(
        &mut engine(),
        &snapshot,
        pod("p", "0", 10, required("podAntiAffinity", "web")),
    );
    assert_eq!(
        decision.message(),
        Some("0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.")
    );
}

#[test]
fn a_nominated_pods_anti_affinity_counts_only_when_the_cycle_ran_inter_pod_affinity() {
    let mut web = required("podAntiAffinity", "p");
    super::preemption::merge(&mut web, labels("web"));
    // No placed pod has required anti-affinity and p has no terms: InterPodAffinity's PreFilter skips, and
    // kube-scheduler then runs neither its AddPod nor its Filter: the nominated pod's anti-affinity is not seen.
    let alone = one_node_with(vec![nominated("web", "0", 20, "n1", web.clone())]);
    let decision = decide(&mut engine(), &alone, pod("p", "0", 10, labels("p")));
    assert_eq!(decision.chosen(), Some("n1"));
    // A placed pod on n2 with anti-affinity to p makes the plugin run; AddPod then counts web's term on n1.
    let mut guard = required("podAntiAffinity", "p");
    super::preemption::merge(&mut guard, on("n2"));
    let mut guarded = snapshot(
        vec![node("n1", "2"), node("n2", "2")],
        vec![pod("guard", "0", 0, guard)],
    );
    guarded.set_nominated_pods([nominated("web", "0", 20, "n1", web)]);
    let decision = decide(&mut engine(), &guarded, pod("p", "0", 10, labels("p")));
    assert_eq!(
        decision.message(),
        Some("0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules.")
    );
}

#[test]
fn affinity_to_a_nominated_pod_alone_fails_the_second_pass() {
    // With web added the affinity holds; without it nothing matches, so the node is rejected.
    let snapshot = one_node_with(vec![nominated("web", "0", 20, "n1", labels("web"))]);
    let decision = decide(
        &mut engine(),
        &snapshot,
        pod("p", "0", 10, required("podAffinity", "web")),
    );
    assert_eq!(
        decision.message(),
        Some("0/1 nodes are available: 1 node(s) didn't match pod affinity rules.")
    );
}

#[test]
fn a_nominated_pod_counts_in_topology_spread() {
    // h (app=x) nominated to n1: there n1 counts 1, n2 0, so placing p on n1 makes a skew of 2 > 1.
    let mut snapshot = snapshot(vec![node("n1", "2"), node("n2", "2")], vec![]);
    snapshot.set_nominated_pods([nominated("h", "0", 20, "n1", labels("x"))]);
    let mut spread = json!({"spec": {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}}
    }]}});
    super::preemption::merge(&mut spread, labels("x"));
    let decision = decide(&mut engine(), &snapshot, pod("p", "0", 10, spread));
    assert_eq!(decision.chosen(), Some("n2"));
    let n1 = decision
        .node("n1")
        .and_then(|n| n.rejection.as_ref())
        .expect("n1 rejected");
    assert_eq!(n1.plugin.as_ref(), "PodTopologySpread");
}

#[test]
fn the_nominated_node_is_not_taken_from_a_higher_nomination() {
    // p was nominated to n1 earlier, but a higher-priority pod is nominated there now: n1 is no longer tried first.
    let mut snapshot = snapshot(vec![node("n1", "2"), node("n2", "2")], vec![]);
    snapshot.set_nominated_pods([nominated("h", "2", 20, "n1", json!({}))]);
    let decision = decide(
        &mut engine(),
        &snapshot,
        pod("p", "1", 10, json!({"status": {"nominatedNodeName": "n1"}})),
    );
    assert_eq!(decision.chosen(), Some("n2"));
}
