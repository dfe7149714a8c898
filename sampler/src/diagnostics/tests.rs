//! Tests of the convergence diagnostics: ArviZ 0.23 goldens and hand-checkable cases.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::*;

/// Written by `scripts/diagnostics_golden.py` with ArviZ 0.23.4.
const GOLDEN_JSON: &str = include_str!("golden.json");

/// The diagnostics reproduce ArviZ's arithmetic closely; the brief asks for 1e-6.
const RELATIVE_TOLERANCE: f64 = 1e-9;
/// numpy's and scipy's own arithmetic is reproduced operation by operation for these.
const TIGHT_RELATIVE_TOLERANCE: f64 = 1e-14;

#[derive(Deserialize)]
struct Golden {
    versions: BTreeMap<String, String>,
    cases: Vec<GoldenCase>,
    quantiles: Vec<QuantileCase>,
    inv_normal_cdf: Vec<(f64, Value)>,
    ebfmi: Vec<EbfmiCase>,
}

#[derive(Deserialize)]
struct GoldenCase {
    name: String,
    chains: Vec<Vec<f64>>,
    expected: BTreeMap<String, Value>,
    arviz_summary: Option<BTreeMap<String, Value>>,
}

#[derive(Deserialize)]
struct QuantileCase {
    values: Vec<f64>,
    q: Vec<f64>,
    expected: Vec<Value>,
}

#[derive(Deserialize)]
struct EbfmiCase {
    energy: Vec<f64>,
    expected: Value,
}

fn golden() -> Golden {
    serde_json::from_str(GOLDEN_JSON).expect("golden.json parses")
}

/// The generator writes NaN as null and infinities as strings.
fn number(value: &Value) -> f64 {
    match value {
        Value::Null => f64::NAN,
        Value::String(text) if text == "inf" => f64::INFINITY,
        Value::String(text) if text == "-inf" => f64::NEG_INFINITY,
        other => other.as_f64().expect("golden value is a number"),
    }
}

fn close(actual: f64, expected: f64, relative_tolerance: f64) -> bool {
    if expected.is_nan() || actual.is_nan() {
        return expected.is_nan() && actual.is_nan();
    }
    if expected.is_infinite() || actual.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= relative_tolerance * expected.abs()
}

/// Collects every mismatch so one run shows all of them.
#[derive(Default)]
struct Mismatches {
    lines: Vec<String>,
    n_checked: usize,
    worst_relative_error: f64,
}

impl Mismatches {
    fn check(&mut self, what: &str, actual: f64, expected: f64, relative_tolerance: f64) {
        self.n_checked += 1;
        if expected.is_finite() && actual.is_finite() && expected != 0.0 {
            let relative_error = ((actual - expected) / expected).abs();
            self.worst_relative_error = self.worst_relative_error.max(relative_error);
        }
        if !close(actual, expected, relative_tolerance) {
            self.lines
                .push(format!("{what}: got {actual:e}, ArviZ {expected:e}"));
        }
    }

    fn assert_none(&self) {
        println!(
            "{} values checked, worst relative error {:e}",
            self.n_checked, self.worst_relative_error
        );
        assert!(
            self.lines.is_empty(),
            "{} mismatches:\n{}",
            self.lines.len(),
            self.lines.join("\n")
        );
    }
}

fn as_slices(chains: &[Vec<f64>]) -> Vec<&[f64]> {
    chains.iter().map(Vec::as_slice).collect()
}

#[test]
fn golden_file_records_arviz_023() {
    let golden = golden();
    assert!(
        golden.versions["arviz"].starts_with("0.23."),
        "{:?}",
        golden.versions
    );
    assert!(golden.cases.len() >= 10);
}

/// Every per-quantity diagnostic has this signature.
type Diagnostic = fn(&[&[f64]]) -> f64;

#[test]
fn every_function_matches_arviz_on_golden_cases() {
    let functions: [(&str, Diagnostic); 8] = [
        ("rhat", rhat),
        ("rhat_bulk", rhat_bulk),
        ("rhat_tail", rhat_tail),
        ("ess_bulk", ess_bulk),
        ("ess_tail", ess_tail),
        ("ess_mean", ess_mean),
        ("mcse_mean", mcse_mean),
        ("mcse_sd", mcse_sd),
    ];
    let mut mismatches = Mismatches::default();
    for case in golden().cases {
        let chains = as_slices(&case.chains);
        for (name, function) in functions {
            let expected = number(&case.expected[name]);
            mismatches.check(
                &format!("{} {name}", case.name),
                function(&chains),
                expected,
                RELATIVE_TOLERANCE,
            );
        }
    }
    mismatches.assert_none();
}

