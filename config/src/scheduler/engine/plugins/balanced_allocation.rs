//! NodeResourcesBalancedAllocation: favours nodes whose resource fractions stay close to each other.

// NodeResourcesBalancedAllocation: favours nodes whose resource fractions (requests including the pod, over
// allocatable) stay close to each other; v1.35 formula: `(1 − std) · 100` over the fractions capped at 1.

use super::node_resources_fit::{allocatable_and_requested, pod_request_list};
use super::{Cycle, NodeScorer, PreScore, PreScorePlugin};
use crate::scheduler::engine::args::{NodeResourcesBalancedAllocationArgs, ResourceSpec};
use crate::scheduler::engine::snapshot::NodeInfo;

/// The plugin, with defaulted args.
#[derive(Debug)]
pub struct BalancedAllocation {
    resources: Vec<ResourceSpec>,
}

impl BalancedAllocation {
    /// Builds the plugin from defaulted args.
    pub fn new(args: &NodeResourcesBalancedAllocationArgs) -> BalancedAllocation {
        BalancedAllocation {
            resources: args.resources.clone(),
        }
    }
}

struct Score<'a> {
    plugin: &'a BalancedAllocation,
    pod_requests: Vec<i64>,
}

impl PreScorePlugin for BalancedAllocation {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        // Actual requests (no 100m/200Mi defaults); a best-effort pod is not scored at all.
        let pod_requests = pod_request_list(cycle.pod, &self.resources, true);
        if pod_requests.iter().all(|&r| r == 0) {
            return PreScore::Skip;
        }
        PreScore::Run(Box::new(Score {
            plugin: self,
            pod_requests,
        }))
    }
}

impl NodeScorer for Score<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        let mut fractions: Vec<f64> = Vec::with_capacity(self.plugin.resources.len());
        let mut total = 0.0;
        for (resource, &pod_request) in self.plugin.resources.iter().zip(&self.pod_requests) {
            let (allocatable, requested) = allocatable_and_requested(node, &resource.name, pod_request, true);
            if allocatable == 0 {
                continue;
            }
            let fraction = (requested as f64 / allocatable as f64).min(1.0);
            total += fraction;
            fractions.push(fraction);
        }
        let std = match fractions.as_slice() {
            [a, b] => ((a - b) / 2.0).abs(),
            [] | [_] => 0.0,
            many => {
                let mean = total / many.len() as f64;
                let sum: f64 = many.iter().fold(0.0, |sum, f| sum + (f - mean) * (f - mean));
                (sum / many.len() as f64).sqrt()
            }
        };
        ((1.0 - std) * 100.0) as i64
    }
}
