//! The volume plugins on the real plane, side by side with kube-scheduler: a pod with a bound claim lands only on
//! a node its PersistentVolume's node affinity allows; CSINode attach limits reject a full node; an unbound
//! Immediate claim gives kube-scheduler's message, and the pod is placed once its claim is bound. The plane's
//! persistentvolume-binder completes the bindings. Pods waiting at PreBind for their volumes hold no binding slot.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::cluster_nodes::{KubeScheduler, create_node, delete_nodes, node, nodes_lock};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually, test_namespace, write_rule_file as write};

const ZONE: &str = "topology.kubernetes.io/zone";
const DRIVER: &str = "csi.volumes-test.example";

/// Where a scheduler put a pod, or its FailedScheduling message (the PodScheduled condition's, in full).
#[derive(Debug, PartialEq)]
enum Verdict {
    Bound(String),
    Unschedulable(String),
}

async fn verdict(pods: &Api<Pod>, name: &str) -> Verdict {
    eventually(Duration::from_secs(30), &format!("a decision on {name}"), || async {
        let pod = pods.get(name).await.ok()?;
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Some(Verdict::Bound(node));
        }
        let condition = pod
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
        Some(Verdict::Unschedulable(condition.message?))
    })
    .await
}

/// A CSI PersistentVolume of 1Gi allowing the nodes of `zones`, pre-bound to `namespace/claim`.
fn volume(name: &str, zones: &[String], namespace: &str, claim: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": DRIVER, "volumeHandle": name},
            "claimRef": {"namespace": namespace, "name": claim},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": zones}
            ]}]}}
        }
    }))
    .expect("volume")
}

fn claim(name: &str, volume: Option<&str>, class: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class, "volumeName": volume,
                 "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim")
}

fn pod(name: &str, scheduler: &str, claim: &str, extra: Value) -> Pod {
    let mut pod = json!({
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "pause"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        }
    });
    if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(pod).expect("pod")
}

async fn fully_bound(claims: &Api<PersistentVolumeClaim>, name: &str) {
    eventually(
        Duration::from_secs(30),
        &format!("{name} bound by the binder"),
        || async {
            let claim = claims.get(name).await.ok()?;
            let bound = claim.status?.phase.as_deref() == Some("Bound");
            let completed = claim
                .metadata
                .annotations?
                .contains_key("pv.kubernetes.io/bind-completed");
            (bound && completed).then_some(())
        },
    )
    .await;
}

