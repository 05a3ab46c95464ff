//! Workers, one folder per rule kind, each a fetch → decide → apply → report [`crate::runner::Reconcile`].

pub mod reconciler;
pub mod resource_definition;

use ruleplane_config::Rule;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::health::WorkerState;
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
}

/// Runs the worker for `rule` until `stop` is cancelled.
pub async fn run(rule: Rule, ctx: WorkerContext, stop: CancellationToken) -> Result<(), WorkerError> {
    match rule {
        Rule::ResourceDefinition(rd) => resource_definition::run(rd, ctx, stop).await,
        Rule::Reconciler(reconciler) => reconciler::run(reconciler, ctx, stop).await,
        other => {
            // The SchedulerPolicy worker plugs in here; until then the rule is validated and listed.
            const WHY: &str = "no worker for this rule kind in this version; the rule is validated only";
            info!(rule = other.name(), kind = other.kind().as_str(), "{WHY}");
            ctx.health
                .set_rule(other.name(), other.kind().as_str(), WorkerState::Inactive(WHY));
            stop.cancelled().await;
            Ok(())
        }
    }
}

/// Applies a removed rule's deletion policy (only called on the leader).
pub async fn on_rule_removed(rule: &Rule, ctx: &WorkerContext) {
    match rule {
        Rule::ResourceDefinition(rd) => resource_definition::on_rule_removed(rd, ctx).await,
        Rule::Reconciler(reconciler) => reconciler::on_rule_removed(reconciler, ctx).await,
        Rule::SchedulerPolicy(_) => {}
    }
}
