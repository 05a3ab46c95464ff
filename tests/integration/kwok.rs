//! KWOK plays the kubelet for nodes labelled `ruleplane.dev/kwok=true`: such a node turns Ready, a pod a
//! SchedulerPolicy binds there runs (Running, Ready, `startTime`), and a preemption victim with a grace period is
//! removed once deleted, so the preemptor binds with no test playing the kubelet's part.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::support::cluster_nodes::{
    HighAndLowClasses, create_node, delete_nodes, delete_priority_classes, node, nodes_lock,
};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually, test_namespace, write_rule_file as write};

/// The label cluster.sh starts KWOK with (docs/control-plane.md).
const KWOK_NODE: (&str, &str) = ("ruleplane.dev/kwok", "true");

fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

async fn running_on(pods: &Api<Pod>, name: &str) -> Pod {
    eventually(Duration::from_secs(30), &format!("{name} running"), || async {
        let pod = pods.get(name).await.ok()?;
        let status = pod.status.as_ref()?;
        (status.phase.as_deref() == Some("Running")
            && status.start_time.is_some()
            && condition(&pod, "Ready").as_deref() == Some("True"))
        .then_some(pod)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_kwok_node_bound_pods_run_and_a_preemption_victim_with_a_grace_period_goes() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "kwok").await;
    let run = std::process::id();
    let scheduler = format!("kwok-{run}");
    let classes = HighAndLowClasses::create(&client, "kwok").await;
    let class = |name: &str| classes.name(name);
    let _nodes = nodes_lock().await;
    let name = format!("kwok-{run}");
    let names = vec![
        create_node(
            &client,
            node(&name, "2", "4Gi", json!({KWOK_NODE.0: KWOK_NODE.1}), json!([])),
        )
        .await,
    ];
    let nodes = Api::<Node>::all(client.clone());
    eventually(Duration::from_secs(30), "the KWOK node Ready", || async {
        let node = nodes.get(&name).await.ok()?;
        node.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready" && c.status == "True")
    })
    .await;

    let dir = temp_dir("kwok");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {scheduler} }}\n\
             spec: {{ schedulerName: {scheduler}, algorithmProvider: DefaultProvider }}\n"
        ),
    );
    let manager = ManagerProcess::start(&dir, &ns, "kwok", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let pod = |pod_name: &str, cpu: &str, priority_class: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": pod_name, "namespace": ns},
            "spec": {
                "schedulerName": scheduler,
                "priorityClassName": class(priority_class),
                // The default grace period: without a kubelet such a victim would stay Terminating.
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
            }
        }))
        .expect("pod")
    };
    pods.create(&PostParams::default(), &pod("filler", "2", "low"))
        .await
        .expect("create filler");
    let filler = running_on(&pods, "filler").await;
    assert_eq!(
        filler.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(name.as_str())
    );

    // The node is full: the high-priority pod preempts the filler, KWOK removes it after its deletion, and
    // the preemptor is bound and runs.
    pods.create(&PostParams::default(), &pod("urgent", "1", "high"))
        .await
        .expect("create urgent");
    eventually(Duration::from_secs(30), "filler removed", || async {
        match pods.get_opt("filler").await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
    let urgent = running_on(&pods, "urgent").await;
    assert_eq!(
        urgent.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(name.as_str())
    );

    delete_nodes(&client, &names).await;
    delete_priority_classes(&client, classes.all()).await;
}
