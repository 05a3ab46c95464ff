//! Checks of a Reconciler's lookups: by name (templated name and namespace) or by selector.

use super::super::resolved::{LookupTarget, ResolvedLookup, Selection, SelectionNamespace};
use super::super::types::{DEFAULT_LOOKUP_MAX_ITEMS, Lookup, ReconcilerRule};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::load::{
    check_api_version_format, check_embedded_template, check_json_path, check_selector, is_identifier, key, path, with,
};
use crate::naming::is_dns_label;
use crate::template::Partials;
use crate::yaml_tree::{Node, PathStep};

/// Checks `lookups` and compiles those without a problem.
pub(super) fn check_lookups(
    rule: &ReconcilerRule,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Vec<ResolvedLookup> {
    let spec_path = path(&["spec"]);
    let mut lookups = Vec::new();
    for (name, lookup) in &rule.spec.lookups {
        let lookup_path = with(&spec_path, &[key("lookups"), key(name)]);
        if !is_identifier(name) {
            out.error(
                doc.pos_of(&lookup_path),
                DiagnosticCode::Name,
                format!(
                    "lookup name `{name}` must be letters, digits and `_` (templates refer to it as `lookups.{name}`)"
                ),
            );
        }
        check_api_version_format(&lookup.api_version, doc, &with(&lookup_path, &[key("apiVersion")]), out);
        let template_at = |field: &str, text: &str, out: &mut FileDiagnostics| {
            check_embedded_template(text, doc, &with(&lookup_path, &[key(field)]), lines, out, partials)
        };
        let json_path = lookup
            .json_path
            .as_ref()
            .map(|text| check_json_path(text, doc, &with(&lookup_path, &[key("jsonPath")]), out));
        let target = match (&lookup.name, &lookup.selector) {
            (Some(object_name), None) => {
                for (field, set) in [
                    ("allNamespaces", lookup.all_namespaces),
                    ("maxItems", lookup.max_items.is_some()),
                ] {
                    if set {
                        out.error(
                            doc.pos_of(&with(&lookup_path, &[key(field)])),
                            DiagnosticCode::Value,
                            format!("lookup `{name}`: `{field}` is for a lookup by `selector`, not by `name`"),
                        );
                    }
                }
                let name_template = template_at("name", object_name, out);
                let namespace_template = lookup
                    .namespace
                    .as_ref()
                    .map(|text| template_at("namespace", text, out));
                match (name_template, namespace_template.map_or(Some(None), |t| t.map(Some))) {
                    (Some(name), Some(namespace)) => Some(LookupTarget::Named { name, namespace }),
                    _ => None,
                }
            }
            (None, Some(selector)) => {
                check_selector(selector, doc, &with(&lookup_path, &[key("selector")]), out);
                check_selection(name, lookup, doc, &lookup_path, out).map(LookupTarget::Selected)
            }
            (Some(_), Some(_)) | (None, None) => {
                out.error(
                    doc.pos_of(&lookup_path),
                    DiagnosticCode::Value,
                    format!(
                        "lookup `{name}` needs exactly one of `name` (one object) and `selector` (the list of objects \
                         whose labels match)"
                    ),
                );
                None
            }
        };
        // A part that failed to compile was reported; the rule is then not returned at all.
        if let (Some(target), Some(json_path)) = (target, json_path.map_or(Some(None), |p| p.map(Some))) {
            lookups.push(ResolvedLookup {
                name: name.clone(),
                spec: lookup.clone(),
                target,
                json_path,
                namespaced: true,
            });
        }
    }
    lookups
}

/// A selector lookup's namespace and cap, checked: its namespace is a literal (a template would let data read from
/// the cluster choose where the selector reads), and not given together with `allNamespaces`.
fn check_selection(
    name: &str,
    lookup: &Lookup,
    doc: &Node,
    lookup_path: &[PathStep],
    out: &mut FileDiagnostics,
) -> Option<Selection> {
    let namespace = match (&lookup.namespace, lookup.all_namespaces) {
        (Some(_), true) => {
            out.error(
                doc.pos_of(&with(lookup_path, &[key("allNamespaces")])),
                DiagnosticCode::Value,
                format!("lookup `{name}`: `namespace` and `allNamespaces` exclude each other"),
            );
            return None;
        }
        (Some(namespace), false) if !is_dns_label(namespace) => {
            let message = if namespace.contains("{{") {
                format!(
                    "lookup `{name}`: a selector lookup's namespace must be a literal: data read from the cluster \
                     must not choose where it reads (`allNamespaces: true` reads every namespace)"
                )
            } else {
                format!("lookup `{name}`: namespace `{namespace}` must be a lower-case DNS label")
            };
            out.error(
                doc.value_pos_of(&with(lookup_path, &[key("namespace")])),
                DiagnosticCode::Value,
                message,
            );
            return None;
        }
        (Some(namespace), false) => SelectionNamespace::Literal(namespace.clone()),
        (None, true) => SelectionNamespace::All,
        (None, false) => SelectionNamespace::Parent,
    };
    let selector = lookup.selector.clone()?;
    Some(Selection {
        selector,
        namespace,
        max_items: usize::try_from(lookup.max_items.unwrap_or(DEFAULT_LOOKUP_MAX_ITEMS)).unwrap_or(usize::MAX),
    })
}
