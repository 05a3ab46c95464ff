//! The Reconciler worker's writes: server-side apply of children, deletion of pruned ones, the parent's status,
//! and the Events that tell the story on the parent.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use ruleplane_config::ownership::{HANDOVER_FIELD_MANAGER, LEGACY_CLEANUP_FINALIZER, RECONCILER_FIELD_MANAGER};
use ruleplane_config::redaction::shown_message;
use ruleplane_config::{ChildApply, FieldConflict, ObjectKey, PatchApply, immutable_summary, is_immutable_refusal};
use serde_json::{Value, json};
use tracing::{info, warn};

use super::writes::StoredAnswer;
use super::{ParentKey, ParentReconciler, ReconcilerError, Watched};
use crate::context::WorkerContext;
use crate::watch_hub::strip_managed_fields;

pub(super) fn api_for(reconciler: &ParentReconciler, watched: &Watched, namespace: Option<&str>) -> Api<DynamicObject> {
    let client = reconciler.ctx.client.clone();
    let resource = &watched.watch.resource;
    match namespace {
        Some(namespace) if watched.namespaced => Api::namespaced_with(client, namespace, resource),
        _ => Api::all_with(client, resource),
    }
}

/// Applies one child (server-side apply, our field manager, forced: the rule owns every field it renders, which
/// is what repairs hand edits; an update is sent unforced first, to learn which fields other managers held). A
/// child that does not exist yet must not land on a foreign object of the same name (a conflict, unless the rule
/// adopts): its first apply is create-only, and only when the name is taken is the object read to see whose it
/// is. A child with handed-over fields is created whole under the hand-over manager, then applied without them.
pub(super) async fn apply_child(
    reconciler: &ParentReconciler,
    watched: &Watched,
    apply: &ChildApply,
    parent: &DynamicObject,
) -> Result<AppliedChild, ReconcilerError> {
    let key = &apply.key;
    let api = api_for(reconciler, watched, key.namespace.as_deref());
    let params = PatchParams::apply(RECONCILER_FIELD_MANAGER).force();
    let rejected = |error: kube::Error| match error {
        kube::Error::Api(status) if status.code == 422 || status.code == 400 => {
            let immutable = is_immutable_refusal(status.code, &status.message);
            let message = if immutable {
                immutable_summary(&status.message)
            } else {
                status.message
            };
            ReconcilerError::Rejected {
                child: key.clone(),
                immutable,
                // The apiserver quotes rejected values: a Secret's data must not reach statuses, Events and logs.
                message: shown_message(&message, reconciler.rule.reads_secrets()),
            }
        }
        other => ReconcilerError::Api(other),
    };
    let mut applied = None;
    // The version of our own earlier write a create-only apply ran into (it was not in the cache yet).
    let mut ours_before = None;
    // A child with handed-over fields is created whole under the hand-over manager, which never applies again.
    let initial = apply.initial.as_ref().filter(|_| apply.created);
    let adopts = reconciler.rule.adopts(&apply.object);
    if apply.created && (!adopts || initial.is_some()) {
        // A resourceVersion no stored object has makes the apply create-only: the apiserver creates the object
        // when the name is free (a precondition only applies to an existing object) and answers 409 when it is
        // taken, changing nothing. One request instead of a read, then the apply.
        let (body, manager) = match initial {
            Some(initial) => (initial, HANDOVER_FIELD_MANAGER),
            None => (&apply.object, RECONCILER_FIELD_MANAGER),
        };
        let mut create_only = body.clone();
        create_only["metadata"]["resourceVersion"] = Value::from(NO_STORED_VERSION);
        let create_params = PatchParams::apply(manager).force();
        match patch_value(
            reconciler,
            &api,
            None,
            &key.name,
            &create_params,
            &Patch::Apply(&create_only),
        )
        .await
        {
            Ok(created) if initial.is_none() => applied = Some(created),
            Ok(_) => {
                // The rule's own fields under the reconciler's manager, the handed-over ones left with the creation.
                let owned = patch_value(reconciler, &api, None, &key.name, &params, &Patch::Apply(&apply.object))
                    .await
                    .map_err(rejected)?;
                applied = Some(owned);
            }
            Err(kube::Error::Api(status)) if status.code == 409 && adopts => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                // Taken: by this parent (our earlier write, not yet in the cache) or by someone else.
                let uid = parent.uid().unwrap_or_default();
                if let Some(existing) = get_metadata_opt(&api, &key.name).await? {
                    let ours =
                        ruleplane_config::ownership::is_child_of(existing.labels(), reconciler.rule.name(), &uid)
                            && crate::child_signing::proves_child(
                                &reconciler.ctx.signer,
                                &key.api_version,
                                &key.kind,
                                &existing.metadata,
                            );
                    if !ours {
                        return Err(ReconcilerError::Conflict { child: key.clone() });
                    }
                    ours_before = existing.resource_version();
                }
            }
            Err(error) => return Err(rejected(error)),
        }
    }
    let mut conflicts = Vec::new();
    let (object, change) = match applied {
        Some(created) => (created, ChildChange::Created),
        None => {
            // Unforced first: the apiserver names any field another manager holds (a hand edit, or a writer
            // fighting the rule), which fight detection needs; then forced, as the rule owns what it renders.
            let unforced = PatchParams::apply(RECONCILER_FIELD_MANAGER);
            let object = match patch_value(
                reconciler,
                &api,
                None,
                &key.name,
                &unforced,
                &Patch::Apply(&apply.object),
            )
            .await
            {
                Err(kube::Error::Api(status)) if status.code == 409 && status.reason == "Conflict" => {
                    let causes: Vec<(String, String)> = status
                        .details
                        .iter()
                        .flat_map(|details| &details.causes)
                        .filter(|cause| cause.reason == "FieldManagerConflict")
                        .map(|cause| (cause.field.clone(), cause.message.clone()))
                        .collect();
                    conflicts = ruleplane_config::conflicts_of(key, &causes);
                    patch_value(reconciler, &api, None, &key.name, &params, &Patch::Apply(&apply.object)).await
                }
                answer => answer,
            }
            .map_err(rejected)?;
            let version = object.pointer("/metadata/resourceVersion").and_then(Value::as_str);
            let change = match ours_before.as_deref() {
                // Our earlier write applied again, nothing changed: no news (its creation was announced then).
                Some(before) if version == Some(before) => ChildChange::Unchanged,
                Some(_) => ChildChange::Updated,
                // Adopted, or gone again between the 409 and the read: as far as we know, created now.
                None if apply.created => ChildChange::Created,
                None => ChildChange::Updated,
            };
            (object, change)
        }
    };
    if change != ChildChange::Unchanged {
        info!(rule = reconciler.rule.name(), child = %key, "child {}", change.verb());
    }
    Ok(AppliedChild {
        object,
        change,
        conflicts,
    })
}

