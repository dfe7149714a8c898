//! One chain from start to finish: initial point, warmup with adaptation, sampling, trace.

use std::time::Instant;

use crate::adapt::Adapter;
use crate::chain_core::ChainCore;
use crate::error::SampleError;
use crate::eval::LogDensity;
use crate::metric::Metric;
use crate::nuts::{self, NutsOptions, Point, TransitionInfo, Workspace};
use crate::rng::{ChainRng, Seed};
use crate::run::{ChainSpec, ChainTrace, DrawEvent, DrawStats, Observer, SamplerSettings, Tuning};

/// Attempts at a finite initial point (Stan's default).
const INIT_ATTEMPTS: u32 = 100;

/// Most values a trace reserves before its first draw: the draw count comes from the
/// caller, so the reservation is capped and anything longer grows with the real draws.
const MAX_RESERVED_VALUES: usize = 1 << 22;

/// Finds a starting point: the given one, or uniform draws in `(-radius, radius)` until the
/// log density and gradient are finite.
fn initial_point<D: LogDensity>(
    density: &mut D,
    rng: &mut ChainRng,
    spec: &ChainSpec,
    radius: f64,
    point: &mut Point,
    n_grad_evals: &mut u64,
) -> Result<(), SampleError> {
    let finite = |point: &Point| point.logp.is_finite() && point.grad.iter().all(|g| g.is_finite());
    if let Some(init) = &spec.init {
        if init.len() != point.q.len() {
            return Err(SampleError::Settings(format!(
                "chain {}: initial point has {} values, the model has {} unconstrained parameters",
                spec.chain,
                init.len(),
                point.q.len()
            )));
        }
        point.q.copy_from_slice(init);
        nuts::evaluate(density, point);
        *n_grad_evals += 1;
        if !finite(point) {
            return Err(SampleError::Init {
                chain: spec.chain,
                attempts: 1,
                reason: density.explain(&point.q).unwrap_or_else(|| {
                    "the log density or its gradient is not finite at the given point".into()
                }),
            });
        }
        return Ok(());
    }
    for _ in 0..INIT_ATTEMPTS {
        for q in &mut point.q {
            *q = rng.uniform_in(-radius, radius);
        }
        nuts::evaluate(density, point);
        *n_grad_evals += 1;
        if finite(point) {
            return Ok(());
        }
    }
    Err(SampleError::Init {
        chain: spec.chain,
        attempts: INIT_ATTEMPTS,
        reason: density
            .explain(&point.q)
            .unwrap_or_else(|| "the log density or its gradient is not finite".into()),
    })
}

fn stats(info: &TransitionInfo, step_size: f64, logp: f64) -> DrawStats {
    DrawStats {
        lp: logp,
        accept_stat: info.accept_stat,
        step_size,
        tree_depth: info.depth,
        n_leapfrog: info.n_leapfrog,
        divergent: info.divergent,
        energy: info.energy,
    }
}

