//! Volume fidelity on a seeded random corpus: nodes with zone and region labels and CSINode attach limits,
//! StorageClasses of both binding modes (a CSI provisioner, allowed topologies, a no-provisioner local class, a
//! second CSI provisioner whose CSIDriver requires it on the node's CSINode),
//! local and CSI PersistentVolumes (node affinity, sizes, access modes with ReadWriteOncePod, some pre-bound),
//! claims bound, unbound Immediate and WaitForFirstConsumer, and pods using up to three of them (plus inline CSI
//! and generic ephemeral volumes) with CPU requests that do not always fit. Each pod is decided by the real
//! kube-scheduler of the plane's version and predicted by a `DefaultProvider` policy's engine from the same cluster state: bound or
//! not, and the whole FailedScheduling text, must be kube-scheduler's, and kube-scheduler's node must be one the
//! engine finds feasible.
//!
//! `RULEPLANE_VOLUME_CORPUS_PODS` (default 24) and `RULEPLANE_VOLUME_CORPUS_SEED` size and seed it;
//! `tests/bench/scheduler-fidelity.sh` runs the large version.
//!
//! The plane's persistentvolume-binder completes the pre-bound pairs at setup and the static bindings
//! kube-scheduler's PreBind writes. Nothing provisions on the plane: the test plays the CSI provisioner, as
//! `scheduler_volumes.rs` does, for a claim kube-scheduler marked with `volume.kubernetes.io/selected-node` (a
//! volume in the selected node's zone, pre-bound to the claim, and the claim bound to it). The plane's
//! ephemeral-volume-controller creates a generic ephemeral volume's claim; its pod is created behind a scheduling
//! gate lifted once the claim exists, so that both decide with it there.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ruleplane_config::SchedulerPolicy;
use ruleplane_config::scheduler::engine::{CsiObjects, Snapshot, SplitMix64, Storage};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::cluster_nodes::{KubeScheduler, create_node, delete_nodes, node, nodes_lock};
use crate::support::{admin_client, plane_version, test_namespace};

const NODES: usize = 6;
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const HOSTNAME: &str = "kubernetes.io/hostname";
const DRIVER: &str = "csi.volume-corpus.example";
/// A second driver whose CSIDriver sets `preventPodSchedulingIfMissing` (v1.37's VolumeLimitScaling: a node whose
/// CSINode does not list it takes none of its new volumes; the apiserver drops the field before v1.37).
const STRICT_DRIVER: &str = "strict.volume-corpus.example";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const SIZES: [&str; 3] = ["1Gi", "2Gi", "5Gi"];

/// The seeded generator of the corpus's objects.
struct Corpus {
    rng: SplitMix64,
    run: String,
}

impl Corpus {
    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.rng.below(options.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.rng.below(100) < percent
    }

    fn class(&self, kind: &str) -> String {
        format!("vc-{}-{kind}", self.run)
    }

    /// Access modes of a volume or claim: mostly ReadWriteOnce, some ReadWriteOncePod.
    fn access_modes(&mut self) -> Value {
        if self.chance(25) {
            json!(["ReadWriteOncePod"])
        } else {
            json!(["ReadWriteOnce"])
        }
    }

