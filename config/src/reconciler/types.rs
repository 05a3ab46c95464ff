//! The `Reconciler` rule: watch one kind, render children from each object, project status back.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{HumanDuration, LabelSelector, RuleMetadata};
use crate::diagnostics::SourceLocation;

/// Watches objects of one kind and keeps, for each, a set of child objects rendered from templates;
/// optionally projects fields of the children back into the object's status.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Reconciler")]
pub struct ReconcilerRule {
    /// Always `ruleplane.dev/v1alpha1`.
    #[schemars(extend("const" = "ruleplane.dev/v1alpha1"))]
    pub api_version: String,
    /// Always `Reconciler`.
    #[schemars(extend("const" = "Reconciler"))]
    pub kind: String,
    /// Rule name; appears in the `ruleplane.dev/rule` label of every child.
    pub metadata: RuleMetadata,
    /// What to watch and what to render.
    pub spec: ReconcilerSpec,
    /// Where the rule was written (not part of equality: moving a rule does not change it).
    #[serde(skip)]
    #[schemars(skip)]
    pub source: SourceLocation,
}

crate::common::rule_document!(ReconcilerRule);

/// What a Reconciler watches and renders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReconcilerSpec {
    /// The kind of the parent objects: a kind declared by a ResourceDefinition in the same rule set, or a
    /// built-in kind (Pod, Deployment, ConfigMap, …).
    #[serde(rename = "for")]
    pub watched: WatchedKind,
    /// Related objects read from the caches and exposed to templates as `lookups.<name>`; a missing object
    /// is exposed as `null` (use `{{#if lookups.x}}` or `default`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lookups: BTreeMap<String, Lookup>,
    /// Child objects, one template each. The template context is the parent object (`{{metadata.name}}`,
    /// `{{spec.image}}`) plus `lookups`. May be left out when the rule has `patches`: a rule that only sets
    /// fields on objects it does not own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildTemplate>,
    /// Parent status fields, written to the parent's status (through the status subresource when it has one).
    /// Each is a JSONPath over `{parent fields…, children: {<id>: object or list}, lookups, ready: {<id>:
    /// number}}` (a string), a literal (`{ value: … }`) or a template (`{ template: '{{len children.subnets}}' }`)
    /// whose text becomes a scalar (docs/reconcilers.md#status-expressions-and-counts).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub status: BTreeMap<String, StatusExpression>,
    /// Conditions of the rule author's design, written to `status.conditions` after `Ready` and `Synced` in the
    /// standard shape (docs/reconcilers.md#conditions-of-your-own): each has a `type`, a `status` template over the
    /// status scope (`True`, `False` or `Unknown`), and optional `reason` and `message` templates; with `forEach`,
    /// one condition per item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionTemplate>,
    /// Cleanup when a parent is deleted: these children are applied (e.g. a backup Job) and must become
    /// ready before the parent's finalizer is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<FinalizeSpec>,
    /// Re-render every parent this often even without changes (e.g. `10m`), to repair drift of children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period: Option<HumanDuration>,
    /// How many parents of this rule are reconciled at the same time (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub concurrency: Option<u16>,
    /// Take over existing objects with a child's name that Ruleplane did not create. Without it they are
    /// reported as conflicts and left alone. A child's own `adopt` overrides it.
    #[serde(default)]
    pub adopt: bool,
    /// Fields set on existing objects the rule does not own (label the Pods of a StatefulSet): each entry selects
    /// objects in the parent's namespace and sets only the fields its template gives, under its own field manager
    /// per parent. Never creates an object; the fields are released when the parent, the entry or the rule goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<PatchTemplate>,
}

/// Fields set on existing objects the rule does not own (`spec.patches`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchTemplate {
    /// Identifier of the patch within the rule (part of its field manager's name).
    #[schemars(regex(pattern = crate::common::IDENTIFIER_PATTERN))]
    pub id: String,
    /// The object's name; may be a template over the parent and lookups, e.g. `"{{metadata.name}}-0"`. Not with
    /// `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The objects whose labels match; `matchLabels` values may be templates, e.g. `app: '{{metadata.name}}'`.
    /// Not with `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Handlebars template producing a partial object: `apiVersion` and `kind` spelled literally, then only the
    /// fields to set (e.g. `metadata.labels`). Values read from the cluster fill in scalars only. The objects are
    /// looked for in the parent's namespace (a Namespace parent: in that namespace); a cluster-scoped kind by name
    /// or selector alone.
    pub template: String,
}

impl PatchTemplate {
    /// The patched `apiVersion` and `kind` as spelled literally on the template's top-level lines.
    pub fn static_kind(&self) -> Option<(String, String)> {
        static_kind_of(&self.template)
    }
}

