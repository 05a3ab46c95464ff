//! Where a Reconciler's plans are carried out: the apiserver ([`ApiWriter`]), or a recording in the worker's unit
//! tests. The worker decides nothing here; it hands each write of the plan to its writer.

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use ruleplane_config::ownership::{PARENT_ANNOTATION, PARENT_UID_LABEL};
use ruleplane_config::{ChildApply, ObjectKey, PatchApply, Removal};
use serde_json::json;

use super::io::{self, AppliedChild};
use super::{ParentReconciler, ReconcilerError, Watched};

/// The writes of a Reconciler's plans. Each method's default is the write to the apiserver; a test writer
/// overrides every one of them.
pub(super) trait ChildWriter: Sync {
    /// Puts the rule's cleanup finalizer on the parent (replacing the legacy shared one).
    async fn add_finalizer(
        &self,
        reconciler: &ParentReconciler,
        parent: &DynamicObject,
    ) -> Result<(), ReconcilerError> {
        io::change_finalizer(reconciler, parent, true).await
    }

    /// Takes the rule's finalizer (and the legacy one) off the parent: its deletion completes.
    async fn remove_finalizer(
        &self,
        reconciler: &ParentReconciler,
        parent: &DynamicObject,
    ) -> Result<(), ReconcilerError> {
        io::change_finalizer(reconciler, parent, false).await
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

    /// Deletes a child refused as immutable (only while its UID is `uid`), waits until it is gone, creates it.
    async fn recreate(
        &self,
        reconciler: &ParentReconciler,
        watched: &Watched,
        apply: &ChildApply,
        parent: &DynamicObject,
        uid: &str,
    ) -> Result<AppliedChild, ReconcilerError> {
        io::recreate_child(reconciler, watched, apply, parent, uid).await
    }

    /// Deletes or releases one child of the parent (the plans only pass the parent's own children).
    async fn remove(
        &self,
        reconciler: &ParentReconciler,
        watched: &Watched,
        key: &ObjectKey,
        parent: &DynamicObject,
        removal: Removal,
    ) -> Result<(), ReconcilerError> {
        reconciler.writes.forget(&reconciler.child_object(watched, key));
        let api = io::api_for(reconciler, watched, key.namespace.as_deref());
        let (result, reason, note) = match removal {
            Removal::Delete => (
                api.delete(&key.name, &DeleteParams::background()).await.map(|_| ()),
                "Deleted",
                format!("deleted {key} (no longer rendered)"),
            ),
            Removal::Release => {
                let detach = json!({ "metadata": {
                    "labels": { PARENT_UID_LABEL: null },
                    "annotations": { PARENT_ANNOTATION: null },
                    "ownerReferences": null,
                } });
                let released = api
                    .patch(&key.name, &PatchParams::default(), &Patch::Merge(detach))
                    .await;
                (
                    released.map(|_| ()),
                    "Released",
                    format!("released {key} (retain: true)"),
                )
            }
        };
        io::report_done(reconciler, parent, result, reason, note).await
    }

    /// Applies one patch of an object the rule does not own; answers whether the object was there to patch.
    async fn patch(
        &self,
        reconciler: &ParentReconciler,
        watched: &Watched,
        apply: &PatchApply,
    ) -> Result<bool, ReconcilerError> {
        io::apply_patch(reconciler, watched, apply).await
    }

    /// Releases `managers` (a deleted parent's patch field managers) from the objects of one patched kind in
    /// `namespace` (`None`: a cluster-scoped kind).
    async fn release_patches(
        &self,
        reconciler: &ParentReconciler,
        watched: &Watched,
        namespace: Option<&str>,
        managers: &[String],
    ) -> Result<(), ReconcilerError> {
        let resource = &watched.watch.resource;
        io::release_patches(&reconciler.ctx.client, resource, namespace, |manager| {
            managers.iter().any(|m| m == manager)
        })
        .await?;
        Ok(())
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
