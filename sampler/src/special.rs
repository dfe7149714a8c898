//! Special functions in f64: log-gamma, digamma and numerically careful logistic helpers.

/// `ln Γ(x)` for `x > 0`.
pub fn lgamma(x: f64) -> f64 {
    libm::lgamma(x)
}

/// The digamma function `ψ(x) = d/dx ln Γ(x)`.
///
/// Shifts `x` up to at least 10 with `ψ(x) = ψ(x + 1) - 1/x`, then sums the asymptotic series;
/// the series runs to x^-14, so its truncation error there is below 1e-16. Negative non-integers use the reflection formula.
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x <= 0.0 {
        if x == x.floor() {
            return f64::NAN;
        }
        // ψ(1 - x) - ψ(x) = π cot(π x)
        return digamma(1.0 - x) - std::f64::consts::PI / (std::f64::consts::PI * x).tan();
    }
    let mut x = x;
    let mut shift = 0.0;
    while x < 10.0 {
        shift -= 1.0 / x;
        x += 1.0;
    }
    let inv = 1.0 / x;
    let inv2 = inv * inv;
    // Bernoulli-number series: -1/(2x) - Σ B_2k / (2k x^2k)
    let series = inv2
        * (1.0 / 12.0
            - inv2
                * (1.0 / 120.0
                    - inv2
                        * (1.0 / 252.0
                            - inv2
                                * (1.0 / 240.0
                                    - inv2
                                        * (1.0 / 132.0
                                            - inv2 * (691.0 / 32760.0 - inv2 / 12.0))))));
    shift + x.ln() - 0.5 * inv - series
}

/// `ln(sqrt(2 pi))`.
const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;
/// `sqrt(2 pi)`.
const SQRT_2PI: f64 = 2.506_628_274_631_000_7;

/// Chebyshev coefficients of `ln erfc` on `z >= 0` (Numerical Recipes, 3rd ed., `Erf`), with
/// the digits as published (the same in `shaders/special.wgsl`).
#[allow(clippy::excessive_precision)]
const ERFC_COF: [f64; 28] = [
    -1.3026537197817094,
    6.4196979235649026e-1,
    1.9476473204185836e-2,
    -9.561514786808631e-3,
    -9.46595344482036e-4,
    3.66839497852761e-4,
    4.2523324806907e-5,
    -2.0278578112534e-5,
    -1.624290004647e-6,
    1.303655835580e-6,
    1.5626441722e-8,
    -8.5238095915e-8,
    6.529054439e-9,
    5.059343495e-9,
    -9.91364156e-10,
    -2.27365122e-10,
    9.6467911e-11,
    2.394038e-12,
    -6.886027e-12,
    8.94487e-13,
    3.13092e-13,
    -1.12708e-13,
    3.81e-16,
    7.106e-15,
    -1.523e-15,
    -9.4e-17,
    1.21e-16,
    -2.8e-17,
];

/// `c(t)` of `ln erfc(z) = ln t - z^2 + c(t)` for `z >= 0`, `t = 2 / (2 + z)` (Numerical
/// Recipes' `erfccheb`, relative error about 1e-16). `shaders/special.wgsl` has the same
/// recurrence.
fn erfc_correction(t: f64) -> f64 {
    let ty = 4.0 * t - 2.0;
    let (mut d, mut dd) = (0.0, 0.0);
    for &c in ERFC_COF[1..].iter().rev() {
        let tmp = d;
        d = ty * d - dd + c;
        dd = tmp;
    }
    0.5 * (ERFC_COF[0] + ty * d) - dd
}

/// `ln erfc(z)` for `z >= 0`, which never underflows.
pub fn log_erfc_nonnegative(z: f64) -> f64 {
    let t = 2.0 / (2.0 + z);
    t.ln() - z * z + erfc_correction(t)
}

/// `ln Phi(x)`, the log of the standard normal CDF: `ln(erfc(-x / sqrt 2) / 2)` for `x <= 0`
/// and `ln(1 - erfc(x / sqrt 2) / 2)` above, finite in both tails.
pub fn log_phi(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let z = x * std::f64::consts::FRAC_1_SQRT_2;
    if x > 0.0 {
        (-0.5 * log_erfc_nonnegative(z).exp()).ln_1p()
    } else {
        log_erfc_nonnegative(-z) - std::f64::consts::LN_2
    }
}

