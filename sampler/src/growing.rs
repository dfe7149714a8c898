//! Families of models that grow with one size `n`, for the study of shader size and compile
//! time against model size (issue 22): written the way users wrote the models whose GPU
//! kernels took minutes to build. `bench/models/gen_compile.py` writes the same models as
//! JSON.
//!
//! * [`Family::Gp`]: a Gaussian process on `n` points whose squared-exponential kernel and
//!   its Cholesky factor are written out as scalar transformed values (`K_ij`, then `L_ij` by
//!   the Cholesky recurrence, then `f_i = sum_j L_ij z_j`): O(n^3) scalar instructions.
//! * [`Family::Arma`]: the closed-form mean of an ARMA(1,1), two `n x n` data matrices of
//!   powers times functions of the parameters: a handful of instructions over `n x n`
//!   products.
//! * [`Family::Chain`]: `n` scalar transformed values, each computed from the one before:
//!   about `5 n` instructions.
//!
//! Data are deterministic functions of the index (no random numbers), so a size gives the
//! same model everywhere.

use crate::builder::ModelBuilder;
use crate::ir::{Constraint, Dist, Expr, Model};

/// A family of models of growing size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// A Gaussian process with its Cholesky factor written out ([`gp`]).
    Gp,
    /// An ARMA(1,1) mean from two `n x n` data matrices ([`arma`]).
    Arma,
    /// A chain of scalar transformed values ([`chain`]).
    Chain,
}

impl Family {
    /// Every family.
    pub const ALL: [Family; 3] = [Family::Gp, Family::Arma, Family::Chain];

    /// Its name, which prefixes its models' names.
    pub fn name(self) -> &'static str {
        match self {
            Family::Gp => "gp",
            Family::Arma => "arma",
            Family::Chain => "chain",
        }
    }

    /// The model of size `n` (at least 2).
    pub fn model(self, n: usize) -> Model {
        match self {
            Family::Gp => gp(n),
            Family::Arma => arma(n),
            Family::Chain => chain(n),
        }
    }

    /// The sizes of the study's table (`bench/journal.md`, BENCHMARKS.md).
    pub fn sizes(self) -> &'static [usize] {
        match self {
            Family::Gp => &[3, 5, 7, 9, 11, 13],
            Family::Arma => &[5, 10, 20, 50, 100, 200],
            Family::Chain => &[10, 30, 100, 300, 1000],
        }
    }
}

/// A Gaussian process on `n` points of `[0, 5]` with a squared-exponential kernel
/// (`alpha^2 exp(-d^2 / (2 rho^2))`, 0.01 added on the diagonal, which keeps the factor well
/// conditioned in f32), its Cholesky factor `L`
/// written out element by element, and `y_i ~ normal((L z)_i, sigma)`.
pub fn gp(n: usize) -> Model {
    let n = n.max(2);
    let mut m = ModelBuilder::new(format!("gp{n}"));
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 5.0 / (n - 1) as f64).collect();
    let y: Vec<Expr> = (0..n)
        .map(|i| {
            let value = x[i].sin() + 0.1 * (7.3 * i as f64 + 1.0).sin();
            m.data_real(&format!("y{i}"), value)
        })
        .collect();
    let rho = m.param_constrained("rho", Constraint::Positive);
    let alpha = m.param_constrained("alpha", Constraint::Positive);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let z: Vec<Expr> = (0..n).map(|i| m.param(&format!("z{i}"))).collect();
    let mut kernel = vec![vec![Expr::Const(0.0); n]; n];
    for i in 0..n {
        for j in 0..=i {
            let half_d2 = 0.5 * (x[i] - x[j]).powi(2);
            let mut value = alpha.pow(2.0) * ((-half_d2) / rho.pow(2.0)).exp();
            if i == j {
                value = value + 0.01;
            }
            kernel[i][j] = m.transformed(&format!("K{i}_{j}"), value);
        }
    }
    let mut factor = vec![vec![Expr::Const(0.0); n]; n];
    for j in 0..n {
        let diagonal = factor[j][..j]
            .iter()
            .fold(kernel[j][j].clone(), |sum, l| sum - l.pow(2.0));
        factor[j][j] = m.transformed(&format!("L{j}_{j}"), diagonal.sqrt());
        for i in j + 1..n {
            let value = factor[i][..j]
                .iter()
                .zip(&factor[j][..j])
                .fold(kernel[i][j].clone(), |sum, (a, b)| sum - a * b);
            factor[i][j] = m.transformed(&format!("L{i}_{j}"), value / &factor[j][j]);
        }
    }
    let f: Vec<Expr> = (0..n)
        .map(|i| {
            let mut value = &factor[i][0] * &z[0];
            for j in 1..=i {
                value = value + &factor[i][j] * &z[j];
            }
            m.transformed(&format!("f{i}"), value)
        })
        .collect();
    m.sample(&rho, Dist::log_normal(0.0, 1.0));
    m.sample(&alpha, Dist::normal(0.0, 2.0));
    m.sample(&sigma, Dist::normal(0.0, 1.0));
    for z in &z {
        m.sample(z, Dist::normal(0.0, 1.0));
    }
    for (y, f) in y.iter().zip(&f) {
        m.sample(y, Dist::normal(f, &sigma));
    }
    m.build()
}

