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
    let gathered = gather_lookups(
        rule,
        &parent,
        |lookup, name, namespace| {
            assert_eq!(
                (lookup.kind.as_str(), name, namespace),
                ("Secret", "cm-owner", Some("ns"))
            );
            Some(json!({"data": {"user": "YWRh"}}))
        },
        |_, _| Vec::new(),
    )
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
            let path = entry.unwrap().path();
            if path.is_file() {
                texts.push(std::fs::read_to_string(path).unwrap());
            }
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

const WEB_APP_WITH_DEPENDENCY: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: web }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: endpoint
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-endpoint" }
        data: { url: "http://{{children.svc.spec.clusterIP}}:80" }
    - id: svc
      template: |
        apiVersion: v1
        kind: Service
        metadata: { name: {{json metadata.name}} }
        spec: { ports: [ { port: 80 } ] }
      readyWhen: "{.spec.clusterIP}"
    - id: debug
      includeWhen: "{.data.debug}"
      retain: true
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-debug" }
"#;

#[test]
fn children_render_after_the_children_they_read_once_those_are_ready() {
    use ruleplane_config::render_children_observing;
    let rules = load_str("web.yaml", WEB_APP_WITH_DEPENDENCY).unwrap_or_else(|d| panic!("{d}"));
    let Rule::Reconciler(rule) = &rules.rules()[0] else {
        panic!("a reconciler")
    };
    assert_eq!(rule.child("endpoint").unwrap().depends_on, vec!["svc".to_string()]);
    let order: Vec<&str> = rule.children_in_order().map(|c| c.id.as_str()).collect();
    assert_eq!(
        order,
        ["svc", "endpoint", "debug"],
        "a child after the children it reads"
    );
    let parent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shop", "namespace": "ns", "uid": "u"}, "data": {}});

    // Nothing observed yet: the Service is rendered, the endpoint waits, debug is excluded.
    let first = render_children_observing(rule, &parent, &Map::new(), &Map::new()).unwrap();
    let names: Vec<&str> = first
        .children
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shop"]);
    assert_eq!(first.waiting, ["endpoint"]);
    assert_eq!(first.excluded, ["debug"]);

    // The Service exists but has no clusterIP yet: still waiting.
    let mut observed = Map::new();
    observed.insert("svc".into(), json!({"spec": {"ports": [{"port": 80}]}}));
    let pending = render_children_observing(rule, &parent, &Map::new(), &observed).unwrap();
    assert_eq!(pending.waiting, ["endpoint"]);

    // Ready: the endpoint sees the observed Service.
    observed.insert(
        "svc".into(),
        json!({"spec": {"clusterIP": "10.0.0.7", "ports": [{"port": 80}]}}),
    );
    let ready = render_children_observing(rule, &parent, &Map::new(), &observed).unwrap();
    assert!(ready.waiting.is_empty());
    let endpoint = ready
        .children
        .iter()
        .find(|c| c["metadata"]["name"] == "shop-endpoint")
        .unwrap();
    assert_eq!(endpoint["data"]["url"], "http://10.0.0.7:80");

    // includeWhen true: the retained child is rendered, marked so it is never deleted.
    let mut debug_parent = parent.clone();
    debug_parent["data"]["debug"] = json!("yes");
    let with_debug = render_children_observing(rule, &debug_parent, &Map::new(), &observed).unwrap();
    let debug = with_debug
        .children
        .iter()
        .find(|c| c["metadata"]["name"] == "shop-debug")
        .unwrap();
    assert_eq!(debug["metadata"]["annotations"]["ruleplane.dev/retain"], "true");
    let mut attached = debug.clone();
    ruleplane_config::attach_parent(
        &mut attached,
        &debug_parent,
        true,
        true,
        &ruleplane_config::provenance::ChildSigner::Unsigned,
    );
    assert!(
        attached["metadata"].get("ownerReferences").is_none(),
        "a retained child outlives its parent"
    );

    // The fate of observed children that were not rendered.
    let waiting_child = json!({"metadata": {"labels": {"ruleplane.dev/child-id": "endpoint"}}});
    let retained_child = json!({"metadata": {"labels": {"ruleplane.dev/child-id": "debug"}}});
    let dropped_child = json!({"metadata": {"labels": {"ruleplane.dev/child-id": "gone"}}});
    let fate = |child: &serde_json::Value| ruleplane_config::unrendered_fate(rule, &first, child);
    assert_eq!(fate(&waiting_child), ruleplane_config::Unrendered::Keep);
    assert_eq!(fate(&retained_child), ruleplane_config::Unrendered::Release);
    assert_eq!(fate(&dropped_child), ruleplane_config::Unrendered::Prune);
}
