//! The worker's gangs without a cluster: bookkeeping against watch events (relists, late kinds), and a PodGroup's run write by write.

use super::super::queue_loop::Loop;
use super::super::recording::Recording;
use super::super::tests as worker;
use super::*;
use crate::metrics::WatchMetrics;
use kube::api::ApiResource;
use kube::runtime::watcher::Event;
use ruleplane_config::scheduler::cosched::POD_GROUP_LABEL;
use ruleplane_config::scheduler::queue::Moment;
use ruleplane_config::scheduler::queue::Place;
use serde_json::json;
use std::time::Duration;

fn member(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": {POD_GROUP_LABEL: "train"}},
        "spec": {"containers": []},
    }))
    .expect("pod")
}

fn pod_group() -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": POD_GROUP_API, "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": 2},
    }))
    .expect("pod group")
}

/// The gangs of a v1.37 server with Coscheduling on, before any watch event.
fn gangs(workload_on: bool, pod_groups: Option<Arc<SharedWatch>>) -> Gangs {
    Gangs {
        api: WorkloadApi::V1Beta1,
        workload_on,
        coscheduling_on: true,
        workloads: None,
        pod_groups,
        late: None,
        groups: PodGroups::default(),
        noted: HashSet::new(),
        told: HashMap::new(),
        backoffs: Backoffs::default(),
        queue_sort: QueueSort::default(),
    }
}

fn key(name: &str) -> PodKey {
    PodKey {
        namespace: "ns".into(),
        name: name.into(),
    }
}

/// Pods and a PodGroup deleted while their watches were down: the relists do not list them, and the gangs
/// forget the members, what they were told, and the group's last rejection.
#[test]
fn a_relist_forgets_members_and_pod_groups_it_no_longer_lists() {
    let metrics = WatchMetrics::default();
    let pods = SharedWatch::new(ApiResource::erase::<Pod>(&()), &metrics);
    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "PodGroup",
    ));
    let pod_groups = SharedWatch::new(resource, &metrics);
    pod_groups.apply(Event::Apply(pod_group()));
    let mut gangs = gangs(false, Some(pod_groups.clone()));
    pods.apply(Event::Apply(member("m1")));
    pods.apply(Event::Apply(member("m2")));
    gangs.resync(&pods);
    let group = group_of(WorkloadApi::V1Beta1, &member("m1")).expect("a member");
    assert_eq!(gangs.groups.counts(&group).known, 2);
    gangs.noted.extend([key("m1"), key("m2")]);
    gangs.told.insert(key("m2"), "PodGroup ns/train: 1/2 pods".into());

    pods.apply(Event::Init);
    pods.apply(Event::InitApply(member("m1")));
    pods.apply(Event::InitDone);
    gangs.resync(&pods);
    assert_eq!(gangs.groups.counts(&group).known, 1, "m2 is no member any more");
    assert!(!gangs.groups.contains(&key("m2")));
    assert_eq!(gangs.noted, HashSet::from([key("m1")]), "what m2 was told is forgotten");
    assert!(gangs.told.is_empty());

    let spec = gangs.pod_group(&group).expect("the PodGroup is cached");
    let created = spec.created.expect("a creation time");
    let rejected = Moment(created.0 + Duration::from_secs(60));
    gangs.queue_sort.rejected(&group, rejected);
    let sorted_at = |gangs: &Gangs| gangs.queue_sort.order(&group, Some(&spec), "m1").map(|o| o.time);
    gangs.forget_rejections(&Change::Resync, &gangs.groups.groups());
    assert_eq!(
        sorted_at(&gangs),
        Some(rejected),
        "a relist that lists the PodGroup keeps its rejection"
    );

    pod_groups.apply(Event::Init);
    pod_groups.apply(Event::InitDone);
    gangs.forget_rejections(&Change::Resync, &gangs.groups.groups());
    assert!(gangs.pod_group(&group).is_none());
    assert_eq!(
        sorted_at(&gangs),
        Some(created),
        "the rejection of a PodGroup gone is forgotten"
    );
}

