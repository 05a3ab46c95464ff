//! Which children a template or collection reads, and the order children render in.

use super::super::resolved::Child;
use super::super::types::{ChildTemplate, is_item_template};
use crate::diagnostics::{DiagnosticCode, FileDiagnostics, Pos, did_you_mean};
use crate::load::{embedded_pos, key, path, with};
use crate::yaml_tree::{Node, PathStep};

/// The ids a template reads as `children.<id>` (e.g. `{{children.svc.spec.clusterIP}}`), each once.
pub(super) fn referenced_children(template: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(at) = rest.find("children.") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "children.".len()..];
        let id: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        // `spec.children.x` is a field of the parent, not a child: only a path that starts with `children`.
        let starts_path = before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'));
        if starts_path && !id.is_empty() && !found.contains(&id) {
            found.push(id);
        }
        rest = after;
    }
    found
}

/// The JSONPaths a collection child takes its items from (`forEach` entries, `count`).
pub(super) fn collection_paths(child: &ChildTemplate) -> impl Iterator<Item = &str> {
    child
        .for_each
        .iter()
        .flat_map(|entry| entry.values().map(String::as_str))
        .chain(child.count.as_deref())
}

/// The child ids a `count` or `forEach` entry reads: a template's `children.<id>`, or the child a JSONPath starts at.
pub(super) fn collection_reads(expression: &str) -> Vec<String> {
    if is_item_template(expression) {
        referenced_children(expression)
    } else {
        path_child(expression).into_iter().collect()
    }
}

/// The child id a JSONPath over the template context reads, when it starts at `children.<id>` (or
/// `children['<id>']`).
pub(super) fn path_child(expression: &str) -> Option<String> {
    let inner = expression
        .trim()
        .trim_start_matches('{')
        .trim_start_matches('$')
        .trim_start_matches('.');
    let rest = inner.strip_prefix("children")?;
    let id: String = if let Some(rest) = rest.strip_prefix('.') {
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect()
    } else {
        let rest = rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\""))?;
        rest.chars().take_while(|c| *c != '\'' && *c != '"').collect()
    };
    (!id.is_empty()).then_some(id)
}

/// Checks that children read only existing children and that no two read each other (also through others);
/// returns the order to render them in: a child after the children it reads.
pub(super) fn check_dependencies(
    children: &[Child],
    templates: &[ChildTemplate],
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
) -> Vec<usize> {
    let index_of = |id: &str| children.iter().position(|child| child.id == id);
    // Where child `index` reads `children.<id>`: the reference inside its template, positioned in the file.
    let reference_at = |index: usize, id: &str| {
        let template_path = with(&path(&["spec", "children"]), &[PathStep::Index(index), key("template")]);
        let template_pos = doc.value_pos_of(&template_path);
        let needle = format!("children.{id}");
        let template = templates.get(index).map_or("", |t| t.template.as_str());
        // Read by the collection's `forEach` entry or `count` rather than the template: there.
        let item_source = templates.get(index).and_then(|child| {
            let child_path = with(&path(&["spec", "children"]), &[PathStep::Index(index)]);
            let for_each = child.for_each.iter().enumerate().find_map(|(entry, names)| {
                let (name, _) = names
                    .iter()
                    .find(|(_, path)| collection_reads(path).iter().any(|read| read == id))?;
                Some(with(&child_path, &[key("forEach"), PathStep::Index(entry), key(name)]))
            });
            let count = || {
                child
                    .count
                    .as_deref()
                    .is_some_and(|count| collection_reads(count).iter().any(|read| read == id))
                    .then(|| with(&child_path, &[key("count")]))
            };
            for_each.or_else(count).filter(|_| !template.contains(&needle))
        });
        if let Some(source) = item_source {
            return (doc.value_pos_of(&source), String::new());
        }
        let in_template = template
            .lines()
            .enumerate()
            .find_map(|(line, text)| Some((line + 1, text[..text.find(&needle)?].chars().count() + 1)));
        // Written in a partial the template includes: there, in the partials document.
        let in_partial = || {
            let (name, at) = children.get(index)?.template.partials().find(&needle)?;
            Some((Pos::new(at.line, at.column), format!(" (in the partial `{name}`)")))
        };
        match in_template {
            Some((line, column)) => (embedded_pos(lines, template_pos, line, column), String::new()),
            None => in_partial().unwrap_or((template_pos, String::new())),
        }
    };
    for (index, child) in children.iter().enumerate() {
        for dependency in &child.depends_on {
            if index_of(dependency).is_none() {
                let suggestion = did_you_mean(dependency, children.iter().map(|c| c.id.as_str()));
                let (at, partial) = reference_at(index, dependency);
                out.error(
                    at,
                    DiagnosticCode::Reference,
                    format!(
                        "child `{}` reads `children.{dependency}`{partial}, which is not among `children`{suggestion}",
                        child.id
                    ),
                );
            }
        }
    }
    // Depth-first topological sort; a node met again while on the stack closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Visiting,
        Done,
    }
    fn visit(
        index: usize,
        children: &[Child],
        marks: &mut [Mark],
        order: &mut Vec<usize>,
        cycle: &mut Option<(usize, usize)>,
    ) {
        marks[index] = Mark::Visiting;
        for dependency in &children[index].depends_on {
            let Some(next) = children.iter().position(|c| &c.id == dependency) else {
                continue;
            };
            match marks[next] {
                Mark::New => visit(next, children, marks, order, cycle),
                Mark::Visiting => {
                    cycle.get_or_insert((index, next));
                }
                Mark::Done => {}
            }
        }
        marks[index] = Mark::Done;
        order.push(index);
    }
    let mut marks = vec![Mark::New; children.len()];
    let mut order = Vec::with_capacity(children.len());
    let mut cycle = None;
    for index in 0..children.len() {
        if marks[index] == Mark::New {
            visit(index, children, &mut marks, &mut order, &mut cycle);
        }
    }
    if let Some((from, to)) = cycle {
        let (a, b) = (&children[from].id, &children[to].id);
        let message = if a == b {
            format!("child `{a}` reads itself (`children.{a}`)")
        } else {
            format!("children `{a}` and `{b}` read each other (through `children.<id>`): a dependency cycle")
        };
        let (at, partial) = reference_at(from, b);
        let message = if partial.is_empty() {
            message
        } else {
            format!("{message}; `children.{b}` is read{partial}")
        };
        out.error(at, DiagnosticCode::Reference, message);
    }
    order
}
