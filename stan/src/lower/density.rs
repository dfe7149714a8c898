//! Distributions: `~` and `target += f_lpdf(...)` as IR `Sample` statements, and log densities
//! used as values (inside `log_mix`, `log_sum_exp`, sums) written out as IR expressions.

use std::f64::consts::{LN_2, PI};

use sampler::{BinaryOp as Op, Dist, Expr as Ir, UnaryOp as Un};

use super::expr::describe;
use super::sym::{Sym, Val, add, bin, c, div, mul, sub, un};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{Expr, Span};
use crate::value::Value;

/// Distributions with an IR `Dist` (the others are written out by `lpdf_expr`).
const IR_DISTRIBUTIONS: [&str; 18] = [
    "normal",
    "cauchy",
    "student_t",
    "exponential",
    "gamma",
    "inv_gamma",
    "lognormal",
    "beta",
    "uniform",
    "double_exponential",
    "bernoulli_logit",
    "binomial_logit",
    "poisson_log",
    "weibull",
    "chi_square",
    "binomial",
    "neg_binomial_2",
    "neg_binomial_2_log",
];

/// Distributions whose log density `lpdf_expr` writes out.
const WRITTEN_OUT: [&str; 25] = [
    "normal",
    "std_normal",
    "inv_chi_square",
    "lognormal",
    "cauchy",
    "student_t",
    "double_exponential",
    "logistic",
    "exponential",
    "gamma",
    "inv_gamma",
    "beta",
    "uniform",
    "poisson_log",
    "poisson",
    "bernoulli_logit",
    "bernoulli",
    "dirichlet",
    "normal_id_glm",
    "weibull",
    "chi_square",
    "binomial",
    "binomial_logit",
    "neg_binomial_2",
    "neg_binomial_2_log",
];

/// Whether `lpdf_expr` writes out the log density of `base`.
pub(super) fn writes_out(base: &str) -> bool {
    WRITTEN_OUT.contains(&base)
}

const DENSITY_SUFFIXES: [&str; 4] = ["_lpdf", "_lupdf", "_lpmf", "_lupmf"];

/// `normal` for `normal_lpdf`, `normal_lupmf`, ...; `None` for other names.
pub(crate) fn density_base(name: &str) -> Option<&str> {
    DENSITY_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
}

/// Refuses `found` arguments where the distribution `base` takes `wanted`.
pub(super) fn check_arity(
    base: &str,
    span: Span,
    wanted: usize,
    found: usize,
) -> Result<(), LowerError> {
    if wanted == found {
        return Ok(());
    }
    Err(LowerError::new(
        span,
        format!("`{base}` takes {wanted} argument(s), found {found}"),
    ))
}

/// An argument of a distribution, lowered.
pub(crate) struct Arg {
    pub ir: Ir,
    pub dims: Vec<usize>,
    pub known: Option<Value>,
    pub span: Span,
}

impl Arg {
    pub(super) fn of(ir: Ir, span: Span) -> Arg {
        Arg {
            ir,
            dims: Vec::new(),
            known: None,
            span,
        }
    }

    /// A known real, as the location and scale `std_normal` stands for.
    fn constant(value: f64, span: Span) -> Arg {
        Arg {
            ir: c(value),
            dims: Vec::new(),
            known: Some(Value::real(value)),
            span,
        }
    }
}

impl Lowerer {
    fn dist_args(&mut self, args: &[Expr]) -> Result<Vec<Arg>, LowerError> {
        let mut out = Vec::with_capacity(args.len());
        for arg in args {
            let v = self.eval(arg)?;
            let known = match &v {
                Val::Known(value, _) => Some(value.clone()),
                Val::Sym(_) => None,
            };
            let (ir, dims) = self.whole(v, arg.span)?;
            out.push(Arg {
                ir,
                dims,
                known,
                span: arg.span,
            });
        }
        Ok(out)
    }

