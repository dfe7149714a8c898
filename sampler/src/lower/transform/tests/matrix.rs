//! Matrix constraints: Cholesky factors of correlation and covariance matrices, correlation
//! and covariance matrices. Log-Jacobians against numerical determinants over the free
//! elements, gradients against finite differences, the constraints at random points, and
//! Stan's transforms by hand.

use super::{check_gradient, check_log_jacobian_of, evaluator, outputs, points};
use crate::builder::ModelBuilder;
use crate::eval::LogDensity;
use crate::ir::{Constraint, Dist, Expr, Model, Parameter, Statement};

fn matrix_model(constraint: Constraint, m: usize, n: usize) -> Model {
    let mut b = ModelBuilder::new(format!("{constraint:?}"));
    b.param_decl(Parameter {
        name: "x".into(),
        size: Some(m * n),
        constraint,
        dims: vec![m, n],
        ..Parameter::default()
    });
    b.build()
}

/// Row-major positions of the free elements: strictly lower for correlations, lower with
/// the diagonal otherwise.
fn free(constraint: Constraint, m: usize, n: usize) -> Vec<usize> {
    let strict = matches!(
        constraint,
        Constraint::CholeskyFactorCorr | Constraint::CorrMatrix
    );
    let mut out = Vec::new();
    for i in 0..m {
        for j in 0..n {
            if j < i || (j == i && !strict) {
                out.push(i * n + j);
            }
        }
    }
    out
}

const CASES: [(Constraint, usize, usize); 9] = [
    (Constraint::CholeskyFactorCorr, 2, 2),
    (Constraint::CholeskyFactorCorr, 4, 4),
    (Constraint::CholeskyFactorCov, 3, 3),
    (Constraint::CholeskyFactorCov, 4, 2),
    (Constraint::CorrMatrix, 2, 2),
    (Constraint::CorrMatrix, 3, 3),
    (Constraint::CorrMatrix, 4, 4),
    (Constraint::CovMatrix, 1, 1),
    (Constraint::CovMatrix, 3, 3),
];

#[test]
fn matrix_log_jacobians_match_numerical_determinants() {
    for (k, (constraint, m, n)) in CASES.into_iter().enumerate() {
        let name = format!("{constraint:?} {m}x{n}");
        check_log_jacobian_of(
            &name,
            matrix_model(constraint, m, n),
            100 + k as u64,
            &free(constraint, m, n),
        );
    }
}

#[test]
fn matrix_transform_gradients_match_finite_differences() {
    for (k, (constraint, m, n)) in CASES.into_iter().enumerate() {
        let mut model = matrix_model(constraint, m, n);
        // Weights on every element so that adjoints flow through all of them.
        let weights: Vec<f64> = (0..m * n).map(|i| 0.3 + 0.17 * i as f64).collect();
        model
            .data
            .insert("w".into(), crate::ir::DataValue::Vector(weights));
        model.model.push(Statement::Factor {
            value: Expr::Ref("x".into()) * Expr::Ref("w".into()),
        });
        model.model.push(Statement::Sample {
            value: Expr::Ref("x".into()),
            dist: Dist::normal(0.1, 1.3),
        });
        check_gradient(&format!("{constraint:?} {m}x{n}"), model, 120 + k as u64);
    }
}

#[test]
fn matrix_constraints_hold_at_random_points() {
    for (constraint, m, n) in CASES {
        let mut ev = evaluator(matrix_model(constraint, m, n));
        for theta in points(ev.dim(), 11, 3.0) {
            let x = outputs(&mut ev, &theta);
            assert_eq!(x.len(), m * n);
            let at = |i: usize, j: usize| x[i * n + j];
            let lower = (0..m).all(|i| (i + 1..n).all(|j| at(i, j) == 0.0));
            let ok = match constraint {
                Constraint::CholeskyFactorCorr => {
                    lower
                        && (0..m).all(|i| {
                            at(i, i) > 0.0
                                && ((0..n).map(|j| at(i, j).powi(2)).sum::<f64>() - 1.0).abs()
                                    < 1e-12
                        })
                }
                Constraint::CholeskyFactorCov => lower && (0..n).all(|i| at(i, i) > 0.0),
                _ => {
                    let symmetric = (0..m).all(|i| (0..n).all(|j| at(i, j) == at(j, i)));
                    let unit = (0..m).all(|i| (at(i, i) - 1.0).abs() < 1e-12);
                    let factor = cholesky(m, &x);
                    symmetric && factor.is_some() && (constraint == Constraint::CovMatrix || unit)
                }
            };
            assert!(ok, "{constraint:?}: {x:?} at {theta:?}");
        }
    }
}

fn cholesky(k: usize, a: &[f64]) -> Option<Vec<f64>> {
    let mut l = vec![0.0f64; k * k];
    for j in 0..k {
        let d: f64 = a[j * k + j] - (0..j).map(|m| l[j * k + m].powi(2)).sum::<f64>();
        if d <= 0.0 {
            return None;
        }
        l[j * k + j] = d.sqrt();
        for i in j + 1..k {
            let s: f64 = (0..j).map(|m| l[i * k + m] * l[j * k + m]).sum::<f64>();
            l[i * k + j] = (a[i * k + j] - s) / l[j * k + j];
        }
    }
    Some(l)
}

