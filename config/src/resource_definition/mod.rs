//! The ResourceDefinition rule kind: types, checks, CRD generation and the evolution plan.

mod checks;
mod crd;
mod names;
mod plan;
mod types;

pub(crate) use checks::{check_resource_definition, check_resource_definition_fields};
pub use crd::generate_crd;
pub use plan::{CrdPlan, CrdRefusal, EvolutionPolicy, plan_crd};
pub use types::{
    CrdNames, DeletionPolicy, NamesSpec, PrinterColumn, PrinterColumnType, ResourceDefinitionRule,
    ResourceDefinitionSpec, ResourceScope, ScaleSubresource, Subresources, VersionSchema, VersionSpec,
};
