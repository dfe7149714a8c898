//! Sampling on one GPU device: [`sample_on_device`] runs a request's chains with one of two
//! kernels and returns the same traces the CPU sampler (`sampler::sample_chains`) returns.
//!
//! * [`GpuKernel::Nuts`] (the default, the performance path): whole NUTS transitions on the
//!   device, one state machine per chain (`shaders/nuts.wgsl`, driven by `nuts_driver.rs`).
//!   Chain state stays on the device; only draws and their statistics come back.
//! * [`GpuKernel::Fused`]: the device runs K leapfrog steps per chain per dispatch
//!   (`shaders/fused.wgsl`); the CPU builds the NUTS trees from them (`fused_driver.rs`,
//!   `crate::kernels::tree`), asking for more steps in a direction when a tree needs them
//!   and discarding the steps it did not use.
//!
//! Both run Stan's NUTS transition, built iteratively (see `shaders/nuts.wgsl`), with Philox
//! random numbers named by (seed, chain, iteration, purpose): the same request gives the same
//! draws on the same device, however the work is split into dispatches. Warmup adapts the step
//! size per chain and the diagonal metric pooled over chains (`adapt.rs` says why), with
//! Stan's or nutpie's schedule as the settings ask. A dense metric is refused. Chains whose
//! buffers do not fit one session of the device run in pieces, one session after another
//! (`pieces.rs`).
//!
//! # Blocking
//!
//! [`sample_on_device`] blocks until every chain is done (seconds to hours): call it from a
//! dedicated thread or `tokio::task::spawn_blocking`, never on an async executor. It checks
//! `observer.should_stop()` between dispatches (so a stop takes effect within one dispatch)
//! and calls `observer.on_draw` for every draw, from several threads.

mod adapt;
mod check;
mod dual;
mod fused_driver;
mod init;
mod nuts_driver;
mod pieces;
mod precision;
mod records;
mod steps;

#[cfg(test)]
mod tests;

use std::time::Duration;

use sampler::{
    AdaptationKind, ChainId, ChainSpec, ChainTrace, CheckedModel, MetricKind, Observer,
    SampleError, SamplerSettings, Seed,
};

pub use precision::{
    GRAD_TOLERANCE, LP_TOLERANCE, PATH_WARMUP, PrecisionCheck, PrecisionChoice, PrecisionMode,
    STEP_COLLAPSE, check_f32,
};
pub use steps::{FusedLeapfrog, LeapfrogStart, LeapfrogSteps};

use crate::device::{GpuDevice, KernelOverrides, KernelPlan, ModelKey, Prepare};
use crate::error::GpuError;
use crate::wgsl::{KernelKind, LoopBudget, Precision};
use precision::WarmupWatch;

/// Which GPU kernel runs the chains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuKernel {
    /// K leapfrog steps per dispatch on the device; trees built on the CPU.
    Fused {
        /// Leapfrog steps per chain per dispatch (K; 32 is a good default).
        steps_per_dispatch: u32,
    },
    /// Whole NUTS transitions on the device.
    Nuts {
        /// Transitions per chain per dispatch (M): exactly M during warmup (fewer where the
        /// adaptation schedule needs the host), about M while sampling, where each chain runs
        /// the same number of leapfrog steps per dispatch and long trajectories continue in
        /// the next dispatch.
        transitions_per_dispatch: u32,
    },
}

/// Leapfrog steps per dispatch of the fused kernel by default.
pub const DEFAULT_FUSED_STEPS: u32 = 32;
/// Transitions per dispatch of the NUTS kernel by default.
pub const DEFAULT_NUTS_TRANSITIONS: u32 = 16;

impl Default for GpuKernel {
    fn default() -> GpuKernel {
        GpuKernel::Nuts {
            transitions_per_dispatch: DEFAULT_NUTS_TRANSITIONS,
        }
    }
}

