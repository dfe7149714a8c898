//! Distributions on the host: full normalised log densities (`_lpdf`, `_lpmf`, as Stan's
//! generated quantities compute them), a few CDFs, and `_rng` samplers.
//!
//! Scalar families are vectorised as in Stan: every argument is a scalar or a container of
//! one common length; a density sums over the elements, an `_rng` returns an array when any
//! argument is a container.

use std::f64::consts::{LN_2, PI};

use super::linalg::{as_matrix, cholesky};
use super::math::{
    erfc, inv_logit, lbeta, lchoose, lgamma, log_diff_exp, log_inv_logit, log_sum_exp,
    log_sum_exp2, log1m_inv_logit, log1p_exp,
};
use super::rng::HostRng;
use super::{HostError, fail};
use crate::ast::Span;
use crate::value::{Elem, Typed, Value, Values};

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

type Check = Result<(), String>;

fn positive(what: &str, x: f64) -> Check {
    if x > 0.0 && x.is_finite() {
        Ok(())
    } else {
        Err(format!("{what} is {x}, but must be positive and finite"))
    }
}

fn finite(what: &str, x: f64) -> Check {
    if x.is_finite() {
        Ok(())
    } else {
        Err(format!("{what} is {x}, but must be finite"))
    }
}

fn probability(what: &str, x: f64) -> Check {
    if (0.0..=1.0).contains(&x) {
        Ok(())
    } else {
        Err(format!("{what} is {x}, but must be in [0, 1]"))
    }
}

fn nonnegative_int(what: &str, x: f64) -> Check {
    if x >= 0.0 && x == x.floor() {
        Ok(())
    } else {
        Err(format!("{what} is {x}, but must be a non-negative int"))
    }
}

/// `a * ln(b)` with `0 * ln(0) = 0`.
fn xlogy(a: f64, b: f64) -> f64 {
    if a == 0.0 { 0.0 } else { a * b.ln() }
}

