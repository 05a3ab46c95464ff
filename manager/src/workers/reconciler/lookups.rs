//! Lookups: the objects a parent's templates read, found without caching every object of a kind, and which
//! parents read which object, so a change of that object re-reconciles exactly them.
//!
//! A lookup with a fixed name watches objects of that name only (field selector), cached whole. A lookup whose
//! name is a template may read any object of its kind, so its kind is watched metadata-only (identity and
//! resourceVersion: [`crate::watch_hub::WatchHub::watch_metadata`]) and an object's content is fetched when
//! a parent reads it, kept while some parent reads it at that version, and dropped when no parent reads it any
//! more: memory follows the objects read, not the cluster's objects of the kind.
//!
//! A lookup by selector watches the objects its (literal) selector matches, filtered by the apiserver (and by
//! namespace when the rule names one), cached whole; a parent that read such a set is re-reconciled on any change
//! of the watch in the namespace it read: a member added, changed, deleted, or labelled into or out of the set
//! (the apiserver reports an object that stops matching as deleted).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, ResourceExt};
use prometheus_client::metrics::gauge::Gauge;
use ruleplane_config::{KindRef, Lookup, Reconciler, gather_lookups};
use serde_json::{Map, Value};

use super::{ParentKey, ReconcilerError, Served, discover};
use crate::context::WorkerError;
use crate::kube_client::KindDiscovery;
use crate::watch_hub::{Change, KindKey, SharedWatch, WatchHub, WatchedObject, strip_managed_fields};

/// The watch a lookup reads: its kind, and how it finds its objects.
type LookupWatchKey = (KindRef, LookupSource);

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum LookupSource {
    /// By name: `Some` when the name is fixed (not a template).
    Named(Option<String>),
    /// By label selector (query-string syntax), in the namespace the rule names (`None`: the parent's or all).
    Selected {
        selector: String,
        namespace: Option<String>,
    },
}

fn lookup_watch_key(lookup: &Lookup) -> LookupWatchKey {
    let source = match (&lookup.selector, &lookup.name) {
        (Some(selector), _) => LookupSource::Selected {
            selector: selector.to_query_string(),
            namespace: lookup.namespace.clone(),
        },
        (None, name) => LookupSource::Named(name.clone().filter(|name| !name.contains("{{"))),
    };
    let kind = KindRef {
        api_version: lookup.api_version.clone(),
        kind: lookup.kind.clone(),
    };
    (kind, source)
}

/// What a parent read: one object, or a selector lookup's set.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Read {
    Object(WatchedObject),
    /// The objects of a selector lookup's watch in a namespace (`None`: every namespace).
    Set {
        watch: KindKey,
        namespace: Option<String>,
    },
}

/// One lookup kind's watch, and where its objects' content comes from.
struct LookupWatch {
    watch: Arc<SharedWatch>,
    /// `None`: the watch caches whole objects. `Some`: it caches identities; content is fetched with this API.
    fetch: Option<Fetch>,
}

#[derive(Clone)]
struct Fetch {
    client: Client,
    resource: ApiResource,
    namespaced: bool,
}

impl Fetch {
    async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Option<Value>, kube::Error> {
        let api: Api<DynamicObject> = match namespace {
            Some(namespace) if self.namespaced => Api::namespaced_with(self.client.clone(), namespace, &self.resource),
            _ => Api::all_with(self.client.clone(), &self.resource),
        };
        let Some(object) = api.get_opt(name).await? else {
            return Ok(None);
        };
        let mut value = serde_json::to_value(object).map_err(kube::Error::SerdeError)?;
        strip_managed_fields(&mut value);
        Ok(Some(value))
    }
}

/// Content fetched for an identity-only watch: the object at the resourceVersion it was read.
struct Fetched {
    resource_version: Option<String>,
    object: Arc<Value>,
}

/// Who read what: the index a change is looked up in.
#[derive(Default)]
struct Readers {
    /// Which parents read each object or set.
    of_read: HashMap<Read, HashSet<ParentKey>>,
    /// What each parent read at its last reconcile.
    of_parent: HashMap<ParentKey, Vec<Read>>,
}

