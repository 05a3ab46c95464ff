//! `plan_parent` on collection children (`forEach`, `count`): one object per item, items added and removed,
//! duplicates, the size cap, per-item `includeWhen`, and `children.<id>` as a list for status and other children.

use serde_json::{Value, json};

use super::*;
use crate::reconciler::parent_conditions;
use crate::test_rules::config_map_child as child;

const ZONES: &str = "      forEach:\n        - zone: '{.spec.zones}'\n";

/// `zones`: one ConfigMap per zone, ready once it has a uid; `summary` reads them all; status lists their names.
fn rules(zones_options: &str) -> String {
    let children = [
        child(
            "zones",
            "{{zone}}",
            &format!("{zones_options}      readyWhen: '{{.metadata.uid}}'\n"),
            r#"{ zone: "{{zone}}" }"#,
        ),
        child("summary", "summary", "", r#"{ zones: "{{len children.zones}}" }"#),
    ];
    // A declared parent kind: only its status is the rule's to write.
    let reconciler = crate::test_rules::config_map_reconciler("shop", &children.concat()).replace(
        "for: { apiVersion: v1, kind: ConfigMap }",
        "for: { apiVersion: example.com/v1, kind: CronTab }",
    );
    crate::test_rules::resource_definition("cron-tab.example.com", "")
        + &reconciler
        + "  status:\n    zones: '{.children.zones[*].metadata.name}'\n"
}

fn rule(zones_options: &str) -> Reconciler {
    crate::test_rules::reconciler(&rules(zones_options), "shop")
}

fn parent(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"}, "spec": spec})
}

fn try_plan(rule: &Reconciler, parent: &Value, observed: &[Value]) -> Result<ParentPlan, RenderError> {
    crate::test_rules::with_plan_input(rule, parent, observed, plan_parent)
}

fn plan(rule: &Reconciler, parent: &Value, observed: &[Value]) -> ParentPlan {
    try_plan(rule, parent, observed).expect("plans")
}

/// What the apiserver holds after applying `object`: it plus a uid.
fn stored(object: &Value) -> Value {
    let mut object = object.clone();
    object["metadata"]["uid"] = json!(format!("uid-of-{}", object["metadata"]["name"].as_str().unwrap()));
    object
}

fn desired_names(plan: &ParentPlan) -> Vec<&str> {
    plan.desired
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect()
}

fn keys(values: &[ObjectKey]) -> Vec<&str> {
    values.iter().map(|key| key.name.as_str()).collect()
}

/// What the cluster holds after a first plan's applies (each with its fingerprint annotation).
fn apply_all(plan: &ParentPlan) -> Vec<Value> {
    plan.children.apply.iter().map(|apply| stored(&apply.object)).collect()
}

#[test]
fn each_item_renders_one_child_bound_by_its_name_in_order() {
    let plan = plan(&rule(ZONES), &parent(json!({"zones": ["a", "b"]})), &[]);
    assert_eq!(desired_names(&plan), ["web-a", "web-b"]);
    assert_eq!(plan.desired[1]["data"]["zone"], "b");
    assert!(plan.children.apply.iter().all(|apply| apply.created));
    assert_eq!(
        plan.projected_status["zones"],
        json!(["web-a", "web-b"]),
        "status sees the list"
    );
    assert!(plan.excluded.is_empty());
}

#[test]
fn an_added_item_is_created_and_a_removed_item_pruned_though_its_child_id_remains() {
    let rule = rule(ZONES);
    let first = plan(&rule, &parent(json!({"zones": ["a", "b"]})), &[]);
    let observed = apply_all(&first);
    let changed = plan(&rule, &parent(json!({"zones": ["b", "c"]})), &observed);
    let created: Vec<&str> = changed.children.apply.iter().map(|a| a.key.name.as_str()).collect();
    assert_eq!(created, ["web-c"]);
    assert_eq!(keys(&changed.children.prune), ["web-a"]);
    assert!(changed.children.release.is_empty());
    assert_eq!(
        zone_names(&changed, &rule),
        ["web-b", "web-c"],
        "children_after keeps the collection as a list"
    );
}

/// The names of the `zones` collection's objects once the plan is carried out, in list order.
fn zone_names(plan: &ParentPlan, rule: &Reconciler) -> Vec<String> {
    let after = plan.children_after(rule);
    after["zones"]
        .as_array()
        .expect("a collection is a list")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn reordered_items_change_nothing() {
    let rule = rule(ZONES);
    let first = plan(&rule, &parent(json!({"zones": ["a", "b"]})), &[]);
    let observed = apply_all(&first);
    let reordered = plan(&rule, &parent(json!({"zones": ["b", "a"]})), &observed);
    assert!(reordered.children.apply.iter().all(|a| a.key.name == "web-summary"));
    assert!(reordered.children.prune.is_empty());
    assert_eq!(
        zone_names(&reordered, &rule),
        ["web-b", "web-a"],
        "the list follows the items, not the cluster's order"
    );
}

#[test]
fn no_items_prune_every_item_and_the_list_stays_empty() {
    let rule = rule(ZONES);
    let first = plan(&rule, &parent(json!({"zones": ["a"]})), &[]);
    let observed = apply_all(&first);
    let none = plan(&rule, &parent(json!({})), &observed);
    assert_eq!(keys(&none.children.prune), ["web-a"]);
    assert_eq!(none.children_after(&rule)["zones"], json!([]));
}

#[test]
fn two_items_with_the_same_name_are_a_render_error_naming_it() {
    let error = try_plan(&rule(ZONES), &parent(json!({"zones": ["a", "b", "a"]})), &[]).unwrap_err();
    assert_eq!(error.category(), "collection");
    assert!(error.to_string().contains("`web-a`"), "{error}");
    assert!(error.to_string().starts_with("rules.yaml:"), "located: {error}");
}

#[test]
fn more_items_than_max_items_is_a_render_error() {
    let rule = rule(&format!("{ZONES}      maxItems: 2\n"));
    assert!(try_plan(&rule, &parent(json!({"zones": ["a", "b"]})), &[]).is_ok());
    let error = try_plan(&rule, &parent(json!({"zones": ["a", "b", "c"]})), &[]).unwrap_err();
    assert!(error.to_string().contains("3 items, more than the 2"), "{error}");
}

#[test]
fn a_path_yielding_no_list_is_a_render_error() {
    let error = try_plan(&rule(ZONES), &parent(json!({"zones": "a"})), &[]).unwrap_err();
    assert!(error.to_string().contains("must yield a list, not a string"), "{error}");
}

#[test]
fn several_entries_render_the_cartesian_product_first_entry_outermost() {
    let options = "      forEach:\n        - zone: '{.spec.zones}'\n        - size: '{.spec.sizes}'\n";
    let children = child(
        "cells",
        "{{zone}}-{{size}}",
        options,
        r#"{ at: "{{zone_index}}/{{size_index}}" }"#,
    );
    let rule = crate::test_rules::reconciler(&crate::test_rules::config_map_reconciler("shop", &children), "shop");
    let plan = plan(&rule, &parent(json!({"zones": ["a", "b"], "sizes": ["s", "l"]})), &[]);
    assert_eq!(desired_names(&plan), ["web-a-s", "web-a-l", "web-b-s", "web-b-l"]);
    assert_eq!(plan.desired[2]["data"]["at"], "1/0");
    let capped = crate::test_rules::reconciler(
        &crate::test_rules::config_map_reconciler("shop", &format!("{children}      maxItems: 3\n")),
        "shop",
    );
    let error = try_plan(&capped, &parent(json!({"zones": ["a", "b"], "sizes": ["s", "l"]})), &[]).unwrap_err();
    assert!(error.to_string().contains("2 × 2 (= 4) items"), "{error}");
}

#[test]
fn count_renders_copies_bound_by_count_index_and_fewer_prune_the_last() {
    let children = child("copies", "{{count_index}}", "      count: '{.spec.replicas}'\n", "");
    let rule = crate::test_rules::reconciler(&crate::test_rules::config_map_reconciler("shop", &children), "shop");
    let three = plan(&rule, &parent(json!({"replicas": 3})), &[]);
    assert_eq!(desired_names(&three), ["web-0", "web-1", "web-2"]);
    let one = plan(&rule, &parent(json!({"replicas": 1})), &apply_all(&three));
    assert_eq!(keys(&one.children.prune), ["web-1", "web-2"]);
    assert_eq!(one.children.unchanged, 1);
    let negative = try_plan(&rule, &parent(json!({"replicas": -1})), &[]).unwrap_err();
    assert!(negative.to_string().contains("non-negative integer"), "{negative}");
}

#[test]
fn include_when_is_decided_per_item_and_an_item_no_longer_included_is_pruned() {
    let options = "      forEach:\n        - port: '{.spec.ports}'\n      includeWhen: '{.port.enabled}'\n";
    let children = child("ports", "{{port.name}}", options, r#"{ port: "{{port.number}}" }"#);
    let rule = crate::test_rules::reconciler(&crate::test_rules::config_map_reconciler("shop", &children), "shop");
    let ports = |debug: bool| {
        parent(json!({"ports": [
            {"name": "http", "number": 80, "enabled": true},
            {"name": "debug", "number": 9000, "enabled": debug},
        ]}))
    };
    let both = plan(&rule, &ports(true), &[]);
    assert_eq!(desired_names(&both), ["web-http", "web-debug"]);
    let fewer = plan(&rule, &ports(false), &apply_all(&both));
    assert_eq!(desired_names(&fewer), ["web-http"]);
    assert_eq!(keys(&fewer.children.prune), ["web-debug"]);
    assert!(fewer.excluded.is_empty(), "the collection itself is not excluded");
}

#[test]
fn a_child_reading_a_collection_waits_until_every_item_exists_and_is_ready() {
    let rule = rule(ZONES);
    let parent = parent(json!({"zones": ["a", "b"]}));
    let first = plan(&rule, &parent, &[]);
    assert_eq!(first.waiting, ["summary"]);
    let only_a = stored(&first.children.apply[0].object);
    let partial = plan(&rule, &parent, std::slice::from_ref(&only_a));
    assert_eq!(partial.waiting, ["summary"], "web-b does not exist yet");
    let mut not_ready = first.children.apply[1].object.clone();
    not_ready["metadata"]["uid"] = Value::Null;
    let unready = plan(&rule, &parent, &[only_a.clone(), not_ready]);
    assert_eq!(unready.waiting, ["summary"], "web-b is not ready");
    let all = plan(&rule, &parent, &apply_all(&first));
    assert!(all.waiting.is_empty());
    let summary = &all.children.apply[0].object;
    assert_eq!(summary["metadata"]["name"], "web-summary");
    assert_eq!(summary["data"]["zones"], "2");
    let [ready, _] = parent_conditions(&rule, &all.children_after(&rule), &all.excluded, &[], None);
    assert!(ready.status.holds(), "{}", ready.message);
}

#[test]
fn an_empty_collection_is_ready_and_its_readers_render() {
    let plan = plan(&rule(ZONES), &parent(json!({"zones": []})), &[]);
    assert!(plan.waiting.is_empty());
    assert_eq!(plan.desired[0]["data"]["zones"], "0");
}

fn load_error(options: &str) -> crate::diagnostics::Diagnostic {
    let yaml = crate::test_rules::config_map_reconciler("shop", &child("zones", "{{zone}}", options, ""));
    let errors = crate::load_str("rules.yaml", &yaml).expect_err("refused");
    errors.iter().next().expect("one diagnostic").clone()
}

#[test]
fn a_binding_that_hides_the_context_is_a_load_error_at_the_entry() {
    let error = load_error("      forEach:\n        - zone: '{.spec.zones}'\n        - spec: '{.spec.x}'\n");
    assert_eq!((error.line, error.column), (10, 11), "{error:?}");
    assert!(error.message.contains("`spec` would hide"), "{}", error.message);
    let helper = load_error("      forEach:\n        - first: '{.spec.zones}'\n");
    assert!(helper.message.contains("template helper"), "{}", helper.message);
    let twice = load_error("      forEach:\n        - zone: '{.spec.a}'\n        - zone_index: '{.spec.b}'\n");
    assert!(twice.message.contains("bound twice"), "{}", twice.message);
}

#[test]
fn malformed_collections_are_load_errors() {
    let both = load_error("      count: '{.spec.n}'\n      forEach:\n        - zone: '{.spec.zones}'\n");
    assert!(both.message.contains("exclude each other"), "{}", both.message);
    let two_names = load_error("      forEach:\n        - { zone: '{.spec.a}', size: '{.spec.b}' }\n");
    assert!(two_names.message.contains("one `name:"), "{}", two_names.message);
    assert_eq!(two_names.line, 9);
    let bad_path = load_error("      forEach:\n        - zone: '{.spec.zones'\n");
    assert_eq!(bad_path.line, 9);
    let lonely_cap = load_error("      maxItems: 3\n");
    assert!(
        lonely_cap.message.contains("needs `forEach` or `count`"),
        "{}",
        lonely_cap.message
    );
}

#[test]
fn an_item_name_that_would_hide_a_field_of_the_parent_is_a_render_error() {
    let mut parent = parent(json!({"zones": ["a"]}));
    parent["zone"] = json!("the parent's own");
    let error = try_plan(&rule(ZONES), &parent, &[]).unwrap_err();
    assert!(
        error.to_string().contains("would hide the parent's field `zone`"),
        "{error}"
    );
}

/// `ports` lists the parent's ports; `per-port` is one ConfigMap per port the `ports` child holds (as observed).
fn observed_items_rules(items: &str) -> String {
    let children = [
        child(
            "ports",
            "ports",
            "      readyWhen: '{.metadata.uid}'\n",
            r#"{ list: "{{spec.ports}}" }"#,
        ),
        child(
            "per-port",
            "{{port}}",
            &format!("      forEach:\n        - port: '{items}'\n"),
            "",
        ),
    ];
    crate::test_rules::config_map_reconciler("shop", &children.concat())
}

#[test]
fn a_collection_over_a_childs_list_waits_for_it_and_follows_the_child_as_observed() {
    let rule = crate::test_rules::reconciler(&observed_items_rules("{.children.ports.metadata.labels.x}"), "shop");
    assert_eq!(rule.child("per-port").unwrap().depends_on, ["ports"]);
    let rule = crate::test_rules::reconciler(&observed_items_rules("{.children.ports.data.items}"), "shop");
    let parent = parent(json!({"ports": "a"}));
    let first = plan(&rule, &parent, &[]);
    assert_eq!(
        first.waiting,
        ["per-port"],
        "sized by an object that does not exist yet"
    );
    assert_eq!(desired_names(&first), ["web-ports"]);
    // The child as the cluster holds it carries a list (another controller filled it in, say).
    let mut ports = stored(&first.children.apply[0].object);
    ports["data"]["items"] = json!(["http", "metrics"]);
    let second = plan(&rule, &parent, std::slice::from_ref(&ports));
    assert!(second.waiting.is_empty());
    assert_eq!(desired_names(&second), ["web-ports", "web-http", "web-metrics"]);
    // The list shrinks: the item no longer there is pruned.
    ports["data"]["items"] = json!(["metrics"]);
    let created: Vec<Value> = second.children.apply.iter().map(|a| stored(&a.object)).collect();
    assert_eq!(created.len(), 2, "the items; `ports` is as rendered");
    let observed: Vec<Value> = std::iter::once(ports).chain(created).collect();
    let third = plan(&rule, &parent, &observed);
    let pruned: Vec<&str> = third.children.prune.iter().map(|key| key.name.as_str()).collect();
    assert_eq!(pruned, ["web-http"]);
}

#[test]
fn a_collection_over_an_unknown_child_is_a_load_error_at_its_for_each_entry() {
    let errors = crate::load_str("rules.yaml", &observed_items_rules("{.children.prots.data.items}"))
        .expect_err("an unknown child")
        .to_string();
    assert!(
        errors.contains("rules.yaml:16:17") && errors.contains("reads `children.prots`"),
        "{errors}"
    );
}

/// `copies`: `count` as given (one ConfigMap per copy); `summary` for `copies` to read.
fn counted(count: &str) -> Reconciler {
    let children = [
        child("summary", "summary", "", r#"{ a: "1", b: "2" }"#),
        child("copies", "{{count_index}}", &format!("      count: '{count}'\n"), ""),
    ];
    crate::test_rules::reconciler(
        &crate::test_rules::config_map_reconciler("shop", &children.concat()),
        "shop",
    )
}

#[test]
fn a_count_template_sizes_the_collection_from_what_it_computes() {
    let rule = counted("{{min spec.replicas (add spec.ready 1)}}");
    let window = plan(&rule, &parent(json!({"replicas": 5, "ready": 1})), &[]);
    assert_eq!(desired_names(&window), ["web-summary", "web-0", "web-1"]);
    let all = plan(&rule, &parent(json!({"replicas": 5, "ready": 9})), &[]);
    assert_eq!(desired_names(&all).len(), 6);
    // Capped like any collection.
    let error = try_plan(&rule, &parent(json!({"replicas": 5000, "ready": 5000})), &[]).unwrap_err();
    assert!(error.to_string().contains("5000 items, more than the 1000"), "{error}");
}

#[test]
fn a_count_template_that_is_no_non_negative_integer_is_a_render_error_at_the_count() {
    for (count, rendered) in [
        ("{{spec.replicas}}", "a negative number"),
        ("{{spec.name}}", "text that is not an integer"),
        ("{{#if spec.none}}1{{/if}}", "nothing"),
    ] {
        let spec = json!({"replicas": -2, "name": "web", "none": false});
        let error = try_plan(&counted(count), &parent(spec), &[]).unwrap_err();
        assert_eq!(error.category(), "collection");
        assert!(
            error.to_string().starts_with(&format!(
                "rules.yaml:14:14: child `copies`: `count` ({count}) must render a non-negative integer; it \
                 rendered {rendered}"
            )),
            "{error}"
        );
    }
    let error = try_plan(&counted("{{spec.replica}}"), &parent(json!({})), &[]).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("rules.yaml:14:14: child `copies`: `count`: template line 1: missing field `spec.replica`"),
        "{error}"
    );
}

#[test]
fn a_count_template_reading_a_child_waits_for_it() {
    let rule = counted("{{len children.summary.data}}");
    assert_eq!(
        rule.child("copies").map(|c| c.depends_on.clone()),
        Some(vec!["summary".to_string()])
    );
    let first = plan(&rule, &parent(json!({})), &[]);
    assert_eq!(desired_names(&first), ["web-summary"]);
    let second = plan(&rule, &parent(json!({})), &apply_all(&first));
    assert_eq!(desired_names(&second), ["web-summary", "web-0", "web-1"]);
}

#[test]
fn a_for_each_template_renders_the_list_of_items() {
    let options = "      forEach:\n        - zone: '{{json (slice spec.zones 0 spec.first)}}'\n";
    let first_two = plan(
        &rule(options),
        &parent(json!({"zones": ["a", "b", "c"], "first": 2})),
        &[],
    );
    // (`summary` reads the zones: it waits for them.)
    assert_eq!(desired_names(&first_two), ["web-a", "web-b"]);
    let none = plan(&rule(options), &parent(json!({"zones": ["a"], "first": 0})), &[]);
    assert!(!desired_names(&none).contains(&"web-a"), "{:?}", desired_names(&none));
    let scalar = "      forEach:\n        - zone: '{{spec.first}}'\n";
    let error = try_plan(&rule(scalar), &parent(json!({"first": 2})), &[]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("forEach `zone` ({{spec.first}}) must yield a list, not 2"),
        "{error}"
    );
}
