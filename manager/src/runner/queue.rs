//! A keyed, deduplicating work queue with delays: what a worker has still to reconcile, and when.
//!
//! Like client-go's workqueue: a key is queued at most once however often it is added; a key being
//! reconciled is not handed out twice at once, and an add during its reconcile runs it again afterwards;
//! a key can be due later (backoff, requeue), and an earlier add wins over a later one.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;

use tokio::time::{Duration, Instant};

/// Where a waiting key is: when it is due, and its insertion sequence.
#[derive(Clone, Copy, Debug)]
struct Slot {
    at: Instant,
    sequence: u64,
}

pub struct WorkQueue<K> {
    /// Every waiting key and its slot.
    waiting: HashMap<K, Slot>,
    /// Waiting keys not due at their last look, by due time (ties by insertion sequence).
    delayed: BTreeSet<(Instant, u64, K)>,
    /// Keys due, by insertion sequence: first in, first out.
    ready: BTreeSet<(u64, K)>,
    sequence: u64,
    /// Keys handed out and not yet done.
    active: HashSet<K>,
    /// Keys added while active: queued again when done, at the earliest time asked for.
    again: HashMap<K, Instant>,
}

impl<K: Clone + Eq + Hash + Ord> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Ord> WorkQueue<K> {
    pub fn new() -> Self {
        WorkQueue {
            waiting: HashMap::new(),
            delayed: BTreeSet::new(),
            ready: BTreeSet::new(),
            sequence: 0,
            active: HashSet::new(),
            again: HashMap::new(),
        }
    }

    /// Queues `key` to run after `delay`, unless it is already due sooner.
    pub fn add_after(&mut self, key: K, delay: Duration) {
        let at = Instant::now() + delay;
        if self.active.contains(&key) {
            let entry = self.again.entry(key).or_insert(at);
            *entry = (*entry).min(at);
            return;
        }
        match self.waiting.get(&key).copied() {
            Some(existing) if existing.at <= at => {}
            Some(existing) => {
                self.unlink(&key, existing);
                self.insert(key, at);
            }
            None => self.insert(key, at),
        }
    }

    fn unlink(&mut self, key: &K, slot: Slot) {
        self.delayed.remove(&(slot.at, slot.sequence, key.clone()));
        self.ready.remove(&(slot.sequence, key.clone()));
    }

    fn insert(&mut self, key: K, at: Instant) {
        self.sequence += 1;
        let sequence = self.sequence;
        if at <= Instant::now() {
            self.ready.insert((sequence, key.clone()));
        } else {
            self.delayed.insert((at, sequence, key.clone()));
        }
        self.waiting.insert(key, Slot { at, sequence });
    }

    /// Moves keys whose time has come from `delayed` to `ready`.
    fn promote(&mut self) {
        let now = Instant::now();
        while let Some((at, _, _)) = self.delayed.first() {
            if *at > now {
                break;
            }
            let Some((_, sequence, key)) = self.delayed.pop_first() else {
                break;
            };
            self.ready.insert((sequence, key));
        }
    }

    /// When the next key is due (`None` when nothing waits).
    pub fn next_due(&self) -> Option<Instant> {
        if !self.ready.is_empty() {
            return Some(Instant::now());
        }
        self.delayed.first().map(|(at, _, _)| *at)
    }

    /// Hands out the next key that is due now (first in, first out), marking it active, with how long it waited
    /// since it was due.
    pub fn pop_due_waited(&mut self) -> Option<(K, Duration)> {
        self.promote();
        let (_, key) = self.ready.pop_first()?;
        let waited = self
            .waiting
            .remove(&key)
            .map_or(Duration::ZERO, |slot| slot.at.elapsed());
        self.active.insert(key.clone());
        Some((key, waited))
    }

    /// Marks an active key done; an add that came in meanwhile queues it again.
    pub fn done(&mut self, key: &K) {
        self.active.remove(key);
        if let Some(at) = self.again.remove(key) {
            let delay = at.saturating_duration_since(Instant::now());
            self.add_after(key.clone(), delay);
        }
    }

    /// Whether an add came in for `key` while it is active (it runs again once done).
    pub fn is_queued_again(&self, key: &K) -> bool {
        self.again.contains_key(key)
    }

    /// Keys waiting (due now or later), not counting active ones.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// The keys waiting, in no order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.waiting.keys()
    }
}

/// Shorthands the queue's tests read better with.
#[cfg(test)]
impl<K: Clone + Eq + Hash + Ord> WorkQueue<K> {
    /// Queues `key` to run now.
    pub fn add(&mut self, key: K) {
        self.add_after(key, Duration::ZERO);
    }

    /// Hands out the next key that is due now, marking it active.
    pub fn pop_due(&mut self) -> Option<K> {
        self.pop_due_waited().map(|(key, _)| key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keys_are_deduplicated_and_handed_out_in_due_order() {
        let mut queue = WorkQueue::new();
        queue.add("b");
        queue.add("a");
        queue.add("b");
        queue.add_after("c", Duration::from_secs(1));
        assert_eq!(queue.len(), 3);
        assert_eq!(queue.pop_due(), Some("b"), "first in, first out");
        assert_eq!(queue.pop_due(), Some("a"));
        assert_eq!(queue.pop_due(), None, "c is not due yet");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(queue.pop_due(), Some("c"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_counts_from_when_a_key_was_due() {
        let mut queue = WorkQueue::new();
        queue.add("now");
        queue.add_after("later", Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(queue.pop_due_waited(), Some(("now", Duration::from_secs(3))));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(
            queue.pop_due_waited(),
            Some(("later", Duration::from_secs(2))),
            "a delayed key waits from its due time, not from its add"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_add_wins_over_a_later_one() {
        let mut queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(60));
        queue.add_after("a", Duration::from_secs(5));
        queue.add_after("a", Duration::from_secs(30));
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.next_due(), Some(Instant::now() + Duration::from_secs(5)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_add_during_a_reconcile_runs_the_key_again_afterwards_not_concurrently() {
        let mut queue = WorkQueue::new();
        queue.add("a");
        assert_eq!(queue.pop_due(), Some("a"));
        queue.add("a");
        assert_eq!(queue.pop_due(), None, "never handed out twice at once");
        queue.done(&"a");
        assert_eq!(queue.pop_due(), Some("a"), "queued again once done");
        queue.done(&"a");
        assert_eq!(queue.pop_due(), None);
        assert_eq!(queue.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn due_keys_are_handed_out_in_the_order_they_were_queued() {
        let mut queue = WorkQueue::new();
        queue.add("a");
        queue.add("b");
        queue.add_after("later", Duration::from_secs(1));
        queue.add("c");
        assert_eq!(queue.pop_due(), Some("a"));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(queue.pop_due(), Some("b"));
        assert_eq!(queue.pop_due(), Some("later"), "queued before c");
        assert_eq!(queue.pop_due(), Some("c"));
        assert_eq!(queue.pop_due(), None);
    }
}
