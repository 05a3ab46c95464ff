//! Resolves a SchedulerPolicy into the engine's profile (preset, names, shorthands, plugin args), with every
//! problem located in the rule file.

use std::collections::{BTreeSet, HashMap};

use super::engine::args::{RequestedToCapacityRatioParam, ScoringStrategy, ScoringStrategyType, UtilizationShapePoint};
use super::engine::declarative::{NodeLabelArgs, ValueScorePoint};
use super::engine::field::{FieldError, PathSegment};
use super::engine::{Engine, FilterEntry, FilterPlugin, Profile, ProfileError, ScoreEntry, ScorePlugin, TieBreak};
use super::plugins::{check_disabled_name, resolve_filter_name, resolve_score_name};
use super::resolved::SchedulerPolicy;
use super::types::{AlgorithmProvider, FilterSpec, SchedulerPolicyRule, ScoreSpec};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::load::{key, path, with};
use crate::naming::is_dns_subdomain;
use crate::yaml_tree::{Node, PathStep};

/// Checks a SchedulerPolicy and, when it has no problem, returns it resolved into the engine's profile.
pub(crate) fn check_scheduler_policy(
    rule: &SchedulerPolicyRule,
    doc: &Node,
    out: &mut FileDiagnostics,
) -> Option<SchedulerPolicy> {
    let problems_before = out.found.len();
    check_scheduler_name(&rule.spec.scheduler_name, doc, out);
    if rule.spec.preemption.is_some() && rule.spec.algorithm_provider == AlgorithmProvider::None {
        out.error(
            doc.value_pos_of(&path(&["spec", "preemption"])),
            DiagnosticCode::Value,
            "`preemption` has no effect with `algorithmProvider: none`, which has no DefaultPreemption",
        );
    }
    for (index, name) in rule.spec.disabled_plugins.iter().enumerate() {
        if let Err(error) = check_disabled_name(name) {
            out.error(
                doc.value_pos_of(&with(&path(&["spec", "disabledPlugins"]), &[PathStep::Index(index)])),
                DiagnosticCode::UnknownPlugin,
                error.to_string(),
            );
        }
    }
    let mut resolver = Resolver {
        doc,
        out,
        profile: preset(rule.spec.algorithm_provider),
        fit_shorthand: None,
        balanced_shorthand: None,
    };
    if let Some(filters) = &rule.spec.filters {
        resolver.filters(filters);
    }
    if let Some(scores) = &rule.spec.scores {
        resolver.scores(scores);
    }
    resolver.plugin_args(rule);
    let Resolver { mut profile, out, .. } = resolver;
    profile.percentage_of_nodes_to_score = rule.spec.percentage_of_nodes_to_score;
    profile.ignored_features = rule.spec.ignored_features.iter().copied().collect();
    if out.found.len() > problems_before {
        return None;
    }
    // The engine validates the whole profile as kube-scheduler validates a configuration (args after
    // defaulting, weights, duplicate names); what it refuses is located at the field that set it.
    if let Err(error) = Engine::new(&profile, 0) {
        let (at, code) = locate_profile_error(&error, rule, doc);
        out.error(at, code, error.to_string());
        return None;
    }
    Some(SchedulerPolicy {
        rule: rule.clone(),
        profile,
        ruleplane_schedulers: Default::default(),
    })
}

fn check_scheduler_name(name: &str, doc: &Node, out: &mut FileDiagnostics) {
    let at = doc.value_pos_of(&path(&["spec", "schedulerName"]));
    if name == "default-scheduler" {
        out.error(
            at,
            DiagnosticCode::Value,
            "`default-scheduler` is kube-scheduler's name; two schedulers placing the same pods would race",
        );
    } else if !is_dns_subdomain(name) {
        out.error(
            at,
            DiagnosticCode::Value,
            format!("schedulerName `{name}` must be a lower-case DNS name such as `my-scheduler`"),
        );
    }
}

