//! Gang kinds the apiserver serves only after the worker started (a PodGroup CRD installed, the Workload API turned on): watched from then on, without a restart.

// Until then the worker holds their members as kube-scheduler / Coscheduling hold a member whose group does not
// exist (`gangs.rs`): none is bound alone. A CRD is seen on the shared CRD watch the moment it is established (read
// from the CRD, not discovery, which follows it by some milliseconds); a built-in API (the Workload API needs the
// apiserver restarted with its runtime-config) shows up only in discovery, asked now and then.

use std::sync::Arc;
use std::time::Duration;

use kube::api::ApiResource;
use ruleplane_config::KindRef;
use ruleplane_config::scheduler::gang::Dialect;
use tokio::sync::mpsc;
use tracing::info;

use crate::context::WorkerContext;
use crate::watch_hub::SharedWatch;
use crate::workers::reconciler::installed::established_crd;
use crate::workers::resource_definition::crd_resource;

/// How often discovery is asked again for a kind no CRD serves.
const REDISCOVER: Duration = Duration::from_secs(60);

/// A gang kind now served, its watch listed.
pub(super) struct LateKind {
    pub(super) dialect: Dialect,
    pub(super) watch: Arc<SharedWatch>,
}

/// Watches `api_version`/`kind` once the apiserver serves it and sends the watch, listed, on `found`. Ends when
/// the worker's loop is gone (the receiver dropped).
pub(super) fn watch_when_served(
    ctx: &WorkerContext,
    wanted: KindRef,
    dialect: Dialect,
    found: mpsc::UnboundedSender<LateKind>,
) {
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let resource = tokio::select! {
            resource = served(&ctx, &wanted) => resource,
            _ = found.closed() => return,
        };
        let watch = ctx.hub.watch(&resource);
        tokio::select! {
            _ = watch.synced() => {}
            _ = found.closed() => return,
        }
        info!(
            "{} ({}) is served now: gang scheduling in its dialect starts",
            wanted.kind, wanted.api_version
        );
        let _ = found.send(LateKind { dialect, watch });
    });
}

/// Waits until the kind is served: by an established CRD, or as discovery says.
async fn served(ctx: &WorkerContext, wanted: &KindRef) -> ApiResource {
    let crds = ctx.hub.watch(&crd_resource());
    let mut changes = crds.subscribe();
    crds.synced().await;
    let mut ask_discovery = true;
    loop {
        if let Some(info) = established_crd(&crds, wanted) {
            let (group, version) = info.api_version.split_once('/').unwrap_or(("", &info.api_version));
            return ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: info.api_version.clone(),
                kind: info.kind.clone(),
                plural: info.plural.clone(),
            };
        }
        if ask_discovery && let Ok(Some((resource, _))) = ctx.discovery.served(&wanted.api_version, &wanted.kind).await
        {
            return resource;
        }
        tokio::select! {
            change = changes.recv() => {
                ask_discovery = false;
                if change.is_none() {
                    // The CRD watch is gone: discovery alone is left.
                    tokio::time::sleep(REDISCOVER).await;
                    ask_discovery = true;
                }
            }
            _ = tokio::time::sleep(REDISCOVER) => ask_discovery = true,
        }
    }
}
