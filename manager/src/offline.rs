//! Offline commands (validate, render, simulate, test, crds, rbac, schema, completion, version): no cluster needed.

use std::path::Path;
use std::process::ExitCode;

use ruleplane_config::scheduler::gang::WorkloadApi;
use ruleplane_config::simulate::{self, Simulation};
use ruleplane_config::{Diagnostics, LoadOptions, Reconciler, RuleSet, SchedulerPolicy, UnknownKinds};
use serde_json::Value;

use crate::cli::{
    CompletionArgs, ConvertSchedulerConfigArgs, CrdsArgs, DocumentFormat, InstalledCrds, OutputFormat, RbacArgs,
    RbacOutput, RenderArgs, SimulateArgs, TargetVersion, TestArgs, TestOutput, ValidateArgs, VersionArgs,
};

/// Exit code for invalid input (rules, objects); clap already uses 2 for usage errors.
const INVALID: u8 = 1;

/// What the offline commands load rules with: the kinds of the `--crds` manifests known, every other unknown
/// kind an error (`UnknownKinds::Refuse`, whose message names `--crds`).
pub fn load_options(installed: &InstalledCrds, target: &TargetVersion) -> Result<LoadOptions, Diagnostics> {
    Ok(LoadOptions {
        installed: ruleplane_config::load_crd_paths(&installed.crds)?,
        unknown_kinds: UnknownKinds::Refuse,
        // The manifests may sit among the rules (`examples/crds/`): they are not rules.
        not_rules: installed.crds.clone(),
        kubernetes_version: target.kubernetes_version,
    })
}

pub fn validate(args: &ValidateArgs) -> ExitCode {
    // Rules that load are also rendered for a synthetic parent each, their children checked against their kinds'
    // schemas: a child the apiserver would reject is as invalid as a rule that does not load.
    let result = load_options(&args.installed, &args.target)
        .and_then(|options| ruleplane_config::load_paths_with(&args.paths, &options))
        .and_then(|rules| {
            let schemas = ruleplane_config::object_schema::KindSchemas::of_rule_set(&rules);
            let problems = ruleplane_config::synthetic_parent_diagnostics(&rules, &schemas);
            if problems.is_empty() {
                Ok(rules)
            } else {
                Err(ruleplane_config::Diagnostics(problems))
            }
        });
    match args.output {
        OutputFormat::Json => {
            let report = match &result {
                Ok(rules) => serde_json::json!({
                    "valid": true,
                    "rules": rules.rules().iter().map(|r| serde_json::json!({
                        "name": r.name(), "kind": format!("{:?}", r.kind()), "source": r.source().to_string(),
                    })).collect::<Vec<_>>(),
                    "errors": [],
                    "warnings": rules.warnings(),
                }),
                Err(d) => serde_json::json!({"valid": false, "rules": [], "errors": d, "warnings": []}),
            };
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
        }
        OutputFormat::Text => match &result {
            Ok(rules) => {
                print_warnings(rules);
                println!("{} rule(s) valid", rules.rules().len());
            }
            Err(d) => eprintln!("{d}"),
        },
    }
    if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(INVALID)
    }
}

/// Reads one or more YAML/JSON documents (JSON is YAML) from `path`.
fn read_objects(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Loads the rules at `path`; its warnings (e.g. CEL rules not evaluated offline) go to standard error, as
/// `validate` prints them, so `render` and `simulate` never hide what they did not check.
fn load_one(path: &Path, installed: &InstalledCrds, target: &TargetVersion) -> Result<RuleSet, ExitCode> {
    let rules = load_options(installed, target)
        .and_then(|options| ruleplane_config::load_paths_with(&[path.to_path_buf()], &options))
        .map_err(|d| {
            eprintln!("{d}");
            ExitCode::from(INVALID)
        })?;
    print_warnings(&rules);
    Ok(rules)
}

fn print_warnings(rules: &RuleSet) {
    for warning in rules.warnings() {
        eprintln!("{warning}");
    }
}

fn field<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(obj, |v, k| v.get(k)).and_then(Value::as_str)
}

