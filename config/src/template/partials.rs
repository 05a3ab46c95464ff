//! Partials a rule file declares once (`kind: TemplatePartials`): each compiled once under the sandbox's checks,
//! cycles and nesting refused at load, and handed to the renders of the templates that include them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use handlebars::Template;

use super::compile::compile_checked;
use super::{MAX_TEMPLATE_BYTES, MAX_TEMPLATE_NESTING, TemplateProblem, TemplateSpot};
use crate::diagnostics::SourceLocation;

/// Most partials one rule file may declare.
pub const MAX_PARTIALS: usize = 100;

/// The partials of one rule file, compiled (cheap to clone: shared).
#[derive(Clone, Debug, Default)]
pub struct Partials {
    /// Every declared name, compiled or not: a use of a broken partial is not reported twice.
    declared: Arc<BTreeSet<String>>,
    compiled: Arc<BTreeMap<String, Partial>>,
}

/// One compiled partial.
#[derive(Clone, Debug)]
pub(super) struct Partial {
    pub(super) template: Arc<Template>,
    source: Arc<str>,
    /// The partials it includes itself.
    uses: Vec<String>,
    /// How deep rendering it nests: its own blocks and subexpressions, and those of the partials it includes.
    nesting: usize,
    /// Where its text is written in the rule file (`None` when compiled from text alone).
    origin: Option<TextOrigin>,
}

/// Where an embedded text (a partial) is written in its file: its first line's first character at `start`, and
/// the column its later lines start at (a block scalar indents them all alike).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextOrigin {
    /// Line 1, column 1 of the text.
    pub start: SourceLocation,
    /// The file's column of column 1 on the text's later lines.
    pub later_column: usize,
}

impl TextOrigin {
    /// The file's location of `line`:`column` (1-based) of the text.
    pub fn at(&self, line: usize, column: usize) -> SourceLocation {
        let (line, column) = if line <= 1 {
            (self.start.line, self.start.column + column.saturating_sub(1))
        } else {
            (self.start.line + line - 1, self.later_column + column.saturating_sub(1))
        };
        SourceLocation {
            file: self.start.file.clone(),
            line,
            column,
        }
    }
}

/// A problem with one declared partial: its name and the problem, positioned in its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartialProblem {
    /// The partial's name.
    pub name: String,
    /// What is wrong, where in the partial's text.
    pub problem: TemplateProblem,
}

/// Two sets of partials are the same when they declare the same texts under the same names: a rule whose file's
/// partials changed is a changed rule (its worker restarts with them).
impl PartialEq for Partials {
    fn eq(&self, other: &Self) -> bool {
        self.declared == other.declared
            && self.compiled.len() == other.compiled.len()
            && self
                .compiled
                .iter()
                .zip(other.compiled.iter())
                .all(|((a, pa), (b, pb))| a == b && pa.source == pb.source)
    }
}

impl Partials {
    /// Whether the file declares a partial of this name.
    pub fn declares(&self, name: &str) -> bool {
        self.declared.contains(name)
    }

    /// How deep including `name` nests a render (`None`: not compiled).
    pub(super) fn nesting(&self, name: &str) -> Option<usize> {
        self.compiled.get(name).map(|partial| partial.nesting)
    }

    /// The compiled partials, by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &Partial)> {
        self.compiled.iter()
    }

    /// The text of the partial `name`, if compiled.
    pub(super) fn source_of(&self, name: &str) -> Option<&str> {
        self.compiled.get(name).map(|partial| &*partial.source)
    }

    /// Where in its rule file a render failed inside one of these partials (`None`: not in a partial, or one
    /// whose text has no known place).
    pub fn locate(&self, spot: &TemplateSpot) -> Option<SourceLocation> {
        let origin = self.compiled.get(spot.partial.as_deref()?)?.origin.as_ref()?;
        Some(origin.at(spot.line, spot.column))
    }

    /// The first place (by name, then line) one of these partials writes `needle`: the partial's name and where in
    /// its file (`None`: written in none, or in one whose text has no known place).
    pub fn find(&self, needle: &str) -> Option<(&str, SourceLocation)> {
        self.compiled.iter().find_map(|(name, partial)| {
            let origin = partial.origin.as_ref()?;
            let (line, column) = partial
                .source
                .lines()
                .enumerate()
                .find_map(|(line, text)| Some((line + 1, text[..text.find(needle)?].chars().count() + 1)))?;
            Some((name.as_str(), origin.at(line, column)))
        })
    }

    /// These partials with where each one's text is written in the rule file (`origin(name)`), so that a render
    /// failing inside one points there.
    pub fn located(self, origin: impl Fn(&str) -> Option<TextOrigin>) -> Partials {
        let compiled = self
            .compiled
            .iter()
            .map(|(name, partial)| {
                let mut partial = partial.clone();
                partial.origin = origin(name);
                (name.clone(), partial)
            })
            .collect();
        Partials {
            declared: self.declared,
            compiled: Arc::new(compiled),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }

    /// The texts of these partials: what scans of a template's text (which children it reads) must read too.
    pub fn sources(&self) -> impl Iterator<Item = &str> {
        self.compiled.values().map(|partial| &*partial.source)
    }

    /// The partials `names` include, with those they include in turn: what a template that uses `names` needs at
    /// render time.
    pub(super) fn used_from<'a>(&self, names: impl Iterator<Item = &'a str>) -> Partials {
        let mut wanted: Vec<String> = names.map(str::to_string).collect();
        let mut used = BTreeMap::new();
        while let Some(name) = wanted.pop() {
            if used.contains_key(&name) {
                continue;
            }
            if let Some(partial) = self.compiled.get(&name) {
                wanted.extend(partial.uses.iter().cloned());
                used.insert(name, partial.clone());
            }
        }
        Partials {
            declared: Arc::new(used.keys().cloned().collect()),
            compiled: Arc::new(used),
        }
    }
}

