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

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{broadcast, watch};
use tracing::{debug, warn};

use crate::metrics::{KindLabels, WatchLabels, WatchMetrics};

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

/// How many notifications a subscriber may fall behind before it is told to resync.
const CHANNEL_CAPACITY: usize = 1024;

/// One kind's cache and change feed.
pub struct SharedWatch {
    pub key: KindKey,
    pub resource: ApiResource,
    pub store: ObjectCache,
    changes: broadcast::Sender<Change>,
    /// An indexed watch's subscribers of one value of its first index label ([`SharedWatch::subscribe_labelled`]):
    /// with many Reconciler rules on one child kind, each hears its own children's changes, not every rule's
    /// (1,000 rules × 2,000 children were 2 million notifications, each waking a worker to find it was not its
    /// child). A queue per subscriber rather than a broadcast channel per value: a broadcast channel allocates
    /// all its slots at once (48 KiB for 1,024), and 1,000 rules took 42 MiB more that way; a queue holds only
    /// what waits.
    routes: Mutex<HashMap<String, Vec<std::sync::Weak<RouteQueue>>>>,
    synced: watch::Sender<bool>,
    resyncs: Counter,
    objects: Gauge,
    /// What this watch keeps (everything when `None`).
    admission: Option<Admission>,
    unproven: Counter,
}

impl SharedWatch {
    /// A watch with an empty cache, fed by [`SharedWatch::apply`], reporting to `metrics`.
    pub fn new(resource: ApiResource, metrics: &WatchMetrics) -> Arc<Self> {
        Self::selected(
            resource.clone(),
            KindKey::of(&resource),
            metrics,
            Storage::Compact,
            None,
        )
    }

    /// [`SharedWatch::new`] that keeps only what `admission` admits.
    pub fn admitting(resource: ApiResource, metrics: &WatchMetrics, admission: Admission) -> Arc<Self> {
        Self::selected(
            resource.clone(),
            KindKey::of(&resource),
            metrics,
            Storage::Compact,
            Some(admission),
        )
    }

    fn selected(
        resource: ApiResource,
        key: KindKey,
        metrics: &WatchMetrics,
        storage: Storage,
        admission: Option<Admission>,
    ) -> Arc<Self> {
        let labels = WatchLabels {
            api_version: key.api_version.clone(),
            kind: key.kind.clone(),
            label_selector: key.label_selector.clone().unwrap_or_default(),
            field_selector: key.field_selector.clone().unwrap_or_default(),
            content: if key.metadata_only { "metadata" } else { "objects" }.to_owned(),
        };
        Arc::new(SharedWatch {
            store: ObjectCache::with_index(storage, key.indexed_by),
            key,
            resyncs: metrics.resyncs.get_or_create(&KindLabels::of(&resource)).clone(),
            objects: metrics.objects.get_or_create(&labels).clone(),
            unproven: metrics.unproven.get_or_create(&KindLabels::of(&resource)).clone(),
            admission,
            resource,
            changes: broadcast::channel(CHANNEL_CAPACITY).0,
            routes: Mutex::default(),
            synced: watch::Sender::new(false),
        })
    }

    /// Feeds one watch event into the cache, then notifies subscribers. Tests feed synthetic events here.
    pub fn apply(&self, event: Event<DynamicObject>) {
        // One object per event, shared by the cache (when it keeps objects parsed) and the notification. Items of
        // a list response carry no apiVersion/kind (watch events do): the watch knows them, and an owner
        // reference to a parent needs them (without, a built-in parent listed at start got the cleanup finalizer
        // and children without owner references, mended by the next event).
        let object = |mut o: DynamicObject| {
            if o.types.is_none() {
                o.types = Some(TypeMeta {
                    api_version: self.resource.api_version.clone(),
                    kind: self.resource.kind.clone(),
                });
            }
            Arc::new(without_managed_fields(o))
        };
        // Nobody listening is fine: a subscriber that comes later reads the cache first.
        match event {
            Event::Apply(o) => {
                let o = object(o);
                if !self.admits(&o) {
                    return self.refuse(&o);
                }
                self.store.upsert(&o);
                self.count_objects();
                self.route(&o, || Change::Applied(o.clone()));
                let _ = self.changes.send(Change::Applied(o));
            }
            Event::Delete(o) => {
                let o = object(o);
                if !self.admits(&o) {
                    return self.refuse(&o);
                }
                self.store.remove(&o);
                self.count_objects();
                self.route(&o, || Change::Deleted(o.clone()));
                let _ = self.changes.send(Change::Deleted(o));
            }
            Event::Init => self.store.begin_relist(),
            Event::InitApply(o) => {
                let o = object(o);
                if self.admits(&o) {
                    self.store.relisted(&o);
                } else {
                    self.unproven.inc();
                }
            }
            Event::InitDone => {
                self.store.end_relist();
                self.count_objects();
                // The resync first: a subscriber that sees the watch synced has it waiting already, and takes it
                // in before its first reconcile (the runner does), not in the middle of its first writes.
                for queue in self
                    .lock_routes()
                    .values()
                    .flatten()
                    .filter_map(std::sync::Weak::upgrade)
                {
                    queue.push(Change::Resync);
                }
                let _ = self.changes.send(Change::Resync);
                self.synced.send_replace(true);
            }
        }
    }

