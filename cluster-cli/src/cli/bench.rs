//! `cluster-cli bench`: one chain per benchmark model, measured the same way for every model:
//! gradient evaluations per second and minimum bulk/tail ESS per second of sampling time
//! (warmup excluded, as CmdStan reports it), ESS by the rank-normalised estimators of
//! Vehtari et al. (2021) over the constrained parameters, median over seeds.
//!
//! `--device gpu` runs many chains on a GPU instead (`bench_gpu.rs`).

use std::path::PathBuf;

use anyhow::Context;
use sampler::{AdaptationKind, NoObserver, RunSummary, Seed};

use super::bench_gpu::{self, GpuBenchArgs};
use super::{SamplerArgs, default_models_dir, load_model};

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Model files; default: every `*.json` in models/ (GPU: eight_schools_noncentered,
    /// logistic and sv).
    models: Vec<PathBuf>,
    /// Seeds per model (1, 2, ...); the table shows medians [default: 3; GPU: 1].
    #[arg(long)]
    seeds: Option<u64>,
    /// One chain per model on a CPU thread, or many chains on this machine's GPU.
    #[arg(long, value_enum, default_value_t = BenchDevice::Cpu)]
    device: BenchDevice,
    #[command(flatten)]
    gpu: GpuBenchArgs,
    /// Run both warmup procedures and show them side by side.
    #[arg(long)]
    compare_adaptation: bool,
    #[command(flatten)]
    sampler: SamplerArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BenchDevice {
    Cpu,
    Gpu,
}

/// Seeds per model on the CPU unless given.
const DEFAULT_CPU_SEEDS: u64 = 3;

struct Measurement {
    grads_per_second: f64,
    bulk_per_second: f64,
    tail_per_second: f64,
    bulk_per_grad: f64,
    bulk_per_total_grad: f64,
    divergent: usize,
    leapfrog_per_draw: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        0.5 * (values[n / 2 - 1] + values[n / 2])
    }
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    // Warnings; `RUST_LOG=gpu_actor::timeline=debug` adds each GPU dispatch's timeline.
    crate::logging::init(crate::logging::CLIENT_DEFAULT);
    if args.device == BenchDevice::Gpu {
        anyhow::ensure!(
            !args.compare_adaptation,
            "--compare-adaptation is for the CPU benchmark"
        );
        return bench_gpu::run(
            &args.gpu,
            &args.models,
            args.seeds.unwrap_or(1),
            &args.sampler,
        );
    }
    anyhow::ensure!(
        !args.gpu.given(),
        "--chains, --kernel, --per-dispatch, --precision, --data, --tape, --workgroup-size, \
         --index-checks, --json, --round-trips, --no-check and --time-limit need --device gpu"
    );
    let seeds = args.seeds.unwrap_or(DEFAULT_CPU_SEEDS);
    let models = if args.models.is_empty() {
        let dir = default_models_dir();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| {
                format!(
                    "cannot list {} (run from the repository root or name model files)",
                    dir.display()
                )
            })?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        paths
    } else {
        args.models.clone()
    };
    let adaptations = if args.compare_adaptation {
        vec![AdaptationKind::Stan, AdaptationKind::Nutpie]
    } else {
        vec![args.sampler.settings(1).adaptation]
    };
    let shown = args.sampler.settings(1);
    outln!(
        "One chain, {} warmup + {} draws, median of {} seeds; rates per second of sampling (warmup excluded).\n",
        shown.num_warmup,
        shown.num_draws,
        seeds
    );
    outln!(
        "| model | adaptation | grad evals/s | min bulk-ESS/s | min tail-ESS/s | bulk-ESS per 1000 grads \
         | same, warmup grads included | divergences | leapfrog/draw |"
    );
    outln!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for path in &models {
        let model = load_model(path)?;
        let shape = runtime::JobShape::new(&model, &args.sampler.settings(1), 1, 0);
        super::limits::check_fits_here(&shape, model.name())?;
        let columns = model.columns();
        for &adaptation in &adaptations {
            let mut settings = args.sampler.settings(1);
            settings.adaptation = adaptation;
            settings.validate()?;
            let mut runs = Vec::new();
            for seed in 1..=seeds {
                let traces = sampler::sample(&model, &settings, Seed(seed), 1, &NoObserver)
                    .with_context(|| format!("{}: seed {seed}", model.name()))?;
                let trace = &traces[0];
                let summary = RunSummary::new(
                    &columns,
                    model.program().n_parameter_columns(),
                    &traces,
                    &settings,
                );
                let seconds = trace.sampling_seconds.max(1e-9);
                let grads = trace.grad_evals_sampling as f64;
                runs.push(Measurement {
                    grads_per_second: grads / seconds,
                    bulk_per_second: summary.min_ess_bulk() / seconds,
                    tail_per_second: summary.min_ess_tail() / seconds,
                    bulk_per_grad: 1000.0 * summary.min_ess_bulk() / grads.max(1.0),
                    bulk_per_total_grad: 1000.0 * summary.min_ess_bulk()
                        / (grads + trace.grad_evals_warmup as f64).max(1.0),
                    divergent: trace.n_divergent(),
                    leapfrog_per_draw: grads / trace.n_draws().max(1) as f64,
                });
            }
            let column = |f: fn(&Measurement) -> f64| median(runs.iter().map(f).collect());
            outln!(
                "| {} | {:?} | {:.3e} | {:.0} | {:.0} | {:.1} | {:.1} | {} | {:.1} |",
                model.name(),
                adaptation,
                column(|m| m.grads_per_second),
                column(|m| m.bulk_per_second),
                column(|m| m.tail_per_second),
                column(|m| m.bulk_per_grad),
                column(|m| m.bulk_per_total_grad),
                runs.iter()
                    .map(|m| m.divergent.to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
                column(|m| m.leapfrog_per_draw),
            );
        }
    }
    Ok(())
}
