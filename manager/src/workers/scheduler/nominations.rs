//! The scheduling cache's nominator: pending pods with a `status.nominatedNodeName` as the watch shows them, and the
//! nominations the policies decided whose status patch the watch has not echoed yet.

// kube-scheduler adds a pod to its nominator as soon as its PostFilter nominates it (before the status patch), so
// the next cycle already keeps the room; Ruleplane's decisions do the same through `made`. A made nomination gives
// way to the watch once the watch shows the pod with that nomination (or without one, for a cleared one), or the
// pod bound or deleted.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use ruleplane_config::scheduler::engine::Nominate;
use ruleplane_config::scheduler::engine::pod_info::PodInfo;

/// A nominated pod parsed once, when the watch or a decision shows it (a pod with an invalid quantity is left
/// out: no decision can count it), so a change of one nomination costs one parse.
fn parsed(pod: Pod) -> Option<Arc<PodInfo>> {
    PodInfo::new(pod).ok().map(Arc::new)
}

/// Nominations for the snapshot, by the engine's pod key.
#[derive(Default)]
pub(super) struct Nominations {
    /// Pending pods with a nomination, of every scheduler (the decision counts only the manager's policies' pods,
    /// as kube-scheduler's nominator holds its own profiles' only).
    observed: HashMap<String, Arc<PodInfo>>,
    /// Nominations decided here and not echoed yet: the pod as nominated, or `None` for a nomination cleared.
    made: HashMap<String, Option<Arc<PodInfo>>>,
    /// Set when the nominations changed since they were last given to the snapshot.
    dirty: bool,
}

impl Nominations {
    /// A pod from the watch: kept when pending with a nomination, dropped otherwise; a made nomination it echoes
    /// (or that its binding ends) is forgotten.
    pub(super) fn observe(&mut self, key: String, object: &DynamicObject, parse: impl FnOnce() -> Option<Pod>) {
        let bound = object
            .data
            .pointer("/spec/nodeName")
            .and_then(|n| n.as_str())
            .is_some_and(|n| !n.is_empty());
        let node = nominated_node(object).filter(|_| !bound);
        if let Some(made) = self.made.get(&key) {
            let made_node = made
                .as_ref()
                .and_then(|p| p.pod().status.as_ref())
                .and_then(|s| s.nominated_node_name.as_deref());
            if bound || made_node == node {
                self.made.remove(&key);
                self.dirty = true;
            }
        }
        match node.and_then(|_| parse()).and_then(parsed) {
            Some(pod) => {
                self.observed.insert(key, pod);
                self.dirty = true;
            }
            None => {
                if self.observed.remove(&key).is_some() {
                    self.dirty = true;
                }
            }
        }
    }

    /// A pod deleted.
    pub(super) fn deleted(&mut self, key: &str) {
        let observed = self.observed.remove(key).is_some();
        let made = self.made.remove(key).is_some();
        self.dirty |= observed || made;
    }

    /// Whether a nomination decided here for the pod `key` waits for its echo.
    pub(super) fn is_made(&self, key: &str) -> bool {
        self.made.contains_key(key)
    }

    /// Every nominated pod from a relist. A made nomination stays until echoed while its pod is still pending
    /// (`pending`: those of the made nominations' pods the relist shows pending): a pod deleted or bound while the
    /// watch was down never echoes it, and its nomination would keep the node's room for good.
    pub(super) fn replace_observed(&mut self, observed: HashMap<String, Pod>, pending: &HashSet<String>) {
        self.made.retain(|key, _| pending.contains(key));
        self.observed = observed
            .into_iter()
            .filter_map(|(key, pod)| Some((key, parsed(pod)?)))
            .collect();
        self.dirty = true;
    }

    /// What a decision did to `pod`'s nomination.
    pub(super) fn record(&mut self, key: String, pod: &Pod, nominate: &Nominate) {
        match nominate {
            Nominate::Leave => {}
            Nominate::Set(node) => {
                let mut pod = pod.clone();
                pod.status.get_or_insert_default().nominated_node_name = Some(node.to_string());
                // Not parseable, it could never count: recorded as no nomination.
                self.made.insert(key, parsed(pod));
                self.dirty = true;
            }
            Nominate::Clear => {
                let nominated = self.made.get(&key).is_some_and(Option::is_some) || self.observed.contains_key(&key);
                if nominated {
                    self.made.insert(key, None);
                    self.dirty = true;
                }
            }
        }
    }