    /// `value ~ name(args)`, or `target += name_lpdf(value | args)`: one `Sample` statement
    /// (nothing when every operand is known: a constant).
    pub(super) fn sample(
        &mut self,
        value: &Expr,
        name: &str,
        name_span: Span,
        args: &[Expr],
    ) -> Result<(), LowerError> {
        let functions = std::rc::Rc::clone(&self.functions);
        if let Some(def) = functions.density(name) {
            let mut all = vec![value.clone()];
            all.extend(args.iter().cloned());
            let value = self.call_user_value(def, &all, name_span)?;
            return self.add_factor(value, 1.0, name_span);
        }
        let base = density_base(name).unwrap_or(name);
        if super::multivariate::handles(base) {
            let value = self.multivariate_lpdf(base, name_span, value, args)?;
            self.model.model.push(sampler::Statement::Factor { value });
            return Ok(());
        }
        let mut all = self.dist_args(std::slice::from_ref(value))?;
        all.extend(self.dist_args(args)?);
        // `std_normal()` is `normal(0, 1)`: one IR distribution, merged with the others.
        let base = if base == "std_normal" {
            check_arity(base, name_span, 0, args.len())?;
            all.push(Arg::constant(0.0, name_span));
            all.push(Arg::constant(1.0, name_span));
            "normal"
        } else {
            base
        };
        if all.iter().all(|a| a.known.is_some()) {
            return Ok(());
        }
        let mut len: Option<(usize, &Arg)> = None;
        for (i, a) in all.iter().enumerate() {
            // normal_id_glm's matrix and coefficients have their own shapes (`glm_mean`).
            if a.dims.is_empty() || (base == "normal_id_glm" && (i == 1 || i == 3)) {
                continue;
            }
            let n = a.dims.iter().product::<usize>();
            match len {
                Some((m, first)) if m != n => {
                    return Err(LowerError::new(
                        a.span,
                        format!(
                            "`{base}`: {} does not match {}",
                            describe(&a.dims),
                            describe(&first.dims)
                        ),
                    ));
                }
                _ => len = Some((n, a)),
            }
        }
        let mut it = all.into_iter();
        let y = it.next().expect("the value");
        let args: Vec<Arg> = it.collect();
        if !IR_DISTRIBUTIONS.contains(&base) && base != "normal_id_glm" {
            // No IR distribution: the log density written out (constants included).
            let term = self.lpdf_expr(base, name_span, y, args)?;
            self.model
                .model
                .push(sampler::Statement::Factor { value: term });
            return Ok(());
        }
        if base == "normal_id_glm" {
            let [x, alpha, beta, sigma] = <[Arg; 4]>::try_from(args).map_err(|a| {
                LowerError::new(
                    name_span,
                    format!("`normal_id_glm` takes 4 arguments, found {}", a.len()),
                )
            })?;
            let mu = self.glm_mean(x, alpha, beta, name_span)?;
            self.model.model.push(sampler::Statement::Sample {
                value: y.ir,
                dist: Dist::normal(mu, sigma.ir),
            });
            return Ok(());
        }
        if y.dims.is_empty() && args.iter().all(|a| a.dims.is_empty()) {
            // Checked now, merged with the other scalar statements of `base` at the end.
            let irs: Vec<Ir> = args.iter().map(|a| a.ir.clone()).collect();
            self.dist(base, name_span, args)?;
            // Grouped by the distribution and the structure of the operands.
            let mut key = base.to_owned();
            for ir in std::iter::once(&y.ir).chain(&irs) {
                key.push('|');
                key.push_str(&super::vectorize::skeleton(ir));
            }
            self.scalar_samples
                .entry(key)
                .or_default()
                .push((y.ir, irs, name_span));
            return Ok(());
        }
        let dist = self.dist(base, name_span, args)?;
        self.model
            .model
            .push(sampler::Statement::Sample { value: y.ir, dist });
        Ok(())
    }

    /// Scalar `Sample` statements of one distribution as one vectorised statement: a loop
    /// of `y[n] ~ normal(mu[n], sigma)` becomes `y ~ normal(mu, sigma)`, one density
    /// instruction instead of one per element (see `vectorize`). Scalar `Factor`s of one
    /// structure likewise become one `Factor` of a vector.
    pub(super) fn merge_scalar_terms(&mut self) -> Result<(), LowerError> {
        for (key, samples) in std::mem::take(&mut self.scalar_samples) {
            let base = key.split('|').next().unwrap_or_default().to_owned();
            let span = samples[0].2;
            let repeated = samples
                .windows(2)
                .all(|w| w[0].0 == w[1].0 && w[0].1 == w[1].1);
            if samples.len() == 1 || repeated {
                for (value, args, _) in samples {
                    let args = args.into_iter().map(|ir| Arg::of(ir, span)).collect();
                    let dist = self.dist(&base, span, args)?;
                    self.model
                        .model
                        .push(sampler::Statement::Sample { value, dist });
                }
                continue;
            }
            let values: Vec<Ir> = samples.iter().map(|s| s.0.clone()).collect();
            let value = if values.windows(2).all(|w| w[0] == w[1]) {
                // One scalar value with differing operands (`target += normal_lpdf(a | k, 10)`
                // for several `k`): the value repeated, one element per term.
                Ir::Concat(values)
            } else {
                self.vectorize(&values)
            };
            let n_args = samples[0].1.len();
            let mut args = Vec::with_capacity(n_args);
            for k in 0..n_args {
                let parts: Vec<Ir> = samples.iter().map(|s| s.1[k].clone()).collect();
                args.push(Arg::of(self.vectorize(&parts), span));
            }
            let dist = self.dist(&base, span, args)?;
            self.model
                .model
                .push(sampler::Statement::Sample { value, dist });
        }
        for (_, terms) in std::mem::take(&mut self.scalar_factors) {
            let value = if terms.len() == 1 {
                terms.into_iter().next().expect("one")
            } else if terms.windows(2).all(|w| w[0] == w[1]) {
                mul(c(terms.len() as f64), terms[0].clone())
            } else {
                self.vectorize(&terms)
            };
            self.model.model.push(sampler::Statement::Factor { value });
        }
        Ok(())
    }

