//! RuleTest fixtures: loading (with located errors) and running against small rule sets.

use super::*;
use crate::load_str;
use crate::rule_set::RuleSet;

const RULES: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: webapps.test.dev }
spec:
  group: test.dev
  names: { kind: WebApp, plural: webapps }
  versions:
    - name: v1
      schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
      subresources: { status: {} }
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: web }
spec:
  for: { apiVersion: test.dev/v1, kind: WebApp }
  lookups:
    defaults: { apiVersion: v1, kind: ConfigMap, name: web-defaults, jsonPath: "{.data}" }
  children:
    - id: service
      template: |
        apiVersion: v1
        kind: Service
        metadata: { name: {{json metadata.name}} }
        spec: { ports: [ { port: 80 } ] }
      readyWhen: "{.spec.clusterIP}"
    - id: app
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: { name: {{json metadata.name}} }
        spec:
          replicas: {{default lookups.defaults.replicas 1}}
          selector: { matchLabels: { app: web } }
          template:
            metadata: { annotations: { service-ip: {{json children.service.spec.clusterIP}} } }
    - id: extra
      includeWhen: "{.spec.extra}"
      template: |
        apiVersion: v1
        kind: Secret
        metadata: { name: {{json metadata.name}} }
  status:
    address: "{.children.service.spec.clusterIP}"
---
apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: packer }
spec:
  schedulerName: packer
  algorithmProvider: ClusterAutoscalerProvider
---
apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: claims }
spec:
  schedulerName: claims
  ignoredFeatures: [persistentVolumeClaims]
"#;

fn rules() -> RuleSet {
    load_str("rules.yaml", RULES).expect("fixture rules load")
}

fn run(test: &str) -> Vec<SuiteOutcome> {
    let rules = rules();
    let suites = load_tests(&[("web.test.yaml".to_string(), test.to_string())], &rules).expect("test loads");
    suites.iter().map(|suite| run_suite(&rules, suite)).collect()
}

fn load_errors(test: &str) -> String {
    match load_tests(&[("web.test.yaml".to_string(), test.to_string())], &rules()) {
        Ok(_) => panic!("the test loaded"),
        Err(diagnostics) => diagnostics.to_string(),
    }
}

fn failures(outcomes: &[SuiteOutcome]) -> Vec<String> {
    outcomes
        .iter()
        .flat_map(|s| &s.cases)
        .flat_map(|c| c.failures.clone())
        .collect()
}

const HEADER: &str = "apiVersion: ruleplane.dev/v1alpha1\nkind: RuleTest\nmetadata: { name: web-tests }\n";

#[test]
fn a_reconciler_case_passes_with_subset_children_observed_children_and_status() {
    let test = format!(
        r#"{HEADER}spec:
  rule: web
  cases:
    - name: the deployment waits for the service's address
      parent: {{ apiVersion: test.dev/v1, kind: WebApp, metadata: {{ name: shop, namespace: team-a }} }}
      expect:
        children:
          - {{ apiVersion: v1, kind: Service, metadata: {{ name: shop }} }}
        status:
          conditions: [ {{ type: Ready, status: "False", reason: ChildrenNotReady }} ]
    - name: with the service observed, the deployment reads its address
      parent: {{ apiVersion: test.dev/v1, kind: WebApp, metadata: {{ name: shop, generation: 3 }}, spec: {{ extra: "yes" }} }}
      lookups:
        - {{ apiVersion: v1, kind: ConfigMap, metadata: {{ name: web-defaults }}, data: {{ replicas: "3" }} }}
      observed:
        service: {{ apiVersion: v1, kind: Service, metadata: {{ name: shop }}, spec: {{ clusterIP: 10.0.0.7 }} }}
      expect:
        children:
          - {{ apiVersion: v1, kind: Service, metadata: {{ name: shop }} }}
          - apiVersion: apps/v1
            kind: Deployment
            metadata: {{ name: shop, labels: {{ app.kubernetes.io/managed-by: ruleplane }} }}
            spec: {{ replicas: 3, template: {{ metadata: {{ annotations: {{ service-ip: 10.0.0.7 }} }} }} }}
          - {{ apiVersion: v1, kind: Secret, metadata: {{ name: shop }} }}
        status:
          address: 10.0.0.7
          observedGeneration: 3
          conditions: [ {{ type: Synced, status: "True" }} ]
"#
    );
    let outcomes = run(&test);
    assert_eq!(failures(&outcomes), Vec::<String>::new());
    assert_eq!(totals(&outcomes), (2, 0));
}

