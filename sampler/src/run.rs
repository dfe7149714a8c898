//! What a run of chains is given and gives back: the settings, each chain's specification,
//! its trace, and the observer that watches the draws as they come. Plain data, so that the
//! driver (`sample`), the chain (`chain`) and other crates' drivers (the GPU's) share them
//! without depending on each other.

use serde::{Deserialize, Serialize};

use crate::adapt::{AdaptationKind, MetricKind};
use crate::error::SampleError;
use crate::metric::Metric;
use crate::rng::ChainId;

/// How to run each chain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplerSettings {
    /// Warmup (adaptation) iterations, discarded unless `save_warmup`.
    pub num_warmup: u64,
    /// Iterations kept.
    pub num_draws: u64,
    /// The warmup procedure.
    pub adaptation: AdaptationKind,
    /// The metric's form.
    pub metric: MetricKind,
    /// Target of the step-size adaptation (Stan's `adapt_delta`).
    pub target_accept: f64,
    /// Most trajectory doublings.
    pub max_depth: u32,
    /// Energy error that marks a divergence.
    pub max_energy_error: f64,
    /// The step size the adaptation starts from (Stan's `stepsize`).
    pub initial_step_size: f64,
    /// Relative step-size jitter per transition: each transition's step size is drawn
    /// uniformly from `step_size * (1 ± jitter)`. `None` for the default, no jitter, as Stan
    /// (`stepsize_jitter = 0`), whatever the adaptation.
    pub step_size_jitter: Option<f64>,
    /// Random initial points are uniform in `(-init_radius, init_radius)` (unconstrained).
    pub init_radius: f64,
    /// Keep warmup draws in the trace.
    pub save_warmup: bool,
    /// Worker threads; 0 for one per available core.
    pub threads: usize,
}

impl Default for SamplerSettings {
    fn default() -> SamplerSettings {
        SamplerSettings {
            num_warmup: 1000,
            num_draws: 1000,
            adaptation: AdaptationKind::default(),
            metric: MetricKind::default(),
            target_accept: 0.8,
            max_depth: 10,
            max_energy_error: 1000.0,
            initial_step_size: 1.0,
            step_size_jitter: None,
            init_radius: 2.0,
            save_warmup: false,
            threads: 0,
        }
    }
}

impl SamplerSettings {
    /// The step-size jitter in effect: the one asked for, else none (Stan's default; nutpie
    /// jitters by 0.1, which we leave to `step_size_jitter`).
    pub fn jitter(&self) -> f64 {
        self.step_size_jitter.unwrap_or(0.0)
    }

    /// Checks every field; the error names the offending one.
    pub fn validate(&self) -> Result<(), SampleError> {
        let bad = |message: String| Err(SampleError::Settings(message));
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return bad(format!(
                "target_accept must be in (0, 1), found {}",
                self.target_accept
            ));
        }
        if self.max_depth == 0 || self.max_depth > 30 {
            return bad(format!(
                "max_depth must be in 1..=30, found {}",
                self.max_depth
            ));
        }
        if !(self.max_energy_error > 0.0) {
            return bad(format!(
                "max_energy_error must be > 0, found {}",
                self.max_energy_error
            ));
        }
        if !(self.initial_step_size > 0.0 && self.initial_step_size.is_finite()) {
            return bad(format!(
                "initial_step_size must be a positive number, found {}",
                self.initial_step_size
            ));
        }
        if !(self.jitter() >= 0.0 && self.jitter() < 1.0) {
            return bad(format!(
                "step_size_jitter must be in [0, 1), found {}",
                self.jitter()
            ));
        }
        if !(self.init_radius >= 0.0 && self.init_radius.is_finite()) {
            return bad(format!(
                "init_radius must be a non-negative number, found {}",
                self.init_radius
            ));
        }
        if self.metric == MetricKind::Dense && self.adaptation == AdaptationKind::Nutpie {
            return bad("a dense metric needs Stan's adaptation (adaptation = \"stan\")".into());
        }
        Ok(())
    }
}

/// Step size and metric: the outcome of warmup, or a given tuning for a warm start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// The step size.
    pub step_size: f64,
    /// The inverse metric: its diagonal, or the full matrix row-major when `dense`.
    pub inv_metric: Vec<f64>,
    /// Whether `inv_metric` is a full matrix.
    pub dense: bool,
}

impl Tuning {
    pub(crate) fn metric(&self, dim: usize) -> Option<Metric> {
        let finite = self.inv_metric.iter().all(|v| v.is_finite() && !v.is_nan());
        if !finite || !(self.step_size > 0.0) {
            return None;
        }
        if self.dense {
            (self.inv_metric.len() == dim * dim)
                .then(|| Metric::dense(self.inv_metric.clone(), dim))?
        } else {
            (self.inv_metric.len() == dim && self.inv_metric.iter().all(|&v| v > 0.0))
                .then(|| Metric::Diag(self.inv_metric.clone()))
        }
    }
}

