//! An object of a kind with every field its schema declares filled in: the parent `validate` renders each
//! Reconciler for, so its children's schemas are checked without a test case.

use serde_json::{Map, Value, json};

use super::{Builtin, KindSchemas, builtin, kind_key};

/// How many definitions deep references are followed: far enough for any real spec (a Deployment's reach 9),
/// short of recursive ones (JSONSchemaProps).
const MAX_DEPTH: usize = 16;

impl KindSchemas {
    /// A `kind` object in `namespace` (`None`: cluster-scoped) named `example`, with every field of its schema
    /// present (one item per list, one `example` key per map, an enum's first value); `None` when no schema is
    /// known. `metadata` is a plain one (name, namespace, uid, generation), not every field of ObjectMeta.
    pub fn synthetic_object(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Option<Value> {
        let key = kind_key(api_version, kind);
        let builtin = builtin(self.version);
        let mut object = match self.custom.get(&key) {
            Some(schema) => synthesize(builtin, schema, 0),
            None => synthesize(builtin, &json!({ "ref": builtin.kinds.get(&key)? }), 0),
        };
        let fields = object.as_object_mut()?;
        fields.insert("apiVersion".into(), api_version.into());
        fields.insert("kind".into(), kind.into());
        let mut metadata = json!({
            "name": "example", "uid": "00000000-0000-0000-0000-000000000000", "generation": 1,
            "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {}, "annotations": {}
        });
        if let Some(namespace) = namespace {
            metadata["namespace"] = namespace.into();
        }
        fields.insert("metadata".into(), metadata);
        Some(object)
    }
}

fn synthesize(builtin: &Builtin, schema: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(name) = schema.get("ref").and_then(Value::as_str) {
        return match builtin.definitions.get(name) {
            Some(definition) => synthesize(builtin, definition, depth + 1),
            None => Value::Null,
        };
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    let number = |default: i64| schema.get("minimum").and_then(Value::as_i64).unwrap_or(default);
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => "2026-01-01T00:00:00Z".into(),
            Some("byte") => "ZXhhbXBsZQ==".into(),
            _ => "example".into(),
        },
        Some("integer") => number(1).into(),
        Some("number") => number(1).into(),
        Some("boolean") => true.into(),
        Some("int-or-string") => 1.into(),
        Some("quantity") => "1".into(),
        Some("array") => {
            let item = schema
                .get("items")
                .map_or(Value::Null, |items| synthesize(builtin, items, depth));
            if item.is_null() { json!([]) } else { json!([item]) }
        }
        _ => {
            let mut out = Map::new();
            for (name, property) in schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let value = synthesize(builtin, property, depth);
                if !value.is_null() {
                    out.insert(name.clone(), value);
                }
            }
            if let Some(additional @ Value::Object(_)) = schema.get("additionalProperties") {
                let value = synthesize(builtin, additional, depth);
                if !value.is_null() {
                    out.insert("example".into(), value);
                }
            }
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_object_passes_its_own_schema_and_has_every_field() {
        let schemas = KindSchemas::default();
        let deployment = schemas
            .synthetic_object("apps/v1", "Deployment", Some("team-a"))
            .expect("known");
        assert_eq!(schemas.check(&deployment).expect("known"), Vec::new());
        assert_eq!(deployment["spec"]["replicas"], 1);
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["name"],
            "example"
        );
        assert_eq!(
            deployment["spec"]["template"]["spec"]["restartPolicy"], "Always",
            "an enum's first value"
        );
        assert_eq!(deployment["metadata"]["namespace"], "team-a");
        let mut custom = KindSchemas::default();
        custom.add_custom(
            "example.com/v1",
            "Bucket",
            &json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 5}, "tags": {"type": "object", "additionalProperties": {"type": "string"}}}}}}),
        );
        let bucket = custom
            .synthetic_object("example.com/v1", "Bucket", None)
            .expect("known");
        assert_eq!(bucket["spec"], json!({"size": 5, "tags": {"example": "example"}}));
        assert!(bucket["metadata"].get("namespace").is_none());
        assert!(custom.synthetic_object("example.com/v1", "Other", None).is_none());
    }
}
