//! DefaultPreemption through the engine: eligibility, candidates, victims with reprieve, budgets, node choice,
//! the dry-run window and the exact PostFilter messages, each against a hand-computed expectation.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use crate::scheduler::engine::args::DefaultPreemptionArgs;
use crate::scheduler::engine::{
    Decision, Engine, Nominate, PostFilter, PostFilters, Preemption, Profile, Snapshot, SplitMix64,
};

pub(super) fn node(name: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
    })
}

/// A pod requesting `cpu`, with `priority`; `extra` is merged into the object (deep, objects only).
pub(super) fn pod(name: &str, cpu: &str, priority: i32, extra: Value) -> Value {
    let mut pod = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
        }
    });
    merge(&mut pod, extra);
    pod
}

pub(super) fn on(node: &str) -> Value {
    json!({"spec": {"nodeName": node}})
}

pub(super) fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from,
    }
}

pub(super) fn snapshot(nodes: Vec<Value>, pods: Vec<Value>) -> Snapshot {
    let nodes: Vec<Node> = nodes.into_iter().map(|n| serde_json::from_value(n).unwrap()).collect();
    let pods: Vec<Pod> = pods.into_iter().map(|p| serde_json::from_value(p).unwrap()).collect();
    Snapshot::build(nodes, pods).unwrap()
}

fn pdb(name: &str, labels: Value, allowed: i32, disrupted: &[&str]) -> PodDisruptionBudget {
    let disrupted: serde_json::Map<String, Value> = disrupted
        .iter()
        .map(|p| (p.to_string(), json!("2024-01-01T00:00:00Z")))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {
            "disruptionsAllowed": allowed, "disruptedPods": disrupted,
            "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0
        }
    }))
    .unwrap()
}

fn preempting_engine(seed: u64) -> Engine {
    let mut engine = Engine::new(&Profile::default_provider(), seed).unwrap();
    engine.enable_preemption();
    engine
}

fn decide(engine: &mut Engine, snapshot: &Snapshot, pod: Value) -> Decision {
    engine
        .schedule(snapshot, &serde_json::from_value(pod).unwrap())
        .unwrap()
}

fn post_filter(decision: &Decision) -> &PostFilter {
    decision.post_filter().expect("the PostFilter chain ran")
}

fn preemption(decision: &Decision) -> &Preemption {
    post_filter(decision).preemption.as_ref().expect("a preemption")
}

fn victims(decision: &Decision) -> Vec<String> {
    preemption(decision).victims.iter().map(|v| v.name.clone()).collect()
}

fn chosen(decision: &Decision) -> String {
    preemption(decision).node.to_string()
}

#[test]
fn a_higher_priority_pod_preempts_and_the_message_has_no_suffix() {
    let snapshot = snapshot(vec![node("n1", "2")], vec![pod("low", "2", 0, on("n1"))]);
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("high", "1", 10, json!({})));
    assert_eq!(decision.message(), Some("0/1 nodes are available: 1 Insufficient cpu."));
    let post_filter = post_filter(&decision);
    assert_eq!(post_filter.message, None, "a successful preemption appends nothing");
    assert_eq!(post_filter.nominate, Nominate::Set("n1".into()));
    let preemption = preemption(&decision);
    assert_eq!(&*preemption.node, "n1");
    assert_eq!(victims(&decision), ["low"]);
    assert_eq!(preemption.victims[0].key, "uid-low");
    assert_eq!(preemption.pdb_violations, 0);
    assert_eq!(
        decision.event_message().as_deref(),
        Some("0/1 nodes are available: 1 Insufficient cpu.")
    );
}

#[test]
fn limited_victims_spare_other_schedulers_pods() {
    let foreign = json!({"spec": {"nodeName": "n1", "schedulerName": "other"}});
    let ours = json!({"spec": {"nodeName": "n2", "schedulerName": "mine"}});
    let snapshot = snapshot(
        vec![node("n1", "2"), node("n2", "2")],
        // The foreign pod has the lower priority: kube-scheduler's rule would evict it.
        vec![pod("foreign", "2", 0, foreign), pod("ours", "2", 5, ours)],
    );
    let high = || pod("high", "1", 10, json!({}));
    assert_eq!(
        victims(&decide(&mut preempting_engine(1), &snapshot, high())),
        ["foreign"]
    );
    let mut engine = preempting_engine(1);
    engine.limit_victims_to(["mine".to_string()].into());
    let decision = decide(&mut engine, &snapshot, high());
    assert_eq!(
        (chosen(&decision), victims(&decision)),
        ("n2".to_string(), vec!["ours".to_string()])
    );

    // Only foreign pods are lower: kube-scheduler's message for a node without victims.
    let snapshot = snapshot_of_foreign_only();
    let decision = decide(&mut engine, &snapshot, high());
    assert_eq!(
        decision.event_message().as_deref(),
        Some(
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are \
             available: 1 No preemption victims found for incoming pod."
        )
    );
}

fn snapshot_of_foreign_only() -> Snapshot {
    snapshot(
        vec![node("n1", "2")],
        vec![pod(
            "foreign",
            "2",
            0,
            json!({"spec": {"nodeName": "n1", "schedulerName": "other"}}),
        )],
    )
}

