//! A gang's run (kube-scheduler's pod-group cycle): every member's scheduling cycle back to back on the shared cache, then the members allowed bound together, or every reservation given back at once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::EventType;
use ruleplane_config::scheduler::cosched::{self, Chain, NoPodGroup, PodGroupSpec};
use ruleplane_config::scheduler::engine::preemption::never_preempts;
use ruleplane_config::scheduler::engine::{Behaviour, Nominate, Outcome, Preemption};
use ruleplane_config::scheduler::gang::{Dialect, GangRun};
use ruleplane_config::scheduler::gang_run::{GangRunner, MemberCycle, RunOutcome, RunVerdict, Told};
use ruleplane_config::scheduler::pod_group_cycle::GroupPreemption;
use ruleplane_config::scheduler::queue::Failure;
use tokio::sync::mpsc;

use super::cache::Cycle;
use super::cycle::Verdict;
use super::{Done, PodKey, PodScheduler, SchedulingError};

/// One member's cycle in a run, as the run records it.
enum Member {
    /// Assumed on `node`.
    Reserved { pod: Arc<Pod>, node: String },
    /// Found no node, but its PostFilter found victims whose eviction makes room (it is nominated in the cache
    /// only): nothing is evicted unless the run's quorum is met.
    Preempting(Preemptor),
    /// Failed on its own: what to tell the loop.
    Failed(Done),
}

/// A member whose preemption waits for its run's verdict.
struct Preemptor {
    pod: Arc<Pod>,
    preemption: Preemption,
    victims: Vec<Pod>,
    /// Its FailedScheduling report, with the nomination, as `attempt` sends it for a preemptor.
    failed: Done,
}

/// The members' cycles of a run, as they went.
struct Cycles {
    runner: GangRunner<PodKey>,
    /// Members assumed on a node.
    reserved: HashMap<PodKey, (Arc<Pod>, String)>,
    /// What members that failed on their own tell the loop.
    told: Vec<Done>,
    /// Members whose preemption waits for the run's verdict.
    preemptors: HashMap<PodKey, Preemptor>,
    /// v1.37's refusal of the whole group before any cycle ([`GangRunner::refusal`]).
    refusal: Option<RunOutcome<PodKey>>,
}

/// A run's end: what the loop hears at once, the preemptions carried out, the members to bind.
struct RunEnd {
    told: Vec<Done>,
    evictions: Vec<(PodKey, Preemptor)>,
    bindings: Vec<(PodKey, Arc<Pod>, String)>,
}

impl PodScheduler {
    /// A gang's run: every member's scheduling cycle back to back (each assumed into the cache), then either the
    /// allowed members bound together or every reservation given back at once. Nothing is told to the loop before
    /// the last cycle, so no other pod of the policy is decided in between.
    pub(super) async fn run_gang(
        self: &Arc<Self>,
        run: GangRun<PodKey>,
        members: Vec<(PodKey, Option<Arc<Pod>>)>,
        pod_group: Option<PodGroupSpec>,
        done: mpsc::UnboundedSender<Done>,
    ) {
        let send = |message: Done| {
            let _ = done.send(message);
        };
        if let Some(told) = self.short_of_resources(&run, &members, pod_group.as_ref()).await {
            return send(Done::Run(told));
        }
        let cycles = self.member_cycles(run, members, pod_group.as_ref()).await;
        let RunEnd {
            told,
            evictions,
            bindings,
        } = self.end_run(cycles).await;
        // The cycles are over: the loop hears of every member at once, then the allowed ones are bound together.
        send(Done::Run(told));
        self.carry_out_preemptions(evictions, &done);
        let done = &done;
        let bindings = bindings
            .into_iter()
            .map(|(key, pod, node)| async move { self.bind_assumed(key, &pod, &node, done).await });
        for result in futures::future::join_all(bindings).await {
            send(result);
        }
    }

