//! Handlebars' built-in helpers (`eq`, `and`, `if`, …) on a missing field, told as every other helper tells it.

/// Built-in helpers that fail with "param at index N required but not found" when a field they are given is
/// missing (strict mode); the pure helpers report a missing field themselves.
const BUILT_INS: &[&str] = &[
    "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not", "if", "unless", "with", "each", "lookup",
];

/// The field the built-in `helper` was given as its argument `index` in `source`'s `line` (1-based): the
/// argument of its first call on that line that has one there and names a field (not a literal). `None`
/// when the call passes fewer arguments (an arity mistake, not a missing field).
pub(super) fn missing_argument(source: &str, line: usize, helper: &str, index: usize) -> Option<String> {
    if !BUILT_INS.contains(&helper) {
        return None;
    }
    let text = source.lines().nth(line.checked_sub(1)?)?;
    let mut rest = text;
    while let Some(at) = rest.find(helper) {
        let before = rest[..at].chars().last();
        let after = &rest[at + helper.len()..];
        rest = after;
        if !matches!(before, Some('{' | '(' | '#')) || !after.starts_with(char::is_whitespace) {
            continue;
        }
        let argument = arguments(after).into_iter().nth(index);
        if let Some(argument) = argument.filter(|a| names_a_field(a)) {
            return Some(argument);
        }
    }
    None
}

/// The arguments of a call, up to its closing `)` or `}}`: words, quoted strings and parenthesised
/// subexpressions each one argument.
fn arguments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(open), _) => {
                current.push(c);
                if c == open {
                    quote = None;
                }
                continue;
            }
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')' | '}') if depth == 0 => break,
            (None, ')') => depth -= 1,
            (None, c) if c.is_whitespace() && depth == 0 => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Whether an argument is a field path rather than a literal, a subexpression or a hash argument.
fn names_a_field(argument: &str) -> bool {
    let literal = argument.starts_with(['"', '\'', '('])
        || argument.parse::<f64>().is_ok()
        || matches!(argument, "true" | "false" | "null")
        || argument.contains('=');
    !literal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_is_found_in_blocks_subexpressions_and_plain_calls() {
        let source = "a: {{#if (eq spec.tier \"gold\")}}x{{/if}}\nb: {{and spec.on (not spec.off)}}";
        assert_eq!(missing_argument(source, 1, "eq", 0).as_deref(), Some("spec.tier"));
        assert_eq!(missing_argument(source, 2, "and", 0).as_deref(), Some("spec.on"));
        assert_eq!(missing_argument(source, 2, "not", 0).as_deref(), Some("spec.off"));
        assert_eq!(missing_argument(source, 1, "eq", 1), None, "a literal is never missing");
        assert_eq!(missing_argument("{{eq a}}", 1, "eq", 1), None, "too few arguments");
        assert_eq!(missing_argument("{{json a}}", 1, "json", 0), None, "not a built-in");
    }
}
