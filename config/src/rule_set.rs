//! `Rule`, `RuleSet` and the kinds a rule set makes available.

use serde::Serialize;

use crate::builtin_kinds::builtin_kind;
use crate::common::RuleKind;
use crate::diagnostics::SourceLocation;
use crate::installed_kinds::InstalledKinds;
pub use crate::kind_info::{KindInfo, KindOrigin};
use crate::reconciler::Reconciler;
use crate::resource_definition::{ResourceDefinitionRule, ResourceScope};
use crate::scheduler::SchedulerPolicy;

/// One loaded, validated rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Rule {
    /// A custom resource type.
    ResourceDefinition(ResourceDefinitionRule),
    /// A controller.
    Reconciler(Reconciler),
    /// A scheduler.
    SchedulerPolicy(SchedulerPolicy),
}

impl Rule {
    /// The rule's `metadata.name`.
    pub fn name(&self) -> &str {
        match self {
            Rule::ResourceDefinition(rule) => &rule.metadata.name,
            Rule::Reconciler(rule) => &rule.metadata.name,
            Rule::SchedulerPolicy(rule) => &rule.metadata.name,
        }
    }

    /// The rule's kind.
    pub fn kind(&self) -> RuleKind {
        match self {
            Rule::ResourceDefinition(_) => RuleKind::ResourceDefinition,
            Rule::Reconciler(_) => RuleKind::Reconciler,
            Rule::SchedulerPolicy(_) => RuleKind::SchedulerPolicy,
        }
    }

    /// Where the rule's document starts.
    pub fn source(&self) -> &SourceLocation {
        match self {
            Rule::ResourceDefinition(rule) => &rule.source,
            Rule::Reconciler(rule) => &rule.source,
            Rule::SchedulerPolicy(rule) => &rule.source,
        }
    }
}

/// The rules loaded from a set of files, in load order (files sorted by path, documents in file order).
#[derive(Clone, Debug, PartialEq, Default, Serialize)]
#[serde(transparent)]
pub struct RuleSet {
    pub(crate) rules: Vec<Rule>,
    /// The kinds of the `--crds` manifests the set was loaded with: knowledge (their schemas check children
    /// offline), never written.
    #[serde(skip)]
    pub(crate) installed: InstalledKinds,
    /// The Kubernetes version the set was loaded for ([`crate::LoadOptions::kubernetes_version`]).
    #[serde(skip)]
    pub(crate) kubernetes_version: crate::KubernetesVersion,
}

impl RuleSet {
    /// The kinds of the CRD manifests the set was loaded with (`--crds`; none at run time).
    pub fn installed(&self) -> &InstalledKinds {
        &self.installed
    }

    /// The Kubernetes version the set was loaded for: the built-in schemas and kube-scheduler behaviour it is
    /// checked and run with.
    pub fn kubernetes_version(&self) -> crate::KubernetesVersion {
        self.kubernetes_version
    }

