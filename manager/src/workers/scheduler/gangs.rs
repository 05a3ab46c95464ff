//! The scheduler worker's gangs (Workload and Coscheduling dialects): the Workload API's and the PodGroup watches and the pod groups' members, GangScheduling's PreEnqueue or Coscheduling's PreFilter when a member is popped, and a group's members scheduled back to back as a unit, bound only once all are allowed (decided by `ruleplane_config::scheduler::{gang, cosched}`).

// Why a unit: kube-scheduler v1.35 lets a gang's members hold their reservations at Permit for up to 5 minutes, so
// two gangs competing for the same nodes can each hold part of them and time out together, again and again. Here
// every reservation ends with its run (allowed and bound, or unreserved and forgotten at once), so two gangs never
// hold partial reservations at the same time. The per-member verdicts and messages are kube-scheduler's.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;
use ruleplane_config::KindRef;
use ruleplane_config::scheduler::cosched::{self, Backoffs, Gate, Held, POD_GROUP_API, PodGroupSpec, QueueSort};
use ruleplane_config::scheduler::gang::{
    Dialect, GANG_SCHEDULING, GangRun, GroupKey, GroupPolicies, MemberState, PodGroups, PreEnqueue, WorkloadApi,
    pre_enqueue,
};
use ruleplane_config::scheduler::gang_run::{Admission, admit};
use ruleplane_config::scheduler::queue::{Failure, Place};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::late_kinds::{LateKind, watch_when_served};
use super::queue_loop::Loop;
use super::{PodKey, SchedulingError, now};
use crate::context::WorkerContext;
use crate::watch_hub::{Change, KindKey, SharedWatch};

/// What the loop knows of gangs: the Workload API's objects, the PodGroups and every live pod that names a pod
/// group.
pub(super) struct Gangs {
    /// The Workload API of the server's version: where pods name their groups, which kind holds the policies.
    api: WorkloadApi,
    /// The policy keeps GangScheduling / Coscheduling: their members are gang-scheduled, served or not yet.
    workload_on: bool,
    coscheduling_on: bool,
    /// The Workload API's policy kind (Workloads in v1.35, PodGroups since), watched once the apiserver serves it.
    pub(super) workloads: Option<Arc<SharedWatch>>,
    /// Watched once the apiserver serves PodGroups (scheduler-plugins' CRD), when the policy keeps Coscheduling.
    pub(super) pod_groups: Option<Arc<SharedWatch>>,
    /// The kinds served after the start, as their watches list ([`watch_when_served`]).
    late: Option<mpsc::UnboundedReceiver<LateKind>>,
    groups: PodGroups<PodKey>,
    /// Held pods already told why (one `GangWaiting` Event per pod while it is held, not one per sibling added).
    noted: HashSet<PodKey>,
    /// PodGroup members held by Coscheduling's PreFilter and the message they were told (told again only when it
    /// changes, e.g. `PodGroup not found` then a short count).
    told: HashMap<PodKey, String>,
    /// PodGroups backed off after a rejected run (`podGroupBackoffSeconds`).
    backoffs: Backoffs,
    /// Coscheduling's QueueSort: the PodGroups' last rejections.
    queue_sort: QueueSort,
}

/// What PreEnqueue and the queue make of a popped pod.
pub(super) enum Popped {
    /// Not a gang member (or a `basic` group's): scheduled on its own.
    Alone,
    /// Held by GangScheduling's PreEnqueue.
    Held,
    /// Labelled with a PodGroup that does not exist: scheduled on its own, then decided by Coscheduling's Permit or
    /// PostFilter ([`PodScheduler::without_pod_group`]).
    WithoutPodGroup,
    /// A gang's run: these members (the popped one first) are in flight; a PodGroup's spec in the Coscheduling
    /// dialect.
    Run(Box<GangRun<PodKey>>, Vec<PodKey>, Option<Box<PodGroupSpec>>),
}

