//! InterPodAffinity's score: preferred terms and hard affinity, summed per topology domain.

// InterPodAffinity's score: the pod's preferred (anti-)affinity against existing pods, and existing pods' preferred
// terms and required affinity (× hardPodAffinityWeight) against the pod, summed per topology domain.

use std::sync::Arc;

use super::inter_pod_affinity::{all_terms_counts, namespace_labels, with_selected_namespaces};
use super::node_affinity::aggregate;
use super::{Cycle, NodeScorer, PreScore, PreScorePlugin};
use crate::scheduler::engine::args::InterPodAffinityArgs;
use crate::scheduler::engine::pod_index::{DomainCounts, TermGroup};
use crate::scheduler::engine::pod_info::AffinityTerm;
use crate::scheduler::engine::snapshot::NodeInfo;

/// The score plugin.
#[derive(Debug)]
pub struct InterPodAffinityScore {
    hard_weight: i32,
    ignore_preferred_of_existing: bool,
}

impl InterPodAffinityScore {
    /// Builds the plugin from validated args.
    pub fn new(args: &InterPodAffinityArgs) -> InterPodAffinityScore {
        InterPodAffinityScore {
            hard_weight: args.hard_weight(),
            ignore_preferred_of_existing: args.ignore_preferred_terms_of_existing_pods,
        }
    }
}

/// What one term adds to a node's score: its weight times what is counted in the node's domain of its key.
struct Weighted<'a> {
    topology_key: &'a str,
    weight: i64,
    counted: Counted<'a>,
}

enum Counted<'a> {
    /// Placed pods the incoming pod's term selects, per domain.
    Pods(Arc<DomainCounts>),
    /// Weight of placed pods' terms that select the incoming pod, per domain.
    Terms(&'a TermGroup),
}

impl Weighted<'_> {
    fn at(&self, value: &str) -> i64 {
        match &self.counted {
            Counted::Pods(counts) => self.weight * counts.pods(value),
            Counted::Terms(group) => self.weight * group.weights.get(value).copied().unwrap_or(0),
        }
    }

    fn counts_anything(&self) -> bool {
        match &self.counted {
            Counted::Pods(counts) => counts.pods > 0,
            Counted::Terms(group) => !group.weights.is_empty(),
        }
    }
}

struct Score<'a> {
    terms: Vec<Weighted<'a>>,
}

impl PreScorePlugin for InterPodAffinityScore {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        let pod = cycle.pod;
        let affinity = pod.pod().spec.as_ref().and_then(|s| s.affinity.as_ref());
        let has_preferred = affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
            .is_some_and(|t| !t.is_empty());
        let has_preferred_anti = affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
            .is_some_and(|t| !t.is_empty());
        let has_constraints = has_preferred || has_preferred_anti;
        if self.ignore_preferred_of_existing && !has_constraints {
            return PreScore::Skip;
        }
        if !pod.affinity_errors.is_empty() {
            return PreScore::Error(format!("failed to parse pod: {}", aggregate(&pod.affinity_errors)));
        }
        let snapshot = cycle.snapshot;
        let mut terms = Vec::new();
        // The pod's preferred terms against placed pods (only pods it selects add weight).
        for (own, sign) in [(&pod.preferred_affinity, 1), (&pod.preferred_anti_affinity, -1)] {
            let plain: Vec<AffinityTerm> = own.iter().map(|w| w.term.clone()).collect();
            for (term, weighted) in with_selected_namespaces(snapshot, &plain).into_iter().zip(own.iter()) {
                for (_, counts) in all_terms_counts(snapshot, std::slice::from_ref(&term)) {
                    terms.push(Weighted {
                        topology_key: &weighted.term.topology_key,
                        weight: sign * i64::from(weighted.weight),
                        counted: Counted::Pods(counts),
                    });
                }
            }
        }
        // Placed pods' terms against the pod: required affinity × hardPodAffinityWeight, preferred by weight.
        let namespace_labels = namespace_labels(snapshot, &pod.namespace);
        let existing = snapshot.existing_terms();
        let hard_weight = i64::from(self.hard_weight);
        let groups = [
            (&existing.required_affinity, hard_weight),
            (&existing.preferred_affinity, 1),
            (&existing.preferred_anti_affinity, -1),
        ];
        for (groups, weight) in groups.into_iter().filter(|(_, weight)| *weight != 0) {
            for (term, group) in groups.iter() {
                if term.matches(pod, namespace_labels) {
                    terms.push(Weighted {
                        topology_key: &term.topology_key,
                        weight,
                        counted: Counted::Terms(group),
                    });
                }
            }
        }
        if !terms.iter().any(Weighted::counts_anything) {
            return PreScore::Skip;
        }
        PreScore::Run(Box::new(Score { terms }))
    }
}

impl NodeScorer for Score<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        self.terms
            .iter()
            .filter_map(|term| node.labels().get(term.topology_key).map(|value| term.at(value)))
            .sum()
    }

    fn normalize(&self, _nodes: &[&NodeInfo], scores: &mut [i64]) {
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
            return;
        };
        let spread = max - min;
        for score in scores.iter_mut() {
            let scaled = if spread > 0 {
                100.0 * ((*score - min) as f64 / spread as f64)
            } else {
                0.0
            };
            *score = scaled as i64;
        }
    }
}