    /// Coscheduling's PreFilter `minResources` check: when the cluster lacks room for the group, every member of
    /// the run is rejected with the gap, before any cycle (and the group backs off).
    async fn short_of_resources(
        &self,
        run: &GangRun<PodKey>,
        members: &[(PodKey, Option<Arc<Pod>>)],
        pod_group: Option<&PodGroupSpec>,
    ) -> Option<Vec<Done>> {
        let spec = pod_group.filter(|spec| !spec.min_resources.is_empty())?;
        let gap = self.cache.resource_gap(run.group(), spec).await?;
        let chain = self.chain();
        let nodes = self.cache.nodes.store.len();
        let told = members
            .iter()
            .map(|(key, queued)| {
                let pod = queued.clone().or_else(|| {
                    self.cache
                        .pods
                        .store
                        .get_typed::<Pod>(Some(&key.namespace), &key.name)
                        .map(Arc::new)
                });
                let never_preempts = pod.is_some_and(|pod| never_preempts(&pod));
                let member = cosched::Member {
                    group: run.group(),
                    pod_name: &key.name,
                    never_preempts,
                };
                let held = cosched::pre_filter_rejection(member, spec, &gap, run.assigned(), Some(chain), nodes);
                let nominate = if held.clear_nomination {
                    Nominate::Clear
                } else {
                    Nominate::Leave
                };
                gang_failure(key.clone(), cosched::COSCHEDULING, held.message, nominate)
            })
            .chain([Done::GroupRejected(run.group().clone())])
            .collect();
        Some(told)
    }

    /// Every member's cycle, in the order the runner (`config`'s `GangRunner`) gives them.
    async fn member_cycles(
        &self,
        run: GangRun<PodKey>,
        members: Vec<(PodKey, Option<Arc<Pod>>)>,
        pod_group: Option<&PodGroupSpec>,
    ) -> Cycles {
        let reject_percentage = self.policy.profile().args.coscheduling.reject_percentage();
        let keys: Vec<PodKey> = members.iter().map(|(key, _)| key.clone()).collect();
        let workload_gang = run.group().dialect == Dialect::Workload;
        let first = keys.first().filter(|_| workload_gang);
        let preemption = match first.and_then(|key| self.pending_pod(key, members[0].1.clone())) {
            Some(first) => self.cache.group_preemption(&first).await,
            None => GroupPreemption::NoVictims,
        };
        let behaviour = self.engine.lock().unwrap_or_else(|e| e.into_inner()).behaviour();
        let mut queued: HashMap<PodKey, Option<Arc<Pod>>> = members.into_iter().collect();
        let mut cycles = Cycles {
            runner: GangRunner::of(run, keys).behaving_as(behaviour, preemption),
            reserved: HashMap::new(),
            told: Vec::new(),
            preemptors: HashMap::new(),
            refusal: None,
        };
        cycles.refusal = self.group_refusal(&cycles.runner, &queued, behaviour);
        while let Some(key) = cycles.runner.next_member().filter(|_| cycles.refusal.is_none()) {
            let reason = cycles
                .runner
                .post_filter_reason(pod_group, &key.name, reject_percentage);
            let queued = queued.remove(&key).flatten();
            let cycle = match self.member_cycle(&key, queued, reason, workload_gang).await {
                Member::Reserved { pod, node } => {
                    cycles.reserved.insert(key.clone(), (pod, node));
                    MemberCycle::Reserved
                }
                Member::Preempting(preemptor) => {
                    cycles.preemptors.insert(key.clone(), preemptor);
                    MemberCycle::Preempting
                }
                Member::Failed(failed) => {
                    cycles.told.push(failed);
                    MemberCycle::Failed
                }
            };
            cycles.runner.record(key, cycle);
        }
        cycles
    }

