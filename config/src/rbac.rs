//! What the manager needs from RBAC for a rule set (pure): the permission check and `ruleplane rbac` share it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::{KindInfo, Reconciler, Rule, RuleSet};

/// One permission: a verb on group/resource, in a namespace or cluster-wide (`namespace: None`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    /// Kubernetes verb, e.g. `patch`.
    pub verb: &'static str,
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource (plural), optionally with a subresource, e.g. `pods/binding`.
    pub resource: String,
    /// The one object the permission is for (RBAC `resourceNames`); `None` for any object of the resource.
    pub name: Option<String>,
    /// Namespace the permission is needed in; `None` for cluster-wide.
    pub namespace: Option<String>,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group.as_str()
        };
        write!(f, "{} {}.{}", self.verb, self.resource, group)?;
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None => write!(f, " (cluster-wide)"),
        }
    }
}

fn permissions(verbs: &[&'static str], group: &str, resource: &str, namespace: Option<&str>) -> Vec<Permission> {
    verbs
        .iter()
        .map(|verb| Permission {
            verb,
            group: group.to_owned(),
            resource: resource.to_owned(),
            name: None,
            namespace: namespace.map(str::to_owned),
        })
        .collect()
}

/// `verbs` on the one cluster-scoped object `name` (RBAC `resourceNames`).
fn named_permissions(verbs: &[&'static str], group: &str, resource: &str, name: &str) -> Vec<Permission> {
    permissions(verbs, group, resource, None)
        .into_iter()
        .map(|p| Permission {
            name: Some(name.to_owned()),
            ..p
        })
        .collect()
}

const CRD_GROUP: &str = "apiextensions.k8s.io";
const CRDS: &str = "customresourcedefinitions";

/// What a ResourceDefinition's worker does to CRDs: watches them all (one shared watch; `list`/`watch` could only
/// be limited to names through a field selector), creates its own (RBAC cannot limit `create` to names: a new
/// object's name is not known when the request is authorized), reads and applies its own, and deletes its own
/// only with `deletionPolicy: Delete`. Everything by name is limited to the CRD the rule declares.
fn resource_definition_permissions(crd: &str, deletes: bool) -> Vec<Permission> {
    let mut out = named_permissions(&["get"], CRD_GROUP, CRDS, crd);
    out.extend(permissions(&["list", "watch", "create"], CRD_GROUP, CRDS, None));
    out.extend(named_permissions(&["patch"], CRD_GROUP, CRDS, crd));
    if deletes {
        out.extend(named_permissions(&["delete"], CRD_GROUP, CRDS, crd));
    }
    out
}

/// What the manager needs whatever the rules: its Leases (a member Lease per replica and one per unit of work, all
/// watched; a gone replica's member Lease is deleted by the others) and child signing key (read, or created once: a
/// create cannot be limited to one name), both in its own namespace; Events; and the
/// SelfSubjectAccessReviews of the permission check itself.
pub fn manager_permissions(lease_namespace: &str) -> Vec<Permission> {
    let mut out = permissions(
        &["get", "list", "watch", "create", "update", "patch", "delete"],
        "coordination.k8s.io",
        "leases",
        Some(lease_namespace),
    );
    out.extend(permissions(&["create"], "", "secrets", Some(lease_namespace)));
    out.extend(
        named_permissions(&["get"], "", "secrets", crate::provenance::SIGNING_KEY_SECRET)
            .into_iter()
            .map(|p| Permission {
                namespace: Some(lease_namespace.to_owned()),
                ..p
            }),
    );
    out.extend(permissions(&["create", "patch"], "events.k8s.io", "events", None));
    out.extend(permissions(
        &["create"],
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        None,
    ));
    out
}

/// The kinds whose permissions [`rule_permissions`] cannot derive, with the rule reading or writing them: kinds
/// another tool installs whose CRD manifest was not given (`--crds`), so their plural is unknown.
pub fn underived_kinds(rules: &RuleSet) -> Vec<(String, crate::KindRef)> {
    rules
        .reconcilers()
        .flat_map(|reconciler| {
            reconciler
                .kinds()
                .unresolved
                .iter()
                .map(|kind| (reconciler.name().to_owned(), kind.clone()))
        })
        .collect()
}

/// What one rule's worker needs. Kinds without a worker in this version need nothing yet; kinds it cannot
/// derive ([`underived_kinds`]) are left out.
pub fn rule_permissions(rule: &Rule) -> Vec<Permission> {
    match rule {
        Rule::ResourceDefinition(rd) => resource_definition_permissions(&rd.crd_name(), rd.deletes_crd_on_removal()),
        Rule::Reconciler(reconciler) => reconciler_permissions(reconciler),
        Rule::SchedulerPolicy(policy) => scheduler_permissions(policy.preempts()),
    }
}

/// What a Reconciler's worker does: watch its parents, add/remove their cleanup finalizer and write their status (kinds declared by a
/// ResourceDefinition only); watch, server-side apply (create or patch) and prune (delete) its children; watch
/// its lookups. All cluster-wide, as its watches are.
/// What a scheduler reads and writes: kube-scheduler's own needs, minus what Ruleplane does not use (resource
/// claims). Events are in the manager's permissions. Preemption deletes victims; the PodDisruptionBudgets it
/// counts and the storage objects the volume plugins read are watched by the one scheduling cache every policy
/// shares.
fn scheduler_permissions(preempts: bool) -> Vec<Permission> {
    let verbs: &[&str] = if preempts {
        &["get", "list", "watch", "delete"]
    } else {
        &["get", "list", "watch"]
    };
    let mut out = permissions(verbs, "", "pods", None);
    out.extend(permissions(
        &["get", "list", "watch"],
        "policy",
        "poddisruptionbudgets",
        None,
    ));
    out.extend(permissions(&["get", "list", "watch"], "", "nodes", None));
    // Gang scheduling reads pod groups' Workloads (v1.35) or PodGroups (since v1.36), when the apiserver serves
    // the Workload API ...
    for resource in ["workloads", "podgroups"] {
        out.extend(permissions(
            &["get", "list", "watch"],
            "scheduling.k8s.io",
            resource,
            None,
        ));
    }
    // Since v1.36, the condition a pod-group cycle ends with is set on the PodGroup, as kube-scheduler sets it ...
    out.extend(permissions(&["patch"], "scheduling.k8s.io", "podgroups/status", None));
    // ... and the shared watch of CRDs, to learn when scheduler-plugins' PodGroup CRD is installed later.
    out.extend(permissions(&["list", "watch"], CRD_GROUP, CRDS, None));
    // In the Coscheduling dialect, scheduler-plugins' PodGroups (when the apiserver serves their CRD).
    out.extend(permissions(
        &["get", "list", "watch"],
        "scheduling.x-k8s.io",
        "podgroups",
        None,
    ));
    out.extend(permissions(&["create"], "", "pods/binding", None));
    out.extend(permissions(&["patch"], "", "pods/status", None));
    // Namespace labels (pod-affinity namespace selectors) and the workloads default spreading reads.
    for (group, resource) in [
        ("", "namespaces"),
        ("", "services"),
        ("", "replicationcontrollers"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
    ] {
        out.extend(permissions(&["get", "list", "watch"], group, resource, None));
    }
    // The volume plugins' objects (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone).
    for (group, resource) in [
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("storage.k8s.io", "storageclasses"),
        ("storage.k8s.io", "csinodes"),
        ("storage.k8s.io", "csidrivers"),
        ("storage.k8s.io", "csistoragecapacities"),
        ("storage.k8s.io", "volumeattachments"),
    ] {
        out.extend(permissions(&["get", "list", "watch"], group, resource, None));
    }
    // VolumeBinding's PreBind binds static volumes (`claimRef`) and marks claims to provision (the selected node).
    for resource in ["persistentvolumeclaims", "persistentvolumes"] {
        out.extend(permissions(&["update"], "", resource, None));
    }
    out
}

fn reconciler_permissions(reconciler: &Reconciler) -> Vec<Permission> {
    let group_of = |info: &KindInfo| {
        info.api_version
            .split_once('/')
            .map_or("", |(group, _)| group)
            .to_owned()
    };
    let kinds = reconciler.kinds();
    let mut out = Vec::new();
    if let Some(parent) = &kinds.parent {
        // `patch`: the cleanup finalizer, added before children no owner reference can clean up exist (where
        // they land is only known once rendered) and removed at deletion, on release or with the rule.
        out.extend(permissions(
            &["get", "list", "watch", "patch"],
            &group_of(parent),
            &parent.plural,
            None,
        ));
        if reconciler.writes_status() {
            out.extend(permissions(
                &["patch"],
                &group_of(parent),
                &format!("{}/status", parent.plural),
                None,
            ));
        }
    }
    for child in &kinds.children {
        out.extend(permissions(
            &["get", "list", "watch", "create", "patch", "delete"],
            &group_of(child),
            &child.plural,
            None,
        ));
    }
    for lookup in &kinds.lookups {
        out.extend(permissions(
            &["get", "list", "watch"],
            &group_of(lookup),
            &lookup.plural,
            None,
        ));
    }
    // `patches`: the kind's objects watched, set by server-side apply (`patch`), never created or deleted.
    for patched in &kinds.patched {
        out.extend(permissions(
            &["get", "list", "watch", "patch"],
            &group_of(patched),
            &patched.plural,
            None,
        ));
    }
    // A kind a ResourceDefinition of the rule set declares, or another tool installs, is waited for on the shared
    // watch of CRDs.
    if kinds.declared().next().is_some() || kinds.has_installed() {
        out.extend(permissions(&["list", "watch"], CRD_GROUP, CRDS, None));
    }
    out.sort();
    out.dedup();
    out
}

/// Policy rules granting exactly `wanted` (all in one namespace, or all cluster-wide): per group/resource one
/// rule with the verbs allowed on any object, and one per distinct set of object names (`resourceNames`) with the
/// verbs allowed only on those, leaving out verbs already allowed on any object. Sorted and unique: stable,
/// reviewable output.
fn policy_rules<'p>(wanted: impl IntoIterator<Item = &'p Permission>) -> Vec<Value> {
    type Verbs<'p> = (BTreeSet<&'static str>, BTreeMap<&'static str, BTreeSet<&'p str>>);
    let mut by_resource: BTreeMap<(&str, &str), Verbs<'p>> = BTreeMap::new();
    for p in wanted {
        let (any, named) = by_resource.entry((&p.group, &p.resource)).or_default();
        match &p.name {
            None => {
                any.insert(p.verb);
            }
            Some(name) => {
                named.entry(p.verb).or_default().insert(name);
            }
        }
    }
    let mut out = Vec::new();
    for ((group, resource), (any, named)) in by_resource {
        if !any.is_empty() {
            out.push(json!({"apiGroups": [group], "resources": [resource], "verbs": any}));
        }
        let mut by_names: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
        for (verb, names) in named {
            if !any.contains(verb) {
                by_names.entry(names.into_iter().collect()).or_default().push(verb);
            }
        }
        for (names, verbs) in by_names {
            out.push(json!({"apiGroups": [group], "resources": [resource], "resourceNames": names, "verbs": verbs}));
        }
    }
    out
}

/// A ClusterRole for the cluster-wide permissions and a Role (in the Lease's namespace) for the namespaced
/// ones, named `name`: what `ruleplane rbac` prints for GitOps review.
pub fn rbac_manifests(rules: &RuleSet, name: &str, lease_namespace: &str) -> Vec<Value> {
    let mut wanted = manager_permissions(lease_namespace);
    wanted.extend(rules.rules().iter().flat_map(rule_permissions));
    let cluster = policy_rules(wanted.iter().filter(|p| p.namespace.is_none()));
    let mut namespaced: BTreeMap<&str, Vec<&Permission>> = BTreeMap::new();
    for p in &wanted {
        if let Some(ns) = &p.namespace {
            namespaced.entry(ns).or_default().push(p);
        }
    }
    let labels = json!({"app.kubernetes.io/managed-by": "ruleplane"});
    let mut out = vec![json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": cluster,
    })];
    out.extend(namespaced.into_iter().map(|(ns, perms)| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "rules": policy_rules(perms),
        })
    }));
    out
}

