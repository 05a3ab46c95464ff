//! The Reconciler's decision from YAML fixtures: convergence in both directions, prune, status.

use serde_json::{Value, json};

use super::*;
use crate::provenance::{SIGNATURE_ANNOTATION, SigningKey};

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("fixture parses")
}

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: { name: web, namespace: shop, labels: { app: web } }
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: web
          image: nginx:1.27
          resources: { requests: { cpu: 500m, memory: 1Gi }, limits: { cpu: "1" } }
"#;

/// What the apiserver returns for DEPLOYMENT once applied: defaults added, quantities normalised, status.
fn as_stored(desired: &Value) -> Value {
    let mut stored = desired.clone();
    stored["metadata"]["uid"] = json!("u-1");
    stored["metadata"]["resourceVersion"] = json!("42");
    stored["spec"]["strategy"] = json!({ "type": "RollingUpdate" });
    stored["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    stored["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({ "requests": { "cpu": "0.5", "memory": "1073741824" }, "limits": { "cpu": "1000m" } });
    stored["status"] = json!({ "replicas": 2 });
    stored
}

fn applied(rendered: Value) -> Value {
    let plan = plan_children(vec![rendered], &[], |_| Unrendered::Prune);
    assert_eq!(plan.apply.len(), 1);
    assert!(plan.apply[0].created);
    plan.apply[0].object.clone()
}

#[test]
fn a_converged_child_needs_no_write_despite_defaults_and_normalised_quantities() {
    let stored = as_stored(&applied(yaml(DEPLOYMENT)));
    let plan = plan_children(vec![yaml(DEPLOYMENT)], &[stored], |_| Unrendered::Prune);
    assert_eq!(
        plan.apply,
        vec![],
        "defaults, status and normalised quantities are not differences"
    );
    assert_eq!(plan.unchanged, 1);
    assert_eq!(plan.prune, vec![]);
}

#[test]
fn a_hand_edit_of_a_rendered_field_is_repaired() {
    let mut stored = as_stored(&applied(yaml(DEPLOYMENT)));
    stored["spec"]["replicas"] = json!(5);
    let plan = plan_children(vec![yaml(DEPLOYMENT)], &[stored], |_| Unrendered::Prune);
    assert_eq!(plan.apply.len(), 1);
    assert!(!plan.apply[0].created);
    assert_eq!(plan.apply[0].object["spec"]["replicas"], 2);
}

#[test]
fn a_field_removed_from_the_template_is_applied_although_the_rest_is_contained() {
    // Last applied with a label the template no longer renders: the observed object still contains all that is
    // rendered now, but the fingerprint differs, so the apply (which drops the label) happens.
    let mut before = yaml(DEPLOYMENT);
    before["metadata"]["labels"]["tier"] = json!("frontend");
    let stored = as_stored(&applied(before));
    let plan = plan_children(vec![yaml(DEPLOYMENT)], &[stored], |_| Unrendered::Prune);
    assert_eq!(plan.apply.len(), 1, "naive subset comparison would miss this");
}

#[test]
fn children_no_longer_rendered_are_pruned_and_missing_ones_created() {
    let service: Value = yaml(
        "apiVersion: v1\nkind: Service\nmetadata: { name: web, namespace: shop }\nspec: { ports: [ { port: 80 } ] }\n",
    );
    let old = as_stored(&applied(yaml(DEPLOYMENT)));
    let plan = plan_children(vec![service.clone()], std::slice::from_ref(&old), |_| Unrendered::Prune);
    assert_eq!(plan.apply.len(), 1);
    assert!(plan.apply[0].created);
    assert_eq!(plan.apply[0].key.to_string(), "Service shop/web");
    assert_eq!(
        plan.prune,
        vec![ObjectKey {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into()
        }]
    );
    assert!(
        plan.apply[0].object["metadata"]["annotations"][APPLIED_ANNOTATION].is_string(),
        "the fingerprint goes with the object"
    );
    let released = plan_children(vec![service.clone()], std::slice::from_ref(&old), |_| {
        Unrendered::Release
    });
    assert_eq!(
        (released.prune.len(), released.release.len()),
        (0, 1),
        "a retained child is released, not pruned"
    );
    let kept = plan_children(vec![service], &[old], |_| Unrendered::Keep);
    assert_eq!(
        (kept.prune.len(), kept.release.len()),
        (0, 0),
        "a waiting child is left alone"
    );
}

#[test]
fn quantities_compare_by_value() {
    for (a, b) in [
        ("1", "1000m"),
        ("0.5", "500m"),
        ("1Gi", "1073741824"),
        ("1k", "1000"),
        ("1e3", "1k"),
        ("2", "2"),
    ] {
        assert!(quantities_equal(a, b), "{a} = {b}");
    }
    for (a, b) in [("1", "1001m"), ("1Gi", "1G"), ("web", "web2"), ("1x", "1x")] {
        assert!(!quantities_equal(a, b), "{a} ≠ {b}");
    }
    assert!(
        contains(&json!({ "cpu": 1 }), &json!({ "cpu": "1" })),
        "a number and its normalised text"
    );
}

#[test]
fn lists_must_match_in_length_and_order() {
    assert!(contains(&json!({ "a": [1, 2] }), &json!({ "a": [1, 2], "b": 3 })));
    assert!(!contains(&json!({ "a": [1, 2] }), &json!({ "a": [2, 1] })));
    assert!(
        !contains(&json!({ "a": [1] }), &json!({ "a": [1, 2] })),
        "an extra item is a difference"
    );
    assert!(
        contains(&json!({ "a": {}, "b": null }), &json!({})),
        "empty values are dropped when stored"
    );
}

fn conditions(synced: bool) -> Vec<Condition> {
    vec![
        Condition {
            type_: "Ready".into(),
            status: ConditionStatus::True,
            reason: "ChildrenReady".into(),
            message: "all 1 children are ready".into(),
            event: false,
        },
        Condition {
            type_: "Synced".into(),
            status: ConditionStatus::of(synced),
            reason: if synced { "Applied" } else { "RenderError" }.into(),
            message: String::new(),
            event: false,
        },
    ]
}

#[test]
fn status_is_written_only_when_it_changes_and_keeps_transition_times() {
    let projected = serde_json::from_value(json!({ "lastSchedule": "2026-11-22T10:00:00Z" })).unwrap();
    let first = next_status(None, &projected, Some(3), &conditions(true), "T1").expect("a first status");
    assert_eq!(first["observedGeneration"], 3);
    assert_eq!(first["conditions"][0]["lastTransitionTime"], "T1");
    assert_eq!(first["conditions"][1]["observedGeneration"], 3);
    assert_eq!(
        next_status(Some(&first), &projected, Some(3), &conditions(true), "T2"),
        None,
        "nothing changed: no write, even at a later time"
    );
    let failed = next_status(Some(&first), &projected, Some(3), &conditions(false), "T3").expect("Synced flips");
    assert_eq!(
        failed["conditions"][0]["lastTransitionTime"], "T1",
        "Ready did not change"
    );
    assert_eq!(failed["conditions"][1]["lastTransitionTime"], "T3");
    assert_eq!(failed["conditions"][1]["status"], "False");
    let without: Map<String, Value> = Map::new();
    let dropped = next_status(Some(&failed), &without, Some(3), &conditions(false), "T4").expect("field gone");
    assert_eq!(
        dropped["lastSchedule"],
        Value::Null,
        "a field no longer projected is removed"
    );
}

#[test]
fn owner_references_only_where_kubernetes_allows_them() {
    let parent = json!({ "apiVersion": "stable.example.com/v1", "kind": "CronTab",
                         "metadata": { "name": "nightly", "namespace": "team-a", "uid": "u-9" } });
    let mut same = json!({ "apiVersion": "batch/v1", "kind": "CronJob", "metadata": { "name": "nightly", "namespace": "team-a" } });
    attach_parent(&mut same, &parent, true, true, &ChildSigner::Unsigned);
    assert_eq!(same["metadata"]["ownerReferences"][0]["uid"], "u-9");
    assert_eq!(same["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(same["metadata"]["annotations"][PARENT_ANNOTATION], "team-a/nightly");
    let mut elsewhere =
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "x", "namespace": "team-b" } });
    attach_parent(&mut elsewhere, &parent, true, true, &ChildSigner::Unsigned);
    assert!(
        elsewhere["metadata"].get("ownerReferences").is_none(),
        "no cross-namespace owner"
    );
    let mut cluster_child = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "x" } });
    attach_parent(&mut cluster_child, &parent, true, false, &ChildSigner::Unsigned);
    assert!(
        cluster_child["metadata"].get("ownerReferences").is_none(),
        "no namespaced owner of a cluster-scoped child"
    );
    let namespace = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "team-a", "uid": "u-ns" } });
    let mut quota =
        json!({ "apiVersion": "v1", "kind": "ResourceQuota", "metadata": { "name": "q", "namespace": "team-a" } });
    attach_parent(&mut quota, &namespace, false, true, &ChildSigner::Unsigned);
    assert_eq!(
        quota["metadata"]["ownerReferences"][0]["kind"], "Namespace",
        "a cluster-scoped parent owns anything"
    );
    assert_eq!(quota["metadata"]["annotations"][PARENT_ANNOTATION], "team-a");
}

