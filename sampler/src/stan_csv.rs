//! Stan CSV output: one file per chain in CmdStan's layout, readable by ArviZ's
//! `from_cmdstan`, CmdStanPy and the R `posterior` tools.
//!
//! Layout: `#` configuration comments (the keys ArviZ reads: `num_samples`, `num_warmup`,
//! `save_warmup`, `thin`, `seed`, ...), the header (`lp__, accept_stat__, stepsize__,
//! treedepth__, n_leapfrog__, divergent__, energy__`, then `name` or `name.1, name.2, ...`,
//! matrices and arrays column-major as CmdStan writes them: `m.1.1, m.2.1, m.1.2, ...`),
//! warmup rows when saved, the adaptation comments (step size, inverse metric), the draws,
//! and the timing comments. Values are written in full precision.

use std::io::{self, Write};

use crate::adapt::{AdaptationKind, MetricKind};
use crate::program::Column;
use crate::rng::Seed;
use crate::run::{ChainTrace, DrawStats, SamplerSettings};

/// What a Stan CSV file describes besides the trace.
#[derive(Clone, Copy, Debug)]
pub struct CsvContext<'a> {
    /// The model's name.
    pub model_name: &'a str,
    /// Output columns of the model.
    pub columns: &'a [Column],
    /// The settings of the run.
    pub settings: &'a SamplerSettings,
    /// The run's seed.
    pub seed: Seed,
    /// The name of the file being written (recorded in the header, as CmdStan does).
    pub file_name: &'a str,
}

/// Stan's column name: `z.1` for the first element of `z`, `theta.2.1` for an element of a
/// matrix or 2-D array.
fn stan_name(column: &Column) -> String {
    match column.indices_1based(".") {
        None => column.name.clone(),
        Some(indices) => format!("{}.{indices}", column.name),
    }
}

/// CmdStan's order of the columns, as positions into `columns`: every container's elements
/// column-major ("Fortran" order: the first index runs fastest, `m.1.1, m.2.1, m.1.2, ...`),
/// arrays included, as the CmdStan guide's "Stan CSV File Format" chapter specifies. Our
/// columns (and the values in a trace) are row-major; scalars and vectors are unchanged.
pub fn column_major_order(columns: &[Column]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..columns.len()).collect();
    let mut start = 0;
    while start < columns.len() {
        let name = &columns[start].name;
        let mut end = start + 1;
        while end < columns.len() && columns[end].name == *name {
            end += 1;
        }
        order[start..end].sort_by_key(|&k| {
            let mut index = columns[k].multi_index();
            index.reverse();
            index
        });
        start = end;
    }
    order
}

fn write_row(
    out: &mut impl Write,
    stats: &DrawStats,
    values: &[f64],
    order: &[usize],
) -> io::Result<()> {
    write!(
        out,
        "{},{},{},{},{},{},{}",
        stats.lp,
        stats.accept_stat,
        stats.step_size,
        stats.tree_depth,
        stats.n_leapfrog,
        u8::from(stats.divergent),
        stats.energy
    )?;
    for value in order.iter().filter_map(|&k| values.get(k)) {
        write!(out, ",{value}")?;
    }
    writeln!(out)
}

