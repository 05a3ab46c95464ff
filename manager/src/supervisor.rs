//! Runs one worker per rule while this replica leads: diffs rule sets, restarts failed workers with backoff.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use ruleplane_config::{CrdRemoval, ReloadRefusal, Rule, RuleSet, check_reload, plan_crd_removal};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, info, info_span, warn};

use crate::context::{WorkerContext, WorkerError};
use crate::health::WorkerState;
use crate::metrics::Metrics;
use crate::sharding::{Owned, ShardScope};
use crate::workers;
use ruleplane_config::sharding::Unit;

struct RunningWorker {
    rule: Rule,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

pub struct Supervisor {
    ctx: WorkerContext,
    /// The last good rule set, whether or not this replica leads.
    rules: BTreeMap<String, Rule>,
    running: BTreeMap<String, RunningWorker>,
    /// What runs here, as last applied.
    owned: Owned,
    /// When the workers start on `owned` (it changed less than `settle` ago).
    settle_at: Option<tokio::time::Instant>,
    /// How long the units must stay unchanged before workers start on them: [`SETTLE`] where replicas share them
    /// through Leases, nothing where one process owns everything for good (`--leader-elect=false`).
    settle: Duration,
    /// Whether the Reconciler workers' scope was ever set from `owned`.
    shards_started: bool,
    /// Reconciler rules removed while this replica did not coordinate: their removal hook (releasing their
    /// finalizers) runs when it takes the resource-definitions unit, in case the coordinator of the moment died
    /// before it ran it.
    missed_removals: Vec<Rule>,
    /// The unit loop's verdict, read by every worker's own task: a worker stops the moment its unit is lost,
    /// even while the loop that calls `set_owned` is busy (a removed rule's deletion policy waiting on a
    /// stalled apiserver, say).
    ownership: watch::Receiver<Owned>,
    /// Let a reload empty the rule set or drop every ResourceDefinition rule (`--allow-empty-rule-set`).
    allow_empty_rule_set: bool,
    /// ResourceDefinition rules of the running set that replaced, in a reload seen here, rules declaring the same
    /// CRD (a rename): their worker may apply over a CRD labelled with those rules' names. Kept on standbys too,
    /// so a replica taking over knows; dropped with the rule.
    takeovers: BTreeMap<String, Vec<String>>,
    /// The one scheduling cache every SchedulerPolicy worker shares, made by the first and kept across
    /// changes of units so a replica taking the schedulers unit over starts warm.
    scheduling: workers::scheduler::SchedulingCache,
}

/// How long the units must stay unchanged before workers start on them, where replicas share them through Leases
/// (see [`Supervisor::set_owned`]).
pub const SETTLE: Duration = Duration::from_secs(1);

/// How long a stopping worker may take to finish its current step before it is aborted.
const GRACEFUL_STOP: Duration = Duration::from_secs(5);

impl Supervisor {
    pub fn new(ctx: WorkerContext, ownership: watch::Receiver<Owned>, allow_empty_rule_set: bool) -> Self {
        Supervisor {
            ctx,
            rules: BTreeMap::new(),
            running: BTreeMap::new(),
            owned: Owned::default(),
            settle_at: None,
            settle: SETTLE,
            shards_started: false,
            missed_removals: Vec::new(),
            ownership,
            allow_empty_rule_set,
            takeovers: BTreeMap::new(),
            scheduling: Default::default(),
        }
    }

    /// Units that never move (one process owns everything, without Leases): workers start on them at once, as
    /// there is no other replica to settle with.
    pub fn with_fixed_units(mut self) -> Self {
        self.settle = Duration::ZERO;
        self
    }

