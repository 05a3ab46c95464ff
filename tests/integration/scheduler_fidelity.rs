//! Fidelity of the scheduling engine against the real kube-scheduler v1.35 of the project's build: a seeded random
//! corpus of nodes and pods, scheduled one pod at a time by kube-scheduler on the control plane and predicted by the
//! engine from the same cluster state. Feasibility and the whole FailedScheduling text (PostFilter part included)
//! must be identical for every pod, and
//! kube-scheduler's node must be among the engine's best-scored nodes.
//!
//! `RULEPLANE_FIDELITY_PODS` (default 40), `RULEPLANE_FIDELITY_NODES` (default 10, at most 100) and
//! `RULEPLANE_FIDELITY_SEED` size and seed the corpus;
//! `tests/bench/scheduler-fidelity.sh` runs the large version and prints the figures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use ruleplane_config::SchedulerPolicy;
use ruleplane_config::scheduler::engine::{Decision, Snapshot, SplitMix64};
use serde_json::{Value, json};

use crate::support::cluster_nodes::{KubeScheduler, create_node, delete_nodes, nodes_lock};
use crate::support::{admin_client, plane_version, test_namespace};

/// A profile in both languages: the Ruleplane rule and kube-scheduler's equivalent `profiles[]` entry.
struct Case {
    scheduler: String,
    rule: String,
    kube_profile: Value,
}

fn cases(run: &str) -> Vec<Case> {
    let spread = format!("fidelity-spread-{run}");
    let pack = format!("fidelity-pack-{run}");
    vec![
        Case {
            rule: format!(
                "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: spread }}\n\
                 spec:\n  schedulerName: {spread}\n  algorithmProvider: DefaultProvider\n"
            ),
            kube_profile: json!({"schedulerName": spread}),
            scheduler: spread,
        },
        Case {
            rule: format!(
                "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: pack }}\n\
                 spec:\n  schedulerName: {pack}\n  algorithmProvider: ClusterAutoscalerProvider\n"
            ),
            kube_profile: json!({
                "schedulerName": pack,
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {
                    "scoringStrategy": {"type": "MostAllocated",
                                        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]
            }),
            scheduler: pack,
        },
    ]
}

/// The random corpus: nodes with varied capacity, labels, taints and unschedulable; pods with requests,
/// nodeSelector, affinity, tolerations, host ports and topology spread.
struct Corpus {
    rng: SplitMix64,
    run: String,
}

impl Corpus {
    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.rng.below(options.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.rng.below(100) < percent
    }

    fn node(&mut self, index: usize) -> Value {
        let name = format!("fid-{}-{index}", self.run);
        let cpu = self.pick(&["1", "2", "4", "8"]);
        let memory = self.pick(&["2Gi", "4Gi", "8Gi", "16Gi"]);
        let pods = self.pick(&["110", "110", "110", "4"]);
        let mut labels = json!({
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": self.pick(&["zone-a", "zone-b", "zone-c"]),
            "fidelity-run": self.run,
        });
        if self.chance(60) {
            labels["tier"] = json!(self.pick(&["gold", "silver", "bronze"]));
        }
        if self.chance(50) {
            labels["disk"] = json!(self.pick(&["ssd", "hdd"]));
        }
        let mut taints = Vec::new();
        if self.chance(20) {
            taints.push(json!({"key": "dedicated", "value": self.pick(&["gpu", "infra"]), "effect": "NoSchedule"}));
        }
        if self.chance(20) {
            taints.push(json!({"key": "spot", "value": "true", "effect": "PreferNoSchedule"}));
        }
        let unschedulable = self.chance(8);
        if unschedulable {
            taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
        }
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": unschedulable, "taints": taints},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "images": [{"names": ["registry.example/app:1"], "sizeBytes": 300_000_000}]},
        })
    }

    fn pod(&mut self, namespace: &str, index: usize, scheduler: &str) -> Value {
        let app = self.pick(&["web", "api", "cache", "batch"]);
        let cpu = self.pick(&["100m", "250m", "500m", "1", "2", "3"]);
        let memory = self.pick(&["64Mi", "256Mi", "1Gi", "3Gi"]);
        let mut container = json!({"name": "c", "image": self.pick(&["registry.example/app:1", "busybox"]),
                                   "resources": {"requests": {"cpu": cpu, "memory": memory}}});
        if self.chance(10) {
            container["ports"] = json!([{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]);
        }
        let mut spec =
            json!({"schedulerName": scheduler, "containers": [container], "terminationGracePeriodSeconds": 0});
        if self.chance(15) {
            spec["nodeSelector"] = json!({"tier": self.pick(&["gold", "silver"])});
        }
        let mut affinity = serde_json::Map::new();
        if self.chance(15) {
            let (operator, values) = match self.rng.below(3) {
                0 => ("In", json!(["ssd"])),
                1 => ("NotIn", json!(["hdd"])),
                _ => ("Exists", Value::Null),
            };
            let mut expression = json!({"key": "disk", "operator": operator});
            if !values.is_null() {
                expression["values"] = values;
            }
            affinity.insert(
                "nodeAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}),
            );
        } else if self.chance(20) {
            affinity.insert(
                "nodeAffinity".into(),
                json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": [self.pick(&["gold", "bronze"])]}]}}]}),
            );
        }
        if self.chance(10) {
            affinity.insert(
                "podAntiAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}),
            );
        } else if self.chance(10) {
            affinity.insert(
                "podAffinity".into(),
                json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "topology.kubernetes.io/zone"}}]}),
            );
        }
        if !affinity.is_empty() {
            spec["affinity"] = Value::Object(affinity);
        }
        if self.chance(25) {
            spec["tolerations"] = json!([{"key": "dedicated", "operator": "Equal", "value": self.pick(&["gpu", "infra"]), "effect": "NoSchedule"}]);
        }
        if self.chance(15) {
            spec["topologySpreadConstraints"] = json!([{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": self.pick(&["DoNotSchedule", "ScheduleAnyway"]),
                "labelSelector": {"matchLabels": {"app": app}},
            }]);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("p-{index}"), "namespace": namespace, "labels": {"app": app}},
               "spec": spec})
    }
}

