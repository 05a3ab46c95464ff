//! Prometheus metrics every worker reports through, encoded by prometheus-client.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleErrorLabels {
    pub rule: String,
    pub kind: String,
    /// The error's short category (e.g. `conflict`, `invalid`, `api`), bounded in cardinality.
    pub category: String,
}

/// A watched kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub api_version: String,
    pub kind: String,
}

impl KindLabels {
    pub fn of(resource: &kube::api::ApiResource) -> Self {
        KindLabels {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        }
    }
}

/// One shared watch: its kind, its selectors (empty: none) and what it caches (`objects` or `metadata`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    pub api_version: String,
    pub kind: String,
    pub label_selector: String,
    pub field_selector: String,
    pub content: String,
}

/// What every shared watch reports.
#[derive(Clone, Default)]
pub struct WatchMetrics {
    pub resyncs: Family<KindLabels, Counter>,
    pub objects: Family<WatchLabels, Gauge>,
    pub unproven: Family<KindLabels, Counter>,
}

/// One unit of the work replicas share (`reconciler-shard-3`, `resource-definitions`, `schedulers`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnitLabels {
    pub unit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

/// A replica's membership state (`member`, `joining`, `retrying`, `leaving`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

/// A scheduler policy and an outcome (`scheduled`, `unschedulable`, `error`) or a queue
/// (`active`, `backoff`, `unschedulable`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub policy: String,
    pub state: String,
}

/// A scheduler policy.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyOnlyLabels {
    pub policy: String,
}

/// A scheduler policy and the cluster event that moved unschedulable pods back (kube-scheduler's event label,
/// e.g. `NodeUpdateNodeLabel`, `AssignedPodDelete`, `UnschedulableTimeout`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequeueLabels {
    pub policy: String,
    pub event: String,
}

/// What the running binary is (`ruleplane_build_info`), so dashboards can tell replicas' versions apart.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub git_commit: String,
    pub kubernetes: String,
}

