//! Kinds other tools install, known offline from their CRD manifests (`--crds`): knowledge only, never written.

use std::path::PathBuf;

use serde::Serialize;

use crate::diagnostics::{Diagnostic, DiagnosticCode, Diagnostics, FileDiagnostics, Pos, SourceLocation};
use crate::kind_info::{KindInfo, KindOrigin};
use crate::yaml_tree::{Node, NodeValue, each_document};

/// One kind a CRD manifest defines, as the apiserver will serve it once the CRD is installed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstalledKind {
    /// `<plural>.<group>`.
    pub crd_name: String,
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Resource (plural) name.
    pub plural: String,
    /// Whether objects are namespaced (`scope: Namespaced`).
    pub namespaced: bool,
    /// The served versions, each with whether it has a status subresource.
    pub served_versions: Vec<(String, bool)>,
    /// The served versions' `openAPIV3Schema`s: what `validate`, `render` and `test` check children of this kind
    /// against ([`crate::object_schema`]).
    #[serde(skip)]
    pub schemas: Vec<(String, serde_json::Value)>,
    /// Where the CRD document starts.
    pub source: SourceLocation,
}

impl InstalledKind {
    fn kind_info(&self, api_version: &str) -> Option<KindInfo> {
        let (group, version) = api_version.split_once('/')?;
        if group != self.group {
            return None;
        }
        let (_, status_subresource) = self.served_versions.iter().find(|(name, _)| name == version)?;
        Some(KindInfo {
            api_version: api_version.to_owned(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
            namespaced: self.namespaced,
            origin: KindOrigin::Installed {
                source: self.source.to_string(),
            },
            status_subresource: *status_subresource,
        })
    }
}

/// The kinds of the CRD manifests given with `--crds`, in path order (the first definition of a CRD wins).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct InstalledKinds {
    kinds: Vec<InstalledKind>,
}

impl InstalledKinds {
    /// Every kind, in the order the manifests were read.
    pub fn kinds(&self) -> &[InstalledKind] {
        &self.kinds
    }

    /// How the apiserver will serve `apiVersion`/`kind` (`None` when no manifest defines it at that version).
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<KindInfo> {
        self.kinds
            .iter()
            .filter(|installed| installed.kind == kind)
            .find_map(|installed| installed.kind_info(api_version))
    }

    /// The kind of this name in this API group, whatever the version (to explain a version mistake).
    pub(crate) fn named(&self, group: &str, kind: &str) -> Option<&InstalledKind> {
        self.kinds.iter().find(|k| k.group == group && k.kind == kind)
    }
}

/// Reads the CRD manifests in `paths` (files, or directories searched recursively for `*.yaml`/`*.yml`):
/// multi-document YAML as vendored from a chart; documents that are not CustomResourceDefinitions are skipped.
/// Every problem is reported at its `file:line:column`.
pub fn load_crd_paths(paths: &[PathBuf]) -> Result<InstalledKinds, Diagnostics> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        let found = if path.is_dir() {
            crate::files::yaml_files(path)
        } else {
            Ok(vec![path.clone()])
        };
        match found {
            Ok(found) => files.extend(found),
            Err(error) => problems.push(io_problem(&path.display().to_string(), &error.to_string())),
        }
    }
    let mut texts = Vec::new();
    for file in files {
        match std::fs::read_to_string(&file) {
            Ok(text) => texts.push((file.display().to_string(), text)),
            Err(error) => problems.push(io_problem(&file.display().to_string(), &error.to_string())),
        }
    }
    match load_crd_texts(&texts) {
        Ok(kinds) if problems.is_empty() => Ok(kinds),
        Ok(_) => Err(Diagnostics(problems)),
        Err(mut more) => {
            problems.append(&mut more.0);
            Err(Diagnostics(problems))
        }
    }
}

