//! Truncation, `y ~ dist(...) T[L, U]`, as Stan 2.35 generates it: the density of `y`, a
//! check that `y` lies in `[L, U]` (the draw is rejected otherwise), and minus the log
//! probability of `[L, U]`: `log_diff_exp(lcdf(U), lcdf(L))`, `lccdf(L)` or `lcdf(U)`, with
//! `L - 1` in place of `L` for counts. The log CDFs are IR expressions for the families where
//! one can be written with the IR's operations: normal and lognormal (`log_phi`), logistic,
//! exponential, weibull, uniform, and poisson and binomial with known bounds (finite sums).
//! Any other family is truncated when its arguments and bounds are known before sampling (the
//! normalising term is then a constant): `sigma ~ cauchy(0, 2.5) T[0, ]`. With parameter
//! arguments, cauchy needs `atan`, student_t the incomplete beta function and gamma the
//! incomplete gamma function, none of which the IR has.

use sampler::{BinaryOp as Op, DataValue, Expr as Ir, UnaryOp as Un};

use super::sym::{Val, add, bin, c, div, mul, sub, un};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{Expr, Ident, Span, Truncation};
use crate::value::Value;

/// Most terms of a count distribution's CDF written out as a sum.
const MAX_COUNT_TERMS: i64 = 1000;

/// A bound or argument: its IR and, when known before sampling, its value.
#[derive(Clone)]
struct Operand {
    ir: Ir,
    known: Option<Value>,
    span: Span,
}

impl Operand {
    fn known_int(&self, what: &str) -> Result<i64, LowerError> {
        self.known.as_ref().and_then(Value::as_int).ok_or_else(|| {
            LowerError::new(
                self.span,
                format!("{what} must be an integer known before sampling"),
            )
        })
    }
}

/// Which side of the CDF.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// `log P(Y <= x)`.
    Lower,
    /// `log P(Y > x)`.
    Upper,
}

/// `log(exp(a) - exp(b))` for `a > b`.
fn log_diff_exp(a: Ir, b: Ir) -> Ir {
    add(
        a.clone(),
        un(Un::Log1p, un(Un::Neg, un(Un::Exp, sub(b, a)))),
    )
}

/// Why `family`'s CDF has no IR form: the operation it needs that the IR lacks.
fn missing_cdf(family: &str) -> &'static str {
    match family {
        "cauchy" => "its CDF needs `atan`, which the IR lacks",
        "student_t" => "its CDF needs the incomplete beta function, which the IR lacks",
        "gamma" | "inv_gamma" | "chi_square" => {
            "its CDF needs the incomplete gamma function, which the IR lacks"
        }
        _ => "its CDF has no IR form yet",
    }
}

impl Lowerer {
    fn operand(&mut self, e: &Expr) -> Result<Operand, LowerError> {
        let v = self.eval(e)?;
        let known = match &v {
            Val::Known(value, _) => Some(value.clone()),
            Val::Sym(_) => None,
        };
        let (ir, dims) = self.whole(v, e.span)?;
        if !dims.is_empty() {
            return unsupported(
                e.span,
                "a truncation bound or argument that is not a scalar",
            );
        }
        Ok(Operand {
            ir,
            known,
            span: e.span,
        })
    }

