//! Hostile parents against real rules (`tests/rules/adversarial/`, `examples/`, `tests/rules/valid/`): data read
//! from the cluster fills in scalars; it never changes a rendered child's structure, kind or namespace.

use std::collections::BTreeSet;
use std::path::PathBuf;

use ruleplane_config::{Reconciler, Rule, RuleSet, gather_lookups, load_paths, render_children};
use serde_json::{Map, Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(relative: &str) -> RuleSet {
    load_paths(&[repo().join(relative)]).unwrap_or_else(|diagnostics| panic!("{diagnostics}"))
}

fn reconciler<'a>(rules: &'a RuleSet, name: &str) -> &'a Reconciler {
    match rules.get(name) {
        Some(Rule::Reconciler(rule)) => rule,
        _ => panic!("no Reconciler `{name}`"),
    }
}

/// Strings that break out of a scalar in one YAML context or another.
const PAYLOADS: &[&str] = &[
    "x\n  namespace: kube-system",
    "x\nhostNetwork: true",
    "a: b",
    "a #comment",
    "{privileged: true}",
    "[a, b]",
    "\"quoted\"",
    "'single'",
    "x\"\n  injected: \"y",
    "x'\n  injected: 'y",
    "---\nkind: Secret",
    "...",
    "- item",
    "&anchor x",
    "*alias",
    "!!binary aGk=",
    "| block",
    "> folded",
    "%YAML 1.2",
    "@reserved",
    "`tick`",
    "tab\there",
    "trailing:",
    " leading space",
    "x, y: z",
    "}, injected: {",
    "], [",
    "\\n escaped \\u0041",
    "ünïcødé ✓ 日本",
    "\u{E000}0\u{E001}",
    "\u{85}next line\u{2028}separator",
    "",
    "~",
    "null",
    "true",
    "0x1F",
    "1e3",
];

