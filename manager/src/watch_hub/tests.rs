//! Shared watches fed synthetic events: caches, notifications, indexes, admission.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

use kube::ResourceExt;

use super::cache::ObjectCache;
use super::feed::CHANNEL_CAPACITY;
use super::*;
use crate::metrics::{KindLabels, WatchLabels};

fn config_maps() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
}

#[test]
fn an_identity_only_watch_keeps_name_namespace_uid_and_version_nothing_else() {
    let meta: PartialObjectMeta<DynamicObject> = serde_json::from_value(serde_json::json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {
            "name": "settings", "namespace": "shop", "uid": "u1", "resourceVersion": "42",
            "labels": { "app": "shop" },
            "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"big\":\"...\"}}" },
            "ownerReferences": [{ "apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u0" }],
            "managedFields": [{ "manager": "kubectl", "operation": "Apply" }]
        }
    }))
    .unwrap();
    let identity = identity_only(meta, &config_maps());
    assert_eq!(
        serde_json::to_value(&identity).unwrap(),
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "settings", "namespace": "shop", "uid": "u1", "resourceVersion": "42" }
        })
    );
}

fn object(name: &str, data: &str) -> DynamicObject {
    let mut object = DynamicObject::new(name, &config_maps()).within("default");
    object.data = serde_json::json!({ "data": { "value": data } });
    object.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("kubectl".into()),
        ..Default::default()
    }]);
    object
}

fn names(watch: &SharedWatch) -> BTreeSet<String> {
    watch.store.state().iter().map(|o| o.name_any()).collect()
}

#[tokio::test]
async fn an_admitting_watch_neither_caches_nor_announces_what_it_does_not_admit() {
    let metrics = WatchMetrics::default();
    let admission: Admission = Arc::new(|o: &DynamicObject| o.labels().get("proof").is_some_and(|v| v == "ok"));
    let watch = SharedWatch::admitting(config_maps(), &metrics, admission);
    let mut subscription = watch.subscribe();
    let proven = |name: &str, data: &str| {
        let mut o = object(name, data);
        o.metadata.labels = Some([("proof".to_owned(), "ok".to_owned())].into());
        o
    };
    watch.apply(Event::Init);
    watch.apply(Event::InitApply(object("forged-at-list", "x")));
    watch.apply(Event::InitApply(proven("ours", "1")));
    watch.apply(Event::InitDone);
    assert!(matches!(subscription.recv().await, Some(Change::Resync)));
    assert_eq!(
        names(&watch),
        BTreeSet::from(["ours".to_owned()]),
        "only the proven object is cached"
    );
    watch.apply(Event::Apply(object("forged", "x")));
    watch.apply(Event::Delete(object("forged", "x")));
    // An object of ours whose proof is gone (its labels edited): gone for readers, announced with its last
    // proven state.
    watch.apply(Event::Apply(object("ours", "edited")));
    match subscription.recv().await {
        Some(Change::Deleted(o)) => {
            assert_eq!(o.name_any(), "ours");
            assert_eq!(o.data["data"]["value"], "1", "the last admitted state");
        }
        other => panic!("expected the unproven version to read as a deletion, got {other:?}"),
    }
    assert!(names(&watch).is_empty());
    let unproven = metrics.unproven.get_or_create(&KindLabels::of(&config_maps())).get();
    assert_eq!(unproven, 4, "every refused event is counted");
}

#[tokio::test]
async fn notifications_say_applied_or_deleted_and_carry_the_object_without_managed_fields() {
    let watch = SharedWatch::new(config_maps(), &WatchMetrics::default());
    let mut subscription = watch.subscribe();
    watch.apply(Event::Apply(object("a", "1")));
    watch.apply(Event::Delete(object("a", "1")));
    match subscription.recv().await {
        Some(Change::Applied(o)) => {
            assert_eq!(o.name_any(), "a");
            assert!(o.metadata.managed_fields.is_none(), "managedFields stripped");
        }
        other => panic!("expected Applied, got {other:?}"),
    }
    match subscription.recv().await {
        Some(Change::Deleted(o)) => assert_eq!(o.data["data"]["value"], "1", "the deleted object's last state"),
        other => panic!("expected Deleted, got {other:?}"),
    }
    assert!(names(&watch).is_empty(), "the cache no longer has the deleted object");
    let cached = {
        watch.apply(Event::Apply(object("b", "2")));
        watch.get(Some("default"), "b").expect("cached")
    };
    assert!(
        cached.metadata.managed_fields.is_none(),
        "the cache holds no managedFields"
    );
}

#[test]
fn the_cache_serves_objects_as_objects_values_and_types_by_namespace_and_name() {
    serves_objects(ObjectCache::new());
}

