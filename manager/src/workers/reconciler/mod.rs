//! Reconciler worker: for each parent object, children rendered from the rule's templates are applied with
//! server-side apply, pruned, drift-corrected, and the parent's status projected (fetch → decide → apply → report).

mod cleanup;
mod converge;
pub(crate) mod installed;
mod io;
mod lookups;
mod writer;
mod writes;

pub use cleanup::{on_rule_changed, on_rule_removed};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use kube::discovery::Scope;
use kube::runtime::events::EventType;
use ruleplane_config::ownership::{PARENT_ANNOTATION, PARENT_UID_LABEL, RULE_LABEL, cleanup_finalizer};
use ruleplane_config::{
    Fights, KindRef, ObjectKey, PatchCandidate, PatchFilter, Reconciler, RenderError, Scopes, author_conditions,
    children_by_id, condition_transitions, is_own_child, next_status, parent_conditions, project_status,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::context::WorkerContext;
use crate::context::WorkerError;
use crate::kube_client::KindDiscovery;
use crate::runner::{Action, Reconcile, ReconcileError, Reconciled, Requeue, Runner};
use crate::watch_hub::{Change, KindKey, ObjectName, SharedWatch, WatchedObject};
use crate::workers::resource_definition::{DeclaredKind, served_as_declared};
use writes::{EventNews, OwnWrites};

const KIND: &str = "Reconciler";
/// Children are watched only where Ruleplane's label is: the rest of the cluster's objects of those kinds
/// are never cached.
const CHILD_SELECTOR: &str = "app.kubernetes.io/managed-by=ruleplane";

/// A parent: where it stands (the runner's key).
pub type ParentKey = ObjectName;

/// A watched kind with what discovery says about it.
struct Watched {
    watch: Arc<SharedWatch>,
    namespaced: bool,
}

/// Why a reconcile of one parent failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcilerError {
    /// The templates fail for this parent (permanent: waits for a change).
    #[error("{0}")]
    Render(#[from] RenderError),
    /// A child's name is taken by an object this rule did not create for this parent (permanent).
    #[error("{child} exists and was not created by this rule for this parent; set `adopt: true` to take it over")]
    Conflict { child: ObjectKey },
    /// The apiserver refused an apply: invalid for the kind, or denied by admission (permanent). `immutable`: it
    /// refused a change of a field that cannot change (a child with `recreate` is then deleted and created).
    #[error("the apiserver rejected {child}: {message}")]
    Rejected {
        child: ObjectKey,
        message: String,
        immutable: bool,
    },
    /// A child deleted to be recreated (`recreate`) is still there, held by finalizers (transient: retried).
    #[error("{child} is being deleted to be created again (a changed field is immutable); it is created once gone")]
    StillDeleting { child: ObjectKey },
    /// A rendered child's kind has no watch of this worker (permanent until the rule changes).
    #[error("child kind {api_version} {kind} is not served by the apiserver")]
    UnknownChildKind { api_version: String, kind: String },
    /// Any other API failure (transient: backs off).
    #[error("Kubernetes API error: {0}")]
    Api(#[from] kube::Error),
}

impl ReconcileError for ReconcilerError {
    fn category(&self) -> &'static str {
        match self {
            ReconcilerError::Render(error) => error.category(),
            ReconcilerError::Conflict { .. } => "conflict",
            ReconcilerError::Rejected { .. } => "rejected",
            ReconcilerError::StillDeleting { .. } => "recreating",
            ReconcilerError::UnknownChildKind { .. } => "unknown-kind",
            ReconcilerError::Api(_) => "api",
        }
    }

    /// Render errors, conflicts and rejections need a change of the parent, the rule or the cluster.
    fn is_permanent(&self) -> bool {
        !matches!(self, ReconcilerError::Api(_) | ReconcilerError::StillDeleting { .. })
    }
}

impl ReconcilerError {
    /// The `Synced=False` reason (and Warning Event reason) for this error.
    fn reason(&self) -> &'static str {
        match self {
            ReconcilerError::Render(_) => "RenderError",
            ReconcilerError::Conflict { .. } => "Conflict",
            ReconcilerError::Rejected { .. } => "ApplyRejected",
            ReconcilerError::StillDeleting { .. } => "Recreating",
            ReconcilerError::UnknownChildKind { .. } => "UnknownKind",
            ReconcilerError::Api(_) => "ApplyFailed",
        }
    }
}

