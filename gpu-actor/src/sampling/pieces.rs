//! Runs in pieces: a request whose chains' buffers do not fit one device session runs as
//! several sessions of (nearly) equal numbers of chains, one after another on the same
//! device, each with its own pooled warmup; the traces come back in the request's order.
//!
//! The piece size is decided before anything runs, from the buffers a session of that many
//! chains needs (`device::nuts::check_session`, `device::fused::check_session`, and the
//! initial points' batch) against the device's limits: the largest chain count whose buffers
//! all fit. Each buffer grows with the chains, so a bisection over the counts finds it
//! exactly. A request whose single chain does not fit gets that chain's
//! [`GpuError::TooLarge`]. `auto` precision's check runs once for the whole request
//! (`sample_on_device_with`); every piece runs in its choice, and an f32 piece whose warmup
//! fails starts again in f64 with the chains after it, split for f64's buffers.

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::ops::Range;

use sampler::{Observer, SampleError};

use super::{
    GpuKernel, GpuRun, GpuSampleRequest, PieceEnd, PrecisionChoice, nuts_driver, run_chosen,
};
use crate::device::resources::LogpGradWorkspace;
use crate::device::{GpuDevice, KernelOverrides, fused, nuts};
use crate::error::GpuError;
use crate::wgsl::Precision;

/// Runs `request` on `device` in `choice`'s precision, in as many pieces as its chains need
/// (see the module documentation). `cpu_step_size` is auto's check's, for the watch of f32
/// pieces.
pub(super) fn run(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    overrides: &KernelOverrides,
    observer: &dyn Observer,
    choice: PrecisionChoice,
    cpu_step_size: Option<f64>,
) -> Result<GpuRun, GpuError> {
    let n_chains = request.chains.len();
    let mut choice = choice;
    let mut pieces = plan(device, request, choice.precision, overrides, 0..n_chains)?;
    let mut done: Option<GpuRun> = None;
    // The wall time of f32 pieces auto gave up on: warmup time of the run.
    let mut abandoned = std::time::Duration::ZERO;
    let mut next = 0;
    while let Some(range) = pieces.get(next).cloned() {
        // The drivers stop within a dispatch; between pieces nothing else would ask.
        if done.is_some() && observer.should_stop() {
            return Err(SampleError::Cancelled.into());
        }
        let piece = piece_request(request, range.clone());
        let started = std::time::Instant::now();
        let end = run_chosen(
            device,
            &piece,
            range.start,
            overrides,
            observer,
            &choice,
            cpu_step_size,
        )?;
        match end {
            PieceEnd::Ran(run) => {
                done = Some(match done {
                    None => run,
                    Some(earlier) => join(earlier, run),
                });
                next += 1;
            }
            PieceEnd::F32Failed(found) => {
                abandoned += started.elapsed();
                // None of this piece's draws went to the caller: it starts again in f64, and
                // so do the pieces after it, sized for f64's buffers.
                if !device.supports(Precision::F64) {
                    return Err(GpuError::NeedsF64 {
                        adapter: device.report().name.clone(),
                        found,
                    });
                }
                tracing::info!(%found, "auto precision: restarting in f64");
                // The chains before ran in f32 (`join` counts them in the run's choice).
                choice = PrecisionChoice {
                    precision: Precision::F64,
                    reason: format!("{}; then {found}: restarted in f64", choice.reason),
                    f32_chains: 0,
                };
                pieces = plan(
                    device,
                    request,
                    Precision::F64,
                    overrides,
                    range.start..n_chains,
                )?;
                next = 0;
            }
        }
    }
    let mut done = done.ok_or_else(|| SampleError::Settings("no chains to run".into()))?;
    done.warmup_time += abandoned;
    Ok(done)
}

/// The pieces of `request`'s chains `chains` in `precision` on `device`: their ranges, in
/// order; one where they all fit one session.
fn plan(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    precision: Precision,
    overrides: &KernelOverrides,
    chains: Range<usize>,
) -> Result<Vec<Range<usize>>, GpuError> {
    let n_chains = chains.len();
    let most = most_chains(n_chains, |n| {
        session_fits(device, request, precision, overrides, n)
    })?;
    let pieces: Vec<Range<usize>> = split(n_chains, most)
        .into_iter()
        .map(|piece| chains.start + piece.start..chains.start + piece.end)
        .collect();
    if pieces.len() > 1 {
        tracing::info!(
            "{n_chains} chains in {} pieces of {} (device buffers, {precision})",
            pieces.len(),
            pieces[0].len()
        );
    }
    Ok(pieces)
}

/// `err` of a piece whose first chain is the request's `first_chain`, with its chain
/// counted in the request.
pub(super) fn in_request(mut err: GpuError, first_chain: usize) -> GpuError {
    if let GpuError::DensityMismatch { chain, .. } = &mut err {
        *chain += first_chain;
    }
    err
}

