//! The `SchedulerPolicy` rule document: fields, providers, score entries and their resolution.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::plugins::{FilterPlugin, ScorePlugin, ScoreSpecError, resolve_score_name};
use crate::common::RuleMetadata;
use crate::diagnostics::SourceLocation;
use crate::jsonpath::CompiledPath;

/// A scheduler: pods whose `spec.schedulerName` equals `schedulerName` are placed on nodes that pass every
/// filter, choosing the node with the highest weighted sum of scores (ties broken at random).
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

/// Which filters and scores decide placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchedulerPolicySpec {
    /// The `spec.schedulerName` of the pods this scheduler places. Must be unique among policies, and should
    /// not be `default-scheduler`.
    #[schemars(length(min = 1))]
    pub scheduler_name: String,
    /// Named default set of filters and scores, as kube-scheduler's `--algorithm-provider`:
    /// `DefaultProvider` (spread: LeastAllocated), `ClusterAutoscalerProvider` (bin-packing: MostAllocated,
    /// so nodes empty out), or `none`. `filters`/`scores`, when given, replace the provider's lists.
    #[serde(default)]
    pub algorithm_provider: AlgorithmProvider,
    /// Filter plugins (predicates) a node must pass. Modern names (NodeResourcesFit, NodeName, NodePorts,
    /// NodeAffinity, TaintToleration, NodeUnschedulable) or legacy predicate names (PodFitsResources,
    /// PodFitsHost, PodFitsHostPorts, PodMatchNodeSelector, PodToleratesNodeTaints, CheckNodeUnschedulable,
    /// GeneralPredicates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<String>>,
    /// Score plugins (priorities) with weights; the node score is Σ weight × score (0–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Vec<ScoreSpec>>,
    /// Stop looking for feasible nodes after this percentage of the cluster (0–100). 0 (default) is
    /// kube-scheduler's adaptive rule: all nodes below 100, else max(5, 50 − nodes/125) percent, at
    /// least 100 nodes.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub percentage_of_nodes_to_score: u8,
}

/// kube-scheduler's named default plugin sets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AlgorithmProvider {
    /// Default filters; scores favour the least allocated nodes (spreading).
    #[default]
    DefaultProvider,
    /// Like DefaultProvider but favouring the most allocated nodes (bin-packing for the cluster autoscaler).
    ClusterAutoscalerProvider,
    /// No defaults: only what `filters` and `scores` list.
    #[serde(rename = "none")]
    None,
}

impl AlgorithmProvider {
    /// The provider's filters.
    pub fn filters(self) -> Vec<FilterPlugin> {
        match self {
            AlgorithmProvider::None => Vec::new(),
            AlgorithmProvider::DefaultProvider | AlgorithmProvider::ClusterAutoscalerProvider => vec![
                FilterPlugin::NodeUnschedulable,
                FilterPlugin::NodeName,
                FilterPlugin::TaintToleration,
                FilterPlugin::NodeAffinity,
                FilterPlugin::NodePorts,
                FilterPlugin::NodeResourcesFit,
            ],
        }
    }

    /// The provider's scores, with kube-scheduler's default weights.
    pub fn scores(self) -> Vec<ResolvedScore> {
        let fit_strategy = match self {
            AlgorithmProvider::None => return Vec::new(),
            AlgorithmProvider::DefaultProvider => ScoringStrategy::LeastAllocated,
            AlgorithmProvider::ClusterAutoscalerProvider => ScoringStrategy::MostAllocated,
        };
        let plain = |plugin: ScorePlugin| ResolvedScore::new(plugin, plugin.default_weight(), None);
        vec![
            plain(ScorePlugin::TaintToleration),
            plain(ScorePlugin::NodeAffinity),
            plain(ScorePlugin::PodTopologySpread),
            ResolvedScore::new(ScorePlugin::NodeResourcesFit, 1, Some(fit_strategy)),
            plain(ScorePlugin::NodeResourcesBalancedAllocation),
        ]
    }
}

