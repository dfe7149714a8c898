//! Convergence diagnostics for MCMC draws: rank-normalised split R-hat, bulk/tail/mean ESS,
//! Monte Carlo standard errors and E-BFMI, computed exactly as ArviZ 0.23 computes them.
//!
//! Reference: A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner (2021),
//! "Rank-normalization, folding, and localization: an improved R-hat for assessing convergence
//! of MCMC", Bayesian Analysis 16(2), 667–718 (doi:10.1214/20-BA1221), referred to as "the
//! paper" below. Every function follows the ArviZ 0.23 function named in its documentation
//! (`arviz/stats/diagnostics.py`); `sampler/src/diagnostics/golden.json`, produced by
//! `scripts/diagnostics_golden.py`, holds ArviZ's values and the tests compare against them.
//!
//! Definitions, for M chains of N draws each:
//! - Split chains: every chain becomes its first `N / 2` and its last `N / 2` draws, so an odd
//!   `N` drops the middle draw (ArviZ `_split_chains`; the paper, section 4.1).
//! - Rank normalisation: pooled split draws get average ranks r (ties share the mean rank) and
//!   become z = Φ⁻¹((r − 3/8) / (S + 1/4)), S the number of split draws (Blom's offset; ArviZ
//!   `_z_scale`; the paper, eq. 14).
//! - R-hat of split chains: sqrt((B/W + n − 1) / n), n draws per split chain, B = n · variance of
//!   the chain means, W = mean of the chain variances, both with ddof = 1 (ArviZ `_rhat`; the
//!   paper, eqs. 3–4).
//! - Bulk R-hat: R-hat of the rank-normalised split draws. Tail R-hat: R-hat of the
//!   rank-normalised |x − median| ("folded"), the median taken over the split draws. R-hat is
//!   Python's `max(bulk, tail)` (ArviZ `_rhat_rank`; the paper, section 4.2).
//! - ESS: Geyer's initial positive sequence over pairs of lags, then his initial monotone
//!   sequence, τ = −1 + 2 Σ ρ̂ plus the first unpaired even lag, τ ≥ 1/log10(S), ESS = S/τ
//!   (ArviZ `_ess`; the paper, eqs. 10–11 and section 3.2). Autocovariances use the biased 1/n
//!   estimator, as ArviZ's FFT does, but are summed directly, a few lags per pass over the
//!   draws, only as far as Geyer's rule goes (they equal the FFT values to rounding).
//! - Bulk ESS: ESS of the rank-normalised split draws (ArviZ `_ess_bulk`). Tail ESS: the
//!   smaller ESS of the split indicators I[x ≤ q₀.₀₅] and I[x ≤ q₀.₉₅], quantiles by scipy's
//!   `mquantiles(alphap=1, betap=1)` over all draws (ArviZ `_ess_tail`; the paper, section 4.3).
//!   Mean ESS: ESS of the split draws themselves (ArviZ `_ess_mean`).
//! - MCSE of the mean: sd / sqrt(mean ESS), sd over all draws with ddof = 1 (ArviZ
//!   `_mcse_mean`). MCSE of the sd: with c = (x − mean)², sqrt((mean(c²) − mean(c)²) /
//!   ESS_mean(c) / mean(c) / 4), the delta method (ArviZ `_mcse_sd`).
//! - E-BFMI: mean of squared successive energy differences over the energy variance (ddof = 1)
//!   (ArviZ `bfmi`; Betancourt 2016, arXiv:1604.00695).
//!
//! Edge cases follow ArviZ, with one deliberate exception: a non-finite draw gives NaN for every
//! diagnostic (ArviZ checks only NaN, so rank-based values of draws holding ±inf come out
//! finite there). Fewer than 4 draws per chain, chains of different lengths, or no chains give
//! NaN; R-hat needs at least 2 chains. Constant draws give NaN R-hat but, as in ArviZ, an ESS
//! equal to the number of split draws (ArviZ treats a range below 1e-15 as constant), MCSE of the
//! mean 0 and MCSE of the sd NaN. No input panics.

pub mod known;
pub mod truth;

/// ArviZ's `_not_valid(min_draws=4)`: fewer draws per chain than this give NaN.
const MIN_DRAWS_PER_CHAIN: usize = 4;
/// R-hat compares chains, so ArviZ wants two before splitting.
const MIN_CHAINS_FOR_RHAT: usize = 2;
/// ESS works on split chains, so one chain is enough.
const MIN_CHAINS_FOR_ESS: usize = 1;
/// `np.finfo(float).resolution`: ArviZ's `_ess` calls a sample with a smaller range constant.
const CONSTANT_RANGE: f64 = 1e-15;
/// Blom's fractional offset c in (r − c) / (S − 2c + 1).
const BLOM_OFFSET: f64 = 3.0 / 8.0;
/// Tail ESS looks at these two quantiles.
const TAIL_PROBABILITIES: [f64; 2] = [0.05, 0.95];

