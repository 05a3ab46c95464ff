//! ResourceDefinition rules on a real apiserver: CRDs registered, evolved safely, never deleted implicitly.

use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{
    admin_client, create_foreign_crd, eventually, eventually_seen, kubectl, kubectl_result, test_namespace,
    write_rule_file as write,
};

/// The CronTab rule without short names: `ct` must stay unique to one test in the shared cluster.
fn crontab_rule_in(group: &str) -> String {
    CRONTAB_RULE
        .replace("  names: { shortNames: [ct] }\n", "")
        .replace("rd.example.com", group)
}

const CRONTAB_RULE: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata:
  name: cron-tab.rd.example.com
spec:
  scope: Namespaced
  names: { shortNames: [ct] }
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
              description: What to run and when.
              required: [cronSpec, image]
              properties:
                cronSpec:
                  type: string
                  description: Schedule in cron format, e.g. "*/5 * * * *".
                  pattern: '^(\S+\s+){4}\S+$'
                image:
                  type: string
                  description: Container image to run.
                replicas:
                  type: integer
                  minimum: 1
                  default: 1
      printerColumns:
        - { name: Schedule, type: string, jsonPath: .spec.cronSpec }
        - { name: Image, type: string, jsonPath: .spec.image }
"#;

async fn established(name: &str, timeout: Duration) -> CustomResourceDefinition {
    let api: Api<CustomResourceDefinition> = Api::all(admin_client().await);
    eventually(timeout, &format!("CRD {name} Established"), || async {
        let crd = api.get_opt(name).await.ok().flatten()?;
        let conds = crd.status.as_ref()?.conditions.as_ref()?;
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(crd.clone())
    })
    .await
}

#[tokio::test]
async fn crontab_rule_gives_a_crd_that_kubectl_understands() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-crontab").await;
    let rules = temp_dir("rd-crontab");
    write(&rules, "crontab.yaml", CRONTAB_RULE);
    let _manager = ManagerProcess::start(&rules, &ns, "rd-crontab", &[]);
    let crd = established("crontabs.rd.example.com", Duration::from_secs(40)).await;

    // Names derived from the ThirdPartyResource-style rule name.
    assert_eq!(crd.spec.group, "rd.example.com");
    assert_eq!(crd.spec.names.kind, "CronTab");
    assert_eq!(crd.spec.names.plural, "crontabs");
    assert_eq!(crd.spec.names.singular.as_deref(), Some("crontab"));
    assert_eq!(crd.spec.names.short_names.as_deref(), Some(&["ct".to_owned()][..]));
    let labels = crd.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("app.kubernetes.io/managed-by").map(String::as_str),
        Some("ruleplane")
    );
    assert_eq!(
        labels.get("ruleplane.dev/rule").map(String::as_str),
        Some("cron-tab.rd.example.com")
    );
    let managers: Vec<String> = crd
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"ruleplane-crd".to_owned()),
        "server-side applied by ruleplane-crd: {managers:?}"
    );

    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("rd.example.com", "v1", "CronTab"));
    let crontabs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rd.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "new-cron-object"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image"}
    }))
    .unwrap();
    let created = eventually(Duration::from_secs(20), "create CronTab", || async {
        crontabs.create(&PostParams::default(), &object).await.ok()
    })
    .await;
    assert_eq!(created.data["spec"]["replicas"], 1, "schema default applied");

    let table = kubectl(&["get", "crontabs.rd.example.com", "-n", &ns]);
    assert!(
        table.contains("SCHEDULE") && table.contains("IMAGE"),
        "printer columns:\n{table}"
    );
    assert!(
        table.contains("new-cron-object") && table.contains("my-awesome-cron-image"),
        "{table}"
    );
    let short = kubectl(&["get", "ct", "-n", &ns, "-o", "name"]);
    assert_eq!(short.trim(), "crontab.rd.example.com/new-cron-object");
    let explain = eventually(Duration::from_secs(30), "kubectl explain sees the schema", || async {
        kubectl_result(&["explain", "crontabs.rd.example.com.spec.cronSpec"])
            .ok()
            .filter(|out| out.contains("Schedule in cron format"))
    })
    .await;
    assert!(explain.contains("FIELD: cronSpec"), "{explain}");

    // The apiserver enforces the schema with its own message.
    let invalid = object_with(&object, "bad", json!({"cronSpec": "every minute", "image": "x"}));
    let err = crontabs
        .create(&PostParams::default(), &invalid)
        .await
        .expect_err("invalid cronSpec rejected");
    assert!(err.to_string().contains("spec.cronSpec"), "{err}");
    let missing = object_with(&object, "bad2", json!({"cronSpec": "* * * * *"}));
    let err = crontabs
        .create(&PostParams::default(), &missing)
        .await
        .expect_err("missing image rejected");
    assert!(err.to_string().contains("spec.image: Required value"), "{err}");
}

