//! What a Reconciler would do to one parent, without doing it (`ruleplane diff`): the worker's own render and
//! plan, turned into created / changed (with a diff) / pruned children and the status change.

use serde_json::Value;

use super::parent_plan::{PlanInput, plan_parent};
use super::plan::{ObjectKey, contains, desired_status, each_child};
use super::render::RenderError;
use crate::object_diff::{project, unified_diff, yaml};
use crate::ownership::APPLIED_ANNOTATION;

/// The changes one parent would get.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParentPreview {
    /// Children that do not exist yet, as they would be applied.
    pub create: Vec<Value>,
    /// Children that exist and would be changed.
    pub change: Vec<ChildChange>,
    /// Children no longer rendered, to be deleted.
    pub prune: Vec<ObjectKey>,
    /// Children no longer rendered that are kept (`retain`) and released from the parent.
    pub release: Vec<ObjectKey>,
    /// Children already as rendered.
    pub unchanged: usize,
    /// Children not rendered yet: they read a child that does not exist or is not ready.
    pub waiting: Vec<String>,
    /// Unified diff of the parent's status (live → new), when the manager would write it and it would change.
    pub status: Option<String>,
    /// Objects the rule does not own whose fields its `patches` would set.
    pub patch: Vec<PatchChange>,
}

impl ParentPreview {
    /// Whether anything would be written.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.change.is_empty()
            && self.prune.is_empty()
            && self.release.is_empty()
            && self.status.is_none()
            && self.patch.is_empty()
    }
}

/// An existing object a `patches` entry would apply its fields to.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchChange {
    /// The `patches` entry's id.
    pub patch: String,
    /// The patched object.
    pub key: ObjectKey,
    /// Unified diff of the fields the patch sets (live → patched).
    pub diff: String,
}

/// A child that would be re-applied.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildChange {
    /// Which child.
    pub key: ObjectKey,
    /// Unified diff of the fields the rule sets (live → rendered); empty when only fields the template no
    /// longer sets would go (server-side apply removes them).
    pub diff: String,
}

/// Renders `rule` for `parent` with its `lookups` (as [`super::gather_lookups`] returns them) and compares the
/// result with the parent's `observed` children (the objects carrying this rule's and this parent's labels):
/// [`plan_parent`], the worker's own decision, told as changes.
pub fn preview_parent(input: &PlanInput, now: &str) -> Result<ParentPreview, RenderError> {
    let PlanInput {
        rule,
        parent,
        lookups,
        scopes,
        ..
    } = *input;
    let plan = plan_parent(input)?;
    // The worker applies the children and reports the patch that fails; `diff` tells the failure.
    if let Some(failure) = plan.patches.failures.first() {
        return Err(failure.clone());
    }
    let children_now = plan.children_after(rule);
    let mut preview = ParentPreview {
        prune: plan.children.prune.clone(),
        release: plan.children.release.clone(),
        unchanged: plan.children.unchanged,
        waiting: plan.waiting.clone(),
        ..ParentPreview::default()
    };
    for apply in &plan.children.apply {
        match each_child(&plan.observed).find(|o| ObjectKey::of(o).as_ref() == Some(&apply.key)) {
            // A child with handed-over fields is created with them.
            None => preview
                .create
                .push(apply.initial.as_ref().unwrap_or(&apply.object).clone()),
            Some(live) => {
                let desired = without_fingerprint(&apply.object);
                let live = project(&without_fingerprint(live), &desired);
                preview.change.push(ChildChange {
                    key: apply.key.clone(),
                    diff: unified_diff("live", &yaml(&live), "rendered", &yaml(&desired)),
                });
            }
        }
    }
    for apply in &plan.patches.apply {
        let live = input
            .patch_targets
            .iter()
            .find(|target| ObjectKey::of(target).as_ref() == Some(&apply.key));
        let live = live.map(|live| project(live, &apply.body)).unwrap_or(Value::Null);
        preview.patch.push(PatchChange {
            patch: apply.patch.clone(),
            key: apply.key.clone(),
            diff: unified_diff("live", &yaml(&live), "patched", &yaml(&apply.body)),
        });
    }
    if let Some(with_generation) = scopes.status {
        let new = desired_status(
            rule,
            parent,
            &children_now,
            lookups,
            (&plan.excluded, &plan.held),
            with_generation,
            now,
        );
        let (new, live) = (
            without_times(&new),
            without_times(parent.get("status").unwrap_or(&Value::Null)),
        );
        if !(contains(&new, &live) && contains(&live, &new)) {
            preview.status = Some(unified_diff("live status", &yaml(&live), "new status", &yaml(&new)));
        }
    }
    Ok(preview)
}

/// The fingerprint annotation changes with every template change; the diff shows the fields instead.
fn without_fingerprint(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(APPLIED_ANNOTATION);
    }
    object
}

