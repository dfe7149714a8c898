//! The run summary: per-quantity posterior statistics and convergence diagnostics, plus the
//! warnings Stan and ArviZ would give (divergences, tree-depth saturation, R-hat, low ESS,
//! low E-BFMI).

use std::fmt;

use crate::diagnostics::{self, Summary};
use crate::program::Column;
use crate::run::{ChainTrace, SamplerSettings};

/// R-hat above this is reported (Vehtari et al. 2021).
pub const RHAT_THRESHOLD: f64 = 1.01;
/// Bulk or tail ESS below this many per chain is reported.
pub const ESS_PER_CHAIN_THRESHOLD: f64 = 100.0;
/// E-BFMI below this is reported (CmdStan's `diagnose`).
pub const EBFMI_THRESHOLD: f64 = 0.3;

/// One row of the summary table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Display name (`z[1]`, `lp__`).
    pub name: String,
    /// Whether the row is a sampled parameter (not `lp__` or a transformed parameter).
    pub is_parameter: bool,
    /// Its statistics over all chains.
    pub stats: Summary,
}

/// Per-chain sampler diagnostics.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainDiagnostics {
    /// The chain.
    pub chain: u32,
    /// Divergent transitions after warmup.
    pub divergent: usize,
    /// Transitions that hit the maximum tree depth.
    pub max_depth_hits: usize,
    /// Energy Bayesian fraction of missing information.
    pub ebfmi: f64,
    /// Step size after warmup.
    pub step_size: f64,
    /// Mean leapfrog steps per draw.
    pub mean_leapfrog: f64,
}

/// The whole summary of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// `lp__`, then parameters, then transformed parameters.
    pub rows: Vec<Row>,
    /// One entry per chain.
    pub chains: Vec<ChainDiagnostics>,
    /// Warnings in words, most serious first.
    pub warnings: Vec<String>,
    /// Draws per chain after warmup.
    pub n_draws: usize,
}

/// Below this many draws (chains x draws x quantities) one thread is as quick.
const PARALLEL_MIN_DRAWS: usize = 1 << 22;

/// One row per column. Each quantity's diagnostics rank all its draws (about 0.4 s per
/// quantity for 4096 chains of 1000 draws), and quantities are independent: large runs are
/// summarised on every core, with the same result.
fn column_rows(columns: &[Column], n_parameter_columns: usize, traces: &[ChainTrace]) -> Vec<Row> {
    let n_draws = traces.first().map_or(0, ChainTrace::n_draws);
    let threads = if traces.len() * n_draws * columns.len() < PARALLEL_MIN_DRAWS {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    column_rows_on(columns, n_parameter_columns, traces, threads)
}

/// [`column_rows`] on `threads` threads.
fn column_rows_on(
    columns: &[Column],
    n_parameter_columns: usize,
    traces: &[ChainTrace],
    threads: usize,
) -> Vec<Row> {
    let row = |k: usize, column: &Column| {
        let chains: Vec<Vec<f64>> = traces.iter().map(|t| t.column(k)).collect();
        Row {
            name: column.to_string(),
            is_parameter: k < n_parameter_columns,
            stats: summarize_chains(&chains),
        }
    };
    let threads = threads.min(columns.len());
    if threads <= 1 {
        return columns.iter().enumerate().map(|(k, c)| row(k, c)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut rows: Vec<Option<Row>> = vec![None; columns.len()];
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(column) = columns.get(k) else {
                            break done;
                        };
                        done.push((k, row(k, column)));
                    }
                })
            })
            .collect();
        for worker in workers {
            let done = worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (k, row) in done {
                rows[k] = Some(row);
            }
        }
    });
    rows.into_iter().flatten().collect()
}

