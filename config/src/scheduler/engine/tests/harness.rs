//! The fixture format and runner: compact nodes and pods, a profile, expectations on the decision.

// The fixture format and runner: compact nodes and pods expanded to Kubernetes objects, a profile built from a preset
// plus overrides, and expectations checked against the engine's decision.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerImage, Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus, ResourceRequirements, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use crate::scheduler::engine::args::{
    InterPodAffinityArgs, NodeAffinityArgs, NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs,
    PodTopologySpreadArgs,
};
use crate::scheduler::engine::declarative::{NodeLabelArgs, NodeValueArgs};
use crate::scheduler::engine::features::Feature;
use crate::scheduler::engine::{
    Decision, Engine, FilterEntry, FilterPlugin, Outcome, Profile, ScoreEntry, ScorePlugin, Snapshot, TieBreak,
    Workloads,
};

/// A fixture file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    cases: Vec<Case>,
}

/// One scheduling decision and what it must produce.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    pub name: String,
    #[serde(default)]
    pub profile: TestProfile,
    #[serde(default)]
    pub nodes: Vec<TestNode>,
    #[serde(default)]
    pub pods: Vec<TestPod>,
    #[serde(default)]
    pub namespaces: Option<BTreeMap<String, BTreeMap<String, String>>>,
    #[serde(default)]
    pub services: Vec<k8s_openapi::api::core::v1::Service>,
    #[serde(default)]
    pub replica_sets: Vec<k8s_openapi::api::apps::v1::ReplicaSet>,
    pub pod: TestPod,
    pub expect: Expect,
}

/// A preset plus overrides.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestProfile {
    /// `DefaultProvider` (default), `ClusterAutoscalerProvider` or `none`.
    pub preset: Option<String>,
    pub filters: Option<Vec<String>>,
    pub scores: Option<Vec<TestScore>>,
    #[serde(default)]
    pub node_values: Vec<NodeValueArgs>,
    #[serde(default)]
    pub node_labels: Vec<NodeLabelArgs>,
    pub node_resources_fit: Option<NodeResourcesFitArgs>,
    pub node_resources_balanced_allocation: Option<NodeResourcesBalancedAllocationArgs>,
    pub node_affinity: Option<NodeAffinityArgs>,
    pub pod_topology_spread: Option<PodTopologySpreadArgs>,
    pub inter_pod_affinity: Option<InterPodAffinityArgs>,
    pub percentage_of_nodes_to_score: Option<u8>,
    #[serde(default)]
    pub ignored_features: Vec<Feature>,
    pub tie_break: Option<TieBreak>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestScore {
    pub name: String,
    pub weight: i64,
}

/// A node: name, allocatable, labels, taints, cordon flag, images.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestNode {
    pub name: String,
    #[serde(default)]
    pub allocatable: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub unschedulable: bool,
    #[serde(default)]
    pub images: Vec<ContainerImage>,
}

/// A pod: one container `c` with `requests` unless `spec` is given.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestPod {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub requests: BTreeMap<String, String>,
    #[serde(default)]
    pub spec: Option<PodSpec>,
    #[serde(default)]
    pub status: Option<PodStatus>,
    #[serde(default)]
    pub metadata: Option<ObjectMeta>,
}

/// Expectations; absent fields are not checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// The chosen node.
    pub node: Option<String>,
    /// One of these nodes (for random tie-breaks).
    pub node_in: Option<Vec<String>>,
    /// The failure message.
    pub message: Option<String>,
    /// `scheduled`, `unschedulable`, `gated` or `error`.
    pub outcome: Option<String>,
    /// The unschedulable plugins.
    pub plugins: Option<Vec<String>>,
    /// Per node: `pass`, or the rejection.
    #[serde(default)]
    pub filters: BTreeMap<String, ExpectFilter>,
    /// Per node, per plugin: `[raw, normalized]`.
    #[serde(default)]
    pub scores: BTreeMap<String, BTreeMap<String, [i64; 2]>>,
    /// Per node: the total.
    #[serde(default)]
    pub totals: BTreeMap<String, i64>,
    pub skipped_filters: Option<Vec<String>>,
    pub skipped_scores: Option<Vec<String>>,
    pub evaluated_nodes: Option<usize>,
    pub feasible_nodes: Option<usize>,
    /// Nodes that must not appear in the decision (not evaluated).
    #[serde(default)]
    pub not_evaluated: Vec<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum ExpectFilter {
    Pass(String),
    Rejected {
        plugin: String,
        code: String,
        reasons: Vec<String>,
    },
}

fn quantities(map: &BTreeMap<String, String>) -> Option<BTreeMap<String, Quantity>> {
    (!map.is_empty()).then(|| map.iter().map(|(k, v)| (k.clone(), Quantity(v.clone()))).collect())
}

