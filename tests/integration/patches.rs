//! Fields on objects a rule does not own (`patches`), fields handed to other controllers (`handOver`) and fights
//! over a child's field, on a real apiserver with kube-controller-manager's HPA controller.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{
    admin_client, control_plane, eventually, eventually_seen, merge_patch, test_namespace, write_rule_file as write,
};

/// `ruleplane diff` of the rules in `dir`: its report.
fn ruleplane_diff(dir: &std::path::Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ruleplane"))
        .args(["diff", "--rules"])
        .arg(dir)
        .arg("--kubeconfig")
        .arg(&control_plane().kubeconfig)
        .env_remove("RULEPLANE_RULES")
        .output()
        .expect("run ruleplane diff");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A rule that only exists so removing another leaves the rule set non-empty.
fn bystander(ns: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: bystander-{ns} }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ never: "yes" }} }} }}
  children:
    - id: note
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-note" }}
"#
    )
}

/// Labels the Pods of the parent's app with its team; a second entry names a Pod that never exists.
fn label_pods(ns: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: label-pods }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ app-team: "yes" }} }} }}
  children:
    - id: note
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-note" }}
  patches:
    - id: team
      selector: {{ matchLabels: {{ app: "{{{{data.app}}}}" }} }}
      template: |
        apiVersion: v1
        kind: Pod
        metadata:
          labels: {{ team: "{{{{data.team}}}}" }}
    - id: missing
      name: "{{{{data.app}}}}-missing"
      template: |
        apiVersion: v1
        kind: Pod
        metadata:
          labels: {{ team: "{{{{data.team}}}}" }}
"#
    )
}

/// A Pod of `app` that stays Pending (no kubelet), created by the test with an `owner` label of its own. Retried
/// while the namespace's default ServiceAccount is not there yet.
async fn create_pod(pods: &Api<Pod>, name: &str, app: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app, "owner": "test"}},
        "spec": {"containers": [{"name": "main", "image": "pause:3.10"}]}
    }))
    .expect("a Pod");
    eventually_seen(Duration::from_secs(30), "the Pod created", || async {
        pods.create(&PostParams::default(), &pod)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

async fn labels_of(pods: &Api<Pod>, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
    Some(pods.get_opt(name).await.ok()??.labels().clone())
}

async fn create_parent(parents: &Api<ConfigMap>, name: &str, app: &str, team: &str) {
    let parent: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app-team": "yes"}},
        "data": {"app": app, "team": team}
    }))
    .expect("a ConfigMap");
    parents
        .create(&PostParams::default(), &parent)
        .await
        .expect("create the parent");
}

/// Waits until every Pod of `names` carries `team` (`Some`) or no `team` label (`None`), and still its own `owner`.
async fn await_team(pods: &Api<Pod>, names: &[&str], team: Option<&str>, what: &str) {
    eventually_seen(Duration::from_secs(30), what, || async {
        for name in names {
            let labels = labels_of(pods, name).await.ok_or(format!("{name} not found"))?;
            if labels.get("team").map(String::as_str) != team || labels.get("owner").map(String::as_str) != Some("test")
            {
                return Err(format!("{name}: {labels:?}"));
            }
        }
        Ok(())
    })
    .await;
}

