//! Compiling a template at load time: the sandbox's checks (size, nesting, reserved characters, partials,
//! decorators, known helpers and their arity), every problem located, and the rewrites rendering relies on.

use std::sync::Arc;

use handlebars::Template;
use handlebars::template::{Parameter, TemplateElement};
use serde_json::Value;

use crate::diagnostics::did_you_mean;

use super::*;

/// Compiles a template, checking what the sandbox allows: syntax, no partials (a rule file's own aside, see
/// [`compile_template_with`]) or inline partials, only known helpers with the right number of arguments. Every
/// problem is reported, positioned in the template.
pub fn compile_template(source: &str) -> Result<CompiledTemplate, Vec<TemplateProblem>> {
    compile_template_with(source, &Partials::default())
}

/// [`compile_template`] for a template of a rule file that declares `partials`: `{{> name}}` includes one of them
/// (an unknown name is a problem at the use), and the nesting a partial adds counts against
/// [`MAX_TEMPLATE_NESTING`].
pub fn compile_template_with(source: &str, partials: &Partials) -> Result<CompiledTemplate, Vec<TemplateProblem>> {
    let checked = compile_checked(source, &|name| partials.declares(name))?;
    let mut problems = Vec::new();
    for used in &checked.uses {
        // A declared partial that does not compile is reported where it is declared; nothing more to say here.
        let Some(nesting) = partials.nesting(&used.name) else {
            continue;
        };
        if used.depth + nesting > MAX_TEMPLATE_NESTING {
            problems.push(TemplateProblem {
                line: used.line,
                column: used.column,
                message: format!(
                    "with the partial `{}`, the template nests blocks, subexpressions and partials more than \
                     {MAX_TEMPLATE_NESTING} deep",
                    used.name
                ),
            });
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let used = partials.used_from(checked.uses.iter().map(|used| used.name.as_str()));
    Ok(CompiledTemplate {
        compiled: Arc::new(checked.template),
        raw_outputs: checked.raw_outputs,
        source: Arc::from(source),
        partials: used,
    })
}

/// A template past the sandbox's checks and rewritten for rendering, with the partials it includes.
pub(super) struct Checked {
    pub(super) template: Template,
    pub(super) raw_outputs: Vec<(usize, usize)>,
    pub(super) uses: Vec<PartialUse>,
    /// The deepest nesting of blocks and subexpressions in the template itself.
    pub(super) depth: usize,
}

/// One `{{> name}}` of a template: where, and how deep (the blocks and subexpressions around it, plus one).
#[derive(Clone, Debug)]
pub(super) struct PartialUse {
    pub(super) name: String,
    pub(super) line: usize,
    pub(super) column: usize,
    pub(super) depth: usize,
}

/// The sandbox's checks and rewrites; `declared` tells which partial names `{{> name}}` may include.
pub(super) fn compile_checked(source: &str, declared: &dyn Fn(&str) -> bool) -> Result<Checked, Vec<TemplateProblem>> {
    if source.len() > MAX_TEMPLATE_BYTES {
        return Err(vec![TemplateProblem {
            line: 1,
            column: 1,
            message: format!(
                "template is {} bytes; at most {MAX_TEMPLATE_BYTES} are allowed",
                source.len()
            ),
        }]);
    }
    if let Some((line, column)) = reserved_character_at(source) {
        return Err(vec![TemplateProblem {
            line,
            column,
            message: "templates may not contain the private-use characters U+E000 and U+E001 (Ruleplane's value \
                      placeholders)"
                .to_string(),
        }]);
    }
    if let Some((line, column)) = too_deeply_nested(source) {
        return Err(vec![TemplateProblem {
            line,
            column,
            message: format!("template nests blocks and subexpressions more than {MAX_TEMPLATE_NESTING} deep"),
        }]);
    }
    let mut template = match Template::compile(source) {
        Ok(template) => template,
        Err(error) => {
            let (line, column) = error.pos().unwrap_or((1, 1));
            let reason = error.reason().to_string();
            // The parser lists every token it could have accepted; that list helps nobody.
            let reason = match reason.split_once(": expected ") {
                Some((head, _)) if reason.len() > 100 => {
                    format!("{head} (an unclosed `{{{{#block}}}}`, a stray `{{{{` or unbalanced braces?)")
                }
                _ => reason,
            };
            return Err(vec![TemplateProblem {
                line,
                column,
                message: format!("template syntax error: {reason}"),
            }]);
        }
    };
    let mut sandbox = Sandbox {
        declared,
        problems: Vec::new(),
        uses: Vec::new(),
        depth: 0,
        deepest: 0,
    };
    sandbox.check_elements(&template, (1, 1));
    if sandbox.problems.is_empty() {
        let mut raw_outputs = Vec::new();
        rewrite_elements(&mut template, &mut raw_outputs);
        Ok(Checked {
            template,
            raw_outputs,
            uses: sandbox.uses,
            depth: sandbox.deepest,
        })
    } else {
        Err(sandbox.problems)
    }
}

/// Where `source` holds a placeholder character, if anywhere (1-based line and column).
fn reserved_character_at(source: &str) -> Option<(usize, usize)> {
    let offset = source.find([PLACEHOLDER_OPEN, PLACEHOLDER_CLOSE])?;
    Some(line_and_column(source, offset))
}

/// Where the nesting of `{{#…}}` blocks and `(…)` subexpressions first passes [`MAX_TEMPLATE_NESTING`]. Counted
/// on the text, before the parser, whose recursion follows the same nesting.
fn too_deeply_nested(source: &str) -> Option<(usize, usize)> {
    let bytes = source.as_bytes();
    let (mut blocks, mut parentheses, mut inside) = (0usize, 0usize, false);
    let mut offset = 0;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        if !inside && rest.starts_with(b"{{") {
            inside = true;
            parentheses = 0;
            let sigil = rest[2..].iter().find(|byte| !matches!(byte, b'{' | b'~'));
            match sigil {
                Some(b'#') => blocks += 1,
                Some(b'/') => blocks = blocks.saturating_sub(1),
                _ => {}
            }
            offset += 2;
        } else if inside && rest.starts_with(b"}}") {
            inside = false;
            offset += 2;
            continue;
        } else if inside && rest[0] == b'(' {
            parentheses += 1;
        } else if inside && rest[0] == b')' {
            parentheses = parentheses.saturating_sub(1);
        }
        if blocks + parentheses > MAX_TEMPLATE_NESTING {
            return Some(line_and_column(source, offset.min(bytes.len())));
        }
        offset += 1;
    }
    None
}

fn line_and_column(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |text| text.chars().count()) + 1;
    (line, column)
}

