//! kube-scheduler v1.35's queueing hints: the events each plugin registers, and whether one could help a pod.

// For each plugin of the engine: the cluster events it registers, and whether one could make a pod that plugin
// rejected schedulable (Queue) or cannot (Skip).
//
// Cited paths are relative to `pkg/scheduler/` of k8s.io/kubernetes@v1.35.4 (SchedulerQueueingHints is GA and
// locked on there, so these are the "hints on" registrations); `fwk` is k8s.io/kube-scheduler@v0.35.4/framework.
//
// A hint function that fails upstream (an object of the wrong type, a selector that does not parse) answers
// Queue so the pod is never stuck; the same rule applies here to a pod or node whose quantities do not parse.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::behaviour::Behaviour;
use super::field::FieldPath;
use super::kept::Kept;
use super::labels::{Labels, NodeSelector, RequiredNodeAffinity, labels_of, node_taints, pod_tolerations};
use super::labels::{tolerated, untolerated_hard_taint};
use super::plugins::pod_topology_spread::{Constraint, PodTopologySpread};
use super::pod_info::{AffinityTerm, HostPort, PodInfo, host_ports, priority};
use super::profile::{FilterEntry, FilterPlugin, Profile};
use super::resources::{RequestOptions, Resource, parse_list};
use super::snapshot::Workloads;
use super::volume_hints;
pub use super::volume_hints::StorageObject;

/// `fwk.ActionType`: what changed, as bits (the same bit order as v0.35.4's `types.go:36-80`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActionType(u16);

impl ActionType {
    pub const ADD: ActionType = ActionType(1);
    pub const DELETE: ActionType = ActionType(1 << 1);
    pub const UPDATE_NODE_ALLOCATABLE: ActionType = ActionType(1 << 2);
    pub const UPDATE_NODE_LABEL: ActionType = ActionType(1 << 3);
    pub const UPDATE_NODE_TAINT: ActionType = ActionType(1 << 4);
    pub const UPDATE_NODE_CONDITION: ActionType = ActionType(1 << 5);
    pub const UPDATE_NODE_ANNOTATION: ActionType = ActionType(1 << 6);
    pub const UPDATE_NODE_DECLARED_FEATURE: ActionType = ActionType(1 << 7);
    pub const UPDATE_POD_LABEL: ActionType = ActionType(1 << 8);
    pub const UPDATE_POD_SCALE_DOWN: ActionType = ActionType(1 << 9);
    pub const UPDATE_POD_TOLERATION: ActionType = ActionType(1 << 10);
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType = ActionType(1 << 11);
    pub const UPDATE_POD_GENERATED_RESOURCE_CLAIM: ActionType = ActionType(1 << 12);
    /// Every action.
    pub const ALL: ActionType = ActionType((1 << 13) - 1);
    /// Every update (an update none of the specific kinds describes is reported as this).
    pub const UPDATE: ActionType = ActionType(((1 << 13) - 1) & !3);

    /// Both sets of bits.
    pub const fn or(self, other: ActionType) -> ActionType {
        ActionType(self.0 | other.0)
    }

    /// kube-scheduler's label of a single action (the `event` label of its metrics).
    pub fn label(self) -> &'static str {
        const LABELS: [&str; 13] = [
            "Add",
            "Delete",
            "UpdateNodeAllocatable",
            "UpdateNodeLabel",
            "UpdateNodeTaint",
            "UpdateNodeCondition",
            "UpdateNodeAnnotation",
            "UpdateNodeDeclaredFeature",
            "UpdatePodLabel",
            "UpdatePodScaleDown",
            "UpdatePodToleration",
            "UpdatePodSchedulingGatesEliminated",
            "UpdatePodGeneratedResourceClaim",
        ];
        match self {
            ActionType::ALL => "All",
            ActionType::UPDATE => "Update",
            _ if self.0.is_power_of_two() => LABELS[self.0.trailing_zeros() as usize],
            _ => "Multiple",
        }
    }
}

impl fmt::Debug for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// What an event is about (`fwk.EventResource`, with v1.35's split of pods into assigned and unscheduled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventResource {
    Node,
    /// A pod bound to a node (or assumed there).
    AssignedPod,
    /// A pod without a node.
    UnscheduledPod,
    /// In registrations only: any pod, assigned or not (`matchEventResources`, `framework/types.go:126-134`).
    Pod,
    /// Every resource: moves every pod that failed, whatever rejected it.
    WildCard,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    CsiNode,
    CsiDriver,
    CsiStorageCapacity,
    VolumeAttachment,
}

/// The objects an event carries: the old one (absent for an add) and the new one (absent for a delete).
#[derive(Clone, Debug)]
pub enum EventObjects {
    None,
    Node {
        old: Option<Arc<Node>>,
        new: Option<Arc<Node>>,
    },
    Pod {
        old: Option<Arc<Pod>>,
        new: Option<Arc<Pod>>,
    },
    Storage {
        old: Option<Arc<StorageObject>>,
        new: Option<Arc<StorageObject>>,
    },
}

/// One cluster event (`fwk.ClusterEvent` with its old and new objects).
#[derive(Clone, Debug)]
pub struct ClusterEvent {
    pub resource: EventResource,
    pub action: ActionType,
    pub objects: EventObjects,
    /// A wildcard event's name (`UnschedulableTimeout`, `ForceActivate`, Ruleplane's `CacheRebuilt`).
    pub custom: Option<&'static str>,
}

impl ClusterEvent {
    /// A node added, changed (one event per kind of change, [`node_update_actions`]) or deleted.
    pub fn node(action: ActionType, old: Option<Arc<Node>>, new: Option<Arc<Node>>) -> ClusterEvent {
        ClusterEvent {
            resource: EventResource::Node,
            action,
            objects: EventObjects::Node { old, new },
            custom: None,
        }
    }

    /// A pod added, changed or deleted; assigned or unscheduled by the pod's `spec.nodeName` (the new one's, or
    /// the deleted one's).
    pub fn pod(action: ActionType, old: Option<Arc<Pod>>, new: Option<Arc<Pod>>) -> ClusterEvent {
        let current = new.as_deref().or(old.as_deref());
        let resource = if current.is_some_and(|p| node_name(p).is_some()) {
            EventResource::AssignedPod
        } else {
            EventResource::UnscheduledPod
        };
        ClusterEvent {
            resource,
            action,
            objects: EventObjects::Pod { old, new },
            custom: None,
        }
    }

