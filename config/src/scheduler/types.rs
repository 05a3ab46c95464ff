//! The `SchedulerPolicy` rule and its plugin vocabulary, including legacy predicate/priority aliases.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// Why a plugin name cannot be used where it is written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PluginNameError {
    /// A score (priority) listed under `filters`.
    #[error("`{name}` is a score (priority), not a filter; list it under `scores`")]
    ScoreAsFilter {
        /// The name as written.
        name: String,
    },
    /// A filter (predicate) listed under `scores`.
    #[error("`{name}` is a filter (predicate), not a score; list it under `filters`")]
    FilterAsScore {
        /// The name as written.
        name: String,
    },
    /// A kube-scheduler plugin Ruleplane does not implement.
    #[error("`{name}` is a kube-scheduler plugin that Ruleplane does not implement; supported {list}s: {supported}")]
    NotImplemented {
        /// The name as written.
        name: String,
        /// `filter` or `score`.
        list: &'static str,
        /// The supported modern names.
        supported: String,
    },
    /// Not a plugin name at all.
    #[error("unknown {list} plugin `{name}`{hint}")]
    Unknown {
        /// The name as written.
        name: String,
        /// `filter` or `score`.
        list: &'static str,
        /// "did you mean …?" or the list of known names.
        hint: String,
    },
}

/// Why a `scores` entry cannot be resolved; [`ScoreSpecError::field`] says which field to point at.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScoreSpecError {
    /// The name is not a usable score.
    #[error(transparent)]
    Name(#[from] PluginNameError),
    /// A legacy name implies one strategy and `strategy` says another.
    #[error("`{name}` means NodeResourcesFit with strategy {implied}, but strategy {given} is given")]
    StrategyContradictsName {
        /// The name as written.
        name: String,
        /// The strategy the name implies.
        implied: ScoringStrategy,
        /// The strategy written.
        given: ScoringStrategy,
    },
    /// `strategy` on a plugin other than NodeResourcesFit.
    #[error("`strategy` ({given}) only applies to NodeResourcesFit, not {plugin}")]
    StrategyNotApplicable {
        /// The plugin.
        plugin: ScorePlugin,
        /// The strategy written.
        given: ScoringStrategy,
    },
}

impl ScoreSpecError {
    /// The field of the entry the error is about (`name` or `strategy`).
    pub fn field(&self) -> &'static str {
        match self {
            ScoreSpecError::Name(_) => "name",
            ScoreSpecError::StrategyContradictsName { .. } | ScoreSpecError::StrategyNotApplicable { .. } => "strategy",
        }
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

/// Filter plugins Ruleplane implements (kube-scheduler names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum FilterPlugin {
    /// Rejects nodes with `spec.unschedulable` unless tolerated.
    NodeUnschedulable,
    /// Rejects nodes other than the pod's `spec.nodeName`.
    NodeName,
    /// Rejects nodes where the pod's host ports are taken.
    NodePorts,
    /// Enforces `nodeSelector` and required node affinity.
    NodeAffinity,
    /// Rejects nodes with untolerated NoSchedule/NoExecute taints.
    TaintToleration,
    /// Rejects nodes without room for the pod's requests.
    NodeResourcesFit,
}

impl FilterPlugin {
    /// All supported filters.
    pub const ALL: [FilterPlugin; 6] = [
        FilterPlugin::NodeUnschedulable,
        FilterPlugin::NodeName,
        FilterPlugin::NodePorts,
        FilterPlugin::NodeAffinity,
        FilterPlugin::TaintToleration,
        FilterPlugin::NodeResourcesFit,
    ];

    /// kube-scheduler's name.
    pub fn as_str(self) -> &'static str {
        match self {
            FilterPlugin::NodeUnschedulable => "NodeUnschedulable",
            FilterPlugin::NodeName => "NodeName",
            FilterPlugin::NodePorts => "NodePorts",
            FilterPlugin::NodeAffinity => "NodeAffinity",
            FilterPlugin::TaintToleration => "TaintToleration",
            FilterPlugin::NodeResourcesFit => "NodeResourcesFit",
        }
    }
}

impl fmt::Display for FilterPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Score plugins Ruleplane implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ScorePlugin {
    /// Resource allocation (LeastAllocated / MostAllocated / RequestedToCapacityRatio).
    NodeResourcesFit,
    /// Balance of resource fractions.
    NodeResourcesBalancedAllocation,
    /// Preferred node affinity terms.
    NodeAffinity,
    /// Fewer untolerated PreferNoSchedule taints is better.
    TaintToleration,
    /// Soft topology spread constraints.
    PodTopologySpread,
    /// Ruleplane's own: scores a node by a value selected from it with a JSONPath (e.g. a label).
    NodeLabel,
}

