//! The shipped examples load without errors.

use std::path::PathBuf;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// With the vendored CRDs of another tool (`--crds examples/crds`), as the docs and `make test` run them.
#[test]
fn every_example_loads() {
    let crds = examples_dir().join("crds");
    let options = ruleplane_config::LoadOptions {
        installed: ruleplane_config::load_crd_paths(std::slice::from_ref(&crds)).unwrap_or_else(|d| panic!("{d}")),
        not_rules: vec![crds],
        ..Default::default()
    };
    let rules = ruleplane_config::load_paths_with(&[examples_dir()], &options)
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    let names: Vec<&str> = rules.rules().iter().map(|rule| rule.name()).collect();
    assert_eq!(
        names,
        [
            "bin-packing",
            "cron-tab.stable.example.com",
            "crontab-to-cronjob",
            "gang-scheduler",
            "my-scheduler",
            "network-plan",
            "service-certificate",
            "pod2s.samples.ruleplane.dev",
            "pod2-runner",
            "scaled-app.apps.example.org",
            "scaled-app",
            "service-ingress",
            "site.apps.example.org",
            "site-config",
            "spread",
            "team-card",
            "team-labels",
            "warm-pool",
            "web-app.apps.example.org",
            "web-ports",
            "zoned-cache.apps.example.org",
            "zoned-cache"
        ]
    );
}

/// Without them, the kinds another tool installs are unknown offline, and the message says how to fix it.
#[test]
fn without_the_vendored_crds_the_other_tools_kinds_are_unknown_with_a_hint() {
    let problems = ruleplane_config::load_paths(&[examples_dir().join("other-tools")]).expect_err("unknown kinds");
    assert!(problems.iter().all(|d| d.code == "unknown-kind"), "{problems}");
    assert!(problems.iter().all(|d| d.message.contains("--crds")), "{problems}");
}
