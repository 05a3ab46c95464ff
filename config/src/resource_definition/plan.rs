//! The ResourceDefinition worker's decision (pure): may the desired CRD be applied over what exists?

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::ownership::{is_managed, owning_rule};

/// What the rule allows beyond the safe default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvolutionPolicy {
    pub rule: String,
    /// Take over a CRD that another manager created.
    pub adopt: bool,
    pub allow_storage_version_change: bool,
    pub allow_version_removal: bool,
    /// Rules this rule replaced in a reload while declaring the same CRD (a rename): a CRD labelled with one of
    /// them is this rule's to apply, not another rule's. Only the supervisor that saw the old rule go knows this;
    /// a rename it did not see (made while no manager ran) needs `adopt: true`.
    pub takes_over_from: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdPlan {
    /// No CRD of that name yet.
    Create,
    /// Ours (or adopted): apply the desired state over it.
    Update,
}

/// Why applying is refused. Refusals are permanent: they need a rule change (or a cluster change), not a retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrdRefusal {
    #[error(
        "CustomResourceDefinition {crd} exists and is not managed by ruleplane; set `adopt: true` in the rule to take it over"
    )]
    NotManaged { crd: String },
    #[error(
        "CustomResourceDefinition {crd} is managed by rule {owner}, not by this rule; if {owner} was renamed to this rule while no manager saw it, set `adopt: true` in the rule to take it over"
    )]
    OwnedByOtherRule { crd: String, owner: String },
    #[error(
        "changing the storage version of {crd} from {from} to {to} needs `allowStorageVersionChange: true` (existing objects stay stored as {from} until migrated)"
    )]
    StorageVersionChange { crd: String, from: String, to: String },
    #[error(
        "removing version(s) {versions} of {crd} would orphan stored objects (they are listed in status.storedVersions); migrate them and set `allowVersionRemoval: true`"
    )]
    StoredVersionRemoval { crd: String, versions: String },
}

impl CrdRefusal {
    /// Short, bounded category for metrics and events.
    pub fn category(&self) -> &'static str {
        match self {
            CrdRefusal::NotManaged { .. } => "not-managed",
            CrdRefusal::OwnedByOtherRule { .. } => "owned-by-other-rule",
            CrdRefusal::StorageVersionChange { .. } => "storage-version-change",
            CrdRefusal::StoredVersionRemoval { .. } => "stored-version-removal",
        }
    }
}

fn storage_version(crd: &CustomResourceDefinition) -> Option<&str> {
    crd.spec.versions.iter().find(|v| v.storage).map(|v| v.name.as_str())
}

