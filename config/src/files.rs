//! Finding YAML files: rule files, test files, CRD manifests — the one walker of loading, tests and the reload
//! watcher.

use std::path::{Path, PathBuf};

/// The rule files under `root`: the file itself, or every `*.yaml`/`*.yml` file below a directory, in sorted
/// path order, except test files (`*.test.yaml`, run by `ruleplane test`), which may sit beside the rules.
pub fn rule_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !root.is_dir() {
        return Ok(vec![root.to_path_buf()]);
    }
    Ok(yaml_files(root)?
        .into_iter()
        .filter(|path| !is_test_file(path))
        .collect())
}

/// Every `*.yaml`/`*.yml` file below the directory `root`, in sorted path order.
///
/// Hidden entries are skipped: they include the `..data` symlink farm of ConfigMap volumes (Kubernetes'
/// atomic writer), which would otherwise load every file twice.
pub(crate) fn yaml_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Whether `path` names a test file (`*.test.yaml` / `*.test.yml`): never loaded as rules.
pub fn is_test_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with(".test.yaml") || name.ends_with(".test.yml"))
}
