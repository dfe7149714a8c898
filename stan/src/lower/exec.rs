//! Symbolic execution of `transformed parameters` and `model`: loops with known bounds run,
//! conditions known before sampling are decided, locals live in scopes, and what depends on
//! parameters is built up as IR.

use sampler::{Expr as Ir, Statement, Transformed};

use super::expr::{describe, position_text};
use super::sym::{self, Repr, Sym, Val};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{
    AssignOp, BaseType, BinaryOp, Block, Constraint, Expr, ExprKind, Index, LValue, SizedType,
    Span, Stmt, StmtKind, UnaryOp,
};
use crate::value::{Value, Values};

/// Statements run at load time, in all: bounds `while` loops and long unrolled loops.
pub(super) const MAX_STEPS: usize = 20_000_000;

/// How a statement ended.
#[derive(Debug, Clone)]
pub(super) enum Flow {
    Next,
    Break,
    Continue,
    /// `return` in a user function, with its value (`None` in a void function).
    Return(Option<Val>),
}

impl Lowerer {
    /// Whether `name` is a local variable (of a block, a nested scope or a loop).
    pub(super) fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.iter().any(|n| n == name))
    }

    fn declared(&self, name: &str) -> bool {
        self.env.contains_key(name) || self.syms.contains_key(name)
    }

    pub(super) fn push_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    fn pop_scope(&mut self) {
        for name in self.scopes.pop().unwrap_or_default() {
            self.env.remove(&name);
            self.syms.remove(&name);
            self.assignable.remove(&name);
            self.read_once.remove(&name);
        }
    }

    fn step(&mut self, span: Span) -> Result<(), LowerError> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(LowerError::new(
                span,
                format!("the program runs more than {MAX_STEPS} statements while lowering"),
            ));
        }
        Ok(())
    }

    /// `transformed parameters`: run, then each top-level declaration becomes a reported
    /// transformed value, referred to by name afterwards.
    pub(super) fn transformed_parameters(&mut self, block: &Block) -> Result<(), LowerError> {
        self.reads_target = true;
        self.push_scope();
        for stmt in &block.stmts {
            if !matches!(self.run(stmt)?, Flow::Next) {
                return Err(LowerError::new(
                    stmt.span,
                    "`break` or `continue` outside a loop",
                ));
            }
        }
        let names = self.scopes.pop().unwrap_or_default();
        for name in names {
            self.assignable.remove(&name);
            let (ir, dims) = if let Some(value) = self.env.remove(&name) {
                let dims = value.shape.clone();
                let (ir, _) = self.whole(Val::Known(value, None), block.span)?;
                (ir, dims)
            } else {
                let s = self.syms.remove(&name).expect("declared in the block");
                if let Repr::Elems(elems) = &s.repr
                    && let Some(p) = elems.iter().position(Option::is_none)
                {
                    let span = self.decl_spans.get(&name).copied().unwrap_or(block.span);
                    return Err(LowerError::new(
                        span,
                        format!(
                            "transformed parameter `{name}{}` is never assigned",
                            position_text(&s.dims, p)
                        ),
                    ));
                }
                self.whole(Val::Sym(s.clone()), block.span)?
            };
            self.model.transformed.push(Transformed {
                name: name.clone(),
                value: ir,
                dims: if dims.len() >= 2 {
                    dims.clone()
                } else {
                    Vec::new()
                },
                hidden: false,
            });
            self.syms
                .insert(name.clone(), Sym::whole(Ir::Ref(name), dims));
        }
        self.check_bounds(block)
    }

    /// Stan rejects a draw whose transformed parameters break their declared bounds: a
    /// factor `log_step(x - lower)` (0, or -inf when broken) per bound.
    fn check_bounds(&mut self, block: &Block) -> Result<(), LowerError> {
        for stmt in &block.stmts {
            let StmtKind::Decl { ty, vars } = &stmt.kind else {
                continue;
            };
            let Some(Constraint::Range { lower, upper }) = &ty.constraint else {
                continue;
            };
            for var in vars {
                let name = &var.name.name;
                let dims = self.syms[name].dims.clone();
                for (bound, below) in [(lower, true), (upper, false)] {
                    let Some(bound) = bound else { continue };
                    let value = self.eval(bound)?;
                    let (b, b_dims) = self.whole(value, bound.span)?;
                    if !b_dims.is_empty()
                        && b_dims.iter().product::<usize>() != dims.iter().product::<usize>()
                    {
                        return Err(LowerError::new(
                            bound.span,
                            format!(
                                "the bound is {} but `{name}` is {}",
                                describe(&b_dims),
                                describe(&dims)
                            ),
                        ));
                    }
                    let x = Ir::Ref(name.clone());
                    let gap = if below {
                        sym::sub(x, b)
                    } else {
                        sym::sub(b, x)
                    };
                    let check = sym::un(sampler::UnaryOp::LogStep, gap);
                    let value = if dims.is_empty() && b_dims.is_empty() {
                        check
                    } else {
                        sym::un(sampler::UnaryOp::Sum, check)
                    };
                    self.model.model.push(Statement::Factor { value });
                }
            }
        }
        Ok(())
    }

    pub(super) fn model_block(&mut self, block: &Block) -> Result<(), LowerError> {
        self.reads_target = true;
        self.push_scope();
        for stmt in &block.stmts {
            if !matches!(self.run(stmt)?, Flow::Next) {
                return Err(LowerError::new(
                    stmt.span,
                    "`break` or `continue` outside a loop",
                ));
            }
        }
        self.pop_scope();
        Ok(())
    }

    fn run_scoped(&mut self, stmt: &Stmt) -> Result<Flow, LowerError> {
        self.push_scope();
        let flow = self.run(stmt);
        self.pop_scope();
        flow
    }

    pub(super) fn run(&mut self, stmt: &Stmt) -> Result<Flow, LowerError> {
        self.step(stmt.span)?;
        match &stmt.kind {
            StmtKind::Decl { ty, vars } => {
                for var in vars {
                    self.declare(ty, &var.name.name, var.name.span, var.init.as_ref())?;
                }
            }
            StmtKind::Assign { lhs, op, rhs } => self.assign(lhs, *op, rhs, stmt.span)?,
            StmtKind::Tilde {
                lhs,
                distribution,
                args,
                truncation,
            } => {
                self.sample(lhs, &distribution.name, distribution.span, args)?;
                if let Some(t) = truncation {
                    self.truncate(lhs, distribution, args, t)?;
                }
            }
            StmtKind::TargetPlus(e) => self.target_plus(e, 1.0)?,
            StmtKind::For {
                var,
                lower,
                upper,
                body,
            } => {
                let lo = self.known_int(lower, "a loop bound")?;
                let hi = self.known_int(upper, "a loop bound")?;
                for i in lo..=hi {
                    self.step(stmt.span)?;
                    self.push_scope();
                    self.bind(&var.name, var.span, Value::int(i))?;
                    let flow = self.run_scoped(body);
                    self.pop_scope();
                    match flow? {
                        Flow::Break => break,
                        Flow::Next | Flow::Continue => {}
                        ret @ Flow::Return(_) => return Ok(ret),
                    }
                }
            }
            StmtKind::ForEach {
                var,
                iterable,
                body,
            } => {
                let items = self.eval(iterable)?;
                let dims = items.dims().to_vec();
                let Some(&n) = dims.first() else {
                    return Err(LowerError::new(
                        iterable.span,
                        "`for (x in e)` needs a container",
                    ));
                };
                for i in 0..n {
                    self.step(stmt.span)?;
                    let selection = super::expr::Selection {
                        positions: {
                            let inner: usize = dims[1..].iter().product();
                            (i * inner..(i + 1) * inner).collect()
                        },
                        dims: dims[1..].to_vec(),
                    };
                    let item = self.apply_selection(items.clone(), selection, iterable.span)?;
                    self.push_scope();
                    match item {
                        Val::Known(v, _) => self.bind(&var.name, var.span, v)?,
                        Val::Sym(s) => {
                            self.check_new(&var.name, var.span)?;
                            self.syms.insert(var.name.clone(), s);
                            self.scopes
                                .last_mut()
                                .expect("pushed")
                                .push(var.name.clone());
                        }
                    }
                    let flow = self.run_scoped(body);
                    self.pop_scope();
                    match flow? {
                        Flow::Break => break,
                        Flow::Next | Flow::Continue => {}
                        ret @ Flow::Return(_) => return Ok(ret),
                    }
                }
            }
            StmtKind::While { cond, body } => {
                while self.cond(cond)? {
                    self.step(stmt.span)?;
                    match self.run_scoped(body)? {
                        Flow::Break => break,
                        Flow::Next | Flow::Continue => {}
                        ret @ Flow::Return(_) => return Ok(ret),
                    }
                }
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                if !self.only_host(cond) {
                    return unsupported(cond.span, "an `if` whose condition depends on parameters");
                }
                if self.cond(cond)? {
                    return self.run_scoped(then);
                } else if let Some(otherwise) = otherwise {
                    return self.run_scoped(otherwise);
                }
            }
            StmtKind::Block(stmts) => {
                self.push_scope();
                for s in stmts {
                    match self.run(s) {
                        Ok(Flow::Next) => {}
                        other => {
                            self.pop_scope();
                            return other;
                        }
                    }
                }
                self.pop_scope();
            }
            StmtKind::Break => return Ok(Flow::Break),
            StmtKind::Continue => return Ok(Flow::Continue),
            StmtKind::Empty | StmtKind::Print(_) => {}
            StmtKind::Reject(_) | StmtKind::FatalError(_) => {
                return Err(LowerError::new(
                    stmt.span,
                    "this `reject` is reached for every value of the parameters",
                ));
            }
            StmtKind::Return(_) if self.call_depth == 0 => {
                return Err(LowerError::new(stmt.span, "`return` outside a function"));
            }
            StmtKind::Return(value) => {
                let value = value.as_ref().map(|e| self.eval(e)).transpose()?;
                return Ok(Flow::Return(value));
            }
            StmtKind::Call { name, args } => {
                let functions = std::rc::Rc::clone(&self.functions);
                let Some(def) = functions.get(&name.name) else {
                    return unsupported(
                        name.span,
                        format!("calling `{}` as a statement", name.name),
                    );
                };
                self.call_user(def, args, stmt.span)?;
            }
        }
        Ok(Flow::Next)
    }

    pub(super) fn check_new(&self, name: &str, span: Span) -> Result<(), LowerError> {
        if self.declared(name) {
            return Err(LowerError::new(
                span,
                format!("`{name}` is already declared: Stan does not allow shadowing"),
            ));
        }
        Ok(())
    }

    /// A known local (a loop variable).
    pub(super) fn bind(&mut self, name: &str, span: Span, value: Value) -> Result<(), LowerError> {
        self.check_new(name, span)?;
        self.env.insert(name.to_owned(), value);
        self.scopes
            .last_mut()
            .expect("a scope")
            .push(name.to_owned());
        Ok(())
    }

    /// The declared shape: array dimensions, then vector or matrix sizes.
    pub(super) fn dims_of(&mut self, ty: &SizedType) -> Result<Vec<usize>, LowerError> {
        let mut dims = Vec::with_capacity(ty.array_dims.len() + ty.sizes.len());
        for size in ty.array_dims.iter().chain(&ty.sizes) {
            let n = self.known_int(size, "a size")?;
            if n < 0 || n as u64 > crate::data::MAX_VALUES as u64 {
                return Err(LowerError::new(
                    size.span,
                    format!("size {n} is negative or too large"),
                ));
            }
            dims.push(n as usize);
        }
        let total = dims
            .iter()
            .try_fold(1usize, |total, &n| total.checked_mul(n))
            .filter(|&total| total <= crate::data::MAX_VALUES);
        if total.is_none() {
            return Err(LowerError::new(
                ty.span,
                format!(
                    "a value of shape {dims:?} has more than {} elements",
                    crate::data::MAX_VALUES
                ),
            ));
        }
        Ok(dims)
    }

    fn declare(
        &mut self,
        ty: &SizedType,
        name: &str,
        span: Span,
        init: Option<&Expr>,
    ) -> Result<(), LowerError> {
        match ty.base {
            BaseType::Int | BaseType::Real | BaseType::Vector | BaseType::RowVector => {}
            BaseType::Matrix => {}
            // Constrained types are only checked by Stan; a declared matrix is refused below.
            BaseType::Simplex
            | BaseType::Ordered
            | BaseType::PositiveOrdered
            | BaseType::UnitVector => {}
            other => {
                return unsupported(
                    ty.span,
                    format!("a local or transformed `{}`", other.as_str()),
                );
            }
        }
        self.check_new(name, span)?;
        let dims = self.dims_of(ty)?;
        let len: usize = dims.iter().product();
        let is_int = ty.base == BaseType::Int;
        self.scopes
            .last_mut()
            .expect("a scope")
            .push(name.to_owned());
        self.assignable.insert(name.to_owned());
        self.decl_spans.insert(name.to_owned(), span);
        match init {
            None if is_int => {
                self.env.insert(
                    name.to_owned(),
                    Value {
                        shape: dims,
                        values: Values::Int(vec![0; len]),
                    },
                );
            }
            None => {
                self.syms.insert(
                    name.to_owned(),
                    Sym {
                        dims,
                        repr: Repr::Elems(vec![None; len]),
                    },
                );
            }
            Some(init) => {
                let value = self.eval(init)?;
                if value.dims() != dims.as_slice() {
                    return Err(LowerError::new(
                        init.span,
                        format!(
                            "`{name}` is declared as {} but initialised with {}",
                            describe(&dims),
                            describe(value.dims())
                        ),
                    ));
                }
                self.store_whole(name, value, is_int, init.span)?;
            }
        }
        Ok(())
    }

    /// Replaces the whole value of variable `name`.
    fn store_whole(
        &mut self,
        name: &str,
        value: Val,
        is_int: bool,
        span: Span,
    ) -> Result<(), LowerError> {
        self.env.remove(name);
        self.syms.remove(name);
        self.read_once.remove(name);
        match value {
            Val::Known(v, _) => {
                if is_int && !v.is_int() {
                    return Err(LowerError::new(
                        span,
                        format!("a real value for the `int` `{name}`"),
                    ));
                }
                let v = if is_int {
                    v
                } else {
                    Value {
                        values: Values::Real(v.reals()),
                        shape: v.shape,
                    }
                };
                self.env.insert(name.to_owned(), v);
            }
            Val::Sym(s) => {
                if is_int {
                    return Err(LowerError::new(
                        span,
                        format!("the `int` `{name}` cannot depend on parameters"),
                    ));
                }
                self.syms.insert(name.to_owned(), s);
            }
        }
        Ok(())
    }

    fn assign(
        &mut self,
        lhs: &LValue,
        op: AssignOp,
        rhs: &Expr,
        span: Span,
    ) -> Result<(), LowerError> {
        let name = &lhs.name.name;
        if !self.assignable.contains(name) {
            if self.declared(name) {
                return Err(LowerError::new(
                    lhs.name.span,
                    format!("cannot assign to `{name}`: it is not a variable of this block"),
                ));
            }
            return Err(LowerError::new(
                lhs.name.span,
                format!("unknown name `{name}`"),
            ));
        }
        // `x[i][j]` is `x[i, j]` when every earlier bracket holds single indices.
        let mut indices: Vec<Index> = Vec::new();
        for (k, group) in lhs.indices.iter().enumerate() {
            if k + 1 < lhs.indices.len() && !group.iter().all(|i| matches!(i, Index::Single(_))) {
                return unsupported(
                    lhs.span,
                    "assigning through a slice followed by more indices",
                );
            }
            indices.extend(group.iter().cloned());
        }
        let is_int = matches!(self.env.get(name), Some(v) if v.is_int());
        let target_dims = match self.env.get(name) {
            Some(v) => v.shape.clone(),
            None => self.syms[name].dims.clone(),
        };
        let mut rhs_val = self.eval(rhs)?;
        if let Some(bin) = op.binary() {
            let read = lvalue_expr(lhs);
            let old = self.eval(&read)?;
            rhs_val = match (old, rhs_val) {
                (Val::Known(a, _), Val::Known(b, _)) => {
                    let mut env = crate::host::Env::new();
                    env.insert("a".into(), a);
                    env.insert("b".into(), b);
                    let var = |n: &str| Expr {
                        kind: ExprKind::Var(crate::ast::Ident {
                            name: n.into(),
                            span,
                        }),
                        span,
                    };
                    let e = Expr {
                        kind: ExprKind::Binary {
                            op: bin,
                            lhs: Box::new(var("a")),
                            rhs: Box::new(var("b")),
                        },
                        span,
                    };
                    Val::Known(crate::host::eval(&e, &env)?, None)
                }
                (a, b) => self.binary(bin, a, b, span, false)?,
            };
        }
        if indices.is_empty() {
            if rhs_val.dims() != target_dims.as_slice() {
                return Err(LowerError::new(
                    rhs.span,
                    format!(
                        "assigning {} to `{name}`, {}",
                        describe(rhs_val.dims()),
                        describe(&target_dims)
                    ),
                ));
            }
            return self.store_whole(name, rhs_val, is_int, span);
        }
        let selection = self.select(&target_dims, &indices, lhs.span)?;
        if rhs_val.dims() != selection.dims.as_slice() {
            return Err(LowerError::new(
                rhs.span,
                format!(
                    "assigning {} to `{}`, {}",
                    describe(rhs_val.dims()),
                    lhs_text(lhs),
                    describe(&selection.dims)
                ),
            ));
        }
        // Known into known stays on the host.
        if let (Some(target), Val::Known(v, _)) = (self.env.get_mut(name), &rhs_val) {
            match (&mut target.values, &v.values) {
                (Values::Int(t), Values::Int(x)) => {
                    for (k, &p) in selection.positions.iter().enumerate() {
                        t[p] = x[k];
                    }
                }
                (Values::Int(_), Values::Real(_)) => {
                    return Err(LowerError::new(
                        span,
                        format!("a real value for the `int` `{name}`"),
                    ));
                }
                (Values::Real(t), _) => {
                    for (k, &p) in selection.positions.iter().enumerate() {
                        t[p] = v.real_at(k);
                    }
                }
            }
            return Ok(());
        }
        if is_int {
            return Err(LowerError::new(
                span,
                format!("the `int` `{name}` cannot depend on parameters"),
            ));
        }
        // The target becomes per-element.
        let mut elems: Vec<Option<Ir>> = match self.env.remove(name) {
            Some(v) => (0..v.len()).map(|i| Some(sym::known_elem(&v, i))).collect(),
            None => {
                let s = self.syms.remove(name).expect("declared");
                match s.repr {
                    Repr::Elems(e) => e,
                    Repr::Whole(ir) => {
                        let n: usize = s.dims.iter().product();
                        let ir = self.share(ir, &s.dims);
                        (0..n).map(|i| Some(sym::elem(ir.clone(), i))).collect()
                    }
                }
            }
        };
        let values: Vec<Ir> = match rhs_val {
            Val::Known(v, _) => (0..v.len()).map(|i| sym::known_elem(&v, i)).collect(),
            Val::Sym(s) => match s.repr {
                Repr::Elems(e) => {
                    let mut out = Vec::with_capacity(e.len());
                    for (k, x) in e.into_iter().enumerate() {
                        out.push(x.ok_or_else(|| {
                            LowerError::new(
                                rhs.span,
                                format!(
                                    "element {} is used before it is assigned",
                                    position_text(&s.dims, k)
                                ),
                            )
                        })?);
                    }
                    out
                }
                Repr::Whole(ir) if s.dims.is_empty() => vec![ir],
                Repr::Whole(ir) => {
                    let n: usize = s.dims.iter().product();
                    let ir = self.share(ir, &s.dims);
                    (0..n).map(|i| sym::elem(ir.clone(), i)).collect()
                }
            },
        };
        for (k, &p) in selection.positions.iter().enumerate() {
            elems[p] = Some(values[k].clone());
        }
        self.syms.insert(
            name.clone(),
            Sym {
                dims: target_dims,
                repr: Repr::Elems(elems),
            },
        );
        Ok(())
    }

    /// `target += e`: top-level sums are split, densities become `Sample` statements.
    fn target_plus(&mut self, e: &Expr, sign: f64) -> Result<(), LowerError> {
        match &e.kind {
            ExprKind::Paren(inner) => return self.target_plus(inner, sign),
            ExprKind::Binary {
                op: op @ (BinaryOp::Add | BinaryOp::Sub),
                lhs,
                rhs,
            } => {
                self.target_plus(lhs, sign)?;
                let sign = if *op == BinaryOp::Sub { -sign } else { sign };
                return self.target_plus(rhs, sign);
            }
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand,
            } => return self.target_plus(operand, -sign),
            ExprKind::CondCall { name, args } | ExprKind::Call { name, args }
                if sign > 0.0
                    && !args.is_empty()
                    && super::density::density_base(&name.name).is_some() =>
            {
                return self.sample(&args[0], &name.name, name.span, &args[1..]);
            }
            _ => {}
        }
        let value = self.eval(e)?;
        self.add_factor(value, sign, e.span)
    }

    /// Adds `sign * value` (summed over its elements) to the log density.
    pub(super) fn add_factor(
        &mut self,
        value: Val,
        sign: f64,
        span: Span,
    ) -> Result<(), LowerError> {
        if let Val::Known(..) = value {
            // A constant: it does not change the posterior.
            return Ok(());
        }
        let (ir, dims) = self.whole(value, span)?;
        let ir = if sign < 0.0 {
            sym::un(sampler::UnaryOp::Neg, ir)
        } else {
            ir
        };
        if dims.is_empty() {
            let key = super::vectorize::skeleton(&ir);
            self.scalar_factors.entry(key).or_default().push(ir);
        } else {
            self.model.model.push(Statement::Factor { value: ir });
        }
        Ok(())
    }
}

/// The expression that reads an assignment's target.
fn lvalue_expr(lhs: &LValue) -> Expr {
    let mut e = Expr {
        kind: ExprKind::Var(lhs.name.clone()),
        span: lhs.name.span,
    };
    for group in &lhs.indices {
        e = Expr {
            kind: ExprKind::Index {
                base: Box::new(e),
                indices: group.clone(),
            },
            span: lhs.span,
        };
    }
    e
}

fn lhs_text(lhs: &LValue) -> String {
    let mut text = lhs.name.name.clone();
    if !lhs.indices.is_empty() {
        text.push_str("[...]");
    }
    text
}
