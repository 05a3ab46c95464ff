//! One document → one typed rule: kind dispatch, the schema check, conversion and the kind's own checks.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::RuleDocument;
use super::fields::path;
use super::schema_check::SchemaChecker;
use crate::common::{API_VERSION, RuleKind};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics, did_you_mean};
use crate::reconciler::{ReconcilerRule, check_reconciler};
use crate::resource_definition::{ResourceDefinitionRule, check_resource_definition, check_resource_definition_fields};
use crate::rule_set::Rule;
use crate::scheduler::{SchedulerPolicyRule, check_scheduler_policy};
use crate::schema::{cached_schema, kind_schema_ref};
use crate::template::Partials;
use crate::yaml_tree::{Node, NodeValue, PathStep};

/// the same run, but the load fails.
pub(crate) fn load_document(
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Option<(RuleDocument, Option<Rule>)> {
    if !matches!(doc.value, NodeValue::Map(_)) {
        out.error(
            doc.pos,
            DiagnosticCode::Structure,
            format!(
                "a rule must be a mapping with apiVersion, kind, metadata and spec, found a {}",
                doc.type_name()
            ),
        );
        return None;
    }
    let kind_node = doc.get("kind");
    let kind = match kind_node.map(|node| (node, node.as_str())) {
        None => {
            out.error(
                doc.pos,
                DiagnosticCode::MissingField,
                "missing required field `kind` (ResourceDefinition, Reconciler or SchedulerPolicy)",
            );
            None
        }
        Some((node, None)) => {
            out.error(
                node.pos,
                DiagnosticCode::Type,
                "`kind` must be a string: ResourceDefinition, Reconciler or SchedulerPolicy",
            );
            None
        }
        Some((node, Some(name))) => match RuleKind::from_name(name) {
            Some(kind) => Some(kind),
            None => {
                out.error(node.pos, DiagnosticCode::UnknownKind, unknown_kind_message(name));
                None
            }
        },
    };
    let Some(kind) = kind else {
        // Still report a wrong apiVersion: both mistakes usually come together (a pasted Kubernetes object).
        if let Some(api_version) = doc.get("apiVersion")
            && api_version.as_str() != Some(API_VERSION)
        {
            out.error(
                api_version.pos,
                DiagnosticCode::Value,
                format!("rules have `apiVersion: {API_VERSION}`"),
            );
        }
        return None;
    };
    let schema = cached_schema();
    let mut checker = SchemaChecker::new(schema);
    let kind_schema = kind_schema_ref(kind);
    checker.check(&kind_schema, doc, &mut Vec::new(), doc.pos);
    if !checker.issues.is_empty() {
        let issue_paths: Vec<Vec<PathStep>> = checker.issues.iter().map(|issue| issue.path.clone()).collect();
        for issue in checker.issues {
            out.error(issue.pos, issue.code, issue.message);
        }
        check_degraded(kind, doc, &issue_paths, lines, out, partials);
        return None;
    }
    let source = out.location(doc.pos);
    let problems_before = out.found.len();
    let (document, resolved) = match kind {
        RuleKind::ResourceDefinition => {
            let mut rule: ResourceDefinitionRule = convert(doc, out)?;
            rule.source = source;
            check_resource_definition(&mut rule, doc, out);
            let resolved = (out.found.len() == problems_before).then(|| Rule::ResourceDefinition(rule.clone()));
            (RuleDocument::ResourceDefinition(rule), resolved)
        }
        RuleKind::Reconciler => {
            let mut rule: ReconcilerRule = convert(doc, out)?;
            rule.source = source;
            let resolved = check_reconciler(&rule, doc, lines, out, partials).map(Rule::Reconciler);
            (RuleDocument::Reconciler(rule), resolved)
        }
        RuleKind::SchedulerPolicy => {
            let mut rule: SchedulerPolicyRule = convert(doc, out)?;
            rule.source = source;
            let resolved = check_scheduler_policy(&rule, doc, out).map(Rule::SchedulerPolicy);
            (RuleDocument::SchedulerPolicy(rule), resolved)
        }
    };
    check_rule_name(document.name(), doc, out);
    // A bad name is reported too; the rule is then not used even if its own checks passed.
    let resolved = resolved.filter(|_| out.found.len() == problems_before);
    Some((document, resolved))
}

/// Runs the rule's own semantic checks on a document with structural errors, so that one run reports those
/// too (a template error is not hidden behind a misspelled field elsewhere).
///
/// The offending fields are removed and the rest is read with defaults; if that still does not make a rule,
/// nothing more is checked. Checks whose verdict could change through a removed field (naming and storage
/// versions of a ResourceDefinition) are skipped, and the rule takes no part in the rule-set checks.
fn check_degraded(
    kind: RuleKind,
    doc: &Node,
    issue_paths: &[Vec<PathStep>],
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) {
    // Removing a list item would shift the indexes that positions are looked up by: give up instead.
    if issue_paths
        .iter()
        .any(|path| !matches!(path.last(), Some(PathStep::Key(_))))
    {
        return;
    }
    let mut pruned = doc.to_json();
    for path in issue_paths {
        remove_path(&mut pruned, path);
    }
    match kind {
        RuleKind::ResourceDefinition => {
            if let Ok(mut rule) = serde_json::from_value::<ResourceDefinitionRule>(pruned) {
                check_resource_definition_fields(&mut rule, doc, out);
            }
        }
        RuleKind::Reconciler => {
            // Only the problems matter here: a degraded document never becomes a rule.
            if let Ok(rule) = serde_json::from_value::<ReconcilerRule>(pruned) {
                let _ = check_reconciler(&rule, doc, lines, out, partials);
            }
        }
        RuleKind::SchedulerPolicy => {
            if let Ok(rule) = serde_json::from_value::<SchedulerPolicyRule>(pruned) {
                let _ = check_scheduler_policy(&rule, doc, out);
            }
        }
    }
}

fn remove_path(value: &mut Value, path: &[PathStep]) {
    let Some((PathStep::Key(last), parents)) = path.split_last() else {
        return;
    };
    let mut current = value;
    for step in parents {
        let next = match step {
            PathStep::Key(key) => current.get_mut(key.as_str()),
            PathStep::Index(index) => current.get_mut(*index),
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Value::Object(fields) = current {
        fields.remove(last);
    }
}

fn unknown_kind_message(name: &str) -> String {
    let hint = match name {
        "ThirdPartyResource" | "CustomResourceDefinition" => {
            " (declare resource types with `kind: ResourceDefinition`)".to_string()
        }
        "Policy" | "KubeSchedulerConfiguration" => " (declare schedulers with `kind: SchedulerPolicy`)".to_string(),
        "Controller" | "Operator" => " (declare controllers with `kind: Reconciler`)".to_string(),
        crate::rule_test::RULE_TEST_KIND => {
            " (tests go in files named `*.test.yaml`, which `ruleplane test` runs and the manager skips)".to_string()
        }
        _ => {
            let suggestion = did_you_mean(name, RuleKind::ALL.iter().map(|k| k.as_str()));
            if !suggestion.is_empty() {
                return format!("unknown rule kind `{name}`{suggestion}");
            }
            String::new()
        }
    };
    format!("unknown rule kind `{name}`{hint}; rule kinds are ResourceDefinition, Reconciler and SchedulerPolicy")
}

/// The schema check guarantees the shape, so this only fails on a mismatch between schema and types.
fn convert<T: DeserializeOwned>(doc: &Node, out: &mut FileDiagnostics) -> Option<T> {
    match serde_json::from_value(doc.to_json()) {
        Ok(value) => Some(value),
        Err(error) => {
            out.error(doc.pos, DiagnosticCode::Structure, format!("invalid rule: {error}"));
            None
        }
    }
}

/// Rule names end up as label values (`ruleplane.dev/rule`), so they must be valid ones.
fn check_rule_name(name: &str, doc: &Node, out: &mut FileDiagnostics) {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'));
    if !valid {
        out.error(
            doc.value_pos_of(&path(&["metadata", "name"])),
            DiagnosticCode::Name,
            format!(
                "rule name `{name}` must be at most 63 lower-case letters, digits, `-` and `.`, starting and \
                 ending with a letter or digit (it is used as a label value)"
            ),
        );
    }
}
