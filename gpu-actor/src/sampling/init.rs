//! Initial points: the chains' own, or uniform draws in `(-init_radius, init_radius)` from
//! each chain's `sampler::ChainRng` (so a seed gives the CPU sampler's starting points), kept
//! when the log density and gradient the GPU computes there are finite; up to 100 attempts
//! per chain, as Stan. All chains are evaluated together, one batch per attempt. The first
//! few chains' points are then checked against the CPU (`check.rs`).

use rayon::prelude::*;
use sampler::{ChainRng, ChainSpec, CheckedModel, LogDensity, SampleError, SamplerSettings, Seed};

use crate::device::{GpuDevice, LogpGradRequest, ModelKey};
use crate::error::{CheckedPoint, GpuError};

/// Attempts at a finite initial point (Stan's default).
const INIT_ATTEMPTS: u32 = 100;

/// The chains' starting points, in the order of the specs.
#[derive(Clone, Debug)]
pub(crate) struct InitialPoints {
    pub q: Vec<Vec<f64>>,
    pub g: Vec<Vec<f64>>,
    pub logp: Vec<f64>,
    /// Gradient evaluations spent per chain.
    pub grad_evals: Vec<u64>,
    /// The device's time for the evaluations, from submission to results (of the wall time
    /// of [`initial_points`], the rest is the host's).
    pub device_time: std::time::Duration,
}

fn explain(model: &CheckedModel, q: &[f64], fallback: &str) -> String {
    model
        .evaluator()
        .explain(q)
        .unwrap_or_else(|| fallback.to_owned())
}

/// A chain's first point: `init` when given, else uniform in `(-radius, radius)` from the
/// chain's stream `rng` (which then goes on to its momenta).
pub(crate) fn first_point(
    rng: &mut ChainRng,
    init: Option<&Vec<f64>>,
    dim: usize,
    radius: f64,
) -> Vec<f64> {
    match init {
        Some(init) => init.clone(),
        None => (0..dim).map(|_| rng.uniform_in(-radius, radius)).collect(),
    }
}

pub(crate) fn initial_points(
    device: &GpuDevice,
    key: ModelKey,
    model: &CheckedModel,
    settings: &SamplerSettings,
    seed: Seed,
    specs: &[ChainSpec],
) -> Result<InitialPoints, GpuError> {
    let dim = model.program().dim;
    let n = specs.len();
    if let Some(spec) = specs
        .iter()
        .find(|spec| spec.init.as_ref().is_some_and(|init| init.len() != dim))
    {
        return Err(SampleError::Settings(format!(
            "chain {}: initial point has {} values, the model has {dim} unconstrained parameters",
            spec.chain,
            spec.init.as_ref().map_or(0, Vec::len)
        ))
        .into());
    }
    let radius = settings.init_radius;
    // Chains in parallel: a ChaCha stream's set-up and first block for each of thousands of
    // chains were milliseconds of one thread.
    let (mut rngs, q): (Vec<ChainRng>, Vec<Vec<f64>>) = specs
        .par_iter()
        .map(|spec| {
            let mut rng = ChainRng::new(seed, spec.chain);
            let q = first_point(&mut rng, spec.init.as_ref(), dim, radius);
            (rng, q)
        })
        .unzip();
    let mut points = InitialPoints {
        q,
        g: vec![vec![0.0; dim]; n],
        logp: vec![0.0; n],
        grad_evals: vec![0; n],
        device_time: std::time::Duration::ZERO,
    };
    let mut pending: Vec<usize> = (0..n).collect();
    for attempt in 1..=INIT_ATTEMPTS {
        let batch = device
            .logp_grad(LogpGradRequest {
                model: key,
                points: pending
                    .iter()
                    .flat_map(|&c| points.q[c].iter().copied())
                    .collect(),
                placement: None,
                lanes: None,
            })
            .wait()?;
        points.device_time += batch.elapsed;
        let mut failed = Vec::new();
        for (k, &c) in pending.iter().enumerate() {
            points.grad_evals[c] += 1;
            let grad = &batch.grad[k * dim..(k + 1) * dim];
            let logp = batch.logp[k];
            if logp.is_finite() && grad.iter().all(|g| g.is_finite()) {
                points.g[c].copy_from_slice(grad);
                points.logp[c] = logp;
                continue;
            }
            if specs[c].init.is_some() {
                return Err(SampleError::Init {
                    chain: specs[c].chain,
                    attempts: 1,
                    reason: explain(
                        model,
                        &points.q[c],
                        "the log density or its gradient is not finite at the given point",
                    ),
                }
                .into());
            }
            if attempt == INIT_ATTEMPTS {
                return Err(SampleError::Init {
                    chain: specs[c].chain,
                    attempts: INIT_ATTEMPTS,
                    reason: explain(
                        model,
                        &points.q[c],
                        "the log density or its gradient is not finite",
                    ),
                }
                .into());
            }
            points.q[c]
                .iter_mut()
                .for_each(|q| *q = rngs[c].uniform_in(-radius, radius));
            failed.push(c);
        }
        pending = failed;
        if pending.is_empty() {
            break;
        }
    }
    for c in 0..n.min(super::check::CHECKED_CHAINS) {
        super::check::check_point(
            &device.report().name,
            model.program(),
            key.precision,
            c,
            CheckedPoint::Initial,
            &points.q[c],
            points.logp[c],
            Some(&points.g[c]),
        )?;
    }
    Ok(points)
}
