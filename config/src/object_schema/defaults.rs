//! Custom resources defaulted offline from their CRD's structural schema, as the apiserver defaults them.

use serde_json::{Map, Value};

/// Deeper than any real object: a guard for the recursion, not a rule of the apiserver's.
const MAX_DEPTH: usize = 128;

/// Defaults `value` by `schema` (an `openAPIV3Schema` as a CRD writes it) the way the apiserver does before it
/// stores or serves an object (apiextensions-apiserver's structural `Default`, then
/// `PruneNonNullableNullsWithoutDefaults`): a property that is absent, or `null` where the schema does not say
/// `nullable: true`, takes a copy of its `default`; a non-nullable `null` without one is dropped; then every
/// value present (defaulted ones too) is defaulted by its own schema — properties, `additionalProperties` and
/// `items`. Fields the schema does not declare (under `x-kubernetes-preserve-unknown-fields`) are left as they are.
pub(super) fn apply_defaults(value: &mut Value, schema: &Value) {
    default_value(value, schema, 0);
}

fn default_value(value: &mut Value, schema: &Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(fields) => default_object(fields, schema, depth),
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            for item in items.iter_mut() {
                if item.is_null() && !nullable(item_schema) {
                    match item_schema.get("default") {
                        Some(default) => *item = default.clone(),
                        None => continue,
                    }
                }
                default_value(item, item_schema, depth + 1);
            }
        }
        _ => {}
    }
}

fn default_object(fields: &mut Map<String, Value>, schema: &Value, depth: usize) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let Some(default) = property.get("default") else {
            continue;
        };
        match fields.get(name) {
            None => {
                fields.insert(name.clone(), default.clone());
            }
            Some(Value::Null) if !nullable(property) => {
                fields.insert(name.clone(), default.clone());
            }
            Some(_) => {}
        }
    }
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let mut dropped = Vec::new();
    for (name, field) in fields.iter_mut() {
        let Some(field_schema) = properties.and_then(|p| p.get(name)).or(additional) else {
            continue;
        };
        if field.is_null() && !nullable(field_schema) {
            match field_schema.get("default") {
                Some(default) => *field = default.clone(),
                None => {
                    dropped.push(name.clone());
                    continue;
                }
            }
        }
        default_value(field, field_schema, depth + 1);
    }
    for name in dropped {
        fields.remove(&name);
    }
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::apply_defaults;

    fn schema() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "replicas": { "type": "integer", "default": 1 },
                        "mode": { "type": "string", "default": "fast" },
                        "note": { "type": "string", "nullable": true, "default": "n" },
                        "gone": { "type": "string" },
                        "tls": {
                            "type": "object",
                            "properties": { "port": { "type": "integer", "default": 443 } }
                        },
                        "ports": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": { "protocol": { "type": "string", "default": "TCP" } }
                            }
                        },
                        "labels": {
                            "type": "object",
                            "additionalProperties": { "type": "string", "default": "x" }
                        },
                        "extra": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": { "known": { "type": "string", "default": "k" } }
                        }
                    }
                }
            }
        })
    }

    #[test]
    fn absent_fields_take_their_defaults_inside_the_objects_present_and_nested() {
        let mut object = json!({ "apiVersion": "a/v1", "kind": "K", "spec": {
            "replicas": 3, "ports": [{ "port": 80 }, { "protocol": "UDP" }],
            "extra": { "unknown": { "deep": null } }
        }});
        apply_defaults(&mut object, &schema());
        assert_eq!(
            object["spec"],
            json!({
                "replicas": 3, "mode": "fast", "note": "n",
                "ports": [{ "port": 80, "protocol": "TCP" }, { "protocol": "UDP" }],
                "extra": { "known": "k", "unknown": { "deep": null } }
            }),
            "tls is absent: nothing inside it is defaulted; unknown fields are left as they are"
        );
    }

    #[test]
    fn a_defaulted_object_is_itself_defaulted() {
        let mut object = json!({ "apiVersion": "a/v1", "kind": "K" });
        apply_defaults(&mut object, &schema());
        assert_eq!(object["spec"], json!({ "replicas": 1, "mode": "fast", "note": "n" }));
    }

    #[test]
    fn nulls_are_defaulted_or_dropped_unless_nullable() {
        let mut object = json!({ "spec": {
            "mode": null, "note": null, "gone": null, "tls": {},
            "labels": { "a": null, "b": "y" }
        }});
        apply_defaults(&mut object, &schema());
        assert_eq!(object["spec"]["mode"], "fast", "non-nullable null: defaulted");
        assert_eq!(object["spec"]["note"], serde_json::Value::Null, "nullable null: kept");
        assert!(
            object["spec"].get("gone").is_none(),
            "non-nullable null without default: dropped"
        );
        assert_eq!(object["spec"]["tls"], json!({ "port": 443 }));
        assert_eq!(object["spec"]["labels"], json!({ "a": "x", "b": "y" }));
    }
}
