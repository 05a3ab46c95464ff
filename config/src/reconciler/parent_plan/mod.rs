//! One pure decision per parent — what the worker writes, what `ruleplane diff` shows and `ruleplane test`
//! checks: the same function, so the offline tools cannot disagree with the cluster.

use serde_json::{Map, Value};

mod deletion;
mod hand_over;
mod patches;

pub use deletion::{DeletionPlan, Removal, plan_deletion};
pub use patches::{
    PatchApply, PatchCandidate, PatchFilter, PatchPlan, PatchRelease, dropped_patches, patch_releases, plan_patches,
};

use super::plan::{
    ChildPlan, ObjectKey, attach_parent, children_by_id, each_child, is_own_child, order_collections, parent_reference,
    plan_children, unrendered_fate,
};
use super::render::{RenderError, render_children_observing};
use super::resolved::Reconciler;
use crate::ownership::{
    CHILD_ID_LABEL, LEGACY_CLEANUP_FINALIZER, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_ANNOTATION, PARENT_UID_LABEL,
    RULE_LABEL, SHARD_LABEL, cleanup_finalizer, is_retained,
};
use crate::provenance::ChildSigner;

/// How the apiserver serves the parent and the children's kinds, as the worker learns it from discovery (and the
/// offline tools from the rule set: [`Scopes::declared`]).
pub struct Scopes<'a> {
    /// Whether parents are namespaced.
    pub parent_namespaced: bool,
    /// Whether a child kind (`apiVersion`, `kind`) is namespaced.
    pub child_namespaced: &'a dyn Fn(&str, &str) -> bool,
    /// Whether the manager writes the parent's status (custom kinds), and with `observedGeneration` (status
    /// subresource).
    pub status: Option<bool>,
}

impl Scopes<'_> {
    /// The scopes the rule set says (built-in and declared kinds), for the offline tools; a kind it does not know
    /// counts as namespaced, as most are. `child_namespaced` is built by [`declared_child_scope`].
    pub fn declared<'a>(rule: &Reconciler, child_namespaced: &'a dyn Fn(&str, &str) -> bool) -> Scopes<'a> {
        let parent = rule.kinds.parent.as_ref();
        Scopes {
            parent_namespaced: parent.is_none_or(|kind| kind.namespaced),
            child_namespaced,
            status: parent
                .filter(|_| rule.writes_status())
                .map(|kind| kind.status_subresource),
        }
    }
}

/// Whether a child kind of `rule` is namespaced, as the rule set declares it (unknown kinds: namespaced).
pub fn declared_child_scope(rule: &Reconciler) -> impl Fn(&str, &str) -> bool + '_ {
    move |api_version: &str, kind: &str| {
        rule.kinds
            .children
            .iter()
            .find(|known| known.api_version == api_version && known.kind == kind)
            .is_none_or(|known| known.namespaced)
    }
}

/// What one parent's plan is decided from: the rule, the parent as observed, its lookups (as
/// [`super::gather_lookups`] returns them), the objects found by the rule's and the parent's labels (only those
/// that pass the identity check count), the objects of the patched kinds its `patches` may select (see
/// [`plan_patches`]; none for a rule without patches), how the kinds are served, and the key children are signed
/// and proven with.
pub struct PlanInput<'a> {
    pub rule: &'a Reconciler,
    pub parent: &'a Value,
    pub lookups: &'a Map<String, Value>,
    pub observed: &'a [Value],
    pub patch_targets: &'a [Value],
    pub scopes: &'a Scopes<'a>,
    pub signer: &'a ChildSigner,
    /// How many shards the replicas split parents into (`--shards`): children carry their parent's shard in
    /// [`SHARD_LABEL`] so a replica's child watches select only its own shards' children at the apiserver.
    pub shards: u32,
}

impl PlanInput<'_> {
    /// Of the observed objects, those that pass the identity check.
    fn own_children(&self) -> Vec<Value> {
        self.observed
            .iter()
            .filter(|child| {
                is_own_child(
                    self.rule,
                    self.parent,
                    self.scopes.parent_namespaced,
                    child,
                    self.signer,
                )
            })
            .cloned()
            .collect()
    }

    /// Marks rendered children as the parent's (labels, annotation, owner reference where allowed, signature).
    fn attach(&self, children: &mut [Value]) {
        for child in children {
            let namespaced = (self.scopes.child_namespaced)(
                child["apiVersion"].as_str().unwrap_or_default(),
                child["kind"].as_str().unwrap_or_default(),
            );
            attach_parent(
                child,
                self.parent,
                self.scopes.parent_namespaced,
                namespaced,
                self.signer,
            );
            set_shard_label(child, self.parent, self.shards);
        }
    }
}

