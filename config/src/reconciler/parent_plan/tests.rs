//! `plan_parent` on synthetic objects: create, no-op, change, prune, release, wait, look-alikes, finalizer.

use serde_json::{Value, json};

use super::*;
use crate::ownership::{APPLIED_ANNOTATION, PARENT_ANNOTATION};

use crate::test_rules::config_map_child as child;

/// `endpoint` reads `settings` once it is ready; `debug` and `audit` (retained) exist when the parent says so.
fn rules() -> String {
    let children = [
        child("settings", "settings", "", r#"{ size: "{{data.size}}" }"#) + "      readyWhen: \"{.metadata.uid}\"\n",
        child("endpoint", "endpoint", "", ENDPOINT_DATA),
        child("debug", "debug", "      includeWhen: \"{.data.debug}\"\n", ""),
        child(
            "audit",
            "audit",
            "      retain: true\n      includeWhen: \"{.data.audit}\"\n",
            "",
        ),
    ];
    crate::test_rules::config_map_reconciler("shop", &children.concat())
}

const ENDPOINT_DATA: &str = r#"{ uid: "{{children.settings.metadata.uid}}" }"#;

fn rule() -> Reconciler {
    crate::test_rules::reconciler(&rules(), "shop")
}

fn parent(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"}, "data": data})
}

fn plan(rule: &Reconciler, parent: &Value, observed: &[Value]) -> ParentPlan {
    crate::test_rules::with_plan_input(rule, parent, observed, |input| plan_parent(input).expect("plans"))
}

/// What the apiserver holds after applying `object`: it plus a uid.
fn stored(object: &Value) -> Value {
    let mut object = object.clone();
    object["metadata"]["uid"] = json!(format!("uid-of-{}", object["metadata"]["name"].as_str().unwrap()));
    object
}

fn names(values: &[ObjectKey]) -> Vec<&str> {
    values.iter().map(|key| key.name.as_str()).collect()
}

#[test]
fn a_new_parent_creates_what_is_ready_to_render_and_waits_for_the_rest() {
    let rule = rule();
    let plan = plan(&rule, &parent(json!({"size": "3"})), &[]);
    assert_eq!(
        plan.desired.len(),
        1,
        "endpoint waits for settings to exist and be ready"
    );
    assert_eq!(plan.waiting, ["endpoint"]);
    assert_eq!(plan.excluded, ["debug", "audit"]);
    let apply = &plan.children.apply[0];
    assert!(apply.created);
    assert_eq!(apply.key.name, "web-settings");
    assert_eq!(apply.key.namespace.as_deref(), Some("team-a"));
    assert_eq!(apply.object["metadata"]["annotations"][PARENT_ANNOTATION], "team-a/web");
    assert!(apply.object["metadata"]["annotations"][APPLIED_ANNOTATION].is_string());
    assert_eq!(apply.object["metadata"]["ownerReferences"][0]["uid"], "u-1");
    assert!(
        !plan.needs_finalizer,
        "an owner reference cleans up a same-namespace child"
    );
    assert_eq!(plan.children_after(&rule).keys().collect::<Vec<_>>(), ["settings"]);
}

#[test]
fn what_exists_as_rendered_is_left_alone_and_a_change_is_applied() {
    let rule = rule();
    let first = plan(&rule, &parent(json!({"size": "3"})), &[]);
    let settings = stored(&first.children.apply[0].object);
    let second = plan(&rule, &parent(json!({"size": "3"})), std::slice::from_ref(&settings));
    assert_eq!(
        second.waiting,
        Vec::<String>::new(),
        "settings exists and is ready: endpoint renders"
    );
    assert_eq!(second.children.apply.len(), 1);
    assert_eq!(second.children.apply[0].key.name, "web-endpoint");
    assert_eq!(second.children.apply[0].object["data"]["uid"], "uid-of-web-settings");
    assert_eq!(second.children.unchanged, 1);
    let resized = plan(&rule, &parent(json!({"size": "4"})), std::slice::from_ref(&settings));
    let changed: Vec<_> = resized.children.apply.iter().filter(|a| !a.created).collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].object["data"]["size"], "4");
}

#[test]
fn a_child_no_longer_included_is_pruned_and_a_retained_one_released() {
    let rule = rule();
    let all = plan(
        &rule,
        &parent(json!({"size": "3", "debug": "yes", "audit": "yes"})),
        &[],
    );
    let observed: Vec<Value> = all.children.apply.iter().map(|a| stored(&a.object)).collect();
    assert_eq!(observed.len(), 3, "settings, debug, audit (endpoint waits)");
    let fewer = plan(&rule, &parent(json!({"size": "3"})), &observed);
    assert_eq!(names(&fewer.children.prune), ["web-debug"]);
    assert_eq!(names(&fewer.children.release), ["web-audit"]);
    let after = fewer.children_after(&rule);
    assert!(after.contains_key("settings") && after.contains_key("endpoint"));
    assert!(!after.contains_key("debug") && !after.contains_key("audit"));
}

