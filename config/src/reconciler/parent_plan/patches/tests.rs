//! `plan_patches`, `patch_releases` and `handOver` on synthetic objects.

use serde_json::{Value, json};

use super::*;
use crate::ownership::patch_manager_prefix;
use crate::reconciler::parent_plan::{ParentPlan, plan_parent};
use crate::test_rules::{config_map_child, config_map_reconciler, reconciler};

/// A rule on ConfigMaps that labels the Pods of its app and annotates one Service by name.
fn rule() -> Reconciler {
    let children = config_map_child("settings", "settings", "", "");
    let patches = r#"  patches:
    - id: team
      selector: { matchLabels: { app: "{{metadata.name}}" } }
      template: |
        apiVersion: v1
        kind: Pod
        metadata:
          labels: { team: "{{data.team}}" }
    - id: front
      name: "{{metadata.name}}-front"
      template: |
        apiVersion: v1
        kind: Service
        metadata:
          name: elsewhere
          namespace: kube-system
          annotations: { owner: "{{data.team}}" }
"#;
    reconciler(
        &(config_map_reconciler("label-pods", &children) + patches),
        "label-pods",
    )
}

fn parent(team: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "web", "namespace": "shop", "uid": "p-1"}, "data": {"team": team}})
}

fn pod(name: &str, namespace: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "labels": labels}})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")}})
}

fn plan(parent: &Value, targets: &[Value]) -> PatchPlan {
    let plan = plan_patches(&rule(), parent, true, &Map::new(), &Map::new(), targets);
    assert!(plan.failures.is_empty(), "{:?}", plan.failures);
    plan
}

/// The first failure of a plan whose patches fail (the other patches are still planned).
fn only_failure(plan: PatchPlan) -> RenderError {
    plan.failures.into_iter().next().expect("a patch fails")
}

#[test]
fn a_selector_patch_selects_the_parents_app_in_the_parents_namespace_only() {
    let targets = [
        pod("web-0", "shop", json!({"app": "web"})),
        pod("web-1", "shop", json!({"app": "web", "team": "blue"})),
        pod("db-0", "shop", json!({"app": "db"})),
        pod("web-0", "other", json!({"app": "web"})),
    ];
    let plan = plan(&parent("blue"), &targets);
    let patched: Vec<String> = plan.apply.iter().map(|apply| apply.key.to_string()).collect();
    assert_eq!(patched, ["Pod shop/web-0"], "web-1 already carries the label");
    assert_eq!(plan.unchanged, 1);
    let apply = &plan.apply[0];
    assert_eq!(apply.manager, "ruleplane-patch/label-pods/team/p-1");
    assert_eq!(
        apply.body,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-0", "namespace": "shop", "uid": "uid-web-0", "labels": {"team": "blue"}}}),
        "only the fields the template sets, and the uid that keeps the apply from creating anything"
    );
}

#[test]
fn a_named_patch_keeps_the_object_it_selected_whatever_the_template_says() {
    let plan = plan(&parent("blue"), &[service("web-front"), service("web-back")]);
    assert_eq!(plan.apply.len(), 1);
    let body = &plan.apply[0].body;
    assert_eq!(body["metadata"]["name"], "web-front");
    assert_eq!(body["metadata"]["namespace"], "shop", "not the template's kube-system");
    assert_eq!(body["metadata"]["uid"], "uid-web-front");
    assert_eq!(body["metadata"]["annotations"]["owner"], "blue");
}

#[test]
fn nothing_selected_means_nothing_applied_a_patch_never_creates() {
    let plan = plan(&parent("blue"), &[]);
    assert!(plan.apply.is_empty());
    assert_eq!(plan.unchanged, 0);
}

#[test]
fn data_fills_in_scalars_only() {
    let plan = plan(&parent("x\nmetadata: { name: evil }"), &[service("web-front")]);
    let body = &plan.apply[0].body;
    assert_eq!(body["metadata"]["name"], "web-front");
    assert_eq!(body["metadata"]["annotations"]["owner"], "x\nmetadata: { name: evil }");
}

#[test]
fn a_name_read_from_data_must_be_a_kubernetes_name() {
    let mut parent = parent("blue");
    parent["metadata"]["name"] = json!("../web");
    let error = only_failure(plan_patches(&rule(), &parent, true, &Map::new(), &Map::new(), &[]));
    assert!(
        matches!(error, RenderError::Patch { ref patch, .. } if patch == "front"),
        "{error}"
    );
}

