//! Gangs in `ruleplane simulate` and `ruleplane test`: the Workloads and PodGroups given, and the members of a pod
//! group placed as the scheduler worker places them, from the same decisions (`gang_run`, `cosched`).

// What stands in for the cluster: the pods given (to place, and existing, bound or not) are the group's live
// pods; no time passes, so a PodGroup backed off (`podGroupBackoffSeconds` > 0) stays backed off for the rest of
// the simulation.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::cosched::{self, Backoffs, Chain, Gate, PodGroupSpec, QueueSort};
use super::engine::pod_info::key_of;
use super::engine::preemption::never_preempts;
use super::engine::snapshot::pod_ref;
use super::gang::{Dialect, GroupKey, GroupPolicies, MemberState, PodGroups, WorkloadApi};
use super::gang_run::{Admission, GangRunner, MemberCycle, RunVerdict, Told, admit};
use super::pod_group_cycle::GroupPreemption;
use super::queue::GroupOrder;
use super::resolved::SchedulerPolicy;
use super::simulate_place::{Placement, Placer, SimulateError, record_nominations};

/// A PodGroup (`scheduling.x-k8s.io/v1alpha1`, scheduler-plugins' CRD) as a simulation reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGroupObject {
    /// `metadata.namespace` (`default` when absent, as for pods).
    pub namespace: String,
    pub name: String,
    /// What Coscheduling reads of it, as the worker reads it ([`PodGroupSpec::of`]).
    pub spec: PodGroupSpec,
}

impl PodGroupObject {
    /// Reads a PodGroup object; a field of the wrong type reads as absent, as in the worker.
    pub fn of(object: &Value) -> PodGroupObject {
        let text = |pointer| object.pointer(pointer).and_then(Value::as_str);
        let created: Option<Time> = object
            .pointer("/metadata/creationTimestamp")
            .and_then(|time| serde_json::from_value(time.clone()).ok());
        PodGroupObject {
            namespace: namespace_or_default(text("/metadata/namespace")),
            name: text("/metadata/name").unwrap_or_default().to_string(),
            spec: PodGroupSpec::of(object).created_at(created.as_ref()),
        }
    }
}

/// A Workload (v1.35) or a PodGroup of the Workload API (`scheduling.k8s.io`, v1.36+) as a simulation reads it:
/// the gang policies it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadObject {
    /// `metadata.namespace` (`default` when absent, as for pods).
    pub namespace: String,
    pub name: String,
    pub policies: GroupPolicies,
}

impl WorkloadObject {
    /// Reads an object of `api`'s policy kind.
    pub fn of(api: WorkloadApi, object: &Value) -> Result<WorkloadObject, serde_json::Error> {
        let text = |pointer| object.pointer(pointer).and_then(Value::as_str);
        Ok(WorkloadObject {
            namespace: namespace_or_default(text("/metadata/namespace")),
            name: text("/metadata/name").unwrap_or_default().to_string(),
            policies: GroupPolicies::of(api, object)?,
        })
    }
}

/// The Workload API groups the pods to simulate name, by `namespace/name`, captured from the pods' objects as they
/// were read: a typed pod has no `workloadRef` (v1.35's field is gone from the typed model of v1.37).
#[derive(Clone, Debug, Default)]
pub struct WorkloadRefs {
    api: WorkloadApi,
    groups: BTreeMap<String, GroupKey>,
}

impl WorkloadRefs {
    /// The groups `pods` (objects, of any kind: those that are no pods name nothing) name in `api`.
    pub fn capture<'a>(api: WorkloadApi, pods: impl IntoIterator<Item = &'a Value>) -> WorkloadRefs {
        let groups = pods
            .into_iter()
            .filter_map(|pod| {
                let text = |pointer| pod.pointer(pointer).and_then(Value::as_str);
                let namespace = namespace_or_default(text("/metadata/namespace"));
                let group = api.group_of(&namespace, pod.get("spec")?)?;
                Some((format!("{namespace}/{}", text("/metadata/name")?), group))
            })
            .collect();
        WorkloadRefs { api, groups }
    }

    /// The API the pods were read in.
    pub fn api(&self) -> WorkloadApi {
        self.api
    }
}

/// Pods without a namespace are in `default` (`pod_ref`); so are the groups they name and the objects given.
fn namespace_or_default(namespace: Option<&str>) -> String {
    namespace.filter(|n| !n.is_empty()).unwrap_or("default").to_string()
}