/// Everything the summary table shows for one scalar quantity over several chains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub mean: f64,
    pub sd: f64,
    pub q5: f64,
    pub q50: f64,
    pub q95: f64,
    pub mcse_mean: f64,
    pub mcse_sd: f64,
    pub ess_bulk: f64,
    pub ess_tail: f64,
    pub rhat: f64,
}

/// Rank-normalised split R-hat, `max(bulk, tail)` (ArviZ `rhat(method="rank")`).
///
/// Python's `max` is kept: when the tail R-hat is NaN but the bulk one is not, the bulk one is
/// returned (e.g. draws of ±1 whose folded values are all equal).
pub fn rhat(chains: &[&[f64]]) -> f64 {
    let Some(split) = validated_split_chains(chains, MIN_CHAINS_FOR_RHAT) else {
        return f64::NAN;
    };
    let ranked = RankedSplitDraws::new(&split);
    let mut scores = vec![0.0; ranked.n_draws()];
    ranked.write_bulk_scores(&mut scores);
    let rhat_bulk = split_rhat(&layout_chains(&scores, ranked.draws_per_split_chain));
    ranked.write_folded_scores(&mut scores);
    let rhat_tail = split_rhat(&layout_chains(&scores, ranked.draws_per_split_chain));
    python_max(rhat_bulk, rhat_tail)
}

/// R-hat of the rank-normalised split draws (ArviZ `rhat(method="z_scale")`).
pub fn rhat_bulk(chains: &[&[f64]]) -> f64 {
    let write_scores = RankedSplitDraws::write_bulk_scores;
    of_rank_normalised(chains, MIN_CHAINS_FOR_RHAT, write_scores, split_rhat)
}

/// R-hat of the rank-normalised folded split draws |x − median| (ArviZ `rhat(method="folded")`).
pub fn rhat_tail(chains: &[&[f64]]) -> f64 {
    let write_scores = RankedSplitDraws::write_folded_scores;
    of_rank_normalised(chains, MIN_CHAINS_FOR_RHAT, write_scores, split_rhat)
}

/// ESS of the rank-normalised split draws (ArviZ `ess(method="bulk")`).
pub fn ess_bulk(chains: &[&[f64]]) -> f64 {
    let write_scores = RankedSplitDraws::write_bulk_scores;
    of_rank_normalised(chains, MIN_CHAINS_FOR_ESS, write_scores, |split| {
        split_ess(split, |z| z)
    })
}

/// Smaller ESS of the indicators I[x ≤ q₀.₀₅] and I[x ≤ q₀.₉₅] (ArviZ `ess(method="tail")`).
///
/// Both indicators use `≤`, as ArviZ and posterior do; with ties at q₀.₉₅ this differs from
/// the paper's I[x ≥ q₀.₉₅] only through the tied draws.
pub fn ess_tail(chains: &[&[f64]]) -> f64 {
    let Some(split) = validated_split_chains(chains, MIN_CHAINS_FOR_ESS) else {
        return f64::NAN;
    };
    let mut pooled = pooled_draws(chains);
    let n_total = pooled.len();
    let quantiles = TAIL_PROBABILITIES.map(|probability| {
        scipy_type7_quantile(n_total, probability, |k| order_statistic(&mut pooled, k))
    });
    tail_ess_from_quantiles(&split, quantiles)
}

/// ESS of the split draws themselves, not rank-normalised (ArviZ `ess(method="mean")`).
pub fn ess_mean(chains: &[&[f64]]) -> f64 {
    let Some(split) = validated_split_chains(chains, MIN_CHAINS_FOR_ESS) else {
        return f64::NAN;
    };
    split_ess(&split, |x| x)
}

/// Monte Carlo standard error of the mean: sd (ddof = 1) / sqrt(mean ESS) (ArviZ
/// `mcse(method="mean")`).
pub fn mcse_mean(chains: &[&[f64]]) -> f64 {
    let Some(split) = validated_split_chains(chains, MIN_CHAINS_FOR_ESS) else {
        return f64::NAN;
    };
    let (_, sd) = pooled_mean_and_sd(chains);
    sd / split_ess(&split, |x| x).sqrt()
}

/// Monte Carlo standard error of the sd by the delta method (ArviZ `mcse(method="sd")`).
pub fn mcse_sd(chains: &[&[f64]]) -> f64 {
    let Some(split) = validated_split_chains(chains, MIN_CHAINS_FOR_ESS) else {
        return f64::NAN;
    };
    let (mean, _) = pooled_mean_and_sd(chains);
    mcse_sd_given_mean(chains, &split, mean)
}

