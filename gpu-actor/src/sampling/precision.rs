//! The precision a run samples in: f32 or f64 as asked, or, with [`PrecisionMode::Auto`]
//! (the default), f32 where it computes what NUTS needs and f64 where it does not.
//!
//! f32 is wrong for some models in a way no first-point check sees: an ill-conditioned
//! regression (uncentred predictors at a scale of thousands, or intercept and slope correlated
//! at -0.99999) is computed well at random initial points, where the gradient is large, and
//! badly in the typical set, where the log density's small differences and the gradient's
//! small components are what is left of the cancellation of large terms. NUTS then sees
//! energy errors that are not small against 1 and gradients that point the wrong way, and
//! samples a wrong posterior while its diagnostics only hint at it.
//!
//! So the check goes to the typical set first, on the CPU in f64: the CPU sampler's warmup
//! of two chains (the run's own warmup length, between 150 and [`PATH_WARMUP`] transitions,
//! trees cut so that its gradient evaluations stay within [`PATH_WORK`] tape entries; 150
//! transitions stopped short of the typical set of a regression whose chains start far from
//! it, where f32 looks fine), then one
//! short leapfrog trajectory from each chain's last point with its adapted step size and
//! metric. The device evaluates the log density and gradient in f32 at those points and at a
//! few chains' initial points, in one dispatch; the CPU evaluator gives the f64 answers. f32
//! passes when, within each trajectory, every log-density difference to its first point is
//! off by less than [`LP_TOLERANCE`] (an energy error that would change NUTS' acceptance and
//! multinomial weights), and every gradient is off by less than [`GRAD_TOLERANCE`] of its
//! length in the adapted metric's scale (the leapfrog's direction). Otherwise the run is in
//! f64 where the adapter has `SHADER_F64`, and where it has not, the run is refused with
//! [`GpuError::NeedsF64`], which a supervisor answers by sampling on the CPU.
//!
//! The check costs one `logp_grad` dispatch in f32 and the CPU warmup of two chains, whose
//! gradient evaluations are bounded twice: by the program's size ([`PATH_WORK`]), and by
//! their time ([`PATH_SECONDS`], priced by timing a few evaluations first), since the tape's
//! length says little of what loops and matrix functions cost. A model whose gradient is
//! slow on the CPU gets a shorter path (a weaker check) rather than a later first draw; no
//! f64 pipeline is built for it.
//!
//! What the check misses, an f32 warmup shows: an f32 run auto chose is watched
//! ([`WarmupWatch`]), and where its step sizes leave the CPU path's (collapsed far below it,
//! or far above it with saturated trees) it starts again in f64 before any of its draws reach the caller (or is refused with
//! [`GpuError::NeedsF64`] on an adapter without f64).

use std::fmt;
use std::time::Instant;

use sampler::nuts::{self, Point};
use sampler::{ChainRng, ChainSpec, LogDensity, Metric, NoObserver, SamplerSettings};

use super::GpuSampleRequest;
use crate::device::{GpuDevice, LogpGradRequest};
use crate::error::GpuError;
use crate::wgsl::Precision;

pub(crate) use watch::WarmupWatch;

/// The precision a run asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PrecisionMode {
    /// f32 where the check before warmup finds it good enough for the model, else f64 (or
    /// the CPU, on an adapter without `SHADER_F64`).
    #[default]
    Auto,
    /// f32, unchecked: the user insists.
    F32,
    /// f64; needs `SHADER_F64`.
    F64,
}

impl From<Precision> for PrecisionMode {
    fn from(precision: Precision) -> PrecisionMode {
        match precision {
            Precision::F32 => PrecisionMode::F32,
            Precision::F64 => PrecisionMode::F64,
        }
    }
}

impl fmt::Display for PrecisionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PrecisionMode::Auto => "auto",
            PrecisionMode::F32 => "f32",
            PrecisionMode::F64 => "f64",
        })
    }
}

/// The precision a run sampled in, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrecisionChoice {
    /// What ran.
    pub precision: Precision,
    /// Why: `asked`, or what the check found (`auto: ...`).
    pub reason: String,
    /// How many of the first chains ran in f32 before the rest went on in f64 (a run in
    /// pieces whose later f32 piece auto restarted in f64); 0 when every chain ran in
    /// `precision`.
    pub f32_chains: usize,
}

