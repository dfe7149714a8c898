//! Expressions on the host: operators, indexing and slicing, literals.

use super::{HostError, Interp, fail};
use crate::ast::{BinaryOp, Expr, ExprKind, Index, Printable, Span, UnaryOp};
use crate::value::{Elem, Typed, Value, Values};

/// One index, resolved against its dimension: 0-based positions.
#[derive(Debug, Clone)]
pub enum Sel {
    One(usize),
    Many(Vec<usize>),
}

/// A 1-based index checked against `dim`, made 0-based.
pub fn check_index(pos: i64, dim: usize, span: Span) -> Result<usize, HostError> {
    if pos < 1 || pos as u64 > dim as u64 {
        return fail(
            span,
            format!("index {pos} out of range; expecting index to be between 1 and {dim}"),
        );
    }
    Ok(pos as usize - 1)
}

/// Flat offsets of the selected elements, and the shape of the selection (dimensions with
/// a single index dropped; dimensions past the selectors kept whole).
pub fn positions(shape: &[usize], sels: &[Sel]) -> (Vec<usize>, Vec<usize>) {
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let mut offsets = vec![0usize];
    let mut out_shape = Vec::new();
    for (d, &dim) in shape.iter().enumerate() {
        let picks: Vec<usize> = match sels.get(d) {
            Some(Sel::One(i)) => vec![*i],
            Some(Sel::Many(v)) => {
                out_shape.push(v.len());
                v.clone()
            }
            None => {
                out_shape.push(dim);
                (0..dim).collect()
            }
        };
        let mut next = Vec::with_capacity(offsets.len() * picks.len());
        for &o in &offsets {
            for &p in &picks {
                next.push(o + p * strides[d]);
            }
        }
        offsets = next;
    }
    (offsets, out_shape)
}

/// The element type left after selecting with `sels` from a value of element `elem` and
/// `array_rank` array dimensions.
pub(super) fn selected_elem(elem: Elem, array_rank: usize, sels: &[Sel]) -> Elem {
    let kept = |d: usize| !matches!(sels.get(d), Some(Sel::One(_)));
    match elem {
        Elem::Scalar => Elem::Scalar,
        Elem::Vector | Elem::RowVector => {
            if kept(array_rank) {
                elem
            } else {
                Elem::Scalar
            }
        }
        Elem::Matrix => match (kept(array_rank), kept(array_rank + 1)) {
            (true, true) => Elem::Matrix,
            (true, false) => Elem::Vector,
            (false, true) => Elem::RowVector,
            (false, false) => Elem::Scalar,
        },
    }
}

/// `value[sels]`.
pub fn select(value: &Typed, sels: &[Sel], span: Span) -> Result<Typed, HostError> {
    if sels.len() > value.shape().len() {
        return fail(
            span,
            format!(
                "too many indexes ({}) for a value of type {}",
                sels.len(),
                value.describe()
            ),
        );
    }
    let (offsets, shape) = positions(value.shape(), sels);
    let values = match &value.value.values {
        Values::Int(v) => Values::Int(offsets.iter().map(|&o| v[o]).collect()),
        Values::Real(v) => Values::Real(offsets.iter().map(|&o| v[o]).collect()),
    };
    let elem = selected_elem(value.elem, value.array_rank(), sels);
    Ok(Typed::new(Value { shape, values }, elem))
}

fn int_result(values: Vec<i64>, shape: Vec<usize>, elem: Elem) -> Typed {
    Typed::new(
        Value {
            shape,
            values: Values::Int(values),
        },
        elem,
    )
}

fn real_result(values: Vec<f64>, shape: Vec<usize>, elem: Elem) -> Typed {
    Typed::new(
        Value {
            shape,
            values: Values::Real(values),
        },
        elem,
    )
}

/// `f` on every element, as reals.
pub fn map_real(x: &Typed, f: impl Fn(f64) -> f64) -> Typed {
    real_result(
        x.reals().into_iter().map(f).collect(),
        x.shape().to_vec(),
        x.elem,
    )
}

/// The shape and element type of `a op b` elementwise: equal shapes, or a scalar broadcast.
fn broadcast(
    a: &Typed,
    b: &Typed,
    what: &str,
    span: Span,
) -> Result<(Vec<usize>, Elem), HostError> {
    if a.is_scalar() {
        Ok((b.shape().to_vec(), b.elem))
    } else if b.is_scalar() || a.shape() == b.shape() {
        Ok((a.shape().to_vec(), a.elem))
    } else {
        fail(
            span,
            format!(
                "{what}: operands of types {} and {} do not match",
                a.describe(),
                b.describe()
            ),
        )
    }
}

