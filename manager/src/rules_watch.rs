//! Hot reload: notices changes under the rules path (ConfigMap volume `..data` swaps included) by content.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ruleplane_config::{Diagnostics, LoadOptions, RuleSet};
use tokio::sync::mpsc;

/// A fingerprint of every rule file's path and bytes, over exactly the files the loader reads
/// ([`ruleplane_config::rule_files`]). Content (not mtime) because a ConfigMap update swaps a symlink to a new
/// directory whose files may carry any timestamp.
pub fn fingerprint(root: &Path) -> u64 {
    let mut hasher = DefaultHasher::new();
    match ruleplane_config::rule_files(root) {
        Ok(files) => {
            for file in files {
                file.hash(&mut hasher);
                match std::fs::read(&file) {
                    Ok(bytes) => bytes.hash(&mut hasher),
                    Err(e) => e.kind().to_string().hash(&mut hasher),
                }
            }
        }
        Err(e) => e.kind().to_string().hash(&mut hasher),
    }
    hasher.finish()
}

/// Polls `root` and sends a freshly loaded rule set (or its errors) whenever the files change.
pub fn spawn(
    root: PathBuf,
    options: LoadOptions,
    interval: Duration,
    mut last: u64,
) -> mpsc::Receiver<Result<RuleSet, Diagnostics>> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let root2 = root.clone();
            let Ok(now) = tokio::task::spawn_blocking(move || fingerprint(&root2)).await else {
                continue;
            };
            if now == last {
                continue;
            }
            last = now;
            let root2 = root.clone();
            let options = options.clone();
            let Ok(loaded) =
                tokio::task::spawn_blocking(move || ruleplane_config::load_paths_with(&[root2], &options)).await
            else {
                continue;
            };
            if tx.send(loaded).await.is_err() {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_follows_visible_content_and_ignores_dot_entries() {
        let dir = std::env::temp_dir().join(format!("ruleplane-fingerprint-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("..2026_11_22")).unwrap();
        std::fs::write(dir.join("a.yaml"), "a: 1\n").unwrap();
        let first = fingerprint(&dir);
        assert_eq!(first, fingerprint(&dir), "stable without changes");
        std::fs::write(dir.join("..2026_11_22/a.yaml"), "hidden\n").unwrap();
        assert_eq!(
            first,
            fingerprint(&dir),
            "dot entries are the atomic writer's, not rules"
        );
        std::fs::write(dir.join("a.yaml"), "a: 2\n").unwrap();
        let edited = fingerprint(&dir);
        assert_ne!(first, edited, "content change is seen even with the same size");
        std::fs::write(dir.join("b.yaml"), "").unwrap();
        assert_ne!(edited, fingerprint(&dir), "a new empty file is seen");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn policy(name: &str) -> String {
        format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: {name} }}\nspec:\n  schedulerName: {name}\n"
        )
    }

    /// The rules are reloaded whole, never patched: a removed rule file changes the fingerprint, and the set
    /// loaded after it no longer has its rule.
    #[tokio::test]
    async fn a_removed_rule_file_is_forgotten_by_the_next_reload() {
        let dir = std::env::temp_dir().join(format!("ruleplane-removed-rule-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.yaml"), policy("a")).unwrap();
        std::fs::write(dir.join("b.yaml"), policy("b")).unwrap();
        let options = LoadOptions::at_run_time(Vec::new(), ruleplane_config::KubernetesVersion::NEWEST);
        let first = ruleplane_config::load_paths_with(std::slice::from_ref(&dir), &options).expect("loads");
        assert!(first.get("a").is_some() && first.get("b").is_some());
        let mut reloads = spawn(dir.clone(), options, Duration::from_millis(10), fingerprint(&dir));

        std::fs::remove_file(dir.join("b.yaml")).unwrap();
        let reloaded = tokio::time::timeout(Duration::from_secs(10), reloads.recv())
            .await
            .expect("a reload within 10 s")
            .expect("the watch runs")
            .expect("the remaining rules load");
        assert!(reloaded.get("a").is_some());
        assert!(reloaded.get("b").is_none(), "the removed file's rule is gone");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
