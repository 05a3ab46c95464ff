//! Committed reference files stay current: the JSON schema and the rule reference match the rule types, the docs
//! list every code.

use std::path::PathBuf;

#[test]
fn committed_schema_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/ruleplane.schema.json");
    let mut expected = serde_json::to_string_pretty(&ruleplane_config::rule_language_schema())
        .expect("a JSON value always serializes");
    expected.push('\n');
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &expected).expect("write docs/ruleplane.schema.json");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "docs/ruleplane.schema.json is stale; regenerate it with \
         `UPDATE_GOLDEN=1 cargo test -p ruleplane-config --test rules schema_file::` and commit the result"
    );
}

/// docs/rule-reference.md is generated from the schema, so it cannot drift from what the loader accepts.
#[test]
fn committed_rule_reference_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/rule-reference.md");
    let expected = ruleplane_config::rule_reference_markdown(&ruleplane_config::rule_language_schema());
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &expected).expect("write docs/rule-reference.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "docs/rule-reference.md is stale; regenerate it with \
         `UPDATE_GOLDEN=1 cargo test -p ruleplane-config --test rules schema_file::` and commit the result"
    );
}

/// `validate --output json` makes diagnostic codes a public contract: the reference lists every one.
#[test]
fn every_diagnostic_code_is_documented() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/rule-language.md");
    let reference = std::fs::read_to_string(&path).expect("docs/rule-language.md");
    let missing: Vec<&str> = ruleplane_config::DiagnosticCode::ALL
        .iter()
        .map(|code| code.as_str())
        .filter(|code| !reference.contains(&format!("| `{code}` |")))
        .collect();
    assert!(missing.is_empty(), "docs/rule-language.md lacks the codes {missing:?}");
}

/// Every template helper has a row in the reference's helper table and is named in the schema's description of
/// a template (what editors show).
#[test]
fn every_template_helper_is_documented() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/rule-language.md");
    let reference = std::fs::read_to_string(&path).expect("docs/rule-language.md");
    let schema = serde_json::to_string(&ruleplane_config::rule_language_schema())
        .expect("serializes")
        .replace("\\n", " ");
    let words: std::collections::HashSet<&str> = schema.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    for helper in ruleplane_config::HELPERS {
        assert!(
            reference.contains(&format!("| `{helper}`")) || reference.contains(&format!("/ `{helper}` |")),
            "docs/rule-language.md has no row for the helper `{helper}`"
        );
        assert!(
            words.contains(helper),
            "the template description does not name `{helper}`"
        );
    }
}
