//! `ruleplane test`: RuleTest files kept beside the rules — cases in, expected children, status or placements out,
//! run offline with the manager's own render and scheduling code.

mod load;
mod report;
mod run;
mod types;

pub use crate::files::is_test_file;
pub use load::{CaseCheck, RULE_TEST_KIND, ResolvedCase, RuleTestSuite, load_tests, test_files};
pub use report::{json_report, junit_report, text_report, totals};
pub use run::{CaseOutcome, SuiteOutcome, run_suite};
pub use types::{Expectation, ExpectedPlacement, RuleTestDocument, RuleTestSpec, TestCase};

#[cfg(test)]
mod tests;
