//! Command-line interface: every flag can also come from a `RULEPLANE_*` environment variable.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "ruleplane",
    version = crate::build_info::LONG_VERSION,
    about = "CRDs, reconcilers and schedulers for Kubernetes, from YAML rules"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, env = "RULEPLANE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the manager: load rules and run one worker per rule against the cluster.
    Run(Box<RunArgs>),
    /// Validate rule files offline (exit 0 valid, 1 invalid, 2 usage).
    Validate(ValidateArgs),
    /// Render the children and status a Reconciler rule produces for one object, offline.
    Render(RenderArgs),
    /// Print the CustomResourceDefinitions that ResourceDefinition rules generate (for GitOps review).
    Crds(CrdsArgs),
    /// Print the JSON Schema (draft-07) of the rule language.
    Schema,
    /// Print the ClusterRole and Role the manager needs for these rules (the same list `run` checks).
    Rbac(RbacArgs),
    /// Place pods on nodes with a SchedulerPolicy, offline, exactly as the scheduler would (exit 0 when the run
    /// completed, whether or not every pod fit; 1 invalid input; 2 usage).
    Simulate(SimulateArgs),
    /// Convert a kube-scheduler `KubeSchedulerConfiguration` (v1) into SchedulerPolicy rules, one per profile,
    /// with comments on what does not carry over.
    ConvertSchedulerConfig(ConvertSchedulerConfigArgs),
    /// Run the RuleTest cases in `*.test.yaml` files against the rules beside them, offline (exit 0 all passed,
    /// 1 a case failed or the rules/tests are invalid, 2 usage).
    Test(TestArgs),
    /// Show what these rules would do to the cluster's parents — children created, changed (with a diff),
    /// pruned, status changed — without writing anything (exit 0 no changes, 1 changes, 2 errors, as `kubectl diff`).
    Diff(DiffArgs),
    /// Print a shell completion script on standard output (bash, zsh, fish, powershell, elvish); see
    /// docs/quickstart.md for where each shell reads it from.
    Completion(CompletionArgs),
    /// Print the version, the git commit it was built from and the Kubernetes version it targets.
    Version(VersionArgs),
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Output format (`json`: `{version, gitCommit, kubernetes}`).
    #[arg(long, short, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Rule file or directory (recursive, *.yaml/*.yml).
    #[arg(long, env = "RULEPLANE_RULES")]
    pub rules: PathBuf,
    /// Kubeconfig file; defaults to $KUBECONFIG, ~/.kube/config, then in-cluster configuration.
    #[arg(long, env = "RULEPLANE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Address for /metrics (`:8080` = all interfaces, `0` = disabled).
    #[arg(long, env = "RULEPLANE_METRICS_BIND_ADDRESS", default_value = ":8080")]
    pub metrics_bind_address: String,
    /// Address for /healthz and /readyz (`:8081` = all interfaces, `0` = disabled).
    #[arg(long, env = "RULEPLANE_HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Share the work between replicas through Leases: each unit (a rule kind's workers, a shard of Reconciler
    /// parents) runs where its Lease is held. Disable only for a single replica, which then runs everything.
    #[arg(long, env = "RULEPLANE_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the Leases (members and units); defaults to the pod's namespace in a cluster, else `default`.
    #[arg(long, env = "RULEPLANE_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name prefix of the Leases (two installations in one namespace need different ones).
    #[arg(long, env = "RULEPLANE_LEADER_ELECTION_ID", default_value = "ruleplane")]
    pub leader_election_id: String,
    /// How many shards Reconciler parents are split into for replicas to share (each a Lease; see
    /// docs/operations.md). Every replica must run with the same number.
    #[arg(long, env = "RULEPLANE_SHARDS", default_value_t = ruleplane_config::sharding::DEFAULT_SHARDS, value_parser = parse_shards)]
    pub shards: u32,
    /// This replica's identity in the Leases; defaults to $POD_NAME, else hostname plus a random suffix.
    #[arg(long, env = "RULEPLANE_IDENTITY")]
    pub identity: Option<String>,
    /// How long a Lease is valid without renewal (kube-scheduler's default).
    #[arg(long, env = "RULEPLANE_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// A replica that could not renew a unit's Lease for this long stops that unit's work.
    #[arg(long, env = "RULEPLANE_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew the Leases.
    #[arg(long, env = "RULEPLANE_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,
    /// How often the rules path is checked for changes (ConfigMap volume updates included).
    #[arg(long, env = "RULEPLANE_RELOAD_INTERVAL", default_value = "500ms", value_parser = parse_duration)]
    pub reload_interval: Duration,
    /// Let a reload remove every rule, or every ResourceDefinition rule (refused by default: such a set is more
    /// often a broken ConfigMap or GitOps source than an intent, and removed rules' deletion policies would run).
    #[arg(long, env = "RULEPLANE_ALLOW_EMPTY_RULE_SET")]
    pub allow_empty_rule_set: bool,
    /// Requests per second to the apiserver, sustained (token bucket); 0 = no limit.
    #[arg(long, env = "RULEPLANE_KUBE_API_QPS", default_value_t = 0.0)]
    pub kube_api_qps: f64,
    /// Requests the client may send at once above the sustained rate (the bucket's size).
    #[arg(long, env = "RULEPLANE_KUBE_API_BURST", default_value_t = 100)]
    pub kube_api_burst: u32,
    /// Requests in flight at once, watches aside (also the most connections they open); 0 = no limit.
    #[arg(long, env = "RULEPLANE_KUBE_API_MAX_IN_FLIGHT", default_value_t = 100)]
    pub kube_api_max_in_flight: usize,
    /// Threads running the manager's tasks; 0 = one per CPU the process may use.
    #[arg(long, env = "RULEPLANE_WORKER_THREADS", default_value_t = 0)]
    pub worker_threads: usize,
    // CRD manifests among the rules (vendored for the offline commands) are skipped, not loaded as rules. The
    // manager does not take kinds from them: it asks the apiserver how each kind is served.
    #[command(flatten)]
    pub installed: InstalledCrds,
}