    /// Replaces the rule set: unchanged rules keep running untouched, changed ones restart, removed ones stop
    /// and their deletion policy runs, new ones start. A set that would remove every rule, or every
    /// ResourceDefinition rule, is refused (unless allowed) and the running set stays as it is.
    pub async fn apply_rules(&mut self, set: &RuleSet) -> Result<(), ReloadRefusal> {
        check_reload(self.rules.values(), set.rules(), self.allow_empty_rule_set)?;
        let new: BTreeMap<String, Rule> = set.rules().iter().map(|r| (r.name().to_owned(), r.clone())).collect();
        let removed: Vec<Rule> = self
            .rules
            .values()
            .filter(|r| !new.contains_key(r.name()))
            .cloned()
            .collect();
        for rule in &removed {
            info!(rule = rule.name(), "rule removed");
            self.stop_worker(rule.name(), true).await;
            // Before the successor's worker starts (below), so its first apply already takes the CRD over.
            if let Rule::ResourceDefinition(rd) = rule
                && let CrdRemoval::TakenOver { by } = plan_crd_removal(rd, set.rules())
            {
                let mut from = self.takeovers.remove(rule.name()).unwrap_or_default();
                from.push(rule.name().to_owned());
                self.takeovers.entry(by).or_default().extend(from);
            }
            self.ctx.health.remove_rule(rule.name());
            if self.coordinates() {
                // Its deletions are the coordinator's writes: abandoned the moment the unit moves away.
                tokio::select! {
                    _ = workers::on_rule_removed(rule, set.rules(), &self.ctx) => {}
                    _ = coordination_lost(self.ownership.clone()) => {
                        warn!(rule = rule.name(), "the resource-definitions unit moved away while the removed rule's deletion policy ran; abandoned");
                    }
                }
            } else if matches!(rule, Rule::Reconciler(_)) {
                self.missed_removals.push(rule.clone());
            }
        }
        self.missed_removals.retain(|rule| !new.contains_key(rule.name()));
        for (name, rule) in &new {
            match self.rules.get(name) {
                Some(old) if old == rule => continue,
                Some(old) => {
                    let old = old.clone();
                    info!(rule = %name, "rule changed; restarting its worker");
                    self.stop_worker(name, true).await;
                    if self.coordinates() {
                        workers::on_rule_changed(&old, rule, &self.ctx).await;
                    }
                }
                None => info!(rule = %name, kind = rule.kind().as_str(), "rule added"),
            }
            self.ctx
                .health
                .set_rule(name, rule.kind().as_str(), WorkerState::Standby);
            if runs_here(&self.owned, rule) {
                self.start_worker(rule.clone());
            }
        }
        self.takeovers.retain(|name, _| new.contains_key(name));
        self.rules = new;
        self.ctx
            .metrics
            .rules_loaded
            .set(i64::try_from(self.rules.len()).unwrap_or(i64::MAX));
        Ok(())
    }

    /// Rule-wide cleanups (a removed rule's deletion policy, a changed rule's dropped patches) run on the replica
    /// that holds the resource-definitions unit: one replica for the whole rule set, as for a CRD's evolution.
    fn coordinates(&self) -> bool {
        self.owned.resource_definitions
    }

    /// Applies a new set of units. What no longer runs here stops at once (aborted: another replica may act on
    /// the same objects soon), and every Reconciler worker when a hold was abandoned or lost. Units gained by a
    /// replica already working start at once; the replica's first start, and the restart of its Reconciler
    /// workers on a smaller set of shards, wait until the units have been unchanged for [`SETTLE`] (not at all
    /// with fixed units) ([`Supervisor::settle`]): replicas started together move units for a moment, and workers
    /// started on a passing set would list and cache what they give up a second later (a shard handed over
    /// meanwhile has its gate closed: its keys are dropped, its reconciles in flight finish).
    pub async fn set_owned(&mut self, owned: Owned) {
        let before = std::mem::replace(&mut self.owned, owned);
        let now = self.owned.clone();
        self.ctx.metrics.leader.set(i64::from(now.any()));
        if now.resource_definitions && !before.resource_definitions {
            let remaining: Vec<Rule> = self.rules.values().cloned().collect();
            for rule in std::mem::take(&mut self.missed_removals) {
                info!(
                    rule = rule.name(),
                    "coordinating: releasing what a rule removed while another replica coordinated held"
                );
                workers::on_rule_removed(&rule, &remaining, &self.ctx).await;
            }
        }
        let aborted = now.aborts != before.aborts;
        let rules: Vec<Rule> = self.rules.values().cloned().collect();
        for rule in &rules {
            let reconciler = matches!(rule, Rule::Reconciler(_));
            if self.running.contains_key(rule.name()) && (!runs_here(&now, rule) || (aborted && reconciler)) {
                self.stop_worker(rule.name(), false).await;
            }
        }
        if aborted {
            // Work of an abandoned hold stopped above; the scope must not keep its shards.
            self.ctx.shards = ShardScope::of(self.ctx.shards.gate.clone(), &now.shards);
        }
        // A replica already working that gains units (a takeover after a crash, a replica leaving) starts them at
        // once: only a replica's first start, and a shrinking set, wait for the units to settle.
        let gained = now.shards.difference(&before.shards).next().is_some()
            || (now.resource_definitions && !before.resource_definitions)
            || (now.schedulers && !before.schedulers);
        if self.shards_started && gained {
            self.settle().await;
        } else {
            self.settle_at = Some(tokio::time::Instant::now() + self.settle);
        }
    }