/// One score plugin with its weight and arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoreSpec {
    /// Plugin: NodeResourcesFit, NodeResourcesBalancedAllocation, NodeAffinity, TaintToleration,
    /// PodTopologySpread, NodeLabel; or a legacy priority name (LeastRequested, MostRequested,
    /// BalancedResourceAllocation, RequestedToCapacityRatio, SelectorSpread, …).
    pub name: String,
    /// Weight, 1–100 (default: kube-scheduler's default weight for the plugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<u32>,
    /// NodeResourcesFit only: how allocation is scored (default LeastAllocated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ScoringStrategy>,
    /// NodeResourcesFit and NodeResourcesBalancedAllocation: resources considered and their weights
    /// (default cpu: 1, memory: 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceWeight>,
    /// RequestedToCapacityRatio only: piecewise-linear map from utilisation (0–100) to score (0–10).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<ShapePoint>,
    /// NodeLabel only: JSONPath into the Node selecting the value to score, e.g. `{.metadata.labels.tier}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// NodeLabel only: score (0–100) for each value; other values and nodes without one score 0.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, u8>,
}

impl ScoreSpec {
    /// Resolves aliases and defaults.
    pub(crate) fn resolve(&self) -> Result<ResolvedScore, ScoreSpecError> {
        let (plugin, implied_strategy) = resolve_score_name(&self.name)?;
        let strategy = match (implied_strategy, self.strategy) {
            (Some(implied), Some(given)) if implied != given => {
                return Err(ScoreSpecError::StrategyContradictsName {
                    name: self.name.clone(),
                    implied,
                    given,
                });
            }
            (Some(implied), _) => Some(implied),
            (None, Some(given)) if plugin != ScorePlugin::NodeResourcesFit => {
                return Err(ScoreSpecError::StrategyNotApplicable { plugin, given });
            }
            (None, given) if plugin == ScorePlugin::NodeResourcesFit => {
                Some(given.unwrap_or(ScoringStrategy::LeastAllocated))
            }
            (None, given) => given,
        };
        Ok(ResolvedScore {
            plugin,
            weight: self.weight.unwrap_or(plugin.default_weight()),
            strategy,
            resources: self.resources.clone(),
            shape: self.shape.clone(),
            json_path: None,
            values: self.values.clone(),
        })
    }
}

/// How NodeResourcesFit scores a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ScoringStrategy {
    /// Prefer nodes with the most free resources (spreading; legacy LeastRequested).
    LeastAllocated,
    /// Prefer nodes with the least free resources (bin-packing; legacy MostRequested).
    MostAllocated,
    /// Score utilisation through `shape`.
    RequestedToCapacityRatio,
}

impl fmt::Display for ScoringStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScoringStrategy::LeastAllocated => "LeastAllocated",
            ScoringStrategy::MostAllocated => "MostAllocated",
            ScoringStrategy::RequestedToCapacityRatio => "RequestedToCapacityRatio",
        })
    }
}

/// A resource and its weight in resource-based scores.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceWeight {
    /// Resource name, e.g. `cpu`, `memory`, `nvidia.com/gpu`.
    pub name: String,
    /// Weight of the resource (1–100).
    #[schemars(range(min = 1, max = 100))]
    pub weight: u32,
}

/// A point of a RequestedToCapacityRatio shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShapePoint {
    /// Utilisation in percent (0–100).
    #[schemars(range(min = 0, max = 100))]
    pub utilization: u8,
    /// Score at that utilisation (0–10).
    #[schemars(range(min = 0, max = 10))]
    pub score: u8,
}

/// A score entry after aliases and defaults are resolved: what the scheduler runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedScore {
    /// The plugin.
    pub plugin: ScorePlugin,
    /// Weight (1–100).
    pub weight: u32,
    /// NodeResourcesFit strategy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ScoringStrategy>,
    /// Resource weights (empty = cpu: 1, memory: 1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceWeight>,
    /// RequestedToCapacityRatio shape.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<ShapePoint>,
    /// NodeLabel JSONPath, compiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json_path: Option<CompiledPath>,
    /// NodeLabel value scores.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, u8>,
}

impl ResolvedScore {
    fn new(plugin: ScorePlugin, weight: u32, strategy: Option<ScoringStrategy>) -> Self {
        ResolvedScore {
            plugin,
            weight,
            strategy,
            resources: Vec::new(),
            shape: Vec::new(),
            json_path: None,
            values: BTreeMap::new(),
        }
    }
}