/// One status field: a JSONPath (a plain string), a literal, a template, or a JSONPath that is always a list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StatusExpression {
    /// A JSONPath over the status scope, e.g. `{.children.app.status.readyReplicas}`; selecting nothing leaves
    /// the field out.
    Path(String),
    /// A literal value, written as given.
    Value(StatusValue),
    /// A template rendered over the status scope (helpers allowed); its text is typed as a scalar.
    Template(StatusTemplate),
    /// A JSONPath whose value is always a list: `{ path: '…', type: list }`.
    List(StatusList),
}

/// `{ path: '…', type: list }`: a status field that is always a list, however many values its JSONPath selects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusList {
    /// A JSONPath over the status scope: several matches are the list; one match is that list when it is one,
    /// else a one-item list; no match (or `null`) is `[]`, written as such rather than left out.
    pub path: String,
    /// `list`: the one type a path field takes.
    #[serde(rename = "type")]
    pub value_type: StatusListType,
}

/// The type of a `{ path, type }` status field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StatusListType {
    /// Always a list.
    List,
}

/// `{ value: … }`: a literal status value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusValue {
    /// The value, any YAML (a number, a string, a list, a mapping): the rule's own text, written as it is.
    pub value: serde_json::Value,
}

/// `{ template: '…' }`: a templated status value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusTemplate {
    /// Handlebars over the status scope (`{{len children.subnets}}`, `{{ready.subnets}}`); the rendered text,
    /// trimmed, is one scalar: `true`/`false` a boolean, a number a number, empty leaves the field out, anything
    /// else a string (set `type: string` to keep `1.0` or `true` as text).
    pub template: String,
    /// How the rendered text is typed: `auto` (default, as above) or `string` (always text).
    #[serde(default, skip_serializing_if = "StatusType::is_auto", rename = "type")]
    pub value_type: StatusType,
}

/// A condition of the rule author's design (`spec.conditions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionTemplate {
    /// The condition's type, CamelCase (e.g. `DatabaseReady`, or `example.com/Backup`); not `Ready` or `Synced`,
    /// which are Ruleplane's. With `forEach` a template over the item (`'{{db.name}}Ready'`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Handlebars over the status scope (the parent's fields, `children`, `lookups`, `ready`) rendering `True`,
    /// `False` or `Unknown` (any case; empty is `Unknown`), e.g. `'{{#if ready.db}}True{{else}}False{{/if}}'`.
    pub status: String,
    /// Handlebars rendering the reason, CamelCase (letters, digits, `_`, `,`, `:`, starting with a letter);
    /// default: the status (`True`, `False`, `Unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Handlebars rendering the human-readable message (default: empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// One condition per item, as a child's `forEach` with one entry: `[name: '<JSONPath>']` over the status
    /// scope yielding a list (e.g. `db: '{.spec.databases}'`, or `replica: '{.children.replicas}'` for a
    /// collection child's objects), the item bound as `{{name}}` and its position as `{{name_index}}`; at most 100
    /// items.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1))]
    pub for_each: Vec<BTreeMap<String, String>>,
    /// Publish a Normal Event on the parent when the condition's status changes (or it first appears): reason
    /// the condition's reason, note `<type> is <status>: <message>`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub event: bool,
}

/// How a templated status value's text is typed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StatusType {
    /// `true`/`false` → boolean, a JSON number → number, anything else → string.
    #[default]
    Auto,
    /// Always a string.
    String,
}

impl StatusType {
    fn is_auto(&self) -> bool {
        *self == StatusType::Auto
    }
}

impl StatusExpression {
    /// The text of the expression (a path or a template; empty for a literal): what warnings read.
    pub fn text(&self) -> &str {
        match self {
            StatusExpression::Path(path) | StatusExpression::List(StatusList { path, .. }) => path,
            StatusExpression::Template(template) => &template.template,
            StatusExpression::Value(_) => "",
        }
    }
}

/// The watched kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatchedKind {
    /// `group/version` (or `v1` for the core group), e.g. `stable.example.com/v1`.
    pub api_version: String,
    /// Kind, e.g. `CronTab`.
    pub kind: String,
    /// Only objects whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Only objects in this namespace (default: all namespaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Only the object of this name (a literal): a rule over one named object, e.g. the parent of a fan-in (one
    /// Ingress built from many Services), or a cluster-scoped singleton. Without `namespace`, the object of this
    /// name in every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl WatchedKind {
    /// Whether an object of this kind in `namespace`, named `name`, with `labels` is one of the rule's parents.
    pub fn selects(&self, namespace: Option<&str>, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespace.as_deref().is_none_or(|wanted| namespace == Some(wanted))
            && self.name.as_deref().is_none_or(|wanted| name == wanted)
            && self.selector.as_ref().is_none_or(|selector| selector.matches(labels))
    }
}

