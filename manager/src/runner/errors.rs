//! The error policy every worker shares: each error counted, the rule degraded when the error says so, and each distinct error of a key logged and reported once, not on every retry.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use tracing::warn;

use crate::health::{Health, WorkerState};
use crate::metrics::{Metrics, RuleErrorLabels};

/// One error of a key, as the policy needs it.
pub struct Failure<'a> {
    /// The metric label (`reconcile_errors`' `category`).
    pub category: &'static str,
    /// Whether the error marks the rule degraded in `/readyz`.
    pub degrades: bool,
    /// The error's text, as logged and shown in `/readyz`.
    pub message: &'a str,
    /// What makes two errors of a key the same report (usually the text).
    pub same_as: String,
}

/// The errors each key was last reported for, and the rule's metrics and health they go to.
pub struct ErrorReports<K> {
    rule: String,
    kind: &'static str,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    last: HashMap<K, String>,
}

impl<K: Eq + Hash + Clone + Debug> ErrorReports<K> {
    pub fn new(rule: &str, kind: &'static str, metrics: Arc<Metrics>, health: Arc<Health>) -> Self {
        ErrorReports {
            rule: rule.to_string(),
            kind,
            metrics,
            health,
            last: HashMap::new(),
        }
    }

    /// An error of `key`: counted, the rule degraded when it says so, and, when it differs from the key's last
    /// report, logged and remembered. Answers whether the caller reports it now (an Event, a condition).
    pub fn failed(&mut self, key: &K, failure: Failure<'_>, what: &str) -> bool {
        self.metrics
            .reconcile_errors
            .get_or_create(&RuleErrorLabels {
                rule: self.rule.clone(),
                kind: self.kind.to_owned(),
                category: failure.category.to_owned(),
            })
            .inc();
        if failure.degrades {
            self.health.set_rule(
                &self.rule,
                self.kind,
                WorkerState::Degraded(failure.message.to_string()),
            );
        }
        if self.last.get(key) == Some(&failure.same_as) {
            return false;
        }
        warn!(rule = %self.rule, key = ?key, category = failure.category, error = %failure.message, "{what}");
        self.last.insert(key.clone(), failure.same_as);
        true
    }

    /// The key succeeded or left: its last report is forgotten. Answers whether it had one.
    pub fn forget(&mut self, key: &K) -> bool {
        self.last.remove(key).is_some()
    }

    /// Whether no key has an error reported.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// The keys with an error reported.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.last.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(message: &str) -> Failure<'_> {
        Failure {
            category: "transient",
            degrades: true,
            message,
            same_as: message.to_string(),
        }
    }

    #[test]
    fn each_distinct_error_of_a_key_is_reported_once_and_again_after_it_was_forgotten() {
        let health = Arc::new(Health::default());
        let mut reports = ErrorReports::new("r", "Reconciler", Arc::new(Metrics::new()), health);
        assert!(reports.failed(&"a", failure("timeout"), "failed"));
        assert!(
            !reports.failed(&"a", failure("timeout"), "failed"),
            "the same error again"
        );
        assert!(reports.failed(&"b", failure("timeout"), "failed"), "another key's");
        assert!(reports.failed(&"a", failure("refused"), "failed"), "another error");
        assert!(reports.forget(&"a") && !reports.forget(&"a"));
        assert!(reports.failed(&"a", failure("refused"), "failed"), "after a success");
        assert_eq!(reports.keys().count(), 2);
    }
}
