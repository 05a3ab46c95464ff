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
mod checker;
mod defaults;
mod synthetic;

pub use cel::{COST_BUDGET, SkippedRule};
use checker::Checker;

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
    pub(crate) fn is_missing_field(&self) -> bool {
        self.message == MISSING_FIELD
    }

    /// The path as text (`spec.containers[0].name`).
    pub(crate) fn path_text(&self) -> String {
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
    /// `apiVersion kind` → that CRD version's `openAPIV3Schema` as written, with its defaults.
    raw: HashMap<String, Value>,
    /// The CEL rules of the `custom` schemas, compiled once.
    cel: cel::Rules,
    /// Whose built-in schemas objects are checked against.
    version: KubernetesVersion,
}

impl KindSchemas {
    /// Adds the schema of one served version of a CRD (`openAPIV3Schema` as written in the CRD).
    pub(crate) fn add_custom(&mut self, api_version: &str, kind: &str, open_api_v3_schema: &Value) {
        let key = kind_key(api_version, kind);
        let compacted = compact(open_api_v3_schema, &mut |_| None);
        self.cel.compile_schema(&key, &compacted);
        self.raw.insert(key.clone(), open_api_v3_schema.clone());
        self.custom.insert(key, compacted);
    }

    /// Fills in `object`'s defaults from its kind's CRD schema, as the apiserver does before anyone reads the
    /// object (see `defaults.rs`); a built-in kind, or one without a known schema, is left as it is: built-in
    /// kinds are defaulted by the apiserver's Go code, which their OpenAPI does not carry whole.
    pub fn apply_defaults(&self, object: &mut Value) {
        let key = match (
            object.get("apiVersion").and_then(Value::as_str),
            object.get("kind").and_then(Value::as_str),
        ) {
            (Some(api_version), Some(kind)) => kind_key(api_version, kind),
            _ => return,
        };
        if let Some(schema) = self.raw.get(&key) {
            defaults::apply_defaults(object, schema);
        }
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
    pub(crate) fn skipped_rule_warnings(&self) -> Vec<crate::reconciler::RuleWarning> {
        self.cel.warnings()
    }

    /// No CRD schemas, and the built-in schemas of `version`.
    pub fn for_version(version: KubernetesVersion) -> Self {
        KindSchemas {
            custom: HashMap::new(),
            raw: HashMap::new(),
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

#[cfg(test)]
mod tests;
