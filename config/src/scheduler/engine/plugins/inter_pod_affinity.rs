//! InterPodAffinity's filter: required pod affinity and anti-affinity, the pod's and existing pods'.

// InterPodAffinity's filter: the pod's required affinity and anti-affinity, and existing pods' required anti-affinity
// against the pod, counted per topology domain.
//
// Namespace selectors need namespace labels: the snapshot's (see `Snapshot::set_namespaces`); pods needing them while
// the snapshot has none are refused before this plugin runs (`Feature::NamespaceSelector…`).

use std::collections::BTreeMap;

use fnv::FnvHashMap;

use super::node_affinity::aggregate;
use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::labels::Labels;
use crate::scheduler::engine::pod_info::{AffinityTerm, PodInfo};
use crate::scheduler::engine::snapshot::{NodeInfo, Snapshot};
use crate::scheduler::engine::status::Verdict;

/// The reason for nodes where existing pods' anti-affinity forbids the pod.
pub const REASON_EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
/// The reason for nodes outside the domains the pod's affinity requires.
pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// The reason for nodes in domains the pod's anti-affinity forbids.
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";

/// The filter plugin.
#[derive(Debug)]
pub struct InterPodAffinity;

/// Counts per (topology key, value), borrowing both from the snapshot's node labels: a cycle counts every pod
/// and looks up every node, so neither may allocate. FNV, not SipHash: the keys are node labels (written by
/// whoever may write nodes) and a map lives for one cycle.
pub(super) type TopologyCounts<'a> = FnvHashMap<(&'a str, &'a str), i64>;

/// The count for one (topology key, value).
fn count_of(counts: &TopologyCounts<'_>, key: &str, value: &str) -> i64 {
    counts.get(&(key, value)).copied().unwrap_or(0)
}

static NO_LABELS: Labels = BTreeMap::new();

/// The labels of the pod's namespace (empty when unknown, as kube-scheduler assumes).
pub(super) fn namespace_labels<'a>(snapshot: &'a Snapshot, namespace: &str) -> &'a Labels {
    snapshot
        .namespaces()
        .and_then(|n| n.get(namespace))
        .unwrap_or(&NO_LABELS)
}

/// The pod's terms with the namespaces their selector selects added. Like kube-scheduler, the selector itself
/// is kept (its replacement by "nothing" is lost on a copy there), and later matched against empty labels.
pub(super) fn with_selected_namespaces(snapshot: &Snapshot, terms: &[AffinityTerm]) -> Vec<AffinityTerm> {
    terms
        .iter()
        .map(|term| {
            let mut term = term.clone();
            if !term.namespace_selector.is_empty()
                && let Some(namespaces) = snapshot.namespaces()
            {
                term.namespaces.extend(
                    namespaces
                        .iter()
                        .filter(|(_, labels)| term.namespace_selector.matches(labels))
                        .map(|(name, _)| name.clone()),
                );
            }
            term
        })
        .collect()
}

/// Whether a pod matches every term (false for no terms).
pub(super) fn matches_all(terms: &[AffinityTerm], pod: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, &NO_LABELS))
}

fn count<'a>(counts: &mut TopologyCounts<'a>, node: &'a NodeInfo, key: &str) {
    if let Some((key, value)) = node.labels().get_key_value(key) {
        *counts.entry((key.as_str(), value.as_str())).or_insert(0) += 1;
    }
}

struct Check<'a> {
    affinity: Vec<AffinityTerm>,
    anti_affinity: Vec<AffinityTerm>,
    affinity_counts: TopologyCounts<'a>,
    anti_affinity_counts: TopologyCounts<'a>,
    existing_anti_affinity_counts: TopologyCounts<'a>,
    pod_matches_own_affinity: bool,
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let pod = cycle.pod;
        if !pod.affinity_errors.is_empty() {
            return PreFilter::Reject(Verdict::unresolvable(format!(
                "parsing pod: {}",
                aggregate(&pod.affinity_errors)
            )));
        }
        let snapshot = cycle.snapshot;
        let affinity = with_selected_namespaces(snapshot, &pod.required_affinity);
        let anti_affinity = with_selected_namespaces(snapshot, &pod.required_anti_affinity);
        let namespace_labels = namespace_labels(snapshot, &pod.namespace);
        let mut existing = TopologyCounts::default();
        let mut affinity_counts = TopologyCounts::default();
        let mut anti_affinity_counts = TopologyCounts::default();
        let incoming_terms = !affinity.is_empty() || !anti_affinity.is_empty();
        // Without terms of its own, only nodes with pods having required anti-affinity matter.
        let nodes = snapshot
            .list()
            .filter(|n| incoming_terms || n.has_pods_with_required_anti_affinity());
        for node in nodes {
            for other in node.pods() {
                if other.has_required_anti_affinity {
                    for term in other
                        .required_anti_affinity
                        .iter()
                        .filter(|t| t.matches(pod, namespace_labels))
                    {
                        count(&mut existing, node, &term.topology_key);
                    }
                }
                if !incoming_terms {
                    continue;
                }
                if matches_all(&affinity, other) {
                    for term in &affinity {
                        count(&mut affinity_counts, node, &term.topology_key);
                    }
                }
                for term in anti_affinity.iter().filter(|t| t.matches(other, &NO_LABELS)) {
                    count(&mut anti_affinity_counts, node, &term.topology_key);
                }
            }
        }
        existing.retain(|_, n| *n != 0);
        if existing.is_empty() && !incoming_terms {
            return PreFilter::Skip;
        }
        PreFilter::run(Check {
            pod_matches_own_affinity: matches_all(&affinity, pod),
            affinity,
            anti_affinity,
            affinity_counts,
            anti_affinity_counts,
            existing_anti_affinity_counts: existing,
        })
    }
}

impl Check<'_> {
    fn satisfies_affinity(&self, node: &NodeInfo) -> bool {
        let mut pods_exist = true;
        for term in &self.affinity {
            let Some(value) = node.labels().get(&term.topology_key) else {
                return false;
            };
            if count_of(&self.affinity_counts, &term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // The first pod of a group that selects itself may go anywhere its topology keys exist.
        pods_exist || (self.affinity_counts.is_empty() && self.pod_matches_own_affinity)
    }

    fn satisfies_anti_affinity(&self, node: &NodeInfo) -> bool {
        self.anti_affinity_counts.is_empty()
            || !self.anti_affinity.iter().any(|term| {
                node.labels()
                    .get(&term.topology_key)
                    .is_some_and(|value| count_of(&self.anti_affinity_counts, &term.topology_key, value) > 0)
            })
    }

    fn satisfies_existing_anti_affinity(&self, node: &NodeInfo) -> bool {
        self.existing_anti_affinity_counts.is_empty()
            || !node
                .labels()
                .iter()
                .any(|(key, value)| count_of(&self.existing_anti_affinity_counts, key, value) > 0)
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        if !self.satisfies_affinity(node) {
            return Some(Verdict::unresolvable(REASON_AFFINITY));
        }
        if !self.satisfies_anti_affinity(node) {
            return Some(Verdict::unschedulable(REASON_ANTI_AFFINITY));
        }
        if !self.satisfies_existing_anti_affinity(node) {
            return Some(Verdict::unschedulable(REASON_EXISTING_ANTI_AFFINITY));
        }
        None
    }
}
