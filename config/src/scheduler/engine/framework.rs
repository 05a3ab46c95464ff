//! One kube-scheduler v1.35 scheduling cycle: PreFilter, Filter, Score, host selection, failure message, PostFilter.

// One scheduling cycle as kube-scheduler v1.35 runs it: PreFilter, Filter over a rotating window of nodes
// (percentageOfNodesToScore), PreScore/Score/Normalize, weighted totals, host selection and the failure message.
//
// Filtering emulates kube-scheduler with `parallelism: 1`: nodes are checked one at a time from `nextStartNodeIndex`,
// and the search stops at the first feasible node beyond the number wanted, so the rotating start index advances
// exactly as it would there. With kube-scheduler's default 16 workers which nodes get examined past that point is a
// race; the verdicts per examined node are the same.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::KubernetesVersion;

use super::behaviour::Behaviour;
use super::decision::{Decision, NodeResult, Outcome, PluginScore, ScheduleError};
use super::features::{Feature, needed_features, unsupported_verdict};
use super::field::FieldPath;
use super::labels::Selector;
use super::nominated::{self, Nominator};
use super::plugins::{BuiltFilter, BuiltScore, Cycle, NodeFilter, PreFilter, PreScore, build_filter, build_score};
use super::pod_info::PodInfo;
use super::preemption::{NodeStatuses, PostFilters, run_post_filters};
use super::profile::{Profile, ProfileError, TieBreak};
use super::rng::SplitMix64;
use super::snapshot::{NodeInfo, Snapshot, pod_ref, uses_claim};
use super::status::{Code, NO_NODES_MESSAGE, Reason, Rejection, fit_error_message, pre_filter_message};

