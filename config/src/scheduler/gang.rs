//! Gang scheduling in kube-scheduler's Workload dialect (GangScheduling), and Ruleplane's gang-as-a-unit run.

// Upstream: `framework/plugins/gangscheduling/gangscheduling.go` and `backend/workloadmanager/` under
// `pkg/scheduler/` of k8s.io/kubernetes@v1.35.4 (behaviour, not code):
//
// - A pod joins a pod group with `spec.workloadRef {name, podGroup, podGroupReplicaKey}`; the group's policy is in
//   the namespace's Workload (`scheduling.k8s.io/v1alpha1`), `basic: {}` or `gang: {minCount}`. Since v1.36 a pod
//   names a PodGroup object instead, which holds the policy (`super::workload_api`, the same rules otherwise).
// - PreEnqueue holds a member until its Workload exists, names the group, and at least `minCount` live pods of
//   the group (any state, any scheduler) are known.
// - Reserve marks a member assumed; Unreserve unmarks it; Permit allows once assumed ∪ bound members reach
//   `minCount`, else the member waits (5 minutes).
//
// Ruleplane schedules a gang as a unit (`docs/scheduler.md`, "Gangs"): the worker pops every queued member of the
// group and runs their cycles back to back; [`GangRun`] decides, member by member, whether the run goes on,
// whether the gang is allowed (every reserved member is then bound), or whether it is rejected (every reserved
// member is unreserved and forgotten at once). No reservation outlives a run, so two gangs never hold partial
// reservations at the same time: no deadlock.

use std::collections::BTreeMap;

pub use super::pod_group::{Dialect, GANG_SCHEDULING, GroupKey};
pub use super::workload_api::{GroupPolicies, WorkloadApi};

/// A pod group's scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupPolicy {
    /// `basic: {}`: every member is scheduled on its own.
    Basic,
    /// `gang: {minCount}`: all or nothing, at least `min_count` members.
    Gang { min_count: usize },
}

/// GangScheduling's PreEnqueue verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreEnqueue {
    /// Not a gang member, a `basic` group's member, or a gang whose quorum of pods exists: the pod is queued.
    Pass,
    /// Held (UnschedulableAndUnresolvable) with kube-scheduler's message, until a member pod or the Workload is
    /// added.
    Gated(String),
}

/// GangScheduling's PreEnqueue (`gangscheduling.go:120-156` of v1.35, the same rules in v1.36 and v1.37 without
/// CompositePodGroup): `policies` are those of the object the group names in `api`, `None` when it is not known;
/// `known_members` counts the group's live pods known to the scheduler, whatever their state or scheduler (the
/// workload manager's `AllPods`).
pub fn pre_enqueue(
    api: WorkloadApi,
    group: &GroupKey,
    policies: Option<&GroupPolicies>,
    known_members: usize,
) -> PreEnqueue {
    let Some(policies) = policies else {
        return PreEnqueue::Gated(api.missing_message(group));
    };
    if let Some(refusal) = policies.refusal() {
        return PreEnqueue::Gated(refusal.to_string());
    }
    match policies.policy(group) {
        None => PreEnqueue::Gated(missing_group_message(group)),
        Some(GroupPolicy::Basic) => PreEnqueue::Pass,
        Some(GroupPolicy::Gang { min_count }) if known_members < min_count => {
            PreEnqueue::Gated("waiting for minCount pods from a gang to appear in scheduling queue".to_string())
        }
        Some(GroupPolicy::Gang { .. }) => PreEnqueue::Pass,
    }
}

/// v1.35's text for a Workload without the pod's group (a PodGroup is its own group: never missing from itself).
fn missing_group_message(group: &GroupKey) -> String {
    format!(
        "pod group {:?} doesn't exist for a workload {:?}",
        group.pod_group, group.workload
    )
}

