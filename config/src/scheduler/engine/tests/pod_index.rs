//! The snapshot's kept counts against full visits after random changes, and decisions on a kept snapshot
//! against decisions on one built afresh.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::scheduler::engine::labels::Selector;
use crate::scheduler::engine::pod_index::{DomainCounts, DomainQuery, PodIndex, PodMatcher};
use crate::scheduler::engine::pod_info::{AffinityTerm, PodInfo};
use crate::scheduler::engine::{Engine, Profile, Snapshot, SplitMix64};

const KEYS: [&str; 3] = ["topology.kubernetes.io/zone", "kubernetes.io/hostname", "rack"];
const COLORS: [&str; 3] = ["red", "blue", "green"];
const NAMESPACES: [&str; 2] = ["ns1", "ns2"];

fn pick<'a>(rng: &mut SplitMix64, of: &[&'a str]) -> &'a str {
    of[rng.below(of.len())]
}

fn node(rng: &mut SplitMix64, name: &str) -> Node {
    let mut labels = serde_json::Map::new();
    labels.insert(KEYS[1].into(), json!(name));
    if rng.below(5) != 0 {
        labels.insert(KEYS[0].into(), json!(pick(rng, &["a", "b", "c"])));
    }
    if rng.below(3) == 0 {
        labels.insert(KEYS[2].into(), json!(pick(rng, &["r1", "r2"])));
    }
    let resources = json!({"cpu": "100", "memory": "100Gi", "pods": "500"});
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": resources, "capacity": resources},
    }))
    .expect("node")
}

fn term(rng: &mut SplitMix64) -> Value {
    let mut term = json!({
        "labelSelector": {"matchLabels": {"color": pick(rng, &COLORS)}},
        "topologyKey": pick(rng, &KEYS),
    });
    if rng.below(2) == 0 {
        term["namespaces"] = json!(["ns1", "ns2"]);
    }
    term
}

fn affinity(rng: &mut SplitMix64) -> Value {
    let mut affinity = json!({});
    if rng.below(3) == 0 {
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!([term(rng)]);
    }
    if rng.below(4) == 0 {
        affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!([term(rng)]);
    }
    if rng.below(3) == 0 {
        let weight = 1 + rng.below(100);
        affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] =
            json!([{"weight": weight, "podAffinityTerm": term(rng)}]);
    }
    if rng.below(3) == 0 {
        let weight = 1 + rng.below(100);
        affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] =
            json!([{"weight": weight, "podAffinityTerm": term(rng)}]);
    }
    affinity
}

fn pod(rng: &mut SplitMix64, name: &str, node: Option<&str>) -> Pod {
    let namespace = pick(rng, &NAMESPACES);
    let mut pod = json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                     "labels": {"color": pick(rng, &COLORS)}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "10m"}}}],
            "affinity": affinity(rng),
        },
    });
    if rng.below(3) == 0 {
        pod["spec"]["topologySpreadConstraints"] = json!([{
            "maxSkew": 1 + rng.below(2),
            "topologyKey": pick(rng, &KEYS[..1]),
            "whenUnsatisfiable": pick(rng, &["DoNotSchedule", "ScheduleAnyway"]),
            "labelSelector": {"matchLabels": {"color": pick(rng, &COLORS)}},
        }]);
    }
    if rng.below(8) == 0 {
        pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    serde_json::from_value(pod).expect("pod")
}

fn queries() -> Vec<DomainQuery> {
    let selector = |color: &str| Selector::from_set(&[("color".to_string(), color.to_string())].into());
    let mut queries = Vec::new();
    for key in KEYS {
        for color in COLORS {
            let term = AffinityTerm {
                namespaces: ["ns1".to_string()].into(),
                selector: selector(color),
                topology_key: key.into(),
                namespace_selector: Selector::Nothing,
                needs_namespace_labels: false,
            };
            queries.push(DomainQuery {
                matcher: PodMatcher::AllTerms(vec![term]),
                topology_key: key.into(),
                required_keys: vec![key.into()],
                missing_as_empty: false,
            });
            queries.push(DomainQuery {
                matcher: PodMatcher::Spread {
                    namespace: "ns2".into(),
                    selector: selector(color),
                },
                topology_key: key.into(),
                required_keys: vec![KEYS[0].into(), key.into()],
                missing_as_empty: false,
            });
            queries.push(DomainQuery {
                matcher: PodMatcher::Spread {
                    namespace: "ns1".into(),
                    selector: selector(color),
                },
                topology_key: key.into(),
                required_keys: Vec::new(),
                missing_as_empty: true,
            });
        }
    }
    queries
}

fn check_counts(snapshot: &Snapshot, queries: &[DomainQuery], step: &str) {
    for query in queries {
        let kept = snapshot.domain_counts(query.clone());
        let visited = DomainCounts::visit(query, snapshot.list().map(|n| n.labels_and_pods()));
        assert_eq!(*kept, visited, "{step}: {query:?}");
    }
    let mut fresh = PodIndex::default();
    for node in snapshot.list() {
        fresh.node_changed(node.labels_and_pods(), 1);
    }
    assert_eq!(
        snapshot.existing_terms(),
        fresh.existing(),
        "{step}: placed pods' terms"
    );
}

