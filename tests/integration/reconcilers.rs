//! Reconciler rules on a real apiserver: children applied, drift repaired, pruned, status projected, conflicts
//! reported — and a converged parent costs no write.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::{Client, ResourceExt};
use ruleplane_config::ownership::cleanup_finalizer;
use serde_json::{Value, json};

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{
    admin_client, create_config_map, eventually, kubectl, merge_patch, test_namespace, write_rule_file as write,
};

/// A CronTab kind in its own API group (CRDs are cluster-wide; every test declares its own group) and the
/// Reconciler of `examples/crontab.yaml` turning each CronTab into a CronJob.
fn crontab_rules(group: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: cron-tab.{group} }}
spec:
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                cronSpec: {{ type: string }}
                image: {{ type: string }}
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
      subresources: {{ status: {{}} }}
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: crontab-to-cronjob }}
spec:
  for: {{ apiVersion: {group}/v1, kind: CronTab }}
  lookups:
    defaults: {{ apiVersion: v1, kind: ConfigMap, name: crontab-defaults, jsonPath: "{{.data}}" }}
  children:
    - id: job
      template: |
        apiVersion: batch/v1
        kind: CronJob
        metadata:
          name: {{{{json metadata.name}}}}
        spec:
          schedule: {{{{json spec.cronSpec}}}}
          concurrencyPolicy: {{{{json (default lookups.defaults.concurrencyPolicy "Forbid")}}}}
          jobTemplate:
            spec:
              template:
                spec:
                  restartPolicy: OnFailure
                  containers:
                    - name: main
                      image: {{{{json spec.image}}}}
      readyWhen: "{{.metadata.name}}"
  status:
    cronJob: "{{.children.job.metadata.name}}"
    schedule: "{{.children.job.spec.schedule}}"
"#
    )
}

fn api_of(client: &Client, group: &str, version: &str, kind: &str, plural: &str, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn crontab(name: &str, group: &str, schedule: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "CronTab",
        "metadata": { "name": name },
        "spec": { "cronSpec": schedule, "image": "busybox:1.36" }
    }))
    .expect("a CronTab")
}

fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Writes the apiserver's request counter reports for a resource (POST/PUT/PATCH/APPLY/DELETE), all namespaces.
fn writes_to(resource: &str) -> u64 {
    let metrics = kubectl(&["get", "--raw", "/metrics"]);
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains(&format!("resource=\"{resource}\"")))
        .filter(|l| {
            ["POST", "PUT", "PATCH", "APPLY", "DELETE"]
                .iter()
                .any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test]
async fn a_crontab_becomes_a_cronjob_with_status_and_hand_edits_or_deletion_are_repaired() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-crontab").await;
    let group = "rc1.example.com";
    let rules = temp_dir("rc-crontab");
    write(&rules, "rules.yaml", &crontab_rules(group));
    let manager = ManagerProcess::start(&rules, &ns, "rc-crontab", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let crontabs = api_of(&client, group, "v1", "CronTab", "crontabs", &ns);
    let cronjobs = api_of(&client, "batch", "v1", "CronJob", "cronjobs", &ns);
    // The CRD is registered by the same manager; creating objects works once it is established.
    let created = eventually(Duration::from_secs(40), "CronTab created", || async {
        crontabs
            .create(&PostParams::default(), &crontab("nightly", group, "0 3 * * *"))
            .await
            .ok()
    })
    .await;

    let job = eventually(Duration::from_secs(20), "CronJob nightly", || async {
        cronjobs.get_opt("nightly").await.ok().flatten()
    })
    .await;
    assert_eq!(job.data["spec"]["schedule"], "0 3 * * *");
    assert_eq!(job.data["spec"]["concurrencyPolicy"], "Forbid", "lookup default");
    let labels = job.labels();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "ruleplane");
    assert_eq!(labels["ruleplane.dev/rule"], "crontab-to-cronjob");
    assert_eq!(labels["ruleplane.dev/child-id"], "job");
    assert_eq!(Some(&labels["ruleplane.dev/parent-uid"]), created.uid().as_ref());
    let owner = &job.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("CronTab", Some(true)));
    assert_eq!(
        job.metadata.managed_fields.as_ref().unwrap()[0].manager.as_deref(),
        Some("ruleplane-reconciler")
    );
    // The worker waited for the CRD its rule set declares instead of meeting a 404 and being restarted.
    let restarts = manager
        .metric("ruleplane_worker_restarts_total{rule=\"crontab-to-cronjob\",kind=\"Reconciler\"}")
        .await;
    assert_eq!(restarts.unwrap_or(0.0), 0.0, "{}", manager.logs());

    let parent = eventually(
        Duration::from_secs(20),
        "CronTab Ready with projected status",
        || async {
            let parent = crontabs.get("nightly").await.ok()?;
            let ready = condition(&parent, "Ready")?["status"] == "True";
            (ready && parent.data["status"]["cronJob"] == "nightly").then_some(parent)
        },
    )
    .await;
    assert_eq!(parent.data["status"]["schedule"], "0 3 * * *");
    assert_eq!(parent.data["status"]["observedGeneration"], 1);
    assert_eq!(condition(&parent, "Synced").unwrap()["status"], "True");
    kubectl(&[
        "wait",
        "-n",
        &ns,
        &format!("crontabs.{group}/nightly"),
        "--for=condition=Ready",
        "--timeout=5s",
    ]);

    // A change of the parent reaches the child.
    merge_patch(&crontabs, "nightly", json!({ "spec": { "cronSpec": "0 4 * * *" } })).await;
    eventually(Duration::from_secs(10), "schedule follows the parent", || async {
        let job = cronjobs.get("nightly").await.ok()?;
        (job.data["spec"]["schedule"] == "0 4 * * *").then_some(())
    })
    .await;

    // Drift: a hand edit of a rendered field is put back, and so is a deleted child.
    let edited = Instant::now();
    merge_patch(&cronjobs, "nightly", json!({ "spec": { "schedule": "* * * * *" } })).await;
    eventually(Duration::from_secs(5), "hand edit repaired", || async {
        let job = cronjobs.get("nightly").await.ok()?;
        (job.data["spec"]["schedule"] == "0 4 * * *").then_some(())
    })
    .await;
    let repaired = edited.elapsed();
    let deleted = Instant::now();
    cronjobs
        .delete("nightly", &DeleteParams::default())
        .await
        .expect("delete the child");
    eventually(Duration::from_secs(5), "deleted child recreated", || async {
        let job = cronjobs.get_opt("nightly").await.ok().flatten()?;
        (job.metadata.deletion_timestamp.is_none()).then_some(())
    })
    .await;
    let recreated = deleted.elapsed();
    eprintln!("drift: hand edit repaired in {repaired:?}, deleted child recreated in {recreated:?}");
    assert!(repaired < Duration::from_secs(1), "hand edit repaired in {repaired:?}");
    assert!(
        recreated < Duration::from_secs(1),
        "deleted child recreated in {recreated:?}"
    );

    // A change of a looked-up object reaches every parent that read it.
    let defaults: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    defaults
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "crontab-defaults" },
                                             "data": { "concurrencyPolicy": "Replace" } }))
            .expect("a ConfigMap"),
        )
        .await
        .expect("create the defaults");
    eventually(Duration::from_secs(10), "lookup change applied", || async {
        let job = cronjobs.get("nightly").await.ok()?;
        (job.data["spec"]["concurrencyPolicy"] == "Replace").then_some(())
    })
    .await;

    // Events on the parent tell the story.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nightly"))
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.iter().any(|r| r == "Created"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "Updated"), "{reasons:?}");
}