    /// A required node affinity: one node (local volumes) or one or two zones (CSI volumes).
    fn affinity(key: &str, values: &[&str]) -> Value {
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": values}
        ]}]}})
    }

    /// A volume of `class` (local on one node, or CSI in some zones), optionally pre-bound to `claim`.
    fn volume(
        &mut self,
        name: &str,
        class: &str,
        local_on: Option<&str>,
        access_modes: Value,
        claim: Option<(&str, &str)>,
    ) -> PersistentVolume {
        let mut spec = json!({
            "capacity": {"storage": self.pick(&["1Gi", "2Gi", "5Gi", "10Gi"])},
            "accessModes": access_modes, "storageClassName": class, "persistentVolumeReclaimPolicy": "Retain",
        });
        let mut labels = json!({});
        match local_on {
            Some(node) => {
                spec["local"] = json!({"path": "/data"});
                spec["nodeAffinity"] = Corpus::affinity(HOSTNAME, &[node]);
            }
            None => {
                spec["csi"] = json!({"driver": DRIVER, "volumeHandle": name});
                let zones: Vec<&str> = if self.chance(30) {
                    vec!["zone-a", "zone-b"]
                } else {
                    vec![self.pick(&["zone-a", "zone-b", "zone-c"])]
                };
                spec["nodeAffinity"] = Corpus::affinity(ZONE, &zones);
                // VolumeZone reads the labels of a bound claim's volume.
                if zones.len() == 1 && self.chance(50) {
                    labels[ZONE] = json!(zones[0]);
                }
            }
        }
        if let Some((namespace, claim)) = claim {
            spec["claimRef"] = json!({"namespace": namespace, "name": claim});
        }
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec})).expect("volume")
    }

    fn claim(&mut self, name: &str, class: &str, volume: Option<&str>, access_modes: Value) -> PersistentVolumeClaim {
        let request = self.pick(&SIZES);
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"accessModes": access_modes, "storageClassName": class, "volumeName": volume,
                     "resources": {"requests": {"storage": request}}}
        }))
        .expect("claim")
    }
}

/// What a scheduler did with a pod: bound to a node, or its PodScheduled=False message.
#[derive(Debug, PartialEq)]
enum Verdict {
    Bound(String),
    Unschedulable(String),
}

async fn list<T>(api: Api<T>) -> Vec<T>
where
    T: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default()).await.expect("list").items
}

/// Every node, every bound pod not being deleted, and every storage object, as kube-scheduler's informers hold them.
async fn snapshot(client: &Client) -> Snapshot {
    // Nodes first: another test deletes its pods before its nodes, so every pod listed after is on a listed node
    // (one on a node gone meanwhile is left out).
    let nodes = list(Api::<Node>::all(client.clone())).await;
    let names: BTreeSet<String> = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    let pods: Vec<Pod> = list(Api::<Pod>::all(client.clone()))
        .await
        .into_iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| names.contains(n))
        })
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let mut snapshot = Snapshot::build(nodes, pods).expect("snapshot");
    let storage = Storage::new(
        list(Api::<PersistentVolumeClaim>::all(client.clone())).await,
        list(Api::<PersistentVolume>::all(client.clone())).await,
        list(Api::<StorageClass>::all(client.clone())).await,
    )
    .with_csi(CsiObjects {
        nodes: list(Api::<CSINode>::all(client.clone())).await,
        drivers: list(Api::<CSIDriver>::all(client.clone())).await,
        capacities: list(Api::<CSIStorageCapacity>::all(client.clone())).await,
        attachments: list(Api::<VolumeAttachment>::all(client.clone())).await,
    });
    snapshot.set_storage(storage);
    snapshot
}

/// The claims a pod uses: named, or its generic ephemeral volumes' `<pod>-<volume>`.
fn claims_of(pod: &Pod) -> Vec<String> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(claim), _) => Some(claim.claim_name.clone()),
            (None, Some(_)) => Some(format!("{name}-{}", v.name)),
            _ => None,
        })
        .collect()
}

/// The gate an ephemeral volume's pod is created with, lifted once the controller has created its claim.
const GATE: &str = "ruleplane.dev/volume-corpus";

