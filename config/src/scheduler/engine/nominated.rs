//! kube-scheduler's nominator as one decision reads it: the pending pods nominated to a node whose nominations count.

// kube-scheduler's nominator holds the pods of its own profiles (pods enter it through its scheduling queue) with a
// `status.nominatedNodeName`, or nominated by its own PostFilter and not yet echoed by the watch. A pod with
// scheduling gates never enters it (it waits gated, outside the active queue, `scheduling_queue.go` moveToActiveQ).
// A pod leaves it when it is assumed (its room is then counted on the node itself), so a nominated pod the snapshot
// already places is not counted twice here.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::pod_info::{PodInfo, priority};
use super::snapshot::{NodeInfo, Snapshot};

/// The nominations a decision counts.
#[derive(Clone, Copy)]
pub(crate) struct Nominator<'a> {
    snapshot: &'a Snapshot,
    /// Only pods with one of these `spec.schedulerName`s count; `None`: every nominated pod of the snapshot.
    schedulers: Option<&'a BTreeSet<String>>,
}

impl<'a> Nominator<'a> {
    pub(crate) fn new(snapshot: &'a Snapshot, schedulers: Option<&'a BTreeSet<String>>) -> Nominator<'a> {
        Nominator { snapshot, schedulers }
    }

    /// The cluster the nominations are read from.
    pub(crate) fn snapshot(&self) -> &'a Snapshot {
        self.snapshot
    }

    /// The pending pods nominated to `node` that count.
    pub(crate) fn on_node(&self, node: &str) -> impl Iterator<Item = &'a Arc<PodInfo>> + use<'a> {
        let (snapshot, schedulers) = (self.snapshot, self.schedulers);
        snapshot.nominated_pods(node).iter().filter(move |nominated| {
            schedulers.is_none_or(|own| own.contains(scheduler_name(nominated)))
                && snapshot.node_of_pod(&nominated.key).is_none()
                && !gated(nominated)
        })
    }

    /// The pods `pod` must leave room for on `node` (`addGENominatedPods`): nominated there, of priority at least
    /// the pod's, other than the pod itself.
    pub(crate) fn yielded_to(&self, node: &str, pod: &PodInfo) -> Vec<Arc<PodInfo>> {
        if !self.snapshot.has_nominated_pods() {
            return Vec::new();
        }
        let own = priority(pod.pod());
        self.on_node(node)
            .filter(|nominated| nominated.key != pod.key && nominated.priority >= own)
            .cloned()
            .collect()
    }
}

/// A copy of `node` holding `pods` too (the first of kube-scheduler's two Filter passes).
pub(crate) fn with_pods(node: &NodeInfo, pods: Vec<Arc<PodInfo>>) -> NodeInfo {
    let mut copy = node.clone();
    for pod in pods {
        copy.add_pod(pod);
    }
    copy
}

fn gated(pod: &PodInfo) -> bool {
    pod.pod()
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|gates| !gates.is_empty())
}

/// `spec.schedulerName`, `default-scheduler` when unset (the apiserver's default).
pub(crate) fn scheduler_name(pod: &PodInfo) -> &str {
    pod.pod()
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler")
}
