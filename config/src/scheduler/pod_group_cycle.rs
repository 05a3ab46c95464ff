//! kube-scheduler's pod-group scheduling cycle (v1.36+): a Workload API gang's members tried together, the verdict, the members' texts and the PodGroup's condition.

// Upstream (behaviour, not code): `pkg/scheduler/schedule_one_podgroup.go` and
// `framework/plugins/gangscheduling/gangscheduling.go` of k8s.io/kubernetes@v1.36.3 and @v1.37.2.
//
// - v1.36 (`podGroupSchedulingDefaultAlgorithm`): every member is tried, each assumed where it fits (or on the node
//   its own preemption nominated); a member is permitted once the group's assumed ∪ bound members reach `minCount`,
//   and the group is schedulable once one is. A member that fits is otherwise told its Permit status (`pod group is
//   unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no
//   plugin rejected pod`); a member that fits nowhere keeps its own
//   text. A schedulable group that needed a preemption waits for it: `pod group is waiting for preemption to
//   complete`.
// - v1.37: PlacementFeasible is asked before any member and after each one (`minCount (N) cannot be satisfied: S
//   scheduled, R remaining` ends the cycle; `is not yet satisfied` goes on); no member runs PostFilter; an
//   unschedulable group runs the group's PodGroupPostFilter once, whose text is appended to the group's status. A
//   member that fitted is told `pod group is unschedulable, <group status>`; a member never tried is told the group's
//   status as it was before the PodGroupPostFilter (a copy taken before its text was appended).
// - After each cycle the PodGroup gets a condition (`PodGroupScheduled`, `PodGroupInitiallyScheduled` in v1.37):
//   True `Scheduled` with an empty message, or False `Unschedulable` with the group's status; a True condition is
//   never turned False (`updatePodGroupCondition`).

use k8s_openapi::api::core::v1::Pod;

use super::engine::pod_info::priority;
use super::engine::preemption::never_preempts;
use super::engine::snapshot::Snapshot;
use super::engine::{Behaviour, GangCycle};

/// `errPodGroupUnschedulable`: the first reason of an unschedulable group's status.
pub const POD_GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";
/// The Permit status while the quorum is not assumed: GangScheduling's reason, then the framework's.
const WAITING_AT_PERMIT: &str = "waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod";
/// v1.36's status of a schedulable group that needs a preemption.
const WAITING_FOR_PREEMPTION: &str = "pod group is waiting for preemption to complete";

/// What the group's PodGroupPostFilter (v1.37's workload-aware preemption) says of an unschedulable group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupPreemption {
    /// No pod of the cluster has a lower priority than the group's (`No preemption victims found for incoming
    /// preemptor`).
    NoVictims,
    /// The group's pods have `preemptionPolicy: Never`.
    Never,
    /// Lower-priority pods exist: kube-scheduler would simulate evicting them for the whole group, which Ruleplane
    /// does not do (docs/scheduler.md, "Gangs by Kubernetes version").
    NotEvaluated,
    /// A member's nominated node holds a lower-priority pod a preemption is deleting: the group waits for it.
    Ongoing,
    /// Even without every lower-priority pod the group does not fit: the group's status in that cycle.
    Unschedulable(String),
    /// Evicting this many pods makes room for the group (`super::group_preemption`).
    Preempting { victims: usize },
}

impl GroupPreemption {
    /// What it would say for a group whose members are like `member`, on `snapshot` (every node of the cluster is
    /// the preemption's domain).
    pub fn of(snapshot: &Snapshot, member: &Pod) -> GroupPreemption {
        if never_preempts(member) {
            return GroupPreemption::Never;
        }
        let own = priority(member);
        let lower = snapshot
            .list()
            .any(|node| node.pods().iter().any(|pod| pod.priority < own));
        if lower {
            GroupPreemption::NotEvaluated
        } else {
            GroupPreemption::NoVictims
        }
    }

    /// Whether the group waits for victims to go (the PodGroupPostFilter succeeded).
    pub fn found_room(&self) -> bool {
        matches!(self, GroupPreemption::Ongoing | GroupPreemption::Preempting { .. })
    }

