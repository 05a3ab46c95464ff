//! Proof that the local control plane is real: CRDs, custom objects, kubectl, binding and leases.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

use crate::support::{admin_client, eventually, kubectl, test_namespace};

#[tokio::test]
async fn crontab_crd_supports_crud_watch_and_kubectl() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "crontab-crud").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object",
                    "properties": {"cronSpec": {"type": "string"}, "image": {"type": "string"}}
                }}}}
            }]
        }
    }))
    .unwrap();
    crds.patch(
        "crontabs.stable.example.com",
        &PatchParams::apply("ruleplane-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply CRD");
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(
            crds.clone(),
            "crontabs.stable.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("CRD established within 30 s")
    .expect("watch CRD");

    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("stable.example.com", "v1", "CronTab"));
    let crontabs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    // Discovery of a freshly established CRD can lag by a moment in the apiserver's handler chain.
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "new-cron-object"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image"}
    }))
    .unwrap();
    eventually(Duration::from_secs(20), "CronTab create", || async {
        crontabs.create(&PostParams::default(), &object).await.ok()
    })
    .await;

    let got = crontabs.get("new-cron-object").await.expect("get CronTab");
    assert_eq!(got.data["spec"]["cronSpec"], "* * * * */5");
    assert_eq!(got.data["spec"]["image"], "my-awesome-cron-image");

    let list = crontabs.list(&ListParams::default()).await.expect("list CronTabs");
    assert_eq!(list.items.len(), 1);

    // A watch from the list's resourceVersion must see a second object being added.
    let rv = list.metadata.resource_version.clone().expect("list resourceVersion");
    let mut events = crontabs
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .expect("watch")
        .boxed();
    let mut second = object.clone();
    second.metadata.name = Some("second-cron-object".into());
    crontabs
        .create(&PostParams::default(), &second)
        .await
        .expect("create second CronTab");
    let added = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.try_next().await.expect("watch stream") {
            if let WatchEvent::Added(obj) = event {
                return obj;
            }
        }
        panic!("watch ended without an Added event");
    })
    .await
    .expect("Added event within 20 s");
    assert_eq!(added.metadata.name.as_deref(), Some("second-cron-object"));

    // Other tests register CronTab kinds in other groups in the same cluster, so name the group.
    let table = kubectl(&["get", "crontab.stable.example.com", "-n", &ns]);
    assert!(
        table.contains("new-cron-object") && table.contains("second-cron-object"),
        "kubectl get crontab printed:\n{table}"
    );
    let image = kubectl(&[
        "get",
        "crontabs.stable.example.com/new-cron-object",
        "-n",
        &ns,
        "-o",
        "jsonpath={.spec.image}",
    ]);
    assert_eq!(image, "my-awesome-cron-image");

    crontabs
        .delete("second-cron-object", &DeleteParams::default())
        .await
        .expect("delete CronTab");
    let left = crontabs.list(&ListParams::default()).await.expect("list after delete");
    assert_eq!(left.items.len(), 1);
}

#[tokio::test]
async fn pod_is_bound_to_node_through_binding_subresource() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "pod-binding").await;
    let node_name = format!("{ns}-node");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": node_name, "labels": {"kubernetes.io/hostname": node_name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}
        }
    }))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.expect("create node");
    // Status is accepted on create: there is no kubelet to report it.
    assert_eq!(created.status.unwrap().allocatable.unwrap()["cpu"].0, "4");

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "nginx", "labels": {"app": "nginx"}},
        "spec": {"schedulerName": "my-scheduler", "containers": [{"name": "nginx", "image": "nginx:1.10"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.expect("create pod");
    assert!(
        pods.get("nginx").await.unwrap().spec.unwrap().node_name.is_none(),
        "pod starts unbound"
    );

    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "nginx"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}
    });
    let _: serde_json::Value = pods
        .create_subresource("binding", "nginx", &PostParams::default(), &binding)
        .await
        .expect("POST binding");
    let bound = pods.get("nginx").await.expect("get pod");
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some(node_name.as_str()));

    pods.delete("nginx", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete bound pod");
    nodes
        .delete(&node_name, &DeleteParams::default())
        .await
        .expect("delete node");
}

#[tokio::test]
async fn lease_can_be_created_and_renewed() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "lease").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "ruleplane-test"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z"}
    }))
    .unwrap();
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        "2026-01-01T00:00:05Z".parse().expect("timestamp"),
    ));
    let after = leases
        .replace("ruleplane-test", &PostParams::default(), &renewed)
        .await
        .expect("renew lease");
    assert_ne!(after.metadata.resource_version, created.metadata.resource_version);
    let got = leases.get("ruleplane-test").await.unwrap();
    assert_eq!(got.spec.as_ref().unwrap().holder_identity.as_deref(), Some("a"));
    assert_eq!(
        got.spec.unwrap().renew_time.unwrap().0.to_string(),
        after.spec.unwrap().renew_time.unwrap().0.to_string()
    );

    // A stale update (old resourceVersion) must conflict: that is what makes leases safe for election.
    let stale = leases.replace("ruleplane-test", &PostParams::default(), &renewed).await;
    assert!(
        matches!(stale, Err(kube::Error::Api(ref e)) if e.code == 409),
        "stale renew must conflict: {stale:?}"
    );
}

