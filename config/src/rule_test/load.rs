//! Test files → test suites: the schema check, then every reference and input checked with its position, so a
//! run never starts on a case that cannot mean what it says.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Node as KubeNode, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::files::is_test_file;

use super::types::{ExpectedPlacement, ObservedChild, RuleTestDocument, TestCase};
use crate::diagnostics::{Diagnostic, DiagnosticCode, Diagnostics, FileDiagnostics, Pos, SourceLocation, did_you_mean};
use crate::load::schema_check::SchemaChecker;
use crate::load::{key, path};
use crate::reconciler::ObjectKey;
use crate::rule_set::{Rule, RuleSet};
use crate::scheduler::engine::snapshot::pod_ref;
use crate::scheduler::engine::{CsiObjects, Storage};
use crate::scheduler::gang::WorkloadApi;
use crate::scheduler::simulate::{PodGroupObject, WorkloadObject, WorkloadRefs};
use crate::schema::{cached_schema, rule_test_schema_ref};
use crate::yaml_tree::{Node, NodeValue, PathStep, each_document};

/// The `kind` of test documents.
pub const RULE_TEST_KIND: &str = "RuleTest";

/// The test files under `root`: the file itself when it is one, or every test file below a directory, sorted.
pub fn test_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !root.is_dir() {
        return Ok(if is_test_file(root) {
            vec![root.to_path_buf()]
        } else {
            Vec::new()
        });
    }
    Ok(crate::files::yaml_files(root)?
        .into_iter()
        .filter(|p| is_test_file(p))
        .collect())
}

/// One test document, resolved against the rule set.
#[derive(Clone, Debug)]
pub struct RuleTestSuite {
    /// `metadata.name`.
    pub name: String,
    /// The rule under test.
    pub rule: String,
    /// Where the document starts.
    pub source: SourceLocation,
    /// The cases, in file order.
    pub cases: Vec<ResolvedCase>,
}

/// One case, its inputs typed for the rule's kind.
#[derive(Clone, Debug)]
pub struct ResolvedCase {
    /// `name`.
    pub name: String,
    /// Where the case starts.
    pub source: SourceLocation,
    /// Inputs and expectations.
    pub check: CaseCheck,
}

/// What a case feeds the rule and expects back.
#[derive(Clone, Debug)]
pub enum CaseCheck {
    /// A Reconciler case.
    Reconciler {
        /// The parent object.
        parent: Value,
        /// Objects lookups may find.
        lookups: Vec<Value>,
        /// Children as they exist, by id.
        observed: Map<String, Value>,
        /// Every child expected (subsets), when given.
        children: Option<Vec<Value>>,
        /// Expected status (subset), when given.
        status: Option<Value>,
        /// Every patch body expected (subsets), when given.
        patches: Option<Vec<Value>>,
        /// Expected render error text, when given.
        error: Option<String>,
        /// The rule's `for` must not select the parent (`expect.notSelected`).
        not_selected: bool,
    },
    /// A SchedulerPolicy case.
    Scheduler {
        /// Nodes.
        nodes: Vec<KubeNode>,
        /// Running pods.
        existing: Vec<Pod>,
        /// Pods to place.
        pods: Vec<Pod>,
        /// Tie-breaking seed.
        seed: u64,
        /// PodDisruptionBudgets.
        pdbs: Vec<PodDisruptionBudget>,
        /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, when the case gives any.
        storage: Option<Storage>,
        /// The Workload API's objects holding gang policies (Workloads in v1.35, PodGroups since).
        workloads: Vec<WorkloadObject>,
        /// The Workload API groups the pods name.
        workload_refs: WorkloadRefs,
        /// PodGroups.
        pod_groups: Vec<PodGroupObject>,
        /// Expected outcomes.
        placements: Vec<ExpectedPlacement>,
    },
}

/// Loads test documents from `files` (name, text) and resolves each against `rules`, collecting every located
/// problem.
pub fn load_tests(files: &[(String, String)], rules: &RuleSet) -> Result<Vec<RuleTestSuite>, Diagnostics> {
    let mut suites = Vec::new();
    let mut problems = each_document(files, |doc, out| {
        if let Some(suite) = load_document(doc, rules, out) {
            suites.push(suite);
        }
    });
    let mut seen = std::collections::BTreeMap::new();
    for suite in &suites {
        if let Some(first) = seen.insert(suite.name.as_str(), &suite.source) {
            problems.push(Diagnostic {
                file: suite.source.file.clone(),
                line: suite.source.line,
                column: suite.source.column,
                message: format!("a RuleTest named `{}` is already defined at {first}", suite.name),
                source_line: None,
                code: DiagnosticCode::Duplicate,
            });
        }
    }
    if problems.is_empty() {
        Ok(suites)
    } else {
        Err(Diagnostics(problems))
    }
}

