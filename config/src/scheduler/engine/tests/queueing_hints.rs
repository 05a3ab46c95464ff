//! Queueing hints on hand-built nodes and pods: Queue exactly when kube-scheduler's hint function does, per plugin, event and version.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::harness::{TestNode, TestPod};
use crate::scheduler::engine::queueing_hints::{
    ActionType, ClusterEvent, Hint, HintPod, QueueingHints, node_update_actions, pod_update_actions,
};
use crate::scheduler::engine::{Profile, Workloads};

fn node(yaml: &str) -> Arc<Node> {
    Arc::new(
        serde_saphyr::from_str::<TestNode>(yaml)
            .map(|n| n.to_node())
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

fn pod(yaml: &str) -> Arc<Pod> {
    Arc::new(
        serde_saphyr::from_str::<TestPod>(yaml)
            .map(|p| p.to_pod())
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

fn hints() -> QueueingHints {
    QueueingHints::new(&Profile::default_provider())
}

/// The pod waiting, prepared as the queue prepares a failed pod.
fn waiting(yaml: &str) -> HintPod {
    hints().prepare(pod(yaml), &Workloads::default())
}

fn node_added(yaml: &str) -> ClusterEvent {
    ClusterEvent::node(ActionType::ADD, None, Some(node(yaml)))
}

/// The events of a node update, as the cache makes them.
fn node_updated(old: &str, new: &str) -> Vec<ClusterEvent> {
    let (old, new) = (node(old), node(new));
    node_update_actions(&old, &new)
        .into_iter()
        .map(|action| ClusterEvent::node(action, Some(old.clone()), Some(new.clone())))
        .collect()
}

fn pod_added(yaml: &str) -> ClusterEvent {
    ClusterEvent::pod(ActionType::ADD, None, Some(pod(yaml)))
}

fn pod_deleted(yaml: &str) -> ClusterEvent {
    ClusterEvent::pod(ActionType::DELETE, Some(pod(yaml)), None)
}

fn pod_updated(old: &str, new: &str) -> Vec<ClusterEvent> {
    let (old, new) = (pod(old), pod(new));
    pod_update_actions(&old, &new)
        .into_iter()
        .map(|action| ClusterEvent::pod(action, Some(old.clone()), Some(new.clone())))
        .collect()
}

/// The plugin's answer: Queue if any of the events' hints says so, Skip if it registers one of them but every
/// hint skips, `None` if it registers none.
fn ask(plugin: &str, pod: &HintPod, events: &[ClusterEvent]) -> Option<Hint> {
    let hints = hints();
    let answers: Vec<Hint> = events.iter().filter_map(|e| hints.hint(plugin, pod, e)).collect();
    if answers.is_empty() {
        None
    } else if answers.contains(&Hint::Queue) {
        Some(Hint::Queue)
    } else {
        Some(Hint::Skip)
    }
}

const Q: Option<Hint> = Some(Hint::Queue);
const S: Option<Hint> = Some(Hint::Skip);

const PLAIN: &str = "{name: p, uid: u-p, requests: {cpu: '1', memory: 1Gi}}";
const NODE: &str = "{name: n, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}";

#[test]
fn node_updates_are_split_into_the_kinds_of_change_kube_scheduler_tells_apart() {
    let updated = |new: &str| {
        node_update_actions(&node(NODE), &node(new))
            .into_iter()
            .map(|a| a.label())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        updated("{name: n, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}"),
        Vec::<&str>::new(),
        "a heartbeat changes nothing the scheduler reads"
    );
    assert_eq!(
        updated("{name: n, allocatable: {cpu: 4000m, memory: 8Gi, pods: '110'}}"),
        Vec::<&str>::new(),
        "quantities compare by value"
    );
    assert_eq!(
        updated(
            "{name: n, labels: {zone: a}, taints: [{key: k, effect: NoSchedule}], allocatable: {cpu: '8', memory: 8Gi, pods: '110'}}"
        ),
        ["UpdateNodeAllocatable", "UpdateNodeLabel", "UpdateNodeTaint"]
    );
    let cordoned = "{name: n, unschedulable: true, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}";
    assert_eq!(
        node_update_actions(&node(cordoned), &node(NODE))
            .into_iter()
            .map(|a| a.label())
            .collect::<Vec<_>>(),
        ["UpdateNodeTaint"],
        "uncordoning is reported as a taint update"
    );
    assert!(
        node_update_actions(&node(NODE), &node(cordoned)).is_empty(),
        "cordoning is not an event: it cannot help any pod"
    );
}

#[test]
fn pod_updates_are_split_into_the_kinds_of_change_kube_scheduler_tells_apart() {
    let labels = |old: &str, new: &str| {
        pod_update_actions(&pod(old), &pod(new))
            .into_iter()
            .map(|a| a.label())
            .collect::<Vec<_>>()
    };
    assert_eq!(labels(PLAIN, PLAIN), ["Update"], "a status update is a plain update");
    assert_eq!(
        labels(
            PLAIN,
            "{name: p, uid: u-p, labels: {a: b}, requests: {cpu: 500m, memory: 1Gi}}"
        ),
        ["UpdatePodLabel", "UpdatePodScaleDown"]
    );
    assert_eq!(
        labels(
            "{name: p, spec: {schedulingGates: [{name: g}], containers: [{name: c}]}}",
            "{name: p, spec: {tolerations: [{key: k, operator: Exists}], containers: [{name: c}]}}"
        ),
        ["UpdatePodSchedulingGatesEliminated", "UpdatePodToleration"]
    );
}

#[test]
fn a_plugin_is_asked_only_about_the_events_it_registers() {
    let pod = waiting(PLAIN);
    let label = node_updated(
        NODE,
        "{name: n, labels: {a: b}, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}",
    );
    assert_eq!(
        ask("NodeResourcesFit", &pod, &label),
        None,
        "Fit registers no label updates"
    );
    assert_eq!(ask("NodeName", &pod, &label), None);
    assert_eq!(
        ask("NodeName", &pod, &[node_added(NODE)]),
        Q,
        "NodeName has no hint: every added node queues"
    );
    assert_eq!(
        ask("NodePorts", &pod, &[node_added(NODE)]),
        Q,
        "NodePorts' node additions have no hint"
    );
    let status = pod_updated(PLAIN, PLAIN);
    for plugin in [
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "TaintToleration",
    ] {
        assert_eq!(
            ask(plugin, &pod, &status),
            None,
            "{plugin}: a plain update matches no specific registration"
        );
    }
    assert_eq!(
        ask("VolumeBinding", &pod, &label),
        Q,
        "VolumeBinding registers node label updates without a hint"
    );
}

#[test]
fn scheduling_gates_queue_only_for_the_pods_own_gates_going() {
    let gated = "{name: p, uid: u-p, spec: {schedulingGates: [{name: g}], containers: [{name: c}]}}";
    let open = "{name: p, uid: u-p, spec: {containers: [{name: c}]}}";
    let pod = waiting(gated);
    assert_eq!(ask("SchedulingGates", &pod, &pod_updated(gated, open)), Q);
    let other_gated = "{name: o, uid: u-o, spec: {schedulingGates: [{name: g}], containers: [{name: c}]}}";
    let other_open = "{name: o, uid: u-o, spec: {containers: [{name: c}]}}";
    assert_eq!(ask("SchedulingGates", &pod, &pod_updated(other_gated, other_open)), S);
}

#[test]
fn node_unschedulable_queues_for_a_schedulable_node_or_a_toleration_of_cordons() {
    let pod = waiting(PLAIN);
    let cordoned = "{name: n, unschedulable: true, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}";
    assert_eq!(ask("NodeUnschedulable", &pod, &[node_added(NODE)]), Q);
    assert_eq!(ask("NodeUnschedulable", &pod, &[node_added(cordoned)]), S);
    assert_eq!(
        ask("NodeUnschedulable", &pod, &node_updated(cordoned, NODE)),
        Q,
        "uncordoned"
    );
    let tainted =
        "{name: n, taints: [{key: k, effect: NoSchedule}], allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}";
    assert_eq!(
        ask("NodeUnschedulable", &pod, &node_updated(NODE, tainted)),
        S,
        "a taint update of a schedulable node"
    );
    let tolerating = "{name: p, uid: u-p, spec: {tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}], containers: [{name: c}]}}";
    let other = "{name: p, uid: u-p, spec: {tolerations: [{key: other, operator: Exists}], containers: [{name: c}]}}";
    assert_eq!(ask("NodeUnschedulable", &pod, &pod_updated(PLAIN, tolerating)), Q);
    assert_eq!(ask("NodeUnschedulable", &pod, &pod_updated(PLAIN, other)), S);
    let someone_else = "{name: o, uid: u-o, spec: {tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists}], containers: [{name: c}]}}";
    assert_eq!(
        ask(
            "NodeUnschedulable",
            &pod,
            &pod_updated("{name: o, uid: u-o}", someone_else)
        ),
        S
    );
}

#[test]
fn taint_toleration_queues_when_the_last_untolerated_hard_taint_goes() {
    let pod =
        waiting("{name: p, uid: u-p, spec: {tolerations: [{key: ok, operator: Exists}], containers: [{name: c}]}}");
    let tainted = "{name: n, taints: [{key: bad, effect: NoSchedule}], allocatable: {pods: '110'}}";
    let tolerated = "{name: n, taints: [{key: ok, effect: NoExecute}], allocatable: {pods: '110'}}";
    let soft = "{name: n, taints: [{key: bad, effect: PreferNoSchedule}], allocatable: {pods: '110'}}";
    let still = "{name: n, taints: [{key: bad2, effect: NoExecute}], allocatable: {pods: '110'}}";
    assert_eq!(ask("TaintToleration", &pod, &[node_added(tolerated)]), Q);
    assert_eq!(ask("TaintToleration", &pod, &[node_added(tainted)]), S);
    assert_eq!(ask("TaintToleration", &pod, &node_updated(tainted, tolerated)), Q);
    assert_eq!(
        ask("TaintToleration", &pod, &node_updated(tainted, soft)),
        Q,
        "PreferNoSchedule does not keep a pod off"
    );
    assert_eq!(ask("TaintToleration", &pod, &node_updated(tainted, still)), S);
    assert_eq!(
        ask("TaintToleration", &pod, &node_updated(tolerated, soft)),
        S,
        "it was tolerated before: nothing changed for the pod"
    );
    let own = "{name: p, uid: u-p, spec: {tolerations: [{key: ok, operator: Exists}, {key: bad, operator: Exists}], containers: [{name: c}]}}";
    assert_eq!(
        ask(
            "TaintToleration",
            &pod,
            &pod_updated(
                "{name: p, uid: u-p, spec: {tolerations: [{key: ok, operator: Exists}], containers: [{name: c}]}}",
                own
            )
        ),
        Q
    );
    assert_eq!(
        ask(
            "TaintToleration",
            &pod,
            &pod_updated(
                "{name: o, uid: u-o}",
                "{name: o, uid: u-o, spec: {tolerations: [{key: x, operator: Exists}], containers: [{name: c}]}}"
            )
        ),
        S
    );
}

#[test]
fn node_affinity_queues_when_a_node_starts_matching_the_pod() {
    let pod = waiting("{name: p, uid: u-p, spec: {nodeSelector: {disk: ssd}, containers: [{name: c}]}}");
    let ssd = "{name: n, labels: {disk: ssd}, allocatable: {pods: '110'}}";
    let ssd_zone = "{name: n, labels: {disk: ssd, zone: a}, allocatable: {pods: '110'}}";
    let hdd = "{name: n, labels: {disk: hdd}, allocatable: {pods: '110'}}";
    assert_eq!(ask("NodeAffinity", &pod, &[node_added(ssd)]), Q);
    assert_eq!(ask("NodeAffinity", &pod, &[node_added(hdd)]), S);
    assert_eq!(ask("NodeAffinity", &pod, &node_updated(hdd, ssd)), Q);
    assert_eq!(
        ask("NodeAffinity", &pod, &node_updated(ssd, ssd_zone)),
        S,
        "it matched before: the change does not help"
    );
    assert_eq!(ask("NodeAffinity", &pod, &node_updated(ssd, hdd)), S);

    let mut profile = Profile::default_provider();
    profile.args.node_affinity.added_affinity = Some(
        serde_json::from_value(serde_json::json!({"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}))
        .unwrap(),
    );
    let enforced = QueueingHints::new(&profile);
    let pod = enforced.prepare(pod_of(&pod), &Workloads::default());
    assert_eq!(
        enforced.hint("NodeAffinity", &pod, &node_updated(hdd, ssd_zone)[0]),
        Some(Hint::Skip),
        "the profile's added affinity must match too"
    );
}

fn pod_of(pod: &HintPod) -> Arc<Pod> {
    pod.pod().clone()
}

#[test]
fn node_ports_queue_for_a_deleted_pod_that_held_a_conflicting_port() {
    let ports = |name: &str, node: &str, port: u16| {
        format!(
            "{{name: {name}, uid: u-{name}, node: {node}, spec: {{containers: [{{name: c, ports: [{{containerPort: 1, hostPort: {port}}}]}}]}}}}"
        )
    };
    let pod =
        waiting("{name: p, uid: u-p, spec: {containers: [{name: c, ports: [{containerPort: 1, hostPort: 80}]}]}}");
    assert_eq!(ask("NodePorts", &pod, &[pod_deleted(&ports("a", "n", 80))]), Q);
    assert_eq!(ask("NodePorts", &pod, &[pod_deleted(&ports("a", "n", 81))]), S);
    assert_eq!(
        ask(
            "NodePorts",
            &pod,
            &[pod_deleted(
                "{name: a, uid: u-a, spec: {containers: [{name: c, ports: [{containerPort: 1, hostPort: 80}]}]}}"
            )]
        ),
        S,
        "neither bound nor nominated: it held nothing"
    );
    assert_eq!(
        ask(
            "NodePorts",
            &pod,
            &[pod_deleted(
                "{name: a, uid: u-a, spec: {containers: [{name: c, ports: [{containerPort: 1, hostPort: 80}]}]}, status: {nominatedNodeName: n}}"
            )]
        ),
        Q,
        "a nominated pod held the port in the nominator"
    );
    assert_eq!(ask("NodePorts", &pod, &[pod_added(&ports("a", "n", 80))]), None);
}

#[test]
fn node_resources_fit_queues_for_freed_room_and_grown_nodes_that_fit() {
    let pod = waiting("{name: p, uid: u-p, requests: {cpu: '2', memory: 1Gi}}");
    assert_eq!(
        ask(
            "NodeResourcesFit",
            &pod,
            &[pod_deleted("{name: a, uid: u-a, node: n, requests: {cpu: '1'}}")]
        ),
        Q
    );
    assert_eq!(
        ask(
            "NodeResourcesFit",
            &pod,
            &[pod_deleted("{name: a, uid: u-a, requests: {cpu: '1'}}")]
        ),
        S,
        "a pending pod held nothing"
    );
    let small = "{name: n, allocatable: {cpu: '1', memory: 8Gi, pods: '110'}}";
    let big = "{name: n, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}";
    let more_memory = "{name: n, allocatable: {cpu: '4', memory: 16Gi, pods: '110'}}";
    let more_gpus = "{name: n, allocatable: {cpu: '4', memory: 8Gi, pods: '110', example.com/gpu: '2'}}";
    let no_pods = "{name: n, allocatable: {cpu: '4', memory: 8Gi, pods: '0'}}";
    assert_eq!(ask("NodeResourcesFit", &pod, &[node_added(big)]), Q);
    assert_eq!(
        ask("NodeResourcesFit", &pod, &[node_added(small)]),
        S,
        "too small even empty"
    );
    assert_eq!(ask("NodeResourcesFit", &pod, &[node_added(no_pods)]), S, "no pod slot");
    assert_eq!(ask("NodeResourcesFit", &pod, &node_updated(small, big)), Q);
    assert_eq!(ask("NodeResourcesFit", &pod, &node_updated(big, more_memory)), Q);
    assert_eq!(
        ask("NodeResourcesFit", &pod, &node_updated(big, more_gpus)),
        S,
        "it grew in a resource the pod does not request"
    );
    assert_eq!(
        ask("NodeResourcesFit", &pod, &node_updated(no_pods, big)),
        Q,
        "more pod slots"
    );

    let bound = "{name: a, uid: u-a, node: n, requests: {cpu: '2', memory: 1Gi}}";
    let scaled_cpu = "{name: a, uid: u-a, node: n, requests: {cpu: '1', memory: 1Gi}}";
    assert_eq!(ask("NodeResourcesFit", &pod, &pod_updated(bound, scaled_cpu)), Q);
    let gpu_pod = "{name: a, uid: u-a, node: n, requests: {cpu: '2', memory: 1Gi, example.com/gpu: '2'}}";
    let gpu_scaled = "{name: a, uid: u-a, node: n, requests: {cpu: '2', memory: 1Gi, example.com/gpu: '1'}}";
    assert_eq!(
        ask("NodeResourcesFit", &pod, &pod_updated(gpu_pod, gpu_scaled)),
        S,
        "scaled down in a resource the pod does not request"
    );
    let pending = "{name: a, uid: u-a, requests: {cpu: '2'}}";
    let pending_scaled = "{name: a, uid: u-a, requests: {cpu: '1'}}";
    assert_eq!(
        ask("NodeResourcesFit", &pod, &pod_updated(pending, pending_scaled)),
        S,
        "another pending pod's scale-down frees nothing"
    );
    assert_eq!(
        ask(
            "NodeResourcesFit",
            &pod,
            &pod_updated(
                "{name: p, uid: u-p, requests: {cpu: '2', memory: 1Gi}}",
                "{name: p, uid: u-p, requests: {cpu: '1', memory: 1Gi}}"
            )
        ),
        Q,
        "the pod's own scale-down"
    );
}

const SPREAD: &str = "{name: p, uid: u-p, namespace: ns, labels: {app: web}, spec: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}], containers: [{name: c}]}}";

#[test]
fn pod_topology_spread_queues_for_bound_pods_of_its_namespace_entering_or_leaving_the_selector() {
    let pod = waiting(SPREAD);
    let web = "{name: a, uid: u-a, namespace: ns, node: n, labels: {app: web}}";
    let db = "{name: a, uid: u-a, namespace: ns, node: n, labels: {app: db}}";
    assert_eq!(ask("PodTopologySpread", &pod, &[pod_added(web)]), Q);
    assert_eq!(ask("PodTopologySpread", &pod, &[pod_added(db)]), S);
    assert_eq!(ask("PodTopologySpread", &pod, &[pod_deleted(web)]), Q);
    assert_eq!(ask("PodTopologySpread", &pod, &pod_updated(web, db)), Q);
    assert_eq!(
        ask(
            "PodTopologySpread",
            &pod,
            &pod_updated(
                web,
                "{name: a, uid: u-a, namespace: ns, node: n, labels: {app: web, v: '2'}}"
            )
        ),
        S,
        "still selected"
    );
    assert_eq!(
        ask(
            "PodTopologySpread",
            &pod,
            &[pod_deleted(
                "{name: a, uid: u-a, namespace: other, node: n, labels: {app: web}}"
            )]
        ),
        S,
        "another namespace"
    );
    assert_eq!(
        ask(
            "PodTopologySpread",
            &pod,
            &[pod_deleted("{name: a, uid: u-a, namespace: ns, labels: {app: web}}")]
        ),
        S,
        "not bound"
    );
}

#[test]
fn pod_topology_spread_queues_for_nodes_gaining_losing_or_moving_topology() {
    let pod = waiting(SPREAD);
    let a = "{name: n, labels: {zone: a}, allocatable: {pods: '110'}}";
    let b = "{name: n, labels: {zone: b}, allocatable: {pods: '110'}}";
    let bare = "{name: n, allocatable: {pods: '110'}}";
    let a_other = "{name: n, labels: {zone: a, rack: r}, allocatable: {pods: '110'}}";
    let a_tainted = "{name: n, labels: {zone: a}, taints: [{key: k, effect: NoSchedule}], allocatable: {pods: '110'}}";
    assert_eq!(ask("PodTopologySpread", &pod, &[node_added(a)]), Q);
    assert_eq!(ask("PodTopologySpread", &pod, &[node_added(bare)]), S);
    assert_eq!(ask("PodTopologySpread", &pod, &node_updated(bare, a)), Q);
    assert_eq!(ask("PodTopologySpread", &pod, &node_updated(a, b)), Q);
    assert_eq!(ask("PodTopologySpread", &pod, &node_updated(a, a_other)), S);
    assert_eq!(ask("PodTopologySpread", &pod, &node_updated(a, a_tainted)), Q);
    assert_eq!(
        ask(
            "PodTopologySpread",
            &pod,
            &node_updated(bare, "{name: n, labels: {rack: r}, allocatable: {pods: '110'}}")
        ),
        S
    );
    let deleted = ClusterEvent::node(ActionType::DELETE, Some(node(a)), None);
    assert_eq!(ask("PodTopologySpread", &pod, &[deleted]), Q);
}

const AFFINE: &str = "{name: p, uid: u-p, namespace: ns, spec: {affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, labelSelector: {matchLabels: {app: db}}}]}}, containers: [{name: c}]}}";
const ANTI: &str = "{name: p, uid: u-p, namespace: ns, spec: {affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, labelSelector: {matchLabels: {app: web}}}]}}, containers: [{name: c}]}}";

#[test]
fn inter_pod_affinity_queues_for_bound_pods_that_start_matching_or_stop_blocking() {
    let affine = waiting(AFFINE);
    let anti = waiting(ANTI);
    let db = "{name: a, uid: u-a, namespace: ns, node: n, labels: {app: db}}";
    let web = "{name: a, uid: u-a, namespace: ns, node: n, labels: {app: web}}";
    let none = "{name: a, uid: u-a, namespace: ns, node: n}";
    assert_eq!(ask("InterPodAffinity", &affine, &[pod_added(db)]), Q);
    assert_eq!(ask("InterPodAffinity", &affine, &[pod_added(web)]), S);
    assert_eq!(
        ask(
            "InterPodAffinity",
            &affine,
            &[pod_added(
                "{name: a, uid: u-a, namespace: other, node: n, labels: {app: db}}"
            )]
        ),
        S,
        "the term selects the pod's own namespace"
    );
    assert_eq!(ask("InterPodAffinity", &affine, &[pod_deleted(db)]), S);
    assert_eq!(ask("InterPodAffinity", &affine, &pod_updated(none, db)), Q);
    assert_eq!(ask("InterPodAffinity", &anti, &[pod_deleted(web)]), Q);
    assert_eq!(ask("InterPodAffinity", &anti, &[pod_deleted(db)]), S);
    assert_eq!(ask("InterPodAffinity", &anti, &pod_updated(web, none)), Q);
    assert_eq!(ask("InterPodAffinity", &anti, &[pod_added(web)]), S);
    assert_eq!(
        ask(
            "InterPodAffinity",
            &anti,
            &[pod_deleted("{name: a, uid: u-a, namespace: ns, labels: {app: web}}")]
        ),
        S,
        "not bound"
    );
}

#[test]
fn inter_pod_affinity_queues_for_nodes_gaining_or_moving_a_terms_topology() {
    let affine = waiting(AFFINE);
    let anti = waiting(ANTI);
    let a = "{name: n, labels: {zone: a}, allocatable: {pods: '110'}}";
    let b = "{name: n, labels: {zone: b}, allocatable: {pods: '110'}}";
    let bare = "{name: n, allocatable: {pods: '110'}}";
    let a_rack = "{name: n, labels: {zone: a, rack: r}, allocatable: {pods: '110'}}";
    assert_eq!(ask("InterPodAffinity", &affine, &[node_added(a)]), Q);
    assert_eq!(ask("InterPodAffinity", &affine, &[node_added(bare)]), S);
    assert_eq!(ask("InterPodAffinity", &affine, &node_updated(bare, a)), Q);
    assert_eq!(ask("InterPodAffinity", &affine, &node_updated(a, b)), Q);
    assert_eq!(ask("InterPodAffinity", &affine, &node_updated(a, bare)), S);
    assert_eq!(ask("InterPodAffinity", &affine, &node_updated(a, a_rack)), S);
    assert_eq!(
        ask("InterPodAffinity", &anti, &[node_added(bare)]),
        Q,
        "any new node may hold no blocking pod"
    );
    assert_eq!(ask("InterPodAffinity", &anti, &node_updated(a, bare)), Q);
    assert_eq!(ask("InterPodAffinity", &anti, &node_updated(bare, a)), S);
    assert_eq!(ask("InterPodAffinity", &anti, &node_updated(a, b)), Q);
}

#[test]
fn an_unprepared_pod_is_queued_by_hints_that_read_its_parsed_terms() {
    let pod = HintPod::new(pod(PLAIN));
    assert!(!pod.is_prepared());
    assert_eq!(
        ask(
            "NodeResourcesFit",
            &pod,
            &[node_added("{name: n, allocatable: {pods: '1'}}")]
        ),
        Q
    );
    assert_eq!(
        ask(
            "NodeUnschedulable",
            &pod,
            &[node_added("{name: n, unschedulable: true}")]
        ),
        S,
        "hints on the pod object alone still answer"
    );
}

#[test]
fn default_hard_spreading_reads_the_selector_the_pods_services_give_it() {
    use crate::scheduler::engine::args::{DefaultingType, PodTopologySpreadArgs};
    let mut profile = Profile::default_provider();
    profile.args.pod_topology_spread = PodTopologySpreadArgs {
        default_constraints: vec![k8s_openapi::api::core::v1::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "zone".to_string(),
            when_unsatisfiable: "DoNotSchedule".to_string(),
            ..Default::default()
        }],
        defaulting_type: DefaultingType::List,
    };
    let hints = QueueingHints::new(&profile);
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"app": "web"}}}))
    .unwrap();
    let workloads = Workloads {
        services: vec![service],
        ..Workloads::default()
    };
    let served = hints.prepare(
        pod("{name: p, uid: u-p, namespace: ns, labels: {app: web}}"),
        &workloads,
    );
    let web = pod_added("{name: a, uid: u-a, namespace: ns, node: n, labels: {app: web}}");
    let db = pod_added("{name: a, uid: u-a, namespace: ns, node: n, labels: {app: db}}");
    assert_eq!(hints.hint("PodTopologySpread", &served, &web), Some(Hint::Queue));
    assert_eq!(hints.hint("PodTopologySpread", &served, &db), Some(Hint::Skip));
    assert_eq!(
        hints.hint(
            "PodTopologySpread",
            &served,
            &node_added("{name: n, allocatable: {pods: '1'}}")
        ),
        Some(Hint::Skip),
        "a node without the default constraint's key"
    );
    let alone = hints.prepare(
        pod("{name: p, uid: u-p, namespace: ns, labels: {app: web}}"),
        &Workloads::default(),
    );
    assert_eq!(
        hints.hint("PodTopologySpread", &alone, &db),
        Some(Hint::Skip),
        "without a service the default constraints select nothing: no pod matters"
    );
}

#[test]
fn a_node_value_filter_is_asked_about_every_node_change_and_no_pod_change() {
    use crate::scheduler::engine::FilterEntry;
    use crate::scheduler::engine::declarative::NodeValueArgs;
    let mut profile = Profile::default_provider();
    let args: NodeValueArgs = serde_json::from_value(serde_json::json!({
        "name": "CpuUsage", "jsonPath": "{.metadata.annotations.cpu}", "max": 50}))
    .unwrap();
    profile.filters.push(FilterEntry::NodeValue(args));
    let hints = QueueingHints::new(&profile);
    let pod = hints.prepare(pod(PLAIN), &Workloads::default());
    let annotated = node_updated(
        NODE,
        "{name: n, annotations: {cpu: '10'}, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}",
    );
    assert_eq!(annotated.len(), 1);
    assert_eq!(hints.hint("CpuUsage", &pod, &annotated[0]), Some(Hint::Queue));
    assert_eq!(
        hints.hint("CpuUsage", &pod, &pod_deleted("{name: a, uid: u-a, node: n}")),
        None
    );
}

#[test]
fn events_carry_kube_schedulers_labels() {
    assert_eq!(node_added(NODE).label(), "NodeAdd");
    assert_eq!(pod_deleted("{name: a, node: n}").label(), "AssignedPodDelete");
    assert_eq!(pod_deleted("{name: a}").label(), "UnschedulablePodDelete");
    assert_eq!(
        node_updated(
            NODE,
            "{name: n, labels: {a: b}, allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}"
        )[0]
        .label(),
        "NodeUpdateNodeLabel"
    );
    assert_eq!(
        ClusterEvent::wildcard("UnschedulableTimeout").label(),
        "UnschedulableTimeout"
    );
}

#[test]
fn from_v1_36_pod_hints_count_nominated_pods_and_the_pods_own_labels() {
    use crate::KubernetesVersion::{V1_35, V1_36, V1_37};
    use serde_json::json;
    let spread_and_anti = json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "p", "labels": {"app": "p"}},
        "spec": {"containers": [{"name": "c"}],
                 "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                     "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
                 "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                     {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}]}}}
    });
    let pod: Pod = serde_json::from_value(spread_and_anti).unwrap();
    // A nominated (not bound) pod of the namespace, labelled for the spread constraint and the anti-affinity.
    let nominated = |app: &str| -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("n-{app}"), "namespace": "ns", "uid": format!("n-{app}"),
                             "labels": {"app": app}},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"nominatedNodeName": "n1"}
            }))
            .unwrap(),
        )
    };
    let hint = |version, plugin: &str, event: &ClusterEvent| {
        let hints = QueueingHints::for_version(&Profile::default_provider(), version);
        let prepared = hints.prepare(Arc::new(pod.clone()), &Workloads::default());
        hints.hint(plugin, &prepared, event)
    };
    let added = ClusterEvent::pod(ActionType::ADD, None, Some(nominated("web")));
    let deleted = ClusterEvent::pod(ActionType::DELETE, Some(nominated("db")), None);
    assert_eq!(hint(V1_35, "PodTopologySpread", &added), Some(Hint::Skip));
    assert_eq!(hint(V1_36, "PodTopologySpread", &added), Some(Hint::Queue));
    assert_eq!(hint(V1_35, "InterPodAffinity", &deleted), Some(Hint::Skip));
    assert_eq!(hint(V1_37, "InterPodAffinity", &deleted), Some(Hint::Queue));

    // The pod's own label change queues it from v1.36.
    let mut relabelled = pod.clone();
    relabelled.metadata.labels = Some([("app".to_string(), "q".to_string())].into());
    let own = ClusterEvent::pod(
        ActionType::UPDATE_POD_LABEL,
        Some(Arc::new(pod.clone())),
        Some(Arc::new(relabelled)),
    );
    assert_eq!(hint(V1_35, "InterPodAffinity", &own), Some(Hint::Skip));
    assert_eq!(hint(V1_36, "InterPodAffinity", &own), Some(Hint::Queue));

    // A deleted bound pod whose own anti-affinity the pod matched queues it from v1.36.
    let blocker: Arc<Pod> = Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "b", "namespace": "ns", "uid": "b", "labels": {"app": "other"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}],
                     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                         {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "p"}}}]}}}
        }))
        .unwrap(),
    );
    let gone = ClusterEvent::pod(ActionType::DELETE, Some(blocker), None);
    assert_eq!(hint(V1_35, "InterPodAffinity", &gone), Some(Hint::Skip));
    assert_eq!(hint(V1_36, "InterPodAffinity", &gone), Some(Hint::Queue));
}
