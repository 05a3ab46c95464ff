//! Status fields in their three forms (a JSONPath, a literal, a template typed as a scalar), the `ready` counts
//! over collections, and per-child `adopt` and `recreate` as the loader reads them.

use serde_json::{Map, Value, json};

use crate::test_rules::config_map_child as child;
use crate::{Reconciler, compute_status, project_status};

const STATUS: &str = r#"  status:
    phase: { value: Provisioned }
    limits: { value: { cpu: 2 } }
    zoneNames: '{.children.zones[*].metadata.name}'
    zones: { template: '{{len children.zones}}' }
    readyZones: '{.ready.zones}'
    summary: { template: '{{ready.zones}}/{{len children.zones}} ready' }
    allReady: { template: '{{eq ready.zones (len children.zones)}}' }
    version: { template: '{{spec.version}}', type: string }
    ratio: { template: '{{spec.version}}' }
    note: { template: '{{#if spec.note}}{{spec.note}}{{/if}}' }
"#;

fn rules(status: &str, options: &str) -> String {
    let children = [
        child(
            "zones",
            "{{zone}}",
            "      forEach:\n        - zone: '{.spec.zones}'\n      readyWhen: '{.metadata.uid}'\n",
            "",
        ),
        child("settings", "settings", options, ""),
    ];
    // A declared parent kind: only its status is the rule's to write.
    let reconciler = crate::test_rules::config_map_reconciler("shop", &children.concat()).replace(
        "for: { apiVersion: v1, kind: ConfigMap }",
        "for: { apiVersion: example.com/v1, kind: CronTab }",
    );
    crate::test_rules::resource_definition("cron-tab.example.com", "") + &reconciler + status
}

fn rule(status: &str) -> Reconciler {
    crate::test_rules::reconciler(&rules(status, ""), "shop")
}

fn parent(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "team-a"}, "spec": spec})
}

/// The `zones` collection with these objects, `true` for those that exist (have a uid, so are ready).
fn zones(objects: &[(&str, bool)]) -> Map<String, Value> {
    let items = objects
        .iter()
        .map(|(name, ready)| {
            let mut object = json!({"metadata": {"name": name}});
            if *ready {
                object["metadata"]["uid"] = json!(format!("uid-{name}"));
            }
            object
        })
        .collect();
    Map::from_iter([("zones".to_string(), Value::Array(items))])
}

#[test]
fn literal_path_and_template_fields_project_typed_values() {
    let rule = rule(STATUS);
    let status = compute_status(
        &rule,
        &parent(json!({"version": "1.10"})),
        &zones(&[("web-a", true), ("web-b", false), ("web-c", true)]),
        &Map::new(),
    );
    assert_eq!(status["phase"], "Provisioned", "a literal as written");
    assert_eq!(
        status["limits"],
        json!({"cpu": 2}),
        "a literal may be any YAML: it is the rule's text"
    );
    assert_eq!(status["zoneNames"], json!(["web-a", "web-b", "web-c"]));
    assert_eq!(status["zones"], 3, "a template rendering a number is a number");
    assert_eq!(status["readyZones"], 2, "ready counts the items whose readyWhen holds");
    assert_eq!(status["summary"], "2/3 ready");
    assert_eq!(
        status["allReady"], false,
        "a template rendering true/false is a boolean"
    );
    assert_eq!(status["version"], "1.10", "`type: string` keeps the text");
    assert_eq!(status["ratio"], 1.1, "`auto` reads a number");
    assert!(
        !status.contains_key("note"),
        "a template rendering nothing leaves the field out"
    );
}

