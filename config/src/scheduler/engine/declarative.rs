//! Ruleplane's declarative plugins' args: NodeLabel scores and NodeValue filters on node values by JSONPath.

// Ruleplane's declarative plugins' args: score (`NodeLabel`) or filter (`NodeValue`) nodes by a value a JSONPath
// selects from the Node (a label, an annotation, any field), through a value table, a shape or a range.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::field::{FieldError, FieldPath};
use super::quantity;
use crate::jsonpath::CompiledPath;

fn node_label_name() -> String {
    "NodeLabel".to_string()
}

fn node_value_name() -> String {
    "NodeValue".to_string()
}

fn one() -> i64 {
    1
}

/// Args of a `NodeLabel` score instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeLabelArgs {
    /// Instance name, unique among the profile's scores (default `NodeLabel`).
    #[serde(default = "node_label_name")]
    pub name: String,
    /// Weight of the score (default 1).
    #[serde(default = "one")]
    pub weight: i64,
    /// JSONPath into the Node, e.g. `{.metadata.labels.tier}` or `.metadata.annotations.example\.com/cpu`.
    pub json_path: String,
    /// Score (0–100) for each value; other values score `defaultScore`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, i64>,
    /// Piecewise-linear map from a numeric value (numbers, numeric strings or quantities such as `500m`) to a
    /// score (0–100): points in increasing value order; below the first and above the last the end scores hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<ValueScorePoint>,
    /// Score (0–100) of nodes without a usable value (default 0).
    #[serde(default)]
    pub default_score: i64,
}

/// A point of a `NodeLabel` shape.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValueScorePoint {
    /// The node value.
    pub value: f64,
    /// The score at that value (0–100).
    pub score: i64,
}

/// Args of a `NodeValue` filter instance: the node must have one of `values`, or a number within `[min, max]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeValueArgs {
    /// Instance name, unique among the profile's filters (default `NodeValue`); it is the plugin name in
    /// verdicts and in "didn't satisfy" messages.
    #[serde(default = "node_value_name")]
    pub name: String,
    /// JSONPath into the Node.
    pub json_path: String,
    /// Accepted values (exclusive with `min`/`max`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Lowest accepted number (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Highest accepted number (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Reason shown for rejected nodes (default: names the path and what was expected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn compile_path(expression: &str, errors: &mut Vec<FieldError>) -> Option<CompiledPath> {
    match CompiledPath::compile(expression) {
        Ok(path) => Some(path),
        Err(error) => {
            errors.push(FieldError::invalid(
                FieldPath::root().key("jsonPath"),
                expression,
                error.reason,
            ));
            None
        }
    }
}

fn check_score(errors: &mut Vec<FieldError>, path: FieldPath, score: i64) {
    if !(0..=100).contains(&score) {
        errors.push(FieldError::invalid(path, score, "not in valid range [0, 100]"));
    }
}

impl NodeLabelArgs {
    /// Checks the args; returns the compiled path.
    pub fn compile(&self) -> Result<CompiledPath, Vec<FieldError>> {
        let mut errors = Vec::new();
        let root = FieldPath::root();
        let path = compile_path(&self.json_path, &mut errors);
        if self.weight < 0 {
            errors.push(FieldError::invalid(
                root.key("weight"),
                self.weight,
                "must not be negative",
            ));
        }
        match (self.values.is_empty(), self.shape.is_empty()) {
            (true, true) => errors.push(FieldError::required(
                root.key("values"),
                "one of values or shape is required",
            )),
            (false, false) => errors.push(FieldError::forbidden(
                root.key("shape"),
                "values and shape are exclusive",
            )),
            _ => {}
        }
        for (value, score) in &self.values {
            check_score(&mut errors, root.key("values").key(value), *score);
        }
        for (i, point) in self.shape.iter().enumerate() {
            let point_path = root.key("shape").index(i);
            if !point.value.is_finite() {
                errors.push(FieldError::invalid(
                    point_path.key("value"),
                    point.value.to_string(),
                    "must be a finite number",
                ));
            } else if i > 0 && self.shape[i - 1].value >= point.value {
                errors.push(FieldError::invalid(
                    point_path.key("value"),
                    point.value,
                    "values must be sorted in increasing order",
                ));
            }
            check_score(&mut errors, point_path.key("score"), point.score);
        }
        check_score(&mut errors, root.key("defaultScore"), self.default_score);
        match path {
            Some(path) if errors.is_empty() => Ok(path),
            _ => Err(errors),
        }
    }

