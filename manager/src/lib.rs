//! The Ruleplane manager: CLI, Kubernetes I/O, shared watches, the worker runner, one folder per worker kind,
//! the Leases that share units of work between replicas, and the HTTP endpoints. `main.rs` only parses the command line and calls in here: the
//! commands (`cli`, `run`, `diff`, `offline`, `logging`) are the API, with `kube_client` for the integration
//! tests; every other module is private, so what nothing uses shows as dead code.

mod build_info;
mod child_signing;
pub mod cli;
mod context;
pub mod diff;
mod events;
mod health;
mod http;
pub mod kube_client;
pub mod logging;
mod metrics;
pub mod offline;
mod permissions;
mod rules_watch;
pub mod run;
mod runner;
mod sharding;
mod supervisor;
mod watch_hub;
mod workers;
