//! The SchedulerPolicy rule kind: types, plugin vocabulary (with legacy aliases), checks and the resolved policy.

mod checks;
mod plugins;
mod resolved;
mod types;

pub(crate) use checks::check_scheduler_policy;
pub use plugins::{FilterPlugin, PluginNameError, ScorePlugin, ScoreSpecError};
pub use resolved::SchedulerPolicy;
pub use types::{
    AlgorithmProvider, ResolvedScore, ResourceWeight, SchedulerPolicyRule, SchedulerPolicySpec, ScoreSpec,
    ScoringStrategy, ShapePoint,
};
