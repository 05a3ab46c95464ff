//! The rule author's conditions: status from a template, reasons and messages, per item, their transitions.

use serde_json::{Map, Value, json};

use crate::test_rules::config_map_child as child;
use crate::{ConditionStatus, Reconciler, author_conditions, condition_transitions, desired_status, next_status};

const CONDITIONS: &str = r#"  conditions:
    - type: SettingsWritten
      status: '{{#if ready.settings}}True{{else}}False{{/if}}'
      reason: '{{#if ready.settings}}Written{{else}}Pending{{/if}}'
      message: 'settings of {{metadata.name}}'
      event: true
    - type: Quiet
      status: '{{#if spec.quiet}}True{{/if}}'
    - type: '{{zone.metadata.name}}.zone/Serving'
      forEach: [zone: '{.children.zones}']
      status: '{{#if zone.metadata.uid}}True{{else}}False{{/if}}'
      message: 'zone {{zone_index}}'
"#;

fn rule(conditions: &str) -> Reconciler {
    let children = [
        child(
            "zones",
            "{{zone}}",
            "      forEach:\n        - zone: '{.spec.zones}'\n",
            "",
        ),
        child("settings", "settings", "      readyWhen: '{.metadata.uid}'\n", ""),
    ];
    let reconciler = crate::test_rules::config_map_reconciler("shop", &children.concat()).replace(
        "for: { apiVersion: v1, kind: ConfigMap }",
        "for: { apiVersion: example.com/v1, kind: CronTab }",
    );
    let rules = crate::test_rules::resource_definition("cron-tab.example.com", "") + &reconciler + conditions;
    crate::test_rules::reconciler(&rules, "shop")
}

fn parent(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "CronTab",
           "metadata": {"name": "web", "namespace": "team-a", "generation": 4}, "spec": spec})
}

/// The children by id: `settings` when given (with a uid: ready), the `zones` collection's objects.
fn children(settings_ready: Option<bool>, zones: &[(&str, bool)]) -> Map<String, Value> {
    let object = |name: &str, ready: bool| {
        let mut object = json!({"metadata": {"name": name}});
        if ready {
            object["metadata"]["uid"] = json!(format!("uid-{name}"));
        }
        object
    };
    let mut by_id = Map::new();
    if let Some(ready) = settings_ready {
        by_id.insert("settings".into(), object("settings", ready));
    }
    let zones = zones.iter().map(|(name, ready)| object(name, *ready)).collect();
    by_id.insert("zones".into(), Value::Array(zones));
    by_id
}

fn summary(conditions: &[crate::Condition]) -> Vec<(String, &'static str, String, String)> {
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.as_str(), c.reason.clone(), c.message.clone()))
        .collect()
}

#[test]
fn conditions_follow_their_templates_with_a_default_reason_and_one_per_item() {
    let rule = rule(CONDITIONS);
    let (conditions, failure) = author_conditions(
        &rule,
        &parent(json!({"quiet": false})),
        &children(Some(false), &[("a", true), ("b", false)]),
        &Map::new(),
    );
    assert_eq!(failure, None);
    let s = |t: &str| t.to_string();
    assert_eq!(
        summary(&conditions),
        vec![
            (s("SettingsWritten"), "False", s("Pending"), s("settings of web")),
            // An empty status is Unknown, and the reason defaults to the status.
            (s("Quiet"), "Unknown", s("Unknown"), s("")),
            (s("a.zone/Serving"), "True", s("True"), s("zone 0")),
            (s("b.zone/Serving"), "False", s("False"), s("zone 1")),
        ]
    );
    assert!(conditions[0].event && !conditions[1].event);
}

#[test]
fn a_condition_that_renders_no_status_is_unknown_and_reported() {
    let rule =
        rule("  conditions:\n    - type: Odd\n      status: '{{spec.word}}'\n    - type: Fine\n      status: 'true'\n");
    let (conditions, failure) = author_conditions(
        &rule,
        &parent(json!({"word": "maybe"})),
        &children(None, &[]),
        &Map::new(),
    );
    assert_eq!(conditions[0].status, ConditionStatus::Unknown);
    assert_eq!(conditions[0].reason, "ConditionError");
    assert!(
        conditions[0].message.contains("`maybe`, not True, False or Unknown"),
        "{conditions:?}"
    );
    assert_eq!(
        (conditions[1].type_.as_str(), conditions[1].status),
        ("Fine", ConditionStatus::True)
    );
    let failure = failure.expect("the failure is reported").to_string();
    assert!(failure.contains("condition `Odd`"), "{failure}");
}

