//! `cluster-cli posteriordb`: run posteriordb's reference posteriors (the fixtures in
//! `stan/tests/posteriordb/`) unchanged and print one table: whether each program lowers,
//! the largest |z| of the means and of the sds against the reference
//! (`stan::posteriordb`: a pass is |z| <= 4 for every reference column), the smallest bulk
//! ESS per second, and the time from the program's text to the first draw; on the CPU and,
//! with `--gpu`, on this machine's GPU through the same supervisor as `sample --device gpu`.
//!
//! ESS per second is over sampling time, warmup excluded. On the CPU it is per core (the
//! chains' sampling times summed, so the thread count does not matter); on the GPU, where
//! the chains run together, over the longest chain's sampling time. The GPU's time to the
//! first draw includes building its kernel, but not starting the supervisor (once per run).
//!
//! The command fails (exit status 1) when a posterior that lowers fails its check.
//!
//! `--draws-dir DIR` also writes each CPU run's draws and timings there (see `draws`), for
//! `bench/posteriordb/vs_stan.py`, which compares ESS/s with Stan's on the same draws.

mod draws;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use gpu_actor::{
    GpuKernel, GpuSampleRequest, GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg, PrecisionMode,
    RanOn, SampleJob,
};
use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorRef};
use sampler::{ChainId, ChainSpec, RunSummary, SamplerSettings, Seed};
use stan::posteriordb::{self, Comparison, FirstDraw, Reference, RunError};

/// How long one GPU job may take: a bound on the call, not an expected duration.
const GPU_JOB_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// How long the GPU supervisor may take to report and to stop.
const SUPERVISOR_TIMEOUT: Duration = GpuSupervisor::STOP_TIMEOUT;

/// Arguments of `posteriordb`.
#[derive(Debug, clap::Args)]
pub struct PosteriordbArgs {
    /// The fixtures: `reference/`, `models/` and `data/` as vendored from posteriordb.
    #[arg(long, default_value = "stan/tests/posteriordb")]
    dir: PathBuf,
    /// Only posteriors whose name contains this (posteriordb's `<data>-<model>`); repeat for
    /// several.
    #[arg(long, value_name = "TEXT")]
    filter: Vec<String>,
    /// A filter matches a posterior's whole name only, not a part of it.
    #[arg(long)]
    exact: bool,
    /// Chains per posterior.
    #[arg(long, default_value_t = 4)]
    chains: u32,
    /// Warmup iterations per chain.
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    /// Draws kept per chain.
    #[arg(long, default_value_t = 1000)]
    draws: u64,
    /// Random seed; the same seed gives the same draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads on the CPU (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Also run every posterior that lowers on this machine's GPU (the default kernel and
    /// precision: auto, f32 where its check passes, else f64; a software adapter counts),
    /// through the same path as `sample --device gpu`.
    #[arg(long)]
    gpu: bool,
    /// Also write each CPU run's draws (Stan CSV) and timings (JSON) to this directory, one
    /// pair of files per posterior.
    #[arg(long, value_name = "DIR")]
    draws_dir: Option<PathBuf>,
}

/// One run's figures for the table, or why there are none.
enum Cell {
    Ran {
        comparison: Comparison,
        ess_per_second: f64,
        to_first_draw: Duration,
    },
    /// Did not run there, with the reason (unsupported program, GPU refused it, ...).
    Skipped(String),
    /// Sampling failed.
    Failed(String),
}

impl Cell {
    fn failed(&self) -> bool {
        match self {
            Cell::Ran { comparison, .. } => !comparison.passed(),
            Cell::Failed(_) => true,
            Cell::Skipped(_) => false,
        }
    }

    /// max |z| mean, max |z| sd, min bulk-ESS/s, time to first draw.
    fn columns(&self) -> [String; 4] {
        match self {
            Cell::Ran {
                comparison,
                ess_per_second,
                to_first_draw,
            } => [
                format!("{:.2}", comparison.max_z_mean()),
                format!("{:.2}", comparison.max_z_sd()),
                format!("{ess_per_second:.0}"),
                format!("{:.1} ms", 1e3 * to_first_draw.as_secs_f64()),
            ],
            Cell::Skipped(_) | Cell::Failed(_) => ["-".into(), "-".into(), "-".into(), "-".into()],
        }
    }

    /// Lines that explain a failure or a skip, for the notes under the table.
    fn notes(&self) -> Vec<String> {
        match self {
            Cell::Ran { comparison, .. } => comparison.failures(),
            Cell::Failed(reason) => vec![format!("sampling failed: {reason}")],
            Cell::Skipped(reason) => vec![reason.clone()],
        }
    }

