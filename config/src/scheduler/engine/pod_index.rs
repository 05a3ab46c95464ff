//! Placed pods counted per topology domain and kept current as pods and nodes change, so that a cycle's PreFilter
//! does not visit every placed pod.

// InterPodAffinity and PodTopologySpread count, in every cycle, the placed pods matching something per topology
// domain. kube-scheduler visits every pod of every node for it (over 16 goroutines); here the counts are kept by the
// snapshot instead:
//
// - [`ExistingTerms`]: placed pods' own (anti-)affinity terms, grouped by distinct term, with what they weigh per
//   domain of the term's topology key. Kept for every pod, always: a cycle matches each distinct term against the
//   incoming pod once instead of each pod's terms.
// - [`DomainQuery`] counts: the pods matching the incoming pod's terms or spreading selector, per domain. Counted by
//   a full visit the first time a query is asked, then updated as pods and nodes change; the most recently used
//   queries are kept (pods of one workload ask the same one).
//
// Every count equals what a full visit of the snapshot would count at that moment (tested against one after
// random changes); which pods match is the plugins' predicate, shared with them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fnv::FnvHashMap;

use super::labels::{Labels, Selector};
use super::pod_info::{AffinityTerm, PodInfo};

/// How many queries' counts are kept; the least recently used goes first.
const KEPT_QUERIES: usize = 64;

static NO_LABELS: Labels = Labels::new();

/// Whether every term selects the pod (false for no terms), namespace labels taken as empty: the incoming pod's
/// terms have their namespace selectors expanded into namespaces already, as kube-scheduler matches them.
pub(crate) fn matches_all(terms: &[AffinityTerm], pod: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, &NO_LABELS))
}

/// `countPodsMatchSelector`'s predicate: a pod of the namespace, not being deleted, selected (an empty selector
/// selects none).
pub(crate) fn spread_counts(selector: &Selector, namespace: &str, pod: &PodInfo) -> bool {
    !selector.is_empty() && !pod.terminating && pod.namespace == namespace && selector.matches(pod.labels())
}

/// Which placed pods a query counts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PodMatcher {
    /// Pods every term selects ([`matches_all`]): InterPodAffinity's count for the incoming pod's terms.
    AllTerms(Vec<AffinityTerm>),
    /// Pods PodTopologySpread counts for a constraint ([`spread_counts`]).
    Spread {
        /// The incoming pod's namespace.
        namespace: String,
        /// The constraint's selector.
        selector: Selector,
    },
}

impl PodMatcher {
    fn matches(&self, pod: &PodInfo) -> bool {
        match self {
            PodMatcher::AllTerms(terms) => matches_all(terms, pod),
            PodMatcher::Spread { namespace, selector } => spread_counts(selector, namespace, pod),
        }
    }
}

/// Pods counted per value of a node label, over the nodes that have every required label.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DomainQuery {
    /// Which pods count.
    pub matcher: PodMatcher,
    /// The label whose values are the domains.
    pub topology_key: String,
    /// Labels a node needs for its pods to count, and to be a domain at all.
    pub required_keys: Vec<String>,
    /// A node without the topology key is in the domain of the empty value (PodTopologySpread's score with the
    /// system default constraints); otherwise it is in none.
    pub missing_as_empty: bool,
}

impl DomainQuery {
    fn domain<'n>(&self, labels: &'n Labels) -> Option<&'n str> {
        if !self.required_keys.iter().all(|key| labels.contains_key(key)) {
            return None;
        }
        match labels.get(&self.topology_key) {
            Some(value) => Some(value),
            None => self.missing_as_empty.then_some(""),
        }
    }
}

/// A node as the counts see it: its labels and the pods placed on it.
pub(crate) type NodePods<'n> = (&'n Labels, &'n [Arc<PodInfo>]);

/// One domain's matching pods and the nodes in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Domain {
    /// Matching pods on the domain's nodes.
    pub pods: i64,
    /// Nodes with the required labels in the domain (a domain with no pods still counts for spreading).
    pub nodes: i64,
}

/// A query's counts: every domain of a node with the required labels, zero or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DomainCounts {
    /// Per domain value.
    pub domains: FnvHashMap<Box<str>, Domain>,
    /// Matching pods in all domains.
    pub pods: i64,
}

impl DomainCounts {
    /// Matching pods in the domain (0 when it has none or is not one).
    pub fn pods(&self, value: &str) -> i64 {
        self.domains.get(value).map_or(0, |d| d.pods)
    }

    /// Counts a full visit of `nodes` (each node's labels and pods) finds.
    pub fn visit<'n>(query: &DomainQuery, nodes: impl Iterator<Item = NodePods<'n>>) -> DomainCounts {
        let mut counts = DomainCounts::default();
        for node in nodes {
            counts.add_node(query, node, 1);
        }
        counts
    }

    fn add_node(&mut self, query: &DomainQuery, (labels, pods): NodePods<'_>, sign: i64) {
        let Some(value) = query.domain(labels) else {
            return;
        };
        let pods = pods.iter().filter(|p| query.matcher.matches(p)).count() as i64;
        self.change(value, sign * pods, sign);
    }

    /// Adds pods and nodes to a domain (a domain left without nodes goes).
    pub fn change(&mut self, value: &str, pods: i64, nodes: i64) {
        // FNV: the values are node labels and the map is bounded by the nodes.
        let domain = match self.domains.get_mut(value) {
            Some(domain) => domain,
            None => self.domains.entry(value.into()).or_default(),
        };
        domain.pods += pods;
        domain.nodes += nodes;
        self.pods += pods;
        if domain.nodes <= 0 {
            self.domains.remove(value);
        }
    }
}