/// The group a pod object names in `api`, read without converting the whole pod: its Workload API group's, else
/// its PodGroup's (the Workload API wins, as `GroupKey::of`).
pub(super) fn group_of(api: WorkloadApi, object: &DynamicObject) -> Option<GroupKey> {
    let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
    GroupKey::of(api, namespace, object.metadata.labels.as_ref(), object.data.get("spec"))
}

fn member_state(object: &DynamicObject) -> MemberState {
    MemberState {
        bound: object
            .data
            .pointer("/spec/nodeName")
            .and_then(|n| n.as_str())
            .is_some_and(|n| !n.is_empty()),
        gated: object
            .data
            .pointer("/spec/schedulingGates")
            .and_then(|g| g.as_array())
            .is_some_and(|g| !g.is_empty()),
    }
}

/// Watches `kind` of `api_version` when the apiserver serves it now; else watches it from when it is served
/// ([`watch_when_served`], which sends it on `late`).
async fn watch_if_served(
    ctx: &WorkerContext,
    wanted: KindRef,
    dialect: Dialect,
    late: &mpsc::UnboundedSender<LateKind>,
) -> Option<Arc<SharedWatch>> {
    match ctx.discovery.served(&wanted.api_version, &wanted.kind).await {
        Ok(Some((resource, _))) => return Some(ctx.hub.watch(&resource)),
        Ok(None) => {
            info!("{wanted} is not served (yet): its gang members wait for it, as for a pod group that does not exist")
        }
        Err(error) => warn!(%error, "could not ask whether {wanted} is served: its gang members wait for it"),
    }
    watch_when_served(ctx, wanted, dialect, late.clone());
    None
}

impl Gangs {
    /// The watch of the Workload API's policy kind of the server's version and the PodGroup watch (scheduler-plugins'
    /// CRD, which Ruleplane does not install), each when the policy keeps its plugin; a kind not served yet is
    /// watched once it is. `None` when the policy keeps neither plugin.
    pub(super) async fn start(ctx: &WorkerContext, workload: bool, coscheduling: bool) -> Option<Gangs> {
        if !workload && !coscheduling {
            return None;
        }
        let api = WorkloadApi::of(ctx.kubernetes_version);
        let (found, late) = mpsc::unbounded_channel();
        let watch = async |on: bool, api_version: &str, kind: &str, dialect| {
            let wanted = KindRef {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            };
            if on {
                watch_if_served(ctx, wanted, dialect, &found).await
            } else {
                None
            }
        };
        let workloads = watch(workload, api.api_version(), api.policy_kind(), Dialect::Workload).await;
        let pod_groups = watch(coscheduling, POD_GROUP_API, "PodGroup", Dialect::PodGroup).await;
        Some(Gangs {
            api,
            workload_on: workload,
            coscheduling_on: coscheduling,
            workloads,
            pod_groups,
            late: Some(late),
            groups: PodGroups::default(),
            noted: HashSet::new(),
            told: HashMap::new(),
            backoffs: Backoffs::default(),
            queue_sort: QueueSort::default(),
        })
    }

    /// The receiver of the kinds served after the start (taken once, by the loop).
    pub(super) fn take_late(&mut self) -> Option<mpsc::UnboundedReceiver<LateKind>> {
        self.late.take()
    }

    /// A kind served after the start: watched from now on.
    pub(super) fn served_late(&mut self, kind: LateKind) -> Arc<SharedWatch> {
        let slot = match kind.dialect {
            Dialect::Workload => &mut self.workloads,
            Dialect::PodGroup => &mut self.pod_groups,
        };
        *slot = Some(kind.watch.clone());
        kind.watch
    }

    /// The group a pod object names in the server's Workload API or as a PodGroup member.
    fn group_of(&self, object: &DynamicObject) -> Option<GroupKey> {
        group_of(self.api, object)
    }

    /// The watches to subscribe to and wait for.
    pub(super) fn watches(&self) -> impl Iterator<Item = &Arc<SharedWatch>> {
        self.workloads.iter().chain(&self.pod_groups)
    }

