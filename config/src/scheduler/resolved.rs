//! A SchedulerPolicy as it runs: the document plus the engine profile resolved and validated at load time.

use std::collections::BTreeSet;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::engine::{Engine, Profile, ProfileError};
use super::types::{SchedulerPolicyRule, VictimScope};
use crate::KubernetesVersion;

/// A loaded SchedulerPolicy: legacy names expanded, the preset's plugins, weights and args filled in,
/// shorthands merged into the plugin args, everything validated as kube-scheduler validates a profile. Only the
/// loader makes one, so the scheduler never checks a policy again. Derefs to the rule document as written.
#[derive(Clone, Debug)]
pub struct SchedulerPolicy {
    pub(crate) rule: SchedulerPolicyRule,
    pub(crate) profile: Profile,
    /// The scheduler names of every SchedulerPolicy of the rule set (filled by the loader): the victims
    /// `preemption.victims: RuleplaneScheduled` allows.
    pub(crate) ruleplane_schedulers: Arc<BTreeSet<String>>,
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

    /// A new engine for this policy behaving as kube-scheduler of `version` (the server's minor for the worker,
    /// the rule set's for the offline tools); `seed` seeds tie-breaking among the best nodes. The loader built one
    /// from the same profile already, so the error is only there to keep the engine's constructor total.
    pub fn engine(&self, seed: u64, version: KubernetesVersion) -> Result<Engine, ProfileError> {
        Engine::for_version(&self.profile, version, seed)
    }

    /// Whether the profile has kube-scheduler's PostFilter plugins (DynamicResources, DefaultPreemption): every
    /// preset does, as kube-scheduler's default profile; `none` is its `disabled: ["*"]`, which has none.
    pub fn preempts(&self) -> bool {
        self.rule.spec.algorithm_provider != super::types::AlgorithmProvider::None
    }

    /// [`SchedulerPolicy::engine`] with the PostFilter chain on when the profile has it ([`SchedulerPolicy::preempts`]).
    pub fn engine_with_post_filters(&self, seed: u64, version: KubernetesVersion) -> Result<Engine, ProfileError> {
        let mut engine = self.engine(seed, version)?;
        if self.preempts() {
            engine.enable_preemption();
            if self.limits_victims() {
                engine.limit_victims_to(self.ruleplane_schedulers.as_ref().clone());
            }
            if !self.ruleplane_schedulers.is_empty() {
                engine.nominate_only_for(self.ruleplane_schedulers.as_ref().clone());
            }
        }
        Ok(engine)
    }

    /// Whether the policy gang-schedules pods that name a pod group (GangScheduling, unless `disabledPlugins`
    /// lists it).
    pub fn gang_scheduling(&self) -> bool {
        !self
            .rule
            .spec
            .disabled_plugins
            .iter()
            .any(|name| name == super::gang::GANG_SCHEDULING)
    }

    /// Whether the policy gang-schedules pods naming a PodGroup (scheduler-plugins' Coscheduling dialect),
    /// unless it disables `Coscheduling`.
    pub fn coscheduling(&self) -> bool {
        !self
            .rule
            .spec
            .disabled_plugins
            .iter()
            .any(|name| name == super::cosched::COSCHEDULING)
    }

    /// Whether `preemption.victims: RuleplaneScheduled` limits victims to pods of the rule set's policies.
    pub(crate) fn limits_victims(&self) -> bool {
        self.rule
            .spec
            .preemption
            .as_ref()
            .is_some_and(|p| p.victims == VictimScope::RuleplaneScheduled)
    }

    /// Sets the scheduler names of every SchedulerPolicy of the rule set (the loader does, once the set is valid).
    pub(crate) fn set_ruleplane_schedulers(&mut self, schedulers: Arc<BTreeSet<String>>) {
        self.ruleplane_schedulers = schedulers;
    }
}

impl Deref for SchedulerPolicy {
    type Target = SchedulerPolicyRule;
    fn deref(&self) -> &SchedulerPolicyRule {
        &self.rule
    }
}

/// Two loaded policies are the same when their documents are (the resolution follows from the document), and,
/// when victims are limited to the rule set's policies, their scheduler names too (a worker restarts with them).
impl PartialEq for SchedulerPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule && (!self.limits_victims() || self.ruleplane_schedulers == other.ruleplane_schedulers)
    }
}