pub fn render(args: &RenderArgs) -> ExitCode {
    let rules = match load_one(&args.rules, &args.installed, &args.target) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let parent = match read_objects(&args.object).map(|mut d| (d.len(), d.pop())) {
        Ok((1, Some(obj))) => obj,
        Ok((n, _)) => {
            eprintln!("{}: expected exactly one object, found {n}", args.object.display());
            return ExitCode::from(INVALID);
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(INVALID);
        }
    };
    let mut available = Vec::new();
    for file in &args.lookups {
        match read_objects(file) {
            Ok(objs) => available.extend(objs),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(INVALID);
            }
        }
    }
    let matching: Vec<&Reconciler> = rules
        .reconcilers()
        .filter(|r| match &args.rule {
            Some(name) => r.name() == name,
            None => {
                field(&parent, &["apiVersion"]) == Some(r.spec.watched.api_version.as_str())
                    && field(&parent, &["kind"]) == Some(r.spec.watched.kind.as_str())
            }
        })
        .collect();
    if matching.is_empty() {
        eprintln!(
            "no Reconciler rule in {} {}",
            args.rules.display(),
            match &args.rule {
                Some(name) => format!("is named `{name}`"),
                None => format!(
                    "watches {} {}",
                    field(&parent, &["apiVersion"]).unwrap_or("?"),
                    field(&parent, &["kind"]).unwrap_or("?")
                ),
            }
        );
        return ExitCode::from(INVALID);
    }
    let mut docs = Vec::new();
    let schemas = ruleplane_config::object_schema::KindSchemas::of_rule_set(&rules);
    // The parent as the apiserver would serve it: its kind's schema defaults filled in.
    let mut parent = parent;
    schemas.apply_defaults(&mut parent);
    let mut schema_problems = Vec::new();
    for rule in matching {
        // The worker's own plan for this parent with no child existing yet: the children as they would be
        // applied (labels, parent annotation, owner reference).
        let planned = ruleplane_config::gather_lookups_offline(rule, &parent, &available).and_then(|lookups| {
            let targets = ruleplane_config::offline_patch_targets(rule, &parent, &available);
            ruleplane_config::plan_offline(rule, &parent, &lookups, &[], &targets).map(|plan| (plan, lookups))
        });
        match planned {
            Ok((plan, lookups)) => {
                // The worker writes the children and reports the patch; `render` says it failed.
                if let Some(failure) = plan.patches.failures.first() {
                    eprintln!("{failure}");
                    return ExitCode::from(INVALID);
                }
                if !plan.held.is_empty() {
                    eprintln!(
                        "rule `{}`: nothing rendered: lookup {} (`whenMissing: Wait`) finds nothing; give its object \
                         with --lookup",
                        rule.name(),
                        plan.held.join(", ")
                    );
                }
                schema_problems.extend(ruleplane_config::schema_diagnostics(rule, &plan.desired, &schemas));
                // The rule's own conditions as the worker decides them over these children (Ready and Synced
                // tell of the cluster: `test` and `diff` show them).
                let own = ruleplane_config::author_conditions(rule, &parent, &plan.children_after(rule), &lookups).0;
                docs.extend(plan.desired);
                let mut status = plan.projected_status.clone();
                if !own.is_empty() {
                    let conditions = own.iter().map(|condition| {
                        serde_json::json!({
                            "type": condition.type_, "status": condition.status.as_str(),
                            "reason": condition.reason, "message": condition.message,
                        })
                    });
                    status.insert("conditions".into(), conditions.collect());
                }
                if !status.is_empty() {
                    docs.push(serde_json::json!({ "status": status }));
                }
                // Patches of the `--lookup` objects this parent's `patches` select: each apply as it would be sent.
                for apply in &plan.patches.apply {
                    docs.push(serde_json::json!({
                        "patch": apply.patch, "fieldManager": apply.manager, "apply": apply.body,
                    }));
                }
            }
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(INVALID);
            }
        }
    }
    let printed = print_documents(&docs, args.output);
    // What was rendered is shown either way; a child the apiserver would reject makes the render fail.
    if !schema_problems.is_empty() {
        eprintln!("{}", ruleplane_config::Diagnostics(schema_problems));
        return ExitCode::from(INVALID);
    }
    printed
}

