//! Pure rendering of a Reconciler: parent object + lookups → child objects and parent status.

use serde_json::{Map, Value};

use super::resolved::{
    Child, Collection, CollectionItems, LookupTarget, Reconciler, ResolvedLookup, SelectionNamespace, StatusSource,
};
use super::types::{Lookup, StatusType, WhenMissing};
use crate::diagnostics::SourceLocation;
use crate::jsonpath::is_truthy;
use crate::naming::{is_dns_label, is_dns_subdomain};
use crate::ownership::{
    CHILD_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_UID_LABEL, RETAIN_ANNOTATION, RULE_LABEL,
};
use crate::redaction::truncate;
use crate::template::{CompiledTemplate, TemplateRenderError};
use crate::yaml_tree::{json_type_name, parse_json_documents};

/// The result of rendering one parent.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// Desired child objects, labelled, in dependency order (a child after the children it reads).
    pub children: Vec<Value>,
    /// Status projected from the parent, the rendered children and the lookups.
    pub status: Map<String, Value>,
    /// Children not rendered because a child they read (`children.<id>`) does not exist or is not ready yet.
    /// They are neither applied nor pruned this time.
    pub waiting: Vec<String>,
    /// Children whose `includeWhen` selected nothing truthy, or that read such a child (`children.<id>`): they
    /// must not exist.
    pub excluded: Vec<String>,
    /// The lookups with `whenMissing: Wait` that found nothing: while any does, nothing is rendered and every child
    /// waits (held as it is, neither applied nor pruned).
    pub held: Vec<String>,
    /// What a reader of `children.<id>` sees, by id: the children that exist and are ready (see
    /// [`render_children_observing`]); what `patches` read.
    pub visible: Map<String, Value>,
}

/// Why rendering failed. Every variant names the child and points into the rule file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// The template failed (missing field, helper error, budget).
    #[error("{location}: child `{child}`: {error}")]
    Template {
        /// The child's id.
        child: String,
        /// Where in the rule file (the template line when known).
        location: SourceLocation,
        /// The template error.
        error: TemplateRenderError,
    },
    /// The rendered text is not valid YAML.
    #[error("{location}: child `{child}`: rendered output is not valid YAML at output line {}, column {}: {}\n  | {}", problem.line, problem.column, problem.message, problem.rendered_line)]
    OutputYaml {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// What the YAML parser found, where in the output.
        problem: Box<OutputYamlProblem>,
    },
    /// The rendered YAML is not one Kubernetes object.
    #[error("{location}: child `{child}`: {message}")]
    OutputObject {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// What is wrong.
        message: String,
    },
    /// The rendered object lacks `apiVersion`, `kind` or `metadata.name`: a defect of the template whatever the
    /// parent (`validate` reports it for its synthetic parent).
    #[error(
        "{location}: child `{child}`: rendered object has no `{field}`; every child needs apiVersion, kind and metadata.name"
    )]
    Incomplete {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// The missing field (`metadata.name`).
        field: String,
    },
    /// A collection child (`forEach`, `count`) cannot be expanded: its path yields no list or number, it has
    /// more items than `maxItems`, or two of its objects have the same name.
    #[error("{location}: child `{child}`: {message}")]
    Collection {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// What is wrong.
        message: String,
    },
    /// A status field's template failed.
    #[error("{location}: status field `{field}`: {error}")]
    Status {
        /// The status field.
        field: String,
        /// Where the rule is in its file.
        location: SourceLocation,
        /// The template error.
        error: TemplateRenderError,
    },
    /// A lookup's name or namespace template failed.
    #[error("lookup `{lookup}`: {error}")]
    Lookup {
        /// The lookup's name.
        lookup: String,
        /// The template error.
        error: TemplateRenderError,
    },
    /// A lookup's rendered name or namespace is not a Kubernetes name (it becomes part of a request path).
    #[error("lookup `{lookup}`: {message}")]
    LookupTarget {
        /// The lookup's name.
        lookup: String,
        /// What is wrong.
        message: String,
    },
    /// A `patches` entry cannot be rendered or placed for this parent.
    #[error("{location}: patch `{patch}`: {message}")]
    Patch {
        /// The patch's id.
        patch: String,
        /// Where its template starts in the rule file.
        location: SourceLocation,
        /// What is wrong.
        message: String,
    },
}

/// A YAML problem in rendered output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputYamlProblem {
    /// Line in the rendered output.
    pub line: usize,
    /// Column in the rendered output.
    pub column: usize,
    /// The parser's message.
    pub message: String,
    /// The offending rendered line.
    pub rendered_line: String,
}

