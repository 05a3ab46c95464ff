//! The Reconciler's decision (pure): rendered children vs the children observed → what to apply, what to prune,
//! and the parent's status with its `Ready`/`Synced` conditions.
//!
//! A child needs no write when both hold:
//! - its `ruleplane.dev/applied` annotation equals the fingerprint of what we render now — so a field removed from
//!   the template is still removed (a plain "desired ⊆ observed" test would miss it), and
//! - every field we render is in the observed object with an equal value — so hand edits and deletions are
//!   repaired, while fields the apiserver or other controllers add (defaults, status, managedFields) and
//!   normalised quantities (`1000m` is `1`) do not count as differences (plain equality would apply forever).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::render::Rendered;
use super::resolved::Reconciler;
use crate::ownership::{
    APPLIED_ANNOTATION, CHILD_ID_LABEL, PARENT_ANNOTATION, PARENT_UID_LABEL, RULE_LABEL, is_retained,
};
use crate::provenance::{ChildSigner, SIGNATURE_ANNOTATION};
use crate::scheduler::engine::quantity;

/// What identifies a child object in the cluster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`None` for cluster-scoped objects).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of a Kubernetes object (`None` when it has no kind or name).
    pub fn of(object: &Value) -> Option<ObjectKey> {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(str::to_string);
        Some(ObjectKey {
            api_version: text("/apiVersion")?,
            kind: text("/kind")?,
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name")?,
        })
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// The writes one reconcile of one parent needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChildPlan {
    /// Children to apply (server-side apply), each carrying its fingerprint annotation; `created` tells whether
    /// the object was not observed before.
    pub apply: Vec<ChildApply>,
    /// Observed children of this parent that are no longer rendered: to delete.
    pub prune: Vec<ObjectKey>,
    /// Observed children no longer rendered that must never be deleted (`retain`): to release from the parent.
    pub release: Vec<ObjectKey>,
    /// Children already as rendered.
    pub unchanged: usize,
}

/// One child to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildApply {
    /// The object to apply.
    pub object: Value,
    /// Its key.
    pub key: ObjectKey,
    /// No object of this parent with this key was observed.
    pub created: bool,
    /// A child with `handOver` fields: the whole object, what its creation (the first, or a `recreate`) sends
    /// under the hand-over field manager that never applies again; `object` leaves the handed-over fields out and
    /// is applied right after under the reconciler's (see `ownership::HANDOVER_FIELD_MANAGER`). Unused by an
    /// update.
    pub initial: Option<Value>,
}

/// What becomes of an observed child that was not rendered this time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrendered {
    /// Delete it: it is no longer wanted.
    Prune,
    /// Leave it in place but detach it from the parent: it was declared `retain`.
    Release,
    /// Leave it alone: it waits for a child it reads, so this round says nothing about it.
    Keep,
}

/// The fate of an observed child of `rule` that `rendered` does not contain.
pub fn unrendered_fate(rule: &Reconciler, rendered: &Rendered, observed: &Value) -> Unrendered {
    let annotated_retain = is_retained(observed);
    let id = child_id(observed);
    if id.is_some_and(|id| rendered.waiting.iter().any(|w| w == id)) {
        Unrendered::Keep
    } else if annotated_retain || id.and_then(|id| rule.child(id)).is_some_and(|c| c.retain) {
        Unrendered::Release
    } else {
        Unrendered::Prune
    }
}

