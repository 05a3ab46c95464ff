//! The public loading and rendering API: diagnostics format, file discovery, rule equality, render errors.

use std::path::PathBuf;

use ruleplane_config::{
    Rule, RuleKind, gather_lookups, generate_crd, load_paths, load_str, project_lookup, render_children,
    render_finalize_children, render_lookup_target,
};
use serde_json::{Map, json};

const POLICY: &str = "apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: s }
spec:
  schedulerName: mine
";

fn reconciler(children: &str) -> String {
    format!(
        "apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: r }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap }}
  lookups:
    owner: {{ apiVersion: v1, kind: Secret, name: \"{{{{metadata.name}}}}-owner\", jsonPath: \"{{.data.user}}\" }}
  children:
{children}"
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruleplane-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn diagnostics_render_like_a_compiler() {
    let text = POLICY.replace("schedulerName: mine", "schedulerNme: mine");
    let diagnostics = load_str("p.yaml", &text).unwrap_err();
    assert_eq!(
        diagnostics.to_string(),
        "p.yaml:4:1: error[missing-field]: missing required field `schedulerName` in `spec`
  | spec:
  | ^
p.yaml:5:3: error[unknown-field]: unknown field `schedulerNme` in `spec`, did you mean `schedulerName`?
  |   schedulerNme: mine
  |   ^
2 errors found"
    );
    let json = serde_json::to_value(&diagnostics).expect("diagnostics serialize");
    assert_eq!(json[0]["line"], 4);
    assert_eq!(json[0]["code"], "missing-field");
    assert_eq!(json[1]["sourceLine"], "  schedulerNme: mine");
}

#[test]
fn directories_are_searched_recursively_in_sorted_order() {
    let dir = temp_dir("dirs");
    std::fs::create_dir_all(dir.join("b/nested")).unwrap();
    std::fs::create_dir_all(dir.join("..data")).unwrap();
    std::fs::write(
        dir.join("b/nested/z.yml"),
        POLICY.replace("name: s", "name: z").replace("mine", "z"),
    )
    .unwrap();
    std::fs::write(
        dir.join("a.yaml"),
        format!(
            "{}---\n{}",
            POLICY,
            POLICY.replace("name: s", "name: t").replace("mine", "t")
        ),
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not yaml").unwrap();
    std::fs::write(dir.join("..data/a.yaml"), POLICY).unwrap();
    let rules = load_paths(std::slice::from_ref(&dir)).unwrap_or_else(|d| panic!("{d}"));
    let names: Vec<&str> = rules.rules().iter().map(Rule::name).collect();
    assert_eq!(names, ["s", "t", "z"]);
    let second = rules.get("t").expect("t is loaded");
    assert_eq!(second.kind(), RuleKind::SchedulerPolicy);
    assert_eq!(second.source().line, 7);
    assert!(second.source().file.ends_with("a.yaml"));

    let missing = load_paths(&[dir.join("missing.yaml")]).unwrap_err();
    assert_eq!(missing.len(), 1);
    assert_eq!(missing.iter().next().unwrap().code, "io");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_across_files_are_all_reported() {
    let dir = temp_dir("errors");
    std::fs::write(dir.join("one.yaml"), POLICY.replace("mine", "default-scheduler")).unwrap();
    std::fs::write(
        dir.join("two.yaml"),
        POLICY
            .replace("name: s", "name: t")
            .replace("mine", "default-scheduler"),
    )
    .unwrap();
    let diagnostics = load_paths(std::slice::from_ref(&dir)).unwrap_err();
    let files: Vec<String> = diagnostics
        .iter()
        .map(|d| d.file.rsplit('/').next().unwrap().to_string())
        .collect();
    // Each file's own error, plus the clash of the second policy with the first.
    assert_eq!(files, ["one.yaml", "two.yaml", "two.yaml"], "{diagnostics}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rule_equality_ignores_positions_but_not_content() {
    let first = load_str("a.yaml", POLICY).unwrap();
    let moved = load_str("b.yaml", &format!("# moved down\n\n{POLICY}")).unwrap();
    assert_eq!(first.rules()[0], moved.rules()[0]);
    assert_ne!(first.rules()[0].source(), moved.rules()[0].source());
    let changed = load_str("a.yaml", &POLICY.replace("mine", "theirs")).unwrap();
    assert_ne!(first.rules()[0], changed.rules()[0]);
}

#[test]
fn rendering_checks_the_output_and_names_the_child() {
    let parent =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": {}});
    let cases = [
        (
            "    - id: two\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata: { name: a }\n        ---\n        apiVersion: v1\n",
            "2 YAML documents",
        ),
        (
            "    - id: nokind\n      template: |\n        apiVersion: v1\n        {{#if data.never}}\n        kind: ConfigMap\n        {{/if}}\n        metadata: { name: a }\n",
            "no `kind`",
        ),
        (
            "    - id: broken\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata: [\n",
            "not valid YAML",
        ),
        (
            "    - id: scalar\n      template: |\n        {{#if data.never}}\n        apiVersion: v1\n        kind: ConfigMap\n        {{/if}}\n        - just a list\n",
            "is a list, not a Kubernetes object",
        ),
        (
            "    - id: strict\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata: { name: {{json data.missing}} }\n",
            "missing field `data.missing`",
        ),
    ];
    for (children, expected) in cases {
        let text = reconciler(children);
        let rules = load_str("r.yaml", &text).unwrap_or_else(|d| panic!("{d}"));
        let Rule::Reconciler(rule) = &rules.rules()[0] else {
            panic!("a reconciler")
        };
        let error = render_children(rule, &parent, &Map::new()).unwrap_err();
        let message = error.to_string();
        assert!(message.contains(expected), "{message}");
        assert!(message.starts_with("r.yaml:"), "{message}");
        assert!(message.contains("child `"), "{message}");
    }
}

#[test]
fn lookups_and_finalizers_render() {
    let text = reconciler(
        "    - id: c\n      template: |\n        apiVersion: v1\n        kind: Namespace\n        metadata: { name: {{json metadata.name}} }\n",
    ) + "  finalize:\n    children:\n      - id: bye\n        template: |\n          apiVersion: v1\n          kind: ConfigMap\n          metadata: { name: bye, namespace: elsewhere }\n";
    let rules = load_str("r.yaml", &text).unwrap_or_else(|d| panic!("{d}"));
    let Rule::Reconciler(rule) = &rules.rules()[0] else {
        panic!("a reconciler")
    };
    let parent = json!({"metadata": {"name": "cm", "namespace": "ns", "uid": "u-1"}});
    let lookup = rule.lookup("owner").expect("lookup `owner`");
    assert_eq!(
        render_lookup_target(lookup, &parent).unwrap(),
        ("cm-owner".to_string(), Some("ns".to_string()))
    );
    assert_eq!(
        project_lookup(lookup, Some(&json!({"data": {"user": "YWRh"}}))),
        json!("YWRh")
    );
    assert_eq!(project_lookup(lookup, None), serde_json::Value::Null);
    let gathered = gather_lookups(rule, &parent, |lookup, name, namespace| {
        assert_eq!(
            (lookup.kind.as_str(), name, namespace),
            ("Secret", "cm-owner", Some("ns"))
        );
        Some(json!({"data": {"user": "YWRh"}}))
    })
    .unwrap();
    assert_eq!(gathered["owner"], "YWRh");
    let rendered = render_children(rule, &parent, &Map::new()).unwrap();
    // Namespaces are cluster-scoped: no namespace is added.
    assert_eq!(rendered.children[0]["metadata"].get("namespace"), None);
    assert_eq!(
        rendered.children[0]["metadata"]["labels"]["ruleplane.dev/parent-uid"],
        "u-1"
    );
    let finalizers = render_finalize_children(rule, &parent, &Map::new()).unwrap();
    assert_eq!(finalizers[0]["metadata"]["namespace"], "elsewhere");
}

#[test]
fn crd_without_schema_accepts_arbitrary_fields() {
    let text = "apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: cron-tab.stable.example.com }
spec:
  versions: [ { name: v1 } ]
";
    let rules = load_str("rd.yaml", text).unwrap();
    let Rule::ResourceDefinition(rule) = &rules.rules()[0] else {
        panic!("a resource definition")
    };
    let crd = serde_json::to_value(generate_crd(rule)).unwrap();
    assert_eq!(crd["metadata"]["name"], "crontabs.stable.example.com");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert_eq!(
        schema,
        &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(crd["spec"]["versions"][0]["storage"], true);
    assert_eq!(
        rules.resolve_kind("stable.example.com/v1", "CronTab").unwrap().plural,
        "crontabs"
    );
}

/// Hostile or half-written input must produce diagnostics, never a panic or a stack overflow.
#[test]
fn no_input_panics() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut texts: Vec<String> = Vec::new();
    for dir in ["examples", "tests/rules/valid"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            texts.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
        }
    }
    for text in &texts {
        let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(5).collect();
        for end in boundaries {
            let _ = load_str("cut.yaml", &text[..end]);
        }
    }
    for hostile in [
        "[".repeat(5000),
        "{a: ".repeat(5000),
        "- ".repeat(5000),
        "a: &a [x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n".to_string(),
        "\u{feff}\t\0".to_string(),
        "---\n---\n...\n".to_string(),
    ] {
        let _ = load_str("hostile.yaml", &hostile);
    }
}