impl RenderError {
    /// Short category.
    pub fn category(&self) -> &'static str {
        match self {
            RenderError::Template { error, .. }
            | RenderError::Lookup { error, .. }
            | RenderError::Status { error, .. } => error.category(),
            RenderError::OutputYaml { .. } => "output-yaml",
            RenderError::OutputObject { .. } | RenderError::Incomplete { .. } => "output-object",
            RenderError::Collection { .. } => "collection",
            RenderError::LookupTarget { .. } => "lookup-target",
            RenderError::Patch { .. } => "patch",
        }
    }
}

/// Renders every child of `rule` for `parent` and computes the status over the rendered children.
///
/// `lookups` maps lookup names to the objects found (already narrowed by their `jsonPath`, see
/// [`project_lookup`]); lookups that found nothing should be present as `null`.
pub fn render_children(
    rule: &Reconciler,
    parent: &Value,
    lookups: &Map<String, Value>,
) -> Result<Rendered, RenderError> {
    render_children_observing(rule, parent, lookups, &Map::new())
}

/// Like [`render_children`], with the children as they exist (`observed`, by id): a child that reads another
/// (`children.<id>`) is rendered once that one exists and is ready, seeing it as observed — e.g. a Service's
/// assigned `spec.clusterIP`. Without `observed` (offline) such children wait.
pub fn render_children_observing(
    rule: &Reconciler,
    parent: &Value,
    lookups: &Map<String, Value>,
    observed: &Map<String, Value>,
) -> Result<Rendered, RenderError> {
    let mut context = template_context(parent, lookups);
    let mut rendered = Rendered {
        children: Vec::new(),
        status: Map::new(),
        waiting: Vec::new(),
        excluded: Vec::new(),
        held: held_by_lookups(rule, lookups),
        visible: Map::new(),
    };
    if !rendered.held.is_empty() {
        rendered.waiting = rule.children_in_order().map(|child| child.id.clone()).collect();
        rendered.status = compute_status(rule, parent, observed, lookups);
        return Ok(rendered);
    }
    // What each child rendered this round, by id: an object, or the list of a collection's objects.
    let mut by_id = Map::new();
    for child in rule.children_in_order() {
        // A child that reads an excluded child is excluded with it (as KRO skips the dependents of a resource
        // its `includeWhen` leaves out), whether or not the excluded one still exists: it is being pruned.
        let reads_excluded = child.depends_on.iter().any(|id| rendered.excluded.contains(id));
        let left_out = child.collection.is_none()
            && child
                .include_when
                .as_ref()
                .is_some_and(|include_when| !is_truthy(include_when.select_one(&context).as_ref()));
        if reads_excluded || left_out {
            rendered.excluded.push(child.id.clone());
            continue;
        }
        let Some(visible) = child
            .depends_on
            .iter()
            .map(|id| Some((id.clone(), visible_child(rule, id, observed, &by_id)?)))
            .collect::<Option<Map<String, Value>>>()
        else {
            rendered.waiting.push(child.id.clone());
            continue;
        };
        if !child.depends_on.is_empty()
            && let Value::Object(fields) = &mut context
        {
            fields.insert("children".to_string(), Value::Object(visible));
        }
        let Some(collection) = &child.collection else {
            let object = render_one(rule, child, &context, parent)?;
            by_id.insert(child.id.clone(), object.clone());
            rendered.children.push(object);
            continue;
        };
        let items = collection_items(child, collection, &context)?;
        // The loader refused names of the context every object has; a parent may still have its own top-level
        // field of that name (a Role's `rules`): hiding it would render from the item instead, silently.
        if let (Some(bindings), Value::Object(parent_fields)) = (items.first(), parent)
            && let Some(hidden) = bindings.keys().find(|name| parent_fields.contains_key(*name))
        {
            return Err(RenderError::Collection {
                child: child.id.clone(),
                location: child.source.clone(),
                message: format!("the item name `{hidden}` would hide the parent's field `{hidden}`: rename the item"),
            });
        }
        let mut objects: Vec<Value> = Vec::new();
        for bindings in items {
            let mut item_context = context.clone();
            if let Value::Object(fields) = &mut item_context {
                fields.extend(bindings);
            }
            if let Some(include_when) = &child.include_when
                && !is_truthy(include_when.select_one(&item_context).as_ref())
            {
                continue;
            }
            objects.push(render_one(rule, child, &item_context, parent)?);
        }
        check_distinct_names(child, &objects)?;
        rendered.children.extend(objects.iter().cloned());
        by_id.insert(child.id.clone(), Value::Array(objects));
    }
    rendered.status = compute_status(rule, parent, &by_id, lookups);
    rendered.visible = rule
        .children()
        .iter()
        .filter(|child| !rendered.excluded.contains(&child.id))
        .filter_map(|child| Some((child.id.clone(), visible_child(rule, &child.id, observed, &by_id)?)))
        .collect();
    Ok(rendered)
}

