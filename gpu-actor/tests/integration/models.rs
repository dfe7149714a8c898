//! The models the tests run: the benchmark models of `models/` and small models that use every
//! operation, transform and distribution of the IR (after sampler's eval/tests.rs).

use std::path::PathBuf;

use gpu_actor::Precision;
use sampler::{
    BinaryOp, CheckedModel, Constraint, Dist, Expr, Limits, Model, ModelBuilder, UnaryOp,
};

pub struct TestModel {
    pub name: String,
    pub model: CheckedModel,
    /// Precisions to test it in.
    pub precisions: &'static [Precision],
}

const BOTH: &[Precision] = &[Precision::F32, Precision::F64];
const F64_ONLY: &[Precision] = &[Precision::F64];

fn checked(model: Model) -> CheckedModel {
    let name = model.name.clone();
    CheckedModel::new(model, &Limits::default())
        .unwrap_or_else(|err| panic!("test model {name} does not check: {err}"))
}

fn test_model(name: &str, model: Model, precisions: &'static [Precision]) -> TestModel {
    TestModel {
        name: name.to_owned(),
        model: checked(model),
        precisions,
    }
}

/// Every model of the repository's `models/` directory.
pub fn benchmark_models() -> Vec<TestModel> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 8,
        "expected the 8 benchmark models in {}",
        dir.display()
    );
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
            let model = CheckedModel::from_json(&text, &Limits::default())
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            TestModel {
                name: model.name().to_owned(),
                model,
                precisions: BOTH,
            }
        })
        .collect()
}

/// Models that together use every instruction, transform and density.
pub fn op_models() -> Vec<TestModel> {
    let mut models = vec![
        test_model("unary", unary(), BOTH),
        test_model("binary", binary(), BOTH),
        test_model("mixed", mixed(), BOTH),
        test_model("linear", linear(), BOTH),
        test_model("transforms", transforms(), BOTH),
        test_model("discrete", discrete(), BOTH),
        test_model("random_walks", random_walks(), BOTH),
        test_model("observed", observed(), BOTH),
        test_model("regression", regression(), BOTH),
        test_model("regression_quads", regression_quads(), BOTH),
        test_model("wide_range", wide_range(), F64_ONLY),
    ];
    for case in continuous_cases() {
        models.push(test_model(
            &format!("dist_{}", case.name),
            distribution(&case),
            BOTH,
        ));
    }
    models
}

pub fn all() -> Vec<TestModel> {
    let mut models = benchmark_models();
    models.extend(op_models());
    models.extend(stan_models());
    models
}

/// Models of what Stan programs added to the IR: the instructions of IR v2 (`lgamma`, `max`,
/// `min`, `log_sum_exp`, `concat`) and the distributions logistic, weibull, chi_square,
/// bernoulli, binomial, poisson, neg_binomial_2 and neg_binomial_2_log.
pub fn stan_models() -> Vec<TestModel> {
    let mut models = vec![
        test_model("v2_elementwise", v2_elementwise(), BOTH),
        test_model("v2_reductions", v2_reductions(), BOTH),
        test_model("v2_split", v2_split(), BOTH),
        test_model("v2_log_phi", v2_log_phi(), BOTH),
    ];
    models.extend(
        [
            "bernoulli_binomial",
            "poisson",
            "neg_binomial_2",
            "neg_binomial_2_log",
        ]
        .iter()
        .map(|family| test_model(&format!("counts_{family}"), counts(family), BOTH)),
    );
    for case in stan_continuous_cases() {
        models.push(test_model(
            &format!("dist_{}", case.name),
            distribution(&case),
            BOTH,
        ));
    }
    models
}

fn un(op: UnaryOp, a: &Expr) -> Expr {
    Expr::Unary(op, Box::new(a.clone()))
}

fn bin(op: BinaryOp, a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
    Expr::Binary(op, Box::new(a.into()), Box::new(b.into()))
}

