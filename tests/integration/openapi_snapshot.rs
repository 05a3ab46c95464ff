//! The built-in kinds' schema snapshot of the plane's Kubernetes version (`config/schemas/kubernetes-<minor>.json`)
//! against the project's own kube-apiserver of that version: fails when stale; `RULEPLANE_UPDATE_SCHEMA_SNAPSHOT=1`
//! rewrites it (`tests/control-plane/update-schema-snapshot.sh`, once per supported version).

use std::collections::BTreeSet;

use ruleplane_config::BUILTIN_KINDS;
use ruleplane_config::object_schema::builtin_snapshot;

use crate::support::admin_client;

#[tokio::test]
async fn the_builtin_schema_snapshot_is_the_apiservers() {
    let client = admin_client().await;
    let info = client.apiserver_version().await.expect("version");
    let version = info.git_version.clone();
    let minor = ruleplane_config::KubernetesVersion::of_server(&info.major, &info.minor)
        .ok()
        .and_then(|v| match v {
            ruleplane_config::ServerVersion::Supported(v) => Some(v),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the plane's kube-apiserver {version} is not a supported version"));
    let group_versions: BTreeSet<&str> = BUILTIN_KINDS.iter().map(|k| k.api_version).collect();
    let mut documents = Vec::new();
    for group_version in group_versions {
        let path = if group_version == "v1" {
            "/openapi/v3/api/v1".to_owned()
        } else {
            format!("/openapi/v3/apis/{group_version}")
        };
        let request = hyper::Request::get(&path).body(Vec::new()).expect("request");
        let text = client
            .request_text(request)
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        documents.push(serde_json::from_str(&text).expect("an OpenAPI document"));
    }
    let kinds: Vec<(&str, &str)> = BUILTIN_KINDS.iter().map(|k| (k.api_version, k.kind)).collect();
    let fresh = builtin_snapshot(&version, &documents, &kinds);
    let file = format!("config/schemas/kubernetes-{minor}.json");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(&file);
    if std::env::var("RULEPLANE_UPDATE_SCHEMA_SNAPSHOT").as_deref() == Ok("1") {
        std::fs::write(&path, &fresh).expect("write the snapshot");
        return;
    }
    let committed = std::fs::read_to_string(&path).expect("the committed snapshot");
    // Every built-in kind Ruleplane knows has a schema.
    let snapshot: serde_json::Value = serde_json::from_str(&fresh).expect("JSON");
    for (api_version, kind) in &kinds {
        assert!(
            snapshot["kinds"].get(format!("{api_version} {kind}")).is_some(),
            "{api_version} {kind} has no schema in /openapi/v3"
        );
    }
    assert!(
        committed == fresh,
        "{file} is stale for kube-apiserver {version}: run \
         K8S_VERSION={minor} tests/control-plane/update-schema-snapshot.sh and review the diff"
    );
}