#[test]
fn summarize_matches_arviz_and_numpy_on_golden_cases() {
    let mut mismatches = Mismatches::default();
    for case in golden().cases {
        let summary = summarize(&as_slices(&case.chains));
        let fields = [
            // A mean near zero is a difference of large sums: relative to itself it is looser.
            ("mean", summary.mean, 1e-12),
            ("sd", summary.sd, 1e-12),
            ("q5", summary.q5, TIGHT_RELATIVE_TOLERANCE),
            ("q50", summary.q50, TIGHT_RELATIVE_TOLERANCE),
            ("q95", summary.q95, TIGHT_RELATIVE_TOLERANCE),
            ("mcse_mean", summary.mcse_mean, RELATIVE_TOLERANCE),
            ("mcse_sd", summary.mcse_sd, RELATIVE_TOLERANCE),
            ("ess_bulk", summary.ess_bulk, RELATIVE_TOLERANCE),
            ("ess_tail", summary.ess_tail, RELATIVE_TOLERANCE),
            ("rhat", summary.rhat, RELATIVE_TOLERANCE),
        ];
        for (name, actual, tolerance) in fields {
            let expected = number(&case.expected[name]);
            mismatches.check(
                &format!("{} {name}", case.name),
                actual,
                expected,
                tolerance,
            );
        }
    }
    mismatches.assert_none();
}

#[test]
fn summarize_matches_arviz_summary_table() {
    let mut mismatches = Mismatches::default();
    let mut n_cases = 0;
    for case in golden().cases {
        let Some(table) = &case.arviz_summary else {
            continue;
        };
        n_cases += 1;
        let summary = summarize(&as_slices(&case.chains));
        let fields = [
            ("mcse_mean", summary.mcse_mean),
            ("mcse_sd", summary.mcse_sd),
            ("ess_bulk", summary.ess_bulk),
            ("ess_tail", summary.ess_tail),
            ("r_hat", summary.rhat),
        ];
        for (name, actual) in fields {
            let what = format!("{} {name}", case.name);
            mismatches.check(&what, actual, number(&table[name]), RELATIVE_TOLERANCE);
        }
    }
    assert!(n_cases >= 8);
    mismatches.assert_none();
}

#[test]
fn quantile_matches_numpy() {
    let mut mismatches = Mismatches::default();
    for case in golden().quantiles {
        for (&q, expected) in case.q.iter().zip(&case.expected) {
            let what = format!("quantile({:?}, {q})", case.values);
            mismatches.check(
                &what,
                quantile(&case.values, q),
                number(expected),
                TIGHT_RELATIVE_TOLERANCE,
            );
        }
    }
    mismatches.assert_none();
}

#[test]
fn inv_normal_cdf_matches_scipy_norm_ppf() {
    let mut mismatches = Mismatches::default();
    for (p, expected) in golden().inv_normal_cdf {
        mismatches.check(
            &format!("inv_normal_cdf({p:e})"),
            inv_normal_cdf(p),
            number(&expected),
            1e-15,
        );
    }
    mismatches.assert_none();
}

#[test]
fn ebfmi_matches_arviz_bfmi() {
    let mut mismatches = Mismatches::default();
    for (index, case) in golden().ebfmi.iter().enumerate() {
        mismatches.check(
            &format!("ebfmi case {index}"),
            ebfmi(&case.energy),
            number(&case.expected),
            1e-12,
        );
    }
    mismatches.assert_none();
}

/// SplitMix64 driving AS 241: a reproducible stream of standard normal draws without a crate.
struct NormalStream {
    state: u64,
}

impl NormalStream {
    fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // 53 random bits, shifted off zero so the quantile stays finite.
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn next_normal(&mut self) -> f64 {
        inv_normal_cdf(self.next_uniform())
    }

    fn chains(&mut self, n_chains: usize, n_draws: usize) -> Vec<Vec<f64>> {
        (0..n_chains)
            .map(|_| (0..n_draws).map(|_| self.next_normal()).collect())
            .collect()
    }
}

#[test]
fn ess_of_independent_draws_is_near_the_number_of_draws() {
    let chains = NormalStream::new(7).chains(4, 1000);
    let chains = as_slices(&chains);
    for (name, ess) in [
        ("bulk", ess_bulk(&chains)),
        ("tail", ess_tail(&chains)),
        ("mean", ess_mean(&chains)),
    ] {
        assert!(
            (3200.0..4800.0).contains(&ess),
            "{name} ESS {ess} for 4000 iid draws"
        );
    }
    let rhat_value = rhat(&chains);
    assert!((rhat_value - 1.0).abs() < 0.01, "R-hat {rhat_value}");
}