/// One distinct term of placed pods and what its pods weigh per domain of its topology key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TermGroup {
    /// Weight per domain value (pods × weight); only domains with a non-zero weight.
    pub weights: FnvHashMap<Box<str>, i64>,
    /// Pods' terms in the group, placed on a node with the key or not (the group goes with the last).
    members: usize,
}

/// Placed pods' terms of one kind, grouped by distinct term. SipHash: the terms are written by pod authors and
/// the map grows with them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TermGroups {
    groups: HashMap<AffinityTerm, TermGroup>,
}

impl TermGroups {
    /// Distinct terms and their groups.
    pub fn iter(&self) -> impl Iterator<Item = (&AffinityTerm, &TermGroup)> {
        self.groups.iter()
    }

    fn change(&mut self, term: &AffinityTerm, labels: &Labels, weight: i64, sign: i64) {
        let group = match self.groups.get_mut(term) {
            Some(group) => group,
            None => self.groups.entry(term.clone()).or_default(),
        };
        if sign > 0 {
            group.members += 1;
        } else {
            group.members -= 1;
        }
        if let Some(value) = labels.get(&term.topology_key) {
            let total = match group.weights.get_mut(value.as_str()) {
                Some(total) => total,
                None => group.weights.entry(value.as_str().into()).or_insert(0),
            };
            *total += sign * weight;
            if *total == 0 {
                group.weights.remove(value.as_str());
            }
        }
        if group.members == 0 {
            self.groups.remove(term);
        }
    }
}

/// Placed pods' (anti-)affinity terms by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExistingTerms {
    /// Required affinity (weight 1 per pod).
    pub required_affinity: TermGroups,
    /// Required anti-affinity (weight 1 per pod).
    pub required_anti_affinity: TermGroups,
    /// Preferred affinity (the term's weight).
    pub preferred_affinity: TermGroups,
    /// Preferred anti-affinity (the term's weight).
    pub preferred_anti_affinity: TermGroups,
}

impl ExistingTerms {
    fn change(&mut self, labels: &Labels, pod: &PodInfo, sign: i64) {
        for term in &pod.required_affinity {
            self.required_affinity.change(term, labels, 1, sign);
        }
        for term in &pod.required_anti_affinity {
            self.required_anti_affinity.change(term, labels, 1, sign);
        }
        for weighted in &pod.preferred_affinity {
            let weight = i64::from(weighted.weight);
            self.preferred_affinity.change(&weighted.term, labels, weight, sign);
        }
        for weighted in &pod.preferred_anti_affinity {
            let weight = i64::from(weighted.weight);
            self.preferred_anti_affinity
                .change(&weighted.term, labels, weight, sign);
        }
    }
}

#[derive(Debug, Default)]
struct KeptQueries {
    entries: Vec<KeptQuery>,
    clock: u64,
}

#[derive(Debug)]
struct KeptQuery {
    query: DomainQuery,
    counts: Arc<DomainCounts>,
    used: u64,
}

/// The snapshot's counts: placed pods' terms, and the counts of recently asked queries.
#[derive(Debug, Default)]
pub(crate) struct PodIndex {
    existing: ExistingTerms,
    queries: Mutex<KeptQueries>,
}

impl Clone for PodIndex {
    /// A copy keeps the placed pods' terms and starts without kept queries (a copy is a dry run's, asked little).
    fn clone(&self) -> PodIndex {
        PodIndex {
            existing: self.existing.clone(),
            queries: Mutex::default(),
        }
    }
}

impl PodIndex {
    /// Placed pods' terms.
    pub fn existing(&self) -> &ExistingTerms {
        &self.existing
    }

    /// A pod placed on (`sign` 1) or removed from (-1) a node with these labels.
    pub(crate) fn pod_changed(&mut self, labels: &Labels, pod: &PodInfo, sign: i64) {
        self.existing.change(labels, pod, sign);
        let kept = self.queries.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        for entry in &mut kept.entries {
            if let Some(value) = entry.query.domain(labels)
                && entry.query.matcher.matches(pod)
            {
                Arc::make_mut(&mut entry.counts).change(value, sign, 0);
            }
        }
    }

    /// A node added with its pods (`sign` 1) or removed with them (-1); a node whose labels change is removed with
    /// its old labels and added with its new ones.
    pub(crate) fn node_changed(&mut self, node: NodePods<'_>, sign: i64) {
        let (labels, pods) = node;
        for pod in pods {
            self.existing.change(labels, pod, sign);
        }
        let kept = self.queries.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        for entry in &mut kept.entries {
            if entry.query.domain(labels).is_some() {
                Arc::make_mut(&mut entry.counts).add_node(&entry.query, node, sign);
            }
        }
    }

    /// The query's counts: kept ones, or a full visit of `nodes` (then kept).
    pub fn counts<'n>(&self, query: DomainQuery, nodes: impl Iterator<Item = NodePods<'n>>) -> Arc<DomainCounts> {
        let mut kept = self.queries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.clock += 1;
        let now = kept.clock;
        if let Some(entry) = kept.entries.iter_mut().find(|e| e.query == query) {
            entry.used = now;
            return entry.counts.clone();
        }
        let counts = Arc::new(DomainCounts::visit(&query, nodes));
        if kept.entries.len() >= KEPT_QUERIES
            && let Some(oldest) = (0..kept.entries.len()).min_by_key(|&i| kept.entries[i].used)
        {
            kept.entries.swap_remove(oldest);
        }
        kept.entries.push(KeptQuery {
            query,
            counts: counts.clone(),
            used: now,
        });
        counts
    }
}