/// One chain to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainSpec {
    /// Its number: selects its random stream.
    pub chain: ChainId,
    /// A starting point (unconstrained); random when `None`.
    pub init: Option<Vec<f64>>,
    /// A finished warmup to start from: no warmup is run when given.
    pub tuning: Option<Tuning>,
}

impl ChainSpec {
    /// A chain with a random start and its own warmup.
    pub fn new(chain: ChainId) -> ChainSpec {
        ChainSpec {
            chain,
            init: None,
            tuning: None,
        }
    }
}

/// Sampler statistics of one iteration (Stan's `lp__ ... energy__` columns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DrawStats {
    /// Log density (up to a constant, Jacobian included).
    pub lp: f64,
    /// Mean Metropolis acceptance over the trajectory.
    pub accept_stat: f64,
    /// Step size used.
    pub step_size: f64,
    /// Tree depth.
    pub tree_depth: u32,
    /// Leapfrog steps (gradient evaluations).
    pub n_leapfrog: u32,
    /// Whether the trajectory diverged.
    pub divergent: bool,
    /// Hamiltonian at the draw.
    pub energy: f64,
}

/// Everything one chain produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainTrace {
    /// The chain.
    pub chain: ChainId,
    /// Values per draw (see [`crate::Program::columns`]).
    pub n_columns: usize,
    /// Warmup draws, row-major, when saved.
    pub warmup_draws: Vec<f64>,
    /// Warmup statistics, when saved.
    pub warmup_stats: Vec<DrawStats>,
    /// Draws, row-major: `draws[i * n_columns + k]` is column `k` of draw `i`.
    pub draws: Vec<f64>,
    /// Statistics per draw.
    pub stats: Vec<DrawStats>,
    /// The step size and metric used for sampling.
    pub tuning: Tuning,
    /// The initial point (unconstrained).
    pub init: Vec<f64>,
    /// The last point (unconstrained).
    pub final_position: Vec<f64>,
    /// Gradient evaluations during initialisation and warmup.
    pub grad_evals_warmup: u64,
    /// Gradient evaluations while sampling.
    pub grad_evals_sampling: u64,
    /// Wall time of warmup, seconds.
    pub warmup_seconds: f64,
    /// Wall time of sampling, seconds.
    pub sampling_seconds: f64,
}

impl ChainTrace {
    /// Number of kept draws.
    pub fn n_draws(&self) -> usize {
        self.stats.len()
    }

    /// The values of column `k` over the kept draws.
    pub fn column(&self, k: usize) -> Vec<f64> {
        self.draws
            .iter()
            .skip(k)
            .step_by(self.n_columns.max(1))
            .copied()
            .collect()
    }

    /// Number of divergent transitions after warmup.
    pub fn n_divergent(&self) -> usize {
        self.stats.iter().filter(|s| s.divergent).count()
    }
}

/// A draw as it happens, for progress display and streaming.
#[derive(Debug)]
pub struct DrawEvent<'a> {
    /// The chain.
    pub chain: ChainId,
    /// 0-based iteration, warmup included.
    pub iteration: u64,
    /// Total iterations, warmup included.
    pub total: u64,
    /// Whether this is a warmup iteration.
    pub warmup: bool,
    /// Its statistics.
    pub stats: &'a DrawStats,
    /// Its values (see [`crate::Program::columns`]); empty for a warmup draw when warmup
    /// draws are not saved (the GPU paths leave them on the device).
    pub values: &'a [f64],
}

/// Consecutive iterations of one chain, in a [`DrawBatch`].
#[derive(Debug, Clone, Copy)]
pub struct ChainDraws<'a> {
    /// The chain.
    pub chain: ChainId,
    /// 0-based iteration of the first draw, warmup included.
    pub first_iteration: u64,
    /// How many of the draws, the first ones, are warmup draws.
    pub n_warmup: usize,
    /// Each draw's statistics.
    pub stats: &'a [DrawStats],
    /// Whether the warmup draws have values (they are saved).
    pub warmup_values: bool,
    /// The values of the draws that have them (every kept draw; the warmup ones when
    /// `warmup_values`), in order, [`DrawBatch::n_columns`] each.
    pub values: &'a [f64],
}

