//! `cluster-cli sample`: run chains locally, on CPU threads or on this machine's GPUs through
//! the GPU supervisor, print the summary, optionally write Stan CSV.
//!
//! With `--device gpu` the command starts a [`GpuSupervisor`] (one worker per usable
//! adapter) on a tokio runtime and sends it one job with every chain; without a usable
//! adapter the supervisor samples on the CPU, and the command says so in one warning line.
//! So does a model whose GPU kernel does not compile within `--compile-budget`
//! (`GpuError::CompileBudget`). Ctrl-C cancels the job (a second one exits at once).

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::ValueEnum;
use gpu_actor::{
    GpuKernel, GpuSampleRequest, GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg, PrecisionMode,
    RanOn, SampleJob, SampleOutput,
};
use ractor::{Actor, ActorRef};
use runtime::JobShape;
use sampler::stan_csv::{self, CsvContext};
use sampler::summary::EBFMI_THRESHOLD;
use sampler::{
    ChainId, ChainSpec, ChainTrace, CheckedModel, Column, RunSummary, SamplerSettings, Seed,
};

use super::cluster::block_on;
use super::{SamplerArgs, ensure_parent, load_model_for_sampling};
use crate::progress::ProgressBars;

/// Runs with more chains than this print one line for all chains instead of one per chain.
const MAX_CHAIN_LINES: usize = 16;
/// The longest local run: a bound on the call, not an expected duration (Ctrl-C cancels).
const RUN_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long the GPU supervisor may take to report and to stop.
const SUPERVISOR_TIMEOUT: Duration = GpuSupervisor::STOP_TIMEOUT;