/// Quantile with numpy's default method ("linear", Hyndman–Fan type 7), including numpy's
/// interpolation formula. The input need not be sorted. NaN for empty input, a NaN value, or
/// `q` outside [0, 1].
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() || !(0.0..=1.0).contains(&q) || values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let mut scratch = values.to_vec();
    let n_values = scratch.len();
    numpy_linear_quantile(n_values, q, |k| order_statistic(&mut scratch, k))
}

/// Energy Bayesian fraction of missing information of one chain: mean((E_t − E_{t−1})²) /
/// variance(E) with ddof = 1 (ArviZ `bfmi`). NaN for fewer than 2 or non-finite energies.
pub fn ebfmi(energy: &[f64]) -> f64 {
    if energy.len() < 2 || energy.iter().any(|e| !e.is_finite()) {
        return f64::NAN;
    }
    let n_differences = (energy.len() - 1) as f64;
    let squared_jumps: f64 = energy
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).powi(2))
        .sum();
    (squared_jumps / n_differences) / variance(energy, 1)
}

/// Standard normal quantile Φ⁻¹(p), Wichura's algorithm AS 241 (PPND16, Applied Statistics 37,
/// 1988), relative error about 1e-16. Gives −inf at 0, +inf at 1 and NaN outside [0, 1].
pub fn inv_normal_cdf(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * polynomial(&ppnd16::A, r) / polynomial(&ppnd16::B, r);
    }
    // Tails: work with the smaller of p and 1 − p, then restore the sign.
    let tail_probability = if q < 0.0 { p } else { 1.0 - p };
    let r = (-tail_probability.ln()).sqrt();
    let magnitude = if r <= 5.0 {
        let r = r - 1.6;
        polynomial(&ppnd16::C, r) / polynomial(&ppnd16::D, r)
    } else {
        let r = r - 5.0;
        polynomial(&ppnd16::E, r) / polynomial(&ppnd16::F, r)
    };
    if q < 0.0 { -magnitude } else { magnitude }
}

/// Mean, sd, quantiles and every diagnostic of one quantity, sharing the sorting work.
///
/// mean, sd (ddof = 1) and the 5/50/95% quantiles (numpy's default method) are over all draws
/// pooled and are given for any non-empty input; the diagnostics are NaN where the single
/// functions would be.
pub fn summarize(chains: &[&[f64]]) -> Summary {
    let (mean, sd) = pooled_mean_and_sd(chains);
    let split = validated_split_chains(chains, MIN_CHAINS_FOR_ESS);
    let ranked = split.as_deref().map(RankedSplitDraws::new);
    let ascending = match &ranked {
        Some(ranked) => ranked.pooled_ascending(chains),
        // No diagnostics for this input, but its draws can still be described.
        None => {
            let mut ascending = pooled_draws(chains);
            ascending.sort_unstable_by(f64::total_cmp);
            ascending
        }
    };
    let [q5, q50, q95] = descriptive_quantiles(&ascending);
    let mut summary = Summary {
        mean,
        sd,
        q5,
        q50,
        q95,
        mcse_mean: f64::NAN,
        mcse_sd: f64::NAN,
        ess_bulk: f64::NAN,
        ess_tail: f64::NAN,
        rhat: f64::NAN,
    };
    let (Some(split), Some(ranked)) = (split, ranked) else {
        return summary;
    };

    let tail_quantiles = TAIL_PROBABILITIES
        .map(|probability| scipy_type7_quantile(ascending.len(), probability, |k| ascending[k]));
    summary.ess_tail = tail_ess_from_quantiles(&split, tail_quantiles);
    drop(ascending);
    summary.mcse_mean = sd / split_ess(&split, |x| x).sqrt();
    summary.mcse_sd = mcse_sd_given_mean(chains, &split, mean);

    let mut scores = vec![0.0; ranked.n_draws()];
    ranked.write_bulk_scores(&mut scores);
    let score_chains = layout_chains(&scores, ranked.draws_per_split_chain);
    summary.ess_bulk = split_ess(&score_chains, |z| z);
    if chains.len() >= MIN_CHAINS_FOR_RHAT {
        let rhat_bulk = split_rhat(&score_chains);
        ranked.write_folded_scores(&mut scores);
        let folded_chains = layout_chains(&scores, ranked.draws_per_split_chain);
        summary.rhat = python_max(rhat_bulk, split_rhat(&folded_chains));
    }
    summary
}

/// numpy's 5%, 50% and 95% quantiles of ascending draws; NaN for no draws or a NaN draw.
fn descriptive_quantiles(ascending: &[f64]) -> [f64; 3] {
    let has_nan = ascending.iter().any(|x| x.is_nan());
    [0.05, 0.5, 0.95].map(|q| {
        if has_nan {
            f64::NAN
        } else {
            numpy_linear_quantile(ascending.len(), q, |k| ascending[k])
        }
    })
}

