//! `PrecisionMode::Auto`, the default: the ill-conditioned regressions of `models/stan/`
//! (`regression.stan` with `regression_scale` and `regression_ridge`, whose f32 log density
//! is wrong by more than 1 in the typical set) run in f64 and match the CPU within 4 combined
//! MCSE; an adapter without f64 (lavapipe told to hide it) hands them to the CPU, saying
//! why; an ordinary model keeps f32.

use std::path::PathBuf;
use std::time::Duration;

use gpu_actor::{
    GpuActorError, GpuError, GpuKernel, GpuSampleRequest, GpuSupervisor, GpuSupervisorArgs,
    Precision, PrecisionMode, RanOn, SampleJob, check_f32, sample_on_device,
};
use ractor::Actor;
use sampler::diagnostics::mcse_mean;
use sampler::{
    ChainId, ChainRng, ChainSpec, ChainTrace, CheckedModel, Constraint, Dist, Limits, ModelBuilder,
    NoObserver, SamplerSettings, Seed,
};

use crate::support;

const N_CHAINS: u32 = 4;

/// `regression.stan` (flat priors on `alpha`, `beta`, `sigma > 0`) with a data set of
/// `models/stan/`, and its least-squares fit `(alpha, beta, sigma)`.
pub(crate) fn regression(data: &str) -> (CheckedModel, [f64; 3]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models/stan")
        .join(format!("{data}.data.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text).expect("Stan JSON data");
    let vector = |name: &str| -> Vec<f64> {
        json[name]
            .as_array()
            .unwrap_or_else(|| panic!("{data}: no {name}"))
            .iter()
            .map(|v| v.as_f64().expect("a number"))
            .collect()
    };
    let (x, y) = (vector("x"), vector("y"));
    let fit = least_squares(&x, &y);
    let mut m = ModelBuilder::new(data);
    let x = m.data_vector("x", x);
    let y = m.data_vector("y", y);
    let alpha = m.param("alpha");
    let beta = m.param("beta");
    let sigma = m.param_constrained("sigma", Constraint::Lower(0.0));
    m.sample(&y, Dist::normal(alpha + beta * x, sigma));
    let model = CheckedModel::new(m.build(), &Limits::default()).expect("the regression checks");
    (model, fit)
}

/// Intercept, slope and residual sd of `y` on `x`, computed centred (in f64, exact enough).
fn least_squares(x: &[f64], y: &[f64]) -> [f64; 3] {
    let n = x.len() as f64;
    let x_mean = x.iter().sum::<f64>() / n;
    let y_mean = y.iter().sum::<f64>() / n;
    let sxy: f64 = x
        .iter()
        .zip(y)
        .map(|(x, y)| (x - x_mean) * (y - y_mean))
        .sum();
    let sxx: f64 = x.iter().map(|x| (x - x_mean).powi(2)).sum();
    let beta = sxy / sxx;
    let alpha = y_mean - beta * x_mean;
    let rss: f64 = x
        .iter()
        .zip(y)
        .map(|(x, y)| (y - alpha - beta * x).powi(2))
        .sum();
    [alpha, beta, (rss / (n - 2.0)).sqrt()]
}

/// Chains that start near the least-squares fit (unconstrained: `log sigma`), so that a
/// short warmup suffices: what is tested is the precision, not the way from far away.
fn chains_near(fit: [f64; 3]) -> Vec<ChainSpec> {
    (0..N_CHAINS)
        .map(|c| {
            let mut rng = ChainRng::new(Seed(99), ChainId(c));
            ChainSpec {
                chain: ChainId(c),
                init: Some(vec![
                    fit[0],
                    fit[1],
                    fit[2].ln() + 0.1 * rng.uniform_in(-1.0, 1.0),
                ]),
                tuning: None,
            }
        })
        .collect()
}

/// The default GPU settings with a short run.
fn request(model: &CheckedModel, chains: Vec<ChainSpec>) -> GpuSampleRequest {
    GpuSampleRequest {
        model: model.clone(),
        settings: SamplerSettings {
            num_warmup: 300,
            num_draws: 300,
            ..SamplerSettings::default()
        },
        seed: Seed(5),
        chains,
        kernel: GpuKernel::default(),
        precision: PrecisionMode::default(),
    }
}

/// Each parameter's mean from `ours` against `cpu`'s, in combined MCSE.
fn assert_means_match(name: &str, cpu: &[ChainTrace], ours: &[ChainTrace]) {
    let column = |traces: &[ChainTrace], k: usize| -> Vec<Vec<f64>> {
        traces.iter().map(|trace| trace.column(k)).collect()
    };
    for (k, parameter) in ["alpha", "beta", "sigma"].iter().enumerate() {
        let (a, b) = (column(cpu, k), column(ours, k));
        let a_refs: Vec<&[f64]> = a.iter().map(Vec::as_slice).collect();
        let b_refs: Vec<&[f64]> = b.iter().map(Vec::as_slice).collect();
        let mean = |chains: &[Vec<f64>]| {
            let values: Vec<f64> = chains.iter().flatten().copied().collect();
            values.iter().sum::<f64>() / values.len() as f64
        };
        let mcse = mcse_mean(&a_refs).hypot(mcse_mean(&b_refs));
        let z = (mean(&a) - mean(&b)) / mcse;
        assert!(
            z.abs() < 4.0,
            "{name} {parameter}: CPU mean {} GPU mean {} ({z:.1} combined MCSE {mcse:.3e})",
            mean(&a),
            mean(&b)
        );
    }
}

fn auto_matches_the_cpu(data: &str, iterations: u64) {
    let Some(device) = support::shared_device() else {
        return;
    };
    if !support::supports(&device, Precision::F64) {
        return;
    }
    let (model, fit) = regression(data);
    let mut request = request(&model, chains_near(fit));
    request.settings.num_warmup = iterations;
    request.settings.num_draws = iterations;
    let run = gpu_actor::sample_on_device_with(
        &device,
        &request,
        &gpu_actor::KernelOverrides::default(),
        &NoObserver,
    )
    .expect("the GPU run");
    assert_eq!(
        run.precision.precision,
        Precision::F64,
        "{data}: {}",
        run.precision
    );
    assert!(
        run.precision.reason.starts_with("auto: f32 "),
        "{data}: {}",
        run.precision
    );
    let cpu = crate::support::cpu_traces(&request);
    assert_means_match(data, &cpu, &run.traces);
}

/// The check finds f32 wrong for both data sets, from the chains' own random starts.
#[test]
fn precision_check_finds_f32_wrong_for_ill_conditioned_regressions() {
    let Some(device) = support::shared_device() else {
        return;
    };
    for data in ["regression_scale", "regression_ridge"] {
        let (model, _) = regression(data);
        let chains = (0..N_CHAINS).map(|c| ChainSpec::new(ChainId(c))).collect();
        let check = check_f32(&device, &request(&model, chains)).expect("the check");
        eprintln!("{data}: {}", check.describe());
        assert!(!check.f32_agrees(), "{data}: {}", check.describe());
    }
}

#[test]
fn precision_auto_samples_regression_scale_like_the_cpu() {
    auto_matches_the_cpu("regression_scale", 300);
}

#[test]
fn precision_auto_samples_regression_ridge_like_the_cpu() {
    // Trees of about 128 steps: fewer iterations.
    auto_matches_the_cpu("regression_ridge", 200);
}

/// An ordinary model keeps f32: the check does not make every run pay for f64.
#[test]
fn precision_check_keeps_f32_for_eight_schools() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/eight_schools_noncentered.json");
    let text = std::fs::read_to_string(&path).expect("the benchmark model");
    let model = CheckedModel::from_json(&text, &Limits::default()).expect("it checks");
    let chains = (0..N_CHAINS).map(|c| ChainSpec::new(ChainId(c))).collect();
    let check = check_f32(&device, &request(&model, chains)).expect("the check");
    eprintln!("eight_schools_noncentered: {}", check.describe());
    assert!(check.f32_agrees(), "{}", check.describe());
    // Far inside the tolerances, not at their edge.
    assert!(
        check.lp_error < gpu_actor::LP_TOLERANCE / 100.0
            && check.grad_error < gpu_actor::GRAD_TOLERANCE / 100.0,
        "{}",
        check.describe()
    );
}

/// A model that needs f64 on an adapter without it: `sample_on_device` refuses it with the
/// reason, and the supervisor runs it on the CPU (the CPU sampler's exact draws), saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precision_auto_without_f64_falls_back_to_the_cpu_with_the_reason() {
    let args = GpuSupervisorArgs {
        hide_shader_f64: true,
        ..GpuSupervisorArgs::default()
    };
    let (supervisor, _) = GpuSupervisor::spawn(None, GpuSupervisor, args)
        .await
        .expect("the supervisor starts");
    let report = GpuSupervisor::report(&supervisor, Duration::from_secs(60))
        .await
        .expect("a report");
    if report.workers.is_empty() {
        assert!(!support::gpu_required(), "REQUIRE_GPU=1 but no worker");
        eprintln!("skipping: no GPU worker");
        return;
    }
    let (model, fit) = regression("regression_scale");
    let mut request = request(&model, chains_near(fit));
    request.settings.num_warmup = 100;
    request.settings.num_draws = 50;
    let expected = crate::support::cpu_traces(&request);
    let output = GpuSupervisor::sample(
        &supervisor,
        SampleJob::new(request.clone()),
        Duration::from_secs(600),
    )
    .await
    .expect("the job runs");
    match &output.ran_on {
        RanOn::Cpu { reason, refused } => {
            assert!(*refused, "{reason}");
            assert!(
                reason.contains("needs f64") && reason.contains("SHADER_F64"),
                "{reason}"
            );
        }
        other => panic!("ran on {other:?}"),
    }
    for (cpu, ours) in expected.iter().zip(&output.traces) {
        assert_eq!(cpu.draws, ours.draws);
    }
    // The user may insist on f32: the GPU runs it, or its first-point check refuses it
    // (near the mode, where these chains start, f32 is off by more than rounding), but the
    // job does not move to the CPU.
    request.precision = PrecisionMode::F32;
    request.settings.num_warmup = 20;
    request.settings.num_draws = 5;
    let insisted = GpuSupervisor::sample(
        &supervisor,
        SampleJob::new(request),
        Duration::from_secs(600),
    )
    .await;
    match &insisted {
        Ok(output) => match &output.ran_on {
            RanOn::Gpu { shares } => assert_eq!(shares[0].precision.precision, Precision::F32),
            other => panic!("ran on {other:?}"),
        },
        Err(GpuActorError::Gpu {
            error: GpuError::DensityMismatch { .. },
            ..
        }) => {}
        Err(other) => panic!("{other}"),
    }
    supervisor.stop(None);
}

