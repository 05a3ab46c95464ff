//! The rule reference (`docs/rule-reference.md`): every field of every rule kind in Markdown tables, from the schema.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// The Markdown reference of a rule-language JSON Schema such as [`crate::rule_language_schema`]: one section per
/// rule kind (the `then` of each `allOf` `if`/`then`, or each `oneOf`/`anyOf` branch), then one table per object
/// reached from it, each field named by its path from the top of the document.
///
/// `$ref`s are followed; a definition met again inside itself is not expanded again but links to a section of its
/// own. Fields are sorted by name, so the output depends on the schema only, not on how the JSON keeps key order.
pub fn rule_reference_markdown(schema: &Value) -> String {
    let mut builder = Builder {
        root: schema,
        sections: Vec::new(),
        expanding: Vec::new(),
        recursive: Vec::new(),
    };
    for (kind, kind_schema) in document_kinds(schema) {
        let resolved = builder.resolve(kind_schema);
        let label = kind.unwrap_or_else(|| kind_label(&resolved));
        builder.object_section(&label, "", None, &resolved);
    }
    // Building a recursive definition's section can meet further recursive definitions: a work list.
    let mut next = 0;
    while let Some(recursive) = builder.recursive.get(next) {
        let definition = Definition {
            name: recursive.name,
            target: recursive.target,
        };
        let mut resolved = builder.resolve(definition.target);
        // Its own fields are inside it too: a field of its type links back here.
        resolved.definition = Some(definition);
        let section = builder.object_section(&code(definition.name), "", None, &resolved);
        if let Target::Section(index) = section {
            builder.sections[index].recursive = true;
            builder.recursive[next].section = Some(index);
        }
        next += 1;
    }
    render(schema, &builder)
}

const GENERATED_NOTE: &str = "> Generated from the rule language's JSON Schema \
     ([`ruleplane.schema.json`](ruleplane.schema.json)) by `ruleplane_config::rule_reference_markdown`; do not edit \
     by hand. Regenerate with `UPDATE_GOLDEN=1 cargo test -p ruleplane-config --test rules schema_file::` (a test \
     fails while this file is stale).";

const LEGEND: &str = "Each table lists the fields of one object by their path from the top of the document: `a[]` \
     is any item of the list `a`, `a.<name>` any entry of the map `a`. Types, required fields and allowed values \
     are those `ruleplane validate` checks.";

const RECURSIVE_NOTE: &str = "This type contains itself: fields of this type link here instead of repeating it.";

/// The rule kinds of a document schema, in schema order: a name when the dispatch names it, and the kind's schema.
fn document_kinds(root: &Value) -> Vec<(Option<String>, &Value)> {
    let mut kinds = Vec::new();
    for branch in root.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        if let Some(then) = branch.get("then") {
            let name = branch.pointer("/if/properties/kind/const").and_then(Value::as_str);
            kinds.push((name.map(str::to_owned), then));
        }
    }
    for keyword in ["oneOf", "anyOf"] {
        for branch in root.get(keyword).and_then(Value::as_array).into_iter().flatten() {
            kinds.push((None, branch));
        }
    }
    if kinds.is_empty() {
        kinds.push((None, root));
    }
    kinds
}

/// A kind's name when the dispatch does not give it: its `kind` constant, its title, or its definition's name.
fn kind_label(resolved: &Resolved<'_>) -> String {
    let schema = &resolved.schema;
    schema
        .get("properties")
        .and_then(|properties| properties.get("kind"))
        .and_then(|kind| kind.get("const"))
        .and_then(Value::as_str)
        .or_else(|| schema.get("title").and_then(Value::as_str))
        .or(resolved.definition.map(|definition| definition.name))
        .unwrap_or("Document")
        .to_owned()
}

/// A schema with its `$ref`s and single-branch wrappers (`allOf: [x]`, `anyOf: [x, null]`) followed, the outer
/// keywords (a field's own description and default) overriding the referenced ones.
struct Resolved<'s> {
    schema: Map<String, Value>,
    /// The innermost definition reached through a `$ref`.
    definition: Option<Definition<'s>>,
    /// The description of the type itself, before a field's own description overrode it.
    type_description: Option<String>,
}

#[derive(Clone, Copy)]
struct Definition<'s> {
    name: &'s str,
    target: &'s Value,
}

/// One object's table.
struct Section {
    /// The kind the object belongs to (or a recursive definition, in backticks), as headings show it.
    group: String,
    /// Path of the object from the top of its kind's document; empty for the document itself.
    path: String,
    /// Numbers the objects a field may be, when it may be more than one.
    variant: Option<usize>,
    /// A recursive definition's own section.
    recursive: bool,
    description: Option<String>,
    rows: Vec<Row>,
}

