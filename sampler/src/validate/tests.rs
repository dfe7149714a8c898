//! Validation errors name the offending node and say what is wrong: one test per kind of error,
//! the size limits, the constraint/support warning, and a valid model that uses every feature.

use super::*;
use crate::builder::ModelBuilder;
use crate::eval::LogDensity;
use crate::ir::{Constraint, DataValue, Dist, Expr, Model};
use crate::program::{Inst, MapOp};

/// Checks `model` with `limits` and expects an error at `path` whose message contains
/// `message`.
fn check_invalid_with(model: Model, limits: &Limits, path: &str, message: &str) {
    match CheckedModel::new(model, limits) {
        Ok(_) => panic!("expected `{path}: {message}`, but the model checked"),
        Err(err) => check_error(&err, path, message),
    }
}

fn check_invalid(model: Model, path: &str, message: &str) {
    check_invalid_with(model, &Limits::default(), path, message);
}

fn check_error(err: &ModelError, path: &str, message: &str) {
    assert_eq!(err.path, path, "wrong path in `{err}`");
    let problem = err.problem.to_string();
    assert!(
        problem.contains(message),
        "`{err}` does not say {message:?}"
    );
}

/// The validation error of a decoded model; a decode error fails the test.
fn invalid(loaded: Result<CheckedModel, LoadError>) -> ModelError {
    match loaded {
        Ok(_) => panic!("the model checked"),
        Err(LoadError::Invalid(err)) => err,
        Err(LoadError::Decode(err)) => panic!("expected a validation error, got {err}"),
    }
}

/// A model with one scalar parameter `mu ~ normal(0, 1)`, extended by `extend`.
fn model_with(extend: impl FnOnce(&mut ModelBuilder, &Expr)) -> Model {
    let mut m = ModelBuilder::new("test");
    let mu = m.param("mu");
    m.sample(&mu, Dist::normal(0.0, 1.0));
    extend(&mut m, &mu);
    m.build()
}

/// A model whose only statement is `value ~ dist`, where `mu` is a scalar parameter and `z` a
/// vector parameter of length 3.
fn sample_model(data: &[(&str, DataValue)], value: &str, dist: Dist) -> Model {
    let mut m = ModelBuilder::new("test");
    m.param("mu");
    m.vector_param("z", 3);
    m.sample(Expr::from(value), dist);
    let mut model = m.build();
    model.data = data
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.clone()))
        .collect();
    model
}

#[test]
fn wrong_ir_version() {
    let mut model = model_with(|_, _| {});
    model.ir_version = 3;
    check_invalid(
        model,
        "ir_version",
        "unsupported ir_version 3; this build reads versions 1 to 2",
    );
    for version in [1, 2] {
        let mut model = model_with(|_, _| {});
        model.ir_version = version;
        CheckedModel::new(model, &Limits::default()).expect("a version this build reads");
    }
    let json = r#"{"ir_version": 0, "name": "m", "parameters": [], "model": []}"#;
    let err = invalid(CheckedModel::from_json(json, &Limits::default()));
    check_error(&err, "ir_version", "unsupported ir_version 0");
}

#[test]
fn bad_model_name() {
    let mut model = model_with(|_, _| {});
    model.name = "two\nlines".into();
    check_invalid(model.clone(), "name", "at most 256 bytes of printable text");
    model.name = "x".repeat(257);
    check_invalid(model, "name", "at most 256 bytes of printable text");
}

#[test]
fn bad_names() {
    let message = |name: &str| {
        format!(
            "`{name}` is not a valid name: use letters, digits and `_`, not starting with a digit, at most 64 bytes"
        )
    };
    let long = "a".repeat(65);
    for name in ["", "1x", "a-b", "a b", "μ", "x.y", long.as_str()] {
        let mut m = ModelBuilder::new("test");
        m.param(name);
        check_invalid(m.build(), "parameters[0].name", &message(name));

        let mut m = ModelBuilder::new("test");
        m.data_real(name, 1.0);
        check_invalid(m.build(), &format!("data.{name}"), &message(name));

        let model = model_with(|m, mu| {
            m.transformed(name, mu.exp());
        });
        check_invalid(model, "transformed[0].name", &message(name));
    }
    // The longest name allowed, and names that start with `_` or contain digits, are fine.
    let mut m = ModelBuilder::new("test");
    let ok = m.param(&"a".repeat(64));
    m.param("_x9");
    m.sample(&ok, Dist::normal(0.0, 1.0));
    m.sample("_x9", Dist::normal(0.0, 1.0));
    CheckedModel::new(m.build(), &Limits::default()).expect("valid names");
}

