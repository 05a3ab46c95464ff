//! Pure rendering of a Reconciler: parent object + lookups → child objects and parent status.

use serde_json::{Map, Value};

use super::resolved::{Child, Reconciler, ResolvedLookup};
use super::types::Lookup;
use crate::builtin_kinds::builtin_kind;
use crate::diagnostics::SourceLocation;
use crate::jsonpath::is_truthy;
use crate::ownership::{
    CHILD_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_UID_LABEL, RETAIN_ANNOTATION, RULE_LABEL,
};
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
    /// Children whose `includeWhen` selected nothing truthy: they must not exist.
    pub excluded: Vec<String>,
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
    /// A lookup's name or namespace template failed.
    #[error("lookup `{lookup}`: {error}")]
    Lookup {
        /// The lookup's name.
        lookup: String,
        /// The template error.
        error: TemplateRenderError,
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
            RenderError::Template { error, .. } | RenderError::Lookup { error, .. } => error.category(),
            RenderError::OutputYaml { .. } => "output-yaml",
            RenderError::OutputObject { .. } => "output-object",
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
    };
    let mut by_id = Map::new();
    for child in rule.children_in_order() {
        if let Some(include_when) = &child.include_when
            && !is_truthy(include_when.select_one(&context).as_ref())
        {
            rendered.excluded.push(child.id.clone());
            continue;
        }
        let ready = |id: &String| {
            let dependency = rule.child(id);
            observed
                .get(id)
                .is_some_and(|o| dependency.is_some_and(|d| d.is_ready(o)))
        };
        if !child.depends_on.iter().all(ready) {
            rendered.waiting.push(child.id.clone());
            continue;
        }
        if !child.depends_on.is_empty()
            && let Value::Object(fields) = &mut context
        {
            let visible: Map<String, Value> = child
                .depends_on
                .iter()
                .filter_map(|id| Some((id.clone(), observed.get(id)?.clone())))
                .collect();
            fields.insert("children".to_string(), Value::Object(visible));
        }
        let object = render_one(rule, child, &context, parent)?;
        by_id.insert(child.id.clone(), object.clone());
        rendered.children.push(object);
    }
    rendered.status = compute_status(rule, parent, &by_id, lookups);
    Ok(rendered)
}

/// Renders the `finalize` children (empty when the rule has none).
pub fn render_finalize_children(
    rule: &Reconciler,
    parent: &Value,
    lookups: &Map<String, Value>,
) -> Result<Vec<Value>, RenderError> {
    render_child_list(rule, &rule.finalize_children, parent, lookups)
}

/// Status fields from JSONPaths over `{parent fields…, children: {id: object}, lookups}`. Paths that select
/// nothing are left out, so a field appears once the child reports it.
pub fn compute_status(
    rule: &Reconciler,
    parent: &Value,
    children: &Map<String, Value>,
    lookups: &Map<String, Value>,
) -> Map<String, Value> {
    let mut scope = template_context(parent, lookups);
    if let Value::Object(fields) = &mut scope {
        fields.insert("children".to_string(), Value::Object(children.clone()));
    }
    rule.status
        .iter()
        .filter_map(|field| field.path.select_one(&scope).map(|value| (field.name.clone(), value)))
        .collect()
}

/// Whether an observed child is ready according to its `readyWhen` (no `readyWhen`: ready once it exists).
pub fn child_ready(child: &Child, observed: &Value) -> bool {
    child.is_ready(observed)
}

/// The name and namespace of a lookup's object for `parent`. The namespace is the rendered `namespace`, else
/// the parent's, except for cluster-scoped built-in kinds (Namespace, Node, …), which have none.
pub fn render_lookup_target(lookup: &ResolvedLookup, parent: &Value) -> Result<(String, Option<String>), RenderError> {
    let context = template_context(parent, &Map::new());
    let render = |template: &CompiledTemplate| {
        template.render(&context).map_err(|error| RenderError::Lookup {
            lookup: lookup.name.clone(),
            error,
        })
    };
    let object_name = render(&lookup.name_template)?;
    let spec = &lookup.spec;
    let cluster_scoped = builtin_kind(&spec.api_version, &spec.kind).is_some_and(|k| !k.namespaced);
    let namespace = match &lookup.namespace_template {
        Some(namespace) => Some(render(namespace)?),
        None if cluster_scoped => None,
        None => parent
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    Ok((object_name.trim().to_string(), namespace.map(|n| n.trim().to_string())))
}

/// Builds the `lookups` map for `parent`: for each lookup, renders its target, asks `fetch` for the object
/// (`fetch(lookup, name, namespace)`, e.g. from a watch cache or from files given to `ruleplane render`) and
/// projects it with [`project_lookup`]. Objects that are not found appear as `null`.
pub fn gather_lookups(
    rule: &Reconciler,
    parent: &Value,
    mut fetch: impl FnMut(&Lookup, &str, Option<&str>) -> Option<Value>,
) -> Result<Map<String, Value>, RenderError> {
    let mut lookups = Map::new();
    for lookup in &rule.lookups {
        let (object_name, namespace) = render_lookup_target(lookup, parent)?;
        let object = fetch(&lookup.spec, &object_name, namespace.as_deref());
        lookups.insert(lookup.name.clone(), project_lookup(lookup, object.as_ref()));
    }
    Ok(lookups)
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
fn template_context(parent: &Value, lookups: &Map<String, Value>) -> Value {
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
    let text = template.template.render(context).map_err(|error| {
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
    })?;
    let object_error = |message: String| RenderError::OutputObject {
        child: template.id.clone(),
        location: start.clone(),
        message,
    };
    let documents = parse_json_documents(&text).map_err(|error| RenderError::OutputYaml {
        child: template.id.clone(),
        location: start.clone(),
        problem: Box::new(OutputYamlProblem {
            line: error.pos.line,
            column: error.pos.column,
            rendered_line: text
                .lines()
                .nth(error.pos.line.saturating_sub(1))
                .unwrap_or("")
                .to_string(),
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
    for field in ["/apiVersion", "/kind", "/metadata/name"] {
        let present = object
            .pointer(field)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty());
        if !present {
            let name = field.trim_start_matches('/').replace('/', ".");
            return Err(object_error(format!(
                "rendered object has no `{name}`; every child needs apiVersion, kind and metadata.name"
            )));
        }
    }
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

/// Adds the ownership labels and, for namespaced kinds without one, the parent's namespace.
fn label_child(object: &mut Value, rule: &Reconciler, template: &Child, parent: &Value) {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    // Only kinds known to be cluster-scoped stay without a namespace; everything else lives next to its parent.
    let cluster_scoped = builtin_kind(&api_version, &kind).is_some_and(|k| !k.namespaced);
    if !cluster_scoped
        && !metadata.contains_key("namespace")
        && let Some(namespace) = parent.pointer("/metadata/namespace").and_then(Value::as_str)
    {
        metadata.insert("namespace".to_string(), Value::String(namespace.to_string()));
    }
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
