//! The scheduling cache's pod changes: a pod bound, updated or deleted, accounted on the snapshot with the cluster events it makes, and the nominator and the pods waiting for their node kept up to date.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::DynamicObject;
use ruleplane_config::scheduler::engine::queueing_hints::{ActionType, ClusterEvent, pod_update_actions};

use super::{State, node_name, pod_key, typed};
use crate::watch_hub::Change;

pub(super) fn apply_pod(state: &mut State, change: Change) {
    match change {
        Change::Applied(object) => pod_applied(state, &object),
        Change::Deleted(object) => pod_deleted(state, &object),
        Change::Resync => state.stale = true,
    }
}

/// A pod added or updated: accounted where the watch shows it bound, with the cluster events it makes.
fn pod_applied(state: &mut State, object: &DynamicObject) {
    track_nomination(state, object);
    // Most pod events in a busy cluster are of pods not yet bound (status updates of pending pods): they
    // change nothing here, and are recognised without converting the object.
    let Some(node) = object
        .data
        .pointer("/spec/nodeName")
        .and_then(|n| n.as_str())
        .filter(|n| !n.is_empty())
    else {
        return;
    };
    // The binding of a pod a policy assumed: already accounted as it is, unless its labels changed or it
    // is being deleted meanwhile. Confirming it costs no conversion of the object.
    if let Some(uid) = object.metadata.uid.as_deref()
        && state.assumed.get(uid).is_some_and(|assumed| assumed == node)
        && object.metadata.deletion_timestamp.is_none()
        && state
            .snapshot
            .pod(uid)
            .is_some_and(|info| info.labels() == object.metadata.labels.as_ref().unwrap_or(&Default::default()))
    {
        state.assumed.remove(uid);
        // The binding of an assumed pod is, for the queues, an assigned pod added.
        if let Some(info) = state.snapshot.pod(uid).filter(|_| state.listening()) {
            let added = info.to_pod();
            state.emit(ClusterEvent::pod(ActionType::ADD, None, Some(added)));
        }
        return;
    }
    let Some(pod) = typed::<Pod>(object) else { return };
    let key = pod_key(&pod);
    let terminated = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    let placed = state.snapshot.node_of_pod(&key).map(str::to_string);
    let before = state.snapshot.pod(&key).map(|info| info.to_pod());
    let was_assumed = state.assumed.contains_key(&key);
    let events: Vec<ClusterEvent> = match (&before, state.listening()) {
        (_, false) => Vec::new(),
        // A terminated pod leaves the cache as a deleted one does.
        (Some(old), true) if terminated => vec![ClusterEvent::pod(ActionType::DELETE, Some(old.clone()), None)],
        (None, true) if terminated => Vec::new(),
        (Some(old), true) if !was_assumed => {
            let new = Arc::new(pod.clone());
            pod_update_actions(old, &new)
                .into_iter()
                .map(|action| ClusterEvent::pod(action, Some(old.clone()), Some(new.clone())))
                .collect()
        }
        // Newly seen bound, or the binding of an assumed pod (changed meanwhile).
        (_, true) => vec![ClusterEvent::pod(ActionType::ADD, None, Some(Arc::new(pod.clone())))],
    };
    if let Some(node) = node_name(&pod)
        && (terminated || state.snapshot.get(node).is_none())
    {
        wait_for_node(state, node, &pod, !terminated);
    }
    match (node_name(&pod), placed) {
        (Some(_), _) if terminated => remove(state, &key),
        (Some(node), Some(_)) => {
            // Confirmed or updated (labels may change what affinity sees): account the object as it is.
            state.assumed.remove(&key);
            remove(state, &key);
            if state.snapshot.get(node).is_some() && state.snapshot.add_pod(pod).is_err() {
                state.stale = true;
            }
        }
        (Some(node), None) => {
            if state.snapshot.get(node).is_some() && state.snapshot.add_pod(pod).is_err() {
                state.stale = true;
            }
        }
        // Not bound (filtered above; kept for exhaustiveness): an assumed pod stays where it was placed.
        (None, _) => {}
    }
    for event in events {
        state.emit(event);
    }
}

/// A pod deleted: its room freed, its nomination forgotten.
fn pod_deleted(state: &mut State, object: &DynamicObject) {
    let Some(pod) = typed::<Pod>(object) else { return };
    let key = pod_key(&pod);
    if let Some(node) = node_name(&pod) {
        wait_for_node(state, node, &pod, false);
    }
    state.nominations.deleted(&key);
    state.assumed.remove(&key);
    let accounted = state.snapshot.node_of_pod(&key).is_some();
    if accounted {
        remove(state, &key);
    }
    // Only a bound or nominated pod's deletion can help another pod (every hint skips the others).
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if state.listening() && (accounted || node_name(&pod).is_some() || nominated) {
        state.emit(ClusterEvent::pod(ActionType::DELETE, Some(Arc::new(pod)), None));
    }
}

/// Keeps the nominator up to date with a pod from the watch. Only nominated pods are converted.
fn track_nomination(state: &mut State, object: &DynamicObject) {
    let key = nomination_key(object);
    state.nominations.observe(key, object, || typed::<Pod>(object));
}

/// The nominator's key of a pod from the watch ([`pod_key`] without converting the object).
pub(super) fn nomination_key(object: &DynamicObject) -> String {
    match object.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => format!(
            "{}/{}",
            object.metadata.namespace.as_deref().unwrap_or("default"),
            object.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

/// Records (or, with `waiting` false, forgets) a pod bound to a node the snapshot does not have.
fn wait_for_node(state: &mut State, node: &str, pod: &Pod, waiting: bool) {
    let name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.name_any()
    );
    if waiting {
        state.waiting_for_node.entry(node.to_string()).or_default().insert(name);
    } else if let Some(pods) = state.waiting_for_node.get_mut(node) {
        pods.remove(&name);
        if pods.is_empty() {
            state.waiting_for_node.remove(node);
        }
    }
}

fn remove(state: &mut State, key: &str) {
    if state.snapshot.node_of_pod(key).is_some() && state.snapshot.remove_pod(key).is_err() {
        state.stale = true;
    }
}