/// 100 converged parents: a new manager (a forced resync of every parent) sends no write at all.
#[tokio::test]
async fn a_resync_of_100_converged_parents_sends_no_write() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-noop").await;
    let group = "rc2.example.com";
    // PodTemplate: a child kind no other test writes, so the apiserver's counter is this test's alone.
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: noop-app.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: web-app-template }}
spec:
  for: {{ apiVersion: {group}/v1, kind: NoopApp }}
  children:
    - id: template
      template: |
        apiVersion: v1
        kind: PodTemplate
        metadata:
          name: {{{{json metadata.name}}}}
        template:
          metadata: {{ labels: {{ app: {{{{json metadata.name}}}} }} }}
          spec:
            containers:
              - name: web
                image: {{{{json spec.image}}}}
                resources: {{ requests: {{ cpu: 500m, memory: 64Mi }}, limits: {{ cpu: "1" }} }}
"#
    );
    let dir = temp_dir("rc-noop");
    write(&dir, "rules.yaml", &rules);
    let mut first = ManagerProcess::start(&dir, &ns, "rc-noop-1", &[]);
    first.wait_ready(Duration::from_secs(40)).await;
    let apps = api_of(&client, group, "v1", "NoopApp", "noopapps", &ns);
    for index in 0..100 {
        let app: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "NoopApp",
            "metadata": { "name": format!("app-{index}") }, "spec": { "image": "nginx:1.27" }
        }))
        .expect("a NoopApp");
        eventually(Duration::from_secs(40), "NoopApp created", || async {
            apps.create(&PostParams::default(), &app).await.ok()
        })
        .await;
    }
    let templates: Api<k8s_openapi::api::core::v1::PodTemplate> = Api::namespaced(client.clone(), &ns);
    eventually(Duration::from_secs(60), "100 PodTemplates", || async {
        let count = templates.list(&ListParams::default()).await.ok()?.items.len();
        (count == 100).then_some(())
    })
    .await;
    // Converged means the status too: every parent Ready, as the first manager wrote it.
    eventually(Duration::from_secs(60), "100 parents Ready", || async {
        let list = apps.list(&ListParams::default()).await.ok()?;
        let ready = list
            .items
            .iter()
            .filter(|app| condition(app, "Ready").is_some_and(|c| c["status"] == "True"))
            .count();
        (ready == 100).then_some(())
    })
    .await;
    let applied = "ruleplane_change_to_applied_seconds_count{rule=\"web-app-template\",kind=\"Reconciler\"}";
    let timed = first.metric(applied).await.unwrap_or_default();
    assert!(
        timed >= 100.0,
        "each parent's first children timed from its change: {timed}"
    );
    first.kill9();
    let before = (writes_to("podtemplates"), writes_to("noopapps"));
    let second = ManagerProcess::start(&dir, &ns, "rc-noop-2", &[]);
    second.wait_ready(Duration::from_secs(40)).await;
    let reconciles = "ruleplane_reconciles_total{rule=\"web-app-template\",kind=\"Reconciler\"}";
    eventually(Duration::from_secs(60), "100 reconciles by the new manager", || async {
        (second.metric(reconciles).await? >= 100.0).then_some(())
    })
    .await;
    let after = (writes_to("podtemplates"), writes_to("noopapps"));
    assert_eq!(
        after, before,
        "a converged parent costs no write, child or status (apiserver_request_total)"
    );
    assert_eq!(
        second.metric(applied).await.unwrap_or_default(),
        0.0,
        "nothing applied, nothing timed"
    );
}

#[tokio::test]
async fn namespaces_labelled_with_a_team_get_a_quota_and_a_limit_range() {
    let client = admin_client().await;
    let lease_ns = test_namespace(&client, "rc-decorator").await;
    let team = format!("team-{}", std::process::id());
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: team-namespaces }}
spec:
  for:
    apiVersion: v1
    kind: Namespace
    selector: {{ matchLabels: {{ team: {team} }} }}
  children:
    - id: quota
      template: |
        apiVersion: v1
        kind: ResourceQuota
        metadata: {{ name: team-quota, namespace: {{{{json metadata.name}}}} }}
        spec: {{ hard: {{ pods: "20", requests.cpu: "4" }} }}
    - id: limits
      template: |
        apiVersion: v1
        kind: LimitRange
        metadata: {{ name: team-limits, namespace: {{{{json metadata.name}}}} }}
        spec:
          limits: [ {{ type: Container, default: {{ cpu: 500m }} }} ]
"#
    );
    let dir = temp_dir("rc-decorator");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &lease_ns, "rc-decorator", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let labelled = test_namespace(&client, "rc-team-a").await;
    let unlabelled = test_namespace(&client, "rc-team-b").await;
    kubectl(&["label", "namespace", &labelled, &format!("team={team}")]);
    let quotas = |ns: &str| Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(client.clone(), ns);
    let quota = eventually(Duration::from_secs(20), "quota in the labelled namespace", || async {
        quotas(&labelled).get_opt("team-quota").await.ok().flatten()
    })
    .await;
    assert_eq!(
        quota.owner_references()[0].kind,
        "Namespace",
        "a cluster-scoped parent owns its children"
    );
    let limits: Api<k8s_openapi::api::core::v1::LimitRange> = Api::namespaced(client.clone(), &labelled);
    eventually(Duration::from_secs(10), "limit range", || async {
        limits.get_opt("team-limits").await.ok().flatten()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        quotas(&unlabelled).get_opt("team-quota").await.expect("get").is_none(),
        "only selected parents"
    );
    // A built-in parent's status belongs to its controller: nothing is written there.
    let namespace = kubectl(&["get", "namespace", &labelled, "-o", "json"]);
    assert!(!namespace.contains("\"conditions\""), "{namespace}");
}

#[tokio::test]
async fn a_child_dropped_from_the_rule_is_pruned_and_a_foreign_object_is_a_conflict_until_adopted() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-prune").await;
    let group = "rc3.example.com";
    let rule = |children: &str, adopt: bool| {
        format!(
            r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: shop.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: shop-config }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Shop }}
  adopt: {adopt}
  children:
{children}"#
        )
    };
    let config = |id: &str, name: &str| {
        format!(
            "    - id: {id}\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata: {{ name: {name} }}\n        data: {{ owner: {{{{json metadata.name}}}} }}\n"
        )
    };
    let dir = temp_dir("rc-prune");
    write(
        &dir,
        "rules.yaml",
        &rule(&(config("settings", "settings") + &config("extra", "extra")), false),
    );
    let manager = ManagerProcess::start(&dir, &ns, "rc-prune", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    // A ConfigMap named like a future child, created by someone else.
    let foreign = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "legacy" }, "data": { "mine": "yes" } }))
                .expect("cm"),
        )
        .await
        .expect("create a foreign ConfigMap");
    let shops = api_of(&client, group, "v1", "Shop", "shops", &ns);
    let shop: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Shop", "metadata": { "name": "corner" }
    }))
    .expect("a Shop");
    eventually(Duration::from_secs(40), "Shop created", || async {
        shops.create(&PostParams::default(), &shop).await.ok()
    })
    .await;
    eventually(Duration::from_secs(20), "both children", || async {
        maps.get_opt("extra").await.ok().flatten()?;
        maps.get_opt("settings").await.ok().flatten()
    })
    .await;

    // The rule drops `extra` and adds `legacy`, which exists but is not ours.
    write(
        &dir,
        "rules.yaml",
        &rule(&(config("settings", "settings") + &config("legacy", "legacy")), false),
    );
    eventually(Duration::from_secs(20), "extra pruned", || async {
        maps.get_opt("extra").await.ok()?.is_none().then_some(())
    })
    .await;
    let parent = eventually(Duration::from_secs(20), "Synced=False Conflict", || async {
        let shop = shops.get("corner").await.ok()?;
        let synced = condition(&shop, "Synced")?.clone();
        (synced["status"] == "False" && synced["reason"] == "Conflict").then_some(shop)
    })
    .await;
    assert!(
        condition(&parent, "Synced").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("adopt: true")
    );
    let legacy = maps.get("legacy").await.expect("legacy");
    assert_eq!(
        legacy.data.as_ref().unwrap()["mine"],
        "yes",
        "a foreign object is left alone"
    );
    assert_eq!(
        legacy.metadata.resource_version, foreign.metadata.resource_version,
        "not written at all (the create-only apply changed nothing)"
    );
    assert!(
        maps.get_opt("settings").await.expect("get").is_some(),
        "the rest is untouched"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let warned = eventually(Duration::from_secs(10), "a Conflict Warning", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("Conflict"))
    })
    .await;
    assert_eq!(warned.regarding.and_then(|r| r.name).as_deref(), Some("corner"));

    // With `adopt: true` the object is taken over.
    write(
        &dir,
        "rules.yaml",
        &rule(&(config("settings", "settings") + &config("legacy", "legacy")), true),
    );
    eventually(Duration::from_secs(20), "legacy adopted", || async {
        let legacy = maps.get("legacy").await.ok()?;
        (legacy.labels().get("ruleplane.dev/rule").map(String::as_str) == Some("shop-config")
            && legacy.data.as_ref()?.get("owner").map(String::as_str) == Some("corner"))
        .then_some(())
    })
    .await;
    eventually(Duration::from_secs(20), "Synced=True again", || async {
        let shop = shops.get("corner").await.ok()?;
        (condition(&shop, "Synced")?["status"] == "True").then_some(())
    })
    .await;
}

