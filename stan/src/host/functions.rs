//! User-defined functions (the `functions` block): a table by name, checked once (no
//! recursion, no declaration without a definition), and calls on the host. Lowering inlines
//! the same definitions at each call site (`crate::lower::functions`).

use std::collections::{BTreeMap, BTreeSet};

use super::stmt::Flow;
use super::{HostError, Interp, TypedEnv, fail};
use crate::ast::{
    Expr, ExprKind, FunctionDef, Index, Printable, Program, Span, Stmt, StmtKind, UnsizedType,
};
use crate::value::Typed;

/// Deepest nesting of user-function calls (recursion is refused, so only long chains of
/// distinct functions get here).
pub(crate) const MAX_CALL_DEPTH: usize = 256;

/// The user functions of a program, by name.
#[derive(Debug, Clone, Default)]
pub struct Functions {
    defs: BTreeMap<String, FunctionDef>,
}

/// No user functions.
pub(crate) static NO_FUNCTIONS: Functions = Functions {
    defs: BTreeMap::new(),
};

impl Functions {
    /// The definitions of `program`'s `functions` block, checked: every declared function
    /// is defined, no name is defined twice (Stan's overloading is not supported), and no
    /// function calls itself, directly or through others.
    pub fn new(program: &Program) -> Result<Functions, HostError> {
        let mut defs = BTreeMap::new();
        let mut declared: BTreeMap<String, Span> = BTreeMap::new();
        for def in program.functions.iter().flat_map(|b| &b.functions) {
            let name = &def.name.name;
            if def.body.is_none() {
                declared.entry(name.clone()).or_insert(def.name.span);
                continue;
            }
            if defs.contains_key(name) {
                return fail(
                    def.name.span,
                    format!(
                        "the function `{name}` is defined twice: overloading is not supported yet"
                    ),
                );
            }
            defs.insert(name.clone(), def.clone());
        }
        for (name, span) in declared {
            if !defs.contains_key(&name) {
                return fail(
                    span,
                    format!("the function `{name}` is declared but never defined"),
                );
            }
        }
        let functions = Functions { defs };
        functions.check_recursion()?;
        Ok(functions)
    }

    pub fn get(&self, name: &str) -> Option<&FunctionDef> {
        self.defs.get(name)
    }

    /// The user function that a call of `name` runs: `foo_lupdf` runs `foo_lpdf`.
    pub fn callee(&self, name: &str) -> Option<&FunctionDef> {
        self.get(name).or_else(|| {
            let (base, to) = if let Some(base) = name.strip_suffix("_lupdf") {
                (base, "_lpdf")
            } else {
                (name.strip_suffix("_lupmf")?, "_lpmf")
            };
            self.get(&format!("{base}{to}"))
        })
    }

