//! Statements on the host: declarations, assignment, loops, conditionals, scopes.

use super::expr::{binary, positions, select, selected_elem, truth};
use super::{HostError, Interp, MAX_STEPS, MAX_WHILE_ITERATIONS, TypedEnv, UNSET_INT, fail};
use crate::ast::{AssignOp, BaseType, LValue, SizedType, Span, Stmt, StmtKind};
use crate::data::MAX_VALUES;
use crate::value::{Elem, Typed, Value, Values};

/// How a statement ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Flow {
    Normal,
    Break,
    Continue,
    /// `return` in a user function, with its value (`None` in a void function).
    Return(Option<Typed>),
}

/// The element type of a declared base type, and whether it is an int.
pub(crate) fn base_elem(base: BaseType) -> (Elem, bool) {
    match base {
        BaseType::Int => (Elem::Scalar, true),
        BaseType::Real => (Elem::Scalar, false),
        BaseType::Vector
        | BaseType::Ordered
        | BaseType::PositiveOrdered
        | BaseType::Simplex
        | BaseType::UnitVector => (Elem::Vector, false),
        BaseType::RowVector => (Elem::RowVector, false),
        BaseType::Matrix
        | BaseType::CholeskyFactorCorr
        | BaseType::CholeskyFactorCov
        | BaseType::CorrMatrix
        | BaseType::CovMatrix => (Elem::Matrix, false),
    }
}

/// A fresh variable of a declared type: NaN reals, [`UNSET_INT`] ints, as Stan does.
pub(crate) fn blank(shape: Vec<usize>, elem: Elem, int: bool) -> Typed {
    let len = shape.iter().product();
    let values = if int {
        Values::Int(vec![UNSET_INT; len])
    } else {
        Values::Real(vec![f64::NAN; len])
    };
    Typed::new(Value { shape, values }, elem)
}

/// `value` stored in a variable of `shape` (ints become reals in a real variable).
pub(crate) fn conform(
    value: Typed,
    shape: &[usize],
    elem: Elem,
    int: bool,
    what: &str,
    span: Span,
) -> Result<Typed, HostError> {
    if value.shape() != shape {
        let expected = blank(shape.to_vec(), elem, int);
        return fail(
            span,
            format!(
                "{what}: a value of type {} for a variable of type {}",
                value.describe(),
                expected.describe()
            ),
        );
    }
    match (int, value.value.values) {
        (true, Values::Real(_)) => fail(span, format!("{what}: a real value for an int")),
        (true, values) => Ok(Typed::new(
            Value {
                shape: value.value.shape,
                values,
            },
            elem,
        )),
        (false, values) => {
            let v = Value {
                shape: value.value.shape,
                values,
            };
            Ok(Typed::new(v.to_real(), elem))
        }
    }
}

