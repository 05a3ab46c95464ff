//! One pod placed on a simulation's snapshot (plain or a gang's member), and what `ruleplane simulate` reports of
//! it (the JSON contract of docs/scheduler.md).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use super::cosched::{self, Chain, NoPodGroup};
use super::engine::snapshot::pod_ref;
use super::engine::{
    Behaviour, Decision, Engine, NodeResult, Nominate, Outcome, PodRef, Preemption, ProfileError, Rejection,
    ScheduleError, Snapshot, SnapshotError,
};

/// Why the input of a simulation is not usable.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// A document is not a `kind` object or a list of them.
    #[error("document {document}: expected a {expected} or a list of them, found {found}")]
    WrongKind {
        /// 1-based document number in the file.
        document: usize,
        /// The kind expected.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// An object does not deserialize as its kind.
    #[error("document {document}: {kind} {name}: {error}")]
    Invalid {
        /// 1-based document number in the file.
        document: usize,
        /// The kind.
        kind: &'static str,
        /// The object's name, if any.
        name: String,
        /// The deserialisation error.
        error: serde_json::Error,
    },
    /// The snapshot cannot be built or updated (unknown node, duplicate pod, bad quantity).
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A pod cannot be evaluated (bad quantity).
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The policy's profile does not build (a loaded policy always does: the loader built one).
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A gang's run named a pod the simulation does not hold (a bug, not an input problem).
    #[error("gang scheduling: {0}")]
    Gang(String),
}

/// The result of a simulation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Simulation {
    /// The policy's scheduler name.
    pub scheduler: String,
    /// The tie-breaking seed used (pass it with `--seed` to repeat the run).
    pub seed: u64,
    /// One placement per pod, in the order they were scheduled.
    pub placements: Vec<Placement>,
}

/// What the scheduler decided for one pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Placement {
    /// `namespace/name`.
    pub pod: String,
    /// The chosen node, or null.
    pub node: Option<String>,
    /// kube-scheduler's FailedScheduling message (without the PostFilter suffix) when not placed.
    pub message: Option<String>,
    /// kube-scheduler's PostFilter text, which its FailedScheduling event appends to `message` after a space
    /// (`no new claims to deallocate, preemption: …`); absent when placed, and when preemption found victims
    /// (kube-scheduler appends nothing then).
    #[serde(rename = "postFilterMessage", skip_serializing_if = "Option::is_none")]
    pub post_filter_message: Option<String>,
    /// What kube-scheduler's DefaultPreemption would do for an unschedulable pod: evict these victims on this
    /// node and nominate the pod to it. The simulation reports it and carries nothing out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionReport>,
    /// With explain: every node of the snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<BTreeMap<String, NodeExplanation>>,
}

/// A preemption the scheduler would make.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionReport {
    /// The node the pod would be nominated to.
    pub node: String,
    /// Pods evicted there (`namespace/name`), most important first.
    pub victims: Vec<String>,
    /// How many of the evictions exceed a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// Lower-priority pods nominated to the node whose nomination would be cleared (`namespace/name`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cleared_nominations: Vec<String>,
}

impl PreemptionReport {
    fn of(preemption: &Preemption) -> PreemptionReport {
        let names = |pods: &[PodRef]| pods.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect();
        PreemptionReport {
            node: preemption.node.to_string(),
            victims: names(&preemption.victims),
            pdb_violations: preemption.pdb_violations,
            cleared_nominations: names(&preemption.lower_nominated_to_clear),
        }
    }
}

/// One node's verdict and scores for one pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeExplanation {
    /// Whether the node passed every filter (absent when the node was not evaluated: the search stopped after
    /// enough feasible nodes (percentageOfNodesToScore), or the pod is gated or could not be evaluated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feasible: Option<bool>,
    /// False when the node was not evaluated (only then is it written).
    #[serde(skip_serializing_if = "is_true")]
    pub evaluated: bool,
    /// Filters in the order they ran, up to the first failure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<FilterOutcome>,
    /// Score plugins (only for feasible nodes when scoring ran).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub scores: BTreeMap<String, ScoreOutcome>,
    /// Σ weighted scores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}

