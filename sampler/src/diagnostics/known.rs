//! Models whose posteriors are known in closed form, each with the [`Truth`] of its checked
//! columns: the posterior tests of the CPU and the GPU samplers run every configuration on
//! these, and a new sampler path can be checked the same way.

use super::truth::Truth;
use crate::{
    ChainId, ChainRng, CheckedModel, Constraint, Dist, Limits, ModelBuilder, Seed, digamma,
};

/// A model and the truths of its checked columns.
#[derive(Clone, Debug)]
pub struct Known {
    pub model: CheckedModel,
    pub truths: Vec<Truth>,
}

impl Known {
    /// `builder`'s model and the truths `truths` gives as `(name, index, mean, sd)`.
    fn new(builder: ModelBuilder, truths: Vec<(&str, Option<usize>, f64, Option<f64>)>) -> Known {
        let model =
            CheckedModel::new(builder.build(), &Limits::default()).expect("a known model is valid");
        let truths = truths
            .into_iter()
            .map(|(name, index, mean, sd)| {
                Truth::new(&model, name, index, mean, sd)
                    .unwrap_or_else(|| panic!("{}: no column {name} {index:?}", model.name()))
            })
            .collect();
        Known { model, truths }
    }
}

/// `mu ~ N(1, 0.5)`, `y_i ~ N(mu, 2)` for 20 fixed observations: the posterior of `mu` is
/// normal with precision `1/0.5² + 20/2²`. The prior and the data carry similar weight
/// (precision 4 against 5), so an error in either term moves the posterior.
pub fn conjugate_normal() -> Known {
    let (prior_mean, prior_sd, sigma): (f64, f64, f64) = (1.0, 0.5, 2.0);
    let mut data_rng = ChainRng::new(Seed(20_261), ChainId(0));
    let y: Vec<f64> = (0..20).map(|_| 1.7 + sigma * data_rng.normal()).collect();
    let precision = 1.0 / prior_sd.powi(2) + y.len() as f64 / sigma.powi(2);
    let posterior_mean =
        (prior_mean / prior_sd.powi(2) + y.iter().sum::<f64>() / sigma.powi(2)) / precision;
    let posterior_sd = precision.sqrt().recip();
    let mut m = ModelBuilder::new("conjugate_normal");
    let y_data = m.data_vector("y", y);
    let mu = m.param("mu");
    m.sample(&mu, Dist::normal(prior_mean, prior_sd));
    m.sample(&y_data, Dist::normal(&mu, sigma));
    Known::new(m, vec![("mu", None, posterior_mean, Some(posterior_sd))])
}

/// `rate ~ Gamma(2, 1)` (a positive parameter, sampled as `log(rate)` with its Jacobian),
/// counts `y_i ~ Poisson(rate)` written as `poisson_log(log(rate))`: the posterior is
/// `Gamma(2 + Σy, 1 + n)`. Its shape is small (6), so a missing or doubled log-Jacobian
/// (which turns the shape into 5 or 7) moves the mean by 0.4 posterior sd.
pub fn gamma_poisson() -> Known {
    let (prior_shape, prior_rate) = (2.0, 1.0);
    let counts: Vec<i64> = vec![0, 1, 0, 2, 1];
    let shape = prior_shape + counts.iter().sum::<i64>() as f64;
    let rate_parameter = prior_rate + counts.len() as f64;
    let mut m = ModelBuilder::new("gamma_poisson");
    let y = m.data_int_vector("y", counts);
    let rate = m.param_constrained("rate", Constraint::Positive);
    let log_rate = m.transformed("log_rate", rate.ln());
    m.sample(&rate, Dist::gamma(prior_shape, prior_rate));
    m.sample(&y, Dist::poisson_log(&log_rate));
    Known::new(
        m,
        vec![
            (
                "rate",
                None,
                shape / rate_parameter,
                Some(shape.sqrt() / rate_parameter),
            ),
            // E[log X] = ψ(shape) − ln(rate) for X ~ Gamma(shape, rate).
            ("log_rate", None, digamma(shape) - rate_parameter.ln(), None),
        ],
    )
}

/// Neal's funnel, non-centred: `y ~ N(0, 3)`, `x_raw ~ N(0, 1)^dim`, `x = exp(y/2) x_raw`.
/// The sampled density is a standard-normal-like product, so every NUTS must get it right;
/// the funnel's own marginals are checked through `x`'s means. The sd of `x` (√e^4.5 ≈ 9.5)
/// is not checked: `x` has such heavy tails that its sd's MCSE is unreliable.
pub fn noncentred_funnel(dim: usize) -> Known {
    let mut m = ModelBuilder::new("funnel_noncentred");
    let y = m.param("y");
    let x_raw = m.vector_param("x_raw", dim);
    m.transformed("x", (&y * 0.5).exp() * &x_raw);
    m.sample(&y, Dist::normal(0.0, 3.0));
    m.sample(&x_raw, Dist::normal(0.0, 1.0));
    let mut truths = vec![("y", None, 0.0, Some(3.0))];
    for i in 0..dim {
        truths.push(("x_raw", Some(i), 0.0, Some(1.0)));
        truths.push(("x", Some(i), 0.0, None));
    }
    Known::new(m, truths)
}

/// A `dim`-dimensional standard normal: every coordinate's mean and sd.
pub fn standard_normal(dim: usize) -> Known {
    let mut m = ModelBuilder::new(format!("standard_normal_{dim}d"));
    let x = m.vector_param("x", dim);
    m.sample(&x, Dist::normal(0.0, 1.0));
    let truths = (0..dim).map(|i| ("x", Some(i), 0.0, Some(1.0))).collect();
    Known::new(m, truths)
}

/// A bivariate normal with correlation `rho`, written as `x1 ~ N(0, 1)`,
/// `x2 ~ N(rho x1, √(1 − rho²))`. Its product `x1·x2` has mean `rho` and sd `√(1 + rho²)`
/// (Isserlis).
pub fn correlated_normal(rho: f64) -> Known {
    let mut m = ModelBuilder::new("correlated_normal");
    let x1 = m.param("x1");
    let x2 = m.param("x2");
    m.transformed("product", &x1 * &x2);
    m.sample(&x1, Dist::normal(0.0, 1.0));
    m.sample(&x2, Dist::normal(rho * &x1, (1.0 - rho * rho).sqrt()));
    Known::new(
        m,
        vec![
            ("x1", None, 0.0, Some(1.0)),
            ("x2", None, 0.0, Some(1.0)),
            ("product", None, rho, Some((1.0 + rho * rho).sqrt())),
        ],
    )
}

/// A scalar `mu ~ N(0, 1)` and then a Gaussian random walk `x` of `len` unit steps:
/// `x_t ~ N(0, √(t + 1))`. The walk starts at coordinate 1, off any multiple of a GPU chain's
/// lanes, so a chain split across lanes reads it through a rotation.
pub fn random_walk(len: usize) -> Known {
    let mut m = ModelBuilder::new("random_walk");
    let mu = m.param("mu");
    let x = m.vector_param("x", len);
    m.sample(&mu, Dist::normal(0.0, 1.0));
    m.sample(&x, Dist::gaussian_random_walk(1.0));
    let mut truths = vec![("mu", None, 0.0, Some(1.0))];
    for t in 0..len {
        truths.push(("x", Some(t), 0.0, Some(((t + 1) as f64).sqrt())));
    }
    Known::new(m, truths)
}
