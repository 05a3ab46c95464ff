//! v1.37's workload-aware preemption (DefaultPreemption's PodGroupPostFilter): the victims a Workload API gang needs, over the whole cluster.

// Upstream (behaviour, not code): `framework/preemption/podgrouppreemption.go`, `types.go` (victims as units) and
// `util.go` (`MoreImportantVictim`, `FilterVictimsWithPDBViolation`) of k8s.io/kubernetes@v1.37.2, called from
// `schedule_one_podgroup.go` (`podGroupCycle`) when a group's cycle ends unschedulable.
//
// Every pod of the cluster below the group's priority is a potential victim, alone or, for a PodGroup with
// `disruptionMode: {all: {}}`, with every scheduled pod of its group as one unit (the group's priority). All of them
// are removed, and the group's cycle runs again on what is left; if it fails, so does the preemption. Otherwise
// the victims are given back one unit at a time, the most important first (PDB-violating units before the others):
// a unit stays when every member still fits on the node the cycle proposed it, each member assumed in turn;
// otherwise it is a victim. Every member the cycle placed is nominated to its node.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::engine::pod_info::PodInfo;
use super::engine::preemption::{CompiledPdbs, compare_start, never_preempts};
use super::engine::snapshot::{Snapshot, pod_ref};
use super::engine::{Engine, ScheduleError};
use super::pod_group_cycle::{GroupPreemption, PodGroupCycle};

/// What v1.37 knows of the PodGroups whose members may be victims: by namespace and name, the group's priority and
/// whether its pods are disrupted together.
pub type VictimGroups = BTreeMap<(String, String), VictimGroup>;

/// A PodGroup as a source of victims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VictimGroup {
    /// `PodGroupPriority` (`spec.priority`, 0 when unset): the priority of each of its pods as a victim.
    pub priority: i32,
    /// `disruptionMode: {all: {}}`: its scheduled pods are evicted together or not at all.
    pub all: bool,
}

/// The gang preempting: its members in the cycle's order, its quorum and priority.
pub struct Preemptor<'a> {
    pub members: &'a [&'a Pod],
    pub min_count: usize,
    /// Members bound or being bound before the cycle.
    pub placed_before: usize,
    pub priority: i32,
}

/// The preemption's plan when it found room: the pods to evict, and the node each placed member is nominated to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupVictims {
    /// `namespace/name` of each pod to evict, the most important unit first.
    pub victims: Vec<String>,
    /// `namespace/name` of a member → its node.
    pub nominations: Vec<(String, String)>,
    /// Pods evicted although a PodDisruptionBudget does not allow it.
    pub pdb_violations: usize,
}

/// One preemption unit: a pod, or a PodGroup's scheduled pods.
struct Unit {
    pods: Vec<Arc<PodInfo>>,
    priority: i32,
    /// Ranked as a group (`victimRank`: a pod of a PodGroup counts as one too).
    group: bool,
}

impl Unit {
    fn earliest_start(&self) -> Option<k8s_openapi::jiff::Timestamp> {
        self.pods
            .iter()
            .map(|p| p.start_time)
            .min_by(|a, b| compare_start(*a, *b))
            .flatten()
    }
}

/// `MoreImportantVictim`: higher priority, then a group before a pod, then more pods, then the earlier start.
fn more_important_first(a: &Unit, b: &Unit) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| b.group.cmp(&a.group))
        .then_with(|| b.pods.len().cmp(&a.pods.len()))
        .then_with(|| compare_start(a.earliest_start(), b.earliest_start()))
}

/// The group a pod names in v1.37's Workload API (`spec.schedulingGroup.podGroupName`).
fn pod_group_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.scheduling_group.as_ref()?.pod_group_name.as_deref()
}

/// The potential victims below `priority` (`getCrossNodesVictims`, then `isPreemptionAllowed`), in the cluster's
/// node order.
fn potential_victims(snapshot: &Snapshot, groups: &VictimGroups, priority: i32) -> Vec<Unit> {
    let mut seen_groups: BTreeSet<(String, String)> = BTreeSet::new();
    let mut units = Vec::new();
    for node in snapshot.list() {
        for pod in node.pods() {
            let group = pod_group_of(pod.pod())
                .map(|name| (pod.namespace.clone(), name.to_string()))
                .and_then(|key| groups.get(&key).map(|group| (key, *group)));
            let unit = match group {
                Some((key, group)) if group.all => {
                    if !seen_groups.insert(key.clone()) {
                        continue;
                    }
                    let pods = snapshot
                        .list()
                        .flat_map(|n| n.pods().iter())
                        .filter(|p| p.namespace == key.0 && pod_group_of(p.pod()) == Some(key.1.as_str()))
                        .cloned()
                        .collect();
                    Unit {
                        pods,
                        priority: group.priority,
                        group: true,
                    }
                }
                Some((_, group)) => Unit {
                    pods: vec![pod.clone()],
                    priority: group.priority,
                    group: true,
                },
                None => Unit {
                    pods: vec![pod.clone()],
                    priority: pod.priority,
                    group: false,
                },
            };
            if unit.priority < priority {
                units.push(unit);
            }
        }
    }
    units
}