fn object_with(base: &DynamicObject, name: &str, spec: serde_json::Value) -> DynamicObject {
    let mut o = base.clone();
    o.metadata.name = Some(name.to_owned());
    o.data["spec"] = spec;
    o
}

#[tokio::test]
async fn removing_a_rule_keeps_the_crd_and_objects_unless_deletion_policy_says_delete() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-removal").await;
    let rules = temp_dir("rd-removal");
    let kept = crontab_rule_in("keep.removal.test");
    let deleted = crontab_rule_in("delete.removal.test").replace(
        "  scope: Namespaced\n",
        "  scope: Namespaced\n  deletionPolicy: Delete\n",
    );
    write(&rules, "kept.yaml", &kept);
    write(&rules, "deleted.yaml", &deleted);
    // A rule that stays: a reload removing every ResourceDefinition rule would be refused.
    write(&rules, "stays.yaml", &crontab_rule_in("stays.removal.test"));
    let manager = ManagerProcess::start(&rules, &ns, "rd-removal", &[]);
    established("crontabs.keep.removal.test", Duration::from_secs(40)).await;
    established("crontabs.delete.removal.test", Duration::from_secs(40)).await;
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("keep.removal.test", "v1", "CronTab"));
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "keep.removal.test/v1", "kind": "CronTab", "metadata": {"name": "precious"},
        "spec": {"cronSpec": "* * * * *", "image": "x"}
    }))
    .unwrap();
    eventually(Duration::from_secs(20), "create object", || async {
        objects.create(&PostParams::default(), &obj).await.ok()
    })
    .await;

    std::fs::remove_file(rules.join("kept.yaml")).unwrap();
    std::fs::remove_file(rules.join("deleted.yaml")).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually(Duration::from_secs(20), "Delete-policy CRD deleted", || async {
        match crds.get_opt("crontabs.delete.removal.test").await {
            Ok(None) => Some(()),
            Ok(Some(crd)) if crd.metadata.deletion_timestamp.is_some() => Some(()),
            _ => None,
        }
    })
    .await;
    // Removed rules are handled one after another: wait for the Retain one too.
    eventually(Duration::from_secs(10), "Retain logged", || async {
        manager
            .logs()
            .contains("CustomResourceDefinition kept (deletionPolicy: Retain)")
            .then_some(())
    })
    .await;
    assert!(
        crds.get_opt("crontabs.keep.removal.test").await.unwrap().is_some(),
        "Retain keeps the CRD"
    );
    let left = objects
        .list(&ListParams::default())
        .await
        .expect("objects still served");
    assert_eq!(left.items.len(), 1, "user objects survive rule removal");
}

#[tokio::test]
async fn a_crd_owned_by_someone_else_is_not_taken_over_and_the_conflict_is_reported() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-conflict").await;
    let crds = create_foreign_crd(&client, "conflict.test", "CronTab", "crontabs", "Namespaced").await;
    // And a name clash: another rule asks for kind CronTab in the same group under a different plural.
    let clash = CRONTAB_RULE
        .replace("cron-tab.rd.example.com", "schedules.conflict.test")
        .replace(
            "  names: { shortNames: [ct] }\n",
            "  names: { kind: CronTab, plural: schedules, singular: schedule }\n",
        );
    let rules = temp_dir("rd-conflict");
    write(&rules, "conflict.yaml", &crontab_rule_in("conflict.test"));
    write(&rules, "clash.yaml", &clash);
    let manager = ManagerProcess::start(&rules, &ns, "rd-conflict", &[]);

    let (_, body) = eventually(Duration::from_secs(40), "both problems in /readyz", || async {
        manager
            .readyz()
            .await
            .filter(|(_, b)| b.contains("not managed by ruleplane") && b.contains("names not accepted"))
    })
    .await;
    assert!(
        body.contains("rule cron-tab.conflict.test (ResourceDefinition): degraded"),
        "{body}"
    );
    assert!(body.contains("adopt: true"), "tells how to take it over:\n{body}");
    let untouched = crds.get("crontabs.conflict.test").await.unwrap();
    assert!(
        untouched.metadata.labels.unwrap_or_default().is_empty(),
        "foreign CRD left as it was"
    );
    let metrics = manager.metrics_text().await.unwrap_or_default();
    assert!(metrics.contains("category=\"not-managed\""), "{metrics}");
    assert!(metrics.contains("category=\"names-not-accepted\""), "{metrics}");

    let events: Api<Event> = Api::all(client.clone());
    let refused = eventually(Duration::from_secs(20), "Warning event on the CRD", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("crontabs.conflict.test")
                && e.reason.as_deref() == Some("ApplyRefused")
        })
    })
    .await;
    assert_eq!(refused.type_.as_deref(), Some("Warning"));
    // The worker keeps running: the process is alive and still serving.
    assert!(manager.readyz().await.is_some());
}