impl Serialize for SchedulerPolicy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.rule.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::json;

    use crate::diagnostics::DiagnosticCode;
    use crate::scheduler::engine::Snapshot;

    const POLICIES: &str = "apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: mine }
spec:
  schedulerName: mine
  preemption:
    victims: RuleplaneScheduled
---
apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: theirs }
spec:
  schedulerName: theirs
";

    #[test]
    fn limited_victims_are_the_rule_sets_schedulers_pods() {
        let rules = crate::load_str("policies.yaml", POLICIES).expect("loads");
        let mut policies = rules.scheduler_policies();
        let (mine, theirs) = (policies.next().unwrap(), policies.next().unwrap());
        assert!(mine.limits_victims() && !theirs.limits_victims());
        let nodes: Vec<Node> = ["n1", "n2"]
            .iter()
            .map(|n| {
                serde_json::from_value(json!({"metadata": {"name": n},
                    "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}}))
                .unwrap()
            })
            .collect();
        let bound = |name: &str, node: &str, scheduler: &str, priority: i32| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"nodeName": node, "schedulerName": scheduler, "priority": priority,
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
            }))
            .unwrap()
        };
        // The other scheduler's pod has the lowest priority: kube-scheduler's rule (and `theirs`) evicts it.
        let snapshot = Snapshot::build(
            nodes,
            vec![
                bound("foreign", "n1", "elsewhere", 0),
                bound("placed", "n2", "theirs", 5),
            ],
        )
        .unwrap();
        let high: Pod = serde_json::from_value(json!({
            "metadata": {"name": "high", "namespace": "default"},
            "spec": {"priority": 10, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
        }))
        .unwrap();
        let victims = |policy: &super::SchedulerPolicy| -> Vec<String> {
            let decision = policy
                .engine_with_post_filters(1, crate::KubernetesVersion::NEWEST)
                .unwrap()
                .schedule(&snapshot, &high)
                .unwrap();
            let preemption = decision
                .post_filter()
                .and_then(|p| p.preemption.clone())
                .expect("preempts");
            preemption.victims.into_iter().map(|v| v.name).collect()
        };
        assert_eq!(victims(theirs), ["foreign"]);
        assert_eq!(victims(mine), ["placed"]);
    }

    #[test]
    fn preemption_options_without_a_preset_are_refused_where_written() {
        let text = "apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: bare }
spec:
  schedulerName: bare
  algorithmProvider: none
  filters: [NodeResourcesFit]
  preemption: { victims: RuleplaneScheduled }
";
        let diagnostics = crate::load_str("bare.yaml", text).unwrap_err();
        let found = diagnostics.iter().next().expect("one problem");
        assert_eq!((found.line, found.column), (8, 15), "{diagnostics}");
        assert_eq!(found.code, DiagnosticCode::Value);
        assert!(found.message.contains("algorithmProvider: none"), "{diagnostics}");
    }

    #[test]
    fn gang_scheduling_is_on_unless_disabled_and_a_wrong_name_is_refused_where_written() {
        let rules = crate::load_str("policies.yaml", POLICIES).expect("loads");
        assert!(
            rules
                .scheduler_policies()
                .all(|p| p.gang_scheduling() && p.coscheduling())
        );
        let text = "apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: loose }
spec:
  schedulerName: loose
  disabledPlugins: [GangScheduling]
";
        let rules = crate::load_str("loose.yaml", text).expect("loads");
        let loose = rules.scheduler_policies().next().expect("a policy");
        assert!(!loose.gang_scheduling() && loose.coscheduling());
        let rules = crate::load_str("loose.yaml", &text.replace("[GangScheduling]", "[Coscheduling]")).expect("loads");
        let loose = rules.scheduler_policies().next().expect("a policy");
        assert!(loose.gang_scheduling() && !loose.coscheduling());
        let diagnostics = crate::load_str(
            "loose.yaml",
            &text.replace("[GangScheduling]", "[GangScheduling, NodeName]"),
        )
        .unwrap_err();
        let found = diagnostics.iter().next().expect("one problem");
        assert_eq!((found.line, found.column), (6, 37), "{diagnostics}");
        assert_eq!(found.code, DiagnosticCode::UnknownPlugin);
        assert!(found.message.contains("leave it out"), "{diagnostics}");
    }
}
