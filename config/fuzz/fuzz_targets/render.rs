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
const WEB_APP: &str = include_str!("../../../tests/rules/valid/web-app.yaml");

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

fn reconciler(name: Option<&str>) -> &'static ruleplane_config::Reconciler {
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
        for child in rule.children() {
            if let Some(object) = observed.get(&child.id) {
                let _ = ruleplane_config::child_ready(child, object);
            }
        }
    }
});