/// What a child shows those that read it (`children.<id>`) once it is ready: the object as observed; for a
/// collection, the observed objects of the items rendered this round (`by_id`), each ready (none missing).
fn visible_child(
    rule: &Reconciler,
    id: &str,
    observed: &Map<String, Value>,
    by_id: &Map<String, Value>,
) -> Option<Value> {
    let dependency = rule.child(id)?;
    let observed = observed.get(id)?;
    if !dependency.is_collection() {
        return dependency.is_ready(observed).then(|| observed.clone());
    }
    let observed_items = observed.as_array()?;
    let items = by_id.get(id)?.as_array()?;
    items
        .iter()
        .map(|item| {
            observed_items
                .iter()
                .find(|o| same_object(o, item))
                .filter(|o| dependency.is_ready(o))
                .cloned()
        })
        .collect::<Option<Vec<Value>>>()
        .map(Value::Array)
}

/// The lookups with `whenMissing: Wait` that found nothing: `null` (no object, or its `jsonPath` selects nothing),
/// or an empty list (a selector lookup).
pub fn held_by_lookups(rule: &Reconciler, lookups: &Map<String, Value>) -> Vec<String> {
    rule.lookups()
        .iter()
        .filter(|lookup| lookup.spec.when_missing == WhenMissing::Wait)
        .filter(|lookup| match lookups.get(&lookup.name) {
            None | Some(Value::Null) => true,
            Some(Value::Array(items)) => lookup.selection().is_some() && items.is_empty(),
            Some(_) => false,
        })
        .map(|lookup| lookup.name.clone())
        .collect()
}

/// The items of a collection child for one parent, each as the names it binds (`zone`, `zone_index`; with
/// `count`, `count_index`), in order: for several `forEach` entries, the cartesian product, first entry outermost.
fn collection_items(
    child: &Child,
    collection: &Collection,
    context: &Value,
) -> Result<Vec<Map<String, Value>>, RenderError> {
    let error = |message: String| RenderError::Collection {
        child: child.id.clone(),
        location: child.source.clone(),
        message,
    };
    let too_many = |items: String| {
        error(format!(
            "{items} items, more than the {} a collection may render (`maxItems`)",
            collection.max_items
        ))
    };
    match &collection.items {
        CollectionItems::Count(path) => {
            let count = match path.select_one(context) {
                None | Some(Value::Null) => 0,
                Some(value) => value.as_u64().ok_or_else(|| {
                    error(format!(
                        "`count` ({}) must yield a non-negative integer, not {}",
                        path.source(),
                        shorten_value(&value)
                    ))
                })?,
            };
            if usize::try_from(count).map_or(true, |count| count > collection.max_items) {
                return Err(too_many(count.to_string()));
            }
            Ok((0..count)
                .map(|index| Map::from_iter([("count_index".to_string(), Value::from(index))]))
                .collect())
        }
        CollectionItems::ForEach(entries) => {
            let mut lists: Vec<(&String, Vec<Value>)> = Vec::with_capacity(entries.len());
            let mut total: usize = 1;
            for (name, path) in entries {
                let mut found = path.select(context);
                let list = match found.len() {
                    0 => Vec::new(),
                    1 => match found.remove(0) {
                        Value::Array(items) => items,
                        Value::Null => Vec::new(),
                        other => {
                            return Err(error(format!(
                                "forEach `{name}` ({}) must yield a list, not {}",
                                path.source(),
                                shorten_value(&other)
                            )));
                        }
                    },
                    _ => found,
                };
                total = total.saturating_mul(list.len());
                lists.push((name, list));
            }
            if total > collection.max_items {
                let sizes: Vec<String> = lists.iter().map(|(_, list)| list.len().to_string()).collect();
                return Err(too_many(if sizes.len() > 1 {
                    format!("{} (= {total})", sizes.join(" × "))
                } else {
                    total.to_string()
                }));
            }
            let mut items = vec![Map::new()];
            for (name, list) in lists {
                items = items
                    .into_iter()
                    .flat_map(|bound| {
                        list.iter().enumerate().map(move |(index, value)| {
                            let mut bound = bound.clone();
                            bound.insert(name.clone(), value.clone());
                            bound.insert(format!("{name}_index"), Value::from(index));
                            bound
                        })
                    })
                    .collect();
            }
            Ok(items)
        }
    }
}