/// The log density of a scalar family at `x = [y, params...]`, or `None` when the family has
/// no such density.
fn scalar_lpdf(family: &str, x: &[f64]) -> Option<Result<f64, String>> {
    let y = x[0];
    let p = &x[1..];
    let result = (|| -> Result<f64, String> {
        Ok(match (family, p) {
            ("normal", &[mu, sigma]) => {
                finite("location", mu)?;
                positive("scale", sigma)?;
                let z = (y - mu) / sigma;
                -0.5 * z * z - sigma.ln() - LN_SQRT_2PI
            }
            ("std_normal", &[]) => -0.5 * y * y - LN_SQRT_2PI,
            ("student_t", &[nu, mu, sigma]) => {
                positive("degrees of freedom", nu)?;
                finite("location", mu)?;
                positive("scale", sigma)?;
                let z = (y - mu) / sigma;
                lgamma((nu + 1.0) / 2.0)
                    - lgamma(nu / 2.0)
                    - 0.5 * (nu * PI).ln()
                    - sigma.ln()
                    - (nu + 1.0) / 2.0 * (z * z / nu).ln_1p()
            }
            ("cauchy", &[mu, sigma]) => {
                finite("location", mu)?;
                positive("scale", sigma)?;
                let z = (y - mu) / sigma;
                -PI.ln() - sigma.ln() - (z * z).ln_1p()
            }
            ("double_exponential", &[mu, sigma]) => {
                finite("location", mu)?;
                positive("scale", sigma)?;
                -LN_2 - sigma.ln() - (y - mu).abs() / sigma
            }
            ("logistic", &[mu, sigma]) => {
                finite("location", mu)?;
                positive("scale", sigma)?;
                let z = (y - mu) / sigma;
                -z - sigma.ln() - 2.0 * log1p_exp(-z)
            }
            ("lognormal", &[mu, sigma]) => {
                finite("location", mu)?;
                positive("scale", sigma)?;
                if y <= 0.0 {
                    return Ok(f64::NEG_INFINITY);
                }
                let z = (y.ln() - mu) / sigma;
                -0.5 * z * z - sigma.ln() - LN_SQRT_2PI - y.ln()
            }
            ("chi_square", &[nu]) => {
                positive("degrees of freedom", nu)?;
                if y < 0.0 {
                    return Ok(f64::NEG_INFINITY);
                }
                xlogy(nu / 2.0 - 1.0, y) - y / 2.0 - lgamma(nu / 2.0) - nu / 2.0 * LN_2
            }
            ("inv_chi_square", &[nu]) => {
                positive("degrees of freedom", nu)?;
                if y <= 0.0 {
                    return Ok(f64::NEG_INFINITY);
                }
                -(nu / 2.0) * LN_2 - lgamma(nu / 2.0) - (nu / 2.0 + 1.0) * y.ln() - 0.5 / y
            }
            ("gamma", &[alpha, beta]) => {
                positive("shape", alpha)?;
                positive("inverse scale", beta)?;
                if y < 0.0 {
                    return Ok(f64::NEG_INFINITY);
                }
                alpha * beta.ln() - lgamma(alpha) + xlogy(alpha - 1.0, y) - beta * y
            }
            ("inv_gamma", &[alpha, beta]) => {
                positive("shape", alpha)?;
                positive("scale", beta)?;
                if y <= 0.0 {
                    return Ok(f64::NEG_INFINITY);
                }
                alpha * beta.ln() - lgamma(alpha) - (alpha + 1.0) * y.ln() - beta / y
            }
            ("weibull", &[alpha, sigma]) => {
                positive("shape", alpha)?;
                positive("scale", sigma)?;
                if y < 0.0 {
                    return Ok(f64::NEG_INFINITY);
                }
                alpha.ln() - sigma.ln() + xlogy(alpha - 1.0, y / sigma) - (y / sigma).powf(alpha)
            }
            ("exponential", &[beta]) => {
                positive("inverse scale", beta)?;
                if y < 0.0 {
                    return Ok(f64::NEG_INFINITY);
                }
                beta.ln() - beta * y
            }
            ("beta", &[a, b]) => {
                positive("first shape", a)?;
                positive("second shape", b)?;
                if !(0.0..=1.0).contains(&y) {
                    return Ok(f64::NEG_INFINITY);
                }
                xlogy(a - 1.0, y) + xlogy(b - 1.0, 1.0 - y) - lbeta(a, b)
            }
            ("uniform", &[a, b]) => {
                finite("lower bound", a)?;
                finite("upper bound", b)?;
                if b <= a {
                    return Err(format!("upper bound {b} is not above lower bound {a}"));
                }
                if y < a || y > b {
                    f64::NEG_INFINITY
                } else {
                    -(b - a).ln()
                }
            }
            ("bernoulli", &[theta]) => {
                probability("chance of success", theta)?;
                match y {
                    1.0 => theta.ln(),
                    0.0 => (-theta).ln_1p(),
                    _ => return Err(format!("outcome is {y}, but must be 0 or 1")),
                }
            }
            ("bernoulli_logit", &[alpha]) => match y {
                1.0 => log_inv_logit(alpha),
                0.0 => log1m_inv_logit(alpha),
                _ => return Err(format!("outcome is {y}, but must be 0 or 1")),
            },
            ("binomial", &[n, theta]) => {
                nonnegative_int("population size", n)?;
                probability("chance of success", theta)?;
                if y < 0.0 || y > n {
                    return Err(format!("successes {y} is not in 0..={n}"));
                }
                lchoose(n, y) + xlogy(y, theta) + xlogy(n - y, 1.0 - theta)
            }
            ("binomial_logit", &[n, alpha]) => {
                nonnegative_int("population size", n)?;
                if y < 0.0 || y > n {
                    return Err(format!("successes {y} is not in 0..={n}"));
                }
                lchoose(n, y) + y * log_inv_logit(alpha) + (n - y) * log1m_inv_logit(alpha)
            }
            ("poisson", &[lambda]) => {
                if !(lambda >= 0.0) || lambda == f64::INFINITY {
                    return Err(format!(
                        "rate is {lambda}, but must be non-negative and finite"
                    ));
                }
                nonnegative_int("outcome", y)?;
                xlogy(y, lambda) - lambda - lgamma(y + 1.0)
            }
            ("poisson_log", &[alpha]) => {
                nonnegative_int("outcome", y)?;
                if alpha == f64::NEG_INFINITY {
                    return Ok(if y == 0.0 { 0.0 } else { f64::NEG_INFINITY });
                }
                y * alpha - alpha.exp() - lgamma(y + 1.0)
            }
            ("neg_binomial_2", &[mu, phi]) => {
                positive("location", mu)?;
                positive("precision", phi)?;
                nonnegative_int("outcome", y)?;
                lgamma(y + phi) - lgamma(y + 1.0) - lgamma(phi)
                    + y * (mu / (mu + phi)).ln()
                    + phi * (phi / (mu + phi)).ln()
            }
            ("neg_binomial_2_log", &[eta, phi]) => {
                finite("log location", eta)?;
                positive("precision", phi)?;
                nonnegative_int("outcome", y)?;
                let log_mu_phi = log_sum_exp2(eta, phi.ln());
                lgamma(y + phi) - lgamma(y + 1.0) - lgamma(phi)
                    + y * (eta - log_mu_phi)
                    + phi * (phi.ln() - log_mu_phi)
            }
            _ => return Err(String::new()),
        })
    })();
    match result {
        Err(message) if message.is_empty() => None,
        other => Some(other),
    }
}

