//! The scheduler half of the soak: KWOK nodes, a stream of pods (and gangs of three) for the soak's
//! SchedulerPolicy, samples of every node's requested resources against its allocatable, and the audit log's
//! bindings per pod.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;

use crate::audit;
use crate::faults::Rng;
use crate::support::cluster_nodes::{create_node, node};

pub const NODES: usize = 4;
/// Pods kept at once (the oldest deleted beyond): at most 300m each, they always fit the 16 CPUs with the gangs.
const LIVE_PODS: usize = 30;
const LIVE_GANGS: usize = 2;
pub const GANG_SIZE: usize = 3;

/// Creates the soak's KWOK nodes (4 CPUs, 16 GiB each) labelled for its pods only.
pub async fn create_nodes(client: &Client, namespace: &str) -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..NODES {
        let labels = json!({"ruleplane.dev/kwok": "true", "soak-node": namespace});
        names.push(create_node(client, node(&format!("soak-{i}"), "4", "16Gi", labels, json!([]))).await);
    }
    names
}

fn pod(namespace: &str, name: &str, scheduler: &str, cpu: &str, gang: Option<&str>) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"soak-node": namespace},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
        },
    });
    if let Some(gang) = gang {
        pod["metadata"]["labels"]["gang"] = json!(gang);
        // The newest plane's Workload API (v1.37): the member names its PodGroup.
        pod["spec"]["schedulingGroup"] = json!({"podGroupName": gang});
    }
    serde_json::from_value(pod).expect("a pod")
}

/// What the pod stream did, and what the samples saw.
#[derive(Default)]
pub struct PodStats {
    pub created: u64,
    pub create_failed: u64,
    pub deleted: u64,
    /// Gangs whose Workload and every member were created (only those must end bound whole).
    pub complete_gangs: BTreeSet<String>,
    pub gangs_started: u64,
    pub samples: u64,
    /// Over-committed nodes seen: (node, requested cpu m / allocatable, memory).
    pub overcommits: Vec<String>,
    /// Samples in which a complete gang had some but not all members bound.
    pub partial_gang_samples: u64,
    /// The highest share of a node's CPU seen requested.
    pub peak_cpu_share: f64,
}

fn delete_now() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    }
}

