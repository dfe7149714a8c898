//! `target()`: the log density accumulated so far in `model`, as an IR expression over the
//! parameters, read back from the statements lowered up to that point.
//!
//! Every term counts with its normalising constants (the density written out by
//! `density::lpdf_expr`), where Stan drops them for `~`; the value therefore differs from
//! Stan's by a constant, and a program that adds `target()` back linearly has the same
//! posterior.

use sampler::{Dist, Expr as Ir, Statement, UnaryOp as Un};

use super::density::Arg;
use super::sym::{Val, add, c, mul, un};
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

impl Lowerer {
    /// The value of `target()` at this point of `model`.
    pub(super) fn get_target(&mut self, span: Span) -> Result<Val, LowerError> {
        if !self.in_model {
            return unsupported(
                span,
                "`target()` outside `model` (in `transformed parameters` it would include \
                 the constraint Jacobians, which the sampler adds)",
            );
        }
        let mut terms: Vec<Ir> = Vec::new();
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
