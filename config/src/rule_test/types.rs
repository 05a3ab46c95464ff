//! The `RuleTest` document as written: test cases for one Reconciler or SchedulerPolicy, in a `*.test.yaml` file.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::common::RuleMetadata;

/// Test cases for one Reconciler or SchedulerPolicy, kept beside the rules in a file named `*.test.yaml` (the
/// manager never loads such files as rules) and run offline by `ruleplane test`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "RuleTest")]
pub struct RuleTestDocument {
    /// Always `ruleplane.dev/v1alpha1`.
    #[schemars(extend("const" = "ruleplane.dev/v1alpha1"))]
    pub api_version: String,
    /// Always `RuleTest`.
    #[schemars(extend("const" = "RuleTest"))]
    pub kind: String,
    /// The test's name, shown in the output and in JUnit reports.
    pub metadata: RuleMetadata,
    /// The rule under test and its cases.
    pub spec: RuleTestSpec,
}

/// The rule under test and its cases.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleTestSpec {
    /// The `metadata.name` of the Reconciler or SchedulerPolicy under test, among the rules given to
    /// `ruleplane test` with the test file.
    pub rule: String,
    /// The cases: inputs and what the rule must make of them.
    #[schemars(length(min = 1))]
    pub cases: Vec<TestCase>,
}

/// One case: inputs (a parent for a Reconciler; nodes and pods for a SchedulerPolicy) and the expected result.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestCase {
    /// What the case shows, e.g. `a CronTab becomes a CronJob`.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Reconciler: the parent object, as `kubectl get -o yaml` prints it (only the fields the rule reads are
    /// needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Map<String, Value>>,
    /// Reconciler: objects in the cluster: what the rule's lookups find (by apiVersion, kind, name and namespace;
    /// a lookup that matches none of them sees `null`, as in a cluster without the object; a lookup by selector
    /// sees those of its kind, in the namespace it reads, whose labels match: a list, maybe empty) and what its
    /// `patches` may select (an object without a namespace stands in the parent's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<Map<String, Value>>,
    /// Reconciler: children as they exist in the cluster, by child id (a Service with its `spec.clusterIP`, a
    /// CronJob with its `status`). `readyWhen`, children that read other children, the projected status and the
    /// `Ready` condition see these; a child not given here is seen as rendered. A collection child (`forEach`,
    /// `count`) is given as the list of its objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub observed: BTreeMap<String, ObservedChild>,
    /// SchedulerPolicy: the cluster's nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Map<String, Value>>,
    /// SchedulerPolicy: pods already running, each counted on the node its `spec.nodeName` names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existing: Vec<Map<String, Value>>,
    /// SchedulerPolicy: pods to place, in queue order (higher `spec.priority` first, then as listed); each
    /// placement is seen by the next.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<Map<String, Value>>,
    /// SchedulerPolicy: seed of the tie-breaking among equally scored nodes (default 0), as `simulate --seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// SchedulerPolicy: PodDisruptionBudgets, with their `status` (`disruptionsAllowed`), that the preemption
    /// decision respects, as `simulate --pdbs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pdbs: Vec<Map<String, Value>>,
    /// SchedulerPolicy: PersistentVolumeClaims the volume plugins read, as `simulate --storage` (with any storage
    /// object given, pods with claims are evaluated by every volume plugin).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persistent_volume_claims: Vec<Map<String, Value>>,
    /// SchedulerPolicy: PersistentVolumes (node affinity, zone labels, CSI sources, static binding candidates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persistent_volumes: Vec<Map<String, Value>>,
    /// SchedulerPolicy: StorageClasses (binding mode, provisioner, `allowedTopologies`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_classes: Vec<Map<String, Value>>,
    /// SchedulerPolicy: CSINodes (NodeVolumeLimits reads their drivers' `allocatable.count`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub csi_nodes: Vec<Map<String, Value>>,
    /// SchedulerPolicy: CSIDrivers (VolumeBinding checks capacity for drivers with `storageCapacity: true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub csi_drivers: Vec<Map<String, Value>>,
    /// SchedulerPolicy: CSIStorageCapacities (VolumeBinding's capacity check when provisioning).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub csi_storage_capacities: Vec<Map<String, Value>>,
    /// SchedulerPolicy: VolumeAttachments (NodeVolumeLimits counts them as attached).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_attachments: Vec<Map<String, Value>>,
    /// SchedulerPolicy, Kubernetes v1.35: Workloads (`scheduling.k8s.io/v1alpha1`) whose pod groups the pods name
    /// with `spec.workloadRef`, as `simulate --gangs`: a gang's members are placed all or nothing, as the worker
    /// places them. Without any, `workloadRef` is ignored (as in a cluster that does not serve the Workload API).
    /// Since v1.36 the policies are in PodGroups (`podGroups`), and Workloads are ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<Map<String, Value>>,
    /// SchedulerPolicy: PodGroups (`scheduling.x-k8s.io/v1alpha1`) that pods join with the label
    /// `scheduling.x-k8s.io/pod-group` (Coscheduling), as `simulate --gangs`. A labelled pod whose PodGroup is not
    /// listed is told as one whose PodGroup does not exist. Since Kubernetes v1.36 also the Workload API's PodGroups
    /// (`scheduling.k8s.io/v1alpha2` in v1.36, `v1beta1` in v1.37) that pods name with
    /// `spec.schedulingGroup.podGroupName`, each holding its gang policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_groups: Vec<Map<String, Value>>,
    /// What the rule must produce.
    pub expect: Expectation,
}

