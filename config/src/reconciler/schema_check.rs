//! Rendered children checked against their kinds' schemas, each problem located at the template line that wrote
//! the field (`render`, `test` and `validate`; offline only — at run time the apiserver decides).

use serde_json::Value;

use super::plan::child_id;
use super::render::{RenderError, gather_lookups, render_children};
use super::resolved::Reconciler;
use crate::diagnostics::{Diagnostic, DiagnosticCode, SourceLocation};
use crate::object_schema::{KindSchemas, PathSegment, SchemaProblem};
use crate::rule_set::RuleSet;

/// Every schema problem of `children` (rendered by `rule`), as located diagnostics: the template line that
/// writes the field, or the nearest enclosing field the template names (a missing field: the object that lacks
/// it). Children of kinds without a known schema are not checked.
pub fn schema_diagnostics(rule: &Reconciler, children: &[Value], schemas: &KindSchemas) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for object in children {
        let Some(problems) = schemas.check(object) else {
            continue;
        };
        let child = child_id(object).and_then(|id| rule.child(id));
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or("?");
        let what = format!("{} {} {}", text("/apiVersion"), text("/kind"), text("/metadata/name"));
        for problem in problems {
            let (location, source_line, label) = match child {
                Some(child) => {
                    let location = locate(&child.source, child.template.source(), &problem);
                    let source_line = file_line(child, &location);
                    (location, source_line, format!("child `{}` ({what})", child.id))
                }
                None => (rule.source.clone(), None, what.clone()),
            };
            out.push(Diagnostic {
                file: location.file,
                line: location.line,
                column: location.column,
                message: format!("{label}: {problem} (the apiserver would reject this apply)"),
                source_line,
                code: DiagnosticCode::Schema,
            });
        }
    }
    out
}

/// The schema problems of what each Reconciler of `rules` renders for a synthetic parent — every field its kind's
/// schema declares present, no lookup found, no child observed yet — for `ruleplane validate`: a template typo
/// shows without a test case. A rule whose templates cannot render such a parent (a field that is a free-form map
/// key, say) is not checked this way; its test cases are.
pub fn synthetic_parent_diagnostics(rules: &RuleSet, schemas: &KindSchemas) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for rule in rules.reconcilers() {
        let Some(kind) = &rule.kinds.parent else { continue };
        let namespace = kind.namespaced.then_some("default");
        let Some(parent) = schemas.synthetic_object(&kind.api_version, &kind.kind, namespace) else {
            continue;
        };
        let rendered = gather_lookups(rule, &parent, |_, _, _| None, |_, _| Vec::new())
            .and_then(|lookups| render_children(rule, &parent, &lookups));
        match rendered {
            Ok(rendered) => out.extend(schema_diagnostics(rule, &rendered.children, schemas)),
            // Every field of the parent is present: a child without a name has none whatever the parent.
            Err(RenderError::Incomplete { child, field, .. }) => out.extend(incomplete_child(rule, &child, &field)),
            Err(_) => {}
        }
    }
    out
}

/// A child that renders without `field` (`metadata.name`), located at the object the template writes it in.
fn incomplete_child(rule: &Reconciler, id: &str, field: &str) -> Option<Diagnostic> {
    let child = rule.child(id)?;
    let mut path: Vec<PathSegment> = field.split('.').map(|f| PathSegment::Field(f.to_owned())).collect();
    if path.len() == 1 {
        // A top-level field is missing from the object itself: point at the template's first line.
        path.clear();
    }
    let problem = SchemaProblem {
        path,
        message: crate::object_schema::MISSING_FIELD.to_owned(),
    };
    let location = locate(&child.source, child.template.source(), &problem);
    let source_line = file_line(child, &location);
    Some(Diagnostic {
        file: location.file,
        line: location.line,
        column: location.column,
        message: format!(
            "child `{id}`: the template renders no `{field}` (every child needs apiVersion, kind and metadata.name)"
        ),
        source_line,
        code: DiagnosticCode::MissingField,
    })
}

/// The file's line at `location` inside `child`'s template, as the template block holds it (indented by the
/// block's column).
fn file_line(child: &super::resolved::Child, location: &SourceLocation) -> Option<String> {
    child
        .template
        .source()
        .lines()
        .nth(location.line.wrapping_sub(child.source.line))
        .map(|line| format!("{}{line}", " ".repeat(child.source.column.saturating_sub(1))))
}

