//! SchedulerPolicy workers on a real apiserver: pods bound by their policy (and only theirs), kube-scheduler's
//! events and conditions, the same FailedScheduling text as kube-scheduler, bin-packing vs spreading, no
//! overcommit across policies, pending pods placed once a node appears or their own change lifts what held them,
//! and unschedulable pods retried only on changes a queueing hint says could help.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::cluster_nodes::{KubeScheduler, create_node, delete_nodes, node, nodes_lock};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{
    admin_client, eventually, no_claims_reason, plane_version, test_namespace, write_rule_file as write,
};

/// Two policies sharing one cache: kube-scheduler's default profile, and bin-packing.
fn policies(spread: &str, pack: &str) -> String {
    format!(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {spread} }}\n\
         spec: {{ schedulerName: {spread}, algorithmProvider: DefaultProvider }}\n---\n\
         apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {pack} }}\n\
         spec: {{ schedulerName: {pack}, algorithmProvider: ClusterAutoscalerProvider }}\n"
    )
}

fn pod(namespace: &str, name: &str, scheduler: &str, cpu: &str, extra: Value) -> Pod {
    let mut spec = json!({
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec}))
    .expect("pod")
}

async fn create(client: &Client, pod: &Pod) {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    Api::<Pod>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), pod)
        .await
        .expect("create pod");
}

async fn node_of(client: &Client, namespace: &str, name: &str) -> Option<String> {
    let pod = Api::<Pod>::namespaced(client.clone(), namespace).get(name).await.ok()?;
    pod.spec.and_then(|s| s.node_name)
}

async fn bound(client: &Client, namespace: &str, name: &str) -> String {
    eventually(Duration::from_secs(30), &format!("pod {name} bound"), || async {
        node_of(client, namespace, name).await
    })
    .await
}

