//! CustomResourceDefinition generation from a ResourceDefinition rule, and the check of its OpenAPI schema.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::types::{ResourceDefinitionRule, VersionSpec};
use crate::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, RULE_LABEL};
use crate::yaml_tree::PathStep;

/// The CustomResourceDefinition a ResourceDefinition rule stands for, labelled as Ruleplane's.
///
/// Versions without a schema accept arbitrary fields (`x-kubernetes-preserve-unknown-fields: true`), as
/// ThirdPartyResources did.
pub fn generate_crd(rule: &ResourceDefinitionRule) -> CustomResourceDefinition {
    let names = &rule.names;
    let labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string()),
        (RULE_LABEL.to_string(), rule.metadata.name.clone()),
    ]);
    let single_version = rule.spec.versions.len() == 1;
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(names.crd_name()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: names.group.clone(),
            names: CustomResourceDefinitionNames {
                kind: names.kind.clone(),
                plural: names.plural.clone(),
                singular: Some(names.singular.clone()),
                list_kind: Some(names.list_kind.clone()),
                short_names: non_empty(names.short_names.clone()),
                categories: non_empty(names.categories.clone()),
            },
            scope: rule.spec.scope.as_str().to_string(),
            versions: rule
                .spec
                .versions
                .iter()
                .map(|version| crd_version(version, single_version))
                .collect(),
            conversion: None,
            preserve_unknown_fields: None,
        },
        status: None,
    }
}

fn non_empty(items: Vec<String>) -> Option<Vec<String>> {
    (!items.is_empty()).then_some(items)
}

fn crd_version(version: &VersionSpec, single_version: bool) -> CustomResourceDefinitionVersion {
    let schema_value = version
        .schema
        .as_ref()
        .map(|schema| schema.open_api_v3_schema.clone())
        .unwrap_or_else(|| json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true }));
    // The loader has checked that the schema converts; a failure here would be a bug, and falling back to
    // an open schema keeps the function total.
    let schema: JSONSchemaProps = serde_json::from_value(schema_value).unwrap_or_else(|_| JSONSchemaProps {
        type_: Some("object".to_string()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..JSONSchemaProps::default()
    });
    let columns: Vec<CustomResourceColumnDefinition> = version
        .printer_columns
        .iter()
        .map(|column| CustomResourceColumnDefinition {
            name: column.name.clone(),
            type_: column.column_type.as_str().to_string(),
            json_path: column
                .json_path
                .trim()
                .trim_start_matches('{')
                .trim_end_matches('}')
                .to_string(),
            description: column.description.clone(),
            format: column.format.clone(),
            priority: (column.priority != 0).then_some(column.priority),
        })
        .collect();
    CustomResourceDefinitionVersion {
        name: version.name.clone(),
        served: version.served,
        storage: version.storage.unwrap_or(single_version),
        schema: Some(CustomResourceValidation {
            open_api_v3_schema: Some(schema),
        }),
        additional_printer_columns: (!columns.is_empty()).then_some(columns),
        subresources: version
            .subresources
            .as_ref()
            .map(|subresources| CustomResourceSubresources {
                status: subresources
                    .status
                    .as_ref()
                    .map(|_| CustomResourceSubresourceStatus(json!({}))),
                scale: subresources.scale.as_ref().map(|scale| CustomResourceSubresourceScale {
                    spec_replicas_path: scale.spec_replicas_path.clone(),
                    status_replicas_path: scale.status_replicas_path.clone(),
                    label_selector_path: scale.label_selector_path.clone(),
                }),
            }),
        deprecated: version.deprecated.then_some(true),
        deprecation_warning: version.deprecation_warning.clone(),
        selectable_fields: None,
    }
}

/// Problems in an OpenAPI v3 schema: keywords Kubernetes does not know (they would be dropped silently)
/// and values of the wrong type. Each comes with the path of the offending key inside the schema.
pub(crate) fn check_open_api_schema(schema: &Value) -> Vec<(Vec<PathStep>, String)> {
    let converted = match serde_json::from_value::<JSONSchemaProps>(schema.clone()) {
        Ok(converted) => converted,
        Err(error) => return vec![(Vec::new(), format!("invalid OpenAPI schema: {error}"))],
    };
    let round_trip = serde_json::to_value(&converted).unwrap_or(Value::Null);
    let mut problems = Vec::new();
    find_dropped_keys(schema, &round_trip, &mut Vec::new(), &mut problems);
    check_structural(schema, &mut Vec::new(), false, &mut problems);
    check_metadata(schema, &mut problems);
    problems
}

