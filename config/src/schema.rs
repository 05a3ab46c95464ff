//! The JSON Schema (draft-07) of the rule language, generated from the rule types; also drives the loader's checks.

use std::sync::OnceLock;

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::common::{API_VERSION, RuleKind};
use crate::reconciler::ReconcilerRule;
use crate::resource_definition::ResourceDefinitionRule;
use crate::rule_test::{RULE_TEST_KIND, RuleTestDocument};
use crate::scheduler::SchedulerPolicyRule;
use crate::template::{TEMPLATE_PARTIALS_KIND, TemplatePartialsDocument};

/// JSON Schema (draft-07) accepting any rule document (ResourceDefinition, Reconciler or SchedulerPolicy) or test
/// document (RuleTest),
/// for `ruleplane schema` and editors (`# yaml-language-server: $schema=…`).
pub fn rule_language_schema() -> Value {
    cached_schema().clone()
}

/// The schema is derived once and shared: the loader checks every document against it.
pub(crate) fn cached_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(build_schema)
}

/// The `$ref` of a rule kind's document schema inside [`rule_language_schema`].
pub(crate) fn kind_schema_ref(kind: RuleKind) -> Value {
    json!({ "$ref": format!("#/definitions/{}", definition_name(kind)) })
}

/// The `$ref` of the partials document schema (`kind: TemplatePartials`) inside [`rule_language_schema`].
pub(crate) fn template_partials_schema_ref() -> Value {
    json!({ "$ref": "#/definitions/TemplatePartialsDocument" })
}

/// The `$ref` of the test document schema (`*.test.yaml` files) inside [`rule_language_schema`].
pub(crate) fn rule_test_schema_ref() -> Value {
    json!({ "$ref": "#/definitions/RuleTestDocument" })
}

fn definition_name(kind: RuleKind) -> &'static str {
    match kind {
        RuleKind::ResourceDefinition => "ResourceDefinitionRule",
        RuleKind::Reconciler => "ReconcilerRule",
        RuleKind::SchedulerPolicy => "SchedulerPolicyRule",
    }
}

fn build_schema() -> Value {
    let mut generator = SchemaSettings::draft07().into_generator();
    generator.subschema_for::<ResourceDefinitionRule>();
    generator.subschema_for::<ReconcilerRule>();
    generator.subschema_for::<SchedulerPolicyRule>();
    generator.subschema_for::<RuleTestDocument>();
    generator.subschema_for::<TemplatePartialsDocument>();
    let definitions = generator.take_definitions(true);
    let mut kinds: Vec<&str> = RuleKind::ALL.iter().map(|kind| kind.as_str()).collect();
    kinds.push(RULE_TEST_KIND);
    kinds.push(TEMPLATE_PARTIALS_KIND);
    let mut dispatch: Vec<Value> = RuleKind::ALL
        .iter()
        .map(|kind| {
            json!({
                "if": { "properties": { "kind": { "const": kind.as_str() } }, "required": ["kind"] },
                "then": kind_schema_ref(*kind),
            })
        })
        .collect();
    dispatch.push(json!({
        "if": { "properties": { "kind": { "const": RULE_TEST_KIND } }, "required": ["kind"] },
        "then": rule_test_schema_ref(),
    }));
    dispatch.push(json!({
        "if": { "properties": { "kind": { "const": TEMPLATE_PARTIALS_KIND } }, "required": ["kind"] },
        "then": template_partials_schema_ref(),
    }));
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Ruleplane rule",
        "description": format!(
            "One document of a Ruleplane rule file (apiVersion {API_VERSION}): a ResourceDefinition, a \
             Reconciler or a SchedulerPolicy; or of a test file (`*.test.yaml`): a RuleTest. See \
             docs/rule-language.md and docs/testing.md."
        ),
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": { "const": API_VERSION },
            "kind": { "enum": kinds },
        },
        "allOf": dispatch,
        "definitions": definitions,
    })
}