#[test]
fn duplicate_names() {
    let duplicate = "`x` is already defined";
    let mut m = ModelBuilder::new("test");
    m.data_real("x", 1.0);
    m.param("x");
    check_invalid(m.build(), "parameters[0].name", duplicate);

    let mut m = ModelBuilder::new("test");
    m.param("y");
    m.param("x");
    m.param("x");
    check_invalid(m.build(), "parameters[2].name", duplicate);

    let model = model_with(|m, mu| {
        m.param("x");
        m.transformed("x", mu.exp());
    });
    check_invalid(model, "transformed[0].name", duplicate);

    let model = model_with(|m, mu| {
        m.data_int("x", 1);
        m.transformed("x", mu.exp());
    });
    check_invalid(model, "transformed[0].name", duplicate);

    let model = model_with(|m, mu| {
        m.transformed("t", mu.exp());
        m.transformed("x", mu.exp());
        m.transformed("x", mu.ln());
    });
    check_invalid(model, "transformed[2].name", duplicate);
}

#[test]
fn unknown_names() {
    // One edit away from a known name: a hint.
    for typo in ["mux", "m", "nu", "um_"] {
        let model = model_with(|m, _| {
            m.data_vector("y", vec![1.0, 2.0]);
            m.sample("y", Dist::normal(typo, 1.0));
        });
        let hint = if typo == "um_" {
            String::new()
        } else {
            " (did you mean `mu`?)".to_owned()
        };
        check_invalid(
            model,
            "model[1].sample.dist.normal.mu",
            &format!("unknown name `{typo}`{hint}"),
        );
    }
    // Far from everything: no hint at all.
    let model = model_with(|m, _| {
        m.transformed("t", Expr::from("unrelated").exp());
    });
    let err = CheckedModel::new(model, &Limits::default()).expect_err("unknown");
    assert_eq!(err.path, "transformed[0].value.exp");
    assert_eq!(err.problem.to_string(), "unknown name `unrelated`");
    // Data, parameters and transformed parameters are all candidates for the hint.
    let model = model_with(|m, mu| {
        m.data_real("scale", 2.0);
        m.transformed("theta", mu * 2.0);
        m.factor(Expr::from("thetas") + Expr::from("scal"));
    });
    check_invalid(
        model,
        "model[1].factor.value.add[0]",
        "unknown name `thetas` (did you mean `theta`?)",
    );
}

#[test]
fn transformed_used_before_definition() {
    let model = model_with(|m, mu| {
        m.transformed("a", Expr::from("b") * 2.0);
        m.transformed("b", mu.exp());
    });
    check_invalid(
        model,
        "transformed[0].value.mul[0]",
        "`b` is used before it is defined",
    );
    let model = model_with(|m, mu| {
        m.transformed("a", mu + Expr::from("a"));
    });
    check_invalid(
        model,
        "transformed[0].value.add[1]",
        "`a` is used before it is defined",
    );
}

/// Non-finite data cannot be written in JSON, so it comes through msgpack.
fn check_non_finite_data(value: DataValue, index: usize, shown: &str) {
    let model = model_with(|m, _| {
        m.data_vector("ok", vec![1.0]);
    });
    let mut model = model;
    model.data.insert("bad".into(), value);
    let err = invalid(CheckedModel::from_msgpack(
        &model.to_msgpack(),
        &Limits::default(),
    ));
    check_error(
        &err,
        "data.bad",
        &format!("value {shown} at position {index} is not finite"),
    );
    assert!(matches!(err.problem, Problem::NonFinite { index: i, .. } if i == index));
}

#[test]
fn non_finite_data() {
    check_non_finite_data(DataValue::Real(f64::NAN), 0, "NaN");
    check_non_finite_data(DataValue::Vector(vec![1.0, f64::NAN, 2.0]), 1, "NaN");
    check_non_finite_data(DataValue::Vector(vec![f64::INFINITY]), 0, "inf");
    check_non_finite_data(
        DataValue::Matrix(vec![
            vec![1.0, 2.0],
            vec![3.0, 4.0],
            vec![5.0, f64::NEG_INFINITY],
        ]),
        5,
        "-inf",
    );
    check_non_finite_data(
        DataValue::Matrix(vec![vec![1.0, 2.0], vec![f64::NAN, 4.0]]),
        2,
        "NaN",
    );
}

#[test]
fn non_finite_constants() {
    let model = model_with(|m, mu| {
        m.factor(mu * Expr::Const(f64::NAN));
    });
    let err = invalid(CheckedModel::from_msgpack(
        &model.to_msgpack(),
        &Limits::default(),
    ));
    check_error(
        &err,
        "model[1].factor.value.mul[1]",
        "value NaN at position 0 is not finite",
    );
    let model = model_with(|m, mu| {
        m.sample(mu, Dist::normal(f64::INFINITY, 1.0));
    });
    check_invalid(
        model,
        "model[1].sample.dist.normal.mu",
        "value inf at position 0 is not finite",
    );
}