#[test]
fn equal_priority_pods_are_not_victims() {
    let snapshot = snapshot(vec![node("n1", "2")], vec![pod("peer", "2", 10, on("n1"))]);
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(
        decision.event_message().as_deref(),
        Some(
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are \
             available: 1 No preemption victims found for incoming pod."
        )
    );
    assert_eq!(post_filter(&decision).nominate, Nominate::Clear);
    assert_eq!(post_filter(&decision).preemption, None);
}

#[test]
fn preemption_policy_never_is_not_eligible_and_leaves_the_nomination() {
    let snapshot = snapshot(vec![node("n1", "2")], vec![pod("low", "2", 0, on("n1"))]);
    let decision = decide(
        &mut preempting_engine(1),
        &snapshot,
        pod("p", "1", 10, json!({"spec": {"preemptionPolicy": "Never"}})),
    );
    assert_eq!(
        decision.event_message().as_deref(),
        Some(
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: not eligible \
             due to preemptionPolicy=Never."
        )
    );
    assert_eq!(post_filter(&decision).nominate, Nominate::Leave);
}

#[test]
fn a_victim_terminating_by_preemption_on_the_nominated_node_blocks_another_preemption() {
    let terminating = json!({
        "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}
    });
    let mut victim = pod("low", "2", 0, on("n1"));
    merge(&mut victim, terminating.clone());
    let nominated = json!({"status": {"nominatedNodeName": "n1"}});
    // n2 is full of pods of the preemptor's priority.
    let snapshot_with = |victim: Value| {
        snapshot(
            vec![node("n1", "2"), node("n2", "2")],
            vec![victim, pod("peer", "2", 10, on("n2"))],
        )
    };

    let decision = decide(
        &mut preempting_engine(1),
        &snapshot_with(victim),
        pod("p", "1", 10, nominated.clone()),
    );
    assert_eq!(
        post_filter(&decision).message.as_deref(),
        Some("no new claims to deallocate, preemption: not eligible due to a terminating pod on the nominated node.")
    );
    assert_eq!(post_filter(&decision).nominate, Nominate::Leave);

    // Deleted for another reason (no DisruptionTarget condition): eligible again.
    let mut deleted = pod("low", "2", 0, on("n1"));
    merge(
        &mut deleted,
        json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
    );
    let decision = decide(
        &mut preempting_engine(1),
        &snapshot_with(deleted),
        pod("p", "1", 10, nominated),
    );
    assert_eq!(chosen(&decision), "n1");
}

#[test]
fn a_nominated_node_preemption_cannot_help_on_does_not_block() {
    // The preemptor's nominated node n1 now fails NodeAffinity (UnschedulableAndUnresolvable): the terminating
    // victim there no longer matters, and n2 is preempted instead.
    let mut terminating = pod("low", "2", 0, on("n1"));
    merge(
        &mut terminating,
        json!({
            "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}
        }),
    );
    let mut n2 = node("n2", "2");
    merge(&mut n2, json!({"metadata": {"labels": {"pool": "b"}}}));
    let snapshot = snapshot(
        vec![node("n1", "2"), n2],
        vec![terminating, pod("other", "2", 0, on("n2"))],
    );
    let decision = decide(
        &mut preempting_engine(1),
        &snapshot,
        pod(
            "p",
            "1",
            10,
            json!({"spec": {"nodeSelector": {"pool": "b"}}, "status": {"nominatedNodeName": "n1"}}),
        ),
    );
    assert_eq!(chosen(&decision), "n2");
    assert_eq!(victims(&decision), ["other"]);
}

#[test]
fn unresolvable_nodes_are_never_candidates() {
    // n1 and n2 fail NodeAffinity (UnschedulableAndUnresolvable) although they hold low-priority pods; n3 fails
    // on cpu with only an equal-priority pod.
    let mut n3 = node("n3", "2");
    merge(&mut n3, json!({"metadata": {"labels": {"pool": "b"}}}));
    let snapshot = snapshot(
        vec![node("n1", "2"), node("n2", "2"), n3],
        vec![
            pod("a", "2", 0, on("n1")),
            pod("b", "2", 0, on("n2")),
            pod("c", "2", 10, on("n3")),
        ],
    );
    let decision = decide(
        &mut preempting_engine(1),
        &snapshot,
        pod("p", "1", 10, json!({"spec": {"nodeSelector": {"pool": "b"}}})),
    );
    assert_eq!(
        decision.event_message().as_deref(),
        Some(
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. no \
             new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for \
             incoming pod, 2 Preemption is not helpful for scheduling."
        )
    );
}

#[test]
fn a_node_still_too_small_without_its_victims_reports_the_filter_reason() {
    // Each node keeps 1 CPU of a pod of the preemptor's priority: evicting the other 1 CPU is not enough.
    let snapshot = snapshot(
        vec![node("n1", "2"), node("n2", "2")],
        vec![
            pod("a", "1", 0, on("n1")),
            pod("b", "1", 0, on("n2")),
            pod("peer-1", "1", 10, on("n1")),
            pod("peer-2", "1", 10, on("n2")),
        ],
    );
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "2", 10, json!({})));
    assert_eq!(
        post_filter(&decision).message.as_deref(),
        Some("no new claims to deallocate, preemption: 0/2 nodes are available: 2 Insufficient cpu.")
    );
    assert_eq!(post_filter(&decision).nominate, Nominate::Clear);
}

