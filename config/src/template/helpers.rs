//! The pure helpers of rule templates: each a deterministic function of its arguments, with its arity checked
//! at load time, its work and output bounded by the size of its input.

use base64::Engine as _;
use handlebars::{
    Context, Handlebars, Helper, HelperDef, HelperResult, JsonRender, Output, RenderContext, RenderErrorReason,
    ScopedJson,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::MAX_RENDERED_BYTES;
use crate::jsonpath::CompiledPath;

/// Helpers available in templates (besides Handlebars' built-ins `if`, `unless`, `each`, `with`, `lookup`,
/// `eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `and`, `or`, `not`), in the order of the helper table.
#[rustfmt::skip]
pub const HELPERS: &[&str] = &[
    "json", "yaml", "default", "jsonpath", "b64enc", "b64dec", "sha256", "lower", "upper", "trunc", "quote", "indent",
    "add", "sub", "mul", "div", "mod", "min", "max",
    "len", "split", "join", "replace", "trim", "substr", "hasPrefix", "hasSuffix", "contains", "title", "format",
    "toString", "parseInt", "parseFloat",
    "first", "last", "index", "keys", "values", "sort", "uniq", "slice", "merge", "dig",
    "sha1", "fnv64a", "toJson", "fromJson", "toYaml",
    "cidrSubnet",
];

/// Most arguments a variadic helper (`add`, `min`, `format`, `merge`, …) takes: far beyond any real call.
const MAX_VARIADIC: usize = 16;

/// Widest field and longest precision `format` writes, and widest `indent`: a width is a count the template (or
/// data) chooses, so it is capped.
pub(super) const MAX_WIDTH: usize = 256;

/// A helper that is a pure function of its arguments.
#[derive(Clone, Copy)]
pub(super) struct PureHelper {
    pub(super) name: &'static str,
    arity: (usize, usize),
    /// `default` is the one helper that must see missing values instead of failing on them.
    accepts_missing: bool,
    /// Whether a list or mapping it returns may be written directly with `{{…}}` (as Handlebars' text such as
    /// `[a, b]`): only `default` and `jsonpath`, which did so before the other helpers existed. Every other helper
    /// refuses: its lists and mappings are for subexpressions, `#each` and `json`.
    writes_structures_as_text: bool,
    run: fn(&[Value]) -> Result<Value, String>,
}

impl PureHelper {
    pub(super) const ALL: &'static [PureHelper] = &[
        PureHelper::new("json", 1, 1, helper_json),
        PureHelper::new("yaml", 1, 1, helper_yaml),
        PureHelper {
            name: "default",
            arity: (2, 2),
            accepts_missing: true,
            writes_structures_as_text: true,
            run: helper_default,
        },
        PureHelper {
            writes_structures_as_text: true,
            ..PureHelper::new("jsonpath", 2, 2, helper_jsonpath)
        },
        PureHelper::new("b64enc", 1, 1, helper_b64enc),
        PureHelper::new("b64dec", 1, 1, helper_b64dec),
        PureHelper::new("sha256", 1, 1, helper_sha256),
        PureHelper::new("lower", 1, 1, |a| Ok(Value::String(text_of(&a[0])?.to_lowercase()))),
        PureHelper::new("upper", 1, 1, |a| Ok(Value::String(text_of(&a[0])?.to_uppercase()))),
        PureHelper::new("trunc", 2, 2, helper_trunc),
        PureHelper::new("quote", 1, 1, helper_quote),
        PureHelper::new("indent", 2, 2, helper_indent),
        // Arithmetic.
        PureHelper::new("add", 2, MAX_VARIADIC, |a| arithmetic(a, Operation::Add)),
        PureHelper::new("sub", 2, 2, |a| arithmetic(a, Operation::Sub)),
        PureHelper::new("mul", 2, MAX_VARIADIC, |a| arithmetic(a, Operation::Mul)),
        PureHelper::new("div", 2, 2, |a| arithmetic(a, Operation::Div)),
        PureHelper::new("mod", 2, 2, |a| arithmetic(a, Operation::Mod)),
        PureHelper::new("min", 1, MAX_VARIADIC, |a| extreme(a, std::cmp::Ordering::Less)),
        PureHelper::new("max", 1, MAX_VARIADIC, |a| extreme(a, std::cmp::Ordering::Greater)),
        // Strings (`len` also counts lists and mappings).
        PureHelper::new("len", 1, 1, helper_len),
        PureHelper::new("split", 2, 2, helper_split),
        PureHelper::new("join", 2, 2, helper_join),
        PureHelper::new("replace", 3, 3, helper_replace),
        PureHelper::new("trim", 1, 1, |a| Ok(Value::String(text_of(&a[0])?.trim().to_string()))),
        PureHelper::new("substr", 2, 3, helper_substr),
        PureHelper::new("hasPrefix", 2, 2, |a| {
            Ok(Value::Bool(text_of(&a[0])?.starts_with(&text_of(&a[1])?)))
        }),
        PureHelper::new("hasSuffix", 2, 2, |a| {
            Ok(Value::Bool(text_of(&a[0])?.ends_with(&text_of(&a[1])?)))
        }),
        PureHelper::new("contains", 2, 2, helper_contains),
        PureHelper::new("title", 1, 1, helper_title),
        PureHelper::new("format", 1, MAX_VARIADIC + 1, helper_format),
        PureHelper::new("toString", 1, 1, |a| to_text(&a[0]).map(Value::String)),
        PureHelper::new("parseInt", 1, 2, helper_parse_int),
        PureHelper::new("parseFloat", 1, 1, helper_parse_float),
        // Lists and mappings.
        PureHelper::new("first", 1, 1, |a| {
            Ok(list_of(&a[0])?.first().cloned().unwrap_or(Value::Null))
        }),
        PureHelper::new("last", 1, 1, |a| {
            Ok(list_of(&a[0])?.last().cloned().unwrap_or(Value::Null))
        }),
        PureHelper::new("index", 2, 9, helper_index),
        PureHelper::new("keys", 1, 1, helper_keys),
        PureHelper::new("values", 1, 1, helper_values),
        PureHelper::new("sort", 1, 1, helper_sort),
        PureHelper::new("uniq", 1, 1, helper_uniq),
        PureHelper::new("slice", 2, 3, helper_slice),
        PureHelper::new("merge", 2, MAX_VARIADIC, helper_merge),
        PureHelper::new("dig", 3, 10, helper_dig),
        // Encodings and digests.
        PureHelper::new("sha1", 1, 1, helper_sha1),
        PureHelper::new("fnv64a", 1, 1, helper_fnv64a),
        PureHelper::new("toJson", 1, 1, helper_json),
        PureHelper::new("fromJson", 1, 1, helper_from_json),
        PureHelper::new("toYaml", 1, 1, helper_yaml),
        // Networks.
        PureHelper::new("cidrSubnet", 3, 3, helper_cidr_subnet),
    ];

    /// The message for a call with `count` arguments, if that is not what the helper takes.
    pub(super) fn arity_problem(&self, count: usize) -> Option<String> {
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
            writes_structures_as_text: false,
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
        let failed = |message: String| RenderErrorReason::Other(format!("{}: {message}", self.name));
        let value = (self.run)(&args).map_err(failed)?;
        // A safety net under each helper's own bound: no text result larger than a whole rendered object.
        if value.as_str().is_some_and(|text| text.len() > MAX_RENDERED_BYTES) {
            return Err(failed(too_large()).into());
        }
        Ok(ScopedJson::Derived(value))
    }

    /// Written directly (`{{split x ","}}`, not a subexpression): a scalar is written as Handlebars writes any
    /// value, through the escape function that keeps the structure; a list or mapping is an error, since its
    /// text (`[a, b]`, `[object]`) is never what was meant.
    fn call<'reg: 'rc, 'rc>(
        &self,
        helper: &Helper<'rc>,
        registry: &'reg Handlebars<'reg>,
        context: &'rc Context,
        render_context: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let value = self.call_inner(helper, registry, context, render_context)?;
        let value = value.as_json();
        if !self.writes_structures_as_text && (value.is_array() || value.is_object()) {
            let what = if value.is_array() { "a list" } else { "a mapping" };
            return Err(RenderErrorReason::Other(format!(
                "{name}: returns {what}, which cannot be written as text; use it in a subexpression, \
                 `{{{{#each ({name} …)}}}}` or `{{{{json ({name} …)}}}}`",
                name = self.name
            ))
            .into());
        }
        let text = value.render();
        let text = if render_context.is_disable_escape() {
            text
        } else {
            registry.get_escape_fn()(&text)
        };
        out.write(&text)
            .map_err(|error| RenderErrorReason::Other(error.to_string()).into())
    }
}