fn serves_objects(cache: ObjectCache) {
    cache.upsert(&Arc::new(object("a", "1")));
    let mut namespace = DynamicObject::new(
        "default",
        &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    namespace.data = serde_json::json!({});
    cache.upsert(&Arc::new(namespace));
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.get(Some("default"), "a").expect("a").data["data"]["value"], "1");
    assert_eq!(
        cache.get_value(Some("default"), "a").expect("a")["metadata"]["name"],
        "a"
    );
    let typed: k8s_openapi::api::core::v1::ConfigMap = cache.get_typed(Some("default"), "a").expect("typed");
    assert_eq!(typed.data.expect("data")["value"], "1");
    assert!(
        cache.get(None, "a").is_none(),
        "namespace and name both identify an object"
    );
    assert!(cache.get(None, "default").is_some(), "cluster-scoped objects by name");
    let mut names = cache.map_metadata(|meta| Some((meta.namespace.clone(), meta.name.clone()?)));
    names.sort();
    assert_eq!(
        names,
        vec![
            (None, "default".to_owned()),
            (Some("default".to_owned()), "a".to_owned())
        ],
        "every object's metadata, one at a time"
    );
    let in_default = cache.values_in(Some("default"));
    assert_eq!(in_default.len(), 1, "the namespace's objects only");
    assert_eq!(in_default[0]["metadata"]["name"], "a");
    assert_eq!(
        cache.values_in(None).len(),
        2,
        "every namespace and the cluster-scoped ones"
    );
    cache.upsert(&Arc::new(object("a", "2")));
    assert_eq!(cache.get_value(Some("default"), "a").expect("a")["data"]["value"], "2");
    cache.remove(&object("a", "2"));
    assert!(cache.get(Some("default"), "a").is_none());
    assert_eq!(cache.len(), 1);
}

#[test]
fn an_indexed_cache_finds_objects_by_two_label_values_through_changes_deletions_and_relists() {
    let mut key = KindKey::of(&config_maps());
    key.indexed_by = Some(["rule", "parent"]);
    let watch = SharedWatch::selected(config_maps(), key, &WatchMetrics::default(), None);
    let labelled = |rule: &str, name: &str, parent: Option<&str>| {
        let mut object = object(name, "x");
        let mut labels = std::collections::BTreeMap::from([("rule".to_owned(), rule.to_owned())]);
        if let Some(parent) = parent {
            labels.insert("parent".to_owned(), parent.to_owned());
        }
        object.metadata.labels = Some(labels);
        object
    };
    let found = |rule: &str, parent: &str| -> Vec<String> {
        let mut names: Vec<String> = watch
            .store
            .labelled([rule, parent])
            .into_iter()
            .map(|place| {
                assert_eq!(place.namespace.as_deref(), Some("default"));
                place.name
            })
            .collect();
        names.sort();
        names
    };
    watch.apply(Event::Apply(labelled("r1", "a", Some("p1"))));
    watch.apply(Event::Apply(labelled("r1", "b", Some("p1"))));
    watch.apply(Event::Apply(labelled("r2", "c", Some("p1"))));
    watch.apply(Event::Apply(labelled("r1", "d", None)));
    assert_eq!(found("r1", "p1"), ["a", "b"]);
    assert_eq!(
        found("r2", "p1"),
        ["c"],
        "another rule's children under the same parent are its own"
    );
    // Moved to another parent, released (a label gone), deleted.
    watch.apply(Event::Apply(labelled("r1", "a", Some("p2"))));
    assert_eq!(found("r1", "p1"), ["b"]);
    assert_eq!(found("r1", "p2"), ["a"]);
    watch.apply(Event::Apply(labelled("r1", "b", None)));
    assert!(found("r1", "p1").is_empty());
    watch.apply(Event::Delete(labelled("r1", "a", Some("p2"))));
    assert!(found("r1", "p2").is_empty());
    // A relist replaces the index with the cache, at its end only.
    watch.apply(Event::Init);
    watch.apply(Event::InitApply(labelled("r1", "e", Some("p1"))));
    assert_eq!(found("r2", "p1"), ["c"], "the old contents until the relist ends");
    watch.apply(Event::InitDone);
    assert_eq!(found("r1", "p1"), ["e"]);
    assert!(
        found("r2", "p1").is_empty(),
        "gone from the relist, gone from the index"
    );
    assert!(
        ObjectCache::new().labelled(["r1", "p1"]).is_empty(),
        "a cache without an index finds nothing"
    );
}