#[test]
fn when_no_node_can_be_helped_every_node_is_not_helpful() {
    let snapshot = snapshot(vec![node("n1", "2"), node("n2", "2")], vec![]);
    let decision = decide(
        &mut preempting_engine(1),
        &snapshot,
        pod("p", "1", 10, json!({"spec": {"nodeSelector": {"pool": "none"}}})),
    );
    assert_eq!(
        post_filter(&decision).message.as_deref(),
        Some(
            "no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )
    );
}

#[test]
fn reprieve_keeps_the_most_important_pods_that_still_leave_room() {
    // 4 CPUs full: a (priority 5, 1 CPU), b (3, 1 CPU), c (1, 2 CPUs). The preemptor needs 2 CPUs. Reprieving in
    // order a, b, c keeps a and b (2 CPUs used, 2 free) and evicts only c.
    let snapshot = snapshot(
        vec![node("n1", "4")],
        vec![
            pod("c", "2", 1, on("n1")),
            pod("a", "1", 5, on("n1")),
            pod("b", "1", 3, on("n1")),
        ],
    );
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "2", 10, json!({})));
    assert_eq!(victims(&decision), ["c"]);

    // a (5, 2 CPUs) is reprieved first and fills the room: b and c both go, most important first.
    let snapshot2 = snapshot_of_three("2", "1", "1");
    let decision = decide(&mut preempting_engine(1), &snapshot2, pod("p", "2", 10, json!({})));
    assert_eq!(victims(&decision), ["b", "c"]);
}

fn snapshot_of_three(a: &str, b: &str, c: &str) -> Snapshot {
    snapshot(
        vec![node("n1", "4")],
        vec![
            pod("b", b, 3, on("n1")),
            pod("c", c, 1, on("n1")),
            pod("a", a, 5, on("n1")),
        ],
    )
}

#[test]
fn among_equal_priorities_the_earlier_started_pod_is_reprieved_first() {
    let started = |at: &str| json!({"status": {"startTime": at}});
    let mut old = pod("old", "1", 1, on("n1"));
    merge(&mut old, started("2024-01-01T00:00:00Z"));
    let mut young = pod("young", "1", 1, on("n1"));
    merge(&mut young, started("2024-06-01T00:00:00Z"));
    let first = snapshot(vec![node("n1", "2")], vec![young, old]);
    let decision = decide(&mut preempting_engine(1), &first, pod("p", "1", 10, json!({})));
    assert_eq!(victims(&decision), ["young"]);

    // A pod without a start time counts as starting now: the one with a start time is older and stays.
    let mut old = pod("old", "1", 1, on("n1"));
    merge(&mut old, started("2024-01-01T00:00:00Z"));
    let snapshot = snapshot(vec![node("n1", "2")], vec![pod("pending-start", "1", 1, on("n1")), old]);
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(victims(&decision), ["pending-start"]);
}

/// n1 (2 CPUs, full): `db` (priority 5, labelled app=db) and `cache` (priority 6, no labels). The preemptor
/// needs 1 CPU, so exactly one of them goes.
fn budget_case(pdbs: Vec<PodDisruptionBudget>) -> Decision {
    let mut snapshot = snapshot(
        vec![node("n1", "2")],
        vec![
            pod(
                "db",
                "1",
                5,
                json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "db"}}}),
            ),
            pod("cache", "1", 6, on("n1")),
        ],
    );
    snapshot.set_pod_disruption_budgets(pdbs);
    decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, json!({})))
}

#[test]
fn budget_protected_pods_are_reprieved_before_more_important_unprotected_ones() {
    // No budget: cache (more important) is reprieved first, db is evicted.
    let decision = budget_case(vec![]);
    assert_eq!(victims(&decision), ["db"]);

    // db's budget allows no disruption: db is reprieved first, cache is evicted, no violation.
    let decision = budget_case(vec![pdb("db", json!({"app": "db"}), 0, &[])]);
    assert_eq!(victims(&decision), ["cache"]);
    assert_eq!(preemption(&decision).pdb_violations, 0);

    // One disruption allowed: db does not violate, the importance order decides again.
    let decision = budget_case(vec![pdb("db", json!({"app": "db"}), 1, &[])]);
    assert_eq!(victims(&decision), ["db"]);

    // db is already counted as disrupted by the budget: it does not consume the budget again.
    let decision = budget_case(vec![pdb("db", json!({"app": "db"}), 0, &["db"])]);
    assert_eq!(victims(&decision), ["db"]);

    // A budget of another namespace, or one selecting other labels, does not protect db.
    let mut elsewhere = pdb("db", json!({"app": "db"}), 0, &[]);
    elsewhere.metadata.namespace = Some("other".into());
    let decision = budget_case(vec![elsewhere, pdb("web", json!({"app": "web"}), 0, &[])]);
    assert_eq!(victims(&decision), ["db"]);

    // An empty selector matches nothing here (kube-scheduler skips it).
    let decision = budget_case(vec![pdb("all", json!({}), 0, &[])]);
    assert_eq!(victims(&decision), ["db"]);
}