impl RunSummary {
    /// Summarises `traces` of a model whose output columns are `columns` (of which the first
    /// `n_parameter_columns` are sampled parameters).
    pub fn new(
        columns: &[Column],
        n_parameter_columns: usize,
        traces: &[ChainTrace],
        settings: &SamplerSettings,
    ) -> RunSummary {
        let n_draws = traces.first().map_or(0, ChainTrace::n_draws);
        let mut rows = Vec::with_capacity(columns.len() + 1);
        let lp: Vec<Vec<f64>> = traces
            .iter()
            .map(|t| t.stats.iter().map(|s| s.lp).collect())
            .collect();
        rows.push(Row {
            name: "lp__".into(),
            is_parameter: false,
            stats: summarize_chains(&lp),
        });
        rows.extend(column_rows(columns, n_parameter_columns, traces));

        let chains: Vec<ChainDiagnostics> = traces
            .iter()
            .map(|t| {
                let energy: Vec<f64> = t.stats.iter().map(|s| s.energy).collect();
                ChainDiagnostics {
                    chain: t.chain.0,
                    divergent: t.n_divergent(),
                    max_depth_hits: t
                        .stats
                        .iter()
                        .filter(|s| s.tree_depth >= settings.max_depth)
                        .count(),
                    ebfmi: diagnostics::ebfmi(&energy),
                    step_size: t.tuning.step_size,
                    mean_leapfrog: t.stats.iter().map(|s| f64::from(s.n_leapfrog)).sum::<f64>()
                        / t.n_draws().max(1) as f64,
                }
            })
            .collect();
        let warnings = warnings(&rows, &chains, traces.len(), n_draws, settings);
        RunSummary {
            rows,
            chains,
            warnings,
            n_draws,
        }
    }

    /// Smallest bulk ESS over the sampled parameters.
    pub fn min_ess_bulk(&self) -> f64 {
        self.parameter_rows()
            .map(|r| r.stats.ess_bulk)
            .fold(f64::INFINITY, f64::min)
    }

    /// Smallest tail ESS over the sampled parameters.
    pub fn min_ess_tail(&self) -> f64 {
        self.parameter_rows()
            .map(|r| r.stats.ess_tail)
            .fold(f64::INFINITY, f64::min)
    }

    /// Largest R-hat over the sampled parameters.
    pub fn max_rhat(&self) -> f64 {
        self.parameter_rows()
            .map(|r| r.stats.rhat)
            .fold(f64::NEG_INFINITY, f64::max)
    }

    fn parameter_rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.is_parameter)
    }
}

fn summarize_chains(chains: &[Vec<f64>]) -> Summary {
    let slices: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
    diagnostics::summarize(&slices)
}

/// `part` of `total` as a percentage, with two significant digits below 1% (so that a few
/// in millions does not read as none).
fn percent(part: usize, total: usize) -> String {
    let p = 100.0 * part as f64 / total.max(1) as f64;
    if p >= 1.0 || p == 0.0 {
        format!("{p:.1}%")
    } else {
        let digits = (1.0 - p.log10().floor()) as usize;
        format!("{p:.digits$}%")
    }
}

fn warnings(
    rows: &[Row],
    chains: &[ChainDiagnostics],
    n_chains: usize,
    n_draws: usize,
    settings: &SamplerSettings,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let total = (n_chains * n_draws).max(1);
    let divergent: usize = chains.iter().map(|c| c.divergent).sum();
    if divergent > 0 {
        warnings.push(format!(
            "{divergent} of {total} transitions after warmup ({}) were divergent: the posterior is not fully explored; \
             raise --target-accept (now {}) or reparameterise the model",
            percent(divergent, total),
            settings.target_accept
        ));
    }
    let saturated: usize = chains.iter().map(|c| c.max_depth_hits).sum();
    if saturated > 0 {
        warnings.push(format!(
            "{saturated} of {total} transitions ({}) hit the maximum tree depth of {}: sampling is inefficient; \
             raise --max-depth or reparameterise",
            percent(saturated, total),
            settings.max_depth
        ));
    }
    let high_rhat: Vec<&str> = rows
        .iter()
        .filter(|r| r.stats.rhat > RHAT_THRESHOLD)
        .map(|r| r.name.as_str())
        .collect();
    if !high_rhat.is_empty() {
        warnings.push(format!(
            "R-hat above {RHAT_THRESHOLD} for {}: the chains disagree; run longer or check the model",
            list(&high_rhat)
        ));
    }
    let ess_floor = ESS_PER_CHAIN_THRESHOLD * n_chains as f64;
    let low_ess: Vec<&str> = rows
        .iter()
        .filter(|r| r.stats.ess_bulk < ess_floor || r.stats.ess_tail < ess_floor)
        .map(|r| r.name.as_str())
        .collect();
    if !low_ess.is_empty() {
        warnings.push(format!(
            "bulk or tail ESS below {ess_floor:.0} ({ESS_PER_CHAIN_THRESHOLD:.0} per chain) for {}: estimates are unreliable; run longer",
            list(&low_ess)
        ));
    }
    for chain in chains {
        if chain.ebfmi < EBFMI_THRESHOLD {
            warnings.push(format!(
                "chain {}: E-BFMI {:.2} is below {EBFMI_THRESHOLD}: the momentum resampling explores the energy poorly; \
                 reparameterise the model",
                chain.chain, chain.ebfmi
            ));
        }
    }
    warnings
}

