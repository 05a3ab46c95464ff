//! The manager as a process: units of work shared by replicas, takeover, hot reload with last-good fallback,
//! endpoints.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually, test_namespace, write_rule_file as write};

/// A ResourceDefinition rule for kind `kind` in a group unique to the test.
pub fn rd_rule(rule: &str, kind_lower: &str, group: &str, extra_properties: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata:
  name: {kind_lower}.{group}
spec:
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {{ type: integer }}{extra_properties}
# rule {rule}
"#
    )
}

/// Two managers sharing the units, once both run some and exactly one runs the resource-definitions unit:
/// (that one, the other).
async fn sharing_pair(rules: &Path, ns: &str) -> (ManagerProcess, ManagerProcess) {
    let a = ManagerProcess::start(rules, ns, "manager-a", &[]);
    let b = ManagerProcess::start(rules, ns, "manager-b", &[]);
    let roles = eventually(
        Duration::from_secs(40),
        "two managers sharing the units, one running the ResourceDefinitions",
        || async {
            let shared = a.units_held().await? > 0 && b.units_held().await? > 0;
            coordinators(&[&a, &b])
                .await
                .filter(|r| shared && r.iter().filter(|l| **l).count() == 1)
        },
    )
    .await;
    if roles[0] { (a, b) } else { (b, a) }
}

async fn coordinators(managers: &[&ManagerProcess]) -> Option<Vec<bool>> {
    let mut out = Vec::new();
    for m in managers {
        out.push(m.holds("resource-definitions").await?);
    }
    Some(out)
}

async fn crd_exists(name: &str) -> bool {
    let api: Api<CustomResourceDefinition> = Api::all(admin_client().await);
    matches!(api.get_opt(name).await, Ok(Some(_)))
}

#[tokio::test]
async fn exactly_one_of_two_managers_runs_the_resource_definitions_and_a_killed_one_is_replaced() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "election-kill").await;
    let rules = temp_dir("election-kill");
    write(&rules, "a.yaml", &rd_rule("a", "alpha", "kill.election.test", ""));
    let (mut leader, standby) = sharing_pair(&rules, &ns).await;
    // Stays that way over a few renewals: never two replicas on one unit.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = coordinators(&[&leader, &standby]).await.expect("metrics");
        assert_eq!(now.iter().filter(|l| **l).count(), 1, "exactly one holder: {now:?}");
    }
    eventually(Duration::from_secs(30), "leader registers the CRD", || async {
        crd_exists("alphas.kill.election.test").await.then_some(())
    })
    .await;

    leader.kill9();
    let killed = Instant::now();
    // Only the holder of the unit acts, so a CRD from a rule added after the kill proves the other took it over.
    write(&rules, "b.yaml", &rd_rule("b", "beta", "kill.election.test", ""));
    eventually(
        Duration::from_secs(30),
        "standby registers the new rule's CRD",
        || async { crd_exists("betas.kill.election.test").await.then_some(()) },
    )
    .await;
    let takeover = killed.elapsed();
    println!(
        "takeover after kill -9: {:.2} s (lease duration 15 s)",
        takeover.as_secs_f64()
    );
    assert!(
        takeover <= Duration::from_secs(17),
        "takeover took {takeover:?}, more than lease duration + 2 s"
    );
    assert_eq!(standby.holds("resource-definitions").await, Some(true));
    assert_eq!(
        standby.units_held().await,
        Some(34),
        "every unit, with the other replica gone"
    );
}

#[tokio::test]
async fn sigterm_hands_the_units_back_and_the_other_replica_takes_them_over_fast() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "election-term").await;
    let rules = temp_dir("election-term");
    write(&rules, "a.yaml", &rd_rule("a", "alpha", "term.election.test", ""));
    let (mut leader, standby) = sharing_pair(&rules, &ns).await;
    let stopped = Instant::now();
    let status = leader.sigterm();
    assert!(status.success(), "SIGTERM must exit 0, got {status}");
    eventually(Duration::from_secs(10), "the other replica runs every unit", || async {
        (standby.units_held().await == Some(34)).then_some(())
    })
    .await;
    let takeover = stopped.elapsed();
    println!("takeover after SIGTERM: {:.2} s", takeover.as_secs_f64());
    assert!(
        takeover < Duration::from_secs(2),
        "takeover after SIGTERM took {takeover:?}"
    );
}