/// A kind not served yet (no watch) is no reason to schedule alone: its members name a group the worker
/// gang-schedules, whose object is missing until the kind's watch is added.
#[test]
fn members_of_a_kind_not_served_yet_wait_for_their_group_and_its_watch_is_taken_in_later() {
    let metrics = WatchMetrics::default();
    let mut gangs = gangs(true, None);
    let labelled = group_of(WorkloadApi::V1Beta1, &member("m1")).expect("a member");
    assert!(gangs.serves(&labelled), "held with its group, not placed alone");
    assert!(gangs.pod_group(&labelled).is_none());
    let named: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"schedulingGroup": {"podGroupName": "train"}},
    }))
    .expect("pod");
    let group = gangs.group_of(&named).expect("a member");
    assert!(gangs.serves(&group));
    assert!(!gangs.passes(&group), "PreEnqueue holds it: its PodGroup is not known");

    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "scheduling.k8s.io",
        "v1beta1",
        "PodGroup",
    ));
    let watch = SharedWatch::new(resource, &metrics);
    watch.apply(Event::Apply(
        serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ns"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
        }))
        .expect("pod group"),
    ));
    gangs.served_late(LateKind {
        dialect: Dialect::Workload,
        watch,
    });
    gangs.groups.apply(key("w"), group.clone(), MemberState::default());
    assert!(
        gangs.passes(&group),
        "its PodGroup is known now, and its quorum of one is there"
    );
}

/// A PodGroup watch holding the group `train` of two members.
fn pod_groups_watch() -> Arc<SharedWatch> {
    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "PodGroup",
    ));
    let pod_groups = SharedWatch::new(resource, &WatchMetrics::default());
    pod_groups.apply(Event::Apply(pod_group()));
    pod_groups
}

/// The loop of policy `s` over nodes of `cpu` each, with the members `names` of `train` (1 cpu each) pending.
fn gang_loop(nodes: &[&str], cpu: &str, names: &[&str]) -> (Loop, Arc<Recording>) {
    let (scheduler, writes) = worker::scheduler();
    for name in nodes {
        scheduler.cache.nodes.apply(Event::Apply(worker::node(name, cpu)));
    }
    for name in names {
        let mut pod = worker::asking(name, "1");
        pod.metadata.labels = member(name).metadata.labels;
        scheduler.cache.pods.apply(Event::Apply(pod));
    }
    let mut looped = Loop::new(scheduler, Some(gangs(false, Some(pod_groups_watch()))));
    looped.on_gang_change(Watched::Pods, &Change::Resync);
    looped.resync_pending();
    (looped, writes)
}

#[tokio::test]
async fn a_pod_group_that_fits_is_bound_whole_in_one_run() {
    let (mut looped, writes) = gang_loop(&["n"], "2", &["m1", "m2"]);

    worker::next_cycle(&mut looped).await;
    let mut written = writes.take();
    written.sort();
    assert_eq!(
        written,
        [
            "bind ns/m1 to n",
            "bind ns/m2 to n",
            "event Normal Scheduled ns/m1: Successfully assigned ns/m1 to n",
            "event Normal Scheduled ns/m2: Successfully assigned ns/m2 to n",
        ]
    );
}

#[tokio::test]
async fn a_pod_group_with_room_for_one_member_binds_none_and_gives_the_room_back() {
    let (mut looped, writes) = gang_loop(&["n"], "1", &["m1", "m2"]);

    worker::next_cycle(&mut looped).await;
    let mut written = writes.take();
    written.sort();
    let m2 = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod., PodGroup ns/train gets rejected due to Pod m2 is unschedulable even after PostFilter";
    let m1 = "0/1 nodes are available: 1 rejected due to unschedulable gang member ns/m2 at plugin Coscheduling.";
    let rejected = "pod group ns/train was rejected: member ns/m2 is unschedulable (1 of 2 members could be placed)";
    assert_eq!(
        written,
        [
            format!("event Warning FailedScheduling ns/m1: {m1}"),
            format!("event Warning FailedScheduling ns/m2: {m2}"),
            format!("event Warning GangRejected ns/m1: {rejected}"),
            format!("event Warning GangRejected ns/m2: {rejected}"),
            format!("status ns/m1: PodScheduled=False Unschedulable: {m1}; nomination Leave"),
            format!("status ns/m2: PodScheduled=False Unschedulable: {m2}; nomination Leave"),
        ]
    );
    assert_eq!(
        looped.queue.place(&key("m1")),
        Some(Place::Unschedulable),
        "back in the queue"
    );

    // The room m1 held during the run went back with the verdict: a pod alone takes it.
    let solo = worker::asking("solo", "1");
    looped.scheduler.cache.pods.apply(Event::Apply(solo));
    worker::attempt(&looped.scheduler, "solo").await;
    assert_eq!(writes.take()[0], "bind ns/solo to n");
}
