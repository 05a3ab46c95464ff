//! Gang scheduling (Workload dialect, in the plane's version of the Workload API) on a real apiserver: members wait for their Workload, a gang that fits is
//! placed whole, one that cannot fit places none and says why, two gangs competing for the same nodes never
//! deadlock, kube-scheduler with the gates on agrees, and kill -9 of the scheduling replica mid-gang leaves the gang
//! whole; the Coscheduling dialect (a PodGroup and its label) goes through the same run, and a pod whose PodGroup
//! does not exist is told as Coscheduling tells it, and of two PodGroups competing for room the older is placed; a
//! member's preemption evicts only for a gang whose quorum it completes; `simulate` gives the members the worker's
//! verdicts and texts.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use ruleplane_config::scheduler::gang::WorkloadApi;
use serde_json::{Value, json};

use crate::support::cluster_nodes::{
    KubeScheduler, NodeGuard, create_node, create_priority_classes, delete_nodes, delete_priority_classes, node,
    nodes_lock,
};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, control_plane, eventually, test_namespace, write_rule_file as write};

pub(crate) fn policy(scheduler: &str) -> String {
    format!(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {scheduler} }}\n\
         spec: {{ schedulerName: {scheduler} }}\n"
    )
}

/// Creates the object holding the gang's policy in the plane's Workload API (a Workload, or a PodGroup since v1.36).
async fn create_workload(client: &Client, namespace: &str, name: &str, min_count: u32) {
    let (resource, object) = crate::support::gang_object(namespace, name, min_count);
    let object: DynamicObject = serde_json::from_value(object).expect("workload");
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
        .create(&PostParams::default(), &object)
        .await
        .expect("create workload");
}

/// A member of `workload`'s group `workers`, placed only on this test's nodes.
async fn create_member(
    client: &Client,
    namespace: &str,
    name: &str,
    workload: &str,
    scheduler: &str,
    cpu: &str,
    id: &str,
) {
    let resource = ApiResource::erase::<Pod>(&());
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
        .create(
            &PostParams::default(),
            &member(namespace, name, workload, scheduler, cpu, id),
        )
        .await
        .expect("create pod");
}

/// A member as the plane's Workload API names its group (`workloadRef` in v1.35, `schedulingGroup` since): a typed
/// pod of the newest version drops `workloadRef`, so it is created from its JSON.
pub(crate) fn member(
    namespace: &str,
    name: &str,
    workload: &str,
    scheduler: &str,
    cpu: &str,
    id: &str,
) -> DynamicObject {
    let (field, reference) = crate::support::gang_reference(workload);
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"gang": workload}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"gang-test": id},
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        },
    });
    pod["spec"][field] = reference;
    serde_json::from_value(pod).expect("pod")
}

/// Deletes every pod of the test's namespace at once, before its nodes go (schedulers stopped first), so no pod is
/// left bound to a node that no longer exists while other tests read the cluster.
pub(crate) async fn delete_pods(client: &Client, namespace: &str) {
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    Api::<Pod>::namespaced(client.clone(), namespace)
        .delete_collection(&now, &ListParams::default())
        .await
        .expect("delete pods");
}

