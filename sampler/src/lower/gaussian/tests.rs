//! The sufficient-statistics form of a normal linear model against the sum over the rows.

use super::*;
use crate::builder::ModelBuilder;
use crate::eval::LogDensity;
use crate::ir::{Constraint, Dist};
use crate::limits::Limits;
use crate::program::DensityKind;
use crate::rng::{ChainId, ChainRng, Seed};
use crate::validate::CheckedModel;

/// `n x k` predictors, columns on different scales and offsets (the hard case for the
/// direct sum of squares is a large common offset in `y`).
fn data(rng: &mut ChainRng, n: usize, k: usize, y_offset: f64) -> (Vec<Vec<f64>>, Vec<f64>) {
    let x: Vec<Vec<f64>> = (0..n)
        .map(|_| {
            (0..k)
                .map(|j| rng.uniform_in(-1.0, 1.0) * (j + 1) as f64 + j as f64)
                .collect()
        })
        .collect();
    let y = x
        .iter()
        .map(|row| y_offset + row.iter().sum::<f64>() * 0.3 + rng.uniform_in(-0.1, 0.1))
        .collect();
    (x, y)
}

/// `y ~ normal(c + X b, sigma)` as a model; `intercept` false drops `c`.
fn model(x: &[Vec<f64>], y: &[f64], intercept: bool) -> CheckedModel {
    let k = x[0].len();
    let mut m = ModelBuilder::new("glm");
    let design = m.data_matrix("X", x.to_vec());
    let observed = m.data_vector("y", y.to_vec());
    let b = m.vector_param("b", k);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let mut mu = Expr::Binary(BinaryOp::Matvec, Box::new(design), Box::new(b.clone()));
    if intercept {
        let c = m.param("c");
        mu = Expr::Binary(BinaryOp::Add, Box::new(c), Box::new(mu));
    }
    m.sample(observed, Dist::normal(mu, sigma));
    m.sample(&b, Dist::normal(0.0, 10.0));
    CheckedModel::new(m.build(), &Limits::default()).unwrap()
}

/// `sum_i log normal(y_i | c + x_i b, sigma)` up to `n ln(2 pi) / 2`, plus the prior and
/// the Jacobian of `sigma = exp(u)`, at unconstrained `theta = [b, u, c]`.
fn direct(x: &[Vec<f64>], y: &[f64], intercept: bool, theta: &[f64]) -> f64 {
    let k = x[0].len();
    let (b, u) = (&theta[..k], theta[k]);
    let c = if intercept { theta[k + 1] } else { 0.0 };
    let sigma = u.exp();
    let ss: f64 = x
        .iter()
        .zip(y)
        .map(|(row, y)| {
            let r = y - c - row.iter().zip(b).map(|(x, b)| x * b).sum::<f64>();
            r * r
        })
        .sum();
    let prior: f64 = b.iter().map(|b| -0.5 * (b / 10.0).powi(2)).sum();
    -ss / (2.0 * sigma * sigma) - y.len() as f64 * sigma.ln() + prior + u
}

fn uses_sufficient_statistics(model: &CheckedModel) -> bool {
    !model.program().insts.iter().any(
        |inst| matches!(inst, Inst::Density { kind: DensityKind::Normal, len, .. } if *len > 50),
    )
}

#[test]
fn matches_the_sum_over_rows_with_and_without_an_offset() {
    let mut rng = ChainRng::new(Seed(3), ChainId(0));
    for (intercept, y_offset) in [(true, 0.0), (true, 1e4), (false, 2.0)] {
        let (x, y) = data(&mut rng, 200, 3, y_offset);
        let model = model(&x, &y, intercept);
        assert!(uses_sufficient_statistics(&model), "not rewritten");
        let mut evaluator = model.evaluator();
        let dim = evaluator.dim();
        // Near the fit, where the log density is not a large number.
        let mut base: Vec<f64> = vec![0.3; dim];
        if intercept {
            base[4] = y_offset;
        }
        let offset = evaluator.logp(&base) - direct(&x, &y, intercept, &base);
        for _ in 0..5 {
            let mut theta: Vec<f64> = (0..dim).map(|_| rng.uniform_in(-0.5, 0.5)).collect();
            theta[3] = rng.uniform_in(-3.0, 0.5); // ln sigma
            if intercept {
                theta[4] += y_offset;
            }
            let mut grad = vec![0.0; dim];
            let lp = evaluator.logp_grad(&theta, &mut grad) - offset;
            let expected = direct(&x, &y, intercept, &theta);
            assert!(
                (lp - expected).abs() <= 1e-9 * expected.abs().max(1.0),
                "offset {y_offset}: {lp} against {expected}"
            );
            for i in 0..dim {
                let h = 1e-5 * theta[i].abs().max(1.0);
                let (mut up, mut down) = (theta.clone(), theta.clone());
                up[i] += h;
                down[i] -= h;
                let fd =
                    (direct(&x, &y, intercept, &up) - direct(&x, &y, intercept, &down)) / (2.0 * h);
                assert!(
                    (grad[i] - fd).abs() <= 1e-6 * (fd.abs() + 10.0),
                    "offset {y_offset}: d/dtheta[{i}] = {} against {fd}",
                    grad[i]
                );
            }
        }
    }
}

#[test]
fn collinear_predictors_keep_the_sum_over_rows() {
    let mut rng = ChainRng::new(Seed(4), ChainId(0));
    let (mut x, y) = data(&mut rng, 100, 3, 0.0);
    for row in &mut x {
        row[2] = 2.0 * row[0];
    }
    let model = model(&x, &y, true);
    assert!(!uses_sufficient_statistics(&model));
    let theta = [0.1, -0.2, 0.3, -1.0, 0.5];
    let lp = model.evaluator().logp(&theta);
    let base = [0.0; 5];
    let expected = direct(&x, &y, true, &theta) - direct(&x, &y, true, &base);
    let got = lp - model.evaluator().logp(&base);
    assert!(
        (got - expected).abs() < 1e-8 * expected.abs(),
        "{got} against {expected}"
    );
}

#[test]
fn cholesky_solve_solves_and_refuses_singular_matrices() {
    let a = [4.0, 2.0, 0.6, 2.0, 5.0, 1.0, 0.6, 1.0, 3.0];
    let x = cholesky_solve(&a, 3, &[1.0, 2.0, 3.0]).unwrap();
    for i in 0..3 {
        let row: f64 = (0..3).map(|j| a[i * 3 + j] * x[j]).sum();
        assert!((row - (i + 1) as f64).abs() < 1e-14);
    }
    assert!(cholesky_solve(&[1.0, 2.0, 2.0, 4.0], 2, &[1.0, 1.0]).is_none());
}
