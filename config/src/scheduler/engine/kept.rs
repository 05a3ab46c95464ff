//! An object kept as JSON text and parsed only where something reads it whole: the snapshot's nodes and placed
//! pods, the queue's waiting pods.

// A typed k8s-openapi object takes several times the bytes of its text: every optional field of a container, probe
// or status is inline, set or not. The snapshot holds every node and pod of the cluster, so each keeps its text
// beside the few fields the plugins read, and the object is parsed where a rare path needs it.

use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// An object kept parsed or as text.
#[derive(Clone, Debug)]
pub struct Kept<T> {
    parsed: OnceLock<Arc<T>>,
    text: Option<Arc<str>>,
}

impl<T: Serialize + DeserializeOwned + Default> Kept<T> {
    /// The object kept parsed.
    pub fn parsed(object: Arc<T>) -> Kept<T> {
        Kept {
            parsed: OnceLock::from(object),
            text: None,
        }
    }

    /// The object kept as text (parsed, in the unlikely case it does not serialize).
    pub fn text(object: Arc<T>) -> Kept<T> {
        match serde_json::to_string(&*object) {
            Ok(text) => Kept {
                parsed: OnceLock::new(),
                text: Some(text.into()),
            },
            Err(_) => Kept::parsed(object),
        }
    }

    /// The same object kept as text from now on.
    pub(crate) fn into_text(mut self) -> Kept<T> {
        match self.parsed.take() {
            Some(object) if self.text.is_none() => Kept::text(object),
            _ => self,
        }
    }

    /// The object, parsed from its text on the first call and kept parsed.
    pub fn get(&self) -> &Arc<T> {
        self.parsed.get_or_init(|| Arc::new(self.parse()))
    }

    /// The object, without keeping it parsed: for one read of the whole object (an event, a victim).
    pub(crate) fn to_shared(&self) -> Arc<T> {
        match self.parsed.get() {
            Some(object) => object.clone(),
            None => Arc::new(self.parse()),
        }
    }

    /// The object if it is kept parsed (or was parsed already).
    pub(crate) fn if_parsed(&self) -> Option<&Arc<T>> {
        self.parsed.get()
    }

    /// The object's JSON text, if it is kept as text.
    pub(crate) fn json_text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    fn parse(&self) -> T {
        // The text was written from the object: it always parses back.
        self.text
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn a_kept_object_reads_the_same_as_text_or_parsed_and_is_parsed_only_when_read_whole() {
        let pod: Arc<Pod> = Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "pause"}]}
            }))
            .expect("pod"),
        );
        let text = Kept::text(pod.clone());
        assert!(text.if_parsed().is_none() && text.json_text().is_some());
        assert_eq!(*text.to_shared(), *pod);
        assert!(text.if_parsed().is_none(), "to_shared keeps it text");
        assert_eq!(**text.get(), *pod);
        assert!(text.if_parsed().is_some(), "get keeps it parsed");

        let parsed = Kept::parsed(pod.clone());
        assert!(Arc::ptr_eq(parsed.get(), &pod), "a parsed object is shared, not copied");
        let compact = parsed.into_text();
        assert!(compact.if_parsed().is_none());
        assert_eq!(**compact.get(), *pod);
    }
}
