//! The items of a collection child (`forEach`, `count`) and the distinct names of its objects.

use serde_json::{Map, Value};

use super::RenderError;
use crate::diagnostics::SourceLocation;
use crate::reconciler::resolved::{Child, Collection, CollectionItems, ItemSource};
use crate::redaction::truncate;
use crate::template::CompiledTemplate;
use crate::yaml_tree::{json_type_name, parse_json_documents};

/// The items of a collection child for one parent, each as the names it binds (`zone`, `zone_index`; with
/// `count`, `count_index`), in order: for several `forEach` entries, the cartesian product, first entry outermost.
pub(super) fn collection_items(
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
        CollectionItems::Count(source) => {
            let count = count_of(child, source, context)?;
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
            for (name, source) in entries {
                let list = list_of(child, name, source, context)?;
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

/// How many copies `count` asks for: its path's number (a missing field: none), or its template's text, which
/// must be a non-negative integer.
fn count_of(child: &Child, source: &ItemSource, context: &Value) -> Result<u64, RenderError> {
    let (template, at) = match source {
        ItemSource::Path(path) => {
            return match path.select_one(context) {
                None | Some(Value::Null) => Ok(0),
                Some(value) => value.as_u64().ok_or_else(|| RenderError::Collection {
                    child: child.id.clone(),
                    location: child.source.clone(),
                    message: format!(
                        "`count` ({}) must yield a non-negative integer, not {}",
                        path.source(),
                        shorten_value(&value)
                    ),
                }),
            };
        }
        ItemSource::Template(template, at) => (template, at),
    };
    let text = render_item_template(child, "`count`", template, at, context)?;
    let text = text.trim();
    text.parse::<u64>().map_err(|_| {
        // The text may hold values read from the cluster: say what kind of text it is, not the text.
        let rendered = match text.parse::<i128>() {
            _ if text.is_empty() => "nothing".to_string(),
            Ok(number) if number < 0 => "a negative number".to_string(),
            Ok(_) => "a number past 18446744073709551615".to_string(),
            Err(_) => "text that is not an integer".to_string(),
        };
        RenderError::Collection {
            child: child.id.clone(),
            location: at.clone(),
            message: format!(
                "`count` ({}) must render a non-negative integer; it rendered {rendered}",
                truncate(template.source(), 64)
            ),
        }
    })
}

/// The list a `forEach` entry yields: its path's list (a missing field or `null`: none; several matches: those),
/// or its template's text read as one YAML list (nothing or `null`: none).
fn list_of(child: &Child, name: &str, source: &ItemSource, context: &Value) -> Result<Vec<Value>, RenderError> {
    let (found, location) = match source {
        ItemSource::Path(path) => {
            let mut found = path.select(context);
            match found.len() {
                0 => return Ok(Vec::new()),
                1 => (found.remove(0), &child.source),
                _ => return Ok(found),
            }
        }
        ItemSource::Template(template, at) => {
            let what = format!("forEach `{name}`");
            let structured = template
                .render_structured(context)
                .map_err(|error| item_template_error(child, &what, template, at, &error))?;
            let error = |message: String| RenderError::Collection {
                child: child.id.clone(),
                location: at.clone(),
                message: format!("{what} must render a YAML list: {message}"),
            };
            let mut documents = parse_json_documents(structured.text()).map_err(|problem| {
                error(format!(
                    "the rendered text is not YAML (line {}, column {})",
                    problem.pos.line, problem.pos.column
                ))
            })?;
            let mut found = match documents.len() {
                0 => return Ok(Vec::new()),
                1 => documents.remove(0),
                count => return Err(error(format!("it rendered {count} YAML documents"))),
            };
            structured
                .fill(&mut found)
                .map_err(|problem| error(problem.to_string()))?;
            (found, at)
        }
    };
    match found {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        other => Err(RenderError::Collection {
            child: child.id.clone(),
            location: location.clone(),
            message: format!(
                "forEach `{name}` ({}) must yield a list, not {}",
                truncate(source.source(), 64),
                shorten_value(&other)
            ),
        }),
    }
}

/// A collection template rendered as plain text.
fn render_item_template(
    child: &Child,
    what: &str,
    template: &CompiledTemplate,
    at: &SourceLocation,
    context: &Value,
) -> Result<String, RenderError> {
    template
        .render(context)
        .map_err(|error| item_template_error(child, what, template, at, &error))
}

/// A collection template that failed: at the field (or in the partial it failed in).
fn item_template_error(
    child: &Child,
    what: &str,
    template: &CompiledTemplate,
    at: &SourceLocation,
    error: &crate::template::TemplateRenderError,
) -> RenderError {
    RenderError::Collection {
        child: child.id.clone(),
        location: template.partial_location(error).unwrap_or_else(|| at.clone()),
        message: format!("{what}: {error}"),
    }
}

/// A collection's objects must have distinct names (and namespaces): the names that repeat are reported.
pub(super) fn check_distinct_names(child: &Child, objects: &[Value]) -> Result<(), RenderError> {
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
pub(super) fn same_object(a: &Value, b: &Value) -> bool {
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
