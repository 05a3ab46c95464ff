//! The Reconciler benchmark's latency floor: the least a controller can do for the benchmark's rule and still
//! write what a Reconciler must — on each parent change seen on its watch (a new `metadata.generation`), apply
//! the ConfigMap and the Deployment at once, then write the parent's status and a Normal Event. No cache, no
//! rendering, no comparison, no queue. It watches the children as any controller must that puts back a hand
//! edit within a second (a Reconciler does), and does nothing with their events: the apiserver serves those
//! watches for it as for Ruleplane. The latency probe (update_latency) run against it gives the update → child
//! latency the apiserver allows on this machine; used by tests/bench/reconciler.sh.
//!
//! Usage: latency_floor KUBECONFIG NAMESPACE CONCURRENCY   (runs until killed)

#[path = "bench_objects/mod.rs"]
mod bench_objects;

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, kubeconfig, namespace, concurrency] = args.as_slice() else {
        anyhow::bail!("usage: latency_floor KUBECONFIG NAMESPACE CONCURRENCY");
    };
    let concurrency: usize = concurrency.parse()?;
    let config =
        Config::from_custom_kubeconfig(Kubeconfig::read_from(kubeconfig)?, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &bench_objects::bench_apps());
    let children = watcher::Config::default().labels("app.kubernetes.io/managed-by=ruleplane");
    for kind in [
        ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind);
        let mut events = watcher(api, children.clone()).boxed();
        tokio::spawn(async move { while let Ok(Some(_)) = events.try_next().await {} });
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let mut events = watcher(apps, watcher::Config::default()).boxed();
    while let Some(event) = events.try_next().await? {
        if matches!(event, watcher::Event::InitDone) {
            println!("latency floor: watching BenchApps in {namespace}");
        }
        let watcher::Event::Apply(parent) = event else { continue };
        let generation = parent.metadata.generation;
        let observed = parent
            .data
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64);
        if generation.is_none() || generation == observed {
            continue;
        }
        let slot = slots.clone().acquire_owned().await?;
        let (client, namespace) = (client.clone(), namespace.clone());
        tokio::spawn(async move {
            if let Err(error) = reconcile(client, &namespace, parent).await {
                eprintln!("latency floor: {error}");
            }
            drop(slot);
        });
    }
    Ok(())
}

async fn reconcile(client: Client, namespace: &str, parent: DynamicObject) -> anyhow::Result<()> {
    let name = parent.name_any();
    let image = parent.data.pointer("/spec/image").cloned().unwrap_or(Value::Null);
    let labels = json!({ "app": name, "app.kubernetes.io/managed-by": "ruleplane" });
    let (config_map, deployment) = bench_objects::children(&name, &image, &labels);
    let params = PatchParams::apply("latency-floor").force();
    let config_maps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let config_map_name = format!("{name}-config");
    let (config_map_patch, deployment_patch) = (Patch::Apply(&config_map), Patch::Apply(&deployment));
    let (applied_config_map, applied_deployment) = futures::join!(
        config_maps.patch(&config_map_name, &params, &config_map_patch),
        deployments.patch(&name, &params, &deployment_patch),
    );
    applied_config_map?;
    applied_deployment?;
    let note = format!("updated ConfigMap {namespace}/{name}-config, Deployment {namespace}/{name}");
    bench_objects::report(
        client,
        namespace,
        &name,
        parent.metadata.generation,
        "2 children applied",
        ("Updated", note),
    )
    .await?;
    Ok(())
}
