//! `ruleplane simulate`, pure: a policy places pods one after another on a snapshot, each placement seen by the
//! next, and reports what the scheduler would decide (the JSON contract of docs/scheduler.md).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::cosched::POD_GROUP_API;
use super::engine::snapshot::pod_ref;
use super::engine::{CsiObjects, Snapshot, Storage};
use super::gang::WorkloadApi;
use super::resolved::SchedulerPolicy;
use super::simulate_gangs::{Gangs, Popped};
pub use super::simulate_gangs::{PodGroupObject, WorkloadObject, WorkloadRefs};
use super::simulate_place::Placer;
pub use super::simulate_place::{
    FilterOutcome, NodeExplanation, Placement, PreemptionReport, ScoreOutcome, SimulateError, Simulation,
};

/// The objects of one kind in parsed documents: plain objects, `List`s and `<Kind>List`s (what `kubectl get -o
/// yaml` prints), in order. Objects without `kind` inside a list are taken as `kind`.
pub fn objects_of_kind<T: DeserializeOwned>(
    documents: Vec<Value>,
    kind: &'static str,
) -> Result<Vec<T>, SimulateError> {
    let mut objects = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        let number = i + 1;
        let found_kind = document
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let items = match document {
            Value::Object(mut map) if found_kind == "List" || found_kind == format!("{kind}List") => {
                match map.remove("items") {
                    Some(Value::Array(items)) => items,
                    Some(Value::Null) | None => Vec::new(),
                    Some(other) => {
                        return Err(SimulateError::WrongKind {
                            document: number,
                            expected: kind,
                            found: format!("a {found_kind} whose items are {}", type_name(&other)),
                        });
                    }
                }
            }
            Value::Object(map) => vec![Value::Object(map)],
            other => {
                return Err(SimulateError::WrongKind {
                    document: number,
                    expected: kind,
                    found: type_name(&other).to_string(),
                });
            }
        };
        for item in items {
            let item_kind = item.get("kind").and_then(Value::as_str).unwrap_or(kind);
            if item_kind != kind {
                return Err(SimulateError::WrongKind {
                    document: number,
                    expected: kind,
                    found: format!("a {item_kind}"),
                });
            }
            let name = item
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("(unnamed)")
                .to_string();
            let object = serde_json::from_value(item).map_err(|error| SimulateError::Invalid {
                document: number,
                kind,
                name,
                error,
            })?;
            objects.push(object);
        }
    }
    Ok(objects)
}

/// The kinds a storage file may hold.
const STORAGE_KINDS: &str =
    "PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver, CSIStorageCapacity or VolumeAttachment";

/// One object of a mixed-kind file: its document's number, its kind, its name and the object.
struct MixedObject {
    document: usize,
    kind: String,
    name: String,
    object: Value,
}

/// The objects of parsed documents of mixed kinds, in order: plain objects, `List`s and `<Kind>List`s (an item
/// without `kind` is taken as its list's kind). `expected` names the kinds allowed, for errors.
fn mixed_objects(documents: Vec<Value>, expected: &'static str) -> Result<Vec<MixedObject>, SimulateError> {
    let mut objects = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        let number = i + 1;
        let kind = document
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let (items, list_kind) = match (document, kind.strip_suffix("List")) {
            (Value::Object(mut map), Some(item_kind)) => match map.remove("items") {
                Some(Value::Array(items)) => (items, item_kind.to_string()),
                Some(Value::Null) | None => (Vec::new(), String::new()),
                Some(other) => {
                    return Err(SimulateError::WrongKind {
                        document: number,
                        expected,
                        found: format!("a {kind} whose items are {}", type_name(&other)),
                    });
                }
            },
            (Value::Object(map), None) => (vec![Value::Object(map)], String::new()),
            (other, _) => {
                return Err(SimulateError::WrongKind {
                    document: number,
                    expected,
                    found: type_name(&other).to_string(),
                });
            }
        };
        for item in items {
            let item_kind = item
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or(&list_kind)
                .to_string();
            if item_kind.is_empty() {
                return Err(SimulateError::WrongKind {
                    document: number,
                    expected,
                    found: "an object without a kind".to_string(),
                });
            }
            let name = item
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("(unnamed)")
                .to_string();
            objects.push(MixedObject {
                document: number,
                kind: item_kind,
                name,
                object: item,
            });
        }
    }
    Ok(objects)
}