/// Deletes the test's pods without a grace period and waits until they are gone.
async fn delete_pods_now(pods: &Api<Pod>) {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete_collection(&now, &ListParams::default())
        .await
        .expect("delete the test's pods");
    eventually(Duration::from_secs(30), "the test's pods gone", || async {
        pods.list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_plugins_place_and_refuse_pods_as_kube_scheduler() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-volumes").await;
    let run = std::process::id();
    let _nodes = nodes_lock().await;
    let [a, b, c] = ["a", "b", "c"].map(|n| format!("sv-{run}-{n}"));
    let zone = |n: &str| format!("zone-{n}");
    let mut names = Vec::new();
    for (name, z) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        names.push(create_node(&client, node(name, "4", "8Gi", json!({ZONE: zone(z)}), json!([]))).await);
    }
    // Node c attaches one volume of the driver, and already has one (the holder's).
    let csi_node: CSINode = serde_json::from_value(json!({
        "metadata": {"name": c},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": c, "allocatable": {"count": 1}}]}
    }))
    .expect("csinode");
    let csi_nodes = Api::<CSINode>::all(client.clone());
    csi_nodes
        .create(&PostParams::default(), &csi_node)
        .await
        .expect("create csinode");
    let volumes = Api::<PersistentVolume>::all(client.clone());
    let (pinned, used) = (format!("sv-{run}-pinned"), format!("sv-{run}-used"));
    for object in [
        volume(&pinned, &[zone("b"), zone("c")], &ns, "pinned"),
        volume(&used, &[zone("c")], &ns, "used"),
    ] {
        volumes
            .create(&PostParams::default(), &object)
            .await
            .expect("create volume");
    }
    let immediate = format!("sv-{run}-immediate");
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": immediate}, "provisioner": "example.com/nobody", "volumeBindingMode": "Immediate"
    }))
    .expect("class");
    let classes = Api::<StorageClass>::all(client.clone());
    classes
        .create(&PostParams::default(), &class)
        .await
        .expect("create class");
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    for object in [
        claim("pinned", Some(&pinned), ""),
        claim("used", Some(&used), ""),
        claim("waiting", None, &immediate),
    ] {
        claims
            .create(&PostParams::default(), &object)
            .await
            .expect("create claim");
    }
    fully_bound(&claims, "pinned").await;
    fully_bound(&claims, "used").await;
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    pods.create(
        &PostParams::default(),
        &pod("holder", "default-scheduler", "used", json!({"nodeName": c})),
    )
    .await
    .expect("create holder");

    let (ruleplane, kube) = (format!("rp-volumes-{run}"), format!("ks-volumes-{run}"));
    let dir = temp_dir("scheduler-volumes");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {ruleplane} }}\n\
             spec: {{ schedulerName: {ruleplane}, algorithmProvider: DefaultProvider }}\n"
        ),
    );
    let _manager = ManagerProcess::start(&dir, &ns, "sched-volumes", &[]);
    let _kube_scheduler = KubeScheduler::start(&dir, vec![json!({"schedulerName": kube})]);

    let in_zone_c = json!({"nodeSelector": {ZONE: zone("c")}});
    let cases = [
        ("pinned", "pinned", json!({})),
        ("limited", "pinned", in_zone_c),
        ("immediate", "waiting", json!({})),
    ];
    for (case, claim, extra) in &cases {
        for scheduler in [&ruleplane, &kube] {
            let name = format!("{case}-{}", &scheduler[..2]);
            pods.create(&PostParams::default(), &pod(&name, scheduler, claim, extra.clone()))
                .await
                .expect("create pod");
        }
    }
    let mut verdicts = Vec::new();
    for (case, _, _) in &cases {
        let ours = verdict(&pods, &format!("{case}-rp")).await;
        let theirs = verdict(&pods, &format!("{case}-ks")).await;
        assert_eq!(
            ours, theirs,
            "{case}: Ruleplane (left) and kube-scheduler (right) disagree"
        );
        verdicts.push(ours);
    }
    assert_eq!(
        verdicts[0],
        Verdict::Bound(b.clone()),
        "only b is allowed by the volume and has room"
    );
    let Verdict::Unschedulable(limited) = &verdicts[1] else {
        panic!("limited: {:?}", verdicts[1])
    };
    assert!(
        limited.starts_with(
            "0/3 nodes are available: 1 node(s) exceed max volume count, 2 node(s) didn't match Pod's node \
             affinity/selector."
        ),
        "{limited}"
    );
    let Verdict::Unschedulable(unbound) = &verdicts[2] else {
        panic!("immediate: {:?}", verdicts[2])
    };
    assert!(
        unbound.starts_with("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."),
        "{unbound}"
    );

    // The claim gets a volume (pre-bound, in zone a) and the binder binds it (at its periodic claim sync, up to 15 s):
    // the claim's update is the event VolumeBinding's hint retries the pods on; both schedulers place them on a.
    let late = format!("sv-{run}-late");
    let mut late_volume = volume(&late, &[zone("a")], &ns, "waiting");
    late_volume.spec.as_mut().expect("spec").storage_class_name = Some(immediate.clone());
    volumes
        .create(&PostParams::default(), &late_volume)
        .await
        .expect("create late volume");
    fully_bound(&claims, "waiting").await;
    for scheduler in ["rp", "ks"] {
        let name = format!("immediate-{scheduler}");
        let placed = eventually(Duration::from_secs(30), &format!("{name} placed"), || async {
            pods.get(&name).await.ok()?.spec?.node_name
        })
        .await;
        assert_eq!(placed, a, "{name}");
    }

    // The pending pods go first: once the holder is gone, node c would have room for `limited` and a scheduler
    // could bind it to a node about to be deleted, leaving a pod on a missing node for later tests.
    delete_pods_now(&pods).await;
    delete_nodes(&client, &names).await;
    let _ = csi_nodes.delete(&c, &DeleteParams::default()).await;
    for name in [&pinned, &used, &late] {
        let _ = volumes.delete(name, &DeleteParams::default()).await;
    }
    let _ = classes.delete(&immediate, &DeleteParams::default()).await;
}

