//! The framework: how many nodes are examined, the rotating start index, tie-breaking, presets and profile errors.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::harness::{TestNode, TestPod};
use crate::scheduler::engine::args::{ResourceSpec, ScoringStrategy, ScoringStrategyType};
use crate::scheduler::engine::{
    Engine, FilterEntry, FilterPlugin, Profile, ProfileError, ScoreEntry, ScorePlugin, Snapshot, TieBreak, heap_top,
    num_feasible_nodes_to_find,
};

fn nodes(count: usize, cordoned: impl Fn(usize) -> bool) -> Vec<Node> {
    (0..count)
        .map(|i| {
            let yaml = format!(
                "{{name: n{i:03}, unschedulable: {}, allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}}}",
                cordoned(i)
            );
            serde_saphyr::from_str::<TestNode>(&yaml)
                .map(|n| n.to_node())
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

fn pod(name: &str) -> Pod {
    serde_saphyr::from_str::<TestPod>(&format!("{{name: {name}, requests: {{cpu: 100m}}}}"))
        .map(|p| p.to_pod())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn number_of_feasible_nodes_to_find() {
    // Adaptive: all below 100 nodes; else max(5, 50 - N/125) percent, at least 100.
    assert_eq!(num_feasible_nodes_to_find(0, 50), 50);
    assert_eq!(num_feasible_nodes_to_find(0, 99), 99);
    assert_eq!(num_feasible_nodes_to_find(0, 100), 100);
    assert_eq!(
        num_feasible_nodes_to_find(0, 150),
        100,
        "48% of 150 is 72, raised to 100"
    );
    assert_eq!(num_feasible_nodes_to_find(0, 500), 230, "46% of 500");
    assert_eq!(num_feasible_nodes_to_find(0, 1000), 420, "42% of 1000");
    assert_eq!(num_feasible_nodes_to_find(0, 5000), 500, "10% of 5000");
    assert_eq!(num_feasible_nodes_to_find(0, 6000), 300, "50 - 48 = 2% is raised to 5%");
    assert_eq!(num_feasible_nodes_to_find(0, 20000), 1000, "5%");
    // Fixed percentages.
    assert_eq!(num_feasible_nodes_to_find(10, 500), 100, "50, raised to 100");
    assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
    assert_eq!(num_feasible_nodes_to_find(100, 5000), 5000);
    assert_eq!(num_feasible_nodes_to_find(30, 80), 80, "below 100 nodes every node");
}

#[test]
fn the_start_index_rotates_by_the_nodes_processed() {
    let snapshot = Snapshot::build(nodes(300, |_| false), vec![]).unwrap();
    let mut engine = Engine::new(&Profile::default_provider(), 1).unwrap();
    // 300 nodes: 50 - 300/125 = 48% = 144 feasible nodes wanted.
    let first = engine.schedule(&snapshot, &pod("a")).unwrap();
    assert_eq!((first.evaluated_nodes, first.feasible_nodes), (144, 144));
    assert_eq!(&*first.nodes[0].node, "n000");
    assert_eq!(engine.next_start_node_index(), 144);
    let second = engine.schedule(&snapshot, &pod("b")).unwrap();
    assert_eq!(&*second.nodes[0].node, "n144");
    assert_eq!(engine.next_start_node_index(), 288);
    let third = engine.schedule(&snapshot, &pod("c")).unwrap();
    assert_eq!(&*third.nodes[0].node, "n288");
    assert_eq!(&*third.nodes[12].node, "n000", "the window wraps around");
    assert_eq!(engine.next_start_node_index(), 132);
}

#[test]
fn rejected_nodes_past_the_last_wanted_fit_count_as_processed() {
    // As with one filtering worker: after the 144th fit, nodes are checked until the next fit, which stops the
    // search; the rejected ones in between are processed (and reported), the extra fit is not.
    let snapshot = Snapshot::build(nodes(300, |i| (144..150).contains(&i) || i < 10), vec![]).unwrap();
    let mut engine = Engine::new(&Profile::default_provider(), 1).unwrap();
    let decision = engine.schedule(&snapshot, &pod("a")).unwrap();
    assert_eq!(decision.feasible_nodes, 144);
    assert_eq!(
        decision.evaluated_nodes,
        144 + 10 + 6,
        "10 rejected before, 6 after the last wanted fit"
    );
    assert_eq!(engine.next_start_node_index(), 160);
    assert!(
        decision.node("n160").is_none(),
        "the extra fit is not part of the decision"
    );
}

#[test]
fn a_fixed_percentage_limits_the_search() {
    let snapshot = Snapshot::build(nodes(500, |_| false), vec![]).unwrap();
    let profile = Profile {
        percentage_of_nodes_to_score: 30,
        ..Profile::default_provider()
    };
    let mut engine = Engine::new(&profile, 1).unwrap();
    assert_eq!(engine.schedule(&snapshot, &pod("a")).unwrap().evaluated_nodes, 150);
    assert_eq!(engine.next_start_node_index(), 150);
}

#[test]
fn without_score_plugins_the_first_fit_is_taken() {
    let snapshot = Snapshot::build(nodes(5, |i| i == 0), vec![]).unwrap();
    let profile = Profile {
        scores: Vec::new(),
        ..Profile::default_provider()
    };
    let mut engine = Engine::new(&profile, 1).unwrap();
    let decision = engine.schedule(&snapshot, &pod("a")).unwrap();
    assert_eq!(decision.chosen(), Some("n001"));
    assert_eq!(decision.evaluated_nodes, 2);
    assert!(
        decision.nodes.iter().all(|n| n.scores.is_empty()),
        "a single fit is not scored"
    );
    assert_eq!(engine.next_start_node_index(), 2);
}

#[test]
fn ties_are_broken_by_the_seeded_generator() {
    let snapshot = Snapshot::build(nodes(4, |_| false), vec![]).unwrap();
    let run = |seed: u64| -> Vec<String> {
        let mut engine = Engine::new(&Profile::default_provider(), seed).unwrap();
        (0..40)
            .map(|i| {
                engine
                    .schedule(&snapshot, &pod(&format!("p{i}")))
                    .unwrap()
                    .chosen()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let (first, again, other) = (run(42), run(42), run(43));
    assert_eq!(first, again, "same seed, same choices");
    assert_ne!(first, other, "another seed, other choices");
    let chosen: BTreeSet<&str> = first.iter().map(String::as_str).collect();
    assert_eq!(chosen.len(), 4, "every tied node gets picked: {first:?}");
}

#[test]
fn heap_order_picks_like_kube_scheduler_with_one_worker() {
    assert_eq!(heap_top(&[5, 7, 7, 3]), 1);
    assert_eq!(heap_top(&[7, 5, 7]), 0);
    assert_eq!(heap_top(&[1, 7, 2, 7]), 1);
    assert_eq!(heap_top(&[1, 2, 9, 3, 4, 9, 9]), 2);
    // Sifting down a parent can bring a later tie to the top: index 3 beats index 2.
    assert_eq!(heap_top(&[1, 5, 9, 9, 9]), 3);
    assert_eq!(heap_top(&[3, 3, 3]), 0);
    let snapshot = Snapshot::build(nodes(3, |_| false), vec![]).unwrap();
    let profile = Profile {
        tie_break: TieBreak::HeapOrder,
        ..Profile::default_provider()
    };
    let mut engine = Engine::new(&profile, 1).unwrap();
    assert_eq!(engine.schedule(&snapshot, &pod("a")).unwrap().chosen(), Some("n000"));
}

#[test]
fn presets_match_the_default_plugin_set() {
    let profile = Profile::default_provider();
    let filters: Vec<&str> = profile
        .filters
        .iter()
        .map(|f| match f {
            FilterEntry::Plugin(p) => p.as_str(),
            FilterEntry::NodeValue(_) => "NodeValue",
        })
        .collect();
    assert_eq!(
        filters,
        [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            // From v1.36; the engine leaves it out for v1.35 (tests/versions.rs).
            "NodeDeclaredFeatures"
        ]
    );
    let scores: Vec<(&str, i64)> = profile
        .scores
        .iter()
        .filter_map(|s| match s {
            ScoreEntry::Plugin { plugin, weight } => Some((plugin.as_str(), *weight)),
            ScoreEntry::NodeLabel(_) => None,
        })
        .collect();
    assert_eq!(
        scores,
        [
            ("TaintToleration", 3),
            ("NodeAffinity", 2),
            ("NodeResourcesFit", 1),
            // Scores from v1.37 (StorageCapacityScoring).
            ("VolumeBinding", 1),
            ("PodTopologySpread", 2),
            ("InterPodAffinity", 2),
            ("NodeResourcesBalancedAllocation", 1),
            ("ImageLocality", 1)
        ]
    );
    assert_eq!(
        profile.args.node_resources_fit.defaulted().strategy(),
        ScoringStrategyType::LeastAllocated
    );
    let autoscaler = Profile::cluster_autoscaler_provider();
    assert_eq!(autoscaler.filters, profile.filters);
    assert_eq!(
        autoscaler.args.node_resources_fit.scoring_strategy,
        Some(ScoringStrategy {
            type_: Some(ScoringStrategyType::MostAllocated),
            resources: vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)],
            requested_to_capacity_ratio: None,
        })
    );
    assert!(Engine::new(&profile, 0).is_ok() && Engine::new(&autoscaler, 0).is_ok());
}

#[test]
fn plugin_names_are_complete_and_round_trip() {
    assert_eq!(FilterPlugin::ALL.len(), 15);
    assert_eq!(ScorePlugin::ALL.len(), 10);
    for plugin in FilterPlugin::ALL {
        assert_eq!(FilterPlugin::from_name(plugin.as_str()), Some(*plugin));
    }
    for plugin in ScorePlugin::ALL {
        assert_eq!(ScorePlugin::from_name(plugin.as_str()), Some(*plugin));
    }
    assert!(!FilterPlugin::DynamicResources.is_implemented() && FilterPlugin::NodeValue.is_implemented());
    assert_eq!(ScorePlugin::TaintToleration.default_weight(), 3);
}

#[test]
fn profile_errors() {
    let base = Profile::default_provider;
    let with_filter = |plugin| Profile {
        filters: vec![FilterEntry::Plugin(plugin)],
        ..base()
    };
    let err = |profile: Profile| Engine::new(&profile, 0).unwrap_err();
    assert_eq!(
        err(with_filter(FilterPlugin::DynamicResources)),
        ProfileError::NotImplemented {
            plugin: "DynamicResources"
        }
    );
    assert_eq!(
        err(with_filter(FilterPlugin::NodeValue)),
        ProfileError::MissingArgs { plugin: "NodeValue" }
    );
    let mut duplicated = base();
    duplicated.filters.push(FilterEntry::Plugin(FilterPlugin::NodeName));
    assert_eq!(
        err(duplicated).to_string(),
        "plugin name NodeName is used twice in the filter list"
    );
    let negative = Profile {
        scores: vec![ScoreEntry::Plugin {
            plugin: ScorePlugin::ImageLocality,
            weight: -1,
        }],
        ..base()
    };
    assert_eq!(
        err(negative).to_string(),
        "score plugin ImageLocality has weight -1; weights must be positive"
    );
    let huge = Profile {
        scores: vec![ScoreEntry::Plugin {
            plugin: ScorePlugin::ImageLocality,
            weight: i64::MAX / 10,
        }],
        ..base()
    };
    assert_eq!(err(huge), ProfileError::WeightOverflow);
    let percentage = Profile {
        percentage_of_nodes_to_score: 101,
        ..base()
    };
    assert_eq!(
        err(percentage).to_string(),
        "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"
    );
    let mut bad_args = base();
    bad_args.args.inter_pod_affinity.hard_pod_affinity_weight = Some(101);
    assert_eq!(
        err(bad_args).to_string(),
        "invalid args of plugin InterPodAffinity: hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"
    );
    // Weight 0 means 1, as in kube-scheduler.
    let zero = Profile {
        scores: vec![ScoreEntry::Plugin {
            plugin: ScorePlugin::NodeResourcesFit,
            weight: 0,
        }],
        ..base()
    };
    let snapshot = Snapshot::build(nodes(2, |_| false), vec![]).unwrap();
    let decision = Engine::new(&zero, 0).unwrap().schedule(&snapshot, &pod("a")).unwrap();
    assert_eq!(decision.nodes[0].scores[0].weight, 1);
}

#[test]
fn without_the_score_breakdown_a_decision_has_the_same_verdicts_and_totals() {
    let snapshot = Snapshot::build(nodes(12, |i| i % 4 == 0), Vec::new()).unwrap();
    let mut full = Engine::new(&Profile::default_provider(), 7).unwrap();
    let mut lean = Engine::new(&Profile::default_provider(), 7).unwrap();
    lean.set_score_breakdown(false);
    let (a, b) = (
        full.schedule(&snapshot, &pod("p")).unwrap(),
        lean.schedule(&snapshot, &pod("p")).unwrap(),
    );
    assert_eq!(a.chosen(), b.chosen());
    assert_eq!(a.nodes.len(), b.nodes.len());
    for (x, y) in a.nodes.iter().zip(&b.nodes) {
        assert_eq!((&x.node, &x.rejection, x.total), (&y.node, &y.rejection, y.total));
        assert!(y.scores.is_empty());
    }
    assert!(
        a.nodes.iter().any(|n| !n.scores.is_empty()),
        "the full decision has the breakdown"
    );
}