/// Many rules share one watch of their children's kind: each hears its own children and every resync.
#[test]
fn a_labelled_subscriber_hears_its_label_value_and_every_resync() {
    use futures::FutureExt;
    let mut key = KindKey::of(&config_maps());
    key.indexed_by = Some(["rule", "parent"]);
    let watch = SharedWatch::selected(config_maps(), key, &WatchMetrics::default(), None);
    let with_rule = |name: &str, rule: Option<&str>| {
        let mut object = object(name, "x");
        object.metadata.labels = rule.map(|rule| std::collections::BTreeMap::from([("rule".into(), rule.into())]));
        object
    };
    let heard = |subscription: &mut Subscription| -> Vec<String> {
        let mut heard = Vec::new();
        while let Some(Some(change)) = subscription.recv().now_or_never() {
            heard.push(match change {
                Change::Applied(o) => format!("applied {}", o.name_any()),
                Change::Deleted(o) => format!("deleted {}", o.name_any()),
                Change::Resync => "resync".to_owned(),
            });
        }
        heard
    };
    let mut r1 = watch.subscribe_labelled("r1");
    let mut everything = watch.subscribe();
    watch.apply(Event::Apply(with_rule("a", Some("r1"))));
    watch.apply(Event::Apply(with_rule("c", Some("r2"))));
    watch.apply(Event::Apply(with_rule("u", None)));
    watch.apply(Event::Delete(with_rule("a", Some("r1"))));
    watch.apply(Event::Init);
    watch.apply(Event::InitDone);
    assert_eq!(heard(&mut r1), ["applied a", "deleted a", "resync"]);
    assert_eq!(
        heard(&mut everything),
        ["applied a", "applied c", "applied u", "deleted a", "resync"]
    );
    // Further behind than a broadcast subscriber may fall: one resync, then changes as they come.
    for index in 0..CHANNEL_CAPACITY + 10 {
        watch.apply(Event::Apply(with_rule(&format!("m{index}"), Some("r1"))));
    }
    assert_eq!(heard(&mut r1), ["resync"]);
    watch.apply(Event::Apply(with_rule("n", Some("r1"))));
    assert_eq!(heard(&mut r1), ["applied n"]);
    drop(r1);
    watch.apply(Event::Apply(with_rule("b", Some("r1"))));
    assert!(
        watch.lock_routes().is_empty(),
        "a value nobody listens to any more is forgotten"
    );
    let unindexed = SharedWatch::new(config_maps(), &WatchMetrics::default());
    let mut any = unindexed.subscribe_labelled("r1");
    unindexed.apply(Event::Apply(with_rule("c", Some("r2"))));
    assert_eq!(heard(&mut any), ["applied c"], "without an index, every change");
}

#[test]
fn typed_reads_the_cached_object_as_its_type() {
    use k8s_openapi::api::core::v1::Pod;
    let mut object = DynamicObject::new("web", &ApiResource::erase::<Pod>(&())).within("shop");
    object.metadata.uid = Some("u-1".into());
    object.data = serde_json::json!({
        "spec": {"schedulerName": "mine", "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending"},
    });
    let pod: Pod = typed(&object).expect("a pod");
    assert_eq!(pod.metadata.uid.as_deref(), Some("u-1"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("shop"));
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.scheduler_name.as_deref(), Some("mine"));
    assert_eq!(spec.containers[0].name, "c");
    assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    object.data["spec"]["containers"] = serde_json::json!("not a list");
    assert!(
        typed::<Pod>(&object).is_err(),
        "a malformed object is an error, not a panic"
    );
}

#[tokio::test]
async fn initial_list_fills_the_cache_then_marks_it_synced_and_resyncs_subscribers() {
    let metrics = WatchMetrics::default();
    let watch = SharedWatch::new(config_maps(), &metrics);
    let objects = || {
        let labels = WatchLabels {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            label_selector: String::new(),
            field_selector: String::new(),
            content: "objects".into(),
        };
        metrics.objects.get_or_create(&labels).get()
    };
    let mut subscription = watch.subscribe();
    watch.apply(Event::Init);
    watch.apply(Event::InitApply(object("a", "1")));
    watch.apply(Event::InitApply(object("b", "1")));
    assert!(names(&watch).is_empty(), "a relist is swapped in at its end");
    watch.apply(Event::InitDone);
    watch.synced().await;
    assert_eq!(names(&watch), BTreeSet::from(["a".to_string(), "b".to_string()]));
    assert_eq!(objects(), 2, "ruleplane_watch_objects");
    assert!(matches!(subscription.recv().await, Some(Change::Resync)));
    watch.apply(Event::Delete(object("a", "1")));
    assert_eq!(objects(), 1);
    // List items carry no apiVersion/kind; the watch knows them (an owner reference needs them).
    let mut listed = object("c", "1");
    listed.types = None;
    watch.apply(Event::Init);
    watch.apply(Event::InitApply(listed));
    watch.apply(Event::InitDone);
    let cached = watch.get(Some("default"), "c").expect("cached");
    let types = cached.types.as_ref().expect("types filled in");
    assert_eq!((types.api_version.as_str(), types.kind.as_str()), ("v1", "ConfigMap"));
}