#[test]
fn an_item_type_that_is_reserved_invalid_or_repeated_is_left_out_and_reported() {
    let rule =
        rule("  conditions:\n    - type: '{{item}}'\n      forEach: [item: '{.spec.names}']\n      status: 'True'\n");
    for (names, reported) in [
        (json!(["Ready"]), "type `Ready` is Ruleplane's own"),
        (json!(["not ok"]), "type `not ok` is not a condition type"),
        (json!(["Twice", "Twice"]), "type `Twice` is written twice"),
    ] {
        let (conditions, failure) = author_conditions(
            &rule,
            &parent(json!({"names": names})),
            &children(None, &[]),
            &Map::new(),
        );
        let failure = failure.expect("reported").to_string();
        assert!(failure.contains(reported), "{failure}");
        assert!(conditions.iter().all(|c| c.type_ != "Ready" && c.type_ != "not ok"));
        assert!(conditions.len() <= 1);
    }
}

#[test]
fn a_for_each_over_too_many_items_writes_the_first_hundred_and_says_so() {
    let rule = rule("  conditions:\n    - type: 'N{{i}}'\n      forEach: [i: '{.spec.n}']\n      status: 'True'\n");
    let many: Vec<usize> = (0..150).collect();
    let (conditions, failure) =
        author_conditions(&rule, &parent(json!({"n": many})), &children(None, &[]), &Map::new());
    assert_eq!(conditions.len(), 100, "{failure:?}");
    assert!(
        failure
            .expect("reported")
            .to_string()
            .contains("150 items, more than the 100")
    );
}

#[test]
fn an_unchanged_condition_keeps_its_transition_time_and_a_flip_takes_a_new_one() {
    let rule = rule(CONDITIONS);
    let parent = parent(json!({}));
    let pending = children(Some(false), &[]);
    let first = desired_status(&rule, &parent, &pending, &Map::new(), (&[], &[]), true, "T1");
    let types: Vec<&str> = first["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(
        types,
        ["Ready", "Synced", "SettingsWritten", "Quiet"],
        "Ready and Synced come first"
    );
    let written = &first["conditions"][2];
    assert_eq!(
        (written["status"].as_str(), written["observedGeneration"].as_i64()),
        (Some("False"), Some(4))
    );
    let (own, _) = author_conditions(&rule, &parent, &pending, &Map::new());
    let mut conditions = crate::parent_conditions(&rule, &pending, &[], &[], None).to_vec();
    conditions.extend(own);
    assert_eq!(
        next_status(Some(&first), &Map::new(), Some(4), &conditions, "T2"),
        None,
        "nothing changed"
    );
    assert!(condition_transitions(Some(&first), &conditions).is_empty());

    let ready = children(Some(true), &[]);
    let (own, _) = author_conditions(&rule, &parent, &ready, &Map::new());
    let mut conditions = crate::parent_conditions(&rule, &ready, &[], &[], None).to_vec();
    conditions.extend(own);
    let next = next_status(Some(&first), &Map::new(), Some(4), &conditions, "T3").expect("flipped");
    let by_type = |status: &Value, type_: &str| {
        status["conditions"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["type"] == type_).cloned())
            .expect("the condition")
    };
    assert_eq!(by_type(&next, "SettingsWritten")["lastTransitionTime"], "T3");
    assert_eq!(by_type(&next, "SettingsWritten")["reason"], "Written");
    assert_eq!(
        by_type(&next, "Quiet")["lastTransitionTime"],
        "T1",
        "an unchanged status keeps its time"
    );
    let flipped: Vec<&str> = condition_transitions(Some(&first), &conditions)
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        flipped,
        ["SettingsWritten"],
        "only the conditions that ask for an Event"
    );
    assert_eq!(
        condition_transitions(None, &conditions).len(),
        1,
        "a condition's first appearance is a transition"
    );
}

#[test]
fn condition_types_and_reasons_are_checked_as_metav1_does() {
    use super::conditions::{is_condition_reason, is_condition_type};
    for good in ["Ready", "example.com/Backup", "a.zone/Serving", "x-1_y.z"] {
        assert!(is_condition_type(good), "{good}");
    }
    for bad in ["", "-a", "a-", "not ok", "/A", "Upper.Case/A", &"a".repeat(317)] {
        assert!(!is_condition_type(bad), "{bad}");
    }
    for good in ["Written", "A1_b,c:d"] {
        assert!(is_condition_reason(good), "{good}");
    }
    for bad in ["", "1a", "a:", "has space"] {
        assert!(!is_condition_reason(bad), "{bad}");
    }
}