/// `f` elementwise on reals, with a scalar broadcast.
pub fn zip_real(
    a: &Typed,
    b: &Typed,
    what: &str,
    span: Span,
    f: impl Fn(f64, f64) -> f64,
) -> Result<Typed, HostError> {
    let (shape, elem) = broadcast(a, b, what, span)?;
    let len: usize = shape.iter().product();
    let at = |v: &Typed, i: usize| v.real_at(if v.is_scalar() { 0 } else { i });
    let out = (0..len).map(|i| f(at(a, i), at(b, i))).collect();
    Ok(real_result(out, shape, elem))
}

/// `f` elementwise on ints (`None` is overflow or division by zero).
fn zip_int(
    a: &Typed,
    b: &Typed,
    what: &str,
    span: Span,
    f: impl Fn(i64, i64) -> Option<i64>,
) -> Result<Typed, HostError> {
    let (shape, elem) = broadcast(a, b, what, span)?;
    let (Values::Int(x), Values::Int(y)) = (&a.value.values, &b.value.values) else {
        return fail(span, format!("`{what}` needs integer operands"));
    };
    let len: usize = shape.iter().product();
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let p = x[if a.is_scalar() { 0 } else { i }];
        let q = y[if b.is_scalar() { 0 } else { i }];
        match f(p, q) {
            Some(r) => out.push(r),
            None if q == 0 => return fail(span, format!("integer division by zero in `{what}`")),
            None => return fail(span, format!("integer overflow in `{what}`")),
        }
    }
    Ok(int_result(out, shape, elem))
}

/// Integer results of Stan's int arithmetic must fit a 32-bit int.
fn int32(x: i64) -> Option<i64> {
    i32::try_from(x).ok().map(i64::from)
}

/// A scalar as a truth value.
pub fn truth(value: &Typed, span: Span) -> Result<bool, HostError> {
    match value.value.as_real() {
        Some(x) => Ok(x != 0.0),
        None => fail(
            span,
            format!(
                "a condition must be an int or real, not {}",
                value.describe()
            ),
        ),
    }
}

fn bool_value(b: bool) -> Typed {
    Typed::int(i64::from(b))
}

/// `a op b` for Stan's binary operators.
pub fn binary(op: BinaryOp, a: &Typed, b: &Typed, span: Span) -> Result<Typed, HostError> {
    use BinaryOp as B;
    let name = op.as_str();
    let both_int = a.is_int() && b.is_int();
    let comparison = |f: fn(f64, f64) -> bool| -> Result<Typed, HostError> {
        match (a.value.as_real(), b.value.as_real()) {
            (Some(x), Some(y)) => Ok(bool_value(f(x, y))),
            _ => fail(
                span,
                format!(
                    "`{name}` compares scalars, not {} and {}",
                    a.describe(),
                    b.describe()
                ),
            ),
        }
    };
    match op {
        B::Or | B::And => {
            let (x, y) = (truth(a, span)?, truth(b, span)?);
            Ok(bool_value(if op == B::Or { x || y } else { x && y }))
        }
        B::Eq => comparison(|x, y| x == y),
        B::NotEq => comparison(|x, y| x != y),
        B::Lt => comparison(|x, y| x < y),
        B::Le => comparison(|x, y| x <= y),
        B::Gt => comparison(|x, y| x > y),
        B::Ge => comparison(|x, y| x >= y),
        B::Add if both_int => zip_int(a, b, name, span, |x, y| x.checked_add(y).and_then(int32)),
        B::Sub if both_int => zip_int(a, b, name, span, |x, y| x.checked_sub(y).and_then(int32)),
        B::Add => zip_real(a, b, name, span, |x, y| x + y),
        B::Sub => zip_real(a, b, name, span, |x, y| x - y),
        B::Mul if a.is_scalar() || b.is_scalar() => {
            if both_int {
                zip_int(a, b, name, span, |x, y| x.checked_mul(y).and_then(int32))
            } else {
                zip_real(a, b, name, span, |x, y| x * y)
            }
        }
        B::Mul => super::linalg::multiply(a, b, span),
        B::Div | B::IntDiv if both_int && a.is_scalar() && b.is_scalar() => {
            zip_int(a, b, name, span, |x, y| x.checked_div(y).and_then(int32))
        }
        B::IntDiv => fail(span, "`%/%` needs integer operands"),
        B::Div if b.is_scalar() => zip_real(a, b, name, span, |x, y| x / y),
        B::Div => super::linalg::divide_right(a, b, span),
        B::LeftDiv => super::linalg::divide_left(a, b, span),
        B::Mod if both_int && a.is_scalar() && b.is_scalar() => {
            zip_int(a, b, name, span, |x, y| x.checked_rem(y))
        }
        B::Mod => fail(span, "`%` needs integer operands"),
        B::EltMul => {
            if both_int {
                zip_int(a, b, name, span, |x, y| x.checked_mul(y).and_then(int32))
            } else {
                zip_real(a, b, name, span, |x, y| x * y)
            }
        }
        B::EltDiv => zip_real(a, b, name, span, |x, y| x / y),
        B::Pow if a.is_scalar() && b.is_scalar() => zip_real(a, b, name, span, f64::powf),
        B::Pow => fail(span, "`^` takes scalars; use `.^` elementwise"),
        B::EltPow => zip_real(a, b, name, span, f64::powf),
    }
}