#[test]
fn an_unavoidable_budget_violation_is_counted() {
    // Only db can go, and its budget allows nothing.
    let mut snapshot = snapshot(
        vec![node("n1", "1")],
        vec![pod(
            "db",
            "1",
            5,
            json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "db"}}}),
        )],
    );
    snapshot.set_pod_disruption_budgets(vec![pdb("db", json!({"app": "db"}), 0, &[])]);
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, json!({})));
    assert_eq!(victims(&decision), ["db"]);
    assert_eq!(preemption(&decision).pdb_violations, 1);
}

#[test]
fn a_budget_is_used_up_by_the_most_important_pods_first() {
    // Two app=db pods, one disruption allowed, and the preemptor needs both gone. In importance order db-2
    // (priority 2) takes the one allowed disruption and db-1 violates: db-1 is tried (and fails) first, both go,
    // one violation, listed most important first.
    let db = |name: &str, priority: i32| {
        pod(
            name,
            "1",
            priority,
            json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "db"}}}),
        )
    };
    let mut snapshot = snapshot(vec![node("n1", "2")], vec![db("db-1", 1), db("db-2", 2)]);
    snapshot.set_pod_disruption_budgets(vec![pdb("db", json!({"app": "db"}), 1, &[])]);
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "2", 10, json!({})));
    assert_eq!(victims(&decision), ["db-2", "db-1"]);
    assert_eq!(preemption(&decision).pdb_violations, 1);
}

#[test]
fn the_node_with_fewest_budget_violations_wins_over_lower_priorities() {
    // n1's victim has the lower priority but is protected; n2's is not.
    let mut snapshot = snapshot(
        vec![node("n1", "1"), node("n2", "1")],
        vec![
            pod(
                "db",
                "1",
                1,
                json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "db"}}}),
            ),
            pod("web", "1", 5, on("n2")),
        ],
    );
    snapshot.set_pod_disruption_budgets(vec![pdb("db", json!({"app": "db"}), 0, &[])]);
    for seed in 0..8 {
        let decision = decide(&mut preempting_engine(seed), &snapshot, pod("p", "1", 10, json!({})));
        assert_eq!(chosen(&decision), "n2", "seed {seed}");
    }
}

/// Two 2-CPU nodes, full; the preemptor needs 2 CPUs so every pod of the chosen node goes.
fn pick(n1: Vec<Value>, n2: Vec<Value>) -> String {
    let pods = n1
        .into_iter()
        .map(|p| (p, "n1"))
        .chain(n2.into_iter().map(|p| (p, "n2")))
        .map(|(mut p, node)| {
            merge(&mut p, on(node));
            p
        })
        .collect();
    let snapshot = snapshot(vec![node("n1", "2"), node("n2", "2")], pods);
    let mut picks: Vec<String> = (0..8)
        .map(|seed| {
            chosen(&decide(
                &mut preempting_engine(seed),
                &snapshot,
                pod("p", "2", 100, json!({})),
            ))
        })
        .collect();
    picks.dedup();
    assert_eq!(picks.len(), 1, "the choice does not depend on the seed: {picks:?}");
    picks.remove(0)
}

#[test]
fn the_node_whose_most_important_victim_is_least_important_wins() {
    assert_eq!(
        pick(vec![pod("a", "2", 5, json!({}))], vec![pod("b", "2", 3, json!({}))]),
        "n2"
    );
}

#[test]
fn then_the_smallest_sum_of_priorities_offset_by_two_to_the_31() {
    // Same highest priority (3): one victim beats two.
    assert_eq!(
        pick(
            vec![pod("a", "1", 3, json!({})), pod("b", "1", 1, json!({}))],
            vec![pod("c", "2", 3, json!({}))]
        ),
        "n2"
    );
    // Negative priorities: without the offset two pods of -5 (sum -10) would beat one (-5).
    assert_eq!(
        pick(
            vec![pod("a", "1", -5, json!({})), pod("b", "1", -5, json!({}))],
            vec![pod("c", "2", -5, json!({}))]
        ),
        "n2"
    );
}

#[test]
fn then_the_fewest_victims() {
    // Equal highest priority (10) and equal offset sums: 2·(10 + 2^31) = (10 + 2^31)·2 + (MIN + 2^31).
    assert_eq!(
        pick(
            vec![
                pod("a", "500m", 10, json!({})),
                pod("b", "500m", 10, json!({})),
                pod("c", "1", i32::MIN, json!({})),
            ],
            vec![pod("d", "1", 10, json!({})), pod("e", "1", 10, json!({}))]
        ),
        "n2"
    );
}