/// The condition set on a gang's PodGroup (v1.36+) as `type status reason message observedGeneration`, once set;
/// `-` in v1.35, which has no PodGroup object.
pub(crate) async fn pod_group_condition(client: &Client, namespace: &str, name: &str) -> String {
    if control_plane().workload_api() == WorkloadApi::V1Alpha1 {
        return "-".to_string();
    }
    let (resource, _) = crate::support::gang_object(namespace, name, 1);
    let pod_groups = Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
    eventually(Duration::from_secs(30), &format!("{name}'s condition"), || async {
        let object = pod_groups.get(name).await.ok()?;
        let condition = object.data.pointer("/status/conditions/0")?;
        let field = |key: &str| match condition.get(key) {
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        Some(
            ["type", "status", "reason", "message", "observedGeneration"]
                .map(field)
                .join(" "),
        )
    })
    .await
}

pub(crate) async fn gang_nodes(client: &Client, id: &str, count: usize, cpu: &str) -> NodeGuard {
    let mut names = NodeGuard::default();
    for i in 0..count {
        names.push(
            create_node(
                client,
                node(
                    &format!("gang-{id}-{i}"),
                    cpu,
                    "64Gi",
                    json!({"gang-test": id}),
                    json!([]),
                ),
            )
            .await,
        );
    }
    names
}

/// Pod name → node (bound pods only) of one gang.
pub(crate) async fn bound_members(client: &Client, namespace: &str, workload: &str) -> BTreeMap<String, String> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("gang={workload}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    pods.into_iter()
        .filter_map(|p| {
            let node = p.spec?.node_name?;
            Some((p.metadata.name?, node))
        })
        .collect()
}

/// The PodScheduled=False message of a pod, once set.
pub(crate) async fn unschedulable_message(client: &Client, namespace: &str, name: &str) -> String {
    eventually(
        Duration::from_secs(30),
        &format!("pod {name} marked unschedulable"),
        || pod_scheduled_message(client, namespace, name),
    )
    .await
}

pub(crate) async fn pod_scheduled_message(client: &Client, namespace: &str, name: &str) -> Option<String> {
    let pod = Api::<Pod>::namespaced(client.clone(), namespace).get(name).await.ok()?;
    pod.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
        .message
}

async fn event_note(client: &Client, namespace: &str, pod: &str, reason: &str) -> String {
    eventually(Duration::from_secs(30), &format!("{reason} event of {pod}"), || async {
        let events = Api::<Event>::namespaced(client.clone(), namespace)
            .list(&ListParams::default().fields(&format!("regarding.name={pod}")))
            .await
            .ok()?;
        events
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))?
            .note
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_fits_is_placed_whole_and_one_that_cannot_places_none_and_says_why() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "gangs").await;
    let id = format!("{}", std::process::id());
    let scheduler = format!("gangs-{id}");
    // Two nodes of 2 cpu: four pods of 1 cpu (the late gang's ask for no cpu).
    let names = gang_nodes(&client, &id, 2, "2").await;
    let dir = temp_dir("gangs");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let manager = ManagerProcess::start(&dir, &ns, "gangs-a", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // Members before their Workload: held with kube-scheduler's PreEnqueue message, placed once it appears.
    create_member(&client, &ns, "late-0", "late", &scheduler, "0", &id).await;
    create_member(&client, &ns, "late-1", "late", &scheduler, "0", &id).await;
    let waiting = event_note(&client, &ns, "late-0", "GangWaiting").await;
    // kube-scheduler's PreEnqueue text of the plane's version (the typo is upstream's).
    let expected = match control_plane().workload_api() {
        WorkloadApi::V1Alpha1 => "waiting for pods's workload \"late\" to appear in scheduling queue",
        _ => "waiting for pods's pod group \"late\" to appear in scheduling queue",
    };
    assert_eq!(waiting, expected);
    create_workload(&client, &ns, "late", 2).await;
    eventually(Duration::from_secs(30), "the late gang placed whole", || async {
        (bound_members(&client, &ns, "late").await.len() == 2).then_some(())
    })
    .await;

    // Short of members: held at PreEnqueue, told how many are there.
    create_workload(&client, &ns, "fits", 3).await;
    create_member(&client, &ns, "fits-0", "fits", &scheduler, "1", &id).await;
    create_member(&client, &ns, "fits-1", "fits", &scheduler, "1", &id).await;
    let waiting = event_note(&client, &ns, "fits-1", "GangWaiting").await;
    let fits = crate::support::gang_display(&ns, "fits");
    assert_eq!(waiting, format!("pod group {fits} has 2 of 3 members ready"));
    assert!(bound_members(&client, &ns, "fits").await.is_empty());
    // The third member completes the gang: all three are placed.
    create_member(&client, &ns, "fits-2", "fits", &scheduler, "1", &id).await;
    eventually(Duration::from_secs(30), "the gang placed whole", || async {
        (bound_members(&client, &ns, "fits").await.len() == 3).then_some(())
    })
    .await;

    // One cpu is left: a gang of three cannot fit, and none of it is placed.
    create_workload(&client, &ns, "big", 3).await;
    for i in 0..3 {
        create_member(&client, &ns, &format!("big-{i}"), "big", &scheduler, "1", &id).await;
    }
    let mut messages = Vec::new();
    for i in 0..3 {
        messages.push(unschedulable_message(&client, &ns, &format!("big-{i}")).await);
    }
    assert!(
        bound_members(&client, &ns, "big").await.is_empty(),
        "none of the big gang is bound"
    );
    // The member that found no node says why as kube-scheduler would; in v1.35 its siblings name it (since v1.36
    // they are told the pod group's status: compared with kube-scheduler's below).
    let failing = messages
        .iter()
        .position(|m| m.contains("Insufficient cpu"))
        .unwrap_or_else(|| panic!("a member says why: {messages:?}"));
    let failing_name = format!("{ns}/big-{failing}");
    let v1_35 = control_plane().workload_api() == WorkloadApi::V1Alpha1;
    if v1_35 {
        for (i, message) in messages.iter().enumerate() {
            if i != failing {
                assert_eq!(
                    message,
                    &format!(
                        "0/1 nodes are available: 1 rejected due to unschedulable gang member {failing_name} at plugin GangScheduling."
                    )
                );
            }
        }
        let rejected = event_note(&client, &ns, "big-0", "GangRejected").await;
        assert!(
            rejected.starts_with(&format!(
                "pod group {} was rejected: member {failing_name} is unschedulable",
                crate::support::gang_display(&ns, "big")
            )),
            "{rejected}"
        );
    }
    let our_condition = pod_group_condition(&client, &ns, "big").await;

    // kube-scheduler with the gates on places a fitting gang whole as well, on two fresh nodes (the first two keep
    // their pods until the pod garbage collector's quarantine ends, even deleted).
    // No pod of the test may be bound to the nodes while they go: a pending one would take the room freed.
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
    let id = format!("{id}t");
    let names = gang_nodes(&client, &id, 2, "2").await;
    let twin = format!("gangs-twin-{id}");
    let kube_dir = temp_dir("gangs-twin");
    let kube_scheduler = KubeScheduler::start_with_gates(
        &kube_dir,
        vec![json!({"schedulerName": twin})],
        Some(control_plane().gang_gates()),
    );
    create_workload(&client, &ns, "twin", 3).await;
    for i in 0..3 {
        create_member(&client, &ns, &format!("twin-{i}"), "twin", &twin, "1", &id).await;
    }
    eventually(
        Duration::from_secs(60),
        "kube-scheduler places the gang whole",
        || async { (bound_members(&client, &ns, "twin").await.len() == 3).then_some(()) },
    )
    .await;
    // The same gang that cannot fit, for kube-scheduler: its failing member says exactly what Ruleplane's said (its
    // siblings wait at Permit for 5 minutes there, where Ruleplane rejects them at once).
    create_workload(&client, &ns, "twin-big", 3).await;
    for i in 0..3 {
        create_member(&client, &ns, &format!("twin-big-{i}"), "twin-big", &twin, "1", &id).await;
    }
    let theirs = eventually(Duration::from_secs(60), "kube-scheduler's failing member", || async {
        for i in 0..3 {
            let message = pod_scheduled_message(&client, &ns, &format!("twin-big-{i}")).await;
            if let Some(message) = message.filter(|m| m.contains("Insufficient cpu")) {
                return Some(message);
            }
        }
        None
    })
    .await;
    assert_eq!(theirs, messages[failing]);
    if !v1_35 {
        // Since v1.36 kube-scheduler tells every member in one pod-group cycle, and sets the PodGroup's condition:
        // the same texts and condition as Ruleplane's (docs/scheduler.md, "Gangs by Kubernetes version").
        let mut theirs = Vec::new();
        for i in 0..3 {
            theirs.push(unschedulable_message(&client, &ns, &format!("twin-big-{i}")).await);
        }
        theirs.sort();
        messages.sort();
        assert_eq!(theirs, messages);
        assert_eq!(pod_group_condition(&client, &ns, "twin-big").await, our_condition);
        assert!(our_condition.contains("Unschedulable"), "{our_condition}");
        let placed = pod_group_condition(&client, &ns, "twin").await;
        assert_eq!(placed, pod_group_condition(&client, &ns, "fits").await);
        assert!(
            placed.starts_with("PodGroup") && placed.contains("True Scheduled"),
            "{placed}"
        );
    }
    drop(kube_scheduler);
    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
}

/// What `ruleplane simulate` and `ruleplane test` say of gangs is what the cluster gets: the same nodes, pods and
/// Workloads given to `simulate_in` give every member the verdict and the text the worker gave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_gives_gang_members_the_verdicts_and_texts_the_worker_gives() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "gangs-offline").await;
    let id = format!("o{}", std::process::id());
    let scheduler = format!("gangs-{id}");
    let names = gang_nodes(&client, &id, 2, "2").await;
    // The cluster as the simulation will see it: every node, and the pods bound to them.
    let (nodes, existing) = cluster_state(&client).await;
    let dir = temp_dir("gangs-offline");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let manager = ManagerProcess::start(&dir, &ns, "gangs-o", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // `fits` (two of 1 cpu) is placed whole; `big` (1 cpu and 3 cpu) cannot be: none of it is placed.
    let members = [
        ("fits-0", "fits", "1"),
        ("fits-1", "fits", "1"),
        ("big-0", "big", "1"),
        ("big-1", "big", "3"),
    ];
    create_workload(&client, &ns, "fits", 2).await;
    for (name, workload, cpu) in &members[..2] {
        create_member(&client, &ns, name, workload, &scheduler, cpu, &id).await;
    }
    eventually(Duration::from_secs(30), "the fitting gang placed whole", || async {
        (bound_members(&client, &ns, "fits").await.len() == 2).then_some(())
    })
    .await;
    create_workload(&client, &ns, "big", 2).await;
    for (name, workload, cpu) in &members[2..] {
        create_member(&client, &ns, name, workload, &scheduler, cpu, &id).await;
    }
    // The same input offline.
    let api = control_plane().workload_api();
    let workloads = ["fits", "big"]
        .map(|name| {
            let (_, object) = crate::support::gang_object(&ns, name, 2);
            ruleplane_config::scheduler::simulate::WorkloadObject::of(api, &object).expect("workload")
        })
        .to_vec();
    let raw: Vec<DynamicObject> = members
        .iter()
        .map(|(name, workload, cpu)| member(&ns, name, workload, &scheduler, cpu, &id))
        .collect();
    let raw: Vec<Value> = raw.iter().map(|pod| serde_json::to_value(pod).expect("JSON")).collect();
    let pods = raw
        .iter()
        .map(|pod| serde_json::from_value(pod.clone()).expect("pod"))
        .collect();
    let objects = ruleplane_config::scheduler::simulate::ClusterObjects {
        workloads,
        workload_refs: ruleplane_config::scheduler::simulate::WorkloadRefs::capture(api, &raw),
        ..Default::default()
    };
    let offline = Offline {
        scheduler: &scheduler,
        cluster: (nodes, existing),
        pods,
        objects,
    };
    agrees_with_the_worker(&client, &ns, offline, &members.map(|(name, ..)| name), manager, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gangs_competing_for_the_same_nodes_never_deadlock() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "gangs-race").await;
    let id = format!("r{}", std::process::id());
    let scheduler = format!("gangs-{id}");
    // Four slots; two gangs of three each.
    let names = gang_nodes(&client, &id, 2, "2").await;
    let dir = temp_dir("gangs-race");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let manager = ManagerProcess::start(&dir, &ns, "gangs-b", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    create_workload(&client, &ns, "a", 3).await;
    create_workload(&client, &ns, "b", 3).await;
    // Interleaved, so both gangs complete at about the same time.
    for i in 0..3 {
        create_member(&client, &ns, &format!("a-{i}"), "a", &scheduler, "1", &id).await;
        create_member(&client, &ns, &format!("b-{i}"), "b", &scheduler, "1", &id).await;
    }
    let (winner, loser) = eventually(Duration::from_secs(30), "one gang placed whole", || async {
        let (a, b) = (
            bound_members(&client, &ns, "a").await.len(),
            bound_members(&client, &ns, "b").await.len(),
        );
        match (a, b) {
            (3, _) => Some(("a", "b")),
            (_, 3) => Some(("b", "a")),
            _ => None,
        }
    })
    .await;
    // The other is rejected whole: every member says so, none is bound.
    for i in 0..3 {
        unschedulable_message(&client, &ns, &format!("{loser}-{i}")).await;
    }
    assert!(
        bound_members(&client, &ns, loser).await.is_empty(),
        "gang {loser} partly placed while {winner} is whole"
    );
    assert_eq!(bound_members(&client, &ns, winner).await.len(), 3);
    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_of_the_scheduling_replica_mid_gang_the_gang_is_placed_whole() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "gangs-takeover").await;
    let id = format!("k{}", std::process::id());
    let scheduler = format!("gangs-{id}");
    let names = gang_nodes(&client, &id, 4, "8").await;
    let dir = temp_dir("gangs-takeover");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let lease = [
        "--lease-duration",
        "4s",
        "--renew-deadline",
        "3s",
        "--retry-period",
        "1s",
    ];
    let first = ManagerProcess::start(&dir, &ns, "gangs-first", &lease);
    first.wait_ready(Duration::from_secs(60)).await;
    let second = ManagerProcess::start(&dir, &ns, "gangs-second", &lease);
    second.wait_ready(Duration::from_secs(60)).await;
    let first_schedules = eventually(
        Duration::from_secs(30),
        "one replica holds the schedulers unit",
        || async {
            let (one, two) = (first.holds("schedulers").await?, second.holds("schedulers").await?);
            (one != two).then_some(one)
        },
    )
    .await;
    let (mut scheduling, other) = if first_schedules {
        (first, second)
    } else {
        (second, first)
    };

    // A gang of 300 members of 100m (30 of the 32 cpu): bound together once all are allowed.
    let members = 300;
    create_workload(&client, &ns, "job", members).await;
    let creating = {
        let (client, ns, scheduler, id) = (client.clone(), ns.clone(), scheduler.clone(), id.clone());
        tokio::spawn(async move {
            use futures::StreamExt;
            futures::stream::iter(0..members)
                .for_each_concurrent(16, |i| {
                    let (client, ns, scheduler, id) = (client.clone(), ns.clone(), scheduler.clone(), id.clone());
                    async move {
                        create_member(&client, &ns, &format!("job-{i}"), "job", &scheduler, "100m", &id).await
                    }
                })
                .await;
        })
    };
    creating.await.expect("members created");
    // Killed as soon as the first member is bound: the other bindings are in flight or not sent yet.
    let api = Api::<Pod>::namespaced(client.clone(), &ns);
    let first_bound = ListParams::default().fields("spec.nodeName!=").limit(1);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while api.list(&first_bound).await.map(|l| l.items.is_empty()).unwrap_or(true) {
        assert!(std::time::Instant::now() < deadline, "no member bound within 60 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    scheduling.kill9();
    let at_kill = bound_members(&client, &ns, "job").await.len();
    // The new holder counts the bound members towards the quorum and places the rest.
    let bound = eventually(
        Duration::from_secs(60),
        "the whole gang bound after the takeover",
        || async {
            let bound = bound_members(&client, &ns, "job").await;
            (bound.len() == members as usize).then_some(bound)
        },
    )
    .await;
    println!("{at_kill} of {members} members bound when the scheduling replica was killed");
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for node in bound.values() {
        *used.entry(node.clone()).or_default() += 100;
    }
    for (node, millis) in &used {
        assert!(*millis <= 8000, "{node} overcommitted: {millis}m of 8000m");
    }
    drop(other);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
}

/// Installs scheduler-plugins' PodGroup CRD (the small manifest under `tests/crds/`) and waits until it is served.
pub(crate) fn install_pod_group_crd() {
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/crds/scheduling.x-k8s.io_podgroups.yaml"
    );
    crate::support::kubectl(&["apply", "-f", manifest]);
    crate::support::kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/podgroups.scheduling.x-k8s.io",
    ]);
}

