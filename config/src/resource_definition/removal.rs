//! What a removed ResourceDefinition rule does to its CRD (pure): kept, taken over by a rule of the new set, or deleted.

use crate::resource_definition::ResourceDefinitionRule;
use crate::rule_set::Rule;

/// The fate of a removed rule's CustomResourceDefinition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdRemoval {
    /// `deletionPolicy: Retain`: the CRD and every object of it stay.
    Retain,
    /// A rule of the new set declares the same CRD (the rule was renamed, or another rule replaced it): that rule
    /// takes the CRD over, whatever the removed rule's deletion policy says.
    TakenOver { by: String },
    /// `deletionPolicy: Delete` and no rule of the new set declares the CRD: delete it, if it still carries the
    /// removed rule's label (see [`deletable_by`]).
    Delete,
}

/// Decides what removing `removed` does to its CRD, given the rule set that replaces it.
///
/// The CRD is looked up by name (`<plural>.<group>`) in the new set because that name is what identifies it in
/// the cluster: a rename of the rule (`cron-tab.example.com` → `crontabs.example.com`, or any new
/// `metadata.name` declaring the same CRD) must never run the old rule's `Delete` policy on data the new rule
/// still declares. The loader allows one rule per CRD name, so at most one rule takes over.
pub fn plan_crd_removal(removed: &ResourceDefinitionRule, new_rules: &[Rule]) -> CrdRemoval {
    let crd = removed.crd_name();
    let successor = new_rules.iter().find_map(|rule| match rule {
        Rule::ResourceDefinition(rd) if rd.crd_name() == crd => Some(rd.metadata.name.clone()),
        _ => None,
    });
    match successor {
        Some(by) => CrdRemoval::TakenOver { by },
        None if removed.deletes_crd_on_removal() => CrdRemoval::Delete,
        None => CrdRemoval::Retain,
    }
}

/// Whether a CRD labelled `labels` may be deleted by the removal of rule `rule`: only one that carries that
/// rule's label (not someone else's CRD, not one another rule or another installation now owns).
pub fn deletable_by(labels: Option<&std::collections::BTreeMap<String, String>>, rule: &str) -> bool {
    crate::ownership::is_managed(labels) && crate::ownership::owning_rule(labels) == Some(rule)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rules::{resource_definition as rd, rules};

    fn removed(yaml: &str) -> ResourceDefinitionRule {
        match rules(yaml).remove(0) {
            Rule::ResourceDefinition(rd) => rd,
            other => panic!("not a ResourceDefinition: {other:?}"),
        }
    }

    const RECONCILER: &str = "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: copy }\n\
        spec:\n  for: { apiVersion: v1, kind: ConfigMap }\n  children:\n    - id: c\n      template: |\n        \
        apiVersion: v1\n        kind: ConfigMap\n        metadata: { name: \"{{metadata.name}}-c\" }\n";

    #[test]
    fn a_renamed_delete_policy_rule_hands_its_crd_to_the_rule_that_declares_it_now() {
        let old = removed(&rd("cron-tab.example.com", ", deletionPolicy: Delete"));
        // CRD-style name with an explicit kind: the same CRD, crontabs.example.com.
        let new = rules(&rd("crontabs.example.com", ", names: { kind: CronTab }"));
        assert_eq!(
            plan_crd_removal(&old, &new),
            CrdRemoval::TakenOver {
                by: "crontabs.example.com".into()
            }
        );
    }

    #[test]
    fn a_crd_still_declared_is_taken_over_whatever_the_new_rules_policy() {
        let old = removed(&rd("cron-tab.example.com", ", deletionPolicy: Delete"));
        let new = rules(&rd(
            "crontabs.example.com",
            ", names: { kind: CronTab }, deletionPolicy: Delete",
        ));
        assert!(matches!(plan_crd_removal(&old, &new), CrdRemoval::TakenOver { .. }));
    }

    #[test]
    fn a_delete_policy_rule_whose_crd_nobody_declares_deletes_it() {
        let old = removed(&rd("cron-tab.example.com", ", deletionPolicy: Delete"));
        let others = format!("{}---\n{RECONCILER}", rd("other-thing.example.com", ""));
        assert_eq!(plan_crd_removal(&old, &rules(&others)), CrdRemoval::Delete);
        assert_eq!(plan_crd_removal(&old, &[]), CrdRemoval::Delete);
    }

    #[test]
    fn a_retain_policy_rule_keeps_its_crd() {
        let old = removed(&rd("cron-tab.example.com", ""));
        assert_eq!(plan_crd_removal(&old, &[]), CrdRemoval::Retain);
    }

    #[test]
    fn a_crd_of_the_same_kind_in_another_group_is_not_the_same_crd() {
        let old = removed(&rd("cron-tab.example.com", ", deletionPolicy: Delete"));
        let new = rules(&rd("cron-tab.example.org", ""));
        assert_eq!(plan_crd_removal(&old, &new), CrdRemoval::Delete);
    }

    #[test]
    fn only_a_crd_labelled_with_the_removed_rule_is_deletable() {
        let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let ours = labels(&[
            ("app.kubernetes.io/managed-by", "ruleplane"),
            ("ruleplane.dev/rule", "cron-tab.example.com"),
        ]);
        assert!(deletable_by(Some(&ours), "cron-tab.example.com"));
        assert!(!deletable_by(Some(&ours), "crontabs.example.com"), "another rule's CRD");
        let foreign = labels(&[("ruleplane.dev/rule", "cron-tab.example.com")]);
        assert!(
            !deletable_by(Some(&foreign), "cron-tab.example.com"),
            "not managed by ruleplane"
        );
        assert!(!deletable_by(None, "cron-tab.example.com"));
    }
}
