//! Typed rule documents of `apiVersion: ruleplane.dev/v1alpha1`; doc comments here become the JSON-schema descriptions.

mod common;
mod reconciler;
mod resource_definition;
mod scheduler_policy;

pub use common::{
    API_VERSION, HumanDuration, LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, RuleKind, RuleMetadata,
};
pub use reconciler::{ChildTemplate, FinalizeSpec, Lookup, ReconcilerRule, ReconcilerSpec, WatchedKind};
pub use resource_definition::{
    CrdNames, DeletionPolicy, NamesSpec, PrinterColumn, PrinterColumnType, ResourceDefinitionRule,
    ResourceDefinitionSpec, ResourceScope, ScaleSubresource, Subresources, VersionSchema, VersionSpec,
};
pub use scheduler_policy::{
    AlgorithmProvider, FilterPlugin, ResolvedScore, ResourceWeight, SchedulerPolicyRule, SchedulerPolicySpec,
    ScorePlugin, ScoreSpec, ScoringStrategy, ShapePoint,
};

pub(crate) use common::{DURATION_PATTERN, IDENTIFIER_PATTERN};
pub(crate) use scheduler_policy::resolve_filter_name;
