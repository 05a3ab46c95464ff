//! The scheduling queue with an injected clock: order, backoff, hints, in-flight events, gates and the flushes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::{Failure, GroupOrder, Moment, Place, SchedulingQueue, Timings};
use crate::scheduler::engine::queueing_hints::{ActionType, ClusterEvent, HintPod, QueueingHints};
use crate::scheduler::engine::{Profile, Workloads};

fn hints() -> QueueingHints {
    QueueingHints::new(&Profile::default_provider())
}

fn pod(name: &str, extra: serde_json::Value) -> Arc<Pod> {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    });
    merge(&mut value, extra);
    Arc::new(serde_json::from_value(value).expect("pod"))
}

fn merge(into: &mut serde_json::Value, extra: serde_json::Value) {
    match (into, extra) {
        (serde_json::Value::Object(into), serde_json::Value::Object(extra)) => {
            for (key, value) in extra {
                merge(into.entry(key).or_insert(serde_json::Value::Null), value);
            }
        }
        (into, extra) => *into = extra,
    }
}

fn node(name: &str, cpu: &str) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
        }))
        .expect("node"),
    )
}

fn at(seconds: f64) -> Moment {
    // A wall clock well past the epoch, with a fraction of a second to show the alignment.
    Moment(Duration::from_secs(1_000_000) + Duration::from_secs_f64(seconds))
}

fn plain(name: &str) -> Arc<HintPod> {
    Arc::new(HintPod::new(pod(name, json!({}))))
}

fn prepared(name: &str) -> Arc<HintPod> {
    Arc::new(hints().prepare(pod(name, json!({})), &Workloads::default()))
}

fn rejected_by(plugins: &[&str]) -> Failure {
    Failure::Unschedulable {
        plugins: plugins.iter().map(|p| Arc::from(*p)).collect(),
        pending: BTreeSet::new(),
    }
}

fn queue() -> SchedulingQueue<&'static str> {
    SchedulingQueue::new(Timings::default())
}

/// Pops `key` and fails it as rejected by NodeResourcesFit at `now`.
fn fail(queue: &mut SchedulingQueue<&'static str>, key: &'static str, now: Moment) -> Place {
    assert_eq!(queue.pop(), Some(key));
    queue
        .failed(
            &key,
            rejected_by(&["NodeResourcesFit"]),
            Some(prepared(key)),
            0,
            now,
            &hints(),
        )
        .expect("queued")
}

fn small_node_added() -> Arc<ClusterEvent> {
    Arc::new(ClusterEvent::node(ActionType::ADD, None, Some(node("small", "500m"))))
}

fn big_node_added() -> Arc<ClusterEvent> {
    Arc::new(ClusterEvent::node(ActionType::ADD, None, Some(node("big", "4"))))
}

#[test]
fn active_pods_pop_by_priority_then_by_when_they_were_queued() {
    let hints = hints();
    let mut queue = queue();
    let prioritised =
        |name: &str, priority: i32| Arc::new(HintPod::new(pod(name, json!({"spec": {"priority": priority}}))));
    queue.add("low-first", prioritised("low-first", 0), at(0.0), &hints);
    queue.add("high", prioritised("high", 100), at(1.0), &hints);
    queue.add("low-second", prioritised("low-second", 0), at(2.0), &hints);
    queue.add("higher-later", prioritised("higher-later", 1000), at(3.0), &hints);
    let order: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
    assert_eq!(order, ["higher-later", "high", "low-first", "low-second"]);
}

fn in_group(time: Moment, name: &str) -> Option<GroupOrder> {
    Some(GroupOrder {
        time,
        name: Arc::from(name),
    })
}