#[test]
fn empty_data() {
    for value in [
        DataValue::Vector(vec![]),
        DataValue::IntVector(vec![]),
        DataValue::Matrix(vec![]),
        DataValue::Matrix(vec![vec![], vec![]]),
    ] {
        let mut model = model_with(|_, _| {});
        model.data.insert("y".into(), value);
        check_invalid(model, "data.y", "is empty");
    }
}

#[test]
fn ragged_matrix() {
    let model = model_with(|m, _| {
        m.data_matrix("x", vec![vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0]]);
    });
    check_invalid(model, "data.x", "row 2 has 1 values but row 0 has 2");
    let model = model_with(|m, _| {
        m.data_matrix("x", vec![vec![1.0], vec![3.0, 4.0]]);
    });
    check_invalid(model, "data.x", "row 1 has 2 values but row 0 has 1");
}

#[test]
fn size_zero_vector_parameter() {
    let model = model_with(|m, _| {
        m.vector_param("z", 0);
    });
    check_invalid(model, "parameters[1].size", "is empty");
}

#[test]
fn bad_constraint_bounds() {
    let cases = [
        (
            Constraint::Interval {
                lower: 1.0,
                upper: 1.0,
            },
            "lower bound 1 must be below upper bound 1",
        ),
        (
            Constraint::Interval {
                lower: 2.0,
                upper: -1.0,
            },
            "lower bound 2 must be below upper bound -1",
        ),
        (
            Constraint::Interval {
                lower: f64::NEG_INFINITY,
                upper: 1.0,
            },
            "both bounds must be finite",
        ),
        (
            Constraint::Interval {
                lower: 0.0,
                upper: f64::NAN,
            },
            "both bounds must be finite",
        ),
        (Constraint::Lower(f64::NAN), "the bound must be finite"),
        (Constraint::Upper(f64::INFINITY), "the bound must be finite"),
    ];
    for (constraint, message) in cases {
        let model = model_with(|m, _| {
            m.param_constrained("x", constraint);
        });
        check_invalid(model, "parameters[1].constraint", message);
    }
}

/// Checks `transformed t = make(z, data)` where `z` is a parameter vector of length 3 and the
/// data are `b` (length 2), `x` (2x3 matrix), `idx` (integer data).
fn check_transformed_error(make: impl FnOnce(&Expr) -> Expr, path: &str, message: &str) {
    let mut m = ModelBuilder::new("test");
    m.data_vector("b", vec![1.0, 2.0]);
    m.data_matrix("x", vec![vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0]]);
    m.data_int_vector("idx", vec![0, 2, 1]);
    let z = m.vector_param("z", 3);
    m.transformed("t", make(&z));
    m.sample(&z, Dist::normal(0.0, 1.0));
    check_invalid(m.build(), path, message);
}

#[test]
fn shape_mismatches_in_operations() {
    check_transformed_error(
        |z| z + Expr::from("b"),
        "transformed[0].value.add[1]",
        "`add` of vectors of different lengths (3 and 2)",
    );
    check_transformed_error(
        |z| Expr::from("b") / z,
        "transformed[0].value.div[1]",
        "`div` of vectors of different lengths (2 and 3)",
    );
    check_transformed_error(
        |z| z.dot("b"),
        "transformed[0].value.dot[1]",
        "`dot` takes two vectors of equal length, found a vector of length 3 and a vector of length 2",
    );
    check_transformed_error(
        |z| z.sum().dot(z),
        "transformed[0].value.dot[1]",
        "`dot` takes two vectors of equal length, found a scalar and a vector of length 3",
    );
    check_transformed_error(
        |_| Expr::from("x").matvec("b"),
        "transformed[0].value.matvec[1]",
        "`matvec` of a 2x3 matrix needs a vector of length 3, found a vector of length 2",
    );
    check_transformed_error(
        |z| Expr::from("b").matvec(z),
        "transformed[0].value.matvec[0]",
        "`matvec` needs a data matrix first, found a vector of length 2",
    );
    check_transformed_error(
        |z| z.matvec(z),
        "transformed[0].value.matvec[0]",
        "`matvec` needs a data matrix first, found a vector of length 3",
    );
    check_transformed_error(
        |_| Expr::from("x").exp(),
        "transformed[0].value.exp",
        "`exp` needs a scalar or vector, found a matrix",
    );
    check_transformed_error(
        |z| z * Expr::from("x"),
        "transformed[0].value.mul[1]",
        "elementwise operations take scalars and vectors, found a matrix",
    );
    check_transformed_error(
        |_| Expr::from("x") + 1.0,
        "transformed[0].value.add[0]",
        "elementwise operations take scalars and vectors, found a matrix",
    );
    check_transformed_error(
        |_| Expr::from("x"),
        "transformed[0].value",
        "a transformed parameter cannot be a matrix",
    );
    check_transformed_error(
        |z| z.sum().gather("idx"),
        "transformed[0].value.gather[0]",
        "`gather` reads from a vector, found a scalar",
    );
}