/// Compares rendered children with the observed children of the same parent (found by the rule's and the
/// parent's labels) and says what to write; `unrendered` decides about observed children not rendered.
/// Rendered children get their fingerprint annotation here.
pub fn plan_children(rendered: Vec<Value>, observed: &[Value], unrendered: impl Fn(&Value) -> Unrendered) -> ChildPlan {
    let mut plan = ChildPlan::default();
    let mut desired_keys = Vec::with_capacity(rendered.len());
    for mut child in rendered {
        // The signature is left out: it says who wrote the child, not what the rule renders, and `diff` without
        // the key must see the same fingerprint as the worker.
        let signature = take_annotation(&mut child, SIGNATURE_ANNOTATION);
        let fingerprint = fingerprint(&child);
        if let Some(signature) = signature {
            set_annotation(&mut child, SIGNATURE_ANNOTATION, &signature);
        }
        set_annotation(&mut child, APPLIED_ANNOTATION, &fingerprint);
        let Some(key) = ObjectKey::of(&child) else {
            continue;
        };
        let existing = observed.iter().find(|o| ObjectKey::of(o).as_ref() == Some(&key));
        match existing {
            Some(existing) if is_converged(&child, &fingerprint, existing) => plan.unchanged += 1,
            _ => plan.apply.push(ChildApply {
                created: existing.is_none(),
                key: key.clone(),
                object: child,
                initial: None,
            }),
        }
        desired_keys.push(key);
    }
    for object in observed {
        if let Some(key) = ObjectKey::of(object)
            && !desired_keys.contains(&key)
        {
            match unrendered(object) {
                Unrendered::Prune => plan.prune.push(key),
                Unrendered::Release => plan.release.push(key),
                Unrendered::Keep => {}
            }
        }
    }
    plan
}

fn is_converged(desired: &Value, fingerprint: &str, observed: &Value) -> bool {
    let applied = observed
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(APPLIED_ANNOTATION))
        .and_then(Value::as_str);
    applied == Some(fingerprint) && contains(desired, observed)
}