#[test]
fn a_reconciler_case_fails_with_a_diff_and_names_unexpected_and_missing_children() {
    let test = format!(
        r#"{HEADER}spec:
  rule: web
  cases:
    - name: wrong
      parent: {{ apiVersion: test.dev/v1, kind: WebApp, metadata: {{ name: shop }}, spec: {{ extra: "1" }} }}
      observed:
        service: {{ apiVersion: v1, kind: Service, metadata: {{ name: shop }}, spec: {{ clusterIP: 10.0.0.7 }} }}
      expect:
        children:
          - {{ apiVersion: v1, kind: Service, metadata: {{ name: shop }} }}
          - {{ apiVersion: apps/v1, kind: Deployment, metadata: {{ name: shop }}, spec: {{ replicas: 2 }} }}
          - {{ apiVersion: v1, kind: ConfigMap, metadata: {{ name: nope }} }}
        status: {{ address: 10.9.9.9 }}
"#
    );
    let found = failures(&run(&test));
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(
        found[0].starts_with("child apps/v1 Deployment shop differs:\n--- expected\n+++ rendered\n"),
        "{}",
        found[0]
    );
    assert!(found[0].contains("-  replicas: 2\n+  replicas: 1\n"), "{}", found[0]);
    assert_eq!(found[1], "child v1 ConfigMap nope was not rendered");
    assert!(
        found[2].starts_with("child v1 Secret shop was rendered but is not expected:"),
        "{}",
        found[2]
    );
    assert!(
        found[3].contains("-address: \"10.9.9.9\"\n+address: \"10.0.0.7\"\n"),
        "{}",
        found[3]
    );
}