/// One parent whose template fails is reported (Synced=False, Warning) while the others converge.
#[tokio::test]
async fn a_failing_parent_is_reported_while_50_others_converge() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-failing").await;
    let group = "rc4.example.com";
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: greeting.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: greetings }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Greeting }}
  children:
    - id: text
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: {{{{json metadata.name}}}} }}
        data: {{ text: {{{{json spec.text}}}} }}
"#
    );
    let dir = temp_dir("rc-failing");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "rc-failing", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let greetings = api_of(&client, group, "v1", "Greeting", "greetings", &ns);
    let greeting = |name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "Greeting", "metadata": { "name": name }, "spec": spec
        }))
        .expect("a Greeting")
    };
    eventually(Duration::from_secs(40), "broken Greeting created", || async {
        greetings
            .create(&PostParams::default(), &greeting("broken", json!({})))
            .await
            .ok()
    })
    .await;
    for index in 0..50 {
        greetings
            .create(
                &PostParams::default(),
                &greeting(&format!("g-{index}"), json!({ "text": "hello" })),
            )
            .await
            .expect("create a Greeting");
    }
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    eventually(Duration::from_secs(60), "50 ConfigMaps", || async {
        let count = maps.list(&ListParams::default()).await.ok()?.items.len();
        (count >= 50).then_some(())
    })
    .await;
    let broken = eventually(Duration::from_secs(20), "broken reported", || async {
        let broken = greetings.get("broken").await.ok()?;
        (condition(&broken, "Synced")?["reason"] == "RenderError").then_some(broken)
    })
    .await;
    let message = condition(&broken, "Synced").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("missing field `spec.text`"), "{message}");
    assert!(maps.get_opt("broken").await.expect("get").is_none());
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually(
        Duration::from_secs(10),
        "a RenderError Warning on the parent",
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("RenderError")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken")
            })
        },
    )
    .await;
    // Fixing the parent is the change a permanent error waits for.
    merge_patch(&greetings, "broken", json!({ "spec": { "text": "fixed" } })).await;
    eventually(Duration::from_secs(10), "fixed parent converges", || async {
        maps.get_opt("broken").await.ok().flatten()
    })
    .await;
}

/// The web app of the docs: a ConfigMap, a Deployment and a Service per WebApp; an `endpoint` ConfigMap reads
/// the Service's assigned clusterIP (rendered once the Service is ready); the clusterIP is projected into the
/// WebApp's status; `includeWhen` adds and prunes a debug ConfigMap; a `retain` child survives being dropped.
#[tokio::test]
async fn a_web_app_with_a_child_that_reads_another_include_when_and_retain() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-webapp").await;
    let group = "rc5.example.com";
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: web-app.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: web-apps }}
spec:
  for: {{ apiVersion: {group}/v1, kind: WebApp }}
  children:
    - id: config
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-config" }}
        data: {{ greeting: {{{{json spec.greeting}}}} }}
    - id: deployment
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{ name: {{{{json metadata.name}}}} }}
        spec:
          replicas: {{{{spec.replicas}}}}
          selector: {{ matchLabels: {{ app: {{{{json metadata.name}}}} }} }}
          template:
            metadata: {{ labels: {{ app: {{{{json metadata.name}}}} }} }}
            spec:
              containers:
                - name: web
                  image: {{{{json spec.image}}}}
                  resources: {{ requests: {{ cpu: 100m, memory: 64Mi }} }}
    - id: service
      template: |
        apiVersion: v1
        kind: Service
        metadata: {{ name: {{{{json metadata.name}}}} }}
        spec:
          selector: {{ app: {{{{json metadata.name}}}} }}
          ports: [ {{ port: 80, targetPort: 8080 }} ]
      readyWhen: "{{.spec.clusterIP}}"
    - id: endpoint
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-endpoint" }}
        data: {{ url: "http://{{{{children.service.spec.clusterIP}}}}:80" }}
    - id: debug
      includeWhen: "{{.spec.debug}}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-debug" }}
        data: {{ level: verbose }}
    - id: audit
      retain: true
      includeWhen: "{{.spec.audit}}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-audit" }}
        data: {{ kept: "forever" }}
  status:
    clusterIP: "{{.children.service.spec.clusterIP}}"
"#
    );
    let dir = temp_dir("rc-webapp");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "rc-webapp", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let apps = api_of(&client, group, "v1", "WebApp", "webapps", &ns);
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "WebApp", "metadata": { "name": "shop" },
        "spec": { "greeting": "hi", "replicas": 2, "image": "nginx:1.27", "debug": true, "audit": true }
    }))
    .expect("a WebApp");
    eventually(Duration::from_secs(40), "WebApp created", || async {
        apps.create(&PostParams::default(), &app).await.ok()
    })
    .await;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    let endpoint = eventually(
        Duration::from_secs(20),
        "endpoint ConfigMap with the clusterIP",
        || async { maps.get_opt("shop-endpoint").await.ok().flatten() },
    )
    .await;
    let service = services.get("shop").await.expect("Service");
    let cluster_ip = service.spec.unwrap().cluster_ip.expect("a clusterIP");
    assert_eq!(endpoint.data.unwrap()["url"], format!("http://{cluster_ip}:80"));
    assert_eq!(
        deployments.get("shop").await.expect("Deployment").spec.replicas,
        Some(2)
    );
    let parent = eventually(Duration::from_secs(20), "clusterIP projected and Ready", || async {
        let app = apps.get("shop").await.ok()?;
        (app.data["status"]["clusterIP"] == cluster_ip.as_str() && condition(&app, "Ready")?["status"] == "True")
            .then_some(app)
    })
    .await;
    assert_eq!(
        condition(&parent, "Ready").unwrap()["message"],
        "all 6 children are ready"
    );
    maps.get("shop-debug").await.expect("debug ConfigMap while spec.debug");
    let audit = maps.get("shop-audit").await.expect("audit ConfigMap while spec.audit");
    assert!(
        audit.metadata.owner_references.is_none(),
        "a retained child has no owner reference"
    );

    // includeWhen false: the debug ConfigMap is pruned, the retained audit one released, not deleted.
    merge_patch(&apps, "shop", json!({ "spec": { "debug": false, "audit": false } })).await;
    eventually(Duration::from_secs(10), "debug pruned", || async {
        maps.get_opt("shop-debug").await.ok()?.is_none().then_some(())
    })
    .await;
    let released = eventually(Duration::from_secs(10), "audit released", || async {
        let audit = maps.get_opt("shop-audit").await.ok()??;
        (!audit.labels().contains_key("ruleplane.dev/parent-uid")).then_some(audit)
    })
    .await;
    assert_eq!(released.data.unwrap()["kept"], "forever");
    let parent = apps.get("shop").await.expect("WebApp");
    assert_eq!(
        condition(&parent, "Ready").unwrap()["status"],
        "True",
        "excluded children do not count"
    );

    // And back on: the debug ConfigMap is created again.
    merge_patch(&apps, "shop", json!({ "spec": { "debug": true } })).await;
    eventually(Duration::from_secs(10), "debug recreated", || async {
        maps.get_opt("shop-debug").await.ok().flatten()
    })
    .await;
}