/// Strings as they are; numbers and booleans as their text; anything else is a mistake.
pub(super) fn text_of(value: &Value) -> Result<String, String> {
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

pub(super) fn helper_json(args: &[Value]) -> Result<Value, String> {
    serde_json::to_string(&args[0])
        .map(Value::String)
        .map_err(|e| e.to_string())
}

pub(super) fn helper_yaml(args: &[Value]) -> Result<Value, String> {
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
    Ok(Value::String(hex(&Sha256::digest(text_of(&args[0])?.as_bytes()))))
}

fn helper_trunc(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let length = args[1]
        .as_u64()
        .ok_or("the second argument must be a non-negative length")?;
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    Ok(Value::String(text.chars().take(length).collect()))
}

pub(super) fn helper_quote(args: &[Value]) -> Result<Value, String> {
    // A JSON string literal is a valid double-quoted YAML scalar, so quoting can never break the document.
    serde_json::to_string(&text_of(&args[0])?)
        .map(Value::String)
        .map_err(|e| e.to_string())
}

pub(super) fn helper_indent(args: &[Value]) -> Result<Value, String> {
    let width = args[0]
        .as_u64()
        .ok_or("the first argument must be the number of spaces")?;
    if width > MAX_WIDTH as u64 {
        return Err(format!("indent width must be at most {MAX_WIDTH}"));
    }
    let pad = " ".repeat(usize::try_from(width).unwrap_or(0));
    let text = text_of(&args[1])?;
    within_budget(
        text.len()
            .saturating_add(pad.len().saturating_mul(text.matches('\n').count() + 1)),
    )?;
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

fn too_large() -> String {
    format!("the result would exceed {MAX_RENDERED_BYTES} bytes")
}

/// Fails when a result of `bytes` bytes would be larger than a whole rendered object: checked before building
/// results whose size is a product of their inputs (`replace`, `join`, `indent`).
fn within_budget(bytes: usize) -> Result<(), String> {
    if bytes > MAX_RENDERED_BYTES {
        return Err(too_large());
    }
    Ok(())
}

/// What kind of value this is, for messages ("got a list").
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// `toString`: like [`text_of`], and lists and mappings as compact JSON.
fn to_text(value: &Value) -> Result<String, String> {
    match value {
        Value::Array(_) | Value::Object(_) => serde_json::to_string(value).map_err(|e| e.to_string()),
        other => text_of(other),
    }
}

fn list_of(value: &Value) -> Result<&Vec<Value>, String> {
    value
        .as_array()
        .ok_or_else(|| format!("expects a list, got {}", kind_of(value)))
}

fn map_of(value: &Value) -> Result<&serde_json::Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("expects a mapping, got {}", kind_of(value)))
}