#[test]
fn a_cluster_scoped_parent_other_than_a_namespace_cannot_patch_a_namespaced_kind() {
    let mut parent = parent("blue");
    parent["metadata"].as_object_mut().map(|m| m.remove("namespace"));
    let error = only_failure(plan_patches(&rule(), &parent, false, &Map::new(), &Map::new(), &[]));
    assert!(error.to_string().contains("cluster-scoped"), "{error}");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "shop", "uid": "n-1"}, "data": {"team": "blue"}});
    let plan = plan_patches(
        &rule(),
        &namespace,
        false,
        &Map::new(),
        &Map::new(),
        &[service("shop-front")],
    );
    assert_eq!(
        plan.apply[0].key.namespace.as_deref(),
        Some("shop"),
        "a Namespace parent: in itself"
    );
}

#[test]
fn patches_need_the_finalizer_so_their_fields_are_released_when_the_parent_goes() {
    let rule = rule();
    let plan =
        crate::test_rules::with_plan_input(&rule, &parent("blue"), &[], |input| plan_parent(input).expect("plans"));
    assert!(plan.needs_finalizer && plan.add_finalizer);
}

fn managed(object: &mut Value, managers: &[(&str, &str)]) {
    object["metadata"]["managedFields"] = managers
        .iter()
        .map(|(manager, operation)| json!({"manager": manager, "operation": operation}))
        .collect();
}

#[test]
fn a_release_applies_an_empty_configuration_under_each_chosen_patch_manager() {
    let mut web = pod("web-0", "shop", json!({}));
    managed(
        &mut web,
        &[
            ("ruleplane-patch/label-pods/team/p-1", "Apply"),
            ("ruleplane-patch/label-pods/team/p-2", "Apply"),
            ("ruleplane-patch/other/team/p-1", "Apply"),
            ("kubectl", "Update"),
        ],
    );
    let prefix = patch_manager_prefix("label-pods");
    let releases = patch_releases(&[web], |manager| manager.starts_with(&prefix));
    let managers: Vec<&str> = releases.iter().map(|r| r.manager.as_str()).collect();
    assert_eq!(
        managers,
        [
            "ruleplane-patch/label-pods/team/p-1",
            "ruleplane-patch/label-pods/team/p-2"
        ]
    );
    assert_eq!(
        releases[0].body,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "shop", "uid": "uid-web-0"}})
    );
}

#[test]
fn a_patch_removed_from_the_rule_or_moved_to_another_kind_is_dropped() {
    let old = rule();
    let renamed = reconciler(
        &(config_map_reconciler("label-pods", &config_map_child("settings", "settings", "", ""))
            + "  patches:\n    - id: team\n      name: x\n      template: |\n        apiVersion: v1\n        kind: Pod\n"),
        "label-pods",
    );
    let dropped: Vec<&str> = dropped_patches(&old, &renamed).iter().map(|p| p.id.as_str()).collect();
    assert_eq!(dropped, ["front"]);
    assert!(dropped_patches(&old, &old).is_empty());
}

/// A Deployment child whose replicas an HPA takes over.
fn scaled_rule() -> Reconciler {
    let children = r#"    - id: app
      handOver: [spec.replicas]
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: { name: "{{metadata.name}}" }
        spec:
          replicas: 1
          template: { spec: { containers: [ { name: app, image: nginx } ] } }
"#;
    reconciler(&config_map_reconciler("scaled", children), "scaled")
}

#[test]
fn a_handed_over_field_is_set_at_creation_only_and_never_compared_afterwards() {
    let rule = scaled_rule();
    let parent = parent("blue");
    let plan = crate::test_rules::with_plan_input(&rule, &parent, &[], |input| plan_parent(input).expect("plans"));
    let apply = &plan.children.apply[0];
    assert!(apply.created);
    assert_eq!(
        apply.object.pointer("/spec/replicas"),
        None,
        "the reconciler's apply leaves it out"
    );
    let initial = apply.initial.as_ref().expect("a creation with handed-over fields");
    assert_eq!(initial.pointer("/spec/replicas"), Some(&json!(1)));
    assert_eq!(
        initial.pointer("/spec/template"),
        apply.object.pointer("/spec/template")
    );
    assert_eq!(
        plan.desired[0].pointer("/spec/replicas"),
        Some(&json!(1)),
        "render shows it"
    );
    // Created, then scaled to 3 by the HPA: converged, nothing to write back.
    let mut stored = initial.clone();
    stored["spec"]["replicas"] = json!(3);
    stored["metadata"]["uid"] = json!("d-1");
    let again =
        crate::test_rules::with_plan_input(&rule, &parent, &[stored], |input| plan_parent(input).expect("plans"));
    assert!(again.children.apply.is_empty(), "{:?}", again.children.apply);
    assert_eq!(again.children.unchanged, 1);
}

