//! Lookups by selector: which objects a selector lookup reads, in which order, how many, and what each exposes.

use serde_json::{Value, json};

use super::render::{gather_lookups, gather_lookups_offline, select_lookup_objects, selects_lookup_object};
use crate::test_rules::reconciler;

/// A Reconciler on ConfigMaps named `exposed` whose lookup `services` is the Services labelled `expose: "true"`,
/// with the lookup's other fields given as `options` (a flow mapping's inner text, may be empty).
fn fan_in(options: &str) -> crate::Reconciler {
    let options = if options.is_empty() {
        String::new()
    } else {
        format!(", {options}")
    };
    reconciler(
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: {{ name: fan-in }}\nspec:\n  \
             for: {{ apiVersion: v1, kind: ConfigMap, name: exposed }}\n  lookups:\n    \
             services: {{ apiVersion: v1, kind: Service, selector: {{ matchLabels: {{ expose: \"true\" }} }}{options} }}\n  \
             children:\n    - id: list\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        \
             metadata: {{ name: \"{{{{metadata.name}}}}-list\" }}\n        \
             data: {{ count: \"{{{{len lookups.services}}}}\" }}\n"
        ),
        "fan-in",
    )
}

fn service(namespace: &str, name: &str, expose: Option<&str>) -> Value {
    let labels = match expose {
        Some(value) => json!({ "expose": value }),
        None => json!({}),
    };
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "spec": { "ports": [ { "port": 80 } ] }
    })
}

fn parent(namespace: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "exposed", "namespace": namespace } })
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a selector lookup is a list")
        .iter()
        .map(|object| {
            format!(
                "{}/{}",
                object["metadata"]["namespace"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[test]
fn a_selector_lookup_reads_the_matching_objects_of_the_parents_namespace_sorted_by_name() {
    let rule = fan_in("");
    let available = [
        service("shop", "web", Some("true")),
        service("shop", "api", Some("true")),
        service("shop", "db", Some("false")),
        service("shop", "cache", None),
        service("other", "admin", Some("true")),
        json!({ "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "x", "namespace": "shop", "labels": { "expose": "true" } } }),
    ];
    let lookups = gather_lookups_offline(&rule, &parent("shop"), &available).expect("gathers");
    assert_eq!(names(&lookups["services"]), ["shop/api", "shop/web"]);
}

#[test]
fn the_order_of_the_candidates_does_not_change_the_list() {
    let rule = fan_in("");
    let lookup = rule.lookup("services").expect("lookup");
    let forward = vec![
        service("shop", "a", Some("true")),
        service("shop", "b", Some("true")),
        service("shop", "c", Some("true")),
    ];
    let mut backward = forward.clone();
    backward.reverse();
    assert_eq!(
        select_lookup_objects(lookup, Some("shop"), forward).expect("selects"),
        select_lookup_objects(lookup, Some("shop"), backward).expect("selects")
    );
}

#[test]
fn all_namespaces_reads_every_namespace_sorted_by_namespace_then_name() {
    let rule = fan_in("allNamespaces: true");
    let available = [
        service("shop", "web", Some("true")),
        service("admin", "web", Some("true")),
        service("admin", "api", Some("true")),
    ];
    let lookups = gather_lookups_offline(&rule, &parent("shop"), &available).expect("gathers");
    assert_eq!(names(&lookups["services"]), ["admin/api", "admin/web", "shop/web"]);
}

#[test]
fn a_literal_namespace_reads_that_namespace_whatever_the_parents() {
    let rule = fan_in("namespace: admin");
    let available = [
        service("shop", "web", Some("true")),
        service("admin", "api", Some("true")),
    ];
    let lookups = gather_lookups_offline(&rule, &parent("shop"), &available).expect("gathers");
    assert_eq!(names(&lookups["services"]), ["admin/api"]);
}

#[test]
fn the_worker_is_asked_for_the_namespace_the_lookup_reads() {
    let rule = fan_in("");
    let mut asked = Vec::new();
    gather_lookups(
        &rule,
        &parent("shop"),
        |_, _, _| None,
        |lookup, namespace| {
            asked.push((lookup.kind.clone(), namespace.map(str::to_owned)));
            Vec::new()
        },
    )
    .expect("gathers");
    assert_eq!(asked, [("Service".to_owned(), Some("shop".to_owned()))]);
}

#[test]
fn no_member_is_an_empty_list_not_null() {
    let rule = fan_in("");
    let lookups = gather_lookups_offline(&rule, &parent("shop"), &[]).expect("gathers");
    assert_eq!(lookups["services"], json!([]));
}

#[test]
fn more_members_than_max_items_is_a_render_error_naming_the_lookup() {
    let rule = fan_in("maxItems: 2");
    let available: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|name| service("shop", name, Some("true")))
        .collect();
    let error = gather_lookups_offline(&rule, &parent("shop"), &available).expect_err("past the cap");
    let message = error.to_string();
    assert!(message.contains("lookup `services`"), "{message}");
    assert!(message.contains("matches 3 objects, more than the 2"), "{message}");
    assert!(
        gather_lookups_offline(&rule, &parent("shop"), &available[..2]).is_ok(),
        "exactly the cap is allowed"
    );
}

#[test]
fn json_path_projects_each_member() {
    let rule = fan_in("jsonPath: '{.metadata.name}'");
    let available = [
        service("shop", "web", Some("true")),
        service("shop", "api", Some("true")),
    ];
    let lookups = gather_lookups_offline(&rule, &parent("shop"), &available).expect("gathers");
    assert_eq!(lookups["services"], json!(["api", "web"]));
}

#[test]
fn set_based_requirements_select_too() {
    let rule = reconciler(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: r }\nspec:\n  \
         for: { apiVersion: v1, kind: ConfigMap }\n  lookups:\n    services:\n      apiVersion: v1\n      \
         kind: Service\n      selector:\n        matchExpressions:\n          \
         - { key: expose, operator: In, values: [\"true\", \"yes\"] }\n  children:\n    - id: c\n      \
         template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata: { name: x }\n",
        "r",
    );
    let lookup = rule.lookup("services").expect("lookup");
    assert!(selects_lookup_object(
        lookup,
        Some("shop"),
        &service("shop", "a", Some("yes"))
    ));
    assert!(!selects_lookup_object(
        lookup,
        Some("shop"),
        &service("shop", "a", Some("no"))
    ));
    assert!(!selects_lookup_object(
        lookup,
        Some("shop"),
        &service("shop", "a", None)
    ));
    assert!(
        !selects_lookup_object(lookup, Some("other"), &service("shop", "a", Some("yes"))),
        "another namespace"
    );
    assert!(
        selects_lookup_object(lookup, None, &service("shop", "a", Some("yes"))),
        "any namespace"
    );
}

#[test]
fn a_cluster_scoped_parent_must_say_which_namespace_a_selector_reads() {
    let rule = reconciler(
        "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: r }\nspec:\n  \
         for: { apiVersion: v1, kind: Namespace, name: shop }\n  lookups:\n    \
         services: { apiVersion: v1, kind: Service, selector: { matchLabels: { expose: \"true\" } } }\n  \
         children:\n    - id: c\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        \
         metadata: { name: x, namespace: shop }\n",
        "r",
    );
    let namespace = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "shop" } });
    let error = gather_lookups_offline(&rule, &namespace, &[]).expect_err("no namespace to default to");
    assert!(error.to_string().contains("`allNamespaces: true`"), "{error}");
}

#[test]
fn the_rendered_child_sees_the_list() {
    let rule = fan_in("");
    let available = [
        service("shop", "web", Some("true")),
        service("shop", "api", Some("true")),
    ];
    let lookups = gather_lookups_offline(&rule, &parent("shop"), &available).expect("gathers");
    let rendered = super::render_children(&rule, &parent("shop"), &lookups).expect("renders");
    assert_eq!(rendered.children[0]["data"]["count"], "2");
}
