//! Ruleplane's scheduling engine: kube-scheduler v1.35's decisions (verdicts, reasons, scores) without I/O.

// Build a [`Snapshot`] of nodes and the pods on them, compile a [`Profile`] into an [`Engine`], and call
// [`Engine::schedule`] for each pending pod; [`Snapshot::assume`] the chosen node so the next decision sees it.

pub mod args;
pub mod behaviour;
pub mod csi_translation;
mod decision;
pub mod declarative;
pub mod features;
pub mod field;
mod framework;
pub mod kept;
pub mod labels;
mod nominated;
mod plugins;
mod pod_index;
pub mod pod_info;
pub mod preemption;
pub mod profile;
pub mod quantity;
pub mod queueing_hints;
pub mod resources;
mod rng;
pub mod snapshot;
pub mod status;
pub mod storage;
mod validation;
mod volume_hints;
pub mod volume_plan;

#[cfg(test)]
mod tests;

pub use behaviour::{Behaviour, GangCycle};
pub use decision::{Decision, NodeResult, Outcome, PluginScore, ScheduleError};
pub use framework::Engine;
#[cfg(test)]
use framework::heap_top;
#[cfg(test)]
pub(crate) use framework::num_feasible_nodes_to_find;
pub use preemption::{Nominate, PodRef, PostFilter, PostFilters, Preemption};
pub use profile::{FilterEntry, FilterPlugin, PluginArgs, Profile, ProfileError, ScoreEntry, ScorePlugin, TieBreak};
pub use rng::SplitMix64;
#[cfg(test)]
pub(crate) use rng::go_log;
pub use snapshot::{NodeInfo, Snapshot, SnapshotError, Workloads};
pub use status::{Code, Reason, Rejection};
pub use storage::{CsiObjects, Storage};
