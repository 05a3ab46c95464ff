//! The scheduler worker without a cluster: caches fed synthetic nodes and pods, writes made to a recording, so the watch → decision → bind path is checked write by write.

use super::queue_loop::Loop;
use super::recording::Recording;
use super::*;
use crate::watch_hub::Change;
use kube::runtime::watcher::Event;
use ruleplane_config::scheduler::queue::Place;
use serde_json::json;
use std::time::Duration;
use tokio::sync::mpsc;

fn policy() -> SchedulerPolicy {
    let yaml =
        "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: s }\nspec:\n  schedulerName: s\n";
    let rules = ruleplane_config::load_str("policy.yaml", yaml).expect("valid policy");
    rules.scheduler_policies().next().expect("one policy").clone()
}

fn pending(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"schedulerName": "s", "containers": [{"name": "c"}]},
    }))
    .expect("pod")
}

/// A pending pod of the policy asking for `cpu`.
pub(super) fn asking(name: &str, cpu: &str) -> DynamicObject {
    let mut pod = pending(name);
    pod.data["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": cpu}});
    pod
}

pub(super) fn node(name: &str, cpu: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }))
    .expect("node")
}

/// A scheduler of the policy `s` on a cache fed by the test, writing to the returned recording.
pub(super) fn scheduler() -> (Arc<PodScheduler>, Arc<Recording>) {
    let policy = policy();
    let writes = Arc::new(Recording::default());
    let scheduler = Arc::new(PodScheduler {
        engine: Mutex::new(
            policy
                .engine_with_post_filters(1, ruleplane_config::KubernetesVersion::NEWEST)
                .expect("an engine"),
        ),
        hints: QueueingHints::new(policy.profile()),
        policy,
        ctx: crate::context::offline_context(),
        cache: cache::tests::cache(),
        writer: writes.clone(),
    });
    (scheduler, writes)
}

/// One pod's cycle and binding, and what they told the loop.
pub(super) async fn attempt(scheduler: &Arc<PodScheduler>, name: &str) -> Vec<Done> {
    let (sender, mut heard) = mpsc::unbounded_channel();
    scheduler.attempt(key(name), None, false, sender).await;
    let mut told = Vec::new();
    while let Ok(done) = heard.try_recv() {
        told.push(done);
    }
    told
}

fn key(name: &str) -> PodKey {
    PodKey {
        namespace: "ns".into(),
        name: name.into(),
    }
}

/// A pending pod deleted while the pod watch was down: the relist does not list it, and the resync takes it out
/// of the queue with what was kept of it (its first sighting, its reported fault: the policy is no longer
/// degraded by it).
#[tokio::test]
async fn a_relist_without_a_pending_pod_settles_it() {
    let (scheduler, _) = scheduler();
    let pods = scheduler.cache.pods.clone();
    let mut looped = Loop::new(scheduler, None);
    pods.apply(Event::Apply(pending("kept")));
    pods.apply(Event::Apply(pending("gone")));
    looped.resync_pending();
    assert_eq!(looped.queue.place(&key("gone")), Some(Place::Active));
    looped.faults.insert(key("gone"));
    let failure = crate::runner::Failure {
        category: "binding",
        degrades: true,
        message: "binding failed",
        same_as: "binding failed".into(),
    };
    assert!(looped.reported.failed(&key("gone"), failure, "pod not scheduled"));

    pods.apply(Event::Init);
    pods.apply(Event::InitApply(pending("kept")));
    pods.apply(Event::InitDone);
    looped.on_change(&pods.key, &Change::Resync).await;
    assert_eq!(looped.queue.place(&key("kept")), Some(Place::Active));
    assert_eq!(looped.queue.place(&key("gone")), None, "out of the queue");
    assert!(!looped.first_seen.contains_key(&key("gone")));
    assert!(
        looped.faults.is_empty() && looped.reported.is_empty(),
        "its fault is forgotten"
    );
}

#[tokio::test]
async fn a_pod_that_fits_is_bound_and_told_where() {
    let (scheduler, writes) = scheduler();
    scheduler.cache.nodes.apply(Event::Apply(node("small", "1")));
    scheduler.cache.nodes.apply(Event::Apply(node("large", "4")));
    scheduler.cache.pods.apply(Event::Apply(asking("p", "2")));

    let told = attempt(&scheduler, "p").await;
    assert_eq!(
        writes.take(),
        [
            "bind ns/p to large",
            "event Normal Scheduled ns/p: Successfully assigned ns/p to large"
        ]
    );
    assert!(matches!(
        told.as_slice(),
        [Done::Assumed(assumed), Done::Bound { key: bound, conflict: false }] if *assumed == key("p") && *bound == key("p")
    ));
}

