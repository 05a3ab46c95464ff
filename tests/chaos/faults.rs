//! The faults the soak injects, in a seeded random order, and the control plane's side of them (`cluster.sh stop`,
//! `start`, `restart`, `compact` on the soak's own plane).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::control_plane;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// kill -9 of a replica, restarted (as a new pod: a new identity) a few seconds later.
    Kill9,
    /// SIGTERM of a replica (it must exit 0), restarted a few seconds later.
    Sigterm,
    /// SIGSTOP of a replica for longer than the lease (15 s), then SIGCONT.
    Freeze,
    /// kube-apiserver stopped for longer than the lease, then started on the same port.
    ApiserverOutage,
    /// etcd compacted at its current revision, then kube-apiserver restarted: its watch cache starts afresh, so every
    /// watch resumed from before is answered 410 Expired.
    Compaction,
    /// etcd restarted (a second or two without storage).
    EtcdRestart,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::Kill9,
        Fault::Sigterm,
        Fault::Freeze,
        Fault::ApiserverOutage,
        Fault::Compaction,
        Fault::EtcdRestart,
    ];
}

/// SplitMix64: a seeded, reproducible order of faults and updates without another dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    /// A whole number of seconds in `low..=high`.
    pub fn seconds(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_secs(low + self.next() % (high - low + 1))
    }

    /// Every fault once, in a random order.
    pub fn round(&mut self) -> Vec<Fault> {
        let mut round = Fault::ALL.to_vec();
        for i in (1..round.len()).rev() {
            round.swap(i, self.below(i + 1));
        }
        round
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("manager/ has a parent")
        .join("tests/control-plane/cluster.sh")
}

/// Runs `cluster.sh <args> --dir <the plane>` (off the runtime's threads: starting kube-apiserver takes seconds),
/// returning its last line of output or its error output.
pub async fn plane(args: &[&str]) -> Result<String, String> {
    let dir = control_plane()
        .kubeconfig
        .parent()
        .expect("the kubeconfig is in the plane's directory")
        .to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(script())
            .args(&args)
            .arg("--dir")
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run cluster.sh: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() {
            Ok(stdout.lines().last().unwrap_or_default().to_owned())
        } else {
            Err(format!(
                "cluster.sh {args:?}: {}; {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    })
    .await
    .map_err(|e| format!("cluster.sh task: {e}"))?
}
