//! NodeResourcesBalancedAllocation: favours nodes whose resource fractions stay close to each other.

// NodeResourcesBalancedAllocation: favours nodes whose resource fractions (requests over allocatable, capped at 1)
// stay close to each other. The balance is `(1 − std) · 100`; v1.35 scores the balance with the pod, v1.36 on the
// change the pod makes, `50 + (50 + withPod − withoutPod) / 2` (75 when it changes nothing).

use super::node_resources_fit::{allocatable_and_requested, pod_request_list};
use super::{Cycle, NodeScorer, PreScore, PreScorePlugin};
use crate::scheduler::engine::args::{NodeResourcesBalancedAllocationArgs, ResourceSpec};
use crate::scheduler::engine::behaviour::Behaviour;
use crate::scheduler::engine::snapshot::NodeInfo;

/// The plugin, with defaulted args.
#[derive(Debug)]
pub struct BalancedAllocation {
    resources: Vec<ResourceSpec>,
    /// Whether the score is the change the pod makes to the balance (v1.36).
    scores_the_change: bool,
}

impl BalancedAllocation {
    /// Builds the plugin from defaulted args.
    pub fn new(args: &NodeResourcesBalancedAllocationArgs, behaviour: Behaviour) -> BalancedAllocation {
        BalancedAllocation {
            resources: args.resources.clone(),
            scores_the_change: behaviour.balance_scores_the_change(),
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
        let resources = self.plugin.resources.len();
        let (mut with_pod, mut without_pod, mut allocatable) = (
            Vec::with_capacity(resources),
            Vec::with_capacity(resources),
            Vec::with_capacity(resources),
        );
        for (resource, &pod_request) in self.plugin.resources.iter().zip(&self.pod_requests) {
            let (node_allocatable, requested) = allocatable_and_requested(node, &resource.name, pod_request, true);
            if node_allocatable == 0 {
                continue;
            }
            allocatable.push(node_allocatable);
            with_pod.push(requested);
            without_pod.push(requested.wrapping_sub(pod_request));
        }
        let balance_with_pod = balance(&with_pod, &allocatable);
        if !self.plugin.scores_the_change {
            return balance_with_pod;
        }
        // Go's integer division; the difference is within [-50, 50], so the dividend is never negative.
        50 + (50 + balance_with_pod - balance(&without_pod, &allocatable)) / 2
    }
}

/// `balancedResourceScore`: 100 · (1 − the standard deviation of the fractions requested / allocatable).
fn balance(requested: &[i64], allocatable: &[i64]) -> i64 {
    let fractions: Vec<f64> = requested
        .iter()
        .zip(allocatable)
        .map(|(&r, &a)| (r as f64 / a as f64).min(1.0))
        .collect();
    let total: f64 = fractions.iter().sum();
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
