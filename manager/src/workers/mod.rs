//! Workers, one folder per rule kind, each a fetch → decide → apply → report [`crate::runner::Reconcile`].

pub mod reconciler;
pub mod resource_definition;
pub mod scheduler;

use ruleplane_config::Rule;
use tokio_util::sync::CancellationToken;

use crate::supervisor::WorkerContext;

/// A worker failure the supervisor restarts from; errors a worker can live with are handled inside it.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("watch for {0} ended")]
    WatchEnded(String),
    #[error("a reconcile of rule {0} panicked")]
    ReconcilePanicked(String),
    #[error("kind not served by the apiserver (yet?): {0}")]
    Discovery(String),
    #[error("rule {rule} cannot run: {reason}")]
    Unrunnable { rule: String, reason: String },
}

/// The current time as Kubernetes writes it in conditions (RFC 3339, seconds).
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Runs the worker for `rule` until `stop` is cancelled. `takes_over_from`: the rules whose CRD this
/// ResourceDefinition rule took over in a reload (a rename; empty for other kinds).
pub async fn run(
    rule: Rule,
    takes_over_from: Vec<String>,
    ctx: WorkerContext,
    stop: CancellationToken,
) -> Result<(), WorkerError> {
    match rule {
        Rule::ResourceDefinition(rd) => resource_definition::run(rd, takes_over_from, ctx, stop).await,
        Rule::Reconciler(reconciler) => reconciler::run(reconciler, ctx, stop).await,
        Rule::SchedulerPolicy(policy) => scheduler::run(policy, ctx, stop).await,
    }
}

/// Applies a removed rule's deletion policy (only called on the leader); `remaining` is the new rule set.
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
