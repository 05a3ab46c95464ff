//! Test harness: one real control plane (etcd + kube-apiserver + kube-controller-manager) per test binary and a
//! fresh namespace per test.

pub mod cluster_nodes;
pub mod manager;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A running control plane, started by `tests/control-plane/cluster.sh`.
pub struct ControlPlane {
    pub kubeconfig: PathBuf,
    /// A kubeconfig for a user without any RBAC grant.
    pub unprivileged_kubeconfig: PathBuf,
    pub bin_dir: PathBuf,
    /// The apiserver's audit log (JSON lines, one per write but Leases and Events; see cluster.sh's policy).
    pub audit_log: PathBuf,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("manager/ has a parent")
        .to_path_buf()
}

/// Starts the plane on first use. `RULEPLANE_TEST_CLUSTER_DIR` reuses a plane started by `make cluster-up`
/// instead. A failure to start is a test failure with the script's output, never a skip.
pub fn control_plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| {
        let script = repo_root().join("tests/control-plane/cluster.sh");
        let dir = match std::env::var_os("RULEPLANE_TEST_CLUSTER_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => {
                let dir = std::env::temp_dir().join(format!("ruleplane-test-{}", std::process::id()));
                // The script's watchdog stops the plane when this process exits, even on panic or SIGINT.
                let out = Command::new(&script)
                    .args(["up", "--dir"])
                    .arg(&dir)
                    .args(["--owner-pid", &std::process::id().to_string()])
                    .stderr(std::process::Stdio::inherit())
                    .output()
                    .expect("run tests/control-plane/cluster.sh");
                assert!(
                    out.status.success(),
                    "the local control plane did not start ({}); see the log above",
                    out.status
                );
                dir
            }
        };
        let env = std::fs::read_to_string(dir.join("env"))
            .unwrap_or_else(|e| panic!("control plane env file in {}: {e}", dir.display()));
        let bin_dir = env
            .lines()
            .find_map(|l| l.strip_prefix("BIN_DIR="))
            .expect("BIN_DIR in env file");
        ControlPlane {
            kubeconfig: dir.join("kubeconfig"),
            unprivileged_kubeconfig: dir.join("user.kubeconfig"),
            bin_dir: PathBuf::from(bin_dir),
            audit_log: dir.join("audit.log"),
        }
    })
}

impl ControlPlane {
    /// The plane's Kubernetes version, from its binaries' directory (`v1.37.2`).
    pub fn kubernetes_version(&self) -> ruleplane_config::KubernetesVersion {
        let name = self.bin_dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let minor = name.split('.').nth(1).and_then(|m| m.parse().ok());
        minor
            .and_then(ruleplane_config::KubernetesVersion::of_minor)
            .unwrap_or_else(|| panic!("the plane's binaries {name} are of no supported version"))
    }

    /// The Workload API the plane serves (cluster.sh's runtime-config follows the version).
    pub fn workload_api(&self) -> ruleplane_config::scheduler::gang::WorkloadApi {
        ruleplane_config::scheduler::gang::WorkloadApi::of(self.kubernetes_version())
    }

    /// The feature gates kube-scheduler of the plane's version needs for GangScheduling: GenericWorkload, and in
    /// v1.35 and v1.36 GangScheduling too (v1.37 has no such gate: GenericWorkload turns the plugin on).
    pub fn gang_gates(&self) -> &'static str {
        match self.kubernetes_version() {
            ruleplane_config::KubernetesVersion::V1_37 => "GenericWorkload=true",
            _ => "GenericWorkload=true,GangScheduling=true",
        }
    }
}

/// The object holding a gang policy of `min_count` in the plane's Workload API, as `(resource, object)`: a Workload
/// with the group `workers` (v1.35), or a PodGroup (v1.36+).
pub fn gang_object(namespace: &str, name: &str, min_count: u32) -> (kube::api::ApiResource, serde_json::Value) {
    use ruleplane_config::scheduler::gang::WorkloadApi;
    let api = control_plane().workload_api();
    let (group, version) = api.api_version().split_once('/').expect("group/version");
    let resource =
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, api.policy_kind()));
    let spec = match api {
        WorkloadApi::V1Alpha1 => {
            serde_json::json!({"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": min_count}}}]})
        }
        _ => serde_json::json!({"schedulingPolicy": {"gang": {"minCount": min_count}}}),
    };
    let object = serde_json::json!({
        "apiVersion": api.api_version(), "kind": api.policy_kind(),
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    });
    (resource, object)
}

