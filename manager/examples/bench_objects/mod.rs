//! What the Reconciler benchmark's reference controllers (ssa_ceiling, latency_floor) write: the benchmark rule's
//! two children, and the parent's status and Event as the Reconciler worker writes them.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The benchmark's parent kind.
pub fn bench_apps() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("bench.ruleplane.dev", "v1", "BenchApp"))
}

/// The rule's ConfigMap and Deployment for parent `name` with `image`, labelled `labels`.
pub fn children(name: &str, image: &Value, labels: &Value) -> (Value, Value) {
    let config_map = json!({ "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": format!("{name}-config"), "labels": labels },
        "data": { "image": image, "greeting": "hello" } });
    let deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "labels": labels },
        "spec": { "replicas": 1, "selector": { "matchLabels": { "app": name } },
            "template": { "metadata": { "labels": { "app": name } },
                "spec": { "containers": [ { "name": "web", "image": image,
                    "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } } } ] } } } });
    (config_map, deployment)
}

/// The parent's status (`observedGeneration`, `Ready` and `Synced` with `message`) as a merge patch through the
/// status subresource, then a Normal Event on it saying `note` — what the worker writes after the applies.
pub async fn report(
    client: Client,
    namespace: &str,
    name: &str,
    generation: Option<i64>,
    message: &str,
    (reason, note): (&str, String),
) -> Result<(), kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let condition = |kind: &str, why: &str| {
        json!({ "type": kind, "status": "True", "reason": why, "observedGeneration": generation,
                "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
                "message": message })
    };
    let status = json!({ "status": { "observedGeneration": generation,
        "conditions": [condition("Ready", "ChildrenReady"), condition("Synced", "Applied")] } });
    let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &bench_apps());
    let parent = apps
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    let event = json!({ "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": { "name": format!("{name}.{:x}", now.as_nanosecond()), "namespace": namespace },
        "eventTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
        "reportingController": "ruleplane-bench", "reportingInstance": "ruleplane-bench", "action": "Reconcile",
        "reason": reason, "type": "Normal", "note": note,
        "regarding": { "apiVersion": "bench.ruleplane.dev/v1", "kind": "BenchApp", "namespace": namespace,
            "name": name, "uid": parent.metadata.uid } });
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, namespace);
    events
        .create(
            &PostParams::default(),
            &serde_json::from_value(event).map_err(kube::Error::SerdeError)?,
        )
        .await?;
    Ok(())
}
