//! Parses YAML text into a tree that remembers the line and column of every key and value.
//!
//! Rules are first read into this tree (not directly into typed structs) so that the loader can report *all*
//! problems of a file at once, each at its exact position, instead of stopping at serde's first error.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_saphyr::{MessageFormatter, Spanned};

use crate::diagnostics::Pos;

/// A YAML value with the position where it was written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) pos: Pos,
    pub(crate) value: NodeValue,
}

/// A mapping key with its own position (unknown-field errors point at the key, not the value).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    String(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// One step of a path into a document: a mapping key or a sequence index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PathStep {
    Key(String),
    Index(usize),
}

impl fmt::Display for PathStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathStep::Key(key) => write!(f, ".{key}"),
            PathStep::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// Renders a path like `spec.versions[0].name` for messages.
pub(crate) fn path_to_string(path: &[PathStep]) -> String {
    let text: String = path.iter().map(ToString::to_string).collect();
    text.trim_start_matches('.').to_string()
}

impl Node {
    /// Type name used in "expected X, found Y" messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "boolean",
            NodeValue::Int(_) | NodeValue::UInt(_) => "integer",
            NodeValue::Float(_) => "number",
            NodeValue::String(_) => "string",
            NodeValue::Seq(_) => "list",
            NodeValue::Map(_) => "mapping",
        }
    }

    /// Looks up a mapping entry by key.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, node)| node)
    }

    /// Looks up a mapping entry by key, returning the key (with its position) too.
    pub(crate) fn entry(&self, key: &str) -> Option<(&Key, &Node)> {
        match &self.value {
            NodeValue::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::String(text) => Some(text),
            _ => None,
        }
    }

    /// Follows a path; returns the deepest node reached (so a message about a missing field can point at
    /// its parent) and whether the whole path was found.
    pub(crate) fn locate(&self, path: &[PathStep]) -> (&Node, bool) {
        let mut current = self;
        for step in path {
            let next = match (step, &current.value) {
                (PathStep::Key(key), NodeValue::Map(_)) => current.get(key),
                (PathStep::Index(index), NodeValue::Seq(items)) => items.get(*index),
                _ => None,
            };
            match next {
                Some(node) => current = node,
                None => return (current, false),
            }
        }
        (current, true)
    }

    /// Position of the node at `path`, or of the key naming it when the last step is a key
    /// (pointing at `weight:` reads better than pointing at `0`).
    pub(crate) fn pos_of(&self, path: &[PathStep]) -> Pos {
        if let Some((PathStep::Key(key), parent_path)) = path.split_last() {
            let (parent, found) = self.locate(parent_path);
            if found && let Some((key, _)) = parent.entry(key) {
                return key.pos;
            }
        }
        self.locate(path).0.pos
    }

    /// Position of the value at `path` (falls back to the nearest ancestor).
    pub(crate) fn value_pos_of(&self, path: &[PathStep]) -> Pos {
        self.locate(path).0.pos
    }

    /// Converts to plain JSON (positions dropped). Non-finite floats become null: JSON has no spelling for them.
    pub(crate) fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::UInt(u) => Value::from(*u),
            NodeValue::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            NodeValue::String(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| (key.name.clone(), value.to_json()))
                    .collect(),
            ),
        }
    }
}

fn pos_from(location: &serde_saphyr::Location) -> Pos {
    Pos::new(
        usize::try_from(location.line()).unwrap_or(usize::MAX).max(1),
        usize::try_from(location.column()).unwrap_or(usize::MAX).max(1),
    )
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<NodeValue>::deserialize(deserializer)?;
        Ok(Node {
            pos: pos_from(&spanned.referenced),
            value: spanned.value,
        })
    }
}

/// Keys may be any scalar in YAML; rules only use string keys, but numbers or booleans as keys
/// (e.g. `values: {1: 10}`) are kept as their text so the schema check can report them sensibly.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match NodeValue::deserialize(deserializer)? {
            NodeValue::String(s) => Ok(KeyText(s)),
            NodeValue::Bool(b) => Ok(KeyText(b.to_string())),
            NodeValue::Int(i) => Ok(KeyText(i.to_string())),
            NodeValue::UInt(u) => Ok(KeyText(u.to_string())),
            NodeValue::Float(f) => Ok(KeyText(f.to_string())),
            NodeValue::Null => Ok(KeyText("null".to_string())),
            NodeValue::Seq(_) | NodeValue::Map(_) => Err(de::Error::custom(
                "mapping keys must be scalars (strings), not lists or mappings",
            )),
        }
    }
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeValueVisitor)
    }
}