/// How a member names the group of [`gang_object`] `name` in the plane's Workload API: `(field, value)` of its spec.
pub fn gang_reference(name: &str) -> (&'static str, serde_json::Value) {
    use ruleplane_config::scheduler::gang::WorkloadApi;
    match control_plane().workload_api() {
        WorkloadApi::V1Alpha1 => ("workloadRef", serde_json::json!({"name": name, "podGroup": "workers"})),
        _ => ("schedulingGroup", serde_json::json!({"podGroupName": name})),
    }
}

/// How the worker names the group of [`gang_object`] `name` in its texts: `<ns>/<name>/workers` (v1.35) or
/// `<ns>/<name>`.
pub fn gang_display(namespace: &str, name: &str) -> String {
    match gang_reference(name).0 {
        "workloadRef" => format!("{namespace}/{name}/workers"),
        _ => format!("{namespace}/{name}"),
    }
}

/// A client for the admin user. Each test builds its own: a client is bound to the runtime that made it.
pub async fn admin_client() -> Client {
    client_for(&control_plane().kubeconfig).await
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Client::try_from(config).expect("client")
}

/// The supported Kubernetes version the plane's kube-apiserver runs (its `/version`): what a test comparing
/// Ruleplane with the plane's own kube-scheduler makes the engine behave as.
pub async fn plane_version(client: &Client) -> ruleplane_config::KubernetesVersion {
    let info = client.apiserver_version().await.expect("the apiserver's /version");
    match ruleplane_config::KubernetesVersion::of_server(&info.major, &info.minor) {
        Ok(ruleplane_config::ServerVersion::Supported(version)) => version,
        _ => panic!(
            "the plane's kube-apiserver {} is not a supported version",
            info.git_version
        ),
    }
}

/// What kube-scheduler of `version` puts between a FitError and DefaultPreemption's text for a pod without resource
/// claims: DynamicResources' PostFilter reason, which v1.37 no longer gives.
pub fn no_claims_reason(version: ruleplane_config::KubernetesVersion) -> &'static str {
    if version >= ruleplane_config::KubernetesVersion::V1_37 {
        ""
    } else {
        "no new claims to deallocate, "
    }
}

/// Creates a fresh namespace named after the test: tests run in parallel and never share one. It is not deleted
/// at the end (namespaces do finish deleting, kube-controller-manager runs): what a failed test left is there to
/// look at until the plane stops.
pub async fn test_namespace(client: &Client, test: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let name = format!("{}-{}-{}", &slug[..slug.len().min(40)], std::process::id(), n);
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    name
}

/// Creates a CRD as another tool would, not through a rule: one served version `v1`, any fields accepted.
pub async fn create_foreign_crd(
    client: &Client,
    group: &str,
    kind: &str,
    plural: &str,
    scope: &str,
) -> Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    let crds = Api::all(client.clone());
    let foreign = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("a CRD");
    crds.create(&PostParams::default(), &foreign)
        .await
        .expect("someone else's CRD");
    crds
}

/// Runs the kubectl built with the control plane against it: stdout, or stderr as the error.
pub fn kubectl_result(args: &[&str]) -> Result<String, String> {
    let plane = control_plane();
    let out = Command::new(plane.bin_dir.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&plane.kubeconfig)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run kubectl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Like [`kubectl_result`], failing the test when kubectl fails.
pub fn kubectl(args: &[&str]) -> String {
    kubectl_result(args).unwrap_or_else(|e| panic!("kubectl {args:?} failed: {e}"))
}

/// Polls `check` until it returns Some or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: std::time::Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Polls `check` until it returns `Ok` or `timeout` passes; the failure shows what the last attempt saw (its `Err`).
pub async fn eventually_seen<T, F, Fut>(timeout: std::time::Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let seen = match check().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last seen: {seen}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Creates a ConfigMap with these labels and data, failing the test if the apiserver refuses it.
pub async fn create_config_map(
    configmaps: &Api<k8s_openapi::api::core::v1::ConfigMap>,
    name: &str,
    labels: serde_json::Value,
    data: serde_json::Value,
) {
    let object =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": labels}, "data": data}))
            .expect("a ConfigMap");
    configmaps
        .create(&PostParams::default(), &object)
        .await
        .expect("create ConfigMap");
}

/// Merge-patches the object `name` as a user would with `kubectl patch --type merge`, failing the test on refusal.
pub async fn merge_patch<K>(api: &Api<K>, name: &str, patch: serde_json::Value) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(patch),
    )
    .await
    .unwrap_or_else(|e| panic!("merge patch of {name}: {e}"))
}

/// Writes a rule file by write-then-rename, as editors and the kubelet's ConfigMap writer do, so the manager
/// never reads half a file.
pub fn write_rule_file(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).expect("write rule file");
    std::fs::rename(&tmp, dir.join(file)).expect("rename rule file");
}