/// Labels a child with its parent's shard (see [`crate::sharding::shard_of`]); written, never read back for a
/// decision: a child without it (written before sharding) is still the parent's, and gains it on its next apply.
fn set_shard_label(child: &mut Value, parent: &Value, shards: u32) {
    let namespace = parent
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = parent
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let shard = crate::sharding::shard_label_value(crate::sharding::shard_of(namespace, name, shards));
    if let Some(labels) = child.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.insert(SHARD_LABEL.into(), shard.into());
    }
}

/// Everything one reconcile of one parent decides before writing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParentPlan {
    /// Every rendered child, attached to the parent (labels, annotation, owner reference, signature), in
    /// dependency order: what the cluster should hold.
    pub desired: Vec<Value>,
    /// What differs from the observed children: to apply, prune, release.
    pub children: ChildPlan,
    /// The parent needs its cleanup finalizer before any child is written: the rule has `finalize` children or
    /// `patches` (their fields are released when the parent goes), or a child no owner reference can clean up
    /// (another namespace, cluster-scoped under a namespaced parent) that is not retained.
    pub needs_finalizer: bool,
    /// The finalizer is needed and the parent does not carry this rule's own yet (or still carries the legacy
    /// shared one, which this rule's replaces): the worker adds it before writing any child.
    pub add_finalizer: bool,
    /// Children not rendered yet: they read a child that does not exist or is not ready.
    pub waiting: Vec<String>,
    /// Children whose `includeWhen` selected nothing (or that read such a child): they must not exist.
    pub excluded: Vec<String>,
    /// Lookups with `whenMissing: Wait` that found nothing: every child waits and no patch is planned.
    pub held: Vec<String>,
    /// The status fields projected from the parent, its lookups and the children as rendered (before any write;
    /// the worker projects again over what its writes answered).
    pub projected_status: Map<String, Value>,
    /// The observed objects that passed the identity check: this parent's children as they are, by id.
    pub observed: Map<String, Value>,
    /// The `patches` of objects the rule does not own: what to apply to which of the `patch_targets`.
    pub patches: PatchPlan,
}

impl ParentPlan {
    /// The children by id as they will be once the plan is carried out without a write failing: observed ones,
    /// else what is created; pruned and released ones gone. (The worker uses what the apiserver answered instead.)
    pub fn children_after(&self, rule: &Reconciler) -> Map<String, Value> {
        let gone: Vec<&ObjectKey> = self.children.prune.iter().chain(&self.children.release).collect();
        let observed: Vec<&Value> = each_child(&self.observed).collect();
        let created = self.children.apply.iter().map(|apply| &apply.object).filter(|object| {
            let key = ObjectKey::of(object);
            !observed.iter().any(|o| ObjectKey::of(o) == key)
        });
        let now: Vec<&Value> = observed
            .iter()
            .copied()
            .chain(created)
            .filter(|child| ObjectKey::of(child).is_none_or(|key| !gone.contains(&&key)))
            .collect();
        let mut now = children_by_id(rule, now);
        order_collections(&mut now, &self.desired);
        now
    }
}

/// An observed child as a `ruleplane test` case gives it (by id, as it exists) marked the way the worker marks what
/// it writes — the rule's and the parent's labels, the child id, the parent annotation — so the plan reads it as
/// the parent's own child. Offline objects come from the rule author, not from the cluster: they are not signed.
pub fn observed_as_written(
    rule: &Reconciler,
    parent: &Value,
    parent_namespaced: bool,
    id: &str,
    object: &Value,
) -> Value {
    let mut object = object.clone();
    let uid = parent.pointer("/metadata/uid").and_then(Value::as_str);
    let Some(metadata) = object
        .as_object_mut()
        .map(|fields| fields.entry("metadata").or_insert_with(|| Value::Object(Map::new())))
        .and_then(Value::as_object_mut)
    else {
        return object;
    };
    // A case may leave the namespace out: the child stands where children stand, in its parent's namespace.
    if parent_namespaced
        && !metadata.contains_key("namespace")
        && let Some(namespace) = parent.pointer("/metadata/namespace")
    {
        metadata.insert("namespace".into(), namespace.clone());
    }
    let labels = metadata.entry("labels").or_insert_with(|| Value::Object(Map::new()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
        labels.insert(RULE_LABEL.into(), rule.name().into());
        // A case's parent may have no uid; the identity check compares the label with it as it is.
        if let Some(uid) = uid {
            labels.insert(PARENT_UID_LABEL.into(), uid.into());
        }
        labels.insert(CHILD_ID_LABEL.into(), id.into());
    }
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(
            PARENT_ANNOTATION.into(),
            parent_reference(parent, parent_namespaced).into(),
        );
    }
    object
}

