//! Shared watches: one reflector per resource kind, however many rules read it; workers read its cache and
//! subscribe to change notifications.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::{broadcast, watch};
use tracing::{debug, warn};

/// Identifies a watched kind: group/version/kind is what rules name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct KindKey {
    pub api_version: String,
    pub kind: String,
}

impl KindKey {
    pub fn of(ar: &ApiResource) -> Self {
        KindKey {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
        }
    }
}

/// What subscribers hear: an object of the kind changed (added, modified, deleted) or the cache was relisted.
#[derive(Clone, Debug)]
pub enum Change {
    Object(Box<ObjectRef<DynamicObject>>),
    Resynced,
}

/// One kind's cache and change feed.
pub struct SharedWatch {
    pub resource: ApiResource,
    pub store: Store<DynamicObject>,
    changes: broadcast::Sender<Change>,
    synced: watch::Sender<bool>,
}

impl SharedWatch {
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Waits for the first complete list, so decisions are never made on a half-filled cache.
    /// (Not `Store::wait_until_ready`: it wakes only one of several concurrent waiters.)
    pub async fn synced(&self) {
        let mut synced = self.synced.subscribe();
        let _ = synced.wait_for(|s| *s).await;
    }

    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        let mut key = ObjectRef::new_with(name, self.resource.clone());
        if let Some(ns) = namespace {
            key = key.within(ns);
        }
        self.store.get(&key)
    }
}

/// Starts reflectors on demand and keeps them for the life of the process, leader or not, so a standby's
/// caches are warm when it takes over.
pub struct WatchHub {
    client: Client,
    watches: Mutex<HashMap<KindKey, Arc<SharedWatch>>>,
}

impl WatchHub {
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(WatchHub {
            client,
            watches: Mutex::new(HashMap::new()),
        })
    }

    pub fn watch(&self, resource: &ApiResource) -> Arc<SharedWatch> {
        let key = KindKey::of(resource);
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = watches.get(&key) {
            return w.clone();
        }
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let (changes, _) = broadcast::channel(1024);
        let shared = Arc::new(SharedWatch {
            resource: resource.clone(),
            store,
            changes: changes.clone(),
            synced: watch::Sender::new(false),
        });
        let feed = shared.clone();
        let dyntype = resource.clone();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let kind = key.clone();
        tokio::spawn(async move {
            let stream = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .reflect(writer);
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(Event::Apply(obj) | Event::Delete(obj)) => {
                        let _ = changes.send(Change::Object(Box::new(ObjectRef::from_obj_with(
                            &obj,
                            dyntype.clone(),
                        ))));
                    }
                    Ok(Event::InitDone) => {
                        feed.synced.send_replace(true);
                        let _ = changes.send(Change::Resynced);
                    }
                    Ok(Event::Init | Event::InitApply(_)) => {}
                    Err(e) => {
                        warn!(kind = %kind.kind, api_version = %kind.api_version, error = %e, "watch error; retrying");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            debug!(kind = %kind.kind, "watch stream ended");
        });
        watches.insert(key, shared.clone());
        shared
    }
}
