//! Workload-aware preemption on synthetic clusters: which units go, which stay, and what the group is told.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use super::*;
use crate::KubernetesVersion;
use crate::scheduler::engine::Profile;

fn node(name: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}))
    .expect("node")
}

/// A pod asking for `cpu`, of `priority`, bound to `node` when given, started at `started` (seconds in 2026).
fn pod(name: &str, cpu: &str, priority: i32, node: Option<&str>, extra: Value) -> Pod {
    let mut pod = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["status"] = json!({"phase": "Running"});
    }
    merge(&mut pod, extra);
    serde_json::from_value(pod).expect("pod")
}

fn merge(into: &mut Value, extra: Value) {
    match (into, extra) {
        (Value::Object(into), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, extra) => *into = extra,
    }
}

fn started(seconds: u32) -> Value {
    json!({"status": {"startTime": format!("2026-01-01T00:00:{seconds:02}Z")}})
}

fn engine() -> Engine {
    Engine::for_version(&Profile::default_provider(), KubernetesVersion::V1_37, 1).expect("engine")
}

/// Preempts for a gang of `members` (all needed), of priority 100, on `nodes` holding `running`.
fn preempt(
    nodes: Vec<Node>,
    running: Vec<Pod>,
    members: &[Pod],
    groups: &VictimGroups,
    pdbs: Vec<PodDisruptionBudget>,
) -> (GroupPreemption, Option<GroupVictims>) {
    let mut snapshot = Snapshot::build(nodes, running).expect("snapshot");
    snapshot.set_pod_disruption_budgets(pdbs);
    let members: Vec<&Pod> = members.iter().collect();
    let preemptor = Preemptor {
        members: &members,
        min_count: members.len(),
        placed_before: 0,
        priority: 100,
    };
    preempt_for_group(&mut engine(), &snapshot, &preemptor, groups).expect("preempts")
}

fn gang(count: usize, cpu: &str) -> Vec<Pod> {
    (0..count)
        .map(|i| pod(&format!("m{i}"), cpu, 100, None, json!({})))
        .collect()
}

#[test]
fn a_gang_evicts_only_the_pods_on_the_nodes_it_needs() {
    // Node a is full of low-priority pods, node c is empty: one member goes to each, so a's two pods go.
    let running = vec![
        pod("low-1", "1", 10, Some("a"), json!({})),
        pod("low-2", "1", 10, Some("a"), json!({})),
    ];
    let (said, plan) = preempt(
        vec![node("a", "2"), node("c", "2")],
        running,
        &gang(2, "2"),
        &VictimGroups::new(),
        Vec::new(),
    );
    assert_eq!(said, GroupPreemption::Preempting { victims: 2 });
    let plan = plan.expect("a plan");
    let mut victims = plan.victims.clone();
    victims.sort();
    assert_eq!(victims, ["ns/low-1", "ns/low-2"]);
    let mut nodes: Vec<&str> = plan.nominations.iter().map(|(_, node)| node.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["a", "c"], "each member nominated to its node");
}

#[test]
fn victims_are_given_back_most_important_first_and_budgets_are_kept_before_that() {
    // One member of 1 cpu on node a of 2 cpu holding two 1-cpu pods: one must go. Without a budget the earlier
    // started pod (more important) is given back first and stays.
    let running = || {
        vec![
            pod(
                "late",
                "1",
                10,
                Some("a"),
                merge_all(started(30), json!({"metadata": {"labels": {"app": "db"}}})),
            ),
            pod("early", "1", 10, Some("a"), started(10)),
        ]
    };
    let one = gang(1, "1");
    let (_, plan) = preempt(vec![node("a", "2")], running(), &one, &VictimGroups::new(), Vec::new());
    assert_eq!(plan.expect("a plan").victims, ["ns/late"]);
    // A budget with no disruption left protects `late`: a violating unit is given back before the others.
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}))
    .expect("pdb");
    let (said, plan) = preempt(vec![node("a", "2")], running(), &one, &VictimGroups::new(), vec![pdb]);
    assert_eq!(said, GroupPreemption::Preempting { victims: 1 });
    let plan = plan.expect("a plan");
    assert_eq!(plan.victims, ["ns/early"]);
    assert_eq!(plan.pdb_violations, 0);
}

fn merge_all(mut a: Value, b: Value) -> Value {
    merge(&mut a, b);
    a
}