/// A number of a template: integers stay integers (64-bit signed, as in CEL and Kubernetes' `int64`); any
/// float makes the operation a float one.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            // Precision beyond 2^53 is lost, as in every language that mixes the two.
            Number::Int(int) => int as f64,
            Number::Float(float) => float,
        }
    }
}

/// A number argument. Text is never silently a number (`"3"` is refused with a pointer to `parseInt`): labels
/// and annotations are strings, and arithmetic on them should say so.
fn number_of(value: &Value) -> Result<Number, String> {
    match value {
        Value::Number(number) => match number.as_i64() {
            Some(int) => Ok(Number::Int(int)),
            None if number.is_u64() => Err(format!("{number} is beyond the 64-bit signed integer range")),
            None => number
                .as_f64()
                .map(Number::Float)
                .ok_or_else(|| format!("{number} is not a number")),
        },
        Value::String(text) => Err(format!(
            "expects numbers, got the string {}; convert text with `parseInt` or `parseFloat`",
            serde_json::to_string(text).unwrap_or_default()
        )),
        other => Err(format!("expects numbers, got {}", kind_of(other))),
    }
}

fn number_value(number: Number) -> Result<Value, String> {
    match number {
        Number::Int(int) => Ok(Value::from(int)),
        Number::Float(float) => serde_json::Number::from_f64(float)
            .map(Value::Number)
            .ok_or_else(|| "the result is not a finite number".to_string()),
    }
}

