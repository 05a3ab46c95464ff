//! Sandboxed Handlebars templates: strict, unescaped, no partials, bounded output size and render time.

use std::io::{self, Write};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use handlebars::template::{Parameter, TemplateElement};
use handlebars::{
    Context, Handlebars, Helper, HelperDef, RenderContext, RenderErrorReason, Renderable, ScopedJson, Template,
    WriteOutput,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::diagnostics::did_you_mean;
use crate::jsonpath::CompiledPath;

/// Largest rendered output of one template; beyond it rendering fails (guards the API server and memory).
pub const MAX_RENDERED_BYTES: usize = 1024 * 1024;

/// Longest time one template may take to render.
pub const MAX_RENDER_TIME: Duration = Duration::from_secs(1);

/// Helpers available in templates (besides Handlebars' built-ins `if`, `unless`, `each`, `with`, `lookup`,
/// `eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `and`, `or`, `not`, `len`).
pub const HELPERS: &[&str] = &[
    "json", "yaml", "default", "jsonpath", "b64enc", "b64dec", "sha256", "lower", "upper", "trunc", "quote", "indent",
];

const BUILTIN_HELPERS: &[&str] = &[
    "if", "unless", "each", "with", "lookup", "raw", "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not", "len",
];

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
        "template line {line}: missing field `{path}` (templates are strict; use `{{{{default {path} …}}}}` or `{{{{#if {path}}}}}` for optional fields)"
    )]
    MissingField {
        /// Line inside the template.
        line: usize,
        /// The field path.
        path: String,
    },
    /// A helper failed or another evaluation error.
    #[error("template line {line}: {message}")]
    Evaluation {
        /// Line inside the template.
        line: usize,
        /// What failed.
        message: String,
    },
    /// Output exceeded [`MAX_RENDERED_BYTES`].
    #[error("rendered output exceeds {limit} bytes")]
    OutputTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// Rendering took longer than [`MAX_RENDER_TIME`].
    #[error("rendering took longer than {limit:?}")]
    TooSlow {
        /// The limit.
        limit: Duration,
    },
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
}

/// A template compiled at load time and owned by its rule: rendering never parses the text again.
#[derive(Clone, Debug)]
pub struct CompiledTemplate {
    compiled: Arc<Template>,
}

impl CompiledTemplate {
    /// Renders over `data` within the output and time budgets.
    pub fn render(&self, data: &Value) -> Result<String, TemplateRenderError> {
        render_compiled(&self.compiled, data)
    }
}

/// Compiles a template, checking what the sandbox allows: syntax, no partials or inline partials, only known
/// helpers with the right number of arguments. Every problem is reported, positioned in the template.
pub fn compile_template(source: &str) -> Result<CompiledTemplate, Vec<TemplateProblem>> {
    let template = match Template::compile(source) {
        Ok(template) => template,
        Err(error) => {
            let (line, column) = error.pos().unwrap_or((1, 1));
            let reason = error.reason().to_string();
            // The parser lists every token it could have accepted; that list helps nobody.
            let reason = match reason.split_once(": expected ") {
                Some((head, _)) if reason.len() > 100 => {
                    format!("{head} (an unclosed `{{{{#block}}}}`, a stray `{{{{` or unbalanced braces?)")
                }
                _ => reason,
            };
            return Err(vec![TemplateProblem {
                line,
                column,
                message: format!("template syntax error: {reason}"),
            }]);
        }
    };
    let mut problems = Vec::new();
    check_elements(&template, (1, 1), &mut problems);
    if problems.is_empty() {
        Ok(CompiledTemplate {
            compiled: Arc::new(template),
        })
    } else {
        Err(problems)
    }
}

/// The problems [`compile_template`] finds (empty when the template is fine).
pub fn check_template(source: &str) -> Vec<TemplateProblem> {
    compile_template(source).err().unwrap_or_default()
}

fn check_elements(template: &Template, outer: (usize, usize), problems: &mut Vec<TemplateProblem>) {
    for (index, element) in template.elements.iter().enumerate() {
        let at = template.mapping.get(index).map(|m| (m.0, m.1)).unwrap_or(outer);
        check_element(element, at, problems);
    }
}

