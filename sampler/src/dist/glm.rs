//! The GLM likelihoods (Bernoulli-logit, binomial-logit, Poisson-log of observed counts against
//! a vector of parameter-dependent linear predictors) as straight loops over blocks of four
//! lanes, compiled for AVX2 when the CPU has it and for the baseline otherwise.
//!
//! Both builds give the same bits: the code fixes the order of every addition (four lane
//! accumulators, summed pairwise at the end) and uses no fused multiply-add, so the instruction
//! set changes the speed only.

use crate::special::{exp_bounded, ln_1p_unit};

/// Lanes per block.
const LANES: usize = 4;

/// Which GLM likelihood, with its per-observation trial counts for the binomial.
#[derive(Clone, Copy, Debug)]
pub(super) enum Glm<'a> {
    /// `y ~ Bernoulli(logistic(η))`.
    BernoulliLogit,
    /// `y ~ Binomial(n, logistic(η))`, `n` one per observation or broadcast (stride 0).
    BinomialLogit { trials: &'a [f64], stride: usize },
    /// `y ~ Poisson(exp(η))`.
    PoissonLog,
}

/// `Σ_i log p(y_i | η_i)` up to a constant, adding `∂/∂η_i` to `grad[i]`. The slices have the
/// same length.
pub(super) fn likelihood(glm: Glm, y: &[f64], eta: &[f64], grad: &mut [f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { likelihood_avx2(glm, y, eta, grad) };
    }
    likelihood_body(glm, y, eta, grad)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn likelihood_avx2(glm: Glm, y: &[f64], eta: &[f64], grad: &mut [f64]) -> f64 {
    likelihood_body(glm, y, eta, grad)
}

#[inline(always)]
fn likelihood_body(glm: Glm, y: &[f64], eta: &[f64], grad: &mut [f64]) -> f64 {
    match glm {
        Glm::BernoulliLogit => blocks(y, eta, grad, |_, y, eta| {
            let (softplus, logistic) = softplus_logistic(eta);
            (y * eta - softplus, y - logistic)
        }),
        Glm::BinomialLogit { trials, stride } => blocks(y, eta, grad, |i, y, eta| {
            let n = trials[i * stride];
            let (softplus, logistic) = softplus_logistic(eta);
            (y * eta - n * softplus, y - n * logistic)
        }),
        Glm::PoissonLog => blocks(y, eta, grad, |_, y, eta| {
            let rate = exp_bounded(eta);
            (y * eta - rate, y - rate)
        }),
    }
}

/// Sums the first output of `term(i, y_i, η_i)` over `i` in four lane accumulators and adds
/// its second output to `grad[i]`.
#[inline(always)]
fn blocks(
    y: &[f64],
    eta: &[f64],
    grad: &mut [f64],
    term: impl Fn(usize, f64, f64) -> (f64, f64),
) -> f64 {
    let n = y.len().min(eta.len()).min(grad.len());
    let (y, eta, grad) = (&y[..n], &eta[..n], &mut grad[..n]);
    let full = n - n % LANES;
    let mut lanes = [0.0; LANES];
    for (block, ((y, eta), grad)) in y[..full]
        .chunks_exact(LANES)
        .zip(eta[..full].chunks_exact(LANES))
        .zip(grad[..full].chunks_exact_mut(LANES))
        .enumerate()
    {
        let mut value = [0.0; LANES];
        let mut slope = [0.0; LANES];
        for k in 0..LANES {
            (value[k], slope[k]) = term(block * LANES + k, y[k], eta[k]);
        }
        for k in 0..LANES {
            lanes[k] += value[k];
            grad[k] += slope[k];
        }
    }
    let mut total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for i in full..n {
        let (value, slope) = term(i, y[i], eta[i]);
        total += value;
        grad[i] += slope;
    }
    total
}

/// `softplus(η)` and `logistic(η)` from one exponential, without overflow or branches.
#[inline(always)]
fn softplus_logistic(eta: f64) -> (f64, f64) {
    let e = exp_bounded(-eta.abs());
    let inv = 1.0 / (1.0 + e);
    let logistic = if eta >= 0.0 { inv } else { e * inv };
    (eta.max(0.0) + ln_1p_unit(e), logistic)
}
