//! The walk that checks one object against its compact schema, field by field, collecting every problem.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{MAX_DEPTH, MISSING_FIELD, NOT_DECLARED, OBJECT_META, PathSegment, SchemaProblem, cel};

pub(super) struct Checker<'a> {
    pub(super) definitions: &'a HashMap<String, Value>,
    /// Checking a built-in kind: the apiserver defaults some of its fields before it validates (see
    /// [`DEFAULTED_WHEN_EMPTY`]).
    pub(super) built_in: bool,
    /// The definition whose properties are being checked (the last `ref` followed).
    pub(super) definition: Option<&'a str>,
    /// The compiled CEL rules: the CRDs', the built-in definitions'.
    pub(super) cel: [&'a cel::Rules; 2],
    pub(super) problems: Vec<SchemaProblem>,
    pub(super) path: Vec<PathSegment>,
}

impl Checker<'_> {
    fn problem(&mut self, message: String) {
        self.problems.push(SchemaProblem {
            path: self.path.clone(),
            message,
        });
    }

    fn field(&mut self, name: &str, check: impl FnOnce(&mut Self)) {
        self.path.push(PathSegment::Field(name.to_owned()));
        check(self);
        self.path.pop();
    }

    /// A custom resource: `apiVersion`, `kind` and `metadata` as for any object, the rest by the CRD's schema.
    pub(super) fn check_custom_resource(&mut self, schema: &Value, object: &Value) {
        let Some(fields) = object.as_object() else {
            return self.problem("expected an object".to_owned());
        };
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, value) in fields {
            match name.as_str() {
                "apiVersion" | "kind" => {}
                "metadata" => self.field(name, |c| c.check(&json!({ "ref": OBJECT_META }), value, 1)),
                _ => match properties.and_then(|p| p.get(name)) {
                    Some(property) => self.field(name, |c| c.check(property, value, 1)),
                    None if schema.get("preserveUnknownFields") == Some(&Value::Bool(true)) => {}
                    None => self.field(name, |c| c.problem(NOT_DECLARED.to_owned())),
                },
            }
        }
        self.check_required(schema, fields);
        self.check_rules(schema, object, true);
    }

    pub(super) fn check(&mut self, schema: &Value, value: &Value, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(name) = schema.get("ref").and_then(Value::as_str) {
            let Some((name, definition)) = self.definitions.get_key_value(name) else {
                return;
            };
            let outer = self.definition.replace(name.as_str());
            self.check(definition, value, depth + 1);
            self.definition = outer;
            return;
        }
        // An explicit null asks server-side apply to leave the field out: allowed anywhere.
        if value.is_null() {
            return;
        }
        let kind = schema.get("type").and_then(Value::as_str);
        match kind {
            Some("object") => self.check_object(schema, value, depth),
            Some("array") => self.check_array(schema, value, depth),
            Some("string") => self.check_string(schema, value),
            Some("integer") => self.check_integer(schema, value),
            Some("number") => self.check_number(schema, value),
            Some("boolean") if !value.is_boolean() => {
                self.problem(format!("expected a boolean, got {}", describe(value)));
            }
            Some("int-or-string") if !(value.is_i64() || value.is_u64() || value.is_string()) => {
                self.problem(format!("expected an integer or a string, got {}", describe(value)));
            }
            Some("quantity") => self.check_quantity(value),
            // No type: anything (`preserveUnknownFields` without a type, a dropped reference).
            _ if schema.get("properties").is_some() => self.check_object(schema, value, depth),
            _ => {}
        }
        self.check_enum(schema, value);
        self.check_rules(schema, value, false);
    }

    fn check_object(&mut self, schema: &Value, value: &Value, depth: usize) {
        let Some(fields) = value.as_object() else {
            return self.problem(format!("expected an object, got {}", describe(value)));
        };
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let preserve = schema.get("preserveUnknownFields") == Some(&Value::Bool(true));
        // An object schema with neither properties nor additionalProperties (RawExtension, FieldsV1) holds
        // anything, as does one that preserves unknown fields.
        let open = properties.is_none() && additional.is_none();
        let embedded = schema.get("embeddedResource") == Some(&Value::Bool(true));
        for (name, field) in fields {
            if let Some(property) = properties.and_then(|p| p.get(name)) {
                if field.as_str() == Some("") && self.defaulted_when_empty(name) {
                    continue;
                }
                self.field(name, |c| c.check(property, field, depth + 1));
            } else if embedded && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            } else {
                match additional {
                    Some(additional @ Value::Object(_)) => {
                        self.field(name, |c| c.check(additional, field, depth + 1));
                    }
                    Some(Value::Bool(true)) => {}
                    _ if open || preserve => {}
                    _ => self.field(name, |c| c.problem(NOT_DECLARED.to_owned())),
                }
            }
        }
        self.check_required(schema, fields);
    }

    fn check_required(&mut self, schema: &Value, fields: &Map<String, Value>) {
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let Some(name) = required.as_str() else { continue };
            if fields.get(name).is_none_or(Value::is_null) {
                self.field(name, |c| c.problem(MISSING_FIELD.to_owned()));
            }
        }
    }

    fn check_array(&mut self, schema: &Value, value: &Value, depth: usize) {
        let Some(items) = value.as_array() else {
            return self.problem(format!("expected a list, got {}", describe(value)));
        };
        let count = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            self.problem(format!("should have at least {min} item(s), has {count}"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            self.problem(format!("may have at most {max} item(s), has {count}"));
        }
        let Some(item_schema) = schema.get("items") else {
            return;
        };
        for (index, item) in items.iter().enumerate() {
            self.path.push(PathSegment::Index(index));
            self.check(item_schema, item, depth + 1);
            self.path.pop();
        }
    }

    fn check_string(&mut self, schema: &Value, value: &Value) {
        let Some(text) = value.as_str() else {
            return self.problem(format!("expected a string, got {}", describe(value)));
        };
        let length = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            self.problem(format!("should be at least {min} character(s) long, is {length}"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            self.problem(format!("may be at most {max} character(s) long, is {length}"));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && let Ok(regex) = regex::Regex::new(pattern)
            && !regex.is_match(text)
        {
            self.problem(format!("{} does not match the pattern {}", json!(text), json!(pattern)));
        }
        if schema.get("format").and_then(Value::as_str) == Some("byte") {
            use base64::Engine as _;
            if base64::engine::general_purpose::STANDARD.decode(text).is_err() {
                self.problem("expected base64-encoded bytes (a Secret's `data`; `stringData` takes text)".to_owned());
            }
        }
    }

    fn check_integer(&mut self, schema: &Value, value: &Value) {
        let number = match (value.as_i64(), value.as_u64()) {
            (Some(number), _) => number as i128,
            (None, Some(number)) => number as i128,
            _ => return self.problem(format!("expected an integer, got {}", describe(value))),
        };
        let range = match schema.get("format").and_then(Value::as_str) {
            Some("int32") => Some((i32::MIN as i128, i32::MAX as i128)),
            Some("int64") => Some((i64::MIN as i128, i64::MAX as i128)),
            _ => None,
        };
        if let Some((low, high)) = range
            && !(low..=high).contains(&number)
        {
            self.problem(format!(
                "{number} is out of range for {}",
                schema["format"].as_str().unwrap_or_default()
            ));
        }
        self.check_bounds(schema, number as f64);
    }

    fn check_number(&mut self, schema: &Value, value: &Value) {
        let Some(number) = value.as_f64() else {
            return self.problem(format!("expected a number, got {}", describe(value)));
        };
        self.check_bounds(schema, number);
    }

    fn check_bounds(&mut self, schema: &Value, number: f64) {
        let exclusive = |key: &str| schema.get(key) == Some(&Value::Bool(true));
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let below = if exclusive("exclusiveMinimum") {
                number <= min
            } else {
                number < min
            };
            if below {
                self.problem(format!("{number} is below the minimum {min}"));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let above = if exclusive("exclusiveMaximum") {
                number >= max
            } else {
                number > max
            };
            if above {
                self.problem(format!("{number} is above the maximum {max}"));
            }
        }
    }

    fn check_quantity(&mut self, value: &Value) {
        match value {
            Value::Number(_) => {}
            Value::String(text) => {
                if let Err(error) = crate::scheduler::engine::quantity::parse(text) {
                    self.problem(error.to_string());
                }
            }
            other => self.problem(format!(
                "expected a quantity (e.g. \"500m\", \"1Gi\"), got {}",
                describe(other)
            )),
        }
    }

    /// Whether the field `name` of the definition being checked is one the apiserver fills in when empty.
    fn defaulted_when_empty(&self, name: &str) -> bool {
        self.built_in
            && self
                .definition
                .is_some_and(|definition| DEFAULTED_WHEN_EMPTY.contains(&(definition, name)))
    }

    fn check_enum(&mut self, schema: &Value, value: &Value) {
        let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
            return;
        };
        if !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            self.problem(format!("{value} is not one of {}", list.join(", ")));
        }
    }
}

