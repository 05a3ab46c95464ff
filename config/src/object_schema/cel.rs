//! CEL validation rules (`x-kubernetes-validations`) evaluated offline: compiled once per schema, evaluated at
//! each schema node the walker visits, failures reported as the apiserver words them.
//!
//! What is not evaluated is skipped, never failed: transition rules (`oldSelf`; there is no old object offline)
//! unless `optionalOldSelf` lets them run with `oldSelf` absent, rules calling a function or using a construct the
//! environment lacks ([`super::cel_functions`]), rules that do not parse here, and an evaluation whose worst-case
//! cost for the object exceeds [`COST_BUDGET`]. Runtime type errors are skipped too: the apiserver type-checks
//! rules when the CRD is created, so on a valid CRD they come from this engine's gaps, not from the object.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kube_cel::cel::common::ast::{Expr, LiteralValue};
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{ExecutionError, IdedExpr, Program, Value as Cel};
use serde_json::Value;

use super::cel_functions::{depth, for_each_child, unsupported, with_environment};
use super::{Checker, PathSegment, SchemaProblem};
use crate::diagnostics::SourceLocation;
use crate::reconciler::RuleWarning;

/// The worst-case cost (roughly: values visited and bytes copied) one rule may have for one object, as the
/// apiserver's per-request CEL budget (10^7) bounds it. A rule whose bound for an object is higher is not evaluated
/// for that object: no evaluation can hang or exhaust memory.
pub const COST_BUDGET: f64 = 1e7;
/// Longer rules are not parsed here (the apiserver allows 100,000 code points; real rules are a few hundred).
const MAX_RULE_LENGTH: usize = 10_000;
/// Deeper expressions are not evaluated: the parser and the interpreter recurse once per level.
const MAX_NESTING: usize = 48;
/// The parsing thread's stack: reserved, touched only as deep as a rule nests.
const PARSER_STACK: usize = 512 << 20;
/// Brackets nested deeper than this are not given to the parser (checked on the text, before parsing).
const MAX_BRACKETS: usize = 24;

/// One rule of a schema node, compiled.
#[derive(Debug)]
pub(super) struct CompiledRule {
    rule: String,
    message: Option<String>,
    field_path: Option<String>,
    reason: Option<String>,
    /// `None`: not evaluated offline (see `skipped`, or a transition rule).
    program: Option<Program>,
    message_program: Option<Program>,
    /// Whether `oldSelf` is bound (absent) when evaluating: `optionalOldSelf` on a transition rule.
    old_self_absent: bool,
    /// Why the rule is not evaluated (a warning), if it is not and it is not a transition rule.
    skipped: Option<String>,
}

/// A rule that is not evaluated offline, and why: `ruleplane validate` warns about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedRule {
    /// `apiVersion kind` of the schema.
    pub kind: String,
    /// Where in the schema the rule sits (`spec.template`; empty: the object).
    pub path: String,
    pub rule: String,
    /// Why: names the missing function or construct.
    pub why: String,
    /// The ResourceDefinition or CRD manifest the schema comes from, when known.
    pub source: Option<SourceLocation>,
}

/// The compiled rules of a set of schemas, by the rule's text as the compact schema keeps it.
#[derive(Clone, Debug, Default)]
pub(super) struct Rules {
    by_key: HashMap<String, Arc<CompiledRule>>,
    pub(super) skipped: Vec<SkippedRule>,
}