/// One filter's result on a node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FilterOutcome {
    /// Plugin (or declarative filter) name.
    pub plugin: String,
    /// `Success`, `Skip` (PreFilter said the filter does not apply), `Unschedulable` or
    /// `UnschedulableAndUnresolvable`.
    pub code: String,
    /// Reasons of a failure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// One score plugin's result on a node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScoreOutcome {
    /// The plugin's score.
    pub raw: i64,
    /// After the plugin's normalisation (0–100).
    pub normalized: i64,
    /// The plugin's weight.
    pub weight: i64,
    /// normalized × weight.
    pub weighted: i64,
}

/// The engine and the snapshot a simulation places pods with.
pub(super) struct Placer {
    pub(super) engine: Engine,
    pub(super) snapshot: Snapshot,
    pub(super) filters: Vec<String>,
    pub(super) explain: bool,
}

impl Placer {
    pub(super) fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub(super) fn snapshot_mut(&mut self) -> &mut Snapshot {
        &mut self.snapshot
    }

    /// The policy's PostFilter chain as Coscheduling's texts need it.
    pub(super) fn chain(&self, reject_percentage: i32) -> Chain {
        Chain::of(self.engine.post_filters(), reject_percentage)
    }

    /// Which kube-scheduler minor the simulation behaves as.
    pub(super) fn behaviour(&self) -> Behaviour {
        self.engine.behaviour()
    }

    /// One cycle for `pod`, and every node's verdict with explain.
    pub(super) fn decide(
        &mut self,
        pod: &Pod,
    ) -> Result<(Decision, Option<BTreeMap<String, NodeExplanation>>), SimulateError> {
        self.decide_as(pod, false)
    }

    /// One cycle for `pod`, a member of a Workload API gang or not (`Engine::schedule_gang_member`).
    pub(super) fn decide_as(
        &mut self,
        pod: &Pod,
        workload_gang: bool,
    ) -> Result<(Decision, Option<BTreeMap<String, NodeExplanation>>), SimulateError> {
        let decision = if workload_gang {
            self.engine.schedule_gang_member(&self.snapshot, pod)?
        } else {
            self.engine.schedule(&self.snapshot, pod)?
        };
        let nodes = self
            .explain
            .then(|| explain_nodes(&self.snapshot, &decision, &self.filters));
        Ok((decision, nodes))
    }

    /// Accounts `pod` on `node` (Reserve): the next decision sees it.
    pub(super) fn assume(&mut self, pod: &Pod, node: &str) -> Result<(), SimulateError> {
        Ok(self.snapshot.assume(pod, node)?)
    }

    /// A pod placed on its own: placed where its cycle chose.
    pub(super) fn alone(&mut self, pod: &Pod) -> Result<Placement, SimulateError> {
        let (decision, nodes) = self.decide(pod)?;
        if let Some(node) = decision.chosen() {
            self.snapshot.assume(pod, node)?;
        }
        record_nominations(&mut self.snapshot, pod, &decision);
        Ok(Placer::placement(pod, &decision, nodes, None))
    }

    /// A labelled pod whose PodGroup is not given: tried like a pod of no group, then decided by Coscheduling
    /// (`cosched::without_pod_group`), as the worker decides it.
    pub(super) fn without_pod_group(&mut self, pod: &Pod) -> Result<Placement, SimulateError> {
        let (decision, nodes) = self.decide(pod)?;
        let verdict = cosched::without_pod_group(
            decision.chosen().is_some(),
            decision.event_message().unwrap_or_default(),
            decision.post_filter(),
        );
        Ok(match verdict {
            NoPodGroup::RejectedAtPermit => {
                // Rejected at Permit: the node it was assumed on is not kept, and its nomination goes.
                let mut placement = self.held(pod, cosched::POD_GROUP_NOT_FOUND.to_string(), true);
                placement.nodes = nodes;
                placement
            }
            NoPodGroup::Unschedulable { .. } => {
                record_nominations(&mut self.snapshot, pod, &decision);
                let reason = Some(cosched::CAN_NOT_FIND_POD_GROUP.to_string());
                Placer::placement(pod, &decision, nodes, reason)
            }
        })
    }

    /// A pod not placed, told `message` whole (held, or rejected with its gang); its nomination cleared when
    /// `clear_nomination`.
    pub(super) fn held(&mut self, pod: &Pod, message: String, clear_nomination: bool) -> Placement {
        if clear_nomination {
            self.snapshot.nominate(pod, None);
        }
        Placement {
            pod: pod_ref(pod),
            node: None,
            message: Some(message),
            post_filter_message: None,
            preemption: None,
            nodes: None,
        }
    }