/// The Helm chart's values granting what `rules` need, no more: `rbac.customResourceDefinitions` names the CRDs
/// the ResourceDefinition rules declare (`names`) and those they may delete (`deletable`, `deletionPolicy:
/// Delete`), from which the chart renders exactly [`rule_permissions`]' CRD permissions; `rbac.extraRules` holds
/// every other cluster-wide permission the rules derive. The chart itself grants the Lease, Events and
/// SelfSubjectAccessReviews. No wildcard.
pub fn helm_values(rules: &RuleSet) -> Value {
    let mut names = BTreeSet::new();
    let mut deletable = BTreeSet::new();
    let mut granted_by_chart: BTreeSet<Permission> = manager_permissions("release-namespace").into_iter().collect();
    for rd in rules.resource_definitions() {
        let crd = rd.crd_name();
        granted_by_chart.extend(resource_definition_permissions(&crd, rd.deletes_crd_on_removal()));
        if rd.deletes_crd_on_removal() {
            deletable.insert(crd.clone());
        }
        names.insert(crd);
    }
    let extra: Vec<Permission> = rules
        .rules()
        .iter()
        .flat_map(rule_permissions)
        .filter(|p| p.namespace.is_none() && !granted_by_chart.contains(p))
        .collect();
    json!({"rbac": {
        "create": true,
        "customResourceDefinitions": {"names": names, "deletable": deletable},
        "extraRules": policy_rules(&extra),
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: widget.example.com }\n\
        spec: { versions: [ { name: v1 } ] }\n---\n\
        apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: gadget.example.com }\n\
        spec: { deletionPolicy: Delete, versions: [ { name: v1 } ] }\n";

    #[test]
    fn helm_values_name_the_crds_and_hold_no_crd_rule_the_chart_renders() {
        let rules = crate::load_str("rules.yaml", RULES).expect("valid");
        let values = helm_values(&rules);
        assert_eq!(
            values["rbac"]["customResourceDefinitions"],
            json!({"names": ["gadgets.example.com", "widgets.example.com"], "deletable": ["gadgets.example.com"]})
        );
        assert_eq!(
            values["rbac"]["extraRules"],
            json!([]),
            "the chart renders the CRD rules"
        );
        assert!(!values.to_string().contains('*'), "no wildcard");
    }

    #[test]
    fn manifests_limit_crd_verbs_to_the_declared_names_and_split_namespaced_ones() {
        let rules = crate::load_str("rules.yaml", RULES).expect("valid");
        let out = rbac_manifests(&rules, "ruleplane", "ops");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["kind"], "ClusterRole");
        let crd_rules: Vec<&Value> = out[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["resources"][0] == "customresourcedefinitions")
            .collect();
        // `create` and the shared watch for any CRD; reading and applying only the rules' own; `delete` only the
        // one with deletionPolicy: Delete. Each verb once.
        assert_eq!(
            crd_rules,
            [
                &json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                        "verbs": ["create", "list", "watch"]}),
                &json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                        "resourceNames": ["gadgets.example.com"], "verbs": ["delete"]}),
                &json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                        "resourceNames": ["gadgets.example.com", "widgets.example.com"], "verbs": ["get", "patch"]}),
            ]
        );
        assert_eq!(out[1]["kind"], "Role");
        assert_eq!(out[1]["metadata"]["namespace"], "ops");
        // The Lease, and the child signing key: created once by whichever replica finds none, read by name only.
        assert_eq!(
            out[1]["rules"],
            json!([
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["ruleplane-child-signing-key"],
                 "verbs": ["get"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
            ])
        );
    }

    #[test]
    fn a_verb_allowed_on_any_object_is_not_repeated_for_names() {
        let mut wanted = named_permissions(&["get", "delete"], "g", "things", "one");
        wanted.extend(permissions(&["get"], "g", "things", None));
        assert_eq!(
            policy_rules(&wanted),
            [
                json!({"apiGroups": ["g"], "resources": ["things"], "verbs": ["get"]}),
                json!({"apiGroups": ["g"], "resources": ["things"], "resourceNames": ["one"], "verbs": ["delete"]}),
            ]
        );
    }

    #[test]
    fn retained_crds_need_no_delete() {
        let rules = crate::load_str("rules.yaml", RULES.split("---").next().unwrap()).expect("valid");
        let verbs: Vec<&str> = rule_permissions(&rules.rules()[0]).iter().map(|p| p.verb).collect();
        assert!(!verbs.contains(&"delete"), "{verbs:?}");
        let values = helm_values(&rules);
        assert_eq!(values["rbac"]["customResourceDefinitions"]["deletable"], json!([]));
    }
}