pub fn plan_crd(
    desired: &CustomResourceDefinition,
    existing: Option<&CustomResourceDefinition>,
    policy: &EvolutionPolicy,
) -> Result<CrdPlan, CrdRefusal> {
    let Some(existing) = existing else {
        return Ok(CrdPlan::Create);
    };
    let crd = existing.metadata.name.clone().unwrap_or_default();
    let labels = existing.metadata.labels.as_ref();
    if !is_managed(labels) {
        if !policy.adopt {
            return Err(CrdRefusal::NotManaged { crd });
        }
    } else if let Some(owner) =
        owning_rule(labels).filter(|o| *o != policy.rule && !policy.takes_over_from.iter().any(|from| from == o))
        && !policy.adopt
    {
        return Err(CrdRefusal::OwnedByOtherRule {
            crd,
            owner: owner.to_owned(),
        });
    }
    if let (Some(from), Some(to)) = (storage_version(existing), storage_version(desired))
        && from != to
        && !policy.allow_storage_version_change
    {
        return Err(CrdRefusal::StorageVersionChange {
            crd,
            from: from.to_owned(),
            to: to.to_owned(),
        });
    }
    let stored = existing.status.as_ref().and_then(|s| s.stored_versions.as_ref());
    let removed: Vec<&str> = stored
        .into_iter()
        .flatten()
        .map(String::as_str)
        .filter(|v| !desired.spec.versions.iter().any(|d| d.name == *v))
        .collect();
    if !removed.is_empty() && !policy.allow_version_removal {
        return Err(CrdRefusal::StoredVersionRemoval {
            crd,
            versions: removed.join(", "),
        });
    }
    Ok(CrdPlan::Update)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(yaml: &str) -> CustomResourceDefinition {
        serde_saphyr::from_str(yaml).expect("fixture parses")
    }

    const DESIRED_V1: &str = r#"
metadata: { name: crontabs.stable.example.com }
spec:
  group: stable.example.com
  scope: Namespaced
  names: { kind: CronTab, plural: crontabs }
  versions:
    - { name: v1, served: true, storage: true }
"#;

    fn existing(labels: &str, versions: &str, stored: &str) -> CustomResourceDefinition {
        crd(&format!(
            r#"
metadata: {{ name: crontabs.stable.example.com, labels: {labels} }}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {{ kind: CronTab, plural: crontabs }}
  versions: {versions}
status:
  storedVersions: {stored}
  acceptedNames: {{ kind: CronTab, plural: crontabs }}
"#
        ))
    }

    fn policy() -> EvolutionPolicy {
        EvolutionPolicy {
            rule: "crontab".into(),
            ..Default::default()
        }
    }

    const OURS: &str = "{ app.kubernetes.io/managed-by: ruleplane, ruleplane.dev/rule: crontab }";

    #[test]
    fn absent_crd_is_created() {
        assert_eq!(plan_crd(&crd(DESIRED_V1), None, &policy()), Ok(CrdPlan::Create));
    }

    #[test]
    fn our_crd_is_updated() {
        let ex = existing(OURS, "[{ name: v1, served: true, storage: true }]", "[v1]");
        assert_eq!(plan_crd(&crd(DESIRED_V1), Some(&ex), &policy()), Ok(CrdPlan::Update));
    }

    #[test]
    fn foreign_crd_is_refused_unless_adopted() {
        let ex = existing("{}", "[{ name: v1, served: true, storage: true }]", "[v1]");
        let refused = plan_crd(&crd(DESIRED_V1), Some(&ex), &policy()).unwrap_err();
        assert_eq!(refused.category(), "not-managed");
        assert!(refused.to_string().contains("adopt: true"), "{refused}");
        let adopt = EvolutionPolicy {
            adopt: true,
            ..policy()
        };
        assert_eq!(plan_crd(&crd(DESIRED_V1), Some(&ex), &adopt), Ok(CrdPlan::Update));
    }

    #[test]
    fn crd_of_another_rule_is_refused() {
        let ex = existing(
            "{ app.kubernetes.io/managed-by: ruleplane, ruleplane.dev/rule: other }",
            "[{ name: v1, served: true, storage: true }]",
            "[v1]",
        );
        let refused = plan_crd(&crd(DESIRED_V1), Some(&ex), &policy()).unwrap_err();
        assert_eq!(
            refused,
            CrdRefusal::OwnedByOtherRule {
                crd: "crontabs.stable.example.com".into(),
                owner: "other".into()
            }
        );
    }

    #[test]
    fn crd_of_a_rule_this_one_replaced_is_taken_over() {
        let ex = existing(
            "{ app.kubernetes.io/managed-by: ruleplane, ruleplane.dev/rule: cron-tab.old }",
            "[{ name: v1, served: true, storage: true }]",
            "[v1]",
        );
        let renamed = EvolutionPolicy {
            takes_over_from: vec!["cron-tab.old".into()],
            ..policy()
        };
        assert_eq!(plan_crd(&crd(DESIRED_V1), Some(&ex), &renamed), Ok(CrdPlan::Update));
        let refused = plan_crd(&crd(DESIRED_V1), Some(&ex), &policy()).unwrap_err();
        assert!(refused.to_string().contains("adopt: true"), "{refused}");
    }

    #[test]
    fn storage_version_change_needs_permission() {
        let ex = existing(
            OURS,
            "[{ name: v1, served: true, storage: false }, { name: v2, served: true, storage: true }]",
            "[v1, v2]",
        );
        let desired = crd(&DESIRED_V1.replace(
            "{ name: v1, served: true, storage: true }",
            "{ name: v1, served: true, storage: true }\n    - { name: v2, served: true, storage: false }",
        ));
        let refused = plan_crd(&desired, Some(&ex), &policy()).unwrap_err();
        assert_eq!(refused.category(), "storage-version-change");
        assert!(refused.to_string().contains("from v2 to v1"), "{refused}");
        let allow = EvolutionPolicy {
            allow_storage_version_change: true,
            ..policy()
        };
        assert_eq!(plan_crd(&desired, Some(&ex), &allow), Ok(CrdPlan::Update));
    }

    #[test]
    fn removing_a_stored_version_needs_permission() {
        let ex = existing(
            OURS,
            "[{ name: v1beta1, served: true, storage: false }, { name: v1, served: true, storage: true }]",
            "[v1beta1, v1]",
        );
        let refused = plan_crd(&crd(DESIRED_V1), Some(&ex), &policy()).unwrap_err();
        assert_eq!(
            refused,
            CrdRefusal::StoredVersionRemoval {
                crd: "crontabs.stable.example.com".into(),
                versions: "v1beta1".into()
            }
        );
        let allow = EvolutionPolicy {
            allow_version_removal: true,
            ..policy()
        };
        assert_eq!(plan_crd(&crd(DESIRED_V1), Some(&ex), &allow), Ok(CrdPlan::Update));
    }

    #[test]
    fn removing_a_never_stored_version_is_fine() {
        let ex = existing(
            OURS,
            "[{ name: v1, served: true, storage: true }, { name: v2alpha1, served: true, storage: false }]",
            "[v1]",
        );
        assert_eq!(plan_crd(&crd(DESIRED_V1), Some(&ex), &policy()), Ok(CrdPlan::Update));
    }
}
