//! PodTopologySpread: the constraints a pod gets and the hard (DoNotSchedule) filter.

// PodTopologySpread: constraints (the pod's own, or the profile's defaults with a selector derived from the pod's
// services and controller) and the hard (DoNotSchedule) filter.
//
// Feature gates (v1.35 defaults): NodeInclusionPolicyInPodTopologySpread on (`nodeAffinityPolicy` default Honor,
// `nodeTaintsPolicy` default Ignore), MatchLabelKeysInPodTopologySpread on (the scheduler merges `matchLabelKeys` into
// the selector; merging a key the API server already merged changes nothing).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::args::{DefaultingType, PodTopologySpreadArgs};
use crate::scheduler::engine::field::FieldPath;
use crate::scheduler::engine::labels::{
    Labels, NodeFields, RequiredNodeAffinity, Selector, pod_tolerations, untolerated_hard_taint,
};
use crate::scheduler::engine::pod_index::{DomainCounts, DomainQuery, PodMatcher, spread_counts};
use crate::scheduler::engine::pod_info::PodInfo;
use crate::scheduler::engine::snapshot::{NodeInfo, Snapshot, Workloads};
use crate::scheduler::engine::status::Verdict;

/// The reason for nodes where a constraint's skew would be exceeded.
pub const REASON_CONSTRAINTS: &str = "node(s) didn't match pod topology spread constraints";
/// The reason for nodes without a constraint's topology label.
pub const REASON_MISSING_LABEL: &str = "node(s) didn't match pod topology spread constraints (missing required label)";

pub(super) const HOSTNAME: &str = "kubernetes.io/hostname";

/// The plugin (filter and score).
#[derive(Debug)]
pub struct PodTopologySpread {
    default_constraints: Vec<TopologySpreadConstraint>,
    pub(super) system_defaulted: bool,
}

impl PodTopologySpread {
    /// Builds the plugin from validated args.
    pub fn new(args: &PodTopologySpreadArgs) -> PodTopologySpread {
        let system = args.defaulting_type == DefaultingType::System;
        let default_constraints = if system {
            let soft = |key: &str, max_skew| TopologySpreadConstraint {
                topology_key: key.to_string(),
                when_unsatisfiable: "ScheduleAnyway".to_string(),
                max_skew,
                ..TopologySpreadConstraint::default()
            };
            vec![soft(HOSTNAME, 3), soft("topology.kubernetes.io/zone", 5)]
        } else {
            args.default_constraints.clone()
        };
        PodTopologySpread {
            default_constraints,
            system_defaulted: system,
        }
    }

    /// The pod's constraints for `action` (DoNotSchedule or ScheduleAnyway): its own, else the defaults.
    pub(super) fn constraints(&self, cycle: &Cycle<'_>, action: &str) -> Result<Vec<Constraint>, String> {
        self.constraints_for(cycle.pod, cycle.snapshot.workloads(), action)
    }

    /// [`Self::constraints`] from the pod and the workloads alone (what the queueing hints read).
    pub(in crate::scheduler::engine) fn constraints_for(
        &self,
        pod: &PodInfo,
        workloads: &Workloads,
        action: &str,
    ) -> Result<Vec<Constraint>, String> {
        let own = pod
            .pod()
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or_default();
        if !own.is_empty() {
            return filter_constraints(own, pod.labels(), action);
        }
        let mut constraints = filter_constraints(&self.default_constraints, pod.labels(), action)?;
        if constraints.is_empty() {
            return Ok(constraints);
        }
        let selector = default_selector(pod.pod(), pod, workloads);
        if selector.is_empty() {
            return Ok(Vec::new());
        }
        for constraint in &mut constraints {
            constraint.selector = selector.clone();
        }
        Ok(constraints)
    }
}

/// A constraint as the plugin evaluates it.
#[derive(Clone, Debug)]
pub(in crate::scheduler::engine) struct Constraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub selector: Selector,
    pub min_domains: i32,
    pub honor_node_affinity: bool,
    pub honor_node_taints: bool,
}

