//! What `ruleplane validate` warns about in a valid Reconciler: forms that let cluster data shape what is
//! written, or carry Secret data into places many can read.

use serde::Serialize;

use super::resolved::Reconciler;
use crate::diagnostics::SourceLocation;
use crate::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// A warning about a valid rule: it loads and runs, but deserves a second look.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleWarning {
    /// Where in the rule file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Stable category: `raw-output`, `secret-in-status`, `managed-by-overwritten`.
    pub code: &'static str,
    /// What to look at.
    pub message: String,
}

impl std::fmt::Display for RuleWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "warning[{}]: {}:{}:{}: {}",
            self.code, self.file, self.line, self.column, self.message
        )
    }
}

/// The warnings of one Reconciler.
pub fn reconciler_warnings(rule: &Reconciler) -> Vec<RuleWarning> {
    let mut warnings = Vec::new();
    for child in rule.children().iter().chain(rule.finalize_children()) {
        for (line, column) in child.template.raw_outputs() {
            let at = &child.source;
            warnings.push(RuleWarning {
                file: at.file.clone(),
                line: at.line + line - 1,
                column: at.column + column - 1,
                code: "raw-output",
                message: format!(
                    "child `{}`: `{{{{{{…}}}}}}` writes raw text: a value read from the cluster could add keys or \
                     documents there; use `{{{{json …}}}}` unless the rule author controls the value",
                    child.id
                ),
            });
        }
    }
    for child in rule.children().iter().chain(rule.finalize_children()) {
        warnings.extend(managed_by_set(child));
    }
    let secrets: Vec<&str> = rule
        .lookups()
        .iter()
        .filter(|lookup| lookup.spec.api_version == "v1" && lookup.spec.kind == "Secret")
        .map(|lookup| lookup.name.as_str())
        .collect();
    for field in rule.status_fields() {
        let source = field.source();
        if let Some(secret) = secrets.iter().find(|name| source.contains(&format!("lookups.{name}"))) {
            let SourceLocation { file, line, column } = rule.source.clone();
            warnings.push(RuleWarning {
                file,
                line,
                column,
                code: "secret-in-status",
                message: format!(
                    "status field `{}` reads the Secret lookup `{secret}`: whoever can read the parent sees it",
                    field.name
                ),
            });
        }
    }
    warnings
}

/// A template that sets the `app.kubernetes.io/managed-by` label (to `Helm`, say): Ruleplane writes its own value
/// there on every child it owns, so the template's is overwritten.
fn managed_by_set(child: &super::resolved::Child) -> Option<RuleWarning> {
    let (index, column) = child.template.source().lines().enumerate().find_map(|(index, line)| {
        let at = line.find(MANAGED_BY_LABEL)?;
        let after = line[at + MANAGED_BY_LABEL.len()..].trim_start_matches(['"', '\'']);
        after.trim_start().starts_with(':').then_some((index, at))
    })?;
    let at = &child.source;
    Some(RuleWarning {
        file: at.file.clone(),
        line: at.line + index,
        column: at.column + column,
        code: "managed-by-overwritten",
        message: format!(
            "child `{}` sets the label `{MANAGED_BY_LABEL}`, which Ruleplane sets to `{MANAGED_BY_VALUE}` on every \
             child it owns: the template's value is overwritten",
            child.id
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rule, load_str};

    #[test]
    fn raw_output_and_secrets_in_status_are_warned_about_with_their_place() {
        let rules = load_str(
            "rules.yaml",
            r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: apps.test.dev }
spec:
  group: test.dev
  names: { kind: App, plural: apps }
  versions: [ { name: v1, subresources: { status: {} } } ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: app }
spec:
  for: { apiVersion: test.dev/v1, kind: App }
  lookups:
    password: { apiVersion: v1, kind: Secret, name: db, jsonPath: "{.data.password}" }
  children:
    - id: config
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}" }
        data: {{{spec.data}}}
  status:
    password: "{.lookups.password}"
    hint: { template: "{{trunc lookups.password 2}}…" }
"#,
        )
        .expect("loads");
        let Some(Rule::Reconciler(rule)) = rules.get("app") else {
            panic!("no rule")
        };
        let warnings = reconciler_warnings(rule);
        let codes: Vec<&str> = warnings.iter().map(|w| w.code).collect();
        assert_eq!(
            codes,
            ["raw-output", "secret-in-status", "secret-in-status"],
            "a status template reading the Secret is warned about too"
        );
        assert_eq!((warnings[0].line, warnings[0].column), (22, 15), "{}", warnings[0]);
    }

    #[test]
    fn a_template_setting_the_managed_by_label_is_warned_about_at_its_line() {
        let text = crate::test_rules::config_map_reconciler(
            "web",
            r#"    - id: settings
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: "{{metadata.name}}"
          labels:
            "app.kubernetes.io/managed-by": Helm
"#,
        );
        let rule = crate::test_rules::reconciler(&text, "web");
        let warnings = reconciler_warnings(&rule);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].code, "managed-by-overwritten");
        assert_eq!((warnings[0].line, warnings[0].column), (14, 14), "{}", warnings[0]);
    }
}