impl Readers {
    /// Records what `key` read now, in place of what it read before; returns the objects no parent reads any more.
    fn record(&mut self, key: &ParentKey, reads: Vec<Read>) -> Vec<WatchedObject> {
        let before = self.of_parent.remove(key).unwrap_or_default();
        for read in &reads {
            self.of_read.entry(read.clone()).or_default().insert(key.clone());
        }
        let now: HashSet<&Read> = reads.iter().collect();
        let unread: Vec<Read> = before.into_iter().filter(|read| !now.contains(read)).collect();
        if !reads.is_empty() {
            self.of_parent.insert(key.clone(), reads);
        }
        self.stop_reading(key, unread)
    }

    /// Forgets a parent; returns the objects no parent reads any more.
    fn forget(&mut self, key: &ParentKey) -> Vec<WatchedObject> {
        let reads = self.of_parent.remove(key).unwrap_or_default();
        self.stop_reading(key, reads)
    }

    fn stop_reading(&mut self, key: &ParentKey, reads: Vec<Read>) -> Vec<WatchedObject> {
        let mut unread = Vec::new();
        for read in reads {
            let Some(parents) = self.of_read.get_mut(&read) else {
                continue;
            };
            parents.remove(key);
            if parents.is_empty() {
                self.of_read.remove(&read);
                if let Read::Object(object) = read {
                    unread.push(object);
                }
            }
        }
        unread
    }

    /// The parents that read `object`: by name, or as a member of a set they read in its namespace or in all.
    fn of(&self, object: WatchedObject) -> Vec<ParentKey> {
        let sets = [object.namespace.clone(), None].map(|namespace| Read::Set {
            watch: object.watch.clone(),
            namespace,
        });
        let mut parents: HashSet<ParentKey> = HashSet::new();
        for read in std::iter::once(Read::Object(object)).chain(sets) {
            parents.extend(self.of_read.get(&read).into_iter().flatten().cloned());
        }
        parents.into_iter().collect()
    }
}

/// One Reconciler rule's lookups.
pub(super) struct Lookups {
    watches: HashMap<LookupWatchKey, LookupWatch>,
    readers: Mutex<Readers>,
    /// Content of objects read through identity-only watches, only while some parent reads them.
    fetched: Mutex<HashMap<WatchedObject, Fetched>>,
    /// How many objects `fetched` holds (`ruleplane_lookup_contents`).
    kept: Gauge,
}

impl Lookups {
    /// Discovers the rule's lookup kinds and starts (or joins) their shared watches.
    pub(super) async fn start(
        rule: &Reconciler,
        client: &Client,
        discovery: &KindDiscovery,
        hub: &WatchHub,
        kept: Gauge,
    ) -> Result<Self, WorkerError> {
        let mut watches = HashMap::new();
        for lookup in rule.lookups() {
            let key = lookup_watch_key(&lookup.spec);
            if watches.contains_key(&key) {
                continue;
            }
            let (KindRef { api_version, kind }, source) = &key;
            let Served {
                resource, namespaced, ..
            } = discover(discovery, rule, api_version, kind).await?;
            let watch = match source {
                // The selected objects only (the selector is the rule's, never the cluster's data), cached whole.
                LookupSource::Selected { selector, namespace } => {
                    let in_namespace = namespace
                        .as_ref()
                        .filter(|_| namespaced)
                        .map(|namespace| format!("metadata.namespace={namespace}"));
                    let selector = Some(selector.as_str()).filter(|selector| !selector.is_empty());
                    LookupWatch {
                        watch: hub.watch_filtered(&resource, selector, in_namespace.as_deref()),
                        fetch: None,
                    }
                }
                // One fixed name: only objects of that name are watched, cached whole.
                LookupSource::Named(Some(name)) => LookupWatch {
                    watch: hub.watch_filtered(&resource, None, Some(&format!("metadata.name={name}"))),
                    fetch: None,
                },
                LookupSource::Named(None) => LookupWatch {
                    watch: hub.watch_metadata(&resource),
                    fetch: Some(Fetch {
                        client: client.clone(),
                        resource,
                        namespaced,
                    }),
                },
            };
            watches.insert(key, watch);
        }
        Ok(Lookups {
            watches,
            readers: Mutex::new(Readers::default()),
            fetched: Mutex::new(HashMap::new()),
            kept,
        })
    }

    /// The lookups' shared watches.
    pub(super) fn watches(&self) -> impl Iterator<Item = &Arc<SharedWatch>> {
        self.watches.values().map(|w| &w.watch)
    }

