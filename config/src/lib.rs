//! Ruleplane's rule language and every pure decision, organised by rule kind (`resource_definition`,
//! `reconciler`, `scheduler`) over shared machinery (`load`, diagnostics, YAML tree, templates, JSONPath).
//!
//! Everything here is pure (the only I/O is reading rule files in [`load_paths`] and CRD manifests in
//! [`load_crd_paths`]), so the offline CLI commands and the in-cluster workers produce the same results.
//!
//! ```
//! let rules = ruleplane_config::load_str(
//!     "policy.yaml",
//!     "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: s }\nspec: { schedulerName: mine }\n",
//! )
//! .expect("valid rules");
//! assert_eq!(rules.rules()[0].name(), "s");
//! ```

mod builtin_kinds;
mod common;
mod diagnostics;
mod files;
mod installed_kinds;
mod jsonpath;
mod kind_info;
mod kubernetes_version;
pub mod load;
mod naming;
pub mod object_diff;
pub mod object_schema;
pub mod ownership;
pub mod provenance;
mod rbac;
pub mod reconciler;
pub mod redaction;
mod reload;
pub mod resource_definition;
mod rule_set;
pub mod rule_test;
pub mod scheduler;
mod schema;
mod schema_reference;
pub mod sharding;
mod template;
#[cfg(test)]
mod test_rules;
mod yaml_tree;

pub use builtin_kinds::{BUILTIN_KINDS, BuiltinKind, builtin_kind};
pub use common::{
    API_VERSION, HumanDuration, InvalidDuration, LabelSelector, LabelSelectorOperator, LabelSelectorRequirement,
    RuleKind, RuleMetadata,
};
pub use diagnostics::{Diagnostic, DiagnosticCode, Diagnostics, SourceLocation};
pub use installed_kinds::{InstalledKind, InstalledKinds, load_crd_paths};
pub use jsonpath::{CompiledPath, JsonPathError};
pub use kubernetes_version::{KubernetesVersion, ServerVersion, UnknownVersion};
pub use load::{LoadOptions, UnknownKinds, load_paths, load_paths_with, load_str, load_str_with, rule_files};
pub use rbac::{Permission, helm_values, manager_permissions, rbac_manifests, rule_permissions, underived_kinds};
pub use reconciler::*;
pub use reload::{ReloadRefusal, check_reload};
pub use resource_definition::*;
pub use rule_set::{KindInfo, KindOrigin, Rule, RuleSet};
pub use scheduler::*;
pub use schema::rule_language_schema;
pub use schema_reference::rule_reference_markdown;
pub use template::{
    FillError, HELPERS, MAX_PARTIALS, MAX_RENDER_TIME, MAX_RENDERED_BYTES, MAX_TEMPLATE_BYTES, MAX_TEMPLATE_NESTING,
    PartialProblem, Partials, StructuredText, TemplateProblem, TemplateRenderError, TemplateSpot, TextOrigin,
    check_template, compile_partials, render_template,
};