/// The preset's profile (`none`: nothing enabled, kube-scheduler's default args).
fn preset(provider: AlgorithmProvider) -> Profile {
    match provider {
        AlgorithmProvider::DefaultProvider => Profile::default_provider(),
        AlgorithmProvider::ClusterAutoscalerProvider => Profile::cluster_autoscaler_provider(),
        AlgorithmProvider::None => Profile {
            filters: Vec::new(),
            scores: Vec::new(),
            args: Default::default(),
            percentage_of_nodes_to_score: 0,
            ignored_features: BTreeSet::new(),
            tie_break: TieBreak::Random,
        },
    }
}

/// A NodeResourcesFit scoring strategy written as score shorthand, and where.
struct FitShorthand {
    index: usize,
    strategy: ScoringStrategy,
    /// Whether `strategy`, `resources` or `shape` were written (a legacy name alone only implies the type).
    explicit: bool,
}

struct Resolver<'d, 'o, 'f> {
    doc: &'d Node,
    out: &'o mut FileDiagnostics<'f>,
    profile: Profile,
    fit_shorthand: Option<FitShorthand>,
    balanced_shorthand: Option<(usize, Vec<super::engine::args::ResourceSpec>)>,
}

impl Resolver<'_, '_, '_> {
    fn error(&mut self, at: &[PathStep], code: DiagnosticCode, message: impl Into<String>) {
        let pos = self.doc.value_pos_of(at);
        self.out.error(pos, code, message);
    }

    /// Built-in filters run in kube-scheduler's order (the enum's), declarative ones after, as written.
    fn filters(&mut self, filters: &[FilterSpec]) {
        let mut builtin: HashMap<FilterPlugin, usize> = HashMap::new();
        let mut declarative = Vec::new();
        for (index, filter) in filters.iter().enumerate() {
            let at = with(&path(&["spec", "filters"]), &[PathStep::Index(index)]);
            match filter {
                FilterSpec::Name(name) => match resolve_filter_name(name) {
                    Ok(plugins) => {
                        for plugin in plugins {
                            if let Some(first) = builtin.insert(plugin, index) {
                                self.error(
                                    &at,
                                    DiagnosticCode::Duplicate,
                                    format!("filter {plugin} is already enabled by spec.filters[{first}]"),
                                );
                            }
                        }
                    }
                    Err(error) => self.error(&at, DiagnosticCode::UnknownPlugin, error.to_string()),
                },
                FilterSpec::NodeValue(args) => {
                    if FilterPlugin::from_name(&args.name).is_some_and(|p| p != FilterPlugin::NodeValue) {
                        self.error(
                            &with(&at, &[key("name")]),
                            DiagnosticCode::Name,
                            format!(
                                "`{}` is a kube-scheduler filter; a NodeValue filter needs a name of its own",
                                args.name
                            ),
                        );
                    } else if let Err(errors) = args.compile() {
                        self.field_errors(&at, &errors);
                    } else {
                        declarative.push(FilterEntry::NodeValue(args.clone()));
                    }
                }
            }
        }
        let mut plugins: Vec<FilterPlugin> = builtin.into_keys().collect();
        plugins.sort();
        self.profile.filters = plugins
            .into_iter()
            .map(FilterEntry::Plugin)
            .chain(declarative)
            .collect();
    }

    fn scores(&mut self, scores: &[ScoreSpec]) {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut entries = Vec::new();
        for (index, score) in scores.iter().enumerate() {
            let at = with(&path(&["spec", "scores"]), &[PathStep::Index(index)]);
            let entry = if score.json_path.is_some() {
                self.node_label(score, &at)
            } else {
                self.builtin_score(score, index, &at)
            };
            let Some(entry) = entry else { continue };
            let name = match &entry {
                ScoreEntry::Plugin { plugin, .. } => plugin.as_str().to_string(),
                ScoreEntry::NodeLabel(args) => args.name.clone(),
            };
            if let Some(first) = seen.insert(name.clone(), index) {
                self.error(
                    &with(&at, &[key("name")]),
                    DiagnosticCode::Duplicate,
                    format!("score {name} is already listed at spec.scores[{first}]"),
                );
                continue;
            }
            entries.push(entry);
        }
        self.profile.scores = entries;
    }

    /// A declarative NodeLabel score: `name` names the instance.
    fn node_label(&mut self, score: &ScoreSpec, at: &[PathStep]) -> Option<ScoreEntry> {
        let builtin = ScorePlugin::from_name(&score.name).filter(|p| *p != ScorePlugin::NodeLabel);
        if let Some(plugin) = builtin {
            self.error(
                &with(at, &[key("jsonPath")]),
                DiagnosticCode::Value,
                format!("`jsonPath` only applies to NodeLabel scores (named as you like), not to {plugin}"),
            );
            return None;
        }
        for (field, written) in [
            ("strategy", score.strategy.is_some()),
            ("resources", !score.resources.is_empty()),
        ] {
            if written {
                self.error(
                    &with(at, &[key(field)]),
                    DiagnosticCode::Value,
                    format!("`{field}` does not apply to a NodeLabel score"),
                );
            }
        }
        let mut shape = Vec::new();
        for (i, point) in score.shape.iter().enumerate() {
            match (point.value, point.utilization) {
                (Some(value), None) => shape.push(ValueScorePoint {
                    value,
                    score: point.score,
                }),
                _ => self.error(
                    &with(at, &[key("shape"), PathStep::Index(i)]),
                    DiagnosticCode::Value,
                    "a NodeLabel shape point is `{value, score}` (`utilization` is for RequestedToCapacityRatio)",
                ),
            }
        }
        let args = NodeLabelArgs {
            name: if score.name == "NodeLabelPriority" {
                "NodeLabel".to_string()
            } else {
                score.name.clone()
            },
            weight: score.weight.unwrap_or(1),
            json_path: score.json_path.clone().unwrap_or_default(),
            values: score.values.clone(),
            shape,
            default_score: score.default_score.unwrap_or(0),
        };
        match args.compile() {
            Ok(_) => Some(ScoreEntry::NodeLabel(args)),
            Err(errors) => {
                self.field_errors(at, &errors);
                None
            }
        }
    }

    fn builtin_score(&mut self, score: &ScoreSpec, index: usize, at: &[PathStep]) -> Option<ScoreEntry> {
        let (plugin, implied) = match resolve_score_name(&score.name) {
            Ok(resolved) => resolved,
            Err(error) => {
                self.error(
                    &with(at, &[key("name")]),
                    DiagnosticCode::UnknownPlugin,
                    error.to_string(),
                );
                return None;
            }
        };
        if plugin == ScorePlugin::NodeLabel {
            self.error(
                &with(at, &[key("name")]),
                DiagnosticCode::MissingField,
                "a NodeLabel score needs a `jsonPath` selecting the node value to score, e.g. `{.metadata.labels.tier}`",
            );
            return None;
        }
        let is_fit = plugin == ScorePlugin::NodeResourcesFit;
        let mut ok = true;
        let mut not_for = |resolver: &mut Self, field: &str, applies_to: &str| {
            ok = false;
            resolver.error(
                &with(at, &[key(field)]),
                DiagnosticCode::Value,
                format!("`{field}` only applies to {applies_to}, not {plugin}"),
            );
        };
        if !score.values.is_empty() {
            not_for(self, "values", "NodeLabel scores (with `jsonPath`)");
        }
        if score.default_score.is_some() {
            not_for(self, "defaultScore", "NodeLabel scores (with `jsonPath`)");
        }
        if score.strategy.is_some() && !is_fit {
            not_for(self, "strategy", "NodeResourcesFit");
        }
        if !score.resources.is_empty() && !is_fit && plugin != ScorePlugin::NodeResourcesBalancedAllocation {
            not_for(
                self,
                "resources",
                "NodeResourcesFit and NodeResourcesBalancedAllocation",
            );
        }
        if let (Some(implied), Some(given)) = (implied, score.strategy)
            && implied != given
        {
            ok = false;
            self.error(
                &with(at, &[key("strategy")]),
                DiagnosticCode::UnknownPlugin,
                format!(
                    "`{}` means NodeResourcesFit with strategy {}, but strategy {} is given",
                    score.name,
                    implied.as_str(),
                    given.as_str()
                ),
            );
        }
        let strategy_type = score.strategy.or(implied);
        let ratio = strategy_type == Some(ScoringStrategyType::RequestedToCapacityRatio);
        let shape_applies = is_fit && ratio;
        if !score.shape.is_empty() && !shape_applies {
            ok = false;
            self.error(
                &with(at, &[key("shape")]),
                DiagnosticCode::Value,
                "`shape` only applies to NodeResourcesFit with strategy RequestedToCapacityRatio, or to a NodeLabel score",
            );
        }
        let mut shape = Vec::new();
        for (i, point) in score.shape.iter().enumerate() {
            match (point.utilization, point.value) {
                (Some(utilization), None) if is_fit && ratio => shape.push(UtilizationShapePoint {
                    utilization,
                    score: i32::try_from(point.score).unwrap_or(i32::MAX),
                }),
                _ if is_fit && ratio => {
                    ok = false;
                    self.error(
                        &with(at, &[key("shape"), PathStep::Index(i)]),
                        DiagnosticCode::Value,
                        "a RequestedToCapacityRatio shape point is `{utilization, score}`",
                    );
                }
                _ => {}
            }
        }
        if is_fit && ratio && score.shape.is_empty() {
            ok = false;
            self.error(
                &with(at, &[key("name")]),
                DiagnosticCode::MissingField,
                "RequestedToCapacityRatio needs a `shape` (points of utilization → score)",
            );
        }
        if !ok {
            return None;
        }
        if is_fit && (strategy_type.is_some() || !score.resources.is_empty()) {
            self.fit_shorthand = Some(FitShorthand {
                index,
                strategy: ScoringStrategy {
                    type_: strategy_type,
                    resources: score.resources.clone(),
                    requested_to_capacity_ratio: ratio.then_some(RequestedToCapacityRatioParam { shape }),
                },
                explicit: score.strategy.is_some() || !score.resources.is_empty() || !score.shape.is_empty(),
            });
        }
        if plugin == ScorePlugin::NodeResourcesBalancedAllocation && !score.resources.is_empty() {
            self.balanced_shorthand = Some((index, score.resources.clone()));
        }
        Some(ScoreEntry::Plugin {
            plugin,
            weight: score.weight.unwrap_or(plugin.default_weight()),
        })
    }

    /// Merges the preset's args, the score shorthands and `pluginArgs` (which may not contradict a shorthand).
    fn plugin_args(&mut self, rule: &SchedulerPolicyRule) {
        let given = &rule.spec.plugin_args;
        let args = &mut self.profile.args;
        let preset_strategy = args.node_resources_fit.scoring_strategy.take();
        args.node_affinity = given.node_affinity.clone();
        args.pod_topology_spread = given.pod_topology_spread.clone();
        args.inter_pod_affinity = given.inter_pod_affinity.clone();
        args.default_preemption = given.default_preemption.clone();
        args.volume_binding = given.volume_binding.clone();
        args.coscheduling = given.coscheduling.clone();
        args.node_resources_fit.ignored_resources = given.node_resources_fit.ignored_resources.clone();
        args.node_resources_fit.ignored_resource_groups = given.node_resources_fit.ignored_resource_groups.clone();
        let shorthand = self.fit_shorthand.take();
        let fit_strategy = match (&given.node_resources_fit.scoring_strategy, shorthand) {
            (Some(written), Some(shorthand)) => {
                let contradicts = shorthand.explicit || written.type_ != shorthand.strategy.type_;
                if contradicts {
                    let at = path(&["spec", "pluginArgs", "NodeResourcesFit", "scoringStrategy"]);
                    self.error(
                        &at,
                        DiagnosticCode::Value,
                        format!(
                            "pluginArgs.NodeResourcesFit.scoringStrategy conflicts with the shorthand of \
                             spec.scores[{}]; set the scoring strategy in one place",
                            shorthand.index
                        ),
                    );
                }
                Some(written.clone())
            }
            (Some(written), None) => Some(written.clone()),
            (None, Some(mut shorthand)) => {
                // A shorthand without a type keeps the preset's (ClusterAutoscalerProvider: MostAllocated;
                // kube-scheduler's default, LeastAllocated, otherwise).
                if shorthand.strategy.type_.is_none() {
                    shorthand.strategy.type_ = Some(
                        preset_strategy
                            .as_ref()
                            .and_then(|s| s.type_)
                            .unwrap_or(ScoringStrategyType::LeastAllocated),
                    );
                }
                Some(shorthand.strategy)
            }
            (None, None) => preset_strategy,
        };
        self.profile.args.node_resources_fit.scoring_strategy = fit_strategy;
        let balanced = match (
            &given.node_resources_balanced_allocation.resources,
            self.balanced_shorthand.take(),
        ) {
            (written, Some((index, _))) if !written.is_empty() => {
                let at = path(&["spec", "pluginArgs", "NodeResourcesBalancedAllocation", "resources"]);
                self.error(
                    &at,
                    DiagnosticCode::Value,
                    format!(
                        "pluginArgs.NodeResourcesBalancedAllocation.resources conflicts with spec.scores[{index}].resources; \
                         set them in one place"
                    ),
                );
                written.clone()
            }
            (_, Some((_, resources))) => resources,
            (written, None) => written.clone(),
        };
        self.profile.args.node_resources_balanced_allocation.resources = balanced;
    }

    /// Reports a declarative plugin's field errors at the fields of its entry.
    fn field_errors(&mut self, entry: &[PathStep], errors: &[FieldError]) {
        for error in errors {
            let at = with(entry, &steps(&error.path.0));
            self.error(&at, DiagnosticCode::Value, error.to_string());
        }
    }
}