    fn verdict(&self) -> &'static str {
        match self {
            Cell::Ran { comparison, .. } if comparison.passed() => "pass",
            Cell::Ran { .. } | Cell::Failed(_) => "FAIL",
            Cell::Skipped(_) => "-",
        }
    }
}

pub fn run(args: PosteriordbArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::QUIET);
    anyhow::ensure!(args.chains > 0, "--chains must be at least 1");
    let base = SamplerSettings {
        num_warmup: args.warmup,
        num_draws: args.draws,
        threads: args.threads,
        ..SamplerSettings::default()
    };
    base.validate()?;
    let references = read_references(&args.dir, &args.filter, args.exact)?;
    anyhow::ensure!(
        !references.is_empty(),
        "no posterior in {} matches --filter {:?}",
        args.dir.display(),
        args.filter
    );
    if let Some(dir) = &args.draws_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let gpu = if args.gpu { Some(Gpu::start()?) } else { None };

    outln!(
        "posteriordb: {} posteriors, {} chains x ({} warmup + {} draws), seed {}, the reference's \
         adapt_delta and max_treedepth; pass: every reference column's mean and sd within {} \
         combined MCSE.\n",
        references.len(),
        args.chains,
        args.warmup,
        args.draws,
        args.seed,
        posteriordb::Z_MAX
    );
    let mut header =
        "| posterior | supported | CPU max z mean | CPU max z sd | CPU min bulk-ESS/s \
                      | CPU to first draw | CPU"
            .to_owned();
    let mut rule = "|---|---|---:|---:|---:|---:|---".to_owned();
    if gpu.is_some() {
        header.push_str(
            " | GPU max z mean | GPU max z sd | GPU min bulk-ESS/s | GPU to first draw | GPU",
        );
        rule.push_str("|---:|---:|---:|---:|---");
    }
    outln!("{header} |");
    outln!("{rule}|");

    let (mut n_supported, mut n_passed, mut n_gpu_passed) = (0, 0, 0);
    let mut failed = Vec::new();
    let mut notes = Vec::new();
    for reference in &references {
        let source = read_fixture(&args.dir, &format!("models/{}.stan", reference.model))?;
        let data = read_fixture(&args.dir, &format!("data/{}.json", reference.data))?;
        let seed = Seed(args.seed);
        let run = match &args.draws_dir {
            Some(dir) => {
                draws::run_on_cpu(dir, reference, &source, &data, &base, seed, args.chains)?
            }
            None => posteriordb::run_on_cpu(reference, &source, &data, &base, seed, args.chains),
        };
        let (supported, cpu) = match run {
            Ok(run) => (
                "yes".to_owned(),
                Cell::Ran {
                    comparison: run.comparison,
                    ess_per_second: run.min_ess_bulk_per_second,
                    to_first_draw: run.to_first_draw,
                },
            ),
            Err(RunError::Unsupported(why)) => (
                format!("no ({}): {}", why.stage.as_str(), why.message),
                Cell::Skipped(why.to_string()),
            ),
            Err(RunError::Sample(why)) => ("yes".to_owned(), Cell::Failed(why)),
        };
        let gpu_cell = match (&gpu, &cpu) {
            (Some(gpu), Cell::Ran { .. } | Cell::Failed(_)) => {
                Some(gpu.check(reference, &source, &data, &base, seed, args.chains))
            }
            (Some(_), Cell::Skipped(why)) => Some(Cell::Skipped(why.clone())),
            (None, _) => None,
        };
        let mut line = format!(
            "| {} | {} | {} | {}",
            reference.posterior,
            supported.replace('|', "\\|"),
            cpu.columns().join(" | "),
            cpu.verdict()
        );
        if !matches!(cpu, Cell::Skipped(_)) {
            n_supported += 1;
            if cpu.failed() {
                failed.push(format!("{} (CPU)", reference.posterior));
                notes.extend(
                    cpu.notes()
                        .into_iter()
                        .map(|n| format!("{} (CPU): {n}", reference.posterior)),
                );
            } else {
                n_passed += 1;
            }
        }
        if let Some(cell) = &gpu_cell {
            line.push_str(&format!(
                " | {} | {}",
                cell.columns().join(" | "),
                cell.verdict()
            ));
            if cell.failed() {
                failed.push(format!("{} (GPU)", reference.posterior));
            }
            if matches!(cell, Cell::Ran { .. }) && !cell.failed() {
                n_gpu_passed += 1;
            }
            if !matches!(cpu, Cell::Skipped(_))
                && (cell.failed() || matches!(cell, Cell::Skipped(_)))
            {
                notes.extend(
                    cell.notes()
                        .into_iter()
                        .map(|n| format!("{} (GPU): {n}", reference.posterior)),
                );
            }
        }
        outln!("{line} |");
    }
    if let Some(gpu) = gpu {
        gpu.stop();
    }

    outln!(
        "\nCPU: {n_supported} of {} supported, {n_passed} pass.",
        references.len()
    );
    if args.gpu {
        outln!("GPU: {n_gpu_passed} pass.");
    }
    for note in &notes {
        outln!("- {note}");
    }
    anyhow::ensure!(
        failed.is_empty(),
        "{} supported posteriors failed: {}",
        failed.len(),
        failed.join(", ")
    );
    Ok(())
}

