//! The rule language at its edges, on a real apiserver: waiting lookups, excluded children, patches, own conditions.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{
    admin_client, create_config_map, eventually, merge_patch, test_namespace, write_rule_file as write,
};

/// A namespaced `Site` of `group` whose status the manager writes, and the Reconciler `rule` over it (children
/// and the rest of its spec given as YAML under `spec:`, indented by two spaces).
fn site_rules(group: &str, rule: &str, spec: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: site.{group} }}
spec:
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
      subresources: {{ status: {{}} }}
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: {rule} }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Site }}
{spec}"#
    )
}

fn sites(client: &kube::Client, group: &str, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Site"), "sites");
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Creates a Site once its CRD is served (the manager installs it).
async fn create_site(sites: &Api<DynamicObject>, group: &str, name: &str, spec: Value) {
    let site: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Site", "metadata": { "name": name }, "spec": spec
    }))
    .expect("a Site");
    eventually(Duration::from_secs(40), "Site created", || async {
        sites.create(&PostParams::default(), &site).await.ok()
    })
    .await;
}

/// The Site's condition of this type: `(status, reason)`.
async fn condition(sites: &Api<DynamicObject>, name: &str, type_: &str) -> Option<(String, String)> {
    let site = sites.get_opt(name).await.ok().flatten()?;
    let found = site.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        found["status"].as_str()?.to_string(),
        found["reason"].as_str()?.to_string(),
    ))
}

async fn data_of(configmaps: &Api<ConfigMap>, name: &str, key: &str) -> Option<String> {
    configmaps.get_opt(name).await.ok().flatten()?.data?.get(key).cloned()
}

/// A Site rule of `group` running in a manager of its own in the test's namespace, and the APIs the test reads.
struct SiteRun {
    _manager: ManagerProcess,
    configmaps: Api<ConfigMap>,
    sites: Api<DynamicObject>,
}

async fn run_site_rule(client: &kube::Client, ns: &str, group: &str, rule: &str, spec: &str) -> SiteRun {
    let dir = temp_dir(rule);
    write(&dir, "rules.yaml", &site_rules(group, rule, spec));
    let manager = ManagerProcess::start(&dir, ns, rule, &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    SiteRun {
        _manager: manager,
        configmaps: Api::namespaced(client.clone(), ns),
        sites: sites(client, group, ns),
    }
}

#[tokio::test]
async fn a_lookup_that_waits_holds_the_children_while_its_object_is_missing() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "edge-held").await;
    let group = "edge1.example.com";
    let spec = r#"  lookups:
    source: { apiVersion: v1, kind: ConfigMap, name: "{{metadata.name}}-source", jsonPath: "{.data}", whenMissing: Wait }
  children:
    - id: copy
      includeWhen: "{.lookups.source}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-copy" }
        data: { color: {{json lookups.source.color}}, size: {{json spec.size}} }
"#;
    let SiteRun {
        _manager,
        configmaps,
        sites,
    } = run_site_rule(&client, &ns, group, "site-held", spec).await;
    // A new Site whose source is missing gets nothing, and says why.
    create_site(&sites, group, "a", json!({ "size": "s" })).await;
    eventually(Duration::from_secs(20), "Ready=False LookupMissing", || async {
        (condition(&sites, "a", "Ready").await? == ("False".into(), "LookupMissing".into())).then_some(())
    })
    .await;
    assert!(
        configmaps.get_opt("a-copy").await.expect("get").is_none(),
        "nothing rendered"
    );
    create_config_map(&configmaps, "a-source", json!({}), json!({ "color": "blue" })).await;
    eventually(Duration::from_secs(20), "copy rendered from the source", || async {
        (data_of(&configmaps, "a-copy", "color").await.as_deref() == Some("blue")).then_some(())
    })
    .await;
    eventually(Duration::from_secs(20), "Ready=True", || async {
        (condition(&sites, "a", "Ready").await?.0 == "True").then_some(())
    })
    .await;
    // The source goes, and the Site changes: the child is held as it was (its `includeWhen` would prune it).
    configmaps
        .delete("a-source", &DeleteParams::default())
        .await
        .expect("delete source");
    merge_patch(&sites, "a", json!({ "spec": { "size": "l" } })).await;
    eventually(Duration::from_secs(20), "Ready=False LookupMissing again", || async {
        (condition(&sites, "a", "Ready").await? == ("False".into(), "LookupMissing".into())).then_some(())
    })
    .await;
    let observed = sites.get("a").await.expect("get Site");
    let generation = observed.metadata.generation;
    eventually(Duration::from_secs(20), "status for the changed Site", || async {
        let site = sites.get("a").await.ok()?;
        (site.data["status"]["observedGeneration"].as_i64() == generation).then_some(())
    })
    .await;
    assert_eq!(
        data_of(&configmaps, "a-copy", "color").await.as_deref(),
        Some("blue"),
        "held, not pruned"
    );
    assert_eq!(
        data_of(&configmaps, "a-copy", "size").await.as_deref(),
        Some("s"),
        "held, not updated"
    );
    // Back: the child follows the templates again.
    create_config_map(&configmaps, "a-source", json!({}), json!({ "color": "green" })).await;
    eventually(
        Duration::from_secs(20),
        "copy follows the source and the Site",
        || async {
            let color = data_of(&configmaps, "a-copy", "color").await;
            let size = data_of(&configmaps, "a-copy", "size").await;
            (color.as_deref() == Some("green") && size.as_deref() == Some("l")).then_some(())
        },
    )
    .await;
}

