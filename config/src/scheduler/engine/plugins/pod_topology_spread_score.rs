//! PodTopologySpread's score: soft (ScheduleAnyway) constraints, including the system defaults.

// PodTopologySpread's score: soft (ScheduleAnyway) constraints, including the system defaults (hostname maxSkew 3, zone
// maxSkew 5); fewer matching pods in the node's domains scores higher.

use std::collections::{HashMap, HashSet};

use super::pod_topology_spread::{
    Constraint, HOSTNAME, PodTopologySpread, count_matching, has_all_topology_labels, includes_every_node, kept_counts,
    topology_keys,
};
use super::{Cycle, NodeScorer, PreScore, PreScorePlugin};
use crate::scheduler::engine::labels::RequiredNodeAffinity;
use crate::scheduler::engine::rng::go_log;
use crate::scheduler::engine::snapshot::NodeInfo;

struct Score<'a> {
    constraints: Vec<Constraint>,
    ignored: HashSet<&'a str>,
    counts: Vec<HashMap<String, i64>>,
    weights: Vec<f64>,
    namespace: &'a str,
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        if cycle.snapshot.num_nodes() == 0 {
            return PreScore::Skip;
        }
        let constraints = match self.constraints(cycle, "ScheduleAnyway") {
            Ok(constraints) => constraints,
            Err(message) => {
                return PreScore::Error(format!(
                    "calculating preScoreState: obtaining pod's soft topology spread constraints: {message}"
                ));
            }
        };
        if constraints.is_empty() {
            return PreScore::Skip;
        }
        let own_constraints = cycle
            .pod
            .pod()
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        // The system defaults also score nodes lacking a topology label (under the empty value).
        let require_all = own_constraints || !self.system_defaulted;
        let mut ignored = HashSet::new();
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
        for node in nodes {
            if require_all && !has_all_topology_labels(node.labels(), &constraints) {
                ignored.insert(node.name());
                continue;
            }
            for (i, constraint) in constraints.iter().enumerate() {
                if constraint.topology_key != HOSTNAME {
                    let value = node.labels().get(&constraint.topology_key).map_or("", String::as_str);
                    if !counts[i].contains_key(value) {
                        counts[i].insert(value.to_string(), 0);
                    }
                }
            }
        }
        let weights = constraints
            .iter()
            .zip(&counts)
            .map(|(c, domains)| {
                let size = if c.topology_key == HOSTNAME {
                    nodes.len() - ignored.len()
                } else {
                    domains.len()
                };
                go_log(size as f64 + 2.0)
            })
            .collect();
        // Matching pods are counted over all nodes, but only in the domains of the feasible nodes.
        let affinity = RequiredNodeAffinity::of(cycle.pod.pod());
        if includes_every_node(&constraints, &affinity) {
            let required_keys = if require_all {
                topology_keys(&constraints)
            } else {
                Vec::new()
            };
            for (i, constraint) in constraints.iter().enumerate() {
                if constraint.topology_key == HOSTNAME {
                    continue;
                }
                let kept = kept_counts(
                    cycle.snapshot,
                    &cycle.pod.namespace,
                    constraint,
                    required_keys.clone(),
                    !require_all,
                );
                for (value, count) in counts[i].iter_mut() {
                    *count = kept.pods(value);
                }
            }
        } else {
            for node in cycle.snapshot.list() {
                if require_all && !has_all_topology_labels(node.labels(), &constraints) {
                    continue;
                }
                for (i, constraint) in constraints.iter().enumerate() {
                    if !constraint.includes(cycle.pod.pod(), node, &affinity) {
                        continue;
                    }
                    let value = node
                        .labels()
                        .get(&constraint.topology_key)
                        .map(String::as_str)
                        .unwrap_or_default();
                    if let Some(count) = counts[i].get_mut(value) {
                        *count += count_matching(node, &constraint.selector, &cycle.pod.namespace);
                    }
                }
            }
        }
        PreScore::Run(Box::new(Score {
            constraints,
            ignored,
            counts,
            weights,
            namespace: &cycle.pod.namespace,
        }))
    }
}

impl NodeScorer for Score<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        if self.ignored.contains(node.name()) {
            return 0;
        }
        let mut score = 0.0;
        for (i, constraint) in self.constraints.iter().enumerate() {
            let Some(value) = node.labels().get(&constraint.topology_key) else {
                continue;
            };
            let count = if constraint.topology_key == HOSTNAME {
                count_matching(node, &constraint.selector, self.namespace)
            } else {
                self.counts[i].get(value).copied().unwrap_or(0)
            };
            score += count as f64 * self.weights[i] + f64::from(constraint.max_skew - 1);
        }
        score.round() as i64
    }

    fn normalize(&self, nodes: &[&NodeInfo], scores: &mut [i64]) {
        let mut min = i64::MAX;
        let mut max = 0;
        for (node, &score) in nodes.iter().zip(scores.iter()) {
            if !self.ignored.contains(node.name()) {
                min = min.min(score);
                max = max.max(score);
            }
        }
        for (node, score) in nodes.iter().zip(scores.iter_mut()) {
            *score = if self.ignored.contains(node.name()) {
                0
            } else if max == 0 {
                100
            } else {
                100 * (max + min - *score) / max
            };
        }
    }
}