#[test]
fn pod_group_members_pop_by_priority_then_their_groups_time_then_name() {
    let hints = hints();
    let mut queue = queue();
    let prioritised =
        |name: &str, priority: i32| Arc::new(HintPod::new(pod(name, json!({"spec": {"priority": priority}}))));
    // Queued newest group first; the groups were created in the order old, young.
    queue.add("young-0", plain("young-0"), at(10.0), &hints);
    queue.add("old-1", plain("old-1"), at(11.0), &hints);
    queue.add("old-0", plain("old-0"), at(12.0), &hints);
    queue.add("plain", plain("plain"), at(3.0), &hints);
    queue.add("urgent", prioritised("urgent", 100), at(20.0), &hints);
    queue.sort_in_group(&"young-0", in_group(at(5.0), "ns/young-0"));
    queue.sort_in_group(&"old-1", in_group(at(1.0), "ns/old-1"));
    queue.sort_in_group(&"old-0", in_group(at(1.0), "ns/old-0"));
    queue.sort_in_group(&"urgent", in_group(at(9.0), "ns/urgent"));
    let order: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
    // Priority first; then the group's time against a plain pod's queue time; one group's members by name.
    assert_eq!(order, ["urgent", "old-0", "old-1", "plain", "young-0"]);
}

#[test]
fn a_member_sorted_back_by_priority_sort_takes_its_queue_time_again() {
    let hints = hints();
    let mut queue = queue();
    queue.add("member", plain("member"), at(2.0), &hints);
    queue.add("plain", plain("plain"), at(1.0), &hints);
    queue.sort_in_group(&"member", in_group(at(0.0), "ns/member"));
    queue.sort_in_group(&"member", None);
    assert_eq!(queue.pop(), Some("plain"));
    assert_eq!(queue.pop(), Some("member"));
}

#[test]
fn equal_backoff_expiries_pop_in_the_group_order_when_active_is_empty() {
    let hints = hints();
    let mut queue = queue();
    queue.add("young", plain("young"), at(0.0), &hints);
    queue.add("old", plain("old"), at(0.1), &hints);
    assert_eq!(queue.pop(), Some("young"));
    assert_eq!(queue.pop(), Some("old"));
    for key in ["young", "old"] {
        queue.failed(
            &key,
            rejected_by(&["NodeResourcesFit"]),
            Some(prepared(key)),
            0,
            at(0.5),
            &hints,
        );
    }
    queue.sort_in_group(&"young", in_group(at(0.3), "ns/young"));
    queue.sort_in_group(&"old", in_group(at(0.2), "ns/old"));
    queue.on_event(1, &big_node_added(), at(0.6), &hints);
    assert_eq!(queue.place(&"young"), Some(Place::Backoff));
    assert_eq!(queue.place(&"old"), Some(Place::Backoff));
    // Same expiry (1 s after 0.5, on the whole second): the older group's member first.
    assert_eq!(queue.pop(), Some("old"));
    assert_eq!(queue.pop(), Some("young"));
}

#[test]
fn backoff_doubles_from_one_second_to_ten_and_expires_on_whole_seconds() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    // Every failure is followed by a helpful event, which moves the pod to backoffQ until its expiry.
    let mut expiries = Vec::new();
    let mut now = at(0.3);
    for _ in 0..6 {
        assert_eq!(fail(&mut queue, "p", now), Place::Unschedulable);
        queue.on_event(1, &big_node_added(), now, &hints);
        assert_eq!(
            queue.place(&"p"),
            Some(Place::Backoff),
            "a hint said Queue while it backs off"
        );
        // Find the first whole second at which the flush lets it go.
        let mut second = now.whole_second();
        loop {
            second = second.next_second();
            if queue.flush_backoff_completed(second) > 0 {
                break;
            }
        }
        expiries.push(second.0.as_secs() - now.whole_second().0.as_secs());
        assert_eq!(queue.place(&"p"), Some(Place::Active));
        now = Moment(second.0 + Duration::from_millis(700));
    }
    // Failed at x.3 s (then x.7 s): a 1 s backoff expires at (x+1).3 truncated to x+1, and a pod is backing off
    // while its expiry is not before the current whole second, so it leaves at x+2.
    assert_eq!(expiries, [2, 3, 5, 9, 11, 11]);
}

