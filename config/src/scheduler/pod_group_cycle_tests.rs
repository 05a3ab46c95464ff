//! The pod-group cycle by version: verdicts, members' texts, the PodGroup condition, and a simulation that follows it.

use serde_json::json;

use super::*;
use crate::KubernetesVersion;
use crate::scheduler::gang::{Dialect, GroupKey};
use crate::scheduler::gang_run::{GangRunner, MemberCycle, RunVerdict, Told};

const V1_36: KubernetesVersion = KubernetesVersion::V1_36;
const V1_37: KubernetesVersion = KubernetesVersion::V1_37;

fn group() -> GroupKey {
    GroupKey {
        dialect: Dialect::Workload,
        namespace: "ns".into(),
        workload: "train".into(),
        pod_group: String::new(),
        replica_key: String::new(),
    }
}

/// Runs `cycles` through a runner of a gang of `min_count` behaving as `version`, as a caller would.
fn run(
    version: KubernetesVersion,
    min_count: usize,
    placed_before: usize,
    cycles: &[(&'static str, MemberCycle)],
) -> crate::scheduler::gang_run::RunOutcome<&'static str> {
    let members = cycles.iter().map(|(m, _)| *m).collect();
    let mut runner = GangRunner::new(group(), min_count, placed_before, members)
        .behaving_as(Behaviour::of(version), GroupPreemption::NoVictims);
    while let Some(member) = runner.next_member() {
        let cycle = cycles.iter().find(|(m, _)| *m == member).expect("a member").1;
        runner.record(member, cycle);
    }
    runner.finish()
}

fn unschedulable(message: &str, clear_nomination: bool) -> Told {
    Told::Unschedulable {
        message: message.to_string(),
        clear_nomination,
    }
}

fn condition(type_: &'static str, status: bool, message: &str) -> Option<GroupCondition> {
    Some(GroupCondition {
        type_,
        status,
        reason: if status { "Scheduled" } else { "Unschedulable" },
        message: message.to_string(),
    })
}

#[test]
fn v1_36_tries_every_member_and_tells_the_fitting_ones_their_permit_status() {
    use MemberCycle::{Failed, Reserved};
    let outcome = run(
        V1_36,
        3,
        0,
        &[("a", Reserved), ("b", Failed), ("c", Failed), ("d", Reserved)],
    );
    assert_eq!(outcome.verdict, RunVerdict::Rejected);
    assert_eq!(outcome.given_back, ["a", "d"]);
    let text = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more \
                plugins asked to wait and no plugin rejected pod";
    // `b` and `c` fitted nowhere: their own texts stand. `d` was tried although the quorum was out of reach.
    assert_eq!(
        outcome.told,
        [("a", unschedulable(text, false)), ("d", unschedulable(text, false))]
    );
    assert!(outcome.events.is_empty(), "kube-scheduler writes FailedScheduling only");
    assert_eq!(
        outcome.condition,
        condition("PodGroupScheduled", false, "pod group is unschedulable")
    );
}

#[test]
fn v1_36_allows_the_group_once_permit_allows_a_member_and_binds_later_ones_too() {
    use MemberCycle::{Failed, Reserved};
    let outcome = run(V1_36, 2, 1, &[("a", Failed), ("b", Reserved), ("c", Reserved)]);
    assert_eq!(outcome.verdict, RunVerdict::Allowed);
    assert_eq!(outcome.allowed, ["b", "c"]);
    assert!(outcome.told.is_empty() && outcome.given_back.is_empty());
    assert_eq!(outcome.condition, condition("PodGroupScheduled", true, ""));
}

#[test]
fn v1_36_waits_for_a_members_preemption_once_the_group_fits_with_it() {
    use MemberCycle::{Preempting, Reserved};
    let outcome = run(V1_36, 2, 0, &[("a", Reserved), ("b", Preempting)]);
    assert_eq!(outcome.verdict, RunVerdict::Deferred);
    assert_eq!(outcome.preemptions, ["b"]);
    assert_eq!(outcome.given_back, ["a"]);
    let text = "pod group is unschedulable, pod group is waiting for preemption to complete";
    assert_eq!(outcome.told, [("a", unschedulable(text, false))]);
    assert_eq!(outcome.condition, condition("PodGroupScheduled", false, text));
}

#[test]
fn v1_36_evicts_a_members_victims_even_for_a_group_that_cannot_be_placed() {
    use MemberCycle::{Failed, Preempting};
    let outcome = run(V1_36, 3, 0, &[("a", Preempting), ("b", Failed), ("c", Failed)]);
    assert_eq!(outcome.verdict, RunVerdict::Rejected);
    // a's own PostFilter started its preemption in its cycle: the victims go, a is told the group's text.
    assert_eq!(outcome.preemptions, ["a"]);
    let text = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more \
                plugins asked to wait and no plugin rejected pod";
    assert_eq!(outcome.told, [("a", unschedulable(text, true))]);
}

#[test]
fn v1_37_ends_the_cycle_once_min_count_is_out_of_reach() {
    use MemberCycle::{Failed, Reserved};
    let outcome = run(
        V1_37,
        3,
        0,
        &[("a", Reserved), ("b", Failed), ("c", Reserved), ("d", Reserved)],
    );
    // a assumed (1 scheduled, 3 remaining), b failed (1, 2), c assumed (2, 1): still reachable; then d.
    assert_eq!(outcome.verdict, RunVerdict::Allowed);
    assert_eq!(outcome.allowed, ["a", "c", "d"]);
    assert_eq!(outcome.condition, condition("PodGroupInitiallyScheduled", true, ""));

    let outcome = run(
        V1_37,
        3,
        0,
        &[("a", Reserved), ("b", Failed), ("c", Failed), ("d", Reserved)],
    );
    assert_eq!(outcome.verdict, RunVerdict::Rejected);
    assert_eq!(outcome.given_back, ["a"]);
    let status = "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining";
    let group = format!("{status}, pod group preemption: No preemption victims found for incoming preemptor");
    assert_eq!(
        outcome.told,
        [
            (
                "a",
                unschedulable(&format!("pod group is unschedulable, {group}"), false)
            ),
            // Never tried: told the group's status from before its preemption's text was added.
            ("d", unschedulable(status, false)),
        ]
    );
    assert_eq!(
        outcome.condition,
        condition("PodGroupInitiallyScheduled", false, &group)
    );
}

#[test]
fn v1_37_refuses_before_any_member_a_group_short_of_min_count() {
    let outcome = run(
        V1_37,
        4,
        1,
        &[("a", MemberCycle::Reserved), ("b", MemberCycle::Reserved)],
    );
    assert_eq!(outcome.verdict, RunVerdict::Rejected);
    let status = "pod group is unschedulable, minCount (4) cannot be satisfied: 1 scheduled, 2 remaining";
    assert_eq!(
        outcome.told,
        [("a", unschedulable(status, false)), ("b", unschedulable(status, false))]
    );
    assert_eq!(
        outcome.condition.map(|c| c.message),
        Some(format!(
            "{status}, pod group preemption: No preemption victims found for incoming preemptor"
        ))
    );
}

#[test]
fn v1_37_needs_a_member_placed_in_the_cycle_even_with_the_quorum_bound_before() {
    let outcome = run(V1_37, 2, 2, &[("a", MemberCycle::Failed)]);
    assert_eq!(outcome.verdict, RunVerdict::Rejected);
    assert!(outcome.told.is_empty(), "the failed member keeps its own text");
    assert_eq!(
        outcome.condition.map(|c| c.message).as_deref(),
        Some("pod group is unschedulable, pod group preemption: No preemption victims found for incoming preemptor")
    );
}

#[test]
fn v1_35_and_coscheduling_keep_the_run_member_by_member() {
    let members = vec!["a", "b"];
    let behaviour = Behaviour::of(KubernetesVersion::V1_35);
    let mut runner = GangRunner::new(group(), 2, 0, members).behaving_as(behaviour, GroupPreemption::NoVictims);
    runner.record("a", MemberCycle::Failed);
    assert_eq!(runner.next_member(), None, "v1.35 rejects the run at once");
    let outcome = runner.finish();
    assert_eq!(outcome.condition, None);
    assert!(!outcome.events.is_empty(), "Ruleplane's gang Events");

    let pod_group = GroupKey {
        dialect: Dialect::PodGroup,
        ..group()
    };
    let mut runner =
        GangRunner::new(pod_group, 2, 0, vec!["a", "b"]).behaving_as(Behaviour::of(V1_37), GroupPreemption::NoVictims);
    runner.record("a", MemberCycle::Failed);
    assert_eq!(
        runner.next_member(),
        None,
        "Coscheduling's run is v1.35's whatever the version"
    );
    assert_eq!(runner.finish().condition, None);
}

#[test]
fn the_group_preemption_text_follows_the_preemption_policy_and_lower_priority_pods() {
    let pod = |priority: i32, policy: Option<&str>| -> Pod {
        let mut spec = json!({"containers": [{"name": "c"}], "priority": priority});
        if let Some(policy) = policy {
            spec["preemptionPolicy"] = json!(policy);
        }
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})).expect("pod")
    };
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(
        json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}),
    )
    .expect("node");
    let mut running = pod(5, None);
    running.metadata.name = Some("running".into());
    running.spec.as_mut().expect("spec").node_name = Some("n".into());
    let snapshot = Snapshot::build(vec![node], vec![running]).expect("snapshot");
    assert_eq!(
        GroupPreemption::of(&snapshot, &pod(5, None)),
        GroupPreemption::NoVictims
    );
    assert_eq!(
        GroupPreemption::of(&snapshot, &pod(10, None)),
        GroupPreemption::NotEvaluated
    );
    assert_eq!(
        GroupPreemption::of(&snapshot, &pod(10, Some("Never"))),
        GroupPreemption::Never
    );
    let cycle = PodGroupCycle::new(Behaviour::of(V1_37), 2, 0, 1);
    assert!(cycle.is_over());
    assert_eq!(
        cycle
            .finish(GroupPreemption::Never)
            .condition
            .map(|c| c.message)
            .as_deref(),
        Some(
            "pod group is unschedulable, minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, pod group \
             preemption: not eligible due to preemptionPolicy=Never."
        )
    );
}

