//! A keyed, deduplicating work queue with delays: what a worker has still to reconcile, and when.
//!
//! Like client-go's workqueue: a key is queued at most once however often it is added; a key being
//! reconciled is not handed out twice at once, and an add during its reconcile runs it again afterwards;
//! a key can be due later (backoff, requeue), and an earlier add wins over a later one.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;

use tokio::time::{Duration, Instant};

pub struct WorkQueue<K> {
    /// When each waiting key is due.
    due: HashMap<K, Instant>,
    /// The same keys ordered by due time (ties by insertion sequence, so equal times stay first-in first-out).
    order: BTreeSet<(Instant, u64, K)>,
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
            due: HashMap::new(),
            order: BTreeSet::new(),
            sequence: 0,
            active: HashSet::new(),
            again: HashMap::new(),
        }
    }

    /// Queues `key` to run now.
    pub fn add(&mut self, key: K) {
        self.add_at(key, Instant::now());
    }

    /// Queues `key` to run after `delay`, unless it is already due sooner.
    pub fn add_after(&mut self, key: K, delay: Duration) {
        self.add_at(key, Instant::now() + delay);
    }

    fn add_at(&mut self, key: K, at: Instant) {
        if self.active.contains(&key) {
            let entry = self.again.entry(key).or_insert(at);
            *entry = (*entry).min(at);
            return;
        }
        match self.due.get(&key) {
            Some(existing) if *existing <= at => {}
            Some(existing) => {
                let existing = *existing;
                self.order.retain(|(time, _, k)| !(*time == existing && *k == key));
                self.insert(key, at);
            }
            None => self.insert(key, at),
        }
    }

    fn insert(&mut self, key: K, at: Instant) {
        self.sequence += 1;
        self.order.insert((at, self.sequence, key.clone()));
        self.due.insert(key, at);
    }

    /// When the next key is due (`None` when nothing waits).
    pub fn next_due(&self) -> Option<Instant> {
        self.order.first().map(|(at, _, _)| *at)
    }

    /// Hands out the next key that is due now, marking it active.
    pub fn pop_due(&mut self) -> Option<K> {
        let (at, _, _) = self.order.first()?;
        if *at > Instant::now() {
            return None;
        }
        let (_, _, key) = self.order.pop_first()?;
        self.due.remove(&key);
        self.active.insert(key.clone());
        Some(key)
    }

    /// Marks an active key done; an add that came in meanwhile queues it again.
    pub fn done(&mut self, key: &K) {
        self.active.remove(key);
        if let Some(at) = self.again.remove(key) {
            self.add_at(key.clone(), at);
        }
    }

    /// Keys waiting (due now or later), not counting active ones.
    pub fn len(&self) -> usize {
        self.due.len()
    }

    /// True when no key waits.
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
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
}