/// Parses `500ms`, `2s`, `10m`, `1h` (Kubernetes flag style).
/// A shard count within the bounds the protocol allows.
pub fn parse_shards(s: &str) -> Result<u32, String> {
    let count: u32 = s.trim().parse().map_err(|_| format!("`{s}` is not a whole number"))?;
    ruleplane_config::sharding::check_shard_count(count).map_err(|e| e.to_string())
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 500ms, 15s, 10m or 1h"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("`{s}`: unknown unit `{unit}` (use ms, s, m or h)")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// CRD manifests of kinds other tools install (`--crds`), for the commands that must know every kind offline.
/// `ruleplane run` has no such flag: there the apiserver says how a kind is served.
#[derive(Debug, Args)]
pub struct InstalledCrds {
    /// CRD manifests of kinds another tool installs (files or directories of multi-document YAML, e.g. vendored
    /// from its chart; other documents are skipped): their kinds are known, never written. Repeatable; the
    /// variable is a path list (`a:b`).
    #[arg(long = "crds", value_name = "PATH", env = "RULEPLANE_CRDS", value_delimiter = ':')]
    pub crds: Vec<PathBuf>,
}

/// The Kubernetes version an offline command checks for (`ruleplane run` and `diff` use the server's own).
#[derive(Debug, Args)]
pub struct TargetVersion {
    /// The Kubernetes version to check for: its built-in kinds' fields and its kube-scheduler's behaviour
    /// (`1.35`, `1.36`, `1.37`, or a patch release such as `1.36.3`; default the newest supported).
    #[arg(long = "kubernetes-version", value_name = "VERSION", env = "RULEPLANE_KUBERNETES_VERSION",
          default_value_t = ruleplane_config::KubernetesVersion::NEWEST)]
    pub kubernetes_version: ruleplane_config::KubernetesVersion,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Rule files or directories.
    #[arg(required = true, env = "RULEPLANE_RULES", value_delimiter = ',')]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub target: TargetVersion,
    #[command(flatten)]
    pub installed: InstalledCrds,
    /// Output format.
    #[arg(long, short, env = "RULEPLANE_OUTPUT", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Rule file or directory.
    #[arg(long, env = "RULEPLANE_RULES")]
    pub rules: PathBuf,
    /// The parent object (YAML or JSON) to render for.
    #[arg(long, env = "RULEPLANE_OBJECT")]
    pub object: PathBuf,
    /// Files with the objects lookups resolve to (YAML or JSON, one or more documents each).
    #[arg(long = "lookup", env = "RULEPLANE_LOOKUPS", value_delimiter = ',')]
    pub lookups: Vec<PathBuf>,
    /// Only this Reconciler rule (default: every rule whose `for` matches the object's kind).
    #[arg(long, env = "RULEPLANE_RULE")]
    pub rule: Option<String>,
    #[command(flatten)]
    pub target: TargetVersion,
    #[command(flatten)]
    pub installed: InstalledCrds,
    /// Output format: YAML documents, or a JSON array of them.
    #[arg(long, short, value_enum, default_value_t = DocumentFormat::Yaml)]
    pub output: DocumentFormat,
}