/// A child in another namespace cannot be owned, so its parent gets the cleanup finalizer: deleting the parent
/// applies the `finalize` child, deletes the children and lets the parent go. Removing the rule removes the
/// finalizer from every parent and keeps the children.
#[tokio::test]
async fn deletion_runs_finalize_children_and_cleans_up_what_owner_references_cannot() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-finalize").await;
    let elsewhere = test_namespace(&client, "rc-finalize-mirror").await;
    let group = "rc6.example.com";
    let definition = format!(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: {{ name: team.{group} }}\n\
         spec:\n  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]\n"
    );
    let reconciler = format!(
        r#"---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: team-mirror }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Team }}
  children:
    - id: mirror
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-mirror", namespace: {elsewhere} }}
        data: {{ team: {{{{json metadata.name}}}} }}
  finalize:
    children:
      - id: goodbye
        template: |
          apiVersion: v1
          kind: ConfigMap
          metadata: {{ name: "{{{{metadata.name}}}}-goodbye" }}
          data: {{ farewell: {{{{json metadata.name}}}} }}
"#
    );
    let dir = temp_dir("rc-finalize");
    write(&dir, "rules.yaml", &(definition.clone() + &reconciler));
    let manager = ManagerProcess::start(&dir, &ns, "rc-finalize", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let teams = api_of(&client, group, "v1", "Team", "teams", &ns);
    let team = |name: &str| -> DynamicObject {
        serde_json::from_value(
            json!({ "apiVersion": format!("{group}/v1"), "kind": "Team", "metadata": { "name": name } }),
        )
        .expect("a Team")
    };
    eventually(Duration::from_secs(40), "Team alpha created", || async {
        teams.create(&PostParams::default(), &team("alpha")).await.ok()
    })
    .await;
    let mirrors: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &elsewhere);
    let local: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mirror = eventually(Duration::from_secs(20), "mirror in the other namespace", || async {
        mirrors.get_opt("alpha-mirror").await.ok().flatten()
    })
    .await;
    assert!(
        mirror.metadata.owner_references.is_none(),
        "no owner reference across namespaces"
    );
    let alpha = teams.get("alpha").await.expect("alpha");
    assert!(
        alpha.finalizers().contains(&cleanup_finalizer("team-mirror")),
        "{:?}",
        alpha.finalizers()
    );

    // The finalize child lives from the parent's deletion until the garbage collector follows its owner
    // reference to the parent that is gone: watched from before the deletion, so neither step is missed.
    let only_goodbye = "metadata.name=alpha-goodbye";
    let before = local
        .list_metadata(&ListParams::default().fields(only_goodbye))
        .await
        .expect("list alpha-goodbye");
    let mut goodbye_events = local
        .watch(
            &WatchParams::default().fields(only_goodbye).timeout(150),
            &before.metadata.resource_version.expect("list resourceVersion"),
        )
        .await
        .expect("watch alpha-goodbye")
        .boxed();
    teams
        .delete("alpha", &DeleteParams::default())
        .await
        .expect("delete alpha");
    eventually(Duration::from_secs(20), "alpha gone", || async {
        teams.get_opt("alpha").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        mirrors.get_opt("alpha-mirror").await.expect("get").is_none(),
        "the cross-namespace child was deleted"
    );
    // The garbage collector learns of a kind it does not watch yet (Team, new with this test) at its discovery
    // resync, every 30 s and not configurable, then retries the absent owner with backoff (about 40 s measured
    // alone on 2 cores): allow for both under load.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let (mut seen, mut goodbye) = (Vec::new(), None);
    loop {
        let event = tokio::time::timeout_at(deadline, goodbye_events.try_next())
            .await
            .unwrap_or_else(|_| panic!("alpha-goodbye not applied and then garbage-collected in 120 s; saw {seen:?}"))
            .expect("watch alpha-goodbye")
            .unwrap_or_else(|| panic!("the watch of alpha-goodbye ended; saw {seen:?}"));
        match event {
            WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                seen.push("applied");
                goodbye = Some(cm);
            }
            WatchEvent::Deleted(_) => break,
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch of alpha-goodbye: {e:?}; saw {seen:?}"),
        }
    }
    let goodbye: ConfigMap = goodbye.expect("the finalize child ran before it was deleted");
    assert_eq!(goodbye.data.unwrap()["farewell"], "alpha");
    assert_eq!(
        goodbye.metadata.owner_references.unwrap()[0].name,
        "alpha",
        "left to the garbage collector, which deleted it"
    );

    // Removing the rule: parents are not stuck, children are kept.
    teams
        .create(&PostParams::default(), &team("beta"))
        .await
        .expect("create beta");
    eventually(Duration::from_secs(20), "beta finalizer", || async {
        let beta = teams.get("beta").await.ok()?;
        beta.finalizers()
            .contains(&cleanup_finalizer("team-mirror"))
            .then_some(())
    })
    .await;
    write(&dir, "rules.yaml", &definition);
    eventually(
        Duration::from_secs(20),
        "beta finalizer removed with the rule",
        || async {
            let beta = teams.get("beta").await.ok()?;
            beta.finalizers().is_empty().then_some(())
        },
    )
    .await;
    assert!(
        mirrors.get_opt("beta-mirror").await.expect("get").is_some(),
        "children stay when a rule goes"
    );
    teams
        .delete("beta", &DeleteParams::default())
        .await
        .expect("delete beta");
    eventually(Duration::from_secs(10), "beta deleted without the rule", || async {
        teams.get_opt("beta").await.ok()?.is_none().then_some(())
    })
    .await;
}

/// A plane of its own for a test that stops the apiserver (the shared plane serves the other tests meanwhile).
struct PrivatePlane {
    dir: std::path::PathBuf,
    restarted: std::sync::Mutex<Option<std::process::Child>>,
}

