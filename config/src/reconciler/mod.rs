//! The Reconciler rule kind: types, checks and rendering (parent + lookups → children + status).

mod checks;
mod plan;
mod render;
mod resolved;
mod types;

pub(crate) use checks::check_reconciler;
pub use plan::{
    ChildApply, ChildPlan, Condition, ObjectKey, Unrendered, attach_parent, contains, fingerprint, next_status,
    plan_children, unrendered_fate,
};
pub use render::{
    OutputYamlProblem, RenderError, Rendered, child_ready, compute_status, gather_lookups, project_lookup,
    render_children, render_children_observing, render_finalize_children, render_lookup_target,
};
pub use resolved::{Child, DEFAULT_CONCURRENCY, Reconciler, ReconcilerKinds, ResolvedLookup, StatusField};
pub use types::{ChildTemplate, FinalizeSpec, Lookup, ReconcilerRule, ReconcilerSpec, WatchedKind};