#[tokio::test]
async fn storage_version_changes_are_refused_unless_the_rule_allows_them() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-storage").await;
    let rules = temp_dir("rd-storage");
    let v1 = crontab_rule_in("storage.test");
    write(&rules, "crontab.yaml", &v1);
    let manager = ManagerProcess::start(&rules, &ns, "rd-storage", &[]);
    established("crontabs.storage.test", Duration::from_secs(40)).await;

    let v2_storage = v1.replace(
        "    - name: v1\n      served: true\n      storage: true\n",
        "    - name: v2\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true }\n    - name: v1\n      served: true\n      storage: false\n",
    );
    write(&rules, "crontab.yaml", &v2_storage);
    let (_, body) = eventually(Duration::from_secs(20), "refusal in /readyz", || async {
        manager.readyz().await.filter(|(_, b)| b.contains("storage version"))
    })
    .await;
    assert!(body.contains("allowStorageVersionChange: true"), "{body}");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get("crontabs.storage.test").await.unwrap();
    assert_eq!(crd.spec.versions.len(), 1, "nothing applied while refused");

    write(
        &rules,
        "crontab.yaml",
        &v2_storage.replace(
            "  scope: Namespaced\n",
            "  scope: Namespaced\n  allowStorageVersionChange: true\n",
        ),
    );
    eventually(Duration::from_secs(20), "v2 is the storage version", || async {
        let crd = crds.get("crontabs.storage.test").await.ok()?;
        crd.spec
            .versions
            .iter()
            .any(|v| v.name == "v2" && v.storage)
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_schema_the_apiserver_rejects_is_reported_with_its_reason() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-invalid").await;
    let rules = temp_dir("rd-invalid");
    // CEL that does not compile: only the apiserver can tell.
    let rule = crontab_rule_in("invalid.test").replace(
        "              required: [cronSpec, image]\n",
        "              required: [cronSpec, image]\n              x-kubernetes-validations:\n                - rule: \"self.replicas >\"\n",
    );
    write(&rules, "crontab.yaml", &rule);
    let manager = ManagerProcess::start(&rules, &ns, "rd-invalid", &[]);
    let (_, body) = eventually(Duration::from_secs(40), "rejection in /readyz", || async {
        manager.readyz().await.filter(|(_, b)| b.contains("rejected"))
    })
    .await;
    assert!(
        body.contains("x-kubernetes-validations"),
        "the apiserver's reason is shown:\n{body}"
    );
    let metrics = manager.metrics_text().await.unwrap_or_default();
    assert!(metrics.contains("category=\"rejected\""), "{metrics}");
    // No CRD exists to hang the Warning on, so it names the manager's Pod.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let rejected = eventually(
        Duration::from_secs(20),
        "Warning event on the manager's Pod",
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("ApplyRejected"))
        },
    )
    .await;
    let regarding = rejected.regarding.expect("regarding");
    assert_eq!(
        (regarding.kind.as_deref(), regarding.name.as_deref()),
        (Some("Pod"), Some("rd-invalid"))
    );
    assert!(rejected.note.unwrap_or_default().contains("x-kubernetes-validations"));
}