/// A collection's objects must have distinct names (and namespaces): the names that repeat are reported.
fn check_distinct_names(child: &Child, objects: &[Value]) -> Result<(), RenderError> {
    let mut repeated: Vec<String> = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        if objects[..index].iter().any(|earlier| same_object(earlier, object)) {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = format!("`{}`", truncate(name, 64));
            if !repeated.contains(&name) {
                repeated.push(name);
            }
        }
    }
    if repeated.is_empty() {
        return Ok(());
    }
    Err(RenderError::Collection {
        child: child.id.clone(),
        location: child.source.clone(),
        message: format!(
            "the collection renders several objects named {}: each item needs its own name (use the item or its \
             `_index` in `metadata.name`)",
            repeated.join(", ")
        ),
    })
}

/// Whether two objects are the same in the cluster: apiVersion, kind, namespace and name.
fn same_object(a: &Value, b: &Value) -> bool {
    ["/apiVersion", "/kind", "/metadata/namespace", "/metadata/name"]
        .iter()
        .all(|pointer| a.pointer(pointer) == b.pointer(pointer))
}

/// A value in a message, short and without the contents of a collection (it may come from a looked-up Secret).
fn shorten_value(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => format!("a {}", json_type_name(value)),
        Value::String(_) => "a string".to_string(),
        other => truncate(&other.to_string(), 32),
    }
}

/// Renders the `finalize` children (empty when the rule has none).
pub fn render_finalize_children(
    rule: &Reconciler,
    parent: &Value,
    lookups: &Map<String, Value>,
) -> Result<Vec<Value>, RenderError> {
    render_child_list(rule, &rule.finalize_children, parent, lookups)
}

/// Status fields over `{parent fields…, children: {id: object or list}, lookups, ready: {id: count}}`: paths
/// that select nothing and templates that render empty are left out, so a field appears once the child reports
/// it. A template that fails leaves its field out ([`project_status`] tells why).
pub fn compute_status(
    rule: &Reconciler,
    parent: &Value,
    children: &Map<String, Value>,
    lookups: &Map<String, Value>,
) -> Map<String, Value> {
    project_status(rule, parent, children, lookups).0
}

/// [`compute_status`], with the first failure of a status template: the worker reports it on the parent
/// (`Synced=False`) while the other fields are still written, and the children are applied regardless.
pub fn project_status(
    rule: &Reconciler,
    parent: &Value,
    children: &Map<String, Value>,
    lookups: &Map<String, Value>,
) -> (Map<String, Value>, Option<RenderError>) {
    let mut fields = Map::new();
    let mut failure = None;
    for (field, value) in status_values(rule, parent, children, lookups) {
        match value {
            Ok(Some(value)) => {
                fields.insert(field.to_string(), value);
            }
            Ok(None) => {}
            Err(error) => {
                failure.get_or_insert(error);
            }
        }
    }
    (fields, failure)
}

/// Each status field with its value (`None`: left out), or the failure of its template.
fn status_values<'a>(
    rule: &'a Reconciler,
    parent: &Value,
    children: &Map<String, Value>,
    lookups: &Map<String, Value>,
) -> impl Iterator<Item = (&'a str, Result<Option<Value>, RenderError>)> {
    let scope = status_scope(rule, parent, children, lookups);
    rule.status.iter().map(move |field| {
        let value = match &field.value {
            StatusSource::Path(path) => Ok(path.select_one(&scope)),
            StatusSource::Literal(value) => Ok(Some(value.clone())),
            StatusSource::Template(template, value_type) => template
                .render(&scope)
                .map(|text| typed_status_text(&text, *value_type))
                .map_err(|error| RenderError::Status {
                    field: field.name.clone(),
                    location: rule.source.clone(),
                    error,
                }),
        };
        (field.name.as_str(), value)
    })
}

/// The scope status fields read: the parent's fields, `lookups`, `children` by id (a collection as the list of
/// its objects) and `ready`: per child id, how many of its objects are ready by its `readyWhen` (a single child:
/// 0 or 1; a child not there yet: 0).
fn status_scope(
    rule: &Reconciler,
    parent: &Value,
    children: &Map<String, Value>,
    lookups: &Map<String, Value>,
) -> Value {
    let mut scope = template_context(parent, lookups);
    let ready: Map<String, Value> = rule
        .children
        .iter()
        .map(|child| {
            let count = match children.get(&child.id) {
                None | Some(Value::Null) => 0,
                Some(Value::Array(items)) if child.is_collection() => {
                    items.iter().filter(|item| child.is_item_ready(item)).count()
                }
                Some(object) => usize::from(child.is_item_ready(object)),
            };
            (child.id.clone(), Value::from(count))
        })
        .collect();
    if let Value::Object(fields) = &mut scope {
        fields.insert("children".to_string(), Value::Object(children.clone()));
        fields.insert("ready".to_string(), Value::Object(ready));
    }
    scope
}