    /// All rules in load order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule with this name.
    pub fn get(&self, name: &str) -> Option<&Rule> {
        self.rules.iter().find(|rule| rule.name() == name)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when no rules were loaded.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// ResourceDefinition rules.
    pub fn resource_definitions(&self) -> impl Iterator<Item = &ResourceDefinitionRule> {
        self.rules.iter().filter_map(|rule| match rule {
            Rule::ResourceDefinition(rd) => Some(rd),
            _ => None,
        })
    }

    /// Reconciler rules.
    /// What `ruleplane validate` warns about: valid rules with forms worth a second look (raw template output,
    /// Secret data in a status) in load order, then the CRDs' CEL rules that are not checked offline.
    pub fn warnings(&self) -> Vec<crate::reconciler::RuleWarning> {
        self.reconcilers()
            .flat_map(crate::reconciler::reconciler_warnings)
            .chain(crate::object_schema::KindSchemas::of_rule_set(self).skipped_rule_warnings())
            .collect()
    }

    pub fn reconcilers(&self) -> impl Iterator<Item = &Reconciler> {
        self.rules.iter().filter_map(|rule| match rule {
            Rule::Reconciler(reconciler) => Some(reconciler),
            _ => None,
        })
    }

    /// SchedulerPolicy rules.
    pub fn scheduler_policies(&self) -> impl Iterator<Item = &SchedulerPolicy> {
        self.rules.iter().filter_map(|rule| match rule {
            Rule::SchedulerPolicy(policy) => Some(policy),
            _ => None,
        })
    }

    /// Resolves `apiVersion`/`kind` to a kind declared by a ResourceDefinition of this set (served version)
    /// or a built-in kind.
    pub fn resolve_kind(&self, api_version: &str, kind: &str) -> Option<KindInfo> {
        resolve_kind_in(
            self.resource_definitions(),
            &InstalledKinds::default(),
            api_version,
            kind,
        )
    }
}

/// The one place that decides how a kind is served, from every source in order: the rule set's
/// ResourceDefinitions (a rule set's own declaration wins over a vendored CRD of the same name), the built-in
/// kinds, then the CRDs other tools install (`installed`: from `--crds`). `None`: none of them knows it.
pub(crate) fn resolve_kind_in<'r>(
    definitions: impl IntoIterator<Item = &'r ResourceDefinitionRule>,
    installed: &InstalledKinds,
    api_version: &str,
    kind: &str,
) -> Option<KindInfo> {
    for definition in definitions {
        let names = &definition.names;
        if names.kind != kind {
            continue;
        }
        let served = definition
            .spec
            .versions
            .iter()
            .find(|version| version.served && format!("{}/{}", names.group, version.name) == api_version);
        if let Some(version) = served {
            return Some(KindInfo {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                plural: names.plural.clone(),
                namespaced: definition.spec.scope == ResourceScope::Namespaced,
                origin: KindOrigin::Declared {
                    rule: definition.metadata.name.clone(),
                },
                status_subresource: version.subresources.as_ref().is_some_and(|s| s.status.is_some()),
            });
        }
    }
    builtin_kind(api_version, kind)
        .map(|builtin| KindInfo {
            api_version: builtin.api_version.to_string(),
            kind: builtin.kind.to_string(),
            plural: builtin.plural.to_string(),
            namespaced: builtin.namespaced,
            origin: KindOrigin::BuiltIn,
            status_subresource: false,
        })
        .or_else(|| installed.resolve(api_version, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worker builds a declared kind's API resource from this, without asking discovery: the status
    /// subresource comes from the declaring version.
    #[test]
    fn a_declared_kind_knows_its_plural_scope_and_status_subresource_per_version() {
        let rules = crate::load_str(
            "rules.yaml",
            "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: cron-tab.example.com }\n\
             spec:\n  scope: Cluster\n  versions:\n    - { name: v1, storage: true, subresources: { status: {} } }\n    \
             - { name: v2 }\n---\n\
             apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: r }\nspec:\n  \
             for: { apiVersion: example.com/v1, kind: CronTab }\n  children:\n    \
             - id: job\n      template: |\n        apiVersion: batch/v1\n        kind: CronJob\n        \
             metadata: { name: x, namespace: y }\n",
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let Rule::Reconciler(reconciler) = &rules.rules()[1] else {
            panic!("a Reconciler")
        };
        let parent = reconciler.kinds().parent.clone().expect("resolved");
        assert_eq!(
            (parent.plural.as_str(), parent.namespaced, parent.status_subresource),
            ("crontabs", false, true)
        );
        assert_eq!(parent.declared_by(), Some("cron-tab.example.com"));
        let v2 = resolve_kind_in(
            rules.rules().iter().filter_map(|r| match r {
                Rule::ResourceDefinition(rd) => Some(rd),
                _ => None,
            }),
            &InstalledKinds::default(),
            "example.com/v2",
            "CronTab",
        )
        .expect("served");
        assert!(!v2.status_subresource, "v2 declares no status subresource");
        let child = &reconciler.kinds().children[0];
        assert_eq!((child.declared_by(), child.status_subresource), (None, false));
    }
}
