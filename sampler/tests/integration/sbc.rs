//! Simulation-based calibration of the whole sampler, warmup included (Talts, Betancourt,
//! Simpson, Vehtari and Gelman 2018, "Validating Bayesian inference algorithms with
//! simulation-based calibration", arXiv:1804.06788).
//!
//! Each replication draws (mu, sigma) from the prior and y from the likelihood, samples the
//! posterior given y with one short chain, thins the draws to L nearly independent ones and
//! records the rank of the true value among them. If the sampler draws from the posterior, the
//! ranks are uniform on 0..=L (Talts et al., theorem 1); a sampler that is biased, too narrow or
//! too wide makes them pile up at one end, at both ends or in the middle. Uniformity is tested
//! per parameter with a chi-square test on `N_BINS` bins, its p-value computed here. Seeds are
//! fixed, so the p-values are deterministic. The test can fail: the same draws, shifted by 0.2
//! posterior sd or shrunk by 20% about their mean (what a biased or a too narrow sampler
//! would give), must be rejected.

use sampler::{
    AdaptationKind, ChainId, ChainRng, CheckedModel, Constraint, Dist, Limits, MetricKind,
    ModelBuilder, NoObserver, SamplerSettings, Seed, lgamma, sample,
};

/// Independent simulated data sets: a replication is a small model's short run, so many are
/// affordable, and many make the test sensitive to small miscalibration.
const N_REPLICATIONS: usize = 4000;
/// Observations per data set.
const N_OBSERVATIONS: usize = 10;
/// Short, as a user in a hurry would run it: SBC checks warmup too.
const NUM_WARMUP: u64 = 200;
/// Keep every `THINNING`-th draw: NUTS draws of this 2-d posterior are nearly independent
/// at that spacing, and SBC needs independent draws (Talts et al., section 5.1).
const THINNING: usize = 10;
/// L, the kept draws per replication; ranks take the L + 1 = 20 values 0..=19.
const N_KEPT: usize = 19;
/// Chi-square bins: two rank values each, 400 expected counts per bin.
const N_BINS: usize = 10;
/// Ranks below this p-value are not uniform.
const P_VALUE_FLOOR: f64 = 0.001;
/// The first power check: a sampler biased by this many posterior sds...
const BIAS_IN_SDS: f64 = 0.2;
/// ... and the second: a sampler whose draws spread this fraction of the posterior's width.
const NARROWING: f64 = 0.8;
/// Either must give a p-value below this.
const BROKEN_P_VALUE_CEILING: f64 = 1e-6;
/// The random stream of the simulated data, apart from the sampler's stream 0 of the same seed.
const DATA_STREAM: ChainId = ChainId(1_000_000);

/// The parameters, in the order of the model's output columns.
const PARAMETERS: [&str; 2] = ["mu", "sigma"];

/// What one replication contributes.
struct Replication {
    /// Rank of each true parameter among the kept draws.
    ranks: [usize; 2],
    /// Ranks as a sampler biased by `-BIAS_IN_SDS` posterior sds would give them.
    biased_ranks: [usize; 2],
    /// Ranks as a sampler too narrow by the factor `NARROWING` would give them.
    narrow_ranks: [usize; 2],
    divergent: usize,
}

/// Draws (mu, sigma) from the prior and y from the likelihood.
fn simulate(seed: Seed) -> ([f64; 2], Vec<f64>) {
    let mut rng = ChainRng::new(seed, DATA_STREAM);
    let mu = rng.normal();
    let sigma = rng.normal().abs();
    let y = (0..N_OBSERVATIONS)
        .map(|_| mu + sigma * rng.normal())
        .collect();
    ([mu, sigma], y)
}

/// mu ~ N(0, 1), sigma ~ HalfNormal(1) (positive: sampled as log sigma with its Jacobian),
/// y_i ~ N(mu, sigma).
fn model(y: Vec<f64>) -> CheckedModel {
    let mut m = ModelBuilder::new("sbc_normal");
    let y = m.data_vector("y", y);
    let mu = m.param("mu");
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    m.sample(&mu, Dist::normal(0.0, 1.0));
    m.sample(&sigma, Dist::half_normal(1.0));
    m.sample(&y, Dist::normal(&mu, &sigma));
    CheckedModel::new(m.build(), &Limits::default()).expect("the SBC model is valid")
}