/// Log CDFs and complementary CDFs of a few families: (`lcdf`, `lccdf`) at `x = [y, params]`.
fn scalar_cdf(family: &str, x: &[f64]) -> Option<(f64, f64)> {
    let y = x[0];
    Some(match (family, &x[1..]) {
        ("normal", &[mu, sigma]) => {
            let z = (y - mu) / (sigma * std::f64::consts::SQRT_2);
            ((0.5 * erfc(-z)).ln(), (0.5 * erfc(z)).ln())
        }
        ("std_normal", &[]) => {
            let z = y / std::f64::consts::SQRT_2;
            ((0.5 * erfc(-z)).ln(), (0.5 * erfc(z)).ln())
        }
        ("student_t", &[nu, mu, sigma]) => {
            let t = (y - mu) / sigma;
            // P(T > |t|) = I_{nu/(nu+t^2)}(nu/2, 1/2) / 2.
            let tail = 0.5 * inc_beta(nu / 2.0, 0.5, nu / (nu + t * t));
            let (lower, upper) = if t < 0.0 {
                (tail, 1.0 - tail)
            } else {
                (1.0 - tail, tail)
            };
            (lower.ln(), upper.ln())
        }
        ("cauchy", &[mu, sigma]) => {
            let p = 0.5 + ((y - mu) / sigma).atan() / PI;
            (p.ln(), (1.0 - p).ln())
        }
        ("logistic", &[mu, sigma]) => {
            let z = (y - mu) / sigma;
            (log_inv_logit(z), log1m_inv_logit(z))
        }
        ("exponential", &[beta]) => {
            let p = -(-beta * y).exp_m1();
            (p.ln(), -beta * y)
        }
        ("double_exponential", &[mu, sigma]) => {
            let z = (y - mu) / sigma;
            if z < 0.0 {
                (z - LN_2, (1.0 - 0.5 * z.exp()).ln())
            } else {
                ((1.0 - 0.5 * (-z).exp()).ln(), -z - LN_2)
            }
        }
        ("lognormal", &[mu, sigma]) if y > 0.0 => {
            let z = (y.ln() - mu) / (sigma * std::f64::consts::SQRT_2);
            ((0.5 * erfc(-z)).ln(), (0.5 * erfc(z)).ln())
        }
        ("uniform", &[a, b]) => {
            let p = ((y - a) / (b - a)).clamp(0.0, 1.0);
            (p.ln(), (1.0 - p).ln())
        }
        ("weibull", &[alpha, sigma]) if y >= 0.0 => {
            let t = (y / sigma).powf(alpha);
            ((-(-t).exp_m1()).ln(), -t)
        }
        _ => return None,
    })
}

/// The regularised incomplete beta function `I_x(a, b)` (continued fraction, Numerical
/// Recipes' `betacf`).
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (a * x.ln() + b * (1.0 - x).ln() - lbeta(a, b)).exp();
    let cf = |a: f64, b: f64, x: f64| -> f64 {
        let tiny = 1e-300;
        let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
        let mut c = 1.0;
        let mut d = 1.0 - qab * x / qap;
        if d.abs() < tiny {
            d = tiny;
        }
        d = 1.0 / d;
        let mut h = d;
        for m in 1..1000 {
            let m = m as f64;
            let m2 = 2.0 * m;
            let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
            d = 1.0 + aa * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + aa / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            h *= d * c;
            let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
            d = 1.0 + aa * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + aa / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-15 {
                break;
            }
        }
        h
    };
    if x < (a + 1.0) / (a + b + 2.0) {
        front * cf(a, b, x) / a
    } else {
        1.0 - front * cf(b, a, 1.0 - x) / b
    }
}