/// The group's live pods as the scheduler knows them (the workload manager's pod group infos): every pod that
/// names a group, bound or not, of any scheduler, keyed by the caller's pod key `K`. Reservations are not kept
/// here: they live only inside a [`GangRun`] (and as pods being bound, which the caller counts).
#[derive(Clone, Debug)]
pub struct PodGroups<K> {
    /// Group → pod → its state.
    members: BTreeMap<GroupKey, BTreeMap<K, MemberState>>,
    /// Pod → its group, to find it again on deletion.
    group_of: BTreeMap<K, GroupKey>,
}

impl<K> Default for PodGroups<K> {
    fn default() -> PodGroups<K> {
        PodGroups {
            members: BTreeMap::new(),
            group_of: BTreeMap::new(),
        }
    }
}

/// What the groups keep of a member pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberState {
    /// It has a node.
    pub bound: bool,
    /// It has scheduling gates (Coscheduling's PreFilter counts them).
    pub gated: bool,
}

/// A group's members by state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// Live pods of the group (`AllPods`).
    pub known: usize,
    /// Bound to a node (`AssignedPods`).
    pub bound: usize,
    /// With scheduling gates.
    pub gated: usize,
}

impl<K: Clone + Ord> PodGroups<K> {
    /// A pod of `group` seen added or changed. The group of a pod never changes (`workloadRef` is immutable),
    /// nor does a node once set: a member known bound stays bound, so a watch event older than the binding does
    /// not undo [`PodGroups::bound`].
    pub fn apply(&mut self, key: K, group: GroupKey, state: MemberState) {
        let members = self.members.entry(group.clone()).or_default();
        let known_bound = members.get(&key).is_some_and(|known| known.bound);
        members.insert(
            key.clone(),
            MemberState {
                bound: state.bound || known_bound,
                ..state
            },
        );
        self.group_of.insert(key, group);
    }

    /// A member this scheduler has just bound, before the watch shows its node: it counts as bound from now on, as
    /// kube-scheduler's assumed pod counts at Permit (assumed ∪ assigned) until its informer confirms it. Without
    /// this, a member arriving after its gang was bound would find the gang short of its quorum in between.
    pub fn bound(&mut self, key: &K) {
        if let Some(group) = self.group_of.get(key)
            && let Some(state) = self.members.get_mut(group).and_then(|m| m.get_mut(key))
        {
            state.bound = true;
        }
    }

    /// A pod deleted (or terminated). Returns whether it was a member of a group.
    pub fn delete(&mut self, key: &K) -> bool {
        let Some(group) = self.group_of.remove(key) else {
            return false;
        };
        if let Some(members) = self.members.get_mut(&group) {
            members.remove(key);
            if members.is_empty() {
                self.members.remove(&group);
            }
        }
        true
    }

    /// Forgets every pod (before a resync).
    pub fn clear(&mut self) {
        self.members.clear();
        self.group_of.clear();
    }

    /// Whether the pod is known as a member.
    pub fn contains(&self, key: &K) -> bool {
        self.group_of.contains_key(key)
    }

    pub fn counts(&self, group: &GroupKey) -> GroupCounts {
        self.members
            .get(group)
            .map_or_else(GroupCounts::default, |members| GroupCounts {
                known: members.len(),
                bound: members.values().filter(|m| m.bound).count(),
                gated: members.values().filter(|m| m.gated).count(),
            })
    }

    /// The group's members not bound yet, in key order.
    pub fn unbound(&self, group: &GroupKey) -> Vec<K> {
        self.members.get(group).map_or_else(Vec::new, |members| {
            members
                .iter()
                .filter(|(_, m)| !m.bound)
                .map(|(key, _)| key.clone())
                .collect()
        })
    }

    /// The group's members bound or being bound, in key order.
    pub fn bound_members(&self, group: &GroupKey) -> Vec<K> {
        self.members.get(group).map_or_else(Vec::new, |members| {
            members
                .iter()
                .filter(|(_, m)| m.bound)
                .map(|(key, _)| key.clone())
                .collect()
        })
    }

    /// Every group with a live member.
    pub fn groups(&self) -> Vec<GroupKey> {
        self.members.keys().cloned().collect()
    }

