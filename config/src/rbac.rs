//! What the manager needs from RBAC for a rule set (pure): the permission check and `ruleplane rbac` share it.

use std::collections::BTreeMap;

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
        match &self.namespace {
            Some(ns) => write!(f, "{} {}.{} in namespace {ns}", self.verb, self.resource, group),
            None => write!(f, "{} {}.{} (cluster-wide)", self.verb, self.resource, group),
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
            namespace: namespace.map(str::to_owned),
        })
        .collect()
}

/// What the manager needs whatever the rules: its leader Lease (watched by standbys), Events, and the
/// SelfSubjectAccessReviews of the permission check itself.
pub fn manager_permissions(lease_namespace: &str) -> Vec<Permission> {
    let mut out = permissions(
        &["get", "list", "watch", "create", "update", "patch"],
        "coordination.k8s.io",
        "leases",
        Some(lease_namespace),
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

/// What one rule's worker needs. Kinds without a worker in this version need nothing yet.
pub fn rule_permissions(rule: &Rule) -> Vec<Permission> {
    match rule {
        Rule::ResourceDefinition(rd) => {
            let mut verbs = vec!["get", "list", "watch", "create", "patch"];
            if rd.deletes_crd_on_removal() {
                verbs.push("delete");
            }
            permissions(&verbs, "apiextensions.k8s.io", "customresourcedefinitions", None)
        }
        Rule::Reconciler(reconciler) => reconciler_permissions(reconciler),
        Rule::SchedulerPolicy(_) => scheduler_permissions(),
    }
}

/// What a Reconciler's worker does: watch its parents, add/remove their cleanup finalizer and write their status (kinds declared by a
/// ResourceDefinition only); watch, server-side apply (create or patch) and prune (delete) its children; watch
/// its lookups. All cluster-wide, as its watches are.
/// What a scheduler reads and writes: kube-scheduler's own needs, minus what Ruleplane does not use (volumes,
/// claims, preemption). Events are in the manager's permissions.
fn scheduler_permissions() -> Vec<Permission> {
    let mut out = permissions(&["get", "list", "watch"], "", "pods", None);
    out.extend(permissions(&["get", "list", "watch"], "", "nodes", None));
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
        if parent.declared_by.is_some() {
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
    out.sort();
    out.dedup();
    out
}

/// A ClusterRole for the cluster-wide permissions and a Role (in the Lease's namespace) for the namespaced
/// ones, named `name`: what `ruleplane rbac` prints for GitOps review or a Helm chart's extra rules.
pub fn rbac_manifests(rules: &RuleSet, name: &str, lease_namespace: &str) -> Vec<Value> {
    let mut wanted = manager_permissions(lease_namespace);
    wanted.extend(rules.rules().iter().flat_map(rule_permissions));
    // One policy rule per (namespace, group, resource), verbs sorted and unique: stable, reviewable output.
    let mut grouped: BTreeMap<(Option<String>, String, String), Vec<&'static str>> = BTreeMap::new();
    for p in wanted {
        let verbs = grouped.entry((p.namespace, p.group, p.resource)).or_default();
        if !verbs.contains(&p.verb) {
            verbs.push(p.verb);
        }
    }
    let policy = |group: &str, resource: &str, verbs: &[&str]| {
        let mut verbs = verbs.to_vec();
        verbs.sort_unstable();
        json!({"apiGroups": [group], "resources": [resource], "verbs": verbs})
    };
    let cluster: Vec<Value> = grouped
        .iter()
        .filter(|((ns, _, _), _)| ns.is_none())
        .map(|((_, g, r), v)| policy(g, r, v))
        .collect();
    let namespaced: BTreeMap<&str, Vec<Value>> = grouped
        .iter()
        .filter_map(|((ns, g, r), v)| Some((ns.as_deref()?, policy(g, r, v))))
        .fold(BTreeMap::new(), |mut acc, (ns, rule)| {
            acc.entry(ns).or_insert_with(Vec::new).push(rule);
            acc
        });
    let labels = json!({"app.kubernetes.io/managed-by": "ruleplane"});
    let mut out = vec![json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": cluster,
    })];
    out.extend(namespaced.into_iter().map(|(ns, rules)| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "rules": rules,
        })
    }));
    out
}

