//! Checks of a Reconciler's status fields: reserved names, paths and templates naming existing children/lookups.

use super::super::resolved::{StatusField, StatusSource};
use super::super::types::{ChildTemplate, ReconcilerRule, StatusExpression};
use super::dependencies::referenced_children;
use crate::diagnostics::{DiagnosticCode, FileDiagnostics, did_you_mean};
use crate::jsonpath::CompiledPath;
use crate::load::{check_embedded_template, check_json_path, key, path, with};
use crate::template::Partials;
use crate::yaml_tree::{Node, PathStep};

/// The parent's status fields the worker writes itself, never projected.
const RESERVED_STATUS_FIELDS: &[&str] = &["conditions", "observedGeneration"];

/// Checks `status` and compiles the fields without a problem.
pub(super) fn check_status(
    rule: &ReconcilerRule,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Vec<StatusField> {
    let spec_path = path(&["spec"]);
    let mut status = Vec::new();
    for (field, expression) in &rule.spec.status {
        let field_path = with(&spec_path, &[key("status"), key(field)]);
        // The worker writes these itself: a projected value would be replaced (or fight with it) on every write.
        if RESERVED_STATUS_FIELDS.contains(&field.as_str()) {
            out.error(
                doc.pos_of(&field_path),
                DiagnosticCode::Name,
                if field == "conditions" {
                    "status field `conditions` is Ruleplane's own (it writes Ready, Synced and the entries of \
                     `spec.conditions` there): declare conditions under `spec.conditions`"
                        .to_string()
                } else {
                    format!("status field `{field}` is Ruleplane's own (it writes `observedGeneration`): choose another name")
                },
            );
        }
        let value = match expression {
            StatusExpression::Path(text) => {
                let path = check_json_path(text, doc, &field_path, out);
                if let Some(path) = &path {
                    let lookups = rule.spec.lookups.keys();
                    check_status_reference(path, &rule.spec.children, lookups, doc, &field_path, out);
                }
                path.map(StatusSource::Path)
            }
            StatusExpression::List(list) => {
                let path_field = with(&field_path, &[key("path")]);
                let path = check_json_path(&list.path, doc, &path_field, out);
                if let Some(path) = &path {
                    let lookups = rule.spec.lookups.keys();
                    check_status_reference(path, &rule.spec.children, lookups, doc, &path_field, out);
                }
                path.map(StatusSource::List)
            }
            StatusExpression::Value(literal) => Some(StatusSource::Literal(literal.value.clone())),
            StatusExpression::Template(template) => {
                let template_path = with(&field_path, &[key("template")]);
                check_template_status_references(&template.template, &rule.spec.children, doc, &template_path, out);
                check_embedded_template(&template.template, doc, &template_path, lines, out, partials)
                    .map(|compiled| StatusSource::Template(compiled, template.value_type))
            }
        };
        if let Some(value) = value {
            status.push(StatusField {
                name: field.clone(),
                value,
            });
        }
    }
    status
}

/// A status path naming a child id or lookup that does not exist would silently stay empty: report it.
pub(super) fn check_status_reference<'a>(
    path: &CompiledPath,
    children: &[ChildTemplate],
    lookups: impl Iterator<Item = &'a String>,
    doc: &Node,
    field_path: &[PathStep],
    out: &mut FileDiagnostics,
) {
    // Read by the JSONPath parser: `children[?…]`, `children[*]` name no child, `children.svc['x']` names `svc`.
    let names = path.leading_names();
    let lookups: Vec<&String> = lookups.collect();
    match (names.first().copied(), names.get(1).copied()) {
        (Some("children" | "ready"), Some(id)) if !id.is_empty() && !children.iter().any(|c| c.id == id) => {
            let suggestion = did_you_mean(id, children.iter().map(|c| c.id.as_str()));
            out.error(
                doc.value_pos_of(field_path),
                DiagnosticCode::Reference,
                format!("status refers to child `{id}`, which is not among `children`{suggestion}"),
            );
        }
        (Some("lookups"), Some(name)) if !name.is_empty() && !lookups.iter().any(|l| l.as_str() == name) => {
            let suggestion = did_you_mean(name, lookups.iter().map(|l| l.as_str()));
            out.error(
                doc.value_pos_of(field_path),
                DiagnosticCode::Reference,
                format!("status refers to lookup `{name}`, which is not among `lookups`{suggestion}"),
            );
        }
        _ => {}
    }
}

/// A status template's `children.<id>` and `ready.<id>` must name children of the rule: a misspelt id would only
/// show as a missing field once a parent is reconciled.
pub(super) fn check_template_status_references(
    text: &str,
    children: &[ChildTemplate],
    doc: &Node,
    template_path: &[PathStep],
    out: &mut FileDiagnostics,
) {
    let ready = text.replace("ready.", "children.");
    for id in referenced_children(&ready) {
        if !children.iter().any(|child| child.id == id) {
            let suggestion = did_you_mean(&id, children.iter().map(|c| c.id.as_str()));
            out.error(
                doc.value_pos_of(template_path),
                DiagnosticCode::Reference,
                format!("status template refers to child `{id}`, which is not among `children`{suggestion}"),
            );
        }
    }
}
