//! Startup permission check: asks the apiserver (SelfSubjectAccessReview) for what each rule needs and
//! reports what is missing per rule, instead of a stream of 403s later.

use std::collections::BTreeMap;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use ruleplane_config::{Permission, Rule, RuleSet, manager_permissions, rule_permissions};
use tracing::{debug, warn};

async fn allowed(client: &Client, p: &Permission) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(p.verb.to_owned()),
                group: Some(p.group.clone()),
                resource: Some(p.resource.clone()),
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Returns, per rule (and `manager` for the process itself), the permissions this identity lacks.
pub async fn missing(client: &Client, rules: &RuleSet, lease_namespace: &str) -> Vec<(String, Vec<Permission>)> {
    let mut wanted: Vec<(String, Vec<Permission>)> = vec![("manager".to_owned(), manager_permissions(lease_namespace))];
    // Kinds another tool installs are known only to the apiserver: those it serves now are checked too (one it
    // does not serve yet is checked by the worker's own requests once it is).
    let discovery = crate::kube_client::KindDiscovery::new(client.clone());
    for rule in rules.rules() {
        let permissions = match rule {
            Rule::Reconciler(reconciler) if !reconciler.kinds().unresolved.is_empty() => {
                match discovery.fill_installed_kinds(reconciler).await {
                    Ok(filled) => rule_permissions(&Rule::Reconciler(filled)),
                    Err(e) => {
                        debug!(rule = rule.name(), error = %e, "could not discover the rule's kinds");
                        rule_permissions(rule)
                    }
                }
            }
            _ => rule_permissions(rule),
        };
        wanted.push((rule.name().to_owned(), permissions));
    }
    // Many rules need the same permission: ask once per distinct permission, all at once.
    let mut distinct: Vec<&Permission> = wanted.iter().flat_map(|(_, perms)| perms).collect();
    distinct.sort();
    distinct.dedup();
    let answers = futures::future::join_all(distinct.iter().map(|p| allowed(client, p))).await;
    let mut denied = Vec::new();
    for (p, answer) in distinct.into_iter().zip(answers) {
        match answer {
            Ok(true) => {}
            Ok(false) => denied.push(p.clone()),
            Err(e) => debug!(permission = %p, error = %e, "could not check permission"),
        }
    }
    wanted
        .into_iter()
        .filter_map(|(owner, perms)| {
            let lacking: Vec<Permission> = perms.into_iter().filter(|p| denied.contains(p)).collect();
            (!lacking.is_empty()).then_some((owner, lacking))
        })
        .collect()
}

/// Logs what is missing per rule and returns it for /readyz.
pub async fn report_missing(client: &Client, rules: &RuleSet, lease_namespace: &str) -> BTreeMap<String, Vec<String>> {
    let mut report = BTreeMap::new();
    for (owner, lacking) in missing(client, rules, lease_namespace).await {
        let list: Vec<String> = lacking.iter().map(ToString::to_string).collect();
        warn!(rule = %owner, missing = %list.join("; "), "missing RBAC permissions; grant them (the Helm chart's ClusterRole has them)");
        report.insert(owner, list);
    }
    report
}
