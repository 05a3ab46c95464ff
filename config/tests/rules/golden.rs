//! Golden tests over `examples/` and `tests/rules/`: CRD generation, rendering, resolved policies and the
//! resolved form of valid fixtures. Regenerate with `UPDATE_GOLDEN=1 cargo test -p ruleplane-config --test rules golden::`.

use std::path::{Path, PathBuf};

use ruleplane_config::{Rule, RuleSet, compute_status, generate_crd, load_paths, render_children};
use serde_json::{Map, Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn golden_dir() -> PathBuf {
    repo().join("tests/rules/golden")
}

/// Compares `actual` with the golden file, or rewrites it when `UPDATE_GOLDEN` is set.
fn check_golden(name: &str, actual: &str, failures: &mut Vec<String>) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        failures.push(format!(
            "{} differs from the output:\n{actual}\n(regenerate with `UPDATE_GOLDEN=1 cargo test -p ruleplane-config --test rules golden::` and review the diff)",
            path.display()
        ));
    }
}

fn finish(failures: Vec<String>) {
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn yaml(value: &impl serde::Serialize) -> String {
    serde_saphyr::to_string(value).expect("values serialize as YAML")
}

/// Loads rules as the offline commands do with `--crds examples/crds` (the vendored CRDs of another tool's
/// kinds the examples use; never rules, never generated).
fn load(path: &Path) -> RuleSet {
    let crds = repo().join("examples/crds");
    let options = ruleplane_config::LoadOptions {
        installed: ruleplane_config::load_crd_paths(std::slice::from_ref(&crds)).unwrap_or_else(|d| panic!("{d}")),
        not_rules: vec![crds],
        ..Default::default()
    };
    ruleplane_config::load_paths_with(&[path.to_path_buf()], &options)
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"))
}

#[test]
fn crds_of_examples() {
    let rules = load(&repo().join("examples"));
    let mut failures = Vec::new();
    for definition in rules.resource_definitions() {
        let crd = generate_crd(definition);
        let mut value = serde_json::to_value(&crd).expect("CRDs serialize");
        // k8s-openapi serializes the typed object without apiVersion/kind; add them so the file is applyable.
        if let Value::Object(fields) = &mut value {
            fields.insert("apiVersion".into(), json!("apiextensions.k8s.io/v1"));
            fields.insert("kind".into(), json!("CustomResourceDefinition"));
        }
        check_golden(
            &format!("{}.crd.yaml", definition.metadata.name),
            &yaml(&value),
            &mut failures,
        );
    }
    finish(failures);
}

#[test]
fn policies_of_examples_resolve() {
    let rules = load(&repo().join("examples"));
    let mut failures = Vec::new();
    for policy in rules.scheduler_policies() {
        let resolved = json!({
            "schedulerName": policy.spec.scheduler_name,
            "profile": policy.profile(),

            "percentageOfNodesToScore": policy.spec.percentage_of_nodes_to_score,
        });
        check_golden(
            &format!("{}.policy.yaml", policy.metadata.name),
            &yaml(&resolved),
            &mut failures,
        );
    }
    finish(failures);
}

/// Each `tests/rules/render/<case>.yaml` names an example rule and gives a parent object, lookups and
/// optionally observed children; the golden file holds the rendered children and status (or the error).
#[test]
fn render_cases() {
    let rules = load(&repo().join("examples"));
    let mut failures = Vec::new();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/rules/render"))
        .expect("tests/rules/render exists")
        .map(|entry| entry.expect("readable directory").path())
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    for case_path in cases {
        let text = std::fs::read_to_string(&case_path).expect("readable case");
        let case: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", case_path.display()));
        let rule_name = case["rule"].as_str().expect("case names its rule");
        let Some(Rule::Reconciler(rule)) = rules.get(rule_name) else {
            panic!("{}: no Reconciler `{rule_name}` in examples/", case_path.display());
        };
        let lookups: Map<String, Value> = case["lookups"].as_object().cloned().unwrap_or_default();
        let output = match render_children(rule, &case["parent"], &lookups) {
            Ok(rendered) => {
                let mut output = json!({ "children": rendered.children, "status": rendered.status });
                if let Some(observed) = case["observedChildren"].as_object() {
                    output["observedStatus"] = Value::Object(compute_status(rule, &case["parent"], observed, &lookups));
                    let ready: Map<String, Value> = rule
                        .children()
                        .iter()
                        .filter_map(|child| {
                            observed
                                .get(&child.id)
                                .map(|o| (child.id.clone(), json!(ruleplane_config::child_ready(child, o))))
                        })
                        .collect();
                    output["observedReady"] = Value::Object(ready);
                }
                yaml(&output)
            }
            Err(error) => {
                // Paths differ between machines; the golden file keeps the part after the repository root.
                let message = error
                    .to_string()
                    .replace(&repo().join("examples").display().to_string(), "examples");
                yaml(&json!({ "error": message, "category": error.category() }))
            }
        };
        let stem = case_path.file_stem().and_then(|s| s.to_str()).expect("UTF-8 file name");
        check_golden(&format!("render-{stem}.yaml"), &output, &mut failures);
    }
    finish(failures);
}

/// Every `tests/rules/valid/*.yaml` loads; the golden file records what it resolves to.
#[test]
fn valid_fixtures() {
    let mut failures = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/rules/valid"))
        .expect("tests/rules/valid exists")
        .map(|entry| entry.expect("readable directory").path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let rules = match load_paths(std::slice::from_ref(&file)) {
            Ok(rules) => rules,
            Err(diagnostics) => {
                failures.push(format!("{} should load:\n{diagnostics}", file.display()));
                continue;
            }
        };
        let summary: Vec<Value> = rules
            .rules()
            .iter()
            .map(|rule| match rule {
                Rule::ResourceDefinition(rd) => json!({
                    "kind": "ResourceDefinition", "name": rd.metadata.name, "line": rd.source.line,
                    "resolvedNames": rd.names, "crdName": rd.names.crd_name(),
                }),
                Rule::Reconciler(r) => json!({
                    "kind": "Reconciler", "name": r.metadata.name, "line": r.source.line,
                    "watches": rules.resolve_kind(&r.spec.watched.api_version, &r.spec.watched.kind),
                    "resyncPeriod": r.spec.resync_period.map(|d| d.duration().as_secs()),
                }),
                Rule::SchedulerPolicy(p) => json!({
                    "kind": "SchedulerPolicy", "name": p.metadata.name, "line": p.source.line,
                    "profile": p.profile(),
                }),
            })
            .collect();
        let stem = file.file_stem().and_then(|s| s.to_str()).expect("UTF-8 file name");
        check_golden(&format!("valid-{stem}.yaml"), &yaml(&summary), &mut failures);
    }
    finish(failures);
}
