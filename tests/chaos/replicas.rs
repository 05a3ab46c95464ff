//! The soak's three replicas: slots `a`, `b`, `c`, each running one `ruleplane run` at a time. A restarted replica
//! comes back under a new identity (`soak-a-2`), as a Deployment's new pod would, so the audit log tells its
//! incarnations apart. What an incarnation leaves (panics in its log, its peak resident memory) is kept when it goes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::control_plane;
use crate::support::manager::ManagerProcess;

/// Units of work: 32 Reconciler shards, `resource-definitions` and `schedulers`.
pub const UNITS: usize = 34;
const SLOTS: [&str; 3] = ["a", "b", "c"];

/// One incarnation, once it has gone (or at the end of the soak).
#[derive(Debug)]
pub struct Incarnation {
    pub identity: String,
    /// `VmHWM` from /proc: the peak resident set, in KiB.
    pub peak_rss_kib: Option<u64>,
    /// Lines of its log that report a panic.
    pub panics: Vec<String>,
    /// Lines of its log that mention an expired watch (410, `too old resource version`), for the summary.
    pub expired_watches: usize,
}

pub struct Slot {
    incarnation: u32,
    process: Option<ManagerProcess>,
}

pub struct Replicas {
    rules: PathBuf,
    namespace: String,
    slots: Vec<Slot>,
    pub gone: Vec<Incarnation>,
}

impl Replicas {
    pub fn start(rules: &Path, namespace: &str) -> Replicas {
        let mut replicas = Replicas {
            rules: rules.to_path_buf(),
            namespace: namespace.to_owned(),
            slots: SLOTS
                .iter()
                .map(|_| Slot {
                    incarnation: 0,
                    process: None,
                })
                .collect(),
            gone: Vec::new(),
        };
        for slot in 0..SLOTS.len() {
            replicas.restart(slot);
        }
        replicas
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn identity(&self, slot: usize) -> String {
        format!("soak-{}-{}", SLOTS[slot], self.slots[slot].incarnation)
    }

    pub fn process(&self, slot: usize) -> Option<&ManagerProcess> {
        self.slots[slot].process.as_ref()
    }

    /// The replicas running now.
    pub fn running(&self) -> Vec<&ManagerProcess> {
        self.slots.iter().filter_map(|s| s.process.as_ref()).collect()
    }

    /// Starts the slot's next incarnation (the slot must be empty).
    pub fn restart(&mut self, slot: usize) {
        assert!(self.slots[slot].process.is_none(), "slot {slot} still runs");
        self.slots[slot].incarnation += 1;
        let identity = self.identity(slot);
        // `RULEPLANE_SOAK_BINARY`: another build of `ruleplane` under the same faults (an older commit, to show what
        // the soak catches).
        let binary = std::env::var_os("RULEPLANE_SOAK_BINARY")
            .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ruleplane")), PathBuf::from);
        let kubeconfig = &control_plane().kubeconfig;
        self.slots[slot].process = Some(ManagerProcess::start_binary(
            &binary,
            kubeconfig,
            &self.rules,
            &self.namespace,
            &identity,
            &[],
        ));
    }

    /// kill -9.
    pub fn kill9(&mut self, slot: usize) {
        let record = self.record(slot);
        if let Some(mut process) = self.slots[slot].process.take() {
            process.kill9();
        }
        self.gone.push(record);
    }

    /// SIGTERM: the exit status.
    pub fn sigterm(&mut self, slot: usize) -> Option<std::process::ExitStatus> {
        let record = self.record(slot);
        let status = self.slots[slot].process.take().map(|mut process| process.sigterm());
        let log = self.log_of(&record.identity);
        self.gone.push(Incarnation {
            panics: panics(&log),
            expired_watches: expired_watches(&log),
            ..record
        });
        status
    }

    /// SIGSTOP (`stop`) or SIGCONT.
    pub fn signal(&self, slot: usize, signal: &str) {
        let pid = self.process(slot).expect("a running replica").pid();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid} failed");
    }

    /// What every incarnation, gone or running, left.
    pub fn incarnations(&self) -> Vec<Incarnation> {
        let running = (0..self.slots.len())
            .filter(|slot| self.slots[*slot].process.is_some())
            .map(|slot| self.record(slot));
        self.gone
            .iter()
            .map(|i| Incarnation {
                identity: i.identity.clone(),
                peak_rss_kib: i.peak_rss_kib,
                panics: i.panics.clone(),
                expired_watches: i.expired_watches,
            })
            .chain(running)
            .collect()
    }

    fn record(&self, slot: usize) -> Incarnation {
        let identity = self.identity(slot);
        let process = self.process(slot);
        let log = process.map(ManagerProcess::logs).unwrap_or_default();
        Incarnation {
            peak_rss_kib: process.and_then(|p| peak_rss_kib(p.pid())),
            panics: panics(&log),
            expired_watches: expired_watches(&log),
            identity,
        }
    }

    /// The log ManagerProcess writes next to the rules directory, read after its process is gone.
    fn log_of(&self, identity: &str) -> String {
        let name = self.rules.file_name().and_then(|n| n.to_str()).unwrap_or("manager");
        std::fs::read_to_string(self.rules.with_file_name(format!("{name}-{identity}.log"))).unwrap_or_default()
    }
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn panics(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("panicked"))
        .map(|l| l.chars().take(300).collect())
        .collect()
}

fn expired_watches(log: &str) -> usize {
    log.lines()
        .filter(|l| {
            ["too old resource version", "Expired", "410 Gone", "code: 410"]
                .iter()
                .any(|sign| l.contains(sign))
        })
        .count()
}

/// A metric read that gives up after 2 s: a frozen replica accepts the connection and never answers.
pub async fn units_held(replica: &ManagerProcess) -> Option<usize> {
    tokio::time::timeout(Duration::from_secs(2), replica.units_held())
        .await
        .ok()
        .flatten()
}

pub async fn members(replica: &ManagerProcess) -> Option<f64> {
    tokio::time::timeout(Duration::from_secs(2), replica.metric("ruleplane_members"))
        .await
        .ok()
        .flatten()
}

/// Units held by each of `replicas` now (`None`: no answer).
pub async fn holdings(replicas: &[&ManagerProcess]) -> Vec<Option<usize>> {
    let mut held = Vec::new();
    for replica in replicas {
        held.push(units_held(replica).await);
    }
    held
}

/// Whether `held` is every unit, shared fairly (34 units over three: 12/11/11).
pub fn balanced(held: &[Option<usize>]) -> bool {
    let Some(held) = held.iter().copied().collect::<Option<Vec<usize>>>() else {
        return false;
    };
    let fair = UNITS / held.len().max(1);
    held.iter().sum::<usize>() == UNITS && held.iter().all(|h| (fair..=fair + 1).contains(h))
}
