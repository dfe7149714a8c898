//! The host interpreter: Stan statements and expressions on `f64` and integer values, for
//! sizes and bounds, the `transformed data` block and `generated quantities`.
//!
//! Semantics follow the Stan reference manual: local reals start as NaN and ints as the
//! smallest 32-bit int; integer `/` truncates toward zero; `&&` and `||` short-circuit;
//! indices are 1-based and checked. A program cannot hang the host: `while` loops stop with an
//! error after [`MAX_WHILE_ITERATIONS`] iterations and a run after [`MAX_STEPS`] statements.

mod call;
mod dist;
mod expr;
mod functions;
pub(crate) mod linalg;
mod math;
pub(crate) mod rng;
mod stmt;

use std::collections::BTreeMap;

use crate::ast::{Expr, Span};
use crate::value::{Typed, Value};

pub(crate) use call::{BINARY_REAL, UNARY_REAL};
pub use functions::Functions;
pub(crate) use functions::{arity_error, checked_return};
pub use rng::HostRng;
pub(crate) use stmt::base_elem;

/// Named host values in scope.
pub type Env = BTreeMap<String, Value>;

/// Named host values with their Stan types.
pub type TypedEnv = BTreeMap<String, Typed>;

/// Most iterations of one `while` loop in one run.
#[cfg(not(test))]
pub const MAX_WHILE_ITERATIONS: u64 = 10_000_000;
/// Small in tests, so that the test of the bound stays fast.
#[cfg(test)]
pub const MAX_WHILE_ITERATIONS: u64 = 10_000;

/// Most statements one run of a block may execute (loop bodies count once per iteration).
pub const MAX_STEPS: u64 = 200_000_000;

/// Stan's value of an `int` that was declared but not assigned.
pub const UNSET_INT: i64 = i32::MIN as i64;

/// Why an expression or statement failed on the host, at its span.
#[derive(Debug, Clone, PartialEq)]
pub struct HostError {
    pub span: Span,
    pub message: String,
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HostError {}

impl HostError {
    /// `file:line:column: error: ...` with the source line and a caret.
    pub fn render(&self, file_name: &str, source: &str) -> String {
        crate::error::render(file_name, source, self.span, &self.message)
    }
}

fn fail<T>(span: Span, message: impl Into<String>) -> Result<T, HostError> {
    Err(HostError {
        span,
        message: message.into(),
    })
}

/// Evaluates `expr` over `env` (no random numbers); element types are guessed from shapes.
pub fn eval(expr: &Expr, env: &Env) -> Result<Value, HostError> {
    eval_with(expr, env, &functions::NO_FUNCTIONS)
}

/// [`eval`] with user functions.
pub fn eval_with(expr: &Expr, env: &Env, functions: &Functions) -> Result<Value, HostError> {
    let globals: TypedEnv = env
        .iter()
        .map(|(name, value)| (name.clone(), Typed::guess(value.clone())))
        .collect();
    let mut interp = Interp::new(vec![&globals], None).with_functions(functions);
    Ok(interp.eval(expr)?.value)
}

/// Evaluates `expr` over typed values (as [`crate::transformed_data`] returns them), so that
/// `array[N] vector[K]` and `matrix[N, K]` stay apart; no random numbers.
pub fn eval_typed(expr: &Expr, env: &TypedEnv) -> Result<Typed, HostError> {
    Interp::new(vec![env], None).eval(expr)
}

/// `value[positions]` with 1-based positions; selects a scalar or a sub-array.
#[allow(dead_code)] // for lowering, which folds indexed data
pub fn index(value: &Value, positions: &[i64], span: Span) -> Result<Value, HostError> {
    let typed = Typed::guess(value.clone());
    let mut sels = Vec::with_capacity(positions.len());
    if positions.len() > value.shape.len() {
        return fail(span, "too many indices");
    }
    for (&pos, &dim) in positions.iter().zip(&value.shape) {
        sels.push(expr::Sel::One(expr::check_index(pos, dim, span)?));
    }
    Ok(expr::select(&typed, &sels, span)?.value)
}

/// `name(args)` for a density (`normal_lpdf`, ...): its value.
#[cfg(test)]
pub(crate) fn density(name: &str, args: &[Typed]) -> Result<f64, HostError> {
    let mut interp = Interp::new(Vec::new(), None);
    Ok(interp.call(name, args, Span::default())?.real_at(0))
}

/// `lgamma`, for lowering's constants.
pub(crate) fn math_lgamma(x: f64) -> f64 {
    math::lgamma(x)
}

/// `erfc`, for tests elsewhere in the crate.
#[cfg(test)]
pub(crate) fn math_erfc(x: f64) -> f64 {
    math::erfc(x)
}

/// `lchoose`, for lowering's constants.
pub(crate) fn math_lchoose(n: f64, k: f64) -> f64 {
    math::lchoose(n, k)
}

/// Runs Stan statements on the host: scopes over read-only globals, a random stream for
/// `_rng` functions when there is one, and the text of `print` statements.
pub struct Interp<'a> {
    /// Read-only values of earlier blocks, searched last to first.
    globals: Vec<&'a TypedEnv>,
    /// Innermost last; the first is the block's own scope.
    scopes: Vec<TypedEnv>,
    rng: Option<&'a mut HostRng>,
    /// What `print` statements wrote, one entry per statement.
    pub printed: Vec<String>,
    steps: u64,
    functions: &'a Functions,
    /// User-function calls in progress.
    call_depth: usize,
}

impl<'a> Interp<'a> {
    /// An interpreter over `globals` (later maps shadow earlier ones); `_rng` functions fail
    /// without `rng`.
    pub fn new(globals: Vec<&'a TypedEnv>, rng: Option<&'a mut HostRng>) -> Interp<'a> {
        Interp {
            globals,
            scopes: vec![TypedEnv::new()],
            rng,
            printed: Vec::new(),
            steps: 0,
            functions: &functions::NO_FUNCTIONS,
            call_depth: 0,
        }
    }

    /// The interpreter with the program's user functions.
    pub fn with_functions(mut self, functions: &'a Functions) -> Interp<'a> {
        self.functions = functions;
        self
    }

    /// The variables declared at the top level of the block run so far.
    pub fn into_block_scope(mut self) -> TypedEnv {
        self.scopes.truncate(1);
        self.scopes.pop().unwrap_or_default()
    }

    /// The variables declared at the top level so far.
    pub fn block_scope(&self) -> &TypedEnv {
        &self.scopes[0]
    }

    fn lookup(&self, name: &str) -> Option<&Typed> {
        self.scopes
            .iter()
            .rev()
            .find_map(|scope| scope.get(name))
            .or_else(|| self.globals.iter().rev().find_map(|g| g.get(name)))
    }
}

#[cfg(test)]
mod tests;