/// The children as they are after a successful reconcile, what the templates saw, the children that
/// `includeWhen` leaves out (they do not count against readiness), and the `whenMissing: Wait` lookups that found
/// nothing (the children are held as they are: `Ready=False`).
struct Converged {
    children: Map<String, Value>,
    lookups: Map<String, Value>,
    excluded: Vec<String>,
    held: Vec<String>,
}

/// One Reconciler rule's reconcile.
pub struct ParentReconciler {
    rule: Reconciler,
    /// This rule's own cleanup finalizer (`ownership::cleanup_finalizer`).
    finalizer: String,
    ctx: WorkerContext,
    parent: Watched,
    /// Child watches by `apiVersion`/`kind` of the templates.
    children: BTreeMap<KindRef, Watched>,
    /// Watches of the kinds `patches` set fields on (every object where parents may patch: the patched objects
    /// carry no label of ours), by `apiVersion`/`kind`.
    patched: BTreeMap<KindRef, Watched>,
    /// Per parent, the children's fields another writer keeps taking back (reported once, see `Fights`).
    fights: Mutex<HashMap<ParentKey, Fights>>,
    /// What the templates read from other objects, and who read what.
    lookups: lookups::Lookups,
    /// Whether the parent's status is ours to write (kinds declared by ResourceDefinitions, not built-ins).
    writes_status: bool,
    /// Whether the parent kind has a status subresource. Without one, a status write changes the object's
    /// `generation`, so `observedGeneration` would never settle: it is not written then.
    status_subresource: bool,
    /// Our own writes until their watch echo: the echo carries nothing this worker does not know, so it reconciles
    /// nobody (an update of a parent would otherwise cost a reconcile for it and one more for each echo of its
    /// children and status); and until it arrives, a reconcile reads what the write answered, not the cache one
    /// event behind (which would cost the same write again).
    writes: OwnWrites<ParentKey>,
    /// Parents whose last event was their leaving the selected parents' watch with our finalizer still on: gone
    /// from the cache, yet maybe still there (a label changed), with nothing else to remove the finalizer.
    left_selection: Mutex<HashSet<ParentKey>>,
    /// This rule's `ruleplane_change_to_applied_seconds` (looked up once, not per reconcile).
    change_to_applied: prometheus_client::metrics::histogram::Histogram,
}

/// How long a worker waits at start for the CRDs its rule set declares for its kinds before asking discovery
/// anyway (a CRD the apiserver refuses is the ResourceDefinition rule's problem, reported there).
const DECLARED_KINDS_WAIT: Duration = Duration::from_secs(30);