    /// The nominated pods, when they changed since last taken.
    pub(super) fn take_changed(&mut self) -> Option<Vec<Arc<PodInfo>>> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        let observed = self
            .observed
            .iter()
            .filter(|(key, _)| !self.made.contains_key(*key))
            .map(|(_, pod)| pod.clone());
        let made = self.made.values().flatten().cloned();
        Some(observed.chain(made).collect())
    }
}

/// A pod's `status.nominatedNodeName`, read without converting the object.
fn nominated_node(object: &DynamicObject) -> Option<&str> {
    object
        .data
        .pointer("/status/nominatedNodeName")
        .and_then(|n| n.as_str())
        .filter(|n| !n.is_empty())
}

/// Whether a pod from the watch is pending with a nomination, read without converting it.
pub(super) fn nominated_pending(object: &DynamicObject) -> bool {
    let bound = object
        .data
        .pointer("/spec/nodeName")
        .and_then(|n| n.as_str())
        .is_some_and(|n| !n.is_empty());
    nominated_node(object).is_some() && !bound
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(node_name: Option<&str>, nominated: Option<&str>) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"nodeName": node_name, "containers": []},
            "status": {"nominatedNodeName": nominated},
        }))
        .unwrap()
    }

    fn pod(object: &DynamicObject) -> Option<Pod> {
        serde_json::from_value(serde_json::to_value(object).unwrap()).ok()
    }

    /// The nominated nodes given to the snapshot, when they changed.
    fn nodes(nominations: &mut Nominations) -> Option<Vec<String>> {
        nominations.take_changed().map(|pods| {
            pods.iter()
                .filter_map(|p| p.pod().status.as_ref()?.nominated_node_name.clone())
                .collect()
        })
    }

    #[test]
    fn a_made_nomination_counts_until_the_watch_echoes_it() {
        let mut nominations = Nominations::default();
        let pending = object(None, None);
        nominations.record("u1".into(), &pod(&pending).unwrap(), &Nominate::Set("n1".into()));
        assert_eq!(nodes(&mut nominations), Some(vec!["n1".to_string()]));
        // An older version without the nomination does not undo it.
        nominations.observe("u1".into(), &pending, || pod(&pending));
        assert_eq!(nodes(&mut nominations), None, "unchanged");
        // The echo: the watch's copy takes over.
        let echoed = object(None, Some("n1"));
        nominations.observe("u1".into(), &echoed, || pod(&echoed));
        assert_eq!(nodes(&mut nominations), Some(vec!["n1".to_string()]));
        assert!(nominations.made.is_empty());
        // Bound: gone.
        let bound = object(Some("n1"), Some("n1"));
        nominations.observe("u1".into(), &bound, || pod(&bound));
        assert_eq!(nodes(&mut nominations), Some(vec![]));
    }

    #[test]
    fn a_cleared_nomination_stops_counting_before_the_echo() {
        let mut nominations = Nominations::default();
        let nominated = object(None, Some("n1"));
        nominations.observe("u1".into(), &nominated, || pod(&nominated));
        nominations.record("u1".into(), &pod(&nominated).unwrap(), &Nominate::Clear);
        assert_eq!(nodes(&mut nominations), Some(vec![]));
        let cleared = object(None, None);
        nominations.observe("u1".into(), &cleared, || pod(&cleared));
        assert!(nominations.made.is_empty());
        assert!(nominations.observed.is_empty());
    }

    #[test]
    fn a_relist_drops_made_nominations_of_pods_no_longer_pending() {
        let mut nominations = Nominations::default();
        let pending = object(None, None);
        let pod = pod(&pending).unwrap();
        nominations.record("u1".into(), &pod, &Nominate::Set("n1".into()));
        nominations.record("u2".into(), &pod, &Nominate::Set("n2".into()));
        nominations.take_changed();
        // The relist shows `u1` still pending (its echo not in yet); `u2` was deleted while the watch was down.
        nominations.replace_observed(HashMap::new(), &HashSet::from(["u1".to_string()]));
        assert_eq!(nodes(&mut nominations), Some(vec!["n1".to_string()]));
        assert!(nominations.is_made("u1"));
        assert!(!nominations.is_made("u2"), "forgotten with its pod");
    }
}