/// The new elementwise instructions with parameters, data and constants as operands,
/// broadcasting both ways: `lgamma` of positive and of any reals (its reflection), `max` and
/// `min`.
fn v2_elementwise() -> Model {
    let mut m = ModelBuilder::new("v2_elementwise");
    let w = m.data_vector("w", vec![0.3, -0.7, 1.1, 0.5]);
    let d = m.data_vector("d", vec![0.2, -1.3, 0.8, 2.1]);
    let x = m.vector_param("x", 4);
    let p = m.param_with("p", Some(4), Constraint::Positive);
    let a = m.param("a");
    m.factor((&w * un(UnaryOp::Lgamma, &p)).sum());
    m.factor((&w * un(UnaryOp::Lgamma, &(&x * 0.45 + 0.03))).sum());
    m.factor((&w * bin(BinaryOp::Max, &x, &p)).sum());
    m.factor((&w * bin(BinaryOp::Min, &x, &a)).sum());
    m.factor((&w * bin(BinaryOp::Max, 0.25, &x)).sum());
    m.factor((&w * bin(BinaryOp::Min, &d, &x)).sum());
    m.sample(&x, Dist::normal(0.0, 1.0));
    m.sample(&a, Dist::normal(0.0, 1.0));
    m.build()
}

/// `log_phi` over both tails (a parameter times 12, so that draws reach the far lower tail
/// and the upper one) and `log_step` of a positive parameter (a bound that always holds).
fn v2_log_phi() -> Model {
    let mut m = ModelBuilder::new("v2_log_phi");
    let w = m.data_vector("w", vec![0.3, -0.7, 1.1, 0.5]);
    let d = m.data_vector("d", vec![-30.0, -2.0, 0.5, 6.0]);
    let x = m.vector_param("x", 4);
    let p = m.param_with("p", Some(4), Constraint::Positive);
    m.factor((&w * un(UnaryOp::LogPhi, &(&x * 12.0 + &d))).sum());
    m.factor(un(UnaryOp::Sum, &un(UnaryOp::LogStep, &p)));
    m.sample(&x, Dist::normal(0.0, 1.0));
    m.sample(&p, Dist::exponential(1.0));
    m.build()
}

/// `log_sum_exp` of a vector and of a scalar, and a concatenation of a scalar parameter, a
/// vector parameter, a constant, data and a computed vector, read whole and by element (a
/// gather).
fn v2_reductions() -> Model {
    let mut m = ModelBuilder::new("v2_reductions");
    let d = m.data_vector("d", vec![0.2, -1.3, 0.8, 2.1]);
    let x = m.vector_param("x", 4);
    let p = m.param_with("p", Some(2), Constraint::Positive);
    let a = m.param("a");
    m.factor(un(UnaryOp::LogSumExp, &(&x * 2.0 + &d)));
    m.factor(&un(UnaryOp::LogSumExp, &a) * 0.5);
    let c = Expr::Concat(vec![
        a.clone(),
        x.clone(),
        Expr::Const(2.0),
        d.clone(),
        p.ln(),
    ]);
    m.sample(&c, Dist::normal(0.5, 2.0));
    m.sample(Expr::Elem(Box::new(c), 5), Dist::normal(&a, 1.5));
    m.sample(&x, Dist::normal(0.0, 1.0));
    m.build()
}

/// The elementwise new instructions over a long computed vector, which split chains split
/// across their lanes (fused into the density's loop).
fn v2_split() -> Model {
    let mut m = ModelBuilder::new("v2_split");
    let d = m.data_vector("d", vec![0.4, 1.3, 2.2, 0.7, 3.1, 1.9, 0.6, 2.5]);
    let y = m.data_vector("y", vec![-0.5, 0.3, 1.2, 0.1, 1.7, 0.4, -0.2, 1.1]);
    let mu = m.param("mu");
    let s = m.param("s");
    let v = un(UnaryOp::Lgamma, &(&d * mu.exp()));
    let v = bin(BinaryOp::Max, &v, &s);
    let v = bin(BinaryOp::Min, &v, &d);
    m.sample(&y, Dist::normal(&v, 1.5));
    m.sample(&mu, Dist::normal(0.0, 1.0));
    m.sample(&s, Dist::normal(0.0, 1.0));
    m.build()
}