/// Recreates a child whose apply was refused as immutable (the plan's `RefusedApply::Recreate`): deletes the
/// object only while its UID is still `uid` (the object of this parent the plan saw, never one someone put in
/// its place), waits until it is gone, then creates it as rendered, create-only as any new child.
pub(super) async fn recreate_child(
    reconciler: &ParentReconciler,
    watched: &Watched,
    apply: &ChildApply,
    parent: &DynamicObject,
    uid: &str,
) -> Result<AppliedChild, ReconcilerError> {
    let key = &apply.key;
    reconciler.writes.forget(&reconciler.child_object(watched, key));
    let api = api_for(reconciler, watched, key.namespace.as_deref());
    let delete = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&key.name, &delete).await {
        Ok(_) => {}
        // Gone already: nothing left to delete.
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        // 409: the UID changed, another object stands under the name now; the next reconcile sees it afresh.
        Err(error) => return Err(error.into()),
    }
    if !wait_until_gone(&api, &key.name, uid).await? {
        return Err(ReconcilerError::StillDeleting { child: key.clone() });
    }
    info!(rule = reconciler.rule.name(), child = %key, "child deleted to be recreated (a changed field is immutable)");
    let create = ChildApply {
        created: true,
        ..apply.clone()
    };
    let mut applied = apply_child(reconciler, watched, &create, parent).await?;
    applied.change = ChildChange::Recreated;
    Ok(applied)
}