pub(crate) async fn create_pod_group(client: &Client, namespace: &str, name: &str, min_member: u32) {
    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "PodGroup",
    ));
    let group: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 10},
    }))
    .expect("pod group");
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
        .create(&PostParams::default(), &group)
        .await
        .expect("create pod group");
}

/// A member of PodGroup `group` (by label) of 1 cpu, placed only on this test's nodes.
pub(crate) async fn create_labelled_member(
    client: &Client,
    namespace: &str,
    name: &str,
    group: &str,
    scheduler: &str,
    id: &str,
) {
    create_labelled_pod(client, namespace, name, group, scheduler, id, "1").await;
}

/// A pod labelled with PodGroup `group`, requesting `cpu`, placed only on this test's nodes.
async fn create_labelled_pod(
    client: &Client,
    namespace: &str,
    name: &str,
    group: &str,
    scheduler: &str,
    id: &str,
    cpu: &str,
) {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &labelled_pod(namespace, name, group, scheduler, id, cpu),
        )
        .await
        .expect("create pod");
}

fn labelled_pod(namespace: &str, name: &str, group: &str, scheduler: &str, id: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"gang": group, "scheduling.x-k8s.io/pod-group": group}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"gang-test": id},
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        },
    }))
    .expect("pod")
}

/// What `simulate` is given: the policy's scheduler name, the cluster before the members (nodes, bound pods), the
/// members, and the gang objects.
struct Offline<'a> {
    scheduler: &'a str,
    cluster: (Vec<Node>, Vec<Pod>),
    pods: Vec<Pod>,
    objects: ruleplane_config::scheduler::simulate::ClusterObjects,
}

