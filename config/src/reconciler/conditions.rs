//! Conditions of the rule author's design (`spec.conditions`): evaluated over the status scope, beside Ready/Synced.

use serde_json::{Map, Value};

use super::plan::{Condition, ConditionStatus};
use super::render::{RenderError, status_scope};
use super::resolved::Reconciler;
use crate::diagnostics::SourceLocation;
use crate::jsonpath::CompiledPath;
use crate::redaction::truncate;
use crate::template::CompiledTemplate;

/// The conditions Ruleplane writes itself: an author's condition of that type would fight them.
pub(crate) const RESERVED_CONDITION_TYPES: &[&str] = &["Ready", "Synced"];

/// The most conditions one `forEach` entry yields for a parent: a parent's status is read by every client.
pub(crate) const MAX_CONDITION_ITEMS: usize = 100;

/// A checked `spec.conditions` entry.
#[derive(Clone, Debug)]
pub(crate) struct ResolvedCondition {
    /// The type as written (a literal, or a template with `forEach`).
    pub(crate) type_: ConditionType,
    /// The type's text as written, naming the entry in errors.
    pub(crate) written_type: String,
    pub(crate) status: CompiledTemplate,
    pub(crate) reason: Option<CompiledTemplate>,
    pub(crate) message: Option<CompiledTemplate>,
    /// The item's name and the JSONPath its list comes from.
    pub(crate) for_each: Option<(String, CompiledPath)>,
    /// Whether a change of its status is published as an Event.
    pub(crate) event: bool,
    /// Where the entry is in the rule file.
    pub(crate) source: SourceLocation,
}

/// A condition's type: checked at load when literal, when rendered otherwise.
#[derive(Clone, Debug)]
pub(crate) enum ConditionType {
    Literal(String),
    Template(CompiledTemplate),
}

/// Whether `text` is a valid condition type as `metav1.Condition` validates it: an optional DNS-subdomain prefix
/// and `/`, then a name of letters, digits, `-`, `_` and `.` starting and ending with a letter or digit, at most
/// 316 characters in all.
pub(crate) fn is_condition_type(text: &str) -> bool {
    let name = match text.rsplit_once('/') {
        Some((prefix, name)) => {
            let prefix_ok =
                !prefix.is_empty() && prefix.len() <= 253 && prefix.split('.').all(crate::naming::is_dns_label);
            if !prefix_ok {
                return false;
            }
            name
        }
        None => text,
    };
    let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    text.len() <= 316
        && alphanumeric(name.chars().next())
        && alphanumeric(name.chars().next_back())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Whether `text` is a valid condition reason: a letter, then letters, digits, `_`, `,` and `:`, not ending in
/// `,` or `:`, at most 1024 characters (as `metav1.Condition` validates it).
pub(crate) fn is_condition_reason(text: &str) -> bool {
    text.len() <= 1024
        && text.starts_with(|c: char| c.is_ascii_alphabetic())
        && !text.ends_with([',', ':'])
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
}

/// The author's conditions of one parent, in the rule's order (a `forEach` entry's items in the list's order),
/// over the same scope as status fields; with the first failure. A condition whose template fails or renders
/// something invalid is written `Unknown` with reason `ConditionError` (its type when that much is known), so
/// the failure shows where the condition is read; a `forEach` over more than [`MAX_CONDITION_ITEMS`] items keeps
/// the first ones.
pub fn author_conditions(
    rule: &Reconciler,
    parent: &Value,
    children: &Map<String, Value>,
    lookups: &Map<String, Value>,
) -> (Vec<Condition>, Option<RenderError>) {
    let mut out = Vec::new();
    let mut failure = None;
    if rule.conditions.is_empty() {
        return (out, failure);
    }
    let scope = status_scope(rule, parent, children, lookups);
    for condition in &rule.conditions {
        let Some((name, path)) = &condition.for_each else {
            evaluate(condition, &scope, &mut out, &mut failure);
            continue;
        };
        let items = match path.select_one(&scope) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items,
            Some(other) => vec![other],
        };
        if items.len() > MAX_CONDITION_ITEMS {
            failure.get_or_insert_with(|| RenderError::Condition {
                condition: condition.written_type.clone(),
                location: condition.source.clone(),
                message: format!(
                    "forEach `{name}` yields {} items, more than the {MAX_CONDITION_ITEMS} conditions it may write; \
                     the first {MAX_CONDITION_ITEMS} are written",
                    items.len()
                ),
            });
        }
        for (index, item) in items.into_iter().take(MAX_CONDITION_ITEMS).enumerate() {
            let mut item_scope = scope.clone();
            if let Value::Object(fields) = &mut item_scope {
                fields.insert(name.clone(), item);
                fields.insert(format!("{name}_index"), Value::from(index));
            }
            evaluate(condition, &item_scope, &mut out, &mut failure);
        }
    }
    (out, failure)
}

