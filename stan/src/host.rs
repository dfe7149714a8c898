//! Evaluation of Stan expressions on the host, over data and transformed data: sizes, bounds,
//! and the `transformed data` block.

use std::collections::BTreeMap;

use crate::ast::{BinaryOp, Expr, ExprKind, Index, Span, UnaryOp};
use crate::value::{Value, Values};

/// Named host values in scope.
pub type Env = BTreeMap<String, Value>;

/// Why an expression cannot be evaluated on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostError {
    pub span: Span,
    pub message: String,
}

fn fail<T>(span: Span, message: impl Into<String>) -> Result<T, HostError> {
    Err(HostError {
        span,
        message: message.into(),
    })
}

/// Evaluates `expr` over `env`.
pub fn eval(expr: &Expr, env: &Env) -> Result<Value, HostError> {
    let span = expr.span;
    match &expr.kind {
        ExprKind::Int(i) => Ok(Value::int(*i)),
        ExprKind::Real(x) => Ok(Value::real(*x)),
        ExprKind::Var(ident) => match env.get(&ident.name) {
            Some(value) => Ok(value.clone()),
            None => fail(
                span,
                format!("`{}` is not known before sampling", ident.name),
            ),
        },
        ExprKind::Paren(inner) => eval(inner, env),
        ExprKind::Unary { op, operand } => {
            let value = eval(operand, env)?;
            match op {
                UnaryOp::Plus => Ok(value),
                UnaryOp::Neg => map(&value, |x| -x, Some(|x: i64| x.checked_neg()), span),
                UnaryOp::Not => fail(span, "`!` is not supported yet"),
            }
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let (a, b) = (eval(lhs, env)?, eval(rhs, env)?);
            binary(*op, &a, &b, span)
        }
        ExprKind::Call { name, args } => {
            let values = args
                .iter()
                .map(|arg| eval(arg, env))
                .collect::<Result<Vec<_>, _>>()?;
            call(&name.name, &values, span)
        }
        ExprKind::Index { base, indices } => {
            let value = eval(base, env)?;
            let mut positions = Vec::with_capacity(indices.len());
            for index in indices {
                let Index::Single(e) = index else {
                    return fail(span, "only single indices are supported yet");
                };
                match eval(e, env)?.as_int() {
                    Some(i) => positions.push(i),
                    None => return fail(e.span, "an index must be an integer"),
                }
            }
            index(&value, &positions, span)
        }
        _ => fail(
            span,
            "this expression is not supported in data computations yet",
        ),
    }
}

/// `value[positions]` with 1-based positions; selects a scalar or a sub-array.
pub fn index(value: &Value, positions: &[i64], span: Span) -> Result<Value, HostError> {
    if positions.len() > value.shape.len() {
        return fail(span, "too many indices");
    }
    let mut offset = 0usize;
    let mut stride: usize = value.shape.iter().product();
    for (dim, &pos) in value.shape.iter().zip(positions) {
        stride /= (*dim).max(1);
        if pos < 1 || pos as u64 > *dim as u64 {
            return fail(span, format!("index {pos} out of range 1..={dim}"));
        }
        offset += (pos as usize - 1) * stride;
    }
    let shape = value.shape[positions.len()..].to_vec();
    let len: usize = shape.iter().product();
    let values = match &value.values {
        Values::Int(v) => Values::Int(v[offset..offset + len].to_vec()),
        Values::Real(v) => Values::Real(v[offset..offset + len].to_vec()),
    };
    Ok(Value { shape, values })
}

fn map(
    value: &Value,
    real: impl Fn(f64) -> f64,
    int: Option<impl Fn(i64) -> Option<i64>>,
    span: Span,
) -> Result<Value, HostError> {
    let values = match (&value.values, int) {
        (Values::Int(v), Some(f)) => {
            let mut out = Vec::with_capacity(v.len());
            for &x in v {
                match f(x) {
                    Some(y) => out.push(y),
                    None => return fail(span, "integer overflow"),
                }
            }
            Values::Int(out)
        }
        _ => Values::Real(value.reals().into_iter().map(real).collect()),
    };
    Ok(Value {
        shape: value.shape.clone(),
        values,
    })
}

fn broadcast_shape(a: &Value, b: &Value, span: Span) -> Result<Vec<usize>, HostError> {
    if a.is_scalar() {
        Ok(b.shape.clone())
    } else if b.is_scalar() || a.shape == b.shape {
        Ok(a.shape.clone())
    } else {
        fail(
            span,
            format!(
                "operands of sizes {:?} and {:?} do not match",
                a.shape, b.shape
            ),
        )
    }
}