    /// A storage object added, updated or deleted (both objects of the same kind).
    pub fn storage(
        action: ActionType,
        old: Option<Arc<StorageObject>>,
        new: Option<Arc<StorageObject>>,
    ) -> ClusterEvent {
        let resource = match new.as_deref().or(old.as_deref()) {
            Some(StorageObject::Claim(_)) | None => EventResource::PersistentVolumeClaim,
            Some(StorageObject::Volume(_)) => EventResource::PersistentVolume,
            Some(StorageObject::Class(_)) => EventResource::StorageClass,
            Some(StorageObject::CsiNode(_)) => EventResource::CsiNode,
            Some(StorageObject::CsiDriver(_)) => EventResource::CsiDriver,
            Some(StorageObject::Capacity(_)) => EventResource::CsiStorageCapacity,
            Some(StorageObject::Attachment(_)) => EventResource::VolumeAttachment,
        };
        ClusterEvent {
            resource,
            action,
            objects: EventObjects::Storage { old, new },
            custom: None,
        }
    }

    /// A wildcard event: every pod that failed is worth retrying (after its backoff).
    pub fn wildcard(name: &'static str) -> ClusterEvent {
        ClusterEvent {
            resource: EventResource::WildCard,
            action: ActionType::ALL,
            objects: EventObjects::None,
            custom: Some(name),
        }
    }

    /// Whether this is a wildcard event.
    pub(crate) fn is_wildcard(&self) -> bool {
        self.resource == EventResource::WildCard
    }

    /// kube-scheduler's label of the event (`ClusterEvent.Label`), e.g. `NodeUpdateNodeLabel`, `AssignedPodDelete`.
    pub fn label(&self) -> String {
        if let Some(custom) = self.custom {
            return custom.to_string();
        }
        let resource = match self.resource {
            EventResource::Node => "Node",
            EventResource::AssignedPod => "AssignedPod",
            EventResource::UnscheduledPod => "UnschedulablePod",
            EventResource::Pod => "Pod",
            EventResource::WildCard => "*",
            EventResource::PersistentVolumeClaim => "PersistentVolumeClaim",
            EventResource::PersistentVolume => "PersistentVolume",
            EventResource::StorageClass => "storage.k8s.io/StorageClass",
            EventResource::CsiNode => "storage.k8s.io/CSINode",
            EventResource::CsiDriver => "storage.k8s.io/CSIDriver",
            EventResource::CsiStorageCapacity => "storage.k8s.io/CSIStorageCapacity",
            EventResource::VolumeAttachment => "storage.k8s.io/VolumeAttachment",
        };
        format!("{resource}{}", self.action.label())
    }

    fn nodes(&self) -> (Option<&Node>, Option<&Node>) {
        match &self.objects {
            EventObjects::Node { old, new } => (old.as_deref(), new.as_deref()),
            _ => (None, None),
        }
    }

    fn pods(&self) -> (Option<&Pod>, Option<&Pod>) {
        match &self.objects {
            EventObjects::Pod { old, new } => (old.as_deref(), new.as_deref()),
            _ => (None, None),
        }
    }

    fn storage_objects(&self) -> (Option<&StorageObject>, Option<&StorageObject>) {
        match &self.objects {
            EventObjects::Storage { old, new } => (old.as_deref(), new.as_deref()),
            _ => (None, None),
        }
    }
}

/// A plugin's answer for one pod and one event (`fwk.QueueingHint`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    /// The event may make the pod schedulable: retry it.
    Queue,
    /// The event cannot help the pod.
    Skip,
}

/// `MatchClusterEvents` (`framework/types.go:120-123`): the registered resource covers the event's, and the
/// event's action is within the registered actions (so a plain `Update` matches only a registration of every
/// update).
fn matches(registered: (EventResource, ActionType), event: &ClusterEvent) -> bool {
    let (resource, action) = registered;
    let resource_matches = resource == EventResource::WildCard
        || resource == event.resource
        || (resource == EventResource::Pod
            && matches!(
                event.resource,
                EventResource::AssignedPod | EventResource::UnscheduledPod
            ));
    resource_matches && action.0 & event.action.0 != 0 && event.action.0 <= action.0
}

/// What a plugin's hint function looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HintFn {
    /// No hint function: a matching event always queues.
    Always,
    /// A hint that always skips: the plugin only says which events may end its PreEnqueue hold.
    Never,
    SchedulingGatesEliminated,
    NodeUnschedulableNode,
    NodeUnschedulableToleration,
    TaintTolerationNode,
    TaintTolerationToleration,
    NodeAffinityNode,
    NodePortsPodDeleted,
    FitPod,
    FitNode,
    SpreadPod,
    SpreadNode,
    AffinityPod,
    AffinityNode,
    RestrictionsPodDeleted,
    /// The claim is one of the pod's `persistentVolumeClaim` volumes.
    ClaimOfPod,
    /// The claim is one of the pod's, ephemeral volumes' claims included.
    ClaimOrEphemeralOfPod,
    LimitsCsiNodeUpdated,
    LimitsPodDeleted,
    LimitsAttachmentDeleted,
    BindingClassChanged,
    BindingCsiNodeChanged,
    BindingCsiDriverChanged,
    BindingCapacityChanged,
    ZoneClassAdded,
    ZoneVolumeChanged,
}

use ActionType as A;
use EventResource as R;

type Registrations = &'static [(EventResource, ActionType, HintFn)];

