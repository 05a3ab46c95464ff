//! The label index of a watch's cache: which objects carry which values of two labels.

use std::collections::{BTreeSet, HashMap};

use kube::api::DynamicObject;

/// Which cached objects carry which values of two labels (a rule's name and a parent's UID). Kept by the watch's
/// feed with the cache: the rules that read one watch of children each ask it, instead of each indexing every
/// cached object themselves (200 rules over 10,000 children took 2,000,000 metadata parses at start).
pub(super) struct LabelIndex {
    labels: [&'static str; 2],
    by_values: HashMap<[String; 2], BTreeSet<String>>,
    values_of: HashMap<String, [String; 2]>,
}

impl LabelIndex {
    pub(super) fn new(labels: [&'static str; 2]) -> Self {
        LabelIndex {
            labels,
            by_values: HashMap::new(),
            values_of: HashMap::new(),
        }
    }

    pub(super) fn insert(&mut self, key: &str, object: &DynamicObject) {
        self.remove(key);
        let labels = object.metadata.labels.as_ref();
        let value = |label: &str| labels.and_then(|labels| labels.get(label)).cloned();
        if let (Some(first), Some(second)) = (value(self.labels[0]), value(self.labels[1])) {
            let values = [first, second];
            self.by_values.entry(values.clone()).or_default().insert(key.to_owned());
            self.values_of.insert(key.to_owned(), values);
        }
    }

    /// The cache keys of the objects whose two labels have these values.
    pub(super) fn keys_with(&self, values: [&str; 2]) -> impl Iterator<Item = &String> {
        self.by_values.get(&values.map(str::to_owned)).into_iter().flatten()
    }

    pub(super) fn remove(&mut self, key: &str) {
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
