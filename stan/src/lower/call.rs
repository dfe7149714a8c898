//! Stan functions on values that depend on parameters, as IR expressions.

use sampler::{BinaryOp as Op, Expr as Ir, UnaryOp as Un};

use super::expr::describe;
use std::f64::consts::SQRT_2;

use super::sym::{Sym, Val, add, bin, c, div, mul, sub, un};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{Expr, Span};
use crate::value::Value;

impl Lowerer {
    /// `name(args)` where some argument depends on parameters (or the host refused it).
    pub(super) fn call(
        &mut self,
        name: &str,
        name_span: Span,
        args: &[Expr],
        span: Span,
    ) -> Result<Val, LowerError> {
        if let Some(def) = std::rc::Rc::clone(&self.functions).callee(name) {
            return self.call_user_value(def, args, span);
        }
        // `std_normal_lcdf(x)` and `std_normal_lpdf(x)` have no bar.
        if name.ends_with("_lcdf")
            || name.ends_with("_lccdf")
            || super::density::density_base(name).is_some()
        {
            return self.cond_call(name, name_span, args, span);
        }
        // Sizes are known even for symbolic values.
        if let ("size" | "num_elements" | "rows" | "cols" | "dims", [x]) = (name, args) {
            let v = self.eval(x)?;
            let dims = v.dims();
            if name == "dims" {
                let dims = dims.iter().map(|&d| d as i64).collect::<Vec<_>>();
                let n = dims.len();
                return Ok(Val::Known(
                    Value {
                        shape: vec![n],
                        values: crate::value::Values::Int(dims),
                    },
                    None,
                ));
            }
            let n = match name {
                "size" => dims.first().copied().unwrap_or(1),
                "num_elements" => dims.iter().product(),
                "rows" => dims.first().copied().unwrap_or(1),
                _ => dims.get(1).copied().unwrap_or(1),
            };
            return Ok(Val::Known(Value::int(n as i64), None));
        }
        let mut vals = Vec::with_capacity(args.len());
        for arg in args {
            vals.push(self.eval(arg)?);
        }
        if let Some(v) = self.matrix_call(name, &vals, args, span)? {
            return Ok(v);
        }
        let elementwise: Option<fn(Ir) -> Ir> = match name {
            "exp" => Some(|x| un(Un::Exp, x)),
            "log" => Some(|x| un(Un::Log, x)),
            "log1p" => Some(|x| un(Un::Log1p, x)),
            "expm1" => Some(|x| un(Un::Expm1, x)),
            "log1p_exp" => Some(|x| un(Un::Softplus, x)),
            "inv_logit" => Some(|x| un(Un::Logistic, x)),
            "log_inv_logit" => Some(|x| un(Un::Neg, un(Un::Softplus, un(Un::Neg, x)))),
            "log1m_inv_logit" => Some(|x| un(Un::Neg, un(Un::Softplus, x))),
            "log1m" => Some(|x| un(Un::Log1p, un(Un::Neg, x))),
            "sqrt" => Some(|x| un(Un::Sqrt, x)),
            "inv_sqrt" => Some(|x| div(c(1.0), un(Un::Sqrt, x))),
            "fabs" | "abs" => Some(|x| un(Un::Abs, x)),
            "square" => Some(|x| bin(Op::Pow, x, c(2.0))),
            "inv" => Some(|x| div(c(1.0), x)),
            "inv_square" => Some(|x| bin(Op::Pow, x, c(-2.0))),
            "lgamma" => Some(|x| un(Un::Lgamma, x)),
            "log10" => Some(|x| div(un(Un::Log, x), c(std::f64::consts::LN_10))),
            "log2" => Some(|x| div(un(Un::Log, x), c(std::f64::consts::LN_2))),
            "exp2" => Some(|x| bin(Op::Pow, c(2.0), x)),
            "cbrt" => Some(|x| bin(Op::Pow, x, c(1.0 / 3.0))),
            "to_vector" | "to_array_1d" | "to_row_vector" => Some(|x| x),
            "Phi" => Some(|x| un(Un::Exp, un(Un::LogPhi, x))),
            // erfc(x) = 2 Phi(-sqrt(2) x), erf(x) = 2 Phi(sqrt(2) x) - 1.
            "erfc" => Some(|x| mul(c(2.0), un(Un::Exp, un(Un::LogPhi, mul(c(-SQRT_2), x))))),
            "erf" => Some(|x| {
                let phi = un(Un::Exp, un(Un::LogPhi, mul(c(SQRT_2), x)));
                sub(mul(c(2.0), phi), c(1.0))
            }),
            // Stan's Phi_approx: inv_logit(0.07056 x^3 + 1.5976 x).
            "Phi_approx" => Some(|x| {
                let cubic = mul(c(0.07056), bin(Op::Pow, x.clone(), c(3.0)));
                un(Un::Logistic, add(cubic, mul(c(1.5976), x)))
            }),
            _ => None,
        };
        if let Some(f) = elementwise {
            let [x] = &vals[..] else {
                return self.arity(name, name_span, 1, args.len());
            };
            let (ir, dims) = self.whole(x.clone(), args[0].span)?;
            let dims = if name.starts_with("to_") {
                vec![dims.iter().product()]
            } else {
                dims
            };
            return Ok(Val::Sym(Sym::whole(f(ir), dims)));
        }
        // Functions whose argument appears twice get a shared argument.
        match (name, &vals[..]) {
            ("logit", [x]) => {
                let (x, dims) = self.shared(x.clone(), args[0].span)?;
                let one_minus = sub(c(1.0), x.clone());
                Ok(Val::Sym(Sym::whole(un(Un::Log, div(x, one_minus)), dims)))
            }
            ("sum", [x]) => {
                let (x, _) = self.whole(x.clone(), args[0].span)?;
                Ok(Val::scalar(un(Un::Sum, x)))
            }
            ("mean", [x]) => {
                let (x, dims) = self.whole(x.clone(), args[0].span)?;
                let n = dims.iter().product::<usize>() as f64;
                Ok(Val::scalar(div(un(Un::Sum, x), c(n))))
            }
            ("cumulative_sum", [x]) => {
                let (x, dims) = self.whole(x.clone(), args[0].span)?;
                Ok(Val::Sym(Sym::whole(un(Un::Cumsum, x), dims)))
            }
            ("log_sum_exp", [x]) => {
                let (x, _) = self.whole(x.clone(), args[0].span)?;
                Ok(Val::scalar(un(Un::LogSumExp, x)))
            }
            ("log_sum_exp", [a, b]) => {
                let a = self.scalar_arg(a.clone(), &args[0])?;
                let b = self.scalar_arg(b.clone(), &args[1])?;
                Ok(Val::scalar(un(Un::LogSumExp, Ir::Concat(vec![a, b]))))
            }
            ("log_mix", [theta, a, b]) => {
                let theta = self.scalar_arg(theta.clone(), &args[0])?;
                let theta = self.share(theta, &[]);
                let a = self.scalar_arg(a.clone(), &args[1])?;
                let b = self.scalar_arg(b.clone(), &args[2])?;
                let first = add(un(Un::Log, theta.clone()), a);
                let second = add(un(Un::Log1p, un(Un::Neg, theta)), b);
                Ok(Val::scalar(un(
                    Un::LogSumExp,
                    Ir::Concat(vec![first, second]),
                )))
            }
            ("softmax" | "log_softmax", [x]) => {
                let (x, dims) = self.shared(x.clone(), args[0].span)?;
                let centred = sub(x.clone(), un(Un::LogSumExp, x));
                let ir = if name == "softmax" {
                    un(Un::Exp, centred)
                } else {
                    centred
                };
                Ok(Val::Sym(Sym::whole(ir, dims)))
            }
            ("fmax" | "fmin" | "max" | "min", [a, b]) => {
                let op = if name.ends_with("max") {
                    Op::Max
                } else {
                    Op::Min
                };
                let (da, db) = (a.dims().to_vec(), b.dims().to_vec());
                if !(da.is_empty() || db.is_empty() || da == db) {
                    return Err(LowerError::new(
                        span,
                        format!("`{name}` of {} and {}", describe(&da), describe(&db)),
                    ));
                }
                let dims = if da.is_empty() { db } else { da };
                let (a, _) = self.whole(a.clone(), args[0].span)?;
                let (b, _) = self.whole(b.clone(), args[1].span)?;
                Ok(Val::Sym(Sym::whole(bin(op, a, b), dims)))
            }
            ("pow", [a, b]) => {
                self.binary(crate::ast::BinaryOp::Pow, a.clone(), b.clone(), span, false)
            }
            ("dot_product", [a, b]) => {
                let (a, da) = self.whole(a.clone(), args[0].span)?;
                let (b, db) = self.whole(b.clone(), args[1].span)?;
                if da.len() != 1 || da != db {
                    return Err(LowerError::new(
                        span,
                        format!(
                            "`dot_product` of {} and {}: it takes two vectors of one length",
                            describe(&da),
                            describe(&db)
                        ),
                    ));
                }
                Ok(Val::scalar(bin(Op::Dot, a, b)))
            }
            ("prod", [x]) => {
                let (x, dims) = self.shared(x.clone(), args[0].span)?;
                let n: usize = dims.iter().product();
                let product = (0..n).fold(c(1.0), |acc, k| {
                    super::sym::mul(acc, super::sym::elem(x.clone(), k))
                });
                Ok(Val::scalar(product))
            }
            ("dot_self", [x]) => {
                let (x, _) = self.shared(x.clone(), args[0].span)?;
                Ok(Val::scalar(bin(Op::Dot, x.clone(), x)))
            }
            ("rep_vector" | "rep_array" | "rep_row_vector", [x, _]) => {
                if !x.dims().is_empty() {
                    return unsupported(span, format!("`{name}` of a container"));
                }
                let n = match self.known(&args[1], "a size")?.as_int() {
                    Some(n) if n >= 0 => n as usize,
                    _ => return Err(LowerError::new(args[1].span, "a size must be >= 0")),
                };
                let (x, _) = self.whole(x.clone(), args[0].span)?;
                let x = self.share(x, &[]);
                Ok(Val::Sym(Sym::whole(Ir::Concat(vec![x; n]), vec![n])))
            }
            ("head" | "tail", [x, _]) => {
                let n = self.known_int(&args[1], "a size")?;
                let total = x.dims().first().copied().unwrap_or(0);
                if n < 0 || n as usize > total {
                    return Err(LowerError::new(
                        args[1].span,
                        format!("`{name}` of {n} elements of {}", describe(x.dims())),
                    ));
                }
                let start = if name == "head" {
                    0
                } else {
                    total - n as usize
                };
                self.segment(x.clone(), start, n as usize, span)
            }
            ("segment", [x, _, _]) => {
                let i = self.known_int(&args[1], "a position")?;
                let n = self.known_int(&args[2], "a size")?;
                let total = x.dims().first().copied().unwrap_or(0) as i64;
                if i < 1 || n < 0 || i - 1 + n > total {
                    return Err(LowerError::new(
                        span,
                        format!("`segment` of {n} from {i} is outside 1..={total}"),
                    ));
                }
                self.segment(x.clone(), (i - 1) as usize, n as usize, span)
            }
            ("log_diff_exp", [a, b]) => {
                // log(exp(a) - exp(b)) = a + log1m(exp(b - a))
                let a = self.scalar_arg(a.clone(), &args[0])?;
                let a = self.share(a, &[]);
                let b = self.scalar_arg(b.clone(), &args[1])?;
                let inner = un(Un::Exp, sub(b, a.clone()));
                Ok(Val::scalar(add(a, un(Un::Log1p, un(Un::Neg, inner)))))
            }
            _ => unsupported(
                span,
                format!(
                    "the function `{name}` with {} argument(s) on values that depend on parameters",
                    args.len()
                ),
            ),
        }
    }