// schedulinggates/scheduling_gates.go:66-73
static SCHEDULING_GATES_EVENTS: Registrations = &[(
    R::Pod,
    A::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
    HintFn::SchedulingGatesEliminated,
)];
// defaultpreemption/default_preemption.go:148-163 (async preemption): a pod deletion may end the hold of a preemptor
// whose victims are being deleted; the hint skips, the plugins that rejected the pod decide.
static DEFAULT_PREEMPTION_EVENTS: Registrations = &[(R::Pod, A::DELETE, HintFn::Never)];
// nodeunschedulable/node_unschedulable.go:61-77
static NODE_UNSCHEDULABLE_EVENTS: Registrations = &[
    (R::Node, A::ADD.or(A::UPDATE_NODE_TAINT), HintFn::NodeUnschedulableNode),
    (R::Pod, A::UPDATE_POD_TOLERATION, HintFn::NodeUnschedulableToleration),
];
// nodename/node_name.go:53-62 (no hint function)
static NODE_NAME_EVENTS: Registrations = &[(R::Node, A::ADD, HintFn::Always)];
// tainttoleration/taint_toleration.go:70-84
static TAINT_TOLERATION_EVENTS: Registrations = &[
    (R::Node, A::ADD.or(A::UPDATE_NODE_TAINT), HintFn::TaintTolerationNode),
    (R::Pod, A::UPDATE_POD_TOLERATION, HintFn::TaintTolerationToleration),
];
// nodeaffinity/node_affinity.go:104-116
static NODE_AFFINITY_EVENTS: Registrations = &[(R::Node, A::ADD.or(A::UPDATE_NODE_LABEL), HintFn::NodeAffinityNode)];
// nodeports/node_ports.go:113-125 (node additions without a hint function)
static NODE_PORTS_EVENTS: Registrations = &[
    (R::Pod, A::DELETE, HintFn::NodePortsPodDeleted),
    (R::Node, A::ADD, HintFn::Always),
];
// noderesources/fit.go:342-361 (InPlacePodVerticalScaling is GA: scale-downs register too)
static FIT_EVENTS: Registrations = &[
    (R::Pod, A::DELETE.or(A::UPDATE_POD_SCALE_DOWN), HintFn::FitPod),
    (R::Node, A::ADD.or(A::UPDATE_NODE_ALLOCATABLE), HintFn::FitNode),
];
// podtopologyspread/plugin.go:157-181
static SPREAD_EVENTS: Registrations = &[
    (
        R::Pod,
        A::ADD
            .or(A::UPDATE_POD_LABEL)
            .or(A::UPDATE_POD_TOLERATION)
            .or(A::DELETE),
        HintFn::SpreadPod,
    ),
    (
        R::Node,
        A::ADD.or(A::DELETE).or(A::UPDATE_NODE_LABEL).or(A::UPDATE_NODE_TAINT),
        HintFn::SpreadNode,
    ),
];
// interpodaffinity/plugin.go:88-102
static AFFINITY_EVENTS: Registrations = &[
    (
        R::Pod,
        A::ADD.or(A::UPDATE_POD_LABEL).or(A::DELETE),
        HintFn::AffinityPod,
    ),
    (R::Node, A::ADD.or(A::UPDATE_NODE_LABEL), HintFn::AffinityNode),
];
// volumerestrictions/volume_restrictions.go:340-352 (hints on: node additions only, without a hint function)
static VOLUME_RESTRICTIONS_EVENTS: Registrations = &[
    (R::Pod, A::DELETE, HintFn::RestrictionsPodDeleted),
    (R::Node, A::ADD, HintFn::Always),
    (R::PersistentVolumeClaim, A::ADD, HintFn::ClaimOfPod),
];
// nodevolumelimits/csi.go:88-97
static NODE_VOLUME_LIMITS_EVENTS: Registrations = &[
    (R::CsiNode, A::ADD, HintFn::Always),
    (R::CsiNode, A::UPDATE, HintFn::LimitsCsiNodeUpdated),
    (R::Pod, A::DELETE, HintFn::LimitsPodDeleted),
    (R::PersistentVolumeClaim, A::ADD, HintFn::ClaimOrEphemeralOfPod),
    (R::VolumeAttachment, A::DELETE, HintFn::LimitsAttachmentDeleted),
];
// volumebinding/volume_binding.go:106-140 (hints on: nodes without taint updates)
static VOLUME_BINDING_EVENTS: Registrations = &[
    (R::StorageClass, A::ADD.or(A::UPDATE), HintFn::BindingClassChanged),
    (
        R::PersistentVolumeClaim,
        A::ADD.or(A::UPDATE),
        HintFn::ClaimOrEphemeralOfPod,
    ),
    (R::PersistentVolume, A::ADD.or(A::UPDATE), HintFn::Always),
    (R::Node, A::ADD.or(A::UPDATE_NODE_LABEL), HintFn::Always),
    (R::CsiNode, A::ADD.or(A::UPDATE), HintFn::BindingCsiNodeChanged),
    (R::CsiDriver, A::UPDATE, HintFn::BindingCsiDriverChanged),
    (
        R::CsiStorageCapacity,
        A::ADD.or(A::UPDATE),
        HintFn::BindingCapacityChanged,
    ),
];
// volumezone/volume_zone.go:270-283 (hints on: nodes without taint updates)
static VOLUME_ZONE_EVENTS: Registrations = &[
    (R::StorageClass, A::ADD, HintFn::ZoneClassAdded),
    (R::Node, A::ADD.or(A::UPDATE_NODE_LABEL), HintFn::Always),
    (R::PersistentVolumeClaim, A::ADD.or(A::UPDATE), HintFn::ClaimOfPod),
    (R::PersistentVolume, A::ADD.or(A::UPDATE), HintFn::ZoneVolumeChanged),
];
// gangscheduling/gangscheduling.go:68-82 registers a member pod added and its Workload added; the cache emits
// neither (it tracks bound pods, not Workloads), so the scheduler worker activates the group's waiting members
// itself on those changes (`SchedulingQueue::activate`). No cluster event moves them here.
static GANG_SCHEDULING_EVENTS: Registrations = &[];
// Ruleplane's NodeValue reads any part of the node: every node addition and change may matter.
static NODE_VALUE_EVENTS: Registrations = &[(R::Node, A::ADD.or(A::UPDATE), HintFn::Always)];
// Plugins the engine does not evaluate (they refuse pods that need unsupported features) and names it does not
// know: every event, as before hints.
static EVERY_EVENT: Registrations = &[(R::WildCard, A::ALL, HintFn::Always)];