impl fmt::Display for PrecisionChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.f32_chains > 0 && self.precision == Precision::F64 {
            write!(
                f,
                "f32 for the first {} chains, f64 for the rest ({})",
                self.f32_chains, self.reason
            )
        } else {
            write!(f, "{} ({})", self.precision, self.reason)
        }
    }
}

impl PrecisionChoice {
    pub(crate) fn asked(precision: Precision) -> PrecisionChoice {
        PrecisionChoice {
            precision,
            reason: "asked".to_owned(),
            f32_chains: 0,
        }
    }
}

/// How far from the CPU path's step size an f32 run's warmup may take its chains' step sizes
/// (below it, or above it with saturated trees) before auto restarts the run in f64
/// (`WarmupWatch`).
pub const STEP_COLLAPSE: f64 = 30.0;

/// The largest error of a log-density difference within one trajectory, in units of energy.
pub const LP_TOLERANCE: f64 = 0.1;
/// The largest error of a gradient relative to its length, both in the adapted metric's
/// scale.
pub const GRAD_TOLERANCE: f64 = 0.05;
/// Warmup transitions of the CPU path to the typical set, at most.
pub const PATH_WARMUP: u64 = 1000;
/// Warmup transitions of the CPU path, at least (a run's own warmup may be shorter).
const PATH_MIN_WARMUP: u64 = 150;
/// Chains of the CPU path.
const PATH_CHAINS: usize = 2;
/// Leapfrog steps of the trajectory checked from each path chain's last point.
const TRAJECTORY_STEPS: usize = 8;
/// Initial points checked.
const INITIAL_POINTS: usize = 4;
/// What the CPU path may cost: gradient evaluations times the program's tape and data.
const PATH_WORK: f64 = 4e8;
/// What the CPU path's gradient evaluations may take, in seconds: the bound on what auto
/// adds to a run's time to its first draw (about a second on a GPU), whatever the model's
/// gradient costs on the CPU, where the tape's size says too little (loops, matrix
/// functions).
const PATH_SECONDS: f64 = 1.0;
/// Gradient evaluations timed to price the CPU path, at most, and the seconds they may take.
const PRICE_EVALUATIONS: usize = 16;
const PRICE_SECONDS: f64 = 0.05;
/// The CPU path's seconds per gradient evaluation over the evaluation's own: the sampler's
/// work and the chains' threads (gp_pois_regr, 13 parameters: about 2 on an idle machine).
const PATH_OVERHEAD: f64 = 2.0;

/// What the check measured, over all its points.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PrecisionCheck {
    /// The largest error of an f32 log-density difference within a trajectory.
    pub lp_error: f64,
    /// The largest error of an f32 gradient relative to its length (metric-scaled).
    pub grad_error: f64,
    /// Points the device evaluated.
    pub points: usize,
    /// Whether a log density or gradient was finite in f64 and not in f32.
    pub not_finite: bool,
    /// The smallest step size the CPU path's warmup chose (`None` without a CPU path): what
    /// an f32 run's warmup is compared with afterwards (auto precision's `WarmupWatch`).
    pub cpu_step_size: Option<f64>,
}

impl PrecisionCheck {
    /// Whether f32 is good enough.
    pub fn f32_agrees(&self) -> bool {
        !self.not_finite && self.lp_error <= LP_TOLERANCE && self.grad_error <= GRAD_TOLERANCE
    }

    /// What it found, for a summary's first line.
    pub fn describe(&self) -> String {
        if self.not_finite {
            format!(
                "f32 log density or gradient not finite where f64's is, at one of {} points",
                self.points
            )
        } else if self.f32_agrees() {
            format!(
                "f32 agrees with f64 within {:.1e} in log density and {:.1e} in gradient at {} points",
                self.lp_error, self.grad_error, self.points
            )
        } else if self.lp_error > LP_TOLERANCE {
            format!(
                "f32 log density off by {:.2e} (tolerance {LP_TOLERANCE}) in the typical set",
                self.lp_error
            )
        } else {
            format!(
                "f32 gradient off by {:.1}% (tolerance {}%) in the typical set",
                100.0 * self.grad_error,
                100.0 * GRAD_TOLERANCE
            )
        }
    }
}