    /// What a cycle decided for `pod`, with Coscheduling's PostFilter `reason` after the chain's (see
    /// `cosched::with_post_filter_reason`).
    pub(super) fn placement(
        pod: &Pod,
        decision: &Decision,
        nodes: Option<BTreeMap<String, NodeExplanation>>,
        reason: Option<String>,
    ) -> Placement {
        let message = decision.message().map(str::to_string);
        let post_filter = decision.post_filter();
        let post_filter_message = match (&message, reason) {
            (Some(message), Some(reason)) => {
                let whole = cosched::with_post_filter_reason(
                    decision.event_message().unwrap_or_default(),
                    post_filter,
                    Some(reason),
                );
                whole
                    .strip_prefix(message.as_str())
                    .map(str::trim_start)
                    .filter(|rest| !rest.is_empty())
                    .map(str::to_string)
            }
            _ => post_filter.and_then(|p| p.message.clone()),
        };
        Placement {
            pod: pod_ref(pod),
            node: decision.chosen().map(str::to_string),
            message,
            post_filter_message,
            preemption: post_filter
                .and_then(|p| p.preemption.as_ref())
                .map(PreemptionReport::of),
            nodes,
        }
    }
}

/// What a failed cycle did to the nominator, seen by the next decisions: the pod nominated (or its nomination
/// dropped), and the lower nominations preemption cleared on the chosen node.
pub(super) fn record_nominations(snapshot: &mut Snapshot, pod: &Pod, decision: &Decision) {
    let Some(post_filter) = decision.post_filter() else {
        return;
    };
    match &post_filter.nominate {
        Nominate::Set(node) => snapshot.nominate(pod, Some(node)),
        Nominate::Clear => snapshot.nominate(pod, None),
        Nominate::Leave => {}
    }
    for cleared in post_filter.preemption.iter().flat_map(|p| &p.lower_nominated_to_clear) {
        snapshot.drop_nomination(&cleared.key);
    }
}

fn explain_nodes(snapshot: &Snapshot, decision: &Decision, filters: &[String]) -> BTreeMap<String, NodeExplanation> {
    // A PreFilter rejection (or a pod feature the engine does not evaluate) rejects every node at once.
    let pre_filter = match &decision.outcome {
        Outcome::Unschedulable { pre_filter, .. } => pre_filter.as_ref(),
        _ => None,
    };
    snapshot
        .list()
        .map(|info| {
            let explanation = match (decision.node(info.name()), pre_filter) {
                (Some(result), _) => explain_node(result, decision, filters),
                (None, Some(rejection)) => NodeExplanation {
                    feasible: Some(false),
                    evaluated: true,
                    filters: vec![rejected_by(rejection)],
                    scores: BTreeMap::new(),
                    total: None,
                },
                (None, None) => NodeExplanation {
                    feasible: None,
                    evaluated: false,
                    filters: Vec::new(),
                    scores: BTreeMap::new(),
                    total: None,
                },
            };
            (info.name().to_string(), explanation)
        })
        .collect()
}

fn rejected_by(rejection: &Rejection) -> FilterOutcome {
    FilterOutcome {
        plugin: rejection.plugin.to_string(),
        code: rejection.code.as_str().to_string(),
        reasons: rejection.reasons.iter().map(|r| r.to_string()).collect(),
    }
}

fn explain_node(result: &NodeResult, decision: &Decision, filters: &[String]) -> NodeExplanation {
    let mut outcomes = Vec::new();
    for name in filters {
        let skipped = decision.skipped_filters.iter().any(|s| &**s == name);
        match &result.rejection {
            Some(rejection) if &*rejection.plugin == name => {
                outcomes.push(rejected_by(rejection));
                break;
            }
            _ => outcomes.push(FilterOutcome {
                plugin: name.clone(),
                code: if skipped { "Skip" } else { "Success" }.to_string(),
                reasons: Vec::new(),
            }),
        }
    }
    NodeExplanation {
        feasible: Some(result.rejection.is_none()),
        evaluated: true,
        filters: outcomes,
        scores: result
            .scores
            .iter()
            .map(|s| {
                (
                    s.plugin.to_string(),
                    ScoreOutcome {
                        raw: s.raw,
                        normalized: s.normalized,
                        weight: s.weight,
                        weighted: s.weighted,
                    },
                )
            })
            .collect(),
        total: result.total,
    }
}

fn is_true(value: &bool) -> bool {
    *value
}
