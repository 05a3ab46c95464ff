//! Preemption fidelity on a seeded random corpus: nodes filled with pods of several priorities (negative ones
//! included), distinct start times and PodDisruptionBudgets, then pods of higher priorities (some with
//! `preemptionPolicy: Never`) decided one at a time by the real kube-scheduler v1.35 and predicted by the engine from
//! the same state. The whole FailedScheduling text (PostFilter part included), the nominated node and the victims
//! must be kube-scheduler's.
//!
//! `RULEPLANE_PREEMPTION_CORPUS_PODS` (default 20) and `RULEPLANE_PREEMPTION_CORPUS_SEED` size and seed it.
//!
//! No disruption controller runs on the plane (without a kubelet no pod is Ready, so it would allow 0 everywhere and
//! overwrite any other status): the budgets' status is written by the test, random per budget, and stays as
//! written, which both schedulers read as is.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ruleplane_config::scheduler::engine::{Engine, Profile, Snapshot, SplitMix64};
use serde_json::json;

use crate::support::cluster_nodes::{
    KubeScheduler, create_node, create_priority_classes, delete_nodes, delete_priority_classes, node, nodes_lock,
};
use crate::support::{admin_client, plane_version, test_namespace};

const NODES: usize = 5;
const APPS: [&str; 3] = ["a", "b", "c"];

/// Every node, every bound pod not being deleted, every budget, and the pending pods' nominations.
async fn snapshot(client: &Client) -> Snapshot {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items;
    let (bound, pending): (Vec<Pod>, Vec<Pod>) = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .partition(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some());
    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pdbs")
        .items;
    let mut snapshot = Snapshot::build(nodes, bound).expect("snapshot");
    snapshot.set_pod_disruption_budgets(pdbs);
    snapshot.set_nominated_pods(pending);
    snapshot
}

/// kube-scheduler's verdict: bound, or its PodScheduled=False message with the nomination it wrote.
#[derive(Debug, PartialEq)]
enum Verdict {
    Bound(String),
    Unschedulable { message: String, nominated: Option<String> },
}