/// The expected result of a case. Objects match as subsets: a field left out is not compared, so tests need not
/// repeat labels or defaults.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectation {
    /// Reconciler: every child rendered for this case, each identified by `apiVersion`, `kind`,
    /// `metadata.name` (and `metadata.namespace` when given); a child rendered but not listed, or listed but not
    /// rendered (e.g. `includeWhen` false, or waiting for a child it reads), fails the case. `[]` expects none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<Map<String, Value>>>,
    /// Reconciler: a subset of the parent's status as the manager would write it: projected fields,
    /// `observedGeneration` and the `Ready`/`Synced` conditions (lists match in order, skipping items:
    /// `conditions: [{type: Ready, status: "True"}]` checks only `Ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Map<String, Value>>,
    /// Reconciler: every object the rule's `patches` would write to, each the applied body (a partial object)
    /// identified by `apiVersion`, `kind`, `metadata.name` (and `metadata.namespace` when given); an object
    /// patched but not listed, or listed but not patched (not among `lookups`, not selected, already as the patch
    /// sets it), fails the case. `[]` expects none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<Map<String, Value>>>,
    /// Reconciler: rendering fails with a message containing this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub error: Option<String>,
    /// Reconciler: the rule's `for` (`selector`, `namespace`, `name`) does not select this parent, so the manager
    /// never reconciles it (and nothing else is expected). Without it, a case whose parent is not selected fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_selected: bool,
    /// SchedulerPolicy: outcomes of some or all of the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<ExpectedPlacement>,
}

/// What must become of one pod: bound to a node (`node` or `nodeIn`), or unschedulable (`unschedulable` or
/// `message`).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedPlacement {
    /// The pod: `name` (namespace `default`) or `namespace/name`.
    #[schemars(length(min = 1))]
    pub pod: String,
    /// The node the pod is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Any one of these nodes (equally scored nodes are chosen at random, as kube-scheduler does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_in: Vec<String>,
    /// The pod fits on no node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unschedulable: bool,
    /// The pod fits on no node, and its FailedScheduling message is exactly this (kube-scheduler's text,
    /// `0/3 nodes are available: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The pod fits on no node, and kube-scheduler's preemption would evict exactly these victims on this node
    /// (the decision the scheduler carries out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<ExpectedPreemption>,
}

/// The preemption a pod must cause.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedPreemption {
    /// The node the pod is nominated to.
    #[schemars(length(min = 1))]
    pub node: String,
    /// The evicted pods, most important first: `name` (namespace `default`) or `namespace/name`.
    #[schemars(length(min = 1))]
    pub victims: Vec<String>,
}

/// A child as it exists in a test case: one object, or the objects of a collection child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ObservedChild {
    /// A child's object.
    One(Map<String, Value>),
    /// A collection child's objects (`forEach`, `count`).
    Many(Vec<Map<String, Value>>),
}
