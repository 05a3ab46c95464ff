//! Kinds another tool installs: how the apiserver serves them, learnt when the worker starts, waited for on the shared watch of CRDs while they are not served.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use ruleplane_config::{KindInfo, KindOrigin, KindRef, Reconciler};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::KIND;
use crate::context::WorkerContext;
use crate::context::WorkerError;
use crate::health::WorkerState;
use crate::watch_hub::SharedWatch;
use crate::workers::resource_definition::{condition, crd_resource};

/// How often a waiting rule asks discovery again: a kind served by an aggregated API (not a CRD) shows up
/// there only. CRDs are seen on their watch the moment they are established.
const REDISCOVER: Duration = Duration::from_secs(60);

/// The rule with the kinds the loader left unresolved (`ruleplane run` loads without their manifests) filled in
/// from what the apiserver serves; waits, saying so in `/readyz?verbose` and the log, while one is not served,
/// and returns as soon as a CRD serving it is established. `None` when stopped meanwhile.
pub(super) async fn with_served_kinds(
    rule: Reconciler,
    ctx: &WorkerContext,
    stop: &CancellationToken,
) -> Result<Option<Reconciler>, WorkerError> {
    if rule.kinds().unresolved.is_empty() {
        return Ok(Some(rule));
    }
    let crds = ctx.hub.watch(&crd_resource());
    let mut changes = crds.subscribe();
    tokio::select! {
        _ = crds.synced() => {}
        _ = stop.cancelled() => return Ok(None),
    }
    let mut ask_discovery = true;
    let mut waiting_for: Option<String> = None;
    loop {
        let mut served = Vec::new();
        let mut missing = Vec::new();
        for kind in &rule.kinds().unresolved {
            let found = match established_crd(&crds, kind) {
                Some(info) => Some(info),
                None if ask_discovery => discovered(ctx, kind).await?,
                None => None,
            };
            match found {
                Some(info) => served.push(info),
                None => missing.push(kind.to_string()),
            }
        }
        if missing.is_empty() {
            if waiting_for.is_some() {
                info!(rule = rule.name(), "the kinds it waited for are served; starting");
                ctx.health.set_rule(rule.name(), KIND, WorkerState::Running);
            }
            return Ok(Some(rule.with_installed_kinds(&served)));
        }
        let message = format!(
            "{} not served by the apiserver: no ResourceDefinition of the rule set declares it, so another tool \
             must install its CRD; the rule starts when it is established",
            missing.join(", ")
        );
        if waiting_for.as_ref() != Some(&message) {
            warn!(rule = rule.name(), "waiting: {message}");
            ctx.health
                .set_rule(rule.name(), KIND, WorkerState::Waiting(message.clone()));
            waiting_for = Some(message);
        }
        tokio::select! {
            change = changes.recv() => {
                if change.is_none() {
                    return Err(WorkerError::WatchEnded("CustomResourceDefinitions".to_owned()));
                }
                ask_discovery = false;
            }
            _ = tokio::time::sleep(REDISCOVER) => ask_discovery = true,
            _ = stop.cancelled() => return Ok(None),
        }
    }
}

/// The kind as an established CRD in the cache serves it. Read from the CRD, not discovery: the apiserver's
/// discovery document follows an established CRD by some milliseconds (a 404 there meanwhile).
pub(crate) fn established_crd(crds: &SharedWatch, wanted: &KindRef) -> Option<KindInfo> {
    let (group, version) = wanted.api_version.split_once('/')?;
    crds.store.state().iter().find_map(|object| {
        let crd: CustomResourceDefinition = crate::watch_hub::typed(object).ok()?;
        let spec = &crd.spec;
        if spec.group != group || spec.names.kind != wanted.kind {
            return None;
        }
        let served = spec.versions.iter().find(|v| v.name == version && v.served)?;
        let established = condition(&crd, "Established").is_some_and(|c| c.status == "True");
        if !established {
            return None;
        }
        Some(KindInfo {
            api_version: wanted.api_version.clone(),
            kind: wanted.kind.clone(),
            plural: spec.names.plural.clone(),
            namespaced: spec.scope == "Namespaced",
            origin: KindOrigin::Installed {
                source: format!(
                    "CustomResourceDefinition {}",
                    crd.metadata.name.as_deref().unwrap_or_default()
                ),
            },
            status_subresource: served.subresources.as_ref().is_some_and(|s| s.status.is_some()),
        })
    })
}

