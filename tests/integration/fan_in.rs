//! Lookups by selector on a real apiserver: fan-in, one Ingress over every Service labelled `expose=true`
//! (examples/service-ingress.yaml), following Services as they gain and lose the label or go.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually_seen, test_namespace, write_rule_file as write};

async fn create_service(services: &Api<Service>, name: &str, expose: Option<&str>, port: i32) {
    let labels = expose.map(|value| json!({ "expose": value })).unwrap_or(json!({}));
    let service: Service = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "spec": { "ports": [ { "port": port } ] }
    }))
    .expect("a Service");
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap_or_else(|e| panic!("create Service {name}: {e}"));
}

/// The Ingress's rules as `host → service:port`, or `None` while it does not exist.
async fn ingress_rules(ingresses: &Api<Ingress>) -> Option<Vec<String>> {
    let ingress = ingresses.get_opt("exposed-services").await.ok().flatten()?;
    let rules = ingress.spec.and_then(|spec| spec.rules).unwrap_or_default();
    Some(
        rules
            .iter()
            .map(|rule| {
                let backend = rule
                    .http
                    .as_ref()
                    .and_then(|http| http.paths.first())
                    .and_then(|path| path.backend.service.as_ref());
                format!(
                    "{} → {}:{}",
                    rule.host.as_deref().unwrap_or_default(),
                    backend.map(|service| service.name.as_str()).unwrap_or_default(),
                    backend
                        .and_then(|service| service.port.as_ref())
                        .and_then(|port| port.number)
                        .unwrap_or_default()
                )
            })
            .collect(),
    )
}

async fn wait_for_rules(ingresses: &Api<Ingress>, what: &str, expected: &[&str]) {
    eventually_seen(Duration::from_secs(30), what, || async {
        match ingress_rules(ingresses).await {
            Some(rules) if rules == expected => Ok(()),
            seen => Err(format!("{seen:?}")),
        }
    })
    .await;
}

#[tokio::test]
async fn a_selector_lookup_gains_and_loses_members_and_the_fan_in_ingress_follows() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "fan-in").await;
    let elsewhere = test_namespace(&client, "fan-in-other").await;
    // The example as shipped, its parents narrowed to this test's namespace, at most two members.
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/service-ingress.yaml"))
        .expect("examples/service-ingress.yaml");
    let parent_name = "    name: exposed-services\n";
    assert!(example.contains(parent_name), "the example's parent is named");
    let cap = "      maxItems: 100\n";
    assert!(example.contains(cap), "the example caps its lookup");
    let rules = example
        .replacen(parent_name, &format!("{parent_name}    namespace: {ns}\n"), 1)
        .replacen(cap, "      maxItems: 2\n", 1);

    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    // Three labelled Services, one more than `maxItems`.
    for name in ["web", "extra", "more"] {
        create_service(&services, name, Some("true"), 80).await;
    }
    create_service(&services, "db", None, 5432).await;
    // Labelled, but in another namespace: the lookup reads its parent's namespace only.
    create_service(&Api::namespaced(client.clone(), &elsewhere), "admin", Some("true"), 80).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for name in ["exposed-services", "not-the-parent"] {
        let parent: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": name },
            "data": { "domain": "shop.example.org" }
        }))
        .expect("a ConfigMap");
        configmaps
            .create(&PostParams::default(), &parent)
            .await
            .expect("create ConfigMap");
    }

    let dir = temp_dir("fan-in");
    write(&dir, "rules.yaml", &rules);
    let manager = ManagerProcess::start(&dir, &ns, "fan-in", &[]);
    manager.wait_ready(Duration::from_secs(40)).await;
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), &ns);

    // Past `maxItems` from the first reconcile: a render error, reported on the parent, and nothing written.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually_seen(
        Duration::from_secs(30),
        "a RenderError Warning naming the cap",
        || async {
            let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            let notes: Vec<String> = list
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("RenderError"))
                .filter_map(|e| e.note)
                .collect();
            notes
                .iter()
                .any(|note| note.contains("lookup `services`") && note.contains("`maxItems`"))
                .then_some(())
                .ok_or_else(|| format!("{notes:?}"))
        },
    )
    .await;
    assert_eq!(ingress_rules(&ingresses).await, None, "nothing written past the cap");
    // A member goes: the error waited for exactly this change of the set.
    services
        .delete("more", &DeleteParams::default())
        .await
        .expect("delete more");
    wait_for_rules(
        &ingresses,
        "back under the cap: a rule per member, sorted by name",
        &["extra.shop.example.org → extra:80", "web.shop.example.org → web:80"],
    )
    .await;
    assert!(
        ingresses.get_opt("not-the-parent").await.expect("read").is_none(),
        "`for.name`: only the named ConfigMap is a parent"
    );
    services
        .delete("extra", &DeleteParams::default())
        .await
        .expect("delete extra");
    wait_for_rules(&ingresses, "extra's rule removed", &["web.shop.example.org → web:80"]).await;

    // Labelled: a member joins.
    let label = |value: serde_json::Value| Patch::Merge(json!({ "metadata": { "labels": { "expose": value } } }));
    services
        .patch("db", &PatchParams::default(), &label(json!("true")))
        .await
        .expect("label db");
    wait_for_rules(
        &ingresses,
        "db's rule added",
        &["db.shop.example.org → db:5432", "web.shop.example.org → web:80"],
    )
    .await;

    // A member changes: its rule follows.
    services
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "ports": [ { "port": 6432 } ] } })),
        )
        .await
        .expect("change db's port");
    wait_for_rules(
        &ingresses,
        "db's new port",
        &["db.shop.example.org → db:6432", "web.shop.example.org → web:80"],
    )
    .await;

    // Unlabelled: a member leaves.
    services
        .patch("web", &PatchParams::default(), &label(json!(null)))
        .await
        .expect("unlabel web");
    wait_for_rules(&ingresses, "web's rule removed", &["db.shop.example.org → db:6432"]).await;

    // Deleted: the last member leaves, and an Ingress without rules is pruned (`includeWhen`).
    services
        .delete("db", &DeleteParams::default())
        .await
        .expect("delete db");
    eventually_seen(Duration::from_secs(30), "the Ingress pruned", || async {
        match ingress_rules(&ingresses).await {
            None => Ok(()),
            seen => Err(format!("{seen:?}")),
        }
    })
    .await;

    // And back: a Service created with the label is a member at once.
    create_service(&services, "shop", Some("true"), 8080).await;
    wait_for_rules(
        &ingresses,
        "a new labelled Service",
        &["shop.shop.example.org → shop:8080"],
    )
    .await;

    // Memory follows the selection: the lookup's watch caches the labelled Services (this namespace's `shop` and
    // the other namespace's `admin`), none of the others.
    let watched = "ruleplane_watch_objects{api_version=\"v1\",kind=\"Service\",label_selector=\"expose=true\",\
                   field_selector=\"\",content=\"objects\"}";
    eventually_seen(
        Duration::from_secs(10),
        "the lookup's watch holding the labelled Services",
        || async {
            match manager.metric(watched).await {
                Some(2.0) => Ok(()),
                seen => Err(format!("{seen:?}")),
            }
        },
    )
    .await;
}
