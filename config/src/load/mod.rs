//! Loading rule files: files → documents → typed rules → rule-set checks, collecting every located error.
//!
//! `files` finds the files, `document` turns one YAML document into a rule (schema check, conversion, the
//! kind's own checks in its folder), `rule_set` runs the checks that need every rule.

mod document;
mod fields;
mod partials;
mod rule_set;
pub(crate) mod schema_check;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

pub use crate::files::rule_files;
pub use crate::template::{TEMPLATE_PARTIALS_KIND, TemplatePartialsDocument, TemplatePartialsSpec};
pub(crate) use fields::{
    check_api_version_format, check_embedded_template, check_json_path, check_selector, embedded_pos, is_identifier,
    key, path, with,
};

use crate::diagnostics::{Diagnostic, DiagnosticCode, Diagnostics, FileDiagnostics, SourceLocation};
use crate::installed_kinds::InstalledKinds;
use crate::kubernetes_version::KubernetesVersion;
use crate::reconciler::ReconcilerRule;
use crate::resource_definition::ResourceDefinitionRule;
use crate::rule_set::{Rule, RuleSet};
use crate::scheduler::SchedulerPolicyRule;
use crate::yaml_tree::{Node, parse_documents};

/// What the loader knows of the cluster beyond the rule set: kinds other tools install.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The kinds of CRD manifests given with `--crds` ([`crate::load_crd_paths`]): known, never written.
    pub installed: InstalledKinds,
    /// What a kind that is neither built in, declared by the rule set nor in `installed` means.
    pub unknown_kinds: UnknownKinds,
    /// Files and directories that are not rule files although they may sit among them: the `--crds` manifests
    /// (`examples/crds/` beside `examples/`). A CRD document read as a rule is an error (`kind-crd`).
    pub not_rules: Vec<PathBuf>,
    /// The Kubernetes version the rules are checked for (`--kubernetes-version` offline, the server's at run
    /// time): which fields and kinds the built-in schemas have, which kube-scheduler the policies behave as.
    pub kubernetes_version: KubernetesVersion,
}

impl LoadOptions {
    /// What `ruleplane run` loads with: no manifests, every kind the rule set does not know left to the apiserver;
    /// `not_rules`: CRD manifests among the rules, skipped.
    pub fn at_run_time(not_rules: Vec<PathBuf>, kubernetes_version: KubernetesVersion) -> Self {
        LoadOptions {
            installed: InstalledKinds::default(),
            unknown_kinds: UnknownKinds::AtRunTime,
            not_rules,
            kubernetes_version,
        }
    }

    /// Whether `file` is under one of the `not_rules` paths (compared as canonical paths, so `./examples/crds`
    /// and `examples/crds/` are one).
    pub fn is_rule_file(&self, file: &Path) -> bool {
        if self.not_rules.is_empty() {
            return true;
        }
        let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        !self.not_rules.iter().any(|excluded| {
            let excluded = std::fs::canonicalize(excluded).unwrap_or_else(|_| excluded.clone());
            file.starts_with(excluded)
        })
    }
}

/// How the loader treats a kind it does not know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownKinds {
    /// An error (`unknown-kind`) with a hint naming `--crds`: the offline commands must know every kind to say
    /// what the cluster gets.
    #[default]
    Refuse,
    /// Accepted and left unresolved ([`crate::ReconcilerKinds::unresolved`]): `ruleplane run` learns how the
    /// apiserver serves it when the rule's worker starts, and waits while it is not served (another tool may
    /// install it later). Mistakes the rule set itself shows (a declared kind at a version it does not serve, a
    /// misspelt built-in kind) are still errors.
    AtRunTime,
}

/// Loads rules from files and directories and directories. Directories are searched recursively for `*.yaml`/`*.yml`
/// files, taken in sorted path order; every file may hold several documents (`---`).
pub fn load_paths(paths: &[PathBuf]) -> Result<RuleSet, Diagnostics> {
    load_paths_with(paths, &LoadOptions::default())
}

/// [`load_paths`] knowing the kinds other tools install, or leaving unknown kinds to run time.
pub fn load_paths_with(paths: &[PathBuf], options: &LoadOptions) -> Result<RuleSet, Diagnostics> {
    let mut files: Vec<(String, String)> = Vec::new();
    let mut problems: Vec<Diagnostic> = Vec::new();
    let mut file_paths = Vec::new();
    for path in paths {
        match rule_files(path) {
            Ok(found) => file_paths.extend(found.into_iter().filter(|file| options.is_rule_file(file))),
            Err(error) => problems.push(io_diagnostic(path, &error)),
        }
    }
    for path in file_paths {
        match std::fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => files.push((path.display().to_string(), text)),
                Err(_) => problems.push(plain_diagnostic(
                    &path.display().to_string(),
                    DiagnosticCode::Io,
                    "file is not UTF-8 text",
                )),
            },
            Err(error) => problems.push(io_diagnostic(&path, &error)),
        }
    }
    let loaded = load_files(&files, options);
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
    load_str_with(file_name, text, &LoadOptions::default())
}