/// Writes one chain as a Stan CSV file.
pub fn write_chain(
    out: &mut impl Write,
    context: &CsvContext,
    trace: &ChainTrace,
) -> io::Result<()> {
    let settings = context.settings;
    let metric = match settings.metric {
        MetricKind::Diag => "diag_e",
        MetricKind::Dense => "dense_e",
    };
    let adaptation = match settings.adaptation {
        AdaptationKind::Stan => "stan",
        AdaptationKind::Nutpie => "nutpie",
    };
    writeln!(out, "# model = {}", context.model_name)?;
    writeln!(
        out,
        "# written by cluster-cli {}",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(out, "# method = sample (Default)")?;
    writeln!(out, "#   sample")?;
    writeln!(out, "#     num_samples = {}", settings.num_draws)?;
    writeln!(out, "#     num_warmup = {}", settings.num_warmup)?;
    writeln!(
        out,
        "#     save_warmup = {}",
        u8::from(settings.save_warmup)
    )?;
    writeln!(out, "#     thin = 1")?;
    writeln!(out, "#     adapt")?;
    writeln!(
        out,
        "#       engaged = {}",
        u8::from(settings.num_warmup > 0)
    )?;
    writeln!(out, "#       procedure = {adaptation}")?;
    writeln!(out, "#       delta = {:?}", settings.target_accept)?;
    writeln!(out, "#       gamma = 0.05")?;
    writeln!(out, "#       kappa = 0.75")?;
    writeln!(out, "#       t0 = 10")?;
    writeln!(out, "#     algorithm = hmc (Default)")?;
    writeln!(out, "#       hmc")?;
    writeln!(out, "#         engine = nuts (Default)")?;
    writeln!(out, "#           nuts")?;
    writeln!(out, "#             max_depth = {}", settings.max_depth)?;
    writeln!(out, "#         metric = {metric}")?;
    writeln!(out, "#         stepsize = {:?}", settings.initial_step_size)?;
    writeln!(out, "#         stepsize_jitter = {:?}", settings.jitter())?;
    writeln!(out, "# id = {}", trace.chain.0 + 1)?;
    writeln!(out, "# random")?;
    writeln!(out, "#   seed = {}", context.seed.0)?;
    writeln!(out, "# output")?;
    writeln!(out, "#   file = {}", context.file_name)?;

    write!(
        out,
        "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__"
    )?;
    let order = column_major_order(context.columns);
    for &k in &order {
        write!(out, ",{}", stan_name(&context.columns[k]))?;
    }
    writeln!(out)?;

    let n_columns = trace.n_columns.max(1);
    for (stats, values) in trace
        .warmup_stats
        .iter()
        .zip(trace.warmup_draws.chunks(n_columns))
    {
        write_row(out, stats, values, &order)?;
    }

    writeln!(out, "# Adaptation terminated")?;
    writeln!(out, "# Step size = {}", trace.tuning.step_size)?;
    if trace.tuning.dense {
        writeln!(out, "# Elements of inverse mass matrix:")?;
        let dim = (trace.tuning.inv_metric.len() as f64).sqrt() as usize;
        for row in trace.tuning.inv_metric.chunks(dim.max(1)) {
            writeln!(out, "# {}", join(row))?;
        }
    } else {
        writeln!(out, "# Diagonal elements of inverse mass matrix:")?;
        writeln!(out, "# {}", join(&trace.tuning.inv_metric))?;
    }

    for (stats, values) in trace.stats.iter().zip(trace.draws.chunks(n_columns)) {
        write_row(out, stats, values, &order)?;
    }

    write_timing(out, trace.warmup_seconds, trace.sampling_seconds)
}

/// The timing block that ends the file, once, as Stan's `mcmc_writer::write_timing` writes
/// it: an empty comment, the three times under `Elapsed Time:`, an empty comment.
fn write_timing(
    out: &mut impl Write,
    warmup_seconds: f64,
    sampling_seconds: f64,
) -> io::Result<()> {
    const TITLE: &str = " Elapsed Time: ";
    let indent = " ".repeat(TITLE.len());
    writeln!(out, "# ")?;
    writeln!(out, "# {TITLE}{warmup_seconds:.6} seconds (Warm-up)")?;
    writeln!(out, "# {indent}{sampling_seconds:.6} seconds (Sampling)")?;
    writeln!(
        out,
        "# {indent}{:.6} seconds (Total)",
        warmup_seconds + sampling_seconds
    )?;
    writeln!(out, "# ")
}

fn join(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// CmdStan's file names for several chains: `draws.csv` becomes `draws_1.csv`, `draws_2.csv`,
/// ...; a single chain keeps the name.
pub fn chain_file_names(path: &str, n_chains: usize) -> Vec<String> {
    if n_chains == 1 {
        return vec![path.to_owned()];
    }
    let (stem, extension) = match path.rfind('.') {
        Some(dot) if !path[dot..].contains('/') => (&path[..dot], &path[dot..]),
        _ => (path, ""),
    };
    (1..=n_chains)
        .map(|i| format!("{stem}_{i}{extension}"))
        .collect()
}

#[cfg(test)]
mod tests;
