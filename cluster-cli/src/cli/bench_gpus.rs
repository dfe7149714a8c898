//! `cluster-cli bench-gpus`: one node's GPUs together. Per model and chain count, the same
//! job through the GPU supervisor (as `sample --device gpu` runs it) with workers on the
//! first 1, 2, 4, ... hardware adapters, which splits its chains over them.
//!
//! Per row: wall seconds of the job (submission to answer: warmup, draws, every readback),
//! measured after an identical untimed job on the same supervisor (which compiled every
//! worker's kernels, uploaded the data, taught the supervisor each worker's speed and
//! brought the GPUs' clocks up); min bulk-ESS over the constrained parameters
//! (`sampler::diagnostics`, all chains and draws), per second of wall time; and the speedup
//! of that rate over one GPU, with its efficiency (speedup over GPUs: the goal is
//! 0.9 or more). 400 warmup + 400 draws per chain, as `bench --device gpu`.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use gpu_actor::{
    AdapterSelection, GpuKernel, GpuSampleRequest, GpuSupervisor, GpuSupervisorArgs, Precision,
    RanOn, SampleJob, enumerate_adapters,
};
use ractor::Actor;
use sampler::{ChainId, ChainSpec, CheckedModel, SamplerSettings, Seed};

use super::bench_gpu::DEFAULT_GPU_ITERATIONS;
use super::bench_gpu::metrics::{column_stats, min_of};
use super::cluster::block_on;
use super::load_model;

/// The longest a job may take, the untimed one included.
const JOB_TIMEOUT: Duration = Duration::from_secs(3600);

/// Arguments of `bench-gpus`.
#[derive(Debug, clap::Args)]
pub struct BenchGpusArgs {
    /// Model files.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "models/eight_schools_noncentered.json,models/logistic.json,models/sv.json"
    )]
    models: Vec<String>,
    /// Chain counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8192,65536,262144")]
    chains: Vec<u32>,
    /// GPU counts, comma-separated: workers on the first N hardware adapters.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    gpus: Vec<usize>,
    /// Warmup iterations per chain.
    #[arg(long, default_value_t = DEFAULT_GPU_ITERATIONS)]
    warmup: u64,
    /// Draws per chain.
    #[arg(long, default_value_t = DEFAULT_GPU_ITERATIONS)]
    draws: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Allow a software adapter (lavapipe) as the only one: for trying the command out, never
    /// for timings.
    #[arg(long)]
    software_gpu: bool,
    /// Start no new row after this many seconds (rows left are listed as skipped).
    #[arg(long, value_name = "SECONDS")]
    time_limit: Option<f64>,
}

/// One measured row.
struct Row {
    model: String,
    chains: u32,
    gpus: usize,
    wall: f64,
    min_bulk: f64,
    shares: String,
}