    /// When [`Supervisor::settle`] is due, if the units changed since it last ran.
    pub fn settle_due(&self) -> Option<tokio::time::Instant> {
        self.settle_at
    }

    /// Starts the workers whose unit runs here, restarting the Reconciler workers on the shards now owned when
    /// they changed (their watches are keyed by the shards; the old watches end once unused); a worker that saw
    /// its unit go and come back while the loop was busy had ended: it starts again.
    pub async fn settle(&mut self) {
        self.settle_at = None;
        let now = self.owned.clone();
        let owned_now: Option<&std::collections::BTreeSet<u32>> = self.ctx.shards.owned.as_deref();
        let all = now.shards.len() == self.ctx.shards.count as usize;
        let reshard = match owned_now {
            Some(owned) => *owned != now.shards,
            None => !all,
        } || !self.shards_started;
        if reshard {
            self.ctx.shards = ShardScope::of(self.ctx.shards.gate.clone(), &now.shards);
        }
        self.shards_started = true;
        let rules: Vec<Rule> = self.rules.values().cloned().collect();
        let mut started = 0;
        for rule in rules {
            let name = rule.name().to_owned();
            let should = runs_here(&now, &rule);
            let ended = self.running.get(&name).is_some_and(|w| w.task.is_finished());
            let resharded = reshard && matches!(rule, Rule::Reconciler(_));
            if self.running.contains_key(&name) && (!should || resharded || ended) {
                self.stop_worker(&name, false).await;
            }
            if should && !self.running.contains_key(&name) {
                self.start_worker(rule);
                started += 1;
            }
        }
        if reshard {
            let ended = self.ctx.hub.release_unused();
            info!(
                shards = now.shards.len(),
                started,
                watches_ended = ended,
                "this replica's units settled; workers started on its Reconciler shards"
            );
        }
    }

    pub async fn stop_all(&mut self, graceful: bool) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            self.stop_worker(&name, graceful).await;
        }
    }

    fn start_worker(&mut self, rule: Rule) {
        let stop = CancellationToken::new();
        let name = rule.name().to_owned();
        let takes_over_from = self.takeovers.get(&name).cloned().unwrap_or_default();
        let scheduling = self.scheduling.clone();
        let worker = move |rule, ctx, stop| workers::run(rule, takes_over_from.clone(), scheduling.clone(), ctx, stop);
        let task = tokio::spawn(supervise(
            rule.clone(),
            self.ctx.clone(),
            stop.clone(),
            self.ownership.clone(),
            worker,
        ));
        self.running.insert(name, RunningWorker { rule, stop, task });
    }

    async fn stop_worker(&mut self, name: &str, graceful: bool) {
        let Some(worker) = self.running.remove(name) else {
            return;
        };
        worker.stop.cancel();
        let mut task = worker.task;
        if graceful {
            if tokio::time::timeout(GRACEFUL_STOP, &mut task).await.is_err() {
                warn!(rule = name, "worker did not stop within {GRACEFUL_STOP:?}; aborting it");
                task.abort();
            }
        } else {
            task.abort();
            let _ = task.await;
        }
        self.ctx
            .health
            .set_rule(name, worker.rule.kind().as_str(), WorkerState::Standby);
    }
}