fn load_document(doc: &Node, rules: &RuleSet, out: &mut FileDiagnostics) -> Option<RuleTestSuite> {
    if !matches!(doc.value, NodeValue::Map(_)) {
        out.error(
            doc.pos,
            DiagnosticCode::Structure,
            "a test must be a mapping with apiVersion, kind, metadata and spec",
        );
        return None;
    }
    match doc.get("kind") {
        Some(kind) if kind.as_str() == Some(RULE_TEST_KIND) => {}
        Some(kind) => {
            out.error(
                kind.pos,
                DiagnosticCode::UnknownKind,
                format!("test files (*.test.yaml) hold `kind: {RULE_TEST_KIND}` documents; put rules in other files"),
            );
            return None;
        }
        None => {
            out.error(
                doc.pos,
                DiagnosticCode::MissingField,
                format!("missing required field `kind` ({RULE_TEST_KIND})"),
            );
            return None;
        }
    }
    let schema = rule_test_schema_ref();
    let mut checker = SchemaChecker::new(cached_schema());
    checker.check(&schema, doc, &mut Vec::new(), doc.pos);
    if !checker.issues.is_empty() {
        for issue in checker.issues {
            out.error(issue.pos, issue.code, issue.message);
        }
        return None;
    }
    let document: RuleTestDocument = match serde_json::from_value(doc.to_json()) {
        Ok(document) => document,
        Err(error) => {
            out.error(doc.pos, DiagnosticCode::Structure, format!("invalid test: {error}"));
            return None;
        }
    };
    let problems_before = out.found.len();
    let rule_pos = doc.value_pos_of(&path(&["spec", "rule"]));
    let rule = rules.rules().iter().find(|rule| rule.name() == document.spec.rule);
    let rule = match rule {
        Some(rule @ (Rule::Reconciler(_) | Rule::SchedulerPolicy(_))) => rule,
        Some(other) => {
            out.error(
                rule_pos,
                DiagnosticCode::Reference,
                format!(
                    "rule `{}` is a {}; tests are for Reconciler and SchedulerPolicy rules",
                    other.name(),
                    other.kind()
                ),
            );
            return None;
        }
        None => {
            let testable = rules
                .rules()
                .iter()
                .filter(|r| matches!(r, Rule::Reconciler(_) | Rule::SchedulerPolicy(_)))
                .map(Rule::name);
            let hint = did_you_mean(&document.spec.rule, testable);
            out.error(
                rule_pos,
                DiagnosticCode::Reference,
                format!(
                    "no Reconciler or SchedulerPolicy named `{}` among the rules given{hint} (pass the rules' files \
                     or directory to `ruleplane test` too)",
                    document.spec.rule
                ),
            );
            return None;
        }
    };
    let mut cases = Vec::with_capacity(document.spec.cases.len());
    for (index, case) in document.spec.cases.iter().enumerate() {
        let at = CaseAt { doc, index };
        let check = match rule {
            Rule::Reconciler(reconciler) => {
                let watched = &reconciler.spec.watched;
                reconciler_case(case, &at, (&watched.api_version, &watched.kind), out)
            }
            _ => scheduler_case(case, &at, WorkloadApi::of(rules.kubernetes_version()), out),
        };
        if let Some(check) = check {
            cases.push(ResolvedCase {
                name: case.name.clone(),
                source: out.location(at.pos(&[])),
                check,
            });
        }
    }
    (out.found.len() == problems_before).then(|| RuleTestSuite {
        name: document.metadata.name,
        rule: document.spec.rule,
        source: out.location(doc.pos),
        cases,
    })
}

/// Positions inside case `index` of a document.
struct CaseAt<'d> {
    doc: &'d Node,
    index: usize,
}

impl CaseAt<'_> {
    fn steps(&self, field: &[PathStep]) -> Vec<PathStep> {
        let mut steps = path(&["spec", "cases"]);
        steps.push(PathStep::Index(self.index));
        steps.extend_from_slice(field);
        steps
    }

    /// Where the key of `field` (or the case itself) was written.
    fn pos(&self, field: &[PathStep]) -> Pos {
        self.doc.pos_of(&self.steps(field))
    }
}