fn flag(node: &serde_json::Map<String, Value>, name: &str) -> bool {
    node.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// The apiserver's structural-schema rules, checked offline so `validate` catches what the apiserver would
/// reject: a type on every specified field, `properties` xor `additionalProperties`, `items` for arrays,
/// defaults of the declared type.
fn check_structural(
    node: &Value,
    path: &mut Vec<PathStep>,
    specified_field: bool,
    problems: &mut Vec<(Vec<PathStep>, String)>,
) {
    let Value::Object(node) = node else { return };
    let ty = node.get("type").and_then(Value::as_str).filter(|t| !t.is_empty());
    let int_or_string = flag(node, "x-kubernetes-int-or-string");
    let preserve_unknown = flag(node, "x-kubernetes-preserve-unknown-fields");
    if specified_field && ty.is_none() && !int_or_string && !preserve_unknown {
        problems.push((
            path.clone(),
            "`type` is required: every field under `properties`, `additionalProperties` and `items` needs one \
             (unless it sets `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`)"
                .to_string(),
        ));
    }
    if node.contains_key("properties") && node.contains_key("additionalProperties") {
        problems.push((
            with_key(path, "additionalProperties"),
            "`additionalProperties` and `properties` cannot both be set (Kubernetes requires a structural schema)"
                .to_string(),
        ));
    }
    if ty == Some("array") && !node.contains_key("items") {
        problems.push((
            path.clone(),
            "an array needs `items` (Kubernetes requires a structural schema)".to_string(),
        ));
    }
    if let (Some(ty), Some(default)) = (ty, node.get("default"))
        && !(default.is_null() && flag(node, "nullable"))
        && !json_type_matches(ty, default)
    {
        problems.push((
            with_key(path, "default"),
            format!("`default` must be of type {ty}, not {}", json_type_name(default)),
        ));
    }
    if let Some(Value::Object(properties)) = node.get("properties") {
        for (name, child) in properties {
            path.extend([PathStep::Key("properties".to_string()), PathStep::Key(name.clone())]);
            check_structural(child, path, true, problems);
            path.truncate(path.len() - 2);
        }
    }
    for key in ["additionalProperties", "items"] {
        if let Some(child @ Value::Object(_)) = node.get(key) {
            path.push(PathStep::Key(key.to_string()));
            check_structural(child, path, true, problems);
            path.pop();
        }
    }
}

/// At the root, `metadata` may only constrain `name` and `generateName`: the apiserver owns the rest.
fn check_metadata(schema: &Value, problems: &mut Vec<(Vec<PathStep>, String)>) {
    let Some(Value::Object(fields)) = schema.pointer("/properties/metadata/properties") else {
        return;
    };
    for name in fields.keys().filter(|k| !matches!(k.as_str(), "name" | "generateName")) {
        problems.push((
            ["properties", "metadata", "properties", name]
                .iter()
                .map(|k| PathStep::Key((*k).to_string()))
                .collect(),
            format!("`metadata.{name}` cannot be constrained: only `metadata.name` and `metadata.generateName` can"),
        ));
    }
}

fn with_key(path: &[PathStep], key: &str) -> Vec<PathStep> {
    let mut out = path.to_vec();
    out.push(PathStep::Key(key.to_string()));
    out
}

fn json_type_matches(ty: &str, value: &Value) -> bool {
    match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => true,
    }
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Keys of `original` that did not survive the round trip through the Kubernetes type.
fn find_dropped_keys(
    original: &Value,
    round_trip: &Value,
    path: &mut Vec<PathStep>,
    problems: &mut Vec<(Vec<PathStep>, String)>,
) {
    match (original, round_trip) {
        (Value::Object(fields), Value::Object(kept)) => {
            for (name, value) in fields {
                path.push(PathStep::Key(name.clone()));
                match kept.get(name) {
                    Some(kept_value) => {
                        // `default`, `example` and `enum` hold user data, not schema: nothing to compare.
                        if !matches!(name.as_str(), "default" | "example" | "enum" | "const") {
                            find_dropped_keys(value, kept_value, path, problems);
                        }
                    }
                    None if value.is_null() => {}
                    None => problems.push((
                        path.clone(),
                        format!("`{name}` is not an OpenAPI v3 schema keyword Kubernetes knows; it would be dropped"),
                    )),
                }
                path.pop();
            }
        }
        (Value::Array(items), Value::Array(kept)) => {
            for (index, (item, kept_item)) in items.iter().zip(kept).enumerate() {
                path.push(PathStep::Index(index));
                find_dropped_keys(item, kept_item, path, problems);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schema_keywords_are_found() {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "propertes": {}, "x-kubernetes-validations": [{"rule": "true"}]}},
        });
        let problems = check_open_api_schema(&schema);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].1.contains("`propertes`"));
        assert_eq!(
            crate::yaml_tree::path_to_string(&problems[0].0),
            "properties.spec.propertes"
        );
    }
}