/// A draw of a scalar family, or `None` when there is no such `_rng`.
fn scalar_rng(family: &str, p: &[f64], rng: &mut HostRng) -> Option<Result<f64, String>> {
    let result = (|| -> Result<f64, String> {
        Ok(match (family, p) {
            ("normal", &[mu, sigma]) => {
                finite("location", mu)?;
                positive("scale", sigma)?;
                mu + sigma * rng.normal()
            }
            ("std_normal", &[]) => rng.normal(),
            ("student_t", &[nu, mu, sigma]) => {
                positive("degrees of freedom", nu)?;
                positive("scale", sigma)?;
                let chi2 = 2.0 * rng.gamma(nu / 2.0);
                mu + sigma * rng.normal() / (chi2 / nu).sqrt()
            }
            ("cauchy", &[mu, sigma]) => {
                positive("scale", sigma)?;
                mu + sigma * (PI * (rng.uniform() - 0.5)).tan()
            }
            ("double_exponential", &[mu, sigma]) => {
                positive("scale", sigma)?;
                let u = rng.uniform() - 0.5;
                mu - sigma * u.signum() * (1.0 - 2.0 * u.abs()).ln()
            }
            ("logistic", &[mu, sigma]) => {
                positive("scale", sigma)?;
                let u = rng.uniform();
                mu + sigma * (u / (1.0 - u)).ln()
            }
            ("lognormal", &[mu, sigma]) => {
                positive("scale", sigma)?;
                (mu + sigma * rng.normal()).exp()
            }
            ("chi_square", &[nu]) => {
                positive("degrees of freedom", nu)?;
                2.0 * rng.gamma(nu / 2.0)
            }
            ("inv_chi_square", &[nu]) => {
                positive("degrees of freedom", nu)?;
                1.0 / (2.0 * rng.gamma(nu / 2.0))
            }
            ("gamma", &[alpha, beta]) => {
                positive("shape", alpha)?;
                positive("inverse scale", beta)?;
                rng.gamma(alpha) / beta
            }
            ("inv_gamma", &[alpha, beta]) => {
                positive("shape", alpha)?;
                positive("scale", beta)?;
                beta / rng.gamma(alpha)
            }
            ("weibull", &[alpha, sigma]) => {
                positive("shape", alpha)?;
                positive("scale", sigma)?;
                sigma * (-rng.uniform().ln()).powf(1.0 / alpha)
            }
            ("exponential", &[beta]) => {
                positive("inverse scale", beta)?;
                -rng.uniform().ln() / beta
            }
            ("beta", &[a, b]) => {
                positive("first shape", a)?;
                positive("second shape", b)?;
                rng.beta(a, b)
            }
            ("uniform", &[a, b]) => {
                if !(b > a) {
                    return Err(format!("upper bound {b} is not above lower bound {a}"));
                }
                a + (b - a) * rng.uniform()
            }
            ("bernoulli", &[theta]) => {
                probability("chance of success", theta)?;
                f64::from(u8::from(rng.uniform() < theta))
            }
            ("bernoulli_logit", &[alpha]) => f64::from(u8::from(rng.uniform() < inv_logit(alpha))),
            ("binomial", &[n, theta]) => {
                nonnegative_int("population size", n)?;
                probability("chance of success", theta)?;
                rng.binomial(n as i64, theta) as f64
            }
            ("binomial_logit", &[n, alpha]) => {
                nonnegative_int("population size", n)?;
                rng.binomial(n as i64, inv_logit(alpha)) as f64
            }
            ("poisson", &[lambda]) => {
                if !(lambda >= 0.0) || lambda > 1.07e9 {
                    return Err(format!("rate is {lambda}, but must be in [0, 1.07e9]"));
                }
                rng.poisson(lambda) as f64
            }
            ("poisson_log", &[alpha]) => {
                if alpha > 20.79 {
                    return Err(format!("log rate is {alpha}, but must be below 20.79"));
                }
                rng.poisson(alpha.exp()) as f64
            }
            ("neg_binomial_2", &[mu, phi]) => {
                positive("location", mu)?;
                positive("precision", phi)?;
                let lambda = rng.gamma(phi) * mu / phi;
                rng.poisson(lambda) as f64
            }
            ("neg_binomial_2_log", &[eta, phi]) => {
                positive("precision", phi)?;
                let lambda = rng.gamma(phi) * eta.exp() / phi;
                rng.poisson(lambda) as f64
            }
            _ => return Err(String::new()),
        })
    })();
    match result {
        Err(message) if message.is_empty() => None,
        other => Some(other),
    }
}