/// A related object exposed to templates: one object by `name`, or the list of objects a `selector` matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lookup {
    /// `group/version` of the object.
    pub api_version: String,
    /// Kind of the object.
    pub kind: String,
    /// Object name; may be a template over the parent, e.g. `"{{metadata.name}}-config"`. Exactly one of `name`
    /// and `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label selector: the lookup is the list of the objects whose labels match (in the parent's namespace
    /// unless `namespace` or `allNamespaces` says otherwise), sorted by namespace and name; each narrowed by
    /// `jsonPath`. Exactly one of `name` and `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Namespace; defaults to the parent's namespace for namespaced kinds. With `name`, a template is allowed;
    /// with `selector`, only a literal (data read from the cluster never widens what a selector reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// With `selector`: match objects in every namespace (the rule author's explicit choice; not with
    /// `namespace`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
    /// Expose only this part of the object (of each object, for `selector`), e.g. `{.data}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// With `selector`: the most objects the lookup may yield for one parent; more is a render error (default
    /// 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_items: Option<u32>,
    /// What a missing lookup does (no object by `name`, or its `jsonPath` selects nothing; no object matching the
    /// `selector`): `Null` (default) renders with `null` (an empty list for a selector); `Wait` holds the parent's
    /// children and patches as they are (nothing applied, nothing pruned) until the object exists, as KRO's
    /// `externalRef` does, and reports `Ready=False` (`LookupMissing`).
    #[serde(default, skip_serializing_if = "WhenMissing::is_null")]
    pub when_missing: WhenMissing,
}

/// What a lookup that finds nothing does (`whenMissing`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WhenMissing {
    /// Render with `null` (an empty list for a selector lookup): templates and `includeWhen` decide.
    #[default]
    Null,
    /// Hold the parent's children and patches as they are until the lookup finds its object.
    Wait,
}

impl WhenMissing {
    fn is_null(&self) -> bool {
        *self == WhenMissing::Null
    }
}

/// The most objects a selector lookup yields for one parent when it does not set `maxItems`.
pub const DEFAULT_LOOKUP_MAX_ITEMS: u32 = 1000;

/// One child object.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChildTemplate {
    /// Identifier of the child within the rule; status paths refer to it as `children.<id>`.
    #[schemars(regex(pattern = crate::common::IDENTIFIER_PATTERN))]
    pub id: String,
    /// Handlebars template producing one Kubernetes object as YAML (apiVersion, kind and metadata.name
    /// required). Strict: a missing field is an error. Helpers (docs/rule-language.md#templates): json, yaml,
    /// default, jsonpath, b64enc, b64dec, sha256, lower, upper, trunc, quote, indent; add, sub, mul, div, mod,
    /// min, max; len, split, join, replace, trim, substr, hasPrefix, hasSuffix, contains, title, format,
    /// toString, parseInt, parseFloat; first, last, index, keys, values, sort, uniq, slice, merge, dig; sha1,
    /// fnv64a, toJson, fromJson, toYaml; cidrSubnet.
    pub template: String,
    /// JSONPath over the child; the child is ready when it yields a value that is not `false`, `null` or
    /// empty. Without it a child is ready once applied. Children that read this one (`children.<id>` in their
    /// template) are rendered only once it is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_when: Option<String>,
    /// JSONPath over the template context (the parent's fields and `lookups`); the child exists only while it
    /// selects a value that is not `false`, `null` or empty. When it stops, the child is pruned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_when: Option<String>,
    /// Never delete this child: when it is no longer rendered, or its parent goes, it is released instead
    /// (left in place without owner reference or parent label, so no garbage collector takes it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retain: bool,
    /// The namespace this child may be written to, when not its parent's: a literal, or a template over the
    /// parent and lookups (the rule author lets that data choose the namespace). Without it a namespaced child
    /// lives in its parent's namespace (a Namespace parent: in that namespace itself), or in a namespace the
    /// template spells out literally; a rendered namespace that is none of these is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Render this child once per item (a collection): each entry is one `name: '<JSONPath>'` over the template
    /// context yielding a list (a missing field or `null`: no items), or `name: '<template>'` (it holds `{{`)
    /// rendering one YAML list (`'{{json (slice spec.zones 0 2)}}'`; nothing or `null`: no items). Several entries: one child per combination
    /// (the cartesian product, first entry outermost). Each item is bound by its name (`{{zone}}`) and its
    /// position by `<name>_index` (`{{zone_index}}`, from 0). `readyWhen` and `includeWhen` apply per item;
    /// other children and `status` see `children.<id>` as the list of the collection's objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub for_each: Vec<BTreeMap<String, String>>,
    /// Render this child `count` times (a collection), `count` being a JSONPath over the template context yielding
    /// a non-negative integer (a missing field: none), or a template (it holds `{{`) rendering one
    /// (`'{{min spec.replicas (add status.ready 1)}}'`; anything else is a render error at `count`); each copy's position is bound as `{{count_index}}` (from
    /// 0; `index` names a helper). Not with `forEach`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<String>,
    /// The most objects a collection (`forEach`, `count`) may render for one parent; more is a render error
    /// (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_items: Option<u32>,
    /// Fields set only when the child is created, then left to another controller (`spec.replicas` under a
    /// HorizontalPodAutoscaler): each a path of map fields separated by dots, e.g. `spec.replicas` (no list
    /// indexes; a field name cannot contain a dot). The creation sets them under a field manager of their own
    /// that never applies again, so they keep their value until the other controller takes them, and Ruleplane
    /// never writes them back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hand_over: Vec<String>,
    /// Take over an existing object with this child's name that Ruleplane did not create; overrides the rule's
    /// `adopt` for this child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<bool>,
    /// When the apiserver refuses an update because a changed field is immutable (a Job's `spec.template`, an
    /// immutable ConfigMap's data), delete this child and create it again (the delete is preconditioned on the
    /// UID observed, so only the object Ruleplane created is deleted). Without it the refusal is reported
    /// (`Synced=False`) and the object left as it is. Not with `retain`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recreate: bool,
}

