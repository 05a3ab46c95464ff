//! JSONPath in kubectl style (`{.status.phase}`, `.spec.replicas`) or RFC 9535 style (`$.status.phase`).
//!
//! Expressions are translated to RFC 9535 and run with `jsonpath-rust`. The translation matters for
//! Kubernetes field names: `.metadata.labels.app-name` and kubectl's escaped dots
//! (`.metadata.labels.app\.kubernetes\.io/name`) become bracketed names, which RFC 9535 requires.

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

/// A JSONPath expression that failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath `{expression}`: {reason}")]
pub struct JsonPathError {
    /// The expression as written.
    pub expression: String,
    /// What is wrong with it.
    pub reason: String,
}

impl JsonPathError {
    /// Short category for diagnostics.
    pub fn category(&self) -> &'static str {
        "jsonpath"
    }
}

/// Longest JSONPath expression a rule may hold.
pub const MAX_JSONPATH_BYTES: usize = 4096;

/// Deepest nesting of brackets, parentheses and braces in a JSONPath expression.
pub const MAX_JSONPATH_NESTING: usize = 32;

/// A compiled JSONPath expression.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledPath {
    source: String,
    query: JpQuery,
}

/// A compiled path serializes as the expression it was compiled from.
impl serde::Serialize for CompiledPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl CompiledPath {
    /// Parses a kubectl-style or RFC 9535 expression.
    pub fn compile(expression: &str) -> Result<CompiledPath, JsonPathError> {
        let error = |reason: String| JsonPathError {
            expression: expression.to_string(),
            reason,
        };
        // The parser recurses over brackets and filters: bound the input before it sees it.
        if expression.len() > MAX_JSONPATH_BYTES {
            return Err(error(format!(
                "the expression is {} bytes; at most {MAX_JSONPATH_BYTES} are allowed",
                expression.len()
            )));
        }
        let mut depth = 0usize;
        for c in expression.chars() {
            match c {
                '[' | '(' | '{' => depth += 1,
                ']' | ')' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > MAX_JSONPATH_NESTING {
                return Err(error(format!(
                    "brackets and parentheses nest more than {MAX_JSONPATH_NESTING} deep"
                )));
            }
        }
        let translated = to_rfc9535(expression).map_err(error)?;
        let query = parse_json_path(&translated).map_err(|e| error(condense(&e.to_string())))?;
        Ok(CompiledPath {
            source: expression.to_string(),
            query,
        })
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The field names the path starts with, as long as each step selects one name: `{.children.svc['x']}` →
    /// `children`, `svc`, `x`; `$.lookups[?@.a]` → `lookups` (a filter, wildcard, index or descendant ends it).
    pub(crate) fn leading_names(&self) -> Vec<&str> {
        use jsonpath_rust::parser::model::{Segment, Selector};
        self.query
            .segments
            .iter()
            .map_while(|segment| match segment {
                Segment::Selector(Selector::Name(name)) => Some(name.trim_matches(['\'', '"'])),
                Segment::Selectors(selectors) => match selectors.as_slice() {
                    [Selector::Name(name)] => Some(name.trim_matches(['\'', '"'])),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// Every value the expression selects in `value`, in document order.
    pub fn select(&self, value: &Value) -> Vec<Value> {
        match js_path_process(&self.query, value) {
            Ok(found) => found.into_iter().map(|r| r.val().clone()).collect(),
            // Evaluation errors (e.g. a function applied to the wrong type) mean "nothing selected": a
            // projection of a field that is not there yet is normal while children are being created.
            Err(_) => Vec::new(),
        }
    }

    /// What the expression selects as one value: nothing → `None`, one match → it, several → a list.
    pub(crate) fn select_one(&self, value: &Value) -> Option<Value> {
        let mut found = self.select(value);
        match found.len() {
            0 => None,
            1 => found.pop(),
            _ => Some(Value::Array(found)),
        }
    }
}

/// Whether a selected value counts as true for `readyWhen`: present and not `false`, `null`, `""`, `[]`, `{}`.
pub(crate) fn is_truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty() && s != "False" && s != "false",
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(fields)) => !fields.is_empty(),
        Some(_) => true,
    }
}

/// Pest's multi-line messages are reduced to their last, explanatory line.
fn condense(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .rfind(|line| line.starts_with('=') || line.contains("expected"))
        .map(|line| line.trim_start_matches('=').trim().to_string())
        .unwrap_or_else(|| message.lines().next().unwrap_or("").to_string())
}

/// Translates kubectl / shorthand syntax into RFC 9535.
fn to_rfc9535(expression: &str) -> Result<String, String> {
    let trimmed = expression.trim();
    let inner = match trimmed.strip_prefix('{') {
        Some(rest) => rest
            .strip_suffix('}')
            .ok_or_else(|| "missing closing `}`".to_string())?
            .trim(),
        None => trimmed,
    };
    if inner.starts_with("range") || inner.starts_with("end") || inner.contains("}{") {
        return Err("kubectl `range`/`end` templates are not supported; use a single path".into());
    }
    let body = if let Some(rest) = inner.strip_prefix('$') {
        rest
    } else if inner.starts_with('.') || inner.starts_with('[') {
        inner
    } else if inner.is_empty() {
        return Err("empty expression".into());
    } else {
        return Err("a path starts with `.` (kubectl style), `{.` or `$`".into());
    };
    let mut out = String::from("$");
    let chars: Vec<char> = body.chars().collect();
    let mut index = 0;
    while index < chars.len() {
        match chars[index] {
            '.' => {
                if chars.get(index + 1) == Some(&'.') {
                    out.push_str("..");
                    index += 2;
                    if chars.get(index) == Some(&'[') {
                        continue;
                    }
                } else {
                    index += 1;
                }
                let mut name = String::new();
                while let Some(&c) = chars.get(index) {
                    match c {
                        '\\' if chars.get(index + 1) == Some(&'.') => {
                            name.push('.');
                            index += 2;
                        }
                        '.' | '[' => break,
                        _ => {
                            name.push(c);
                            index += 1;
                        }
                    }
                }
                if name.is_empty() {
                    // A lone trailing dot (`{.}`) means the whole object in kubectl.
                    if index >= chars.len() && out == "$" {
                        return Ok(out);
                    }
                    return Err("empty field name".into());
                }
                if name == "*" {
                    out.push_str(if out.ends_with("..") { "*" } else { ".*" });
                } else if is_shorthand_name(&name) {
                    if !out.ends_with("..") {
                        out.push('.');
                    }
                    out.push_str(&name);
                } else {
                    let quoted = name.replace('\\', "\\\\").replace('\'', "\\'");
                    out.push_str(&format!("['{quoted}']"));
                }
            }
            '[' => {
                let start = index;
                let mut quote: Option<char> = None;
                let mut depth = 0usize;
                while let Some(&c) = chars.get(index) {
                    index += 1;
                    match (quote, c) {
                        (Some(q), c) if c == q => quote = None,
                        (Some(_), '\\') => index += 1,
                        (Some(_), _) => {}
                        (None, '\'' | '"') => quote = Some(c),
                        (None, '[') => depth += 1,
                        (None, ']') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        (None, _) => {}
                    }
                }
                if depth != 0 {
                    return Err("unclosed `[`".into());
                }
                let segment: String = chars[start..index.min(chars.len())].iter().collect();
                out.push_str(&segment);
            }
            c => return Err(format!("unexpected `{c}`")),
        }
    }
    Ok(out)
}

fn is_shorthand_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || !c.is_ascii())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kubectl_and_rfc_syntax_are_accepted() {
        let object = json!({
            "metadata": {"labels": {"app.kubernetes.io/name": "web", "tier-x": "gold"}},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        });
        let select = |e: &str| CompiledPath::compile(e).unwrap().select_one(&object);
        assert_eq!(select("{.metadata.labels.tier-x}"), Some(json!("gold")));
        assert_eq!(
            select(r"{.metadata.labels.app\.kubernetes\.io/name}"),
            Some(json!("web"))
        );
        assert_eq!(select("$.spec.containers[0].name"), Some(json!("a")));
        assert_eq!(select(".spec.containers[*].name"), Some(json!(["a", "b"])));
        assert_eq!(select("{..name}"), Some(json!(["a", "b"])));
        assert_eq!(select("{.spec.missing}"), None);
        assert_eq!(select("{.}"), Some(object.clone()));
        assert_eq!(select(r#"{.spec.containers[?(@.name=="b")].name}"#), Some(json!("b")));
    }

    #[test]
    fn bad_expressions_are_rejected_with_a_reason() {
        for bad in [
            "{.a",
            "spec.x",
            "{}",
            "$.a[",
            "{range .items[*]}{.x}{end}",
            "$.a[?@.x ==]",
        ] {
            let error = CompiledPath::compile(bad).unwrap_err();
            assert!(!error.reason.is_empty(), "{bad}");
        }
    }

    #[test]
    fn truthiness() {
        assert!(!is_truthy(None));
        assert!(!is_truthy(Some(&json!(""))));
        assert!(!is_truthy(Some(&json!("False"))));
        assert!(is_truthy(Some(&json!("2024-01-01T00:00:00Z"))));
        assert!(is_truthy(Some(&json!(0))));
    }

    #[test]
    fn deep_or_long_expressions_are_refused_before_the_parser() {
        let deep = format!("{{{}.a{}}}", "[".repeat(200), "]".repeat(200));
        assert!(CompiledPath::compile(&deep).unwrap_err().reason.contains("nest"));
        let filters = format!("{{.a{}}}", "[?(@.b".repeat(40));
        assert!(CompiledPath::compile(&filters).unwrap_err().reason.contains("nest"));
        let long = format!("{{.{}}}", "a".repeat(MAX_JSONPATH_BYTES));
        assert!(CompiledPath::compile(&long).unwrap_err().reason.contains("bytes"));
        assert!(CompiledPath::compile("{.status.conditions[?(@.type==\"Ready\")].status}").is_ok());
    }

    #[test]
    fn leading_names_stop_at_the_first_step_that_is_not_one_name() {
        let names = |expression: &str| {
            CompiledPath::compile(expression)
                .expect("valid")
                .leading_names()
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(names("{.children.svc['x'].y}"), ["children", "svc", "x", "y"]);
        assert_eq!(names("$.children.svc[\"x\"]"), ["children", "svc", "x"]);
        assert_eq!(names("$.lookups[?@.ready]"), ["lookups"]);
        assert_eq!(names("{.children[*].status}"), ["children"]);
        assert_eq!(names("{.children[0]}"), ["children"]);
        assert_eq!(
            names(".metadata.labels.app\\.kubernetes\\.io/name"),
            ["metadata", "labels", "app.kubernetes.io/name"]
        );
    }
}