#[test]
fn gather_index_must_be_integer_data_in_range() {
    let not_index = "a `gather` index must be an integer data vector";
    check_transformed_error(
        |z| z.gather("b"),
        "transformed[0].value.gather[1]",
        not_index,
    );
    check_transformed_error(|z| z.gather(z), "transformed[0].value.gather[1]", not_index);
    check_transformed_error(
        |z| z.gather(1.0),
        "transformed[0].value.gather[1]",
        not_index,
    );
    for (index, message) in [
        (
            vec![0, 3],
            "index 3 at position 1 is out of range for a vector of length 3 (indices are 0-based)",
        ),
        (
            vec![-1],
            "index -1 at position 0 is out of range for a vector of length 3",
        ),
    ] {
        let mut m = ModelBuilder::new("test");
        m.data_int_vector("group", index);
        let z = m.vector_param("z", 3);
        m.sample(z.gather("group"), Dist::normal(0.0, 1.0));
        check_invalid(m.build(), "model[0].sample.value.gather[1]", message);
    }
}

#[test]
fn shape_mismatches_in_statements() {
    let matrix = DataValue::Matrix(vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
    check_invalid(
        sample_model(&[("x", matrix.clone())], "x", Dist::normal("mu", 1.0)),
        "model[0].sample.value",
        "a sampled value cannot be a matrix",
    );
    check_invalid(
        sample_model(&[], "mu", Dist::normal("z", 1.0)),
        "model[0].sample.dist.normal.mu",
        "is a vector of length 3, but the sampled value is a scalar; an argument is a scalar or has the value's shape",
    );
    check_invalid(
        sample_model(
            &[("y", DataValue::Vector(vec![1.0, 2.0]))],
            "y",
            Dist::student_t(3.0, 0.0, Expr::from("z").exp()),
        ),
        "model[0].sample.dist.student_t.sigma",
        "is a vector of length 3, but the sampled value is a vector of length 2",
    );
    check_invalid(
        sample_model(&[("x", matrix)], "z", Dist::normal("x", 1.0)),
        "model[0].sample.dist.normal.mu",
        "is a 2x2 matrix, but the sampled value is a vector of length 3",
    );
    check_invalid(
        sample_model(&[], "mu", Dist::gaussian_random_walk(1.0)),
        "model[0].sample.value",
        "a gaussian_random_walk is over a vector, found a scalar",
    );
    check_invalid(
        sample_model(&[], "z", Dist::gaussian_random_walk("z")),
        "model[0].sample.dist.gaussian_random_walk.sigma",
        "must be a scalar, found a vector of length 3",
    );
    let model = model_with(|m, _| {
        m.data_matrix("x", vec![vec![1.0]]);
        m.factor("x");
    });
    check_invalid(
        model,
        "model[1].factor.value",
        "a factor cannot be a matrix",
    );
}

#[test]
fn constant_arguments_out_of_domain() {
    let cases = [
        (
            Dist::normal(0.0, -1.0),
            "model[0].sample.dist.normal.sigma",
            "sigma must be > 0, found -1",
        ),
        (
            Dist::normal(0.0, 0.0),
            "model[0].sample.dist.normal.sigma",
            "sigma must be > 0, found 0",
        ),
        (
            Dist::student_t(0.0, 0.0, 1.0),
            "model[0].sample.dist.student_t.nu",
            "nu must be > 0, found 0",
        ),
        (
            Dist::gamma(1.0, Expr::Const(-2.0).exp() - 1.0),
            "model[0].sample.dist.gamma.rate",
            "rate must be > 0, found -0.86",
        ),
        (
            Dist::GaussianRandomWalk {
                sigma: Expr::Const(1.0),
                drift: None,
                init_mu: None,
                init_sigma: Some(Expr::Const(-3.0)),
            },
            "model[0].sample.dist.gaussian_random_walk.init_sigma",
            "init_sigma must be > 0, found -3",
        ),
    ];
    for (dist, path, message) in cases {
        check_invalid(sample_model(&[], "z", dist), path, message);
    }
    // A constant data vector is checked element by element.
    check_invalid(
        sample_model(
            &[("s", DataValue::Vector(vec![1.0, 2.0, -0.5]))],
            "z",
            Dist::normal(0.0, "s"),
        ),
        "model[0].sample.dist.normal.sigma",
        "sigma must be > 0, found -0.5",
    );
    let counts = ("y", DataValue::IntVector(vec![1, 2]));
    check_invalid(
        sample_model(
            std::slice::from_ref(&counts),
            "y",
            Dist::binomial_logit(2.5, "mu"),
        ),
        "model[0].sample.dist.binomial_logit.trials",
        "trials must be a non-negative integer, found 2.5",
    );
    check_invalid(
        sample_model(&[counts], "y", Dist::binomial_logit(-1.0, "mu")),
        "model[0].sample.dist.binomial_logit.trials",
        "trials must be a non-negative integer, found -1",
    );
    check_invalid(
        sample_model(&[], "mu", Dist::uniform(1.0, 1.0)),
        "model[0].sample.dist.uniform.lower",
        "lower bound 1 must be below upper bound 1 (element 0)",
    );
}

/// Checks that observing `y` under `dist` is refused because element `index` (`value`) is
/// outside the support.
fn check_support(y: DataValue, dist: Dist, index: usize, value: &str, support: &str) {
    let name = dist.name();
    check_invalid(
        sample_model(&[("y", y)], "y", dist),
        "model[0].sample.value",
        &format!(
            "observed value {value} at position {index} is outside the support of {name} ({support})"
        ),
    );
}

#[test]
fn data_outside_the_support() {
    let ints = |values: &[i64]| DataValue::IntVector(values.to_vec());
    let reals = |values: &[f64]| DataValue::Vector(values.to_vec());
    check_support(
        ints(&[0, 1, 2]),
        Dist::bernoulli_logit("mu"),
        2,
        "2",
        "0 or 1",
    );
    check_support(
        reals(&[0.0, 0.5]),
        Dist::bernoulli_logit("mu"),
        1,
        "0.5",
        "0 or 1",
    );
    check_support(
        ints(&[3, -1]),
        Dist::poisson_log("mu"),
        1,
        "-1",
        "an integer >= 0",
    );
    check_support(
        reals(&[1.5]),
        Dist::poisson_log("mu"),
        0,
        "1.5",
        "an integer >= 0",
    );
    check_support(
        ints(&[0, 2, 3]),
        Dist::binomial_logit(2.0, "mu"),
        2,
        "3",
        "an integer in 0..=trials",
    );
    let mut m = ModelBuilder::new("test");
    m.data_int_vector("trials", vec![5, 1]);
    m.data_int_vector("y", vec![5, 2]);
    m.param("mu");
    m.sample("y", Dist::binomial_logit("trials", "mu"));
    check_invalid(
        m.build(),
        "model[0].sample.value",
        "observed value 2 at position 1 is outside the support of binomial_logit",
    );
    check_support(
        reals(&[0.5, 1.0]),
        Dist::beta("mu", 1.0),
        1,
        "1",
        "0 < x < 1",
    );
    check_support(reals(&[0.0]), Dist::beta(1.0, "mu"), 0, "0", "0 < x < 1");
    check_support(
        reals(&[1.0, -0.5]),
        Dist::exponential("mu"),
        1,
        "-0.5",
        "x >= 0",
    );
    check_support(reals(&[-0.5]), Dist::half_normal("mu"), 0, "-0.5", "x >= 0");
    check_support(reals(&[1.0, 0.0]), Dist::gamma("mu", 1.0), 1, "0", "x > 0");
    check_support(
        reals(&[0.5, 3.0]),
        Dist::uniform(0.0, 2.0),
        1,
        "3",
        "lower <= x <= upper",
    );
    // A scalar observation too.
    check_support(
        DataValue::Real(-2.0),
        Dist::log_normal("mu", 1.0),
        0,
        "-2",
        "x > 0",
    );
}

#[test]
fn discrete_distribution_on_a_parameter() {
    for (dist, name) in [
        (Dist::poisson_log(0.0), "poisson_log"),
        (Dist::bernoulli_logit(0.0), "bernoulli_logit"),
        (Dist::binomial_logit(3.0, 0.0), "binomial_logit"),
    ] {
        check_invalid(
            sample_model(&[], "z", dist),
            "model[0].sample.value",
            &format!(
                "{name} is a distribution over integers: its value must be observed data, not a parameter"
            ),
        );
    }
}

#[test]
fn constant_expressions_that_are_not_finite() {
    check_invalid(
        sample_model(&[], "mu", Dist::normal(0.0, Expr::Const(-1.0).ln())),
        "model[0].sample.dist.normal.sigma.log",
        "this constant expression evaluates to NaN at position 0",
    );
    check_invalid(
        sample_model(&[], "mu", Dist::normal(Expr::Const(1000.0).exp(), 1.0)),
        "model[0].sample.dist.normal.mu.exp",
        "this constant expression evaluates to inf at position 0",
    );
    check_invalid(
        sample_model(
            &[("v", DataValue::Vector(vec![1.0, 0.0, 2.0]))],
            "z",
            Dist::normal(1.0 / Expr::from("v"), 1.0),
        ),
        "model[0].sample.dist.normal.mu.div[1]",
        "this constant expression evaluates to inf at position 1",
    );
}

fn small(change: impl FnOnce(&mut Limits)) -> Limits {
    let mut limits = Limits::default();
    change(&mut limits);
    limits
}

#[test]
fn limit_on_name_length() {
    let limits = small(|l| l.max_name_len = 4);
    let mut m = ModelBuilder::new("test");
    m.param("abcd");
    m.param("abcde");
    check_invalid_with(
        m.build(),
        &limits,
        "parameters[1].name",
        "`abcde` is not a valid name: use letters, digits and `_`, not starting with a digit, at most 4 bytes",
    );
}

#[test]
fn limit_on_data_values() {
    let limits = small(|l| l.max_data_values = 5);
    let model = |n: usize| {
        model_with(|m, _| {
            m.data_vector("a", vec![1.0; 2]);
            m.data_matrix("b", vec![vec![1.0; n]]);
        })
    };
    CheckedModel::new(model(3), &limits).expect("5 values are within the limit");
    check_invalid_with(
        model(4),
        &limits,
        "data",
        "the number of data values is 6, over the limit of 5",
    );
}

#[test]
fn limit_on_dimension() {
    let limits = small(|l| l.max_dim = 4);
    let model = |n: usize| {
        model_with(|m, _| {
            m.vector_param("z", n);
        })
    };
    CheckedModel::new(model(3), &limits).expect("dimension 4 is within the limit");
    check_invalid_with(
        model(4),
        &limits,
        "parameters[1]",
        "the number of unconstrained parameters is 5, over the limit of 4",
    );
}

#[test]
fn limit_on_declarations() {
    let limits = small(|l| l.max_declarations = 2);
    let model = |n: usize| {
        model_with(|m, mu| {
            for _ in 1..n {
                m.factor(-mu);
            }
        })
    };
    CheckedModel::new(model(2), &limits).expect("2 statements are within the limit");
    check_invalid_with(
        model(3),
        &limits,
        "model",
        "the number of statements is 3, over the limit of 2",
    );
    let mut m = ModelBuilder::new("test");
    for i in 0..3 {
        m.param(&format!("p{i}"));
    }
    check_invalid_with(
        m.build(),
        &limits,
        "parameters",
        "the number of parameters is 3",
    );
}

#[test]
fn limit_on_expression_nodes() {
    // `mu ~ normal(0, 1)` has 3 nodes; `factor(-mu)` 2 more.
    let limits = small(|l| l.max_expr_nodes = 4);
    let model = model_with(|m, mu| {
        m.factor(-mu);
    });
    check_invalid_with(
        model,
        &limits,
        "model[1].factor.value.neg",
        "the number of expression nodes is 5, over the limit of 4",
    );
    let limits = small(|l| l.max_expr_nodes = 5);
    CheckedModel::new(
        model_with(|m, mu| {
            m.factor(-mu);
        }),
        &limits,
    )
    .expect("5 nodes are within the limit");
}

#[test]
fn limit_on_tape_values() {
    // Tape: z (3 values), then exp(z) (3 more).
    let model = || {
        let mut m = ModelBuilder::new("test");
        let z = m.vector_param("z", 3);
        m.transformed("t", z.exp());
        m.build()
    };
    CheckedModel::new(model(), &small(|l| l.max_tape_values = 6)).expect("within the limit");
    check_invalid_with(
        model(),
        &small(|l| l.max_tape_values = 5),
        "transformed[0].value.exp",
        "the lowered program's tape length is 6, over the limit of 5",
    );
}

#[test]
fn limit_on_model_bytes() {
    let model = model_with(|m, _| {
        m.data_vector("y", vec![0.5; 10]);
    });
    let json = model.to_json();
    let bytes = model.to_msgpack();
    let at = |max: usize| small(|l| l.max_model_bytes = max);

    CheckedModel::from_json(&json, &at(json.len())).expect("exactly at the limit");
    let err = CheckedModel::from_json(&json, &at(json.len() - 1)).expect_err("over");
    assert_eq!(
        err,
        LoadError::Decode(DecodeError::TooLarge {
            len: json.len(),
            max: json.len() - 1
        })
    );
    assert_eq!(
        err.to_string(),
        format!(
            "model is {} bytes, over the limit of {} bytes",
            json.len(),
            json.len() - 1
        )
    );

    CheckedModel::from_msgpack(&bytes, &at(bytes.len())).expect("exactly at the limit");
    let err = CheckedModel::from_msgpack(&bytes, &at(bytes.len() - 1)).expect_err("over");
    assert_eq!(
        err,
        LoadError::Decode(DecodeError::TooLarge {
            len: bytes.len(),
            max: bytes.len() - 1
        })
    );
}

#[test]
fn load_errors_say_which_stage_failed() {
    let err = CheckedModel::from_json("{", &Limits::default()).expect_err("not JSON");
    assert!(
        matches!(err, LoadError::Decode(DecodeError::Json(_))),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("invalid model JSON: "), "{err}");
    let err = CheckedModel::from_msgpack(&[0xc1], &Limits::default()).expect_err("not msgpack");
    assert!(
        matches!(err, LoadError::Decode(DecodeError::Msgpack(_))),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("invalid model bytes: "),
        "{err}"
    );

    let mut model = model_with(|_, _| {});
    model.ir_version = 9;
    let err = CheckedModel::from_json(&model.to_json(), &Limits::default()).expect_err("bad");
    assert_eq!(
        err.to_string(),
        "invalid model: ir_version: unsupported ir_version 9; this build reads versions 1 to 2"
    );
}

#[test]
fn prior_support_that_does_not_fit_the_constraint_is_a_warning() {
    let warnings = |constraint: Constraint, dist: Dist| {
        let mut m = ModelBuilder::new("test");
        let x = m.param_constrained("x", constraint);
        m.sample(&x, dist);
        CheckedModel::new(m.build(), &Limits::default())
            .expect("a warning is not an error")
            .warnings()
            .to_vec()
    };
    assert_eq!(
        warnings(Constraint::Real, Dist::exponential(1.0)),
        [
            "model[0].sample.value: parameter `x` has constraint \"real\" but exponential needs x >= 0; draws outside the support are rejected as divergences"
        ]
    );
    let interval = Constraint::Interval {
        lower: -1.0,
        upper: 1.0,
    };
    let w = warnings(interval, Dist::beta(2.0, 2.0));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("parameter `x`") && w[0].contains("beta needs 0 < x < 1"),
        "{w:?}"
    );
    let w = warnings(Constraint::Lower(-1.0), Dist::gamma(2.0, 1.0));
    assert!(w.len() == 1 && w[0].contains("gamma needs x > 0"), "{w:?}");

    // Constraints that fit give no warning.
    for (constraint, dist) in [
        (Constraint::Positive, Dist::exponential(1.0)),
        (Constraint::Lower(0.5), Dist::half_normal(1.0)),
        (Constraint::UnitInterval, Dist::beta(2.0, 2.0)),
        (
            Constraint::Interval {
                lower: 0.25,
                upper: 0.75,
            },
            Dist::beta(2.0, 2.0),
        ),
        (Constraint::Real, Dist::normal(0.0, 1.0)),
        (Constraint::Upper(1.0), Dist::uniform(-2.0, 2.0)),
    ] {
        assert_eq!(warnings(constraint, dist), Vec::<String>::new());
    }
}

