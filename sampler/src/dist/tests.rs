//! The distributions added for Stan programs (logistic, weibull, chi_square, bernoulli,
//! binomial, poisson, neg_binomial_2, neg_binomial_2_log): gradients against central finite
//! differences and log densities against the textbook formulas (up to a constant), with every
//! argument in turn a scalar parameter, a vector parameter and a constant; and the checks of
//! their data and constant arguments.

use crate::builder::ModelBuilder;
use crate::eval::{Evaluator, LogDensity};
use crate::ir::{Constraint, Dist, Expr, Model};
use crate::limits::Limits;
use crate::rng::{ChainId, ChainRng, Seed};
use crate::special::lgamma;
use crate::validate::CheckedModel;

const POINTS: usize = 6;
const N: usize = 4;

fn evaluator(model: Model) -> Evaluator {
    CheckedModel::new(model, &Limits::default())
        .unwrap_or_else(|err| panic!("model does not check: {err}"))
        .evaluator()
}

fn random_point(rng: &mut ChainRng, dim: usize) -> Vec<f64> {
    (0..dim).map(|_| rng.uniform_in(-1.5, 1.5)).collect()
}

/// The gradient against central differences, and `logp` against `reference` up to one
/// constant, at random points.
fn check(name: &str, model: Model, seed: u64, reference: impl Fn(&[f64]) -> f64) {
    let mut ev = evaluator(model);
    let dim = ev.dim();
    let mut rng = ChainRng::new(Seed(seed), ChainId(0));
    let base = random_point(&mut rng, dim);
    let offset = ev.logp(&base) - reference(&base);
    for _ in 0..POINTS {
        let theta = random_point(&mut rng, dim);
        let mut grad = vec![0.0; dim];
        let lp = ev.logp_grad(&theta, &mut grad);
        assert!(lp.is_finite(), "{name}: log density {lp} at {theta:?}");
        let expected = reference(&theta);
        assert!(
            (lp - offset - expected).abs() <= 1e-9 * (1.0 + expected.abs()),
            "{name}: log density {} (after removing the constant) but the formula gives {expected} at {theta:?}",
            lp - offset
        );
        for i in 0..dim {
            let h = 1e-5 * theta[i].abs().max(1.0);
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (ev.logp(&up) - ev.logp(&down)) / (2.0 * h);
            let tolerance = 1e-6 * (1.0 + fd.abs().max(grad[i].abs()));
            assert!(
                (fd - grad[i]).abs() <= tolerance,
                "{name}: d/dtheta[{i}] = {} but finite differences give {fd} at {theta:?}",
                grad[i]
            );
        }
    }
}

/// A constrained scalar and its log-Jacobian, written out independently of the lowering.
fn constrain(constraint: Constraint, u: f64) -> (f64, f64) {
    match constraint {
        Constraint::Real => (u, 0.0),
        Constraint::Positive => (u.exp(), u),
        Constraint::UnitInterval => {
            let s = 1.0 / (1.0 + (-u).exp());
            (s, (s * (1.0 - s)).ln())
        }
        other => unreachable!("not used here: {other:?}"),
    }
}

/// A distribution's test: the value's constraint (or observed data), its arguments'
/// constraints, a constructor and the full log density of one element.
struct Case {
    name: &'static str,
    /// `None`: the value is observed integer data `COUNTS` (or `BINARY`).
    value: Option<Constraint>,
    binary: bool,
    args: Vec<Constraint>,
    /// Constants used for an argument in the constant layout.
    constants: [f64; 3],
    make: fn(Vec<Expr>) -> Dist,
    log_density: fn(f64, &[f64]) -> f64,
}

const BINARY: [i64; N] = [1, 0, 0, 1];
const COUNTS: [i64; N] = [3, 0, 7, 1];
/// Trials of the binomial, constant data.
const TRIALS: [i64; N] = [5, 2, 9, 1];

/// `ln C(n, k)`.
fn log_choose(n: f64, k: f64) -> f64 {
    lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0)
}