    /// The run's verdict carried out on the cache and told: the PodGroup condition and the Events, each member's
    /// fate, the reservations given back at once; what is left is evicting and binding.
    async fn end_run(&self, cycles: Cycles) -> RunEnd {
        let Cycles {
            runner,
            mut reserved,
            mut told,
            mut preemptors,
            refusal,
        } = cycles;
        let group = runner.run().group().clone();
        // What becomes of each member is decided in `config` (`gang_run`), as `ruleplane simulate` decides it.
        let outcome = refusal.unwrap_or_else(|| runner.finish());
        if let Some(condition) = outcome.condition.clone() {
            self.set_pod_group_condition(&group, condition);
        }
        for event in outcome.events {
            let type_ = if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            self.publish_gang(&event.member, type_, event.reason, event.note);
        }
        for (key, verdict) in outcome.told {
            match verdict {
                Told::Unschedulable {
                    message,
                    clear_nomination,
                } => {
                    // A preemptor of a run that is not placed loses the nomination its cycle took; its victims go
                    // only when the outcome carries its preemption out all the same (v1.36).
                    let carried = outcome.preemptions.contains(&key);
                    let preemptor = if clear_nomination && !carried {
                        preemptors.remove(&key)
                    } else {
                        None
                    };
                    let mut nominate = self.drop_nomination(preemptor).await;
                    if carried && let Some(preemptor) = preemptors.get_mut(&key) {
                        self.cache.nominate(&preemptor.pod, &Nominate::Clear).await;
                        nominate = Nominate::Clear;
                        let mut failure = gang_failure(key.clone(), group.plugin(), message, nominate);
                        if let Done::Failed { preempting, .. } = &mut failure {
                            // Held until its victims' eviction ends, as any preemptor.
                            *preempting = true;
                        }
                        preemptor.failed = failure;
                        continue;
                    }
                    told.push(gang_failure(key, group.plugin(), message, nominate));
                }
                Told::SchedulerError { message } => told.push(Done::Failed {
                    key,
                    failure: Failure::Error,
                    prepared: None,
                    seen: 0,
                    error: Box::new(SchedulingError::PodGroup(message)),
                    preempting: false,
                }),
                Told::Waiting => told.push(Done::Waiting {
                    key,
                    plugin: group.plugin(),
                    seen: 0,
                }),
            }
        }
        if outcome.verdict == RunVerdict::Rejected && group.dialect == Dialect::PodGroup {
            told.push(Done::GroupRejected(group.clone()));
        }
        let mut evictions = Vec::new();
        for key in outcome.preemptions {
            if let Some(mut preemptor) = preemptors.remove(&key) {
                told.push(std::mem::replace(&mut preemptor.failed, Done::Gone(key.clone())));
                evictions.push((key, preemptor));
            }
        }
        let given_back: Vec<&Pod> = outcome
            .given_back
            .iter()
            .filter_map(|key| reserved.get(key).map(|(pod, _)| pod.as_ref()))
            .collect();
        if !given_back.is_empty() {
            let sequence = self.cache.forget_run(&given_back).await;
            for message in &mut told {
                if let Done::Failed { seen, .. } | Done::Waiting { seen, .. } = message {
                    *seen = (*seen).max(sequence);
                }
            }
        }
        let mut all: Vec<Done> = outcome.allowed.iter().map(|key| Done::Assumed(key.clone())).collect();
        all.extend(told);
        if !outcome.allowed.is_empty() && group.dialect == Dialect::PodGroup {
            all.push(Done::GroupAllowed(group.clone()));
        }
        let bindings = outcome
            .allowed
            .into_iter()
            .filter_map(|key| {
                let (pod, node) = reserved.remove(&key)?;
                Some((key, pod, node))
            })
            .collect();
        RunEnd {
            told: all,
            evictions,
            bindings,
        }
    }

