//! User-defined functions during symbolic execution: each call is inlined at its call site,
//! in a fresh scope that sees only the arguments (bound by value), so that the body's loops
//! unroll and its conditions are decided with the caller's known values. Recursion is refused
//! when the program's functions are read ([`crate::host::Functions::new`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::exec::Flow;
use super::sym::{Sym, Val};
use super::{LowerError, Lowerer};
use crate::ast::{BaseType, Expr, FunctionDef, Span, UnsizedType};
use crate::host::{Env, arity_error, base_elem, checked_return};

/// Deepest nesting of inlined calls (chains of distinct functions; recursion is refused).
const MAX_CALL_DEPTH: usize = 64;

/// The caller's variables, put aside while a function body runs.
struct Caller {
    env: Env,
    syms: BTreeMap<String, Sym>,
    scopes: Vec<Vec<String>>,
    assignable: BTreeSet<String>,
    decl_spans: HashMap<String, Span>,
    read_once: HashSet<String>,
}

/// The number of dimensions of a value of type `ty`.
fn rank(ty: &UnsizedType) -> usize {
    ty.array_rank + base_elem(ty.base).0.rank()
}

fn type_text(ty: &UnsizedType) -> String {
    format!("{}{}", "array[] ".repeat(ty.array_rank), ty.base.as_str())
}

/// `value` as a value of type `ty`: ints become reals in real-valued types.
fn conform(value: Val, ty: &UnsizedType, what: &str, span: Span) -> Result<Val, LowerError> {
    if value.dims().len() != rank(ty) {
        return Err(LowerError::new(
            span,
            format!(
                "{what}: expected {}, found {}",
                type_text(ty),
                super::expr::describe(value.dims())
            ),
        ));
    }
    match value {
        Val::Known(v, _) if ty.base == BaseType::Int => {
            if !v.is_int() {
                return Err(LowerError::new(
                    span,
                    format!("{what}: a real value for an int"),
                ));
            }
            Ok(Val::Known(v, None))
        }
        Val::Known(v, _) => Ok(Val::Known(v.to_real(), None)),
        Val::Sym(_) if ty.base == BaseType::Int => Err(LowerError::new(
            span,
            format!("{what}: an int cannot depend on parameters"),
        )),
        sym @ Val::Sym(_) => Ok(sym),
    }
}

impl Lowerer {
    /// Inlines a call of the user function `def` with `args` (evaluated here, in the caller's
    /// scope): its value, `None` for a void function.
    pub(super) fn call_user(
        &mut self,
        def: &FunctionDef,
        args: &[Expr],
        span: Span,
    ) -> Result<Option<Val>, LowerError> {
        let name = &def.name.name;
        if let Some(message) = arity_error(def, args.len()) {
            return Err(LowerError::new(span, message));
        }
        if self.call_depth >= MAX_CALL_DEPTH {
            return Err(LowerError::new(
                span,
                format!("user-function calls nest deeper than {MAX_CALL_DEPTH}"),
            ));
        }
        let mut values = Vec::with_capacity(args.len());
        for (param, arg) in def.params.iter().zip(args) {
            let value = self.eval(arg)?;
            let what = format!("argument `{}` of `{name}`", param.name.name);
            if param.data_only && matches!(value, Val::Sym(_)) {
                return Err(LowerError::new(
                    arg.span,
                    format!("{what} is declared `data` but depends on parameters"),
                ));
            }
            values.push(conform(value, &param.ty, &what, arg.span)?);
        }
        let body = def
            .body
            .as_ref()
            .expect("only definitions are in the table");
        let caller = Caller {
            env: std::mem::take(&mut self.env),
            syms: std::mem::take(&mut self.syms),
            scopes: std::mem::take(&mut self.scopes),
            assignable: std::mem::take(&mut self.assignable),
            decl_spans: std::mem::take(&mut self.decl_spans),
            read_once: std::mem::take(&mut self.read_once),
        };
        self.call_depth += 1;
        let flow = self.run_body(def, values, body);
        self.call_depth -= 1;
        self.env = caller.env;
        self.syms = caller.syms;
        self.scopes = caller.scopes;
        self.assignable = caller.assignable;
        self.decl_spans = caller.decl_spans;
        self.read_once = caller.read_once;
        let returned = match flow? {
            Flow::Return(value) => value,
            _ => None,
        };
        match checked_return(def, returned) {
            Ok(None) => Ok(None),
            Ok(Some((value, ty))) => {
                conform(value, ty, &format!("the value of `{name}`"), span).map(Some)
            }
            Err((message, at_definition)) => Err(LowerError::new(
                if at_definition { def.name.span } else { span },
                message,
            )),
        }
    }

    /// A call for its value: refuses a void function.
    pub(super) fn call_user_value(
        &mut self,
        def: &FunctionDef,
        args: &[Expr],
        span: Span,
    ) -> Result<Val, LowerError> {
        self.call_user(def, args, span)?.ok_or_else(|| {
            LowerError::new(
                span,
                format!("the void function `{}` has no value", def.name.name),
            )
        })
    }

    /// The body of `def` with its parameters bound to `values`.
    fn run_body(
        &mut self,
        def: &FunctionDef,
        values: Vec<Val>,
        body: &crate::ast::Stmt,
    ) -> Result<Flow, LowerError> {
        self.push_scope();
        for (param, value) in def.params.iter().zip(values) {
            match value {
                Val::Known(v, _) => self.bind(&param.name.name, param.name.span, v)?,
                Val::Sym(s) => {
                    self.check_new(&param.name.name, param.name.span)?;
                    self.syms.insert(param.name.name.clone(), s);
                    self.scopes
                        .last_mut()
                        .expect("pushed")
                        .push(param.name.name.clone());
                }
            }
        }
        self.run(body)
    }
}

#[cfg(test)]
mod tests;
