//! Why rendering a Reconciler failed: every error names the child, patch, status field or lookup.

use crate::diagnostics::SourceLocation;
use crate::template::TemplateRenderError;

/// Why rendering failed. Every variant names the child and points into the rule file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// The template failed (missing field, helper error, budget).
    #[error("{location}: child `{child}`: {error}")]
    Template {
        /// The child's id.
        child: String,
        /// Where in the rule file (the template line when known).
        location: SourceLocation,
        /// The template error.
        error: Box<TemplateRenderError>,
    },
    /// The rendered text is not valid YAML.
    #[error("{location}: child `{child}`: rendered output is not valid YAML at output line {}, column {}: {}\n  | {}", problem.line, problem.column, problem.message, problem.rendered_line)]
    OutputYaml {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// What the YAML parser found, where in the output.
        problem: Box<OutputYamlProblem>,
    },
    /// The rendered YAML is not one Kubernetes object.
    #[error("{location}: child `{child}`: {message}")]
    OutputObject {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// What is wrong.
        message: String,
    },
    /// The rendered object lacks `apiVersion`, `kind` or `metadata.name`: a defect of the template whatever the
    /// parent (`validate` reports it for its synthetic parent).
    #[error(
        "{location}: child `{child}`: rendered object has no `{field}`; every child needs apiVersion, kind and metadata.name"
    )]
    Incomplete {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// The missing field (`metadata.name`).
        field: String,
    },
    /// A collection child (`forEach`, `count`) cannot be expanded: its path yields no list or number, it has
    /// more items than `maxItems`, or two of its objects have the same name.
    #[error("{location}: child `{child}`: {message}")]
    Collection {
        /// The child's id.
        child: String,
        /// Where the template starts in the rule file.
        location: SourceLocation,
        /// What is wrong.
        message: String,
    },
    /// A status field's template failed.
    #[error("{location}: status field `{field}`: {error}")]
    Status {
        /// The status field.
        field: String,
        /// Where the rule is in its file.
        location: SourceLocation,
        /// The template error.
        error: Box<TemplateRenderError>,
    },
    /// A lookup's name or namespace template failed.
    #[error("lookup `{lookup}`: {error}")]
    Lookup {
        /// The lookup's name.
        lookup: String,
        /// The template error.
        error: Box<TemplateRenderError>,
    },
    /// A lookup's rendered name or namespace is not a Kubernetes name (it becomes part of a request path).
    #[error("lookup `{lookup}`: {message}")]
    LookupTarget {
        /// The lookup's name.
        lookup: String,
        /// What is wrong.
        message: String,
    },
    /// A `patches` entry cannot be rendered or placed for this parent.
    #[error("{location}: patch `{patch}`: {message}")]
    Patch {
        /// The patch's id.
        patch: String,
        /// Where its template starts in the rule file.
        location: SourceLocation,
        /// What is wrong.
        message: String,
    },
    /// A condition of `spec.conditions` cannot be evaluated for this parent (written `Unknown` meanwhile).
    #[error("{location}: condition `{condition}`: {message}")]
    Condition {
        /// The condition's type (as written, when its type is what failed).
        condition: String,
        /// Where the entry is in the rule file.
        location: SourceLocation,
        /// What is wrong.
        message: String,
    },
}

/// A YAML problem in rendered output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputYamlProblem {
    /// Line in the rendered output.
    pub line: usize,
    /// Column in the rendered output.
    pub column: usize,
    /// The parser's message.
    pub message: String,
    /// The offending rendered line.
    pub rendered_line: String,
}

impl RenderError {
    /// Short category.
    pub fn category(&self) -> &'static str {
        match self {
            RenderError::Template { error, .. }
            | RenderError::Lookup { error, .. }
            | RenderError::Status { error, .. } => error.category(),
            RenderError::OutputYaml { .. } => "output-yaml",
            RenderError::OutputObject { .. } | RenderError::Incomplete { .. } => "output-object",
            RenderError::Collection { .. } => "collection",
            RenderError::LookupTarget { .. } => "lookup-target",
            RenderError::Patch { .. } => "patch",
            RenderError::Condition { .. } => "condition",
        }
    }
}
