//! ResourceDefinition worker: registers and evolves one CRD from its rule (server-side apply), waits for it to
//! be Established with its names accepted, and reports problems on the rule without ever deleting data.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition,
};
use kube::api::{Api, ApiResource, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use ruleplane_config::{CrdRemoval, ResourceDefinitionRule, Rule, deletable_by, plan_crd_removal};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::context::WorkerContext;
use crate::context::WorkerError;
use crate::runner::{Action, Reconcile, ReconcileError, Reconciled, Requeued, Runner};
use crate::watch_hub::{Change, KindKey, SharedWatch};
use ruleplane_config::ownership::CRD_FIELD_MANAGER;
use ruleplane_config::{CrdPlan, CrdRefusal, EvolutionPolicy, plan_crd};

const KIND: &str = "ResourceDefinition";
/// Re-apply now and then even without a change, as controllers' resync does.
const RESYNC: Duration = Duration::from_secs(600);

pub fn crd_resource() -> ApiResource {
    ApiResource::erase::<CustomResourceDefinition>(&())
}

/// A kind as a ResourceDefinition declares it, for [`served_as_declared`].
pub struct DeclaredKind<'a> {
    pub crd_name: &'a str,
    pub kind: &'a str,
    pub version: &'a str,
    pub namespaced: bool,
}

/// Waits, on the shared watch of CRDs, until the CRD declaring `declared` is Established and serves its version
/// (`Err` with the reason after `limit`, or when `stop` comes), and checks it is the kind declared: a CRD of that
/// name installed by someone else may name another kind or scope (its ResourceDefinition rule reports the
/// conflict; the worker must not send requests shaped for a kind that is not there). Workers whose kinds a
/// ResourceDefinition of the same rule set declares wait here at start rather than asking discovery before the
/// CRD is served: that met a 404 (a WARN from the client, a worker restart counted, the rule degraded for a
/// second) on every start of a fresh cluster.
pub async fn served_as_declared(
    hub: &crate::watch_hub::WatchHub,
    declared: &DeclaredKind<'_>,
    limit: Duration,
    stop: &CancellationToken,
) -> Result<(), String> {
    let watch = hub.watch(&crd_resource());
    let mut changes = watch.subscribe();
    let crd_name = declared.crd_name;
    let check = || -> Option<Result<(), String>> {
        let crd = watch.store.get_typed::<CustomResourceDefinition>(None, crd_name)?;
        let names = &crd.spec.names;
        let namespaced = crd.spec.scope == "Namespaced";
        if names.kind != declared.kind || namespaced != declared.namespaced {
            return Some(Err(format!(
                "CRD {crd_name} serves kind {} ({}), not {} ({}) as declared",
                names.kind,
                crd.spec.scope,
                declared.kind,
                if declared.namespaced { "Namespaced" } else { "Cluster" }
            )));
        }
        let established = condition(&crd, "Established").is_some_and(|c| c.status == "True");
        let serves = crd.spec.versions.iter().any(|v| v.name == declared.version && v.served);
        (established && serves).then_some(Ok(()))
    };
    let waited_too_long = || format!("CRD {crd_name} is not established and serving {} yet", declared.version);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    tokio::select! {
        _ = watch.synced() => {}
        _ = &mut deadline => return Err(waited_too_long()),
        _ = stop.cancelled() => return Err("stopped".to_owned()),
    }
    loop {
        if let Some(checked) = check() {
            return checked;
        }
        tokio::select! {
            change = changes.recv() => if change.is_none() { return Err(waited_too_long()) },
            _ = &mut deadline => return Err(waited_too_long()),
            _ = stop.cancelled() => return Err("stopped".to_owned()),
        }
    }
}