/// Makes a checked template structure-preserving: the outermost call of a node helper (`json`, `yaml`, `quote`,
/// `indent N (yaml …)`) becomes a call of [`NODE_HELPER`], and every `#each` body starts with a budget check.
fn rewrite_elements(template: &mut Template, raw_outputs: &mut Vec<(usize, usize)>) {
    for (index, element) in template.elements.iter_mut().enumerate() {
        let mapping = template.mapping.get(index).cloned();
        match element {
            TemplateElement::Expression(helper) => {
                if let Some(node) = node_call(helper) {
                    *element = TemplateElement::HtmlExpression(Box::new(node));
                }
            }
            TemplateElement::HtmlExpression(helper) => {
                let rewritten = node_call(helper).unwrap_or_else(|| {
                    raw_outputs.extend(mapping.as_ref().map(|m| (m.0, m.1)));
                    raw_call(helper)
                });
                *element = TemplateElement::HtmlExpression(Box::new(rewritten));
            }
            TemplateElement::HelperBlock(helper) => {
                let is_each = matches!(&helper.name, Parameter::Name(name) if name == "each");
                let mut tick = (**helper).clone();
                tick.name = Parameter::Name(TICK_HELPER.to_string());
                tick.params.clear();
                tick.hash.clear();
                tick.block_param = None;
                tick.template = None;
                tick.inverse = None;
                tick.block = false;
                for inner in [&mut helper.template, &mut helper.inverse].into_iter().flatten() {
                    rewrite_elements(inner, raw_outputs);
                }
                // The tick gets the first mapping of the body (its own block's where the body has none), so the
                // body's elements keep theirs: error line numbers come from this list, by position.
                if is_each
                    && let Some(body) = &mut helper.template
                    && let Some(at) = body.mapping.first().cloned().or(mapping)
                {
                    body.elements.insert(0, TemplateElement::HtmlExpression(Box::new(tick)));
                    body.mapping.insert(0, at);
                }
            }
            _ => {}
        }
    }
}

