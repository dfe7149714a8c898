//! The CPU's log density and gradient at a point, with the scale that another evaluator's
//! rounding errors are relative to: what GPU results are checked against, before sampling and
//! in the parity tests.
//!
//! Errors are measured relative to `max(1, scale)`, where `scale` is the sum of the magnitudes
//! of the log density's terms: the error of a floating-point sum is proportional to that,
//! whatever the (possibly cancelling) total.

use std::sync::Arc;

use crate::eval::{Evaluator, LogDensity};
use crate::program::{Inst, Program};

/// The CPU's answer at one point, with the scale that rounding errors are relative to.
pub struct Reference {
    /// The log density.
    pub lp: f64,
    /// Its gradient.
    pub grad: Vec<f64>,
    /// The sum of the magnitudes of the log density's terms: the log-Jacobian and each
    /// statement's contribution. Floating-point error in a sum is proportional to this, not to
    /// the (possibly cancelling) total.
    pub lp_scale: f64,
    /// The same for each gradient coordinate.
    pub grad_scale: Vec<f64>,
}

fn evaluate(program: Program, theta: &[f64]) -> (f64, Vec<f64>) {
    let mut evaluator = Evaluator::new(Arc::new(program));
    let mut grad = vec![0.0; theta.len()];
    let lp = evaluator.logp_grad(theta, &mut grad);
    (lp, grad)
}

fn is_term(inst: &Inst) -> bool {
    matches!(
        inst,
        Inst::Density { .. } | Inst::RandomWalk { .. } | Inst::Factor { .. }
    )
}

/// The CPU's log density and gradient of `program` at `theta`, with their rounding scales
/// (one evaluation per statement, plus two).
pub fn reference(program: &Program, theta: &[f64]) -> Reference {
    let (lp, grad) = evaluate(program.clone(), theta);
    // The program without its statements gives the log-Jacobian; adding one statement at a
    // time gives each statement's contribution.
    let mut base = program.clone();
    base.insts.retain(|inst| !is_term(inst));
    let (jacobian, jacobian_grad) = evaluate(base.clone(), theta);
    let mut lp_scale = jacobian.abs();
    let mut grad_scale: Vec<f64> = jacobian_grad.iter().map(|g| g.abs()).collect();
    for term in program.insts.iter().filter(|inst| is_term(inst)) {
        let mut one = base.clone();
        one.insts.push(*term);
        let (value, term_grad) = evaluate(one, theta);
        lp_scale += (value - jacobian).abs();
        for ((scale, g), g0) in grad_scale.iter_mut().zip(&term_grad).zip(&jacobian_grad) {
            *scale += (g - g0).abs();
        }
    }
    Reference {
        lp,
        grad,
        lp_scale,
        grad_scale,
    }
}

/// Largest scaled errors seen, and where.
#[derive(Default, Debug, Clone, Copy)]
pub struct Errors {
    /// Of the log density.
    pub lp: f64,
    /// Of the gradient's worst coordinate.
    pub grad: f64,
}

/// `|gpu - cpu| / max(1, scale)`, with non-finite values required to agree.
fn scaled_error(gpu: f64, cpu: f64, scale: f64) -> Result<f64, String> {
    match (gpu.is_finite(), cpu.is_finite()) {
        (true, true) => Ok((gpu - cpu).abs() / scale.max(1.0)),
        (false, false) => Ok(0.0),
        _ => Err(format!("gpu {gpu} but cpu {cpu}")),
    }
}

/// Compares one chain's GPU result with the reference; returns the scaled errors or what is
/// wrong.
pub fn compare(
    gpu_lp: f64,
    gpu_grad: &[f64],
    reference: &Reference,
    tolerance: f64,
) -> Result<Errors, String> {
    let lp = scaled_error(gpu_lp, reference.lp, reference.lp_scale)
        .map_err(|what| format!("log density: {what}"))?;
    if lp > tolerance {
        return Err(format!(
            "log density: gpu {gpu_lp} cpu {} (scale {:.3e}): scaled error {lp:.2e} > {tolerance:.0e}",
            reference.lp, reference.lp_scale
        ));
    }
    let mut grad = 0.0f64;
    if reference.lp.is_finite() {
        for (j, (&g, &c)) in gpu_grad.iter().zip(&reference.grad).enumerate() {
            let error = scaled_error(g, c, reference.grad_scale[j])
                .map_err(|what| format!("gradient[{j}]: {what}"))?;
            if error > tolerance {
                return Err(format!(
                    "gradient[{j}]: gpu {g} cpu {c} (scale {:.3e}): scaled error {error:.2e} > {tolerance:.0e}",
                    reference.grad_scale[j]
                ));
            }
            grad = grad.max(error);
        }
    }
    Ok(Errors { lp, grad })
}