/// The kind as discovery describes it (an aggregated API, or a CRD the watch has not shown yet); `None` when not
/// served. Other failures (the apiserver unreachable) end the attempt: the supervisor retries with backoff.
async fn discovered(ctx: &WorkerContext, kind: &KindRef) -> Result<Option<KindInfo>, WorkerError> {
    match ctx.discovery.served(&kind.api_version, &kind.kind).await {
        Ok(found) => Ok(found.map(|(resource, caps)| crate::kube_client::installed_kind(&resource, &caps))),
        Err(error) => Err(WorkerError::Discovery(format!("{kind}: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::metrics::WatchMetrics;

    fn crd(group: &str, scope: &str, established: bool) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("certificates.{group}")},
            "spec": {"group": group, "scope": scope, "names": {"kind": "Certificate", "plural": "certificates"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                                  {"name": "v2", "served": false, "storage": false}]},
            "status": {"conditions": [{"type": "Established", "status": if established { "True" } else { "False" }}]},
        }))
        .expect("a CRD object")
    }

    fn wanted(api_version: &str) -> KindRef {
        KindRef {
            api_version: api_version.to_owned(),
            kind: "Certificate".to_owned(),
        }
    }

    /// The wait ends on the CRD itself: established and serving the version, with the plural, scope and status
    /// subresource it declares; anything less keeps the rule waiting.
    #[test]
    fn a_kind_is_served_once_its_crd_is_established_and_serves_the_version() {
        let crds = SharedWatch::new(crd_resource(), &WatchMetrics::default());
        assert_eq!(
            established_crd(&crds, &wanted("certs.example.org/v1")),
            None,
            "no CRD yet"
        );
        crds.apply(Event::Apply(crd("certs.example.org", "Cluster", false)));
        assert_eq!(
            established_crd(&crds, &wanted("certs.example.org/v1")),
            None,
            "not established"
        );
        crds.apply(Event::Apply(crd("certs.example.org", "Cluster", true)));
        let info = established_crd(&crds, &wanted("certs.example.org/v1")).expect("served");
        assert_eq!(
            (info.plural.as_str(), info.namespaced, info.status_subresource),
            ("certificates", false, true)
        );
        assert_eq!(
            info.origin,
            KindOrigin::Installed {
                source: "CustomResourceDefinition certificates.certs.example.org".to_owned()
            }
        );
        assert_eq!(
            established_crd(&crds, &wanted("certs.example.org/v2")),
            None,
            "v2 not served"
        );
        assert_eq!(
            established_crd(&crds, &wanted("other.example.org/v1")),
            None,
            "another group"
        );
    }

    /// The CRD watch is read straight from its cache, which a relist replaces: a CRD deleted while the watch was
    /// down is not in the list, and its kind is no longer served.
    #[test]
    fn a_crd_missing_from_a_relist_no_longer_serves_its_kind() {
        let crds = SharedWatch::new(crd_resource(), &WatchMetrics::default());
        crds.apply(Event::Apply(crd("certs.example.org", "Cluster", true)));
        crds.apply(Event::Apply(crd("other.example.org", "Cluster", true)));
        assert!(established_crd(&crds, &wanted("certs.example.org/v1")).is_some());

        crds.apply(Event::Init);
        crds.apply(Event::InitApply(crd("other.example.org", "Cluster", true)));
        crds.apply(Event::InitDone);
        assert_eq!(established_crd(&crds, &wanted("certs.example.org/v1")), None, "gone");
        assert!(
            established_crd(&crds, &wanted("other.example.org/v1")).is_some(),
            "the listed CRD still serves"
        );
    }
}
