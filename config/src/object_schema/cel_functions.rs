//! The CEL environment rules are evaluated in offline (the `cel` crate's standard functions plus kube-cel's
//! Kubernetes libraries), and which constructs of a rule it cannot evaluate: those rules are skipped, never failed.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use kube_cel::KubeCelExt as _;
use kube_cel::cel::common::ast::{EntryExpr, Expr};
use kube_cel::cel::{Context, ExecutionError, IdedExpr, Program};

thread_local! {
    /// Built once per thread: registering the libraries allocates a few hundred functions.
    static ENVIRONMENT: Context<'static> = Context::default().with_all();
    /// Whether a function name resolves in [`ENVIRONMENT`], as probed (see [`available`]).
    static PROBED: RefCell<HashMap<String, bool>> = RefCell::new(HashMap::new());
}

/// Runs `f` with the shared environment (every function, no variables).
pub(super) fn with_environment<R>(f: impl FnOnce(&Context<'_>) -> R) -> R {
    ENVIRONMENT.with(f)
}

/// The first thing in `expression` the environment cannot evaluate, named as a rule author would look for it (a
/// function name, or the construct); `None` when every function and construct is available.
pub(super) fn unsupported(expression: &IdedExpr) -> Option<String> {
    let mut bound = HashSet::from(["self", "oldSelf", "apiVersion", "apiGroup", "kind"]);
    collect_bound(expression, &mut bound);
    find_unsupported(expression, &bound)
}

/// The iteration and accumulator variables of every comprehension (a macro's `x` in `all(x, …)`).
fn collect_bound<'a>(expression: &'a IdedExpr, bound: &mut HashSet<&'a str>) {
    for_each_child(expression, &mut |child| collect_bound(child, bound));
    if let Expr::Comprehension(comprehension) = &expression.expr {
        bound.insert(&comprehension.iter_var);
        bound.insert(&comprehension.accu_var);
    }
}

fn find_unsupported(expression: &IdedExpr, bound: &HashSet<&str>) -> Option<String> {
    // A call's receiver first (`authorizer.group('apps').check()` names `authorizer.group`), then the call
    // (`cel.bind(n, …, n.size())` names `cel.bind`), then its arguments.
    if let Expr::Call(call) = &expression.expr
        && let Some(target) = &call.target
        && let Some(found) = find_unsupported(target, bound)
    {
        return Some(found);
    }
    match &expression.expr {
        Expr::Struct(literal) => return Some(format!("message construction `{}{{…}}`", literal.type_name)),
        Expr::Unspecified => return Some("an empty expression".to_owned()),
        Expr::Comprehension(comprehension) if comprehension.iter_var2.is_some() => {
            return Some("a two-variable comprehension".to_owned());
        }
        Expr::Call(call) if !is_operator(&call.func_name) => {
            let qualified = match call.target.as_deref().map(|t| &t.expr) {
                Some(Expr::Ident(prefix)) => Some((prefix.as_str(), format!("{prefix}.{}", call.func_name))),
                _ => None,
            };
            let found = match &qualified {
                // `sets.contains(…)`: the namespaced function, or a method of a variable (`self.indexOf(…)`).
                Some((prefix, name)) => {
                    available(name, true) || (bound.contains(prefix) && available(&call.func_name, false))
                }
                None => available(&call.func_name, false),
            };
            if !found {
                return Some(match qualified {
                    Some((prefix, name)) if !bound.contains(prefix) => format!("`{name}`"),
                    _ => format!("`{}`", call.func_name),
                });
            }
        }
        _ => {}
    }
    let mut found = None;
    for_each_child(expression, &mut |child| {
        if found.is_none() {
            found = find_unsupported(child, bound);
        }
    });
    found
}

/// Operators and the interpreter's own calls (`_+_`, `!_`, `-_`, `@in`, `_[_]`, `_?_:_`): always there.
fn is_operator(name: &str) -> bool {
    name.starts_with(['_', '!', '-', '@'])
}