/// `-x`, `+x`, `!x`.
pub fn unary(op: UnaryOp, x: &Typed, span: Span) -> Result<Typed, HostError> {
    match op {
        UnaryOp::Plus => Ok(x.clone()),
        UnaryOp::Neg => match &x.value.values {
            Values::Int(v) => Ok(int_result(
                v.iter().map(|&i| -i).collect(),
                x.shape().to_vec(),
                x.elem,
            )),
            Values::Real(_) => Ok(map_real(x, |v| -v)),
        },
        UnaryOp::Not => Ok(bool_value(!truth(x, span)?)),
    }
}

/// `x'`.
pub fn transpose(x: &Typed, span: Span) -> Result<Typed, HostError> {
    match (x.elem, x.shape()) {
        (Elem::Vector, [_]) => Ok(Typed::new(x.value.to_real(), Elem::RowVector)),
        (Elem::RowVector, [_]) => Ok(Typed::new(x.value.to_real(), Elem::Vector)),
        (Elem::Matrix, &[r, c]) => {
            let v = x.reals();
            let mut t = vec![0.0; r * c];
            for i in 0..r {
                for j in 0..c {
                    t[j * r + i] = v[i * c + j];
                }
            }
            Ok(Typed::matrix(c, r, t))
        }
        _ => fail(
            span,
            format!("`'` transposes a vector or matrix, not {}", x.describe()),
        ),
    }
}