/// Chains to run on one device.
#[derive(Clone, Debug)]
pub struct GpuSampleRequest {
    /// The model.
    pub model: CheckedModel,
    /// Sampler settings (`threads` is ignored; `metric` must be diagonal).
    pub settings: SamplerSettings,
    /// The run's seed.
    pub seed: Seed,
    /// The chains; traces come back in this order. Either every chain has a `tuning` (no
    /// warmup; all with the same metric) or none has.
    pub chains: Vec<ChainSpec>,
    /// The kernel.
    pub kernel: GpuKernel,
    /// f32, f64 on adapters with `SHADER_F64`, or auto: f32 where a check before warmup
    /// finds it good enough for the model (`precision.rs`).
    pub precision: PrecisionMode,
}

impl GpuSampleRequest {
    /// The precision the drivers run: [`sample_on_device_with`] resolves
    /// [`PrecisionMode::Auto`] before any driver sees the request.
    pub(crate) fn resolved_precision(&self) -> Precision {
        match self.precision {
            PrecisionMode::F64 => Precision::F64,
            PrecisionMode::F32 | PrecisionMode::Auto => Precision::F32,
        }
    }
}

/// Whether a dispatch belonged to warmup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Initial points, step-size searches and warmup transitions.
    Warmup,
    /// Sampling.
    Sampling,
}

/// One dispatch of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DispatchStats {
    /// Warmup or sampling.
    pub phase: Phase,
    /// From submission to readable results, on the device thread.
    pub device_time: Duration,
    /// The kernels' own time, where the adapter has timestamps (kernel (b) only).
    pub kernel_time: Option<Duration>,
    /// Leapfrog steps the chains needed (gradient evaluations).
    pub useful_steps: u64,
    /// Leapfrog steps executed, counting a lockstep group's lanes as busy while any of them
    /// is: the sum over groups of `chains in the group * max(steps in the group)` (groups of
    /// the lockstep width; the last may be partial, and one chain alone never waits).
    pub lockstep_steps: u64,
    /// `n_chains * max(steps of any chain)`: the steps executed if every chain waited for the
    /// longest (NumPyro's vectorised chains do).
    pub dispatch_steps: u64,
    /// Draws completed.
    pub draws: u64,
}

/// A run's traces and how the device spent its time.
#[derive(Clone, Debug)]
pub struct GpuRun {
    /// One trace per chain, in the order of the request.
    pub traces: Vec<ChainTrace>,
    /// Every dispatch, in order.
    pub dispatches: Vec<DispatchStats>,
    /// Wall time of warmup (initial points, searches and warmup transitions; with auto
    /// precision, an f32 run given up for f64 included).
    pub warmup_time: Duration,
    /// Of `warmup_time`: initial points and setting up the chains on the device.
    pub init_time: Duration,
    /// Of `warmup_time`: step-size searches.
    pub search_time: Duration,
    /// Wall time of sampling.
    pub sampling_time: Duration,
    /// Warmup dispatches sent while the one before was still on the device (the NUTS
    /// kernel without a step budget: see `nuts_driver`).
    pub queued_warmup_dispatches: usize,
    /// The precision the chains ran in, and why.
    pub precision: PrecisionChoice,
    /// The chains that ended warmup far below the others' log density and started sampling
    /// from another chain's point (see `adapt::reseats`).
    pub restarted: Vec<ChainId>,
}

/// Lockstep statistics summed over dispatches ([`GpuRun::lockstep`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockstepTotals {
    /// Dispatches summed.
    pub dispatches: u64,
    /// Leapfrog steps the chains needed ([`DispatchStats::useful_steps`]).
    pub useful_steps: u64,
    /// Lane-steps executed by lockstep groups ([`DispatchStats::lockstep_steps`]).
    pub lockstep_steps: u64,
    /// Lane-steps if every chain waited for the longest ([`DispatchStats::dispatch_steps`]).
    pub dispatch_steps: u64,
}

impl LockstepTotals {
    /// Adds one dispatch.
    pub fn add(&mut self, dispatch: &DispatchStats) {
        self.dispatches += 1;
        self.useful_steps += dispatch.useful_steps;
        self.lockstep_steps += dispatch.lockstep_steps;
        self.dispatch_steps += dispatch.dispatch_steps;
    }

