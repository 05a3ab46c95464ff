//! Checks that need the whole rule set: unique names and scheduler names, kinds that resolve.

use std::collections::{BTreeMap, BTreeSet};

use super::fields::{embedded_pos, key, path, with};
use super::{LoadOptions, LoadedRule, RuleDocument, UnknownKinds};
use crate::builtin_kinds::{BUILTIN_KINDS, builtin_kinds_named};
use crate::diagnostics::{Diagnostic, DiagnosticCode, FileDiagnostics, Pos, SourceLocation, did_you_mean};
use crate::installed_kinds::InstalledKinds;
use crate::resource_definition::ResourceDefinitionRule;
use crate::rule_set::{Rule, resolve_kind_in};
use crate::yaml_tree::PathStep;

pub(crate) fn check_rule_set(
    loaded: &[LoadedRule],
    broken_kinds: &BTreeSet<String>,
    files: &[(String, String)],
    options: &LoadOptions,
    all: &mut Vec<Diagnostic>,
) {
    let installed = &options.installed;
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
    // A kind a ResourceDefinition with errors means to declare is not also unknown: that is one defect, reported
    // at the ResourceDefinition.
    let unknown_kind =
        |definitions: &[&ResourceDefinitionRule], options: &LoadOptions, api_version: &str, kind: &str| {
            if broken_kinds.contains(kind) {
                return None;
            }
            unknown_kind(definitions, options, api_version, kind)
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
                let parent = resolve_kind_in(
                    definitions.iter().copied(),
                    installed,
                    &watched.api_version,
                    &watched.kind,
                );
                if let Some(message) = unknown_kind(&definitions, options, &watched.api_version, &watched.kind) {
                    report(
                        all,
                        item,
                        &["spec", "for", "kind"],
                        DiagnosticCode::UnknownKind,
                        message,
                    );
                } else if (!reconciler.spec.status.is_empty() || !reconciler.spec.conditions.is_empty())
                    && parent.as_ref().is_none_or(|p| p.declared_by().is_none())
                {
                    // Built-in kinds' status belongs to their own controllers, an installed kind's to the tool that
                    // installed it; writing it would fight them.
                    let owner = if parent.as_ref().is_some_and(|p| p.is_builtin()) {
                        "its Kubernetes controller"
                    } else {
                        "the controller of the tool that installs it"
                    };
                    let field = if reconciler.spec.status.is_empty() {
                        "conditions"
                    } else {
                        "status"
                    };
                    let at = item.doc.pos_of(&path(&["spec", field]));
                    report_at(
                        all,
                        item,
                        at,
                        DiagnosticCode::Status,
                        format!(
                            "`{field}` can only be written into kinds declared by a ResourceDefinition; the status of \
                         {} belongs to {owner}",
                            watched.kind
                        ),
                    );
                }
                if let Some(pruned) = pruned_status_fields(&definitions, reconciler) {
                    let field: &[&str] = if reconciler.spec.status.is_empty() {
                        &["spec", "for", "kind"]
                    } else {
                        &["spec", "status"]
                    };
                    report_at(all, item, item.doc.pos_of(&path(field)), DiagnosticCode::Status, pruned);
                }
                let finalize = reconciler.spec.finalize.iter().flat_map(|f| f.children.iter());
                let lists = [
                    ("children", reconciler.spec.children.iter().collect::<Vec<_>>()),
                    ("finalize", finalize.collect()),
                ];
                for (list, children) in lists {
                    for (index, child) in children.into_iter().enumerate() {
                        let Some((api_version, kind)) = child.static_kind() else {
                            continue;
                        };
                        if let Some(message) = unknown_kind(&definitions, options, &api_version, &kind) {
                            let list_path = if list == "children" {
                                path(&["spec", "children"])
                            } else {
                                path(&["spec", "finalize", "children"])
                            };
                            let template_at = item
                                .doc
                                .value_pos_of(&with(&list_path, &[PathStep::Index(index), key("template")]));
                            // Point at the `kind:` line inside the template, where the fix goes.
                            let file_lines: Vec<&str> = files[item.file_index].1.lines().collect();
                            let at = match child.template.lines().position(|l| l.starts_with("kind:")) {
                                Some(line) => embedded_pos(&file_lines, template_at, line + 1, "kind: ".len() + 1),
                                None => template_at,
                            };
                            report_at(
                                all,
                                item,
                                at,
                                DiagnosticCode::UnknownKind,
                                format!("child `{}`: {message}", child.id),
                            );
                        }
                    }
                }
                for (name, lookup) in &reconciler.spec.lookups {
                    if let Some(message) = unknown_kind(&definitions, options, &lookup.api_version, &lookup.kind) {
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

/// `None` when the kind is known, or (`UnknownKinds::AtRunTime`) left for the apiserver to tell; otherwise a
/// message saying what is close.
fn unknown_kind(
    definitions: &[&ResourceDefinitionRule],
    options: &LoadOptions,
    api_version: &str,
    kind: &str,
) -> Option<String> {
    let installed = &options.installed;
    if resolve_kind_in(definitions.iter().copied(), installed, api_version, kind).is_some() {
        return None;
    }
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    // The rule set's own declaration, or a manifest it was given, names the kind in this group: the version is
    // wrong, whatever the cluster serves.
    if let Some(definition) = definitions
        .iter()
        .find(|d| d.names.kind == kind && d.names.group == group)
    {
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
    if let Some(crd) = installed.named(group, kind) {
        let served: Vec<String> = crd
            .served_versions
            .iter()
            .map(|(version, _)| format!("{group}/{version}"))
            .collect();
        return Some(format!(
            "kind {kind} (CRD {} at {}) is not served as `{api_version}`; use apiVersion {}",
            crd.crd_name,
            crd.source,
            served.join(" or ")
        ));
    }
    let builtin_group = BUILTIN_KINDS
        .iter()
        .any(|k| k.api_version.split_once('/').map_or("", |(g, _)| g) == group);
    let same_kind: Vec<&str> = builtin_kinds_named(kind).map(|k| k.api_version).collect();
    if !same_kind.is_empty() && builtin_group {
        return Some(format!(
            "{kind} is served as `{}`, not `{api_version}`",
            same_kind.join("` or `")
        ));
    }
    // Built-in kind names are near misses only in built-in groups: `ClusterIssuer` is no typo of `ClusterRole`.
    let known = definitions
        .iter()
        .map(|d| d.names.kind.as_str())
        .chain(installed.kinds().iter().map(|k| k.kind.as_str()))
        .chain(BUILTIN_KINDS.iter().filter(|_| builtin_group).map(|k| k.kind));
    let suggestion = did_you_mean(kind, known);
    let builtin_api = BUILTIN_KINDS.iter().any(|k| k.api_version == api_version);
    if builtin_api && !suggestion.is_empty() {
        // A built-in API version with a near-miss kind is a typo, not a missing declaration.
        return Some(format!("unknown kind `{kind}` (`{api_version}`){suggestion}"));
    }
    if options.unknown_kinds == UnknownKinds::AtRunTime {
        // Another tool may install it, now or later: the worker asks the apiserver.
        return None;
    }
    let elsewhere = if same_kind.is_empty() {
        String::new()
    } else {
        format!(" (the built-in {kind} is `{}`)", same_kind.join("` or `"))
    };
    Some(format!(
        "unknown kind `{kind}` (`{api_version}`){elsewhere}: declare it with a ResourceDefinition in the rule set, \
         use a built-in kind{}, or, if another tool installs it, pass its CRD manifest with `--crds PATH` (or \
         RULEPLANE_CRDS)",
        suggestion
            .replace(", did you mean", " (did you mean")
            .replace('?', "?)")
    ))
}

/// Fills in how the apiserver serves each kind a Reconciler reads or writes (plural, scope, where it is known
/// from), once the set is known to be valid: RBAC derivation and the worker use it without resolving again.
/// Kinds nothing here knows stay unresolved for the worker (`UnknownKinds::AtRunTime`). Every SchedulerPolicy is
/// given the set's scheduler names.
pub(crate) fn resolve_reconciler_kinds(rules: &mut [Rule], installed: &InstalledKinds) {
    // Every SchedulerPolicy learns the scheduler names of the set (its victim-scope option reads them).
    let schedulers: std::sync::Arc<std::collections::BTreeSet<String>> = std::sync::Arc::new(
        rules
            .iter()
            .filter_map(|rule| match rule {
                Rule::SchedulerPolicy(policy) => Some(policy.spec.scheduler_name.clone()),
                _ => None,
            })
            .collect(),
    );
    for rule in rules.iter_mut() {
        if let Rule::SchedulerPolicy(policy) = rule {
            policy.set_ruleplane_schedulers(schedulers.clone());
        }
    }
    let definitions: Vec<ResourceDefinitionRule> = rules
        .iter()
        .filter_map(|rule| match rule {
            Rule::ResourceDefinition(rd) => Some(rd.clone()),
            _ => None,
        })
        .collect();
    for rule in rules {
        if let Rule::Reconciler(reconciler) = rule {
            reconciler
                .resolve_kinds(|api_version, kind| resolve_kind_in(definitions.iter(), installed, api_version, kind));
        }
    }
}

/// The status fields a Reconciler writes that the parent kind's schema would prune, as a message (`None` when every
/// one is kept, or the kind is not declared in this rule set). With a structural schema the apiserver silently
/// drops undeclared fields, so the conditions would never appear (`kubectl wait` would hang) and the status would
/// look changed on every reconcile.
fn pruned_status_fields(
    definitions: &[&ResourceDefinitionRule],
    reconciler: &crate::reconciler::ReconcilerRule,
) -> Option<String> {
    let watched = &reconciler.spec.watched;
    let (group, version) = watched
        .api_version
        .split_once('/')
        .unwrap_or(("", &watched.api_version));
    let definition = definitions
        .iter()
        .find(|d| d.names.kind == watched.kind && d.names.group == group)?;
    let served = definition.spec.versions.iter().find(|v| v.name == version)?;
    let schema = &served.schema.as_ref()?.open_api_v3_schema;
    let with_subresource = served.subresources.as_ref().is_some_and(|s| s.status.is_some());
    let mut written: Vec<&str> = vec!["conditions"];
    if with_subresource {
        written.push("observedGeneration");
    }
    written.extend(reconciler.spec.status.keys().map(String::as_str));
    let preserves = |node: &serde_json::Value| {
        node.get("x-kubernetes-preserve-unknown-fields") == Some(&serde_json::Value::Bool(true))
    };
    let status = schema.pointer("/properties/status");
    let kept = |field: &str| match status {
        None => preserves(schema),
        Some(status) => {
            preserves(status)
                || status.pointer(&format!("/properties/{field}")).is_some()
                || status
                    .get("additionalProperties")
                    .is_some_and(|a| a != &serde_json::Value::Bool(false))
        }
    };
    let pruned: Vec<&str> = written.into_iter().filter(|field| !kept(field)).collect();
    (!pruned.is_empty()).then(|| {
        format!(
            "the schema of {} {} (ResourceDefinition `{}`, version {version}) does not declare status field(s) {} that \
             this Reconciler writes: the apiserver would prune them; declare them under `status.properties` or set \
             `x-kubernetes-preserve-unknown-fields: true` on `status`",
            watched.api_version,
            watched.kind,
            definition.metadata.name,
            pruned.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::load::{LoadOptions, UnknownKinds, load_str_with};

    const RECONCILER: &str = "---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: r }
spec:
  for: { apiVersion: stable.example.com/v1, kind: CronTab }
  children:
    - id: job
      template: |
        apiVersion: stable.example.com/v1
        kind: CronTab
        metadata: { name: {{json metadata.name}}-copy }
";

    fn diagnostics(definition: &str) -> Vec<String> {
        let options = LoadOptions {
            unknown_kinds: UnknownKinds::Refuse,
            ..Default::default()
        };
        let text = format!("{definition}{RECONCILER}");
        let found = load_str_with("rules.yaml", &text, &options).expect_err("invalid");
        found
            .iter()
            .map(|d| format!("{}:{} {}: {}", d.line, d.column, d.code, d.message))
            .collect()
    }

    #[test]
    fn a_resource_definition_with_a_name_error_is_one_error_not_also_an_unknown_kind_where_it_is_used() {
        let crd_style = "apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: crontabs.stable.example.com }
spec:
  names: { kind: CronTab, plural: crontab }
  versions: [{ name: v1 }]
";
        let found = diagnostics(crd_style);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("name: plural `crontab` disagrees"), "{found:#?}");
        let tpr_style = "apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: cron-tab.stable }
spec:
  versions: [{ name: v1 }]
";
        let found = diagnostics(tpr_style);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("name: the group `stable` must be"), "{found:#?}");
    }

    #[test]
    fn a_resource_definition_refused_by_the_schema_check_is_not_followed_by_unknown_kinds() {
        let misspelt = "apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: crontabs.stable.example.com }
spec:
  names: { kind: CronTab }
  versionz: [{ name: v1 }]
";
        let found = diagnostics(misspelt);
        assert!(found.iter().all(|d| !d.contains("unknown-kind")), "{found:#?}");
        assert!(found.iter().any(|d| d.contains("unknown-field")), "{found:#?}");
    }

    #[test]
    fn a_kind_no_resource_definition_means_to_declare_is_still_unknown() {
        let other = "apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: buckets.stable.example.com }
spec:
  names: { kind: Bucket, plural: bucket }
  versions: [{ name: v1 }]
";
        let found = diagnostics(other);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_eq!(
            found.iter().filter(|d| d.contains("unknown-kind")).count(),
            2,
            "{found:#?}"
        );
    }
}
