//! One reconcile of a live parent: fetch (caches, lookups, patched objects) → the plan (`plan_parent`, as `diff` and
//! `test` run it) → its writes (children, patches) through a [`ChildWriter`] → the children as they now are, for
//! the status report.

use kube::api::DynamicObject;
use kube::runtime::events::EventType;
use ruleplane_config::{
    ChildApply, ObjectKey, ParentPlan, PlanInput, Reconciler, RefusedApply, Removal, each_child, forget_child,
    order_collections, plan_parent, record_child, refused_apply,
};
use serde_json::Value;

use super::io::ChildChange;
use super::writer::ChildWriter;
use super::{Converged, ParentKey, ParentReconciler, ReconcilerError};

impl ParentReconciler {
    /// Fetch → decide → apply for one parent; returns the children as they are after the applies.
    pub(super) async fn converge(
        &self,
        writer: &impl ChildWriter,
        key: &ParentKey,
        parent: &DynamicObject,
        parent_value: &Value,
    ) -> Result<Converged, ReconcilerError> {
        // fetch: lookups from the caches, remembering what this parent read; the labelled children
        let lookups = self.lookups_for(key, parent_value).await?;
        let uid = parent_value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let labelled = self.labelled_children(uid);
        let patch_targets = self.patch_targets(parent_value);
        // decide: the one plan (identity check, render, attach, compare) that `diff` and `test` run too
        let ParentPlan {
            desired,
            children: plan,
            add_finalizer,
            waiting,
            excluded,
            held,
            observed: observed_by_id,
            patches,
            ..
        } = self.with_scopes(|scopes| {
            let input = PlanInput {
                rule: &self.rule,
                parent: parent_value,
                lookups: &lookups,
                observed: &labelled,
                patch_targets: &patch_targets,
                scopes,
                signer: &self.ctx.signer,
                shards: self.ctx.shards.count,
            };
            crate::runner::cpu_step(|| plan_parent(&input))
        })?;
        // Children no owner reference can clean up (and finalize children) need the finalizer before they exist.
        if add_finalizer {
            writer.add_finalizer(self, parent).await?;
        }
        // apply: only what differs; a converged parent costs no request here
        let mut now = observed_by_id.clone();
        // One child's conflict or rejection does not hold back the others, nor pruning; the first error is
        // reported after all were tried.
        let mut first_error = None;
        let (mut created, mut updated, mut recreated) = (Vec::new(), Vec::new(), Vec::new());
        // A parent's children go out at once: their order within a round does not matter (a child that reads
        // another is only rendered once that one exists and is ready), and a parent's latency is then one
        // round trip instead of one per child.
        // With children waiting for one of these, the echo is what renders them next: keep it.
        let echoes_carry_nothing = waiting.is_empty();
        let observed_of =
            |key: &ObjectKey| each_child(&observed_by_id).find(|child| ObjectKey::of(child).as_ref() == Some(key));
        let version_of = |key: &ObjectKey| {
            observed_of(key)
                .and_then(|child| child.pointer("/metadata/resourceVersion"))
                .and_then(Value::as_str)
        };
        let applies = futures::future::join_all(plan.apply.iter().map(|apply| async move {
            let applied = match self.child_kind(&apply.key.api_version, &apply.key.kind) {
                Ok(watched) => {
                    let object = self.child_object(watched, &apply.key);
                    let write = writer.apply(self, watched, apply, parent);
                    let written = if echoes_carry_nothing {
                        let before = version_of(&apply.key);
                        self.writes.track(key.clone(), object, before, write).await
                    } else {
                        self.writes.forget(&object);
                        write.await
                    };
                    match written {
                        Err(ReconcilerError::Rejected {
                            child,
                            message,
                            immutable: true,
                        }) => {
                            // decide (pure): recreate only a `recreate` child this parent owns, never a retained one
                            match refused_apply(&self.rule, apply, observed_of(&apply.key)) {
                                RefusedApply::Recreate { uid } => {
                                    writer.recreate(self, watched, apply, parent, &uid).await
                                }
                                RefusedApply::Report => Err(ReconcilerError::Rejected {
                                    message: immutable_hint(&self.rule, apply, message),
                                    child,
                                    immutable: true,
                                }),
                            }
                        }
                        other => other,
                    }
                }
                Err(error) => Err(error),
            };
            (apply, applied)
        }))
        .await;
        if !applies.is_empty()
            && let Some(latency) = crate::runner::since_due()
        {
            self.change_to_applied.observe(latency.as_secs_f64());
        }
        let mut fights = Vec::new();
        for (apply, applied) in applies {
            match applied {
                Ok(applied) => {
                    if !apply.created {
                        fights.extend(self.record_fights(key, &apply.key, &applied.conflicts));
                    }
                    match applied.change {
                        ChildChange::Created => created.push(apply.key.clone()),
                        ChildChange::Updated => updated.push(apply.key.clone()),
                        ChildChange::Recreated => recreated.push(apply.key.clone()),
                        ChildChange::Unchanged => {}
                    }
                    record_child(&self.rule, &mut now, applied.object);
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        writer.announce(self, parent, "Created", &created).await;
        writer.announce(self, parent, "Updated", &updated).await;
        writer.announce(self, parent, "Recreated", &recreated).await;
        // A fight is told once, when it starts; the `Synced` message carries it while it lasts.
        for fight in fights {
            let note = format!(
                "{fight}, which keeps changing it back; list the field in the child's `handOver` or stop the other writer"
            );
            writer
                .publish(self, parent, EventType::Warning, "FieldFight", note)
                .await;
        }
        // A patch that cannot be rendered is reported once the rest is written: it holds back nothing else.
        for failure in patches.failures {
            first_error.get_or_insert(failure.into());
        }
        // patches of objects the rule does not own: only the fields that differ, never creating an object; sent
        // together, as the children are
        if !patches.apply.is_empty() {
            let mut patched = Vec::new();
            let done = futures::future::join_all(patches.apply.iter().map(|apply| async move {
                match self.patched_kind(&apply.key.api_version, &apply.key.kind) {
                    Ok(watched) => writer.patch(self, watched, apply).await,
                    Err(error) => Err(error),
                }
            }))
            .await;
            for (apply, done) in patches.apply.iter().zip(done) {
                match done {
                    Ok(true) => patched.push(apply.key.clone()),
                    Ok(false) => {}
                    Err(error) => {
                        first_error.get_or_insert(error);
                    }
                }
            }
            writer.announce(self, parent, "Patched", &patched).await;
        }
        let removals = plan
            .prune
            .iter()
            .map(|key| (key, Removal::Delete))
            .chain(plan.release.iter().map(|key| (key, Removal::Release)));
        for (key, removal) in removals {
            let watched = self.child_kind(&key.api_version, &key.kind)?;
            writer.remove(self, watched, key, parent, removal).await?;
            forget_child(&mut now, key);
        }
        // Created items join their collection's list at its end: back in item order, as status reads it.
        order_collections(&mut now, &desired);
        match first_error {
            Some(error) => Err(error),
            None => Ok(Converged {
                children: now,
                lookups,
                excluded,
                held,
            }),
        }
    }
}

/// The apiserver's immutable refusal, with what the rule could do about it when the child does not `recreate`.
fn immutable_hint(rule: &Reconciler, apply: &ChildApply, message: String) -> String {
    match rule.child_of(&apply.object) {
        Some(child) if !child.recreate && !child.retain => format!(
            "{message} (set `recreate: true` on child `{}` to have it deleted and created again)",
            child.id
        ),
        _ => message,
    }
}
