//! The pure decision for a parent being deleted: `finalize` children to apply and await, then every other child
//! deleted in reverse dependency order or released (`retain`), then the finalizer removed.

use serde_json::{Map, Value};

use super::PlanInput;
use crate::ownership::is_retained;
use crate::reconciler::plan::{ChildPlan, ObjectKey, Unrendered, child_id, plan_children};
use crate::reconciler::render::{RenderError, render_finalize_children};
use crate::reconciler::resolved::Reconciler;

/// What happens to a child when its parent goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// Deleted.
    Delete,
    /// Detached from its parent and left in place (`retain`): labels, annotation and owner reference go.
    Release,
}

/// Everything the deletion of one parent decides before writing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeletionPlan {
    /// `finalize` children that differ from what exists (applied before anything is removed); nothing is pruned.
    pub finalize: ChildPlan,
    /// Every other observed child of the parent, in the order to remove them (children read by others last).
    /// `finalize` children are not among them: owned by the parent, their record (a backup Job's logs) lasts
    /// until the garbage collector takes them with it.
    pub removals: Vec<(ObjectKey, Removal)>,
    /// The observed objects that passed the identity check, by id.
    pub observed: Map<String, Value>,
}

impl DeletionPlan {
    /// The `finalize` children not ready yet, by id, once `applied` (what the apiserver answered to the applies
    /// of [`DeletionPlan::finalize`]) is taken into account: the deletion waits for them (bounded by the worker).
    pub fn pending_finalize(&self, rule: &Reconciler, applied: &[Value]) -> Vec<String> {
        rule.finalize_children()
            .iter()
            .filter(|child| {
                let current = applied
                    .iter()
                    .rev()
                    .find(|o| child_id(o) == Some(child.id.as_str()))
                    .or_else(|| self.observed.get(&child.id));
                !current.is_some_and(|object| child.is_ready(object))
            })
            .map(|child| child.id.clone())
            .collect()
    }
}

/// Plans the deletion of the parent (it carries the rule's finalizer).
pub fn plan_deletion(input: &PlanInput) -> Result<DeletionPlan, RenderError> {
    let PlanInput {
        rule, parent, lookups, ..
    } = *input;
    let observed = input.own_children();
    let finalize = if rule.finalize_children().is_empty() {
        ChildPlan::default()
    } else {
        let mut finals = render_finalize_children(rule, parent, lookups)?;
        input.attach(&mut finals);
        plan_children(finals, &observed, |_| Unrendered::Keep)
    };
    let order: Vec<&str> = rule.children_in_order().rev().map(|c| c.id.as_str()).collect();
    let rank = |child: &Value| {
        let id = child_id(child);
        order.iter().position(|o| Some(*o) == id).unwrap_or(order.len())
    };
    let finalize_ids: Vec<&str> = rule.finalize_children().iter().map(|c| c.id.as_str()).collect();
    let mut doomed: Vec<&Value> = observed
        .iter()
        .filter(|child| !child_id(child).is_some_and(|id| finalize_ids.contains(&id)))
        .collect();
    doomed.sort_by_key(|child| rank(child));
    let removals = doomed
        .into_iter()
        .filter_map(|child| {
            let removal = if is_retained(child) {
                Removal::Release
            } else {
                Removal::Delete
            };
            Some((ObjectKey::of(child)?, removal))
        })
        .collect();
    Ok(DeletionPlan {
        finalize,
        removals,
        observed: observed
            .iter()
            .filter_map(|child| Some((child_id(child)?.to_string(), child.clone())))
            .collect(),
    })
}
