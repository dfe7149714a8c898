//! Normal linear models through their sufficient statistics: `y ~ normal(c + X b, sigma)`
//! with data `y` and `X` costs O(K^2) per gradient instead of O(N K).
//!
//! With `Z = [1 X]` (the column of ones only when there is an offset `c`), `beta = [c; b]`,
//! and any `beta_hat` (the least-squares fit, computed here once), the sum of squares is
//! exactly
//!
//! ```text
//! |y - Z beta|^2 = RSS - 2 g'd + d' G d,   d = beta - beta_hat,
//! RSS = |y - Z beta_hat|^2,  g = Z'(y - Z beta_hat),  G = Z'Z,
//! ```
//!
//! a sum of a constant and a small quadratic form with no cancellation between large terms
//! (`g` is the fit's rounding error, kept so that the identity holds for the `beta_hat`
//! actually computed). The density `-|y - Z beta|^2 / (2 sigma^2) - N ln sigma` is then
//! written with ordinary instructions (a data matrix product, a dot product), so the GPU
//! runs it too.

use super::{Lowerer, Shape, Value};
use crate::ir::{BinaryOp, Expr};
use crate::model_error::ModelError;
use crate::program::{Inst, ListRef, MapOp, MatrixRef, Operand, StatementId, ZipOp};

/// Below this many observations per coefficient the direct sum is as cheap.
const MIN_ROWS_PER_COEFFICIENT: usize = 4;

impl Lowerer<'_> {
    /// Lowers `value ~ normal(mu, sigma)` through sufficient statistics when `value` is
    /// data, `mu` is `X b`, `c + X b` or `X b + c` with a data matrix `X` and a scalar `c`,
    /// and `sigma` is a scalar that depends on parameters. Returns `false`, having emitted
    /// nothing that matters, when the statement is not of that form (or `Z'Z` is singular):
    /// the ordinary path then lowers it.
    pub(super) fn gaussian_linear(
        &mut self,
        path: &str,
        source: StatementId,
        value: &Value,
        mu: &Expr,
        sigma: &Expr,
    ) -> Result<bool, ModelError> {
        let Some((matrix, coefficients, offset)) = linear_predictor(mu) else {
            return Ok(false);
        };
        let (Shape::Vector(n), true) = (value.shape, value.is_constant()) else {
            return Ok(false);
        };
        let matrix = self.expr(matrix, &format!("{path}.dist.normal.mu"))?;
        let (Shape::Matrix(rows, cols), Operand::Data(m)) = (matrix.shape, matrix.operand) else {
            return Ok(false);
        };
        let b = self.expr(coefficients, &format!("{path}.dist.normal.mu"))?;
        let c = match offset {
            Some(offset) => Some(self.expr(offset, &format!("{path}.dist.normal.mu"))?),
            None => None,
        };
        let sigma = self.expr(sigma, &format!("{path}.dist.normal.sigma"))?;
        let k = cols + usize::from(c.is_some());
        if rows != n
            || b.shape != Shape::Vector(cols)
            || c.as_ref().is_some_and(|c| c.shape != Shape::Scalar)
            || sigma.shape != Shape::Scalar
            || sigma.is_constant()
            || n < MIN_ROWS_PER_COEFFICIENT * k
        {
            return Ok(false);
        }
        let y = self.values(value).to_vec();
        let x = &self.program.data[m.offset as usize..m.offset as usize + rows * cols];
        let Some(stats) = Statistics::new(&y, x, cols, c.is_some()) else {
            return Ok(false);
        };

        // d = [c; b] - beta_hat
        let beta = match c {
            Some(c) => {
                let parts = ListRef {
                    offset: self.program.lists.len() as u32,
                    len: 2,
                };
                self.program.lists.extend([c.operand, b.operand]);
                self.value_inst(path, k, move |dst| Inst::Concat { parts, dst })?
            }
            None => b.operand,
        };
        let beta_hat = Operand::Data(self.push_data(path, &stats.beta_hat)?);
        let d = self.value_inst(path, k, move |dst| Inst::Zip {
            op: ZipOp::Sub,
            a: beta,
            b: beta_hat,
            dst,
        })?;
        // w = G d - 2 g; q = d'w + RSS
        let gram = self.push_data(path, &stats.gram)?;
        let gram = MatrixRef {
            offset: gram.offset,
            rows: k as u32,
            cols: k as u32,
        };
        let gd = self.value_inst(path, k, move |dst| Inst::Matvec { m: gram, v: d, dst })?;
        let two_g: Vec<f64> = stats.g.iter().map(|g| 2.0 * g).collect();
        let two_g = Operand::Data(self.push_data(path, &two_g)?);
        let w = self.value_inst(path, k, move |dst| Inst::Zip {
            op: ZipOp::Sub,
            a: gd,
            b: two_g,
            dst,
        })?;
        let dw = self.value_inst(path, 1, move |dst| Inst::Dot { a: d, b: w, dst })?;
        let q = self.zip(path, ZipOp::Add, dw, Operand::Const(stats.rss))?;
        // -q / (2 sigma^2) - n ln sigma
        let variance = self.zip(path, ZipOp::Mul, sigma.operand, sigma.operand)?;
        let scaled = self.zip(path, ZipOp::Div, q, variance)?;
        let quadratic = self.zip(path, ZipOp::Mul, scaled, Operand::Const(-0.5))?;
        let log_sigma = self.value_inst(path, 1, move |dst| Inst::Map {
            op: MapOp::Log,
            a: sigma.operand,
            dst,
        })?;
        let normalising = self.zip(path, ZipOp::Mul, log_sigma, Operand::Const(-(n as f64)))?;
        let lp = self.zip(path, ZipOp::Add, quadratic, normalising)?;
        self.program.insts.push(Inst::Factor { a: lp, source });
        Ok(true)
    }

    /// Emits a scalar `Zip`.
    fn zip(
        &mut self,
        path: &str,
        op: ZipOp,
        a: Operand,
        b: Operand,
    ) -> Result<Operand, ModelError> {
        self.value_inst(path, 1, move |dst| Inst::Zip { op, a, b, dst })
    }

    /// Emits an instruction that writes a new slot of `len` values from parameters.
    fn value_inst(
        &mut self,
        path: &str,
        len: usize,
        make: impl Fn(crate::program::SlotId) -> Inst + 'static,
    ) -> Result<Operand, ModelError> {
        let shape = if len == 1 {
            Shape::Scalar
        } else {
            Shape::Vector(len)
        };
        Ok(self
            .emit(path, shape, false, false, Box::new(make))?
            .operand)
    }
}