#[tokio::test]
async fn rule_edits_apply_within_two_seconds_and_broken_edits_keep_the_old_rule() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "reload").await;
    let rules = temp_dir("reload");
    write(&rules, "gadget.yaml", &rd_rule("gadget", "gadget", "reload.test", ""));
    let manager = ManagerProcess::start(&rules, &ns, "manager-reload", &[]);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let has_field = |field: &'static str| {
        let crds = crds.clone();
        async move {
            let crd = crds.get_opt("gadgets.reload.test").await.ok().flatten()?;
            let schema = serde_json::to_value(&crd.spec.versions[0].schema).ok()?;
            schema["openAPIV3Schema"]["properties"]["spec"]["properties"]
                .get(field)
                .map(|_| ())
        }
    };
    eventually(Duration::from_secs(40), "initial CRD", || has_field("size")).await;
    manager.wait_ready(Duration::from_secs(20)).await;

    let with_colour = rd_rule(
        "gadget",
        "gadget",
        "reload.test",
        "\n                colour: { type: string }",
    );
    let edited = Instant::now();
    write(&rules, "gadget.yaml", &with_colour);
    eventually(Duration::from_secs(10), "edited schema applied", || has_field("colour")).await;
    let took = edited.elapsed();
    println!("rule edit → cluster: {:.2} s", took.as_secs_f64());
    assert!(took < Duration::from_secs(2), "edit took {took:?}");

    // A broken edit: the previous rule keeps working, the error is visible with its location.
    write(
        &rules,
        "gadget.yaml",
        "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata:\n  name: gadget.reload.test\nspec:\n  scoop: Namespaced\n",
    );
    let (code, body) = eventually(Duration::from_secs(10), "reload error in /readyz", || async {
        manager
            .readyz()
            .await
            .filter(|(_, body)| body.contains("last reload rejected"))
    })
    .await;
    assert_eq!(
        code, 200,
        "a rejected reload must not make the replica unready:\n{body}"
    );
    assert!(
        body.contains("gadget.yaml:6:3"),
        "error located at file:line:col in /readyz:\n{body}"
    );
    assert!(
        body.contains("rule gadget.reload.test (ResourceDefinition): running"),
        "old rule still running:\n{body}"
    );
    assert!(manager.metric("ruleplane_rule_file_errors").await.unwrap_or(0.0) >= 1.0);
    let metrics = manager.metrics_text().await.unwrap_or_default();
    assert!(
        metrics.contains("ruleplane_reloads_total{result=\"invalid\"} 1"),
        "{metrics}"
    );
    // The CRD from the last good rule is still there and unchanged.
    assert!(has_field("colour").await.is_some());

    // Fixing the file clears the error.
    write(&rules, "gadget.yaml", &with_colour);
    eventually(Duration::from_secs(10), "error cleared", || async {
        manager
            .readyz()
            .await
            .filter(|(_, body)| !body.contains("last reload rejected"))
    })
    .await;
}

#[tokio::test]
async fn missing_permissions_are_reported_per_rule() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "permissions").await;
    let rules = temp_dir("permissions");
    write(&rules, "a.yaml", &rd_rule("a", "alpha", "permissions.test", ""));
    let manager = ManagerProcess::start_as(
        &crate::support::control_plane().unprivileged_kubeconfig,
        &rules,
        &ns,
        "manager-unprivileged",
        &[],
    );
    let (_, body) = eventually(Duration::from_secs(30), "missing permissions in /readyz", || async {
        manager
            .readyz()
            .await
            .filter(|(_, b)| b.contains("lacks RBAC permissions"))
    })
    .await;
    assert!(
        body.contains(
            "alpha.permissions.test lacks RBAC permissions: \
             get customresourcedefinitions.apiextensions.k8s.io alphas.permissions.test (cluster-wide)"
        ),
        "{body}"
    );
    assert!(
        body.contains("manager lacks RBAC permissions: get leases.coordination.k8s.io in namespace"),
        "{body}"
    );
    assert!(
        manager.logs().contains("missing RBAC permissions"),
        "{}",
        manager.logs()
    );
}

/// Lays out `files` the way the kubelet's atomic writer does for a ConfigMap volume: a timestamped
/// directory, a `..data` symlink to it, and one visible symlink per key; an update swaps `..data`.
fn configmap_volume_update(dir: &Path, generation: u32, files: &[(&str, &str)]) {
    let data_dir = format!("..2026_11_22_00_00_{generation:02}.000000001");
    std::fs::create_dir_all(dir.join(&data_dir)).expect("timestamped dir");
    for (name, text) in files {
        std::fs::write(dir.join(&data_dir).join(name), text).expect("write key");
        let visible = dir.join(name);
        if std::fs::symlink_metadata(&visible).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &visible).expect("key symlink");
        }
    }
    let tmp_link = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp_link);
    std::os::unix::fs::symlink(&data_dir, &tmp_link).expect("..data_tmp symlink");
    std::fs::rename(&tmp_link, dir.join("..data")).expect("swap ..data");
}

#[tokio::test]
async fn configmap_volume_updates_are_picked_up_once() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "configmap-volume").await;
    let rules = temp_dir("configmap-volume");
    configmap_volume_update(
        &rules,
        1,
        &[("widget.yaml", &rd_rule("widget", "widget", "cmvolume.test", ""))],
    );
    let manager = ManagerProcess::start(&rules, &ns, "manager-cm", &[]);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually(Duration::from_secs(40), "CRD from the ConfigMap volume", || async {
        crds.get_opt("widgets.cmvolume.test").await.ok().flatten().map(|_| ())
    })
    .await;
    // Loaded once, although the file is reachable through three paths (key, ..data, timestamped dir).
    let (_, body) = manager.readyz().await.expect("readyz");
    assert_eq!(body.matches("rule widget.cmvolume.test").count(), 1, "{body}");

    configmap_volume_update(
        &rules,
        2,
        &[
            (
                "widget.yaml",
                &rd_rule(
                    "widget",
                    "widget",
                    "cmvolume.test",
                    "\n                colour: { type: string }",
                ),
            ),
            ("sprocket.yaml", &rd_rule("sprocket", "sprocket", "cmvolume.test", "")),
        ],
    );
    eventually(
        Duration::from_secs(10),
        "both rules applied after the ..data swap",
        || async {
            let widget = crds.get_opt("widgets.cmvolume.test").await.ok().flatten()?;
            let schema = serde_json::to_value(&widget.spec.versions[0].schema).ok()?;
            schema["openAPIV3Schema"]["properties"]["spec"]["properties"].get("colour")?;
            crds.get_opt("sprockets.cmvolume.test").await.ok().flatten().map(|_| ())
        },
    )
    .await;
    assert_eq!(manager.metric("ruleplane_rules_loaded").await, Some(2.0));
}
