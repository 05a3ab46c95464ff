//! The Helm chart on a real apiserver: it installs, and its RBAC is exactly enough for the manager.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::manager_runtime::rd_rule;
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, control_plane, eventually, test_namespace};

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repo root")
}

fn helm(args: &[&str]) -> String {
    let plane = control_plane();
    let out = Command::new(plane.bin_dir.join("helm"))
        .args(args)
        .arg("--kubeconfig")
        .arg(&plane.kubeconfig)
        .output()
        .expect("run helm (built by tests/control-plane/build.sh)");
    assert!(
        out.status.success(),
        "helm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn helm_chart_installs_and_its_rbac_is_enough_for_the_manager() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "helm").await;
    let chart = repo_root().join("helm/ruleplane");
    let chart = chart.to_str().expect("utf-8 path");
    let lint = helm(&["lint", chart, "--strict"]);
    assert!(lint.contains("0 chart(s) failed"), "{lint}");

    let rules = temp_dir("helm");
    let rule_file = rules.join("widget.yaml");
    std::fs::write(&rule_file, rd_rule("widget", "widget", "helm.test", "")).unwrap();
    let release = format!("rp-{}", &ns[ns.len().saturating_sub(12)..]);
    // A Reconciler too: its permissions come from `ruleplane rbac --output helm-values`, as a user gets them.
    // Another's child lands in another namespace: its parent (a ServiceAccount) needs the cleanup finalizer, a
    // patch of a kind the rules do not otherwise write.
    let mirror_ns = test_namespace(&client, "helm-mirror").await;
    let copy_rule = rules.join("copy.yaml");
    std::fs::write(
        &copy_rule,
        format!(
            r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: copy-{release} }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, namespace: {ns}, selector: {{ matchLabels: {{ helm-parent: "yes" }} }} }}
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-copy" }}
        data: {{ from: chart }}
"#
        ),
    )
    .unwrap();
    std::fs::write(
        rules.join("mirror.yaml"),
        format!(
            r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: mirror-{release} }}
spec:
  for: {{ apiVersion: v1, kind: ServiceAccount, namespace: {ns}, selector: {{ matchLabels: {{ helm-parent: "yes" }} }} }}
  children:
    - id: mirror
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-mirror", namespace: {mirror_ns} }}
        data: {{ from: chart }}
