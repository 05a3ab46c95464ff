//! `ruleplane run`: wires rules, client, shared watches, the units of work shared with other replicas, supervisor
//! and HTTP endpoints.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::cli::RunArgs;
use crate::context::WorkerContext;
use crate::health::Health;
use crate::http::{self, Endpoints};
use crate::kube_client;
use crate::metrics::{Metrics, ResultLabels};
use crate::permissions;
use crate::rules_watch;
use crate::sharding::{self, Owned, ShardGate, ShardScope, ShardingConfig};
use crate::supervisor::Supervisor;
use crate::watch_hub::WatchHub;
use crate::workers::resource_definition::crd_resource;

pub fn main(args: RunArgs) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if args.worker_threads > 0 {
        builder.worker_threads(args.worker_threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            error!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `:8080` means every interface (the controller-runtime convention); `0` disables the listener.
pub fn parse_bind_address(s: &str) -> anyhow::Result<Option<SocketAddr>> {
    if s == "0" || s.is_empty() {
        return Ok(None);
    }
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_owned()
    };
    full.parse()
        .map(Some)
        .with_context(|| format!("`{s}` is not an address like :8080 or 127.0.0.1:8080"))
}

fn identity(args: &RunArgs) -> String {
    if let Some(id) = args
        .identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .filter(|s| !s.is_empty())
    {
        return id;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ruleplane".to_owned());
    // Two processes on one host must not share an identity, or both would believe they lead.
    let suffix = std::collections::hash_map::RandomState::new();
    let n = std::hash::BuildHasher::hash_one(&suffix, std::process::id());
    format!("{host}_{:08x}", n as u32)
}

fn lease_namespace(args: &RunArgs) -> String {
    args.leader_election_namespace.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "default".to_owned())
    })
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    info!(
        version = crate::build_info::VERSION,
        git_commit = crate::build_info::GIT_COMMIT,
        kubernetes = crate::build_info::KUBERNETES,
        "starting ruleplane"
    );
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    tokio::spawn(crate::metrics::sample_runtime_lag(metrics.runtime_lag.clone()));
    let endpoints = Endpoints {
        health: health.clone(),
        metrics: metrics.clone(),
    };
    if let Some(addr) = parse_bind_address(&args.metrics_bind_address)? {
        let local = http::serve(addr, endpoints.clone())
            .await
            .with_context(|| format!("binding metrics to {addr}"))?;
        info!(address = %local, "serving /metrics");
    }
    if let Some(addr) = parse_bind_address(&args.health_probe_bind_address)? {
        let local = http::serve(addr, endpoints)
            .await
            .with_context(|| format!("binding health probes to {addr}"))?;
        info!(address = %local, "serving /healthz and /readyz");
    }

    let limits = kube_client::ClientLimits {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
        max_in_flight: args.kube_api_max_in_flight,
    };
    let identity = identity(&args);
    let mut kube_config = kube_client::config(args.kubeconfig.as_deref()).await?;
    // Which replica sent a request shows in the apiserver's audit log (and its logs) by its user agent.
    if let Ok(agent) =
        hyper::header::HeaderValue::from_str(&format!("ruleplane/{} ({identity})", crate::build_info::VERSION))
    {
        kube_config.headers.push((hyper::header::USER_AGENT, agent));
    }
    let client = kube_client::limited_client(kube_config.clone(), limits)?;
    let version = client
        .apiserver_version()
        .await
        .context("asking the apiserver for its version")?;
    let kubernetes_version = behave_as(&version)?;
    info!(server = %version.git_version, platform = %version.platform, behave_as = %kubernetes_version, "connected to Kubernetes");

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: ruleplane_config::ownership::EVENT_REPORTER.into(),
            instance: Some(identity.clone()),
        },
    );
    let events = crate::events::EventLane::new(
        client.clone(),
        ruleplane_config::ownership::EVENT_REPORTER,
        &identity,
        metrics.events.clone(),
    );
    let lane = events.clone();
    // Before any watch or worker: children are signed with it, and child watches keep only what it proves.
    let manager_namespace = lease_namespace(&args);
    let root = args.rules.clone();
    let first_print = rules_watch::fingerprint(&root);
    // Kinds another tool installs need no manifest here: the worker asks the apiserver, and waits while it is not
    // served (the tool may come later).
    let load_options = ruleplane_config::LoadOptions::at_run_time(args.installed.crds.clone(), kubernetes_version);
    let initial = ruleplane_config::load_paths_with(std::slice::from_ref(&root), &load_options);
    // Said before waiting for the signing key: a replica that may not read it must still say what it lacks.
    if let Ok(rules) = &initial {
        spawn_permission_report(&client, &health, rules, &manager_namespace);
    }
    let signer = tokio::select! {
        signer = crate::child_signing::wait_for_signer(&client, &manager_namespace, &health) => signer,
        () = shutdown_signal() => return Ok(()),
    };
    let hub = WatchHub::new(client.clone(), metrics.watches.clone());
    // Closed until the unit loop opens this replica's units; open for good without Leases.
    let gate = if args.leader_elect {
        ShardGate::closed(args.shards)
    } else {
        ShardGate::always_open(args.shards)
    };
    // POD_NAME comes from the downward API (the Helm chart sets it); the Pod lives in the Lease's namespace.
    let self_ref = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .map(|name| ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name),
            namespace: Some(lease_namespace(&args)),
            ..Default::default()
        });
    let ctx = WorkerContext {
        signer,
        self_ref,
        shards: ShardScope {
            count: args.shards,
            owned: None,
            gate: gate.clone(),
        },
        client: client.clone(),
        hub: hub.clone(),
        discovery: Arc::new(crate::kube_client::KindDiscovery::new(client.clone())),
        metrics: metrics.clone(),
        health: health.clone(),
        recorder,
        events,
        kubernetes_version,
    };
    let (owned_tx, mut owned_rx) = watch::channel(Owned::default());
    let mut supervisor = Supervisor::new(ctx, owned_rx.clone(), args.allow_empty_rule_set);
    if !args.leader_elect {
        supervisor = supervisor.with_fixed_units();
    }

    // Initial load. Invalid rules do not stop the process: it stays unready, shows the errors in /readyz and
    // picks up the fixed files, which is what a ConfigMap rollout needs.
    let mut reloads = rules_watch::spawn(root.clone(), load_options, args.reload_interval, first_print);
    apply_load(&mut supervisor, &health, &metrics, initial, &root, None).await;

    // Standbys watch too, so their caches are warm at takeover.
    let crd_watch = hub.watch(&crd_resource());
    let synced_health = health.clone();
    tokio::spawn(async move {
        crd_watch.synced().await;
        synced_health.set_caches_synced(true);
    });

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let units = if args.leader_elect {
        let config = ShardingConfig {
            namespace: lease_namespace(&args),
            prefix: args.leader_election_id.clone(),
            identity: identity.clone(),
            timings: ruleplane_config::sharding::Timings {
                lease_duration: args.lease_duration,
                renew_deadline: args.renew_deadline,
                retry_period: args.retry_period,
            },
            shards: args.shards,
        };
        config.timings.check()?;
        info!(identity = %identity, namespace = %config.namespace, shards = args.shards, "sharing the work through Leases");
        Some(tokio::spawn(sharding::run_units(
            kube_client::lease_client(kube_config)?,
            config,
            gate.clone(),
            metrics.clone(),
            owned_tx,
            shutdown_rx,
        )))
    } else {
        owned_tx.send_replace(Owned::everything(args.shards));
        None
    };

    let mut shutdown = std::pin::pin!(shutdown_signal());
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            changed = owned_rx.changed() => {
                if changed.is_err() { break; }
                let owned = owned_rx.borrow_and_update().clone();
                health.set_units(owned.describe(args.shards));
                health.set_membership(owned.membership.ready());
                metrics.members.set(i64::try_from(owned.members).unwrap_or(i64::MAX));
                supervisor.set_owned(owned).await;
            }
            _ = tokio::time::sleep_until(supervisor.settle_due().unwrap_or_else(tokio::time::Instant::now)), if supervisor.settle_due().is_some() => {
                supervisor.settle().await;
            }
            Some(loaded) = reloads.recv() => {
                let report = (&client, manager_namespace.as_str());
                apply_load(&mut supervisor, &health, &metrics, loaded, &root, Some(report)).await;
            }
        }
    }
    info!("shutting down: stopping workers and handing the units back");
    supervisor.stop_all(false).await;
    // Events of the workers' last writes are still queued: send them, briefly.
    lane.drain(std::time::Duration::from_secs(3)).await;
    metrics.leader.set(0);
    let _ = shutdown_tx.send(true);
    if let Some(units) = units {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(6), units).await;
    }
    Ok(())
}