/// Below this many nodes every node is examined.
const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never goes below this.
const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// `numFeasibleNodesToFind`: how many feasible nodes to find before scoring. `percentage` 0 is adaptive:
/// max(5, 50 − N/125) percent, at least 100 nodes (all of them below 100).
pub(crate) fn num_feasible_nodes_to_find(percentage: u8, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut percentage = usize::from(percentage);
    if percentage == 0 {
        percentage = 50usize
            .saturating_sub(num_all_nodes / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// A compiled profile plus the state kube-scheduler carries between decisions (the rotating start index) and
/// the tie-breaking generator.
#[derive(Debug)]
pub struct Engine {
    compiled: Compiled,
    next_start_node_index: usize,
    rng: SplitMix64,
    /// The PostFilter chain run after a FitError; `None` (the default) runs none.
    post_filters: Option<PostFilters>,
    /// Only the nominations of pods of these schedulers count (Filter's nominated pods, the lower nominations
    /// preemption clears); `None`: every nominated pod of the snapshot (the offline tools' files).
    nominator_schedulers: Option<Arc<BTreeSet<String>>>,
    /// Tests: run PreFilter again for every dry-run check, the reference the state reuse is checked against.
    #[cfg(test)]
    pub(super) always_rerun_pre_filter: bool,
}

/// The profile's plugins and settings.
#[derive(Debug)]
struct Compiled {
    filters: Vec<BuiltFilter>,
    scores: Vec<BuiltScore>,
    percentage: u8,
    ignored_features: BTreeSet<Feature>,
    tie_break: TieBreak,
    /// DefaultPreemption's args from the profile, for [`Engine::enable_preemption`].
    preemption_args: super::args::DefaultPreemptionArgs,
    /// Which kube-scheduler minor's behaviour the plugins and the PostFilter chain follow.
    behaviour: Behaviour,
    /// Keep each feasible node's per-plugin score breakdown in the decision (explain, fidelity); a scheduler
    /// that only binds turns it off and keeps the totals.
    breakdown: bool,
}

/// The filters that run for a pod after PreFilter.
struct Prepared<'a> {
    filters: Vec<(&'a Arc<str>, Box<dyn NodeFilter + 'a>)>,
    restriction: Option<(BTreeSet<String>, BTreeSet<Arc<str>>)>,
    skipped: Vec<Arc<str>>,
}

impl Engine {
    /// [`Engine::for_version`] as kube-scheduler v1.35, the oldest supported (unit tests, profile checks that do
    /// not depend on the version).
    pub fn new(profile: &Profile, seed: u64) -> Result<Engine, ProfileError> {
        Engine::for_version(profile, KubernetesVersion::OLDEST, seed)
    }

    /// Compiles and checks a profile to behave as kube-scheduler of `version`; `seed` seeds random
    /// tie-breaking.
    pub fn for_version(profile: &Profile, version: KubernetesVersion, seed: u64) -> Result<Engine, ProfileError> {
        let behaviour = Behaviour::of(version);
        if profile.percentage_of_nodes_to_score > 100 {
            return Err(ProfileError::InvalidPercentage(profile.percentage_of_nodes_to_score));
        }
        profile
            .args
            .default_preemption
            .validate()
            .map_err(|errors| ProfileError::InvalidArgs {
                plugin: "DefaultPreemption".to_string(),
                errors,
            })?;
        profile
            .args
            .volume_binding
            .validate()
            .map_err(|errors| ProfileError::InvalidArgs {
                plugin: "VolumeBinding".to_string(),
                errors,
            })?;
        profile
            .args
            .coscheduling
            .validate()
            .map_err(|errors| ProfileError::InvalidArgs {
                plugin: "Coscheduling".to_string(),
                errors,
            })?;
        let mut filters: Vec<BuiltFilter> = Vec::new();
        for entry in behaviour.filter_order(&profile.filters) {
            let built = build_filter(entry, &profile.args, behaviour)?;
            if filters.iter().any(|(name, _)| *name == built.0) {
                return Err(ProfileError::DuplicateName {
                    name: built.0.to_string(),
                    stage: "filter",
                });
            }
            filters.push(built);
        }
        let mut scores: Vec<BuiltScore> = Vec::new();
        let mut total_weight: i64 = 0;
        for entry in &profile.scores {
            let built = build_score(entry, &profile.args, behaviour)?;
            if scores.iter().any(|(name, _, _)| *name == built.0) {
                return Err(ProfileError::DuplicateName {
                    name: built.0.to_string(),
                    stage: "score",
                });
            }
            total_weight = built
                .2
                .checked_mul(100)
                .and_then(|w| total_weight.checked_add(w))
                .ok_or(ProfileError::WeightOverflow)?;
            scores.push(built);
        }
        Ok(Engine {
            compiled: Compiled {
                filters,
                scores,
                percentage: profile.percentage_of_nodes_to_score,
                ignored_features: profile.ignored_features.clone(),
                tie_break: profile.tie_break,
                preemption_args: profile.args.default_preemption.clone(),
                behaviour,
                breakdown: true,
            },
            next_start_node_index: 0,
            rng: SplitMix64::new(seed),
            post_filters: None,
            nominator_schedulers: None,
            #[cfg(test)]
            always_rerun_pre_filter: false,
        })
    }

    /// Whether decisions keep each feasible node's per-plugin score breakdown (default true). Without it a
    /// decision still has every verdict, reason and total, and allocates one vector fewer per node.
    pub fn set_score_breakdown(&mut self, keep: bool) {
        self.compiled.breakdown = keep;
    }

    /// Runs kube-scheduler's default PostFilter chain after a FitError — DynamicResources (which has nothing to
    /// deallocate for the pods the engine accepts), then DefaultPreemption with the profile's args — and
    /// reports its result in [`Outcome::Unschedulable`]. Off by default: nothing carries a preemption out yet.
    pub fn enable_preemption(&mut self) {
        self.post_filters = Some(PostFilters {
            dynamic_resources: true,
            preemption: self.compiled.preemption_args.clone(),
            victim_schedulers: None,
            behaviour: self.compiled.behaviour,
        });
    }

    /// Counts only the nominations of pods of these schedulers (the manager's policies): kube-scheduler's
    /// nominator holds its own profiles' pods only (other schedulers' pending pods never enter its queue), so
    /// Filter makes room for those alone and preemption clears no other scheduler's nomination.
    pub fn nominate_only_for(&mut self, schedulers: BTreeSet<String>) {
        self.nominator_schedulers = Some(Arc::new(schedulers));
    }

    /// Limits preemption's victims to pods of these schedulers (Ruleplane's victim-scope option); no effect
    /// without a PostFilter chain.
    pub(crate) fn limit_victims_to(&mut self, schedulers: std::collections::BTreeSet<String>) {
        if let Some(post_filters) = &mut self.post_filters {
            post_filters.victim_schedulers = Some(std::sync::Arc::new(schedulers));
        }
    }

    /// The PostFilter chain, when the policy has one (DefaultPreemption on).
    pub fn post_filters(&self) -> Option<&PostFilters> {
        self.post_filters.as_ref()
    }

    /// Sets the PostFilter chain (`None`: no PostFilter plugins, kube-scheduler then never preempts).
    #[cfg(test)]
    pub(crate) fn set_post_filters(&mut self, post_filters: Option<PostFilters>) {
        self.post_filters = post_filters;
    }

    /// Which kube-scheduler minor the engine behaves as.
    pub fn behaviour(&self) -> Behaviour {
        self.compiled.behaviour
    }

    /// The filters' names in the order they run.
    pub(crate) fn filter_names(&self) -> impl Iterator<Item = &str> {
        self.compiled.filters.iter().map(|(name, _)| &**name)
    }

    /// Where the next decision starts examining nodes (kube-scheduler's `nextStartNodeIndex`).
    #[cfg(test)]
    pub(crate) fn next_start_node_index(&self) -> usize {
        self.next_start_node_index
    }

    /// Schedules one pod on the snapshot. The snapshot is not changed: call [`Snapshot::assume`] with the chosen
    /// node so the next decision sees the pod.
    pub fn schedule(&mut self, snapshot: &Snapshot, pod: &Pod) -> Result<Decision, ScheduleError> {
        self.schedule_with(snapshot, pod, true)
    }

    /// Schedules a member of a Workload API gang: as [`Engine::schedule`], without the PostFilter chain where this
    /// version's pod-group cycle skips it ([`Behaviour::gang_member_post_filter`]).
    pub fn schedule_gang_member(&mut self, snapshot: &Snapshot, pod: &Pod) -> Result<Decision, ScheduleError> {
        let post_filter = self.compiled.behaviour.gang_member_post_filter();
        self.schedule_with(snapshot, pod, post_filter)
    }

    /// Whether `pod` passes every filter on `node` of `snapshot`, nominated pods included, after a PreFilter on
    /// `snapshot` (`RunFilterPluginsWithNominatedPods` on a proposed node): what workload-aware preemption asks of
    /// each member's node as it gives victims back. `Err` is a PreFilter or filter error's text.
    pub fn fits_on_node(
        &self,
        snapshot: &Snapshot,
        pod: &Pod,
        node: &str,
    ) -> Result<Result<bool, String>, ScheduleError> {
        let pod_info = PodInfo::new(pod.clone()).map_err(|source| ScheduleError::InvalidQuantity {
            pod: pod_ref(pod),
            source,
        })?;
        let Some(info) = snapshot.get(node) else {
            return Ok(Ok(false));
        };
        let cycle = Cycle {
            pod: &pod_info,
            snapshot,
        };
        let prepared = match self.compiled.run_pre_filters(&cycle) {
            Ok(prepared) => prepared,
            Err(decision) => {
                return Ok(match decision.outcome {
                    Outcome::Error { message } => Err(message),
                    _ => Ok(false),
                });
            }
        };
        if prepared
            .restriction
            .as_ref()
            .is_some_and(|(nodes, _)| !nodes.contains(node))
        {
            return Ok(Ok(false));
        }
        let nominator = Nominator::new(snapshot, self.nominator_schedulers.as_deref());
        let mut check = NodeCheck::new(&self.compiled, nominator, &pod_info, Some(&prepared), true);
        Ok(check.check(info).map(|rejection| rejection.is_none()))
    }

    fn schedule_with(&mut self, snapshot: &Snapshot, pod: &Pod, post_filter: bool) -> Result<Decision, ScheduleError> {
        let pod_info = PodInfo::new(pod.clone()).map_err(|source| ScheduleError::InvalidQuantity {
            pod: pod_ref(pod),
            source,
        })?;
        let gated = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        if gated {
            return Ok(Decision::with_outcome(Outcome::Gated {
                message: "Scheduling is blocked due to non-empty scheduling gates".to_string(),
            }));
        }
        if snapshot.num_nodes() == 0 {
            return Ok(Decision::with_outcome(Outcome::Unschedulable {
                message: NO_NODES_MESSAGE.to_string(),
                pre_filter: None,
                plugins: BTreeSet::new(),
                post_filter: None,
            }));
        }
        let cycle = Cycle {
            pod: &pod_info,
            snapshot,
        };
        let mut needed = needed_features(&pod_info, snapshot);
        let compiled = &self.compiled;
        needed.retain(|feature| !compiled.ignored_features.contains(feature));
        if let Some((plugin, verdict)) = unsupported_verdict(&needed) {
            return Ok(pre_filter_failure(snapshot, verdict.by(&Arc::from(plugin)), Vec::new()));
        }
        let nominator = Nominator::new(snapshot, self.nominator_schedulers.as_deref());
        let mut decision = match compiled.run_pre_filters(&cycle) {
            Ok(prepared) => compiled.filter_and_score(
                &cycle,
                prepared,
                nominator,
                &mut self.next_start_node_index,
                &mut self.rng,
            ),
            Err(decision) => *decision,
        };
        if let Some(chain) = self.post_filters.as_ref().filter(|_| post_filter) {
            #[cfg(test)]
            let reuse = !self.always_rerun_pre_filter;
            #[cfg(not(test))]
            let reuse = true;
            compiled.post_filter(chain, nominator, &pod_info, &mut decision, &mut self.rng, reuse);
        }
        Ok(decision)
    }
}

impl Compiled {
    /// Runs the PostFilter chain on a FitError (`Unschedulable` from PreFilter or Filter) and records it.
    fn post_filter(
        &self,
        chain: &PostFilters,
        nominator: Nominator<'_>,
        pod: &PodInfo,
        decision: &mut Decision,
        rng: &mut SplitMix64,
        reuse_state: bool,
    ) {
        let Outcome::Unschedulable { pre_filter, .. } = &decision.outcome else {
            return;
        };
        let snapshot = nominator.snapshot();
        let statuses = NodeStatuses {
            explicit: decision
                .nodes
                .iter()
                .filter_map(|n| n.rejection.as_ref().map(|r| (&*n.node, r.code)))
                .collect(),
            // Nodes a PreFilter result excluded are UnschedulableAndUnresolvable; a PreFilter that rejected the
            // pod gives every node its code.
            absent: pre_filter
                .as_ref()
                .map_or(Code::UnschedulableAndUnresolvable, |r| r.code),
        };
        let pre_filter_unresolvable = pre_filter
            .as_ref()
            .is_some_and(|r| r.code == Code::UnschedulableAndUnresolvable);
        // The cycle's PreFilter state serves every dry-run check that removed no pod it counts.
        let cycle = Cycle { pod, snapshot };
        let original = self.run_pre_filters(&cycle).ok();
        let mut check = NodeCheck::new(self, nominator, pod, original.as_ref(), reuse_state);
        let mut fits = |changed: &NodeInfo| check.check(changed);
        let result = run_post_filters(
            chain,
            snapshot,
            nominator,
            pod,
            &statuses,
            pre_filter_unresolvable,
            rng,
            &mut fits,
        );
        if let Outcome::Unschedulable { post_filter, .. } = &mut decision.outcome {
            *post_filter = Some(result);
        }
    }

    /// PreFilter on `snapshot` (a copy with one node changed), then the filters on that node. Filters the cycle's
    /// PreFilter skipped stay skipped: kube-scheduler runs neither their Filter nor their `AddPod`/`RemovePod`.
    fn fits_on(
        &self,
        snapshot: &Snapshot,
        pod: &PodInfo,
        node: &str,
        skipped: &[Arc<str>],
    ) -> Result<Option<Rejection>, String> {
        let cycle = Cycle { pod, snapshot };
        let prepared = match self.run_pre_filters(&cycle) {
            Ok(prepared) => prepared,
            Err(decision) => {
                return match decision.outcome {
                    Outcome::Unschedulable {
                        pre_filter: Some(rejection),
                        ..
                    } => Ok(Some(rejection)),
                    Outcome::Error { message } => Err(message),
                    _ => Err("PreFilter failed".to_string()),
                };
            }
        };
        let Some(info) = snapshot.get(node) else {
            return Err(format!("node {node:?} is not in the snapshot"));
        };
        // A PreFilter node restriction depends on the pod only: the node passed it in the failed cycle.
        Ok(prepared
            .filters
            .iter()
            .filter(|(name, _)| !skipped.contains(name))
            .find_map(|(name, filter)| filter.filter(info).map(|verdict| verdict.by(name))))
    }

    fn run_pre_filters<'a>(&'a self, cycle: &Cycle<'a>) -> Result<Prepared<'a>, Box<Decision>> {
        let mut prepared = Prepared {
            filters: Vec::new(),
            restriction: None,
            skipped: Vec::new(),
        };
        let mut rejected: Option<Rejection> = None;
        for (name, plugin) in &self.filters {
            match plugin.pre_filter(cycle) {
                PreFilter::Skip => prepared.skipped.push(name.clone()),
                PreFilter::Reject(verdict) if verdict.code == Code::UnschedulableAndUnresolvable => {
                    return Err(Box::new(pre_filter_failure(
                        cycle.snapshot,
                        verdict.by(name),
                        prepared.skipped,
                    )));
                }
                // An Unschedulable PreFilter result lets the others run (preemption may still help).
                PreFilter::Reject(verdict) => rejected = Some(verdict.by(name)),
                PreFilter::Error(message) => {
                    let mut decision = Decision::with_outcome(Outcome::Error {
                        message: format!("running PreFilter plugin {:?}: {message}", &**name),
                    });
                    decision.skipped_filters = prepared.skipped;
                    return Err(Box::new(decision));
                }
                PreFilter::Run { filter, nodes } => {
                    prepared.filters.push((name, filter));
                    if let Some(nodes) = nodes {
                        let (names, plugins) = prepared
                            .restriction
                            .get_or_insert_with(|| (nodes.clone(), BTreeSet::new()));
                        names.retain(|n| nodes.contains(n));
                        plugins.insert(name.clone());
                        if names.is_empty() {
                            let list: Vec<&str> = plugins.iter().map(|p| &**p).collect();
                            let message = if list.len() == 1 {
                                format!("node(s) didn't satisfy plugin {}", list[0])
                            } else {
                                format!("node(s) didn't satisfy plugin(s) [{}] simultaneously", list.join(" "))
                            };
                            let rejection = Rejection {
                                plugin: name.clone(),
                                code: Code::UnschedulableAndUnresolvable,
                                reasons: vec![Reason::Owned(message)],
                            };
                            let mut decision = pre_filter_failure(cycle.snapshot, rejection, prepared.skipped);
                            if let Outcome::Unschedulable {
                                plugins: unschedulable, ..
                            } = &mut decision.outcome
                            {
                                *unschedulable = plugins.clone();
                            }
                            return Err(Box::new(decision));
                        }
                    }
                }
            }
        }
        match rejected {
            Some(rejection) => Err(Box::new(pre_filter_failure(
                cycle.snapshot,
                rejection,
                prepared.skipped,
            ))),
            None => Ok(prepared),
        }
    }

    fn filter_and_score(
        &self,
        cycle: &Cycle<'_>,
        prepared: Prepared<'_>,
        nominator: Nominator<'_>,
        next_start_node_index: &mut usize,
        rng: &mut SplitMix64,
    ) -> Decision {
        let snapshot = cycle.snapshot;
        let num_all_nodes = snapshot.num_nodes();
        let (candidates, absent_reasons, mut unschedulable_plugins): (Vec<&NodeInfo>, Vec<Reason>, BTreeSet<Arc<str>>) =
            match &prepared.restriction {
                Some((names, plugins)) => {
                    let list: Vec<&str> = plugins.iter().map(|p| &**p).collect();
                    let reason = format!("node(s) didn't satisfy plugin(s) [{}]", list.join(" "));
                    (
                        snapshot.list().filter(|n| names.contains(n.name())).collect(),
                        vec![Reason::Owned(reason)],
                        plugins.clone(),
                    )
                }
                None => (snapshot.list().collect(), Vec::new(), BTreeSet::new()),
            };
        let mut node_check = NodeCheck::new(self, nominator, cycle.pod, Some(&prepared), true);
        // A rerun of PreFilter for a node's nominated pods cannot fail where the cycle's succeeded; if it does, the
        // cycle ends with that error, as kube-scheduler's does.
        let failed = |message: String| {
            let mut decision = decision_for(Vec::new(), &prepared, Vec::new());
            decision.outcome = Outcome::Error { message };
            decision
        };
        let mut results: Vec<NodeResult> = Vec::with_capacity(candidates.len().min(1024));
        let mut rejected: HashSet<Arc<str>> = HashSet::new();
        let mut feasible: Vec<&NodeInfo> = Vec::new();

        // A node nominated by an earlier preemption is tried first; if it fits, it is taken without scoring.
        let nominated = cycle
            .pod
            .pod()
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref());
        if let Some(node) = nominated.filter(|n| !n.is_empty()).and_then(|n| snapshot.get(n)) {
            match node_check.check(node) {
                Err(message) => return failed(message),
                Ok(None) => {
                    let mut decision = decision_for(vec![feasible_result(node)], &prepared, Vec::new());
                    decision.outcome = Outcome::Scheduled {
                        node: node.shared_name(),
                    };
                    decision.feasible_nodes = 1;
                    decision.evaluated_nodes = 1;
                    return decision;
                }
                Ok(Some(rejection)) => {
                    rejected.insert(node.shared_name());
                    results.push(rejected_result(node, rejection));
                }
            }
        }

        let n = candidates.len();
        let mut to_find = num_feasible_nodes_to_find(self.percentage, n);
        if self.scores.is_empty() {
            to_find = to_find.min(1);
        }
        let start = *next_start_node_index;
        if self.filters.is_empty() {
            feasible.extend((0..to_find).map(|i| candidates[(start + i) % n]));
        } else {
            for i in 0..n {
                let node = candidates[(start + i) % n];
                match node_check.check(node) {
                    Err(message) => return failed(message),
                    Ok(None) if feasible.len() == to_find => break,
                    Ok(None) => feasible.push(node),
                    Ok(Some(rejection)) => {
                        if rejected.insert(node.shared_name()) {
                            results.push(rejected_result(node, rejection));
                        } else if let Some(existing) = results.iter_mut().find(|r| r.node == node.shared_name()) {
                            existing.rejection = Some(rejection);
                        }
                    }
                }
            }
        }
        let processed = feasible.len() + rejected.len();
        *next_start_node_index = (start + processed) % num_all_nodes;
        results.extend(feasible.iter().map(|node| feasible_result(node)));

        if feasible.is_empty() {
            let explicit: Vec<&[Reason]> = results
                .iter()
                .filter_map(|r| r.rejection.as_ref().map(|rej| rej.reasons.as_slice()))
                .collect();
            unschedulable_plugins.extend(
                results
                    .iter()
                    .filter_map(|r| r.rejection.as_ref().map(|rej| rej.plugin.clone())),
            );
            let message = fit_error_message(num_all_nodes, explicit.iter().copied(), explicit.len(), &absent_reasons);
            let mut decision = decision_for(results, &prepared, Vec::new());
            decision.outcome = Outcome::Unschedulable {
                message,
                pre_filter: None,
                plugins: unschedulable_plugins,
                post_filter: None,
            };
            return decision;
        }
        if feasible.len() == 1 {
            let node = feasible[0].shared_name();
            let mut decision = decision_for(results, &prepared, Vec::new());
            decision.outcome = Outcome::Scheduled { node };
            return decision;
        }
        self.score(cycle, &prepared, feasible, results, rng)
    }

    fn score(
        &self,
        cycle: &Cycle<'_>,
        prepared: &Prepared<'_>,
        feasible: Vec<&NodeInfo>,
        mut results: Vec<NodeResult>,
        rng: &mut SplitMix64,
    ) -> Decision {
        let offset = results.len() - feasible.len();
        // One allocation per node for its score breakdown rather than one per doubling.
        if self.breakdown {
            for result in &mut results[offset..] {
                result.scores.reserve_exact(self.scores.len());
            }
        }
        let mut skipped = Vec::new();
        let mut totals = vec![0i64; feasible.len()];
        if self.scores.is_empty() {
            // Without score plugins every node scores 1 (prioritizeNodes).
            totals.iter_mut().for_each(|t| *t = 1);
        }
        for (name, plugin, weight) in &self.scores {
            let scorer = match plugin.pre_score(cycle, &feasible) {
                PreScore::Skip => {
                    skipped.push(name.clone());
                    continue;
                }
                PreScore::Error(message) => {
                    let mut decision = decision_for(results, prepared, skipped);
                    decision.outcome = Outcome::Error {
                        message: format!("running PreScore plugin {:?}: {message}", &**name),
                    };
                    return decision;
                }
                PreScore::Run(scorer) => scorer,
            };
            let raw: Vec<i64> = feasible.iter().map(|node| scorer.score(node)).collect();
            let mut normalized = raw.clone();
            scorer.normalize(&feasible, &mut normalized);
            for (i, (&raw, &score)) in raw.iter().zip(&normalized).enumerate() {
                if !(0..=100).contains(&score) {
                    let mut decision = decision_for(results, prepared, skipped);
                    decision.outcome = Outcome::Error {
                        message: format!(
                            "applying score defaultWeights on Score plugins: plugin {:?} returns an invalid score {score}, it should in the range of [0, 100] after normalizing",
                            &**name
                        ),
                    };
                    return decision;
                }
                let weighted = score * weight;
                totals[i] += weighted;
                if !self.breakdown {
                    continue;
                }
                results[offset + i].scores.push(PluginScore {
                    plugin: name.clone(),
                    raw,
                    normalized: score,
                    weight: *weight,
                    weighted,
                });
            }
        }
        for (i, total) in totals.iter().enumerate() {
            results[offset + i].total = Some(*total);
        }
        let chosen = match self.tie_break {
            TieBreak::Random => {
                let best = totals.iter().copied().max().unwrap_or(0);
                let ties: Vec<usize> = (0..totals.len()).filter(|&i| totals[i] == best).collect();
                if ties.len() > 1 {
                    ties[rng.below(ties.len())]
                } else {
                    ties.first().copied().unwrap_or(0)
                }
            }
            TieBreak::HeapOrder => heap_top(&totals),
        };
        let mut decision = decision_for(results, prepared, skipped);
        decision.outcome = Outcome::Scheduled {
            node: feasible[chosen].shared_name(),
        };
        decision
    }
}

/// The node `container/heap` pops first from kube-scheduler's score heap (all randomizers 0): the root after
/// `heap.Init` with "greater total first", whose order among equal totals depends on the evaluation order.
pub(super) fn heap_top(totals: &[i64]) -> usize {
    let n = totals.len();
    let mut heap: Vec<usize> = (0..n).collect();
    let less = |heap: &[usize], a: usize, b: usize| totals[heap[a]] > totals[heap[b]];
    for root in (0..n / 2).rev() {
        let mut i = root;
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let mut child = left;
            if left + 1 < n && less(&heap, left + 1, left) {
                child = left + 1;
            }
            if !less(&heap, child, i) {
                break;
            }
            heap.swap(i, child);
            i = child;
        }
    }
    heap.first().copied().unwrap_or(0)
}