/// VolumeBinding's Reserve and PreBind for WaitForFirstConsumer claims: a claim matching a static local volume puts
/// its pod on the volume's node and the binder binds the pair; a claim to provision gets the selected node (the
/// pod nominated there meanwhile) and the pod is bound once the test, playing the provisioner, binds the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_claims_are_bound_before_the_pod() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-prebind").await;
    let run = std::process::id();
    let _nodes = nodes_lock().await;
    let [a, b] = ["a", "b"].map(|n| format!("pb-{run}-{n}"));
    let mut names = Vec::new();
    for (name, z) in [(&a, "a"), (&b, "b")] {
        names.push(
            create_node(
                &client,
                node(name, "4", "8Gi", json!({ZONE: format!("pb-{run}-{z}")}), json!([])),
            )
            .await,
        );
    }
    let (local, dynamic) = (format!("pb-{run}-local"), format!("pb-{run}-dynamic"));
    let classes = Api::<StorageClass>::all(client.clone());
    for (name, provisioner) in [
        (&local, "kubernetes.io/no-provisioner"),
        (&dynamic, "example.com/test-provisioner"),
    ] {
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"
        }))
        .expect("class");
        classes
            .create(&PostParams::default(), &class)
            .await
            .expect("create class");
    }
    // A local volume on node b only, free (no claimRef): the Filter matches it, Reserve assumes it for the claim.
    let volumes = Api::<PersistentVolume>::all(client.clone());
    let on_b = format!("pb-{run}-on-b");
    let static_volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": on_b},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": local,
            "persistentVolumeReclaimPolicy": "Retain", "local": {"path": "/data"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [b]}
            ]}]}}
        }
    }))
    .expect("volume");
    volumes
        .create(&PostParams::default(), &static_volume)
        .await
        .expect("create volume");
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    for object in [
        claim("static", None, &local),
        claim("provisioned", None, &dynamic),
        claim("abandoned", None, &dynamic),
    ] {
        claims
            .create(&PostParams::default(), &object)
            .await
            .expect("create claim");
    }
    let ruleplane = format!("rp-prebind-{run}");
    let dir = temp_dir("scheduler-prebind");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {ruleplane} }}\n\
             spec: {{ schedulerName: {ruleplane}, algorithmProvider: DefaultProvider }}\n"
        ),
    );
    // A second policy waits 2 s for its claims: nobody provisions `abandoned`.
    let impatient = format!("rp-prebind-short-{run}");
    write(
        &dir,
        "impatient.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {impatient} }}\n\
             spec: {{ schedulerName: {impatient}, algorithmProvider: DefaultProvider,\n\
             pluginArgs: {{ VolumeBinding: {{ bindTimeoutSeconds: 2 }} }} }}\n"
        ),
    );
    let _manager = ManagerProcess::start(&dir, &ns, "sched-prebind", &[]);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let in_a = json!({"nodeSelector": {ZONE: format!("pb-{run}-a")}});
    for (name, scheduler, extra) in [
        ("static", &ruleplane, json!({})),
        ("provisioned", &ruleplane, in_a.clone()),
        ("abandoned", &impatient, in_a),
    ] {
        pods.create(&PostParams::default(), &pod(name, scheduler, name, extra))
            .await
            .expect("create pod");
    }

    // Static: the pod lands on b, the volume names the claim and the binder completes the pair.
    let placed = eventually(Duration::from_secs(30), "static placed", || async {
        pods.get("static").await.ok()?.spec?.node_name
    })
    .await;
    assert_eq!(placed, b, "the only node the free volume allows");
    fully_bound(&claims, "static").await;
    let bound = claims.get("static").await.expect("claim");
    assert_eq!(bound.spec.and_then(|s| s.volume_name).as_deref(), Some(on_b.as_str()));
    let volume = volumes.get(&on_b).await.expect("volume");
    let reference = volume.spec.and_then(|s| s.claim_ref).expect("claimRef");
    assert_eq!(
        (reference.namespace.as_deref(), reference.name.as_deref()),
        (Some(ns.as_str()), Some("static"))
    );

    // Dynamic: the claim is marked for node a, the pod is nominated there and waits.
    let selected = eventually(Duration::from_secs(30), "the selected-node annotation", || async {
        claims
            .get("provisioned")
            .await
            .ok()?
            .metadata
            .annotations?
            .get("volume.kubernetes.io/selected-node")
            .cloned()
    })
    .await;
    assert_eq!(selected, a);
    let waiting = eventually(Duration::from_secs(10), "the nomination", || async {
        let pod = pods.get("provisioned").await.ok()?;
        let node = pod.spec.and_then(|s| s.node_name);
        pod.status?.nominated_node_name.map(|n| (n, node))
    })
    .await;
    assert_eq!(waiting, (a.clone(), None), "nominated, not bound before its claim");
    // The test provisions: a volume pre-bound to the claim, and the claim bound to it.
    let claim_now = claims.get("provisioned").await.expect("claim");
    let provisioned = format!("pb-{run}-provisioned");
    let new_volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": provisioned},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": dynamic,
            "persistentVolumeReclaimPolicy": "Retain", "csi": {"driver": DRIVER, "volumeHandle": provisioned},
            "claimRef": {"namespace": ns, "name": "provisioned", "uid": claim_now.metadata.uid}
        }
    }))
    .expect("volume");
    volumes
        .create(&PostParams::default(), &new_volume)
        .await
        .expect("create provisioned volume");
    let mut bound_claim = claim_now;
    bound_claim.spec.as_mut().expect("spec").volume_name = Some(provisioned.clone());
    bound_claim
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
    claims
        .replace("provisioned", &PostParams::default(), &bound_claim)
        .await
        .expect("bind the claim");
    let placed = eventually(Duration::from_secs(30), "provisioned placed", || async {
        pods.get("provisioned").await.ok()?.spec?.node_name
    })
    .await;
    assert_eq!(placed, a);

    // Not provisioned within 2 s: kube-scheduler's binding-cycle error, the nomination cleared, the pod unbound
    // (and retried after its backoff).
    let Verdict::Unschedulable(message) = verdict(&pods, "abandoned").await else {
        panic!("abandoned was bound without its claim")
    };
    assert_eq!(
        message,
        "running PreBind plugin \"VolumeBinding\": binding volumes: context deadline exceeded"
    );

    delete_pods_now(&pods).await;
    delete_nodes(&client, &names).await;
    let _ = claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    for name in [&on_b, &provisioned] {
        let _ = volumes.delete(name, &DeleteParams::default()).await;
    }
    for name in [&local, &dynamic] {
        let _ = classes.delete(name, &DeleteParams::default()).await;
    }
}

