//! Loading rule files: parse → check against the schema → typed rules → semantic checks, collecting every error.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::builtin_kinds::builtin_kinds_named;
use crate::crd::check_open_api_schema;
use crate::diagnostics::{Diagnostic, Diagnostics, FileDiagnostics, Pos, SourceLocation, did_you_mean};
use crate::jsonpath::CompiledPath;
use crate::naming::{is_dns_label, is_dns_subdomain, resolve_names};
use crate::rule_set::{Rule, RuleSet, resolve_kind_in};
use crate::schema::{cached_schema, kind_schema_ref};
use crate::schema_check::SchemaChecker;
use crate::template::check_template;
use crate::types::{
    API_VERSION, ChildTemplate, LabelSelector, LabelSelectorOperator, ReconcilerRule, ResourceDefinitionRule, RuleKind,
    SchedulerPolicyRule, ScorePlugin, ScoringStrategy, resolve_filter_name,
};
use crate::yaml_tree::{Node, NodeValue, PathStep, parse_documents};

/// Loads rules from files and directories. Directories are searched recursively for `*.yaml`/`*.yml`
/// files, taken in sorted path order; every file may hold several documents (`---`).
pub fn load_paths(paths: &[PathBuf]) -> Result<RuleSet, Diagnostics> {
    let mut files: Vec<(String, String)> = Vec::new();
    let mut problems: Vec<Diagnostic> = Vec::new();
    let mut file_paths = Vec::new();
    for path in paths {
        if path.is_dir() {
            match collect_rule_files(path) {
                Ok(found) => file_paths.extend(found),
                Err(error) => problems.push(io_diagnostic(path, &error)),
            }
        } else {
            file_paths.push(path.clone());
        }
    }
    for path in file_paths {
        match std::fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => files.push((path.display().to_string(), text)),
                Err(_) => problems.push(plain_diagnostic(
                    &path.display().to_string(),
                    "io",
                    "file is not UTF-8 text",
                )),
            },
            Err(error) => problems.push(io_diagnostic(&path, &error)),
        }
    }
    let loaded = load_files(&files);
    match loaded {
        Ok(rules) if problems.is_empty() => Ok(rules),
        Ok(_) => Err(Diagnostics(problems)),
        Err(mut diagnostics) => {
            problems.append(&mut diagnostics.0);
            Err(Diagnostics(problems))
        }
    }
}

/// Loads rules from one text (e.g. standard input), named `file_name` in diagnostics.
pub fn load_str(file_name: &str, text: &str) -> Result<RuleSet, Diagnostics> {
    load_files(&[(file_name.to_string(), text.to_string())])
}

fn io_diagnostic(path: &Path, error: &std::io::Error) -> Diagnostic {
    plain_diagnostic(&path.display().to_string(), "io", &format!("cannot read: {error}"))
}

fn plain_diagnostic(file: &str, code: &'static str, message: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: 1,
        column: 1,
        message: message.to_string(),
        source_line: None,
        code,
    }
}

