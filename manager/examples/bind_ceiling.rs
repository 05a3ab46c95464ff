//! The scheduler benchmark's ceiling: a loop that only POSTs `pods/binding` for the pending pods of a namespace,
//! round-robin over the nodes, with a fixed concurrency and the same client library as the manager — no
//! watches, no decisions. Prints the figures; used by tests/bench/scheduler.sh.
//!
//! Usage: bind_ceiling KUBECONFIG NAMESPACE CONCURRENCY [events]
//! With `events`, each binding is followed by the `Scheduled` Event a scheduler writes (the same requests as a
//! scheduler, still no decisions).

use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (kubeconfig, namespace, concurrency, with_events) = match args.as_slice() {
        [_, kubeconfig, namespace, concurrency] => (kubeconfig, namespace, concurrency, false),
        [_, kubeconfig, namespace, concurrency, events] if events == "events" => {
            (kubeconfig, namespace, concurrency, true)
        }
        _ => anyhow::bail!("usage: bind_ceiling KUBECONFIG NAMESPACE CONCURRENCY [events]"),
    };
    let concurrency: usize = concurrency.parse()?;
    let config =
        Config::from_custom_kubeconfig(Kubeconfig::read_from(kubeconfig)?, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let started = Instant::now();
    let nodes: Vec<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    anyhow::ensure!(!nodes.is_empty(), "no nodes");
    let pods: Vec<String> = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields("spec.nodeName="))
        .await?
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client, namespace);
    let count = pods.len();
    let results = futures::stream::iter(pods.into_iter().enumerate())
        .map(|(index, name)| {
            let (api, events) = (api.clone(), events.clone());
            let node = nodes[index % nodes.len()].clone();
            async move {
                let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                     "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
                api.create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
                    .await?;
                if with_events {
                    let now = k8s_openapi::jiff::Timestamp::now();
                    let event = Event {
                        metadata: kube::api::ObjectMeta {
                            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                            ..Default::default()
                        },
                        event_time: Some(MicroTime(now)),
                        action: Some("Binding".into()),
                        reason: Some("Scheduled".into()),
                        note: Some(format!("Successfully assigned {name} to {node}")),
                        type_: Some("Normal".into()),
                        regarding: Some(ObjectReference {
                            api_version: Some("v1".into()),
                            kind: Some("Pod".into()),
                            name: Some(name.clone()),
                            namespace: Some(namespace.to_string()),
                            ..Default::default()
                        }),
                        reporting_controller: Some("bind-ceiling".into()),
                        reporting_instance: Some("bind-ceiling".into()),
                        ..Default::default()
                    };
                    events.create(&PostParams::default(), &event).await?;
                }
                Ok::<(), kube::Error>(())
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await;
    let elapsed = started.elapsed().as_secs_f64();
    let failed = results.iter().filter(|r| r.is_err()).count();
    if let Some(Err(error)) = results.iter().find(|r| r.is_err()) {
        eprintln!("first failure: {error}");
    }
    let what = if with_events {
        "bindings + Scheduled Events"
    } else {
        "bindings"
    };
    println!(
        "ceiling ({what}): {count} pods in {elapsed:.2} s = {:.0} pods/s, concurrency {concurrency}, {failed} failed",
        count as f64 / elapsed
    );
    Ok(())
}
