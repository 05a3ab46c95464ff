//! Shared watches: one reflector per resource kind, however many rules read it; workers read its cache and
//! subscribe to change notifications that never get lost silently.
//!
//! The contract every subscriber can rely on:
//! - a notification says whether an object was applied or deleted and carries the object (a deleted pod is
//!   what a scheduler needs to release its resources);
//! - a subscriber that falls behind the bounded channel is told to resync ([`Change::Resync`]): it then
//!   treats every key of the store as changed, so a burst (a rollout, a node drain) costs one relist of the
//!   cache instead of lost updates; each such resync is counted in `ruleplane_watch_resyncs_total`;
//! - cached objects have no `managedFields` (they are most of an object's size and no decision reads them);
//! - the cache keeps each object as its compact JSON text and parses it when read ([`ObjectCache`]).

mod cache;
mod feed;
mod index;

pub(crate) use cache::strip_managed_fields;
pub use cache::typed;
pub use feed::{SharedWatch, Subscription};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tracing::{debug, warn};

use crate::metrics::WatchMetrics;

/// Objects per list page. A page is decoded whole before its objects are cached as text, so the page size bounds
/// the decoded objects a list holds at once (kube-runtime's default is 500).
const PAGE_SIZE: u32 = 100;

/// Identifies a shared watch: group/version/kind is what rules name, plus an optional label selector (children
/// are watched only where Ruleplane's label is, so a cluster's other Deployments are not cached).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct KindKey {
    pub api_version: String,
    pub kind: String,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Only each object's identity and version are watched and cached ([`WatchHub::watch_metadata`]).
    pub metadata_only: bool,
    /// The two labels the cache also finds objects by ([`WatchHub::watch_indexed`]).
    pub indexed_by: Option<[&'static str; 2]>,
    /// The Reconciler shards a sharded watch keeps (`crate::sharding::ShardScope::key_text`): such a watch is
    /// replaced when the replica's shards change, and the old one ends once no worker holds it.
    pub shards: Option<String>,
}

impl KindKey {
    pub fn of(ar: &ApiResource) -> Self {
        KindKey {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
            label_selector: None,
            field_selector: None,
            metadata_only: false,
            indexed_by: None,
            shards: None,
        }
    }
}

/// Where an object stands: its namespace (`None` for a cluster-scoped kind) and its name — a parent, a cached
/// object's place.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectName {
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectName {
    /// Where `object` stands.
    pub fn of(object: &DynamicObject) -> Self {
        ObjectName {
            namespace: object.namespace(),
            name: object.name_any(),
        }
    }
}

/// One object of one shared watch: the identity the Reconciler's own-writes bookkeeping and lookup readers share.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct WatchedObject {
    /// The watch it is cached in.
    pub watch: KindKey,
    pub namespace: Option<String>,
    pub name: String,
}

impl WatchedObject {
    /// `object` as cached by the watch `watch`.
    pub fn of(watch: &KindKey, object: &DynamicObject) -> Self {
        WatchedObject {
            watch: watch.clone(),
            namespace: object.namespace(),
            name: object.name_any(),
        }
    }
}

/// What subscribers hear.
#[derive(Clone, Debug)]
pub enum Change {
    /// An object was created or changed; the cache already holds this version.
    Applied(Arc<DynamicObject>),
    /// An object was deleted; this is its last known state (the cache no longer has it).
    Deleted(Arc<DynamicObject>),
    /// Treat every object of the store as changed: the cache was relisted, or this subscriber fell behind.
    Resync,
}

impl Change {
    /// The object a notification is about (`None` for a resync).
    pub fn object(&self) -> Option<&DynamicObject> {
        match self {
            Change::Applied(object) | Change::Deleted(object) => Some(object),
            Change::Resync => None,
        }
    }
}

/// Which objects a watch keeps: the others are neither cached nor passed on (their events only counted). A child
/// watch admits only objects whose signature proves them Ruleplane's, so labelled objects anyone can create cost
/// no memory and wake no worker.
pub type Admission = Arc<dyn Fn(&DynamicObject) -> bool + Send + Sync>;

/// Starts reflectors on demand and keeps them whether or not a unit that reads them runs here, so a replica's
/// caches are warm when it takes a unit over; only sharded watches of shards no longer held are ended
/// ([`WatchHub::release_unused`]).
pub struct WatchHub {
    client: Client,
    metrics: WatchMetrics,
    watches: Mutex<HashMap<KindKey, Arc<SharedWatch>>>,
    /// The feed task of each sharded watch, ended by [`WatchHub::release_unused`].
    sharded_feeds: Mutex<HashMap<KindKey, tokio::task::AbortHandle>>,
}