fn non_empty(map: &BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!map.is_empty()).then(|| map.clone())
}

impl TestNode {
    pub fn to_node(&self) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: non_empty(&self.labels),
                annotations: non_empty(&self.annotations),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                taints: (!self.taints.is_empty()).then(|| self.taints.clone()),
                unschedulable: self.unschedulable.then_some(true),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                allocatable: quantities(&self.allocatable),
                images: (!self.images.is_empty()).then(|| self.images.clone()),
                ..NodeStatus::default()
            }),
        }
    }
}

impl TestPod {
    pub fn to_pod(&self) -> Pod {
        let mut spec = self.spec.clone().unwrap_or_else(|| PodSpec {
            containers: vec![Container {
                name: "c".to_string(),
                image: Some("pause:3.10".to_string()),
                ..Container::default()
            }],
            ..PodSpec::default()
        });
        if !self.requests.is_empty()
            && let Some(container) = spec.containers.first_mut()
        {
            container.resources = Some(ResourceRequirements {
                requests: quantities(&self.requests),
                ..ResourceRequirements::default()
            });
        }
        if let Some(node) = &self.node {
            spec.node_name = Some(node.clone());
        }
        let mut metadata = self.metadata.clone().unwrap_or_default();
        metadata.name = Some(self.name.clone());
        metadata.namespace = Some(self.namespace.clone().unwrap_or_else(|| "default".to_string()));
        metadata.uid = self.uid.clone().or(metadata.uid);
        if !self.labels.is_empty() {
            metadata.labels = Some(self.labels.clone());
        }
        Pod {
            metadata,
            spec: Some(spec),
            status: self.status.clone(),
        }
    }
}

impl TestProfile {
    pub fn build(&self) -> Profile {
        let mut profile = match self.preset.as_deref() {
            None | Some("DefaultProvider") => Profile::default_provider(),
            Some("ClusterAutoscalerProvider") => Profile::cluster_autoscaler_provider(),
            Some("none") => Profile {
                filters: Vec::new(),
                scores: Vec::new(),
                ..Profile::default_provider()
            },
            Some(other) => panic!("unknown preset {other}"),
        };
        if let Some(filters) = &self.filters {
            profile.filters = filters
                .iter()
                .map(|name| {
                    FilterEntry::Plugin(FilterPlugin::from_name(name).unwrap_or_else(|| panic!("filter {name}")))
                })
                .collect();
        }
        profile
            .filters
            .extend(self.node_values.iter().cloned().map(FilterEntry::NodeValue));
        if let Some(scores) = &self.scores {
            profile.scores = scores
                .iter()
                .map(|s| ScoreEntry::Plugin {
                    plugin: ScorePlugin::from_name(&s.name).unwrap_or_else(|| panic!("score {}", s.name)),
                    weight: s.weight,
                })
                .collect();
        }
        profile
            .scores
            .extend(self.node_labels.iter().cloned().map(ScoreEntry::NodeLabel));
        let args = &mut profile.args;
        if let Some(a) = &self.node_resources_fit {
            args.node_resources_fit = a.clone();
        }
        if let Some(a) = &self.node_resources_balanced_allocation {
            args.node_resources_balanced_allocation = a.clone();
        }
        if let Some(a) = &self.node_affinity {
            args.node_affinity = a.clone();
        }
        if let Some(a) = &self.pod_topology_spread {
            args.pod_topology_spread = a.clone();
        }
        if let Some(a) = &self.inter_pod_affinity {
            args.inter_pod_affinity = a.clone();
        }
        if let Some(p) = self.percentage_of_nodes_to_score {
            profile.percentage_of_nodes_to_score = p;
        }
        profile.ignored_features = self.ignored_features.iter().copied().collect();
        if let Some(t) = self.tie_break {
            profile.tie_break = t;
        }
        profile
    }
}

impl Case {
    /// The snapshot of the case.
    pub fn snapshot(&self) -> Snapshot {
        let nodes = self.nodes.iter().map(TestNode::to_node).collect();
        let pods = self.pods.iter().map(TestPod::to_pod).collect();
        let mut snapshot = Snapshot::build(nodes, pods).unwrap_or_else(|e| panic!("{}: snapshot: {e}", self.name));
        if let Some(namespaces) = &self.namespaces {
            snapshot.set_namespaces(namespaces.clone());
        }
        snapshot.set_workloads(Workloads {
            services: self.services.clone(),
            replica_sets: self.replica_sets.clone(),
            ..Workloads::default()
        });
        snapshot
    }

    /// Runs the case with seed 1.
    pub fn decide(&self) -> Decision {
        let mut engine =
            Engine::new(&self.profile.build(), 1).unwrap_or_else(|e| panic!("{}: profile: {e}", self.name));
        engine
            .schedule(&self.snapshot(), &self.pod.to_pod())
            .unwrap_or_else(|e| panic!("{}: schedule: {e}", self.name))
    }

