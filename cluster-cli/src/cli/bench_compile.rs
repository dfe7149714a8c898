//! `cluster-cli bench-compile`: shader size and compile time against model size (issue 22),
//! over the models of growing size of `sampler::growing` (a Gaussian process with its
//! Cholesky factor written out, an ARMA mean from two n x n matrices, a chain of scalar
//! transformed values) or given model files.
//!
//! For each model, on a device of its own (so that every kernel is compiled, and a build left
//! compiling cannot slow the next model): the lowered program's size, the tape placement the
//! device chooses, the WGSL the sampling kernels are made of, the time spent building
//! pipelines (creation and first dispatch, where lavapipe compiles) and the time from the
//! start of a short NUTS run to its first draw.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use gpu_actor::wgsl::{self, ShaderOptions, TapePlacement};
use gpu_actor::{
    DeviceOptions, GpuDevice, GpuError, GpuKernel, GpuSampleRequest, KernelKind, KernelOverrides,
    Precision,
};
use sampler::growing::Family;
use sampler::{
    ChainId, ChainSpec, CheckedModel, DrawEvent, Limits, Observer, SamplerSettings, Seed,
};

use super::load_model;

/// Arguments of `bench-compile`.
#[derive(Debug, clap::Args)]
pub struct BenchCompileArgs {
    /// Model files; default: the growing families at the sizes of BENCHMARKS.md.
    models: Vec<PathBuf>,
    /// Only these families (gp, arma, chain).
    #[arg(long, value_delimiter = ',')]
    family: Vec<FamilyArg>,
    /// Only these sizes of the families.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Chains of the timed run.
    #[arg(long, default_value_t = 4)]
    chains: u32,
    /// Warmup iterations and draws of the timed run, each.
    #[arg(long, default_value_t = 25)]
    iterations: u64,
    /// Longest build of one kernel, in seconds (past it the row says so).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    compile_budget: f64,
    /// Longest wait for a model's first draw, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    time_limit: f64,
    /// Floating-point precision on the GPU.
    #[arg(long, value_enum, default_value_t = PrecisionArg::F32)]
    precision: PrecisionArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FamilyArg {
    Gp,
    Arma,
    Chain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PrecisionArg {
    F32,
    F64,
}

/// Records when the first draw came, and stops the run at a deadline.
struct FirstDraw {
    started: Instant,
    deadline: Instant,
    first: Mutex<Option<Duration>>,
}

impl Observer for FirstDraw {
    fn on_draw(&self, _event: &DrawEvent) {
        let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert_with(|| self.started.elapsed());
    }

    fn should_stop(&self) -> bool {
        Instant::now() >= self.deadline
    }

    fn keeps_draws(&self) -> bool {
        false
    }
}

pub fn run(args: BenchCompileArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::QUIET);
    let budget = Duration::try_from_secs_f64(args.compile_budget)
        .map_err(|_| anyhow::anyhow!("--compile-budget must be a number of seconds"))?;
    let time_limit = Duration::try_from_secs_f64(args.time_limit)
        .map_err(|_| anyhow::anyhow!("--time-limit must be a number of seconds"))?;
    anyhow::ensure!(args.chains > 0, "--chains must be at least 1");
    let precision = match args.precision {
        PrecisionArg::F32 => Precision::F32,
        PrecisionArg::F64 => Precision::F64,
    };
    let models = models(&args)?;
    let options = DeviceOptions {
        compile_budget: budget,
        ..DeviceOptions::default()
    };
    let probe = GpuDevice::open(&options).context("cannot open a GPU")?;
    let report = probe.report().clone();
    probe.shutdown()?;
    outln!(
        "{} ({}), {precision}; {} chains, {} warmup + {} draws; compile budget {budget:?} per kernel.",
        report.name,
        report.kind,
        args.chains,
        args.iterations,
        args.iterations,
    );
    if report.is_software() && std::env::var_os("MESA_SHADER_CACHE_DISABLE").is_none() {
        outln!(
            "lavapipe keeps compiled shaders on disk: set MESA_SHADER_CACHE_DISABLE=true for cold compile times."
        );
    }
    outln!(
        "Compile: building the run's pipelines (logp_grad, nuts, nuts_search), creation and first dispatch. \
         First draw: from the start of the run, compilation included.\n"
    );
    outln!(
        "| model | instructions | tape values | tape | WGSL lines (logp_grad / nuts) | compile (s) | first draw (s) |"
    );
    outln!("|---|---:|---:|---|---:|---:|---:|");
    for model in models {
        let row = measure(&model, &options, precision, &args, time_limit)
            .with_context(|| model.name().to_owned())?;
        outln!("{row}");
    }
    Ok(())
}

/// The models to measure: the files given, or the families at their sizes.
fn models(args: &BenchCompileArgs) -> anyhow::Result<Vec<CheckedModel>> {
    if !args.models.is_empty() {
        return args.models.iter().map(|path| load_model(path)).collect();
    }
    let families: Vec<Family> = if args.family.is_empty() {
        Family::ALL.to_vec()
    } else {
        args.family
            .iter()
            .map(|family| match family {
                FamilyArg::Gp => Family::Gp,
                FamilyArg::Arma => Family::Arma,
                FamilyArg::Chain => Family::Chain,
            })
            .collect()
    };
    let mut out = Vec::new();
    for family in families {
        let sizes = if args.sizes.is_empty() {
            family.sizes().to_vec()
        } else {
            args.sizes.clone()
        };
        for n in sizes {
            let model = CheckedModel::new(family.model(n), &Limits::default())
                .with_context(|| format!("{}{n}", family.name()))?;
            out.push(model);
        }
    }
    Ok(out)
}

/// One row of the table.
fn measure(
    model: &CheckedModel,
    options: &DeviceOptions,
    precision: Precision,
    args: &BenchCompileArgs,
    time_limit: Duration,
) -> anyhow::Result<String> {
    let program = model.program();
    let device = GpuDevice::open(options).context("cannot open a GPU")?;
    if !device.supports(precision) {
        anyhow::bail!(
            "{} has no SHADER_F64: use --precision f32",
            device.report().name
        );
    }
    // The shaders as the run's device chooses them (data placement aside, which changes a
    // few lines).
    let plan = device.kernel_plan(
        program,
        precision,
        args.chains as usize,
        &KernelOverrides::default(),
    )?;
    let lanes = plan.shader.lanes;
    let shader = ShaderOptions {
        lanes,
        placement: plan.shader.placement,
        ..ShaderOptions::new(program, precision)
    };
    let lines =
        |kernel| wgsl::kernel_source(program, kernel, &shader).map(|text| text.lines().count());
    let (logp_grad_lines, nuts_lines) = (lines(KernelKind::LogpGrad)?, lines(KernelKind::Nuts)?);
    let tape = match (shader.placement, lanes) {
        (TapePlacement::Interpreted, _) => "storage, interpreted".to_owned(),
        (TapePlacement::Storage, _) => "storage".to_owned(),
        (TapePlacement::Private, 1) => "private".to_owned(),
        (TapePlacement::Private, lanes) => format!("private, {lanes} lanes"),
    };
    let request = GpuSampleRequest {
        model: model.clone(),
        settings: SamplerSettings {
            num_warmup: args.iterations,
            num_draws: args.iterations,
            ..SamplerSettings::default()
        },
        seed: Seed(1),
        chains: (0..args.chains)
            .map(|c| ChainSpec::new(ChainId(c)))
            .collect(),
        kernel: GpuKernel::default(),
        precision: precision.into(),
    };
    let started = Instant::now();
    let observer = FirstDraw {
        started,
        deadline: started + time_limit,
        first: Mutex::new(None),
    };
    let outcome = gpu_actor::sample_on_device(&device, &request, &observer);
    let stats = device.stats().wait()?;
    let first = *observer.first.lock().unwrap_or_else(|e| e.into_inner());
    let compile = format!("{:.2}", stats.pipeline_build_time.as_secs_f64());
    let first_draw = match (&outcome, first) {
        (Err(GpuError::CompileBudget { key, .. }), _) => {
            format!("over budget ({})", key.kernel)
        }
        (Err(GpuError::LoopLimit { .. }), _) => "refused: over the loop limit".to_owned(),
        (_, Some(first)) => format!("{:.2}", first.as_secs_f64()),
        (Ok(_), None) => "no draw".to_owned(),
        (Err(GpuError::Sampler(sampler::SampleError::Cancelled)), None) => {
            format!("none within {time_limit:?}")
        }
        (Err(error), None) => format!("failed: {error}"),
    };
    // A build left compiling goes on in the background (gpu-actor's pipelines.rs): it may
    // slow the next rows.
    device.shutdown()?;
    Ok(format!(
        "| {} | {} | {} | {tape} | {logp_grad_lines} / {nuts_lines} | {compile} | {first_draw} |",
        model.name(),
        program.insts.len(),
        program.tape_len,
    ))
}
