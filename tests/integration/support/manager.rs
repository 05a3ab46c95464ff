//! Runs the real `ruleplane` binary against the test control plane and reads its HTTP endpoints.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::control_plane;

pub struct ManagerProcess {
    child: Child,
    pub identity: String,
    pub metrics: SocketAddr,
    pub health: SocketAddr,
    log: PathBuf,
}

fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr")
}

/// A fresh, empty temporary directory for one test. The directories of the last run stay (their manager logs
/// explain a failure); those of runs whose process is gone are removed the first time a run asks for one.
pub fn temp_dir(name: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(remove_dirs_of_ended_runs);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("ruleplane-it-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Removes `ruleplane-it-<pid>-…` directories whose test process no longer runs, or which are over an hour old
/// (the pid may have been reused since; a test run takes minutes).
fn remove_dirs_of_ended_runs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("ruleplane-it-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let stale = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .is_ok_and(|modified| modified.elapsed().is_ok_and(|age| age.as_secs() > 3600));
        if pid != std::process::id() && (stale || !Path::new("/proc").join(pid.to_string()).exists()) {
            // Directories, and the manager logs written next to them.
            let _ = match entry.file_type() {
                Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(entry.path()),
                _ => std::fs::remove_file(entry.path()),
            };
        }
    }
}

impl ManagerProcess {
    /// Starts `ruleplane run` on `rules`, electing on Lease `ruleplane` in `lease_namespace`.
    pub fn start(rules: &Path, lease_namespace: &str, identity: &str, extra: &[&str]) -> Self {
        Self::start_as(&control_plane().kubeconfig, rules, lease_namespace, identity, extra)
    }

    /// Like [`ManagerProcess::start`], authenticating with `kubeconfig`.
    pub fn start_as(kubeconfig: &Path, rules: &Path, lease_namespace: &str, identity: &str, extra: &[&str]) -> Self {
        let binary = Path::new(env!("CARGO_BIN_EXE_ruleplane"));
        Self::start_binary(binary, kubeconfig, rules, lease_namespace, identity, extra)
    }

    /// Like [`ManagerProcess::start_as`], running another build of `ruleplane` (a before/after measurement).
    pub fn start_binary(
        binary: &Path,
        kubeconfig: &Path,
        rules: &Path,
        lease_namespace: &str,
        identity: &str,
        extra: &[&str],
    ) -> Self {
        let metrics = free_port();
        let health = free_port();
        let log = rules.with_file_name(format!(
            "{}-{identity}.log",
            rules.file_name().and_then(|n| n.to_str()).unwrap_or("manager")
        ));
        let log_file = std::fs::File::create(&log).expect("create manager log");
        let child = Command::new(binary)
            .arg("run")
            .arg("--rules")
            .arg(rules)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--metrics-bind-address", &metrics.to_string()])
            .args(["--health-probe-bind-address", &health.to_string()])
            .args(["--leader-election-namespace", lease_namespace])
            .args(["--identity", identity])
            .args(extra)
            .env("RUST_LOG", "info,ruleplane=debug")
            // As the Helm chart does through the downward API; Events without a better object name this Pod.
            .env("POD_NAME", identity)
            .stdout(Stdio::from(log_file.try_clone().expect("clone log handle")))
            .stderr(Stdio::from(log_file))
            .spawn()
            .expect("start ruleplane");
        ManagerProcess {
            child,
            identity: identity.to_owned(),
            metrics,
            health,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for the exit code.
    pub fn sigterm(&mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        self.child.wait().expect("wait for manager")
    }

    pub async fn readyz(&self) -> Option<(u16, String)> {
        http_get(self.health, "/readyz?verbose").await
    }

    /// Waits until /readyz answers 200, failing with the last answer seen.
    pub async fn wait_ready(&self, timeout: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last = None;
        while tokio::time::Instant::now() < deadline {
            match self.readyz().await {
                Some((200, _)) => return,
                other => last = other,
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!(
            "{} not ready after {timeout:?}; last /readyz answer: {last:?}",
            self.identity
        );
    }

    pub async fn metrics_text(&self) -> Option<String> {
        http_get(self.metrics, "/metrics").await.map(|(_, body)| body)
    }

    /// The value of an unlabelled (or exactly labelled) sample, e.g. `ruleplane_leader`.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let text = self.metrics_text().await?;
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| l.strip_prefix(sample).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
    }
}

impl ManagerProcess {
    /// Whether this replica runs `unit` (`reconciler-shard-3`, `resource-definitions`, `schedulers`) now.
    pub async fn holds(&self, unit: &str) -> Option<bool> {
        let sample = format!("ruleplane_unit_owned{{unit=\"{unit}\"}}");
        Some(self.metric(&sample).await? == 1.0)
    }

    /// The Reconciler shards this replica runs now (its metrics are served locally, never through a proxy).
    pub async fn shards(&self) -> std::collections::BTreeSet<u32> {
        let text = self.metrics_text().await.unwrap_or_default();
        text.lines()
            .filter(|l| l.trim_end().ends_with(" 1"))
            .filter_map(|l| l.strip_prefix("ruleplane_unit_owned{unit=\"reconciler-shard-"))
            .filter_map(|rest| rest.split('"').next()?.parse().ok())
            .collect()
    }

    /// How many units this replica runs now.
    pub async fn units_held(&self) -> Option<usize> {
        let text = self.metrics_text().await?;
        Some(
            text.lines()
                .filter(|l| l.starts_with("ruleplane_unit_owned{"))
                .filter(|l| l.trim_end().ends_with(" 1"))
                .count(),
        )
    }
}

impl Drop for ManagerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- ruleplane ({}) log ----\n{}", self.identity, self.logs());
        }
    }
}

/// A minimal HTTP/1.0 GET: enough for the manager's text endpoints without another client dependency.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}