impl ScorePlugin {
    /// All supported scores.
    pub const ALL: [ScorePlugin; 6] = [
        ScorePlugin::NodeResourcesFit,
        ScorePlugin::NodeResourcesBalancedAllocation,
        ScorePlugin::NodeAffinity,
        ScorePlugin::TaintToleration,
        ScorePlugin::PodTopologySpread,
        ScorePlugin::NodeLabel,
    ];

    /// kube-scheduler's name (NodeLabel is Ruleplane's).
    pub fn as_str(self) -> &'static str {
        match self {
            ScorePlugin::NodeResourcesFit => "NodeResourcesFit",
            ScorePlugin::NodeResourcesBalancedAllocation => "NodeResourcesBalancedAllocation",
            ScorePlugin::NodeAffinity => "NodeAffinity",
            ScorePlugin::TaintToleration => "TaintToleration",
            ScorePlugin::PodTopologySpread => "PodTopologySpread",
            ScorePlugin::NodeLabel => "NodeLabel",
        }
    }

    /// kube-scheduler's default weight.
    pub fn default_weight(self) -> u32 {
        match self {
            ScorePlugin::TaintToleration => 3,
            ScorePlugin::NodeAffinity | ScorePlugin::PodTopologySpread => 2,
            ScorePlugin::NodeResourcesFit | ScorePlugin::NodeResourcesBalancedAllocation | ScorePlugin::NodeLabel => 1,
        }
    }
}

impl fmt::Display for ScorePlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Legacy predicate names and what they became.
const FILTER_ALIASES: &[(&str, &[FilterPlugin])] = &[
    ("PodFitsResources", &[FilterPlugin::NodeResourcesFit]),
    ("PodFitsHost", &[FilterPlugin::NodeName]),
    ("HostName", &[FilterPlugin::NodeName]),
    ("PodFitsHostPorts", &[FilterPlugin::NodePorts]),
    ("PodFitsPorts", &[FilterPlugin::NodePorts]),
    ("PodMatchNodeSelector", &[FilterPlugin::NodeAffinity]),
    ("MatchNodeSelector", &[FilterPlugin::NodeAffinity]),
    ("PodToleratesNodeTaints", &[FilterPlugin::TaintToleration]),
    ("CheckNodeUnschedulable", &[FilterPlugin::NodeUnschedulable]),
    (
        "GeneralPredicates",
        &[
            FilterPlugin::NodeResourcesFit,
            FilterPlugin::NodeName,
            FilterPlugin::NodePorts,
            FilterPlugin::NodeAffinity,
        ],
    ),
];

/// Legacy priority names and what they became (with the NodeResourcesFit strategy they imply).
const SCORE_ALIASES: &[(&str, ScorePlugin, Option<ScoringStrategy>)] = &[
    (
        "LeastRequested",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategy::LeastAllocated),
    ),
    (
        "LeastRequestedPriority",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategy::LeastAllocated),
    ),
    (
        "MostRequested",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategy::MostAllocated),
    ),
    (
        "MostRequestedPriority",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategy::MostAllocated),
    ),
    (
        "RequestedToCapacityRatio",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategy::RequestedToCapacityRatio),
    ),
    (
        "RequestedToCapacityRatioPriority",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategy::RequestedToCapacityRatio),
    ),
    (
        "BalancedResourceAllocation",
        ScorePlugin::NodeResourcesBalancedAllocation,
        None,
    ),
    ("NodeAffinityPriority", ScorePlugin::NodeAffinity, None),
    ("TaintTolerationPriority", ScorePlugin::TaintToleration, None),
    ("SelectorSpread", ScorePlugin::PodTopologySpread, None),
    ("SelectorSpreadPriority", ScorePlugin::PodTopologySpread, None),
    ("EvenPodsSpreadPriority", ScorePlugin::PodTopologySpread, None),
    ("NodeLabelPriority", ScorePlugin::NodeLabel, None),
];

/// kube-scheduler plugins and legacy names that Ruleplane recognises but does not implement, so the message
/// can say so instead of "unknown".
const UNSUPPORTED_PLUGINS: &[&str] = &[
    "InterPodAffinity",
    "MatchInterPodAffinity",
    "InterPodAffinityPriority",
    "ImageLocality",
    "ImageLocalityPriority",
    "VolumeBinding",
    "CheckVolumeBinding",
    "VolumeRestrictions",
    "NoDiskConflict",
    "VolumeZone",
    "NoVolumeZoneConflict",
    "NodeVolumeLimits",
    "MaxEBSVolumeCount",
    "MaxGCEPDVolumeCount",
    "MaxAzureDiskVolumeCount",
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "CSILimits",
    "DefaultPreemption",
    "DynamicResources",
    "ServiceSpreadingPriority",
    "NodePreferAvoidPodsPriority",
    "NodePreferAvoidPods",
    "EqualPriority",
];