/// One condition over `scope`, appended to `out` unless its type cannot be told; a problem goes to `failure`.
fn evaluate(condition: &ResolvedCondition, scope: &Value, out: &mut Vec<Condition>, failure: &mut Option<RenderError>) {
    let type_ = match &condition.type_ {
        ConditionType::Literal(text) => Ok(text.clone()),
        ConditionType::Template(template) => template
            .render(scope)
            .map_err(|error| format!("type: {error}"))
            .map(|text| text.trim().to_string())
            .and_then(|text| {
                if RESERVED_CONDITION_TYPES.contains(&text.as_str()) {
                    Err(format!("type `{text}` is Ruleplane's own condition"))
                } else if !is_condition_type(&text) {
                    Err(format!("type `{}` is not a condition type", truncate(&text, 64)))
                } else if out.iter().any(|written| written.type_ == text) {
                    Err(format!("type `{text}` is written twice"))
                } else {
                    Ok(text)
                }
            }),
    };
    let type_ = match type_ {
        Ok(type_) => type_,
        Err(message) => {
            // No type to write it under: the condition is left out, and the failure says why.
            report(condition, &condition.written_type, message, failure);
            return;
        }
    };
    match fields_of(condition, scope) {
        Ok((status, reason, message)) => out.push(Condition {
            type_,
            status,
            reason,
            message,
            event: condition.event,
        }),
        Err(message) => {
            let shown = truncate(&message, crate::redaction::MAX_MESSAGE_CHARS);
            report(condition, &type_, message, failure);
            out.push(Condition {
                type_,
                status: ConditionStatus::Unknown,
                reason: "ConditionError".into(),
                message: shown,
                event: condition.event,
            });
        }
    }
}

/// A condition's status, reason and message rendered over `scope`, or why they cannot be.
fn fields_of(condition: &ResolvedCondition, scope: &Value) -> Result<(ConditionStatus, String, String), String> {
    let status_text = condition
        .status
        .render(scope)
        .map_err(|error| format!("status: {error}"))?;
    let status = match status_text.trim().to_ascii_lowercase().as_str() {
        "true" => ConditionStatus::True,
        "false" => ConditionStatus::False,
        "unknown" | "" => ConditionStatus::Unknown,
        _ => {
            return Err(format!(
                "status rendered `{}`, not True, False or Unknown",
                truncate(status_text.trim(), 64)
            ));
        }
    };
    let reason = match &condition.reason {
        None => String::new(),
        Some(template) => template
            .render(scope)
            .map_err(|error| format!("reason: {error}"))?
            .trim()
            .to_string(),
    };
    let reason = if reason.is_empty() {
        status.as_str().to_string()
    } else if is_condition_reason(&reason) {
        reason
    } else {
        return Err(format!(
            "reason `{}` must be CamelCase (a letter, then letters, digits, `_`, `,` or `:`)",
            truncate(&reason, 64)
        ));
    };
    let message = match &condition.message {
        None => String::new(),
        Some(template) => template.render(scope).map_err(|error| format!("message: {error}"))?,
    };
    let message = truncate(message.trim(), crate::redaction::MAX_MESSAGE_CHARS);
    Ok((status, reason, message))
}

fn report(condition: &ResolvedCondition, type_: &str, message: String, failure: &mut Option<RenderError>) {
    failure.get_or_insert_with(|| RenderError::Condition {
        condition: type_.to_string(),
        location: condition.source.clone(),
        message,
    });
}

/// The conditions among `conditions` that ask for an Event (`event: true`) and whose status differs from the one
/// the parent's status (`current`, as read) holds for their type, or that it does not hold yet.
pub fn condition_transitions<'a>(current: Option<&Value>, conditions: &'a [Condition]) -> Vec<&'a Condition> {
    let previous = current
        .and_then(|status| status.get("conditions"))
        .and_then(Value::as_array);
    conditions
        .iter()
        .filter(|condition| condition.event)
        .filter(|condition| {
            let before = previous
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(condition.type_.as_str()));
            before.and_then(|c| c.get("status")).and_then(Value::as_str) != Some(condition.status.as_str())
        })
        .collect()
}
