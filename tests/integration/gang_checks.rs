//! v1.37 checks a Workload API gang before its pod-group cycle: members whose priority is not their PodGroup's are
//! all failed with kube-scheduler's SchedulerError text and PodGroup condition, compared with the real
//! kube-scheduler of the plane's version; before v1.37 such a gang is placed, by both.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use ruleplane_config::KubernetesVersion;
use serde_json::json;

use crate::gangs::{bound_members, delete_pods, gang_nodes, member, pod_group_condition, policy};
use crate::support::cluster_nodes::{
    KubeScheduler, NodeGuard, create_node, create_priority_classes, delete_nodes, delete_priority_classes, node,
    nodes_lock,
};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, control_plane, eventually, test_namespace, write_rule_file as write};

/// Creates the gang's policy object, naming the priority class `class` when the plane's API has PodGroups.
async fn create_group(client: &Client, namespace: &str, name: &str, class: Option<&str>) {
    let (resource, mut object) = crate::support::gang_object(namespace, name, 2);
    if let Some(class) = class.filter(|_| object["kind"] == "PodGroup") {
        object["spec"]["priorityClassName"] = json!(class);
    }
    let object: DynamicObject = serde_json::from_value(object).expect("gang object");
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
        .create(&PostParams::default(), &object)
        .await
        .expect("create gang object");
}

/// Two members of `gang` of the priority class `class`, for `scheduler`.
async fn create_members(client: &Client, namespace: &str, gang: &str, scheduler: &str, class: &str, id: &str) {
    let pods = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &ApiResource::erase::<Pod>(&()));
    for i in 0..2 {
        let mut pod = member(namespace, &format!("{gang}-{i}"), gang, scheduler, "250m", id);
        pod.data["spec"]["priorityClassName"] = json!(class);
        pods.create(&PostParams::default(), &pod).await.expect("create member");
    }
}

/// The pod's PodScheduled=False condition as `reason: message`, once set.
async fn not_scheduled(client: &Client, namespace: &str, name: &str) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    eventually(Duration::from_secs(30), &format!("{name} not scheduled"), || async {
        let condition = pods
            .get(name)
            .await
            .ok()?
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
        Some(format!("{}: {}", condition.reason?, condition.message?))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_whose_members_lack_their_pod_groups_priority_is_refused_from_v1_37_as_kube_scheduler_refuses_it() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "gang-checks").await;
    let id = format!("{}-checks", std::process::id());
    let class = format!("gang-checks-{id}");
    create_priority_classes(&client, &[(class.clone(), 100, "PreemptLowerPriority")]).await;
    let nodes = gang_nodes(&client, &id, 2, "2").await;
    let ours = format!("gang-checks-{id}");
    let twin = format!("gang-checks-twin-{id}");
    let dir = temp_dir("gang-checks");
    write(&dir, "policy.yaml", &policy(&ours));
    let manager = ManagerProcess::start(&dir, &ns, "gang-checks", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let kube_dir = temp_dir("gang-checks-twin");
    let kube_scheduler = KubeScheduler::start_with_gates(
        &kube_dir,
        vec![json!({"schedulerName": twin})],
        Some(control_plane().gang_gates()),
    );
    let sides = [("ours", ours.as_str()), ("theirs", twin.as_str())];
    for (side, scheduler) in sides {
        // `mixed`'s PodGroup has no class (priority 0) while its members have 100; `agreed`'s has theirs.
        create_group(&client, &ns, &format!("{side}-mixed"), None).await;
        create_group(&client, &ns, &format!("{side}-agreed"), Some(&class)).await;
        create_members(&client, &ns, &format!("{side}-mixed"), scheduler, &class, &id).await;
        create_members(&client, &ns, &format!("{side}-agreed"), scheduler, &class, &id).await;
    }
    let refused = control_plane().kubernetes_version() >= KubernetesVersion::V1_37;
    let mut seen = Vec::new();
    for (side, _) in sides {
        let agreed = format!("{side}-agreed");
        eventually(Duration::from_secs(60), &format!("{agreed} placed whole"), || async {
            (bound_members(&client, &ns, &agreed).await.len() == 2).then_some(())
        })
        .await;
        let mixed = format!("{side}-mixed");
        if !refused {
            eventually(Duration::from_secs(60), &format!("{mixed} placed whole"), || async {
                (bound_members(&client, &ns, &mixed).await.len() == 2).then_some(())
            })
            .await;
            continue;
        }
        let mut told = Vec::new();
        for i in 0..2 {
            told.push(not_scheduled(&client, &ns, &format!("{mixed}-{i}")).await);
        }
        let condition = pod_group_condition(&client, &ns, &mixed).await;
        assert!(
            bound_members(&client, &ns, &mixed).await.is_empty(),
            "{side}: none bound"
        );
        seen.push((told, condition));
    }
    if refused {
        let text = "all pods in a single pod group should have the same priority as the pod group's priority, got \
                    100 and 0";
        assert_eq!(
            seen[0], seen[1],
            "Ruleplane's texts and condition, then kube-scheduler's"
        );
        assert_eq!(
            seen[0].0,
            [format!("SchedulerError: {text}"), format!("SchedulerError: {text}")]
        );
        assert!(
            seen[0]
                .1
                .starts_with(&format!("PodGroupInitiallyScheduled False SchedulerError {text}")),
            "{}",
            seen[0].1
        );
    }
    drop(kube_scheduler);
    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &nodes).await;
    delete_priority_classes(&client, [class]).await;
}