#[test]
fn a_condition_moves_its_transition_time_with_its_status_and_never_turns_true_to_false() {
    let unschedulable = GroupCondition {
        type_: "PodGroupInitiallyScheduled",
        status: false,
        reason: "Unschedulable",
        message: "pod group is unschedulable".into(),
    };
    let first = set_condition(&[], &unschedulable, Some(1), "t1").expect("set");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].status, "False");
    assert_eq!(first[0].observed_generation, Some(1));
    assert_eq!(set_condition(&first, &unschedulable, Some(1), "t2"), None, "unchanged");
    let other = GroupCondition {
        message: "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining".into(),
        ..unschedulable.clone()
    };
    let second = set_condition(&first, &other, Some(1), "t2").expect("a new message");
    assert_eq!(
        second[0].last_transition_time.as_deref(),
        Some("t1"),
        "same status: same transition"
    );
    let scheduled = GroupCondition {
        status: true,
        reason: "Scheduled",
        message: String::new(),
        ..unschedulable.clone()
    };
    let third = set_condition(&second, &scheduled, Some(2), "t3").expect("scheduled");
    assert_eq!(third[0].last_transition_time.as_deref(), Some("t3"));
    assert_eq!(third[0].reason, "Scheduled");
    assert_eq!(set_condition(&third, &unschedulable, Some(2), "t4"), None, "True stays");
    let kept = Condition {
        type_: "Other".into(),
        status: "True".into(),
        observed_generation: None,
        last_transition_time: None,
        reason: "R".into(),
        message: String::new(),
    };
    let with_other = set_condition(std::slice::from_ref(&kept), &scheduled, None, "t5").expect("added");
    assert_eq!(with_other.len(), 2);
    assert_eq!(with_other[0], kept);
}

