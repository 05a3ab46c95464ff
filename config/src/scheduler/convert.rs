//! Converts kube-scheduler's `KubeSchedulerConfiguration` (v1) profiles into SchedulerPolicy rule documents, with
//! notes on what does not carry over.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::engine::{FilterEntry, FilterPlugin, Profile, ScoreEntry, ScorePlugin};

/// Why a configuration cannot be converted.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// Not a `KubeSchedulerConfiguration`.
    #[error("expected kind KubeSchedulerConfiguration (apiVersion kubescheduler.config.k8s.io/v1), found {0}")]
    NotAConfiguration(String),
    /// A field has the wrong shape.
    #[error("{path}: {problem}")]
    Invalid {
        /// Where, as a dotted path.
        path: String,
        /// What is wrong.
        problem: String,
    },
}

/// One converted profile: the rule document and what the conversion left out or changed.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvertedProfile {
    /// The SchedulerPolicy document.
    pub rule: Value,
    /// Things a reader must know (plugins not evaluated, extension points without an equivalent).
    pub notes: Vec<String>,
}

/// kube-scheduler's default plugins that the engine does not evaluate; they are no-ops for pods without resource
/// claims, and the engine refuses pods that need them (unless `ignoredFeatures` says otherwise).
const DEFAULT_NOT_EVALUATED: &[&str] = &["DynamicResources"];

/// Extension points whose plugins have nothing to convert to (Ruleplane's scheduler has its own queue, no
/// preemption, binds directly).
const OTHER_POINTS: &[&str] = &[
    "preEnqueue",
    "queueSort",
    "postFilter",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
];

/// Converts every profile of `config`. `renames` maps a scheduler name to the one the policy takes (a policy
/// cannot be called `default-scheduler`).
pub fn convert_kube_scheduler_configuration(
    config: &Value,
    renames: &BTreeMap<String, String>,
) -> Result<Vec<ConvertedProfile>, ConvertError> {
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != "KubeSchedulerConfiguration" {
        return Err(ConvertError::NotAConfiguration(if kind.is_empty() {
            "no kind".into()
        } else {
            kind.into()
        }));
    }
    let global_percentage = config.get("percentageOfNodesToScore").and_then(Value::as_u64);
    let default_profile = [json!({"schedulerName": "default-scheduler"})];
    let profiles = match config.get("profiles") {
        None | Some(Value::Null) => &default_profile[..],
        Some(Value::Array(profiles)) => profiles.as_slice(),
        Some(_) => return Err(invalid("profiles", "must be a list")),
    };
    profiles
        .iter()
        .enumerate()
        .map(|(i, profile)| convert_profile(profile, i, global_percentage, renames))
        .collect()
}

fn invalid(path: &str, problem: &str) -> ConvertError {
    ConvertError::Invalid {
        path: path.to_string(),
        problem: problem.to_string(),
    }
}

/// Plugins a `PluginSet` enables, with their weights.
type Enabled = Vec<(String, Option<i64>)>;

/// The plugin names (and weights) a `PluginSet` enables and disables.
fn plugin_set(set: Option<&Value>, path: &str) -> Result<(Enabled, Vec<String>), ConvertError> {
    let Some(set) = set else {
        return Ok((Vec::new(), Vec::new()));
    };
    let list = |field: &str| -> Result<Enabled, ConvertError> {
        match set.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let name = item
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| invalid(&format!("{path}.{field}[{i}]"), "needs a name"))?;
                    Ok((name.to_string(), item.get("weight").and_then(Value::as_i64)))
                })
                .collect(),
            Some(_) => Err(invalid(&format!("{path}.{field}"), "must be a list")),
        }
    };
    Ok((
        list("enabled")?,
        list("disabled")?.into_iter().map(|(name, _)| name).collect(),
    ))
}

/// The built-in filters and weighted scores of kube-scheduler's default profile (DefaultProvider).
fn preset_plugins() -> (Vec<FilterPlugin>, Vec<(ScorePlugin, i64)>) {
    let preset = Profile::default_provider();
    let filters = preset
        .filters
        .iter()
        .filter_map(|entry| match entry {
            FilterEntry::Plugin(plugin) => Some(*plugin),
            FilterEntry::NodeValue(_) => None,
        })
        .collect();
    let scores = preset
        .scores
        .iter()
        .filter_map(|entry| match entry {
            ScoreEntry::Plugin { plugin, weight } => Some((*plugin, *weight)),
            ScoreEntry::NodeLabel(_) => None,
        })
        .collect();
    (filters, scores)
}