    /// `alpha + X * beta` of `normal_id_glm`.
    fn glm_mean(&mut self, x: Arg, alpha: Arg, beta: Arg, span: Span) -> Result<Ir, LowerError> {
        let Some(matrix) = x.known else {
            return unsupported(
                x.span,
                "a `normal_id_glm` matrix that depends on parameters",
            );
        };
        match (&matrix.shape[..], &beta.dims[..]) {
            ([_, k], [n]) if k == n => {}
            (m, b) => {
                return Err(LowerError::new(
                    span,
                    format!(
                        "`normal_id_glm`: a matrix of shape {m:?} times {}",
                        describe(b)
                    ),
                ));
            }
        }
        // The matrix under its own name when it is a plain variable.
        let matrix = match x.ir {
            Ir::Ref(name) if self.env.contains_key(&name) => self.matrix_item(&matrix, Some(name)),
            _ => self.matrix_item(&matrix, None),
        };
        Ok(add(
            alpha.ir,
            Ir::Binary(Op::Matvec, Box::new(matrix), Box::new(beta.ir)),
        ))
    }

    /// The IR distribution `base(args)`.
    fn dist(&mut self, base: &str, span: Span, args: Vec<Arg>) -> Result<Dist, LowerError> {
        let wanted = match base {
            "normal" | "cauchy" | "gamma" | "inv_gamma" | "lognormal" | "beta" | "uniform"
            | "double_exponential" | "binomial_logit" | "weibull" | "binomial"
            | "neg_binomial_2" | "neg_binomial_2_log" => 2,
            "student_t" => 3,
            "exponential" | "bernoulli_logit" | "poisson_log" | "chi_square" => 1,
            _ => return unsupported(span, format!("the distribution `{base}`")),
        };
        check_arity(base, span, wanted, args.len())?;
        let mut it = args.into_iter().map(|a| a.ir);
        let mut next = || it.next().expect("arity checked");
        Ok(match base {
            "normal" => Dist::normal(next(), next()),
            "cauchy" => Dist::cauchy(next(), next()),
            "student_t" => Dist::student_t(next(), next(), next()),
            "exponential" => Dist::exponential(next()),
            "gamma" => Dist::gamma(next(), next()),
            "inv_gamma" => Dist::inverse_gamma(next(), next()),
            "lognormal" => Dist::log_normal(next(), next()),
            "beta" => Dist::beta(next(), next()),
            "uniform" => Dist::uniform(next(), next()),
            "double_exponential" => Dist::laplace(next(), next()),
            "bernoulli_logit" => Dist::bernoulli_logit(next()),
            "binomial_logit" => Dist::binomial_logit(next(), next()),
            "weibull" => Dist::weibull(next(), next()),
            "chi_square" => Dist::chi_square(next()),
            "binomial" => Dist::binomial(next(), next()),
            "neg_binomial_2" => Dist::neg_binomial_2(next(), next()),
            "neg_binomial_2_log" => Dist::neg_binomial_2_log(next(), next()),
            _ => Dist::poisson_log(next()),
        })
    }