/// The derivative of [`log_phi`] at `x`, `phi(x) / Phi(x)`, from `log_phi_x = log_phi(x)`.
/// Below 0 the `exp(-x^2 / 2)` of both cancels: `2 / (sqrt(2 pi) t exp(c(t)))` with the `t` and
/// `c` of `erfc(-x / sqrt 2)`, accurate in the far lower tail (where it approaches `-x`).
pub fn log_phi_slope(x: f64, log_phi_x: f64) -> f64 {
    if x > 0.0 {
        return (-0.5 * x * x - LN_SQRT_2PI - log_phi_x).exp();
    }
    let t = 2.0 / (2.0 - x * std::f64::consts::FRAC_1_SQRT_2);
    2.0 / (SQRT_2PI * t * erfc_correction(t).exp())
}

/// `ln(1 + exp(x))` without overflow.
pub fn softplus(x: f64) -> f64 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

/// `1 / (1 + exp(-x))` without overflow.
pub fn logistic(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `e^x` by range reduction and a degree-13 polynomial, written without branches or calls so
/// that loops over it vectorise. Within 2 ulp of `f64::exp` for `-708 <= x <= 709`; outside,
/// `x` is clamped (the result is then about 3e-308 or 8e307 instead of 0 or infinity, which the
/// callers — likelihood terms of a logit or log link — cannot tell apart from the exact value).
#[inline(always)]
pub fn exp_bounded(x: f64) -> f64 {
    const LN2_HI: f64 = 0.693_147_180_369_123_8;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const INV_LN2: f64 = std::f64::consts::LOG2_E;
    // Adding and subtracting 1.5 * 2^52 rounds to the nearest integer without a libm call.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    let x = x.clamp(-708.0, 709.0);
    let shifted = x * INV_LN2 + ROUND;
    let k = shifted - ROUND;
    // The low bits of `shifted` hold k as an integer: the scale 2^k comes from integer
    // operations, which vectorise (a float-to-integer conversion of f64 lanes does not on AVX2).
    let k_int = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Taylor series of e^r for |r| <= ln(2)/2: the first omitted term is below 4e-18.
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    for inv_factorial in [
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + inv_factorial;
    }
    p * f64::from_bits(k_int.wrapping_add(1023) << 52)
}

/// `ln(1 + u)` for `0 <= u <= 1` (for example `u = e^-|x|` in a softplus), without branches or
/// calls so that loops over it vectorise; within 4 ulp of `f64::ln_1p` there (3 seen).
#[inline(always)]
pub fn ln_1p_unit(u: f64) -> f64 {
    // ln(1 + u) = 2 atanh(s) with s = u / (2 + u); above √2 - 1, halve 1 + u first so that
    // |s| <= 0.172 and eleven terms of the series suffice.
    let high = u > std::f64::consts::SQRT_2 - 1.0;
    let s = if high {
        (u - 1.0) / (u + 3.0)
    } else {
        u / (2.0 + u)
    };
    let offset = if high { std::f64::consts::LN_2 } else { 0.0 };
    let s2 = s * s;
    let mut series = 1.0 / 23.0;
    for inv_odd in [
        1.0 / 21.0,
        1.0 / 19.0,
        1.0 / 17.0,
        1.0 / 15.0,
        1.0 / 13.0,
        1.0 / 11.0,
        1.0 / 9.0,
        1.0 / 7.0,
        1.0 / 5.0,
        1.0 / 3.0,
        1.0,
    ] {
        series = series * s2 + inv_odd;
    }
    offset + 2.0 * s * series
}

/// `ln(exp(a) + exp(b))`, exact when either is `-inf`.
pub fn log_sum_exp(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let max = a.max(b);
    max + (-(a - b).abs()).exp().ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digamma_matches_known_values() {
        // ψ(1) = -γ, ψ(1/2) = -γ - 2 ln 2, ψ(10) = H_9 - γ.
        let gamma = 0.577_215_664_901_532_9;
        assert!((digamma(1.0) + gamma).abs() < 1e-14);
        assert!((digamma(0.5) + gamma + 2.0 * 2f64.ln()).abs() < 1e-14);
        let h9: f64 = (1..=9).map(|k| 1.0 / k as f64).sum();
        assert!((digamma(10.0) - (h9 - gamma)).abs() < 1e-14);
        // ψ(-1/2) = ψ(1/2) + 2 = ψ(3/2), through the reflection branch.
        assert!((digamma(-0.5) - digamma(1.5)).abs() < 1e-12);
    }

    #[test]
    fn digamma_is_the_derivative_of_lgamma() {
        for x in [0.01f64, 0.3, 1.7, 4.2, 11.0, 250.0, 1e5] {
            let h = 1e-6 * x.max(1.0);
            let fd = (lgamma(x + h) - lgamma(x - h)) / (2.0 * h);
            assert!(
                (digamma(x) - fd).abs() < 1e-6 * digamma(x).abs().max(1.0),
                "x = {x}"
            );
        }
    }

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn vectorisable_exp_and_ln_1p_are_within_a_few_ulp() {
        let mut worst = (0, 0);
        for i in 0..=200_000 {
            let x = -708.0 + 1417.0 * i as f64 / 200_000.0;
            worst.0 = worst.0.max(ulps(exp_bounded(x), x.exp()));
            let u = i as f64 / 200_000.0;
            worst.1 = worst.1.max(ulps(ln_1p_unit(u), u.ln_1p()));
        }
        for u in [1e-300, 1e-200, 1e-20, 1e-10, 1e-5, 0.414, 0.4143, 0.99] {
            worst.1 = worst.1.max(ulps(ln_1p_unit(u), u.ln_1p()));
        }
        assert!(
            worst.0 <= 2 && worst.1 <= 4,
            "worst ulps: exp {}, ln_1p {}",
            worst.0,
            worst.1
        );
        assert_eq!(exp_bounded(0.0), 1.0);
        assert_eq!(ln_1p_unit(0.0), 0.0);
    }

    #[test]
    fn log_phi_matches_known_values_and_both_tails() {
        // ln Phi(x) from mpmath at 30 digits.
        let known = [
            (0.0, -std::f64::consts::LN_2),
            (1.0, -0.172_753_779_023_449_9),
            (-1.0, -1.841_021_645_009_264),
            (-10.0, -53.231_285_150_512_47),
            (5.0, -2.866_516_129_637_636e-7),
            (-40.0, -804.608_442_013_753_8),
        ];
        for (x, expected) in known {
            let got = log_phi(x);
            assert!(
                (got - expected).abs() <= 1e-13 * expected.abs(),
                "log_phi({x}) = {got}, expected {expected}"
            );
        }
        // phi(x) / Phi(x) from mpmath at 30 digits.
        let slopes = [
            (-3.0, 3.283_098_654_930_436_5),
            (-0.7, 1.290_499_339_458_166_5),
            (0.0, 0.797_884_560_802_865_4),
            (0.7, 0.411_924_750_419_290_67),
            (2.0, 0.055_247_862_678_989_959),
        ];
        for (x, expected) in slopes {
            let got = log_phi_slope(x, log_phi(x));
            assert!(
                (got - expected).abs() <= 1e-13 * expected,
                "slope at {x}: {got}, expected {expected}"
            );
        }
        // The slope is the derivative.
        for x in [-60.0, -37.5, -20.0, -3.0, -0.5, 0.0, 0.7, 4.0, 9.0] {
            let h = 1e-6 * f64::max(1.0, f64::abs(x));
            let fd = (log_phi(x + h) - log_phi(x - h)) / (2.0 * h);
            let slope = log_phi_slope(x, log_phi(x));
            assert!(
                (slope - fd).abs() <= 1e-6 * fd.abs().max(1e-3),
                "slope at {x}: {slope} vs finite difference {fd}"
            );
        }
    }

    #[test]
    fn logistic_helpers_are_stable() {
        assert_eq!(softplus(1000.0), 1000.0);
        assert_eq!(softplus(-1000.0), 0.0);
        assert_eq!(logistic(-1000.0), 0.0);
        assert_eq!(logistic(1000.0), 1.0);
        assert!((log_sum_exp(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(log_sum_exp(f64::NEG_INFINITY, -3.0), -3.0);
    }
}
