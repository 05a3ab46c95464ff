//! Unit tests of the scheduling engine: YAML fixtures plus focused tests of the pieces.

// Unit tests of the scheduling engine: YAML fixtures (cases with nodes, pods, a profile and the expected verdicts,
// scores and messages) plus focused tests of the pieces.

mod args;
mod framework;
mod harness;
mod nominated;
mod perf;
mod pod_index;
mod preemption;
mod quantity;
mod queueing_hints;
mod snapshot;
mod versions;
mod volume_binding;
mod volume_hints;
mod volume_limits;
mod volumes;

use harness::run_fixture;

#[test]
fn basic_filters() {
    run_fixture(include_str!("../fixtures/basic_filters.yaml"));
}

#[test]
fn node_resources_fit() {
    run_fixture(include_str!("../fixtures/node_resources_fit.yaml"));
}

#[test]
fn node_resources_fit_scores() {
    run_fixture(include_str!("../fixtures/node_resources_fit_scores.yaml"));
}

#[test]
fn node_affinity() {
    run_fixture(include_str!("../fixtures/node_affinity.yaml"));
}

#[test]
fn taint_toleration() {
    run_fixture(include_str!("../fixtures/taint_toleration.yaml"));
}

#[test]
fn messages() {
    run_fixture(include_str!("../fixtures/messages.yaml"));
}

#[test]
fn balanced_allocation_and_image_locality() {
    run_fixture(include_str!("../fixtures/balanced_image.yaml"));
}

#[test]
fn declarative_plugins() {
    run_fixture(include_str!("../fixtures/declarative.yaml"));
}

#[test]
fn pod_topology_spread() {
    run_fixture(include_str!("../fixtures/topology_spread.yaml"));
}

#[test]
fn inter_pod_affinity() {
    run_fixture(include_str!("../fixtures/inter_pod_affinity.yaml"));
}