async fn apply_load(
    supervisor: &mut Supervisor,
    health: &Arc<Health>,
    metrics: &Metrics,
    loaded: Result<ruleplane_config::RuleSet, ruleplane_config::Diagnostics>,
    root: &std::path::Path,
    // Where to check the new rule set's permissions (`None`: checked already).
    permission_report: Option<(&kube::Client, &str)>,
) {
    match loaded {
        Ok(rules) => {
            info!(count = rules.rules().len(), path = %root.display(), "rules loaded");
            for rule in rules.rules() {
                info!(rule = rule.name(), kind = rule.kind().as_str(), source = %rule.source(), "rule");
            }
            metrics.rule_errors.set(0);
            health.set_reload_error(None);
            if let Err(refusal) = supervisor.apply_rules(&rules).await {
                let message = format!(
                    "rule reload refused: {refusal}; the previous rules keep running; pass --allow-empty-rule-set \
                     (Helm value allowEmptyRuleSet) to allow it"
                );
                warn!(path = %root.display(), "{message}");
                metrics
                    .reloads
                    .get_or_create(&ResultLabels {
                        result: "refused".into(),
                    })
                    .inc();
                metrics.reload_refused.set(1);
                health.set_reload_refused(Some(message));
                return;
            }
            metrics
                .reloads
                .get_or_create(&ResultLabels {
                    result: "success".into(),
                })
                .inc();
            metrics.reload_refused.set(0);
            health.set_reload_refused(None);
            health.set_rules_loaded();
            if let Some((client, namespace)) = permission_report {
                spawn_permission_report(client, health, &rules, namespace);
            }
        }
        Err(diagnostics) => {
            let count = diagnostics.len();
            warn!(errors = count, path = %root.display(), "rules rejected; the previous rules keep running\n{diagnostics}");
            metrics
                .reloads
                .get_or_create(&ResultLabels {
                    result: "invalid".into(),
                })
                .inc();
            metrics.rule_errors.set(i64::try_from(count).unwrap_or(i64::MAX));
            health.set_reload_error(Some(diagnostics.to_string()));
            // The latest attempt is this one: a refusal of an earlier set no longer describes it.
            metrics.reload_refused.set(0);
            health.set_reload_refused(None);
        }
    }
}

