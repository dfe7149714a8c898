//! Parameter transforms: constrained values satisfy their constraint, log-Jacobians match a
//! numerical `log |det J|` of the map from unconstrained coordinates to constrained values,
//! and gradients match finite differences.

use crate::builder::ModelBuilder;
use crate::eval::{Evaluator, LogDensity};
use crate::ir::{Constraint, Dist, Expr, Model, Parameter};
use crate::limits::Limits;
use crate::model_error::ModelError;
use crate::rng::{ChainId, ChainRng, Seed};
use crate::validate::CheckedModel;

const POINTS: usize = 5;

fn checked(model: Model) -> Result<CheckedModel, ModelError> {
    CheckedModel::new(model, &Limits::default())
}

fn evaluator(model: Model) -> Evaluator {
    checked(model)
        .unwrap_or_else(|err| panic!("model does not check: {err}"))
        .evaluator()
}

fn points(dim: usize, seed: u64, radius: f64) -> Vec<Vec<f64>> {
    let mut rng = ChainRng::new(Seed(seed), ChainId(0));
    (0..POINTS)
        .map(|_| (0..dim).map(|_| rng.uniform_in(-radius, radius)).collect())
        .collect()
}

fn outputs(ev: &mut Evaluator, theta: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; ev.n_outputs()];
    ev.write_outputs(theta, &mut out);
    out
}

/// `log |det|` of a small square matrix (rows), by elimination with partial pivoting.
fn log_abs_det(mut a: Vec<Vec<f64>>) -> f64 {
    let n = a.len();
    let mut log_det = 0.0;
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .expect("a non-empty range");
        a.swap(col, pivot);
        let p = a[col][col];
        log_det += p.abs().ln();
        let pivot_row = a[col].clone();
        for row in &mut a[col + 1..] {
            let factor = row[col] / p;
            for (value, pivot_value) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *value -= factor * pivot_value;
            }
        }
    }
    log_det
}

/// The model's log density minus `log |det J|` of the map from theta to the first `dim`
/// outputs (central differences) is the same at every point: the log density of a model
/// without statements is its log-Jacobian, up to the constant terms lowering drops.
fn check_log_jacobian(name: &str, model: Model, seed: u64) {
    let dim = evaluator(model.clone()).dim();
    check_log_jacobian_of(name, model, seed, &(0..dim).collect::<Vec<_>>());
}

/// As [`check_log_jacobian`], against the outputs at `free` (as many as coordinates).
fn check_log_jacobian_of(name: &str, model: Model, seed: u64, free: &[usize]) {
    let mut ev = evaluator(model);
    let dim = ev.dim();
    assert_eq!(free.len(), dim, "{name}: free outputs");
    let mut offsets = Vec::new();
    for theta in points(dim, seed, 1.5) {
        let mut jacobian = vec![vec![0.0; dim]; dim];
        for j in 0..dim {
            let h = 1e-5;
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[j] += h;
            down[j] -= h;
            let (y_up, y_down) = (outputs(&mut ev, &up), outputs(&mut ev, &down));
            for (i, &o) in free.iter().enumerate() {
                jacobian[i][j] = (y_up[o] - y_down[o]) / (2.0 * h);
            }
        }
        let lp = ev.logp(&theta);
        offsets.push(lp - log_abs_det(jacobian));
    }
    for offset in &offsets {
        assert!(
            (offset - offsets[0]).abs() < 1e-6,
            "{name}: log density minus numerical log|det J| varies: {offsets:?}"
        );
    }
}

/// The gradient against central differences.
fn check_gradient(name: &str, model: Model, seed: u64) {
    let mut ev = evaluator(model);
    let dim = ev.dim();
    for theta in points(dim, seed, 1.5) {
        let mut grad = vec![0.0; dim];
        let lp = ev.logp_grad(&theta, &mut grad);
        assert!(lp.is_finite(), "{name}: log density {lp} at {theta:?}");
        for i in 0..dim {
            let h = 1e-5 * theta[i].abs().max(1.0);
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (ev.logp(&up) - ev.logp(&down)) / (2.0 * h);
            assert!(
                (fd - grad[i]).abs() <= 1e-6 * (1.0 + fd.abs().max(grad[i].abs())),
                "{name}: d/dtheta[{i}] = {} but finite differences give {fd} at {theta:?}",
                grad[i]
            );
        }
    }
}

