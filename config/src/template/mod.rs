//! Sandboxed Handlebars templates: strict, only the rule file's own partials, bounded output size, render time
//! and nesting, and
//! structure-preserving: an interpolated value fills in a scalar, it never adds keys or nesting.

use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use handlebars::{
    Context, Handlebars, Helper, HelperDef, RenderContext, RenderErrorReason, Renderable, ScopedJson, Template,
    WriteOutput,
};
use serde_json::Value;

mod compile;
mod error;
mod helpers;
mod missing_param;
mod partials;
mod partials_document;

pub use compile::{check_template, compile_template, compile_template_with};
use error::convert_render_error;
pub use error::{TemplateProblem, TemplateRenderError, TemplateSpot};
pub use partials::{MAX_PARTIALS, PartialProblem, Partials, TextOrigin, compile_partials};
pub use partials_document::{TEMPLATE_PARTIALS_KIND, TemplatePartialsDocument, TemplatePartialsSpec};

pub use helpers::HELPERS;
use helpers::{PureHelper, helper_indent, helper_json, helper_quote, helper_yaml, text_of};

/// Largest rendered output of one template; beyond it rendering fails (guards the API server and memory).
pub const MAX_RENDERED_BYTES: usize = 1024 * 1024;

/// Longest time one template may take to render.
pub const MAX_RENDER_TIME: Duration = Duration::from_secs(1);

/// Handlebars' own helpers that rule templates may call (`log` is unregistered).
const BUILTIN_HELPERS: &[&str] = &[
    "if", "unless", "each", "with", "lookup", "raw", "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not",
];

/// Deepest nesting of blocks and subexpressions a template may have: far beyond any real template, well inside
/// the stack of the thread that renders it.
pub const MAX_TEMPLATE_NESTING: usize = 32;

/// Longest template text: the template parser recurses over its input, so a bound on it bounds the stack too.
pub const MAX_TEMPLATE_BYTES: usize = 256 * 1024;

/// Helpers whose output is one whole YAML value (JSON text, YAML text, a quoted string). Called outermost in a
/// `{{…}}` of a structured render, they insert that value as one node, typed, wherever the placeholder stands.
const NODE_HELPERS: &[&str] = &["json", "yaml", "quote", "toJson", "toYaml"];

/// The internal helper a node helper's outermost call is rewritten to (not callable from rule templates: the
/// sandbox check rejects its name before the rewrite).
const NODE_HELPER: &str = "ruleplane:node";

/// The internal helper put at the start of every `#each` body: it enforces the time budget once per iteration,
/// also in loops that write nothing.
const TICK_HELPER: &str = "ruleplane:tick";

/// The internal helper a raw `{{{…}}}` expression is rewritten to.
const RAW_HELPER: &str = "ruleplane:raw";

/// A placeholder for an interpolated value in structured output: `U+E000 index U+E001`. Private-use characters
/// are valid in every YAML scalar style, are never produced by a rule's own text (the sandbox check refuses
/// them), and a value carrying them is itself replaced by a placeholder, so no value can forge one.
const PLACEHOLDER_OPEN: char = '\u{E000}';
const PLACEHOLDER_CLOSE: char = '\u{E001}';

/// A template compiled at load time and owned by its rule: rendering never parses the text again.
#[derive(Clone, Debug)]
pub struct CompiledTemplate {
    compiled: Arc<Template>,
    /// Where the template writes raw `{{{…}}}` output (line, column inside the template).
    raw_outputs: Vec<(usize, usize)>,
    /// The template as written: offline checks point at its lines.
    source: Arc<str>,
    /// The rule file's partials this template includes (and those they include).
    partials: Partials,
}

impl CompiledTemplate {
    /// The template's text as written in the rule.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where the template writes raw `{{{…}}}` output (1-based line and column inside the template): the one
    /// form through which data can shape a document, which `ruleplane validate` warns about.
    pub fn raw_outputs(&self) -> &[(usize, usize)] {
        &self.raw_outputs
    }

    /// The partials this template includes, with those they include.
    pub fn partials(&self) -> &Partials {
        &self.partials
    }

    /// Where in its rule file `error` happened when it happened inside a partial this template includes (`None`:
    /// in the template's own text, whose place its rule knows).
    pub fn partial_location(&self, error: &TemplateRenderError) -> Option<crate::diagnostics::SourceLocation> {
        self.partials.locate(error.spot()?)
    }

