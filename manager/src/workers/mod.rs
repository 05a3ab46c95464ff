//! Workers, one folder per rule kind, each a fetch → decide → apply → report [`crate::runner::Reconcile`].

pub mod reconciler;
pub mod resource_definition;
pub mod scheduler;

use ruleplane_config::Rule;
use tokio_util::sync::CancellationToken;

use crate::context::{WorkerContext, WorkerError};

/// The current time as Kubernetes writes it in conditions (RFC 3339, seconds).
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Runs the worker for `rule` until `stop` is cancelled. `takes_over_from`: the rules whose CRD this
/// ResourceDefinition rule took over in a reload (a rename; empty for other kinds); `scheduling`: the cache every
/// SchedulerPolicy worker shares.
pub async fn run(
    rule: Rule,
    takes_over_from: Vec<String>,
    scheduling: scheduler::SchedulingCache,
    ctx: WorkerContext,
    stop: CancellationToken,
) -> Result<(), WorkerError> {
    match rule {
        Rule::ResourceDefinition(rd) => resource_definition::run(rd, takes_over_from, ctx, stop).await,
        Rule::Reconciler(reconciler) => reconciler::run(reconciler, ctx, stop).await,
        Rule::SchedulerPolicy(policy) => scheduler::run(policy, scheduling, ctx, stop).await,
    }
}

/// What a changed rule leaves behind that its restarted worker will not see (only called where the rule's unit runs): a
/// Reconciler's dropped patches are released.
pub async fn on_rule_changed(old: &Rule, new: &Rule, ctx: &WorkerContext) {
    if let (Rule::Reconciler(old), Rule::Reconciler(new)) = (old, new) {
        reconciler::on_rule_changed(old, new, ctx).await;
    }
}

/// Applies a removed rule's deletion policy (only called where the rule's unit runs); `remaining` is the new rule set.
pub async fn on_rule_removed(rule: &Rule, remaining: &[Rule], ctx: &WorkerContext) {
    match rule {
        Rule::ResourceDefinition(rd) => resource_definition::on_rule_removed(rd, remaining, ctx).await,
        Rule::Reconciler(reconciler) => {
            let reconcilers: Vec<&ruleplane_config::Reconciler> = remaining
                .iter()
                .filter_map(|rule| match rule {
                    Rule::Reconciler(other) => Some(other),
                    _ => None,
                })
                .collect();
            reconciler::on_rule_removed(reconciler, &reconcilers, ctx).await
        }
        Rule::SchedulerPolicy(_) => {}
    }
}
