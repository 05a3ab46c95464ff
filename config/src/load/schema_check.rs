//! Checks a located YAML tree against the rule schema, collecting every violation with its position.
//!
//! Supports the subset of JSON Schema that the schema generator emits for the rule types: `$ref`, `type`,
//! `properties`/`required`/`additionalProperties`, `items`, `enum`/`const`, `oneOf`/`anyOf`/`allOf`,
//! `minimum`/`maximum`, `minLength`, `minItems`, `pattern`.

use serde_json::Value;

use crate::diagnostics::{DiagnosticCode, Pos, did_you_mean};
use crate::yaml_tree::{Node, NodeValue, PathStep, path_to_string};

/// One schema violation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaIssue {
    /// Path of the offending value (for unknown fields: of the unknown key).
    pub(crate) path: Vec<PathStep>,
    pub(crate) pos: Pos,
    pub(crate) code: DiagnosticCode,
    pub(crate) message: String,
}

/// Field names people bring from other tools, and what they are called here.
const FIELD_SYNONYMS: &[(&str, &str)] = &[
    ("additionalPrinterColumns", "printerColumns"),
    ("openApiV3Schema", "openAPIV3Schema"),
    ("openapiV3Schema", "openAPIV3Schema"),
    ("predicates", "filters"),
    ("priorities", "scores"),
];

pub(crate) struct SchemaChecker<'s> {
    root: &'s Value,
    pub(crate) issues: Vec<SchemaIssue>,
}

impl<'s> SchemaChecker<'s> {
    pub(crate) fn new(root: &'s Value) -> Self {
        Self {
            root,
            issues: Vec::new(),
        }
    }

