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
    /// Short machine-readable category, e.g. `unknown-field`, `syntax`, `template`.
    pub code: &'static str,
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
    pub(crate) fn error(&mut self, pos: Pos, code: &'static str, message: impl Into<String>) {
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