#[tokio::test]
async fn twenty_crds_from_one_file_are_all_established() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-twenty").await;
    let rules = temp_dir("rd-twenty");
    let file: Vec<String> = (0..20)
        .map(|i| {
            format!(
                "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata:\n  name: thing{i}.twenty.test\nspec:\n  versions:\n    - name: v1\n      served: true\n      storage: true\n"
            )
        })
        .collect();
    write(&rules, "twenty.yaml", &file.join("---\n"));
    let start = Instant::now();
    let _manager = ManagerProcess::start(&rules, &ns, "rd-twenty", &[]);
    for i in 0..20 {
        established(&format!("thing{i}s.twenty.test"), Duration::from_secs(60)).await;
    }
    println!(
        "20 CRDs established {:.2} s after manager start",
        start.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn hand_edits_to_a_managed_crd_are_corrected() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-drift").await;
    let rules = temp_dir("rd-drift");
    write(&rules, "crontab.yaml", &crontab_rule_in("drift.test"));
    let _manager = ManagerProcess::start(&rules, &ns, "rd-drift", &[]);
    let generation_before = established("crontabs.drift.test", Duration::from_secs(40))
        .await
        .metadata
        .generation;

    // Someone removes the printer columns and the rule label by hand.
    kubectl(&[
        "patch",
        "crd",
        "crontabs.drift.test",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/versions/0/additionalPrinterColumns"},{"op":"remove","path":"/metadata/labels/ruleplane.dev~1rule"}]"#,
    ]);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let started = Instant::now();
    eventually(Duration::from_secs(20), "drift corrected", || async {
        let crd = crds.get("crontabs.drift.test").await.ok()?;
        let columns = crd.spec.versions[0].additional_printer_columns.as_ref()?;
        let label = crd.metadata.labels.as_ref()?.get("ruleplane.dev/rule")?;
        (columns.len() == 2 && label == "cron-tab.drift.test").then_some(())
    })
    .await;
    println!("drift corrected in {:.2} s", started.elapsed().as_secs_f64());
    // The spec really changed twice (hand edit, then correction), not zero times.
    let generation_after = crds.get("crontabs.drift.test").await.unwrap().metadata.generation;
    assert!(
        generation_after >= generation_before.map(|g| g + 2),
        "{generation_before:?} → {generation_after:?}"
    );
}

/// The rule for `crontabs.<group>` with `deletionPolicy: Delete`, named TPR-style (`cron-tab.<group>`).
fn delete_policy_rule_in(group: &str) -> String {
    crontab_rule_in(group).replace(
        "  scope: Namespaced\n",
        "  scope: Namespaced\n  deletionPolicy: Delete\n",
    )
}

async fn create_crontab(client: &kube::Client, ns: &str, group: &str, name: &str) -> DynamicObject {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", "CronTab"));
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": name},
        "spec": {"cronSpec": "* * * * *", "image": "x"}
    }))
    .unwrap();
    eventually(Duration::from_secs(20), "create a CronTab", || async {
        objects.create(&PostParams::default(), &obj).await.ok()
    })
    .await
}