/// The split chains if the input is usable: at least `min_chains` chains, all of one length of
/// at least [`MIN_DRAWS_PER_CHAIN`], every draw finite.
fn validated_split_chains<'a>(chains: &[&'a [f64]], min_chains: usize) -> Option<Vec<&'a [f64]>> {
    let n_draws = chains.first()?.len();
    let usable = chains.len() >= min_chains
        && n_draws >= MIN_DRAWS_PER_CHAIN
        && chains
            .iter()
            .all(|chain| chain.len() == n_draws && chain.iter().all(|x| x.is_finite()));
    if !usable {
        return None;
    }
    // ArviZ `_split_chains`: `ary[:, :half]` and `ary[:, -half:]`, dropping an odd middle draw.
    let half = n_draws / 2;
    Some(
        chains
            .iter()
            .flat_map(|chain| [&chain[..half], &chain[n_draws - half..]])
            .collect(),
    )
}

/// `statistic` of the split chains after `write_scores` rank-normalises them; NaN unless the
/// input has at least `min_chains` valid chains.
fn of_rank_normalised(
    chains: &[&[f64]],
    min_chains: usize,
    write_scores: fn(&RankedSplitDraws, &mut [f64]),
    statistic: fn(&[&[f64]]) -> f64,
) -> f64 {
    let Some(split) = validated_split_chains(chains, min_chains) else {
        return f64::NAN;
    };
    let ranked = RankedSplitDraws::new(&split);
    let mut scores = vec![0.0; ranked.n_draws()];
    write_scores(&ranked, &mut scores);
    statistic(&layout_chains(&scores, ranked.draws_per_split_chain))
}

/// All draws of all chains, chain after chain.
fn pooled_draws(chains: &[&[f64]]) -> Vec<f64> {
    chains
        .iter()
        .flat_map(|chain| chain.iter().copied())
        .collect()
}

/// Mean and sd (ddof = 1) of all draws pooled, two-pass; NaN where undefined.
fn pooled_mean_and_sd(chains: &[&[f64]]) -> (f64, f64) {
    let n_total: usize = chains.iter().map(|chain| chain.len()).sum();
    if n_total == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mean = refined_mean(chains, |x| x);
    let squared_deviations: f64 = chains
        .iter()
        .map(|chain| chain.iter().map(|x| (x - mean).powi(2)).sum::<f64>())
        .sum();
    let sd = if n_total > 1 {
        (squared_deviations / (n_total - 1) as f64).sqrt()
    } else {
        f64::NAN
    };
    (mean, sd)
}

/// Mean of `transform(x)` over every draw: the plain mean, then the mean of the residuals
/// added back. The second pass recovers the digits that a large common offset (draws near 1e6)
/// costs a plain sum; between-chain variances of such draws depend on them. Summing chain by
/// chain keeps the error small for tens of millions of draws too.
fn refined_mean(chains: &[&[f64]], transform: impl Fn(f64) -> f64 + Copy) -> f64 {
    let n_total = chains.iter().map(|chain| chain.len()).sum::<usize>() as f64;
    let sum_over = |shift: f64| -> f64 {
        chains
            .iter()
            .map(|chain| chain.iter().map(|&x| transform(x) - shift).sum::<f64>())
            .sum()
    };
    let rough_mean = sum_over(0.0) / n_total;
    rough_mean + sum_over(rough_mean) / n_total
}

/// Two-pass variance with `ddof` degrees of freedom removed, like `np.var`.
fn variance(values: &[f64], ddof: usize) -> f64 {
    if values.len() <= ddof {
        return f64::NAN;
    }
    let mean = refined_mean(&[values], |x| x);
    values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (values.len() - ddof) as f64
}

/// Python's `max(a, b)`: `a` unless `b > a`, so a NaN `b` is ignored but a NaN `a` is kept.
fn python_max(a: f64, b: f64) -> f64 {
    if b > a { b } else { a }
}

/// Cuts a flat buffer laid out split chain after split chain back into chains.
fn layout_chains(flat: &[f64], draws_per_chain: usize) -> Vec<&[f64]> {
    flat.chunks_exact(draws_per_chain.max(1)).collect()
}

/// The k-th smallest value (0-based) of `values`, which is reordered; O(n).
fn order_statistic(values: &mut [f64], k: usize) -> f64 {
    if k >= values.len() {
        return f64::NAN;
    }
    *values.select_nth_unstable_by(k, f64::total_cmp).1
}