/// A raw `{{{…}}}` expression as a call of [`RAW_HELPER`] on the same value: raw text as written, except that
/// it can never carry a placeholder character (a raw value could otherwise forge another value's placeholder).
fn raw_call(helper: &handlebars::template::HelperTemplate) -> handlebars::template::HelperTemplate {
    let value = if helper.params.is_empty() && helper.hash.is_empty() {
        match &helper.name {
            Parameter::Name(name) => handlebars::Path::parse(name)
                .map(Parameter::Path)
                .unwrap_or_else(|_| helper.name.clone()),
            other => other.clone(),
        }
    } else {
        Parameter::Subexpression(handlebars::template::Subexpression::new(
            helper.name.clone(),
            helper.params.clone(),
            helper.hash.clone(),
        ))
    };
    let mut raw = helper.clone();
    raw.name = Parameter::Name(RAW_HELPER.to_string());
    raw.params = vec![value];
    raw.hash.clear();
    raw
}

/// The node-helper call an expression is, rewritten to [`NODE_HELPER`] with the helper's name first.
fn node_call(helper: &handlebars::template::HelperTemplate) -> Option<handlebars::template::HelperTemplate> {
    let Parameter::Name(name) = &helper.name else {
        return None;
    };
    if !helper.hash.is_empty() || helper.block {
        return None;
    }
    let params = match (name.as_str(), helper.params.as_slice()) {
        (name, [value]) if NODE_HELPERS.contains(&name) => {
            vec![Parameter::Literal(Value::String(name.to_string())), value.clone()]
        }
        ("indent", [width, Parameter::Subexpression(inner)]) => match inner.as_element() {
            TemplateElement::Expression(inner)
                if matches!(&inner.name, Parameter::Name(name) if ["yaml", "json", "toYaml", "toJson"].contains(&name.as_str()))
                    && inner.hash.is_empty()
                    && inner.params.len() == 1 =>
            {
                vec![
                    Parameter::Literal(Value::String("indent".to_string())),
                    width.clone(),
                    inner.params[0].clone(),
                ]
            }
            _ => return None,
        },
        _ => return None,
    };
    let mut node = helper.clone();
    node.name = Parameter::Name(NODE_HELPER.to_string());
    node.params = params;
    Some(node)
}

/// The problems [`compile_template`] finds (empty when the template is fine).
pub fn check_template(source: &str) -> Vec<TemplateProblem> {
    compile_template(source).err().unwrap_or_default()
}

/// The sandbox's checks over one template: the problems found, the partials included, the nesting reached.
struct Sandbox<'a> {
    declared: &'a dyn Fn(&str) -> bool,
    problems: Vec<TemplateProblem>,
    uses: Vec<PartialUse>,
    /// Blocks and subexpressions around the element being checked.
    depth: usize,
    deepest: usize,
}