impl Section {
    fn heading(&self) -> String {
        let mut heading = if self.path.is_empty() {
            format!("## {}", self.group)
        } else {
            format!("### {} {}", self.group, code(&self.path))
        };
        if let Some(variant) = self.variant {
            heading.push_str(&format!(" (variant {variant})"));
        }
        heading
    }
}

struct Row {
    path: String,
    shape: Shape,
    required: bool,
    default: Option<String>,
    allowed: Vec<String>,
    description: Vec<String>,
}

enum Shape {
    Plain(String),
    Object(Target),
    List(Box<Shape>),
    Map(Box<Shape>),
    Either(Vec<Shape>),
}

enum Target {
    Section(usize),
    /// A recursive definition, by its position in [`Builder::recursive`].
    Recursive(usize),
}

/// A definition met inside itself, and its section once built.
struct Recursive<'s> {
    name: &'s str,
    target: &'s Value,
    section: Option<usize>,
}

/// What a field's schema says beyond its description: its shape, allowed values, and notes (enum values'
/// and variants' descriptions).
struct Described {
    shape: Shape,
    allowed: Vec<String>,
    notes: Vec<String>,
}

struct Builder<'s> {
    root: &'s Value,
    /// In document order: each object's section follows its parent's (depth first).
    sections: Vec<Section>,
    /// Definitions whose fields are being listed, outermost first: meeting one again is recursion.
    expanding: Vec<&'s Value>,
    recursive: Vec<Recursive<'s>>,
}

impl<'s> Builder<'s> {
    fn resolve<'a>(&'a self, schema: &'a Value) -> Resolved<'s> {
        // Outer layers and the keyword each consumed, outermost first.
        let mut layers: Vec<(&'a Map<String, Value>, &str)> = Vec::new();
        let mut definition = None;
        let mut current = schema;
        // Bounded: a `$ref` cycle with no object in between would otherwise never end.
        for _ in 0..32 {
            let Some(object) = current.as_object() else {
                break;
            };
            if let Some(reference) = object.get("$ref").and_then(Value::as_str)
                && let Some(found) = self.definition(reference)
            {
                layers.push((object, "$ref"));
                definition = Some(found);
                current = found.target;
                continue;
            }
            if let Some((keyword, inner)) = single_branch(object) {
                layers.push((object, keyword));
                current = inner;
                continue;
            }
            break;
        }
        let mut schema = current.as_object().cloned().unwrap_or_default();
        let type_description = schema.get("description").and_then(Value::as_str).map(str::to_owned);
        for (layer, consumed) in layers.iter().rev() {
            for (key, value) in layer.iter() {
                if key != consumed {
                    schema.insert(key.clone(), value.clone());
                }
            }
        }
        Resolved {
            schema,
            definition,
            type_description,
        }
    }

    fn definition(&self, reference: &str) -> Option<Definition<'s>> {
        let pointer = reference.strip_prefix('#')?;
        let target = self.root.pointer(pointer)?;
        let name = self.root_key(pointer).unwrap_or("schema");
        Some(Definition { name, target })
    }

