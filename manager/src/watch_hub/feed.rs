//! A watch's feed: events from the apiserver into the cache (what it admits), and change notifications to its
//! subscribers, broadcast or routed by label value.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::{ApiResource, DynamicObject, TypeMeta};

use kube::ResourceExt;
use kube::runtime::watcher::Event;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{broadcast, watch};
use tracing::debug;

use crate::metrics::{KindLabels, WatchLabels, WatchMetrics};

use super::cache::{ObjectCache, without_managed_fields};
use super::{Admission, Change, KindKey};

/// How many notifications a subscriber may fall behind before it is told to resync.
pub(super) const CHANNEL_CAPACITY: usize = 1024;

/// One kind's cache and change feed.
pub struct SharedWatch {
    pub key: KindKey,
    pub resource: ApiResource,
    pub store: ObjectCache,
    changes: broadcast::Sender<Change>,
    /// An indexed watch's subscribers of one value of its first index label ([`SharedWatch::subscribe_labelled`]):
    /// with many Reconciler rules on one child kind, each hears its own children's changes, not every rule's
    /// (otherwise every child event wakes every rule's worker to find it is not its child). A queue per subscriber
    /// rather than a broadcast channel per value: a broadcast channel allocates all its slots at once (48 KiB for
    /// 1,024, per rule); a queue holds only what waits.
    routes: Mutex<HashMap<String, Vec<std::sync::Weak<RouteQueue>>>>,
    synced: watch::Sender<bool>,
    resyncs: Counter,
    objects: Gauge,
    /// What this watch keeps (everything when `None`).
    admission: Option<Admission>,
    unproven: Counter,
}

impl SharedWatch {
    /// A watch with an empty cache, fed by [`SharedWatch::apply`], reporting to `metrics`: tests feed it synthetic
    /// events (the hub starts real ones with their feed).
    #[cfg(test)]
    pub fn new(resource: ApiResource, metrics: &WatchMetrics) -> Arc<Self> {
        Self::selected(resource.clone(), KindKey::of(&resource), metrics, None)
    }

    /// [`SharedWatch::new`] that keeps only what `admission` admits.
    /// [`SharedWatch::new`] whose cache also finds objects by two labels, as the Reconciler's child watches do.
    #[cfg(test)]
    pub fn indexed(resource: ApiResource, metrics: &WatchMetrics, indexed_by: [&'static str; 2]) -> Arc<Self> {
        let mut key = KindKey::of(&resource);
        key.indexed_by = Some(indexed_by);
        Self::selected(resource, key, metrics, None)
    }

    #[cfg(test)]
    pub fn admitting(resource: ApiResource, metrics: &WatchMetrics, admission: Admission) -> Arc<Self> {
        Self::selected(resource.clone(), KindKey::of(&resource), metrics, Some(admission))
    }

    pub(super) fn selected(
        resource: ApiResource,
        key: KindKey,
        metrics: &WatchMetrics,
        admission: Option<Admission>,
    ) -> Arc<Self> {
        let labels = WatchLabels {
            api_version: key.api_version.clone(),
            kind: key.kind.clone(),
            label_selector: key.label_selector.clone().unwrap_or_default(),
            field_selector: key.field_selector.clone().unwrap_or_default(),
            // Two watches of one kind and selectors differ by form: each its own series.
            content: if key.metadata_only { "metadata" } else { "objects" }.to_owned(),
        };
        Arc::new(SharedWatch {
            store: ObjectCache::with_index(key.indexed_by),
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

    /// Says the watch ended for good: its objects gauge goes to zero (the series stays with the selector).
    pub(super) fn ended(&self) {
        self.objects.set(0);
    }

    /// Feeds one watch event into the cache, then notifies subscribers. Tests feed synthetic events here.
    pub fn apply(&self, event: Event<DynamicObject>) {
        // One object per event, written to the cache as text and sent as the notification. Items of
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

    pub(super) fn lock_routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<std::sync::Weak<RouteQueue>>>> {
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
pub(super) struct RouteQueue {
    waiting: Mutex<RouteWaiting>,
    ready: tokio::sync::Notify,
}

#[derive(Default)]
pub(super) struct RouteWaiting {
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
