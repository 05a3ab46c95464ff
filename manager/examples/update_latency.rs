//! The Reconciler benchmark's latency probe: changes converged parents at a fixed rate and measures how long each
//! change takes to show in the child rendered from it, as p50/p90/p99/max, two ways: from the parent's patch
//! being sent, and from its answer (the change committed: the event a controller reacts to exists from then on)
//! to the child's watch event carrying the new value. Needs a running manager on the benchmark's rule; used by
//! tests/bench/reconciler.sh.
//!
//! Usage: update_latency KUBECONFIG NAMESPACE PARENTS RATE SECONDS
//! Parents are `app-0…` of `bench.ruleplane.dev/v1 BenchApp`; each update sets `spec.image`, which the rule copies
//! into the `<parent>-config` ConfigMap's `data.image`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, kubeconfig, namespace, parents, rate, seconds] = args.as_slice() else {
        anyhow::bail!("usage: update_latency KUBECONFIG NAMESPACE PARENTS RATE SECONDS");
    };
    let (parents, rate, seconds): (usize, f64, f64) = (parents.parse()?, rate.parse()?, seconds.parse()?);
    let config =
        Config::from_custom_kubeconfig(Kubeconfig::read_from(kubeconfig)?, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    // The value each update writes, with when its patch was sent and answered, and when the child showed it.
    let updates: Arc<Mutex<HashMap<String, Update>>> = Arc::default();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    // Updates start once the probe's own watch has listed (10,000 ConfigMaps take a while), then one more second
    // for the apiserver to settle, so the probe's list is not measured as the manager's latency.
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel::<()>();
    let watch = {
        let updates = updates.clone();
        let mut listed_tx = Some(listed_tx);
        let selector = watcher::Config::default().labels("app.kubernetes.io/managed-by=ruleplane");
        tokio::spawn(async move {
            let mut events = watcher(config_maps, selector).boxed();
            while let Ok(Some(event)) = events.try_next().await {
                if matches!(event, watcher::Event::InitDone)
                    && let Some(listed) = listed_tx.take()
                {
                    let _ = listed.send(());
                }
                let watcher::Event::Apply(child) = event else { continue };
                let Some(image) = child.data.as_ref().and_then(|d| d.get("image")) else {
                    continue;
                };
                if let Some(update) = updates.lock().unwrap_or_else(|e| e.into_inner()).get_mut(image) {
                    update.shown.get_or_insert_with(Instant::now);
                }
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(60), listed_rx).await??;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("bench.ruleplane.dev", "v1", "BenchApp"));
    let apps: Api<DynamicObject> = Api::namespaced_with(client, namespace, &resource);
    let total = (rate * seconds) as usize;
    // Values no earlier run wrote: an update setting the value a parent already has changes nothing, so no child
    // event would ever time it.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let interval = Duration::from_secs_f64(1.0 / rate);
    let started = Instant::now();
    // Each patch is its own task, so its answer is timed when it arrives, not when this loop next looks.
    let mut sends = tokio::task::JoinSet::new();
    for update in 0..total {
        // A fixed schedule (not "sleep after each"), so a slow request does not lower the rate.
        tokio::time::sleep_until((started + interval * update as u32).into()).await;
        let name = format!("app-{}", update % parents);
        let image = format!("nginx:1.27-r{run}-u{update}");
        let update = Update {
            sent: Instant::now(),
            answered: None,
            shown: None,
        };
        updates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(image.clone(), update);
        let (apps, updates) = (apps.clone(), updates.clone());
        sends.spawn(async move {
            let patch = json!({ "spec": { "image": image } });
            let answer = apps.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
            if let Some(update) = updates.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&image) {
                update.answered = Some(Instant::now());
            }
            answer.map(drop)
        });
        while let Some(done) = sends.try_join_next() {
            done??;
        }
    }
    while let Some(done) = sends.join_next().await {
        done??;
    }
    let sent_in = started.elapsed();
    // Stragglers: up to 10 s for the last changes to show.
    let unseen = || {
        let updates = updates.lock().unwrap_or_else(|e| e.into_inner());
        updates.values().filter(|update| update.shown.is_none()).count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while unseen() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    watch.abort();
    let missing = unseen();
    let updates = std::mem::take(&mut *updates.lock().unwrap_or_else(|e| e.into_inner()));
    let shown: Vec<&Update> = updates.values().filter(|update| update.shown.is_some()).collect();
    let from_sent = shown.iter().filter_map(|u| Some(u.shown? - u.sent)).collect();
    // The child can show before the patch's answer reaches the probe (the controller answered faster than the
    // apiserver's reply travelled): the change → child time was then shorter than that trip, counted as 0.
    let from_answer = shown
        .iter()
        .filter_map(|u| Some(u.shown?.saturating_duration_since(u.answered?)))
        .collect();
    println!(
        "update → child latency: {} updates at {:.0}/s over {:.1} s; {} not seen within 10 s",
        updates.len(),
        total as f64 / sent_in.as_secs_f64(),
        sent_in.as_secs_f64(),
        missing
    );
    println!("  patch sent → child seen:      {}", quantiles(from_sent));
    println!("  change committed → child seen: {}", quantiles(from_answer));
    Ok(())
}

/// One parent update: its patch sent and answered, and the child showing the new value.
struct Update {
    sent: Instant,
    answered: Option<Instant>,
    shown: Option<Instant>,
}

fn quantiles(mut latencies: Vec<Duration>) -> String {
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    };
    format!(
        "p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        at(0.50),
        at(0.90),
        at(0.99),
        at(1.0)
    )
}