fn vector_model(constraint: Constraint, size: usize) -> ModelBuilder {
    let mut m = ModelBuilder::new(format!("{constraint:?}"));
    m.param_with("x", Some(size), constraint);
    m
}

/// Models whose log density is only their transforms' log-Jacobians, and whose first outputs
/// are the constrained values of all unconstrained coordinates (the map is square there).
fn jacobian_cases() -> Vec<(&'static str, Model)> {
    let mut cases = Vec::new();
    for (name, constraint, size) in [
        ("ordered 4", Constraint::Ordered, 4),
        ("ordered 1", Constraint::Ordered, 1),
        ("positive_ordered 3", Constraint::PositiveOrdered, 3),
        // The first K-1 outputs of a simplex against its K-1 coordinates.
        ("simplex 4", Constraint::Simplex, 4),
        ("simplex 2", Constraint::Simplex, 2),
    ] {
        cases.push((name, vector_model(constraint, size).build()));
    }

    // b in (0, a): an upper bound that is another parameter.
    let mut m = ModelBuilder::new("dependent interval");
    let a = m.param_constrained("a", Constraint::UnitInterval);
    m.param_bounded("b", None, Some(Expr::Const(0.0)), Some(a));
    cases.push(("dependent interval", m.build()));

    // A vector with a data lower bound and a parameter upper bound.
    let mut m = ModelBuilder::new("vector interval");
    let top = m.param_constrained("top", Constraint::Lower(3.0));
    let low = m.data_vector("low", vec![-1.0, 0.0, 2.0]);
    m.param_bounded("x", Some(3), Some(low), Some(&top * 1.5));
    cases.push(("vector interval", m.build()));

    // Lower and upper bounds alone, each an expression of an earlier parameter.
    let mut m = ModelBuilder::new("one-sided");
    let mu = m.param("mu");
    m.param_bounded("above", Some(2), Some(mu.clone()), None);
    m.param_bounded("below", None, None, Some(mu.exp()));
    cases.push(("one-sided", m.build()));

    // offset/multiplier with a parameter multiplier: log-J includes n log sigma.
    let mut m = ModelBuilder::new("affine");
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let d = m.data_vector("d", vec![0.5, -1.0, 2.0]);
    m.param_decl(Parameter {
        name: "z".into(),
        size: Some(3),
        offset: Some(d),
        multiplier: Some(sigma),
        ..Parameter::default()
    });
    cases.push(("affine", m.build()));
    cases
}

#[test]
fn log_jacobians_match_numerical_determinants() {
    for (k, (name, model)) in jacobian_cases().into_iter().enumerate() {
        check_log_jacobian(name, model, 40 + k as u64);
    }
}

#[test]
fn transform_gradients_match_finite_differences() {
    for (k, (name, mut model)) in jacobian_cases().into_iter().enumerate() {
        // A prior on every output so that adjoints flow through the transform's values too.
        let names: Vec<String> = model.parameters.iter().map(|p| p.name.clone()).collect();
        for name in names {
            model.model.push(crate::ir::Statement::Sample {
                value: Expr::Ref(name),
                dist: Dist::normal(0.3, 1.7),
            });
        }
        check_gradient(name, model, 60 + k as u64);
    }
    let unit = vector_model(Constraint::UnitVector, 3);
    let mut model = unit.build();
    model.model.push(crate::ir::Statement::Factor {
        value: Expr::Ref("x".into()) * Expr::Const(0.8),
    });
    check_gradient("unit_vector", model, 80);
}

