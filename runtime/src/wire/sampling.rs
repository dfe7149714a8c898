//! Sampling data on the wire, shared by the job and pool services: sampler settings, chain
//! specifications, streamed draws and what a finished chain reports. Plain mirrors of the
//! sampler's types (which are not wire types: their serde form may change with the sampler),
//! converted here, at the edge. Settings are checked by the receiver (`validate`).

use gpu_actor::PrecisionMode;
use serde::{Deserialize, Serialize};

use sampler::{
    AdaptationKind, ChainId, ChainSpec, ChainTrace, DrawStats, MetricKind, SamplerSettings, Tuning,
};

/// [`SamplerSettings`] on the wire (all but `threads`: the worker decides that).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireSettings {
    /// Warmup iterations per chain.
    pub num_warmup: u64,
    /// Draws kept per chain.
    pub num_draws: u64,
    /// The warmup procedure.
    pub adaptation: WireAdaptation,
    /// The metric's form.
    pub metric: WireMetric,
    /// Target acceptance statistic.
    pub target_accept: f64,
    /// Most trajectory doublings.
    pub max_depth: u32,
    /// Energy error that marks a divergence.
    pub max_energy_error: f64,
    /// The step size the adaptation starts from.
    pub initial_step_size: f64,
    /// Relative step-size jitter; `None` for the default (none).
    pub step_size_jitter: Option<f64>,
    /// Radius of random initial points (unconstrained).
    pub init_radius: f64,
    /// Stream and keep warmup draws too.
    pub save_warmup: bool,
    /// The precision of GPU workers; absent for auto (a check per task picks f32 or f64),
    /// and from older clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_precision: Option<WirePrecision>,
}

/// `gpu_actor::PrecisionMode` on the wire (auto is the field's absence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WirePrecision {
    /// f32 whatever the model.
    F32,
    /// f64.
    F64,
}

impl WireSettings {
    /// [`WireSettings::gpu_precision`] as the GPU sampler takes it.
    pub fn precision_mode(&self) -> PrecisionMode {
        match self.gpu_precision {
            None => PrecisionMode::Auto,
            Some(WirePrecision::F32) => PrecisionMode::F32,
            Some(WirePrecision::F64) => PrecisionMode::F64,
        }
    }

    /// The same settings asking GPU workers for `mode`.
    pub fn with_precision(mut self, mode: PrecisionMode) -> WireSettings {
        self.gpu_precision = match mode {
            PrecisionMode::Auto => None,
            PrecisionMode::F32 => Some(WirePrecision::F32),
            PrecisionMode::F64 => Some(WirePrecision::F64),
        };
        self
    }
}

/// [`AdaptationKind`] on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireAdaptation {
    /// Stan's windowed adaptation.
    Stan,
    /// nutpie's gradient-based adaptation.
    Nutpie,
}

/// [`MetricKind`] on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireMetric {
    /// Diagonal.
    Diag,
    /// Dense.
    Dense,
}

impl From<&SamplerSettings> for WireSettings {
    fn from(settings: &SamplerSettings) -> Self {
        Self {
            num_warmup: settings.num_warmup,
            num_draws: settings.num_draws,
            adaptation: match settings.adaptation {
                AdaptationKind::Stan => WireAdaptation::Stan,
                AdaptationKind::Nutpie => WireAdaptation::Nutpie,
            },
            metric: match settings.metric {
                MetricKind::Diag => WireMetric::Diag,
                MetricKind::Dense => WireMetric::Dense,
            },
            target_accept: settings.target_accept,
            max_depth: settings.max_depth,
            max_energy_error: settings.max_energy_error,
            initial_step_size: settings.initial_step_size,
            step_size_jitter: settings.step_size_jitter,
            init_radius: settings.init_radius,
            save_warmup: settings.save_warmup,
            gpu_precision: None,
        }
    }
}

impl WireSettings {
    /// The sampler's settings with `threads` worker threads; not yet validated.
    pub fn to_settings(&self, threads: usize) -> SamplerSettings {
        SamplerSettings {
            num_warmup: self.num_warmup,
            num_draws: self.num_draws,
            adaptation: match self.adaptation {
                WireAdaptation::Stan => AdaptationKind::Stan,
                WireAdaptation::Nutpie => AdaptationKind::Nutpie,
            },
            metric: match self.metric {
                WireMetric::Diag => MetricKind::Diag,
                WireMetric::Dense => MetricKind::Dense,
            },
            target_accept: self.target_accept,
            max_depth: self.max_depth,
            max_energy_error: self.max_energy_error,
            initial_step_size: self.initial_step_size,
            step_size_jitter: self.step_size_jitter,
            init_radius: self.init_radius,
            save_warmup: self.save_warmup,
            threads,
        }
    }
}

/// [`Tuning`] on the wire: a finished warmup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireTuning {
    /// The step size.
    pub step_size: f64,
    /// The inverse metric (diagonal, or row-major dense).
    pub inv_metric: Vec<f64>,
    /// Whether `inv_metric` is a full matrix.
    pub dense: bool,
}

impl From<&Tuning> for WireTuning {
    fn from(tuning: &Tuning) -> Self {
        Self {
            step_size: tuning.step_size,
            inv_metric: tuning.inv_metric.clone(),
            dense: tuning.dense,
        }
    }
}

impl From<WireTuning> for Tuning {
    fn from(tuning: WireTuning) -> Self {
        Self {
            step_size: tuning.step_size,
            inv_metric: tuning.inv_metric,
            dense: tuning.dense,
        }
    }
}

/// [`ChainSpec`] on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireChainSpec {
    /// The chain's number: with the job's seed, its random stream.
    pub chain: u32,
    /// A starting point (unconstrained); random when `None`.
    pub init: Option<Vec<f64>>,
    /// A finished warmup: no warmup is run when given.
    pub tuning: Option<WireTuning>,
}

