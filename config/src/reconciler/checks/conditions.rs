//! Checks of a Reconciler's own conditions: types (not Ready/Synced, unique), templates, `forEach`.

use super::super::conditions::{ConditionType, RESERVED_CONDITION_TYPES, ResolvedCondition, is_condition_type};
use super::super::types::{ConditionTemplate, ReconcilerRule};
use super::children::{CONTEXT_NAMES, is_helper_name};
use super::status::{check_status_reference, check_template_status_references};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::jsonpath::CompiledPath;
use crate::load::{check_embedded_template, check_json_path, is_identifier, key, path, with};
use crate::template::Partials;
use crate::yaml_tree::{Node, PathStep};

/// Checks `conditions` and compiles the entries without a problem.
pub(super) fn check_conditions(
    rule: &ReconcilerRule,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Vec<ResolvedCondition> {
    let mut compiled = Vec::new();
    let mut literal_types: Vec<&str> = Vec::new();
    for (index, condition) in rule.spec.conditions.iter().enumerate() {
        let entry_path = with(&path(&["spec", "conditions"]), &[PathStep::Index(index)]);
        let problems_before = out.found.len();
        let template_at = |field: &str, text: &str, out: &mut FileDiagnostics| {
            let field_path = with(&entry_path, &[key(field)]);
            check_template_status_references(text, &rule.spec.children, doc, &field_path, out);
            check_embedded_template(text, doc, &field_path, lines, out, partials)
        };
        let for_each = check_for_each(rule, condition, doc, &entry_path, out);
        let type_path = with(&entry_path, &[key("type")]);
        let type_ = if condition.for_each.is_empty() {
            check_literal_type(&condition.type_, &literal_types, doc, &type_path, out);
            literal_types.push(&condition.type_);
            Some(ConditionType::Literal(condition.type_.clone()))
        } else if !condition.type_.contains("{{") {
            out.error(
                doc.value_pos_of(&type_path),
                DiagnosticCode::Value,
                format!(
                    "condition `{}` has `forEach`: its type must be a template over the item (e.g. \
                     `'{{{{db.name}}}}Ready'`), or every item would write the same condition",
                    condition.type_
                ),
            );
            None
        } else {
            template_at("type", &condition.type_, out).map(ConditionType::Template)
        };
        let status = template_at("status", &condition.status, out);
        let reason = condition.reason.as_ref().map(|text| template_at("reason", text, out));
        let message = condition.message.as_ref().map(|text| template_at("message", text, out));
        if out.found.len() > problems_before {
            continue;
        }
        if let (Some(type_), Some(status), Some(reason), Some(message), Some(for_each)) = (
            type_,
            status,
            reason.map_or(Some(None), |t| t.map(Some)),
            message.map_or(Some(None), |t| t.map(Some)),
            for_each,
        ) {
            compiled.push(ResolvedCondition {
                type_,
                written_type: condition.type_.clone(),
                status,
                reason,
                message,
                for_each,
                event: condition.event,
                source: out.location(doc.pos_of(&entry_path)),
            });
        }
    }
    compiled
}

/// A literal type: valid, not one of Ruleplane's own, not declared twice.
fn check_literal_type(type_: &str, before: &[&str], doc: &Node, type_path: &[PathStep], out: &mut FileDiagnostics) {
    let problem = if RESERVED_CONDITION_TYPES.contains(&type_) {
        Some((
            DiagnosticCode::Name,
            format!(
                "condition type `{type_}` is Ruleplane's own (it writes `Ready` and `Synced`): choose another type"
            ),
        ))
    } else if type_.contains("{{") {
        Some((
            DiagnosticCode::Value,
            format!("condition type `{type_}` is a template: only a `forEach` condition's type may be one"),
        ))
    } else if !is_condition_type(type_) {
        Some((
            DiagnosticCode::Value,
            format!(
                "condition type `{type_}` must be CamelCase letters, digits, `-`, `_` or `.` (optionally after a \
                 DNS prefix and `/`), starting and ending with a letter or digit"
            ),
        ))
    } else if before.contains(&type_) {
        Some((
            DiagnosticCode::Duplicate,
            format!("condition type `{type_}` is declared twice"),
        ))
    } else {
        None
    };
    if let Some((code, message)) = problem {
        out.error(doc.value_pos_of(type_path), code, message);
    }
}

/// Checks a condition's `forEach`: `Some(None)` without one, `None` when something was reported.
fn check_for_each(
    rule: &ReconcilerRule,
    condition: &ConditionTemplate,
    doc: &Node,
    entry_path: &[PathStep],
    out: &mut FileDiagnostics,
) -> Option<Option<(String, CompiledPath)>> {
    let for_each_path = with(entry_path, &[key("forEach")]);
    let Some(entry) = condition.for_each.first() else {
        return Some(None);
    };
    let single = match entry.iter().next() {
        Some(binding) if condition.for_each.len() == 1 && entry.len() == 1 => Some(binding),
        _ => None,
    };
    let Some((name, text)) = single else {
        out.error(
            doc.pos_of(&for_each_path),
            DiagnosticCode::Structure,
            format!(
                "condition `{}`: `forEach` is one entry `name: '<JSONPath>'` (conditions are not combined)",
                condition.type_
            ),
        );
        return None;
    };
    let name_path = with(&for_each_path, &[PathStep::Index(0), key(name)]);
    let index_name = format!("{name}_index");
    let problem = if !is_identifier(name) {
        Some(format!(
            "`{name}` must be letters, digits and `_` (templates refer to it as `{{{{{name}}}}}`)"
        ))
    } else if let Some(taken) = [name.as_str(), index_name.as_str()]
        .into_iter()
        .find(|bound| CONTEXT_NAMES.contains(bound) || *bound == "ready")
    {
        Some(format!(
            "`{taken}` would hide the status scope's `{taken}`: choose another name"
        ))
    } else if is_helper_name(name) {
        Some(format!(
            "`{name}` is a template helper (`{{{{{name} …}}}}`): choose another name"
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        out.error(
            doc.pos_of(&name_path),
            DiagnosticCode::Name,
            format!("condition `{}`: forEach name {problem}", condition.type_),
        );
        return None;
    }
    let path = check_json_path(text, doc, &name_path, out)?;
    check_status_reference(
        &path,
        &rule.spec.children,
        rule.spec.lookups.keys(),
        doc,
        &name_path,
        out,
    );
    Some(Some((name.clone(), path)))
}
