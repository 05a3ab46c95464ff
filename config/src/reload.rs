//! Which reloads are refused (pure): one that empties the rule set, or drops every ResourceDefinition rule.

use crate::resource_definition::{CrdRemoval, plan_crd_removal};
use crate::rule_set::Rule;

/// Why a valid new rule set does not replace the running one. Such a set is far more often a broken source (a
/// ConfigMap that lost its keys, a GitOps sync of the wrong path) than an intent, and running it would stop every
/// worker and apply the removed rules' deletion policies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadRefusal {
    #[error("the new rule set is empty: it removes all {removed} rules{}", would_delete(deletes))]
    RemovesEveryRule {
        removed: usize,
        /// CRDs whose removed rule says `deletionPolicy: Delete`.
        deletes: Vec<String>,
    },
    #[error(
        "the new rule set removes every ResourceDefinition rule ({}){}",
        removed.join(", "),
        would_delete(deletes)
    )]
    RemovesEveryResourceDefinition {
        /// The ResourceDefinition rules of the running set.
        removed: Vec<String>,
        deletes: Vec<String>,
    },
}

fn would_delete(crds: &[String]) -> String {
    if crds.is_empty() {
        String::new()
    } else {
        format!(
            " (deletionPolicy: Delete would delete CustomResourceDefinition {} and every object of it)",
            crds.join(", ")
        )
    }
}

/// Whether `new` may replace the running `previous` set. Allowed when `allow_empty` (the operator opted in), when
/// nothing ran before (at startup nothing is at risk), and whenever the new set keeps a rule — and a
/// ResourceDefinition rule if the running set had one.
pub fn check_reload<'a>(
    previous: impl IntoIterator<Item = &'a Rule>,
    new: &[Rule],
    allow_empty: bool,
) -> Result<(), ReloadRefusal> {
    let previous: Vec<&Rule> = previous.into_iter().collect();
    if allow_empty || previous.is_empty() {
        return Ok(());
    }
    let resource_definitions = |rules: &[&'a Rule]| {
        rules
            .iter()
            .filter_map(|rule| match rule {
                Rule::ResourceDefinition(rd) => Some(rd),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let removed_rds = resource_definitions(&previous);
    let deletes: Vec<String> = removed_rds
        .iter()
        .filter(|rd| plan_crd_removal(rd, new) == CrdRemoval::Delete)
        .map(|rd| rd.crd_name())
        .collect();
    if new.is_empty() {
        return Err(ReloadRefusal::RemovesEveryRule {
            removed: previous.len(),
            deletes,
        });
    }
    if !removed_rds.is_empty() && !new.iter().any(|rule| matches!(rule, Rule::ResourceDefinition(_))) {
        return Err(ReloadRefusal::RemovesEveryResourceDefinition {
            removed: removed_rds.iter().map(|rd| rd.metadata.name.clone()).collect(),
            deletes,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rules::{resource_definition as rd, rules};

    const POLICY: &str = "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: s }\n\
        spec: { schedulerName: mine }\n---\n";

    #[test]
    fn an_empty_set_replacing_a_running_one_is_refused_and_names_what_it_would_delete() {
        let previous = rules(&format!(
            "{}{}{POLICY}",
            rd("cron-tab.example.com", ", deletionPolicy: Delete"),
            rd("kept.example.com", "")
        ));
        let refused = check_reload(&previous, &[], false).unwrap_err();
        assert_eq!(
            refused,
            ReloadRefusal::RemovesEveryRule {
                removed: 3,
                deletes: vec!["crontabs.example.com".into()]
            }
        );
        assert_eq!(
            refused.to_string(),
            "the new rule set is empty: it removes all 3 rules (deletionPolicy: Delete would delete \
             CustomResourceDefinition crontabs.example.com and every object of it)"
        );
    }

    #[test]
    fn a_set_without_the_resource_definitions_of_the_running_one_is_refused() {
        let previous = rules(&format!("{}{POLICY}", rd("kept.example.com", "")));
        let refused = check_reload(&previous, &rules(POLICY), false).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the new rule set removes every ResourceDefinition rule (kept.example.com)"
        );
    }

    #[test]
    fn the_operator_may_allow_either() {
        let previous = rules(&format!(
            "{}{POLICY}",
            rd("cron-tab.example.com", ", deletionPolicy: Delete")
        ));
        assert_eq!(check_reload(&previous, &[], true), Ok(()));
        assert_eq!(check_reload(&previous, &rules(POLICY), true), Ok(()));
    }

    #[test]
    fn at_startup_an_empty_set_puts_nothing_at_risk() {
        assert_eq!(check_reload(&[], &[], false), Ok(()));
    }

    #[test]
    fn removing_some_rules_or_renaming_the_last_resource_definition_is_an_ordinary_reload() {
        let previous = rules(&format!(
            "{}{}{POLICY}",
            rd("cron-tab.example.com", ", deletionPolicy: Delete"),
            rd("kept.example.com", "")
        ));
        let fewer = rules(&rd("kept.example.com", ""));
        assert_eq!(check_reload(&previous, &fewer, false), Ok(()));
        let renamed = rules(&rd("crontabs.example.com", ", names: { kind: CronTab }"));
        assert_eq!(check_reload(&previous, &renamed, false), Ok(()));
        // A set that never had a ResourceDefinition may lose its other rules one by one, but not all at once.
        let policies = rules(POLICY);
        assert_eq!(check_reload(&policies, &policies, false), Ok(()));
        assert!(check_reload(&policies, &[], false).is_err());
    }
}