    /// The groups of a Workload (every replica), or of a PodGroup.
    pub fn groups_of_workload(&self, dialect: Dialect, namespace: &str, workload: &str) -> Vec<GroupKey> {
        self.members
            .keys()
            .filter(|g| g.dialect == dialect && g.namespace == namespace && g.workload == workload)
            .cloned()
            .collect()
    }
}

/// What a run does after a member's cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<K> {
    /// Schedule the next member.
    Next,
    /// The quorum is met: these members (reserved so far in the run, in order) are allowed and bound; the
    /// members still to try are scheduled one by one, each allowed at once if it fits.
    Allowed(Vec<K>),
    /// The quorum can no longer be met: every member reserved in the run is unreserved and forgotten at once,
    /// and every member of the run fails.
    Rejected(Rejected<K>),
    /// After the quorum, a member that fits once its preemption's victims are gone: its preemption is carried out
    /// on its own, as kube-scheduler's.
    Preempt(K),
    /// Before the quorum, the quorum is met counting members that fit once their preemption's victims are gone:
    /// the run ends; only now are those victims evicted and the preemptors nominated. Every other member of the
    /// run waits (reservations given back), and the group is tried again with a preemptor once its victims are
    /// gone.
    Deferred(Deferred<K>),
}

/// A run ended by a quorum that needs preemption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deferred<K> {
    /// The members reserved in the run: unreserve and forget them; they wait for the next run.
    pub reserved: Vec<K>,
    /// The members whose preemption is carried out.
    pub preemptors: Vec<K>,
    /// Members of the run not tried yet: they wait too.
    pub untried: usize,
}

/// Why a run was rejected and whom it touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected<K> {
    /// The members reserved in the run: unreserve and forget them.
    pub reserved: Vec<K>,
    /// Members that would have fitted by preemption: nothing is evicted for them, their nomination goes.
    pub preemptors: Vec<K>,
    /// The member whose failure made the quorum impossible.
    pub failing: K,
    /// Members of the run not tried yet: they fail with the reserved ones.
    pub untried: usize,
}

/// Ruleplane's gang-as-a-unit run of one group: the members popped together, scheduled back to back.
#[derive(Clone, Debug)]
pub struct GangRun<K> {
    group: GroupKey,
    min_count: usize,
    /// Members placed before the run: bound, or assumed and being bound.
    placed_before: usize,
    /// Members of the run not tried yet.
    untried: usize,
    reserved: Vec<K>,
    /// Members that fit once their preemption's victims are gone (before the quorum); nothing is evicted yet.
    preemptors: Vec<K>,
    allowed: bool,
    /// The group's priority (`GroupPolicies::priority`) and its members bound or being bound before the run: what
    /// v1.37 checks the run's members against before the cycle.
    group_priority: i32,
    scheduled: Vec<K>,
}

impl<K: Clone> GangRun<K> {
    /// A run of `members` members of `group` (a gang of `min_count`), `placed_before` already bound or being
    /// bound.
    pub fn new(group: GroupKey, min_count: usize, placed_before: usize, members: usize) -> GangRun<K> {
        GangRun {
            group,
            min_count,
            placed_before,
            untried: members,
            reserved: Vec::new(),
            preemptors: Vec::new(),
            allowed: false,
            group_priority: 0,
            scheduled: Vec::new(),
        }
    }

    /// The run of a group of this priority whose members `scheduled` are bound or being bound.
    pub fn with_group(mut self, priority: i32, scheduled: Vec<K>) -> GangRun<K> {
        self.group_priority = priority;
        self.scheduled = scheduled;
        self
    }

    /// The group's priority (0 unless [`GangRun::with_group`] said otherwise).
    pub fn group_priority(&self) -> i32 {
        self.group_priority
    }

    /// The group's members bound or being bound before the run.
    pub fn scheduled(&self) -> &[K] {
        &self.scheduled
    }

    pub fn group(&self) -> &GroupKey {
        &self.group
    }

    /// Members reserved (this run) or placed before it: Permit's assumed ∪ assigned.
    pub fn assigned(&self) -> usize {
        self.placed_before + self.reserved.len()
    }