/// The group's cycle on `snapshot` without PostFilter (`podGroupSchedulingFunc`): each member in order, assumed
/// where it fits while PlacementFeasible lets the cycle go on. The members placed and their nodes, or the group's
/// status text when it is not schedulable. The assumptions stay in `snapshot`.
fn schedule_group(
    engine: &mut Engine,
    snapshot: &mut Snapshot,
    preemptor: &Preemptor<'_>,
) -> Result<Result<Vec<(usize, String)>, String>, ScheduleError> {
    let behaviour = engine.behaviour();
    let mut cycle = PodGroupCycle::new(
        behaviour,
        preemptor.min_count,
        preemptor.placed_before,
        preemptor.members.len(),
    );
    let mut placed = Vec::new();
    for (index, member) in preemptor.members.iter().enumerate() {
        if cycle.is_over() {
            break;
        }
        let decision = engine.schedule_gang_member(snapshot, member)?;
        match decision.chosen() {
            Some(node) => {
                let node = node.to_string();
                if snapshot.assume(member, &node).is_err() {
                    cycle.failed();
                    continue;
                }
                placed.push((index, node));
                cycle.assumed(false);
            }
            None => cycle.failed(),
        }
    }
    let texts = cycle.finish(GroupPreemption::NoVictims);
    Ok(match texts.untried {
        None => Ok(placed),
        Some(status) => Err(status),
    })
}

/// `PodGroupEvaluator.Preempt` for a group whose cycle ended unschedulable on `snapshot`: what its
/// PodGroupPostFilter says, with the victims and nominations when it found room.
pub fn preempt_for_group(
    engine: &mut Engine,
    snapshot: &Snapshot,
    preemptor: &Preemptor<'_>,
    groups: &VictimGroups,
) -> Result<(GroupPreemption, Option<GroupVictims>), ScheduleError> {
    let Some(first) = preemptor.members.first() else {
        return Ok((GroupPreemption::NoVictims, None));
    };
    if never_preempts(first) {
        return Ok((GroupPreemption::Never, None));
    }
    if let Some(nominations) = ongoing(snapshot, preemptor) {
        return Ok((GroupPreemption::Ongoing, Some(nominations)));
    }
    let units = potential_victims(snapshot, groups, preemptor.priority);
    if units.is_empty() {
        return Ok((GroupPreemption::NoVictims, None));
    }
    let mut work = snapshot.clone();
    for unit in &units {
        for pod in &unit.pods {
            let _ = work.remove_pod(&pod.key);
        }
    }
    let mut trial = work.clone();
    let placed = match schedule_group(engine, &mut trial, preemptor)? {
        Ok(placed) => placed,
        Err(status) => return Ok((GroupPreemption::Unschedulable(status), None)),
    };
    let mut units = units;
    units.sort_by(more_important_first);
    let pdbs = CompiledPdbs::new(snapshot.pod_disruption_budgets(), engine.behaviour());
    let (violating, non_violating) = pdbs.split_units(units, |unit| &unit.pods);
    let mut evicted: Vec<Unit> = Vec::new();
    let mut pdb_violations = 0;
    let non_violating = non_violating.into_iter().map(|unit| (unit, 0));
    for (unit, violating_pods) in violating.into_iter().chain(non_violating) {
        if reprieved(engine, &mut work, &unit, preemptor, &placed)? {
            continue;
        }
        pdb_violations += violating_pods;
        evicted.push(unit);
    }
    evicted.sort_by(more_important_first);
    let victims = evicted
        .iter()
        .flat_map(|unit| unit.pods.iter().map(|pod| pod_ref(pod.pod())))
        .collect::<Vec<_>>();
    let nominations = placed
        .iter()
        .map(|(index, node)| (pod_ref(preemptor.members[*index]), node.clone()))
        .collect();
    let plan = GroupVictims {
        victims,
        nominations,
        pdb_violations,
    };
    Ok((
        GroupPreemption::Preempting {
            victims: plan.victims.len(),
        },
        Some(plan),
    ))
}

/// Gives `unit` back to `work` and tries every placed member on its node in turn (each assumed after it fits):
/// `true` keeps the unit (it stays in `work`), `false` takes it out again.
fn reprieved(
    engine: &Engine,
    work: &mut Snapshot,
    unit: &Unit,
    preemptor: &Preemptor<'_>,
    placed: &[(usize, String)],
) -> Result<bool, ScheduleError> {
    for pod in &unit.pods {
        let _ = work.add_pod(pod.pod().as_ref().clone());
    }
    let mut trial = work.clone();
    let mut fits = true;
    for (index, node) in placed {
        let member = preemptor.members[*index];
        if !engine.fits_on_node(&trial, member, node)?.unwrap_or(false) {
            fits = false;
            break;
        }
        let _ = trial.assume(member, node);
    }
    if !fits {
        for pod in &unit.pods {
            let _ = work.remove_pod(&pod.key);
        }
    }
    Ok(fits)
}

/// `isOngoingPreemption`: a member's nominated node holds a lower-priority pod being deleted by a preemption; the
/// members keep their nominations.
fn ongoing(snapshot: &Snapshot, preemptor: &Preemptor<'_>) -> Option<GroupVictims> {
    let nominated: BTreeSet<&str> = preemptor
        .members
        .iter()
        .filter_map(|pod| pod.status.as_ref()?.nominated_node_name.as_deref())
        .filter(|node| !node.is_empty())
        .collect();
    let terminating = nominated.iter().any(|node| {
        snapshot.get(node).is_some_and(|info| {
            info.pods()
                .iter()
                .any(|p| p.priority < preemptor.priority && p.terminating_by_preemption)
        })
    });
    terminating.then(|| GroupVictims {
        victims: Vec::new(),
        nominations: preemptor
            .members
            .iter()
            .filter_map(|pod| {
                let node = pod.status.as_ref()?.nominated_node_name.clone()?;
                Some((pod_ref(pod), node))
            })
            .collect(),
        pdb_violations: 0,
    })
}

#[cfg(test)]
#[path = "group_preemption_tests.rs"]
mod tests;
