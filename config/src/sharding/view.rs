//! What one replica knows of the protocol's Leases: fed by a watch and by write answers; a relist replaces it.
//!
//! A watch that fails (a `410 Expired`, the apiserver gone) relists: the list says what exists, never what was
//! deleted meanwhile. A view that only added what a relist listed would keep a Lease deleted during the gap for
//! good — a replica then decided from a member Lease a peer had deleted, PUT it back on a version that no longer
//! existed, and never became a member again. So a relist is swapped in whole at its end, and a read that finds
//! nothing forgets.

use std::collections::BTreeMap;
use std::time::Duration;

use super::handover::{LeaseRecord, Observed};

/// One Lease as last seen: the protocol's reading of it and the object itself, the base of the next write.
#[derive(Debug, Clone)]
struct Entry<T> {
    observed: Observed,
    body: T,
}

/// One listed Lease, held until its relist ends.
#[derive(Debug, Clone)]
struct Listed<T> {
    version: String,
    record: LeaseRecord,
    body: T,
}

/// The Leases one replica knows, by name, with the object of each (`T`: the manager's `Lease`, the
/// simulation's model of one).
#[derive(Debug, Clone)]
pub struct LeaseView<T> {
    entries: BTreeMap<String, Entry<T>>,
    /// A relist in progress: what it listed so far.
    relisting: Option<BTreeMap<String, Listed<T>>>,
}

impl<T> Default for LeaseView<T> {
    fn default() -> Self {
        LeaseView {
            entries: BTreeMap::new(),
            relisting: None,
        }
    }
}

/// Whether `version` is older than `known`. Versions are compared as the numbers etcd makes them; one that is not
/// a number is never called older (it replaces).
fn older(version: &str, known: &str) -> bool {
    matches!((version.parse::<u64>(), known.parse::<u64>()), (Ok(new), Ok(known)) if new < known)
}

impl<T> LeaseView<T> {
    /// Takes in `version` of `name`, from a watch event or a write's answer, at `now`; a version older than the
    /// one known is ignored (a watch event can trail a write's answer).
    pub fn see(&mut self, name: &str, version: &str, record: LeaseRecord, body: T, now: Duration) {
        if self
            .entries
            .get(name)
            .is_some_and(|known| older(version, &known.observed.version))
        {
            return;
        }
        let previous = self.entries.remove(name).map(|entry| entry.observed);
        let observed = Observed::see(previous, version, record, now);
        self.entries.insert(name.to_owned(), Entry { observed, body });
    }

    /// `name` is gone: a delete event, a delete of ours stored, or a read that found nothing.
    pub fn forget(&mut self, name: &str) {
        self.entries.remove(name);
    }

    /// A relist starts: what it lists is gathered, and replaces the view at [`LeaseView::end_relist`].
    pub fn begin_relist(&mut self) {
        self.relisting = Some(BTreeMap::new());
    }

    /// One Lease of the relist in progress (taken in at once if no relist was announced).
    pub fn relisted(&mut self, name: &str, version: &str, record: LeaseRecord, body: T, now: Duration) {
        match self.relisting.as_mut() {
            Some(listed) => {
                listed.insert(
                    name.to_owned(),
                    Listed {
                        version: version.to_owned(),
                        record,
                        body,
                    },
                );
            }
            None => self.see(name, version, record, body, now),
        }
    }

    /// The relist is complete: every Lease it did not list is forgotten, the listed ones taken in (keeping the
    /// first sighting of a version already seen). Returns the names forgotten.
    pub fn end_relist(&mut self, now: Duration) -> Vec<String> {
        let Some(listed) = self.relisting.take() else {
            return Vec::new();
        };
        let gone: Vec<String> = self
            .entries
            .keys()
            .filter(|name| !listed.contains_key(*name))
            .cloned()
            .collect();
        for name in &gone {
            self.entries.remove(name);
        }
        for (name, lease) in listed {
            self.see(&name, &lease.version, lease.record, lease.body, now);
        }
        gone
    }

    pub fn observed(&self, name: &str) -> Option<&Observed> {
        self.entries.get(name).map(|entry| &entry.observed)
    }

    /// The object last seen of `name`: the base of a write.
    pub fn body(&self, name: &str) -> Option<&T> {
        self.entries.get(name).map(|entry| &entry.body)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// Every Lease known, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Observed)> {
        self.entries
            .iter()
            .map(|(name, entry)| (name.as_str(), &entry.observed))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn record(holder: &str) -> LeaseRecord {
        LeaseRecord {
            holder: Some(holder.to_owned()),
            duration: S(15),
            handover_to: None,
        }
    }

    #[test]
    fn a_relist_forgets_what_it_did_not_list_and_keeps_first_sightings_of_unchanged_versions() {
        let mut view = LeaseView::default();
        view.see("member-a", "5", record("a"), (), S(1));
        view.see("member-b", "6", record("b"), (), S(2));
        view.begin_relist();
        view.relisted("member-b", "6", record("b"), (), S(30));
        assert!(view.contains("member-a"), "nothing changes before the relist ends");
        let gone = view.end_relist(S(30));
        assert_eq!(gone, vec!["member-a".to_owned()], "deleted while the watch was down");
        assert!(!view.contains("member-a"));
        assert_eq!(
            view.observed("member-b").map(|o| o.first_seen),
            Some(S(2)),
            "the same version: its expiry still counts from the first sighting"
        );
    }

    #[test]
    fn an_older_version_never_replaces_a_newer_one_and_a_forgotten_lease_is_gone() {
        let mut view = LeaseView::default();
        view.see("unit", "12", record("b"), "twelve", S(1));
        view.see("unit", "9", record("a"), "nine", S(2));
        assert_eq!(view.body("unit"), Some(&"twelve"));
        assert_eq!(
            view.observed("unit").and_then(|o| o.record.holder.as_deref()),
            Some("b")
        );
        view.forget("unit");
        assert!(view.is_empty() && view.body("unit").is_none());
        view.relisted("unit", "14", record("c"), "fourteen", S(3));
        assert_eq!(view.len(), 1, "a listed Lease without a relist announced is taken in");
        assert_eq!(view.end_relist(S(4)), Vec::<String>::new(), "no relist in progress");
    }
}
