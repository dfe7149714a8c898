//! The checks that keep a device from sampling a model it computes wrongly: the log density
//! and gradient the device computed at a few chains' first points (the initial points, from
//! the `logp_grad` kernel), and the log density of their first draws (from the NUTS kernel's
//! first batch, whose values always come back; with the fused kernel, the log density and
//! gradient the device computed there), against the CPU evaluator's at the same points.
//!
//! A few CPU evaluations per run (each one per statement of the model, for the rounding
//! scale: `sampler::reference`). The tolerances are ten times the parity tests' (which hold at
//! thousands of random points), so that only a device that computes the model wrongly, not
//! one that rounds differently, stops a run.

use sampler::Program;
use sampler::reference::{compare, reference};

use crate::error::{CheckedPoint, GpuError};
use crate::wgsl::Precision;

/// Chains whose first point and first draw are checked.
pub(crate) const CHECKED_CHAINS: usize = 4;

/// The largest error allowed, relative to the rounding scale.
pub(crate) fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F32 => 1e-3,
        Precision::F64 => 1e-9,
    }
}

/// Compares the log density `lp` (and gradient `grad`, where given) that adapter `adapter`
/// computed for chain `chain` at `q`, its `point`, with the CPU's.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_point(
    adapter: &str,
    program: &Program,
    precision: Precision,
    chain: usize,
    point: CheckedPoint,
    q: &[f64],
    lp: f64,
    grad: Option<&[f64]>,
) -> Result<(), GpuError> {
    let expected = reference(program, q);
    // Without a gradient (a draw's), `compare` zips nothing for it.
    compare(lp, grad.unwrap_or(&[]), &expected, tolerance(precision))
        .map(|_| ())
        .map_err(|what| GpuError::DensityMismatch {
            adapter: adapter.to_owned(),
            chain,
            point,
            what,
        })
}

#[cfg(test)]
mod tests;
