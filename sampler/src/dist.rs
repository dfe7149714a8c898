//! Density kernels: the value of `sum_i log p(x_i | params_i)` and its partial derivatives.
//!
//! Each kernel adds partial derivatives straight into the adjoint tape: a density only feeds
//! the log density, whose adjoint is 1, so no backward step is needed for it. Terms that
//! involve no parameter-dependent operand are dropped (Stan's `~` semantics), and terms that
//! involve only scalar parameters are computed once and multiplied by the length.
//!
//! Argument domains (`sigma > 0`, ...) of parameter-dependent operands are checked here and give
//! `-inf`; data and constant operands were checked when the model was lowered.

use crate::program::DensityKind;
mod glm;

use crate::special::{digamma, lgamma};

#[cfg(test)]
mod tests;

const NEG_INF: f64 = f64::NEG_INFINITY;

/// One operand as the kernels see it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arg<'a> {
    /// The values: one, broadcast, or one per element.
    pub vals: &'a [f64],
    /// 0 when broadcast, 1 otherwise.
    pub stride: usize,
    /// Offset of the operand's adjoints on the tape, when it depends on parameters.
    pub adj: Option<usize>,
}

impl Arg<'_> {
    #[inline]
    fn at(&self, i: usize) -> f64 {
        self.vals[i * self.stride]
    }
}

/// Adds `g` to the adjoint of element `i` of `a`, if it has one.
#[inline]
fn acc(adj: &mut [f64], a: &Arg, i: usize, g: f64) {
    if let Some(offset) = a.adj {
        adj[offset + i * a.stride] += g;
    }
}

/// A term that depends on one parameter: `sum_i f(a_i)`, where `f` returns value and derivative.
/// Dropped when `a` is constant; computed once when `a` is a scalar.
#[inline]
fn term1(adj: &mut [f64], n: usize, a: &Arg, f: impl Fn(f64) -> (f64, f64)) -> f64 {
    let Some(offset) = a.adj else {
        return 0.0;
    };
    if a.stride == 0 {
        let (value, deriv) = f(a.vals[0]);
        adj[offset] += n as f64 * deriv;
        n as f64 * value
    } else {
        let mut total = 0.0;
        for (i, &v) in a.vals[..n].iter().enumerate() {
            let (value, deriv) = f(v);
            adj[offset + i] += deriv;
            total += value;
        }
        total
    }
}

/// A term that depends on two parameters, like [`term1`].
#[inline]
fn term2(
    adj: &mut [f64],
    n: usize,
    a: &Arg,
    b: &Arg,
    f: impl Fn(f64, f64) -> (f64, f64, f64),
) -> f64 {
    if a.adj.is_none() && b.adj.is_none() {
        return 0.0;
    }
    if a.stride == 0 && b.stride == 0 {
        let (value, da, db) = f(a.vals[0], b.vals[0]);
        acc(adj, a, 0, n as f64 * da);
        acc(adj, b, 0, n as f64 * db);
        n as f64 * value
    } else {
        let mut total = 0.0;
        for i in 0..n {
            let (value, da, db) = f(a.at(i), b.at(i));
            acc(adj, a, i, da);
            acc(adj, b, i, db);
            total += value;
        }
        total
    }
}

/// The per-element part: `sum_i f(x_i, p_i)` where `f` returns value, d/dx and d/dp.
/// Skipped when no operand depends on parameters.
#[inline]
fn kernel<const K: usize>(
    adj: &mut [f64],
    n: usize,
    x: &Arg,
    p: [&Arg; K],
    f: impl Fn(f64, [f64; K]) -> (f64, f64, [f64; K]),
) -> f64 {
    if x.adj.is_none() && p.iter().all(|a| a.adj.is_none()) {
        return 0.0;
    }
    let mut total = 0.0;
    // Scalar (broadcast) operands accumulate locally and are flushed once.
    let mut x_sum = 0.0;
    let mut p_sum = [0.0; K];
    for i in 0..n {
        let mut pi = [0.0; K];
        for k in 0..K {
            pi[k] = p[k].at(i);
        }
        let (value, dx, dp) = f(x.at(i), pi);
        total += value;
        if let Some(offset) = x.adj {
            if x.stride == 0 {
                x_sum += dx;
            } else {
                adj[offset + i] += dx;
            }
        }
        for k in 0..K {
            if let Some(offset) = p[k].adj {
                if p[k].stride == 0 {
                    p_sum[k] += dp[k];
                } else {
                    adj[offset + i] += dp[k];
                }
            }
        }
    }
    if let (Some(offset), 0) = (x.adj, x.stride) {
        adj[offset] += x_sum;
    }
    for k in 0..K {
        if let (Some(offset), 0) = (p[k].adj, p[k].stride) {
            adj[offset] += p_sum[k];
        }
    }
    total
}

