//! `cluster-cli sample`: run chains locally, print the summary, optionally write Stan CSV.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use sampler::stan_csv::{self, CsvContext};
use sampler::{RunSummary, Seed};

use super::{SamplerArgs, ensure_parent, load_model};
use crate::progress::ProgressBars;

/// Arguments of `sample`.
#[derive(Debug, clap::Args)]
pub struct SampleArgs {
    /// The model file (JSON IR, see models/).
    model: PathBuf,
    /// Number of chains.
    #[arg(long, default_value_t = 4)]
    chains: u32,
    /// Random seed; the same seed gives the same draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Write Stan CSV here (one file per chain: draws_1.csv, ... for several chains).
    #[arg(long)]
    output: Option<PathBuf>,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    sampler: SamplerArgs,
}

pub fn run(args: SampleArgs) -> anyhow::Result<()> {
    let model = load_model(&args.model)?;
    anyhow::ensure!(args.chains > 0, "--chains must be at least 1");
    let settings = args.sampler.settings(args.threads);
    settings.validate()?;
    let seed = Seed(args.seed);
    let columns = model.columns();

    let progress = ProgressBars::new(
        args.chains,
        settings.num_warmup + settings.num_draws,
        args.quiet,
    );
    let traces = sampler::sample(&model, &settings, seed, args.chains, &progress)
        .with_context(|| format!("sampling {} failed", model.name()))?;
    progress.finish();

    let summary = RunSummary::new(
        &columns,
        model.program().n_parameter_columns(),
        &traces,
        &settings,
    );
    let wall: f64 = traces
        .iter()
        .map(|t| t.warmup_seconds + t.sampling_seconds)
        .fold(0.0, f64::max);
    println!(
        "{}: {} chains x {} draws after {} warmup, seed {} ({:.2} s)\n",
        model.name(),
        args.chains,
        settings.num_draws,
        settings.num_warmup,
        args.seed,
        wall
    );
    print!("{summary}");

    if let Some(output) = &args.output {
        let path = output.to_string_lossy();
        let names = stan_csv::chain_file_names(&path, traces.len());
        for (trace, name) in traces.iter().zip(&names) {
            let file_path = PathBuf::from(name);
            ensure_parent(&file_path)?;
            let file = std::fs::File::create(&file_path)
                .with_context(|| format!("cannot create {name}"))?;
            let mut out = BufWriter::new(file);
            let context = CsvContext {
                model_name: model.name(),
                columns: &columns,
                settings: &settings,
                seed,
                file_name: name,
            };
            stan_csv::write_chain(&mut out, &context, trace)
                .with_context(|| format!("cannot write {name}"))?;
            out.flush()
                .with_context(|| format!("cannot write {name}"))?;
        }
        println!("\nwrote {}", names.join(", "));
    }
    Ok(())
}