#[test]
fn an_unschedulable_pod_moves_only_on_an_event_its_rejecting_plugin_says_could_help() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    assert_eq!(fail(&mut queue, "p", at(0.5)), Place::Unschedulable);
    let label = Arc::new(ClusterEvent::node(
        ActionType::UPDATE_NODE_LABEL,
        Some(node("n", "4")),
        Some(node("n", "4")),
    ));
    assert!(
        queue.on_event(1, &label, at(1.0), &hints).is_empty(),
        "Fit ignores label updates"
    );
    assert!(
        queue.on_event(2, &small_node_added(), at(1.0), &hints).is_empty(),
        "too small"
    );
    assert_eq!(queue.place(&"p"), Some(Place::Unschedulable));
    let moved = queue.on_event(3, &big_node_added(), at(30.0), &hints);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].event, "NodeAdd");
    assert_eq!(moved[0].to, Place::Active, "backoff is long over: straight to activeQ");
    assert_eq!(queue.pop(), Some("p"));
}

#[test]
fn a_pod_rejected_by_several_plugins_moves_when_any_of_them_says_queue() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    queue.failed(
        &"p",
        rejected_by(&["NodeAffinity", "NodeResourcesFit"]),
        Some(prepared("p")),
        0,
        at(0.0),
        &hints,
    );
    assert_eq!(queue.on_event(1, &big_node_added(), at(20.0), &hints).len(), 1);
}

#[test]
fn events_heard_in_flight_are_replayed_when_the_pod_fails_unless_its_decision_saw_them() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    queue.add("q", plain("q"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    // Heard while p is in its cycle: event 5 before its decision, event 6 after.
    queue.on_event(5, &big_node_added(), at(0.1), &hints);
    queue.on_event(6, &small_node_added(), at(0.2), &hints);
    let place = queue
        .failed(
            &"p",
            rejected_by(&["NodeResourcesFit"]),
            Some(prepared("p")),
            5,
            at(0.3),
            &hints,
        )
        .unwrap();
    assert_eq!(
        place,
        Place::Unschedulable,
        "the big node was seen; the small one cannot help"
    );

    assert_eq!(queue.pop(), Some("q"));
    queue.on_event(7, &big_node_added(), at(0.4), &hints);
    let place = queue
        .failed(
            &"q",
            rejected_by(&["NodeResourcesFit"]),
            Some(prepared("q")),
            6,
            at(0.5),
            &hints,
        )
        .unwrap();
    assert_eq!(
        place,
        Place::Backoff,
        "a node its decision missed could help: retried after its backoff"
    );
}

#[test]
fn an_event_a_failed_decision_already_saw_does_not_move_it_when_heard_late() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    queue.failed(
        &"p",
        rejected_by(&["NodeResourcesFit"]),
        Some(prepared("p")),
        9,
        at(0.0),
        &hints,
    );
    assert!(queue.on_event(9, &big_node_added(), at(5.0), &hints).is_empty());
    assert_eq!(queue.on_event(10, &big_node_added(), at(5.0), &hints).len(), 1);
}

#[test]
fn errors_back_off_without_hints_and_are_not_popped_early() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    let place = queue.failed(&"p", Failure::Error, None, 0, at(0.2), &hints).unwrap();
    assert_eq!(place, Place::ErrorBackoff);
    assert_eq!(
        queue.pop(),
        None,
        "PopFromBackoffQ never takes a pod backing off after an error"
    );
    assert_eq!(queue.flush_backoff_completed(at(1.0)), 0);
    assert_eq!(queue.flush_backoff_completed(at(2.0)), 1);
    assert_eq!(queue.pop(), Some("p"));
}