    /// What `parent` reads: cached objects as they are, fetched ones as last read at their current version, the
    /// others fetched now. Remembers what it read, so changes there reach it.
    pub(super) async fn read(
        &self,
        rule: &Reconciler,
        key: &ParentKey,
        parent: &Value,
    ) -> Result<Map<String, Value>, ReconcilerError> {
        let mut reads = Vec::new();
        let mut missing = Vec::new();
        let mut sets = Vec::new();
        let lookups = gather_lookups(
            rule,
            parent,
            |lookup, name, namespace| {
                let watched = self.watches.get(&lookup_watch_key(lookup))?;
                let read = WatchedObject {
                    watch: watched.watch.key.clone(),
                    namespace: namespace.map(str::to_owned),
                    name: name.to_owned(),
                };
                reads.push(Read::Object(read.clone()));
                let Some(fetch) = &watched.fetch else {
                    return watched.watch.get_value(namespace, name);
                };
                // Absent from the identities: the object does not exist.
                let identity = watched.watch.get(namespace, name)?;
                let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
                match fetched.get(&read) {
                    Some(content) if content.resource_version == identity.resource_version() => {
                        Some((*content.object).clone())
                    }
                    _ => {
                        if !missing.iter().any(|(known, _)| *known == read) {
                            missing.push((read, fetch.clone()));
                        }
                        None
                    }
                }
            },
            |lookup, namespace| {
                let Some(watched) = self.watches.get(&lookup_watch_key(lookup)) else {
                    return Vec::new();
                };
                sets.push(Read::Set {
                    watch: watched.watch.key.clone(),
                    namespace: namespace.map(str::to_owned),
                });
                members(lookup, watched, namespace)
            },
        );
        reads.extend(sets);
        // Remembered even when rendering failed: a render error waits for a change (a selector lookup past its
        // `maxItems` is repaired by members leaving the set), and this is what reports that change.
        let lookups = match lookups {
            Ok(lookups) => lookups,
            Err(error) => {
                self.remember(key, reads);
                return Err(error.into());
            }
        };
        if missing.is_empty() {
            self.remember(key, reads);
            return Ok(lookups);
        }
        // What this reconcile fetched, held here too: another parent that stops reading an object may drop it
        // from the shared map before this parent is recorded as its reader.
        let mut just_read: HashMap<WatchedObject, Option<Arc<Value>>> = HashMap::new();
        for (read, fetch) in missing {
            let WatchedObject { namespace, name, .. } = &read;
            match fetch.get(namespace.as_deref(), name).await? {
                Some(object) => {
                    let resource_version = object
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    let object = Arc::new(object);
                    just_read.insert(read.clone(), Some(object.clone()));
                    let content = Fetched {
                        resource_version,
                        object,
                    };
                    self.keep(|fetched| {
                        fetched.insert(read, content);
                    });
                }
                // Deleted since the identity was seen: its deletion event is on its way.
                None => {
                    just_read.insert(read.clone(), None);
                    self.keep(|fetched| {
                        fetched.remove(&read);
                    });
                }
            }
        }
        // Again, with what was just fetched: at its version or newer than the identity's, which is what the
        // object is now.
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        let lookups = gather_lookups(
            rule,
            parent,
            |lookup, name, namespace| {
                let watched = self.watches.get(&lookup_watch_key(lookup))?;
                if watched.fetch.is_none() {
                    return watched.watch.get_value(namespace, name);
                }
                let read = WatchedObject {
                    watch: watched.watch.key.clone(),
                    namespace: namespace.map(str::to_owned),
                    name: name.to_owned(),
                };
                match just_read.get(&read) {
                    Some(object) => object.as_deref().cloned(),
                    None => fetched.get(&read).map(|content| (*content.object).clone()),
                }
            },
            |lookup, namespace| match self.watches.get(&lookup_watch_key(lookup)) {
                Some(watched) => members(lookup, watched, namespace),
                None => Vec::new(),
            },
        )?;
        drop(fetched);
        self.remember(key, reads);
        Ok(lookups)
    }

    /// Records what `key` read now, forgetting what it read before and no longer does.
    fn remember(&self, key: &ParentKey, reads: Vec<Read>) {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        let unread = readers.record(key, reads);
        self.drop_contents(unread);
    }

