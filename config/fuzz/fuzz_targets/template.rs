//! The template text itself comes from the input: it is embedded as the only child of a Reconciler, loaded
//! with `load_str` (which checks the template) and, when it loads, rendered against a fixed parent.
//! Neither step may panic; rendering is bounded by `MAX_RENDER_TIME` and `MAX_RENDERED_BYTES`.
#![no_main]

use std::fmt::Write;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use ruleplane_config::{Rule, load_str, render_children};
use serde_json::{Map, Value, json};

static PARENT: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "fuzz", "namespace": "default", "uid": "00000000-0000-4000-8000-000000000000",
                      "labels": { "app": "fuzz" } },
        "data": { "image": "nginx:1.27", "replicas": 3, "list": ["a", "b", "c"], "nested": { "x": { "y": true } },
                  "text": "line one\nline \"two\"\n", "empty": "", "zero": 0 }
    })
});

static LOOKUPS: LazyLock<Map<String, Value>> = LazyLock::new(|| {
    let mut lookups = Map::new();
    lookups.insert("defaults".into(), json!({ "replicas": "2", "tier": "web" }));
    lookups
});

fuzz_target!(|data: &[u8]| {
    let Ok(template) = std::str::from_utf8(data) else {
        return;
    };
    let mut text = String::from(
        "apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: fuzz }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  lookups:
    defaults: { apiVersion: v1, kind: ConfigMap, name: \"{{metadata.name}}-defaults\", jsonPath: \"{.data}\" }
  children:
    - id: child
      template: |
",
    );
    for line in template.lines() {
        let _ = writeln!(text, "        {line}");
    }
    let Ok(rules) = load_str("fuzz.yaml", &text) else {
        return;
    };
    let Some(Rule::Reconciler(rule)) = rules.rules().first() else {
        return;
    };
    let _ = render_children(rule, &PARENT, &LOOKUPS);
});