impl MixedObject {
    /// The object as `T`, whose kind is `kind`.
    fn typed<T: DeserializeOwned>(self, kind: &'static str) -> Result<T, SimulateError> {
        let MixedObject {
            document, name, object, ..
        } = self;
        serde_json::from_value(object).map_err(|error| SimulateError::Invalid {
            document,
            kind,
            name,
            error,
        })
    }

    fn invalid(&self, kind: &'static str, error: serde_json::Error) -> SimulateError {
        SimulateError::Invalid {
            document: self.document,
            kind,
            name: self.name.clone(),
            error,
        }
    }

    fn unexpected(&self, expected: &'static str) -> SimulateError {
        SimulateError::WrongKind {
            document: self.document,
            expected,
            found: format!("a {}", self.kind),
        }
    }
}

/// The storage objects (claims, volumes, classes, CSI nodes, drivers, capacities, attachments) from parsed
/// documents, mixed in any order: plain objects, `List`s and `<Kind>List`s.
pub fn storage_of(documents: Vec<Value>) -> Result<Storage, SimulateError> {
    let (mut claims, mut volumes, mut classes) = (Vec::new(), Vec::new(), Vec::new());
    let mut csi = CsiObjects::default();
    for object in mixed_objects(documents, STORAGE_KINDS)? {
        match object.kind.as_str() {
            "PersistentVolumeClaim" => claims.push(object.typed("PersistentVolumeClaim")?),
            "PersistentVolume" => volumes.push(object.typed("PersistentVolume")?),
            "StorageClass" => classes.push(object.typed("StorageClass")?),
            "CSINode" => csi.nodes.push(object.typed("CSINode")?),
            "CSIDriver" => csi.drivers.push(object.typed("CSIDriver")?),
            "CSIStorageCapacity" => csi.capacities.push(object.typed("CSIStorageCapacity")?),
            "VolumeAttachment" => csi.attachments.push(object.typed("VolumeAttachment")?),
            _ => return Err(object.unexpected(STORAGE_KINDS)),
        }
    }
    Ok(Storage::new(claims, volumes, classes).with_csi(csi))
}

/// The kinds a gangs file may hold, by the Workload API of the version simulated.
fn gang_kinds(api: WorkloadApi) -> &'static str {
    match api {
        WorkloadApi::V1Alpha1 => "Workload (scheduling.k8s.io/v1alpha1) or PodGroup (scheduling.x-k8s.io/v1alpha1)",
        WorkloadApi::V1Alpha2 => {
            "PodGroup or Workload (scheduling.k8s.io/v1alpha2) or PodGroup (scheduling.x-k8s.io/v1alpha1)"
        }
        WorkloadApi::V1Beta1 => {
            "PodGroup or Workload (scheduling.k8s.io/v1beta1) or PodGroup (scheduling.x-k8s.io/v1alpha1)"
        }
    }
}

/// The pod groups' objects from parsed documents mixed in any order (as [`storage_of`]): the Workload API's
/// objects holding policies in `api` (Workloads in v1.35, PodGroups since), and Coscheduling's PodGroups. Since
/// v1.36 a Workload only holds templates the scheduler never reads: it is accepted and ignored. An object of
/// another version of the Workload API is refused: the version simulated does not serve it.
pub fn gangs_of(
    documents: Vec<Value>,
    api: WorkloadApi,
) -> Result<(Vec<WorkloadObject>, Vec<PodGroupObject>), SimulateError> {
    let (mut workloads, mut pod_groups) = (Vec::new(), Vec::new());
    for object in mixed_objects(documents, gang_kinds(api))? {
        // Without an `apiVersion`, a Workload is the version simulated's and a PodGroup Coscheduling's.
        let api_version = match object.object.get("apiVersion").and_then(Value::as_str) {
            Some(api_version) => api_version,
            None if object.kind == "PodGroup" => POD_GROUP_API,
            None => api.api_version(),
        };
        if api.holds_policies(api_version, &object.kind) {
            match WorkloadObject::of(api, &object.object) {
                Ok(found) => workloads.push(found),
                Err(error) => return Err(object.invalid(api.policy_kind(), error)),
            }
        } else if object.kind == "PodGroup" && api_version == POD_GROUP_API {
            pod_groups.push(PodGroupObject::of(&object.object));
        } else if !(object.kind == "Workload" && api_version == api.api_version()) {
            return Err(object.unexpected(gang_kinds(api)));
        }
    }
    Ok((workloads, pod_groups))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "an object without a kind",
        other => crate::yaml_tree::value_kind(other),
    }
}

