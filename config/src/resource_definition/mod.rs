//! The ResourceDefinition rule kind: types, checks, CRD generation, the evolution plan and the removal decision.

mod checks;
mod crd;
mod names;
mod plan;
mod removal;
mod types;

pub(crate) use checks::{check_resource_definition, check_resource_definition_fields};
pub use crd::generate_crd;
pub(crate) use names::intended_kind;
pub use plan::{CrdPlan, CrdRefusal, EvolutionPolicy, plan_crd};
pub use removal::{CrdRemoval, deletable_by, plan_crd_removal};
pub use types::{
    CrdNames, DeletionPolicy, NamesSpec, PrinterColumn, PrinterColumnType, ResourceDefinitionRule,
    ResourceDefinitionSpec, ResourceScope, ScaleSubresource, Subresources, VersionSchema, VersionSpec,
};