    /// The truncation of `value ~ dist(args)` (its density is added by `sample`).
    pub(super) fn truncate(
        &mut self,
        value: &Expr,
        dist: &Ident,
        args: &[Expr],
        t: &Truncation,
    ) -> Result<(), LowerError> {
        let family = dist.name.as_str();
        let counts = matches!(family, "poisson" | "binomial");
        let has_log_cdf = counts
            || matches!(
                family,
                "normal" | "lognormal" | "logistic" | "exponential" | "uniform" | "weibull"
            );
        let y = self.operand(value)?;
        let lower = t.lower.as_ref().map(|e| self.operand(e)).transpose()?;
        let upper = t.upper.as_ref().map(|e| self.operand(e)).transpose()?;
        let args = args
            .iter()
            .map(|e| self.operand(e))
            .collect::<Result<Vec<_>, _>>()?;
        // The value must lie within the bounds: decided now when everything is known, else
        // checked at each draw.
        for (bound, below) in [(&lower, true), (&upper, false)] {
            let Some(bound) = bound else { continue };
            match (&y.known, &bound.known) {
                (Some(yv), Some(bv)) => {
                    let (yv, bv) = (yv.real_at(0), bv.real_at(0));
                    if (below && yv < bv) || (!below && yv > bv) {
                        return Err(LowerError::new(
                            value.span,
                            format!(
                                "the value {yv} is outside the truncation `T[...]` (bound {bv}): \
                                 every draw would be rejected"
                            ),
                        ));
                    }
                }
                _ => {
                    let gap = if below {
                        sub(y.ir.clone(), bound.ir.clone())
                    } else {
                        sub(bound.ir.clone(), y.ir.clone())
                    };
                    self.add_factor(Val::scalar(un(Un::LogStep, gap)), 1.0, bound.span)?;
                }
            }
        }
        let everything_known = args.iter().all(|a| a.known.is_some())
            && lower.iter().chain(&upper).all(|b| b.known.is_some());
        if everything_known {
            // The normalising term is a constant, whatever the family.
            return Ok(());
        }
        if !has_log_cdf {
            return unsupported(
                t.span,
                format!(
                    "truncation of `{family}` with arguments or bounds that depend on \
                     parameters ({})",
                    missing_cdf(family)
                ),
            );
        }
        // Counts: P(Y >= L) = 1 - P(Y <= L - 1).
        let lower_point = |b: &Operand| -> Result<Operand, LowerError> {
            if !counts {
                return Ok(b.clone());
            }
            let l = b.known_int("a truncation bound of a count distribution")?;
            Ok(Operand {
                ir: c((l - 1) as f64),
                known: Some(Value::int(l - 1)),
                span: b.span,
            })
        };
        let log_mass = match (&lower, &upper) {
            (Some(l), Some(u)) => {
                let l = lower_point(l)?;
                let upper_cdf = self.log_cdf(family, u, &args, Tail::Lower, t.span)?;
                let lower_cdf = self.log_cdf(family, &l, &args, Tail::Lower, t.span)?;
                match lower_cdf {
                    // No mass below the lower bound (`T[0, U]` of counts).
                    Ir::Const(x) if x == f64::NEG_INFINITY => upper_cdf,
                    lower_cdf => log_diff_exp(upper_cdf, lower_cdf),
                }
            }
            (Some(l), None) => {
                let l = lower_point(l)?;
                self.log_cdf(family, &l, &args, Tail::Upper, t.span)?
            }
            (None, Some(u)) => self.log_cdf(family, u, &args, Tail::Lower, t.span)?,
            (None, None) => return Ok(()),
        };
        self.add_factor(Val::scalar(log_mass), -1.0, t.span)
    }

    /// `family_lcdf(args[0] | args[1..])` (`upper` false) or `family_lccdf(...)` as a value
    /// of scalars; `None` when the family's CDF has no IR form here.
    pub(super) fn log_cdf_call(
        &mut self,
        family: &str,
        upper: bool,
        args: &[Expr],
        span: Span,
    ) -> Result<Option<Val>, LowerError> {
        let known_families = [
            "normal",
            "std_normal",
            "lognormal",
            "logistic",
            "exponential",
            "uniform",
            "weibull",
        ];
        if !known_families.contains(&family) {
            return Ok(None);
        }
        let Some((x, rest)) = args.split_first() else {
            return Err(LowerError::new(
                span,
                format!("`{family}` CDFs need a value"),
            ));
        };
        let x = self.operand(x)?;
        let rest = rest
            .iter()
            .map(|e| self.operand(e))
            .collect::<Result<Vec<_>, _>>()?;
        let tail = if upper { Tail::Upper } else { Tail::Lower };
        Ok(Some(Val::scalar(
            self.log_cdf(family, &x, &rest, tail, span)?,
        )))
    }