/// The `_rng` families that return ints.
fn int_rng(family: &str) -> bool {
    matches!(
        family,
        "bernoulli"
            | "bernoulli_logit"
            | "binomial"
            | "binomial_logit"
            | "poisson"
            | "poisson_log"
            | "neg_binomial_2"
            | "neg_binomial_2_log"
    )
}

/// The common length of vectorised arguments (`None` when all are scalars).
fn common_len(args: &[Typed], name: &str, span: Span) -> Result<Option<usize>, HostError> {
    let mut len = None;
    for arg in args.iter().filter(|a| !a.is_scalar()) {
        match len {
            None => len = Some(arg.len()),
            Some(n) if n == arg.len() => {}
            Some(n) => {
                return fail(
                    span,
                    format!(
                        "`{name}`: arguments have different sizes ({n} and {})",
                        arg.len()
                    ),
                );
            }
        }
    }
    Ok(len)
}

fn at(arg: &Typed, i: usize) -> f64 {
    arg.real_at(if arg.is_scalar() { 0 } else { i })
}

fn vector_arg(arg: &Typed, what: &str, name: &str, span: Span) -> Result<Vec<f64>, HostError> {
    match (arg.elem, arg.shape()) {
        (Elem::Vector | Elem::RowVector, [_]) => Ok(arg.reals()),
        (Elem::Scalar, [_]) => Ok(arg.reals()),
        _ => fail(
            span,
            format!("`{name}`: {what} must be a vector, not {}", arg.describe()),
        ),
    }
}

/// The rows of an argument that is a vector or an array of vectors.
fn vectors_arg(arg: &Typed) -> Vec<Vec<f64>> {
    match arg.shape() {
        [n, k] if arg.elem == Elem::Vector || arg.elem == Elem::RowVector => {
            let v = arg.reals();
            (0..*n).map(|i| v[i * k..(i + 1) * k].to_vec()).collect()
        }
        _ => vec![arg.reals()],
    }
}

fn simplex_check(theta: &[f64], name: &str, span: Span) -> Result<(), HostError> {
    let sum: f64 = theta.iter().sum();
    if theta.iter().any(|&t| !(0.0..=1.0).contains(&t)) || (sum - 1.0).abs() > 1e-8 {
        return fail(
            span,
            format!(
                "`{name}`: the probabilities must be a simplex (non-negative, sum 1), sum is {sum}"
            ),
        );
    }
    Ok(())
}

fn ordered_logistic_lp(
    k: i64,
    eta: f64,
    c: &[f64],
    name: &str,
    span: Span,
) -> Result<f64, HostError> {
    let n_cat = c.len() as i64 + 1;
    if k < 1 || k > n_cat {
        return fail(span, format!("`{name}`: outcome {k} is not in 1..={n_cat}"));
    }
    if c.windows(2).any(|w| !(w[0] < w[1])) {
        return fail(span, format!("`{name}`: the cut points must be increasing"));
    }
    let k = k as usize;
    Ok(if c.is_empty() {
        0.0
    } else if k == 1 {
        log1m_inv_logit(eta - c[0])
    } else if k == c.len() + 1 {
        log_inv_logit(eta - c[k - 2])
    } else {
        let (a, b) = (eta - c[k - 2], eta - c[k - 1]);
        log_diff_exp(log_inv_logit(a), log_inv_logit(b))
    })
}

fn multi_normal_lp(y: &[f64], mu: &[f64], l: &[f64]) -> f64 {
    let k = y.len();
    let diff: Vec<f64> = y.iter().zip(mu).map(|(a, b)| a - b).collect();
    let z = super::linalg::solve_lower(k, l, 1, &diff);
    let log_det: f64 = (0..k).map(|i| l[i * k + i].ln()).sum();
    -0.5 * z.iter().map(|x| x * x).sum::<f64>() - log_det - k as f64 * LN_SQRT_2PI
}