pub async fn run(rule: Reconciler, ctx: WorkerContext, stop: CancellationToken) -> Result<(), WorkerError> {
    // Kinds another tool installs: learnt from the apiserver once, waited for while not served.
    let Some(rule) = installed::with_served_kinds(rule, &ctx, &stop).await? else {
        return Ok(());
    };
    let client = ctx.client.clone();
    for kind in rule.kinds().declared() {
        let (group, version) = kind.api_version.split_once('/').unwrap_or(("", &kind.api_version));
        let crd_name = format!("{}.{group}", kind.plural);
        let declared = DeclaredKind {
            crd_name: &crd_name,
            kind: &kind.kind,
            version,
            namespaced: kind.namespaced,
        };
        let served = served_as_declared(&ctx.hub, &declared, DECLARED_KINDS_WAIT, &stop).await;
        if stop.is_cancelled() {
            return Ok(());
        }
        if let Err(reason) = served {
            // Its ResourceDefinition rule reports why; this rule waits (the supervisor retries, `/readyz` says so).
            return Err(WorkerError::Discovery(format!(
                "{} {} (rule `{}`): {reason}",
                kind.api_version,
                kind.kind,
                kind.declared_by().unwrap_or_default()
            )));
        }
    }
    let watched = &rule.spec.watched;
    let Served {
        resource: parent_resource,
        namespaced,
        status_subresource,
    } = discover(&ctx.discovery, &rule, &watched.api_version, &watched.kind).await?;
    // Only the parents the rule selects are watched and cached: a rule for the ConfigMaps labelled `x` does not
    // hold the cluster's other ConfigMaps. `selects` stays the decision; the watch's selectors only filter.
    let label_selector = watched
        .selector
        .as_ref()
        .map(|s| s.to_query_string())
        .filter(|s| !s.is_empty());
    // A rule over one named object (`for.name`) watches that object alone.
    let field_selector = [
        watched.name.as_ref().map(|name| format!("metadata.name={name}")),
        watched
            .namespace
            .as_ref()
            .filter(|_| namespaced)
            .map(|namespace| format!("metadata.namespace={namespace}")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(",");
    let field_selector = (!field_selector.is_empty()).then_some(field_selector);
    // Only this replica's shards of them, too (all of them for a single replica).
    let parent = Watched {
        watch: ctx.hub.watch_parents(
            &parent_resource,
            label_selector.as_deref(),
            field_selector.as_deref(),
            &ctx.shards,
        ),
        namespaced,
    };
    let mut children = BTreeMap::new();
    for child in rule.children().iter().chain(rule.finalize_children()) {
        let kind = KindRef {
            api_version: child.api_version.clone(),
            kind: child.kind.clone(),
        };
        if children.contains_key(&kind) {
            continue;
        }
        let Served {
            resource, namespaced, ..
        } = discover(&ctx.discovery, &rule, &child.api_version, &child.kind).await?;
        // Found by rule and parent UID through the watch's own index, shared by every rule with children of this kind.
        // Of this replica's shards only: children carry their parent's shard as a label the apiserver selects by.
        let watch = ctx.hub.watch_children(
            &resource,
            CHILD_SELECTOR,
            [RULE_LABEL, PARENT_UID_LABEL],
            crate::child_signing::child_admission(ctx.signer.clone()),
            &ctx.shards,
        );
        children.insert(kind, Watched { watch, namespaced });
    }
    let mut patched = BTreeMap::new();
    for patch in rule.patches() {
        let kind = KindRef {
            api_version: patch.api_version.clone(),
            kind: patch.kind.clone(),
        };
        if patched.contains_key(&kind) {
            continue;
        }
        let Served {
            resource, namespaced, ..
        } = discover(&ctx.discovery, &rule, &patch.api_version, &patch.kind).await?;
        // Where the parents are: a rule for one namespace's parents caches that namespace's objects only.
        let in_namespace = watched
            .namespace
            .as_ref()
            .filter(|_| namespaced)
            .map(|namespace| format!("metadata.namespace={namespace}"));
        let watch = ctx.hub.watch_filtered(&resource, None, in_namespace.as_deref());
        patched.insert(kind, Watched { watch, namespaced });
    }
    let labels = crate::metrics::Metrics::labels(rule.name(), KIND);
    let lookup_contents = ctx.metrics.lookup_contents.get_or_create(&labels).clone();
    let change_to_applied = ctx.metrics.change_to_applied.get_or_create(&labels).clone();
    let lookups = lookups::Lookups::start(&rule, &client, &ctx.discovery, &ctx.hub, lookup_contents).await?;
    let mut subscriptions = vec![parent.watch.subscribe()];
    // A child watch is shared by every rule with children of its kind: this rule hears only its own children.
    subscriptions.extend(children.values().map(|c| c.watch.subscribe_labelled(rule.name())));
    subscriptions.extend(lookups.watches().map(|w| w.subscribe()));
    subscriptions.extend(patched.values().map(|p| p.watch.subscribe()));
    let watches: Vec<Arc<SharedWatch>> = std::iter::once(parent.watch.clone())
        .chain(children.values().map(|c| c.watch.clone()))
        .chain(patched.values().map(|p| p.watch.clone()))
        .chain(lookups.watches().cloned())
        .collect();
    for watch in &watches {
        tokio::select! {
            _ = watch.synced() => {}
            _ = stop.cancelled() => return Ok(()),
        }
    }
    let runner = Runner {
        gate: Some(ctx.shards.gate.clone()),
        backoff: crate::runner::Backoff::CONTROLLER,
        rule: rule.name().to_owned(),
        kind: KIND,
        concurrency: rule.concurrency(),
        metrics: ctx.metrics.clone(),
        health: ctx.health.clone(),
    };
    let writes_status = rule.writes_status();
    let (requeue, requeued) = Requeue::channel();
    let reconciler = Arc::new(ParentReconciler {
        finalizer: cleanup_finalizer(rule.name()),
        rule,
        ctx,
        parent,
        children,
        patched,
        fights: Mutex::new(HashMap::new()),
        lookups,
        writes_status,
        status_subresource,
        writes: OwnWrites::new(requeue),
        left_selection: Mutex::new(HashSet::new()),
        change_to_applied,
    });
    let initial = crate::runner::whole_cache_step(reconciler.resync_reads(), || reconciler.all_parents());
    let sweeper = reconciler.clone();
    let sweep_stop = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = cleanup::sweep_unselected(&sweeper) => {}
            () = sweep_stop.cancelled() => {}
        }
    });
    runner.run(reconciler, subscriptions, requeued, initial, stop).await
}