fn managers(object: &impl ResourceExt) -> Vec<String> {
    object
        .managed_fields()
        .iter()
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

#[tokio::test]
async fn a_patch_labels_the_pods_of_an_app_and_releases_the_label_when_the_parent_its_selection_the_entry_or_the_rule_goes()
 {
    let client = admin_client().await;
    let ns = test_namespace(&client, "patch-pods").await;
    let dir = temp_dir("patch-pods");
    write(&dir, "bystander.yaml", &bystander(&ns));
    write(&dir, "label-pods.yaml", &label_pods(&ns));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let parents: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_pod(&pods, "web-0", "web").await;
    create_pod(&pods, "db-0", "db").await;
    create_parent(&parents, "web", "web", "blue").await;
    // Before any manager runs, `ruleplane diff` says what the patch would set, with the worker's own plan.
    let before = ruleplane_diff(&dir);
    assert!(
        before.contains(&format!("~ patch team Pod {ns}/web-0")) && before.contains("+    team: blue"),
        "{before}"
    );
    assert!(!before.contains("db-0"), "another app's Pod is not selected: {before}");
    let manager = ManagerProcess::start(&dir, &ns, "patch-pods", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    await_team(&pods, &["web-0"], Some("blue"), "web-0 labelled").await;
    let after = ruleplane_diff(&dir);
    assert!(!after.contains("~ patch"), "a converged patch is no change: {after}");
    let uid = parents.get("web").await.expect("parent").uid().unwrap_or_default();
    let web_0 = pods.get("web-0").await.expect("web-0");
    assert!(
        managers(&web_0).contains(&format!("ruleplane-patch/label-pods/team/{uid}")),
        "the label is set under the parent's own field manager: {:?}",
        managers(&web_0)
    );

    // A Pod of the app created later is labelled too; another app's is not; a hand edit is repaired.
    create_pod(&pods, "web-1", "web").await;
    await_team(&pods, &["web-0", "web-1"], Some("blue"), "web-1 labelled").await;
    merge_patch(&pods, "web-0", json!({"metadata": {"labels": {"team": "red"}}})).await;
    await_team(&pods, &["web-0"], Some("blue"), "the hand edit repaired").await;
    assert_eq!(
        labels_of(&pods, "db-0").await.and_then(|l| l.get("team").cloned()),
        None
    );
    // The entry naming a Pod that does not exist never creates it.
    assert!(pods.get_opt("web-missing").await.expect("get").is_none());

    // The parent goes: its fields are released (the Pods' own labels stay), and its deletion completes.
    parents
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete parent");
    await_team(&pods, &["web-0", "web-1"], None, "the label released with the parent").await;
    eventually(Duration::from_secs(20), "the parent gone", || async {
        parents.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    let web_0 = pods.get("web-0").await.expect("web-0");
    assert!(
        !managers(&web_0).iter().any(|m| m.starts_with("ruleplane-patch/")),
        "no patch manager left: {:?}",
        managers(&web_0)
    );

    // Again; then the entry dropped from the rule (hot reload): released; back; then the rule file removed: released.
    create_parent(&parents, "web", "web", "green").await;
    await_team(&pods, &["web-0", "web-1"], Some("green"), "labelled again").await;
    let without_team = label_pods(&ns).replace(
        "    - id: team\n      selector: { matchLabels: { app: \"{{data.app}}\" } }\n",
        "    - id: gone\n      selector: { matchLabels: { app: other } }\n",
    );
    assert_ne!(without_team, label_pods(&ns), "the fixture's `team` entry replaced");
    write(&dir, "label-pods.yaml", &without_team);
    await_team(&pods, &["web-0", "web-1"], None, "the label released with its entry").await;
    write(&dir, "label-pods.yaml", &label_pods(&ns));
    await_team(&pods, &["web-0", "web-1"], Some("green"), "labelled once more").await;
    // The parent leaves the rule's selection: released; selected again: labelled.
    let selected =
        |yes: bool| Patch::Merge(json!({"metadata": {"labels": {"app-team": if yes { "yes" } else { "no" }}}}));
    parents
        .patch("web", &PatchParams::default(), &selected(false))
        .await
        .expect("deselect");
    await_team(
        &pods,
        &["web-0", "web-1"],
        None,
        "the label released with the parent's selection",
    )
    .await;
    parents
        .patch("web", &PatchParams::default(), &selected(true))
        .await
        .expect("select again");
    await_team(&pods, &["web-0", "web-1"], Some("green"), "labelled on selection").await;
    std::fs::remove_file(dir.join("label-pods.yaml")).expect("remove the rule file");
    await_team(&pods, &["web-0", "web-1"], None, "the label released with the rule").await;
    assert!(pods.get_opt("web-missing").await.expect("get").is_none());
}

/// A rule with patches and no child: it only labels the Pods of the parent's app.
fn patches_only(ns: &str) -> String {
    let rule = label_pods(ns).replace("label-pods", "label-only");
    let start = rule.find("  children:").expect("children");
    let end = rule.find("  patches:").expect("patches");
    format!("{}{}", &rule[..start], &rule[end..])
}

#[tokio::test]
async fn a_rule_with_patches_only_labels_the_pods_and_releases_them_with_the_parent() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "patch-only").await;
    let dir = temp_dir("patch-only");
    write(&dir, "label-only.yaml", &patches_only(&ns));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let parents: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_pod(&pods, "web-0", "web").await;
    create_parent(&parents, "web", "web", "green").await;
    let before = ruleplane_diff(&dir);
    assert!(before.contains(&format!("~ patch team Pod {ns}/web-0")), "{before}");
    let manager = ManagerProcess::start(&dir, &ns, "patch-only", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    await_team(
        &pods,
        &["web-0"],
        Some("green"),
        "web-0 labelled by a rule without children",
    )
    .await;
    let children = ListParams::default().labels("ruleplane.dev/rule=label-only");
    let owned = parents.list(&children).await.expect("list ConfigMaps");
    assert!(owned.items.is_empty(), "no child is created: {:?}", owned.items.len());
    parents
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete parent");
    await_team(&pods, &["web-0"], None, "the label released with the parent").await;
    eventually(Duration::from_secs(20), "the parent gone", || async {
        parents.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    drop(manager);
}

/// A Deployment whose replicas an HPA (minReplicas 3) takes over, and the HPA.
fn scaled_app(ns: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: scaled-app }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ scaled: "yes" }} }} }}
  children:
    - id: app
      handOver: [spec.replicas]
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: "{{{{metadata.name}}}}"
          annotations: {{ version: "{{{{data.version}}}}" }}
        spec:
          replicas: 1
          selector: {{ matchLabels: {{ app: "{{{{metadata.name}}}}" }} }}
          template:
            metadata: {{ labels: {{ app: "{{{{metadata.name}}}}" }} }}
            spec: {{ containers: [ {{ name: main, image: pause:3.10 }} ] }}
    - id: autoscaler
      template: |
        apiVersion: autoscaling/v2
        kind: HorizontalPodAutoscaler
        metadata: {{ name: "{{{{metadata.name}}}}" }}
        spec:
          scaleTargetRef: {{ apiVersion: apps/v1, kind: Deployment, name: "{{{{metadata.name}}}}" }}
          minReplicas: 3
          maxReplicas: 5
          metrics:
            - type: Resource
              resource: {{ name: cpu, target: {{ type: Utilization, averageUtilization: 80 }} }}