/// A refused binding forgets the assumption: the room goes back at once, to the next pod.
#[tokio::test]
async fn a_refused_binding_gives_the_room_back() {
    let (scheduler, writes) = scheduler();
    scheduler.cache.nodes.apply(Event::Apply(node("n", "4")));
    scheduler.cache.pods.apply(Event::Apply(asking("p", "3")));
    scheduler.cache.pods.apply(Event::Apply(asking("q", "3")));
    writes.refuse_binding("p", 500);

    let told = attempt(&scheduler, "p").await;
    assert_eq!(writes.take(), ["bind ns/p to n"], "no Scheduled Event");
    let [Done::Assumed(_), Done::Failed { error, failure, .. }] = told.as_slice() else {
        panic!("assumed, then failed");
    };
    assert!(matches!(**error, SchedulingError::Binding { ref node, .. } if node == "n"));
    assert_eq!(*failure, Failure::Error);

    attempt(&scheduler, "q").await;
    assert_eq!(writes.take()[0], "bind ns/q to n", "p's room was given back");
}

/// A pod found bound by someone else (409) is not an error: no Event, and the watch accounts it where it is.
#[tokio::test]
async fn a_binding_conflict_is_not_reported() {
    let (scheduler, writes) = scheduler();
    scheduler.cache.nodes.apply(Event::Apply(node("n", "4")));
    scheduler.cache.pods.apply(Event::Apply(asking("p", "1")));
    writes.refuse_binding("p", 409);

    let told = attempt(&scheduler, "p").await;
    assert_eq!(writes.take(), ["bind ns/p to n"]);
    assert!(matches!(
        told.as_slice(),
        [Done::Assumed(_), Done::Bound { conflict: true, .. }]
    ));
}

/// Runs the loop's next scheduling cycle and everything it starts (binding, reports, a preemption) to the end,
/// each end taken in by the loop as it would take it.
pub(super) async fn next_cycle(looped: &mut Loop) {
    looped.start_next_cycle();
    loop {
        while let Ok(done) = looped.done.1.try_recv() {
            looped.on_done(done).await;
        }
        if let Some(joined) = looped.tasks.join_next().await {
            joined.expect("no task panics");
            continue;
        }
        // A preemption runs outside the loop's tasks: its end comes on the channel.
        match tokio::time::timeout(Duration::from_millis(200), looped.done.1.recv()).await {
            Ok(Some(done)) => looped.on_done(done).await,
            _ => break,
        }
    }
}

fn with_priority(mut pod: DynamicObject, priority: i32) -> DynamicObject {
    pod.data["spec"]["priority"] = json!(priority);
    pod
}

#[tokio::test]
async fn a_pod_that_fits_nowhere_is_told_why_once_in_an_event_and_its_condition() {
    let (scheduler, writes) = scheduler();
    scheduler.cache.nodes.apply(Event::Apply(node("n", "1")));
    scheduler.cache.pods.apply(Event::Apply(asking("p", "2")));
    let mut looped = Loop::new(scheduler, None);
    looped.resync_pending();

    next_cycle(&mut looped).await;
    // Nothing on the node to evict would make room: kube-scheduler's text, and the nomination cleared.
    let text = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    assert_eq!(
        writes.take(),
        [
            format!("event Warning FailedScheduling ns/p: {text}"),
            format!("status ns/p: PodScheduled=False Unschedulable: {text}; nomination Clear"),
        ]
    );
    assert_eq!(looped.queue.place(&key("p")), Some(Place::Unschedulable));

    // The same failure again is not told again.
    let again = SchedulingError::Unschedulable {
        message: text.into(),
        nominate: Nominate::Clear,
    };
    looped.report(key("p"), again).await;
    next_cycle(&mut looped).await;
    assert!(writes.take().is_empty(), "told once");
}

#[tokio::test]
async fn a_preemptor_is_nominated_and_its_victim_marked_deleted_and_told() {
    let (scheduler, writes) = scheduler();
    scheduler.cache.nodes.apply(Event::Apply(node("n", "2")));
    let mut victim = with_priority(asking("victim", "2"), 1);
    victim.data["spec"]["nodeName"] = json!("n");
    scheduler.cache.pods.apply(Event::Apply(victim));
    scheduler
        .cache
        .pods
        .apply(Event::Apply(with_priority(asking("p", "2"), 100)));
    let mut looped = Loop::new(scheduler, None);
    looped.resync_pending();

    next_cycle(&mut looped).await;
    let text = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n, preempting 1 victims";
    let mut written = writes.take();
    written.sort();
    assert_eq!(
        written,
        [
            "delete ns/victim if uid victim".to_string(),
            "event Normal Preempted ns/victim: Preempted by pod p on node n".to_string(),
            format!("event Warning FailedScheduling ns/p: {text}"),
            format!("status ns/p: PodScheduled=False Unschedulable: {text}; nomination Set(\"n\")"),
            "status ns/victim: DisruptionTarget s: preempting to accommodate a higher priority pod".to_string(),
        ]
    );
    assert_eq!(
        looped.queue.place(&key("p")),
        Some(Place::Unschedulable),
        "after its preemption, it waits for the victim's deletion"
    );
}