/// The simulation never moves its clock: a backoff, once started, outlasts it.
const NOW: Duration = Duration::ZERO;

/// What the simulation knows of gangs: the objects given and every pod that names a group.
pub(super) struct Gangs {
    /// The Workload API's objects holding policies (Workloads in v1.35, PodGroups since) by namespace and name;
    /// `None` when the policy disables GangScheduling or none is given: the Workload API is then taken as not
    /// served, and members are placed one by one, as the worker places them without the API (whose apiserver drops
    /// the pods' references).
    workloads: Option<BTreeMap<(String, String), GroupPolicies>>,
    /// The groups the pods name in the Workload API.
    refs: WorkloadRefs,
    /// PodGroups by namespace and name; `None` when the policy disables Coscheduling. A labelled pod whose PodGroup
    /// is not given is a pod whose PodGroup does not exist (`PodGroup not found`).
    pod_groups: Option<BTreeMap<(String, String), PodGroupSpec>>,
    groups: PodGroups<String>,
    /// Every live member by `namespace/name`: v1.37 checks the bound ones before a pod-group cycle.
    member_pods: BTreeMap<String, Pod>,
    backoffs: Backoffs,
    backoff_seconds: i64,
    reject_percentage: i32,
}

/// What becomes of a popped pod before any cycle.
pub(super) enum Popped {
    /// Not a gang member (or a `basic` group's, or its dialect is off): placed on its own.
    Alone,
    /// Held by PreEnqueue or Coscheduling's PreFilter with this text; `clear_nomination` as Coscheduling's.
    Held { message: String, clear_nomination: bool },
    /// Labelled with a PodGroup not given: placed on its own, then decided by `cosched::without_pod_group`.
    WithoutPodGroup,
    /// Its group's run: the popped member first, then the group's other pods still to place, by name.
    Run(Box<GangRunner<String>>, Option<PodGroupSpec>),
}

