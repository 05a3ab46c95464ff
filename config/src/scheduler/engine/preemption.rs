//! kube-scheduler v1.35's PostFilter chain (DynamicResources, DefaultPreemption) as a pure decision: which pods
//! to evict on which node, or the `preemption: …` text when nothing helps.

// The evaluator follows `framework/preemption/preemption.go` and `plugins/defaultpreemption/default_preemption.go`:
// eligibility, potential nodes (those rejected with `Unschedulable`), a dry run from a random offset over at
// least max(percentage, absolute) of them, victims with reprieve and PodDisruptionBudget counting, then the node by
// kube-scheduler's tie-break order. kube-scheduler dry-runs nodes with 16 workers and stops when enough
// candidates are found; this runs them one at a time from the same offset and stops at the same condition, so
// which nodes past that point were examined can differ (a race upstream).
//
// The dry run works on a copy of each node, as kube-scheduler's does. Removing victims must also change what the
// PreFilter state of InterPodAffinity and PodTopologySpread counts: kube-scheduler updates the state incrementally
// (`AddPod`/`RemovePod` extensions); here the caller's check re-runs PreFilter on a copy of the cluster holding
// the changed node when that state counts pods, so it is exactly what those extensions maintain, by construction.
// Otherwise the cycle's state is reused as is.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;

use super::args::DefaultPreemptionArgs;
use super::behaviour::Behaviour;
use super::field::FieldPath;
use super::labels::Selector;
use super::nominated::Nominator;
use super::pod_info::PodInfo;
use super::rng::SplitMix64;
use super::snapshot::{NodeInfo, Snapshot};
use super::status::{Code, Reason, Rejection, fit_error_message};

/// The plugin name victims' statuses and messages are attributed to.
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";
/// DynamicResources' PostFilter answer for a pod without resource claims.
pub const NO_CLAIMS_TO_DEALLOCATE: &str = "no new claims to deallocate";
/// A node without lower-priority pods.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Nodes where preemption cannot help (rejected UnschedulableAndUnresolvable, or not dry-run).
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// The preemptor has `preemptionPolicy: Never`.
pub const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// DefaultPreemption's PreEnqueue status (UnschedulableAndUnresolvable) for a preemptor whose victims are still
/// being deleted (async preemption, `default_preemption.go:139`).
pub const PREEMPTION_HOLD: &str = "waiting for the preemption for this pod to be finished";
/// A victim of an earlier preemption is still terminating on the preemptor's nominated node.
pub const NOT_ELIGIBLE_TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";

/// A pod named in a preemption: identity for the API calls, priority for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    /// The snapshot key (UID, or `namespace/name`).
    pub key: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
}

impl PodRef {
    fn of(pod: &PodInfo) -> PodRef {
        PodRef {
            key: pod.key.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name().to_string(),
            priority: pod.priority,
        }
    }
}

/// What the preemption decided to do; the scheduler worker carries it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preemption {
    /// The node the preemptor is nominated to.
    pub node: Arc<str>,
    /// Pods to evict, most important first.
    pub victims: Vec<PodRef>,
    /// How many victims' eviction exceeds a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// Lower-priority pods nominated to the node, whose `status.nominatedNodeName` is cleared.
    pub lower_nominated_to_clear: Vec<PodRef>,
}

/// What happens to the preemptor's `status.nominatedNodeName` (kube-scheduler's `NominatingInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Nominate {
    /// Leave it as it is (`ModeNoop`, or no result).
    Leave,
    /// Set it to this node (`ModeOverride` with a node).
    Set(Arc<str>),
    /// Clear it (`ModeOverride` with an empty name).
    Clear,
}

/// The PostFilter chain's result for an unschedulable pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostFilter {
    /// kube-scheduler's `PostFilterMsg`, appended to the FitError after a space; when preemption found a node,
    /// `None` before v1.37 (nothing appended), v1.37's placement text from then on.
    pub message: Option<String>,
    /// The preemptor's nomination.
    pub nominate: Nominate,
    /// The victims to evict, when preemption found a node.
    pub preemption: Option<Preemption>,
}

