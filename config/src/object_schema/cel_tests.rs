//! CEL validation rules offline: from YAML fixtures (`testdata/cel-*.yaml`) through `validate`'s synthetic
//! parents and `ruleplane test`, and the evaluation's limits on adversarial rules and objects.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::object_schema::{KindSchemas, PathSegment, cel};
use crate::rule_test::{load_tests, run_suite};

const RESOURCE_DEFINITION: &str = include_str!("testdata/cel-resource-definition.yaml");
const CRDS: &str = include_str!("testdata/cel-crds.yaml");
const CRDS_RULES: &str = include_str!("testdata/cel-crds-rules.yaml");

fn located(rules: &crate::RuleSet) -> Vec<String> {
    let schemas = KindSchemas::of_rule_set(rules);
    crate::synthetic_parent_diagnostics(rules, &schemas)
        .iter()
        .map(|d| format!("{}:{}:{} {}", d.file, d.line, d.column, d.message))
        .collect()
}

#[test]
fn validate_reports_a_resource_definitions_rules_at_the_template_lines_that_break_them() {
    let rules = crate::load_str("rules.yaml", RESOURCE_DEFINITION).unwrap_or_else(|d| panic!("{d}"));
    let what = "child `autoscaler` (scale.example.org/v1 Autoscaler example)";
    let tail = "(the apiserver would reject this apply)";
    let mut found = located(&rules);
    found.sort();
    assert_eq!(
        found,
        [
            format!("rules.yaml:52:9 {what}: spec: Invalid value: memory must stay below 1Gi {tail}"),
            format!(
                "rules.yaml:52:9 {what}: spec: Invalid value: minReplicas (5) must not exceed maxReplicas (3) {tail}"
            ),
            format!(
                "rules.yaml:53:11 {what}: spec.minReplicas: Forbidden: a paused autoscaler keeps no replica {tail}"
            ),
            format!("rules.yaml:54:11 {what}: spec.maxReplicas: Invalid value: failed rule: self % 2 == 0 {tail}"),
        ]
    );
    // The rule calling a function the offline environment lacks is skipped, and `validate` says so; the
    // transition rule is skipped silently (there is no old object offline).
    let warnings: Vec<String> = rules.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "warning[cel-rule-skipped]: rules.yaml:3:1: scale.example.org/v1 Autoscaler: the x-kubernetes-validations \
          rule `isURL(self.endpoint)` at `spec` is not checked offline: it uses `isURL`, which offline evaluation \
          lacks (the apiserver still checks it)"
        ]
    );
}

#[test]
fn rules_of_crds_given_with_crds_are_evaluated_with_escaped_names_and_message_expressions() {
    let installed =
        crate::installed_kinds::load_crd_texts(&[("crds.yaml".into(), CRDS.into())]).expect("valid manifest");
    let options = crate::LoadOptions {
        installed,
        ..Default::default()
    };
    let rules = crate::load_str_with("rules.yaml", CRDS_RULES, &options).unwrap_or_else(|d| panic!("{d}"));
    let what = "child `certificate` (certs.example.org/v1 Certificate example)";
    let tail = "(the apiserver would reject this apply)";
    assert_eq!(
        located(&rules),
        [
            format!(
                "rules.yaml:14:11 {what}: spec.secret-name: Invalid value: the secret's name starts with tls- {tail}"
            ),
            format!(
                "rules.yaml:13:9 {what}: spec: Invalid value: every DNS name ends with .example.org, not \
                 www.example.com {tail}"
            ),
        ]
    );
    let warnings: Vec<String> = rules.warnings().iter().map(|w| w.message.clone()).collect();
    assert_eq!(
        warnings,
        [
            "certs.example.org/v1 Certificate: the x-kubernetes-validations rule `cel.bind(n, self.dnsNames, n.size() \
          < 10)` at `spec` is not checked offline: it uses `cel.bind`, which offline evaluation lacks (the apiserver \
          still checks it)"
        ]
    );
}

