//! Build facts for `--version`, the startup log and `ruleplane_build_info`: the git commit and the Kubernetes version targeted.

use std::path::Path;
use std::process::Command;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let repo = Path::new(&manifest_dir).join("..");

    // The Kubernetes versions the project supports and is tested against: one local control plane module per
    // version (tests/control-plane/modules/v1.MINOR.PATCH), said as `1.35-1.37`. A source tree without tests/ (a
    // packaged crate) says "unknown" rather than failing the build.
    let modules = repo.join("tests/control-plane/modules");
    println!("cargo:rerun-if-changed={}", modules.display());
    let kubernetes = supported_window(&modules).unwrap_or_else(|| "unknown".into());
    // Not RULEPLANE_KUBERNETES_VERSION: cargo also sets build facts in the environment of `cargo test`/`cargo run`,
    // where that name is the offline commands' --kubernetes-version.
    println!("cargo:rustc-env=RULEPLANE_BUILD_KUBERNETES_WINDOW={kubernetes}");

    // A build from a tarball has no git: RULEPLANE_GIT_COMMIT can say which commit it is, else "unknown".
    println!("cargo:rerun-if-env-changed=RULEPLANE_GIT_COMMIT");
    // Only this repository's own commit: sources unpacked inside another repository (vendored) are not its HEAD.
    let own_repository = git(&repo, &["rev-parse", "--show-toplevel"])
        .and_then(|top| std::fs::canonicalize(top).ok())
        .is_some_and(|top| std::fs::canonicalize(&repo).is_ok_and(|repo| repo == top));
    let commit = std::env::var("RULEPLANE_GIT_COMMIT")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            own_repository
                .then(|| git(&repo, &["rev-parse", "--short=12", "HEAD"]))
                .flatten()
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RULEPLANE_GIT_COMMIT={commit}");

    // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it points to (a commit) and packed-refs. Only
    // files that exist are named: cargo treats a missing one as always changed, which would rebuild every time.
    // `--git-path` resolves them in a worktree too, where .git is a file and refs live in the common directory.
    let mut watched = vec![git(&repo, &["rev-parse", "--git-path", "HEAD"])];
    watched.push(git(&repo, &["rev-parse", "--git-path", "packed-refs"]));
    if let Some(branch) = git(&repo, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&repo, &["rev-parse", "--git-path", &branch]));
    }
    for path in watched.into_iter().flatten() {
        let path = if Path::new(&path).is_absolute() {
            path.into()
        } else {
            repo.join(path)
        };
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// A git command's trimmed output in `dir`, or None when git is absent or `dir` is not in a repository.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// `1.35-1.37` from the module directories `v1.35.4`, `v1.36.3`, `v1.37.2`.
fn supported_window(modules: &Path) -> Option<String> {
    let mut minors: Vec<u32> = std::fs::read_dir(modules)
        .ok()?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("v1.")?.split('.').next()?.parse().ok()
        })
        .collect();
    minors.sort_unstable();
    Some(format!("1.{}-1.{}", minors.first()?, minors.last()?))
}