#[test]
fn an_idle_queue_pops_a_pod_still_backing_off_after_a_rejection() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    fail(&mut queue, "p", at(0.5));
    queue.on_event(1, &big_node_added(), at(0.6), &hints);
    assert_eq!(queue.place(&"p"), Some(Place::Backoff));
    queue.add("q", plain("q"), at(0.7), &hints);
    assert_eq!(queue.pop(), Some("q"), "activeQ first");
    assert_eq!(queue.pop(), Some("p"), "then backoffQ, when activeQ is empty");
}

#[test]
fn unschedulable_pods_are_retried_after_five_minutes_by_the_leftover_flush() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    fail(&mut queue, "p", at(0.0));
    assert!(
        queue.flush_unschedulable_leftover(at(300.0), &hints).is_empty(),
        "not older than 5 minutes"
    );
    let moved = queue.flush_unschedulable_leftover(at(300.5), &hints);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].event, "UnschedulableTimeout");
    assert_eq!(queue.pop(), Some("p"));
}

#[test]
fn a_gated_pod_waits_for_its_own_gates_to_go_and_no_flush_moves_it() {
    let hints = hints();
    let mut queue = queue();
    let gated = Arc::new(HintPod::new(pod(
        "p",
        json!({"spec": {"schedulingGates": [{"name": "g"}]}}),
    )));
    queue.add("p", gated, at(0.0), &hints);
    assert_eq!(queue.place(&"p"), Some(Place::Unschedulable));
    assert_eq!(queue.pop(), None);
    assert!(queue.on_event(1, &big_node_added(), at(1.0), &hints).is_empty());
    assert!(queue.flush_unschedulable_leftover(at(1000.0), &hints).is_empty());
    let open = Arc::new(HintPod::new(pod("p", json!({}))));
    let moved = queue.update("p", open, at(1000.0), &hints).expect("moved");
    assert_eq!(moved.event, "UnschedulablePodUpdatePodSchedulingGatesEliminated");
    assert_eq!(queue.pop(), Some("p"));
}

#[test]
fn an_unschedulable_pods_own_update_moves_it_when_a_hint_says_so() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    queue.failed(
        &"p",
        rejected_by(&["TaintToleration"]),
        Some(prepared("p")),
        0,
        at(0.0),
        &hints,
    );
    let labelled = Arc::new(hints.prepare(
        pod("p", json!({"metadata": {"labels": {"a": "b"}}})),
        &Workloads::default(),
    ));
    assert!(
        queue.update("p", labelled, at(20.0), &hints).is_none(),
        "labels do not matter to taints"
    );
    let tolerating = Arc::new(hints.prepare(
        pod(
            "p",
            json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}),
        ),
        &Workloads::default(),
    ));
    let moved = queue.update("p", tolerating, at(20.0), &hints).expect("moved");
    assert_eq!(moved.to, Place::Active);
}

#[test]
fn a_rejection_naming_no_plugin_backs_off_as_an_error() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    // No nodes at all: kube-scheduler's FitError names no plugin.
    let place = queue.failed(&"p", rejected_by(&[]), Some(prepared("p")), 0, at(0.0), &hints);
    assert_eq!(
        place,
        Some(Place::ErrorBackoff),
        "counted as an error: backoff, then retried"
    );
}

#[test]
fn a_deleted_pod_leaves_every_place_and_its_failure_is_ignored() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    queue.add("q", plain("q"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    queue.delete(&"p");
    assert_eq!(
        queue.failed(&"p", Failure::Error, None, 0, at(1.0), &hints),
        None,
        "deleted while in flight"
    );
    queue.delete(&"q");
    assert_eq!(queue.pop(), None);
    assert_eq!(queue.counts(), Default::default());
}

#[test]
fn a_binding_error_backs_the_pod_off_with_its_counts_kept() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    assert_eq!(queue.pop(), Some("p"));
    queue.assumed(&"p");
    assert_eq!(queue.place(&"p"), Some(Place::Binding));
    assert_eq!(queue.counts().in_flight, 1);
    assert_eq!(
        queue.failed(&"p", Failure::Error, None, 0, at(0.0), &hints),
        Some(Place::ErrorBackoff)
    );
    assert_eq!(queue.flush_backoff_completed(at(2.0)), 1);
    assert_eq!(queue.pop(), Some("p"));
    assert_eq!(queue.attempts(&"p"), 2);
}