/// The LKJ log density of a correlation matrix through its Cholesky factor `l` (K x K):
/// `sum_{k>=2} (K - k + 2 eta - 2) log L_kk` for the factor, `(eta - 1) 2 sum log L_kk` for
/// the matrix, plus Stan's normalising constant (Lewandowski, Kurowicka and Joe 2009,
/// theorem 5).
fn lkj_lp(l: &[f64], k: usize, eta: f64, of_matrix: bool) -> f64 {
    let km1 = (k - 1) as f64;
    let mut lp = km1 * lgamma(eta + 0.5 * km1);
    for i in 1..k {
        lp -= 0.5 * i as f64 * PI.ln() + lgamma(eta + 0.5 * (km1 - i as f64));
    }
    for i in 1..k {
        let log_diag = l[i * k + i].ln();
        lp += if of_matrix {
            2.0 * (eta - 1.0) * log_diag
        } else {
            ((k - i) as f64 - 3.0 + 2.0 * eta) * log_diag
        };
    }
    lp
}

/// Stan's `lkj_corr_cholesky_rng`: canonical partial correlations `2 Beta(a, a) - 1` with
/// `a = eta + (K - 1 - i) / 2` for column `i`, assembled column by column.
fn lkj_cholesky_draw(k: usize, eta: f64, rng: &mut HostRng) -> Vec<f64> {
    let mut l = vec![0.0; k * k];
    // acc[i]: 1 - the squares so far of row i.
    let mut acc = vec![1.0f64; k];
    let mut alpha = eta + 0.5 * (k as f64 - 1.0);
    for col in 0..k {
        l[col * k + col] = acc[col].sqrt();
        alpha -= 0.5;
        for row in col + 1..k {
            let z = 2.0 * rng.beta(alpha, alpha) - 1.0;
            l[row * k + col] = z * acc[row].sqrt();
            acc[row] *= 1.0 - z * z;
        }
    }
    l
}

fn ints(arg: &Typed, what: &str, name: &str, span: Span) -> Result<Vec<i64>, HostError> {
    match &arg.value.values {
        Values::Int(v) => Ok(v.clone()),
        Values::Real(_) => fail(
            span,
            format!("`{name}`: {what} must be an int or int array"),
        ),
    }
}