/// Stan's `cholesky_corr_constrain` and `cholesky_factor_constrain`, by hand.
#[test]
fn cholesky_factors_match_stan_by_hand() {
    let u = [0.4, -0.9, 1.3];
    let z: Vec<f64> = u.iter().map(|v: &f64| v.tanh()).collect();
    // K = 3: row 1: z0; row 2: z1, z2 sqrt(1 - z1^2).
    let l21 = z[2] * (1.0 - z[1] * z[1]).sqrt();
    let expected = [
        1.0,
        0.0,
        0.0,
        z[0],
        (1.0 - z[0] * z[0]).sqrt(),
        0.0,
        z[1],
        l21,
        (1.0 - z[1] * z[1] - l21 * l21).sqrt(),
    ];
    let mut ev = evaluator(matrix_model(Constraint::CholeskyFactorCorr, 3, 3));
    let x = outputs(&mut ev, &u);
    for (got, want) in x.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-14, "{x:?} vs {expected:?}");
    }
    let log_j: f64 =
        z.iter().map(|z| (1.0 - z * z).ln()).sum::<f64>() + 0.5 * (1.0 - z[1] * z[1]).ln();
    assert!((ev.logp(&u) - log_j).abs() < 1e-12);

    let mut ev = evaluator(matrix_model(Constraint::CholeskyFactorCov, 3, 2));
    let u = [0.3, -0.2, 0.5, 1.1, -0.7];
    let expected = [0.3f64.exp(), 0.0, -0.2, 0.5f64.exp(), 1.1, -0.7];
    let x = outputs(&mut ev, &u);
    assert_eq!(x.len(), 6);
    for (got, want) in x.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-14, "{x:?} vs {expected:?}");
    }
    assert!((ev.logp(&u) - 0.8).abs() < 1e-12);
}

/// At zero coordinates a correlation matrix is the identity, and a covariance matrix too.
#[test]
fn matrices_at_zero_are_the_identity() {
    for constraint in [Constraint::CorrMatrix, Constraint::CovMatrix] {
        let mut ev = evaluator(matrix_model(constraint, 3, 3));
        let zeros = vec![0.0; ev.dim()];
        let x = outputs(&mut ev, &zeros);
        for i in 0..3 {
            for j in 0..3 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((x[i * 3 + j] - want).abs() < 1e-15, "{constraint:?}: {x:?}");
            }
        }
    }
}

#[test]
fn matrix_constraints_need_a_matrix_shape() {
    for (constraint, dims, size) in [
        (Constraint::CorrMatrix, vec![], 4),
        (Constraint::CholeskyFactorCorr, vec![2, 3], 6),
        (Constraint::CholeskyFactorCov, vec![2, 3], 6),
        (Constraint::CovMatrix, vec![2, 2], 5),
    ] {
        let mut b = ModelBuilder::new("bad");
        b.param_decl(Parameter {
            name: "x".into(),
            size: Some(size),
            constraint,
            dims,
            ..Parameter::default()
        });
        let err = super::checked(b.build()).expect_err("invalid");
        assert!(err.to_string().contains("needs `dims`"), "{err}");
    }
}

fn array_model(constraint: Constraint, rows: usize, n: usize) -> Model {
    let mut b = ModelBuilder::new(format!("array of {constraint:?}"));
    b.param_decl(Parameter {
        name: "x".into(),
        size: Some(rows * n),
        constraint,
        dims: vec![rows, n],
        ..Parameter::default()
    });
    b.build()
}

/// An array of constrained vectors (`dims` `[rows, n]`) is each row transformed on its own:
/// the same values and log density as one parameter per row.
#[test]
fn arrays_of_vector_constraints_transform_each_row() {
    for (k, constraint) in [
        Constraint::Simplex,
        Constraint::Ordered,
        Constraint::PositiveOrdered,
        Constraint::UnitVector,
    ]
    .into_iter()
    .enumerate()
    {
        let (rows, n) = (3, 4);
        let mut ev = evaluator(array_model(constraint, rows, n));
        let mut row = evaluator(super::vector_model(constraint, n).build());
        let per_row = row.dim();
        assert_eq!(ev.dim(), rows * per_row, "{constraint:?}");
        for theta in points(ev.dim(), 30 + k as u64, 2.0) {
            let x = outputs(&mut ev, &theta);
            let mut lp = 0.0;
            for r in 0..rows {
                let u = &theta[r * per_row..(r + 1) * per_row];
                let want = outputs(&mut row, u);
                assert_eq!(&x[r * n..(r + 1) * n], &want[..], "{constraint:?} row {r}");
                lp += row.logp(u);
            }
            assert!((ev.logp(&theta) - lp).abs() < 1e-12, "{constraint:?}");
        }
    }
    // The rows' first n - 1 simplex values against all coordinates.
    let free: Vec<usize> = (0..2)
        .flat_map(|r| (0..2).map(move |j| r * 3 + j))
        .collect();
    check_log_jacobian_of(
        "array of simplexes",
        array_model(Constraint::Simplex, 2, 3),
        50,
        &free,
    );
}