fn collect_rule_files(directory: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            // Hidden entries include the `..data` symlink farm of ConfigMap volumes, which would load
            // every file twice.
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// A rule with the document it came from, kept until the set-level checks have run.
struct LoadedRule {
    rule: Rule,
    doc: Node,
    file_index: usize,
}

fn load_files(files: &[(String, String)]) -> Result<RuleSet, Diagnostics> {
    let mut all = Vec::new();
    let mut loaded = Vec::new();
    for (file_index, (name, text)) in files.iter().enumerate() {
        let mut out = FileDiagnostics::new(name, text);
        let lines: Vec<&str> = text.lines().collect();
        match parse_documents(text) {
            Err(error) => out.error(error.pos, "syntax", error.message),
            Ok(documents) => {
                for doc in documents {
                    if let Some(rule) = load_document(&doc, &lines, &mut out) {
                        loaded.push(LoadedRule { rule, doc, file_index });
                    }
                }
            }
        }
        all.append(&mut out.found);
    }
    check_rule_set(&loaded, files, &mut all);
    if all.is_empty() {
        Ok(RuleSet {
            rules: loaded.into_iter().map(|l| l.rule).collect(),
        })
    } else {
        // Files in load order, positions within each file ascending; set-level findings join their file.
        let order: HashMap<&str, usize> = files
            .iter()
            .enumerate()
            .map(|(index, (name, _))| (name.as_str(), index))
            .collect();
        all.sort_by_key(|d| {
            (
                order.get(d.file.as_str()).copied().unwrap_or(usize::MAX),
                d.line,
                d.column,
            )
        });
        all.dedup();
        Err(Diagnostics(all))
    }
}

fn key(name: &str) -> PathStep {
    PathStep::Key(name.to_string())
}

fn path(steps: &[&str]) -> Vec<PathStep> {
    steps.iter().map(|s| key(s)).collect()
}

fn with(base: &[PathStep], more: &[PathStep]) -> Vec<PathStep> {
    base.iter().chain(more).cloned().collect()
}

/// Checks and converts one document; `None` when it cannot be typed. A typed rule may still have
/// semantic errors (recorded in `out`): it then takes part in the set-level checks, so those are reported in
/// the same run, but the load fails.
fn load_document(doc: &Node, lines: &[&str], out: &mut FileDiagnostics) -> Option<Rule> {
    if !matches!(doc.value, NodeValue::Map(_)) {
        out.error(
            doc.pos,
            "structure",
            format!(
                "a rule must be a mapping with apiVersion, kind, metadata and spec, found a {}",
                doc.type_name()
            ),
        );
        return None;
    }
    let kind_node = doc.get("kind");
    let kind = match kind_node.map(|node| (node, node.as_str())) {
        None => {
            out.error(
                doc.pos,
                "missing-field",
                "missing required field `kind` (ResourceDefinition, Reconciler or SchedulerPolicy)",
            );
            None
        }
        Some((node, None)) => {
            out.error(
                node.pos,
                "type",
                "`kind` must be a string: ResourceDefinition, Reconciler or SchedulerPolicy",
            );
            None
        }
        Some((node, Some(name))) => match RuleKind::from_name(name) {
            Some(kind) => Some(kind),
            None => {
                out.error(node.pos, "unknown-kind", unknown_kind_message(name));
                None
            }
        },
    };
    let Some(kind) = kind else {
        // Still report a wrong apiVersion: both mistakes usually come together (a pasted Kubernetes object).
        if let Some(api_version) = doc.get("apiVersion")
            && api_version.as_str() != Some(API_VERSION)
        {
            out.error(
                api_version.pos,
                "value",
                format!("rules have `apiVersion: {API_VERSION}`"),
            );
        }
        return None;
    };
    let schema = cached_schema();
    let mut checker = SchemaChecker::new(schema);
    let kind_schema = kind_schema_ref(kind);
    checker.check(&kind_schema, doc, &mut Vec::new(), doc.pos);
    if !checker.issues.is_empty() {
        let issue_paths: Vec<Vec<PathStep>> = checker.issues.iter().map(|issue| issue.path.clone()).collect();
        for issue in checker.issues {
            out.error(issue.pos, issue.code, issue.message);
        }
        check_degraded(kind, doc, &issue_paths, lines, out);
        return None;
    }
    let source = out.location(doc.pos);
    let rule = match kind {
        RuleKind::ResourceDefinition => {
            let mut rule: ResourceDefinitionRule = convert(doc, out)?;
            rule.source = source;
            check_resource_definition(&mut rule, doc, out);
            Rule::ResourceDefinition(rule)
        }
        RuleKind::Reconciler => {
            let mut rule: ReconcilerRule = convert(doc, out)?;
            rule.source = source;
            check_reconciler(&mut rule, doc, lines, out);
            Rule::Reconciler(rule)
        }
        RuleKind::SchedulerPolicy => {
            let mut rule: SchedulerPolicyRule = convert(doc, out)?;
            rule.source = source;
            check_scheduler_policy(&rule, doc, out);
            Rule::SchedulerPolicy(rule)
        }
    };
    check_rule_name(rule.name(), doc, out);
    Some(rule)
}

/// Runs the rule's own semantic checks on a document with structural errors, so that one run reports those
/// too (a template error is not hidden behind a misspelled field elsewhere).
///
/// The offending fields are removed and the rest is read with defaults; if that still does not make a rule,
/// nothing more is checked. Checks whose verdict could change through a removed field (naming and storage
/// versions of a ResourceDefinition) are skipped, and the rule takes no part in the rule-set checks.
fn check_degraded(
    kind: RuleKind,
    doc: &Node,
    issue_paths: &[Vec<PathStep>],
    lines: &[&str],
    out: &mut FileDiagnostics,
) {
    // Removing a list item would shift the indexes that positions are looked up by: give up instead.
    if issue_paths
        .iter()
        .any(|path| !matches!(path.last(), Some(PathStep::Key(_))))
    {
        return;
    }
    let mut pruned = doc.to_json();
    for path in issue_paths {
        remove_path(&mut pruned, path);
    }
    match kind {
        RuleKind::ResourceDefinition => {
            if let Ok(mut rule) = serde_json::from_value::<ResourceDefinitionRule>(pruned) {
                check_resource_definition_fields(&mut rule, doc, out);
            }
        }
        RuleKind::Reconciler => {
            if let Ok(mut rule) = serde_json::from_value::<ReconcilerRule>(pruned) {
                check_reconciler(&mut rule, doc, lines, out);
            }
        }
        RuleKind::SchedulerPolicy => {
            if let Ok(rule) = serde_json::from_value::<SchedulerPolicyRule>(pruned) {
                check_scheduler_policy(&rule, doc, out);
            }
        }
    }
}

fn remove_path(value: &mut Value, path: &[PathStep]) {
    let Some((PathStep::Key(last), parents)) = path.split_last() else {
        return;
    };
    let mut current = value;
    for step in parents {
        let next = match step {
            PathStep::Key(key) => current.get_mut(key.as_str()),
            PathStep::Index(index) => current.get_mut(*index),
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Value::Object(fields) = current {
        fields.remove(last);
    }
}

fn unknown_kind_message(name: &str) -> String {
    let hint = match name {
        "ThirdPartyResource" | "CustomResourceDefinition" => {
            " (declare resource types with `kind: ResourceDefinition`)".to_string()
        }
        "Policy" | "KubeSchedulerConfiguration" => " (declare schedulers with `kind: SchedulerPolicy`)".to_string(),
        "Controller" | "Operator" => " (declare controllers with `kind: Reconciler`)".to_string(),
        _ => {
            let suggestion = did_you_mean(name, RuleKind::ALL.iter().map(|k| k.as_str()));
            if !suggestion.is_empty() {
                return format!("unknown rule kind `{name}`{suggestion}");
            }
            String::new()
        }
    };
    format!("unknown rule kind `{name}`{hint}; rule kinds are ResourceDefinition, Reconciler and SchedulerPolicy")
}

/// The schema check guarantees the shape, so this only fails on a mismatch between schema and types.
fn convert<T: DeserializeOwned>(doc: &Node, out: &mut FileDiagnostics) -> Option<T> {
    match serde_json::from_value(doc.to_json()) {
        Ok(value) => Some(value),
        Err(error) => {
            out.error(doc.pos, "structure", format!("invalid rule: {error}"));
            None
        }
    }
}

/// Rule names end up as label values (`ruleplane.dev/rule`), so they must be valid ones.
fn check_rule_name(name: &str, doc: &Node, out: &mut FileDiagnostics) {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'));
    if !valid {
        out.error(
            doc.value_pos_of(&path(&["metadata", "name"])),
            "name",
            format!(
                "rule name `{name}` must be at most 63 lower-case letters, digits, `-` and `.`, starting and \
                 ending with a letter or digit (it is used as a label value)"
            ),
        );
    }
}

fn check_resource_definition(rule: &mut ResourceDefinitionRule, doc: &Node, out: &mut FileDiagnostics) {
    check_resource_definition_names(rule, doc, out);
    check_resource_definition_fields(rule, doc, out);
    check_storage_version(rule, doc, out);
}

fn check_resource_definition_names(rule: &mut ResourceDefinitionRule, doc: &Node, out: &mut FileDiagnostics) {
    match resolve_names(&rule.metadata.name, &rule.spec) {
        Ok(names) => rule.names = names,
        Err(problems) => {
            for problem in problems {
                out.error(doc.value_pos_of(&problem.field), "name", problem.message);
            }
        }
    }
}

/// Checks of each version that do not depend on the other versions or on the names.
fn check_resource_definition_fields(rule: &mut ResourceDefinitionRule, doc: &Node, out: &mut FileDiagnostics) {
    let versions = &rule.spec.versions;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, version) in versions.iter().enumerate() {
        let at = |field: &str| {
            doc.value_pos_of(&with(
                &path(&["spec", "versions"]),
                &[PathStep::Index(index), key(field)],
            ))
        };
        if let Some(first) = seen.insert(&version.name, index) {
            out.error(
                at("name"),
                "duplicate",
                format!("version `{}` is also declared at spec.versions[{first}]", version.name),
            );
        }
        if !is_version_name(&version.name) {
            out.error(
                at("name"),
                "value",
                format!(
                    "version `{}` must look like `v1`, `v2beta1` or `v1alpha2`",
                    version.name
                ),
            );
        }
        for (column_index, column) in version.printer_columns.iter().enumerate() {
            let column_path = with(
                &path(&["spec", "versions"]),
                &[
                    PathStep::Index(index),
                    key("printerColumns"),
                    PathStep::Index(column_index),
                    key("jsonPath"),
                ],
            );
            let text = column.json_path.trim();
            let simple = text.trim_start_matches('{').trim_end_matches('}');
            if !simple.starts_with('.') {
                out.error(
                    doc.value_pos_of(&column_path),
                    "jsonpath",
                    format!("printer column path `{text}` must start with `.`, e.g. `.spec.cronSpec`"),
                );
            } else if let Err(error) = CompiledPath::compile(text) {
                out.error(doc.value_pos_of(&column_path), "jsonpath", error.to_string());
            }
        }
        if version.deprecation_warning.is_some() && !version.deprecated {
            out.error(
                at("deprecationWarning"),
                "value",
                "`deprecationWarning` needs `deprecated: true`",
            );
        }
        if let Some(schema) = &version.schema {
            let schema_path = with(
                &path(&["spec", "versions"]),
                &[PathStep::Index(index), key("schema"), key("openAPIV3Schema")],
            );
            let schema_type = schema.open_api_v3_schema.get("type").and_then(Value::as_str);
            if schema_type != Some("object") {
                out.error(
                    doc.pos_of(&schema_path),
                    "schema",
                    "openAPIV3Schema must have `type: object` at its root (Kubernetes requires a structural schema)",
                );
            }
            for (inner_path, message) in check_open_api_schema(&schema.open_api_v3_schema) {
                out.error(doc.pos_of(&with(&schema_path, &inner_path)), "schema", message);
            }
        }
        if let Some(scale) = version.subresources.as_ref().and_then(|s| s.scale.as_ref()) {
            for (field, value, prefix) in [
                ("specReplicasPath", &scale.spec_replicas_path, ".spec."),
                ("statusReplicasPath", &scale.status_replicas_path, ".status."),
            ] {
                if !value.starts_with(prefix) {
                    out.error(
                        doc.value_pos_of(&with(
                            &path(&["spec", "versions"]),
                            &[PathStep::Index(index), key("subresources"), key("scale"), key(field)],
                        )),
                        "value",
                        format!("`{field}` must start with `{prefix}`"),
                    );
                }
            }
        }
    }
}

fn check_storage_version(rule: &ResourceDefinitionRule, doc: &Node, out: &mut FileDiagnostics) {
    let versions = &rule.spec.versions;
    let storage: Vec<&str> = versions
        .iter()
        .filter(|v| v.storage.unwrap_or(versions.len() == 1))
        .map(|v| v.name.as_str())
        .collect();
    if storage.len() != 1 {
        let message = if storage.is_empty() {
            "exactly one version must have `storage: true`; none has".to_string()
        } else {
            format!(
                "exactly one version must have `storage: true`; {} have",
                storage.join(", ")
            )
        };
        out.error(doc.pos_of(&path(&["spec", "versions"])), "storage-version", message);
    }
    if let Some(storage_version) = versions.iter().find(|v| v.storage.unwrap_or(versions.len() == 1))
        && !storage_version.served
    {
        out.error(
            doc.pos_of(&path(&["spec", "versions"])),
            "storage-version",
            format!("the storage version `{}` must be served", storage_version.name),
        );
    }
}

/// `v1`, `v2beta1`, `v1alpha2`: what Kubernetes accepts as version names that sort correctly.
fn is_version_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('v') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return false;
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return true;
    }
    ["alpha", "beta"].iter().any(|stage| {
        tail.strip_prefix(stage)
            .is_some_and(|n| !n.is_empty() && !n.starts_with('0') && n.chars().all(|c| c.is_ascii_digit()))
    })
}

