//! Objects checked against their kind's OpenAPI schema offline, as the apiserver checks a server-side apply.
//!
//! Schemas come in one compact form (see [`compact`]): built-in kinds from a snapshot of the targeted
//! kube-apiserver's `/openapi/v3` (`config/schemas/kubernetes.json`, made and kept current by the
//! `openapi_snapshot` integration test), kinds of CRDs from their `openAPIV3Schema`. What is checked is what the
//! apiserver rejects an apply for: fields the schema does not declare, types, required fields, enums, integer
//! formats, base64 bytes, quantities, and for CRDs the value limits of their schema (minimum/maximum, lengths,
//! item counts, patterns), and the schemas' CEL rules (`x-kubernetes-validations`, see `cel.rs`: what cannot be
//! evaluated offline is skipped, never failed). Built-in kinds' Go validation beyond the schema stays the
//! apiserver's: at run time it remains the authority.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::KubernetesVersion;

mod cel;
mod cel_functions;
mod synthetic;

pub use cel::{COST_BUDGET, SkippedRule};

/// The compact snapshot of the built-in kinds' schemas of each supported Kubernetes version
/// (`config/schemas/kubernetes-<minor>.json`).
fn builtin_snapshot_text(version: KubernetesVersion) -> &'static str {
    match version {
        KubernetesVersion::V1_35 => include_str!("../../schemas/kubernetes-1.35.json"),
        KubernetesVersion::V1_36 => include_str!("../../schemas/kubernetes-1.36.json"),
        KubernetesVersion::V1_37 => include_str!("../../schemas/kubernetes-1.37.json"),
    }
}
/// The definition every object's `metadata` is checked against.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
/// Deeper than any real object: a guard for the recursion, not a rule of the apiserver's.
const MAX_DEPTH: usize = 128;

/// One way an object breaks its schema: where (a field path such as `spec.template.spec.containers[0].name`) and
/// what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaProblem {
    /// The field's path, from the object's root; empty for the object itself.
    pub path: Vec<PathSegment>,
    /// What is wrong, as a sentence without the path.
    pub message: String,
}

pub(crate) const MISSING_FIELD: &str = "required field is missing";
/// A field the schema does not declare (what the apiserver's strict field validation refuses).
const NOT_DECLARED: &str = "field not declared in schema";

impl SchemaProblem {
    /// Whether the problem is a required field that is absent (its path ends in the missing field).
    pub fn is_missing_field(&self) -> bool {
        self.message == MISSING_FIELD
    }

    /// The path as text (`spec.containers[0].name`).
    pub fn path_text(&self) -> String {
        let mut out = String::new();
        for segment in &self.path {
            match segment {
                PathSegment::Field(name) if out.is_empty() => out.push_str(name),
                PathSegment::Field(name) => {
                    let _ = write!(out, ".{name}");
                }
                PathSegment::Index(index) => {
                    let _ = write!(out, "[{index}]");
                }
            }
        }
        out
    }
}

impl fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path_text(), self.message)
        }
    }
}

/// A step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathSegment {
    Field(String),
    Index(usize),
}

/// The schemas objects are checked against: the built-in snapshot plus the CRDs' (declared by ResourceDefinition
/// rules, or given as manifests of other tools' CRDs).
#[derive(Clone, Debug, Default)]
pub struct KindSchemas {
    /// `apiVersion kind` → the compacted `openAPIV3Schema` of that CRD version.
    custom: HashMap<String, Value>,
    /// The CEL rules of the `custom` schemas, compiled once.
    cel: cel::Rules,
    /// Whose built-in schemas objects are checked against.
    version: KubernetesVersion,
}

impl KindSchemas {
    /// Adds the schema of one served version of a CRD (`openAPIV3Schema` as written in the CRD).
    pub fn add_custom(&mut self, api_version: &str, kind: &str, open_api_v3_schema: &Value) {
        let key = kind_key(api_version, kind);
        let compacted = compact(open_api_v3_schema, &mut |_| None);
        self.cel.compile_schema(&key, &compacted);
        self.custom.insert(key, compacted);
    }

