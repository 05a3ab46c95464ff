//! The repository paths the docs name exist: a moved file fails here, naming the doc and the path.
//!
//! In every doc, a backticked path that starts with a top-level entry of the repository (`config/…`, `docs/…`)
//! must exist. `docs/design.md`, the map of the code, is held to more: a backticked file path there (`engine/snapshot.rs`,
//! `mod.rs`) must also be the tail of some repository file. Braces expand (`{types,checks}.rs`), and a segment with
//! `*` or `<placeholder>` matches any name. Upstream paths (`pkg/scheduler/…`, `*.go`) start elsewhere and are skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Extensions of the files design.md points at by a shortened path.
const FILE_EXTENSIONS: &[&str] = &[".rs", ".md", ".sh", ".yaml", ".yml", ".json", ".toml", ".py"];

fn repository_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file and directory of the repository, as `/`-separated paths relative to its root (directories with a
/// trailing `/`); build output, Git's and hidden directories left out.
fn repository_paths(root: &Path) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut pending = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a repository directory") {
            let entry = entry.expect("read a directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = format!("{prefix}{name}");
            if entry.file_type().expect("file type").is_dir() {
                if name.starts_with('.') || name == "target" {
                    continue;
                }
                paths.insert(format!("{relative}/"));
                pending.push((entry.path(), format!("{relative}/")));
            } else {
                paths.insert(relative);
            }
        }
    }
    paths
}

/// The inline code spans of a Markdown text, fenced blocks left out.
fn code_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            spans.extend(line.split('`').skip(1).step_by(2));
        }
    }
    spans
}

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs`.
fn expand_braces(path: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (path.find('{'), path.find('}')) else {
        return vec![path.to_string()];
    };
    if close < open {
        return vec![path.to_string()];
    }
    path[open + 1..close]
        .split(',')
        .flat_map(|choice| expand_braces(&format!("{}{choice}{}", &path[..open], &path[close + 1..])))
        .collect()
}

/// One path segment against a pattern segment, where `*` and `<…>` match any run of characters.
fn segment_matches(pattern: &str, name: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = pattern;
    let mut current = String::new();
    while let Some(c) = rest.chars().next() {
        if c == '*' {
            literals.push(std::mem::take(&mut current));
            rest = &rest[1..];
        } else if c == '<' && rest.contains('>') {
            literals.push(std::mem::take(&mut current));
            rest = &rest[rest.find('>').expect("checked") + 1..];
        } else {
            current.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    literals.push(current);
    if literals.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (&literals[0], &literals[literals.len() - 1]);
    if !name.starts_with(first.as_str()) || !name[first.len()..].ends_with(last.as_str()) {
        return false;
    }
    let mut position = first.len();
    let end = name.len() - last.len();
    for literal in &literals[1..literals.len() - 1] {
        match name[position..end].find(literal.as_str()) {
            Some(found) => position += found + literal.len(),
            None => return false,
        }
    }
    true
}

/// Whether the pattern's segments match the path's last segments (all of them when `whole`).
fn path_matches(pattern: &str, path: &str, whole: bool) -> bool {
    let pattern: Vec<&str> = pattern.trim_end_matches('/').split('/').collect();
    let path: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    if pattern.len() > path.len() || (whole && pattern.len() != path.len()) {
        return false;
    }
    let tail = &path[path.len() - pattern.len()..];
    pattern.iter().zip(tail).all(|(p, name)| segment_matches(p, name))
}

/// The paths a doc names that do not exist.
fn missing_paths(text: &str, strict: bool, repository: &BTreeSet<String>) -> Vec<String> {
    let top_level: BTreeSet<&str> = repository.iter().filter_map(|path| path.split('/').next()).collect();
    let mut missing = Vec::new();
    for span in code_spans(text) {
        let candidate = span.split('#').next().unwrap_or_default();
        if candidate.is_empty()
            || candidate.contains(char::is_whitespace)
            || candidate.contains(['=', ':', '…', '$', '@'])
            || candidate.starts_with(['.', '/', '~', '-'])
        {
            continue;
        }
        let rooted = candidate.contains('/') && top_level.contains(candidate.split('/').next().unwrap_or_default());
        let file = FILE_EXTENSIONS.iter().any(|extension| candidate.ends_with(extension));
        if !(rooted || (strict && file)) {
            continue;
        }
        for path in expand_braces(candidate) {
            let found = repository.iter().any(|existing| {
                (path.ends_with('/') <= existing.ends_with('/')) && path_matches(&path, existing, rooted)
            });
            if !found && !missing.contains(&path) {
                missing.push(path);
            }
        }
    }
    missing
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = repository_root();
    let repository = repository_paths(&root);
    let mut docs: Vec<String> = repository
        .iter()
        .filter(|path| path.starts_with("docs/") && path.ends_with(".md"))
        .cloned()
        .collect();
    docs.push("README.md".to_string());
    let mut failures = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(root.join(doc)).expect("read a doc");
        for path in missing_paths(&text, doc == "docs/design.md", &repository) {
            failures.push(format!("{doc}: `{path}` does not exist"));
        }
    }
    assert!(
        failures.is_empty(),
        "paths named in the docs that moved or never existed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_check_finds_a_moved_file_and_accepts_patterns() {
    let repository: BTreeSet<String> = [
        "config/",
        "config/src/",
        "config/src/scheduler/",
        "config/src/scheduler/types.rs",
        "config/src/scheduler/checks.rs",
        "config/src/scheduler/queue_tests.rs",
        "config/schemas/",
        "config/schemas/kubernetes-1.35.json",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let text = "`config/src/scheduler/{types,checks}.rs`, `scheduler/queue_tests.rs`, `*_tests.rs`, \
        `config/schemas/kubernetes-<minor>.json`, `config/src/`, `pkg/scheduler/schedule_one.go`\n\
        ```sh\n`config/src/gone.rs`\n```\n\
        `config/src/scheduler/resolved.rs`, `snapshot.rs`, `config/src/scheduler`";
    assert_eq!(
        missing_paths(text, true, &repository),
        vec!["config/src/scheduler/resolved.rs", "snapshot.rs"]
    );
    assert_eq!(
        missing_paths(text, false, &repository),
        vec!["config/src/scheduler/resolved.rs"]
    );
}