/// The PodScheduled=False message of a pod, once set.
async fn unschedulable_message(client: &Client, namespace: &str, name: &str) -> String {
    eventually(
        Duration::from_secs(30),
        &format!("pod {name} marked unschedulable"),
        || async {
            let pod = Api::<Pod>::namespaced(client.clone(), namespace).get(name).await.ok()?;
            pod.status?
                .conditions?
                .into_iter()
                .find(|c| {
                    c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
                })?
                .message
        },
    )
    .await
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

fn cpu_millis(quantity: &str) -> i64 {
    match quantity.strip_suffix('m') {
        Some(millis) => millis.parse().expect("millicores"),
        None => quantity.parse::<i64>().expect("cores") * 1000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_bound_by_their_policy_with_kube_schedulers_events_and_failure_text() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-story").await;
    let id = std::process::id();
    let (spread, pack, twin) = (format!("spread-{id}"), format!("pack-{id}"), format!("twin-{id}"));
    let mut names = Vec::new();
    names.push(
        create_node(
            &client,
            node(&format!("st-{id}-1"), "2", "4Gi", json!({"tier": "gold"}), json!([])),
        )
        .await,
    );
    names.push(
        create_node(
            &client,
            node(&format!("st-{id}-2"), "4", "8Gi", json!({"tier": "silver"}), json!([])),
        )
        .await,
    );
    let gpu = format!("st-{id}-3");
    names.push(
        create_node(
            &client,
            node(
                &gpu,
                "4",
                "8Gi",
                json!({}),
                json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
            ),
        )
        .await,
    );
    let dir = temp_dir("scheduler-story");
    write(&dir, "policies.yaml", &policies(&spread, &pack));
    let manager = ManagerProcess::start(&dir, &ns, "sched-a", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // Story 3: nginx for my scheduler is bound; a pod for a scheduler nobody runs stays pending.
    create(&client, &pod(&ns, "nginx", &spread, "500m", json!({}))).await;
    create(&client, &pod(&ns, "other", "nobody-runs-this", "100m", json!({}))).await;
    let node = bound(&client, &ns, "nginx").await;
    assert!(names.contains(&node) && node != gpu, "nginx went to {node}");
    let scheduled = eventually(Duration::from_secs(10), "Scheduled event", || async {
        events_of(&client, &ns, "nginx")
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Scheduled"))
    })
    .await;
    assert_eq!(
        scheduled.note.as_deref(),
        Some(format!("Successfully assigned {ns}/nginx to {node}").as_str())
    );
    assert_eq!(scheduled.reporting_controller.as_deref(), Some("ruleplane"));
    assert_eq!(scheduled.reporting_instance.as_deref(), Some("sched-a"));
    assert_eq!(scheduled.type_.as_deref(), Some("Normal"));

    // Taints and tolerations, nodeSelector.
    let to_gpu = json!({"nodeSelector": {"kubernetes.io/hostname": gpu}});
    let mut tolerating = to_gpu.clone();
    tolerating["tolerations"] =
        json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]);
    create(&client, &pod(&ns, "gpu-job", &pack, "1", tolerating)).await;
    assert_eq!(bound(&client, &ns, "gpu-job").await, gpu);
    create(
        &client,
        &pod(&ns, "gold", &spread, "100m", json!({"nodeSelector": {"tier": "gold"}})),
    )
    .await;
    assert_eq!(bound(&client, &ns, "gold").await, format!("st-{id}-1"));

    // An impossible pod: FailedScheduling and PodScheduled=False with kube-scheduler's text for the same cluster.
    let intolerant = pod(&ns, "intolerant", &spread, "100m", to_gpu.clone());
    create(&client, &intolerant).await;
    let ours = unschedulable_message(&client, &ns, "intolerant").await;
    let failed = eventually(Duration::from_secs(10), "FailedScheduling event", || async {
        events_of(&client, &ns, "intolerant")
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
    })
    .await;
    assert_eq!(failed.note.as_deref(), Some(ours.as_str()));
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    let kube_dir = temp_dir("scheduler-story-twin");
    let _kube_scheduler = KubeScheduler::start(&kube_dir, vec![json!({"schedulerName": twin})]);
    let mut twin_pod = pod(&ns, "intolerant-twin", &twin, "100m", to_gpu);
    twin_pod.spec.as_mut().expect("spec").scheduler_name = Some(twin.clone());
    create(&client, &twin_pod).await;
    let theirs = unschedulable_message(&client, &ns, "intolerant-twin").await;
    // The full text, DefaultPreemption's `preemption: …` part included.
    assert_eq!(ours, theirs);
    assert!(ours.starts_with("0/"), "{ours}");

    assert_eq!(
        node_of(&client, &ns, "other").await,
        None,
        "another scheduler's pod is never touched"
    );
    delete_nodes(&client, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bin_packing_and_spreading_differ_and_two_policies_never_overcommit_a_node() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-packing").await;
    let id = std::process::id();
    let (spread, pack) = (format!("spread2-{id}"), format!("pack2-{id}"));
    let mut names = Vec::new();
    for i in 0..10 {
        names.push(create_node(&client, node(&format!("pk-{id}-{i}"), "2", "4Gi", json!({}), json!([]))).await);
    }
    let dir = temp_dir("scheduler-packing");
    write(&dir, "policies.yaml", &policies(&spread, &pack));
    let manager = ManagerProcess::start(&dir, &ns, "sched-b", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // One at a time, so each placement sees the previous ones.
    let mut packed = std::collections::BTreeSet::new();
    for i in 0..5 {
        create(&client, &pod(&ns, &format!("pack-{i}"), &pack, "300m", json!({}))).await;
        packed.insert(bound(&client, &ns, &format!("pack-{i}")).await);
    }
    let mut spreaded = std::collections::BTreeSet::new();
    for i in 0..5 {
        create(&client, &pod(&ns, &format!("spread-{i}"), &spread, "300m", json!({}))).await;
        spreaded.insert(bound(&client, &ns, &format!("spread-{i}")).await);
    }
    println!(
        "bin-packing used {} node(s), spreading {}",
        packed.len(),
        spreaded.len()
    );
    assert_eq!(packed.len(), 1, "bin-packing fills one node first: {packed:?}");
    assert!(spreaded.len() >= 4, "spreading uses many nodes: {spreaded:?}");

    // 50 pods of both policies at once on what is left: no node ever gets more than it has.
    for i in 0..50 {
        let scheduler = if i % 2 == 0 { &pack } else { &spread };
        create(&client, &pod(&ns, &format!("burst-{i}"), scheduler, "400m", json!({}))).await;
    }
    let decided = eventually(
        Duration::from_secs(60),
        "every burst pod bound or unschedulable",
        || async {
            let pods = Api::<Pod>::namespaced(client.clone(), &ns)
                .list(&ListParams::default())
                .await
                .ok()?;
            let burst: Vec<&Pod> = pods
                .items
                .iter()
                .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("burst-")))
                .collect();
            let done = burst.iter().filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                    || p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False"))
            });
            (done.count() == 50).then_some(pods.items)
        },
    )
    .await;
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for pod in &decided {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            let cpu = pod.spec.as_ref().unwrap().containers[0]
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("cpu"))
                .map(|q| cpu_millis(&q.0))
                .unwrap_or(0);
            *used.entry(node).or_default() += cpu;
        }
    }
    let bound_count = decided
        .iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("burst-")))
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count();
    println!("{bound_count} of 50 burst pods bound; cpu used per node (m): {used:?}");
    for (node, millis) in &used {
        assert!(*millis <= 2000, "{node} overcommitted: {millis}m of 2000m");
    }
    // Whatever the order, 400m pods fit floor(free / 400m) per node: 1 beside the five packed pods (1500m), 4 beside
    // each spread pod (300m) on five nodes, 5 on each of the four empty nodes — 41, and every one must be placed.
    assert_eq!(bound_count, 41, "every pod that fits is placed");
    delete_nodes(&client, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_is_placed_as_soon_as_a_node_for_it_appears() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-waiting").await;
    let id = std::process::id();
    let spread = format!("spread3-{id}");
    let mut names = vec![
        create_node(
            &client,
            node(&format!("wt-{id}-small"), "1", "2Gi", json!({}), json!([])),
        )
        .await,
    ];
    let dir = temp_dir("scheduler-waiting");
    write(&dir, "policies.yaml", &policies(&spread, &format!("pack3-{id}")));
    let manager = ManagerProcess::start(&dir, &ns, "sched-c", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    create(&client, &pod(&ns, "big", &spread, "3", json!({}))).await;
    let message = unschedulable_message(&client, &ns, "big").await;
    // More CPU than the node has at all: UnschedulableAndUnresolvable, so preemption cannot help.
    let claims = no_claims_reason(plane_version(&client).await);
    assert_eq!(
        message,
        format!(
            "0/1 nodes are available: 1 Insufficient cpu. {claims}preemption: 0/1 nodes are available: 1 Preemption \
             is not helpful for scheduling."
        )
    );
    let large = format!("wt-{id}-large");
    let started = Instant::now();
    names.push(create_node(&client, node(&large, "4", "8Gi", json!({}), json!([]))).await);
    assert_eq!(bound(&client, &ns, "big").await, large);
    println!(
        "pending pod bound {:.2} s after its node appeared",
        started.elapsed().as_secs_f64()
    );
    let metrics = manager.metrics_text().await.unwrap_or_default();
    assert!(
        metrics.contains("ruleplane_scheduling_attempts_total{policy="),
        "{metrics}"
    );
    delete_nodes(&client, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_of_the_scheduling_replica_mid_batch_every_pod_is_bound_once_without_overcommit() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-takeover").await;
    let id = std::process::id();
    let spread = format!("spread4-{id}");
    let mut names = Vec::new();
    for i in 0..20 {
        names.push(
            create_node(
                &client,
                node(&format!("tk-{id}-{i}"), "4", "64Gi", json!({}), json!([])),
            )
            .await,
        );
    }
    let dir = temp_dir("scheduler-takeover");
    write(&dir, "policies.yaml", &policies(&spread, &format!("pack4-{id}")));
    // Short leases so the takeover is quick (defaults are kube-scheduler's 15 s / 10 s / 2 s).
    let lease = [
        "--lease-duration",
        "4s",
        "--renew-deadline",
        "3s",
        "--retry-period",
        "1s",
    ];
    let first = ManagerProcess::start(&dir, &ns, "sched-first", &lease);
    first.wait_ready(Duration::from_secs(60)).await;
    let second = ManagerProcess::start(&dir, &ns, "sched-second", &lease);
    second.wait_ready(Duration::from_secs(60)).await;
    // The two share the units; every policy runs on the one replica holding the schedulers unit.
    let first_schedules = eventually(
        Duration::from_secs(30),
        "one replica holds the schedulers unit",
        || async {
            let (one, two) = (first.holds("schedulers").await?, second.holds("schedulers").await?);
            let shared = first.units_held().await? > 0 && second.units_held().await? > 0;
            (one != two && shared).then_some(one)
        },
    )
    .await;
    let (mut scheduling, other) = if first_schedules {
        (first, second)
    } else {
        (second, first)
    };

    // 1,000 pods of 70m: 70 cpu of the 80 the nodes have.
    let total = 1000;
    let api = Api::<Pod>::namespaced(client.clone(), &ns);
    let creating = {
        let (client, ns, spread) = (client.clone(), ns.clone(), spread.clone());
        tokio::spawn(async move {
            use futures::StreamExt;
            futures::stream::iter(0..total)
                .for_each_concurrent(16, |i| {
                    let (client, ns, spread) = (client.clone(), ns.clone(), spread.clone());
                    async move { create(&client, &pod(&ns, &format!("batch-{i}"), &spread, "70m", json!({}))).await }
                })
                .await;
        })
    };
    let count_bound = || async {
        api.list(&ListParams::default().fields("spec.nodeName!="))
            .await
            .map(|l| l.items.len())
            .unwrap_or(0)
    };
    eventually(Duration::from_secs(120), "a fifth of the batch bound", || async {
        (count_bound().await >= total / 5).then_some(())
    })
    .await;
    scheduling.kill9();
    let killed_at = count_bound().await;
    let killed = Instant::now();
    creating.await.expect("pods created");
    eventually(
        Duration::from_secs(180),
        "every pod bound after the takeover",
        || async { (count_bound().await == total).then_some(()) },
    )
    .await;
    println!(
        "{killed_at} of {total} pods bound when the scheduling replica was killed; all bound {:.1} s later",
        killed.elapsed().as_secs_f64()
    );

    let pods = api.list(&ListParams::default()).await.expect("pods").items;
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for pod in &pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).expect("bound");
        *used.entry(node).or_default() += 70;
    }
    for (node, millis) in &used {
        assert!(
            *millis <= 4000,
            "{node} overcommitted after the takeover: {millis}m of 4000m"
        );
    }
    // The apiserver refuses a second binding (409), which the new leader treats as done: no pod is announced
    // as scheduled twice.
    let events = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items;
    let mut scheduled: BTreeMap<String, usize> = BTreeMap::new();
    for event in events.iter().filter(|e| e.reason.as_deref() == Some("Scheduled")) {
        let pod = event
            .regarding
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        *scheduled.entry(pod).or_default() += 1;
    }
    let twice: Vec<_> = scheduled.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pods announced as scheduled twice: {twice:?}");
    assert_eq!(
        other.holds("schedulers").await,
        Some(true),
        "the other replica took over"
    );
    delete_nodes(&client, &names).await;
}