/// Creates pods (100–300m) about every 300 ms and a gang every 25 s until `stop`, deleting the oldest beyond
/// [`LIVE_PODS`] / [`LIVE_GANGS`]. Each request is given 5 s: the apiserver may be gone.
pub async fn run_stream(
    client: Client,
    namespace: String,
    scheduler: String,
    stats: Arc<Mutex<PodStats>>,
    seed: u64,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut rng = Rng::new(seed);
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let workloads = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &namespace,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", "PodGroup")),
    );
    let within = Duration::from_secs(5);
    let mut live: VecDeque<String> = VecDeque::new();
    let mut gangs: VecDeque<String> = VecDeque::new();
    let mut doomed: Vec<String> = Vec::new();
    let mut next = 0_u64;
    let mut last_gang = tokio::time::Instant::now();
    while !*stop.borrow() {
        next += 1;
        if last_gang.elapsed() > Duration::from_secs(25) {
            last_gang = tokio::time::Instant::now();
            let gang = format!("gang-{next:05}");
            stats.lock().expect("stats").gangs_started += 1;
            let workload: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": gang},
                "spec": {"schedulingPolicy": {"gang": {"minCount": GANG_SIZE}}},
            }))
            .expect("workload");
            let mut whole = matches!(
                tokio::time::timeout(within, workloads.create(&PostParams::default(), &workload)).await,
                Ok(Ok(_))
            );
            for member in 0..GANG_SIZE {
                let name = format!("{gang}-{member}");
                let created = tokio::time::timeout(
                    within,
                    pods.create(
                        &PostParams::default(),
                        &pod(&namespace, &name, &scheduler, "500m", Some(&gang)),
                    ),
                )
                .await;
                whole &= matches!(created, Ok(Ok(_)));
            }
            if whole {
                stats.lock().expect("stats").complete_gangs.insert(gang.clone());
                gangs.push_back(gang);
            } else {
                // An incomplete gang waits forever: what was created goes (it is not checked).
                doomed.push(gang);
            }
            while gangs.len() > LIVE_GANGS {
                let old = gangs.pop_front().expect("a gang");
                stats.lock().expect("stats").complete_gangs.remove(&old);
                doomed.push(old);
            }
        }
        // Gangs to delete, until their deletion is answered (the apiserver may be away now).
        let mut kept = Vec::new();
        for gang in doomed.drain(..) {
            let by_label = ListParams::default().labels(&format!("gang={gang}"));
            let deleted = tokio::time::timeout(within, pods.delete_collection(&delete_now(), &by_label)).await;
            if !matches!(deleted, Ok(Ok(_))) {
                kept.push(gang);
            }
        }
        doomed = kept;
        let name = format!("pod-{next:05}");
        let cpu = ["100m", "200m", "300m"][rng.below(3)];
        let created = tokio::time::timeout(
            within,
            pods.create(&PostParams::default(), &pod(&namespace, &name, &scheduler, cpu, None)),
        )
        .await;
        let ok = matches!(created, Ok(Ok(_)));
        {
            let mut stats = stats.lock().expect("stats");
            if ok {
                stats.created += 1;
            } else {
                stats.create_failed += 1;
            }
        }
        // Deleted later even if the answer was lost: it may exist.
        live.push_back(name);
        while live.len() > LIVE_PODS {
            let old = live.front().expect("a pod");
            match tokio::time::timeout(within, pods.delete(old, &delete_now())).await {
                Ok(Ok(_)) => stats.lock().expect("stats").deleted += 1,
                Ok(Err(kube::Error::Api(status))) if status.code == 404 => {}
                // The apiserver is away: the oldest pods go once it answers, so the pods always fit.
                _ => break,
            }
            live.pop_front();
        }
        tokio::time::sleep(Duration::from_millis(if ok { 300 } else { 1000 })).await;
    }
}

/// CPU in millicores, memory in bytes, of the forms the soak and KWOK write.
fn quantity(text: &str) -> f64 {
    let units = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0_f64.powi(4)),
        ("m", 0.001),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, factor) in units {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().unwrap_or(f64::NAN) * factor;
        }
    }
    text.parse().unwrap_or(f64::NAN)
}

/// One sample: each soak node's bound pods' requests against its allocatable, and the complete gangs' bound members.
pub async fn sample(client: &Client, namespace: &str, stats: &Arc<Mutex<PodStats>>) {
    let (node_api, pod_api) = (
        Api::<Node>::all(client.clone()),
        Api::<Pod>::namespaced(client.clone(), namespace),
    );
    let soak_nodes = ListParams::default().labels(&format!("soak-node={namespace}"));
    let every_pod = ListParams::default();
    let (Ok(Ok(nodes)), Ok(Ok(pods))) = (
        tokio::time::timeout(Duration::from_secs(5), node_api.list(&soak_nodes)).await,
        tokio::time::timeout(Duration::from_secs(5), pod_api.list(&every_pod)).await,
    ) else {
        return;
    };
    let mut requested: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut gang_bound: BTreeMap<String, usize> = BTreeMap::new();
    for pod in &pods.items {
        let Some(spec) = pod.spec.as_ref() else { continue };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let Some(node) = spec.node_name.as_ref() else { continue };
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        if let Some(gang) = pod.metadata.labels.as_ref().and_then(|l| l.get("gang")) {
            *gang_bound.entry(gang.clone()).or_default() += 1;
        }
        let entry = requested.entry(node.clone()).or_default();
        for container in &spec.containers {
            let requests = container.resources.as_ref().and_then(|r| r.requests.as_ref());
            entry.0 += requests.and_then(|r| r.get("cpu")).map_or(0.0, |q| quantity(&q.0));
            entry.1 += requests.and_then(|r| r.get("memory")).map_or(0.0, |q| quantity(&q.0));
        }
    }
    let mut stats = stats.lock().expect("stats");
    stats.samples += 1;
    for node in &nodes.items {
        let name = node.metadata.name.clone().unwrap_or_default();
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let cpu = allocatable.and_then(|a| a.get("cpu")).map_or(0.0, |q| quantity(&q.0));
        let memory = allocatable
            .and_then(|a| a.get("memory"))
            .map_or(0.0, |q| quantity(&q.0));
        let (used_cpu, used_memory) = requested.get(&name).copied().unwrap_or_default();
        if cpu > 0.0 {
            stats.peak_cpu_share = stats.peak_cpu_share.max(used_cpu / cpu);
        }
        if used_cpu > cpu + 1e-9 || used_memory > memory + 1.0 {
            stats.overcommits.push(format!(
                "{name}: cpu {used_cpu:.1}/{cpu:.1}, memory {:.0}/{:.0} MiB",
                used_memory / 1048576.0,
                memory / 1048576.0
            ));
        }
    }
    let partial = stats
        .complete_gangs
        .iter()
        .filter(|gang| gang_bound.get(*gang).is_some_and(|bound| *bound < GANG_SIZE))
        .count();
    stats.partial_gang_samples += u64::try_from(partial).unwrap_or(0);
}