/// The precision `request` runs in on `device`: as asked, or by [`check_f32`] for
/// [`PrecisionMode::Auto`].
///
/// # Errors
///
/// [`GpuError::F64Unsupported`] when f64 is asked of an adapter without it;
/// [`GpuError::NeedsF64`] when auto finds f32 not good enough and the adapter has no f64;
/// device errors of the check.
pub(crate) fn choose(
    device: &GpuDevice,
    request: &GpuSampleRequest,
) -> Result<(PrecisionChoice, Option<f64>), GpuError> {
    match request.precision {
        PrecisionMode::F32 => Ok((PrecisionChoice::asked(Precision::F32), None)),
        PrecisionMode::F64 => Ok((PrecisionChoice::asked(Precision::F64), None)),
        PrecisionMode::Auto => {
            let check = check_f32(device, request)?;
            let cpu_step_size = check.cpu_step_size;
            let found = check.describe();
            if check.f32_agrees() || device.passes_precision_check() {
                tracing::info!(%found, "auto precision: f32");
                let choice = PrecisionChoice {
                    precision: Precision::F32,
                    reason: format!("auto: {found}"),
                    f32_chains: 0,
                };
                Ok((choice, cpu_step_size))
            } else if device.supports(Precision::F64) {
                tracing::info!(%found, "auto precision: f64");
                let choice = PrecisionChoice {
                    precision: Precision::F64,
                    reason: format!("auto: {found}"),
                    f32_chains: 0,
                };
                Ok((choice, None))
            } else {
                Err(GpuError::NeedsF64 {
                    adapter: device.report().name.clone(),
                    found,
                })
            }
        }
    }
}

/// A point to evaluate and what it belongs to.
struct Checked {
    q: Vec<f64>,
    /// The trajectory (its index in `scales`) and whether it is the trajectory's first point;
    /// `None` for an initial point (gradient only, in unit scale).
    trajectory: Option<(usize, bool)>,
}

