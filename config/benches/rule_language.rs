//! Throughput of the rule language: loading and validating 1,000 rules, and rendering a typical Reconciler.
//!
//! Run with `cargo bench -p ruleplane-config --bench rule_language`; figures and machine are recorded in
//! `docs/benchmarks.md`. Divan prints the time per operation (median and mean) and, through the counters,
//! rules/s and renders/s ("item/s").

use std::path::PathBuf;
use std::sync::{LazyLock, OnceLock};

use divan::Bencher;
use divan::counter::ItemsCount;
use ruleplane_config::{Rule, RuleSet, gather_lookups, load_paths, load_str, render_children};
use serde_json::{Map, Value, json};

/// How many rules the loading benchmarks load: a quarter ResourceDefinitions, half Reconcilers (on the
/// defined kinds and on built-in kinds), a quarter SchedulerPolicies.
const RULE_COUNT: usize = 1_000;

fn main() {
    divan::main();
    if let Some(dir) = RULE_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The `index`-th generated rule, one YAML document.
fn rule(index: usize) -> String {
    let group = index / 4;
    match index % 4 {
        0 => format!(
            "apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata:
  name: widget{group}s.bench.example.com
spec:
  group: bench.example.com
  names: {{ kind: Widget{group}, plural: widget{group}s, shortNames: [w{group}] }}
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [image]
              properties:
                image: {{ type: string }}
                replicas: {{ type: integer, minimum: 1 }}
                env: {{ type: object, additionalProperties: {{ type: string }} }}
            status: {{ type: object, x-kubernetes-preserve-unknown-fields: true }}
      printerColumns:
        - {{ name: Image, type: string, jsonPath: .spec.image }}
      subresources: {{ status: {{}} }}
"
        ),
        1 => format!(
            "apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: widget{group}-runner }}
spec:
  for: {{ apiVersion: bench.example.com/v1, kind: Widget{group} }}
  lookups:
    defaults: {{ apiVersion: v1, kind: ConfigMap, name: \"{{{{metadata.name}}}}-defaults\", jsonPath: \"{{.data}}\" }}
  children:
    - id: deployment
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{ name: {{{{json metadata.name}}}} }}
        spec:
          replicas: {{{{json (default spec.replicas (default lookups.defaults.replicas 1))}}}}
          selector: {{ matchLabels: {{ app: {{{{json metadata.name}}}} }} }}
          template:
            metadata: {{ labels: {{ app: {{{{json metadata.name}}}} }} }}
            spec:
              containers:
                - name: main
                  image: {{{{json spec.image}}}}
      readyWhen: '{{.status.conditions[?(@.type==\"Available\")].status}}'
  status:
    available: '{{.children.deployment.status.availableReplicas}}'
  resyncPeriod: 10m
"
        ),
        2 => format!(
            "apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: deployment-pdb-{group} }}
spec:
  for:
    apiVersion: apps/v1
    kind: Deployment
    namespace: team-{group}
    selector:
      matchLabels: {{ ruleplane.dev/pdb: \"true\" }}
      matchExpressions:
        - {{ key: tier, operator: In, values: [web, api] }}
  children:
    - id: pdb
      template: |
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata: {{ name: {{{{json metadata.name}}}} }}
        spec:
          minAvailable: 1
          selector: {{{{json spec.selector}}}}
"
        ),
        _ => format!(
            "apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: {{ name: packing-{group} }}
spec:
  schedulerName: packing-scheduler-{group}
  algorithmProvider: ClusterAutoscalerProvider
  scores:
    - name: NodeResourcesFit
      weight: 5
      strategy: MostAllocated
      resources: [ {{ name: cpu, weight: 1 }}, {{ name: memory, weight: 1 }} ]
    - {{ name: TaintToleration, weight: 3 }}
  percentageOfNodesToScore: {group_percentage}
",
            group_percentage = 50 + group % 50
        ),
    }
}

/// All rules as one multi-document text.
static MULTI_DOC: LazyLock<String> = LazyLock::new(|| (0..RULE_COUNT).map(rule).collect::<Vec<_>>().join("---\n"));

/// All rules as one file each, in a temporary directory (created on first use, removed when `main` ends).
static RULE_DIR: OnceLock<PathBuf> = OnceLock::new();

fn rule_dir() -> &'static PathBuf {
    RULE_DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ruleplane-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temporary rule directory");
        for index in 0..RULE_COUNT {
            std::fs::write(dir.join(format!("rule-{index:04}.yaml")), rule(index)).expect("write a rule file");
        }
        dir
    })
}

fn expect_loaded(result: Result<RuleSet, ruleplane_config::Diagnostics>) -> RuleSet {
    let rules = result.unwrap_or_else(|diagnostics| panic!("generated rules must be valid:\n{diagnostics}"));
    assert_eq!(rules.rules().len(), RULE_COUNT);
    rules
}

/// Parse, validate (schema, templates, JSONPath, cross-rule checks) 1,000 rules from one string.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn load_1000_rules_one_text(bencher: Bencher) {
    let text = MULTI_DOC.as_str();
    bencher
        .counter(ItemsCount::new(RULE_COUNT))
        .bench(|| expect_loaded(load_str("bench.yaml", divan::black_box(text))));
}