/// Fields of the other kind's cases, reported where they were written.
fn refuse_fields(case: &TestCase, at: &CaseAt, fields: &[(&str, bool)], rule_kind: &str, out: &mut FileDiagnostics) {
    for (field, present) in fields {
        if *present {
            let steps: Vec<PathStep> = field.split('.').map(key).collect();
            out.error(
                at.pos(&steps),
                DiagnosticCode::UnknownField,
                format!(
                    "`{field}` is for the other kind of test; case `{}` tests a {rule_kind}",
                    case.name
                ),
            );
        }
    }
}

fn reconciler_case(
    case: &TestCase,
    at: &CaseAt,
    (api_version, kind): (&str, &str),
    out: &mut FileDiagnostics,
) -> Option<CaseCheck> {
    let expect = &case.expect;
    refuse_fields(
        case,
        at,
        &[
            ("nodes", !case.nodes.is_empty()),
            ("existing", !case.existing.is_empty()),
            ("pods", !case.pods.is_empty()),
            ("seed", case.seed.is_some()),
            ("pdbs", !case.pdbs.is_empty()),
            ("persistentVolumeClaims", !case.persistent_volume_claims.is_empty()),
            ("persistentVolumes", !case.persistent_volumes.is_empty()),
            ("storageClasses", !case.storage_classes.is_empty()),
            ("csiNodes", !case.csi_nodes.is_empty()),
            ("csiDrivers", !case.csi_drivers.is_empty()),
            ("csiStorageCapacities", !case.csi_storage_capacities.is_empty()),
            ("volumeAttachments", !case.volume_attachments.is_empty()),
            ("workloads", !case.workloads.is_empty()),
            ("podGroups", !case.pod_groups.is_empty()),
            ("expect.placements", !expect.placements.is_empty()),
        ],
        "Reconciler",
        out,
    );
    let Some(parent) = &case.parent else {
        out.error(
            at.pos(&[]),
            DiagnosticCode::MissingField,
            format!("case `{}` needs a `parent` object", case.name),
        );
        return None;
    };
    let text = |field: &str| parent.get(field).and_then(Value::as_str);
    if text("apiVersion") != Some(api_version) || text("kind") != Some(kind) {
        out.error(
            at.pos(&[key("parent")]),
            DiagnosticCode::Value,
            format!(
                "the rule watches {api_version} {kind}; this parent is {} {}",
                text("apiVersion").unwrap_or("(no apiVersion)"),
                text("kind").unwrap_or("(no kind)")
            ),
        );
    }
    if parent
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .is_none()
    {
        out.error(
            at.pos(&[key("parent")]),
            DiagnosticCode::MissingField,
            "the parent needs `metadata.name`",
        );
    }
    let expects_result =
        expect.children.is_some() || expect.status.is_some() || expect.patches.is_some() || expect.error.is_some();
    if !expects_result && !expect.not_selected {
        out.error(
            at.pos(&[key("expect")]),
            DiagnosticCode::MissingField,
            "`expect` needs `children`, `status`, `patches`, `error` or `notSelected` for a Reconciler case",
        );
    }
    if expects_result && expect.not_selected {
        out.error(
            at.pos(&[key("expect"), key("notSelected")]),
            DiagnosticCode::Value,
            "a parent the rule does not select is never reconciled: `notSelected` expects nothing else",
        );
    }
    if expect.error.is_some() && (expect.children.is_some() || expect.status.is_some()) {
        out.error(
            at.pos(&[key("expect"), key("error")]),
            DiagnosticCode::Value,
            "a case that expects a render error renders no children or status: leave out `children` and `status`",
        );
    }
    for (index, child) in expect.children.iter().flatten().enumerate() {
        if ObjectKey::of(&Value::Object(child.clone())).is_none() {
            out.error(
                at.pos(&[key("expect"), key("children"), PathStep::Index(index)]),
                DiagnosticCode::MissingField,
                "an expected child needs `apiVersion`, `kind` and `metadata.name` (they say which child it is)",
            );
        }
    }
    Some(CaseCheck::Reconciler {
        parent: Value::Object(parent.clone()),
        lookups: case.lookups.iter().cloned().map(Value::Object).collect(),
        observed: case
            .observed
            .iter()
            .map(|(id, observed)| {
                let value = match observed {
                    ObservedChild::One(object) => Value::Object(object.clone()),
                    ObservedChild::Many(objects) => objects.iter().cloned().map(Value::Object).collect(),
                };
                (id.clone(), value)
            })
            .collect(),
        children: expect
            .children
            .as_ref()
            .map(|c| c.iter().cloned().map(Value::Object).collect()),
        status: expect.status.clone().map(Value::Object),
        patches: expect
            .patches
            .as_ref()
            .map(|p| p.iter().cloned().map(Value::Object).collect()),
        error: expect.error.clone(),
        not_selected: expect.not_selected,
    })
}

