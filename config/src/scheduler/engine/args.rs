//! Plugin arguments mirroring kube-scheduler's v1 `pluginConfig` args: serde shape, defaults and validation.

// Each type deserializes like the v1 API (camelCase, unknown fields rejected); `defaulted()` applies kube-scheduler's
// defaulting (`SetDefaults_*`), and `validate()` checks the defaulted args as kube-scheduler's `Validate*Args` does,
// with messages in kube-scheduler's wording and paths relative to the args object.

use k8s_openapi::api::core::v1::{NodeAffinity, TopologySpreadConstraint};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::field::{FieldError, FieldPath};
use super::labels::{NodeSelector, PreferredTerms};
use super::validation::qualified_name_errors;

/// Highest score of a RequestedToCapacityRatio shape point.
pub const MAX_CUSTOM_PRIORITY_SCORE: i32 = 10;

/// `NodeResourcesFitArgs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesFitArgs {
    /// Extended resources the filter ignores.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_resources: Vec<String>,
    /// Extended-resource groups (the part before `/`) the filter ignores.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_resource_groups: Vec<String>,
    /// How nodes are scored (default LeastAllocated over cpu and memory, weight 1 each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring_strategy: Option<ScoringStrategy>,
}

/// `ScoringStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringStrategy {
    /// LeastAllocated, MostAllocated or RequestedToCapacityRatio.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<ScoringStrategyType>,
    /// Resources scored and their weights (default cpu: 1, memory: 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceSpec>,
    /// The shape, for RequestedToCapacityRatio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// `ScoringStrategyType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ScoringStrategyType {
    /// Favour nodes with more free resources.
    LeastAllocated,
    /// Favour nodes with fewer free resources (bin-packing).
    MostAllocated,
    /// Map utilisation through a piecewise-linear shape.
    RequestedToCapacityRatio,
}

impl ScoringStrategyType {
    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScoringStrategyType::LeastAllocated => "LeastAllocated",
            ScoringStrategyType::MostAllocated => "MostAllocated",
            ScoringStrategyType::RequestedToCapacityRatio => "RequestedToCapacityRatio",
        }
    }
}

/// `ResourceSpec`: a resource and its weight (0 means the default, 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    /// Resource name, e.g. `cpu`, `memory`, `example.com/gpu`.
    pub name: String,
    /// Weight (1–100; 0 or absent means 1).
    #[serde(default)]
    pub weight: i64,
}

impl ResourceSpec {
    /// A resource with a weight.
    pub fn new(name: &str, weight: i64) -> ResourceSpec {
        ResourceSpec {
            name: name.to_string(),
            weight,
        }
    }
}

/// `RequestedToCapacityRatioParam`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestedToCapacityRatioParam {
    /// Points (utilisation 0–100 increasing, score 0–10).
    #[serde(default)]
    pub shape: Vec<UtilizationShapePoint>,
}

/// `UtilizationShapePoint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Utilisation in percent (0–100).
    pub utilization: i32,
    /// Score at that utilisation (0–10).
    pub score: i32,
}

fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

/// Weight 0 means 1 (`SetDefaults_NodeResourcesFitArgs`, `…BalancedAllocationArgs`).
fn defaulted_weights(resources: &[ResourceSpec]) -> Vec<ResourceSpec> {
    resources
        .iter()
        .map(|r| ResourceSpec::new(&r.name, if r.weight == 0 { 1 } else { r.weight }))
        .collect()
}

impl NodeResourcesFitArgs {
    /// The args after kube-scheduler's defaulting.
    pub fn defaulted(&self) -> NodeResourcesFitArgs {
        let mut strategy = self.scoring_strategy.clone().unwrap_or(ScoringStrategy {
            type_: Some(ScoringStrategyType::LeastAllocated),
            resources: default_resources(),
            requested_to_capacity_ratio: None,
        });
        if strategy.resources.is_empty() {
            strategy.resources = default_resources();
        }
        strategy.resources = defaulted_weights(&strategy.resources);
        NodeResourcesFitArgs {
            scoring_strategy: Some(strategy),
            ..self.clone()
        }
    }

