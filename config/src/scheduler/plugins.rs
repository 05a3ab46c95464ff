//! The names a policy may write for plugins: the engine's plugin names, legacy predicate/priority aliases, and
//! errors for names Ruleplane does not evaluate.

use super::engine::args::ScoringStrategyType;
use super::engine::{FilterPlugin, ScorePlugin};

/// Why a plugin name in a policy cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PluginNameError {
    /// A score plugin listed under `filters`.
    #[error("`{name}` is a score (priority), not a filter; list it under `scores`")]
    ScoreAsFilter {
        /// The name written.
        name: String,
    },
    /// A filter plugin listed under `scores`.
    #[error("`{name}` is a filter (predicate), not a score; list it under `filters`")]
    FilterAsScore {
        /// The name written.
        name: String,
    },
    /// A kube-scheduler plugin the engine does not evaluate.
    #[error("`{name}` is a kube-scheduler plugin that Ruleplane does not evaluate; supported {list}s: {supported}")]
    NotImplemented {
        /// The name written.
        name: String,
        /// `filter` or `score`.
        list: &'static str,
        /// The modern names that are supported.
        supported: String,
    },
    /// A filter or score named in `disabledPlugins`.
    #[error("`{name}` is a filter or score: leave it out of `filters`/`scores` to turn it off")]
    NotDisableable {
        /// The name written.
        name: String,
    },
    /// Not a plugin name at all.
    #[error("unknown {list} plugin `{name}`{hint}")]
    Unknown {
        /// The name written.
        name: String,
        /// `filter` or `score`.
        list: &'static str,
        /// A suggestion, or the list of known names.
        hint: String,
    },
}

/// Legacy predicate names (kube-scheduler's removed `Policy` API) and the plugins they became.
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
    ("MatchInterPodAffinity", &[FilterPlugin::InterPodAffinity]),
    ("EvenPodsSpread", &[FilterPlugin::PodTopologySpread]),
    ("NoDiskConflict", &[FilterPlugin::VolumeRestrictions]),
    ("NoVolumeZoneConflict", &[FilterPlugin::VolumeZone]),
    ("CheckVolumeBinding", &[FilterPlugin::VolumeBinding]),
    ("MaxCSIVolumeCountPred", &[FilterPlugin::NodeVolumeLimits]),
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

/// Legacy priority names, the plugin they became and the NodeResourcesFit strategy they imply.
const SCORE_ALIASES: &[(&str, ScorePlugin, Option<ScoringStrategyType>)] = &[
    (
        "LeastRequested",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategyType::LeastAllocated),
    ),
    (
        "LeastRequestedPriority",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategyType::LeastAllocated),
    ),
    (
        "MostRequested",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategyType::MostAllocated),
    ),
    (
        "MostRequestedPriority",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategyType::MostAllocated),
    ),
    (
        "RequestedToCapacityRatio",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategyType::RequestedToCapacityRatio),
    ),
    (
        "RequestedToCapacityRatioPriority",
        ScorePlugin::NodeResourcesFit,
        Some(ScoringStrategyType::RequestedToCapacityRatio),
    ),
    (
        "BalancedResourceAllocation",
        ScorePlugin::NodeResourcesBalancedAllocation,
        None,
    ),
    ("NodeAffinityPriority", ScorePlugin::NodeAffinity, None),
    ("TaintTolerationPriority", ScorePlugin::TaintToleration, None),
    ("InterPodAffinityPriority", ScorePlugin::InterPodAffinity, None),
    ("ImageLocalityPriority", ScorePlugin::ImageLocality, None),
    ("SelectorSpread", ScorePlugin::PodTopologySpread, None),
    ("SelectorSpreadPriority", ScorePlugin::PodTopologySpread, None),
    ("EvenPodsSpreadPriority", ScorePlugin::PodTopologySpread, None),
    ("NodeLabelPriority", ScorePlugin::NodeLabel, None),
];