impl From<&ChainSpec> for WireChainSpec {
    fn from(spec: &ChainSpec) -> Self {
        Self {
            chain: spec.chain.0,
            init: spec.init.clone(),
            tuning: spec.tuning.as_ref().map(WireTuning::from),
        }
    }
}

impl From<WireChainSpec> for ChainSpec {
    fn from(spec: WireChainSpec) -> Self {
        Self {
            chain: ChainId(spec.chain),
            init: spec.init,
            tuning: spec.tuning.map(Tuning::from),
        }
    }
}

/// Sampler statistics of consecutive draws, column by column (a struct per draw would repeat
/// its field names in every draw).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireStats {
    /// Log density.
    pub lp: Vec<f64>,
    /// Mean acceptance statistic.
    pub accept_stat: Vec<f64>,
    /// Step size used.
    pub step_size: Vec<f64>,
    /// Tree depth.
    pub tree_depth: Vec<u32>,
    /// Leapfrog steps.
    pub n_leapfrog: Vec<u32>,
    /// Divergent transition.
    pub divergent: Vec<bool>,
    /// Hamiltonian.
    pub energy: Vec<f64>,
}

impl WireStats {
    /// Appends one draw's statistics.
    pub fn push(&mut self, stats: &DrawStats) {
        self.lp.push(stats.lp);
        self.accept_stat.push(stats.accept_stat);
        self.step_size.push(stats.step_size);
        self.tree_depth.push(stats.tree_depth);
        self.n_leapfrog.push(stats.n_leapfrog);
        self.divergent.push(stats.divergent);
        self.energy.push(stats.energy);
    }

    /// Number of draws, when every column has the same length.
    pub fn len_checked(&self) -> Option<usize> {
        let n = self.lp.len();
        let same = [
            self.accept_stat.len(),
            self.step_size.len(),
            self.tree_depth.len(),
            self.n_leapfrog.len(),
            self.divergent.len(),
            self.energy.len(),
        ]
        .iter()
        .all(|&len| len == n);
        same.then_some(n)
    }

    /// The statistics as the sampler's rows (`len_checked` must hold).
    pub fn rows(&self) -> impl Iterator<Item = DrawStats> + '_ {
        (0..self.lp.len()).map(|i| DrawStats {
            lp: self.lp[i],
            accept_stat: self.accept_stat[i],
            step_size: self.step_size[i],
            tree_depth: self.tree_depth[i],
            n_leapfrog: self.n_leapfrog[i],
            divergent: self.divergent[i],
            energy: self.energy[i],
        })
    }
}

/// Consecutive draws of one chain, streamed while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireDraws {
    /// Warmup draws (sent only with `save_warmup`) or kept draws.
    pub warmup: bool,
    /// Index of the first draw within its phase: chunks of a chain arrive in order, and the
    /// receiver checks that they join up.
    pub first: u64,
    /// The values, row-major (`n_columns` per draw).
    pub values: Vec<f64>,
    /// Their statistics, one entry per draw.
    pub stats: WireStats,
}

impl WireDraws {
    /// Bytes this takes on the wire, roughly (9 per f64, about 47 of statistics per draw).
    pub fn estimated_bytes(&self) -> usize {
        64 + 9 * self.values.len() + 47 * self.stats.lp.len()
    }
}

/// What a finished chain reports besides its draws: a [`ChainTrace`] less the draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireChainDone {
    /// The chain.
    pub chain: u32,
    /// Values per draw.
    pub n_columns: u32,
    /// Kept draws sent (the receiver checks it got them all).
    pub n_draws: u64,
    /// Warmup draws sent (0 without `save_warmup`).
    pub n_warmup_draws: u64,
    /// The tuning used for sampling.
    pub tuning: WireTuning,
    /// The initial point (unconstrained).
    pub init: Vec<f64>,
    /// The last point (unconstrained).
    pub final_position: Vec<f64>,
    /// Gradient evaluations before the first kept draw.
    pub grad_evals_warmup: u64,
    /// Gradient evaluations of the kept draws.
    pub grad_evals_sampling: u64,
    /// Seconds before the first kept draw.
    pub warmup_seconds: f64,
    /// Seconds of the kept draws.
    pub sampling_seconds: f64,
    /// From a pool to its coordinator, with the first finished chain of a GPU run: where
    /// and in which precision the run's chains ran, and why (`gpu_actor::RanOn`, or why
    /// they ran on the CPU), at most `MAX_NOTE_BYTES`. The coordinator keeps it with the job
    /// (`crate::RunNote`) and forwards the chain without it. Absent from the bytes when
    /// `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_on: Option<String>,
}

impl WireChainDone {
    /// The report of `trace`, whose draws were streamed separately.
    pub fn from_trace(trace: &ChainTrace) -> Self {
        Self {
            chain: trace.chain.0,
            n_columns: u32::try_from(trace.n_columns).unwrap_or(u32::MAX),
            n_draws: trace.stats.len() as u64,
            n_warmup_draws: trace.warmup_stats.len() as u64,
            tuning: WireTuning::from(&trace.tuning),
            init: trace.init.clone(),
            final_position: trace.final_position.clone(),
            grad_evals_warmup: trace.grad_evals_warmup,
            grad_evals_sampling: trace.grad_evals_sampling,
            warmup_seconds: trace.warmup_seconds,
            sampling_seconds: trace.sampling_seconds,
            ran_on: None,
        }
    }

    /// Bytes this takes on the wire, roughly.
    pub fn estimated_bytes(&self) -> usize {
        256 + 9 * (self.tuning.inv_metric.len() + self.init.len() + self.final_position.len())
            + self.ran_on.as_ref().map_or(0, String::len)
    }
}