#[cfg(test)]
mod reconciler_tests {
    use super::*;

    #[test]
    fn a_reconciler_needs_its_parents_children_and_lookups() {
        let declared = crate::test_rules::resource_definition("cron-tab.example.com", "");
        let rules = crate::load_str(
            "rules.yaml",
            &(declared
                + "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: r }\nspec:\n  \
             for: { apiVersion: example.com/v1, kind: CronTab }\n  \
             lookups: { defaults: { apiVersion: v1, kind: ConfigMap, name: d } }\n  children:\n    \
             - id: job\n      template: |\n        apiVersion: batch/v1\n        kind: CronJob\n        \
             metadata: { name: x }\n"),
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let granted: Vec<String> = rule_permissions(&rules.rules()[1])
            .iter()
            .map(|p| p.to_string())
            .collect();
        for wanted in [
            "watch crontabs.example.com (cluster-wide)",
            "patch crontabs.example.com (cluster-wide)",
            "patch crontabs/status.example.com (cluster-wide)",
            "patch cronjobs.batch (cluster-wide)",
            "create cronjobs.batch (cluster-wide)",
            "delete cronjobs.batch (cluster-wide)",
            "watch configmaps.core (cluster-wide)",
            // Its parent's kind is declared by the rule set: it waits on the watch of CRDs.
            "watch customresourcedefinitions.apiextensions.k8s.io (cluster-wide)",
        ] {
            assert!(
                granted.contains(&wanted.to_string()),
                "{wanted} missing from {granted:?}"
            );
        }
        assert!(
            !granted.iter().any(|p| p.starts_with("delete configmaps")),
            "lookups are only read"
        );
        assert!(
            !granted
                .iter()
                .any(|p| p.contains("crontabs.example.com") && p.starts_with("delete"))
        );
    }

    #[test]
    fn a_selector_lookup_lists_and_watches_its_kind() {
        let rules = crate::load_str(
            "rules.yaml",
            "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: r }\nspec:\n  \
             for: { apiVersion: v1, kind: ConfigMap, name: exposed }\n  \
             lookups: { services: { apiVersion: v1, kind: Service, selector: { matchLabels: { expose: \"true\" } } } }\n  \
             children:\n    - id: ingress\n      template: |\n        apiVersion: networking.k8s.io/v1\n        \
             kind: Ingress\n        metadata: { name: x }\n",
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let granted: Vec<String> = rule_permissions(&rules.rules()[0])
            .iter()
            .map(|p| p.to_string())
            .collect();
        for wanted in [
            "list services.core (cluster-wide)",
            "watch services.core (cluster-wide)",
        ] {
            assert!(
                granted.contains(&wanted.to_string()),
                "{wanted} missing from {granted:?}"
            );
        }
        assert!(
            !granted.iter().any(|p| p.starts_with("patch services")),
            "lookups are only read"
        );
    }
}

#[cfg(test)]
mod patch_tests {
    use super::*;

    #[test]
    fn patches_may_read_and_apply_their_kind_but_never_create_or_delete_it() {
        let children = crate::test_rules::config_map_child("settings", "settings", "", "");
        let rules = crate::load_str(
            "rules.yaml",
            &(crate::test_rules::config_map_reconciler("label-pods", &children)
                + "  patches:\n    - id: team\n      selector: { matchLabels: { app: x } }\n      template: |\n        \
                   apiVersion: v1\n        kind: Pod\n        metadata: { labels: { team: a } }\n"),
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let granted: Vec<String> = rule_permissions(&rules.rules()[0])
            .iter()
            .map(|p| p.to_string())
            .collect();
        for verb in ["get", "list", "watch", "patch"] {
            let wanted = format!("{verb} pods.core (cluster-wide)");
            assert!(granted.contains(&wanted), "{wanted} missing from {granted:?}");
        }
        assert!(
            !granted
                .iter()
                .any(|p| p.starts_with("create pods") || p.starts_with("delete pods")),
            "{granted:?}"
        );
    }
}

#[cfg(test)]
mod scheduler_tests {
    use super::*;

    fn granted(yaml: &str) -> Vec<(String, String, &'static str)> {
        let rules = crate::load_str("policy.yaml", yaml).unwrap_or_else(|d| panic!("{d}"));
        rule_permissions(&rules.rules()[0])
            .into_iter()
            .map(|p| (p.group, p.resource, p.verb))
            .collect()
    }

    #[test]
    fn a_preempting_policy_may_delete_pods_and_every_policy_reads_budgets() {
        let policy = "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: s }\n\
                      spec: { schedulerName: s }\n";
        let preempting = granted(policy);
        let delete_pods = (String::new(), "pods".to_string(), "delete");
        let watch_budgets = ("policy".to_string(), "poddisruptionbudgets".to_string(), "watch");
        assert!(preempting.contains(&delete_pods), "{preempting:?}");
        assert!(preempting.contains(&watch_budgets), "{preempting:?}");
        let watch_workloads = ("scheduling.k8s.io".to_string(), "workloads".to_string(), "watch");
        assert!(preempting.contains(&watch_workloads), "{preempting:?}");
        let pod_group_condition = ("scheduling.k8s.io".to_string(), "podgroups/status".to_string(), "patch");
        assert!(preempting.contains(&pod_group_condition), "{preempting:?}");
        // `none` has no DefaultPreemption: it never deletes a pod.
        let bare = granted(&policy.replace(
            "schedulerName: s }",
            "schedulerName: s, algorithmProvider: none, filters: [NodeResourcesFit] }",
        ));
        assert!(!bare.contains(&delete_pods), "{bare:?}");
        assert!(bare.contains(&watch_budgets), "{bare:?}");
    }

    #[test]
    fn every_policy_watches_the_storage_objects_of_the_volume_plugins() {
        let policy = "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: s }\n\
                      spec: { schedulerName: s }\n";
        let granted = granted(policy);
        for (group, resource) in [
            ("", "persistentvolumeclaims"),
            ("", "persistentvolumes"),
            ("storage.k8s.io", "storageclasses"),
            ("storage.k8s.io", "csinodes"),
            ("storage.k8s.io", "csidrivers"),
            ("storage.k8s.io", "csistoragecapacities"),
            ("storage.k8s.io", "volumeattachments"),
        ] {
            for verb in ["list", "watch"] {
                let wanted = (group.to_string(), resource.to_string(), verb);
                assert!(granted.contains(&wanted), "{wanted:?} in {granted:?}");
            }
        }
        // PreBind's writes.
        for resource in ["persistentvolumeclaims", "persistentvolumes"] {
            let wanted = (String::new(), resource.to_string(), "update");
            assert!(granted.contains(&wanted), "{wanted:?} in {granted:?}");
        }
    }
}