    /// The built-in snapshot plus the schema of every served version the rule set's ResourceDefinitions declare
    /// (a version without a schema accepts any fields, as its CRD does) and of the CRD manifests it was loaded
    /// with (`--crds`).
    pub fn of_rule_set(rules: &crate::RuleSet) -> Self {
        let mut schemas = KindSchemas::for_version(rules.kubernetes_version());
        for definition in rules.resource_definitions() {
            for version in definition.spec.versions.iter().filter(|v| v.served) {
                let api_version = format!("{}/{}", definition.names.group, version.name);
                let open = json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
                let schema = version.schema.as_ref().map_or(&open, |s| &s.open_api_v3_schema);
                schemas.add_custom(&api_version, &definition.names.kind, schema);
            }
            schemas.cel.locate_skipped(&definition.source);
        }
        for installed in rules.installed().kinds() {
            for (version, schema) in &installed.schemas {
                schemas.add_custom(&format!("{}/{version}", installed.group), &installed.kind, schema);
            }
            schemas.cel.locate_skipped(&installed.source);
        }
        schemas
    }

    /// The CEL rules of the CRDs' schemas that are not evaluated offline, each with why, as warnings located at
    /// the ResourceDefinition or CRD manifest (transition rules are not among them: skipping those is expected).
    pub fn skipped_rule_warnings(&self) -> Vec<crate::reconciler::RuleWarning> {
        self.cel.warnings()
    }

    /// No CRD schemas, and the built-in schemas of `version`.
    pub fn for_version(version: KubernetesVersion) -> Self {
        KindSchemas {
            custom: HashMap::new(),
            cel: cel::Rules::default(),
            version,
        }
    }

    /// The Kubernetes version whose built-in schemas are used.
    pub fn kubernetes_version(&self) -> KubernetesVersion {
        self.version
    }

    /// Whether a schema is known for this kind.
    pub fn knows(&self, api_version: &str, kind: &str) -> bool {
        let key = kind_key(api_version, kind);
        self.custom.contains_key(&key) || builtin(self.version).kinds.contains_key(&key)
    }

    /// The problems of `object` against its kind's schema; `None` when no schema is known for its kind.
    pub fn check(&self, object: &Value) -> Option<Vec<SchemaProblem>> {
        let mut problems = self.check_as(self.version, object)?;
        // A field the checked version lacks but another supported one serves is said so: the rule may be right
        // for a newer cluster (or written for an older one), and the user may be checking against the wrong one.
        for problem in problems.iter_mut().filter(|p| p.message == NOT_DECLARED) {
            let declared_in = |version: &KubernetesVersion| {
                self.check_as(*version, object).is_some_and(|found| {
                    !found
                        .iter()
                        .any(|p| p.message == NOT_DECLARED && p.path == problem.path)
                })
            };
            let newer = KubernetesVersion::ALL
                .into_iter()
                .filter(|v| *v > self.version)
                .find(declared_in);
            let older = KubernetesVersion::ALL
                .into_iter()
                .rev()
                .filter(|v| *v < self.version)
                .find(declared_in);
            let served = match (newer, older) {
                (Some(from), _) => format!("served from Kubernetes {from}"),
                (None, Some(until)) => format!("served until Kubernetes {until}"),
                (None, None) => continue,
            };
            problem.message = format!(
                "{NOT_DECLARED}: {served}; checking against {} (--kubernetes-version)",
                self.version
            );
        }
        Some(problems)
    }

    /// The problems of `object` against the built-in schemas of `version` (and the CRDs' schemas).
    fn check_as(&self, version: KubernetesVersion, object: &Value) -> Option<Vec<SchemaProblem>> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let key = kind_key(api_version, kind);
        let builtin = builtin(version);
        let mut checker = Checker {
            definitions: &builtin.definitions,
            built_in: !self.custom.contains_key(&key),
            definition: None,
            problems: Vec::new(),
            path: Vec::new(),
            cel: [&self.cel, cel::builtin_rules(&builtin.definitions)],
        };
        if let Some(custom) = self.custom.get(&key) {
            checker.check_custom_resource(custom, object);
        } else {
            let definition = builtin.kinds.get(&key)?;
            checker.check(&json!({ "ref": definition }), object, 0);
        }
        Some(checker.problems)
    }
}