    /// Checks `node` (found at `path`; `key_pos` is where its key was written) against `schema`.
    pub(crate) fn check(&mut self, schema: &'s Value, node: &Node, path: &mut Vec<PathStep>, key_pos: Pos) {
        let schema = match self.resolve(schema) {
            Some(schema) => schema,
            None => return,
        };
        let Value::Object(keywords) = schema else {
            if schema == &Value::Bool(false) {
                self.issue(
                    path,
                    key_pos,
                    DiagnosticCode::UnknownField,
                    format!("`{}` is not allowed here", path_to_string(path)),
                );
            }
            return;
        };
        if let Some(Value::Array(branches)) = keywords.get("allOf") {
            for branch in branches {
                self.check(branch, node, path, key_pos);
            }
        }
        if let Some(Value::Array(branches)) = keywords.get("oneOf").or_else(|| keywords.get("anyOf")) {
            self.check_alternatives(branches, node, path, key_pos);
            return;
        }
        if let Some(expected) = keywords.get("type")
            && !type_matches(expected, node)
        {
            let expected = describe_types(expected);
            self.issue(
                path,
                node.pos,
                DiagnosticCode::Type,
                format!(
                    "{}expected {expected}, found {}",
                    field_prefix(path),
                    describe_found(node)
                ),
            );
            return;
        }
        if let Some(constant) = keywords.get("const")
            && &node.to_json() != constant
        {
            self.issue(
                path,
                node.pos,
                DiagnosticCode::Value,
                format!(
                    "{}must be {}, found {}",
                    field_prefix(path),
                    show_json(constant),
                    show_json(&node.to_json())
                ),
            );
            return;
        }
        if let Some(Value::Array(allowed)) = keywords.get("enum") {
            self.check_enum(allowed, node, path);
            return;
        }
        self.check_number(keywords, node, path);
        self.check_string(keywords, node, path);
        match &node.value {
            NodeValue::Map(entries) => self.check_mapping(keywords, entries, node, path, key_pos),
            NodeValue::Seq(items) => {
                if let Some(min) = keywords.get("minItems").and_then(Value::as_u64)
                    && (items.len() as u64) < min
                {
                    self.issue(
                        path,
                        key_pos,
                        DiagnosticCode::Value,
                        format!("{}must list at least {min} item{}", field_prefix(path), plural(min)),
                    );
                }
                if let Some(item_schema) = keywords.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        path.push(PathStep::Index(index));
                        self.check(item_schema, item, path, item.pos);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }

    fn resolve(&self, schema: &'s Value) -> Option<&'s Value> {
        let mut current = schema;
        // A bounded number of hops guards against a (generator) bug producing a `$ref` cycle.
        for _ in 0..16 {
            match current.get("$ref").and_then(Value::as_str) {
                Some(reference) => {
                    let pointer = reference.strip_prefix('#')?;
                    current = self.root.pointer(pointer)?;
                }
                None => return Some(current),
            }
        }
        None
    }

    fn check_alternatives(&mut self, branches: &'s [Value], node: &Node, path: &mut Vec<PathStep>, key_pos: Pos) {
        let resolved: Vec<&'s Value> = branches.iter().filter_map(|b| self.resolve(b)).collect();
        let is_null_branch = |b: &&Value| b.get("type").and_then(Value::as_str) == Some("null");
        if node.value == NodeValue::Null && resolved.iter().any(is_null_branch) {
            return;
        }
        let candidates: Vec<&'s Value> = resolved.into_iter().filter(|b| !is_null_branch(b)).collect();
        // Enums whose variants carry descriptions are emitted as `oneOf` of `const`s: treat them as one enum,
        // so the message lists the allowed values and can suggest the closest.
        let constants: Option<Vec<Value>> = candidates
            .iter()
            .map(|b| {
                b.get("const")
                    .map(|c| vec![c.clone()])
                    .or_else(|| b.get("enum").and_then(Value::as_array).cloned())
            })
            .collect::<Option<Vec<Vec<Value>>>>()
            .map(|lists| lists.into_iter().flatten().collect());
        if let Some(allowed) = constants {
            self.check_enum(&allowed, node, path);
            return;
        }
        if let [only] = candidates.as_slice() {
            self.check(only, node, path, key_pos);
            return;
        }
        let mut best: Option<Vec<SchemaIssue>> = None;
        for branch in candidates {
            let mut trial = SchemaChecker::new(self.root);
            trial.check(branch, node, path, key_pos);
            if trial.issues.is_empty() {
                return;
            }
            if best.as_ref().is_none_or(|b| trial.issues.len() < b.len()) {
                best = Some(trial.issues);
            }
        }
        self.issues.extend(best.unwrap_or_default());
    }

    fn check_enum(&mut self, allowed: &[Value], node: &Node, path: &[PathStep]) {
        let value = node.to_json();
        if allowed.contains(&value) {
            return;
        }
        let names: Vec<String> = allowed.iter().map(show_json).collect();
        let suggestion = match &value {
            Value::String(text) => {
                let plain: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
                did_you_mean(text, plain)
            }
            _ => String::new(),
        };
        let message = if suggestion.is_empty() {
            format!(
                "{}invalid value {}, expected one of {}",
                field_prefix(path),
                show_json(&value),
                names.join(", ")
            )
        } else {
            format!("{}invalid value {}{suggestion}", field_prefix(path), show_json(&value))
        };
        self.issue(path, node.pos, DiagnosticCode::Value, message);
    }

    fn check_number(&mut self, keywords: &serde_json::Map<String, Value>, node: &Node, path: &[PathStep]) {
        let number = match node.value {
            NodeValue::Int(i) => i as f64,
            NodeValue::UInt(u) => u as f64,
            NodeValue::Float(f) => f,
            _ => return,
        };
        let shown = show_json(&node.to_json());
        if let Some(min) = keywords.get("minimum").and_then(Value::as_f64)
            && number < min
        {
            self.issue(
                path,
                node.pos,
                DiagnosticCode::Range,
                format!("{}{shown} is less than the minimum {min}", field_prefix(path)),
            );
        }
        if let Some(max) = keywords.get("maximum").and_then(Value::as_f64)
            && number > max
        {
            self.issue(
                path,
                node.pos,
                DiagnosticCode::Range,
                format!("{}{shown} is greater than the maximum {max}", field_prefix(path)),
            );
        }
    }

    fn check_string(&mut self, keywords: &serde_json::Map<String, Value>, node: &Node, path: &[PathStep]) {
        let NodeValue::String(text) = &node.value else {
            return;
        };
        if let Some(min) = keywords.get("minLength").and_then(Value::as_u64)
            && (text.chars().count() as u64) < min
        {
            self.issue(
                path,
                node.pos,
                DiagnosticCode::Value,
                format!("{}must not be empty", field_prefix(path)),
            );
        }
        if let Some(pattern) = keywords.get("pattern").and_then(Value::as_str)
            && let Ok(regex) = regex::Regex::new(pattern)
            && !regex.is_match(text)
        {
            let what = match pattern {
                crate::common::DURATION_PATTERN => "a duration such as `30s`, `10m` or `1h30m`".to_string(),
                crate::common::IDENTIFIER_PATTERN => "a letter followed by letters, digits, `-` or `_`".to_string(),
                _ => format!("text matching `{pattern}`"),
            };
            self.issue(
                path,
                node.pos,
                DiagnosticCode::Value,
                format!("{}invalid value \"{text}\": expected {what}", field_prefix(path)),
            );
        }
    }

    fn check_mapping(
        &mut self,
        keywords: &'s serde_json::Map<String, Value>,
        entries: &[(crate::yaml_tree::Key, Node)],
        node: &Node,
        path: &mut Vec<PathStep>,
        key_pos: Pos,
    ) {
        let properties = keywords.get("properties").and_then(Value::as_object);
        let additional = keywords.get("additionalProperties");
        if let Some(Value::Array(required)) = keywords.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if node.get(name).is_none() {
                    let place = if path.is_empty() {
                        "the document".to_string()
                    } else {
                        format!("`{}`", path_to_string(path))
                    };
                    self.issue(
                        path,
                        key_pos,
                        DiagnosticCode::MissingField,
                        format!("missing required field `{name}` in {place}"),
                    );
                }
            }
        }
        for (key, value) in entries {
            path.push(PathStep::Key(key.name.clone()));
            match properties.and_then(|p| p.get(&key.name)) {
                Some(property_schema) => self.check(property_schema, value, path, key.pos),
                None => match additional {
                    Some(Value::Bool(false)) => {
                        path.pop();
                        let message = self.unknown_field_message(&key.name, properties, path);
                        let key_path = [path.as_slice(), &[PathStep::Key(key.name.clone())]].concat();
                        self.issue(&key_path, key.pos, DiagnosticCode::UnknownField, message);
                        continue;
                    }
                    Some(extra) if extra.is_object() => self.check(extra, value, path, key.pos),
                    _ => {}
                },
            }
            path.pop();
        }
    }

    fn unknown_field_message(
        &self,
        name: &str,
        properties: Option<&'s serde_json::Map<String, Value>>,
        path: &[PathStep],
    ) -> String {
        let place = if path.is_empty() {
            String::new()
        } else {
            format!(" in `{}`", path_to_string(path))
        };
        let known: Vec<&str> = properties
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if let Some((_, ours)) = FIELD_SYNONYMS.iter().find(|(theirs, _)| *theirs == name)
            && known.contains(ours)
        {
            return format!("unknown field `{name}`{place}, did you mean `{ours}`?");
        }
        let mut suggestion = did_you_mean(name, known.iter().copied());
        if suggestion.is_empty() {
            // The field may exist one level down (e.g. `shortNames` belongs in `names`).
            for (property, property_schema) in properties.into_iter().flatten() {
                let nested = self
                    .resolve_object(property_schema)
                    .and_then(|s| s.get("properties"))
                    .and_then(Value::as_object);
                if nested.is_some_and(|n| n.contains_key(name)) {
                    suggestion = format!(", did you mean `{property}.{name}`?");
                    break;
                }
            }
        }
        if suggestion.is_empty() && !known.is_empty() {
            format!("unknown field `{name}`{place}; known fields: {}", known.join(", "))
        } else {
            format!("unknown field `{name}`{place}{suggestion}")
        }
    }

    /// The object schema behind a property, looking through `$ref` and `Option`'s `anyOf [T, null]`.
    fn resolve_object(&self, schema: &'s Value) -> Option<&'s Value> {
        let schema = self.resolve(schema)?;
        if schema.get("properties").is_some() {
            return Some(schema);
        }
        schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)?
            .iter()
            .filter_map(|branch| self.resolve(branch))
            .find(|branch| branch.get("properties").is_some())
    }

    fn issue(&mut self, path: &[PathStep], pos: Pos, code: DiagnosticCode, message: String) {
        self.issues.push(SchemaIssue {
            path: path.to_vec(),
            pos,
            code,
            message,
        });
    }
}

fn plural(count: u64) -> &'static str {
    if count == 1 { "" } else { "s" }
}

