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
/// Label carrying the shard of a Reconciler child's parent (`sharding::shard_of`, its decimal number), so a
/// replica's child watches select only the shards it holds and the apiserver filters the rest out.
pub const SHARD_LABEL: &str = "ruleplane.dev/shard";

/// Annotation on children: the fingerprint of the rendered object last applied (see `reconciler::plan`).
pub const APPLIED_ANNOTATION: &str = "ruleplane.dev/applied";
/// Annotation on children: `namespace/name` of the parent (`name` for a cluster-scoped one), so a change of
/// a child finds its parent without an index, also across namespaces where no owner reference can point.
pub const PARENT_ANNOTATION: &str = "ruleplane.dev/parent";

/// Annotation on a unit's Lease (`sharding`): the member asking for the unit, so its holder stops, drains and
/// releases it. Written by the member that should own the unit; cleared by the write that takes the Lease.
pub const HANDOVER_ANNOTATION: &str = "ruleplane.dev/handover-to";

/// Annotation on children of a `retain: true` template: never deleted by Ruleplane, even once the rule no
/// longer says so (the annotation travels with the object).
pub const RETAIN_ANNOTATION: &str = "ruleplane.dev/retain";

/// Whether an object carries [`RETAIN_ANNOTATION`] set to `"true"`: the one reading of it, for pruning, release on
/// the parent's deletion and owner references alike (any other value, `"false"` included, retains nothing).
pub(crate) fn is_retained(object: &serde_json::Value) -> bool {
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
/// Field manager of a child's creation when it has `handOver` fields: that one apply sets them (with the rest of
/// the child), and nothing ever applies under this manager again. The fields keep their value until another
/// controller takes them over, while the reconciler's own applies leave them out (omitting a field its manager
/// solely owned would delete it).
pub const HANDOVER_FIELD_MANAGER: &str = "ruleplane-handover";
/// Prefix of every patch's field manager ([`patch_field_manager`]).
pub const PATCH_FIELD_MANAGER_PREFIX: &str = "ruleplane-patch/";
/// The longest field manager name the apiserver accepts.
const FIELD_MANAGER_MAX: usize = 128;

/// The field manager of one `patches` entry of `rule` for the parent with `parent_uid`:
/// `ruleplane-patch/<rule>/<patch>/<parent-uid>`. One per parent, because two parents may patch the same object
/// (each its own fields): an apply under a manager shared by both would drop the other parent's fields. Names
/// longer than fit in a field manager's 128 characters are shortened with a digest.
pub fn patch_field_manager(rule: &str, patch: &str, parent_uid: &str) -> String {
    let manager = format!("{}{}/{parent_uid}", patch_manager_prefix(rule), shorten(patch, 30));
    debug_assert!(manager.len() <= FIELD_MANAGER_MAX || parent_uid.len() > 36);
    manager
}

/// What every patch field manager of `rule` starts with: a removed rule's patches are found by it.
pub fn patch_manager_prefix(rule: &str) -> String {
    format!("{PATCH_FIELD_MANAGER_PREFIX}{}/", shorten(rule, 40))
}

/// `text` itself when at most `max` bytes long, else its head and a digest of the whole (distinct texts stay
/// distinct, and the result is at most `max` bytes).
fn shorten(text: &str, max: usize) -> String {
    use sha2::Digest as _;
    if text.len() <= max {
        return text.to_string();
    }
    let digest = sha2::Sha256::digest(text.as_bytes());
    let short: String = digest.iter().take(4).map(|byte| format!("{byte:02x}")).collect();
    let mut head = max - short.len() - 1;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    format!("{}-{short}", &text[..head])
}

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
pub(crate) fn is_managed(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels.and_then(|l| l.get(MANAGED_BY_LABEL)).map(String::as_str) == Some(MANAGED_BY_VALUE)
}

/// The rule named in `labels`, if any.
pub(crate) fn owning_rule(labels: Option<&std::collections::BTreeMap<String, String>>) -> Option<&str> {
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
    fn patch_field_managers_are_per_rule_patch_and_parent_and_fit_the_apiserver_limit() {
        let uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        let manager = patch_field_manager("label-pods", "team", uid);
        assert_eq!(manager, format!("ruleplane-patch/label-pods/team/{uid}"));
        assert!(manager.starts_with(&patch_manager_prefix("label-pods")));
        assert!(
            !manager.starts_with(&patch_manager_prefix("label")),
            "a rule's prefix ends with a slash"
        );
        let long_rule = "r".repeat(253);
        let long = patch_field_manager(&long_rule, &"p".repeat(60), uid);
        assert!(long.len() <= FIELD_MANAGER_MAX, "{} bytes", long.len());
        assert!(long.starts_with(&patch_manager_prefix(&long_rule)));
        assert_ne!(
            patch_manager_prefix(&long_rule),
            patch_manager_prefix(&format!("{}x", "r".repeat(252)))
        );
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