/// `simulate --gangs` and rule tests decide as the worker: the version's pod-group cycle and texts.
/// `ruleplane simulate` of a 3-member gang (1 CPU each, `priority` when given) on two 1-CPU nodes, the PodGroup's
/// spec merged with `group_spec`: each pod, its node and its text (message, then the PostFilter's).
fn simulate_gang(
    version: KubernetesVersion,
    priority: Option<i32>,
    group_spec: serde_json::Value,
) -> Vec<(String, Option<String>, String)> {
    use crate::scheduler::gang::WorkloadApi;
    use crate::scheduler::simulate::{ClusterObjects, WorkloadRefs, gangs_of, objects_of_kind, simulate_in};
    let policy = crate::load_str(
        "p.yaml",
        "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: g }\nspec:\n  schedulerName: g\n",
    )
    .expect("valid policy");
    let policy = policy.scheduler_policies().next().expect("one policy").clone();
    let api = WorkloadApi::of(version);
    let pods: Vec<serde_json::Value> = ["m0", "m1", "m2"]
        .iter()
        .map(|name| {
            let mut pod = json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
                   "spec": {"schedulingGroup": {"podGroupName": "train"}, "schedulerName": "g",
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
            if let Some(priority) = priority {
                pod["spec"]["priority"] = json!(priority);
            }
            pod
        })
        .collect();
    let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": 3}}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), group_spec.as_object()) {
        spec.extend(extra.clone());
    }
    let pod_group = json!({"apiVersion": api.api_version(), "kind": "PodGroup",
                           "metadata": {"name": "train", "namespace": "ns"}, "spec": spec});
    let (workloads, pod_groups) = gangs_of(vec![pod_group], api).expect("gang objects");
    let cluster = ClusterObjects {
        workloads,
        workload_refs: WorkloadRefs::capture(api, &pods),
        pod_groups,
        kubernetes_version: version,
        ..ClusterObjects::default()
    };
    let nodes = ["a", "b"]
        .iter()
        .map(|name| {
            json!({"kind": "Node", "metadata": {"name": name},
                   "status": {"allocatable": {"cpu": "1", "memory": "8Gi", "pods": "110"}}})
        })
        .collect();
    let nodes = objects_of_kind(nodes, "Node").expect("nodes");
    let pods = objects_of_kind(pods, "Pod").expect("pods");
    let simulation = simulate_in(&policy, nodes, Vec::new(), pods, cluster, 1, false).expect("runs");
    simulation
        .placements
        .into_iter()
        .map(|p| {
            let text = match p.post_filter_message {
                Some(post_filter) => format!("{} {post_filter}", p.message.unwrap_or_default()),
                None => p.message.unwrap_or_default(),
            };
            (p.pod, p.node, text)
        })
        .collect()
}