/// numpy's `quantile(method="linear")` of `n_values` values given their order statistics:
/// virtual index (n − 1)q, then numpy's `_lerp`, which interpolates from the nearer end.
fn numpy_linear_quantile(
    n_values: usize,
    q: f64,
    mut kth_smallest: impl FnMut(usize) -> f64,
) -> f64 {
    let Some(last) = n_values.checked_sub(1) else {
        return f64::NAN;
    };
    let virtual_index = last as f64 * q;
    let (below, above, gamma) = if virtual_index >= last as f64 {
        // numpy marks the index as −1 here and measures gamma from it; only ±inf notices.
        (last, last, virtual_index + 1.0)
    } else {
        let floor = virtual_index.floor();
        (floor as usize, floor as usize + 1, virtual_index - floor)
    };
    let (a, b) = (kth_smallest(below), kth_smallest(above));
    let difference = b - a;
    if gamma >= 0.5 {
        b - difference * (1.0 - gamma)
    } else {
        a + difference * gamma
    }
}

/// scipy's `mquantiles(alphap=1, betap=1)`, which ArviZ uses for the tail-ESS quantiles. The
/// same type-7 quantile as numpy's, but interpolated as (1 − γ)x_k + γx_{k+1}, which rounds
/// differently, and whether a draw equals the quantile decides its indicator.
fn scipy_type7_quantile(
    n_values: usize,
    p: f64,
    mut kth_smallest: impl FnMut(usize) -> f64,
) -> f64 {
    match n_values {
        0 => return f64::NAN,
        1 => return kth_smallest(0),
        _ => {}
    }
    // m = alphap + p (1 − alphap − betap) with alphap = betap = 1, i.e. 1 − p (bit for bit).
    let m = 1.0 - p;
    let aleph = n_values as f64 * p + m;
    let k = aleph.clamp(1.0, (n_values - 1) as f64).floor();
    let gamma = (aleph - k).clamp(0.0, 1.0);
    let k = k as usize;
    (1.0 - gamma) * kth_smallest(k - 1) + gamma * kth_smallest(k)
}

/// Python's `min` of the ESS of the split indicators I[x ≤ q] for the two tail quantiles.
fn tail_ess_from_quantiles(split: &[&[f64]], quantiles: [f64; 2]) -> f64 {
    let [low, high] = quantiles.map(|q| split_ess(split, move |x| if x <= q { 1.0 } else { 0.0 }));
    // Python's `min(low, high)`: `low` unless `high < low`.
    if high < low { high } else { low }
}

/// ArviZ `_mcse_sd`: delta method on c = (x − mean)², with ESS_mean of the split c.
fn mcse_sd_given_mean(chains: &[&[f64]], split: &[&[f64]], mean: f64) -> f64 {
    let squared_deviation = move |x: f64| (x - mean) * (x - mean);
    let n_total = chains.iter().map(|chain| chain.len()).sum::<usize>() as f64;
    let mut sum_c = 0.0;
    let mut sum_c_squared = 0.0;
    for chain in chains {
        let (chain_c, chain_c_squared) = chain.iter().fold((0.0, 0.0), |(s, s2), &x| {
            let c = squared_deviation(x);
            (s + c, s2 + c * c)
        });
        sum_c += chain_c;
        sum_c_squared += chain_c_squared;
    }
    let expected_variance = sum_c / n_total;
    let ess = split_ess(split, squared_deviation);
    let variance_of_variance = (sum_c_squared / n_total - expected_variance.powi(2)) / ess;
    (variance_of_variance / expected_variance / 4.0).sqrt()
}

/// Split draws sorted once, to rank-normalise both the draws and their folded values.
struct RankedSplitDraws {
    /// Every split draw in ascending order with its index in the split layout (split chain after
    /// split chain, `draws_per_split_chain` each).
    ascending: Vec<(f64, usize)>,
    draws_per_split_chain: usize,
}

impl RankedSplitDraws {
    /// Sorts the split draws: the one O(S log S) step of the rank-based diagnostics.
    fn new(split: &[&[f64]]) -> Self {
        let draws_per_split_chain = split.first().map_or(0, |chain| chain.len());
        let mut ascending: Vec<(f64, usize)> = split
            .iter()
            .flat_map(|chain| chain.iter().copied())
            .enumerate()
            .map(|(position, value)| (value, position))
            .collect();
        ascending.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        Self {
            ascending,
            draws_per_split_chain,
        }
    }

    fn n_draws(&self) -> usize {
        self.ascending.len()
    }

    /// Every draw of `chains` in ascending order. The split draws are sorted already; only the
    /// middle draws that an odd chain length leaves out need sorting and merging in.
    fn pooled_ascending(&self, chains: &[&[f64]]) -> Vec<f64> {
        let mut middle_draws: Vec<f64> = chains
            .iter()
            .filter(|chain| chain.len() % 2 == 1)
            .map(|chain| chain[chain.len() / 2])
            .collect();
        middle_draws.sort_unstable_by(f64::total_cmp);
        let mut middle_draws = middle_draws.into_iter().peekable();
        let mut ascending = Vec::with_capacity(self.ascending.len() + middle_draws.len());
        for &(value, _) in &self.ascending {
            while let Some(middle) = middle_draws.next_if(|middle| middle.total_cmp(&value).is_lt())
            {
                ascending.push(middle);
            }
            ascending.push(value);
        }
        ascending.extend(middle_draws);
        ascending
    }