#[test]
fn the_backoff_of_a_count_is_capped_and_never_overflows() {
    let timings = Timings::default();
    let seconds: Vec<u64> = [0, 1, 2, 3, 4, 5, 40, u32::MAX]
        .iter()
        .map(|&count| timings.backoff(count).as_secs())
        .collect();
    assert_eq!(seconds, [0, 1, 2, 4, 8, 10, 10, 10]);
}

#[test]
fn counts_follow_the_pods_between_places() {
    let hints = hints();
    let mut queue = queue();
    for key in ["a", "b", "c", "d"] {
        queue.add(key, plain(key), at(0.0), &hints);
    }
    assert_eq!(queue.counts().active, 4);
    fail(&mut queue, "a", at(0.0));
    assert_eq!(queue.pop(), Some("b"));
    queue.failed(&"b", Failure::Error, None, 0, at(0.0), &hints);
    assert_eq!(queue.pop(), Some("c"));
    let counts = queue.counts();
    assert_eq!(
        (counts.active, counts.backoff, counts.unschedulable, counts.in_flight),
        (1, 1, 1, 1)
    );
    assert_eq!(queue.unschedulable_pods().collect::<Vec<_>>(), [&"a"]);
    assert!(queue.has_next());
}

/// A bound pod of 1 CPU deleted (a victim gone): NodeResourcesFit's hint queues a pod it rejected.
fn victim_deleted() -> Arc<ClusterEvent> {
    let victim = pod("victim", json!({"spec": {"nodeName": "n1"}}));
    Arc::new(ClusterEvent::pod(ActionType::DELETE, Some(victim), None))
}

#[test]
fn a_preemptor_is_held_while_its_preemption_runs_and_moves_on_the_last_victims_deletion() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    queue.preempting(&"p");
    assert_eq!(fail(&mut queue, "p", at(0.0)), Place::Unschedulable);
    // A victim deleted while the preemption runs: the hint says the deletion helps, but PreEnqueue holds the pod.
    assert!(queue.on_event(1, &victim_deleted(), at(5.0), &hints).is_empty());
    assert_eq!(queue.place(&"p"), Some(Place::Unschedulable));
    let plugins = queue.unschedulable_plugins(&"p").expect("queued");
    assert!(plugins.contains("DefaultPreemption"), "{plugins:?}");
    // Held, a node added is no event of the holding plugin: nothing moves.
    assert!(queue.on_event(2, &big_node_added(), at(5.0), &hints).is_empty());
    // The preemption ends: the deletion heard while held moves the pod now.
    let moved = queue.preemption_finished(&"p", false, at(6.0)).expect("moved");
    assert_eq!(moved.event, "PreemptionFinished");
    assert_eq!(queue.pop(), Some("p"));
}

#[test]
fn after_the_hold_the_pod_waits_for_a_deletion_its_hints_accept() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    queue.preempting(&"p");
    fail(&mut queue, "p", at(0.0));
    assert_eq!(
        queue.preemption_finished(&"p", false, at(1.0)),
        None,
        "nothing heard yet"
    );
    assert!(!queue.is_preempting(&"p"));
    let moved = queue.on_event(1, &victim_deleted(), at(5.0), &hints);
    assert_eq!(moved.len(), 1);
    assert_eq!(queue.pop(), Some("p"));
}

