//! A preemption storm on the real plane: low-priority pods fill every node, some of them protected by
//! PodDisruptionBudgets that allow no disruption, then hundreds of high-priority pods arrive at once. A SchedulerPolicy
//! (async preemption, nominated pods in Filter) must bind every one that can fit, never evict a protected pod while an
//! unprotected victim exists, never overcommit a node, and leave the pods that fit nowhere unschedulable.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::cluster_nodes::{
    HighAndLowClasses, create_node, delete_nodes, delete_priority_classes, node, nodes_lock,
};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, test_namespace, write_rule_file as write};

/// Nodes, each with this many CPUs, filled with one low-priority pod per CPU.
const NODES: usize = 30;
const CPUS: usize = 20;
/// Nodes whose pods are all protected, one PodDisruptionBudget per node allowing no disruption.
const PROTECTED_NODES: usize = 6;
/// High-priority pods of 1 CPU: as many as there are unprotected victims, so a non-violating candidate exists
/// for each one and every one can be bound.
const PREEMPTORS: usize = (NODES - PROTECTED_NODES) * CPUS;
/// High-priority pods larger than any node: unschedulable, preemption cannot help.
const TOO_BIG: usize = 3;
/// API calls the test sends at once.
const CONCURRENCY: usize = 32;

fn cpu_millis(pod: &Pod) -> i64 {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
        .map(|q| {
            let q = q.0.as_str();
            q.strip_suffix('m')
                .map_or_else(|| q.parse::<i64>().unwrap_or(0) * 1000, |m| m.parse().unwrap_or(0))
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_storm_binds_every_preemptor_spares_protected_pods_and_overcommits_no_node() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "preemption-storm").await;
    let run = std::process::id();
    let scheduler = format!("storm-{run}");
    let classes = HighAndLowClasses::create(&client, "storm").await;
    let class = |name: &str| classes.name(name);
    let _nodes = nodes_lock().await;
    let mut names = Vec::new();
    for i in 0..NODES {
        let name = format!("storm-{run}-{i:02}");
        let labels = json!({"storm": run.to_string()});
        names.push(create_node(&client, node(&name, &CPUS.to_string(), "64Gi", labels, json!([]))).await);
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let pod = |name: String, cpu: &str, priority_class: &str, extra: Value| -> Pod {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "schedulerName": scheduler,
                "priorityClassName": class(priority_class),
                // Without a kubelet a victim is gone at once only with no grace period.
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
            }
        });
        if let Some(metadata) = pod["metadata"].as_object_mut()
            && let Some(labels) = extra.get("labels")
        {
            metadata.insert("labels".to_string(), labels.clone());
        }
        if let Some(spec) = pod["spec"].as_object_mut() {
            match extra.get("nodeName") {
                Some(node) => spec.insert("nodeName".to_string(), node.clone()),
                // Kept to the storm's nodes, whatever other nodes the shared plane has.
                None => spec.insert("nodeSelector".to_string(), json!({"storm": run.to_string()})),
            };
        }
        serde_json::from_value(pod).expect("pod")
    };
    let create_all = |list: Vec<Pod>| {
        let pods = pods.clone();
        async move {
            futures::stream::iter(list)
                .map(|p| {
                    let pods = pods.clone();
                    async move { pods.create(&PostParams::default(), &p).await.expect("create pod") }
                })
                .buffer_unordered(CONCURRENCY)
                .count()
                .await
        }
    };
    // The fill: one 1-CPU low pod per CPU; the first PROTECTED_NODES nodes' pods carry app=db-<i>.
    let started = Instant::now();
    let mut fill = Vec::new();
    for (i, node_name) in names.iter().enumerate() {
        let labels = if i < PROTECTED_NODES {
            json!({"app": format!("db-{i}")})
        } else {
            json!({"app": "batch"})
        };
        for j in 0..CPUS {
            fill.push(pod(
                format!("low-{i:02}-{j:02}"),
                "1",
                "low",
                json!({"nodeName": node_name, "labels": labels}),
            ));
        }
    }
    create_all(fill).await;
    // No disruption controller runs on the plane: the budgets' status is written here, as it would compute it
    // for Ready pods (all CPUS healthy, minAvailable CPUS: no disruption allowed).
    let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), &ns);
    for i in 0..PROTECTED_NODES {
        let name = format!("db-{i}");
        let budget: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"minAvailable": CPUS, "selector": {"matchLabels": {"app": name}}}
        }))
        .expect("pdb");
        pdbs.create(&PostParams::default(), &budget).await.expect("create pdb");
        let status = json!({"status": {
            "disruptionsAllowed": 0, "currentHealthy": CPUS, "desiredHealthy": CPUS, "expectedPods": CPUS
        }});
        pdbs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("pdb status");
    }
    println!(
        "storm: {} low pods and {PROTECTED_NODES} budgets in {:.1?}",
        NODES * CPUS,
        started.elapsed()
    );

    let dir = temp_dir("preemption-storm");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {scheduler} }}\n\
             spec: {{ schedulerName: {scheduler}, algorithmProvider: DefaultProvider }}\n"
        ),
    );
    let manager = ManagerProcess::start(&dir, &ns, "storm", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    let started = Instant::now();
    let mut storm: Vec<Pod> = (0..PREEMPTORS)
        .map(|i| pod(format!("high-{i:04}"), "1", "high", json!({})))
        .collect();
    storm.extend((0..TOO_BIG).map(|i| pod(format!("huge-{i}"), &(CPUS + 1).to_string(), "high", json!({}))));
    create_all(storm).await;
    let created = started.elapsed();
    // Waited for without panicking: the nodes are cleaned up before any assertion.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (bound, preemptors_bound) = loop {
        let list = pods.list(&ListParams::default()).await.expect("pods").items;
        let preemptors_bound = list
            .iter()
            .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("high-")))
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        if preemptors_bound == PREEMPTORS || Instant::now() > deadline {
            break (list, preemptors_bound);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let elapsed = started.elapsed();
    println!(
        "storm: {PREEMPTORS} preemptors created in {created:.1?}, {preemptors_bound} bound after {elapsed:.1?} ({:.0} pods/s)",
        preemptors_bound as f64 / elapsed.as_secs_f64()
    );

    // Checked after the cleanup, so a failure leaves no nodes behind for the next test.
    let mut failures = Vec::new();
    if preemptors_bound != PREEMPTORS {
        failures.push(format!(
            "{preemptors_bound} of {PREEMPTORS} preemptors bound after 120 s"
        ));
    }
    // No protected pod was a victim: an unprotected one was always there to take instead.
    let app = |p: &Pod| p.metadata.labels.as_ref().and_then(|l| l.get("app")).cloned();
    for i in 0..PROTECTED_NODES {
        let protected = bound
            .iter()
            .filter(|p| app(p) == Some(format!("db-{i}")) && p.metadata.deletion_timestamp.is_none())
            .count();
        if protected != CPUS {
            failures.push(format!(
                "budget db-{i} allows no disruption, yet {} of its pods went",
                CPUS - protected
            ));
        }
    }
    let batch_left = bound.iter().filter(|p| app(p).as_deref() == Some("batch")).count();
    if batch_left != 0 {
        failures.push(format!(
            "{batch_left} unprotected pods left: not one victim per preemptor"
        ));
    }
    // No node holds more than its CPUs.
    let mut used: HashMap<&str, i64> = HashMap::new();
    for p in &bound {
        if let Some(node_name) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *used.entry(node_name).or_default() += cpu_millis(p);
        }
    }
    for (node_name, millis) in &used {
        if *millis > (CPUS as i64) * 1000 {
            failures.push(format!("{node_name} holds {millis}m of {CPUS} CPUs"));
        }
    }
    // The pods larger than any node stay unschedulable: no victims help them, nothing is nominated.
    for i in 0..TOO_BIG {
        let huge = pods.get(&format!("huge-{i}")).await.expect("huge");
        let status = huge.status.unwrap_or_default();
        let message = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            .and_then(|c| c.message)
            .unwrap_or_default();
        let unschedulable = huge.spec.and_then(|s| s.node_name).is_none()
            && status.nominated_node_name.is_none()
            && message.contains(&format!("{NODES} Insufficient cpu"))
            && message.contains("preemption: ");
        if !unschedulable {
            failures.push(format!("huge-{i}: {message:?}"));
        }
    }

    drop(manager);
    delete_nodes(&client, &names).await;
    delete_priority_classes(&client, classes.all()).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