/// A short, stable digest of a rendered object (before the annotation is added).
pub fn fingerprint(object: &Value) -> String {
    let digest = Sha256::digest(object.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn take_annotation(object: &mut Value, key: &str) -> Option<String> {
    let annotations = object.pointer_mut("/metadata/annotations")?.as_object_mut()?;
    let taken = annotations.remove(key)?.as_str().map(str::to_owned);
    if annotations.is_empty()
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.remove("annotations");
    }
    taken
}

fn set_annotation(object: &mut Value, key: &str, value: &str) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// How a child names its parent in [`PARENT_ANNOTATION`]: `namespace/name`, or `name` for a cluster-scoped parent.
pub fn parent_reference(parent: &Value, parent_namespaced: bool) -> String {
    let text = |pointer: &str| parent.pointer(pointer).and_then(Value::as_str);
    let name = text("/metadata/name").unwrap_or_default();
    match text("/metadata/namespace") {
        Some(namespace) if parent_namespaced => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

/// Whether an object found by this rule's and this parent's labels really is one of the parent's children, not an
/// object someone else labelled so (labels are easy to copy: a parent's UID is visible to whoever reads it). It
/// must also name the parent in its annotation and stand where its child can be written: the parent's namespace
/// (a Namespace parent: that namespace), no namespace (a cluster-scoped object), or anywhere for a child id whose
/// namespace the rule sets itself. And its signature must check out (`signer`: see [`crate::provenance`]), which
/// no copy of labels and annotations can forge. Anything else is neither read, pruned nor released.
pub fn is_own_child(
    rule: &Reconciler,
    parent: &Value,
    parent_namespaced: bool,
    observed: &Value,
    signer: &ChildSigner,
) -> bool {
    let text = |value: &Value, pointer: &str| value.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let labelled = text(observed, &format!("/metadata/labels/{}", RULE_LABEL.replace('/', "~1"))).as_deref()
        == Some(rule.metadata.name.as_str())
        && text(
            observed,
            &format!("/metadata/labels/{}", PARENT_UID_LABEL.replace('/', "~1")),
        ) == text(parent, "/metadata/uid");
    let annotated = text(
        observed,
        &format!("/metadata/annotations/{}", PARENT_ANNOTATION.replace('/', "~1")),
    ) == Some(parent_reference(parent, parent_namespaced));
    // A child whose id the rule no longer has is still its (to be pruned), but only where any child goes.
    let sets_namespace = child_id(observed)
        .and_then(|id| rule.child(id))
        .is_some_and(|child| child.sets_namespace);
    let placed = match text(observed, "/metadata/namespace") {
        None => true,
        Some(namespace) => {
            sets_namespace
                || text(parent, "/metadata/namespace").as_ref() == Some(&namespace)
                || (!parent_namespaced && text(parent, "/metadata/name").as_ref() == Some(&namespace))
        }
    };
    labelled && annotated && placed && signer.provenance_of(observed).is_proven()
}

/// Marks a rendered child as its parent's: the `ruleplane.dev/parent` annotation always, and a controller owner
/// reference where Kubernetes allows one — any child of a cluster-scoped parent, or a namespaced child in the
/// parent's own namespace. Other children (cross-namespace, cluster-scoped under a namespaced parent) are
/// tracked by their labels and annotation only. Last, `signer` signs the child's identity.
pub fn attach_parent(
    child: &mut Value,
    parent: &Value,
    parent_namespaced: bool,
    child_namespaced: bool,
    signer: &ChildSigner,
) {
    let text = |value: &Value, pointer: &str| value.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let parent_namespace = text(parent, "/metadata/namespace");
    let parent_name = text(parent, "/metadata/name").unwrap_or_default();
    set_annotation(child, PARENT_ANNOTATION, &parent_reference(parent, parent_namespaced));
    let same_namespace = child_namespaced && text(child, "/metadata/namespace") == parent_namespace;
    // A retained child must survive its parent: no owner reference, or the garbage collector would take it.
    let retained = is_retained(child);
    let owner_allowed = (!parent_namespaced || same_namespace) && !retained;
    if let (true, Some(uid), Some(api_version), Some(kind)) = (
        owner_allowed,
        text(parent, "/metadata/uid"),
        text(parent, "/apiVersion"),
        text(parent, "/kind"),
    ) && let Some(metadata) = child.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.insert(
            "ownerReferences".into(),
            serde_json::json!([{ "apiVersion": api_version, "kind": kind, "name": parent_name, "uid": uid, "controller": true }]),
        );
    }
    signer.sign(child);
}

/// Whether every field of `desired` is in `observed` with an equal value (quantities compared by value).
pub fn contains(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(key, value)| match have.get(key) {
            Some(found) => contains(value, found),
            // The apiserver drops empty values and nulls: absent is what they look like once stored.
            None => is_empty(value),
        }),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| contains(w, h))
        }
        (Value::Null, Value::Null) => true,
        (Value::Bool(want), Value::Bool(have)) => want == have,
        (Value::Number(want), Value::Number(have)) => want.as_f64() == have.as_f64(),
        (want, have) => scalar_text(want)
            .zip(scalar_text(have))
            .is_some_and(|(w, h)| w == h || quantities_equal(&w, &h)),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// `1000m` and `1`, `1Gi` and `1073741824`, `0.5` and `500m`: the same quantity, as Kubernetes normalises it.
/// Parsed by the scheduler's quantity parser: one reading of Kubernetes quantities in the crate.
fn quantities_equal(a: &str, b: &str) -> bool {
    match (quantity::parse(a), quantity::parse(b)) {
        (Ok(a), Ok(b)) => a.nano() == b.nano(),
        _ => false,
    }
}

/// The standard `metav1.Condition` shape, as `kubectl wait --for=condition=…` reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `Ready`, `Synced`, or a type of the rule's `conditions`.
    pub type_: String,
    /// Whether the condition holds.
    pub status: ConditionStatus,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// Whether a change of its status is published as an Event (an author's condition with `event: true`).
    pub event: bool,
}

/// A condition's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// It cannot be told.
    Unknown,
}

impl ConditionStatus {
    /// `True` when `holds`, else `False`.
    pub fn of(holds: bool) -> Self {
        if holds { Self::True } else { Self::False }
    }

    /// As `metav1.Condition` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// Whether the condition holds.
    pub fn holds(self) -> bool {
        self == Self::True
    }
}

