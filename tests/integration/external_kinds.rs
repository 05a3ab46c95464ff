//! Kinds another tool installs (not built in, declared by no ResourceDefinition): as parent, child and lookup on a
//! real apiserver — the rule waits while their CRDs are absent and starts when the tool applies them — and offline
//! with `--crds`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually, eventually_seen, test_namespace, write_rule_file};

/// The fixture group, replaced by each test's own: CRDs are cluster-wide.
const FIXTURE_GROUP: &str = "other-tool.example.org";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ruleplane(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ruleplane"));
    command
        .current_dir(repo())
        .args(args)
        .env_remove("RULEPLANE_RULES")
        .env_remove("RULEPLANE_CRDS");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run ruleplane")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A dynamic API for `kind` of `group/v1`.
fn api(client: &Client, group: &str, kind: &str, plural: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

fn object(group: &str, kind: &str, metadata: Value, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("{group}/v1"), "kind": kind, "metadata": metadata, "spec": spec}),
    )
    .expect("an object")
}

/// The fixture CRDs in `group`, applied as the other tool would (kubectl-style create, not by a rule).
async fn install_the_other_tools_crds(client: &Client, group: &str) -> Vec<String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let manifests: Vec<Value> = serde_saphyr::from_multiple(
        &fixture("tests/rules/crds/other-tool.example.org.yaml").replace(FIXTURE_GROUP, group),
    )
    .expect("fixture CRDs");
    let mut names = Vec::new();
    for manifest in manifests
        .into_iter()
        .filter(|m| m["kind"] == "CustomResourceDefinition")
    {
        let crd: CustomResourceDefinition = serde_json::from_value(manifest).expect("a CRD");
        names.push(crd.name_any());
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("the other tool's CRD");
    }
    names
}

