//! A gang's run from its members' cycles to every member's verdict and text: the one decision the scheduler worker
//! and the offline tools (`simulate`, `test`) share.

// The caller owns the cycles (the worker's run them on its cache and assumes each member there, `simulate` on its
// snapshot): it asks [`GangRunner::next_member`] for the member whose cycle comes next, runs it, and tells the result
// with [`GangRunner::record`]. [`GangRunner::finish`] then says what becomes of every member the run touched
// (bound, given back, told which text, preempting) and which Events the group's members get. Only the I/O stays with
// the caller: binding, publishing, evicting, forgetting reservations.

use std::collections::VecDeque;
use std::fmt::Display;

use k8s_openapi::api::core::v1::Pod;

use super::cosched::{self, PodGroupSpec};
use super::engine::{Behaviour, GangCycle};
use super::gang::{
    Deferred, GangRun, GroupCounts, GroupKey, GroupPolicies, GroupPolicy, PreEnqueue, Rejected, Step, WorkloadApi,
    pre_enqueue, preempting_note, rejected_member_message, rejected_note, waiting_note,
};
use super::pod_group::Dialect;
use super::pod_group_cycle::{CycleVerdict, GroupCondition, GroupPreemption, PodGroupCycle, group_mismatch};

/// What GangScheduling makes of a popped member of a Workload's pod group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A `basic` group's member: scheduled on its own.
    Alone,
    /// Held by PreEnqueue; the `GangWaiting` Event's text (how many members of how many are ready for a gang,
    /// else kube-scheduler's PreEnqueue message).
    Held(String),
    /// Let through: its group runs with this quorum.
    Run { min_count: usize },
}

/// GangScheduling's PreEnqueue for a popped member of `group`, with what the worker tells a held one; `policies`
/// are those of the object the group names in `api` (`None` while it is not known).
pub fn admit(api: WorkloadApi, group: &GroupKey, policies: Option<&GroupPolicies>, counts: GroupCounts) -> Admission {
    // A refused object's text stands: its members are held whatever their count.
    let policy = policies.filter(|p| p.refusal().is_none()).and_then(|p| p.policy(group));
    match (pre_enqueue(api, group, policies, counts.known), policy) {
        (PreEnqueue::Pass, Some(GroupPolicy::Gang { min_count })) => Admission::Run { min_count },
        (PreEnqueue::Pass, _) => Admission::Alone,
        (PreEnqueue::Gated(_), Some(GroupPolicy::Gang { min_count })) => {
            Admission::Held(waiting_note(group, counts.known, min_count))
        }
        (PreEnqueue::Gated(message), _) => Admission::Held(message),
    }
}

/// How one member's cycle ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberCycle {
    /// Assumed on a node (Reserve).
    Reserved,
    /// No node fits, but its PostFilter found victims whose eviction makes room; nothing is evicted yet.
    Preempting,
    /// Failed on its own: its own cycle's text stands.
    Failed,
}

/// Whether the quorum was met, and how the run ended otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunVerdict {
    /// The quorum was met: the allowed members are bound.
    Allowed,
    /// The quorum went out of reach: nothing of the run is kept.
    Rejected,
    /// The quorum needs preemption: the preemptors' victims are evicted, the other members wait.
    Deferred,
    /// The run ran out of members short of the quorum (members counted at PreEnqueue are not in the run).
    Short,
}

/// What a member is told instead of its own cycle's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Told {
    /// Unschedulable with this FailedScheduling text, by the group's plugin; a preemptor's nomination is cleared
    /// (nothing is evicted for it).
    Unschedulable { message: String, clear_nomination: bool },
    /// Waits for the run's preemptors' victims to go (told only with a `GangWaiting` Event).
    Waiting,
    /// Failed before any cycle (v1.37's `validatePodGroup`): a SchedulerError with this text; a nomination is
    /// cleared and the member is retried after its backoff.
    SchedulerError { message: String },
}

/// An Event for a member of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangEvent<K> {
    pub member: K,
    /// Warning, else Normal.
    pub warning: bool,
    /// `GangRejected` or `GangWaiting`.
    pub reason: &'static str,
    pub note: String,
}