#[test]
fn expected_render_errors_match_by_text() {
    let test = format!(
        r#"{HEADER}spec:
  rule: web
  cases:
    - name: a parent whose name no child may carry
      parent: {{ apiVersion: test.dev/v1, kind: WebApp, metadata: {{ name: Shop_1 }} }}
      observed:
        service: {{ apiVersion: v1, kind: Service, metadata: {{ name: shop }}, spec: {{ clusterIP: 10.0.0.7 }} }}
      lookups:
        - {{ apiVersion: v1, kind: ConfigMap, metadata: {{ name: web-defaults }}, data: {{ replicas: "x: [" }} }}
      expect:
        error: "rendered name `Shop_1` is not a valid Kubernetes name"
"#
    );
    let found = failures(&run(&test));
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn a_scheduler_case_checks_nodes_and_failed_scheduling_messages() {
    let test = format!(
        r#"{HEADER}spec:
  rule: packer
  cases:
    - name: bin-packing fills the busier node; a huge pod fits nowhere
      nodes:
        - {{ metadata: {{ name: a }}, status: {{ allocatable: {{ cpu: "4", memory: 8Gi, pods: "110" }} }} }}
        - {{ metadata: {{ name: b }}, status: {{ allocatable: {{ cpu: "4", memory: 8Gi, pods: "110" }} }} }}
      existing:
        - {{ metadata: {{ name: running }}, spec: {{ nodeName: b, containers: [ {{ name: c, resources: {{ requests: {{ cpu: "2" }} }} }} ] }} }}
      pods:
        - {{ metadata: {{ name: small }}, spec: {{ containers: [ {{ name: c, resources: {{ requests: {{ cpu: 500m }} }} }} ] }} }}
        - {{ metadata: {{ name: huge, namespace: batch }}, spec: {{ containers: [ {{ name: c, resources: {{ requests: {{ cpu: "8" }} }} }} ] }} }}
      expect:
        placements:
          - {{ pod: small, node: b }}
          - {{ pod: batch/huge, message: "0/2 nodes are available: 2 Insufficient cpu." }}
    - name: a wrong expectation fails
      nodes:
        - {{ metadata: {{ name: a }}, status: {{ allocatable: {{ cpu: "4", memory: 8Gi, pods: "110" }} }} }}
      pods:
        - {{ metadata: {{ name: small }}, spec: {{ containers: [ {{ name: c }} ] }} }}
      expect:
        placements:
          - {{ pod: small, unschedulable: true }}
"#
    );
    let outcomes = run(&test);
    assert!(outcomes[0].cases[0].passed(), "{:#?}", outcomes[0].cases[0].failures);
    assert_eq!(
        outcomes[0].cases[1].failures,
        vec!["pod default/small: expected it to be unschedulable, got bound to a".to_string()]
    );
}

#[test]
fn a_scheduler_case_checks_the_preemption_a_pod_would_make() {
    let cases = r#"
    - name: the budget spares db, batch goes
      nodes:
        - { metadata: { name: a }, status: { allocatable: { cpu: "2", memory: 8Gi, pods: "110" } } }
        - { metadata: { name: b }, status: { allocatable: { cpu: "2", memory: 8Gi, pods: "110" } } }
      existing:
        - { metadata: { name: batch }, spec: { nodeName: a, priority: 5, containers: [ { name: c, resources: { requests: { cpu: "2" } } } ] } }
        - { metadata: { name: db, labels: { app: db } }, spec: { nodeName: b, priority: 1, containers: [ { name: c, resources: { requests: { cpu: "2" } } } ] } }
      pdbs:
        - { metadata: { name: db }, spec: { selector: { matchLabels: { app: db } } }, status: { disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1 } }
      pods:
        - { metadata: { name: urgent }, spec: { priority: 100, containers: [ { name: c, resources: { requests: { cpu: "1" } } } ] } }
      expect:
        placements:
          - { pod: urgent, preemption: { node: a, victims: [ batch ] } }
    - name: without the budget db goes, not what is expected
      nodes:
        - { metadata: { name: a }, status: { allocatable: { cpu: "2", memory: 8Gi, pods: "110" } } }
        - { metadata: { name: b }, status: { allocatable: { cpu: "2", memory: 8Gi, pods: "110" } } }
      existing:
        - { metadata: { name: batch }, spec: { nodeName: a, priority: 5, containers: [ { name: c, resources: { requests: { cpu: "2" } } } ] } }
        - { metadata: { name: db, labels: { app: db } }, spec: { nodeName: b, priority: 1, containers: [ { name: c, resources: { requests: { cpu: "2" } } } ] } }
      pods:
        - { metadata: { name: urgent }, spec: { priority: 100, containers: [ { name: c, resources: { requests: { cpu: "1" } } } ] } }
      expect:
        placements:
          - { pod: urgent, preemption: { node: a, victims: [ batch ] } }
    - name: an equal priority preempts nothing
      nodes:
        - { metadata: { name: a }, status: { allocatable: { cpu: "2", memory: 8Gi, pods: "110" } } }
      existing:
        - { metadata: { name: peer }, spec: { nodeName: a, priority: 100, containers: [ { name: c, resources: { requests: { cpu: "2" } } } ] } }
      pods:
        - { metadata: { name: urgent }, spec: { priority: 100, containers: [ { name: c, resources: { requests: { cpu: "1" } } } ] } }
      expect:
        placements:
          - { pod: urgent, preemption: { node: a, victims: [ peer ] } }
"#;
    let test = format!("{HEADER}spec:\n  rule: packer\n  cases:{cases}");
    let outcomes = run(&test);
    let cases = &outcomes[0].cases;
    assert!(cases[0].passed(), "{:#?}", cases[0].failures);
    assert_eq!(
        cases[1].failures,
        vec!["pod default/urgent: expected it to preempt default/batch on a, got default/db on b".to_string()]
    );
    assert_eq!(
        cases[2].failures,
        vec!["pod default/urgent: expected it to preempt default/peer on a, but preemption finds no node".to_string()]
    );
}

#[test]
fn a_scheduler_case_gives_storage_objects_to_the_volume_plugins() {
    let cases = r#"
    - name: the bound volume's zone decides; a ReadWriteOncePod claim in use blocks every node
      nodes:
        - { metadata: { name: a, labels: { topology.kubernetes.io/zone: za } }, status: { allocatable: { cpu: "2", memory: 8Gi, pods: "110" } } }
        - { metadata: { name: b, labels: { topology.kubernetes.io/zone: zb } }, status: { allocatable: { cpu: "2", memory: 8Gi, pods: "110" } } }
      existing:
        - { metadata: { name: holder }, spec: { nodeName: a, containers: [ { name: c } ], volumes: [ { name: d, persistentVolumeClaim: { claimName: solo } } ] } }
      persistentVolumeClaims:
        - { metadata: { name: data, annotations: { pv.kubernetes.io/bind-completed: "yes" } }, spec: { volumeName: pv-b } }
        - { metadata: { name: solo, annotations: { pv.kubernetes.io/bind-completed: "yes" } }, spec: { accessModes: [ ReadWriteOncePod ], volumeName: pv-a } }
        - { metadata: { name: away, annotations: { pv.kubernetes.io/bind-completed: "yes" } }, spec: { volumeName: pv-c } }
      persistentVolumes:
        - { metadata: { name: pv-c, labels: { topology.kubernetes.io/zone: zc } } }
        - { metadata: { name: pv-b, labels: { topology.kubernetes.io/zone: zb } } }
        - { metadata: { name: pv-a } }
      storageClasses:
        - { metadata: { name: unused }, provisioner: example.com/p }
      pods:
        - { metadata: { name: zoned }, spec: { containers: [ { name: c } ], volumes: [ { name: d, persistentVolumeClaim: { claimName: data } } ] } }
        - { metadata: { name: second }, spec: { containers: [ { name: c } ], volumes: [ { name: d, persistentVolumeClaim: { claimName: solo } } ] } }
        - { metadata: { name: far }, spec: { containers: [ { name: c } ], volumes: [ { name: d, persistentVolumeClaim: { claimName: away } } ] } }
      expect:
        placements:
          - { pod: zoned, node: b }
          - { pod: far, message: "0/2 nodes are available: 2 node(s) had no available volume zone." }
          - pod: second
            message: "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod."
"#;
    let test = format!("{HEADER}spec:\n  rule: claims\n  cases:{cases}");
    let outcomes = run(&test);
    assert!(outcomes[0].cases[0].passed(), "{:#?}", outcomes[0].cases[0].failures);

    let wrong_kind = format!(
        "{HEADER}spec:\n  rule: claims\n  cases:\n    - name: x\n      persistentVolumes:\n        - {{ kind: Node, metadata: {{ name: n }} }}\n      pods: [ {{ metadata: {{ name: p }} }} ]\n      expect: {{ placements: [ {{ pod: p, node: a }} ] }}\n"
    );
    let text = load_errors(&wrong_kind);
    assert!(
        text.contains("`persistentVolumes` holds PersistentVolume objects, found a Node"),
        "{text}"
    );
}

#[test]
fn load_errors_are_located() {
    let unknown_rule = format!(
        "{HEADER}spec:\n  rule: webb\n  cases:\n    - name: x\n      parent: {{}}\n      expect: {{ error: x }}\n"
    );
    let text = load_errors(&unknown_rule);
    assert!(text.contains("web.test.yaml:5:9"), "{text}");
    assert!(text.contains("no Reconciler or SchedulerPolicy named `webb`"), "{text}");
    assert!(text.contains("did you mean `web`?"), "{text}");

    let mixed = format!(
        "{HEADER}spec:\n  rule: web\n  cases:\n    - name: x\n      parent: {{ apiVersion: v1, kind: Secret, metadata: {{ name: s }} }}\n      pods: [ {{ metadata: {{ name: p }} }} ]\n      expect: {{ children: [] }}\n"
    );
    let text = load_errors(&mixed);
    assert!(
        text.contains("web.test.yaml:8:7")
            && text.contains("the rule watches test.dev/v1 WebApp; this parent is v1 Secret"),
        "{text}"
    );
    assert!(
        text.contains("web.test.yaml:9:7") && text.contains("`pods` is for the other kind of test"),
        "{text}"
    );

    let bad_field =
        format!("{HEADER}spec:\n  rule: packer\n  cases:\n    - name: x\n      nodez: []\n      expect: {{}}\n");
    let text = load_errors(&bad_field);
    assert!(text.contains("web.test.yaml:8:7"), "{text}");

    let bad_pod = format!(
        "{HEADER}spec:\n  rule: packer\n  cases:\n    - name: x\n      pods:\n        - {{ kind: Node, metadata: {{ name: n }} }}\n      expect: {{ placements: [ {{ pod: ghost, node: a }} ] }}\n"
    );
    let text = load_errors(&bad_pod);
    assert!(
        text.contains("web.test.yaml:9:11") && text.contains("`pods` holds Pod objects, found a Node"),
        "{text}"
    );
    assert!(text.contains("no pod `default/ghost`"), "{text}");
}

#[test]
fn rules_files_and_test_files_are_told_apart_by_name() {
    use std::path::Path;
    assert!(is_test_file(Path::new("rules/web.test.yaml")));
    assert!(is_test_file(Path::new("web.test.yml")));
    assert!(!is_test_file(Path::new("rules/web.yaml")));
    assert!(!is_test_file(Path::new("rules/test.yaml")));
    let rule_test_among_rules = format!("{HEADER}spec: {{ rule: web, cases: [] }}\n");
    let error = load_str("rules.yaml", &rule_test_among_rules).unwrap_err().to_string();
    assert!(
        error.contains("rules.yaml:2:7") && error.contains("tests go in files named `*.test.yaml`"),
        "{error}"
    );
}

/// A gang case in the Workload API of the version the rules were loaded for: v1.37's PodGroups and
/// `schedulingGroup`, v1.35's Workloads and `workloadRef`; a PodGroup of another version is refused where it stands.
#[test]
fn a_gang_case_reads_the_workload_api_of_the_version_tested() {
    let case = |gang: &str, reference: &str| {
        format!(
            r#"{HEADER}spec:
  rule: packer
  cases:
    - name: a gang of two is held short of a member
{gang}
      nodes:
        - {{ metadata: {{ name: a }}, status: {{ allocatable: {{ cpu: "4", memory: 8Gi, pods: "110" }} }} }}
      pods:
        - {{ metadata: {{ name: m0 }}, spec: {{ {reference}, containers: [ {{ name: c }} ] }} }}
      expect:
        placements:
          - {{ pod: m0, message: "pod group default/train{group} has 1 of 2 members ready" }}
"#,
            group = if reference.starts_with("workloadRef") {
                "/workers"
            } else {
                ""
            },
        )
    };
    let v1_37 = case(
        "      podGroups:\n        - { apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, metadata: { name: train }, \
         spec: { schedulingPolicy: { gang: { minCount: 2 } } } }",
        "schedulingGroup: { podGroupName: train }",
    );
    let outcomes = run(&v1_37);
    assert!(outcomes[0].cases[0].passed(), "{:#?}", outcomes[0].cases[0].failures);

    let v1_35 = case(
        "      workloads:\n        - { metadata: { name: train }, spec: { podGroups: [ { name: workers, policy: { gang: \
         { minCount: 2 } } } ] } }",
        "workloadRef: { name: train, podGroup: workers }",
    );
    let options = crate::LoadOptions {
        kubernetes_version: crate::KubernetesVersion::V1_35,
        ..crate::LoadOptions::default()
    };
    let rules = crate::load_str_with("rules.yaml", RULES, &options).expect("fixture rules load");
    let suites = load_tests(&[("web.test.yaml".to_string(), v1_35)], &rules).expect("test loads");
    let outcome = run_suite(&rules, &suites[0]);
    assert!(outcome.cases[0].passed(), "{:#?}", outcome.cases[0].failures);

    // v1.35 does not schedule by v1.37's PodGroups: refused at the item.
    let errors = match load_tests(&[("web.test.yaml".to_string(), v1_37)], &rules) {
        Ok(_) => panic!("the test loaded"),
        Err(diagnostics) => diagnostics.to_string(),
    };
    assert!(
        errors.contains(
            "a PodGroup of scheduling.k8s.io/v1beta1, which the Kubernetes version tested does not \
                         schedule by: its Workload API is scheduling.k8s.io/v1alpha1"
        ),
        "{errors}"
    );
}

/// A rule over the ConfigMaps labelled `card: "yes"` of namespace `teams`.
const SELECTIVE: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: cards }
spec:
  for: { apiVersion: v1, kind: ConfigMap, namespace: teams, selector: { matchLabels: { card: "yes" } } }
  children:
    - id: card
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-card" }
"#;