    /// Renders over `data` as plain text (a name, a namespace) within the output and time budgets.
    pub fn render(&self, data: &Value) -> Result<String, TemplateRenderError> {
        render_collecting(self, data, None, false).map(|(text, _)| text)
    }

    /// Renders a YAML document over `data` so that no value can change its structure: values that could (a
    /// newline, `: `, a quote, …) stand as placeholders in the text, filled in as strings after the text is
    /// parsed ([`StructuredText::fill`]); `json`/`yaml`/`quote` insert their value as one whole node.
    pub fn render_structured(&self, data: &Value) -> Result<StructuredText, TemplateRenderError> {
        render_collecting(self, data, Some(Vec::new()), false)
            .map(|(text, interpolated)| StructuredText { text, interpolated })
    }

    /// A structured render in which every value, safe or not, stands as a placeholder: what the rule's own
    /// text decides, with [`StructuredText::has_placeholder`] telling where data went.
    pub fn render_structured_masked(&self, data: &Value) -> Result<StructuredText, TemplateRenderError> {
        render_collecting(self, data, Some(Vec::new()), true)
            .map(|(text, interpolated)| StructuredText { text, interpolated })
    }

    /// The rendered text with every interpolated value shown as `<value>`: for messages, which must not carry
    /// values read from the cluster (a looked-up Secret's data, say). Line numbers match
    /// [`render_structured`](Self::render_structured)'s text.
    pub fn render_masked(&self, data: &Value) -> Result<String, TemplateRenderError> {
        let (text, _) = render_collecting(self, data, Some(Vec::new()), true)?;
        Ok(mask_placeholders(&text))
    }
}

/// The text of a structured render and the values its placeholders stand for.
#[derive(Clone, Debug, PartialEq)]
pub struct StructuredText {
    text: String,
    interpolated: Vec<Interpolated>,
}

/// A problem filling in a structured render's values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FillError {
    /// Two mapping keys became the same once their values were filled in.
    #[error("two keys of one mapping are the same once values are filled in: `{key}`")]
    DuplicateKey {
        /// The key.
        key: String,
    },
}

impl StructuredText {
    /// Whether `text` (a string parsed from [`text`](Self::text)) holds an interpolated value.
    pub fn has_placeholder(&self, text: &str) -> bool {
        !placeholders_in(text).is_empty()
    }

    /// The text to parse as YAML (values that could change its structure stand as placeholders).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Fills the placeholders of a document parsed from [`text`](Self::text) with their values: in strings and
    /// keys as text, a whole-node placeholder (`json`, `yaml`, `quote`) as its value.
    pub fn fill(&self, document: &mut Value) -> Result<(), FillError> {
        if self.interpolated.is_empty() {
            return Ok(());
        }
        fill_value(document, &self.interpolated)
    }
}

