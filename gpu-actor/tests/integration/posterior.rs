//! The sampler issue's posterior tests on the GPU path: posterior means and standard
//! deviations from whole runs (warmup included) against analytic truth, within 4 Monte Carlo
//! standard errors (`sampler::diagnostics::{mcse_mean, mcse_sd}`, Vehtari et al. 2021), for
//! kernel (b) in f32 and f64 and for kernel (a). The models and truths are those of
//! `sampler/tests/integration/posterior.rs`; the checker is `sampler::diagnostics::truth`.
//!
//! lavapipe runs every kernel on two shared CPU cores, so runs are smaller than on the CPU
//! path (16 chains of 400 + 500 iterations: 8,000 draws, as many as the CPU tests' 4 x 2,000);
//! each run prints its largest |z| and the resolution of its checks. Seeds are fixed: the runs
//! are deterministic on a given device.

use gpu_actor::{
    GpuKernel, GpuSampleRequest, GpuSamplingOptions, Precision, sample_on_device_with,
};
use sampler::diagnostics::truth::{Comparison, Truth, compare};
use sampler::{
    AdaptationKind, ChainId, ChainRng, ChainSpec, ChainTrace, CheckedModel, Constraint, Dist,
    Limits, ModelBuilder, NoObserver, SamplerSettings, Seed, digamma,
};

use crate::support;

/// An estimate within this many MCSE of the truth agrees with it.
const Z_TOLERANCE: f64 = 4.0;
const N_CHAINS: u32 = 16;
const NUM_WARMUP: u64 = 400;
const NUM_DRAWS: u64 = 500;

/// A kernel, precision and adaptation a model is run under.
#[derive(Clone, Copy, Debug)]
struct Config {
    label: &'static str,
    kernel: GpuKernel,
    precision: Precision,
    adaptation: AdaptationKind,
    /// Each chain split across a subgroup of the adapter's (`wgsl.rs`, "Lanes"), instead of
    /// the default for the model.
    split: bool,
}

const NUTS_F32: Config = Config {
    label: "nuts/f32/nutpie",
    kernel: GpuKernel::Nuts {
        transitions_per_dispatch: 16,
    },
    precision: Precision::F32,
    adaptation: AdaptationKind::Nutpie,
    split: false,
};
const NUTS_F32_SPLIT: Config = Config {
    label: "nuts/f32/nutpie/split",
    split: true,
    ..NUTS_F32
};
const NUTS_F64: Config = Config {
    label: "nuts/f64/stan",
    kernel: GpuKernel::Nuts {
        transitions_per_dispatch: 16,
    },
    precision: Precision::F64,
    adaptation: AdaptationKind::Stan,
    split: false,
};
const FUSED_F32: Config = Config {
    label: "fused/f32/stan",
    kernel: GpuKernel::Fused {
        steps_per_dispatch: 32,
    },
    precision: Precision::F32,
    adaptation: AdaptationKind::Stan,
    split: false,
};
const CONFIGS: [Config; 4] = [NUTS_F32, NUTS_F32_SPLIT, NUTS_F64, FUSED_F32];

/// The truth for column `name` of `model`; the column must exist.
fn truth(
    model: &CheckedModel,
    name: &str,
    index: Option<usize>,
    mean: f64,
    sd: Option<f64>,
) -> Truth {
    Truth::new(model, name, index, mean, sd)
        .unwrap_or_else(|| panic!("{}: no column {name} {index:?}", model.name()))
}

/// The request of a run.
fn request(model: &CheckedModel, config: Config, seed: Seed) -> GpuSampleRequest {
    GpuSampleRequest {
        model: model.clone(),
        settings: SamplerSettings {
            num_warmup: NUM_WARMUP,
            num_draws: NUM_DRAWS,
            adaptation: config.adaptation,
            ..SamplerSettings::default()
        },
        seed,
        chains: (0..N_CHAINS).map(|c| ChainSpec::new(ChainId(c))).collect(),
        kernel: config.kernel,
        precision: config.precision,
    }
}

