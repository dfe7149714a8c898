//! Posterior means and standard deviations from the whole sampler (warmup included) against
//! analytic truth, under Stan's and nutpie's adaptation and the dense metric.
//!
//! An estimate passes when it is within [`Z_TOLERANCE`] Monte Carlo standard errors of the
//! truth, the MCSE of the mean and of the sd computed as in Vehtari, Gelman, Simpson, Carpenter
//! and Bürkner (2021), "Rank-normalization, folding, and localization: an improved R-hat for
//! assessing convergence of MCMC", Bayesian Analysis 16(2) (`mcse_mean`, `mcse_sd`; the
//! comparison is `sampler::diagnostics::truth`). Seeds are fixed, so every run is
//! deterministic; the tolerance keeps each check meaningful: 4 chains of
//! 2,000 draws give 1,000 (ρ = 0.99 under a diagonal metric) to 12,000 effective draws, so 4 MCSE
//! is 0.04 to 0.13 posterior sd (each run prints this resolution), and
//! `posterior_conjugate_normal` shows that the same draws reject a truth off by 0.15 sd.
//!
//! About 750 z-scores are checked; if the sampler and the MCSE estimates were exact, the chance
//! that any |z| exceeds 4 would be about 750 · 6.3e-5 ≈ 5% over seeds. The fixed seeds below
//! pass with max |z| 3.4; a change of seed that fails by a hair is not a bug report, a |z| of 6
//! or more is.

use sampler::diagnostics::known::{self, Known};
use sampler::diagnostics::truth::{Comparison, Truth, compare, disagreements, worst};
use sampler::{
    AdaptationKind, ChainTrace, CheckedModel, Constraint, Dist, Limits, MetricKind, ModelBuilder,
    NoObserver, RunSummary, SamplerSettings, Seed, sample,
};

use crate::common::bench_model;

/// An estimate within this many MCSE of the truth agrees with it.
const Z_TOLERANCE: f64 = 4.0;
/// Chains per run: enough for R-hat and for the split-chain ESS behind the MCSE.
const N_CHAINS: u32 = 4;
const NUM_WARMUP: u64 = 1000;
const NUM_DRAWS: u64 = 2000;

/// A sampler configuration a model is run under.
#[derive(Clone, Copy, Debug)]
struct Config {
    label: &'static str,
    adaptation: AdaptationKind,
    metric: MetricKind,
}

const STAN_DIAG: Config = Config {
    label: "stan/diag",
    adaptation: AdaptationKind::Stan,
    metric: MetricKind::Diag,
};
const NUTPIE_DIAG: Config = Config {
    label: "nutpie/diag",
    adaptation: AdaptationKind::Nutpie,
    metric: MetricKind::Diag,
};
const STAN_DENSE: Config = Config {
    label: "stan/dense",
    adaptation: AdaptationKind::Stan,
    metric: MetricKind::Dense,
};
/// Every configuration the sampler offers (nutpie's adaptation has no dense metric).
const ALL_CONFIGS: [Config; 3] = [STAN_DIAG, NUTPIE_DIAG, STAN_DENSE];

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

fn settings(config: Config) -> SamplerSettings {
    SamplerSettings {
        num_warmup: NUM_WARMUP,
        num_draws: NUM_DRAWS,
        adaptation: config.adaptation,
        metric: config.metric,
        // One per core; the draws do not depend on the thread count.
        threads: 0,
        ..SamplerSettings::default()
    }
}

fn run(model: &CheckedModel, config: Config, seed: Seed) -> Vec<ChainTrace> {
    sample(model, &settings(config), seed, N_CHAINS, &NoObserver)
        .unwrap_or_else(|err| panic!("{} {}: {err}", model.name(), config.label))
}

/// Runs `model` under `config`, compares every truth, prints the comparisons and asserts that
/// all agree. Returns the traces (for further checks) and the largest |z|.
fn check(
    model: &CheckedModel,
    config: Config,
    seed: Seed,
    truths: &[Truth],
) -> (Vec<ChainTrace>, f64) {
    let traces = run(model, config, seed);
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
    println!(
        "{} {} (seed {}): {} checks, max |z| {max_abs_z:.2}, resolution {resolution:.3} sd, {divergent} divergent, {:.1} s of chain time, step sizes {:?}",
        model.name(),
        config.label,
        seed.0,
        comparisons.len(),
        traces
            .iter()
            .map(|t| t.warmup_seconds + t.sampling_seconds)
            .sum::<f64>(),
        traces
            .iter()
            .map(|t| format!("{:.3}", t.tuning.step_size))
            .collect::<Vec<_>>()
    );
    // Print the worst few so that a near miss is visible in passing runs too.
    for comparison in worst(&comparisons, 3) {
        println!("    {comparison}");
    }
    let failures = disagreements(&comparisons, truths, Z_TOLERANCE);
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
    (traces, max_abs_z)
}

