//! The storage objects the volume plugins read, from the shared watches: the snapshot's store and the cluster
//! events (claim added, CSINode updated, ...) their queueing hints decide on.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use kube::api::{ApiResource, DynamicObject};
use ruleplane_config::scheduler::engine::Storage;
use ruleplane_config::scheduler::engine::queueing_hints::{ActionType, ClusterEvent, StorageObject};
use tracing::warn;

use crate::watch_hub::{Change, SharedWatch, Subscription, WatchHub};

/// The kinds watched, in [`StorageWatches::all`]'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Claim,
    Volume,
    Class,
    CsiNode,
    CsiDriver,
    Capacity,
    Attachment,
}

const KINDS: [Kind; 7] = [
    Kind::Claim,
    Kind::Volume,
    Kind::Class,
    Kind::CsiNode,
    Kind::CsiDriver,
    Kind::Capacity,
    Kind::Attachment,
];

/// The shared watches of PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers,
/// CSIStorageCapacities and VolumeAttachments (all namespaces), as kube-scheduler's informers.
pub struct StorageWatches {
    watches: [Arc<SharedWatch>; 7],
}

impl StorageWatches {
    /// Starts (or joins) the seven watches.
    pub fn new(hub: &WatchHub) -> StorageWatches {
        StorageWatches {
            watches: [
                hub.watch(&ApiResource::erase::<PersistentVolumeClaim>(&())),
                hub.watch(&ApiResource::erase::<PersistentVolume>(&())),
                hub.watch(&ApiResource::erase::<StorageClass>(&())),
                hub.watch(&ApiResource::erase::<CSINode>(&())),
                hub.watch(&ApiResource::erase::<CSIDriver>(&())),
                hub.watch(&ApiResource::erase::<CSIStorageCapacity>(&())),
                hub.watch(&ApiResource::erase::<VolumeAttachment>(&())),
            ],
        }
    }

    /// Seven watches fed by hand ([`SharedWatch::apply`]), for tests.
    #[cfg(test)]
    pub fn unwatched(metrics: &crate::metrics::WatchMetrics) -> StorageWatches {
        let watch = SharedWatch::new;
        StorageWatches {
            watches: [
                watch(ApiResource::erase::<PersistentVolumeClaim>(&()), metrics),
                watch(ApiResource::erase::<PersistentVolume>(&()), metrics),
                watch(ApiResource::erase::<StorageClass>(&()), metrics),
                watch(ApiResource::erase::<CSINode>(&()), metrics),
                watch(ApiResource::erase::<CSIDriver>(&()), metrics),
                watch(ApiResource::erase::<CSIStorageCapacity>(&()), metrics),
                watch(ApiResource::erase::<VolumeAttachment>(&()), metrics),
            ],
        }
    }

    /// Every watch.
    pub fn all(&self) -> &[Arc<SharedWatch>; 7] {
        &self.watches
    }

    /// Every object of the watches' caches, parsed one at a time.
    fn storage(&self) -> Storage {
        fn add<T: serde::de::DeserializeOwned>(
            storage: &mut Storage,
            watch: &SharedWatch,
            wrap: fn(Arc<T>) -> StorageObject,
        ) {
            watch.store.for_each_typed(|object: Result<T, _>| match object {
                Ok(object) => {
                    storage.apply(wrap(Arc::new(object)));
                }
                Err(error) => warn!(%error, "cached storage object does not parse; ignored"),
            });
        }
        let mut storage = Storage::default();
        let [claims, volumes, classes, nodes, drivers, capacities, attachments] = &self.watches;
        add(&mut storage, claims, StorageObject::Claim);
        add(&mut storage, volumes, StorageObject::Volume);
        add(&mut storage, classes, StorageObject::Class);
        add(&mut storage, nodes, StorageObject::CsiNode);
        add(&mut storage, drivers, StorageObject::CsiDriver);
        add(&mut storage, capacities, StorageObject::Capacity);
        add(&mut storage, attachments, StorageObject::Attachment);
        storage
    }

    /// A store of only these claims (namespace, name) and the volumes named here or by the claims, from the
    /// watches' caches: what PreBind's check reads, without copying every other object each second.
    pub fn claims_and_volumes(&self, claims: &[(String, String)], volumes: &[String]) -> Storage {
        let [claim_watch, volume_watch, ..] = &self.watches;
        let claims: Vec<PersistentVolumeClaim> = claims
            .iter()
            .filter_map(|(namespace, name)| claim_watch.store.get_typed(Some(namespace), name))
            .collect();
        let bound = claims
            .iter()
            .filter_map(|c| c.spec.as_ref()?.volume_name.clone())
            .filter(|name| !name.is_empty());
        let names: std::collections::BTreeSet<String> = volumes.iter().cloned().chain(bound).collect();
        let volumes: Vec<PersistentVolume> = names
            .iter()
            .filter_map(|name| volume_watch.store.get_typed(None, name))
            .collect();
        Storage::new(claims, volumes, [])
    }

    /// Subscriptions to every watch, from now on, and the objects already there.
    pub fn subscribe(&self) -> StorageChanges {
        // Subscribed first: a change racing the read below is applied again, which is harmless.
        let subscriptions = self.watches.iter().map(|w| w.subscribe()).collect();
        StorageChanges {
            subscriptions,
            watches: self.watches.clone(),
            store: self.storage(),
            dirty: true,
        }
    }
}

fn typed<T: serde::de::DeserializeOwned>(object: &DynamicObject) -> Option<T> {
    match crate::watch_hub::typed::<T>(object) {
        Ok(typed) => Some(typed),
        Err(error) => {
            warn!(name = ?object.metadata.name, %error, "storage object from the watch does not parse; ignored");
            None
        }
    }
}

