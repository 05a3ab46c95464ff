//! How the apiserver serves a kind (plural, scope, status subresource) and where Ruleplane learned it.

use serde::Serialize;

/// A kind objects can have, with how the API serves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindInfo {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Resource (plural) name.
    pub plural: String,
    /// Whether objects are namespaced.
    pub namespaced: bool,
    /// Where its plural and scope come from.
    pub origin: KindOrigin,
    /// Whether the declaring ResourceDefinition gives this version a status subresource (`false` for built-in
    /// kinds: their status belongs to their own controllers and is never written).
    pub status_subresource: bool,
}

/// Where the loader (or, at run time, the worker) learned how a kind is served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "from")]
pub enum KindOrigin {
    /// A Kubernetes kind ([`crate::BUILTIN_KINDS`]).
    BuiltIn,
    /// Declared by this ResourceDefinition rule of the set.
    Declared { rule: String },
    /// Installed by another tool: its CRD manifest (`--crds`, the file and line) offline, the apiserver at run
    /// time. Ruleplane reads and writes its objects but never its CRD.
    Installed { source: String },
}

impl KindInfo {
    /// The ResourceDefinition rule declaring the kind; `None` for built-in kinds and kinds other tools install.
    pub fn declared_by(&self) -> Option<&str> {
        match &self.origin {
            KindOrigin::Declared { rule } => Some(rule),
            _ => None,
        }
    }

    /// Whether the kind is a built-in Kubernetes kind.
    pub fn is_builtin(&self) -> bool {
        self.origin == KindOrigin::BuiltIn
    }
}