    /// Useful steps over executed lane-steps: 1 when no lane of a lockstep group ever waits;
    /// NaN when nothing ran.
    pub fn efficiency(&self) -> f64 {
        ratio(self.useful_steps, self.lockstep_steps)
    }

    /// Useful steps over `n_chains * longest` per dispatch: the efficiency if the whole
    /// dispatch ran in lockstep, as NumPyro's vectorised chains do; NaN when nothing ran.
    pub fn dispatch_efficiency(&self) -> f64 {
        ratio(self.useful_steps, self.dispatch_steps)
    }
}

fn ratio(useful: u64, executed: u64) -> f64 {
    if executed == 0 {
        f64::NAN
    } else {
        useful as f64 / executed as f64
    }
}

impl GpuRun {
    /// The lockstep statistics of the dispatches of `phase`, or of all with `None`.
    pub fn lockstep(&self, phase: Option<Phase>) -> LockstepTotals {
        let mut totals = LockstepTotals::default();
        for dispatch in &self.dispatches {
            if phase.is_none_or(|phase| dispatch.phase == phase) {
                totals.add(dispatch);
            }
        }
        totals
    }
}

/// Runs `request` on `device` and returns one trace per chain, in the order of
/// `request.chains`. Blocking (see the module documentation).
///
/// # Errors
///
/// [`GpuError::Sampler`] for invalid settings, a dense metric, chains without a finite
/// starting point, a failed step-size search or a stop asked by `observer`;
/// [`GpuError::NeedsF64`] when [`PrecisionMode::Auto`] finds that the model needs f64 (its
/// check before warmup, or an f32 run's failed warmup or first points) and the adapter has
/// none; [`GpuError::TooLarge`] when the buffers of a single chain do not fit the device
/// (more chains than fit run in pieces); device errors ([`GpuError::DeviceLost`],
/// [`GpuError::DeviceThreadGone`], [`GpuError::F64Unsupported`], ...) as they happen.
pub fn sample_on_device(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    observer: &dyn Observer,
) -> Result<Vec<ChainTrace>, GpuError> {
    sample_on_device_with(device, request, &KernelOverrides::default(), observer)
        .map(|run| run.traces)
}

/// [`sample_on_device`] with some of the kernels' plan fixed by `overrides` (the rest as
/// [`GpuDevice::kernel_plan`] resolves it for the request's chains); also returns the dispatch
/// statistics.
pub fn sample_on_device_with(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    overrides: &KernelOverrides,
    observer: &dyn Observer,
) -> Result<GpuRun, GpuError> {
    validate(request)?;
    if request.chains.is_empty() {
        return Ok(GpuRun {
            traces: Vec::new(),
            dispatches: Vec::new(),
            warmup_time: Duration::ZERO,
            init_time: Duration::ZERO,
            search_time: Duration::ZERO,
            sampling_time: Duration::ZERO,
            queued_warmup_dispatches: 0,
            precision: PrecisionChoice {
                precision: request.resolved_precision(),
                reason: "no chains".to_owned(),
                f32_chains: 0,
            },
            restarted: Vec::new(),
        });
    }
    let program = request.model.program();
    if request.precision == PrecisionMode::F64 && !device.supports(Precision::F64) {
        return Err(GpuError::F64Unsupported {
            adapter: device.report().name.clone(),
        });
    }
    // A model the device cannot run is refused before anything is compiled or checked (in
    // f32 or f64, one loop step costs the same iterations).
    let plan = device.kernel_plan(
        program,
        request.resolved_precision(),
        request.chains.len(),
        overrides,
    )?;
    loop_budget(device, program, request.settings.max_depth, &plan)?;
    let (choice, cpu_step_size) = precision::choose(device, request)?;
    pieces::run(device, request, overrides, observer, choice, cpu_step_size)
}

/// How the run of one piece of a request ([`run_chosen`]) ended.
enum PieceEnd {
    /// It ran.
    Ran(GpuRun),
    /// An f32 run that auto chose found f32 not good enough (what it found), at the end of
    /// warmup or at its first points, and stopped, none of its draws handed over: it must
    /// start again in f64.
    F32Failed(String),
}