/// The parent's `Ready` and `Synced` conditions: `Ready` when every child not excluded by `includeWhen` exists
/// (in `children`, by id) and passes its `readyWhen`, no `whenMissing: Wait` lookup is missing (`held`), and nothing
/// failed; `Synced` unless `failure` (its reason and message) says why the last reconcile did not apply everything.
pub fn parent_conditions(
    rule: &Reconciler,
    children: &Map<String, Value>,
    excluded: &[String],
    held: &[String],
    failure: Option<(&str, String)>,
) -> [Condition; 2] {
    if !held.is_empty() && failure.is_none() {
        let lookups = held
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return [
            Condition {
                type_: "Ready".into(),
                status: ConditionStatus::False,
                reason: "LookupMissing".into(),
                message: format!("waiting for lookup {lookups} to find its object"),
                event: false,
            },
            Condition {
                type_: "Synced".into(),
                status: ConditionStatus::True,
                reason: "Held".into(),
                message: format!("children held as they are while lookup {lookups} finds nothing"),
                event: false,
            },
        ];
    }
    let not_ready: Vec<&str> = rule
        .children()
        .iter()
        .filter(|child| !excluded.contains(&child.id))
        .filter(|child| !children.get(&child.id).is_some_and(|observed| child.is_ready(observed)))
        .map(|child| child.id.as_str())
        .collect();
    let total = rule.children().len().saturating_sub(excluded.len());
    let ready = Condition {
        type_: "Ready".into(),
        status: ConditionStatus::of(not_ready.is_empty() && failure.is_none()),
        reason: if not_ready.is_empty() {
            "ChildrenReady"
        } else {
            "ChildrenNotReady"
        }
        .into(),
        message: if not_ready.is_empty() {
            format!("all {total} children are ready")
        } else {
            format!("not ready: {}", not_ready.join(", "))
        },
        event: false,
    };
    let synced = match failure {
        None => Condition {
            type_: "Synced".into(),
            status: ConditionStatus::True,
            reason: "Applied".into(),
            message: format!("{total} children applied"),
            event: false,
        },
        Some((reason, message)) => Condition {
            type_: "Synced".into(),
            status: ConditionStatus::False,
            reason: reason.into(),
            message,
            event: false,
        },
    };
    [ready, synced]
}

/// The child id a rendered or observed child carries in its `ruleplane.dev/child-id` label.
pub fn child_id(child: &Value) -> Option<&str> {
    child.pointer("/metadata/labels")?.get(CHILD_ID_LABEL)?.as_str()
}

/// A parent's children by id, as templates (`children.<id>`), `status` and the `Ready` condition read them: a
/// child's object, or for a collection (`forEach`, `count`) the list of its objects — present, maybe empty, even
/// when none exists. Objects without a child id of the rule are left out.
pub fn children_by_id<'a>(rule: &Reconciler, objects: impl IntoIterator<Item = &'a Value>) -> Map<String, Value> {
    let mut by_id: Map<String, Value> = rule
        .children()
        .iter()
        .filter(|child| child.is_collection())
        .map(|child| (child.id.clone(), Value::Array(Vec::new())))
        .collect();
    for object in objects {
        record_child(rule, &mut by_id, object.clone());
    }
    by_id
}

/// Puts `object` into `by_id` (see [`children_by_id`]) in place of what was there for it: the child of its id, or
/// the collection item with its key (else it joins the list).
pub fn record_child(rule: &Reconciler, by_id: &mut Map<String, Value>, object: Value) {
    let Some(id) = child_id(&object).map(str::to_owned) else {
        return;
    };
    if !rule.child(&id).is_some_and(|child| child.is_collection()) {
        by_id.insert(id, object);
        return;
    }
    let list = by_id.entry(id).or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    if let Value::Array(items) = list {
        let key = ObjectKey::of(&object);
        match items.iter_mut().find(|item| ObjectKey::of(item) == key) {
            Some(item) => *item = object,
            None => items.push(object),
        }
    }
}