/// `request` with only its chains `range` (itself where that is all of them).
fn piece_request(request: &GpuSampleRequest, range: Range<usize>) -> Cow<'_, GpuSampleRequest> {
    if range == (0..request.chains.len()) {
        return Cow::Borrowed(request);
    }
    Cow::Owned(GpuSampleRequest {
        model: request.model.clone(),
        settings: request.settings.clone(),
        seed: request.seed,
        chains: request.chains[range].to_vec(),
        kernel: request.kernel,
        precision: request.precision,
    })
}

/// Whether a session of `n_chains` of `request`'s chains, in `precision` under `overrides`,
/// fits `device`: its kernel's session and the initial points' batch; the error of the first
/// buffer that does not.
pub(super) fn session_fits(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    precision: Precision,
    overrides: &KernelOverrides,
    n_chains: usize,
) -> Result<(), GpuError> {
    let program = request.model.program();
    let plan = device.kernel_plan(program, precision, n_chains, overrides)?;
    match request.kernel {
        GpuKernel::Nuts {
            transitions_per_dispatch,
        } => {
            let shape = nuts::NutsShape {
                n_chains,
                ..nuts_driver::session_shape(request, transitions_per_dispatch)?
            };
            let max_buffer_size = device.report().limits.max_buffer_size;
            nuts::check_session(program, &plan, &shape, max_buffer_size)?;
        }
        GpuKernel::Fused { steps_per_dispatch } => {
            fused::check_session(program, &plan, n_chains, steps_per_dispatch.max(1) as usize)?;
        }
    }
    // The initial points' batch, as the device thread plans it (`logp_grad_plan`).
    let points = device.kernel_plan(
        program,
        precision,
        0,
        &KernelOverrides::logp_grad(None, None),
    )?;
    LogpGradWorkspace::check(
        program,
        &points.shader,
        LogpGradWorkspace::capacity_for(n_chains),
        points.storage_limit,
    )
}

/// The most chains, up to `n_chains` (at least 1), whose session `fits`, which holds for
/// every count below one that it holds for; the error of one chain where none fits.
pub(super) fn most_chains(
    n_chains: usize,
    fits: impl Fn(usize) -> Result<(), GpuError>,
) -> Result<usize, GpuError> {
    let n_chains = n_chains.max(1);
    if fits(n_chains).is_ok() {
        return Ok(n_chains);
    }
    fits(1)?;
    // fits(low) holds, fits(high) does not.
    let (mut low, mut high) = (1, n_chains);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if fits(middle).is_ok() {
            low = middle;
        } else {
            high = middle;
        }
    }
    Ok(low)
}

/// `n_chains` chains in the fewest pieces of at most `most` chains, as equal as they can be
/// (the first `n_chains % pieces` one chain longer): their ranges, in order.
pub(super) fn split(n_chains: usize, most: usize) -> Vec<Range<usize>> {
    let count = n_chains.div_ceil(most.max(1)).max(1);
    let (size, longer) = (n_chains / count, n_chains % count);
    let mut start = 0;
    (0..count)
        .map(|k| {
            let len = size + usize::from(k < longer);
            let range = start..start + len;
            start += len;
            range
        })
        .collect()
}

/// The run of `earlier`'s chains then `later`'s: their traces and dispatches one after
/// another, their times summed, and `later`'s precision (the one the run ended in), with
/// `earlier`'s reason where it says more (a warning of an f32 piece).
fn join(earlier: GpuRun, later: GpuRun) -> GpuRun {
    let mut precision = later.precision;
    // Chains that ran in f32 before the run went on in f64 are named in its choice.
    precision.f32_chains = match (earlier.precision.precision, precision.precision) {
        (Precision::F32, Precision::F64) => earlier.traces.len(),
        _ => earlier.precision.f32_chains,
    };
    let (before, now) = (&earlier.precision.reason, &precision.reason);
    if before.starts_with(now.as_str()) {
        precision.reason.clone_from(before);
    } else if !now.starts_with(before.as_str()) {
        precision.reason = format!("{now}; earlier pieces: {before}");
    }
    let mut traces = earlier.traces;
    traces.extend(later.traces);
    let mut dispatches = earlier.dispatches;
    dispatches.extend(later.dispatches);
    let mut restarted = earlier.restarted;
    restarted.extend(later.restarted);
    GpuRun {
        traces,
        dispatches,
        warmup_time: earlier.warmup_time + later.warmup_time,
        init_time: earlier.init_time + later.init_time,
        search_time: earlier.search_time + later.search_time,
        sampling_time: earlier.sampling_time + later.sampling_time,
        queued_warmup_dispatches: earlier.queued_warmup_dispatches + later.queued_warmup_dispatches,
        precision,
        restarted,
    }
}