pub struct Metrics {
    registry: Registry,
    pub leader: Gauge,
    pub unit_owned: Family<UnitLabels, Gauge>,
    pub unit_transitions: Family<ResultLabels, Counter>,
    pub members: Gauge,
    pub membership_state: Family<StateLabels, Gauge>,
    pub shard_reconciles: Family<UnitLabels, Counter>,
    pub shard_queue_depth: Family<UnitLabels, Gauge>,
    pub rules_loaded: Gauge,
    pub rule_errors: Gauge,
    pub reload_refused: Gauge,
    pub reloads: Family<ResultLabels, Counter>,
    pub worker_restarts: Family<RuleLabels, Counter>,
    pub reconciles: Family<RuleLabels, Counter>,
    pub reconcile_errors: Family<RuleErrorLabels, Counter>,
    pub reconcile_duration: Family<RuleLabels, Histogram>,
    pub change_to_applied: Family<RuleLabels, Histogram>,
    pub lookup_contents: Family<RuleLabels, Gauge>,
    pub queue_depth: Family<RuleLabels, Gauge>,
    pub reports_waiting: Family<RuleLabels, Gauge>,
    pub queue_wait: Family<RuleLabels, Histogram>,
    pub watches: WatchMetrics,
    pub scheduling_attempts: Family<PolicyLabels, Counter>,
    pub pending_pods: Family<PolicyLabels, Gauge>,
    pub scheduler_requeues: Family<RequeueLabels, Counter>,
    pub scheduling_e2e: Family<PolicyOnlyLabels, Histogram>,
    pub binding_duration: Family<PolicyOnlyLabels, Histogram>,
    pub events: Family<ResultLabels, Counter>,
    pub runtime_lag: Histogram,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ruleplane");
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: crate::build_info::VERSION.to_owned(),
                git_commit: crate::build_info::GIT_COMMIT.to_owned(),
                kubernetes: crate::build_info::KUBERNETES.to_owned(),
            })
            .set(1);
        registry.register(
            "build_info",
            "Always 1; the labels say which version and git commit this is and the Kubernetes version it targets",
            build_info,
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica runs any unit of work (it holds at least one unit Lease), else 0",
            leader.clone(),
        );
        let unit_owned = Family::<UnitLabels, Gauge>::default();
        registry.register(
            "unit_owned",
            "1 while this replica runs the unit's work (it holds the unit's Lease), else 0",
            unit_owned.clone(),
        );
        let unit_transitions = Family::<ResultLabels, Counter>::default();
        registry.register(
            "unit_transitions",
            "Unit Leases acquired, released (handed over), marked for a handover, lost, or abandoned at the renew deadline",
            unit_transitions.clone(),
        );
        let members = Gauge::default();
        registry.register(
            "members",
            "Live replicas this replica counts, itself included (from their member Leases)",
            members.clone(),
        );
        let membership_state = Family::<StateLabels, Gauge>::default();
        registry.register(
            "membership_state",
            "1 for this replica's membership state, 0 for the others: member (its member Lease confirmed, it may \
             run units), joining (starting), retrying (not a member while it should be: no unit is assigned to \
             it), leaving (shutting down)",
            membership_state.clone(),
        );
        let shard_queue_depth = Family::<UnitLabels, Gauge>::default();
        registry.register(
            "shard_queue_depth",
            "Parents waiting in the Reconciler work queues of this replica per shard, all rules together (sampled about once a second)",
            shard_queue_depth.clone(),
        );
        let shard_reconciles = Family::<UnitLabels, Counter>::default();
        registry.register(
            "shard_reconciles",
            "Reconciles started on this replica per Reconciler shard",
            shard_reconciles.clone(),
        );
        let rules_loaded = Gauge::default();
        registry.register("rules_loaded", "Rules in the running rule set", rules_loaded.clone());
        let rule_errors = Gauge::default();
        registry.register(
            "rule_file_errors",
            "Errors in the rule files at the last load attempt (0 when the files are valid)",
            rule_errors.clone(),
        );
        let reload_refused = Gauge::default();
        registry.register(
            "rule_reload_refused",
            "1 while the last reload was refused because it would remove every rule or every ResourceDefinition rule (the previous rules keep running), else 0",
            reload_refused.clone(),
        );
        let reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reloads",
            "Rule reloads by result (success, invalid, refused)",
            reloads.clone(),
        );
        let worker_restarts = Family::<RuleLabels, Counter>::default();
        registry.register(
            "worker_restarts",
            "Times a rule's worker was restarted after failing",
            worker_restarts.clone(),
        );
        let reconciles = Family::<RuleLabels, Counter>::default();
        registry.register("reconciles", "Reconciliations run, per rule", reconciles.clone());
        let reconcile_errors = Family::<RuleErrorLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciliations that failed, per rule and error category",
            reconcile_errors.clone(),
        );
        let reconcile_duration = Family::<RuleLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "reconcile_duration_seconds",
            "Time spent per reconciliation",
            reconcile_duration.clone(),
        );
        let change_to_applied = Family::<RuleLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "change_to_applied_seconds",
            "From the change that queued a parent (or its requeue time) to the last child write of its reconcile answered; reconciles that wrote children only",
            change_to_applied.clone(),
        );
        let lookup_contents = Family::<RuleLabels, Gauge>::default();
        registry.register(
            "lookup_contents",
            "Objects a Reconciler keeps the content of for lookups with templated names: those its parents read",
            lookup_contents.clone(),
        );
        let queue_depth = Family::<RuleLabels, Gauge>::default();
        registry.register(
            "queue_depth",
            "Keys waiting in a rule's work queue (due now or later)",
            queue_depth.clone(),
        );
        let reports_waiting = Family::<RuleLabels, Gauge>::default();
        registry.register(
            "reports_waiting",
            "Reports (a Reconciler parent's status) decided and waiting for their turn to be written",
            reports_waiting.clone(),
        );
        let queue_wait = Family::<RuleLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "queue_wait_seconds",
            "Time a key waited in a rule's work queue, from due (a change, or a requeue's time) to its reconcile",
            queue_wait.clone(),
        );
        let watches = WatchMetrics::default();
        registry.register(
            "watch_resyncs",
            "Times a subscriber of a shared watch fell behind and resynced from the cache",
            watches.resyncs.clone(),
        );
        registry.register(
            "watch_objects",
            "Objects in a shared watch's cache (content `metadata`: identities only)",
            watches.objects.clone(),
        );
        registry.register(
            "watch_unproven_objects",
            "Events of objects with Ruleplane's child labels whose signature does not prove them Ruleplane's: neither \
             cached nor passed on",
            watches.unproven.clone(),
        );
        let scheduling_attempts = Family::<PolicyLabels, Counter>::default();
        registry.register(
            "scheduling_attempts",
            "Scheduling attempts per SchedulerPolicy by result (state: scheduled, unschedulable, error)",
            scheduling_attempts.clone(),
        );
        let pending_pods = Family::<PolicyLabels, Gauge>::default();
        registry.register(
            "pending_pods",
            "Pods waiting for a SchedulerPolicy by queue (state: active, backoff, unschedulable)",
            pending_pods.clone(),
        );
        let scheduler_requeues = Family::<RequeueLabels, Counter>::default();
        registry.register(
            "scheduler_requeues",
            "Unschedulable pods a SchedulerPolicy moved back to be retried, by the cluster event whose queueing hint \
             said it could help (event: kube-scheduler's label)",
            scheduler_requeues.clone(),
        );
        let scheduling_e2e = Family::<PolicyOnlyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 20))
        });
        registry.register(
            "scheduling_e2e_duration_seconds",
            "From a pod first seen pending to its binding, per SchedulerPolicy",
            scheduling_e2e.clone(),
        );
        let binding_duration = Family::<PolicyOnlyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "binding_duration_seconds",
            "Time of the pods/binding request, per SchedulerPolicy",
            binding_duration.clone(),
        );
        let events = Family::<ResultLabels, Counter>::default();
        registry.register(
            "events",
            "Normal Events of the Event lane by result (created, failed, dropped: the queue was full)",
            events.clone(),
        );
        let runtime_lag = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "runtime_lag_seconds",
            "How late a task due every 100 ms is woken: what a Lease renewal or a probe's answer waits for",
            runtime_lag.clone(),
        );
        Metrics {
            runtime_lag,
            events,
            scheduling_attempts,
            pending_pods,
            scheduler_requeues,
            scheduling_e2e,
            binding_duration,
            registry,
            change_to_applied,
            lookup_contents,
            queue_depth,
            reports_waiting,
            queue_wait,
            watches,
            leader,
            unit_owned,
            unit_transitions,
            members,
            membership_state,
            shard_reconciles,
            shard_queue_depth,
            rules_loaded,
            rule_errors,
            reload_refused,
            reloads,
            worker_restarts,
            reconciles,
            reconcile_errors,
            reconcile_duration,
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail except on a formatter error, which String never returns.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub fn labels(rule: &str, kind: &str) -> RuleLabels {
        RuleLabels {
            rule: rule.to_owned(),
            kind: kind.to_owned(),
        }
    }
}