/// Fields of built-in kinds whose empty string the apiserver's defaulting replaces before it validates (Go
/// `SetDefaults_*`: `if obj.Field == ""`), so `imagePullPolicy: ""` is applied as `IfNotPresent`. A field the
/// defaulting fills only when it is absent (a pointer: a Job's `completionMode`) is refused when empty, offline as
/// by the apiserver. `testdata/defaulted-empty.yaml` holds one sample of each, applied to the plane by the
/// `offline_schema_agrees_with_the_apiserver_on_defaulted_empty_enums` integration test.
const DEFAULTED_WHEN_EMPTY: &[(&str, &str)] = &[
    ("io.k8s.api.core.v1.Container", "imagePullPolicy"),
    ("io.k8s.api.core.v1.Container", "terminationMessagePolicy"),
    ("io.k8s.api.core.v1.PodSpec", "restartPolicy"),
    ("io.k8s.api.core.v1.PodSpec", "dnsPolicy"),
    ("io.k8s.api.core.v1.ContainerPort", "protocol"),
    ("io.k8s.api.core.v1.ServicePort", "protocol"),
    ("io.k8s.api.core.v1.ServiceSpec", "type"),
    ("io.k8s.api.core.v1.ServiceSpec", "sessionAffinity"),
    ("io.k8s.api.batch.v1.CronJobSpec", "concurrencyPolicy"),
    ("io.k8s.api.apps.v1.DeploymentStrategy", "type"),
    ("io.k8s.api.apps.v1.StatefulSetSpec", "podManagementPolicy"),
    ("io.k8s.api.apps.v1.StatefulSetUpdateStrategy", "type"),
];

/// A value as a message shows it: its type, and a short text of it.
fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    match value {
        Value::Array(_) | Value::Object(_) | Value::Null => kind.to_owned(),
        _ => {
            let text = value.to_string();
            let short: String = text.chars().take(40).collect();
            let ellipsis = if short.len() < text.len() { "…" } else { "" };
            format!("{kind} ({short}{ellipsis})")
        }
    }
}