/// The PostFilter plugins of a profile, in kube-scheduler's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostFilters {
    /// DynamicResources runs first (it is in kube-scheduler's default profile).
    pub dynamic_resources: bool,
    /// DefaultPreemption's args (defaulted and validated).
    pub preemption: DefaultPreemptionArgs,
    /// When set, only pods whose `spec.schedulerName` is one of these may be victims (Ruleplane's victim-scope
    /// option, kube-scheduler's `IsEligiblePod` hook); `None` is kube-scheduler's rule: any lower-priority pod.
    pub victim_schedulers: Option<Arc<BTreeSet<String>>>,
    /// The kube-scheduler minor whose texts the chain writes.
    pub behaviour: Behaviour,
}

impl Default for PostFilters {
    /// kube-scheduler v1.35's default profile: DynamicResources, then DefaultPreemption with default args.
    fn default() -> PostFilters {
        PostFilters {
            dynamic_resources: true,
            preemption: DefaultPreemptionArgs::default(),
            victim_schedulers: None,
            behaviour: Behaviour::of(crate::KubernetesVersion::V1_35),
        }
    }
}

/// Each node's filter status from the failed cycle (`NodeToStatus`): explicit verdicts, and one code for the
/// nodes without one.
pub(crate) struct NodeStatuses<'a> {
    pub explicit: HashMap<&'a str, Code>,
    pub absent: Code,
}

impl NodeStatuses<'_> {
    fn code(&self, node: &str) -> Code {
        self.explicit.get(node).copied().unwrap_or(self.absent)
    }
}

/// Filters the preemptor on a dry run's copy of a node (the rest of the cluster as it is): `Ok(None)` when it
/// fits, the first rejection otherwise, `Err` for a plugin error.
pub(crate) type FitCheck<'f> = dyn FnMut(&NodeInfo) -> Result<Option<Rejection>, String> + 'f;

/// The chain for an unschedulable pod whose PreFilters ran (a FitError). `pre_filter_unresolvable` is true when
/// a PreFilter rejected the pod UnschedulableAndUnresolvable: kube-scheduler stops PreFilter there, so
/// DynamicResources' state was never written and its PostFilter fails reading it. Only the `nominator`'s
/// nominations are cleared: kube-scheduler never clears another scheduler's, nor may Ruleplane write to pods it
/// does not schedule.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_post_filters(
    chain: &PostFilters,
    snapshot: &Snapshot,
    nominator: Nominator<'_>,
    pod: &PodInfo,
    statuses: &NodeStatuses<'_>,
    pre_filter_unresolvable: bool,
    rng: &mut SplitMix64,
    fits: &mut FitCheck<'_>,
) -> PostFilter {
    let mut reasons: Vec<String> = Vec::new();
    if chain.dynamic_resources {
        if pre_filter_unresolvable {
            return PostFilter {
                message: Some("not found".to_string()),
                nominate: Nominate::Leave,
                preemption: None,
            };
        }
        if chain.behaviour.dynamic_resources_explains_no_claims() {
            reasons.push(NO_CLAIMS_TO_DEALLOCATE.to_string());
        }
    }
    let (nominate, preemption) = match preempt(chain, snapshot, nominator, pod, statuses, rng, fits) {
        Evaluation::Nominated(preemption) => {
            return PostFilter {
                message: chain
                    .behaviour
                    .preemption_reports_its_placement()
                    .then(|| placement_message(&preemption)),
                nominate: Nominate::Set(preemption.node.clone()),
                preemption: Some(preemption),
            };
        }
        Evaluation::Unschedulable { message, nominate } => {
            reasons.push(format!("preemption: {message}"));
            (nominate, None)
        }
        Evaluation::Error(message) => {
            // An error ends the chain with only its own message.
            return PostFilter {
                message: Some(format!("preemption: {message}")),
                nominate: Nominate::Leave,
                preemption: None,
            };
        }
    };
    PostFilter {
        message: Some(reasons.join(", ")),
        nominate,
        preemption,
    }
}

/// v1.37's DefaultPreemption status on success (`preemption.go` `Preempt`, prefixed by `PostFilter`); the chain
/// returns it alone, without DynamicResources' reason.
fn placement_message(preemption: &Preemption) -> String {
    format!(
        "preemption: found a potential placement for pod on node {}, preempting {} victims",
        preemption.node,
        preemption.victims.len()
    )
}

/// DefaultPreemption's `Preempt` result.
#[derive(Debug)]
enum Evaluation {
    Nominated(Preemption),
    Unschedulable { message: String, nominate: Nominate },
    Error(String),
}