impl Gangs {
    /// The gangs of `existing` and `pods` (every pod naming a group counts as its live member).
    pub(super) fn new(
        policy: &SchedulerPolicy,
        (workloads, refs): (Vec<WorkloadObject>, WorkloadRefs),
        pod_groups: Vec<PodGroupObject>,
        existing: &[Pod],
        pods: &[Pod],
    ) -> Gangs {
        let workloads = (policy.gang_scheduling() && !workloads.is_empty()).then(|| {
            workloads
                .into_iter()
                .map(|object| ((object.namespace, object.name), object.policies))
                .collect()
        });
        let pod_groups = policy.coscheduling().then(|| {
            pod_groups
                .into_iter()
                .map(|group| ((group.namespace, group.name), group.spec))
                .collect()
        });
        let args = &policy.profile().args.coscheduling;
        let mut gangs = Gangs {
            workloads,
            refs,
            pod_groups,
            groups: PodGroups::default(),
            member_pods: BTreeMap::new(),
            backoffs: Backoffs::default(),
            backoff_seconds: args.backoff_seconds(),
            reject_percentage: args.reject_percentage(),
        };
        // A terminated pod is no live member (the snapshot leaves it out too).
        let live = |pod: &&Pod| {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        };
        for pod in existing.iter().chain(pods).filter(live) {
            if let Some(group) = gangs.group_of(pod) {
                let spec = pod.spec.as_ref();
                let state = MemberState {
                    bound: spec.and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()),
                    gated: spec
                        .and_then(|s| s.scheduling_gates.as_ref())
                        .is_some_and(|g| !g.is_empty()),
                };
                gangs.groups.apply(pod_ref(pod), group, state);
                gangs.member_pods.insert(pod_ref(pod), pod.clone());
            }
        }
        gangs
    }

    /// The group a pod names, when its dialect is on (the Workload API wins, as `GroupKey::of`).
    pub(super) fn group_of(&self, pod: &Pod) -> Option<GroupKey> {
        let namespace = namespace_or_default(pod.metadata.namespace.as_deref());
        let group = match self.refs.groups.get(&pod_ref(pod)) {
            Some(group) => group.clone(),
            None => cosched::group_of(&namespace, pod.metadata.labels.as_ref())?,
        };
        let served = match group.dialect {
            Dialect::Workload => self.workloads.is_some(),
            Dialect::PodGroup => self.pod_groups.is_some(),
        };
        served.then_some(group)
    }

    fn pod_group(&self, group: &GroupKey) -> Option<&PodGroupSpec> {
        self.pod_groups
            .as_ref()?
            .get(&(group.namespace.clone(), group.workload.clone()))
    }

    /// Where Coscheduling's QueueSort puts a pod among those of its priority (`cosched::QueueSort`): a member of a
    /// PodGroup given with a `creationTimestamp` by that time, then `namespace/name`; `None` for any other pod,
    /// which keeps the simulation's order. Every pod is taken as queued when the simulation starts, after the
    /// PodGroups were created, so the members sort first, as in the worker's queue.
    pub(super) fn queue_order(&self, pod: &Pod) -> Option<GroupOrder> {
        let group = self.group_of(pod).filter(|g| g.dialect == Dialect::PodGroup)?;
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        QueueSort::default().order(&group, self.pod_group(&group), name)
    }

    /// GangScheduling's PreEnqueue or Coscheduling's PreFilter for a popped pod, as the worker's `gang_of`;
    /// `queued` says whether another pod (by `namespace/name`) is still to place.
    pub(super) fn popped(&mut self, pod: &Pod, chain: Chain, nodes: usize, queued: impl Fn(&str) -> bool) -> Popped {
        let Some(group) = self.group_of(pod) else {
            return Popped::Alone;
        };
        let counts = self.groups.counts(&group);
        let (min_count, spec) = match group.dialect {
            Dialect::Workload => {
                let policies = self
                    .workloads
                    .as_ref()
                    .and_then(|w| w.get(&(group.namespace.clone(), group.workload.clone())));
                match admit(self.refs.api(), &group, policies, counts) {
                    Admission::Alone => return Popped::Alone,
                    Admission::Held(note) => {
                        return Popped::Held {
                            message: note,
                            clear_nomination: false,
                        };
                    }
                    Admission::Run { min_count } => (min_count, None),
                }
            }
            Dialect::PodGroup => {
                let spec = self.pod_group(&group).cloned();
                let backed_off = self.backoffs.active(&group, NOW);
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let member = cosched::Member {
                    group: &group,
                    pod_name: name,
                    never_preempts: never_preempts(pod),
                };
                match cosched::pre_filter(member, spec.as_ref(), backed_off, counts.into(), Some(chain), nodes) {
                    Gate::Pass { min_member } => (min_member, spec),
                    Gate::NoPodGroup => return Popped::WithoutPodGroup,
                    Gate::Held(held) => {
                        // Coscheduling's PostFilter runs after its PreFilter rejection: the group may back off.
                        self.rejected(&group);
                        return Popped::Held {
                            message: held.message,
                            clear_nomination: held.clear_nomination,
                        };
                    }
                }
            }
        };
        // The run takes the group's other members still to place, as the worker pops those waiting in its queue.
        let key = pod_ref(pod);
        let mut members = vec![key.clone()];
        members.extend(
            self.groups
                .unbound(&group)
                .into_iter()
                .filter(|member| *member != key && queued(member)),
        );
        Popped::Run(Box::new(GangRunner::new(group, min_count, counts.bound, members)), spec)
    }

    /// A PodGroup's run or PreFilter rejected it: it backs off as the worker's `group_rejected`.
    fn rejected(&mut self, group: &GroupKey) {
        let Some(min_member) = self.pod_group(group).map(|spec| spec.min_member) else {
            return;
        };
        let known = self.groups.counts(group).known;
        self.backoffs
            .rejected(group, self.backoff_seconds, known, min_member, NOW);
    }

    /// v1.37's check of a Workload API group before its cycle: every member of the run held with the error when
    /// the group is refused (the worker's `run_gang` asks the same `GangRunner::refusal`).
    fn refusal<'p>(
        &self,
        placer: &mut Placer,
        runner: &GangRunner<String>,
        pod_of: &impl Fn(&str) -> Result<&'p Pod, SimulateError>,
    ) -> Result<Option<Vec<Placement>>, SimulateError> {
        let group = runner.run().group();
        let priority = self
            .workloads
            .as_ref()
            .and_then(|w| w.get(&(group.namespace.clone(), group.workload.clone())))
            .map_or(0, GroupPolicies::priority);
        let members = runner.queued().map(|key| pod_of(key)).collect::<Result<Vec<_>, _>>()?;
        let bound = self.groups.bound_members(group);
        let scheduled: Vec<&Pod> = bound.iter().filter_map(|key| self.member_pods.get(key)).collect();
        let Some(outcome) = runner.refusal(placer.behaviour(), priority, &members, &scheduled) else {
            return Ok(None);
        };
        let placements = outcome
            .told
            .into_iter()
            .map(|(key, told)| {
                let message = match told {
                    Told::SchedulerError { message } | Told::Unschedulable { message, .. } => message,
                    Told::Waiting => String::new(),
                };
                Ok(placer.held(pod_of(&key)?, message, true))
            })
            .collect::<Result<Vec<_>, SimulateError>>()?;
        Ok(Some(placements))
    }

    /// A group's run, member by member on the snapshot, then every member's placement as the run's outcome says
    /// (the worker's `run_gang`), in the order they were decided.
    pub(super) fn run(
        &mut self,
        placer: &mut Placer,
        runner: GangRunner<String>,
        spec: Option<PodGroupSpec>,
        pods: &BTreeMap<String, &Pod>,
    ) -> Result<Vec<Placement>, SimulateError> {
        let group = runner.run().group().clone();
        let pod_of = |key: &str| {
            pods.get(key)
                .copied()
                .ok_or_else(|| SimulateError::Gang(format!("pod {key} is not among the pods to place")))
        };
        // The version's kube-scheduler decides a Workload API gang in one pod-group cycle since v1.36.
        let preemption = match runner.first_member() {
            Some(first) => GroupPreemption::of(placer.snapshot(), pod_of(first)?),
            None => GroupPreemption::NoVictims,
        };
        let mut runner = runner.behaving_as(placer.behaviour(), preemption);
        if let Some(refused) = self.refusal(placer, &runner, &pod_of)? {
            return Ok(refused);
        }
        let workload_gang = group.dialect == Dialect::Workload;
        if let Some(spec) = spec.as_ref().filter(|spec| !spec.min_resources.is_empty())
            && let Some(gap) = cosched::resource_gap(placer.snapshot(), &group, spec)
        {
            // Coscheduling's `minResources` check: every member of the run is rejected with the gap, before any
            // cycle.
            let chain = placer.chain(self.reject_percentage);
            let nodes = placer.snapshot().num_nodes();
            let assigned = runner.run().assigned();
            let mut placements = Vec::new();
            while let Some(key) = runner.next_member() {
                let pod = pod_of(&key)?;
                let member = cosched::Member {
                    group: &group,
                    pod_name: pod.metadata.name.as_deref().unwrap_or_default(),
                    never_preempts: never_preempts(pod),
                };
                let held = cosched::pre_filter_rejection(member, spec, &gap, assigned, Some(chain), nodes);
                placements.push(placer.held(pod, held.message, held.clear_nomination));
            }
            self.rejected(&group);
            return Ok(placements);
        }
        let mut decided: Vec<Placement> = Vec::new();
        while let Some(key) = runner.next_member() {
            let pod = pod_of(&key)?;
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let reason = runner.post_filter_reason(spec.as_ref(), name, self.reject_percentage);
            let (decision, explained) = placer.decide_as(pod, workload_gang)?;
            let cycle = match decision.chosen() {
                Some(node) => {
                    placer.assume(pod, node)?;
                    MemberCycle::Reserved
                }
                None if decision
                    .post_filter()
                    .and_then(|p| p.preemption.as_ref())
                    .is_some_and(|p| !p.victims.is_empty()) =>
                {
                    MemberCycle::Preempting
                }
                None => MemberCycle::Failed,
            };
            record_nominations(placer.snapshot_mut(), pod, &decision);
            decided.push(Placer::placement(pod, &decision, explained, reason));
            runner.record(key, cycle);
        }
        let outcome = runner.finish();
        for key in &outcome.given_back {
            placer.snapshot_mut().remove_pod(&key_of(pod_of(key)?))?;
        }
        for key in &outcome.allowed {
            self.groups.bound(key);
        }
        for (key, told) in outcome.told {
            let pod = pod_of(&key)?;
            let placement = match told {
                Told::Unschedulable {
                    message,
                    clear_nomination,
                } => {
                    let mut held = placer.held(pod, message, clear_nomination);
                    if outcome.preemptions.contains(&key) {
                        // Its preemption went ahead (v1.36): the victims stay in the placement.
                        let own = decided.iter().find(|p| p.pod == key);
                        held.preemption = own.and_then(|own| own.preemption.clone());
                    }
                    held
                }
                Told::SchedulerError { message } => placer.held(pod, message, true),
                Told::Waiting => {
                    // Told only by its `GangWaiting` Event: its text is the placement's message.
                    let note = outcome
                        .events
                        .iter()
                        .find(|event| event.member == key)
                        .map(|event| event.note.clone());
                    placer.held(pod, note.unwrap_or_default(), false)
                }
            };
            match decided.iter_mut().find(|p| p.pod == key) {
                Some(own) => *own = placement,
                // Not tried: the run had ended.
                None => decided.push(placement),
            }
        }
        if outcome.verdict == RunVerdict::Rejected && group.dialect == Dialect::PodGroup {
            self.rejected(&group);
        }
        Ok(decided)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::simulate::{ClusterObjects, Simulation, gangs_of, objects_of_kind, simulate_in};
    use super::*;

    const POLICY: &str = "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: g }\nspec:\n  \
                          schedulerName: g\n";

    /// The tests' Workload API: v1.35's, but for the one test of v1.37's.
    const API: WorkloadApi = WorkloadApi::V1Alpha1;

    fn policy(extra: &str) -> SchedulerPolicy {
        let rules = crate::load_str("p.yaml", &format!("{POLICY}{extra}")).expect("valid policy");
        rules.scheduler_policies().next().expect("one policy").clone()
    }

    fn nodes(cpus: &[(&str, &str)]) -> Vec<k8s_openapi::api::core::v1::Node> {
        let nodes = cpus
            .iter()
            .map(|(name, cpu)| {
                json!({"kind": "Node", "metadata": {"name": name},
                       "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})
            })
            .collect();
        objects_of_kind(nodes, "Node").expect("nodes")
    }

    /// A member of the Workload `train`'s group `workers` asking for `cpu`.
    fn worker(name: &str, cpu: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
               "spec": {"workloadRef": {"name": "train", "podGroup": "workers"},
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})
    }

    /// A member of the PodGroup `ps` asking for `cpu`.
    fn labelled(name: &str, cpu: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns",
                                          "labels": {"scheduling.x-k8s.io/pod-group": "ps"}},
               "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})
    }

    fn gang_objects(documents: Vec<Value>) -> ClusterObjects {
        let (workloads, pod_groups) = gangs_of(documents, API).expect("gang objects");
        ClusterObjects {
            workloads,
            workload_refs: WorkloadRefs::capture(API, []),
            pod_groups,
            ..ClusterObjects::default()
        }
    }

    fn workload(min_count: u32) -> Value {
        json!({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
               "metadata": {"name": "train", "namespace": "ns"},
               "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": min_count}}}]}})
    }

    fn simulate(
        policy: &SchedulerPolicy,
        nodes: Vec<k8s_openapi::api::core::v1::Node>,
        pods: Vec<Value>,
        mut cluster: ClusterObjects,
    ) -> Simulation {
        // The references as the offline commands capture them, in the API of the objects given.
        cluster.workload_refs = WorkloadRefs::capture(cluster.workload_refs.api(), &pods);
        let pods = objects_of_kind(pods, "Pod").expect("pods");
        simulate_in(policy, nodes, Vec::new(), pods, cluster, 1, false).expect("runs")
    }

    /// Each placement as (pod, node, message).
    fn outcomes(simulation: &Simulation) -> Vec<(&str, Option<&str>, Option<&str>)> {
        simulation
            .placements
            .iter()
            .map(|p| (p.pod.as_str(), p.node.as_deref(), p.message.as_deref()))
            .collect()
    }

    #[test]
    fn a_gang_that_fits_is_placed_whole_and_a_pod_of_no_group_is_placed_after_it() {
        let pods = vec![
            worker("w-0", "1"),
            json!({"kind": "Pod", "metadata": {"name": "loner", "namespace": "ns"},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
            worker("w-1", "1"),
        ];
        let result = simulate(
            &policy(""),
            nodes(&[("a", "2"), ("b", "1")]),
            pods,
            gang_objects(vec![workload(2)]),
        );
        let placed: Vec<_> = result.placements.iter().map(|p| p.pod.as_str()).collect();
        // The gang's members run back to back: `w-1` is decided with `w-0`, before `loner`.
        assert_eq!(placed, ["ns/w-0", "ns/w-1", "ns/loner"]);
        assert!(result.placements.iter().all(|p| p.node.is_some()), "{result:?}");
    }

    #[test]
    fn a_gang_with_a_member_that_fits_nowhere_places_none_and_says_which_member_failed() {
        let pods = vec![worker("w-0", "1"), worker("w-1", "1"), worker("w-2", "3")];
        let result = simulate(
            &policy(""),
            nodes(&[("a", "2"), ("b", "2")]),
            pods,
            gang_objects(vec![workload(3)]),
        );
        let sibling = "0/1 nodes are available: 1 rejected due to unschedulable gang member ns/w-2 at plugin \
                       GangScheduling.";
        assert_eq!(
            outcomes(&result),
            [
                ("ns/w-0", None, Some(sibling)),
                ("ns/w-1", None, Some(sibling)),
                ("ns/w-2", None, Some("0/2 nodes are available: 2 Insufficient cpu.")),
            ]
        );
        // The failing member keeps its own PostFilter text; the siblings' reservations were given back, so a pod
        // placed after the gang finds both nodes empty.
        assert!(result.placements[2].post_filter_message.is_some());
        let after = simulate(
            &policy(""),
            nodes(&[("a", "2")]),
            vec![
                worker("w-0", "1"),
                worker("w-1", "3"),
                json!({"kind": "Pod", "metadata": {"name": "big", "namespace": "ns"},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}),
            ],
            gang_objects(vec![workload(2)]),
        );
        assert_eq!(after.placements[2].node.as_deref(), Some("a"));
    }

    #[test]
    fn a_gang_whose_quorum_needs_a_preemption_reports_it_and_its_other_members_wait() {
        // `w-0` fits on the empty node; `w-1` fits only by preempting `low`: the quorum (2) needs the preemption,
        // so the preemptor reports it, and `w-0` gives its room back and waits, as the worker's run ends `Deferred`.
        let mut preemptor = worker("w-1", "2");
        preemptor["spec"]["priority"] = json!(100);
        let mut fits = worker("w-0", "1");
        fits["spec"]["priority"] = json!(100);
        let existing = objects_of_kind(
            vec![json!({"kind": "Pod", "metadata": {"name": "low", "namespace": "ns"},
                        "spec": {"nodeName": "b", "priority": 0,
                                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}})],
            "Pod",
        )
        .expect("existing");
        let mut cluster = gang_objects(vec![workload(2)]);
        cluster.workload_refs = WorkloadRefs::capture(API, [&fits, &preemptor]);
        let pods = objects_of_kind(vec![fits, preemptor], "Pod").expect("pods");
        let result = simulate_in(
            &policy(""),
            nodes(&[("a", "2"), ("b", "2")]),
            existing,
            pods,
            cluster,
            1,
            false,
        )
        .expect("runs");
        assert_eq!(
            outcomes(&result),
            [
                (
                    "ns/w-0",
                    None,
                    Some(
                        "pod group ns/train/workers waits for the preemption by ns/w-1 (2 of 2 members can be placed \
                         once its victims are gone)"
                    )
                ),
                ("ns/w-1", None, Some("0/2 nodes are available: 2 Insufficient cpu.")),
            ]
        );
        let preemption = result.placements[1].preemption.as_ref().expect("w-1 preempts");
        assert_eq!(
            (preemption.node.as_str(), &preemption.victims[..]),
            ("b", &["ns/low".to_string()][..])
        );
    }

    #[test]
    fn a_gang_short_of_members_is_held_with_the_waiting_note_and_without_workloads_members_go_alone() {
        let result = simulate(
            &policy(""),
            nodes(&[("a", "2")]),
            vec![worker("w-0", "1"), worker("w-1", "1")],
            gang_objects(vec![workload(3)]),
        );
        let note = "pod group ns/train/workers has 2 of 3 members ready";
        assert_eq!(
            outcomes(&result),
            [("ns/w-0", None, Some(note)), ("ns/w-1", None, Some(note))]
        );
        // A member that has terminated is no live member: the gang stays short.
        let mut done = worker("w-2", "1");
        done["status"] = json!({"phase": "Succeeded"});
        let raw = [worker("w-0", "1"), worker("w-1", "1")];
        let mut cluster = gang_objects(vec![workload(3)]);
        cluster.workload_refs = WorkloadRefs::capture(API, raw.iter().chain([&done]));
        let existing = objects_of_kind(vec![done], "Pod").expect("existing");
        let pods = objects_of_kind(raw.to_vec(), "Pod").expect("pods");
        let with_done =
            simulate_in(&policy(""), nodes(&[("a", "2")]), existing, pods, cluster, 1, false).expect("runs");
        assert_eq!(with_done.placements[0].message.as_deref(), Some(note));
        // No Workload given: the Workload API is taken as not served, as is `disabledPlugins: [GangScheduling]`.
        for (policy, cluster) in [
            (policy(""), ClusterObjects::default()),
            (
                policy("  disabledPlugins: [GangScheduling]\n"),
                gang_objects(vec![workload(3)]),
            ),
        ] {
            let result = simulate(&policy, nodes(&[("a", "2")]), vec![worker("w-0", "1")], cluster);
            assert_eq!(result.placements[0].node.as_deref(), Some("a"));
        }
    }

    #[test]
    fn a_pod_group_holds_a_short_group_and_places_a_complete_one_whole() {
        let pod_group = |min_member: u32| {
            json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroupList",
                   "items": [{"metadata": {"name": "ps", "namespace": "ns"}, "spec": {"minMember": min_member}}]})
        };
        let short = simulate(
            &policy(""),
            nodes(&[("a", "4")]),
            vec![labelled("ps-0", "1"), labelled("ps-1", "1")],
            gang_objects(vec![pod_group(3)]),
        );
        assert_eq!(
            short.placements[0].message.as_deref(),
            Some(
                "0/1 nodes are available: pre-filter pod ps-0 cannot find enough sibling pods, current pods number: \
                 2, minMember of group: 3. no new claims to deallocate, preemption: 0/1 nodes are available: 1 \
                 Preemption is not helpful for scheduling., PodGroup ns/ps gets rejected due to Pod ps-0 is \
                 unschedulable even after PostFilter"
            )
        );
        assert_eq!(short.placements[1].node, None);
        let whole = simulate(
            &policy(""),
            nodes(&[("a", "4")]),
            vec![labelled("ps-0", "1"), labelled("ps-1", "1")],
            gang_objects(vec![pod_group(2)]),
        );
        assert!(whole.placements.iter().all(|p| p.node.as_deref() == Some("a")));
        // One member too big: the group is rejected, the failing member's text carries Coscheduling's reason.
        let rejected = simulate(
            &policy(""),
            nodes(&[("a", "4")]),
            vec![labelled("ps-0", "1"), labelled("ps-1", "5")],
            gang_objects(vec![pod_group(2)]),
        );
        assert_eq!(
            outcomes(&rejected),
            [
                (
                    "ns/ps-0",
                    None,
                    Some(
                        "0/1 nodes are available: 1 rejected due to unschedulable gang member ns/ps-1 at plugin \
                         Coscheduling."
                    )
                ),
                ("ns/ps-1", None, Some("0/1 nodes are available: 1 Insufficient cpu.")),
            ]
        );
        assert_eq!(
            rejected.placements[1].post_filter_message.as_deref(),
            Some(
                "no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for \
                 scheduling., PodGroup ns/ps gets rejected due to Pod ps-1 is unschedulable even after PostFilter"
            )
        );
    }

    #[test]
    fn of_two_pod_groups_competing_for_room_for_one_the_older_is_placed_whatever_the_pods_order() {
        let group = |name: &str, created: &str| {
            json!({"kind": "PodGroup", "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                   "spec": {"minMember": 2}})
        };
        let member = |name: &str, group: &str| {
            json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns",
                                              "labels": {"scheduling.x-k8s.io/pod-group": group}},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
        };
        let loner = json!({"kind": "Pod", "metadata": {"name": "loner", "namespace": "ns"},
                           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        // The younger group's pods and a pod of no group come first in the file.
        let pods = vec![
            loner,
            member("young-0", "young"),
            member("young-1", "young"),
            member("old-0", "old"),
            member("old-1", "old"),
        ];
        let cluster = gang_objects(vec![
            group("young", "2026-02-01T00:00:00Z"),
            group("old", "2026-01-01T00:00:00Z"),
        ]);
        let result = simulate(&policy(""), nodes(&[("a", "2")]), pods, cluster);
        let order: Vec<(&str, bool)> = result
            .placements
            .iter()
            .map(|p| (p.pod.as_str(), p.node.is_some()))
            .collect();
        assert_eq!(
            order,
            [
                ("ns/old-0", true),
                ("ns/old-1", true),
                ("ns/young-0", false),
                ("ns/young-1", false),
                ("ns/loner", false)
            ]
        );
    }

    #[test]
    fn a_labelled_pod_whose_pod_group_is_not_given_is_told_its_pod_group_is_not_found() {
        let result = simulate(
            &policy(""),
            nodes(&[("a", "2")]),
            vec![labelled("ps-0", "1"), labelled("ps-1", "3")],
            ClusterObjects::default(),
        );
        assert_eq!(
            outcomes(&result),
            [
                ("ns/ps-0", None, Some("0/1 nodes are available: 1 PodGroup not found.")),
                ("ns/ps-1", None, Some("0/1 nodes are available: 1 Insufficient cpu.")),
            ]
        );
        assert_eq!(
            result.placements[1].post_filter_message.as_deref(),
            Some(
                "no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for \
                 scheduling., can not find pod group"
            )
        );
        // `disabledPlugins: [Coscheduling]`: the label means nothing.
        let off = simulate(
            &policy("  disabledPlugins: [Coscheduling]\n"),
            nodes(&[("a", "2")]),
            vec![labelled("ps-0", "1")],
            ClusterObjects::default(),
        );
        assert_eq!(off.placements[0].node.as_deref(), Some("a"));
    }

    #[test]
    fn a_gangs_file_mixes_workloads_and_pod_groups_and_refuses_other_kinds() {
        let (workloads, pod_groups) = gangs_of(
            vec![
                workload(2),
                json!({"kind": "PodGroup", "metadata": {"name": "ps"}, "spec": {"minMember": 3}}),
            ],
            API,
        )
        .expect("reads");
        assert_eq!(workloads.len(), 1);
        assert_eq!(pod_groups[0].namespace, "default");
        assert_eq!(pod_groups[0].spec.min_member, 3);
        let wrong = gangs_of(vec![json!({"kind": "Node", "metadata": {"name": "n"}})], API).unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "document 1: expected a Workload (scheduling.k8s.io/v1alpha1) or PodGroup (scheduling.x-k8s.io/v1alpha1) \
             or a list of them, found a Node"
        );
        // v1.37 does not serve v1.35's Workloads: refused, not silently ignored.
        let old = gangs_of(vec![workload(2)], WorkloadApi::V1Beta1).unwrap_err();
        assert!(
            old.to_string()
                .contains("expected a PodGroup or Workload (scheduling.k8s.io/v1beta1)"),
            "{old}"
        );
    }

    /// v1.37's dialect: members name their PodGroup (`scheduling.k8s.io/v1beta1`), which holds the policy; a
    /// member's `workloadRef` is not read, and a Workload is accepted and ignored.
    #[test]
    fn since_v1_36_members_name_their_pod_group_and_are_placed_whole_or_not_at_all() {
        let api = WorkloadApi::V1Beta1;
        let member = |name: &str, cpu: &str| {
            json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
                   "spec": {"schedulingGroup": {"podGroupName": "train"},
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})
        };
        let objects = |min_count: u32| {
            let (workloads, pod_groups) = gangs_of(
                vec![
                    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": "train", "namespace": "ns"},
                           "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}),
                    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                           "metadata": {"name": "train", "namespace": "ns"},
                           "spec": {"podGroupTemplates": []}}),
                ],
                api,
            )
            .expect("gang objects");
            ClusterObjects {
                workloads,
                workload_refs: WorkloadRefs::capture(api, []),
                pod_groups,
                ..ClusterObjects::default()
            }
        };
        let placed = simulate(
            &policy(""),
            nodes(&[("a", "2")]),
            vec![member("m0", "1"), member("m1", "1")],
            objects(2),
        );
        assert!(
            placed.placements.iter().all(|p| p.node.as_deref() == Some("a")),
            "{placed:?}"
        );
        let short = simulate(&policy(""), nodes(&[("a", "2")]), vec![member("m0", "1")], objects(2));
        assert_eq!(
            outcomes(&short),
            [("ns/m0", None, Some("pod group ns/train has 1 of 2 members ready"))]
        );
        let missing = simulate(
            &policy(""),
            nodes(&[("a", "2")]),
            vec![member("m0", "1")],
            ClusterObjects {
                workloads: vec![
                    WorkloadObject::of(
                        api,
                        &json!({"metadata": {"name": "other", "namespace": "ns"},
                    "spec": {"schedulingPolicy": {"basic": {}}}}),
                    )
                    .expect("reads"),
                ],
                workload_refs: WorkloadRefs::capture(api, []),
                ..ClusterObjects::default()
            },
        );
        assert_eq!(
            outcomes(&missing),
            [(
                "ns/m0",
                None,
                Some("waiting for pods's pod group \"train\" to appear in scheduling queue")
            )]
        );
    }
}
