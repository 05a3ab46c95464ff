//! The review workflow against a real apiserver: `ruleplane diff` shows what a rule change would do to live
//! parents — and writes nothing.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use ruleplane_config::ownership::{
    CHILD_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_ANNOTATION, PARENT_UID_LABEL, RULE_LABEL,
};
use serde_json::json;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, control_plane, eventually, test_namespace, write_rule_file};

fn rule(ns: &str, children: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: diff-{ns} }}
spec:
  for:
    apiVersion: v1
    kind: ConfigMap
    namespace: {ns}
    selector: {{ matchLabels: {{ diff-parent: "yes" }} }}
  children:
{children}"#
    )
}

const COPY_V1: &str = r#"    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-copy" }
        data: { greeting: {{json data.greeting}}, fixed: "1" }
"#;
const EXTRA: &str = r#"    - id: extra
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-extra" }
        data: { a: "1" }
"#;
const COPY_V2: &str = r#"    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-copy" }
        data: { greeting: "{{data.greeting}}-v2", fixed: "1" }
"#;
const ADDED: &str = r#"    - id: added
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-added" }
        data: { b: "2" }
"#;

/// `ruleplane diff` with the manager's namespace (where its child signing key is), the exit code and the report.
fn ruleplane_diff(rules: &Path, manager_namespace: &str) -> (Option<i32>, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_ruleplane"))
        .args(["diff", "--manager-namespace", manager_namespace, "--rules"])
        .arg(rules)
        .arg("--kubeconfig")
        .arg(&control_plane().kubeconfig)
        .env_remove("RULEPLANE_RULES")
        .output()
        .expect("run ruleplane diff");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.is_empty() || out.status.code() == Some(2),
        "unexpected stderr: {stderr}"
    );
    (
        out.status.code(),
        format!("{}{stderr}", String::from_utf8_lossy(&out.stdout)),
    )
}

/// `ruleplane diff -o json`: the exit code and the report.
fn ruleplane_diff_json(rules: &Path, manager_namespace: &str) -> (Option<i32>, serde_json::Value) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_ruleplane"))
        .args([
            "diff",
            "--output",
            "json",
            "--manager-namespace",
            manager_namespace,
            "--rules",
        ])
        .arg(rules)
        .arg("--kubeconfig")
        .arg(&control_plane().kubeconfig)
        .env_remove("RULEPLANE_RULES")
        .output()
        .expect("run ruleplane diff");
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code(), report)
}