/// What the dry run found on one node.
enum NodeOutcome {
    /// The pod fits once these pods (most important first) are gone; so many of them exceed a budget.
    Candidate(Vec<Arc<PodInfo>>, usize),
    /// Preemption cannot help there: the node's status reasons.
    Rejected(Vec<Reason>),
}

/// One dry-run candidate.
struct Candidate {
    node: Arc<str>,
    victims: Vec<Arc<PodInfo>>,
    pdb_violations: usize,
}

fn preempt(
    chain: &PostFilters,
    snapshot: &Snapshot,
    nominator: Nominator<'_>,
    pod: &PodInfo,
    statuses: &NodeStatuses<'_>,
    rng: &mut SplitMix64,
    fits: &mut FitCheck<'_>,
) -> Evaluation {
    let args = &chain.preemption;
    let eligible = |victim: &PodInfo| match &chain.victim_schedulers {
        None => true,
        Some(schedulers) => victim
            .scheduler_name
            .as_deref()
            .is_some_and(|name| schedulers.contains(name)),
    };
    if let Some(message) = not_eligible(snapshot, pod, statuses) {
        return Evaluation::Unschedulable {
            message: message.to_string(),
            nominate: Nominate::Leave,
        };
    }
    let potential: Vec<&NodeInfo> = snapshot
        .list()
        .filter(|node| statuses.code(node.name()) == Code::Unschedulable)
        .collect();
    let num_all_nodes = snapshot.num_nodes();
    let not_helpful = [Reason::Borrowed(NOT_HELPFUL)];
    if potential.is_empty() {
        return Evaluation::Unschedulable {
            message: fit_error_message(num_all_nodes, std::iter::empty(), 0, &not_helpful),
            nominate: Nominate::Clear,
        };
    }
    let pdbs = CompiledPdbs::new(snapshot.pod_disruption_budgets(), chain.behaviour);
    let n = potential.len();
    let offset = rng.below(n);
    let wanted = args.num_candidates(n);
    let mut non_violating: Vec<Candidate> = Vec::new();
    let mut violating: Vec<Candidate> = Vec::new();
    let mut failed: Vec<Vec<Reason>> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for i in 0..n {
        let node = potential[(offset + i) % n];
        match select_victims(node.clone(), pod, &eligible, &pdbs, fits) {
            Ok(NodeOutcome::Candidate(victims, pdb_violations)) => {
                let list = if pdb_violations == 0 {
                    &mut non_violating
                } else {
                    &mut violating
                };
                if list.len() < wanted {
                    list.push(Candidate {
                        node: node.shared_name(),
                        victims,
                        pdb_violations,
                    });
                }
                if !non_violating.is_empty() && non_violating.len() + violating.len() >= wanted {
                    break;
                }
            }
            Ok(NodeOutcome::Rejected(reasons)) => failed.push(reasons),
            Err(error) => errors.push(error),
        }
    }
    let mut candidates = non_violating;
    candidates.append(&mut violating);
    if candidates.is_empty() {
        if !errors.is_empty() {
            return Evaluation::Error(aggregate(&errors));
        }
        let explicit: Vec<&[Reason]> = failed.iter().map(Vec::as_slice).collect();
        return Evaluation::Unschedulable {
            message: fit_error_message(num_all_nodes, explicit.iter().copied(), explicit.len(), &not_helpful),
            nominate: Nominate::Clear,
        };
    }
    let chosen = pick_one_node(&candidates, rng);
    let candidate = &candidates[chosen];
    let lower_nominated_to_clear = nominator
        .on_node(&candidate.node)
        .filter(|nominated| nominated.priority < pod.priority)
        .map(|nominated| PodRef::of(nominated))
        .collect();
    Evaluation::Nominated(Preemption {
        node: candidate.node.clone(),
        victims: candidate.victims.iter().map(|victim| PodRef::of(victim)).collect(),
        pdb_violations: candidate.pdb_violations,
        lower_nominated_to_clear,
    })
}

/// `preemptionPolicy: Never`: the pod never preempts (DefaultPreemption refuses before looking at nodes).
pub fn never_preempts(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.preemption_policy.as_deref()) == Some("Never")
}