/// Every member's fate at the end of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOutcome<K> {
    pub verdict: RunVerdict,
    /// Allowed, in the order Permit allowed them: bind them.
    pub allowed: Vec<K>,
    /// Members reserved in the run and not allowed: their reservations are given back (forgotten) at once.
    pub given_back: Vec<K>,
    /// Members told a gang text instead of their own cycle's, in order (the members that failed on their own keep
    /// their own text and are not listed).
    pub told: Vec<(K, Told)>,
    /// Members whose preemption is carried out: their own cycle's text stands unless they are also in `told`
    /// (v1.36's rejected group: told the group's text, nomination cleared, victims evicted all the same).
    pub preemptions: Vec<K>,
    /// The Events the run's members get, in order.
    pub events: Vec<GangEvent<K>>,
    /// The condition to set on the group's PodGroup (a pod-group cycle, v1.36+).
    pub condition: Option<GroupCondition>,
}

/// One run of a gang: its members' cycles in order, and what becomes of each.
#[derive(Clone, Debug)]
pub struct GangRunner<K> {
    run: GangRun<K>,
    /// Members not tried yet, in order.
    queue: VecDeque<K>,
    /// Members reserved in the run, in order.
    reserved: Vec<K>,
    /// Members whose cycle found a preemption.
    preempting: Vec<K>,
    allowed: Vec<K>,
    preemptions: Vec<K>,
    rejection: Option<Rejected<K>>,
    deferred: Option<Deferred<K>>,
    /// A Workload API gang in v1.36+: kube-scheduler's pod-group cycle decides instead of the run, with what the
    /// group's preemption says should it be unschedulable.
    pod_group: Option<(PodGroupCycle, GroupPreemption)>,
}

impl<K: Clone + PartialEq + Display> GangRunner<K> {
    /// A run of `members` (the popped one first) of a gang of `min_count`, `placed_before` of its members already
    /// bound or being bound.
    pub fn new(group: GroupKey, min_count: usize, placed_before: usize, members: Vec<K>) -> GangRunner<K> {
        GangRunner::of(GangRun::new(group, min_count, placed_before, members.len()), members)
    }

    /// A run already counted (`run`, made for `members.len()` members) of `members`, the popped one first.
    pub fn of(run: GangRun<K>, members: Vec<K>) -> GangRunner<K> {
        GangRunner {
            run,
            queue: members.into(),
            reserved: Vec::new(),
            preempting: Vec::new(),
            allowed: Vec::new(),
            preemptions: Vec::new(),
            rejection: None,
            deferred: None,
            pod_group: None,
        }
    }

    /// The run as `behaviour`'s kube-scheduler schedules the group: for a Workload API gang since v1.36, one
    /// pod-group cycle (`super::pod_group_cycle`), `preemption` being what its PodGroupPostFilter says should the
    /// group be unschedulable; else member by member as v1.35 and Coscheduling.
    pub fn behaving_as(mut self, behaviour: Behaviour, preemption: GroupPreemption) -> GangRunner<K>
    where
        K: Ord,
    {
        if self.run.group().dialect == Dialect::Workload && behaviour.gang_cycle() != GangCycle::PermitWaits {
            // The cycle tries the members in the queue's order of a pod group, not popped first: priority (one for
            // every member of a valid group), then the oldest first, which `namespace/name` stands for here.
            self.queue.make_contiguous().sort();
            let cycle = PodGroupCycle::new(behaviour, self.run.min_count(), self.run.assigned(), self.queue.len());
            self.pod_group = Some((cycle, preemption));
        }
        self
    }

    /// The run refused before any cycle, should `behaviour`'s kube-scheduler refuse the group (v1.37's
    /// `validatePodGroup`, [`group_mismatch`]): every member of the run is told the error, and the PodGroup gets it
    /// as a False `SchedulerError` condition. `priority` is the group's (`GroupPolicies::priority`), `members` the
    /// run's pods in its order and `scheduled` the group's members already bound or being bound.
    pub fn refusal(
        &self,
        behaviour: Behaviour,
        priority: i32,
        members: &[&Pod],
        scheduled: &[&Pod],
    ) -> Option<RunOutcome<K>> {
        if self.run.group().dialect != Dialect::Workload {
            return None;
        }
        let message = group_mismatch(behaviour, priority, members, scheduled)?;
        Some(RunOutcome {
            verdict: RunVerdict::Rejected,
            allowed: Vec::new(),
            given_back: Vec::new(),
            told: self
                .queue
                .iter()
                .map(|member| {
                    let message = message.clone();
                    (member.clone(), Told::SchedulerError { message })
                })
                .collect(),
            preemptions: Vec::new(),
            events: Vec::new(),
            condition: GroupCondition::scheduler_error(behaviour, &message),
        })
    }

    /// The run's counts so far (its group, its quorum, Permit's assumed ∪ assigned).
    pub fn run(&self) -> &GangRun<K> {
        &self.run
    }