/// The text `pod` was told, asserting it was not placed.
fn told(placements: &[(String, Option<String>, String)], pod: &str) -> String {
    let found = placements
        .iter()
        .find(|(name, ..)| name == pod)
        .expect("placed or told");
    assert_eq!(found.1, None, "{pod} is not placed");
    found.2.clone()
}

#[test]
fn a_simulation_follows_the_versions_pod_group_cycle() {
    let v1_37 = simulate_gang(V1_37, None, json!({}));
    assert_eq!(told(&v1_37, "ns/m2"), "0/2 nodes are available: 2 Insufficient cpu.");
    assert_eq!(
        told(&v1_37, "ns/m0"),
        "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, pod group \
         preemption: No preemption victims found for incoming preemptor"
    );
    let v1_36 = simulate_gang(V1_36, None, json!({}));
    assert_eq!(
        told(&v1_36, "ns/m2"),
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are \
         available: 2 No preemption victims found for incoming pod."
    );
    assert_eq!(
        told(&v1_36, "ns/m1"),
        "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins \
         asked to wait and no plugin rejected pod"
    );
}

#[test]
fn v1_37_refuses_a_group_whose_members_do_not_share_its_priority_before_its_cycle() {
    let pod = |priority: i32, scheduler: &str, policy: Option<&str>| -> Pod {
        let mut spec = json!({"containers": [{"name": "c"}], "priority": priority, "schedulerName": scheduler});
        if let Some(policy) = policy {
            spec["preemptionPolicy"] = json!(policy);
        }
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})).expect("pod")
    };
    let b37 = Behaviour::of(V1_37);
    let (a, b) = (pod(100, "g", None), pod(100, "g", Some("PreemptLowerPriority")));
    assert_eq!(group_mismatch(b37, 100, &[&a, &b], &[]), None);
    assert_eq!(group_mismatch(Behaviour::of(V1_36), 0, &[&a, &b], &[]), None);
    assert_eq!(
        group_mismatch(b37, 0, &[&a], &[]).as_deref(),
        Some("all pods in a single pod group should have the same priority as the pod group's priority, got 100 and 0")
    );
    let never = pod(100, "g", Some("Never"));
    assert_eq!(
        group_mismatch(b37, 100, &[&a, &never], &[]).as_deref(),
        Some(
            "all pods in a single pod group should have the same preemption policy, got Never and PreemptLowerPriority"
        )
    );
    let other = pod(100, "default-scheduler", None);
    assert_eq!(
        group_mismatch(b37, 100, &[&a], &[&other]).as_deref(),
        Some(
            "all pods in a single pod group should have the same .spec.schedulerName set, got: \"default-scheduler\" \
             and \"g\""
        )
    );
    // In a simulation every member is told the error; a PodGroup of the members' priority places them.
    let refused = simulate_gang(V1_37, Some(100), json!({}));
    for member in ["ns/m0", "ns/m1", "ns/m2"] {
        assert_eq!(
            told(&refused, member),
            "all pods in a single pod group should have the same priority as the pod group's priority, got 100 and 0"
        );
    }
    let agreed = simulate_gang(V1_37, Some(100), json!({"priority": 100}));
    assert_eq!(
        told(&agreed, "ns/m0"),
        "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, pod group \
         preemption: No preemption victims found for incoming preemptor"
    );
    let v1_36 = simulate_gang(V1_36, Some(100), json!({}));
    assert!(
        told(&v1_36, "ns/m1").starts_with("pod group is unschedulable, waiting"),
        "{v1_36:?}"
    );
}
