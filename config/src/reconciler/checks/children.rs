//! Checks of a Reconciler's children: ids, templates with a literal kind, readyWhen/includeWhen, collections.

use std::collections::HashMap;

use super::super::resolved::{Child, Collection, CollectionItems, ItemSource};
use super::super::types::{ChildTemplate, DEFAULT_MAX_ITEMS, ReconcilerRule, is_item_template};
use super::dependencies::{collection_paths, collection_reads, referenced_children};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::load::{check_embedded_template, check_json_path, is_identifier, key, path, with};
use crate::template::Partials;
use crate::yaml_tree::{Node, PathStep};

/// Checks `children` (or `finalize.children`) and compiles those without a problem; `ids` holds the ids seen so
/// far, in both lists.
pub(super) fn check_children(
    rule: &ReconcilerRule,
    in_finalize: bool,
    ids: &mut HashMap<String, String>,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Vec<Child> {
    let (list_path, children) = match (&rule.spec.finalize, in_finalize) {
        (Some(finalize), true) => (path(&["spec", "finalize", "children"]), finalize.children.as_slice()),
        _ => (path(&["spec", "children"]), rule.spec.children.as_slice()),
    };
    let mut compiled = Vec::new();
    for (index, child) in children.iter().enumerate() {
        let child_path = with(&list_path, &[PathStep::Index(index)]);
        let id_path = with(&child_path, &[key("id")]);
        let here = crate::yaml_tree::path_to_string(&child_path);
        if let Some(first) = ids.insert(child.id.clone(), here) {
            out.error(
                doc.value_pos_of(&id_path),
                DiagnosticCode::Duplicate,
                format!("child id `{}` is already used by {first}", child.id),
            );
        }
        let template_path = with(&child_path, &[key("template")]);
        let template_pos = doc.value_pos_of(&template_path);
        let template = check_embedded_template(&child.template, doc, &template_path, lines, out, partials);
        let static_kind = child.static_kind();
        if template.is_some() && static_kind.is_none() {
            out.error(
                template_pos,
                DiagnosticCode::Template,
                format!(
                    "child `{}`: the template must spell out `apiVersion:` and `kind:` literally on top-level \
                     lines (they tell Ruleplane which kinds to watch and to grant access to)",
                    child.id
                ),
            );
        }
        let ready_when = child
            .ready_when
            .as_ref()
            .map(|text| check_json_path(text, doc, &with(&child_path, &[key("readyWhen")]), out));
        let include_when = child
            .include_when
            .as_ref()
            .map(|text| check_json_path(text, doc, &with(&child_path, &[key("includeWhen")]), out));
        let namespace = child.namespace.as_ref().map(|text| {
            check_embedded_template(text, doc, &with(&child_path, &[key("namespace")]), lines, out, partials)
        });
        if child.recreate && in_finalize {
            out.error(
                doc.value_pos_of(&with(&child_path, &[key("recreate")])),
                DiagnosticCode::Value,
                format!(
                    "child `{}`: `recreate` is for `children`; a `finalize` child is applied once, while its \
                     parent is deleted",
                    child.id
                ),
            );
        }
        if child.retain && child.recreate {
            out.error(
                doc.value_pos_of(&with(&child_path, &[key("recreate")])),
                DiagnosticCode::Value,
                format!(
                    "child `{}`: `recreate` deletes the object to create it again, which a `retain: true` child \
                     must never be; drop one of them",
                    child.id
                ),
            );
        }
        let collection = check_collection(child, in_finalize, (doc, &child_path, lines), out, partials);
        let hand_over = check_hand_over(&child.hand_over, doc, &with(&child_path, &[key("handOver")]), out);
        if let (
            Some(template),
            Some((api_version, kind)),
            Some(ready_when),
            Some(include_when),
            Some(namespace),
            Some(collection),
        ) = (
            template,
            static_kind,
            ready_when.map_or(Some(None), |p| p.map(Some)),
            include_when.map_or(Some(None), |p| p.map(Some)),
            namespace.map_or(Some(None), |t| t.map(Some)),
            collection,
        ) {
            compiled.push(Child {
                id: child.id.clone(),
                api_version,
                kind,
                source: out.location(template_pos),
                retain: child.retain,
                adopt: child.adopt.unwrap_or(rule.spec.adopt),
                recreate: child.recreate,
                // What the partials it includes read and write is the template's too, and a collection's
                // items may come from a child (`forEach: [port: '{.children.svc.spec.ports}']`).
                depends_on: std::iter::once(child.template.as_str())
                    .chain(template.partials().sources())
                    .flat_map(referenced_children)
                    .chain(collection_paths(child).flat_map(collection_reads))
                    .fold(Vec::new(), |mut ids, id| {
                        if !ids.contains(&id) {
                            ids.push(id);
                        }
                        ids
                    }),
                sets_namespace: namespace.is_some()
                    || std::iter::once(child.template.as_str())
                        .chain(template.partials().sources())
                        .any(|text| text.contains("namespace:")),
                template,
                namespace,
                ready_when,
                include_when,
                collection,
                hand_over,
            });
        }
    }
    compiled
}

/// Checks a child's `handOver` paths (dotted map field names) and splits them into field names.
fn check_hand_over(
    paths: &[String],
    doc: &Node,
    list_path: &[PathStep],
    out: &mut FileDiagnostics,
) -> Vec<Vec<String>> {
    let mut split = Vec::new();
    for (index, text) in paths.iter().enumerate() {
        let fields: Vec<String> = text.split('.').map(str::to_string).collect();
        let bad = fields
            .iter()
            .any(|field| field.is_empty() || field.contains(['[', ']', '{', '}', ' ']));
        // `metadata` as a whole, or its name, namespace or labels: what makes the object the rule's child.
        let identity = matches!(
            fields.iter().map(String::as_str).collect::<Vec<_>>().as_slice(),
            ["apiVersion"] | ["kind"] | ["metadata"] | ["metadata", "name" | "namespace" | "labels" | "annotations"]
        );
        if bad || identity {
            out.error(
                doc.value_pos_of(&with(list_path, &[PathStep::Index(index)])),
                DiagnosticCode::Value,
                if bad {
                    format!("handOver path `{text}` must be field names separated by dots, e.g. `spec.replicas`")
                } else {
                    format!("handOver path `{text}` would hand over what marks the object as the rule's child")
                },
            );
            continue;
        }
        split.push(fields);
    }
    split
}

/// Top-level names of the template context besides the parent's own fields: a collection's binding must not
/// hide them (nor the fields every Kubernetes object has).
pub(super) const CONTEXT_NAMES: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "data",
    "stringData",
    "binaryData",
    "children",
    "lookups",
];