/// Whether `rule` selects the parent with this metadata (its kind aside).
fn selected_by(rule: &Reconciler, parent: &ObjectMeta) -> bool {
    let no_labels = std::collections::BTreeMap::new();
    rule.spec.watched.selects(
        parent.namespace.as_deref(),
        parent.name.as_deref().unwrap_or_default(),
        parent.labels.as_ref().unwrap_or(&no_labels),
    )
}

/// How the apiserver serves a kind the rule reads or writes.
pub(super) struct Served {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub status_subresource: bool,
}

/// How the apiserver serves `apiVersion`/`kind`. A kind a ResourceDefinition of the rule set declares is known
/// from the declaration (the worker waited for its CRD to be Established at start): asking discovery right
/// after met a 404 for a moment, as the apiserver's discovery document follows the CRD a little later. A kind
/// another tool installs was resolved at start (`installed::with_served_kinds`). Built-in kinds are asked of
/// discovery.
pub(super) async fn discover(
    discovery: &KindDiscovery,
    rule: &Reconciler,
    api_version: &str,
    kind: &str,
) -> Result<Served, WorkerError> {
    let known = rule.kinds().find(api_version, kind).filter(|info| !info.is_builtin());
    if let Some(info) = known {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        return Ok(Served {
            resource: ApiResource::from_gvk_with_plural(&gvk, &info.plural),
            namespaced: info.namespaced,
            status_subresource: info.status_subresource,
        });
    }
    let (resource, caps) = discovery.kind(api_version, kind).await.map_err(|e| match e {
        // The apiserver's plain-text 404 for a group/version it does not serve yet.
        kube::Error::Api(status) if status.code == 404 => {
            WorkerError::Discovery(format!("{api_version} {kind}: not served (404)"))
        }
        e => WorkerError::Discovery(format!("{api_version} {kind}: {e}")),
    })?;
    Ok(Served {
        status_subresource: caps.subresources.iter().any(|(sub, _)| sub.plural == "status"),
        namespaced: caps.scope == Scope::Namespaced,
        resource,
    })
}

impl ParentReconciler {
    /// Whether the rule selects this parent (its namespace and label selector).
    fn selects(&self, parent: &ObjectMeta) -> bool {
        selected_by(&self.rule, parent)
    }

    fn all_parents(&self) -> Vec<ParentKey> {
        self.parent.watch.store.map_metadata(|parent| {
            self.selects(parent).then(|| ParentKey {
                namespace: parent.namespace.clone(),
                name: parent.name.clone().unwrap_or_default(),
            })
        })
    }

    /// The parents a resync of `kind` reconciles: every selected parent, and those this worker still keeps state
    /// for (fights, lookups read) that the parents' relist no longer lists. Deleted while the watch was down, they
    /// are heard of no other way; their reconcile finds them gone and forgets them.
    fn resync_parents(&self, kind: &KindKey) -> Vec<ParentKey> {
        self.lookups.resynced(kind);
        let mut parents: BTreeSet<ParentKey> = self.all_parents().into_iter().collect();
        if *kind == self.parent.watch.key {
            let fights = self.fights.lock().unwrap_or_else(|e| e.into_inner());
            parents.extend(fights.keys().cloned());
            drop(fights);
            parents.extend(self.lookups.readers());
        }
        parents.into_iter().collect()
    }