/// A status template's text as one scalar: trimmed; empty → left out; with `auto`, `true`/`false` a boolean and
/// a JSON number a number, anything else a string. Bounded like every message Ruleplane writes about a parent:
/// the text may carry values read from the cluster.
fn typed_status_text(text: &str, value_type: StatusType) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if value_type == StatusType::Auto {
        match text {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            _ => {}
        }
        let numeric = text.starts_with(|c: char| c == '-' || c.is_ascii_digit());
        if numeric && let Ok(Value::Number(number)) = serde_json::from_str::<Value>(text) {
            // Digits past 64 bits (an id) would only be a rounded float: they stay text.
            let written_as_integer = !text.contains(['.', 'e', 'E']);
            if !(written_as_integer && number.is_f64()) {
                return Some(Value::Number(number));
            }
        }
    }
    Some(Value::String(truncate(text, crate::redaction::MAX_MESSAGE_CHARS)))
}

/// Whether an observed child is ready according to its `readyWhen` (no `readyWhen`: ready once it exists).
pub fn child_ready(child: &Child, observed: &Value) -> bool {
    child.is_ready(observed)
}

/// The name and namespace of a lookup's object for `parent`. The namespace is the rendered `namespace`, else
/// the parent's, except for cluster-scoped kinds (Namespace, Node, a declared cluster-scoped kind), which have
/// none. A selector lookup has no one object: asking for its target is an error.
pub fn render_lookup_target(lookup: &ResolvedLookup, parent: &Value) -> Result<(String, Option<String>), RenderError> {
    let LookupTarget::Named {
        name: name_template,
        namespace: namespace_template,
    } = &lookup.target
    else {
        return Err(RenderError::LookupTarget {
            lookup: lookup.name.clone(),
            message: "a lookup by `selector` reads a list, not one named object".to_string(),
        });
    };
    let context = template_context(parent, &Map::new());
    let render = |template: &CompiledTemplate| {
        template.render(&context).map_err(|error| RenderError::Lookup {
            lookup: lookup.name.clone(),
            error,
        })
    };
    let object_name = render(name_template)?;
    let namespace = match namespace_template {
        _ if !lookup.namespaced => None,
        Some(namespace) => Some(render(namespace)?),
        None => parent
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let (object_name, namespace) = (object_name.trim().to_string(), namespace.map(|n| n.trim().to_string()));
    // The name and namespace go into a request's path: data read from the cluster must not steer it elsewhere.
    let invalid = |what: &str, value: &str| RenderError::LookupTarget {
        lookup: lookup.name.clone(),
        message: format!(
            "rendered {what} `{}` is not a valid Kubernetes name",
            truncate(value, 64)
        ),
    };
    if !is_object_name(&lookup.spec.api_version, &object_name) {
        return Err(invalid("name", &object_name));
    }
    if let Some(namespace) = namespace.as_deref().filter(|namespace| !is_dns_label(namespace)) {
        return Err(invalid("namespace", namespace));
    }
    Ok((object_name, namespace))
}

/// The namespace a selector lookup reads for `parent`: `Some(namespace)`, or `None` for every namespace (the rule
/// said `allNamespaces`, or the kind is cluster-scoped). The default is the parent's namespace; the rule may name
/// another literally. No value of the parent widens it: a parent of a cluster-scoped kind has no namespace to
/// default to, so such a rule must say which it reads.
pub fn selection_namespace(
    rule: &Reconciler,
    lookup: &ResolvedLookup,
    parent: &Value,
) -> Result<Option<String>, RenderError> {
    let Some(selection) = lookup.selection() else {
        return render_lookup_target(lookup, parent).map(|(_, namespace)| namespace);
    };
    if !lookup.namespaced {
        return Ok(None);
    }
    match &selection.namespace {
        SelectionNamespace::All => Ok(None),
        SelectionNamespace::Literal(namespace) => Ok(Some(namespace.clone())),
        SelectionNamespace::Parent => match parent.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(namespace) => Ok(Some(namespace.to_owned())),
            // An offline parent (a test case, `ruleplane render`) written without its namespace: any namespace,
            // as a lookup by name finds its object in any.
            None if rule.kinds().parent.as_ref().is_some_and(|kind| kind.namespaced) => Ok(None),
            None => Err(RenderError::LookupTarget {
                lookup: lookup.name.clone(),
                message: "the parent has no namespace to read from: give the lookup a `namespace` or \
                          `allNamespaces: true`"
                    .to_string(),
            }),
        },
    }
}

