//! A SchedulerPolicy as it runs: the document plus the plugin lists resolved at load time.

use std::ops::Deref;

use serde::{Serialize, Serializer};

use super::plugins::FilterPlugin;
use super::types::{ResolvedScore, SchedulerPolicyRule};

/// A loaded SchedulerPolicy: legacy names expanded, the provider's defaults and default weights filled in,
/// JSONPaths compiled. Only the loader makes one, so the scheduler never checks a policy again. Derefs to
/// the rule document as written.
#[derive(Clone, Debug)]
pub struct SchedulerPolicy {
    pub(crate) rule: SchedulerPolicyRule,
    pub(crate) filters: Vec<FilterPlugin>,
    pub(crate) scores: Vec<ResolvedScore>,
}

impl SchedulerPolicy {
    /// The rule document as written.
    pub fn document(&self) -> &SchedulerPolicyRule {
        &self.rule
    }

    /// The filters in effect, in the order they run.
    pub fn filters(&self) -> &[FilterPlugin] {
        &self.filters
    }

    /// The scores in effect, with their weights and arguments.
    pub fn scores(&self) -> &[ResolvedScore] {
        &self.scores
    }
}

impl Deref for SchedulerPolicy {
    type Target = SchedulerPolicyRule;
    fn deref(&self) -> &SchedulerPolicyRule {
        &self.rule
    }
}

/// Two loaded policies are the same when their documents are (the resolution follows from the document).
impl PartialEq for SchedulerPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule
    }
}

impl Serialize for SchedulerPolicy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.rule.serialize(serializer)
    }
}