/// Every operation, distribution, constraint and data kind, and a factor, in one valid model.
fn all_features_model() -> Model {
    let mut m = ModelBuilder::new("all_features");
    let x = m.data_matrix("x", vec![vec![1.0, -0.5], vec![0.2, 0.3], vec![-1.0, 2.0]]);
    let y = m.data_vector("y", vec![0.4, -1.2, 2.2]);
    let proportions = m.data_vector("proportions", vec![0.2, 0.5, 0.9]);
    let positives = m.data_vector("positives", vec![0.5, 1.5, 2.0]);
    let counts = m.data_int_vector("counts", vec![0, 3, 7]);
    let outcomes = m.data_int_vector("outcomes", vec![0, 1, 1]);
    let group = m.data_int_vector("group", vec![0, 1, 1]);
    let trials = m.data_int("trials", 10);
    let scale = m.data_real("scale", 2.5);

    let mu = m.param("mu");
    let tau = m.param_constrained("tau", Constraint::Positive);
    let p = m.param_constrained("p", Constraint::UnitInterval);
    let lo = m.param_constrained("lo", Constraint::Lower(-1.0));
    let hi = m.param_constrained("hi", Constraint::Upper(3.0));
    let mid = m.param_constrained(
        "mid",
        Constraint::Interval {
            lower: -2.0,
            upper: 5.0,
        },
    );
    let beta = m.vector_param("beta", 2);
    let walk = m.vector_param("walk", 3);

    let eta = m.transformed("eta", x.matvec(&beta) + &mu);
    let theta = m.transformed("theta", beta.gather(&group));
    let smooth = m.transformed(
        "smooth",
        (-&mu).exp() * tau.ln() - lo.ln_1p() / (hi.exp_m1() + 30.0) + mid.softplus().logistic(),
    );
    let norms = m.transformed("norms", (&tau * &positives).sqrt().abs().cumsum().sum());
    let power = m.transformed("power", eta.pow(2.0).dot(&eta));

    m.sample(&mu, Dist::normal(0.0, &scale));
    m.sample(&tau, Dist::half_normal(1.0));
    m.sample(&tau, Dist::exponential(1.0));
    m.sample(&tau, Dist::half_cauchy(1.0));
    m.sample(&tau, Dist::log_normal(0.0, 1.0));
    m.sample(&tau, Dist::gamma(2.0, 1.0));
    m.sample(&tau, Dist::inverse_gamma(2.0, 1.0));
    m.sample(&p, Dist::beta(2.0, 2.0));
    m.sample(&mid, Dist::uniform(-2.0, 5.0));
    m.sample(&hi, Dist::cauchy(0.0, 2.0));
    m.sample(&lo, Dist::laplace(&smooth, 1.0));
    m.sample(&mu, Dist::student_t(3.0, 0.0, 1.0));
    m.sample(&y, Dist::normal(&eta, &tau));
    m.sample(&proportions, Dist::beta(&tau, 2.0));
    m.sample(&positives, Dist::gamma(&tau, 1.0));
    m.sample(&outcomes, Dist::bernoulli_logit(&eta));
    m.sample(&counts, Dist::binomial_logit(&trials, &theta));
    m.sample(&counts, Dist::poisson_log(&theta));
    m.sample(&walk, Dist::gaussian_random_walk(&tau));
    m.sample(
        &walk,
        Dist::GaussianRandomWalk {
            sigma: Expr::Const(1.0),
            drift: Some(Expr::Const(0.1)),
            init_mu: Some(mu.clone()),
            init_sigma: Some(Expr::Const(2.0)),
        },
    );
    m.factor(-0.01 * (&norms + &power.abs().ln_1p()));
    m.build()
}