/// `-ln s` for a positive scale; `-inf` outside the domain.
#[inline]
fn neg_log_scale(s: f64) -> (f64, f64) {
    if s > 0.0 {
        (-s.ln(), -1.0 / s)
    } else {
        (NEG_INF, 0.0)
    }
}

/// `ln r` for a positive rate; `-inf` outside the domain.
#[inline]
fn log_rate(r: f64) -> (f64, f64) {
    if r > 0.0 {
        (r.ln(), 1.0 / r)
    } else {
        (NEG_INF, 0.0)
    }
}

/// `-ln Γ(a)` for a positive shape.
#[inline]
fn neg_lgamma(a: f64) -> (f64, f64) {
    if a > 0.0 {
        (-lgamma(a), -digamma(a))
    } else {
        (NEG_INF, 0.0)
    }
}

/// `a ln b` for shape `a` and positive rate or scale `b`.
#[inline]
fn shape_log_rate(a: f64, b: f64) -> (f64, f64, f64) {
    if b > 0.0 {
        (a * b.ln(), b.ln(), a / b)
    } else {
        (NEG_INF, 0.0, 0.0)
    }
}

/// `-a ln b` for shape `a` and positive scale `b` (Weibull's `-alpha ln sigma`).
#[inline]
fn neg_shape_log_scale(a: f64, b: f64) -> (f64, f64, f64) {
    if b > 0.0 {
        (-a * b.ln(), -b.ln(), -a / b)
    } else {
        (NEG_INF, 0.0, 0.0)
    }
}

/// The chi-square's normalising term `-nu ln(2) / 2 - ln Γ(nu / 2)` for positive `nu`.
#[inline]
fn chi_square_nu(nu: f64) -> (f64, f64) {
    if nu > 0.0 {
        let half = 0.5 * nu;
        (
            -half * std::f64::consts::LN_2 - lgamma(half),
            -0.5 * std::f64::consts::LN_2 - 0.5 * digamma(half),
        )
    } else {
        (NEG_INF, 0.0)
    }
}

/// `-x / 2` (the chi-square's term in its value alone).
#[inline]
fn neg_half_x(x: f64) -> (f64, f64) {
    (-0.5 * x, -0.5)
}

/// The negative binomial's `ln C(y + phi - 1, y) = ln Γ(y + phi) - ln Γ(y + 1) - ln Γ(phi)`
/// for a count `y` (data, no derivative) and positive `phi`; Stan keeps it whole when `phi`
/// is a parameter.
#[inline]
fn neg_binomial_choose(y: f64, phi: f64) -> (f64, f64, f64) {
    if phi > 0.0 {
        (
            lgamma(y + phi) - lgamma(y + 1.0) - lgamma(phi),
            0.0,
            digamma(y + phi) - digamma(phi),
        )
    } else {
        (NEG_INF, 0.0, 0.0)
    }
}

/// Stan's `multiply_log(y, mu) = y ln mu` for a count `y` (data, no derivative; 0 when `y`
/// is 0) and positive `mu`.
#[inline]
fn multiply_log(y: f64, mu: f64) -> (f64, f64, f64) {
    if !(mu > 0.0) {
        (NEG_INF, 0.0, 0.0)
    } else if y == 0.0 {
        (0.0, 0.0, 0.0)
    } else {
        (y * mu.ln(), 0.0, y / mu)
    }
}

/// `softplus(η)` and `logistic(η)` from one exponential, without overflow.
#[inline]
fn softplus_and_logistic(eta: f64) -> (f64, f64) {
    let e = (-eta.abs()).exp();
    let softplus = eta.max(0.0) + e.ln_1p();
    let logistic = if eta >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    };
    (softplus, logistic)
}

