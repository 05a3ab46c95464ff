//! A SchedulerPolicy as it runs: the document plus the engine profile resolved and validated at load time.

use std::ops::Deref;

use serde::{Serialize, Serializer};

use super::engine::{Engine, Profile, ProfileError};
use super::types::SchedulerPolicyRule;

/// A loaded SchedulerPolicy: legacy names expanded, the preset's plugins, weights and args filled in,
/// shorthands merged into the plugin args, everything validated as kube-scheduler validates a profile. Only the
/// loader makes one, so the scheduler never checks a policy again. Derefs to the rule document as written.
#[derive(Clone, Debug)]
pub struct SchedulerPolicy {
    pub(crate) rule: SchedulerPolicyRule,
    pub(crate) profile: Profile,
}

impl SchedulerPolicy {
    /// The rule document as written.
    pub fn document(&self) -> &SchedulerPolicyRule {
        &self.rule
    }

    /// The profile the engine runs.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// A new engine for this policy; `seed` seeds tie-breaking among the best nodes. The loader built one from
    /// the same profile already, so the error is only there to keep the engine's constructor total.
    pub fn engine(&self, seed: u64) -> Result<Engine, ProfileError> {
        Engine::new(&self.profile, seed)
    }

    /// Whether the profile has kube-scheduler's PostFilter plugins (DynamicResources, DefaultPreemption): every
    /// preset does, as kube-scheduler's default profile; `none` is its `disabled: ["*"]`, which has none.
    pub fn preempts(&self) -> bool {
        self.rule.spec.algorithm_provider != super::types::AlgorithmProvider::None
    }

    /// [`SchedulerPolicy::engine`] with the PostFilter chain on when the profile has it ([`SchedulerPolicy::preempts`]).
    pub fn engine_with_post_filters(&self, seed: u64) -> Result<Engine, ProfileError> {
        let mut engine = self.engine(seed)?;
        if self.preempts() {
            engine.enable_preemption();
        }
        Ok(engine)
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