impl Rules {
    /// Compiles every rule of a compact schema (not following references: definitions are compiled on their
    /// own). `kind` names the schema in warnings.
    pub(super) fn compile_schema(&mut self, kind: &str, schema: &Value) {
        let mut pending = vec![(schema, String::new())];
        while let Some((node, path)) = pending.pop() {
            for raw in node.get("validations").and_then(Value::as_array).into_iter().flatten() {
                let key = raw.to_string();
                let compiled = self.by_key.entry(key).or_insert_with(|| Arc::new(compile(raw))).clone();
                if let Some(why) = &compiled.skipped {
                    self.skipped.push(SkippedRule {
                        kind: kind.to_owned(),
                        path: path.clone(),
                        rule: compiled.rule.clone(),
                        why: why.clone(),
                        source: None,
                    });
                }
            }
            for (name, property) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
                let sub = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                pending.push((property, sub));
            }
            if let Some(items) = node.get("items") {
                pending.push((items, format!("{path}[*]")));
            }
            if let Some(additional @ Value::Object(_)) = node.get("additionalProperties") {
                pending.push((additional, format!("{path}[*]")));
            }
        }
    }

    /// Gives the skipped rules not yet located the location of the schemas just compiled.
    pub(super) fn locate_skipped(&mut self, source: &SourceLocation) {
        for skipped in self.skipped.iter_mut().filter(|s| s.source.is_none()) {
            skipped.source = Some(source.clone());
        }
    }

    /// The skipped rules as `ruleplane validate` warns about them.
    pub(super) fn warnings(&self) -> Vec<RuleWarning> {
        self.skipped
            .iter()
            .map(|skipped| {
                let SourceLocation { file, line, column } = skipped.source.clone().unwrap_or_default();
                let at = if skipped.path.is_empty() {
                    String::new()
                } else {
                    format!(" at `{}`", skipped.path)
                };
                RuleWarning {
                    file,
                    line,
                    column,
                    code: "cel-rule-skipped",
                    message: format!(
                        "{}: the x-kubernetes-validations rule `{}`{at} is not checked offline: it {} (the \
                         apiserver still checks it)",
                        skipped.kind, skipped.rule, skipped.why
                    ),
                }
            })
            .collect()
    }

    fn get(&self, raw: &Value) -> Option<&CompiledRule> {
        self.by_key.get(&raw.to_string()).map(Arc::as_ref)
    }
}

/// The compiled rules of a snapshot's built-in definitions, compiled the first time they are needed (none today:
/// the apiserver publishes no CEL rules for built-in kinds, but a snapshot that carries some has them evaluated).
pub(super) fn builtin_rules(definitions: &'static HashMap<String, Value>) -> &'static Rules {
    // One entry per snapshot (a few), kept for the process like the snapshots themselves.
    static RULES: Mutex<Vec<(usize, &'static Rules)>> = Mutex::new(Vec::new());
    let key = std::ptr::from_ref(definitions) as usize;
    let mut compiled = RULES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, rules)) = compiled.iter().find(|(k, _)| *k == key) {
        return rules;
    }
    let mut rules = Rules::default();
    for (name, definition) in definitions {
        rules.compile_schema(name, definition);
    }
    let rules: &'static Rules = Box::leak(Box::new(rules));
    compiled.push((key, rules));
    rules
}

/// A rule as written in the schema, compiled (or why it cannot be evaluated offline).
fn compile(raw: &Value) -> CompiledRule {
    let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_owned);
    let rule = text("rule").unwrap_or_default();
    let mut compiled = CompiledRule {
        rule: rule.clone(),
        message: text("message"),
        field_path: text("fieldPath"),
        reason: text("reason"),
        program: None,
        message_program: None,
        old_self_absent: false,
        skipped: None,
    };
    let program = match parse(&rule) {
        Ok(program) => program,
        Err(why) => {
            compiled.skipped = Some(why);
            return compiled;
        }
    };
    if let Some(what) = unsupported(program.expression()) {
        compiled.skipped = Some(format!("uses {what}, which offline evaluation lacks"));
        return compiled;
    }
    if program.references().has_variable("oldSelf") {
        // A transition rule compares with the stored object; offline there is none. With `optionalOldSelf` it
        // also runs on create, `oldSelf` absent, and so it does here.
        if raw.get("optionalOldSelf") != Some(&Value::Bool(true)) {
            return compiled;
        }
        compiled.old_self_absent = true;
    }
    if let Some(expression) = text("messageExpression") {
        // A messageExpression that cannot be evaluated here falls back to `message`, as the apiserver's does
        // when it fails at run time.
        compiled.message_program = parse(&expression)
            .ok()
            .filter(|p| unsupported(p.expression()).is_none());
    }
    compiled.program = Some(program);
    compiled
}