/// How often the runtime's lag is sampled: often enough to catch a stall that matters to a 2-s Lease retry,
/// rare enough to cost nothing measurable.
const LAG_SAMPLE_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

/// Samples, for as long as the runtime runs, how late a sleeping task wakes. Every task of the process shares
/// the runtime's worker threads, so this is the delay a Lease renewal, a probe's answer or a watch event meets.
pub async fn sample_runtime_lag(histogram: Histogram) {
    loop {
        let due = tokio::time::Instant::now() + LAG_SAMPLE_PERIOD;
        tokio::time::sleep_until(due).await;
        histogram.observe(tokio::time::Instant::now().saturating_duration_since(due).as_secs_f64());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_is_one_gauge_labelled_with_the_version_commit_and_kubernetes_version() {
        let text = Metrics::new().encode();
        let line = text
            .lines()
            .find(|l| l.starts_with("ruleplane_build_info{"))
            .unwrap_or_else(|| panic!("no build_info in\n{text}"));
        assert!(line.ends_with("} 1"), "{line}");
        assert!(
            line.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
            "{line}"
        );
        assert!(line.contains("git_commit=\""), "{line}");
        let window = format!(
            "{}-{}",
            ruleplane_config::KubernetesVersion::OLDEST,
            ruleplane_config::KubernetesVersion::NEWEST
        );
        assert!(line.contains(&format!("kubernetes=\"{window}\"")), "{line}");
        assert!(text.contains("# TYPE ruleplane_build_info gauge"), "{text}");
    }
}