    /// Differences between the decision and the expectations.
    pub fn check(&self, decision: &Decision) -> Vec<String> {
        let problems = std::cell::RefCell::new(Vec::new());
        let expect_eq = |what: &str, expected: String, actual: String| {
            if expected != actual {
                problems
                    .borrow_mut()
                    .push(format!("{what}: expected {expected:?}, got {actual:?}"));
            }
        };
        let e = &self.expect;
        if let Some(node) = &e.node {
            expect_eq("node", node.clone(), decision.chosen().unwrap_or("<none>").to_string());
        }
        if let Some(nodes) = &e.node_in {
            let chosen = decision.chosen().unwrap_or("<none>").to_string();
            if !nodes.contains(&chosen) {
                problems
                    .borrow_mut()
                    .push(format!("node: expected one of {nodes:?}, got {chosen}"));
            }
        }
        if let Some(message) = &e.message {
            expect_eq(
                "message",
                message.clone(),
                decision.message().unwrap_or("<none>").to_string(),
            );
        }
        if let Some(outcome) = &e.outcome {
            let actual = match &decision.outcome {
                Outcome::Scheduled { .. } => "scheduled",
                Outcome::Unschedulable { .. } => "unschedulable",
                Outcome::Gated { .. } => "gated",
                Outcome::Error { .. } => "error",
            };
            expect_eq("outcome", outcome.clone(), actual.to_string());
        }
        if let Some(plugins) = &e.plugins {
            let actual: BTreeSet<String> = match &decision.outcome {
                Outcome::Unschedulable { plugins, .. } => plugins.iter().map(|p| p.to_string()).collect(),
                _ => BTreeSet::new(),
            };
            expect_eq(
                "plugins",
                format!("{:?}", plugins.iter().collect::<BTreeSet<_>>()),
                format!("{actual:?}"),
            );
        }
        for (node, expected) in &e.filters {
            let actual = match decision.node(node) {
                None => "<not evaluated>".to_string(),
                Some(result) => match &result.rejection {
                    None => "pass".to_string(),
                    Some(r) => format!("{} {} {:?}", r.plugin, r.code, r.reasons),
                },
            };
            let expected = match expected {
                ExpectFilter::Pass(s) => s.clone(),
                ExpectFilter::Rejected { plugin, code, reasons } => format!("{plugin} {code} {reasons:?}"),
            };
            expect_eq(&format!("filter {node}"), expected, actual);
        }
        for (node, plugins) in &e.scores {
            for (plugin, [raw, normalized]) in plugins {
                let actual = decision
                    .node(node)
                    .and_then(|n| n.score(plugin))
                    .map(|s| format!("[{}, {}]", s.raw, s.normalized))
                    .unwrap_or_else(|| "<no score>".to_string());
                expect_eq(
                    &format!("score {node} {plugin}"),
                    format!("[{raw}, {normalized}]"),
                    actual,
                );
            }
        }
        for (node, total) in &e.totals {
            let actual = decision.node(node).and_then(|n| n.total);
            expect_eq(
                &format!("total {node}"),
                format!("{:?}", Some(*total)),
                format!("{actual:?}"),
            );
        }
        let names = |list: &[std::sync::Arc<str>]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        if let Some(skipped) = &e.skipped_filters {
            expect_eq(
                "skipped filters",
                format!("{skipped:?}"),
                format!("{:?}", names(&decision.skipped_filters)),
            );
        }
        if let Some(skipped) = &e.skipped_scores {
            expect_eq(
                "skipped scores",
                format!("{skipped:?}"),
                format!("{:?}", names(&decision.skipped_scores)),
            );
        }
        if let Some(n) = e.evaluated_nodes {
            expect_eq("evaluated nodes", n.to_string(), decision.evaluated_nodes.to_string());
        }
        if let Some(n) = e.feasible_nodes {
            expect_eq("feasible nodes", n.to_string(), decision.feasible_nodes.to_string());
        }
        for node in &e.not_evaluated {
            if decision.node(node).is_some() {
                problems.borrow_mut().push(format!("node {node} was evaluated"));
            }
        }
        problems.into_inner()
    }
}

/// Parses a fixture file.
pub fn load(text: &str) -> Vec<Case> {
    let fixture: Fixture = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("fixture does not parse: {e}"));
    fixture.cases
}

/// Runs every case of a fixture file and fails listing every mismatch.
pub fn run_fixture(text: &str) {
    let mut failures = Vec::new();
    let cases = load(text);
    assert!(!cases.is_empty(), "fixture without cases");
    for case in &cases {
        let decision = case.decide();
        for problem in case.check(&decision) {
            failures.push(format!("{}: {problem}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