    fn admits(&self, object: &DynamicObject) -> bool {
        self.admission.as_ref().is_none_or(|admits| admits(object))
    }

    /// An event of an object this watch does not keep. If an admitted version of it is cached (one of our
    /// children whose identity someone changed), it is gone as far as readers can tell: removed, and its last
    /// admitted state announced as deleted.
    fn refuse(&self, object: &DynamicObject) {
        self.unproven.inc();
        let Some(name) = object.metadata.name.as_deref() else {
            return;
        };
        let namespace = object.metadata.namespace.as_deref();
        if let Some(cached) = self.store.get(namespace, name) {
            self.store.remove(&cached);
            self.count_objects();
            self.route(&cached, || Change::Deleted(cached.clone()));
            let _ = self.changes.send(Change::Deleted(cached));
        }
    }

    fn lock_routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<std::sync::Weak<RouteQueue>>>> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a change of `object` for the subscribers of its first index label's value, if any listen.
    fn route(&self, object: &DynamicObject, change: impl FnOnce() -> Change) {
        let Some([label, _]) = self.key.indexed_by else { return };
        let Some(value) = object.labels().get(label) else {
            return;
        };
        let mut routes = self.lock_routes();
        let Some(subscribers) = routes.get_mut(value) else {
            return;
        };
        // Subscribers gone (a rule removed or restarted) are forgotten here, and the value with the last one.
        subscribers.retain(|queue| queue.strong_count() > 0);
        if subscribers.is_empty() {
            routes.remove(value);
            return;
        }
        let change = change();
        for queue in subscribers.iter().filter_map(std::sync::Weak::upgrade) {
            queue.push(change.clone());
        }
    }

    fn count_objects(&self) {
        self.objects.set(i64::try_from(self.store.len()).unwrap_or(i64::MAX));
    }

    pub fn subscribe(&self) -> Subscription {
        Subscription {
            kind: self.key.clone(),
            receiver: Receiver::Broadcast(self.changes.subscribe()),
            resyncs: self.resyncs.clone(),
        }
    }

    /// Only the changes of objects whose first index label has `value` (and every resync); on a watch without an
    /// index, every change.
    pub fn subscribe_labelled(&self, value: &str) -> Subscription {
        if self.key.indexed_by.is_none() {
            return self.subscribe();
        }
        let queue = Arc::new(RouteQueue::default());
        self.lock_routes()
            .entry(value.to_owned())
            .or_default()
            .push(Arc::downgrade(&queue));
        Subscription {
            kind: self.key.clone(),
            receiver: Receiver::Queue(queue),
            resyncs: self.resyncs.clone(),
        }
    }

    /// Waits for the first complete list, so decisions are never made on a half-filled cache.
    /// (Not `Store::wait_until_ready`: it wakes only one of several concurrent waiters.)
    pub async fn synced(&self) {
        let mut synced = self.synced.subscribe();
        let _ = synced.wait_for(|s| *s).await;
    }

    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        self.store.get(namespace, name)
    }

    /// A cached object as a JSON value (what templates and comparisons read), parsed from the cache at once.
    pub fn get_value(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value> {
        self.store.get_value(namespace, name)
    }
}