/// How long a recreate waits for the old object to be gone (finalizers of other controllers may hold it); past
/// it the reconcile fails and is retried, deleting nothing more (the object is already being deleted).
const RECREATE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until no object with `uid` stands under `name` (a quorum read each time: the cache may lag); `false`
/// when it still does after [`RECREATE_WAIT`].
async fn wait_until_gone(api: &Api<DynamicObject>, name: &str, uid: &str) -> Result<bool, kube::Error> {
    let deadline = tokio::time::Instant::now() + RECREATE_WAIT;
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        match get_metadata_opt(api, name).await? {
            Some(existing) if existing.uid().as_deref() == Some(uid) => {}
            _ => return Ok(true),
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(1));
    }
}

/// What a child's apply did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChildChange {
    Created,
    Updated,
    /// Deleted and created again: an update was refused as immutable and the child says `recreate`.
    Recreated,
    /// The object was already as applied: a create-only apply ran into our own earlier write, not yet in the
    /// cache (e.g. a resync forgot it), and applying again changed nothing.
    Unchanged,
}

impl ChildChange {
    fn verb(self) -> &'static str {
        match self {
            ChildChange::Created => "created",
            ChildChange::Updated => "updated",
            ChildChange::Recreated => "recreated",
            ChildChange::Unchanged => "unchanged",
        }
    }
}

/// A child's apply: the object as stored, what the apply did to it, and the fields it took from other managers.
pub(super) struct AppliedChild {
    pub object: Value,
    pub change: ChildChange,
    pub conflicts: Vec<FieldConflict>,
}

impl StoredAnswer for AppliedChild {
    fn stored(&self) -> &Value {
        &self.object
    }
}