    /// The last segment of a JSON pointer into the root schema, borrowed from the schema's own keys.
    fn root_key(&self, pointer: &str) -> Option<&'s str> {
        let (parent, last) = pointer.rsplit_once('/')?;
        let last = last.replace("~1", "/").replace("~0", "~");
        let parent = self.root.pointer(parent)?.as_object()?;
        parent.keys().find(|key| **key == last).map(String::as_str)
    }

    /// Lists the fields of an object in a section of their own (and their objects' after it), or links to the
    /// section of a recursive definition.
    fn object_section(&mut self, group: &str, path: &str, variant: Option<usize>, resolved: &Resolved<'s>) -> Target {
        if let Some(definition) = resolved.definition
            && self.expanding.iter().any(|open| std::ptr::eq(*open, definition.target))
        {
            let index = match self
                .recursive
                .iter()
                .position(|r| std::ptr::eq(r.target, definition.target))
            {
                Some(index) => index,
                None => {
                    self.recursive.push(Recursive {
                        name: definition.name,
                        target: definition.target,
                        section: None,
                    });
                    self.recursive.len() - 1
                }
            };
            return Target::Recursive(index);
        }
        let index = self.sections.len();
        self.sections.push(Section {
            group: group.to_owned(),
            path: path.to_owned(),
            variant,
            recursive: false,
            description: resolved.type_description.clone(),
            rows: Vec::new(),
        });
        if let Some(definition) = resolved.definition {
            self.expanding.push(definition.target);
        }
        let schema = &resolved.schema;
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut fields: Vec<(&String, &Value)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .collect();
        fields.sort_by(|a, b| a.0.cmp(b.0));
        let rows = fields
            .into_iter()
            .map(|(name, field)| {
                let field_path = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                self.row(group, field_path, field, required.contains(&name.as_str()))
            })
            .collect();
        if resolved.definition.is_some() {
            self.expanding.pop();
        }
        self.sections[index].rows = rows;
        Target::Section(index)
    }

    fn row(&mut self, group: &str, path: String, field: &Value, required: bool) -> Row {
        let resolved = self.resolve(field);
        let described = self.describe(group, &path, None, &resolved);
        let schema = &resolved.schema;
        let mut description: Vec<String> = schema
            .get("description")
            .and_then(Value::as_str)
            .map(prose)
            .into_iter()
            .collect();
        description.extend(described.notes);
        Row {
            path,
            shape: described.shape,
            required,
            default: schema
                .get("default")
                .filter(|value| !value.is_null())
                .map(|value| code(&scalar(value))),
            allowed: described.allowed,
            description,
        }
    }

    fn describe(&mut self, group: &str, path: &str, variant: Option<usize>, resolved: &Resolved<'s>) -> Described {
        let schema = &resolved.schema;
        let mut allowed = constraints(schema);
        let mut notes = Vec::new();
        if let Some(values) = self.enum_values(schema) {
            let listed: Vec<String> = values.iter().map(|(value, _)| code(&scalar(value))).collect();
            allowed.push(listed.join(", "));
            for (value, description) in &values {
                if let Some(description) = description {
                    notes.push(format!("{}: {}", code(&scalar(value)), prose(description)));
                }
            }
            let shape = Shape::Plain(enum_type(schema, &values));
            return Described { shape, allowed, notes };
        }
        let branches = self.branches(schema);
        if !branches.is_empty() {
            let objects = branches
                .iter()
                .filter(|branch| branch.schema.contains_key("properties"))
                .count();
            let mut shapes = Vec::new();
            let mut object_number = 0;
            for branch in &branches {
                let variant = if objects > 1 && branch.schema.contains_key("properties") {
                    object_number += 1;
                    Some(object_number)
                } else {
                    None
                };
                let described = self.describe(group, path, variant, branch);
                if let Some(description) = branch.schema.get("description").and_then(Value::as_str) {
                    let mut kind = simple_type(&branch.schema);
                    if let Some(variant) = variant {
                        kind.push_str(&format!(" (variant {variant})"));
                    }
                    notes.push(format!("As {}: {}", with_article(&kind), prose(description)));
                }
                shapes.push(described.shape);
                allowed.extend(described.allowed);
                notes.extend(described.notes);
            }
            return Described {
                shape: Shape::Either(shapes),
                allowed,
                notes,
            };
        }
        let types = types(schema);
        let shape = if schema.contains_key("properties") {
            Shape::Object(self.object_section(group, path, variant, resolved))
        } else if types.contains(&"array") || (types.is_empty() && schema.contains_key("items")) {
            match schema.get("items").filter(|items| items.is_object()) {
                Some(items) => {
                    let items = self.resolve(items);
                    let described = self.describe(group, &format!("{path}[]"), None, &items);
                    allowed.extend(described.allowed);
                    notes.extend(described.notes);
                    Shape::List(Box::new(described.shape))
                }
                None => Shape::Plain("list".to_owned()),
            }
        } else if let Some(values) = schema.get("additionalProperties").filter(|values| values.is_object()) {
            let values = self.resolve(values);
            let described = self.describe(group, &format!("{path}.<name>"), None, &values);
            allowed.extend(described.allowed);
            notes.extend(described.notes);
            Shape::Map(Box::new(described.shape))
        } else {
            Shape::Plain(plain_type(schema))
        };
        Described { shape, allowed, notes }
    }

    /// The values of an enumeration (`const`, `enum`, or branches that are all constants) with their descriptions.
    fn enum_values(&self, schema: &Map<String, Value>) -> Option<Vec<(Value, Option<String>)>> {
        if let Some(value) = schema.get("const") {
            return Some(vec![(value.clone(), None)]);
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return Some(values.iter().map(|value| (value.clone(), None)).collect());
        }
        let branches = self.branches(schema);
        if branches.is_empty() {
            return None;
        }
        branches
            .iter()
            .map(|branch| {
                let value = branch.schema.get("const").or_else(|| {
                    match branch.schema.get("enum").and_then(Value::as_array).map(Vec::as_slice) {
                        Some([only]) => Some(only),
                        _ => None,
                    }
                })?;
                let description = branch
                    .schema
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Some((value.clone(), description))
            })
            .collect()
    }

    /// The branches of a `oneOf`/`anyOf` other than `null`, resolved.
    fn branches(&self, schema: &Map<String, Value>) -> Vec<Resolved<'s>> {
        let Some(branches) = schema
            .get("oneOf")
            .or_else(|| schema.get("anyOf"))
            .and_then(Value::as_array)
        else {
            return Vec::new();
        };
        branches
            .iter()
            .filter(|branch| !is_null_schema(branch))
            .map(|branch| self.resolve(branch))
            .collect()
    }
}