#[tokio::test]
async fn a_control_plane_stops_when_its_owner_process_exits() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/control-plane/cluster.sh");
    let dir = std::env::temp_dir().join(format!("ruleplane-owner-test-{}", std::process::id()));
    // The owner stands in for a test binary that panics or is interrupted: it is ended once the plane is up.
    let mut owner = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .expect("spawn owner");
    let up = std::process::Command::new(&script)
        .args(["up", "--dir"])
        .arg(&dir)
        .args(["--owner-pid", &owner.id().to_string()])
        .output()
        .expect("cluster.sh up");
    assert!(
        up.status.success(),
        "second plane failed: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    let pids: Vec<String> = ["etcd", "kube-apiserver", "kube-controller-manager", "watchdog"]
        .iter()
        .map(|p| {
            std::fs::read_to_string(dir.join(format!("{p}.pid")))
                .expect("pid file")
                .trim()
                .to_owned()
        })
        .collect();
    let alive = |pid: &str| std::path::Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid);
    assert!(pids.iter().all(|p| alive(p)), "plane running while its owner lives");
    owner.kill().expect("end the owner");
    owner.wait().expect("reap the owner");
    eventually(
        Duration::from_secs(20),
        "plane stopped after its owner exited",
        || async { (pids.iter().all(|p| !alive(p)) && !dir.exists()).then_some(()) },
    )
    .await;
}

/// A killed process whose parent has not reaped it yet still has a /proc entry, in state Z.
fn is_zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Workers starting together ask the apiserver once per group/version: the second and later askers wait for the
/// first answer. A kind the answer lacks is an error (the worker retries), asked again once the answer is a
/// second old (a CRD registered a moment ago).
#[tokio::test]
async fn shared_discovery_asks_once_per_group_version_however_many_ask_together() {
    use std::sync::{Arc, Mutex};

    use kube::client::{Body, ClientBuilder};
    use ruleplane::kube_client::KindDiscovery;

    let kubeconfig =
        kube::config::Kubeconfig::read_from(&crate::support::control_plane().kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    let paths = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = paths.clone();
    let record = tower::util::MapRequestLayer::new(move |request: hyper::Request<Body>| {
        seen.lock().unwrap().push(request.uri().path().to_owned());
        request
    });
    let client = ClientBuilder::try_from(config)
        .expect("builder")
        .with_layer(&record)
        .build();
    let discovery = Arc::new(KindDiscovery::new(client));
    let asks = (0..40).map(|i| {
        let discovery = discovery.clone();
        async move {
            match i % 2 {
                0 => discovery.kind("v1", "ConfigMap").await,
                _ => discovery.kind("apps/v1", "Deployment").await,
            }
        }
    });
    let answers = futures::future::join_all(asks).await;
    for (i, answer) in answers.into_iter().enumerate() {
        let (resource, caps) = answer.unwrap_or_else(|e| panic!("ask {i}: {e}"));
        let expected = if i % 2 == 0 { "configmaps" } else { "deployments" };
        assert_eq!(resource.plural, expected);
        assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    }
    let asked = |path: &str| paths.lock().unwrap().iter().filter(|p| *p == path).count();
    assert_eq!(asked("/api/v1"), 1, "{:?}", paths.lock().unwrap());
    assert_eq!(asked("/apis/apps/v1"), 1, "{:?}", paths.lock().unwrap());
    // A kind the answer lacks is an error, not a panic or a guess.
    let missing = discovery.kind("v1", "NoSuchKind").await;
    assert!(matches!(missing, Err(kube::Error::Discovery(_))), "{missing:?}");
    assert_eq!(asked("/api/v1"), 1, "a fresh answer's miss is not asked again at once");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert!(discovery.kind("v1", "NoSuchKind").await.is_err());
    assert_eq!(
        asked("/api/v1"),
        2,
        "a miss is asked again once the answer is a second old"
    );
    let unserved = discovery.kind("nothing.example.com/v1", "Thing").await;
    assert!(
        matches!(&unserved, Err(kube::Error::Api(status)) if status.code == 404),
        "a group/version not served is the apiserver's 404: {unserved:?}"
    );
}

/// kube-controller-manager runs with the plane: a new namespace gets its `default` ServiceAccount, and a deleted
/// namespace is emptied and goes away instead of staying Terminating.
#[tokio::test]
async fn namespaces_get_a_default_service_account_and_finish_deleting() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "ns-lifecycle").await;
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(client.clone(), &ns);
    eventually(Duration::from_secs(30), "the default ServiceAccount", || async {
        accounts.get_opt("default").await.ok().flatten()
    })
    .await;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let content = serde_json::from_value(json!({"metadata": {"name": "content"}})).expect("a ConfigMap");
    configmaps
        .create(&PostParams::default(), &content)
        .await
        .expect("create content");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let last = match namespaces.get_opt(&ns).await {
            Ok(None) => break,
            Ok(Some(namespace)) => format!(
                "phase {:?}, conditions {:?}",
                namespace.status.as_ref().and_then(|s| s.phase.clone()),
                namespace.status.and_then(|s| s.conditions).unwrap_or_default()
            ),
            Err(e) => format!("cannot read it: {e}"),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "namespace {ns} not deleted within 60 s; last seen: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