    /// Coscheduling's PostFilter reason, should the member `pod_name` about to run find no node: the group's
    /// assigned members are those ready so far in the run (`cosched::post_filter_reason`). `None` without a PodGroup
    /// (the Workload dialect has no PostFilter).
    pub fn post_filter_reason(
        &self,
        pod_group: Option<&PodGroupSpec>,
        pod_name: &str,
        reject_percentage: i32,
    ) -> Option<String> {
        let member = cosched::Member {
            group: self.run.group(),
            pod_name,
            never_preempts: false,
        };
        cosched::post_filter_reason(member, Some(pod_group?), self.run.assigned(), reject_percentage)
    }

    /// The members not tried yet, in the order their cycles come.
    pub fn queued(&self) -> impl Iterator<Item = &K> {
        self.queue.iter()
    }

    /// The member whose cycle comes first (the popped one), before any is recorded.
    pub(crate) fn first_member(&self) -> Option<&K> {
        self.queue.front()
    }

    /// The member whose cycle comes next; `None` once the run has ended or every member was tried.
    pub fn next_member(&mut self) -> Option<K> {
        if self.rejection.is_some() || self.deferred.is_some() {
            return None;
        }
        if self.pod_group.as_ref().is_some_and(|(cycle, _)| cycle.is_over()) {
            return None;
        }
        self.queue.pop_front()
    }

    /// The cycle of the member [`GangRunner::next_member`] gave.
    pub fn record(&mut self, member: K, cycle: MemberCycle) {
        if let Some((group_cycle, _)) = self.pod_group.as_mut() {
            match cycle {
                MemberCycle::Reserved => {
                    self.reserved.push(member);
                    group_cycle.assumed(false);
                }
                MemberCycle::Preempting => {
                    self.preempting.push(member);
                    group_cycle.assumed(true);
                }
                MemberCycle::Failed => group_cycle.failed(),
            }
            return;
        }
        let step = match cycle {
            MemberCycle::Reserved => {
                self.reserved.push(member.clone());
                self.run.reserved(member)
            }
            MemberCycle::Preempting => {
                self.preempting.push(member.clone());
                self.run.preempting(member)
            }
            MemberCycle::Failed => self.run.failed(member),
        };
        match step {
            Step::Next => {}
            Step::Allowed(members) => self.allowed.extend(members),
            Step::Rejected(rejected) => self.rejection = Some(rejected),
            Step::Preempt(member) => self.preemptions.push(member),
            Step::Deferred(deferred) => self.deferred = Some(deferred),
        }
    }