/// The events a plugin registers, each with its hint (`EventsToRegister` of each plugin, hints on).
fn registrations(plugin: Registered) -> Registrations {
    match plugin {
        Registered::SchedulingGates => SCHEDULING_GATES_EVENTS,
        Registered::DefaultPreemption => DEFAULT_PREEMPTION_EVENTS,
        Registered::GangScheduling => GANG_SCHEDULING_EVENTS,
        Registered::Filter(FilterPlugin::NodeUnschedulable) => NODE_UNSCHEDULABLE_EVENTS,
        Registered::Filter(FilterPlugin::NodeName) => NODE_NAME_EVENTS,
        Registered::Filter(FilterPlugin::TaintToleration) => TAINT_TOLERATION_EVENTS,
        Registered::Filter(FilterPlugin::NodeAffinity) => NODE_AFFINITY_EVENTS,
        Registered::Filter(FilterPlugin::NodePorts) => NODE_PORTS_EVENTS,
        Registered::Filter(FilterPlugin::NodeResourcesFit) => FIT_EVENTS,
        Registered::Filter(FilterPlugin::PodTopologySpread) => SPREAD_EVENTS,
        Registered::Filter(FilterPlugin::InterPodAffinity) => AFFINITY_EVENTS,
        Registered::Filter(FilterPlugin::VolumeRestrictions) => VOLUME_RESTRICTIONS_EVENTS,
        Registered::Filter(FilterPlugin::NodeVolumeLimits) => NODE_VOLUME_LIMITS_EVENTS,
        Registered::Filter(FilterPlugin::VolumeBinding) => VOLUME_BINDING_EVENTS,
        Registered::Filter(FilterPlugin::VolumeZone) => VOLUME_ZONE_EVENTS,
        Registered::NodeValue => NODE_VALUE_EVENTS,
        Registered::Filter(_) | Registered::Unknown => EVERY_EVENT,
    }
}

/// A rejecting plugin as far as registrations go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Registered {
    SchedulingGates,
    DefaultPreemption,
    GangScheduling,
    Filter(FilterPlugin),
    NodeValue,
    Unknown,
}

/// The PreEnqueue plugin that holds pods with scheduling gates.
pub const SCHEDULING_GATES: &str = "SchedulingGates";
/// The PreEnqueue plugin that holds a preemptor while its victims are being deleted (async preemption).
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";

/// A queued pod, prepared for hints once it fails: parsed then, asked for every event while it waits.
///
/// A pod not prepared (queued, not failed yet) keeps its object as JSON text beside what the queue orders it by: a
/// burst of 10,000 pending pods would otherwise hold 10,000 typed pods (several times their text each) until each is
/// attempted, which parses it from the watch's cache anyway.
#[derive(Debug)]
pub struct HintPod {
    /// The pod as it was last scheduled (or updated while waiting): parsed for a prepared pod, else as text.
    pod: Kept<Pod>,
    uid: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    resource_version: Option<String>,
    priority: i32,
    gated: bool,
    parsed: Option<Parsed>,
}

#[derive(Debug)]
struct Parsed {
    info: PodInfo,
    required_node_affinity: RequiredNodeAffinity,
    /// NodeResourcesFit's view of the requests (`computePodResourceRequest`).
    request: Resource,
    /// The hard (DoNotSchedule) spread constraints, or why they could not be built.
    spread: Result<Vec<Constraint>, String>,
}

impl HintPod {
    /// A pod not prepared, kept as text: enough to queue it (priority, gates); the hints that read its parsed
    /// terms answer Queue for it. [`QueueingHints::prepare`] makes the full one when it fails.
    pub fn new(pod: Arc<Pod>) -> HintPod {
        let mut queued = HintPod::with(pod, None);
        queued.pod = queued.pod.into_text();
        queued
    }