/// Simulates the members offline with the worker's policy, waits for the worker's verdicts on the `members` to
/// settle, cleans up (the manager, the pods, the `nodes`), then checks both say the same of every member.
async fn agrees_with_the_worker(
    client: &Client,
    namespace: &str,
    offline: Offline<'_>,
    members: &[&str],
    manager: ManagerProcess,
    nodes: &[String],
) {
    let rules = ruleplane_config::load_str("policy.yaml", &policy(offline.scheduler)).expect("policy");
    let offline_policy = rules.scheduler_policies().next().expect("one policy");
    let (cluster_nodes, existing) = offline.cluster;
    // The plane's kube-scheduler minor, as the worker behaves.
    let mut objects = offline.objects;
    objects.kubernetes_version = crate::support::plane_version(client).await;
    let simulation = ruleplane_config::scheduler::simulate::simulate_in(
        offline_policy,
        cluster_nodes,
        existing,
        offline.pods,
        objects,
        1,
        false,
    )
    .expect("simulates");
    let expected = verdicts(&simulation);
    let cluster = settled_verdicts(client, namespace, members, &expected).await;
    drop(manager);
    delete_pods(client, namespace).await;
    delete_nodes(client, nodes).await;
    assert_eq!(expected, cluster);
}

/// The members' verdicts as the cluster shows them (bound, or the PodScheduled=False message), once they equal
/// `expected` or after 30 s: a member tried before its siblings exist is told an interim text (held, short group),
/// then its run's verdict once they do, so an early read is not the worker's last word. Read before cleaning up and
/// asserting, so that a difference leaves no node behind for the tests after it.
async fn settled_verdicts(
    client: &Client,
    namespace: &str,
    names: &[&str],
    expected: &BTreeMap<String, Result<bool, String>>,
) -> BTreeMap<String, Result<bool, String>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut seen = BTreeMap::new();
        for name in names {
            let pod = Api::<Pod>::namespaced(client.clone(), namespace).get(name).await.ok();
            let bound = pod.and_then(|p| p.spec?.node_name).is_some_and(|node| !node.is_empty());
            let verdict = if bound {
                Ok(true)
            } else {
                Err(pod_scheduled_message(client, namespace, name).await.unwrap_or_default())
            };
            seen.insert(format!("{namespace}/{name}"), verdict);
        }
        if &seen == expected || std::time::Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The cluster a simulation is given: every node, and every pod bound to one.
