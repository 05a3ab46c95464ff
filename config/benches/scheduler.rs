//! Scheduling engine throughput: decisions per second for one pause pod (100m / 500Mi) against 500 and 5,000
//! nodes of scheduler_perf's shape (4 CPU / 32Gi / 110 pods), DefaultProvider's plugins, adaptive
//! percentageOfNodesToScore and 100 %. Divan prints time per decision, decisions/s and allocations per decision.

use std::collections::BTreeMap;

use divan::Bencher;
use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ruleplane_config::scheduler::engine::{Engine, Profile, Snapshot};

// Counts allocations per decision beside the time (divan prints alloc count and bytes per iteration).
#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

fn quantities(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect(),
    )
}

fn nodes(count: usize) -> Snapshot {
    let nodes = (0..count).map(|i| Node {
        metadata: ObjectMeta {
            name: Some(format!("node-{i}")),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), format!("node-{i}")),
                ("topology.kubernetes.io/zone".to_string(), format!("zone-{}", i % 3)),
            ])),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            allocatable: quantities(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    });
    Snapshot::build(nodes.collect(), Vec::new()).expect("snapshot")
}

fn pause_pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("pause".into()),
            namespace: Some("default".into()),
            uid: Some("uid-pause".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "pause".into(),
                resources: Some(ResourceRequirements {
                    requests: quantities(&[("cpu", "100m"), ("memory", "500Mi")]),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn bench_decisions(bencher: Bencher, node_count: usize, profile: Profile) {
    let snapshot = nodes(node_count);
    let pod = pause_pod();
    let mut engine = Engine::new(&profile, 1).expect("profile");
    bencher
        .counter(divan::counter::ItemsCount::new(1usize))
        .bench_local(|| engine.schedule(&snapshot, divan::black_box(&pod)).expect("schedule"));
}

#[divan::bench(args = [500, 5000], sample_count = 20)]
fn decision_default_provider_adaptive(bencher: Bencher, node_count: usize) {
    bench_decisions(bencher, node_count, Profile::default_provider());
}

#[divan::bench(args = [500, 5000], sample_count = 20)]
fn decision_default_provider_all_nodes(bencher: Bencher, node_count: usize) {
    let mut profile = Profile::default_provider();
    profile.percentage_of_nodes_to_score = 100;
    bench_decisions(bencher, node_count, profile);
}