"#
        ),
    )
    .unwrap();
    let rbac_values = Command::new(env!("CARGO_BIN_EXE_ruleplane"))
        .args(["rbac", "--output", "helm-values", "--rules"])
        .arg(&rules)
        .output()
        .expect("run ruleplane rbac");
    assert!(
        rbac_values.status.success(),
        "{}",
        String::from_utf8_lossy(&rbac_values.stderr)
    );
    // Next to the rules, not among them: the manager reads every YAML file there as a rule.
    let files = temp_dir("helm-files");
    let values_file = files.join("rbac-values.yaml");
    std::fs::write(&values_file, &rbac_values.stdout).unwrap();
    assert!(
        !String::from_utf8_lossy(&rbac_values.stdout).contains('*'),
        "no wildcard in the derived rules"
    );
    helm(&[
        "install",
        &release,
        chart,
        "--namespace",
        &ns,
        "-f",
        values_file.to_str().expect("utf-8 path"),
        "--set-file",
        &format!("rules.widget\\.yaml={}", rule_file.display()),
        "--set-file",
        &format!("rules.copy\\.yaml={}", copy_rule.display()),
    ]);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deployment = deployments
        .get(&format!("{release}-ruleplane"))
        .await
        .expect("Deployment installed");
    assert_eq!(deployment.spec.replicas, Some(2));
    let spread = deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.clone())
        .unwrap_or_default();
    assert_eq!(
        spread[0].topology_key, "kubernetes.io/hostname",
        "replicas spread over nodes by default"
    );
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let budget = budgets
        .get(&format!("{release}-ruleplane"))
        .await
        .expect("PodDisruptionBudget installed");
    assert_eq!(
        budget.spec.and_then(|s| s.max_unavailable),
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let rules_cm = configmaps
        .get(&format!("{release}-ruleplane-rules"))
        .await
        .expect("rules ConfigMap");
    assert!(rules_cm.data.unwrap_or_default().contains_key("widget.yaml"));

    // The chart's ClusterRole grants exactly what `ruleplane rbac` derives from the rules: on CRDs, create and
    // the watch for any, get/patch on the declared one only, and no delete (its rule keeps the CRD).
    let role = Api::<ClusterRole>::all(client.clone())
        .get(&format!("{release}-ruleplane"))
        .await
        .expect("the chart's ClusterRole");
    let chart_grants = granted(role.rules.as_deref().unwrap_or_default());
    let crd_grants: Vec<&Grant> = chart_grants
        .iter()
        .filter(|g| g.1 == "customresourcedefinitions")
        .collect();
    let crd = |verb: &str, name: Option<&str>| {
        (
            "apiextensions.k8s.io".to_owned(),
            "customresourcedefinitions".to_owned(),
            verb.to_owned(),
            name.map(str::to_owned),
        )
    };
    let named = Some("widgets.helm.test");
    assert_eq!(
        crd_grants,
        [
            &crd("create", None),
            &crd("get", named),
            &crd("list", None),
            &crd("patch", named),
            &crd("watch", None)
        ],
        "CRD permissions of the chart's ClusterRole"
    );
    let derived = Command::new(env!("CARGO_BIN_EXE_ruleplane"))
        .args(["rbac", "--rules"])
        .arg(&rules)
        .output()
        .expect("run ruleplane rbac");
    assert!(derived.status.success(), "{}", String::from_utf8_lossy(&derived.stderr));
    let derived: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&derived.stdout)).expect("YAML documents");
    let derived: ClusterRole = serde_json::from_value(derived[0].clone()).expect("a ClusterRole first");
    assert_eq!(
        chart_grants,
        granted(derived.rules.as_deref().unwrap_or_default()),
        "the chart with the derived values grants what `ruleplane rbac` prints"
    );

    // Run the manager as the chart's ServiceAccount (no kubelet here, so outside a pod): the chart's RBAC
    // must cover everything the permission check asks for, and the CRD must actually get registered.
    let sa = format!("{release}-ruleplane");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let token: serde_json::Value = accounts
        .create_subresource(
            "token",
            &sa,
            &PostParams::default(),
            &json!({"spec": {"expirationSeconds": 3600}}),
        )
        .await
        .expect("TokenRequest for the chart's ServiceAccount");
    let token = token["status"]["token"].as_str().expect("token").to_owned();
    let admin = std::fs::read_to_string(&control_plane().kubeconfig).unwrap();
    let start = admin.find("token: ").expect("token line") + "token: ".len();
    let end = admin[start..].find('\n').map_or(admin.len(), |e| start + e);
    let sa_kubeconfig = files.join("service-account.kubeconfig");
    std::fs::write(&sa_kubeconfig, format!("{}{}{}", &admin[..start], token, &admin[end..])).unwrap();

    // With the chart's own flags (all but the paths and addresses a pod has and this process has not): the
    // binary must accept every flag the chart renders.
    let chart_args: Vec<String> = deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].args.clone())
        .unwrap_or_default();
    let local = [
        "run",
        "--rules=",
        "--metrics-bind-address=",
        "--health-probe-bind-address=",
    ];
    let chart_flags: Vec<&str> = chart_args
        .iter()
        .map(String::as_str)
        .filter(|arg| !local.iter().any(|l| arg.starts_with(l)))
        .collect();
    assert!(
        chart_flags.contains(&"--worker-threads=0") && chart_flags.contains(&"--kube-api-qps=0"),
        "{chart_flags:?}"
    );
    let manager = ManagerProcess::start_as(&sa_kubeconfig, &rules, &ns, "helm-sa", &chart_flags);
    manager.wait_ready(Duration::from_secs(40)).await;
    let (_, body) = eventually(
        Duration::from_secs(40),
        "rule running as the chart's ServiceAccount",
        || async {
            manager
                .readyz()
                .await
                .filter(|(_, b)| b.contains("resource-definitions") && b.contains("rule widget.helm.test"))
        },
    )
    .await;
    assert!(
        !body.contains("lacks RBAC permissions"),
        "chart RBAC is incomplete:\n{body}"
    );
    let parent: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "p", "labels": {"helm-parent": "yes"}}})).unwrap();
    configmaps
        .create(&PostParams::default(), &parent)
        .await
        .expect("parent ConfigMap");
    eventually(
        Duration::from_secs(30),
        "child applied as the chart's ServiceAccount",
        || async { configmaps.get_opt("p-copy").await.ok().flatten().map(|_| ()) },
    )
    .await;
    let labelled: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "p", "labels": {"helm-parent": "yes"}}})).unwrap();
    accounts
        .create(&PostParams::default(), &labelled)
        .await
        .expect("parent ServiceAccount");
    let mirrors: Api<ConfigMap> = Api::namespaced(client.clone(), &mirror_ns);
    eventually(
        Duration::from_secs(30),
        "finalizer and cross-namespace child as the chart's ServiceAccount",
        || async {
            mirrors.get_opt("p-mirror").await.ok().flatten()?;
            let parent = accounts.get_opt("p").await.ok().flatten()?;
            parent
                .metadata
                .finalizers
                .unwrap_or_default()
                .contains(&ruleplane_config::ownership::cleanup_finalizer(&format!(
                    "mirror-{release}"
                )))
                .then_some(())
        },
    )
    .await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    eventually(
        Duration::from_secs(30),
        "CRD registered by the ServiceAccount",
        || async { crds.get_opt("widgets.helm.test").await.ok().flatten().map(|_| ()) },
    )
    .await;

    // A rules change is an upgrade of the ConfigMap only: the pod template stays the same, so no pod restarts
    // (the manager hot-reloads the volume).
    let generation = deployment.metadata.generation;
    let template_before = serde_json::to_value(&deployment.spec.template).unwrap();
    std::fs::write(&rule_file, rd_rule("gadget", "gadget", "helm.test", "")).unwrap();
    helm(&[
        "upgrade",
        &release,
        chart,
        "--namespace",
        &ns,
        "--reuse-values",
        "--set-file",
        &format!("rules.widget\\.yaml={}", rule_file.display()),
    ]);
    let rules_cm = configmaps
        .get(&format!("{release}-ruleplane-rules"))
        .await
        .expect("rules ConfigMap");
    assert!(
        rules_cm.data.unwrap_or_default()["widget.yaml"].contains("gadget"),
        "rules upgraded"
    );
    let upgraded = deployments
        .get(&format!("{release}-ruleplane"))
        .await
        .expect("Deployment");
    assert_eq!(
        upgraded.metadata.generation, generation,
        "a rules change must not roll the pods"
    );
    assert_eq!(serde_json::to_value(&upgraded.spec.template).unwrap(), template_before);
}

