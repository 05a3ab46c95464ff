//! Semantic checks of a Reconciler: lookups, children (templates, ids, kinds), readyWhen and status paths.

mod children;
mod conditions;
mod dependencies;
mod lookups;
mod patches;
mod status;

use std::collections::HashMap;

use super::render::is_object_name;
use super::resolved::Reconciler;
use super::types::ReconcilerRule;
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::load::{check_api_version_format, check_selector, path};
use crate::naming::is_dns_label;
use crate::template::Partials;
use crate::yaml_tree::Node;

/// Checks a Reconciler and, when it has no problem, returns it with everything compiled.
pub(crate) fn check_reconciler(
    rule: &ReconcilerRule,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Option<Reconciler> {
    let problems_before = out.found.len();
    check_api_version_format(
        &rule.spec.watched.api_version,
        doc,
        &path(&["spec", "for", "apiVersion"]),
        out,
    );
    if let Some(selector) = &rule.spec.watched.selector {
        check_selector(selector, doc, &path(&["spec", "for", "selector"]), out);
    }
    if let Some(namespace) = &rule.spec.watched.namespace
        && !is_dns_label(namespace)
    {
        out.error(
            doc.value_pos_of(&path(&["spec", "for", "namespace"])),
            DiagnosticCode::Value,
            format!("namespace `{namespace}` must be a lower-case DNS label"),
        );
    }
    if let Some(name) = &rule.spec.watched.name
        && !is_object_name(&rule.spec.watched.api_version, name)
    {
        out.error(
            doc.value_pos_of(&path(&["spec", "for", "name"])),
            DiagnosticCode::Value,
            format!("`for.name` `{name}` must be a literal object name (lower-case letters, digits, `-` and `.`)"),
        );
    }
    if rule.spec.children.is_empty() && rule.spec.patches.is_empty() {
        out.error(
            doc.pos_of(&path(&["spec"])),
            DiagnosticCode::MissingField,
            "a Reconciler needs `children`, `patches` or both: with neither it would do nothing",
        );
    }
    let lookups = lookups::check_lookups(rule, doc, lines, out, partials);
    let mut ids = HashMap::new();
    let children = children::check_children(rule, false, &mut ids, doc, lines, out, partials);
    let finalize_children = if rule.spec.finalize.is_some() {
        children::check_children(rule, true, &mut ids, doc, lines, out, partials)
    } else {
        Vec::new()
    };
    let status = status::check_status(rule, doc, lines, out, partials);
    let conditions = conditions::check_conditions(rule, doc, lines, out, partials);
    let patches = patches::check_patches(rule, doc, lines, out, partials);
    let render_order = dependencies::check_dependencies(&children, &rule.spec.children, doc, lines, out);
    if out.found.len() > problems_before {
        return None;
    }
    Some(Reconciler {
        rule: rule.clone(),
        children,
        finalize_children,
        lookups,
        status,
        conditions,
        patches,
        kinds: Default::default(),
        render_order,
        partials: partials.clone(),
    })
}