/// How a watch's cache keeps its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// As compact JSON text, parsed when read: as a tree of `serde_json::Value`s an object takes several times
    /// the bytes of its text (every map a B-tree node, every string and number its own allocation), and the
    /// caches are most of the manager's memory (10,000 parents with two children each: 30,000 objects). Reconcilers
    /// read a few objects per decision.
    Compact,
    /// Parsed: for the scheduler's pods and nodes, which every decision, queue move and cache rebuild reads (a
    /// scheduler's CPU per pod is what it is measured by).
    Parsed,
}

enum Stored {
    Text(Box<str>),
    Parsed(Arc<DynamicObject>),
}

impl Stored {
    /// Parsed straight into `T` from text (the text was written from a parsed object: it always parses back), or
    /// read from the parsed object by `parsed`.
    fn read<T: serde::de::DeserializeOwned>(&self, parsed: impl FnOnce(&DynamicObject) -> Option<T>) -> Option<T> {
        match self {
            Stored::Text(text) => serde_json::from_str(text).ok(),
            Stored::Parsed(object) => parsed(object),
        }
    }

    fn object(&self) -> Option<Arc<DynamicObject>> {
        match self {
            Stored::Text(text) => serde_json::from_str(text).ok().map(Arc::new),
            Stored::Parsed(object) => Some(object.clone()),
        }
    }
}

/// A kind's cache, keyed by namespace and name.
pub struct ObjectCache {
    storage: Storage,
    /// The two labels [`ObjectCache::labelled`] finds objects by, if this cache keeps that index.
    index_labels: Option<[&'static str; 2]>,
    contents: RwLock<Contents>,
    /// A relist in progress: its objects are swapped in whole at its end, so readers never see half a list.
    relisting: Mutex<Option<Contents>>,
}

/// The cached objects and their label index, changed together under one lock so a reader never sees one ahead of
/// the other.
struct Contents {
    objects: HashMap<String, Stored>,
    index: Option<LabelIndex>,
}

/// Which cached objects carry which values of two labels (a rule's name and a parent's UID). Kept by the watch's
/// feed with the cache: the rules that read one watch of children each ask it, instead of each indexing every
/// cached object themselves (200 rules over 10,000 children took 2,000,000 metadata parses at start).
struct LabelIndex {
    labels: [&'static str; 2],
    by_values: HashMap<[String; 2], BTreeSet<String>>,
    values_of: HashMap<String, [String; 2]>,
}

impl LabelIndex {
    fn new(labels: [&'static str; 2]) -> Self {
        LabelIndex {
            labels,
            by_values: HashMap::new(),
            values_of: HashMap::new(),
        }
    }

    fn insert(&mut self, key: &str, object: &DynamicObject) {
        self.remove(key);
        let labels = object.metadata.labels.as_ref();
        let value = |label: &str| labels.and_then(|labels| labels.get(label)).cloned();
        if let (Some(first), Some(second)) = (value(self.labels[0]), value(self.labels[1])) {
            let values = [first, second];
            self.by_values.entry(values.clone()).or_default().insert(key.to_owned());
            self.values_of.insert(key.to_owned(), values);
        }
    }

    fn remove(&mut self, key: &str) {
        if let Some(values) = self.values_of.remove(key)
            && let Some(keys) = self.by_values.get_mut(&values)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_values.remove(&values);
            }
        }
    }
}

impl Contents {
    fn new(index_labels: Option<[&'static str; 2]>) -> Self {
        Contents {
            objects: HashMap::new(),
            index: index_labels.map(LabelIndex::new),
        }
    }

    fn insert(&mut self, key: String, stored: Stored, object: &DynamicObject) {
        if let Some(index) = self.index.as_mut() {
            index.insert(&key, object);
        }
        self.objects.insert(key, stored);
    }

    fn remove(&mut self, key: &str) {
        self.objects.remove(key);
        if let Some(index) = self.index.as_mut() {
            index.remove(key);
        }
    }
}

impl ObjectCache {
    fn key(namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_owned(),
        }
    }

    /// The namespace and name a cache key stands for (neither may contain a `/`).
    fn split_key(key: &str) -> (Option<String>, String) {
        match key.split_once('/') {
            Some((namespace, name)) => (Some(namespace.to_owned()), name.to_owned()),
            None => (None, key.to_owned()),
        }
    }