fn check_element(element: &TemplateElement, at: (usize, usize), problems: &mut Vec<TemplateProblem>) {
    let (line, column) = at;
    let mut problem = |message: String| problems.push(TemplateProblem { line, column, message });
    match element {
        TemplateElement::PartialExpression(_) | TemplateElement::PartialBlock(_) => {
            problem("partials (`{{> name}}`) are not allowed: rule templates are self-contained".to_string())
        }
        TemplateElement::DecoratorExpression(_) | TemplateElement::DecoratorBlock(_) => {
            problem("decorators and inline partials (`{{*…}}`, `{{#*inline}}`) are not allowed".to_string())
        }
        TemplateElement::Expression(helper)
        | TemplateElement::HtmlExpression(helper)
        | TemplateElement::HelperBlock(helper) => {
            let is_call = helper.block || !helper.params.is_empty() || !helper.hash.is_empty();
            if is_call && let Parameter::Name(name) = &helper.name {
                check_helper_name(name, &mut problem);
                // Arity is known statically: report it at load, not at the first render in the cluster.
                if let Some(pure) = PureHelper::ALL.iter().find(|h| h.name == name.as_str())
                    && let Some(message) = pure.arity_problem(helper.params.len())
                {
                    problem(message);
                }
            }
            for parameter in helper.params.iter().chain(helper.hash.values()) {
                if let Parameter::Subexpression(sub) = parameter {
                    check_element(&sub.element, at, problems);
                }
            }
            for inner in [&helper.template, &helper.inverse].into_iter().flatten() {
                check_elements(inner, at, problems);
            }
        }
        TemplateElement::RawString(_) | TemplateElement::Comment(_) => {}
        // A construct added by a future Handlebars version is rejected until it has been vetted for the sandbox.
        _ => problem("unsupported template construct".to_string()),
    }
}

fn check_helper_name(name: &str, problem: &mut impl FnMut(String)) {
    if HELPERS.contains(&name) || BUILTIN_HELPERS.contains(&name) {
        return;
    }
    let suggestion = did_you_mean(name, HELPERS.iter().chain(BUILTIN_HELPERS).copied());
    problem(format!("unknown helper `{name}`{suggestion}"));
}

/// The shared, configured engine. Helpers are pure functions of their arguments, so one instance serves
/// every rule and thread.
fn engine() -> &'static Handlebars<'static> {
    static ENGINE: OnceLock<Handlebars<'static>> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut registry = Handlebars::new();
        registry.set_strict_mode(true);
        // Output is YAML, not HTML: escaping would corrupt values such as `a&b`.
        registry.register_escape_fn(handlebars::no_escape);
        // `log` writes to the process log: a side channel templates have no business with.
        registry.unregister_helper("log");
        for helper in PureHelper::ALL {
            registry.register_helper(helper.name, Box::new(*helper));
        }
        registry
    })
}

/// Compiles and renders `source` in one go (tests and one-off renders; rules render their compiled templates).
pub fn render_template(source: &str, data: &Value) -> Result<String, TemplateRenderError> {
    match compile_template(source) {
        Ok(template) => template.render(data),
        Err(problems) => Err(TemplateRenderError::Evaluation {
            line: problems.first().map_or(1, |p| p.line),
            message: problems.into_iter().map(|p| p.message).collect::<Vec<_>>().join("; "),
        }),
    }
}

fn render_compiled(template: &Template, data: &Value) -> Result<String, TemplateRenderError> {
    let mut sink = BudgetedWriter {
        buffer: Vec::new(),
        started: Instant::now(),
        overflow: None,
    };
    let result = Context::wraps(data).and_then(|context| {
        let mut render_context = RenderContext::new(None);
        template.render(
            engine(),
            &context,
            &mut render_context,
            &mut WriteOutput::new(&mut sink),
        )
    });
    if let Some(overflow) = sink.overflow {
        return Err(overflow);
    }
    if sink.started.elapsed() > MAX_RENDER_TIME {
        return Err(TemplateRenderError::TooSlow { limit: MAX_RENDER_TIME });
    }
    match result {
        Ok(()) => Ok(String::from_utf8_lossy(&sink.buffer).into_owned()),
        Err(error) => Err(convert_render_error(&error)),
    }
}

fn convert_render_error(error: &handlebars::RenderError) -> TemplateRenderError {
    let line = error.line_no.unwrap_or(1);
    match error.reason() {
        RenderErrorReason::MissingVariable(path) => TemplateRenderError::MissingField {
            line,
            path: path.clone().unwrap_or_else(|| "?".to_string()),
        },
        RenderErrorReason::Other(message) => TemplateRenderError::Evaluation {
            line,
            message: message.clone(),
        },
        reason => TemplateRenderError::Evaluation {
            line,
            message: reason.to_string(),
        },
    }
}

/// Collects output and aborts rendering (through an I/O error) when a budget is exceeded.
struct BudgetedWriter {
    buffer: Vec<u8>,
    started: Instant,
    overflow: Option<TemplateRenderError>,
}