/// Whether `name` is a helper or built-in of the templates: `{{name}}` would call it instead of reading the item.
pub(super) fn is_helper_name(name: &str) -> bool {
    const BUILT_INS: &[&str] = &[
        "if", "unless", "each", "with", "lookup", "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not", "this",
        "else",
    ];
    crate::template::HELPERS.contains(&name) || BUILT_INS.contains(&name)
}

/// Checks `forEach` / `count` / `maxItems` of a child and compiles them: `Some(None)` for a plain child, `None`
/// when something was reported.
fn check_collection(
    child: &ChildTemplate,
    in_finalize: bool,
    (doc, child_path, lines): (&Node, &[PathStep], &[&str]),
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Option<Option<Collection>> {
    let item_source = |expression: &str, field_path: &[PathStep], out: &mut FileDiagnostics| {
        check_item_source(expression, (doc, field_path, lines), out, partials)
    };
    let problems_before = out.found.len();
    let max_items = child.max_items.unwrap_or(DEFAULT_MAX_ITEMS);
    if !child.is_collection() {
        if child.max_items.is_some() {
            out.error(
                doc.pos_of(&with(child_path, &[key("maxItems")])),
                DiagnosticCode::Value,
                format!("child `{}`: `maxItems` needs `forEach` or `count`", child.id),
            );
            return None;
        }
        return Some(None);
    }
    let field = if child.count.is_some() { "count" } else { "forEach" };
    if in_finalize {
        out.error(
            doc.pos_of(&with(child_path, &[key(field)])),
            DiagnosticCode::Value,
            format!("finalize child `{}`: `{field}` is only for `spec.children`", child.id),
        );
        return None;
    }
    if max_items == 0 {
        out.error(
            doc.value_pos_of(&with(child_path, &[key("maxItems")])),
            DiagnosticCode::Range,
            format!("child `{}`: `maxItems` must be at least 1", child.id),
        );
    }
    let items = if let Some(count) = &child.count {
        if !child.for_each.is_empty() {
            out.error(
                doc.pos_of(&with(child_path, &[key("count")])),
                DiagnosticCode::Value,
                format!("child `{}`: `count` and `forEach` exclude each other", child.id),
            );
        }
        item_source(count, &with(child_path, &[key("count")]), out).map(CollectionItems::Count)
    } else {
        let mut entries: Vec<(String, ItemSource)> = Vec::new();
        let mut bound: Vec<String> = Vec::new();
        for (index, entry) in child.for_each.iter().enumerate() {
            let entry_path = with(child_path, &[key("forEach"), PathStep::Index(index)]);
            let mut names = entry.iter();
            let (Some((name, expression)), None) = (names.next(), names.next()) else {
                out.error(
                    doc.pos_of(&entry_path),
                    DiagnosticCode::Structure,
                    format!(
                        "child `{}`: each `forEach` entry is one `name: '<JSONPath>'` (it has {})",
                        child.id,
                        entry.len()
                    ),
                );
                continue;
            };
            let name_path = with(&entry_path, &[key(name)]);
            let index_name = format!("{name}_index");
            let problem = if !is_identifier(name) {
                Some((
                    DiagnosticCode::Name,
                    format!("`{name}` must be letters, digits and `_` (templates refer to it as `{{{{{name}}}}}`)"),
                ))
            } else if let Some(taken) = [name.as_str(), index_name.as_str()]
                .into_iter()
                .find(|bound_name| CONTEXT_NAMES.contains(bound_name))
            {
                Some((
                    DiagnosticCode::Name,
                    format!("`{taken}` would hide the template context's `{taken}`: choose another name"),
                ))
            } else if is_helper_name(name) {
                Some((
                    DiagnosticCode::Name,
                    format!("`{name}` is a template helper (`{{{{{name} …}}}}`): choose another name"),
                ))
            } else {
                [name.as_str(), index_name.as_str()]
                    .into_iter()
                    .find(|bound_name| bound.iter().any(|b| b == bound_name))
                    .map(|taken| (DiagnosticCode::Duplicate, format!("`{taken}` is bound twice")))
            };
            if let Some((code, message)) = problem {
                out.error(
                    doc.pos_of(&name_path),
                    code,
                    format!("child `{}`: forEach name {message}", child.id),
                );
            }
            bound.push(name.clone());
            bound.push(index_name);
            if let Some(source) = item_source(expression, &name_path, out) {
                entries.push((name.clone(), source));
            }
        }
        Some(CollectionItems::ForEach(entries))
    };
    if out.found.len() > problems_before {
        return None;
    }
    Some(Some(Collection {
        items: items?,
        max_items: usize::try_from(max_items).unwrap_or(usize::MAX),
    }))
}

/// A `count` or `forEach` entry compiled: a template when it holds `{{`, else a JSONPath.
fn check_item_source(
    expression: &str,
    (doc, field_path, lines): (&Node, &[PathStep], &[&str]),
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Option<ItemSource> {
    if is_item_template(expression) {
        let template = check_embedded_template(expression, doc, field_path, lines, out, partials)?;
        Some(ItemSource::Template(
            template,
            out.location(doc.value_pos_of(field_path)),
        ))
    } else {
        check_json_path(expression, doc, field_path, out).map(ItemSource::Path)
    }
}
