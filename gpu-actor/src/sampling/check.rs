//! The check that keeps a device from sampling a model it computes wrongly: the log density
//! and gradient the device computed at a few chains' first points (the initial points, from
//! the `logp_grad` kernel), against the CPU evaluator's at the same points.
//!
//! A few CPU evaluations per run (each one per statement of the model, for the rounding
//! scale: `sampler::reference`). The tolerances are ten times the parity tests' (which hold at
//! thousands of random points), so that only a device that computes the model wrongly, not
//! one that rounds differently, stops a run.

use sampler::Program;
use sampler::reference::{compare, reference};

use crate::error::GpuError;
use crate::wgsl::Precision;

/// Chains whose first point is checked.
pub(crate) const CHECKED_CHAINS: usize = 4;

/// The largest error allowed, relative to the rounding scale.
pub(crate) fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F32 => 1e-3,
        Precision::F64 => 1e-9,
    }
}

/// Compares the log density `lp` (and gradient `grad`, where given) that adapter `adapter`
/// computed for chain `chain` at `q` with the CPU's.
pub(crate) fn check_point(
    adapter: &str,
    program: &Program,
    precision: Precision,
    chain: usize,
    q: &[f64],
    lp: f64,
    grad: Option<&[f64]>,
) -> Result<(), GpuError> {
    let expected = reference(program, q);
    // Without a gradient (a draw's), `compare` zips nothing for it.
    compare(lp, grad.unwrap_or(&[]), &expected, tolerance(precision))
        .map(|_| ())
        .map_err(|what| GpuError::FirstPointMismatch {
            adapter: adapter.to_owned(),
            chain,
            what,
        })
}

#[cfg(test)]
mod tests;
