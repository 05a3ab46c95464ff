//! How Ruleplane marks what it owns: label keys, server-side-apply field managers, the finalizer.
//!
//! Every worker, the offline commands and the generated CRDs read these constants from here; nothing else
//! spells them.

/// Label on everything Ruleplane creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_VALUE: &str = "ruleplane";
/// Label naming the rule that created an object.
pub const RULE_LABEL: &str = "ruleplane.dev/rule";
/// Label carrying the parent's UID on children (pruning, cross-namespace children).
pub const PARENT_UID_LABEL: &str = "ruleplane.dev/parent-uid";
/// Label carrying the child's `id` within its rule.
pub const CHILD_ID_LABEL: &str = "ruleplane.dev/child-id";

/// Annotation on children: the fingerprint of the rendered object last applied (see `reconciler::plan`).
pub const APPLIED_ANNOTATION: &str = "ruleplane.dev/applied";
/// Annotation on children: `namespace/name` of the parent (`name` for a cluster-scoped one), so a change of
/// a child finds its parent without an index, also across namespaces where no owner reference can point.
pub const PARENT_ANNOTATION: &str = "ruleplane.dev/parent";

/// Annotation on children of a `retain: true` template: never deleted by Ruleplane, even once the rule no
/// longer says so (the annotation travels with the object).
pub const RETAIN_ANNOTATION: &str = "ruleplane.dev/retain";

/// Whether an object carries [`RETAIN_ANNOTATION`] set to `"true"`: the one reading of it, for pruning, release on
/// the parent's deletion and owner references alike (any other value, `"false"` included, retains nothing).
pub fn is_retained(object: &serde_json::Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(RETAIN_ANNOTATION))
        .and_then(serde_json::Value::as_str)
        == Some("true")
}

/// Field manager of the ResourceDefinition worker's server-side applies.
pub const CRD_FIELD_MANAGER: &str = "ruleplane-crd";
/// Field manager of the Reconciler worker's server-side applies.
pub const RECONCILER_FIELD_MANAGER: &str = "ruleplane-reconciler";
/// The finalizer one shared by every Reconciler rule (before each rule had its own): still honoured and removed
/// where found, never added.
pub const LEGACY_CLEANUP_FINALIZER: &str = "ruleplane.dev/cleanup";

/// Prefix of the per-rule finalizers ([`cleanup_finalizer`]).
pub const CLEANUP_FINALIZER_PREFIX: &str = "cleanup.ruleplane.dev/";

/// The finalizer a Reconciler rule puts on parents whose cleanup the garbage collector cannot do. One per rule, so
/// two rules on one kind never remove each other's: `cleanup.ruleplane.dev/<rule>`, the rule's name shortened
/// with a digest where it is longer than a finalizer's name part may be (63 characters).
pub fn cleanup_finalizer(rule: &str) -> String {
    use sha2::Digest as _;
    if rule.len() <= 63 {
        return format!("{CLEANUP_FINALIZER_PREFIX}{rule}");
    }
    let digest = sha2::Sha256::digest(rule.as_bytes());
    let short: String = digest.iter().take(4).map(|byte| format!("{byte:02x}")).collect();
    let head = rule[..54].trim_end_matches(['-', '.']);
    format!("{CLEANUP_FINALIZER_PREFIX}{head}-{short}")
}

/// Whether `labels` mark an object as created by Ruleplane.
pub fn is_managed(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels.and_then(|l| l.get(MANAGED_BY_LABEL)).map(String::as_str) == Some(MANAGED_BY_VALUE)
}

/// The rule named in `labels`, if any.
pub fn owning_rule(labels: Option<&std::collections::BTreeMap<String, String>>) -> Option<&str> {
    labels.and_then(|l| l.get(RULE_LABEL)).map(String::as_str)
}

/// Whether `labels` mark an object as a child of `rule` for the parent with `parent_uid` (anything else holding a
/// child's name is a conflict unless the rule adopts).
pub fn is_child_of(labels: &std::collections::BTreeMap<String, String>, rule: &str, parent_uid: &str) -> bool {
    labels.get(RULE_LABEL).map(String::as_str) == Some(rule)
        && labels.get(PARENT_UID_LABEL).map(String::as_str) == Some(parent_uid)
}
/// The `reportingController` of the Events Ruleplane writes.
pub const EVENT_REPORTER: &str = "ruleplane";

#[cfg(test)]
mod finalizer_tests {
    use super::*;

    #[test]
    fn each_rule_has_its_own_finalizer_within_kubernetes_limits() {
        assert_eq!(
            cleanup_finalizer("crontab-to-cronjob"),
            "cleanup.ruleplane.dev/crontab-to-cronjob"
        );
        let long = format!("{}.example.com", "a".repeat(70));
        let finalizer = cleanup_finalizer(&long);
        let name = finalizer.strip_prefix(CLEANUP_FINALIZER_PREFIX).unwrap_or_default();
        assert!(name.len() <= 63, "{name}");
        assert_ne!(finalizer, cleanup_finalizer(&format!("{}.example.org", "a".repeat(70))));
    }

    #[test]
    fn only_true_retains() {
        let annotated =
            |value: serde_json::Value| serde_json::json!({"metadata": {"annotations": {RETAIN_ANNOTATION: value}}});
        assert!(is_retained(&annotated("true".into())));
        assert!(!is_retained(&annotated("false".into())));
        assert!(!is_retained(&annotated("".into())));
        assert!(!is_retained(&serde_json::json!({"metadata": {}})));
    }
}
