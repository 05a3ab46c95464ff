//! The `SchedulerPolicy` rule document: scheduler name, preset, filters, scores and kube-scheduler plugin args.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::args::{ResourceSpec, ScoringStrategyType};
use super::engine::declarative::NodeValueArgs;
use super::engine::features::Feature;
use super::engine::profile::PluginArgs;
use crate::common::RuleMetadata;
use crate::diagnostics::SourceLocation;

/// A scheduler: pods whose `spec.schedulerName` equals `schedulerName` are placed on nodes that pass every
/// filter, choosing the node with the highest weighted sum of scores (ties broken at random), exactly as
/// kube-scheduler v1.35 with the equivalent profile would.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "SchedulerPolicy")]
pub struct SchedulerPolicyRule {
    /// Always `ruleplane.dev/v1alpha1`.
    #[schemars(extend("const" = "ruleplane.dev/v1alpha1"))]
    pub api_version: String,
    /// Always `SchedulerPolicy`.
    #[schemars(extend("const" = "SchedulerPolicy"))]
    pub kind: String,
    /// Rule name.
    pub metadata: RuleMetadata,
    /// The policy.
    pub spec: SchedulerPolicySpec,
    /// Where the rule was written (not part of equality: moving a rule does not change it).
    #[serde(skip)]
    #[schemars(skip)]
    pub source: SourceLocation,
}

crate::common::rule_document!(SchedulerPolicyRule);

/// Which filters and scores decide placement, and their arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchedulerPolicySpec {
    /// The `spec.schedulerName` of the pods this scheduler places. Must be unique among policies, and must
    /// not be `default-scheduler`.
    #[schemars(length(min = 1))]
    pub scheduler_name: String,
    /// Named default set of filters, scores and args: `DefaultProvider` (kube-scheduler's default profile:
    /// LeastAllocated, spreading), `ClusterAutoscalerProvider` (the same with MostAllocated, bin-packing so
    /// nodes empty out), or `none`. `filters`/`scores`, when given, replace the preset's lists; `pluginArgs`
    /// and score shorthands replace the preset's args.
    #[serde(default)]
    pub algorithm_provider: AlgorithmProvider,
    /// Filter plugins (predicates) a node must pass; they run in kube-scheduler's order whatever the order
    /// written. A name (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
    /// NodeResourcesFit, VolumeRestrictions, VolumeZone, PodTopologySpread, InterPodAffinity, or a legacy predicate
    /// name such as GeneralPredicates), or a declarative `NodeValue` filter: `{name, jsonPath, values | min/max, reason}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<FilterSpec>>,
    /// Score plugins (priorities) with weights; the node score is Σ weight × normalised score (0–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Vec<ScoreSpec>>,
    /// kube-scheduler's v1 `pluginConfig` args, keyed by plugin name (`NodeResourcesFit`,
    /// `NodeResourcesBalancedAllocation`, `NodeAffinity`, `PodTopologySpread`, `InterPodAffinity`,
    /// `DefaultPreemption`), with the same field names, defaults and validation. `DefaultPreemption`'s args
    /// shape the preemption the scheduler carries out and `ruleplane simulate` reports.
    #[serde(default, skip_serializing_if = "PluginArgs::is_empty")]
    pub plugin_args: PluginArgs,
    /// Stop looking for feasible nodes after this percentage of the cluster (0–100). 0 (default) is
    /// kube-scheduler's adaptive rule: all nodes below 100, else max(5, 50 − nodes/125) percent, at
    /// least 100 nodes.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub percentage_of_nodes_to_score: u8,
    /// Pod features Ruleplane does not evaluate (volumes needing VolumeBinding, resource claims, …) that this
    /// policy ignores instead of refusing such pods with an explicit reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_features: Vec<Feature>,
    /// Ruleplane's preemption options (beyond DefaultPreemption's `pluginArgs`). Only with a preset:
    /// `algorithmProvider: none` has no DefaultPreemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionSpec>,
    /// kube-scheduler plugins that are neither filters nor scores, turned off for this policy (kube-scheduler's
    /// `plugins.multiPoint.disabled`): `GangScheduling` (on by default: a pod naming a pod group with
    /// `spec.schedulingGroup`, or `spec.workloadRef` in Kubernetes v1.35, is gang-scheduled) and `Coscheduling` (on by default: a pod labelled
    /// `scheduling.x-k8s.io/pod-group` is gang-scheduled with its PodGroup). Filters and scores are turned off by leaving them out of their lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_plugins: Vec<String>,
}