/// The draws of several chains at once, each chain's consecutive: a GPU batch's draws of the
/// chains one recording task took. What [`Observer::on_batch`] gets.
#[derive(Debug, Clone, Copy)]
pub struct DrawBatch<'a> {
    /// Total iterations of each chain, warmup included.
    pub total: u64,
    /// Values per draw.
    pub n_columns: usize,
    /// Whether each draw's values are its unconstrained position (`n_columns` coordinates)
    /// rather than its reported values: where the observer asked for them
    /// ([`Observer::wants_positions`]).
    pub positions: bool,
    /// The chains' draws.
    pub chains: &'a [ChainDraws<'a>],
}

impl DrawBatch<'_> {
    /// Each draw as the event [`Observer::on_draw`] gets, chain after chain (a batch of
    /// positions, [`DrawBatch::positions`], gives them as the events' values).
    pub fn for_each_event(&self, mut f: impl FnMut(&DrawEvent)) {
        for chain in self.chains {
            let mut at = 0;
            for (i, stats) in chain.stats.iter().enumerate() {
                let warmup = i < chain.n_warmup;
                let values = if !warmup || chain.warmup_values {
                    let values = &chain.values[at..at + self.n_columns];
                    at += self.n_columns;
                    values
                } else {
                    &[]
                };
                f(&DrawEvent {
                    chain: chain.chain,
                    iteration: chain.first_iteration + i as u64,
                    total: self.total,
                    warmup,
                    stats,
                    values,
                });
            }
        }
    }
}

/// Watches running chains. Called from the chains' threads.
pub trait Observer: Sync {
    /// Called after every iteration of every chain.
    fn on_draw(&self, _event: &DrawEvent) {}

    /// Whether draws may come as batches ([`Observer::on_batch`]): a GPU run then gathers
    /// each recording task's draws, chain by chain, before it hands them over. Asked once
    /// per recorded batch.
    fn wants_batches(&self) -> bool {
        false
    }

    /// Whether batches may carry each draw's unconstrained position in place of its
    /// reported values ([`DrawBatch::positions`] says which they carry): an observer that
    /// streams draws to someone who has the model, and writes the values there, sends fewer
    /// numbers. Only batches carry them (such an observer takes its batches itself):
    /// [`Observer::on_draw`] always gets values. Asked once per
    /// recorded batch, like [`Observer::wants_batches`].
    fn wants_positions(&self) -> bool {
        false
    }

    /// Called, where [`Observer::wants_batches`], with several chains' draws at once in
    /// place of [`Observer::on_draw`] for each. By default, `on_draw` for each.
    fn on_batch(&self, batch: &DrawBatch) {
        batch.for_each_event(|event| self.on_draw(event));
    }

    /// Polled before every iteration; `true` stops all chains with [`SampleError::Cancelled`].
    fn should_stop(&self) -> bool {
        false
    }

    /// Whether the traces keep the draws. An observer that streams them elsewhere answers
    /// `false`: each chain then holds one draw at a time, not all of them, and its trace
    /// comes back without draws and statistics (their counts are the observer's to keep;
    /// everything else in the trace is there). Asked once per chain, on its thread, before
    /// it starts.
    fn keeps_draws(&self) -> bool {
        true
    }
}

/// An observer that watches nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A draw as `on_draw` got it: chain, iteration, warmup, values.
    type SeenDraw = (u32, u64, bool, Vec<f64>);

    /// Collects what `on_draw` gets.
    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<SeenDraw>>);

    impl Observer for Seen {
        fn on_draw(&self, event: &DrawEvent) {
            self.0.lock().unwrap().push((
                event.chain.0,
                event.iteration,
                event.warmup,
                event.values.to_vec(),
            ));
        }
    }

    #[test]
    fn a_batch_is_each_of_its_draws_by_default_values_where_they_are() {
        let stats = [DrawStats::default(); 3];
        let batch = DrawBatch {
            total: 10,
            n_columns: 2,
            positions: false,
            chains: &[
                // Two warmup draws without values, then a kept one.
                ChainDraws {
                    chain: ChainId(4),
                    first_iteration: 3,
                    n_warmup: 2,
                    stats: &stats,
                    warmup_values: false,
                    values: &[1.0, 2.0],
                },
                // Saved warmup: every draw has values.
                ChainDraws {
                    chain: ChainId(7),
                    first_iteration: 0,
                    n_warmup: 1,
                    stats: &stats[..2],
                    warmup_values: true,
                    values: &[5.0, 6.0, 7.0, 8.0],
                },
            ],
        };
        let seen = Seen::default();
        seen.on_batch(&batch);
        assert_eq!(
            seen.0.into_inner().unwrap(),
            [
                (4, 3, true, vec![]),
                (4, 4, true, vec![]),
                (4, 5, false, vec![1.0, 2.0]),
                (7, 0, true, vec![5.0, 6.0]),
                (7, 1, false, vec![7.0, 8.0]),
            ]
        );
    }
}