/// The same rules from a directory of 1,000 files: adds discovery, reading and per-file bookkeeping.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn load_1000_rules_directory(bencher: Bencher) {
    let dirs = [rule_dir().clone()];
    bencher
        .counter(ItemsCount::new(RULE_COUNT))
        .bench(|| expect_loaded(load_paths(divan::black_box(&dirs))));
}

/// A typical Reconciler: a Deployment, a Service and a ConfigMap, with two lookups and the usual helpers.
const WEB_APP: &str = include_str!("../../tests/rules/valid/web-app.yaml");

static WEB_APP_RULES: LazyLock<RuleSet> =
    LazyLock::new(|| load_str("web-app.yaml", WEB_APP).unwrap_or_else(|d| panic!("{d}")));

fn web_app() -> &'static ruleplane_config::Reconciler {
    match &WEB_APP_RULES.rules()[0] {
        Rule::Reconciler(rule) => rule,
        _ => unreachable!("WEB_APP is a Reconciler"),
    }
}

fn parent() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "shop-frontend", "namespace": "shop", "uid": "6f1c1a52-0000-4000-8000-000000000001",
                      "resourceVersion": "4711", "labels": { "app.kubernetes.io/part-of": "shop" } },
        "data": { "image": "registry.invalid/shop/frontend:2.3.1", "replicas": "3",
                  "env": { "MODE": "production", "LOG_LEVEL": "info", "CACHE_TTL": "300" } }
    })
}

/// The lookup objects as the manager's caches would hand them over.
fn lookup_object(kind: &str, name: &str) -> Value {
    match kind {
        "Secret" => json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name } }),
        _ => json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name },
                     "data": { "replicas": "2", "tier": "web" } }),
    }
}

/// Rendering the three children and the initial status from already gathered lookups.
#[divan::bench(max_time = 5)]
fn render_web_app_3_children(bencher: Bencher) {
    let rule = web_app();
    let parent = parent();
    let lookups = gather_lookups(
        rule,
        &parent,
        |lookup, name, _| Some(lookup_object(&lookup.kind, name)),
        |_, _| Vec::new(),
    )
    .expect("lookups gather");
    assert_eq!(
        render_children(rule, &parent, &lookups)
            .expect("renders")
            .children
            .len(),
        3
    );
    bencher
        .counter(ItemsCount::new(1usize))
        .bench(|| render_children(rule, divan::black_box(&parent), divan::black_box(&lookups)).expect("renders"));
}

/// What one reconcile pays before talking to the API server: lookup names rendered, values projected with
/// JSONPath from (cached) objects, then the children rendered.
#[divan::bench(max_time = 5)]
fn gather_lookups_and_render_web_app(bencher: Bencher) {
    let rule = web_app();
    let parent = parent();
    let objects: Map<String, Value> = [
        (
            "shop-frontend-defaults".to_string(),
            lookup_object("ConfigMap", "shop-frontend-defaults"),
        ),
        (
            "shop-frontend-tls".to_string(),
            lookup_object("Secret", "shop-frontend-tls"),
        ),
    ]
    .into_iter()
    .collect();
    bencher.counter(ItemsCount::new(1usize)).bench(|| {
        let parent = divan::black_box(&parent);
        let lookups = gather_lookups(rule, parent, |_, name, _| objects.get(name).cloned(), |_, _| Vec::new())
            .expect("lookups gather");
        render_children(rule, parent, &lookups).expect("renders")
    });
}
