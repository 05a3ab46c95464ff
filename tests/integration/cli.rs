//! The offline CLI as users and CI run it: exit codes, output formats, flags from the environment.

use std::path::Path;
use std::process::{Command, Output};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repo root")
}

fn ruleplane(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ruleplane"));
    // cargo sets RULEPLANE_KUBERNETES_VERSION for the test binaries (manager/build.rs's build fact, the version the
    // project is built at), which is also the offline commands' `--kubernetes-version`: their default is meant here.
    cmd.current_dir(repo())
        .args(args)
        .env_remove("RULEPLANE_RULES")
        .env_remove("RULEPLANE_KUBERNETES_VERSION");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run ruleplane")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn validate_exit_codes_are_0_valid_1_invalid_2_usage() {
    let ok = ruleplane(&["validate", "examples", "--crds", "examples/crds"], &[]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("rule(s) valid"));

    let bad = ruleplane(
        &["validate", "tests/rules/invalid/rec-template-unknown-helper.yaml"],
        &[],
    );
    assert_eq!(bad.status.code(), Some(1));
    let stderr = text(&bad.stderr);
    assert!(
        stderr.contains(
            "rec-template-unknown-helper.yaml:13:27: error[template]: unknown helper `jsn`, did you mean `json`?"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("  |         metadata: { name: {{jsn metadata.name}} }"),
        "shows the offending line:\n{stderr}"
    );

    let usage = ruleplane(&["validate", "--output", "xml", "examples"], &[]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn validate_reports_every_error_of_every_file_as_json() {
    let out = ruleplane(&["validate", "--output", "json", "tests/rules/invalid"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["valid"], false);
    let errors = report["errors"].as_array().expect("errors");
    let files: std::collections::BTreeSet<&str> = errors.iter().filter_map(|e| e["file"].as_str()).collect();
    let corpus = std::fs::read_dir(repo().join("tests/rules/invalid")).unwrap().count();
    assert_eq!(files.len(), corpus, "one run reports every invalid file");
    for e in errors {
        assert!(
            e["line"].as_u64().unwrap_or(0) >= 1 && e["column"].as_u64().unwrap_or(0) >= 1,
            "{e}"
        );
        assert!(e["code"].is_string() && e["message"].is_string(), "{e}");
    }
}

#[test]
fn rules_path_can_come_from_the_environment() {
    // The vendored CRDs of another tool's kinds are knowledge only: never printed (the variable is a path list).
    let out = ruleplane(
        &["crds"],
        &[
            ("RULEPLANE_RULES", "examples"),
            ("RULEPLANE_CRDS", "examples/crds:tests/rules/crds"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let docs: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&text(&out.stdout)).expect("CRD YAML");
    let names: Vec<&str> = docs.iter().filter_map(|c| c.metadata.name.as_deref()).collect();
    assert_eq!(
        names,
        [
            "crontabs.stable.example.com",
            "pod2s.samples.ruleplane.dev",
            "scaledapps.apps.example.org",
            "sites.apps.example.org",
            "webapps.apps.example.org",
            "zonedcaches.apps.example.org"
        ]
    );
}

#[test]
fn render_prints_children_and_status_and_locates_template_errors() {
    let dir = std::env::temp_dir().join(format!("ruleplane-cli-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let parent = dir.join("crontab.yaml");
    std::fs::write(
        &parent,
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: { name: nightly, namespace: default, uid: u-1 }\n\
         spec: { cronSpec: '0 3 * * *', image: backup:2 }\n",
    )
    .unwrap();
    let defaults = dir.join("defaults.yaml");
    std::fs::write(
        &defaults,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: crontab-defaults, namespace: default }\n\
         data: { concurrencyPolicy: Replace }\n",
    )
    .unwrap();
    let out = ruleplane(
        &[
            "render",
            "--rules",
            "examples",
            "--crds",
            "examples/crds",
            "--object",
            parent.to_str().unwrap(),
            "--lookup",
            defaults.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text(&out.stdout)).expect("YAML documents");
    let job = docs.iter().find(|d| d["kind"] == "CronJob").expect("CronJob child");
    assert_eq!(job["metadata"]["name"], "nightly");
    assert_eq!(job["spec"]["schedule"], "0 3 * * *");
    assert_eq!(job["spec"]["concurrencyPolicy"], "Replace", "lookup applied");
    assert_eq!(job["metadata"]["labels"]["ruleplane.dev/parent-uid"], "u-1");
    assert!(docs.iter().any(|d| d.get("status").is_some()), "status patch printed");

    std::fs::write(
        &parent,
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: { name: nightly, namespace: default }\nspec: { cronSpec: '0 3 * * *' }\n",
    )
    .unwrap();
    let missing = ruleplane(
        &[
            "render",
            "--rules",
            "examples",
            "--crds",
            "examples/crds",
            "--object",
            parent.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(missing.status.code(), Some(1));
    let stderr = text(&missing.stderr);
    assert!(
        stderr.contains("examples/crontab.yaml:") && stderr.contains("missing field `spec.image`"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn simulate_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut args = vec![
        "simulate",
        "--policy",
        "examples/my-scheduler.yaml",
        "--nodes",
        "tests/scheduler/simulate/nodes.yaml",
        "--pods",
        "tests/scheduler/simulate/pods.yaml",
        "--existing",
        "tests/scheduler/simulate/existing.yaml",
        "--seed",
        "1",
    ];
    args.extend_from_slice(extra);
    args
}

/// The JSON output is a contract (docs/scheduler.md): the committed file is what users' tooling parses.
#[test]
fn simulate_json_output_is_the_documented_contract() {
    let out = ruleplane(&simulate_args(&["--explain", "--output", "json"]), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let actual: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let expected_path = repo().join("tests/scheduler/simulate/expected.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&expected_path, text(&out.stdout)).expect("write expected.json");
    }
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&expected_path).expect("expected.json")).expect("JSON");
    assert_eq!(actual, expected, "regenerate with UPDATE_GOLDEN=1 and review the diff");
    // The facts the contract promises, spelled out.
    let placements = actual["placements"].as_array().expect("placements");
    assert_eq!(placements[0]["pod"], "default/nginx");
    assert_eq!(placements[0]["node"], "node-1");
    assert_eq!(placements[0]["message"], serde_json::Value::Null);
    assert_eq!(placements[0]["nodes"]["node-3"]["feasible"], false);
    assert_eq!(placements[0]["nodes"]["node-1"]["scores"]["NodeLabel"]["weighted"], 200);
    assert_eq!(placements[1]["node"], serde_json::Value::Null);
    assert_eq!(
        placements[1]["message"],
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu."
    );
    // Without --explain there is no per-node breakdown.
    let brief = ruleplane(&simulate_args(&["--output", "json"]), &[]);
    let brief: serde_json::Value = serde_json::from_slice(&brief.stdout).expect("JSON");
    assert!(brief["placements"][0].get("nodes").is_none());
    assert_eq!(brief["placements"][0]["node"], "node-1");
}

/// The preemption decision, offline: victims chosen around a PodDisruptionBudget, nothing carried out.
#[test]
fn simulate_reports_the_preemption_a_pod_would_make() {
    let args = |pdbs: bool| {
        let mut args = vec![
            "simulate",
            "--policy",
            "examples/my-scheduler.yaml",
            "--nodes",
            "tests/scheduler/simulate/nodes.yaml",
            "--pods",
            "tests/scheduler/simulate/preemption/pods.yaml",
            "--existing",
            "tests/scheduler/simulate/preemption/existing.yaml",
            "--seed",
            "1",
        ];
        if pdbs {
            args.extend_from_slice(&["--pdbs", "tests/scheduler/simulate/preemption/pdbs.yaml"]);
        }
        args
    };
    // Without budgets the least important pod of node-2 goes; node-1's only victim has a higher priority.
    let out = ruleplane(&args(false), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("would preempt default/db on node-2"),
        "{}",
        text(&out.stdout)
    );
    // db's budget allows no disruption: it is reprieved first and batch goes instead.
    let mut json_args = args(true);
    json_args.extend_from_slice(&["-o", "json"]);
    let out = ruleplane(&json_args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let placement = &result["placements"][0];
    assert_eq!(placement["node"], serde_json::Value::Null);
    assert_eq!(
        placement["message"],
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu."
    );
    // The newest Kubernetes minor (the default) says where the preemption placed the pod; v1.35 appends nothing.
    assert_eq!(
        placement["postFilterMessage"],
        "preemption: found a potential placement for pod on node node-2, preempting 1 victims"
    );
    json_args.extend_from_slice(&["--kubernetes-version", "1.35"]);
    let out = ruleplane(&json_args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        result["placements"][0].get("postFilterMessage").is_none(),
        "a preemption appends nothing before v1.37"
    );
    assert_eq!(
        placement["preemption"],
        serde_json::json!({
            "node": "node-2", "victims": ["default/batch"], "pdbViolations": 0,
            "clearedNominations": ["default/waiting"]
        })
    );
}

/// VolumeZone and VolumeRestrictions, offline: storage objects from `--storage`, claims let through by the policy.
#[test]
fn simulate_reads_storage_objects_for_the_volume_plugins() {
    let dir = "tests/scheduler/simulate/volumes";
    let policy = format!("{dir}/policy.yaml");
    let pods = format!("{dir}/pods.yaml");
    let existing = format!("{dir}/existing.yaml");
    let storage = format!("{dir}/storage.yaml");
    let args = [
        "simulate",
        "--policy",
        &policy,
        "--nodes",
        "tests/scheduler/simulate/nodes.yaml",
        "--pods",
        &pods,
        "--existing",
        &existing,
        "--storage",
        &storage,
        "--seed",
        "1",
        "-o",
        "json",
    ];
    let out = ruleplane(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let placements = result["placements"].as_array().expect("placements");
    // The volume is in zone-b, where node-2 is the schedulable node.
    assert_eq!(placements[0]["pod"], "default/zoned");
    assert_eq!(placements[0]["node"], "node-2");
    assert_eq!(placements[1]["pod"], "default/second-user");
    assert_eq!(placements[1]["node"], serde_json::Value::Null);
    assert_eq!(
        placements[1]["message"],
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) unavailable due to PersistentVolumeClaim \
         with ReadWriteOncePod access mode already in-use by another pod."
    );
    assert!(
        placements[2]["node"].is_string(),
        "an unbound WaitForFirstConsumer claim: {}",
        placements[2]
    );

    // Without --storage the same pods are placed as before the volume plugins: claims ignored.
    let without: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--storage" && *a != storage)
        .collect();
    let out = ruleplane(&without, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(result["placements"][1]["node"].is_string(), "{result}");

    // A file of the wrong kind is invalid input, named.
    let mut wrong = args.to_vec();
    wrong[10] = "tests/scheduler/simulate/nodes.yaml";
    let bad = ruleplane(&wrong, &[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains(
            "nodes.yaml: document 1: expected a PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode"
        ),
        "{}",
        text(&bad.stderr)
    );
}

/// Gangs, offline: the Workload API's objects and PodGroups from `--gangs`, members placed all or nothing with the
/// worker's texts, in the Workload API of the version simulated (v1.37 by default: PodGroups and
/// `schedulingGroup`; v1.35: Workloads and `workloadRef`).
#[test]
fn simulate_places_gangs_all_or_nothing_from_the_gangs_file() {
    // v1.37's pod-group cycle tells the member that fitted the group's status; v1.35's run names the failing member.
    let fitted = "pod group is unschedulable, minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, pod group \
                  preemption: No preemption victims found for incoming preemptor";
    simulate_gangs_of_one_version("gangs", &[], fitted);
    let fitted = "0/1 nodes are available: 1 rejected due to unschedulable gang member default/too-big-1 at plugin \
                  GangScheduling.";
    simulate_gangs_of_one_version("gangs-v1.35", &["--kubernetes-version", "1.35"], fitted);
    // A v1.35 gangs file is refused by v1.37, which does not serve its Workloads.
    let refused = ruleplane(
        &[
            "simulate",
            "--policy",
            "examples/gang-scheduler.yaml",
            "--nodes",
            "tests/scheduler/simulate/nodes.yaml",
            "--pods",
            "tests/scheduler/simulate/gangs-v1.35/pods.yaml",
            "--gangs",
            "tests/scheduler/simulate/gangs-v1.35/gangs.yaml",
        ],
        &[],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("expected a PodGroup or Workload (scheduling.k8s.io/v1beta1)"),
        "{}",
        text(&refused.stderr)
    );
}

fn simulate_gangs_of_one_version(dir: &str, version: &[&str], fitted: &str) {
    let pods = format!("tests/scheduler/simulate/{dir}/pods.yaml");
    let gangs = format!("tests/scheduler/simulate/{dir}/gangs.yaml");
    let mut args = vec![
        "simulate",
        "--policy",
        "examples/gang-scheduler.yaml",
        "--nodes",
        "tests/scheduler/simulate/nodes.yaml",
        "--pods",
        &pods,
        "--gangs",
        &gangs,
        "--seed",
        "1",
        "-o",
        "json",
    ];
    args.extend(version);
    let out = ruleplane(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let placements = result["placements"].as_array().expect("placements");
    let outcome = |i: usize| {
        (
            placements[i]["pod"].as_str().unwrap_or_default(),
            placements[i]["node"].as_str(),
            placements[i]["message"].as_str(),
        )
    };
    for (i, placement) in placements.iter().enumerate().take(3) {
        assert!(outcome(i).1.is_some(), "the training gang is placed whole: {placement}");
    }
    assert_eq!(outcome(3), ("default/too-big-0", None, Some(fitted)));
    assert_eq!(
        outcome(4),
        (
            "default/too-big-1",
            None,
            Some("0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu.")
        )
    );
    assert!(
        outcome(5)
            .2
            .is_some_and(|m| m.contains("pre-filter pod eval-0 cannot find enough sibling pods")),
        "{}",
        placements[5]
    );

    // Without --gangs the Workload API is not served (the pods' references ignored) and the PodGroup is missing.
    let without: Vec<&str> = [&args[..7], &args[9..]].concat();
    let out = ruleplane(&without, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(result["placements"][3]["node"], "node-2", "{result}");
    assert_eq!(
        result["placements"][5]["message"],
        "0/1 nodes are available: 1 PodGroup not found."
    );

    // A file of the wrong kind is invalid input, named.
    let mut wrong = args.to_vec();
    wrong[8] = "tests/scheduler/simulate/nodes.yaml";
    let bad = ruleplane(&wrong, &[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("nodes.yaml: document 1: expected a ")
            && text(&bad.stderr).contains("or PodGroup (scheduling.x-k8s.io/v1alpha1)"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn simulate_text_is_a_table_and_exit_codes_are_0_1_2() {
    let out = ruleplane(&simulate_args(&[]), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("POD"), "{stdout}");
    assert!(stdout.contains("default/big"), "{stdout}");
    assert!(stdout.contains("(scheduler my-scheduler, seed 1)"), "{stdout}");

    // Nodes where pods are expected: invalid input, named.
    let mut swapped = simulate_args(&[]);
    swapped[4] = "tests/scheduler/simulate/pods.yaml";
    let bad = ruleplane(&swapped, &[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("pods.yaml: document 1: expected a Node or a list of them, found a Pod"),
        "{}",
        text(&bad.stderr)
    );

    // examples/ holds two policies: which one must be said.
    let mut ambiguous = simulate_args(&[]);
    ambiguous[2] = "examples";
    ambiguous.extend_from_slice(&["--crds", "examples/crds"]);
    let usage = ruleplane(&ambiguous, &[]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(
        text(&usage.stderr).contains("choose one with --scheduler"),
        "{}",
        text(&usage.stderr)
    );
    ambiguous.extend_from_slice(&["--scheduler", "bin-packing-scheduler"]);
    let chosen = ruleplane(&ambiguous, &[]);
    assert_eq!(chosen.status.code(), Some(0), "{}", text(&chosen.stderr));
    assert!(text(&chosen.stdout).contains("(scheduler bin-packing-scheduler, seed 1)"));
}

#[test]
fn convert_scheduler_config_writes_loadable_policies_with_notes() {
    let config = "tests/scheduler/kube-scheduler-config.yaml";
    let refused = ruleplane(&["convert-scheduler-config", config], &[]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("--rename default-scheduler="),
        "{}",
        text(&refused.stderr)
    );

    let out = ruleplane(
        &[
            "convert-scheduler-config",
            config,
            "--rename",
            "default-scheduler=my-default",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("# profile default-scheduler becomes scheduler my-default"),
        "{stdout}"
    );
    assert!(stdout.contains("# plugins.queueSort is not converted"), "{stdout}");
    let file = crate::support::manager::temp_dir("convert").join("converted.yaml");
    std::fs::write(&file, &stdout).unwrap();
    let valid = ruleplane(&["validate", file.to_str().unwrap()], &[]);
    assert_eq!(valid.status.code(), Some(0), "{}", text(&valid.stderr));
    assert!(text(&valid.stdout).contains("2 rule(s) valid"));
    assert!(stdout.contains("percentageOfNodesToScore: 50"), "{stdout}");
    assert!(stdout.contains("type: MostAllocated"), "{stdout}");
}

#[test]
fn test_command_runs_the_examples_tests() {
    let out = ruleplane(&["test", "examples", "--crds", "examples/crds"], &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("PASS  examples/crontab.test.yaml:"), "{stdout}");
    assert!(stdout.contains("PASS  examples/schedulers.test.yaml:"), "{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    let passed: usize = last.split(' ').next().unwrap_or("0").parse().unwrap_or(0);
    assert!(passed >= 8 && last.ends_with(" passed, 0 failed"), "{stdout}");
    // The manager never reads test files as rules, so the examples directory still validates and runs.
    let validate = ruleplane(&["validate", "examples", "--crds", "examples/crds"], &[]);
    assert_eq!(validate.status.code(), Some(0), "{}", text(&validate.stderr));
}

#[test]
fn test_command_reports_failures_with_a_diff_as_text_and_junit() {
    let dir = std::env::temp_dir().join(format!("ruleplane-cli-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo().join("examples/crontab.yaml"), dir.join("crontab.yaml")).unwrap();
    std::fs::write(
        dir.join("crontab.test.yaml"),
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: RuleTest
metadata: { name: wrong-schedule }
spec:
  rule: crontab-to-cronjob
  cases:
    - name: the schedule is copied
      parent:
        apiVersion: stable.example.com/v1
        kind: CronTab
        metadata: { name: c, namespace: default }
        spec: { cronSpec: "0 * * * *", image: x }
      expect:
        children:
          - apiVersion: batch/v1
            kind: CronJob
            metadata: { name: c }
            spec: { schedule: "5 * * * *" }
"#,
    )
    .unwrap();
    let dir_arg = dir.to_str().unwrap();
    let out = ruleplane(&["test", dir_arg], &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("crontab.test.yaml:7:7  wrong-schedule › the schedule is copied"),
        "{stdout}"
    );
    assert!(
        stdout.contains("      child batch/v1 CronJob c differs:\n      --- expected\n      +++ rendered\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("      -  schedule: 5 * * * *\n      +  schedule: 0 * * * *\n"),
        "{stdout}"
    );
    assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");

    let junit = ruleplane(&["test", "--output", "junit", dir_arg], &[]);
    assert_eq!(junit.status.code(), Some(1));
    let xml = text(&junit.stdout);
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ruleplane test\" tests=\"1\" failures=\"1\">"), "{xml}");
    assert!(
        xml.contains("<testcase name=\"the schedule is copied\" classname=\"crontab-to-cronjob\""),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"child batch/v1 CronJob c differs:\">"),
        "{xml}"
    );

    // A broken test file: located error, exit 1; no test files at all: exit 1; a bad flag: exit 2.
    std::fs::write(dir.join("crontab.test.yaml"), "apiVersion: ruleplane.dev/v1alpha1\nkind: RuleTest\nmetadata: { name: t }\nspec:\n  rule: crontab\n  cases: []\n").unwrap();
    let broken = ruleplane(&["test", dir_arg], &[]);
    assert_eq!(broken.status.code(), Some(1));
    let stderr = text(&broken.stderr);
    assert!(
        stderr.contains("crontab.test.yaml:6:3: error[value]: `spec.cases`: must list at least 1 item"),
        "{stderr}"
    );
    std::fs::write(dir.join("crontab.test.yaml"), "apiVersion: ruleplane.dev/v1alpha1\nkind: RuleTest\nmetadata: { name: t }\nspec:\n  rule: crontab\n  cases: [ { name: c, parent: {}, expect: { children: [] } } ]\n").unwrap();
    let unknown = ruleplane(&["test", dir_arg], &[]);
    assert_eq!(unknown.status.code(), Some(1));
    let stderr = text(&unknown.stderr);
    assert!(
        stderr.contains("crontab.test.yaml:5:9: error[reference]: no Reconciler or SchedulerPolicy named `crontab`"),
        "{stderr}"
    );
    let none = ruleplane(&["test", "tests/rules/valid"], &[]);
    assert_eq!(none.status.code(), Some(1));
    assert!(text(&none.stderr).contains("no test files (*.test.yaml)"));
    let usage = ruleplane(&["test", "--output", "tap", dir_arg], &[]);
    assert_eq!(usage.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn version_names_the_git_commit_and_the_kubernetes_version_targeted() {
    // The supported window, as the control plane modules list it (and as KubernetesVersion knows it).
    let kubernetes = format!(
        "{}-{}",
        ruleplane_config::KubernetesVersion::OLDEST,
        ruleplane_config::KubernetesVersion::NEWEST
    );
    let kubernetes = kubernetes.as_str();
    let out = ruleplane(&["--version"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let line = text(&out.stdout);
    let prefix = format!("ruleplane {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(
        line.starts_with(&prefix) && line.ends_with(&format!(", Kubernetes {kubernetes})\n")),
        "{line}"
    );
    assert!(!line.contains("commit unknown"), "built in a git checkout: {line}");

    let json = ruleplane(&["version", "--output", "json"], &[]);
    assert_eq!(json.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["kubernetes"], kubernetes);
    assert!(
        line.contains(json["gitCommit"].as_str().expect("gitCommit")),
        "{json} vs {line}"
    );
}

#[test]
fn completion_scripts_cover_every_subcommand_in_each_shell() {
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let out = ruleplane(&["completion", shell], &[]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in ["validate", "convert-scheduler-config", "completion", "kube-api-qps"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    // The bash script parses (bash is on every machine the tests run on; the others need not be).
    let file = crate::support::manager::temp_dir("completion").join("ruleplane.bash");
    std::fs::write(&file, ruleplane(&["completion", "bash"], &[]).stdout).unwrap();
    let syntax = Command::new("bash").arg("-n").arg(&file).output().expect("bash");
    assert!(syntax.status.success(), "{}", text(&syntax.stderr));

    let usage = ruleplane(&["completion", "tcsh"], &[]);
    assert_eq!(usage.status.code(), Some(2));
}

/// A scratch rules repository as the docs' CI examples and pre-commit hooks expect one: `rules/` holding the
/// examples (rules and their tests) and the committed `rbac-values.yaml`; returns it and a PATH with the built
/// `ruleplane` first.
/// A rules repository as docs/testing.md assumes one: the examples' rules in `rules/` (the rule using another
/// tool's kinds too), that tool's CRDs vendored in `crds/`, and the RBAC values committed as `rbac-values.yaml`.
fn rules_repository(name: &str) -> (std::path::PathBuf, std::ffi::OsString) {
    let dir = crate::support::manager::temp_dir(name);
    for (from, to) in [
        ("examples", "rules"),
        ("examples/other-tools", "rules"),
        ("examples/crds", "crds"),
    ] {
        std::fs::create_dir_all(dir.join(to)).unwrap();
        for entry in std::fs::read_dir(repo().join(from)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                std::fs::copy(&path, dir.join(to).join(path.file_name().unwrap())).unwrap();
            }
        }
    }
    let rules = dir.join("rules");
    let crds = dir.join("crds");
    let values = ruleplane(
        &[
            "rbac",
            "--rules",
            rules.to_str().unwrap(),
            "--crds",
            crds.to_str().unwrap(),
            "--output",
            "helm-values",
        ],
        &[],
    );
    assert_eq!(values.status.code(), Some(0), "{}", text(&values.stderr));
    std::fs::write(dir.join("rbac-values.yaml"), values.stdout).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_ruleplane"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    (dir, path)
}

/// The shell lines of a CI file: every `run:` (GitHub Actions) and every item of a `script:` (GitLab CI).
fn ci_shell_lines(node: &serde_json::Value, lines: &mut Vec<String>) {
    match node {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("run", serde_json::Value::String(run)) => lines.extend(run.lines().map(str::to_owned)),
                    ("script", serde_json::Value::Array(items)) => {
                        lines.extend(items.iter().filter_map(|i| i.as_str()).map(str::to_owned))
                    }
                    _ => ci_shell_lines(value, lines),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| ci_shell_lines(i, lines)),
        _ => {}
    }
}

/// docs/testing.md's CI examples work as written: each marked block is valid YAML, gets the binary one of the
/// documented ways, and its `ruleplane` commands succeed on the examples (with the built binary on PATH in place
/// of the install step, which needs the network).
#[test]
fn ci_examples_in_the_docs_run_as_written() {
    let doc = std::fs::read_to_string(repo().join("docs/testing.md")).expect("docs/testing.md");
    let marker = "<!-- ci-example:";
    let blocks: Vec<&str> = doc
        .match_indices(marker)
        .map(|(at, _)| {
            let rest = &doc[at..];
            let start = rest.find("```yaml\n").expect("a ```yaml block after the marker") + "```yaml\n".len();
            let len = rest[start..].find("\n```").expect("the block ends");
            &rest[start..start + len + 1]
        })
        .collect();
    assert_eq!(blocks.len(), 2, "GitHub Actions and GitLab CI");
    let (dir, path) = rules_repository("ci-examples");
    for block in blocks {
        let yaml: serde_json::Value = serde_saphyr::from_str(block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        let mut lines = Vec::new();
        ci_shell_lines(&yaml, &mut lines);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("cargo install --locked") || l.contains("sha256sum -c")),
            "the example must get the binary one of the documented ways:\n{block}"
        );
        let commands: Vec<&String> = lines.iter().filter(|l| l.starts_with("ruleplane ")).collect();
        assert!(commands.len() >= 2, "{block}");
        for command in commands {
            let _ = std::fs::remove_file(dir.join("junit.xml"));
            let out = Command::new("sh")
                .args(["-c", command])
                .current_dir(&dir)
                .env("PATH", &path)
                .env_remove("RULEPLANE_RULES")
                .env_remove("RULEPLANE_KUBERNETES_VERSION")
                .env_remove("RULEPLANE_OUTPUT")
                .output()
                .expect("sh");
            assert!(
                out.status.success(),
                "`{command}` failed: {}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
            if command.contains("> junit.xml") {
                let junit = std::fs::read_to_string(dir.join("junit.xml")).expect("junit.xml written");
                assert!(
                    junit.contains("<testsuites") && junit.contains("failures=\"0\""),
                    "{junit}"
                );
            }
        }
    }
}

/// The repository's .pre-commit-hooks.yaml: each hook, run as pre-commit runs it (entry, then args; no file
/// names), passes on a rules repository holding the examples.
#[test]
fn pre_commit_hooks_run_on_a_rules_repository() {
    let file = std::fs::read_to_string(repo().join(".pre-commit-hooks.yaml")).expect(".pre-commit-hooks.yaml");
    let hooks: Vec<serde_json::Value> = serde_saphyr::from_str(&file).expect("a list of hooks");
    let ids: Vec<&str> = hooks.iter().filter_map(|h| h["id"].as_str()).collect();
    assert_eq!(ids, ["ruleplane-validate", "ruleplane-test"]);
    let (dir, path) = rules_repository("pre-commit");
    for hook in &hooks {
        assert_eq!(hook["pass_filenames"], false, "{hook}");
        assert_eq!(hook["language"], "system", "{hook}");
        let mut words: Vec<String> = hook["entry"]
            .as_str()
            .expect("entry")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        words.extend(
            hook["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_owned)),
        );
        assert_eq!(words[0], "ruleplane");
        // As docs/testing.md says for vendored CRDs: the hooks' commands read them from RULEPLANE_CRDS.
        let out = Command::new(&words[0])
            .args(&words[1..])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("RULEPLANE_CRDS", "crds")
            .env_remove("RULEPLANE_RULES")
            .output()
            .expect("run the hook");
        assert!(
            out.status.success(),
            "{}: {}{}",
            hook["id"],
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

/// Every offline command that prints results takes `--output json` and prints one JSON value (`schema` prints
/// JSON already; `diff` is tested against a cluster in gitops.rs).
#[test]
fn every_offline_command_that_prints_results_takes_output_json() {
    let object = crate::support::manager::temp_dir("json").join("crontab.yaml");
    std::fs::write(
        &object,
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: { name: nightly, namespace: default }\n\
         spec: { cronSpec: '0 3 * * *', image: backup:2 }\n",
    )
    .unwrap();
    let object = object.to_str().unwrap();
    let simulate = simulate_args(&["-o", "json"]);
    let commands: Vec<Vec<&str>> = vec![
        vec!["validate", "-o", "json", "examples", "--crds", "examples/crds"],
        vec!["test", "-o", "json", "examples", "--crds", "examples/crds"],
        vec![
            "render",
            "-o",
            "json",
            "--rules",
            "examples",
            "--crds",
            "examples/crds",
            "--object",
            object,
        ],
        vec!["crds", "-o", "json", "--rules", "examples", "--crds", "examples/crds"],
        vec!["rbac", "-o", "json", "--rules", "examples", "--crds", "examples/crds"],
        simulate,
        vec![
            "convert-scheduler-config",
            "-o",
            "json",
            "tests/scheduler/kube-scheduler-config.yaml",
            "--rename",
            "default-scheduler=my-default",
        ],
        vec!["version", "-o", "json"],
        vec!["schema"],
    ];
    let mut outputs = Vec::new();
    for args in &commands {
        let out = ruleplane(args, &[]);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        let value: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?} prints no JSON ({e}):\n{}", text(&out.stdout)));
        outputs.push(value);
    }
    let [validate, test, render, crds, rbac, _simulate, convert, ..] = outputs.as_slice() else {
        unreachable!()
    };
    // validate: the object docs/rule-language.md describes.
    for key in ["valid", "rules", "errors", "warnings"] {
        assert!(validate.get(key).is_some(), "validate lacks {key}: {validate}");
    }
    assert_eq!(validate["valid"], true);
    assert!(validate["rules"][0]["name"].is_string() && validate["rules"][0]["source"].is_string());
    // test: totals, and every case with where it is and whether it passed.
    assert_eq!(test["failed"], 0);
    assert!(test["passed"].as_u64().unwrap_or(0) >= 8, "{test}");
    let case = &test["suites"][0]["cases"][0];
    assert!(case["file"].as_str().unwrap_or("").starts_with("examples/") && case["line"].as_u64() >= Some(1));
    assert_eq!(case["passed"], true);
    // render, crds, rbac, convert: the documents the YAML output holds, as one array.
    assert!(
        render
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["kind"] == "CronJob")),
        "{render}"
    );
    assert_eq!(crds.as_array().map(Vec::len), Some(6), "{crds}");
    let kinds: Vec<&str> = rbac
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["ClusterRole", "Role"]);
    assert_eq!(convert[0]["rule"]["kind"], "SchedulerPolicy");
    assert!(convert[0]["notes"].is_array(), "{convert}");
}

#[test]
fn a_child_its_kind_rejects_fails_validate_render_and_test_at_the_template_line() {
    let dir = std::env::temp_dir().join(format!("ruleplane-cli-schema-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The CronTab example with two mistakes the apiserver rejects: a misspelt field and a number for a string.
    let rules = std::fs::read_to_string(repo().join("examples/crontab.yaml"))
        .unwrap()
        .replace(
            "          concurrencyPolicy:",
            "          sucessfulJobsHistoryLimit: 3\n          concurrencyPolicy:",
        )
        .replace("restartPolicy: OnFailure", "restartPolicy: 1");
    assert_ne!(
        rules,
        std::fs::read_to_string(repo().join("examples/crontab.yaml")).unwrap()
    );
    std::fs::write(dir.join("crontab.yaml"), &rules).unwrap();
    let line_of = |needle: &str| rules.lines().position(|l| l.contains(needle)).expect(needle) + 1;
    let (typo, restart) = (line_of("sucessfulJobsHistoryLimit"), line_of("restartPolicy: 1"));
    let dir_text = dir.to_str().unwrap();
    let file = dir.join("crontab.yaml").display().to_string();

    // validate: no test case needed, a synthetic CronTab with every field is rendered.
    let out = ruleplane(&["validate", dir_text], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}:{typo}:11: error[schema]: child `job` (batch/v1 CronJob example): spec.sucessfulJobsHistoryLimit: \
             field not declared in schema"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{file}:{restart}:")) && stderr.contains("restartPolicy: 1 is not one of"),
        "{stderr}"
    );
    // render: the children are printed, the problems located, exit 1.
    let parent = std::env::temp_dir().join(format!("ruleplane-cli-schema-{}-crontab.yaml", std::process::id()));
    std::fs::write(
        &parent,
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: { name: nightly, namespace: default, uid: u }\n\
         spec: { cronSpec: \"0 * * * *\", image: busybox }\n",
    )
    .unwrap();
    let out = ruleplane(
        &["render", "--rules", dir_text, "--object", parent.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("kind: CronJob"), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(&format!(
            "{file}:{typo}:11: error[schema]: child `job` (batch/v1 CronJob nightly)"
        )),
        "{}",
        text(&out.stderr)
    );
    // test: a case that expects nothing of the child still fails on it.
    std::fs::write(
        dir.join("crontab.test.yaml"),
        "apiVersion: ruleplane.dev/v1alpha1\nkind: RuleTest\nmetadata: { name: any }\nspec:\n  rule: crontab-to-cronjob\n  \
         cases:\n    - name: renders\n      parent:\n        apiVersion: stable.example.com/v1\n        kind: CronTab\n        \
         metadata: { name: c, namespace: default }\n        spec: { cronSpec: \"0 * * * *\", image: x }\n      \
         expect: { status: {} }\n",
    )
    .unwrap();
    let out = ruleplane(&["test", dir_text], &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(&format!("{file}:{typo}:11: error[schema]")), "{stdout}");
}