fn replicate(settings: &SamplerSettings, seed: Seed) -> Replication {
    let (truth, y) = simulate(seed);
    let model = model(y);
    assert_eq!(
        model
            .columns()
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        PARAMETERS
    );
    let traces = sample(&model, settings, seed, 1, &NoObserver)
        .unwrap_or_else(|err| panic!("SBC replication with seed {}: {err}", seed.0));
    let trace = &traces[0];
    let mut ranks = [0; 2];
    let mut biased_ranks = [0; 2];
    let mut narrow_ranks = [0; 2];
    for (k, &true_value) in truth.iter().enumerate() {
        let draws = trace.column(k);
        let kept: Vec<f64> = draws
            .iter()
            .skip(THINNING - 1)
            .step_by(THINNING)
            .copied()
            .collect();
        assert_eq!(kept.len(), N_KEPT);
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let posterior_sd = (draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
            / (draws.len() - 1) as f64)
            .sqrt();
        ranks[k] = rank(true_value, kept.iter().copied());
        biased_ranks[k] = rank(
            true_value,
            kept.iter().map(|d| d - BIAS_IN_SDS * posterior_sd),
        );
        narrow_ranks[k] = rank(
            true_value,
            kept.iter().map(|d| mean + NARROWING * (d - mean)),
        );
    }
    Replication {
        ranks,
        biased_ranks,
        narrow_ranks,
        divergent: trace.n_divergent(),
    }
}

/// The number of draws below the true value (ties have probability 0).
fn rank(true_value: f64, draws: impl Iterator<Item = f64>) -> usize {
    draws.filter(|&draw| draw < true_value).count()
}

/// Runs every replication, one single-threaded chain each, on one thread per core. The results
/// depend only on the seeds, not on which thread ran what.
fn replicate_all(settings: &SamplerSettings, first_seed: u64) -> Vec<Replication> {
    let settings = SamplerSettings {
        threads: 1,
        ..settings.clone()
    };
    let n_threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let seeds: Vec<Seed> = (0..N_REPLICATIONS as u64)
        .map(|i| Seed(first_seed + i))
        .collect();
    let chunks: Vec<Vec<Replication>> = std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .chunks(N_REPLICATIONS.div_ceil(n_threads))
            .map(|chunk| {
                let settings = &settings;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|&seed| replicate(settings, seed))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("an SBC thread panicked"))
            .collect()
    });
    chunks.into_iter().flatten().collect()
}

/// Chi-square statistic and p-value of the hypothesis that `ranks` (each in 0..=n_kept) are
/// uniform, on `N_BINS` bins of equally many rank values.
fn rank_uniformity(ranks: &[usize], n_kept: usize) -> (f64, f64, [usize; N_BINS]) {
    let n_rank_values = n_kept + 1;
    assert_eq!(
        n_rank_values % N_BINS,
        0,
        "bins must hold equally many rank values"
    );
    let mut counts = [0usize; N_BINS];
    for &rank in ranks {
        counts[rank * N_BINS / n_rank_values] += 1;
    }
    let expected = ranks.len() as f64 / N_BINS as f64;
    let statistic = counts
        .iter()
        .map(|&count| (count as f64 - expected).powi(2) / expected)
        .sum();
    let p_value = chi_square_survival(statistic, (N_BINS - 1) as f64);
    (statistic, p_value, counts)
}

/// P(X > statistic) for X ~ chi-square(degrees_of_freedom): Q(dof/2, statistic/2).
fn chi_square_survival(statistic: f64, degrees_of_freedom: f64) -> f64 {
    regularized_upper_gamma(degrees_of_freedom / 2.0, statistic / 2.0)
}

/// The regularised upper incomplete gamma function Q(a, x) = Γ(a, x)/Γ(a), by the power series
/// of P = 1 − Q below x = a + 1 and by the continued fraction of Q (modified Lentz) above it,
/// where each converges fast (Numerical Recipes, 3rd ed., section 6.2).
fn regularized_upper_gamma(a: f64, x: f64) -> f64 {
    const EPSILON: f64 = 1e-15;
    const TINY: f64 = 1e-300;
    const MAX_TERMS: usize = 1000;
    if x <= 0.0 {
        return 1.0;
    }
    // x^a e^-x / Γ(a), the factor both expansions share.
    let prefactor = (a * x.ln() - x - lgamma(a)).exp();
    if x < a + 1.0 {
        // P(a, x) = prefactor · Σ_n x^n / (a (a+1) ... (a+n)).
        let mut term = 1.0 / a;
        let mut sum = term;
        for n in 1..MAX_TERMS {
            term *= x / (a + n as f64);
            sum += term;
            if term.abs() < sum.abs() * EPSILON {
                break;
            }
        }
        return 1.0 - prefactor * sum;
    }
    // Q(a, x) = prefactor · 1/(x+1−a− 1·(1−a)/(x+3−a− 2·(2−a)/(x+5−a− ...))).
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / TINY;
    let mut d = 1.0 / b;
    let mut fraction = d;
    for i in 1..MAX_TERMS {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < TINY {
            d = TINY;
        }
        c = b + an / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let step = d * c;
        fraction *= step;
        if (step - 1.0).abs() < EPSILON {
            break;
        }
    }
    prefactor * fraction
}