    /// What becomes of every member the run touched, with the group's texts (`docs/scheduler.md`, "Gangs").
    pub fn finish(mut self) -> RunOutcome<K> {
        if self.pod_group.is_some() {
            return self.finish_pod_group();
        }
        let untried: Vec<K> = self.queue.drain(..).collect();
        let group = self.run.group().clone();
        let plugin = group.plugin();
        let min_count = self.run.min_count();
        let waiting = self.run.waiting_note();
        let mut told = Vec::new();
        let mut events = Vec::new();
        let mut preemptions = std::mem::take(&mut self.preemptions);
        let is_preempting = |member: &K| self.preempting.contains(member);
        let event = |member: &K, warning: bool, reason: &'static str, note: &str| GangEvent {
            member: member.clone(),
            warning,
            reason,
            note: note.to_string(),
        };
        let verdict = if let Some(rejected) = self.rejection.take() {
            let failing = rejected.failing.to_string();
            let placed = self.run.ready() + rejected.reserved.len() + rejected.preemptors.len();
            let note = rejected_note(&group, &failing, placed, min_count);
            let message = rejected_member_message(&failing, plugin);
            for member in rejected.reserved.iter().chain(&rejected.preemptors).chain(&untried) {
                told.push((
                    member.clone(),
                    Told::Unschedulable {
                        message: message.clone(),
                        clear_nomination: is_preempting(member),
                    },
                ));
            }
            for member in rejected
                .reserved
                .iter()
                .chain(&rejected.preemptors)
                .chain(&untried)
                .chain([&rejected.failing])
            {
                events.push(event(member, true, "GangRejected", &note));
            }
            RunVerdict::Rejected
        } else if let Some(deferred) = self.deferred.take() {
            let names: Vec<String> = deferred.preemptors.iter().map(ToString::to_string).collect();
            let ready = self.run.ready() + deferred.reserved.len() + deferred.preemptors.len();
            let note = preempting_note(&group, &names, ready, min_count);
            for member in deferred.reserved.iter().chain(&untried) {
                events.push(event(member, false, "GangWaiting", &note));
                told.push((member.clone(), Told::Waiting));
            }
            preemptions.extend(deferred.preemptors);
            RunVerdict::Deferred
        } else if let Some(short) = self.run.finish() {
            let message = format!("0/1 nodes are available: 1 {waiting}.");
            for member in short {
                events.push(event(&member, false, "GangWaiting", &waiting));
                let clear_nomination = is_preempting(&member);
                told.push((
                    member,
                    Told::Unschedulable {
                        message: message.clone(),
                        clear_nomination,
                    },
                ));
            }
            RunVerdict::Short
        } else {
            RunVerdict::Allowed
        };
        // Every reservation before the quorum goes unless the quorum was met; after it each member binds alone.
        let given_back = if verdict == RunVerdict::Allowed {
            Vec::new()
        } else {
            self.reserved
        };
        RunOutcome {
            verdict,
            allowed: self.allowed,
            given_back,
            told,
            preemptions,
            events,
            condition: None,
        }
    }

    /// The end of a pod-group cycle: only FailedScheduling texts (no gang Events) and the PodGroup's condition.
    fn finish_pod_group(mut self) -> RunOutcome<K> {
        let Some((cycle, preemption)) = self.pod_group.take() else {
            unreachable!("a pod-group cycle")
        };
        let texts = cycle.finish(preemption);
        let untried: Vec<K> = self.queue.drain(..).collect();
        let told_as = |message: &Option<String>, clear_nomination: bool| Told::Unschedulable {
            message: message.clone().unwrap_or_default(),
            clear_nomination,
        };
        let mut told = Vec::new();
        let mut preemptions = Vec::new();
        let (verdict, allowed, given_back) = match texts.verdict {
            CycleVerdict::Allowed => (RunVerdict::Allowed, self.reserved, Vec::new()),
            CycleVerdict::WaitingForPreemption => {
                // The preemptors keep their own texts and nominations; the others wait for the next cycle.
                told.extend(
                    self.reserved
                        .iter()
                        .map(|m| (m.clone(), told_as(&texts.assumed, false))),
                );
                preemptions = self.preempting;
                (RunVerdict::Deferred, Vec::new(), self.reserved)
            }
            CycleVerdict::Rejected => {
                // A preemptor is told as a member that fitted and loses its nomination, but its victims go: v1.36's
                // member ran its own PostFilter, whose preemption starts at once, whatever the group's verdict.
                preemptions.clone_from(&self.preempting);
                told.extend(
                    self.reserved
                        .iter()
                        .map(|m| (m.clone(), told_as(&texts.assumed, false))),
                );
                told.extend(
                    self.preempting
                        .iter()
                        .map(|m| (m.clone(), told_as(&texts.assumed, true))),
                );
                told.extend(untried.into_iter().map(|m| (m, told_as(&texts.untried, false))));
                (RunVerdict::Rejected, Vec::new(), self.reserved)
            }
        };
        RunOutcome {
            verdict,
            allowed,
            given_back,
            told,
            preemptions,
            events: Vec::new(),
            condition: texts.condition,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::gang::Dialect;
    use serde_json::json;

    fn group() -> GroupKey {
        GroupKey {
            dialect: Dialect::Workload,
            namespace: "ns".into(),
            workload: "train".into(),
            pod_group: "workers".into(),
            replica_key: String::new(),
        }
    }

    /// Runs `cycles` (member, cycle) through a runner of a gang of `min_count`, as a caller would.
    fn run(min_count: usize, placed_before: usize, cycles: &[(&'static str, MemberCycle)]) -> RunOutcome<&'static str> {
        let members = cycles.iter().map(|(m, _)| *m).collect();
        let mut runner = GangRunner::new(group(), min_count, placed_before, members);
        while let Some(member) = runner.next_member() {
            let cycle = cycles.iter().find(|(m, _)| *m == member).expect("a member").1;
            runner.record(member, cycle);
        }
        runner.finish()
    }

    #[test]
    fn a_gang_that_meets_its_quorum_is_allowed_whole_and_gives_nothing_back() {
        let outcome = run(
            2,
            0,
            &[
                ("a", MemberCycle::Reserved),
                ("b", MemberCycle::Reserved),
                ("c", MemberCycle::Failed),
            ],
        );
        assert_eq!(outcome.verdict, RunVerdict::Allowed);
        assert_eq!(outcome.allowed, ["a", "b"]);
        assert!(outcome.given_back.is_empty() && outcome.told.is_empty() && outcome.events.is_empty());
    }

    #[test]
    fn a_rejected_run_tells_every_sibling_which_member_failed_and_gives_back_every_reservation() {
        let outcome = run(
            4,
            0,
            &[
                ("ns/a", MemberCycle::Reserved),
                ("ns/b", MemberCycle::Preempting),
                ("ns/c", MemberCycle::Failed),
                ("ns/d", MemberCycle::Failed),
                ("ns/e", MemberCycle::Reserved),
            ],
        );
        assert_eq!(outcome.verdict, RunVerdict::Rejected);
        assert!(outcome.allowed.is_empty());
        assert_eq!(outcome.given_back, ["ns/a"]);
        let message = "0/1 nodes are available: 1 rejected due to unschedulable gang member ns/d at plugin \
                       GangScheduling.";
        let told = |clear_nomination| Told::Unschedulable {
            message: message.to_string(),
            clear_nomination,
        };
        // `ns/c` failed on its own (its own text stands); `ns/e` was never tried.
        assert_eq!(
            outcome.told,
            [("ns/a", told(false)), ("ns/b", told(true)), ("ns/e", told(false))]
        );
        let note = "pod group ns/train/workers was rejected: member ns/d is unschedulable (2 of 4 members could be \
                    placed)";
        let warned: Vec<_> = outcome
            .events
            .iter()
            .map(|e| (e.member, e.warning, e.reason, &*e.note))
            .collect();
        assert_eq!(
            warned,
            ["ns/a", "ns/b", "ns/e", "ns/d"].map(|m| (m, true, "GangRejected", note))
        );
    }

    #[test]
    fn a_quorum_met_by_preemption_carries_the_preemption_out_and_the_others_wait() {
        let outcome = run(
            2,
            0,
            &[
                ("ns/a", MemberCycle::Reserved),
                ("ns/b", MemberCycle::Preempting),
                ("ns/c", MemberCycle::Reserved),
            ],
        );
        assert_eq!(outcome.verdict, RunVerdict::Deferred);
        assert_eq!(outcome.given_back, ["ns/a"]);
        assert_eq!(outcome.preemptions, ["ns/b"]);
        assert_eq!(outcome.told, [("ns/a", Told::Waiting), ("ns/c", Told::Waiting)]);
        assert_eq!(
            outcome.events[0].note,
            "pod group ns/train/workers waits for the preemption by ns/b (2 of 2 members can be placed once its \
             victims are gone)"
        );
    }

    #[test]
    fn a_run_short_of_members_tells_them_how_many_are_ready() {
        let outcome = run(
            3,
            0,
            &[("ns/a", MemberCycle::Reserved), ("ns/b", MemberCycle::Preempting)],
        );
        assert_eq!(outcome.verdict, RunVerdict::Short);
        assert_eq!(outcome.given_back, ["ns/a"]);
        let told = |clear_nomination| Told::Unschedulable {
            message: "0/1 nodes are available: 1 pod group ns/train/workers has 2 of 3 members ready.".into(),
            clear_nomination,
        };
        assert_eq!(outcome.told, [("ns/a", told(false)), ("ns/b", told(true))]);
    }

    #[test]
    fn after_the_quorum_a_member_preempts_or_fails_alone() {
        let outcome = run(
            1,
            0,
            &[
                ("c", MemberCycle::Reserved),
                ("a", MemberCycle::Preempting),
                ("b", MemberCycle::Failed),
            ],
        );
        assert_eq!(outcome.verdict, RunVerdict::Allowed);
        assert_eq!(outcome.allowed, ["c"]);
        assert_eq!(outcome.preemptions, ["a"]);
        assert!(outcome.told.is_empty());
    }

    #[test]
    fn admission_holds_a_short_gang_with_the_waiting_note_and_lets_a_basic_group_alone() {
        let api = WorkloadApi::V1Alpha1;
        let workload = GroupPolicies::of(
            api,
            &json!({"spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 3}}},
                                           {"name": "ps", "policy": {"basic": {}}}]}}),
        )
        .expect("workload");
        let counts = |known| GroupCounts {
            known,
            ..GroupCounts::default()
        };
        assert_eq!(
            admit(api, &group(), Some(&workload), counts(2)),
            Admission::Held("pod group ns/train/workers has 2 of 3 members ready".into())
        );
        assert_eq!(
            admit(api, &group(), Some(&workload), counts(3)),
            Admission::Run { min_count: 3 }
        );
        assert_eq!(
            admit(api, &group(), None, counts(3)),
            Admission::Held("waiting for pods's workload \"train\" to appear in scheduling queue".into())
        );
        let basic = GroupKey {
            pod_group: "ps".into(),
            ..group()
        };
        assert_eq!(admit(api, &basic, Some(&workload), counts(0)), Admission::Alone);
    }
}
