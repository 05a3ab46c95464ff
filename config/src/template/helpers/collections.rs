//! Text and list/mapping helpers: len, split/join/replace/substr/title, index/dig, keys/values, sort/uniq/slice/merge.

use super::*;

/// Characters of a string (not bytes), items of a list, keys of a mapping; `null` has none.
pub(super) fn helper_len(args: &[Value]) -> Result<Value, String> {
    match &args[0] {
        Value::String(text) => Ok(Value::from(text.chars().count())),
        Value::Array(items) => Ok(Value::from(items.len())),
        Value::Object(fields) => Ok(Value::from(fields.len())),
        Value::Null => Ok(Value::from(0)),
        other => Err(format!("expects a string, a list or a mapping, got {}", kind_of(other))),
    }
}

/// The pieces of the text between separators; an empty separator splits into characters.
pub(super) fn helper_split(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let separator = text_of(&args[1])?;
    let pieces: Vec<Value> = if separator.is_empty() {
        text.chars().map(|c| Value::String(c.to_string())).collect()
    } else {
        text.split(separator.as_str())
            .map(|piece| Value::String(piece.to_string()))
            .collect()
    };
    Ok(Value::Array(pieces))
}

pub(super) fn helper_join(args: &[Value]) -> Result<Value, String> {
    let items = list_of(&args[0])?.iter().map(text_of).collect::<Result<Vec<_>, _>>()?;
    let separator = text_of(&args[1])?;
    let size =
        items.iter().map(String::len).sum::<usize>() + separator.len().saturating_mul(items.len().saturating_sub(1));
    within_budget(size)?;
    Ok(Value::String(items.join(&separator)))
}

pub(super) fn helper_replace(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let old = text_of(&args[1])?;
    let new = text_of(&args[2])?;
    if old.is_empty() {
        return Err("the text to replace must not be empty".to_string());
    }
    let count = text.matches(old.as_str()).count();
    within_budget((text.len() - count * old.len()).saturating_add(count.saturating_mul(new.len())))?;
    Ok(Value::String(text.replace(old.as_str(), &new)))
}

/// The characters from `start` to `end` (exclusive; default: the end), clamped to the text or list.
pub(super) fn range_of(length: usize, args: &[Value]) -> Result<(usize, usize), String> {
    let start = count_of(&args[0], "the start")?.min(length);
    let end = match args.get(1) {
        Some(end) => count_of(end, "the end")?.min(length),
        None => length,
    };
    if end < start {
        return Err(format!("the end ({end}) is before the start ({start})"));
    }
    Ok((start, end))
}

pub(super) fn helper_substr(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let (start, end) = range_of(text.chars().count(), &args[1..])?;
    Ok(Value::String(text.chars().skip(start).take(end - start).collect()))
}

pub(super) fn helper_slice(args: &[Value]) -> Result<Value, String> {
    match &args[0] {
        Value::Array(items) => {
            let (start, end) = range_of(items.len(), &args[1..])?;
            Ok(Value::Array(items[start..end].to_vec()))
        }
        Value::String(_) => helper_substr(args),
        other => Err(format!("expects a list or a string, got {}", kind_of(other))),
    }
}

/// A string holds a substring, a list an item (equal as JSON values), a mapping a key.
pub(super) fn helper_contains(args: &[Value]) -> Result<Value, String> {
    let found = match &args[0] {
        Value::Array(items) => items.contains(&args[1]),
        Value::Object(fields) => fields.contains_key(&text_of(&args[1])?),
        other => text_of(other)?.contains(&text_of(&args[1])?),
    };
    Ok(Value::Bool(found))
}

/// Every word's first letter upper-cased, the rest kept (Go's `strings.Title`): a word starts after anything that
/// is not a letter, a digit or `_`.
pub(super) fn helper_title(args: &[Value]) -> Result<Value, String> {
    let text = text_of(&args[0])?;
    let mut titled = String::with_capacity(text.len());
    let mut at_word_start = true;
    for c in text.chars() {
        if at_word_start {
            titled.extend(c.to_uppercase());
        } else {
            titled.push(c);
        }
        at_word_start = !(c.is_alphanumeric() || c == '_');
    }
    Ok(Value::String(titled))
}