    /// `f_lpdf(y | ...)` (or `_lcdf`/`_lccdf` of constants) used as a value.
    pub(super) fn cond_call(
        &mut self,
        name: &str,
        name_span: Span,
        args: &[Expr],
        span: Span,
    ) -> Result<Val, LowerError> {
        if let Some(def) = std::rc::Rc::clone(&self.functions).callee(name) {
            return self.call_user_value(def, args, span);
        }
        if let Some(base) = density_base(name)
            && super::multivariate::handles(base)
            && let Some((y, rest)) = args.split_first()
        {
            let ir = self.multivariate_lpdf(base, name_span, y, rest)?;
            return Ok(Val::Sym(Sym::whole(ir, Vec::new())));
        }
        if let Some(base) = name.strip_suffix("_lcdf")
            && let Some(value) = self.log_cdf_call(base, false, args, span)?
        {
            return Ok(value);
        }
        if let Some(base) = name.strip_suffix("_lccdf")
            && let Some(value) = self.log_cdf_call(base, true, args, span)?
        {
            return Ok(value);
        }
        let mut lowered = self.dist_args(args)?;
        if let Some(base) = ["_lccdf", "_lcdf"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
        {
            // Only the symmetric case at the centre, which is log(1/2) (diamonds' constant
            // `student_t_lccdf(0 | 3, 0, 10)`).
            let symmetric = matches!(
                base,
                "normal" | "student_t" | "cauchy" | "logistic" | "double_exponential"
            );
            let centre = if base == "student_t" { 2 } else { 1 };
            let known: Option<Vec<f64>> = lowered
                .iter()
                .map(|a| a.known.as_ref().and_then(Value::as_real))
                .collect();
            if let Some(k) = known
                && symmetric
                && k.len() > centre
                && k[0] == k[centre]
            {
                return Ok(Val::Known(Value::real(-LN_2), None));
            }
            return unsupported(
                span,
                format!("`{name}` other than at the centre of a symmetric distribution"),
            );
        }
        let Some(base) = density_base(name) else {
            return unsupported(span, format!("the function `{name}`"));
        };
        if lowered.is_empty() {
            return Err(LowerError::new(span, format!("`{name}` needs a value")));
        }
        let y = lowered.remove(0);
        let ir = self.lpdf_expr(base, name_span, y, lowered)?;
        Ok(Val::Sym(Sym::whole(ir, Vec::new())))
    }

    /// The log density `base(y | args)` as an IR expression, constants included, summed over
    /// elements.
    pub(super) fn lpdf_expr(
        &mut self,
        base: &str,
        span: Span,
        y: Arg,
        args: Vec<Arg>,
    ) -> Result<Ir, LowerError> {
        let arity = |n: usize| check_arity(base, span, n, args.len());
        let mut dims: Vec<usize> = y.dims.clone();
        for a in &args {
            if !a.dims.is_empty() {
                if !dims.is_empty()
                    && a.dims.iter().product::<usize>() != dims.iter().product::<usize>()
                {
                    return Err(LowerError::new(
                        a.span,
                        format!(
                            "`{base}`: {} does not match {}",
                            describe(&a.dims),
                            describe(&dims)
                        ),
                    ));
                }
                dims = a.dims.clone();
            }
        }
        if base == "dirichlet" {
            arity(1)?;
            let alpha = self.share(args[0].ir.clone(), &args[0].dims);
            let theta = y.ir;
            let sum_alpha = un(Un::Sum, alpha.clone());
            let ir = add(
                sub(
                    un(Un::Lgamma, sum_alpha),
                    un(Un::Sum, un(Un::Lgamma, alpha.clone())),
                ),
                un(Un::Sum, mul(sub(alpha, c(1.0)), un(Un::Log, theta))),
            );
            return Ok(ir);
        }
        // Operands used more than once get hidden names.
        let share = |lowerer: &mut Lowerer, a: &Arg| lowerer.share(a.ir.clone(), &a.dims);
        let yv = share(self, &y);
        let p: Vec<Ir> = args.iter().map(|a| share(self, a)).collect();
        let half_log_2pi = 0.5 * (2.0 * PI).ln();
        let z = |mu: &Ir, sigma: &Ir, x: Ir| div(sub(x, mu.clone()), sigma.clone());
        let pointwise = match base {
            "normal" => {
                arity(2)?;
                let z = z(&p[0], &p[1], yv);
                sub(
                    sub(
                        mul(c(-0.5), bin(Op::Pow, z, c(2.0))),
                        un(Un::Log, p[1].clone()),
                    ),
                    c(half_log_2pi),
                )
            }
            "lognormal" => {
                arity(2)?;
                let logy = un(Un::Log, yv.clone());
                let z = z(&p[0], &p[1], logy.clone());
                sub(
                    sub(
                        sub(
                            mul(c(-0.5), bin(Op::Pow, z, c(2.0))),
                            un(Un::Log, p[1].clone()),
                        ),
                        logy,
                    ),
                    c(half_log_2pi),
                )
            }
            "cauchy" => {
                arity(2)?;
                let z = z(&p[0], &p[1], yv);
                sub(
                    sub(c(-PI.ln()), un(Un::Log, p[1].clone())),
                    un(Un::Log1p, bin(Op::Pow, z, c(2.0))),
                )
            }
            "student_t" => {
                arity(3)?;
                let (nu, mu, sigma) = (&p[0], &p[1], &p[2]);
                let z = z(mu, sigma, yv);
                let half_nu_plus = div(add(nu.clone(), c(1.0)), c(2.0));
                let norm = sub(
                    sub(
                        un(Un::Lgamma, half_nu_plus.clone()),
                        un(Un::Lgamma, div(nu.clone(), c(2.0))),
                    ),
                    mul(c(0.5), un(Un::Log, mul(nu.clone(), c(PI)))),
                );
                sub(
                    sub(norm, un(Un::Log, sigma.clone())),
                    mul(
                        half_nu_plus,
                        un(Un::Log1p, div(bin(Op::Pow, z, c(2.0)), nu.clone())),
                    ),
                )
            }
            "double_exponential" => {
                arity(2)?;
                sub(
                    sub(c(-LN_2), un(Un::Log, p[1].clone())),
                    div(un(Un::Abs, sub(yv, p[0].clone())), p[1].clone()),
                )
            }
            "logistic" => {
                arity(2)?;
                let z = z(&p[0], &p[1], yv);
                let z = self.share(z, &dims);
                sub(
                    sub(un(Un::Neg, z.clone()), un(Un::Log, p[1].clone())),
                    mul(c(2.0), un(Un::Softplus, un(Un::Neg, z))),
                )
            }
            "exponential" => {
                arity(1)?;
                sub(un(Un::Log, p[0].clone()), mul(p[0].clone(), yv))
            }
            "gamma" => {
                arity(2)?;
                let (a, b) = (&p[0], &p[1]);
                add(
                    sub(
                        mul(a.clone(), un(Un::Log, b.clone())),
                        un(Un::Lgamma, a.clone()),
                    ),
                    sub(
                        mul(sub(a.clone(), c(1.0)), un(Un::Log, yv.clone())),
                        mul(b.clone(), yv),
                    ),
                )
            }
            "inv_gamma" => {
                arity(2)?;
                let (a, b) = (&p[0], &p[1]);
                sub(
                    sub(
                        sub(
                            mul(a.clone(), un(Un::Log, b.clone())),
                            un(Un::Lgamma, a.clone()),
                        ),
                        mul(add(a.clone(), c(1.0)), un(Un::Log, yv.clone())),
                    ),
                    div(b.clone(), yv),
                )
            }
            "beta" => {
                arity(2)?;
                let (a, b) = (&p[0], &p[1]);
                let norm = sub(
                    sub(
                        un(Un::Lgamma, add(a.clone(), b.clone())),
                        un(Un::Lgamma, a.clone()),
                    ),
                    un(Un::Lgamma, b.clone()),
                );
                add(
                    norm,
                    add(
                        mul(sub(a.clone(), c(1.0)), un(Un::Log, yv.clone())),
                        mul(sub(b.clone(), c(1.0)), un(Un::Log1p, un(Un::Neg, yv))),
                    ),
                )
            }
            "uniform" => {
                arity(2)?;
                un(Un::Neg, un(Un::Log, sub(p[1].clone(), p[0].clone())))
            }
            "poisson_log" => {
                arity(1)?;
                sub(
                    sub(mul(yv.clone(), p[0].clone()), un(Un::Exp, p[0].clone())),
                    un(Un::Lgamma, add(yv, c(1.0))),
                )
            }
            "poisson" => {
                arity(1)?;
                sub(
                    sub(mul(yv.clone(), un(Un::Log, p[0].clone())), p[0].clone()),
                    un(Un::Lgamma, add(yv, c(1.0))),
                )
            }
            "weibull" => {
                arity(2)?;
                let (alpha, sigma) = (&p[0], &p[1]);
                let log_ratio = sub(un(Un::Log, yv), un(Un::Log, sigma.clone()));
                let log_ratio = self.share(log_ratio, &dims);
                sub(
                    add(
                        sub(un(Un::Log, alpha.clone()), un(Un::Log, sigma.clone())),
                        mul(sub(alpha.clone(), c(1.0)), log_ratio.clone()),
                    ),
                    un(Un::Exp, mul(alpha.clone(), log_ratio)),
                )
            }
            "std_normal" => {
                arity(0)?;
                sub(mul(c(-0.5), bin(Op::Pow, yv, c(2.0))), c(half_log_2pi))
            }
            "inv_chi_square" => {
                arity(1)?;
                let half_nu = div(p[0].clone(), c(2.0));
                sub(
                    sub(
                        mul(
                            c(-1.0),
                            mul(add(half_nu.clone(), c(1.0)), un(Un::Log, yv.clone())),
                        ),
                        div(c(0.5), yv),
                    ),
                    add(mul(half_nu.clone(), c(LN_2)), un(Un::Lgamma, half_nu)),
                )
            }
            "chi_square" => {
                arity(1)?;
                let half_nu = div(p[0].clone(), c(2.0));
                sub(
                    sub(
                        mul(sub(half_nu.clone(), c(1.0)), un(Un::Log, yv.clone())),
                        div(yv, c(2.0)),
                    ),
                    add(mul(half_nu.clone(), c(LN_2)), un(Un::Lgamma, half_nu)),
                )
            }
            "binomial" | "binomial_logit" => {
                arity(2)?;
                let trials = &p[0];
                let choose = sub(
                    sub(
                        un(Un::Lgamma, add(trials.clone(), c(1.0))),
                        un(Un::Lgamma, add(yv.clone(), c(1.0))),
                    ),
                    un(Un::Lgamma, add(sub(trials.clone(), yv.clone()), c(1.0))),
                );
                let kernel = if base == "binomial" {
                    add(
                        mul(yv.clone(), un(Un::Log, p[1].clone())),
                        mul(
                            sub(trials.clone(), yv),
                            un(Un::Log1p, un(Un::Neg, p[1].clone())),
                        ),
                    )
                } else {
                    // y log(inv_logit(a)) + (N - y) log(1 - inv_logit(a)) = y a - N softplus(a).
                    sub(
                        mul(yv, p[1].clone()),
                        mul(trials.clone(), un(Un::Softplus, p[1].clone())),
                    )
                };
                add(choose, kernel)
            }
            "neg_binomial_2" | "neg_binomial_2_log" => {
                arity(2)?;
                let phi = &p[1];
                let (log_mu, mu) = if base == "neg_binomial_2" {
                    (un(Un::Log, p[0].clone()), p[0].clone())
                } else {
                    (p[0].clone(), un(Un::Exp, p[0].clone()))
                };
                let log_mu_phi = self.share(un(Un::Log, add(mu, phi.clone())), &dims);
                add(
                    sub(
                        sub(
                            un(Un::Lgamma, add(yv.clone(), phi.clone())),
                            un(Un::Lgamma, add(yv.clone(), c(1.0))),
                        ),
                        un(Un::Lgamma, phi.clone()),
                    ),
                    add(
                        mul(
                            phi.clone(),
                            sub(un(Un::Log, phi.clone()), log_mu_phi.clone()),
                        ),
                        mul(yv, sub(log_mu, log_mu_phi)),
                    ),
                )
            }
            "bernoulli_logit" => {
                arity(1)?;
                sub(mul(yv, p[0].clone()), un(Un::Softplus, p[0].clone()))
            }
            "bernoulli" => {
                arity(1)?;
                add(
                    mul(yv.clone(), un(Un::Log, p[0].clone())),
                    mul(sub(c(1.0), yv), un(Un::Log1p, un(Un::Neg, p[0].clone()))),
                )
            }
            "normal_id_glm" => {
                arity(4)?;
                let mut it = args.into_iter();
                let (x, alpha, beta, sigma) = (
                    it.next().expect("4"),
                    it.next().expect("4"),
                    it.next().expect("4"),
                    it.next().expect("4"),
                );
                let sigma_ir = self.share(sigma.ir.clone(), &sigma.dims);
                let mu = self.glm_mean(x, alpha, beta, span)?;
                let z = div(sub(yv, mu), sigma_ir.clone());
                let pointwise = sub(
                    sub(mul(c(-0.5), bin(Op::Pow, z, c(2.0))), un(Un::Log, sigma_ir)),
                    c(half_log_2pi),
                );
                return Ok(un(Un::Sum, pointwise));
            }
            _ => return unsupported(span, format!("the distribution `{base}`")),
        };
        Ok(if dims.is_empty() {
            pointwise
        } else {
            un(Un::Sum, pointwise)
        })
    }
}
