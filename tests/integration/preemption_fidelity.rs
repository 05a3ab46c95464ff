//! The preemption decision against the real kube-scheduler v1.35: for hand-built cases, the engine's full
//! FailedScheduling text (PostFilter part included), nominated node and victims must be kube-scheduler's.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use ruleplane_config::scheduler::engine::{Decision, Engine, Profile, Snapshot};
use serde_json::{Value, json};

use crate::support::cluster_nodes::{
    KubeScheduler, create_blocking_budget, create_node, create_priority_classes, delete_nodes, delete_priority_classes,
    node, nodes_lock,
};
use crate::support::{admin_client, eventually_seen, plane_version, test_namespace};

/// Every node and every bound pod, terminating ones included (kube-scheduler's cache keeps them until deleted),
/// every PodDisruptionBudget, and the pending pods' nominations.
async fn snapshot(client: &Client) -> Snapshot {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items;
    let (pods, pending): (Vec<Pod>, Vec<Pod>) = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .partition(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some());
    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pdbs")
        .items;
    let mut snapshot = Snapshot::build(nodes, pods).expect("snapshot");
    snapshot.set_pod_disruption_budgets(pdbs);
    snapshot.set_nominated_pods(pending);
    snapshot
}

/// kube-scheduler's PodScheduled=False message for a pod (the full text, PostFilter part included).
async fn kube_message(pods: &Api<Pod>, name: &str) -> Pod {
    eventually_seen(Duration::from_secs(30), "kube-scheduler's verdict", || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        let decided = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False"));
        if decided {
            Ok(pod)
        } else {
            Err(format!("{:?}", pod.status))
        }
    })
    .await
}