    /// The policies of the object the group names (its Workload, or its PodGroup since v1.36); `None` while it is
    /// not known, as when the API is not served yet.
    fn policies(&self, group: &GroupKey) -> Option<GroupPolicies> {
        let object = self
            .workloads
            .as_ref()?
            .store
            .get(Some(&group.namespace), &group.workload)?;
        GroupPolicies::of(self.api, &object.data).ok()
    }

    fn pod_group(&self, group: &GroupKey) -> Option<PodGroupSpec> {
        let object = self
            .pod_groups
            .as_ref()?
            .store
            .get(Some(&group.namespace), &group.workload)?;
        Some(PodGroupSpec::of(&object.data).created_at(object.metadata.creation_timestamp.as_ref()))
    }

    /// Whether the policy keeps the group's plugin (a member of a dialect that is off is scheduled on its own). A
    /// kind not served yet is no reason to schedule alone: its members wait for their group, as for one missing.
    fn serves(&self, group: &GroupKey) -> bool {
        match group.dialect {
            Dialect::Workload => self.workload_on,
            Dialect::PodGroup => self.coscheduling_on,
        }
    }

    /// Whether the group passes its dialect's gate now (PreEnqueue, or Coscheduling's PreFilter).
    fn passes(&self, group: &GroupKey) -> bool {
        let counts = self.groups.counts(group);
        match group.dialect {
            Dialect::Workload => {
                pre_enqueue(self.api, group, self.policies(group).as_ref(), counts.known) == PreEnqueue::Pass
            }
            Dialect::PodGroup => {
                let member = cosched::Member {
                    group,
                    pod_name: "",
                    never_preempts: false,
                };
                matches!(
                    cosched::pre_filter(member, self.pod_group(group).as_ref(), false, counts.into(), None, 1),
                    Gate::Pass { .. }
                )
            }
        }
    }

    /// Every member from the pod watch's cache. A pod the relist no longer lists was deleted while the watch was
    /// down: what it was told is forgotten too, as its deletion would have (a pod of that name later is told anew).
    pub(super) fn resync(&mut self, pods: &SharedWatch) {
        self.groups.clear();
        pods.store.for_each(|object| {
            if let Some(group) = self.group_of(object).filter(|g| self.serves(g)) {
                self.groups.apply(PodKey::of(object), group, member_state(object));
            }
        });
        self.noted.retain(|key| self.groups.contains(key));
        self.told.retain(|key, _| self.groups.contains(key));
    }

    /// Forgets the last rejection of `groups` whose PodGroup is gone, so they sort by their creation again:
    /// deleted, or not in a relist (deleted while the watch was down).
    fn forget_rejections(&mut self, change: &Change, groups: &[GroupKey]) {
        for group in groups.iter().filter(|group| group.dialect == Dialect::PodGroup) {
            let gone = match change {
                Change::Deleted(_) => true,
                Change::Resync => self.pod_group(group).is_none(),
                Change::Applied(_) => false,
            };
            if gone {
                self.queue_sort.forget(group);
            }
        }
    }

    /// A pod change; returns the group of a member seen for the first time (its siblings may now be complete).
    pub(super) fn on_pod(&mut self, change: &Change) -> Option<GroupKey> {
        match change {
            Change::Applied(object) => {
                let group = self.group_of(object).filter(|g| self.serves(g))?;
                let key = PodKey::of(object);
                let new = !self.groups.contains(&key);
                self.groups.apply(key, group.clone(), member_state(object));
                new.then_some(group)
            }
            Change::Deleted(object) => {
                let key = PodKey::of(object);
                self.noted.remove(&key);
                self.told.remove(&key);
                self.groups.delete(&key);
                None
            }
            Change::Resync => None,
        }
    }

    /// The groups a Workload or PodGroup change concerns (every group after a relist, whose changes are unknown).
    pub(super) fn on_workload(&self, dialect: Dialect, change: &Change) -> Vec<GroupKey> {
        match change.object() {
            Some(object) => self.groups.groups_of_workload(
                dialect,
                object.metadata.namespace.as_deref().unwrap_or_default(),
                object.metadata.name.as_deref().unwrap_or_default(),
            ),
            None => self.groups.groups(),
        }
    }