/// The plan as the offline tools (`ruleplane render`, `ruleplane test`) make it: scopes as the rule set declares
/// them, nothing signed, the `given` children (by id, as a test case gives them) marked as the worker marks
/// what it writes, and `patch_targets` the objects given as in the cluster.
pub fn plan_offline(
    rule: &Reconciler,
    parent: &Value,
    lookups: &Map<String, Value>,
    given: &[(&str, &Value)],
    patch_targets: &[Value],
) -> Result<ParentPlan, RenderError> {
    let child_scope = declared_child_scope(rule);
    let scopes = Scopes::declared(rule, &child_scope);
    let observed: Vec<Value> = given
        .iter()
        .map(|(id, object)| observed_as_written(rule, parent, scopes.parent_namespaced, id, object))
        .collect();
    plan_parent(&PlanInput {
        rule,
        parent,
        lookups,
        observed: &observed,
        patch_targets,
        scopes: &scopes,
        signer: &ChildSigner::Unsigned,
        shards: crate::sharding::DEFAULT_SHARDS,
    })
}

/// Objects given to the offline tools (a test case's `lookups`, `ruleplane render --lookup` files) as the cluster's
/// for `patches`: an object of a namespaced patched kind without a namespace stands in the parent's (as a case's
/// observed children do).
pub fn offline_patch_targets(rule: &Reconciler, parent: &Value, available: &[Value]) -> Vec<Value> {
    if rule.patches().is_empty() {
        return Vec::new();
    }
    let namespace = parent.pointer("/metadata/namespace").cloned();
    available
        .iter()
        .map(|object| {
            let mut object = object.clone();
            let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(str::to_string);
            let (api_version, kind) = (text("/apiVersion"), text("/kind"));
            let namespaced = rule.patches().iter().any(|patch| {
                patch.namespaced
                    && Some(&patch.api_version) == api_version.as_ref()
                    && Some(&patch.kind) == kind.as_ref()
            });
            if namespaced
                && text("/metadata/namespace").is_none()
                && let (Some(namespace), Some(metadata)) = (
                    namespace.clone(),
                    object.get_mut("metadata").and_then(Value::as_object_mut),
                )
            {
                metadata.insert("namespace".into(), namespace);
            }
            object
        })
        .collect()
}

/// Renders the rule for the parent, keeps of the observed objects those that are really the parent's children,
/// and decides what to write.
pub fn plan_parent(input: &PlanInput) -> Result<ParentPlan, RenderError> {
    let PlanInput {
        rule, parent, lookups, ..
    } = *input;
    let observed = input.own_children();
    let mut observed_by_id = children_by_id(rule, &observed);
    let mut rendered = render_children_observing(rule, parent, lookups, &observed_by_id)?;
    let mut desired = std::mem::take(&mut rendered.children);
    input.attach(&mut desired);
    let needs_finalizer = !rule.finalize_children().is_empty()
        || !rule.patches().is_empty()
        || desired
            .iter()
            .any(|child| child.pointer("/metadata/ownerReferences").is_none() && !is_retained(child));
    let finalizers: Vec<&str> = parent
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let own = cleanup_finalizer(rule.name());
    let add_finalizer =
        needs_finalizer && (!finalizers.contains(&own.as_str()) || finalizers.contains(&LEGACY_CLEANUP_FINALIZER));
    order_collections(&mut observed_by_id, &desired);
    // Handed-over fields are neither compared nor applied after creation: another controller owns them then.
    let (compared, handed) = hand_over::split(rule, &desired);
    let mut children = plan_children(compared, &observed, |child| unrendered_fate(rule, &rendered, child));
    hand_over::attach_initial(&mut children.apply, &handed);
    // Held by a missing lookup: the objects patched stay as they are too.
    let patches = if rendered.held.is_empty() {
        plan_patches(
            rule,
            parent,
            input.scopes.parent_namespaced,
            lookups,
            &rendered.visible,
            input.patch_targets,
        )
    } else {
        PatchPlan::default()
    };
    Ok(ParentPlan {
        desired,
        children,
        needs_finalizer,
        add_finalizer,
        waiting: rendered.waiting,
        excluded: rendered.excluded,
        held: rendered.held,
        projected_status: rendered.status,
        observed: observed_by_id,
        patches,
    })
}

#[cfg(test)]
mod collection_tests;
#[cfg(test)]
mod standing_tests;
#[cfg(test)]
mod tests;