    /// The score (0–100) for a selected value.
    pub fn score(&self, selected: Option<&Value>) -> i64 {
        if !self.values.is_empty() {
            return selected
                .and_then(as_text)
                .and_then(|text| self.values.get(&text).copied())
                .unwrap_or(self.default_score);
        }
        let (Some(number), Some(first), Some(last)) =
            (selected.and_then(as_number), self.shape.first(), self.shape.last())
        else {
            return self.default_score;
        };
        if number <= first.value {
            return first.score;
        }
        if number >= last.value {
            return last.score;
        }
        for pair in self.shape.windows(2) {
            let (low, high) = (pair[0], pair[1]);
            if number <= high.value {
                let fraction = (number - low.value) / (high.value - low.value);
                // Rounded to the nearest integer: the shape is over real numbers, unlike kube-scheduler's
                // integer utilisation shape.
                return (low.score as f64 + (high.score - low.score) as f64 * fraction).round() as i64;
            }
        }
        last.score
    }
}

impl NodeValueArgs {
    /// Checks the args; returns the compiled path.
    pub fn compile(&self) -> Result<CompiledPath, Vec<FieldError>> {
        let mut errors = Vec::new();
        let root = FieldPath::root();
        let path = compile_path(&self.json_path, &mut errors);
        let ranged = self.min.is_some() || self.max.is_some();
        match (self.values.is_empty(), ranged) {
            (true, false) => errors.push(FieldError::required(
                root.key("values"),
                "one of values or min/max is required",
            )),
            (false, true) => errors.push(FieldError::forbidden(
                root.key("min"),
                "values and min/max are exclusive",
            )),
            _ => {}
        }
        for (key, bound) in [("min", self.min), ("max", self.max)] {
            if let Some(bound) = bound
                && !bound.is_finite()
            {
                errors.push(FieldError::invalid(
                    root.key(key),
                    bound.to_string(),
                    "must be a finite number",
                ));
            }
        }
        if let (Some(min), Some(max)) = (self.min, self.max)
            && min > max
        {
            errors.push(FieldError::invalid(
                root.key("max"),
                max,
                format!("must not be less than min ({min})"),
            ));
        }
        match path {
            Some(path) if errors.is_empty() => Ok(path),
            _ => Err(errors),
        }
    }

    /// Whether a selected value passes.
    pub fn accepts(&self, selected: Option<&Value>) -> bool {
        if !self.values.is_empty() {
            return selected
                .and_then(as_text)
                .is_some_and(|text| self.values.contains(&text));
        }
        selected
            .and_then(as_number)
            .is_some_and(|n| self.min.is_none_or(|min| n >= min) && self.max.is_none_or(|max| n <= max))
    }

    /// The reason for rejected nodes.
    pub fn reason(&self) -> String {
        if let Some(reason) = &self.reason {
            return reason.clone();
        }
        if !self.values.is_empty() {
            return format!("node(s) didn't have {} in [{}]", self.json_path, self.values.join(", "));
        }
        let bound = |b: Option<f64>, open: &str| b.map(|v| v.to_string()).unwrap_or_else(|| open.to_string());
        format!(
            "node(s) didn't have {} within [{}, {}]",
            self.json_path,
            bound(self.min, "-inf"),
            bound(self.max, "+inf")
        )
    }
}

/// A scalar as text (strings as they are, numbers and booleans as JSON writes them).
fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A scalar as a number: JSON numbers, numeric strings, and Kubernetes quantities (`500m` = 0.5, `1Ki` = 1024).
fn as_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let text = s.trim();
            match text.parse::<f64>() {
                Ok(n) if n.is_finite() => Some(n),
                Ok(_) => None,
                Err(_) => quantity::parse(text).ok().map(|a| a.nano() as f64 / 1e9),
            }
        }
        _ => None,
    }
}
