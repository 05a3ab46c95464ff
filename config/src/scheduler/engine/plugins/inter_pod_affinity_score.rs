//! InterPodAffinity's score: preferred terms and hard affinity, summed per topology domain.

// InterPodAffinity's score: the pod's preferred (anti-)affinity against existing pods, and existing pods' preferred
// terms and required affinity (× hardPodAffinityWeight) against the pod, summed per topology domain.

use fnv::FnvHashMap;

use super::inter_pod_affinity::{namespace_labels, with_selected_namespaces};
use super::node_affinity::aggregate;
use super::{Cycle, NodeScorer, PreScore, PreScorePlugin};
use crate::scheduler::engine::args::InterPodAffinityArgs;
use crate::scheduler::engine::labels::Labels;
use crate::scheduler::engine::pod_info::{AffinityTerm, WeightedAffinityTerm};
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

/// Score per topology key, per value, borrowed from the snapshot's node labels (as InterPodAffinity's counts:
/// no allocation per counted pod).
type TopologyScores<'a> = FnvHashMap<&'a str, FnvHashMap<&'a str, i64>>;

fn add<'a>(scores: &mut TopologyScores<'a>, term: &AffinityTerm, weight: i64, node: &'a NodeInfo) {
    if let Some((key, value)) = node.labels().get_key_value(&term.topology_key) {
        *scores
            .entry(key.as_str())
            .or_default()
            .entry(value.as_str())
            .or_insert(0) += weight;
    }
}

struct Score<'a> {
    scores: TopologyScores<'a>,
}

impl PreScorePlugin for InterPodAffinityScore {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        let pod = cycle.pod;
        let affinity = pod.pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
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
        let weighted = |terms: &[WeightedAffinityTerm]| -> Vec<(AffinityTerm, i64)> {
            let plain: Vec<AffinityTerm> = terms.iter().map(|w| w.term.clone()).collect();
            with_selected_namespaces(snapshot, &plain)
                .into_iter()
                .zip(terms)
                .map(|(term, w)| (term, i64::from(w.weight)))
                .collect()
        };
        let preferred = weighted(&pod.preferred_affinity);
        let preferred_anti = weighted(&pod.preferred_anti_affinity);
        let namespace_labels = namespace_labels(snapshot, &pod.namespace);
        let no_labels = Labels::new();
        let mut scores = TopologyScores::default();
        for node in snapshot
            .list()
            .filter(|n| has_constraints || n.has_pods_with_affinity())
        {
            // Without preferred terms of its own, only existing pods with pod (anti-)affinity can matter.
            for existing in node.pods().iter().filter(|p| has_constraints || p.has_pod_affinity) {
                if node.labels().is_empty() {
                    continue;
                }
                for (term, weight) in &preferred {
                    if term.matches(existing, &no_labels) {
                        add(&mut scores, term, *weight, node);
                    }
                }
                for (term, weight) in &preferred_anti {
                    if term.matches(existing, &no_labels) {
                        add(&mut scores, term, -weight, node);
                    }
                }
                if self.hard_weight > 0 {
                    for term in existing
                        .required_affinity
                        .iter()
                        .filter(|t| t.matches(pod, namespace_labels))
                    {
                        add(&mut scores, term, i64::from(self.hard_weight), node);
                    }
                }
                for w in existing
                    .preferred_affinity
                    .iter()
                    .filter(|w| w.term.matches(pod, namespace_labels))
                {
                    add(&mut scores, &w.term, i64::from(w.weight), node);
                }
                for w in existing
                    .preferred_anti_affinity
                    .iter()
                    .filter(|w| w.term.matches(pod, namespace_labels))
                {
                    add(&mut scores, &w.term, -i64::from(w.weight), node);
                }
            }
        }
        if scores.is_empty() {
            return PreScore::Skip;
        }
        PreScore::Run(Box::new(Score { scores }))
    }
}

impl NodeScorer for Score<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        self.scores
            .iter()
            .filter_map(|(key, values)| {
                node.labels()
                    .get(*key)
                    .map(|value| values.get(value.as_str()).copied().unwrap_or(0))
            })
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