impl PrivatePlane {
    fn start(name: &str) -> PrivatePlane {
        let dir = temp_dir(name);
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/control-plane/cluster.sh");
        let out = std::process::Command::new(&script)
            .args(["up", "--dir"])
            .arg(&dir)
            .args(["--owner-pid", &std::process::id().to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("run cluster.sh");
        assert!(out.status.success(), "the private control plane did not start");
        PrivatePlane {
            dir,
            restarted: std::sync::Mutex::new(None),
        }
    }

    fn kubeconfig(&self) -> std::path::PathBuf {
        self.dir.join("kubeconfig")
    }

    /// Kills kube-apiserver and returns how to start it again exactly as it was (same port, same etcd).
    fn kill_apiserver(&self) -> Vec<String> {
        let pid = std::fs::read_to_string(self.dir.join("kube-apiserver.pid")).expect("apiserver pid");
        let pid = pid.trim();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("apiserver command line");
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        std::process::Command::new("kill")
            .args(["-9", pid])
            .status()
            .expect("kill");
        args
    }

    fn restart_apiserver(&self, args: &[String]) {
        let log = std::fs::File::create(self.dir.join("kube-apiserver-restarted.log")).expect("log");
        let child = std::process::Command::new(&args[0])
            .args(&args[1..])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("restart kube-apiserver");
        std::fs::write(self.dir.join("kube-apiserver.pid"), child.id().to_string()).expect("pid file");
        *self.restarted.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
    }
}

impl Drop for PrivatePlane {
    fn drop(&mut self) {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/control-plane/cluster.sh");
        let _ = std::process::Command::new(script)
            .args(["down", "--dir"])
            .arg(&self.dir)
            .output();
        if let Some(mut child) = self.restarted.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test]
async fn the_manager_survives_an_apiserver_stopped_for_10_s_mid_convergence_and_converges() {
    let plane = PrivatePlane::start("rc-outage-plane");
    let client = crate::support::client_for(&plane.kubeconfig()).await;
    let ns = test_namespace(&client, "rc-outage").await;
    let group = "rc-outage.example.com";
    let dir = temp_dir("rc-outage");
    write(&dir, "rules.yaml", &crontab_rules(group));
    // A slow client (20 requests/s) keeps convergence under way when the apiserver stops.
    let slow = ["--kube-api-qps", "20", "--kube-api-burst", "5"];
    let manager = ManagerProcess::start_as(&plane.kubeconfig(), &dir, &ns, "rc-outage", &slow);
    manager.wait_ready(Duration::from_secs(60)).await;
    let crontabs = api_of(&client, group, "v1", "CronTab", "crontabs", &ns);
    eventually(Duration::from_secs(60), "the CronTab kind is served", || async {
        crontabs.list(&ListParams::default()).await.ok()
    })
    .await;
    let total = 60;
    for i in 0..total {
        crontabs
            .create(
                &PostParams::default(),
                &crontab(&format!("c-{i}"), group, "*/5 * * * *"),
            )
            .await
            .expect("create CronTab");
    }
    let cronjobs: Api<k8s_openapi::api::batch::v1::CronJob> = Api::namespaced(client.clone(), &ns);
    let count = || async { cronjobs.list(&ListParams::default()).await.map(|l| l.items.len()).ok() };
    let before = eventually(Duration::from_secs(60), "convergence under way", || async {
        count().await.filter(|n| *n >= 1)
    })
    .await;

    let args = plane.kill_apiserver();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        manager.pid() > 0 && std::path::Path::new(&format!("/proc/{}", manager.pid())).exists(),
        "the manager survived the outage"
    );
    plane.restart_apiserver(&args);

    let converged = Instant::now();
    eventually(
        Duration::from_secs(120),
        "every CronTab has its CronJob after the outage",
        || async { count().await.filter(|n| *n == total) },
    )
    .await;
    println!(
        "{before} of {total} CronJobs before the apiserver stopped for 10 s; all {total} {:.1} s after it came back",
        converged.elapsed().as_secs_f64()
    );
    // And it still reconciles: a hand-deleted child comes back.
    cronjobs
        .delete("c-0", &Default::default())
        .await
        .expect("delete a child");
    eventually(Duration::from_secs(30), "the deleted child is repaired", || async {
        cronjobs
            .get_opt("c-0")
            .await
            .ok()
            .flatten()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
    })
    .await;
    let (status, body) = manager.readyz().await.expect("readyz answers");
    assert_eq!(status, 200, "ready again after the outage: {body}");
}

/// Story 2's walkthrough as shipped in `examples/pod2.yaml`: each Pod2 runs as a Pod plus a settings ConfigMap, and
/// the Pod's phase, IP and readiness come back into the Pod2's status (conditions included: the example's schema
/// declares them, so the apiserver keeps them).
#[tokio::test]
async fn the_pod2_example_runs_a_pod_and_reports_its_phase_ip_and_readiness() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-pod2").await;
    let rules = temp_dir("rc-pod2");
    let example =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pod2.yaml"))
            .expect("examples/pod2.yaml");
    write(&rules, "pod2.yaml", &example);
    let manager = ManagerProcess::start(&rules, &ns, "rc-pod2", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let pod2s = api_of(&client, "samples.ruleplane.dev", "v1alpha1", "Pod2", "pod2s", &ns);
    let pod2: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samples.ruleplane.dev/v1alpha1", "kind": "Pod2",
        "metadata": { "name": "hello" },
        "spec": { "image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"], "env": { "GREETING": "hello" } }
    }))
    .unwrap();
    eventually(
        Duration::from_secs(40),
        "Pod2 created once its CRD is served",
        || async { pod2s.create(&PostParams::default(), &pod2).await.ok() },
    )
    .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
    let pod = eventually(Duration::from_secs(20), "Pod hello", || async {
        pods.get_opt("hello").await.ok().flatten()
    })
    .await;
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("busybox:1.36"));
    assert_eq!(
        container.command.as_deref(),
        Some(&["sh".to_string(), "-c".into(), "sleep 3600".into()][..])
    );
    let env = container.env.as_ref().unwrap();
    assert_eq!(
        (env[0].name.as_str(), env[0].value.as_deref()),
        ("GREETING", Some("hello"))
    );
    assert_eq!(pod.labels()["samples.ruleplane.dev/pod2"], "hello");
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let settings = eventually(Duration::from_secs(20), "settings ConfigMap", || async {
        configmaps.get_opt("hello-settings").await.ok().flatten()
    })
    .await;
    assert_eq!(settings.data.unwrap()["image"], "busybox:1.36");
    // No kubelet here: the Pod stays Pending, so the Pod2 is not Ready yet — and says so in a kept condition.
    eventually(Duration::from_secs(20), "Pod2 Ready=False, phase Pending", || async {
        let parent = pod2s.get("hello").await.ok()?;
        let ready = condition(&parent, "Ready")?;
        (ready["status"] == "False" && parent.data["status"]["phase"] == "Pending").then_some(())
    })
    .await;
    // What a kubelet would report once the container runs.
    pods.patch_status(
        "hello",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "phase": "Running", "podIP": "10.244.0.12",
            "conditions": [ { "type": "Ready", "status": "True" } ] } })),
    )
    .await
    .expect("pod status");
    let parent = eventually(Duration::from_secs(20), "Pod2 Ready with phase and IP", || async {
        let parent = pod2s.get("hello").await.ok()?;
        (condition(&parent, "Ready")?["status"] == "True").then_some(parent)
    })
    .await;
    assert_eq!(parent.data["status"]["phase"], "Running");
    assert_eq!(parent.data["status"]["podIP"], "10.244.0.12");
    assert_eq!(parent.data["status"]["observedGeneration"], 1);
    kubectl(&[
        "wait",
        "-n",
        &ns,
        "pod2s.samples.ruleplane.dev/hello",
        "--for=condition=Ready",
        "--timeout=5s",
    ]);
}

#[tokio::test]
async fn a_lookup_by_templated_name_keeps_only_what_parents_read_and_follows_its_changes() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-lookup").await;
    let rule = "lookup-by-name";
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: {rule} }}
spec:
  for:
    apiVersion: v1
    kind: ConfigMap
    namespace: {ns}
    selector: {{ matchLabels: {{ lookup-parent: "yes" }} }}
  lookups:
    settings: {{ apiVersion: v1, kind: ConfigMap, name: "{{{{metadata.name}}}}-settings", jsonPath: "{{.data}}" }}
  children:
    - id: out
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-out" }}
        data: {{ color: {{{{json (default lookups.settings.color "none")}}}} }}