pub fn crds(args: &CrdsArgs) -> ExitCode {
    // CRD manifests are the same for every supported version.
    let newest = TargetVersion {
        kubernetes_version: ruleplane_config::KubernetesVersion::NEWEST,
    };
    let rules = match load_one(&args.rules, &args.installed, &newest) {
        Ok(r) => r,
        Err(code) => return code,
    };
    // Only what the rule set declares: a `--crds` manifest is another tool's, never written by Ruleplane.
    let crds: Vec<Value> = rules
        .resource_definitions()
        .filter_map(|rd| serde_json::to_value(ruleplane_config::generate_crd(rd)).ok())
        .collect();
    print_documents(&crds, args.output)
}

/// Prints the permissions the rules need. A kind another tool installs whose manifest was not given
/// (`--crds`) is accepted as `run` accepts it, but its plural is unknown: its permissions are left out and listed
/// on standard error, and the exit code is 1 so that a pipeline does not apply an incomplete role unawares.
pub fn rbac(args: &RbacArgs) -> ExitCode {
    let options = match ruleplane_config::load_crd_paths(&args.installed.crds) {
        Ok(installed) => LoadOptions {
            installed,
            unknown_kinds: UnknownKinds::AtRunTime,
            not_rules: args.installed.crds.clone(),
            // Permissions are the same for every supported version.
            kubernetes_version: ruleplane_config::KubernetesVersion::NEWEST,
        },
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            return ExitCode::from(INVALID);
        }
    };
    let rules = match ruleplane_config::load_paths_with(std::slice::from_ref(&args.rules), &options) {
        Ok(rules) => rules,
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            return ExitCode::from(INVALID);
        }
    };
    let printed = match args.output {
        RbacOutput::Manifests => print_yaml_documents(&ruleplane_config::rbac_manifests(
            &rules,
            &args.name,
            &args.leader_election_namespace,
        )),
        RbacOutput::HelmValues => print_yaml_documents(&[ruleplane_config::helm_values(&rules)]),
        RbacOutput::Json => print_documents(
            &ruleplane_config::rbac_manifests(&rules, &args.name, &args.leader_election_namespace),
            DocumentFormat::Json,
        ),
    };
    let underived = ruleplane_config::underived_kinds(&rules);
    if underived.is_empty() {
        return printed;
    }
    for (rule, kind) in &underived {
        eprintln!(
            "rule `{rule}`: cannot derive the permissions for {kind}: no ResourceDefinition declares it, it is not \
             built in, and no --crds manifest defines it (its plural is unknown); pass its CRD manifest with --crds"
        );
    }
    ExitCode::from(INVALID)
}