/// `sample_on_device` itself says what the model needs.
#[test]
fn precision_auto_on_an_f32_only_device_says_the_model_needs_f64() {
    if support::shared_device().is_none() {
        return;
    }
    let device = gpu_actor::GpuDevice::open(&gpu_actor::DeviceOptions {
        hide_shader_f64: true,
        ..gpu_actor::DeviceOptions::default()
    })
    .expect("the device opens");
    assert!(!device.supports(Precision::F64));
    let (model, fit) = regression("regression_ridge");
    let error = sample_on_device(&device, &request(&model, chains_near(fit)), &NoObserver)
        .expect_err("refused");
    assert!(error.model_unsupported(), "{error}");
    assert!(error.to_string().contains("needs f64"), "{error}");
    device.shutdown().expect("the device shuts down");
}

/// Counts the draws handed over, warmup and sampling apart, and each sampling draw's
/// (chain, iteration) once.
#[derive(Default)]
struct Counted {
    seen: std::sync::Mutex<std::collections::HashSet<(u32, u64)>>,
    warmup: std::sync::atomic::AtomicU64,
    sampling: std::sync::atomic::AtomicU64,
}

impl sampler::Observer for Counted {
    fn on_draw(&self, event: &sampler::DrawEvent) {
        use std::sync::atomic::Ordering;
        if event.warmup {
            self.warmup.fetch_add(1, Ordering::Relaxed);
        } else {
            self.sampling.fetch_add(1, Ordering::Relaxed);
            let fresh = self
                .seen
                .lock()
                .expect("not poisoned")
                .insert((event.chain.0, event.iteration));
            assert!(
                fresh,
                "chain {} draw {} twice",
                event.chain.0, event.iteration
            );
        }
    }
}

