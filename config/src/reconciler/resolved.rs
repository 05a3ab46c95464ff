//! A Reconciler rule as it runs: the document plus every template and JSONPath compiled at load time.

use std::ops::Deref;

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::types::{Lookup, ReconcilerRule, StatusType};
use crate::common::LabelSelector;
use crate::diagnostics::SourceLocation;
use crate::jsonpath::{CompiledPath, is_truthy};
use crate::rule_set::{KindInfo, KindOrigin};
use crate::template::{CompiledTemplate, Partials};

/// A loaded Reconciler. Only the loader makes one, after every check passed, so rendering and the worker
/// use the compiled parts without checking anything again. Derefs to the rule document as written.
#[derive(Clone, Debug)]
pub struct Reconciler {
    pub(crate) rule: ReconcilerRule,
    pub(crate) children: Vec<Child>,
    pub(crate) finalize_children: Vec<Child>,
    pub(crate) lookups: Vec<ResolvedLookup>,
    pub(crate) status: Vec<StatusField>,
    /// The author's conditions (`spec.conditions`), in the rule's order.
    pub(crate) conditions: Vec<super::conditions::ResolvedCondition>,
    pub(crate) patches: Vec<ResolvedPatch>,
    pub(crate) kinds: ReconcilerKinds,
    /// Indexes into `children` such that every child comes after the children it reads.
    pub(crate) render_order: Vec<usize>,
    /// The partials of the rule's file (`kind: TemplatePartials`), which its templates may include.
    pub(crate) partials: Partials,
}

/// How the apiserver serves the kinds a Reconciler reads and writes, resolved by the loader from the rule set's
/// ResourceDefinitions, the built-in kinds and the CRD manifests given with `--crds`; kinds none of them knows
/// (`ruleplane run`: another tool installs them) are `unresolved` until the worker asks the apiserver
/// ([`Reconciler::with_installed_kinds`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReconcilerKinds {
    /// The parents' kind (`None` while unresolved).
    pub parent: Option<KindInfo>,
    /// The kinds of `children` and `finalize.children` (each once per child; unresolved ones left out).
    pub children: Vec<KindInfo>,
    /// The kinds of `lookups` (unresolved ones left out).
    pub lookups: Vec<KindInfo>,
    /// The kinds of `patches` (unresolved ones left out).
    pub patched: Vec<KindInfo>,
    /// The kinds only the apiserver can tell about, each once: `ruleplane run` loads rules whose kinds another
    /// tool installs (maybe later) without their manifests.
    pub unresolved: Vec<KindRef>,
}

/// An `apiVersion`/`kind` pair as a rule spells it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindRef {
    /// `group/version`, or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
}

impl std::fmt::Display for KindRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

impl ReconcilerKinds {
    /// Every resolved kind (parent, children, lookups; a kind may come more than once).
    pub fn all(&self) -> impl Iterator<Item = &KindInfo> {
        self.parent
            .iter()
            .chain(&self.children)
            .chain(&self.lookups)
            .chain(&self.patched)
    }

    /// The kinds declared by a ResourceDefinition of the rule set (parent, children, lookups; a kind may come
    /// more than once).
    pub fn declared(&self) -> impl Iterator<Item = &KindInfo> {
        self.all().filter(|kind| kind.declared_by().is_some())
    }

    /// How `apiVersion`/`kind` is served, if resolved.
    pub fn find(&self, api_version: &str, kind: &str) -> Option<&KindInfo> {
        self.all()
            .find(|info| info.api_version == api_version && info.kind == kind)
    }

    /// Whether some kind (resolved or not) is neither built in nor declared: another tool installs it, and the
    /// worker learns how it is served from the apiserver, waiting on the shared watch of CRDs while it is not.
    pub fn has_installed(&self) -> bool {
        !self.unresolved.is_empty()
            || self
                .all()
                .any(|kind| matches!(kind.origin, KindOrigin::Installed { .. }))
    }
}

/// Parents reconciled at once when the rule does not say (`spec.concurrency`).
pub const DEFAULT_CONCURRENCY: u16 = 16;

impl Reconciler {
    /// How many parents are reconciled at the same time.
    pub fn concurrency(&self) -> usize {
        usize::from(self.rule.spec.concurrency.unwrap_or(DEFAULT_CONCURRENCY))
    }

    /// The rule document as written.
    pub fn document(&self) -> &ReconcilerRule {
        &self.rule
    }

    /// The children, in the rule's order.
    pub fn children(&self) -> &[Child] {
        &self.children
    }