/// A non-negative integer argument (a length, an index, a count).
fn count_of(value: &Value, what: &str) -> Result<usize, String> {
    match value.as_u64() {
        Some(count) => Ok(usize::try_from(count).unwrap_or(usize::MAX)),
        None => Err(format!(
            "{what} must be a non-negative integer, got {}",
            to_text(value)?
        )),
    }
}

/// An arithmetic helper's operation.
#[derive(Clone, Copy)]
enum Operation {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl Operation {
    fn ints(self, a: i64, b: i64) -> Option<i64> {
        match self {
            Operation::Add => a.checked_add(b),
            Operation::Sub => a.checked_sub(b),
            Operation::Mul => a.checked_mul(b),
            Operation::Div => a.checked_div(b),
            Operation::Mod => a.checked_rem(b),
        }
    }

    fn floats(self, a: f64, b: f64) -> f64 {
        match self {
            Operation::Add => a + b,
            Operation::Sub => a - b,
            Operation::Mul => a * b,
            Operation::Div => a / b,
            Operation::Mod => a % b,
        }
    }
}

/// `add`, `sub`, `mul`, `div`, `mod` over two or more numbers, left to right: integers while every argument is
/// one (checked: overflow is an error, never a wrap; `div` truncates toward zero, `mod` takes the dividend's
/// sign), floats as soon as one argument is a float. Dividing by zero is an error in both.
fn arithmetic(args: &[Value], operation: Operation) -> Result<Value, String> {
    let numbers = args.iter().map(number_of).collect::<Result<Vec<_>, _>>()?;
    if matches!(operation, Operation::Div | Operation::Mod) && numbers[1..].iter().any(|n| n.as_f64() == 0.0) {
        return Err("division by zero".to_string());
    }
    let all_ints = numbers.iter().all(|n| matches!(n, Number::Int(_)));
    let mut result = numbers[0];
    for &next in &numbers[1..] {
        result = match (result, next) {
            (Number::Int(a), Number::Int(b)) if all_ints => Number::Int(
                operation
                    .ints(a, b)
                    .ok_or("integer overflow (integers are 64-bit signed)")?,
            ),
            (a, b) => Number::Float(operation.floats(a.as_f64(), b.as_f64())),
        };
    }
    number_value(result)
}

fn compare_numbers(a: Number, b: Number) -> std::cmp::Ordering {
    match (a, b) {
        (Number::Int(a), Number::Int(b)) => a.cmp(&b),
        (a, b) => a.as_f64().total_cmp(&b.as_f64()),
    }
}

/// `min` / `max` of its arguments, or of one list argument; the winner keeps its type.
fn extreme(args: &[Value], wanted: std::cmp::Ordering) -> Result<Value, String> {
    let items = match args {
        [Value::Array(items)] => items.as_slice(),
        _ => args,
    };
    let mut best: Option<(Number, &Value)> = None;
    for item in items {
        let number = number_of(item)?;
        if best.is_none_or(|(current, _)| compare_numbers(number, current) == wanted) {
            best = Some((number, item));
        }
    }
    best.map(|(_, value)| value.clone())
        .ok_or_else(|| "expects at least one number, got an empty list".to_string())
}

/// Characters of a string (not bytes), items of a list, keys of a mapping; `null` has none.
fn helper_len(args: &[Value]) -> Result<Value, String> {
    match &args[0] {
        Value::String(text) => Ok(Value::from(text.chars().count())),
        Value::Array(items) => Ok(Value::from(items.len())),
        Value::Object(fields) => Ok(Value::from(fields.len())),
        Value::Null => Ok(Value::from(0)),
        other => Err(format!("expects a string, a list or a mapping, got {}", kind_of(other))),
    }
}

/// The pieces of the text between separators; an empty separator splits into characters.
fn helper_split(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let separator = text_of(&args[1])?;
    let pieces: Vec<Value> = if separator.is_empty() {
        text.chars().map(|c| Value::String(c.to_string())).collect()
    } else {
        text.split(separator.as_str())
            .map(|piece| Value::String(piece.to_string()))
            .collect()
    };
    Ok(Value::Array(pieces))
}

fn helper_join(args: &[Value]) -> Result<Value, String> {
    let items = list_of(&args[0])?.iter().map(text_of).collect::<Result<Vec<_>, _>>()?;
    let separator = text_of(&args[1])?;
    let size =
        items.iter().map(String::len).sum::<usize>() + separator.len().saturating_mul(items.len().saturating_sub(1));
    within_budget(size)?;
    Ok(Value::String(items.join(&separator)))
}

fn helper_replace(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let old = text_of(&args[1])?;
    let new = text_of(&args[2])?;
    if old.is_empty() {
        return Err("the text to replace must not be empty".to_string());
    }
    let count = text.matches(old.as_str()).count();
    within_budget((text.len() - count * old.len()).saturating_add(count.saturating_mul(new.len())))?;
    Ok(Value::String(text.replace(old.as_str(), &new)))
}

/// The characters from `start` to `end` (exclusive; default: the end), clamped to the text or list.
fn range_of(length: usize, args: &[Value]) -> Result<(usize, usize), String> {
    let start = count_of(&args[0], "the start")?.min(length);
    let end = match args.get(1) {
        Some(end) => count_of(end, "the end")?.min(length),
        None => length,
    };
    if end < start {
        return Err(format!("the end ({end}) is before the start ({start})"));
    }
    Ok((start, end))
}

fn helper_substr(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let (start, end) = range_of(text.chars().count(), &args[1..])?;
    Ok(Value::String(text.chars().skip(start).take(end - start).collect()))
}

fn helper_slice(args: &[Value]) -> Result<Value, String> {
    match &args[0] {
        Value::Array(items) => {
            let (start, end) = range_of(items.len(), &args[1..])?;
            Ok(Value::Array(items[start..end].to_vec()))
        }
        Value::String(_) => helper_substr(args),
        other => Err(format!("expects a list or a string, got {}", kind_of(other))),
    }
}

/// A string holds a substring, a list an item (equal as JSON values), a mapping a key.
fn helper_contains(args: &[Value]) -> Result<Value, String> {
    let found = match &args[0] {
        Value::Array(items) => items.contains(&args[1]),
        Value::Object(fields) => fields.contains_key(&text_of(&args[1])?),
        other => text_of(other)?.contains(&text_of(&args[1])?),
    };
    Ok(Value::Bool(found))
}

/// Every word's first letter upper-cased, the rest kept (Go's `strings.Title`): a word starts after anything that
/// is not a letter, a digit or `_`.
fn helper_title(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let mut titled = String::with_capacity(text.len());
    let mut at_word_start = true;
    for c in text.chars() {
        if at_word_start {
            titled.extend(c.to_uppercase());
        } else {
            titled.push(c);
        }
        at_word_start = !(c.is_alphanumeric() || c == '_');
    }
    Ok(Value::String(titled))
}

/// An integer from text (`parseInt "42"`, `parseInt "ff" 16`; base 2 to 36, an optional sign, nothing else, not
/// even spaces) or an integer as it is.
fn helper_parse_int(args: &[Value]) -> Result<Value, String> {
    let base = match args.get(1) {
        Some(base) => count_of(base, "the base")?,
        None => 10,
    };
    if !(2..=36).contains(&base) {
        return Err(format!("the base must be from 2 to 36, got {base}"));
    }
    match &args[0] {
        Value::String(text) => i64::from_str_radix(text, base as u32).map(Value::from).map_err(|_| {
            format!(
                "{} is not a base-{base} integer (64-bit signed)",
                serde_json::to_string(text).unwrap_or_default()
            )
        }),
        Value::Number(_) => match number_of(&args[0])? {
            Number::Int(int) => Ok(Value::from(int)),
            Number::Float(float) => Err(format!("{float} is not an integer")),
        },
        other => Err(format!("expects text or an integer, got {}", kind_of(other))),
    }
}

/// A float from text (`parseFloat "1.5"`, `"2e3"`) or a number; infinities and NaN are refused.
fn helper_parse_float(args: &[Value]) -> Result<Value, String> {
    let float = match &args[0] {
        Value::String(text) => text
            .parse::<f64>()
            .ok()
            .filter(|float| float.is_finite())
            .ok_or_else(|| format!("{} is not a number", serde_json::to_string(text).unwrap_or_default()))?,
        Value::Number(_) => number_of(&args[0])?.as_f64(),
        other => return Err(format!("expects text or a number, got {}", kind_of(other))),
    };
    number_value(Number::Float(float))
}

/// `index x k1 k2 …`: a list's item (an integer index) or a mapping's field (a key), then the next one's in it.
/// Strict, like missing fields: an index out of range or a missing key is an error (`dig` has a default).
fn helper_index(args: &[Value]) -> Result<Value, String> {
    let mut current = &args[0];
    for key in &args[1..] {
        current = match current {
            Value::Array(items) => {
                let at = count_of(key, "a list index")?;
                items
                    .get(at)
                    .ok_or_else(|| format!("index {at} is out of range for a list of {}", items.len()))?
            }
            Value::Object(fields) => {
                let name = text_of(key)?;
                fields.get(&name).ok_or_else(|| {
                    format!(
                        "no key {} (use `dig` for a default)",
                        serde_json::to_string(&name).unwrap_or_default()
                    )
                })?
            }
            other => return Err(format!("cannot index {}", kind_of(other))),
        };
    }
    Ok(current.clone())
}

/// `dig x k1 k2 … default`: like `index`, but the default when a key or index is not there (or leads to `null`).
fn helper_dig(args: &[Value]) -> Result<Value, String> {
    let (default, path) = args[1..].split_last().unwrap_or((&Value::Null, &[]));
    let mut current = &args[0];
    for key in path {
        let next = match current {
            Value::Array(items) => key
                .as_u64()
                .and_then(|at| usize::try_from(at).ok())
                .and_then(|at| items.get(at)),
            Value::Object(fields) => fields.get(&text_of(key)?),
            _ => None,
        };
        match next {
            Some(value) => current = value,
            None => return Ok(default.clone()),
        }
    }
    Ok(if current.is_null() {
        default.clone()
    } else {
        current.clone()
    })
}

/// A mapping's keys, sorted.
fn helper_keys(args: &[Value]) -> Result<Value, String> {
    let mut keys: Vec<&String> = map_of(&args[0])?.keys().collect();
    keys.sort();
    Ok(Value::Array(
        keys.into_iter().map(|key| Value::String(key.clone())).collect(),
    ))
}

/// A mapping's values, in the order of its sorted keys.
fn helper_values(args: &[Value]) -> Result<Value, String> {
    let mut fields: Vec<(&String, &Value)> = map_of(&args[0])?.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    Ok(Value::Array(
        fields.into_iter().map(|(_, value)| value.clone()).collect(),
    ))
}

/// A list of strings sorted by text (Unicode code points), or of numbers by value.
fn helper_sort(args: &[Value]) -> Result<Value, String> {
    let items = list_of(&args[0])?;
    let mut sorted = items.clone();
    if items.iter().all(Value::is_string) {
        sorted.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    } else if items.iter().all(Value::is_number) {
        let mut keyed = items
            .iter()
            .map(|item| Ok((number_of(item)?, item.clone())))
            .collect::<Result<Vec<_>, String>>()?;
        keyed.sort_by(|a, b| compare_numbers(a.0, b.0));
        sorted = keyed.into_iter().map(|(_, item)| item).collect();
    } else {
        return Err("expects a list of strings or a list of numbers".to_string());
    }
    Ok(Value::Array(sorted))
}

/// A list without repeated items (equal as JSON values), each kept where it first appears.
fn helper_uniq(args: &[Value]) -> Result<Value, String> {
    let mut seen = std::collections::HashSet::new();
    let mut unique = Vec::new();
    for item in list_of(&args[0])? {
        // Compact JSON identifies a value (mappings' keys are sorted), hashing keeps this linear.
        if seen.insert(serde_json::to_string(item).map_err(|e| e.to_string())?) {
            unique.push(item.clone());
        }
    }
    Ok(Value::Array(unique))
}

/// Mappings merged at the top level, a later one's key winning; `null` counts as an empty mapping.
fn helper_merge(args: &[Value]) -> Result<Value, String> {
    let mut merged = serde_json::Map::new();
    for arg in args {
        if arg.is_null() {
            continue;
        }
        for (key, value) in map_of(arg)? {
            merged.insert(key.clone(), value.clone());
        }
    }
    Ok(Value::Object(merged))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn helper_sha1(args: &[Value]) -> Result<Value, String> {
    Ok(Value::String(hex(&sha1::Sha1::digest(text_of(&args[0])?.as_bytes()))))
}

/// 64-bit FNV-1a of the text's UTF-8 bytes, as 16 hex digits.
fn helper_fnv64a(args: &[Value]) -> Result<Value, String> {
    use std::hash::Hasher as _;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(text_of(&args[0])?.as_bytes());
    Ok(Value::String(format!("{:016x}", hasher.finish())))
}

/// JSON text parsed to its value (serde_json bounds its nesting at 128).
fn helper_from_json(args: &[Value]) -> Result<Value, String> {
    let text = args[0]
        .as_str()
        .ok_or_else(|| format!("expects JSON text, got {}", kind_of(&args[0])))?;
    serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))
}