/// Conditions' `lastTransitionTime` say when, not what: left out of status comparisons.
fn without_times(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
            condition.remove("lastTransitionTime");
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    use crate::reconciler::Reconciler;

    fn rule() -> String {
        let data = "{ greeting: {{json data.greeting}}, size: 1Gi }";
        crate::test_rules::config_map_reconciler("web", &crate::test_rules::config_map_child("copy", "copy", "", data))
    }

    fn parent(greeting: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "web", "namespace": "ns", "uid": "u-1"}, "data": {"greeting": greeting}})
    }

    fn preview(rule: &Reconciler, parent: &Value, observed: &[Value]) -> ParentPreview {
        crate::test_rules::with_plan_input(rule, parent, observed, |input| {
            preview_parent(input, "2026-01-01T00:00:00Z").expect("renders")
        })
    }

    /// What the apiserver returns for an applied child: what was sent, plus defaults and normalised values.
    fn as_stored(mut child: Value) -> Value {
        child["metadata"]["resourceVersion"] = json!("7");
        child["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        child
    }

    #[test]
    fn a_new_parent_creates_and_a_converged_one_changes_nothing() {
        let rule = crate::test_rules::reconciler(&rule(), "web");
        let first = preview(&rule, &parent("hi"), &[]);
        assert_eq!(first.create.len(), 1);
        assert_eq!(first.create[0]["metadata"]["name"], "web-copy");
        assert!(!first.is_empty());
        let live: Vec<Value> = first.create.into_iter().map(as_stored).collect();
        let again = preview(&rule, &parent("hi"), &live);
        assert!(again.is_empty(), "{again:#?}");
        assert_eq!(again.unchanged, 1);
    }

    #[test]
    fn a_changed_parent_shows_a_diff_of_the_fields_the_rule_sets() {
        let rule = crate::test_rules::reconciler(&rule(), "web");
        let live: Vec<Value> = preview(&rule, &parent("hi"), &[])
            .create
            .into_iter()
            .map(as_stored)
            .collect();
        let changed = preview(&rule, &parent("hello"), &live);
        assert_eq!(changed.change.len(), 1, "{changed:#?}");
        let diff = &changed.change[0].diff;
        assert!(diff.starts_with("--- live\n+++ rendered\n"), "{diff}");
        assert!(diff.contains("-  greeting: hi\n+  greeting: hello\n"), "{diff}");
        assert!(
            !diff.contains("resourceVersion"),
            "fields the rule does not set are not shown:\n{diff}"
        );
        assert!(!diff.contains("ruleplane.dev/applied"), "{diff}");
    }

    #[test]
    fn a_child_no_longer_rendered_is_pruned_and_hand_edits_show_as_changes() {
        let rule = crate::test_rules::reconciler(&rule(), "web");
        let mut live: Vec<Value> = preview(&rule, &parent("hi"), &[])
            .create
            .into_iter()
            .map(as_stored)
            .collect();
        let mut stale = live[0].clone();
        stale["metadata"]["name"] = json!("web-old");
        stale["metadata"]["labels"]["ruleplane.dev/child-id"] = json!("old");
        live[0]["data"]["greeting"] = json!("edited by hand");
        live.push(stale);
        let result = preview(&rule, &parent("hi"), &live);
        assert_eq!(result.prune.len(), 1);
        assert_eq!(result.prune[0].name, "web-old");
        assert!(
            result.change[0]
                .diff
                .contains("-  greeting: edited by hand\n+  greeting: hi\n")
        );
    }

    #[test]
    fn a_child_is_shown_created_with_its_handed_over_fields_and_their_new_owner_is_no_change() {
        let child =
            crate::test_rules::config_map_child("copy", "copy", "      handOver: [data.size]\n", "{ size: \"1\" }");
        let rule = crate::test_rules::reconciler(&crate::test_rules::config_map_reconciler("web", &child), "web");
        let first = preview(&rule, &parent("hi"), &[]);
        assert_eq!(first.create[0]["data"]["size"], "1", "created with it");
        let mut live = as_stored(first.create[0].clone());
        live["data"]["size"] = json!("5");
        let again = preview(&rule, &parent("hi"), &[live]);
        assert!(
            again.is_empty(),
            "another controller's value is not a change: {again:#?}"
        );
    }
    #[test]
    fn a_patch_shows_the_fields_it_would_set_on_the_object_it_selects_and_nothing_once_they_are_there() {
        let children = crate::test_rules::config_map_child("copy", "copy", "", "");
        let patches = r#"  patches:
    - id: team
      selector: { matchLabels: { app: "{{metadata.name}}" } }
      template: |
        apiVersion: v1
        kind: Pod
        metadata:
          labels: { team: "{{data.greeting}}" }
"#;
        let rule = crate::test_rules::reconciler(
            &(crate::test_rules::config_map_reconciler("web", &children) + patches),
            "web",
        );
        let pod = |labels: Value| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "web-0", "namespace": "ns", "uid": "pod-1", "labels": labels}})
        };
        let scopes = crate::Scopes {
            parent_namespaced: true,
            child_namespaced: &|_, _| true,
            status: None,
        };
        let preview_with = |targets: &[Value]| {
            preview_parent(
                &PlanInput {
                    rule: &rule,
                    parent: &parent("blue"),
                    lookups: &serde_json::Map::new(),
                    observed: &[],
                    patch_targets: targets,
                    scopes: &scopes,
                    signer: &crate::provenance::ChildSigner::Unsigned,
                    shards: crate::sharding::DEFAULT_SHARDS,
                },
                "2026-01-01T00:00:00Z",
            )
            .expect("renders")
        };
        let unlabelled = preview_with(&[pod(json!({"app": "web"}))]);
        assert_eq!(unlabelled.patch.len(), 1, "{unlabelled:#?}");
        let change = &unlabelled.patch[0];
        assert_eq!((change.patch.as_str(), change.key.name.as_str()), ("team", "web-0"));
        assert!(change.diff.contains("+    team: blue\n"), "{}", change.diff);
        assert!(!unlabelled.is_empty());
        let labelled = preview_with(&[pod(json!({"app": "web", "team": "blue"}))]);
        assert!(labelled.patch.is_empty(), "{labelled:#?}");
        let other_app = preview_with(&[pod(json!({"app": "db"}))]);
        assert!(
            other_app.patch.is_empty(),
            "a patch selects only what its selector matches"
        );
    }
}
