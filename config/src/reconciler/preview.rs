//! What a Reconciler would do to one parent, without doing it (`ruleplane diff`): the worker's own render and
//! plan, turned into created / changed (with a diff) / pruned children and the status change.

use serde_json::{Map, Value};

use super::plan::{
    ObjectKey, attach_parent, child_id, contains, desired_status, is_own_child, plan_children, unrendered_fate,
};
use super::render::{RenderError, render_children_observing};
use super::resolved::Reconciler;
use crate::object_diff::{project, unified_diff, yaml};
use crate::ownership::APPLIED_ANNOTATION;
use crate::provenance::ChildSigner;

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
}

impl ParentPreview {
    /// Whether anything would be written.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.change.is_empty()
            && self.prune.is_empty()
            && self.release.is_empty()
            && self.status.is_none()
    }
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

/// How the apiserver serves the parent and the children's kinds, as the worker learns it from discovery.
pub struct Scopes<'a> {
    /// Whether parents are namespaced.
    pub parent_namespaced: bool,
    /// Whether a child kind (`apiVersion`, `kind`) is namespaced.
    pub child_namespaced: &'a dyn Fn(&str, &str) -> bool,
    /// Whether the manager writes the parent's status (custom kinds), and with `observedGeneration` (status
    /// subresource).
    pub status: Option<bool>,
}

/// Renders `rule` for `parent` with its `lookups` (as [`super::gather_lookups`] returns them) and compares the
/// result with the parent's `observed` children (the objects carrying this rule's and this parent's labels).
pub fn preview_parent(
    rule: &Reconciler,
    parent: &Value,
    lookups: &Map<String, Value>,
    observed: &[Value],
    scopes: &Scopes,
    signer: &ChildSigner,
    now: &str,
) -> Result<ParentPreview, RenderError> {
    // What the worker would take for this parent's children: the same identity check.
    let observed: Vec<Value> = observed
        .iter()
        .filter(|child| is_own_child(rule, parent, scopes.parent_namespaced, child, signer))
        .cloned()
        .collect();
    let observed = observed.as_slice();
    let observed_by_id: Map<String, Value> = observed
        .iter()
        .filter_map(|child| Some((child_id(child)?.to_string(), child.clone())))
        .collect();
    let mut rendered = render_children_observing(rule, parent, lookups, &observed_by_id)?;
    let desired: Vec<Value> = std::mem::take(&mut rendered.children)
        .into_iter()
        .map(|mut child| {
            let namespaced = (scopes.child_namespaced)(
                child["apiVersion"].as_str().unwrap_or_default(),
                child["kind"].as_str().unwrap_or_default(),
            );
            attach_parent(&mut child, parent, scopes.parent_namespaced, namespaced, signer);
            child
        })
        .collect();
    let plan = plan_children(desired, observed, |child| unrendered_fate(rule, &rendered, child));
    let mut preview = ParentPreview {
        prune: plan.prune,
        release: plan.release,
        unchanged: plan.unchanged,
        waiting: rendered.waiting.clone(),
        ..ParentPreview::default()
    };
    // The children as the worker would see them after applying: what exists, else what it would create.
    let mut children_now = observed_by_id.clone();
    for apply in plan.apply {
        if let Some(id) = child_id(&apply.object) {
            children_now
                .entry(id.to_string())
                .or_insert_with(|| apply.object.clone());
        }
        match observed.iter().find(|o| ObjectKey::of(o).as_ref() == Some(&apply.key)) {
            None => preview.create.push(apply.object),
            Some(live) => {
                let desired = without_fingerprint(&apply.object);
                let live = project(&without_fingerprint(live), &desired);
                preview.change.push(ChildChange {
                    key: apply.key,
                    diff: unified_diff("live", &yaml(&live), "rendered", &yaml(&desired)),
                });
            }
        }
    }
    for key in preview.prune.iter().chain(&preview.release) {
        children_now.retain(|_, child| ObjectKey::of(child).as_ref() != Some(key));
    }
    if let Some(with_generation) = scopes.status {
        let new = desired_status(
            rule,
            parent,
            &children_now,
            lookups,
            &rendered.excluded,
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
    use crate::rule_set::Rule;

    const RULE: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: web }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-copy" }
        data: { greeting: {{json data.greeting}}, size: 1Gi }
"#;

    fn rule(text: &str) -> Reconciler {
        match crate::load_str("rule.yaml", text).expect("rule loads").rules()[0].clone() {
            Rule::Reconciler(rule) => rule,
            _ => unreachable!(),
        }
    }

    fn parent(greeting: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "web", "namespace": "ns", "uid": "u-1"}, "data": {"greeting": greeting}})
    }

    fn preview(rule: &Reconciler, parent: &Value, observed: &[Value]) -> ParentPreview {
        let scopes = Scopes {
            parent_namespaced: true,
            child_namespaced: &|_, _| true,
            status: None,
        };
        preview_parent(
            rule,
            parent,
            &Map::new(),
            observed,
            &scopes,
            &ChildSigner::Unsigned,
            "2026-01-01T00:00:00Z",
        )
        .expect("renders")
    }

    /// What the apiserver returns for an applied child: what was sent, plus defaults and normalised values.
    fn as_stored(mut child: Value) -> Value {
        child["metadata"]["resourceVersion"] = json!("7");
        child["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        child
    }

    #[test]
    fn a_new_parent_creates_and_a_converged_one_changes_nothing() {
        let rule = rule(RULE);
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
        let rule = rule(RULE);
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
        let rule = rule(RULE);
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
}