    /// The group's members not bound yet.
    fn unbound(&self, group: &GroupKey) -> Vec<PodKey> {
        self.groups.unbound(group)
    }
}

impl Loop {
    /// GangScheduling's PreEnqueue for a popped pod and, for a gang member let through, the run of its group: the
    /// other members waiting in the queue are taken with it.
    pub(super) fn gang_of(&mut self, key: &PodKey) -> Popped {
        let Some(gangs) = self.gangs.as_ref() else {
            return Popped::Alone;
        };
        let Some(object) = self.scheduler.cache.pods.get(Some(&key.namespace), &key.name) else {
            return Popped::Alone;
        };
        let Some(group) = gangs.group_of(&object).filter(|g| gangs.serves(g)) else {
            return Popped::Alone;
        };
        if group.dialect == Dialect::PodGroup {
            return self.pod_group_of(key, group);
        }
        let policies = gangs.policies(&group);
        let counts = gangs.groups.counts(&group);
        let min_count = match admit(gangs.api, &group, policies.as_ref(), counts) {
            Admission::Alone => return Popped::Alone,
            Admission::Held(note) => {
                self.hold(key, &object, note);
                return Popped::Held;
            }
            Admission::Run { min_count } => min_count,
        };
        let priority = policies.as_ref().map_or(0, GroupPolicies::priority);
        let (run, members) = self.start_run(key, group, min_count, counts.bound);
        let scheduled = run.scheduled().to_vec();
        Popped::Run(Box::new(run.with_group(priority, scheduled)), members, None)
    }

    /// Coscheduling's PreFilter for a popped member of a PodGroup and, when it passes, its group's run (the same
    /// run as the Workload dialect's).
    fn pod_group_of(&mut self, key: &PodKey, group: GroupKey) -> Popped {
        let Some(gangs) = self.gangs.as_mut() else {
            return Popped::Alone;
        };
        let backed_off = gangs.backoffs.active(&group, now().0);
        let counts = gangs.groups.counts(&group);
        let nodes = self.scheduler.cache.nodes.store.len();
        let spec = gangs.pod_group(&group);
        let never_preempts = self
            .scheduler
            .cache
            .pods
            .get(Some(&key.namespace), &key.name)
            .is_some_and(|object| {
                object.data.pointer("/spec/preemptionPolicy").and_then(|p| p.as_str()) == Some("Never")
            });
        let member = cosched::Member {
            group: &group,
            pod_name: &key.name,
            never_preempts,
        };
        let chain = Some(self.scheduler.chain());
        match cosched::pre_filter(member, spec.as_ref(), backed_off, counts.into(), chain, nodes) {
            Gate::Pass { min_member } => {
                let (run, members) = self.start_run(key, group, min_member, counts.bound);
                Popped::Run(Box::new(run), members, spec.map(Box::new))
            }
            Gate::NoPodGroup => Popped::WithoutPodGroup,
            Gate::Held(held) => {
                self.hold_pod_group(key, held);
                // Coscheduling's PostFilter runs after its PreFilter rejection: a group with its pods backs off.
                if spec.is_some() {
                    self.group_rejected(&group);
                }
                Popped::Held
            }
        }
    }

    /// The run of a member let through its group's gate: the other members waiting in the queue are taken with it.
    fn start_run(
        &mut self,
        key: &PodKey,
        group: GroupKey,
        min_count: usize,
        bound: usize,
    ) -> (GangRun<PodKey>, Vec<PodKey>) {
        let unbound = self.gangs.as_ref().map(|g| g.unbound(&group)).unwrap_or_default();
        let mut scheduled = self
            .gangs
            .as_ref()
            .map(|g| g.groups.bound_members(&group))
            .unwrap_or_default();
        if let Some(gangs) = self.gangs.as_mut() {
            // Let through: a member held again later is told again.
            for member in &unbound {
                gangs.noted.remove(member);
                gangs.told.remove(member);
            }
            gangs.noted.remove(key);
            gangs.told.remove(key);
        }
        let mut members = vec![key.clone()];
        let mut placed_before = bound;
        for member in unbound {
            if &member == key {
                continue;
            }
            if self.queue.place(&member) == Some(Place::Binding) {
                placed_before += 1;
                scheduled.push(member);
            } else if self.queue.take(&member) {
                members.push(member);
            }
        }
        let run = GangRun::new(group, min_count, placed_before, members.len()).with_group(0, scheduled);
        (run, members)
    }