/// Every key path of a JSON value, `a.b[0].c` style (list items by position).
fn key_paths(value: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(fields) => {
                for (key, field) in fields {
                    let path = format!("{prefix}.{key}");
                    out.insert(path.clone());
                    walk(field, &path, out);
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let path = format!("{prefix}[{index}]");
                    out.insert(path.clone());
                    walk(item, &path, out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(value, "", &mut out);
    out
}

/// The shape of a render: every child's kind, namespace and key paths, keyed by its position. Values that data
/// may fill in (the key paths under `data`, `labels`, `annotations` are the rule's, not the data's) stay out.
fn shape(children: &[Value]) -> Vec<(String, String, Option<String>, BTreeSet<String>)> {
    children
        .iter()
        .map(|child| {
            let text = |pointer: &str| child.pointer(pointer).and_then(Value::as_str).map(str::to_string);
            (
                text("/apiVersion").unwrap_or_default(),
                text("/kind").unwrap_or_default(),
                text("/metadata/namespace"),
                key_paths(child),
            )
        })
        .collect()
}

/// Sets every string of `value` whose path is in `fields` (or every string when `fields` is empty) to `text`.
fn with_strings(value: &Value, text: &str) -> Value {
    match value {
        Value::String(_) => Value::String(text.to_string()),
        Value::Array(items) => Value::Array(items.iter().map(|item| with_strings(item, text)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| (key.clone(), with_strings(field, text)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The parent's user data (everything but `apiVersion`, `kind` and the identity in `metadata`) with every
/// string set to `text`.
fn hostile(parent: &Value, text: &str) -> Value {
    let mut hostile = parent.clone();
    if let Value::Object(fields) = &mut hostile {
        for (key, field) in fields.iter_mut() {
            if key == "metadata" {
                for user_field in ["labels", "annotations"] {
                    if let Some(inner) = field.get_mut(user_field) {
                        *inner = with_strings(inner, text);
                    }
                }
            } else if key != "apiVersion" && key != "kind" {
                *field = with_strings(field, text);
            }
        }
    }
    hostile
}

/// For each payload in every user-data string of `parent`: the render fails, or it has the shape of a render
/// with a benign string in the same places.
fn assert_structure_holds(rule: &Reconciler, parent: &Value, lookups: &Map<String, Value>) {
    let benign = render_children(rule, &hostile(parent, "benign"), lookups)
        .unwrap_or_else(|error| panic!("rule `{}`: benign render fails: {error}", rule.metadata.name));
    let expected = shape(&benign.children);
    for payload in PAYLOADS.iter().filter(|payload| !payload.is_empty()) {
        if let Ok(rendered) = render_children(rule, &hostile(parent, payload), lookups) {
            assert_eq!(
                shape(&rendered.children),
                expected,
                "rule `{}`, payload {payload:?} changed the structure:\n{}",
                rule.metadata.name,
                serde_json::to_string_pretty(&rendered.children).unwrap_or_default()
            );
        }
    }
}

fn configmap(namespace: &str, name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace, "uid": "u-1" },
        "data": data,
    })
}

#[test]
fn the_reported_injection_fills_a_label_value_and_nothing_else() {
    let rules = load("tests/rules/adversarial/injection.yaml");
    let rule = reconciler(&rules, "team-labels");
    let parent = configmap(
        "tenant-a",
        "web",
        json!({ "team": "x\n  namespace: kube-system", "note": "n", "image": "nginx:1.25" }),
    );
    let rendered = render_children(rule, &parent, &Map::new()).expect("the payload is a value, not structure");
    let copy = &rendered.children[0];
    assert_eq!(copy["metadata"]["namespace"], "tenant-a");
    assert_eq!(copy["metadata"]["labels"]["team"], "x\n  namespace: kube-system");
    assert_eq!(copy["data"]["team"], "x\n  namespace: kube-system");
    assert_eq!(copy["data"]["mixed"], "prefix-x\n  namespace: kube-system-suffix");
    assert_eq!(copy["data"]["quoted"], "x\n  namespace: kube-system");
    assert_eq!(copy["data"]["asJson"], "x\n  namespace: kube-system");
    let pod = &rendered.children[1];
    assert_eq!(pod["metadata"]["namespace"], "tenant-a");
    assert_eq!(
        key_paths(&pod["spec"]),
        key_paths(&json!({"containers": [{"name": "", "image": "", "env": [{"name": "", "value": ""}]}]}))
    );
}

#[test]
fn safe_values_are_written_as_before_so_numbers_stay_numbers() {
    let rules = load("tests/rules/adversarial/injection.yaml");
    let rule = reconciler(&rules, "team-labels");
    let parent = configmap(
        "tenant-a",
        "web",
        json!({ "team": "42", "note": "a \"quoted\" note", "image": "nginx" }),
    );
    let rendered = render_children(rule, &parent, &Map::new()).expect("renders");
    let copy = &rendered.children[0];
    assert_eq!(
        copy["data"]["team"],
        json!(42),
        "a plain number is read as YAML reads it, as before"
    );
    assert_eq!(copy["data"]["quoted"], "42", "`quote` keeps a string a string");
    assert_eq!(copy["metadata"]["annotations"]["note"], "a \"quoted\" note");
    assert_eq!(copy["metadata"]["annotations"]["single"], "a \"quoted\" note");
    assert_eq!(copy["data"]["block"], "a \"quoted\" note\n");
}

#[test]
fn no_payload_changes_the_structure_of_the_adversarial_rules() {
    let rules = load("tests/rules/adversarial/injection.yaml");
    let rule = reconciler(&rules, "team-labels");
    let parent = configmap("tenant-a", "web", json!({ "team": "t", "note": "n", "image": "i" }));
    assert_structure_holds(rule, &parent, &Map::new());
}

/// Helpers compute new text from the payloads (newlines, `: `, quotes, brackets); it still fills in scalars.
#[test]
fn no_payload_changes_the_structure_through_helpers() {
    let rules = load("tests/rules/adversarial/helpers.yaml");
    let rule = reconciler(&rules, "helper-values");
    let parent = configmap("tenant-a", "web", json!({ "team": "t-a", "note": "n,m" }));
    assert_structure_holds(rule, &parent, &Map::new());
}

#[test]
fn no_payload_changes_the_structure_of_any_example_or_valid_rule() {
    let fixtures: Vec<(&str, Value)> = vec![
        (
            "examples/crontab.yaml",
            json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                   "metadata": {"name": "nightly", "namespace": "team-a", "uid": "u-1", "labels": {"team": "a"}},
                   "spec": {"cronSpec": "* * * * */5", "image": "busybox", "replicas": 2}}),
        ),
        (
            "examples/pod2.yaml",
            json!({"apiVersion": "samples.ruleplane.dev/v1alpha1", "kind": "Pod2",
                   "metadata": {"name": "p", "namespace": "team-a", "uid": "u-1"},
                   "spec": {"image": "nginx", "command": ["sh", "-c", "echo"], "env": {"GREETING": "hello"}}}),
        ),
        (
            "examples/team-card.yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "platform", "namespace": "team-a", "uid": "u-1",
                                "labels": {"example.ruleplane.dev/team-card": "yes"}},
                   "data": {"team": "Platform", "owner": "ana"}}),
        ),
    ];
    let mut checked = 0;
    for (file, parent) in fixtures {
        let rules = load(file);
        for rule in rules.reconcilers() {
            if rule.spec.watched.kind != parent["kind"] {
                continue;
            }
            let lookups: Map<String, Value> = rule.lookups().iter().map(|l| (l.name.clone(), Value::Null)).collect();
            if render_children(rule, &hostile(&parent, "benign"), &lookups).is_err() {
                continue;
            }
            assert_structure_holds(rule, &parent, &lookups);
            checked += 1;
        }
    }
    assert!(checked >= 3, "the examples' Reconcilers were checked ({checked})");
}

