//! The scheduling cache against synthetic watch events: nodes joining late, relists.

use super::*;
use crate::metrics::WatchMetrics;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ApiResource;
use kube::runtime::watcher::Event;
use serde_json::json;

fn unwatched<K: kube::Resource<DynamicType = ()>>(metrics: &WatchMetrics) -> Arc<SharedWatch> {
    SharedWatch::new(ApiResource::erase::<K>(&()), metrics)
}

/// A cache over watches fed by the tests, not by an apiserver.
pub(in crate::workers::scheduler) fn cache() -> Arc<ClusterCache> {
    let metrics = WatchMetrics::default();
    let context = Context {
        namespaces: unwatched::<Namespace>(&metrics),
        services: unwatched::<Service>(&metrics),
        replication_controllers: unwatched::<ReplicationController>(&metrics),
        replica_sets: unwatched::<ReplicaSet>(&metrics),
        stateful_sets: unwatched::<StatefulSet>(&metrics),
        pod_disruption_budgets: unwatched::<PodDisruptionBudget>(&metrics),
        storage: StorageWatches::unwatched(&metrics),
    };
    ClusterCache::new(unwatched::<Node>(&metrics), unwatched::<Pod>(&metrics), context)
}

fn node(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }))
    .expect("node")
}

fn pod(name: &str, node: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }))
    .expect("pod")
}

/// The pods the snapshot accounts on `node`.
async fn placed(cache: &ClusterCache, node: &str) -> Vec<String> {
    cache.refresh().await;
    let state = cache.state.lock().await;
    let mut names: Vec<String> = state
        .snapshot
        .get(node)
        .map(|info| info.pods().iter().map(|p| p.name().to_string()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn pods_bound_to_a_node_the_snapshot_lacks_are_placed_when_it_joins_and_again_when_it_returns() {
    let cache = cache();
    cache.nodes.apply(Event::Apply(node("n0")));
    // Known before the first rebuild: a pod on a node not listed yet.
    cache.pods.apply(Event::Apply(pod("early", "n1")));
    assert!(placed(&cache, "n0").await.is_empty());
    // Seen after the rebuild, bound to a node not there yet.
    cache.pods.apply(Event::Apply(pod("late", "n1")));
    cache.pods.apply(Event::Apply(pod("gone", "n1")));
    cache.pods.apply(Event::Delete(pod("gone", "n1")));
    assert!(placed(&cache, "n1").await.is_empty(), "no node n1 yet");

    cache.nodes.apply(Event::Apply(node("n1")));
    assert_eq!(placed(&cache, "n1").await, ["early", "late"]);

    // The node leaves and comes back: its pods are bound to it still.
    cache.nodes.apply(Event::Delete(node("n1")));
    assert!(placed(&cache, "n1").await.is_empty());
    cache.pods.apply(Event::Delete(pod("early", "n1")));
    cache.nodes.apply(Event::Apply(node("n1")));
    assert_eq!(
        placed(&cache, "n1").await,
        ["late"],
        "a pod deleted meanwhile does not come back"
    );
    assert!(cache.state.lock().await.waiting_for_node.is_empty());
}

fn pending(name: &str) -> DynamicObject {
    let mut object = pod(name, "");
    object.data["spec"]["nodeName"] = serde_json::Value::Null;
    object
}

/// Nodes and pods deleted while the watches were down are not in the relists: the rebuild forgets them, and
/// what was derived from them (a pod assumed here, a nomination made here, a pod waiting for its node).
#[tokio::test]
async fn a_relist_forgets_nodes_and_pods_it_no_longer_lists_with_what_was_derived_from_them() {
    let cache = cache();
    for name in ["n0", "n1"] {
        cache.nodes.apply(Event::Apply(node(name)));
    }
    for object in [
        pod("a", "n0"),
        pod("b", "n0"),
        pod("early", "n2"),
        pending("p"),
        pending("q"),
    ] {
        cache.pods.apply(Event::Apply(object));
    }
    assert_eq!(placed(&cache, "n0").await, ["a", "b"]);
    {
        let mut state = cache.state.lock().await;
        let assumed: Pod = typed(&pending("p")).expect("pod");
        state.snapshot.assume(&assumed, "n1").expect("room on n1");
        state.assumed.insert(pod_key(&assumed), "n1".into());
        let nominated: Pod = typed(&pending("q")).expect("pod");
        state
            .nominations
            .record(pod_key(&nominated), &nominated, &Nominate::Set("n0".into()));
        assert!(state.waiting_for_node.contains_key("n2"));
    }

    // While the watches were down: n1 was deleted, and every pod but `a`.
    cache.nodes.apply(Event::Init);
    cache.nodes.apply(Event::InitApply(node("n0")));
    cache.nodes.apply(Event::InitDone);
    cache.pods.apply(Event::Init);
    cache.pods.apply(Event::InitApply(pod("a", "n0")));
    cache.pods.apply(Event::InitDone);
    assert_eq!(placed(&cache, "n0").await, ["a"]);
    let state = cache.state.lock().await;
    assert!(state.snapshot.get("n1").is_none(), "the node is forgotten");
    assert!(state.assumed.is_empty(), "the pod assumed on it is forgotten");
    assert!(
        !state.nominations.is_made("uid-q"),
        "the nomination made for `q` is forgotten"
    );
    assert!(state.waiting_for_node.is_empty(), "`early` no longer waits for n2");
}
