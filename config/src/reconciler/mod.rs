//! The Reconciler rule kind: types, checks and rendering (parent + lookups → children + status).

mod checks;
mod fights;
mod parent_plan;
mod plan;
mod preview;
mod render;
mod resolved;
mod schema_check;
mod types;
mod warnings;

pub(crate) use checks::check_reconciler;
pub use fights::{FieldConflict, Fights, conflicts_of};
pub use parent_plan::{
    DeletionPlan, ParentPlan, PatchApply, PatchCandidate, PatchFilter, PatchPlan, PatchRelease, PlanInput, Removal,
    Scopes, declared_child_scope, dropped_patches, observed_as_written, patch_releases, plan_deletion, plan_offline,
    plan_parent, plan_patches,
};
pub use plan::{
    ChildApply, ChildPlan, Condition, ObjectKey, Unrendered, attach_parent, child_id, children_by_id, contains,
    desired_status, each_child, fingerprint, forget_child, is_own_child, next_status, order_collections,
    parent_conditions, parent_reference, plan_children, record_child, unrendered_fate,
};
pub use preview::{ChildChange, ParentPreview, preview_parent};
pub use render::{
    OutputYamlProblem, RenderError, Rendered, child_ready, compute_status, find_lookup_object, gather_lookups,
    project_lookup, render_children, render_children_observing, render_finalize_children, render_lookup_target,
};
pub use resolved::{
    Child, DEFAULT_CONCURRENCY, KindRef, Reconciler, ReconcilerKinds, ResolvedLookup, ResolvedPatch, StatusField,
};
pub use schema_check::{schema_diagnostics, synthetic_parent_diagnostics};
pub use types::{ChildTemplate, FinalizeSpec, Lookup, PatchTemplate, ReconcilerRule, ReconcilerSpec, WatchedKind};
pub use warnings::{RuleWarning, reconciler_warnings};