#[test]
fn a_parent_chooses_a_namespace_only_where_the_rule_lets_it() {
    let rules = load("tests/rules/adversarial/forged-namespace.yaml");
    let same = reconciler(&rules, "same-namespace");
    let home = configmap("tenant-a", "web", json!({ "target": "tenant-a" }));
    let rendered = render_children(same, &home, &Map::new()).expect("its own namespace is allowed");
    assert_eq!(rendered.children[0]["metadata"]["namespace"], "tenant-a");
    let away = configmap("tenant-a", "web", json!({ "target": "kube-system" }));
    let error = render_children(same, &away, &Map::new()).expect_err("data may not move the child");
    assert_eq!(error.category(), "output-object");
    assert!(error.to_string().contains("namespace `kube-system`"), "{error}");

    let chosen = reconciler(&rules, "chosen-namespace");
    let rendered = render_children(chosen, &away, &Map::new()).expect("the rule allows data to choose");
    let namespaces: Vec<&Value> = rendered.children.iter().map(|c| &c["metadata"]["namespace"]).collect();
    assert_eq!(namespaces, [&json!("kube-system"), &json!("audit"), &Value::Null]);
    assert_eq!(
        rendered.children[2]["metadata"]["name"], "tenant:web",
        "RBAC names may hold `:`"
    );
    let invalid = configmap("tenant-a", "web", json!({ "target": "Not_A_Namespace" }));
    let error = render_children(chosen, &invalid, &Map::new()).expect_err("names are checked");
    assert!(error.to_string().contains("not a valid namespace name"), "{error}");
}

#[test]
fn a_declared_cluster_scoped_child_gets_no_namespace() {
    let rules = load("tests/rules/adversarial/forged-namespace.yaml");
    let rule = reconciler(&rules, "cluster-child");
    let parent = configmap("tenant-a", "web", json!({}));
    let rendered = render_children(rule, &parent, &Map::new()).expect("renders");
    assert_eq!(rendered.children[0]["metadata"].get("namespace"), None);
    assert_eq!(rendered.children[0]["metadata"]["name"], "tenant-a-web");
}

#[test]
fn an_invalid_rendered_name_is_refused_before_any_request() {
    let rules = load("tests/rules/adversarial/injection.yaml");
    let rule = reconciler(&rules, "team-labels");
    let parent = configmap("tenant-a", "Web_App", json!({ "team": "t", "note": "n", "image": "i" }));
    let error = render_children(rule, &parent, &Map::new()).expect_err("upper case and `_` are not DNS");
    assert!(error.to_string().contains("not a valid Kubernetes name"), "{error}");
}

#[test]
fn a_lookup_name_from_data_cannot_steer_the_request_path() {
    let rules = load("tests/rules/adversarial/lookup-path.yaml");
    let rule = reconciler(&rules, "by-reference");
    let parent = |reference: &str, namespace: &str| {
        configmap(
            "tenant-a",
            "web",
            json!({ "ref": reference, "refNamespace": namespace }),
        )
    };
    let mut asked = Vec::new();
    let mut fetch = |_: &ruleplane_config::Lookup, name: &str, namespace: Option<&str>| {
        asked.push(format!("{}/{name}", namespace.unwrap_or_default()));
        None
    };
    gather_lookups(rule, &parent("settings", "tenant-a"), &mut fetch, |_, _| Vec::new())
        .expect("a valid reference is read");
    let steering = [
        ("../../secrets/x", "tenant-a"),
        ("settings", "tenant-a/../kube-system"),
        ("a/b", "x"),
    ];
    for (reference, namespace) in steering {
        let error =
            gather_lookups(rule, &parent(reference, namespace), &mut fetch, |_, _| Vec::new()).expect_err("refused");
        assert_eq!(error.category(), "lookup-target", "{error}");
    }
    assert_eq!(asked, ["tenant-a/settings"], "nothing else was asked for");
}