/// The most objects a collection renders for one parent when its child does not set `maxItems`.
pub const DEFAULT_MAX_ITEMS: u32 = 1000;

impl ChildTemplate {
    /// Whether this child is a collection: rendered once per item of `forEach` or `count` times.
    pub fn is_collection(&self) -> bool {
        !self.for_each.is_empty() || self.count.is_some()
    }

    /// The child's `apiVersion` and `kind` as spelled literally on the template's top-level lines.
    ///
    /// The loader requires them to be literal so the children's kinds are known before anything is rendered:
    /// workers watch those kinds for drift, and `ruleplane rbac` grants access to them.
    pub fn static_kind(&self) -> Option<(String, String)> {
        static_kind_of(&self.template)
    }
}

/// `apiVersion` and `kind` as spelled literally on a template's top-level lines.
fn static_kind_of(template: &str) -> Option<(String, String)> {
    let top_level = |field: &str| {
        template.lines().find_map(|line| {
            let value = line.strip_prefix(field)?.strip_prefix(':')?;
            let value = value.split(" #").next().unwrap_or(value).trim();
            let value = value.trim_matches(|c| c == '"' || c == '\'');
            (!value.is_empty() && !value.contains("{{")).then(|| value.to_string())
        })
    };
    Some((top_level("apiVersion")?, top_level("kind")?))
}

impl PartialEq for ChildTemplate {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.template == other.template
            && self.ready_when == other.ready_when
            && self.include_when == other.include_when
            && self.retain == other.retain
            && self.for_each == other.for_each
            && self.count == other.count
            && self.max_items == other.max_items
            && self.hand_over == other.hand_over
            && self.adopt == other.adopt
            && self.recreate == other.recreate
    }
}

impl Eq for ChildTemplate {}

/// Cleanup run before a parent's finalizer is removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinalizeSpec {
    /// Children applied when the parent is being deleted.
    #[schemars(length(min = 1))]
    pub children: Vec<ChildTemplate>,
}

/// Whether a `count` or `forEach` entry is a template (it holds `{{`) rather than a JSONPath.
pub(crate) fn is_item_template(expression: &str) -> bool {
    expression.contains("{{")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_kind_selects_by_namespace_and_labels() {
        let watched: WatchedKind = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop",
            "selector": { "matchLabels": { "tier": "web" } }
        }))
        .unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(watched.selects(Some("shop"), "a", &labels(&[("tier", "web"), ("x", "y")])));
        assert!(
            !watched.selects(Some("other"), "a", &labels(&[("tier", "web")])),
            "another namespace"
        );
        assert!(
            !watched.selects(Some("shop"), "a", &labels(&[("tier", "db")])),
            "other labels"
        );
        assert!(
            !watched.selects(None, "a", &labels(&[("tier", "web")])),
            "cluster-scoped object"
        );
        let everything: WatchedKind =
            serde_json::from_value(serde_json::json!({ "apiVersion": "v1", "kind": "Namespace" })).unwrap();
        assert!(everything.selects(None, "a", &BTreeMap::new()));
    }

    #[test]
    fn a_watched_kind_with_a_name_selects_only_that_object() {
        let watched: WatchedKind = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "name": "exposed"
        }))
        .unwrap();
        assert!(watched.selects(Some("shop"), "exposed", &BTreeMap::new()));
        assert!(
            watched.selects(Some("other"), "exposed", &BTreeMap::new()),
            "every namespace"
        );
        assert!(!watched.selects(Some("shop"), "settings", &BTreeMap::new()));
    }
}