fn steps(segments: &[PathSegment]) -> Vec<PathStep> {
    segments
        .iter()
        .map(|segment| match segment {
            PathSegment::Key(name) => key(name),
            PathSegment::Index(index) => PathStep::Index(*index),
        })
        .collect()
}

/// Where in the rule a profile error belongs: the plugin's `pluginArgs` entry, or the score shorthand that set
/// the args, or the list that holds the duplicate.
fn locate_profile_error(
    error: &ProfileError,
    rule: &SchedulerPolicyRule,
    doc: &Node,
) -> (crate::diagnostics::Pos, DiagnosticCode) {
    let spec = path(&["spec"]);
    match error {
        ProfileError::InvalidArgs { plugin, errors } => {
            let under_args = with(&path(&["spec", "pluginArgs"]), &[key(plugin)]);
            let first = errors.first().map(|e| steps(&e.path.0)).unwrap_or_default();
            if doc.locate(&under_args).1 {
                return (doc.value_pos_of(&with(&under_args, &first)), DiagnosticCode::Value);
            }
            // Args set through a score shorthand: point at that score's field.
            let index =
                rule.spec.scores.iter().flatten().position(|score| {
                    resolve_score_name(&score.name).is_ok_and(|(p, _)| p.as_str() == plugin.as_str())
                });
            match index {
                Some(index) => {
                    let field = shorthand_field(&first);
                    let at = with(&path(&["spec", "scores"]), &[PathStep::Index(index), key(field)]);
                    (doc.value_pos_of(&at), DiagnosticCode::Value)
                }
                None => (doc.value_pos_of(&spec), DiagnosticCode::Value),
            }
        }
        ProfileError::DuplicateName { stage, .. } => {
            let list = if *stage == "filter" { "filters" } else { "scores" };
            (doc.value_pos_of(&path(&["spec", list])), DiagnosticCode::Duplicate)
        }
        ProfileError::InvalidWeight { .. } | ProfileError::WeightOverflow => {
            (doc.value_pos_of(&path(&["spec", "scores"])), DiagnosticCode::Range)
        }
        ProfileError::InvalidPercentage(_) => (
            doc.value_pos_of(&path(&["spec", "percentageOfNodesToScore"])),
            DiagnosticCode::Range,
        ),
        ProfileError::NotImplemented { .. } | ProfileError::MissingArgs { .. } => {
            (doc.value_pos_of(&spec), DiagnosticCode::UnknownPlugin)
        }
    }
}

/// The score shorthand field behind a path of NodeResourcesFit / BalancedAllocation args.
fn shorthand_field(args_path: &[PathStep]) -> &'static str {
    let names: Vec<&str> = args_path
        .iter()
        .filter_map(|step| match step {
            PathStep::Key(name) => Some(name.as_str()),
            PathStep::Index(_) => None,
        })
        .collect();
    if names.contains(&"shape") {
        "shape"
    } else if names.contains(&"resources") {
        "resources"
    } else if names.contains(&"type") {
        "strategy"
    } else {
        "name"
    }
}
