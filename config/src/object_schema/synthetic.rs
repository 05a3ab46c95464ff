//! An object of a kind with every field its schema declares filled in: the parent `validate` renders each
//! Reconciler for, so its children's schemas are checked without a test case.

use serde_json::{Map, Value, json};

use super::{Builtin, KindSchemas, builtin, kind_key};

/// How many schema levels deep fields are filled in: far enough for any real spec (a Deployment's reach 9
/// definitions, 20 levels), a guard for CRD schemas, which are trees written out in full.
const MAX_DEPTH: usize = 48;
/// How many values a synthetic object holds at most (the largest built-in kind, a Pod, holds about 1,600): once spent, the remaining optional fields are left out, so no schema makes it grow without bound.
const MAX_VALUES: usize = 10_000;

impl KindSchemas {
    /// A `kind` object in `namespace` (`None`: cluster-scoped) named `example`, with every field of its schema
    /// present (one item per list, one `example` key per map, an enum's first value); `None` when no schema is
    /// known. `metadata` is a plain one (name, namespace, uid, generation), not every field of ObjectMeta.
    /// A recursive schema (JSONSchemaProps) is filled in once: a definition met again inside itself is left out.
    pub fn synthetic_object(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Option<Value> {
        let key = kind_key(api_version, kind);
        let builtin = builtin(self.version);
        let mut synthesizer = Synthesizer {
            builtin,
            expanding: Vec::new(),
            values_left: MAX_VALUES,
        };
        let mut object = match self.custom.get(&key) {
            Some(schema) => synthesizer.value(schema, 0),
            None => synthesizer.value(&json!({ "ref": builtin.kinds.get(&key)? }), 0),
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

/// One synthetic object being built: the definitions on the way down from its root, and what is left of its size.
struct Synthesizer<'a> {
    builtin: &'a Builtin,
    expanding: Vec<&'a str>,
    values_left: usize,
}

impl<'a> Synthesizer<'a> {
    /// The value of `schema`, `Null` when it is left out (depth, size, or a definition inside itself).
    fn value(&mut self, schema: &'a Value, depth: usize) -> Value {
        if depth > MAX_DEPTH || self.values_left == 0 {
            return Value::Null;
        }
        if let Some(name) = schema.get("ref").and_then(Value::as_str) {
            let Some(definition) = self.builtin.definitions.get(name) else {
                return Value::Null;
            };
            if self.expanding.contains(&name) {
                return Value::Null;
            }
            self.expanding.push(name);
            let value = self.value(definition, depth + 1);
            self.expanding.pop();
            return value;
        }
        self.values_left -= 1;
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
                    .map_or(Value::Null, |items| self.value(items, depth + 1));
                if item.is_null() { json!([]) } else { json!([item]) }
            }
            _ => self.object(schema, depth),
        }
    }

    /// An object's declared properties, and one `example` key of its `additionalProperties`.
    fn object(&mut self, schema: &'a Value, depth: usize) -> Value {
        let mut out = Map::new();
        for (name, property) in schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let value = self.value(property, depth + 1);
            if !value.is_null() {
                out.insert(name.clone(), value);
            }
        }
        if let Some(additional @ Value::Object(_)) = schema.get("additionalProperties") {
            let value = self.value(additional, depth + 1);
            if !value.is_null() {
                out.insert("example".into(), value);
            }
        }
        Value::Object(out)
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

    fn values(value: &Value) -> usize {
        match value {
            Value::Object(fields) => 1 + fields.values().map(values).sum::<usize>(),
            Value::Array(items) => 1 + items.iter().map(values).sum::<usize>(),
            _ => 1,
        }
    }

    #[test]
    fn a_recursive_schema_is_filled_in_once() {
        let schemas = KindSchemas::default();
        let crd = schemas
            .synthetic_object("apiextensions.k8s.io/v1", "CustomResourceDefinition", None)
            .expect("known");
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(schema["type"], "example");
        assert_eq!(schema["maxLength"], 1);
        assert_eq!(
            schema["properties"],
            json!({}),
            "JSONSchemaProps inside itself is left out"
        );
        assert!(schema.get("not").is_none());
        assert!(values(&crd) < 500, "{} values", values(&crd));
    }

    #[test]
    fn a_schema_of_more_fields_than_the_budget_is_cut_at_the_budget() {
        let leaf = json!({"type": "string"});
        let wide = |inner: Value| {
            let properties: Map<String, Value> = (0..25).map(|i| (format!("f{i}"), inner.clone())).collect();
            json!({"type": "object", "properties": properties})
        };
        let mut schemas = KindSchemas::default();
        schemas.add_custom("example.com/v1", "Wide", &wide(wide(wide(leaf))));
        let wide = schemas.synthetic_object("example.com/v1", "Wide", None).expect("known");
        assert!(values(&wide) <= MAX_VALUES + 10, "{} values", values(&wide));
        assert_eq!(wide["f0"]["f0"]["f0"], "example");
    }
}