/// Observed counts against a vector of parameter-dependent linear predictors (the GLM case),
/// through [`glm`]'s vectorised loops. `None` when the operands do not have that layout.
fn glm_likelihood(
    kind: DensityKind,
    y: &Arg,
    p: &[Arg; 3],
    n: usize,
    adj: &mut [f64],
) -> Option<f64> {
    let (glm, eta) = match kind {
        DensityKind::BernoulliLogit => (glm::Glm::BernoulliLogit, &p[0]),
        DensityKind::PoissonLog => (glm::Glm::PoissonLog, &p[0]),
        DensityKind::BinomialLogit if p[0].adj.is_none() => (
            glm::Glm::BinomialLogit {
                trials: p[0].vals,
                stride: p[0].stride,
            },
            &p[1],
        ),
        _ => return None,
    };
    if y.adj.is_some() || y.stride != 1 || eta.stride != 1 {
        return None;
    }
    let offset = eta.adj?;
    Some(glm::likelihood(
        glm,
        &y.vals[..n],
        &eta.vals[..n],
        &mut adj[offset..offset + n],
    ))
}

/// `sum_i log p(x_i | p_i)`, adding partial derivatives to `adj`.
pub(crate) fn density(kind: DensityKind, x: &Arg, p: &[Arg; 3], n: usize, adj: &mut [f64]) -> f64 {
    if let Some(lp) = glm_likelihood(kind, x, p, n, adj) {
        return lp;
    }
    let [p0, p1, p2] = p;
    match kind {
        DensityKind::Normal => {
            term1(adj, n, p1, neg_log_scale)
                + kernel(adj, n, x, [p0, p1], |x, [mu, sigma]| {
                    let z = (x - mu) / sigma;
                    let dz = z / sigma;
                    (-0.5 * z * z, -dz, [dz, z * dz])
                })
        }
        DensityKind::HalfNormal => {
            term1(adj, n, p0, neg_log_scale)
                + kernel(adj, n, x, [p0], |x, [sigma]| {
                    if x < 0.0 {
                        return (NEG_INF, 0.0, [0.0]);
                    }
                    let z = x / sigma;
                    let dz = z / sigma;
                    (-0.5 * z * z, -dz, [z * dz])
                })
        }
        DensityKind::Exponential => {
            term1(adj, n, p0, log_rate)
                + kernel(adj, n, x, [p0], |x, [rate]| {
                    if x < 0.0 {
                        return (NEG_INF, 0.0, [0.0]);
                    }
                    (-rate * x, -rate, [-x])
                })
        }
        DensityKind::StudentT => {
            let norm_nu = |nu: f64| {
                if nu > 0.0 {
                    let value = lgamma(0.5 * (nu + 1.0)) - lgamma(0.5 * nu) - 0.5 * nu.ln();
                    let deriv =
                        0.5 * digamma(0.5 * (nu + 1.0)) - 0.5 * digamma(0.5 * nu) - 0.5 / nu;
                    (value, deriv)
                } else {
                    (NEG_INF, 0.0)
                }
            };
            term1(adj, n, p0, norm_nu)
                + term1(adj, n, p2, neg_log_scale)
                + kernel(adj, n, x, [p0, p1, p2], |x, [nu, mu, sigma]| {
                    let r = (x - mu) / sigma;
                    let r2 = r * r;
                    let q = r2 / nu;
                    let log1p_q = q.ln_1p();
                    let value = -0.5 * (nu + 1.0) * log1p_q;
                    let d_r = -(nu + 1.0) * r / (nu + r2);
                    let dx = d_r / sigma;
                    let d_sigma = (nu + 1.0) * r2 / (sigma * (nu + r2));
                    let d_nu = -0.5 * log1p_q + 0.5 * (nu + 1.0) * r2 / (nu * (nu + r2));
                    (value, dx, [d_nu, -dx, d_sigma])
                })
        }
        DensityKind::Cauchy => {
            term1(adj, n, p1, neg_log_scale)
                + kernel(adj, n, x, [p0, p1], |x, [mu, sigma]| {
                    let r = (x - mu) / sigma;
                    let r2 = r * r;
                    let dx = -2.0 * r / (sigma * (1.0 + r2));
                    (-r2.ln_1p(), dx, [-dx, 2.0 * r2 / (sigma * (1.0 + r2))])
                })
        }
        DensityKind::HalfCauchy => {
            term1(adj, n, p0, neg_log_scale)
                + kernel(adj, n, x, [p0], |x, [sigma]| {
                    if x < 0.0 {
                        return (NEG_INF, 0.0, [0.0]);
                    }
                    let r = x / sigma;
                    let r2 = r * r;
                    (
                        -r2.ln_1p(),
                        -2.0 * r / (sigma * (1.0 + r2)),
                        [2.0 * r2 / (sigma * (1.0 + r2))],
                    )
                })
        }
        DensityKind::LogNormal => {
            let neg_log_x = |x: f64| {
                if x > 0.0 {
                    (-x.ln(), -1.0 / x)
                } else {
                    (NEG_INF, 0.0)
                }
            };
            term1(adj, n, x, neg_log_x)
                + term1(adj, n, p1, neg_log_scale)
                + kernel(adj, n, x, [p0, p1], |x, [mu, sigma]| {
                    if x <= 0.0 {
                        return (NEG_INF, 0.0, [0.0, 0.0]);
                    }
                    let z = (x.ln() - mu) / sigma;
                    let dz = z / sigma;
                    (-0.5 * z * z, -dz / x, [dz, z * dz])
                })
        }
        DensityKind::Gamma => {
            term1(adj, n, p0, neg_lgamma)
                + term2(adj, n, p0, p1, shape_log_rate)
                + kernel(adj, n, x, [p0, p1], |x, [shape, rate]| {
                    if x <= 0.0 {
                        return (NEG_INF, 0.0, [0.0, 0.0]);
                    }
                    let log_x = x.ln();
                    (
                        (shape - 1.0) * log_x - rate * x,
                        (shape - 1.0) / x - rate,
                        [log_x, -x],
                    )
                })
        }
        DensityKind::InverseGamma => {
            term1(adj, n, p0, neg_lgamma)
                + term2(adj, n, p0, p1, shape_log_rate)
                + kernel(adj, n, x, [p0, p1], |x, [shape, scale]| {
                    if x <= 0.0 {
                        return (NEG_INF, 0.0, [0.0, 0.0]);
                    }
                    let log_x = x.ln();
                    let inv_x = 1.0 / x;
                    (
                        -(shape + 1.0) * log_x - scale * inv_x,
                        -(shape + 1.0) * inv_x + scale * inv_x * inv_x,
                        [-log_x, -inv_x],
                    )
                })
        }
        DensityKind::Beta => {
            let norm = |a: f64, b: f64| {
                if a > 0.0 && b > 0.0 {
                    let dab = digamma(a + b);
                    (
                        lgamma(a + b) - lgamma(a) - lgamma(b),
                        dab - digamma(a),
                        dab - digamma(b),
                    )
                } else {
                    (NEG_INF, 0.0, 0.0)
                }
            };
            term2(adj, n, p0, p1, norm)
                + kernel(adj, n, x, [p0, p1], |x, [a, b]| {
                    if x <= 0.0 || x >= 1.0 {
                        return (NEG_INF, 0.0, [0.0, 0.0]);
                    }
                    let log_x = x.ln();
                    let log_1mx = (-x).ln_1p();
                    (
                        (a - 1.0) * log_x + (b - 1.0) * log_1mx,
                        (a - 1.0) / x - (b - 1.0) / (1.0 - x),
                        [log_x, log_1mx],
                    )
                })
        }
        DensityKind::Uniform => {
            let norm = |lower: f64, upper: f64| {
                let width = upper - lower;
                if width > 0.0 {
                    (-width.ln(), 1.0 / width, -1.0 / width)
                } else {
                    (NEG_INF, 0.0, 0.0)
                }
            };
            term2(adj, n, p0, p1, norm)
                + kernel(adj, n, x, [p0, p1], |x, [lower, upper]| {
                    if x < lower || x > upper {
                        (NEG_INF, 0.0, [0.0, 0.0])
                    } else {
                        (0.0, 0.0, [0.0, 0.0])
                    }
                })
        }
        DensityKind::Laplace => {
            term1(adj, n, p1, neg_log_scale)
                + kernel(adj, n, x, [p0, p1], |x, [mu, scale]| {
                    let diff = x - mu;
                    let sign = if diff > 0.0 {
                        1.0
                    } else if diff < 0.0 {
                        -1.0
                    } else {
                        0.0
                    };
                    (
                        -diff.abs() / scale,
                        -sign / scale,
                        [sign / scale, diff.abs() / (scale * scale)],
                    )
                })
        }
        DensityKind::BernoulliLogit => kernel(adj, n, x, [p0], |y, [eta]| {
            // y ln σ(η) + (1 - y) ln(1 - σ(η)) = y η - softplus(η).
            let (softplus_eta, logistic_eta) = softplus_and_logistic(eta);
            (y * eta - softplus_eta, 0.0, [y - logistic_eta])
        }),
        DensityKind::BinomialLogit => kernel(adj, n, x, [p0, p1], |y, [trials, eta]| {
            let (softplus_eta, logistic_eta) = softplus_and_logistic(eta);
            (
                y * eta - trials * softplus_eta,
                0.0,
                [0.0, y - trials * logistic_eta],
            )
        }),
        DensityKind::PoissonLog => kernel(adj, n, x, [p0], |y, [eta]| {
            let rate = eta.exp();
            (y * eta - rate, 0.0, [y - rate])
        }),
        DensityKind::Logistic => {
            term1(adj, n, p1, neg_log_scale)
                + kernel(adj, n, x, [p0, p1], |x, [mu, sigma]| {
                    // -z - 2 ln(1 + exp(-z)), whose derivative in z is 1 - 2 logistic(z).
                    let z = (x - mu) / sigma;
                    let (softplus_neg_z, logistic_neg_z) = softplus_and_logistic(-z);
                    let q = 2.0 * logistic_neg_z - 1.0;
                    (
                        -z - 2.0 * softplus_neg_z,
                        q / sigma,
                        [-q / sigma, -q * z / sigma],
                    )
                })
        }
        DensityKind::Weibull => {
            term1(adj, n, p0, log_rate)
                + term2(adj, n, p0, p1, neg_shape_log_scale)
                + kernel(adj, n, x, [p0, p1], |x, [alpha, sigma]| {
                    if x < 0.0 || sigma <= 0.0 {
                        return (NEG_INF, 0.0, [0.0, 0.0]);
                    }
                    let log_x = x.ln();
                    let log_ratio = log_x - sigma.ln();
                    let w = (alpha * log_ratio).exp();
                    (
                        (alpha - 1.0) * log_x - w,
                        ((alpha - 1.0) - alpha * w) / x,
                        [log_x - w * log_ratio, alpha * w / sigma],
                    )
                })
        }
        DensityKind::ChiSquare => {
            term1(adj, n, p0, chi_square_nu)
                + kernel(adj, n, x, [p0], |x, [nu]| {
                    if x < 0.0 {
                        return (NEG_INF, 0.0, [0.0]);
                    }
                    let log_x = x.ln();
                    let c = 0.5 * nu - 1.0;
                    (c * log_x, c / x, [0.5 * log_x])
                })
                + term1(adj, n, x, neg_half_x)
        }
        DensityKind::Bernoulli => kernel(adj, n, x, [p0], |y, [p]| {
            if !(0.0..=1.0).contains(&p) {
                return (NEG_INF, 0.0, [0.0]);
            }
            if y == 1.0 {
                if p > 0.0 {
                    (p.ln(), 0.0, [1.0 / p])
                } else {
                    (NEG_INF, 0.0, [0.0])
                }
            } else if p < 1.0 {
                ((-p).ln_1p(), 0.0, [-1.0 / (1.0 - p)])
            } else {
                (NEG_INF, 0.0, [0.0])
            }
        }),
        DensityKind::Binomial => kernel(adj, n, x, [p0, p1], |y, [trials, p]| {
            if !(0.0..=1.0).contains(&p) {
                return (NEG_INF, 0.0, [0.0, 0.0]);
            }
            let (mut value, mut d) = (0.0, 0.0);
            if y > 0.0 {
                if p <= 0.0 {
                    return (NEG_INF, 0.0, [0.0, 0.0]);
                }
                value += y * p.ln();
                d += y / p;
            }
            let failures = trials - y;
            if failures > 0.0 {
                if p >= 1.0 {
                    return (NEG_INF, 0.0, [0.0, 0.0]);
                }
                value += failures * (-p).ln_1p();
                d -= failures / (1.0 - p);
            }
            (value, 0.0, [0.0, d])
        }),
        DensityKind::Poisson => kernel(adj, n, x, [p0], |y, [rate]| {
            if !(rate >= 0.0) || rate == f64::INFINITY {
                return (NEG_INF, 0.0, [0.0]);
            }
            if y == 0.0 {
                return (-rate, 0.0, [-1.0]);
            }
            if rate == 0.0 {
                return (NEG_INF, 0.0, [0.0]);
            }
            (y * rate.ln() - rate, 0.0, [y / rate - 1.0])
        }),
        DensityKind::NegBinomial2 => {
            term2(adj, n, x, p1, neg_binomial_choose)
                + term2(adj, n, x, p0, multiply_log)
                + kernel(adj, n, x, [p0, p1], |y, [mu, phi]| {
                    if !(mu > 0.0 && phi > 0.0) {
                        return (NEG_INF, 0.0, [0.0, 0.0]);
                    }
                    let s = mu + phi;
                    let log1p_ratio = (mu / phi).ln_1p();
                    (
                        -phi * log1p_ratio - y * s.ln(),
                        0.0,
                        [-(phi + y) / s, -log1p_ratio + (mu - y) / s],
                    )
                })
        }
        DensityKind::NegBinomial2Log => {
            term2(adj, n, x, p1, neg_binomial_choose)
                + kernel(adj, n, x, [p0, p1], |y, [eta, phi]| {
                    if !(phi > 0.0) {
                        return (NEG_INF, 0.0, [0.0, 0.0]);
                    }
                    // y eta - (phi + y) ln(1 + exp(eta - ln phi)) - y ln phi.
                    let log_phi = phi.ln();
                    let (softplus_t, logistic_t) = softplus_and_logistic(eta - log_phi);
                    (
                        y * eta - (phi + y) * softplus_t - y * log_phi,
                        0.0,
                        [
                            y - (phi + y) * logistic_t,
                            -softplus_t + ((phi + y) * logistic_t - y) / phi,
                        ],
                    )
                })
        }
    }
}