    /// The child with this id.
    pub fn child(&self, id: &str) -> Option<&Child> {
        self.children
            .iter()
            .chain(&self.finalize_children)
            .find(|child| child.id == id)
    }

    /// The child (of `children` or `finalize.children`) an object rendered or observed for this rule belongs to,
    /// by its child-id label.
    pub fn child_of(&self, object: &Value) -> Option<&Child> {
        let id = object
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(crate::ownership::CHILD_ID_LABEL))
            .and_then(Value::as_str)?;
        self.child(id)
    }

    /// Whether an object rendered for this rule may take over an existing object of its name that Ruleplane did
    /// not create: its child's `adopt`, else the rule's.
    pub fn adopts(&self, object: &Value) -> bool {
        self.child_of(object).map_or(self.rule.spec.adopt, |child| child.adopt)
    }

    /// The children in dependency order (a child after those it reads); deletion goes the other way.
    pub fn children_in_order(&self) -> impl DoubleEndedIterator<Item = &Child> {
        self.render_order.iter().filter_map(|index| self.children.get(*index))
    }

    /// The `finalize` children (empty when the rule has none).
    pub fn finalize_children(&self) -> &[Child] {
        &self.finalize_children
    }

    /// The lookups, by name order.
    pub fn lookups(&self) -> &[ResolvedLookup] {
        &self.lookups
    }

    /// The lookup with this name.
    pub fn lookup(&self, name: &str) -> Option<&ResolvedLookup> {
        self.lookups.iter().find(|lookup| lookup.name == name)
    }

    /// How the apiserver serves the kinds this rule reads and writes.
    pub fn kinds(&self) -> &ReconcilerKinds {
        &self.kinds
    }

    /// Whether the parents' status is this rule's to write: only for kinds a ResourceDefinition of the rule set
    /// declares. A built-in kind's status belongs to its Kubernetes controller, and an installed kind's to the
    /// tool that installed it (cert-manager writes a Certificate's `Ready` condition).
    pub fn writes_status(&self) -> bool {
        self.kinds
            .parent
            .as_ref()
            .is_some_and(|kind| kind.declared_by().is_some())
    }

    /// Fills in how each kind is served with `resolve` (the loader's one resolution), noting the kinds it does not
    /// know as unresolved.
    pub(crate) fn resolve_kinds(&mut self, resolve: impl Fn(&str, &str) -> Option<KindInfo>) {
        let mut unresolved: Vec<KindRef> = Vec::new();
        let mut find = |api_version: &str, kind: &str| {
            let found = resolve(api_version, kind);
            let wanted = KindRef {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            };
            if found.is_none() && !unresolved.contains(&wanted) {
                unresolved.push(wanted);
            }
            found
        };
        let watched = &self.rule.spec.watched;
        let parent = find(&watched.api_version, &watched.kind);
        let children: Vec<KindInfo> = self
            .children
            .iter()
            .chain(&self.finalize_children)
            .filter_map(|child| find(&child.api_version, &child.kind))
            .collect();
        let lookups: Vec<KindInfo> = self
            .lookups
            .iter()
            .filter_map(|lookup| find(&lookup.spec.api_version, &lookup.spec.kind))
            .collect();
        let patched: Vec<KindInfo> = self
            .patches
            .iter()
            .filter_map(|patch| find(&patch.api_version, &patch.kind))
            .collect();
        for patch in &mut self.patches {
            patch.namespaced = patched
                .iter()
                .find(|k| k.api_version == patch.api_version && k.kind == patch.kind)
                .is_none_or(|kind| kind.namespaced);
        }
        for lookup in &mut self.lookups {
            let kind = lookups
                .iter()
                .find(|k| k.api_version == lookup.spec.api_version && k.kind == lookup.spec.kind);
            lookup.namespaced = kind.is_none_or(|kind| kind.namespaced);
        }
        self.kinds = ReconcilerKinds {
            parent,
            children,
            lookups,
            patched,
            unresolved,
        };
    }

    /// This rule with its unresolved kinds filled in from `served`: what the apiserver answered for them when the
    /// worker started (`KindOrigin::Installed`). Kinds already resolved keep their resolution; what is still not
    /// in `served` stays unresolved.
    pub fn with_installed_kinds(&self, served: &[KindInfo]) -> Reconciler {
        let known = self.kinds.clone();
        let mut out = self.clone();
        out.resolve_kinds(|api_version, kind| {
            known.find(api_version, kind).cloned().or_else(|| {
                served
                    .iter()
                    .find(|info| info.api_version == api_version && info.kind == kind)
                    .cloned()
            })
        });
        out
    }

    /// Whether the rule looks up Secrets: then any value it renders may be secret, and messages show none.
    pub fn reads_secrets(&self) -> bool {
        self.lookups
            .iter()
            .any(|lookup| lookup.spec.api_version == "v1" && lookup.spec.kind == "Secret")
    }

    /// How the apiserver serves this child's kind (`None` when the rule set does not know it).
    pub fn child_kind(&self, child: &Child) -> Option<&KindInfo> {
        self.kinds
            .children
            .iter()
            .find(|kind| kind.api_version == child.api_version && kind.kind == child.kind)
    }

    /// The projected status fields.
    pub fn status_fields(&self) -> &[StatusField] {
        &self.status
    }

    /// The `patches` entries, in the rule's order.
    pub fn patches(&self) -> &[ResolvedPatch] {
        &self.patches
    }
}