impl Sandbox<'_> {
    fn check_elements(&mut self, template: &Template, outer: (usize, usize)) {
        for (index, element) in template.elements.iter().enumerate() {
            let at = template.mapping.get(index).map(|m| (m.0, m.1)).unwrap_or(outer);
            self.check_element(element, at);
        }
    }

    /// Checks what is inside a block or subexpression, one level deeper.
    fn nested(&mut self, check: impl FnOnce(&mut Self)) {
        self.depth += 1;
        self.deepest = self.deepest.max(self.depth);
        check(self);
        self.depth -= 1;
    }

    fn check_element(&mut self, element: &TemplateElement, at: (usize, usize)) {
        let (line, column) = at;
        let mut found = Vec::new();
        let mut problem = |message: String| found.push(TemplateProblem { line, column, message });
        match element {
            TemplateElement::PartialExpression(partial) => {
                let plain = partial.params.is_empty() && partial.hash.is_empty();
                let name = match &partial.name {
                    Parameter::Name(name) if plain => Some(name),
                    Parameter::Path(handlebars::Path::Relative((_, name))) if plain => Some(name),
                    _ => None,
                };
                match name {
                    None => problem(
                        "a partial is included as `{{> name}}`: by its name alone, without arguments, a context or \
                         a computed name"
                            .to_string(),
                    ),
                    Some(name) if (self.declared)(name) => self.uses.push(PartialUse {
                        name: name.clone(),
                        line,
                        column,
                        depth: self.depth + 1,
                    }),
                    Some(name) => problem(format!(
                        "unknown partial `{name}`: partials are declared in the rule file's `kind: TemplatePartials` \
                         document"
                    )),
                }
            }
            TemplateElement::PartialBlock(_) => problem(
                "partial blocks (`{{#> name}}…{{/name}}`) are not allowed; include a partial as `{{> name}}`"
                    .to_string(),
            ),
            TemplateElement::DecoratorExpression(_) | TemplateElement::DecoratorBlock(_) => {
                problem("decorators and inline partials (`{{*…}}`, `{{#*inline}}`) are not allowed".to_string())
            }
            TemplateElement::Expression(helper)
            | TemplateElement::HtmlExpression(helper)
            | TemplateElement::HelperBlock(helper) => {
                let is_call = helper.block || !helper.params.is_empty() || !helper.hash.is_empty();
                // A name written alone (`{{min}}`) parses as a path; Handlebars still calls a helper of that name.
                let pure = match &helper.name {
                    Parameter::Name(name) => PureHelper::ALL.iter().find(|h| h.name == name.as_str()),
                    Parameter::Path(handlebars::Path::Relative((_, raw))) => {
                        PureHelper::ALL.iter().find(|h| h.name == raw)
                    }
                    _ => None,
                };
                if is_call && let Parameter::Name(name) = &helper.name {
                    check_helper_name(name, &mut problem);
                    // Arity is known statically: report it at load, not at the first render in the cluster.
                    if let Some(message) = pure.and_then(|pure| pure.arity_problem(helper.params.len())) {
                        problem(message);
                    }
                    if helper.block
                        && let Some(pure) = pure
                    {
                        problem(format!(
                            "`{{{{#{name}}}}}` is not a block helper; call it as `{{{{{name} …}}}}` or in a subexpression",
                            name = pure.name
                        ));
                    }
                } else if let Some(pure) = pure {
                    // Handlebars calls a helper whose name is written alone, even where a field of that name was
                    // meant (`{{#each spec.ranges}}{{min}}{{/each}}`): say so at load instead of failing at the
                    // first render.
                    problem(format!(
                        "`{{{{{name}}}}}` calls the helper `{name}` with no arguments; to read a field named `{name}`, \
                         write `{{{{this.{name}}}}}`",
                        name = pure.name
                    ));
                }
                self.problems.append(&mut found);
                for parameter in helper.params.iter().chain(helper.hash.values()) {
                    if let Parameter::Subexpression(sub) = parameter {
                        self.nested(|sandbox| sandbox.check_element(&sub.element, at));
                    }
                }
                let inner: Vec<&Template> = [&helper.template, &helper.inverse].into_iter().flatten().collect();
                if !inner.is_empty() {
                    self.nested(|sandbox| {
                        for inner in inner {
                            sandbox.check_elements(inner, at);
                        }
                    });
                }
            }
            TemplateElement::RawString(_) | TemplateElement::Comment(_) => {}
            // A construct added by a future Handlebars version is rejected until it has been vetted for the sandbox.
            _ => problem("unsupported template construct".to_string()),
        }
        self.problems.append(&mut found);
    }
}

fn check_helper_name(name: &str, problem: &mut impl FnMut(String)) {
    if HELPERS.contains(&name) || BUILTIN_HELPERS.contains(&name) {
        return;
    }
    let suggestion = did_you_mean(name, HELPERS.iter().chain(BUILTIN_HELPERS).copied());
    problem(format!("unknown helper `{name}`{suggestion}"));
}