#[test]
fn rhat_of_identical_chains_is_near_one() {
    let chain: Vec<f64> = NormalStream::new(11).chains(1, 800).remove(0);
    let chains = [chain.as_slice(); 4];
    for value in [rhat(&chains), rhat_bulk(&chains), rhat_tail(&chains)] {
        assert!((value - 1.0).abs() < 0.01, "R-hat {value}");
    }
}

#[test]
fn shifted_chain_raises_rhat() {
    let mut chains = NormalStream::new(13).chains(4, 500);
    chains[2].iter_mut().for_each(|x| *x += 2.0);
    let value = rhat(&as_slices(&chains));
    assert!(value > 1.2, "R-hat {value}");
}

#[test]
fn autocorrelated_chains_have_small_ess() {
    let mut stream = NormalStream::new(17);
    let phi: f64 = 0.9;
    let chains: Vec<Vec<f64>> = (0..4)
        .map(|_| {
            let mut x = stream.next_normal();
            (0..2000)
                .map(|_| {
                    x = phi * x + (1.0 - phi * phi).sqrt() * stream.next_normal();
                    x
                })
                .collect()
        })
        .collect();
    // An AR(1) chain has ESS/S = (1 − φ)/(1 + φ) ≈ 0.053 for φ = 0.9.
    let relative_ess = ess_mean(&as_slices(&chains)) / 8000.0;
    assert!(
        (0.035..0.075).contains(&relative_ess),
        "ESS/S {relative_ess}"
    );
}

#[test]
fn split_rhat_by_hand() {
    // Means 1.5 and 3.5, variances 0.5: W = 0.5, B = 2 · 2 = 4, R-hat = sqrt((8 + 1) / 2).
    let value = split_rhat(&[&[1.0, 2.0], &[3.0, 4.0]]);
    assert!((value - 4.5_f64.sqrt()).abs() < 1e-15, "{value}");
}

#[test]
fn constant_draws_give_nan_rhat_and_full_ess_like_arviz() {
    let chain = [2.5; 10];
    let chains = [&chain[..]; 3];
    assert!(rhat(&chains).is_nan());
    assert!(rhat_bulk(&chains).is_nan());
    assert!(rhat_tail(&chains).is_nan());
    // ArviZ returns the number of split draws for a constant sample.
    assert_eq!(ess_bulk(&chains), 30.0);
    assert_eq!(ess_tail(&chains), 30.0);
    assert_eq!(ess_mean(&chains), 30.0);
    assert_eq!(mcse_mean(&chains), 0.0);
    assert!(mcse_sd(&chains).is_nan());
    let summary = summarize(&chains);
    assert_eq!((summary.mean, summary.sd, summary.q50), (2.5, 0.0, 2.5));
    assert!(summary.rhat.is_nan() && summary.mcse_sd.is_nan());
}

#[test]
fn odd_length_chains_drop_the_middle_draw_when_split() {
    // A wild middle draw must not change any split-chain quantity except through the quantiles
    // and the pooled moments, which use every draw.
    let mut chains = NormalStream::new(19).chains(3, 101);
    let before = (rhat(&as_slices(&chains)), ess_bulk(&as_slices(&chains)));
    chains[1][50] = 0.123;
    let after = (rhat(&as_slices(&chains)), ess_bulk(&as_slices(&chains)));
    assert_eq!(before, after);
}

#[test]
fn folded_scores_from_merge_equal_a_direct_sort() {
    // Ties on both sides of the median and at equal distances from it.
    let draws: Vec<f64> = (0..200)
        .map(|i| ((i * 37 % 23) as f64 - 11.0) / 4.0)
        .collect();
    let split: Vec<&[f64]> = draws.chunks(50).collect();
    let ranked = RankedSplitDraws::new(&split);
    let mut merged_scores = vec![0.0; draws.len()];
    ranked.write_folded_scores(&mut merged_scores);

    let median = ranked.median();
    let mut folded: Vec<(f64, usize)> = draws
        .iter()
        .enumerate()
        .map(|(i, x)| ((x - median).abs(), i))
        .collect();
    folded.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut sorted_scores = vec![0.0; draws.len()];
    write_normal_scores(folded.into_iter(), &mut sorted_scores);
    assert_eq!(merged_scores, sorted_scores);
}

