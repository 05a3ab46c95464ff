//! Reports of a test run: text for people, JUnit XML for CI systems, JSON for tools.

use std::fmt::Write;

use super::run::SuiteOutcome;

/// Totals of a run.
pub fn totals(suites: &[SuiteOutcome]) -> (usize, usize) {
    let cases = suites.iter().flat_map(|s| &s.cases);
    let failed = cases.clone().filter(|c| !c.passed()).count();
    (cases.count() - failed, failed)
}

/// One line per case (`PASS`/`FAIL`, where, suite › case), the failures indented under a failed case, and the
/// totals as `N passed, M failed`.
pub fn text_report(suites: &[SuiteOutcome]) -> String {
    let mut out = String::new();
    for suite in suites {
        for case in &suite.cases {
            let verdict = if case.passed() { "PASS" } else { "FAIL" };
            let _ = writeln!(out, "{verdict}  {}  {} › {}", case.source, suite.name, case.name);
            for failure in &case.failures {
                for line in failure.lines() {
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
    }
    let (passed, failed) = totals(suites);
    let _ = writeln!(out, "{passed} passed, {failed} failed");
    out
}

/// JUnit XML: one `<testsuite>` per RuleTest, one `<testcase>` per case (classname = the rule), failures with
/// their text.
pub fn junit_report(suites: &[SuiteOutcome]) -> String {
    let (passed, failed) = totals(suites);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"ruleplane test\" tests=\"{}\" failures=\"{failed}\">",
        passed + failed
    );
    for suite in suites {
        let failures = suite.cases.iter().filter(|c| !c.passed()).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" file=\"{}\">",
            escape(&suite.name),
            suite.cases.len(),
            escape(&suite.source.file)
        );
        for case in &suite.cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" line=\"{}\"",
                escape(&case.name),
                escape(&suite.rule),
                escape(&case.source.file),
                case.source.line
            );
            if case.passed() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            let first = case.failures[0].lines().next().unwrap_or_default();
            let _ = writeln!(
                out,
                "      <failure message=\"{}\">{}</failure>",
                escape(first),
                escape(&case.failures.join("\n"))
            );
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Escapes text for XML attributes and content; characters XML 1.0 cannot hold become U+FFFD.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// JSON: `{passed, failed, suites: [{name, rule, file, line, cases: [{name, file, line, column, passed,
/// failures}]}]}`, the same facts as the text report.
pub fn json_report(suites: &[SuiteOutcome]) -> serde_json::Value {
    let (passed, failed) = totals(suites);
    let suites: Vec<serde_json::Value> = suites
        .iter()
        .map(|suite| {
            let cases: Vec<serde_json::Value> = suite
                .cases
                .iter()
                .map(|case| {
                    serde_json::json!({
                        "name": case.name,
                        "file": case.source.file,
                        "line": case.source.line,
                        "column": case.source.column,
                        "passed": case.passed(),
                        "failures": case.failures,
                    })
                })
                .collect();
            serde_json::json!({
                "name": suite.name,
                "rule": suite.rule,
                "file": suite.source.file,
                "line": suite.source.line,
                "cases": cases,
            })
        })
        .collect();
    serde_json::json!({ "passed": passed, "failed": failed, "suites": suites })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::SourceLocation;
    use crate::rule_test::run::CaseOutcome;

    fn outcome(failures: Vec<String>) -> Vec<SuiteOutcome> {
        let at = SourceLocation {
            file: "a&b.test.yaml".into(),
            line: 7,
            column: 5,
        };
        vec![SuiteOutcome {
            name: "web".into(),
            rule: "web-app".into(),
            source: at.clone(),
            cases: vec![
                CaseOutcome {
                    name: "ok".into(),
                    source: at.clone(),
                    failures: Vec::new(),
                },
                CaseOutcome {
                    name: "bad <one>".into(),
                    source: at,
                    failures,
                },
            ],
        }]
    }

    #[test]
    fn text_lists_cases_with_failures_indented_and_totals_last() {
        let text = text_report(&outcome(vec!["child x differs:\n-a\n+b".into()]));
        assert_eq!(
            text,
            "PASS  a&b.test.yaml:7:5  web › ok\nFAIL  a&b.test.yaml:7:5  web › bad <one>\n      child x differs:\n      -a\n      +b\n1 passed, 1 failed\n"
        );
    }

    #[test]
    fn junit_escapes_and_counts() {
        let xml = junit_report(&outcome(vec!["pod default/a: expected node \"n1\"".into()]));
        assert!(
            xml.contains("<testsuites name=\"ruleplane test\" tests=\"2\" failures=\"1\">"),
            "{xml}"
        );
        assert!(xml.contains("file=\"a&amp;b.test.yaml\""), "{xml}");
        assert!(xml.contains("<testcase name=\"ok\" classname=\"web-app\" file=\"a&amp;b.test.yaml\" line=\"7\"/>"));
        assert!(xml.contains("name=\"bad &lt;one&gt;\""), "{xml}");
        assert!(
            xml.contains("<failure message=\"pod default/a: expected node &quot;n1&quot;\">"),
            "{xml}"
        );
    }
}