/// The count distributions with probabilities, rates and means each a scalar parameter, a
/// vector parameter or a constant, and a single observation (every operand a scalar); one
/// model per family, so that each compiles within the budget in f64 on a software adapter.
fn counts(family: &str) -> Model {
    use Constraint::{Positive as Pos, UnitInterval as Unit};
    let mut m = ModelBuilder::new(family);
    let ys = m.data_int_vector("ys", vec![1, 0, 1, 1, 0]);
    let counts = m.data_int_vector("counts", vec![3, 0, 7, 1, 4]);
    let trials = m.data_int_vector("trials", vec![5, 2, 9, 1, 4]);
    let one = m.data_int_vector("one", vec![3]);
    match family {
        "bernoulli_binomial" => {
            let p_s = m.param_with("p_s", None, Unit);
            let p_v = m.param_with("p_v", Some(5), Unit);
            m.sample(&ys, Dist::bernoulli(&p_v));
            m.sample(&ys, Dist::bernoulli(&p_s));
            m.sample(&counts, Dist::binomial(&trials, &p_v));
            m.sample(&counts, Dist::binomial(&trials, &p_s));
            m.sample(&one, Dist::binomial(5.0, &p_s));
        }
        "poisson" => {
            let rate_s = m.param_with("rate_s", None, Pos);
            let rate_v = m.param_with("rate_v", Some(5), Pos);
            m.sample(&counts, Dist::poisson(&rate_v));
            m.sample(&counts, Dist::poisson(&rate_s));
            m.sample(&one, Dist::poisson(&rate_s));
        }
        "neg_binomial_2" => {
            let mu_s = m.param_with("mu_s", None, Pos);
            let mu_v = m.param_with("mu_v", Some(5), Pos);
            let phi = m.param_with("phi", None, Pos);
            let phi_v = m.param_with("phi_v", Some(5), Pos);
            m.sample(&counts, Dist::neg_binomial_2(&mu_v, &phi));
            m.sample(&counts, Dist::neg_binomial_2(2.5, &phi_v));
            m.sample(&counts, Dist::neg_binomial_2(&mu_s, 3.0));
            m.sample(&one, Dist::neg_binomial_2(&mu_s, &phi));
        }
        _ => {
            let phi = m.param_with("phi", None, Pos);
            let phi_v = m.param_with("phi_v", Some(5), Pos);
            let a = m.param("a");
            let b = m.vector_param("b", 5);
            let eta = &a + &b * 0.8;
            m.sample(&counts, Dist::neg_binomial_2_log(&eta, &phi));
            m.sample(&counts, Dist::neg_binomial_2_log(&a, &phi_v));
            m.sample(&counts, Dist::neg_binomial_2_log(&eta, 4.0));
            m.sample(&one, Dist::neg_binomial_2_log(&a, &phi));
            m.sample(&b, Dist::normal(0.0, 1.0));
        }
    }
    m.build()
}