"#
    );
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    // Objects of the looked-up kind nobody reads, 100 KiB each: they must not be kept.
    let filler = "x".repeat(100 * 1024);
    for index in 0..20 {
        create_config_map(
            &configmaps,
            &format!("unread-{index}"),
            json!({}),
            json!({ "blob": filler }),
        )
        .await;
    }
    create_config_map(&configmaps, "a-settings", json!({}), json!({ "color": "blue" })).await;
    create_config_map(&configmaps, "b-settings", json!({}), json!({ "color": "green" })).await;
    for parent in ["a", "b"] {
        create_config_map(&configmaps, parent, json!({ "lookup-parent": "yes" }), json!({})).await;
    }
    let dir = temp_dir("rc-lookup");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "rc-lookup", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let color = |name: &'static str| {
        let configmaps = configmaps.clone();
        async move {
            let out = configmaps.get_opt(&format!("{name}-out")).await.ok().flatten()?;
            out.data?.get("color").cloned()
        }
    };
    for (parent, expected) in [("a", "blue"), ("b", "green")] {
        eventually(Duration::from_secs(20), "child rendered from the lookup", || async {
            (color(parent).await.as_deref() == Some(expected)).then_some(())
        })
        .await;
    }
    let kept = format!("ruleplane_lookup_contents{{rule=\"{rule}\",kind=\"Reconciler\"}}");
    assert_eq!(
        manager.metric(&kept).await,
        Some(2.0),
        "only the two objects read are kept"
    );
    // The parents' watch holds the two selected ConfigMaps, not the namespace's 22 others.
    let parents = format!(
        "ruleplane_watch_objects{{api_version=\"v1\",kind=\"ConfigMap\",label_selector=\"lookup-parent=yes\",\
         field_selector=\"metadata.namespace={ns}\",content=\"objects\"}}"
    );
    assert_eq!(
        manager.metric(&parents).await,
        Some(2.0),
        "only selected parents cached"
    );

    // A change of a looked-up object reaches its reader.
    let merge = |data: Value| Patch::Merge(json!({ "data": data }));
    configmaps
        .patch("a-settings", &PatchParams::default(), &merge(json!({ "color": "red" })))
        .await
        .expect("patch settings");
    eventually(Duration::from_secs(10), "lookup change applied", || async {
        (color("a").await.as_deref() == Some("red")).then_some(())
    })
    .await;
    // A parent that goes no longer keeps what it read; a looked-up object that goes reads as absent.
    configmaps
        .delete("b", &DeleteParams::default())
        .await
        .expect("delete parent b");
    eventually(Duration::from_secs(10), "b's settings dropped", || async {
        (manager.metric(&kept).await == Some(1.0)).then_some(())
    })
    .await;
    configmaps
        .delete("a-settings", &DeleteParams::default())
        .await
        .expect("delete a's settings");
    eventually(Duration::from_secs(10), "lookup gone: the default", || async {
        (color("a").await.as_deref() == Some("none")).then_some(())
    })
    .await;
    assert_eq!(manager.metric(&kept).await, Some(0.0));
    // And back: a looked-up object created later is read.
    create_config_map(&configmaps, "a-settings", json!({}), json!({ "color": "teal" })).await;
    eventually(Duration::from_secs(10), "lookup created: read", || async {
        (color("a").await.as_deref() == Some("teal")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_parent_that_leaves_the_selection_loses_the_finalizer_and_keeps_its_children() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-deselect").await;
    let elsewhere = test_namespace(&client, "rc-deselect-mirror").await;
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: deselect-mirror }}
spec:
  for:
    apiVersion: v1
    kind: ConfigMap
    namespace: {ns}
    selector: {{ matchLabels: {{ mirrored: "yes" }} }}
  children:
    - id: mirror
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-mirror", namespace: {elsewhere} }}
        data: {{ from: {{{{json metadata.name}}}} }}
"#
    );
    let dir = temp_dir("rc-deselect");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "rc-deselect", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mirrors: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &elsewhere);
    create_config_map(&configmaps, "team", json!({"mirrored": "yes"}), json!({})).await;
    // A child in another namespace: no owner reference can clean it up, so the parent gets the finalizer.
    eventually(Duration::from_secs(20), "mirror and finalizer", || async {
        mirrors.get_opt("team-mirror").await.ok().flatten()?;
        has_cleanup_finalizer(&configmaps, "team", "deselect-mirror")
            .await?
            .then_some(())
    })
    .await;
    let unlabel = Patch::Merge(json!({"metadata": {"labels": {"mirrored": null}}}));
    configmaps
        .patch("team", &PatchParams::default(), &unlabel)
        .await
        .expect("remove the label");
    eventually(
        Duration::from_secs(10),
        "finalizer removed from the deselected parent",
        || async { (!has_cleanup_finalizer(&configmaps, "team", "deselect-mirror").await?).then_some(()) },
    )
    .await;
    delete_until_gone(&configmaps, "team", "the parent is gone, not stuck Terminating").await;
    assert!(
        mirrors.get_opt("team-mirror").await.expect("get").is_some(),
        "its child stays: nothing is deleted implicitly"
    );
}

#[tokio::test]
async fn two_rules_on_a_parent_each_have_their_own_finalizer_and_removing_one_keeps_the_others() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-two-rules").await;
    let elsewhere = test_namespace(&client, "rc-two-rules-mirror").await;
    let rule = |name: &str| {
        format!(
            r#"---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: {name} }}
spec:
  for:
    apiVersion: v1
    kind: ConfigMap
    namespace: {ns}
    selector: {{ matchLabels: {{ two-rules: "yes" }} }}
  children:
    - id: mirror
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-{name}", namespace: {elsewhere} }}
        data: {{ from: {name} }}
"#
        )
    };
    let dir = temp_dir("rc-two-rules");
    write(&dir, "rules.yaml", &(rule("first") + &rule("second")));
    let manager = ManagerProcess::start(&dir, &ns, "rc-two-rules", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mirrors: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &elsewhere);
    create_config_map(&configmaps, "p", json!({"two-rules": "yes"}), json!({})).await;
    eventually(Duration::from_secs(20), "both mirrors and the finalizer", || async {
        mirrors.get_opt("p-first").await.ok().flatten()?;
        mirrors.get_opt("p-second").await.ok().flatten()?;
        let both = has_cleanup_finalizer(&configmaps, "p", "first").await?
            && has_cleanup_finalizer(&configmaps, "p", "second").await?;
        both.then_some(())
    })
    .await;
    write(&dir, "rules.yaml", &rule("second"));
    eventually(
        Duration::from_secs(20),
        "the first rule's finalizer released",
        || async { (!has_cleanup_finalizer(&configmaps, "p", "first").await?).then_some(()) },
    )
    .await;
    assert_eq!(
        has_cleanup_finalizer(&configmaps, "p", "second").await,
        Some(true),
        "the second rule's own finalizer stays: its cross-namespace child must go with the parent"
    );
    delete_until_gone(&configmaps, "p", "the parent finalized by the second rule").await;
    assert!(
        mirrors.get_opt("p-second").await.expect("get").is_none(),
        "the remaining rule deleted its child"
    );
    assert!(
        mirrors.get_opt("p-first").await.expect("get").is_some(),
        "the removed rule's child stays"
    );
}

/// A built-in parent that exists before the manager starts arrives in the watch's first list, whose items carry no
/// apiVersion/kind: its child still gets the owner reference at once, the parent no finalizer, and the child one
/// write (it used to get the finalizer, a child without an owner, then two more applies to mend both).
#[tokio::test]
async fn a_built_in_parent_listed_at_start_owns_its_child_and_gets_no_finalizer() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-listed").await;
    let rules = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: listed-copy }
spec:
  for: { apiVersion: v1, kind: ConfigMap, selector: { matchLabels: { copied: "yes" } } }
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-copy" }
        data: { from: {{json metadata.name}} }
"#;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_config_map(&configmaps, "listed", json!({"copied": "yes"}), json!({})).await;
    let dir = temp_dir("rc-listed");
    write(&dir, "rules.yaml", rules);
    let manager = ManagerProcess::start(&dir, &ns, "rc-listed", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let copy = eventually(Duration::from_secs(20), "the child", || async {
        configmaps.get_opt("listed-copy").await.ok().flatten()
    })
    .await;
    let parent = configmaps.get("listed").await.expect("parent");
    let owners = copy.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].api_version.as_str()),
        ("ConfigMap", "v1")
    );
    assert_eq!(Some(&owners[0].uid), parent.metadata.uid.as_ref());
    // Settled: no later write mends anything.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let parent = configmaps.get("listed").await.expect("parent");
    assert!(parent.finalizers().is_empty(), "{:?}", parent.finalizers());
    let settled = configmaps.get("listed-copy").await.expect("child");
    assert_eq!(
        settled.resource_version(),
        copy.resource_version(),
        "the child was written once"
    );
}

/// A child in its parent's namespace carries an owner reference and nothing else cleans it up: with the manager
/// stopped, deleting the parent still deletes the child, through kube-controller-manager's garbage collector.
#[tokio::test]
async fn the_garbage_collector_deletes_a_child_with_its_parent_while_the_manager_is_stopped() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-gc").await;
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: gc-copy }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ gc-parent: "yes" }} }} }}
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-copy" }}
        data: {{ from: {{{{json metadata.name}}}} }}
