//! Resolves a ResourceDefinition's kind, plural, group… from its rule name (TPR- or CRD-style) and `spec.names`.

use super::types::{CrdNames, ResourceDefinitionSpec};
use crate::naming::{is_dns_label, is_dns_subdomain};
use crate::yaml_tree::PathStep;

/// A naming problem and the field it concerns.
pub(crate) struct NamingProblem {
    pub(crate) field: Vec<PathStep>,
    pub(crate) message: String,
}

fn field(steps: &[&str]) -> Vec<PathStep> {
    steps.iter().map(|s| PathStep::Key((*s).to_string())).collect()
}

/// `cron-tab` → `CronTab`, as Kubernetes did for ThirdPartyResources.
fn camel_case(hyphenated: &str) -> String {
    hyphenated
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// Kubernetes' guess of a resource name from a kind (`meta.UnsafeGuessKindToResource`).
fn guess_plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// The kind a ResourceDefinition means to declare, read from its rule name and `spec.names.kind` as written, even
/// when its names do not resolve: a rule using that kind is then not also told the kind is unknown.
pub(crate) fn intended_kind(rule_name: &str, names_kind: Option<&str>) -> String {
    match names_kind {
        Some(kind) => kind.to_owned(),
        None => camel_case(rule_name.split('.').next().unwrap_or(rule_name)),
    }
}

/// Resolves every name of the type; collects all problems.
pub(crate) fn resolve_names(rule_name: &str, spec: &ResourceDefinitionSpec) -> Result<CrdNames, Vec<NamingProblem>> {
    let mut problems = Vec::new();
    let mut problem = |steps: &[&str], message: String| {
        problems.push(NamingProblem {
            field: field(steps),
            message,
        })
    };
    let names = spec.names.clone().unwrap_or_default();
    let Some((first_label, group)) = rule_name.split_once('.') else {
        problem(
            &["metadata", "name"],
            format!(
                "a ResourceDefinition name must include the API group: `<kind-name>.<group>` (e.g. \
                 `cron-tab.stable.example.com`) or `<plural>.<group>` (e.g. `crontabs.stable.example.com`), \
                 found `{rule_name}`"
            ),
        );
        return Err(problems);
    };
    if !group.contains('.') || !is_dns_subdomain(group) {
        problem(
            &["metadata", "name"],
            format!("the group `{group}` must be a lower-case domain with at least one dot, e.g. `stable.example.com`"),
        );
    }
    if let Some(given) = &spec.group
        && given != group
    {
        problem(
            &["spec", "group"],
            format!("group `{given}` disagrees with the rule name, whose group is `{group}`"),
        );
    }
    let (kind, default_plural) = match &names.kind {
        // CRD style: the first label is the plural and the kind is explicit.
        Some(kind) => {
            if !is_dns_label(first_label) {
                problem(
                    &["metadata", "name"],
                    format!("the plural `{first_label}` must be a lower-case DNS label"),
                );
            }
            if let Some(plural) = &names.plural
                && plural != first_label
            {
                problem(
                    &["spec", "names", "plural"],
                    format!(
                        "plural `{plural}` disagrees with the rule name `{rule_name}` (CRD-style names are `<plural>.<group>`)"
                    ),
                );
            }
            (kind.clone(), first_label.to_string())
        }
        // TPR style: the first label is the hyphenated kind.
        None => {
            if !is_dns_label(first_label) || first_label.starts_with(|c: char| c.is_ascii_digit()) {
                problem(
                    &["metadata", "name"],
                    format!(
                        "`{first_label}` must be a lower-case hyphenated name such as `cron-tab` (it becomes the kind)"
                    ),
                );
            }
            let kind = camel_case(first_label);
            let plural = names.plural.clone().unwrap_or_else(|| guess_plural(&kind));
            (kind, plural)
        }
    };
    if !kind.starts_with(|c: char| c.is_ascii_uppercase()) || !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        problem(
            &["spec", "names", "kind"],
            format!("kind `{kind}` must be CamelCase letters and digits starting with an upper-case letter"),
        );
    }
    let plural = names.plural.clone().unwrap_or(default_plural);
    let singular = names.singular.clone().unwrap_or_else(|| kind.to_lowercase());
    for (label, value) in [("plural", &plural), ("singular", &singular)] {
        if !is_dns_label(value) {
            problem(
                &["spec", "names", label],
                format!("{label} `{value}` must be a lower-case DNS label"),
            );
        }
    }
    for short_name in &names.short_names {
        if !is_dns_label(short_name) {
            problem(
                &["spec", "names", "shortNames"],
                format!("short name `{short_name}` must be a lower-case DNS label"),
            );
        }
    }
    let list_kind = names.list_kind.clone().unwrap_or_else(|| format!("{kind}List"));
    if list_kind == kind {
        problem(
            &["spec", "names", "listKind"],
            format!("listKind must differ from the kind `{kind}`"),
        );
    }
    if problems.is_empty() {
        Ok(CrdNames {
            group: group.to_string(),
            kind,
            plural,
            singular,
            list_kind,
            short_names: names.short_names,
            categories: names.categories,
        })
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpr_style_names_are_derived() {
        assert_eq!(camel_case("cron-tab"), "CronTab");
        assert_eq!(guess_plural("CronTab"), "crontabs");
        assert_eq!(guess_plural("Policy"), "policies");
        assert_eq!(guess_plural("Bus"), "buses");
    }
}
