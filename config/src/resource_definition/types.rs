//! The `ResourceDefinition` rule: declares a custom resource type (ThirdPartyResource- or CRD-style naming).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::RuleMetadata;
use crate::diagnostics::SourceLocation;

/// Declares a custom resource type; Ruleplane keeps a matching CustomResourceDefinition applied.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "ResourceDefinition")]
pub struct ResourceDefinitionRule {
    /// Always `ruleplane.dev/v1alpha1`.
    #[schemars(extend("const" = "ruleplane.dev/v1alpha1"))]
    pub api_version: String,
    /// Always `ResourceDefinition`.
    #[schemars(extend("const" = "ResourceDefinition"))]
    pub kind: String,
    /// Rule name. Either ThirdPartyResource-style `cron-tab.stable.example.com` (the hyphenated first
    /// label becomes kind `CronTab`, plural `crontabs`; the rest is the group), or CRD-style
    /// `crontabs.stable.example.com` (plural, then group) together with an explicit `spec.names.kind`.
    pub metadata: RuleMetadata,
    /// The resource type.
    pub spec: ResourceDefinitionSpec,
    /// Where the rule was written (not part of equality: moving a rule does not change it).
    #[serde(skip)]
    #[schemars(skip)]
    pub source: SourceLocation,
    /// Kind, plural, group… as resolved from the name and `spec.names` at load time.
    #[serde(skip)]
    #[schemars(skip)]
    pub names: CrdNames,
}

impl ResourceDefinitionRule {
    /// Whether an existing CRD that Ruleplane did not create may be taken over (`spec.adopt`).
    pub fn adopt(&self) -> bool {
        self.spec.adopt
    }

    /// Whether the storage version of an existing CRD may change (`spec.allowStorageVersionChange`).
    pub fn allow_storage_version_change(&self) -> bool {
        self.spec.allow_storage_version_change
    }

    /// Whether versions the existing CRD lists may be removed (`spec.allowVersionRemoval`).
    pub fn allow_version_removal(&self) -> bool {
        self.spec.allow_version_removal
    }

    /// Whether removing the rule deletes the CRD and all its objects (`deletionPolicy: Delete`).
    pub(crate) fn deletes_crd_on_removal(&self) -> bool {
        self.spec.deletion_policy == DeletionPolicy::Delete
    }

    /// The name of the CRD this rule manages, `<plural>.<group>`.
    pub fn crd_name(&self) -> String {
        self.names.crd_name()
    }
}

crate::common::rule_document!(ResourceDefinitionRule);

/// The resource type's shape and life cycle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceDefinitionSpec {
    /// API group, e.g. `stable.example.com`. Optional: it is taken from the rule name; if given it must agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Names of the type. With a CRD-style rule name, `names.kind` is required; with a TPR-style name
    /// everything is derived and only `shortNames`/`categories` are usually given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<NamesSpec>,
    /// Whether objects of this type live in a namespace (`Namespaced`, the default) or not (`Cluster`).
    #[serde(default)]
    pub scope: ResourceScope,
    /// Versions of the type; exactly one is the storage version (a single version is it by default).
    #[schemars(length(min = 1))]
    pub versions: Vec<VersionSpec>,
    /// What happens to the CustomResourceDefinition when this rule is removed. `Retain` (default) leaves it,
    /// and so users' objects, in place; `Delete` deletes it and every object of the type.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// Take over an existing CustomResourceDefinition of the same name that Ruleplane did not create.
    /// Without it, such a CRD is reported as a conflict and left alone.
    #[serde(default)]
    pub adopt: bool,
    /// Allow changing which version is the storage version of an existing CRD. Off by default because
    /// objects already stored keep the old encoding until migrated.
    #[serde(default)]
    pub allow_storage_version_change: bool,
    /// Allow removing a version that the existing CRD still lists. Off by default because objects stored
    /// in, or clients using, that version would break.
    #[serde(default)]
    pub allow_version_removal: bool,
}

/// Explicit names of the type (the CRD's `spec.names`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamesSpec {
    /// CamelCase kind, e.g. `CronTab`. Giving it selects CRD-style naming of the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Lower-case plural used in URLs, e.g. `crontabs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plural: Option<String>,
    /// Lower-case singular, e.g. `crontab` (default: the kind in lower case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub singular: Option<String>,
    /// Short names for kubectl, e.g. `[ct]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Groupings for kubectl, e.g. `[all]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Kind of lists (default: kind + `List`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_kind: Option<String>,
}