/// Evaluates the log density and gradient of `request`'s model in f32 on `device` at a few
/// chains' initial points and along short trajectories in the typical set (see the module
/// documentation), against the CPU's f64.
///
/// # Errors
///
/// Device errors.
pub fn check_f32(
    device: &GpuDevice,
    request: &GpuSampleRequest,
) -> Result<PrecisionCheck, GpuError> {
    let model = &request.model;
    let dim = model.program().dim;
    let mut points: Vec<Checked> = initial_points(request)
        .into_iter()
        .map(|q| Checked {
            q,
            trajectory: None,
        })
        .collect();
    let mut scales = Vec::new();
    let started = Instant::now();
    let typical = typical_points(request);
    let path_seconds = started.elapsed().as_secs_f64();
    let cpu_step_size = typical
        .iter()
        .map(|(_, step_size, _)| *step_size)
        .reduce(f64::min);
    for (start, step_size, inv_metric) in typical {
        let trajectory = scales.len();
        let metric = Metric::Diag(inv_metric.clone());
        scales.push(inv_metric.iter().map(|v| v.sqrt()).collect::<Vec<f64>>());
        let mut density = model.evaluator();
        let mut point = Point::new(dim);
        point.q.copy_from_slice(&start);
        nuts::evaluate(&mut density, &mut point);
        let mut rng = ChainRng::new(request.seed, sampler::ChainId(u32::MAX - trajectory as u32));
        metric.sample_momentum(&mut rng, &mut point.p);
        let mut velocity = vec![0.0; dim];
        points.push(Checked {
            q: start,
            trajectory: Some((trajectory, true)),
        });
        for _ in 0..TRAJECTORY_STEPS {
            nuts::leapfrog(&mut density, &metric, &mut point, step_size, &mut velocity);
            if !point.logp.is_finite() {
                break;
            }
            points.push(Checked {
                q: point.q.clone(),
                trajectory: Some((trajectory, false)),
            });
        }
    }
    let trajectories_seconds = started.elapsed().as_secs_f64() - path_seconds;
    let key = device.upload_model(model, Precision::F32).wait()?;
    let batch = device
        .logp_grad(LogpGradRequest {
            model: key,
            points: points.iter().flat_map(|p| p.q.iter().copied()).collect(),
            placement: None,
            lanes: None,
        })
        .wait()?;
    let device_seconds = started.elapsed().as_secs_f64() - path_seconds - trajectories_seconds;
    let mut check = PrecisionCheck {
        points: points.len(),
        cpu_step_size,
        ..PrecisionCheck::default()
    };
    let mut density = model.evaluator();
    let mut grad = vec![0.0; dim];
    // Each trajectory's first point: (f32, f64) log densities.
    let mut first = vec![(0.0, 0.0); scales.len()];
    for (k, point) in points.iter().enumerate() {
        let lp = density.logp_grad(&point.q, &mut grad);
        let lp32 = batch.logp[k];
        let grad32 = &batch.grad[k * dim..(k + 1) * dim];
        if !lp.is_finite() || grad.iter().any(|g| !g.is_finite()) {
            continue;
        }
        if !lp32.is_finite() || grad32.iter().any(|g| !g.is_finite()) {
            check.not_finite = true;
            continue;
        }
        let unit;
        let scale: &[f64] = match point.trajectory {
            Some((t, _)) => &scales[t],
            None => {
                unit = vec![1.0; dim];
                &unit
            }
        };
        check.grad_error = check.grad_error.max(relative_error(grad32, &grad, scale));
        match point.trajectory {
            Some((t, true)) => first[t] = (lp32, lp),
            Some((t, false)) => {
                let (first32, first64) = first[t];
                let error = ((lp32 - first32) - (lp - first64)).abs();
                check.lp_error = check.lp_error.max(error);
            }
            None => {}
        }
    }
    tracing::info!(
        path_seconds,
        trajectories_seconds,
        device_seconds,
        seconds = started.elapsed().as_secs_f64(),
        "auto precision: the check's time"
    );
    Ok(check)
}

/// `|s * (a - b)| / |s * b|`: how far gradient `a` is from `b` relative to `b`'s length,
/// each coordinate scaled by `s`; 0 where both are zero.
fn relative_error(a: &[f64], b: &[f64], s: &[f64]) -> f64 {
    let mut diff = 0.0;
    let mut norm = 0.0;
    for ((a, b), s) in a.iter().zip(b).zip(s) {
        diff += (s * (a - b)).powi(2);
        norm += (s * b).powi(2);
    }
    if diff == 0.0 {
        0.0
    } else {
        (diff / norm).sqrt()
    }
}

/// The first chains' initial points, as the drivers draw them (`init.rs`): given, or
/// uniform in `(-init_radius, init_radius)` from each chain's stream.
fn initial_points(request: &GpuSampleRequest) -> Vec<Vec<f64>> {
    let dim = request.model.program().dim;
    let radius = request.settings.init_radius;
    request
        .chains
        .iter()
        .take(INITIAL_POINTS)
        .map(|spec| {
            let mut rng = ChainRng::new(request.seed, spec.chain);
            let init = spec.init.as_ref().filter(|init| init.len() == dim);
            super::init::first_point(&mut rng, init, dim, radius)
        })
        .collect()
}

