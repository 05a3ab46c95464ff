//! Pure rendering of a Reconciler: parent object + lookups → child objects and parent status.

mod collection;
mod error;
mod lookups;
mod object;
mod status;

use serde_json::{Map, Value};

use super::resolved::Reconciler;
use super::types::WhenMissing;
use crate::jsonpath::is_truthy;

use collection::{check_distinct_names, collection_items, same_object};
pub use error::{OutputYamlProblem, RenderError};
pub use lookups::{
    find_lookup_object, gather_lookups, gather_lookups_offline, project_lookup, render_lookup_target,
    select_lookup_objects, selection_namespace, selects_lookup_object,
};
pub(crate) use object::is_object_name;
use object::render_one;
pub use object::{child_ready, render_finalize_children};
pub(crate) use status::status_scope;
pub use status::{compute_status, project_status};

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

/// The data templates see: the parent's fields at the top level, plus `lookups`.
pub(crate) fn template_context(parent: &Value, lookups: &Map<String, Value>) -> Value {
    let mut context = match parent {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    context.insert("lookups".to_string(), Value::Object(lookups.clone()));
    Value::Object(context)
}