/// [`load_str`] with [`LoadOptions`].
pub fn load_str_with(file_name: &str, text: &str, options: &LoadOptions) -> Result<RuleSet, Diagnostics> {
    load_files(&[(file_name.to_string(), text.to_string())], options)
}

fn io_diagnostic(path: &Path, error: &std::io::Error) -> Diagnostic {
    plain_diagnostic(
        &path.display().to_string(),
        DiagnosticCode::Io,
        &format!("cannot read: {error}"),
    )
}

fn plain_diagnostic(file: &str, code: DiagnosticCode, message: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: 1,
        column: 1,
        message: message.to_string(),
        source_line: None,
        code,
    }
}

/// The kind a ResourceDefinition document means to declare, as written (`None` for other documents).
fn declared_kind(doc: &Node) -> Option<String> {
    if doc.get("kind")?.as_str()? != "ResourceDefinition" {
        return None;
    }
    let name = doc.get("metadata")?.get("name")?.as_str()?;
    let names_kind = doc.get("spec").and_then(|s| s.get("names")).and_then(|n| n.get("kind"));
    Some(crate::resource_definition::intended_kind(
        name,
        names_kind.and_then(Node::as_str),
    ))
}

/// A rule document as typed from YAML: what the set-level checks read, whether or not it resolved.
pub(crate) enum RuleDocument {
    ResourceDefinition(ResourceDefinitionRule),
    Reconciler(ReconcilerRule),
    SchedulerPolicy(SchedulerPolicyRule),
}

impl RuleDocument {
    fn name(&self) -> &str {
        match self {
            RuleDocument::ResourceDefinition(rule) => rule.name(),
            RuleDocument::Reconciler(rule) => rule.name(),
            RuleDocument::SchedulerPolicy(rule) => rule.name(),
        }
    }

    fn source(&self) -> &SourceLocation {
        match self {
            RuleDocument::ResourceDefinition(rule) => rule.source(),
            RuleDocument::Reconciler(rule) => rule.source(),
            RuleDocument::SchedulerPolicy(rule) => rule.source(),
        }
    }
}

/// A typed document with where it came from, kept until the set-level checks have run, and the rule it
/// resolved to (`None` when its own checks found problems: those are reported and the load fails).
pub(crate) struct LoadedRule {
    pub(crate) document: RuleDocument,
    pub(crate) resolved: Option<Rule>,
    pub(crate) doc: Node,
    pub(crate) file_index: usize,
}

fn load_files(files: &[(String, String)], options: &LoadOptions) -> Result<RuleSet, Diagnostics> {
    let mut all = Vec::new();
    let mut loaded = Vec::new();
    // The kinds of ResourceDefinitions with errors of their own: already reported, never unknown again.
    let mut broken_kinds = BTreeSet::new();
    for (file_index, (name, text)) in files.iter().enumerate() {
        let mut out = FileDiagnostics::new(name, text);
        let lines: Vec<&str> = text.lines().collect();
        match parse_documents(text) {
            Err(error) => out.error(error.pos, DiagnosticCode::Syntax, error.message),
            Ok(documents) => {
                // The file's partials first: any template of the file may include them.
                let partials = partials::load_partials(&documents, &lines, &mut out);
                for doc in documents {
                    if partials::is_partials_document(&doc) {
                        continue;
                    }
                    let loaded_document = document::load_document(&doc, &lines, &mut out, &partials);
                    if loaded_document.as_ref().is_none_or(|(_, resolved)| resolved.is_none()) {
                        broken_kinds.extend(declared_kind(&doc));
                    }
                    if let Some((document, resolved)) = loaded_document {
                        loaded.push(LoadedRule {
                            document,
                            resolved,
                            doc,
                            file_index,
                        });
                    }
                }
            }
        }
        all.append(&mut out.found);
    }
    rule_set::check_rule_set(&loaded, &broken_kinds, files, options, &mut all);
    if all.is_empty() {
        let mut rules = Vec::with_capacity(loaded.len());
        for item in loaded {
            match item.resolved {
                Some(rule) => rules.push(rule),
                // Every check that refuses to resolve a rule reports why; this is the backstop if one did not.
                None => all.push(plain_diagnostic(
                    &files[item.file_index].0,
                    DiagnosticCode::Structure,
                    &format!("rule `{}` could not be resolved", item.document.name()),
                )),
            }
        }
        if all.is_empty() {
            rule_set::resolve_reconciler_kinds(&mut rules, &options.installed);
            return Ok(RuleSet {
                rules,
                installed: options.installed.clone(),
                kubernetes_version: options.kubernetes_version,
            });
        }
    }
    {
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