/// Arguments of `sample`.
#[derive(Debug, clap::Args)]
pub struct SampleArgs {
    /// The model: a Stan program (`.stan`, with --data) or a JSON IR file (see models/).
    model: PathBuf,
    /// The Stan program's data, in Stan's JSON data format (as CmdStan reads it).
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
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
    /// Where the chains run: CPU threads, or this machine's GPUs (the CPU when it has no
    /// usable GPU) [default: cpu]. With --cluster: CPU pools or GPU workers only [default:
    /// wherever the cluster has room, GPU workers first].
    #[arg(long, value_enum)]
    device: Option<Device>,
    #[command(flatten)]
    gpu: GpuArgs,
    #[command(flatten)]
    sampler: SamplerArgs,
    #[command(flatten)]
    remote: super::sample_remote::RemoteArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Device {
    Cpu,
    Gpu,
}

/// Options of `--device gpu`.
#[derive(Debug, Clone, clap::Args)]
struct GpuArgs {
    /// GPU kernel: whole NUTS transitions on the GPU, or fused leapfrog steps with the trees
    /// built on the CPU [default: nuts].
    #[arg(long, value_enum)]
    kernel: Option<KernelArg>,
    /// NUTS transitions (nuts) or leapfrog steps (fused) per GPU dispatch [default: the
    /// kernel's].
    #[arg(long, value_name = "N")]
    per_dispatch: Option<u32>,
    /// Floating-point precision on the GPU [default: auto]. auto evaluates the model in f32
    /// on the GPU against f64 on the CPU before warmup, at initial points and along short
    /// trajectories in the typical set (found by a brief CPU run), and samples in f32 where
    /// f32 agrees, else in f64; an f32 warmup whose step size collapses far below the CPU
    /// run's starts again in f64. On a GPU without f64 (SHADER_F64) it samples on the CPU
    /// instead, saying why. f32 and f64 run unchecked as asked. The summary's first line
    /// says which precision ran and why.
    #[arg(long, value_enum)]
    precision: Option<PrecisionArg>,
    /// Do not use software GPU devices (lavapipe): on a machine with no other adapter,
    /// sample on the CPU.
    #[arg(long)]
    no_software_gpu: bool,
    /// Longest time in seconds one GPU kernel may take to compile; past it the chains run on
    /// the CPU [default: 20].
    #[arg(long, value_name = "SECONDS")]
    compile_budget: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum KernelArg {
    Nuts,
    Fused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PrecisionArg {
    Auto,
    F32,
    F64,
}

impl GpuArgs {
    fn given(&self) -> bool {
        self.kernel.is_some()
            || self.per_dispatch.is_some()
            || self.precision.is_some()
            || self.no_software_gpu
            || self.compile_budget.is_some()
    }

    /// `--compile-budget`, checked.
    fn compile_budget(&self) -> anyhow::Result<Duration> {
        match self.compile_budget {
            None => Ok(gpu_actor::DEFAULT_COMPILE_BUDGET),
            Some(seconds) => Duration::try_from_secs_f64(seconds).map_err(|_| {
                anyhow::anyhow!(
                    "--compile-budget must be a number of seconds, at least 0, not {seconds}"
                )
            }),
        }
    }

    fn kernel(&self) -> GpuKernel {
        let default = GpuKernel::default();
        let kernel = match (self.kernel, default) {
            (None, kernel) => kernel,
            (Some(KernelArg::Nuts), GpuKernel::Nuts { .. }) => default,
            (Some(KernelArg::Fused), GpuKernel::Fused { .. }) => default,
            (Some(KernelArg::Nuts), GpuKernel::Fused { .. }) => GpuKernel::Nuts {
                transitions_per_dispatch: 1,
            },
            // The default K.
            (Some(KernelArg::Fused), GpuKernel::Nuts { .. }) => GpuKernel::Fused {
                steps_per_dispatch: 32,
            },
        };
        match (kernel, self.per_dispatch) {
            (kernel, None) => kernel,
            (GpuKernel::Nuts { .. }, Some(n)) => GpuKernel::Nuts {
                transitions_per_dispatch: n,
            },
            (GpuKernel::Fused { .. }, Some(n)) => GpuKernel::Fused {
                steps_per_dispatch: n,
            },
        }
    }

    fn precision(&self) -> PrecisionMode {
        match self.precision {
            None | Some(PrecisionArg::Auto) => PrecisionMode::Auto,
            Some(PrecisionArg::F32) => PrecisionMode::F32,
            Some(PrecisionArg::F64) => PrecisionMode::F64,
        }
    }
}

fn kernel_name(kernel: GpuKernel) -> &'static str {
    match kernel {
        GpuKernel::Nuts { .. } => "nuts",
        GpuKernel::Fused { .. } => "fused",
    }
}

pub fn run(args: SampleArgs) -> anyhow::Result<()> {
    // Silent unless `RUST_LOG` asks (`gpu_actor::timeline=debug`, say): what a run has to
    // say, the fallback to the CPU included, it prints itself, once.
    crate::logging::init(crate::logging::QUIET);
    let loaded = load_model_for_sampling(&args.model, args.data.as_deref())?;
    let model = loaded.model;
    anyhow::ensure!(args.chains > 0, "--chains must be at least 1");
    anyhow::ensure!(
        args.device == Some(Device::Gpu) || !args.gpu.given(),
        "--kernel, --per-dispatch, --precision, --no-software-gpu and --compile-budget need --device gpu"
    );
    anyhow::ensure!(
        args.gpu.per_dispatch != Some(0),
        "--per-dispatch must be at least 1"
    );
    let settings = args.sampler.settings(args.threads);
    settings.validate()?;
    let seed = Seed(args.seed);
    let mut columns = model.columns();
    if args.remote.cluster.is_empty() {
        // Every chain's draws are kept here, before anything is sized from the request.
        let shape = JobShape::new(&model, &settings, u64::from(args.chains), 0);
        super::limits::check_fits_here(&shape, "sample")?;
    }
    if !args.remote.cluster.is_empty() {
        let device = args.device.map(|device| device == Device::Gpu);
        let mut run = super::sample_remote::run(
            &args.remote,
            &model,
            &settings,
            seed,
            args.chains,
            device,
            args.gpu.precision(),
        )?;
        if let Some(generated) = &loaded.generated {
            generated::append(generated, &mut run.traces, &mut columns, seed, args.threads);
        }
        let n_parameters = model.program().n_parameter_columns();
        let summary = RunSummary::new(&columns, n_parameters, &run.traces, &settings);
        out!("{}\n{}{}", run.header, summary_text(summary), run.report);
        if let Some(output) = &args.output {
            write_csv(output, &model, &columns, &settings, seed, &run.traces)?;
        }
        return Ok(());
    }

    let progress = Arc::new(ProgressBars::new(
        args.chains,
        settings.num_warmup.saturating_add(settings.num_draws),
        args.quiet,
    ));
    let started = Instant::now();
    let (mut traces, ran_on) = match args.device.unwrap_or(Device::Cpu) {
        Device::Cpu => {
            let traces = sampler::sample(&model, &settings, seed, args.chains, progress.as_ref())
                .with_context(|| format!("sampling {} failed", model.name()))?;
            (traces, String::new())
        }
        Device::Gpu => {
            let output = sample_on_gpu(&args, &model, &settings, progress.clone())?;
            let on = match &output.ran_on {
                RanOn::Gpu { .. } => format!(
                    " on {}, {} kernel",
                    output.ran_on,
                    kernel_name(args.gpu.kernel()),
                ),
                RanOn::Cpu { reason, refused } => {
                    if *refused {
                        let reason = with_hint(reason);
                        errln!("warning: {reason}; sampled on the CPU instead");
                    }
                    format!(" on {}", output.ran_on)
                }
                RanOn::Split {
                    reason, cpu_chains, ..
                } => {
                    let reason = with_hint(reason);
                    errln!("warning: {reason}; {cpu_chains} chains sampled on the CPU instead");
                    format!(
                        " on {}, {} kernel",
                        output.ran_on,
                        kernel_name(args.gpu.kernel()),
                    )
                }
            };
            (output.traces, on)
        }
    };
    let wall = started.elapsed().as_secs_f64();
    progress.finish();
    if let Some(generated) = &loaded.generated {
        generated::append(generated, &mut traces, &mut columns, seed, args.threads);
    }

    let summary = RunSummary::new(
        &columns,
        model.program().n_parameter_columns(),
        &traces,
        &settings,
    );
    outln!(
        "{}: {} chains x {} draws after {} warmup, seed {} ({wall:.2} s{ran_on})\n",
        model.name(),
        args.chains,
        settings.num_draws,
        settings.num_warmup,
        args.seed,
    );
    out!("{}", summary_text(summary));

    if let Some(output) = &args.output {
        write_csv(output, &model, &columns, &settings, seed, &traces)?;
    }
    Ok(())
}

/// `reason`, with the flag that helps where the library's message names none: how to
/// insist on f32 after auto's refusal of f32 on a GPU without f64, how to sample on the CPU
/// after a GPU computed the model wrongly.
pub(super) fn with_hint(reason: &str) -> String {
    if reason.contains(gpu_actor::NEEDS_F64) {
        format!("{reason} (--precision f32 samples it on the GPU in f32 anyway)")
    } else if reason.contains(gpu_actor::COMPUTES_WRONGLY) {
        format!("{reason} (--device cpu samples it on the CPU)")
    } else {
        reason.to_owned()
    }
}

/// `error`, and where its message calls for one, the flag that helps ([`with_hint`]).
pub(super) fn hinted<E: std::error::Error + Send + Sync + 'static>(error: E) -> anyhow::Error {
    let text = error.to_string();
    let with = with_hint(&text);
    if with == text {
        error.into()
    } else {
        anyhow::anyhow!(with)
    }
}

/// Runs every chain as one job of a GPU supervisor started for it, on a tokio runtime.
fn sample_on_gpu(
    args: &SampleArgs,
    model: &CheckedModel,
    settings: &SamplerSettings,
    progress: Arc<ProgressBars>,
) -> anyhow::Result<SampleOutput> {
    let request = GpuSampleRequest {
        model: model.clone(),
        settings: settings.clone(),
        seed: Seed(args.seed),
        chains: (0..args.chains)
            .map(|c| ChainSpec::new(ChainId(c)))
            .collect(),
        kernel: args.gpu.kernel(),
        precision: args.gpu.precision(),
    };
    let supervisor_args = GpuSupervisorArgs {
        allow_software: !args.gpu.no_software_gpu,
        compile_budget: args.gpu.compile_budget()?,
        ..GpuSupervisorArgs::default()
    };
    let name = model.name().to_owned();
    block_on(async move {
        let (supervisor, handle) = GpuSupervisor::spawn(None, GpuSupervisor, supervisor_args)
            .await
            .context("cannot start the GPU supervisor")?;
        let output = run_job(&supervisor, request, progress).await;
        supervisor.stop(None);
        if tokio::time::timeout(SUPERVISOR_TIMEOUT, handle)
            .await
            .is_err()
        {
            errln!("warning: the GPU supervisor did not stop within {SUPERVISOR_TIMEOUT:?}");
        }
        output.with_context(|| format!("sampling {name} failed"))
    })?
}

async fn run_job(
    supervisor: &ActorRef<GpuSupervisorMsg>,
    request: GpuSampleRequest,
    progress: Arc<ProgressBars>,
) -> anyhow::Result<SampleOutput> {
    let report = GpuSupervisor::report(supervisor, SUPERVISOR_TIMEOUT).await?;
    if let Some(line) = &report.fallback {
        progress.println(&format!("warning: {line}"));
    }
    let job = SampleJob::new(request).with_observer(progress);
    let cancel = job.cancel.clone();
    let sampling = GpuSupervisor::sample(supervisor, job, RUN_TIMEOUT);
    tokio::pin!(sampling);
    let output = tokio::select! {
        output = &mut sampling => output,
        _ = tokio::signal::ctrl_c() => {
            errln!("interrupted: cancelling the chains (Ctrl-C again to exit at once)");
            cancel.cancel();
            tokio::select! {
                output = &mut sampling => output,
                _ = tokio::signal::ctrl_c() => std::process::exit(130),
            }
        }
    };
    output.map_err(hinted)
}

/// The summary as printed: everything for a few chains; for many, one line for all chains
/// and one warning for all chains with a low E-BFMI.
fn summary_text(mut summary: RunSummary) -> String {
    if summary.chains.len() <= MAX_CHAIN_LINES {
        return summary.to_string();
    }
    let chains = std::mem::take(&mut summary.chains);
    let low: Vec<_> = chains
        .iter()
        .filter(|chain| chain.ebfmi < EBFMI_THRESHOLD)
        .collect();
    // `RunSummary` puts its per-chain E-BFMI warnings last, one per such chain.
    let kept = summary.warnings.len().saturating_sub(low.len());
    summary.warnings.truncate(kept);
    if let Some(lowest) = low.iter().min_by(|a, b| a.ebfmi.total_cmp(&b.ebfmi)) {
        summary.warnings.push(format!(
            "{} of {} chains have an E-BFMI below {EBFMI_THRESHOLD} (lowest {:.2}, chain {}): \
             the momentum resampling explores the energy poorly; reparameterise the model",
            low.len(),
            chains.len(),
            lowest.ebfmi,
            lowest.chain
        ));
    }
    // Without chains the text is the table, an empty line, and the warnings.
    let text = summary.to_string();
    let (table, warnings) = text.split_once("\n\n").unwrap_or((&text, "\n"));
    format!("{table}\n\n{}{warnings}", chains_line(&chains))
}

/// One line for many chains: step sizes, leapfrog steps, divergences, E-BFMI.
fn chains_line(chains: &[sampler::summary::ChainDiagnostics]) -> String {
    let mut step_sizes: Vec<f64> = chains.iter().map(|c| c.step_size).collect();
    step_sizes.sort_by(f64::total_cmp);
    let n = chains.len().max(1) as f64;
    let leapfrog = chains.iter().map(|c| c.mean_leapfrog).sum::<f64>() / n;
    let divergent: usize = chains.iter().map(|c| c.divergent).sum();
    let divergent_chains = chains.iter().filter(|c| c.divergent > 0).count();
    let ebfmi_min = chains.iter().map(|c| c.ebfmi).fold(f64::INFINITY, f64::min);
    let median = step_sizes
        .get(step_sizes.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    format!(
        "{} chains: step size {:.3} (median; {:.3} to {:.3}), {leapfrog:.1} leapfrog steps per draw, \
         {divergent} divergent in {divergent_chains} chains, E-BFMI {ebfmi_min:.2} or more\n",
        chains.len(),
        median,
        step_sizes.first().copied().unwrap_or(f64::NAN),
        step_sizes.last().copied().unwrap_or(f64::NAN),
    )
}

fn write_csv(
    output: &std::path::Path,
    model: &CheckedModel,
    columns: &[Column],
    settings: &SamplerSettings,
    seed: Seed,
    traces: &[ChainTrace],
) -> anyhow::Result<()> {
    let path = output.to_string_lossy();
    let names = stan_csv::chain_file_names(&path, traces.len());
    for (trace, name) in traces.iter().zip(&names) {
        let file_path = PathBuf::from(name);
        ensure_parent(&file_path)?;
        let file =
            std::fs::File::create(&file_path).with_context(|| format!("cannot create {name}"))?;
        let mut out = BufWriter::new(file);
        let context = CsvContext {
            model_name: model.name(),
            columns,
            settings,
            seed,
            file_name: name,
        };
        stan_csv::write_chain(&mut out, &context, trace)
            .with_context(|| format!("cannot write {name}"))?;
        out.flush()
            .with_context(|| format!("cannot write {name}"))?;
    }
    if names.len() <= MAX_CHAIN_LINES {
        outln!("\nwrote {}", names.join(", "));
    } else {
        outln!(
            "\nwrote {} files: {} ... {}",
            names.len(),
            names[0],
            names[names.len() - 1]
        );
    }
    Ok(())
}

mod generated;
#[cfg(test)]
mod tests;
