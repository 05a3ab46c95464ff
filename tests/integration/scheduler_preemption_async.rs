//! Async preemption on the real plane: while a preemptor's victim is being deleted (here the deletion hangs in an
//! admission webhook that never answers), the policy goes on scheduling other pods; the failed deletion is
//! reported and the preemptor retried at once (kube-scheduler `Activate`s it), and it is bound once a deletion goes
//! through.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::support::cluster_nodes::{
    HighAndLowClasses, create_node, delete_nodes, delete_priority_classes, node, nodes_lock,
};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, test_namespace, write_rule_file as write};

/// The webhook's timeout: how long the victim's deletion hangs before the apiserver fails it.
const HANG_SECONDS: i32 = 6;

/// Polls `check` until it answers or `timeout` passes (`None`), without panicking: the test must remove its webhook
/// whatever happens, or the victim could never be deleted.
async fn wait_for<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_pods_are_scheduled_while_a_preemptions_victims_are_being_deleted() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "preemption-async").await;
    let run = std::process::id();
    let scheduler = format!("async-{run}");
    let classes = HighAndLowClasses::create(&client, "async").await;
    let class = |name: &str| classes.name(name);
    // A TLS endpoint that accepts connections and never answers: the webhook call hangs until its timeout.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let port = listener.local_addr().expect("address").port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let webhooks = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let webhook_name = format!("hang-{run}");
    let webhook: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": webhook_name},
        "webhooks": [{
            "name": "hang.ruleplane.dev",
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/")},
            "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "objectSelector": {"matchLabels": {"hang": run.to_string()}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": HANG_SECONDS,
        }]
    }))
    .expect("webhook");
    webhooks
        .create(&PostParams::default(), &webhook)
        .await
        .expect("create webhook");

    let _nodes = nodes_lock().await;
    let [busy, free] = ["busy", "free"].map(|n| format!("async-{run}-{n}"));
    let mut names = Vec::new();
    for (name, pool) in [(&busy, "busy"), (&free, "free")] {
        names.push(create_node(&client, node(name, "2", "4Gi", json!({"pool": pool}), json!([]))).await);
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let pod = |name: &str, priority_class: &str, extra: Value| -> Pod {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "schedulerName": scheduler,
                "priorityClassName": class(priority_class),
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2"}}}]
            }
        });
        if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(pod).expect("pod")
    };
    let mut victim = pod("victim", "low", json!({"nodeName": busy}));
    victim.metadata.labels = Some([("hang".to_string(), run.to_string())].into());
    pods.create(&PostParams::default(), &victim)
        .await
        .expect("create victim");

    let dir = temp_dir("preemption-async");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {scheduler} }}\n\
             spec: {{ schedulerName: {scheduler}, algorithmProvider: DefaultProvider }}\n"
        ),
    );
    let manager = ManagerProcess::start(&dir, &ns, "preempt-async", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    let mut failures: Vec<String> = Vec::new();
    pods.create(
        &PostParams::default(),
        &pod("preemptor", "high", json!({"nodeSelector": {"pool": "busy"}})),
    )
    .await
    .expect("create preemptor");
    let nominated = wait_for(Duration::from_secs(20), || async {
        pods.get("preemptor").await.ok()?.status?.nominated_node_name
    })
    .await;
    if nominated.as_ref() != Some(&busy) {
        failures.push(format!("the preemptor nominated to {nominated:?}, not {busy}"));
    }
    // The victim's deletion now hangs in the webhook; another pod is placed meanwhile.
    let started = Instant::now();
    pods.create(
        &PostParams::default(),
        &pod("bystander", "low", json!({"nodeSelector": {"pool": "free"}})),
    )
    .await
    .expect("create bystander");
    let node = wait_for(Duration::from_secs(20), || async {
        pods.get("bystander").await.ok()?.spec?.node_name
    })
    .await;
    let waited = started.elapsed();
    let victim = pods.get("victim").await.expect("victim");
    if node.as_ref() != Some(&free) || victim.metadata.deletion_timestamp.is_some() {
        failures.push(format!(
            "the bystander bound to {node:?} after {waited:?}, victim deleting: {}",
            victim.metadata.deletion_timestamp.is_some()
        ));
    }
    if waited >= Duration::from_secs(HANG_SECONDS as u64 - 2) {
        failures.push(format!(
            "the bystander waited {waited:?}, as long as the victim's deletion"
        ));
    }

    // The deletion fails at the webhook's timeout: reported, and the preemptor retried. Without the webhook the
    // next preemption goes through and the preemptor is bound.
    // The recorder folds a second FailedScheduling Event of the pod into the first one's series (the note stays
    // the first's): the failure is read from the manager's log.
    let failed = wait_for(Duration::from_secs(30), || async {
        manager
            .logs()
            .lines()
            .find(|line| line.contains("preemption failed: deleting victim"))
            .map(str::to_string)
    })
    .await;
    println!("bystander bound after {waited:?}; {failed:?}");
    if failed.is_none() {
        failures.push("no `preemption failed` report for the preemptor".to_string());
    }
    webhooks
        .delete(&webhook_name, &DeleteParams::default())
        .await
        .expect("delete webhook");
    let bound = wait_for(Duration::from_secs(60), || async {
        pods.get("preemptor").await.ok()?.spec?.node_name
    })
    .await;
    if bound.as_ref() != Some(&busy) {
        failures.push(format!("the preemptor bound to {bound:?} once the webhook was gone"));
    }

    drop(manager);
    silent.abort();
    delete_nodes(&client, &names).await;
    delete_priority_classes(&client, classes.all()).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
