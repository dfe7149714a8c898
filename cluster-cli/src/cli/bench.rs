//! `cluster-cli bench`: one chain per benchmark model, measured the same way for every model:
//! gradient evaluations per second and minimum bulk/tail ESS per second of sampling time
//! (warmup excluded, as CmdStan reports it), ESS by the rank-normalised estimators of
//! Vehtari et al. (2021) over the constrained parameters, median over seeds.

use std::path::PathBuf;

use anyhow::Context;
use sampler::{AdaptationKind, NoObserver, RunSummary, Seed};

use super::{SamplerArgs, default_models_dir, load_model};

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Model files; default: every `*.json` in models/.
    models: Vec<PathBuf>,
    /// Seeds per model (1, 2, ...); the table shows medians.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Run both warmup procedures and show them side by side.
    #[arg(long)]
    compare_adaptation: bool,
    #[command(flatten)]
    sampler: SamplerArgs,
}

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
    println!(
        "One chain, {} warmup + {} draws, median of {} seeds; rates per second of sampling (warmup excluded).\n",
        args.sampler.warmup, args.sampler.draws, args.seeds
    );
    println!(
        "| model | adaptation | grad evals/s | min bulk-ESS/s | min tail-ESS/s | bulk-ESS per 1000 grads \
         | same, warmup grads included | divergences | leapfrog/draw |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for path in &models {
        let model = load_model(path)?;
        let columns = model.columns();
        for &adaptation in &adaptations {
            let mut settings = args.sampler.settings(1);
            settings.adaptation = adaptation;
            settings.validate()?;
            let mut runs = Vec::new();
            for seed in 1..=args.seeds {
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
            println!(
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
