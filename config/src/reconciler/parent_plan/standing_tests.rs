//! Children that stand aside: held by a missing `whenMissing: Wait` lookup, excluded by `includeWhen` (and the
//! children that read an excluded one).

use serde_json::{Map, Value, json};

use super::*;
use crate::reconciler::parent_conditions;
use crate::test_rules::config_map_child as child;

/// `settings` exists while lookup `source` finds its ConfigMap; `endpoint` always.
fn held_rule(when_missing: &str) -> Reconciler {
    let yaml = crate::test_rules::config_map_reconciler(
        "held",
        &[
            child("settings", "settings", "      includeWhen: \"{.lookups.source}\"\n", ""),
            child("endpoint", "endpoint", "", ""),
        ]
        .concat(),
    )
    .replace(
        "  children:\n",
        &format!(
            "  lookups:\n    source: {{ apiVersion: v1, kind: ConfigMap, name: source{when_missing} }}\n  children:\n"
        ),
    );
    crate::test_rules::reconciler(&yaml, "held")
}

fn parent() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"}, "data": {}})
}

fn plan_with(rule: &Reconciler, lookups: &Map<String, Value>, observed: &[Value]) -> ParentPlan {
    let scopes = Scopes {
        parent_namespaced: true,
        child_namespaced: &|_, _| true,
        status: None,
    };
    plan_parent(&PlanInput {
        rule,
        parent: &parent(),
        lookups,
        observed,
        patch_targets: &[],
        scopes: &scopes,
        signer: &crate::provenance::ChildSigner::Unsigned,
        shards: crate::sharding::DEFAULT_SHARDS,
    })
    .expect("plans")
}

fn found(source: Value) -> Map<String, Value> {
    Map::from_iter([("source".to_string(), source)])
}

/// The children as the apiserver holds them after the plan's applies.
fn stored(plan: &ParentPlan) -> Vec<Value> {
    plan.children
        .apply
        .iter()
        .map(|apply| {
            let mut object = apply.object.clone();
            object["metadata"]["uid"] = json!(format!("uid-{}", apply.key.name));
            object
        })
        .collect()
}

fn source_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "source", "namespace": "team-a"}})
}

#[test]
fn a_missing_lookup_that_renders_null_prunes_what_reads_it() {
    let rule = held_rule("");
    let observed = stored(&plan_with(&rule, &found(source_map()), &[]));
    assert_eq!(observed.len(), 2);
    let gone = plan_with(&rule, &found(Value::Null), &observed);
    assert!(gone.held.is_empty());
    let pruned: Vec<&str> = gone.children.prune.iter().map(|key| key.name.as_str()).collect();
    assert_eq!(pruned, ["web-settings"]);
}

#[test]
fn a_missing_lookup_that_waits_holds_every_child_and_prunes_nothing() {
    let rule = held_rule(", whenMissing: Wait");
    let observed = stored(&plan_with(&rule, &found(source_map()), &[]));
    assert_eq!(observed.len(), 2, "found: both children are created");
    let gone = plan_with(&rule, &found(Value::Null), &observed);
    assert_eq!(gone.held, ["source"]);
    assert!(gone.children.apply.is_empty(), "{:?}", gone.children.apply);
    assert!(gone.children.prune.is_empty(), "{:?}", gone.children.prune);
    assert!(gone.children.release.is_empty());
    assert!(gone.desired.is_empty());
    assert_eq!(gone.waiting, ["settings", "endpoint"]);
    assert_eq!(gone.children_after(&rule).len(), 2, "held as they are");
    let [ready, synced] = parent_conditions(&rule, &gone.children_after(&rule), &gone.excluded, &gone.held, None);
    assert!(!ready.status.holds());
    assert_eq!(ready.reason, "LookupMissing");
    assert!(ready.message.contains("`source`"), "{}", ready.message);
    assert!(synced.status.holds(), "nothing failed: {synced:?}");
    // A parent seen first while its lookup is missing gets nothing either.
    let new = plan_with(&rule, &found(Value::Null), &[]);
    assert!(new.children.apply.is_empty() && new.held == ["source"]);
    // Back: applied as rendered again.
    let back = plan_with(&rule, &found(source_map()), &observed);
    assert!(back.held.is_empty());
    assert_eq!(back.children.unchanged, 2);
}

#[test]
fn a_selector_lookup_that_waits_is_missing_while_it_matches_nothing() {
    let yaml = crate::test_rules::config_map_reconciler("held", &child("endpoint", "endpoint", "", "")).replace(
        "  children:\n",
        "  lookups:\n    peers: { apiVersion: v1, kind: Service, selector: { matchLabels: { a: b } }, whenMissing: Wait }\n  children:\n",
    );
    let rule = crate::test_rules::reconciler(&yaml, "held");
    let none = Map::from_iter([("peers".to_string(), json!([]))]);
    assert_eq!(plan_with(&rule, &none, &[]).held, ["peers"]);
    let one = Map::from_iter([("peers".to_string(), json!([{"metadata": {"name": "x"}}]))]);
    assert!(plan_with(&rule, &one, &[]).held.is_empty());
}

/// `debug` exists while the parent says so; `view` reads it; `tail` reads `view`.
fn excluded_rule() -> Reconciler {
    let yaml = crate::test_rules::config_map_reconciler(
        "excluded",
        &[
            child("debug", "debug", "      includeWhen: \"{.data.debug}\"\n", ""),
            child("view", "view", "", r#"{ of: "{{children.debug.metadata.name}}" }"#),
            child("tail", "tail", "", r#"{ of: "{{children.view.metadata.name}}" }"#),
        ]
        .concat(),
    );
    crate::test_rules::reconciler(&yaml, "excluded")
}

fn parent_with(data: Value) -> Value {
    let mut parent = parent();
    parent["data"] = data;
    parent
}

fn plan_for(rule: &Reconciler, parent: &Value, observed: &[Value]) -> ParentPlan {
    crate::test_rules::with_plan_input(rule, parent, observed, |input| plan_parent(input).expect("plans"))
}

#[test]
fn the_children_that_read_an_excluded_child_are_excluded_with_it_whether_or_not_it_exists() {
    let rule = excluded_rule();
    let on = parent_with(json!({"debug": "yes"}));
    // Created one after the other, each once the child it reads exists.
    let mut observed = stored(&plan_for(&rule, &on, &[]));
    observed.extend(stored(&plan_for(&rule, &on, &observed)));
    observed.extend(stored(&plan_for(&rule, &on, &observed)));
    assert_eq!(observed.len(), 3);
    let off = parent_with(json!({}));
    // Still there (being pruned this round): its readers do not render from it; they go too.
    let pruning = plan_for(&rule, &off, &observed);
    assert_eq!(pruning.excluded, ["debug", "view", "tail"]);
    assert!(pruning.waiting.is_empty());
    assert!(pruning.children.apply.is_empty());
    let mut pruned: Vec<&str> = pruning.children.prune.iter().map(|key| key.name.as_str()).collect();
    pruned.sort_unstable();
    assert_eq!(pruned, ["web-debug", "web-tail", "web-view"]);
    // Gone: the same, not waiting for it.
    let gone = plan_for(&rule, &off, &[]);
    assert_eq!(gone.excluded, ["debug", "view", "tail"]);
    assert!(gone.waiting.is_empty() && gone.desired.is_empty());
    let [ready, _] = parent_conditions(&rule, &gone.children_after(&rule), &gone.excluded, &gone.held, None);
    assert!(ready.status.holds(), "excluded children do not count: {ready:?}");
}