/// A rule with a child in the parent's namespace and one whose namespace the rule sets.
fn mirror() -> String {
    use crate::test_rules::config_map_child as child;
    let children = child("copy", "copy", "", "") + &child("elsewhere", "audit", "      namespace: audit\n", "");
    crate::test_rules::config_map_reconciler("mirror", &children)
}

#[test]
fn only_children_with_the_parents_annotation_in_their_place_are_its_own() {
    let rule = &crate::test_rules::reconciler(&mirror(), "mirror");
    let parent = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"}});
    let child = |namespace: &str, id: &str, reference: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "x", "namespace": namespace,
            "labels": { RULE_LABEL: "mirror", PARENT_UID_LABEL: "u-1", CHILD_ID_LABEL: id },
            "annotations": { PARENT_ANNOTATION: reference }}})
    };
    assert!(is_own_child(
        rule,
        &parent,
        true,
        &child("team-a", "copy", "team-a/web"),
        &ChildSigner::Unsigned
    ));
    assert!(is_own_child(
        rule,
        &parent,
        true,
        &child("audit", "elsewhere", "team-a/web"),
        &ChildSigner::Unsigned
    ));
    // Forged in another namespace with the parent's UID copied: not the default child's place.
    assert!(!is_own_child(
        rule,
        &parent,
        true,
        &child("tenant-b", "copy", "team-a/web"),
        &ChildSigner::Unsigned
    ));
    // The labels alone, pointing at another parent, or an id the rule does not have.
    assert!(!is_own_child(
        rule,
        &parent,
        true,
        &child("team-a", "copy", "team-a/other"),
        &ChildSigner::Unsigned
    ));
    // An id the rule dropped: still the parent's child where any child goes (so it is pruned), nowhere else.
    let dropped = |namespace: &str| child(namespace, "dropped", "team-a/web");
    assert!(is_own_child(
        rule,
        &parent,
        true,
        &dropped("team-a"),
        &ChildSigner::Unsigned
    ));
    assert!(!is_own_child(
        rule,
        &parent,
        true,
        &dropped("audit"),
        &ChildSigner::Unsigned
    ));
    let mut unlabelled = child("team-a", "copy", "team-a/web");
    unlabelled["metadata"]["labels"][PARENT_UID_LABEL] = json!("u-2");
    assert!(!is_own_child(rule, &parent, true, &unlabelled, &ChildSigner::Unsigned));
}