/// `allOf: [x]`, or `anyOf`/`oneOf: [x, {type: null}]`: the schema `x` (nullability is no type of its own).
fn single_branch(object: &Map<String, Value>) -> Option<(&'static str, &Value)> {
    for keyword in ["allOf", "anyOf", "oneOf"] {
        let Some(branches) = object.get(keyword).and_then(Value::as_array) else {
            continue;
        };
        let others: Vec<&Value> = branches.iter().filter(|branch| !is_null_schema(branch)).collect();
        let single = match keyword {
            "allOf" => branches.len() == 1,
            _ => others.len() == 1,
        };
        if single {
            return Some((keyword, others[0]));
        }
    }
    None
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// The `type` keyword without `null` (an optional field's absence is what the required column tells).
fn types(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|name| *name != "null")
    .collect()
}

/// A type without structure: `string`, `integer (int32)`, `object (any fields)`.
fn plain_type(schema: &Map<String, Value>) -> String {
    let mut name = simple_type(schema);
    if name == "object" {
        name.push_str(" (any fields)");
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        name.push_str(&format!(" ({format})"));
    }
    name
}

/// The type's name alone: `string`, `object`, `list`; `any` when the schema does not say.
fn simple_type(schema: &Map<String, Value>) -> String {
    let names: Vec<&str> = types(schema)
        .into_iter()
        .map(|name| if name == "array" { "list" } else { name })
        .collect();
    if !names.is_empty() {
        return names.join(" or ");
    }
    if schema.contains_key("properties") || schema.contains_key("additionalProperties") {
        "object".to_owned()
    } else if schema.contains_key("items") {
        "list".to_owned()
    } else {
        "any".to_owned()
    }
}