async fn kube_verdict(pods: &Api<Pod>, name: &str) -> Verdict {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pod = pods.get(name).await.expect("get pod");
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Verdict::Bound(node);
        }
        let status = pod.status.unwrap_or_default();
        let message = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            .and_then(|c| c.message);
        if let Some(message) = message {
            return Verdict::Unschedulable {
                message,
                nominated: status.nominated_node_name,
            };
        }
        assert!(Instant::now() < deadline, "kube-scheduler did not decide on {name}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// kube-scheduler's FailedScheduling text for a pod it later bound (its preemption went through before the
/// condition could be read): the note of its FailedScheduling Event.
async fn failed_scheduling_note(client: &Client, namespace: &str, pod: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let note = Api::<Event>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
                    && e.reason.as_deref() == Some("FailedScheduling")
            })
            .and_then(|e| e.note);
        if let Some(note) = note {
            return note;
        }
        assert!(Instant::now() < deadline, "no FailedScheduling Event for {pod}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn names(pods: &Api<Pod>) -> HashSet<String> {
    pods.list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_decisions_match_kube_scheduler_on_a_random_corpus() {
    let count: usize = std::env::var("RULEPLANE_PREEMPTION_CORPUS_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("RULEPLANE_PREEMPTION_CORPUS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2026);
    let mut rng = SplitMix64::new(seed);
    let client = admin_client().await;
    // The engine behaves as the plane's kube-scheduler: the apiserver's minor.
    let version = plane_version(&client).await;
    let namespace = test_namespace(&client, "preemption-corpus").await;
    let run = format!("{}-{seed}", std::process::id());
    let scheduler = format!("corpus-{run}");
    let dir = crate::support::manager::temp_dir(&format!("preemption-corpus-{run}"));
    let class = |name: &str| format!("pc-{name}-{run}");
    let classes: Vec<(String, i32, &str)> = [
        ("negative", -10, "PreemptLowerPriority"),
        ("low", 10, "PreemptLowerPriority"),
        ("mid", 100, "PreemptLowerPriority"),
        ("high", 1000, "PreemptLowerPriority"),
        ("never", 1000, "Never"),
    ]
    .into_iter()
    .map(|(name, value, policy)| (class(name), value, policy))
    .collect();
    create_priority_classes(&client, &classes).await;

    let _nodes = nodes_lock().await;
    let mut node_names = Vec::new();
    for index in 0..NODES {
        let name = format!("pc-{run}-{index}");
        node_names.push(create_node(&client, node(&name, "4", "16Gi", json!({}), json!([]))).await);
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let pod = |name: &str, cpu: &str, priority_class: &str, app: &str, node: Option<&str>| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
            "spec": {
                "schedulerName": scheduler,
                "priorityClassName": class(priority_class),
                "nodeName": node,
                // Without a kubelet a victim is gone at once only with no grace period.
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
            }
        }))
        .expect("pod")
    };
    // The fill: each node gets pods of random priority and size until about full; each bound pod a distinct
    // start time (MoreImportantPod and the node choice's last criterion read it).
    let mut started_at = 0u64;
    for (n, node_name) in node_names.iter().enumerate() {
        let mut used = 0;
        let mut index = 0;
        while used < 4000 {
            let cpu = [500, 1000, 1500][rng.below(3)].min(4000 - used);
            let priority = ["negative", "low", "mid"][rng.below(3)];
            let app = APPS[rng.below(APPS.len())];
            let name = format!("fill-{n}-{index}");
            pods.create(
                &PostParams::default(),
                &pod(&name, &format!("{cpu}m"), priority, app, Some(node_name)),
            )
            .await
            .expect("create fill pod");
            started_at += 1 + rng.below(50) as u64;
            let status = json!({"status": {
                "phase": "Running",
                "startTime": format!("2026-01-01T{:02}:{:02}:{:02}Z", started_at / 3600, started_at / 60 % 60, started_at % 60)
            }});
            pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .expect("start time");
            used += cpu;
            index += 1;
        }
    }
    let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), &namespace);
    for app in ["a", "b"] {
        let allowed = rng.below(3);
        let budget: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": app}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}
        }))
        .expect("pdb");
        pdbs.create(&PostParams::default(), &budget).await.expect("create pdb");
        let status = json!({"status": {
            "disruptionsAllowed": allowed, "currentHealthy": 1 + allowed, "desiredHealthy": 1, "expectedPods": 1 + allowed
        }});
        pdbs.patch_status(app, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("pdb status");
    }

    let _kube_scheduler = KubeScheduler::start(&dir, vec![json!({"schedulerName": scheduler})]);
    let mut engine = Engine::for_version(&Profile::default_provider(), version, seed).expect("engine");
    engine.enable_preemption();
    engine.nominate_only_for([scheduler.clone()].into());

    let started = Instant::now();
    let mut differences = Vec::new();
    let mut preempted = 0;
    let mut protected_victims = 0;
    for index in 0..count {
        let name = format!("p-{index}");
        let cpu = ["500m", "1", "2", "3"][rng.below(4)];
        let priority = ["mid", "high", "high", "never"][rng.below(4)];
        let object = pod(&name, cpu, priority, APPS[rng.below(APPS.len())], None);
        let cluster = snapshot(&client).await;
        let before = names(&pods).await;
        let created = pods.create(&PostParams::default(), &object).await.expect("create pod");
        let decision = engine.schedule(&cluster, &created).expect("engine decides");
        let mut verdict = kube_verdict(&pods, &name).await;
        // Bound, with pods gone: kube-scheduler preempted first (victims go at once, the retry binds), faster than
        // the condition could be read; its first attempt's text is in the FailedScheduling Event.
        if let Verdict::Bound(node) = &verdict
            && !before.is_subset(&names(&pods).await)
        {
            verdict = Verdict::Unschedulable {
                message: failed_scheduling_note(&client, &namespace, &name).await,
                nominated: Some(node.clone()),
            };
        }
        let ours = match (decision.chosen(), decision.event_message()) {
            (Some(node), _) => Verdict::Bound(node.to_string()),
            (None, message) => Verdict::Unschedulable {
                message: message.unwrap_or_default(),
                nominated: decision
                    .post_filter()
                    .and_then(|p| p.preemption.as_ref())
                    .map(|p| p.node.to_string()),
            },
        };
        println!("{name} ({cpu} CPU, {priority}): {verdict:?}");
        // A bound pod's node is a scoring choice the plain corpus checks; here the verdict kind is compared.
        let same = match (&verdict, &ours) {
            (Verdict::Bound(_), Verdict::Bound(_)) => true,
            (kube, ours) => kube == ours,
        };
        if !same {
            differences.push(format!(
                "{name}:\n  kube-scheduler: {verdict:?}\n  engine:         {ours:?}"
            ));
        }
        if let Verdict::Unschedulable {
            nominated: Some(node), ..
        } = &verdict
        {
            preempted += 1;
            protected_victims += decision
                .post_filter()
                .and_then(|p| p.preemption.as_ref())
                .map_or(0, |p| p.pdb_violations);
            // The victims go at once (no grace period) and the preemptor is bound on its nominated node.
            let deadline = Instant::now() + Duration::from_secs(20);
            while !matches!(kube_verdict(&pods, &name).await, Verdict::Bound(_)) {
                assert!(Instant::now() < deadline, "{name} not bound after its preemption");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let after = names(&pods).await;
            let victims: BTreeSet<String> = before.difference(&after).cloned().collect();
            let expected: BTreeSet<String> = decision
                .post_filter()
                .and_then(|p| p.preemption.as_ref())
                .map(|p| p.victims.iter().map(|v| v.name.clone()).collect())
                .unwrap_or_default();
            if victims != expected {
                differences.push(format!(
                    "{name} on {node}: kube-scheduler evicted {victims:?}, engine {expected:?}"
                ));
            }
        } else if matches!(verdict, Verdict::Unschedulable { .. }) {
            pods.delete(&name, &DeleteParams::default().grace_period(0))
                .await
                .expect("delete unschedulable pod");
        }
    }
    println!(
        "preemption corpus: {count} pods ({preempted} preempting, {protected_victims} victims beyond a budget), seed \
         {seed}, {:.1} s, {} differences",
        started.elapsed().as_secs_f64(),
        differences.len()
    );
    drop(_kube_scheduler);
    delete_nodes(&client, &node_names).await;
    delete_priority_classes(&client, classes.into_iter().map(|(name, _, _)| name)).await;
    assert!(preempted > 0, "the corpus preempts");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
