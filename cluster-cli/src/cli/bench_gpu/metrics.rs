//! What a GPU benchmark row reports, computed from a run's traces: per-parameter means, MCSE
//! and bulk/tail ESS over all chains (on every core), and the check of the means against a
//! CPU reference run.
//!
//! ESS is the rank-normalised estimator of `sampler::diagnostics` (Vehtari et al. 2021) over
//! every chain and every draw: at 65536 chains of 400 draws each parameter ranks 26 million
//! values (a few seconds on one core), so parameters are spread over threads.

use std::sync::atomic::{AtomicUsize, Ordering};

use sampler::ChainTrace;
use sampler::diagnostics::{ess_bulk, ess_tail, mcse_mean};

/// Diagnostics of one parameter column over all chains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ColumnStats {
    pub mean: f64,
    pub mcse: f64,
    pub ess_bulk: f64,
    pub ess_tail: f64,
}

/// [`ColumnStats`] of columns `0..n_columns` of `traces` (the constrained parameters),
/// in column order, on up to `threads` threads.
pub(crate) fn column_stats(
    traces: &[ChainTrace],
    n_columns: usize,
    threads: usize,
) -> anyhow::Result<Vec<ColumnStats>> {
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, n_columns.max(1));
    let mut results: Vec<(usize, ColumnStats)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= n_columns {
                            break out;
                        }
                        out.push((k, one_column(traces, k)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap_or_default())
            .collect()
    });
    anyhow::ensure!(
        results.len() == n_columns,
        "a diagnostics thread failed: {} of {n_columns} parameters summarised",
        results.len()
    );
    results.sort_by_key(|(k, _)| *k);
    Ok(results.into_iter().map(|(_, stats)| stats).collect())
}

fn one_column(traces: &[ChainTrace], k: usize) -> ColumnStats {
    let columns: Vec<Vec<f64>> = traces.iter().map(|trace| trace.column(k)).collect();
    let chains: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
    let count: usize = chains.iter().map(|c| c.len()).sum();
    let mean = chains.iter().flat_map(|c| c.iter()).sum::<f64>() / count.max(1) as f64;
    ColumnStats {
        mean,
        mcse: mcse_mean(&chains),
        ess_bulk: ess_bulk(&chains),
        ess_tail: ess_tail(&chains),
    }
}

/// The smallest value of `field` over `stats`; NaN if any is NaN or there is none.
pub(crate) fn min_of(stats: &[ColumnStats], field: fn(&ColumnStats) -> f64) -> f64 {
    let mut min = f64::INFINITY;
    for value in stats.iter().map(field) {
        if value.is_nan() {
            return f64::NAN;
        }
        min = min.min(value);
    }
    if stats.is_empty() { f64::NAN } else { min }
}

/// A |z| above this fails the check. The test is per parameter, up to ~100 of them per
/// model: a two-sided 4.5-sigma bound keeps the chance of a false alarm per row under 0.1%.
pub(super) const CHECK_Z_LIMIT: f64 = 4.5;

/// The GPU's posterior means against the CPU reference's.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct MeanCheck {
    /// Largest |mean_gpu - mean_cpu| / sqrt(mcse_gpu² + mcse_cpu²) over the parameters.
    pub max_z: f64,
    /// The parameter column where it is.
    pub worst: usize,
}

impl MeanCheck {
    /// Compares column by column; NaN `max_z` when a mean or MCSE is not finite.
    pub(super) fn new(gpu: &[ColumnStats], cpu: &[ColumnStats]) -> MeanCheck {
        let mut check = MeanCheck {
            max_z: 0.0,
            worst: 0,
        };
        for (k, (g, c)) in gpu.iter().zip(cpu).enumerate() {
            let scale = (g.mcse * g.mcse + c.mcse * c.mcse).sqrt();
            let z = (g.mean - c.mean).abs() / scale;
            let z = if g.mean == c.mean { 0.0 } else { z };
            if !z.is_finite() {
                return MeanCheck {
                    max_z: f64::NAN,
                    worst: k,
                };
            }
            if z > check.max_z {
                check = MeanCheck { max_z: z, worst: k };
            }
        }
        check
    }

    /// Whether every parameter is within [`CHECK_Z_LIMIT`].
    pub(super) fn passed(&self) -> bool {
        self.max_z <= CHECK_Z_LIMIT
    }
}