struct NodeValueVisitor;

impl<'de> Visitor<'de> for NodeValueVisitor {
    type Value = NodeValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }
    fn visit_none<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeValue, D::Error> {
        NodeValue::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<NodeValue, E> {
        Ok(i64::try_from(v).map_or(NodeValue::UInt(v), NodeValue::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<NodeValue, E> {
        i64::try_from(v)
            .map(NodeValue::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeValue, E> {
        u64::try_from(v)
            .map(|u| self.visit_u64::<E>(u).unwrap_or(NodeValue::UInt(u)))
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<NodeValue, E> {
        Ok(NodeValue::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<NodeValue, E> {
        Ok(NodeValue::String(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<NodeValue, E> {
        Ok(NodeValue::String(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(NodeValue::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
            let value = map.next_value::<Node>()?;
            entries.push((
                Key {
                    name: key.value.0,
                    pos: pos_from(&key.referenced),
                },
                value,
            ));
        }
        Ok(NodeValue::Map(entries))
    }
}

/// A YAML value read straight into JSON: what [`Node::to_json`] of the parsed tree gives, without building the
/// tree. Rendered template output is parsed on every reconcile, and only its syntax errors need a position
/// (which the parser reports itself); building a located tree there cost a tenth of a busy manager's CPU.
struct PlainJson(Value);

impl<'de> Deserialize<'de> for PlainJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PlainJsonVisitor).map(PlainJson)
    }
}

struct PlainJsonVisitor;

impl<'de> Visitor<'de> for PlainJsonVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        PlainJson::deserialize(d).map(|plain| plain.0)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        i64::try_from(v)
            .map(Value::from)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        u64::try_from(v)
            .map(Value::from)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::String(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(PlainJson(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = serde_json::Map::new();
        while let Some(KeyText(key)) = map.next_key()? {
            let PlainJson(value) = map.next_value()?;
            entries.insert(key, value);
        }
        Ok(Value::Object(entries))
    }
}

/// Type name of a JSON value in "expected X, found Y" messages, as [`Node::type_name`] names it.
pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// Every document of every file (`(name, text)`), visited with the file's diagnostics; a file that is not YAML is
/// reported as a syntax error. Returns every problem, file by file, each file's in position order.
pub(crate) fn each_document(
    files: &[(String, String)],
    mut visit: impl FnMut(&Node, &mut crate::diagnostics::FileDiagnostics),
) -> Vec<crate::diagnostics::Diagnostic> {
    let mut problems = Vec::new();
    for (name, text) in files {
        let mut out = crate::diagnostics::FileDiagnostics::new(name, text);
        match parse_documents(text) {
            Err(error) => out.error(error.pos, crate::diagnostics::DiagnosticCode::Syntax, error.message),
            Ok(documents) => documents.iter().for_each(|doc| visit(doc, &mut out)),
        }
        out.found.sort_by_key(|d| (d.line, d.column));
        problems.append(&mut out.found);
    }
    problems
}

/// What kind of value this is, for messages ("got a list"): the one wording of helpers and `simulate`.
pub(crate) fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A YAML syntax (or structure) error with its position.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SyntaxError {
    pub(crate) pos: Pos,
    pub(crate) message: String,
}

/// Limits that keep hostile input (alias bombs, huge documents) from exhausting memory.
fn parse_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    // A rule file with a duplicate key is almost always a mistake: one of the values would be silently lost.
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options
}

/// Parses every document of a YAML stream. Empty documents are skipped.
pub(crate) fn parse_documents(text: &str) -> Result<Vec<Node>, SyntaxError> {
    let documents: Vec<Option<Node>> =
        serde_saphyr::from_str_multiple_with_options(text, parse_options()).map_err(|error| syntax_error(&error))?;
    Ok(documents
        .into_iter()
        .flatten()
        .filter(|node| node.value != NodeValue::Null)
        .collect())
}

/// Parses every document of a YAML stream straight into JSON (as [`parse_documents`] then [`Node::to_json`]
/// would). Empty documents are skipped.
/// Rendered objects are read as kubectl and Helm read manifests (YAML 1.1): an integer with a leading zero is
/// octal (`defaultMode: 0400` is 256), as is `0o400`.
pub(crate) fn parse_json_documents(text: &str) -> Result<Vec<Value>, SyntaxError> {
    let mut options = parse_options();
    options.legacy_octal_numbers = true;
    let documents: Vec<Option<PlainJson>> =
        serde_saphyr::from_str_multiple_with_options(text, options).map_err(|error| syntax_error(&error))?;
    Ok(documents
        .into_iter()
        .flatten()
        .map(|PlainJson(value)| value)
        .filter(|value| !value.is_null())
        .collect())
}

/// The message and position of a parser error.
pub(crate) fn syntax_error(error: &serde_saphyr::Error) -> SyntaxError {
    let pos = error.location().map(|l| pos_from(&l)).unwrap_or_default();
    let message = serde_saphyr::DefaultMessageFormatter.format_message(error).into_owned();
    let message = first_line(&message);
    // The parser's advice on duplicate keys is about its own options, which is no help to a rule author.
    let message = match message.strip_prefix("duplicate mapping key: ") {
        Some(rest) => {
            let key = rest.split(',').next().unwrap_or(rest).trim();
            format!("duplicate key `{key}`: each key may appear only once in a mapping")
        }
        None => message,
    };
    SyntaxError {
        pos: if pos.line == 0 { Pos::new(1, 1) } else { pos },
        message,
    }
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or("").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_of_keys_and_values_are_one_based() {
        let docs = parse_documents("a: 1\nb:\n  - x\n  - {c: true}\n---\n---\nz: |\n  text\n").unwrap();
        assert_eq!(docs.len(), 2);
        let first = &docs[0];
        let (key, value) = first.entry("b").unwrap();
        assert_eq!(key.pos, Pos::new(2, 1));
        let NodeValue::Seq(items) = &value.value else {
            panic!("expected a list")
        };
        assert_eq!(items[0].pos, Pos::new(3, 5));
        assert_eq!(items[1].get("c").unwrap().value, NodeValue::Bool(true));
        assert_eq!(docs[1].get("z").unwrap().as_str(), Some("text\n"));
        // Block scalars are positioned at their first content line, which is what template errors need.
        assert_eq!(docs[1].get("z").unwrap().pos, Pos::new(8, 3));
    }

    #[test]
    fn syntax_errors_are_located() {
        let error = parse_documents("a: 1\nb: [1, 2\n").unwrap_err();
        assert!(error.pos.line >= 2, "{error:?}");
        let error = parse_documents("a: 1\na: 2\n").unwrap_err();
        assert_eq!(error.pos.line, 2, "{error:?}");
    }

    #[test]
    fn straight_to_json_is_the_located_tree_converted() {
        let streams = [
            "a: 1\nb: [x, 2.5, -3, true, null, ~]\nc: {d: e}\n",
            "data:\n  1: one\n  true: yes\n  2.5: x\n  null: n\n",
            "big: 18446744073709551615\nneg: -9223372036854775808\nexp: 1e3\nfloat: 0.5\n",
            "base: &b {x: 1, y: [1, 2]}\ncopy: *b\nmerged:\n  <<: *b\n  z: 3\n",
            "text: |\n  line one\n  line two\nfolded: >\n  a\n  b\nquoted: \"80\"\nempty: ''\n",
            "---\n---\nfirst: 1\n---\n~\n---\nsecond: [2]\n",
            "- just\n- a list\n",
            "plain scalar",
        ];
        for stream in streams {
            let tree: Vec<Value> = parse_documents(stream).unwrap().iter().map(Node::to_json).collect();
            assert_eq!(parse_json_documents(stream).unwrap(), tree, "{stream}");
            for value in &tree {
                let node = &parse_documents(&serde_json::to_string(value).unwrap()).unwrap()[0];
                assert_eq!(json_type_name(value), node.type_name(), "{value}");
            }
        }
        for broken in ["a: 1\nb: [1, 2\n", "a: 1\na: 2\n", "? [a]\n: 1\n", "nan: .nan\n"] {
            assert_eq!(
                parse_json_documents(broken).unwrap_err(),
                parse_documents(broken).unwrap_err(),
                "{broken}"
            );
        }
    }

    #[test]
    fn rendered_integers_with_a_leading_zero_are_octal_as_kubectl_reads_them() {
        let documents =
            parse_json_documents("a: 0400\nb: 0o400\nc: 0\nd: \"0400\"\ne: 400\nf: -010\ng: 0.5\nh: 0x1F\n")
                .expect("parses");
        assert_eq!(
            documents,
            [serde_json::json!({"a": 256, "b": 256, "c": 0, "d": "0400", "e": 400, "f": -8, "g": 0.5, "h": 31})]
        );
    }
}
