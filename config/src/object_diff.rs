//! Comparing objects for people: subset matching, projection onto an expected shape, unified diffs of YAML.

use serde_json::{Map, Value};

/// Whether `actual` holds everything `expected` says: mappings by key (extra keys in `actual` are fine), lists in
/// order with items skipped (every expected item matches a later actual item than the previous one did), scalars
/// equal (numbers by value).
pub fn is_subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .all(|(key, value)| have.get(key).is_some_and(|found| is_subset(value, found))),
        (Value::Array(want), Value::Array(have)) => {
            let mut remaining = have.iter();
            want.iter()
                .all(|item| remaining.any(|candidate| is_subset(item, candidate)))
        }
        (Value::Number(want), Value::Number(have)) => want.as_f64() == have.as_f64(),
        (want, have) => want == have,
    }
}

/// `actual` cut down to the shape of `expected` (only the keys it names, lists item by item), so that a diff of
/// the two shows what differs and not every field the test left out.
pub fn project(actual: &Value, expected: &Value) -> Value {
    match (actual, expected) {
        (Value::Object(have), Value::Object(want)) => Value::Object(
            want.iter()
                .filter_map(|(key, shape)| Some((key.clone(), project(have.get(key)?, shape))))
                .collect::<Map<String, Value>>(),
        ),
        (Value::Array(have), Value::Array(want)) if !want.is_empty() => {
            // Items the expected list skips over stay visible, shaped like the nearest expected item.
            Value::Array(
                have.iter()
                    .enumerate()
                    .map(|(index, item)| project(item, &want[index.min(want.len() - 1)]))
                    .collect(),
            )
        }
        (actual, _) => actual.clone(),
    }
}

/// A unified diff of two YAML texts (empty when equal), labelled like `diff -u`.
pub(crate) fn unified_diff(old_label: &str, old: &str, new_label: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}

/// YAML text of a value, for diffs and reports.
pub fn yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn mappings_match_on_the_keys_expected() {
        let actual = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"replicas": 2}});
        assert!(is_subset(&json!({"spec": {"replicas": 2}}), &actual));
        assert!(
            is_subset(&json!({"spec": {"replicas": 2.0}}), &actual),
            "numbers by value"
        );
        assert!(
            !is_subset(&json!({"spec": {"replicas": "2"}}), &actual),
            "a string is not a number"
        );
        assert!(
            !is_subset(&json!({"spec": {"paused": false}}), &actual),
            "absent is not false"
        );
        assert!(is_subset(&json!({}), &actual));
    }

    #[test]
    fn lists_match_in_order_skipping_items() {
        let actual = json!([{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "True"}]);
        assert!(is_subset(&json!([{"type": "Synced"}]), &actual));
        assert!(is_subset(&json!([{"type": "Ready"}, {"type": "Synced"}]), &actual));
        assert!(
            !is_subset(&json!([{"type": "Synced"}, {"type": "Ready"}]), &actual),
            "order counts"
        );
        assert!(
            !is_subset(&json!([{"type": "Ready"}, {"type": "Ready"}]), &actual),
            "one item matches once"
        );
        assert!(is_subset(&json!([]), &actual));
    }

    #[test]
    fn projection_keeps_the_expected_shape_and_shows_skipped_items() {
        let actual = json!({"a": 1, "b": {"c": 2, "d": 3}, "list": [{"n": 1, "x": 0}, {"n": 2, "x": 0}]});
        let expected = json!({"b": {"c": 9}, "list": [{"n": 2}], "missing": true});
        assert_eq!(
            project(&actual, &expected),
            json!({"b": {"c": 2}, "list": [{"n": 1}, {"n": 2}]})
        );
    }

    #[test]
    fn the_diff_is_unified_and_empty_when_equal() {
        assert_eq!(unified_diff("a", "x: 1\n", "b", "x: 1\n"), "");
        let diff = unified_diff("expected", "x: 1\ny: 2\n", "rendered", "x: 1\ny: 3\n");
        assert!(diff.starts_with("--- expected\n+++ rendered\n"), "{diff}");
        assert!(diff.contains("-y: 2\n+y: 3\n"), "{diff}");
    }
}