async fn cluster_state(client: &Client) -> (Vec<Node>, Vec<Pod>) {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items;
    let bound = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|pod| pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .collect();
    (nodes, bound)
}

/// Each placement's verdict as the worker reports it: its node, or its PodScheduled message (the FailedScheduling
/// text: the message, then the PostFilter text after a space).
fn verdicts(simulation: &ruleplane_config::scheduler::simulate::Simulation) -> BTreeMap<String, Result<bool, String>> {
    simulation
        .placements
        .iter()
        .map(|p| {
            let message = p.message.clone().unwrap_or_default();
            let verdict = match (&p.node, &p.post_filter_message) {
                (Some(_), _) => Ok(true),
                (None, Some(post_filter)) => Err(format!("{message} {post_filter}")),
                (None, None) => Err(message),
            };
            (p.pod.clone(), verdict)
        })
        .collect()
}

/// What `ruleplane simulate` and `ruleplane test` say of PodGroups is what the cluster gets (as for Workloads,
/// `simulate_gives_gang_members_the_verdicts_and_texts_the_worker_gives`): a group placed whole, a group rejected by
/// a member with Coscheduling's reason, a labelled pod whose PodGroup does not exist, a group short of `minMember`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_gives_pod_group_members_the_verdicts_and_texts_the_worker_gives() {
    // The CRD under the node lock: gang_late_kinds deletes and reinstalls it while holding that lock.
    let _nodes = nodes_lock().await;
    install_pod_group_crd();
    let client = admin_client().await;
    let ns = test_namespace(&client, "cosched-offline").await;
    let id = format!("{}co", std::process::id());
    let scheduler = format!("cosched-{id}");
    let names = gang_nodes(&client, &id, 2, "2").await;
    let (nodes, existing) = cluster_state(&client).await;
    let dir = temp_dir("cosched-offline");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let manager = ManagerProcess::start(&dir, &ns, "cosched-o", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    let groups = [("fits", 2), ("big", 2), ("eval", 2)];
    let members = [
        ("fits-0", "fits", "1"),
        ("fits-1", "fits", "1"),
        ("big-0", "big", "1"),
        ("big-1", "big", "3"),
        ("orphan-0", "orphan", "1"),
        ("eval-0", "eval", "1"),
    ];
    create_pod_group(&client, &ns, "fits", 2).await;
    for (name, group, cpu) in &members[..2] {
        create_labelled_pod(&client, &ns, name, group, &scheduler, &id, cpu).await;
    }
    eventually(Duration::from_secs(30), "the fitting group placed whole", || async {
        (bound_members(&client, &ns, "fits").await.len() == 2).then_some(())
    })
    .await;
    for (group, min_member) in &groups[1..] {
        create_pod_group(&client, &ns, group, *min_member).await;
    }
    for (name, group, cpu) in &members[2..] {
        create_labelled_pod(&client, &ns, name, group, &scheduler, &id, cpu).await;
    }
    let pod_groups = groups
        .iter()
        .map(|(name, min_member)| {
            ruleplane_config::scheduler::simulate::PodGroupObject::of(&json!({
                "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member},
            }))
        })
        .collect();
    let pods = members
        .iter()
        .map(|(name, group, cpu)| labelled_pod(&ns, name, group, &scheduler, &id, cpu))
        .collect();
    let objects = ruleplane_config::scheduler::simulate::ClusterObjects {
        pod_groups,
        ..Default::default()
    };
    let offline = Offline {
        scheduler: &scheduler,
        cluster: (nodes, existing),
        pods,
        objects,
    };
    agrees_with_the_worker(&client, &ns, offline, &members.map(|(name, ..)| name), manager, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_is_placed_whole_and_a_short_one_is_held_with_coschedulings_message() {
    // The CRD under the node lock: gang_late_kinds deletes and reinstalls it while holding that lock.
    let _nodes = nodes_lock().await;
    install_pod_group_crd();
    let client = admin_client().await;
    let ns = test_namespace(&client, "cosched").await;
    let id = format!("{}c", std::process::id());
    let scheduler = format!("cosched-{id}");
    // Two nodes of 2 cpu, members of 1 cpu each.
    let names = gang_nodes(&client, &id, 2, "2").await;
    let dir = temp_dir("cosched");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let manager = ManagerProcess::start(&dir, &ns, "cosched-a", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // Short of members: held by Coscheduling's PreFilter, with its message (the node count is the cluster's).
    create_pod_group(&client, &ns, "fits", 3).await;
    create_labelled_member(&client, &ns, "fits-0", "fits", &scheduler, &id).await;
    create_labelled_member(&client, &ns, "fits-1", "fits", &scheduler, &id).await;
    // kube-scheduler runs the PostFilter chain after a PreFilter rejection too: DynamicResources, DefaultPreemption
    // (no node where preemption helps), then Coscheduling's rejection of the group.
    let held = unschedulable_message(&client, &ns, "fits-1").await;
    let no_claims = crate::support::no_claims_reason(crate::support::plane_version(&client).await);
    assert!(
        held.starts_with("0/")
            && held.contains(&format!(
                " nodes are available: pre-filter pod fits-1 cannot find enough sibling pods, current pods number: 2, \
                 minMember of group: 3. {no_claims}preemption: 0/"
            ))
            && held.ends_with(&format!(
                " Preemption is not helpful for scheduling., PodGroup {ns}/fits gets rejected due to Pod fits-1 is \
                 unschedulable even after PostFilter"
            )),
        "{held}"
    );
    assert!(bound_members(&client, &ns, "fits").await.is_empty());
    // The third member completes the group: all three are placed.
    create_labelled_member(&client, &ns, "fits-2", "fits", &scheduler, &id).await;
    eventually(Duration::from_secs(30), "the pod group placed whole", || async {
        (bound_members(&client, &ns, "fits").await.len() == 3).then_some(())
    })
    .await;

    // A label naming no PodGroup: tried like a pod of no group; the one cpu left fits it, and Permit rejects it.
    create_labelled_member(&client, &ns, "orphan-0", "orphan", &scheduler, &id).await;
    assert_eq!(
        unschedulable_message(&client, &ns, "orphan-0").await,
        "0/1 nodes are available: 1 PodGroup not found."
    );
    assert!(bound_members(&client, &ns, "orphan").await.is_empty());
    // One that fits nowhere: the default profile's text, then Coscheduling's PostFilter reason after the chain's.
    create_labelled_pod(&client, &ns, "orphan-1", "orphan", &scheduler, &id, "2").await;
    let nowhere = unschedulable_message(&client, &ns, "orphan-1").await;
    assert!(
        nowhere.starts_with("0/")
            && nowhere.contains(" nodes are available: 2 Insufficient cpu")
            && nowhere.contains(&format!(". {no_claims}preemption: 0/"))
            && nowhere.contains(" No preemption victims found for incoming pod")
            && nowhere.ends_with("., can not find pod group"),
        "{nowhere}"
    );

    // A group asking in `minResources` for more cpu than the cluster has left: Coscheduling's PreFilter names the gap.
    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "PodGroup",
    ));
    let greedy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "greedy", "namespace": ns},
        "spec": {"minMember": 1, "minResources": {"cpu": "100000"}},
    }))
    .expect("pod group");
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &resource)
        .create(&PostParams::default(), &greedy)
        .await
        .expect("create pod group");
    create_labelled_member(&client, &ns, "greedy-0", "greedy", &scheduler, &id).await;
    let gap = unschedulable_message(&client, &ns, "greedy-0").await;
    assert!(
        gap.contains(" nodes are available: resource gap: map[cpu:{{") && gap.contains(" DecimalSI}]. "),
        "{gap}"
    );
    assert!(bound_members(&client, &ns, "greedy").await.is_empty());

    // One cpu is left: a group of three cannot fit, none of it is placed, and the siblings name the failing member.
    create_pod_group(&client, &ns, "big", 3).await;
    for i in 0..3 {
        create_labelled_member(&client, &ns, &format!("big-{i}"), "big", &scheduler, &id).await;
    }
    // Members popped before the last sibling was added were held by PreFilter first: wait for the run's verdict.
    let mut messages = Vec::new();
    for i in 0..3 {
        let name = format!("big-{i}");
        let run = eventually(
            Duration::from_secs(30),
            &format!("{name} rejected with its group"),
            || async {
                // A member tried before the worker's watch brought it the PodGroup is told it is missing, and
                // tried again when the PodGroup arrives (Coscheduling's event): wait for the group's verdict.
                pod_scheduled_message(&client, &ns, &name)
                    .await
                    .filter(|m| !m.contains("pre-filter") && !m.contains("PodGroup not found"))
            },
        )
        .await;
        messages.push(run);
    }
    assert!(bound_members(&client, &ns, "big").await.is_empty());
    let failing = messages
        .iter()
        .position(|m| m.contains("Insufficient cpu"))
        .unwrap_or_else(|| panic!("a member says why: {messages:?}"));
    // Coscheduling's PostFilter names the group's rejection after DefaultPreemption's part.
    assert!(
        messages[failing].ends_with(&format!(
            ", PodGroup {ns}/big gets rejected due to Pod big-{failing} is unschedulable even after PostFilter"
        )),
        "{}",
        messages[failing]
    );
    for (i, message) in messages.iter().enumerate() {
        if i != failing {
            assert_eq!(
                message,
                &format!(
                    "0/1 nodes are available: 1 rejected due to unschedulable gang member {ns}/big-{failing} at plugin Coscheduling."
                )
            );
        }
    }
    let rejected = event_note(&client, &ns, "big-0", "GangRejected").await;
    assert!(
        rejected.starts_with(&format!("pod group {ns}/big was rejected")),
        "{rejected}"
    );

    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_pod_groups_competing_for_room_for_one_the_older_is_placed_whatever_order_its_pods_came_in() {
    // The CRD under the node lock: gang_late_kinds deletes and reinstalls it while holding that lock.
    let _nodes = nodes_lock().await;
    install_pod_group_crd();
    let client = admin_client().await;
    let ns = test_namespace(&client, "cosched-order").await;
    let id = format!("{}q", std::process::id());
    let scheduler = format!("cosched-order-{id}");
    // One node of 2 cpu: room for one gang of two 1-cpu members.
    let names = gang_nodes(&client, &id, 1, "2").await;
    // The older PodGroup is the later in name order, and its pods are created last: only Coscheduling's QueueSort
    // (the PodGroup's creation time) puts it first. creationTimestamp has whole seconds.
    create_pod_group(&client, &ns, "b-old", 2).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create_pod_group(&client, &ns, "a-young", 2).await;
    for group in ["a-young", "b-old"] {
        for i in 0..2 {
            create_labelled_member(&client, &ns, &format!("{group}-{i}"), group, &scheduler, &id).await;
        }
    }
    // The policy's worker starts with all four pods waiting in its queue.
    let dir = temp_dir("cosched-order");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let manager = ManagerProcess::start(&dir, &ns, "cosched-order", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    eventually(Duration::from_secs(30), "the older PodGroup placed whole", || async {
        (bound_members(&client, &ns, "b-old").await.len() == 2).then_some(())
    })
    .await;
    // The younger group's run comes next and finds no room: rejected whole.
    let rejected = event_note(&client, &ns, "a-young-0", "GangRejected").await;
    assert!(
        rejected.starts_with(&format!("pod group {ns}/a-young was rejected")),
        "{rejected}"
    );
    assert!(bound_members(&client, &ns, "a-young").await.is_empty());

    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
}

/// The label cluster.sh starts KWOK with (docs/control-plane.md): KWOK plays the kubelet on such a node, so a
/// preemption victim is removed once deleted.
const KWOK_NODE: (&str, &str) = ("ruleplane.dev/kwok", "true");

/// A pod of priority class `class` bound to `node` by name (no scheduler), requesting `cpu`.
fn filler(namespace: &str, name: &str, node: &str, class: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "priorityClassName": class,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
        },
    }))
    .expect("filler")
}