/// A Reconciler whose parent is another tool's cluster-scoped Bucket, whose lookup and child are its namespaced
/// Certificates, and one whose parent is that Certificate. Loaded before the tool's CRDs exist: the rules wait and
/// say so in `/readyz?verbose`; once the tool applies its CRDs, they start — no restart, no rule change. The
/// CRDs are never changed by Ruleplane, and the parents' status, the tool's, is never written.
#[tokio::test]
async fn rules_on_another_tools_kinds_wait_for_its_crds_then_run_as_parent_child_and_lookup() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "external-kinds").await;
    let group = "waits.external-kinds.test";
    let rules = temp_dir("external-kinds");
    let rule_text = fixture("tests/rules/external/bucket-certificate.yaml")
        .replace(FIXTURE_GROUP, group)
        .replace("namespace: buckets", &format!("namespace: {ns}"));
    write_rule_file(&rules, "rules.yaml", &rule_text);
    let manager = ManagerProcess::start(&rules, &ns, "external-kinds", &[]);

    // Absent kinds: the rules are loaded (no `unknown-kind` refusal at run time) and wait, saying for what.
    let body = eventually_seen(
        Duration::from_secs(40),
        "both rules waiting for the other tool's kinds",
        || async {
            let (_, body) = manager.readyz().await.ok_or("no answer")?;
            let waiting = |rule: &str| body.contains(&format!("rule {rule} (Reconciler): waiting: "));
            if waiting("bucket-certificate") && waiting("certificate-info") {
                Ok(body)
            } else {
                Err(body)
            }
        },
    )
    .await;
    assert!(
        body.contains(&format!(
            "{group}/v1 Bucket, {group}/v1 Certificate not served by the apiserver"
        )),
        "{body}"
    );
    assert!(
        body.contains("readyz check passed"),
        "a waiting rule does not make the replica unready:\n{body}"
    );
    assert!(
        manager.logs().contains("waiting:"),
        "said once in the log too:\n{}",
        manager.logs()
    );

    // The other tool arrives: its CRDs, a cluster-scoped Bucket and the namespaced Certificate the rule looks up.
    let crd_names = install_the_other_tools_crds(&client, group).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let versions_before: Vec<Option<String>> = {
        // Established by the apiserver first (its own status writes), then frozen.
        eventually(Duration::from_secs(30), "the CRDs established", || async {
            let mut all = true;
            for name in &crd_names {
                let crd = crds.get(name).await.ok()?;
                all &= crd
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
            }
            all.then_some(())
        })
        .await;
        let mut versions = Vec::new();
        for name in &crd_names {
            versions.push(crds.get(name).await.expect("CRD").resource_version());
        }
        versions
    };
    let certificates = api(&client, group, "Certificate", "certificates", Some(&ns));
    let buckets = api(&client, group, "Bucket", "buckets", None);
    certificates
        .create(
            &PostParams::default(),
            &object(group, "Certificate", json!({"name": "ca"}), json!({"duration": "720h"})),
        )
        .await
        .expect("the Certificate looked up");
    let bucket_name = format!("b-{}", std::process::id());
    buckets
        .create(
            &PostParams::default(),
            &object(group, "Bucket", json!({"name": bucket_name}), json!({})),
        )
        .await
        .expect("a Bucket");

    // Child of a namespaced external kind under a cluster-scoped external parent, filled from the lookup.
    let child = format!("{bucket_name}-cert");
    let certificate = eventually_seen(Duration::from_secs(60), "the Bucket's Certificate", || async {
        match certificates.get(&child).await {
            Ok(certificate) => Ok(certificate),
            Err(error) => Err(format!("{error}; readyz: {:?}", manager.readyz().await)),
        }
    })
    .await;
    assert_eq!(
        certificate.data["spec"]["duration"], "720h",
        "from the looked-up Certificate"
    );
    assert_eq!(
        certificate.data["spec"]["dnsNames"][0],
        format!("{bucket_name}.buckets.example.org")
    );
    assert_eq!(
        certificate
            .labels()
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("ruleplane")
    );
    // A namespaced external kind as parent: both Certificates (the tool's `ca` and the rule's child) get a ConfigMap.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for name in ["ca-info".to_owned(), format!("{child}-info")] {
        let info = eventually(Duration::from_secs(30), &format!("ConfigMap {name}"), || async {
            configmaps.get(&name).await.ok()
        })
        .await;
        let duration = info.data.unwrap_or_default().remove("duration");
        assert_eq!(duration.as_deref(), Some("720h"), "{name}");
    }
    let (_, body) = manager.readyz().await.expect("readyz");
    assert!(body.contains("rule bucket-certificate (Reconciler): running"), "{body}");
    assert!(body.contains("rule certificate-info (Reconciler): running"), "{body}");

    // `ruleplane diff` learns the kinds from the cluster as the manager does: converged, nothing to change.
    let diff = Command::new(env!("CARGO_BIN_EXE_ruleplane"))
        .args(["diff", "--output", "json", "--manager-namespace", &ns, "--rules"])
        .arg(&rules)
        .arg("--kubeconfig")
        .arg(&crate::support::control_plane().kubeconfig)
        .env_remove("RULEPLANE_RULES")
        .env_remove("RULEPLANE_CRDS")
        .output()
        .expect("run ruleplane diff");
    let report: Value = serde_json::from_slice(&diff.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&diff.stdout), text(&diff.stderr)));
    assert_eq!(diff.status.code(), Some(0), "{report}");
    assert_eq!(report["notServed"], json!([]), "{report}");
    assert!(report["totals"]["unchanged"].as_u64().unwrap_or(0) >= 3, "{report}");

    // Another tool's status is its own; its CRDs are never written.
    let bucket = buckets.get(&bucket_name).await.expect("the Bucket");
    assert!(
        bucket.data.get("status").is_none(),
        "no status written: {:?}",
        bucket.data
    );
    let ca = certificates.get("ca").await.expect("ca");
    assert!(ca.data.get("status").is_none(), "no status written: {:?}", ca.data);
    for (name, before) in crd_names.iter().zip(versions_before) {
        let crd = crds.get(name).await.expect("CRD");
        assert_eq!(crd.resource_version(), before, "{name} unchanged");
        assert!(
            crd.labels().get("app.kubernetes.io/managed-by").is_none(),
            "{name} not labelled"
        );
        let managers: Vec<String> = crd.managed_fields().iter().filter_map(|f| f.manager.clone()).collect();
        assert!(
            !managers.iter().any(|m| m.starts_with("ruleplane")),
            "{name} written by {managers:?}"
        );
    }
    for name in &crd_names {
        let _ = crds.delete(name, &Default::default()).await;
    }
}