    /// `ValidateNodeResourcesFitArgs` on the defaulted args.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let root = FieldPath::root();
        for (i, name) in self.ignored_resources.iter().enumerate() {
            errors.extend(label_name_errors(&root.key("ignoredResources").index(i), name));
        }
        for (i, group) in self.ignored_resource_groups.iter().enumerate() {
            let path = root.key("ignoredResourceGroups").index(i);
            if group.contains('/') {
                errors.push(FieldError::invalid(
                    path.clone(),
                    group.as_str(),
                    "resource group name can't contain '/'",
                ));
            }
            errors.extend(label_name_errors(&path, group));
        }
        if let Some(strategy) = &self.scoring_strategy {
            let path = root.key("scoringStrategy");
            match strategy.type_ {
                None => errors.push(FieldError::not_supported(
                    path.key("type"),
                    "",
                    &["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"],
                )),
                Some(ScoringStrategyType::RequestedToCapacityRatio)
                    if strategy.requested_to_capacity_ratio.is_none() =>
                {
                    // kube-scheduler would dereference a missing shape; refuse it up front instead.
                    errors.push(FieldError::required(
                        path.key("requestedToCapacityRatio").key("shape"),
                        "at least one point must be specified",
                    ));
                }
                Some(_) => {}
            }
            errors.extend(validate_resources(&strategy.resources, &path.key("resources")));
            if let Some(ratio) = &strategy.requested_to_capacity_ratio {
                errors.extend(validate_shape(
                    &ratio.shape,
                    &path.key("requestedToCapacityRatio").key("shape"),
                ));
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// The strategy after defaulting.
    pub fn strategy(&self) -> ScoringStrategyType {
        self.scoring_strategy
            .as_ref()
            .and_then(|s| s.type_)
            .unwrap_or(ScoringStrategyType::LeastAllocated)
    }
}

/// `metav1validation.ValidateLabelName`.
fn label_name_errors(path: &FieldPath, name: &str) -> Vec<FieldError> {
    qualified_name_errors(name)
        .into_iter()
        .map(|message| FieldError::invalid(path.clone(), name, message))
        .collect()
}

fn validate_resources(resources: &[ResourceSpec], path: &FieldPath) -> Vec<FieldError> {
    resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.weight <= 0 || r.weight > 100)
        .map(|(i, r)| {
            FieldError::invalid(
                path.index(i).key("weight"),
                r.weight,
                format!("resource weight of {} not in valid range (0, 100]", r.name),
            )
        })
        .collect()
}

fn validate_shape(shape: &[UtilizationShapePoint], path: &FieldPath) -> Vec<FieldError> {
    if shape.is_empty() {
        return vec![FieldError::required(
            path.clone(),
            "at least one point must be specified",
        )];
    }
    let mut errors = Vec::new();
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errors.push(FieldError::invalid(
            path.index(i).key("utilization"),
            shape[i].utilization,
            "values must be sorted in increasing order",
        ));
    }
    for (i, point) in shape.iter().enumerate() {
        if !(0..=100).contains(&point.utilization) {
            errors.push(FieldError::invalid(
                path.index(i).key("utilization"),
                point.utilization,
                "not in valid range [0, 100]",
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&point.score) {
            errors.push(FieldError::invalid(
                path.index(i).key("score"),
                point.score,
                format!("not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"),
            ));
        }
    }
    errors
}

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesBalancedAllocationArgs {
    /// Resources balanced (default cpu and memory; every weight must be 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceSpec>,
}

impl NodeResourcesBalancedAllocationArgs {
    /// The args after kube-scheduler's defaulting.
    pub fn defaulted(&self) -> NodeResourcesBalancedAllocationArgs {
        let resources = if self.resources.is_empty() {
            default_resources()
        } else {
            defaulted_weights(&self.resources)
        };
        NodeResourcesBalancedAllocationArgs { resources }
    }

    /// `ValidateNodeResourcesBalancedAllocationArgs` on the defaulted args.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (i, resource) in self.resources.iter().enumerate() {
            let path = FieldPath::root().key("resources").index(i);
            if !seen.insert(resource.name.as_str()) {
                errors.push(FieldError::duplicate(path.key("name"), resource.name.as_str()));
            }
            if resource.weight != 1 {
                errors.push(FieldError::invalid(path.key("weight"), resource.weight, "must be 1"));
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

/// `NodeAffinityArgs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinityArgs {
    /// Node affinity added to every pod this profile schedules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_affinity: Option<NodeAffinity>,
}

impl NodeAffinityArgs {
    /// `ValidateNodeAffinityArgs`: every term of the added affinity must parse.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let Some(affinity) = &self.added_affinity else {
            return Ok(());
        };
        let root = FieldPath::root().key("addedAffinity");
        let mut errors = Vec::new();
        if let Some(required) = &affinity.required_during_scheduling_ignored_during_execution {
            errors.extend(
                NodeSelector::compile(required, &root.key("requiredDuringSchedulingIgnoredDuringExecution")).errors(),
            );
        }
        if let Some(preferred) = &affinity.preferred_during_scheduling_ignored_during_execution
            && !preferred.is_empty()
            && let Err(mut e) =
                PreferredTerms::compile(preferred, &root.key("preferredDuringSchedulingIgnoredDuringExecution"))
        {
            errors.append(&mut e);
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

/// How PodTopologySpread finds constraints for pods that declare none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DefaultingType {
    /// Built-in soft spreading by hostname (maxSkew 3) and zone (maxSkew 5).
    #[default]
    System,
    /// The constraints listed in `defaultConstraints`.
    List,
}

/// `PodTopologySpreadArgs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods without their own (only with `defaultingType: List`); no label selectors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// `System` (default) or `List`.
    #[serde(default)]
    pub defaulting_type: DefaultingType,
}

impl PodTopologySpreadArgs {
    /// `ValidatePodTopologySpreadArgs`.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let root = FieldPath::root();
        if self.defaulting_type == DefaultingType::System && !self.default_constraints.is_empty() {
            errors.push(FieldError::invalid(
                root.key("defaultingType"),
                "System",
                "when .defaultConstraints are not empty",
            ));
        }
        let constraints_path = root.key("defaultConstraints");
        for (i, constraint) in self.default_constraints.iter().enumerate() {
            let path = constraints_path.index(i);
            if constraint.max_skew <= 0 {
                errors.push(FieldError::invalid(
                    path.key("maxSkew"),
                    constraint.max_skew,
                    "not in valid range (0, inf)",
                ));
            }
            if constraint.topology_key.is_empty() {
                errors.push(FieldError::required(path.key("topologyKey"), "can not be empty"));
            } else {
                errors.extend(label_name_errors(&path.key("topologyKey"), &constraint.topology_key));
            }
            match constraint.when_unsatisfiable.as_str() {
                "" => errors.push(FieldError::required(path.key("whenUnsatisfiable"), "can not be empty")),
                "DoNotSchedule" | "ScheduleAnyway" => {}
                other => errors.push(FieldError::not_supported(
                    path.key("whenUnsatisfiable"),
                    other,
                    &["DoNotSchedule", "ScheduleAnyway"],
                )),
            }
            if constraint.label_selector.is_some() {
                errors.push(FieldError::forbidden(
                    path.key("labelSelector"),
                    "constraint must not define a selector, as they deduced for each pod",
                ));
            }
            let repeated = self.default_constraints[..i].iter().any(|other| {
                other.topology_key == constraint.topology_key
                    && other.when_unsatisfiable == constraint.when_unsatisfiable
            });
            if repeated {
                errors.push(FieldError::duplicate(
                    constraints_path.index(i),
                    format!("{{{}, {}}}", constraint.topology_key, constraint.when_unsatisfiable),
                ));
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

/// `InterPodAffinityArgs`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    /// Score weight of existing pods' required affinity terms matching the incoming pod (0–100, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_pod_affinity_weight: Option<i32>,
    /// Ignore existing pods' preferred terms when the incoming pod has none.
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl InterPodAffinityArgs {
    /// The hard affinity weight after defaulting.
    pub(crate) fn hard_weight(&self) -> i32 {
        self.hard_pod_affinity_weight.unwrap_or(1)
    }

    /// `ValidateInterPodAffinityArgs`.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let weight = self.hard_weight();
        if (0..=100).contains(&weight) {
            Ok(())
        } else {
            Err(vec![FieldError::invalid(
                FieldPath::root().key("hardPodAffinityWeight"),
                weight,
                "not in valid range [0, 100]",
            )])
        }
    }
}

/// `DefaultPreemptionArgs`: how many nodes a preemption dry run examines at least.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultPreemptionArgs {
    /// Percentage of the candidate nodes to dry-run (0–100, default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_candidate_nodes_percentage: Option<i32>,
    /// Number of candidate nodes to dry-run at least (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_candidate_nodes_absolute: Option<i32>,
}

impl DefaultPreemptionArgs {
    /// kube-scheduler's defaults: 10 % and 100 nodes.
    pub fn defaulted(&self) -> DefaultPreemptionArgs {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: Some(self.min_candidate_nodes_percentage.unwrap_or(10)),
            min_candidate_nodes_absolute: Some(self.min_candidate_nodes_absolute.unwrap_or(100)),
        }
    }

    /// The percentage after defaulting.
    pub(crate) fn percentage(&self) -> i32 {
        self.min_candidate_nodes_percentage.unwrap_or(10)
    }

    /// The absolute minimum after defaulting.
    pub(crate) fn absolute(&self) -> i32 {
        self.min_candidate_nodes_absolute.unwrap_or(100)
    }

    /// `ValidateDefaultPreemptionArgs` on the defaulted args.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let (percentage, absolute) = (self.percentage(), self.absolute());
        let percentage_path = FieldPath::root().key("minCandidateNodesPercentage");
        let absolute_path = FieldPath::root().key("minCandidateNodesAbsolute");
        let mut errors = Vec::new();
        if !(0..=100).contains(&percentage) {
            errors.push(FieldError::invalid(
                percentage_path.clone(),
                percentage,
                "not in valid range [0, 100]",
            ));
        }
        if absolute < 0 {
            errors.push(FieldError::invalid(
                absolute_path.clone(),
                absolute,
                "not in valid range [0, inf)",
            ));
        }
        if percentage == 0 && absolute == 0 {
            errors.push(FieldError::invalid(
                percentage_path,
                percentage,
                "cannot be zero at the same time as minCandidateNodesAbsolute",
            ));
            errors.push(FieldError::invalid(
                absolute_path,
                absolute,
                "cannot be zero at the same time as minCandidateNodesPercentage",
            ));
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// `calculateNumCandidates`: max(`n` × percentage / 100, absolute), at most `n`.
    pub(crate) fn num_candidates(&self, n: usize) -> usize {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let wanted = (n * i64::from(self.percentage()) / 100).max(i64::from(self.absolute()));
        usize::try_from(wanted.min(n)).unwrap_or(0)
    }
}

/// kube-scheduler's default `bindTimeoutSeconds` (`apis/config/v1/defaults.go`).
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;

/// `VolumeBindingArgs`: how long PreBind waits for a pod's claims to be bound. (`shape`, the scoring function of
/// `StorageCapacityScoring`, is not accepted: the Score uses kube-scheduler's default shape.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeBindingArgs {
    /// Seconds PreBind waits for the claims to be bound before the pod is retried (default 600; 0 fails at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_timeout_seconds: Option<i64>,
}

impl VolumeBindingArgs {
    /// The timeout after defaulting.
    pub fn bind_timeout_seconds(&self) -> i64 {
        self.bind_timeout_seconds.unwrap_or(DEFAULT_BIND_TIMEOUT_SECONDS)
    }

    /// `ValidateVolumeBindingArgs`.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let seconds = self.bind_timeout_seconds();
        if seconds < 0 {
            return Err(vec![FieldError::invalid(
                FieldPath::root().key("bindTimeoutSeconds"),
                seconds,
                "invalid BindTimeoutSeconds, should not be a negative value",
            )]);
        }
        Ok(())
    }
}

/// scheduler-plugins' defaults for `CoschedulingArgs` (`apis/config/v1/defaults.go`).
pub const DEFAULT_PERMIT_WAITING_TIME_SECONDS: i64 = 60;
pub const DEFAULT_POD_GROUP_REJECT_PERCENTAGE: i32 = 10;

/// scheduler-plugins' `CoschedulingArgs` (v1). Ruleplane runs a group as a unit, so nothing waits at Permit:
/// `permitWaitingTimeSeconds` is accepted and validated but has no effect (`docs/scheduler.md`, Coscheduling).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoschedulingArgs {
    /// Seconds a member waits at Permit for its siblings (default 60). No effect in Ruleplane: nothing waits at
    /// Permit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit_waiting_time_seconds: Option<i64>,
    /// Seconds a rejected group is held back before it is tried again (default 0, no group backoff): its members
    /// are held with `podGroup <ns/name> failed recently` meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_group_backoff_seconds: Option<i64>,
    /// The share of `minMember` (0–100, default 10) that may still be missing when a member fails without the
    /// group being rejected in PostFilter; decides whether a failing member's text names its group's rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_group_reject_percentage: Option<i32>,
}