fn cases() -> Vec<Case> {
    use Constraint::{Positive as Pos, Real, UnitInterval as Unit};
    vec![
        Case {
            name: "logistic",
            value: Some(Real),
            binary: false,
            args: vec![Real, Pos],
            constants: [0.3, 1.7, 0.0],
            make: |a| Dist::logistic(a[0].clone(), a[1].clone()),
            log_density: |x, a| {
                // exp(-z) / (sigma (1 + exp(-z))^2)
                let z = (x - a[0]) / a[1];
                ((-z).exp() / (a[1] * (1.0 + (-z).exp()).powi(2))).ln()
            },
        },
        Case {
            name: "weibull",
            value: Some(Pos),
            binary: false,
            args: vec![Pos, Pos],
            constants: [1.4, 0.8, 0.0],
            make: |a| Dist::weibull(a[0].clone(), a[1].clone()),
            log_density: |x, a| {
                let (alpha, sigma) = (a[0], a[1]);
                (alpha / sigma * (x / sigma).powf(alpha - 1.0)).ln() - (x / sigma).powf(alpha)
            },
        },
        Case {
            name: "chi_square",
            value: Some(Pos),
            binary: false,
            args: vec![Pos],
            constants: [2.5, 0.0, 0.0],
            make: |a| Dist::chi_square(a[0].clone()),
            log_density: |x, a| {
                let k = a[0];
                (x.powf(k / 2.0 - 1.0) * (-x / 2.0).exp() / 2f64.powf(k / 2.0)).ln()
                    - lgamma(k / 2.0)
            },
        },
        Case {
            name: "bernoulli",
            value: None,
            binary: true,
            args: vec![Unit],
            constants: [0.35, 0.0, 0.0],
            make: |a| Dist::bernoulli(a[0].clone()),
            log_density: |y, a| {
                if y == 1.0 {
                    a[0].ln()
                } else {
                    (1.0 - a[0]).ln()
                }
            },
        },
        Case {
            name: "binomial",
            value: None,
            binary: false,
            args: vec![Unit],
            constants: [0.6, 0.0, 0.0],
            // The trials are prepended by the test (data).
            make: |a| Dist::binomial(a[0].clone(), a[1].clone()),
            log_density: |y, a| {
                let (n, p) = (a[0], a[1]);
                log_choose(n, y) + (p.powf(y) * (1.0 - p).powf(n - y)).ln()
            },
        },
        Case {
            name: "poisson",
            value: None,
            binary: false,
            args: vec![Pos],
            constants: [2.2, 0.0, 0.0],
            make: |a| Dist::poisson(a[0].clone()),
            log_density: |y, a| y * a[0].ln() - a[0] - lgamma(y + 1.0),
        },
        Case {
            name: "neg_binomial_2",
            value: None,
            binary: false,
            args: vec![Pos, Pos],
            constants: [2.5, 3.5, 0.0],
            make: |a| Dist::neg_binomial_2(a[0].clone(), a[1].clone()),
            log_density: |y, a| {
                let (mu, phi) = (a[0], a[1]);
                log_choose(y + phi - 1.0, y)
                    + y * (mu / (mu + phi)).ln()
                    + phi * (phi / (mu + phi)).ln()
            },
        },
        Case {
            name: "neg_binomial_2_log",
            value: None,
            binary: false,
            args: vec![Real, Pos],
            constants: [0.9, 3.5, 0.0],
            make: |a| Dist::neg_binomial_2_log(a[0].clone(), a[1].clone()),
            log_density: |y, a| {
                let (mu, phi) = (a[0].exp(), a[1]);
                log_choose(y + phi - 1.0, y)
                    + y * (mu / (mu + phi)).ln()
                    + phi * (phi / (mu + phi)).ln()
            },
        },
    ]
}

