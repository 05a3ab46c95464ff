//! Fights over a child's field: another writer sets a field the rule sets, on consecutive reconciles. Detected
//! from the conflicts an unforced apply reports, told once (a Warning Event, the `Synced` message), not per round.

use std::collections::BTreeMap;

use super::plan::ObjectKey;
use crate::ownership::{HANDOVER_FIELD_MANAGER, PATCH_FIELD_MANAGER_PREFIX, RECONCILER_FIELD_MANAGER};

/// A field of a child that another field manager owned when the rule applied it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FieldConflict {
    /// The child.
    pub child: ObjectKey,
    /// The field as the apiserver names it, e.g. `.spec.replicas`.
    pub field: String,
    /// The other field manager, e.g. `kubectl-edit`.
    pub manager: String,
}

impl std::fmt::Display for FieldConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "field {} of {} is also set by field manager \"{}\"",
            self.field, self.child, self.manager
        )
    }
}

/// The conflicts in an apiserver's answer to an unforced apply (409): its causes of type `FieldManagerConflict`,
/// each a field and a message `conflict with "<manager>"[ using <apiVersion>]`. Ruleplane's own managers are left
/// out (a child's creation under the hand-over manager co-owns fields the reconciler later changes).
pub fn conflicts_of(child: &ObjectKey, causes: &[(String, String)]) -> Vec<FieldConflict> {
    causes
        .iter()
        .filter_map(|(field, message)| {
            let manager = message.split('"').nth(1)?;
            let ours = manager == RECONCILER_FIELD_MANAGER
                || manager == HANDOVER_FIELD_MANAGER
                || manager.starts_with(PATCH_FIELD_MANAGER_PREFIX);
            (!ours).then(|| FieldConflict {
                child: child.clone(),
                field: field.clone(),
                manager: manager.to_string(),
            })
        })
        .collect()
}

/// One parent's fields in dispute: how many consecutive applies of each met the same other manager.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fights {
    rounds: BTreeMap<FieldConflict, u32>,
}

/// From the second consecutive apply that meets the same other manager on a field, it is a fight: once is a hand
/// edit repaired, twice in a row is a writer that puts its value back.
const FIGHT_ROUNDS: u32 = 2;

impl Fights {
    /// Records one apply of `child` and the conflicts it met (none: the apply took nothing from anyone, so fights
    /// over its fields are over). Returns the fights that start now: to report, once.
    pub fn applied(&mut self, child: &ObjectKey, conflicts: &[FieldConflict]) -> Vec<FieldConflict> {
        self.rounds
            .retain(|known, _| known.child != *child || conflicts.contains(known));
        let mut started = Vec::new();
        for conflict in conflicts {
            let rounds = self.rounds.entry(conflict.clone()).or_insert(0);
            *rounds += 1;
            if *rounds == FIGHT_ROUNDS {
                started.push(conflict.clone());
            }
        }
        started
    }

    /// The fights going on (for the `Synced` condition's message).
    pub fn ongoing(&self) -> impl Iterator<Item = &FieldConflict> {
        self.rounds
            .iter()
            .filter(|(_, rounds)| **rounds >= FIGHT_ROUNDS)
            .map(|(conflict, _)| conflict)
    }

    /// What the `Synced` message adds while fights go on: each field and the other manager.
    pub fn message(&self) -> Option<String> {
        let fights: Vec<String> = self.ongoing().map(ToString::to_string).collect();
        (!fights.is_empty()).then(|| {
            format!(
                "another writer keeps changing what the rule sets ({}); list the field in the child's `handOver` \
                 or stop the other writer",
                fights.join("; ")
            )
        })
    }

    /// Whether nothing is in dispute (the parent's entry can go).
    pub fn is_empty(&self) -> bool {
        self.rounds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(name: &str) -> ObjectKey {
        ObjectKey {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: name.into(),
        }
    }

    fn cause(field: &str, manager: &str) -> (String, String) {
        (field.into(), format!("conflict with \"{manager}\" using v1"))
    }

    #[test]
    fn conflicts_name_the_field_and_the_other_manager_but_never_ruleplane_itself() {
        let child = config_map("a");
        let found = conflicts_of(
            &child,
            &[
                cause(".data.mode", "intruder"),
                cause(".spec.replicas", HANDOVER_FIELD_MANAGER),
                (".data.x".into(), "no quotes here".into()),
            ],
        );
        assert_eq!(
            found,
            vec![FieldConflict {
                child,
                field: ".data.mode".into(),
                manager: "intruder".into()
            }]
        );
    }

    #[test]
    fn a_fight_is_reported_once_on_the_second_consecutive_conflict() {
        let child = config_map("a");
        let conflict = conflicts_of(&child, &[cause(".data.mode", "intruder")]);
        let mut fights = Fights::default();
        assert!(
            fights.applied(&child, &conflict).is_empty(),
            "once is a repaired hand edit"
        );
        assert_eq!(fights.message(), None);
        assert_eq!(fights.applied(&child, &conflict), conflict, "twice in a row is a fight");
        for _ in 0..5 {
            assert!(
                fights.applied(&child, &conflict).is_empty(),
                "reported once, not per round"
            );
        }
        let message = fights.message().unwrap_or_default();
        assert!(
            message.contains(".data.mode") && message.contains("intruder"),
            "{message}"
        );
    }

    #[test]
    fn an_apply_without_conflict_ends_the_fight_over_that_child_only() {
        let (a, b) = (config_map("a"), config_map("b"));
        let on_a = conflicts_of(&a, &[cause(".data.mode", "intruder")]);
        let on_b = conflicts_of(&b, &[cause(".data.mode", "intruder")]);
        let mut fights = Fights::default();
        fights.applied(&a, &on_a);
        fights.applied(&b, &on_b);
        fights.applied(&a, &on_a);
        fights.applied(&b, &on_b);
        assert_eq!(fights.ongoing().count(), 2);
        assert!(fights.applied(&a, &[]).is_empty());
        assert_eq!(fights.ongoing().cloned().collect::<Vec<_>>(), on_b);
        assert!(
            fights.applied(&a, &on_a).is_empty(),
            "a new dispute starts counting again"
        );
        assert!(fights.applied(&b, &[]).is_empty());
        assert!(!fights.is_empty());
        fights.applied(&a, &[]);
        assert!(fights.is_empty());
    }

    #[test]
    fn another_manager_on_the_same_field_starts_counting_anew() {
        let child = config_map("a");
        let mut fights = Fights::default();
        fights.applied(&child, &conflicts_of(&child, &[cause(".data.mode", "one")]));
        let other = conflicts_of(&child, &[cause(".data.mode", "two")]);
        assert!(fights.applied(&child, &other).is_empty());
        assert_eq!(fights.applied(&child, &other), other);
    }
}