    fn with(pod: Arc<Pod>, parsed: Option<Parsed>) -> HintPod {
        let metadata = &pod.metadata;
        HintPod {
            uid: metadata.uid.clone().filter(|u| !u.is_empty()),
            namespace: metadata.namespace.clone(),
            name: metadata.name.clone(),
            resource_version: metadata.resource_version.clone(),
            priority: priority(&pod),
            gated: pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| !g.is_empty()),
            pod: Kept::parsed(pod),
            parsed,
        }
    }

    /// The pod object (a pod kept as text is parsed on the first call and kept).
    pub fn pod(&self) -> &Arc<Pod> {
        self.pod.get()
    }

    /// The pod object if it is kept parsed (prepared, or parsed already).
    pub fn parsed_pod(&self) -> Option<&Arc<Pod>> {
        self.pod.if_parsed()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// Whether [`QueueingHints::prepare`] made it (and its quantities parse).
    #[cfg(test)]
    pub(crate) fn is_prepared(&self) -> bool {
        self.parsed.is_some()
    }

    /// The pod's key in the snapshot (UID, else `namespace/name`).
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// `spec.priority` (0 when unset), the queue's order.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// Whether the pod has scheduling gates (SchedulingGates' PreEnqueue rejects it).
    pub(crate) fn is_gated(&self) -> bool {
        self.gated
    }

    fn same_pod(&self, other: &Pod) -> bool {
        match (self.uid(), other.metadata.uid.as_deref()) {
            (Some(a), Some(b)) => a == b,
            _ => self.namespace == other.metadata.namespace && self.name == other.metadata.name,
        }
    }
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn nominated_node_name(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// A profile's hint functions, with the args they read (NodeAffinity's added affinity, PodTopologySpread's
/// default constraints).
#[derive(Debug)]
pub struct QueueingHints {
    behaviour: Behaviour,
    added_required: Option<NodeSelector>,
    spread: PodTopologySpread,
    node_values: BTreeSet<String>,
}

impl QueueingHints {
    /// [`QueueingHints::for_version`] as kube-scheduler v1.35, the oldest supported (unit tests).
    pub fn new(profile: &Profile) -> QueueingHints {
        QueueingHints::for_version(profile, crate::KubernetesVersion::OLDEST)
    }

    /// The hints of a profile, as kube-scheduler of `version` gives them.
    pub fn for_version(profile: &Profile, version: crate::KubernetesVersion) -> QueueingHints {
        let added_required = profile
            .args
            .node_affinity
            .added_affinity
            .as_ref()
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|required| NodeSelector::compile(required, &FieldPath::root()));
        let node_values = profile
            .filters
            .iter()
            .filter_map(|f| match f {
                FilterEntry::NodeValue(args) => Some(args.name.clone()),
                FilterEntry::Plugin(_) => None,
            })
            .collect();
        QueueingHints {
            behaviour: Behaviour::of(version),
            added_required,
            spread: PodTopologySpread::new(&profile.args.pod_topology_spread),
            node_values,
        }
    }

    /// Parses what the hints read from a pod; `workloads` give a pod without its own spread constraints the
    /// selector of the profile's default constraints.
    pub fn prepare(&self, pod: Arc<Pod>, workloads: &Workloads) -> HintPod {
        let parsed = PodInfo::new(pod.clone()).ok().map(|info| {
            let request = Resource::max_with_zero(&info.parsed_resources.requests(RequestOptions::default()));
            let spread = self.spread.constraints_for(&info, workloads, "DoNotSchedule");
            Parsed {
                required_node_affinity: RequiredNodeAffinity::of(info.pod()),
                request,
                spread,
                info,
            }
        });
        HintPod::with(pod, parsed)
    }

    fn registered(&self, plugin: &str) -> Registered {
        if plugin == SCHEDULING_GATES {
            return Registered::SchedulingGates;
        }
        if plugin == DEFAULT_PREEMPTION {
            return Registered::DefaultPreemption;
        }
        // Both gang dialects move their members by activating the group, not by cluster events.
        if plugin == crate::scheduler::pod_group::GANG_SCHEDULING || plugin == crate::scheduler::pod_group::COSCHEDULING
        {
            return Registered::GangScheduling;
        }
        if self.node_values.contains(plugin) {
            return Registered::NodeValue;
        }
        FilterPlugin::from_name(plugin).map_or(Registered::Unknown, Registered::Filter)
    }

    /// Whether some plugin among `plugins` registers the event (`isEventOfInterest`, restricted to the plugins
    /// that rejected pods).
    pub(crate) fn is_registered(&self, plugin: &str, event: &ClusterEvent) -> bool {
        registrations(self.registered(plugin))
            .iter()
            .any(|(resource, action, _)| matches((*resource, *action), event))
    }

    /// The hint of `plugin` for `pod` on `event`: `None` when the plugin does not register the event, else
    /// what its hint function answers.
    pub fn hint(&self, plugin: &str, pod: &HintPod, event: &ClusterEvent) -> Option<Hint> {
        let mut answer = None;
        for (resource, action, function) in registrations(self.registered(plugin)) {
            if !matches((*resource, *action), event) {
                continue;
            }
            match self.run(*function, pod, event) {
                Hint::Queue => return Some(Hint::Queue),
                Hint::Skip => answer = Some(Hint::Skip),
            }
        }
        answer
    }

    fn run(&self, function: HintFn, pod: &HintPod, event: &ClusterEvent) -> Hint {
        let (old_node, new_node) = event.nodes();
        let (old_pod, new_pod) = event.pods();
        let answer = match function {
            HintFn::Always => true,
            HintFn::Never => false,
            HintFn::SchedulingGatesEliminated => scheduling_gates_eliminated(pod, new_pod),
            HintFn::NodeUnschedulableNode => node_unschedulable_node(old_node, new_node),
            HintFn::NodeUnschedulableToleration => node_unschedulable_toleration(pod, new_pod),
            HintFn::TaintTolerationNode => taint_toleration_node(pod, old_node, new_node),
            HintFn::TaintTolerationToleration => new_pod.is_some_and(|p| pod.same_pod(p)),
            HintFn::RestrictionsPodDeleted => volume_hints::restrictions_pod_deleted(pod.pod(), old_pod),
            HintFn::LimitsPodDeleted => volume_hints::limits_pod_deleted(old_pod),
            storage_function @ (HintFn::ClaimOfPod
            | HintFn::ClaimOrEphemeralOfPod
            | HintFn::LimitsCsiNodeUpdated
            | HintFn::LimitsAttachmentDeleted
            | HintFn::BindingClassChanged
            | HintFn::BindingCsiNodeChanged
            | HintFn::BindingCsiDriverChanged
            | HintFn::BindingCapacityChanged
            | HintFn::ZoneClassAdded
            | HintFn::ZoneVolumeChanged) => storage_hint(storage_function, pod.pod(), event),
            parsed_function => {
                // A pod not prepared, or whose quantities do not parse, answers Queue, as a hint function's
                // error does.
                let Some(parsed) = pod.parsed.as_ref() else {
                    return Hint::Queue;
                };
                match parsed_function {
                    HintFn::NodeAffinityNode => self.node_affinity_node(parsed, old_node, new_node),
                    HintFn::NodePortsPodDeleted => node_ports_pod_deleted(parsed, old_pod),
                    HintFn::FitPod => fit_pod(pod, parsed, old_pod, new_pod),
                    HintFn::FitNode => fit_node(parsed, old_node, new_node),
                    HintFn::SpreadPod => spread_pod(self.behaviour, pod, parsed, old_pod, new_pod),
                    HintFn::SpreadNode => spread_node(parsed, old_node, new_node),
                    HintFn::AffinityPod => affinity_pod(self.behaviour, pod, parsed, old_pod, new_pod),
                    _ => affinity_node(parsed, old_node, new_node),
                }
            }
        };
        if answer { Hint::Queue } else { Hint::Skip }
    }

    /// `NodeAffinity.isSchedulableAfterNodeChange` (`nodeaffinity/node_affinity.go:119-160`): the node now
    /// matches the pod's selector and required affinity (and the profile's added affinity), and either is new
    /// or did not match before.
    fn node_affinity_node(&self, parsed: &Parsed, old: Option<&Node>, new: Option<&Node>) -> bool {
        let Some(new) = new else { return true };
        if self.added_required.as_ref().is_some_and(|added| !added.matches(new)) {
            return false;
        }
        if !parsed.required_node_affinity.matches(new) {
            return false;
        }
        old.is_none_or(|old| !parsed.required_node_affinity.matches(old))
    }
}

/// The hints of storage events (an object of another kind than registered answers Queue, as upstream's
/// conversion error does).
fn storage_hint(function: HintFn, pod: &Pod, event: &ClusterEvent) -> bool {
    use StorageObject as S;
    let (old, new) = event.storage_objects();
    macro_rules! pick {
        ($variant:ident) => {{
            let old_typed = match old {
                Some(S::$variant(object)) => Some(&**object),
                _ => None,
            };
            let new_typed = match new {
                Some(S::$variant(object)) => Some(&**object),
                _ => None,
            };
            if (old.is_some() && old_typed.is_none()) || (new.is_some() && new_typed.is_none()) {
                return true;
            }
            (old_typed, new_typed)
        }};
    }
    match function {
        HintFn::ClaimOfPod => volume_hints::is_claim_of_pod(pod, pick!(Claim).1, false),
        HintFn::ClaimOrEphemeralOfPod => volume_hints::is_claim_of_pod(pod, pick!(Claim).1, true),
        HintFn::LimitsCsiNodeUpdated => {
            let (old, new) = pick!(CsiNode);
            volume_hints::limits_csi_node_updated(old, new)
        }
        HintFn::LimitsAttachmentDeleted => volume_hints::limits_attachment_deleted(pod, pick!(Attachment).0),
        HintFn::BindingClassChanged => {
            let (old, new) = pick!(Class);
            volume_hints::binding_class_changed(old, new)
        }
        HintFn::BindingCsiNodeChanged => {
            let (old, new) = pick!(CsiNode);
            volume_hints::binding_csi_node_changed(old, new)
        }
        HintFn::BindingCsiDriverChanged => {
            let (old, new) = pick!(CsiDriver);
            volume_hints::binding_csi_driver_changed(pod, old, new)
        }
        HintFn::BindingCapacityChanged => {
            let (old, new) = pick!(Capacity);
            volume_hints::binding_capacity_changed(old, new)
        }
        HintFn::ZoneClassAdded => volume_hints::zone_class_added(pick!(Class).1),
        HintFn::ZoneVolumeChanged => {
            let (old, new) = pick!(Volume);
            volume_hints::zone_volume_changed(old, new)
        }
        _ => true,
    }
}

/// `SchedulingGates.isSchedulableAfterUpdatePodSchedulingGatesEliminated` (`scheduling_gates.go:76-89`): only
/// this pod's own gates matter.
fn scheduling_gates_eliminated(pod: &HintPod, new: Option<&Pod>) -> bool {
    new.is_some_and(|p| pod.same_pod(p))
}

/// `NodeUnschedulable.isSchedulableAfterNodeChange` (`node_unschedulable.go:110-128`): a node added
/// schedulable, or one that stopped being unschedulable.
fn node_unschedulable_node(old: Option<&Node>, new: Option<&Node>) -> bool {
    let unschedulable = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let Some(new) = new else { return true };
    match old {
        Some(old) => unschedulable(old) && !unschedulable(new),
        None => !unschedulable(new),
    }
}

/// `NodeUnschedulable.isSchedulableAfterPodTolerationChange` (`node_unschedulable.go:79-105`): this pod now
/// tolerates `node.kubernetes.io/unschedulable:NoSchedule`.
fn node_unschedulable_toleration(pod: &HintPod, new: Option<&Pod>) -> bool {
    let Some(new) = new.filter(|p| pod.same_pod(p)) else {
        return false;
    };
    let taint = k8s_openapi::api::core::v1::Taint {
        key: "node.kubernetes.io/unschedulable".to_string(),
        effect: "NoSchedule".to_string(),
        ..Default::default()
    };
    tolerated(pod_tolerations(new), &taint)
}

/// `TaintToleration.isSchedulableAfterNodeChange` (`taint_toleration.go:96-125`): the node had an untolerated
/// NoSchedule/NoExecute taint (or is new) and now has none.
fn taint_toleration_node(pod: &HintPod, old: Option<&Node>, new: Option<&Node>) -> bool {
    let Some(new) = new else { return true };
    let tolerations = pod_tolerations(pod.pod());
    let was_untolerated = old.is_none_or(|old| untolerated_hard_taint(node_taints(old), tolerations).is_some());
    let is_untolerated = untolerated_hard_taint(node_taints(new), tolerations).is_some();
    was_untolerated && !is_untolerated
}

/// `NodePorts.isSchedulableAfterPodDeleted` (`nodeports/node_ports.go:128-160`): the deleted pod was bound or
/// nominated and held a host port this pod's ports conflict with.
fn node_ports_pod_deleted(parsed: &Parsed, old: Option<&Pod>) -> bool {
    let Some(deleted) = old else { return true };
    if node_name(deleted).is_none() && nominated_node_name(deleted).is_none() {
        return false;
    }
    let freed = host_ports(deleted);
    !freed.is_empty() && parsed.info.host_ports.iter().any(|port| conflicts(port, &freed))
}

/// `HostPortInfo.CheckConflict` against a set of ports in use.
fn conflicts(port: &HostPort, used: &[HostPort]) -> bool {
    used.iter().any(|u| {
        u.protocol == port.protocol
            && u.port == port.port
            && (port.ip == "0.0.0.0" || u.ip == "0.0.0.0" || u.ip == port.ip)
    })
}

/// `Fit.isSchedulableAfterPodEvent` (`noderesources/fit.go:373-409`): a deleted pod that was bound or
/// nominated frees room; a scale-down helps when it is this pod's own or a bound pod's and lowers a resource
/// this pod requests.
fn fit_pod(pod: &HintPod, parsed: &Parsed, old: Option<&Pod>, new: Option<&Pod>) -> bool {
    let Some(modified) = new else {
        return old.is_none_or(|deleted| node_name(deleted).is_some() || nominated_node_name(deleted).is_some());
    };
    let Some(original) = old else { return false };
    if pod.same_pod(modified) {
        return true;
    }
    if node_name(modified).is_none() {
        return false;
    }
    let with_status = RequestOptions {
        use_status: true,
        non_missing: None,
    };
    let requests = |p: &Pod| {
        super::resources::ParsedPodResources::parse(p)
            .ok()
            .map(|parsed| Resource::max_with_zero(&parsed.requests(with_status)))
    };
    let (Some(before), Some(after)) = (requests(original), requests(modified)) else {
        return true;
    };
    let wanted = parsed.info.parsed_resources.requests(with_status);
    let wanted = Resource::max_with_zero(&wanted);
    (wanted.milli_cpu > 0 && before.milli_cpu > after.milli_cpu)
        || (wanted.memory > 0 && before.memory > after.memory)
        || (wanted.ephemeral_storage > 0 && before.ephemeral_storage > after.ephemeral_storage)
        || wanted
            .scalar
            .iter()
            .any(|(name, value)| *value > 0 && before.scalar(name) > after.scalar(name))
}

fn allocatable(node: &Node) -> Option<Resource> {
    let list = parse_list(
        node.status.as_ref().and_then(|s| s.allocatable.as_ref()),
        "status.allocatable",
    )
    .ok()?;
    let mut resource = Resource::default();
    resource.add_list(&list);
    Some(resource)
}

/// `isFit` (`noderesources/fit.go:500-508`): the pod fits the node were it empty (no ignored resources).
fn fits_empty(request: &Resource, allocatable: &Resource) -> bool {
    if allocatable.allowed_pod_number < 1 {
        return false;
    }
    let fits = |wanted: i64, capacity: i64| wanted <= 0 || wanted <= capacity;
    fits(request.milli_cpu, allocatable.milli_cpu)
        && fits(request.memory, allocatable.memory)
        && fits(request.ephemeral_storage, allocatable.ephemeral_storage)
        && request
            .scalar
            .iter()
            .all(|(name, wanted)| fits(*wanted, allocatable.scalar(name)))
}

/// `Fit.isSchedulableAfterNodeChange` (`noderesources/fit.go:451-482`) with `haveAnyRequestedResourcesIncreased`
/// (`fit.go:554-598`): the node, empty, fits the pod, and is new or grew in pods or in a resource the pod
/// requests.
fn fit_node(parsed: &Parsed, old: Option<&Node>, new: Option<&Node>) -> bool {
    let Some(new) = new else { return true };
    let Some(after) = allocatable(new) else { return true };
    let request = &parsed.request;
    if !fits_empty(request, &after) {
        return false;
    }
    let Some(old) = old else { return true };
    let Some(before) = allocatable(old) else { return true };
    if after.allowed_pod_number > before.allowed_pod_number {
        return true;
    }
    (request.milli_cpu > 0 && after.milli_cpu > before.milli_cpu)
        || (request.memory > 0 && after.memory > before.memory)
        || (request.ephemeral_storage > 0 && after.ephemeral_storage > before.ephemeral_storage)
        || request
            .scalar
            .iter()
            .any(|(name, wanted)| *wanted > 0 && after.scalar(name) > before.scalar(name))
}

/// `involvedInTopologySpreading` (`podtopologyspread/plugin.go`): the pod itself, or a pod of its namespace that is
/// bound (or, from v1.36, nominated).
fn involved_in_spreading(behaviour: Behaviour, pod: &HintPod, other: &Pod) -> bool {
    let placed = node_name(other).is_some()
        || (behaviour.pod_hints_count_nominated_pods() && nominated_node_name(other).is_some());
    pod.same_pod(other) || (placed && other.metadata.namespace == pod.namespace)
}

/// `PodTopologySpread.isSchedulableAfterPodChange` (`podtopologyspread/plugin.go:201-257`).
fn spread_pod(behaviour: Behaviour, pod: &HintPod, parsed: &Parsed, old: Option<&Pod>, new: Option<&Pod>) -> bool {
    let involved = |p: &Pod| involved_in_spreading(behaviour, pod, p);
    if new.is_some_and(|p| !involved(p)) || old.is_some_and(|p| !involved(p)) {
        return false;
    }
    let Ok(constraints) = &parsed.spread else {
        return true;
    };
    let matches_any = |labels: &Labels| constraints.iter().any(|c| c.selector.matches(labels));
    match (old, new) {
        (Some(original), Some(modified)) => {
            let tolerations_changed =
                original.spec.as_ref().map(|s| &s.tolerations) != modified.spec.as_ref().map(|s| &s.tolerations);
            if pod.same_pod(modified) && tolerations_changed && constraints.iter().any(|c| c.honor_node_taints) {
                return true;
            }
            let (before, after) = (
                labels_of(&original.metadata.labels),
                labels_of(&modified.metadata.labels),
            );
            before != after
                && constraints
                    .iter()
                    .any(|c| c.selector.matches(before) != c.selector.matches(after))
        }
        (None, Some(created)) => matches_any(labels_of(&created.metadata.labels)),
        (Some(deleted), None) => matches_any(labels_of(&deleted.metadata.labels)),
        (None, None) => true,
    }
}

/// `PodTopologySpread.isSchedulableAfterNodeChange` (`podtopologyspread/plugin.go:297-357`): a node gaining or
/// losing every constraint's topology key, or changing a key's value or its taints while having them all.
fn spread_node(parsed: &Parsed, old: Option<&Node>, new: Option<&Node>) -> bool {
    let Ok(constraints) = &parsed.spread else {
        return true;
    };
    let has_all = |node: &Node| {
        let labels = labels_of(&node.metadata.labels);
        constraints.iter().all(|c| labels.contains_key(&c.topology_key))
    };
    match (old, new) {
        (Some(original), Some(modified)) => {
            let (was, is) = (has_all(original), has_all(modified));
            if was != is {
                return true;
            }
            let (before, after) = (
                labels_of(&original.metadata.labels),
                labels_of(&modified.metadata.labels),
            );
            let key_changed = constraints
                .iter()
                .any(|c| before.get(&c.topology_key) != after.get(&c.topology_key));
            is && (key_changed || node_taints(original) != node_taints(modified))
        }
        (None, Some(added)) => has_all(added),
        (Some(deleted), None) => has_all(deleted),
        (None, None) => true,
    }
}

/// The labels a term's namespace selector sees in a hint: none (`podMatchesAllAffinityTerms`,
/// `interpodaffinity/plugin.go:160-169`, matches with nil namespace labels).
static NO_NAMESPACE_LABELS: Labels = BTreeMap::new();

fn term_matches(term: &AffinityTerm, pod: &Pod) -> bool {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    (term.namespaces.contains(namespace) || term.namespace_selector.matches(&NO_NAMESPACE_LABELS))
        && term.selector.matches(labels_of(&pod.metadata.labels))
}

fn matches_all_terms(terms: &[AffinityTerm], pod: &Pod) -> bool {
    !terms.is_empty() && terms.iter().all(|t| term_matches(t, pod))
}

/// `InterPodAffinity.isSchedulableAfterPodChange` (`interpodaffinity/plugin.go:171-253`): a bound pod that now
/// matches every affinity term, or stopped matching (or was deleted matching) every anti-affinity term. From
/// v1.36 nominated pods count as placed, the pod's own label change queues it, and a deleted pod whose
/// anti-affinity the pod matched queues it too.
fn affinity_pod(behaviour: Behaviour, pod: &HintPod, parsed: &Parsed, old: Option<&Pod>, new: Option<&Pod>) -> bool {
    let v1_36 = behaviour.pod_hints_count_nominated_pods();
    if v1_36 && old.is_some() && new.is_some_and(|p| pod.same_pod(p)) {
        return true;
    }
    let unplaced = |p: &Pod| node_name(p).is_none() && (!v1_36 || nominated_node_name(p).is_none());
    if new.is_some_and(unplaced) || old.is_some_and(unplaced) {
        return false;
    }
    if !parsed.info.affinity_errors.is_empty() {
        return true;
    }
    let terms = &parsed.info.required_affinity;
    let anti = &parsed.info.required_anti_affinity;
    match (old, new) {
        (Some(original), Some(modified)) => {
            (!matches_all_terms(terms, original) && matches_all_terms(terms, modified))
                || (matches_all_terms(anti, original) && !matches_all_terms(anti, modified))
        }
        (None, Some(created)) => matches_all_terms(terms, created),
        (Some(deleted), None) if v1_36 => {
            matches_all_terms(anti, deleted) || matches_deleted_anti_affinity(pod, deleted)
        }
        (Some(deleted), None) => matches_all_terms(anti, deleted),
        (None, None) => true,
    }
}

/// The pod matches every required anti-affinity term of a deleted pod (v1.36); terms that do not parse queue it,
/// as upstream's error does.
fn matches_deleted_anti_affinity(pod: &HintPod, deleted: &Pod) -> bool {
    match PodInfo::new(Arc::new(deleted.clone())) {
        Ok(info) if info.affinity_errors.is_empty() => matches_all_terms(&info.required_anti_affinity, pod.pod()),
        _ => true,
    }
}

/// `InterPodAffinity.isSchedulableAfterNodeChange` (`interpodaffinity/plugin.go:234-289`): a node gaining (or
/// changing) an affinity term's topology key, or losing (or changing) an anti-affinity term's; any added node
/// helps a pod with anti-affinity terms.
fn affinity_node(parsed: &Parsed, old: Option<&Node>, new: Option<&Node>) -> bool {
    if !parsed.info.affinity_errors.is_empty() {
        return true;
    }
    let Some(new) = new else { return true };
    let after = labels_of(&new.metadata.labels);
    let before = old.map(|o| labels_of(&o.metadata.labels));
    for term in &parsed.info.required_affinity {
        let key = &term.topology_key;
        match before {
            None if after.contains_key(key) => return true,
            None => {}
            Some(before) => match (before.get(key), after.get(key)) {
                (None, Some(_)) => return true,
                (Some(a), Some(b)) if a != b => return true,
                _ => {}
            },
        }
    }
    for term in &parsed.info.required_anti_affinity {
        let Some(before) = before else { return true };
        match (before.get(&term.topology_key), after.get(&term.topology_key)) {
            (Some(_), None) => return true,
            (Some(a), Some(b)) if a != b => return true,
            _ => {}
        }
    }
    false
}

/// `NodeSchedulingPropertiesChange` (`framework/events.go`): the kinds of change of a node update, in upstream's
/// order; empty when nothing the scheduler reads changed (a heartbeat).
pub fn node_update_actions(old: &Node, new: &Node) -> Vec<ActionType> {
    let mut actions = Vec::new();
    let unschedulable = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    if unschedulable(old) != unschedulable(new) && !unschedulable(new) {
        actions.push(ActionType::UPDATE_NODE_TAINT);
    }
    fn allocatable_list(n: &Node) -> Option<&BTreeMap<String, Quantity>> {
        n.status.as_ref().and_then(|s| s.allocatable.as_ref())
    }
    // Semantic equality: quantities compare by value ("1000m" equals "1").
    let parsed_old = parse_list(allocatable_list(old), "status.allocatable");
    let parsed_new = parse_list(allocatable_list(new), "status.allocatable");
    let allocatable_changed = match (parsed_old, parsed_new) {
        (Ok(a), Ok(b)) => a != b,
        _ => allocatable_list(old) != allocatable_list(new),
    };
    if allocatable_changed {
        actions.push(ActionType::UPDATE_NODE_ALLOCATABLE);
    }
    if labels_of(&old.metadata.labels) != labels_of(&new.metadata.labels) {
        actions.push(ActionType::UPDATE_NODE_LABEL);
    }
    if node_taints(old) != node_taints(new) {
        actions.push(ActionType::UPDATE_NODE_TAINT);
    }
    let conditions = |n: &Node| -> BTreeMap<String, String> {
        n.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    };
    if conditions(old) != conditions(new) {
        actions.push(ActionType::UPDATE_NODE_CONDITION);
    }
    if labels_of(&old.metadata.annotations) != labels_of(&new.metadata.annotations) {
        actions.push(ActionType::UPDATE_NODE_ANNOTATION);
    }
    actions
}

/// `PodSchedulingPropertiesChange` (`framework/events.go`): the kinds of change of a pod update, in upstream's
/// order; a plain `Update` when none of them applies.
pub fn pod_update_actions(old: &Pod, new: &Pod) -> Vec<ActionType> {
    let mut actions = Vec::new();
    if labels_of(&old.metadata.labels) != labels_of(&new.metadata.labels) {
        actions.push(ActionType::UPDATE_POD_LABEL);
    }
    if scaled_down(old, new) {
        actions.push(ActionType::UPDATE_POD_SCALE_DOWN);
    }
    let gates = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .map_or(0, Vec::len)
    };
    if gates(new) == 0 && gates(old) != 0 {
        actions.push(ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED);
    }
    if pod_tolerations(old).len() != pod_tolerations(new).len() {
        actions.push(ActionType::UPDATE_POD_TOLERATION);
    }
    let (old_claims, new_claims) = (
        old.status.as_ref().map(|s| &s.resource_claim_statuses),
        new.status.as_ref().map(|s| &s.resource_claim_statuses),
    );
    if old_claims != new_claims {
        actions.push(ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM);
    }
    if actions.is_empty() {
        actions.push(ActionType::UPDATE);
    }
    actions
}

/// `extractPodScaleDown`: some request (with status resources, InPlacePodVerticalScaling being GA) went down or
/// away.
fn scaled_down(old: &Pod, new: &Pod) -> bool {
    let options = RequestOptions {
        use_status: true,
        non_missing: None,
    };
    let requests = |p: &Pod| {
        super::resources::ParsedPodResources::parse(p)
            .ok()
            .map(|parsed| parsed.requests(options))
    };
    let (Some(before), Some(after)) = (requests(old), requests(new)) else {
        return false;
    };
    before.iter().any(|(name, amount)| {
        after
            .get(name)
            .is_none_or(|now| amount.milli_value() > now.milli_value())
    })
}