/// Runs the command.
pub fn run(args: BenchGpusArgs) -> anyhow::Result<()> {
    let adapters = enumerate_adapters().context("cannot list the GPU adapters")?;
    let usable: Vec<usize> = adapters
        .iter()
        .filter(|adapter| args.software_gpu || !adapter.is_software())
        .map(|adapter| adapter.index)
        .collect();
    let Some(&most) = args.gpus.iter().max() else {
        bail!("--gpus is empty");
    };
    if args.gpus.contains(&0) {
        bail!("--gpus counts GPUs: 1 or more");
    }
    if usable.len() < most {
        bail!(
            "--gpus asks for {most} GPUs; this machine has {} usable adapter(s)",
            usable.len()
        );
    }
    let models: Vec<CheckedModel> = args
        .models
        .iter()
        .map(|path| load_model(path.as_ref()))
        .collect::<anyhow::Result<_>>()?;
    outln!(
        "{} ({} warmup + {} draws per chain, f32, NUTS kernel)",
        adapters
            .iter()
            .filter(|a| usable[..most].contains(&a.index))
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        args.warmup,
        args.draws
    );
    outln!(
        "| model | chains | GPUs | wall s | min bulk-ESS | min bulk-ESS/s | speedup | efficiency | shares |"
    );
    outln!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    let started = Instant::now();
    for model in &models {
        for &chains in &args.chains {
            let mut one_gpu_rate = None;
            for &gpus in &args.gpus {
                if args
                    .time_limit
                    .is_some_and(|limit| started.elapsed().as_secs_f64() > limit)
                {
                    outln!(
                        "| {} | {chains} | {gpus} | skipped (--time-limit) | | | | | |",
                        model.name()
                    );
                    continue;
                }
                let row = measure(&args, model, chains, &usable[..gpus])?;
                let rate = row.min_bulk / row.wall;
                if gpus == 1 {
                    one_gpu_rate = Some(rate);
                }
                let (speedup, efficiency) = match one_gpu_rate {
                    Some(one) => (
                        format!("{:.2}x", rate / one),
                        format!("{:.2}", rate / one / gpus as f64),
                    ),
                    None => ("–".to_owned(), "–".to_owned()),
                };
                outln!(
                    "| {} | {} | {} | {:.2} | {:.0} | {:.0} | {speedup} | {efficiency} | {} |",
                    row.model,
                    row.chains,
                    row.gpus,
                    row.wall,
                    row.min_bulk,
                    rate,
                    row.shares
                );
            }
        }
    }
    Ok(())
}

/// One job of `chains` chains of `model` on workers for `adapters`, after an identical
/// untimed one.
fn measure(
    args: &BenchGpusArgs,
    model: &CheckedModel,
    chains: u32,
    adapters: &[usize],
) -> anyhow::Result<Row> {
    let request = GpuSampleRequest {
        model: model.clone(),
        settings: SamplerSettings {
            num_warmup: args.warmup,
            num_draws: args.draws,
            ..SamplerSettings::default()
        },
        seed: Seed(args.seed),
        chains: (0..chains).map(|c| ChainSpec::new(ChainId(c))).collect(),
        kernel: GpuKernel::default(),
        precision: Precision::F32.into(),
    };
    let supervisor_args = GpuSupervisorArgs {
        adapters: AdapterSelection::Only(adapters.to_vec()),
        allow_software: args.software_gpu,
        ..GpuSupervisorArgs::default()
    };
    let output = block_on(async move {
        let (supervisor, handle) = GpuSupervisor::spawn(None, GpuSupervisor, supervisor_args)
            .await
            .context("cannot start the GPU supervisor")?;
        let report = GpuSupervisor::report(&supervisor, JOB_TIMEOUT).await?;
        if let Some(line) = report.fallback {
            supervisor.stop(None);
            bail!("no GPU worker: {line}");
        }
        let untimed = SampleJob::new(request.clone());
        let warmed = GpuSupervisor::sample(&supervisor, untimed, JOB_TIMEOUT).await;
        // Its draws go before the timed job's come.
        let timed = match warmed {
            Ok(_) => {
                let start = Instant::now();
                let output =
                    GpuSupervisor::sample(&supervisor, SampleJob::new(request), JOB_TIMEOUT).await;
                output.map(|output| (output, start.elapsed()))
            }
            Err(error) => Err(error),
        };
        supervisor.stop(None);
        let _ = tokio::time::timeout(JOB_TIMEOUT, handle).await;
        Ok(timed?)
    })??;
    let (output, wall) = output;
    let shares = match &output.ran_on {
        RanOn::Gpu { shares } => shares
            .iter()
            .map(|share| format!("{} {}", share.worker, share.chains))
            .collect::<Vec<_>>()
            .join(", "),
        other => bail!("the job did not run on the GPUs: {other}"),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let columns = model.program().n_parameter_columns();
    let stats = column_stats(&output.traces, columns, threads)?;
    Ok(Row {
        model: model.name().to_owned(),
        chains,
        gpus: adapters.len(),
        wall: wall.as_secs_f64(),
        min_bulk: min_of(&stats, |s| s.ess_bulk),
        shares,
    })
}