    fn segment(&mut self, x: Val, start: usize, n: usize, span: Span) -> Result<Val, LowerError> {
        let dims = x.dims().to_vec();
        if dims.len() != 1 {
            return unsupported(span, format!("a segment of {}", describe(&dims)));
        }
        let selection = super::expr::Selection {
            positions: (start..start + n).collect(),
            dims: vec![n],
        };
        self.apply_selection(x, selection, span)
    }

    fn arity<T>(&self, name: &str, span: Span, n: usize, found: usize) -> Result<T, LowerError> {
        Err(LowerError::new(
            span,
            format!("`{name}` takes {n} argument(s), found {found}"),
        ))
    }

    /// A scalar argument as IR.
    pub(super) fn scalar_arg(&mut self, v: Val, arg: &Expr) -> Result<Ir, LowerError> {
        let (ir, dims) = self.whole(v, arg.span)?;
        if !dims.is_empty() {
            return Err(LowerError::new(
                arg.span,
                format!("expected a scalar, found {}", describe(&dims)),
            ));
        }
        Ok(ir)
    }

    /// A value as IR that may be repeated: large expressions get a hidden name.
    pub(super) fn shared(&mut self, v: Val, span: Span) -> Result<(Ir, Vec<usize>), LowerError> {
        let (ir, dims) = self.whole(v, span)?;
        Ok((self.share(ir, &dims), dims))
    }
}