/// Runs `request` (one piece of a request, `pieces.rs`, whose first chain is the request's
/// `first_chain`) in `choice`'s precision. An f32 run that auto chose is watched
/// (`WarmupWatch`, against the CPU path's step size `cpu_step_size`).
fn run_chosen(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    first_chain: usize,
    overrides: &KernelOverrides,
    observer: &dyn Observer,
    choice: &PrecisionChoice,
    cpu_step_size: Option<f64>,
) -> Result<PieceEnd, GpuError> {
    let run_in = |precision, observer: &dyn Observer| {
        run_in(device, request, precision, overrides, observer)
            .map_err(|err| pieces::in_request(err, first_chain))
    };
    if request.precision != PrecisionMode::Auto || choice.precision != Precision::F32 {
        let run = run_in(choice.precision, observer)?;
        return Ok(PieceEnd::Ran(GpuRun {
            precision: choice.clone(),
            ..run
        }));
    }
    let watch = WarmupWatch::new(
        observer,
        request.chains.iter().map(|spec| spec.chain),
        cpu_step_size,
        Iterations::of(request)?.warmup,
        request.settings.max_depth,
    );
    let result = run_in(Precision::F32, &watch);
    let found = match (watch.collapse(), &result) {
        (Some(found), _) => found,
        // The run's own check of its first points found what the check before warmup did
        // not see (other chains' points): f32 is not good enough after all.
        (
            None,
            Err(GpuError::DensityMismatch {
                chain, point, what, ..
            }),
        ) => format!("f32 at chain {chain}'s {point}: {what}"),
        (None, _) => {
            watch.finish();
            let mut choice = choice.clone();
            if let Some(warning) = watch.warning() {
                choice.reason = format!(
                    "{}; warning: then {warning}, too late to restart in f64 (its saved warmup draws were out): the posterior may be wrong",
                    choice.reason
                );
            }
            return result.map(|run| {
                PieceEnd::Ran(GpuRun {
                    precision: choice,
                    ..run
                })
            });
        }
    };
    Ok(PieceEnd::F32Failed(found))
}

/// Runs `request` in `precision` with its kernel, from its upload to its last draw.
fn run_in(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    precision: Precision,
    overrides: &KernelOverrides,
    observer: &dyn Observer,
) -> Result<GpuRun, GpuError> {
    let resolved;
    let request = if precision == request.resolved_precision() {
        request
    } else {
        resolved = GpuSampleRequest {
            precision: precision.into(),
            ..request.clone()
        };
        &resolved
    };
    let plan = device.kernel_plan(
        request.model.program(),
        precision,
        request.chains.len(),
        overrides,
    )?;
    let key = device.upload_model(&request.model, precision).wait()?;
    match request.kernel {
        GpuKernel::Nuts {
            transitions_per_dispatch,
        } => nuts_driver::run(
            device,
            key,
            request,
            &plan,
            transitions_per_dispatch.max(1),
            observer,
        ),
        GpuKernel::Fused { steps_per_dispatch } => fused_driver::run(
            device,
            key,
            request,
            &plan,
            steps_per_dispatch.max(1),
            observer,
        ),
    }
}

/// Starts building the pipelines of a run: the `logp_grad` kernel of its initial points and
/// `kernels` (each with its number of chains) as `plan` shapes them, each on a thread of its
/// own, so that they compile side by side rather than one after another at their first
/// requests.
pub(crate) fn prepare<const K: usize>(
    device: &GpuDevice,
    model: ModelKey,
    kernels: [(KernelKind, usize); K],
    plan: &KernelPlan,
) -> Result<(), GpuError> {
    let mut prepare = vec![Prepare {
        kernel: KernelKind::LogpGrad,
        overrides: KernelOverrides::logp_grad(None, None),
        n_chains: 0,
    }];
    prepare.extend(kernels.into_iter().map(|(kernel, n_chains)| Prepare {
        kernel,
        overrides: plan.pinned(),
        n_chains,
    }));
    device.prepare(model, prepare).wait()
}

