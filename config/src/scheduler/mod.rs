//! The SchedulerPolicy rule kind: types, plugin vocabulary (with legacy aliases) and checks.

mod checks;
mod resolved;
mod types;

pub(crate) use checks::check_scheduler_policy;
pub use resolved::SchedulerPolicy;
pub use types::{
    AlgorithmProvider, FilterPlugin, PluginNameError, ResolvedScore, ResourceWeight, SchedulerPolicyRule,
    SchedulerPolicySpec, ScorePlugin, ScoreSpec, ScoreSpecError, ScoringStrategy, ShapePoint,
};
