//! Every operation, transform and distribution: gradients against central finite differences
//! at random points, and log-density values against textbook formulas (up to a constant).

use super::*;
use crate::builder::ModelBuilder;
use crate::ir::{Constraint, Dist, Expr, Model};
use crate::limits::Limits;
use crate::rng::{ChainId, ChainRng, Seed};
use crate::special::lgamma;
use crate::validate::CheckedModel;

const POINTS: usize = 6;

fn evaluator(model: Model) -> Evaluator {
    CheckedModel::new(model, &Limits::default())
        .unwrap_or_else(|err| panic!("model does not check: {err}"))
        .evaluator()
}

fn random_point(rng: &mut ChainRng, dim: usize, radius: f64) -> Vec<f64> {
    (0..dim).map(|_| rng.uniform_in(-radius, radius)).collect()
}

/// Compares the gradient with central differences at random points of `(-radius, radius)^d`.
fn check_gradient_within(name: &str, model: Model, seed: u64, radius: f64) {
    let mut ev = evaluator(model);
    let dim = ev.dim();
    let mut rng = ChainRng::new(Seed(seed), ChainId(0));
    for _ in 0..POINTS {
        let theta = random_point(&mut rng, dim, radius);
        let mut grad = vec![0.0; dim];
        let lp = ev.logp_grad(&theta, &mut grad);
        assert!(lp.is_finite(), "{name}: log density {lp} at {theta:?}");
        assert_same_as_per_instruction(name, &mut ev, &theta, lp, &grad);
        for i in 0..dim {
            let h = 1e-5 * theta[i].abs().max(1.0);
            let mut up = theta.clone();
            let mut down = theta.clone();
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

/// The decoded steps give what the instructions one at a time give, bit for bit.
fn assert_same_as_per_instruction(
    name: &str,
    ev: &mut Evaluator,
    theta: &[f64],
    lp: f64,
    grad: &[f64],
) {
    let mut expected_grad = vec![0.0; grad.len()];
    let expected = ev.logp_grad_per_instruction(theta, &mut expected_grad);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        lp.to_bits(),
        expected.to_bits(),
        "{name}: log density {lp} against {expected}"
    );
    assert_eq!(
        bits(grad),
        bits(&expected_grad),
        "{name}: gradient {grad:?} against {expected_grad:?}"
    );
}

fn check_gradient(name: &str, model: Model, seed: u64) {
    check_gradient_within(name, model, seed, 1.5);
}

/// Compares log-density differences between random points with a reference implementation
/// of the same density on the unconstrained scale (Jacobian included).
fn check_value(name: &str, model: Model, seed: u64, reference: impl Fn(&[f64]) -> f64) {
    let mut ev = evaluator(model);
    let dim = ev.dim();
    let mut rng = ChainRng::new(Seed(seed), ChainId(1));
    let base = random_point(&mut rng, dim, 1.5);
    let offset = ev.logp(&base) - reference(&base);
    for _ in 0..POINTS {
        let theta = random_point(&mut rng, dim, 1.5);
        let got = ev.logp(&theta) - offset;
        let expected = reference(&theta);
        assert!(
            (got - expected).abs() <= 1e-9 * (1.0 + expected.abs()),
            "{name}: log density {got} (after removing the constant) but the reference gives {expected} at {theta:?}"
        );
    }
}

// ---------- operations ----------

/// `factor(sum(w * op(x)))` with x a vector parameter and data weights, so that adjoints differ
/// per element.
fn unary_model(op: fn(&Expr) -> Expr, constraint: Constraint) -> Model {
    let mut m = ModelBuilder::new("unary");
    let w = m.data_vector("w", vec![0.7, -1.3, 2.1]);
    let x = m.param_with("x", Some(3), constraint);
    m.factor((&w * op(&x)).sum());
    // Keep the density proper-looking for the evaluator (not needed for gradients).
    m.sample(&x, Dist::normal(0.0, 3.0));
    m.build()
}

#[test]
fn unary_operations_match_finite_differences() {
    type Op = fn(&Expr) -> Expr;
    let cases: [(&str, Op, Constraint); 17] = [
        ("neg", |x| -x, Constraint::Real),
        ("exp", Expr::exp, Constraint::Real),
        ("log", Expr::ln, Constraint::Positive),
        ("log1p", Expr::ln_1p, Constraint::Positive),
        ("expm1", Expr::exp_m1, Constraint::Real),
        ("softplus", Expr::softplus, Constraint::Real),
        ("logistic", Expr::logistic, Constraint::Real),
        ("sqrt", Expr::sqrt, Constraint::Positive),
        ("abs", Expr::abs, Constraint::Lower(0.5)),
        ("cumsum", Expr::cumsum, Constraint::Real),
        ("sum", |x| x.sum() * x.sum(), Constraint::Real),
        ("lgamma", Expr::lgamma, Constraint::Positive),
        ("log_phi", Expr::log_phi, Constraint::Real),
        // Far in the lower tail, where the asymptotic series takes over.
        (
            "log_phi of the lower tail",
            |x| (x * 30.0 - 45.0).log_phi(),
            Constraint::Real,
        ),
        // Zero gradient; the check itself is in `log_step_rejects_negative_values`.
        ("log_step", |x| x.log_step() + x, Constraint::Positive),
        // A scalar: times a constant so the weights still differ per element.
        ("log_sum_exp", |x| x.log_sum_exp() * x, Constraint::Real),
        (
            "log_sum_exp of a large vector",
            |x| (x * 400.0).log_sum_exp() + 0.0 * x,
            Constraint::Real,
        ),
    ];
    for (seed, (name, op, constraint)) in cases.into_iter().enumerate() {
        check_gradient(name, unary_model(op, constraint), seed as u64);
        // On a scalar, the evaluator's decoded steps run it.
        let mut m = ModelBuilder::new("unary scalar");
        let w = m.data_real("w", -1.3);
        let x = m.param_with("x", None, constraint);
        m.factor(op(&x) * &w * 0.7);
        m.sample(&x, Dist::normal(0.0, 3.0));
        check_gradient(&format!("{name} of a scalar"), m.build(), 50 + seed as u64);
    }
}

/// Scalar instructions are decoded into steps (the rest left to the per-instruction path),
/// and a chain of them, element reads included, matches finite differences (and the
/// per-instruction path, bit for bit, as every gradient check here).
#[test]
fn scalar_instructions_run_as_decoded_steps() {
    let mut m = ModelBuilder::new("recursion");
    let y = m.data_vector("y", vec![0.3, -1.2, 0.8, 2.1, -0.4]);
    let x = m.vector_param("x", 3);
    let rho = m.param_constrained("rho", Constraint::UnitInterval);
    let mut state = x.elem(0);
    for t in 0..5 {
        let innovation = y.elem(t) - &rho * &state;
        state = (innovation.pow(2.0) + x.elem(1).exp()).sqrt() / (1.0 + x.elem(2).pow(3.0))
            + state.max(&rho) * 0.5;
    }
    m.factor(state.ln_1p() - x.elem(2).pow(2.0));
    let model = m.build();
    let ev = evaluator(model.clone());
    let decoded = ev
        .plan
        .steps
        .iter()
        .filter(|step| !matches!(step, plan::Step::Inst(_)))
        .count();
    assert!(
        decoded * 2 > ev.plan.steps.len(),
        "{decoded} of {} instructions decoded",
        ev.plan.steps.len()
    );
    check_gradient_within("recursion", model, 31, 1.0);
}

#[test]
fn binary_operations_broadcast_both_ways() {
    type Op = fn(&Expr, &Expr) -> Expr;
    let ops: [(&str, Op); 7] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("pow", |a, b| a.pow(b)),
        // Random points almost surely have no ties, where the derivative jumps.
        ("max", |a, b| a.max(b) * a),
        ("min", |a, b| a.min(b) * b),
    ];
    for (k, (name, op)) in ops.into_iter().enumerate() {
        for (a_size, b_size) in [
            (None, None),
            (None, Some(3)),
            (Some(3), None),
            (Some(3), Some(3)),
        ] {
            let mut m = ModelBuilder::new("binary");
            let w = m.data_vector("w", vec![0.4, -0.9, 1.6]);
            // Positive operands keep pow and div smooth.
            let a = m.param_with("a", a_size, Constraint::Positive);
            let b = m.param_with("b", b_size, Constraint::Positive);
            m.factor((&w * op(&a, &b)).sum());
            let label = format!("{name} {a_size:?} {b_size:?}");
            check_gradient(&label, m.build(), 100 + k as u64);
        }
    }
}

/// `max`/`min` pick the right argument and send the whole gradient to it.
#[test]
fn max_and_min_select_one_argument() {
    let mut m = ModelBuilder::new("select");
    let a = m.vector_param("a", 3);
    let d = m.data_vector("d", vec![0.0, 0.0, 0.0]);
    let t1 = m.transformed("hi", a.max(&d));
    let t2 = m.transformed("lo", a.min(0.0));
    m.factor(t1.sum() * 2.0 + t2.sum() * 3.0);
    let mut ev = evaluator(m.build());
    let theta = [-1.0, 0.5, 2.0];
    let mut grad = [0.0; 3];
    let lp = ev.logp_grad(&theta, &mut grad);
    // 2 (0 + 0.5 + 2) + 3 (-1 + 0 + 0)
    assert_eq!(lp, 2.0);
    assert_eq!(grad, [3.0, 2.0, 2.0]);
    let mut out = vec![0.0; ev.n_outputs()];
    ev.write_outputs(&theta, &mut out);
    assert_eq!(out, [-1.0, 0.5, 2.0, 0.0, 0.5, 2.0, -1.0, 0.0, 0.0]);
}

/// `log_sum_exp` neither overflows nor loses small terms, and equals the plain formula on
/// moderate inputs.
#[test]
fn log_sum_exp_is_overflow_safe() {
    assert_eq!(log_sum_exp_all(&[1000.0, 1000.0]), 1000.0 + 2f64.ln());
    assert_eq!(log_sum_exp_all(&[-1000.0, -1000.0]), -1000.0 + 2f64.ln());
    assert_eq!(log_sum_exp_all(&[f64::NEG_INFINITY; 2]), f64::NEG_INFINITY);
    assert_eq!(log_sum_exp_all(&[f64::INFINITY, 1.0]), f64::INFINITY);
    assert!(log_sum_exp_all(&[f64::NAN, 1.0]).is_nan());
    let xs = [0.3, -1.2, 2.5, 0.0];
    let plain = xs.iter().map(|x: &f64| x.exp()).sum::<f64>().ln();
    assert!((log_sum_exp_all(&xs) - plain).abs() < 1e-14);
}

/// `elem`, `slice` and `concat` of parameters, data and constants: values and gradients.
#[test]
fn elem_slice_and_concat() {
    let mut m = ModelBuilder::new("structure");
    let x = m.vector_param("x", 4);
    let s = m.param("s");
    let d = m.data_vector("d", vec![0.5, -1.5]);
    let joined = Expr::concat([
        x.slice(1, 2),
        s.clone(),
        d.clone(),
        x.elem(3),
        Expr::Const(2.0),
    ]);
    let t = m.transformed("t", joined.clone());
    let w = m.data_vector("w", vec![0.7, -1.1, 1.9, 0.3, -0.4, 2.2, 0.9]);
    m.factor((&w * t.exp()).sum() + x.elem(0) * x.elem(2) + d.elem(1) * s.clone());
    m.sample(Expr::concat([x.slice(0, 4)]), Dist::normal(0.0, 2.0));
    let model = m.build();
    check_gradient("structure", model.clone(), 13);
    let mut ev = evaluator(model);
    let theta = [0.1, 0.2, 0.3, 0.4, -0.7];
    let mut out = vec![0.0; ev.n_outputs()];
    ev.write_outputs(&theta, &mut out);
    assert_eq!(out[5..], [0.2, 0.3, -0.7, 0.5, -1.5, 0.4, 2.0]);
}

#[test]
fn operations_with_data_and_constants() {
    let mut m = ModelBuilder::new("mixed");
    let d = m.data_vector("d", vec![0.5, 1.5, -2.0]);
    let x = m.vector_param("x", 3);
    let s = m.param("s");
    // Data on the left, constants on both sides, a folded data-only subexpression.
    let folded = (&d * 2.0).exp();
    m.factor((2.0 - &x * &d + folded * &x / 3.0 + 1.5 * &s).sum() + (0.5 / (&s * &s + 1.0)));
    check_gradient("mixed", m.build(), 7);
}

#[test]
fn reductions_matvec_and_gather() {
    let mut m = ModelBuilder::new("linear");
    let x_matrix = m.data_matrix(
        "X",
        vec![
            vec![1.0, -0.5, 2.0],
            vec![0.3, 0.8, -1.1],
            vec![-2.0, 0.1, 0.4],
            vec![0.0, 1.0, 1.0],
        ],
    );
    let idx = m.data_int_vector("idx", vec![2, 0, 0, 1, 2]);
    let w = m.data_vector("w", vec![1.0, -2.0, 0.5, 0.25, 3.0]);
    let beta = m.vector_param("beta", 3);
    let v = m.vector_param("v", 4);
    let eta = x_matrix.matvec(&beta);
    m.factor((&eta * &v).sum().pow(2.0) * 0.1);
    m.factor(eta.dot(v.exp()));
    m.factor((&w * beta.gather(&idx)).sum());
    m.factor(v.cumsum().dot(&v));
    check_gradient("linear", m.build(), 11);
}

// ---------- transforms ----------

#[test]
fn transforms_add_their_log_jacobians() {
    let constraints = [
        Constraint::Real,
        Constraint::Positive,
        Constraint::UnitInterval,
        Constraint::Lower(-1.5),
        Constraint::Upper(2.5),
        Constraint::Interval {
            lower: -1.0,
            upper: 4.0,
        },
    ];
    for (k, constraint) in constraints.into_iter().enumerate() {
        let mut m = ModelBuilder::new("transform");
        let x = m.param_with("x", Some(2), constraint);
        m.sample(&x, Dist::normal(0.3, 2.0));
        let model = m.build();
        check_gradient(&format!("{constraint:?}"), model.clone(), 200 + k as u64);
        check_value(&format!("{constraint:?}"), model, 200 + k as u64, |theta| {
            theta
                .iter()
                .map(|&u| {
                    let (x, log_jacobian) = match constraint {
                        Constraint::Real => (u, 0.0),
                        Constraint::Positive => (u.exp(), u),
                        Constraint::Lower(l) => (l + u.exp(), u),
                        Constraint::Upper(b) => (b - u.exp(), u),
                        Constraint::UnitInterval => {
                            let s = 1.0 / (1.0 + (-u).exp());
                            (s, (s * (1.0 - s)).ln())
                        }
                        Constraint::Interval { lower, upper } => {
                            let s = 1.0 / (1.0 + (-u).exp());
                            (
                                lower + (upper - lower) * s,
                                ((upper - lower) * s * (1.0 - s)).ln(),
                            )
                        }
                        _ => unreachable!("elementwise constraints only"),
                    };
                    -0.5 * ((x - 0.3) / 2.0f64).powi(2) + log_jacobian
                })
                .sum()
        });
    }
}

// ---------- distributions ----------

/// A continuous distribution with its value's constraint, arguments' constraints and a
/// textbook log density `log p(x | args)`.
struct Case {
    name: &'static str,
    value: Constraint,
    args: Vec<Constraint>,
    make: fn(Vec<Expr>) -> Dist,
    lpdf: fn(f64, &[f64]) -> f64,
}

fn ln_2pi() -> f64 {
    (2.0 * std::f64::consts::PI).ln()
}

fn continuous_cases() -> Vec<Case> {
    use Constraint::{Positive as Pos, Real, UnitInterval as Unit};
    vec![
        Case {
            name: "normal",
            value: Real,
            args: vec![Real, Pos],
            make: |a| Dist::normal(a[0].clone(), a[1].clone()),
            lpdf: |x, a| -0.5 * ((x - a[0]) / a[1]).powi(2) - a[1].ln() - 0.5 * ln_2pi(),
        },
        Case {
            name: "half_normal",
            value: Pos,
            args: vec![Pos],
            make: |a| Dist::half_normal(a[0].clone()),
            lpdf: |x, a| 2f64.ln() - 0.5 * (x / a[0]).powi(2) - a[0].ln() - 0.5 * ln_2pi(),
        },
        Case {
            name: "exponential",
            value: Pos,
            args: vec![Pos],
            make: |a| Dist::exponential(a[0].clone()),
            lpdf: |x, a| a[0].ln() - a[0] * x,
        },
        Case {
            name: "student_t",
            value: Real,
            args: vec![Pos, Real, Pos],
            make: |a| Dist::student_t(a[0].clone(), a[1].clone(), a[2].clone()),
            lpdf: |x, a| {
                let (nu, mu, sigma) = (a[0], a[1], a[2]);
                lgamma((nu + 1.0) / 2.0)
                    - lgamma(nu / 2.0)
                    - 0.5 * (nu * std::f64::consts::PI).ln()
                    - sigma.ln()
                    - (nu + 1.0) / 2.0 * (1.0 + ((x - mu) / sigma).powi(2) / nu).ln()
            },
        },
        Case {
            name: "cauchy",
            value: Real,
            args: vec![Real, Pos],
            make: |a| Dist::cauchy(a[0].clone(), a[1].clone()),
            lpdf: |x, a| -(std::f64::consts::PI * a[1] * (1.0 + ((x - a[0]) / a[1]).powi(2))).ln(),
        },
        Case {
            name: "half_cauchy",
            value: Pos,
            args: vec![Pos],
            make: |a| Dist::half_cauchy(a[0].clone()),
            lpdf: |x, a| (2.0 / (std::f64::consts::PI * a[0] * (1.0 + (x / a[0]).powi(2)))).ln(),
        },
        Case {
            name: "log_normal",
            value: Pos,
            args: vec![Real, Pos],
            make: |a| Dist::log_normal(a[0].clone(), a[1].clone()),
            lpdf: |x, a| {
                -x.ln() - a[1].ln() - 0.5 * ln_2pi() - 0.5 * ((x.ln() - a[0]) / a[1]).powi(2)
            },
        },
        Case {
            name: "gamma",
            value: Pos,
            args: vec![Pos, Pos],
            make: |a| Dist::gamma(a[0].clone(), a[1].clone()),
            lpdf: |x, a| a[0] * a[1].ln() - lgamma(a[0]) + (a[0] - 1.0) * x.ln() - a[1] * x,
        },
        Case {
            name: "inverse_gamma",
            value: Pos,
            args: vec![Pos, Pos],
            make: |a| Dist::inverse_gamma(a[0].clone(), a[1].clone()),
            lpdf: |x, a| a[0] * a[1].ln() - lgamma(a[0]) - (a[0] + 1.0) * x.ln() - a[1] / x,
        },
        Case {
            name: "beta",
            value: Unit,
            args: vec![Pos, Pos],
            make: |a| Dist::beta(a[0].clone(), a[1].clone()),
            lpdf: |x, a| {
                lgamma(a[0] + a[1]) - lgamma(a[0]) - lgamma(a[1])
                    + (a[0] - 1.0) * x.ln()
                    + (a[1] - 1.0) * (1.0 - x).ln()
            },
        },
        Case {
            name: "laplace",
            value: Real,
            args: vec![Real, Pos],
            make: |a| Dist::laplace(a[0].clone(), a[1].clone()),
            lpdf: |x, a| -(2.0 * a[1]).ln() - (x - a[0]).abs() / a[1],
        },
        Case {
            name: "uniform",
            value: Constraint::Interval {
                lower: -1.0,
                upper: 2.0,
            },
            args: vec![],
            make: |_| Dist::uniform(-1.0, 2.0),
            lpdf: |_, _| -(3f64).ln(),
        },
    ]
}

fn constrain_scalar(constraint: Constraint, u: f64) -> (f64, f64) {
    match constraint {
        Constraint::Real => (u, 0.0),
        Constraint::Positive => (u.exp(), u),
        Constraint::UnitInterval => {
            let s = 1.0 / (1.0 + (-u).exp());
            (s, (s * (1.0 - s)).ln())
        }
        Constraint::Interval { lower, upper } => {
            let s = 1.0 / (1.0 + (-u).exp());
            (
                lower + (upper - lower) * s,
                ((upper - lower) * s * (1.0 - s)).ln(),
            )
        }
        Constraint::Lower(l) => (l + u.exp(), u),
        Constraint::Upper(b) => (b - u.exp(), u),
        _ => unreachable!("elementwise constraints only"),
    }
}

/// The value is a vector parameter of length 3; each argument a scalar parameter, a vector
/// parameter, or a constant, in rotation, so that broadcast, elementwise and constant operand
/// paths are all exercised.
#[test]
fn continuous_distributions_match_formulas_and_finite_differences() {
    const N: usize = 3;
    for (seed, case) in continuous_cases().into_iter().enumerate() {
        for layout in 0..3usize {
            let mut m = ModelBuilder::new(case.name);
            let x = m.param_with("x", Some(N), case.value);
            // kinds[k]: 0 scalar parameter, 1 vector parameter, 2 constant.
            let kinds: Vec<usize> = (0..case.args.len()).map(|k| (k + layout) % 3).collect();
            let constants = [0.7, 1.9, 1.3];
            let mut args = Vec::new();
            for (k, (&constraint, &kind)) in case.args.iter().zip(&kinds).enumerate() {
                let name = format!("a{k}");
                args.push(match kind {
                    0 => m.param_with(&name, None, constraint),
                    1 => m.param_with(&name, Some(N), constraint),
                    _ => Expr::Const(constants[k]),
                });
            }
            m.sample(&x, (case.make)(args));
            let model = m.build();
            let label = format!("{} layout {layout}", case.name);
            check_gradient(&label, model.clone(), 300 + seed as u64);
            let value_constraint = case.value;
            let arg_constraints = case.args.clone();
            let lpdf = case.lpdf;
            check_value(&label, model, 300 + seed as u64, move |theta| {
                let mut total = 0.0;
                let mut xs = [0.0; N];
                for (i, x) in xs.iter_mut().enumerate() {
                    let (value, log_jacobian) = constrain_scalar(value_constraint, theta[i]);
                    *x = value;
                    total += log_jacobian;
                }
                let mut offset = N;
                let mut per_element = vec![[0.0; 3]; N];
                for (k, (&constraint, &kind)) in arg_constraints.iter().zip(&kinds).enumerate() {
                    match kind {
                        0 => {
                            let (value, log_jacobian) = constrain_scalar(constraint, theta[offset]);
                            total += log_jacobian;
                            per_element.iter_mut().for_each(|a| a[k] = value);
                            offset += 1;
                        }
                        1 => {
                            for a in per_element.iter_mut() {
                                let (value, log_jacobian) =
                                    constrain_scalar(constraint, theta[offset]);
                                total += log_jacobian;
                                a[k] = value;
                                offset += 1;
                            }
                        }
                        _ => per_element.iter_mut().for_each(|a| a[k] = constants[k]),
                    }
                }
                total
                    + xs.iter()
                        .zip(&per_element)
                        .map(|(&x, a)| lpdf(x, a))
                        .sum::<f64>()
            });
        }
    }
}

#[test]
fn discrete_likelihoods_match_formulas_and_finite_differences() {
    let ys = vec![1, 0, 1, 1, 0];
    let counts = vec![3, 0, 7, 1, 4];
    let trials = vec![5, 2, 9, 1, 4];
    type Build = fn(&mut ModelBuilder, &Expr) -> Dist;
    type Lpmf = fn(f64, f64, f64) -> f64;
    let cases: [(&str, Build, Lpmf, Vec<i64>); 3] = [
        (
            "bernoulli_logit",
            |_, eta| Dist::bernoulli_logit(eta),
            |y, _, eta| y * eta - (1.0 + eta.exp()).ln(),
            ys,
        ),
        (
            "binomial_logit",
            |m, eta| {
                let n = m.data_int_vector("n", vec![5, 2, 9, 1, 4]);
                Dist::binomial_logit(n, eta)
            },
            |y, n, eta| y * eta - n * (1.0 + eta.exp()).ln(),
            counts.clone(),
        ),
        (
            "poisson_log",
            |_, eta| Dist::poisson_log(eta),
            |y, _, eta| y * eta - eta.exp(),
            counts,
        ),
    ];
    for (seed, (name, build, lpmf, observed)) in cases.into_iter().enumerate() {
        let mut m = ModelBuilder::new(name);
        let y = m.data_int_vector("y", observed.clone());
        let a = m.param("a");
        let b = m.vector_param("b", 5);
        let eta = &a + &b * 0.8;
        let dist = build(&mut m, &eta);
        m.sample(&y, dist);
        let model = m.build();
        check_gradient(name, model.clone(), 400 + seed as u64);
        let trials = trials.clone();
        check_value(name, model, 400 + seed as u64, move |theta| {
            (0..5)
                .map(|i| {
                    lpmf(
                        observed[i] as f64,
                        trials[i] as f64,
                        theta[0] + 0.8 * theta[1 + i],
                    )
                })
                .sum()
        });
    }
}

#[test]
fn gaussian_random_walk_matches_formula_and_finite_differences() {
    for full in [false, true] {
        let mut m = ModelBuilder::new("grw");
        let sigma = m.param_constrained("sigma", Constraint::Positive);
        let x = m.vector_param("x", 6);
        let dist = if full {
            let drift = m.param("drift");
            let init_mu = m.param("init_mu");
            let init_sigma = m.param_constrained("init_sigma", Constraint::Positive);
            Dist::GaussianRandomWalk {
                sigma: sigma.clone(),
                drift: Some(drift),
                init_mu: Some(init_mu),
                init_sigma: Some(init_sigma),
            }
        } else {
            Dist::gaussian_random_walk(&sigma)
        };
        m.sample(&x, dist);
        let model = m.build();
        check_gradient(&format!("grw full={full}"), model.clone(), 500);
        check_value(&format!("grw full={full}"), model, 500, move |theta| {
            let sigma = theta[0].exp();
            let x = &theta[1..7];
            let (drift, init_mu, init_sigma, jacobian) = if full {
                (theta[7], theta[8], theta[9].exp(), theta[0] + theta[9])
            } else {
                (0.0, 0.0, sigma, theta[0])
            };
            let normal = |v: f64, m: f64, s: f64| -0.5 * ((v - m) / s).powi(2) - s.ln();
            let mut lp = jacobian + normal(x[0], init_mu, init_sigma);
            for t in 1..6 {
                lp += normal(x[t], x[t - 1] + drift, sigma);
            }
            lp
        });
    }
}

#[test]
fn outside_the_support_is_minus_infinity() {
    // An unconstrained parameter under a half-normal prior: negative values are outside.
    let mut m = ModelBuilder::new("support");
    let x = m.param("x");
    m.sample(&x, Dist::half_normal(1.0));
    let mut ev = evaluator(m.build());
    assert_eq!(ev.logp(&[-0.5]), f64::NEG_INFINITY);
    assert!(ev.logp(&[0.5]).is_finite());
    assert!(
        ev.explain(&[-0.5])
            .is_some_and(|why| why.contains("model[0]"))
    );
}

#[test]
fn outputs_are_constrained_values_and_transformed_parameters() {
    let mut m = ModelBuilder::new("outputs");
    let tau = m.param_constrained("tau", Constraint::Positive);
    let z = m.vector_param("z", 2);
    m.transformed("theta", &tau * &z);
    m.sample(&z, Dist::normal(0.0, 1.0));
    let mut ev = evaluator(m.build());
    let mut out = vec![0.0; ev.n_outputs()];
    ev.write_outputs(&[0.5f64.ln(), 1.0, -2.0], &mut out);
    assert_eq!(out, vec![0.5, 1.0, -2.0, 0.5, -1.0]);
}

/// `x^2` is the correctly rounded product `x * x`, also where `pow` may round the other way
/// (exact midpoints, found by squaring odd integers), and its derivative is `2x`.
#[test]
fn square_is_the_rounded_product() {
    let mut rng = ChainRng::new(Seed(7), ChainId(0));
    for _ in 0..10_000 {
        let x = rng.uniform_in(1.0, 2.0) * 2f64.powi(rng.uniform_in(-600.0, 600.0) as i32);
        // An odd integer in (2^26.5, 2^27) squares to an odd 54-bit integer: a midpoint.
        let m = 2.0 * rng.uniform_in(47_453_133.0, 67_108_863.0).floor() + 1.0;
        for x in [x, -x, m, m * 2f64.powi(-40)] {
            assert_eq!(square(x).to_bits(), (x * x).to_bits(), "square({x:e})");
        }
    }
    let mut m = ModelBuilder::new("square");
    let x = m.param("x");
    m.factor(x.pow(2.0));
    let mut ev = evaluator(m.build());
    let mut grad = [0.0];
    let x = 1.0 + 3.0 * f64::EPSILON;
    assert_eq!(ev.logp_grad(&[x], &mut grad).to_bits(), (x * x).to_bits());
    assert_eq!(grad[0], 2.0 * x);
}
