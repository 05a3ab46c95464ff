//! The scheduler's writes recorded, for the worker's unit tests: each one a line of text, in the order made.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::core::Status;
use ruleplane_config::scheduler::gang::GroupKey;
use ruleplane_config::scheduler::pod_group_cycle::GroupCondition;

use super::PodKey;
use super::writer::{NotScheduled, PodWriter, Publish, Write};
use crate::events::Report;

/// What a worker wrote, and the errors the "apiserver" answers with.
#[derive(Default)]
pub(super) struct Recording {
    writes: Mutex<Vec<String>>,
    /// Per pod name, the HTTP code its binding is refused with.
    refused_bindings: Mutex<HashMap<String, u16>>,
}

/// An apiserver error of `code`.
pub(super) fn api_error(code: u16, message: &str) -> kube::Error {
    let mut status = Status::failure(message, "Refused");
    status.code = code;
    kube::Error::Api(status.boxed())
}

impl Recording {
    /// The writes so far, taken (the next call answers only what came after).
    pub(super) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.writes.lock().unwrap())
    }

    /// The binding of the pod `name` is refused with `code` from now on.
    pub(super) fn refuse_binding(&self, name: &str, code: u16) {
        self.refused_bindings.lock().unwrap().insert(name.to_string(), code);
    }

    fn note(&self, write: String) {
        self.writes.lock().unwrap().push(write);
    }

    fn done<'a, T: Send + 'a>(&'a self, write: String, answer: T) -> Write<'a, T> {
        self.note(write);
        Box::pin(async move { Ok(answer) })
    }
}

fn key_of(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

impl PodWriter for Recording {
    fn bind<'a>(&'a self, pod: &'a Pod, node: &'a str) -> Write<'a, ()> {
        self.note(format!("bind {} to {node}", key_of(pod)));
        let refused = self.refused_bindings.lock().unwrap().get(&pod.name_any()).copied();
        Box::pin(async move {
            match refused {
                Some(code) => Err(api_error(code, "binding refused")),
                None => Ok(()),
            }
        })
    }

    fn set_not_scheduled<'a>(&'a self, pod: &'a PodKey, status: &'a NotScheduled) -> Write<'a, ()> {
        let write = format!(
            "status {pod}: PodScheduled=False {}: {}; nomination {:?}",
            status.reason, status.message, status.nominate
        );
        self.done(write, ())
    }

    fn set_nominated_node<'a>(&'a self, pod: &'a PodKey, node: Option<&'a str>) -> Write<'a, ()> {
        self.done(format!("status {pod}: nominatedNodeName {node:?}"), ())
    }

    fn set_disruption_target<'a>(&'a self, victim: &'a Pod, message: &'a str) -> Write<'a, ()> {
        self.done(format!("status {}: DisruptionTarget {message}", key_of(victim)), ())
    }

    fn delete_victim<'a>(&'a self, victim: &'a Pod) -> Write<'a, ()> {
        let uid = victim.metadata.uid.as_deref().unwrap_or_default();
        self.done(format!("delete {} if uid {uid}", key_of(victim)), ())
    }

    fn replace_volume<'a>(&'a self, volume: &'a PersistentVolume) -> Write<'a, PersistentVolume> {
        self.done(format!("update PersistentVolume {}", volume.name_any()), volume.clone())
    }

    fn replace_claim<'a>(&'a self, claim: &'a PersistentVolumeClaim) -> Write<'a, PersistentVolumeClaim> {
        let write = format!(
            "update PersistentVolumeClaim {}/{}",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        );
        self.done(write, claim.clone())
    }

    fn set_pod_group_condition<'a>(&'a self, group: &'a GroupKey, condition: &'a GroupCondition) -> Write<'a, ()> {
        let write = format!("status PodGroup {}/{}: {condition:?}", group.namespace, group.workload);
        self.done(write, ())
    }

    fn publish(&self, report: Report, _: Publish) {
        let regarding = format!(
            "{}/{}",
            report.regarding.namespace.unwrap_or_default(),
            report.regarding.name.unwrap_or_default()
        );
        self.note(format!(
            "event {:?} {} {regarding}: {}",
            report.type_, report.reason, report.note
        ));
    }
}
