//! NodePorts: the pod's host ports must be free on the node (same IP, or either side on 0.0.0.0).

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::pod_info::HostPort;
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;

/// The reason for nodes where a port is taken.
pub const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The plugin.
#[derive(Debug)]
pub struct NodePorts;

struct Check<'a> {
    ports: &'a [HostPort],
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        if cycle.pod.host_ports.is_empty() {
            return PreFilter::Skip;
        }
        PreFilter::run(Check {
            ports: &cycle.pod.host_ports,
        })
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        self.ports
            .iter()
            .any(|port| node.port_conflicts(port))
            .then(|| Verdict::unschedulable(REASON))
    }
}