/// Whether `rule`'s worker runs on a replica that owns `owned`: a ResourceDefinition with the resource-definitions
/// unit, a SchedulerPolicy with the schedulers unit (all policies share one node cache, so one replica runs them
/// all), a Reconciler while any of its shards runs here.
pub fn runs_here(owned: &Owned, rule: &Rule) -> bool {
    match rule {
        Rule::ResourceDefinition(_) => owned.resource_definitions,
        Rule::SchedulerPolicy(_) => owned.schedulers,
        Rule::Reconciler(_) => !owned.shards.is_empty(),
    }
}

/// The unit a whole-set rule's worker belongs to (a Reconciler's work is counted per reconcile instead).
fn whole_set_unit(rule: &Rule) -> Option<Unit> {
    match rule {
        Rule::ResourceDefinition(_) => Some(Unit::ResourceDefinitions),
        Rule::SchedulerPolicy(_) => Some(Unit::Schedulers),
        Rule::Reconciler(_) => None,
    }
}

/// Resolves once `rule`'s unit no longer runs here (or the unit loop has ended).
async fn unit_lost(mut ownership: watch::Receiver<Owned>, rule: &Rule) {
    let _ = ownership.wait_for(|owned| !runs_here(owned, rule)).await;
}

/// Resolves once the resource-definitions unit no longer runs here.
async fn coordination_lost(mut ownership: watch::Receiver<Owned>) {
    let _ = ownership.wait_for(|owned| !owned.resource_definitions).await;
}