/// Waits for kube-scheduler's verdict on a pod, playing the provisioner for the claims it selected a node for.
async fn kube_verdict(
    client: &Client,
    namespace: &str,
    pod: &Pod,
    zone_of: &dyn Fn(&str) -> String,
    provisioned: &mut Vec<String>,
) -> Verdict {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    let volumes = Api::<PersistentVolume>::all(client.clone());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let current = pods.get(&name).await.expect("get pod");
        if let Some(node) = current.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Verdict::Bound(node);
        }
        let message = current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            // Still the gate's condition, from before it was lifted.
            .filter(|c| c.reason.as_deref() != Some("SchedulingGated"))
            .and_then(|c| c.message);
        if let Some(message) = message {
            return Verdict::Unschedulable(message);
        }
        for claim_name in claims_of(pod) {
            let mut claim = claims.get(&claim_name).await.expect("get claim");
            let selected = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SELECTED_NODE))
                .cloned();
            let unbound = claim.spec.as_ref().and_then(|s| s.volume_name.as_ref()).is_none();
            let (Some(node), true) = (selected, unbound) else {
                continue;
            };
            // The provisioner: a CSI volume in the selected node's zone, pre-bound to the claim, and the claim bound.
            let volume_name = format!("{}-{claim_name}", namespace);
            let spec = claim.spec.clone().unwrap_or_default();
            let driver = match spec.storage_class_name.as_deref() {
                Some(class) if class.ends_with("-strict") => STRICT_DRIVER,
                _ => DRIVER,
            };
            let size = spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .map(|q| q.0.clone())
                .unwrap_or_else(|| "1Gi".into());
            let volume: PersistentVolume = serde_json::from_value(json!({
                "metadata": {"name": volume_name},
                "spec": {
                    "capacity": {"storage": size}, "accessModes": spec.access_modes,
                    "storageClassName": spec.storage_class_name, "persistentVolumeReclaimPolicy": "Retain",
                    "csi": {"driver": driver, "volumeHandle": volume_name},
                    "nodeAffinity": Corpus::affinity(ZONE, &[&zone_of(&node)]),
                    "claimRef": {"namespace": namespace, "name": claim_name, "uid": claim.metadata.uid}
                }
            }))
            .expect("provisioned volume");
            // Already there when an earlier try lost its claim update to a concurrent writer.
            match volumes.create(&PostParams::default(), &volume).await {
                Ok(_) => provisioned.push(volume_name.clone()),
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => panic!("create provisioned volume: {error}"),
            }
            claim.spec.as_mut().expect("spec").volume_name = Some(volume_name);
            claim
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(BIND_COMPLETED.into(), "yes".into());
            // A conflict (the binder or kube-scheduler wrote the claim meanwhile) is retried on the next look.
            match claims.replace(&claim_name, &PostParams::default(), &claim).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => panic!("bind the provisioned claim: {error}"),
            }
        }
        assert!(Instant::now() < deadline, "kube-scheduler did not decide on {name}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the binder has completed every claim expected bound at setup.
async fn settle(claims: &Api<PersistentVolumeClaim>, expected_bound: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let all = claims.list(&ListParams::default()).await.expect("claims").items;
        let pending: Vec<&String> = expected_bound
            .iter()
            .filter(|name| {
                !all.iter().any(|c| {
                    c.metadata.name.as_ref() == Some(*name)
                        && c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
                        && c.metadata
                            .annotations
                            .as_ref()
                            .is_some_and(|a| a.contains_key(BIND_COMPLETED))
                })
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "the binder did not bind {pending:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_decisions_match_kube_scheduler_on_a_random_corpus() {
    let count: usize = std::env::var("RULEPLANE_VOLUME_CORPUS_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let seed: u64 = std::env::var("RULEPLANE_VOLUME_CORPUS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2026);
    let client = admin_client().await;
    // The engine behaves as the plane's kube-scheduler: the apiserver's minor.
    let version = plane_version(&client).await;
    let namespace = test_namespace(&client, "volume-corpus").await;
    let run = format!("{}-{seed}", std::process::id());
    let scheduler = format!("volume-corpus-{run}");
    let dir = crate::support::manager::temp_dir(&format!("volume-corpus-{run}"));
    let mut corpus = Corpus {
        rng: SplitMix64::new(seed),
        run: run.clone(),
    };

    let _nodes = nodes_lock().await;
    let mut node_names = Vec::new();
    let mut zones = Vec::new();
    let csi_nodes = Api::<CSINode>::all(client.clone());
    for index in 0..NODES {
        let name = format!("vc-{run}-{index}");
        let zone = corpus.pick(&["zone-a", "zone-b", "zone-c"]);
        let region = if zone == "zone-c" { "region-2" } else { "region-1" };
        let cpu = corpus.pick(&["2", "4"]);
        node_names.push(
            create_node(
                &client,
                node(&name, cpu, "8Gi", json!({ZONE: zone, REGION: region}), json!([])),
            )
            .await,
        );
        zones.push(zone.to_string());
        // Most nodes attach a few volumes of the driver; the others have no CSINode (no limit).
        // Half the nodes with a CSINode also run the strict driver, some with a limit of their own.
        if corpus.chance(75) {
            let count = 1 + corpus.rng.below(3);
            let mut drivers = vec![json!({"name": DRIVER, "nodeID": name, "topologyKeys": [ZONE],
                                          "allocatable": {"count": count}})];
            if corpus.chance(50) {
                let mut strict = json!({"name": STRICT_DRIVER, "nodeID": name, "topologyKeys": [ZONE]});
                if corpus.chance(50) {
                    strict["allocatable"] = json!({"count": 1 + corpus.rng.below(2)});
                }
                drivers.push(strict);
            }
            let object: CSINode = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"drivers": drivers}
            }))
            .expect("csinode");
            csi_nodes
                .create(&PostParams::default(), &object)
                .await
                .expect("create csinode");
        }
    }
    let zone_of = |node: &str| {
        node_names
            .iter()
            .position(|n| n == node)
            .map(|i| zones[i].clone())
            .unwrap_or_default()
    };

    let drivers = Api::<CSIDriver>::all(client.clone());
    let strict: CSIDriver = serde_json::from_value(json!({
        "metadata": {"name": STRICT_DRIVER}, "spec": {"preventPodSchedulingIfMissing": true}
    }))
    .expect("csidriver");
    let _ = drivers.delete(STRICT_DRIVER, &DeleteParams::default()).await;
    drivers
        .create(&PostParams::default(), &strict)
        .await
        .expect("create csidriver");

    // The classes: Immediate and WaitForFirstConsumer with the CSI provisioner (one limited to zones a and b),
    // local volumes (no provisioner), and WaitForFirstConsumer with the strict driver.
    let classes = Api::<StorageClass>::all(client.clone());
    const CLASSES: [&str; 5] = ["immediate", "wffc", "zoned", "local", "strict"];
    let class_names: Vec<String> = CLASSES.iter().map(|k| corpus.class(k)).collect();
    for (kind, name) in CLASSES.iter().zip(&class_names) {
        let provisioner = match *kind {
            "local" => "kubernetes.io/no-provisioner",
            "strict" => STRICT_DRIVER,
            _ => DRIVER,
        };
        let mut class = json!({
            "metadata": {"name": name},
            "provisioner": provisioner,
            "volumeBindingMode": if *kind == "immediate" { "Immediate" } else { "WaitForFirstConsumer" },
        });
        if *kind == "zoned" {
            class["allowedTopologies"] =
                json!([{"matchLabelExpressions": [{"key": ZONE, "values": ["zone-a", "zone-b"]}]}]);
        }
        classes
            .create(&PostParams::default(), &serde_json::from_value(class).expect("class"))
            .await
            .expect("create class");
    }
    let [immediate, wffc, zoned, local, strict] = [0, 1, 2, 3, 4].map(|i| class_names[i].clone());

    // Volumes first, then claims: a claim's creation is the binder's cue to bind it to its pre-bound volume.
    let volumes = Api::<PersistentVolume>::all(client.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &namespace);
    let mut volume_names = Vec::new();
    let mut claim_objects = Vec::new();
    let mut expected_bound = Vec::new();
    let claim_count = 3 * NODES;
    for index in 0..claim_count {
        let claim_name = format!("c-{index}");
        let access_modes = corpus.access_modes();
        // A third pre-bound, a sixth Immediate and never bound, the rest WaitForFirstConsumer.
        let kind = index % 6;
        let claim = if kind < 2 {
            // Pre-bound: a volume naming the claim, the claim sometimes naming the volume too.
            let class = corpus.pick(&["", local.as_str(), wffc.as_str()]).to_string();
            let volume_name = format!("vc-{run}-bound-{index}");
            let on = (class == local).then(|| node_names[corpus.rng.below(NODES)].clone());
            let mut volume = corpus.volume(
                &volume_name,
                &class,
                on.as_deref(),
                access_modes.clone(),
                Some((&namespace, &claim_name)),
            );
            // Big enough for any request.
            volume.spec.as_mut().expect("spec").capacity = Some(
                [(
                    "storage".to_string(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity("10Gi".into()),
                )]
                .into(),
            );
            volumes
                .create(&PostParams::default(), &volume)
                .await
                .expect("create volume");
            volume_names.push(volume_name.clone());
            expected_bound.push(claim_name.clone());
            let named = corpus.chance(50).then_some(volume_name.as_str());
            corpus.claim(&claim_name, &class, named, access_modes)
        } else if kind == 2 {
            // Immediate and never bound: nothing provisions on the plane.
            corpus.claim(&claim_name, &immediate, None, access_modes)
        } else {
            let class = corpus
                .pick(&[wffc.as_str(), zoned.as_str(), local.as_str(), strict.as_str()])
                .to_string();
            corpus.claim(&claim_name, &class, None, access_modes)
        };
        claim_objects.push(claim);
    }
    // Free volumes for the WaitForFirstConsumer claims to match: local ones on random nodes, CSI ones in zones.
    for index in 0..2 * NODES {
        let name = format!("vc-{run}-free-{index}");
        let access_modes = corpus.access_modes();
        let volume = if corpus.chance(50) {
            let on = node_names[corpus.rng.below(NODES)].clone();
            corpus.volume(&name, &local, Some(&on), access_modes, None)
        } else {
            let class = corpus.pick(&[wffc.as_str(), zoned.as_str()]).to_string();
            corpus.volume(&name, &class, None, access_modes, None)
        };
        volumes
            .create(&PostParams::default(), &volume)
            .await
            .expect("create volume");
        volume_names.push(name);
    }
    for claim in &claim_objects {
        claims
            .create(&PostParams::default(), claim)
            .await
            .expect("create claim");
    }
    settle(&claims, &expected_bound).await;

    let policy_rule = format!(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: volumes }}\n\
         spec:\n  schedulerName: {scheduler}\n  algorithmProvider: DefaultProvider\n"
    );
    let rules = ruleplane_config::load_str("policy.yaml", &policy_rule).expect("policy loads");
    let policy: &SchedulerPolicy = rules.scheduler_policies().next().expect("one policy");
    // Started after the setup: kube-scheduler's first decision sees the same objects as the engine's.
    let kube_scheduler = KubeScheduler::start(&dir, vec![json!({"schedulerName": scheduler})]);
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);

    let started = Instant::now();
    let mut differences = Vec::new();
    let mut provisioned = Vec::new();
    let (mut bound, mut unschedulable, mut with_claims, mut ephemeral_bound) = (0, 0, 0, 0);
    let mut reasons = BTreeMap::new();
    // Bound pods still running: each finishes (is deleted) at random before a later pod comes, so that the nodes do
    // not fill up for good.
    // Drawn apart, so that the pods themselves are the same for a seed whatever the ties broken on the way.
    let mut lifetimes = SplitMix64::new(seed.wrapping_add(1));
    let mut running: Vec<String> = Vec::new();
    for index in 0..count {
        let mut still_running = Vec::new();
        for pod in running.drain(..) {
            if lifetimes.below(4) == 0 {
                pods.delete(&pod, &DeleteParams::default().grace_period(0))
                    .await
                    .expect("delete pod");
            } else {
                still_running.push(pod);
            }
        }
        running = still_running;
        let name = format!("p-{index}");
        let mut volumes_json = Vec::new();
        let uses = corpus.rng.below(4);
        let mut used = BTreeSet::new();
        for _ in 0..uses {
            used.insert(corpus.rng.below(claim_count));
        }
        for claim in &used {
            volumes_json.push(
                json!({"name": format!("v{claim}"), "persistentVolumeClaim": {"claimName": format!("c-{claim}")}}),
            );
        }
        if corpus.chance(15) {
            volumes_json.push(json!({"name": "inline", "csi": {"driver": DRIVER}}));
        }
        let ephemeral = corpus.chance(8);
        if ephemeral {
            volumes_json.push(
                json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": wffc,
                "resources": {"requests": {"storage": "1Gi"}}}}}}),
            );
        }
        with_claims += usize::from(!used.is_empty());
        let cpu = corpus.pick(&["250m", "500m", "1", "2"]);
        // A pod with an ephemeral volume waits behind a scheduling gate until the ephemeral volume controller has
        // created its claim (owned by the pod: the engine needs the pod's UID), so both decide with the claim there.
        let gates = if ephemeral { json!([{"name": GATE}]) } else { json!([]) };
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedulerName": scheduler, "terminationGracePeriodSeconds": 0, "schedulingGates": gates,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                "volumes": volumes_json
            }
        }))
        .expect("pod");
        if ephemeral {
            pod = pods.create(&PostParams::default(), &pod).await.expect("create pod");
            let claim = format!("{name}-scratch");
            let deadline = Instant::now() + Duration::from_secs(30);
            while claims.get_opt(&claim).await.expect("get claim").is_none() {
                assert!(
                    Instant::now() < deadline,
                    "the ephemeral volume controller did not create {claim}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            pod.spec.as_mut().expect("spec").scheduling_gates = None;
        }
        let cluster = snapshot(&client).await;
        let mut engine = policy.engine_with_post_filters(seed, version).expect("engine");
        engine.nominate_only_for([scheduler.clone()].into());
        let decision = engine.schedule(&cluster, &pod).expect("engine decides");
        if ephemeral {
            let lift = json!({"spec": {"schedulingGates": null}});
            pods.patch(&name, &PatchParams::default(), &Patch::Merge(&lift))
                .await
                .expect("lift the gate");
        } else {
            pods.create(&PostParams::default(), &pod).await.expect("create pod");
        }
        let verdict = kube_verdict(&client, &namespace, &pod, &zone_of, &mut provisioned).await;
        let ours = decision.event_message();
        let scratch = if ephemeral { ", an ephemeral volume" } else { "" };
        println!("{name} ({cpu} CPU, claims {used:?}{scratch}): {verdict:?}");
        if ephemeral && matches!(verdict, Verdict::Bound(_)) {
            ephemeral_bound += 1;
        }
        match (&verdict, decision.chosen()) {
            (Verdict::Bound(node), Some(_)) => {
                bound += 1;
                // Ties among equal nodes are broken at random by both: kube-scheduler's node must be feasible.
                let feasible = decision.node(node).is_some_and(|n| n.rejection.is_none());
                if !feasible {
                    differences.push(format!(
                        "{name}: kube-scheduler chose {node}, which the engine rejects: {:?}",
                        decision.node(node).map(|n| &n.rejection)
                    ));
                }
            }
            (Verdict::Unschedulable(message), None) => {
                unschedulable += 1;
                let reason = message.split(" no new claims").next().unwrap_or_default();
                *reasons.entry(reason.replace(&name, "<pod>")).or_insert(0) += 1;
                if ours.as_deref() != Some(message.as_str()) {
                    differences.push(format!(
                        "{name}: messages differ\n  kube-scheduler: {message}\n  engine:         {ours:?}"
                    ));
                }
            }
            (verdict, chosen) => differences.push(format!(
                "{name}: kube-scheduler {verdict:?}, engine {chosen:?} / {ours:?}"
            )),
        }
        // An unschedulable pod is deleted so that a retry cannot bind it behind the engine's back.
        if matches!(verdict, Verdict::Unschedulable(_)) {
            pods.delete(&name, &DeleteParams::default().grace_period(0))
                .await
                .expect("delete pod");
        } else {
            running.push(name);
        }
    }
    println!(
        "volume corpus: {count} pods ({with_claims} with claims, {bound} bound ({ephemeral_bound} with an ephemeral \
         volume), {unschedulable} unschedulable, {} claims provisioned by the test), {NODES} nodes, seed {seed}, \
         {:.1} s, {} differences",
        provisioned.len(),
        started.elapsed().as_secs_f64(),
        differences.len()
    );
    for (reason, pods) in &reasons {
        println!("  {pods:>3} × {reason}");
    }
    drop(kube_scheduler);

    let now = DeleteParams::default().grace_period(0);
    let _ = pods.delete_collection(&now, &ListParams::default()).await;
    delete_nodes(&client, &node_names).await;
    let _ = claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    for name in volume_names.iter().chain(&provisioned) {
        let _ = volumes.delete(name, &DeleteParams::default()).await;
    }
    for name in &node_names {
        let _ = csi_nodes.delete(name, &DeleteParams::default()).await;
    }
    for name in &class_names {
        let _ = classes.delete(name, &DeleteParams::default()).await;
    }
    let _ = drivers.delete(STRICT_DRIVER, &DeleteParams::default()).await;
    assert!(bound > 0 && unschedulable > 0, "the corpus exercises both outcomes");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
