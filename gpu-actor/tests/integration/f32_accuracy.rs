//! f32 on ill-conditioned linear regressions (issue 25): `y ~ normal(alpha + beta * x,
//! sigma)` with flat priors and predictors far from zero, whose posterior correlation between
//! `alpha` and `beta` is near -1. At points of the typical set, the f32 kernel's log density
//! and gradient are compared with the f64 CPU evaluator in the units NUTS feels:
//! * the log density as a difference from its value at the least-squares fit (an energy
//!   error, in nats: a constant offset changes nothing);
//! * the gradient whitened by the posterior's scale, `L' (g_gpu - g_cpu)` with `L L'` the
//!   posterior covariance (the Laplace approximation, computed here in f64), so that an error
//!   of 1 is as large as the gradient itself is in the typical set, in any direction, the
//!   narrow one across the ridge as well as the long one along it.
//!
//! The plain parity tests (`parity.rs`) scale errors by the magnitudes of the terms, which
//! here are thousands of times the whitened gradient: they pass where these fail.
//!
//! The tolerances sit between what compensated sums give (`wgsl/tape.rs`'s `Sum`,
//! `shaders/interp.wgsl`) and what plain f32 sums gave on lavapipe (bench/journal.md,
//! 2026-11-29): `ridge`'s gradient and `ridge_long`'s log density fail with plain sums on one
//! invocation per chain. Where the kernel cannot do better they only bound what is left:
//! `scale`'s log density (-1e4) is returned in f32, whose rounding there is 1e-3 nats, and
//! `ridge_far`'s `alpha + beta * x` rounds `beta * x = 2e4` per element, an error as large
//! as the f32 rounding of the point itself (the sampler's positions are f32 as well).

use gpu_actor::wgsl::{GENERATED_STORAGE_MAX_INSTS, PRIVATE_TAPE_LEN_THRESHOLD};
use gpu_actor::{LogpGradRequest, Precision, TapePlacement};
use sampler::{ChainId, ChainRng, CheckedModel, Constraint, Dist, Limits, ModelBuilder, Seed};

use crate::support::{self, reference};

/// Points of the typical set per case (and the fit itself).
const N_POINTS: usize = 32;

/// One data set: `x ~ normal(x_mean, x_sd)`, `y = alpha + beta x + normal(0, sigma)`.
struct Case {
    name: &'static str,
    n: usize,
    x_mean: f64,
    x_sd: f64,
    alpha: f64,
    beta: f64,
    sigma: f64,
    /// Largest whitened gradient error and log density difference error (nats) accepted.
    grad_tolerance: f64,
    lp_tolerance: f64,
}

/// The cases: as `earnings` (predictor at a scale of tens, coefficients of thousands), as
/// `kilpisjarvi` (years as the predictor: correlation -0.99999), and one with a predictor
/// 2000 standard deviations from zero; and a long one, whose errors are those of its sums.
const CASES: [Case; 4] = [
    Case {
        name: "scale",
        n: 1000,
        x_mean: 66.0,
        x_sd: 3.8,
        alpha: -6e4,
        beta: 1300.0,
        sigma: 19000.0,
        grad_tolerance: 2e-4,
        lp_tolerance: 4e-3,
    },
    Case {
        name: "ridge",
        n: 100,
        x_mean: 1000.0,
        x_sd: 4.5,
        alpha: -30.0,
        beta: 0.25,
        sigma: 1.0,
        grad_tolerance: 1.5e-4,
        lp_tolerance: 1e-3,
    },
    Case {
        name: "ridge_far",
        n: 1000,
        x_mean: 1e4,
        x_sd: 5.0,
        alpha: -2e4,
        beta: 2.0,
        sigma: 1.0,
        grad_tolerance: 1e-2,
        lp_tolerance: 1e-1,
    },
    Case {
        name: "ridge_long",
        n: 3000,
        x_mean: 1000.0,
        x_sd: 4.5,
        alpha: -30.0,
        beta: 0.25,
        sigma: 1.0,
        grad_tolerance: 1e-3,
        lp_tolerance: 2.5e-3,
    },
];

/// The model, its data and the Laplace approximation of its posterior on the unconstrained
/// scale `(alpha, beta, log sigma)`: the mode and a Cholesky factor of the covariance.
struct Regression {
    model: CheckedModel,
    mode: [f64; 3],
    /// Lower triangular, row-major.
    chol: [[f64; 3]; 3],
}

fn regression(case: &Case) -> Regression {
    let mut rng = ChainRng::new(Seed(25), ChainId(0));
    let x: Vec<f64> = (0..case.n)
        .map(|_| case.x_mean + case.x_sd * rng.normal())
        .collect();
    let y: Vec<f64> = x
        .iter()
        .map(|x| case.alpha + case.beta * x + case.sigma * rng.normal())
        .collect();
    // Least squares on centred x, in f64.
    let n = case.n as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = x.iter().zip(&y).map(|(x, y)| (x - mx) * (y - my)).sum();
    let beta = sxy / sxx;
    let alpha = my - beta * mx;
    let rss: f64 = x
        .iter()
        .zip(&y)
        .map(|(x, y)| (y - alpha - beta * x).powi(2))
        .sum();
    // With flat priors on alpha, beta and sigma, the density of (alpha, beta, u = log sigma)
    // is sigma^-(n - 1) exp(-Q / 2 sigma^2): its mode has sigma^2 = RSS / (n - 1).
    let s2 = rss / (n - 1.0);
    // Covariance of (alpha, beta): s2 [1/n + mx^2/sxx, -mx/sxx; -mx/sxx, 1/sxx].
    let (vaa, vab, vbb) = (s2 * (1.0 / n + mx * mx / sxx), -s2 * mx / sxx, s2 / sxx);
    let l00 = vaa.sqrt();
    let l10 = vab / l00;
    let l11 = (vbb - l10 * l10).sqrt();
    let mut builder = ModelBuilder::new(case.name);
    let xd = builder.data_vector("x", x);
    let yd = builder.data_vector("y", y);
    let a = builder.param("alpha");
    let b = builder.param("beta");
    let sigma = builder.param_constrained("sigma", Constraint::Positive);
    builder.sample(&yd, Dist::normal(&a + &b * &xd, &sigma));
    let model = CheckedModel::new(builder.build(), &Limits::default()).expect("the model checks");
    Regression {
        model,
        mode: [alpha, beta, 0.5 * s2.ln()],
        chol: [
            [l00, 0.0, 0.0],
            [l10, l11, 0.0],
            [0.0, 0.0, (1.0 / (2.0 * (n - 1.0))).sqrt()],
        ],
    }
}