/// One permission a policy rule grants: API group, resource, verb, and the object's name when limited to one.
type Grant = (String, String, String, Option<String>);

/// Every permission `rules` grant, one by one: rules compare however they are grouped and ordered.
fn granted(rules: &[PolicyRule]) -> std::collections::BTreeSet<Grant> {
    let mut out = std::collections::BTreeSet::new();
    for rule in rules {
        let names: Vec<Option<String>> = match rule.resource_names.as_deref() {
            Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.as_deref().unwrap_or_default() {
            for resource in rule.resources.as_deref().unwrap_or_default() {
                for verb in &rule.verbs {
                    for name in &names {
                        out.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                    }
                }
            }
        }
    }
    out
}

/// `helm template` with `values` (`--set` pairs), applied to the apiserver with a server-side dry run: every
/// object the chart renders is one the apiserver accepts (schema, defaults, admission).
fn chart_applies_with_server_dry_run(ns: &str, values: &[&str]) -> String {
    let plane = control_plane();
    let mut args = vec!["template".to_string(), "rp".to_string()];
    args.push(repo_root().join("helm/ruleplane").display().to_string());
    args.extend(["--namespace".to_string(), ns.to_string()]);
    for value in values {
        args.extend(["--set".to_string(), (*value).to_string()]);
    }
    let rendered = Command::new(plane.bin_dir.join("helm"))
        .args(&args)
        .output()
        .expect("run helm");
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    kubectl_with_input(
        &["apply", "--server-side", "--dry-run=server", "-n", ns, "-f", "-"],
        &rendered.stdout,
    )
}

#[tokio::test]
async fn chart_renders_objects_the_apiserver_accepts_with_default_and_other_values() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "helm-dry-run").await;
    // The Prometheus Operator's ServiceMonitor kind, so the optional ServiceMonitor is checked too (a minimal
    // CRD: the operator's own schema is not available offline).
    kubectl_with_input(
        &["apply", "--server-side", "-f", "-"],
        r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"servicemonitors.monitoring.coreos.com"},