    /// Rank-normalised split draws (ArviZ `_z_scale(_split_chains(ary))`), by layout position.
    fn write_bulk_scores(&self, scores: &mut [f64]) {
        write_normal_scores(self.ascending.iter().copied(), scores);
    }

    /// Rank-normalised |x − median| of the split draws, by layout position.
    ///
    /// Below the median |x − median| grows walking left through the sorted draws and above it
    /// grows walking right (rounded subtraction is monotone), so merging the two walks yields the
    /// folded values in ascending order without sorting again.
    fn write_folded_scores(&self, scores: &mut [f64]) {
        let median = self.median();
        let n_below = self.ascending.partition_point(|&(value, _)| value < median);
        let (below, above) = self.ascending.split_at(n_below);
        let fold = move |&(value, position): &(f64, usize)| ((value - median).abs(), position);
        let mut below = below.iter().rev().map(fold).peekable();
        let mut above = above.iter().map(fold).peekable();
        let merged = std::iter::from_fn(move || match (below.peek(), above.peek()) {
            (Some(left), Some(right)) if left.0 <= right.0 => below.next(),
            (Some(_), None) => below.next(),
            _ => above.next(),
        });
        write_normal_scores(merged, scores);
    }

    /// `np.median` of the split draws: the mean of the two middle values for an even count.
    fn median(&self) -> f64 {
        let n = self.ascending.len();
        match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => self.ascending[n / 2].0,
            _ => (self.ascending[n / 2 - 1].0 + self.ascending[n / 2].0) / 2.0,
        }
    }
}

/// Writes Φ⁻¹((r − 3/8) / (S + 1/4)) for every value of an ascending `(value, position)` stream
/// into `scores[position]`, r the average rank of the value's ties (scipy `rankdata(method=
/// "average")`) and S = `scores.len()`.
fn write_normal_scores(ascending: impl Iterator<Item = (f64, usize)>, scores: &mut [f64]) {
    let denominator = scores.len() as f64 - 2.0 * BLOM_OFFSET + 1.0;
    let mut tied_positions: Vec<usize> = Vec::new();
    let mut tied_value = f64::NAN;
    let mut n_ranked = 0;
    for (value, position) in ascending {
        if value != tied_value {
            n_ranked = score_ties(&mut tied_positions, n_ranked, denominator, scores);
            tied_value = value;
        }
        tied_positions.push(position);
    }
    score_ties(&mut tied_positions, n_ranked, denominator, scores);
}

/// Gives one run of tied values ranks `n_ranked + 1 ..= n_ranked + len` averaged, scores them,
/// empties the run and returns the new number of ranked values.
fn score_ties(
    tied_positions: &mut Vec<usize>,
    n_ranked: usize,
    denominator: f64,
    scores: &mut [f64],
) -> usize {
    if tied_positions.is_empty() {
        return n_ranked;
    }
    let n_tied = tied_positions.len();
    let average_rank = (2 * n_ranked + n_tied + 1) as f64 / 2.0;
    let score = inv_normal_cdf((average_rank - BLOM_OFFSET) / denominator);
    for &position in tied_positions.iter() {
        if let Some(slot) = scores.get_mut(position) {
            *slot = score;
        }
    }
    tied_positions.clear();
    n_ranked + n_tied
}

/// ArviZ `_rhat` of chains of equal length (already split): the paper's eqs. 3–4.
fn split_rhat(chains: &[&[f64]]) -> f64 {
    let n_draws = chains.first().map_or(0, |chain| chain.len()) as f64;
    let chain_means: Vec<f64> = chains
        .iter()
        .map(|chain| refined_mean(&[chain], |x| x))
        .collect();
    let chain_variances: Vec<f64> = chains.iter().map(|chain| variance(chain, 1)).collect();
    let between_chain_variance = n_draws * variance(&chain_means, 1);
    let within_chain_variance = chain_variances.iter().sum::<f64>() / chain_variances.len() as f64;
    ((between_chain_variance / within_chain_variance + n_draws - 1.0) / n_draws).sqrt()
}

