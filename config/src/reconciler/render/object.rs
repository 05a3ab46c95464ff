//! One child object rendered from its template: parsed, checked for containment and labelled as owned.

use serde_json::{Map, Value};

use super::{OutputYamlProblem, RenderError, template_context};
use crate::diagnostics::SourceLocation;
use crate::naming::{is_dns_label, is_dns_subdomain};
use crate::ownership::{
    CHILD_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_UID_LABEL, RETAIN_ANNOTATION, RULE_LABEL,
};
use crate::reconciler::resolved::{Child, Reconciler};
use crate::redaction::truncate;
use crate::template::TemplateRenderError;
use crate::yaml_tree::{json_type_name, parse_json_documents};

/// Renders the `finalize` children (empty when the rule has none).
pub fn render_finalize_children(
    rule: &Reconciler,
    parent: &Value,
    lookups: &Map<String, Value>,
) -> Result<Vec<Value>, RenderError> {
    render_child_list(rule, &rule.finalize_children, parent, lookups)
}

/// Status fields over `{parent fields…, children: {id: object or list}, lookups, ready: {id: count}}`: paths
/// Whether an observed child is ready according to its `readyWhen` (no `readyWhen`: ready once it exists).
pub fn child_ready(child: &Child, observed: &Value) -> bool {
    child.is_ready(observed)
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

pub(super) fn render_one(
    rule: &Reconciler,
    template: &Child,
    context: &Value,
    parent: &Value,
) -> Result<Value, RenderError> {
    let start = &template.source;
    let template_error = |error: TemplateRenderError| {
        // In a partial: its line in the file that declares it; in the template: the template's line.
        let location = template.template.partial_location(&error).unwrap_or_else(|| {
            let template_line = error.spot().map_or(1, |spot| spot.line);
            SourceLocation {
                file: start.file.clone(),
                line: start.line + template_line.saturating_sub(1),
                column: start.column,
            }
        });
        RenderError::Template {
            child: template.id.clone(),
            location,
            error: Box::new(error),
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