"#
    )
}

fn replicas_and_version(deployment: &Deployment) -> (Option<i32>, String) {
    (
        deployment.spec.replicas,
        deployment.resource_version().unwrap_or_default(),
    )
}

/// Which field managers own `spec.replicas` of the Deployment.
fn replicas_owners(deployment: &Deployment) -> Vec<String> {
    deployment
        .managed_fields()
        .iter()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .and_then(|fields| fields.0.pointer("/f:spec/f:replicas"))
                .is_some()
        })
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

#[tokio::test]
async fn replicas_handed_over_to_an_hpa_are_left_alone_without_a_write_loop() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "hand-over").await;
    let dir = temp_dir("hand-over");
    write(&dir, "rules.yaml", &scaled_app(&ns));
    let manager = ManagerProcess::start(&dir, &ns, "hand-over", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let parents: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let parent: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "shop", "labels": {"scaled": "yes"}}, "data": {"version": "1"}}),
    )
    .expect("a ConfigMap");
    parents
        .create(&PostParams::default(), &parent)
        .await
        .expect("create the parent");
    // The HPA controller raises the replicas to minReplicas (no metrics needed for that).
    eventually_seen(Duration::from_secs(60), "the HPA's 3 replicas", || async {
        let deployment = deployments
            .get_opt("shop")
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no Deployment")?;
        match replicas_and_version(&deployment) {
            (Some(3), _) => Ok(()),
            seen => Err(format!("{seen:?}, owners {:?}", replicas_owners(&deployment))),
        }
    })
    .await;
    let deployment = deployments.get("shop").await.expect("Deployment");
    let owners = replicas_owners(&deployment);
    assert!(
        !owners.iter().any(|m| m.starts_with("ruleplane")),
        "spec.replicas belongs to the HPA's controller, not to Ruleplane: {owners:?}"
    );
    // A change of the parent re-applies the Deployment: the handed-over replicas stay as the HPA set them.
    merge_patch(&parents, "shop", json!({"data": {"version": "2"}})).await;
    eventually_seen(Duration::from_secs(20), "the Deployment re-applied", || async {
        let deployment = deployments.get("shop").await.map_err(|e| e.to_string())?;
        let version = deployment.annotations().get("version").cloned();
        (version.as_deref() == Some("2"))
            .then_some(())
            .ok_or(format!("annotation {version:?}"))
    })
    .await;
    let (replicas, settled) = replicas_and_version(&deployments.get("shop").await.expect("Deployment"));
    assert_eq!(replicas, Some(3), "the re-apply left the HPA's replicas alone");
    // Over 30 s (two HPA sync periods), nobody writes the Deployment again: no loop between the two writers.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        let deployment = deployments.get("shop").await.expect("Deployment");
        assert_eq!(
            replicas_and_version(&deployment),
            (Some(3), settled.clone()),
            "the Deployment was written again after {:?}; managers {:?}",
            started.elapsed(),
            managers(&deployment)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A Contest (a kind of its own, so the manager writes its status) whose child's `data.mode` another writer keeps
/// changing.
fn contested(ns: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: contest.fight.example.net }}
spec:
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {{ type: object, x-kubernetes-preserve-unknown-fields: true }}
            status: {{ type: object, x-kubernetes-preserve-unknown-fields: true }}
      subresources: {{ status: {{}} }}
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: contested }}
spec:
  for: {{ apiVersion: fight.example.net/v1, kind: Contest, namespace: {ns} }}
  children:
    - id: settings
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-settings" }}
        data: {{ mode: ours }}