fn feasible_result(node: &NodeInfo) -> NodeResult {
    NodeResult {
        node: node.shared_name(),
        rejection: None,
        scores: Vec::new(),
        total: None,
    }
}

fn rejected_result(node: &NodeInfo, rejection: Rejection) -> NodeResult {
    NodeResult {
        node: node.shared_name(),
        rejection: Some(rejection),
        scores: Vec::new(),
        total: None,
    }
}

fn decision_for(nodes: Vec<NodeResult>, prepared: &Prepared<'_>, skipped_scores: Vec<Arc<str>>) -> Decision {
    let feasible = nodes.iter().filter(|n| n.rejection.is_none()).count();
    Decision {
        outcome: Outcome::Error { message: String::new() },
        evaluated_nodes: nodes.len(),
        feasible_nodes: feasible,
        nodes,
        skipped_filters: prepared.skipped.clone(),
        skipped_scores,
    }
}

/// Filters the pod on one node as kube-scheduler's `RunFilterPluginsWithNominatedPods`: when pods of priority at
/// least the pod's are nominated to the node, first on a copy holding them too (so the pod does not take the room
/// kept for them), then on the node as it is (affinity to a nominated pod must not count); it fits only if both
/// pass. The node is the snapshot's own, or a preemption dry run's copy with pods removed or put back.
///
/// kube-scheduler keeps the PreFilter state of the node's changed pods up to date with each plugin's `AddPod` and
/// `RemovePod` extensions (InterPodAffinity, PodTopologySpread, VolumeRestrictions). Here the cycle's state serves
/// while the checked node differs from the snapshot's in no pod that state counts; otherwise PreFilter runs again
/// on a copy of the cluster holding the checked node, which is what those extensions maintain, by construction.
struct NodeCheck<'c> {
    compiled: &'c Compiled,
    nominator: Nominator<'c>,
    pod: &'c PodInfo,
    /// The cycle's PreFilter state, when it may serve.
    prepared: Option<&'c Prepared<'c>>,
    /// The filters the cycle's PreFilter skipped.
    skipped: &'c [Arc<str>],
    /// The pods that state counts; `None`: none.
    counted: Option<CountedPods<'c>>,
    /// The copy of the cluster, made at the first check that needs it, and the original of the node it holds
    /// changed, put back when another node is checked.
    cluster: Option<(Snapshot, Option<NodeInfo>)>,
}