/// Whether `name` resolves as a function: the `cel` crate keeps its registry private, so a call with no
/// argument is made once per name and the answer kept. An unknown name fails as an undeclared reference; a
/// known one fails on its arguments (or, for a method, on the undeclared receiver). `qualified`: `name` is
/// `prefix.function`, which the interpreter resolves first as a whole.
fn available(name: &str, qualified: bool) -> bool {
    if let Some(known) = PROBED.with(|p| p.borrow().get(name).copied()) {
        return known;
    }
    let found = match Program::compile(&format!("{name}()")) {
        Err(_) => false,
        Ok(program) => match with_environment(|env| program.execute(env)) {
            // The whole name is registered only if the call did not fall back to the last segment's plain
            // function (then the receiver is what is undeclared) or to nothing.
            Err(ExecutionError::UndeclaredReference(_)) if qualified => false,
            Err(ExecutionError::UndeclaredReference(missing)) => missing.as_str() != name,
            _ => true,
        },
    };
    PROBED.with(|p| p.borrow_mut().insert(name.to_owned(), found));
    found
}

/// Calls `f` on each direct sub-expression.
pub(super) fn for_each_child<'a>(expression: &'a IdedExpr, f: &mut dyn FnMut(&'a IdedExpr)) {
    match &expression.expr {
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                f(target);
            }
            call.args.iter().for_each(&mut *f);
        }
        Expr::Comprehension(c) => {
            for child in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                f(child);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(&mut *f),
        Expr::Map(map) => {
            for entry in &map.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(entry) => {
                        f(&entry.key);
                        f(&entry.value);
                    }
                    EntryExpr::StructField(field) => f(&field.value),
                }
            }
        }
        Expr::Struct(literal) => {
            for entry in &literal.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(entry) => {
                        f(&entry.key);
                        f(&entry.value);
                    }
                    EntryExpr::StructField(field) => f(&field.value),
                }
            }
        }
        Expr::Select(select) => f(&select.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// How deep `expression` nests, counted without recursion (the interpreter recurses once per level, so this is
/// checked before anything walks the tree recursively).
pub(super) fn depth(expression: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(expression, 1)];
    while let Some((node, level)) = pending.pop() {
        deepest = deepest.max(level);
        for_each_child(node, &mut |child| pending.push((child, level + 1)));
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing(rule: &str) -> Option<String> {
        unsupported(Program::compile(rule).expect("parses").expression())
    }

    #[test]
    fn the_kubernetes_libraries_in_common_use_are_available() {
        for rule in [
            "self.minReplicas <= self.maxReplicas",
            "self.items.all(i, i.name.size() > 0) && self.items.exists(i, has(i.port))",
            "self.items.map(i, i.name).filter(n, n.startsWith('a')).size() < 3",
            "quantity(self.memory).isLessThan(quantity('1Gi'))",
            "self.ports.isSorted() && self.names.indexOf('x') < 0",
            "self.name.find('[a-z]+') == 'abc' && self.name.matches('^[a-z]+$')",
            "self.name.lowerAscii().split('-').size() > 0",
            "sets.contains(self.a, self.b)",
            "isIP(self.address) && cidr(self.net).containsIP(self.address)",
            "!format.dns1123Label().validate(self.name).hasValue()",
            "math.abs(self.offset) < 10",
            "isSemver(self.version)",
        ] {
            assert_eq!(missing(rule), None, "{rule}");
        }
    }

    #[test]
    fn what_the_environment_lacks_is_named() {
        assert_eq!(missing("isURL(self.endpoint)").as_deref(), Some("`isURL`"));
        assert_eq!(
            missing("authorizer.group('apps').check()").as_deref(),
            Some("`authorizer.group`")
        );
        assert_eq!(missing("cel.bind(x, self.a, x > 1)").as_deref(), Some("`cel.bind`"));
        assert_eq!(missing("self.l.sortBy(x, x.n).size() > 0").as_deref(), Some("`sortBy`"));
        assert_eq!(missing("self.l.noSuchThing()").as_deref(), Some("`noSuchThing`"));
    }

    #[test]
    fn depth_counts_nesting_levels() {
        let program = Program::compile("((1 + 2) * 3) > 0").expect("parses");
        assert_eq!(depth(program.expression()), 4);
    }
}