impl Interp<'_> {
    /// Runs a block's statements in the block's own scope (its declarations stay visible
    /// through [`Interp::block_scope`]).
    pub fn run_block(&mut self, stmts: &[Stmt]) -> Result<(), HostError> {
        for stmt in stmts {
            match self.exec(stmt)? {
                Flow::Normal => {}
                Flow::Break | Flow::Continue | Flow::Return(_) => {
                    return fail(stmt.span, "`break` or `continue` outside a loop");
                }
            }
        }
        Ok(())
    }

    /// The shape, element type and int-ness of a declared type, sizes evaluated here.
    pub fn declared(&mut self, ty: &SizedType) -> Result<(Vec<usize>, Elem, bool), HostError> {
        let (elem, int) = base_elem(ty.base);
        let mut shape = Vec::new();
        for size in ty.array_dims.iter().chain(&ty.sizes) {
            let value = self.eval(size)?;
            match value.value.as_int() {
                Some(n) if n >= 0 && n as u64 <= MAX_VALUES as u64 => shape.push(n as usize),
                Some(n) => return fail(size.span, format!("size {n} is negative or too large")),
                None => {
                    return fail(
                        size.span,
                        format!("a size must be an int, not {}", value.describe()),
                    );
                }
            }
        }
        // Square matrix types take one size.
        let square = matches!(
            ty.base,
            BaseType::CholeskyFactorCorr | BaseType::CorrMatrix | BaseType::CovMatrix
        ) || (ty.base == BaseType::CholeskyFactorCov && ty.sizes.len() == 1);
        if square {
            let k = *shape.last().unwrap_or(&0);
            shape.push(k);
        }
        let total = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&n| n <= MAX_VALUES);
        if total.is_none() {
            return fail(
                ty.span,
                format!("a variable of sizes {shape:?} is too large"),
            );
        }
        Ok((shape, elem, int))
    }

    fn step(&mut self, span: Span) -> Result<(), HostError> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return fail(
                span,
                format!("the block ran more than {MAX_STEPS} statements; giving up"),
            );
        }
        Ok(())
    }

    fn declare(&mut self, name: &str, value: Typed) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_owned(), value);
        }
    }

    fn scoped(&mut self, body: &Stmt) -> Result<Flow, HostError> {
        self.scopes.push(TypedEnv::new());
        let flow = self.exec(body);
        self.scopes.pop();
        flow
    }

    pub(super) fn exec(&mut self, stmt: &Stmt) -> Result<Flow, HostError> {
        self.step(stmt.span)?;
        match &stmt.kind {
            StmtKind::Decl { ty, vars } => {
                let (shape, elem, int) = self.declared(ty)?;
                for var in vars {
                    let value = match &var.init {
                        Some(init) => {
                            let value = self.eval(init)?;
                            conform(value, &shape, elem, int, &var.name.name, init.span)?
                        }
                        None => blank(shape.clone(), elem, int),
                    };
                    self.declare(&var.name.name, value);
                }
                Ok(Flow::Normal)
            }
            StmtKind::Assign { lhs, op, rhs } => {
                let value = self.eval(rhs)?;
                self.assign(lhs, *op, value, stmt.span)?;
                Ok(Flow::Normal)
            }
            StmtKind::For {
                var,
                lower,
                upper,
                body,
            } => {
                let bound = |this: &mut Self, e: &crate::ast::Expr| -> Result<i64, HostError> {
                    let value = this.eval(e)?;
                    value.value.as_int().ok_or_else(|| HostError {
                        span: e.span,
                        message: format!("a loop bound must be an int, not {}", value.describe()),
                    })
                };
                let lo = bound(self, lower)?;
                let hi = bound(self, upper)?;
                let mut i = lo;
                while i <= hi {
                    self.scopes.push(TypedEnv::new());
                    self.declare(&var.name, Typed::int(i));
                    let flow = self.scoped(body);
                    self.scopes.pop();
                    match flow? {
                        Flow::Break => break,
                        Flow::Normal | Flow::Continue => {}
                        ret @ Flow::Return(_) => return Ok(ret),
                    }
                    i += 1;
                }
                Ok(Flow::Normal)
            }
            StmtKind::ForEach {
                var,
                iterable,
                body,
            } => {
                let container = self.eval(iterable)?;
                let items: Vec<Typed> = if container.array_rank() > 0 {
                    (0..container.shape()[0])
                        .map(|i| select(&container, &[super::expr::Sel::One(i)], stmt.span))
                        .collect::<Result<_, _>>()?
                } else if container.is_scalar() {
                    return fail(
                        iterable.span,
                        "`for (x in e)` needs an array, vector or matrix",
                    );
                } else {
                    // Vectors and matrices: every element, column-major as Stan does.
                    column_major(&container)
                        .into_iter()
                        .map(Typed::real)
                        .collect()
                };
                for item in items {
                    self.scopes.push(TypedEnv::new());
                    self.declare(&var.name, item);
                    let flow = self.scoped(body);
                    self.scopes.pop();
                    match flow? {
                        Flow::Break => break,
                        Flow::Normal | Flow::Continue => {}
                        ret @ Flow::Return(_) => return Ok(ret),
                    }
                }
                Ok(Flow::Normal)
            }
            StmtKind::While { cond, body } => {
                let mut iterations = 0u64;
                loop {
                    let c = self.eval(cond)?;
                    if !truth(&c, cond.span)? {
                        break;
                    }
                    iterations += 1;
                    if iterations > MAX_WHILE_ITERATIONS {
                        return fail(
                            stmt.span,
                            format!(
                                "this `while` loop ran more than {MAX_WHILE_ITERATIONS} iterations; giving up"
                            ),
                        );
                    }
                    match self.scoped(body)? {
                        Flow::Break => break,
                        Flow::Normal | Flow::Continue => {}
                        ret @ Flow::Return(_) => return Ok(ret),
                    }
                }
                Ok(Flow::Normal)
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.eval(cond)?;
                if truth(&c, cond.span)? {
                    self.scoped(then)
                } else if let Some(otherwise) = otherwise {
                    self.scoped(otherwise)
                } else {
                    Ok(Flow::Normal)
                }
            }
            StmtKind::Block(stmts) => {
                self.scopes.push(TypedEnv::new());
                let mut flow = Ok(Flow::Normal);
                for s in stmts {
                    flow = self.exec(s);
                    if !matches!(flow, Ok(Flow::Normal)) {
                        break;
                    }
                }
                self.scopes.pop();
                flow
            }
            StmtKind::Break => Ok(Flow::Break),
            StmtKind::Continue => Ok(Flow::Continue),
            StmtKind::Print(items) => {
                let text = self.printables(items)?;
                self.printed.push(text);
                Ok(Flow::Normal)
            }
            StmtKind::Reject(items) | StmtKind::FatalError(items) => {
                let text = self.printables(items)?;
                fail(stmt.span, format!("reject: {text}"))
            }
            StmtKind::Empty => Ok(Flow::Normal),
            StmtKind::Tilde { .. } | StmtKind::TargetPlus(_) => fail(
                stmt.span,
                "`~` and `target +=` are only allowed in the model block",
            ),
            StmtKind::Return(_) if self.call_depth == 0 => {
                fail(stmt.span, "`return` outside a function")
            }
            StmtKind::Return(value) => {
                let value = value.as_ref().map(|e| self.eval(e)).transpose()?;
                Ok(Flow::Return(value))
            }
            StmtKind::Call { name, args } => {
                let values = args
                    .iter()
                    .map(|a| self.eval(a))
                    .collect::<Result<Vec<_>, _>>()?;
                let functions = self.functions;
                if let Some(def) = functions.callee(&name.name) {
                    self.call_user(def, values, stmt.span)?;
                    return Ok(Flow::Normal);
                }
                self.call(&name.name, &values, stmt.span)?;
                Ok(Flow::Normal)
            }
        }
    }

    /// `lhs op= value`.
    pub(super) fn assign(
        &mut self,
        lhs: &LValue,
        op: AssignOp,
        value: Typed,
        span: Span,
    ) -> Result<(), HostError> {
        let name = &lhs.name.name;
        let Some(depth) = self.scopes.iter().rposition(|s| s.contains_key(name)) else {
            return if self.globals.iter().any(|g| g.contains_key(name)) {
                fail(
                    lhs.span,
                    format!("`{name}` cannot be assigned here: it belongs to an earlier block"),
                )
            } else {
                fail(lhs.span, format!("`{name}` is not declared"))
            };
        };
        let (mut shape, mut elem) = {
            let target = &self.scopes[depth][name];
            (target.shape().to_vec(), target.elem)
        };
        let is_int = self.scopes[depth][name].is_int();
        // The positions the left side selects, as offsets into the variable's elements.
        let mut offsets: Vec<usize> = (0..shape.iter().product()).collect();
        for group in &lhs.indices {
            let sels = self.resolve(group, &shape, lhs.span)?;
            if sels.len() > shape.len() {
                return fail(lhs.span, format!("too many indexes for `{name}`"));
            }
            let (picked, new_shape) = positions(&shape, &sels);
            offsets = picked.iter().map(|&p| offsets[p]).collect();
            elem = selected_elem(elem, shape.len().saturating_sub(elem.rank()), &sels);
            shape = new_shape;
        }
        let new = match op.binary() {
            None => value,
            Some(bin) => {
                let target = &self.scopes[depth][name].value;
                let values = match &target.values {
                    Values::Int(v) => Values::Int(offsets.iter().map(|&o| v[o]).collect()),
                    Values::Real(v) => Values::Real(offsets.iter().map(|&o| v[o]).collect()),
                };
                let old = Typed::new(
                    Value {
                        shape: shape.clone(),
                        values,
                    },
                    elem,
                );
                binary(bin, &old, &value, span)?
            }
        };
        let what = format!("assignment to `{}`", lhs.name.name);
        let new = conform(new, &shape, elem, is_int, &what, span)?;
        let slot = self
            .scopes
            .get_mut(depth)
            .and_then(|s| s.get_mut(name))
            .expect("found above");
        match (&mut slot.value.values, &new.value.values) {
            (Values::Real(dst), src) => {
                let src = match src {
                    Values::Real(v) => v.clone(),
                    Values::Int(v) => v.iter().map(|&x| x as f64).collect(),
                };
                for (&o, x) in offsets.iter().zip(src) {
                    dst[o] = x;
                }
            }
            (Values::Int(dst), Values::Int(src)) => {
                for (&o, &x) in offsets.iter().zip(src) {
                    dst[o] = x;
                }
            }
            (Values::Int(_), Values::Real(_)) => {
                return fail(span, format!("{what}: a real value for an int"));
            }
        }
        Ok(())
    }
}

/// The elements of a vector or matrix in column-major order.
pub(super) fn column_major(x: &Typed) -> Vec<f64> {
    match (x.elem, x.shape()) {
        (Elem::Matrix, &[r, c]) => {
            let v = x.reals();
            let mut out = Vec::with_capacity(r * c);
            for j in 0..c {
                for i in 0..r {
                    out.push(v[i * c + j]);
                }
            }
            out
        }
        _ => x.reals(),
    }
}
