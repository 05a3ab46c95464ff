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

/// A Reconciler rule document named `name` on ConfigMaps, its `children:` list given as YAML items indented by
/// four spaces (six header lines: fixtures that count template lines can rely on that).
pub(crate) fn config_map_reconciler(name: &str, children: &str) -> String {
    format!(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: {{ name: {name} }}\nspec:\n  \
         for: {{ apiVersion: v1, kind: ConfigMap }}\n  children:\n{children}"
    )
}

/// The Reconciler named `name` in `yaml` (panics on an invalid test fixture).
pub(crate) fn reconciler(yaml: &str, name: &str) -> crate::Reconciler {
    match crate::load_str("rules.yaml", yaml).expect("valid rules").get(name) {
        Some(Rule::Reconciler(rule)) => rule.clone(),
        _ => panic!("no Reconciler `{name}` in the fixture"),
    }
}

/// Runs `decide` on the plan input of `rule` for `parent` and its `observed` objects as the offline tools see them
/// in tests: every kind namespaced, no lookup found, nothing signed.
pub(crate) fn with_plan_input<T>(
    rule: &crate::Reconciler,
    parent: &serde_json::Value,
    observed: &[serde_json::Value],
    decide: impl FnOnce(&crate::PlanInput) -> T,
) -> T {
    let scopes = crate::Scopes {
        parent_namespaced: true,
        child_namespaced: &|_, _| true,
        status: None,
    };
    decide(&crate::PlanInput {
        rule,
        parent,
        lookups: &serde_json::Map::new(),
        observed,
        patch_targets: &[],
        scopes: &scopes,
        signer: &crate::provenance::ChildSigner::Unsigned,
        shards: crate::sharding::DEFAULT_SHARDS,
    })
}

/// One `children:` item: a ConfigMap named `<parent>-<suffix>`, with `options` (the item's other fields, each line
/// indented by six spaces) and `data` (a flow mapping, or empty).
pub(crate) fn config_map_child(id: &str, suffix: &str, options: &str, data: &str) -> String {
    let data = if data.is_empty() {
        String::new()
    } else {
        format!("        data: {data}\n")
    };
    format!(
        "    - id: {id}\n{options}      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        \
         metadata: {{ name: \"{{{{metadata.name}}}}-{suffix}\" }}\n{data}"
    )
}