impl<'c> NodeCheck<'c> {
    fn new(
        compiled: &'c Compiled,
        nominator: Nominator<'c>,
        pod: &'c PodInfo,
        cycle: Option<&'c Prepared<'c>>,
        reuse: bool,
    ) -> NodeCheck<'c> {
        let prepared = cycle.filter(|_| reuse);
        NodeCheck {
            compiled,
            nominator,
            pod,
            prepared,
            skipped: cycle.map(|cycle| cycle.skipped.as_slice()).unwrap_or_default(),
            counted: prepared.and_then(|prepared| CountedPods::of(prepared, pod)),
            cluster: None,
        }
    }

    /// `Ok(None)` when the pod fits on `node`, its first rejection otherwise; `Err` for a PreFilter error.
    fn check(&mut self, node: &NodeInfo) -> Result<Option<Rejection>, String> {
        let nominated = self.nominator.yielded_to(node.name(), self.pod);
        if !nominated.is_empty() {
            let with_nominated = nominated::with_pods(node, nominated);
            if let Some(rejection) = self.check_as_is(&with_nominated)? {
                return Ok(Some(rejection));
            }
        }
        self.check_as_is(node)
    }

    fn check_as_is(&mut self, node: &NodeInfo) -> Result<Option<Rejection>, String> {
        let snapshot = self.nominator.snapshot();
        let reusable = self.prepared.filter(|_| {
            self.counted
                .as_ref()
                .is_none_or(|counted| !changed_pods(snapshot, node).any(|p| counted.counts(p)))
        });
        if let Some(prepared) = reusable {
            return Ok(prepared
                .filters
                .iter()
                .find_map(|(name, filter)| filter.filter(node).map(|verdict| verdict.by(name))));
        }
        let (copy, saved) = self.cluster.get_or_insert_with(|| (snapshot.clone(), None));
        if let Some(previous) = saved.take_if(|s| s.name() != node.name()) {
            copy.set_node(&previous).map_err(|e| e.to_string())?;
        }
        if saved.is_none() {
            *saved = copy.get(node.name()).cloned();
        }
        copy.set_node(node).map_err(|e| e.to_string())?;
        self.compiled.fits_on(copy, self.pod, node.name(), self.skipped)
    }
}

