//! The scheduler plugin vocabulary: the plugins Ruleplane implements, legacy predicate/priority aliases, and
//! resolution of the names written in a policy.

use std::fmt;

use serde::Serialize;

use super::types::ScoringStrategy;

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
    use crate::scheduler::types::AlgorithmProvider;

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
