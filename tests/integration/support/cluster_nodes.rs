//! Nodes and kube-scheduler for scheduling tests. Nodes are cluster-wide, so tests that create them hold
//! [`nodes_lock`] and delete their nodes when done: each then sees exactly its own nodes.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::control_plane;

/// Serialises the tests that create nodes.
pub async fn nodes_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A node with capacity, labels and taints (no kubelet: the node is only an object the schedulers read).
pub fn node(name: &str, cpu: &str, memory: &str, labels: Value, taints: Value) -> Value {
    let mut all_labels = json!({"kubernetes.io/hostname": name});
    if let (Some(all), Some(extra)) = (all_labels.as_object_mut(), labels.as_object()) {
        all.extend(extra.clone());
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": taints},
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    })
}

/// Creates a node exactly as given: TaintNodesByCondition admission adds `node.kubernetes.io/not-ready` on
/// create, so the given taints are put back right after.
pub async fn create_node(client: &Client, node: Value) -> String {
    let nodes = Api::<Node>::all(client.clone());
    let node: Node = serde_json::from_value(node).expect("node");
    let name = node.metadata.name.clone().unwrap_or_default();
    let taints = json!({"spec": {"taints": node.spec.as_ref().and_then(|s| s.taints.clone())}});
    nodes.create(&PostParams::default(), &node).await.expect("create node");
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&taints))
        .await
        .expect("set taints");
    name
}

/// Creates cluster-wide PriorityClasses for one test: (name, value, preemptionPolicy).
pub async fn create_priority_classes(client: &Client, classes: &[(String, i32, &str)]) {
    let api = Api::<PriorityClass>::all(client.clone());
    for (name, value, policy) in classes {
        let object: PriorityClass = serde_json::from_value(json!({
            "metadata": {"name": name}, "value": value, "preemptionPolicy": policy
        }))
        .expect("class");
        api.create(&PostParams::default(), &object).await.expect("create class");
    }
}

/// A test's `high` (1000) and `low` (10) PriorityClasses, both `PreemptLowerPriority`, named
/// `<prefix>-<high|low>-<process id>`: created now; `name` gives a class's full name, `all` every one (to delete).
pub struct HighAndLowClasses {
    prefix: String,
}

impl HighAndLowClasses {
    pub async fn create(client: &Client, prefix: &str) -> HighAndLowClasses {
        let classes = HighAndLowClasses {
            prefix: format!("{prefix}-"),
        };
        let specs: Vec<(String, i32, &str)> = [("high", 1000), ("low", 10)]
            .into_iter()
            .map(|(name, value)| (classes.name(name), value, "PreemptLowerPriority"))
            .collect();
        create_priority_classes(client, &specs).await;
        classes
    }

    pub fn name(&self, short: &str) -> String {
        format!("{}{short}-{}", self.prefix, std::process::id())
    }

    pub fn all(&self) -> Vec<String> {
        ["high", "low"].map(|short| self.name(short)).to_vec()
    }
}

/// Deletes PriorityClasses (best effort, as [`delete_nodes`]).
pub async fn delete_priority_classes(client: &Client, names: impl IntoIterator<Item = String>) {
    let api = Api::<PriorityClass>::all(client.clone());
    for name in names {
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
}

/// A PodDisruptionBudget `db` over `app=db` pods in `namespace` that allows no disruption. No disruption
/// controller runs on the plane: its status is written here, as that controller would compute it.
pub async fn create_blocking_budget(client: &Client, namespace: &str) {
    let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), namespace);
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &budget).await.expect("create pdb");
    let status =
        json!({"status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
    pdbs.patch_status("db", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pdb status");
}

/// Deletes the nodes and the pods bound to them (at once: no kubelet confirms, no pod GC runs here), so no
/// later test sees a pod on a node that no longer exists. Best effort: the test's assertions matter more than its
/// cleanup.
pub async fn delete_nodes(client: &Client, names: &[String]) {
    let nodes = Api::<Node>::all(client.clone());
    let pods = Api::<Pod>::all(client.clone());
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let all_pods = pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let bound = all_pods.iter().filter(|pod| {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_ref());
        node.is_some_and(|node| names.contains(node))
    });
    for pod in bound {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let _ = Api::<Pod>::namespaced(client.clone(), &namespace)
            .delete(&name, &now)
            .await;
    }
    for name in names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}

/// The nodes a test created. A test deletes them itself ([`delete_nodes`]) once done; should it fail (panic) before
/// that, the guard deletes them as it is dropped, so later scheduler tests of the same run do not see them.
#[derive(Default)]
pub struct NodeGuard(Vec<String>);

impl NodeGuard {
    pub fn push(&mut self, name: String) {
        self.0.push(name);
    }
}

impl std::ops::Deref for NodeGuard {
    type Target = Vec<String>;

    fn deref(&self) -> &Vec<String> {
        &self.0
    }
}

impl Drop for NodeGuard {
    fn drop(&mut self) {
        if !std::thread::panicking() || self.0.is_empty() {
            return;
        }
        let names = std::mem::take(&mut self.0);
        // The test's runtime is unwinding: the deletion runs on a runtime of its own, and is waited for, so the
        // nodes are gone before the test's node lock (taken before the guard) is released.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(runtime) = runtime {
                runtime.block_on(async {
                    let client = super::admin_client().await;
                    delete_nodes(&client, &names).await;
                });
            }
        });
        let _ = cleanup.join();
    }
}

/// kube-scheduler of the project's build against the test plane, with these profiles; killed on drop.
pub struct KubeScheduler {
    child: Child,
}

impl Drop for KubeScheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl KubeScheduler {
    pub fn start(dir: &Path, profiles: Vec<Value>) -> KubeScheduler {
        KubeScheduler::start_with_gates(dir, profiles, None)
    }

    /// Started with `--feature-gates=<gates>`, e.g. `GenericWorkload=true,GangScheduling=true` (GangScheduling
    /// then joins the default profile; the plane serves the Workload API).
    pub fn start_with_gates(dir: &Path, profiles: Vec<Value>, gates: Option<&str>) -> KubeScheduler {
        let plane = control_plane();
        let config = json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": plane.kubeconfig, "qps": 500, "burst": 1000},
            "leaderElection": {"leaderElect": false},
            "profiles": profiles,
        });
        let path = dir.join("kube-scheduler.json");
        std::fs::write(&path, config.to_string()).expect("write scheduler config");
        let log = std::fs::File::create(dir.join("kube-scheduler.log")).expect("log file");
        let child = Command::new(plane.bin_dir.join("kube-scheduler"))
            .arg(format!("--config={}", path.display()))
            .arg("--secure-port=0")
            .arg("--v=1")
            .args(gates.map(|gates| format!("--feature-gates={gates}")))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start kube-scheduler");
        KubeScheduler { child }
    }
}