/// The Site's condition of this type, whole.
async fn whole_condition(sites: &Api<DynamicObject>, name: &str, type_: &str) -> Option<Value> {
    let site = sites.get_opt(name).await.ok().flatten()?;
    site.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

#[tokio::test]
async fn the_rules_own_conditions_flip_keep_their_time_while_unchanged_and_announce_a_change() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "edge-conditions").await;
    let group = "edge4.example.com";
    let spec = r#"  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-copy" }
        data: { size: {{json spec.size}} }
  conditions:
    - type: Large
      status: '{{#if (eq spec.size "l")}}True{{else}}False{{/if}}'
      reason: '{{#if (eq spec.size "l")}}SizedLarge{{else}}SizedSmall{{/if}}'
      message: "size {{spec.size}}"
      event: true
    - type: Copied
      status: '{{#if ready.copy}}True{{else}}False{{/if}}'
    - type: "{{zone}}Zone"
      forEach: [zone: "{.spec.zones}"]
      status: "True"
"#;
    let SiteRun { _manager, sites, .. } = run_site_rule(&client, &ns, group, "site-conditions", spec).await;
    create_site(&sites, group, "a", json!({ "size": "s", "zones": ["east"] })).await;
    let (small, copied) = eventually(Duration::from_secs(30), "Large=False and Copied=True", || async {
        let large = whole_condition(&sites, "a", "Large").await?;
        let copied = whole_condition(&sites, "a", "Copied").await?;
        (large["status"] == "False" && copied["status"] == "True").then_some((large, copied))
    })
    .await;
    assert_eq!(small["reason"], "SizedSmall");
    assert_eq!(small["message"], "size s");
    assert!(whole_condition(&sites, "a", "eastZone").await.is_some(), "one per item");
    // lastTransitionTime has a resolution of one second: the flip must come in a later second to be told apart.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    merge_patch(&sites, "a", json!({ "spec": { "size": "l", "zones": ["west"] } })).await;
    let generation = sites.get("a").await.expect("get Site").metadata.generation;
    let large = eventually(Duration::from_secs(30), "Large=True", || async {
        let large = whole_condition(&sites, "a", "Large").await?;
        (large["status"] == "True").then_some(large)
    })
    .await;
    assert_eq!(large["reason"], "SizedLarge");
    assert_eq!(
        large["observedGeneration"].as_i64(),
        generation,
        "decided from the new generation"
    );
    assert_ne!(
        large["lastTransitionTime"], small["lastTransitionTime"],
        "a flip takes a new time"
    );
    let still = whole_condition(&sites, "a", "Copied").await.expect("Copied");
    assert_eq!(still["status"], "True");
    assert_eq!(
        still["lastTransitionTime"], copied["lastTransitionTime"],
        "unchanged: its time is kept"
    );
    assert_eq!(still["observedGeneration"].as_i64(), generation);
    assert!(
        whole_condition(&sites, "a", "eastZone").await.is_none(),
        "the item that left takes its condition"
    );
    assert!(whole_condition(&sites, "a", "westZone").await.is_some());
    // The change was announced as the rule asked: a Normal Event with the condition's reason.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually(Duration::from_secs(20), "a SizedLarge Event on the Site", || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("SizedLarge")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("a")
            })
            .filter(|e| e.type_.as_deref() == Some("Normal") && e.note.as_deref() == Some("Large is True: size l"))
    })
    .await;
}