/// [`load_crd_paths`] for texts already read: `(file name, text)`.
pub(crate) fn load_crd_texts(files: &[(String, String)]) -> Result<InstalledKinds, Diagnostics> {
    let mut kinds: Vec<InstalledKind> = Vec::new();
    // In file order, as the rule loader reports.
    let problems = each_document(files, |doc, out| {
        let Some(kind) = read_crd(doc, out) else {
            return;
        };
        match kinds.iter().find(|k| k.crd_name == kind.crd_name) {
            // The same CRD vendored twice (two charts ship it) is one; two different ones are a mistake.
            Some(first)
                if (&first.kind, &first.plural, first.namespaced) != (&kind.kind, &kind.plural, kind.namespaced) =>
            {
                out.error(
                    doc.pos,
                    DiagnosticCode::Duplicate,
                    format!(
                        "CustomResourceDefinition {} is already defined differently at {}",
                        kind.crd_name, first.source
                    ),
                );
            }
            Some(_) => {}
            None => kinds.push(kind),
        }
    });
    if problems.is_empty() {
        Ok(InstalledKinds { kinds })
    } else {
        Err(Diagnostics(problems))
    }
}

fn io_problem(file: &str, error: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_owned(),
        line: 1,
        column: 1,
        message: format!("cannot read CRD manifest: {error}"),
        source_line: None,
        code: DiagnosticCode::Io,
    }
}

const CRD_API_VERSION: &str = "apiextensions.k8s.io/v1";

/// The kind one document defines, or `None` when it is no CRD (skipped) or is a broken one (reported).
fn read_crd(doc: &Node, out: &mut FileDiagnostics) -> Option<InstalledKind> {
    if doc.get("kind").and_then(Node::as_str) != Some("CustomResourceDefinition") {
        return None;
    }
    let api_version = doc.get("apiVersion").and_then(Node::as_str).unwrap_or_default();
    if api_version != CRD_API_VERSION {
        let at = doc.get("apiVersion").map_or(doc.pos, |n| n.pos);
        out.error(
            at,
            DiagnosticCode::Value,
            format!("a CustomResourceDefinition must be `{CRD_API_VERSION}` (Kubernetes 1.16+), not `{api_version}`"),
        );
        return None;
    }
    let mut broken = false;
    let mut text = |path: &[&str]| -> Option<String> {
        match lookup(doc, path) {
            Ok(node) => match node.as_str() {
                Some(value) if !value.is_empty() => return Some(value.to_owned()),
                _ => out.error(
                    node.pos,
                    DiagnosticCode::Type,
                    format!("`{}` must be a non-empty string", path.join(".")),
                ),
            },
            Err(at) => out.error(
                at,
                DiagnosticCode::MissingField,
                format!("`{}` is missing", path.join(".")),
            ),
        }
        broken = true;
        None
    };
    let group = text(&["spec", "group"]);
    let kind = text(&["spec", "names", "kind"]);
    let plural = text(&["spec", "names", "plural"]);
    let scope = text(&["spec", "scope"]);
    let namespaced = match scope.as_deref() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        Some(other) => {
            let at = lookup(doc, &["spec", "scope"]).map_or(doc.pos, |n| n.pos);
            out.error(
                at,
                DiagnosticCode::Value,
                format!("`spec.scope` is `{other}`; expected `Namespaced` or `Cluster`"),
            );
            broken = true;
            false
        }
        None => false,
    };
    let mut served_versions = Vec::new();
    let mut schemas = Vec::new();
    match lookup(doc, &["spec", "versions"]) {
        Ok(Node {
            value: NodeValue::Seq(versions),
            ..
        }) => {
            for version in versions {
                let name = version.get("name").and_then(Node::as_str);
                let Some(name) = name.filter(|n| !n.is_empty()) else {
                    out.error(version.pos, DiagnosticCode::MissingField, "a version needs a `name`");
                    broken = true;
                    continue;
                };
                let served = match version.get("served").map(|n| (&n.value, n.pos)) {
                    Some((NodeValue::Bool(served), _)) => *served,
                    Some((_, at)) => {
                        out.error(at, DiagnosticCode::Type, "`served` must be true or false");
                        broken = true;
                        false
                    }
                    None => {
                        out.error(
                            version.pos,
                            DiagnosticCode::MissingField,
                            format!("version `{name}` needs `served`"),
                        );
                        broken = true;
                        false
                    }
                };
                let status = version.get("subresources").and_then(|s| s.get("status")).is_some();
                if served {
                    served_versions.push((name.to_owned(), status));
                    if let Some(schema) = version.get("schema").and_then(|s| s.get("openAPIV3Schema")) {
                        schemas.push((name.to_owned(), schema.to_json()));
                    }
                }
            }
        }
        Ok(other) => {
            out.error(other.pos, DiagnosticCode::Type, "`spec.versions` must be a list");
            broken = true;
        }
        Err(at) => {
            out.error(at, DiagnosticCode::MissingField, "`spec.versions` is missing");
            broken = true;
        }
    }
    if broken {
        return None;
    }
    let (group, kind, plural) = (group?, kind?, plural?);
    Some(InstalledKind {
        crd_name: format!("{plural}.{group}"),
        group,
        kind,
        plural,
        namespaced,
        served_versions,
        schemas,
        source: out.location(doc.pos),
    })
}