    pub fn new(storage: Storage) -> Self {
        Self::with_index(storage, None)
    }

    /// A cache that also finds its objects by the values of two labels ([`ObjectCache::labelled`]).
    pub fn with_index(storage: Storage, index_labels: Option<[&'static str; 2]>) -> Self {
        ObjectCache {
            storage,
            index_labels,
            contents: RwLock::new(Contents::new(index_labels)),
            relisting: Mutex::default(),
        }
    }

    fn entry(&self, object: &Arc<DynamicObject>) -> Option<(String, Stored)> {
        let key = Self::key(object.metadata.namespace.as_deref(), object.metadata.name.as_deref()?);
        if self.storage == Storage::Parsed {
            // The notification's own object: no copy.
            return Some((key, Stored::Parsed(object.clone())));
        }
        match serde_json::to_string(&**object) {
            Ok(text) => Some((key, Stored::Text(text.into_boxed_str()))),
            Err(error) => {
                warn!(%key, %error, "object from the watch cannot be cached");
                None
            }
        }
    }

    fn with<T>(&self, namespace: Option<&str>, name: &str, read: impl FnOnce(&Stored) -> Option<T>) -> Option<T> {
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        read(contents.objects.get(&Self::key(namespace, name))?)
    }

    fn upsert(&self, object: &Arc<DynamicObject>) {
        if let Some((key, stored)) = self.entry(object) {
            self.contents
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, stored, object);
        }
    }

    fn remove(&self, object: &DynamicObject) {
        if let Some(name) = object.metadata.name.as_deref() {
            let key = Self::key(object.metadata.namespace.as_deref(), name);
            self.contents.write().unwrap_or_else(|e| e.into_inner()).remove(&key);
        }
    }

    fn begin_relist(&self) {
        *self.relisting.lock().unwrap_or_else(|e| e.into_inner()) = Some(Contents::new(self.index_labels));
    }

    fn relisted(&self, object: &Arc<DynamicObject>) {
        if let Some((key, stored)) = self.entry(object) {
            self.relisting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(|| Contents::new(self.index_labels))
                .insert(key, stored, object);
        }
    }

    fn end_relist(&self) {
        let listed = self.relisting.lock().unwrap_or_else(|e| e.into_inner()).take();
        *self.contents.write().unwrap_or_else(|e| e.into_inner()) =
            listed.unwrap_or_else(|| Contents::new(self.index_labels));
    }

    /// The namespaces and names of the cached objects whose two index labels have these values (none if this
    /// cache keeps no index).
    pub fn labelled(&self, values: [&str; 2]) -> Vec<(Option<String>, String)> {
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        let Some(index) = contents.index.as_ref() else {
            return Vec::new();
        };
        index
            .by_values
            .get(&values.map(str::to_owned))
            .into_iter()
            .flatten()
            .map(|key| Self::split_key(key))
            .collect()
    }

    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        self.with(namespace, name, Stored::object)
    }

    /// A cached object parsed straight into its type (a pod for a scheduling decision).
    pub fn get_typed<T: serde::de::DeserializeOwned>(&self, namespace: Option<&str>, name: &str) -> Option<T> {
        self.with(namespace, name, |stored| stored.read(|o| typed(o).ok()))
    }