#[test]
fn valid_model_with_every_feature_checks() {
    let checked = CheckedModel::new(all_features_model(), &Limits::default())
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(checked.warnings(), [] as [String; 0]);
    assert_eq!(checked.dim(), 6 + 2 + 3);
    let names: Vec<String> = checked.columns().iter().map(|c| c.name.clone()).collect();
    assert_eq!(names.len(), 11 + 3 + 3 + 1 + 1 + 1);
    assert_eq!(
        names[11..],
        [
            "eta", "eta", "eta", "theta", "theta", "theta", "smooth", "norms", "power"
        ]
    );

    let mut evaluator = checked.evaluator();
    let theta: Vec<f64> = (0..checked.dim()).map(|i| 0.1 * i as f64 - 0.3).collect();
    let mut grad = vec![0.0; checked.dim()];
    let lp = evaluator.logp_grad(&theta, &mut grad);
    assert!(lp.is_finite(), "log density {lp}");
    assert!(grad.iter().all(|g| g.is_finite()), "gradient {grad:?}");

    // The same model through both decoders, with the same hash.
    let from_msgpack =
        CheckedModel::from_msgpack(&checked.model().to_msgpack(), &Limits::default())
            .expect("valid");
    assert_eq!(from_msgpack.hash(), checked.hash());
    CheckedModel::from_json(&checked.model().to_json(), &Limits::default()).expect("valid");
}

