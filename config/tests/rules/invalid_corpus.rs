//! Every file in `tests/rules/invalid/` fails to load with the error its header announces.
//!
//! Each file starts with one or more lines `# expect: LINE:COLUMN: message substring`; every expectation must
//! be met by some diagnostic at exactly that position.

use std::path::PathBuf;

#[test]
fn invalid_rules_are_rejected_with_located_messages() {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/rules/invalid");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&directory)
        .expect("tests/rules/invalid exists")
        .map(|entry| entry.expect("readable directory").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 40,
        "the corpus should hold at least 40 files, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
        let text = std::fs::read_to_string(file).expect("readable fixture");
        let expectations: Vec<(usize, usize, String)> = text
            .lines()
            .map_while(|line| line.strip_prefix("# expect: "))
            .filter_map(|spec| {
                let mut parts = spec.splitn(3, ':');
                let line = parts.next()?.trim().parse().ok()?;
                let column = parts.next()?.trim().parse().ok()?;
                Some((line, column, parts.next()?.trim().to_string()))
            })
            .collect();
        if expectations.is_empty() {
            failures.push(format!("{name}: no `# expect: LINE:COLUMN: message` header"));
            continue;
        }
        let diagnostics = match ruleplane_config::load_str(&name, &text) {
            Ok(_) => {
                failures.push(format!("{name}: loaded without errors"));
                continue;
            }
            Err(diagnostics) => diagnostics,
        };
        for (line, column, needle) in &expectations {
            let met = diagnostics
                .iter()
                .any(|d| d.line == *line && d.column == *column && d.message.contains(needle.as_str()));
            if !met {
                failures.push(format!(
                    "{name}: expected {line}:{column}: …{needle}… but got:\n{diagnostics}"
                ));
            }
        }
        for diagnostic in diagnostics.iter() {
            if diagnostic.source_line.is_none() {
                failures.push(format!("{name}: diagnostic without source line: {diagnostic}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