    /// The reason appended to the group's status (`PodGroupPostFilter`'s `pod group preemption: ` prefix).
    fn text(&self) -> String {
        let reason = match self {
            GroupPreemption::NoVictims => "No preemption victims found for incoming preemptor".to_string(),
            GroupPreemption::Never => "not eligible due to preemptionPolicy=Never.".to_string(),
            GroupPreemption::NotEvaluated => "not evaluated by Ruleplane (lower-priority pods exist)".to_string(),
            GroupPreemption::Ongoing => "ongoing preemption on nominated nodes".to_string(),
            GroupPreemption::Unschedulable(status) => status.clone(),
            GroupPreemption::Preempting { victims } => {
                format!("found a placement for podgroup, preempting {victims} victims")
            }
        };
        format!("pod group preemption: {reason}")
    }
}

/// The condition kube-scheduler sets on the PodGroup after a cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCondition {
    /// `PodGroupScheduled` (v1.36) or `PodGroupInitiallyScheduled` (v1.37).
    pub type_: &'static str,
    pub status: bool,
    /// `Scheduled`, `Unschedulable` or `SchedulerError`.
    pub reason: &'static str,
    pub message: String,
}

impl GroupCondition {
    /// The condition of a group refused before its cycle (`updatePodGroupConditionWithError`).
    pub fn scheduler_error(behaviour: Behaviour, message: &str) -> Option<GroupCondition> {
        behaviour.pod_group_condition().map(|type_| GroupCondition {
            type_,
            status: false,
            reason: "SchedulerError",
            message: message.to_string(),
        })
    }
}

/// v1.37's check of a pod group before its cycle (`validatePodGroup`, with PodGroupPreemptionPolicy off as by
/// default): every queued member, then every member already scheduled, names the first queued member's scheduler
/// and preemption policy and has the PodGroup's priority (`spec.priority`, 0 when unset). The error's text when
/// one does not: kube-scheduler fails every queued member with it (SchedulerError) and sets it on the PodGroup.
pub fn group_mismatch(
    behaviour: Behaviour,
    group_priority: i32,
    queued: &[&Pod],
    scheduled: &[&Pod],
) -> Option<String> {
    if !behaviour.validates_pod_groups() {
        return None;
    }
    let scheduler_name = |pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.scheduler_name.clone())
            .unwrap_or_default()
    };
    let policy = |pod: &Pod| {
        let policy = pod.spec.as_ref().and_then(|s| s.preemption_policy.clone());
        policy.unwrap_or_else(|| "PreemptLowerPriority".to_string())
    };
    let first = queued.first()?;
    let (name, first_policy) = (scheduler_name(first), policy(first));
    queued.iter().chain(scheduled).find_map(|pod| {
        let own = scheduler_name(pod);
        if own != name {
            return Some(format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {} and {}",
                go_quoted(&own),
                go_quoted(&name)
            ));
        }
        let own = priority(pod);
        if own != group_priority {
            return Some(format!(
                "all pods in a single pod group should have the same priority as the pod group's priority, got \
                 {own} and {group_priority}"
            ));
        }
        let own = policy(pod);
        (own != first_policy).then(|| {
            format!(
                "all pods in a single pod group should have the same preemption policy, got {own} and {first_policy}"
            )
        })
    })
}

/// Go's `%q` of a name the apiserver validated (no character needs more than a backslash).
fn go_quoted(text: &str) -> String {
    format!("{text:?}")
}

/// The group's status after its members' cycles.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Status {
    /// Schedulable: every member that fitted is bound.
    Success,
    /// v1.37's PlacementFeasible: not yet satisfied, more members to try.
    Wait,
    /// Unschedulable with these reasons.
    Unschedulable(Vec<String>),
    /// v1.36: schedulable once a member's preemption is done.
    WaitingForPreemption,
}