/// A gang of three 2-cpu members beside a node full of a low-priority pod and one too small for any member: only one
/// member could ever fit, so the group is rejected. v1.36's members each run their own preemption inside the
/// pod-group cycle, and it starts at once: the low-priority pod is evicted although the group is not placed, by
/// kube-scheduler and by Ruleplane alike. v1.37 preempts for the group as a whole, which finds no room even without
/// that pod: neither evicts it. v1.35's kube-scheduler evicts it too; Ruleplane, on purpose, evicts only for a gang
/// whose quorum the preemption completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_gangs_member_preemption_goes_ahead_on_v1_36_as_kube_schedulers_does() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "gang-evict").await;
    let pid = std::process::id();
    let (high, low) = (format!("gang-evict-high-{pid}"), format!("gang-evict-low-{pid}"));
    create_priority_classes(
        &client,
        &[
            (high.clone(), 1000, "PreemptLowerPriority"),
            (low.clone(), 10, "PreemptLowerPriority"),
        ],
    )
    .await;
    let ours = format!("gang-evict-{pid}");
    let twin = format!("gang-evict-twin-{pid}");
    let dir = temp_dir("gang-evict");
    write(&dir, "policy.yaml", &policy(&ours));
    let manager = ManagerProcess::start(&dir, &ns, "gang-evict", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let kube_dir = temp_dir("gang-evict-twin");
    let kube_scheduler = KubeScheduler::start_with_gates(
        &kube_dir,
        vec![json!({"schedulerName": twin})],
        Some(control_plane().gang_gates()),
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let mut all_nodes = NodeGuard::default();
    for (side, scheduler) in [("ours", ours.as_str()), ("theirs", twin.as_str())] {
        let id = format!("{pid}-evict-{side}");
        let labels = json!({"gang-test": id, "ruleplane.dev/kwok": "true"});
        let big = node(&format!("evict-{side}-{pid}-0"), "2", "8Gi", labels.clone(), json!([]));
        let big = create_node(&client, big).await;
        let small = node(&format!("evict-{side}-{pid}-1"), "1", "8Gi", labels, json!([]));
        let small = create_node(&client, small).await;
        let filler: Pod = serde_json::from_value(json!({"metadata": {"name": format!("{side}-low")},
            "spec": {"nodeName": big, "priorityClassName": low, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2"}}}]}}))
        .expect("filler");
        pods.create(&PostParams::default(), &filler)
            .await
            .expect("create filler");
        all_nodes.push(big);
        all_nodes.push(small);
        let gang = format!("{side}-gang");
        create_group(&client, &ns, &gang, None).await;
        let objects = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &ApiResource::erase::<Pod>(&()));
        for i in 0..3 {
            let mut pod = member(&ns, &format!("{gang}-{i}"), &gang, scheduler, "2", &id);
            pod.data["spec"]["priorityClassName"] = json!(high);
            objects
                .create(&PostParams::default(), &pod)
                .await
                .expect("create member");
        }
    }
    // (kube-scheduler evicts, Ruleplane evicts): v1.35 Ruleplane differs on purpose (docs/scheduler.md, "A member's
    // preemption inside a run").
    let (theirs, ours) = match control_plane().kubernetes_version() {
        KubernetesVersion::V1_35 => (true, false),
        KubernetesVersion::V1_36 => (true, true),
        KubernetesVersion::V1_37 => (false, false),
    };
    for (side, evicts) in [("theirs", theirs), ("ours", ours)] {
        let filler = format!("{side}-low");
        if evicts {
            eventually(Duration::from_secs(60), &format!("{filler} evicted"), || async {
                pods.get_opt(&filler).await.ok()?.is_none().then_some(())
            })
            .await;
        } else {
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert!(
                pods.get_opt(&filler).await.expect("get").is_some(),
                "{side}: {filler} stays"
            );
        }
    }
    drop(kube_scheduler);
    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &all_nodes).await;
    delete_priority_classes(&client, [high, low]).await;
}
