//! `cluster-cli bench --device gpu`: many chains on one GPU, measured as NumPyro's side of
//! `bench/gpu/` is (400 warmup + 400 draws by default, compile excluded, rates per second of
//! warmup plus sampling).
//!
//! Per model and chain count, one row:
//! * wall: seconds of `sample_on_device_with` (warmup and draws, every readback included),
//!   after a warm-up run of one chain that compiled the pipelines and uploaded the data (that
//!   run's time is the model's "setup": upload, compile, first draw), measured as NumPyro's
//!   side is: the second of two identical rounds (the first, `first_round_s` in the JSON, also
//!   brings the GPU's clocks up from idle);
//! * useful gradient evaluations per second: the gradients the chains needed (initial points,
//!   step-size searches and every leapfrog step of warmup and sampling, summed over chains)
//!   over the wall time;
//! * min bulk-ESS/s and min tail-ESS/s: `sampler::diagnostics` over all chains and all draws,
//!   the minimum over the constrained parameters, over the wall time;
//! * lockstep efficiency: useful leapfrog steps over executed lane-steps (a lockstep group of
//!   the adapter's subgroup width is busy while any lane is; `gpu_actor::LockstepTotals`);
//!   the JSON also has the efficiency if whole dispatches ran in lockstep, as NumPyro's do;
//! * divergences after warmup, summed over chains;
//! * check: each parameter's posterior mean against a CPU f64 reference run (8 chains, 1000 +
//!   1000), as the largest |z| with z the difference over the combined MCSE; it fails above
//!   `metrics::CHECK_Z_LIMIT`.
//!
//! Before the rows, the round trip of one small dispatch: a single chain of
//! eight_schools_noncentered, 32 leapfrog steps of the fused kernel, submitted and read back;
//! the median over repetitions after warm-up dispatches.

pub(super) mod metrics;
#[cfg(test)]
mod tests;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::ValueEnum;
use gpu_actor::wgsl::IndexChecks;
use gpu_actor::{
    DEFAULT_FUSED_STEPS, DEFAULT_NUTS_TRANSITIONS, DataPlacement, DeviceOptions, DrawsOutput,
    FusedLeapfrog, GpuDevice, GpuKernel, GpuSampleRequest, KernelOverrides, KernelPlan,
    LeapfrogStart, LogpGradRequest, Precision, PrecisionChoice, PrecisionMode, TapePlacement,
    check_f32, sample_on_device_with,
};
use sampler::{ChainId, ChainSpec, CheckedModel, NoObserver, SamplerSettings, Seed};
use serde_json::json;

use super::{SamplerArgs, ensure_parent, load_model};
use metrics::{CHECK_Z_LIMIT, ColumnStats, MeanCheck, column_stats, min_of};

/// Warmup iterations and draws per chain unless given: the NumPyro anchor's.
pub const DEFAULT_GPU_ITERATIONS: u64 = 400;
/// Chain counts unless given.
const DEFAULT_CHAINS: [u32; 5] = [1, 64, 1024, 8192, 65536];
/// Models unless given.
const DEFAULT_MODELS: [&str; 3] = [
    "models/eight_schools_noncentered.json",
    "models/logistic.json",
    "models/sv.json",
];
/// The round trip's model, kernel size and warm-up: at least this many dispatches over at
/// least this long, so that the GPU is at its clocks (after a few dispatches alone, a GPU
/// just out of idle still runs them markedly slower: `bench/journal.md`).
const ROUND_TRIP_MODEL: &str = "models/eight_schools_noncentered.json";
const ROUND_TRIP_STEPS: usize = 32;
const ROUND_TRIP_WARMUP: u32 = 20;
const ROUND_TRIP_WARMUP_TIME: Duration = Duration::from_millis(500);
/// The device watchdog: lavapipe compiles a pipeline at its first dispatch, which takes
/// minutes for a long model's storage tape on a loaded machine.
const POLL_TIMEOUT: Duration = Duration::from_secs(900);
/// The CPU reference run of the check.
const REFERENCE_CHAINS: u32 = 8;
const REFERENCE_ITERATIONS: u64 = 1000;
const REFERENCE_SEED: Seed = Seed(20_251_121);