fn kind_key(api_version: &str, kind: &str) -> String {
    format!("{api_version} {kind}")
}

/// The built-in snapshot, parsed once.
struct Builtin {
    kinds: HashMap<String, String>,
    definitions: HashMap<String, Value>,
}

fn builtin(version: KubernetesVersion) -> &'static Builtin {
    static BUILTIN: [OnceLock<Builtin>; KubernetesVersion::ALL.len()] =
        [const { OnceLock::new() }; KubernetesVersion::ALL.len()];
    let index = KubernetesVersion::ALL
        .iter()
        .position(|v| *v == version)
        .unwrap_or_default();
    BUILTIN[index].get_or_init(|| {
        let Ok(snapshot) = serde_json::from_str::<Value>(builtin_snapshot_text(version)) else {
            unreachable!("the committed schema snapshot is JSON (checked by its unit test)")
        };
        let text_map = |key: &str| {
            snapshot[key]
                .as_object()
                .map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        Builtin {
            kinds: text_map("kinds")
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
                .collect(),
            definitions: text_map("definitions").into_iter().collect(),
        }
    })
}

/// An OpenAPI v3 schema node in the compact form: only what checking needs, every `$ref` (bare or as the one
/// entry of an `allOf`) as `{"ref": name}`, quantities and int-or-strings as their own `type`. `reference` maps a
/// `$ref` to a definition name (`None`: the reference is dropped and the node accepts anything).
pub fn compact(node: &Value, reference: &mut dyn FnMut(&str) -> Option<String>) -> Value {
    let Some(object) = node.as_object() else {
        return json!({});
    };
    let referenced = object
        .get("$ref")
        .or_else(|| object.get("allOf")?.as_array()?.first()?.get("$ref"))
        .and_then(Value::as_str);
    if let Some(target) = referenced {
        return match reference(target) {
            Some(name) if name == QUANTITY => json!({ "type": "quantity" }),
            Some(name) if name == INT_OR_STRING => json!({ "type": "int-or-string" }),
            Some(name) => json!({ "ref": name }),
            None => json!({}),
        };
    }
    let mut out = Map::new();
    let int_or_string = object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        || object.get("format").and_then(Value::as_str) == Some("int-or-string");
    if int_or_string {
        out.insert("type".into(), "int-or-string".into());
    } else if let Some(kind) = object.get("type") {
        out.insert("type".into(), kind.clone());
    }
    for key in [
        "required",
        "enum",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "nullable",
    ] {
        if key == "format" && int_or_string {
            continue;
        }
        if let Some(value) = object.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    if object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        out.insert("preserveUnknownFields".into(), true.into());
    }
    if object.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        out.insert("embeddedResource".into(), true.into());
    }
    if let Some(rules) = object.get("x-kubernetes-validations").and_then(Value::as_array) {
        out.insert("validations".into(), rules.clone().into());
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        let compacted: Map<String, Value> = properties
            .iter()
            .map(|(name, schema)| (name.clone(), compact(schema, reference)))
            .collect();
        out.insert("properties".into(), Value::Object(compacted));
    }
    if let Some(items) = object.get("items") {
        out.insert("items".into(), compact(items, reference));
    }
    match object.get("additionalProperties") {
        Some(Value::Bool(allowed)) => {
            out.insert("additionalProperties".into(), Value::Bool(*allowed));
        }
        Some(schema @ Value::Object(_)) => {
            out.insert("additionalProperties".into(), compact(schema, reference));
        }
        _ => {}
    }
    // Quantity's own definition: `oneOf` string or number.
    if out.get("type").is_none()
        && let Some(one_of) = object.get("oneOf").and_then(Value::as_array)
    {
        let types: Vec<&str> = one_of.iter().filter_map(|o| o["type"].as_str()).collect();
        if types == ["string", "number"] {
            out.insert("type".into(), "quantity".into());
        } else if types == ["integer", "string"] {
            out.insert("type".into(), "int-or-string".into());
        }
    }
    Value::Object(out)
}