/// Checks the permissions `rules` need and shows what is missing in `/readyz`, off the main loop: changes of
/// units and reloads must not wait for the apiserver's answers.
fn spawn_permission_report(
    client: &kube::Client,
    health: &Arc<Health>,
    rules: &ruleplane_config::RuleSet,
    namespace: &str,
) {
    let (client, health, rules, namespace) = (client.clone(), health.clone(), rules.clone(), namespace.to_owned());
    tokio::spawn(async move {
        health.set_missing_permissions(permissions::report_missing(&client, &rules, &namespace).await);
    });
}

/// Resolves on SIGTERM (what Kubernetes sends) or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            error!("cannot listen for SIGTERM: {e}");
            let _ = ctrl_c.await;
            return;
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term.recv() => {},
    }
}

/// The supported Kubernetes version to behave as on this apiserver: its own minor, or the nearest end of the
/// supported window with a warning (as kubectl warns of skew).
fn behave_as(
    info: &k8s_openapi::apimachinery::pkg::version::Info,
) -> anyhow::Result<ruleplane_config::KubernetesVersion> {
    use ruleplane_config::{KubernetesVersion, ServerVersion};
    let server = KubernetesVersion::of_server(&info.major, &info.minor)
        .with_context(|| format!("reading the apiserver's version {}", info.git_version))?;
    match server {
        ServerVersion::Supported(_) => {}
        ServerVersion::Newer(newest, _) | ServerVersion::Older(newest, _) => warn!(
            server = %info.git_version,
            supported = %KubernetesVersion::supported_list(),
            "the apiserver's Kubernetes version is outside the supported window: behaving as Kubernetes {newest}"
        ),
    }
    Ok(server.behave_as())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_follow_controller_conventions() {
        assert_eq!(
            parse_bind_address(":8080").unwrap(),
            Some("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:9").unwrap(),
            Some("127.0.0.1:9".parse().unwrap())
        );
        assert_eq!(parse_bind_address("0").unwrap(), None);
        let err = parse_bind_address("localhost").unwrap_err().to_string();
        assert!(err.contains("not an address like :8080"), "{err}");
    }
}
