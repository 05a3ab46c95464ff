//! The `kind: TemplatePartials` document as written: template fragments a rule file declares once.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::RuleMetadata;

/// The `kind` of partials documents.
pub const TEMPLATE_PARTIALS_KIND: &str = "TemplatePartials";

/// Template fragments declared once in a rule file and included by any template of the same file as
/// `{{> name}}`. Not a rule: nothing runs for it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "TemplatePartials")]
pub struct TemplatePartialsDocument {
    /// Always `ruleplane.dev/v1alpha1`.
    #[schemars(extend("const" = "ruleplane.dev/v1alpha1"))]
    pub api_version: String,
    /// Always `TemplatePartials`.
    #[schemars(extend("const" = "TemplatePartials"))]
    pub kind: String,
    /// A name for the document (for your bookkeeping; partials are found by their own names).
    pub metadata: RuleMetadata,
    /// The partials.
    pub spec: TemplatePartialsSpec,
}

/// The partials of a `TemplatePartials` document.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplatePartialsSpec {
    /// Partial name (letters, digits, `_`) → template text. A partial renders in the context of the `{{> name}}`
    /// that includes it (inside `{{#each}}`, the item), may include other partials of the file (not itself), and
    /// on a line of its own takes that line's indentation on every line it writes.
    pub partials: BTreeMap<String, String>,
}
