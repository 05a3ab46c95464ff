//! Which cached children belong to which parent: an index by parent UID, kept up to date by the child watches'
//! notifications, so a reconcile reads its own children instead of scanning every cached child.

use std::collections::{BTreeSet, HashMap};

/// A cached child: its kind (`apiVersion`, `kind`), namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct ChildRef {
    pub kind: (String, String),
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Default)]
pub(super) struct ChildIndex {
    by_parent: HashMap<String, BTreeSet<ChildRef>>,
    parent_of: HashMap<ChildRef, String>,
}

impl ChildIndex {
    /// Records where a child belongs now: under `parent_uid`, or nowhere (`None`: not this rule's, or released).
    pub fn upsert(&mut self, child: ChildRef, parent_uid: Option<String>) {
        self.remove(&child);
        if let Some(uid) = parent_uid {
            self.by_parent.entry(uid.clone()).or_default().insert(child.clone());
            self.parent_of.insert(child, uid);
        }
    }

    pub fn remove(&mut self, child: &ChildRef) {
        if let Some(uid) = self.parent_of.remove(child)
            && let Some(children) = self.by_parent.get_mut(&uid)
        {
            children.remove(child);
            if children.is_empty() {
                self.by_parent.remove(&uid);
            }
        }
    }

    /// Replaces everything known about one kind with what its cache holds now (after a relist or a lag).
    pub fn rebuild_kind(
        &mut self,
        kind: &(String, String),
        children: impl IntoIterator<Item = (ChildRef, Option<String>)>,
    ) {
        let stale: Vec<ChildRef> = self.parent_of.keys().filter(|c| &c.kind == kind).cloned().collect();
        for child in &stale {
            self.remove(child);
        }
        for (child, uid) in children {
            self.upsert(child, uid);
        }
    }

    pub fn children_of(&self, parent_uid: &str) -> Vec<ChildRef> {
        self.by_parent
            .get(parent_uid)
            .map(|children| children.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(kind: &str, name: &str) -> ChildRef {
        ChildRef {
            kind: ("v1".into(), kind.into()),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    #[test]
    fn children_follow_their_parent_label_through_changes_deletions_and_rebuilds() {
        let mut index = ChildIndex::default();
        index.upsert(child("ConfigMap", "a"), Some("p1".into()));
        index.upsert(child("Service", "a"), Some("p1".into()));
        index.upsert(child("ConfigMap", "b"), Some("p2".into()));
        assert_eq!(
            index.children_of("p1"),
            vec![child("ConfigMap", "a"), child("Service", "a")]
        );
        // Released (label gone) or moved: no longer under the old parent.
        index.upsert(child("Service", "a"), None);
        assert_eq!(index.children_of("p1"), vec![child("ConfigMap", "a")]);
        index.remove(&child("ConfigMap", "a"));
        assert!(index.children_of("p1").is_empty());
        // A rebuild of one kind replaces that kind only.
        index.upsert(child("Service", "s"), Some("p2".into()));
        index.rebuild_kind(
            &("v1".into(), "ConfigMap".into()),
            [(child("ConfigMap", "c"), Some("p2".into()))],
        );
        assert_eq!(
            index.children_of("p2"),
            vec![child("ConfigMap", "c"), child("Service", "s")]
        );
    }
}
