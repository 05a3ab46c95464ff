//! Checks that need the whole rule set: unique names and scheduler names, kinds that resolve.

use std::collections::BTreeMap;

use super::fields::path;
use super::{LoadedRule, RuleDocument};
use crate::builtin_kinds::{BUILTIN_KINDS, builtin_kinds_named};
use crate::diagnostics::{Diagnostic, DiagnosticCode, FileDiagnostics, Pos, SourceLocation, did_you_mean};
use crate::resource_definition::ResourceDefinitionRule;
use crate::rule_set::resolve_kind_in;

pub(crate) fn check_rule_set(loaded: &[LoadedRule], files: &[(String, String)], all: &mut Vec<Diagnostic>) {
    let report_at = |all: &mut Vec<Diagnostic>, item: &LoadedRule, at: Pos, code: DiagnosticCode, message: String| {
        let (name, text) = &files[item.file_index];
        let mut out = FileDiagnostics::new(name, text);
        out.error(at, code, message);
        all.append(&mut out.found);
    };
    // Most findings point at a field's value.
    let report =
        |all: &mut Vec<Diagnostic>, item: &LoadedRule, field: &[&str], code: DiagnosticCode, message: String| {
            report_at(all, item, item.doc.value_pos_of(&path(field)), code, message)
        };
    let mut names: BTreeMap<&str, &SourceLocation> = BTreeMap::new();
    for item in loaded {
        let rule = &item.document;
        if let Some(first) = names.insert(rule.name(), rule.source()) {
            report(
                all,
                item,
                &["metadata", "name"],
                DiagnosticCode::Duplicate,
                format!("a rule named `{}` is already defined at {first}", rule.name()),
            );
        }
    }
    let mut scheduler_names: BTreeMap<&str, &str> = BTreeMap::new();
    let mut crd_names: BTreeMap<String, &str> = BTreeMap::new();
    let definitions: Vec<&ResourceDefinitionRule> = loaded
        .iter()
        .filter_map(|item| match &item.document {
            RuleDocument::ResourceDefinition(rd) => Some(rd),
            _ => None,
        })
        .collect();
    for item in loaded {
        match &item.document {
            RuleDocument::SchedulerPolicy(policy) => {
                if let Some(first) = scheduler_names.insert(&policy.spec.scheduler_name, &policy.metadata.name) {
                    report(
                        all,
                        item,
                        &["spec", "schedulerName"],
                        DiagnosticCode::Duplicate,
                        format!(
                            "schedulerName `{}` is already used by policy `{first}`; each scheduler needs its own name",
                            policy.spec.scheduler_name
                        ),
                    );
                }
            }
            RuleDocument::ResourceDefinition(rd) => {
                if let Some(first) = crd_names.insert(rd.names.crd_name(), &rd.metadata.name) {
                    report(
                        all,
                        item,
                        &["metadata", "name"],
                        DiagnosticCode::Duplicate,
                        format!(
                            "this declares the same resource type `{}` as rule `{first}`",
                            rd.names.crd_name()
                        ),
                    );
                }
            }
            RuleDocument::Reconciler(reconciler) => {
                let watched = &reconciler.spec.watched;
                if let Some(message) = unknown_kind(&definitions, &watched.api_version, &watched.kind) {
                    report(
                        all,
                        item,
                        &["spec", "for", "kind"],
                        DiagnosticCode::UnknownKind,
                        message,
                    );
                } else if !reconciler.spec.status.is_empty()
                    && resolve_kind_in(definitions.iter().copied(), &watched.api_version, &watched.kind)
                        .is_some_and(|info| info.declared_by.is_none())
                {
                    // Built-in kinds' status belongs to their own controllers; writing it would fight them.
                    let at = item.doc.pos_of(&path(&["spec", "status"]));
                    report_at(
                        all,
                        item,
                        at,
                        DiagnosticCode::Status,
                        format!(
                            "`status` can only be projected into kinds declared by a ResourceDefinition; the status of \
                         {} belongs to its Kubernetes controller",
                            watched.kind
                        ),
                    );
                }
                for (name, lookup) in &reconciler.spec.lookups {
                    if let Some(message) = unknown_kind(&definitions, &lookup.api_version, &lookup.kind) {
                        report(
                            all,
                            item,
                            &["spec", "lookups", name, "kind"],
                            DiagnosticCode::UnknownKind,
                            message,
                        );
                    }
                }
            }
        }
    }
}

/// `None` when the kind is known; otherwise a message saying what is close.
fn unknown_kind(definitions: &[&ResourceDefinitionRule], api_version: &str, kind: &str) -> Option<String> {
    if resolve_kind_in(definitions.iter().copied(), api_version, kind).is_some() {
        return None;
    }
    if let Some(definition) = definitions.iter().find(|d| d.names.kind == kind) {
        let served: Vec<String> = definition
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| format!("{}/{}", definition.names.group, v.name))
            .collect();
        return Some(format!(
            "kind {kind} (rule `{}`) is not served as `{api_version}`; use apiVersion {}",
            definition.metadata.name,
            served.join(" or ")
        ));
    }
    let same_kind: Vec<&str> = builtin_kinds_named(kind).map(|k| k.api_version).collect();
    if !same_kind.is_empty() {
        return Some(format!(
            "{kind} is served as `{}`, not `{api_version}`",
            same_kind.join("` or `")
        ));
    }
    let known = definitions
        .iter()
        .map(|d| d.names.kind.as_str())
        .chain(BUILTIN_KINDS.iter().map(|k| k.kind));
    let suggestion = did_you_mean(kind, known);
    let builtin_api = BUILTIN_KINDS.iter().any(|k| k.api_version == api_version);
    if builtin_api && !suggestion.is_empty() {
        // A built-in API version with a near-miss kind is a typo, not a missing declaration.
        return Some(format!("unknown kind `{kind}` (`{api_version}`){suggestion}"));
    }
    Some(format!(
        "unknown kind `{kind}` (`{api_version}`): declare it with a ResourceDefinition in the rule set or use a \
         built-in kind{}",
        suggestion
            .replace(", did you mean", " (did you mean")
            .replace('?', "?)")
    ))
}
