//! A hostile tenant on the real plane: parent data that tries to move a child, objects forged with Ruleplane's
//! labels (even in the parent's own namespace: only the signature tells them apart), and finalizers left behind by a rule whose selector narrowed while no manager ran.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use ruleplane_config::ownership::{
    CHILD_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_ANNOTATION, PARENT_UID_LABEL, RULE_LABEL,
    cleanup_finalizer,
};
use ruleplane_config::provenance::{SIGNATURE_ANNOTATION, SIGNING_KEY_SECRET};
use serde_json::json;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually, test_namespace, write_rule_file as write};

fn config_map(value: serde_json::Value) -> ConfigMap {
    serde_json::from_value(value).expect("a ConfigMap")
}

#[tokio::test]
async fn parent_data_fills_values_and_forged_children_are_neither_read_nor_pruned() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "tenant-a").await;
    let other = test_namespace(&client, "tenant-b").await;
    let rules = format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: tenant-copy }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ copy: "yes" }} }} }}
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-copy" }}
        data:
          team: {{{{data.team}}}}
"#
    );
    let dir = temp_dir("tenancy");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "tenancy", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let here: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let there: Api<ConfigMap> = Api::namespaced(client.clone(), &other);

    // 1. The reported injection: the value stays a value, in the parent's namespace.
    let payload = format!("x\n  namespace: {other}\nhostile: true");
    let parent = here
        .create(
            &PostParams::default(),
            &config_map(json!({"metadata": {"name": "web", "labels": {"copy": "yes"}}, "data": {"team": payload}})),
        )
        .await
        .expect("create the parent");
    let copy = eventually(
        Duration::from_secs(20),
        "the child in the parent's namespace",
        || async { here.get_opt("web-copy").await.ok().flatten() },
    )
    .await;
    let data = copy.data.clone().unwrap_or_default();
    assert_eq!(data.get("team"), Some(&payload), "the payload is the value of `team`");
    assert_eq!(data.len(), 1, "no key was added: {data:?}");
    assert!(
        there.get_opt("web-copy").await.expect("get").is_none(),
        "nothing was written to {other}"
    );

    // 2. Objects forged with the rule's labels and the parent's UID: one in another namespace (where this child
    // never goes), one whose annotation names another parent. Neither is pruned, however often the parent is
    // reconciled.
    let uid = parent.uid().expect("uid");
    let forged = |namespace: &str, name: &str, id: &str| {
        config_map(json!({"metadata": {
            "name": name, "namespace": namespace,
            "labels": { MANAGED_BY_LABEL: MANAGED_BY_VALUE, RULE_LABEL: "tenant-copy", PARENT_UID_LABEL: uid, CHILD_ID_LABEL: id },
            "annotations": { PARENT_ANNOTATION: format!("{ns}/web") }
        }, "data": {"mine": "yes"}}))
    };
    there
        .create(&PostParams::default(), &forged(&other, "forged-elsewhere", "copy"))
        .await
        .expect("forge in another namespace");
    let mut other_parent = forged(&ns, "forged-annotation", "copy");
    other_parent
        .annotations_mut()
        .insert(PARENT_ANNOTATION.to_string(), format!("{ns}/another"));
    here.create(&PostParams::default(), &other_parent)
        .await
        .expect("forge with another parent's annotation");
    // The hardest copy: the parent's own namespace, its annotation, a child id the rule has, every label: only the
    // signature tells it from a child, and it has none.
    here.create(&PostParams::default(), &forged(&ns, "forged-here", "copy"))
        .await
        .expect("forge in the parent's own namespace");
    for round in 0..3 {
        let change = Patch::Merge(json!({"data": {"team": format!("round-{round}")}}));
        here.patch("web", &PatchParams::default(), &change)
            .await
            .expect("update the parent");
        eventually(Duration::from_secs(20), "the child follows the parent", || async {
            let copy = here.get_opt("web-copy").await.ok().flatten()?;
            (copy.data?.get("team")? == &format!("round-{round}")).then_some(())
        })
        .await;
    }
    assert!(
        there.get_opt("forged-elsewhere").await.expect("get").is_some(),
        "a forged object is not pruned"
    );
    assert!(
        here.get_opt("forged-annotation").await.expect("get").is_some(),
        "nor one that names another parent"
    );
    assert!(
        here.get_opt("forged-here").await.expect("get").is_some(),
        "nor an unsigned copy of a child in the parent's own namespace"
    );
    let copy = here.get("web-copy").await.expect("the child");
    let signature = copy
        .annotations()
        .get(SIGNATURE_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    assert!(
        signature.starts_with("v1."),
        "the child is signed: {:?}",
        copy.annotations()
    );
    // The key the manager made lives in its own namespace (here the test namespace, where its Lease is).
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let key = secrets.get(SIGNING_KEY_SECRET).await.expect("the signing key Secret");
    assert_eq!(key.immutable, Some(true));
    // A copy of the real child's signature onto another name in the same place proves nothing either.
    let mut copied = forged(&ns, "forged-signed", "copy");
    copied
        .annotations_mut()
        .insert(SIGNATURE_ANNOTATION.to_owned(), signature);
    here.create(&PostParams::default(), &copied)
        .await
        .expect("forge with a copied signature");
    here.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"team": "last"}})),
    )
    .await
    .expect("update the parent");
    eventually(Duration::from_secs(20), "the child follows the parent", || async {
        let copy = here.get_opt("web-copy").await.ok().flatten()?;
        (copy.data?.get("team")? == "last").then_some(())
    })
    .await;
    assert!(
        here.get_opt("forged-signed").await.expect("get").is_some(),
        "a signature copied to another name does not make it a child"
    );
}

#[tokio::test]
async fn a_selector_narrowed_while_no_manager_ran_releases_the_finalizer_at_start() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "sweep").await;
    let elsewhere = test_namespace(&client, "sweep-mirror").await;
    let rules = |label: &str| {
        format!(
            r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: sweep-mirror }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ {label}: "yes" }} }} }}
  children:
    - id: mirror
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-mirror", namespace: {elsewhere} }}
"#
        )
    };
    let dir = temp_dir("sweep");
    write(&dir, "rules.yaml", &rules("mirrored"));
    let here: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mirrors: Api<ConfigMap> = Api::namespaced(client.clone(), &elsewhere);
    let finalizer = cleanup_finalizer("sweep-mirror");
    {
        let manager = ManagerProcess::start(&dir, &ns, "sweep", &[]);
        manager.wait_ready(Duration::from_secs(40)).await;
        here.create(
            &PostParams::default(),
            &config_map(json!({"metadata": {"name": "team", "labels": {"mirrored": "yes"}}})),
        )
        .await
        .expect("create the parent");
        eventually(
            Duration::from_secs(20),
            "mirror and the rule's own finalizer",
            || async {
                mirrors.get_opt("team-mirror").await.ok().flatten()?;
                here.get("team")
                    .await
                    .ok()?
                    .finalizers()
                    .contains(&finalizer)
                    .then_some(())
            },
        )
        .await;
    }
    // The manager is gone; the rule now selects another label, so nothing would ever remove the finalizer.
    write(&dir, "rules.yaml", &rules("another"));
    let manager = ManagerProcess::start(&dir, &ns, "sweep", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    eventually(Duration::from_secs(20), "the finalizer swept at start", || async {
        (!here.get("team").await.ok()?.finalizers().contains(&finalizer)).then_some(())
    })
    .await;
    assert!(
        mirrors.get_opt("team-mirror").await.expect("get").is_some(),
        "its child is kept"
    );
}
