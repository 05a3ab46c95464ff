//! Located, compiler-style diagnostics: every problem names file:line:column and shows the offending line.

use std::fmt;

use serde::Serialize;

/// Where a rule (or any value inside it) was written: file name plus 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Default)]
pub struct SourceLocation {
    /// File name as given to the loader (a path, or a label such as `<stdin>`).
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column number (in characters).
    pub column: usize,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One problem found while loading rules. Serializes with camelCase names (`sourceLine`) like the rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// File the problem is in.
    pub file: String,
    /// 1-based line of the problem.
    pub line: usize,
    /// 1-based column of the problem.
    pub column: usize,
    /// Human-readable description (lower-case start, no trailing period).
    pub message: String,
    /// The text of the offending line, when the file text is known.
    pub source_line: Option<String>,
    /// Machine-readable category; its string form (`unknown-field`, `syntax`, …) is a stable contract.
    pub code: DiagnosticCode,
}

/// What kind of problem a diagnostic reports. The string forms appear in `validate --output json` and in
/// the text output (`error[code]`), so they are a public contract: never rename one; add new ones instead.
/// `docs/rule-language.md` lists them all (a test keeps that list complete).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DiagnosticCode {
    /// A rule file or directory cannot be read, or is not UTF-8.
    Io,
    /// The file is not valid YAML.
    Syntax,
    /// A document is not a mapping, or cannot be read as a rule.
    Structure,
    /// `kind` is not a rule kind, or a referenced Kubernetes kind is unknown.
    UnknownKind,
    /// A field the rule language does not have.
    UnknownField,
    /// A required field is absent.
    MissingField,
    /// A value has the wrong type.
    Type,
    /// A value is not allowed here.
    Value,
    /// A number is out of range.
    Range,
    /// A name (rule, version, kind, plural, lookup) is not valid.
    Name,
    /// Something that must be unique is defined twice.
    Duplicate,
    /// A scheduler plugin name is unknown or in the wrong list.
    UnknownPlugin,
    /// The storage version of a ResourceDefinition is missing, ambiguous or not served.
    StorageVersion,
    /// An OpenAPI schema breaks a rule of structural schemas, or a rendered child breaks its kind's schema.
    Schema,
    /// A JSONPath expression does not compile.
    Jsonpath,
    /// A template does not compile, or is not allowed in the sandbox.
    Template,
    /// A reference to a child or lookup that does not exist, or a dependency cycle.
    Reference,
    /// A `status` block where the parent's status belongs to another controller.
    Status,
}

impl DiagnosticCode {
    /// Every code, in documentation order.
    pub const ALL: [DiagnosticCode; 18] = [
        DiagnosticCode::Io,
        DiagnosticCode::Syntax,
        DiagnosticCode::Structure,
        DiagnosticCode::UnknownKind,
        DiagnosticCode::UnknownField,
        DiagnosticCode::MissingField,
        DiagnosticCode::Type,
        DiagnosticCode::Value,
        DiagnosticCode::Range,
        DiagnosticCode::Name,
        DiagnosticCode::Duplicate,
        DiagnosticCode::UnknownPlugin,
        DiagnosticCode::StorageVersion,
        DiagnosticCode::Schema,
        DiagnosticCode::Jsonpath,
        DiagnosticCode::Template,
        DiagnosticCode::Reference,
        DiagnosticCode::Status,
    ];

    /// The stable string form.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticCode::Io => "io",
            DiagnosticCode::Syntax => "syntax",
            DiagnosticCode::Structure => "structure",
            DiagnosticCode::UnknownKind => "unknown-kind",
            DiagnosticCode::UnknownField => "unknown-field",
            DiagnosticCode::MissingField => "missing-field",
            DiagnosticCode::Type => "type",
            DiagnosticCode::Value => "value",
            DiagnosticCode::Range => "range",
            DiagnosticCode::Name => "name",
            DiagnosticCode::Duplicate => "duplicate",
            DiagnosticCode::UnknownPlugin => "unknown-plugin",
            DiagnosticCode::StorageVersion => "storage-version",
            DiagnosticCode::Schema => "schema",
            DiagnosticCode::Jsonpath => "jsonpath",
            DiagnosticCode::Template => "template",
            DiagnosticCode::Reference => "reference",
            DiagnosticCode::Status => "status",
        }
    }
}

impl fmt::Display for DiagnosticCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for DiagnosticCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Lets callers compare with the documented string form (`diagnostic.code == "io"`).
impl PartialEq<&str> for DiagnosticCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Diagnostic {
    /// Location of this diagnostic.
    pub fn location(&self) -> SourceLocation {
        SourceLocation {
            file: self.file.clone(),
            line: self.line,
            column: self.column,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error[{}]: {}",
            self.file, self.line, self.column, self.code, self.message
        )?;
        if let Some(line) = &self.source_line {
            // The caret is placed under the column, counting characters so that non-ASCII text lines up;
            // tabs are kept so the caret lines up in terminals that expand them.
            let pad: String = line
                .chars()
                .take(self.column.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            write!(f, "\n  | {line}\n  | {pad}^")?;
        }
        Ok(())
    }
}

/// All problems found in one load, in file order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(transparent)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Number of problems.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no problems.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates over the problems.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for diagnostic in &self.0 {
            writeln!(f, "{diagnostic}")?;
        }
        let count = self.0.len();
        write!(f, "{count} error{} found", if count == 1 { "" } else { "s" })
    }
}

impl std::error::Error for Diagnostics {}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// Collects diagnostics for one file, filling in the file name and the offending source line.
pub(crate) struct FileDiagnostics<'a> {
    file: &'a str,
    lines: Vec<&'a str>,
    pub(crate) found: Vec<Diagnostic>,
}

impl<'a> FileDiagnostics<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str) -> Self {
        Self {
            file,
            lines: text.lines().collect(),
            found: Vec::new(),
        }
    }

    /// Records a problem at `pos`.
    pub(crate) fn error(&mut self, pos: Pos, code: DiagnosticCode, message: impl Into<String>) {
        let source_line = pos
            .line
            .checked_sub(1)
            .and_then(|index| self.lines.get(index))
            .map(|line| line.trim_end_matches('\r').to_string());
        self.found.push(Diagnostic {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
            message: message.into(),
            source_line,
            code,
        });
    }

    pub(crate) fn location(&self, pos: Pos) -> SourceLocation {
        SourceLocation {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
        }
    }
}

/// A 1-based line/column position inside one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

impl Pos {
    pub(crate) fn new(line: usize, column: usize) -> Self {
        Self { line, column }
    }
}

/// "did you mean `x`?" suffix for the closest candidate, if any is close enough to be a likely typo:
/// a small edit distance (case-insensitive), or a candidate that starts with what was written (`Default` for
/// `DefaultProvider`).
pub(crate) fn did_you_mean<'c>(given: &str, candidates: impl IntoIterator<Item = &'c str>) -> String {
    let given_lower = given.to_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        let candidate_lower = candidate.to_lowercase();
        let mut score = strsim::normalized_damerau_levenshtein(&given_lower, &candidate_lower);
        if given_lower.len() >= 3 && candidate_lower.starts_with(&given_lower) {
            score = score.max(0.7);
        }
        if score >= 0.6 && best.is_none_or(|(best_score, _)| score > best_score) {
            best = Some((score, candidate));
        }
    }
    match best {
        Some((_, candidate)) => format!(", did you mean `{candidate}`?"),
        None => String::new(),
    }
}
