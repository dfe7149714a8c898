//! `posteriordb --draws-dir`: CPU runs that keep their chains and write them out, so that a
//! script can estimate ESS from ours and Stan's draws with one estimator
//! (`bench/posteriordb/vs_stan.py`).
//!
//! Per posterior, in the directory: `<posterior>.csv` (Stan CSV, `_1`, `_2`, ... with
//! several chains) and `<posterior>.json` (timings, gradient counts and the names of the
//! parameter columns; for a program that does not lower, only why).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use sampler::stan_csv::{self, CsvContext};
use sampler::{ChainTrace, Column, SamplerSettings, Seed};
use serde_json::json;
use stan::posteriordb::{self, CpuRun, Reference, RunError};

/// [`posteriordb::run_on_cpu`], writing the chains and timings to `dir`.
/// The outer error is a file that cannot be written.
pub fn run_on_cpu(
    dir: &Path,
    reference: &Reference,
    source: &str,
    data_json: &str,
    base: &SamplerSettings,
    seed: Seed,
    n_chains: u32,
) -> anyhow::Result<Result<CpuRun, RunError>> {
    let chains =
        match posteriordb::sample_on_cpu(reference, source, data_json, base, seed, n_chains) {
            Ok(chains) => chains,
            Err(RunError::Unsupported(why)) => {
                let record =
                    json!({"posterior": reference.posterior, "unsupported": why.to_string()});
                write_json(dir, reference, &record)?;
                return Ok(Err(why.into()));
            }
            Err(err) => return Ok(Err(err)),
        };
    let (settings, traces) = (&chains.settings, &chains.traces);
    let columns = chains.model.columns();
    let n_parameters = chains.model.program().n_parameter_columns();
    let csv = write_csv(dir, reference, &columns, settings, seed, traces)?;
    let record = json!({
        "posterior": reference.posterior,
        "model": reference.model,
        "seed": seed.0,
        "chains": n_chains,
        "warmup": settings.num_warmup,
        "draws": settings.num_draws,
        "adapt_delta": settings.target_accept,
        "max_treedepth": settings.max_depth,
        "load_seconds": chains.load.as_secs_f64(),
        "to_first_draw_seconds": chains.run.to_first_draw.as_secs_f64(),
        "wall_seconds": chains.run.wall.as_secs_f64(),
        "parameter_columns": columns[..n_parameters].iter().map(stan_name).collect::<Vec<_>>(),
        "csv": csv,
        "chain_stats": traces.iter().map(|t| json!({
            "warmup_seconds": t.warmup_seconds,
            "sampling_seconds": t.sampling_seconds,
            "grad_evals_warmup": t.grad_evals_warmup,
            "grad_evals_sampling": t.grad_evals_sampling,
            "divergent": t.n_divergent(),
        })).collect::<Vec<_>>(),
        "min_ess_bulk": chains.summary.min_ess_bulk(),
    });
    write_json(dir, reference, &record)?;
    Ok(Ok(chains.run))
}

/// Stan's column name (`theta.2.1`), as in the CSV header.
fn stan_name(column: &Column) -> String {
    match column.indices_1based(".") {
        None => column.name.clone(),
        Some(indices) => format!("{}.{indices}", column.name),
    }
}

/// Writes one Stan CSV file per chain; returns their names (without the directory).
fn write_csv(
    dir: &Path,
    reference: &Reference,
    columns: &[Column],
    settings: &SamplerSettings,
    seed: Seed,
    traces: &[ChainTrace],
) -> anyhow::Result<Vec<String>> {
    let names = stan_csv::chain_file_names(&format!("{}.csv", reference.posterior), traces.len());
    for (trace, name) in traces.iter().zip(&names) {
        let path = dir.join(name);
        let file =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut out = BufWriter::new(file);
        let context = CsvContext {
            model_name: &reference.model,
            columns,
            settings,
            seed,
            file_name: name,
        };
        stan_csv::write_chain(&mut out, &context, trace)
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(names)
}

fn write_json(dir: &Path, reference: &Reference, record: &serde_json::Value) -> anyhow::Result<()> {
    let path = dir.join(format!("{}.json", reference.posterior));
    let text = serde_json::to_string_pretty(record)?;
    std::fs::write(&path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}
