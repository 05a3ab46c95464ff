//! Lookups for one parent: their targets, the objects they select and what templates see of them.

use serde_json::{Map, Value};

use super::object::is_object_name;
use super::{RenderError, template_context};
use crate::naming::is_dns_label;
use crate::reconciler::resolved::{LookupTarget, Reconciler, ResolvedLookup, SelectionNamespace};
use crate::reconciler::types::Lookup;
use crate::redaction::truncate;
use crate::template::CompiledTemplate;

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
            error: Box::new(error),
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