#[test]
fn then_the_latest_start_of_the_most_important_victims() {
    let started = |name: &str, priority: i32, at: &str| pod(name, "2", priority, json!({"status": {"startTime": at}}));
    assert_eq!(
        pick(
            vec![started("old", 5, "2024-01-01T00:00:00Z")],
            vec![started("young", 5, "2024-06-01T00:00:00Z")]
        ),
        "n2"
    );
    // A victim that has not started counts as starting now: the latest.
    assert_eq!(
        pick(
            vec![pod("pending", "2", 5, json!({}))],
            vec![started("young", 5, "2024-06-01T00:00:00Z")]
        ),
        "n1"
    );
}

#[test]
fn a_full_tie_is_broken_by_the_seeded_generator() {
    let snapshot = snapshot(
        vec![node("n1", "1"), node("n2", "1"), node("n3", "1")],
        vec![
            pod("a", "1", 1, on("n1")),
            pod("b", "1", 1, on("n2")),
            pod("c", "1", 1, on("n3")),
        ],
    );
    let choose = |seed| {
        chosen(&decide(
            &mut preempting_engine(seed),
            &snapshot,
            pod("p", "1", 10, json!({})),
        ))
    };
    let picks: std::collections::BTreeSet<String> = (0..32).map(choose).collect();
    assert_eq!(picks.len(), 3, "every tied node can be chosen: {picks:?}");
    assert_eq!(choose(7), choose(7), "the same seed chooses the same node");
}

#[test]
fn the_dry_run_starts_at_a_random_offset_and_stops_at_the_wanted_number_of_candidates() {
    let nodes: Vec<Value> = (0..10).map(|i| node(&format!("n{i}"), "1")).collect();
    let pods: Vec<Value> = (0..10)
        .map(|i| pod(&format!("v{i}"), "1", 1, on(&format!("n{i}"))))
        .collect();
    let snapshot = snapshot(nodes, pods);
    let order: Vec<String> = snapshot.list().map(|n| n.name().to_string()).collect();
    let mut profile = Profile::default_provider();
    profile.args.default_preemption = DefaultPreemptionArgs {
        min_candidate_nodes_percentage: Some(0),
        min_candidate_nodes_absolute: Some(1),
    };
    for seed in 0..16 {
        let mut engine = Engine::new(&profile, seed).unwrap();
        engine.enable_preemption();
        let decision = decide(&mut engine, &snapshot, pod("p", "1", 10, json!({})));
        // One candidate wanted: the first node examined, at the offset drawn first from the generator (no score
        // tie-break happened in an unschedulable cycle).
        let offset = SplitMix64::new(seed).below(10);
        assert_eq!(chosen(&decision), order[offset], "seed {seed}");
    }
}

#[test]
fn a_budget_violating_candidate_does_not_end_the_dry_run() {
    // One candidate wanted, but the dry run goes on until a non-violating one is found: n3 whatever the offset.
    let protected = |name: &str, node: &str| {
        pod(
            name,
            "1",
            1,
            json!({"spec": {"nodeName": node}, "metadata": {"labels": {"app": "db"}}}),
        )
    };
    let mut snapshot = snapshot(
        vec![node("n1", "1"), node("n2", "1"), node("n3", "1"), node("n4", "1")],
        vec![
            protected("a", "n1"),
            protected("b", "n2"),
            pod("c", "1", 1, on("n3")),
            protected("d", "n4"),
        ],
    );
    snapshot.set_pod_disruption_budgets(vec![pdb("db", json!({"app": "db"}), 0, &[])]);
    let mut profile = Profile::default_provider();
    profile.args.default_preemption.min_candidate_nodes_absolute = Some(1);
    for seed in 0..16 {
        let mut engine = Engine::new(&profile, seed).unwrap();
        engine.enable_preemption();
        let decision = decide(&mut engine, &snapshot, pod("p", "1", 10, json!({})));
        assert_eq!(chosen(&decision), "n3", "seed {seed}");
        assert_eq!(preemption(&decision).pdb_violations, 0);
    }
}

#[test]
fn candidate_counts_follow_kube_scheduler() {
    let args = |percentage, absolute| DefaultPreemptionArgs {
        min_candidate_nodes_percentage: Some(percentage),
        min_candidate_nodes_absolute: Some(absolute),
    };
    let default = DefaultPreemptionArgs::default();
    assert_eq!(default.num_candidates(50), 50, "capped at the number of nodes");
    assert_eq!(default.num_candidates(1000), 100);
    assert_eq!(default.num_candidates(5000), 500);
    assert_eq!(args(0, 1).num_candidates(1000), 1);
    assert_eq!(args(40, 0).num_candidates(9), 3, "integer percentage");
}