"#
    )
}

/// The `Synced` condition's message of the Contest `p`.
async fn synced_message(contests: &Api<DynamicObject>) -> Option<String> {
    let contest = contests.get_opt("p").await.ok()??;
    let conditions = contest.data.pointer("/status/conditions")?.as_array()?.clone();
    conditions
        .into_iter()
        .find(|condition| condition["type"] == "Synced")?
        .get("message")?
        .as_str()
        .map(str::to_string)
}

async fn fight_events(client: &Client, ns: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|event| event.reason.as_deref() == Some("FieldFight"))
        .collect()
}

#[tokio::test]
async fn a_writer_fighting_the_rule_over_a_field_is_reported_once() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "fight").await;
    let dir = temp_dir("fight");
    write(&dir, "rules.yaml", &contested(&ns));
    let manager = ManagerProcess::start(&dir, &ns, "fight", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let gvk = GroupVersionKind::gvk("fight.example.net", "v1", "Contest");
    let contests: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "contests"),
    );
    let parent: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "fight.example.net/v1", "kind": "Contest", "metadata": {"name": "p"}, "spec": {}
    }))
    .expect("a Contest");
    // The CRD is the manager's to create: retried until it is served.
    eventually_seen(Duration::from_secs(30), "the Contest created", || async {
        contests
            .create(&PostParams::default(), &parent)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    let mode = |configmaps: Api<ConfigMap>| async move {
        configmaps
            .get_opt("p-settings")
            .await
            .ok()
            .flatten()
            .and_then(|cm| cm.data?.get("mode").cloned())
    };
    eventually(Duration::from_secs(20), "the child", || async {
        (mode(configmaps.clone()).await.as_deref() == Some("ours")).then_some(())
    })
    .await;
    // The other writer puts its value back whenever Ruleplane has repaired it, for 10 rounds at least.
    let intruder = PatchParams {
        field_manager: Some("intruder".into()),
        ..PatchParams::default()
    };
    let mut rounds = 0;
    let started = Instant::now();
    while rounds < 10 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "only {rounds} rounds in 60 s"
        );
        configmaps
            .patch(
                "p-settings",
                &intruder,
                &Patch::Merge(json!({"data": {"mode": "theirs"}})),
            )
            .await
            .expect("the other writer's change");
        eventually(Duration::from_secs(20), "Ruleplane's value back", || async {
            (mode(configmaps.clone()).await.as_deref() == Some("ours")).then_some(())
        })
        .await;
        rounds += 1;
    }
    let events = eventually(Duration::from_secs(10), "a FieldFight Warning", || async {
        let events = fight_events(&client, &ns).await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    // Given time to arrive, there is still exactly one, told once (no series of repeats).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events = if events.len() == 1 {
        fight_events(&client, &ns).await
    } else {
        events
    };
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(event.series.is_none(), "published once: {:?}", event.series);
    assert_eq!(event.regarding.as_ref().and_then(|r| r.name.as_deref()), Some("p"));
    let note = event.note.clone().unwrap_or_default();
    assert!(note.contains(".data.mode") && note.contains("\"intruder\""), "{note}");
    // While it lasts, `Synced` says so too.
    let message = eventually(Duration::from_secs(10), "the fight in Synced", || async {
        synced_message(&contests).await.filter(|m| m.contains("intruder"))
    })
    .await;
    assert!(message.contains(".data.mode"), "{message}");
}