/// Maps a (line, column) inside an embedded text (template, JSONPath) to the file.
fn embedded_pos(lines: &[&str], value_pos: Pos, line: usize, column: usize) -> Pos {
    let first_line = lines.get(value_pos.line.saturating_sub(1)).copied().unwrap_or("");
    let opening = first_line.chars().nth(value_pos.column.saturating_sub(1));
    let quote_offset = usize::from(matches!(opening, Some('"' | '\'')));
    if line <= 1 {
        Pos::new(
            value_pos.line,
            value_pos.column + quote_offset + column.saturating_sub(1),
        )
    } else {
        // Block scalars indent every line like the first; the template's columns start after that indent.
        Pos::new(value_pos.line + line - 1, value_pos.column.saturating_sub(1) + column)
    }
}

fn check_reconciler(rule: &mut ReconcilerRule, doc: &Node, lines: &[&str], out: &mut FileDiagnostics) {
    let spec_path = path(&["spec"]);
    check_api_version_format(
        &rule.spec.watched.api_version,
        doc,
        &path(&["spec", "for", "apiVersion"]),
        out,
    );
    if let Some(selector) = &rule.spec.watched.selector {
        check_selector(selector, doc, &path(&["spec", "for", "selector"]), out);
    }
    if let Some(namespace) = &rule.spec.watched.namespace
        && !is_dns_label(namespace)
    {
        out.error(
            doc.value_pos_of(&path(&["spec", "for", "namespace"])),
            "value",
            format!("namespace `{namespace}` must be a lower-case DNS label"),
        );
    }
    for (name, lookup) in &rule.spec.lookups {
        let lookup_path = with(&spec_path, &[key("lookups"), key(name)]);
        if !is_identifier(name) {
            out.error(
                doc.pos_of(&lookup_path),
                "name",
                format!(
                    "lookup name `{name}` must be letters, digits and `_` (templates refer to it as `lookups.{name}`)"
                ),
            );
        }
        check_api_version_format(&lookup.api_version, doc, &with(&lookup_path, &[key("apiVersion")]), out);
        for (field, text) in [("name", Some(&lookup.name)), ("namespace", lookup.namespace.as_ref())] {
            if let Some(text) = text {
                let field_path = with(&lookup_path, &[key(field)]);
                check_embedded_template(text, doc, &field_path, lines, out);
            }
        }
        if let Some(json_path) = &lookup.json_path {
            check_json_path(json_path, doc, &with(&lookup_path, &[key("jsonPath")]), out);
        }
    }
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut child_lists: Vec<(Vec<PathStep>, &mut Vec<ChildTemplate>)> =
        vec![(with(&spec_path, &[key("children")]), &mut rule.spec.children)];
    if let Some(finalize) = rule.spec.finalize.as_mut() {
        child_lists.push((
            with(&spec_path, &[key("finalize"), key("children")]),
            &mut finalize.children,
        ));
    }
    for (list_path, children) in child_lists {
        for (index, child) in children.iter_mut().enumerate() {
            let child_path = with(&list_path, &[PathStep::Index(index)]);
            let id_path = with(&child_path, &[key("id")]);
            let here = crate::yaml_tree::path_to_string(&child_path);
            if let Some(first) = ids.insert(child.id.clone(), here) {
                out.error(
                    doc.value_pos_of(&id_path),
                    "duplicate",
                    format!("child id `{}` is already used by {first}", child.id),
                );
            }
            let template_path = with(&child_path, &[key("template")]);
            let template_pos = doc.value_pos_of(&template_path);
            child.template_source = out.location(template_pos);
            let problems_before = out.found.len();
            check_embedded_template(&child.template, doc, &template_path, lines, out);
            if out.found.len() == problems_before && child.static_kind().is_none() {
                out.error(
                    template_pos,
                    "template",
                    format!(
                        "child `{}`: the template must spell out `apiVersion:` and `kind:` literally on top-level \
                         lines (they tell Ruleplane which kinds to watch and to grant access to)",
                        child.id
                    ),
                );
            }
            if let Some(ready_when) = &child.ready_when {
                check_json_path(ready_when, doc, &with(&child_path, &[key("readyWhen")]), out);
            }
        }
    }
    for (field, expression) in &rule.spec.status {
        let field_path = with(&spec_path, &[key("status"), key(field)]);
        check_json_path(expression, doc, &field_path, out);
        check_status_reference(
            expression,
            &rule.spec.children,
            rule.spec.lookups.keys(),
            doc,
            &field_path,
            out,
        );
    }
}