/// What one dispatch may do on `device` for `program` (NUTS trees up to `max_depth`) under
/// `plan`'s loop limit: `None` where loop iterations are not capped, the error where one
/// leapfrog step of the model does not fit under the cap (`wgsl/cost.rs`).
pub(crate) fn loop_budget(
    device: &GpuDevice,
    program: &sampler::Program,
    max_depth: u32,
    plan: &KernelPlan,
) -> Result<Option<LoopBudget>, GpuError> {
    let Some(limit) = plan.loop_limit else {
        return Ok(None);
    };
    LoopBudget::of(program, max_depth, limit)
        .map(Some)
        .map_err(|exceeded| GpuError::LoopLimit {
            adapter: device.report().name.clone(),
            exceeded,
        })
}

/// A run's iteration counts, which both drivers bound the same way.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Iterations {
    /// Warmup iterations: 0 when the chains come tuned.
    pub warmup: u64,
    /// Warmup and draws.
    pub total: u64,
}

impl Iterations {
    /// The counts of `request`; an error when they or its chains overflow the kernels'
    /// 32-bit counters.
    pub(crate) fn of(request: &GpuSampleRequest) -> Result<Iterations, GpuError> {
        let settings = &request.settings;
        let n = request.chains.len();
        let tuned = request.chains.first().is_some_and(|c| c.tuning.is_some());
        let warmup = if tuned { 0 } else { settings.num_warmup };
        let total = warmup.saturating_add(settings.num_draws);
        if total >= u64::from(u32::MAX) || n > u32::MAX as usize {
            return Err(SampleError::Settings(format!(
                "{total} iterations of {n} chains are more than the GPU kernels count"
            ))
            .into());
        }
        Ok(Iterations { warmup, total })
    }
}

fn validate(request: &GpuSampleRequest) -> Result<(), GpuError> {
    let settings = &request.settings;
    settings.validate()?;
    if settings.metric == MetricKind::Dense {
        return Err(SampleError::Settings(
            "the GPU kernels adapt a diagonal metric only; use metric = \"diag\" or the CPU sampler"
                .into(),
        )
        .into());
    }
    let tuned = request.chains.iter().filter(|c| c.tuning.is_some()).count();
    if tuned != 0 && tuned != request.chains.len() {
        return Err(SampleError::Settings(format!(
            "{tuned} of {} chains have a tuning: on the GPU either every chain starts from a tuning or none does",
            request.chains.len()
        ))
        .into());
    }
    let dim = request.model.program().dim;
    let mut metric: Option<&[f64]> = None;
    for spec in &request.chains {
        let Some(tuning) = &spec.tuning else { continue };
        let fits = !tuning.dense
            && tuning.inv_metric.len() == dim
            && tuning.inv_metric.iter().all(|v| v.is_finite() && *v > 0.0)
            && tuning.step_size > 0.0
            && tuning.step_size.is_finite();
        if !fits {
            return Err(SampleError::Settings(format!(
                "chain {}: the given tuning is not a positive diagonal metric of {dim} values with a positive step size",
                spec.chain
            ))
            .into());
        }
        match metric {
            None => metric = Some(&tuning.inv_metric),
            Some(first) if first != tuning.inv_metric.as_slice() => {
                return Err(SampleError::Settings(format!(
                    "chain {}: its tuning's metric differs from the first chain's; the GPU kernels share one metric",
                    spec.chain
                ))
                .into());
            }
            Some(_) => {}
        }
    }
    if dim == 0 {
        return Err(SampleError::Settings("the model has no parameters to sample".into()).into());
    }
    Ok(())
}

/// Dual-averaging settings in the kernels' constants: Stan's γ, t0, κ; nutpie caps the step
/// size at π.
pub(crate) fn max_log_step(adaptation: AdaptationKind) -> f64 {
    match adaptation {
        AdaptationKind::Stan => f64::INFINITY,
        AdaptationKind::Nutpie => std::f64::consts::PI.ln(),
    }
}