/// The pods a cycle's PreFilter state counts, so that a dry run removing one must run PreFilter again:
/// PodTopologySpread counts pods of the pod's namespace matching a hard constraint's selector; InterPodAffinity
/// counts pods matching the pod's required terms and pods with required anti-affinity; VolumeRestrictions counts
/// pods of the namespace using one of the pod's claims. Every other filter's state depends on the pod alone. Over-approximated: `matchLabelKeys` and the namespaces of affinity terms are not looked
/// at, and with default constraints (the pod has none of its own) every pod of the namespace counts.
struct CountedPods<'p> {
    spread: Option<(&'p str, Option<Vec<Selector>>)>,
    affinity: Option<&'p PodInfo>,
    claims: Option<&'p PodInfo>,
}

impl<'p> CountedPods<'p> {
    /// `None` when the state counts no pods at all.
    fn of(prepared: &Prepared<'_>, pod: &'p PodInfo) -> Option<CountedPods<'p>> {
        let ran = |plugin: &str| prepared.filters.iter().any(|(name, _)| &***name == plugin);
        let counted = CountedPods {
            spread: ran("PodTopologySpread").then(|| (pod.namespace.as_str(), hard_spread_selectors(pod))),
            affinity: ran("InterPodAffinity").then_some(pod),
            claims: ran("VolumeRestrictions").then_some(pod),
        };
        (counted.spread.is_some() || counted.affinity.is_some() || counted.claims.is_some()).then_some(counted)
    }

    fn counts(&self, other: &PodInfo) -> bool {
        self.spread.as_ref().is_some_and(|(namespace, selectors)| {
            other.namespace == *namespace
                && selectors
                    .as_ref()
                    .is_none_or(|selectors| selectors.iter().any(|s| s.matches(other.labels())))
        }) || self.affinity.is_some_and(|pod| {
            other.has_required_anti_affinity
                || pod
                    .required_affinity
                    .iter()
                    .chain(&pod.required_anti_affinity)
                    .any(|term| term.selector.matches(other.labels()))
        }) || self.claims.is_some_and(|pod| {
            other.namespace == pod.namespace
                && pod
                    .pod()
                    .spec
                    .iter()
                    .flat_map(|s| s.volumes.iter().flatten())
                    .filter_map(|v| v.persistent_volume_claim.as_ref())
                    .any(|claim| uses_claim(&other.storage_volumes, &claim.claim_name))
        })
    }
}

