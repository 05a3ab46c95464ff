//! Arbitrary parent objects (and lookups) rendered by fixed, valid Reconcilers: rendering must return
//! `Ok` or a `RenderError`, never panic.
//!
//! The input is JSON or YAML. If it is a mapping with a `parent` key (the format of `tests/rules/render/*.yaml`),
//! `parent` is the parent object, `lookups` the gathered lookups and `rule` may name a Reconciler of
//! `examples/`; otherwise the whole input is the parent of the built-in three-child Reconciler.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use ruleplane_config::{Rule, RuleSet, compute_status, load_str, render_children, render_finalize_children};
use serde_json::{Map, Value};

/// A typical Reconciler: a Deployment, a Service and a ConfigMap, with lookups and helpers.
const WEB_APP: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: web-app }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  lookups:
    defaults: { apiVersion: v1, kind: ConfigMap, name: "{{metadata.name}}-defaults", jsonPath: "{.data}" }
    tls: { apiVersion: v1, kind: Secret, name: "{{metadata.name}}-tls", jsonPath: "{.metadata.name}" }
  children:
    - id: deployment
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {{json metadata.name}}
          labels: { app: {{json metadata.name}} }
        spec:
          replicas: {{json (default data.replicas (default lookups.defaults.replicas 1))}}
          selector: { matchLabels: { app: {{json metadata.name}} } }
          template:
            metadata:
              labels: { app: {{json metadata.name}} }
              annotations: { config-sha256: {{json (sha256 (json data))}} }
            spec:
              containers:
                - name: web
                  image: {{json (default data.image "nginx:1.27")}}
                  {{#if data.env}}
                  env:
                    {{#each data.env}}
                    - { name: {{json @key}}, value: {{json this}} }
                    {{/each}}
                  {{/if}}
                  ports: [ { containerPort: 8080 } ]
      readyWhen: '{.status.conditions[?(@.type=="Available")].status}'
    - id: service
      template: |
        apiVersion: v1
        kind: Service
        metadata: { name: {{json metadata.name}} }
        spec:
          selector: { app: {{json metadata.name}} }
          ports: [ { port: 80, targetPort: 8080 } ]
    - id: settings
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{trunc (lower metadata.name) 50}}-settings" }
        data:
          tls: {{json (default lookups.tls "none")}}
          encoded: {{json (b64enc (json data))}}
  finalize:
    children:
      - id: farewell
        template: |
          apiVersion: v1
          kind: ConfigMap
          metadata: { name: "{{metadata.name}}-farewell" }
"#;

const EXAMPLES: [(&str, &str); 2] = [
    ("crontab.yaml", include_str!("../../../examples/crontab.yaml")),
    ("pod2.yaml", include_str!("../../../examples/pod2.yaml")),
];

static RULES: LazyLock<Vec<RuleSet>> = LazyLock::new(|| {
    let mut sets = vec![load_str("web-app.yaml", WEB_APP).expect("the built-in rule is valid")];
    for (name, text) in EXAMPLES {
        sets.push(load_str(name, text).expect("the examples are valid"));
    }
    sets
});

fn reconciler(name: Option<&str>) -> &'static ruleplane_config::ReconcilerRule {
    let found = name.and_then(|name| RULES.iter().find_map(|set| set.get(name)));
    match found.unwrap_or(&RULES[0].rules()[0]) {
        Rule::Reconciler(rule) => rule,
        _ => match &RULES[0].rules()[0] {
            Rule::Reconciler(rule) => rule,
            _ => unreachable!("WEB_APP is a Reconciler"),
        },
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let input: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) => match serde_saphyr::from_str(text) {
            Ok(value) => value,
            Err(_) => return,
        },
    };
    let (rule, parent, lookups) = match input.get("parent") {
        Some(parent) => (
            reconciler(input.get("rule").and_then(Value::as_str)),
            parent.clone(),
            input
                .get("lookups")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        ),
        None => (reconciler(None), input.clone(), Map::new()),
    };
    let _ = render_children(rule, &parent, &lookups);
    let _ = render_finalize_children(rule, &parent, &lookups);
    if let Some(observed) = input.get("observedChildren").and_then(Value::as_object) {
        let _ = compute_status(rule, &parent, observed, &lookups);
        for child in &rule.spec.children {
            if let Some(object) = observed.get(&child.id) {
                let _ = ruleplane_config::child_ready(child, object);
            }
        }
    }
});
