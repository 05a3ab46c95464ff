//! Plugin args: v1 field names, defaults, kube-scheduler's validation with field paths, schemas.

use crate::scheduler::engine::args::{
    DefaultingType, InterPodAffinityArgs, NodeAffinityArgs, NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs,
    PodTopologySpreadArgs, ResourceSpec, ScoringStrategyType,
};
use crate::scheduler::engine::declarative::{NodeLabelArgs, NodeValueArgs};
use crate::scheduler::engine::field::{FieldError, PathSegment};

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
}

fn messages(result: Result<(), Vec<FieldError>>) -> Vec<String> {
    result
        .err()
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn fit_args_default_like_kube_scheduler() {
    let args: NodeResourcesFitArgs = parse("{}");
    let defaulted = args.defaulted();
    let strategy = defaulted.scoring_strategy.as_ref().unwrap();
    assert_eq!(strategy.type_, Some(ScoringStrategyType::LeastAllocated));
    assert_eq!(
        strategy.resources,
        vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
    );
    let args: NodeResourcesFitArgs =
        parse("scoringStrategy: {type: MostAllocated, resources: [{name: cpu}, {name: example.com/gpu, weight: 5}]}");
    let resources = args.defaulted().scoring_strategy.unwrap().resources;
    assert_eq!(
        resources,
        vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("example.com/gpu", 5)]
    );
    assert!(args.defaulted().validate().is_ok());
}

#[test]
fn fit_args_validation_reports_paths() {
    let args: NodeResourcesFitArgs = parse(
        r#"
ignoredResources: ["bad name!"]
ignoredResourceGroups: [example.com/gpu]
scoringStrategy:
  type: RequestedToCapacityRatio
  resources: [{name: cpu, weight: 0}, {name: memory, weight: 101}]
  requestedToCapacityRatio:
    shape: [{utilization: 0, score: 0}, {utilization: 50, score: 11}, {utilization: 50, score: 10}, {utilization: 101, score: 10}]
"#,
    );
    let errors = args.defaulted().validate().unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "ignoredResources[0]: Invalid value: \"bad name!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "ignoredResourceGroups[0]: Invalid value: \"example.com/gpu\": resource group name can't contain '/'",
            "scoringStrategy.resources[1].weight: Invalid value: 101: resource weight of memory not in valid range (0, 100]",
            "scoringStrategy.requestedToCapacityRatio.shape[2].utilization: Invalid value: 50: values must be sorted in increasing order",
            "scoringStrategy.requestedToCapacityRatio.shape[1].score: Invalid value: 11: not in valid range [0, 10]",
            "scoringStrategy.requestedToCapacityRatio.shape[3].utilization: Invalid value: 101: not in valid range [0, 100]",
        ]
    );
    assert_eq!(
        errors[2].path.segments(),
        [
            PathSegment::Key("scoringStrategy".into()),
            PathSegment::Key("resources".into()),
            PathSegment::Index(1),
            PathSegment::Key("weight".into())
        ]
    );
}

#[test]
fn fit_args_need_a_type_and_a_shape() {
    let args: NodeResourcesFitArgs = parse("scoringStrategy: {resources: [{name: cpu, weight: 1}]}");
    assert_eq!(
        messages(args.defaulted().validate()),
        [
            "scoringStrategy.type: Unsupported value: \"\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
        ]
    );
    let args: NodeResourcesFitArgs = parse("scoringStrategy: {type: RequestedToCapacityRatio}");
    assert_eq!(
        messages(args.defaulted().validate()),
        ["scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified"]
    );
    let args: NodeResourcesFitArgs =
        parse("scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: []}}");
    assert_eq!(messages(args.defaulted().validate()).len(), 1);
}

#[test]
fn args_reject_unknown_fields_and_values() {
    let error = serde_saphyr::from_str::<NodeResourcesFitArgs>("scoringStrategies: {}")
        .unwrap_err()
        .to_string();
    assert!(error.contains("scoringStrategies"), "{error}");
    let error = serde_saphyr::from_str::<NodeResourcesFitArgs>("scoringStrategy: {type: Balanced}")
        .unwrap_err()
        .to_string();
    assert!(error.contains("Balanced"), "{error}");
    assert!(serde_saphyr::from_str::<InterPodAffinityArgs>("hardPodAffinityWeigth: 2").is_err());
}

#[test]
fn balanced_allocation_args() {
    let args: NodeResourcesBalancedAllocationArgs = parse("{}");
    assert_eq!(
        args.defaulted().resources,
        vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
    );
    let args: NodeResourcesBalancedAllocationArgs = parse("resources: [{name: cpu}, {name: cpu, weight: 2}]");
    assert_eq!(
        messages(args.defaulted().validate()),
        [
            "resources[1].name: Duplicate value: \"cpu\"",
            "resources[1].weight: Invalid value: 2: must be 1"
        ]
    );
}

#[test]
fn topology_spread_args() {
    let args: PodTopologySpreadArgs = parse("{}");
    assert_eq!(args.defaulting_type, DefaultingType::System);
    assert!(args.validate().is_ok());
    let args: PodTopologySpreadArgs = parse(
        r#"
defaultConstraints:
  - {maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {a: b}}}
  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}
  - {maxSkew: 1, topologyKey: "", whenUnsatisfiable: Sometimes}