/// Options of `bench --device gpu`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GpuBenchArgs {
    /// GPU: chain counts, comma-separated [default: 1,64,1024,8192,65536].
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    chains: Vec<u32>,
    /// GPU: kernel [default: nuts].
    #[arg(long, value_enum)]
    kernel: Option<KernelArg>,
    /// GPU: NUTS transitions (nuts) or leapfrog steps (fused) per dispatch [default: the
    /// kernel's].
    #[arg(long, value_name = "N")]
    per_dispatch: Option<u32>,
    /// GPU: floating-point precision; f64 needs SHADER_F64; auto checks f32 against the
    /// CPU's f64 per model, as `sample` does, prints what it chose and why, and the timed
    /// rows include that check [default: f32].
    #[arg(long, value_enum)]
    precision: Option<PrecisionArg>,
    /// GPU: where the kernels read model data [default: auto, workgroup memory when it fits
    /// the adapter's limit and chains are not split across lanes].
    #[arg(long, value_enum)]
    data: Option<DataArg>,
    /// GPU: where the model's tapes live [default: auto, private arrays for short tapes,
    /// storage for long ones, run by the interpreter for long programs].
    #[arg(long, value_enum)]
    tape: Option<TapeArg>,
    /// GPU: invocations per workgroup (1 to 1024) [default: 64; chains split over lanes: up
    /// to 512, at least 512 workgroups].
    #[arg(long, value_name = "N")]
    workgroup_size: Option<u32>,
    /// GPU: invocations per chain, which split the model's long vectors: 1, or a power of
    /// two up to the adapter's subgroup size [default: auto, the subgroup size for models
    /// with long observation vectors].
    #[arg(long, value_name = "N")]
    lanes: Option<u32>,
    /// GPU: which array accesses the kernels check while they run: all (every index, as
    /// WebGPU does), or buffers (storage buffers only, by the driver) [default: buffers on
    /// Vulkan, else all].
    #[arg(long, value_enum, value_name = "WHICH")]
    index_checks: Option<IndexChecksArg>,
    /// GPU: where sampling dispatches write their draws: mapped (straight into the buffer
    /// the host reads, where the adapter allows it), copied (into device memory, then copied
    /// after the kernel), or auto (mapped for chains split across lanes, else copied)
    /// [default: auto].
    #[arg(long, value_enum, value_name = "WHERE")]
    draws_output: Option<DrawsOutputArg>,
    /// GPU: also write one JSON object per row to this file (JSON lines).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// GPU: repetitions of the single-dispatch round trip; 0 skips it [default: 200].
    #[arg(long, value_name = "N")]
    round_trips: Option<u32>,
    /// GPU: skip the CPU reference run and the check column.
    #[arg(long)]
    no_check: bool,
    /// GPU: start no new row after this many seconds (rows left are listed as skipped).
    #[arg(long, value_name = "SECONDS")]
    time_limit: Option<f64>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DataArg {
    Auto,
    Storage,
    Workgroup,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IndexChecksArg {
    All,
    Buffers,
}

impl IndexChecksArg {
    fn checks(self) -> IndexChecks {
        match self {
            IndexChecksArg::All => IndexChecks::All,
            IndexChecksArg::Buffers => IndexChecks::Buffers,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DrawsOutputArg {
    Auto,
    Mapped,
    Copied,
}

impl DrawsOutputArg {
    fn output(self) -> DrawsOutput {
        match self {
            DrawsOutputArg::Auto => DrawsOutput::Auto,
            DrawsOutputArg::Mapped => DrawsOutput::Mapped,
            DrawsOutputArg::Copied => DrawsOutput::Copied,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TapeArg {
    Auto,
    Private,
    Storage,
    Interpreted,
}

impl GpuBenchArgs {
    /// Whether any GPU-only option was given (an error without `--device gpu`).
    pub fn given(&self) -> bool {
        !self.chains.is_empty()
            || self.kernel.is_some()
            || self.per_dispatch.is_some()
            || self.precision.is_some()
            || self.data.is_some()
            || self.tape.is_some()
            || self.workgroup_size.is_some()
            || self.lanes.is_some()
            || self.index_checks.is_some()
            || self.draws_output.is_some()
            || self.json.is_some()
            || self.round_trips.is_some()
            || self.no_check
            || self.time_limit.is_some()
    }

    fn kernel(&self) -> GpuKernel {
        match self.kernel.unwrap_or(KernelArg::Nuts) {
            KernelArg::Nuts => GpuKernel::Nuts {
                transitions_per_dispatch: self.per_dispatch.unwrap_or(DEFAULT_NUTS_TRANSITIONS),
            },
            KernelArg::Fused => GpuKernel::Fused {
                steps_per_dispatch: self.per_dispatch.unwrap_or(DEFAULT_FUSED_STEPS),
            },
        }
    }

    fn precision(&self) -> PrecisionMode {
        match self.precision {
            Some(PrecisionArg::Auto) => PrecisionMode::Auto,
            None | Some(PrecisionArg::F32) => PrecisionMode::F32,
            Some(PrecisionArg::F64) => PrecisionMode::F64,
        }
    }

    fn data(&self) -> Option<DataPlacement> {
        match self.data {
            None | Some(DataArg::Auto) => None,
            Some(DataArg::Storage) => Some(DataPlacement::Storage),
            Some(DataArg::Workgroup) => Some(DataPlacement::Workgroup),
        }
    }

    fn tape(&self) -> Option<TapePlacement> {
        match self.tape {
            None | Some(TapeArg::Auto) => None,
            Some(TapeArg::Private) => Some(TapePlacement::Private),
            Some(TapeArg::Storage) => Some(TapePlacement::Storage),
            Some(TapeArg::Interpreted) => Some(TapePlacement::Interpreted),
        }
    }

    fn chain_counts(&self) -> Vec<u32> {
        if self.chains.is_empty() {
            DEFAULT_CHAINS.to_vec()
        } else {
            self.chains.clone()
        }
    }
}

fn kernel_name(kernel: GpuKernel) -> &'static str {
    match kernel {
        GpuKernel::Nuts { .. } => "nuts",
        GpuKernel::Fused { .. } => "fused",
    }
}

/// One (model, chains) measurement.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    wall: f64,
    /// The untimed first of the two identical rounds.
    first_round: f64,
    useful_grads: u64,
    bulk: f64,
    tail: f64,
    lockstep: f64,
    dispatch_lockstep: f64,
    divergent: usize,
    check: Option<MeanCheck>,
    diagnostics_seconds: f64,
    /// Where the wall time went: dispatches, their summed submit-to-readback time, and the
    /// warmup and sampling phases' wall times.
    timing: Timing,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Timing {
    dispatches: usize,
    device: f64,
    /// The kernels' own time (GPU timestamps; NaN where the adapter has none).
    kernels: f64,
    warmup: f64,
    init: f64,
    search: f64,
    sampling: f64,
}

impl Row {
    fn grads_per_second(&self) -> f64 {
        self.useful_grads as f64 / self.wall.max(1e-9)
    }
    fn bulk_per_second(&self) -> f64 {
        self.bulk / self.wall.max(1e-9)
    }
    fn tail_per_second(&self) -> f64 {
        self.tail / self.wall.max(1e-9)
    }
}

/// JSON lines, flushed after each row so that a run cut short keeps what it measured.
struct JsonLines(Option<std::fs::File>);

impl JsonLines {
    fn create(path: Option<&Path>) -> anyhow::Result<JsonLines> {
        let Some(path) = path else {
            return Ok(JsonLines(None));
        };
        ensure_parent(path)?;
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(JsonLines(Some(file)))
    }

    fn write(&mut self, value: &serde_json::Value) -> anyhow::Result<()> {
        if let Some(file) = &mut self.0 {
            writeln!(file, "{value}")
                .and_then(|()| file.flush())
                .context("cannot write the JSON lines file")?;
        }
        Ok(())
    }
}

/// Runs the GPU benchmark.
pub fn run(
    args: &GpuBenchArgs,
    models: &[PathBuf],
    seeds: u64,
    sampler: &SamplerArgs,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let chain_counts = args.chain_counts();
    check_args(args, &chain_counts, seeds)?;
    let mut settings = sampler.settings(1);
    settings.num_warmup = sampler.warmup.unwrap_or(DEFAULT_GPU_ITERATIONS);
    settings.num_draws = sampler.draws.unwrap_or(DEFAULT_GPU_ITERATIONS);
    settings.validate()?;
    let models: Vec<PathBuf> = if models.is_empty() {
        DEFAULT_MODELS.iter().map(PathBuf::from).collect()
    } else {
        models.to_vec()
    };
    let kernel = args.kernel();
    let mode = args.precision();
    // Auto decides per model; until then (the round trip), f32.
    let precision = match mode {
        PrecisionMode::F64 => Precision::F64,
        PrecisionMode::F32 | PrecisionMode::Auto => Precision::F32,
    };
    let json = JsonLines::create(args.json.as_deref())?;
    let device = open_device(precision)?;
    let report = device.report();
    outln!(
        "{} kernel, {mode}, {} warmup + {} draws per chain, {} adaptation, median of {seeds} seed(s); \
         rates per second of warmup + sampling (compile excluded).\n",
        kernel_name(kernel),
        settings.num_warmup,
        settings.num_draws,
        format!("{:?}", settings.adaptation).to_lowercase(),
    );
    let context = json!({
        "kernel": kernel_name(kernel),
        "precision": precision.to_string(),
        "precision_mode": mode.to_string(),
        "warmup": settings.num_warmup,
        "draws": settings.num_draws,
        "adapter": report.name,
        "device_kind": report.kind.to_string(),
        "driver": report.driver,
    });
    let mut bench = Bench {
        args,
        device: &device,
        settings,
        kernel,
        mode,
        precision,
        seeds,
        chain_counts,
        started,
        json,
        context,
        rows_skipped: false,
    };
    // First: it is short, and a run cut short by its caller still has it.
    bench.round_trip()?;
    for path in &models {
        bench.model(path)?;
    }
    if bench.rows_skipped {
        outln!("some rows were skipped: past --time-limit");
    }
    device.shutdown()?;
    Ok(())
}

/// Refuses option values the benchmark cannot run with.
fn check_args(args: &GpuBenchArgs, chain_counts: &[u32], seeds: u64) -> anyhow::Result<()> {
    anyhow::ensure!(
        chain_counts.iter().all(|&n| n > 0),
        "--chains: every chain count must be at least 1"
    );
    anyhow::ensure!(
        args.per_dispatch != Some(0),
        "--per-dispatch must be at least 1"
    );
    anyhow::ensure!(seeds > 0, "--seeds must be at least 1");
    anyhow::ensure!(
        args.workgroup_size
            .is_none_or(|size| (1..=1024).contains(&size)),
        "--workgroup-size must be in 1..=1024"
    );
    Ok(())
}

/// Opens the best GPU, checks it runs `precision` and prints what it is.
fn open_device(precision: Precision) -> anyhow::Result<GpuDevice> {
    let device = GpuDevice::open(&DeviceOptions {
        poll_timeout: POLL_TIMEOUT,
        ..DeviceOptions::default()
    })
    .context("cannot open a GPU")?;
    let report = device.report();
    anyhow::ensure!(
        device.supports(precision),
        "{} has no SHADER_F64: use --precision f32",
        report.name
    );
    outln!(
        "{} ({}, {}, driver {}): subgroups {}..{}, workgroup memory {} KiB",
        report.name,
        report.kind,
        report.backend,
        report.driver,
        report.subgroup_sizes.0,
        report.subgroup_sizes.1,
        report.limits.max_compute_workgroup_storage_size / 1024,
    );
    Ok(device)
}

/// One run of the benchmark: its settings, the device and where the rows go.
struct Bench<'a> {
    args: &'a GpuBenchArgs,
    device: &'a GpuDevice,
    settings: SamplerSettings,
    kernel: GpuKernel,
    /// As asked.
    mode: PrecisionMode,
    /// The model's: as asked, or what auto chose for it.
    precision: Precision,
    seeds: u64,
    chain_counts: Vec<u32>,
    started: Instant,
    json: JsonLines,
    /// What every JSON line says about the run.
    context: serde_json::Value,
    rows_skipped: bool,
}

/// The kernel plan of each row of one model: the options given, else what the device
/// chooses for the row's chains ([`GpuDevice::kernel_plan`]).
struct Plans {
    /// The plan of one chain: the first warm-up run's.
    one: KernelPlan,
    /// Each chain count's, in the order of the rows.
    rows: Vec<(u32, KernelPlan)>,
}

impl Plans {
    fn resolve(
        device: &GpuDevice,
        program: &sampler::Program,
        precision: Precision,
        chain_counts: &[u32],
        overrides: &KernelOverrides,
    ) -> anyhow::Result<Plans> {
        let plan = |n_chains: u32| {
            device
                .kernel_plan(program, precision, n_chains as usize, overrides)
                .with_context(|| format!("no kernel plan for {n_chains} chains"))
        };
        Ok(Plans {
            one: plan(1)?,
            rows: chain_counts
                .iter()
                .map(|&n_chains| Ok((n_chains, plan(n_chains)?)))
                .collect::<anyhow::Result<_>>()?,
        })
    }

    /// The distinct values of `value` over the rows' plans, as text.
    fn distinct<T: Ord + std::fmt::Display>(&self, value: impl Fn(&KernelPlan) -> T) -> String {
        let mut values: Vec<T> = self.rows.iter().map(|(_, plan)| value(plan)).collect();
        values.sort();
        values.dedup();
        let text: Vec<String> = values.iter().map(T::to_string).collect();
        text.join(" or ")
    }
}

impl Bench<'_> {
    /// The round trip of one small dispatch, unless `--round-trips 0`.
    fn round_trip(&mut self) -> anyhow::Result<()> {
        let repetitions = self.args.round_trips.unwrap_or(200);
        if repetitions == 0 {
            return Ok(());
        }
        let precision = self.precision;
        let round_trip = round_trip(self.device, precision, repetitions)?;
        outln!(
            "round trip of one dispatch (1 chain of eight_schools_noncentered, fused kernel, {ROUND_TRIP_STEPS} steps, \
             {precision}): median {:.3} ms (10%: {:.3}, 90%: {:.3}) over {repetitions}, device time median {:.3} ms",
            round_trip.median_ms,
            round_trip.p10_ms,
            round_trip.p90_ms,
            round_trip.device_median_ms
        );
        let mut value = self.context.clone();
        value["kind"] = json!("round_trip");
        value["framework"] = json!("ours");
        value["precision"] = json!(precision.to_string());
        value["steps"] = json!(ROUND_TRIP_STEPS);
        value["repetitions"] = json!(repetitions);
        value["median_ms"] = json!(round_trip.median_ms);
        value["p10_ms"] = json!(round_trip.p10_ms);
        value["p90_ms"] = json!(round_trip.p90_ms);
        value["device_median_ms"] = json!(round_trip.device_median_ms);
        self.json.write(&value)?;
        outln!();
        Ok(())
    }

    /// The model's table: its setup, then one row per chain count.
    fn model(&mut self, path: &Path) -> anyhow::Result<()> {
        let args = self.args;
        let model = load_model(path)?;
        let most_chains = self.chain_counts.iter().copied().max().unwrap_or(1);
        let shape = runtime::JobShape::new(&model, &self.settings, u64::from(most_chains), 0);
        super::limits::check_fits_here(&shape, model.name())?;
        let program = model.program();
        let mut context = self.context.clone();
        if self.mode == PrecisionMode::Auto {
            let (choice, seconds) = self.auto_precision(&model)?;
            outln!(
                "{}: auto precision {choice}; the check took {seconds:.2} s (included in the rows' wall time)",
                model.name()
            );
            self.precision = choice.precision;
            context["precision"] = json!(choice.precision.to_string());
            context["precision_reason"] = json!(choice.reason);
            context["precision_check_seconds"] = json!(seconds);
        }
        let overrides = KernelOverrides {
            placement: args.tape(),
            workgroup_size: args.workgroup_size,
            data: args.data(),
            lanes: args.lanes,
            checks: args.index_checks.map(IndexChecksArg::checks),
            draws: args
                .draws_output
                .map_or_else(DrawsOutput::default, DrawsOutputArg::output),
            ..KernelOverrides::default()
        };
        // Each row's plan is fixed here (the defaults depend on the chains), so that its
        // pipelines are compiled by a warm-up run, not in a timed one.
        let plans = Plans::resolve(
            self.device,
            program,
            self.precision,
            &self.chain_counts,
            &overrides,
        )
        .with_context(|| model.name().to_owned())?;
        let mut warmed = vec![plans.one.shader];
        context["index_checks"] = json!(
            args.index_checks
                .map_or_else(|| "default".to_owned(), |arg| arg.checks().to_string())
        );
        // The CPU reference first: the GPU's warm-up run then comes right before the timed
        // rows, as NumPyro's does, and the GPU is not left idle (and clocked down) between.
        let reference = if args.no_check {
            None
        } else {
            Some(cpu_reference(&model, &self.settings)?)
        };
        let setup = self.warm_up(&model, &plans.one.pinned())?;
        let reference_seconds = reference.as_ref().map(|(_, seconds)| *seconds);
        self.model_header(&model, &plans, setup, reference_seconds);
        let reference = reference.as_ref().map(|(stats, _)| stats.as_slice());
        for &(n_chains, plan) in &plans.rows {
            if args
                .time_limit
                .is_some_and(|limit| self.started.elapsed().as_secs_f64() > limit)
            {
                outln!("| {n_chains} | skipped: past --time-limit | | | | | | |");
                let data = plan.shader.data;
                let skipped = row_json(&context, model.name(), n_chains, data, setup, None);
                self.json.write(&skipped)?;
                self.rows_skipped = true;
                continue;
            }
            let pinned = plan.pinned();
            if !warmed.contains(&plan.shader) {
                self.warm_up(&model, &pinned)?;
                warmed.push(plan.shader);
            }
            let row = self.row(&model, n_chains, &pinned, reference)?;
            outln!("{}", table_line(&model, n_chains, &row));
            let mut context = context.clone();
            context["workgroup_size"] = json!(plan.shader.workgroup_size);
            context["lanes"] = json!(plan.shader.lanes);
            // What the kernels did: mapped output needs the adapter's feature.
            context["draws_output"] = json!(plan.draws.to_string());
            let data = plan.shader.data;
            let value = row_json(&context, model.name(), n_chains, data, setup, Some(&row));
            self.json.write(&value)?;
        }
        outln!();
        Ok(())
    }

    /// The model's line (setup, where its data and tapes live, the reference's time) and
    /// its table's head.
    fn model_header(
        &self,
        model: &CheckedModel,
        plans: &Plans,
        setup: f64,
        reference_seconds: Option<f64>,
    ) {
        let program = model.program();
        outln!(
            "{} (d = {}): setup (upload, compile, first draw) {setup:.2} s; data in {} memory, \
             {} tape, {} lanes per chain{}\n",
            model.name(),
            program.dim,
            plans.distinct(|plan| plan.shader.data),
            plans.one.shader.placement,
            plans.distinct(|plan| plan.shader.lanes),
            reference_seconds
                .map(|seconds| format!(
                    "; CPU f64 reference ({REFERENCE_CHAINS} chains x {REFERENCE_ITERATIONS} draws) in {seconds:.1} s"
                ))
                .unwrap_or_default(),
        );
        outln!(
            "| chains | wall s | useful grad evals/s | min bulk-ESS/s | min tail-ESS/s | lockstep eff. \
             | divergences | check (max z of means vs CPU) |"
        );
        outln!("|---:|---:|---:|---:|---:|---:|---:|---|");
    }

    /// What auto chooses for `model` (with the first row's seed), and the check's seconds.
    fn auto_precision(&self, model: &CheckedModel) -> anyhow::Result<(PrecisionChoice, f64)> {
        let started = Instant::now();
        let n_chains = self.chain_counts.first().copied().unwrap_or(1);
        let request = GpuSampleRequest {
            model: model.clone(),
            settings: self.settings.clone(),
            seed: Seed(1),
            chains: (0..n_chains).map(|c| ChainSpec::new(ChainId(c))).collect(),
            kernel: self.kernel,
            precision: PrecisionMode::Auto,
        };
        let check = check_f32(self.device, &request)
            .with_context(|| format!("{}: the precision check failed", model.name()))?;
        let precision = if check.f32_agrees() {
            Precision::F32
        } else {
            anyhow::ensure!(
                self.device.supports(Precision::F64),
                "{}: {}, and this GPU has no SHADER_F64",
                model.name(),
                check.describe()
            );
            Precision::F64
        };
        let choice = PrecisionChoice {
            precision,
            reason: format!("auto: {}", check.describe()),
            f32_chains: 0,
        };
        Ok((choice, started.elapsed().as_secs_f64()))
    }

    /// The warm-up run of `model` with `options`, and its seconds.
    fn warm_up(&self, model: &CheckedModel, options: &KernelOverrides) -> anyhow::Result<f64> {
        warm_up(
            self.device,
            model,
            &self.settings,
            self.kernel,
            self.precision,
            options,
        )
        .with_context(|| format!("{}: the warm-up run failed", model.name()))
    }

    /// What a timed row asks for: auto runs its check in each row, as `sample` does.
    fn row_precision(&self) -> PrecisionMode {
        match self.mode {
            PrecisionMode::Auto => PrecisionMode::Auto,
            _ => self.precision.into(),
        }
    }

    /// One row: `n_chains` chains measured once per seed, the median over seeds.
    fn row(
        &self,
        model: &CheckedModel,
        n_chains: u32,
        options: &KernelOverrides,
        reference: Option<&[ColumnStats]>,
    ) -> anyhow::Result<Row> {
        let mut rows = Vec::new();
        for seed in 1..=self.seeds {
            let row = measure(
                self.device,
                model,
                &self.settings,
                Seed(seed),
                n_chains,
                (self.kernel, self.row_precision()),
                options,
                reference,
            )
            .with_context(|| format!("{}: {n_chains} chains, seed {seed}", model.name()))?;
            rows.push(row);
        }
        Ok(median_row(&rows))
    }
}

/// Uploads the model and runs one chain briefly, so that every pipeline the benchmark uses
/// is compiled (lavapipe compiles on first dispatch, so the step-size search runs too).
/// Returns the seconds it took.
fn warm_up(
    device: &GpuDevice,
    model: &CheckedModel,
    settings: &SamplerSettings,
    kernel: GpuKernel,
    precision: Precision,
    options: &KernelOverrides,
) -> anyhow::Result<f64> {
    let precision = PrecisionMode::from(precision);
    let started = Instant::now();
    let mut short = settings.clone();
    short.num_warmup = settings.num_warmup.min(10);
    short.num_draws = 1;
    let request = GpuSampleRequest {
        model: model.clone(),
        settings: short,
        seed: Seed(0),
        chains: vec![ChainSpec::new(ChainId(0))],
        kernel,
        precision,
    };
    sample_on_device_with(device, &request, options, &NoObserver)?;
    Ok(started.elapsed().as_secs_f64())
}

/// Per-parameter means and MCSE of a CPU f64 run, and its seconds.
fn cpu_reference(
    model: &CheckedModel,
    settings: &SamplerSettings,
) -> anyhow::Result<(Vec<ColumnStats>, f64)> {
    let started = Instant::now();
    let mut reference = settings.clone();
    reference.num_warmup = REFERENCE_ITERATIONS;
    reference.num_draws = REFERENCE_ITERATIONS;
    reference.threads = 0;
    let traces = sampler::sample(
        model,
        &reference,
        REFERENCE_SEED,
        REFERENCE_CHAINS,
        &NoObserver,
    )
    .with_context(|| format!("{}: the CPU reference run failed", model.name()))?;
    let stats = column_stats(&traces, model.program().n_parameter_columns(), threads())?;
    Ok((stats, started.elapsed().as_secs_f64()))
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One timed run and its row.
#[allow(clippy::too_many_arguments)]
fn measure(
    device: &GpuDevice,
    model: &CheckedModel,
    settings: &SamplerSettings,
    seed: Seed,
    n_chains: u32,
    (kernel, precision): (GpuKernel, PrecisionMode),
    options: &KernelOverrides,
    reference: Option<&[ColumnStats]>,
) -> anyhow::Result<Row> {
    let request = GpuSampleRequest {
        model: model.clone(),
        settings: settings.clone(),
        seed,
        chains: (0..n_chains).map(|c| ChainSpec::new(ChainId(c))).collect(),
        kernel,
        precision,
    };
    // Two identical rounds, the second timed, as NumPyro's side measures (its first round
    // compiles): the first also brings the GPU's clocks up from idle, which a cold round
    // pays for in its first tenths of a second.
    let started = Instant::now();
    drop(sample_on_device_with(
        device,
        &request,
        options,
        &NoObserver,
    )?);
    let first_round = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let run = sample_on_device_with(device, &request, options, &NoObserver)?;
    let wall = started.elapsed().as_secs_f64();
    let diagnostics_started = Instant::now();
    let stats = column_stats(
        &run.traces,
        model.program().n_parameter_columns(),
        threads(),
    )?;
    let lockstep = run.lockstep(None);
    Ok(Row {
        wall,
        first_round,
        useful_grads: run
            .traces
            .iter()
            .map(|t| t.grad_evals_warmup + t.grad_evals_sampling)
            .sum(),
        bulk: min_of(&stats, |s| s.ess_bulk),
        tail: min_of(&stats, |s| s.ess_tail),
        lockstep: lockstep.efficiency(),
        dispatch_lockstep: lockstep.dispatch_efficiency(),
        divergent: run.traces.iter().map(|t| t.n_divergent()).sum(),
        check: reference.map(|reference| MeanCheck::new(&stats, reference)),
        diagnostics_seconds: diagnostics_started.elapsed().as_secs_f64(),
        timing: Timing {
            dispatches: run.dispatches.len(),
            device: run
                .dispatches
                .iter()
                .map(|d| d.device_time.as_secs_f64())
                .sum(),
            kernels: run
                .dispatches
                .iter()
                .map(|d| d.kernel_time.map_or(f64::NAN, |t| t.as_secs_f64()))
                .sum(),
            warmup: run.warmup_time.as_secs_f64(),
            init: run.init_time.as_secs_f64(),
            search: run.search_time.as_secs_f64(),
            sampling: run.sampling_time.as_secs_f64(),
        },
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => 0.5 * (values[n / 2 - 1] + values[n / 2]),
    }
}

/// Each number the median over seeds (divergences: the largest; check: the worst).
fn median_row(rows: &[Row]) -> Row {
    let of = |f: fn(&Row) -> f64| median(rows.iter().map(f).collect());
    let wall = of(|r| r.wall);
    Row {
        wall,
        first_round: of(|r| r.first_round),
        // Keeps grads/s the median of the per-seed rates.
        useful_grads: (of(|r| r.grads_per_second()) * wall).round() as u64,
        bulk: of(|r| r.bulk_per_second()) * wall,
        tail: of(|r| r.tail_per_second()) * wall,
        lockstep: of(|r| r.lockstep),
        dispatch_lockstep: of(|r| r.dispatch_lockstep),
        divergent: rows.iter().map(|r| r.divergent).max().unwrap_or(0),
        check: rows
            .iter()
            .filter_map(|r| r.check.clone())
            .max_by(|a, b| a.max_z.total_cmp(&b.max_z)),
        diagnostics_seconds: of(|r| r.diagnostics_seconds),
        timing: Timing {
            dispatches: rows.iter().map(|r| r.timing.dispatches).max().unwrap_or(0),
            device: of(|r| r.timing.device),
            kernels: of(|r| r.timing.kernels),
            warmup: of(|r| r.timing.warmup),
            init: of(|r| r.timing.init),
            search: of(|r| r.timing.search),
            sampling: of(|r| r.timing.sampling),
        },
    }
}

/// Rates of any size in a few characters.
fn rate(value: f64) -> String {
    if value.is_finite() && value.abs() >= 1e5 {
        format!("{value:.3e}")
    } else {
        format!("{value:.0}")
    }
}

fn check_text(model: &CheckedModel, check: Option<&MeanCheck>) -> String {
    let Some(check) = check else {
        return "not run".into();
    };
    let name = model
        .columns()
        .get(check.worst)
        .map_or_else(|| format!("column {}", check.worst), ToString::to_string);
    if check.passed() {
        format!("ok ({:.2}, {name})", check.max_z)
    } else {
        format!("FAIL ({:.2} > {CHECK_Z_LIMIT}, {name})", check.max_z)
    }
}

fn table_line(model: &CheckedModel, n_chains: u32, row: &Row) -> String {
    format!(
        "| {n_chains} | {:.2} | {:.3e} | {} | {} | {:.2} | {} | {} |",
        row.wall,
        row.grads_per_second(),
        rate(row.bulk_per_second()),
        rate(row.tail_per_second()),
        row.lockstep,
        row.divergent,
        check_text(model, row.check.as_ref()),
    )
}

fn row_json(
    context: &serde_json::Value,
    model: &str,
    n_chains: u32,
    data: DataPlacement,
    setup: f64,
    row: Option<&Row>,
) -> serde_json::Value {
    let mut value = context.clone();
    value["kind"] = json!("row");
    value["framework"] = json!("ours");
    value["model"] = json!(model);
    value["chains"] = json!(n_chains);
    value["data_placement"] = json!(data.to_string());
    value["setup_s"] = json!(setup);
    let Some(row) = row else {
        value["skipped"] = json!(true);
        return value;
    };
    // serde_json writes NaN as null.
    value["wall_s"] = json!(row.wall);
    value["first_round_s"] = json!(row.first_round);
    value["useful_grads"] = json!(row.useful_grads);
    value["grads_per_s"] = json!(row.grads_per_second());
    value["min_ess_bulk"] = json!(row.bulk);
    value["min_ess_tail"] = json!(row.tail);
    value["min_ess_bulk_per_s"] = json!(row.bulk_per_second());
    value["min_ess_tail_per_s"] = json!(row.tail_per_second());
    value["ess_method"] = json!("sampler::diagnostics (ArviZ 0.23 rank-normalised)");
    value["lockstep_efficiency"] = json!(row.lockstep);
    value["dispatch_lockstep_efficiency"] = json!(row.dispatch_lockstep);
    value["divergences"] = json!(row.divergent);
    value["diagnostics_s"] = json!(row.diagnostics_seconds);
    value["dispatches"] = json!(row.timing.dispatches);
    value["dispatch_s"] = json!(row.timing.device);
    if row.timing.kernels.is_finite() {
        value["kernel_s"] = json!(row.timing.kernels);
    }
    value["warmup_s"] = json!(row.timing.warmup);
    value["sampling_s"] = json!(row.timing.sampling);
    value["init_s"] = json!(row.timing.init);
    value["search_s"] = json!(row.timing.search);
    if let Some(check) = &row.check {
        value["check_max_z"] = json!(check.max_z);
        value["check_ok"] = json!(check.passed());
    }
    value
}

/// Host-side times of one small dispatch and readback.
struct RoundTrip {
    median_ms: f64,
    p10_ms: f64,
    p90_ms: f64,
    device_median_ms: f64,
}

fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    let at = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
    sorted.get(at).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

fn round_trip(
    device: &GpuDevice,
    precision: Precision,
    repetitions: u32,
) -> anyhow::Result<RoundTrip> {
    let model = load_model(Path::new(ROUND_TRIP_MODEL)).context(
        "the round trip needs models/eight_schools_noncentered.json (run from the repository root)",
    )?;
    let key = device.upload_model(&model, precision).wait()?;
    let dim = model.program().dim;
    // A point away from zero and the mode, with a momentum of mixed signs.
    let q: Vec<f64> = (0..dim)
        .map(|j| 0.5 * (1.3 * j as f64 + 0.7).sin())
        .collect();
    let p: Vec<f64> = (0..dim).map(|j| (0.9 * j as f64 + 0.2).cos()).collect();
    let g = device
        .logp_grad(LogpGradRequest {
            model: key,
            points: q.clone(),
            placement: None,
            lanes: None,
        })
        .wait()?
        .grad;
    let session = FusedLeapfrog::open(device, key, 1, ROUND_TRIP_STEPS)?;
    let start = LeapfrogStart {
        n_steps: ROUND_TRIP_STEPS,
        inv_metric: vec![1.0; dim],
        step_size: vec![0.05],
        q,
        p,
        g,
    };
    let warming = Instant::now();
    let mut warmed = 0;
    while warmed < ROUND_TRIP_WARMUP || warming.elapsed() < ROUND_TRIP_WARMUP_TIME {
        session.run(&start)?;
        warmed += 1;
    }
    // `--round-trips` is the user's number: growth past this follows the timings.
    let reserved = (repetitions as usize).min(1 << 16);
    let mut host = Vec::with_capacity(reserved);
    let mut on_device = Vec::with_capacity(reserved);
    for _ in 0..repetitions {
        let started = Instant::now();
        let steps = session.run(&start)?;
        host.push(started.elapsed());
        on_device.push(steps.device_time);
        anyhow::ensure!(
            steps.logp.iter().all(|lp| lp.is_finite()),
            "the round trip's leapfrog steps left the support: the fused kernel is broken"
        );
    }
    host.sort();
    on_device.sort();
    Ok(RoundTrip {
        median_ms: quantile_ms(&host, 0.5),
        p10_ms: quantile_ms(&host, 0.1),
        p90_ms: quantile_ms(&host, 0.9),
        device_median_ms: quantile_ms(&on_device, 0.5),
    })
}
