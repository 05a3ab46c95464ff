//! A parent's status projected from the parent, its children and its lookups.

use serde_json::{Map, Value};

use super::{RenderError, template_context};
use crate::reconciler::resolved::{Reconciler, StatusSource};
use crate::reconciler::types::StatusType;
use crate::redaction::truncate;

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
            StatusSource::List(path) => Ok(Some(always_a_list(path.select(&scope)))),
            StatusSource::Template(template, value_type) => template
                .render(&scope)
                .map(|text| typed_status_text(&text, *value_type))
                .map_err(|error| RenderError::Status {
                    field: field.name.clone(),
                    location: template.partial_location(&error).unwrap_or_else(|| rule.source.clone()),
                    error: Box::new(error),
                }),
        };
        (field.name.as_str(), value)
    })
}

/// The scope status fields read: the parent's fields, `lookups`, `children` by id (a collection as the list of
/// its objects) and `ready`: per child id, how many of its objects are ready by its `readyWhen` (a single child:
/// 0 or 1; a child not there yet: 0).
pub(crate) fn status_scope(
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

/// A `type: list` field's value from its path's matches: several are the list; one is itself when a list, else
/// a one-item list; none, or `null`, is empty.
fn always_a_list(mut found: Vec<Value>) -> Value {
    match found.len() {
        1 => match found.remove(0) {
            Value::Null => Value::Array(Vec::new()),
            Value::Array(items) => Value::Array(items),
            one => Value::Array(vec![one]),
        },
        _ => Value::Array(found),
    }
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