/// The value: a vector parameter of length `N` or observed data; each argument a scalar
/// parameter, a vector parameter, or a constant, in rotation, so that broadcast, elementwise
/// and constant operand paths are all exercised (a layout where everything is constant
/// is skipped: it adds nothing).
#[test]
fn new_distributions_match_formulas_and_finite_differences() {
    for (seed, case) in cases().into_iter().enumerate() {
        for layout in 0..3usize {
            let mut m = ModelBuilder::new(case.name);
            let observed: Option<Vec<i64>> = match case.value {
                Some(_) => None,
                None if case.binary => Some(BINARY.to_vec()),
                None => Some(COUNTS.to_vec()),
            };
            let x = match (&observed, case.value) {
                (Some(values), _) => m.data_int_vector("y", values.clone()),
                (None, Some(constraint)) => m.param_with("x", Some(N), constraint),
                (None, None) => unreachable!("a value is data or a parameter"),
            };
            let kinds: Vec<usize> = (0..case.args.len()).map(|k| (k + layout) % 3).collect();
            if observed.is_some() && kinds.iter().all(|&kind| kind == 2) {
                continue;
            }
            let mut args = Vec::new();
            if case.name == "binomial" {
                args.push(m.data_int_vector("trials", TRIALS.to_vec()));
            }
            for (k, (&constraint, &kind)) in case.args.iter().zip(&kinds).enumerate() {
                let name = format!("a{k}");
                args.push(match kind {
                    0 => m.param_with(&name, None, constraint),
                    1 => m.param_with(&name, Some(N), constraint),
                    _ => Expr::Const(case.constants[k]),
                });
            }
            m.sample(&x, (case.make)(args));
            let label = format!("{} layout {layout}", case.name);
            let value = case.value;
            let arg_constraints = case.args.clone();
            let constants = case.constants;
            let log_density = case.log_density;
            let binomial = case.name == "binomial";
            check(&label, m.build(), 700 + seed as u64, move |theta| {
                let mut total = 0.0;
                let mut offset = 0;
                let xs: Vec<f64> = match (&observed, value) {
                    (Some(values), _) => values.iter().map(|&v| v as f64).collect(),
                    (None, Some(constraint)) => {
                        offset = N;
                        theta[..N]
                            .iter()
                            .map(|&u| {
                                let (x, log_jacobian) = constrain(constraint, u);
                                total += log_jacobian;
                                x
                            })
                            .collect()
                    }
                    (None, None) => unreachable!(),
                };
                let mut per_element = vec![Vec::new(); N];
                if binomial {
                    for (i, a) in per_element.iter_mut().enumerate() {
                        a.push(TRIALS[i] as f64);
                    }
                }
                for (k, (&constraint, &kind)) in arg_constraints.iter().zip(&kinds).enumerate() {
                    match kind {
                        0 => {
                            let (v, log_jacobian) = constrain(constraint, theta[offset]);
                            total += log_jacobian;
                            per_element.iter_mut().for_each(|a| a.push(v));
                            offset += 1;
                        }
                        1 => {
                            for a in per_element.iter_mut() {
                                let (v, log_jacobian) = constrain(constraint, theta[offset]);
                                total += log_jacobian;
                                a.push(v);
                                offset += 1;
                            }
                        }
                        _ => per_element.iter_mut().for_each(|a| a.push(constants[k])),
                    }
                }
                total
                    + xs.iter()
                        .zip(&per_element)
                        .map(|(&x, a)| log_density(x, a))
                        .sum::<f64>()
            });
        }
    }
}

/// Stan keeps a term when a parameter is in it: with only `phi` a parameter, the negative
/// binomial's `ln C(y + phi - 1, y)` counts in full; the binomial's and the Poisson's
/// normalising terms of data alone are dropped.
#[test]
fn dropped_terms_are_those_of_data_alone() {
    let mut m = ModelBuilder::new("nb_phi");
    let y = m.data_int_vector("y", vec![4]);
    let phi = m.param_with("phi", None, Constraint::Positive);
    m.sample(&y, Dist::neg_binomial_2(2.0, &phi));
    let mut ev = evaluator(m.build());
    let (mu, phi, y) = (2.0f64, 1.5f64.exp(), 4.0);
    let expected = lgamma(y + phi)
        - lgamma(y + 1.0)
        - lgamma(phi)
        - phi * (1.0 + mu / phi).ln()
        - y * (mu + phi).ln()
        + 1.5;
    let lp = ev.logp(&[1.5]);
    assert!((lp - expected).abs() < 1e-12, "{lp} vs {expected}");

    let mut m = ModelBuilder::new("poisson_rate");
    let y = m.data_int_vector("y", vec![3, 5]);
    let rate = m.param_with("rate", None, Constraint::Positive);
    m.sample(&y, Dist::poisson(&rate));
    let mut ev = evaluator(m.build());
    let rate = 0.4f64.exp();
    let expected = 8.0 * rate.ln() - 2.0 * rate + 0.4;
    let lp = ev.logp(&[0.4]);
    assert!((lp - expected).abs() < 1e-12, "{lp} vs {expected}");
}