    /// The user density behind `name`: `foo_lpdf` for `foo_lpdf`, `foo_lupdf` or (after `~`)
    /// `foo`, likewise `_lpmf`.
    pub fn density(&self, name: &str) -> Option<&FunctionDef> {
        let base = ["_lupdf", "_lupmf", "_lpdf", "_lpmf"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        self.get(&format!("{base}_lpdf"))
            .or_else(|| self.get(&format!("{base}_lpmf")))
    }

    /// Refuses a cycle in the call graph, at the first function of the cycle.
    fn check_recursion(&self) -> Result<(), HostError> {
        let calls: BTreeMap<&str, BTreeSet<String>> = self
            .defs
            .iter()
            .map(|(name, def)| {
                let mut called = BTreeSet::new();
                if let Some(body) = &def.body {
                    stmt_calls(body, &mut called);
                }
                called.retain(|c| self.defs.contains_key(c));
                (name.as_str(), called)
            })
            .collect();
        // Depth-first search from each function; `path` is the current chain of calls.
        fn visit<'a>(
            name: &'a str,
            calls: &'a BTreeMap<&'a str, BTreeSet<String>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
        ) -> Option<Vec<&'a str>> {
            if let Some(start) = path.iter().position(|&p| p == name) {
                let mut cycle = path[start..].to_vec();
                cycle.push(name);
                return Some(cycle);
            }
            if done.contains(name) {
                return None;
            }
            path.push(name);
            for callee in calls.get(name).into_iter().flatten() {
                if let Some(cycle) = visit(callee, calls, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            done.insert(name);
            None
        }
        let mut done = BTreeSet::new();
        for &name in calls.keys() {
            if let Some(cycle) = visit(name, &calls, &mut Vec::new(), &mut done) {
                let first = cycle[0];
                let how = if cycle.len() == 2 {
                    "calls itself".to_owned()
                } else {
                    format!("calls itself through {}", cycle.join(" -> "))
                };
                return fail(
                    self.defs[first].name.span,
                    format!("the function `{first}` {how}: recursion is not supported"),
                );
            }
        }
        Ok(())
    }
}

/// The names of the functions `stmt` calls (and of the `_lpdf`/`_lpmf` behind its `~`).
fn stmt_calls(stmt: &Stmt, out: &mut BTreeSet<String>) {
    let exprs =
        |es: &[Expr], out: &mut BTreeSet<String>| es.iter().for_each(|e| expr_calls(e, out));
    let printables = |ps: &[Printable], out: &mut BTreeSet<String>| {
        for p in ps {
            if let Printable::Expr(e) = p {
                expr_calls(e, out);
            }
        }
    };
    match &stmt.kind {
        StmtKind::Decl { ty, vars } => {
            exprs(&ty.sizes, out);
            exprs(&ty.array_dims, out);
            for v in vars {
                if let Some(init) = &v.init {
                    expr_calls(init, out);
                }
            }
        }
        StmtKind::Assign { lhs, rhs, .. } => {
            for group in &lhs.indices {
                index_calls(group, out);
            }
            expr_calls(rhs, out);
        }
        StmtKind::Tilde {
            lhs,
            distribution,
            args,
            truncation,
        } => {
            expr_calls(lhs, out);
            exprs(args, out);
            for suffix in ["_lpdf", "_lpmf"] {
                out.insert(format!("{}{suffix}", distribution.name));
            }
            if let Some(t) = truncation {
                t.lower
                    .iter()
                    .chain(&t.upper)
                    .for_each(|e| expr_calls(e, out));
            }
        }
        StmtKind::TargetPlus(e) => expr_calls(e, out),
        StmtKind::For {
            lower, upper, body, ..
        } => {
            expr_calls(lower, out);
            expr_calls(upper, out);
            stmt_calls(body, out);
        }
        StmtKind::ForEach { iterable, body, .. } => {
            expr_calls(iterable, out);
            stmt_calls(body, out);
        }
        StmtKind::While { cond, body } => {
            expr_calls(cond, out);
            stmt_calls(body, out);
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            expr_calls(cond, out);
            stmt_calls(then, out);
            if let Some(o) = otherwise {
                stmt_calls(o, out);
            }
        }
        StmtKind::Block(stmts) => stmts.iter().for_each(|s| stmt_calls(s, out)),
        StmtKind::Return(e) => e.iter().for_each(|e| expr_calls(e, out)),
        StmtKind::Print(ps) | StmtKind::Reject(ps) | StmtKind::FatalError(ps) => {
            printables(ps, out)
        }
        StmtKind::Call { name, args } => {
            out.insert(name.name.clone());
            exprs(args, out);
        }
        StmtKind::Break | StmtKind::Continue | StmtKind::Empty => {}
    }
}

fn index_calls(indices: &[Index], out: &mut BTreeSet<String>) {
    for index in indices {
        match index {
            Index::All => {}
            Index::Single(e) | Index::From(e) | Index::UpTo(e) => expr_calls(e, out),
            Index::Between(a, b) => {
                expr_calls(a, out);
                expr_calls(b, out);
            }
        }
    }
}

fn expr_calls(expr: &Expr, out: &mut BTreeSet<String>) {
    match &expr.kind {
        ExprKind::Int(_) | ExprKind::Real(_) | ExprKind::Var(_) | ExprKind::GetTarget => {}
        ExprKind::Call { name, args } | ExprKind::CondCall { name, args } => {
            out.insert(name.name.clone());
            // `foo_lupdf` runs `foo_lpdf`.
            for (from, to) in [("_lupdf", "_lpdf"), ("_lupmf", "_lpmf")] {
                if let Some(base) = name.name.strip_suffix(from) {
                    out.insert(format!("{base}{to}"));
                }
            }
            args.iter().for_each(|a| expr_calls(a, out));
        }
        ExprKind::Index { base, indices } => {
            expr_calls(base, out);
            index_calls(indices, out);
        }
        ExprKind::Unary { operand: e, .. } | ExprKind::Transpose(e) | ExprKind::Paren(e) => {
            expr_calls(e, out)
        }
        ExprKind::Binary { lhs, rhs, .. } => {
            expr_calls(lhs, out);
            expr_calls(rhs, out);
        }
        ExprKind::Ternary {
            cond,
            then,
            otherwise,
        } => {
            expr_calls(cond, out);
            expr_calls(then, out);
            expr_calls(otherwise, out);
        }
        ExprKind::ArrayLit(items) | ExprKind::RowVectorLit(items) => {
            items.iter().for_each(|a| expr_calls(a, out))
        }
    }
}

/// The error of calling `def` with `found` arguments, if that is wrong.
pub(crate) fn arity_error(def: &FunctionDef, found: usize) -> Option<String> {
    (found != def.params.len()).then(|| {
        format!(
            "`{}` takes {} argument(s), found {found}",
            def.name.name,
            def.params.len()
        )
    })
}

/// What a call of `def` that returned `value` gives: the value and the declared type to
/// convert it to (`None` for a void function), or the problem, with `true` when it is at the
/// definition rather than the call.
#[allow(clippy::type_complexity)]
pub(crate) fn checked_return<T>(
    def: &FunctionDef,
    value: Option<T>,
) -> Result<Option<(T, &UnsizedType)>, (String, bool)> {
    let name = &def.name.name;
    match (&def.return_type, value) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err((
            format!("the void function `{name}` returned a value"),
            false,
        )),
        (Some(_), None) => Err((
            format!("the function `{name}` ended without returning a value"),
            true,
        )),
        (Some(ty), Some(value)) => Ok(Some((value, ty))),
    }
}

