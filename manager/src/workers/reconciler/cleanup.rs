//! Deleting a parent: `finalize` children applied and awaited (bounded), children deleted in reverse dependency
//! order, the finalizer removed; and a removed rule's finalizers released, so no parent is ever stuck.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::events::EventType;
use ruleplane_config::ownership::{
    LEGACY_CLEANUP_FINALIZER, cleanup_finalizer, patch_field_manager, patch_manager_prefix,
};
use ruleplane_config::{PlanInput, Reconciler, ResolvedPatch, plan_deletion};
use serde_json::Value;
use tracing::{info, warn};

use super::writer::ChildWriter;
use super::{ParentKey, ParentReconciler, ReconcilerError, Served, discover, io, selected_by};
use crate::context::WorkerContext;
use crate::runner::Action;

/// How long `finalize` children may take to become ready before the deletion goes ahead without them.
pub(super) const FINALIZE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often a deletion waiting for `finalize` children looks again (their changes also wake it).
const FINALIZE_POLL: Duration = Duration::from_secs(2);

/// Whether `parent` carries `finalizer` or the legacy shared one (which every rule honours until it is gone).
pub(super) fn has_finalizer(parent: &DynamicObject, finalizer: &str) -> bool {
    parent
        .finalizers()
        .iter()
        .any(|f| f == finalizer || f == LEGACY_CLEANUP_FINALIZER)
}

/// The deletion of a parent that carries our finalizer.
pub(super) async fn finalize(
    reconciler: &ParentReconciler,
    writer: &impl ChildWriter,
    key: &ParentKey,
    parent: &DynamicObject,
    parent_value: &Value,
) -> Result<Action, ReconcilerError> {
    let rule = &reconciler.rule;
    let uid = parent.uid().unwrap_or_default();
    let labelled = reconciler.labelled_children(&uid);
    let lookups = if rule.finalize_children().is_empty() {
        serde_json::Map::new()
    } else {
        reconciler.lookups_for(key, parent_value).await?
    };
    // decide: the one deletion plan
    let plan = reconciler.with_scopes(|scopes| {
        let input = PlanInput {
            rule,
            parent: parent_value,
            lookups: &lookups,
            observed: &labelled,
            patch_targets: &[],
            scopes,
            signer: &reconciler.ctx.signer,
            shards: reconciler.ctx.shards.count,
        };
        crate::runner::cpu_step(|| plan_deletion(&input))
    })?;
    // 1. finalize children: applied (only where they differ), then awaited
    let mut applied = Vec::with_capacity(plan.finalize.apply.len());
    for apply in &plan.finalize.apply {
        let watched = reconciler.child_kind(&apply.key.api_version, &apply.key.kind)?;
        reconciler.writes.forget(&reconciler.child_object(watched, &apply.key));
        applied.push(writer.apply(reconciler, watched, apply, parent).await?.object);
    }
    let pending = plan.pending_finalize(rule, &applied);
    if !pending.is_empty() {
        let waited = deleting_for(parent);
        if waited < FINALIZE_TIMEOUT {
            return Ok(Action::RequeueAfter(FINALIZE_POLL));
        }
        let note = format!(
            "finalize children not ready after {}s, deleting anyway: {}",
            waited.as_secs(),
            pending.join(", ")
        );
        warn!(rule = rule.name(), parent = ?key, "{note}");
        writer
            .publish(reconciler, parent, EventType::Warning, "FinalizeTimeout", note)
            .await;
    }
    // 2. the other children, the ones read by others last; retained ones are released
    for (child_key, removal) in &plan.removals {
        let watched = reconciler.child_kind(&child_key.api_version, &child_key.kind)?;
        writer.remove(reconciler, watched, child_key, parent, *removal).await?;
    }
    // 3. the fields its patches set on objects it does not own are released (their values stay where others
    // own them too)
    release_parent_patches(reconciler, writer, parent).await?;
    // 4. the finalizer goes: the apiserver completes the deletion
    writer.remove_finalizer(reconciler, parent).await?;
    info!(rule = rule.name(), parent = ?key, "parent cleaned up; finalizer removed");
    Ok(Action::AwaitChange)
}