/// Whether `object` is one a selector lookup reads in `namespace` (`None`: any): its apiVersion and kind, its
/// namespace, and its labels matching the selector. The worker and the offline tools decide membership here.
pub fn selects_lookup_object(lookup: &ResolvedLookup, namespace: Option<&str>, object: &Value) -> bool {
    let Some(selection) = lookup.selection() else {
        return false;
    };
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let labels: std::collections::BTreeMap<String, String> = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    text("/apiVersion") == Some(lookup.spec.api_version.as_str())
        && text("/kind") == Some(lookup.spec.kind.as_str())
        && namespace.is_none_or(|namespace| text("/metadata/namespace") == Some(namespace))
        && selection.selector.matches(&labels)
}

/// What a selector lookup exposes: of `candidates`, the objects it selects in `namespace`, sorted by namespace and
/// name (so a render does not depend on the order a cache keeps them in), each narrowed by the lookup's
/// `jsonPath`. More than the lookup's `maxItems` is an error.
pub fn select_lookup_objects(
    lookup: &ResolvedLookup,
    namespace: Option<&str>,
    candidates: Vec<Value>,
) -> Result<Value, RenderError> {
    let max_items = lookup.selection().map_or(0, |selection| selection.max_items);
    let mut selected: Vec<Value> = candidates
        .into_iter()
        .filter(|object| selects_lookup_object(lookup, namespace, object))
        .collect();
    if selected.len() > max_items {
        return Err(RenderError::LookupTarget {
            lookup: lookup.name.clone(),
            message: format!(
                "the selector matches {} objects, more than the {max_items} a lookup may read (`maxItems`)",
                selected.len()
            ),
        });
    }
    let place = |object: &Value| {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        (text("/metadata/namespace"), text("/metadata/name"))
    };
    selected.sort_by_cached_key(place);
    selected.dedup_by(|a, b| place(a) == place(b));
    Ok(Value::Array(
        selected
            .iter()
            .map(|object| project_lookup(lookup, Some(object)))
            .collect(),
    ))
}

/// Builds the `lookups` map for `parent`. For a lookup by name: renders its target, asks `fetch` for the object
/// (`fetch(lookup, name, namespace)`, e.g. from a watch cache or from files given to `ruleplane render`) and
/// projects it with [`project_lookup`]; objects that are not found appear as `null`. For a lookup by selector: asks
/// `list` for the candidates in the namespace it reads (`list(lookup, namespace)`, `None`: every namespace) and
/// keeps those [`select_lookup_objects`] selects, as a list.
pub fn gather_lookups(
    rule: &Reconciler,
    parent: &Value,
    mut fetch: impl FnMut(&Lookup, &str, Option<&str>) -> Option<Value>,
    mut list: impl FnMut(&Lookup, Option<&str>) -> Vec<Value>,
) -> Result<Map<String, Value>, RenderError> {
    let mut lookups = Map::new();
    for lookup in &rule.lookups {
        let found = if lookup.selection().is_some() {
            let namespace = selection_namespace(rule, lookup, parent)?;
            let candidates = list(&lookup.spec, namespace.as_deref());
            select_lookup_objects(lookup, namespace.as_deref(), candidates)?
        } else {
            let (object_name, namespace) = render_lookup_target(lookup, parent)?;
            let object = fetch(&lookup.spec, &object_name, namespace.as_deref());
            project_lookup(lookup, object.as_ref())
        };
        lookups.insert(lookup.name.clone(), found);
    }
    Ok(lookups)
}

/// [`gather_lookups`] over the objects given to an offline tool (`ruleplane render`, `test`, `diff`): a lookup by
/// name finds its object with [`find_lookup_object`], a lookup by selector selects among all of them.
pub fn gather_lookups_offline(
    rule: &Reconciler,
    parent: &Value,
    available: &[Value],
) -> Result<Map<String, Value>, RenderError> {
    gather_lookups(
        rule,
        parent,
        |lookup, name, namespace| find_lookup_object(available, lookup, name, namespace),
        |_, _| available.to_vec(),
    )
}

/// Finds a lookup's object among `available` objects (files given to `ruleplane render`, a test case's
/// `lookups`): the same apiVersion, kind and name, and the namespace when the lookup has one, as the worker's
/// cache is asked.
pub fn find_lookup_object(available: &[Value], lookup: &Lookup, name: &str, namespace: Option<&str>) -> Option<Value> {
    let text = |object: &Value, pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
    available
        .iter()
        .find(|object| {
            text(object, "/apiVersion").as_deref() == Some(lookup.api_version.as_str())
                && text(object, "/kind").as_deref() == Some(lookup.kind.as_str())
                && text(object, "/metadata/name").as_deref() == Some(name)
                && (namespace.is_none() || text(object, "/metadata/namespace").as_deref() == namespace)
        })
        .cloned()
}