    /// A member held at PreEnqueue waits in the unschedulable pool until the loop activates its group; it is told
    /// why with a `GangWaiting` Event (kube-scheduler reports nothing for a pod held at PreEnqueue).
    fn hold(&mut self, key: &PodKey, object: &DynamicObject, note: String) {
        let failure = Failure::Unschedulable {
            plugins: BTreeSet::from([Arc::from(GANG_SCHEDULING)]),
            pending: BTreeSet::new(),
        };
        self.queue.failed(key, failure, None, 0, now(), &self.scheduler.hints);
        let Some(gangs) = self.gangs.as_mut() else { return };
        if !gangs.noted.insert(key.clone()) {
            return;
        }
        if let Ok(pod) = crate::watch_hub::typed::<Pod>(object) {
            self.scheduler
                .publish(&pod, EventType::Normal, "GangWaiting", "Scheduling", note);
        }
    }

    /// A PodGroup member held by Coscheduling's PreFilter waits like a Workload member, but is told as
    /// kube-scheduler tells a PreFilter rejection: a FailedScheduling Event and the PodScheduled condition, with
    /// Coscheduling's message (again only when the message changes while it is held).
    fn hold_pod_group(&mut self, key: &PodKey, held: Held) {
        let Held {
            message,
            clear_nomination,
        } = held;
        let failure = Failure::Unschedulable {
            plugins: BTreeSet::from([Arc::from(cosched::COSCHEDULING)]),
            pending: BTreeSet::new(),
        };
        self.queue.failed(key, failure, None, 0, now(), &self.scheduler.hints);
        let Some(gangs) = self.gangs.as_mut() else { return };
        if gangs.told.get(key) == Some(&message) {
            return;
        }
        gangs.told.insert(key.clone(), message.clone());
        let nominate = if clear_nomination {
            ruleplane_config::scheduler::engine::Nominate::Clear
        } else {
            ruleplane_config::scheduler::engine::Nominate::Leave
        };
        let error = SchedulingError::Unschedulable { message, nominate };
        // In order with the pod's other reports: a held text must not land after its run's verdict.
        self.spawn_report(key.clone(), error);
    }

    /// GangScheduling's events (a member pod added, its Workload added or changed): the group's members waiting in
    /// the queue are activated once PreEnqueue lets them through (activating them before would only hold them
    /// again: a gang of n members created one by one would be popped n²/2 times).
    pub(super) fn activate_groups(&mut self, groups: Vec<GroupKey>) {
        let Some(gangs) = self.gangs.as_ref() else { return };
        let members: Vec<PodKey> = groups
            .iter()
            .filter(|group| gangs.passes(group))
            .flat_map(|group| gangs.unbound(group))
            .collect();
        self.queue.activate(members.iter());
    }

    /// A PodGroup's run was rejected: the group is backed off for `podGroupBackoffSeconds`, when set and the group
    /// has `minMember` pods (Coscheduling's PostFilter), and its members sort from now on by this rejection.
    pub(super) fn group_rejected(&mut self, group: &GroupKey) {
        let seconds = self.scheduler.policy.profile().args.coscheduling.backoff_seconds();
        let Some(gangs) = self.gangs.as_mut() else { return };
        let min_member = gangs.pod_group(group).map_or(0, |spec| spec.min_member);
        let known = gangs.groups.counts(group).known;
        let now = now();
        gangs.backoffs.rejected(group, seconds, known, min_member, now.0);
        gangs.queue_sort.rejected(group, now);
        self.sort_groups(std::slice::from_ref(group));
    }