/// Places `pods` one after another (priority first, then the order given) with `policy` on a snapshot of `nodes`
/// and the `existing` pods that name a node (others are ignored).
pub fn simulate(
    policy: &SchedulerPolicy,
    nodes: Vec<Node>,
    existing: Vec<Pod>,
    pods: Vec<Pod>,
    seed: u64,
    explain: bool,
) -> Result<Simulation, SimulateError> {
    simulate_with_budgets(policy, nodes, existing, pods, Vec::new(), seed, explain)
}

/// [`simulate`] with the cluster's PodDisruptionBudgets, which preemption counts. `existing` pods without a
/// node but with a `status.nominatedNodeName` are the nominations a preemption may clear.
pub(crate) fn simulate_with_budgets(
    policy: &SchedulerPolicy,
    nodes: Vec<Node>,
    existing: Vec<Pod>,
    pods: Vec<Pod>,
    pdbs: Vec<PodDisruptionBudget>,
    seed: u64,
    explain: bool,
) -> Result<Simulation, SimulateError> {
    let cluster = ClusterObjects {
        pdbs,
        ..ClusterObjects::default()
    };
    simulate_in(policy, nodes, existing, pods, cluster, seed, explain)
}

/// The cluster objects besides nodes and pods a simulation reads.
#[derive(Clone, Debug)]
pub struct ClusterObjects {
    /// PodDisruptionBudgets, which preemption counts.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, which VolumeRestrictions and VolumeZone read
    /// (without them those plugins skip what needs them).
    pub storage: Option<Storage>,
    /// The Workload API's objects holding gang policies (Workloads in v1.35, PodGroups since: [`gangs_of`]). With
    /// none, the Workload API is taken as not served and the pods' references are ignored, as by the worker.
    pub workloads: Vec<WorkloadObject>,
    /// The Workload API groups the pods name, captured when they were read ([`WorkloadRefs::capture`]).
    pub workload_refs: WorkloadRefs,
    /// The cluster's Kubernetes version: the kube-scheduler minor the simulation behaves as. `simulate` and rule
    /// tests pass the rule set's ([`crate::RuleSet::kubernetes_version`]); the default is the oldest supported, as
    /// [`crate::scheduler::engine::Engine::new`]'s.
    pub kubernetes_version: crate::KubernetesVersion,
    /// PodGroups (`scheduling.x-k8s.io/v1alpha1`): Coscheduling's groups. A labelled pod whose PodGroup is not
    /// given is told as one whose PodGroup does not exist.
    pub pod_groups: Vec<PodGroupObject>,
}

impl Default for ClusterObjects {
    fn default() -> ClusterObjects {
        ClusterObjects {
            pdbs: Vec::new(),
            storage: None,
            workloads: Vec::new(),
            workload_refs: WorkloadRefs::default(),
            kubernetes_version: crate::KubernetesVersion::OLDEST,
            pod_groups: Vec::new(),
        }
    }
}

