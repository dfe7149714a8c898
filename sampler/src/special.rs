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
    fn logistic_helpers_are_stable() {
        assert_eq!(softplus(1000.0), 1000.0);
        assert_eq!(softplus(-1000.0), 0.0);
        assert_eq!(logistic(-1000.0), 0.0);
        assert_eq!(logistic(1000.0), 1.0);
        assert!((log_sum_exp(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(log_sum_exp(f64::NEG_INFINITY, -3.0), -3.0);
    }
}