#[test]
fn many_chains_stay_consistent() {
    let chains = NormalStream::new(23).chains(2048, 50);
    let chains = as_slices(&chains);
    let summary = summarize(&chains);
    let n_total = 2048.0 * 50.0;
    assert!(
        (summary.ess_bulk / n_total - 1.0).abs() < 0.1,
        "{summary:?}"
    );
    assert!((summary.rhat - 1.0).abs() < 0.01, "{summary:?}");
    assert_eq!(summary.ess_bulk, ess_bulk(&chains));
    assert_eq!(summary.ess_tail, ess_tail(&chains));
    assert_eq!(summary.rhat, rhat(&chains));
    assert_eq!(summary.mcse_sd, mcse_sd(&chains));
}

#[test]
fn degenerate_input_gives_nan_without_panicking() {
    let one_chain = [1.0, 2.0, 3.0, 4.0, 5.0];
    let short = [1.0, 2.0, 3.0];
    let with_nan = [1.0, f64::NAN, 3.0, 4.0];
    let with_infinity = [1.0, f64::INFINITY, 3.0, 4.0];
    let empty: [f64; 0] = [];
    let inputs: [&[&[f64]]; 8] = [
        &[],
        &[&empty],
        &[&empty, &empty],
        &[&short, &short],
        &[&one_chain, &short],
        &[&with_nan, &one_chain[..4]],
        &[&with_infinity, &one_chain[..4]],
        &[&one_chain],
    ];
    for (index, chains) in inputs.iter().enumerate() {
        let summary = summarize(chains);
        assert!(rhat(chains).is_nan(), "input {index}");
        assert!(
            rhat_bulk(chains).is_nan() && rhat_tail(chains).is_nan(),
            "input {index}"
        );
        assert!(summary.rhat.is_nan(), "input {index}");
        if index < 7 {
            for value in [
                ess_bulk(chains),
                ess_tail(chains),
                ess_mean(chains),
                mcse_mean(chains),
                mcse_sd(chains),
                summary.ess_bulk,
                summary.ess_tail,
                summary.mcse_mean,
                summary.mcse_sd,
            ] {
                assert!(value.is_nan(), "input {index}");
            }
        }
    }
    // One chain of 5 draws is enough for ESS, not for R-hat.
    assert!(ess_bulk(&[&one_chain]).is_finite());
    // Descriptive statistics use the draws as they are, like numpy.
    assert!(summarize(&[&with_nan, &short]).mean.is_nan());
    assert_eq!(summarize(&[&short]).q50, 2.0);
    assert!(summarize(&[]).mean.is_nan());
}

#[test]
fn quantile_edge_cases() {
    assert!(quantile(&[], 0.5).is_nan());
    assert!(quantile(&[1.0, f64::NAN], 0.5).is_nan());
    assert!(quantile(&[1.0, 2.0], 1.5).is_nan());
    assert!(quantile(&[1.0, 2.0], f64::NAN).is_nan());
    assert_eq!(quantile(&[4.0], 0.3), 4.0);
    assert_eq!(quantile(&[3.0, 1.0, 2.0, 4.0], 0.5), 2.5);
    assert_eq!(quantile(&[3.0, 1.0, 2.0, 4.0], 0.0), 1.0);
    assert_eq!(quantile(&[3.0, 1.0, 2.0, 4.0], 1.0), 4.0);
}

#[test]
fn ebfmi_edge_cases() {
    assert!(ebfmi(&[]).is_nan());
    assert!(ebfmi(&[1.0]).is_nan());
    assert!(ebfmi(&[1.0, f64::INFINITY, 2.0]).is_nan());
    assert!(ebfmi(&[3.0, 3.0, 3.0]).is_nan());
    // Alternating ±1: squared jumps 4, variance 4/3 for four values, so E-BFMI = 3.
    assert!((ebfmi(&[1.0, -1.0, 1.0, -1.0]) - 3.0).abs() < 1e-15);
}

#[test]
fn inv_normal_cdf_known_values_and_limits() {
    assert_eq!(inv_normal_cdf(0.5), 0.0);
    assert!((inv_normal_cdf(0.975) - 1.959_963_984_540_054).abs() < 1e-15);
    assert_eq!(inv_normal_cdf(0.0), f64::NEG_INFINITY);
    assert_eq!(inv_normal_cdf(1.0), f64::INFINITY);
    assert!(inv_normal_cdf(-0.1).is_nan() && inv_normal_cdf(1.1).is_nan());
    assert!(inv_normal_cdf(f64::NAN).is_nan());
    // Symmetry, up to the rounding of 1 − p.
    for p in [0.01, 0.2, 0.4, 0.45] {
        let sum = inv_normal_cdf(p) + inv_normal_cdf(1.0 - p);
        assert!(sum.abs() < 1e-13, "p = {p}: {sum:e}");
    }
}
