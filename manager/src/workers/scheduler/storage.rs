//! The storage objects the volume plugins read, from the shared watches: the snapshot's store and the cluster
//! events (claim added, CSINode updated, ...) their queueing hints decide on.

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use kube::api::{ApiResource, DynamicObject};
use ruleplane_config::scheduler::engine::queueing_hints::{ActionType, ClusterEvent, StorageObject};
use ruleplane_config::scheduler::engine::{CsiObjects, Storage};
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

    /// The store the snapshot gives the volume plugins, from the watches' caches.
    pub fn storage(&self) -> Storage {
        fn all<T: serde::de::DeserializeOwned>(watch: &SharedWatch) -> Vec<T> {
            watch.store.state().iter().filter_map(|o| typed(o)).collect()
        }
        let [claims, volumes, classes, nodes, drivers, capacities, attachments] = &self.watches;
        Storage::new(all(claims), all(volumes), all(classes)).with_csi(CsiObjects {
            nodes: all(nodes),
            drivers: all(drivers),
            capacities: all(capacities),
            attachments: all(attachments),
        })
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

    /// Subscriptions to every watch, from now on.
    pub fn subscribe(&self) -> StorageChanges {
        StorageChanges {
            subscriptions: self.watches.iter().map(|w| w.subscribe()).collect(),
            seen: HashMap::new(),
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
        Kind::Claim => StorageObject::Claim(typed(object)?),
        Kind::Volume => StorageObject::Volume(typed(object)?),
        Kind::Class => StorageObject::Class(typed(object)?),
        Kind::CsiNode => StorageObject::CsiNode(typed(object)?),
        Kind::CsiDriver => StorageObject::CsiDriver(typed(object)?),
        Kind::Capacity => StorageObject::Capacity(typed(object)?),
        Kind::Attachment => StorageObject::Attachment(typed(object)?),
    })
}

/// The cache's subscriptions to the storage watches, with the last version of each object seen (the old object
/// of an update event).
pub struct StorageChanges {
    subscriptions: Vec<Subscription>,
    seen: HashMap<(Kind, Option<String>, String), Arc<StorageObject>>,
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
                let key = (
                    kind,
                    object.metadata.namespace.clone(),
                    object.metadata.name.clone().unwrap_or_default(),
                );
                if deleted {
                    let last = self
                        .seen
                        .remove(&key)
                        .or_else(|| storage_object(kind, object).map(Arc::new));
                    if listening && let Some(last) = last {
                        events.push(ClusterEvent::storage(ActionType::DELETE, Some(last), None));
                    }
                    continue;
                }
                let Some(new) = storage_object(kind, object).map(Arc::new) else {
                    continue;
                };
                let old = self.seen.insert(key, new.clone());
                if listening {
                    let action = if old.is_some() {
                        ActionType::UPDATE
                    } else {
                        ActionType::ADD
                    };
                    events.push(ClusterEvent::storage(action, old, Some(new)));
                }
            }
        }
        (events, resynced)
    }
}