/// The node at `path`, or the position of the deepest node reached (where the missing field belongs).
fn lookup<'n>(doc: &'n Node, path: &[&str]) -> Result<&'n Node, Pos> {
    let mut current = doc;
    for step in path {
        match current.get(step) {
            Some(next) => current = next,
            None => return Err(current.pos),
        }
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERTIFICATE: &str = "# vendored from a chart\n\
        apiVersion: v1\nkind: ConfigMap\nmetadata: { name: not-a-crd }\n---\n\
        apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
        metadata: { name: certificates.certs.example.org }\n\
        spec:\n  group: certs.example.org\n  scope: Namespaced\n  names: { kind: Certificate, plural: certificates }\n  \
        versions:\n    - { name: v1, served: true, storage: true, subresources: { status: {} } }\n    \
        - { name: v1alpha1, served: false, storage: false }\n";

    #[test]
    fn a_crd_manifest_names_its_kind_plural_scope_and_served_versions_and_other_documents_are_skipped() {
        let kinds = load_crd_texts(&[("crds.yaml".into(), CERTIFICATE.into())]).expect("valid");
        let info = kinds.resolve("certs.example.org/v1", "Certificate").expect("served");
        assert_eq!(
            (info.plural.as_str(), info.namespaced, info.status_subresource),
            ("certificates", true, true)
        );
        assert_eq!(
            info.origin,
            KindOrigin::Installed {
                source: "crds.yaml:6:1".into()
            }
        );
        assert_eq!(
            kinds.resolve("certs.example.org/v1alpha1", "Certificate"),
            None,
            "not served"
        );
        assert_eq!(
            kinds.resolve("other.example.org/v1", "Certificate"),
            None,
            "another group"
        );
    }

    #[test]
    fn a_broken_crd_is_reported_at_its_field() {
        let text = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  group: g.example.org\n  \
                    scope: Everywhere\n  names: { kind: Thing }\n  versions: []\n";
        let problems = load_crd_texts(&[("bad.yaml".into(), text.into())]).expect_err("broken");
        let found: Vec<String> = problems
            .iter()
            .map(|d| format!("{}:{} {}", d.line, d.column, d.code))
            .collect();
        assert_eq!(found, ["5:10 value", "6:10 missing-field"], "{problems}");
        let syntax = load_crd_texts(&[("bad.yaml".into(), "kind: [\n".into())]).expect_err("not YAML");
        assert_eq!(syntax.0[0].code, DiagnosticCode::Syntax);
    }

    #[test]
    fn the_same_crd_vendored_twice_is_one_but_two_different_ones_are_an_error() {
        let twice = [
            ("a.yaml".into(), CERTIFICATE.into()),
            ("b.yaml".into(), CERTIFICATE.into()),
        ];
        assert_eq!(load_crd_texts(&twice).expect("same CRD").kinds().len(), 1);
        let cluster = CERTIFICATE.replace("Namespaced", "Cluster");
        let differ = [("a.yaml".into(), CERTIFICATE.into()), ("b.yaml".into(), cluster)];
        let problems = load_crd_texts(&differ).expect_err("differ");
        assert!(
            problems.0[0]
                .message
                .contains("already defined differently at a.yaml:6:1"),
            "{problems}"
        );
    }

    /// A cluster-scoped kind of another tool, for the parent.
    const BUCKET: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
        metadata: { name: buckets.storage.example.org }\n\
        spec:\n  group: storage.example.org\n  scope: Cluster\n  names: { kind: Bucket, plural: buckets }\n  \
        versions: [ { name: v1beta1, served: true, storage: true } ]\n";

    /// A Reconciler whose parent, child and lookup are kinds other tools install.
    const RULES: &str = "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: bucket-certs }\n\
        spec:\n  for: { apiVersion: storage.example.org/v1beta1, kind: Bucket }\n  \
        lookups:\n    issuer: { apiVersion: certs.example.org/v1, kind: Certificate, name: ca, namespace: certs }\n  \
        children:\n    - id: cert\n      namespace: certs\n      template: |\n        \
        apiVersion: certs.example.org/v1\n        kind: Certificate\n        \
        metadata: { name: \"{{metadata.name}}\", namespace: certs }\n";

    fn installed() -> InstalledKinds {
        load_crd_texts(&[
            ("certs.yaml".into(), CERTIFICATE.into()),
            ("buckets.yaml".into(), BUCKET.into()),
        ])
        .expect("valid CRDs")
    }

    fn load(rules: &str, options: &crate::LoadOptions) -> Result<crate::RuleSet, Diagnostics> {
        crate::load_str_with("rules.yaml", rules, options)
    }

    #[test]
    fn with_their_crds_a_rules_kinds_from_other_tools_are_resolved_at_load_namespaced_and_cluster_scoped() {
        let options = crate::LoadOptions {
            installed: installed(),
            ..Default::default()
        };
        let rules = load(RULES, &options).unwrap_or_else(|d| panic!("{d}"));
        let reconciler = rules.reconcilers().next().expect("a Reconciler");
        let kinds = reconciler.kinds();
        let parent = kinds.parent.as_ref().expect("parent resolved");
        assert_eq!((parent.plural.as_str(), parent.namespaced), ("buckets", false));
        assert_eq!(
            parent.origin,
            KindOrigin::Installed {
                source: "buckets.yaml:1:1".into()
            }
        );
        assert_eq!(
            (kinds.children[0].plural.as_str(), kinds.children[0].namespaced),
            ("certificates", true)
        );
        assert!(kinds.unresolved.is_empty());
        assert!(!reconciler.writes_status(), "another tool's status is not ours");
        // RBAC from the manifests' plurals, and the CRD watch the worker waits on.
        let permissions: Vec<String> = crate::rule_permissions(&rules.rules()[0])
            .iter()
            .map(ToString::to_string)
            .collect();
        for wanted in [
            "patch buckets.storage.example.org (cluster-wide)",
            "create certificates.certs.example.org (cluster-wide)",
            "watch customresourcedefinitions.apiextensions.k8s.io (cluster-wide)",
        ] {
            assert!(permissions.iter().any(|p| p == wanted), "{wanted} in {permissions:?}");
        }
        assert!(
            !permissions.iter().any(|p| p.contains("buckets/status")),
            "{permissions:?}"
        );
        assert!(crate::underived_kinds(&rules).is_empty());
        // Rendering uses the manifests' scopes: a namespaced child of a cluster-scoped parent goes where it says.
        let parent = serde_json::json!({"apiVersion": "storage.example.org/v1beta1", "kind": "Bucket",
            "metadata": {"name": "b1", "uid": "u"}});
        let ca = serde_json::json!({"metadata": {"name": "ca", "namespace": "certs"}});
        let rendered = crate::render_children(
            reconciler,
            &parent,
            &serde_json::json!({"issuer": ca})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rendered.children[0]["metadata"]["namespace"], "certs");
    }

    #[test]
    fn without_their_crds_validate_refuses_the_kind_with_a_hint_naming_crds() {
        let problems = load(RULES, &crate::LoadOptions::default()).expect_err("unknown kinds");
        let found: Vec<(usize, &str)> = problems.iter().map(|d| (d.line, d.code.as_str())).collect();
        assert_eq!(
            found,
            [(5, "unknown-kind"), (7, "unknown-kind"), (13, "unknown-kind")],
            "{problems}"
        );
        assert!(
            problems.0[0]
                .message
                .contains("pass its CRD manifest with `--crds PATH`"),
            "{problems}"
        );
        assert!(
            problems.0[0]
                .message
                .contains("unknown kind `Bucket` (`storage.example.org/v1beta1`)"),
            "{problems}"
        );
    }

    #[test]
    fn for_run_an_unknown_kind_is_left_to_the_apiserver_and_filled_in_from_what_it_serves() {
        let options = crate::LoadOptions {
            unknown_kinds: crate::UnknownKinds::AtRunTime,
            ..Default::default()
        };
        let rules = load(RULES, &options).unwrap_or_else(|d| panic!("{d}"));
        let reconciler = rules.reconcilers().next().expect("a Reconciler");
        let unresolved: Vec<String> = reconciler.kinds().unresolved.iter().map(ToString::to_string).collect();
        assert_eq!(
            unresolved,
            ["storage.example.org/v1beta1 Bucket", "certs.example.org/v1 Certificate"]
        );
        assert_eq!(
            crate::underived_kinds(&rules).len(),
            2,
            "rbac says what it cannot derive"
        );
        // What the worker learns from the apiserver, filled in by the same resolution.
        let served = installed();
        let answers: Vec<KindInfo> = reconciler
            .kinds()
            .unresolved
            .iter()
            .filter_map(|k| served.resolve(&k.api_version, &k.kind))
            .collect();
        let running = reconciler.with_installed_kinds(&answers);
        assert!(running.kinds().unresolved.is_empty());
        assert_eq!(running.kinds().parent.as_ref().map(|p| p.namespaced), Some(false));
        assert_eq!(running.kinds().lookups[0].plural, "certificates");
        // Mistakes the rule set shows itself are still errors: a misspelt built-in kind, a status for a kind whose
        // status belongs to another tool.
        let typo = RULES
            .replace("kind: Certificate\n", "kind: Deploymnet\n")
            .replace("certs.example.org/v1\n", "apps/v1\n");
        let problems = load(&typo, &options).expect_err("typo");
        assert!(
            problems.0[0].message.contains("did you mean `Deployment`"),
            "{problems}"
        );
        let status = format!("{RULES}  status: {{ ready: \"{{.children.cert.status}}\" }}\n");
        let problems = load(&status, &options).expect_err("status of another tool's kind");
        assert_eq!(problems.0[0].code, DiagnosticCode::Status, "{problems}");
    }

    #[test]
    fn a_broken_crd_manifest_is_located_when_loaded_from_a_directory() {
        let dir = std::env::temp_dir().join(format!("ruleplane-crds-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("chart")).expect("temp dir");
        std::fs::write(dir.join("chart/good.yaml"), CERTIFICATE).expect("write");
        std::fs::write(dir.join("chart/notes.txt"), "not read").expect("write");
        std::fs::write(
            dir.join("bad.yml"),
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: {}\n",
        )
        .expect("write");
        let problems = load_crd_paths(std::slice::from_ref(&dir)).expect_err("broken");
        let first = &problems.0[0];
        assert!(first.file.ends_with("bad.yml"), "{problems}");
        assert_eq!(
            (first.line, first.column, first.code),
            (3, 7, DiagnosticCode::MissingField),
            "{problems}"
        );
        std::fs::remove_file(dir.join("bad.yml")).expect("remove");
        let kinds = load_crd_paths(std::slice::from_ref(&dir)).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(kinds.kinds().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