/// The type of an enumeration: its own `type`, else its values' (all strings → `string`).
fn enum_type(schema: &Map<String, Value>, values: &[(Value, Option<String>)]) -> String {
    if !types(schema).is_empty() {
        return plain_type(schema);
    }
    let mut names: Vec<&str> = Vec::new();
    for (value, _) in values {
        let name = match value {
            Value::String(_) => "string",
            Value::Bool(_) => "boolean",
            Value::Number(number) if number.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::Array(_) => "list",
            Value::Object(_) => "object",
            Value::Null => continue,
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        "any".to_owned()
    } else {
        names.join(" or ")
    }
}

fn with_article(kind: &str) -> String {
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {kind}")
}

/// The validation keywords other than types and enumerations, in words.
fn constraints(schema: &Map<String, Value>) -> Vec<String> {
    let number = |key: &str| schema.get(key).filter(|value| value.is_number()).map(Value::to_string);
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    let plural = |n: u64, word: &str| {
        if n == 1 {
            format!("{n} {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    let mut words = Vec::new();
    match (number("minimum"), number("maximum")) {
        (Some(min), Some(max)) => words.push(format!("{min} to {max}")),
        (Some(min), None) => words.push(format!("≥ {min}")),
        (None, Some(max)) => words.push(format!("≤ {max}")),
        (None, None) => {}
    }
    if let Some(min) = number("exclusiveMinimum") {
        words.push(format!("> {min}"));
    }
    if let Some(max) = number("exclusiveMaximum") {
        words.push(format!("< {max}"));
    }
    match count("minLength") {
        Some(1) => words.push("non-empty".to_owned()),
        Some(min) if min > 1 => words.push(format!("at least {}", plural(min, "character"))),
        _ => {}
    }
    if let Some(max) = count("maxLength") {
        words.push(format!("at most {}", plural(max, "character")));
    }
    if let Some(min) = count("minItems").filter(|min| *min > 0) {
        words.push(format!("at least {}", plural(min, "item")));
    }
    if let Some(max) = count("maxItems") {
        words.push(format!("at most {}", plural(max, "item")));
    }
    if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
        words.push("unique items".to_owned());
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        words.push(format!("pattern {}", code(pattern)));
    }
    words
}

/// A value as written in a rule file: strings bare, everything else as JSON.
fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// An inline code span, whatever backticks the text holds.
fn code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// Description text for one table cell: wrapped lines joined, paragraphs kept apart, and a `<` outside code
/// spans escaped (Kubernetes' descriptions write `<key, value>`, which must not read as HTML).
fn prose(text: &str) -> String {
    let joined = text
        .replace("\r\n", "\n")
        .split("\n\n")
        .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|paragraph| !paragraph.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut out = String::with_capacity(joined.len());
    let mut in_code = false;
    for c in joined.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            _ => out.push(c),
        }
    }
    out.replace("\n\n", "<br><br>")
}

/// Text safe inside a table cell.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

fn render(schema: &Value, builder: &Builder<'_>) -> String {
    let title = schema.get("title").and_then(Value::as_str).unwrap_or("Rule");
    let title = format!("# {title} reference");
    let mut slugs = Slugger::default();
    slugs.slug(&title);
    let anchors: Vec<String> = builder
        .sections
        .iter()
        .map(|section| slugs.slug(&section.heading()))
        .collect();
    let recursive_anchor = |index: usize| {
        builder.recursive[index]
            .section
            .map(|section| anchors[section].clone())
            .unwrap_or_default()
    };
    let link = |target: &Target| match target {
        Target::Section(index) => format!("[object](#{})", anchors[*index]),
        Target::Recursive(index) => format!(
            "[{}](#{})",
            code(builder.recursive[*index].name),
            recursive_anchor(*index)
        ),
    };

    let mut out = format!("{title}\n\n{GENERATED_NOTE}\n\n");
    if let Some(description) = schema.get("description").and_then(Value::as_str) {
        out.push_str(&format!("{}\n\n", prose(description)));
    }
    out.push_str(&format!("{LEGEND}\n\n"));
    for (section, anchor) in builder.sections.iter().zip(&anchors) {
        if section.path.is_empty() {
            let label = if section.recursive {
                format!("{} (recursive type)", section.group)
            } else {
                section.group.clone()
            };
            out.push_str(&format!("- [{label}](#{anchor})\n"));
        }
    }
    for section in &builder.sections {
        out.push_str(&format!("\n{}\n\n", section.heading()));
        if section.recursive {
            out.push_str(&format!("{RECURSIVE_NOTE}\n\n"));
        }
        if let Some(description) = &section.description {
            out.push_str(&format!("{}\n\n", prose(description)));
        }
        if section.rows.is_empty() {
            out.push_str("No fields.\n");
            continue;
        }
        out.push_str("| field | type | required | default | allowed values | description |\n");
        out.push_str("| --- | --- | --- | --- | --- | --- |\n");
        for row in &section.rows {
            let cells = [
                code(&row.path),
                render_shape(&row.shape, &link),
                if row.required { "yes" } else { "no" }.to_owned(),
                row.default.clone().unwrap_or_default(),
                row.allowed.join("; "),
                row.description.join("<br>"),
            ];
            let cells: Vec<String> = cells.iter().map(|text| cell(text)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
    }
    out
}

fn render_shape(shape: &Shape, link: &dyn Fn(&Target) -> String) -> String {
    match shape {
        Shape::Plain(name) => name.clone(),
        Shape::Object(target) => link(target),
        Shape::List(items) => format!("list of {}", render_inner_shape(items, link)),
        Shape::Map(values) => format!("map of {}", render_inner_shape(values, link)),
        Shape::Either(shapes) => shapes
            .iter()
            .map(|shape| render_shape(shape, link))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// A list's items or a map's values: alternatives in parentheses (`list of (string or object)`).
fn render_inner_shape(shape: &Shape, link: &dyn Fn(&Target) -> String) -> String {
    match shape {
        Shape::Either(_) => format!("({})", render_shape(shape, link)),
        _ => render_shape(shape, link),
    }
}

/// Heading anchors as GitHub makes them: lower case, punctuation dropped, spaces as `-`, repeats numbered.
#[derive(Default)]
struct Slugger {
    seen: HashMap<String, usize>,
}

impl Slugger {
    fn slug(&mut self, heading: &str) -> String {
        let text = heading.trim_start_matches('#').trim();
        let base: String = text
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut slug = base.clone();
        while self.seen.contains_key(&slug) {
            let count = self.seen.entry(base.clone()).or_insert(0);
            *count += 1;
            slug = format!("{base}-{count}");
        }
        self.seen.insert(slug.clone(), 0);
        slug
    }
}

#[cfg(test)]
mod tests;