/// The reference summaries under `dir/reference/` whose name contains (is, when `exact`) one
/// of `filters` (all with no filter), by name.
fn read_references(dir: &Path, filters: &[String], exact: bool) -> anyhow::Result<Vec<Reference>> {
    let reference_dir = dir.join("reference");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&reference_dir)
        .with_context(|| {
            format!(
                "cannot list {} (run from the repository root or give --dir)",
                reference_dir.display()
            )
        })?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .filter(|path| {
            let name = path.file_stem().unwrap_or_default().to_string_lossy();
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        name == *f
                    } else {
                        name.contains(f.as_str())
                    }
                })
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Reference::from_json(&text).with_context(|| path.display().to_string())
        })
        .collect()
}

fn read_fixture(dir: &Path, relative: &str) -> anyhow::Result<String> {
    let path = dir.join(relative);
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// A GPU supervisor on its own runtime, started once for all posteriors.
struct Gpu {
    runtime: tokio::runtime::Runtime,
    supervisor: ActorRef<GpuSupervisorMsg>,
    handle: JoinHandle<()>,
}

impl Gpu {
    fn start() -> anyhow::Result<Gpu> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let (supervisor, handle) = runtime
            .block_on(GpuSupervisor::spawn(
                None,
                GpuSupervisor,
                GpuSupervisorArgs::default(),
            ))
            .context("cannot start the GPU supervisor")?;
        let report = runtime.block_on(GpuSupervisor::report(&supervisor, SUPERVISOR_TIMEOUT))?;
        if let Some(line) = &report.fallback {
            errln!("warning: {line}");
        }
        Ok(Gpu {
            runtime,
            supervisor,
            handle,
        })
    }

    /// Loads and samples one posterior on the GPU and compares; a model the GPU refuses,
    /// or a machine without one, gives a skipped cell.
    fn check(
        &self,
        reference: &Reference,
        source: &str,
        data: &str,
        base: &SamplerSettings,
        seed: Seed,
        n_chains: u32,
    ) -> Cell {
        let started = Instant::now();
        let model = match posteriordb::load(source, data, &reference.model) {
            Ok(model) => model,
            Err(why) => return Cell::Skipped(why.to_string()),
        };
        let settings = reference.settings(base);
        let request = GpuSampleRequest {
            model: model.clone(),
            settings: settings.clone(),
            seed,
            chains: (0..n_chains).map(|c| ChainSpec::new(ChainId(c))).collect(),
            kernel: GpuKernel::default(),
            precision: PrecisionMode::Auto,
        };
        let first_draw = Arc::new(FirstDraw::default());
        let job = SampleJob::new(request).with_observer(first_draw.clone());
        let output = match self.runtime.block_on(GpuSupervisor::sample(
            &self.supervisor,
            job,
            GPU_JOB_TIMEOUT,
        )) {
            Ok(output) => output,
            Err(err) => return Cell::Failed(err.to_string()),
        };
        if let RanOn::Cpu { reason, .. } = &output.ran_on {
            return Cell::Skipped(format!("ran on the CPU: {reason}"));
        }
        let to_first_draw = first_draw.at().unwrap_or_else(Instant::now) - started;
        let summary = RunSummary::new(
            &model.columns(),
            model.program().n_parameter_columns(),
            &output.traces,
            &settings,
        );
        let longest = output
            .traces
            .iter()
            .map(|t| t.sampling_seconds)
            .fold(0.0, f64::max);
        Cell::Ran {
            comparison: posteriordb::compare(reference, &summary),
            ess_per_second: summary.min_ess_bulk() / longest,
            to_first_draw,
        }
    }

    fn stop(self) {
        self.supervisor.stop(None);
        let stopped = self
            .runtime
            .block_on(async { tokio::time::timeout(SUPERVISOR_TIMEOUT, self.handle).await });
        if stopped.is_err() {
            errln!("warning: the GPU supervisor did not stop within {SUPERVISOR_TIMEOUT:?}");
        }
    }
}

#[cfg(test)]
mod tests;
