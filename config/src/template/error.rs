//! What can go wrong with a template: problems found at load, and render failures located in its text or a partial's.

use std::time::Duration;

use handlebars::RenderErrorReason;

use super::{CompiledTemplate, missing_param};

/// A problem in a template, positioned inside the template text (1-based).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateProblem {
    /// Line inside the template.
    pub line: usize,
    /// Column inside the template.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Why rendering a template failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateRenderError {
    /// The template refers to a field the data does not have (strict mode).
    #[error(
        "{at}: missing field `{path}` (templates are strict; use `{{{{default {path} …}}}}` or `{{{{#if {path}}}}}` for optional fields)"
    )]
    MissingField {
        /// Where in the template or in a partial it includes.
        at: TemplateSpot,
        /// The field path.
        path: String,
    },
    /// A helper failed or another evaluation error.
    #[error("{at}: {message}")]
    Evaluation {
        /// Where in the template or in a partial it includes.
        at: TemplateSpot,
        /// What failed.
        message: String,
    },
    /// Output exceeded [`MAX_RENDERED_BYTES`](super::MAX_RENDERED_BYTES).
    #[error("rendered output exceeds {limit} bytes")]
    OutputTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// Rendering took longer than [`MAX_RENDER_TIME`](super::MAX_RENDER_TIME).
    #[error("rendering took longer than {limit:?}")]
    TooSlow {
        /// The limit.
        limit: Duration,
    },
}

/// Where a render failed: a line and column (1-based) of the template's own text, or of the text of a partial it
/// includes (directly or through other partials), named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSpot {
    /// Line inside the template, or inside the partial.
    pub line: usize,
    /// Column of the failing expression on that line.
    pub column: usize,
    /// The partial the failing expression is written in (`None`: the template itself). Boxed: render errors
    /// travel in every `Result` of a render, and most are not in a partial.
    pub partial: Option<Box<str>>,
}

impl TemplateSpot {
    /// A line of the template's own text.
    pub fn in_template(line: usize, column: usize) -> Self {
        TemplateSpot {
            line,
            column,
            partial: None,
        }
    }
}

impl std::fmt::Display for TemplateSpot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.partial {
            None => write!(f, "template line {}", self.line),
            Some(partial) => write!(f, "partial `{partial}` line {}", self.line),
        }
    }
}

impl TemplateProblem {
    /// Short category.
    pub fn category(&self) -> &'static str {
        "template"
    }
}

impl TemplateRenderError {
    /// Short category.
    pub fn category(&self) -> &'static str {
        match self {
            TemplateRenderError::MissingField { .. } => "missing-field",
            TemplateRenderError::Evaluation { .. } => "template",
            TemplateRenderError::OutputTooLarge { .. } | TemplateRenderError::TooSlow { .. } => "budget",
        }
    }

    /// Where the render failed, when a line is known (not for a budget).
    pub fn spot(&self) -> Option<&TemplateSpot> {
        match self {
            TemplateRenderError::MissingField { at, .. } | TemplateRenderError::Evaluation { at, .. } => Some(at),
            TemplateRenderError::OutputTooLarge { .. } | TemplateRenderError::TooSlow { .. } => None,
        }
    }
}

/// A Handlebars render error as Ruleplane tells it: located in the template, or in the partial it happened in
/// (Handlebars names the innermost named template, and partials are named after themselves at load).
pub(super) fn convert_render_error(
    error: &handlebars::RenderError,
    template: &CompiledTemplate,
) -> TemplateRenderError {
    let line = error.line_no.unwrap_or(1);
    let partial = error
        .template_name
        .as_ref()
        .and_then(|name| Some((name.clone(), template.partials().source_of(name)?)));
    let source = partial.as_ref().map_or(template.source(), |(_, source)| source);
    let at = TemplateSpot {
        line,
        column: error.column_no.unwrap_or(1),
        partial: partial.as_ref().map(|(name, _)| Box::from(name.as_str())),
    };
    // A built-in helper given a missing field says only "param at index 0 required but not found".
    if let RenderErrorReason::ParamNotFoundForIndex(helper, index) = error.reason()
        && let Some(path) = missing_param::missing_argument(source, line, helper, *index)
    {
        return TemplateRenderError::MissingField { at, path };
    }
    match error.reason() {
        RenderErrorReason::MissingVariable(path) => TemplateRenderError::MissingField {
            at,
            path: path.clone().unwrap_or_else(|| "?".to_string()),
        },
        RenderErrorReason::Other(message) => TemplateRenderError::Evaluation {
            at,
            message: message.clone(),
        },
        reason => TemplateRenderError::Evaluation {
            at,
            message: reason.to_string(),
        },
    }
}