/// ArviZ `_ess` of `transform(x)` for split chains of equal length (at least 2 draws).
///
/// `transform` is applied on the fly, so indicators and squared deviations need no buffer.
/// The autocovariance of lag t, averaged over chains, is summed directly and only for the lags
/// Geyer's initial positive sequence visits ([`LazyAutocovariance`]), instead of ArviZ's FFT over
/// every lag; the values agree to rounding.
fn split_ess(chains: &[&[f64]], transform: impl Fn(f64) -> f64 + Copy) -> f64 {
    let n_chain = chains.len();
    let n_draw = chains.first().map_or(0, |chain| chain.len());
    if n_chain == 0 || n_draw < 2 {
        return f64::NAN;
    }
    let total_draws = (n_chain * n_draw) as f64;
    let (min, max) = chains
        .iter()
        .flat_map(|chain| chain.iter())
        .map(|&x| transform(x))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
            (lo.min(y), hi.max(y))
        });
    if max - min < CONSTANT_RANGE {
        return total_draws;
    }

    let n = n_draw as f64;
    let chain_means: Vec<f64> = chains
        .iter()
        .map(|chain| refined_mean(&[chain], transform))
        .collect();
    let mut autocovariance = LazyAutocovariance::new(chains, &chain_means, transform);
    let mean_var = autocovariance.at(0) * n / (n - 1.0);
    let mut var_plus = mean_var * (n - 1.0) / n;
    if n_chain > 1 {
        var_plus += variance(&chain_means, 1);
    }
    let mut rho_hat = |lag: usize| 1.0 - (mean_var - autocovariance.at(lag)) / var_plus;

    // Names and indices as in ArviZ `_ess`, which follows Stan's implementation.
    let mut rho_hat_t = vec![0.0; n_draw];
    let mut rho_hat_even = 1.0;
    rho_hat_t[0] = rho_hat_even;
    let mut rho_hat_odd = rho_hat(1);
    rho_hat_t[1] = rho_hat_odd;

    // Geyer's initial positive sequence: keep pairs of lags while their sum is positive.
    let mut t = 1;
    while t + 3 < n_draw && rho_hat_even + rho_hat_odd > 0.0 {
        rho_hat_even = rho_hat(t + 1);
        rho_hat_odd = rho_hat(t + 2);
        if rho_hat_even + rho_hat_odd >= 0.0 {
            rho_hat_t[t + 1] = rho_hat_even;
            rho_hat_t[t + 2] = rho_hat_odd;
        }
        t += 2;
    }
    // ArviZ's `max_t = t - 2` may be −1; `first_unpaired` is `max_t + 1`, never negative.
    let first_unpaired = t - 1;
    // The paper's improved estimate also counts the first even lag after the last kept pair.
    if rho_hat_even > 0.0 {
        rho_hat_t[first_unpaired] = rho_hat_even;
    }

    // Geyer's initial monotone sequence: pair sums may not grow.
    let mut t = 1;
    while t + 3 <= first_unpaired {
        let previous_pair = rho_hat_t[t - 1] + rho_hat_t[t];
        if rho_hat_t[t + 1] + rho_hat_t[t + 2] > previous_pair {
            rho_hat_t[t + 1] = previous_pair / 2.0;
            rho_hat_t[t + 2] = rho_hat_t[t + 1];
        }
        t += 2;
    }

    let paired_sum: f64 = rho_hat_t[..first_unpaired].iter().sum();
    let tau_hat = -1.0 + 2.0 * paired_sum + rho_hat_t[first_unpaired];
    // Caps ESS at S log10(S) for antithetic chains (python `max(tau_hat, 1 / log10(S))`).
    let tau_hat = python_max(tau_hat, 1.0 / total_draws.log10());
    if rho_hat_t.iter().any(|rho| rho.is_nan()) {
        return f64::NAN;
    }
    total_draws / tau_hat
}

/// Lags computed per pass over the draws. Re-reading every draw for each lag is bound by memory
/// bandwidth; a block of lags reuses each chain while it sits in cache, at the price of at most
/// `LAG_BLOCK - 1` lags that Geyer's rule turns out not to need.
const LAG_BLOCK: usize = 8;

/// The biased (1/n) autocovariance of `transform(x)`, averaged over chains, for lags computed on
/// demand, a block of [`LAG_BLOCK`] lags per pass, only as far as the caller asks.
struct LazyAutocovariance<'a, Transform> {
    chains: &'a [&'a [f64]],
    chain_means: &'a [f64],
    transform: Transform,
    /// Mean autocovariance for lags `0..by_lag.len()`.
    by_lag: Vec<f64>,
    /// One chain's centred, transformed draws, reused from chain to chain.
    centred: Vec<f64>,
}