/// The sum of a metric's samples whose labels contain every one of `labels` (e.g. `policy="p"`).
fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.strip_prefix(name))
        .filter(|rest| rest.starts_with('{') && labels.iter().all(|label| rest.contains(label)))
        .filter_map(|rest| rest.rsplit(' ').next()?.trim().parse::<f64>().ok())
        .sum()
}

/// What one churn run counted.
struct Churn {
    /// Unschedulable attempts during the churn (each a retry of a waiting pod), over both builds' metric.
    retries: f64,
    /// Requeues by event label (builds with queueing hints).
    requeues: BTreeMap<String, f64>,
}

/// Twenty pods that fit nowhere (ten too big for every node, ten selecting a label no node has), then a churn
/// of 20 node label updates, 20 node taint updates and 10 deletions of bound pods, paced 0.5 s apart; finally a
/// node for all of them, which must place every one. Runs `binary` (this build, or another for a comparison).
async fn churn_run(client: &Client, binary: &std::path::Path, run: &str) -> Churn {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{DeleteParams, Patch, PatchParams};
    let ns = test_namespace(client, &format!("scheduler-churn-{run}")).await;
    let id = std::process::id();
    let policy = format!("churn-{run}-{id}");
    let mut names = Vec::new();
    for i in 0..4 {
        names.push(
            create_node(
                client,
                node(&format!("ch-{run}-{id}-{i}"), "2", "4Gi", json!({}), json!([])),
            )
            .await,
        );
    }
    // Bound pods to delete during the churn, placed directly (no scheduler involved).
    for i in 0..10 {
        let filler = pod(
            &ns,
            &format!("filler-{i}"),
            "default-scheduler",
            "100m",
            json!({"nodeName": names[i % 4]}),
        );
        create(client, &filler).await;
    }
    let dir = temp_dir(&format!("scheduler-churn-{run}"));
    write(
        &dir,
        "policies.yaml",
        &policies(&policy, &format!("churn-pack-{run}-{id}")),
    );
    let manager = ManagerProcess::start_binary(
        binary,
        &crate::support::control_plane().kubeconfig,
        &dir,
        &ns,
        &format!("churn-{run}"),
        &[],
    );
    manager.wait_ready(Duration::from_secs(60)).await;
    for i in 0..10 {
        create(client, &pod(&ns, &format!("big-{i}"), &policy, "3", json!({}))).await;
        let picky = pod(
            &ns,
            &format!("picky-{i}"),
            &policy,
            "100m",
            json!({"nodeSelector": {"disk": "ssd"}}),
        );
        create(client, &picky).await;
    }
    for i in 0..10 {
        unschedulable_message(client, &ns, &format!("big-{i}")).await;
        unschedulable_message(client, &ns, &format!("picky-{i}")).await;
    }
    // Let the first attempts and their reports settle.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let attempts = || async {
        let text = manager.metrics_text().await.unwrap_or_default();
        let policy_label = format!("policy=\"{policy}\"");
        metric_sum(
            &text,
            "ruleplane_scheduling_attempts_total",
            &[&policy_label, "state=\"unschedulable\""],
        )
    };
    let before = attempts().await;
    let nodes = Api::<Node>::all(client.clone());
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    for i in 0..20 {
        let label = json!({"metadata": {"labels": {"churn": i.to_string()}}});
        let _ = nodes
            .patch(&names[i % 4], &PatchParams::default(), &Patch::Merge(&label))
            .await;
        let taint =
            json!({"spec": {"taints": [{"key": "churn", "value": i.to_string(), "effect": "PreferNoSchedule"}]}});
        let _ = nodes
            .patch(&names[(i + 1) % 4], &PatchParams::default(), &Patch::Merge(&taint))
            .await;
        if i % 2 == 0 {
            // At once: without a kubelet a graceful deletion never ends, and a terminating pod holds its room.
            let now = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            let _ = pods.delete(&format!("filler-{}", i / 2), &now).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Retries in backoff run out (10 s at most).
    tokio::time::sleep(Duration::from_secs(15)).await;
    let retries = attempts().await - before;
    let text = manager.metrics_text().await.unwrap_or_default();
    let mut requeues = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("ruleplane_scheduler_requeues_total{") && l.contains(&format!("policy=\"{policy}\"")))
    {
        let event = line
            .split("event=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default()
            .to_string();
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0);
        *requeues.entry(event).or_default() += value;
    }
    // A change that helps every waiting pod wakes every one of them.
    let roomy = format!("ch-{run}-{id}-roomy");
    names.push(create_node(client, node(&roomy, "64", "64Gi", json!({"disk": "ssd"}), json!([]))).await);
    for i in 0..10 {
        assert_eq!(bound(client, &ns, &format!("big-{i}")).await, roomy);
        assert_eq!(bound(client, &ns, &format!("picky-{i}")).await, roomy);
    }
    delete_nodes(client, &names).await;
    Churn { retries, requeues }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_pods_are_retried_only_on_changes_that_could_help_them() {
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let after = churn_run(&client, std::path::Path::new(env!("CARGO_BIN_EXE_ruleplane")), "after").await;
    println!(
        "queueing hints: {} retries of unschedulable pods under the churn; requeues by event {:?}",
        after.retries, after.requeues
    );
    for event in ["NodeUpdateNodeLabel", "NodeUpdateNodeTaint"] {
        assert_eq!(
            after.requeues.get(event).copied().unwrap_or(0.0),
            0.0,
            "no waiting pod can be helped by {event}: {:?}",
            after.requeues
        );
    }
    // Each deletion of a bound pod frees room: NodeResourcesFit's hint retries the ten pods too big to fit, never
    // the ten whose selector no node matches; a pod already retried waits out its backoff in between. Only a lower
    // bound: the plane is shared, and other tests' deletions of bound pods (preemption's victims) count too.
    let deletes = after.requeues.get("AssignedPodDelete").copied().unwrap_or(0.0);
    assert!(
        deletes >= 10.0,
        "bound pods' deletions retry the pods too big for the nodes: {:?}",
        after.requeues
    );
    assert!(after.retries >= 10.0, "the retried pods were attempted again");
    // A before/after comparison: RULEPLANE_BASELINE_BIN names a `ruleplane` built without queueing hints.
    if let Ok(baseline) = std::env::var("RULEPLANE_BASELINE_BIN") {
        let before = churn_run(&client, std::path::Path::new(&baseline), "before").await;
        println!(
            "retries of unschedulable pods under the churn: {} before (every change retries every pod), {} with \
             queueing hints",
            before.retries, after.retries
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_pod_is_placed_when_its_own_change_lifts_what_held_it() {
    use kube::api::{Patch, PatchParams};
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-own-change").await;
    let id = std::process::id();
    let spread = format!("spread5-{id}");
    let tainted = create_node(
        &client,
        node(
            &format!("oc-{id}"),
            "4",
            "8Gi",
            json!({}),
            json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        ),
    )
    .await;
    let dir = temp_dir("scheduler-own-change");
    write(&dir, "policies.yaml", &policies(&spread, &format!("pack5-{id}")));
    let manager = ManagerProcess::start(&dir, &ns, "sched-own", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let tolerate = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoSchedule"});
    let gated = pod(
        &ns,
        "gated",
        &spread,
        "100m",
        json!({"schedulingGates": [{"name": "example.com/hold"}], "tolerations": [tolerate("dedicated")]}),
    );
    create(&client, &gated).await;
    let intolerant = pod(
        &ns,
        "intolerant",
        &spread,
        "100m",
        json!({"tolerations": [tolerate("other")]}),
    );
    create(&client, &intolerant).await;
    let message = unschedulable_message(&client, &ns, "intolerant").await;
    let claims = no_claims_reason(plane_version(&client).await);
    assert_eq!(
        message,
        format!(
            "0/1 nodes are available: 1 node(s) had untolerated taint(s). {claims}preemption: 0/1 nodes are \
             available: 1 Preemption is not helpful for scheduling."
        )
    );
    // A gated pod is never attempted: no FailedScheduling, no binding.
    assert_eq!(node_of(&client, &ns, "gated").await, None);
    assert!(
        events_of(&client, &ns, "gated")
            .await
            .iter()
            .all(|e| e.reason.as_deref() != Some("FailedScheduling")),
        "a gated pod is not attempted"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let ungate: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": "/spec/schedulingGates"}])).expect("patch");
    pods.patch("gated", &PatchParams::default(), &Patch::<()>::Json(ungate))
        .await
        .expect("remove the gates");
    assert_eq!(bound(&client, &ns, "gated").await, tainted, "its gates went");
    let tolerant: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/spec/tolerations/-", "value": tolerate("dedicated")}]))
            .expect("patch");
    pods.patch("intolerant", &PatchParams::default(), &Patch::<()>::Json(tolerant))
        .await
        .expect("add a toleration");
    assert_eq!(
        bound(&client, &ns, "intolerant").await,
        tainted,
        "it tolerates the taint now"
    );
    let metrics = manager.metrics_text().await.unwrap_or_default();
    assert!(
        metric_sum(
            &metrics,
            "ruleplane_scheduler_requeues_total",
            &[
                &format!("policy=\"{spread}\""),
                "event=\"UnschedulablePodUpdatePodToleration\""
            ]
        ) >= 1.0,
        "the toleration moved it: {metrics}"
    );
    delete_nodes(&client, &[tainted]).await;
}
