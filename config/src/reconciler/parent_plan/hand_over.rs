//! Fields handed to other controllers (`handOver`): set when a child is created, then left out of every compare
//! and apply, so Ruleplane never writes them back over the controller that took them (an HPA's `spec.replicas`).

use serde_json::{Map, Value};

use crate::reconciler::plan::{ChildApply, ObjectKey, child_id};
use crate::reconciler::resolved::Reconciler;

/// The desired children without their handed-over fields (what is compared and applied), and per child that has
/// any, the handed-over fields as a partial object (what its creation adds).
pub(super) fn split(rule: &Reconciler, desired: &[Value]) -> (Vec<Value>, Vec<(ObjectKey, Value)>) {
    let mut handed = Vec::new();
    let compared = desired
        .iter()
        .map(|child| {
            let paths = child_id(child)
                .and_then(|id| rule.child(id))
                .map(|template| template.hand_over.as_slice())
                .unwrap_or_default();
            let mut compared = child.clone();
            let mut taken = Value::Object(Map::new());
            for path in paths {
                if let Some(value) = take(&mut compared, path) {
                    put(&mut taken, path, value);
                }
            }
            if let (Some(key), false) = (ObjectKey::of(child), taken.as_object().is_none_or(Map::is_empty)) {
                handed.push((key, taken));
            }
            compared
        })
        .collect();
    (compared, handed)
}

/// Gives each child with handed-over fields its `initial` object: what is applied, plus those fields. An update
/// carries it too, because an update refused as immutable may be recreated (`recreate`), and that creation must
/// be whole again under the hand-over manager, as the first one was.
pub(super) fn attach_initial(applies: &mut [ChildApply], handed: &[(ObjectKey, Value)]) {
    for apply in applies.iter_mut() {
        if let Some((_, fields)) = handed.iter().find(|(key, _)| *key == apply.key) {
            let mut initial = apply.object.clone();
            merge(&mut initial, fields);
            apply.initial = Some(initial);
        }
    }
}

/// Removes the field at `path` (map fields only), returning its value.
fn take(object: &mut Value, path: &[String]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut here = object;
    for field in parents {
        here = here.get_mut(field.as_str())?;
    }
    here.as_object_mut()?.remove(last.as_str())
}

/// Sets the field at `path` in `object`, making the maps on the way.
fn put(object: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = object;
    for field in parents {
        let Some(map) = here.as_object_mut() else { return };
        here = map.entry(field.clone()).or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(map) = here.as_object_mut() {
        map.insert(last.clone(), value);
    }
}

/// Merges the maps of `extra` into `object` (values of `extra` win).
fn merge(object: &mut Value, extra: &Value) {
    match (object, extra) {
        (Value::Object(object), Value::Object(extra)) => {
            for (key, value) in extra {
                match object.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => merge(existing, value),
                    _ => {
                        object.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (object, extra) => *object = extra.clone(),
    }
}