/// `Ok` once every pod of the namespace is bound (gang members of incomplete gangs aside) and every complete gang
/// is bound whole; else what is not.
pub async fn all_bound(client: &Client, namespace: &str, complete_gangs: &BTreeSet<String>) -> Result<usize, String> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list pods: {e}"))?;
    let mut pending = Vec::new();
    let mut bound = 0;
    let mut bound_cpu = 0.0;
    for pod in &pods.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let gang = pod.metadata.labels.as_ref().and_then(|l| l.get("gang"));
        if gang.is_some_and(|gang| !complete_gangs.contains(gang)) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(spec) = pod.spec.as_ref().filter(|s| s.node_name.is_some()) {
            bound += 1;
            bound_cpu += spec
                .containers
                .iter()
                .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
                .map(|q| quantity(&q.0))
                .sum::<f64>();
        } else {
            pending.push(name);
        }
    }
    if pending.is_empty() {
        Ok(bound)
    } else {
        Err(format!(
            "{bound} bound ({bound_cpu:.1} of the nodes' {} CPUs requested), {} pending: {:?}",
            NODES * 4,
            pending.len(),
            pending.iter().take(8).collect::<Vec<_>>()
        ))
    }
}

/// The audit log's bindings in the namespace: pods bound more than once, pods bound now without exactly one
/// successful binding, and the refused binding requests (by pod) for the summary.
pub struct Bindings {
    pub bound_pods: usize,
    pub twice: Vec<String>,
    pub refused: Vec<String>,
    pub by_replica: BTreeMap<String, usize>,
}

pub fn bindings(writes: &[audit::Write]) -> Bindings {
    let mut succeeded: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut refused = Vec::new();
    let mut by_replica: BTreeMap<String, usize> = BTreeMap::new();
    for write in writes
        .iter()
        .filter(|w| w.resource == "pods" && w.subresource == "binding")
    {
        let replica = write.replica.as_deref().unwrap_or("not ruleplane");
        if write.succeeded() {
            succeeded.entry(&write.name).or_default().push(replica);
            *by_replica.entry(replica.to_owned()).or_default() += 1;
        } else {
            refused.push(format!("{} by {replica}: {}", write.name, write.code));
        }
    }
    Bindings {
        bound_pods: succeeded.len(),
        twice: succeeded
            .iter()
            .filter(|(_, by)| by.len() > 1)
            .map(|(pod, by)| format!("{pod} by {by:?}"))
            .collect(),
        refused,
        by_replica,
    }
}

/// Names of the pods bound now, for the audit's "exactly one binding" check.
pub async fn bound_now(client: &Client, namespace: &str) -> Result<BTreeSet<String>, String> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list pods: {e}"))?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
        .filter_map(|p| p.metadata.name)
        .collect())
}