impl Constraint {
    /// Whether the node counts for this constraint under its node inclusion policies.
    pub(crate) fn includes(
        &self,
        pod: &Pod,
        node: &(impl NodeFields + ?Sized),
        affinity: &RequiredNodeAffinity,
    ) -> bool {
        if self.honor_node_affinity && !affinity.matches(node) {
            return false;
        }
        !(self.honor_node_taints && untolerated_hard_taint(node.node_taints(), pod_tolerations(pod)).is_some())
    }
}

fn filter_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels: &Labels,
    action: &str,
) -> Result<Vec<Constraint>, String> {
    let mut result = Vec::new();
    for (i, c) in constraints
        .iter()
        .enumerate()
        .filter(|(_, c)| c.when_unsatisfiable == action)
    {
        let path = FieldPath::root()
            .key("topologySpreadConstraints")
            .index(i)
            .key("labelSelector");
        let mut selector = Selector::from_label_selector(c.label_selector.as_ref(), &path)
            .map_err(|errors| super::node_affinity::aggregate(&errors))?;
        let keys = c.match_label_keys.as_deref().unwrap_or_default();
        let matched: Labels = keys
            .iter()
            .filter_map(|key| pod_labels.get(key).map(|value| (key.clone(), value.clone())))
            .collect();
        if !matched.is_empty()
            && let Some(requirements) = selector.requirements()
        {
            selector = Selector::from_set(&matched).with(requirements);
        }
        result.push(Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            honor_node_affinity: c.node_affinity_policy.as_deref().is_none_or(|p| p == "Honor"),
            honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        });
    }
    Ok(result)
}

/// `helper.DefaultSelector`: the selectors of the services selecting the pod, merged, plus its controller's.
fn default_selector(pod: &Pod, info: &PodInfo, workloads: &Workloads) -> Selector {
    let labels = info.labels();
    let mut set = Labels::new();
    for service in &workloads.services {
        let Some(selector) = service.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            continue;
        };
        let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
        if namespace == info.namespace && Selector::from_set(selector).matches(labels) {
            set.extend(selector.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut selector = Selector::from_set(&set);
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    let Some(owner) = owner else {
        return selector;
    };
    let in_namespace = |namespace: &Option<String>, name: &Option<String>| {
        namespace.as_deref().unwrap_or("default") == info.namespace && name.as_deref() == Some(owner.name.as_str())
    };
    let path = FieldPath::root();
    let add = |selector: Selector,
               controller: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
        match Selector::from_label_selector(controller, &path) {
            Ok(other) => match other.requirements() {
                Some(requirements) => selector.with(requirements),
                None => selector,
            },
            Err(_) => selector,
        }
    };
    match (owner.api_version.as_str(), owner.kind.as_str()) {
        ("v1", "ReplicationController") => {
            let rc = workloads
                .replication_controllers
                .iter()
                .find(|rc| in_namespace(&rc.metadata.namespace, &rc.metadata.name));
            if let Some(rc) = rc {
                set.extend(
                    rc.spec
                        .iter()
                        .flat_map(|s| s.selector.iter().flatten())
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
                selector = Selector::from_set(&set);
            }
        }
        ("apps/v1", "ReplicaSet") => {
            let rs = workloads
                .replica_sets
                .iter()
                .find(|rs| in_namespace(&rs.metadata.namespace, &rs.metadata.name));
            if let Some(rs) = rs {
                selector = add(selector, Some(&rs.spec.selector));
            }
        }
        ("apps/v1", "StatefulSet") => {
            let ss = workloads
                .stateful_sets
                .iter()
                .find(|ss| in_namespace(&ss.metadata.namespace, &ss.metadata.name));
            if let Some(ss) = ss {
                selector = add(selector, Some(&ss.spec.selector));
            }
        }
        _ => {}
    }
    selector
}

/// Whether the node has every constraint's topology label.
pub(super) fn has_all_topology_labels(labels: &Labels, constraints: &[Constraint]) -> bool {
    constraints.iter().all(|c| labels.contains_key(&c.topology_key))
}

/// `countPodsMatchSelector`: pods of the namespace, not being deleted, matching (an empty selector counts none).
pub(super) fn count_matching(node: &NodeInfo, selector: &Selector, namespace: &str) -> i64 {
    node.pods()
        .iter()
        .filter(|p| spread_counts(selector, namespace, p))
        .count() as i64
}

/// Whether every node counts for every constraint, whatever its labels and taints (the inclusion policies ask
/// nothing of this pod), so that the snapshot's kept counts apply.
pub(super) fn includes_every_node(constraints: &[Constraint], affinity: &RequiredNodeAffinity) -> bool {
    constraints
        .iter()
        .all(|c| !c.honor_node_taints && (!c.honor_node_affinity || affinity.requires_nothing()))
}

/// The snapshot's kept count of the pods a constraint counts, per domain of its key.
pub(super) fn kept_counts(
    snapshot: &Snapshot,
    namespace: &str,
    constraint: &Constraint,
    required_keys: Vec<String>,
    missing_as_empty: bool,
) -> Arc<DomainCounts> {
    snapshot.domain_counts(DomainQuery {
        matcher: PodMatcher::Spread {
            namespace: namespace.to_string(),
            selector: constraint.selector.clone(),
        },
        topology_key: constraint.topology_key.clone(),
        required_keys,
        missing_as_empty,
    })
}

/// Every constraint's topology key, once each.
pub(super) fn topology_keys(constraints: &[Constraint]) -> Vec<String> {
    let mut keys: Vec<String> = constraints.iter().map(|c| c.topology_key.clone()).collect();
    keys.sort();
    keys.dedup();
    keys
}

struct Check<'a> {
    constraints: Vec<Constraint>,
    counts: Vec<Arc<DomainCounts>>,
    min_counts: Vec<i64>,
    pod_labels: &'a Labels,
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let constraints = match self.constraints(cycle, "DoNotSchedule") {
            Ok(constraints) => constraints,
            Err(message) => {
                return PreFilter::Error(format!(
                    "get constraints from pod: obtaining pod's hard topology spread constraints: {message}"
                ));
            }
        };
        if constraints.is_empty() {
            return PreFilter::Skip;
        }
        let counts = domain_counts(cycle.snapshot, cycle.pod, &constraints);
        let min_counts = constraints
            .iter()
            .zip(&counts)
            .map(|(c, domains)| {
                if (domains.domains.len() as i64) < i64::from(c.min_domains) {
                    0
                } else {
                    domains
                        .domains
                        .values()
                        .map(|d| d.pods)
                        .min()
                        .unwrap_or(i64::from(i32::MAX))
                }
            })
            .collect();
        PreFilter::run(Check {
            constraints,
            counts,
            min_counts,
            pod_labels: cycle.pod.labels(),
        })
    }
}