/// The ARMA(1,1) mean of `n` observations in closed form: `mu = P1 exp(a j) + P2 (b j) + c`
/// with the data matrices of powers `P1[t][k] = 0.6^(t - k)` (`k <= t`) and
/// `P2[t][k] = 0.3 * 0.6^(t - k - 1)` (`k < t`), `j = k / n`, and `y ~ normal(mu, s)`.
pub fn arma(n: usize) -> Model {
    let n = n.max(2);
    let (phi, theta) = (0.6f64, 0.3f64);
    let mut m = ModelBuilder::new(format!("arma{n}"));
    let p1: Vec<Vec<f64>> = (0..n)
        .map(|t| {
            (0..n)
                .map(|k| {
                    if k <= t {
                        phi.powi((t - k) as i32)
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let p2: Vec<Vec<f64>> = (0..n)
        .map(|t| {
            (0..n)
                .map(|k| {
                    if k < t {
                        theta * phi.powi((t - k - 1) as i32)
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let mut observed = vec![0.0; n];
    for t in 0..n {
        let previous = if t > 0 { phi * observed[t - 1] } else { 0.0 };
        observed[t] = 0.5 + previous + (1.7 * t as f64 + 0.3).sin();
    }
    let p1 = m.data_matrix("P1", p1);
    let p2 = m.data_matrix("P2", p2);
    let j = m.data_vector("j", (0..n).map(|k| k as f64 / n as f64).collect());
    let y = m.data_vector("y", observed);
    let a = m.param("a");
    let b = m.param("b");
    let c = m.param("c");
    let s = m.param_constrained("s", Constraint::Positive);
    let mu = m.transformed("mu", p1.matvec((&a * &j).exp()) + p2.matvec(&b * &j) + &c);
    m.sample(&a, Dist::normal(0.0, 1.0));
    m.sample(&b, Dist::normal(0.0, 1.0));
    m.sample(&c, Dist::normal(0.0, 1.0));
    m.sample(&s, Dist::exponential(1.0));
    m.sample(&y, Dist::normal(&mu, &s));
    m.build()
}

/// `n` scalar transformed values, `x_0 = a` and `x_k = 0.9 x_{k-1} + 0.1 logistic(x_{k-1} +
/// b)`, and `0.3 ~ normal(x_{n-1}, 1)`.
pub fn chain(n: usize) -> Model {
    let n = n.max(2);
    let mut m = ModelBuilder::new(format!("chain{n}"));
    let y = m.data_real("y", 0.3);
    let a = m.param("a");
    let b = m.param("b");
    let mut x = m.transformed("x0", a.clone());
    for k in 1..n {
        let next = &x * 0.9 + 0.1 * (&x + &b).logistic();
        x = m.transformed(&format!("x{k}"), next);
    }
    m.sample(&a, Dist::normal(0.0, 1.0));
    m.sample(&b, Dist::normal(0.0, 1.0));
    m.sample(&y, Dist::normal(&x, 1.0));
    m.build()
}

#[cfg(test)]
mod tests;
