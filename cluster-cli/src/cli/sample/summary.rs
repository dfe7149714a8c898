//! [`RunSummary::new`] with the per-quantity diagnostics computed on every core.
//!
//! Each quantity's diagnostics rank all of its draws: over 4096 chains of 1000 draws that is
//! about 0.4 s per quantity on one core, 9 s for the 22 quantities of the logistic model,
//! longer than the GPU takes to sample them. The quantities are independent, so here they are
//! summarised in parallel; the rest (`lp__`, the per-chain diagnostics and their warnings)
//! comes from `RunSummary::new` itself. The R-hat and ESS warnings, which list the quantities,
//! are rebuilt as `sampler::summary` words them; a test checks that the result equals
//! `RunSummary::new`'s. (`RunSummary::new` could do this itself; then this module goes.)

use std::sync::atomic::{AtomicUsize, Ordering};

use sampler::summary::{ESS_PER_CHAIN_THRESHOLD, RHAT_THRESHOLD, Row};
use sampler::{ChainTrace, Column, RunSummary, SamplerSettings};

/// Below this many draws (chains x draws x quantities) one thread is as quick.
const PARALLEL_MIN_DRAWS: usize = 1 << 22;

/// What [`RunSummary::new`] returns, computed on all cores.
pub(super) fn run_summary(
    columns: &[Column],
    n_parameter_columns: usize,
    traces: &[ChainTrace],
    settings: &SamplerSettings,
) -> RunSummary {
    let n_draws = traces.first().map_or(0, ChainTrace::n_draws);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(columns.len());
    if threads <= 1 || traces.len() * n_draws * columns.len() < PARALLEL_MIN_DRAWS {
        return RunSummary::new(columns, n_parameter_columns, traces, settings);
    }
    parallel_summary(columns, n_parameter_columns, traces, settings, threads)
}

fn parallel_summary(
    columns: &[Column],
    n_parameter_columns: usize,
    traces: &[ChainTrace],
    settings: &SamplerSettings,
    threads: usize,
) -> RunSummary {
    // `lp__`, the chains and their warnings, with no quantity.
    let mut summary = RunSummary::new(&[], 0, traces, settings);
    summary
        .rows
        .extend(column_rows(columns, n_parameter_columns, traces, threads));
    summary.warnings = warnings(
        std::mem::take(&mut summary.warnings),
        &summary.rows,
        traces.len(),
    );
    summary
}

/// One row per column, as `RunSummary::new` computes it, on `threads` threads.
fn column_rows(
    columns: &[Column],
    n_parameter_columns: usize,
    traces: &[ChainTrace],
    threads: usize,
) -> Vec<Row> {
    let next = AtomicUsize::new(0);
    let mut rows: Vec<Option<Row>> = vec![None; columns.len()];
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(column) = columns.get(k) else {
                            break done;
                        };
                        let chains: Vec<Vec<f64>> = traces.iter().map(|t| t.column(k)).collect();
                        let slices: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
                        let row = Row {
                            name: column.to_string(),
                            is_parameter: k < n_parameter_columns,
                            stats: sampler::diagnostics::summarize(&slices),
                        };
                        done.push((k, row));
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

/// The warnings of `RunSummary::new` for all `rows`, from those it gave for `lp__` alone:
/// its order is divergences, tree depth, R-hat, ESS, then one E-BFMI warning per chain.
fn warnings(lp_only: Vec<String>, rows: &[Row], n_chains: usize) -> Vec<String> {
    let is_quantity_warning = |warning: &String| {
        warning.starts_with("R-hat above ") || warning.starts_with("bulk or tail ESS below ")
    };
    let (chain_warnings, head): (Vec<String>, Vec<String>) = lp_only
        .into_iter()
        .filter(|warning| !is_quantity_warning(warning))
        .partition(|warning| warning.starts_with("chain "));
    let mut warnings = head;
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
    warnings.extend(chain_warnings);
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

#[cfg(test)]
pub(super) fn parallel_for_tests(
    columns: &[Column],
    n_parameter_columns: usize,
    traces: &[ChainTrace],
    settings: &SamplerSettings,
) -> RunSummary {
    parallel_summary(columns, n_parameter_columns, traces, settings, 3)
}