fn checked(builder: ModelBuilder) -> CheckedModel {
    CheckedModel::new(builder.build(), &Limits::default()).expect("the test model is valid")
}

/// `known::conjugate_normal`, and the check's power: the same draws reject a wrong truth.
#[test]
fn posterior_conjugate_normal() {
    let Known { model, truths } = known::conjugate_normal();
    let truth = &truths[0];
    let posterior_sd = truth.sd.expect("the conjugate normal's sd is known");
    for (k, config) in ALL_CONFIGS.into_iter().enumerate() {
        let (traces, _) = check(
            &model,
            config,
            Seed(100 + k as u64),
            std::slice::from_ref(truth),
        );
        // The check can fail: the same draws reject a mean off by 0.15 posterior sd and an sd
        // off by 10% (a 1-d normal gives NUTS only ~3,500 effective draws of 8,000, so 4 MCSE
        // is ~0.07 sd and ~5% of the sd here; these errors are twice that).
        let wrong_mean = Truth {
            mean: truth.mean + 0.15 * posterior_sd,
            ..truth.clone()
        };
        let wrong_sd = Truth {
            sd: Some(1.1 * posterior_sd),
            ..truth.clone()
        };
        for wrong in [wrong_mean, wrong_sd] {
            let comparison = compare(&traces, &wrong);
            println!("    deliberately wrong truth: {comparison}");
            assert!(
                !comparison.agrees(Z_TOLERANCE),
                "{}: the check accepts a wrong truth {wrong:?}: {comparison}",
                config.label
            );
        }
    }
}

/// `known::gamma_poisson`: a positive parameter's log-Jacobian.
#[test]
fn posterior_gamma_poisson() {
    let Known { model, truths } = known::gamma_poisson();
    for (k, config) in ALL_CONFIGS.into_iter().enumerate() {
        check(&model, config, Seed(200 + k as u64), &truths);
    }
}

const FUNNEL_DIM: usize = 9;

/// `known::noncentred_funnel`.
#[test]
fn posterior_noncentred_funnel() {
    let Known { model, truths } = known::noncentred_funnel(FUNNEL_DIM);
    for (k, config) in ALL_CONFIGS.into_iter().enumerate() {
        check(&model, config, Seed(300 + k as u64), &truths);
    }
}

/// Neal's funnel, centred (`models/funnel.json`): no NUTS samples its neck, so the estimates are
/// biased and nothing is asserted about them. What must hold is that the run says so: it has
/// divergent transitions, and the run summary warns.
#[test]
fn posterior_centred_funnel_is_flagged() {
    let model = bench_model("funnel");
    for (k, config) in [STAN_DIAG, NUTPIE_DIAG].into_iter().enumerate() {
        let seed = Seed(400 + k as u64);
        let run_settings = settings(config);
        let traces = run(&model, config, seed);
        let y = truth(&model, "y", None, 0.0, Some(3.0));
        let comparison = compare(&traces, &y);
        let summary = RunSummary::new(
            &model.columns(),
            model.program().n_parameter_columns(),
            &traces,
            &run_settings,
        );
        let divergent: usize = summary.chains.iter().map(|c| c.divergent).sum();
        println!(
            "funnel (centred) {} (seed {}): y mean {:.3} (z {:.2}), sd {:.3} (z {:.2}), {divergent} divergent, min E-BFMI {:.2}, min bulk ESS {:.0}\n    warnings: {:?}",
            config.label,
            seed.0,
            comparison.mean,
            comparison.z_mean,
            comparison.sd,
            comparison.z_sd.unwrap_or(f64::NAN),
            summary
                .chains
                .iter()
                .map(|c| c.ebfmi)
                .fold(f64::INFINITY, f64::min),
            summary.min_ess_bulk(),
            summary.warnings
        );
        assert!(
            divergent > 0,
            "{} (seed {}): the centred funnel gave no divergent transition",
            config.label,
            seed.0
        );
        assert!(
            summary.warnings.iter().any(|w| w.contains("divergent")),
            "{} (seed {}): no divergence warning in {:?}",
            config.label,
            seed.0,
            summary.warnings
        );
    }
}