fn storage_object(kind: Kind, object: &DynamicObject) -> Option<StorageObject> {
    Some(match kind {
        Kind::Claim => StorageObject::Claim(Arc::new(typed(object)?)),
        Kind::Volume => StorageObject::Volume(Arc::new(typed(object)?)),
        Kind::Class => StorageObject::Class(Arc::new(typed(object)?)),
        Kind::CsiNode => StorageObject::CsiNode(Arc::new(typed(object)?)),
        Kind::CsiDriver => StorageObject::CsiDriver(Arc::new(typed(object)?)),
        Kind::Capacity => StorageObject::Capacity(Arc::new(typed(object)?)),
        Kind::Attachment => StorageObject::Attachment(Arc::new(typed(object)?)),
    })
}

/// The cache's subscriptions to the storage watches and the store they keep up to date, each object parsed once
/// (its last version is the old object of an update event).
pub struct StorageChanges {
    subscriptions: Vec<Subscription>,
    watches: [Arc<SharedWatch>; 7],
    store: Storage,
    /// Something changed since the store was last given to the snapshot.
    pub dirty: bool,
}

impl StorageChanges {
    /// Applies the waiting changes; returns their cluster events (none unless `listening`) and whether a watch was
    /// relisted (what changed meanwhile is unknown).
    pub fn drain(&mut self, listening: bool) -> (Vec<ClusterEvent>, bool) {
        let mut events = Vec::new();
        let mut resynced = false;
        for (kind, subscription) in KINDS.into_iter().zip(self.subscriptions.iter_mut()) {
            while let Some(Some(change)) = subscription.recv().now_or_never() {
                self.dirty = true;
                let (object, deleted) = match &change {
                    Change::Applied(object) => (object, false),
                    Change::Deleted(object) => (object, true),
                    Change::Resync => {
                        resynced = true;
                        continue;
                    }
                };
                let Some(object) = storage_object(kind, object) else {
                    continue;
                };
                if deleted {
                    let last = self.store.remove(&object).unwrap_or(object);
                    if listening {
                        events.push(ClusterEvent::storage(ActionType::DELETE, Some(Arc::new(last)), None));
                    }
                    continue;
                }
                let old = self.store.apply(object.clone());
                if listening {
                    let action = if old.is_some() {
                        ActionType::UPDATE
                    } else {
                        ActionType::ADD
                    };
                    events.push(ClusterEvent::storage(action, old.map(Arc::new), Some(Arc::new(object))));
                }
            }
        }
        if resynced {
            // What was deleted during the relist is known only from the caches.
            self.store = StorageWatches {
                watches: self.watches.clone(),
            }
            .storage();
        }
        (events, resynced)
    }

    /// The watches' objects as last applied (shared with the snapshot's copies).
    pub fn store(&self) -> &Storage {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::WatchMetrics;
    use kube::runtime::watcher::Event;
    use ruleplane_config::scheduler::engine::queueing_hints::EventObjects;
    use serde_json::json;

    fn claim(name: &str, version: &str, class: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "team-a", "resourceVersion": version},
            "spec": {"storageClassName": class},
        }))
        .expect("claim")
    }

    fn class_of(storage: &Storage, name: &str) -> Option<String> {
        let claim = storage.claim("team-a", name).ok()?;
        claim.spec.as_ref()?.storage_class_name.clone()
    }

    #[test]
    fn the_store_follows_the_watches_object_by_object_and_gives_each_update_its_old_version() {
        let watches = StorageWatches::unwatched(&WatchMetrics::default());
        let claims = &watches.all()[0];
        claims.apply(Event::Apply(claim("before", "1", "slow")));
        let mut changes = watches.subscribe();
        assert_eq!(class_of(changes.store(), "before").as_deref(), Some("slow"));

        claims.apply(Event::Apply(claim("added", "2", "fast")));
        claims.apply(Event::Apply(claim("before", "3", "fast")));
        claims.apply(Event::Delete(claim("added", "2", "fast")));
        let (events, resynced) = changes.drain(true);
        assert!(!resynced);
        assert_eq!(class_of(changes.store(), "before").as_deref(), Some("fast"));
        assert!(changes.store().claim("team-a", "added").is_err());
        let version = |object: &Option<Arc<StorageObject>>| match object.as_deref() {
            Some(StorageObject::Claim(claim)) => claim.metadata.resource_version.clone(),
            _ => None,
        };
        let seen: Vec<(String, Option<String>, Option<String>)> = events
            .iter()
            .map(|event| match &event.objects {
                EventObjects::Storage { old, new } => (event.label(), version(old), version(new)),
                other => panic!("not a storage event: {other:?}"),
            })
            .collect();
        let expected = [
            ("PersistentVolumeClaimAdd", None, Some("2")),
            ("PersistentVolumeClaimUpdate", Some("1"), Some("3")),
            ("PersistentVolumeClaimDelete", Some("2"), None),
        ]
        .map(|(label, old, new)| (label.to_string(), old.map(str::to_string), new.map(str::to_string)));
        assert_eq!(seen, expected);

        // A relist that no longer has `before`: its deletion is known from the cache alone.
        claims.apply(Event::Init);
        claims.apply(Event::InitApply(claim("other", "5", "slow")));
        claims.apply(Event::InitDone);
        let (_, resynced) = changes.drain(false);
        assert!(resynced);
        assert!(changes.store().claim("team-a", "before").is_err());
        assert_eq!(class_of(changes.store(), "other").as_deref(), Some("slow"));
    }
}