#[test]
fn vector_constraints_hold_at_random_points() {
    for (constraint, size) in [
        (Constraint::Ordered, 5),
        (Constraint::PositiveOrdered, 5),
        (Constraint::Simplex, 5),
        (Constraint::UnitVector, 5),
    ] {
        let mut ev = evaluator(vector_model(constraint, size).build());
        for theta in points(ev.dim(), 7, 4.0) {
            let x = outputs(&mut ev, &theta);
            assert_eq!(x.len(), size);
            let increasing = x.windows(2).all(|w| w[0] < w[1]);
            let ok = match constraint {
                Constraint::Ordered => increasing,
                Constraint::PositiveOrdered => increasing && x[0] > 0.0,
                Constraint::Simplex => {
                    x.iter().all(|&v| v > 0.0) && (x.iter().sum::<f64>() - 1.0).abs() < 1e-12
                }
                _ => (x.iter().map(|v| v * v).sum::<f64>() - 1.0).abs() < 1e-12,
            };
            assert!(ok, "{constraint:?}: {x:?} at {theta:?}");
        }
    }
}

/// The simplex at zero coordinates is the uniform point (Stan's centring), and its
/// log density is `sum log x`.
#[test]
fn simplex_matches_stan_at_known_points() {
    let mut ev = evaluator(vector_model(Constraint::Simplex, 4).build());
    assert_eq!(ev.dim(), 3);
    let x = outputs(&mut ev, &[0.0; 3]);
    for v in &x {
        assert!((v - 0.25).abs() < 1e-15, "{x:?}");
    }
    // Stan's stick-breaking by hand at another point.
    let u = [0.7, -1.3, 0.4];
    let mut stick = 1.0;
    let mut expected = Vec::new();
    let mut log_j = 0.0;
    for (k, &uk) in u.iter().enumerate() {
        let z = 1.0 / (1.0 + (-(uk - ((4 - (k + 1)) as f64).ln())).exp());
        log_j += z.ln() + (1.0 - z).ln() + f64::ln(stick);
        expected.push(stick * z);
        stick -= stick * z;
    }
    expected.push(stick);
    let x = outputs(&mut ev, &u);
    for (got, want) in x.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-14, "{x:?} vs {expected:?}");
    }
    assert!((ev.logp(&u) - log_j).abs() < 1e-12);
}

#[test]
fn unit_vector_adds_minus_half_the_squared_norm() {
    let mut ev = evaluator(vector_model(Constraint::UnitVector, 3).build());
    for theta in points(3, 9, 2.0) {
        let expected = -0.5 * theta.iter().map(|u| u * u).sum::<f64>();
        assert!((ev.logp(&theta) - expected).abs() < 1e-12);
    }
}

#[test]
fn simplex_of_one_is_the_constant_one() {
    let mut ev = evaluator(vector_model(Constraint::Simplex, 1).build());
    assert_eq!(ev.dim(), 0);
    assert_eq!(outputs(&mut ev, &[]), [1.0]);
}

/// Constant scalar bounds given as expressions lower to today's single `Constrain`.
#[test]
fn constant_expression_bounds_are_plain_transforms() {
    let mut m = ModelBuilder::new("constant bounds");
    let two = m.data_real("two", 2.0);
    m.param_bounded("x", Some(2), Some(Expr::Const(-1.0)), Some(&two * 2.0));
    m.param_bounded("y", None, Some(two), None);
    let checked = checked(m.build()).expect("valid");
    let program = checked.program();
    assert_eq!(program.insts.len(), 2, "{:?}", program.insts);
    assert!(matches!(
        program.insts[0],
        crate::program::Inst::Constrain {
            transform: crate::program::Transform::Interval(-1.0, 4.0),
            ..
        }
    ));
    assert!(matches!(
        program.insts[1],
        crate::program::Inst::Constrain {
            transform: crate::program::Transform::Lower(2.0),
            ..
        }
    ));
}