/// An instruction that computes what an earlier one computed is not emitted again; the
/// shared slot's adjoint gathers both uses.
#[test]
fn repeated_computations_are_emitted_once() {
    let mut m = ModelBuilder::new("repeat");
    let x = m.vector_param("x", 3);
    let twice = |x: &Expr| (x * 2.0).sum();
    m.factor(x.elem(1).exp() + x.elem(1).exp() * 3.0 + twice(&x) + twice(&x));
    let model = CheckedModel::new(m.build(), &Limits::default()).unwrap();
    let count =
        |wanted: fn(&Inst) -> bool| model.program().insts.iter().filter(|i| wanted(i)).count();
    assert_eq!(count(|i| matches!(i, Inst::Gather { .. })), 1);
    assert_eq!(count(|i| matches!(i, Inst::Map { op: MapOp::Exp, .. })), 1);
    assert_eq!(count(|i| matches!(i, Inst::Sum { .. })), 1);
    let theta = [0.3, -0.4, 1.2];
    let mut grad = [0.0; 3];
    let lp = model.evaluator().logp_grad(&theta, &mut grad);
    let e = (-0.4f64).exp();
    assert!(
        (lp - (4.0 * e + 4.0 * (0.3 - 0.4 + 1.2))).abs() < 1e-12,
        "{lp}"
    );
    assert_eq!(grad, [4.0, 4.0 * e + 4.0, 4.0]);
}