/// `PodEligibleToPreemptOthers`: the reason the pod may not preempt, if any.
fn not_eligible(snapshot: &Snapshot, pod: &PodInfo, statuses: &NodeStatuses<'_>) -> Option<&'static str> {
    if never_preempts(pod.pod()) {
        return Some(NOT_ELIGIBLE_NEVER);
    }
    let nominated = pod
        .pod()
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())?;
    // A nominated node preemption cannot help on any more: try again elsewhere.
    if statuses.code(nominated) == Code::UnschedulableAndUnresolvable {
        return None;
    }
    let node = snapshot.get(nominated)?;
    node.pods()
        .iter()
        .any(|p| p.priority < pod.priority && p.terminating_by_preemption)
        .then_some(NOT_ELIGIBLE_TERMINATING)
}

/// `SelectVictimsOnNode` on a copy of the node: the victims (most important first) and how many exceed a budget,
/// or the node's status reasons when preemption cannot help there.
fn select_victims(
    mut work: NodeInfo,
    pod: &PodInfo,
    eligible: &dyn Fn(&PodInfo) -> bool,
    pdbs: &CompiledPdbs,
    fits: &mut FitCheck<'_>,
) -> Result<NodeOutcome, String> {
    let lower: Vec<String> = work
        .pods()
        .iter()
        .filter(|p| p.priority < pod.priority && eligible(p))
        .map(|p| p.key.clone())
        .collect();
    if lower.is_empty() {
        return Ok(NodeOutcome::Rejected(vec![Reason::Borrowed(NO_VICTIMS)]));
    }
    let mut potential = Vec::with_capacity(lower.len());
    for key in &lower {
        potential.extend(work.remove_pod(key));
    }
    if let Some(rejection) = fits(&work)? {
        return Ok(NodeOutcome::Rejected(rejection.reasons));
    }
    // Most important first, so the most important are reprieved first.
    potential.sort_by(|a, b| more_important_first(a, b));
    let (violating, non_violating) = pdbs.split(potential);
    let has_both = !violating.is_empty() && !non_violating.is_empty();
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    for (group_violates, group) in [(true, violating), (false, non_violating)] {
        for candidate in group {
            work.add_pod(candidate.clone());
            if fits(&work)?.is_some() {
                work.remove_pod(&candidate.key);
                victims.push(candidate);
                pdb_violations += usize::from(group_violates);
            }
        }
    }
    if has_both {
        victims.sort_by(|a, b| more_important_first(a, b));
    }
    if victims.is_empty() {
        // kube-scheduler reports this as an error for the node ("expected at least one victim pod").
        return Err(format!("expected at least one victim pod on node {:?}", work.name()));
    }
    Ok(NodeOutcome::Candidate(victims, pdb_violations))
}

/// `GetPodStartTime`: `status.startTime`; `None` stands for "now", later than every recorded start.
/// Orders start times with "not started" (now) after every recorded time.
pub(crate) fn compare_start(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    (a.is_none(), a).cmp(&(b.is_none(), b))
}

/// `MoreImportantPod` as an ordering: higher priority first, then the earlier start.
fn more_important_first(a: &PodInfo, b: &PodInfo) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| compare_start(a.start_time, b.start_time))
}

/// The budgets, with their selectors parsed once per preemption.
pub(crate) struct CompiledPdbs {
    budgets: Vec<Budget>,
    /// v1.37: a pod stops counting against budgets at the first one it takes below zero.
    stop_at_first_violation: bool,
}

struct Budget {
    namespace: String,
    /// `None` for a selector that does not parse, or one that matches nothing here (nil or empty).
    selector: Option<Selector>,
    allowed: i32,
    disrupted: BTreeSet<String>,
}

impl CompiledPdbs {
    pub(crate) fn new(pdbs: &[PodDisruptionBudget], behaviour: Behaviour) -> CompiledPdbs {
        let budgets = pdbs
            .iter()
            .map(|pdb| {
                let selector = Selector::from_label_selector(
                    pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
                    &FieldPath::root(),
                )
                .ok()
                .filter(|s| !s.is_empty() && *s != Selector::Nothing);
                let status = pdb.status.as_ref();
                Budget {
                    namespace: pdb.metadata.namespace.clone().unwrap_or_else(|| "default".to_string()),
                    selector,
                    allowed: status.map_or(0, |s| s.disruptions_allowed.unwrap_or(0)),
                    disrupted: status
                        .and_then(|s| s.disrupted_pods.as_ref())
                        .map(|d| d.keys().cloned().collect())
                        .unwrap_or_default(),
                }
            })
            .collect();
        CompiledPdbs {
            budgets,
            stop_at_first_violation: behaviour.pdb_check_stops_at_first_violation(),
        }
    }

