//! Our own writes, from request to watch echo: which watch events only echo them, and what an object we wrote is
//! until its echo arrives (a reconcile reads its own writes, not a cache one event behind).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::watch_hub::KindKey;

/// A watched object: its watch, namespace and name.
pub(super) type WatchedObject = (KindKey, Option<String>, String);

enum OwnWrite {
    /// Sent, not answered yet. `overtaken` once a watch event for the object arrived meanwhile: ours or not,
    /// the answer can then no longer be taken for the object's newest state.
    InFlight { overtaken: bool },
    /// Answered, and no watch event for the object since the request went out: the object is exactly this
    /// until an event says otherwise.
    Written { version: String, object: Arc<Value> },
}

/// The writes of one worker. Entries live from request to the next watch event for the object (normally
/// milliseconds); a relist of a kind drops that kind's.
#[derive(Default)]
pub(super) struct OwnWrites(Mutex<HashMap<WatchedObject, OwnWrite>>);

impl OwnWrites {
    fn lock(&self) -> MutexGuard<'_, HashMap<WatchedObject, OwnWrite>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `write` (answering with the stored object) as one of ours to `object`, which had resourceVersion
    /// `before` when the write was decided: noted from request to answer, forgotten if it fails.
    pub async fn track<E>(
        &self,
        object: WatchedObject,
        before: Option<&str>,
        write: impl Future<Output = Result<Value, E>>,
    ) -> Result<Value, E> {
        self.started(object.clone());
        let written = write.await;
        match &written {
            Ok(answer) => self.answered(&object, answer.clone(), before),
            Err(_) => self.forget(&object),
        }
        written
    }

    /// A write to `object` is about to be sent.
    fn started(&self, object: WatchedObject) {
        self.lock().insert(object, OwnWrite::InFlight { overtaken: false });
    }