/// Releases the fields the rule's patches set for `parent` (its own field managers) on the objects of the patched
/// kinds where it may patch: the parent goes, or leaves the rule's selection.
async fn release_parent_patches(
    reconciler: &ParentReconciler,
    writer: &impl ChildWriter,
    parent: &DynamicObject,
) -> Result<(), ReconcilerError> {
    let rule = &reconciler.rule;
    let uid = parent.uid().unwrap_or_default();
    let namespace = if reconciler.parent.namespaced {
        parent.namespace()
    } else {
        Some(parent.name_any())
    };
    for (kind, watched) in &reconciler.patched {
        let managers: Vec<String> = rule
            .patches()
            .iter()
            .filter(|patch| patch.api_version == kind.api_version && patch.kind == kind.kind)
            .map(|patch| patch_field_manager(rule.name(), &patch.id, &uid))
            .collect();
        if managers.is_empty() {
            continue;
        }
        let namespace = namespace.as_deref().filter(|_| watched.namespaced);
        writer
            .release_patches(reconciler, watched, namespace, &managers)
            .await?;
    }
    Ok(())
}

/// How long ago the parent's deletion was requested.
fn deleting_for(parent: &DynamicObject) -> Duration {
    let Some(since) = &parent.metadata.deletion_timestamp else {
        return Duration::ZERO;
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    Duration::from_secs(u64::try_from(now.as_second() - since.0.as_second()).unwrap_or(0))
}

/// A parent that left the rule's selection (a label changed) while carrying our finalizer: nothing would remove
/// the finalizer any more, and deleting the parent later would leave it Terminating for good. The finalizer is
/// removed; its children stay (no implicit deletion), as when the rule is removed.
pub(super) async fn release_deselected(reconciler: &ParentReconciler, key: &ParentKey) -> Result<(), ReconcilerError> {
    let api = io::api_for(reconciler, &reconciler.parent, key.namespace.as_deref());
    let Some(parent) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    if !has_finalizer(&parent, &reconciler.finalizer) || reconciler.selects(&parent.metadata) {
        return Ok(());
    }
    release(reconciler, &api, &parent).await?;
    Ok(())
}

/// Removes this rule's finalizer (and the legacy shared one) from a parent it does not select, keeping the
/// children (the fields its patches set are released), and says so with a Normal Event `Released`.
async fn release(
    reconciler: &ParentReconciler,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
) -> Result<(), ReconcilerError> {
    let finalizer = reconciler.finalizer.as_str();
    // Its patches no longer apply to it: their fields are released, as when the rule goes.
    release_parent_patches(reconciler, &super::writer::ApiWriter, parent).await?;
    io::patch_finalizers(api, parent, None, &[finalizer, LEGACY_CLEANUP_FINALIZER]).await?;
    info!(rule = reconciler.rule.name(), parent = %parent.name_any(), "parent not selected; cleanup finalizer removed, children kept");
    io::publish(
        reconciler,
        parent,
        EventType::Normal,
        "Released",
        format!(
            "not selected by rule {}: finalizer {finalizer} removed, children kept",
            reconciler.rule.name()
        ),
    )
    .await;
    Ok(())
}

/// At worker start: parents of the kind that this rule does not select but that carry its finalizer (the rule's
/// selector narrowed while no worker ran, or a change was missed) are released, so none hangs in Terminating.
/// Lists the kind's metadata once; nothing to do for a rule that selects every parent.
pub(super) async fn sweep_unselected(reconciler: &ParentReconciler) {
    let watched = &reconciler.rule.spec.watched;
    if watched.selector.is_none() && watched.namespace.is_none() && watched.name.is_none() {
        return;
    }
    let resource = &reconciler.parent.watch.resource;
    let all: Api<DynamicObject> = Api::all_with(reconciler.ctx.client.clone(), resource);
    let parents = match all.list_metadata(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => {
            warn!(rule = reconciler.rule.name(), error = %e, "could not list parents to sweep the cleanup finalizer");
            return;
        }
    };
    let finalizer = reconciler.finalizer.as_str();
    for meta in parents {
        let ours = meta.metadata.finalizers.iter().flatten().any(|f| f == finalizer);
        if !ours || selected_by(&reconciler.rule, &meta.metadata) {
            continue;
        }
        let api = io::api_for(reconciler, &reconciler.parent, meta.metadata.namespace.as_deref());
        let parent = match api.get_opt(&meta.metadata.name.clone().unwrap_or_default()).await {
            Ok(Some(parent)) => parent,
            Ok(None) => continue,
            Err(e) => {
                warn!(rule = reconciler.rule.name(), error = %e, "could not read a parent to sweep its finalizer");
                continue;
            }
        };
        if let Err(e) = release(reconciler, &api, &parent).await {
            warn!(rule = reconciler.rule.name(), parent = %parent.name_any(), error = %e, "could not remove the cleanup finalizer");
        }
    }
}

/// A removed rule keeps its children (no implicit deletion of what users see), releases the fields its patches set
/// on objects it does not own, and must not leave parents stuck in Terminating: its own finalizer is removed from every parent, and the legacy shared one from parents no
/// remaining rule selects (a remaining rule that selects the parent runs its own deletion).
pub async fn on_rule_removed(rule: &Reconciler, remaining: &[&Reconciler], ctx: &WorkerContext) {
    let patches: Vec<&ResolvedPatch> = rule.patches().iter().collect();
    release_rule_patches(rule, &patches, ctx).await;
    let watched = &rule.spec.watched;
    let Ok(Served { resource, .. }) = discover(&ctx.discovery, rule, &watched.api_version, &watched.kind).await else {
        return;
    };
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource);
    let parents = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => {
            warn!(rule = rule.name(), error = %e, "could not list parents to remove the cleanup finalizer");
            return;
        }
    };
    let same_kind: Vec<&&Reconciler> = remaining
        .iter()
        .filter(|other| {
            other.spec.watched.api_version == watched.api_version && other.spec.watched.kind == watched.kind
        })
        .collect();
    let still_selected = |parent: &DynamicObject| same_kind.iter().any(|other| selected_by(other, &parent.metadata));
    let finalizer = cleanup_finalizer(rule.name());
    for parent in parents.iter().filter(|p| has_finalizer(p, &finalizer)) {
        let remove: &[&str] = if still_selected(parent) {
            &[&finalizer]
        } else {
            &[&finalizer, LEGACY_CLEANUP_FINALIZER]
        };
        let api = io::finalizer_api(ctx, &resource, parent);
        match io::patch_finalizers(&api, parent, None, remove).await {
            Ok(_) => {
                info!(rule = rule.name(), parent = %parent.name_any(), "rule removed; cleanup finalizer removed, children kept")
            }
            Err(e) => {
                warn!(rule = rule.name(), parent = %parent.name_any(), error = %e, "could not remove the cleanup finalizer")
            }
        }
    }
}