fn list(names: &[&str]) -> String {
    const SHOWN: usize = 6;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!(
            "{} and {} more",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        )
    }
}

/// A number in at most 4 significant digits, in a column of `width`.
fn number(value: f64) -> String {
    if !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-3..1e5).contains(&magnitude) {
        format!("{value:.2e}")
    } else if magnitude >= 100.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.3}")
    } else {
        format!("{value:.4}")
    }
}

impl fmt::Display for RunSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name_width = self
            .rows
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "{:<name_width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7}",
            "", "mean", "sd", "5%", "50%", "95%", "mcse", "ess_bulk", "ess_tail", "r_hat"
        )?;
        for row in &self.rows {
            let s = &row.stats;
            writeln!(
                f,
                "{:<name_width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9.0} {:>9.0} {:>7.3}",
                row.name,
                number(s.mean),
                number(s.sd),
                number(s.q5),
                number(s.q50),
                number(s.q95),
                number(s.mcse_mean),
                s.ess_bulk,
                s.ess_tail,
                s.rhat
            )?;
        }
        writeln!(f)?;
        for chain in &self.chains {
            writeln!(
                f,
                "chain {}: step size {}, {:.1} leapfrog steps per draw, {} divergent, E-BFMI {:.2}",
                chain.chain,
                number(chain.step_size),
                chain.mean_leapfrog,
                chain.divergent,
                chain.ebfmi
            )?;
        }
        if self.warnings.is_empty() {
            writeln!(
                f,
                "\nno warnings: no divergences, R-hat <= {RHAT_THRESHOLD}, ESS and E-BFMI fine"
            )?;
        } else {
            writeln!(f)?;
            for warning in &self.warnings {
                writeln!(f, "warning: {warning}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckedModel, Limits, NoObserver, Seed};

    #[test]
    fn percentages_keep_two_significant_digits_below_one() {
        assert_eq!(percent(2939, 8_192_000), "0.036%");
        assert_eq!(percent(1, 200), "0.50%");
        assert_eq!(percent(3, 200), "1.5%");
        assert_eq!(percent(0, 200), "0.0%");
        assert_eq!(percent(200, 200), "100.0%");
    }

    #[test]
    fn rows_summarised_on_several_threads_equal_one_thread() {
        let model = CheckedModel::from_json(
            r#"{"ir_version": 1, "name": "n", "parameters": [{"name": "x", "size": 5}],
                "model": [{"sample": {"value": "x", "dist": {"normal": {"mu": 0, "sigma": 1}}}}]}"#,
            &Limits::default(),
        )
        .unwrap();
        let settings = SamplerSettings {
            num_warmup: 50,
            num_draws: 100,
            ..SamplerSettings::default()
        };
        let traces = crate::sample(&model, &settings, Seed(2), 6, &NoObserver).unwrap();
        let columns = model.columns();
        let one = column_rows_on(&columns, columns.len(), &traces, 1);
        assert_eq!(one.len(), 5);
        assert_eq!(column_rows_on(&columns, columns.len(), &traces, 3), one);
    }
}