fn scheduler_case(case: &TestCase, at: &CaseAt, api: WorkloadApi, out: &mut FileDiagnostics) -> Option<CaseCheck> {
    let expect = &case.expect;
    refuse_fields(
        case,
        at,
        &[
            ("parent", case.parent.is_some()),
            ("lookups", !case.lookups.is_empty()),
            ("observed", !case.observed.is_empty()),
            ("expect.children", expect.children.is_some()),
            ("expect.status", expect.status.is_some()),
            ("expect.patches", expect.patches.is_some()),
            ("expect.error", expect.error.is_some()),
            ("expect.notSelected", expect.not_selected),
        ],
        "SchedulerPolicy",
        out,
    );
    let nodes: Vec<KubeNode> = typed_objects(&case.nodes, "Node", "nodes", at, out);
    let existing: Vec<Pod> = typed_objects(&case.existing, "Pod", "existing", at, out);
    let pods: Vec<Pod> = typed_objects(&case.pods, "Pod", "pods", at, out);
    let pdbs: Vec<PodDisruptionBudget> = typed_objects(&case.pdbs, "PodDisruptionBudget", "pdbs", at, out);
    let claims: Vec<PersistentVolumeClaim> = typed_objects(
        &case.persistent_volume_claims,
        "PersistentVolumeClaim",
        "persistentVolumeClaims",
        at,
        out,
    );
    let volumes: Vec<PersistentVolume> = typed_objects(
        &case.persistent_volumes,
        "PersistentVolume",
        "persistentVolumes",
        at,
        out,
    );
    let classes: Vec<StorageClass> = typed_objects(&case.storage_classes, "StorageClass", "storageClasses", at, out);
    let csi = CsiObjects {
        nodes: typed_objects(&case.csi_nodes, "CSINode", "csiNodes", at, out),
        drivers: typed_objects(&case.csi_drivers, "CSIDriver", "csiDrivers", at, out),
        capacities: typed_objects(
            &case.csi_storage_capacities,
            "CSIStorageCapacity",
            "csiStorageCapacities",
            at,
            out,
        ),
        attachments: typed_objects(
            &case.volume_attachments,
            "VolumeAttachment",
            "volumeAttachments",
            at,
            out,
        ),
    };
    let any_csi =
        !csi.nodes.is_empty() || !csi.drivers.is_empty() || !csi.capacities.is_empty() || !csi.attachments.is_empty();
    let storage = (!claims.is_empty() || !volumes.is_empty() || !classes.is_empty() || any_csi)
        .then(|| Storage::new(claims, volumes, classes).with_csi(csi));
    let (workloads, pod_groups) = gang_objects(case, at, api, out);
    // Captured from the objects: the typed pods have no `workloadRef` (v1.35's field is gone from the typed model).
    let raw_pods: Vec<Value> = case
        .pods
        .iter()
        .chain(&case.existing)
        .map(|p| Value::Object(p.clone()))
        .collect();
    let workload_refs = WorkloadRefs::capture(api, &raw_pods);
    if case.pods.is_empty() {
        out.error(
            at.pos(&[]),
            DiagnosticCode::MissingField,
            format!("case `{}` needs `pods` to place", case.name),
        );
    }
    if expect.placements.is_empty() {
        out.error(
            at.pos(&[key("expect")]),
            DiagnosticCode::MissingField,
            "`expect` needs `placements` for a SchedulerPolicy case",
        );
    }
    let pod_refs: Vec<String> = pods.iter().map(pod_ref).collect();
    for (index, placement) in expect.placements.iter().enumerate() {
        let at_placement = |field: Option<&str>| {
            let mut steps = vec![key("expect"), key("placements"), PathStep::Index(index)];
            steps.extend(field.map(key));
            at.pos(&steps)
        };
        let wanted = qualified_pod(&placement.pod);
        if !pod_refs.contains(&wanted) {
            out.error(
                at_placement(Some("pod")),
                DiagnosticCode::Reference,
                format!("no pod `{wanted}` in this case's `pods` ({})", pod_refs.join(", ")),
            );
        }
        let bound = placement.node.is_some() || !placement.node_in.is_empty();
        let unschedulable = placement.unschedulable || placement.message.is_some() || placement.preemption.is_some();
        if bound == unschedulable || (placement.node.is_some() && !placement.node_in.is_empty()) {
            out.error(
                at_placement(None),
                DiagnosticCode::Value,
                "say one outcome: `node`, `nodeIn`, or `unschedulable` (and/or `message`, `preemption`)",
            );
        }
    }
    Some(CaseCheck::Scheduler {
        nodes,
        existing,
        pods,
        seed: case.seed.unwrap_or(0),
        pdbs,
        storage,
        workloads,
        workload_refs,
        pod_groups,
        placements: expect.placements.clone(),
    })
}