/// A subscriber that falls behind is told to resync and, reading the cache, sees every object: no key is lost.
#[tokio::test]
async fn a_lagging_subscriber_recovers_every_key() {
    let metrics = WatchMetrics::default();
    let watch = SharedWatch::new(config_maps(), &metrics);
    let mut subscription = watch.subscribe();
    let total = CHANNEL_CAPACITY * 3;
    for index in 0..total {
        watch.apply(Event::Apply(object(&format!("cm-{index}"), "x")));
    }
    let mut seen = BTreeSet::new();
    let mut resynced = false;
    while let Ok(Some(change)) = tokio::time::timeout(Duration::from_millis(50), subscription.recv()).await {
        match change {
            Change::Applied(o) | Change::Deleted(o) => {
                seen.insert(o.name_any());
            }
            Change::Resync => {
                resynced = true;
                seen.extend(names(&watch));
            }
        }
    }
    assert!(resynced, "the subscriber was told to resync");
    assert_eq!(seen.len(), total, "every key recovered");
    assert_eq!(metrics.resyncs.get_or_create(&KindLabels::of(&config_maps())).get(), 1);
}

/// A relist is a replacement: an object deleted while the watch was down (absent from the list) leaves the cache
/// and its label index, and every subscriber, labelled ones included, is told to resync (no deletion is sent for
/// it: a subscriber forgets what it keeps of objects the cache no longer has).
#[tokio::test]
async fn a_relist_forgets_objects_it_no_longer_lists_in_the_cache_and_its_index() {
    let metrics = WatchMetrics::default();
    let watch = SharedWatch::indexed(config_maps(), &metrics, ["rule", "parent"]);
    let labelled = |name: &str| {
        let mut object = object(name, "1");
        let labels = [("rule", "r"), ("parent", "u1")].map(|(k, v)| (k.to_owned(), v.to_owned()));
        object.metadata.labels = Some(labels.into_iter().collect());
        object
    };
    let mut routed = watch.subscribe_labelled("r");
    let mut every = watch.subscribe();
    watch.apply(Event::Apply(labelled("kept")));
    watch.apply(Event::Apply(labelled("gone")));
    assert_eq!(watch.store.labelled(["r", "u1"]).len(), 2);

    watch.apply(Event::Init);
    watch.apply(Event::InitApply(labelled("kept")));
    watch.apply(Event::InitDone);
    assert_eq!(names(&watch), BTreeSet::from(["kept".to_string()]));
    assert!(watch.get(Some("default"), "gone").is_none());
    let indexed: Vec<String> = watch.store.labelled(["r", "u1"]).into_iter().map(|o| o.name).collect();
    assert_eq!(indexed, ["kept"], "the index forgets it too");
    for subscription in [&mut routed, &mut every] {
        let mut heard = Vec::new();
        while let Ok(Some(change)) = tokio::time::timeout(Duration::from_millis(10), subscription.recv()).await {
            heard.push(match change {
                Change::Applied(o) => format!("applied {}", o.name_any()),
                Change::Deleted(o) => format!("deleted {}", o.name_any()),
                Change::Resync => "resync".to_owned(),
            });
        }
        assert_eq!(heard, ["applied kept", "applied gone", "resync"]);
    }
}

/// The identity-only watch's relist is a replacement too: an identity the list no longer has is gone, so a
/// lookup reading through it no longer finds the object.
#[test]
fn an_identity_only_relist_forgets_identities_it_no_longer_lists() {
    let mut key = KindKey::of(&config_maps());
    key.metadata_only = true;
    let watch = SharedWatch::selected(config_maps(), key, &WatchMetrics::default(), None);
    let identity = |name: &str| -> PartialObjectMeta<DynamicObject> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": { "name": name, "namespace": "shop", "uid": format!("u-{name}"), "resourceVersion": "1" }
        }))
        .unwrap()
    };
    watch.apply(identity_event(Event::Apply(identity("kept")), &config_maps()));
    watch.apply(identity_event(Event::Apply(identity("gone")), &config_maps()));
    for event in [Event::Init, Event::InitApply(identity("kept")), Event::InitDone] {
        watch.apply(identity_event(event, &config_maps()));
    }
    assert!(watch.get(Some("shop"), "kept").is_some());
    assert!(
        watch.get(Some("shop"), "gone").is_none(),
        "deleted while the watch was down"
    );
    assert_eq!(watch.store.len(), 1);
}
