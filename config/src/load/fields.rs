//! Checks shared by every rule kind: positions of embedded texts, templates, JSONPaths, apiVersions, selectors.

use crate::common::{LabelSelector, LabelSelectorOperator};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics, Pos};
use crate::jsonpath::CompiledPath;
use crate::naming::{is_dns_subdomain, is_version_name};
use crate::template::{CompiledTemplate, Partials, TemplateProblem, compile_template_with};
use crate::yaml_tree::{Node, PathStep};

pub(crate) fn key(name: &str) -> PathStep {
    PathStep::Key(name.to_string())
}

pub(crate) fn path(steps: &[&str]) -> Vec<PathStep> {
    steps.iter().map(|s| key(s)).collect()
}

pub(crate) fn with(base: &[PathStep], more: &[PathStep]) -> Vec<PathStep> {
    base.iter().chain(more).cloned().collect()
}

/// Checks and converts one document; `None` when it cannot be typed. A typed rule may still have
/// semantic errors (recorded in `out`): it then takes part in the set-level checks, so those are reported in
/// Maps a (line, column) inside an embedded text (template, JSONPath) to the file.
pub(crate) fn embedded_pos(lines: &[&str], value_pos: Pos, line: usize, column: usize) -> Pos {
    let first_line = lines.get(value_pos.line.saturating_sub(1)).copied().unwrap_or("");
    let opening = first_line.chars().nth(value_pos.column.saturating_sub(1));
    let quote_offset = usize::from(matches!(opening, Some('"' | '\'')));
    if line <= 1 {
        Pos::new(
            value_pos.line,
            value_pos.column + quote_offset + column.saturating_sub(1),
        )
    } else {
        // Block scalars indent every line like the first; the template's columns start after that indent.
        Pos::new(value_pos.line + line - 1, value_pos.column.saturating_sub(1) + column)
    }
}

pub(crate) fn is_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Compiles a template embedded in a rule (`field_path` in `doc`); its problems are reported positioned in the
/// file. `partials`: those of the rule's file, which the template may include.
pub(crate) fn check_embedded_template(
    text: &str,
    doc: &Node,
    field_path: &[PathStep],
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Option<CompiledTemplate> {
    match compile_template_with(text, partials) {
        Ok(template) => Some(template),
        Err(problems) => {
            report_template_problems(text, problems, doc, field_path, lines, out);
            None
        }
    }
}

/// Reports problems found in the template text at `field_path` of `doc`, each positioned in the file.
pub(crate) fn report_template_problems(
    text: &str,
    problems: Vec<TemplateProblem>,
    doc: &Node,
    field_path: &[PathStep],
    lines: &[&str],
    out: &mut FileDiagnostics,
) {
    let value_pos = doc.value_pos_of(field_path);
    let template_lines: Vec<&str> = text.lines().collect();
    for problem in problems {
        // Errors found at the end of input (an unclosed block) are reported on the template's last line
        // rather than on whatever follows the template in the file.
        let (line, column) = if problem.line > template_lines.len().max(1) {
            let last = template_lines.last().copied().unwrap_or("");
            (template_lines.len().max(1), last.chars().count() + 1)
        } else {
            (problem.line, problem.column)
        };
        out.error(
            embedded_pos(lines, value_pos, line, column),
            DiagnosticCode::Template,
            problem.message,
        );
    }
}

pub(crate) fn check_json_path(
    expression: &str,
    doc: &Node,
    field_path: &[PathStep],
    out: &mut FileDiagnostics,
) -> Option<CompiledPath> {
    let error = match CompiledPath::compile(expression) {
        Ok(path) => return Some(path),
        Err(error) => error,
    };
    out.error(
        doc.value_pos_of(field_path),
        DiagnosticCode::Jsonpath,
        error.to_string(),
    );
    None
}

pub(crate) fn check_api_version_format(
    api_version: &str,
    doc: &Node,
    field_path: &[PathStep],
    out: &mut FileDiagnostics,
) {
    let valid = match api_version.split_once('/') {
        Some((group, version)) => {
            is_dns_subdomain(group) && group.contains('.') && is_version_name(version)
                || matches!(group, "apps" | "batch" | "policy" | "autoscaling") && is_version_name(version)
        }
        None => is_version_name(api_version),
    };
    if !valid {
        out.error(
            doc.value_pos_of(field_path),
            DiagnosticCode::Value,
            format!("`{api_version}` is not an apiVersion: expected `group/version` (e.g. `apps/v1`) or `v1`"),
        );
    }
}

pub(crate) fn check_selector(
    selector: &LabelSelector,
    doc: &Node,
    selector_path: &[PathStep],
    out: &mut FileDiagnostics,
) {
    for (index, requirement) in selector.match_expressions.iter().enumerate() {
        let requirement_path = with(selector_path, &[key("matchExpressions"), PathStep::Index(index)]);
        let needs_values = matches!(
            requirement.operator,
            LabelSelectorOperator::In | LabelSelectorOperator::NotIn
        );
        if needs_values && requirement.values.is_empty() {
            out.error(
                doc.pos_of(&with(&requirement_path, &[key("operator")])),
                DiagnosticCode::Value,
                format!(
                    "operator {:?} needs at least one value in `values`",
                    requirement.operator
                ),
            );
        }
        if !needs_values && !requirement.values.is_empty() {
            out.error(
                doc.pos_of(&with(&requirement_path, &[key("values")])),
                DiagnosticCode::Value,
                format!("operator {:?} takes no `values`", requirement.operator),
            );
        }
    }
}