/// A pod waiting at PreBind for a provisioner (up to `bindTimeoutSeconds`) gives its binding slot back: 40 pods whose
/// claims nobody provisions all reach PreBind (more than the policy's 32 bindings in flight), and a plain pod
/// created after them is bound at once, as kube-scheduler (which has no such cap) binds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_waiting_for_their_volumes_do_not_hold_up_other_bindings() {
    const WAITING: usize = 40;
    let client = admin_client().await;
    let ns = test_namespace(&client, "scheduler-prebind-slots").await;
    let run = std::process::id();
    let _nodes = nodes_lock().await;
    let name = format!("ps-{run}-a");
    let names = vec![create_node(&client, node(&name, "4", "8Gi", json!({}), json!([]))).await];
    let never = format!("ps-{run}-never");
    let classes = Api::<StorageClass>::all(client.clone());
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": never}, "provisioner": "example.com/nobody", "volumeBindingMode": "WaitForFirstConsumer"
    }))
    .expect("class");
    classes
        .create(&PostParams::default(), &class)
        .await
        .expect("create class");
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    for i in 0..WAITING {
        claims
            .create(&PostParams::default(), &claim(&format!("data-{i}"), None, &never))
            .await
            .expect("create claim");
    }
    let ruleplane = format!("rp-prebind-slots-{run}");
    let dir = temp_dir("scheduler-prebind-slots");
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {ruleplane} }}\n\
             spec: {{ schedulerName: {ruleplane}, algorithmProvider: DefaultProvider }}\n"
        ),
    );
    let _manager = ManagerProcess::start(&dir, &ns, "sched-prebind-slots", &[]);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    for i in 0..WAITING {
        pods.create(
            &PostParams::default(),
            &pod(&format!("waiting-{i}"), &ruleplane, &format!("data-{i}"), json!({})),
        )
        .await
        .expect("create pod");
    }
    // Every claim is handed to the (absent) provisioner: every pod is past its cycle, waiting at PreBind.
    let selected = eventually(Duration::from_secs(60), "every claim's selected node", || async {
        let list = claims.list(&ListParams::default()).await.ok()?;
        let selected = list
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("volume.kubernetes.io/selected-node"))
            })
            .count();
        (selected == WAITING).then_some(selected)
    })
    .await;
    assert_eq!(selected, WAITING);
    let plain: Pod = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {"schedulerName": ruleplane, "containers": [{"name": "c", "image": "pause"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &plain)
        .await
        .expect("create plain pod");
    let placed = eventually(Duration::from_secs(10), "the plain pod bound", || async {
        pods.get("plain").await.ok()?.spec?.node_name
    })
    .await;
    assert_eq!(placed, name);
    for i in [0, WAITING - 1] {
        let waiting = pods.get(&format!("waiting-{i}")).await.expect("pod");
        assert_eq!(
            waiting.spec.and_then(|s| s.node_name),
            None,
            "waiting-{i} is not bound without its claim"
        );
    }

    delete_pods_now(&pods).await;
    delete_nodes(&client, &names).await;
    let _ = claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let _ = classes.delete(&never, &DeleteParams::default()).await;
}