impl<'a, Transform: Fn(f64) -> f64 + Copy> LazyAutocovariance<'a, Transform> {
    fn new(chains: &'a [&'a [f64]], chain_means: &'a [f64], transform: Transform) -> Self {
        Self {
            chains,
            chain_means,
            transform,
            by_lag: Vec::new(),
            centred: Vec::new(),
        }
    }

    /// Mean autocovariance at `lag`; 0 past the chain length, as ArviZ's zero-padded FFT gives.
    fn at(&mut self, lag: usize) -> f64 {
        let n_draw = self.chains.first().map_or(0, |chain| chain.len());
        if lag >= n_draw {
            return 0.0;
        }
        while self.by_lag.len() <= lag {
            self.compute_next_block(n_draw);
        }
        self.by_lag[lag]
    }

    fn compute_next_block(&mut self, n_draw: usize) {
        let first_lag = self.by_lag.len();
        let end_lag = (first_lag + LAG_BLOCK).min(n_draw);
        let mut sums = [0.0; LAG_BLOCK];
        for (chain, &mean) in self.chains.iter().zip(self.chain_means) {
            self.centred.clear();
            self.centred
                .extend(chain.iter().map(|&x| (self.transform)(x) - mean));
            for (sum, lag) in sums.iter_mut().zip(first_lag..end_lag) {
                *sum += lagged_dot(&self.centred, lag);
            }
        }
        // The biased estimator divides by the chain length whatever the lag, like ArviZ's FFT.
        let (n, n_chain) = (n_draw as f64, self.chains.len() as f64);
        for sum in &sums[..end_lag - first_lag] {
            self.by_lag.push(sum / n / n_chain);
        }
    }
}

/// Σ_i c_i c_{i+lag} over one chain of centred draws c.
fn lagged_dot(centred: &[f64], lag: usize) -> f64 {
    let Some(n_pairs) = centred.len().checked_sub(lag) else {
        return 0.0;
    };
    let leading = centred[..n_pairs].chunks_exact(4);
    let lagged = centred[lag..].chunks_exact(4);
    let remainder: f64 = leading
        .remainder()
        .iter()
        .zip(lagged.remainder())
        .map(|(a, b)| a * b)
        .sum();
    // Four independent running sums: one sum is bound by the latency of addition, and this loop
    // is where ESS spends its time.
    let mut partial_sums = [0.0; 4];
    for (a, b) in leading.zip(lagged) {
        for lane in 0..4 {
            partial_sums[lane] += a[lane] * b[lane];
        }
    }
    (partial_sums[0] + partial_sums[1]) + (partial_sums[2] + partial_sums[3]) + remainder
}

/// Evaluates Σ coefficients[i] xⁱ by Horner's rule.
fn polynomial(coefficients: &[f64; 8], x: f64) -> f64 {
    coefficients.iter().rev().fold(0.0, |acc, &c| acc * x + c)
}

/// Coefficients of Wichura's AS 241 (PPND16), constant term first, with the published digits
/// kept verbatim so they can be checked against the paper. A/B: |p − 0.5| ≤ 0.425;
/// C/D: r = sqrt(−ln min(p, 1 − p)) ≤ 5; E/F: beyond.
// Laid out like the published table, two to a row.
#[allow(clippy::excessive_precision)]
#[rustfmt::skip]
mod ppnd16 {
    pub(super) const A: [f64; 8] = [
          3.3871328727963666080e0,  1.3314166789178437745e+2,
         1.9715909503065514427e+3,  1.3731693765509461125e+4,
         4.5921953931549871457e+4,  6.7265770927008700853e+4,
         3.3430575583588128105e+4,  2.5090809287301226727e+3,
    ];
    pub(super) const B: [f64; 8] = [
                              1.0,  4.2313330701600911252e+1,
         6.8718700749205790830e+2,  5.3941960214247511077e+3,
         2.1213794301586595867e+4,  3.9307895800092710610e+4,
         2.8729085735721942674e+4,  5.2264952788528545610e+3,
    ];
    pub(super) const C: [f64; 8] = [
         1.42343711074968357734e0,  4.63033784615654529590e0,
         5.76949722146069140550e0,  3.64784832476320460504e0,
         1.27045825245236838258e0, 2.41780725177450611770e-1,
        2.27238449892691845833e-2, 7.74545014278341407640e-4,
    ];
    pub(super) const D: [f64; 8] = [
                              1.0,  2.05319162663775882187e0,
         1.67638483018380384940e0, 6.89767334985100004550e-1,
        1.48103976427480074590e-1, 1.51986665636164571966e-2,
        5.47593808499534494600e-4, 1.05075007164441684324e-9,
    ];
    pub(super) const E: [f64; 8] = [
         6.65790464350110377720e0,  5.46378491116411436990e0,
         1.78482653991729133580e0, 2.96560571828504891230e-1,
        2.65321895265761230930e-2, 1.24266094738807843860e-3,
        2.71155556874348757815e-5, 2.01033439929228813265e-7,
    ];
    pub(super) const F: [f64; 8] = [
                              1.0, 5.99832206555887937690e-1,
        1.36929880922735805310e-1, 1.48753612908506148525e-2,
        7.86869131145613259100e-4, 1.84631831751005468180e-5,
        1.42151175831644588870e-7, 2.04426310338993978564e-15,
    ];
}

#[cfg(test)]
mod tests;
