//! The Reconciler rule kind: types, checks and rendering (parent + lookups → children + status).

mod checks;
mod conditions;
#[cfg(test)]
mod conditions_tests;
mod fights;
#[cfg(test)]
mod lookup_tests;
mod parent_plan;
mod plan;
mod preview;
mod refusal;
mod render;
mod resolved;
mod schema_check;
#[cfg(test)]
mod status_tests;
mod types;
mod warnings;

pub(crate) use checks::check_reconciler;
pub use conditions::{author_conditions, condition_transitions};
pub use fights::{FieldConflict, Fights, conflicts_of};
pub use parent_plan::{
    DeletionPlan, ParentPlan, PatchApply, PatchCandidate, PatchFilter, PatchPlan, PatchRelease, PlanInput, Removal,
    Scopes, declared_child_scope, dropped_patches, observed_as_written, offline_patch_targets, patch_releases,
    plan_deletion, plan_offline, plan_parent, plan_patches,
};
pub use plan::{
    ChildApply, ChildPlan, Condition, ConditionStatus, ObjectKey, Unrendered, attach_parent, child_id, children_by_id,
    contains, desired_status, each_child, fingerprint, forget_child, is_own_child, next_status, order_collections,
    parent_conditions, parent_reference, plan_children, record_child, unrendered_fate,
};
pub use preview::{ChildChange, ParentPreview, PatchChange, preview_parent};
pub use refusal::{RefusedApply, immutable_summary, is_immutable_refusal, refused_apply};
pub use render::{
    OutputYamlProblem, RenderError, Rendered, child_ready, compute_status, find_lookup_object, gather_lookups,
    gather_lookups_offline, project_lookup, project_status, render_children, render_children_observing,
    render_finalize_children, render_lookup_target, select_lookup_objects, selection_namespace, selects_lookup_object,
};
pub use resolved::{
    Child, DEFAULT_CONCURRENCY, KindRef, Reconciler, ReconcilerKinds, ResolvedLookup, ResolvedPatch, Selection,
    SelectionNamespace, StatusField,
};
pub use schema_check::{schema_diagnostics, synthetic_parent_diagnostics};
pub use types::{
    ChildTemplate, ConditionTemplate, DEFAULT_LOOKUP_MAX_ITEMS, FinalizeSpec, Lookup, PatchTemplate, ReconcilerRule,
    ReconcilerSpec, StatusExpression, StatusList, StatusListType, StatusTemplate, StatusType, StatusValue, WatchedKind,
    WhenMissing,
};
pub use warnings::{RuleWarning, reconciler_warnings};