/// f32 runs the check lets through (a hook makes it pass) on an ill-conditioned regression:
/// from random starts the f32 warmup's step sizes leave the CPU's, from near the fit the
/// run's own first-point check refuses f32; either way auto starts again in f64 (which
/// matches the CPU), the caller gets each draw once, none of the f32 run's, and the reason
/// says why. Without f64 the model is refused as needing f64.
#[test]
fn precision_auto_restarts_a_failed_f32_run_in_f64() {
    let Some(shared) = support::shared_device() else {
        return;
    };
    if !support::supports(&shared, Precision::F64) {
        return;
    }
    let open = |hide_shader_f64| {
        gpu_actor::GpuDevice::open(&gpu_actor::DeviceOptions {
            pass_precision_check: true,
            hide_shader_f64,
            ..gpu_actor::DeviceOptions::default()
        })
        .expect("the device opens")
    };
    let (with_f64, without_f64) = (open(false), open(true));
    let (model, fit) = regression("regression_scale");
    let random = (0..N_CHAINS).map(|c| ChainSpec::new(ChainId(c))).collect();
    let mut request = request(&model, random);
    request.settings.num_warmup = 150;
    request.settings.num_draws = 150;
    let sample = |device: &gpu_actor::GpuDevice, request: &GpuSampleRequest| {
        let counted = Counted::default();
        let result = gpu_actor::sample_on_device_with(
            device,
            request,
            &gpu_actor::KernelOverrides::default(),
            &counted,
        );
        let sampling = counted.sampling.load(std::sync::atomic::Ordering::Relaxed);
        (result, sampling)
    };
    let restarted = |request: &GpuSampleRequest, symptom: &str| {
        let (result, sampling) = sample(&with_f64, request);
        let run = result.expect("the GPU run");
        eprintln!("{}", run.precision);
        assert_eq!(run.precision.precision, Precision::F64, "{}", run.precision);
        assert!(
            run.precision.reason.contains(symptom)
                && run.precision.reason.ends_with("restarted in f64"),
            "{}",
            run.precision
        );
        assert_eq!(sampling, u64::from(N_CHAINS) * request.settings.num_draws);
        run.traces
    };

    let traces = restarted(&request, "f32 warmup's step sizes");
    let cpu = crate::support::cpu_traces(&request);
    assert_means_match("regression_scale", &cpu, &traces);
    let (refused, sampling) = sample(&without_f64, &request);
    let error = refused.expect_err("refused");
    eprintln!("{error}");
    assert!(error.model_unsupported(), "{error}");
    assert!(
        error.to_string().contains("f32 warmup's step sizes"),
        "{error}"
    );
    assert_eq!(sampling, 0);

    request.chains = chains_near(fit);
    request.settings.num_warmup = 50;
    request.settings.num_draws = 20;
    restarted(&request, "first point");
    for device in [with_f64, without_f64] {
        device.shutdown().expect("the device shuts down");
    }
}