fn stan_continuous_cases() -> Vec<Case> {
    use Constraint::{Positive as Pos, Real};
    vec![
        Case {
            name: "logistic",
            value: Real,
            args: vec![Real, Pos],
            make: |a| Dist::logistic(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "weibull",
            value: Pos,
            args: vec![Pos, Pos],
            make: |a| Dist::weibull(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "chi_square",
            value: Pos,
            args: vec![Pos],
            make: |a| Dist::chi_square(a[0].clone()),
        },
    ]
}

/// `factor(sum(w * op(x)))` for every unary operation (with a prior on each x).
fn unary() -> Model {
    type Op = fn(&Expr) -> Expr;
    let cases: [(Op, Constraint); 11] = [
        (|x| -x, Constraint::Real),
        (Expr::exp, Constraint::Real),
        (Expr::ln, Constraint::Positive),
        (Expr::ln_1p, Constraint::Positive),
        (Expr::exp_m1, Constraint::Real),
        (Expr::softplus, Constraint::Real),
        (Expr::logistic, Constraint::Real),
        (Expr::sqrt, Constraint::Positive),
        (Expr::abs, Constraint::Lower(0.5)),
        (Expr::cumsum, Constraint::Real),
        (|x| x.sum() * x.sum(), Constraint::Real),
    ];
    let mut m = ModelBuilder::new("unary");
    let w = m.data_vector("w", vec![0.7, -1.3, 2.1]);
    for (k, (op, constraint)) in cases.into_iter().enumerate() {
        let x = m.param_with(&format!("x{k}"), Some(3), constraint);
        m.factor((&w * op(&x)).sum());
        m.sample(&x, Dist::normal(0.0, 3.0));
    }
    // Small arguments, where log1p and expm1 must keep their relative precision.
    let t = m.vector_param("t", 3);
    m.factor((&w * (&t * 0.001).ln_1p()).sum() * 1000.0);
    m.factor((&w * (&t * 0.001).exp_m1()).sum() * 1000.0);
    m.build()
}

/// Every binary operation with every broadcast combination.
fn binary() -> Model {
    type Op = fn(&Expr, &Expr) -> Expr;
    let ops: [Op; 5] = [
        |a, b| a + b,
        |a, b| a - b,
        |a, b| a * b,
        |a, b| a / b,
        |a, b| a.pow(b),
    ];
    let mut m = ModelBuilder::new("binary");
    let w = m.data_vector("w", vec![0.4, -0.9, 1.6]);
    for (k, op) in ops.into_iter().enumerate() {
        for (l, (a_size, b_size)) in [
            (None, None),
            (None, Some(3)),
            (Some(3), None),
            (Some(3), Some(3)),
        ]
        .into_iter()
        .enumerate()
        {
            let a = m.param_with(&format!("a{k}_{l}"), a_size, Constraint::Positive);
            let b = m.param_with(&format!("b{k}_{l}"), b_size, Constraint::Positive);
            m.factor((&w * op(&a, &b)).sum());
        }
    }
    // pow with a negative base and integral exponents (Rust's powf conventions).
    let x = m.vector_param("x", 3);
    m.factor((&w * x.pow(2.0)).sum() + (&w * x.pow(3.0)).sum() * 0.1);
    m.build()
}

/// Data and constants on either side, and a folded data-only subexpression.
fn mixed() -> Model {
    let mut m = ModelBuilder::new("mixed");
    let d = m.data_vector("d", vec![0.5, 1.5, -2.0]);
    let x = m.vector_param("x", 3);
    let s = m.param("s");
    let folded = (&d * 2.0).exp();
    m.factor((2.0 - &x * &d + folded * &x / 3.0 + 1.5 * &s).sum() + (0.5 / (&s * &s + 1.0)));
    m.build()
}

/// Matrix-vector products, gathers, dots and cumulative sums.
fn linear() -> Model {
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
    m.build()
}

/// Every constraint, each under a normal prior.
fn transforms() -> Model {
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
    let mut m = ModelBuilder::new("transforms");
    for (k, constraint) in constraints.into_iter().enumerate() {
        let x = m.param_with(&format!("x{k}"), Some(2), constraint);
        m.sample(&x, Dist::normal(0.3, 2.0));
    }
    m.build()
}

/// The discrete likelihoods.
fn discrete() -> Model {
    let mut m = ModelBuilder::new("discrete");
    let ys = m.data_int_vector("ys", vec![1, 0, 1, 1, 0]);
    let counts = m.data_int_vector("counts", vec![3, 0, 7, 1, 4]);
    let trials = m.data_int_vector("trials", vec![5, 2, 9, 1, 4]);
    let a = m.param("a");
    let b = m.vector_param("b", 5);
    let eta = &a + &b * 0.8;
    m.sample(&ys, Dist::bernoulli_logit(&eta));
    m.sample(&counts, Dist::binomial_logit(&trials, &eta));
    m.sample(&counts, Dist::poisson_log(&eta));
    m.sample(&b, Dist::normal(0.0, 1.0));
    m.build()
}

/// Gaussian random walks with default and with parameter-valued options.
fn random_walks() -> Model {
    let mut m = ModelBuilder::new("random_walks");
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let x = m.vector_param("x", 6);
    m.sample(&x, Dist::gaussian_random_walk(&sigma));
    let drift = m.param("drift");
    let init_mu = m.param("init_mu");
    let init_sigma = m.param_constrained("init_sigma", Constraint::Positive);
    let y = m.vector_param("y", 5);
    m.sample(
        &y,
        Dist::GaussianRandomWalk {
            sigma: sigma.clone(),
            drift: Some(drift),
            init_mu: Some(init_mu),
            init_sigma: Some(init_sigma),
        },
    );
    m.build()
}

/// Likelihoods of observed data under parameter-valued arguments: the value's own terms are
/// dropped (it is data), the parameters' are kept.
fn observed() -> Model {
    let mut m = ModelBuilder::new("observed");
    let pos = m.data_vector("pos", vec![0.3, 1.7, 2.2, 0.9]);
    let unit = m.data_vector("unit", vec![0.2, 0.55, 0.9, 0.35]);
    let real = m.data_vector("real", vec![-1.2, 0.4, 2.5, 0.1]);
    let shape = m.param_constrained("shape", Constraint::Positive);
    let rate = m.param_constrained("rate", Constraint::Positive);
    let mu = m.param("mu");
    let sigma = m.vector_param("log_sigma", 4).exp();
    let nu = m.param_constrained("nu", Constraint::Positive);
    m.sample(&pos, Dist::gamma(&shape, &rate));
    m.sample(&pos, Dist::inverse_gamma(&shape, &rate));
    m.sample(&pos, Dist::log_normal(&mu, &sigma));
    m.sample(&pos, Dist::exponential(&rate));
    m.sample(&pos, Dist::half_normal(&sigma));
    m.sample(&pos, Dist::half_cauchy(&rate));
    m.sample(&unit, Dist::beta(&shape, &rate));
    m.sample(&real, Dist::student_t(&nu, &mu, &sigma));
    m.sample(&real, Dist::cauchy(&mu, &rate));
    m.sample(&real, Dist::laplace(&mu, &sigma));
    m.sample(&real, Dist::normal(&mu, &sigma));
    // Uniform with parameter bounds that always contain the data.
    let lower = -m.param("lo").exp() - 1.5;
    let upper = m.param("hi").exp() + 2.5;
    m.sample(&real, Dist::uniform(&lower, &upper));
    m.build()
}

/// A regression whose matrix rows are whole `vec4`s from a `vec4` boundary (8 columns after 4
/// values of data), so that split chains with workgroup data load them four at a time
/// (gpu-actor's `wgsl::shared_rows`).
fn regression_quads() -> Model {
    let mut m = ModelBuilder::new("regression_quads");
    let precision = m.data_vector("precision", vec![0.5, 1.0, 1.5, 2.0]);
    let rows: Vec<Vec<f64>> = (0..40)
        .map(|r| {
            (0..8)
                .map(|c| ((r * 5 + c * 7) % 13) as f64 / 6.0 - 1.0)
                .collect()
        })
        .collect();
    let x = m.data_matrix("x", rows);
    let y = m.data_vector(
        "y",
        (0..40).map(|r| ((r * 3) % 7) as f64 / 2.0 - 1.5).collect(),
    );
    let alpha = m.param("alpha");
    let beta = m.vector_param("beta", 8);
    let gamma = m.vector_param("gamma", 4);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let eta = &alpha + x.matvec(&beta) + gamma.sum();
    m.sample(&y, Dist::normal(&eta, &sigma));
    m.sample(&beta, Dist::normal(0.0, 1.0));
    m.factor(-(&gamma * &gamma * &precision).sum() * 0.5);
    m.sample(&sigma, Dist::half_normal(1.0));
    m.build()
}

/// A regression whose 40 observations split across lanes and run fused (gpu-actor's
/// split.rs): a product, maps, zips with scalar parameters, densities with broadcast scalar
/// parameters (terms outside the fused loop) and a factor over a split vector.
fn regression() -> Model {
    let mut m = ModelBuilder::new("regression");
    let rows: Vec<Vec<f64>> = (0..40)
        .map(|r| {
            (0..3)
                .map(|c| ((r * 7 + c * 3) % 11) as f64 / 5.0 - 1.0)
                .collect()
        })
        .collect();
    let x = m.data_matrix("x", rows);
    let y = m.data_vector(
        "y",
        (0..40).map(|r| ((r * 5) % 9) as f64 / 3.0 - 1.0).collect(),
    );
    let alpha = m.param("alpha");
    let beta = m.vector_param("beta", 3);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let nu = m.param_constrained("nu", Constraint::Positive);
    let w = m.param("w");
    let eta = &alpha + x.matvec(&beta);
    let mu = eta.logistic() * 3.0 - 1.0;
    m.sample(&y, Dist::normal(&mu, &sigma));
    m.sample(&y, Dist::student_t(&nu + 1.0, &mu, &sigma));
    m.factor(-(&eta * &eta) * &w * 0.01);
    m.sample(&beta, Dist::normal(0.0, 1.0));
    m.sample(&w, Dist::normal(0.0, 1.0));
    m.build()
}

/// Arguments far from 1, where exp, log, log1p, lgamma and softplus must hold over the whole
/// f64 range (f64 only: the values overflow f32).
fn wide_range() -> Model {
    let mut m = ModelBuilder::new("wide_range");
    let w = m.data_vector("w", vec![0.7, -1.3, 2.1]);
    let x = m.vector_param("x", 3);
    let big = (&x * 300.0).exp();
    m.factor((&w * (&big + 1e-300).ln()).sum());
    m.factor((&w * (&x * 300.0).softplus()).sum());
    m.factor((&w * (&x * 300.0).logistic()).sum());
    m.factor((&w * (&x * 30.0).exp().ln_1p()).sum());
    m.factor((&w * (&x * 1e-8).exp_m1()).sum() * 1e8);
    m.factor((&w * big.sqrt()).sum() * 1e-130);
    let y = m.data_vector("y", vec![0.4, 3.0, 11.0]);
    let shape = (&x * 8.0).exp();
    m.sample(&y, Dist::gamma(&shape, 1.5));
    m.sample(&y, Dist::student_t((&x * 6.0).exp(), 0.0, 1.0));
    m.build()
}

/// A continuous distribution: its value's constraint, its arguments' constraints and how to
/// build it.
struct Case {
    name: &'static str,
    value: Constraint,
    args: Vec<Constraint>,
    make: fn(Vec<Expr>) -> Dist,
}

fn continuous_cases() -> Vec<Case> {
    use Constraint::{Positive as Pos, Real, UnitInterval as Unit};
    vec![
        Case {
            name: "normal",
            value: Real,
            args: vec![Real, Pos],
            make: |a| Dist::normal(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "half_normal",
            value: Pos,
            args: vec![Pos],
            make: |a| Dist::half_normal(a[0].clone()),
        },
        Case {
            name: "exponential",
            value: Pos,
            args: vec![Pos],
            make: |a| Dist::exponential(a[0].clone()),
        },
        Case {
            name: "student_t",
            value: Real,
            args: vec![Pos, Real, Pos],
            make: |a| Dist::student_t(a[0].clone(), a[1].clone(), a[2].clone()),
        },
        Case {
            name: "cauchy",
            value: Real,
            args: vec![Real, Pos],
            make: |a| Dist::cauchy(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "half_cauchy",
            value: Pos,
            args: vec![Pos],
            make: |a| Dist::half_cauchy(a[0].clone()),
        },
        Case {
            name: "log_normal",
            value: Pos,
            args: vec![Real, Pos],
            make: |a| Dist::log_normal(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "gamma",
            value: Pos,
            args: vec![Pos, Pos],
            make: |a| Dist::gamma(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "inverse_gamma",
            value: Pos,
            args: vec![Pos, Pos],
            make: |a| Dist::inverse_gamma(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "beta",
            value: Unit,
            args: vec![Pos, Pos],
            make: |a| Dist::beta(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "laplace",
            value: Real,
            args: vec![Real, Pos],
            make: |a| Dist::laplace(a[0].clone(), a[1].clone()),
        },
        Case {
            name: "uniform",
            value: Constraint::Interval {
                lower: -1.0,
                upper: 2.0,
            },
            args: vec![],
            make: |_| Dist::uniform(-1.0, 2.0),
        },
    ]
}

/// Three statements, one per layout: each argument a scalar parameter, a vector parameter or
/// a constant, in rotation, so that broadcast, elementwise and dropped-term paths all run.
fn distribution(case: &Case) -> Model {
    const N: usize = 3;
    let constants = [0.7, 1.9, 1.3];
    let mut m = ModelBuilder::new(case.name);
    for layout in 0..3usize {
        let x = m.param_with(&format!("x{layout}"), Some(N), case.value);
        let mut args = Vec::new();
        for (k, &constraint) in case.args.iter().enumerate() {
            let name = format!("a{layout}_{k}");
            args.push(match (k + layout) % 3 {
                0 => m.param_with(&name, None, constraint),
                1 => m.param_with(&name, Some(N), constraint),
                _ => Expr::Const(constants[k]),
            });
        }
        m.sample(&x, (case.make)(args));
    }
    // A scalar value: every operand of the density is a scalar.
    let s = m.param_with("s", None, case.value);
    let args = case
        .args
        .iter()
        .enumerate()
        .map(|(k, &constraint)| m.param_with(&format!("b{k}"), None, constraint))
        .collect();
    m.sample(&s, (case.make)(args));
    m.build()
}