/// `index x k1 k2 …`: a list's item (an integer index) or a mapping's field (a key), then the next one's in it.
/// Strict, like missing fields: an index out of range or a missing key is an error (`dig` has a default).
pub(super) fn helper_index(args: &[Value]) -> Result<Value, String> {
    let mut current = &args[0];
    for key in &args[1..] {
        current = match current {
            Value::Array(items) => {
                let at = count_of(key, "a list index")?;
                items
                    .get(at)
                    .ok_or_else(|| format!("index {at} is out of range for a list of {}", items.len()))?
            }
            Value::Object(fields) => {
                let name = text_of(key)?;
                fields.get(&name).ok_or_else(|| {
                    format!(
                        "no key {} (use `dig` for a default)",
                        serde_json::to_string(&name).unwrap_or_default()
                    )
                })?
            }
            other => return Err(format!("cannot index {}", kind_of(other))),
        };
    }
    Ok(current.clone())
}

/// `dig x k1 k2 … default`: like `index`, but the default when a key or index is not there (or leads to `null`).
pub(super) fn helper_dig(args: &[Value]) -> Result<Value, String> {
    let (default, path) = args[1..].split_last().unwrap_or((&Value::Null, &[]));
    let mut current = &args[0];
    for key in path {
        let next = match current {
            Value::Array(items) => key
                .as_u64()
                .and_then(|at| usize::try_from(at).ok())
                .and_then(|at| items.get(at)),
            Value::Object(fields) => fields.get(&text_of(key)?),
            _ => None,
        };
        match next {
            Some(value) => current = value,
            None => return Ok(default.clone()),
        }
    }
    Ok(if current.is_null() {
        default.clone()
    } else {
        current.clone()
    })
}

/// A mapping's keys, sorted.
pub(super) fn helper_keys(args: &[Value]) -> Result<Value, String> {
    let mut keys: Vec<&String> = map_of(&args[0])?.keys().collect();
    keys.sort();
    Ok(Value::Array(
        keys.into_iter().map(|key| Value::String(key.clone())).collect(),
    ))
}

/// A mapping's values, in the order of its sorted keys.
pub(super) fn helper_values(args: &[Value]) -> Result<Value, String> {
    let mut fields: Vec<(&String, &Value)> = map_of(&args[0])?.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    Ok(Value::Array(
        fields.into_iter().map(|(_, value)| value.clone()).collect(),
    ))
}

/// A list of strings sorted by text (Unicode code points), or of numbers by value.
pub(super) fn helper_sort(args: &[Value]) -> Result<Value, String> {
    let items = list_of(&args[0])?;
    let mut sorted = items.clone();
    if items.iter().all(Value::is_string) {
        sorted.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    } else if items.iter().all(Value::is_number) {
        let mut keyed = items
            .iter()
            .map(|item| Ok((number_of(item)?, item.clone())))
            .collect::<Result<Vec<_>, String>>()?;
        keyed.sort_by(|a, b| compare_numbers(a.0, b.0));
        sorted = keyed.into_iter().map(|(_, item)| item).collect();
    } else {
        return Err("expects a list of strings or a list of numbers".to_string());
    }
    Ok(Value::Array(sorted))
}

/// A list without repeated items (equal as JSON values), each kept where it first appears.
pub(super) fn helper_uniq(args: &[Value]) -> Result<Value, String> {
    let mut seen = std::collections::HashSet::new();
    let mut unique = Vec::new();
    for item in list_of(&args[0])? {
        // Compact JSON identifies a value (mappings' keys are sorted), hashing keeps this linear.
        if seen.insert(serde_json::to_string(item).map_err(|e| e.to_string())?) {
            unique.push(item.clone());
        }
    }
    Ok(Value::Array(unique))
}

/// Mappings merged at the top level, a later one's key winning; `null` counts as an empty mapping.
pub(super) fn helper_merge(args: &[Value]) -> Result<Value, String> {
    let mut merged = serde_json::Map::new();
    for arg in args {
        if arg.is_null() {
            continue;
        }
        for (key, value) in map_of(arg)? {
            merged.insert(key.clone(), value.clone());
        }
    }
    Ok(Value::Object(merged))
}