/// A status path naming a child id or lookup that does not exist would silently stay empty: report it.
fn check_status_reference<'a>(
    expression: &str,
    children: &[ChildTemplate],
    lookups: impl Iterator<Item = &'a String>,
    doc: &Node,
    field_path: &[PathStep],
    out: &mut FileDiagnostics,
) {
    let inner = expression
        .trim()
        .trim_start_matches('{')
        .trim_start_matches('$')
        .trim_start_matches('.');
    let mut segments = inner.split(['.', '[', '}']);
    let lookups: Vec<&String> = lookups.collect();
    match (segments.next(), segments.next()) {
        (Some("children"), Some(id)) if !id.is_empty() && id != "*" && !children.iter().any(|c| c.id == id) => {
            let suggestion = did_you_mean(id, children.iter().map(|c| c.id.as_str()));
            out.error(
                doc.value_pos_of(field_path),
                "reference",
                format!("status refers to child `{id}`, which is not among `children`{suggestion}"),
            );
        }
        (Some("lookups"), Some(name))
            if !name.is_empty() && name != "*" && !lookups.iter().any(|l| l.as_str() == name) =>
        {
            let suggestion = did_you_mean(name, lookups.iter().map(|l| l.as_str()));
            out.error(
                doc.value_pos_of(field_path),
                "reference",
                format!("status refers to lookup `{name}`, which is not among `lookups`{suggestion}"),
            );
        }
        _ => {}
    }
}