impl Deref for Reconciler {
    type Target = ReconcilerRule;
    fn deref(&self) -> &ReconcilerRule {
        &self.rule
    }
}

/// Two loaded rules are the same when their documents and their file's partials are (compiled parts follow from
/// those): a changed partial restarts the rules of its file.
impl PartialEq for Reconciler {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule && self.partials == other.partials
    }
}

impl Serialize for Reconciler {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.rule.serialize(serializer)
    }
}

/// One child with its compiled template and readiness check.
#[derive(Clone, Debug)]
pub struct Child {
    /// The child's id within the rule.
    pub id: String,
    /// `apiVersion` as spelled literally in the template (known before rendering: watches and RBAC use it).
    pub api_version: String,
    /// `kind` as spelled literally in the template.
    pub kind: String,
    /// Where the template starts in the rule file, so render errors point into the file.
    pub source: SourceLocation,
    /// Never deleted by Ruleplane: released instead (no owner reference either).
    pub retain: bool,
    /// Whether an existing object with this child's name that Ruleplane did not create is taken over (the child's
    /// `adopt`, else the rule's).
    pub adopt: bool,
    /// Whether an apply refused as immutable deletes the object and creates it again (`recreate`).
    pub recreate: bool,
    /// Ids of the children this one reads (`children.<id>` in its template): it is rendered once they are ready.
    pub depends_on: Vec<String>,
    pub(crate) template: CompiledTemplate,
    /// The child's `namespace` field: where it may be written besides its parent's namespace.
    pub(crate) namespace: Option<CompiledTemplate>,
    /// Whether the rule itself places this child outside its parent's namespace (a `namespace` field, or a
    /// `namespace:` its template writes): only then is an object outside that namespace taken for this child.
    pub(crate) sets_namespace: bool,
    pub(crate) ready_when: Option<CompiledPath>,
    pub(crate) include_when: Option<CompiledPath>,
    /// `forEach` or `count`: the child is rendered once per item (`None`: once).
    pub(crate) collection: Option<Collection>,
    /// `handOver`: the paths (field names) set only at creation.
    pub(crate) hand_over: Vec<Vec<String>>,
}

/// How a collection child finds its items, compiled.
#[derive(Clone, Debug)]
pub(crate) struct Collection {
    pub(crate) items: CollectionItems,
    /// Past this many objects for one parent, rendering fails.
    pub(crate) max_items: usize,
}

/// The source of a collection's items.
#[derive(Clone, Debug)]
pub(crate) enum CollectionItems {
    /// `forEach`: each entry's name and list; several make the cartesian product, in order.
    ForEach(Vec<(String, ItemSource)>),
    /// `count`: the number of copies.
    Count(ItemSource),
}

/// What a `count` or a `forEach` entry reads: a JSONPath over the template context, or a template (`{{…}}`) whose
/// text is the number (`count`) or a YAML list (`forEach`).
#[derive(Clone, Debug)]
pub(crate) enum ItemSource {
    /// A JSONPath: a number, or a list (a missing field or `null`: none).
    Path(CompiledPath),
    /// A template, with where it is written (its render errors point there).
    Template(CompiledTemplate, SourceLocation),
}

impl ItemSource {
    /// The expression as the rule writes it.
    pub(crate) fn source(&self) -> &str {
        match self {
            ItemSource::Path(path) => path.source(),
            ItemSource::Template(template, _) => template.source(),
        }
    }
}

impl Child {
    /// Whether an observed child is ready: its `readyWhen` selects a truthy value (no `readyWhen`: it exists). For
    /// a collection, `observed` is the list of its objects: ready when every one is.
    pub fn is_ready(&self, observed: &Value) -> bool {
        let one_ready = |object: &Value| self.is_item_ready(object);
        match (self.is_collection(), observed) {
            (true, Value::Array(items)) => items.iter().all(one_ready),
            _ => one_ready(observed),
        }
    }

