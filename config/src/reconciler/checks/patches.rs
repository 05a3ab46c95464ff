//! Checks of a Reconciler's patches: ids, name or selector, templates with a literal kind, children they read.

use std::collections::HashMap;

use super::super::resolved::{PatchTarget, ResolvedPatch};
use super::super::types::ReconcilerRule;
use super::dependencies::referenced_children;
use crate::diagnostics::{DiagnosticCode, FileDiagnostics, Pos, did_you_mean};
use crate::load::{check_embedded_template, check_selector, embedded_pos, key, path, with};
use crate::template::Partials;
use crate::yaml_tree::{Node, PathStep};

/// Checks `patches` (ids, name or selector, templates with a literal kind) and compiles them; their templates may
/// include the file's partials, as children's do.
pub(super) fn check_patches(
    rule: &ReconcilerRule,
    doc: &Node,
    lines: &[&str],
    out: &mut FileDiagnostics,
    partials: &Partials,
) -> Vec<ResolvedPatch> {
    let mut compiled = Vec::new();
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for (index, patch) in rule.spec.patches.iter().enumerate() {
        let patch_path = path(&["spec", "patches"]);
        let patch_path = with(&patch_path, &[PathStep::Index(index)]);
        if let Some(first) = ids.insert(patch.id.as_str(), index) {
            out.error(
                doc.value_pos_of(&with(&patch_path, &[key("id")])),
                DiagnosticCode::Duplicate,
                format!("patch id `{}` is already used by spec.patches[{first}]", patch.id),
            );
        }
        let template_path = with(&patch_path, &[key("template")]);
        let template_pos = doc.value_pos_of(&template_path);
        let template = check_embedded_template(&patch.template, doc, &template_path, lines, out, partials);
        let static_kind = patch.static_kind();
        if template.is_some() && static_kind.is_none() {
            out.error(
                template_pos,
                DiagnosticCode::Template,
                format!(
                    "patch `{}`: the template must spell out `apiVersion:` and `kind:` literally on top-level lines \
                     (they tell Ruleplane which kind to watch and to grant access to)",
                    patch.id
                ),
            );
        }
        let target = match (&patch.name, &patch.selector) {
            (Some(name), None) => {
                check_embedded_template(name, doc, &with(&patch_path, &[key("name")]), lines, out, partials)
                    .map(PatchTarget::Name)
            }
            (None, Some(selector)) => {
                let selector_path = with(&patch_path, &[key("selector")]);
                check_selector(selector, doc, &selector_path, out);
                let match_labels: Option<Vec<(String, crate::template::CompiledTemplate)>> = selector
                    .match_labels
                    .iter()
                    .map(|(label, value)| {
                        let value_path = with(&selector_path, &[key("matchLabels"), key(label)]);
                        check_embedded_template(value, doc, &value_path, lines, out, partials)
                            .map(|t| (label.clone(), t))
                    })
                    .collect();
                if selector.match_labels.is_empty() && selector.match_expressions.is_empty() {
                    out.error(
                        doc.pos_of(&selector_path),
                        DiagnosticCode::Value,
                        format!(
                            "patch `{}`: an empty selector would patch every object of the kind",
                            patch.id
                        ),
                    );
                }
                match_labels.map(|match_labels| PatchTarget::Selector {
                    match_labels,
                    selector: selector.clone(),
                })
            }
            _ => {
                out.error(
                    doc.pos_of(&patch_path),
                    DiagnosticCode::Structure,
                    format!("patch `{}` needs exactly one of `name` and `selector`", patch.id),
                );
                None
            }
        };
        // Patches read children as children do: every id must be one of `children`.
        let mut depends_on: Vec<String> = Vec::new();
        let texts = std::iter::once(patch.template.as_str())
            .chain(patch.name.as_deref())
            .chain(
                patch
                    .selector
                    .iter()
                    .flat_map(|s| s.match_labels.values().map(String::as_str)),
            )
            .chain(template.iter().flat_map(|t| t.partials().sources()));
        for id in texts.flat_map(referenced_children) {
            if depends_on.contains(&id) {
                continue;
            }
            if !rule.spec.children.iter().any(|child| child.id == id) {
                let suggestion = did_you_mean(&id, rule.spec.children.iter().map(|c| c.id.as_str()));
                let needle = format!("children.{id}");
                // At the reference when the template itself makes it, else in the partial that does, else at
                // the template.
                let in_template = patch
                    .template
                    .lines()
                    .enumerate()
                    .find_map(|(line, text)| Some((line + 1, text[..text.find(&needle)?].chars().count() + 1)));
                let in_partial = || {
                    let (name, at) = template.as_ref()?.partials().find(&needle)?;
                    Some((Pos::new(at.line, at.column), format!(" (in the partial `{name}`)")))
                };
                let (at, partial) = match in_template {
                    Some((line, column)) => (embedded_pos(lines, template_pos, line, column), String::new()),
                    None => in_partial().unwrap_or((template_pos, String::new())),
                };
                out.error(
                    at,
                    DiagnosticCode::Reference,
                    format!(
                        "patch `{}` reads `children.{id}`{partial}, which is not among `children`{suggestion}",
                        patch.id
                    ),
                );
            }
            depends_on.push(id);
        }
        if let (Some(template), Some((api_version, kind)), Some(target)) = (template, static_kind, target) {
            compiled.push(ResolvedPatch {
                id: patch.id.clone(),
                api_version,
                kind,
                source: out.location(template_pos),
                namespaced: true,
                depends_on,
                target,
                template,
            });
        }
    }
    compiled
}