/// Matching pods per topology value, per constraint, over every node that has all the topology labels and
/// passes the constraint's inclusion policies.
fn domain_counts(snapshot: &Snapshot, pod: &PodInfo, constraints: &[Constraint]) -> Vec<Arc<DomainCounts>> {
    let affinity = RequiredNodeAffinity::of(pod.pod());
    if includes_every_node(constraints, &affinity) {
        let keys = topology_keys(constraints);
        return constraints
            .iter()
            .map(|c| kept_counts(snapshot, &pod.namespace, c, keys.clone(), false))
            .collect();
    }
    let mut counts = vec![DomainCounts::default(); constraints.len()];
    for node in snapshot.list() {
        let labels = node.labels();
        if !has_all_topology_labels(labels, constraints) {
            continue;
        }
        for (i, constraint) in constraints.iter().enumerate() {
            if !constraint.includes(pod.pod(), node, &affinity) {
                continue;
            }
            let matching = count_matching(node, &constraint.selector, &pod.namespace);
            let value = labels.get(&constraint.topology_key).map_or("", String::as_str);
            counts[i].change(value, matching, 1);
        }
    }
    counts.into_iter().map(Arc::new).collect()
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        let labels = node.labels();
        for (i, constraint) in self.constraints.iter().enumerate() {
            let Some(value) = labels.get(&constraint.topology_key) else {
                return Some(Verdict::unresolvable(REASON_MISSING_LABEL));
            };
            let own = i64::from(constraint.selector.matches(self.pod_labels));
            let matching = self.counts[i].pods(value);
            if matching + own - self.min_counts[i] > i64::from(constraint.max_skew) {
                return Some(Verdict::unschedulable(REASON_CONSTRAINTS));
            }
        }
        None
    }
}