/// Waits until `/readyz?verbose` contains `text` (at most 40 s) and returns the body.
async fn readyz_containing(manager: &ManagerProcess, text: &str) -> String {
    eventually_seen(Duration::from_secs(40), &format!("`{text}` in /readyz"), || async {
        match manager.readyz().await {
            Some((_, body)) if body.contains(text) => Ok(body),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// The CRD's uid while it exists and is not being deleted; panics otherwise, saying what was found.
async fn live_uid(crds: &Api<CustomResourceDefinition>, name: &str) -> Option<String> {
    let crd = crds.get_opt(name).await.expect("read the CRD");
    let crd = crd.unwrap_or_else(|| panic!("CRD {name} was deleted"));
    assert!(crd.metadata.deletion_timestamp.is_none(), "CRD {name} is being deleted");
    crd.metadata.uid
}

#[tokio::test]
async fn renaming_a_delete_policy_rule_keeps_its_crd_and_objects() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-rename").await;
    let rules = temp_dir("rd-rename");
    let old = delete_policy_rule_in("rename.test");
    write(&rules, "crontab.yaml", &old);
    let manager = ManagerProcess::start(&rules, &ns, "rd-rename", &[]);
    let crd_uid = established("crontabs.rename.test", Duration::from_secs(40))
        .await
        .metadata
        .uid;
    let object_uid = create_crontab(&client, &ns, "rename.test", "precious")
        .await
        .metadata
        .uid;

    // Renamed in Git: a CRD-style name for the same CRD, crontabs.rename.test, still with `deletionPolicy: Delete`.
    let renamed = old
        .replace("  name: cron-tab.rename.test\n", "  name: crontabs.rename.test\n")
        .replace(
            "  scope: Namespaced\n",
            "  scope: Namespaced\n  names: { kind: CronTab }\n",
        );
    write(&rules, "crontab.yaml", &renamed);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // The old rule's removal runs before the new rule's worker starts: once the new rule has relabelled the CRD,
    // the removal has been decided.
    eventually_seen(Duration::from_secs(20), "the new rule's label on the CRD", || async {
        let crd = crds.get_opt("crontabs.rename.test").await.map_err(|e| e.to_string())?;
        let label = crd
            .as_ref()
            .and_then(|c| c.metadata.labels.as_ref()?.get("ruleplane.dev/rule").cloned());
        match label.as_deref() {
            Some("crontabs.rename.test") => Ok(()),
            _ => Err(format!("CRD exists: {}, rule label {label:?}", crd.is_some())),
        }
    })
    .await;
    assert_eq!(
        live_uid(&crds, "crontabs.rename.test").await,
        crd_uid,
        "the same CRD, not a new one"
    );
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("rename.test", "v1", "CronTab"));
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let kept = objects.get("precious").await.expect("the CronTab survives the rename");
    assert_eq!(kept.metadata.uid, object_uid);
    let body = readyz_containing(&manager, "rule crontabs.rename.test (ResourceDefinition): running").await;
    assert!(!body.contains("cron-tab.rename.test"), "the old rule is gone:\n{body}");
    let metrics = manager.metrics_text().await.unwrap_or_default();
    assert!(
        !metrics.contains("category=\"owned-by-other-rule\""),
        "the new rule's apply was never refused:\n{metrics}"
    );
}

#[tokio::test]
async fn a_reload_that_removes_every_rule_is_refused_unless_the_operator_allows_it() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rd-empty").await;
    let rules = temp_dir("rd-empty");
    let rule = delete_policy_rule_in("empty.test");
    write(&rules, "crontab.yaml", &rule);
    let mut manager = ManagerProcess::start(&rules, &ns, "rd-empty", &[]);
    let crd_uid = established("crontabs.empty.test", Duration::from_secs(40))
        .await
        .metadata
        .uid;
    let object_uid = create_crontab(&client, &ns, "empty.test", "precious")
        .await
        .metadata
        .uid;
    readyz_containing(&manager, "rule cron-tab.empty.test (ResourceDefinition): running").await;

    // The ConfigMap lost its keys: the rules directory is empty.
    std::fs::remove_file(rules.join("crontab.yaml")).unwrap();
    let body = readyz_containing(&manager, "rule reload refused").await;
    let (code, _) = manager.readyz().await.expect("/readyz answers");
    assert_eq!(code, 200, "still ready: the last good rules keep running\n{body}");
    assert!(
        body.contains(
            "[!] rule reload refused: the new rule set is empty: it removes all 1 rules (deletionPolicy: Delete \
             would delete CustomResourceDefinition crontabs.empty.test and every object of it)"
        ),
        "{body}"
    );
    assert!(body.contains("pass --allow-empty-rule-set"), "{body}");
    assert!(
        body.contains("rule cron-tab.empty.test (ResourceDefinition): running"),
        "{body}"
    );
    assert_eq!(manager.metric("ruleplane_rule_reload_refused").await, Some(1.0));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert_eq!(live_uid(&crds, "crontabs.empty.test").await, crd_uid);
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("empty.test", "v1", "CronTab"));
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    assert_eq!(
        objects.get("precious").await.expect("the CronTab is kept").metadata.uid,
        object_uid
    );

    // The files come back: the refusal is over.
    write(&rules, "crontab.yaml", &rule);
    eventually_seen(Duration::from_secs(20), "the refusal cleared", || async {
        let refused = manager.metric("ruleplane_rule_reload_refused").await;
        let body = manager.readyz().await.map(|(_, body)| body).unwrap_or_default();
        match refused {
            Some(0.0) if !body.contains("refused") => Ok(()),
            _ => Err(format!("ruleplane_rule_reload_refused {refused:?}; /readyz:\n{body}")),
        }
    })
    .await;
    manager.sigterm();

    // The operator opts in. A manager starting on an empty directory accepts it (nothing ran to be lost) and
    // deletes nothing.
    std::fs::remove_file(rules.join("crontab.yaml")).unwrap();
    let allowed = ManagerProcess::start(&rules, &ns, "rd-empty-allowed", &["--allow-empty-rule-set"]);
    allowed.wait_ready(Duration::from_secs(40)).await;
    assert_eq!(live_uid(&crds, "crontabs.empty.test").await, crd_uid);
    write(&rules, "crontab.yaml", &rule);
    readyz_containing(&allowed, "rule cron-tab.empty.test (ResourceDefinition): running").await;
    std::fs::remove_file(rules.join("crontab.yaml")).unwrap();
    eventually_seen(Duration::from_secs(20), "the Delete-policy CRD deleted", || async {
        match crds.get_opt("crontabs.empty.test").await {
            Ok(None) => Ok(()),
            Ok(Some(crd)) if crd.metadata.deletion_timestamp.is_some() => Ok(()),
            Ok(Some(crd)) => Err(format!("CRD labels {:?}", crd.metadata.labels)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert_eq!(allowed.metric("ruleplane_rule_reload_refused").await, Some(0.0));
}