/// `family_lpdf(args[0] | args[1..])` (also `_lpmf`, `_lupdf`, `_lupmf`, `_lcdf`, `_lccdf`,
/// `_cdf`); `None` when the family is unknown.
pub fn log_density(
    name: &str,
    family: &str,
    suffix: &str,
    args: &[Typed],
    span: Span,
) -> Result<Option<Typed>, HostError> {
    if args.is_empty() {
        return fail(span, format!("`{name}` needs an outcome"));
    }
    let err = |message: String| HostError {
        span,
        message: format!("{name}: {message}"),
    };
    if matches!(suffix, "lcdf" | "lccdf" | "cdf") {
        let n = common_len(args, name, span)?;
        let mut total = if suffix == "cdf" { 1.0 } else { 0.0 };
        for i in 0..n.unwrap_or(1) {
            let x: Vec<f64> = args.iter().map(|a| at(a, i)).collect();
            let Some((lower, upper)) = scalar_cdf(family, &x) else {
                return Ok(None);
            };
            match suffix {
                "lcdf" => total += lower,
                "lccdf" => total += upper,
                _ => total *= lower.exp(),
            }
        }
        return Ok(Some(Typed::real(total)));
    }
    let vector_family = matches!(
        family,
        "categorical"
            | "categorical_logit"
            | "ordered_logistic"
            | "multi_normal"
            | "multi_normal_cholesky"
            | "dirichlet"
            | "normal_id_glm"
            | "lkj_corr_cholesky"
            | "lkj_corr"
    );
    if !vector_family {
        let n = common_len(args, name, span)?;
        let mut total = 0.0;
        for i in 0..n.unwrap_or(1) {
            let x: Vec<f64> = args.iter().map(|a| at(a, i)).collect();
            match scalar_lpdf(family, &x) {
                None => return Ok(None),
                Some(Ok(lp)) => total += lp,
                Some(Err(message)) => return Err(err(message)),
            }
        }
        return Ok(Some(Typed::real(total)));
    }
    let lp = match (family, args) {
        ("categorical", [y, theta]) => {
            let theta = vector_arg(theta, "the probabilities", name, span)?;
            simplex_check(&theta, name, span)?;
            let mut lp = 0.0;
            for k in ints(y, "the outcome", name, span)? {
                if k < 1 || k as usize > theta.len() {
                    return Err(err(format!("outcome {k} is not in 1..={}", theta.len())));
                }
                lp += theta[k as usize - 1].ln();
            }
            lp
        }
        ("categorical_logit", [y, beta]) => {
            let beta = vector_arg(beta, "the log odds", name, span)?;
            let norm = log_sum_exp(&beta);
            let mut lp = 0.0;
            for k in ints(y, "the outcome", name, span)? {
                if k < 1 || k as usize > beta.len() {
                    return Err(err(format!("outcome {k} is not in 1..={}", beta.len())));
                }
                lp += beta[k as usize - 1] - norm;
            }
            lp
        }
        ("ordered_logistic", [y, eta, c]) => {
            let ks = ints(y, "the outcome", name, span)?;
            let c = vector_arg(c, "the cut points", name, span)?;
            let mut lp = 0.0;
            for (i, k) in ks.iter().enumerate() {
                let eta_i = at(eta, i);
                lp += ordered_logistic_lp(*k, eta_i, &c, name, span)?;
            }
            lp
        }
        ("multi_normal" | "multi_normal_cholesky", [y, mu, sigma]) => {
            let Some((k, k2, m)) = as_matrix(sigma).filter(|_| sigma.elem == Elem::Matrix) else {
                return Err(err("the covariance must be a matrix".into()));
            };
            let l = if family == "multi_normal" {
                cholesky(k, &m).map_err(|e| err(format!("covariance: {e}")))?
            } else {
                m
            };
            let ys = vectors_arg(y);
            let mus = vectors_arg(mu);
            if k != k2 || ys.iter().chain(&mus).any(|v| v.len() != k) {
                return Err(err(format!("sizes do not match the {k}x{k2} matrix")));
            }
            if mus.len() != 1 && mus.len() != ys.len() {
                return Err(err("different numbers of outcomes and locations".into()));
            }
            let mut lp = 0.0;
            for (i, y) in ys.iter().enumerate() {
                let mu = &mus[if mus.len() == 1 { 0 } else { i }];
                lp += multi_normal_lp(y, mu, &l);
            }
            lp
        }
        ("lkj_corr_cholesky" | "lkj_corr", [y, eta]) => {
            let Some((k, k2, m)) = as_matrix(y).filter(|_| y.elem == Elem::Matrix) else {
                return Err(err("the outcome must be a matrix".into()));
            };
            let eta = eta
                .value
                .as_real()
                .ok_or_else(|| err("the shape must be a real".into()))?;
            positive("shape", eta).map_err(err)?;
            if k != k2 || k == 0 {
                return Err(err(format!("needs a square matrix, found {k}x{k2}")));
            }
            let l = if family == "lkj_corr" {
                cholesky(k, &m).map_err(|e| err(format!("the correlation matrix: {e}")))?
            } else {
                m
            };
            lkj_lp(&l, k, eta, family == "lkj_corr")
        }
        ("dirichlet", [theta, alpha]) => {
            let thetas = vectors_arg(theta);
            let alphas = vectors_arg(alpha);
            let mut lp = 0.0;
            for (i, theta) in thetas.iter().enumerate() {
                let alpha = &alphas[if alphas.len() == 1 {
                    0
                } else {
                    i.min(alphas.len() - 1)
                }];
                if alpha.len() != theta.len() {
                    return Err(err(
                        "sizes of the simplex and the concentrations differ".into()
                    ));
                }
                simplex_check(theta, name, span)?;
                for &a in alpha {
                    positive("concentration", a).map_err(err)?;
                }
                lp += lgamma(alpha.iter().sum()) - alpha.iter().map(|&a| lgamma(a)).sum::<f64>()
                    + theta
                        .iter()
                        .zip(alpha)
                        .map(|(&t, &a)| xlogy(a - 1.0, t))
                        .sum::<f64>();
            }
            lp
        }
        _ => {
            return fail(
                span,
                format!("`{name}` with {} argument(s) is not supported", args.len()),
            );
        }
    };
    Ok(Some(Typed::real(lp)))
}

