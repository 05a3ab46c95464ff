//! The committed JSON schema (`docs/ruleplane.schema.json`) matches the rule types.

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
