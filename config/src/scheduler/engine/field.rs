//! Field paths and field errors in the shape of apimachinery's `field.Error`, for located diagnostics.

use std::fmt;

use serde_json::Value;

/// One step of a path into a document: a mapping key or a sequence index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathSegment {
    /// A mapping key (field name, or a map key such as a label key).
    Key(String),
    /// A position in a sequence.
    Index(usize),
}

/// A path from the root of an object to a field, e.g. `scoringStrategy.resources[0].weight`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(pub Vec<PathSegment>);

impl FieldPath {
    /// The root.
    pub fn root() -> FieldPath {
        FieldPath(Vec::new())
    }

    /// This path extended by a key.
    pub fn key(&self, key: &str) -> FieldPath {
        let mut segments = self.0.clone();
        segments.push(PathSegment::Key(key.to_string()));
        FieldPath(segments)
    }

    /// This path extended by an index.
    pub fn index(&self, index: usize) -> FieldPath {
        let mut segments = self.0.clone();
        segments.push(PathSegment::Index(index));
        FieldPath(segments)
    }

    /// The segments, root first.
    pub fn segments(&self) -> &[PathSegment] {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                PathSegment::Key(key) if i == 0 => f.write_str(key)?,
                PathSegment::Key(key) => write!(f, ".{key}")?,
                PathSegment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// The kinds of `field.Error` the scheduler's validation produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Invalid value`.
    Invalid,
    /// `Required value`.
    Required,
    /// `Unsupported value`.
    NotSupported,
    /// `Duplicate value`.
    Duplicate,
    /// `Forbidden`.
    Forbidden,
}

impl FieldErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Forbidden => "Forbidden",
        }
    }
}

/// A validation error at a field, worded like kube-scheduler's (`path: Invalid value: 0: detail`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct FieldError {
    /// Where, from the root of the validated object.
    pub path: FieldPath,
    /// What kind of problem.
    pub kind: FieldErrorKind,
    /// The offending value, when the message shows it.
    pub value: Option<Value>,
    /// Explanation.
    pub detail: String,
}

impl FieldError {
    /// `Invalid value`.
    pub fn invalid(path: FieldPath, value: impl Into<Value>, detail: impl Into<String>) -> FieldError {
        FieldError {
            path,
            kind: FieldErrorKind::Invalid,
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// `Required value`.
    pub fn required(path: FieldPath, detail: impl Into<String>) -> FieldError {
        FieldError {
            path,
            kind: FieldErrorKind::Required,
            value: None,
            detail: detail.into(),
        }
    }

    /// `Unsupported value` listing the supported ones.
    pub(crate) fn not_supported(path: FieldPath, value: impl Into<Value>, supported: &[&str]) -> FieldError {
        let quoted: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
        FieldError {
            path,
            kind: FieldErrorKind::NotSupported,
            value: Some(value.into()),
            detail: format!("supported values: {}", quoted.join(", ")),
        }
    }

    /// `Duplicate value`.
    pub(crate) fn duplicate(path: FieldPath, value: impl Into<Value>) -> FieldError {
        FieldError {
            path,
            kind: FieldErrorKind::Duplicate,
            value: Some(value.into()),
            detail: String::new(),
        }
    }

    /// `Forbidden`.
    pub(crate) fn forbidden(path: FieldPath, detail: impl Into<String>) -> FieldError {
        FieldError {
            path,
            kind: FieldErrorKind::Forbidden,
            value: None,
            detail: detail.into(),
        }
    }

    /// The same error with `prefix` put in front of its path.
    pub fn under(mut self, prefix: &FieldPath) -> FieldError {
        let mut segments = prefix.0.clone();
        segments.append(&mut self.path.0);
        self.path = FieldPath(segments);
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind.as_str())?;
        if let Some(value) = &self.value {
            write!(f, ": {value}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}
