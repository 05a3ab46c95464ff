//! What /healthz and /readyz report: rule-set load state, cache sync, the units of work this replica runs, and each rule's worker.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::RwLock;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerState {
    /// Known but not running: no unit of its kind runs on this replica.
    Standby,
    Running,
    /// Running, but its last attempt failed; retried with backoff.
    Degraded(String),
    /// Started, waiting for what it needs to be served (a kind another tool installs): says what.
    Waiting(String),
}

#[derive(Debug, Clone)]
pub struct RuleHealth {
    pub kind: &'static str,
    pub state: WorkerState,
    /// A worker's own summary (a scheduler's pending pods), shown after the state.
    pub detail: Option<String>,
}

#[derive(Debug, Default)]
struct Inner {
    rules_loaded: bool,
    /// The last reload's validation errors, kept while the previous good rule set runs.
    reload_error: Option<String>,
    /// Why the last reload, valid but refused (it would remove every rule or every ResourceDefinition rule), did
    /// not replace the running rule set.
    reload_refused: Option<String>,
    caches_synced: bool,
    /// Whether the child signing key was read (or made); why not, if it was not.
    signing_key: Option<Result<(), String>>,
    /// What runs on this replica (its units of work), once the unit loop has ticked.
    units: Option<String>,
    /// Whether this replica is a member of the installation; why not, if it is not.
    membership: Option<Result<(), String>>,
    rules: BTreeMap<String, RuleHealth>,
    /// Per rule (or `manager`), RBAC permissions this identity lacks.
    missing_permissions: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default)]
pub struct Health {
    inner: RwLock<Inner>,
}

pub struct Readiness {
    pub ready: bool,
    pub body: String,
}

impl Health {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind: keep serving it rather than failing probes.
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_rules_loaded(&self) {
        self.write().rules_loaded = true;
    }

    pub fn set_reload_error(&self, error: Option<String>) {
        self.write().reload_error = error;
    }

    pub fn set_reload_refused(&self, refusal: Option<String>) {
        self.write().reload_refused = refusal;
    }

    pub fn set_signing_key(&self, state: Result<(), String>) {
        self.write().signing_key = Some(state);
    }

    pub fn set_caches_synced(&self, synced: bool) {
        self.write().caches_synced = synced;
    }

    /// Whether this replica is a member of the installation (`Membership::ready`).
    pub fn set_membership(&self, membership: Result<(), String>) {
        self.write().membership = Some(membership);
    }

    /// What runs here, as `Owned::describe` says it.
    pub fn set_units(&self, units: String) {
        self.write().units = Some(units);
    }

    pub fn set_rule(&self, name: &str, kind: &'static str, state: WorkerState) {
        let mut inner = self.write();
        let detail = inner.rules.get(name).and_then(|r| r.detail.clone());
        inner.rules.insert(name.to_owned(), RuleHealth { kind, state, detail });
    }

    /// A worker's summary shown beside its state in `/readyz?verbose` (e.g. a scheduler's pending pods).
    pub fn set_rule_detail(&self, name: &str, detail: String) {
        if let Some(rule) = self.write().rules.get_mut(name) {
            rule.detail = Some(detail);
        }
    }

    pub fn set_missing_permissions(&self, missing: BTreeMap<String, Vec<String>>) {
        self.write().missing_permissions = missing;
    }

    pub fn remove_rule(&self, name: &str) {
        self.write().rules.remove(name);
    }

    /// Ready = rules loaded, caches synced, the child signing key read, its units of work known, a member of the installation (or shut out only because the apiserver does not answer). A failed or refused reload or a degraded rule is
    /// listed in the verbose output but does not make the replica unready: the last good rules keep running, and
    /// an unready manager would only hold up the rollout that may carry the fix.
    pub fn readiness(&self, verbose: bool) -> Readiness {
        let inner = self.read();
        let checks = [
            ("rules-loaded", inner.rules_loaded, String::new()),
            ("caches-synced", inner.caches_synced, String::new()),
            (
                "signing-key",
                matches!(inner.signing_key, Some(Ok(()))),
                match &inner.signing_key {
                    Some(Err(why)) => format!(" ({why})"),
                    _ => String::new(),
                },
            ),
            (
                "member",
                matches!(inner.membership, Some(Ok(()))),
                match &inner.membership {
                    Some(Err(why)) => format!(" ({why})"),
                    _ => String::new(),
                },
            ),
            (
                "units-known",
                inner.units.is_some(),
                inner.units.as_ref().map(|u| format!(" ({u})")).unwrap_or_default(),
            ),
        ];
        let ready = checks.iter().all(|(_, ok, _)| *ok);
        let mut body = String::new();
        if verbose {
            for (name, ok, detail) in &checks {
                let _ = writeln!(body, "[{}] {name}{detail}", if *ok { "+" } else { "-" });
            }
            if let Some(err) = &inner.reload_error {
                let _ = writeln!(body, "[!] last reload rejected; previous rules keep running:");
                for line in err.lines() {
                    let _ = writeln!(body, "    {line}");
                }
            }
            if let Some(refusal) = &inner.reload_refused {
                let _ = writeln!(body, "[!] {refusal}");
            }
            for (owner, perms) in &inner.missing_permissions {
                let _ = writeln!(body, "[!] {owner} lacks RBAC permissions: {}", perms.join("; "));
            }
            for (name, rule) in &inner.rules {
                let state = match &rule.state {
                    WorkerState::Standby => "standby".to_owned(),
                    WorkerState::Running => "running".to_owned(),
                    WorkerState::Degraded(msg) => format!("degraded: {msg}"),
                    WorkerState::Waiting(msg) => format!("waiting: {msg}"),
                };
                match &rule.detail {
                    Some(detail) => {
                        let _ = writeln!(body, "rule {name} ({}): {state}; {detail}", rule.kind);
                    }
                    None => {
                        let _ = writeln!(body, "rule {name} ({}): {state}", rule.kind);
                    }
                }
            }
            let _ = writeln!(body, "readyz check {}", if ready { "passed" } else { "failed" });
        } else {
            body.push_str(if ready { "ok" } else { "not ready" });
        }
        Readiness { ready, body }
    }
}