/// Runs `model` under every configuration the device supports and checks every truth.
fn check(model: &CheckedModel, seed: u64, truths: &[Truth]) {
    let Some(device) = support::shared_device() else {
        return;
    };
    for (k, config) in CONFIGS.into_iter().enumerate() {
        if !support::supports(&device, config.precision) {
            continue;
        }
        let report = device.report();
        let lanes = report.subgroup_sizes.0.min(gpu_actor::wgsl::MAX_LANES);
        if config.split
            && (!report.features.subgroup
                || lanes < 2
                || gpu_actor::wgsl::longest_split(model.program(), lanes).is_err())
        {
            println!(
                "{} {}: skipped (no subgroups, or the model does not split)",
                model.name(),
                config.label
            );
            continue;
        }
        let options = GpuSamplingOptions {
            lanes: Some(if config.split { lanes } else { 1 }),
            ..GpuSamplingOptions::default()
        };
        let seed = Seed(seed + k as u64);
        let started = std::time::Instant::now();
        let traces = sample_on_device_with(
            &device,
            &request(model, config, seed),
            &options,
            &NoObserver,
        )
        .map(|run| run.traces)
        .unwrap_or_else(|err| panic!("{} {}: {err}", model.name(), config.label));
        let comparisons: Vec<Comparison> = truths.iter().map(|t| compare(&traces, t)).collect();
        let divergent: usize = traces.iter().map(ChainTrace::n_divergent).sum();
        let max_abs_z = comparisons
            .iter()
            .map(Comparison::max_abs_z)
            .fold(0.0, f64::max);
        let resolution = comparisons
            .iter()
            .map(|c| c.resolution(Z_TOLERANCE))
            .fold(0.0, f64::max);
        let leapfrogs: u64 = traces.iter().map(|t| t.grad_evals_sampling).sum();
        println!(
            "{} {} (seed {}): {} checks, max |z| {max_abs_z:.2}, resolution {resolution:.3} sd, {divergent} divergent, {:.2} leapfrog/draw, step sizes {:.3}..{:.3}, {:.1} s",
            model.name(),
            config.label,
            seed.0,
            comparisons.len(),
            leapfrogs as f64 / (traces.len() as f64 * NUM_DRAWS as f64),
            traces
                .iter()
                .map(|t| t.tuning.step_size)
                .fold(f64::INFINITY, f64::min),
            traces
                .iter()
                .map(|t| t.tuning.step_size)
                .fold(0.0, f64::max),
            started.elapsed().as_secs_f64(),
        );
        let mut worst: Vec<&Comparison> = comparisons.iter().collect();
        worst.sort_by(|a, b| b.max_abs_z().total_cmp(&a.max_abs_z()));
        for comparison in worst.iter().take(3) {
            println!("    {comparison}");
        }
        let failures: Vec<String> = comparisons
            .iter()
            .zip(truths)
            .filter(|(comparison, _)| !comparison.agrees(Z_TOLERANCE))
            .map(|(comparison, truth)| {
                format!(
                    "{comparison}; truth: mean {}, sd {:?}",
                    truth.mean, truth.sd
                )
            })
            .collect();
        assert!(
            failures.is_empty(),
            "{} {} (seed {}): {} of {} estimates are more than {Z_TOLERANCE} MCSE from the truth:\n{}",
            model.name(),
            config.label,
            seed.0,
            failures.len(),
            comparisons.len(),
            failures.join("\n")
        );
    }
}

fn checked(builder: ModelBuilder) -> CheckedModel {
    CheckedModel::new(builder.build(), &Limits::default()).expect("the test model is valid")
}

