//! `target()`: the log density accumulated so far, as an IR expression over the
//! parameters, read back from the statements lowered up to that point, with the
//! log-Jacobians of the parameters' transforms (Stan adds them before `model` runs).
//!
//! Every term counts with its normalising constants (the density written out by
//! `density::lpdf_expr`), where Stan drops them for `~`; the value therefore differs from
//! Stan's by a constant, and a program that adds `target()` back linearly has the same
//! posterior.

use sampler::{Constraint, Dist, Expr as Ir, Parameter, Statement, UnaryOp as Un};

use super::density::Arg;
use super::sym::{Val, add, c, elem, mul, sub, un};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::Span;

/// The Stan name of an IR distribution, as `lpdf_expr` knows it.
fn stan_name(dist: &Dist) -> &'static str {
    match dist {
        Dist::LogNormal { .. } => "lognormal",
        Dist::InverseGamma { .. } => "inv_gamma",
        Dist::Laplace { .. } => "double_exponential",
        other => other.name(),
    }
}

/// The log-Jacobian of `parameter`'s transform as an IR expression of its constrained
/// value (Stan adds it to the target before `model` runs, so `target()` includes it); `None`
/// for the identity.
fn log_jacobian(parameter: &Parameter, span: Span) -> Result<Option<Ir>, LowerError> {
    let x = Ir::Ref(parameter.name.clone());
    let log = |ir: Ir| un(Un::Log, ir);
    // Counts a term that leaves out `x` once per element.
    let per_element = |ir: Ir| add(ir, mul(c(0.0), x.clone()));
    let n = parameter.size.unwrap_or(1);
    let pointwise = match parameter.constraint {
        Constraint::Real => match (&parameter.lower, &parameter.upper, &parameter.multiplier) {
            (Some(l), None, _) => Some(log(sub(x.clone(), l.clone()))),
            (None, Some(u), _) => Some(log(sub(u.clone(), x.clone()))),
            (Some(l), Some(u), _) => Some(sub(
                add(
                    log(sub(x.clone(), l.clone())),
                    log(sub(u.clone(), x.clone())),
                ),
                log(sub(u.clone(), l.clone())),
            )),
            (None, None, Some(m)) => Some(per_element(log(m.clone()))),
            (None, None, None) => None,
        },
        Constraint::Positive => Some(log(x.clone())),
        Constraint::UnitInterval => {
            Some(add(log(x.clone()), un(Un::Log1p, un(Un::Neg, x.clone()))))
        }
        Constraint::Lower(l) => Some(log(sub(x.clone(), c(l)))),
        Constraint::Upper(u) => Some(log(sub(c(u), x.clone()))),
        Constraint::Interval { lower, upper } => Some(sub(
            add(log(sub(x.clone(), c(lower))), log(sub(c(upper), x.clone()))),
            c((upper - lower).ln()),
        )),
        Constraint::Ordered | Constraint::PositiveOrdered if parameter.dims.is_empty() => {
            // x_k = x_{k-1} + exp(u_k): the log of each step (from x_0 = 0 when positive).
            let steps = (n >= 2).then(|| {
                let len = (n - 1) as u32;
                log(sub(
                    Ir::Slice(Box::new(x.clone()), 1, len),
                    Ir::Slice(Box::new(x.clone()), 0, len),
                ))
            });
            let first = (parameter.constraint == Constraint::PositiveOrdered)
                .then(|| log(elem(x.clone(), 0)));
            let total = steps
                .map(|s| un(Un::Sum, s))
                .into_iter()
                .chain(first)
                .reduce(add);
            return Ok(total);
        }
        other => {
            return unsupported(
                span,
                format!(
                    "`target()` with the {} parameter `{}` (its log-Jacobian is not written out)",
                    constraint_name(other),
                    parameter.name
                ),
            );
        }
    };
    Ok(pointwise.map(|p| un(Un::Sum, p)))
}

/// The Stan type of a constraint that `log_jacobian` refuses.
fn constraint_name(constraint: Constraint) -> &'static str {
    match constraint {
        Constraint::Ordered => "array of `ordered`",
        Constraint::PositiveOrdered => "array of `positive_ordered`",
        Constraint::Simplex => "`simplex`",
        Constraint::UnitVector => "`unit_vector`",
        Constraint::CholeskyFactorCorr => "`cholesky_factor_corr`",
        Constraint::CholeskyFactorCov => "`cholesky_factor_cov`",
        Constraint::CorrMatrix => "`corr_matrix`",
        Constraint::CovMatrix => "`cov_matrix`",
        _ => "other constrained",
    }
}

impl Lowerer {
    /// The value of `target()` at this point of `transformed parameters` or `model`.
    pub(super) fn get_target(&mut self, span: Span) -> Result<Val, LowerError> {
        if !self.reads_target {
            return Err(LowerError::new(
                span,
                "`target()` is only available in `transformed parameters` and `model`",
            ));
        }
        let mut terms: Vec<Ir> = Vec::new();
        for parameter in self.model.parameters.clone() {
            terms.extend(log_jacobian(&parameter, span)?);
        }
        for statement in self.model.model.clone() {
            match statement {
                Statement::Factor { value } => terms.push(un(Un::Sum, value)),
                Statement::Sample { value, dist } => {
                    let args = dist
                        .args()
                        .into_iter()
                        .map(|(_, ir)| Arg::of(ir.clone(), span))
                        .collect();
                    terms.push(self.target_density(stan_name(&dist), value, args, span)?);
                }
            }
        }
        for (key, samples) in self.scalar_samples.clone() {
            let base = key.split('|').next().unwrap_or_default().to_owned();
            for (value, args, _) in samples {
                let args = args.into_iter().map(|ir| Arg::of(ir, span)).collect();
                terms.push(self.target_density(&base, value, args, span)?);
            }
        }
        terms.extend(self.scalar_factors.values().flatten().cloned());
        let total = terms.into_iter().reduce(add).unwrap_or_else(|| c(0.0));
        Ok(Val::scalar(total))
    }

    /// The summed log density of one `Sample` statement, constants included.
    fn target_density(
        &mut self,
        base: &str,
        value: Ir,
        args: Vec<Arg>,
        span: Span,
    ) -> Result<Ir, LowerError> {
        if !super::density::writes_out(base) {
            return unsupported(span, format!("`target()` after a `{base}` statement"));
        }
        // Operands are passed as scalars: the sum covers vectors as well. Only `uniform`'s
        // density leaves out the value, whose length it must still count.
        let length = (base == "uniform").then(|| mul(c(0.0), value.clone()));
        let mut ir = self.lpdf_expr(base, span, Arg::of(value, span), args)?;
        if let Some(length) = length {
            ir = add(ir, length);
        }
        Ok(un(Un::Sum, ir))
    }
}

#[cfg(test)]
mod tests;