#[test]
fn invalid_preemption_args_are_refused_as_kube_scheduler_refuses_them() {
    let mut profile = Profile::default_provider();
    profile.args.default_preemption = DefaultPreemptionArgs {
        min_candidate_nodes_percentage: Some(0),
        min_candidate_nodes_absolute: Some(0),
    };
    let error = Engine::new(&profile, 1).unwrap_err().to_string();
    assert!(
        error.contains("minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
        "{error}"
    );
    profile.args.default_preemption = DefaultPreemptionArgs {
        min_candidate_nodes_percentage: Some(101),
        min_candidate_nodes_absolute: Some(-1),
    };
    let error = Engine::new(&profile, 1).unwrap_err().to_string();
    assert!(error.contains("not in valid range [0, 100]"), "{error}");
    assert!(error.contains("not in valid range [0, inf)"), "{error}");
}

#[test]
fn lower_priority_pods_nominated_to_the_node_are_cleared() {
    // The higher nomination keeps its room (1 of 2 cpu): the preemptor fits only once v is gone.
    let mut snapshot = snapshot(vec![node("n1", "2")], vec![pod("v", "1", 1, on("n1"))]);
    let nominated = |name: &str, priority: i32| -> Pod {
        serde_json::from_value(pod(name, "1", priority, json!({"status": {"nominatedNodeName": "n1"}}))).unwrap()
    };
    snapshot.set_nominated_pods([nominated("lower", 5), nominated("higher", 20)]);
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, json!({})));
    let cleared: Vec<&str> = preemption(&decision)
        .lower_nominated_to_clear
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(cleared, ["lower"]);
}

#[test]
fn only_the_nominations_of_this_managers_schedulers_are_cleared() {
    let mut snapshot = snapshot(vec![node("n1", "1")], vec![pod("v", "1", 1, on("n1"))]);
    let nominated = |name: &str, scheduler: &str| -> Pod {
        serde_json::from_value(pod(
            name,
            "1",
            5,
            json!({"spec": {"schedulerName": scheduler}, "status": {"nominatedNodeName": "n1"}}),
        ))
        .unwrap()
    };
    snapshot.set_nominated_pods([
        nominated("ours", "my-scheduler"),
        nominated("theirs", "other-scheduler"),
    ]);
    let mut engine = preempting_engine(1);
    engine.nominate_only_for(["my-scheduler".to_owned()].into());
    let decision = decide(&mut engine, &snapshot, pod("p", "1", 10, json!({})));
    let cleared: Vec<&str> = preemption(&decision)
        .lower_nominated_to_clear
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(cleared, ["ours"], "another scheduler's pod is neither seen nor written");
}

#[test]
fn removing_a_victim_updates_inter_pod_anti_affinity() {
    // The preemptor refuses to share a host with app=web; the low-priority web pod is the only obstacle.
    let snapshot = snapshot(
        vec![node("n1", "4")],
        vec![pod(
            "web",
            "1",
            1,
            json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "web"}}}),
        )],
    );
    let anti = json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}}});
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, anti));
    assert_eq!(
        decision.message(),
        Some("0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.")
    );
    assert_eq!(victims(&decision), ["web"]);
}

#[test]
fn victims_the_affinity_state_does_not_count_keep_the_cycles_state() {
    // The pod avoids app=web hosts. n2 holds a high-priority web pod (no victim there); n1 is full of a
    // low-priority db pod, which the anti-affinity state does not count: evicting it is enough.
    let snapshot = snapshot(
        vec![node("n1", "2"), node("n2", "4")],
        vec![
            pod(
                "db",
                "2",
                1,
                json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "db"}}}),
            ),
            pod(
                "web",
                "1",
                50,
                json!({"spec": {"nodeName": "n2"}, "metadata": {"labels": {"app": "web"}}}),
            ),
        ],
    );
    let anti = json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}}});
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, anti));
    assert_eq!(
        decision.message(),
        Some("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod anti-affinity rules.")
    );
    assert_eq!(chosen(&decision), "n1");
    assert_eq!(victims(&decision), ["db"]);
}

#[test]
fn removing_a_victim_updates_an_existing_pods_anti_affinity() {
    // The low-priority pod refuses to share a host with app=db: the db preemptor fits once it is gone.
    let guard = json!({
        "spec": {"nodeName": "n1", "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
        ]}}}
    });
    let snapshot = snapshot(vec![node("n1", "4")], vec![pod("guard", "1", 1, guard)]);
    let decision = decide(
        &mut preempting_engine(1),
        &snapshot,
        pod("p", "1", 10, json!({"metadata": {"labels": {"app": "db"}}})),
    );
    assert_eq!(
        decision.message(),
        Some("0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules.")
    );
    assert_eq!(victims(&decision), ["guard"]);
}

#[test]
fn removing_a_victim_updates_topology_spread_counts() {
    // Spread app=x over hosts with maxSkew 1: n1 holds one low-priority app=x pod, n2 is cordoned (a domain
    // with 0 pods, UnschedulableAndUnresolvable for the pod). Placing on n1 would make the skew 2; removing
    // the victim makes it 1.
    let mut n2 = node("n2", "4");
    merge(&mut n2, json!({"spec": {"unschedulable": true}}));
    let snapshot = snapshot(
        vec![node("n1", "4"), n2],
        vec![pod(
            "x1",
            "1",
            1,
            json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "x"}}}),
        )],
    );
    let spread = json!({
        "metadata": {"labels": {"app": "x"}},
        "spec": {"topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "x"}}
        }]}
    });
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, spread));
    assert_eq!(
        decision.message(),
        Some(
            "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, 1 node(s) were \
             unschedulable."
        )
    );
    assert_eq!(chosen(&decision), "n1");
    assert_eq!(victims(&decision), ["x1"]);
}

