//! Evaluation of Stan expressions during symbolic execution: what is known before sampling is
//! computed on the host, the rest becomes IR expressions over parameters.

use sampler::{BinaryOp as Op, DataValue, Expr as Ir, UnaryOp as Un};

use super::sym::{self, Repr, Sym, Val};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{BinaryOp, Expr, ExprKind, Index, Span, UnaryOp};
use crate::host;
use crate::value::{Value, Values};

/// Expressions larger than this (in IR nodes) are given a hidden name when a variable holding
/// them is read, so that repeated reads refer to one computed value.
const SHARE_ABOVE: usize = 24;

/// A scalar variable read only once since its assignment stays inline up to this size.
const INLINE_ONCE_UP_TO: usize = 256;

pub(crate) fn describe(dims: &[usize]) -> String {
    match dims {
        [] => "a scalar".into(),
        [n] => format!("a vector of {n}"),
        dims => format!(
            "an array of shape [{}]",
            dims.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One resolved index: flat positions (0-based) and the shape of the selection.
pub(crate) struct Selection {
    pub positions: Vec<usize>,
    pub dims: Vec<usize>,
}

impl Lowerer {
    /// Whether `expr` can be evaluated on the host: every name in it is known.
    pub(super) fn only_host(&self, expr: &Expr) -> bool {
        match &expr.kind {
            ExprKind::Int(_) | ExprKind::Real(_) => true,
            ExprKind::Var(ident) => self.env.contains_key(&ident.name),
            ExprKind::Paren(e) | ExprKind::Unary { operand: e, .. } | ExprKind::Transpose(e) => {
                self.only_host(e)
            }
            ExprKind::Binary { lhs, rhs, .. } => self.only_host(lhs) && self.only_host(rhs),
            ExprKind::Ternary {
                cond,
                then,
                otherwise,
            } => self.only_host(cond) && self.only_host(then) && self.only_host(otherwise),
            // Sizes of variables are known even when their values are not.
            ExprKind::Call { name, args }
                if matches!(
                    name.name.as_str(),
                    "size" | "num_elements" | "rows" | "cols" | "dims"
                ) && matches!(&args[..], [Expr { kind: ExprKind::Var(v), .. }]
                    if self.syms.contains_key(&v.name)) =>
            {
                true
            }
            ExprKind::Call { args, .. }
            | ExprKind::CondCall { args, .. }
            | ExprKind::ArrayLit(args)
            | ExprKind::RowVectorLit(args) => args.iter().all(|a| self.only_host(a)),
            ExprKind::Index { base, indices } => {
                self.only_host(base)
                    && indices.iter().all(|i| match i {
                        Index::All => true,
                        Index::Single(e) | Index::From(e) | Index::UpTo(e) => self.only_host(e),
                        Index::Between(a, b) => self.only_host(a) && self.only_host(b),
                    })
            }
            ExprKind::GetTarget => false,
        }
    }

    /// A value that must be known before sampling (a size, an index, a condition).
    pub(super) fn known(&mut self, expr: &Expr, what: &str) -> Result<Value, LowerError> {
        if !self.only_host(expr) {
            return Err(LowerError::new(
                expr.span,
                format!("{what} must not depend on parameters"),
            ));
        }
        match self.eval(expr)? {
            Val::Known(v, _) => Ok(v),
            Val::Sym(_) => Err(LowerError::new(
                expr.span,
                format!("{what} could not be computed before sampling"),
            )),
        }
    }

    pub(super) fn known_int(&mut self, expr: &Expr, what: &str) -> Result<i64, LowerError> {
        self.known(expr, what)?
            .as_int()
            .ok_or_else(|| LowerError::new(expr.span, format!("{what} must be an integer")))
    }

    /// A condition known before sampling; comparisons and logic on scalars are done here.
    pub(super) fn cond(&mut self, expr: &Expr) -> Result<bool, LowerError> {
        let scalar = |lowerer: &mut Lowerer, e: &Expr| -> Result<f64, LowerError> {
            lowerer
                .known(e, "a condition")?
                .as_real()
                .ok_or_else(|| LowerError::new(e.span, "a condition must be a scalar"))
        };
        match &expr.kind {
            ExprKind::Paren(e) => self.cond(e),
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand,
            } => Ok(!self.cond(operand)?),
            ExprKind::Binary { op, lhs, rhs } => {
                use BinaryOp as B;
                match op {
                    B::And => Ok(self.cond(lhs)? && self.cond(rhs)?),
                    B::Or => Ok(self.cond(lhs)? || self.cond(rhs)?),
                    B::Eq | B::NotEq | B::Lt | B::Le | B::Gt | B::Ge => {
                        let (a, b) = (scalar(self, lhs)?, scalar(self, rhs)?);
                        Ok(match op {
                            B::Eq => a == b,
                            B::NotEq => a != b,
                            B::Lt => a < b,
                            B::Le => a <= b,
                            B::Gt => a > b,
                            _ => a >= b,
                        })
                    }
                    _ => Ok(scalar(self, expr)? != 0.0),
                }
            }
            _ => Ok(scalar(self, expr)? != 0.0),
        }
    }

    /// Evaluates `expr`: on the host when it is known, else symbolically.
    pub(super) fn eval(&mut self, expr: &Expr) -> Result<Val, LowerError> {
        if self.only_host(expr) && !matches!(expr.kind, ExprKind::Var(_)) {
            // The host evaluator covers the common cases; what it refuses (lpdf values of
            // constants, ranges, ...) falls through to the symbolic path with constants.
            if let Ok(v) = host::eval_with(expr, &self.env, &self.functions) {
                return Ok(Val::Known(v, None));
            }
        }
        let span = expr.span;
        match &expr.kind {
            ExprKind::Int(i) => Ok(Val::Known(Value::int(*i), None)),
            ExprKind::Real(x) => Ok(Val::Known(Value::real(*x), None)),
            ExprKind::Var(ident) => self.read_var(&ident.name, span),
            ExprKind::Paren(inner) => self.eval(inner),
            ExprKind::Unary { op, operand } => {
                let v = self.eval(operand)?;
                match op {
                    UnaryOp::Plus => Ok(v),
                    UnaryOp::Neg => {
                        let (ir, dims) = self.whole(v, operand.span)?;
                        Ok(Val::Sym(Sym::whole(sym::un(Un::Neg, ir), dims)))
                    }
                    UnaryOp::Not => unsupported(span, "`!` on a value that depends on parameters"),
                }
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let transposed = matches!(lhs.kind, ExprKind::Transpose(_));
                let a = self.eval(lhs)?;
                let b = self.eval(rhs)?;
                self.binary(*op, a, b, span, transposed)
            }
            ExprKind::Ternary {
                cond,
                then,
                otherwise,
            } => {
                if self.cond(cond)? {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            ExprKind::Transpose(inner) => {
                let v = self.eval(inner)?;
                match v.dims() {
                    [] | [_] => Ok(v),
                    _ => self.transpose(v, span),
                }
            }
            ExprKind::Call { name, args } => self.call(&name.name, name.span, args, span),
            ExprKind::CondCall { name, args } => self.cond_call(&name.name, name.span, args, span),
            ExprKind::Index { base, indices } => {
                if let ExprKind::Var(ident) = &base.kind
                    && let Some(s) = self.syms.get(&ident.name)
                {
                    let dims = s.dims.clone();
                    let selection = self.select(&dims, indices, span)?;
                    return self.read_elements(&ident.name, selection, span);
                }
                let value = self.eval(base)?;
                let dims = value.dims().to_vec();
                let selection = self.select(&dims, indices, span)?;
                self.apply_selection(value, selection, span)
            }
            ExprKind::ArrayLit(items) | ExprKind::RowVectorLit(items) => {
                let mut parts = Vec::with_capacity(items.len());
                let mut inner: Option<Vec<usize>> = None;
                for item in items {
                    let v = self.eval(item)?;
                    let dims = v.dims().to_vec();
                    if inner.as_ref().is_some_and(|d| *d != dims) {
                        return Err(LowerError::new(
                            item.span,
                            "the elements of a literal must have the same size",
                        ));
                    }
                    inner = Some(dims);
                    parts.push(self.whole(v, item.span)?.0);
                }
                let mut dims = vec![items.len()];
                dims.extend(inner.unwrap_or_default());
                Ok(Val::Sym(Sym::whole(Ir::Concat(parts), dims)))
            }
            ExprKind::GetTarget => self.get_target(span),
        }
    }

    /// The value of a variable; large symbolic values get a hidden name first.
    fn read_var(&mut self, name: &str, span: Span) -> Result<Val, LowerError> {
        if let Some(value) = self.env.get(name) {
            let global = !self.is_local(name);
            return Ok(Val::Known(value.clone(), global.then(|| name.to_owned())));
        }
        let Some(s) = self.syms.get(name) else {
            return Err(LowerError::new(span, format!("unknown name `{name}`")));
        };
        let dims = s.dims.clone();
        let Repr::Whole(ir) = &s.repr else {
            let selection = Selection {
                positions: (0..s.len()).collect(),
                dims,
            };
            return self.read_elements(name, selection, span);
        };
        let ir = ir.clone();
        let size = sym::size(&ir);
        // A scalar read once after each assignment (`mu = mu + ...; y ~ normal(mu, s)`)
        // stays inline, so that loops over it can be vectorised; a second read shares it.
        if size > SHARE_ABOVE
            && size <= INLINE_ONCE_UP_TO
            && dims.is_empty()
            && self.read_once.insert(name.to_owned())
        {
            return Ok(Val::Sym(Sym::whole(ir, dims)));
        }
        if size > SHARE_ABOVE {
            let shared = self.share(ir, &dims);
            self.syms.get_mut(name).expect("present").repr = Repr::Whole(shared.clone());
            return Ok(Val::Sym(Sym::whole(shared, dims)));
        }
        Ok(Val::Sym(Sym::whole(ir, dims)))
    }

    /// Elements `selection` of symbolic variable `name`.
    fn read_elements(
        &mut self,
        name: &str,
        selection: Selection,
        span: Span,
    ) -> Result<Val, LowerError> {
        // Only the selected elements are copied: variables can be long.
        let s = self.syms.get(name).expect("caller checked");
        let dims = s.dims.clone();
        let whole = match &s.repr {
            Repr::Whole(ir) => Some(ir.clone()),
            Repr::Elems(_) => None,
        };
        match whole {
            Some(ir) => {
                let ir = if sym::trivial(&ir) {
                    ir
                } else {
                    let shared = self.share(ir, &dims);
                    self.syms.get_mut(name).expect("present").repr = Repr::Whole(shared.clone());
                    shared
                };
                self.apply_selection(Val::Sym(Sym::whole(ir, dims)), selection, span)
            }
            None => {
                let mut picked = Vec::with_capacity(selection.positions.len());
                for &p in &selection.positions {
                    let element = match &self.syms[name].repr {
                        Repr::Elems(elems) => elems[p].clone(),
                        Repr::Whole(_) => None,
                    };
                    let Some(ir) = element else {
                        return Err(LowerError::new(
                            span,
                            format!(
                                "`{name}{}` is used before it is assigned",
                                position_text(&dims, p)
                            ),
                        ));
                    };
                    let ir = if sym::size(&ir) > SHARE_ABOVE {
                        let shared = self.share(ir, &[]);
                        if let Some(Sym {
                            repr: Repr::Elems(e),
                            ..
                        }) = self.syms.get_mut(name)
                        {
                            e[p] = Some(shared.clone());
                        }
                        shared
                    } else {
                        ir
                    };
                    picked.push(ir);
                }
                if selection.dims.is_empty() {
                    return Ok(Val::scalar(picked.pop().expect("one position")));
                }
                Ok(Val::Sym(Sym {
                    dims: selection.dims,
                    repr: Repr::Elems(picked.into_iter().map(Some).collect()),
                }))
            }
        }
    }

    /// Gives a large expression a hidden name (a transformed value that is not reported),
    /// so that it is computed once however often it is used.
    pub(super) fn share(&mut self, ir: Ir, dims: &[usize]) -> Ir {
        if sym::trivial(&ir) {
            return ir;
        }
        self.hidden += 1;
        let name = format!("_t{}", self.hidden);
        self.model.transformed.push(sampler::Transformed {
            name: name.clone(),
            value: ir,
            dims: if dims.len() >= 2 {
                dims.to_vec()
            } else {
                Vec::new()
            },
            hidden: true,
        });
        Ir::Ref(name)
    }

    /// Resolves `indices` against a value of shape `dims`.
    pub(super) fn select(
        &mut self,
        dims: &[usize],
        indices: &[Index],
        span: Span,
    ) -> Result<Selection, LowerError> {
        if indices.len() > dims.len() {
            return Err(LowerError::new(
                span,
                format!(
                    "{} indices for {}",
                    indices.len(),
                    describe(dims).trim_start_matches("a ")
                ),
            ));
        }
        // Per dimension: the chosen positions (1-based) and whether the dimension is kept.
        let mut chosen: Vec<(Vec<usize>, bool)> = Vec::with_capacity(dims.len());
        for (d, &n) in dims.iter().enumerate() {
            let check = |i: i64, e: &Expr| -> Result<usize, LowerError> {
                if i < 1 || i as u64 > n as u64 {
                    Err(LowerError::new(
                        e.span,
                        format!("index {i} out of range 1..={n}"),
                    ))
                } else {
                    Ok(i as usize)
                }
            };
            let Some(index) = indices.get(d) else {
                chosen.push(((1..=n).collect(), true));
                continue;
            };
            let entry = match index {
                Index::All => ((1..=n).collect(), true),
                Index::Single(e) => {
                    let v = self.known(e, "an index")?;
                    match (&v.values, v.shape.len()) {
                        (Values::Int(i), 0) => (vec![check(i[0], e)?], false),
                        (Values::Int(list), 1) => (
                            list.iter()
                                .map(|&i| check(i, e))
                                .collect::<Result<_, _>>()?,
                            true,
                        ),
                        _ => {
                            return Err(LowerError::new(
                                e.span,
                                "an index must be an integer or an integer array",
                            ));
                        }
                    }
                }
                Index::From(a) => {
                    let lo = self.known_int(a, "an index")?;
                    let lo = check(lo, a)?;
                    ((lo..=n).collect(), true)
                }
                Index::UpTo(b) => {
                    let hi = self.known_int(b, "an index")?;
                    let hi = if hi < 1 { 0 } else { check(hi, b)? };
                    ((1..=hi).collect(), true)
                }
                Index::Between(a, b) => {
                    let lo = self.known_int(a, "an index")?;
                    let hi = self.known_int(b, "an index")?;
                    if hi < lo {
                        (Vec::new(), true)
                    } else {
                        ((check(lo, a)?..=check(hi, b)?).collect(), true)
                    }
                }
            };
            chosen.push(entry);
        }
        let mut strides = vec![1usize; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        let mut positions = vec![0usize];
        for (d, (list, _)) in chosen.iter().enumerate() {
            let mut next = Vec::with_capacity(positions.len() * list.len());
            for &p in &positions {
                for &i in list {
                    next.push(p + (i - 1) * strides[d]);
                }
            }
            positions = next;
        }
        let dims = chosen
            .iter()
            .filter(|(_, kept)| *kept)
            .map(|(list, _)| list.len())
            .collect();
        Ok(Selection { positions, dims })
    }

    /// The elements `selection` of a value.
    pub(super) fn apply_selection(
        &mut self,
        value: Val,
        selection: Selection,
        span: Span,
    ) -> Result<Val, LowerError> {
        match value {
            Val::Known(v, _) => Ok(Val::Known(
                sym::pick(&v, &selection.positions, selection.dims),
                None,
            )),
            Val::Sym(Sym {
                repr: Repr::Elems(elems),
                dims,
            }) => {
                let mut picked = Vec::with_capacity(selection.positions.len());
                for &p in &selection.positions {
                    let Some(ir) = elems[p].clone() else {
                        return Err(LowerError::new(
                            span,
                            format!(
                                "element {} is used before it is assigned",
                                position_text(&dims, p)
                            ),
                        ));
                    };
                    picked.push(ir);
                }
                if selection.dims.is_empty() {
                    return Ok(Val::scalar(picked.pop().expect("one position")));
                }
                Ok(Val::Sym(Sym {
                    dims: selection.dims,
                    repr: Repr::Elems(picked.into_iter().map(Some).collect()),
                }))
            }
            Val::Sym(Sym {
                repr: Repr::Whole(ir),
                dims,
            }) => {
                let total: usize = dims.iter().product();
                let positions = selection.positions;
                // The whole value (but one element of a length-1 vector is a scalar).
                let whole = positions.iter().enumerate().all(|(i, &p)| i == p)
                    && (selection.dims.len() == dims.len() || dims.is_empty());
                if positions.len() == total && whole {
                    return Ok(Val::Sym(Sym::whole(ir, selection.dims)));
                }
                let ir = self.share(ir, &dims);
                if selection.dims.is_empty() {
                    return Ok(Val::scalar(sym::elem(ir, positions[0])));
                }
                let contiguous = positions.windows(2).all(|w| w[1] == w[0] + 1);
                let out = if contiguous && !positions.is_empty() {
                    Ir::Slice(Box::new(ir), positions[0] as u32, positions.len() as u32)
                } else {
                    let index = self.data_item(
                        None,
                        DataValue::IntVector(positions.iter().map(|&p| p as i64).collect()),
                    );
                    Ir::Binary(Op::Gather, Box::new(ir), Box::new(index))
                };
                Ok(Val::Sym(Sym::whole(out, selection.dims)))
            }
        }
    }

    /// A value as one IR expression and its shape; host vectors become data items.
    pub(super) fn whole(&mut self, value: Val, span: Span) -> Result<(Ir, Vec<usize>), LowerError> {
        match value {
            Val::Known(v, name) => {
                if v.is_scalar() {
                    return Ok((Ir::Const(v.real_at(0)), Vec::new()));
                }
                let item = match &v.values {
                    Values::Int(x) => DataValue::IntVector(x.clone()),
                    Values::Real(x) => DataValue::Vector(x.clone()),
                };
                // A named 2-D item is kept as a matrix under its name; a flattened copy is
                // generated.
                let name = name.filter(|_| v.shape.len() == 1);
                Ok((self.data_item(name, item), v.shape))
            }
            Val::Sym(s) => match s.repr {
                Repr::Whole(ir) => Ok((ir, s.dims)),
                Repr::Elems(elems) => {
                    let mut parts = Vec::with_capacity(elems.len());
                    for (p, e) in elems.into_iter().enumerate() {
                        match e {
                            Some(ir) => parts.push(ir),
                            None => {
                                return Err(LowerError::new(
                                    span,
                                    format!(
                                        "element {} is used before it is assigned",
                                        position_text(&s.dims, p)
                                    ),
                                ));
                            }
                        }
                    }
                    if s.dims.is_empty() {
                        return Ok((parts.pop().expect("a scalar has one element"), s.dims));
                    }
                    // Elements assigned in a loop usually share one structure: one vector
                    // expression then replaces many scalar ones.
                    if parts.len() >= 2 && parts.windows(2).any(|w| w[0] != w[1]) {
                        return Ok((self.vectorize(&parts), s.dims));
                    }
                    Ok((Ir::Concat(parts), s.dims))
                }
            },
        }
    }

    /// A host matrix as a data item (rows of `dims[1]` values).
    pub(super) fn matrix_item(&mut self, value: &Value, name: Option<String>) -> Ir {
        let cols = value.shape.get(1).copied().unwrap_or(1).max(1);
        let rows = value.reals().chunks(cols).map(<[f64]>::to_vec).collect();
        self.data_item(name, DataValue::Matrix(rows))
    }

    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        a: Val,
        b: Val,
        span: Span,
        lhs_transposed: bool,
    ) -> Result<Val, LowerError> {
        if let Some(v) = self.matrix_binary(op, &a, &b, span, lhs_transposed)? {
            return Ok(v);
        }
        let (da, db) = (a.dims().to_vec(), b.dims().to_vec());
        let ir_op = match op {
            BinaryOp::Add => Op::Add,
            BinaryOp::Sub => Op::Sub,
            BinaryOp::EltMul => Op::Mul,
            BinaryOp::EltDiv => Op::Div,
            BinaryOp::Div if db.is_empty() => Op::Div,
            BinaryOp::Pow | BinaryOp::EltPow => Op::Pow,
            BinaryOp::Mul => match (&da[..], &db[..]) {
                ([], _) | (_, []) => Op::Mul,
                ([r, c], [n]) if c == n => {
                    let Val::Known(m, name) = a else {
                        return unsupported(span, "a matrix that depends on parameters");
                    };
                    let matrix = self.matrix_item(&m, name);
                    let (v, _) = self.whole(b, span)?;
                    return Ok(Val::Sym(Sym::whole(
                        Ir::Binary(Op::Matvec, Box::new(matrix), Box::new(v)),
                        vec![*r],
                    )));
                }
                ([x], [y]) if x == y && lhs_transposed => {
                    let (a, _) = self.whole(a, span)?;
                    let (b, _) = self.whole(b, span)?;
                    return Ok(Val::scalar(Ir::Binary(Op::Dot, Box::new(a), Box::new(b))));
                }
                _ => {
                    return unsupported(
                        span,
                        format!("`*` of {} and {}", describe(&da), describe(&db)),
                    );
                }
            },
            other => {
                return unsupported(
                    span,
                    format!("`{}` on values that depend on parameters", other.as_str()),
                );
            }
        };
        let dims = match (&da[..], &db[..]) {
            ([], _) => db.clone(),
            (_, []) => da.clone(),
            (x, y)
                if x.iter().product::<usize>() == y.iter().product::<usize>()
                    && x.len() == y.len() =>
            {
                da.clone()
            }
            _ => {
                return Err(LowerError::new(
                    span,
                    format!(
                        "`{}` of {} and {}: sizes do not match",
                        op.as_str(),
                        describe(&da),
                        describe(&db)
                    ),
                ));
            }
        };
        let (a, _) = self.whole(a, span)?;
        let (b, _) = self.whole(b, span)?;
        Ok(Val::Sym(Sym::whole(sym::bin(ir_op, a, b), dims)))
    }
}

/// `[2, 1]` for flat position `p` of shape `dims` (1-based, as Stan writes it).
pub(crate) fn position_text(dims: &[usize], p: usize) -> String {
    if dims.is_empty() {
        return String::new();
    }
    let mut rest = p;
    let mut parts = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        parts[d] = rest % dims[d].max(1) + 1;
        rest /= dims[d].max(1);
    }
    format!(
        "[{}]",
        parts
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}