    pub fn get_value(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value> {
        self.with(namespace, name, |stored| stored.read(|o| serde_json::to_value(o).ok()))
    }

    /// What `read` takes from each cached object's metadata. Objects kept as text are read one at a time and
    /// only as far as their metadata: a rebuild over 10,000 cached objects never holds them all parsed at once
    /// (which took 40 MiB or more of transient memory the allocator did not always give back).
    pub fn map_metadata<T>(&self, mut read: impl FnMut(&ObjectMeta) -> Option<T>) -> Vec<T> {
        #[derive(serde::Deserialize)]
        struct MetadataOnly {
            #[serde(default)]
            metadata: ObjectMeta,
        }
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        contents
            .objects
            .values()
            .filter_map(|stored| match stored {
                Stored::Text(text) => {
                    let object: MetadataOnly = serde_json::from_str(text).ok()?;
                    read(&object.metadata)
                }
                Stored::Parsed(object) => read(&object.metadata),
            })
            .collect()
    }

    /// Every cached object (a resync or a rebuild reads them all).
    pub fn state(&self) -> Vec<Arc<DynamicObject>> {
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        contents.objects.values().filter_map(Stored::object).collect()
    }

    pub fn len(&self) -> usize {
        self.contents.read().unwrap_or_else(|e| e.into_inner()).objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A cached object as its typed form, read in place: only `metadata` is copied (it is a typed field of the
/// dynamic object), the rest is deserialized from the cache's JSON tree without cloning it first as
/// `DynamicObject::try_parse` does (a per-decision cost for a scheduler).
pub fn typed<T: serde::de::DeserializeOwned>(object: &DynamicObject) -> Result<T, serde_json::Error> {
    use serde::de::value::MapDeserializer;
    let metadata = serde_json::to_value(&object.metadata)?;
    let rest = object.data.as_object().into_iter().flatten();
    let fields = std::iter::once(("metadata", &metadata)).chain(
        rest.filter(|(name, _)| name.as_str() != "metadata")
            .map(|(name, value)| (name.as_str(), value)),
    );
    T::deserialize(MapDeserializer::<_, serde_json::Error>::new(fields))
}

fn without_managed_fields(mut object: DynamicObject) -> DynamicObject {
    object.managed_fields_mut().clear();
    object.metadata.managed_fields = None;
    object
}

/// Removes `metadata.managedFields` from an object read as JSON (a write's answer), as the caches do.
pub(crate) fn strip_managed_fields(object: &mut serde_json::Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

/// One subscriber's feed of a kind's changes.
pub struct Subscription {
    pub kind: KindKey,
    receiver: Receiver,
    resyncs: Counter,
}

enum Receiver {
    /// Every change of the watch.
    Broadcast(broadcast::Receiver<Change>),
    /// The changes of one index label value ([`SharedWatch::subscribe_labelled`]).
    Queue(Arc<RouteQueue>),
}

/// One labelled subscriber's waiting changes. Bounded like a broadcast channel: a subscriber further behind
/// than [`CHANNEL_CAPACITY`] changes is told to resync instead (no change is lost, the queue's memory is freed).
#[derive(Default)]
struct RouteQueue {
    waiting: Mutex<RouteWaiting>,
    ready: tokio::sync::Notify,
}

#[derive(Default)]
struct RouteWaiting {
    changes: std::collections::VecDeque<Change>,
    /// Changes dropped since the subscriber last read (it fell behind).
    missed: u64,
}

impl RouteQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, RouteWaiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, change: Change) {
        {
            let mut waiting = self.lock();
            if waiting.missed > 0 {
                waiting.missed += 1;
            } else if waiting.changes.len() >= CHANNEL_CAPACITY {
                waiting.missed = waiting.changes.len() as u64 + 1;
                waiting.changes = std::collections::VecDeque::new();
            } else {
                waiting.changes.push_back(change);
            }
        }
        // One subscriber: a permit stored while it is not waiting wakes its next wait.
        self.ready.notify_one();
    }

    /// The next change, or how many were missed since the last read.
    async fn next(&self) -> Result<Change, u64> {
        loop {
            {
                let mut waiting = self.lock();
                if waiting.missed > 0 {
                    return Err(std::mem::take(&mut waiting.missed));
                }
                if let Some(change) = waiting.changes.pop_front() {
                    return Ok(change);
                }
            }
            self.ready.notified().await;
        }
    }
}

impl Subscription {
    /// The next change; `None` once the watch is gone. Falling behind yields [`Change::Resync`].
    pub async fn recv(&mut self) -> Option<Change> {
        let missed = match &mut self.receiver {
            Receiver::Broadcast(receiver) => match receiver.recv().await {
                Ok(change) => return Some(change),
                Err(broadcast::error::RecvError::Lagged(missed)) => missed,
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            // Watches live as long as the process: a labelled feed does not end.
            Receiver::Queue(queue) => match queue.next().await {
                Ok(change) => return Some(change),
                Err(missed) => missed,
            },
        };
        debug!(kind = %self.kind.kind, missed, "subscriber fell behind; resyncing from the cache");
        self.resyncs.inc();
        Some(Change::Resync)
    }

    /// The changes as a stream (ends when the watch is gone).
    pub fn into_stream(self) -> impl futures::Stream<Item = (KindKey, Change)> + Send {
        futures::stream::unfold(self, |mut subscription| async move {
            let change = subscription.recv().await?;
            Some(((subscription.kind.clone(), change), subscription))
        })
    }
}

/// Starts reflectors on demand and keeps them for the life of the process, leader or not, so a standby's
/// caches are warm when it takes over.
pub struct WatchHub {
    client: Client,
    metrics: WatchMetrics,
    watches: Mutex<HashMap<KindKey, Arc<SharedWatch>>>,
}

impl WatchHub {
    pub fn new(client: Client, metrics: WatchMetrics) -> Arc<Self> {
        Arc::new(WatchHub {
            client,
            metrics,
            watches: Mutex::new(HashMap::new()),
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
        self.watch_keyed(
            resource,
            label_selector,
            None,
            Some(indexed_by),
            Storage::Compact,
            Some(admission),
        )
    }

    /// The shared watch of a kind restricted by a label and a field selector (e.g. pods not yet terminated:
    /// `status.phase!=Succeeded,status.phase!=Failed`, kube-scheduler's own filter).
    pub fn watch_filtered(
        &self,
        resource: &ApiResource,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Arc<SharedWatch> {
        self.watch_stored(resource, label_selector, field_selector, Storage::Compact)
    }

    /// A shared watch whose cache keeps objects as `storage` says. The first request for a watch decides
    /// (both ways serve every reader; they differ in memory and in the cost of a read).
    pub fn watch_stored(
        &self,
        resource: &ApiResource,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
        storage: Storage,
    ) -> Arc<SharedWatch> {
        self.watch_keyed(resource, label_selector, field_selector, None, storage, None)
    }

    fn watch_keyed(
        &self,
        resource: &ApiResource,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
        indexed_by: Option<[&'static str; 2]>,
        storage: Storage,
        admission: Option<Admission>,
    ) -> Arc<SharedWatch> {
        let mut key = KindKey::of(resource);
        key.label_selector = label_selector.map(str::to_owned);
        key.field_selector = field_selector.map(str::to_owned);
        key.indexed_by = indexed_by;
        self.shared_or_started(key, resource, storage, admission, |shared| {
            let mut config = watcher::Config::default();
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

    /// The shared watch of a kind's objects' identities: name, namespace, uid, resourceVersion and deletion
    /// timestamp, nothing else (the apiserver sends metadata only; labels, annotations — a client-side
    /// `last-applied-configuration` copies the whole object — and owner references are dropped too). For a
    /// kind with many objects of which a few are read: what they hold is fetched when read
    /// (`workers/reconciler/lookups.rs`), while this watch says when it changed.
    pub fn watch_metadata(&self, resource: &ApiResource) -> Arc<SharedWatch> {
        let mut key = KindKey::of(resource);
        key.metadata_only = true;
        self.shared_or_started(key, resource, Storage::Compact, None, |shared| {
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
        storage: Storage,
        admission: Option<Admission>,
        start: impl FnOnce(Arc<SharedWatch>),
    ) -> Arc<SharedWatch> {
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = watches.get(&key) {
            return w.clone();
        }
        let shared = SharedWatch::selected(resource.clone(), key.clone(), &self.metrics, storage, admission);
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
mod tests {
    use std::collections::BTreeSet;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

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
        for storage in [Storage::Compact, Storage::Parsed] {
            serves_objects(ObjectCache::new(storage));
        }
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
        let watch = SharedWatch::selected(config_maps(), key, &WatchMetrics::default(), Storage::Compact, None);
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
                .map(|(namespace, name)| {
                    assert_eq!(namespace.as_deref(), Some("default"));
                    name
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
            ObjectCache::new(Storage::Compact).labelled(["r1", "p1"]).is_empty(),
            "a cache without an index finds nothing"
        );
    }

    /// Many rules share one watch of their children's kind: each hears its own children and every resync.
    #[test]
    fn a_labelled_subscriber_hears_its_label_value_and_every_resync() {
        use futures::FutureExt;
        let mut key = KindKey::of(&config_maps());
        key.indexed_by = Some(["rule", "parent"]);
        let watch = SharedWatch::selected(config_maps(), key, &WatchMetrics::default(), Storage::Compact, None);
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
}
