//! The SchedulerPolicy rule kind: types, plugin vocabulary (with legacy aliases) and checks.

mod checks;
mod types;

pub(crate) use checks::check_scheduler_policy;
pub use types::{
    AlgorithmProvider, FilterPlugin, ResolvedScore, ResourceWeight, SchedulerPolicyRule, SchedulerPolicySpec,
    ScorePlugin, ScoreSpec, ScoringStrategy, ShapePoint,
};
