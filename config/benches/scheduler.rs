//! Scheduling engine throughput: decisions per second for one pause pod (100m / 500Mi) against 500 and 5,000
//! nodes of scheduler_perf's shape (4 CPU / 32Gi / 110 pods), DefaultProvider's plugins, adaptive
//! percentageOfNodesToScore and 100 %; and the preemption decision for a high-priority pod on nodes full of
//! low-priority ones; and scheduler_perf's pod (anti-)affinity and spreading shapes at 5,000 nodes. Divan prints
//! time per decision, decisions/s and allocations per decision.

use std::collections::BTreeMap;

use divan::Bencher;
use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeStatus, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec,
    ResourceRequirements, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use ruleplane_config::scheduler::engine::{Engine, Outcome, Profile, Snapshot};

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

/// Every node full with four 1-CPU pods of priority 0, and a pod (1 CPU, priority 100) that fits nowhere.
fn full_nodes(node_count: usize) -> (Snapshot, Pod) {
    let mut snapshot = nodes(node_count);
    let names: Vec<String> = snapshot.list().map(|n| n.name().to_string()).collect();
    for (i, node) in names.iter().enumerate() {
        for j in 0..4 {
            let mut low = pause_pod();
            low.metadata.name = Some(format!("low-{i}-{j}"));
            low.metadata.uid = Some(format!("uid-low-{i}-{j}"));
            let spec = low.spec.as_mut().expect("spec");
            spec.node_name = Some(node.clone());
            spec.priority = Some(0);
            spec.containers[0].resources = Some(ResourceRequirements {
                requests: quantities(&[("cpu", "1")]),
                ..ResourceRequirements::default()
            });
            snapshot.add_pod(low).expect("low pod");
        }
    }
    let mut pod = pause_pod();
    let spec = pod.spec.as_mut().expect("spec");
    spec.priority = Some(100);
    spec.containers[0].resources = Some(ResourceRequirements {
        requests: quantities(&[("cpu", "1")]),
        ..ResourceRequirements::default()
    });
    (snapshot, pod)
}

fn bench_unschedulable(bencher: Bencher, node_count: usize, preemption: bool) {
    let (snapshot, pod) = full_nodes(node_count);
    bench_pod(bencher, snapshot, pod, preemption);
}

fn bench_pod(bencher: Bencher, snapshot: Snapshot, pod: Pod, preemption: bool) {
    let mut engine = Engine::new(&Profile::default_provider(), 1).expect("profile");
    if preemption {
        engine.enable_preemption();
    }
    bencher
        .counter(divan::counter::ItemsCount::new(1usize))
        .bench_local(|| {
            let decision = engine.schedule(&snapshot, divan::black_box(&pod)).expect("schedule");
            assert!(matches!(decision.outcome, Outcome::Unschedulable { .. }));
            assert_eq!(decision.post_filter().is_some(), preemption);
            decision
        });
}

/// The failed cycle alone: every node filtered and rejected.
#[divan::bench(args = [500, 5000], sample_count = 20)]
fn decision_unschedulable(bencher: Bencher, node_count: usize) {
    bench_unschedulable(bencher, node_count, false);
}

/// The same cycle followed by the preemption decision: every node is a candidate, the dry run examines
/// max(10 %, 100) of them and picks one.
#[divan::bench(args = [500, 5000], sample_count = 20)]
fn decision_with_preemption(bencher: Bencher, node_count: usize) {
    bench_unschedulable(bencher, node_count, true);
}

/// As `decision_with_preemption`, for a pod with required anti-affinity to its own kind: InterPodAffinity's
/// state counts pods, so every dry-run check runs PreFilter again over the cluster.
#[divan::bench(args = [500, 5000], sample_count = 10)]
fn decision_with_preemption_anti_affinity(bencher: Bencher, node_count: usize) {
    let (snapshot, mut pod) = full_nodes(node_count);
    pod.metadata.labels = Some(BTreeMap::from([("app".to_string(), "urgent".to_string())]));
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "urgent".to_string())])),
            ..LabelSelector::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..PodAffinityTerm::default()
    };
    pod.spec.as_mut().expect("spec").affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    });
    bench_pod(bencher, snapshot, pod, true);
}

/// scheduler_perf's affinity and spreading workloads: `existing` pods like `pod` already placed round robin
/// (one per node, as kube-scheduler places the anti-affinity ones), then one more decision for `pod`.
fn bench_shape(bencher: Bencher, node_count: usize, existing: usize, pod: Pod) {
    let mut snapshot = nodes(node_count);
    let names: Vec<String> = snapshot.list().map(|n| n.name().to_string()).collect();
    for i in 0..existing {
        let mut placed = pod.clone();
        placed.metadata.name = Some(format!("placed-{i}"));
        placed.metadata.uid = Some(format!("uid-placed-{i}"));
        placed.spec.as_mut().expect("spec").node_name = Some(names[i % names.len()].clone());
        snapshot.add_pod(placed).expect("placed pod");
    }
    let mut engine = Engine::new(&Profile::default_provider(), 1).expect("profile");
    bencher
        .counter(divan::counter::ItemsCount::new(1usize))
        .bench_local(|| {
            let decision = engine.schedule(&snapshot, divan::black_box(&pod)).expect("schedule");
            assert!(decision.chosen().is_some(), "placed");
            decision
        });
}

fn colored_pod(color: &str) -> Pod {
    let mut pod = pause_pod();
    pod.metadata.labels = Some(BTreeMap::from([("color".to_string(), color.to_string())]));
    pod
}

fn term(color: &str, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("color".to_string(), color.to_string())])),
            ..LabelSelector::default()
        }),
        topology_key: topology_key.into(),
        ..PodAffinityTerm::default()
    }
}

/// SchedulingPodAntiAffinity: required anti-affinity per hostname to its own kind, 1,000 placed.
#[divan::bench(args = [5000], sample_count = 20)]
fn decision_required_anti_affinity(bencher: Bencher, node_count: usize) {
    let mut pod = colored_pod("green");
    pod.spec.as_mut().expect("spec").affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term("green", "kubernetes.io/hostname")]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    });
    bench_shape(bencher, node_count, 1000, pod);
}

/// SchedulingPodAffinity: required affinity per zone to its own kind, 2,000 placed.
#[divan::bench(args = [5000], sample_count = 20)]
fn decision_required_affinity(bencher: Bencher, node_count: usize) {
    let mut pod = colored_pod("blue");
    pod.spec.as_mut().expect("spec").affinity = Some(Affinity {
        pod_affinity: Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term(
                "blue",
                "topology.kubernetes.io/zone",
            )]),
            ..PodAffinity::default()
        }),
        ..Affinity::default()
    });
    bench_shape(bencher, node_count, 2000, pod);
}

/// TopologySpreading: maxSkew 5 over the zones, DoNotSchedule, 2,000 placed.
#[divan::bench(args = [5000], sample_count = 20)]
fn decision_topology_spread(bencher: Bencher, node_count: usize) {
    let mut pod = colored_pod("blue");
    pod.spec.as_mut().expect("spec").topology_spread_constraints = Some(vec![TopologySpreadConstraint {
        max_skew: 5,
        topology_key: "topology.kubernetes.io/zone".into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("color".to_string(), "blue".to_string())])),
            ..LabelSelector::default()
        }),
        ..TopologySpreadConstraint::default()
    }]);
    bench_shape(bencher, node_count, 2000, pod);
}
