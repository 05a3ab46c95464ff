//! Integration tests against a real kube-apiserver + etcd (one plane per test binary, a namespace per test).

mod support;

mod cli;
mod external_kinds;
mod fan_in;
mod foundation;
mod gang_checks;
mod gang_corpus;
mod gang_late_kinds;
mod gangs;
mod gitops;
mod helm_chart;
mod kwok;
mod leader_election;
mod manager_runtime;
mod openapi_snapshot;
mod patches;
mod preemption_corpus;
mod preemption_fidelity;
mod reconcilers;
mod resource_definitions;
mod rule_edges;
mod scheduler_fidelity;
mod scheduler_preemption;
mod scheduler_preemption_async;
mod scheduler_preemption_storm;
mod scheduler_volumes;
mod schedulers;
mod sharding;
mod tenancy;
mod volume_corpus;