"#
    );
    let dir = temp_dir("rc-gc");
    write(&dir, "rules.yaml", &rules);
    let mut manager = ManagerProcess::start(&dir, &ns, "rc-gc", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_config_map(&configmaps, "parent", json!({"gc-parent": "yes"}), json!({})).await;
    let child = eventually(Duration::from_secs(20), "the child", || async {
        configmaps.get_opt("parent-copy").await.ok().flatten()
    })
    .await;
    let parent = configmaps.get("parent").await.expect("parent");
    let owners = child.owner_references();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(Some(&owners[0].uid), parent.metadata.uid.as_ref());
    assert!(
        parent.finalizers().is_empty(),
        "an owned child needs no cleanup finalizer: {:?}",
        parent.finalizers()
    );

    let status = manager.sigterm();
    assert!(status.success(), "SIGTERM must exit 0, got {status}");
    configmaps
        .delete("parent", &DeleteParams::default())
        .await
        .expect("delete the parent");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let last = match configmaps.get_opt("parent-copy").await {
            Ok(None) => break,
            Ok(Some(child)) => format!(
                "still there, owner references {:?}, deletionTimestamp {:?}",
                child.metadata.owner_references, child.metadata.deletion_timestamp
            ),
            Err(e) => format!("cannot read it: {e}"),
        };
        assert!(
            Instant::now() < deadline,
            "the garbage collector did not delete the child within 60 s of its parent; last seen: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        configmaps.get_opt("parent").await.expect("get parent").is_none(),
        "the parent is gone too"
    );
}

/// Whether a ConfigMap carries `rule`'s cleanup finalizer (`None`: it does not exist).
async fn has_cleanup_finalizer(
    configmaps: &Api<k8s_openapi::api::core::v1::ConfigMap>,
    name: &str,
    rule: &str,
) -> Option<bool> {
    let object = configmaps.get_opt(name).await.ok().flatten()?;
    Some(object.finalizers().contains(&cleanup_finalizer(rule)))
}

/// Deletes a ConfigMap and waits until it is gone, not stuck Terminating.
async fn delete_until_gone(configmaps: &Api<k8s_openapi::api::core::v1::ConfigMap>, name: &str, what: &str) {
    configmaps.delete(name, &DeleteParams::default()).await.expect("delete");
    eventually(Duration::from_secs(20), what, || async {
        configmaps.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// A ResourceDefinition declares a namespaced Widget, but a CRD of that name installed by someone else serves a
/// cluster-scoped one: the Reconciler on Widgets does not send requests shaped for a kind that is not there; it
/// waits, degraded, and says why (the ResourceDefinition rule reports the conflict itself).
#[tokio::test]
async fn a_reconciler_on_a_declared_kind_served_otherwise_by_a_foreign_crd_waits_and_says_why() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-foreign").await;
    let crds = crate::support::create_foreign_crd(&client, "foreign-scope.test", "Widget", "widgets", "Cluster").await;
    let rules = temp_dir("rc-foreign");
    write(
        &rules,
        "widgets.yaml",
        "apiVersion: ruleplane.dev/v1alpha1\nkind: ResourceDefinition\nmetadata: { name: widget.foreign-scope.test }\n\
         spec: { versions: [ { name: v1 } ] }\n---\n\
         apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: widget-config }\nspec:\n  \
         for: { apiVersion: foreign-scope.test/v1, kind: Widget }\n  children:\n    \
         - id: config\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        \
         metadata: { name: \"{{metadata.name}}-config\" }\n",
    );
    let manager = ManagerProcess::start(&rules, &ns, "rc-foreign", &[]);
    // Both workers report on their own first attempts, in either order: wait for both before reading the text.
    let (_, body) = eventually(Duration::from_secs(40), "both rules say why they wait", || async {
        manager.readyz().await.filter(|(_, b)| {
            b.contains("rule widget-config (Reconciler): degraded")
                && b.contains("rule widget.foreign-scope.test (ResourceDefinition): degraded")
        })
    })
    .await;
    assert!(
        body.contains(
            "CRD widgets.foreign-scope.test serves kind Widget (Cluster), not Widget (Namespaced) as declared"
        ),
        "{body}"
    );
    assert!(
        body.contains("CustomResourceDefinition widgets.foreign-scope.test exists and is not managed by ruleplane"),
        "the conflict is reported on the ResourceDefinition rule too:\n{body}"
    );
    crds.delete("widgets.foreign-scope.test", &Default::default())
        .await
        .ok();
}

#[tokio::test]
async fn a_collection_renders_a_config_map_per_item_and_an_item_removed_is_pruned() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-collection").await;
    let group = "rc-collection.example.com";
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: shop.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: shop-zones }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Shop }}
  children:
    - id: zones
      forEach:
        - zone: "{{.spec.zones}}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-{{{{zone}}}}" }}
        data: {{ zone: "{{{{zone}}}}", position: "{{{{zone_index}}}}" }}
  status:
    zones: "{{.children.zones[*].metadata.name}}"
"#
    );
    let dir = temp_dir("rc-collection");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "rc-collection", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let shops = api_of(&client, group, "v1", "Shop", "shops", &ns);
    let shop: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Shop", "metadata": { "name": "corner" },
        "spec": { "zones": ["a", "b", "c"] }
    }))
    .expect("a Shop");
    eventually(Duration::from_secs(40), "Shop created", || async {
        shops.create(&PostParams::default(), &shop).await.ok()
    })
    .await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let names = || async {
        let list = maps
            .list(&ListParams::default().labels("ruleplane.dev/rule=shop-zones"))
            .await
            .ok()?;
        let mut names: Vec<String> = list.items.iter().map(|cm| cm.name_any()).collect();
        names.sort();
        Some(names)
    };
    eventually(Duration::from_secs(30), "a ConfigMap per zone", || async {
        (names().await? == ["corner-a", "corner-b", "corner-c"]).then_some(())
    })
    .await;
    eventually(Duration::from_secs(30), "the zones in the Shop's status", || async {
        let shop = shops.get("corner").await.ok()?;
        (shop.data["status"]["zones"] == json!(["corner-a", "corner-b", "corner-c"])).then_some(())
    })
    .await;
    merge_patch(&shops, "corner", json!({ "spec": { "zones": ["c", "a"] } })).await;
    let now = eventually(Duration::from_secs(30), "zone b pruned", || async {
        let now = names().await?;
        (now == ["corner-a", "corner-c"]).then_some(now)
    })
    .await;
    assert_eq!(now, ["corner-a", "corner-c"]);
    let c = maps.get("corner-c").await.expect("corner-c");
    assert_eq!(
        c.data.unwrap_or_default().get("position").map(String::as_str),
        Some("0"),
        "reordered: c is first now"
    );
    eventually(Duration::from_secs(30), "Ready with the remaining zones", || async {
        let shop = shops.get("corner").await.ok()?;
        let ready = condition(&shop, "Ready")?["status"] == "True";
        (ready && shop.data["status"]["zones"] == json!(["corner-c", "corner-a"])).then_some(())
    })
    .await;
}

/// A Migration kind whose Reconciler runs a Job with the Migration's image: `recreate` on the Job or not.
fn migration_rules(group: &str, recreate: bool) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: migration.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: migrations }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Migration }}
  children:
    - id: job
      recreate: {recreate}
      template: |
        apiVersion: batch/v1
        kind: Job
        metadata: {{ name: "{{{{metadata.name}}}}-migrate" }}
        spec:
          backoffLimit: 0
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: migrate
                  image: "{{{{spec.image}}}}"
"#
    )
}