/// Runs SBC under `adaptation` and `metric` and asserts that the ranks of both parameters are
/// uniform, and that the ranks a biased or a too narrow sampler would give are not.
fn check(adaptation: AdaptationKind, metric: MetricKind, first_seed: u64) {
    let settings = SamplerSettings {
        num_warmup: NUM_WARMUP,
        num_draws: (THINNING * N_KEPT) as u64,
        adaptation,
        metric,
        ..SamplerSettings::default()
    };
    let replications = replicate_all(&settings, first_seed);
    let divergent: usize = replications.iter().map(|r| r.divergent).sum();
    let label = format!("{adaptation:?}/{metric:?}");
    println!(
        "SBC {label} (seeds {first_seed}..{}): {N_REPLICATIONS} replications, {divergent} divergent transitions in all",
        first_seed + N_REPLICATIONS as u64
    );
    for (k, parameter) in PARAMETERS.iter().enumerate() {
        let ranks: Vec<usize> = replications.iter().map(|r| r.ranks[k]).collect();
        let (statistic, p_value, counts) = rank_uniformity(&ranks, N_KEPT);
        println!("    {parameter}: chi-square {statistic:.2}, p = {p_value:.4}, bins {counts:?}");
        assert!(
            p_value > P_VALUE_FLOOR,
            "SBC {label}, seeds {first_seed}..: ranks of {parameter} are not uniform: \
             chi-square {statistic:.2} on {} dof, p = {p_value:.2e}, bin counts {counts:?}",
            N_BINS - 1
        );
        // The test can fail: the same replications, as two broken samplers would have drawn
        // them, must be rejected.
        let broken_samplers: [(String, Vec<usize>); 2] = [
            (
                format!("biased by {BIAS_IN_SDS} sd"),
                replications.iter().map(|r| r.biased_ranks[k]).collect(),
            ),
            (
                format!("{NARROWING} times too narrow"),
                replications.iter().map(|r| r.narrow_ranks[k]).collect(),
            ),
        ];
        for (broken, ranks) in broken_samplers {
            let (statistic, p_value, counts) = rank_uniformity(&ranks, N_KEPT);
            println!(
                "    {parameter}, {broken}: chi-square {statistic:.1}, p = {p_value:.2e}, bins {counts:?}"
            );
            assert!(
                p_value < BROKEN_P_VALUE_CEILING,
                "SBC {label}, seeds {first_seed}..: the test does not notice a sampler {broken} \
                 for {parameter}: p = {p_value:.2e}, bin counts {counts:?}"
            );
        }
    }
}

#[test]
fn sbc_stan_adaptation() {
    check(AdaptationKind::Stan, MetricKind::Diag, 10_000);
}

#[test]
fn sbc_nutpie_adaptation() {
    check(AdaptationKind::Nutpie, MetricKind::Diag, 20_000);
}

#[test]
fn sbc_stan_adaptation_dense_metric() {
    check(AdaptationKind::Stan, MetricKind::Dense, 30_000);
}

/// The p-value is right: even degrees of freedom have the closed form
/// Q(k, x) = e^-x Σ_{j<k} x^j / j!, and 9 degrees of freedom the printed table values.
#[test]
fn sbc_chi_square_p_value_matches_closed_forms_and_tables() {
    for k in [1u32, 2, 5, 10] {
        for x in [0.1, 1.0, 3.0, 7.5, 20.0, 60.0] {
            let mut term = 1.0;
            let mut sum = 0.0;
            for j in 0..k {
                if j > 0 {
                    term *= x / f64::from(j);
                }
                sum += term;
            }
            let exact = (-x).exp() * sum;
            let ours = regularized_upper_gamma(f64::from(k), x);
            assert!(
                (ours - exact).abs() <= 1e-12 * exact.max(1e-300) + 1e-15,
                "Q({k}, {x}) = {ours}, exactly {exact}"
            );
        }
    }
    // Chi-square(9) upper quantiles, to the 3 decimals of printed tables.
    for (statistic, p_value) in [(16.919, 0.05), (21.666, 0.01), (27.877, 0.001)] {
        let ours = chi_square_survival(statistic, 9.0);
        assert!(
            (ours / p_value - 1.0).abs() < 2e-4,
            "chi-square(9) survival at {statistic}: {ours}, tables say {p_value}"
        );
    }
}