/// All names accepted in `filters`, for suggestions.
pub(crate) fn filter_names() -> Vec<&'static str> {
    FilterPlugin::ALL
        .iter()
        .map(|plugin| plugin.as_str())
        .chain(FILTER_ALIASES.iter().map(|(name, _)| *name))
        .collect()
}

/// All names accepted in `scores`, for suggestions.
pub(crate) fn score_names() -> Vec<&'static str> {
    ScorePlugin::ALL
        .iter()
        .map(|plugin| plugin.as_str())
        .chain(SCORE_ALIASES.iter().map(|(name, _, _)| *name))
        .collect()
}

/// Maps a filter name (modern or legacy) to the plugins it stands for.
pub(crate) fn resolve_filter_name(name: &str) -> Result<Vec<FilterPlugin>, PluginNameError> {
    if let Some(plugin) = FilterPlugin::ALL.iter().find(|p| p.as_str() == name) {
        return Ok(vec![*plugin]);
    }
    if let Some((_, plugins)) = FILTER_ALIASES.iter().find(|(alias, _)| *alias == name) {
        return Ok(plugins.to_vec());
    }
    if ScorePlugin::ALL.iter().any(|p| p.as_str() == name) || SCORE_ALIASES.iter().any(|(alias, _, _)| *alias == name) {
        return Err(PluginNameError::ScoreAsFilter { name: name.to_string() });
    }
    Err(unknown_plugin_message(
        "filter",
        name,
        &filter_names(),
        FilterPlugin::ALL.len(),
    ))
}

/// Maps a score name (modern or legacy) to the plugin and the strategy a legacy name implies.
pub(crate) fn resolve_score_name(name: &str) -> Result<(ScorePlugin, Option<ScoringStrategy>), PluginNameError> {
    if let Some(plugin) = ScorePlugin::ALL.iter().find(|p| p.as_str() == name) {
        return Ok((*plugin, None));
    }
    if let Some((_, plugin, strategy)) = SCORE_ALIASES.iter().find(|(alias, _, _)| *alias == name) {
        return Ok((*plugin, *strategy));
    }
    if FILTER_ALIASES.iter().any(|(alias, _)| *alias == name)
        || matches!(name, "NodeName" | "NodePorts" | "NodeUnschedulable")
    {
        return Err(PluginNameError::FilterAsScore { name: name.to_string() });
    }
    Err(unknown_plugin_message(
        "score",
        name,
        &score_names(),
        ScorePlugin::ALL.len(),
    ))
}

/// `known` lists modern names first (`modern` of them), then legacy aliases; messages list only modern ones.
fn unknown_plugin_message(list: &'static str, name: &str, known: &[&'static str], modern: usize) -> PluginNameError {
    let modern_names = known[..modern.min(known.len())].join(", ");
    if UNSUPPORTED_PLUGINS.contains(&name) {
        return PluginNameError::NotImplemented {
            name: name.to_string(),
            list,
            supported: modern_names,
        };
    }
    let suggestion = crate::diagnostics::did_you_mean(name, known.iter().copied());
    let hint = if suggestion.is_empty() {
        format!("; known {list}s: {modern_names} (and their legacy names)")
    } else {
        suggestion
    };
    PluginNameError::Unknown {
        name: name.to_string(),
        list,
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_names_resolve_to_modern_plugins() {
        assert_eq!(
            resolve_filter_name("PodFitsHost").unwrap(),
            vec![FilterPlugin::NodeName]
        );
        assert_eq!(resolve_filter_name("GeneralPredicates").unwrap().len(), 4);
        assert_eq!(
            resolve_score_name("MostRequested").unwrap(),
            (ScorePlugin::NodeResourcesFit, Some(ScoringStrategy::MostAllocated))
        );
        assert!(
            resolve_filter_name("LeastRequested")
                .unwrap_err()
                .to_string()
                .contains("not a filter")
        );
        assert!(
            resolve_filter_name("NodeAfinity")
                .unwrap_err()
                .to_string()
                .contains("did you mean `NodeAffinity`")
        );
        assert!(
            resolve_score_name("ImageLocality")
                .unwrap_err()
                .to_string()
                .contains("does not implement")
        );
    }

    #[test]
    fn cluster_autoscaler_provider_bin_packs() {
        let scores = AlgorithmProvider::ClusterAutoscalerProvider.scores();
        let fit = scores
            .iter()
            .find(|s| s.plugin == ScorePlugin::NodeResourcesFit)
            .unwrap();
        assert_eq!(fit.strategy, Some(ScoringStrategy::MostAllocated));
        assert_eq!(AlgorithmProvider::None.filters(), vec![]);
    }
}