#[tokio::test]
async fn offline_defaults_agree_with_what_the_apiserver_stores() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "edge-defaults").await;
    let group = "edge5.example.com";
    // Defaults at every place structural defaulting reaches: an absent object defaulted then defaulted inside,
    // fields inside objects present (not inside absent ones), list items, map values, nulls (nullable kept, else
    // defaulted or dropped), and declared fields under x-kubernetes-preserve-unknown-fields.
    let spec_schema = r#"
              type: object
              properties:
                size: { type: string, default: m }
                replicas: { type: integer, default: 2 }
                note: { type: string, nullable: true, default: none }
                gone: { type: string }
                tls:
                  type: object
                  default: {}
                  properties:
                    port: { type: integer, default: 443 }
                    mode: { type: string, default: strict }
                backup:
                  type: object
                  properties:
                    schedule: { type: string, default: "0 3 * * *" }
                ports:
                  type: array
                  items:
                    type: object
                    properties:
                      port: { type: integer }
                      protocol: { type: string, default: TCP }
                labels:
                  type: object
                  additionalProperties: { type: string, default: unset }
                extra:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties:
                    known: { type: string, default: k }"#;
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: gadget.{group} }}
spec:
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:{spec_schema}
            status: {{ type: object, x-kubernetes-preserve-unknown-fields: true }}
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: gadgets }}
spec:
  for: {{ apiVersion: {group}/v1, kind: Gadget }}
  children:
    - id: settings
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-settings" }}
        data: {{ size: {{{{json spec.size}}}}, port: "{{{{spec.tls.port}}}}" }}
"#
    );
    let dir = temp_dir("gadgets");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "gadgets", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let samples = [
        json!({}),
        json!({ "size": "s", "backup": {}, "ports": [{ "port": 80 }, { "port": 53, "protocol": "UDP" }] }),
        json!({ "note": null, "size": null, "gone": null, "tls": { "port": 8443 }, "labels": { "a": null, "b": "x" } }),
        json!({ "extra": { "unknown": { "deep": 1 }, "known": "given" }, "replicas": 5 }),
    ];
    let offline = ruleplane_config::object_schema::KindSchemas::of_rule_set(
        &ruleplane_config::load_str("rules.yaml", &rules).expect("valid rules"),
    );
    for (index, spec) in samples.into_iter().enumerate() {
        let name = format!("g{index}");
        let sample = json!({
            "apiVersion": format!("{group}/v1"), "kind": "Gadget", "metadata": { "name": name }, "spec": spec
        });
        let object: DynamicObject = serde_json::from_value(sample.clone()).expect("a Gadget");
        let stored = eventually(Duration::from_secs(40), "Gadget created", || async {
            gadgets.create(&PostParams::default(), &object).await.ok()
        })
        .await;
        let mut defaulted = sample;
        offline.apply_defaults(&mut defaulted);
        assert_eq!(
            defaulted["spec"], stored.data["spec"],
            "sample {index}: offline (left) and the apiserver (right) default alike"
        );
    }
    // The worker reads what the apiserver stored; render and test read the offline default: the same child.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    eventually(Duration::from_secs(20), "the child from the defaults", || async {
        let port = data_of(&configmaps, "g0-settings", "port").await;
        let size = data_of(&configmaps, "g0-settings", "size").await;
        (port.as_deref() == Some("443") && size.as_deref() == Some("m")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_children_that_read_an_excluded_child_are_pruned_with_it() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "edge-excluded").await;
    let group = "edge2.example.com";
    let spec = r#"  children:
    - id: debug
      includeWhen: "{.spec.debug}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-debug" }
    - id: index
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-index" }
        data: { of: {{json children.debug.metadata.name}} }
    - id: always
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-always" }
"#;
    let SiteRun {
        _manager,
        configmaps,
        sites,
    } = run_site_rule(&client, &ns, group, "site-excluded", spec).await;
    create_site(&sites, group, "a", json!({ "debug": true })).await;
    eventually(Duration::from_secs(20), "index rendered from debug", || async {
        (data_of(&configmaps, "a-index", "of").await.as_deref() == Some("a-debug")).then_some(())
    })
    .await;
    merge_patch(&sites, "a", json!({ "spec": { "debug": false } })).await;
    eventually(Duration::from_secs(20), "debug and its index pruned", || async {
        let debug = configmaps.get_opt("a-debug").await.ok()?;
        let index = configmaps.get_opt("a-index").await.ok()?;
        (debug.is_none() && index.is_none()).then_some(())
    })
    .await;
    assert!(configmaps.get_opt("a-always").await.expect("get").is_some());
    eventually(
        Duration::from_secs(20),
        "Ready=True without the excluded children",
        || async { (condition(&sites, "a", "Ready").await? == ("True".into(), "ChildrenReady".into())).then_some(()) },
    )
    .await;
    // A Site created without debug never waits for the index.
    create_site(&sites, group, "b", json!({ "debug": false })).await;
    eventually(Duration::from_secs(20), "b Ready", || async {
        (condition(&sites, "b", "Ready").await?.0 == "True").then_some(())
    })
    .await;
    assert!(configmaps.get_opt("b-index").await.expect("get").is_none());
}