#[test]
fn ruleplane_test_fails_a_case_whose_child_breaks_a_rule() {
    let rules = crate::load_str("rules.yaml", RESOURCE_DEFINITION).unwrap_or_else(|d| panic!("{d}"));
    let test = "apiVersion: ruleplane.dev/v1alpha1\nkind: RuleTest\nmetadata: { name: scale-tests }\nspec:\n  \
        rule: scale-web\n  cases:\n    - name: the autoscaler\n      \
        parent: { apiVersion: v1, kind: ConfigMap, metadata: { name: web, namespace: a } }\n      \
        expect: { children: [ { apiVersion: scale.example.org/v1, kind: Autoscaler, metadata: { name: web } } ] }\n";
    let suites = load_tests(&[("scale.test.yaml".into(), test.into())], &rules).unwrap_or_else(|d| panic!("{d}"));
    let failures: Vec<String> = suites
        .iter()
        .flat_map(|suite| run_suite(&rules, suite).cases)
        .flat_map(|case| case.failures)
        .collect();
    assert_eq!(failures.len(), 4, "{failures:#?}");
    assert!(
        failures.iter().any(|f| f.contains("rules.yaml:53:11")
            && f.contains("spec.minReplicas: Forbidden: a paused autoscaler keeps no replica")),
        "{failures:#?}"
    );
}

/// A CRD schema of one version, its spec carrying `rules` and the given properties.
fn schemas_with(rules: Value, properties: Value) -> KindSchemas {
    let mut schemas = KindSchemas::default();
    schemas.add_custom(
        "x.example.org/v1",
        "Thing",
        &json!({"type": "object", "properties": {"spec": {
            "type": "object", "x-kubernetes-validations": rules, "properties": properties,
        }}}),
    );
    schemas
}

fn thing(spec: Value) -> Value {
    json!({"apiVersion": "x.example.org/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": spec})
}

fn problems(schemas: &KindSchemas, spec: Value) -> Vec<String> {
    schemas
        .check(&thing(spec))
        .expect("known kind")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn optional_old_self_runs_a_transition_rule_with_old_self_absent() {
    let schemas = schemas_with(
        json!([
            {"rule": "!oldSelf.hasValue() ? self.items.size() > 0 : true", "optionalOldSelf": true,
             "message": "a new thing has items"},
            {"rule": "self.items.size() >= oldSelf.items.size()", "message": "never evaluated offline"},
        ]),
        json!({"items": {"type": "array", "items": {"type": "string"}}}),
    );
    assert_eq!(
        problems(&schemas, json!({"items": []})),
        ["spec: Invalid value: a new thing has items"]
    );
    assert_eq!(problems(&schemas, json!({"items": ["a"]})), Vec::<String>::new());
}

#[test]
fn a_field_read_without_has_is_an_error_as_on_the_apiserver_and_type_gaps_are_not() {
    let schemas = schemas_with(
        json!([{"rule": "self.replicas > 0"}, {"rule": "self.name > 3"}]),
        json!({"replicas": {"type": "integer"}, "name": {"type": "string"}}),
    );
    assert_eq!(
        problems(&schemas, json!({"name": "x"})),
        ["spec: Invalid value: rule `self.replicas > 0` could not be evaluated: No such key: replicas"]
    );
}

#[test]
fn field_paths_and_names_follow_the_apiservers_spelling() {
    assert_eq!(
        cel::parse_field_path(".a['app.kubernetes.io/name'][2].b"),
        Some(vec![
            PathSegment::Field("a".into()),
            PathSegment::Field("app.kubernetes.io/name".into()),
            PathSegment::Index(2),
            PathSegment::Field("b".into()),
        ])
    );
    assert_eq!(cel::parse_field_path("a b"), None);
    assert_eq!(cel::escape("namespace"), "__namespace__");
    assert_eq!(
        cel::escape("x-y.z/w__v"),
        "x__dash__y__dot__z__slash__w__underscores__v"
    );
}

#[test]
fn a_rule_whose_cost_for_the_object_exceeds_the_budget_is_not_evaluated() {
    let schemas = schemas_with(
        json!([{"rule": "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c != 'xxx')))"}]),
        json!({"l": {"type": "array", "items": {"type": "string"}}}),
    );
    let small: Vec<String> = vec!["x".into(); 3];
    assert_eq!(
        problems(&schemas, json!({"l": small})),
        ["spec: Invalid value: failed rule: self.l.all(a, self.l.all(b, self.l.all(c, a + b + c != 'xxx')))"]
    );
    let large: Vec<String> = (0..2000).map(|i| format!("item-{i}")).collect();
    let started = Instant::now();
    assert_eq!(problems(&schemas, json!({"l": large})), Vec::<String>::new());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "skipped, not run: {:?}",
        started.elapsed()
    );
}