fn fill_value(value: &mut Value, interpolated: &[Interpolated]) -> Result<(), FillError> {
    match value {
        Value::String(text) if text.contains(PLACEHOLDER_OPEN) => *value = substitute(text, interpolated),
        Value::Array(items) => {
            for item in items {
                fill_value(item, interpolated)?;
            }
        }
        Value::Object(fields) if fields.keys().any(|key| key.contains(PLACEHOLDER_OPEN)) => {
            for (key, mut field) in std::mem::take(fields) {
                fill_value(&mut field, interpolated)?;
                let key = match substitute(&key, interpolated) {
                    Value::String(key) => key,
                    other => other.to_string(),
                };
                if fields.insert(key.clone(), field).is_some() {
                    return Err(FillError::DuplicateKey { key });
                }
            }
        }
        Value::Object(fields) => {
            for field in fields.values_mut() {
                fill_value(field, interpolated)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `text` with its placeholders replaced: a placeholder alone yields its value (a node keeps its type), one
/// among other text yields the joined text. Inserted values are not scanned again.
fn substitute(text: &str, interpolated: &[Interpolated]) -> Value {
    let mut pieces = placeholders_in(text);
    if let Some((0, end, index)) = pieces.first().copied()
        && end == text.len()
        && pieces.len() == 1
    {
        return match &interpolated[index] {
            Interpolated::Text(text) => Value::String(text.clone()),
            Interpolated::Node(value) => value.clone(),
        };
    }
    let mut joined = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, index) in pieces.drain(..) {
        joined.push_str(&text[at..start]);
        match &interpolated[index] {
            Interpolated::Text(text) | Interpolated::Node(Value::String(text)) => joined.push_str(text),
            Interpolated::Node(value) => joined.push_str(&value.to_string()),
        }
        at = end;
    }
    joined.push_str(&text[at..]);
    Value::String(joined)
}

/// The placeholders in `text`: (start, end, index) byte ranges, in order. Only well-formed ones with an index
/// that exists count; a rule's text cannot hold the characters and values never reach the text.
fn placeholders_in(text: &str) -> Vec<(usize, usize, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find(PLACEHOLDER_OPEN) {
        let start = from + offset;
        let digits_start = start + PLACEHOLDER_OPEN.len_utf8();
        let digits = text[digits_start..].bytes().take_while(u8::is_ascii_digit).count();
        let close = digits_start + digits;
        if digits > 0 && text[close..].starts_with(PLACEHOLDER_CLOSE) {
            if let Ok(index) = text[digits_start..close].parse::<usize>() {
                found.push((start, close + PLACEHOLDER_CLOSE.len_utf8(), index));
            }
            from = close + PLACEHOLDER_CLOSE.len_utf8();
        } else {
            from = digits_start;
        }
    }
    found
}

fn mask_placeholders(text: &str) -> String {
    let mut masked = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, _) in placeholders_in(text) {
        masked.push_str(&text[at..start]);
        masked.push_str("<value>");
        at = end;
    }
    masked.push_str(&text[at..]);
    masked
}

/// The shared, configured engine. Helpers are pure functions of their arguments, so one instance serves
/// every rule and thread.
fn engine() -> &'static Handlebars<'static> {
    static ENGINE: OnceLock<Handlebars<'static>> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut registry = Handlebars::new();
        registry.set_strict_mode(true);
        // Output is YAML, not HTML: no HTML escaping (it would corrupt values such as `a&b`). In a structured
        // render a value that could change the document's structure becomes a placeholder instead.
        registry.register_escape_fn(interpolate);
        // `log` writes to the process log: a side channel templates have no business with.
        registry.unregister_helper("log");
        for helper in PureHelper::ALL {
            registry.register_helper(helper.name, Box::new(Registered(*helper)));
        }
        registry.register_helper(NODE_HELPER, Box::new(Registered(NodeHelper)));
        registry.register_helper(TICK_HELPER, Box::new(Registered(TickHelper)));
        registry.register_helper(RAW_HELPER, Box::new(Registered(RawHelper)));
        registry
    })
}

/// Compiles and renders `source` in one go (tests and one-off renders; rules render their compiled templates).
pub fn render_template(source: &str, data: &Value) -> Result<String, TemplateRenderError> {
    match compile_template(source) {
        Ok(template) => template.render(data),
        Err(problems) => Err(TemplateRenderError::Evaluation {
            at: problems.first().map_or(TemplateSpot::in_template(1, 1), |p| {
                TemplateSpot::in_template(p.line, p.column)
            }),
            message: problems.into_iter().map(|p| p.message).collect::<Vec<_>>().join("; "),
        }),
    }
}

/// One interpolated value of a structured render, standing in the output as a placeholder.
#[derive(Clone, Debug, PartialEq)]
enum Interpolated {
    /// Text that could change the structure where it stands (a newline, `: `, a quote, …): a string scalar.
    Text(String),
    /// The value of a node helper (`json`, `yaml`, `quote`): one whole node, typed.
    Node(Value),
}

/// What the render running on this thread collects.
struct RenderState {
    deadline: Instant,
    /// `None` renders plain text (names); `Some` collects the placeholders of a structured render.
    interpolated: Option<Vec<Interpolated>>,
    /// Every value becomes a placeholder, safe or not (for messages that must not show values).
    mask_all: bool,
}

thread_local! {
    static RENDER: RefCell<Option<RenderState>> = const { RefCell::new(None) };
}