    /// The apiserver answered the write with the stored object; `before` is the resourceVersion the object had
    /// when the write was decided. An answer with that same version changed nothing, so no echo will come: it is
    /// not kept (the cache already holds exactly that object).
    fn answered(&self, object: &WatchedObject, answer: Value, before: Option<&str>) {
        let mut writes = self.lock();
        let version = answer
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|version| Some(*version) != before)
            .map(str::to_owned);
        match (writes.get(object), version) {
            (Some(OwnWrite::InFlight { overtaken: false }), Some(version)) => {
                let object_written = OwnWrite::Written {
                    version,
                    object: Arc::new(answer),
                };
                writes.insert(object.clone(), object_written);
            }
            _ => {
                writes.remove(object);
            }
        }
    }

    /// The write failed, or a write this worker does not track is about to change the object: the cache is
    /// the only truth for it.
    pub fn forget(&self, object: &WatchedObject) {
        self.lock().remove(object);
    }

    /// A watch event for `object` (`version`: the resourceVersion it carries; `None` for a deletion). Returns
    /// whether it is exactly the echo of our answered write, which tells this worker nothing new.
    pub fn event(&self, object: &WatchedObject, version: Option<&str>) -> bool {
        let mut writes = self.lock();
        match writes.get_mut(object) {
            Some(OwnWrite::InFlight { overtaken }) => {
                *overtaken = true;
                false
            }
            Some(OwnWrite::Written { version: written, .. }) => {
                let echo = version == Some(written.as_str());
                writes.remove(object);
                echo
            }
            None => false,
        }
    }

    /// The watch of `kind` listed again: its cache is the truth for every object of the kind.
    pub fn resynced(&self, kind: &KindKey) {
        self.lock().retain(|(written_kind, _, _), write| match write {
            _ if written_kind != kind => true,
            OwnWrite::InFlight { overtaken } => {
                *overtaken = true;
                true
            }
            OwnWrite::Written { .. } => false,
        });
    }

    /// The object as our write left it, while its echo has not arrived.
    pub fn written(&self, object: &WatchedObject) -> Option<Arc<Value>> {
        match self.lock().get(object) {
            Some(OwnWrite::Written { object, .. }) => Some(object.clone()),
            _ => None,
        }
    }

    /// Every object our writes left that `wanted` selects (few: only writes whose echo is still on its way).
    pub fn written_where(&self, wanted: impl Fn(&WatchedObject, &Value) -> bool) -> Vec<(WatchedObject, Arc<Value>)> {
        self.lock()
            .iter()
            .filter_map(|(key, write)| match write {
                OwnWrite::Written { object, .. } if wanted(key, object) => Some((key.clone(), object.clone())),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(name: &str) -> WatchedObject {
        (
            KindKey {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                label_selector: None,
                field_selector: None,
            },
            Some("ns".into()),
            name.into(),
        )
    }

    fn stored(version: &str) -> Value {
        json!({ "metadata": { "name": "a", "resourceVersion": version }, "data": { "k": version } })
    }

    #[test]
    fn an_answered_write_is_the_object_until_its_echo_which_is_no_news() {
        let writes = OwnWrites::default();
        let a = config_map("a");
        writes.started(a.clone());
        assert!(writes.written(&a).is_none(), "nothing is known before the answer");
        writes.answered(&a, stored("7"), None);
        assert_eq!(writes.written(&a).as_deref(), Some(&stored("7")));
        assert!(
            writes.event(&a, Some("7")),
            "the event carrying our version is the echo"
        );
        assert!(writes.written(&a).is_none(), "after the echo the cache is the truth");
        assert!(!writes.event(&a, Some("8")), "a later change is news");
    }

    #[test]
    fn any_other_event_ends_what_the_write_says() {
        let writes = OwnWrites::default();
        let a = config_map("a");
        writes.started(a.clone());
        writes.answered(&a, stored("7"), None);
        assert!(!writes.event(&a, Some("9")), "someone else's change is news");
        assert!(writes.written(&a).is_none());
        writes.started(a.clone());
        writes.answered(&a, stored("10"), None);
        assert!(!writes.event(&a, None), "a deletion is news");
        assert!(
            writes.written(&a).is_none(),
            "a deleted object is not overlaid by our write"
        );
    }

    #[test]
    fn an_event_while_the_write_is_in_flight_voids_its_answer() {
        // The answer may be older than what the event brought (or the event may be someone else's write that
        // landed after ours): neither the echo test nor the overlay can trust it.
        let writes = OwnWrites::default();
        let a = config_map("a");
        writes.started(a.clone());
        assert!(!writes.event(&a, Some("7")), "unknown yet: treated as news");
        writes.answered(&a, stored("7"), None);
        assert!(writes.written(&a).is_none());
        assert!(!writes.event(&a, Some("7")));
    }

    #[test]
    fn failed_and_untracked_writes_and_relists_leave_the_cache_as_the_truth() {
        let writes = OwnWrites::default();
        let (a, b) = (config_map("a"), config_map("b"));
        writes.started(a.clone());
        writes.forget(&a);
        writes.answered(&a, stored("7"), None);
        assert!(
            writes.written(&a).is_none(),
            "an answer to a forgotten write is not kept"
        );
        writes.started(a.clone());
        writes.answered(&a, stored("8"), Some("7"));
        writes.started(b.clone());
        writes.resynced(&a.0);
        assert!(writes.written(&a).is_none(), "a relist drops what writes said");
        writes.answered(&b, stored("9"), None);
        assert!(
            writes.written(&b).is_none(),
            "a write in flight across a relist is not trusted"
        );
    }

    #[test]
    fn an_answer_that_changed_nothing_is_not_kept() {
        // No watch event follows a write that left the object as it was: an entry would outlive its use.
        let writes = OwnWrites::default();
        let a = config_map("a");
        writes.started(a.clone());
        writes.answered(&a, stored("7"), Some("7"));
        assert!(writes.written(&a).is_none());
        assert!(writes.written_where(|_, _| true).is_empty());
    }

    #[test]
    fn written_where_finds_objects_not_yet_in_the_cache() {
        let writes = OwnWrites::default();
        let (a, b) = (config_map("a"), config_map("b"));
        writes.started(a.clone());
        writes.answered(&a, stored("7"), None);
        writes.started(b.clone());
        let found = writes.written_where(|_, object| object["data"]["k"] == "7");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, a);
    }
}
