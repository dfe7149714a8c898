//! Warmup: step-size and metric adaptation, Stan's way or nutpie's way.
//!
//! * [`AdaptationKind::Stan`]: dual averaging on `accept_stat`, Stan's initial step-size search
//!   at the start and after every metric update, and windowed (75 / 25·2ᵏ / 50) estimates of
//!   the draws' variance (or covariance, with a dense metric).
//! * [`AdaptationKind::Nutpie`]: nutpie's gradient-based diagonal metric updated after every
//!   draw from overlapping windows, its step-size search, dual averaging on the plain
//!   acceptance statistic early and the symmetric one late, step size capped at π.

mod dual_average;
mod grad_diag;
pub(crate) mod windowed;

use serde::{Deserialize, Serialize};

pub use dual_average::{DualAverage, DualAverageOptions};
pub use grad_diag::{GradDiag, GradDiagOptions};
pub use windowed::{Welford, WindowOptions, WindowedMetric};

use crate::chain_core::ChainCore;
use crate::error::SampleError;
use crate::eval::LogDensity;
use crate::metric::Metric;
use crate::nuts::{TransitionInfo, leapfrog};

/// Which warmup to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdaptationKind {
    /// Stan's windowed adaptation.
    Stan,
    /// nutpie's gradient-based diagonal adaptation.
    #[default]
    Nutpie,
}

/// Which metric to adapt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// A diagonal inverse mass matrix.
    #[default]
    Diag,
    /// A dense inverse mass matrix (Stan's adaptation only).
    Dense,
}

/// The adaptation state of one chain during warmup.
pub(crate) enum Adapter {
    Stan {
        dual: DualAverage,
        metric: WindowedMetric,
        dense: bool,
    },
    Nutpie {
        dual: DualAverage,
        grad: Box<GradDiag>,
        inv_metric: Vec<f64>,
        first_update_pending: bool,
        num_warmup: u64,
    },
}

const LOG_STAN_TARGET: f64 = -0.223_143_551_314_209_7; // ln 0.8, hard-coded in Stan's init_stepsize

impl Adapter {
    /// Prepares warmup from the chain's initial point: sets the initial metric and step size.
    pub(crate) fn start<D: LogDensity>(
        kind: AdaptationKind,
        metric_kind: MetricKind,
        num_warmup: u64,
        core: &mut ChainCore<D>,
    ) -> Result<Adapter, SampleError> {
        let dim = core.current.q.len();
        let options = DualAverageOptions {
            target: core.target_accept,
            ..DualAverageOptions::default()
        };
        match kind {
            AdaptationKind::Stan => {
                let dense = metric_kind == MetricKind::Dense;
                core.metric = if dense {
                    let mut identity = vec![0.0; dim * dim];
                    (0..dim).for_each(|i| identity[i * dim + i] = 1.0);
                    Metric::dense(identity, dim).unwrap_or_else(|| Metric::unit(dim))
                } else {
                    Metric::unit(dim)
                };
                let initial = core.initial_step_size;
                core.step_size = initial;
                stan_init_stepsize(core)?;
                // Stan sets mu from the user's initial step size, before the search.
                let mut dual = DualAverage::new(options, core.step_size, f64::INFINITY);
                dual.set_mu((10.0 * initial).ln());
                Ok(Adapter::Stan {
                    dual,
                    metric: WindowedMetric::new(num_warmup, WindowOptions::default(), dim, dense),
                    dense,
                })
            }
            AdaptationKind::Nutpie => {
                let (grad, inv_metric) = GradDiag::new(
                    GradDiagOptions::default(),
                    num_warmup,
                    &core.current.q,
                    &core.current.grad,
                );
                core.metric = Metric::Diag(inv_metric.clone());
                let dual = nutpie_init_stepsize(core, options);
                Ok(Adapter::Nutpie {
                    dual,
                    grad: Box::new(grad),
                    inv_metric,
                    first_update_pending: true,
                    num_warmup,
                })
            }
        }
    }

    /// Learns from warmup transition `draw` (0-based) and sets the next step size and metric.
    pub(crate) fn learn<D: LogDensity>(
        &mut self,
        draw: u64,
        info: &TransitionInfo,
        core: &mut ChainCore<D>,
    ) -> Result<(), SampleError> {
        match self {
            Adapter::Stan {
                dual,
                metric,
                dense,
            } => {
                core.step_size = dual.update(info.accept_stat);
                if let Some(values) = metric.learn(&core.current.q) {
                    if values.iter().all(|v| v.is_finite()) {
                        let dim = core.current.q.len();
                        let new_metric = if *dense {
                            Metric::dense(values, dim)
                        } else {
                            Some(Metric::Diag(values))
                        };
                        if let Some(new_metric) = new_metric {
                            core.metric = new_metric;
                        }
                    }
                    stan_init_stepsize(core)?;
                    dual.set_mu((10.0 * core.step_size).ln());
                    dual.restart();
                }
            }
            Adapter::Nutpie {
                dual,
                grad,
                inv_metric,
                first_update_pending,
                num_warmup,
            } => {
                let usable = if info.divergent {
                    info.index_in_trajectory.abs() > 4
                } else {
                    info.index_in_trajectory != 0
                };
                let step = grad.learn(
                    draw,
                    &core.current.q,
                    &core.current.grad,
                    usable,
                    inv_metric,
                );
                if step.final_window {
                    dual.update(info.accept_stat_sym);
                    core.step_size = if draw + 1 == *num_warmup {
                        dual.averaged()
                    } else {
                        dual.current()
                    };
                    return Ok(());
                }
                dual.update(if step.late {
                    info.accept_stat_sym
                } else {
                    info.accept_stat
                });
                if step.changed {
                    core.metric = Metric::Diag(inv_metric.clone());
                }
                if step.changed && *first_update_pending {
                    *first_update_pending = false;
                    let options = dual_options(dual);
                    *dual = nutpie_init_stepsize(core, options);
                } else {
                    core.step_size = dual.current();
                }
            }
        }
        Ok(())
    }