impl CoschedulingArgs {
    /// `podGroupRejectPercentage` after defaulting.
    pub fn reject_percentage(&self) -> i32 {
        self.pod_group_reject_percentage
            .unwrap_or(DEFAULT_POD_GROUP_REJECT_PERCENTAGE)
    }

    /// `podGroupBackoffSeconds` after defaulting.
    pub fn backoff_seconds(&self) -> i64 {
        self.pod_group_backoff_seconds.unwrap_or(0)
    }

    /// `ValidateCoschedulingArgs` on the defaulted args (upstream's messages).
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let permit = self
            .permit_waiting_time_seconds
            .unwrap_or(DEFAULT_PERMIT_WAITING_TIME_SECONDS);
        if permit < 0 {
            errors.push(FieldError::invalid(
                FieldPath::root().key("permitWaitingTimeSeconds"),
                permit,
                "must be greater than 0",
            ));
        }
        let backoff = self.backoff_seconds();
        if backoff < 0 {
            errors.push(FieldError::invalid(
                FieldPath::root().key("podGroupBackoffSeconds"),
                backoff,
                "must be greater than 0",
            ));
        }
        let percentage = self.reject_percentage();
        if !(0..=100).contains(&percentage) {
            errors.push(FieldError::invalid(
                FieldPath::root().key("podGroupRejectPercentage"),
                percentage,
                "must be between 0 and 100",
            ));
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}