/// Bad declarations give an error naming the parameter, never a panic.
#[test]
fn bad_declarations_name_the_parameter() {
    let param = |name: &str| Parameter {
        name: name.into(),
        ..Parameter::default()
    };
    let cases: Vec<(Vec<Parameter>, &str, &str)> = vec![
        (
            vec![Parameter {
                constraint: Constraint::Simplex,
                ..param("s")
            }],
            "parameters[0].constraint",
            "applies to vectors",
        ),
        (
            vec![Parameter {
                constraint: Constraint::Positive,
                lower: Some(Expr::Const(1.0)),
                ..param("p")
            }],
            "parameters[0]",
            "go with constraint",
        ),
        (
            vec![Parameter {
                lower: Some(Expr::Const(0.0)),
                multiplier: Some(Expr::Const(2.0)),
                ..param("p")
            }],
            "parameters[0]",
            "both bounds and an offset/multiplier",
        ),
        (
            vec![
                Parameter {
                    upper: Some(Expr::Ref("b".into())),
                    ..param("a")
                },
                param("b"),
            ],
            "parameters[0].upper",
            "uses `b`, a parameter declared at or after it",
        ),
        (
            vec![Parameter {
                lower: Some(Expr::Ref("a".into())),
                ..param("a")
            }],
            "parameters[0].lower",
            "uses `a`",
        ),
        (
            vec![Parameter {
                lower: Some(Expr::Ref("t".into())),
                ..param("a")
            }],
            "parameters[0].lower",
            "a transformed parameter",
        ),
        (
            vec![Parameter {
                size: Some(6),
                dims: vec![2, 2],
                ..param("m")
            }],
            "parameters[0].dims",
            "do not multiply to the size 6",
        ),
        (
            vec![Parameter {
                dims: vec![1],
                ..param("m")
            }],
            "parameters[0].dims",
            "a scalar parameter takes no dims",
        ),
        (
            vec![Parameter {
                size: Some(3),
                lower: Some(Expr::Ref("v2".into())),
                ..param("x")
            }],
            "parameters[0].lower",
            "the parameter is a vector of length 3",
        ),
        (
            vec![Parameter {
                lower: Some(Expr::Const(2.0)),
                upper: Some(Expr::Const(1.0)),
                ..param("x")
            }],
            "parameters[0].lower",
            "must be below upper bound",
        ),
        (
            vec![Parameter {
                multiplier: Some(Expr::Const(-1.0)),
                ..param("x")
            }],
            "parameters[0].multiplier",
            "must be > 0",
        ),
    ];
    for (k, (parameters, path, message)) in cases.into_iter().enumerate() {
        let mut m = ModelBuilder::new("bad");
        m.data_vector("v2", vec![1.0, 2.0]);
        for parameter in parameters {
            m.param_decl(parameter);
        }
        m.transformed("t", Expr::Const(1.0) + "v2");
        let err = checked(m.build()).expect_err("invalid");
        assert_eq!(err.path, path, "case {k}: {err}");
        assert!(err.to_string().contains(message), "case {k}: {err}");
    }
}

/// Output columns follow `dims`: `m[2,1]` in summaries and `m.2.1` in Stan CSV, row-major.
#[test]
fn dims_name_columns_row_major() {
    let mut m = ModelBuilder::new("dims");
    m.param_decl(Parameter {
        name: "m".into(),
        size: Some(6),
        dims: vec![2, 3],
        ..Parameter::default()
    });
    m.transformed_with_dims("t", Expr::Ref("m".into()).slice(0, 4), vec![2, 2]);
    m.transformed_with_dims("v", Expr::Ref("m".into()).slice(0, 2), vec![2]);
    let checked = checked(m.build()).expect("valid");
    let names: Vec<String> = checked.columns().iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "m[1,1]", "m[1,2]", "m[1,3]", "m[2,1]", "m[2,2]", "m[2,3]", "t[1,1]", "t[1,2]",
            "t[2,1]", "t[2,2]", "v[1]", "v[2]"
        ]
    );
    // Stan CSV names (`stan_csv` joins the indices with dots).
    let columns = checked.columns();
    assert_eq!(columns[3].indices_1based(".").as_deref(), Some("2.1"));
    assert_eq!(columns[10].indices_1based(".").as_deref(), Some("1"));
    let mut bad = ModelBuilder::new("dims");
    let x = bad.vector_param("x", 3);
    bad.transformed_with_dims("t", x, vec![2, 2]);
    let err = checked_err(bad.build());
    assert_eq!(err.path, "transformed[0].dims", "{err}");
}

fn checked_err(model: Model) -> ModelError {
    checked(model).expect_err("invalid")
}

mod matrix;