/// Where in the rule file the template writes the field of `problem`: each field name of its path looked up as
/// a YAML key (`name:`, `"name":`, `- name:`, `{ name:`) from the line of the one before; the last found wins.
/// A template is not YAML until rendered, so this reads the text, which is what the author wrote.
fn locate(start: &SourceLocation, template: &str, problem: &SchemaProblem) -> SourceLocation {
    let lines: Vec<&str> = template.lines().collect();
    let mut from = 0;
    let mut found: Option<(usize, usize)> = None;
    // A missing field is written nowhere: point at the object that lacks it.
    let path = match problem.path.split_last() {
        Some((_, enclosing)) if problem.is_missing_field() => enclosing,
        _ => &problem.path[..],
    };
    for segment in path {
        let PathSegment::Field(name) = segment else { continue };
        let hit = lines
            .iter()
            .enumerate()
            .skip(from)
            .find_map(|(index, line)| key_column(line, name).map(|column| (index, column)));
        match hit {
            Some((index, column)) => {
                found = Some((index, column));
                from = index;
            }
            None => break,
        }
    }
    match found {
        Some((index, column)) => SourceLocation {
            file: start.file.clone(),
            line: start.line + index,
            // The template's own lines start at the block's indentation in the file.
            column: start.column + column,
        },
        None => start.clone(),
    }
}

/// The 0-based column where `line` has `name` as a mapping key, if it does.
fn key_column(line: &str, name: &str) -> Option<usize> {
    for quoted in [name.to_owned(), format!("\"{name}\""), format!("'{name}'")] {
        let mut search = 0;
        while let Some(offset) = line[search..].find(&quoted) {
            let at = search + offset;
            let before = line[..at].chars().last();
            let after = line[at + quoted.len()..].trim_start();
            let starts_key = before.is_none_or(|c| c.is_whitespace() || c == '{' || c == ',');
            if starts_key && after.starts_with(':') {
                return Some(line[..at].chars().count());
            }
            search = at + quoted.len();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules() -> String {
        crate::test_rules::config_map_reconciler(
            "web",
            r#"    - id: deployment
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: { name: "{{metadata.name}}" }
        spec:
          replica: 3
          selector: { matchLabels: { app: web } }
          template:
            metadata: { labels: { app: web } }
            spec:
              containers:
                - image: nginx
                  env:
                    - { name: PORT, value: 8080 }
"#,
        )
    }

    #[test]
    fn problems_point_at_the_template_lines_that_wrote_them() {
        let rule = &crate::test_rules::reconciler(&rules(), "web");
        let parent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shop", "namespace": "a", "uid": "u"}});
        let rendered = crate::render_children(rule, &parent, &serde_json::Map::new()).expect("renders");
        let diagnostics = schema_diagnostics(rule, &rendered.children, &KindSchemas::default());
        let shown: Vec<String> = diagnostics
            .iter()
            .map(|d| format!("{}:{}:{} {}", d.file, d.line, d.column, d.message))
            .collect();
        assert_eq!(
            shown,
            [
                "rules.yaml:13:11 child `deployment` (apps/v1 Deployment shop): spec.replica: field not declared in \
                 schema (the apiserver would reject this apply)",
                "rules.yaml:21:37 child `deployment` (apps/v1 Deployment shop): spec.template.spec.containers[0].env[0].value: \
                 expected a string, got an integer (8080) (the apiserver would reject this apply)",
                "rules.yaml:18:15 child `deployment` (apps/v1 Deployment shop): spec.template.spec.containers[0].name: \
                 required field is missing (the apiserver would reject this apply)",
            ]
        );
        assert!(diagnostics.iter().all(|d| d.code == DiagnosticCode::Schema));
    }

    #[test]
    fn keys_are_found_plain_quoted_in_flow_and_list_items_but_not_inside_values() {
        assert_eq!(key_column("  replicas: 3", "replicas"), Some(2));
        assert_eq!(key_column("  - name: x", "name"), Some(4));
        assert_eq!(key_column("{ name: x, value: 1 }", "value"), Some(11));
        assert_eq!(key_column("  \"value\": 1", "value"), Some(2));
        assert_eq!(key_column("  image: my-name: x", "name"), None);
        assert_eq!(key_column("  hostname: x", "name"), None);
    }

    #[test]
    fn validate_reports_a_child_without_a_name_at_its_metadata() {
        let text = crate::test_rules::config_map_reconciler(
            "web",
            r#"    - id: settings
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          nmae: "{{metadata.name}}-settings"
        data: { a: b }
"#,
        );
        let rules = crate::load_str("rules.yaml", &text).expect("loads: the name is not read at load");
        let diagnostics = synthetic_parent_diagnostics(&rules, &KindSchemas::of_rule_set(&rules));
        let shown: Vec<String> = diagnostics
            .iter()
            .map(|d| format!("{}:{}:{} {}: {}", d.file, d.line, d.column, d.code, d.message))
            .collect();
        assert_eq!(
            shown,
            [
                "rules.yaml:11:9 missing-field: child `settings`: the template renders no `metadata.name` (every child \
              needs apiVersion, kind and metadata.name)"
            ]
        );
        assert_eq!(diagnostics[0].source_line.as_deref(), Some("        metadata:"));
    }
}
