//! The Reconciler benchmark's ceiling: a plain server-side-apply loop that applies the same children as the
//! benchmark's rule (a ConfigMap and a Deployment per parent) with the same concurrency and client library, and
//! nothing else — no watches, no rendering, no comparison. Prints the figures; used by tests/bench/reconciler.sh.
//! With PARENT_NAMESPACE (where the benchmark's converged BenchApps `app-0…` are) it also sends, per parent, the
//! writes the Reconciler must send besides the applies: a status merge patch (`observedGeneration` and two
//! conditions, as the worker writes them) and a Normal Event on the parent — the ceiling of any controller that
//! reports as the issue requires.
//!
//! Usage: ssa_ceiling KUBECONFIG NAMESPACE PARENTS CONCURRENCY [PARENT_NAMESPACE]

use std::time::Instant;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (kubeconfig, namespace, parents, concurrency, parent_namespace) = match args.as_slice() {
        [_, k, n, p, c] => (k, n, p, c, None),
        [_, k, n, p, c, parent_namespace] => (k, n, p, c, Some(parent_namespace.as_str())),
        _ => anyhow::bail!("usage: ssa_ceiling KUBECONFIG NAMESPACE PARENTS CONCURRENCY [PARENT_NAMESPACE]"),
    };
    let parents: usize = parents.parse()?;
    let concurrency: usize = concurrency.parse()?;
    let config =
        Config::from_custom_kubeconfig(Kubeconfig::read_from(kubeconfig)?, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let config_maps = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    let deployments = kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
    let params = PatchParams::apply("ssa-ceiling").force();
    let bench_apps = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "bench.ruleplane.dev",
        "v1",
        "BenchApp",
    ));
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let started = Instant::now();
    let applied = futures::stream::iter(0..parents)
        .map(|index| {
            let (client, params) = (client.clone(), params.clone());
            let (config_maps, deployments, bench_apps) = (config_maps.clone(), deployments.clone(), bench_apps.clone());
            async move {
                let name = format!("ceiling-{index}");
                let config_map = json!({ "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": format!("{name}-config"), "labels": { "app": name } },
                    "data": { "image": "nginx:1.27", "greeting": "hello" } });
                let deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": { "name": name, "labels": { "app": name } },
                    "spec": { "replicas": 1, "selector": { "matchLabels": { "app": name } },
                        "template": { "metadata": { "labels": { "app": name } },
                            "spec": { "containers": [ { "name": "web", "image": "nginx:1.27",
                                "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } } } ] } } } });
                let cm: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &config_maps);
                let dep: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &deployments);
                cm.patch(&format!("{name}-config"), &params, &Patch::Apply(&config_map))
                    .await?;
                dep.patch(&name, &params, &Patch::Apply(&deployment)).await?;
                if let Some(parent_namespace) = parent_namespace {
                    report(client, parent_namespace, &bench_apps, index, run).await?;
                }
                Ok::<(), kube::Error>(())
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await;
    let elapsed = started.elapsed().as_secs_f64();
    let failed = applied.iter().filter(|r| r.is_err()).count();
    if let Some(Err(error)) = applied.iter().find(|r| r.is_err()) {
        eprintln!("ceiling: first failure: {error}");
    }
    let what = match parent_namespace {
        None => "2 applies each",
        Some(_) => "2 applies, a status patch and an Event each",
    };
    println!(
        "ceiling: {parents} parents ({what}) in {elapsed:.2} s = {:.0} parents/s, concurrency {concurrency}, {failed} failed",
        parents as f64 / elapsed
    );
    Ok(())
}

/// The parent's status as the worker writes it (a value no earlier run wrote, so it is a real write), then a
/// Normal Event on it.
async fn report(
    client: Client,
    namespace: &str,
    bench_apps: &kube::api::ApiResource,
    index: usize,
    run: u64,
) -> Result<(), kube::Error> {
    let name = format!("app-{index}");
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let condition = |kind: &str, reason: &str| {
        json!({ "type": kind, "status": "True", "reason": reason, "observedGeneration": 1,
                "lastTransitionTime": now, "message": format!("ceiling run {run}") })
    };
    let status = json!({ "status": { "observedGeneration": 1,
        "conditions": [condition("Ready", "ChildrenReady"), condition("Synced", "Applied")] } });
    let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, bench_apps);
    let parent = apps
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    let event = json!({ "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": { "name": format!("{name}.{:x}", k8s_openapi::jiff::Timestamp::now().as_nanosecond()),
                      "namespace": namespace },
        "eventTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now()),
        "reportingController": "ssa-ceiling", "reportingInstance": "ssa-ceiling", "action": "Reconcile",
        "reason": "Created", "type": "Normal", "note": format!("created ConfigMap ceiling-{index}-config, Deployment ceiling-{index}"),
        "regarding": { "apiVersion": "bench.ruleplane.dev/v1", "kind": "BenchApp", "namespace": namespace,
            "name": name, "uid": parent.metadata.uid } });
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, namespace);
    events
        .create(
            &Default::default(),
            &serde_json::from_value(event).map_err(kube::Error::SerdeError)?,
        )
        .await?;
    Ok(())
}