/// `format "%s-%03d" a b`: a printf subset. Verbs `%s` (text; `%.Ns` its first N characters), `%d` (an integer),
/// `%f` / `%.Nf` (a number, 6 or N decimals), `%x` (an integer or text, lowercase hex), `%q` (text, quoted as a
/// JSON string), `%v` (any value, as `toString` writes it), `%%`; each with an optional width and the flags `-`
/// (pad on the right) and `0` (pad with zeros, after a sign). Widths and precisions are at most [`MAX_WIDTH`],
/// every argument must be used, and each verb needs one: the result is never much larger than its inputs.
fn helper_format(args: &[Value]) -> Result<Value, String> {
    let pattern = args[0]
        .as_str()
        .ok_or_else(|| format!("the first argument must be the format text, got {}", kind_of(&args[0])))?;
    let mut values = args[1..].iter();
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let (mut left, mut zero) = (false, false);
        while let Some(flag) = chars.next_if(|c| matches!(c, '-' | '0')) {
            if flag == '-' {
                left = true;
            } else {
                zero = true;
            }
        }
        let width = format_number(&mut chars, "width")?;
        let precision = match chars.next_if_eq(&'.') {
            Some(_) => Some(format_number(&mut chars, "precision")?.unwrap_or(0)),
            None => None,
        };
        let verb = chars
            .next()
            .ok_or("the format ends inside a verb (write `%%` for a percent sign)")?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        if !matches!(verb, 's' | 'd' | 'f' | 'x' | 'q' | 'v') {
            return Err(format!("unknown verb `%{verb}` (supported: %s %d %f %x %q %v %%)"));
        }
        if precision.is_some() && !matches!(verb, 's' | 'f') {
            return Err(format!("a precision applies to `%s` and `%f`, not `%{verb}`"));
        }
        let value = values.next().ok_or_else(|| format!("`%{verb}` has no argument left"))?;
        let text = match verb {
            's' => {
                let text = text_of(value)?;
                match precision {
                    Some(precision) => text.chars().take(precision).collect(),
                    None => text,
                }
            }
            'd' => match number_of(value)? {
                Number::Int(int) => int.to_string(),
                Number::Float(float) => return Err(format!("`%d` expects an integer, got {float}; use `%.0f`")),
            },
            'f' => format!("{:.*}", precision.unwrap_or(6), number_of(value)?.as_f64()),
            'x' => match value {
                Value::String(text) => hex(text.as_bytes()),
                _ => match number_of(value)? {
                    Number::Int(int) if int < 0 => format!("-{:x}", int.unsigned_abs()),
                    Number::Int(int) => format!("{int:x}"),
                    Number::Float(float) => return Err(format!("`%x` expects an integer or text, got {float}")),
                },
            },
            'q' => serde_json::to_string(&text_of(value)?).map_err(|e| e.to_string())?,
            _ => to_text(value)?,
        };
        let padding = width.unwrap_or(0).saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', padding));
        } else if zero {
            let (sign, digits) = match text.strip_prefix('-') {
                Some(digits) if matches!(verb, 'd' | 'f' | 'x' | 'v') => ("-", digits),
                _ => ("", text.as_str()),
            };
            out.push_str(sign);
            out.extend(std::iter::repeat_n('0', padding));
            out.push_str(digits);
        } else {
            out.extend(std::iter::repeat_n(' ', padding));
            out.push_str(&text);
        }
    }
    let unused = values.len();
    if unused > 0 {
        return Err(format!(
            "{} argument{} given, {unused} not used by the format",
            args.len() - 1,
            if args.len() == 2 { "" } else { "s" }
        ));
    }
    Ok(Value::String(out))
}