    /// Whether one object of this child is ready (for a collection: one item).
    pub fn is_item_ready(&self, object: &Value) -> bool {
        match &self.ready_when {
            None => true,
            Some(path) => is_truthy(path.select_one(object).as_ref()),
        }
    }

    /// Whether this child is rendered once per item (`forEach`, `count`): `children.<id>` is then a list.
    pub fn is_collection(&self) -> bool {
        self.collection.is_some()
    }
}

/// One lookup with its compiled name/namespace templates (or its selector) and projection.
#[derive(Clone, Debug)]
pub struct ResolvedLookup {
    /// The name templates use (`lookups.<name>`).
    pub name: String,
    /// The lookup as written.
    pub spec: Lookup,
    pub(crate) target: LookupTarget,
    pub(crate) json_path: Option<CompiledPath>,
    /// Whether the lookup's kind is namespaced (resolved with the rule set's kinds; a cluster-scoped object is
    /// read without a namespace).
    pub(crate) namespaced: bool,
}

/// One `patches` entry with its compiled templates.
#[derive(Clone, Debug)]
pub struct ResolvedPatch {
    /// The entry's id within the rule.
    pub id: String,
    /// `apiVersion` of the patched objects, as spelled literally in the template.
    pub api_version: String,
    /// `kind` of the patched objects.
    pub kind: String,
    /// Where the template starts in the rule file.
    pub source: SourceLocation,
    /// Whether the patched kind is namespaced (resolved with the rule set's kinds).
    pub namespaced: bool,
    /// Ids of the children it reads (`children.<id>` in its templates): it is planned once they are ready.
    pub depends_on: Vec<String>,
    pub(crate) target: PatchTarget,
    pub(crate) template: CompiledTemplate,
}

/// How a patch selects its objects, compiled.
#[derive(Clone, Debug)]
pub(crate) enum PatchTarget {
    /// One object by (rendered) name.
    Name(CompiledTemplate),
    /// Every object whose labels match: `matchLabels` values rendered, `matchExpressions` as written.
    Selector {
        match_labels: Vec<(String, CompiledTemplate)>,
        selector: crate::common::LabelSelector,
    },
}

/// What a lookup reads, compiled.
#[derive(Clone, Debug)]
pub(crate) enum LookupTarget {
    /// One object by name (`name`, `namespace`: templates over the parent).
    Named {
        name: CompiledTemplate,
        namespace: Option<CompiledTemplate>,
    },
    /// The objects a label selector matches.
    Selected(Selection),
}

/// A selector lookup as it runs: everything in it is the rule author's (literal), nothing comes from the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The objects' labels must match.
    pub selector: LabelSelector,
    /// Where the objects are.
    pub namespace: SelectionNamespace,
    /// Past this many objects for one parent, rendering fails.
    pub max_items: usize,
}

/// The namespaces a selector lookup reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectionNamespace {
    /// The parent's namespace (the default).
    Parent,
    /// This namespace, spelled out by the rule (`namespace`).
    Literal(String),
    /// Every namespace (`allNamespaces: true`).
    All,
}

impl ResolvedLookup {
    /// The selector lookup's selection (`None`: a lookup by name).
    pub fn selection(&self) -> Option<&Selection> {
        match &self.target {
            LookupTarget::Selected(selection) => Some(selection),
            LookupTarget::Named { .. } => None,
        }
    }

    /// Whether the lookup's kind is namespaced.
    pub fn namespaced(&self) -> bool {
        self.namespaced
    }
}

/// One projected status field.
#[derive(Clone, Debug)]
pub struct StatusField {
    /// The field of the parent's status.
    pub name: String,
    pub(crate) value: StatusSource,
}

/// Where a status field's value comes from, compiled.
#[derive(Clone, Debug)]
pub(crate) enum StatusSource {
    /// A JSONPath over the status scope.
    Path(CompiledPath),
    /// The rule's own literal.
    Literal(Value),
    /// A template over the status scope, its text typed as a scalar.
    Template(CompiledTemplate, StatusType),
    /// A JSONPath over the status scope whose value is always a list.
    List(CompiledPath),
}

impl StatusField {
    /// The path or template text as written (empty for a literal): what warnings read.
    pub fn source(&self) -> &str {
        match &self.value {
            StatusSource::Path(path) | StatusSource::List(path) => path.source(),
            StatusSource::Template(template, _) => template.source(),
            StatusSource::Literal(_) => "",
        }
    }
}