"spec":{"group":"monitoring.coreos.com","scope":"Namespaced",
"names":{"kind":"ServiceMonitor","plural":"servicemonitors","singular":"servicemonitor","listKind":"ServiceMonitorList"},
"versions":[{"name":"v1","served":true,"storage":true,
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#
            .as_bytes(),
    );
    eventually(Duration::from_secs(20), "ServiceMonitor kind served", || async {
        kube::discovery::Discovery::new(client.clone())
            .filter(&["monitoring.coreos.com"])
            .run()
            .await
            .ok()
            .filter(|d| d.groups().next().is_some())
            .map(|_| ())
    })
    .await;

    let defaults = chart_applies_with_server_dry_run(&ns, &[]);
    for object in [
        "deployment.apps/rp-ruleplane",
        "poddisruptionbudget.policy/rp-ruleplane",
        "configmap/rp-ruleplane-rules",
        "serviceaccount/rp-ruleplane",
        "service/rp-ruleplane-metrics",
    ] {
        assert!(defaults.contains(object), "{object} not applied:\n{defaults}");
    }
    assert!(
        !defaults.contains("servicemonitor"),
        "ServiceMonitor is off by default:\n{defaults}"
    );

    let others = chart_applies_with_server_dry_run(
        &ns,
        &[
            "replicaCount=1",
            "metrics.serviceMonitor.enabled=true",
            "metrics.serviceMonitor.labels.release=prometheus",
            "metrics.service.enabled=true",
            "existingRulesConfigMap=team-rules",
            "serviceAccount.create=false",
            "serviceAccount.name=ruleplane-existing",
            "rbac.create=false",
            "logFormat=text",
            "leaderElection.enabled=false",
            "priorityClassName=system-cluster-critical",
            "nodeSelector.kubernetes\\.io/os=linux",
        ],
    );
    assert!(
        others.contains("servicemonitor.monitoring.coreos.com/rp-ruleplane"),
        "{others}"
    );
    assert!(
        !others.contains("poddisruptionbudget"),
        "no budget for one replica:\n{others}"
    );
    assert!(
        !others.contains("configmap/rp-ruleplane-rules"),
        "rules from the existing ConfigMap:\n{others}"
    );
    assert!(
        !others.contains("serviceaccount/"),
        "no ServiceAccount created:\n{others}"
    );
    assert!(!others.contains("clusterrole"), "no RBAC created:\n{others}");
}

/// Runs the plane's kubectl with `args`, `input` on its standard input; fails the test when kubectl fails and
/// returns its standard output.
fn kubectl_with_input(args: &[&str], input: &[u8]) -> String {
    use std::io::Write as _;
    let plane = control_plane();
    let mut kubectl = Command::new(plane.bin_dir.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&plane.kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubectl");
    kubectl
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("pipe to kubectl");
    let out = kubectl.wait_with_output().expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn rbac_command_prints_roles_the_apiserver_accepts() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "rbac-command").await;
    let out = Command::new(env!("CARGO_BIN_EXE_ruleplane"))
        .args(["rbac", "--rules"])
        .arg(repo_root().join("examples"))
        .arg("--crds")
        .arg(repo_root().join("examples/crds"))
        .args(["--name", &format!("{ns}-ruleplane"), "--leader-election-namespace", &ns])
        .output()
        .expect("run ruleplane rbac");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = kubectl_with_input(&["apply", "--dry-run=server", "-f", "-"], &out.stdout);
    assert!(
        stdout.contains(&format!(
            "clusterrole.rbac.authorization.k8s.io/{ns}-ruleplane created (server dry run)"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "role.rbac.authorization.k8s.io/{ns}-ruleplane created (server dry run)"
        )),
        "{stdout}"
    );
}

#[test]
fn a_bad_chart_value_fails_with_a_message_naming_it() {
    let plane = control_plane();
    let chart = repo_root().join("helm/ruleplane");
    let template = |set: &str| {
        Command::new(plane.bin_dir.join("helm"))
            .args(["template", "rp"])
            .arg(&chart)
            .args(["--set", set])
            .output()
            .expect("run helm")
    };
    for (set, expected) in [
        ("replicaCount=0", "at '/replicaCount': minimum: got 0, want 1"),
        (
            "leaderElection.leaseDuration=15",
            "at '/leaderElection/leaseDuration': got number, want string",
        ),
        ("leaderElection.renewDeadline=ten", "at '/leaderElection/renewDeadline'"),
        ("metrics.prot=8080", "additional properties 'prot' not allowed"),
        ("logFormat=yaml", "at '/logFormat'"),
        (
            "rbac.customResourceDefinitions.deletable={widgets.example.com}",
            "widgets.example.com is not in rbac.customResourceDefinitions.names",
        ),
        (
            "rbac.customResourceDefinitions.names={Not_A_Name}",
            "at '/rbac/customResourceDefinitions/names/0'",
        ),
    ] {
        let out = template(set);
        assert!(!out.status.success(), "--set {set} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "--set {set}: {stderr}");
    }
    let good = template("leaderElection.leaseDuration=20s");
    assert!(good.status.success(), "{}", String::from_utf8_lossy(&good.stderr));
    assert!(
        !String::from_utf8_lossy(&good.stdout).contains("customresourcedefinitions"),
        "nothing on CRDs by default"
    );
    // `delete` only on the CRDs named deletable, `get`/`patch` only on the declared ones.
    let deleting = Command::new(plane.bin_dir.join("helm"))
        .args(["template", "rp"])
        .arg(&chart)
        .args([
            "--set",
            "rbac.customResourceDefinitions.names={gadgets.example.com,widgets.example.com}",
            "--set",
            "rbac.customResourceDefinitions.deletable={gadgets.example.com}",
            "--show-only",
            "templates/rbac.yaml",
        ])
        .output()
        .expect("run helm");
    assert!(
        deleting.status.success(),
        "{}",
        String::from_utf8_lossy(&deleting.stderr)
    );
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&deleting.stdout)).expect("YAML documents");
    let role: ClusterRole = serde_json::from_value(documents[0].clone()).expect("the ClusterRole first");
    let crd_grants: Vec<(String, Option<String>)> = granted(role.rules.as_deref().unwrap_or_default())
        .into_iter()
        .filter(|g| g.1 == "customresourcedefinitions")
        .map(|(_, _, verb, name)| (verb, name))
        .collect();
    let grant = |verb: &str, name: Option<&str>| (verb.to_owned(), name.map(str::to_owned));
    assert_eq!(
        crd_grants,
        [
            grant("create", None),
            grant("delete", Some("gadgets.example.com")),
            grant("get", Some("gadgets.example.com")),
            grant("get", Some("widgets.example.com")),
            grant("list", None),
            grant("patch", Some("gadgets.example.com")),
            grant("patch", Some("widgets.example.com")),
            grant("watch", None),
        ]
    );
    let monitored = template("metrics.serviceMonitor.enabled=true");
    assert!(String::from_utf8_lossy(&monitored.stdout).contains("kind: ServiceMonitor"));
    assert!(
        !String::from_utf8_lossy(&good.stdout).contains("kind: ServiceMonitor"),
        "off by default"
    );
}