/// The fit and `N_POINTS` draws of its Laplace approximation, chain after chain, each rounded
/// to f32: the kernel reads its point in f32, and rounding `alpha = -2e4` moves the log
/// density by more than the kernel's own errors (the sampler's positions are f32 too, which
/// no kernel can help).
fn typical_points(regression: &Regression) -> Vec<f64> {
    let mut rng = ChainRng::new(Seed(7), ChainId(1));
    let mut points = regression.mode.to_vec();
    for _ in 0..N_POINTS {
        let z = [rng.normal(), rng.normal(), rng.normal()];
        for r in 0..3 {
            let offset: f64 = (0..3).map(|c| regression.chol[r][c] * z[c]).sum();
            points.push(regression.mode[r] + offset);
        }
    }
    points.iter().map(|&v| f64::from(v as f32)).collect()
}

/// Worst errors over the points: of the log density's difference from the first point, and
/// of the whitened gradient.
#[derive(Clone, Copy, Debug, Default)]
struct Worst {
    lp: f64,
    grad: f64,
}

fn errors(regression: &Regression, points: &[f64], logp: &[f64], grad: &[f64]) -> Worst {
    let program = regression.model.program();
    let cpu: Vec<_> = points
        .chunks(3)
        .map(|theta| reference(program, theta))
        .collect();
    let mut worst = Worst::default();
    for (c, expected) in cpu.iter().enumerate() {
        let lp = (logp[c] - logp[0]) - (expected.lp - cpu[0].lp);
        worst.lp = worst.lp.max(lp.abs());
        let delta: Vec<f64> = (0..3).map(|j| grad[c * 3 + j] - expected.grad[j]).collect();
        // (L' delta)_k = sum_r L[r][k] delta_r
        for k in 0..3 {
            let whitened: f64 = (0..3).map(|r| regression.chol[r][k] * delta[r]).sum();
            worst.grad = worst.grad.max(whitened.abs());
        }
    }
    worst
}

/// The tape placements and lanes to run `program` with (as `parity.rs`).
fn configs(program: &sampler::Program, max_lanes: u32) -> Vec<(TapePlacement, u32)> {
    let mut out = vec![(TapePlacement::Interpreted, 1)];
    if program.insts.len() <= GENERATED_STORAGE_MAX_INSTS {
        out.push((TapePlacement::Storage, 1));
    }
    if program.tape_len <= PRIVATE_TAPE_LEN_THRESHOLD {
        out.push((TapePlacement::Private, 1));
    }
    let mut lanes = vec![2, max_lanes];
    lanes.dedup();
    for lanes in lanes {
        if lanes >= 2 && gpu_actor::wgsl::longest_split(program, lanes).is_ok_and(|len| len > 0) {
            out.push((TapePlacement::Private, lanes));
        }
    }
    out
}

#[test]
fn precision_f32_is_accurate_on_ill_conditioned_regressions() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let report = device.report();
    let max_lanes = if report.features.subgroup {
        report.subgroup_sizes.0.min(gpu_actor::wgsl::MAX_LANES)
    } else {
        1
    };
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for case in &CASES {
        let regression = regression(case);
        let points = typical_points(&regression);
        let key = device
            .upload_model(&regression.model, Precision::F32)
            .wait()
            .expect("upload");
        for (placement, lanes) in configs(regression.model.program(), max_lanes) {
            let batch = device
                .logp_grad(LogpGradRequest {
                    model: key,
                    points: points.clone(),
                    placement: Some(placement),
                    lanes: Some(lanes),
                })
                .wait()
                .expect("logp_grad");
            let worst = errors(&regression, &points, &batch.logp, &batch.grad);
            let label = format!("{} f32 {placement} {lanes} lanes", case.name);
            lines.push(format!(
                "{label:<36} log density difference error {:.2e} nats, whitened gradient error {:.2e}",
                worst.lp, worst.grad
            ));
            if worst.lp > case.lp_tolerance || worst.grad > case.grad_tolerance {
                failures.push(format!(
                    "{label}: log density {:.2e} (tolerance {:.0e}), gradient {:.2e} (tolerance {:.0e})",
                    worst.lp, case.lp_tolerance, worst.grad, case.grad_tolerance
                ));
            }
        }
    }
    eprintln!(
        "f32 on ill-conditioned regressions, {} points each:\n{}",
        N_POINTS + 1,
        lines.join("\n")
    );
    assert!(
        failures.is_empty(),
        "f32 is not accurate enough:\n{}",
        failures.join("\n")
    );
}