/// What `apply_patch` relies on, on the real apiserver: the body `plan_patches` makes (the object's uid in it),
/// applied forced under the patch's manager, fails for an object deleted since it was observed (409, uid
/// mismatch) and for a new object that took its name (422, `metadata.uid` immutable): it never creates one nor
/// lands on the newcomer.
#[tokio::test]
async fn a_patch_body_never_creates_a_deleted_object_nor_patches_its_successor() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "patch-uid").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pod(&pods, "web-0", "web").await;
    let rules = ruleplane_config::load_str("rules.yaml", &label_pods(&ns)).expect("rules load");
    let Some(ruleplane_config::Rule::Reconciler(rule)) = rules.get("label-pods") else {
        panic!("no rule")
    };
    let parent = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "web", "namespace": ns, "uid": "p-1"},
                        "data": {"app": "web", "team": "blue"}});
    let mut observed = serde_json::to_value(pods.get("web-0").await.expect("web-0")).expect("JSON");
    observed["apiVersion"] = json!("v1");
    observed["kind"] = json!("Pod");
    let none = serde_json::Map::new();
    let plan = ruleplane_config::plan_patches(rule, &parent, true, &none, &none, &[observed]);
    assert!(plan.failures.is_empty(), "{:?}", plan.failures);
    let [apply] = plan.apply.as_slice() else {
        panic!("one apply expected: {:?}", plan.apply)
    };
    let params = PatchParams::apply(&apply.manager).force();
    let body = Patch::Apply(&apply.body);
    let send = || pods.patch("web-0", &params, &body);
    pods.delete(
        "web-0",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .expect("delete web-0");
    eventually(Duration::from_secs(20), "web-0 gone", || async {
        pods.get_opt("web-0").await.ok()?.is_none().then_some(())
    })
    .await;
    match send().await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("the apply of a deleted object must fail: {other:?}"),
    }
    assert!(pods.get_opt("web-0").await.expect("get").is_none(), "nothing created");
    // A new Pod under the old name: the old body does not land on it.
    create_pod(&pods, "web-0", "web").await;
    match send().await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            let causes = status.details.map(|details| details.causes).unwrap_or_default();
            assert!(causes.iter().any(|cause| cause.field == "metadata.uid"), "{causes:?}");
        }
        other => panic!("the apply aimed at the old object must fail: {other:?}"),
    }
    let labels = labels_of(&pods, "web-0").await.expect("the new web-0");
    assert_eq!(labels.get("team"), None, "{labels:?}");
}

/// An immutable ConfigMap child with a handed-over field and `recreate`: a changed version cannot be applied.
fn immutable_settings(ns: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: frozen-settings }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ frozen: "yes" }} }} }}
  children:
    - id: settings
      recreate: true
      handOver: [data.note]
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-settings" }}
        immutable: true
        data: {{ version: "{{{{data.version}}}}", note: "as created" }}
"#
    )
}

/// The field managers holding `.data.note` of a ConfigMap.
fn note_owners(config_map: &ConfigMap) -> Vec<String> {
    config_map
        .managed_fields()
        .iter()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .and_then(|fields| fields.0.pointer("/f:data/f:note"))
                .is_some()
        })
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

#[tokio::test]
async fn a_recreated_child_is_created_whole_again_with_its_handed_over_fields() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "hand-over-recreate").await;
    let dir = temp_dir("hand-over-recreate");
    write(&dir, "rules.yaml", &immutable_settings(&ns));
    let manager = ManagerProcess::start(&dir, &ns, "hand-over-recreate", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let parent: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "shop", "labels": {"frozen": "yes"}}, "data": {"version": "1"}}),
    )
    .expect("a ConfigMap");
    config_maps
        .create(&PostParams::default(), &parent)
        .await
        .expect("create the parent");
    let first = eventually(Duration::from_secs(30), "the settings child", || async {
        config_maps.get_opt("shop-settings").await.ok().flatten()
    })
    .await;
    let first_uid = first.uid().expect("uid");
    assert_eq!(
        note_owners(&first),
        ["ruleplane-handover"],
        "created under the hand-over manager"
    );
    // The data of an immutable ConfigMap cannot change: the update is refused, and the child recreated.
    merge_patch(&config_maps, "shop", json!({"data": {"version": "2"}})).await;
    let second = eventually(Duration::from_secs(60), "the settings child recreated", || async {
        let settings = config_maps.get_opt("shop-settings").await.ok().flatten()?;
        let data = settings.data.as_ref()?;
        (settings.uid()? != first_uid && data.get("version")? == "2").then_some(settings)
    })
    .await;
    let data = second.data.as_ref().expect("data");
    assert_eq!(
        data.get("note").map(String::as_str),
        Some("as created"),
        "the handed-over field is created again with the object"
    );
    assert_eq!(
        note_owners(&second),
        ["ruleplane-handover"],
        "and held by the hand-over manager, not the reconciler's"
    );
}
