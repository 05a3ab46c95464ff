//! Semantic checks of a SchedulerPolicy: scheduler name, plugin names and their arguments.

use std::collections::HashMap;

use super::plugins::{FilterPlugin, ScorePlugin, resolve_filter_name};
use super::resolved::SchedulerPolicy;
use super::types::{SchedulerPolicyRule, ScoringStrategy};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::load::{check_json_path, key, path, with};
use crate::naming::is_dns_subdomain;
use crate::yaml_tree::{Node, PathStep};

/// Checks a SchedulerPolicy and, when it has no problem, returns it resolved: aliases expanded, provider
/// defaults and default weights filled in, JSONPaths compiled.
pub(crate) fn check_scheduler_policy(
    rule: &SchedulerPolicyRule,
    doc: &Node,
    out: &mut FileDiagnostics,
) -> Option<SchedulerPolicy> {
    let problems_before = out.found.len();
    let spec = &rule.spec;
    let name_path = path(&["spec", "schedulerName"]);
    if spec.scheduler_name == "default-scheduler" {
        out.error(
            doc.value_pos_of(&name_path),
            DiagnosticCode::Value,
            "`default-scheduler` is kube-scheduler's name; two schedulers placing the same pods would race",
        );
    } else if !is_dns_subdomain(&spec.scheduler_name) {
        out.error(
            doc.value_pos_of(&name_path),
            DiagnosticCode::Value,
            format!(
                "schedulerName `{}` must be a lower-case DNS name such as `my-scheduler`",
                spec.scheduler_name
            ),
        );
    }
    let mut seen_filters: HashMap<FilterPlugin, usize> = HashMap::new();
    let mut filters = Vec::new();
    for (index, name) in spec.filters.iter().flatten().enumerate() {
        let at = doc.value_pos_of(&with(&path(&["spec", "filters"]), &[PathStep::Index(index)]));
        match resolve_filter_name(name) {
            Ok(plugins) => {
                for plugin in plugins {
                    if let Some(first) = seen_filters.insert(plugin, index) {
                        out.error(
                            at,
                            DiagnosticCode::Duplicate,
                            format!("filter {plugin} is already enabled by spec.filters[{first}]"),
                        );
                    } else {
                        filters.push(plugin);
                    }
                }
            }
            Err(error) => out.error(at, DiagnosticCode::UnknownPlugin, error.to_string()),
        }
    }
    let mut seen_scores: HashMap<ScorePlugin, usize> = HashMap::new();
    let mut scores = Vec::new();
    for (index, score) in spec.scores.iter().flatten().enumerate() {
        let score_path = with(&path(&["spec", "scores"]), &[PathStep::Index(index)]);
        let at = |field: &str| doc.value_pos_of(&with(&score_path, &[key(field)]));
        let mut resolved = match score.resolve() {
            Ok(resolved) => resolved,
            Err(error) => {
                out.error(at(error.field()), DiagnosticCode::UnknownPlugin, error.to_string());
                continue;
            }
        };
        let plugin = resolved.plugin;
        if let Some(first) = seen_scores.insert(plugin, index) {
            out.error(
                at("name"),
                DiagnosticCode::Duplicate,
                format!("score {plugin} is already listed at spec.scores[{first}]"),
            );
        }
        let is_fit = plugin == ScorePlugin::NodeResourcesFit;
        let is_ratio = resolved.strategy == Some(ScoringStrategy::RequestedToCapacityRatio);
        let is_label = plugin == ScorePlugin::NodeLabel;
        if !score.resources.is_empty()
            && !matches!(
                plugin,
                ScorePlugin::NodeResourcesFit | ScorePlugin::NodeResourcesBalancedAllocation
            )
        {
            out.error(
                at("resources"),
                DiagnosticCode::Value,
                format!(
                    "`resources` only applies to NodeResourcesFit and NodeResourcesBalancedAllocation, not {plugin}"
                ),
            );
        }
        let mut resource_names: HashMap<&str, ()> = HashMap::new();
        for resource in &score.resources {
            if resource_names.insert(&resource.name, ()).is_some() {
                out.error(
                    at("resources"),
                    DiagnosticCode::Duplicate,
                    format!("resource `{}` is listed twice", resource.name),
                );
            }
        }
        if is_fit && is_ratio {
            if score.shape.is_empty() {
                out.error(
                    at("name"),
                    DiagnosticCode::MissingField,
                    "RequestedToCapacityRatio needs a `shape` (points of utilization → score)",
                );
            }
            if score
                .shape
                .windows(2)
                .any(|pair| pair[0].utilization >= pair[1].utilization)
            {
                out.error(
                    at("shape"),
                    DiagnosticCode::Value,
                    "shape points must have strictly increasing `utilization`",
                );
            }
        } else if !score.shape.is_empty() {
            out.error(
                at("shape"),
                DiagnosticCode::Value,
                "`shape` only applies to NodeResourcesFit with strategy RequestedToCapacityRatio",
            );
        }
        if is_label {
            match &score.json_path {
                None => out.error(
                    at("name"),
                    DiagnosticCode::MissingField,
                    "NodeLabel needs a `jsonPath` selecting the node value to score, e.g. `{.metadata.labels.tier}`",
                ),
                Some(expression) => {
                    resolved.json_path = check_json_path(expression, doc, &with(&score_path, &[key("jsonPath")]), out);
                }
            }
            if score.values.is_empty() {
                out.error(
                    at("name"),
                    DiagnosticCode::MissingField,
                    "NodeLabel needs `values`: the score (0–100) of each value",
                );
            }
            for (value, points) in &score.values {
                if *points > 100 {
                    out.error(
                        doc.value_pos_of(&with(&score_path, &[key("values"), key(value)])),
                        DiagnosticCode::Range,
                        format!("score {points} for `{value}` is greater than the maximum 100"),
                    );
                }
            }
        } else {
            if score.json_path.is_some() {
                out.error(
                    at("jsonPath"),
                    DiagnosticCode::Value,
                    format!("`jsonPath` only applies to NodeLabel, not {plugin}"),
                );
            }
            if !score.values.is_empty() {
                out.error(
                    at("values"),
                    DiagnosticCode::Value,
                    format!("`values` only applies to NodeLabel, not {plugin}"),
                );
            }
        }
        scores.push(resolved);
    }
    if out.found.len() > problems_before {
        return None;
    }
    Some(SchedulerPolicy {
        rule: rule.clone(),
        filters: match &spec.filters {
            Some(_) => filters,
            None => spec.algorithm_provider.filters(),
        },
        scores: match &spec.scores {
            Some(_) => scores,
            None => spec.algorithm_provider.scores(),
        },
    })
}
