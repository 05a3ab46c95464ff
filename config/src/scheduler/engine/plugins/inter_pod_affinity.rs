//! InterPodAffinity's filter: required pod affinity and anti-affinity, the pod's and existing pods'.

// InterPodAffinity's filter: the pod's required affinity and anti-affinity, and existing pods' required anti-affinity
// against the pod, counted per topology domain.
//
// Namespace selectors need namespace labels: the snapshot's (see `Snapshot::set_namespaces`); pods needing them while
// the snapshot has none are refused before this plugin runs (`Feature::NamespaceSelector…`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::node_affinity::aggregate;
use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::labels::Labels;
use crate::scheduler::engine::pod_index::{DomainCounts, DomainQuery, PodMatcher, TermGroup, matches_all};
use crate::scheduler::engine::pod_info::AffinityTerm;
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

/// The snapshot's counts of the pods matching all of `terms`, per domain of each term's topology key.
pub(super) fn all_terms_counts(snapshot: &Snapshot, terms: &[AffinityTerm]) -> Vec<(String, Arc<DomainCounts>)> {
    let matcher = PodMatcher::AllTerms(terms.to_vec());
    terms
        .iter()
        .map(|term| {
            let counts = snapshot.domain_counts(DomainQuery {
                matcher: matcher.clone(),
                topology_key: term.topology_key.clone(),
                required_keys: vec![term.topology_key.clone()],
                missing_as_empty: false,
            });
            (term.topology_key.clone(), counts)
        })
        .collect()
}

/// Matching pods in the node's domain of the key.
fn pods_in_domain(node: &NodeInfo, key: &str, counts: &DomainCounts) -> i64 {
    node.labels().get(key).map_or(0, |value| counts.pods(value))
}

struct Check<'a> {
    /// Per required affinity term: its topology key and the pods matching all of them per domain.
    affinity: Vec<(String, Arc<DomainCounts>)>,
    /// Per required anti-affinity term: its key and the pods it selects per domain.
    anti_affinity: Vec<(String, Arc<DomainCounts>)>,
    /// Placed pods' distinct required anti-affinity terms that select the pod: key and pods per domain.
    existing_anti_affinity: Vec<(&'a str, &'a TermGroup)>,
    /// Some placed pod matches all the affinity terms.
    affinity_pods_exist: bool,
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
        let namespace_labels = namespace_labels(snapshot, &pod.namespace);
        let existing_anti_affinity: Vec<(&str, &TermGroup)> = snapshot
            .existing_terms()
            .required_anti_affinity
            .iter()
            .filter(|(term, group)| !group.weights.is_empty() && term.matches(pod, namespace_labels))
            .map(|(term, group)| (term.topology_key.as_str(), group))
            .collect();
        let affinity_terms = with_selected_namespaces(snapshot, &pod.required_affinity);
        let anti_affinity_terms = with_selected_namespaces(snapshot, &pod.required_anti_affinity);
        if existing_anti_affinity.is_empty() && affinity_terms.is_empty() && anti_affinity_terms.is_empty() {
            return PreFilter::Skip;
        }
        let affinity = all_terms_counts(snapshot, &affinity_terms);
        let anti_affinity = anti_affinity_terms
            .iter()
            .flat_map(|term| all_terms_counts(snapshot, std::slice::from_ref(term)))
            .collect();
        PreFilter::run(Check {
            affinity_pods_exist: affinity.iter().any(|(_, counts)| counts.pods > 0),
            pod_matches_own_affinity: matches_all(&affinity_terms, pod),
            affinity,
            anti_affinity,
            existing_anti_affinity,
        })
    }
}

impl Check<'_> {
    fn satisfies_affinity(&self, node: &NodeInfo) -> bool {
        let mut pods_exist = true;
        for (key, counts) in &self.affinity {
            if !node.labels().contains_key(key) {
                return false;
            }
            if pods_in_domain(node, key, counts) <= 0 {
                pods_exist = false;
            }
        }
        // The first pod of a group that selects itself may go anywhere its topology keys exist.
        pods_exist || (!self.affinity_pods_exist && self.pod_matches_own_affinity)
    }

    fn satisfies_anti_affinity(&self, node: &NodeInfo) -> bool {
        !self
            .anti_affinity
            .iter()
            .any(|(key, counts)| pods_in_domain(node, key, counts) > 0)
    }

    fn satisfies_existing_anti_affinity(&self, node: &NodeInfo) -> bool {
        !self.existing_anti_affinity.iter().any(|(key, group)| {
            node.labels()
                .get(*key)
                .is_some_and(|value| group.weights.get(value.as_str()).is_some_and(|n| *n > 0))
        })
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