impl WatchHub {
    pub fn new(client: Client, metrics: WatchMetrics) -> Arc<Self> {
        Arc::new(WatchHub {
            client,
            metrics,
            watches: Mutex::new(HashMap::new()),
            sharded_feeds: Mutex::new(HashMap::new()),
        })
    }

    /// The shared watch of every object of a kind.
    pub fn watch(&self, resource: &ApiResource) -> Arc<SharedWatch> {
        self.watch_selected(resource, None)
    }

    /// The shared watch of the objects of a kind that match a label selector (query-string syntax).
    pub fn watch_selected(&self, resource: &ApiResource, label_selector: Option<&str>) -> Arc<SharedWatch> {
        self.watch_filtered(resource, label_selector, None)
    }

    /// The shared watch of the objects of a kind that match a label selector, its cache also finding them by the
    /// values of two labels ([`ObjectCache::labelled`]): the one index of a watch many rules read.
    /// It keeps only what `admission` admits: every caller of one kind and selector must pass the same
    /// admission (the Reconciler's child watches all pass the process's one signer).
    pub fn watch_indexed(
        &self,
        resource: &ApiResource,
        label_selector: Option<&str>,
        indexed_by: [&'static str; 2],
        admission: Admission,
    ) -> Arc<SharedWatch> {
        self.watch_keyed(resource, label_selector, None, Some(indexed_by), Some(admission))
    }

    /// The shared watch of a kind restricted by a label and a field selector (e.g. pods not yet terminated:
    /// `status.phase!=Succeeded,status.phase!=Failed`, kube-scheduler's own filter).
    pub fn watch_filtered(
        &self,
        resource: &ApiResource,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Arc<SharedWatch> {
        self.watch_keyed(resource, label_selector, field_selector, None, None)
    }

    fn watch_keyed(
        &self,
        resource: &ApiResource,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
        indexed_by: Option<[&'static str; 2]>,
        admission: Option<Admission>,
    ) -> Arc<SharedWatch> {
        let mut key = KindKey::of(resource);
        key.label_selector = label_selector.map(str::to_owned);
        key.field_selector = field_selector.map(str::to_owned);
        key.indexed_by = indexed_by;
        self.shared_or_started(key, resource, admission, |shared| {
            let mut config = watcher::Config::default().page_size(PAGE_SIZE);
            if let Some(selector) = label_selector {
                config = config.labels(selector);
            }
            if let Some(selector) = field_selector {
                config = config.fields(selector);
            }
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
            tokio::spawn(feed(shared, watcher::watcher(api, config)));
        })
    }

    /// The shared watch of a Reconciler's parents (by label and field selector) that keeps only the parents of
    /// `scope`'s shards: the apiserver still sends every parent (a label selector cannot hash a name), and the
    /// others are dropped before they are cached or heard of.
    pub fn watch_parents(
        &self,
        resource: &ApiResource,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
        scope: &crate::sharding::ShardScope,
    ) -> Arc<SharedWatch> {
        let Some(shards) = scope.key_text() else {
            return self.watch_filtered(resource, label_selector, field_selector);
        };
        let mut key = KindKey::of(resource);
        key.label_selector = label_selector.map(str::to_owned);
        key.field_selector = field_selector.map(str::to_owned);
        key.shards = Some(shards);
        let kept = scope.clone();
        let admission = scope.owned.is_some().then(|| -> Admission {
            Arc::new(move |parent: &DynamicObject| {
                kept.covers(
                    parent.metadata.namespace.as_deref(),
                    parent.metadata.name.as_deref().unwrap_or_default(),
                )
            })
        });
        self.watch_started(key, resource, label_selector, field_selector, admission)
    }

    /// The shared watch of a Reconciler's children (by the label selector `base`) of `scope`'s shards, its cache
    /// indexed like [`WatchHub::watch_indexed`]'s: the apiserver sends only those children.
    pub fn watch_children(
        &self,
        resource: &ApiResource,
        base: &str,
        indexed_by: [&'static str; 2],
        admission: Admission,
        scope: &crate::sharding::ShardScope,
    ) -> Arc<SharedWatch> {
        let Some(shards) = scope.key_text() else {
            return self.watch_indexed(resource, Some(base), indexed_by, admission);
        };
        let selector = match scope.child_selector() {
            Some(term) => format!("{base},{term}"),
            None => base.to_owned(),
        };
        let mut key = KindKey::of(resource);
        key.label_selector = Some(selector.clone());
        key.indexed_by = Some(indexed_by);
        key.shards = Some(shards);
        self.watch_started(key, resource, Some(&selector), None, Some(admission))
    }

    /// A sharded watch of `key`, started if new, its feed task kept so that [`WatchHub::release_unused`] can end
    /// it.
    fn watch_started(
        &self,
        key: KindKey,
        resource: &ApiResource,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
        admission: Option<Admission>,
    ) -> Arc<SharedWatch> {
        let feed_key = key.clone();
        self.shared_or_started(key, resource, admission, |shared| {
            let mut config = watcher::Config::default().page_size(PAGE_SIZE);
            if let Some(selector) = label_selector {
                config = config.labels(selector);
            }
            if let Some(selector) = field_selector {
                config = config.fields(selector);
            }
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
            let task = tokio::spawn(feed(shared, watcher::watcher(api, config)));
            self.sharded_feeds
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(feed_key, task.abort_handle());
        })
    }

    /// Ends the sharded watches no worker holds any more (after the replica's shards changed and its workers
    /// restarted on the new ones): their caches are freed and their watch connections closed.
    pub fn release_unused(&self) -> usize {
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        let mut feeds = self.sharded_feeds.lock().unwrap_or_else(|e| e.into_inner());
        // Held by the map and by its own feed task only: no worker reads it.
        let unused: Vec<KindKey> = watches
            .iter()
            .filter(|(key, watch)| key.shards.is_some() && Arc::strong_count(watch) <= 2)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &unused {
            if let Some(watch) = watches.remove(key) {
                watch.ended();
            }
            if let Some(feed) = feeds.remove(key) {
                feed.abort();
            }
        }
        unused.len()
    }

    /// The shared watch of a kind's objects' identities: name, namespace, uid, resourceVersion and deletion
    /// timestamp, nothing else (the apiserver sends metadata only; labels, annotations — a client-side
    /// `last-applied-configuration` copies the whole object — and owner references are dropped too). For a
    /// kind with many objects of which a few are read: what they hold is fetched when read
    /// (`workers/reconciler/lookups.rs`), while this watch says when it changed.
    pub fn watch_metadata(&self, resource: &ApiResource) -> Arc<SharedWatch> {
        let mut key = KindKey::of(resource);
        key.metadata_only = true;
        self.shared_or_started(key, resource, None, |shared| {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(self.client.clone(), resource);
            let resource = resource.clone();
            let identities = watcher::watcher(api, watcher::Config::default())
                .map(move |event| event.map(|event| identity_event(event, &resource)));
            tokio::spawn(feed(shared, identities));
        })
    }

    /// The watch of `key` if one runs, else a new one, its feed started by `start`.
    fn shared_or_started(
        &self,
        key: KindKey,
        resource: &ApiResource,
        admission: Option<Admission>,
        start: impl FnOnce(Arc<SharedWatch>),
    ) -> Arc<SharedWatch> {
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = watches.get(&key) {
            return w.clone();
        }
        let shared = SharedWatch::selected(resource.clone(), key.clone(), &self.metrics, admission);
        start(shared.clone());
        watches.insert(key, shared.clone());
        shared
    }
}

/// Feeds a watch's events into its shared cache until the stream ends (it retries on errors with backoff).
async fn feed(
    shared: Arc<SharedWatch>,
    events: impl futures::Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send,
) {
    let stream = events.default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => shared.apply(event),
            Err(e) => {
                let kind = &shared.resource;
                warn!(kind = %kind.kind, api_version = %kind.api_version, error = %e, "watch error; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    debug!(kind = %shared.resource.kind, "watch stream ended");
}

fn identity_event(event: Event<PartialObjectMeta<DynamicObject>>, resource: &ApiResource) -> Event<DynamicObject> {
    match event {
        Event::Apply(meta) => Event::Apply(identity_only(meta, resource)),
        Event::Delete(meta) => Event::Delete(identity_only(meta, resource)),
        Event::Init => Event::Init,
        Event::InitApply(meta) => Event::InitApply(identity_only(meta, resource)),
        Event::InitDone => Event::InitDone,
    }
}

/// An object's identity and version as a [`DynamicObject`] with no content.
fn identity_only(meta: PartialObjectMeta<DynamicObject>, resource: &ApiResource) -> DynamicObject {
    let mut object = DynamicObject::new("", resource);
    object.metadata = ObjectMeta {
        name: meta.metadata.name,
        namespace: meta.metadata.namespace,
        uid: meta.metadata.uid,
        resource_version: meta.metadata.resource_version,
        deletion_timestamp: meta.metadata.deletion_timestamp,
        ..ObjectMeta::default()
    };
    object
}

#[cfg(test)]
mod tests;
