//! Semantic checks of a ResourceDefinition: names, versions, printer columns, schemas, storage version.

use std::collections::HashMap;

use serde_json::Value;

use super::crd::check_open_api_schema;
use super::names::resolve_names;
use super::types::ResourceDefinitionRule;
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::jsonpath::CompiledPath;
use crate::load::{key, path, with};
use crate::naming::is_version_name;
use crate::yaml_tree::{Node, PathStep};

pub(crate) fn check_resource_definition(rule: &mut ResourceDefinitionRule, doc: &Node, out: &mut FileDiagnostics) {
    check_resource_definition_names(rule, doc, out);
    check_resource_definition_fields(rule, doc, out);
    check_storage_version(rule, doc, out);
}

fn check_resource_definition_names(rule: &mut ResourceDefinitionRule, doc: &Node, out: &mut FileDiagnostics) {
    match resolve_names(&rule.metadata.name, &rule.spec) {
        Ok(names) => rule.names = names,
        Err(problems) => {
            for problem in problems {
                out.error(doc.value_pos_of(&problem.field), DiagnosticCode::Name, problem.message);
            }
        }
    }
}

/// Checks of each version that do not depend on the other versions or on the names.
pub(crate) fn check_resource_definition_fields(
    rule: &mut ResourceDefinitionRule,
    doc: &Node,
    out: &mut FileDiagnostics,
) {
    let versions = &rule.spec.versions;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, version) in versions.iter().enumerate() {
        let at = |field: &str| {
            doc.value_pos_of(&with(
                &path(&["spec", "versions"]),
                &[PathStep::Index(index), key(field)],
            ))
        };
        if let Some(first) = seen.insert(&version.name, index) {
            out.error(
                at("name"),
                DiagnosticCode::Duplicate,
                format!("version `{}` is also declared at spec.versions[{first}]", version.name),
            );
        }
        if !is_version_name(&version.name) {
            out.error(
                at("name"),
                DiagnosticCode::Value,
                format!(
                    "version `{}` must look like `v1`, `v2beta1` or `v1alpha2`",
                    version.name
                ),
            );
        }
        for (column_index, column) in version.printer_columns.iter().enumerate() {
            let column_path = with(
                &path(&["spec", "versions"]),
                &[
                    PathStep::Index(index),
                    key("printerColumns"),
                    PathStep::Index(column_index),
                    key("jsonPath"),
                ],
            );
            let text = column.json_path.trim();
            let simple = text.trim_start_matches('{').trim_end_matches('}');
            if !simple.starts_with('.') {
                out.error(
                    doc.value_pos_of(&column_path),
                    DiagnosticCode::Jsonpath,
                    format!("printer column path `{text}` must start with `.`, e.g. `.spec.cronSpec`"),
                );
            } else if let Err(error) = CompiledPath::compile(text) {
                out.error(
                    doc.value_pos_of(&column_path),
                    DiagnosticCode::Jsonpath,
                    error.to_string(),
                );
            }
        }
        if version.deprecation_warning.is_some() && !version.deprecated {
            out.error(
                at("deprecationWarning"),
                DiagnosticCode::Value,
                "`deprecationWarning` needs `deprecated: true`",
            );
        }
        if let Some(schema) = &version.schema {
            let schema_path = with(
                &path(&["spec", "versions"]),
                &[PathStep::Index(index), key("schema"), key("openAPIV3Schema")],
            );
            let schema_type = schema.open_api_v3_schema.get("type").and_then(Value::as_str);
            if schema_type != Some("object") {
                out.error(
                    doc.pos_of(&schema_path),
                    DiagnosticCode::Schema,
                    "openAPIV3Schema must have `type: object` at its root (Kubernetes requires a structural schema)",
                );
            }
            for (inner_path, message) in check_open_api_schema(&schema.open_api_v3_schema) {
                out.error(
                    doc.pos_of(&with(&schema_path, &inner_path)),
                    DiagnosticCode::Schema,
                    message,
                );
            }
        }
        if let Some(scale) = version.subresources.as_ref().and_then(|s| s.scale.as_ref()) {
            for (field, value, prefix) in [
                ("specReplicasPath", &scale.spec_replicas_path, ".spec."),
                ("statusReplicasPath", &scale.status_replicas_path, ".status."),
            ] {
                if !value.starts_with(prefix) {
                    out.error(
                        doc.value_pos_of(&with(
                            &path(&["spec", "versions"]),
                            &[PathStep::Index(index), key("subresources"), key("scale"), key(field)],
                        )),
                        DiagnosticCode::Value,
                        format!("`{field}` must start with `{prefix}`"),
                    );
                }
            }
        }
    }
}

fn check_storage_version(rule: &ResourceDefinitionRule, doc: &Node, out: &mut FileDiagnostics) {
    let versions = &rule.spec.versions;
    let storage: Vec<&str> = versions
        .iter()
        .filter(|v| v.storage.unwrap_or(versions.len() == 1))
        .map(|v| v.name.as_str())
        .collect();
    if storage.len() != 1 {
        let message = if storage.is_empty() {
            "exactly one version must have `storage: true`; none has".to_string()
        } else {
            format!(
                "exactly one version must have `storage: true`; {} have",
                storage.join(", ")
            )
        };
        out.error(
            doc.pos_of(&path(&["spec", "versions"])),
            DiagnosticCode::StorageVersion,
            message,
        );
    }
    if let Some(storage_version) = versions.iter().find(|v| v.storage.unwrap_or(versions.len() == 1))
        && !storage_version.served
    {
        out.error(
            doc.pos_of(&path(&["spec", "versions"])),
            DiagnosticCode::StorageVersion,
            format!("the storage version `{}` must be served", storage_version.name),
        );
    }
}