/// The escape function: a value the output may carry as it is, or a placeholder standing for it.
fn interpolate(text: &str) -> String {
    RENDER.with_borrow_mut(|state| match state {
        Some(RenderState {
            interpolated: Some(values),
            mask_all,
            ..
        }) if *mask_all || !is_structure_safe(text) => placeholder(values, Interpolated::Text(text.to_string())),
        _ => text.to_string(),
    })
}

fn placeholder(values: &mut Vec<Interpolated>, value: Interpolated) -> String {
    values.push(value);
    format!("{PLACEHOLDER_OPEN}{}{PLACEHOLDER_CLOSE}", values.len() - 1)
}

/// Whether `text` can stand in any YAML position (plain, quoted, block, flow, key, comment) without changing
/// the document's structure: printable ASCII without YAML indicators, quotes, escapes or line breaks. Names,
/// images (`nginx:1.25`), numbers, booleans and most labels are; they are written as before, so a number still
/// reads as a number. Anything else is interpolated after the parse, as a string.
fn is_structure_safe(text: &str) -> bool {
    let bytes = text.as_bytes();
    let allowed = |byte: &u8| byte.is_ascii_alphanumeric() || b" ._/:@+=~-".contains(byte);
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return true;
    };
    let breaks_out = matches!(first, b' ' | b':' | b'@')
        || matches!(last, b' ' | b':')
        || bytes == b"-"
        || ["- ", "---", "..."].iter().any(|start| text.starts_with(start))
        || text.contains(": ")
        || text.contains(" #");
    bytes.iter().all(allowed) && !breaks_out
}

/// Renders with this thread's [`RenderState`] set up (restored afterwards, so a render inside a render — none
/// today — would not lose its caller's state).
fn render_collecting(
    template: &CompiledTemplate,
    data: &Value,
    interpolated: Option<Vec<Interpolated>>,
    mask_all: bool,
) -> Result<(String, Vec<Interpolated>), TemplateRenderError> {
    let started = Instant::now();
    let outer = RENDER.replace(Some(RenderState {
        deadline: started + MAX_RENDER_TIME,
        interpolated,
        mask_all,
    }));
    let result = render_budgeted(template, data, started);
    let state = RENDER.replace(outer);
    let values = state.and_then(|state| state.interpolated).unwrap_or_default();
    result.map(|text| (text, values))
}

