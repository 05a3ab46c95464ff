//! The links between the docs lead somewhere: a linked Markdown file exists and a `#anchor` names one of its headings.
//!
//! Every `[text](target)` of README.md, `docs/` and `examples/`'s Markdown whose target is not a URL is checked:
//! the file relative to the linking one, then the anchor against the target's headings as GitHub makes them
//! (lower case, punctuation dropped, spaces as `-`, `-1`, `-2`… for repeats) and its explicit `<a id>`s.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Markdown files checked: README.md and every `.md` under `docs/` and `examples/`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut pending = vec![root.join("docs"), root.join("examples")];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The lines outside fenced code blocks.
fn prose_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    let text = heading.replace('`', "");
    // A link inside a heading counts by its text.
    let mut plain = String::new();
    let mut rest = text.as_str();
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        plain.push_str(&rest[..open]);
        plain.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    plain.push_str(rest);
    plain
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a Markdown text offers: its headings' slugs (repeats numbered) and its `<a id="…">`/`<a name="…">`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in prose_lines(text) {
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') {
            let heading = trimmed.trim_start_matches('#');
            if heading.starts_with(' ') {
                let base = slug(heading);
                let mut anchor = base.clone();
                let mut repeat = 0;
                while found.contains(&anchor) {
                    repeat += 1;
                    anchor = format!("{base}-{repeat}");
                }
                found.insert(anchor);
            }
        }
        for marker in ["<a id=\"", "<a name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(marker) {
                rest = &rest[at + marker.len()..];
                if let Some(end) = rest.find('"') {
                    found.insert(rest[..end].to_string());
                }
            }
        }
    }
    found
}

/// The link targets of a Markdown text (`](target)`), without URLs and mail links.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or_default();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                targets.push(target.to_string());
            }
        }
    }
    targets
}

#[test]
fn every_link_between_the_docs_names_an_existing_file_and_heading() {
    let root = repository_root();
    let mut broken = Vec::new();
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).expect("read a doc");
        let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        for target in link_targets(&text) {
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let linked = if path.is_empty() {
                file.clone()
            } else {
                file.parent().expect("a doc's directory").join(path)
            };
            if !linked.exists() {
                broken.push(format!("{shown}: {target} (no such file)"));
                continue;
            }
            let Some(anchor) = anchor.filter(|_| linked.extension().is_some_and(|e| e == "md")) else {
                continue;
            };
            let linked_text = std::fs::read_to_string(&linked).expect("read a linked doc");
            if !anchors(&linked_text).contains(anchor) {
                broken.push(format!("{shown}: {target} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "links that lead nowhere:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# Gangs (Workload dialect)\n## `ruleplane test`: cases\n## Limits\n## Limits\n```\n# not a heading\n```\n\
                <a id=\"rbac\"></a>\n### [Linked](x.md) heading\n";
    let found = anchors(text);
    for anchor in [
        "gangs-workload-dialect",
        "ruleplane-test-cases",
        "limits",
        "limits-1",
        "rbac",
        "linked-heading",
    ] {
        assert!(found.contains(anchor), "{anchor} in {found:?}");
    }
    assert!(!found.contains("not-a-heading"));
    assert_eq!(
        link_targets("see [a](b.md#c) and [d](https://e/f) and [g](#h \"title\")"),
        ["b.md#c", "#h"]
    );
}