#[test]
fn victims_outside_the_spread_selector_keep_the_cycles_state() {
    // Spreading app=x pods: the low-priority app=y pod filling n1 is not counted, and evicting it is enough.
    let snapshot = snapshot(
        vec![node("n1", "2"), node("n2", "2")],
        vec![
            pod(
                "y",
                "2",
                1,
                json!({"spec": {"nodeName": "n1"}, "metadata": {"labels": {"app": "y"}}}),
            ),
            pod(
                "peer",
                "2",
                10,
                json!({"spec": {"nodeName": "n2"}, "metadata": {"labels": {"app": "x"}}}),
            ),
        ],
    );
    let spread = json!({
        "metadata": {"labels": {"app": "x"}},
        "spec": {"topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "x"}}
        }]}
    });
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, spread));
    assert_eq!(decision.message(), Some("0/2 nodes are available: 2 Insufficient cpu."));
    assert_eq!(chosen(&decision), "n1");
    assert_eq!(victims(&decision), ["y"]);
}

#[test]
fn an_unresolvable_pre_filter_ends_the_chain_at_dynamic_resources() {
    // NodeAffinity's PreFilter rejects a term pinning the pod to two names at once: kube-scheduler stops
    // PreFilter there, DynamicResources' PostFilter finds no state of its own and fails with "not found".
    let pinned = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]},
            {"key": "metadata.name", "operator": "In", "values": ["n2"]}
        ]}]
    }}}}});
    let snapshot = snapshot(vec![node("n1", "1")], vec![pod("v", "1", 1, on("n1"))]);
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, pinned.clone()));
    assert_eq!(
        decision.event_message().as_deref(),
        Some("0/1 nodes are available: pod affinity terms conflict. not found")
    );
    assert_eq!(post_filter(&decision).nominate, Nominate::Leave);

    // Without DynamicResources in the chain, DefaultPreemption runs and finds no node it could help.
    let mut engine = Engine::new(&Profile::default_provider(), 1).unwrap();
    engine.set_post_filters(Some(PostFilters {
        dynamic_resources: false,
        preemption: DefaultPreemptionArgs::default(),
        victim_schedulers: None,
        behaviour: engine.behaviour(),
    }));
    let decision = decide(&mut engine, &snapshot, pod("p", "1", 10, pinned));
    assert_eq!(
        post_filter(&decision).message.as_deref(),
        Some("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    );
}

#[test]
fn without_a_post_filter_chain_nothing_is_appended() {
    let snapshot = snapshot(vec![node("n1", "2")], vec![pod("low", "2", 0, on("n1"))]);
    let mut engine = Engine::new(&Profile::default_provider(), 1).unwrap();
    let decision = decide(&mut engine, &snapshot, pod("high", "1", 10, json!({})));
    assert_eq!(decision.post_filter(), None);
    assert_eq!(decision.event_message().as_deref(), decision.message());
}

#[test]
fn each_node_is_dry_run_on_the_cluster_as_it_is() {
    // Zone anti-affinity against app=web, with one low-priority web pod on each node of the zone. Evicting the
    // pod of one node is not enough while the other stays: no candidate. (Were the first node's removal left in
    // place when the second is examined, the second would wrongly qualify.)
    let zoned = |name: &str| {
        let mut n = node(name, "4");
        merge(
            &mut n,
            json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "z"}}}),
        );
        n
    };
    let web = |name: &str, node: &str| {
        pod(
            name,
            "1",
            1,
            json!({"spec": {"nodeName": node}, "metadata": {"labels": {"app": "web"}}}),
        )
    };
    let snapshot = snapshot(vec![zoned("n1"), zoned("n2")], vec![web("w1", "n1"), web("w2", "n2")]);
    let anti = json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "topology.kubernetes.io/zone"}
    ]}}}});
    let decision = decide(&mut preempting_engine(1), &snapshot, pod("p", "1", 10, anti));
    assert_eq!(
        post_filter(&decision).message.as_deref(),
        Some(
            "no new claims to deallocate, preemption: 0/2 nodes are available: 2 node(s) didn't match pod \
             anti-affinity rules."
        )
    );
    assert_eq!(post_filter(&decision).nominate, Nominate::Clear);
}