#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Rule file or directory.
    #[arg(long, env = "RULEPLANE_RULES")]
    pub rules: PathBuf,
    /// Name of the ClusterRole and Role.
    #[arg(long, env = "RULEPLANE_RBAC_NAME", default_value = "ruleplane")]
    pub name: String,
    /// Namespace of the Leases (where the Role goes).
    #[arg(long, env = "RULEPLANE_LEADER_ELECTION_NAMESPACE", default_value = "default")]
    pub leader_election_namespace: String,
    /// `manifests`: a ClusterRole and Role; `helm-values`: the chart's `rbac.customResourceDefinitions` and
    /// `rbac.extraRules` for these rules; `json`: the ClusterRole and Role as a JSON array.
    #[arg(long, short, value_enum, default_value_t = RbacOutput::Manifests)]
    pub output: RbacOutput,
    // Without the CRD manifest of a kind another tool installs, its permissions cannot be derived: they are
    // left out, listed on standard error, and the exit code is 1.
    #[command(flatten)]
    pub installed: InstalledCrds,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RbacOutput {
    Manifests,
    HelmValues,
    Json,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Rule file or directory holding the SchedulerPolicy.
    #[arg(long, env = "RULEPLANE_POLICY")]
    pub policy: PathBuf,
    /// Which policy, by `schedulerName` or rule name (needed when the rules hold more than one).
    #[arg(long, env = "RULEPLANE_SCHEDULER")]
    pub scheduler: Option<String>,
    /// Nodes: YAML or JSON, several documents, a `List` or a `NodeList` (`kubectl get nodes -o yaml`).
    #[arg(long, env = "RULEPLANE_NODES")]
    pub nodes: PathBuf,
    /// Pods to place, in queue order (priority, then file order); each placement is seen by the next.
    #[arg(long, env = "RULEPLANE_PODS")]
    pub pods: PathBuf,
    /// Pods already running: each counts on the node its `spec.nodeName` names (pods without one are ignored).
    #[arg(long, env = "RULEPLANE_EXISTING")]
    pub existing: Option<PathBuf>,
    /// PodDisruptionBudgets (with their `status`) that preemption respects when it picks victims.
    #[arg(long, env = "RULEPLANE_PDBS")]
    pub pdbs: Option<PathBuf>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities and
    /// VolumeAttachments (mixed), which the volume plugins read: with them pods with claims are evaluated.
    #[arg(long, env = "RULEPLANE_STORAGE")]
    pub storage: Option<PathBuf>,
    /// Workloads (`scheduling.k8s.io/v1alpha1`) and PodGroups (`scheduling.x-k8s.io/v1alpha1`), mixed: the pods
    /// that name their pod groups are placed all or nothing, as the scheduler worker places gangs.
    #[arg(long, env = "RULEPLANE_GANGS")]
    pub gangs: Option<PathBuf>,
    /// Every node's filter verdicts and score breakdown for every pod.
    #[arg(long)]
    pub explain: bool,
    /// Seed of the tie-breaking among equally scored nodes (default: random, printed so a run can be repeated).
    #[arg(long, env = "RULEPLANE_SEED")]
    pub seed: Option<u64>,
    /// Output format (`json` is a stable contract, see docs/scheduler.md).
    #[arg(long, short, env = "RULEPLANE_OUTPUT", value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    // The policy's rule set may hold Reconcilers on kinds other tools install.
    #[command(flatten)]
    pub target: TargetVersion,
    #[command(flatten)]
    pub installed: InstalledCrds,
}