fn is_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_embedded_template(text: &str, doc: &Node, field_path: &[PathStep], lines: &[&str], out: &mut FileDiagnostics) {
    let value_pos = doc.value_pos_of(field_path);
    let template_lines: Vec<&str> = text.lines().collect();
    for problem in check_template(text) {
        // Errors found at the end of input (an unclosed block) are reported on the template's last line
        // rather than on whatever follows the template in the file.
        let (line, column) = if problem.line > template_lines.len().max(1) {
            let last = template_lines.last().copied().unwrap_or("");
            (template_lines.len().max(1), last.chars().count() + 1)
        } else {
            (problem.line, problem.column)
        };
        out.error(
            embedded_pos(lines, value_pos, line, column),
            "template",
            problem.message,
        );
    }
}

fn check_json_path(expression: &str, doc: &Node, field_path: &[PathStep], out: &mut FileDiagnostics) {
    if let Err(error) = CompiledPath::compile(expression) {
        out.error(doc.value_pos_of(field_path), "jsonpath", error.to_string());
    }
}

fn check_api_version_format(api_version: &str, doc: &Node, field_path: &[PathStep], out: &mut FileDiagnostics) {
    let valid = match api_version.split_once('/') {
        Some((group, version)) => {
            is_dns_subdomain(group) && group.contains('.') && is_version_name(version)
                || matches!(group, "apps" | "batch" | "policy" | "autoscaling") && is_version_name(version)
        }
        None => is_version_name(api_version),
    };
    if !valid {
        out.error(
            doc.value_pos_of(field_path),
            "value",
            format!("`{api_version}` is not an apiVersion: expected `group/version` (e.g. `apps/v1`) or `v1`"),
        );
    }
}