/// Puts each collection's objects in `by_id` (see [`children_by_id`]) in the order `desired` renders them (item
/// order), those not rendered last: status and templates see a collection in its items' order, not in the order the
/// cluster lists the objects.
pub fn order_collections(by_id: &mut Map<String, Value>, desired: &[Value]) {
    let keys: Vec<Option<ObjectKey>> = desired.iter().map(ObjectKey::of).collect();
    let position = |object: &Value| {
        let key = ObjectKey::of(object);
        keys.iter().position(|k| k.is_some() && *k == key).unwrap_or(usize::MAX)
    };
    for child in by_id.values_mut() {
        if let Value::Array(items) = child {
            items.sort_by_key(|item| position(item));
        }
    }
}

/// Takes the object with `key` out of `by_id` (see [`children_by_id`]): a child, or a collection's item.
pub fn forget_child(by_id: &mut Map<String, Value>, key: &ObjectKey) {
    let is_key = |object: &Value| ObjectKey::of(object).as_ref() == Some(key);
    by_id.retain(|_, child| !is_key(child));
    for child in by_id.values_mut() {
        if let Value::Array(items) = child {
            items.retain(|item| !is_key(item));
        }
    }
}

/// The objects of [`children_by_id`] one by one (a collection's items each).
pub fn each_child(by_id: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    by_id.values().flat_map(|value| match value {
        Value::Array(items) => items.iter().collect::<Vec<_>>(),
        object => vec![object],
    })
}

/// The parent's whole status after a reconcile that applied everything, over `children` as they then exist (by
/// id): projected fields, `observedGeneration` (when `with_generation`: the kind has a status subresource) and the
/// conditions (`standing`: the children excluded, the lookups held, see [`parent_conditions`]), stamped `now` — what
/// `ruleplane test` and `ruleplane diff` compare.
pub fn desired_status(
    rule: &Reconciler,
    parent: &Value,
    children: &Map<String, Value>,
    lookups: &Map<String, Value>,
    standing: (&[String], &[String]),
    with_generation: bool,
    now: &str,
) -> Value {
    let projected = super::render::compute_status(rule, parent, children, lookups);
    let (excluded, held) = standing;
    let mut conditions = parent_conditions(rule, children, excluded, held, None).to_vec();
    conditions.extend(super::conditions::author_conditions(rule, parent, children, lookups).0);
    let generation = parent
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .filter(|_| with_generation);
    next_status(None, &projected, generation, &conditions, now).unwrap_or_default()
}

/// The parent's status after a reconcile: projected fields, `observedGeneration`, and the conditions —
/// keeping each condition's `lastTransitionTime` unless its status changed, so an unchanged parent gets an
/// identical status (and no write). Returns the merge patch for `status` (fields no longer projected set to
/// `null`), or `None` when the status would not change.
pub fn next_status(
    current: Option<&Value>,
    projected: &Map<String, Value>,
    generation: Option<i64>,
    conditions: &[Condition],
    now: &str,
) -> Option<Value> {
    let mut status = projected.clone();
    if let Some(generation) = generation {
        status.insert("observedGeneration".into(), Value::from(generation));
    }
    let previous = current
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|condition| {
            let status_text = condition.status.as_str();
            let before = previous
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(condition.type_.as_str()));
            let transition = match before {
                Some(before) if before.get("status").and_then(Value::as_str) == Some(status_text) => before
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or_else(|| Value::from(now)),
                _ => Value::from(now),
            };
            let mut value = serde_json::json!({
                "type": condition.type_,
                "status": status_text,
                "reason": condition.reason,
                "message": condition.message,
                "lastTransitionTime": transition,
            });
            if let (Some(generation), Some(map)) = (generation, value.as_object_mut()) {
                map.insert("observedGeneration".into(), Value::from(generation));
            }
            value
        })
        .collect();
    status.insert("conditions".into(), Value::Array(conditions));
    let next = Value::Object(status);
    if let Some(current) = current
        && contains(&next, current)
        && contains(current, &next)
    {
        return None;
    }
    let mut patch = next;
    if let (Some(Value::Object(current)), Value::Object(fields)) = (current, &mut patch) {
        for key in current.keys() {
            fields.entry(key.clone()).or_insert(Value::Null);
        }
    }
    Some(patch)
}

#[cfg(test)]
mod tests;