#[derive(Debug, Args)]
pub struct ConvertSchedulerConfigArgs {
    /// The KubeSchedulerConfiguration file (YAML or JSON).
    pub config: PathBuf,
    /// Give a profile's scheduler another name, `OLD=NEW` (a policy cannot be called `default-scheduler`).
    #[arg(long = "rename", value_parser = parse_rename)]
    pub renames: Vec<(String, String)>,
    /// Output format: YAML with each profile's notes as comments, or a JSON array of `{notes, rule}`.
    #[arg(long, short, value_enum, default_value_t = DocumentFormat::Yaml)]
    pub output: DocumentFormat,
}

fn parse_rename(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((old, new)) if !old.is_empty() && !new.is_empty() => Ok((old.to_string(), new.to_string())),
        _ => Err(format!("`{s}` is not OLD=NEW")),
    }
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Rule file or directory: the rule set as it would be after the change.
    #[arg(long, env = "RULEPLANE_RULES")]
    pub rules: PathBuf,
    /// Kubeconfig file; defaults to $KUBECONFIG, ~/.kube/config, then in-cluster configuration.
    #[arg(long, env = "RULEPLANE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Output format (`json`: `{changes, totals, parents, notServed}`, see docs/testing.md).
    #[arg(long, short, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// How many shards the manager splits Reconciler parents into (its `--shards`): children carry their
    /// parent's shard as a label, so the diff must count as the manager does.
    #[arg(long, env = "RULEPLANE_SHARDS", default_value_t = ruleplane_config::sharding::DEFAULT_SHARDS, value_parser = parse_shards)]
    pub shards: u32,
    /// Namespace of the manager's Lease (the Helm release's namespace): its child signing key (Secret
    /// `ruleplane-child-signing-key`) is read from there to tell its children from look-alikes, as the manager
    /// does. Unreadable: signatures are not checked, and the report says so. Defaults as `run` does outside a
    /// cluster.
    #[arg(long, env = "RULEPLANE_MANAGER_NAMESPACE", default_value = "default")]
    pub manager_namespace: String,
    // Kinds none of these manifests, the rule set nor the built-ins know are asked of the cluster.
    #[command(flatten)]
    pub installed: InstalledCrds,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Files or directories: `*.test.yaml` files are tests, every other `*.yaml`/`*.yml` file is a rule file.
    #[arg(required = true, env = "RULEPLANE_TEST_PATHS", value_delimiter = ',')]
    pub paths: Vec<PathBuf>,
    /// `text` for people, `junit` (JUnit XML on standard output) for CI systems, `json` for tools.
    #[arg(long, short, env = "RULEPLANE_OUTPUT", value_enum, default_value_t = TestOutput::Text)]
    pub output: TestOutput,
    #[command(flatten)]
    pub target: TargetVersion,
    #[command(flatten)]
    pub installed: InstalledCrds,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestOutput {
    Text,
    Junit,
    Json,
}

/// How commands that print Kubernetes objects or rules print them: YAML documents, or one JSON array of them.
/// Flags of this type (and the `--output` of `diff` and `version`) take no `RULEPLANE_OUTPUT`: that variable is
/// set for `validate`/`test`/`simulate` in CI jobs, often to `junit` or `text`, which would break these commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DocumentFormat {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Rule file or directory.
    #[arg(long, env = "RULEPLANE_RULES")]
    pub rules: PathBuf,
    // Only to load rules that use them: these CRDs are another tool's and are never printed.
    #[command(flatten)]
    pub installed: InstalledCrds,
    /// Output format: YAML documents, or a JSON array of them.
    #[arg(long, short, value_enum, default_value_t = DocumentFormat::Yaml)]
    pub output: DocumentFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_use_kubernetes_flag_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("1d").unwrap_err().contains("unknown unit `d`"));
        assert!(parse_duration("fast").unwrap_err().contains("is not a duration"));
    }

    #[test]
    fn every_run_flag_has_an_environment_variable() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("run subcommand");
        for arg in run.get_arguments() {
            if arg.get_id() == "help" || arg.get_id() == "log_format" {
                continue;
            }
            assert!(
                arg.get_env().is_some(),
                "--{} has no RULEPLANE_* variable",
                arg.get_id()
            );
        }
    }
}