/// Releases the fields `patches` of `rule` set, on every object of their kinds where the rule's parents may be: a
/// removed rule's patches (all of them), or the entries a changed rule dropped. Lists each kind once.
async fn release_rule_patches(rule: &Reconciler, patches: &[&ResolvedPatch], ctx: &WorkerContext) {
    let mut kinds: Vec<(&str, &str)> = patches
        .iter()
        .map(|p| (p.api_version.as_str(), p.kind.as_str()))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let prefix = patch_manager_prefix(rule.name());
    for (api_version, kind) in kinds {
        let Ok(Served {
            resource, namespaced, ..
        }) = discover(&ctx.discovery, rule, api_version, kind).await
        else {
            continue;
        };
        let ids: Vec<&str> = patches
            .iter()
            .filter(|p| p.api_version == api_version && p.kind == kind)
            .map(|p| p.id.as_str())
            .collect();
        // `<prefix><id>/<parent-uid>`: the entry's managers for every parent.
        let picks = |manager: &str| {
            manager.strip_prefix(&prefix).is_some_and(|rest| {
                ids.iter().any(|id| {
                    patch_field_manager(rule.name(), id, "")
                        .strip_prefix(&prefix)
                        .is_some_and(|entry| rest.starts_with(entry))
                })
            })
        };
        let namespace = rule.spec.watched.namespace.as_deref().filter(|_| namespaced);
        match io::release_patches(&ctx.client, &resource, namespace, picks).await {
            Ok(released) => info!(rule = rule.name(), kind, released, "patches released"),
            Err(e) => warn!(rule = rule.name(), kind, error = %e, "could not release the rule's patches"),
        }
    }
}

/// A changed rule: the fields of the patches it no longer has (or that now patch another kind) are released.
pub async fn on_rule_changed(old: &Reconciler, new: &Reconciler, ctx: &WorkerContext) {
    let dropped = ruleplane_config::dropped_patches(old, new);
    if !dropped.is_empty() {
        release_rule_patches(old, &dropped, ctx).await;
    }
}
