//! Semantic checks of a Reconciler: lookups, children (templates, ids, kinds), readyWhen and status paths.

use std::collections::HashMap;

use super::render::is_object_name;
use super::resolved::{
    Child, Collection, CollectionItems, LookupTarget, PatchTarget, Reconciler, ResolvedLookup, ResolvedPatch,
    Selection, SelectionNamespace, StatusField, StatusSource,
};
use super::types::{
    ChildTemplate, DEFAULT_LOOKUP_MAX_ITEMS, DEFAULT_MAX_ITEMS, Lookup, ReconcilerRule, StatusExpression,
};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics, did_you_mean};
use crate::jsonpath::CompiledPath;
use crate::load::{
    check_api_version_format, check_embedded_template, check_json_path, check_selector, embedded_pos, is_identifier,
    key, path, with,
};
use crate::naming::is_dns_label;
use crate::template::Partials;
use crate::yaml_tree::{Node, PathStep};

/// Checks a Reconciler and, when it has no problem, returns it with everything compiled.
pub(crate) fn check_reconciler(
    rule: &ReconcilerRule,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Option<Reconciler> {
    let problems_before = out.found.len();
    let spec_path = path(&["spec"]);
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
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut child_lists: Vec<(Vec<PathStep>, &[ChildTemplate], Vec<Child>)> =
        vec![(with(&spec_path, &[key("children")]), &rule.spec.children, Vec::new())];
    if let Some(finalize) = &rule.spec.finalize {
        child_lists.push((
            with(&spec_path, &[key("finalize"), key("children")]),
            &finalize.children,
            Vec::new(),
        ));
    }
    for (list_path, children, compiled) in &mut child_lists {
        for (index, child) in children.iter().enumerate() {
            let child_path = with(list_path, &[PathStep::Index(index)]);
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
            if child.recreate && list_path.len() > 2 {
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
            let in_finalize = list_path.len() > 2;
            let collection = check_collection(child, in_finalize, doc, &child_path, out);
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
                        .chain(collection_paths(child).filter_map(path_child))
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
    }
    let mut status = Vec::new();
    for (field, expression) in &rule.spec.status {
        let field_path = with(&spec_path, &[key("status"), key(field)]);
        // The worker writes these itself: a projected value would be replaced (or fight with it) on every write.
        if RESERVED_STATUS_FIELDS.contains(&field.as_str()) {
            out.error(
                doc.pos_of(&field_path),
                DiagnosticCode::Name,
                format!(
                    "status field `{field}` is Ruleplane's own (it writes `conditions` with Ready and Synced, and \
                     `observedGeneration`): choose another name"
                ),
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
    let patches = check_patches(rule, doc, lines, out, partials);
    let mut lists = child_lists.into_iter().map(|(_, _, compiled)| compiled);
    let children = lists.next().unwrap_or_default();
    let finalize_children = lists.next().unwrap_or_default();
    let render_order = check_dependencies(&children, &rule.spec.children, doc, lines, out);
    if out.found.len() > problems_before {
        return None;
    }
    Some(Reconciler {
        rule: rule.clone(),
        children,
        finalize_children,
        lookups,
        status,
        patches,
        kinds: Default::default(),
        render_order,
        partials: partials.clone(),
    })
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

/// Checks `patches` (ids, name or selector, templates with a literal kind) and compiles them; their templates may
/// include the file's partials, as children's do.
fn check_patches(
    rule: &ReconcilerRule,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Vec<ResolvedPatch> {
    let mut compiled = Vec::new();
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for (index, patch) in rule.spec.patches.iter().enumerate() {
        let patch_path = path(&["spec", "patches"]);
        let patch_path = with(&patch_path, &[PathStep::Index(index)]);
        if let Some(first) = ids.insert(patch.id.as_str(), index) {
            out.error(
                doc.value_pos_of(&with(&patch_path, &[key("id")])),
                DiagnosticCode::Duplicate,
                format!("patch id `{}` is already used by spec.patches[{first}]", patch.id),
            );
        }
        let template_path = with(&patch_path, &[key("template")]);
        let template_pos = doc.value_pos_of(&template_path);
        let template = check_embedded_template(&patch.template, doc, &template_path, lines, out, partials);
        let static_kind = patch.static_kind();
        if template.is_some() && static_kind.is_none() {
            out.error(
                template_pos,
                DiagnosticCode::Template,
                format!(
                    "patch `{}`: the template must spell out `apiVersion:` and `kind:` literally on top-level lines \
                     (they tell Ruleplane which kind to watch and to grant access to)",
                    patch.id
                ),
            );
        }
        let target = match (&patch.name, &patch.selector) {
            (Some(name), None) => {
                check_embedded_template(name, doc, &with(&patch_path, &[key("name")]), lines, out, partials)
                    .map(PatchTarget::Name)
            }
            (None, Some(selector)) => {
                let selector_path = with(&patch_path, &[key("selector")]);
                check_selector(selector, doc, &selector_path, out);
                let match_labels: Option<Vec<(String, crate::template::CompiledTemplate)>> = selector
                    .match_labels
                    .iter()
                    .map(|(label, value)| {
                        let value_path = with(&selector_path, &[key("matchLabels"), key(label)]);
                        check_embedded_template(value, doc, &value_path, lines, out, partials)
                            .map(|t| (label.clone(), t))
                    })
                    .collect();
                if selector.match_labels.is_empty() && selector.match_expressions.is_empty() {
                    out.error(
                        doc.pos_of(&selector_path),
                        DiagnosticCode::Value,
                        format!(
                            "patch `{}`: an empty selector would patch every object of the kind",
                            patch.id
                        ),
                    );
                }
                match_labels.map(|match_labels| PatchTarget::Selector {
                    match_labels,
                    selector: selector.clone(),
                })
            }
            _ => {
                out.error(
                    doc.pos_of(&patch_path),
                    DiagnosticCode::Structure,
                    format!("patch `{}` needs exactly one of `name` and `selector`", patch.id),
                );
                None
            }
        };
        // Patches read children as children do: every id must be one of `children`.
        let mut depends_on: Vec<String> = Vec::new();
        let texts = std::iter::once(patch.template.as_str())
            .chain(patch.name.as_deref())
            .chain(
                patch
                    .selector
                    .iter()
                    .flat_map(|s| s.match_labels.values().map(String::as_str)),
            )
            .chain(template.iter().flat_map(|t| t.partials().sources()));
        for id in texts.flat_map(referenced_children) {
            if depends_on.contains(&id) {
                continue;
            }
            if !rule.spec.children.iter().any(|child| child.id == id) {
                let suggestion = did_you_mean(&id, rule.spec.children.iter().map(|c| c.id.as_str()));
                let needle = format!("children.{id}");
                // At the reference when the template itself makes it, else at the template.
                let at = patch
                    .template
                    .lines()
                    .enumerate()
                    .find_map(|(line, text)| Some((line + 1, text[..text.find(&needle)?].chars().count() + 1)))
                    .map_or(template_pos, |(line, column)| {
                        embedded_pos(lines, template_pos, line, column)
                    });
                out.error(
                    at,
                    DiagnosticCode::Reference,
                    format!(
                        "patch `{}` reads `children.{id}`, which is not among `children`{suggestion}",
                        patch.id
                    ),
                );
            }
            depends_on.push(id);
        }
        if let (Some(template), Some((api_version, kind)), Some(target)) = (template, static_kind, target) {
            compiled.push(ResolvedPatch {
                id: patch.id.clone(),
                api_version,
                kind,
                source: out.location(template_pos),
                namespaced: true,
                depends_on,
                target,
                template,
            });
        }
    }
    compiled
}

/// The parent's status fields the worker writes itself, never projected.
const RESERVED_STATUS_FIELDS: &[&str] = &["conditions", "observedGeneration"];

/// Top-level names of the template context besides the parent's own fields: a collection's binding must not
/// hide them (nor the fields every Kubernetes object has).
const CONTEXT_NAMES: &[&str] = &[
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
fn is_helper_name(name: &str) -> bool {
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
    doc: &Node,
    child_path: &[PathStep],
    out: &mut FileDiagnostics,
) -> Option<Option<Collection>> {
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
        check_json_path(count, doc, &with(child_path, &[key("count")]), out).map(CollectionItems::Count)
    } else {
        let mut entries: Vec<(String, CompiledPath)> = Vec::new();
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
            if let Some(path) = check_json_path(expression, doc, &name_path, out) {
                entries.push((name.clone(), path));
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

/// A status template's `children.<id>` and `ready.<id>` must name children of the rule: a misspelt id would only
/// show as a missing field once a parent is reconciled.
fn check_template_status_references(
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

/// The ids a template reads as `children.<id>` (e.g. `{{children.svc.spec.clusterIP}}`), each once.
fn referenced_children(template: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(at) = rest.find("children.") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "children.".len()..];
        let id: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        // `spec.children.x` is a field of the parent, not a child: only a path that starts with `children`.
        let starts_path = before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'));
        if starts_path && !id.is_empty() && !found.contains(&id) {
            found.push(id);
        }
        rest = after;
    }
    found
}

/// The JSONPaths a collection child takes its items from (`forEach` entries, `count`).
fn collection_paths(child: &ChildTemplate) -> impl Iterator<Item = &str> {
    child
        .for_each
        .iter()
        .flat_map(|entry| entry.values().map(String::as_str))
        .chain(child.count.as_deref())
}

/// The child id a JSONPath over the template context reads, when it starts at `children.<id>` (or
/// `children['<id>']`).
fn path_child(expression: &str) -> Option<String> {
    let inner = expression
        .trim()
        .trim_start_matches('{')
        .trim_start_matches('$')
        .trim_start_matches('.');
    let rest = inner.strip_prefix("children")?;
    let id: String = if let Some(rest) = rest.strip_prefix('.') {
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect()
    } else {
        let rest = rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\""))?;
        rest.chars().take_while(|c| *c != '\'' && *c != '"').collect()
    };
    (!id.is_empty()).then_some(id)
}

/// Checks that children read only existing children and that no two read each other (also through others);
/// returns the order to render them in: a child after the children it reads.
fn check_dependencies(
    children: &[Child],
    templates: &[ChildTemplate],
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
) -> Vec<usize> {
    let index_of = |id: &str| children.iter().position(|child| child.id == id);
    // Where child `index` reads `children.<id>`: the reference inside its template, positioned in the file.
    let reference_at = |index: usize, id: &str| {
        let template_path = with(&path(&["spec", "children"]), &[PathStep::Index(index), key("template")]);
        let template_pos = doc.value_pos_of(&template_path);
        let needle = format!("children.{id}");
        let template = templates.get(index).map_or("", |t| t.template.as_str());
        // Read by the collection's `forEach` entry or `count` rather than the template: there.
        let item_source = templates.get(index).and_then(|child| {
            let child_path = with(&path(&["spec", "children"]), &[PathStep::Index(index)]);
            let for_each = child.for_each.iter().enumerate().find_map(|(entry, names)| {
                let (name, _) = names.iter().find(|(_, path)| path_child(path).as_deref() == Some(id))?;
                Some(with(&child_path, &[key("forEach"), PathStep::Index(entry), key(name)]))
            });
            let count = || {
                (child.count.as_deref().and_then(path_child).as_deref() == Some(id))
                    .then(|| with(&child_path, &[key("count")]))
            };
            for_each.or_else(count).filter(|_| !template.contains(&needle))
        });
        if let Some(source) = item_source {
            return doc.value_pos_of(&source);
        }
        template
            .lines()
            .enumerate()
            .find_map(|(line, text)| Some((line + 1, text[..text.find(&needle)?].chars().count() + 1)))
            .map_or(template_pos, |(line, column)| {
                embedded_pos(lines, template_pos, line, column)
            })
    };
    for (index, child) in children.iter().enumerate() {
        for dependency in &child.depends_on {
            if index_of(dependency).is_none() {
                let suggestion = did_you_mean(dependency, children.iter().map(|c| c.id.as_str()));
                out.error(
                    reference_at(index, dependency),
                    DiagnosticCode::Reference,
                    format!(
                        "child `{}` reads `children.{dependency}`, which is not among `children`{suggestion}",
                        child.id
                    ),
                );
            }
        }
    }
    // Depth-first topological sort; a node met again while on the stack closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Visiting,
        Done,
    }
    fn visit(
        index: usize,
        children: &[Child],
        marks: &mut [Mark],
        order: &mut Vec<usize>,
        cycle: &mut Option<(usize, usize)>,
    ) {
        marks[index] = Mark::Visiting;
        for dependency in &children[index].depends_on {
            let Some(next) = children.iter().position(|c| &c.id == dependency) else {
                continue;
            };
            match marks[next] {
                Mark::New => visit(next, children, marks, order, cycle),
                Mark::Visiting => {
                    cycle.get_or_insert((index, next));
                }
                Mark::Done => {}
            }
        }
        marks[index] = Mark::Done;
        order.push(index);
    }
    let mut marks = vec![Mark::New; children.len()];
    let mut order = Vec::with_capacity(children.len());
    let mut cycle = None;
    for index in 0..children.len() {
        if marks[index] == Mark::New {
            visit(index, children, &mut marks, &mut order, &mut cycle);
        }
    }
    if let Some((from, to)) = cycle {
        let (a, b) = (&children[from].id, &children[to].id);
        let message = if a == b {
            format!("child `{a}` reads itself (`children.{a}`)")
        } else {
            format!("children `{a}` and `{b}` read each other (through `children.<id>`): a dependency cycle")
        };
        out.error(reference_at(from, b), DiagnosticCode::Reference, message);
    }
    order
}

/// A status path naming a child id or lookup that does not exist would silently stay empty: report it.
fn check_status_reference<'a>(
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
