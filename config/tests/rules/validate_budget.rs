//! `validate` of a rule over every built-in kind and every vendored CRD stays within a small time and size budget:
//! the synthetic parent it renders each Reconciler for is bounded whatever the parent kind's schema (recursive
//! ones such as a CustomResourceDefinition's `JSONSchemaProps` included).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ruleplane_config::object_schema::KindSchemas;
use ruleplane_config::{BUILTIN_KINDS, KubernetesVersion, LoadOptions, load_crd_paths, load_str_with};

/// Far above what any kind takes (a few milliseconds each, unoptimised), far below a runaway.
const TIME_BUDGET: Duration = Duration::from_secs(3);
/// The synthetic parent as JSON text: the largest built-in kind's is about 60 KiB.
const SIZE_BUDGET: usize = 1024 * 1024;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A Reconciler for `api_version`/`kind` with one ConfigMap child that reads the parent's name.
fn rule_for(api_version: &str, kind: &str) -> String {
    format!(
        "apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: budget }}
spec:
  for: {{ apiVersion: {api_version}, kind: {kind} }}
  children:
    - id: note
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: {{{{json metadata.name}}}}, namespace: default }}
        data: {{ kind: {{{{json kind}}}} }}
"
    )
}

/// Loads the rule as `validate` does and renders it for its synthetic parent; what it took, or why it failed.
fn validate(api_version: &str, kind: &str, options: &LoadOptions) -> Result<(Duration, usize), String> {
    let started = Instant::now();
    let rules = load_str_with("budget.yaml", &rule_for(api_version, kind), options).map_err(|d| d.to_string())?;
    let schemas = KindSchemas::of_rule_set(&rules);
    let problems = ruleplane_config::synthetic_parent_diagnostics(&rules, &schemas);
    let namespace = rules
        .reconcilers()
        .filter_map(|rule| rule.kinds().parent.as_ref())
        .any(|parent| parent.namespaced)
        .then_some("default");
    let parent = schemas
        .synthetic_object(api_version, kind, namespace)
        .ok_or("no synthetic parent")?;
    let elapsed = started.elapsed();
    if !problems.is_empty() {
        return Err(format!("{problems:?}"));
    }
    Ok((
        elapsed,
        serde_json::to_string(&parent).map_err(|e| e.to_string())?.len(),
    ))
}

fn within_budget(what: &str, result: Result<(Duration, usize), String>, failures: &mut Vec<String>) {
    match result {
        Ok((elapsed, size)) if elapsed <= TIME_BUDGET && size <= SIZE_BUDGET => {}
        Ok((elapsed, size)) => failures.push(format!("{what}: {elapsed:?}, a parent of {size} bytes")),
        Err(error) => failures.push(format!("{what}: {error}")),
    }
}

#[test]
fn validate_of_a_rule_over_each_built_in_kind_stays_within_budget() {
    let mut failures = Vec::new();
    for version in KubernetesVersion::ALL {
        let options = LoadOptions {
            kubernetes_version: version,
            ..Default::default()
        };
        for kind in BUILTIN_KINDS {
            let what = format!("{version} {} {}", kind.api_version, kind.kind);
            within_budget(&what, validate(kind.api_version, kind.kind, &options), &mut failures);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn validate_of_a_rule_over_each_vendored_crd_stays_within_budget() {
    let manifests = [
        "examples/crds",
        "tests/crds",
        "tests/rules/crds",
        "config/src/object_schema/testdata/cel-crds.yaml",
    ]
    .map(|path| repo().join(path));
    // The CRDs the examples' ResourceDefinitions generate, as committed golden files.
    let generated = std::fs::read_dir(repo().join("tests/rules/golden"))
        .expect("golden files")
        .map(|entry| entry.expect("readable directory").path())
        .filter(|path| path.to_string_lossy().ends_with(".crd.yaml"));
    let paths: Vec<PathBuf> = manifests.into_iter().chain(generated).collect();
    let options = LoadOptions {
        installed: load_crd_paths(&paths).unwrap_or_else(|d| panic!("{d}")),
        ..Default::default()
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for installed in options.installed.kinds() {
        for (version, _) in &installed.served_versions {
            let api_version = format!("{}/{version}", installed.group);
            let what = format!("{} {api_version} {}", installed.source, installed.kind);
            within_budget(&what, validate(&api_version, &installed.kind, &options), &mut failures);
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} vendored kinds");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