#[test]
fn a_child_waiting_for_another_is_kept_and_look_alikes_are_ignored() {
    let rule = rule();
    let all = plan(&rule, &parent(json!({"size": "3"})), &[]);
    let settings = stored(&all.children.apply[0].object);
    let with_endpoint = plan(&rule, &parent(json!({"size": "3"})), std::slice::from_ref(&settings));
    let endpoint = stored(&with_endpoint.children.apply[0].object);
    // settings is gone (deleted by hand): endpoint waits again, and is neither pruned nor re-applied.
    let waiting = plan(&rule, &parent(json!({"size": "3"})), std::slice::from_ref(&endpoint));
    assert_eq!(waiting.waiting, ["endpoint"]);
    assert!(waiting.children.prune.is_empty());
    assert_eq!(
        names(&waiting.children.apply.iter().map(|a| a.key.clone()).collect::<Vec<_>>()),
        ["web-settings"]
    );
    // An object with the labels but naming another parent is not this parent's: never pruned, never read.
    let mut look_alike = stored(&endpoint);
    look_alike["metadata"]["name"] = json!("someone-elses");
    look_alike["metadata"]["annotations"][PARENT_ANNOTATION] = json!("team-a/other");
    let plan = plan(&rule, &parent(json!({"size": "3"})), &[settings, look_alike]);
    assert!(plan.children.prune.is_empty());
    assert!(!plan.observed.values().any(|o| o["metadata"]["name"] == "someone-elses"));
}

#[test]
fn a_child_outside_the_parents_namespace_needs_the_finalizer() {
    let rules = crate::test_rules::config_map_reconciler(
        "mirror",
        &child("elsewhere", "audit", "      namespace: audit\n", ""),
    );
    let rule = &crate::test_rules::reconciler(&rules, "mirror");
    let plan = plan(rule, &parent(json!({})), &[]);
    assert_eq!(plan.children.apply[0].key.namespace.as_deref(), Some("audit"));
    assert!(
        plan.children.apply[0].object["metadata"]
            .get("ownerReferences")
            .is_none()
    );
    assert!(plan.needs_finalizer);
    assert!(plan.add_finalizer);
    // Once the parent carries the rule's own finalizer there is nothing to add; the legacy shared one is replaced.
    let mut finalized = parent(json!({}));
    finalized["metadata"]["finalizers"] = json!([crate::ownership::cleanup_finalizer("mirror")]);
    assert!(!plan_for(rule, &finalized).add_finalizer);
    finalized["metadata"]["finalizers"] =
        json!([crate::ownership::cleanup_finalizer("mirror"), "ruleplane.dev/cleanup"]);
    assert!(plan_for(rule, &finalized).add_finalizer);
}

fn plan_for(rule: &Reconciler, parent: &Value) -> ParentPlan {
    plan(rule, parent, &[])
}

#[test]
fn observed_children_of_a_test_case_read_as_the_parents_own() {
    let rule = rule();
    let parent = parent(json!({"size": "3"}));
    let given = json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "web-settings", "namespace": "team-a", "uid": "s-1"}});
    let marked = observed_as_written(&rule, &parent, true, "settings", &given);
    let plan = plan(&rule, &parent, &[marked]);
    assert_eq!(plan.observed["settings"]["metadata"]["uid"], "s-1");
    assert_eq!(plan.waiting, Vec::<String>::new(), "endpoint reads it");
}

fn with_finalize() -> String {
    let children = [
        child("settings", "settings", "", ""),
        child("endpoint", "endpoint", "", ENDPOINT_DATA),
        child("audit", "audit", "      retain: true\n", ""),
    ];
    crate::test_rules::config_map_reconciler("shop", &children.concat())
        + r#"  finalize:
    children:
      - id: backup
        template: |
          apiVersion: v1
          kind: ConfigMap
          metadata: { name: "{{metadata.name}}-backup" }
        readyWhen: "{.data.done}"
"#
}

#[test]
fn a_deletion_applies_finalize_children_then_removes_the_others_in_reverse_dependency_order() {
    let rule = &crate::test_rules::reconciler(&with_finalize(), "shop");
    let parent = parent(json!({}));
    // What the parent's life left: settings, endpoint and audit, plus a look-alike naming another parent.
    let first = plan(rule, &parent, &[]);
    assert!(first.needs_finalizer, "a rule with finalize children always needs it");
    let settings = stored(&first.children.apply[0].object);
    let rest = plan(rule, &parent, std::slice::from_ref(&settings));
    let mut observed: Vec<Value> = vec![settings];
    observed.extend(rest.children.apply.iter().map(|a| stored(&a.object)));
    let mut look_alike = observed[0].clone();
    look_alike["metadata"]["name"] = json!("not-mine");
    look_alike["metadata"]["annotations"][PARENT_ANNOTATION] = json!("team-a/other");
    observed.push(look_alike);
    let deletion =
        crate::test_rules::with_plan_input(rule, &parent, &observed, |input| plan_deletion(input).expect("plans"));
    assert_eq!(deletion.finalize.apply.len(), 1);
    assert_eq!(deletion.finalize.apply[0].key.name, "web-backup");
    assert!(
        deletion.finalize.prune.is_empty(),
        "a deletion prunes nothing through the finalize plan"
    );
    let removals: Vec<(&str, Removal)> = deletion.removals.iter().map(|(k, r)| (k.name.as_str(), *r)).collect();
    assert_eq!(
        removals,
        [
            ("web-audit", Removal::Release),
            ("web-endpoint", Removal::Delete),
            ("web-settings", Removal::Delete),
        ],
        "the reader before what it reads; the retained one released; the look-alike untouched"
    );
    // The backup is awaited until its readyWhen holds.
    let applied = stored(&deletion.finalize.apply[0].object);
    assert_eq!(
        deletion.pending_finalize(rule, std::slice::from_ref(&applied)),
        ["backup"]
    );
    let mut done = applied;
    done["data"] = json!({"done": "yes"});
    assert!(deletion.pending_finalize(rule, &[done]).is_empty());
}