impl Write for BudgetedWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buffer.len() + bytes.len() > MAX_RENDERED_BYTES {
            self.overflow = Some(TemplateRenderError::OutputTooLarge {
                limit: MAX_RENDERED_BYTES,
            });
            return Err(io::Error::other("output budget exceeded"));
        }
        if self.started.elapsed() > MAX_RENDER_TIME {
            self.overflow = Some(TemplateRenderError::TooSlow { limit: MAX_RENDER_TIME });
            return Err(io::Error::other("time budget exceeded"));
        }
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A helper that is a pure function of its arguments.
#[derive(Clone, Copy)]
struct PureHelper {
    name: &'static str,
    arity: (usize, usize),
    /// `default` is the one helper that must see missing values instead of failing on them.
    accepts_missing: bool,
    run: fn(&[Value]) -> Result<Value, String>,
}

impl PureHelper {
    const ALL: &'static [PureHelper] = &[
        PureHelper::new("json", 1, 1, helper_json),
        PureHelper::new("yaml", 1, 1, helper_yaml),
        PureHelper {
            name: "default",
            arity: (2, 2),
            accepts_missing: true,
            run: helper_default,
        },
        PureHelper::new("jsonpath", 2, 2, helper_jsonpath),
        PureHelper::new("b64enc", 1, 1, helper_b64enc),
        PureHelper::new("b64dec", 1, 1, helper_b64dec),
        PureHelper::new("sha256", 1, 1, helper_sha256),
        PureHelper::new("lower", 1, 1, |a| Ok(Value::String(text_of(&a[0])?.to_lowercase()))),
        PureHelper::new("upper", 1, 1, |a| Ok(Value::String(text_of(&a[0])?.to_uppercase()))),
        PureHelper::new("trunc", 2, 2, helper_trunc),
        PureHelper::new("quote", 1, 1, helper_quote),
        PureHelper::new("indent", 2, 2, helper_indent),
    ];

    /// The message for a call with `count` arguments, if that is not what the helper takes.
    fn arity_problem(&self, count: usize) -> Option<String> {
        let (min, max) = self.arity;
        if (min..=max).contains(&count) {
            return None;
        }
        let expected = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        Some(format!(
            "helper `{}` takes {expected} argument{}, got {count}",
            self.name,
            if max == 1 { "" } else { "s" }
        ))
    }

    const fn new(name: &'static str, min: usize, max: usize, run: fn(&[Value]) -> Result<Value, String>) -> PureHelper {
        PureHelper {
            name,
            arity: (min, max),
            accepts_missing: false,
            run,
        }
    }
}

impl HelperDef for PureHelper {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        helper: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, handlebars::RenderError> {
        let params = helper.params();
        if let Some(message) = self.arity_problem(params.len()) {
            return Err(RenderErrorReason::Other(message).into());
        }
        let mut args = Vec::with_capacity(params.len());
        for (index, param) in params.iter().enumerate() {
            if param.is_value_missing() && !(self.accepts_missing && index == 0) {
                return Err(RenderErrorReason::MissingVariable(param.relative_path().cloned()).into());
            }
            args.push(if param.is_value_missing() {
                Value::Null
            } else {
                param.value().clone()
            });
        }
        (self.run)(&args)
            .map(ScopedJson::Derived)
            .map_err(|message| RenderErrorReason::Other(format!("{}: {message}", self.name)).into())
    }
}

/// Strings as they are; numbers and booleans as their text; anything else is a mistake.
fn text_of(value: &Value) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Number(number) => Ok(number.to_string()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::Null => Ok(String::new()),
        other => Err(format!(
            "expects text, got {}; use `json` or `yaml` to write structured values",
            if other.is_array() { "a list" } else { "a mapping" }
        )),
    }
}

fn helper_json(args: &[Value]) -> Result<Value, String> {
    serde_json::to_string(&args[0])
        .map(Value::String)
        .map_err(|e| e.to_string())
}

fn helper_yaml(args: &[Value]) -> Result<Value, String> {
    let text = serde_saphyr::to_string(&args[0]).map_err(|e| e.to_string())?;
    Ok(Value::String(text.trim_end_matches('\n').to_string()))
}

fn helper_default(args: &[Value]) -> Result<Value, String> {
    let unset = matches!(&args[0], Value::Null) || args[0] == Value::String(String::new());
    Ok(if unset { args[1].clone() } else { args[0].clone() })
}

fn helper_jsonpath(args: &[Value]) -> Result<Value, String> {
    let expression = args[1]
        .as_str()
        .ok_or("the second argument must be a JSONPath string")?;
    let path = CompiledPath::compile(expression).map_err(|e| e.to_string())?;
    Ok(path.select_one(&args[0]).unwrap_or(Value::Null))
}

fn helper_b64enc(args: &[Value]) -> Result<Value, String> {
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(text_of(&args[0])?),
    ))
}