#[tokio::test]
async fn diff_shows_creates_changes_prunes_and_conflicts_without_writing() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "diff").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let parent: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"diff-parent": "yes"}},
        "data": {"greeting": "hello"}
    }))
    .unwrap();
    configmaps
        .create(&PostParams::default(), &parent)
        .await
        .expect("parent");

    let v1 = temp_dir("diff-v1");
    write_rule_file(&v1, "rule.yaml", &rule(&ns, &format!("{COPY_V1}{EXTRA}")));
    // Before the manager ever ran: everything is to be created.
    let (code, out) = ruleplane_diff(&v1, &ns);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("Reconciler diff-{ns} › ConfigMap {ns}/web\n")),
        "{out}"
    );
    assert!(out.contains(&format!("  + create ConfigMap {ns}/web-copy\n")), "{out}");
    assert!(out.contains(&format!("  + create ConfigMap {ns}/web-extra\n")), "{out}");
    assert!(out.contains("greeting: hello"), "{out}");
    assert!(out.ends_with("1 parent(s): 2 child(ren) to create, 0 to change, 0 to prune, 0 to release, 0 unchanged; 0 status(es) to change\n"), "{out}");
    assert!(
        configmaps.get_opt("web-copy").await.unwrap().is_none(),
        "diff created a child"
    );

    let mut manager = ManagerProcess::start(&v1, &ns, "diff", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    eventually(Duration::from_secs(30), "children applied", || async {
        let copy = configmaps.get_opt("web-copy").await.ok().flatten()?;
        configmaps.get_opt("web-extra").await.ok().flatten()?;
        Some(copy)
    })
    .await;
    manager.sigterm();

    // The rule set the cluster runs: nothing to do.
    let (code, out) = ruleplane_diff(&v1, &ns);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "Reconciler diff-{ns} › ConfigMap {ns}/web: no changes (2 child(ren) unchanged)"
        )),
        "{out}"
    );

    // A look-alike of a child, with every label and the annotation but no signature: the manager would leave it
    // alone, and so does diff when it can read the signing key (in the manager's namespace, here `ns`).
    let uid = configmaps.get("web").await.expect("parent").metadata.uid.expect("uid");
    let lookalike: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": "web-lookalike",
        "labels": { MANAGED_BY_LABEL: MANAGED_BY_VALUE, RULE_LABEL: format!("diff-{ns}"), PARENT_UID_LABEL: uid,
                    CHILD_ID_LABEL: "copy" },
        "annotations": { PARENT_ANNOTATION: format!("{ns}/web") }}}))
    .unwrap();
    configmaps
        .create(&PostParams::default(), &lookalike)
        .await
        .expect("look-alike ConfigMap");
    let (code, out) = ruleplane_diff(&v1, &ns);
    assert_eq!(code, Some(0), "the unsigned look-alike is not a child: {out}");
    assert!(!out.contains("signatures not checked"), "{out}");
    // Without the key diff can only go by labels, and says so: the look-alike reads as a child to prune.
    let elsewhere = format!("{ns}-no-manager");
    let (code, report) = ruleplane_diff_json(&v1, &elsewhere);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["signaturesChecked"], false, "{report}");
    assert_eq!(
        report["parents"][0]["prune"],
        json!([format!("ConfigMap {ns}/web-lookalike")]),
        "{report}"
    );
    let (_, out) = ruleplane_diff(&v1, &elsewhere);
    assert!(
        out.starts_with(&format!(
            "note: child signatures not checked (no Secret {elsewhere}/ruleplane-child-signing-key"
        )),
        "{out}"
    );

    // A changed rule set: one child changes, one goes, one is new — and its name is taken by someone else's.
    let foreign: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "web-added"}, "data": {"mine": "yes"}})).unwrap();
    configmaps
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign ConfigMap");
    let versions_before: Vec<Option<String>> =
        futures::future::join_all(["web", "web-copy", "web-extra", "web-added"].map(|name| {
            let configmaps = configmaps.clone();
            async move { configmaps.get(name).await.expect("object").metadata.resource_version }
        }))
        .await;
    let v2 = temp_dir("diff-v2");
    write_rule_file(&v2, "rule.yaml", &rule(&ns, &format!("{COPY_V2}{ADDED}")));
    let (code, out) = ruleplane_diff(&v2, &ns);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&format!("  ~ change ConfigMap {ns}/web-copy\n")), "{out}");
    assert!(out.contains("      --- live\n      +++ rendered\n"), "{out}");
    assert!(
        out.contains("-  greeting: hello\n") && out.contains("+  greeting: hello-v2\n"),
        "{out}"
    );
    assert!(
        !out.contains("-  fixed"),
        "unchanged fields are context, not changes:\n{out}"
    );
    assert!(out.contains(&format!("  - prune ConfigMap {ns}/web-extra\n")), "{out}");
    // The same facts as JSON, with the same exit code.
    let (code, report) = ruleplane_diff_json(&v2, &ns);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["signaturesChecked"], true, "{report}");
    assert_eq!(report["changes"], 1, "{report}");
    let entry = &report["parents"][0];
    assert_eq!(entry["parent"], format!("ConfigMap {ns}/web"), "{report}");
    assert_eq!(
        entry["change"][0]["child"],
        format!("ConfigMap {ns}/web-copy"),
        "{report}"
    );
    assert!(
        entry["change"][0]["diff"]
            .as_str()
            .unwrap_or("")
            .contains("+  greeting: hello-v2"),
        "{report}"
    );
    assert_eq!(entry["prune"], json!([format!("ConfigMap {ns}/web-extra")]), "{report}");
    assert_eq!(
        entry["conflicts"],
        json!([format!("ConfigMap {ns}/web-added")]),
        "{report}"
    );
    assert_eq!(report["totals"]["prune"], 1, "{report}");
    assert!(out.contains(&format!("  + create ConfigMap {ns}/web-added\n")), "{out}");
    assert!(
        out.contains(&format!(
            "  ! conflict ConfigMap {ns}/web-added: an object with this name exists"
        )),
        "{out}"
    );
    assert!(
        out.contains("1 child(ren) to create, 1 to change, 1 to prune, 0 to release, 0 unchanged"),
        "{out}"
    );
    let versions_after: Vec<Option<String>> =
        futures::future::join_all(["web", "web-copy", "web-extra", "web-added"].map(|name| {
            let configmaps = configmaps.clone();
            async move {
                configmaps
                    .get(name)
                    .await
                    .expect("object still there")
                    .metadata
                    .resource_version
            }
        }))
        .await;
    assert_eq!(versions_before, versions_after, "ruleplane diff wrote to the cluster");

    // Bad rules are an error (2), as in kubectl diff, with the located message.
    let broken = temp_dir("diff-broken");
    write_rule_file(
        &broken,
        "rule.yaml",
        "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: x }\nspec: { for: {} }\n",
    );
    let (code, out) = ruleplane_diff(&broken, &ns);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("rule.yaml:4:"), "{out}");
}