pub fn schema() -> ExitCode {
    match serde_json::to_string_pretty(&ruleplane_config::rule_language_schema()) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot serialise the schema: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_documents(docs: &[Value], format: DocumentFormat) -> ExitCode {
    match format {
        DocumentFormat::Yaml => print_yaml_documents(docs),
        DocumentFormat::Json => print_json(&docs),
    }
}

fn print_json(value: &impl serde::Serialize) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot print JSON: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_yaml_documents(docs: &[Value]) -> ExitCode {
    let mut out = String::new();
    for doc in docs {
        match serde_saphyr::to_string(doc) {
            Ok(text) => {
                out.push_str("---\n");
                out.push_str(&text);
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
            Err(e) => {
                eprintln!("cannot print YAML: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    print!("{out}");
    ExitCode::SUCCESS
}

/// Exit code for usage errors found after parsing the flags (clap uses the same code for its own).
const USAGE: u8 = 2;

pub fn simulate(args: &SimulateArgs) -> ExitCode {
    let rules = match load_one(&args.policy, &args.installed, &args.target) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let policies: Vec<&SchedulerPolicy> = rules.scheduler_policies().collect();
    let chosen: Vec<&SchedulerPolicy> = match &args.scheduler {
        Some(name) => policies
            .iter()
            .copied()
            .filter(|p| p.spec.scheduler_name == *name || p.metadata.name == *name)
            .collect(),
        None => policies.clone(),
    };
    let policy = match chosen.as_slice() {
        [one] => *one,
        [] if policies.is_empty() => {
            eprintln!("{}: no SchedulerPolicy rule found", args.policy.display());
            return ExitCode::from(INVALID);
        }
        [] => {
            eprintln!(
                "no SchedulerPolicy named `{}`; the rules have: {}",
                args.scheduler.as_deref().unwrap_or_default(),
                scheduler_names(&policies)
            );
            return ExitCode::from(USAGE);
        }
        _ => {
            eprintln!(
                "{} holds several SchedulerPolicy rules; choose one with --scheduler ({})",
                args.policy.display(),
                scheduler_names(&policies)
            );
            return ExitCode::from(USAGE);
        }
    };
    let input = (|| -> Result<_, String> {
        let existing = match &args.existing {
            Some(path) => read_kind(path, "Pod")?,
            None => Vec::new(),
        };
        let pdbs = match &args.pdbs {
            Some(path) => read_kind(path, "PodDisruptionBudget")?,
            None => Vec::new(),
        };
        let storage = match &args.storage {
            Some(path) => {
                Some(simulate::storage_of(read_objects(path)?).map_err(|e| format!("{}: {e}", path.display()))?)
            }
            None => None,
        };
        // The Workload API (where pods name their groups) is the one of the version the rules were loaded for.
        let api = WorkloadApi::of(rules.kubernetes_version());
        let (workloads, pod_groups) = match &args.gangs {
            Some(path) => {
                simulate::gangs_of(read_objects(path)?, api).map_err(|e| format!("{}: {e}", path.display()))?
            }
            None => (Vec::new(), Vec::new()),
        };
        // Read from the objects: a typed pod has no `workloadRef` (v1.35's field is gone from the typed model).
        let mut raw_pods: Vec<Value> = read_kind(&args.pods, "Pod")?;
        if let Some(path) = &args.existing {
            raw_pods.extend(read_kind::<Value>(path, "Pod")?);
        }
        Ok((
            read_kind(&args.nodes, "Node")?,
            read_kind(&args.pods, "Pod")?,
            existing,
            simulate::ClusterObjects {
                pdbs,
                storage,
                workloads,
                workload_refs: simulate::WorkloadRefs::capture(api, &raw_pods),
                pod_groups,
                kubernetes_version: rules.kubernetes_version(),
            },
        ))
    })();
    let (nodes, pods, existing, cluster) = match input {
        Ok(input) => input,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(INVALID);
        }
    };
    let seed = args.seed.unwrap_or_else(random_seed);
    let simulation = match simulate::simulate_in(policy, nodes, existing, pods, cluster, seed, args.explain) {
        Ok(simulation) => simulation,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(INVALID);
        }
    };
    match args.output {
        OutputFormat::Json => match serde_json::to_string_pretty(&simulation) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("cannot serialise the result: {e}");
                return ExitCode::FAILURE;
            }
        },
        OutputFormat::Text => print!("{}", simulation_text(&simulation)),
    }
    ExitCode::SUCCESS
}

/// The objects of `kind` in a file (documents, `List`s, `<Kind>List`s), with the file named in errors.
fn read_kind<T: serde::de::DeserializeOwned>(path: &Path, kind: &'static str) -> Result<Vec<T>, String> {
    simulate::objects_of_kind(read_objects(path)?, kind).map_err(|e| format!("{}: {e}", path.display()))
}

fn scheduler_names(policies: &[&SchedulerPolicy]) -> String {
    policies
        .iter()
        .map(|p| p.spec.scheduler_name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A seed from the clock: runs differ as kube-scheduler's do, and the seed is printed to repeat one.
fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The text report: a table of placements, and with explain each node's verdict and score breakdown.
fn simulation_text(simulation: &Simulation) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let pod_width = simulation
        .placements
        .iter()
        .map(|p| p.pod.len())
        .max()
        .unwrap_or(3)
        .max(3);
    let node_width = simulation
        .placements
        .iter()
        .map(|p| p.node.as_deref().map_or(1, str::len))
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(out, "{:pod_width$}  {:node_width$}  MESSAGE", "POD", "NODE");
    for placement in &simulation.placements {
        // The message as kube-scheduler's FailedScheduling event reads, PostFilter text included.
        let message = match (&placement.message, &placement.post_filter_message) {
            (Some(message), Some(suffix)) => format!("{message} {suffix}"),
            (message, _) => message.clone().unwrap_or_default(),
        };
        let _ = writeln!(
            out,
            "{:pod_width$}  {:node_width$}  {message}",
            placement.pod,
            placement.node.as_deref().unwrap_or("-"),
        );
        if let Some(preemption) = &placement.preemption {
            let violations = match preemption.pdb_violations {
                0 => String::new(),
                1 => " (1 PodDisruptionBudget violation)".to_string(),
                n => format!(" ({n} PodDisruptionBudget violations)"),
            };
            let _ = writeln!(
                out,
                "  would preempt {} on {}{violations}",
                preemption.victims.join(", "),
                preemption.node
            );
        }
        for (node, explanation) in placement.nodes.iter().flatten() {
            let verdict = match explanation.feasible {
                None => "not evaluated".to_string(),
                Some(true) => {
                    let scores: Vec<String> = explanation
                        .scores
                        .iter()
                        .map(|(plugin, s)| format!("{plugin} {}→{}×{}={}", s.raw, s.normalized, s.weight, s.weighted))
                        .collect();
                    match explanation.total {
                        Some(total) => format!("feasible, total {total}: {}", scores.join(", ")),
                        None => "feasible (only feasible node: not scored)".to_string(),
                    }
                }
                Some(false) => explanation
                    .filters
                    .iter()
                    .find(|f| f.code != "Success" && f.code != "Skip")
                    .map(|f| format!("rejected by {} ({}): {}", f.plugin, f.code, f.reasons.join(", ")))
                    .unwrap_or_else(|| "rejected".to_string()),
            };
            let _ = writeln!(out, "    {node}: {verdict}");
        }
    }
    let _ = writeln!(out, "(scheduler {}, seed {})", simulation.scheduler, simulation.seed);
    out
}

/// Prints one SchedulerPolicy per profile, each preceded by its notes as comments, after checking that the
/// result loads (a policy named `default-scheduler` does not: say `--rename`).
pub fn convert_scheduler_config(args: &ConvertSchedulerConfigArgs) -> ExitCode {
    let documents = match read_objects(&args.config) {
        Ok(docs) => docs,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(INVALID);
        }
    };
    let [config] = documents.as_slice() else {
        eprintln!(
            "{}: expected one KubeSchedulerConfiguration document",
            args.config.display()
        );
        return ExitCode::from(INVALID);
    };
    let renames = args.renames.iter().cloned().collect();
    let converted = match ruleplane_config::scheduler::convert::convert_kube_scheduler_configuration(config, &renames) {
        Ok(converted) => converted,
        Err(error) => {
            eprintln!("{}: {error}", args.config.display());
            return ExitCode::from(INVALID);
        }
    };
    let mut out = String::new();
    for profile in &converted {
        let text = match serde_saphyr::to_string(&profile.rule) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("cannot print YAML: {e}");
                return ExitCode::FAILURE;
            }
        };
        out.push_str("---\n");
        for note in &profile.notes {
            out.push_str(&format!("# {note}\n"));
        }
        out.push_str(&text);
    }
    if let Err(diagnostics) = ruleplane_config::load_str("converted.yaml", &out) {
        eprintln!("the converted rules do not load:\n{diagnostics}");
        if converted
            .iter()
            .any(|p| p.rule["spec"]["schedulerName"] == "default-scheduler")
        {
            eprintln!("hint: rename kube-scheduler's own profile, e.g. --rename default-scheduler=my-scheduler");
        }
        return ExitCode::from(INVALID);
    }
    match args.output {
        DocumentFormat::Yaml => print!("{out}"),
        DocumentFormat::Json => {
            let profiles: Vec<Value> = converted
                .iter()
                .map(|p| serde_json::json!({ "notes": p.notes, "rule": p.rule }))
                .collect();
            return print_json(&profiles);
        }
    }
    ExitCode::SUCCESS
}