fn helper_b64dec(args: &[Value]) -> Result<Value, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text_of(&args[0])?.trim())
        .map_err(|e| format!("invalid base64: {e}"))?;
    String::from_utf8(bytes)
        .map(Value::String)
        .map_err(|_| "decoded bytes are not UTF-8 text".to_string())
}

fn helper_sha256(args: &[Value]) -> Result<Value, String> {
    let digest = Sha256::digest(text_of(&args[0])?.as_bytes());
    Ok(Value::String(digest.iter().map(|byte| format!("{byte:02x}")).collect()))
}

fn helper_trunc(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let length = args[1]
        .as_u64()
        .ok_or("the second argument must be a non-negative length")?;
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    Ok(Value::String(text.chars().take(length).collect()))
}

fn helper_quote(args: &[Value]) -> Result<Value, String> {
    // A JSON string literal is a valid double-quoted YAML scalar, so quoting can never break the document.
    serde_json::to_string(&text_of(&args[0])?)
        .map(Value::String)
        .map_err(|e| e.to_string())
}

fn helper_indent(args: &[Value]) -> Result<Value, String> {
    let width = args[0]
        .as_u64()
        .ok_or("the first argument must be the number of spaces")?;
    if width > 256 {
        return Err("indent width must be at most 256".to_string());
    }
    let pad = " ".repeat(usize::try_from(width).unwrap_or(0));
    let text = text_of(&args[1])?;
    let indented: Vec<String> = text
        .split('\n')
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("{pad}{line}")
            }
        })
        .collect();
    Ok(Value::String(indented.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(source: &str, data: Value) -> Result<String, TemplateRenderError> {
        assert_eq!(check_template(source), vec![], "{source}");
        render_template(source, &data)
    }

    #[test]
    fn helpers_work() {
        let data = json!({"spec": {"image": "nginx:1.10", "n": 3, "res": {"cpu": "1"}}, "t": "a&b"});
        assert_eq!(render("{{json spec.image}}", data.clone()).unwrap(), "\"nginx:1.10\"");
        assert_eq!(render("{{t}}", data.clone()).unwrap(), "a&b");
        assert_eq!(render("{{default spec.missing \"x\"}}", data.clone()).unwrap(), "x");
        assert_eq!(render("{{default spec.n 1}}", data.clone()).unwrap(), "3");
        assert_eq!(render("{{upper (trunc spec.image 5)}}", data.clone()).unwrap(), "NGINX");
        assert_eq!(render("{{b64dec (b64enc t)}}", data.clone()).unwrap(), "a&b");
        assert_eq!(render("{{quote spec.n}}", data.clone()).unwrap(), "\"3\"");
        assert_eq!(
            render("{{indent 2 (yaml spec.res)}}", data.clone()).unwrap(),
            "  cpu: \"1\""
        );
        assert_eq!(render("{{jsonpath spec \"{.res.cpu}\"}}", data.clone()).unwrap(), "1");
        assert_eq!(render("{{sha256 \"\"}}", data.clone()).unwrap().len(), 64);
        assert_eq!(render("{{#if spec.nothing}}y{{else}}n{{/if}}", data).unwrap(), "n");
    }

    #[test]
    fn missing_fields_are_errors_with_the_template_line() {
        let error = render("a: 1\nb: {{spec.nope}}\n", json!({"spec": {}})).unwrap_err();
        assert_eq!(
            error,
            TemplateRenderError::MissingField {
                line: 2,
                path: "spec.nope".into()
            }
        );
        let error = render("{{json spec.nope}}", json!({"spec": {}})).unwrap_err();
        assert!(matches!(error, TemplateRenderError::MissingField { .. }), "{error}");
    }

    #[test]
    fn sandbox_rejects_partials_and_unknown_helpers() {
        assert!(check_template("{{> other}}")[0].message.contains("partials"));
        assert!(
            check_template("{{#*inline \"x\"}}y{{/inline}}")[0]
                .message
                .contains("inline")
        );
        let problems = check_template("a\n  {{jsn spec}}");
        assert_eq!((problems[0].line, problems[0].column), (2, 3));
        assert!(problems[0].message.contains("did you mean `json`"), "{problems:?}");
        assert!(check_template("{{#each x}}{{/if}}")[0].message.contains("syntax"));
    }

    #[test]
    fn output_budget_is_enforced() {
        let big = "x".repeat(MAX_RENDERED_BYTES / 4 + 1);
        let error = render_template("{{a}}{{a}}{{a}}{{a}}", &json!({"a": big})).unwrap_err();
        assert_eq!(
            error,
            TemplateRenderError::OutputTooLarge {
                limit: MAX_RENDERED_BYTES
            }
        );
    }
}
