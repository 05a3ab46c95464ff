//! A Reconciler rule as it runs: the document plus every template and JSONPath compiled at load time.

use std::ops::Deref;

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::types::{Lookup, ReconcilerRule};
use crate::diagnostics::SourceLocation;
use crate::jsonpath::{CompiledPath, is_truthy};
use crate::rule_set::KindInfo;
use crate::template::CompiledTemplate;

/// A loaded Reconciler. Only the loader makes one, after every check passed, so rendering and the worker
/// use the compiled parts without checking anything again. Derefs to the rule document as written.
#[derive(Clone, Debug)]
pub struct Reconciler {
    pub(crate) rule: ReconcilerRule,
    pub(crate) children: Vec<Child>,
    pub(crate) finalize_children: Vec<Child>,
    pub(crate) lookups: Vec<ResolvedLookup>,
    pub(crate) status: Vec<StatusField>,
    pub(crate) kinds: ReconcilerKinds,
    /// Indexes into `children` such that every child comes after the children it reads.
    pub(crate) render_order: Vec<usize>,
}

/// How the apiserver serves the kinds a Reconciler reads and writes, resolved by the loader from the rule set's
/// ResourceDefinitions and the built-in kinds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReconcilerKinds {
    /// The parents' kind.
    pub parent: Option<KindInfo>,
    /// The kinds of `children` and `finalize.children` (each once per child).
    pub children: Vec<KindInfo>,
    /// The kinds of `lookups`.
    pub lookups: Vec<KindInfo>,
}

impl ReconcilerKinds {
    /// The kinds declared by a ResourceDefinition of the rule set (parent, children, lookups; a kind may come
    /// more than once).
    pub fn declared(&self) -> impl Iterator<Item = &KindInfo> {
        self.parent
            .iter()
            .chain(&self.children)
            .chain(&self.lookups)
            .filter(|kind| kind.declared_by.is_some())
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
}

impl Deref for Reconciler {
    type Target = ReconcilerRule;
    fn deref(&self) -> &ReconcilerRule {
        &self.rule
    }
}

/// Two loaded rules are the same when their documents are (compiled parts follow from the document).
impl PartialEq for Reconciler {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule
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
}

impl Child {
    /// Whether an observed child is ready: its `readyWhen` selects a truthy value (no `readyWhen`: it exists).
    pub fn is_ready(&self, observed: &Value) -> bool {
        match &self.ready_when {
            None => true,
            Some(path) => is_truthy(path.select_one(observed).as_ref()),
        }
    }
}

/// One lookup with its compiled name/namespace templates and projection.
#[derive(Clone, Debug)]
pub struct ResolvedLookup {
    /// The name templates use (`lookups.<name>`).
    pub name: String,
    /// The lookup as written.
    pub spec: Lookup,
    pub(crate) name_template: CompiledTemplate,
    pub(crate) namespace_template: Option<CompiledTemplate>,
    pub(crate) json_path: Option<CompiledPath>,
    /// Whether the lookup's kind is namespaced (resolved with the rule set's kinds; a cluster-scoped object is
    /// read without a namespace).
    pub(crate) namespaced: bool,
}

/// One projected status field.
#[derive(Clone, Debug)]
pub struct StatusField {
    /// The field of the parent's status.
    pub name: String,
    pub(crate) path: CompiledPath,
}