/// A member of PodGroup `group` of priority class `class`, placed only on this test's nodes.
fn prioritized_member(namespace: &str, name: &str, group: &str, scheduler: &str, id: &str, class: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"gang": group, "scheduling.x-k8s.io/pod-group": group}},
        "spec": {
            "schedulerName": scheduler,
            "priorityClassName": class,
            "nodeSelector": {"gang-test": id},
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
        },
    }))
    .expect("member")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_evicts_nothing_unless_preemption_completes_its_quorum_and_is_placed_once_the_victims_are_gone() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "gangpreempt").await;
    let id = format!("{}p", std::process::id());
    let scheduler = format!("gangpreempt-{id}");
    let class = |name: &str| format!("gangpreempt-{name}-{id}");
    let classes: Vec<(String, i32, &str)> = [("high", 1000), ("low", 10)]
        .into_iter()
        .map(|(name, value)| (class(name), value, "PreemptLowerPriority"))
        .collect();
    create_priority_classes(&client, &classes).await;
    // The CRD under the node lock: gang_late_kinds deletes and reinstalls it while holding that lock.
    let _nodes = nodes_lock().await;
    install_pod_group_crd();
    // Three KWOK nodes: two of 2 cpu, the first full of a low-priority pod, the second of a high-priority one, and
    // an empty one of 1 cpu.
    let mut names = NodeGuard::default();
    for (i, cpu) in ["2", "2", "1"].into_iter().enumerate() {
        let labels = json!({"gang-test": id, KWOK_NODE.0: KWOK_NODE.1});
        names.push(
            create_node(
                &client,
                node(&format!("gangpreempt-{id}-{i}"), cpu, "8Gi", labels, json!([])),
            )
            .await,
        );
    }
    let nodes = Api::<Node>::all(client.clone());
    for name in names.iter() {
        eventually(Duration::from_secs(30), &format!("{name} Ready"), || async {
            nodes
                .get(name)
                .await
                .ok()?
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.status == "True")
        })
        .await;
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let create = |pod: Pod| {
        let pods = pods.clone();
        async move { pods.create(&PostParams::default(), &pod).await.expect("create pod") }
    };
    create(filler(&ns, "low", &names[0], &class("low"), "2")).await;
    create(filler(&ns, "high", &names[1], &class("high"), "2")).await;
    let dir = temp_dir("gangpreempt");
    // A rejected group backs off (scheduler-plugins' podGroupBackoffSeconds).
    let backoff_policy = format!(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {scheduler} }}\n\
         spec: {{ schedulerName: {scheduler}, pluginArgs: {{ Coscheduling: {{ podGroupBackoffSeconds: 300 }} }} }}\n"
    );
    write(&dir, "policy.yaml", &backoff_policy);
    let manager = ManagerProcess::start(&dir, &ns, "gangpreempt", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // Four high-priority members of 1 cpu: one fits on the empty node, two on the first node by evicting `low`, the
    // fourth nowhere. The gang is rejected and `low` is not touched.
    create_pod_group(&client, &ns, "four", 4).await;
    for i in 0..4 {
        let name = format!("four-{i}");
        create(prioritized_member(&ns, &name, "four", &scheduler, &id, &class("high"))).await;
    }
    let rejected = event_note(&client, &ns, "four-0", "GangRejected").await;
    // The two members placeable by preemption counted towards the quorum, and still nothing was evicted.
    assert!(
        rejected.starts_with(&format!("pod group {ns}/four was rejected"))
            && rejected.ends_with("(3 of 4 members could be placed)"),
        "{rejected}"
    );
    let low = pods.get("low").await.expect("low is still there");
    assert!(low.metadata.deletion_timestamp.is_none(), "low is not evicted");
    let disrupted = low
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "DisruptionTarget");
    assert!(!disrupted, "low is not marked for disruption");
    assert!(bound_members(&client, &ns, "four").await.is_empty());
    // The rejected group is backed off: a member added now is held by Coscheduling's PreFilter.
    create(prioritized_member(
        &ns,
        "four-4",
        "four",
        &scheduler,
        &id,
        &class("high"),
    ))
    .await;
    let backed_off = unschedulable_message(&client, &ns, "four-4").await;
    assert!(
        backed_off.contains(&format!(" nodes are available: podGroup {ns}/four failed recently. ")),
        "{backed_off}"
    );
    pods.delete_collection(&Default::default(), &ListParams::default().labels("gang=four"))
        .await
        .expect("delete the rejected gang");
    eventually(Duration::from_secs(30), "the rejected gang gone", || async {
        let left = pods.list(&ListParams::default().labels("gang=four")).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await;

    // Three members: one fits on the empty node, two on the first once `low` is gone. The quorum is met by
    // preemption: the member that fitted gives its reservation back and waits, `low` is evicted (KWOK removes it),
    // and the gang is placed whole.
    create_pod_group(&client, &ns, "three", 3).await;
    for i in 0..3 {
        let name = format!("three-{i}");
        create(prioritized_member(&ns, &name, "three", &scheduler, &id, &class("high"))).await;
    }
    eventually(Duration::from_secs(60), "low evicted and removed", || async {
        matches!(pods.get_opt("low").await, Ok(None)).then_some(())
    })
    .await;
    let placed = eventually(Duration::from_secs(60), "the gang of three placed", || async {
        let bound = bound_members(&client, &ns, "three").await;
        (bound.len() == 3).then_some(bound)
    })
    .await;
    let on_first = placed.values().filter(|node| *node == &names[0]).count();
    let on_empty = placed.values().filter(|node| *node == &names[2]).count();
    assert_eq!((on_first, on_empty), (2, 1), "{placed:?}");
    let mut waiting = Vec::new();
    for i in 0..3 {
        let events = Api::<Event>::namespaced(client.clone(), &ns)
            .list(&ListParams::default().fields(&format!("regarding.name=three-{i}")))
            .await
            .expect("events");
        let notes = events
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("GangWaiting"));
        waiting.extend(notes.filter_map(|e| e.note));
    }
    let prefix = format!("pod group {ns}/three waits for the preemption by {ns}/three-");
    assert!(
        waiting.iter().any(|note| note.starts_with(&prefix)
            && note.ends_with("(3 of 3 members can be placed once its victims are gone)")),
        "{waiting:?}"
    );
    let high = pods.get("high").await.expect("high is still there");
    assert!(high.metadata.deletion_timestamp.is_none(), "high is never a victim");

    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
    delete_priority_classes(&client, classes.into_iter().map(|(name, _, _)| name)).await;
}