fn check_selector(selector: &LabelSelector, doc: &Node, selector_path: &[PathStep], out: &mut FileDiagnostics) {
    for (index, requirement) in selector.match_expressions.iter().enumerate() {
        let requirement_path = with(selector_path, &[key("matchExpressions"), PathStep::Index(index)]);
        let needs_values = matches!(
            requirement.operator,
            LabelSelectorOperator::In | LabelSelectorOperator::NotIn
        );
        if needs_values && requirement.values.is_empty() {
            out.error(
                doc.pos_of(&with(&requirement_path, &[key("operator")])),
                "value",
                format!(
                    "operator {:?} needs at least one value in `values`",
                    requirement.operator
                ),
            );
        }
        if !needs_values && !requirement.values.is_empty() {
            out.error(
                doc.pos_of(&with(&requirement_path, &[key("values")])),
                "value",
                format!("operator {:?} takes no `values`", requirement.operator),
            );
        }
    }
}

fn check_scheduler_policy(rule: &SchedulerPolicyRule, doc: &Node, out: &mut FileDiagnostics) {
    let spec = &rule.spec;
    let name_path = path(&["spec", "schedulerName"]);
    if spec.scheduler_name == "default-scheduler" {
        out.error(
            doc.value_pos_of(&name_path),
            "value",
            "`default-scheduler` is kube-scheduler's name; two schedulers placing the same pods would race",
        );
    } else if !is_dns_subdomain(&spec.scheduler_name) {
        out.error(
            doc.value_pos_of(&name_path),
            "value",
            format!(
                "schedulerName `{}` must be a lower-case DNS name such as `my-scheduler`",
                spec.scheduler_name
            ),
        );
    }
    let mut seen_filters: HashMap<String, usize> = HashMap::new();
    for (index, name) in spec.filters.iter().flatten().enumerate() {
        let at = doc.value_pos_of(&with(&path(&["spec", "filters"]), &[PathStep::Index(index)]));
        match resolve_filter_name(name) {
            Ok(plugins) => {
                for plugin in plugins {
                    if let Some(first) = seen_filters.insert(plugin.to_string(), index) {
                        out.error(
                            at,
                            "duplicate",
                            format!("filter {plugin} is already enabled by spec.filters[{first}]"),
                        );
                    }
                }
            }
            Err(message) => out.error(at, "unknown-plugin", message),
        }
    }
    let mut seen_scores: HashMap<String, usize> = HashMap::new();
    for (index, score) in spec.scores.iter().flatten().enumerate() {
        let score_path = with(&path(&["spec", "scores"]), &[PathStep::Index(index)]);
        let at = |field: &str| doc.value_pos_of(&with(&score_path, &[key(field)]));
        let resolved = match score.resolve() {
            Ok(resolved) => resolved,
            Err(message) => {
                let field = if message.contains("strategy") {
                    "strategy"
                } else {
                    "name"
                };
                out.error(at(field), "unknown-plugin", message);
                continue;
            }
        };
        let plugin = resolved.plugin;
        if let Some(first) = seen_scores.insert(plugin.to_string(), index) {
            out.error(
                at("name"),
                "duplicate",
                format!("score {plugin} is already listed at spec.scores[{first}]"),
            );
        }
        let is_fit = plugin == ScorePlugin::NodeResourcesFit;
        let is_ratio = resolved.strategy == Some(ScoringStrategy::RequestedToCapacityRatio);
        let is_label = plugin == ScorePlugin::NodeLabel;
        if !score.resources.is_empty()
            && !matches!(
                plugin,
                ScorePlugin::NodeResourcesFit | ScorePlugin::NodeResourcesBalancedAllocation
            )
        {
            out.error(
                at("resources"),
                "value",
                format!(
                    "`resources` only applies to NodeResourcesFit and NodeResourcesBalancedAllocation, not {plugin}"
                ),
            );
        }
        let mut resource_names: HashMap<&str, ()> = HashMap::new();
        for resource in &score.resources {
            if resource_names.insert(&resource.name, ()).is_some() {
                out.error(
                    at("resources"),
                    "duplicate",
                    format!("resource `{}` is listed twice", resource.name),
                );
            }
        }
        if is_fit && is_ratio {
            if score.shape.is_empty() {
                out.error(
                    at("name"),
                    "missing-field",
                    "RequestedToCapacityRatio needs a `shape` (points of utilization → score)",
                );
            }
            if score
                .shape
                .windows(2)
                .any(|pair| pair[0].utilization >= pair[1].utilization)
            {
                out.error(
                    at("shape"),
                    "value",
                    "shape points must have strictly increasing `utilization`",
                );
            }
        } else if !score.shape.is_empty() {
            out.error(
                at("shape"),
                "value",
                "`shape` only applies to NodeResourcesFit with strategy RequestedToCapacityRatio",
            );
        }
        if is_label {
            match &score.json_path {
                None => out.error(
                    at("name"),
                    "missing-field",
                    "NodeLabel needs a `jsonPath` selecting the node value to score, e.g. `{.metadata.labels.tier}`",
                ),
                Some(expression) => check_json_path(expression, doc, &with(&score_path, &[key("jsonPath")]), out),
            }
            if score.values.is_empty() {
                out.error(
                    at("name"),
                    "missing-field",
                    "NodeLabel needs `values`: the score (0–100) of each value",
                );
            }
            for (value, points) in &score.values {
                if *points > 100 {
                    out.error(
                        doc.value_pos_of(&with(&score_path, &[key("values"), key(value)])),
                        "range",
                        format!("score {points} for `{value}` is greater than the maximum 100"),
                    );
                }
            }
        } else {
            if score.json_path.is_some() {
                out.error(
                    at("jsonPath"),
                    "value",
                    format!("`jsonPath` only applies to NodeLabel, not {plugin}"),
                );
            }
            if !score.values.is_empty() {
                out.error(
                    at("values"),
                    "value",
                    format!("`values` only applies to NodeLabel, not {plugin}"),
                );
            }
        }
    }
}

