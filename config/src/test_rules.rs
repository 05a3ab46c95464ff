//! Small rule sets written inline for unit tests.

use crate::Rule;

/// The rules of `yaml` (panics on an invalid test fixture).
pub(crate) fn rules(yaml: &str) -> Vec<Rule> {
    crate::load_str("rules.yaml", yaml)
        .expect("valid rules")
        .rules()
        .to_vec()
}

/// One ResourceDefinition document ending in `---`, so several concatenate; `extra` continues its `spec`.
pub(crate) fn resource_definition(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: {{ name: {name} }}\n\
         spec: {{ versions: [ {{ name: v1 }} ]{extra} }}\n---\n"
    )
}