/// Fully resolved names of a ResourceDefinition, computed when the rule is loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdNames {
    /// API group.
    pub group: String,
    /// CamelCase kind.
    pub kind: String,
    /// Lower-case plural.
    pub plural: String,
    /// Lower-case singular.
    pub singular: String,
    /// Kind of lists.
    pub list_kind: String,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// kubectl categories.
    pub categories: Vec<String>,
}

impl CrdNames {
    /// The CRD's object name, `<plural>.<group>`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

/// Whether objects are namespaced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ResourceScope {
    /// Objects live in a namespace.
    #[default]
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
}

impl ResourceScope {
    /// The CRD spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceScope::Namespaced => "Namespaced",
            ResourceScope::Cluster => "Cluster",
        }
    }
}

/// What removing the rule does to the CRD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Keep the CRD and all objects of the type.
    #[default]
    Retain,
    /// Delete the CRD, and with it every object of the type.
    Delete,
}

/// One version of the type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VersionSpec {
    /// Version name, e.g. `v1`, `v1beta1`.
    pub name: String,
    /// Whether the API server serves this version (default true).
    #[serde(default = "default_true")]
    pub served: bool,
    /// Whether objects are stored in this version. Exactly one version must be the storage version; with a
    /// single version it is the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<bool>,
    /// Validation schema. Without one, objects accept arbitrary fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<VersionSchema>,
    /// Extra columns for `kubectl get` (the CRD's `additionalPrinterColumns`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub printer_columns: Vec<PrinterColumn>,
    /// Subresources (`status`, `scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresources: Option<Subresources>,
    /// Mark the version deprecated: clients get a warning.
    #[serde(default)]
    pub deprecated: bool,
    /// Custom deprecation warning text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_warning: Option<String>,
}

fn default_true() -> bool {
    true
}

/// The validation schema of a version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionSchema {
    /// OpenAPI v3 schema, passed to the CRD unchanged (including `x-kubernetes-*` extensions and
    /// `x-kubernetes-validations` CEL rules).
    #[serde(rename = "openAPIV3Schema")]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub open_api_v3_schema: serde_json::Value,
}

/// An extra column in `kubectl get` output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// Column type.
    #[serde(rename = "type")]
    pub column_type: PrinterColumnType,
    /// Simple JSONPath into each object, e.g. `.spec.cronSpec` (`{.spec.cronSpec}` is accepted too).
    pub json_path: String,
    /// Human-readable description of the column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// OpenAPI format of the value, e.g. `int32`, `date-time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// 0 shows the column always; higher numbers only with `-o wide`.
    #[serde(default)]
    pub priority: i32,
}

/// Printer column types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PrinterColumnType {
    /// Text.
    String,
    /// Whole number.
    Integer,
    /// Number.
    Number,
    /// `true`/`false`.
    Boolean,
    /// A timestamp, shown as an age.
    Date,
}

impl PrinterColumnType {
    /// The CRD spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PrinterColumnType::String => "string",
            PrinterColumnType::Integer => "integer",
            PrinterColumnType::Number => "number",
            PrinterColumnType::Boolean => "boolean",
            PrinterColumnType::Date => "date",
        }
    }
}

/// Subresources of a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subresources {
    /// Enable the `status` subresource (write `{}`): status is then only writable through it, which is what
    /// Reconciler `status` projections use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<BTreeMap<String, serde_json::Value>>")]
    pub status: Option<BTreeMap<String, serde_json::Value>>,
    /// Enable the `scale` subresource (for `kubectl scale` and autoscalers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<ScaleSubresource>,
}

/// Where replica counts live, for the `scale` subresource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScaleSubresource {
    /// Path of the desired replicas, e.g. `.spec.replicas`.
    pub spec_replicas_path: String,
    /// Path of the observed replicas, e.g. `.status.replicas`.
    pub status_replicas_path: String,
    /// Path of the label selector string, e.g. `.status.selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector_path: Option<String>,
}