#[test]
fn hand_over_paths_are_field_names_and_never_the_childs_identity() {
    for (paths, wanted) in [
        ("['spec.replicas[0]']", "field names"),
        ("[metadata.labels]", "marks the object"),
    ] {
        let children = format!(
            "    - id: app\n      handOver: {paths}\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata: {{ name: x }}\n"
        );
        let error = crate::load_str("rules.yaml", &config_map_reconciler("bad", &children)).expect_err("refused");
        assert!(format!("{error:?}").contains(wanted), "{error:?}");
    }
}

#[test]
fn the_patch_filter_keeps_kind_namespace_name_and_rendered_labels() {
    let rule = rule();
    let parent = parent("blue");
    let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let candidate = |kind, namespace, name, labels| PatchCandidate {
        api_version: "v1",
        kind,
        namespace: Some(namespace),
        name,
        labels,
    };
    let web = labels(&[("app", "web")]);
    let db = labels(&[("app", "db")]);
    let none = labels(&[]);
    let filter = PatchFilter::new(&rule, &parent, true);
    assert!(filter.may_patch(&candidate("Pod", "shop", "any", &web)));
    assert!(!filter.may_patch(&candidate("Pod", "shop", "any", &db)));
    assert!(!filter.may_patch(&candidate("Pod", "shop", "any", &none)));
    assert!(!filter.may_patch(&candidate("Pod", "other", "any", &web)));
    assert!(!filter.may_patch(&candidate("Secret", "shop", "any", &web)));
    assert!(filter.may_patch(&candidate("Service", "shop", "web-front", &none)));
    assert!(!filter.may_patch(&candidate("Service", "shop", "web-back", &none)));
    // What only the lookups can tell is left to the plan.
    let by_lookup = reconciler(
        &(config_map_reconciler("by-lookup", &config_map_child("settings", "settings", "", ""))
            + "  patches:\n    - id: team\n      name: \"{{lookups.target.data.name}}\"\n      template: |\n        apiVersion: v1\n        kind: Pod\n"),
        "by-lookup",
    );
    let filter = PatchFilter::new(&by_lookup, &parent, true);
    assert!(filter.may_patch(&candidate("Pod", "shop", "whatever", &none)));
}

/// The rule of [`rule`] with the file's partials: the Pods' labels written by a partial.
const PARTIAL_PATCH: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: TemplatePartials
metadata: { name: labels }
spec:
  partials:
    team: |
      team: "{{data.team}}"
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: label-pods }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: settings
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-settings" }
  patches:
    - id: team
      selector: { matchLabels: { app: "{{metadata.name}}" } }
      template: |
        apiVersion: v1
        kind: Pod
        metadata:
          labels:
            {{> PARTIAL}}
"#;

#[test]
fn a_patch_template_includes_the_files_partials_and_an_unknown_one_is_a_located_load_error() {
    let rule = reconciler(&PARTIAL_PATCH.replace("PARTIAL", "team"), "label-pods");
    let plan = plan_patches(
        &rule,
        &parent("blue"),
        true,
        &Map::new(),
        &Map::new(),
        &[pod("web-0", "shop", json!({"app": "web"}))],
    );
    assert_eq!(plan.apply[0].body["metadata"]["labels"], json!({"team": "blue"}));
    let errors = crate::load_str("rules.yaml", &PARTIAL_PATCH.replace("PARTIAL", "taem"))
        .expect_err("an unknown partial")
        .to_string();
    assert!(
        errors.contains("rules.yaml:28:") && errors.contains("unknown partial `taem`"),
        "{errors}"
    );
}

#[test]
fn a_patch_failing_inside_a_partial_points_at_the_partial() {
    let rule = reconciler(
        &PARTIAL_PATCH
            .replace("PARTIAL", "team")
            .replace("{{data.team}}", "{{data.tema}}"),
        "label-pods",
    );
    let plan = plan_patches(
        &rule,
        &parent("blue"),
        true,
        &Map::new(),
        &Map::new(),
        &[pod("web-0", "shop", json!({"app": "web"}))],
    );
    let failure = plan.failures.first().expect("the partial fails").to_string();
    // `team`'s text starts on line 7 of the file, column 7; its `{{` is at column 14.
    assert!(
        failure.starts_with("rules.yaml:7:14: patch `team`: partial `team` line 1: missing field `data.tema`"),
        "{failure}"
    );
}