"#,
    );
    assert_eq!(
        messages(args.validate()),
        [
            "defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty",
            "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
            "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod",
            "defaultConstraints[1]: Duplicate value: \"{zone, DoNotSchedule}\"",
            "defaultConstraints[2].topologyKey: Required value: can not be empty",
            "defaultConstraints[2].whenUnsatisfiable: Unsupported value: \"Sometimes\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
        ]
    );
    let listed: PodTopologySpreadArgs = parse(
        "{defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]}",
    );
    assert!(listed.validate().is_ok());
}

#[test]
fn inter_pod_affinity_and_node_affinity_args() {
    let args: InterPodAffinityArgs = parse("{}");
    assert_eq!(
        (args.hard_weight(), args.ignore_preferred_terms_of_existing_pods),
        (1, false)
    );
    let args: InterPodAffinityArgs = parse("{hardPodAffinityWeight: -1, ignorePreferredTermsOfExistingPods: true}");
    assert_eq!(
        messages(args.validate()),
        ["hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"]
    );
    let args: NodeAffinityArgs = parse(
        r#"
addedAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: Near, values: [a]}]}]
  preferredDuringSchedulingIgnoredDuringExecution:
    - {weight: 1, preference: {matchFields: [{key: metadata.name, operator: In, values: [a, b]}]}}
"#,
    );
    assert_eq!(
        messages(args.validate()),
        [
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: \"Near\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"",
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values: Invalid value: [\"a\",\"b\"]: must have one element",
        ]
    );
}

#[test]
fn declarative_args() {
    let label: NodeLabelArgs = parse("{jsonPath: '{.metadata.labels.tier}', values: {gold: 100, silver: 50}}");
    assert_eq!(
        (label.name.as_str(), label.weight, label.default_score),
        ("NodeLabel", 1, 0)
    );
    assert!(label.compile().is_ok());
    let bad: NodeLabelArgs =
        parse("{jsonPath: 'metadata', values: {gold: 101}, shape: [{value: 1, score: 0}], defaultScore: -1}");
    assert_eq!(
        messages(bad.compile().map(|_| ())),
        [
            "jsonPath: Invalid value: \"metadata\": a path starts with `.` (kubectl style), `{.` or `$`",
            "shape: Forbidden: values and shape are exclusive",
            "values.gold: Invalid value: 101: not in valid range [0, 100]",
            "defaultScore: Invalid value: -1: not in valid range [0, 100]",
        ]
    );
    let unsorted: NodeLabelArgs = parse("{jsonPath: .x, shape: [{value: 5, score: 0}, {value: 5, score: 100}]}");
    assert_eq!(
        messages(unsorted.compile().map(|_| ())),
        ["shape[1].value: Invalid value: 5.0: values must be sorted in increasing order"]
    );
    let value: NodeValueArgs = parse("{jsonPath: .x, min: 10, max: 5}");
    assert_eq!(
        messages(value.compile().map(|_| ())),
        ["max: Invalid value: 5.0: must not be less than min (10)"]
    );
    let empty: NodeValueArgs = parse("{name: Pool, jsonPath: .x}");
    assert_eq!(
        messages(empty.compile().map(|_| ())),
        ["values: Required value: one of values or min/max is required"]
    );
    assert!(serde_saphyr::from_str::<NodeValueArgs>("{jsonPath: .x, value: [a]}").is_err());
}

#[test]
fn args_have_json_schemas() {
    let schema = serde_json::to_value(schemars::schema_for!(NodeResourcesFitArgs)).unwrap();
    let properties = schema["properties"].as_object().unwrap();
    assert!(properties.contains_key("ignoredResources") && properties.contains_key("scoringStrategy"));
    let schema = serde_json::to_value(schemars::schema_for!(PodTopologySpreadArgs)).unwrap();
    assert!(schema["properties"]["defaultConstraints"].is_object());
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    let schema = serde_json::to_value(schemars::schema_for!(NodeLabelArgs)).unwrap();
    assert_eq!(schema["required"], serde_json::json!(["jsonPath"]));
}

#[test]
fn volume_binding_args_default_to_ten_minutes_and_refuse_negative_timeouts() {
    use crate::scheduler::engine::args::VolumeBindingArgs;
    let args: VolumeBindingArgs = parse("{}");
    assert_eq!(args.bind_timeout_seconds(), 600);
    assert!(args.validate().is_ok());
    let args: VolumeBindingArgs = parse("bindTimeoutSeconds: 5");
    assert_eq!(args.bind_timeout_seconds(), 5);
    let args: VolumeBindingArgs = parse("bindTimeoutSeconds: -1");
    assert_eq!(
        messages(args.validate()),
        ["bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"]
    );
}

#[test]
fn coscheduling_args_take_upstreams_defaults_and_messages() {
    use crate::scheduler::engine::args::CoschedulingArgs;
    let args: CoschedulingArgs = parse("{}");
    assert_eq!(args.reject_percentage(), 10);
    assert!(args.validate().is_ok());
    let args: CoschedulingArgs =
        parse("{permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 0, podGroupRejectPercentage: 0}");
    assert_eq!(args.reject_percentage(), 0);
    assert!(args.validate().is_ok());
    let args: CoschedulingArgs =
        parse("{permitWaitingTimeSeconds: -1, podGroupBackoffSeconds: -2, podGroupRejectPercentage: 101}");
    assert_eq!(
        messages(args.validate()),
        [
            "permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0",
            "podGroupBackoffSeconds: Invalid value: -2: must be greater than 0",
            "podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100",
        ]
    );
    let args: CoschedulingArgs = parse("podGroupBackoffSeconds: 5");
    assert_eq!(args.backoff_seconds(), 5);
    assert!(args.validate().is_ok());
}