/// `family_rng(args)`; `None` when the family is unknown.
pub fn random(
    name: &str,
    family: &str,
    args: &[Typed],
    rng: &mut HostRng,
    span: Span,
) -> Result<Option<Typed>, HostError> {
    let err = |message: String| HostError {
        span,
        message: format!("{name}: {message}"),
    };
    let value = match (family, args) {
        ("categorical" | "categorical_logit", [theta]) => {
            let mut theta = vector_arg(theta, "the probabilities", name, span)?;
            if family == "categorical_logit" {
                let norm = log_sum_exp(&theta);
                theta.iter_mut().for_each(|t| *t = (*t - norm).exp());
            } else {
                simplex_check(&theta, name, span)?;
            }
            let u = rng.uniform();
            let mut cumulative = 0.0;
            let mut k = theta.len();
            for (i, t) in theta.iter().enumerate() {
                cumulative += t;
                if u < cumulative {
                    k = i + 1;
                    break;
                }
            }
            Typed::int(k as i64)
        }
        ("ordered_logistic", [eta, c]) => {
            let c = vector_arg(c, "the cut points", name, span)?;
            if c.windows(2).any(|w| !(w[0] < w[1])) {
                return Err(err("the cut points must be increasing".into()));
            }
            let eta = eta
                .value
                .as_real()
                .ok_or_else(|| err("the linear predictor must be a real".into()))?;
            let u = rng.uniform();
            let latent = eta + (u / (1.0 - u)).ln();
            Typed::int(1 + c.iter().filter(|&&ci| ci < latent).count() as i64)
        }
        ("multi_normal" | "multi_normal_cholesky", [mu, sigma]) => {
            let Some((k, k2, m)) = as_matrix(sigma).filter(|_| sigma.elem == Elem::Matrix) else {
                return Err(err("the covariance must be a matrix".into()));
            };
            let l = if family == "multi_normal" {
                cholesky(k, &m).map_err(|e| err(format!("covariance: {e}")))?
            } else {
                m
            };
            let mus = vectors_arg(mu);
            if k != k2 || mus.iter().any(|v| v.len() != k) {
                return Err(err(format!("sizes do not match the {k}x{k2} matrix")));
            }
            let mut draws = Vec::with_capacity(mus.len() * k);
            for mu in &mus {
                let z: Vec<f64> = (0..k).map(|_| rng.normal()).collect();
                for i in 0..k {
                    let s: f64 = (0..=i).map(|j| l[i * k + j] * z[j]).sum();
                    draws.push(mu[i] + s);
                }
            }
            if mu.shape().len() == 2 {
                Typed::new(
                    Value {
                        shape: vec![mus.len(), k],
                        values: Values::Real(draws),
                    },
                    Elem::Vector,
                )
            } else {
                Typed::vector(draws, Elem::Vector)
            }
        }
        ("lkj_corr_cholesky" | "lkj_corr", [k, eta]) => {
            let k = k
                .value
                .as_int()
                .filter(|&k| k >= 1)
                .ok_or_else(|| err("the size must be a positive int".into()))?
                as usize;
            let eta = eta
                .value
                .as_real()
                .ok_or_else(|| err("the shape must be a real".into()))?;
            positive("shape", eta).map_err(err)?;
            let l = lkj_cholesky_draw(k, eta, rng);
            if family == "lkj_corr" {
                let mut omega = vec![0.0; k * k];
                for i in 0..k {
                    for j in 0..k {
                        omega[i * k + j] = (0..k).map(|m| l[i * k + m] * l[j * k + m]).sum();
                    }
                }
                Typed::matrix(k, k, omega)
            } else {
                Typed::matrix(k, k, l)
            }
        }
        ("dirichlet", [alpha]) => {
            let alpha = vector_arg(alpha, "the concentrations", name, span)?;
            for &a in &alpha {
                positive("concentration", a).map_err(err)?;
            }
            let g: Vec<f64> = alpha.iter().map(|&a| rng.gamma(a)).collect();
            let sum: f64 = g.iter().sum();
            Typed::vector(g.iter().map(|x| x / sum).collect(), Elem::Vector)
        }
        _ => {
            let n = common_len(args, name, span)?;
            let mut out = Vec::with_capacity(n.unwrap_or(1));
            for i in 0..n.unwrap_or(1) {
                let p: Vec<f64> = args.iter().map(|a| at(a, i)).collect();
                match scalar_rng(family, &p, rng) {
                    None => return Ok(None),
                    Some(Ok(x)) => out.push(x),
                    Some(Err(message)) => return Err(err(message)),
                }
            }
            let int = int_rng(family);
            match n {
                None if int => Typed::int(out[0] as i64),
                None => Typed::real(out[0]),
                Some(len) => Typed::new(
                    Value {
                        shape: vec![len],
                        values: if int {
                            Values::Int(out.iter().map(|&x| x as i64).collect())
                        } else {
                            Values::Real(out)
                        },
                    },
                    Elem::Scalar,
                ),
            }
        }
    };
    Ok(Some(value))
}