/// The Helm chart's values granting what `rules` need: `rbac.extraRules` with every cluster-wide permission the
/// rules derive (the chart itself grants the Lease, Events and SelfSubjectAccessReviews). The chart's role then
/// holds exactly these, no wildcard.
pub fn helm_values(rules: &RuleSet) -> Value {
    let manifests = rbac_manifests(rules, "ruleplane", "release-namespace");
    let always = ["events.k8s.io/events", "authorization.k8s.io/selfsubjectaccessreviews"];
    let extra: Vec<Value> = manifests
        .first()
        .and_then(|role| role["rules"].as_array())
        .into_iter()
        .flatten()
        .filter(|rule| {
            let key = format!(
                "{}/{}",
                rule["apiGroups"][0].as_str().unwrap_or_default(),
                rule["resources"][0].as_str().unwrap_or_default()
            );
            !always.contains(&key.as_str())
        })
        .cloned()
        .collect();
    json!({"rbac": {"create": true, "extraRules": extra}})
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: widget.example.com }\n\
        spec: { versions: [ { name: v1 } ] }\n---\n\
        apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: gadget.example.com }\n\
        spec: { deletionPolicy: Delete, versions: [ { name: v1 } ] }\n";

    #[test]
    fn helm_values_hold_the_rules_permissions_but_not_what_the_chart_grants() {
        let rules = crate::load_str("rules.yaml", RULES).expect("valid");
        let values = helm_values(&rules);
        let extra = values["rbac"]["extraRules"].as_array().expect("extraRules");
        assert_eq!(extra.len(), 1, "{extra:?}");
        assert_eq!(extra[0]["resources"][0], "customresourcedefinitions");
        assert!(extra[0]["verbs"].as_array().unwrap().iter().any(|v| v == "delete"));
        assert!(!values.to_string().contains('*'), "no wildcard");
    }

    #[test]
    fn manifests_merge_verbs_per_resource_and_split_namespaced_ones() {
        let rules = crate::load_str("rules.yaml", RULES).expect("valid");
        let out = rbac_manifests(&rules, "ruleplane", "ops");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["kind"], "ClusterRole");
        let crd_rule = out[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resources"][0] == "customresourcedefinitions")
            .expect("CRD permissions");
        // `delete` only because one rule has deletionPolicy: Delete; each verb once.
        assert_eq!(
            crd_rule["verbs"],
            json!(["create", "delete", "get", "list", "patch", "watch"])
        );
        assert_eq!(out[1]["kind"], "Role");
        assert_eq!(out[1]["metadata"]["namespace"], "ops");
        assert_eq!(out[1]["rules"][0]["resources"][0], "leases");
        assert_eq!(
            out[1]["rules"][0]["verbs"],
            json!(["create", "get", "list", "patch", "update", "watch"])
        );
    }

    #[test]
    fn retained_crds_need_no_delete() {
        let rules = crate::load_str("rules.yaml", RULES.split("---").next().unwrap()).expect("valid");
        let verbs: Vec<&str> = rule_permissions(&rules.rules()[0]).iter().map(|p| p.verb).collect();
        assert!(!verbs.contains(&"delete"), "{verbs:?}");
    }
}

#[cfg(test)]
mod reconciler_tests {
    use super::*;

    #[test]
    fn a_reconciler_needs_its_parents_children_and_lookups() {
        let rules = crate::load_str(
            "rules.yaml",
            "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: cron-tab.example.com }\n\
             spec: { versions: [ { name: v1 } ] }\n---\n\
             apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: r }\nspec:\n  \
             for: { apiVersion: example.com/v1, kind: CronTab }\n  \
             lookups: { defaults: { apiVersion: v1, kind: ConfigMap, name: d } }\n  children:\n    \
             - id: job\n      template: |\n        apiVersion: batch/v1\n        kind: CronJob\n        \
             metadata: { name: x }\n",
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
}
