//! A watch's cache: objects by namespace and name, kept as compact JSON text, swapped whole at a relist.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;

use kube::ResourceExt;
use tracing::warn;

use super::ObjectName;
use super::index::LabelIndex;

/// An object as compact JSON text, parsed when read: as a tree of `serde_json::Value`s an object takes several
/// times the bytes of its text (every map a B-tree node, every string and number its own allocation), and the
/// caches are most of the manager's memory (10,000 parents with two children each: 30,000 objects; a scheduler's
/// 10,000 pods). A read parses one object in microseconds.
struct Stored(Box<str>);

impl Stored {
    /// Parsed straight into `T` (the text was written from a parsed object: it always parses back).
    fn read<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(&self.0).ok()
    }

    fn object(&self) -> Option<Arc<DynamicObject>> {
        self.read().map(Arc::new)
    }
}

/// A kind's cache, keyed by namespace and name.
pub struct ObjectCache {
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
    fn split_key(key: &str) -> ObjectName {
        match key.split_once('/') {
            Some((namespace, name)) => ObjectName {
                namespace: Some(namespace.to_owned()),
                name: name.to_owned(),
            },
            None => ObjectName {
                namespace: None,
                name: key.to_owned(),
            },
        }
    }

    /// A cache without an index (tests fill one directly).
    #[cfg(test)]
    pub fn new() -> Self {
        Self::with_index(None)
    }

    /// A cache that also finds its objects by the values of two labels ([`ObjectCache::labelled`]).
    pub fn with_index(index_labels: Option<[&'static str; 2]>) -> Self {
        ObjectCache {
            index_labels,
            contents: RwLock::new(Contents::new(index_labels)),
            relisting: Mutex::default(),
        }
    }

    fn entry(&self, object: &Arc<DynamicObject>) -> Option<(String, Stored)> {
        let key = Self::key(object.metadata.namespace.as_deref(), object.metadata.name.as_deref()?);
        match serde_json::to_string(&**object) {
            Ok(text) => Some((key, Stored(text.into_boxed_str()))),
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

    pub(super) fn upsert(&self, object: &Arc<DynamicObject>) {
        if let Some((key, stored)) = self.entry(object) {
            self.contents
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, stored, object);
        }
    }

    pub(super) fn remove(&self, object: &DynamicObject) {
        if let Some(name) = object.metadata.name.as_deref() {
            let key = Self::key(object.metadata.namespace.as_deref(), name);
            self.contents.write().unwrap_or_else(|e| e.into_inner()).remove(&key);
        }
    }

    pub(super) fn begin_relist(&self) {
        *self.relisting.lock().unwrap_or_else(|e| e.into_inner()) = Some(Contents::new(self.index_labels));
    }

    pub(super) fn relisted(&self, object: &Arc<DynamicObject>) {
        if let Some((key, stored)) = self.entry(object) {
            self.relisting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(|| Contents::new(self.index_labels))
                .insert(key, stored, object);
        }
    }

    pub(super) fn end_relist(&self) {
        let listed = self.relisting.lock().unwrap_or_else(|e| e.into_inner()).take();
        *self.contents.write().unwrap_or_else(|e| e.into_inner()) =
            listed.unwrap_or_else(|| Contents::new(self.index_labels));
    }

    /// The namespaces and names of the cached objects whose two index labels have these values (none if this
    /// cache keeps no index).
    pub fn labelled(&self, values: [&str; 2]) -> Vec<ObjectName> {
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        let Some(index) = contents.index.as_ref() else {
            return Vec::new();
        };
        index.keys_with(values).map(|key| Self::split_key(key)).collect()
    }

    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        self.with(namespace, name, Stored::object)
    }

    /// A cached object parsed straight into its type (a pod for a scheduling decision).
    pub fn get_typed<T: serde::de::DeserializeOwned>(&self, namespace: Option<&str>, name: &str) -> Option<T> {
        self.with(namespace, name, Stored::read)
    }

    pub fn get_value(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value> {
        self.with(namespace, name, Stored::read)
    }

    /// What `read` takes from each cached object's metadata. Objects kept as text are read one at a time and
    /// only as far as their metadata: a rebuild over 10,000 cached objects never holds them all parsed at once
    /// (transient memory the allocator does not always give back).
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
            .filter_map(|stored| read(&stored.read::<MetadataOnly>()?.metadata))
            .collect()
    }

    /// The cached objects in `namespace` (`None`: all) as JSON values: the members a selector lookup reads from a
    /// watch already narrowed to its selector.
    pub fn values_in(&self, namespace: Option<&str>) -> Vec<serde_json::Value> {
        let prefix = namespace.map(|namespace| format!("{namespace}/"));
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        contents
            .objects
            .iter()
            .filter(|(key, _)| prefix.as_deref().is_none_or(|prefix| key.starts_with(prefix)))
            .filter_map(|(_, stored)| stored.read())
            .collect()
    }

    /// Every cached object, one at a time: objects kept as text are parsed one by one and dropped after `visit`,
    /// so a rebuild over thousands of pods and nodes never holds them all parsed at once (`visit` must not read
    /// this cache again: it runs under its read lock).
    pub fn for_each(&self, mut visit: impl FnMut(&DynamicObject)) {
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        for stored in contents.objects.values() {
            if let Some(object) = stored.object() {
                visit(&object);
            }
        }
    }

    /// Every cached object parsed straight into `T`, one at a time (no JSON tree, none kept): a store built from
    /// thousands of objects holds only its own typed copies. `visit` runs under the cache's read lock.
    pub fn for_each_typed<T: serde::de::DeserializeOwned>(&self, mut visit: impl FnMut(Result<T, serde_json::Error>)) {
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        for stored in contents.objects.values() {
            visit(serde_json::from_str(&stored.0));
        }
    }

    /// Every cached object (a resync or a rebuild reads them all).
    pub fn state(&self) -> Vec<Arc<DynamicObject>> {
        let contents = self.contents.read().unwrap_or_else(|e| e.into_inner());
        contents.objects.values().filter_map(Stored::object).collect()
    }

    pub fn len(&self) -> usize {
        self.contents.read().unwrap_or_else(|e| e.into_inner()).objects.len()
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

pub(super) fn without_managed_fields(mut object: DynamicObject) -> DynamicObject {
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