    /// Forgets a parent that is gone: the objects only it read are no longer kept.
    pub(super) fn forget(&self, key: &ParentKey) {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        let unread = readers.forget(key);
        self.drop_contents(unread);
    }

    fn drop_contents(&self, unread: Vec<WatchedObject>) {
        if unread.is_empty() {
            return;
        }
        self.keep(|fetched| {
            for object in &unread {
                fetched.remove(object);
            }
        });
    }

    /// The parents that read the object a change is about, by name or as a member of a set they read (none for a
    /// resync: every parent is queued then).
    pub(super) fn readers_of(&self, kind: &KindKey, change: &Change) -> Vec<ParentKey> {
        let Some(object) = change.object() else {
            return Vec::new();
        };
        let read = WatchedObject::of(kind, object);
        if matches!(change, Change::Deleted(_)) {
            self.keep(|fetched| {
                fetched.remove(&read);
            });
        }
        let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        readers.of(read)
    }

    /// The parents that read something at their last reconcile.
    pub(super) fn readers(&self) -> Vec<ParentKey> {
        let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        readers.of_parent.keys().cloned().collect()
    }

    /// A relist of `kind`'s watch: content fetched for an object its identities no longer list (deleted while the
    /// watch was down, no deletion heard) or list at another version is dropped, as its deletion or change would
    /// have dropped it.
    pub(super) fn resynced(&self, kind: &KindKey) {
        let Some(watched) = self
            .watches
            .values()
            .find(|w| w.watch.key == *kind && w.fetch.is_some())
        else {
            return;
        };
        self.keep(|fetched| {
            fetched.retain(|read, content| {
                read.watch != *kind
                    || watched
                        .watch
                        .get(read.namespace.as_deref(), &read.name)
                        .is_some_and(|identity| identity.resource_version() == content.resource_version)
            });
        });
    }

    /// Changes what is kept, and says how much that is.
    fn keep(&self, change: impl FnOnce(&mut HashMap<WatchedObject, Fetched>)) {
        let mut fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut fetched);
        self.kept.set(i64::try_from(fetched.len()).unwrap_or(i64::MAX));
    }
}

