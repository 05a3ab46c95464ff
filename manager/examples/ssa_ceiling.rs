//! The Reconciler benchmark's ceiling: a plain server-side-apply loop that applies the same children as the
//! benchmark's rule (a ConfigMap and a Deployment per parent) with the same concurrency and client library, and
//! nothing else — no watches, no rendering, no comparison. Prints the figures; used by tests/bench/reconciler.sh.
//!
//! Usage: ssa_ceiling KUBECONFIG NAMESPACE PARENTS CONCURRENCY

use std::time::Instant;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, kubeconfig, namespace, parents, concurrency] = args.as_slice() else {
        anyhow::bail!("usage: ssa_ceiling KUBECONFIG NAMESPACE PARENTS CONCURRENCY");
    };
    let parents: usize = parents.parse()?;
    let concurrency: usize = concurrency.parse()?;
    let config =
        Config::from_custom_kubeconfig(Kubeconfig::read_from(kubeconfig)?, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let config_maps = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    let deployments = kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
    let params = PatchParams::apply("ssa-ceiling").force();
    let started = Instant::now();
    let applied = futures::stream::iter(0..parents)
        .map(|index| {
            let (client, params) = (client.clone(), params.clone());
            let (config_maps, deployments) = (config_maps.clone(), deployments.clone());
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
                let dep: Api<DynamicObject> = Api::namespaced_with(client, namespace, &deployments);
                cm.patch(&format!("{name}-config"), &params, &Patch::Apply(&config_map))
                    .await?;
                dep.patch(&name, &params, &Patch::Apply(&deployment)).await?;
                Ok::<(), kube::Error>(())
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await;
    let elapsed = started.elapsed().as_secs_f64();
    let failed = applied.iter().filter(|r| r.is_err()).count();
    println!(
        "ceiling: {parents} parents (2 applies each) in {elapsed:.2} s = {:.0} parents/s, concurrency {concurrency}, {failed} failed",
        parents as f64 / elapsed
    );
    Ok(())
}