const NORMAL_DIM: usize = 100;

/// `known::standard_normal` in 100 dimensions.
///
/// The dense run is most of this file's time (~30 s of chain time against 0.3 s for a diagonal
/// metric): Stan's first three metric windows hold 25, 50 and 100 draws, no more than the
/// dimension, so their covariance estimates are rank-deficient and warmup iterations 100–450
/// run at the maximum tree depth. That is Stan's algorithm, not a defect, and it tests the
/// dense metric on a covariance that is not close to diagonal during warmup.
#[test]
fn posterior_standard_normal_100d() {
    let Known { model, truths } = known::standard_normal(NORMAL_DIM);
    for (k, config) in ALL_CONFIGS.into_iter().enumerate() {
        check(&model, config, Seed(500 + k as u64), &truths);
    }
}

/// `known::correlated_normal` with correlation 0.99 (hard for a diagonal metric).
#[test]
fn posterior_correlated_normal() {
    let Known { model, truths } = known::correlated_normal(0.99);
    for (k, config) in ALL_CONFIGS.into_iter().enumerate() {
        check(&model, config, Seed(600 + k as u64), &truths);
    }
}

/// One model with four independent parameters, one per remaining constraint, each with a
/// closed-form posterior, so that every transform's log-Jacobian is exercised:
/// - p in (0, 1): p ~ Beta(2, 3), k_i ~ Binomial(5, p) through binomial_logit(log p − log(1 − p)),
///   4 successes in 15 trials: the posterior is Beta(6, 14);
/// - above in (2, ∞): above ~ Exponential(1.5) restricted to > 2, by memorylessness 2 plus an
///   Exponential(1.5);
/// - below in (−∞, 0): below ~ N(0, 1) restricted to < 0, minus a half-normal;
/// - inside in (0, 3): inside ~ Exponential(0.5) truncated to (0, 3).
#[test]
fn posterior_every_constraint() {
    let (prior_alpha, prior_beta, trials) = (2.0, 3.0, 5.0);
    let successes: Vec<i64> = vec![3, 1, 0];
    let alpha = prior_alpha + successes.iter().sum::<i64>() as f64;
    let beta = prior_beta + trials * successes.len() as f64 - (alpha - prior_alpha);
    let (above_bound, above_rate) = (2.0, 1.5);
    let (inside_upper, inside_rate): (f64, f64) = (3.0, 0.5);

    let mut m = ModelBuilder::new("every_constraint");
    let k = m.data_int_vector("k", successes);
    let p = m.param_constrained("p", Constraint::UnitInterval);
    let above = m.param_constrained("above", Constraint::Lower(above_bound));
    let below = m.param_constrained("below", Constraint::Upper(0.0));
    let inside = m.param_constrained(
        "inside",
        Constraint::Interval {
            lower: 0.0,
            upper: inside_upper,
        },
    );
    m.sample(&p, Dist::beta(prior_alpha, prior_beta));
    m.sample(&k, Dist::binomial_logit(trials, p.ln() - (1.0 - &p).ln()));
    m.sample(&above, Dist::exponential(above_rate));
    m.sample(&below, Dist::normal(0.0, 1.0));
    m.sample(&inside, Dist::exponential(inside_rate));
    let model = checked(m);

    let beta_mean = alpha / (alpha + beta);
    let beta_sd = (alpha * beta / ((alpha + beta).powi(2) * (alpha + beta + 1.0))).sqrt();
    let half_normal_mean = (2.0 / std::f64::consts::PI).sqrt();
    let half_normal_sd = (1.0 - 2.0 / std::f64::consts::PI).sqrt();
    // Moments of Exponential(r) truncated to (0, T), with e = exp(−r T):
    // E[x] = (1/r − e (T + 1/r)) / (1 − e), E[x²] = (2/r² − e (T² + 2T/r + 2/r²)) / (1 − e).
    let (r, t) = (inside_rate, inside_upper);
    let e = (-r * t).exp();
    let inside_mean = (1.0 / r - e * (t + 1.0 / r)) / (1.0 - e);
    let inside_second_moment =
        (2.0 / r.powi(2) - e * (t * t + 2.0 * t / r + 2.0 / r.powi(2))) / (1.0 - e);
    let inside_sd = (inside_second_moment - inside_mean.powi(2)).sqrt();
    let truths = [
        truth(&model, "p", None, beta_mean, Some(beta_sd)),
        truth(
            &model,
            "above",
            None,
            above_bound + 1.0 / above_rate,
            Some(1.0 / above_rate),
        ),
        truth(
            &model,
            "below",
            None,
            -half_normal_mean,
            Some(half_normal_sd),
        ),
        truth(&model, "inside", None, inside_mean, Some(inside_sd)),
    ];
    for (k, config) in ALL_CONFIGS.into_iter().enumerate() {
        check(&model, config, Seed(700 + k as u64), &truths);
    }
}