    /// `filterPodsWithPDBViolation` (`FilterVictimsWithPDBViolation` from v1.37): splits sorted pods into
    /// (violating, non-violating), keeping the order. Each matching budget not already counting the pod as
    /// disrupted is decremented; a pod is violating when one of its budgets goes below zero.
    fn split(&self, pods: Vec<Arc<PodInfo>>) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
        let (violating, non_violating) = self.split_units(pods, std::slice::from_ref);
        (violating.into_iter().map(|(pod, _)| pod).collect(), non_violating)
    }

    /// `FilterVictimsWithPDBViolation`: [`CompiledPdbs::split`] for units of pods, each violating unit with how
    /// many of its pods violate; every pod of every unit counts against the budgets, in order.
    pub(crate) fn split_units<U>(
        &self,
        units: Vec<U>,
        pods_of: impl Fn(&U) -> &[Arc<PodInfo>],
    ) -> (Vec<(U, usize)>, Vec<U>) {
        let mut allowed: Vec<i32> = self.budgets.iter().map(|b| b.allowed).collect();
        let mut violating = Vec::new();
        let mut non_violating = Vec::new();
        for unit in units {
            let violating_pods = pods_of(&unit)
                .iter()
                .filter(|pod| self.violates(pod, &mut allowed))
                .count();
            if violating_pods > 0 {
                violating.push((unit, violating_pods));
            } else {
                non_violating.push(unit);
            }
        }
        (violating, non_violating)
    }

    /// Counts `pod` against the budgets left (`allowed`): whether one of them went below zero.
    fn violates(&self, pod: &PodInfo, allowed: &mut [i32]) -> bool {
        let labels = pod.labels();
        if labels.is_empty() {
            return false;
        }
        let mut violates = false;
        for (budget, allowed) in self.budgets.iter().zip(allowed.iter_mut()) {
            let matches =
                budget.namespace == pod.namespace && budget.selector.as_ref().is_some_and(|s| s.matches(labels));
            if !matches || budget.disrupted.contains(pod.name()) {
                continue;
            }
            *allowed -= 1;
            if *allowed < 0 {
                violates = true;
                if self.stop_at_first_violation {
                    break;
                }
            }
        }
        violates
    }
}

/// `pickOneNodeForPreemption` with no custom score functions: fewest PDB violations, lowest highest victim
/// priority, smallest priority sum, fewest victims, latest earliest start among the highest-priority victims;
/// a tie after all that is broken at random (kube-scheduler takes the first of a Go map).
fn pick_one_node(candidates: &[Candidate], rng: &mut SplitMix64) -> usize {
    if candidates.len() == 1 {
        return 0;
    }
    // Every key is "greater is better".
    type Key = (i64, i64, i64, i64, (bool, Option<Timestamp>));
    let key = |c: &Candidate| -> Key {
        let highest = c.victims.first().map_or(0, |v| v.priority);
        let sum: i64 = c
            .victims
            .iter()
            .map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1)
            .sum();
        let earliest = earliest_start_of_highest(&c.victims);
        (
            -(c.pdb_violations as i64),
            -i64::from(highest),
            -sum,
            -(c.victims.len() as i64),
            (earliest.is_none(), earliest),
        )
    };
    let keys: Vec<Key> = candidates.iter().map(key).collect();
    let best = keys.iter().max().cloned();
    let tied: Vec<usize> = (0..keys.len()).filter(|&i| Some(&keys[i]) == best.as_ref()).collect();
    if tied.len() > 1 {
        tied[rng.below(tied.len())]
    } else {
        tied.first().copied().unwrap_or(0)
    }
}

/// `GetEarliestPodStartTime`: the earliest start among the victims of the highest priority (`None` = now).
fn earliest_start_of_highest(victims: &[Arc<PodInfo>]) -> Option<Timestamp> {
    let highest = victims.iter().map(|v| v.priority).max()?;
    victims
        .iter()
        .filter(|v| v.priority == highest)
        .map(|v| v.start_time)
        .min_by(|a, b| compare_start(*a, *b))
        .flatten()
}

/// `utilerrors.NewAggregate(...).Error()`: one error as is, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}