/// The candidates of a selector lookup in `namespace` (`None`: all): the watch's objects there, with the apiVersion
/// and kind a list's items lack, so [`ruleplane_config::select_lookup_objects`] decides membership as offline.
fn members(lookup: &Lookup, watched: &LookupWatch, namespace: Option<&str>) -> Vec<Value> {
    let mut objects = watched.watch.store.values_in(namespace);
    for object in &mut objects {
        if let Value::Object(fields) = object {
            fields
                .entry("apiVersion")
                .or_insert_with(|| Value::String(lookup.api_version.clone()));
            fields
                .entry("kind")
                .or_insert_with(|| Value::String(lookup.kind.clone()));
        }
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    fn services(selector: Option<&str>) -> KindKey {
        let mut key = KindKey::of(&ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()));
        key.label_selector = selector.map(str::to_owned);
        key
    }

    fn parent(namespace: &str, name: &str) -> ParentKey {
        ParentKey {
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }

    fn object(watch: &KindKey, namespace: &str, name: &str) -> WatchedObject {
        WatchedObject {
            watch: watch.clone(),
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }

    fn set(watch: &KindKey, namespace: Option<&str>) -> Read {
        Read::Set {
            watch: watch.clone(),
            namespace: namespace.map(str::to_owned),
        }
    }

    fn sorted(mut parents: Vec<ParentKey>) -> Vec<ParentKey> {
        parents.sort();
        parents
    }

    #[test]
    fn a_change_in_a_set_reaches_the_parents_that_read_that_namespace_or_every_namespace() {
        let exposed = services(Some("expose=true"));
        let mut readers = Readers::default();
        readers.record(&parent("shop", "exposed"), vec![set(&exposed, Some("shop"))]);
        readers.record(&parent("admin", "exposed"), vec![set(&exposed, Some("admin"))]);
        readers.record(&parent("ops", "everything"), vec![set(&exposed, None)]);
        assert_eq!(
            sorted(readers.of(object(&exposed, "shop", "web"))),
            [parent("ops", "everything"), parent("shop", "exposed")]
        );
        assert_eq!(
            sorted(readers.of(object(&exposed, "elsewhere", "web"))),
            [parent("ops", "everything")]
        );
        assert!(
            readers.of(object(&services(None), "shop", "web")).is_empty(),
            "another watch of the kind (another selector) is another set"
        );
    }

    #[test]
    fn a_parent_that_stops_reading_a_set_no_longer_hears_of_it_and_drops_no_content() {
        let exposed = services(Some("expose=true"));
        let mut readers = Readers::default();
        let key = parent("shop", "exposed");
        readers.record(&key, vec![set(&exposed, Some("shop"))]);
        let unread = readers.record(&key, Vec::new());
        assert!(unread.is_empty(), "a set has no fetched content to drop");
        assert!(readers.of(object(&exposed, "shop", "web")).is_empty());
        readers.record(&key, vec![set(&exposed, Some("shop"))]);
        assert!(readers.forget(&key).is_empty());
        assert!(readers.of(object(&exposed, "shop", "web")).is_empty(), "forgotten");
    }

    #[test]
    fn an_object_read_by_name_is_dropped_once_its_last_reader_stops() {
        let all = services(None);
        let settings = object(&all, "shop", "settings");
        let mut readers = Readers::default();
        readers.record(&parent("shop", "a"), vec![Read::Object(settings.clone())]);
        readers.record(&parent("shop", "b"), vec![Read::Object(settings.clone())]);
        assert_eq!(readers.of(settings.clone()).len(), 2);
        assert!(readers.forget(&parent("shop", "a")).is_empty(), "b still reads it");
        assert_eq!(readers.forget(&parent("shop", "b")), std::slice::from_ref(&settings));
        assert!(readers.of(settings).is_empty());
    }

    /// Content fetched through an identity-only watch, of an object deleted while that watch was down: the relist
    /// does not list it, and the resync drops its content (and that of an object listed at a newer version); the
    /// identity is gone, so no parent is served it either.
    #[tokio::test]
    async fn a_relist_drops_the_content_of_objects_it_no_longer_lists() {
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
        let watch = SharedWatch::new(resource.clone(), &Default::default());
        let identity = |name: &str, version: &str| {
            let mut object = DynamicObject::new(name, &resource).within("shop");
            object.metadata.resource_version = Some(version.to_owned());
            object
        };
        let kind = KindRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
        };
        let lookups = Lookups {
            watches: HashMap::from([(
                (kind, LookupSource::Named(None)),
                LookupWatch {
                    watch: watch.clone(),
                    fetch: Some(Fetch {
                        client: crate::context::offline_context().client,
                        resource: resource.clone(),
                        namespaced: true,
                    }),
                },
            )]),
            readers: Mutex::default(),
            fetched: Mutex::default(),
            kept: Gauge::default(),
        };
        for (name, version) in [("kept", "1"), ("gone", "1"), ("changed", "1")] {
            watch.apply(Event::Apply(identity(name, version)));
            let read = object(&watch.key, "shop", name);
            lookups.remember(&parent("shop", name), vec![Read::Object(read.clone())]);
            lookups.keep(|fetched| {
                fetched.insert(
                    read,
                    Fetched {
                        resource_version: Some(version.to_owned()),
                        object: Arc::new(serde_json::json!({"data": {"token": name}})),
                    },
                );
            });
        }
        assert_eq!(lookups.kept.get(), 3);

        watch.apply(Event::Init);
        watch.apply(Event::InitApply(identity("kept", "1")));
        watch.apply(Event::InitApply(identity("changed", "2")));
        watch.apply(Event::InitDone);
        assert!(
            watch.get(Some("shop"), "gone").is_none(),
            "the identity is gone: no parent reads it"
        );
        lookups.resynced(&watch.key);
        let fetched = lookups.fetched.lock().unwrap();
        let mut left: Vec<&str> = fetched.keys().map(|read| read.name.as_str()).collect();
        left.sort();
        assert_eq!(left, ["kept"]);
        assert_eq!(lookups.kept.get(), 1, "the gauge follows");
        drop(fetched);
        let mut readers = lookups.readers();
        readers.sort();
        assert_eq!(
            readers,
            [
                parent("shop", "changed"),
                parent("shop", "gone"),
                parent("shop", "kept")
            ],
            "every reader is named to the resync, the one of the gone object too"
        );
    }
}
