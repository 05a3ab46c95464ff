//! What becomes of a child's apply that the apiserver refused because a changed field is immutable: recreated
//! (delete, then create) when the child says `recreate`, else reported.

use serde_json::Value;

use super::plan::ChildApply;
use super::resolved::Reconciler;
use crate::ownership::is_retained;

/// The decision after the apiserver refused a child's apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefusedApply {
    /// Delete the object, only while its UID is still `uid` (the object this parent owns and the plan saw), wait
    /// until it is gone, then create it as rendered.
    Recreate {
        /// The UID the delete is preconditioned on.
        uid: String,
    },
    /// Report the refusal (`Synced=False`) and leave the object as it is.
    Report,
}

/// Whether an apiserver refusal (status code and message) says that a field which cannot change was changed:
/// the 422 "field is immutable" of a Job's `spec.template`, an immutable ConfigMap's data, a Service's
/// `clusterIP`, …
pub fn is_immutable_refusal(code: u16, message: &str) -> bool {
    code == 422 && message.contains("field is immutable")
}

/// An immutable refusal said short: the apiserver's message up to the field (`Job.batch "x" is invalid:
/// spec.template`) and "field is immutable", without the value it quotes (a whole Pod template, which would push
/// the reason past the length a condition message keeps, and may carry values a status should not show).
pub fn immutable_summary(message: &str) -> String {
    let cut = [": Invalid value:", ": Forbidden:"]
        .iter()
        .filter_map(|marker| message.find(marker))
        .min();
    match cut {
        Some(at) => format!("{}: field is immutable", &message[..at]),
        None => message.to_string(),
    }
}

/// What to do about `apply`, refused as immutable (see [`is_immutable_refusal`]), given the object of this parent
/// observed under its key (`None`: none was). Recreated only when all hold: the child says `recreate`; it is not
/// retained (by the rule, or by the annotation a retained object carries: those are never deleted); the object
/// was observed as this parent's own child with a UID (a create that was refused deletes nothing).
pub fn refused_apply(rule: &Reconciler, apply: &ChildApply, observed: Option<&Value>) -> RefusedApply {
    let Some(child) = rule.child_of(&apply.object) else {
        return RefusedApply::Report;
    };
    if !child.recreate || child.retain || apply.created {
        return RefusedApply::Report;
    }
    let Some(observed) = observed else {
        return RefusedApply::Report;
    };
    if is_retained(observed) {
        return RefusedApply::Report;
    }
    match observed.pointer("/metadata/uid").and_then(Value::as_str) {
        Some(uid) if !uid.is_empty() => RefusedApply::Recreate { uid: uid.to_string() },
        _ => RefusedApply::Report,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ObjectKey;

    const RULES: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: jobs }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: migrate
      recreate: true
      template: |
        apiVersion: batch/v1
        kind: Job
        metadata: { name: "{{metadata.name}}-migrate" }
        spec: { template: { spec: { restartPolicy: Never, containers: [{ name: m, image: "{{data.image}}" }] } } }
    - id: plain
      template: |
        apiVersion: batch/v1
        kind: Job
        metadata: { name: "{{metadata.name}}-plain" }
        spec: { template: { spec: { restartPolicy: Never, containers: [{ name: m, image: "{{data.image}}" }] } } }
"#;

    fn rule() -> Reconciler {
        let rules = crate::load_str("rules.yaml", RULES).expect("rules load");
        match rules.get("jobs") {
            Some(crate::Rule::Reconciler(rule)) => rule.clone(),
            _ => panic!("no rule"),
        }
    }

    fn apply(id: &str, created: bool) -> ChildApply {
        let object = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": format!("web-{id}"), "namespace": "team-a",
                          "labels": { crate::ownership::CHILD_ID_LABEL: id } },
        });
        ChildApply {
            key: ObjectKey::of(&object).unwrap(),
            object,
            created,
            initial: None,
        }
    }

    fn observed(uid: &str) -> Value {
        json!({ "apiVersion": "batch/v1", "kind": "Job",
                "metadata": { "name": "web-migrate", "namespace": "team-a", "uid": uid } })
    }

    #[test]
    fn only_a_422_saying_field_is_immutable_is_an_immutable_refusal() {
        let job = "Job.batch \"web-migrate\" is invalid: spec.template: Invalid value: core.PodTemplateSpec{…}: \
                   field is immutable";
        assert!(is_immutable_refusal(422, job));
        assert!(is_immutable_refusal(
            422,
            "ConfigMap \"c\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        ));
        assert!(!is_immutable_refusal(409, job), "a conflict is not");
        assert!(
            !is_immutable_refusal(422, "spec.replicas: Invalid value: -1"),
            "another invalid value is not"
        );
    }

    #[test]
    fn an_immutable_refusal_is_summarised_without_the_value_it_quotes() {
        let job = "Job.batch \"web\" is invalid: spec.template: Invalid value: {\"labels\":{…}}: field is immutable";
        assert_eq!(
            immutable_summary(job),
            "Job.batch \"web\" is invalid: spec.template: field is immutable"
        );
        assert_eq!(
            immutable_summary(
                "ConfigMap \"c\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
            ),
            "ConfigMap \"c\" is invalid: data: field is immutable"
        );
        assert_eq!(immutable_summary("field is immutable"), "field is immutable");
    }

    #[test]
    fn a_recreate_child_observed_with_a_uid_is_recreated_under_that_uid() {
        assert_eq!(
            refused_apply(&rule(), &apply("migrate", false), Some(&observed("u-7"))),
            RefusedApply::Recreate { uid: "u-7".into() }
        );
    }

    #[test]
    fn a_child_without_recreate_is_reported() {
        assert_eq!(
            refused_apply(&rule(), &apply("plain", false), Some(&observed("u-7"))),
            RefusedApply::Report
        );
    }

    #[test]
    fn nothing_observed_or_no_uid_or_a_refused_create_deletes_nothing() {
        let rule = rule();
        assert_eq!(
            refused_apply(&rule, &apply("migrate", false), None),
            RefusedApply::Report
        );
        assert_eq!(
            refused_apply(&rule, &apply("migrate", false), Some(&observed(""))),
            RefusedApply::Report
        );
        assert_eq!(
            refused_apply(&rule, &apply("migrate", true), Some(&observed("u-7"))),
            RefusedApply::Report
        );
    }

    #[test]
    fn an_object_annotated_as_retained_is_never_recreated() {
        let mut retained = observed("u-7");
        retained["metadata"]["annotations"] = json!({ crate::ownership::RETAIN_ANNOTATION: "true" });
        assert_eq!(
            refused_apply(&rule(), &apply("migrate", false), Some(&retained)),
            RefusedApply::Report
        );
    }

    #[test]
    fn an_object_of_no_child_of_the_rule_is_reported() {
        assert_eq!(
            refused_apply(&rule(), &apply("elsewhere", false), Some(&observed("u-7"))),
            RefusedApply::Report
        );
    }
}
