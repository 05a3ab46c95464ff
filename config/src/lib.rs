//! Ruleplane's rule language: loading with located diagnostics, validation, rendering and CRD generation.
//!
//! Everything here is pure (the only I/O is reading rule files in [`load_paths`]), so the offline CLI
//! commands and the in-cluster workers produce the same results.
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
mod crd;
mod diagnostics;
mod jsonpath;
mod load;
mod naming;
mod rbac;
mod render;
mod rule_set;
mod schema;
mod schema_check;
mod template;
mod types;
mod yaml_tree;

pub use builtin_kinds::{BUILTIN_KINDS, BuiltinKind, builtin_kind};
pub use crd::generate_crd;
pub use diagnostics::{Diagnostic, Diagnostics, SourceLocation};
pub use jsonpath::{CompiledPath, JsonPathError, is_truthy};
pub use load::{load_paths, load_str};
pub use rbac::{Permission, manager_permissions, rbac_manifests, rule_permissions};
pub use render::{
    CHILD_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, OutputYamlProblem, PARENT_UID_LABEL, RULE_LABEL, RenderError,
    Rendered, child_ready, compute_status, gather_lookups, project_lookup, render_children, render_finalize_children,
    render_lookup_target,
};
pub use rule_set::{KindInfo, Rule, RuleSet};
pub use schema::rule_language_schema;
pub use template::{
    HELPERS, MAX_RENDER_TIME, MAX_RENDERED_BYTES, TemplateProblem, TemplateRenderError, check_template, render_template,
};
pub use types::*;