/// `(X, b, c)` of `X b`, `c + X b` or `X b + c`.
fn linear_predictor(mu: &Expr) -> Option<(&Expr, &Expr, Option<&Expr>)> {
    match mu {
        Expr::Binary(BinaryOp::Matvec, x, b) => Some((&**x, &**b, None)),
        Expr::Binary(BinaryOp::Add, lhs, rhs) => match (&**lhs, &**rhs) {
            (Expr::Binary(BinaryOp::Matvec, x, b), c)
            | (c, Expr::Binary(BinaryOp::Matvec, x, b)) => Some((&**x, &**b, Some(c))),
            _ => None,
        },
        _ => None,
    }
}

/// What the density needs from the data, for `Z = [1 X]` (or `X`).
struct Statistics {
    /// `Z'Z`, row-major.
    gram: Vec<f64>,
    /// The least-squares coefficients.
    beta_hat: Vec<f64>,
    /// `Z'(y - Z beta_hat)`.
    g: Vec<f64>,
    /// `|y - Z beta_hat|^2`.
    rss: f64,
}

impl Statistics {
    /// `None` when `Z'Z` is not positive definite (collinear columns) or a statistic is
    /// not finite.
    fn new(y: &[f64], x: &[f64], cols: usize, intercept: bool) -> Option<Statistics> {
        let k = cols + usize::from(intercept);
        let row = |i: usize, out: &mut Vec<f64>| {
            out.clear();
            if intercept {
                out.push(1.0);
            }
            out.extend_from_slice(&x[i * cols..(i + 1) * cols]);
        };
        let mut gram = vec![0.0; k * k];
        let mut zty = vec![0.0; k];
        let mut z = Vec::with_capacity(k);
        for (i, &yi) in y.iter().enumerate() {
            row(i, &mut z);
            for a in 0..k {
                zty[a] += z[a] * yi;
                for b in 0..=a {
                    gram[a * k + b] += z[a] * z[b];
                }
            }
        }
        for a in 0..k {
            for b in 0..a {
                gram[b * k + a] = gram[a * k + b];
            }
        }
        let beta_hat = cholesky_solve(&gram, k, &zty)?;
        let mut g = vec![0.0; k];
        let mut rss = 0.0;
        for (i, &yi) in y.iter().enumerate() {
            row(i, &mut z);
            let r = yi - z.iter().zip(&beta_hat).map(|(z, b)| z * b).sum::<f64>();
            rss += r * r;
            for a in 0..k {
                g[a] += z[a] * r;
            }
        }
        let finite = |v: &[f64]| v.iter().all(|v| v.is_finite());
        (finite(&gram) && finite(&beta_hat) && finite(&g) && rss.is_finite()).then_some(
            Statistics {
                gram,
                beta_hat,
                g,
                rss,
            },
        )
    }
}

/// Solves `A x = b` for a symmetric positive definite `A` (row-major, `k x k`); `None` when
/// the factorisation meets a pivot that is not clearly positive.
fn cholesky_solve(a: &[f64], k: usize, b: &[f64]) -> Option<Vec<f64>> {
    let mut l = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            let s: f64 = (0..j).map(|p| l[i * k + p] * l[j * k + p]).sum();
            if i == j {
                let pivot = a[i * k + i] - s;
                if !(pivot > 1e-10 * a[i * k + i].abs()) {
                    return None;
                }
                l[i * k + i] = pivot.sqrt();
            } else {
                l[i * k + j] = (a[i * k + j] - s) / l[j * k + j];
            }
        }
    }
    let mut z = vec![0.0; k];
    for i in 0..k {
        let s: f64 = (0..i).map(|p| l[i * k + p] * z[p]).sum();
        z[i] = (b[i] - s) / l[i * k + i];
    }
    let mut x = vec![0.0; k];
    for i in (0..k).rev() {
        let s: f64 = (i + 1..k).map(|p| l[p * k + i] * x[p]).sum();
        x[i] = (z[i] - s) / l[i * k + i];
    }
    Some(x)
}

#[cfg(test)]
mod tests;