/// Legacy names of kube-scheduler plugins the engine does not evaluate (the modern ones are in the enums).
const UNSUPPORTED_LEGACY: &[&str] = &[
    "MaxEBSVolumeCount",
    "MaxGCEPDVolumeCount",
    "MaxAzureDiskVolumeCount",
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "CSILimits",
    "DefaultPreemption",
    "ServiceSpreadingPriority",
    "NodePreferAvoidPods",
    "NodePreferAvoidPodsPriority",
    "EqualPriority",
    "DefaultBinder",
    "PrioritySort",
    "SchedulingGates",
];

/// The plugins a policy may name in `disabledPlugins`: on by default, neither filters nor scores.
pub(crate) const DISABLEABLE: &[&str] = &[super::gang::GANG_SCHEDULING, super::cosched::COSCHEDULING];

/// Checks a name of `disabledPlugins`.
pub(crate) fn check_disabled_name(name: &str) -> Result<(), PluginNameError> {
    if DISABLEABLE.contains(&name) {
        return Ok(());
    }
    if resolve_filter_name(name).is_ok() || resolve_score_name(name).is_ok() {
        return Err(PluginNameError::NotDisableable { name: name.to_string() });
    }
    Err(unknown(
        "disableable",
        name,
        &format!("; disableable plugins: {}", DISABLEABLE.join(", ")),
    ))
}

fn modern_filters() -> impl Iterator<Item = &'static str> {
    FilterPlugin::ALL
        .iter()
        .filter(|p| p.is_implemented() && **p != FilterPlugin::NodeValue)
        .map(|p| p.as_str())
}

fn modern_scores() -> impl Iterator<Item = &'static str> {
    ScorePlugin::ALL
        .iter()
        .filter(|p| p.is_implemented() && **p != ScorePlugin::NodeLabel)
        .map(|p| p.as_str())
}

/// Maps a filter name (modern or legacy) to the plugins it stands for.
pub(crate) fn resolve_filter_name(name: &str) -> Result<Vec<FilterPlugin>, PluginNameError> {
    if let Some(plugin) = FilterPlugin::from_name(name) {
        if plugin == FilterPlugin::NodeValue {
            return Err(unknown(
                "filter",
                name,
                "; `NodeValue` is written as an object with `name` and `jsonPath`",
            ));
        }
        if !plugin.is_implemented() {
            return Err(not_implemented("filter", name));
        }
        return Ok(vec![plugin]);
    }
    if let Some((_, plugins)) = FILTER_ALIASES.iter().find(|(alias, _)| *alias == name) {
        return Ok(plugins.to_vec());
    }
    if ScorePlugin::from_name(name).is_some() || SCORE_ALIASES.iter().any(|(alias, _, _)| *alias == name) {
        return Err(PluginNameError::ScoreAsFilter { name: name.to_string() });
    }
    if UNSUPPORTED_LEGACY.contains(&name) {
        return Err(not_implemented("filter", name));
    }
    let known: Vec<&str> = modern_filters().chain(FILTER_ALIASES.iter().map(|(n, _)| *n)).collect();
    Err(unknown("filter", name, &hint("filter", name, &known, modern_filters())))
}

/// Maps a score name (modern or legacy) to the plugin and the strategy a legacy name implies.
pub(crate) fn resolve_score_name(name: &str) -> Result<(ScorePlugin, Option<ScoringStrategyType>), PluginNameError> {
    if let Some(plugin) = ScorePlugin::from_name(name) {
        if !plugin.is_implemented() {
            return Err(not_implemented("score", name));
        }
        return Ok((plugin, None));
    }
    if let Some((_, plugin, strategy)) = SCORE_ALIASES.iter().find(|(alias, _, _)| *alias == name) {
        return Ok((*plugin, *strategy));
    }
    if FilterPlugin::from_name(name).is_some() || FILTER_ALIASES.iter().any(|(alias, _)| *alias == name) {
        return Err(PluginNameError::FilterAsScore { name: name.to_string() });
    }
    if UNSUPPORTED_LEGACY.contains(&name) {
        return Err(not_implemented("score", name));
    }
    let known: Vec<&str> = modern_scores()
        .chain(SCORE_ALIASES.iter().map(|(n, _, _)| *n))
        .collect();
    Err(unknown("score", name, &hint("score", name, &known, modern_scores())))
}