/// An argument or returned value converted to the declared type `ty`: ints become reals in
/// real-valued types; the element type follows the declaration.
fn conform_to(value: Typed, ty: &UnsizedType, what: &str, span: Span) -> Result<Typed, HostError> {
    let (elem, int) = super::base_elem(ty.base);
    let rank = ty.array_rank + elem.rank();
    if value.shape().len() != rank {
        return fail(
            span,
            format!(
                "{what}: expected {}{}, found {}",
                "array[] ".repeat(ty.array_rank),
                ty.base.as_str(),
                value.describe()
            ),
        );
    }
    if int && !value.is_int() {
        return fail(span, format!("{what}: a real value for an int"));
    }
    let value = if int {
        value.value
    } else {
        value.value.to_real()
    };
    Ok(Typed::new(value, elem))
}

impl Interp<'_> {
    /// Calls the user function `def` for its value.
    pub(super) fn call_user_value(
        &mut self,
        def: &FunctionDef,
        args: &[Typed],
        span: Span,
    ) -> Result<Typed, HostError> {
        match self.call_user(def, args.to_vec(), span)? {
            Some(value) => Ok(value),
            None => fail(
                span,
                format!("the void function `{}` has no value", def.name.name),
            ),
        }
    }

    /// Calls the user function `def` with `args` (already evaluated): a fresh scope that sees
    /// only the arguments, as in Stan.
    pub(super) fn call_user(
        &mut self,
        def: &FunctionDef,
        args: Vec<Typed>,
        span: Span,
    ) -> Result<Option<Typed>, HostError> {
        let name = &def.name.name;
        if let Some(message) = arity_error(def, args.len()) {
            return fail(span, message);
        }
        if self.call_depth >= MAX_CALL_DEPTH {
            return fail(
                span,
                format!("user-function calls nest deeper than {MAX_CALL_DEPTH}"),
            );
        }
        let mut scope = TypedEnv::new();
        for (param, arg) in def.params.iter().zip(args) {
            let what = format!("argument `{}` of `{name}`", param.name.name);
            scope.insert(
                param.name.name.clone(),
                conform_to(arg, &param.ty, &what, span)?,
            );
        }
        let body = def
            .body
            .as_ref()
            .expect("only definitions are in the table");
        let scopes = std::mem::replace(&mut self.scopes, vec![scope]);
        let globals = std::mem::take(&mut self.globals);
        self.call_depth += 1;
        let flow = self.exec(body);
        self.call_depth -= 1;
        self.scopes = scopes;
        self.globals = globals;
        let returned = match flow? {
            Flow::Return(value) => value,
            _ => None,
        };
        match checked_return(def, returned) {
            Ok(None) => Ok(None),
            Ok(Some((value, ty))) => {
                conform_to(value, ty, &format!("the value of `{name}`"), span).map(Some)
            }
            Err((message, at_definition)) => {
                fail(if at_definition { def.name.span } else { span }, message)
            }
        }
    }
}

#[cfg(test)]
mod tests;
