//! What this binary is: its version, the git commit it was built from and the Kubernetes version it targets.

/// The workspace version (Cargo.toml).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The abbreviated commit, or "unknown" when built without git (build.rs).
pub const GIT_COMMIT: &str = env!("RULEPLANE_GIT_COMMIT");
/// The Kubernetes versions supported and tested against (`1.35-1.37`, from tests/control-plane/modules), or
/// "unknown".
pub const KUBERNETES: &str = env!("RULEPLANE_BUILD_KUBERNETES_WINDOW");

/// `0.1.0 (commit 1a2b3c4d5e6f, Kubernetes 1.35-1.37)`: what `--version` prints after the name, on one line so
/// scripts can take the version as its second word.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RULEPLANE_GIT_COMMIT"),
    ", Kubernetes ",
    env!("RULEPLANE_BUILD_KUBERNETES_WINDOW"),
    ")"
);