/// IR v2 transforms against closed-form posteriors:
/// - a simplex of K = 4 with no statement is uniform on the simplex (Dirichlet(1, 1, 1, 1)):
///   each element has mean 1/K and variance (K − 1) / (K² (K + 1));
/// - an ordered vector of 3 with a standard normal on each element holds the order statistics
///   of 3 standard normals: means ∓0.846284 and 0, sds 0.747975, 0.669829, 0.747975;
/// - a ∈ (0, 1) and b ∈ (0, a) (an upper bound that is a parameter) with `b ~ uniform(0, a)`:
///   a ~ U(0, 1), b | a ~ U(0, a), so E[b] = 1/4, Var b = 1/9 − 1/16;
/// - the same bounds with no statement: uniform on the triangle 0 < b < a < 1, so
///   a ~ Beta(2, 1) (mean 2/3, sd √(1/18)) and b ~ Beta(1, 2) (mean 1/3, sd √(1/18));
/// - a positive_ordered pair with Exponential(1) on each element: the order statistics of two
///   Exponential(1), min ~ Exponential(2) (mean 1/2, sd 1/2), max with mean 3/2, sd √5/2.
#[test]
fn posterior_v2_transforms() {
    let k: f64 = 4.0;
    let mut m = ModelBuilder::new("v2_transforms");
    m.param_with("simplex", Some(4), Constraint::Simplex);
    let ordered = m.param_with("ordered", Some(3), Constraint::Ordered);
    m.sample(&ordered, Dist::normal(0.0, 1.0));
    let a = m.param_constrained("a", Constraint::UnitInterval);
    let b = m.param_bounded("b", None, Some(0.0.into()), Some(a.clone()));
    m.sample(&b, Dist::uniform(0.0, &a));
    let c = m.param_constrained("c", Constraint::UnitInterval);
    m.param_bounded("d", None, Some(0.0.into()), Some(c));
    let pair = m.param_with("pair", Some(2), Constraint::PositiveOrdered);
    m.sample(&pair, Dist::exponential(1.0));
    let model = checked(m);

    let simplex_sd = ((k - 1.0) / (k * k * (k + 1.0))).sqrt();
    let (extreme_mean, extreme_sd, middle_sd) = (0.846_284_375_3, 0.747_975_403, 0.669_829_161);
    let triangle_sd = (1.0f64 / 18.0).sqrt();
    let mut truths: Vec<Truth> = (0..4)
        .map(|i| truth(&model, "simplex", Some(i), 1.0 / k, Some(simplex_sd)))
        .collect();
    truths.extend([
        truth(&model, "ordered", Some(0), -extreme_mean, Some(extreme_sd)),
        truth(&model, "ordered", Some(1), 0.0, Some(middle_sd)),
        truth(&model, "ordered", Some(2), extreme_mean, Some(extreme_sd)),
        truth(&model, "a", None, 0.5, Some((1.0f64 / 12.0).sqrt())),
        truth(
            &model,
            "b",
            None,
            0.25,
            Some((1.0f64 / 9.0 - 1.0 / 16.0).sqrt()),
        ),
        truth(&model, "c", None, 2.0 / 3.0, Some(triangle_sd)),
        truth(&model, "d", None, 1.0 / 3.0, Some(triangle_sd)),
        truth(&model, "pair", Some(0), 0.5, Some(0.5)),
        truth(&model, "pair", Some(1), 1.5, Some(5.0f64.sqrt() / 2.0)),
    ]);
    for (k, config) in [STAN_DIAG, NUTPIE_DIAG].into_iter().enumerate() {
        check(&model, config, Seed(900 + k as u64), &truths);
    }
}
