//! NodeName: a pod naming a node (`spec.nodeName`) fits only that node.

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;

/// The reason for other nodes.
pub const REASON: &str = "node(s) didn't match the requested node name";

/// The plugin.
#[derive(Debug)]
pub struct NodeName;

struct Check<'a> {
    wanted: Option<&'a str>,
}

impl PreFilterPlugin for NodeName {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        PreFilter::run(Check {
            wanted: cycle.pod.node_name(),
        })
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        match self.wanted {
            Some(wanted) if wanted != node.name() => Some(Verdict::unresolvable(REASON)),
            _ => None,
        }
    }
}
