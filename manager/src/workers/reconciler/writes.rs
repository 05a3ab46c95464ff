//! Our own writes, from request to watch echo: which watch events only echo them, and what an object we wrote is
//! until its echo arrives (a reconcile reads its own writes, not a cache one event behind).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::runner::Requeue;
use crate::watch_hub::{KindKey, WatchedObject};

enum OwnWrite<K> {
    /// Sent, not answered yet, by a reconcile of `parent`. Watch events for the object that arrive meanwhile are
    /// held back (`seen`: the resourceVersions they carried; `None` for a deletion or a relist): only the answer
    /// tells whether they were our write's echo, or news for which `parent` is reconciled again.
    InFlight { parent: K, seen: Vec<Option<String>> },
    /// Answered, and no watch event for the object since the request went out: the object is exactly this
    /// until an event says otherwise.
    Written { version: String, object: Arc<Value> },
}

/// A tracked write's answer: the object as the apiserver stored it (and whatever else the writer reports).
pub(super) trait StoredAnswer {
    fn stored(&self) -> &Value;
}

impl StoredAnswer for Value {
    fn stored(&self) -> &Value {
        self
    }
}

/// What a watch event for an object is to this worker.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum EventNews {
    /// Exactly what our answered write left: nothing to reconcile.
    Echo,
    /// Our write to the object is in flight: decided when it is answered.
    HeldBack,
    /// A change this worker did not make, or cannot tell from its own.
    News,
}

/// The writes of one worker. Entries live from request to the next watch event for the object (normally
/// milliseconds); a relist of a kind drops that kind's.
pub(super) struct OwnWrites<K> {
    writes: Mutex<HashMap<WatchedObject, OwnWrite<K>>>,
    /// Where a held-back event turns out to be news: its parent is reconciled again.
    requeue: Requeue<K>,
}

