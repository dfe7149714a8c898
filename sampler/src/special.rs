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