fn render_budgeted(template: &CompiledTemplate, data: &Value, started: Instant) -> Result<String, TemplateRenderError> {
    let mut sink = BudgetedWriter {
        buffer: Vec::new(),
        started,
        overflow: None,
    };
    let result = Context::wraps(data).and_then(|context| {
        let mut render_context = RenderContext::new(None);
        // The partials are the template's own, compiled once at load: `{{> name}}` finds them in the root block.
        if let Some(root) = render_context.block_mut() {
            for (name, partial) in template.partials.iter() {
                root.set_local_partial(name.clone(), &partial.template);
            }
        }
        template.compiled.render(
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
        Err(error) => Err(convert_render_error(&error, template)),
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

/// A Ruleplane helper: one value computed from its call. Every one is registered through [`Registered`], so
/// Handlebars' helper signature is written once.
trait ValueHelper: Send + Sync {
    fn value(&self, helper: &Helper<'_>) -> Result<Value, handlebars::RenderError>;

    /// Written directly (`{{split x ","}}`, not a subexpression), a list or mapping is refused, naming this helper
    /// (`None`: any value is written as Handlebars writes values).
    fn refuses_structures(&self) -> Option<&str> {
        None
    }
}

/// The one `HelperDef` of Ruleplane's helpers: the value as a subexpression's result, or written through the
/// escape function that keeps the document's structure.
struct Registered<H>(H);

impl<H: ValueHelper> HelperDef for Registered<H> {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        helper: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, handlebars::RenderError> {
        self.0.value(helper).map(ScopedJson::Derived)
    }

    fn call<'reg: 'rc, 'rc>(
        &self,
        helper: &Helper<'rc>,
        registry: &'reg Handlebars<'reg>,
        _: &'rc Context,
        render_context: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn handlebars::Output,
    ) -> handlebars::HelperResult {
        let value = self.0.value(helper)?;
        if let Some(name) = self.0.refuses_structures()
            && (value.is_array() || value.is_object())
        {
            let what = if value.is_array() { "a list" } else { "a mapping" };
            return Err(RenderErrorReason::Other(format!(
                "{name}: returns {what}, which cannot be written as text; use it in a subexpression, \
                 `{{{{#each ({name} …)}}}}` or `{{{{json ({name} …)}}}}`"
            ))
            .into());
        }
        let text = handlebars::JsonRender::render(&value);
        let text = if render_context.is_disable_escape() {
            text
        } else {
            registry.get_escape_fn()(&text)
        };
        out.write(&text)
            .map_err(|error| RenderErrorReason::Other(error.to_string()).into())
    }
}

/// [`NODE_HELPER`]: `json`, `yaml`, `quote` (or `indent N (yaml …)`) called outermost. In a structured render it
/// stands for its value as one node; otherwise it writes the text the named helper writes.
#[derive(Clone, Copy)]
struct NodeHelper;

impl ValueHelper for NodeHelper {
    fn value(&self, helper: &Helper<'_>) -> Result<Value, handlebars::RenderError> {
        let params = helper.params();
        let name = params
            .first()
            .and_then(|p| p.value().as_str())
            .unwrap_or_default()
            .to_string();
        let mut args = Vec::with_capacity(params.len());
        for param in params.iter().skip(1) {
            args.push(required(param)?.clone());
        }
        let failed = |message: String| RenderErrorReason::Other(format!("{name}: {message}"));
        let (indent, value) = match (name.as_str(), args.as_slice()) {
            ("indent", [width, value]) => (Some(width.clone()), value.clone()),
            ("quote", [value]) => (None, Value::String(text_of(value).map_err(failed)?)),
            (_, [value]) => (None, value.clone()),
            _ => return Err(failed("unexpected arguments".to_string()).into()),
        };
        let token = RENDER.with_borrow_mut(|state| match state {
            Some(RenderState {
                interpolated: Some(values),
                ..
            }) => Some(placeholder(values, Interpolated::Node(value.clone()))),
            _ => None,
        });
        let text = match (token, indent) {
            (Some(token), None) => token,
            (Some(token), Some(width)) => helper_indent(&[width, Value::String(token)])
                .map_err(failed)?
                .as_str()
                .unwrap_or_default()
                .to_string(),
            (None, None) => match name.as_str() {
                "json" | "toJson" => helper_json(&[value]),
                "yaml" | "toYaml" => helper_yaml(&[value]),
                _ => helper_quote(&[value]),
            }
            .map_err(failed)?
            .as_str()
            .unwrap_or_default()
            .to_string(),
            (None, Some(width)) => {
                let yaml = helper_yaml(&[value]).map_err(failed)?;
                helper_indent(&[width, yaml])
                    .map_err(failed)?
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }
        };
        Ok(Value::String(text))
    }
}

/// A helper argument's value; a missing one fails the render as strict mode does for `{{missing}}`.
fn required<'a>(param: &'a handlebars::PathAndJson<'_>) -> Result<&'a Value, handlebars::RenderError> {
    if param.is_value_missing() {
        return Err(RenderErrorReason::MissingVariable(param.relative_path().cloned()).into());
    }
    Ok(param.value())
}

/// [`TICK_HELPER`]: fails the render once its time budget is spent; runs at every `#each` iteration.
#[derive(Clone, Copy)]
struct TickHelper;

impl ValueHelper for TickHelper {
    fn value(&self, _: &Helper<'_>) -> Result<Value, handlebars::RenderError> {
        let late = RENDER.with_borrow(|state| state.as_ref().is_some_and(|s| Instant::now() > s.deadline));
        if late {
            return Err(RenderErrorReason::Other("time budget exceeded".to_string()).into());
        }
        // Writes nothing.
        Ok(Value::String(String::new()))
    }
}

/// [`RAW_HELPER`]: a `{{{…}}}` value as raw text, without placeholder characters.
#[derive(Clone, Copy)]
struct RawHelper;

impl ValueHelper for RawHelper {
    fn value(&self, helper: &Helper<'_>) -> Result<Value, handlebars::RenderError> {
        let Some(param) = helper.param(0) else {
            return Err(RenderErrorReason::ParamNotFoundForIndex("raw value", 0).into());
        };
        let text = match required(param)? {
            Value::String(text) => text.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        Ok(Value::String(text.replace([PLACEHOLDER_OPEN, PLACEHOLDER_CLOSE], "")))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod partials_tests;
