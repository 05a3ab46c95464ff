//! The structure property: any text in every user-data string of a parent leaves each rendered child with the
//! kind, namespace and key paths that a benign text gives (or rendering fails). Rules: the adversarial fixture
//! and the examples' Reconcilers (not forged-namespace.yaml: its `chosen` child lets data pick the namespace on
//! purpose).
#![no_main]

use std::collections::BTreeSet;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use ruleplane_config::{RuleSet, load_str, render_children};
use serde_json::{Map, Value, json};

static RULES: LazyLock<Vec<(RuleSet, Value)>> = LazyLock::new(|| {
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "tenant-a", "uid": "u-1", "labels": {"team": "t"}},
        "data": {"team": "t", "note": "n", "image": "i", "owner": "o"}});
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "nightly", "namespace": "team-a", "uid": "u-1"},
        "spec": {"cronSpec": "* * * * */5", "image": "busybox", "replicas": 2}});
    let pod2 = json!({"apiVersion": "samples.ruleplane.dev/v1alpha1", "kind": "Pod2",
        "metadata": {"name": "p", "namespace": "team-a", "uid": "u-1"},
        "spec": {"image": "nginx", "command": ["sh", "-c", "echo"], "env": {"GREETING": "hello"}}});
    [
        ("injection.yaml", include_str!("../../../tests/rules/adversarial/injection.yaml"), configmap.clone()),
        ("team-card.yaml", include_str!("../../../examples/team-card.yaml"), configmap),
        ("crontab.yaml", include_str!("../../../examples/crontab.yaml"), crontab),
        ("pod2.yaml", include_str!("../../../examples/pod2.yaml"), pod2),
    ]
    .into_iter()
    .map(|(name, text, parent)| (load_str(name, text).expect("the fixtures are valid"), parent))
    .collect()
});

/// `value` with every string replaced by `text`.
fn filled(value: &Value, text: &str) -> Value {
    match value {
        Value::String(_) => Value::String(text.into()),
        Value::Array(items) => items.iter().map(|item| filled(item, text)).collect(),
        Value::Object(fields) => fields.iter().map(|(k, v)| (k.clone(), filled(v, text))).collect(),
        other => other.clone(),
    }
}

/// The parent with `text` in every string but its kind and identity.
fn parent_with(parent: &Value, text: &str) -> Value {
    let mut out = parent.clone();
    out["spec"] = filled(&parent["spec"], text);
    out["data"] = filled(&parent["data"], text);
    out["metadata"]["labels"] = filled(&parent["metadata"]["labels"], text);
    out
}

fn paths(value: &Value, prefix: String, out: &mut BTreeSet<String>) {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(fields) => fields.iter().map(|(k, v)| (format!("{prefix}.{k}"), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (format!("{prefix}[{i}]"), v)).collect(),
        _ => return,
    };
    for (path, child) in children {
        out.insert(path.clone());
        paths(child, path, out);
    }
}

fn shape(children: &[Value]) -> Vec<(Value, Value, Value, BTreeSet<String>)> {
    children
        .iter()
        .map(|child| {
            let mut keys = BTreeSet::new();
            paths(child, String::new(), &mut keys);
            (child["apiVersion"].clone(), child["kind"].clone(), child["metadata"]["namespace"].clone(), keys)
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if text.is_empty() {
        return;
    }
    for (rules, parent) in RULES.iter() {
        for rule in rules.reconcilers() {
            let lookups: Map<String, Value> = rule.lookups().iter().map(|l| (l.name.clone(), Value::Null)).collect();
            let Ok(benign) = render_children(rule, &parent_with(parent, "benign"), &lookups) else { continue };
            if let Ok(hostile) = render_children(rule, &parent_with(parent, text), &lookups) {
                assert_eq!(shape(&hostile.children), shape(&benign.children), "{text:?} changed the structure");
            }
        }
    }
});