    /// A PodGroup's run met its quorum (Coscheduling's Permit allowed it): its members sort by its creation again.
    pub(super) fn group_allowed(&mut self, group: &GroupKey) {
        let Some(gangs) = self.gangs.as_mut() else { return };
        gangs.queue_sort.forget(group);
        self.sort_groups(std::slice::from_ref(group));
    }

    /// Coscheduling's QueueSort for a queued pod: a PodGroup member sorts by its group's time and its name, any
    /// other pod by PrioritySort.
    pub(super) fn sort_pod(&mut self, key: &PodKey, object: &DynamicObject) {
        let Some(gangs) = self.gangs.as_ref() else { return };
        let order = gangs
            .group_of(object)
            .filter(|group| group.dialect == Dialect::PodGroup && gangs.serves(group))
            .and_then(|group| {
                gangs
                    .queue_sort
                    .order(&group, gangs.pod_group(&group).as_ref(), &key.name)
            });
        self.queue.sort_in_group(key, order);
    }

    /// Sorts the queued members of `groups` again (their group's time changed).
    pub(super) fn sort_groups(&mut self, groups: &[GroupKey]) {
        let Some(gangs) = self.gangs.as_ref() else { return };
        for group in groups.iter().filter(|group| group.dialect == Dialect::PodGroup) {
            let spec = gangs.pod_group(group);
            for member in gangs.unbound(group) {
                let order = gangs.queue_sort.order(group, spec.as_ref(), &member.name);
                self.queue.sort_in_group(&member, order);
            }
        }
    }

    /// Sorts every queued PodGroup member again (after a relist).
    pub(super) fn sort_all_groups(&mut self) {
        let groups = self
            .gangs
            .as_ref()
            .map(|gangs| gangs.groups.groups())
            .unwrap_or_default();
        self.sort_groups(&groups);
    }

    /// A pod this policy bound: a gang member counts as bound before the watch shows it (see [`PodGroups::bound`]).
    pub(super) fn on_bound(&mut self, key: &PodKey) {
        if let Some(gangs) = self.gangs.as_mut() {
            gangs.groups.bound(key);
        }
    }

    /// A pod, Workload or PodGroup notification, for the gangs' bookkeeping.
    pub(super) fn on_gang_change(&mut self, watched: Watched, change: &Change) {
        let Some(gangs) = self.gangs.as_mut() else { return };
        let groups = match (watched, change) {
            (Watched::Other, _) => return,
            (Watched::Pods, Change::Resync) => {
                gangs.resync(&self.scheduler.cache.pods);
                return;
            }
            (Watched::Pods, _) => gangs.on_pod(change).into_iter().collect(),
            (Watched::PodGroups, _) => {
                let groups = gangs.on_workload(Dialect::PodGroup, change);
                gangs.forget_rejections(change, &groups);
                // The PodGroup's creation time is its members' QueueSort time.
                self.sort_groups(&groups);
                groups
            }
            (Watched::WorkloadPolicies, _) => gangs.on_workload(Dialect::Workload, change),
        };
        self.activate_groups(groups);
    }
}

/// What a watch notification is about, for the loop and the gangs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Watched {
    Pods,
    /// The Workload API's policy kind: Workloads in v1.35, PodGroups of `scheduling.k8s.io` since v1.36.
    WorkloadPolicies,
    /// scheduler-plugins' PodGroups (Coscheduling).
    PodGroups,
    /// Nodes and the cache's other kinds: the cache turns their changes into cluster events.
    Other,
}

impl Watched {
    pub(super) fn of(kind: &KindKey) -> Watched {
        match kind.kind.as_str() {
            "Pod" => Watched::Pods,
            "PodGroup" if !WorkloadApi::is_in_tree(&kind.api_version) => Watched::PodGroups,
            "Workload" | "PodGroup" => Watched::WorkloadPolicies,
            _ => Watched::Other,
        }
    }
}

/// `namespace/name`, as the gang texts name a member.
impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
#[path = "gangs_tests.rs"]
mod tests;
