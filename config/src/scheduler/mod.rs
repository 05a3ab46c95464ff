//! The SchedulerPolicy rule kind: types, plugin vocabulary (with legacy aliases), checks, the resolved policy and
//! the scheduling engine (kube-scheduler's filters and scores, pure).

mod checks;
pub mod convert;
pub mod cosched;
pub mod engine;
pub mod gang;
pub mod gang_run;
pub mod group_preemption;
mod plugins;
pub mod pod_group;
pub mod pod_group_cycle;
pub mod queue;
mod resolved;
pub mod simulate;
mod simulate_gangs;
mod simulate_place;
mod types;
pub mod workload_api;

pub(crate) use checks::check_scheduler_policy;
pub use plugins::PluginNameError;
pub use resolved::SchedulerPolicy;
pub use types::{AlgorithmProvider, FilterSpec, SchedulerPolicyRule, SchedulerPolicySpec, ScoreSpec, ShapePoint};
