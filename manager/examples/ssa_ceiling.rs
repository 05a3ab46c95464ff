//! The Reconciler benchmark's ceiling: a plain server-side-apply loop that applies the same children as the
//! benchmark's rule (a ConfigMap and a Deployment per parent) with the same concurrency and client library, and
//! nothing else — no watches, no rendering, no comparison. Prints the figures; used by tests/bench/reconciler.sh.
//! With PARENT_NAMESPACE (where the benchmark's converged BenchApps `app-0…` are) it also sends, per parent, the
//! writes the Reconciler must send besides the applies: a status merge patch (`observedGeneration` and two
//! conditions, as the worker writes them) and a Normal Event on the parent — the ceiling of any controller that
//! reports as a Reconciler must.
//!
//! Usage: ssa_ceiling KUBECONFIG NAMESPACE PARENTS CONCURRENCY [PARENT_NAMESPACE]

#[path = "bench_objects/mod.rs"]
mod bench_objects;

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
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let started = Instant::now();
    let applied = futures::stream::iter(0..parents)
        .map(|index| {
            let (client, params) = (client.clone(), params.clone());
            let (config_maps, deployments) = (config_maps.clone(), deployments.clone());
            async move {
                let name = format!("ceiling-{index}");
                let (config_map, deployment) =
                    bench_objects::children(&name, &json!("nginx:1.27"), &json!({ "app": name }));
                let cm: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &config_maps);
                let dep: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &deployments);
                cm.patch(&format!("{name}-config"), &params, &Patch::Apply(&config_map))
                    .await?;
                dep.patch(&name, &params, &Patch::Apply(&deployment)).await?;
                if let Some(parent_namespace) = parent_namespace {
                    // A message no earlier run wrote, so the status patch is a real write.
                    let note = format!("created ConfigMap {name}-config, Deployment {name}");
                    let parent = format!("app-{index}");
                    let message = format!("ceiling run {run}");
                    bench_objects::report(client, parent_namespace, &parent, Some(1), &message, ("Created", note))
                        .await?;
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