#[test]
fn kept_counts_equal_a_full_visit_after_every_change() {
    let queries = queries();
    for seed in 0..12 {
        let mut rng = SplitMix64::new(seed);
        let mut snapshot = Snapshot::new();
        let mut names = Vec::new();
        for i in 0..6 {
            let name = format!("n{i}");
            snapshot.upsert_node(node(&mut rng, &name)).expect("node");
            names.push(name);
        }
        let mut placed: Vec<String> = Vec::new();
        for step in 0..160 {
            let what = match rng.below(12) {
                0..=4 => {
                    let target = names[rng.below(names.len())].clone();
                    let name = format!("p{seed}-{step}");
                    if rng.below(2) == 0 {
                        snapshot.add_pod(pod(&mut rng, &name, Some(&target))).expect("add");
                    } else {
                        snapshot.assume(&pod(&mut rng, &name, None), &target).expect("assume");
                    }
                    placed.push(format!("uid-{name}"));
                    "add"
                }
                5..=6 if !placed.is_empty() => {
                    let key = placed.swap_remove(rng.below(placed.len()));
                    snapshot.remove_pod(&key).expect("remove");
                    "remove"
                }
                7..=8 => {
                    let target = names[rng.below(names.len())].clone();
                    snapshot.upsert_node(node(&mut rng, &target)).expect("relabel");
                    "relabel"
                }
                9 if names.len() > 2 => {
                    let target = names.swap_remove(rng.below(names.len()));
                    for pod in snapshot.remove_node(&target).expect("remove node") {
                        placed.retain(|key| *key != pod.key);
                    }
                    "remove node"
                }
                10 => {
                    let name = format!("n{seed}-{step}");
                    snapshot.upsert_node(node(&mut rng, &name)).expect("node");
                    names.push(name);
                    "add node"
                }
                _ => {
                    // A dry run's copy of a node with one pod fewer and one more, put in place.
                    let target = &names[rng.below(names.len())];
                    let mut copy = snapshot.get(target).expect("node").clone();
                    if let Some(first) = copy.pods().first().map(|p| p.key.clone()) {
                        copy.remove_pod(&first);
                        placed.retain(|key| *key != first);
                    }
                    let name = format!("q{seed}-{step}");
                    let info = PodInfo::new(pod(&mut rng, &name, Some(target))).expect("pod");
                    copy.add_pod(Arc::new(info));
                    placed.push(format!("uid-{name}"));
                    snapshot.set_node(&copy).expect("set node");
                    "set node"
                }
            };
            check_counts(&snapshot, &queries, &format!("seed {seed} step {step} ({what})"));
        }
    }
}

#[test]
fn decisions_on_a_kept_snapshot_equal_decisions_on_a_fresh_one() {
    let profile = Profile::default_provider();
    for seed in 100..106 {
        let mut rng = SplitMix64::new(seed);
        let names: Vec<String> = (0..8).map(|i| format!("n{i}")).collect();
        let nodes: Vec<Node> = names.iter().map(|name| node(&mut rng, name)).collect();
        let mut kept = Snapshot::build(nodes, Vec::new()).expect("snapshot");
        let mut engine = Engine::new(&profile, 1).expect("engine");
        for step in 0..60 {
            let incoming = pod(&mut rng, &format!("p{step}"), None);
            // Asked on the kept snapshot first, so that its counts are kept and then updated by the placements.
            let decision = engine.schedule(&kept, &incoming).expect("schedule");
            let nodes: Vec<Node> = kept.list().map(|n| (*n.to_node()).clone()).collect();
            let pods: Vec<Pod> = kept
                .list()
                .flat_map(|n| n.pods().iter().map(|p| (*p.to_pod()).clone()))
                .collect();
            let fresh = Snapshot::build(nodes, pods).expect("fresh");
            let expected = Engine::new(&profile, 1)
                .expect("engine")
                .schedule(&fresh, &incoming)
                .expect("schedule");
            for result in &expected.nodes {
                let got = decision.node(&result.node).expect("node evaluated");
                assert_eq!(
                    got.rejection, result.rejection,
                    "seed {seed} step {step} {}",
                    result.node
                );
                assert_eq!(got.scores, result.scores, "seed {seed} step {step} {}", result.node);
            }
            if let Some(node) = decision.chosen() {
                let node = node.to_string();
                kept.assume(&incoming, &node).expect("assume");
            }
            if step % 7 == 6 {
                let victim = kept.list().flat_map(|n| n.pods()).next().map(|p| p.key.clone());
                if let Some(key) = victim {
                    kept.remove_pod(&key).expect("remove");
                }
            }
        }
    }
}