#[test]
fn posterior_gpu_conjugate_normal() {
    let (prior_mean, prior_sd, sigma): (f64, f64, f64) = (1.0, 0.5, 2.0);
    let mut data_rng = ChainRng::new(Seed(20_261), ChainId(0));
    let y: Vec<f64> = (0..20).map(|_| 1.7 + sigma * data_rng.normal()).collect();
    let precision = 1.0 / prior_sd.powi(2) + y.len() as f64 / sigma.powi(2);
    let posterior_mean =
        (prior_mean / prior_sd.powi(2) + y.iter().sum::<f64>() / sigma.powi(2)) / precision;
    let posterior_sd = precision.sqrt().recip();
    let mut m = ModelBuilder::new("conjugate_normal");
    let y_data = m.data_vector("y", y);
    let mu = m.param("mu");
    m.sample(&mu, Dist::normal(prior_mean, prior_sd));
    m.sample(&y_data, Dist::normal(&mu, sigma));
    let model = checked(m);
    let truth = truth(&model, "mu", None, posterior_mean, Some(posterior_sd));
    check(&model, 100, &[truth]);
}

#[test]
fn posterior_gpu_gamma_poisson() {
    let (prior_shape, prior_rate) = (2.0, 1.0);
    let counts: Vec<i64> = vec![0, 1, 0, 2, 1];
    let shape = prior_shape + counts.iter().sum::<i64>() as f64;
    let rate_parameter = prior_rate + counts.len() as f64;
    let mut m = ModelBuilder::new("gamma_poisson");
    let y = m.data_int_vector("y", counts);
    let rate = m.param_constrained("rate", Constraint::Positive);
    let log_rate = m.transformed("log_rate", rate.ln());
    m.sample(&rate, Dist::gamma(prior_shape, prior_rate));
    m.sample(&y, Dist::poisson_log(&log_rate));
    let model = checked(m);
    let truths = [
        truth(
            &model,
            "rate",
            None,
            shape / rate_parameter,
            Some(shape.sqrt() / rate_parameter),
        ),
        truth(
            &model,
            "log_rate",
            None,
            digamma(shape) - rate_parameter.ln(),
            None,
        ),
    ];
    check(&model, 200, &truths);
}

const FUNNEL_DIM: usize = 9;

#[test]
fn posterior_gpu_noncentred_funnel() {
    let mut m = ModelBuilder::new("funnel_noncentred");
    let y = m.param("y");
    let x_raw = m.vector_param("x_raw", FUNNEL_DIM);
    m.transformed("x", (&y * 0.5).exp() * &x_raw);
    m.sample(&y, Dist::normal(0.0, 3.0));
    m.sample(&x_raw, Dist::normal(0.0, 1.0));
    let model = checked(m);
    let mut truths = vec![truth(&model, "y", None, 0.0, Some(3.0))];
    for i in 0..FUNNEL_DIM {
        truths.push(truth(&model, "x_raw", Some(i), 0.0, Some(1.0)));
        truths.push(truth(&model, "x", Some(i), 0.0, None));
    }
    check(&model, 300, &truths);
}

const WALK_LEN: usize = 9;

/// A Gaussian random walk with unit steps, from coordinate 1 (so that, split across lanes,
/// its elements sit one lane off the chain's coordinates, and 9 take lavapipe's 8 lanes
/// and one more): `x_t ~ N(0, sqrt(t + 1))`.
#[test]
fn posterior_gpu_random_walk() {
    let mut m = ModelBuilder::new("random_walk");
    let mu = m.param("mu");
    let x = m.vector_param("x", WALK_LEN);
    m.sample(&mu, Dist::normal(0.0, 1.0));
    m.sample(&x, Dist::gaussian_random_walk(1.0));
    let model = checked(m);
    let mut truths = vec![truth(&model, "mu", None, 0.0, Some(1.0))];
    for t in 0..WALK_LEN {
        let sd = ((t + 1) as f64).sqrt();
        truths.push(truth(&model, "x", Some(t), 0.0, Some(sd)));
    }
    check(&model, 400, &truths);
}

const NORMAL_DIM: usize = 100;

#[test]
fn posterior_gpu_standard_normal_100d() {
    let mut m = ModelBuilder::new("standard_normal_100d");
    let x = m.vector_param("x", NORMAL_DIM);
    m.sample(&x, Dist::normal(0.0, 1.0));
    let model = checked(m);
    let truths: Vec<Truth> = (0..NORMAL_DIM)
        .map(|i| truth(&model, "x", Some(i), 0.0, Some(1.0)))
        .collect();
    check(&model, 500, &truths);
}

