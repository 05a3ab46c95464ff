//! The one integration-test binary of `ruleplane-config`.
//!
//! Every test binary is linked separately and linking dominates a small crate's test time, so all integration
//! tests live here as modules. Add new ones as `mod name;` below rather than as new files in `config/tests/`.
//! Run a single group with a filter, e.g. `cargo test -p ruleplane-config --test rules golden::`.

mod adversarial;
mod doc_links;
mod doc_paths;
mod examples;
mod golden;
mod invalid_corpus;
mod load_api;
mod schema_file;
mod validate_budget;