/// How the members fared, as the cycle ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CycleVerdict {
    /// Bind every member that fitted.
    Allowed,
    /// v1.36: carry out the members' preemptions; every member waits for the next cycle.
    WaitingForPreemption,
    /// Unschedulable: nothing is kept.
    Rejected,
}

/// What a member that fitted (or was to preempt) is told when the group is not placed, and what the members never
/// tried are told (v1.37), with the PodGroup's condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleTexts {
    pub verdict: CycleVerdict,
    /// For a member that was assumed: its FailedScheduling text (`None` when allowed).
    pub assumed: Option<String>,
    /// For a member never tried (v1.37 ends the cycle early).
    pub untried: Option<String>,
    pub condition: Option<GroupCondition>,
}

/// One pod-group cycle's counts ([`GangCycle::PodGroup`] or [`GangCycle::PlacementFeasible`]).
#[derive(Clone, Debug)]
pub struct PodGroupCycle {
    behaviour: Behaviour,
    min_count: usize,
    /// Assumed or bound: PlacementFeasible's `Scheduled`, Permit's count.
    scheduled: usize,
    /// Members not tried yet: PlacementFeasible's `Remaining`.
    remaining: usize,
    /// A member of this cycle was assumed (v1.37's `anyScheduled`).
    any_scheduled: bool,
    /// A member needed a preemption (v1.36).
    preempting: bool,
    status: Status,
}

impl PodGroupCycle {
    /// A cycle of `members` members of a gang of `min_count`, `placed_before` of its members already bound or
    /// being bound.
    pub fn new(behaviour: Behaviour, min_count: usize, placed_before: usize, members: usize) -> PodGroupCycle {
        let mut cycle = PodGroupCycle {
            behaviour,
            min_count,
            scheduled: placed_before,
            remaining: members,
            any_scheduled: false,
            preempting: false,
            status: Status::Unschedulable(Vec::new()),
        };
        if behaviour.gang_cycle() == GangCycle::PlacementFeasible {
            // Asked before any member: an unreachable quorum is refused with the error first.
            cycle.placement_feasible();
            if let Status::Unschedulable(reasons) = &mut cycle.status {
                reasons.insert(0, POD_GROUP_UNSCHEDULABLE.to_string());
            }
        }
        cycle
    }

    /// Whether the cycle has ended before its last member (v1.37's PlacementFeasible found `minCount` out of reach).
    pub(crate) fn is_over(&self) -> bool {
        self.behaviour.gang_cycle() == GangCycle::PlacementFeasible && matches!(self.status, Status::Unschedulable(_))
    }

    /// A member was assumed on a node (or, in v1.36, on the node its preemption nominated).
    pub fn assumed(&mut self, preempting: bool) {
        self.scheduled += 1;
        self.remaining = self.remaining.saturating_sub(1);
        self.any_scheduled = true;
        self.preempting |= preempting;
        match self.behaviour.gang_cycle() {
            GangCycle::PlacementFeasible => self.placement_feasible(),
            _ if self.scheduled >= self.min_count => {
                // Permit allows this member: the group is schedulable, once any preemption it needs is done.
                self.status = if self.preempting {
                    Status::WaitingForPreemption
                } else {
                    Status::Success
                };
            }
            _ => {}
        }
    }

    /// A member fitted nowhere (it keeps its own text).
    pub fn failed(&mut self) {
        self.remaining = self.remaining.saturating_sub(1);
        if self.behaviour.gang_cycle() == GangCycle::PlacementFeasible {
            self.placement_feasible();
        }
    }

    /// GangScheduling's PlacementFeasible on the counts so far.
    fn placement_feasible(&mut self) {
        let (min, scheduled, remaining) = (self.min_count, self.scheduled, self.remaining);
        self.status = if remaining + scheduled < min {
            Status::Unschedulable(vec![format!(
                "minCount ({min}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
            )])
        } else if scheduled < min {
            Status::Wait
        } else {
            Status::Success
        };
    }