    /// The selected parents whose patches may select `object` (of the patched kind `kind`): among those in its
    /// namespace (and a Namespace parent of that name; every parent for a cluster-scoped object), the ones
    /// `may_patch` keeps.
    fn parents_patching(&self, kind: &KindRef, object: &DynamicObject) -> Vec<ParentKey> {
        let namespace = object.metadata.namespace.as_deref();
        let mut parents = self.all_parents();
        if let Some(namespace) = namespace {
            parents.retain(|parent| match &parent.namespace {
                Some(own) => own == namespace,
                None => parent.name == namespace,
            });
        }
        let no_labels = BTreeMap::new();
        let candidate = PatchCandidate {
            api_version: &kind.api_version,
            kind: &kind.kind,
            namespace,
            name: object.metadata.name.as_deref().unwrap_or_default(),
            labels: object.metadata.labels.as_ref().unwrap_or(&no_labels),
        };
        parents.retain(|key| {
            self.parent
                .watch
                .get_value(key.namespace.as_deref(), &key.name)
                .is_some_and(|parent| {
                    PatchFilter::new(&self.rule, &parent, self.parent.namespaced).may_patch(&candidate)
                })
        });
        parents
    }

    /// The objects of the patched kinds the parent's patches may select: in its namespace (a Namespace parent:
    /// in that namespace), every one of a cluster-scoped kind; with their kind (cached list items may lack it).
    fn patch_targets(&self, parent: &Value) -> Vec<Value> {
        let namespace = if self.parent.namespaced {
            parent.pointer("/metadata/namespace")
        } else {
            parent.pointer("/metadata/name")
        }
        .and_then(Value::as_str);
        let mut targets = Vec::new();
        let no_labels = BTreeMap::new();
        let filter = PatchFilter::new(&self.rule, parent, self.parent.namespaced);
        for (kind, watched) in &self.patched {
            // Only objects a patch may select are read whole: a namespace's other Pods are never parsed.
            let names = watched.watch.store.map_metadata(|meta| {
                let candidate = PatchCandidate {
                    api_version: &kind.api_version,
                    kind: &kind.kind,
                    namespace: meta.namespace.as_deref(),
                    name: meta.name.as_deref().unwrap_or_default(),
                    labels: meta.labels.as_ref().unwrap_or(&no_labels),
                };
                (!watched.namespaced || meta.namespace.as_deref() == namespace)
                    .then_some(())
                    .filter(|()| filter.may_patch(&candidate))
                    .map(|()| (meta.namespace.clone(), meta.name.clone().unwrap_or_default()))
            });
            for (object_namespace, name) in names {
                if let Some(mut object) = watched.watch.get_value(object_namespace.as_deref(), &name) {
                    // The uid is what keeps a patch from creating an object: never without it.
                    if object.pointer("/metadata/uid").is_none() {
                        continue;
                    }
                    object["apiVersion"] = Value::from(kind.api_version.clone());
                    object["kind"] = Value::from(kind.kind.clone());
                    targets.push(object);
                }
            }
        }
        targets
    }