/// The offline commands know another tool's kinds from its vendored CRD manifests (`--crds`, files or
/// directories, or `RULEPLANE_CRDS`): `validate` refuses the kinds without them and names the flag, `render` places
/// children by the manifests' scopes, `rbac` derives their permissions (and says what it cannot without them),
/// `crds` never prints them, and a broken manifest is a located error.
#[test]
fn offline_commands_know_another_tools_kinds_from_vendored_crds() {
    let rules = "tests/rules/external";
    let crds = "tests/rules/crds";
    let unknown = ruleplane(&["validate", rules], &[]);
    assert_eq!(unknown.status.code(), Some(1));
    let stderr = text(&unknown.stderr);
    assert!(
        stderr.contains("error[unknown-kind]: unknown kind `Bucket` (`other-tool.example.org/v1`)")
            && stderr.contains("pass its CRD manifest with `--crds PATH`"),
        "{stderr}"
    );
    let valid = ruleplane(&["validate", rules, "--crds", crds], &[]);
    assert_eq!(valid.status.code(), Some(0), "{}", text(&valid.stderr));
    assert!(text(&valid.stdout).contains("2 rule(s) valid"));
    let from_env = ruleplane(
        &["validate", rules],
        &[("RULEPLANE_CRDS", "examples/crds:tests/rules/crds")],
    );
    assert_eq!(from_env.status.code(), Some(0), "{}", text(&from_env.stderr));

    // render: the child goes where the manifests' scopes say (a namespaced child of a cluster-scoped parent).
    let dir = temp_dir("external-offline");
    let bucket = dir.join("bucket.yaml");
    std::fs::write(
        &bucket,
        "apiVersion: other-tool.example.org/v1\nkind: Bucket\nmetadata: { name: logs, uid: u-1 }\n",
    )
    .unwrap();
    let ca = dir.join("ca.yaml");
    std::fs::write(
        &ca,
        "apiVersion: other-tool.example.org/v1\nkind: Certificate\nmetadata: { name: ca, namespace: buckets }\n\
         spec: { duration: 720h }\n",
    )
    .unwrap();
    let rendered = ruleplane(
        &[
            "render",
            "--rules",
            rules,
            "--crds",
            crds,
            "--object",
            bucket.to_str().unwrap(),
            "--lookup",
            ca.to_str().unwrap(),
            "-o",
            "json",
        ],
        &[],
    );
    assert_eq!(rendered.status.code(), Some(0), "{}", text(&rendered.stderr));
    let docs: Vec<Value> = serde_json::from_slice(&rendered.stdout).expect("JSON");
    assert_eq!(docs[0]["kind"], "Certificate");
    assert_eq!(docs[0]["metadata"]["namespace"], "buckets");
    assert_eq!(docs[0]["spec"]["duration"], "720h");
    assert!(
        docs.iter().all(|d| d.get("status").is_none()),
        "no status for another tool's kind: {docs:?}"
    );

    // rbac: plurals from the manifests, never their status; the CRD watch the worker waits on.
    let rbac = ruleplane(&["rbac", "--rules", rules, "--crds", crds, "-o", "json"], &[]);
    assert_eq!(rbac.status.code(), Some(0), "{}", text(&rbac.stderr));
    let roles: Vec<Value> = serde_json::from_slice(&rbac.stdout).expect("JSON");
    let cluster_rules = roles[0]["rules"].as_array().expect("ClusterRole rules");
    let resources: Vec<String> = cluster_rules
        .iter()
        .filter(|r| r["apiGroups"][0] == "other-tool.example.org")
        .flat_map(|r| r["resources"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect();
    assert_eq!(resources, ["buckets", "certificates"], "{cluster_rules:?}");
    assert!(
        cluster_rules
            .iter()
            .any(|r| r["resources"][0] == "customresourcedefinitions" && r["verbs"] == json!(["list", "watch"])),
        "{cluster_rules:?}"
    );
    let partial = ruleplane(&["rbac", "--rules", rules], &[]);
    assert_eq!(partial.status.code(), Some(1));
    assert!(
        text(&partial.stderr)
            .contains("rule `bucket-certificate`: cannot derive the permissions for other-tool.example.org/v1 Bucket"),
        "{}",
        text(&partial.stderr)
    );
    assert!(
        text(&partial.stdout).contains("kind: ClusterRole"),
        "what it can derive is printed"
    );

    // crds: knowledge, never written — nothing to print for these rules.
    let printed = ruleplane(&["crds", "--rules", rules, "--crds", crds], &[]);
    assert_eq!(printed.status.code(), Some(0), "{}", text(&printed.stderr));
    assert!(
        !text(&printed.stdout).contains("CustomResourceDefinition"),
        "{}",
        text(&printed.stdout)
    );

    // A broken manifest among them: located.
    let broken = dir.join("crds");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::copy(
        repo().join(crds).join("other-tool.example.org.yaml"),
        broken.join("a.yaml"),
    )
    .unwrap();
    std::fs::write(
        broken.join("b.yaml"),
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: { name: x.y.z }\n\
         spec:\n  group: y.z\n  scope: Namespaced\n  names: { kind: X }\n  versions: [ { name: v1, served: true } ]\n",
    )
    .unwrap();
    let bad = ruleplane(&["validate", rules, "--crds", broken.to_str().unwrap()], &[]);
    assert_eq!(bad.status.code(), Some(1));
    let stderr = text(&bad.stderr);
    assert!(
        stderr.contains("b.yaml:7:10: error[missing-field]: `spec.names.plural` is missing"),
        "{stderr}"
    );
}
