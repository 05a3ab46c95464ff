//! Where a Reconciler's plans are carried out: the apiserver ([`ApiWriter`]), or a recording in the worker's unit
//! tests. The worker decides nothing here; it hands each write of the plan to its writer.

use kube::api::DynamicObject;
use kube::runtime::events::EventType;
use ruleplane_config::{ChildApply, ObjectKey, Removal};

use super::io::{self, AppliedChild};
use super::{ParentReconciler, ReconcilerError, Watched, cleanup};

/// The writes of a Reconciler's plans. Each method's default is the write to the apiserver; a test writer
/// overrides every one of them.
pub(super) trait ChildWriter: Sync {
    /// Puts the rule's cleanup finalizer on the parent (replacing the legacy shared one).
    async fn add_finalizer(
        &self,
        reconciler: &ParentReconciler,
        parent: &DynamicObject,
    ) -> Result<(), ReconcilerError> {
        cleanup::change_finalizer(reconciler, parent, true).await
    }

    /// Takes the rule's finalizer (and the legacy one) off the parent: its deletion completes.
    async fn remove_finalizer(
        &self,
        reconciler: &ParentReconciler,
        parent: &DynamicObject,
    ) -> Result<(), ReconcilerError> {
        cleanup::change_finalizer(reconciler, parent, false).await
    }

    /// Applies one child; answers the object as stored and what the apply did.
    async fn apply(
        &self,
        reconciler: &ParentReconciler,
        watched: &Watched,
        apply: &ChildApply,
        parent: &DynamicObject,
    ) -> Result<AppliedChild, ReconcilerError> {
        io::apply_child(reconciler, watched, apply, parent).await
    }

    /// Deletes or releases one child of the parent.
    async fn remove(
        &self,
        reconciler: &ParentReconciler,
        watched: &Watched,
        key: &ObjectKey,
        parent: &DynamicObject,
        removal: Removal,
    ) -> Result<(), ReconcilerError> {
        io::remove_child(reconciler, watched, key, parent, removal).await
    }

    /// Tells the parent's story: one Event for the children a reconcile created (or updated).
    async fn announce(
        &self,
        reconciler: &ParentReconciler,
        parent: &DynamicObject,
        reason: &str,
        children: &[ObjectKey],
    ) {
        io::announce(reconciler, parent, reason, children).await;
    }

    /// An Event on the parent (a finalize timeout).
    async fn publish(
        &self,
        reconciler: &ParentReconciler,
        parent: &DynamicObject,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        io::publish(reconciler, parent, type_, reason, note).await;
    }
}

/// The apiserver, through the rule's client: every default of [`ChildWriter`].
pub(super) struct ApiWriter;

impl ChildWriter for ApiWriter {}