/// Runs one chain.
pub(crate) fn run_chain<D: LogDensity>(
    mut density: D,
    settings: &SamplerSettings,
    seed: Seed,
    spec: &ChainSpec,
    observer: &dyn Observer,
) -> Result<ChainTrace, SampleError> {
    let dim = density.dim();
    let n_columns = density.n_outputs();
    let mut rng = ChainRng::new(seed, spec.chain);
    let mut current = Point::new(dim);
    let mut n_grad_evals = 0;
    initial_point(
        &mut density,
        &mut rng,
        spec,
        settings.init_radius,
        &mut current,
        &mut n_grad_evals,
    )?;
    let init = current.q.clone();

    let mut core = ChainCore {
        chain: spec.chain,
        target_accept: settings.target_accept,
        initial_step_size: settings.initial_step_size,
        nuts: NutsOptions {
            max_depth: settings.max_depth,
            max_energy_error: settings.max_energy_error,
        },
        density,
        metric: Metric::unit(dim),
        step_size: settings.initial_step_size,
        jitter: settings.jitter(),
        rng,
        current,
        workspace: Workspace::new(dim, settings.max_depth),
        workspace_velocity: vec![0.0; dim],
        n_grad_evals,
    };

    let total = settings.num_warmup.saturating_add(settings.num_draws);
    let keep = observer.keeps_draws();
    let reserved_draws = if keep {
        usize::try_from(settings.num_draws)
            .unwrap_or(usize::MAX)
            .min(MAX_RESERVED_VALUES / n_columns.max(1))
    } else {
        0
    };
    let mut values = vec![0.0; n_columns];
    let mut trace = ChainTrace {
        chain: spec.chain,
        n_columns,
        warmup_draws: Vec::new(),
        warmup_stats: Vec::new(),
        draws: Vec::with_capacity(reserved_draws * n_columns),
        stats: Vec::with_capacity(reserved_draws),
        tuning: Tuning {
            step_size: core.step_size,
            inv_metric: Vec::new(),
            dense: false,
        },
        init,
        final_position: Vec::new(),
        grad_evals_warmup: 0,
        grad_evals_sampling: 0,
        warmup_seconds: 0.0,
        sampling_seconds: 0.0,
    };

    // Warmup, or the given tuning.
    let warmup_start = Instant::now();
    if let Some(tuning) = &spec.tuning {
        core.metric = tuning.metric(dim).ok_or_else(|| {
            SampleError::Settings(format!(
                "chain {}: the given metric does not fit the model or is not positive definite",
                spec.chain
            ))
        })?;
        core.step_size = tuning.step_size;
    }
    let mut adapter = match spec.tuning {
        Some(_) => None,
        None if settings.num_warmup == 0 => None,
        None => Some(Adapter::start(
            settings.adaptation,
            settings.metric,
            settings.num_warmup,
            &mut core,
        )?),
    };
    let warmup_iterations = if spec.tuning.is_some() {
        0
    } else {
        settings.num_warmup
    };
    for draw in 0..warmup_iterations {
        if observer.should_stop() {
            return Err(SampleError::Cancelled);
        }
        let (info, step_size) = core.transition();
        if let Some(adapter) = adapter.as_mut() {
            adapter.learn(draw, &info, &mut core)?;
        }
        let draw_stats = stats(&info, step_size, core.current.logp);
        core.density.write_outputs(&core.current.q, &mut values);
        if settings.save_warmup && keep {
            trace.warmup_draws.extend_from_slice(&values);
            trace.warmup_stats.push(draw_stats);
        }
        observer.on_draw(&DrawEvent {
            chain: spec.chain,
            iteration: draw,
            total,
            warmup: true,
            stats: &draw_stats,
            values: &values,
        });
    }
    if let Some(adapter) = &adapter {
        adapter.finish(&mut core);
    }
    trace.grad_evals_warmup = core.n_grad_evals;
    trace.warmup_seconds = warmup_start.elapsed().as_secs_f64();

    // Sampling.
    let sampling_start = Instant::now();
    for draw in 0..settings.num_draws {
        if observer.should_stop() {
            return Err(SampleError::Cancelled);
        }
        let (info, step_size) = core.transition();
        let draw_stats = stats(&info, step_size, core.current.logp);
        core.density.write_outputs(&core.current.q, &mut values);
        if keep {
            trace.draws.extend_from_slice(&values);
            trace.stats.push(draw_stats);
        }
        observer.on_draw(&DrawEvent {
            chain: spec.chain,
            iteration: warmup_iterations + draw,
            total,
            warmup: false,
            stats: &draw_stats,
            values: &values,
        });
    }
    trace.sampling_seconds = sampling_start.elapsed().as_secs_f64();
    trace.grad_evals_sampling = core.n_grad_evals - trace.grad_evals_warmup;
    trace.tuning = Tuning {
        step_size: core.step_size,
        inv_metric: core.metric.values().to_vec(),
        dense: matches!(core.metric, Metric::Dense { .. }),
    };
    trace.final_position = core.current.q.clone();
    Ok(trace)
}