impl<K> OwnWrites<K> {
    pub fn new(requeue: Requeue<K>) -> Self {
        OwnWrites {
            writes: Mutex::default(),
            requeue,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<WatchedObject, OwnWrite<K>>> {
        self.writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `write` (answering with the stored object) as one of ours to `object`, for a reconcile of `parent`;
    /// the object had resourceVersion `before` when the write was decided. Noted from request to answer, forgotten
    /// if it fails or is dropped unanswered.
    pub async fn track<T: StoredAnswer, E>(
        &self,
        parent: K,
        object: WatchedObject,
        before: Option<&str>,
        write: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.started(parent, object.clone());
        let mut unanswered = Unanswered {
            writes: self,
            object: Some(object),
        };
        let written = write.await;
        if let Some(object) = unanswered.object.take() {
            match &written {
                Ok(answer) => self.answered(&object, answer.stored(), before),
                Err(_) => self.forget(&object),
            }
        }
        written
    }

    /// A write to `object` for a reconcile of `parent` is about to be sent.
    fn started(&self, parent: K, object: WatchedObject) {
        let in_flight = OwnWrite::InFlight {
            parent,
            seen: Vec::new(),
        };
        self.lock().insert(object, in_flight);
    }

    /// The apiserver answered the write with the stored object; `before` is the resourceVersion the object had
    /// when the write was decided. An answer with that same version changed nothing, so no echo will come: it is
    /// not kept (the cache already holds exactly that object). Events held back meanwhile that carried exactly
    /// the answered version were its echo, already in the cache; any other is news for the parent.
    fn answered(&self, object: &WatchedObject, answer: &Value, before: Option<&str>) {
        let mut writes = self.lock();
        let version = answer
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|version| Some(*version) != before)
            .map(str::to_owned);
        let Some(OwnWrite::InFlight { parent, seen }) = writes.remove(object) else {
            return;
        };
        match version {
            Some(version) if seen.is_empty() => {
                // Copied only when kept: most answers are echoed before a reconcile reads them.
                let object_written = OwnWrite::Written {
                    version,
                    object: Arc::new(answer.clone()),
                };
                writes.insert(object.clone(), object_written);
            }
            Some(version) if seen.iter().all(|seen| seen.as_deref() == Some(version.as_str())) => {}
            _ if seen.is_empty() => {}
            _ => self.requeue.key(parent),
        }
    }

    /// The write failed, or a write this worker does not track is about to change the object: the cache is
    /// the only truth for it (and events held back for the write are news).
    pub fn forget(&self, object: &WatchedObject) {
        if let Some(OwnWrite::InFlight { parent, seen }) = self.lock().remove(object)
            && !seen.is_empty()
        {
            self.requeue.key(parent);
        }
    }

    /// A watch event for `object` (`version`: the resourceVersion it carries; `None` for a deletion).
    pub fn event(&self, object: &WatchedObject, version: Option<&str>) -> EventNews {
        let mut writes = self.lock();
        match writes.get_mut(object) {
            Some(OwnWrite::InFlight { seen, .. }) => {
                seen.push(version.map(str::to_owned));
                EventNews::HeldBack
            }
            Some(OwnWrite::Written { version: written, .. }) => {
                let echo = version == Some(written.as_str());
                writes.remove(object);
                if echo { EventNews::Echo } else { EventNews::News }
            }
            None => EventNews::News,
        }
    }

    /// The watch of `kind` listed again: its cache is the truth for every object of the kind (the relist
    /// queues every parent; a write in flight is not trusted when answered).
    pub fn resynced(&self, kind: &KindKey) {
        self.lock().retain(|written, write| match write {
            _ if written.watch != *kind => true,
            OwnWrite::InFlight { seen, .. } => {
                seen.push(None);
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

/// A tracked write not answered yet: if its reconcile is dropped before the answer (the worker stops), the
/// write is forgotten, so no event stays held back for it.
struct Unanswered<'a, K> {
    writes: &'a OwnWrites<K>,
    object: Option<WatchedObject>,
}

impl<K> Drop for Unanswered<'_, K> {
    fn drop(&mut self) {
        if let Some(object) = self.object.take() {
            self.writes.forget(&object);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Requeued;
    use serde_json::json;

    fn config_map(name: &str) -> WatchedObject {
        WatchedObject {
            watch: KindKey::of(&kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(
                &(),
            )),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn stored(version: &str) -> Value {
        json!({ "metadata": { "name": "a", "resourceVersion": version }, "data": { "k": version } })
    }

    fn own_writes() -> (OwnWrites<&'static str>, Requeued<&'static str>) {
        let (requeue, requeued) = Requeue::channel();
        (OwnWrites::new(requeue), requeued)
    }

    #[test]
    fn an_answered_write_is_the_object_until_its_echo_which_is_no_news() {
        let (writes, mut requeued) = own_writes();
        let a = config_map("a");
        writes.started("parent", a.clone());
        assert!(writes.written(&a).is_none(), "nothing is known before the answer");
        writes.answered(&a, &stored("7"), None);
        assert_eq!(writes.written(&a).as_deref(), Some(&stored("7")));
        assert_eq!(
            writes.event(&a, Some("7")),
            EventNews::Echo,
            "the event carrying our version"
        );
        assert!(writes.written(&a).is_none(), "after the echo the cache is the truth");
        assert_eq!(writes.event(&a, Some("8")), EventNews::News, "a later change");
        assert_eq!(requeued.try_next(), None);
    }

    #[test]
    fn any_other_event_ends_what_the_write_says() {
        let (writes, _requeued) = own_writes();
        let a = config_map("a");
        writes.started("parent", a.clone());
        writes.answered(&a, &stored("7"), None);
        assert_eq!(writes.event(&a, Some("9")), EventNews::News, "someone else's change");
        assert!(writes.written(&a).is_none());
        writes.started("parent", a.clone());
        writes.answered(&a, &stored("10"), None);
        assert_eq!(writes.event(&a, None), EventNews::News, "a deletion");
        assert!(
            writes.written(&a).is_none(),
            "a deleted object is not overlaid by our write"
        );
    }

    #[test]
    fn an_echo_that_beats_the_answer_is_held_back_and_then_no_news() {
        let (writes, mut requeued) = own_writes();
        let a = config_map("a");
        writes.started("parent", a.clone());
        assert_eq!(writes.event(&a, Some("7")), EventNews::HeldBack);
        writes.answered(&a, &stored("7"), Some("6"));
        assert_eq!(requeued.try_next(), None, "it was our echo: no reconcile");
        assert!(
            writes.written(&a).is_none(),
            "the cache already holds what the echo brought"
        );
        assert_eq!(writes.event(&a, Some("8")), EventNews::News);
    }

    #[test]
    fn an_event_held_back_that_was_not_our_echo_requeues_the_parent() {
        // Someone else's write landed while ours was in flight (before or after it): the answer may be older
        // than the cache, and the parent must see the change.
        let (writes, mut requeued) = own_writes();
        let a = config_map("a");
        writes.started("parent", a.clone());
        assert_eq!(writes.event(&a, Some("7")), EventNews::HeldBack);
        assert_eq!(writes.event(&a, Some("8")), EventNews::HeldBack);
        writes.answered(&a, &stored("7"), None);
        assert_eq!(requeued.try_next(), Some("parent"));
        assert!(writes.written(&a).is_none(), "the answer is not trusted");
        // A write that changed nothing has no echo: whatever arrived meanwhile is news.
        writes.started("other", a.clone());
        assert_eq!(writes.event(&a, Some("9")), EventNews::HeldBack);
        writes.answered(&a, &stored("8"), Some("8"));
        assert_eq!(requeued.try_next(), Some("other"));
    }

    #[test]
    fn failed_and_untracked_writes_and_relists_leave_the_cache_as_the_truth() {
        let (writes, mut requeued) = own_writes();
        let (a, b) = (config_map("a"), config_map("b"));
        writes.started("parent", a.clone());
        writes.forget(&a);
        writes.answered(&a, &stored("7"), None);
        assert!(
            writes.written(&a).is_none(),
            "an answer to a forgotten write is not kept"
        );
        assert_eq!(requeued.try_next(), None, "nothing was held back for it");
        writes.started("parent", a.clone());
        assert_eq!(writes.event(&a, Some("7")), EventNews::HeldBack);
        writes.forget(&a);
        assert_eq!(
            requeued.try_next(),
            Some("parent"),
            "a failed write releases what it held back"
        );
        writes.started("parent", a.clone());
        writes.answered(&a, &stored("8"), Some("7"));
        writes.started("parent", b.clone());
        writes.resynced(&a.watch);
        assert!(writes.written(&a).is_none(), "a relist drops what writes said");
        writes.answered(&b, &stored("9"), None);
        assert!(
            writes.written(&b).is_none(),
            "a write in flight across a relist is not trusted"
        );
    }

    #[test]
    fn an_answer_that_changed_nothing_is_not_kept() {
        // No watch event follows a write that left the object as it was: an entry would outlive its use.
        let (writes, mut requeued) = own_writes();
        let a = config_map("a");
        writes.started("parent", a.clone());
        writes.answered(&a, &stored("7"), Some("7"));
        assert!(writes.written(&a).is_none());
        assert!(writes.written_where(|_, _| true).is_empty());
        assert_eq!(requeued.try_next(), None);
    }

    #[test]
    fn written_where_finds_objects_not_yet_in_the_cache() {
        let (writes, _requeued) = own_writes();
        let (a, b) = (config_map("a"), config_map("b"));
        writes.started("parent", a.clone());
        writes.answered(&a, &stored("7"), None);
        writes.started("parent", b.clone());
        let found = writes.written_where(|_, object| object["data"]["k"] == "7");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, a);
    }

    #[tokio::test]
    async fn a_write_dropped_unanswered_holds_nothing_back() {
        let (writes, mut requeued) = own_writes();
        let a = config_map("a");
        let never = std::future::pending::<Result<Value, ()>>();
        let tracked = writes.track("parent", a.clone(), None, never);
        assert!(
            futures::FutureExt::now_or_never(Box::pin(tracked)).is_none(),
            "sent, then dropped"
        );
        assert_eq!(writes.event(&a, Some("7")), EventNews::News);
        assert_eq!(requeued.try_next(), None);
    }

    #[tokio::test]
    async fn track_keeps_an_answer_and_forgets_a_failure() {
        let (writes, _requeued) = own_writes();
        let (a, b) = (config_map("a"), config_map("b"));
        let answer = writes.track("parent", a.clone(), None, async { Ok::<_, ()>(stored("7")) });
        assert_eq!(answer.await, Ok(stored("7")));
        assert_eq!(writes.written(&a).as_deref(), Some(&stored("7")));
        let failed = writes.track("parent", b.clone(), None, async { Err::<Value, _>(()) });
        assert_eq!(failed.await, Err(()));
        assert_eq!(writes.event(&b, Some("8")), EventNews::News);
    }
}