/// What kube-scheduler did with a pod: bound to a node, or unschedulable with its message (PostFilter part cut).
#[derive(Debug, PartialEq)]
enum Verdict {
    Bound(String),
    Unschedulable(String),
}

async fn kube_verdict(pods: &Api<Pod>, name: &str) -> Verdict {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pod = pods.get(name).await.expect("get pod");
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Verdict::Bound(node);
        }
        let unschedulable = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled" && c.status == "False"))
            .and_then(|c| c.message.clone());
        if let Some(message) = unschedulable {
            return Verdict::Unschedulable(message);
        }
        assert!(
            Instant::now() < deadline,
            "kube-scheduler did not decide on {name} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The engine's input: every node and every bound, non-terminated pod of the cluster, as kube-scheduler caches them.
async fn cluster_snapshot(client: &Client) -> Snapshot {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items;
    let pods: Vec<Pod> = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    Snapshot::build(nodes, pods).expect("snapshot of the cluster")
}

fn best_nodes(decision: &Decision) -> Vec<String> {
    let feasible: Vec<_> = decision.nodes.iter().filter(|n| n.rejection.is_none()).collect();
    if feasible.len() == 1 {
        return vec![feasible[0].node.to_string()];
    }
    let best = feasible.iter().filter_map(|n| n.total).max();
    feasible
        .iter()
        .filter(|n| n.total.is_some() && n.total == best)
        .map(|n| n.node.to_string())
        .collect()
}

#[derive(Default)]
struct Tally {
    pods: usize,
    feasibility_agrees: usize,
    message_agrees: usize,
    unschedulable: usize,
    node_among_best: usize,
    bound: usize,
    disagreements: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_decides_as_kube_scheduler_on_a_random_corpus() {
    let pod_count: usize = std::env::var("RULEPLANE_FIDELITY_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("RULEPLANE_FIDELITY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2026);
    let client = admin_client().await;
    // The engine behaves as the plane's kube-scheduler: the apiserver's minor.
    let version = plane_version(&client).await;
    let namespace = test_namespace(&client, "scheduler-fidelity").await;
    let run = format!("{}-{seed}", std::process::id());
    let cases = cases(&run);
    let dir = crate::support::manager::temp_dir(&format!("fidelity-{seed}"));

    let mut corpus = Corpus {
        rng: SplitMix64::new(seed),
        run: run.clone(),
    };
    let _nodes = nodes_lock().await;
    // Up to 100 nodes kube-scheduler's adaptive percentageOfNodesToScore evaluates every node, so "the engine's
    // best" compares like with like; beyond, the sample depends on kube-scheduler's node-tree order.
    let node_count: usize = std::env::var("RULEPLANE_FIDELITY_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut node_names = Vec::new();
    for index in 0..node_count {
        node_names.push(create_node(&client, corpus.node(index)).await);
    }

    // Started after the nodes exist: kube-scheduler schedules only once its informers have synced, so its first
    // decision sees the same nodes as the engine's.
    let _kube_scheduler = KubeScheduler::start(&dir, cases.iter().map(|c| c.kube_profile.clone()).collect());
    let pods_api = Api::<Pod>::namespaced(client.clone(), &namespace);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let started = Instant::now();
    for index in 0..pod_count {
        let case = &cases[index % cases.len()];
        let rules = ruleplane_config::load_str("policy.yaml", &case.rule).expect("policy loads");
        let policy: &SchedulerPolicy = rules.scheduler_policies().next().expect("one policy");
        let pod_json = corpus.pod(&namespace, index, &case.scheduler);
        let pod: Pod = serde_json::from_value(pod_json).expect("pod");
        let name = pod.metadata.name.clone().unwrap_or_default();

        let snapshot = cluster_snapshot(&client).await;
        // With the PostFilter chain (DynamicResources, DefaultPreemption), as kube-scheduler's profiles have it:
        // the whole FailedScheduling text is compared, its `preemption: …` part included.
        let mut engine = policy.engine_with_post_filters(seed, version).expect("engine");
        engine.nominate_only_for([case.scheduler.clone()].into());
        let decision = engine.schedule(&snapshot, &pod).expect("engine decides");

        pods_api.create(&PostParams::default(), &pod).await.expect("create pod");
        let verdict = kube_verdict(&pods_api, &name).await;

        let tally = tallies.entry(case.scheduler.clone()).or_default();
        tally.pods += 1;
        let engine_message = decision.event_message();
        match (&verdict, decision.chosen()) {
            (Verdict::Bound(node), Some(_)) => {
                tally.feasibility_agrees += 1;
                tally.message_agrees += 1;
                tally.bound += 1;
                let best = best_nodes(&decision);
                if best.contains(node) {
                    tally.node_among_best += 1;
                } else {
                    tally.disagreements.push(format!(
                        "{name}: kube-scheduler chose {node}, engine's best {best:?}; totals {:?}",
                        decision
                            .nodes
                            .iter()
                            .map(|n| (n.node.to_string(), n.total))
                            .collect::<Vec<_>>()
                    ));
                }
            }
            (Verdict::Unschedulable(message), None) => {
                tally.feasibility_agrees += 1;
                tally.unschedulable += 1;
                if engine_message.as_deref() == Some(message.as_str()) {
                    tally.message_agrees += 1;
                } else {
                    tally.disagreements.push(format!(
                        "{name}: messages differ\n  kube-scheduler: {message}\n  engine:         {engine_message:?}"
                    ));
                }
            }
            (verdict, chosen) => tally.disagreements.push(format!(
                "{name}: kube-scheduler {verdict:?}, engine {chosen:?} / {engine_message:?}"
            )),
        }
        if matches!(verdict, Verdict::Unschedulable(_)) {
            // An unschedulable pod is deleted so that a later retry cannot bind it behind the engine's back.
            pods_api
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await
                .expect("delete unschedulable pod");
        }
    }
    let elapsed = started.elapsed();

    // Clean up the corpus nodes (cluster-scoped); the namespace's bound pods go with the plane.
    delete_nodes(&client, &node_names).await;

    let mut failures = Vec::new();
    println!(
        "scheduler fidelity: {pod_count} pods, {node_count} nodes, seed {seed}, {:.1} s",
        elapsed.as_secs_f64()
    );
    for (scheduler, tally) in &tallies {
        let share = |n: usize, of: usize| if of == 0 { 100.0 } else { 100.0 * n as f64 / of as f64 };
        println!(
            "  {scheduler}: {} pods ({} bound, {} unschedulable): feasibility {}/{} identical, FailedScheduling text {}/{} identical, \
             kube-scheduler's node among the engine's best {}/{} ({:.1} %)",
            tally.pods,
            tally.bound,
            tally.unschedulable,
            tally.feasibility_agrees,
            tally.pods,
            tally.message_agrees,
            tally.pods,
            tally.node_among_best,
            tally.bound,
            share(tally.node_among_best, tally.bound)
        );
        for line in &tally.disagreements {
            println!("    {line}");
        }
        if tally.feasibility_agrees != tally.pods || tally.message_agrees != tally.pods {
            failures.push(format!("{scheduler}: verdicts or messages differ"));
        }
        if share(tally.node_among_best, tally.bound) < 99.0 {
            failures.push(format!(
                "{scheduler}: kube-scheduler's node among the engine's best for < 99 % of pods"
            ));
        }
        assert!(
            tally.bound > 0 && tally.unschedulable > 0 || tally.pods < 10,
            "the corpus exercises both outcomes"
        );
    }
    assert!(failures.is_empty(), "{failures:?}");
}