/// A case's gang objects in the Workload API of the version tested, and Coscheduling's PodGroups. `workloads`
/// hold v1.35's Workloads (since v1.36 a Workload only holds templates the scheduler never reads: ignored);
/// `podGroups` hold Coscheduling's PodGroups and, since v1.36, the Workload API's (`scheduling.k8s.io`).
fn gang_objects(
    case: &TestCase,
    at: &CaseAt,
    api: WorkloadApi,
    out: &mut FileDiagnostics,
) -> (Vec<WorkloadObject>, Vec<PodGroupObject>) {
    let mut workloads = Vec::new();
    let mut read =
        |object: &Value, field: &str, index: usize, out: &mut FileDiagnostics| match WorkloadObject::of(api, object) {
            Ok(found) => workloads.push(found),
            Err(error) => out.error(
                at.pos(&[key(field), PathStep::Index(index)]),
                DiagnosticCode::Value,
                format!("not a {} of {}: {error}", api.policy_kind(), api.api_version()),
            ),
        };
    if api == WorkloadApi::V1Alpha1 {
        let objects = typed_objects::<Value>(&case.workloads, "Workload", "workloads", at, out);
        for (index, object) in objects.iter().enumerate() {
            read(object, "workloads", index, out);
        }
    }
    let objects = typed_objects::<Value>(&case.pod_groups, "PodGroup", "podGroups", at, out);
    let mut pod_groups = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        if !WorkloadApi::is_in_tree(api_version) {
            // A PodGroup is read as the worker reads it (scheduler-plugins' CRD has no typed model here).
            pod_groups.push(PodGroupObject::of(object));
        } else if api.holds_policies(api_version, "PodGroup") {
            read(object, "podGroups", index, out);
        } else {
            out.error(
                at.pos(&[key("podGroups"), PathStep::Index(index)]),
                DiagnosticCode::Value,
                format!(
                    "a PodGroup of {api_version}, which the Kubernetes version tested does not schedule by: its \
                     Workload API is {}",
                    api.api_version()
                ),
            );
        }
    }
    (workloads, pod_groups)
}

/// Converts a case's objects into typed Kubernetes objects, reporting each one that does not convert at its item.
fn typed_objects<T: DeserializeOwned>(
    objects: &[Map<String, Value>],
    kind: &str,
    field: &str,
    at: &CaseAt,
    out: &mut FileDiagnostics,
) -> Vec<T> {
    let mut typed = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        let pos = at.pos(&[key(field), PathStep::Index(index)]);
        if let Some(found) = object.get("kind").and_then(Value::as_str)
            && found != kind
        {
            out.error(
                pos,
                DiagnosticCode::Value,
                format!("`{field}` holds {kind} objects, found a {found}"),
            );
            continue;
        }
        if object
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .is_none()
        {
            out.error(
                pos,
                DiagnosticCode::MissingField,
                format!("a {kind} needs `metadata.name`"),
            );
            continue;
        }
        match serde_json::from_value(Value::Object(object.clone())) {
            Ok(value) => typed.push(value),
            Err(error) => out.error(pos, DiagnosticCode::Value, format!("not a valid {kind}: {error}")),
        }
    }
    typed
}

/// `name` → `default/name`; `namespace/name` unchanged.
pub(crate) fn qualified_pod(pod: &str) -> String {
    if pod.contains('/') {
        pod.to_string()
    } else {
        format!("default/{pod}")
    }
}