/// Ruleplane's preemption options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreemptionSpec {
    /// Which lower-priority pods may be evicted: `Any` (default, kube-scheduler's rule) or `RuleplaneScheduled`
    /// (only pods whose `spec.schedulerName` is a SchedulerPolicy's of this rule set). `RuleplaneScheduled` keeps
    /// the policy from evicting another scheduler's pods (no preemption loops between schedulers), at the price
    /// of a high-priority pod waiting behind lower-priority pods of other schedulers.
    #[serde(default)]
    pub victims: VictimScope,
}

/// Which pods preemption may evict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VictimScope {
    /// Any pod of lower priority, as kube-scheduler.
    #[default]
    Any,
    /// Only pods of lower priority placed by a SchedulerPolicy of this rule set.
    RuleplaneScheduled,
}

/// kube-scheduler's named default plugin sets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AlgorithmProvider {
    /// kube-scheduler's default profile; scores favour the least allocated nodes (spreading).
    #[default]
    DefaultProvider,
    /// Like DefaultProvider but favouring the most allocated nodes (bin-packing for the cluster autoscaler).
    ClusterAutoscalerProvider,
    /// No defaults: only what `filters` and `scores` list.
    #[serde(rename = "none")]
    None,
}

/// One filter: a plugin name, or a declarative `NodeValue` filter with its own name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FilterSpec {
    /// A kube-scheduler filter plugin, by modern or legacy name.
    Name(String),
    /// A node must have a value (selected by JSONPath) in `values`, or within `min`/`max`.
    NodeValue(NodeValueArgs),
}

/// One score plugin with its weight and shorthand arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoreSpec {
    /// Plugin: NodeResourcesFit, NodeResourcesBalancedAllocation, NodeAffinity, TaintToleration,
    /// PodTopologySpread, InterPodAffinity, ImageLocality; a legacy priority name (LeastRequested,
    /// MostRequested, BalancedResourceAllocation, RequestedToCapacityRatio, SelectorSpread, …); or, with
    /// `jsonPath`, the name of a declarative `NodeLabel` score.
    pub name: String,
    /// Weight, 1–100 (default: kube-scheduler's default weight for the plugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i64>,
    /// NodeResourcesFit shorthand for `pluginArgs.NodeResourcesFit.scoringStrategy.type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ScoringStrategyType>,
    /// NodeResourcesFit / NodeResourcesBalancedAllocation shorthand for their args' `resources` (default cpu: 1,
    /// memory: 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceSpec>,
    /// RequestedToCapacityRatio: points `{utilization (0–100), score (0–10)}`. NodeLabel: points
    /// `{value, score (0–100)}` of a piecewise-linear map over a number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<ShapePoint>,
    /// NodeLabel: JSONPath into the Node selecting the value to score, e.g. `{.metadata.labels.tier}` or
    /// `{.metadata.annotations.example\.com/cpu-usage}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// NodeLabel: score (0–100) for each value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, i64>,
    /// NodeLabel: score of nodes without a value, or whose value is not in `values` (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub default_score: Option<i64>,
}

/// A point of a shape: `utilization` (RequestedToCapacityRatio) or `value` (NodeLabel), and its score.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShapePoint {
    /// RequestedToCapacityRatio: utilisation in percent (0–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub utilization: Option<i32>,
    /// NodeLabel: the node's number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Score at that point (0–10 for RequestedToCapacityRatio, 0–100 for NodeLabel).
    pub score: i64,
}