impl Interp<'_> {
    /// Evaluates `expr`.
    pub fn eval(&mut self, expr: &Expr) -> Result<Typed, HostError> {
        let span = expr.span;
        match &expr.kind {
            ExprKind::Int(i) => Ok(Typed::int(*i)),
            ExprKind::Real(x) => Ok(Typed::real(*x)),
            ExprKind::Var(ident) => match self.lookup(&ident.name) {
                Some(value) => Ok(value.clone()),
                None => fail(span, format!("`{}` is not known here", ident.name)),
            },
            ExprKind::Paren(inner) => self.eval(inner),
            ExprKind::Unary { op, operand } => {
                let value = self.eval(operand)?;
                unary(*op, &value, span)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let a = self.eval(lhs)?;
                // `&&` and `||` short-circuit, as in C++.
                match op {
                    BinaryOp::And if !truth(&a, lhs.span)? => return Ok(bool_value(false)),
                    BinaryOp::Or if truth(&a, lhs.span)? => return Ok(bool_value(true)),
                    _ => {}
                }
                let b = self.eval(rhs)?;
                binary(*op, &a, &b, span)
            }
            ExprKind::Ternary {
                cond,
                then,
                otherwise,
            } => {
                let c = self.eval(cond)?;
                if truth(&c, cond.span)? {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            ExprKind::Transpose(inner) => {
                let value = self.eval(inner)?;
                transpose(&value, span)
            }
            ExprKind::Call { name, args } | ExprKind::CondCall { name, args } => {
                let values = args
                    .iter()
                    .map(|arg| self.eval(arg))
                    .collect::<Result<Vec<_>, _>>()?;
                self.call(&name.name, &values, span)
            }
            ExprKind::Index { base, indices } => {
                // Index a variable in place: copying it whole for each element read would
                // make a loop over its elements quadratic.
                if let ExprKind::Var(ident) = &base.kind
                    && let Some(shape) = self.lookup(&ident.name).map(|v| v.shape().to_vec())
                {
                    let sels = self.resolve(indices, &shape, span)?;
                    let value = self.lookup(&ident.name).expect("looked up above");
                    return select(value, &sels, span);
                }
                let value = self.eval(base)?;
                let sels = self.resolve(indices, value.shape(), span)?;
                select(&value, &sels, span)
            }
            ExprKind::ArrayLit(items) => {
                let values = items
                    .iter()
                    .map(|item| self.eval(item))
                    .collect::<Result<Vec<_>, _>>()?;
                stack(&values, None, span)
            }
            ExprKind::RowVectorLit(items) => {
                let values = items
                    .iter()
                    .map(|item| self.eval(item))
                    .collect::<Result<Vec<_>, _>>()?;
                if values.iter().all(Typed::is_scalar) {
                    Ok(Typed::vector(
                        values.iter().map(|v| v.real_at(0)).collect(),
                        Elem::RowVector,
                    ))
                } else {
                    stack(&values, Some(Elem::Matrix), span)
                }
            }
            ExprKind::GetTarget => fail(span, "`target()` is only available in the model"),
        }
    }

    /// Resolves the indices in one pair of brackets against `shape`.
    pub(super) fn resolve(
        &mut self,
        indices: &[Index],
        shape: &[usize],
        span: Span,
    ) -> Result<Vec<Sel>, HostError> {
        if indices.len() > shape.len() {
            return fail(
                span,
                format!(
                    "{} indexes for a value with {} dimensions",
                    indices.len(),
                    shape.len()
                ),
            );
        }
        let mut sels = Vec::with_capacity(indices.len());
        for (index, &dim) in indices.iter().zip(shape) {
            let int = |this: &mut Self, e: &Expr| -> Result<i64, HostError> {
                this.eval(e)?.value.as_int().ok_or_else(|| HostError {
                    span: e.span,
                    message: "an index must be an int".into(),
                })
            };
            let range = |lo: i64, hi: i64, span: Span| -> Result<Sel, HostError> {
                let mut picks = Vec::new();
                if hi >= lo {
                    check_index(lo, dim, span)?;
                    check_index(hi, dim, span)?;
                    picks.extend(lo as usize - 1..hi as usize);
                }
                Ok(Sel::Many(picks))
            };
            sels.push(match index {
                Index::All => Sel::Many((0..dim).collect()),
                Index::Single(e) => {
                    let value = self.eval(e)?;
                    match (&value.value.values, value.shape()) {
                        (Values::Int(v), []) => Sel::One(check_index(v[0], dim, e.span)?),
                        (Values::Int(v), [_]) => Sel::Many(
                            v.iter()
                                .map(|&i| check_index(i, dim, e.span))
                                .collect::<Result<_, _>>()?,
                        ),
                        _ => {
                            return fail(
                                e.span,
                                format!(
                                    "an index must be an int or an array of ints, not {}",
                                    value.describe()
                                ),
                            );
                        }
                    }
                }
                Index::From(a) => {
                    let lo = int(self, a)?;
                    range(lo, dim as i64, a.span)?
                }
                Index::UpTo(b) => {
                    let hi = int(self, b)?;
                    range(1, hi, b.span)?
                }
                Index::Between(a, b) => {
                    let lo = int(self, a)?;
                    let hi = int(self, b)?;
                    range(lo, hi, a.span.to(b.span))?
                }
            });
        }
        Ok(sels)
    }

    /// The text of a `print`, `reject` or `fatal_error` statement.
    pub(super) fn printables(&mut self, items: &[Printable]) -> Result<String, HostError> {
        let mut text = String::new();
        for item in items {
            match item {
                Printable::Str(s, _) => text.push_str(s),
                Printable::Expr(e) => {
                    let value = self.eval(e)?;
                    text.push_str(&format_value(&value));
                }
            }
        }
        Ok(text)
    }
}

/// Stan's print format: scalars plain, containers in brackets.
pub fn format_value(value: &Typed) -> String {
    fn rec(value: &Value, offset: usize, dims: &[usize], out: &mut String) {
        match dims.split_first() {
            None => match &value.values {
                Values::Int(v) => out.push_str(&v[offset].to_string()),
                Values::Real(v) => out.push_str(&v[offset].to_string()),
            },
            Some((&n, rest)) => {
                let stride: usize = rest.iter().product();
                out.push('[');
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    rec(value, offset + i * stride, rest, out);
                }
                out.push(']');
            }
        }
    }
    let mut out = String::new();
    rec(&value.value, 0, value.shape(), &mut out);
    out
}

/// `{a, b, c}` (or `[r1, r2]` rows into a matrix): values of one type stacked on a new
/// first dimension; ints are promoted to reals when any item is real.
fn stack(items: &[Typed], elem: Option<Elem>, span: Span) -> Result<Typed, HostError> {
    let Some(first) = items.first() else {
        return fail(span, "an empty array or row vector expression");
    };
    for item in items {
        if item.shape() != first.shape() {
            return fail(
                span,
                format!(
                    "items of an array expression differ: {} and {}",
                    first.describe(),
                    item.describe()
                ),
            );
        }
    }
    let mut shape = vec![items.len()];
    shape.extend_from_slice(first.shape());
    let values = if items.iter().all(Typed::is_int) {
        Values::Int(
            items
                .iter()
                .flat_map(|item| match &item.value.values {
                    Values::Int(v) => v.clone(),
                    Values::Real(_) => Vec::new(),
                })
                .collect(),
        )
    } else {
        Values::Real(items.iter().flat_map(Typed::reals).collect())
    };
    let elem = match elem {
        Some(Elem::Matrix) if first.elem == Elem::RowVector => Elem::Matrix,
        Some(Elem::Matrix) => {
            return fail(span, "a matrix expression `[...]` needs row vectors");
        }
        _ => first.elem,
    };
    Ok(Typed::new(Value { shape, values }, elem))
}