/// Observed values outside the support, and constant arguments outside their domains, are
/// refused when the model is checked, naming the distribution.
#[test]
fn bad_data_and_constants_are_refused() {
    type Build = fn(&mut ModelBuilder, &Expr) -> (Expr, Dist);
    let refused: [(&str, Build, &str); 9] = [
        (
            "bernoulli of 2",
            |m, p| (m.data_int_vector("y", vec![0, 2]), Dist::bernoulli(p)),
            "0 or 1",
        ),
        (
            "binomial above its trials",
            |m, p| {
                let n = m.data_int_vector("n", vec![3, 3]);
                (m.data_int_vector("y", vec![1, 4]), Dist::binomial(n, p))
            },
            "0..=trials",
        ),
        (
            "poisson of a fraction",
            |m, rate| (m.data_vector("y", vec![1.5]), Dist::poisson(rate)),
            "integer",
        ),
        (
            "neg_binomial_2 of a negative count",
            |m, mu| {
                (
                    m.data_int_vector("y", vec![-1]),
                    Dist::neg_binomial_2(mu, 2.0),
                )
            },
            "integer",
        ),
        (
            "weibull of a negative value",
            |m, a| (m.data_vector("y", vec![-0.5]), Dist::weibull(a, 1.0)),
            "x >= 0",
        ),
        (
            "chi_square of a negative value",
            |m, nu| (m.data_vector("y", vec![-0.5]), Dist::chi_square(nu)),
            "x >= 0",
        ),
        (
            "bernoulli with a constant p above 1",
            |m, _| (m.data_int_vector("y", vec![1]), Dist::bernoulli(1.5)),
            "in [0, 1]",
        ),
        (
            "poisson with a negative constant rate",
            |m, _| (m.data_int_vector("y", vec![1]), Dist::poisson(-1.0)),
            ">= 0",
        ),
        (
            "neg_binomial_2_log with phi 0",
            |m, eta| {
                (
                    m.data_int_vector("y", vec![1]),
                    Dist::neg_binomial_2_log(eta, 0.0),
                )
            },
            "> 0",
        ),
    ];
    for (name, build, expected) in refused {
        let mut m = ModelBuilder::new("refused");
        let a = m.param_with("a", None, Constraint::UnitInterval);
        let (y, dist) = build(&mut m, &a);
        m.sample(&y, dist);
        let err = CheckedModel::new(m.build(), &Limits::default())
            .err()
            .unwrap_or_else(|| panic!("{name}: the model checked"));
        let message = err.to_string();
        assert!(
            message.contains(expected),
            "{name}: {message} does not say {expected}"
        );
    }
    // A discrete distribution over a parameter is refused.
    let mut m = ModelBuilder::new("refused");
    let k = m.param_with("k", None, Constraint::Positive);
    m.sample(&k, Dist::poisson(2.0));
    assert!(CheckedModel::new(m.build(), &Limits::default()).is_err());
}

/// Parameter values outside a distribution's domain give `-inf`, not NaN.
#[test]
fn parameters_outside_their_domain_give_minus_infinity() {
    let mut m = ModelBuilder::new("domain");
    let y = m.data_int_vector("y", vec![1, 0]);
    let p = m.param("p");
    m.sample(&y, Dist::bernoulli(&p));
    let mut ev = evaluator(m.build());
    assert_eq!(ev.logp(&[1.5]), f64::NEG_INFINITY);
    assert_eq!(ev.logp(&[-0.1]), f64::NEG_INFINITY);
    assert!(ev.logp(&[0.3]).is_finite());

    let mut m = ModelBuilder::new("domain");
    let y = m.data_int_vector("y", vec![2]);
    let phi = m.param("phi");
    m.sample(&y, Dist::neg_binomial_2(1.0, &phi));
    let mut ev = evaluator(m.build());
    assert_eq!(ev.logp(&[-1.0]), f64::NEG_INFINITY);
    assert!(ev.logp(&[1.0]).is_finite());
}

/// The JSON names are Stan's.
#[test]
fn json_names_are_stans() {
    for (dist, name) in [
        (Dist::logistic(0.0, 1.0), "logistic"),
        (Dist::weibull(1.0, 1.0), "weibull"),
        (Dist::chi_square(1.0), "chi_square"),
        (Dist::bernoulli(0.5), "bernoulli"),
        (Dist::binomial(3.0, 0.5), "binomial"),
        (Dist::poisson(1.0), "poisson"),
        (Dist::neg_binomial_2(1.0, 1.0), "neg_binomial_2"),
        (Dist::neg_binomial_2_log(1.0, 1.0), "neg_binomial_2_log"),
    ] {
        let json = serde_json::to_value(&dist).expect("serialises");
        assert!(json.get(name).is_some(), "{json}");
        assert_eq!(dist.name(), name);
        let back: Dist = serde_json::from_value(json).expect("deserialises");
        assert_eq!(back, dist);
    }
}