/// The compact snapshot of the built-in kinds' schemas from kube-apiserver's `/openapi/v3` documents of their
/// group-versions: `kinds` (`apiVersion kind` → definition) for each of `kinds`, and every definition they
/// reach. Written one definition per line, so a new Kubernetes version reads as a reviewable diff.
pub fn builtin_snapshot(kubernetes_version: &str, documents: &[Value], kinds: &[(&str, &str)]) -> String {
    let mut all_definitions: HashMap<String, &Value> = HashMap::new();
    let mut by_kind: BTreeMap<String, String> = BTreeMap::new();
    for document in documents {
        let Some(schemas) = document.pointer("/components/schemas").and_then(Value::as_object) else {
            continue;
        };
        for (name, schema) in schemas {
            all_definitions.entry(name.clone()).or_insert(schema);
            for gvk in schema["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let group = gvk["group"].as_str().unwrap_or_default();
                let version = gvk["version"].as_str().unwrap_or_default();
                let api_version = if group.is_empty() {
                    version.to_owned()
                } else {
                    format!("{group}/{version}")
                };
                let kind = gvk["kind"].as_str().unwrap_or_default();
                if kinds.contains(&(api_version.as_str(), kind)) {
                    by_kind.insert(kind_key(&api_version, kind), name.clone());
                }
            }
        }
    }
    let mut definitions: BTreeMap<String, Value> = BTreeMap::new();
    let mut pending: Vec<String> = by_kind.values().cloned().collect();
    pending.push(OBJECT_META.to_owned());
    while let Some(name) = pending.pop() {
        if definitions.contains_key(&name) || name == QUANTITY || name == INT_OR_STRING {
            continue;
        }
        let Some(schema) = all_definitions.get(&name) else {
            continue;
        };
        let mut reached = Vec::new();
        let compacted = compact(schema, &mut |target| {
            let name = target.strip_prefix("#/components/schemas/")?.to_owned();
            reached.push(name.clone());
            Some(name)
        });
        pending.extend(reached);
        definitions.insert(name, compacted);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{{");
    let _ = writeln!(out, "\"kubernetesVersion\": {},", json!(kubernetes_version));
    let _ = writeln!(out, "\"kinds\": {{");
    let lines: Vec<String> = by_kind
        .iter()
        .map(|(k, v)| format!("{}: {}", json!(k), json!(v)))
        .collect();
    let _ = writeln!(out, "{}", lines.join(",\n"));
    let _ = writeln!(out, "}},");
    let _ = writeln!(out, "\"definitions\": {{");
    let lines: Vec<String> = definitions
        .iter()
        .map(|(k, v)| format!("{}: {}", json!(k), v))
        .collect();
    let _ = writeln!(out, "{}", lines.join(",\n"));
    let _ = writeln!(out, "}}");
    let _ = writeln!(out, "}}");
    out
}

struct Checker<'a> {
    definitions: &'a HashMap<String, Value>,
    /// Checking a built-in kind: the apiserver defaults some of its fields before it validates (see
    /// [`DEFAULTED_WHEN_EMPTY`]).
    built_in: bool,
    /// The definition whose properties are being checked (the last `ref` followed).
    definition: Option<&'a str>,
    /// The compiled CEL rules: the CRDs', the built-in definitions'.
    cel: [&'a cel::Rules; 2],
    problems: Vec<SchemaProblem>,
    path: Vec<PathSegment>,
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
    fn check_custom_resource(&mut self, schema: &Value, object: &Value) {
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

    fn check(&mut self, schema: &Value, value: &Value, depth: usize) {
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

#[cfg(test)]
mod tests;