#[test]
fn a_list_typed_field_is_a_list_whatever_its_path_selects() {
    let rule = rule(
        "  status:\n    names: { path: '{.children.zones[*].metadata.name}', type: list }\n    \
         owner: { path: '{.spec.owner}', type: list }\n    zones: { path: '{.spec.zones}', type: list }\n",
    );
    let parent = parent(json!({"owner": "team-a", "zones": ["a", "b"]}));
    let one = compute_status(&rule, &parent, &zones(&[("web-a", true)]), &Map::new());
    assert_eq!(
        one["names"],
        json!(["web-a"]),
        "one match: a one-item list (a plain path gives the name)"
    );
    assert_eq!(one["owner"], json!(["team-a"]));
    assert_eq!(one["zones"], json!(["a", "b"]), "a match that is a list is that list");
    let none = compute_status(&rule, &self::parent(json!({"owner": null})), &Map::new(), &Map::new());
    assert_eq!(none["names"], json!([]), "no match: an empty list, written");
    assert_eq!(none["owner"], json!([]), "null: an empty list");
    assert_eq!(none["zones"], json!([]));
    let two = compute_status(
        &rule,
        &parent,
        &zones(&[("web-a", true), ("web-b", false)]),
        &Map::new(),
    );
    assert_eq!(two["names"], json!(["web-a", "web-b"]));
    let errors = crate::load_str(
        "rules.yaml",
        &rules("  status:\n    x: { path: '{.children.zonez[*]}', type: list }\n", ""),
    )
    .expect_err("an unknown child")
    .to_string();
    assert!(errors.contains("status refers to child `zonez`"), "{errors}");
}

#[test]
fn ready_follows_the_collection_and_counts_zero_before_anything_exists() {
    let rule = rule(STATUS);
    let parent = parent(json!({"version": "1", "note": "hi"}));
    let none = compute_status(&rule, &parent, &Map::new(), &Map::new());
    assert_eq!(none["readyZones"], 0);
    assert_eq!(none["note"], "hi");
    let all = compute_status(&rule, &parent, &zones(&[("web-a", true), ("web-b", true)]), &Map::new());
    assert_eq!(all["readyZones"], 2);
    assert_eq!(all["allReady"], true);
}

#[test]
fn a_template_that_fails_leaves_its_field_out_and_says_why() {
    let rule = rule("  status:\n    phase: { value: Up }\n    image: { template: '{{spec.image}}' }\n");
    let (status, failure) = project_status(&rule, &parent(json!({})), &Map::new(), &Map::new());
    assert_eq!(status["phase"], "Up", "the other fields are still written");
    assert!(!status.contains_key("image"));
    let failure = failure.expect("the failure is reported").to_string();
    assert!(failure.contains("status field `image`"), "{failure}");
    assert!(failure.contains("missing field `spec.image`"), "{failure}");
}

#[test]
fn a_templated_status_string_is_bounded_and_only_ever_a_scalar() {
    let rule = rule("  status:\n    echo: { template: '{{spec.text}}' }\n");
    let long = "x".repeat(5000);
    let status = compute_status(&rule, &parent(json!({"text": long})), &Map::new(), &Map::new());
    let echoed = status["echo"].as_str().expect("a string");
    assert_eq!(
        echoed.chars().count(),
        crate::redaction::MAX_MESSAGE_CHARS + 1,
        "cut, with `…`"
    );
    // Data shaped like YAML structure stays text.
    let status = compute_status(&rule, &parent(json!({"text": "{a: 1}"})), &Map::new(), &Map::new());
    assert_eq!(status["echo"], "{a: 1}");
    let status = compute_status(&rule, &parent(json!({"text": "[1, 2]"})), &Map::new(), &Map::new());
    assert_eq!(status["echo"], "[1, 2]");
    // Numbers are JSON numbers, exactly; anything else is text.
    for (text, typed) in [
        ("-3", json!(-3)),
        ("1e3", json!(1000.0)),
        ("007", json!("007")),
        ("12345678901234567890123", json!("12345678901234567890123")),
        ("yes", json!("yes")),
        ("null", json!("null")),
    ] {
        let status = compute_status(&rule, &parent(json!({"text": text})), &Map::new(), &Map::new());
        assert_eq!(status["echo"], typed, "{text}");
    }
}

fn load_errors(yaml: &str) -> String {
    match crate::load_str("rules.yaml", yaml) {
        Ok(_) => panic!("loads"),
        Err(errors) => errors.to_string(),
    }
}

