//! NodeUnschedulable: cordoned nodes (`spec.unschedulable`) only take pods tolerating the unschedulable taint.

use k8s_openapi::api::core::v1::Taint;

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::labels::{pod_tolerations, tolerated};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;

/// The reason for cordoned nodes.
pub const REASON: &str = "node(s) were unschedulable";

/// The plugin.
#[derive(Debug)]
pub struct NodeUnschedulable;

struct Check {
    tolerates_unschedulable: bool,
}

impl PreFilterPlugin for NodeUnschedulable {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let taint = Taint {
            key: "node.kubernetes.io/unschedulable".to_string(),
            effect: "NoSchedule".to_string(),
            ..Taint::default()
        };
        // Whether the pod tolerates the unschedulable taint does not depend on the node: decide it once.
        PreFilter::run(Check {
            tolerates_unschedulable: tolerated(pod_tolerations(cycle.pod.pod()), &taint),
        })
    }
}

impl NodeFilter for Check {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        let unschedulable = node.unschedulable();
        (unschedulable && !self.tolerates_unschedulable).then(|| Verdict::unresolvable(REASON))
    }
}