#[test]
fn with_a_key_only_signed_or_older_unsigned_children_are_a_parents_own() {
    let rule = &crate::test_rules::reconciler(&mirror(), "mirror");
    let signer = ChildSigner::Key(std::sync::Arc::new(
        SigningKey::new(vec![3; 32], Some("2026-06-01T00:00:00Z".into())).unwrap(),
    ));
    let parent = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"}});
    let mut rendered = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "web-copy", "namespace": "team-a",
        "labels": { RULE_LABEL: "mirror", PARENT_UID_LABEL: "u-1", CHILD_ID_LABEL: "copy" }}});
    attach_parent(&mut rendered, &parent, true, true, &signer);
    let mut stored = rendered.clone();
    stored["metadata"]["creationTimestamp"] = json!("2026-07-01T00:00:00Z");
    assert!(
        is_own_child(rule, &parent, true, &stored, &signer),
        "what we signed is ours"
    );
    // The same labels and annotation on an object a tenant made in the parent's own namespace: no signature.
    let mut forged = stored.clone();
    forged["metadata"]["name"] = json!("tenant-secret-data");
    forged["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(SIGNATURE_ANNOTATION);
    assert!(!is_own_child(rule, &parent, true, &forged, &signer));
    // Our signature copied onto another name does not carry over.
    forged["metadata"]["annotations"][SIGNATURE_ANNOTATION] =
        stored["metadata"]["annotations"][SIGNATURE_ANNOTATION].clone();
    assert!(!is_own_child(rule, &parent, true, &forged, &signer));
    // Written by a version that did not sign, before the key existed: still ours (the next apply signs it).
    let mut legacy = stored.clone();
    legacy["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(SIGNATURE_ANNOTATION);
    legacy["metadata"]["creationTimestamp"] = json!("2026-05-01T00:00:00Z");
    assert!(is_own_child(rule, &parent, true, &legacy, &signer));
}