#[test]
fn posterior_gpu_correlated_normal() {
    let rho: f64 = 0.99;
    let mut m = ModelBuilder::new("correlated_normal");
    let x1 = m.param("x1");
    let x2 = m.param("x2");
    m.transformed("product", &x1 * &x2);
    m.sample(&x1, Dist::normal(0.0, 1.0));
    m.sample(&x2, Dist::normal(rho * &x1, (1.0 - rho * rho).sqrt()));
    let model = checked(m);
    let truths = [
        truth(&model, "x1", None, 0.0, Some(1.0)),
        truth(&model, "x2", None, 0.0, Some(1.0)),
        // The product's mean only: its sd estimate (a fourth moment of a heavy-tailed
        // variable) errs far from normally. Over 12 seeds of each of three kernels its
        // z-scores were skewed low (down to -3.3, and -4.6 at this test's seed) while the
        // mean's were not; x1 and x2 check the spread.
        truth(&model, "product", None, rho, None),
    ];
    check(&model, 600, &truths);
}

/// Counts the warmup draws an observer sees, and those that came with values.
#[derive(Default)]
struct WarmupEvents {
    seen: std::sync::atomic::AtomicU64,
    with_values: std::sync::atomic::AtomicU64,
}

impl sampler::Observer for WarmupEvents {
    fn on_draw(&self, event: &sampler::DrawEvent) {
        use std::sync::atomic::Ordering::Relaxed;
        if event.warmup {
            self.seen.fetch_add(1, Relaxed);
            if !event.values.is_empty() {
                self.with_values.fetch_add(1, Relaxed);
            }
        }
    }
}

/// Saving warmup reads the warmup draws back; not saving leaves them on the device. Either
/// way the observer sees every warmup iteration and the draws after warmup are the same
/// (the metric comes from the moments kernel in both).
#[test]
fn gpu_save_warmup_keeps_warmup_draws_and_changes_nothing_else() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let mut m = ModelBuilder::new("save_warmup");
    let x = m.vector_param("x", 3);
    m.sample(&x, Dist::normal(0.5, 2.0));
    let model = checked(m);
    let (warmup, draws, chains) = (60, 40, 5);
    let run = |save_warmup: bool| {
        let mut request = request(
            &model,
            Config {
                label: "save warmup",
                kernel: GpuKernel::default(),
                precision: Precision::F32,
                adaptation: AdaptationKind::Nutpie,
                split: false,
            },
            Seed(9),
        );
        request.settings.num_warmup = warmup;
        request.settings.num_draws = draws;
        request.settings.save_warmup = save_warmup;
        request.chains.truncate(chains);
        let events = WarmupEvents::default();
        let traces =
            sample_on_device_with(&device, &request, &GpuSamplingOptions::default(), &events)
                .expect("samples")
                .traces;
        (traces, events)
    };
    let (saved, saved_events) = run(true);
    let (unsaved, unsaved_events) = run(false);
    let total = warmup * chains as u64;
    for (events, with_values) in [(&saved_events, total), (&unsaved_events, 0)] {
        assert_eq!(
            events.seen.load(std::sync::atomic::Ordering::Relaxed),
            total
        );
        assert_eq!(
            events
                .with_values
                .load(std::sync::atomic::Ordering::Relaxed),
            with_values
        );
    }
    for (saved, unsaved) in saved.iter().zip(&unsaved) {
        assert_eq!(saved.warmup_stats.len(), warmup as usize);
        assert_eq!(saved.warmup_draws.len(), warmup as usize * saved.n_columns);
        assert!(saved.warmup_draws.iter().all(|v| v.is_finite()));
        assert!(unsaved.warmup_draws.is_empty() && unsaved.warmup_stats.is_empty());
        assert_eq!(saved.draws, unsaved.draws, "chain {}", saved.chain);
        assert_eq!(saved.stats, unsaved.stats, "chain {}", saved.chain);
    }
}