    /// `family_lcdf(x | args)` (`Tail::Lower`) or `family_lccdf(x | args)` as IR.
    fn log_cdf(
        &mut self,
        family: &str,
        x: &Operand,
        args: &[Operand],
        tail: Tail,
        span: Span,
    ) -> Result<Ir, LowerError> {
        let arity = |n: usize| super::density::check_arity(family, span, n, args.len());
        let a = |k: usize| args[k].ir.clone();
        let xi = x.ir.clone();
        Ok(match family {
            "std_normal" => {
                arity(0)?;
                match tail {
                    Tail::Lower => un(Un::LogPhi, xi),
                    Tail::Upper => un(Un::LogPhi, un(Un::Neg, xi)),
                }
            }
            "normal" | "lognormal" => {
                arity(2)?;
                let point = if family == "lognormal" {
                    // Bounds at or below zero: all of the mass is above them.
                    if let Some(v) = &x.known
                        && v.real_at(0) <= 0.0
                    {
                        return Ok(match tail {
                            Tail::Lower => c(f64::NEG_INFINITY),
                            Tail::Upper => c(0.0),
                        });
                    }
                    un(Un::Log, xi)
                } else {
                    xi
                };
                let z = div(sub(point, a(0)), a(1));
                match tail {
                    Tail::Lower => un(Un::LogPhi, z),
                    Tail::Upper => un(Un::LogPhi, un(Un::Neg, z)),
                }
            }
            "logistic" => {
                arity(2)?;
                let z = div(sub(xi, a(0)), a(1));
                // log inv_logit(z) = -softplus(-z); log(1 - inv_logit(z)) = -softplus(z).
                match tail {
                    Tail::Lower => un(Un::Neg, un(Un::Softplus, un(Un::Neg, z))),
                    Tail::Upper => un(Un::Neg, un(Un::Softplus, z)),
                }
            }
            "exponential" => {
                arity(1)?;
                let rate_x = mul(a(0), bin(Op::Max, xi, c(0.0)));
                match tail {
                    Tail::Lower => un(Un::Log, un(Un::Neg, un(Un::Expm1, un(Un::Neg, rate_x)))),
                    Tail::Upper => un(Un::Neg, rate_x),
                }
            }
            "weibull" => {
                arity(2)?;
                // Bounds at or below zero: all of the mass is above them.
                if let Some(v) = &x.known
                    && v.real_at(0) <= 0.0
                {
                    return Ok(match tail {
                        Tail::Lower => c(f64::NEG_INFINITY),
                        Tail::Upper => c(0.0),
                    });
                }
                // P(Y > x) = exp(-(x / sigma)^alpha).
                let ratio = div(bin(Op::Max, xi, c(0.0)), a(1));
                let power = bin(Op::Pow, ratio, a(0));
                match tail {
                    Tail::Lower => un(Un::Log, un(Un::Neg, un(Un::Expm1, un(Un::Neg, power)))),
                    Tail::Upper => un(Un::Neg, power),
                }
            }
            "uniform" => {
                arity(2)?;
                let p = div(sub(xi, a(0)), sub(a(1), a(0)));
                let p = bin(Op::Min, bin(Op::Max, p, c(0.0)), c(1.0));
                match tail {
                    Tail::Lower => un(Un::Log, p),
                    Tail::Upper => un(Un::Log1p, un(Un::Neg, p)),
                }
            }
            "poisson" | "binomial" => {
                let n = x.known_int("a truncation bound of a count distribution")?;
                let trials = if family == "binomial" {
                    arity(2)?;
                    Some(args[0].known_int("the number of trials of a truncated `binomial`")?)
                } else {
                    arity(1)?;
                    None
                };
                let top = trials.map_or(n, |t| n.min(t));
                if top < 0 {
                    return Ok(match tail {
                        Tail::Lower => c(f64::NEG_INFINITY),
                        Tail::Upper => c(0.0),
                    });
                }
                if top >= MAX_COUNT_TERMS {
                    return unsupported(
                        x.span,
                        format!("a truncation bound of `{family}` above {MAX_COUNT_TERMS}"),
                    );
                }
                let ks: Vec<f64> = (0..=top).map(|k| k as f64).collect();
                let k = self.data_item(None, DataValue::Vector(ks.clone()));
                let terms = match trials {
                    None => {
                        // k log(lambda) - lambda - lgamma(k + 1)
                        let lambda = self.share(a(0), &[]);
                        let log_fact: Vec<f64> = ks
                            .iter()
                            .map(|&k| crate::host::math_lgamma(k + 1.0))
                            .collect();
                        let log_fact = self.data_item(None, DataValue::Vector(log_fact));
                        sub(sub(mul(k, un(Un::Log, lambda.clone())), lambda), log_fact)
                    }
                    Some(trials) => {
                        // lchoose(N, k) + k log(theta) + (N - k) log(1 - theta)
                        let theta = self.share(a(1), &[]);
                        let choose: Vec<f64> = ks
                            .iter()
                            .map(|&k| crate::host::math_lchoose(trials as f64, k))
                            .collect();
                        let rest: Vec<f64> = ks.iter().map(|&k| trials as f64 - k).collect();
                        let choose = self.data_item(None, DataValue::Vector(choose));
                        let rest = self.data_item(None, DataValue::Vector(rest));
                        add(
                            add(choose, mul(k, un(Un::Log, theta.clone()))),
                            mul(rest, un(Un::Log1p, un(Un::Neg, theta))),
                        )
                    }
                };
                let log_cdf = un(Un::LogSumExp, terms);
                match tail {
                    Tail::Lower => log_cdf,
                    // log(1 - exp(lcdf))
                    Tail::Upper => un(Un::Log, un(Un::Neg, un(Un::Expm1, log_cdf))),
                }
            }
            _ => return unsupported(span, format!("truncation of `{family}`")),
        })
    }
}