/// [`simulate_with_budgets`] with every cluster object the engine reads.
pub fn simulate_in(
    policy: &SchedulerPolicy,
    nodes: Vec<Node>,
    existing: Vec<Pod>,
    mut pods: Vec<Pod>,
    cluster: ClusterObjects,
    seed: u64,
    explain: bool,
) -> Result<Simulation, SimulateError> {
    let ClusterObjects {
        pdbs,
        storage,
        workloads,
        workload_refs,
        pod_groups,
        kubernetes_version,
    } = cluster;
    let mut gangs = Gangs::new(policy, (workloads, workload_refs), pod_groups, &existing, &pods);
    let (bound, pending): (Vec<Pod>, Vec<Pod>) = existing.into_iter().partition(|pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    });
    let mut snapshot = Snapshot::build(nodes, bound)?;
    snapshot.set_pod_disruption_budgets(pdbs);
    // The pods to schedule are the policy's, `schedulerName` or not: their nominations are the policy's own.
    for pod in &mut pods {
        let spec = pod.spec.get_or_insert_default();
        if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
            spec.scheduler_name = Some(policy.spec.scheduler_name.clone());
        }
    }
    // kube-scheduler's nominator: pending pods with a `status.nominatedNodeName`, those to schedule included (its
    // queue holds them), until placed.
    snapshot.set_nominated_pods(pending.into_iter().chain(pods.iter().cloned()));
    if let Some(storage) = storage {
        snapshot.set_storage(storage);
    }
    // The scheduling queue pops the highest priority first; a stable sort keeps the given order within one, but for
    // Coscheduling's QueueSort of PodGroup members (by their group's creation, then name).
    pods.sort_by_cached_key(|pod| {
        let priority = std::cmp::Reverse(pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0));
        let group = gangs.queue_order(pod);
        (priority, group.is_none(), group.map(|g| (g.time, g.name)))
    });
    let engine = policy.engine_with_post_filters(seed, kubernetes_version)?;
    let filters: Vec<String> = engine.filter_names().map(str::to_string).collect();
    let mut placer = Placer {
        engine,
        snapshot,
        filters,
        explain,
    };
    let by_key: BTreeMap<String, &Pod> = pods.iter().map(|pod| (pod_ref(pod), pod)).collect();
    let mut placements: Vec<Placement> = Vec::with_capacity(pods.len());
    let mut decided: HashSet<String> = HashSet::with_capacity(pods.len());
    let chain = placer.chain(policy.profile().args.coscheduling.reject_percentage());
    for pod in &pods {
        // A gang's run decides its members together: a member already decided is not popped again.
        if decided.contains(&pod_ref(pod)) {
            continue;
        }
        let nodes = placer.snapshot.num_nodes();
        let queued = |member: &str| by_key.contains_key(member) && !decided.contains(member);
        let now = match gangs.popped(pod, chain, nodes, queued) {
            Popped::Alone => vec![placer.alone(pod)?],
            Popped::Held {
                message,
                clear_nomination,
            } => vec![placer.held(pod, message, clear_nomination)],
            Popped::WithoutPodGroup => vec![placer.without_pod_group(pod)?],
            Popped::Run(runner, spec) => gangs.run(&mut placer, *runner, spec, &by_key)?,
        };
        decided.extend(now.iter().map(|placement| placement.pod.clone()));
        placements.extend(now);
    }
    Ok(Simulation {
        scheduler: policy.spec.scheduler_name.clone(),
        seed,
        placements,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(yaml: &str) -> SchedulerPolicy {
        let rules = crate::load_str("p.yaml", yaml).expect("valid policy");
        rules.scheduler_policies().next().expect("one policy").clone()
    }

    fn node(name: &str, cpu: &str) -> Value {
        json!({"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})
    }

    fn pod(name: &str, cpu: &str, priority: Option<i32>, node: Option<&str>) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
               "spec": {"priority": priority, "nodeName": node,
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})
    }

    const SPREAD: &str =
        "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: s }\nspec:\n  schedulerName: s\n";

    #[test]
    fn lists_of_every_shape_are_read_in_order() {
        let documents = vec![
            json!({"kind": "NodeList", "items": [ {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}} ]}),
            json!({"kind": "List", "items": [ node("c", "1") ]}),
            node("d", "1"),
        ];
        let nodes: Vec<Node> = objects_of_kind(documents, "Node").expect("nodes");
        let names: Vec<_> = nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        let wrong = objects_of_kind::<Node>(vec![pod("p", "1", None, None)], "Node").unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "document 1: expected a Node or a list of them, found a Pod"
        );
        let scalar = objects_of_kind::<Node>(vec![json!("text")], "Node").unwrap_err();
        assert_eq!(
            scalar.to_string(),
            "document 1: expected a Node or a list of them, found a string"
        );
        let invalid = objects_of_kind::<Pod>(
            vec![json!({"kind": "Pod", "metadata": {"name": "x"}, "spec": 3})],
            "Pod",
        );
        assert!(
            invalid
                .unwrap_err()
                .to_string()
                .starts_with("document 1: Pod x: invalid type")
        );
    }

    #[test]
    fn storage_files_mix_kinds_and_volume_zone_places_by_the_bound_volume() {
        let documents = vec![
            json!({"kind": "List", "items": [
                {"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ns",
                 "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                 "spec": {"volumeName": "pv-b"}},
                {"kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "p"}
            ]}),
            json!({"kind": "PersistentVolumeList", "items": [
                {"metadata": {"name": "pv-b", "labels": {"topology.kubernetes.io/zone": "b"}}},
                {"metadata": {"name": "pv-c", "labels": {"topology.kubernetes.io/zone": "c"}}}
            ]}),
            json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "elsewhere", "namespace": "ns",
                   "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                   "spec": {"volumeName": "pv-c"}}),
        ];
        let storage = storage_of(documents).expect("storage");
        let zoned = |name: &str, zone: &str| {
            let mut node = node(name, "2");
            node["metadata"]["labels"] = json!({"topology.kubernetes.io/zone": zone});
            node
        };
        let nodes = objects_of_kind(vec![zoned("in-a", "a"), zoned("in-b", "b")], "Node").unwrap();
        let claiming = |name: &str, claim: &str| {
            let mut claimed = pod(name, "1", None, None);
            claimed["spec"]["volumes"] = json!([{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]);
            claimed
        };
        let pods: Vec<Pod> =
            objects_of_kind(vec![claiming("db", "data"), claiming("far", "elsewhere")], "Pod").unwrap();
        let ignoring = format!("{SPREAD}  ignoredFeatures: [persistentVolumeClaims]\n");
        let cluster = ClusterObjects {
            storage: Some(storage),
            ..ClusterObjects::default()
        };
        let result = simulate_in(&policy(&ignoring), nodes, Vec::new(), pods, cluster, 1, false).expect("runs");
        assert_eq!(result.placements[0].node.as_deref(), Some("in-b"));
        assert_eq!(
            result.placements[1].message.as_deref(),
            Some("0/2 nodes are available: 2 node(s) had no available volume zone.")
        );

        let wrong = storage_of(vec![node("n", "1")]).unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "document 1: expected a PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver, \
             CSIStorageCapacity or VolumeAttachment or a list of them, found a Node"
        );
    }

    #[test]
    fn placements_follow_priority_and_each_is_seen_by_the_next() {
        let nodes = objects_of_kind(vec![node("small", "1"), node("large", "3")], "Node").unwrap();
        let existing = objects_of_kind(
            vec![
                pod("running", "1", None, Some("large")),
                pod("pending", "9", None, None),
            ],
            "Pod",
        )
        .unwrap();
        let pods = objects_of_kind(
            vec![
                pod("low", "1", Some(1), None),
                pod("high", "2", Some(100), None),
                pod("last", "1", Some(1), None),
            ],
            "Pod",
        )
        .unwrap();
        let result = simulate(&policy(SPREAD), nodes, existing, pods, 7, false).expect("runs");
        let order: Vec<(&str, Option<&str>)> = result
            .placements
            .iter()
            .map(|p| (p.pod.as_str(), p.node.as_deref()))
            .collect();
        // `high` goes first and fills `large` (1 of 3 cpu used by `running`); `low` then only fits `small`,
        // and `last` finds no room: the pending pod without a node was not counted anywhere.
        assert_eq!(
            order,
            [("ns/high", Some("large")), ("ns/low", Some("small")), ("ns/last", None)]
        );
        assert_eq!(
            result.placements[2].message.as_deref(),
            Some("0/2 nodes are available: 2 Insufficient cpu.")
        );
        assert_eq!(result.seed, 7);
    }

    #[test]
    fn an_unschedulable_pod_reports_the_preemption_it_would_make() {
        let nodes = objects_of_kind(vec![node("a", "2"), node("b", "2")], "Node").unwrap();
        let mut protected = pod("protected", "2", Some(1), Some("a"));
        protected["metadata"]["labels"] = json!({"app": "db"});
        let mut nominated = pod("waiting", "1", Some(5), None);
        nominated["status"] = json!({"nominatedNodeName": "b"});
        // The policy's own pod: another scheduler's nomination is neither counted nor cleared.
        nominated["spec"]["schedulerName"] = json!("s");
        let existing = objects_of_kind(
            vec![protected, pod("batch", "2", Some(10), Some("b")), nominated],
            "Pod",
        )
        .unwrap();
        let pods = objects_of_kind(
            vec![pod("urgent", "2", Some(100), None), pod("peer", "2", Some(100), None)],
            "Pod",
        )
        .unwrap();
        let pdbs: Vec<PodDisruptionBudget> = vec![
            serde_json::from_value(json!({
                "metadata": {"name": "db", "namespace": "ns"},
                "spec": {"selector": {"matchLabels": {"app": "db"}}},
                "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
            }))
            .unwrap(),
        ];
        let result = simulate_with_budgets(&policy(SPREAD), nodes, existing, pods, pdbs, 1, false).expect("runs");
        // `batch` on b has the higher priority but no budget: b is chosen, and `waiting`'s nomination to b
        // (priority 5 < 100) would be cleared. Nothing is evicted, but `urgent` is nominated to b, as kube-scheduler's
        // nominator has it before the victims are gone: `peer` (same priority) leaves b's room to it and can only
        // preempt the protected pod on a.
        let expected = [
            ("b", vec!["ns/batch".to_string()], 0, vec!["ns/waiting".to_string()]),
            ("a", vec!["ns/protected".to_string()], 1, vec![]),
        ];
        for (placement, (node, victims, pdb_violations, cleared)) in result.placements.iter().zip(expected) {
            assert_eq!(placement.node, None);
            assert_eq!(
                placement.message.as_deref(),
                Some("0/2 nodes are available: 2 Insufficient cpu.")
            );
            assert_eq!(
                placement.post_filter_message, None,
                "a preemption appends nothing before v1.37"
            );
            assert_eq!(
                placement.preemption,
                Some(PreemptionReport {
                    node: node.into(),
                    victims,
                    pdb_violations,
                    cleared_nominations: cleared,
                })
            );
        }
        let json = serde_json::to_value(&result.placements[0]).unwrap();
        assert_eq!(
            json["preemption"],
            json!({"node": "b", "victims": ["ns/batch"], "pdbViolations": 0, "clearedNominations": ["ns/waiting"]})
        );
    }

    #[test]
    fn an_input_pods_nomination_keeps_its_room_from_lower_priority_pods() {
        // `high` (3 cpu) was nominated to a by an earlier preemption whose victim `low` is still there; `mid`
        // (2 cpu) would fit in a's free 2 cpu but must leave the room to `high`, even by preempting `low`.
        let nodes = objects_of_kind(vec![node("a", "4")], "Node").unwrap();
        let existing = objects_of_kind(vec![pod("low", "2", Some(0), Some("a"))], "Pod").unwrap();
        let mut high = pod("high", "3", Some(100), None);
        high["status"] = json!({"nominatedNodeName": "a"});
        let pods = objects_of_kind(vec![pod("mid", "2", Some(50), None), high], "Pod").unwrap();
        let result = simulate(&policy(SPREAD), nodes, existing, pods, 1, false).expect("runs");
        let mid = result.placements.iter().find(|p| p.pod == "ns/mid").expect("mid");
        assert_eq!(mid.node, None);
        assert_eq!(
            mid.message.as_deref(),
            Some("0/1 nodes are available: 1 Insufficient cpu.")
        );
        assert_eq!(
            mid.post_filter_message.as_deref(),
            Some("no new claims to deallocate, preemption: 0/1 nodes are available: 1 Insufficient cpu.")
        );
    }

    #[test]
    fn without_victims_the_post_filter_message_is_kube_schedulers_suffix() {
        let nodes = objects_of_kind(vec![node("a", "1")], "Node").unwrap();
        let existing = objects_of_kind(vec![pod("peer", "1", Some(100), Some("a"))], "Pod").unwrap();
        let pods = objects_of_kind(vec![pod("p", "1", Some(100), None)], "Pod").unwrap();
        let result = simulate(&policy(SPREAD), nodes, existing, pods, 1, false).expect("runs");
        let placement = &result.placements[0];
        assert_eq!(
            placement.post_filter_message.as_deref(),
            Some(
                "no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found \
                 for incoming pod."
            )
        );
        assert_eq!(placement.preemption, None);

        // The cluster's version decides the text: v1.37's DynamicResources gives no reason for a pod without claims.
        let nodes = objects_of_kind(vec![node("a", "1")], "Node").unwrap();
        let existing = objects_of_kind(vec![pod("peer", "1", Some(100), Some("a"))], "Pod").unwrap();
        let pods = objects_of_kind(vec![pod("p", "1", Some(100), None)], "Pod").unwrap();
        let cluster = ClusterObjects {
            kubernetes_version: crate::KubernetesVersion::V1_37,
            ..ClusterObjects::default()
        };
        let result = simulate_in(&policy(SPREAD), nodes, existing, pods, cluster, 1, false).expect("runs");
        assert_eq!(
            result.placements[0].post_filter_message.as_deref(),
            Some("preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
        );

        // `algorithmProvider: none` is kube-scheduler's `disabled: ["*"]`: no PostFilter plugins at all.
        let bare = policy(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: { name: s }\nspec:\n  \
             schedulerName: s\n  algorithmProvider: none\n  filters: [NodeResourcesFit]\n",
        );
        let nodes = objects_of_kind(vec![node("a", "1")], "Node").unwrap();
        let existing = objects_of_kind(vec![pod("low", "1", Some(1), Some("a"))], "Pod").unwrap();
        let pods = objects_of_kind(vec![pod("p", "1", Some(100), None)], "Pod").unwrap();
        let result = simulate(&bare, nodes, existing, pods, 1, false).expect("runs");
        assert_eq!(result.placements[0].post_filter_message, None);
        assert_eq!(result.placements[0].preemption, None);
    }
}