/// Compiles a rule file's partials (name → text). Each is checked as a template (it may include other partials of
/// the file); a partial that includes itself, directly or through others, and one nesting deeper than
/// [`MAX_TEMPLATE_NESTING`] with what it includes are problems. Returns the partials that compiled and the problems.
pub fn compile_partials(declared: &BTreeMap<String, String>) -> (Partials, Vec<PartialProblem>) {
    let mut problems = Vec::new();
    let at_start = |message: String| TemplateProblem {
        line: 1,
        column: 1,
        message,
    };
    let names: BTreeSet<String> = declared.keys().cloned().collect();
    if declared.len() > MAX_PARTIALS {
        let name = declared.keys().nth(MAX_PARTIALS).cloned().unwrap_or_default();
        problems.push(PartialProblem {
            name,
            problem: at_start(format!("a rule file may declare at most {MAX_PARTIALS} partials")),
        });
        return (Partials::default(), problems);
    }
    let total: usize = declared.values().map(String::len).sum();
    if total > MAX_TEMPLATE_BYTES {
        let name = declared.keys().next().cloned().unwrap_or_default();
        problems.push(PartialProblem {
            name,
            problem: at_start(format!(
                "the partials of a rule file are {total} bytes together; at most {MAX_TEMPLATE_BYTES} are allowed"
            )),
        });
        return (Partials::default(), problems);
    }
    // name → (template, its own depth, the partials it includes with the depth of each inclusion)
    let mut checked = BTreeMap::new();
    for (name, source) in declared {
        match compile_checked(source, &|used| names.contains(used)) {
            // Raw output is the one way data can shape a document; `validate` points at each place a rule's
            // template writes it, which it could not do inside a partial shared by many.
            Ok(partial) if !partial.raw_outputs.is_empty() => {
                problems.extend(partial.raw_outputs.iter().map(|(line, column)| {
                    PartialProblem {
                        name: name.clone(),
                        problem: TemplateProblem {
                            line: *line,
                            column: *column,
                            message: "partials may not write raw output (`{{{…}}}`): use `{{json …}}`, or write it in \
                                  the template itself"
                                .to_string(),
                        },
                    }
                }));
            }
            Ok(partial) => {
                checked.insert(name.clone(), partial);
            }
            Err(found) => problems.extend(found.into_iter().map(|problem| PartialProblem {
                name: name.clone(),
                problem,
            })),
        }
    }
    // Nesting, depth first; a partial met again while its own nesting is being worked out is a cycle.
    let mut nesting: BTreeMap<String, Option<usize>> = BTreeMap::new();
    fn visit(
        name: &str,
        checked: &BTreeMap<String, super::compile::Checked>,
        nesting: &mut BTreeMap<String, Option<usize>>,
        problems: &mut Vec<PartialProblem>,
    ) -> Option<usize> {
        match nesting.get(name) {
            Some(Some(depth)) => return Some(*depth),
            // Being visited: a cycle; reported once, by the partial that closes it.
            Some(None) => return None,
            None => {}
        }
        let partial = checked.get(name)?;
        nesting.insert(name.to_string(), None);
        let mut deepest = partial.depth;
        for used in &partial.uses {
            match visit(&used.name, checked, nesting, problems) {
                Some(depth) => deepest = deepest.max(used.depth + depth),
                None if nesting.get(&used.name) == Some(&None) => {
                    problems.push(PartialProblem {
                        name: name.to_string(),
                        problem: TemplateProblem {
                            line: used.line,
                            column: used.column,
                            message: format!(
                                "the partial `{name}` includes `{}`, which includes `{name}` again (directly or through \
                                 other partials): partials may not recurse",
                                used.name
                            ),
                        },
                    });
                    nesting.remove(name);
                    nesting.insert(name.to_string(), Some(usize::MAX / 2));
                    return None;
                }
                None => {}
            }
        }
        if deepest > MAX_TEMPLATE_NESTING {
            problems.push(PartialProblem {
                name: name.to_string(),
                problem: TemplateProblem {
                    line: 1,
                    column: 1,
                    message: format!(
                        "with the partials it includes, the partial `{name}` nests blocks, subexpressions and partials \
                         more than {MAX_TEMPLATE_NESTING} deep"
                    ),
                },
            });
        }
        nesting.insert(name.to_string(), Some(deepest));
        Some(deepest)
    }
    for name in checked.keys() {
        visit(name, &checked, &mut nesting, &mut problems);
    }
    let failed: BTreeSet<String> = problems.iter().map(|p| p.name.clone()).collect();
    let compiled = checked
        .into_iter()
        .filter(|(name, _)| !failed.contains(name))
        .map(|(name, mut partial)| {
            let depth = nesting.get(&name).copied().flatten().unwrap_or(partial.depth);
            // Handlebars names the innermost named template in a render error: a failure inside a partial then
            // tells which one.
            partial.template.name = Some(name.clone());
            let source = Arc::from(declared[&name].as_str());
            let uses = partial.uses.iter().map(|used| used.name.clone()).collect();
            (
                name,
                Partial {
                    template: Arc::new(partial.template),
                    source,
                    uses,
                    nesting: depth,
                    origin: None,
                },
            )
        })
        .collect();
    (
        Partials {
            declared: Arc::new(names),
            compiled: Arc::new(compiled),
        },
        problems,
    )
}