    /// The verdict and texts at the end of the cycle; `preemption` is what v1.37's PodGroupPostFilter says of an
    /// unschedulable group (unused in v1.36, whose members preempted on their own).
    pub fn finish(self, preemption: GroupPreemption) -> CycleTexts {
        let condition = |status: bool, message: String| {
            self.behaviour.pod_group_condition().map(|type_| GroupCondition {
                type_,
                status,
                reason: if status { "Scheduled" } else { "Unschedulable" },
                message,
            })
        };
        let unschedulable = |reasons: &[String]| {
            let mut reasons = reasons.to_vec();
            if reasons.first().map(String::as_str) != Some(POD_GROUP_UNSCHEDULABLE) {
                reasons.insert(0, POD_GROUP_UNSCHEDULABLE.to_string());
            }
            reasons
        };
        match (self.behaviour.gang_cycle(), self.status) {
            (_, Status::Success) if self.any_scheduled => CycleTexts {
                verdict: CycleVerdict::Allowed,
                assumed: None,
                untried: None,
                condition: condition(true, String::new()),
            },
            (_, Status::WaitingForPreemption) => {
                let message = format!("{POD_GROUP_UNSCHEDULABLE}, {WAITING_FOR_PREEMPTION}");
                CycleTexts {
                    verdict: CycleVerdict::WaitingForPreemption,
                    assumed: Some(message.clone()),
                    untried: None,
                    condition: condition(false, message),
                }
            }
            (GangCycle::PlacementFeasible, status) => {
                // The framework needs a member assumed in this cycle for a success; `Wait` cannot outlast the last
                // member but is refused the same way.
                let before = match status {
                    Status::Unschedulable(reasons) => reasons,
                    Status::Wait => vec![format!("minCount ({}) is not yet satisfied", self.min_count)],
                    _ => vec![POD_GROUP_UNSCHEDULABLE.to_string()],
                };
                let untried = before.join(", ");
                let mut after = before;
                after.push(preemption.text());
                let group = after.join(", ");
                CycleTexts {
                    verdict: CycleVerdict::Rejected,
                    assumed: Some(format!("{POD_GROUP_UNSCHEDULABLE}, {group}")),
                    untried: Some(untried),
                    condition: condition(false, group),
                }
            }
            (_, status) => {
                let reasons = match status {
                    Status::Unschedulable(reasons) => unschedulable(&reasons),
                    _ => vec![POD_GROUP_UNSCHEDULABLE.to_string()],
                };
                CycleTexts {
                    verdict: CycleVerdict::Rejected,
                    assumed: Some(format!("{POD_GROUP_UNSCHEDULABLE}, {WAITING_AT_PERMIT}")),
                    untried: None,
                    condition: condition(false, reasons.join(", ")),
                }
            }
        }
    }
}

/// One condition of a PodGroup's `status.conditions`, as read and written.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub last_transition_time: Option<String>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// The PodGroup's conditions with `condition` set (`updatePodGroupCondition`: `meta.SetStatusCondition`, the
/// transition time moving only with the status), or `None` when nothing changes: the same condition already, or a
/// True one a False one must not replace (a later cycle for extra members).
pub fn set_condition(
    existing: &[Condition],
    condition: &GroupCondition,
    generation: Option<i64>,
    now: &str,
) -> Option<Vec<Condition>> {
    let status = if condition.status { "True" } else { "False" };
    let mut conditions = existing.to_vec();
    let new = Condition {
        type_: condition.type_.to_string(),
        status: status.to_string(),
        observed_generation: generation,
        last_transition_time: Some(now.to_string()),
        reason: condition.reason.to_string(),
        message: condition.message.clone(),
    };
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        None => conditions.push(new),
        Some(old) if old.status == "True" && !condition.status => return None,
        Some(old) => {
            let transition = if old.status == new.status {
                old.last_transition_time.clone().or(new.last_transition_time.clone())
            } else {
                new.last_transition_time.clone()
            };
            let updated = Condition {
                last_transition_time: transition,
                ..new
            };
            if *old == updated {
                return None;
            }
            *old = updated;
        }
    }
    Some(conditions)
}

#[cfg(test)]
#[path = "pod_group_cycle_tests.rs"]
mod tests;