/// Runs a rule's worker until `stop`, restarting it with exponential backoff (1 s → 60 s) when it fails or
/// panics, so one broken rule never takes the process down. Its unit moving away aborts it at once, without waiting
/// for `stop` (another replica may already act on the same objects).
async fn supervise<W, F>(
    rule: Rule,
    ctx: WorkerContext,
    stop: CancellationToken,
    ownership: watch::Receiver<Owned>,
    worker: W,
) where
    W: Fn(Rule, WorkerContext, CancellationToken) -> F,
    F: Future<Output = Result<(), WorkerError>> + Send + 'static,
{
    let name = rule.name().to_owned();
    let kind = rule.kind().as_str();
    let mut backoff = Duration::from_secs(1);
    // A handover of a whole-set unit waits until its workers are gone (this task ended or was aborted).
    let _counted = whole_set_unit(&rule).map(|unit| ctx.shards.gate.count_in(unit));
    loop {
        ctx.health.set_rule(&name, kind, WorkerState::Running);
        let span = info_span!("worker", rule = %name, kind);
        // The attempt runs in its own task so a panic is caught as a JoinError; the guard aborts it when this
        // supervising task is aborted (its unit lost), so no worker outlives its supervisor.
        let mut attempt = AbortOnDrop(tokio::spawn(
            worker(rule.clone(), ctx.clone(), stop.clone()).instrument(span),
        ));
        let started = tokio::time::Instant::now();
        let ended = tokio::select! {
            ended = &mut attempt.0 => ended,
            _ = unit_lost(ownership.clone(), &rule) => {
                // `attempt` is aborted as it drops.
                ctx.health.set_rule(&name, kind, WorkerState::Standby);
                return;
            }
        };
        let (failure, expected) = match ended {
            Ok(Ok(())) => return,
            // A kind declared by a ResourceDefinition of the same rule set is served a moment after its CRD
            // is created: the first attempts of its workers meet a 404, which is no fault.
            Ok(Err(e)) => (e.to_string(), matches!(e, WorkerError::Discovery(_))),
            Err(join) if join.is_panic() => ("worker panicked".to_owned(), false),
            Err(_) => return,
        };
        if stop.is_cancelled() {
            return;
        }
        if expected {
            warn!(rule = %name, error = %failure, "worker waiting for its kinds; retrying in {backoff:?}");
        } else {
            error!(rule = %name, error = %failure, "worker failed; restarting in {backoff:?}");
        }
        ctx.metrics
            .worker_restarts
            .get_or_create(&Metrics::labels(&name, kind))
            .inc();
        ctx.health.set_rule(&name, kind, WorkerState::Degraded(failure));
        // A worker that ran for a while before failing starts again from the shortest backoff.
        if started.elapsed() > Duration::from_secs(120) {
            backoff = Duration::from_secs(1);
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.cancelled() => return,
            _ = unit_lost(ownership.clone(), &rule) => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}

struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::metrics::Metrics;

    fn rule() -> Rule {
        let set = ruleplane_config::load_str(
            "rules.yaml",
            "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: widget.example.com }\n\
             spec: { versions: [ { name: v1 } ] }\n",
        )
        .expect("valid rule");
        set.rules()[0].clone()
    }

    #[tokio::test(start_paused = true)]
    async fn failing_and_panicking_workers_are_restarted_with_backoff_and_reported() {
        let ctx = crate::context::offline_context();
        let attempts = Arc::new(AtomicU32::new(0));
        let counter = attempts.clone();
        let worker = move |_rule: Rule, _ctx: WorkerContext, stop: CancellationToken| {
            let attempt = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                match attempt {
                    1 => panic!("first attempt panics"),
                    2 => Err(WorkerError::WatchEnded("widgets".into())),
                    _ => {
                        stop.cancelled().await;
                        Ok(())
                    }
                }
            }
        };
        let stop = CancellationToken::new();
        let (_owned, ownership) = watch::channel(Owned::everything(4));
        let task = tokio::spawn(supervise(rule(), ctx.clone(), stop.clone(), ownership, worker));
        let started = tokio::time::Instant::now();
        while attempts.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Backoff doubles: 1 s after the panic, 2 s after the error.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
            "{waited:?}"
        );
        let restarts = ctx
            .metrics
            .worker_restarts
            .get_or_create(&Metrics::labels("widget.example.com", "ResourceDefinition"))
            .get();
        assert_eq!(restarts, 2);
        assert!(
            ctx.metrics
                .encode()
                .contains("ruleplane_worker_restarts_total{rule=\"widget.example.com\",kind=\"ResourceDefinition\"} 2")
        );
        let readyz = ctx.health.readiness(true).body;
        assert!(
            readyz.contains("rule widget.example.com (ResourceDefinition): running"),
            "{readyz}"
        );
        stop.cancel();
        task.await.expect("supervisor ends when stopped");
        assert_eq!(attempts.load(Ordering::SeqCst), 3, "no restart after a clean stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_worker_shows_as_degraded_in_readyz() {
        let ctx = crate::context::offline_context();
        let worker = |_rule: Rule, _ctx: WorkerContext, _stop: CancellationToken| async {
            Err::<(), _>(WorkerError::WatchEnded("widgets".into()))
        };
        let stop = CancellationToken::new();
        let (_owned, ownership) = watch::channel(Owned::everything(4));
        let task = tokio::spawn(supervise(rule(), ctx.clone(), stop.clone(), ownership, worker));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let readyz = ctx.health.readiness(true).body;
        assert!(readyz.contains("degraded: watch for widgets ended"), "{readyz}");
        stop.cancel();
        task.await.expect("supervisor ends when stopped");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_unit_aborts_its_worker_at_once_whatever_it_is_doing() {
        let ctx = crate::context::offline_context();
        let (election, ownership) = watch::channel(Owned::everything(4));
        let finished = Arc::new(AtomicU32::new(0));
        let counter = finished.clone();
        // A worker stuck in a request that never answers, deaf to its stop token.
        let worker = move |_rule: Rule, _ctx: WorkerContext, _stop: CancellationToken| {
            let counter = counter.clone();
            async move {
                std::future::pending::<()>().await;
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(supervise(rule(), ctx.clone(), stop, ownership, worker));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(ctx.health.readiness(true).body.contains("running"));
        let lost = tokio::time::Instant::now();
        election.send_replace(Owned {
            resource_definitions: false,
            ..Owned::everything(4)
        });
        task.await.expect("the supervising task ends");
        assert_eq!(lost.elapsed(), Duration::ZERO, "no grace period");
        let readyz = ctx.health.readiness(true).body;
        assert!(
            readyz.contains("rule widget.example.com (ResourceDefinition): standby"),
            "{readyz}"
        );
        assert_eq!(finished.load(Ordering::SeqCst), 0);
    }

    /// An ownership channel that says nothing runs here (its sender dropped: nothing changes it).
    fn not_leading() -> watch::Receiver<Owned> {
        watch::channel(Owned::default()).1
    }

    fn rule_set(yaml: &str) -> RuleSet {
        ruleplane_config::load_str("rules.yaml", yaml).expect("valid rules")
    }

    fn rd(name: &str, extra: &str) -> String {
        format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: {{ name: {name} }}\n\
             spec: {{ versions: [ {{ name: v1 }} ]{extra} }}\n"
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_that_empties_the_rule_set_is_refused_and_the_running_set_stays() {
        let ctx = crate::context::offline_context();
        let mut supervisor = Supervisor::new(ctx.clone(), not_leading(), false);
        let running = rule_set(&rd("cron-tab.example.com", ", deletionPolicy: Delete"));
        supervisor.apply_rules(&running).await.expect("first set");
        let refused = supervisor.apply_rules(&RuleSet::default()).await.unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("would delete CustomResourceDefinition crontabs.example.com"),
            "{refused}"
        );
        assert_eq!(supervisor.rules.len(), 1, "the running set is kept");
        assert_eq!(ctx.metrics.rules_loaded.get(), 1);
        let readyz = ctx.health.readiness(true).body;
        assert!(
            readyz.contains("rule cron-tab.example.com (ResourceDefinition)"),
            "{readyz}"
        );

        let mut allowing = Supervisor::new(crate::context::offline_context(), not_leading(), true);
        allowing.apply_rules(&running).await.expect("first set");
        allowing
            .apply_rules(&RuleSet::default())
            .await
            .expect("allowed by the operator");
        assert!(allowing.rules.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn without_leases_workers_start_at_once_and_with_leases_once_the_units_settled() {
        let mut fixed = Supervisor::new(crate::context::offline_context(), not_leading(), false).with_fixed_units();
        fixed.set_owned(Owned::everything(4)).await;
        assert_eq!(
            fixed.settle_due(),
            Some(tokio::time::Instant::now()),
            "no other replica to wait for"
        );

        let mut shared = Supervisor::new(crate::context::offline_context(), not_leading(), false);
        shared.set_owned(Owned::everything(4)).await;
        assert_eq!(
            shared.settle_due(),
            Some(tokio::time::Instant::now() + SETTLE),
            "a replica's first start waits for its units to stay unchanged"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn at_startup_an_empty_rule_set_is_accepted() {
        let mut supervisor = Supervisor::new(crate::context::offline_context(), not_leading(), false);
        supervisor
            .apply_rules(&RuleSet::default())
            .await
            .expect("nothing ran before");
    }

    #[tokio::test(start_paused = true)]
    async fn a_renamed_resource_definition_takes_its_crd_over_through_every_rename() {
        let mut supervisor = Supervisor::new(crate::context::offline_context(), not_leading(), false);
        supervisor
            .apply_rules(&rule_set(&rd("cron-tab.example.com", ", deletionPolicy: Delete")))
            .await
            .unwrap();
        // Renamed (same CRD crontabs.example.com), then renamed again before the CRD's label changed.
        supervisor
            .apply_rules(&rule_set(&rd("crontabs.example.com", ", names: { kind: CronTab }")))
            .await
            .unwrap();
        supervisor
            .apply_rules(&rule_set(&rd(
                "crontabs.example.com",
                ", names: { kind: CronTab, singular: crontab }",
            )))
            .await
            .unwrap();
        assert_eq!(
            supervisor.takeovers.get("crontabs.example.com"),
            Some(&vec!["cron-tab.example.com".to_owned()]),
            "an edit of the new rule keeps what it took over"
        );
        supervisor
            .apply_rules(&rule_set(&rd("cron-tab.example.com", "")))
            .await
            .unwrap();
        assert_eq!(
            supervisor.takeovers.get("cron-tab.example.com"),
            Some(&vec![
                "cron-tab.example.com".to_owned(),
                "crontabs.example.com".to_owned()
            ])
        );
        assert_eq!(supervisor.takeovers.len(), 1, "the removed rule's entry goes with it");
        supervisor
            .apply_rules(&rule_set(&format!(
                "{}---\n{}",
                rd("cron-tab.example.com", ""),
                rd("other.example.com", "")
            )))
            .await
            .unwrap();
        assert_eq!(
            supervisor.takeovers.len(),
            1,
            "an unrelated new rule takes nothing over"
        );
    }
}