fn not_implemented(list: &'static str, name: &str) -> PluginNameError {
    let supported: Vec<&str> = if list == "filter" {
        modern_filters().collect()
    } else {
        modern_scores().collect()
    };
    PluginNameError::NotImplemented {
        name: name.to_string(),
        list,
        supported: supported.join(", "),
    }
}

fn unknown(list: &'static str, name: &str, hint: &str) -> PluginNameError {
    PluginNameError::Unknown {
        name: name.to_string(),
        list,
        hint: hint.to_string(),
    }
}

fn hint<'a>(list: &str, name: &str, known: &[&'a str], modern: impl Iterator<Item = &'a str>) -> String {
    let suggestion = crate::diagnostics::did_you_mean(name, known.iter().copied());
    if suggestion.is_empty() {
        format!(
            "; known {list}s: {} (and their legacy names)",
            modern.collect::<Vec<_>>().join(", ")
        )
    } else {
        suggestion
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
            resolve_filter_name("MatchInterPodAffinity").unwrap(),
            vec![FilterPlugin::InterPodAffinity]
        );
        assert_eq!(
            resolve_filter_name("NoDiskConflict").unwrap(),
            vec![FilterPlugin::VolumeRestrictions]
        );
        assert_eq!(
            resolve_filter_name("NoVolumeZoneConflict").unwrap(),
            vec![FilterPlugin::VolumeZone]
        );
        assert_eq!(
            resolve_score_name("MostRequested").unwrap(),
            (ScorePlugin::NodeResourcesFit, Some(ScoringStrategyType::MostAllocated))
        );
        assert_eq!(
            resolve_score_name("ImageLocality").unwrap(),
            (ScorePlugin::ImageLocality, None)
        );
    }

    #[test]
    fn only_plugins_that_are_neither_filters_nor_scores_are_disabled_by_name() {
        assert_eq!(check_disabled_name("GangScheduling"), Ok(()));
        assert_eq!(check_disabled_name("Coscheduling"), Ok(()));
        let message = |e: PluginNameError| e.to_string();
        assert!(message(check_disabled_name("NodeAffinity").unwrap_err()).contains("leave it out"));
        assert!(
            message(check_disabled_name("GangSchedulin").unwrap_err()).contains("disableable plugins: GangScheduling")
        );
    }

    #[test]
    fn misplaced_unknown_and_unimplemented_names_say_so() {
        let message = |e: PluginNameError| e.to_string();
        assert!(message(resolve_filter_name("LeastRequested").unwrap_err()).contains("not a filter"));
        assert!(message(resolve_score_name("PodFitsHost").unwrap_err()).contains("not a score"));
        assert!(message(resolve_filter_name("NodeAfinity").unwrap_err()).contains("did you mean `NodeAffinity`"));
        assert!(message(resolve_filter_name("DynamicResources").unwrap_err()).contains("does not evaluate"));
        assert!(message(resolve_filter_name("MaxEBSVolumeCount").unwrap_err()).contains("does not evaluate"));
        assert_eq!(
            resolve_filter_name("CheckVolumeBinding"),
            Ok(vec![FilterPlugin::VolumeBinding])
        );
        assert_eq!(
            resolve_filter_name("MaxCSIVolumeCountPred"),
            Ok(vec![FilterPlugin::NodeVolumeLimits])
        );
        assert!(message(resolve_score_name("DynamicResources").unwrap_err()).contains("does not evaluate"));
        assert_eq!(
            resolve_score_name("VolumeBinding").map(|(p, _)| p),
            Ok(ScorePlugin::VolumeBinding)
        );
        assert!(message(resolve_filter_name("NodeValue").unwrap_err()).contains("object"));
    }
}
