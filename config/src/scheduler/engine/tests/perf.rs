//! scheduler_perf's SchedulingBasic shape (nodes with 4 CPU / 32Gi / 110 pods, pause pods requesting 100m /
//! 500Mi), scheduled one after another: every pod placed, spread evenly, no node over capacity. Throughput is
//! measured by `cargo bench -p ruleplane-config --bench scheduler`, not here.

use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::scheduler::engine::{Engine, Profile, Snapshot};

fn quantity_map(pairs: &[(&str, &str)]) -> Option<std::collections::BTreeMap<String, Quantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect(),
    )
}

fn schedule_all(nodes: usize, pods: usize) -> Snapshot {
    let node_objects: Vec<Node> = (0..nodes)
        .map(|i| Node {
            metadata: ObjectMeta {
                name: Some(format!("node-{i}")),
                labels: Some(
                    [
                        ("kubernetes.io/hostname".to_string(), format!("node-{i}")),
                        ("topology.kubernetes.io/zone".to_string(), format!("zone-{}", i % 3)),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                allocatable: quantity_map(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        })
        .collect();
    let mut snapshot = Snapshot::build(node_objects, Vec::new()).expect("snapshot");
    let mut engine = Engine::new(&Profile::default_provider(), 1).expect("profile");
    for i in 0..pods {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(format!("pause-{i}")),
                namespace: Some("default".to_string()),
                uid: Some(format!("uid-{i}")),
                labels: Some([("app".to_string(), "pause".to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "pause".to_string(),
                    image: Some("pause:3.10".to_string()),
                    resources: Some(ResourceRequirements {
                        requests: quantity_map(&[("cpu", "100m"), ("memory", "500Mi")]),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let decision = engine.schedule(&snapshot, &pod).expect("schedule");
        let node = decision.chosen().expect("placed").to_string();
        snapshot.assume(&pod, &node).expect("assume");
    }
    snapshot
}

#[test]
fn pause_pods_are_all_placed_spread_evenly_and_never_over_capacity() {
    let snapshot = schedule_all(100, 1000);
    let counts: Vec<usize> = (0..100)
        .map(|i| snapshot.get(&format!("node-{i}")).map_or(0, |node| node.pods().len()))
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), 1000, "every pod placed once");
    let (min, max) = (counts.iter().min().copied(), counts.iter().max().copied());
    // LeastAllocated + BalancedAllocation spread identical pods evenly; 10 per node fits 4 CPU (100m each).
    assert_eq!((min, max), (Some(10), Some(10)), "{counts:?}");
}