#[test]
fn rules_too_long_or_too_deep_are_skipped_before_parsing() {
    let deep = format!("{}true{}", "(".repeat(500), ")".repeat(500));
    let chain = vec!["1"; 5000].join(" + ") + " > 0";
    // Within the length limit, yet thousands of levels deep once parsed.
    let parsed_deep = vec!["1"; 4990].join("+") + ">0";
    let schemas = schemas_with(
        json!([{"rule": deep}, {"rule": chain}, {"rule": parsed_deep}]),
        json!({}),
    );
    assert_eq!(problems(&schemas, json!({})), Vec::<String>::new());
    let why: Vec<&str> = schemas.cel.skipped.iter().map(|s| s.why.as_str()).collect();
    assert_eq!(
        why,
        [
            "nests brackets deeper than 24",
            "is longer than 10000 characters",
            "nests deeper than 48 levels"
        ]
    );
}

/// A small deterministic generator (no dependency): the same rules and objects every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % below.max(1)
    }
}

/// A random well-formed rule over a spec with a list `l` of strings, an integer `n` and a string `s`.
fn random_expression(random: &mut Lcg, depth: usize) -> String {
    let leaf = [
        "self.l",
        "self.n",
        "self.s",
        "x",
        "1",
        "'ab'",
        "[1, 2]",
        "self.l.size()",
    ];
    if depth == 0 {
        return leaf[random.next(leaf.len())].to_owned();
    }
    let a = random_expression(random, depth - 1);
    let b = random_expression(random, depth - 1);
    match random.next(12) {
        0 => format!("self.l.all(x, {a})"),
        1 => format!("self.l.exists(x, {a})"),
        2 => format!("self.l.map(x, {a})"),
        3 => format!("self.l.filter(x, {a})"),
        4 => format!("({a} + {b})"),
        5 => format!("({a} == {b})"),
        6 => format!("size({a})"),
        7 => format!("{a}.replace('a', {b})"),
        8 => format!("({a} < {b})"),
        9 => format!("has(self.s) ? {a} : {b}"),
        10 => format!("[{a}, {b}]"),
        _ => format!("string({a}).matches('^a+b*$')"),
    }
}

#[test]
fn random_rules_on_random_objects_finish_quickly_and_never_panic() {
    let mut random = Lcg(38);
    let mut slowest = Duration::ZERO;
    for round in 0..150 {
        let rule = random_expression(&mut random, 1 + round % 4);
        let schemas = schemas_with(
            json!([{"rule": rule}]),
            json!({"l": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"},
                   "s": {"type": "string"}}),
        );
        for size in [0, 3, 200] {
            let list: Vec<String> = (0..size).map(|i| "ab".repeat(1 + i % 7)).collect();
            let started = Instant::now();
            let _ = schemas.check(&thing(json!({"l": list, "n": size, "s": "a".repeat(size)})));
            slowest = slowest.max(started.elapsed());
        }
    }
    assert!(slowest < Duration::from_secs(3), "slowest evaluation took {slowest:?}");
}