/// Checks that need the whole rule set: unique names, unique scheduler names, known kinds.
fn check_rule_set(loaded: &[LoadedRule], files: &[(String, String)], all: &mut Vec<Diagnostic>) {
    let report = |all: &mut Vec<Diagnostic>, item: &LoadedRule, at: Pos, code: &'static str, message: String| {
        let (name, text) = &files[item.file_index];
        let mut out = FileDiagnostics::new(name, text);
        out.error(at, code, message);
        all.append(&mut out.found);
    };
    let mut names: BTreeMap<&str, &SourceLocation> = BTreeMap::new();
    for item in loaded {
        let rule = &item.rule;
        if let Some(first) = names.insert(rule.name(), rule.source()) {
            let at = item.doc.value_pos_of(&path(&["metadata", "name"]));
            report(
                all,
                item,
                at,
                "duplicate",
                format!("a rule named `{}` is already defined at {first}", rule.name()),
            );
        }
    }
    let mut scheduler_names: BTreeMap<&str, &str> = BTreeMap::new();
    let mut crd_names: BTreeMap<String, &str> = BTreeMap::new();
    let definitions: Vec<&ResourceDefinitionRule> = loaded
        .iter()
        .filter_map(|item| match &item.rule {
            Rule::ResourceDefinition(rd) => Some(rd),
            _ => None,
        })
        .collect();
    for item in loaded {
        match &item.rule {
            Rule::SchedulerPolicy(policy) => {
                if let Some(first) = scheduler_names.insert(&policy.spec.scheduler_name, &policy.metadata.name) {
                    let at = item.doc.value_pos_of(&path(&["spec", "schedulerName"]));
                    report(
                        all,
                        item,
                        at,
                        "duplicate",
                        format!(
                            "schedulerName `{}` is already used by policy `{first}`; each scheduler needs its own name",
                            policy.spec.scheduler_name
                        ),
                    );
                }
            }
            Rule::ResourceDefinition(rd) => {
                if let Some(first) = crd_names.insert(rd.names.crd_name(), &rd.metadata.name) {
                    let at = item.doc.value_pos_of(&path(&["metadata", "name"]));
                    report(
                        all,
                        item,
                        at,
                        "duplicate",
                        format!(
                            "this declares the same resource type `{}` as rule `{first}`",
                            rd.names.crd_name()
                        ),
                    );
                }
            }
            Rule::Reconciler(reconciler) => {
                let watched = &reconciler.spec.watched;
                if let Some(message) = unknown_kind(&definitions, &watched.api_version, &watched.kind) {
                    let at = item.doc.value_pos_of(&path(&["spec", "for", "kind"]));
                    report(all, item, at, "unknown-kind", message);
                } else if !reconciler.spec.status.is_empty()
                    && resolve_kind_in(definitions.iter().copied(), &watched.api_version, &watched.kind)
                        .is_some_and(|info| info.declared_by.is_none())
                {
                    // Built-in kinds' status belongs to their own controllers; writing it would fight them.
                    let at = item.doc.pos_of(&path(&["spec", "status"]));
                    report(
                        all,
                        item,
                        at,
                        "status",
                        format!(
                            "`status` can only be projected into kinds declared by a ResourceDefinition; the status of \
                         {} belongs to its Kubernetes controller",
                            watched.kind
                        ),
                    );
                }
                for (name, lookup) in &reconciler.spec.lookups {
                    if let Some(message) = unknown_kind(&definitions, &lookup.api_version, &lookup.kind) {
                        let at = item.doc.value_pos_of(&path(&["spec", "lookups", name, "kind"]));
                        report(all, item, at, "unknown-kind", message);
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
        .chain(crate::builtin_kinds::BUILTIN_KINDS.iter().map(|k| k.kind));
    let suggestion = did_you_mean(kind, known);
    let builtin_api = crate::builtin_kinds::BUILTIN_KINDS
        .iter()
        .any(|k| k.api_version == api_version);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names() {
        for good in ["v1", "v2beta1", "v10alpha3"] {
            assert!(is_version_name(good), "{good}");
        }
        for bad in ["1", "v0", "v1beta", "v1gamma1", "v01", "V1", "v1beta01"] {
            assert!(!is_version_name(bad), "{bad}");
        }
    }
}