fn field_prefix(path: &[PathStep]) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("`{}`: ", path_to_string(path))
    }
}

fn type_matches(expected: &Value, node: &Node) -> bool {
    match expected {
        Value::String(name) => single_type_matches(name, node),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .any(|name| single_type_matches(name, node)),
        _ => true,
    }
}

fn single_type_matches(name: &str, node: &Node) -> bool {
    matches!(
        (name, &node.value),
        ("null", NodeValue::Null)
            | ("boolean", NodeValue::Bool(_))
            | ("integer", NodeValue::Int(_) | NodeValue::UInt(_))
            | ("number", NodeValue::Int(_) | NodeValue::UInt(_) | NodeValue::Float(_))
            | ("string", NodeValue::String(_))
            | ("array", NodeValue::Seq(_))
            | ("object", NodeValue::Map(_))
    )
}

fn describe_types(expected: &Value) -> String {
    let names: Vec<&str> = match expected {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .filter(|n| *n != "null")
            .collect(),
        _ => Vec::new(),
    };
    let described: Vec<&str> = names
        .iter()
        .map(|name| match *name {
            "object" => "a mapping",
            "array" => "a list",
            "string" => "a string",
            "integer" => "an integer",
            "number" => "a number",
            "boolean" => "a boolean (true or false)",
            other => other,
        })
        .collect();
    described.join(" or ")
}

fn describe_found(node: &Node) -> String {
    match &node.value {
        NodeValue::Map(_) | NodeValue::Seq(_) | NodeValue::Null => format!("a {}", node.type_name()),
        _ => format!("{} {}", article(node.type_name()), show_json(&node.to_json())),
    }
}

fn article(word: &str) -> String {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {word}")
    } else {
        format!("a {word}")
    }
}

fn show_json(value: &Value) -> String {
    match value {
        Value::String(text) => format!("`{text}`"),
        other => format!("`{other}`"),
    }
}