/// The selectors of the pod's own `DoNotSchedule` constraints; `None` when the pod has none (default constraints
/// may apply) or one does not parse.
fn hard_spread_selectors(pod: &PodInfo) -> Option<Vec<Selector>> {
    let constraints = pod.pod().spec.as_ref()?.topology_spread_constraints.as_ref()?;
    if constraints.is_empty() {
        return None;
    }
    constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
        .map(|c| Selector::from_label_selector(c.label_selector.as_ref(), &FieldPath::root()).ok())
        .collect()
}

/// The pods in which `node` (a copy) differs from the snapshot's node of that name: those it no longer holds and
/// those it holds in addition.
fn changed_pods<'n>(snapshot: &'n Snapshot, node: &'n NodeInfo) -> Box<dyn Iterator<Item = &'n Arc<PodInfo>> + 'n> {
    let original = snapshot.get(node.name());
    if original.is_some_and(|original| std::ptr::eq(original, node)) {
        return Box::new(std::iter::empty());
    }
    let before = original.map(NodeInfo::pods).unwrap_or_default();
    let after = node.pods();
    let contains = |pods: &[Arc<PodInfo>], pod: &PodInfo| pods.iter().any(|p| p.key == pod.key);
    Box::new(
        before
            .iter()
            .filter(move |p| !contains(after, p))
            .chain(after.iter().filter(move |p| !contains(before, p))),
    )
}

/// Every node is rejected by a PreFilter result.
fn pre_filter_failure(snapshot: &Snapshot, rejection: Rejection, skipped: Vec<Arc<str>>) -> Decision {
    let mut decision = Decision::with_outcome(Outcome::Unschedulable {
        message: pre_filter_message(snapshot.num_nodes(), &rejection),
        plugins: BTreeSet::from([rejection.plugin.clone()]),
        pre_filter: Some(rejection),
        post_filter: None,
    });
    decision.skipped_filters = skipped;
    decision
}