/// Points in the typical set, each with a step size and diagonal inverse metric to move
/// from there: the given tunings' initial points when the chains come tuned, else the last
/// points of a short CPU run (none when that run fails: the initial points are all the
/// check has then).
fn typical_points(request: &GpuSampleRequest) -> Vec<(Vec<f64>, f64, Vec<f64>)> {
    let program = request.model.program();
    let dim = program.dim;
    let tuned: Vec<_> = request
        .chains
        .iter()
        .filter_map(|spec| {
            let tuning = spec.tuning.as_ref()?;
            let init = spec.init.as_ref()?;
            (!tuning.dense && tuning.inv_metric.len() == dim && init.len() == dim)
                .then(|| (init.clone(), tuning.step_size, tuning.inv_metric.clone()))
        })
        .take(PATH_CHAINS)
        .collect();
    if !tuned.is_empty() {
        return tuned;
    }
    let base = SamplerSettings {
        num_draws: 1,
        metric: sampler::MetricKind::Diag,
        save_warmup: false,
        threads: PATH_CHAINS,
        ..request.settings.clone()
    };
    let specs: Vec<ChainSpec> = request
        .chains
        .iter()
        .take(PATH_CHAINS)
        .map(|spec| ChainSpec {
            chain: spec.chain,
            init: spec.init.clone(),
            tuning: None,
        })
        .collect();
    let evaluation_seconds = evaluation_seconds(request);
    let (num_warmup, max_depth) =
        path_budget(program, request.settings.max_depth, evaluation_seconds);
    let num_warmup = num_warmup.min(request.settings.num_warmup.max(PATH_MIN_WARMUP));
    let settings = SamplerSettings {
        num_warmup,
        max_depth,
        ..base
    };
    match sampler::sample_chains(
        || request.model.evaluator(),
        &settings,
        request.seed,
        &specs,
        &NoObserver,
    ) {
        Ok(traces) => {
            tracing::info!(
                num_warmup,
                max_depth,
                evaluation_seconds,
                size = program.tape_len + program.data.len(),
                grad_evals = traces.iter().map(|t| t.grad_evals_warmup).sum::<u64>(),
                "auto precision: the CPU path"
            );
            traces
                .into_iter()
                .filter(|trace| !trace.tuning.dense && trace.tuning.inv_metric.len() == dim)
                .map(|trace| {
                    (
                        trace.final_position,
                        trace.tuning.step_size,
                        trace.tuning.inv_metric,
                    )
                })
                .collect()
        }
        Err(error) => {
            tracing::info!(%error, "auto precision: the CPU path to the typical set failed");
            Vec::new()
        }
    }
}

/// Seconds per gradient evaluation of the CPU path: the fastest of a few evaluations at the
/// first chain's initial point (the fastest, so that the machine's load, which slows the
/// path's wall-clock time as it does everything else, does not shorten the path and weaken
/// the check), times [`PATH_OVERHEAD`] for the sampler's own work.
fn evaluation_seconds(request: &GpuSampleRequest) -> f64 {
    let Some(q) = initial_points(request).into_iter().next() else {
        return 0.0;
    };
    let mut density = request.model.evaluator();
    let mut grad = vec![0.0; q.len()];
    density.logp_grad(&q, &mut grad);
    let started = Instant::now();
    let mut fastest = f64::INFINITY;
    for _ in 0..PRICE_EVALUATIONS {
        let evaluation = Instant::now();
        density.logp_grad(&q, &mut grad);
        fastest = fastest.min(evaluation.elapsed().as_secs_f64());
        if started.elapsed().as_secs_f64() > PRICE_SECONDS {
            break;
        }
    }
    fastest * PATH_OVERHEAD
}

/// Warmup transitions and tree depth of the CPU path for `program`, so that its gradient
/// evaluations times the program's size stay within [`PATH_WORK`], and at
/// `evaluation_seconds` each (per chain; the two run side by side) within [`PATH_SECONDS`].
fn path_budget(program: &sampler::Program, max_depth: u32, evaluation_seconds: f64) -> (u64, u32) {
    let size = (program.tape_len + program.data.len()).max(1) as f64;
    let by_work = PATH_WORK / size / PATH_CHAINS as f64;
    // Rounded down to a power of two: noise in the timing seldom changes the path.
    let by_time = PATH_SECONDS / evaluation_seconds;
    let by_time = if by_time >= 1.0 {
        by_time.log2().floor().exp2()
    } else {
        0.0
    };
    let evaluations = by_work.min(by_time);
    let mut depth = max_depth.clamp(1, 8);
    while depth > 3 && PATH_WARMUP as f64 * f64::from(1u32 << depth) > evaluations {
        depth -= 1;
    }
    let warmup = (evaluations / f64::from(1u32 << depth)).clamp(20.0, PATH_WARMUP as f64);
    // Only the costliest models get fewer than the usual minimum: a weaker check, in bounded
    // time.
    (warmup as u64, depth)
}

#[cfg(test)]
mod tests;
mod watch;
