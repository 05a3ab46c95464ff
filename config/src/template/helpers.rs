//! The pure helpers of rule templates: each a deterministic function of its arguments, with its arity checked
//! at load time, its work and output bounded by the size of its input.

use base64::Engine as _;
use handlebars::{Context, Handlebars, Helper, HelperDef, RenderContext, RenderErrorReason, ScopedJson};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::jsonpath::CompiledPath;

/// Helpers available in templates (besides Handlebars' built-ins `if`, `unless`, `each`, `with`, `lookup`,
/// `eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `and`, `or`, `not`, `len`).
pub const HELPERS: &[&str] = &[
    "json", "yaml", "default", "jsonpath", "b64enc", "b64dec", "sha256", "lower", "upper", "trunc", "quote", "indent",
];

/// A helper that is a pure function of its arguments.
#[derive(Clone, Copy)]
pub(super) struct PureHelper {
    pub(super) name: &'static str,
    arity: (usize, usize),
    /// `default` is the one helper that must see missing values instead of failing on them.
    accepts_missing: bool,
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