    /// kube-scheduler v1.35's async preemption, as `attempt` starts it: the victims are evicted in the background.
    /// Preemptors of one run may have chosen the same victims: each victim is evicted once, and a preemptor left
    /// with none waits for the others' (its hold ends at once; the victims' deletion retries it).
    fn carry_out_preemptions(
        self: &Arc<Self>,
        evictions: Vec<(PodKey, Preemptor)>,
        done: &mpsc::UnboundedSender<Done>,
    ) {
        let mut evicted: HashSet<(Option<String>, Option<String>)> = HashSet::new();
        for (key, preemptor) in evictions {
            let victims: Vec<Pod> = preemptor
                .victims
                .into_iter()
                .filter(|victim| evicted.insert((victim.metadata.namespace.clone(), victim.metadata.name.clone())))
                .collect();
            if victims.is_empty() {
                let _ = done.send(Done::Preempted { key, error: None });
                continue;
            }
            self.spawn_preemption(key, preemptor.pod, preemptor.preemption, victims, done.clone());
        }
    }

    /// v1.37's check of a Workload API group before its cycle ([`GangRunner::refusal`]): the run's members as the
    /// cache has them, and the members bound or being bound.
    fn group_refusal(
        &self,
        runner: &GangRunner<PodKey>,
        queued: &HashMap<PodKey, Option<Arc<Pod>>>,
        behaviour: Behaviour,
    ) -> Option<RunOutcome<PodKey>> {
        if !behaviour.validates_pod_groups() {
            return None;
        }
        let cached = |key: &PodKey| self.cache.pods.store.get_typed::<Pod>(Some(&key.namespace), &key.name);
        let members: Vec<Arc<Pod>> = runner
            .queued()
            .filter_map(|key| queued.get(key).cloned().flatten().or_else(|| cached(key).map(Arc::new)))
            .collect();
        let scheduled: Vec<Pod> = runner.run().scheduled().iter().filter_map(cached).collect();
        let members: Vec<&Pod> = members.iter().map(|pod| pod.as_ref()).collect();
        let scheduled: Vec<&Pod> = scheduled.iter().collect();
        runner.refusal(behaviour, runner.run().group_priority(), &members, &scheduled)
    }

    /// One member's cycle in a run, as `attempt` runs it, without binding and without carrying out a preemption:
    /// evicting pods for a gang that may still be rejected would disrupt them for nothing, so a preemption waits
    /// for the run's verdict ([`Member::Preempting`]).
    async fn member_cycle(
        &self,
        key: &PodKey,
        queued: Option<Arc<Pod>>,
        reason: Option<String>,
        workload_gang: bool,
    ) -> Member {
        let Some(pod) = self.pending_pod(key, queued) else {
            return Member::Failed(Done::Gone(key.clone()));
        };
        let cycle = match self
            .cache
            .schedule_as(&self.engine, &self.hints, &pod, workload_gang)
            .await
        {
            Ok(cycle) => cycle,
            Err(error) => return Member::Failed(self.invalid(key.clone(), error)),
        };
        let message = cosched::with_post_filter_reason(
            cycle.decision.event_message().unwrap_or_default(),
            cycle.decision.post_filter(),
            reason,
        );
        let (failure, mut error, preemption) = match self.verdict(cycle.decision.outcome, message) {
            Verdict::Scheduled(node) => return Member::Reserved { pod, node },
            Verdict::Gated => return Member::Failed(Done::Gated(key.clone())),
            Verdict::Failed {
                failure,
                error,
                preemption,
            } => (failure, error, preemption),
        };
        let failed = |error: SchedulingError, preempting: bool| Done::Failed {
            key: key.clone(),
            failure,
            prepared: cycle.prepared,
            seen: cycle.seen,
            error: Box::new(error),
            preempting,
        };
        if let Some((preemption, victims)) = self.to_carry_out(preemption) {
            return Member::Preempting(Preemptor {
                pod,
                preemption,
                victims,
                failed: failed(error, true),
            });
        }
        // A member that evicts nothing leaves its nomination as it is: the run's verdict decides it.
        if let SchedulingError::Unschedulable { nominate, .. } = &mut error {
            *nominate = Nominate::Leave;
        }
        Member::Failed(failed(error, false))
    }