fn convert_profile(
    profile: &Value,
    index: usize,
    global_percentage: Option<u64>,
    renames: &BTreeMap<String, String>,
) -> Result<ConvertedProfile, ConvertError> {
    let at = format!("profiles[{index}]");
    let written_name = profile
        .get("schedulerName")
        .and_then(Value::as_str)
        .unwrap_or("default-scheduler")
        .to_string();
    let scheduler_name = renames.get(&written_name).cloned().unwrap_or(written_name.clone());
    let mut notes = Vec::new();
    if scheduler_name != written_name {
        notes.push(format!("profile {written_name} becomes scheduler {scheduler_name}"));
    }
    let plugins = profile.get("plugins");
    let point = |name: &str| plugins.and_then(|p| p.get(name));
    let (multi_enabled, multi_disabled) = plugin_set(point("multiPoint"), &format!("{at}.plugins.multiPoint"))?;
    let (filter_enabled, filter_disabled) = plugin_set(point("filter"), &format!("{at}.plugins.filter"))?;
    let (score_enabled, score_disabled) = plugin_set(point("score"), &format!("{at}.plugins.score"))?;
    for other in OTHER_POINTS {
        let (enabled, disabled) = plugin_set(point(other), &format!("{at}.plugins.{other}"))?;
        if !enabled.is_empty() || !disabled.is_empty() {
            notes.push(format!(
                "plugins.{other} is not converted (Ruleplane's scheduler has its own queue, binder and PostFilter chain)"
            ));
        }
    }
    let removed =
        |disabled: &[String], name: &str| multi_disabled.iter().chain(disabled).any(|d| d == "*" || d == name);
    let (preset_filters, preset_scores) = preset_plugins();
    // Filters: the preset's unless disabled, then the enabled ones kube-scheduler would append.
    let mut filters: Vec<FilterPlugin> = preset_filters
        .iter()
        .copied()
        .filter(|plugin| !removed(&filter_disabled, plugin.as_str()))
        .collect();
    let mut scores: Vec<(ScorePlugin, i64)> = preset_scores
        .iter()
        .copied()
        .filter(|(plugin, _)| !removed(&score_disabled, plugin.as_str()))
        .collect();
    let mut not_evaluated: Vec<String> = Vec::new();
    for (name, weight) in multi_enabled.iter().chain(&filter_enabled).chain(&score_enabled) {
        let as_filter = FilterPlugin::from_name(name);
        let as_score = ScorePlugin::from_name(name);
        let from_multi = multi_enabled.iter().any(|(n, _)| n == name);
        let wants_filter = from_multi || filter_enabled.iter().any(|(n, _)| n == name);
        let wants_score = from_multi || score_enabled.iter().any(|(n, _)| n == name);
        let mut known = false;
        if let Some(plugin) = as_filter.filter(|p| wants_filter && p.is_implemented()) {
            known = true;
            if !filters.contains(&plugin) {
                filters.push(plugin);
            }
        }
        if let Some(plugin) = as_score.filter(|p| wants_score && p.is_implemented()) {
            known = true;
            let weight = weight.unwrap_or(plugin.default_weight());
            match scores.iter_mut().find(|(p, _)| *p == plugin) {
                Some(existing) => existing.1 = weight,
                None => scores.push((plugin, weight)),
            }
        }
        if !known && !not_evaluated.contains(name) {
            not_evaluated.push(name.clone());
        }
    }
    filters.sort();
    for name in &not_evaluated {
        notes.push(format!("plugin {name} is not evaluated by Ruleplane and was left out"));
    }
    let default_dropped: Vec<&str> = DEFAULT_NOT_EVALUATED
        .iter()
        .copied()
        .filter(|name| !removed(&filter_disabled, name))
        .collect();
    if !default_dropped.is_empty() {
        notes.push(format!(
            "default plugins {} are not evaluated: pods with resource claims are refused with a reason naming \
             the plugin (see ignoredFeatures)",
            default_dropped.join(", ")
        ));
    }

    let mut plugin_args = Map::new();
    if let Some(configs) = profile.get("pluginConfig") {
        let Value::Array(configs) = configs else {
            return Err(invalid(&format!("{at}.pluginConfig"), "must be a list"));
        };
        for (i, entry) in configs.iter().enumerate() {
            let name = entry
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(&format!("{at}.pluginConfig[{i}]"), "needs a name"))?;
            let mut args = entry.get("args").cloned().unwrap_or(Value::Object(Map::new()));
            if let Value::Object(map) = &mut args {
                map.remove("apiVersion");
                map.remove("kind");
            }
            match name {
                "NodeResourcesFit"
                | "NodeResourcesBalancedAllocation"
                | "NodeAffinity"
                | "PodTopologySpread"
                | "InterPodAffinity" => {
                    plugin_args.insert(name.to_string(), args);
                }
                "DefaultPreemption" => {
                    plugin_args.insert(name.to_string(), args);
                    notes.push(
                        "pluginConfig DefaultPreemption is carried over; preemption runs synchronously, without \
                         v1.35's asynchronous mode"
                            .into(),
                    );
                }
                // Only the timeout: the Score (StorageCapacityScoring, from v1.37) uses the default `shape`.
                "VolumeBinding" => {
                    if let Some(seconds) = args.get("bindTimeoutSeconds") {
                        plugin_args.insert(name.to_string(), json!({"bindTimeoutSeconds": seconds}));
                    }
                    if args.get("shape").is_some() {
                        notes.push(
                            "pluginConfig VolumeBinding's shape is not converted: its Score uses kube-scheduler's default shape"
                                .into(),
                        );
                    }
                }
                // scheduler-plugins' CoschedulingArgs.
                "Coscheduling" => {
                    plugin_args.insert(name.to_string(), args);
                    notes.push(
                        "pluginConfig Coscheduling is carried over; permitWaitingTimeSeconds has no effect: a gang is \
                         scheduled as a unit and nothing waits at Permit"
                            .into(),
                    );
                }
                other => notes.push(format!("pluginConfig {other} is not converted (no args in Ruleplane)")),
            }
        }
    }

    let mut spec = Map::new();
    spec.insert("schedulerName".into(), json!(scheduler_name));
    spec.insert("algorithmProvider".into(), json!("DefaultProvider"));
    if filters != preset_filters {
        spec.insert(
            "filters".into(),
            json!(filters.iter().map(|p| p.as_str()).collect::<Vec<_>>()),
        );
    }
    if scores != preset_scores {
        spec.insert(
            "scores".into(),
            Value::Array(
                scores
                    .iter()
                    .map(|(p, w)| json!({"name": p.as_str(), "weight": w}))
                    .collect(),
            ),
        );
    }
    if !plugin_args.is_empty() {
        spec.insert("pluginArgs".into(), Value::Object(plugin_args));
    }
    let percentage = profile
        .get("percentageOfNodesToScore")
        .and_then(Value::as_u64)
        .or(global_percentage);
    if let Some(percentage) = percentage.filter(|p| *p > 0) {
        spec.insert("percentageOfNodesToScore".into(), json!(percentage));
    }
    let rule_name: String = scheduler_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    Ok(ConvertedProfile {
        rule: json!({
            "apiVersion": "ruleplane.dev/v1alpha1",
            "kind": "SchedulerPolicy",
            "metadata": {"name": rule_name},
            "spec": spec,
        }),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(config: Value) -> Vec<ConvertedProfile> {
        convert_kube_scheduler_configuration(&config, &BTreeMap::new()).expect("converts")
    }

    #[test]
    fn default_profile_is_the_preset_with_notes() {
        let converted = convert(
            json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                       "profiles": [{"schedulerName": "spread"}]}),
        );
        assert_eq!(
            converted[0].rule["spec"],
            json!({"schedulerName": "spread", "algorithmProvider": "DefaultProvider"})
        );
        assert!(converted[0].notes[0].contains("DynamicResources"));
    }

    #[test]
    fn enabled_disabled_weights_and_args_carry_over() {
        let converted = convert(json!({
            "kind": "KubeSchedulerConfiguration", "percentageOfNodesToScore": 30,
            "profiles": [{
                "schedulerName": "packer",
                "plugins": {
                    "multiPoint": {"disabled": [{"name": "ImageLocality"}]},
                    "filter": {"disabled": [{"name": "NodePorts"}]},
                    "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}], "disabled": [{"name": "InterPodAffinity"}]},
                    "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                },
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs",
                        "scoringStrategy": {"type": "MostAllocated"}}},
                    {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 20}},
                    {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 30}},
                    {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": 5}},
                ],
            }],
        }));
        let spec = &converted[0].rule["spec"];
        let filters: Vec<&str> = spec["filters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(!filters.contains(&"NodePorts") && filters.contains(&"NodeResourcesFit"));
        let scores = spec["scores"].as_array().unwrap();
        assert!(scores.contains(&json!({"name": "NodeResourcesFit", "weight": 5})));
        assert!(
            !scores
                .iter()
                .any(|s| s["name"] == "ImageLocality" || s["name"] == "InterPodAffinity")
        );
        assert_eq!(
            spec["pluginArgs"]["NodeResourcesFit"],
            json!({"scoringStrategy": {"type": "MostAllocated"}})
        );
        assert_eq!(spec["percentageOfNodesToScore"], 30);
        let notes = converted[0].notes.join("\n");
        assert!(notes.contains("plugins.queueSort is not converted"), "{notes}");
        assert!(
            notes.contains("pluginConfig DefaultPreemption is carried over"),
            "{notes}"
        );
        assert_eq!(
            spec["pluginArgs"]["DefaultPreemption"],
            json!({"minCandidateNodesPercentage": 20})
        );
        assert_eq!(spec["pluginArgs"]["VolumeBinding"], json!({"bindTimeoutSeconds": 30}));
        assert_eq!(
            spec["pluginArgs"]["Coscheduling"],
            json!({"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": 5})
        );
        assert!(notes.contains("pluginConfig Coscheduling is carried over"), "{notes}");
        // The converted document loads.
        let text = serde_json::to_string(&converted[0].rule).unwrap();
        let rules = crate::load_str("converted.yaml", &text).expect("the converted policy loads");
        assert_eq!(rules.scheduler_policies().count(), 1);
    }

    #[test]
    fn other_documents_are_refused() {
        let error = convert_kube_scheduler_configuration(&json!({"kind": "Policy"}), &BTreeMap::new()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "expected kind KubeSchedulerConfiguration (apiVersion kubescheduler.config.k8s.io/v1), found Policy"
        );
    }
}