/// One pass's failure. `Refused` and `Rejected` are permanent (they need a change to the rule or the cluster,
/// so the worker waits for one); `Api` is transient and retried with backoff.
#[derive(Debug, thiserror::Error)]
enum PassError {
    #[error(transparent)]
    Refused(#[from] CrdRefusal),
    #[error("the apiserver rejected CustomResourceDefinition {crd}: {message}")]
    Rejected { crd: String, message: String },
    #[error("CustomResourceDefinition {crd}: names not accepted: {message}")]
    NamesNotAccepted { crd: String, message: String },
    #[error("Kubernetes API error: {0}")]
    Api(#[from] kube::Error),
}

impl ReconcileError for PassError {
    fn category(&self) -> &'static str {
        match self {
            PassError::Refused(r) => r.category(),
            PassError::Rejected { .. } => "rejected",
            PassError::NamesNotAccepted { .. } => "names-not-accepted",
            PassError::Api(_) => "api",
        }
    }

    /// Refusals and rejections need a change of the rule or the cluster; API errors are retried.
    fn is_permanent(&self) -> bool {
        !matches!(self, PassError::Api(_))
    }
}

/// The observed outcome of a successful pass.
#[derive(Debug, PartialEq, Eq)]
enum Observed {
    Established,
    /// Applied; the apiserver has not reported the conditions yet.
    Pending,
}

pub fn evolution_policy(rule: &ResourceDefinitionRule, takes_over_from: Vec<String>) -> EvolutionPolicy {
    EvolutionPolicy {
        rule: rule.name().to_owned(),
        takes_over_from,
        adopt: rule.adopt(),
        allow_storage_version_change: rule.allow_storage_version_change(),
        allow_version_removal: rule.allow_version_removal(),
    }
}

/// The worker's reconcile: one key, the CRD's name.
struct CrdReconciler {
    ctx: WorkerContext,
    desired: CustomResourceDefinition,
    crd_name: String,
    policy: EvolutionPolicy,
    watch: Arc<SharedWatch>,
    api: Api<CustomResourceDefinition>,
    established: AtomicBool,
}

impl Reconcile for CrdReconciler {
    type Key = String;
    type Error = PassError;
    type Report = std::convert::Infallible;

    fn keys_for(&self, _kind: &KindKey, change: &Change) -> Vec<String> {
        // Drift, conditions and deletion of our CRD; other CRDs are not ours to look at.
        match change.object() {
            Some(object) if object.name_any() != self.crd_name => Vec::new(),
            _ => vec![self.crd_name.clone()],
        }
    }

    async fn reconcile(&self, _key: &String) -> Result<Reconciled<Self::Report>, PassError> {
        // fetch (from the shared cache) → decide (pure, in ruleplane-config) → apply → report
        let existing = self
            .watch
            .get(None, &self.crd_name)
            .and_then(|obj| serde_json::to_value(&*obj).ok())
            .and_then(|v| serde_json::from_value::<CustomResourceDefinition>(v).ok());
        let observed = pass(&self.api, &self.desired, existing.as_ref(), &self.policy).await?;
        let established = observed == Observed::Established;
        if established && !self.established.swap(true, Ordering::Relaxed) {
            info!(crd = %self.crd_name, "CustomResourceDefinition established");
        }
        Ok(Action::RequeueAfter(RESYNC).into())
    }

    async fn report_error(&self, _key: &String, error: &PassError) {
        publish_warning(&self.ctx, &self.api, &self.crd_name, error).await;
    }
}

pub async fn run(
    rule: ResourceDefinitionRule,
    takes_over_from: Vec<String>,
    ctx: WorkerContext,
    stop: CancellationToken,
) -> Result<(), WorkerError> {
    let desired = ruleplane_config::generate_crd(&rule);
    let crd_name = desired.name_any();
    let watch = ctx.hub.watch(&crd_resource());
    let subscription = watch.subscribe();
    tokio::select! {
        _ = watch.synced() => {}
        _ = stop.cancelled() => return Ok(()),
    }
    let runner = Runner {
        gate: None,
        backoff: crate::runner::Backoff::CONTROLLER,
        rule: rule.name().to_owned(),
        kind: KIND,
        concurrency: 1,
        metrics: ctx.metrics.clone(),
        health: ctx.health.clone(),
    };
    let reconciler = Arc::new(CrdReconciler {
        api: Api::all(ctx.client.clone()),
        policy: evolution_policy(&rule, takes_over_from),
        desired,
        crd_name: crd_name.clone(),
        watch,
        ctx,
        established: AtomicBool::new(false),
    });
    runner
        .run(reconciler, vec![subscription], Requeued::none(), vec![crd_name], stop)
        .await
}

async fn pass(
    api: &Api<CustomResourceDefinition>,
    desired: &CustomResourceDefinition,
    existing: Option<&CustomResourceDefinition>,
    policy: &EvolutionPolicy,
) -> Result<Observed, PassError> {
    let crd = desired.name_any();
    let plan = plan_crd(desired, existing, policy)?;
    if plan == CrdPlan::Create {
        info!(crd = %crd, "creating CustomResourceDefinition");
    }
    // force: our field manager owns every field the rule declares, including ones a human edited (drift).
    let applied = api
        .patch(
            &crd,
            &PatchParams::apply(CRD_FIELD_MANAGER).force(),
            &Patch::Apply(desired),
        )
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 422 || s.code == 400 => PassError::Rejected {
                crd: crd.clone(),
                message: s.message,
            },
            other => PassError::Api(other),
        })?;
    observe(&applied)
}