    /// A preemptor whose preemption is not carried out: the nomination its cycle took in the cache goes, and its
    /// report clears it. Any other member leaves its nomination as it is.
    async fn drop_nomination(&self, preemptor: Option<Preemptor>) -> Nominate {
        match preemptor {
            Some(preemptor) => {
                self.cache.nominate(&preemptor.pod, &Nominate::Clear).await;
                Nominate::Clear
            }
            None => Nominate::Leave,
        }
    }

    /// The cycle of a labelled pod whose PodGroup does not exist, decided as Coscheduling decides it
    /// (`cosched::without_pod_group`): one that fits is forgotten from its node (rejected at Permit), one that fits
    /// nowhere is told why with `can not find pod group`, and nothing is evicted for it.
    pub(super) async fn without_pod_group(&self, key: PodKey, pod: &Arc<Pod>, cycle: Cycle) -> Done {
        let event_message = cycle.decision.event_message().unwrap_or_default();
        let verdict = cosched::without_pod_group(
            cycle.decision.chosen().is_some(),
            event_message,
            cycle.decision.post_filter(),
        );
        self.count("unschedulable");
        match (verdict, cycle.decision.outcome) {
            (
                NoPodGroup::Unschedulable { message },
                Outcome::Unschedulable {
                    plugins, post_filter, ..
                },
            ) => Done::Failed {
                key,
                failure: Failure::Unschedulable {
                    plugins,
                    pending: BTreeSet::new(),
                },
                prepared: cycle.prepared,
                seen: cycle.seen,
                error: Box::new(SchedulingError::Unschedulable {
                    message,
                    nominate: post_filter.map_or(Nominate::Leave, |p| p.nominate),
                }),
                preempting: false,
            },
            (_, outcome) => {
                // Unreserve: the room the pod was assumed on goes back (not news to the pod itself), and the
                // nomination a preemption took goes with it, as kube-scheduler clears it after a Permit rejection.
                let seen = if matches!(outcome, Outcome::Scheduled { .. }) {
                    self.cache.forget_run(&[pod.as_ref()]).await
                } else {
                    self.cache.nominate(pod, &Nominate::Clear).await;
                    cycle.seen
                };
                Done::Failed {
                    key,
                    failure: Failure::Unschedulable {
                        plugins: BTreeSet::from([Arc::from(cosched::COSCHEDULING)]),
                        pending: BTreeSet::new(),
                    },
                    prepared: cycle.prepared,
                    seen,
                    error: Box::new(SchedulingError::Unschedulable {
                        message: cosched::POD_GROUP_NOT_FOUND.to_string(),
                        nominate: Nominate::Clear,
                    }),
                    preempting: false,
                }
            }
        }
    }

    /// The member's PostFilter chain as Coscheduling's texts need it.
    pub(super) fn chain(&self) -> Chain {
        let reject_percentage = self.policy.profile().args.coscheduling.reject_percentage();
        let engine = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        Chain::of(engine.post_filters(), reject_percentage)
    }

    fn publish_gang(&self, key: &PodKey, type_: EventType, reason: &str, note: String) {
        if let Some(pod) = self.cache.pods.store.get_typed::<Pod>(Some(&key.namespace), &key.name) {
            self.publish(&pod, type_, reason, "Scheduling", note);
        }
    }
}

/// A member rejected with its run: rejected by its group's plugin, so only its group's activation moves it again.
fn gang_failure(key: PodKey, plugin: &str, message: String, nominate: Nominate) -> Done {
    Done::Failed {
        key,
        failure: Failure::Unschedulable {
            plugins: BTreeSet::from([Arc::from(plugin)]),
            pending: BTreeSet::new(),
        },
        prepared: None,
        seen: 0,
        error: Box::new(SchedulingError::Unschedulable { message, nominate }),
        preempting: false,
    }
}