fn selective_case(metadata: &str, expect: &str) -> String {
    format!(
        "{HEADER}spec:\n  rule: cards\n  cases:\n    - name: a case\n      parent: {{ apiVersion: v1, kind: ConfigMap, \
         metadata: {metadata} }}\n      expect: {expect}\n"
    )
}

fn run_selective(test: &str) -> Vec<String> {
    let rules = load_str("rules.yaml", SELECTIVE).expect("fixture rules load");
    let suites = load_tests(&[("cards.test.yaml".to_string(), test.to_string())], &rules).expect("test loads");
    failures(&suites.iter().map(|suite| run_suite(&rules, suite)).collect::<Vec<_>>())
}

#[test]
fn a_case_whose_parent_the_rule_does_not_select_fails_unless_it_expects_so() {
    let children = "{ children: [ { apiVersion: v1, kind: ConfigMap, metadata: { name: a-card } } ] }";
    let selected = "{ name: a, namespace: teams, labels: { card: \"yes\" } }";
    assert_eq!(run_selective(&selective_case(selected, children)), Vec::<String>::new());
    // Left out, the namespace is where the rule looks.
    let no_namespace = "{ name: a, labels: { card: \"yes\" } }";
    assert_eq!(
        run_selective(&selective_case(no_namespace, children)),
        Vec::<String>::new()
    );
    for outside in [
        "{ name: a, namespace: teams }",
        "{ name: a, namespace: teams, labels: { card: \"no\" } }",
        "{ name: a, namespace: other, labels: { card: \"yes\" } }",
    ] {
        let failures = run_selective(&selective_case(outside, children));
        assert_eq!(failures.len(), 1, "{outside}: {failures:?}");
        assert!(
            failures[0].contains("does not select this parent")
                && failures[0].contains("selector `card=yes`, namespace `teams`"),
            "{}",
            failures[0]
        );
        let expected = run_selective(&selective_case(outside, "{ notSelected: true }"));
        assert_eq!(expected, Vec::<String>::new(), "{outside}");
    }
    let wrong = run_selective(&selective_case(selected, "{ notSelected: true }"));
    assert!(wrong[0].contains("its `for` selects it"), "{wrong:?}");
    let rules = load_str("rules.yaml", SELECTIVE).expect("fixture rules load");
    let both = selective_case(selected, "{ notSelected: true, children: [] }");
    let errors = load_tests(&[("cards.test.yaml".to_string(), both)], &rules).expect_err("refused");
    assert!(
        errors.to_string().contains("`notSelected` expects nothing else"),
        "{errors}"
    );
}