/// Starts a manager on `migration_rules`, creates Migration `schema` with `image` and waits for its Job; answers
/// the Migrations' API, the Jobs' API, the Job's UID and the manager (stopped when dropped).
async fn start_migration(
    client: &Client,
    ns: &str,
    group: &str,
    recreate: bool,
) -> (
    Api<DynamicObject>,
    Api<k8s_openapi::api::batch::v1::Job>,
    String,
    ManagerProcess,
) {
    let dir = temp_dir(group);
    write(&dir, "rules.yaml", &migration_rules(group, recreate));
    let manager = ManagerProcess::start(&dir, ns, group, &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let migrations = api_of(client, group, "v1", "Migration", "migrations", ns);
    let migration: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Migration", "metadata": { "name": "schema" },
        "spec": { "image": "busybox:1.36" }
    }))
    .expect("a Migration");
    eventually(Duration::from_secs(40), "Migration created", || async {
        migrations.create(&PostParams::default(), &migration).await.ok()
    })
    .await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), ns);
    let uid = eventually(Duration::from_secs(30), "the Job", || async {
        jobs.get_opt("schema-migrate").await.ok().flatten()?.uid()
    })
    .await;
    (migrations, jobs, uid, manager)
}

fn job_image(job: &k8s_openapi::api::batch::v1::Job) -> Option<String> {
    job.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

#[tokio::test]
async fn a_job_child_with_recreate_whose_template_changes_is_deleted_and_created_again() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-recreate").await;
    let group = "rc-recreate.example.com";
    let (migrations, jobs, first_uid, _manager) = start_migration(&client, &ns, group, true).await;
    merge_patch(&migrations, "schema", json!({ "spec": { "image": "busybox:1.37" } })).await;
    let job = eventually(Duration::from_secs(40), "a new Job with the new image", || async {
        let job = jobs.get_opt("schema-migrate").await.ok().flatten()?;
        (job.uid()? != first_uid && job_image(&job)? == "busybox:1.37").then_some(job)
    })
    .await;
    assert_ne!(job.uid(), Some(first_uid));
    eventually(Duration::from_secs(30), "the Migration Synced", || async {
        let migration = migrations.get("schema").await.ok()?;
        (condition(&migration, "Synced")?["status"] == "True").then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually(
        Duration::from_secs(30),
        "a Recreated Event on the Migration",
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|event| event.reason.as_deref() == Some("Recreated"))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_job_child_without_recreate_whose_template_changes_is_reported_and_left_alone() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-immutable").await;
    let group = "rc-immutable.example.com";
    let (migrations, jobs, first_uid, _manager) = start_migration(&client, &ns, group, false).await;
    merge_patch(&migrations, "schema", json!({ "spec": { "image": "busybox:1.37" } })).await;
    let synced = eventually(Duration::from_secs(40), "Synced=False, immutable", || async {
        let migration = migrations.get("schema").await.ok()?;
        let synced = condition(&migration, "Synced")?.clone();
        (synced["status"] == "False" && synced["reason"] == "ApplyRejected").then_some(synced)
    })
    .await;
    let message = synced["message"].as_str().unwrap_or_default();
    assert!(message.contains("field is immutable"), "{message}");
    assert!(message.contains("recreate: true"), "{message}");
    let job = jobs.get("schema-migrate").await.expect("the Job is still there");
    assert_eq!(job.uid(), Some(first_uid), "the same Job");
    assert_eq!(job_image(&job).as_deref(), Some("busybox:1.36"), "untouched");
}

#[tokio::test]
async fn a_status_count_follows_the_ready_items_of_a_collection() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-ready-count").await;
    let group = "rc-ready-count.example.com";
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: shop.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: shop-zones }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Shop }}
  children:
    - id: zones
      forEach:
        - zone: "{{.spec.zones}}"
      readyWhen: "{{.metadata.annotations.approved}}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-{{{{zone}}}}" }}
  status:
    kind: {{ value: zones }}
    readyZones: {{ template: "{{{{ready.zones}}}}" }}
    summary: {{ template: "{{{{ready.zones}}}}/{{{{len children.zones}}}} zones ready" }}
"#
    );
    let dir = temp_dir("rc-ready-count");
    write(&dir, "rules.yaml", &rules);
    let _manager = ManagerProcess::start(&dir, &ns, "rc-ready-count", &[]);
    let shops = api_of(&client, group, "v1", "Shop", "shops", &ns);
    let shop: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Shop", "metadata": { "name": "corner" },
        "spec": { "zones": ["a", "b", "c"] }
    }))
    .expect("a Shop");
    eventually(Duration::from_secs(40), "Shop created", || async {
        shops.create(&PostParams::default(), &shop).await.ok()
    })
    .await;
    let status_is = |ready: u64, summary: &'static str| {
        let shops = shops.clone();
        async move {
            let what = format!("status readyZones {ready}, `{summary}`");
            eventually(Duration::from_secs(30), &what, || async {
                let shop = shops.get("corner").await.ok()?;
                let status = &shop.data["status"];
                (status["readyZones"] == json!(ready) && status["summary"] == summary && status["kind"] == "zones")
                    .then_some(())
            })
            .await;
        }
    };
    status_is(0, "0/3 zones ready").await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for (name, ready) in [("corner-a", 1), ("corner-c", 2)] {
        merge_patch(
            &maps,
            name,
            json!({ "metadata": { "annotations": { "approved": "yes" } } }),
        )
        .await;
        status_is(
            ready,
            if ready == 1 {
                "1/3 zones ready"
            } else {
                "2/3 zones ready"
            },
        )
        .await;
    }
    // An item removed leaves the count and the list.
    merge_patch(&shops, "corner", json!({ "spec": { "zones": ["a", "b"] } })).await;
    status_is(1, "1/2 zones ready").await;
}

#[tokio::test]
async fn a_childs_own_adopt_takes_over_its_object_while_the_rules_default_refuses_another() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rc-child-adopt").await;
    let group = "rc-child-adopt.example.com";
    let child = |id: &str, adopt: &str| {
        format!(
            "    - id: {id}\n{adopt}      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        \
             metadata: {{ name: {id} }}\n        data: {{ owner: {{{{json metadata.name}}}} }}\n"
        )
    };
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: shop.{group} }}
spec:
  versions: [ {{ name: v1, subresources: {{ status: {{}} }} }} ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: shop-config }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Shop }}
  children:
{}{}"#,
        child("legacy", "      adopt: true\n"),
        child("foreign", "")
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // Two ConfigMaps named like the children, created by someone else.
    for name in ["legacy", "foreign"] {
        let map =
            serde_json::from_value(json!({ "metadata": { "name": name }, "data": { "mine": "yes" } })).expect("cm");
        maps.create(&PostParams::default(), &map)
            .await
            .expect("create a foreign ConfigMap");
    }
    let dir = temp_dir("rc-child-adopt");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "rc-child-adopt", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let shops = api_of(&client, group, "v1", "Shop", "shops", &ns);
    let shop: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Shop", "metadata": { "name": "corner" }
    }))
    .expect("a Shop");
    eventually(Duration::from_secs(40), "Shop created", || async {
        shops.create(&PostParams::default(), &shop).await.ok()
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "legacy adopted (the child's adopt)",
        || async {
            let legacy = maps.get_opt("legacy").await.ok().flatten()?;
            let data = legacy.data.unwrap_or_default();
            (data.get("owner").map(String::as_str) == Some("corner")).then_some(())
        },
    )
    .await;
    let synced = eventually(Duration::from_secs(30), "Synced=False Conflict on foreign", || async {
        let shop = shops.get("corner").await.ok()?;
        let synced = condition(&shop, "Synced")?.clone();
        (synced["status"] == "False" && synced["reason"] == "Conflict").then_some(synced)
    })
    .await;
    assert!(
        synced["message"].as_str().unwrap_or_default().contains("foreign"),
        "{synced}"
    );
    let foreign = maps.get("foreign").await.expect("foreign is still there");
    assert_eq!(
        foreign.data.unwrap_or_default().get("owner"),
        None,
        "the rule's default (no adopt) leaves it alone"
    );
}
