//! The pure helpers of rule templates: each a deterministic function of its arguments, with its arity checked
//! at load time, its work and output bounded by the size of its input.

use base64::Engine as _;
use handlebars::{Helper, RenderErrorReason};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::MAX_RENDERED_BYTES;
use crate::jsonpath::CompiledPath;

mod collections;
mod encoding;
mod numbers;

use collections::*;
use encoding::*;
use numbers::*;

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

impl super::ValueHelper for PureHelper {
    fn value(&self, helper: &Helper<'_>) -> Result<Value, handlebars::RenderError> {
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
        Ok(value)
    }

    /// Lists and mappings are for subexpressions, `#each` and `json`; their text (`[a, b]`, `[object]`) is never
    /// what was meant (`default` and `jsonpath` keep writing them as before).
    fn refuses_structures(&self) -> Option<&str> {
        (!self.writes_structures_as_text).then_some(self.name)
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
    crate::yaml_tree::value_kind(value)
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

#[cfg(test)]
mod tests;