    /// The watch of a patched kind.
    fn patched_kind(&self, api_version: &str, kind: &str) -> Result<&Watched, ReconcilerError> {
        self.patched
            .get(&KindRef {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
            .ok_or_else(|| ReconcilerError::UnknownChildKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
    }

    /// Records one apply of a child of `parent` and the fields it took from other managers; answers the fights
    /// that start now (to report once).
    fn record_fights(
        &self,
        parent: &ParentKey,
        child: &ObjectKey,
        conflicts: &[ruleplane_config::FieldConflict],
    ) -> Vec<ruleplane_config::FieldConflict> {
        let mut fights = self.fights.lock().unwrap_or_else(|e| e.into_inner());
        if conflicts.is_empty() && !fights.contains_key(parent) {
            return Vec::new();
        }
        let entry = fights.entry(parent.clone()).or_default();
        let started = entry.applied(child, conflicts);
        if entry.is_empty() {
            fights.remove(parent);
        }
        started
    }

    /// The parent a child points to through its annotation, if the child is this rule's.
    fn parent_of_child(&self, child: &DynamicObject) -> Option<ParentKey> {
        if child.labels().get(RULE_LABEL).map(String::as_str) != Some(self.rule.name()) {
            return None;
        }
        let reference = child.annotations().get(PARENT_ANNOTATION)?;
        Some(match reference.split_once('/') {
            Some((namespace, name)) => ParentKey {
                namespace: Some(namespace.to_owned()),
                name: name.to_owned(),
            },
            None => ParentKey {
                namespace: None,
                name: reference.clone(),
            },
        })
    }

    /// The children of `parent`: what this rule's labels mark for its UID in the child caches, or as our writes
    /// left them while their echo is on its way (including children created a moment ago, not in a cache yet),
    /// and that pass the identity check (annotation, child id, namespace): a labelled object someone else made is
    /// neither read, pruned nor released.
    fn observed_children(&self, parent: &Value) -> Vec<Value> {
        let mut observed = self.labelled_children(
            parent
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        observed.retain(|child| is_own_child(&self.rule, parent, self.parent.namespaced, child, &self.ctx.signer));
        observed
    }

    fn labelled_children(&self, uid: &str) -> Vec<Value> {
        let mut seen = HashSet::new();
        let mut observed = Vec::new();
        for watched in self.children.values() {
            for place in watched.watch.store.labelled([self.rule.name(), uid]) {
                let object = WatchedObject {
                    watch: watched.watch.key.clone(),
                    namespace: place.namespace,
                    name: place.name,
                };
                let value = match self.writes.written(&object) {
                    Some(written) => Some((*written).clone()),
                    None => watched.watch.get_value(object.namespace.as_deref(), &object.name),
                };
                let Some(value) = value else { continue };
                seen.insert(object);
                observed.push(value);
            }
        }
        let child_kinds: HashSet<&KindKey> = self.children.values().map(|w| &w.watch.key).collect();
        let created = self.writes.written_where(|written, object| {
            child_kinds.contains(&written.watch)
                && object.pointer("/metadata/labels").is_some_and(|labels| {
                    labels[RULE_LABEL].as_str() == Some(self.rule.name())
                        && labels[PARENT_UID_LABEL].as_str() == Some(uid)
                })
        });
        observed.extend(
            created
                .into_iter()
                .filter(|(object, _)| !seen.contains(object))
                .map(|(_, written)| (*written).clone()),
        );
        observed
    }

    /// The watch of a child kind, if the rule has children of that kind.
    fn child_watch(&self, api_version: &str, kind: &str) -> Option<&Watched> {
        self.children.get(&KindRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        })
    }

    /// Runs `decide` with the scopes of this rule's kinds as discovery told them (built for the call: a `dyn Fn`
    /// is not `Sync`, and the writes that follow a decision await).
    fn with_scopes<T>(&self, decide: impl FnOnce(&Scopes) -> T) -> T {
        let child_namespaced = |api_version: &str, kind: &str| {
            self.child_watch(api_version, kind)
                .is_none_or(|watched| watched.namespaced)
        };
        decide(&Scopes {
            parent_namespaced: self.parent.namespaced,
            child_namespaced: &child_namespaced,
            status: None,
        })
    }

    fn child_kind(&self, api_version: &str, kind: &str) -> Result<&Watched, ReconcilerError> {
        self.child_watch(api_version, kind)
            .ok_or_else(|| ReconcilerError::UnknownChildKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
    }

    /// The lookups of one parent; remembers what it read, so changes there reach it.
    async fn lookups_for(&self, key: &ParentKey, parent_value: &Value) -> Result<Map<String, Value>, ReconcilerError> {
        self.lookups.read(&self.rule, key, parent_value).await
    }

    /// The parent object `key` as this worker's writes to it are concerned.
    fn parent_object(&self, key: &ParentKey) -> WatchedObject {
        WatchedObject {
            watch: self.parent.watch.key.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        }
    }

    /// A child object as this worker's writes to it are concerned.
    fn child_object(&self, watched: &Watched, key: &ObjectKey) -> WatchedObject {
        let namespace = key.namespace.clone().filter(|_| watched.namespaced);
        WatchedObject {
            watch: watched.watch.key.clone(),
            namespace,
            name: key.name.clone(),
        }
    }

    /// The parent's status (projected fields, observedGeneration, conditions) to write, if it changed.
    fn decide_status(
        &self,
        parent: &DynamicObject,
        parent_value: &Value,
        children: &Map<String, Value>,
        lookups: &Map<String, Value>,
        (excluded, held): (&[String], &[String]),
        failure: Option<&ReconcilerError>,
    ) -> Option<StatusWrite> {
        if !self.writes_status {
            return None;
        }
        let (projected, status_failure) = project_status(&self.rule, parent_value, children, lookups);
        let (own_conditions, condition_failure) = author_conditions(&self.rule, parent_value, children, lookups);
        // A status template that fails leaves its field out (a condition that fails is written `Unknown`) and is
        // reported like a failed reconcile.
        let status_failure = status_failure.or(condition_failure).map(|error| {
            let message = ruleplane_config::redaction::shown_message(&error.to_string(), self.rule.reads_secrets());
            ("StatusError", message)
        });
        let [ready, mut synced] = parent_conditions(
            &self.rule,
            children,
            excluded,
            held,
            failure
                .map(|error| (error.reason(), error.to_string()))
                .or(status_failure),
        );
        let fights = self
            .fights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&ParentKey::of(parent))
            .and_then(Fights::message);
        if let Some(fights) = fights {
            synced.message = format!("{}; {fights}", synced.message);
        }
        let conditions: Vec<_> = [ready, synced].into_iter().chain(own_conditions).collect();
        let events = condition_transitions(parent_value.get("status"), &conditions)
            .into_iter()
            .map(|condition| {
                let note = format!(
                    "{} is {}: {}",
                    condition.type_,
                    condition.status.as_str(),
                    condition.message
                );
                (condition.reason.clone(), note)
            })
            .collect();
        let patch = next_status(
            parent_value.get("status"),
            &projected,
            parent.metadata.generation.filter(|_| self.status_subresource),
            &conditions,
            &io::now(),
        )?;
        Some(StatusWrite {
            parent: ParentKey::of(parent),
            version: parent.resource_version(),
            patch,
            events,
        })
    }

    /// Writes a parent's status. A parent gone meanwhile has nothing left to report (its deletion is a change
    /// of its own).
    async fn write_status(&self, status: StatusWrite) -> Result<(), ReconcilerError> {
        let StatusWrite {
            parent,
            version,
            patch,
            events,
        } = status;
        let object = self.parent_object(&parent);
        let write = io::patch_status(self, &parent, patch);
        match self
            .writes
            .track(parent.clone(), object, version.as_deref(), write)
            .await
        {
            Ok(_) => {
                // Told once the status that says it is written.
                if !events.is_empty()
                    && let Some(cached) = self.parent.watch.get(parent.namespace.as_deref(), &parent.name)
                {
                    for (reason, note) in events {
                        io::publish(self, &cached, EventType::Normal, &reason, note).await;
                    }
                }
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// A parent's status to write: the patch and the parent it was decided from. Written after the reconcile
/// (see [`crate::runner::Reconcile::report`]): the children a burst of parents needs go out first.
pub struct StatusWrite {
    parent: ParentKey,
    /// The parent's resourceVersion it was decided from.
    version: Option<String>,
    patch: Value,
    /// The Events (reason, note) of the author's conditions that change with it (`event: true`).
    events: Vec<(String, String)>,
}

impl Reconcile for ParentReconciler {
    type Key = ParentKey;
    type Error = ReconcilerError;
    type Report = StatusWrite;

    fn keys_for(&self, kind: &KindKey, change: &Change) -> Vec<ParentKey> {
        let Some(object) = change.object() else {
            self.writes.resynced(kind);
            return self.resync_parents(kind);
        };
        // The echo of our own write needs no reconcile of the parent it belongs to, nor does an event that
        // arrives while our write is in flight until the answer tells whether it was the echo; parents that read
        // the object through a lookup still get theirs below.
        let version = match change {
            Change::Applied(object) => object.resource_version(),
            _ => None,
        };
        let news = self.writes.event(&WatchedObject::of(kind, object), version.as_deref()) == EventNews::News;
        let mut keys = BTreeSet::new();
        if news && *kind == self.parent.watch.key && self.selects(&object.metadata) {
            keys.insert(ParentKey::of(object));
        }
        if *kind == self.parent.watch.key
            && matches!(change, Change::Deleted(_))
            && cleanup::has_finalizer(object, &self.finalizer)
        {
            let key = ParentKey::of(object);
            self.left_selection
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone());
            keys.insert(key);
        }
        if news
            && self.children.values().any(|child| child.watch.key == *kind)
            && let Some(parent) = self.parent_of_child(object)
        {
            keys.insert(parent);
        }
        if let Some((patched_kind, _)) = self.patched.iter().find(|(_, patched)| patched.watch.key == *kind) {
            // A patched object changed or appeared (a new Pod of the app): the parents whose patches may select
            // it look (not every parent near it: most Pods' status updates concern none).
            keys.extend(self.parents_patching(patched_kind, object));
        }
        keys.extend(self.lookups.readers_of(kind, change));
        keys.into_iter().collect()
    }

    /// Parents are sharded over the replicas by namespace and name.
    fn shard(&self, key: &ParentKey) -> Option<u32> {
        Some(self.ctx.shards.gate.shard_of(key.namespace.as_deref(), &key.name))
    }

    /// A resync reads the parents' metadata (the rule's selected parents only).
    fn resync_reads(&self) -> usize {
        self.parent.watch.store.len()
    }

    async fn reconcile(&self, key: &ParentKey) -> Result<Reconciled<StatusWrite>, ReconcilerError> {
        let Some(cached) = self.parent.watch.get(key.namespace.as_deref(), &key.name) else {
            // Gone: children with an owner reference go with it (garbage collector); what it read is not kept.
            debug!(parent = ?key, "parent not found");
            self.lookups.forget(key);
            self.fights.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
            let left = self
                .left_selection
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(key);
            if left {
                // Kept until it succeeds: a failure is retried with backoff.
                cleanup::release_deselected(self, key).await?;
                self.left_selection
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(key);
            }
            return Ok(Action::AwaitChange.into());
        };
        // Selected again (or never gone): nothing to release.
        self.left_selection
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        // Our status write's answer while its echo is on its way: the cache would show the status before it.
        let parent = match self.writes.written(&self.parent_object(key)) {
            Some(written) => serde_json::from_value::<DynamicObject>((*written).clone())
                .map(Arc::new)
                .unwrap_or(cached),
            None => cached,
        };
        if !self.selects(&parent.metadata) {
            self.lookups.forget(key);
            return Ok(Action::AwaitChange.into());
        }
        let deleting = parent.metadata.deletion_timestamp.is_some();
        if deleting && !cleanup::has_finalizer(&parent, &self.finalizer) {
            // Owner references take care of the children: the garbage collector deletes them.
            return Ok(Action::AwaitChange.into());
        }
        let parent_value = serde_json::to_value(&*parent).map_err(|e| ReconcilerError::Rejected {
            immutable: false,
            child: ObjectKey {
                api_version: String::new(),
                kind: parent.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default(),
                namespace: key.namespace.clone(),
                name: key.name.clone(),
            },
            message: e.to_string(),
        })?;
        if deleting {
            return cleanup::finalize(self, &writer::ApiWriter, key, &parent, &parent_value)
                .await
                .map(Into::into);
        }
        match self.converge(&writer::ApiWriter, key, &parent, &parent_value).await {
            Ok(Converged {
                children,
                lookups,
                excluded,
                held,
            }) => Ok(Reconciled {
                action: match self.rule.spec.resync_period {
                    Some(period) => Action::RequeueAfter(period.duration()),
                    None => Action::AwaitChange,
                },
                report: self.decide_status(&parent, &parent_value, &children, &lookups, (&excluded, &held), None),
            }),
            Err(error) => {
                // Synced=False tells `kubectl get`/`wait` users why; a failure to write it is secondary.
                let observed = self.observed_children(&parent_value);
                let children = children_by_id(&self.rule, &observed);
                // Written before the error is returned, so the runner's backoff counts from a reported failure.
                if let Some(status) =
                    self.decide_status(&parent, &parent_value, &children, &Map::new(), (&[], &[]), Some(&error))
                {
                    let _ = self.write_status(status).await;
                }
                Err(error)
            }
        }
    }

    async fn report(&self, _key: &ParentKey, status: StatusWrite) -> Result<(), ReconcilerError> {
        self.write_status(status).await
    }

    async fn report_error(&self, key: &ParentKey, error: &ReconcilerError) {
        io::warn_parent(self, key, error).await;
    }
}

#[cfg(test)]
mod tests;