/// What a lookup exposes to templates: the object (or the part its `jsonPath` selects), or `null`.
pub fn project_lookup(lookup: &ResolvedLookup, object: Option<&Value>) -> Value {
    let Some(object) = object else {
        return Value::Null;
    };
    match &lookup.json_path {
        None => object.clone(),
        Some(path) => path.select_one(object).unwrap_or(Value::Null),
    }
}

/// The data templates see: the parent's fields at the top level, plus `lookups`.
pub(crate) fn template_context(parent: &Value, lookups: &Map<String, Value>) -> Value {
    let mut context = match parent {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    context.insert("lookups".to_string(), Value::Object(lookups.clone()));
    Value::Object(context)
}

fn render_child_list(
    rule: &Reconciler,
    templates: &[Child],
    parent: &Value,
    lookups: &Map<String, Value>,
) -> Result<Vec<Value>, RenderError> {
    let context = template_context(parent, lookups);
    templates
        .iter()
        .map(|template| render_one(rule, template, &context, parent))
        .collect()
}

fn render_one(rule: &Reconciler, template: &Child, context: &Value, parent: &Value) -> Result<Value, RenderError> {
    let start = &template.source;
    let template_error = |error: TemplateRenderError| {
        let template_line = match &error {
            TemplateRenderError::MissingField { line, .. } | TemplateRenderError::Evaluation { line, .. } => *line,
            _ => 1,
        };
        RenderError::Template {
            child: template.id.clone(),
            location: SourceLocation {
                file: start.file.clone(),
                line: start.line + template_line.saturating_sub(1),
                column: start.column,
            },
            error,
        }
    };
    let structured = template.template.render_structured(context).map_err(template_error)?;
    let object_error = |message: String| RenderError::OutputObject {
        child: template.id.clone(),
        location: start.clone(),
        message,
    };
    let documents = parse_json_documents(structured.text()).map_err(|error| RenderError::OutputYaml {
        child: template.id.clone(),
        location: start.clone(),
        problem: Box::new(OutputYamlProblem {
            line: error.pos.line,
            column: error.pos.column,
            // The line as the rule wrote it, values masked: a message must not carry data read from the
            // cluster (a looked-up Secret, say) into statuses, Events and logs.
            rendered_line: template
                .template
                .render_masked(context)
                .ok()
                .and_then(|masked| masked.lines().nth(error.pos.line.saturating_sub(1)).map(str::to_string))
                .unwrap_or_default(),
            message: error.message,
        }),
    })?;
    let mut object = match <[Value; 1]>::try_from(documents) {
        Ok([one]) => one,
        Err(documents) => {
            return Err(object_error(match documents.len() {
                0 => "the template rendered nothing; it must render one Kubernetes object".into(),
                count => format!(
                    "the template rendered {count} YAML documents; each child renders exactly one object (add more children instead)"
                ),
            }));
        }
    };
    if !object.is_object() {
        return Err(object_error(format!(
            "rendered output is a {}, not a Kubernetes object",
            json_type_name(&object)
        )));
    }
    structured
        .fill(&mut object)
        .map_err(|error| object_error(error.to_string()))?;
    for field in ["/apiVersion", "/kind", "/metadata/name"] {
        let present = object
            .pointer(field)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty());
        if !present {
            return Err(RenderError::Incomplete {
                child: template.id.clone(),
                location: start.clone(),
                field: field.trim_start_matches('/').replace('/', "."),
            });
        }
    }
    contain(rule, template, context, parent, &mut object).map_err(object_error)?;
    label_child(&mut object, rule, template, parent);
    if template.retain
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(RETAIN_ANNOTATION.to_string(), Value::String("true".into()));
        }
    }
    Ok(object)
}