#[test]
fn a_failed_preemption_activates_the_pod_at_once() {
    let hints = hints();
    let mut queue = queue();
    queue.add("p", plain("p"), at(0.0), &hints);
    queue.preempting(&"p");
    fail(&mut queue, "p", at(0.0));
    // Nothing moved it since its failure: it waits in the pool, not gated; activated all the same.
    let moved = queue.preemption_finished(&"p", true, at(0.5)).expect("moved");
    assert_eq!((moved.event.as_str(), moved.to), ("ForceActivate", Place::Active));
    assert_eq!(queue.pop(), Some("p"));
}

#[test]
fn a_named_waiting_pod_is_taken_out_of_any_waiting_place() {
    let hints = hints();
    let mut queue = queue();
    for key in ["a", "b", "c"] {
        queue.add(key, plain(key), at(0.0), &hints);
    }
    assert_eq!(fail(&mut queue, "a", at(0.0)), Place::Unschedulable);
    assert!(queue.take(&"a"), "taken from the unschedulable pool");
    assert!(queue.take(&"c"), "taken from activeQ");
    assert!(!queue.take(&"c"), "already in flight");
    assert_eq!(queue.place(&"a"), Some(Place::InFlight));
    assert_eq!(queue.attempts(&"a"), 2);
    assert_eq!(queue.pop(), Some("b"));
    assert_eq!(queue.pop(), None);
    assert_eq!(queue.counts().in_flight, 3);
}

#[test]
fn activation_moves_waiting_pods_to_active_at_once_but_keeps_gates() {
    let hints = hints();
    let mut queue = queue();
    queue.add("a", plain("a"), at(0.0), &hints);
    queue.add(
        "gated",
        Arc::new(HintPod::new(pod(
            "gated",
            json!({"spec": {"schedulingGates": [{"name": "g"}]}}),
        ))),
        at(0.0),
        &hints,
    );
    assert_eq!(fail(&mut queue, "a", at(0.0)), Place::Unschedulable);
    assert_eq!(queue.activate([&"a", &"gated", &"missing"]), vec!["a"]);
    assert_eq!(queue.place(&"a"), Some(Place::Active));
    assert_eq!(queue.place(&"gated"), Some(Place::Unschedulable));
    assert_eq!(queue.pop(), Some("a"));
}

#[test]
fn a_pod_queued_and_not_failed_is_kept_as_text_until_something_reads_it_whole() {
    let gated = pod(
        "g",
        json!({"metadata": {"resourceVersion": "7"}, "spec": {"priority": 4, "schedulingGates": [{"name": "wait"}]}}),
    );
    let queued = HintPod::new(gated.clone());
    assert!(queued.parsed_pod().is_none(), "kept as text");
    assert_eq!(
        (
            queued.uid(),
            queued.priority(),
            queued.is_gated(),
            queued.resource_version()
        ),
        (Some("u-g"), 4, true, Some("7"))
    );
    assert_eq!(**queued.pod(), *gated, "the text parses back to the same pod");
    assert!(queued.parsed_pod().is_some(), "kept parsed once read whole");

    // Queued and updated while waiting in activeQ: still text. In flight, an update is parsed to tell the decision
    // what changed.
    let hints = hints();
    let mut queue = SchedulingQueue::new(Timings::default());
    let relabelled = |name: &str| Arc::new(HintPod::new(pod(name, json!({"metadata": {"labels": {"a": "b"}}}))));
    queue.add("p", plain("p"), at(0.0), &hints);
    queue.add("q", plain("q"), at(0.1), &hints);
    assert!(queue.update("q", relabelled("q"), at(0.2), &hints).is_none());
    let parsed = |queue: &SchedulingQueue<&str>, key| queue.pod(&key).and_then(|p| p.parsed_pod()).is_some();
    assert!(!parsed(&queue, "p") && !parsed(&queue, "q"));
    assert_eq!(queue.pop(), Some("p"));
    assert!(queue.update("p", relabelled("p"), at(0.5), &hints).is_none());
    assert!(parsed(&queue, "p") && !parsed(&queue, "q"));
}
