//! NodeResourcesFit: requests must fit free allocatable resources; scores nodes by allocation.

// NodeResourcesFit: requests must fit the node's free allocatable resources and pod slots; scores nodes by allocation
// (LeastAllocated, MostAllocated or a RequestedToCapacityRatio shape).

use std::collections::BTreeSet;

use super::{Cycle, NodeFilter, NodeScorer, PreFilter, PreFilterPlugin, PreScore, PreScorePlugin};
use crate::scheduler::engine::args::{NodeResourcesFitArgs, ResourceSpec, ScoringStrategyType};
use crate::scheduler::engine::pod_info::PodInfo;
use crate::scheduler::engine::resources::{
    RequestOptions, Resource, is_extended_resource_name, is_scalar_resource_name, scoring_defaults,
};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::{Code, Reason, Verdict};

/// The plugin (filter and score), with defaulted and validated args.
#[derive(Debug)]
pub struct Fit {
    ignored_resources: BTreeSet<String>,
    ignored_groups: BTreeSet<String>,
    strategy: ScoringStrategyType,
    resources: Vec<ResourceSpec>,
    /// (utilisation, score × 10) points of a RequestedToCapacityRatio shape.
    shape: Vec<(i64, i64)>,
}

impl Fit {
    /// Builds the plugin from defaulted args.
    pub fn new(args: &NodeResourcesFitArgs) -> Fit {
        let strategy = args.scoring_strategy.as_ref();
        Fit {
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_groups: args.ignored_resource_groups.iter().cloned().collect(),
            strategy: args.strategy(),
            resources: strategy.map(|s| s.resources.clone()).unwrap_or_default(),
            shape: strategy
                .and_then(|s| s.requested_to_capacity_ratio.as_ref())
                .map(|r| {
                    r.shape
                        .iter()
                        .map(|p| (i64::from(p.utilization), i64::from(p.score) * 10))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

struct Check<'a> {
    plugin: &'a Fit,
    request: Resource,
}

impl PreFilterPlugin for Fit {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        // The pod's own requests, without status resources: a pending pod has not been resized.
        let requests = cycle.pod.parsed_resources.requests(RequestOptions::default());
        PreFilter::run(Check {
            plugin: self,
            request: Resource::max_with_zero(&requests),
        })
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        let mut reasons: Vec<Reason> = Vec::new();
        let mut unresolvable = false;
        let (allocatable, requested) = (&node.allocatable, &node.requested);
        if node.pods().len() as i64 + 1 > allocatable.allowed_pod_number {
            reasons.push(Reason::Borrowed("Too many pods"));
        }
        let request = &self.request;
        let empty = request.milli_cpu == 0
            && request.memory == 0
            && request.ephemeral_storage == 0
            && request.scalar.is_empty();
        if !empty {
            let mut check = |wanted: i64, capacity: i64, used: i64, reason: Reason| {
                if wanted > 0 && wanted > capacity - used {
                    unresolvable |= wanted > capacity;
                    reasons.push(reason);
                }
            };
            check(
                request.milli_cpu,
                allocatable.milli_cpu,
                requested.milli_cpu,
                Reason::Borrowed("Insufficient cpu"),
            );
            check(
                request.memory,
                allocatable.memory,
                requested.memory,
                Reason::Borrowed("Insufficient memory"),
            );
            check(
                request.ephemeral_storage,
                allocatable.ephemeral_storage,
                requested.ephemeral_storage,
                Reason::Borrowed("Insufficient ephemeral-storage"),
            );
            // kube-scheduler walks a Go map here, so the order of several insufficient scalar resources varies
            // between runs; they are reported in name order.
            for (name, &wanted) in &request.scalar {
                if wanted == 0 || self.plugin.ignores(name) {
                    continue;
                }
                check(
                    wanted,
                    allocatable.scalar(name),
                    requested.scalar(name),
                    Reason::Owned(format!("Insufficient {name}")),
                );
            }
        }
        if reasons.is_empty() {
            return None;
        }
        let code = if unresolvable {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        Some(Verdict { code, reasons })
    }
}

impl Fit {
    fn ignores(&self, name: &str) -> bool {
        if !is_extended_resource_name(name) {
            return false;
        }
        let group = name.split('/').next().unwrap_or_default();
        self.ignored_resources.contains(name)
            || (!self.ignored_groups.is_empty() && self.ignored_groups.contains(group))
    }
}

/// The pod's request of each scored resource (`calculatePodResourceRequestList`): with the 100m/200Mi defaults
/// for containers without requests unless `use_requested` (BalancedAllocation scores actual requests).
pub(crate) fn pod_request_list(pod: &PodInfo, resources: &[ResourceSpec], use_requested: bool) -> Vec<i64> {
    let defaults = scoring_defaults();
    let requests = pod.parsed_resources.requests(RequestOptions {
        use_status: true,
        non_missing: (!use_requested).then_some(&defaults),
    });
    resources
        .iter()
        .map(|resource| {
            let amount = requests.get(&resource.name).copied().unwrap_or_default();
            if resource.name == "cpu" {
                amount.milli_value()
            } else {
                amount.value()
            }
        })
        .collect()
}

/// (allocatable, requested including the pod) of one resource on a node (`calculateResourceAllocatableRequest`);
/// (0, 0) leaves the resource out of the score.
pub(crate) fn allocatable_and_requested(
    node: &NodeInfo,
    name: &str,
    pod_request: i64,
    use_requested: bool,
) -> (i64, i64) {
    if pod_request == 0 && is_scalar_resource_name(name) {
        return (0, 0);
    }
    let (non_zero_cpu, non_zero_memory) = if use_requested {
        (node.requested.milli_cpu, node.requested.memory)
    } else {
        node.non_zero_requested
    };
    match name {
        "cpu" => (node.allocatable.milli_cpu, non_zero_cpu.wrapping_add(pod_request)),
        "memory" => (node.allocatable.memory, non_zero_memory.wrapping_add(pod_request)),
        "ephemeral-storage" => (
            node.allocatable.ephemeral_storage,
            node.requested.ephemeral_storage.wrapping_add(pod_request),
        ),
        other => match node.allocatable.scalar.get(other) {
            Some(&allocatable) => (allocatable, node.requested.scalar(other).wrapping_add(pod_request)),
            None => (0, 0),
        },
    }
}

struct Score<'a> {
    plugin: &'a Fit,
    pod_requests: Vec<i64>,
}

impl PreScorePlugin for Fit {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        PreScore::Run(Box::new(Score {
            plugin: self,
            pod_requests: pod_request_list(cycle.pod, &self.resources, false),
        }))
    }
}

impl NodeScorer for Score<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        let plugin = self.plugin;
        let mut weighted_sum: i64 = 0;
        let mut weight_sum: i64 = 0;
        let ratio = plugin.strategy == ScoringStrategyType::RequestedToCapacityRatio;
        for (resource, &pod_request) in plugin.resources.iter().zip(&self.pod_requests) {
            let (allocatable, requested) = allocatable_and_requested(node, &resource.name, pod_request, false);
            if allocatable == 0 {
                continue;
            }
            let score = match plugin.strategy {
                ScoringStrategyType::LeastAllocated => least_requested(requested, allocatable),
                ScoringStrategyType::MostAllocated => most_requested(requested, allocatable),
                ScoringStrategyType::RequestedToCapacityRatio => {
                    let utilization = if requested > allocatable {
                        100
                    } else {
                        requested.wrapping_mul(100) / allocatable
                    };
                    broken_linear(&plugin.shape, utilization)
                }
            };
            // RequestedToCapacityRatio leaves resources scoring 0 out of the average.
            if ratio && score <= 0 {
                continue;
            }
            weighted_sum = weighted_sum.wrapping_add(score.wrapping_mul(resource.weight));
            weight_sum += resource.weight;
        }
        if weight_sum == 0 {
            0
        } else if ratio {
            (weighted_sum as f64 / weight_sum as f64).round() as i64
        } else {
            weighted_sum / weight_sum
        }
    }
}

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if requested > capacity {
        0
    } else {
        (capacity - requested).wrapping_mul(100) / capacity
    }
}

fn most_requested(requested: i64, capacity: i64) -> i64 {
    requested.min(capacity).wrapping_mul(100) / capacity
}

/// `helper.BuildBrokenLinearFunction` with integer arithmetic.
pub(crate) fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(utilization, score)) in shape.iter().enumerate() {
        if p <= utilization {
            if i == 0 {
                return score;
            }
            let (previous_utilization, previous_score) = shape[i - 1];
            return previous_score
                + (score - previous_score) * (p - previous_utilization) / (utilization - previous_utilization);
        }
    }
    shape.last().map_or(0, |&(_, score)| score)
}