/// The decimal number of a width or precision in a `format` verb, if any; at most [`MAX_WIDTH`].
fn format_number(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, what: &str) -> Result<Option<usize>, String> {
    let mut number: Option<usize> = None;
    while let Some(digit) = chars.next_if(char::is_ascii_digit) {
        let value = number.unwrap_or(0) * 10 + digit.to_digit(10).unwrap_or(0) as usize;
        if value > MAX_WIDTH {
            return Err(format!("a {what} must be at most {MAX_WIDTH}"));
        }
        number = Some(value);
    }
    Ok(number)
}

/// `cidrSubnet prefix newbits netnum`, as Terraform's `cidrsubnet`: the `netnum`-th subnet of `prefix` whose
/// prefix is `newbits` longer. IPv4 and IPv6; the prefix's host bits are ignored (`10.0.0.5/16` is `10.0.0.0/16`).
fn helper_cidr_subnet(args: &[Value]) -> Result<Value, String> {
    let prefix = args[0].as_str().ok_or_else(|| {
        format!(
            "the prefix must be text such as \"10.0.0.0/16\", got {}",
            kind_of(&args[0])
        )
    })?;
    let invalid = || {
        format!(
            "invalid CIDR prefix {}",
            serde_json::to_string(prefix).unwrap_or_default()
        )
    };
    let (address, length) = prefix.split_once('/').ok_or_else(invalid)?;
    let length: u32 = match length.len() {
        1..=3 if length.bytes().all(|b| b.is_ascii_digit()) => length.parse().map_err(|_| invalid())?,
        _ => return Err(invalid()),
    };
    let (bits, base, v4) = if let Ok(v4) = address.parse::<std::net::Ipv4Addr>() {
        (32u32, u128::from(u32::from(v4)), true)
    } else if let Ok(v6) = address.parse::<std::net::Ipv6Addr>() {
        (128u32, u128::from(v6), false)
    } else {
        return Err(invalid());
    };
    if length > bits {
        return Err(invalid());
    }
    let newbits = match args[1].as_u64() {
        Some(newbits) => newbits,
        None => {
            return Err(format!(
                "newbits must be a non-negative integer, got {}",
                to_text(&args[1])?
            ));
        }
    };
    let netnum = match args[2].as_u64() {
        Some(netnum) => netnum,
        None => {
            return Err(format!(
                "netnum must be a non-negative integer, got {}",
                to_text(&args[2])?
            ));
        }
    };
    let new_length = u64::from(length) + newbits;
    if new_length > u64::from(bits) {
        return Err(format!(
            "insufficient address space to extend prefix of {length} by {newbits}"
        ));
    }
    // newbits ≤ 128 here; a netnum (< 2^64) always fits 64 or more new bits.
    if newbits < 64 && netnum >> newbits != 0 {
        return Err(format!(
            "prefix extension of {newbits} does not accommodate a subnet numbered {netnum}"
        ));
    }
    let host_bits = bits - new_length as u32;
    let network = base & !(low_bits(bits - length));
    let subnet = network
        | if netnum == 0 {
            0
        } else {
            u128::from(netnum) << host_bits
        };
    let address = if v4 {
        std::net::Ipv4Addr::from(subnet as u32).to_string()
    } else {
        std::net::Ipv6Addr::from(subnet).to_string()
    };
    Ok(Value::String(format!("{address}/{new_length}")))
}

/// A mask of the `count` lowest bits (`count` ≤ 128).
fn low_bits(count: u32) -> u128 {
    if count >= 128 { u128::MAX } else { (1u128 << count) - 1 }
}

#[cfg(test)]
mod tests;