/// Containment, checked on every rendered child before anything is sent: the kind is the one the rule declares
/// for this child, a namespaced child lands in a namespace the rule allows (filled in when the template gives
/// none), a cluster-scoped one has none, and the name and namespace are valid Kubernetes names.
fn contain(
    rule: &Reconciler,
    template: &Child,
    context: &Value,
    parent: &Value,
    object: &mut Value,
) -> Result<(), String> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    // A rendered value in a message: shortened, and not at all where the rule reads Secrets.
    let secret = rule.reads_secrets();
    let shorten = |value: &str| {
        if secret {
            "<value>".to_string()
        } else {
            truncate(value, 64)
        }
    };
    let (api_version, kind) = (
        text("/apiVersion").unwrap_or_default(),
        text("/kind").unwrap_or_default(),
    );
    if api_version != template.api_version || kind != template.kind {
        return Err(format!(
            "rendered a {kind} ({api_version}), but this child is declared as {} ({}); a child's kind comes from \
             the rule, never from data",
            template.kind, template.api_version
        ));
    }
    let name = text("/metadata/name").unwrap_or_default();
    if !is_object_name(&api_version, &name) {
        return Err(format!(
            "rendered name `{}` is not a valid Kubernetes name (lower-case letters, digits, `-` and `.`, at most 253 \
             characters)",
            shorten(&name)
        ));
    }
    let namespaced = rule.child_kind(template).is_none_or(|kind| kind.namespaced);
    let rendered_namespace = match object.pointer("/metadata/namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(namespace)) => Some(namespace.clone()),
        Some(other) => {
            return Err(format!(
                "rendered `metadata.namespace` is a {}, not a name",
                json_type_name(other)
            ));
        }
    };
    if !namespaced {
        return match rendered_namespace {
            None => Ok(()),
            Some(namespace) => Err(format!(
                "{kind} is cluster-scoped, but the child was rendered with namespace `{}`",
                shorten(&namespace)
            )),
        };
    }
    let allowed = allowed_namespace(rule, template, context, parent)?;
    let parent_namespaced = rule.kinds().parent.as_ref().is_none_or(|kind| kind.namespaced);
    let namespace = match (rendered_namespace, allowed) {
        (None, Some(allowed)) => allowed,
        // An offline parent (a test case, `ruleplane render`) written without its namespace: so is the child.
        (None, None) if parent_namespaced => return Ok(()),
        (None, None) => {
            return Err(format!(
                "{kind} is namespaced and the parent is not: say where the child goes with the child's `namespace` \
                 field or a literal `metadata.namespace`"
            ));
        }
        (Some(rendered), Some(allowed)) if rendered == allowed => rendered,
        (Some(rendered), allowed) => {
            if template.namespace.is_none() && namespace_is_literal(template, context) {
                rendered
            } else {
                return Err(format!(
                    "the child would be written to namespace `{}`, but this rule allows {} (the child's `namespace` \
                     field lets the rule choose another)",
                    shorten(&rendered),
                    allowed.map_or("none for it".to_string(), |allowed| format!("`{allowed}`"))
                ));
            }
        }
    };
    if !is_dns_label(&namespace) {
        return Err(format!(
            "rendered namespace `{}` is not a valid namespace name",
            shorten(&namespace)
        ));
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("namespace".to_string(), Value::String(namespace));
    }
    Ok(())
}

/// The namespace a namespaced child may be written to without saying so in its template: the child's
/// `namespace` field when the rule sets one, else the parent's namespace, else (a Namespace parent) the parent.
fn allowed_namespace(
    rule: &Reconciler,
    template: &Child,
    context: &Value,
    parent: &Value,
) -> Result<Option<String>, String> {
    if let Some(namespace) = &template.namespace {
        let rendered = namespace
            .render(context)
            .map_err(|error| format!("`namespace`: {error}"))?;
        return Ok(Some(rendered.trim().to_string()));
    }
    let field = |pointer: &str| parent.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    if let Some(namespace) = field("/metadata/namespace") {
        return Ok(Some(namespace));
    }
    let watched = &rule.spec.watched;
    let parent_is_namespace = watched.api_version == "v1" && watched.kind == "Namespace";
    Ok(if parent_is_namespace {
        field("/metadata/name")
    } else {
        None
    })
}

/// Whether the template spells its `metadata.namespace` out itself, with no value from the cluster in it.
fn namespace_is_literal(template: &Child, context: &Value) -> bool {
    let Ok(masked) = template.template.render_structured_masked(context) else {
        return false;
    };
    let Ok(documents) = parse_json_documents(masked.text()) else {
        return false;
    };
    documents
        .first()
        .and_then(|document| document.pointer("/metadata/namespace"))
        .and_then(Value::as_str)
        .is_some_and(|namespace| !masked.has_placeholder(namespace))
}

/// Kubernetes' name rules for `metadata.name`: DNS subdomains, except RBAC objects, whose names are path
/// segments (`system:aggregate-to-view`).
pub(crate) fn is_object_name(api_version: &str, name: &str) -> bool {
    if api_version.starts_with("rbac.authorization.k8s.io/") {
        return !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']) && name.len() <= 253;
    }
    is_dns_subdomain(name)
}

/// Adds the ownership labels.
fn label_child(object: &mut Value, rule: &Reconciler, template: &Child, parent: &Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = metadata.entry("labels").or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(
            MANAGED_BY_LABEL.to_string(),
            Value::String(MANAGED_BY_VALUE.to_string()),
        );
        labels.insert(RULE_LABEL.to_string(), Value::String(rule.metadata.name.clone()));
        labels.insert(CHILD_ID_LABEL.to_string(), Value::String(template.id.clone()));
        if let Some(uid) = parent.pointer("/metadata/uid").and_then(Value::as_str) {
            labels.insert(PARENT_UID_LABEL.to_string(), Value::String(uid.to_string()));
        }
    }
}