#[test]
fn a_pod_group_disrupted_all_together_goes_whole_or_not_at_all() {
    // `batch` runs one pod on a and one on b; the gang needs room on a only, yet both of batch's pods go.
    let member_of = |name: &str| json!({"spec": {"schedulingGroup": {"podGroupName": name}}});
    let running = vec![
        pod("batch-0", "2", 10, Some("a"), member_of("batch")),
        pod("batch-1", "1", 10, Some("b"), member_of("batch")),
        pod("solo", "1", 10, Some("b"), json!({})),
    ];
    let groups = VictimGroups::from([(
        ("ns".to_string(), "batch".to_string()),
        VictimGroup {
            priority: 10,
            all: true,
        },
    )]);
    let (said, plan) = preempt(
        vec![node("a", "2"), node("b", "2")],
        running,
        &gang(1, "2"),
        &groups,
        Vec::new(),
    );
    let plan = plan.expect("a plan");
    let mut victims = plan.victims.clone();
    victims.sort();
    // Node b was full too; either node can take the member after removal, so what goes is one of two whole sets:
    // batch (both pods), or b's pods (batch whole again, since its unit is atomic, and solo).
    assert!(
        victims == ["ns/batch-0", "ns/batch-1"] || victims == ["ns/batch-0", "ns/batch-1", "ns/solo"],
        "{victims:?}"
    );
    assert_eq!(said, GroupPreemption::Preempting { victims: victims.len() });
}

#[test]
fn no_lower_priority_pod_never_and_a_group_too_big_say_so() {
    let running = vec![pod("high", "2", 1000, Some("a"), json!({}))];
    let (said, plan) = preempt(
        vec![node("a", "2")],
        running.clone(),
        &gang(1, "2"),
        &VictimGroups::new(),
        Vec::new(),
    );
    assert_eq!((said, plan), (GroupPreemption::NoVictims, None));
    let never = vec![pod(
        "m0",
        "2",
        100,
        None,
        json!({"spec": {"preemptionPolicy": "Never"}}),
    )];
    let low = vec![pod("low", "2", 10, Some("a"), json!({}))];
    let (said, _) = preempt(
        vec![node("a", "2")],
        low.clone(),
        &never,
        &VictimGroups::new(),
        Vec::new(),
    );
    assert_eq!(said, GroupPreemption::Never);
    // Two members of 2 cpu on one node of 2 cpu: even without `low` the group does not fit.
    let (said, plan) = preempt(
        vec![node("a", "2")],
        low,
        &gang(2, "2"),
        &VictimGroups::new(),
        Vec::new(),
    );
    assert_eq!(plan, None);
    assert_eq!(
        said,
        GroupPreemption::Unschedulable("minCount (2) cannot be satisfied: 1 scheduled, 0 remaining".to_string())
    );
}

#[test]
fn a_member_nominated_where_a_victim_is_still_terminating_waits() {
    let terminating = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}});
    let running = vec![pod("low", "2", 10, Some("a"), terminating)];
    let members = vec![pod("m0", "2", 100, None, json!({"status": {"nominatedNodeName": "a"}}))];
    let (said, plan) = preempt(
        vec![node("a", "2")],
        running,
        &members,
        &VictimGroups::new(),
        Vec::new(),
    );
    assert_eq!(said, GroupPreemption::Ongoing);
    assert_eq!(
        plan.expect("nominations").nominations,
        [("ns/m0".to_string(), "a".to_string())]
    );
}

#[test]
fn from_v1_37_a_victim_stops_counting_against_budgets_at_the_first_it_breaks() {
    use crate::scheduler::engine::Behaviour;
    use crate::scheduler::engine::preemption::CompiledPdbs;
    // `strict` (no disruption left) selects p1 only; `loose` (one left) selects p1 and p2.
    let pdb = |name: &str, selector: Value, allowed: i32| -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"},
            "spec": {"selector": {"matchLabels": selector}}, "status": {"disruptionsAllowed": allowed,
            "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}))
        .expect("pdb")
    };
    let labelled = |name: &str, labels: Value| {
        let pod = pod(name, "1", 10, Some("a"), json!({"metadata": {"labels": labels}}));
        std::sync::Arc::new(PodInfo::new(pod).expect("pod info"))
    };
    let pdbs = [
        pdb("strict", json!({"tier": "db"}), 0),
        pdb("loose", json!({"app": "x"}), 1),
    ];
    let violating = |version| {
        let compiled = CompiledPdbs::new(&pdbs, Behaviour::of(version));
        let pods = vec![
            labelled("p1", json!({"app": "x", "tier": "db"})),
            labelled("p2", json!({"app": "x"})),
        ];
        let (violating, _) = compiled.split_units(pods, std::slice::from_ref);
        violating
            .iter()
            .map(|(pod, _)| pod.name().to_string())
            .collect::<Vec<_>>()
    };
    // p1 breaks `strict`. Until v1.36 it also uses up `loose`, so p2 breaks it too; from v1.37 p1 stops at
    // `strict` and p2 still has `loose`'s disruption.
    assert_eq!(violating(KubernetesVersion::V1_36), ["p1", "p2"]);
    assert_eq!(violating(KubernetesVersion::V1_37), ["p1"]);
}
