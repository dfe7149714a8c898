//! Matrices that depend on parameters: log densities against the same computation done on
//! the host with `f64` (Cholesky factor, triangular solve), gradients against finite
//! differences, and the size limit of unrolled factorisations.

use sampler::CheckedModel;

use super::super::test_support::{check_points, lower, try_lower};

use crate::host::linalg::{cholesky, solve_lower};

/// Deterministic points uniform on (-1.5, 1.5).
fn points(dim: usize, count: usize) -> Vec<Vec<f64>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 3.0 - 1.5
    };
    (0..count)
        .map(|_| (0..dim).map(|_| next()).collect())
        .collect()
}

/// The lowered log density minus `by_hand` is one constant at every point, and the gradient
/// matches central finite differences.
fn check(model: &CheckedModel, dim: usize, by_hand: impl Fn(&[f64]) -> f64) {
    assert_eq!(model.dim(), dim, "unconstrained dimension");
    check_points(model, &points(dim, 5), 1e-8, by_hand);
}

/// `log N(y | mu, L L^T)` on the host.
fn multi_normal_cholesky(y: &[f64], mu: &[f64], l: &[f64]) -> f64 {
    let k = y.len();
    let r: Vec<f64> = y.iter().zip(mu).map(|(a, b)| a - b).collect();
    let z = solve_lower(k, l, 1, &r);
    -0.5 * z.iter().map(|v| v * v).sum::<f64>() - (0..k).map(|i| l[i * k + i].ln()).sum::<f64>()
}

const GP_REGR: &str = include_str!("../../../tests/posteriordb/models/gp_regr.stan");
const GP_POIS_REGR: &str = include_str!("../../../tests/posteriordb/models/gp_pois_regr.stan");

const X: [f64; 6] = [-3.0, -1.5, 0.0, 1.0, 2.5, 4.0];
const Y: [f64; 6] = [0.4, 1.2, -0.3, 0.8, 2.1, 1.5];

fn exp_quad(alpha: f64, rho: f64, jitter: f64) -> Vec<f64> {
    let n = X.len();
    let mut k = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            k[i * n + j] = alpha * alpha * (-(X[i] - X[j]).powi(2) / (2.0 * rho * rho)).exp();
        }
        k[i * n + i] += jitter;
    }
    k
}