    /// Members placeable: assigned, or fitting once their preemption's victims are gone.
    pub fn ready(&self) -> usize {
        self.assigned() + self.preemptors.len()
    }

    pub fn min_count(&self) -> usize {
        self.min_count
    }

    /// A member was assumed on a node: Reserve, then Permit (`gangscheduling.go:201-250`: assumed ∪ assigned
    /// members below `minCount` wait, at it every waiting member is allowed).
    pub fn reserved(&mut self, member: K) -> Step<K> {
        self.untried = self.untried.saturating_sub(1);
        if self.allowed {
            // After the quorum, each member passes Permit on its own (assumed ∪ assigned ≥ minCount).
            return Step::Allowed(vec![member]);
        }
        self.reserved.push(member);
        if self.ready() >= self.min_count {
            if !self.preemptors.is_empty() {
                return self.defer();
            }
            self.allowed = true;
            return Step::Allowed(std::mem::take(&mut self.reserved));
        }
        Step::Next
    }

    /// A member found no node, but its PostFilter found a preemption (victims on a nominated node). Before the
    /// quorum it counts as placeable and nothing is evicted yet: the run goes on, and ends once the quorum is met
    /// ([`Step::Deferred`]); after the quorum its preemption is carried out alone ([`Step::Preempt`]).
    pub fn preempting(&mut self, member: K) -> Step<K> {
        self.untried = self.untried.saturating_sub(1);
        if self.allowed {
            return Step::Preempt(member);
        }
        self.preemptors.push(member);
        if self.ready() >= self.min_count {
            return self.defer();
        }
        Step::Next
    }

    fn defer(&mut self) -> Step<K> {
        Step::Deferred(Deferred {
            reserved: std::mem::take(&mut self.reserved),
            preemptors: std::mem::take(&mut self.preemptors),
            untried: std::mem::take(&mut self.untried),
        })
    }

    /// A member found no node (or failed otherwise). Before the quorum, the run goes on only while the members
    /// left could still complete it; after it, the member fails alone (kube-scheduler lets the allowed ones bind).
    pub fn failed(&mut self, member: K) -> Step<K> {
        self.untried = self.untried.saturating_sub(1);
        if self.allowed || self.ready() + self.untried >= self.min_count {
            return Step::Next;
        }
        Step::Rejected(Rejected {
            reserved: std::mem::take(&mut self.reserved),
            preemptors: std::mem::take(&mut self.preemptors),
            failing: member,
            untried: self.untried,
        })
    }

    /// The run ran out of members short of the quorum (members outside the run counted at PreEnqueue left
    /// meanwhile): every reservation goes, as for a rejection, and no preemption is carried out (the preemptors
    /// come last). `None` once allowed.
    pub fn finish(&mut self) -> Option<Vec<K>> {
        if self.allowed {
            return None;
        }
        let mut given_back = std::mem::take(&mut self.reserved);
        given_back.append(&mut self.preemptors);
        Some(given_back)
    }

    /// The Normal `GangWaiting` Event's text (Ruleplane's): how many members are ready of how many needed.
    pub(crate) fn waiting_note(&self) -> String {
        waiting_note(&self.group, self.ready(), self.min_count)
    }
}

/// The Normal `GangWaiting` Event's text: `pod group <ns>/<workload>/<group> has <n> of <minCount> members ready`.
pub(crate) fn waiting_note(group: &GroupKey, ready: usize, min_count: usize) -> String {
    format!("pod group {group} has {ready} of {min_count} members ready")
}

/// The Warning `GangRejected` Event's text (Ruleplane's), naming the member that could not be placed.
pub(crate) fn rejected_note(group: &GroupKey, failing: &str, ready: usize, min_count: usize) -> String {
    format!(
        "pod group {group} was rejected: member {failing} is unschedulable ({ready} of {min_count} members could be placed)"
    )
}

/// The Normal `GangWaiting` Event's text (Ruleplane's) for the members of a run that waits for its preemptors'
/// victims to go.
pub(crate) fn preempting_note(group: &GroupKey, preemptors: &[String], ready: usize, min_count: usize) -> String {
    format!(
        "pod group {group} waits for the preemption by {} ({ready} of {min_count} members can be placed once its \
         victims are gone)",
        preemptors.join(", ")
    )
}