fn binary(op: BinaryOp, a: &Value, b: &Value, span: Span) -> Result<Value, HostError> {
    use BinaryOp as B;
    let elementwise = match op {
        B::Add | B::Sub | B::EltMul | B::EltDiv | B::EltPow => true,
        B::Mul | B::Div | B::Pow | B::Mod | B::IntDiv => a.is_scalar() || b.is_scalar(),
        _ => false,
    };
    if !elementwise {
        return fail(
            span,
            format!(
                "`{}` is not supported in data computations yet",
                op.as_str()
            ),
        );
    }
    let shape = broadcast_shape(a, b, span)?;
    let len: usize = shape.iter().product::<usize>().max(1);
    let pick = |v: &Value, i: usize| if v.is_scalar() { 0 } else { i };
    let int_result = a.is_int() && b.is_int() && !matches!(op, B::Pow | B::EltPow | B::EltDiv);
    if int_result {
        let (Values::Int(x), Values::Int(y)) = (&a.values, &b.values) else {
            return fail(span, "internal: integer operands expected");
        };
        let mut out = Vec::with_capacity(len);
        for i in 0..len {
            let (p, q) = (x[pick(a, i)], y[pick(b, i)]);
            let r = match op {
                B::Add => p.checked_add(q),
                B::Sub => p.checked_sub(q),
                B::Mul | B::EltMul => p.checked_mul(q),
                B::Div | B::IntDiv => p.checked_div(q),
                B::Mod => p.checked_rem(q),
                _ => None,
            };
            match r {
                Some(r) => out.push(r),
                None => return fail(span, "integer overflow or division by zero"),
            }
        }
        return Ok(Value {
            shape,
            values: Values::Int(out),
        });
    }
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let (p, q) = (a.real_at(pick(a, i)), b.real_at(pick(b, i)));
        out.push(match op {
            B::Add => p + q,
            B::Sub => p - q,
            B::Mul | B::EltMul => p * q,
            B::Div | B::EltDiv => p / q,
            B::Pow | B::EltPow => p.powf(q),
            _ => return fail(span, format!("`{}` needs integers", op.as_str())),
        });
    }
    Ok(Value {
        shape,
        values: Values::Real(out),
    })
}

fn call(name: &str, args: &[Value], span: Span) -> Result<Value, HostError> {
    let unary: Option<fn(f64) -> f64> = match name {
        "log" => Some(f64::ln),
        "log10" => Some(f64::log10),
        "log2" => Some(f64::log2),
        "exp" => Some(f64::exp),
        "log1p" => Some(f64::ln_1p),
        "expm1" => Some(f64::exp_m1),
        "sqrt" => Some(f64::sqrt),
        "fabs" => Some(f64::abs),
        "square" => Some(|x| x * x),
        "inv_logit" => Some(|x| 1.0 / (1.0 + (-x).exp())),
        "logit" => Some(|x: f64| (x / (1.0 - x)).ln()),
        _ => None,
    };
    if let Some(f) = unary {
        let [x] = args else {
            return fail(span, format!("`{name}` takes one argument"));
        };
        return map(x, f, None::<fn(i64) -> Option<i64>>, span);
    }
    match (name, args) {
        ("abs", [x]) => map(x, f64::abs, Some(|v: i64| v.checked_abs()), span),
        ("pow", [a, b]) => binary(BinaryOp::EltPow, a, b, span),
        ("sum", [x]) => Ok(match &x.values {
            Values::Int(v) => Value::int(v.iter().fold(0i64, |s, &y| s.wrapping_add(y))),
            Values::Real(v) => Value::real(v.iter().sum()),
        }),
        ("mean", [x]) if !x.is_empty() => {
            Ok(Value::real(x.reals().iter().sum::<f64>() / x.len() as f64))
        }
        ("sd", [x]) if x.len() > 1 => {
            let v = x.reals();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let ss: f64 = v.iter().map(|y| (y - mean) * (y - mean)).sum();
            Ok(Value::real((ss / (v.len() - 1) as f64).sqrt()))
        }
        ("size" | "num_elements", [x]) => Ok(Value::int(if name == "size" {
            x.shape.first().copied().unwrap_or(1)
        } else {
            x.len()
        } as i64)),
        ("rows", [x]) => Ok(Value::int(x.shape.first().copied().unwrap_or(1) as i64)),
        ("cols", [x]) => Ok(Value::int(x.shape.get(1).copied().unwrap_or(1) as i64)),
        ("rep_vector", [x, n]) => match (x.as_real(), n.as_int()) {
            (Some(x), Some(n)) if (0..=crate::data::MAX_VALUES as i64).contains(&n) => Ok(Value {
                shape: vec![n as usize],
                values: Values::Real(vec![x; n as usize]),
            }),
            _ => fail(span, "`rep_vector` takes a real and a size"),
        },
        _ => fail(
            span,
            format!(
                "`{name}` with {} argument(s) is not supported in data computations yet",
                args.len()
            ),
        ),
    }
}
