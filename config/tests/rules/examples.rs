//! The shipped examples load without errors.

use std::path::PathBuf;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

#[test]
fn every_example_loads() {
    let rules = ruleplane_config::load_paths(&[examples_dir()]).unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    let names: Vec<&str> = rules.rules().iter().map(|rule| rule.name()).collect();
    assert_eq!(
        names,
        [
            "bin-packing",
            "cron-tab.stable.example.com",
            "crontab-to-cronjob",
            "my-scheduler",
            "pod2s.samples.ruleplane.dev",
            "pod2-runner",
            "spread",
            "team-card"
        ]
    );
}