/// The FailedScheduling text of a member rejected with its run: the form kube-scheduler gives a member rejected
/// at Permit (`0/1 nodes are available: 1 <reason>.`, as for its timeout "rejected due to timeout after waiting
/// 5m0s at plugin GangScheduling"), with the reason Ruleplane rejects it early; `plugin` is the group's
/// ([`GroupKey::plugin`]).
pub(crate) fn rejected_member_message(failing_member: &str, plugin: &str) -> String {
    format!("0/1 nodes are available: 1 rejected due to unschedulable gang member {failing_member} at plugin {plugin}.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const API: WorkloadApi = WorkloadApi::V1Alpha1;

    fn workload(groups: Value) -> GroupPolicies {
        GroupPolicies::of(API, &json!({"spec": {"podGroups": groups}})).expect("workload")
    }

    fn gang(min_count: u32) -> GroupPolicies {
        workload(json!([{"name": "workers", "policy": {"gang": {"minCount": min_count}}}]))
    }

    /// A member's pod spec (as JSON) in v1.35's dialect.
    fn member(node: Option<&str>, replica: Option<&str>) -> Value {
        let mut reference = json!({"name": "train", "podGroup": "workers"});
        if let Some(replica) = replica {
            reference["podGroupReplicaKey"] = json!(replica);
        }
        let mut spec = json!({"containers": [{"name": "c"}], "workloadRef": reference});
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        spec
    }

    fn key_of(spec: &Value) -> Option<GroupKey> {
        GroupKey::of(API, "ns", None, Some(spec))
    }

    fn group() -> GroupKey {
        key_of(&member(None, None)).expect("a member")
    }

    #[test]
    fn a_pod_names_its_group_with_the_replica_key() {
        assert_eq!(group().to_string(), "ns/train/workers");
        let replica = key_of(&member(None, Some("r1"))).expect("a member");
        assert_eq!(replica.to_string(), "ns/train/workers/r1");
        assert_ne!(replica, group());
        assert_eq!(key_of(&json!({"containers": []})), None);
    }

    #[test]
    fn pre_enqueue_holds_a_member_with_kube_schedulers_messages() {
        assert_eq!(
            pre_enqueue(API, &group(), None, 3),
            PreEnqueue::Gated("waiting for pods's workload \"train\" to appear in scheduling queue".into())
        );
        let other = workload(json!([{"name": "ps", "policy": {"basic": {}}}]));
        assert_eq!(
            pre_enqueue(API, &group(), Some(&other), 3),
            PreEnqueue::Gated("pod group \"workers\" doesn't exist for a workload \"train\"".into())
        );
        assert_eq!(
            pre_enqueue(API, &group(), Some(&gang(3)), 2),
            PreEnqueue::Gated("waiting for minCount pods from a gang to appear in scheduling queue".into())
        );
        assert_eq!(pre_enqueue(API, &group(), Some(&gang(3)), 3), PreEnqueue::Pass);
        let basic = workload(json!([{"name": "workers", "policy": {"basic": {}}}]));
        assert_eq!(pre_enqueue(API, &group(), Some(&basic), 0), PreEnqueue::Pass);
    }

    #[test]
    fn pre_enqueue_since_v1_36_waits_for_the_pod_group_object_then_its_quorum() {
        let api = WorkloadApi::V1Beta1;
        let group = GroupKey::of(
            api,
            "ns",
            None,
            Some(&json!({"schedulingGroup": {"podGroupName": "pg"}})),
        )
        .expect("a member");
        assert_eq!(
            pre_enqueue(api, &group, None, 5),
            PreEnqueue::Gated("waiting for pods's pod group \"pg\" to appear in scheduling queue".into())
        );
        let pod_group = GroupPolicies::of(api, &json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}))
            .expect("pod group");
        assert_eq!(
            pre_enqueue(api, &group, Some(&pod_group), 1),
            PreEnqueue::Gated("waiting for minCount pods from a gang to appear in scheduling queue".into())
        );
        assert_eq!(pre_enqueue(api, &group, Some(&pod_group), 2), PreEnqueue::Pass);
    }

    #[test]
    fn pod_groups_count_known_and_bound_members_and_forget_deleted_ones() {
        let mut groups = PodGroups::default();
        let add = |groups: &mut PodGroups<&str>, key, spec: Value| {
            let bound = spec.get("nodeName").is_some();
            let gated = key == "c";
            groups.apply(key, key_of(&spec).expect("a member"), MemberState { bound, gated });
        };
        add(&mut groups, "a", member(None, None));
        add(&mut groups, "b", member(Some("n1"), None));
        add(&mut groups, "c", member(None, Some("r1")));
        assert_eq!(
            groups.counts(&group()),
            GroupCounts {
                known: 2,
                bound: 1,
                gated: 0
            }
        );
        assert_eq!(groups.unbound(&group()), vec!["a"]);
        assert_eq!(groups.groups_of_workload(Dialect::Workload, "ns", "train").len(), 2);
        assert!(groups.groups_of_workload(Dialect::PodGroup, "ns", "train").is_empty());
        assert_eq!(groups.groups().len(), 2);
        let replica = key_of(&member(None, Some("r1"))).expect("a member");
        assert_eq!(
            groups.counts(&replica),
            GroupCounts {
                known: 1,
                bound: 0,
                gated: 1
            }
        );
        add(&mut groups, "a", member(Some("n2"), None));
        assert_eq!(
            groups.counts(&group()),
            GroupCounts {
                known: 2,
                bound: 2,
                gated: 0
            }
        );
        assert!(groups.delete(&"a"));
        assert!(groups.delete(&"b"));
        assert!(!groups.delete(&"x"));
        assert_eq!(groups.counts(&group()), GroupCounts::default());
    }

    #[test]
    fn a_member_bound_here_counts_as_bound_before_the_watch_shows_it_and_stays_so() {
        let unbound = MemberState::default();
        let mut groups = PodGroups::default();
        groups.apply("a", group(), unbound);
        groups.apply("b", group(), unbound);
        groups.bound(&"a");
        groups.bound(&"x");
        let expected = GroupCounts {
            known: 2,
            bound: 1,
            ..GroupCounts::default()
        };
        assert_eq!(groups.counts(&group()), expected);
        // A watch event from before the binding arrives late: the member stays bound.
        groups.apply("a", group(), unbound);
        assert_eq!(groups.counts(&group()), expected);
        assert_eq!(groups.unbound(&group()), vec!["b"]);
    }

    #[test]
    fn a_run_that_reaches_min_count_allows_every_reserved_member_at_once() {
        let mut run = GangRun::new(group(), 3, 0, 3);
        assert_eq!(run.reserved("a"), Step::Next);
        assert_eq!(
            run.waiting_note(),
            "pod group ns/train/workers has 1 of 3 members ready"
        );
        assert_eq!(run.reserved("b"), Step::Next);
        assert_eq!(run.reserved("c"), Step::Allowed(vec!["a", "b", "c"]));
        assert_eq!(run.finish(), None);
    }

    #[test]
    fn members_bound_before_the_run_count_towards_the_quorum() {
        let mut run = GangRun::new(group(), 3, 2, 1);
        assert_eq!(run.reserved("c"), Step::Allowed(vec!["c"]));
    }

    #[test]
    fn a_failure_that_leaves_the_quorum_reachable_lets_the_run_go_on() {
        let mut run = GangRun::new(group(), 2, 0, 3);
        assert_eq!(run.failed("a"), Step::Next);
        assert_eq!(run.reserved("b"), Step::Next);
        assert_eq!(run.reserved("c"), Step::Allowed(vec!["b", "c"]));
    }

    #[test]
    fn a_failure_that_makes_the_quorum_unreachable_rejects_the_whole_run() {
        let mut run = GangRun::new(group(), 3, 0, 4);
        assert_eq!(run.reserved("a"), Step::Next);
        assert_eq!(run.failed("b"), Step::Next);
        assert_eq!(
            run.failed("c"),
            Step::Rejected(Rejected {
                reserved: vec!["a"],
                preemptors: vec![],
                failing: "c",
                untried: 1,
            })
        );
    }

    #[test]
    fn a_quorum_met_only_by_preemption_ends_the_run_before_anything_is_evicted() {
        let mut run = GangRun::new(group(), 3, 0, 4);
        assert_eq!(run.reserved("a"), Step::Next);
        assert_eq!(run.preempting("b"), Step::Next);
        assert_eq!(run.ready(), 2);
        assert_eq!(run.assigned(), 1, "a preemptor is not assigned: it is only nominated");
        assert_eq!(
            run.reserved("c"),
            Step::Deferred(Deferred {
                reserved: vec!["a", "c"],
                preemptors: vec!["b"],
                untried: 1,
            })
        );
    }

    #[test]
    fn a_run_rejected_after_a_preemptor_evicts_nothing() {
        let mut run = GangRun::new(group(), 3, 0, 3);
        assert_eq!(run.preempting("a"), Step::Next);
        assert_eq!(run.reserved("b"), Step::Next);
        assert_eq!(
            run.failed("c"),
            Step::Rejected(Rejected {
                reserved: vec!["b"],
                preemptors: vec!["a"],
                failing: "c",
                untried: 0,
            })
        );
    }

    #[test]
    fn a_preemptor_completing_the_quorum_defers_the_run_and_one_after_the_quorum_preempts_alone() {
        let mut run = GangRun::new(group(), 2, 0, 2);
        assert_eq!(run.reserved("a"), Step::Next);
        assert_eq!(
            run.preempting("b"),
            Step::Deferred(Deferred {
                reserved: vec!["a"],
                preemptors: vec!["b"],
                untried: 0,
            })
        );
        let mut run = GangRun::new(group(), 1, 0, 2);
        assert_eq!(run.reserved("a"), Step::Allowed(vec!["a"]));
        assert_eq!(run.preempting("b"), Step::Preempt("b"));
    }

    #[test]
    fn a_short_run_gives_back_its_preemptors_too() {
        let mut run = GangRun::new(group(), 3, 0, 2);
        assert_eq!(run.preempting("a"), Step::Next);
        assert_eq!(run.reserved("b"), Step::Next);
        assert_eq!(run.finish(), Some(vec!["b", "a"]));
    }

    #[test]
    fn after_the_quorum_each_member_is_allowed_or_fails_alone() {
        let mut run = GangRun::new(group(), 1, 0, 3);
        assert_eq!(run.reserved("a"), Step::Allowed(vec!["a"]));
        assert_eq!(run.failed("b"), Step::Next);
        assert_eq!(run.reserved("c"), Step::Allowed(vec!["c"]));
    }

    #[test]
    fn a_run_short_of_members_gives_back_its_reservations() {
        let mut run = GangRun::new(group(), 3, 0, 2);
        assert_eq!(run.reserved("a"), Step::Next);
        assert_eq!(run.reserved("b"), Step::Next);
        assert_eq!(run.finish(), Some(vec!["a", "b"]));
    }

    #[test]
    fn the_waiting_note_names_the_preemptors() {
        assert_eq!(
            preempting_note(&group(), &["ns/b".to_string()], 3, 3),
            "pod group ns/train/workers waits for the preemption by ns/b (3 of 3 members can be placed once its \
             victims are gone)"
        );
    }

    #[test]
    fn rejection_texts_name_the_group_and_the_failing_member() {
        assert_eq!(
            rejected_note(&group(), "ns/w-2", 1, 3),
            "pod group ns/train/workers was rejected: member ns/w-2 is unschedulable (1 of 3 members could be placed)"
        );
        assert_eq!(
            rejected_member_message("ns/w-2", group().plugin()),
            "0/1 nodes are available: 1 rejected due to unschedulable gang member ns/w-2 at plugin GangScheduling."
        );
    }
}