fn data() -> String {
    format!(r#"{{"N": 6, "x": {X:?}, "y": {Y:?}, "k": [3, 0, 1, 4, 7, 2]}}"#)
}

/// posteriordb's `gp_regr`: `gp_exp_quad_cov`, `diag_matrix`, `cholesky_decompose` and
/// `multi_normal_cholesky` with a factor that depends on parameters.
#[test]
fn gp_regr_matches_the_host_cholesky() {
    let model = lower(GP_REGR, &data());
    check(&model, 3, |u| {
        let (rho, alpha, sigma) = (u[0].exp(), u[1].exp(), u[2].exp());
        let l = cholesky(6, &exp_quad(alpha, rho, sigma)).expect("positive definite");
        let gamma = 24.0 * rho.ln() - 4.0 * rho;
        let priors = gamma - 0.5 * (alpha / 2.0).powi(2) - 0.5 * sigma * sigma;
        multi_normal_cholesky(&Y, &[0.0; 6], &l) + priors + u.iter().sum::<f64>()
    });
}

/// posteriordb's `gp_pois_regr`: a factor times a parameter vector, in a nested block of
/// `transformed parameters`.
#[test]
fn gp_pois_regr_matches_the_host_cholesky() {
    let model = lower(GP_POIS_REGR, &data());
    let counts = [3.0, 0.0, 1.0, 4.0, 7.0, 2.0];
    check(&model, 8, |u| {
        let (rho, alpha) = (u[0].exp(), u[1].exp());
        let f_tilde = &u[2..8];
        let l = cholesky(6, &exp_quad(alpha, rho, 1e-10)).expect("positive definite");
        let f: Vec<f64> = (0..6)
            .map(|i| (0..=i).map(|j| l[i * 6 + j] * f_tilde[j]).sum())
            .collect();
        let gamma = 24.0 * rho.ln() - 4.0 * rho;
        let priors =
            gamma - 0.5 * (alpha / 2.0).powi(2) - 0.5 * f_tilde.iter().map(|v| v * v).sum::<f64>();
        let likelihood: f64 = f.iter().zip(counts).map(|(f, k)| k * f - f.exp()).sum();
        likelihood + priors + u[0] + u[1]
    });
}

/// A covariance that is a data matrix times an expression of parameters, transposes and
/// products of parameter matrices, and a right triangular solve.
#[test]
fn products_transposes_and_solves_match_the_host() {
    let source = "data {\n  array[2] vector[2] y;\n  matrix[2, 2] S;\n}\nparameters {\n  real<lower=0> tau;\n  vector[2] mu;\n  matrix[2, 2] A;\n}\nmodel {\n  matrix[2, 2] B = A * A' + diag_matrix(rep_vector(1, 2));\n  y ~ multi_normal(mu, S * tau * tau);\n  target += -0.5 * sum(mdivide_right_tri_low(mu', cholesky_decompose(B)));\n  target += trace(tcrossprod(A)) * -0.1;\n}\n";
    let data = r#"{"y": [[1, 2], [0, 1]], "S": [[2, 0.5], [0.5, 1]]}"#;
    let model = lower(source, data);
    check(&model, 7, |u| {
        let tau = u[0].exp();
        let mu = [u[1], u[2]];
        let a = [u[3], u[4], u[5], u[6]];
        let s = [2.0, 0.5, 0.5, 1.0];
        let sigma: Vec<f64> = s.iter().map(|v| v * tau * tau).collect();
        let l = cholesky(2, &sigma).expect("positive definite");
        let mut lp = multi_normal_cholesky(&[1.0, 2.0], &mu, &l)
            + multi_normal_cholesky(&[0.0, 1.0], &mu, &l);
        // B = A A^T + I; x L = mu^T by back substitution.
        let b = [
            a[0] * a[0] + a[1] * a[1] + 1.0,
            a[0] * a[2] + a[1] * a[3],
            a[0] * a[2] + a[1] * a[3],
            a[2] * a[2] + a[3] * a[3] + 1.0,
        ];
        let lb = cholesky(2, &b).expect("positive definite");
        let x1 = mu[1] / lb[3];
        let x0 = (mu[0] - x1 * lb[2]) / lb[0];
        lp += -0.5 * (x0 + x1);
        lp += -0.1 * a.iter().map(|v| v * v).sum::<f64>();
        lp + u[0]
    });
}

/// An unrolled factorisation is refused, with the limit, above its size.
#[test]
fn large_factorisations_are_refused() {
    let n = super::MAX_UNROLLED + 1;
    let source = "data {\n  int N;\n  array[N] real x;\n}\nparameters {\n  real<lower=0> rho;\n}\nmodel {\n  matrix[N, N] L = cholesky_decompose(add_diag(gp_exp_quad_cov(x, 1.0, rho), 0.1));\n  target += sum(L);\n}\n";
    let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let data = format!(r#"{{"N": {n}, "x": {xs:?}}}"#);
    let err = try_lower(source, &data).expect_err("refused");
    assert!(
        err.contains("test.stan:9:20: error: `cholesky_decompose` of a 49x49 matrix")
            && err.contains("the limit is 48x48"),
        "{err}"
    );
}

/// `to_vector` of a matrix that depends on parameters is column-major, as in Stan.
#[test]
fn to_vector_of_a_matrix_is_column_major() {
    let source = "data {\n  vector[6] w;\n}\nparameters {\n  matrix[2, 3] A;\n}\nmodel {\n  matrix[2, 3] B = A .* A;\n  target += dot_product(to_vector(B), w);\n}\n";
    let w = [1.0, -2.0, 0.5, 3.0, -1.5, 0.25];
    let model = lower(source, &format!(r#"{{"w": {w:?}}}"#));
    check(&model, 6, |u| {
        // u is row-major: A[i][j] = u[3 i + j]; column-major position of (i, j) is 2 j + i.
        let mut lp = 0.0;
        for i in 0..2 {
            for j in 0..3 {
                lp += u[3 * i + j].powi(2) * w[2 * j + i];
            }
        }
        lp
    });
}
