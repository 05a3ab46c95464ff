//! The Ruleplane manager: CLI, Kubernetes I/O, shared watches, the worker runner, one folder per worker kind,
//! leader election and the HTTP endpoints. `main.rs` only parses the command line and calls in here.

pub mod build_info;
pub mod child_signing;
pub mod cli;
pub mod context;
pub mod diff;
pub mod events;
pub mod health;
pub mod http;
pub mod kube_client;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod offline;
pub mod permissions;
pub mod rules_watch;
pub mod run;
pub mod runner;
pub mod supervisor;
pub mod watch_hub;
pub mod workers;