/// The CRD's condition of this type, if the apiserver reported it.
pub(crate) fn condition<'c>(
    crd: &'c CustomResourceDefinition,
    type_: &str,
) -> Option<&'c CustomResourceDefinitionCondition> {
    let conditions = crd.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().find(|c| c.type_ == type_)
}

fn observe(crd: &CustomResourceDefinition) -> Result<Observed, PassError> {
    if let Some(names) = condition(crd, "NamesAccepted")
        && names.status == "False"
    {
        return Err(PassError::NamesNotAccepted {
            crd: crd.name_any(),
            message: names
                .message
                .clone()
                .unwrap_or_else(|| names.reason.clone().unwrap_or_default()),
        });
    }
    match condition(crd, "Established") {
        Some(c) if c.status == "True" => Ok(Observed::Established),
        _ => Ok(Observed::Pending),
    }
}

async fn publish_warning(ctx: &WorkerContext, api: &Api<CustomResourceDefinition>, crd_name: &str, error: &PassError) {
    // Events need an object to hang on: the CRD when it exists (a rule is not a Kubernetes object), else the
    // manager's own Pod, so a CRD the apiserver refused to create is still visible in `kubectl get events`.
    let regarding = match api.get_opt(crd_name).await {
        Ok(Some(crd)) => crd.object_ref(&()),
        _ => match &ctx.self_ref {
            Some(pod) => pod.clone(),
            None => return,
        },
    };
    let event = Event {
        type_: EventType::Warning,
        reason: match error {
            PassError::Refused(_) => "ApplyRefused",
            PassError::Rejected { .. } => "ApplyRejected",
            PassError::NamesNotAccepted { .. } => "NamesNotAccepted",
            PassError::Api(_) => "ApplyFailed",
        }
        .to_owned(),
        note: Some(truncate(&error.to_string(), 1000)),
        action: "Apply".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &regarding).await {
        warn!(error = %e, "could not publish an Event");
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A removed rule keeps its CRD (and so every user object of that kind) unless it said `deletionPolicy:
/// Delete` and no rule of the new set (`remaining`) declares the same CRD; even then only a CRD carrying this
/// rule's label is deleted, and only as it was read (uid and resourceVersion preconditions), so a CRD relabelled
/// or replaced in between is left alone.
pub async fn on_rule_removed(rule: &ResourceDefinitionRule, remaining: &[Rule], ctx: &WorkerContext) {
    let name = rule.crd_name();
    match plan_crd_removal(rule, remaining) {
        CrdRemoval::Retain => {
            info!(rule = rule.name(), crd = %name, "rule removed; CustomResourceDefinition kept (deletionPolicy: Retain)");
            return;
        }
        CrdRemoval::TakenOver { by } => {
            info!(rule = rule.name(), crd = %name, by = %by, "rule removed; CustomResourceDefinition kept: rule {by} declares it and takes it over");
            return;
        }
        CrdRemoval::Delete => {}
    }
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    match api.get_opt(&name).await {
        Ok(Some(crd)) if deletable_by(crd.metadata.labels.as_ref(), rule.name()) => {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: crd.metadata.uid.clone(),
                    resource_version: crd.metadata.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {
                    info!(rule = rule.name(), crd = %name, "rule removed; CustomResourceDefinition deleted (deletionPolicy: Delete)")
                }
                Err(e) => {
                    warn!(rule = rule.name(), crd = %name, error = %e, "could not delete CustomResourceDefinition")
                }
            }
        }
        Ok(Some(_)) => {
            warn!(rule = rule.name(), crd = %name, "not deleting CustomResourceDefinition: it is not labelled as this rule's")
        }
        Ok(None) => {}
        Err(e) => {
            warn!(rule = rule.name(), crd = %name, error = %e, "could not read CustomResourceDefinition for deletion")
        }
    }
}