#[test]
fn keeping_the_cycles_state_decides_as_running_pre_filter_for_every_check() {
    // Seeded random clusters with pod (anti-)affinity and spreading: the dry run that keeps the cycle's PreFilter
    // state where no counted pod was removed must decide exactly as one that runs PreFilter for every check.
    let mut rng = SplitMix64::new(27);
    let mut pick = |n: usize| rng.below(n);
    let apps = ["a", "b", "c"];
    let (mut preempted, mut failed) = (0, 0);
    for case in 0..600 {
        let node_count = 2 + pick(4);
        let nodes: Vec<Value> = (0..node_count)
            .map(|i| {
                let mut n = node(&format!("n{i}"), ["2", "4"][pick(2)]);
                merge(
                    &mut n,
                    json!({"metadata": {"labels": {"zone": format!("z{}", pick(2))}}}),
                );
                // A cordoned node is a spreading domain preemption cannot help on.
                if pick(5) == 0 {
                    merge(&mut n, json!({"spec": {"unschedulable": true}}));
                }
                n
            })
            .collect();
        let term = |app: &str, key: &str| json!([{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]);
        let mut pods = Vec::new();
        for i in 0..node_count {
            for j in 0..1 + pick(4) {
                let mut extra = json!({
                    "spec": {"nodeName": format!("n{i}")},
                    "metadata": {"labels": {"app": apps[pick(3)]}, "namespace": (["default", "other"][pick(2)])}
                });
                if pick(5) == 0 {
                    merge(
                        &mut extra,
                        json!({"spec": {"affinity": {"podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": term(apps[pick(3)], "zone")
                        }}}}),
                    );
                }
                pods.push(pod(
                    &format!("p{i}-{j}"),
                    ["500m", "1"][pick(2)],
                    [0, 5, 10, 50][pick(4)],
                    extra,
                ));
            }
        }
        let snapshot = snapshot(nodes, pods);
        let mut extra = json!({"metadata": {"labels": {"app": apps[pick(3)]}, "namespace": (["default", "default", "other"][pick(3)])}});
        match pick(4) {
            0 => merge(
                &mut extra,
                json!({"spec": {"affinity": {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": term(apps[pick(3)], ["kubernetes.io/hostname", "zone"][pick(2)])
                }}}}),
            ),
            1 => merge(
                &mut extra,
                json!({"spec": {"topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": (["kubernetes.io/hostname", "zone"][pick(2)]),
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": apps[pick(3)]}}
                }]}}),
            ),
            2 => merge(
                &mut extra,
                json!({"spec": {"affinity": {"podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": term(apps[pick(3)], "zone")
                }}}}),
            ),
            _ => {}
        }
        let preemptor = pod("incoming", ["1", "2"][pick(2)], 20, extra);
        let seed = case as u64;
        let mut kept = preempting_engine(seed);
        let mut rerun = preempting_engine(seed);
        rerun.always_rerun_pre_filter = true;
        let a = decide(&mut kept, &snapshot, preemptor.clone());
        let b = decide(&mut rerun, &snapshot, preemptor);
        assert_eq!(a.post_filter(), b.post_filter(), "case {case}");
        match a.post_filter() {
            Some(PostFilter {
                preemption: Some(_), ..
            }) => preempted += 1,
            Some(_) => failed += 1,
            None => {}
        }
    }
    assert!(
        preempted > 30 && failed > 30,
        "both outcomes are exercised: {preempted} preempted, {failed} not"
    );
}

#[test]
fn nodes_and_placed_pods_stay_compact_through_filters_scores_and_preemption() {
    let zone = |name: &str, z: &str| {
        let mut n = node(name, "2");
        merge(
            &mut n,
            json!({"metadata": {"labels": {"topology.kubernetes.io/zone": z}},
                "spec": {"taints": [{"key": "soft", "effect": "PreferNoSchedule"}]}}),
        );
        n
    };
    let placed = |name: &str, node: &str, priority: i32, start: &str| {
        let extra = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"nodeName": node, "schedulerName": "mine"},
            "status": {"startTime": start}
        });
        pod(name, "1", priority, extra)
    };
    let mut terminating = placed("leaving", "n2", 1, "2024-01-01T00:00:00Z");
    merge(
        &mut terminating,
        json!({"metadata": {"deletionTimestamp": "2024-01-02T00:00:00Z"}, "status": {"conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]}}),
    );
    let mut snapshot = snapshot(
        vec![zone("n1", "a"), zone("n2", "b")],
        vec![
            placed("old", "n1", 1, "2024-01-01T00:00:00Z"),
            placed("young", "n1", 1, "2024-06-01T00:00:00Z"),
            placed("kept", "n2", 9, "2024-01-01T00:00:00Z"),
            terminating,
        ],
    );
    snapshot.set_pod_disruption_budgets(vec![pdb("web", json!({"app": "web"}), 1, &[])]);
    let high = pod(
        "high",
        "2",
        5,
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "web"}}}}]}}
        }}),
    );
    let decision = decide(&mut preempting_engine(1), &snapshot, high);
    // n2 holds a priority-9 pod that cannot be evicted; on n1 both low pods must go, the younger reprieved never.
    assert_eq!(chosen(&decision), "n1");
    assert_eq!(victims(&decision), ["old", "young"]);
    for node in snapshot.list() {
        assert!(node.is_compact(), "{} was parsed by the decision", node.name());
        assert_eq!(node.taints().len(), 1);
        for placed in node.pods() {
            assert!(placed.is_compact(), "{} was parsed by the decision", placed.name());
        }
    }
    let kept = snapshot.pod("uid-kept").expect("placed");
    assert_eq!(kept.to_pod().metadata.name.as_deref(), Some("kept"));
    assert_eq!(kept.to_pod().spec.as_ref().and_then(|s| s.priority), Some(9));
    assert!(kept.is_compact(), "to_pod leaves the pod compact");
    assert!(snapshot.pod("uid-leaving").expect("placed").terminating_by_preemption);
}