/// Runs the RuleTest files among `paths` against the rule files among them.
pub fn test(args: &TestArgs) -> ExitCode {
    use ruleplane_config::rule_test;
    let (mut rule_files, mut test_files) = (Vec::new(), Vec::new());
    for path in &args.paths {
        let found = if path.is_dir() {
            ruleplane_config::rule_files(path).and_then(|rules| Ok((rules, rule_test::test_files(path)?)))
        } else if rule_test::is_test_file(path) {
            Ok((Vec::new(), vec![path.clone()]))
        } else {
            Ok((vec![path.clone()], Vec::new()))
        };
        match found {
            Ok((rules, tests)) => {
                rule_files.extend(rules);
                test_files.extend(tests);
            }
            Err(error) => {
                eprintln!("{}: {error}", path.display());
                return ExitCode::from(INVALID);
            }
        }
    }
    if test_files.is_empty() {
        eprintln!("no test files (*.test.yaml) found in the paths given");
        return ExitCode::from(INVALID);
    }
    let rules = match load_options(&args.installed, &args.target).and_then(|options| {
        rule_files.retain(|file| options.is_rule_file(file));
        ruleplane_config::load_paths_with(&rule_files, &options)
    }) {
        Ok(rules) => rules,
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            return ExitCode::from(INVALID);
        }
    };
    print_warnings(&rules);
    let mut texts = Vec::with_capacity(test_files.len());
    for file in &test_files {
        match std::fs::read_to_string(file) {
            Ok(text) => texts.push((file.display().to_string(), text)),
            Err(error) => {
                eprintln!("{}: {error}", file.display());
                return ExitCode::from(INVALID);
            }
        }
    }
    let suites = match rule_test::load_tests(&texts, &rules) {
        Ok(suites) => suites,
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            return ExitCode::from(INVALID);
        }
    };
    let outcomes: Vec<_> = suites.iter().map(|suite| rule_test::run_suite(&rules, suite)).collect();
    match args.output {
        TestOutput::Text => print!("{}", rule_test::text_report(&outcomes)),
        TestOutput::Junit => print!("{}", rule_test::junit_report(&outcomes)),
        TestOutput::Json => {
            if print_json(&rule_test::json_report(&outcomes)) != ExitCode::SUCCESS {
                return ExitCode::FAILURE;
            }
        }
    }
    match rule_test::totals(&outcomes) {
        (_, 0) => ExitCode::SUCCESS,
        _ => ExitCode::from(INVALID),
    }
}

/// Prints the completion script for one shell, generated from the same definition the parser uses.
pub fn completion(args: &CompletionArgs) -> ExitCode {
    let mut command = <crate::cli::Cli as clap::CommandFactory>::command();
    clap_complete::generate(args.shell, &mut command, "ruleplane", &mut std::io::stdout());
    ExitCode::SUCCESS
}

pub fn version(args: &VersionArgs) -> ExitCode {
    use crate::build_info::{GIT_COMMIT, KUBERNETES, LONG_VERSION, VERSION};
    match args.output {
        OutputFormat::Text => println!("ruleplane {LONG_VERSION}"),
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({ "version": VERSION, "gitCommit": GIT_COMMIT, "kubernetes": KUBERNETES })
        ),
    }
    ExitCode::SUCCESS
}