    /// Ends warmup: the sampling step size is the averaged one.
    pub(crate) fn finish<D: LogDensity>(&self, core: &mut ChainCore<D>) {
        match self {
            Adapter::Stan { dual, .. } | Adapter::Nutpie { dual, .. } => {
                core.step_size = dual.averaged()
            }
        }
    }
}

fn dual_options(dual: &DualAverage) -> DualAverageOptions {
    dual.options()
}

/// The Hamiltonian of a point, NaN as +inf.
fn energy<D: LogDensity>(core: &ChainCore<D>, point: &crate::nuts::Point) -> f64 {
    let h = -point.logp + core.metric.kinetic_energy(&point.p);
    if h.is_nan() { f64::INFINITY } else { h }
}

/// Stan's `init_stepsize`: doubles or halves the step size until the acceptance of one
/// leapfrog step from the current point (fresh momentum each try) crosses 0.8.
fn stan_init_stepsize<D: LogDensity>(core: &mut ChainCore<D>) -> Result<(), SampleError> {
    let step = core.step_size;
    if step == 0.0 || step > 1e7 || step.is_nan() {
        return Ok(());
    }
    let mut probe = core.current.clone();
    let mut try_once = |core: &mut ChainCore<D>, eps: f64| -> f64 {
        probe.copy_from(&core.current);
        core.metric.sample_momentum(&mut core.rng, &mut probe.p);
        let h0 = energy(core, &probe);
        leapfrog(
            &mut core.density,
            &core.metric,
            &mut probe,
            eps,
            &mut core.workspace_velocity,
        );
        core.n_grad_evals += 1;
        h0 - energy(core, &probe)
    };
    let mut eps = step;
    let direction = if try_once(core, eps) > LOG_STAN_TARGET {
        1.0
    } else {
        -1.0
    };
    for _ in 0..2000 {
        let delta = try_once(core, eps);
        if (direction > 0.0 && !(delta > LOG_STAN_TARGET))
            || (direction < 0.0 && !(delta < LOG_STAN_TARGET))
        {
            break;
        }
        eps = if direction > 0.0 {
            2.0 * eps
        } else {
            0.5 * eps
        };
        if eps > 1e7 {
            return Err(SampleError::StepSize {
                chain: core.chain,
                message:
                    "the step size grew past 1e7: the posterior may be improper (check the priors)"
                        .into(),
            });
        }
        if eps == 0.0 {
            return Err(SampleError::StepSize {
                chain: core.chain,
                message: "no acceptably small step size: the model may be misspecified or its gradient wrong".into(),
            });
        }
    }
    core.step_size = eps;
    Ok(())
}

/// nutpie's step-size search: from 0.1, doubles or halves until the acceptance of one
/// leapfrog step (one momentum for all tries) crosses the target; at most 100 tries.
/// Returns a dual-averaging state started at the step size found.
fn nutpie_init_stepsize<D: LogDensity>(
    core: &mut ChainCore<D>,
    options: DualAverageOptions,
) -> DualAverage {
    const INITIAL: f64 = 0.1;
    let mut start = core.current.clone();
    core.metric.sample_momentum(&mut core.rng, &mut start.p);
    let h0 = energy(core, &start);
    let mut probe = start.clone();
    let mut accept = |core: &mut ChainCore<D>, eps: f64| -> Option<f64> {
        probe.copy_from(&start);
        leapfrog(
            &mut core.density,
            &core.metric,
            &mut probe,
            eps,
            &mut core.workspace_velocity,
        );
        core.n_grad_evals += 1;
        let delta = h0 - energy(core, &probe);
        (delta.is_finite() && -delta <= core.nuts.max_energy_error).then(|| delta.min(0.0).exp())
    };
    let fresh = |step: f64| DualAverage::new(options, step, std::f64::consts::PI);
    let mut eps = INITIAL;
    let Some(first) = accept(core, eps) else {
        core.step_size = INITIAL;
        return fresh(INITIAL);
    };
    let forward = first > options.target;
    for _ in 0..100 {
        let Some(stat) = accept(core, eps) else {
            core.step_size = INITIAL;
            return fresh(INITIAL);
        };
        let done = if forward {
            stat <= options.target || eps > 1e5
        } else {
            stat >= options.target || eps < 1e-10
        };
        if done {
            core.step_size = eps;
            return fresh(eps);
        }
        eps = if forward { 2.0 * eps } else { 0.5 * eps };
    }
    core.step_size = INITIAL;
    fresh(INITIAL)
}

#[cfg(test)]
mod tests;
