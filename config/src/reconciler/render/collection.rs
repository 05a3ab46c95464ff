//! The items of a collection child (`forEach`, `count`) and the distinct names of its objects.

use serde_json::{Map, Value};

use super::RenderError;
use crate::reconciler::resolved::{Child, Collection, CollectionItems};
use crate::redaction::truncate;
use crate::yaml_tree::json_type_name;

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