fn condition_message(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

fn preemption_of(decision: &Decision) -> Option<(String, Vec<String>)> {
    let preemption = decision.post_filter()?.preemption.as_ref()?;
    Some((
        preemption.node.to_string(),
        preemption.victims.iter().map(|v| v.name.clone()).collect(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_decisions_match_kube_scheduler() {
    let client = admin_client().await;
    // The engine behaves as the plane's kube-scheduler: the apiserver's minor.
    let version = plane_version(&client).await;
    let namespace = test_namespace(&client, "preemption-fidelity").await;
    let run = std::process::id().to_string();
    let scheduler = format!("preempt-{run}");
    let dir = crate::support::manager::temp_dir(&format!("preemption-{run}"));
    let class = |name: &str| format!("{name}-{run}");
    let classes: Vec<(String, i32, &str)> = [
        ("high", 1000, "PreemptLowerPriority"),
        ("never", 1000, "Never"),
        ("low", 10, "PreemptLowerPriority"),
        ("lower", 5, "PreemptLowerPriority"),
    ]
    .into_iter()
    .map(|(name, value, policy)| (class(name), value, policy))
    .collect();
    create_priority_classes(&client, &classes).await;

    let _nodes = nodes_lock().await;
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|n| format!("pre-{run}-{n}"));
    let mut names = Vec::new();
    let pdb_pool = json!({"pool": "pdb"});
    for (name, labels) in [
        (&a, json!({})),
        (&b, json!({})),
        (&c, json!({"pool": "c"})),
        (&d, pdb_pool.clone()),
        (&e, pdb_pool.clone()),
    ] {
        names.push(create_node(&client, node(name, "2", "4Gi", labels, json!([]))).await);
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let pod = |name: &str, cpu: &str, priority_class: &str, extra: Value| -> Pod {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": namespace},
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
    // a: 2 CPUs of a high pod. b: 1 high + 1 low. c: 2 CPUs of a lower pod. d: a lower app=db pod (protected
    // by a budget) beside a high one. e: a low pod beside a high one.
    for (name, node, cpu, class_name) in [
        ("a-high", &a, "2", "high"),
        ("b-high", &b, "1", "high"),
        ("b-low", &b, "1", "low"),
        ("c-lower", &c, "2", "lower"),
        ("d-high", &d, "1", "high"),
        ("d-db", &d, "1", "lower"),
        ("e-high", &e, "1", "high"),
        ("e-web", &e, "1", "low"),
    ] {
        let mut bound = pod(name, cpu, class_name, json!({"nodeName": node}));
        if name == "d-db" {
            bound.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
        }
        pods.create(&PostParams::default(), &bound)
            .await
            .expect("create bound pod");
    }
    create_blocking_budget(&client, &namespace).await;
    let kube_scheduler = KubeScheduler::start(&dir, vec![json!({"schedulerName": scheduler})]);

    let mut engine = Engine::for_version(&Profile::default_provider(), version, 1).expect("engine");
    engine.enable_preemption();
    // kube-scheduler's nominator holds its own profile's pods only.
    engine.nominate_only_for([scheduler.clone()].into());
    let not_c = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["c"]}]}]
    }}}});
    let conflict = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [a.clone()]},
            {"key": "metadata.name", "operator": "In", "values": [b.clone()]}
        ]}]
    }}}});
    // Unschedulable whatever preemption does: the full texts must be identical.
    let unschedulable = [
        ("never", pod("never", "1", "never", json!({}))),
        (
            "selector",
            pod("selector", "1", "high", json!({"nodeSelector": {"pool": "none"}})),
        ),
        ("equal", pod("equal", "1", "lower", json!({}))),
        ("mixed", pod("mixed", "2", "high", not_c)),
        ("conflict", pod("conflict", "1", "high", conflict)),
    ];
    let mut differences = Vec::new();
    for (name, object) in unschedulable {
        let cluster = snapshot(&client).await;
        let created = pods.create(&PostParams::default(), &object).await.expect("create pod");
        let decision = engine.schedule(&cluster, &created).expect("engine decides");
        let kube = condition_message(&kube_message(&pods, name).await);
        let ours = decision.event_message().unwrap_or_default();
        println!("{name}: {kube}");
        if kube != ours {
            differences.push(format!("{name}:\n  kube-scheduler: {kube}\n  engine:         {ours}"));
        }
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .expect("delete pod");
    }

    // Kept to the budget's nodes: d's victim has the lower priority but violates the budget, so e is chosen.
    let cluster = snapshot(&client).await;
    let created = pods
        .create(
            &PostParams::default(),
            &pod("guarded", "1", "high", json!({"nodeSelector": {"pool": "pdb"}})),
        )
        .await
        .expect("create pod");
    let decision = engine.schedule(&cluster, &created).expect("engine decides");
    let nominated = eventually_seen(Duration::from_secs(30), "kube-scheduler's nomination", || async {
        let pod = pods.get("guarded").await.map_err(|e| e.to_string())?;
        pod.status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .ok_or_else(|| format!("{:?}", pod.status))
    })
    .await;
    let ours = preemption_of(&decision);
    println!("guarded: nominated {nominated}");
    if ours != Some((nominated.clone(), vec!["e-web".to_string()])) || nominated != e {
        differences.push(format!(
            "guarded: kube-scheduler nominated {nominated}; engine {ours:?}"
        ));
    }
    pods.delete("guarded", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");

    // Among a, b, c (and d, e): b (victim priority 10) and c (5) are candidates for 1 CPU, d violates the budget,
    // e's victim is already terminating (priority 10): c is chosen, c-lower goes.
    let cluster = snapshot(&client).await;
    let created = pods
        .create(&PostParams::default(), &pod("urgent", "1", "high", json!({})))
        .await
        .expect("create pod");
    let decision = engine.schedule(&cluster, &created).expect("engine decides");
    let nominated = eventually_seen(Duration::from_secs(30), "kube-scheduler's nomination", || async {
        let pod = pods.get("urgent").await.map_err(|e| e.to_string())?;
        pod.status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .map(|node| (node, condition_message(&pod)))
            .ok_or_else(|| format!("{:?}", pod.status))
    })
    .await;
    let victims: Vec<String> = eventually_seen(Duration::from_secs(30), "the victims marked", || async {
        let all = pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let marked: Vec<String> = all
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some() && p.metadata.name.as_deref() != Some("e-web"))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        if marked.is_empty() {
            Err("none yet".to_string())
        } else {
            Ok(marked)
        }
    })
    .await;
    let ours = preemption_of(&decision);
    println!(
        "urgent: nominated {} evicting {victims:?}: {}",
        nominated.0, nominated.1
    );
    if ours != Some((nominated.0.clone(), victims.clone())) {
        differences.push(format!(
            "urgent: kube-scheduler nominated {} evicting {victims:?}; engine {ours:?}",
            nominated.0
        ));
    }
    // The text of the preempting cycle has no suffix. A later retry, with the victim still terminating on the
    // nominated node, says the pod is not eligible; the engine must say the same from that state.
    let first = decision.event_message().unwrap_or_default();
    if nominated.1 != first {
        let cluster = snapshot(&client).await;
        let retried = pods.get("urgent").await.expect("get pod");
        let again = engine.schedule(&cluster, &retried).expect("engine decides");
        if again.event_message().as_deref() != Some(nominated.1.as_str()) {
            differences.push(format!(
                "urgent: kube-scheduler said {:?}; engine {first:?}, then {:?}",
                nominated.1,
                again.event_message()
            ));
        }
    }

    // A nominated pod's room: `big` (3 CPUs) preempts f-lower on f (4 CPUs) and is nominated there while its victim
    // terminates (no kubelet ends it). `follower` (1 CPU, same priority) would fit in f's 2 free CPUs, but
    // kube-scheduler's Filter counts `big` there first: Insufficient cpu, the engine must say the same.
    let f = format!("pre-{run}-f");
    names.push(create_node(&client, node(&f, "4", "8Gi", json!({"pool": "f"}), json!([]))).await);
    pods.create(
        &PostParams::default(),
        &pod("f-lower", "2", "lower", json!({"nodeName": f})),
    )
    .await
    .expect("create bound pod");
    let only_f = json!({"nodeSelector": {"pool": "f"}});
    pods.create(&PostParams::default(), &pod("big", "3", "high", only_f.clone()))
        .await
        .expect("create pod");
    eventually_seen(Duration::from_secs(30), "big nominated to f", || async {
        let pod = pods.get("big").await.map_err(|e| e.to_string())?;
        let nominated = pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref());
        if nominated == Some(f.as_str()) {
            Ok(())
        } else {
            Err(format!("{:?}", pod.status))
        }
    })
    .await;
    let cluster = snapshot(&client).await;
    let created = pods
        .create(&PostParams::default(), &pod("follower", "1", "never", only_f))
        .await
        .expect("create pod");
    let decision = engine.schedule(&cluster, &created).expect("engine decides");
    let kube = condition_message(&kube_message(&pods, "follower").await);
    let ours = decision.event_message().unwrap_or_default();
    println!("follower: {kube}");
    if kube != ours || decision.chosen().is_some() {
        differences.push(format!("follower:\n  kube-scheduler: {kube}\n  engine:         {ours}"));
    }

    // kube-scheduler stops first and the pending pods go: a preemptor bound to a node while it is deleted would
    // leave a pod on a node that no longer exists for the next test's snapshot.
    drop(kube_scheduler);
    for pending in ["urgent", "big", "follower"] {
        let _ = pods.delete(pending, &DeleteParams::default().grace_period(0)).await;
    }
    delete_nodes(&client, &names).await;
    delete_priority_classes(&client, classes.into_iter().map(|(name, _, _)| name)).await;
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Terminating victims on the nominated node (v1.35's `PodEligibleToPreemptOthers`), side by side: on twin nodes
/// without a kubelet, a Ruleplane policy's preemptor and kube-scheduler's each evict one of two victims, which stay
/// Terminating for their grace period. Once a node is added (the cluster event their queueing hints retry on), both
/// preemptors fail again with kube-scheduler's `not eligible due to a terminating pod on the nominated node`, the
/// engine predicts that text from the same state, neither evicts the second victim, and both are bound once the
/// victim is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemptor_waits_for_its_terminating_victims_as_kube_scheduler_does() {
    let client = admin_client().await;
    // The engine behaves as the plane's kube-scheduler: the apiserver's minor.
    let version = plane_version(&client).await;
    let namespace = test_namespace(&client, "terminating-victims").await;
    let run = std::process::id().to_string();
    let dir = crate::support::manager::temp_dir(&format!("terminating-victims-{run}"));
    let kube_dir = crate::support::manager::temp_dir(&format!("terminating-victims-ks-{run}"));
    let classes: Vec<(String, i32, &str)> = vec![
        (format!("tv-high-{run}"), 1000, "PreemptLowerPriority"),
        (format!("tv-low-{run}"), 10, "PreemptLowerPriority"),
    ];
    create_priority_classes(&client, &classes).await;
    let _nodes = nodes_lock().await;
    let sides = ["rp", "ks"];
    let mut names = Vec::new();
    for side in sides {
        let name = format!("tv-{run}-{side}");
        names.push(create_node(&client, node(&name, "4", "8Gi", json!({"side": side}), json!([]))).await);
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let scheduler = |side: &str| format!("tv-{side}-{run}");
    let pod = |name: &str, side: &str, class: &str, node: Option<&str>| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedulerName": scheduler(side),
                "priorityClassName": class,
                "nodeName": node,
                "nodeSelector": {"side": side},
                // No kubelet ends it: a deleted victim stays Terminating.
                "terminationGracePeriodSeconds": 300,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2"}}}]
            }
        }))
        .expect("pod")
    };
    for (side, node) in sides.iter().zip(&names) {
        for victim in 0..2 {
            pods.create(
                &PostParams::default(),
                &pod(&format!("{side}-v{victim}"), side, &classes[1].0, Some(node)),
            )
            .await
            .expect("create victim");
        }
    }
    crate::support::write_rule_file(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: tv }}\n\
             spec: {{ schedulerName: {}, algorithmProvider: DefaultProvider }}\n",
            scheduler("rp")
        ),
    );
    let manager = crate::support::manager::ManagerProcess::start(&dir, &namespace, "terminating-victims", &[]);
    let kube_scheduler = KubeScheduler::start(&kube_dir, vec![json!({"schedulerName": scheduler("ks")})]);
    manager.wait_ready(Duration::from_secs(60)).await;
    for side in sides {
        pods.create(
            &PostParams::default(),
            &pod(&format!("{side}-p"), side, &classes[0].0, None),
        )
        .await
        .expect("create preemptor");
    }
    // Each preemptor is nominated to its node and one victim there is terminating.
    let terminating = |side: &'static str| {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default())
                .await
                .expect("pods")
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .filter_map(|p| p.metadata.name)
                .filter(|n| n.starts_with(&format!("{side}-v")))
                .collect::<Vec<_>>()
        }
    };
    for (side, node) in sides.iter().zip(&names) {
        eventually_seen(
            Duration::from_secs(30),
            &format!("{side}-p nominated, a victim terminating"),
            || async {
                let preemptor = pods.get(&format!("{side}-p")).await.map_err(|e| e.to_string())?;
                let nominated = preemptor.status.as_ref().and_then(|s| s.nominated_node_name.as_ref());
                let victims = terminating(side).await;
                if nominated == Some(node) && victims.len() == 1 {
                    Ok(())
                } else {
                    Err(format!("nominated {nominated:?}, terminating {victims:?}"))
                }
            },
        )
        .await;
    }
    // A node with room the preemptors' selector excludes: NodeResourcesFit's hint retries both on it.
    let spare = format!("tv-{run}-spare");
    names.push(create_node(&client, node(&spare, "8", "16Gi", json!({"side": "spare"}), json!([]))).await);
    // The engine's prediction from that state (the spare node's not-ready taint is gone once `create_node` returns;
    // a retry that saw it is followed by another on its removal): both preemptors' texts must become it.
    let mut engine = Engine::for_version(&Profile::default_provider(), version, 1).expect("engine");
    engine.enable_preemption();
    engine.nominate_only_for([scheduler("ks")].into());
    let preemptor = pods.get("ks-p").await.expect("get preemptor");
    let decision = engine
        .schedule(&snapshot(&client).await, &preemptor)
        .expect("engine decides");
    assert!(preemption_of(&decision).is_none(), "the engine preempts again");
    let expected = decision.event_message().unwrap_or_default();
    assert!(
        expected.ends_with("preemption: not eligible due to a terminating pod on the nominated node."),
        "{expected}"
    );
    for side in sides {
        eventually_seen(Duration::from_secs(60), &format!("{side}-p retried"), || async {
            let preemptor = pods.get(&format!("{side}-p")).await.map_err(|e| e.to_string())?;
            let message = condition_message(&preemptor);
            if message == expected { Ok(()) } else { Err(message) }
        })
        .await;
    }
    println!("terminating victims: {expected}");
    // Neither evicts the second victim meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for side in sides {
        assert_eq!(terminating(side).await.len(), 1, "{side}: a second victim was evicted");
    }
    // The kubelet's part: the terminating victim goes, and each preemptor is bound on its nominated node.
    for side in sides {
        for victim in terminating(side).await {
            pods.delete(&victim, &DeleteParams::default().grace_period(0))
                .await
                .expect("final deletion");
        }
    }
    for (side, node) in sides.iter().zip(&names) {
        let bound = eventually_seen(Duration::from_secs(30), &format!("{side}-p bound"), || async {
            let preemptor = pods.get(&format!("{side}-p")).await.map_err(|e| e.to_string())?;
            preemptor
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .ok_or_else(|| condition_message(&preemptor))
        })
        .await;
        assert_eq!(&bound, node, "{side}-p");
    }
    drop(kube_scheduler);
    drop(manager);
    delete_nodes(&client, &names).await;
    delete_priority_classes(&client, classes.into_iter().map(|(name, _, _)| name)).await;
}
