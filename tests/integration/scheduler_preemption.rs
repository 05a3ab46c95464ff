//! A SchedulerPolicy carries out DefaultPreemption on the real plane: the victims kube-scheduler's algorithm
//! chooses get the `DisruptionTarget` condition, are deleted and get a `Preempted` Event; the preemptor is
//! nominated and bound once they are gone; a pod protected by a PodDisruptionBudget is spared when another
//! choice exists; with `preemption.victims: RuleplaneScheduled` another scheduler's pod is never a victim.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::cluster_nodes::{
    create_blocking_budget, create_node, create_priority_classes, delete_nodes, delete_priority_classes, node,
    nodes_lock,
};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually, plane_version, test_namespace, write_rule_file as write};

/// The plane has no kubelet: a deleted bound pod stays Terminating. Once a victim is terminating this plays the
/// kubelet's part (the final deletion), and returns the victim as it was then.
async fn terminated_by_kubelet(pods: &Api<Pod>, name: &str) -> Pod {
    let terminating = eventually(Duration::from_secs(30), &format!("{name} terminating"), || async {
        pods.get(name)
            .await
            .ok()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    match pods.delete(name, &DeleteParams::default().grace_period(0)).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => panic!("final deletion of {name}: {error}"),
    }
    terminating
}

async fn events_of(client: &Client, namespace: &str, pod: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
        .collect()
}

async fn bound_to(pods: &Api<Pod>, name: &str) -> String {
    eventually(Duration::from_secs(30), &format!("{name} bound"), || async {
        pods.get(name).await.ok()?.spec?.node_name
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_pod_preempts_the_victims_kube_scheduler_chooses_and_spares_a_budgeted_pod() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-preemption").await;
    let run = std::process::id();
    let scheduler = format!("preempting-{run}");
    let class = |name: &str| format!("sp-{name}-{run}");
    let classes: Vec<(String, i32, &str)> = [("high", 1000), ("mid", 20), ("low", 10), ("lower", 5)]
        .into_iter()
        .map(|(name, value)| (class(name), value, "PreemptLowerPriority"))
        .collect();
    create_priority_classes(&client, &classes).await;
    let _nodes = nodes_lock().await;
    let [x, y, z] = ["x", "y", "z"].map(|n| format!("sp-{run}-{n}"));
    let mut names = Vec::new();
    for (name, pool) in [(&x, "x"), (&y, "pdb"), (&z, "pdb")] {
        names.push(create_node(&client, node(name, "2", "4Gi", json!({"pool": pool}), json!([]))).await);
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let pod = |name: &str, cpu: &str, priority_class: &str, extra: Value| -> Pod {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "schedulerName": scheduler,
                "priorityClassName": class(priority_class),
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
            }
        });
        if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(pod).expect("pod")
    };
    // x is full: 500m of priority 20, 1 CPU of 10, 500m of 5. y and z: 2 CPUs each, y's pod (priority 5) protected
    // by a budget that allows no disruption, z's (priority 10) not.
    for (name, node, cpu, priority_class) in [
        ("x-mid", &x, "500m", "mid"),
        ("x-low", &x, "1", "low"),
        ("x-lower", &x, "500m", "lower"),
        ("y-db", &y, "2", "lower"),
        ("z-web", &z, "2", "low"),
    ] {
        let mut bound = pod(name, cpu, priority_class, json!({"nodeName": node}));
        if name == "y-db" {
            bound.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
        }
        pods.create(&PostParams::default(), &bound)
            .await
            .expect("create bound pod");
    }
    create_blocking_budget(&client, &ns).await;

    let dir = temp_dir("scheduler-preemption");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {scheduler} }}\n\
             spec: {{ schedulerName: {scheduler}, algorithmProvider: DefaultProvider }}\n"
        ),
    );
    let manager = ManagerProcess::start(&dir, &ns, "sched-preempt", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // 1 CPU on x: every lower pod is a potential victim; reprieved most important first, x-mid (20) fits back,
    // x-low (10) does not, x-lower (5) does: x-low alone goes.
    let urgent = pods
        .create(
            &PostParams::default(),
            &pod("urgent", "1", "high", json!({"nodeSelector": {"pool": "x"}})),
        )
        .await
        .expect("create urgent");
    let (nominated, message) = eventually(Duration::from_secs(30), "urgent nominated", || async {
        let status = pods.get("urgent").await.ok()?.status?;
        let message = status
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
            .message?;
        Some((status.nominated_node_name?, message))
    })
    .await;
    assert_eq!(nominated, x);
    // A preemption that found a node appends nothing to the FitError before v1.37 (kube-scheduler's PostFilter
    // Success), from v1.37 where it placed the pod.
    let placed = if plane_version(&client).await >= ruleplane_config::KubernetesVersion::V1_37 {
        format!(" preemption: found a potential placement for pod on node {x}, preempting 1 victims")
    } else {
        String::new()
    };
    assert!(
        message.starts_with("0/") && message.contains("1 Insufficient cpu") && message.ends_with(&format!(".{placed}")),
        "{message}"
    );
    assert_eq!(
        message.matches("preemption").count(),
        usize::from(!placed.is_empty()),
        "{message}"
    );
    let victim = terminated_by_kubelet(&pods, "x-low").await;
    let condition = victim
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "DisruptionTarget"))
        .expect("DisruptionTarget condition");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("PreemptionByScheduler"));
    assert_eq!(
        condition.message.as_deref(),
        Some(format!("{scheduler}: preempting to accommodate a higher priority pod").as_str())
    );
    assert_eq!(
        bound_to(&pods, "urgent").await,
        x,
        "urgent is bound once its victim is gone"
    );
    let preempted = eventually(Duration::from_secs(10), "Preempted event", || async {
        events_of(&client, &ns, "x-low")
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Preempted"))
    })
    .await;
    let uid = urgent.metadata.uid.clone().unwrap_or_default();
    assert_eq!(
        preempted.note.as_deref(),
        Some(format!("Preempted by pod {uid} on node {x}").as_str())
    );
    assert_eq!(preempted.type_.as_deref(), Some("Normal"));
    assert_eq!(preempted.action.as_deref(), Some("Preempting"));
    assert_eq!(
        preempted.related.as_ref().and_then(|r| r.name.as_deref()),
        Some("urgent")
    );
    for spared in ["x-mid", "x-lower"] {
        let pod = pods.get(spared).await.expect("spared pod");
        assert!(pod.metadata.deletion_timestamp.is_none(), "{spared} is spared");
    }

    // 1 CPU on y or z: y's victim has the lower priority but would break its budget, so z-web goes.
    pods.create(
        &PostParams::default(),
        &pod("guarded", "1", "high", json!({"nodeSelector": {"pool": "pdb"}})),
    )
    .await
    .expect("create guarded");
    terminated_by_kubelet(&pods, "z-web").await;
    assert_eq!(bound_to(&pods, "guarded").await, z);
    let protected = pods.get("y-db").await.expect("y-db");
    assert!(
        protected.metadata.deletion_timestamp.is_none(),
        "the budgeted pod is spared"
    );

    delete_nodes(&client, &names).await;
    delete_priority_classes(&client, classes.into_iter().map(|(name, _, _)| name)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_victims_limited_to_ruleplane_pods_another_schedulers_pod_is_spared() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-victim-scope").await;
    let run = std::process::id();
    let scheduler = format!("limited-{run}");
    let _nodes = nodes_lock().await;
    let [a, b] = ["a", "b"].map(|n| format!("vs-{run}-{n}"));
    let mut names = Vec::new();
    for name in [&a, &b] {
        names.push(
            create_node(
                &client,
                node(name, "2", "4Gi", json!({"pool": format!("vs-{run}")}), json!([])),
            )
            .await,
        );
    }
    let classes = Api::<PriorityClass>::all(client.clone());
    let (high, mid) = (format!("vs-high-{run}"), format!("vs-mid-{run}"));
    for (name, value) in [(&high, 1000), (&mid, 10)] {
        let object: PriorityClass =
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value})).expect("class");
        classes
            .create(&PostParams::default(), &object)
            .await
            .expect("create class");
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let bound = |name: &str, node: &str, scheduler_name: &str, class: Option<&str>| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "schedulerName": scheduler_name, "priorityClassName": class,
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2"}}}]}
        }))
        .expect("pod")
    };
    // The foreign pod (priority 0) is less important than ours (10): kube-scheduler's rule would evict it.
    for pod in [
        bound("foreign", &a, "someone-else", None),
        bound("ours", &b, &scheduler, Some(&mid)),
    ] {
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create bound pod");
    }

    let dir = temp_dir("scheduler-victim-scope");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {scheduler} }}\n\
             spec: {{ schedulerName: {scheduler}, preemption: {{ victims: RuleplaneScheduled }} }}\n"
        ),
    );
    let manager = ManagerProcess::start(&dir, &ns, "sched-scope", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let urgent: Pod = serde_json::from_value(json!({
        "metadata": {"name": "urgent", "namespace": ns},
        "spec": {"schedulerName": scheduler, "priorityClassName": high,
                 "nodeSelector": {"pool": format!("vs-{run}")},
                 "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &urgent)
        .await
        .expect("create urgent");
    terminated_by_kubelet(&pods, "ours").await;
    assert_eq!(bound_to(&pods, "urgent").await, b);
    let foreign = pods.get("foreign").await.expect("foreign");
    assert!(
        foreign.metadata.deletion_timestamp.is_none(),
        "another scheduler's pod is never a victim"
    );

    delete_nodes(&client, &names).await;
    for name in [&high, &mid] {
        let _ = classes.delete(name, &DeleteParams::default()).await;
    }
}