#[tokio::test]
async fn a_patch_reads_a_child_once_it_exists_and_a_failing_patch_stops_no_child() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "edge-patch").await;
    let group = "edge3.example.com";
    let spec = r#"  children:
    - id: settings
      readyWhen: "{.metadata.uid}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-settings" }
  patches:
    - id: mark
      name: "{{metadata.name}}-target"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          labels: { settings-uid: "{{children.settings.metadata.uid}}" }
    - id: broken
      name: "{{metadata.name}}-other"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          labels: { owner: "{{spec.owner}}" }
"#;
    let SiteRun {
        _manager,
        configmaps,
        sites,
    } = run_site_rule(&client, &ns, group, "site-patch", spec).await;
    create_config_map(&configmaps, "a-target", json!({}), json!({})).await;
    create_config_map(&configmaps, "a-other", json!({}), json!({})).await;
    create_site(&sites, group, "a", json!({})).await;
    // The child is created although `broken` fails; `mark` then reads the child's uid.
    let settings = eventually(Duration::from_secs(20), "settings created", || async {
        configmaps.get_opt("a-settings").await.ok().flatten()
    })
    .await;
    let uid = settings.metadata.uid.expect("a uid");
    eventually(
        Duration::from_secs(20),
        "target labelled with the child's uid",
        || async {
            let target = configmaps.get_opt("a-target").await.ok().flatten()?;
            (target.metadata.labels?.get("settings-uid") == Some(&uid)).then_some(())
        },
    )
    .await;
    eventually(Duration::from_secs(20), "Synced=False for the broken patch", || async {
        (condition(&sites, "a", "Synced").await? == ("False".into(), "RenderError".into())).then_some(())
    })
    .await;
    let other = configmaps.get("a-other").await.expect("get other");
    assert!(!other.metadata.labels.unwrap_or_default().contains_key("owner"));
}

/// The samples `validate` accepts with an empty enum value of a built-in kind (`object_schema`'s unit test checks
/// offline on the same file) are accepted by the apiserver too: its defaulting fills them in before it validates.
#[tokio::test]
async fn offline_schema_agrees_with_the_apiserver_on_defaulted_empty_enums() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "edge-enums").await;
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config/src/object_schema/testdata/defaulted-empty.yaml");
    let samples = samples.to_str().expect("a UTF-8 path");
    let applied = crate::support::kubectl_result(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-n",
        &ns,
        "-f",
        samples,
        "-o",
        "json",
    ])
    .unwrap_or_else(|refused| panic!("the apiserver refuses what offline accepts: {refused}"));
    let applied: Value = serde_json::from_str(&applied).expect("JSON");
    let items = applied["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![applied.clone()]);
    assert_eq!(items.len(), 5, "{applied}");
    let pod = items.iter().find(|item| item["kind"] == "Pod").expect("the Pod");
    assert_eq!(
        pod["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent",
        "defaulted"
    );
    assert_eq!(pod["spec"]["restartPolicy"], "Always");
    let service = items
        .iter()
        .find(|item| item["kind"] == "Service")
        .expect("the Service");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    // A value outside the enum, and an empty one the apiserver defaults only when absent, are refused by both.
    let wrong = std::env::temp_dir().join(format!("{ns}-wrong.yaml"));
    std::fs::write(
        &wrong,
        "apiVersion: v1\nkind: Pod\nmetadata: { name: wrong }\nspec:\n  containers:\n    - { name: main, image: busybox:1.36, imagePullPolicy: Sometimes }\n\
         ---\napiVersion: batch/v1\nkind: Job\nmetadata: { name: empty-mode }\nspec:\n  completionMode: \"\"\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [ { name: main, image: busybox:1.36 } ]\n",
    )
    .expect("write sample");
    let refused = crate::support::kubectl_result(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-n",
        &ns,
        "-f",
        wrong.to_str().expect("UTF-8"),
    ]);
    assert!(
        refused
            .as_ref()
            .is_err_and(|message| message.contains("imagePullPolicy") && message.contains("completionMode")),
        "{refused:?}"
    );
}