/// `log p(x)` of a Gaussian random walk, adding partial derivatives to `adj`.
/// All parameters are scalars; `x` is a vector of length `n >= 1`.
pub(crate) fn random_walk(
    adj: &mut [f64],
    n: usize,
    x: &Arg,
    sigma: &Arg,
    drift: &Arg,
    init_mu: &Arg,
    init_sigma: &Arg,
) -> f64 {
    let (s, d, m0, s0) = (
        sigma.vals[0],
        drift.vals[0],
        init_mu.vals[0],
        init_sigma.vals[0],
    );
    if !(s > 0.0 && s0 > 0.0) {
        return NEG_INF;
    }
    // First element.
    let z0 = (x.at(0) - m0) / s0;
    let mut total = -0.5 * z0 * z0;
    acc(adj, x, 0, -z0 / s0);
    acc(adj, init_mu, 0, z0 / s0);
    acc(adj, init_sigma, 0, z0 * z0 / s0);
    if init_sigma.adj.is_some() {
        total -= s0.ln();
        acc(adj, init_sigma, 0, -1.0 / s0);
    }
    // Steps.
    let steps = n - 1;
    let inv_s = 1.0 / s;
    let mut sum_z2 = 0.0;
    let mut sum_dz = 0.0;
    let mut prev = x.at(0);
    for t in 1..n {
        let cur = x.at(t);
        let z = (cur - prev - d) * inv_s;
        sum_z2 += z * z;
        sum_dz += z;
        let g = z * inv_s;
        acc(adj, x, t, -g);
        acc(adj, x, t - 1, g);
        prev = cur;
    }
    total -= 0.5 * sum_z2;
    acc(adj, drift, 0, sum_dz * inv_s);
    acc(adj, sigma, 0, sum_z2 * inv_s);
    if sigma.adj.is_some() {
        total -= steps as f64 * s.ln();
        acc(adj, sigma, 0, -(steps as f64) * inv_s);
    }
    total
}