/// Parses a rule within the limits that keep the parser and interpreter off deep recursion.
fn parse(source: &str) -> Result<Program, String> {
    if source.chars().count() > MAX_RULE_LENGTH {
        return Err(format!("is longer than {MAX_RULE_LENGTH} characters"));
    }
    let mut open = 0usize;
    let mut deepest = 0usize;
    for c in source.chars() {
        match c {
            '(' | '[' | '{' => {
                open += 1;
                deepest = deepest.max(open);
            }
            ')' | ']' | '}' => open = open.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_BRACKETS {
        return Err(format!("nests brackets deeper than {MAX_BRACKETS}"));
    }
    // The parser recurses once per operator of a chain (`1+1+…`), so a rule within the length limit may still
    // nest thousands of levels: it is parsed (and, if too deep, dropped) on a thread of its own with room for
    // that. Once per rule, at load time; what comes back is shallow enough for any thread.
    let source = source.to_owned();
    let parsed = std::thread::Builder::new()
        .name("cel-parse".into())
        .stack_size(PARSER_STACK)
        .spawn(move || {
            let program = Program::compile(&source).map_err(|e| format!("does not parse here: {e}"))?;
            if depth(program.expression()) > MAX_NESTING {
                return Err(format!("nests deeper than {MAX_NESTING} levels"));
            }
            Ok(program)
        })
        .map_err(|e| format!("could not be parsed: {e}"))?
        .join();
    parsed.unwrap_or_else(|_| Err("could not be parsed".to_owned()))
}

impl Checker<'_> {
    /// Evaluates the rules of `schema` with `self` bound to `value` (the walker's current node); `root`: the
    /// object itself, whose `apiVersion`, `kind` and `metadata.name`/`generateName` rules may read.
    pub(super) fn check_rules(&mut self, schema: &Value, value: &Value, root: bool) {
        let Some(raw_rules) = schema.get("validations").and_then(Value::as_array) else {
            return;
        };
        if value.is_null() {
            return;
        }
        let mut converted: Option<(Cel, f64)> = None;
        for raw in raw_rules {
            let Some(rule) = self.cel.iter().find_map(|rules| rules.get(raw)) else {
                continue;
            };
            let Some(program) = &rule.program else { continue };
            let (self_value, size) = converted.get_or_insert_with(|| {
                let mut size = 0.0;
                let value = if root {
                    to_cel_root(value, schema, self.definitions, &mut size)
                } else {
                    to_cel(value, schema, self.definitions, 0, &mut size)
                };
                (value, size)
            });
            if cost_bound(program.expression(), *size) > COST_BUDGET {
                continue;
            }
            let Some(message) = evaluate(rule, program, self_value, *size) else {
                continue;
            };
            let mut path = self.path.clone();
            if let Some(relative) = rule.field_path.as_deref() {
                path.extend(parse_field_path(relative).unwrap_or_default());
            }
            let reason = match rule.reason.as_deref() {
                Some("FieldValueForbidden") => "Forbidden",
                Some("FieldValueRequired") => "Required value",
                Some("FieldValueDuplicate") => "Duplicate value",
                _ => "Invalid value",
            };
            self.problems.push(SchemaProblem {
                path,
                message: format!("{reason}: {message}"),
            });
        }
    }
}

/// Runs one rule: `None` when it holds (or cannot be judged here), else the apiserver's message.
fn evaluate(rule: &CompiledRule, program: &Program, value: &Cel, size: f64) -> Option<String> {
    with_environment(|environment| {
        let mut scope = environment.new_inner_scope();
        scope.add_variable_from_value("self", value.clone());
        if rule.old_self_absent {
            let none = Program::compile("optional.none()").ok()?.execute(environment).ok()?;
            scope.add_variable_from_value("oldSelf", none);
        }
        match program.execute(&scope) {
            Ok(Cel::Bool(false)) => {}
            // A non-boolean result: the apiserver refuses such a rule when the CRD is created.
            Ok(_) => return None,
            Err(error) if runtime_failure(&error) => {
                return Some(format!("rule `{}` could not be evaluated: {error}", rule.rule.trim()));
            }
            Err(_) => return None,
        }
        let from_expression = rule
            .message_program
            .as_ref()
            .filter(|p| cost_bound(p.expression(), size) <= COST_BUDGET)
            .and_then(|p| match p.execute(&scope) {
                Ok(Cel::String(text)) if !text.trim().is_empty() && !text.contains('\n') => Some(text.to_string()),
                _ => None,
            });
        Some(
            from_expression
                .or_else(|| rule.message.clone())
                .unwrap_or_else(|| format!("failed rule: {}", rule.rule.trim())),
        )
    })
}

/// Errors that a well-typed rule meets on the object itself, and the apiserver reports too: a field read without
/// `has()`, arithmetic, an index out of range, a function refusing its argument (a malformed quantity, say).
fn runtime_failure(error: &ExecutionError) -> bool {
    matches!(
        error,
        ExecutionError::NoSuchKey(_)
            | ExecutionError::DivisionByZero(_)
            | ExecutionError::RemainderByZero(_)
            | ExecutionError::Overflow(..)
            | ExecutionError::IndexOutOfBounds(_)
            | ExecutionError::FunctionError { .. }
    )
}

/// A `fieldPath` (`.spec.replicas`, `.labels['app.kubernetes.io/name']`, `.items[0]`) as path segments.
fn parse_field_path(text: &str) -> Option<Vec<PathSegment>> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            out.push(PathSegment::Field(after[..end].to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']")?;
            out.push(PathSegment::Field(after[..end].to_owned()));
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            out.push(PathSegment::Index(after[..end].parse().ok()?));
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// The object at the root of a custom resource as its rules see it: its declared fields, `apiVersion`, `kind`,
/// and of `metadata` only `name` and `generateName`.
fn to_cel_root(object: &Value, schema: &Value, definitions: &HashMap<String, Value>, size: &mut f64) -> Cel {
    let mut fields = HashMap::new();
    for (name, value) in object.as_object().into_iter().flatten() {
        let converted = match name.as_str() {
            "apiVersion" | "kind" => to_cel(value, &Value::Null, definitions, 1, size),
            "metadata" => {
                let mut metadata = HashMap::new();
                for key in ["name", "generateName"] {
                    if let Some(text) = value.get(key).filter(|v| v.is_string()) {
                        metadata.insert(Key::from(key), to_cel(text, &Value::Null, definitions, 2, size));
                    }
                }
                Cel::Map(Map::from(metadata))
            }
            _ => match schema.get("properties").and_then(|p| p.get(name)) {
                Some(property) if !value.is_null() => to_cel(value, property, definitions, 1, size),
                _ => continue,
            },
        };
        fields.insert(Key::from(escape(name)), converted);
    }
    *size += 1.0;
    Cel::Map(Map::from(fields))
}

/// A JSON value as a CEL value, typed by its compact schema: declared property names escaped as the apiserver
/// escapes them, `number` fields as doubles, null fields left out (server-side apply leaves them out).
/// `size` accumulates values and bytes (the input of [`cost_bound`]).
fn to_cel(value: &Value, schema: &Value, definitions: &HashMap<String, Value>, depth: usize, size: &mut f64) -> Cel {
    let schema = match schema.get("ref").and_then(Value::as_str) {
        Some(name) if depth < super::MAX_DEPTH => definitions.get(name).unwrap_or(&Value::Null),
        _ => schema,
    };
    *size += 1.0;
    if depth > super::MAX_DEPTH {
        return Cel::Null;
    }
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) if schema.get("type").and_then(Value::as_str) == Some("number") => {
            Cel::Float(n.as_f64().unwrap_or_default())
        }
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(text) => {
            *size += text.len() as f64;
            Cel::String(Arc::new(text.clone()))
        }
        Value::Array(items) => {
            let item_schema = schema.get("items").unwrap_or(&Value::Null);
            Cel::List(Arc::new(
                items
                    .iter()
                    .map(|item| to_cel(item, item_schema, definitions, depth + 1, size))
                    .collect(),
            ))
        }
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let mut map = HashMap::new();
            for (name, field) in fields.iter().filter(|(_, v)| !v.is_null()) {
                *size += name.len() as f64;
                let (key, field_schema) = match (properties.and_then(|p| p.get(name)), additional) {
                    (Some(property), _) => (escape(name), property),
                    // Map keys are data, not field names: not escaped.
                    (None, Some(additional)) => (name.clone(), additional),
                    (None, None) => (name.clone(), &Value::Null),
                };
                map.insert(
                    Key::from(key),
                    to_cel(field, field_schema, definitions, depth + 1, size),
                );
            }
            Cel::Map(Map::from(map))
        }
    }
}