#[test]
fn status_templates_and_ready_references_are_checked_at_load() {
    let errors = load_errors(&rules("  status:\n    n: { template: '{{#if x}}' }\n", ""));
    assert!(errors.contains("rules.yaml:26:"), "{errors}");
    assert!(errors.contains("template syntax error"), "{errors}");
    let errors = load_errors(&rules("  status:\n    n: '{.ready.zonez}'\n", ""));
    assert!(errors.contains("status refers to child `zonez`"), "{errors}");
    assert!(errors.contains("did you mean `zones`"), "{errors}");
    let errors = load_errors(&rules(
        "  status:\n    n: { template: '{{ready.zonez}}/{{len children.setings}}' }\n",
        "",
    ));
    assert!(errors.contains("status template refers to child `zonez`"), "{errors}");
    assert!(errors.contains("status template refers to child `setings`"), "{errors}");
    assert!(errors.contains("did you mean `settings`"), "{errors}");
    let errors = load_errors(&rules("  status:\n    n: { template: '{{x}}', value: 1 }\n", ""));
    assert!(errors.contains("rules.yaml:26:"), "{errors}");
}

#[test]
fn a_childs_adopt_overrides_the_rules() {
    let yaml = rules("", "      adopt: false\n").replace("  children:\n", "  adopt: true\n  children:\n");
    let rule = crate::test_rules::reconciler(&yaml, "shop");
    let labelled = |id: &str| json!({"metadata": {"labels": {crate::ownership::CHILD_ID_LABEL: id}}});
    assert!(rule.adopts(&labelled("zones")), "the rule's adopt");
    assert!(!rule.adopts(&labelled("settings")), "the child's own");
    let plain = crate::test_rules::reconciler(&rules("", "      adopt: true\n"), "shop");
    assert!(plain.adopts(&labelled("settings")));
    assert!(!plain.adopts(&labelled("zones")));
}

#[test]
fn recreate_with_retain_is_a_located_load_error() {
    let errors = load_errors(&rules("", "      retain: true\n      recreate: true\n"));
    assert!(errors.contains("rules.yaml:"), "{errors}");
    assert!(errors.contains("`recreate` deletes the object"), "{errors}");
    let finalize = rules("", "").replace(
        "  children:\n",
        "  finalize:\n    children:\n      - id: last\n        recreate: true\n        template: |\n          \
         apiVersion: v1\n          kind: ConfigMap\n          metadata: { name: last }\n  children:\n",
    );
    let errors = load_errors(&finalize);
    assert!(errors.contains("`recreate` is for `children`"), "{errors}");
    let rule = crate::test_rules::reconciler(&rules("", "      recreate: true\n"), "shop");
    assert!(rule.child("settings").is_some_and(|child| child.recreate));
    assert!(rule.child("zones").is_some_and(|child| !child.recreate));
}

#[test]
fn status_paths_are_read_by_the_jsonpath_parser_filters_and_brackets_included() {
    let status = "  status:
    named: \"{.children.settings['metadata'].name}\"
    quoted: '$.children.settings[\"metadata\"][\"name\"]'
    bracketed: \"{.children['settings'].metadata.name}\"
    filtered: '$.children[?@.kind]'
    everyLookup: '$.lookups[*]'
";
    // Loads: `?@` and `*` are no child or lookup names, `['settings']` and `settings['metadata']` name `settings`.
    rule(status);
    let errors = load_errors(&rules(
        "  status:\n    misspelt: \"{.children.setings['metadata'].name}\"\n",
        "",
    ));
    assert!(
        errors.contains("status refers to child `setings`, which is not among `children`, did you mean `settings`?"),
        "{errors}"
    );
    let errors = load_errors(&rules("  status:\n    typo: '$.lookups.ownr[?@.x]'\n", ""));
    assert!(
        errors.contains("status refers to lookup `ownr`, which is not among `lookups`"),
        "{errors}"
    );
}