#[test]
fn an_update_of_a_child_with_handed_over_fields_carries_them_for_a_recreate() {
    let rule = scaled_rule();
    let parent = parent("blue");
    let created = crate::test_rules::with_plan_input(&rule, &parent, &[], |input| plan_parent(input).expect("plans"));
    let mut stored = created.children.apply[0].initial.clone().expect("created whole");
    stored["metadata"]["uid"] = json!("d-1");
    stored["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:old");
    let update =
        crate::test_rules::with_plan_input(&rule, &parent, &[stored], |input| plan_parent(input).expect("plans"));
    let apply = &update.children.apply[0];
    assert!(!apply.created);
    assert_eq!(apply.object.pointer("/spec/replicas"), None, "the update leaves it out");
    // Refused as immutable and recreated, the child is created whole again under the hand-over manager.
    let initial = apply.initial.as_ref().expect("what a recreate creates");
    assert_eq!(initial.pointer("/spec/replicas"), Some(&json!(1)));
    assert_eq!(
        initial.pointer("/spec/template"),
        apply.object.pointer("/spec/template")
    );
}

/// A rule whose patch labels the app's Pods with what its child `settings` says once it is ready.
fn reading_rule(read: &str) -> String {
    let children = config_map_child("settings", "settings", "      readyWhen: \"{.metadata.uid}\"\n", "");
    let patches = format!(
        r#"  patches:
    - id: team
      selector: {{ matchLabels: {{ app: "{{{{metadata.name}}}}" }} }}
      template: |
        apiVersion: v1
        kind: Pod
        metadata:
          labels: {{ settings-uid: "{{{{{read}.metadata.uid}}}}" }}
"#
    );
    config_map_reconciler("label-pods", &children) + &patches
}

fn plan_with_targets(rule: &Reconciler, parent: &Value, observed: &[Value], targets: &[Value]) -> ParentPlan {
    let scopes = crate::Scopes {
        parent_namespaced: true,
        child_namespaced: &|_, _| true,
        status: None,
    };
    plan_parent(&crate::PlanInput {
        rule,
        parent,
        lookups: &Map::new(),
        observed,
        patch_targets: targets,
        scopes: &scopes,
        signer: &crate::provenance::ChildSigner::Unsigned,
        shards: crate::sharding::DEFAULT_SHARDS,
    })
    .expect("plans")
}

#[test]
fn a_patch_that_reads_a_child_waits_until_it_is_ready_then_reads_it() {
    let rule = reconciler(&reading_rule("children.settings"), "label-pods");
    let pods = [pod("web-0", "shop", json!({"app": "web"}))];
    let first = plan_with_targets(&rule, &parent("blue"), &[], &pods);
    assert_eq!(first.patches.waiting, ["team"]);
    assert!(first.patches.apply.is_empty() && first.patches.failures.is_empty());
    assert_eq!(first.children.apply.len(), 1, "the child is created meanwhile");
    let mut settings = first.children.apply[0].object.clone();
    let not_ready = plan_with_targets(&rule, &parent("blue"), std::slice::from_ref(&settings), &pods);
    assert_eq!(not_ready.patches.waiting, ["team"], "no uid yet: not ready");
    settings["metadata"]["uid"] = json!("uid-settings");
    let ready = plan_with_targets(&rule, &parent("blue"), &[settings], &pods);
    assert!(ready.patches.waiting.is_empty());
    assert_eq!(
        ready.patches.apply[0].body["metadata"]["labels"]["settings-uid"],
        "uid-settings"
    );
}

#[test]
fn a_patch_that_reads_an_unknown_child_is_a_located_load_error() {
    let errors = crate::load_str("rules.yaml", &reading_rule("children.setings"))
        .expect_err("an unknown child")
        .to_string();
    assert!(
        errors.contains("rules.yaml:20:38") && errors.contains("patch `team` reads `children.setings`"),
        "{errors}"
    );
    assert!(errors.contains("did you mean `settings`"), "{errors}");
}

#[test]
fn a_failing_patch_is_reported_and_stops_neither_the_children_nor_the_other_patches() {
    let rule = rule();
    let mut parent = parent("blue");
    parent["data"] = json!({});
    let targets = [pod("web-0", "shop", json!({"app": "web"})), service("web-front")];
    let plan = plan_with_targets(&rule, &parent, &[], &targets);
    assert_eq!(plan.children.apply.len(), 1, "the child is applied");
    assert_eq!(plan.patches.failures.len(), 2, "both patches read `data.team`");
    assert!(
        plan.patches.failures[0].to_string().contains("team"),
        "{}",
        plan.patches.failures[0]
    );
}