/// Sends a patch of `name` (or of its `subresource`) and reads the answer straight into JSON, without its
/// managedFields: as the caches keep objects, since the answer stands in for the cached object until its echo.
/// `Api::patch` would parse it into a typed object first, managedFields and all, on every apply.
async fn patch_value<P: serde::Serialize + std::fmt::Debug>(
    reconciler: &ParentReconciler,
    api: &Api<DynamicObject>,
    subresource: Option<&str>,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> Result<Value, kube::Error> {
    let request = kube::core::Request::new(api.resource_url());
    let mut request = match subresource {
        Some(subresource) => request.patch_subresource(subresource, name, params, patch),
        None => request.patch(name, params, patch),
    }
    .map_err(kube::Error::BuildRequest)?;
    request
        .extensions_mut()
        .insert(if subresource.is_some() { "patch_status" } else { "patch" });
    let mut answer: Value = reconciler.ctx.client.request(request).await?;
    strip_managed_fields(&mut answer);
    Ok(answer)
}

/// See [`apply_child`]: the resourceVersion of a create-only apply. etcd starts at revision 1 and its first
/// write is revision 2, so no object's resourceVersion is ever 1.
const NO_STORED_VERSION: &str = "1";

async fn get_metadata_opt(
    api: &Api<DynamicObject>,
    name: &str,
) -> Result<Option<kube::core::PartialObjectMeta<DynamicObject>>, kube::Error> {
    // A quorum read, not the apiserver's watch cache (`resourceVersion=0`): right after a 409 the object may not
    // be in that cache yet, and reading it as gone made our own earlier write count as created a second time.
    match api.get_metadata_with(name, &kube::api::GetParams::default()).await {
        Ok(meta) => Ok(Some(meta)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(error),
    }
}

/// One Normal Event per reconcile and kind of change, naming the children (`Created`: "created ConfigMap
/// ns/a, Deployment ns/b"), rather than one per child: the story stays readable and costs one request.
pub(super) async fn announce(
    reconciler: &ParentReconciler,
    parent: &DynamicObject,
    reason: &str,
    children: &[ObjectKey],
) {
    if children.is_empty() {
        return;
    }
    let list: Vec<String> = children.iter().map(ToString::to_string).collect();
    let note = format!("{} {}", reason.to_lowercase(), list.join(", "));
    publish(reconciler, parent, EventType::Normal, reason, note).await;
}

/// Logs and announces (Normal Event) a write to a child; a child already gone is not an error.
pub(super) async fn report_done(
    reconciler: &ParentReconciler,
    parent: &DynamicObject,
    result: Result<(), kube::Error>,
    reason: &str,
    note: String,
) -> Result<(), ReconcilerError> {
    match result {
        Ok(()) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(error.into()),
    }
    info!(rule = reconciler.rule.name(), "{note}");
    publish(reconciler, parent, EventType::Normal, reason, note).await;
    Ok(())
}

/// Merge-patches the parent's status, through the status subresource when the kind has one (else the status
/// is a plain field of the object); returns the parent as the write left it.
pub(super) async fn patch_status(
    reconciler: &ParentReconciler,
    parent: &ParentKey,
    status: Value,
) -> Result<Value, kube::Error> {
    let api = api_for(reconciler, &reconciler.parent, parent.namespace.as_deref());
    let body = Patch::Merge(json!({ "status": status }));
    let subresource = reconciler.status_subresource.then_some("status");
    patch_value(
        reconciler,
        &api,
        subresource,
        &parent.name,
        &PatchParams::default(),
        &body,
    )
    .await
}

/// A Warning Event on the parent for a failed reconcile (once per distinct error, the runner sees to that).
pub(super) async fn warn_parent(reconciler: &ParentReconciler, key: &ParentKey, error: &ReconcilerError) {
    let Some(parent) = reconciler.parent.watch.get(key.namespace.as_deref(), &key.name) else {
        return;
    };
    publish(
        reconciler,
        &parent,
        EventType::Warning,
        error.reason(),
        error.to_string(),
    )
    .await;
}

pub(super) async fn publish(
    reconciler: &ParentReconciler,
    parent: &DynamicObject,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let regarding: ObjectReference = parent.object_ref(&reconciler.parent.watch.resource);
    if matches!(type_, EventType::Normal) {
        // Reports of writes done: behind the next parents' writes, never holding up this reconcile.
        reconciler.ctx.events.publish(crate::events::Report {
            type_,
            related: None,
            regarding,
            reason: reason.to_owned(),
            action: "Reconcile".to_owned(),
            note: truncate(note, 1000),
        });
        return;
    }
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(truncate(note, 1000)),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = reconciler.ctx.recorder.publish(&event, &regarding).await {
        warn!(error = %e, "could not publish an Event");
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

pub(super) use crate::workers::now;

/// Adds `add` and removes `remove` from the parent's finalizers with a JSON Patch, never server-side apply: an
/// apply is an upsert, and a parent deleted a moment ago (our cache may still show it) must not be created again.
/// The `test` of the resourceVersion makes the patch fail rather than clobber a finalizer list another controller
/// changed meanwhile (it is retried on the fresh object); a parent already gone is fine.
pub(super) async fn patch_finalizers(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    add: Option<&str>,
    remove: &[&str],
) -> Result<(), kube::Error> {
    let current = parent.finalizers();
    let mut wanted: Vec<&str> = current
        .iter()
        .map(String::as_str)
        .filter(|f| !remove.contains(f))
        .collect();
    if let Some(add) = add
        && !wanted.contains(&add)
    {
        wanted.push(add);
    }
    if wanted.len() == current.len() && wanted.iter().zip(current).all(|(a, b)| *a == b.as_str()) {
        return Ok(());
    }
    let operations = json!([
        { "op": "test", "path": "/metadata/resourceVersion", "value": parent.resource_version() },
        { "op": "add", "path": "/metadata/finalizers", "value": wanted },
    ]);
    let patch: json_patch::Patch = match serde_json::from_value(operations) {
        Ok(patch) => patch,
        Err(_) => return Ok(()),
    };
    match api
        .patch(&parent.name_any(), &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

pub(super) fn finalizer_api(
    ctx: &WorkerContext,
    resource: &kube::api::ApiResource,
    parent: &DynamicObject,
) -> Api<DynamicObject> {
    match parent.namespace() {
        Some(namespace) => Api::namespaced_with(ctx.client.clone(), &namespace, resource),
        None => Api::all_with(ctx.client.clone(), resource),
    }
}

/// Puts this rule's finalizer on the parent (`add`), or takes it off; either way the shared finalizer of earlier
/// versions goes (a rule on the same kind that has not added its own yet does so on its next pass: every parent
/// is reconciled when a worker starts). The plans say when.
pub(super) async fn change_finalizer(
    reconciler: &ParentReconciler,
    parent: &DynamicObject,
    add: bool,
) -> Result<(), ReconcilerError> {
    let api = finalizer_api(&reconciler.ctx, &reconciler.parent.watch.resource, parent);
    reconciler
        .writes
        .forget(&reconciler.parent_object(&ParentKey::of(parent)));
    let own = reconciler.finalizer.as_str();
    let (added, removed) = if add {
        (Some(own), vec![LEGACY_CLEANUP_FINALIZER])
    } else {
        (None, vec![own, LEGACY_CLEANUP_FINALIZER])
    };
    patch_finalizers(&api, parent, added, &removed).await?;
    Ok(())
}

/// Applies one patch of an object the rule does not own, under the patch's own field manager (forced: the rule
/// sets these fields). The body carries the object's uid, so an object gone answers 409 instead of being created,
/// and one replaced under its name 422 instead of being patched: nothing to patch then (both are tested in
/// `tests/integration/patches.rs`). Answers whether the object was patched.
pub(super) async fn apply_patch(
    reconciler: &ParentReconciler,
    watched: &Watched,
    apply: &PatchApply,
) -> Result<bool, ReconcilerError> {
    let api = api_for(reconciler, watched, apply.key.namespace.as_deref());
    let params = PatchParams::apply(&apply.manager).force();
    match patch_value(
        reconciler,
        &api,
        None,
        &apply.key.name,
        &params,
        &Patch::Apply(&apply.body),
    )
    .await
    {
        Ok(_) => {
            info!(rule = reconciler.rule.name(), object = %apply.key, patch = %apply.patch, "patched");
            Ok(true)
        }
        // Gone (409 "uid mismatch"), or replaced by a new object of that name (422 "metadata.uid: field is
        // immutable"): nothing of ours to patch; the newcomer's own watch event brings a plan with its uid.
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 || names_uid(&status) => Ok(false),
        // Reported, never recreated: the object is not Ruleplane's to delete.
        Err(kube::Error::Api(status)) if status.code == 422 || status.code == 400 => {
            let immutable = is_immutable_refusal(status.code, &status.message);
            let message = if immutable {
                immutable_summary(&status.message)
            } else {
                status.message
            };
            Err(ReconcilerError::Rejected {
                child: apply.key.clone(),
                immutable,
                message: shown_message(&message, reconciler.rule.reads_secrets()),
            })
        }
        Err(error) => Err(error.into()),
    }
}

/// Whether a refusal is about `metadata.uid`: an apply that carried the uid of an object since replaced.
fn names_uid(status: &kube::core::Status) -> bool {
    status.code == 422
        && status
            .details
            .iter()
            .flat_map(|details| &details.causes)
            .any(|cause| cause.field == "metadata.uid")
}

/// Releases patch field managers: lists the objects of `resource` (in `namespace`, or everywhere) with their
/// managedFields, and applies an empty configuration under each manager `releases` picks, so the apiserver drops
/// the fields only that manager set (values others own stay). Objects gone meanwhile are skipped (the uid in the
/// body keeps a release from creating anything). Answers how many managers were released.
pub(super) async fn release_patches(
    client: &kube::Client,
    resource: &kube::api::ApiResource,
    namespace: Option<&str>,
    releases: impl Fn(&str) -> bool,
) -> Result<usize, kube::Error> {
    let list: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let objects: Vec<Value> = list
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|object| {
            let mut value = serde_json::to_value(object).ok()?;
            // List items may come without their kind.
            value["apiVersion"] = Value::from(resource.api_version.clone());
            value["kind"] = Value::from(resource.kind.clone());
            Some(value)
        })
        .collect();
    let mut released = 0;
    for release in ruleplane_config::patch_releases(&objects, releases) {
        let api: Api<DynamicObject> = match &release.key.namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
            None => Api::all_with(client.clone(), resource),
        };
        let params = PatchParams::apply(&release.manager);
        match api
            .patch(&release.key.name, &params, &Patch::Apply(&release.body))
            .await
        {
            Ok(_) => {
                info!(object = %release.key, manager = %release.manager, "patch released");
                released += 1;
            }
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 || names_uid(&status) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(released)
}