/// A property name as CEL rules reach it: CEL keywords as `__keyword__`, and `__`, `.`, `-`, `/` spelled out
/// (Kubernetes' escaping; a name with other characters is reachable only by index).
fn escape(name: &str) -> String {
    const RESERVED: [&str; 21] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    name.replace("__", "__underscores__")
        .replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__")
}

/// An upper bound of what evaluating `expression` costs when `self` has `size` (values plus bytes): every
/// comprehension multiplies its body by the size of what it ranges over, every call pays for the size of its
/// arguments. Infinite for a call whose output size is not bounded by its inputs' (`lists.range(n)`).
pub(super) fn cost_bound(expression: &IdedExpr, size: f64) -> f64 {
    let mut variables = Vec::new();
    bound(expression, size, &mut variables).cost
}

#[derive(Clone, Copy)]
struct Bound {
    cost: f64,
    size: f64,
}

fn bound<'a>(expression: &'a IdedExpr, self_size: f64, variables: &mut Vec<(&'a str, f64)>) -> Bound {
    match &expression.expr {
        Expr::Literal(literal) => Bound {
            cost: 1.0,
            size: 1.0
                + match literal {
                    LiteralValue::String(text) => text.inner().len() as f64,
                    LiteralValue::Bytes(bytes) => bytes.inner().len() as f64,
                    _ => 0.0,
                },
        },
        Expr::Ident(name) => Bound {
            cost: 1.0,
            size: variables
                .iter()
                .rev()
                .find(|(variable, _)| variable == name)
                .map_or(self_size, |(_, size)| *size),
        },
        Expr::Select(select) => {
            let operand = bound(&select.operand, self_size, variables);
            Bound {
                cost: operand.cost + 1.0,
                size: operand.size,
            }
        }
        Expr::Comprehension(c) => {
            let range = bound(&c.iter_range, self_size, variables);
            let init = bound(&c.accu_init, self_size, variables);
            let count = range.size;
            // Macros' steps grow the accumulator by at most one element per item (`accu + [f(x)]`): its size
            // is bounded by what one step adds, times the items.
            variables.push((&c.iter_var, range.size));
            variables.push((&c.accu_var, init.size));
            let first = bound(&c.loop_step, self_size, variables);
            variables.pop();
            let accumulated = init.size + count * (first.size - init.size).max(0.0);
            variables.push((&c.accu_var, accumulated));
            let condition = bound(&c.loop_cond, self_size, variables);
            let step = bound(&c.loop_step, self_size, variables);
            let result = bound(&c.result, self_size, variables);
            variables.truncate(variables.len() - 2);
            Bound {
                cost: range.cost + init.cost + count * (condition.cost + step.cost + 1.0) + result.cost,
                size: result.size,
            }
        }
        Expr::Call(call) => {
            let mut cost = 1.0;
            let mut sizes = Vec::new();
            let mut children = Vec::new();
            for_each_child(expression, &mut |child| children.push(child));
            for child in children {
                let b = bound(child, self_size, variables);
                cost += b.cost;
                sizes.push(b.size);
            }
            let total: f64 = sizes.iter().sum();
            let size = match call.func_name.as_str() {
                "range" | "repeat" => f64::INFINITY,
                "replace" | "format" => total * total + 1.0,
                "_?_:_" => sizes.iter().skip(1).fold(0.0_f64, |a, b| a.max(*b)),
                "_[_]" | "_[?_]" | "_?._" => sizes.first().copied().unwrap_or(1.0),
                "_+_" | "join" | "reverse" | "sort" | "distinct" | "flatten" | "slice" | "orValue" | "value" | "or"
                | "lowerAscii" | "upperAscii" | "trim" | "substring" | "string" => total + 1.0,
                name if name.starts_with(['_', '!', '-', '@']) => 1.0,
                _ => 2.0 * total + 1.0,
            };
            // Linear work in the arguments' size, a log factor for sorting.
            let work = if call.func_name == "sort" || call.func_name == "isSorted" {
                total * 64.0
            } else {
                total
            };
            Bound {
                cost: cost + work + size.min(f64::MAX),
                size,
            }
        }
        Expr::List(_) | Expr::Map(_) | Expr::Struct(_) | Expr::Unspecified => {
            let mut out = Bound { cost: 1.0, size: 1.0 };
            let mut children = Vec::new();
            for_each_child(expression, &mut |child| children.push(child));
            for child in children {
                let b = bound(child, self_size, variables);
                out.cost += b.cost;
                out.size += b.size;
            }
            out
        }
    }
}

#[cfg(test)]
#[path = "cel_tests.rs"]
mod tests;
