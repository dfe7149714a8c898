//! The Euclidean metric (inverse mass matrix) of the Hamiltonian: diagonal or dense.
//!
//! Kinetic energy `tau(p) = p' M⁻¹ p / 2`; momenta are drawn from `N(0, M)`. A dense metric
//! keeps the upper Cholesky factor `U` of `M⁻¹ = U'U`, so that `p = U⁻¹ u` with `u ~ N(0, I)`
//! (Stan's `dense_e_metric`).

use crate::rng::ChainRng;

/// A diagonal or dense inverse mass matrix.
#[derive(Clone, Debug, PartialEq)]
pub enum Metric {
    /// The diagonal of `M⁻¹`.
    Diag(Vec<f64>),
    /// `M⁻¹`, row-major `d x d`, with its upper Cholesky factor.
    Dense {
        /// `M⁻¹`, row-major.
        inv_metric: Vec<f64>,
        /// Upper-triangular `U` with `M⁻¹ = U'U`, row-major.
        chol_upper: Vec<f64>,
        /// The dimension.
        dim: usize,
    },
}

impl Metric {
    /// The unit diagonal metric.
    pub fn unit(dim: usize) -> Metric {
        Metric::Diag(vec![1.0; dim])
    }

    /// A dense metric from `M⁻¹` (row-major), or `None` if it is not positive definite.
    pub fn dense(inv_metric: Vec<f64>, dim: usize) -> Option<Metric> {
        let chol_upper = cholesky_upper(&inv_metric, dim)?;
        Some(Metric::Dense {
            inv_metric,
            chol_upper,
            dim,
        })
    }

    /// The values reported to users: the diagonal, or the full matrix row-major.
    pub fn values(&self) -> &[f64] {
        match self {
            Metric::Diag(diag) => diag,
            Metric::Dense { inv_metric, .. } => inv_metric,
        }
    }

    /// Draws a momentum from `N(0, M)` into `p`.
    pub fn sample_momentum(&self, rng: &mut ChainRng, p: &mut [f64]) {
        match self {
            Metric::Diag(diag) => {
                for (p, &m) in p.iter_mut().zip(diag) {
                    *p = rng.normal() / m.sqrt();
                }
            }
            Metric::Dense {
                chol_upper, dim, ..
            } => {
                let d = *dim;
                for p in p.iter_mut() {
                    *p = rng.normal();
                }
                // Back-substitution: solve U p = u in place.
                for i in (0..d).rev() {
                    let mut sum = p[i];
                    for j in i + 1..d {
                        sum -= chol_upper[i * d + j] * p[j];
                    }
                    p[i] = sum / chol_upper[i * d + i];
                }
            }
        }
    }

    /// Writes the velocity `M⁻¹ p` (Stan's `dtau_dp`, "p sharp") into `out`.
    pub fn velocity(&self, p: &[f64], out: &mut [f64]) {
        match self {
            Metric::Diag(diag) => {
                for ((o, &p), &m) in out.iter_mut().zip(p).zip(diag) {
                    *o = m * p;
                }
            }
            Metric::Dense {
                inv_metric, dim, ..
            } => {
                for (o, row) in out.iter_mut().zip(inv_metric.chunks_exact(*dim)) {
                    *o = row.iter().zip(p).map(|(m, p)| m * p).sum();
                }
            }
        }
    }

    /// The kinetic energy `p' M⁻¹ p / 2`.
    pub fn kinetic_energy(&self, p: &[f64]) -> f64 {
        match self {
            Metric::Diag(diag) => 0.5 * p.iter().zip(diag).map(|(p, m)| m * p * p).sum::<f64>(),
            Metric::Dense {
                inv_metric, dim, ..
            } => {
                let mut total = 0.0;
                for (i, row) in inv_metric.chunks_exact(*dim).enumerate() {
                    total += p[i] * row.iter().zip(p).map(|(m, p)| m * p).sum::<f64>();
                }
                0.5 * total
            }
        }
    }
}

/// Upper Cholesky factor `U` (row-major) of a symmetric positive-definite matrix `A = U'U`.
fn cholesky_upper(a: &[f64], d: usize) -> Option<Vec<f64>> {
    // Lower factor L with A = L L', then U = L'.
    let mut lower = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..=i {
            let mut sum = a[i * d + j];
            for k in 0..j {
                sum -= lower[i * d + k] * lower[j * d + k];
            }
            if i == j {
                if !(sum > 0.0) || !sum.is_finite() {
                    return None;
                }
                lower[i * d + i] = sum.sqrt();
            } else {
                lower[i * d + j] = sum / lower[j * d + j];
            }
        }
    }
    let mut upper = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..d {
            upper[i * d + j] = lower[j * d + i];
        }
    }
    Some(upper)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{ChainId, Seed};

    #[test]
    fn dense_momenta_have_covariance_m() {
        // M⁻¹ = [[2, 0.6], [0.6, 1]]; momenta must have covariance M = (M⁻¹)⁻¹.
        let inv = vec![2.0, 0.6, 0.6, 1.0];
        let metric = Metric::dense(inv.clone(), 2).unwrap();
        let det = 2.0 * 1.0 - 0.36;
        let m = [1.0 / det, -0.6 / det, -0.6 / det, 2.0 / det];
        let mut rng = ChainRng::new(Seed(3), ChainId(0));
        let n = 200_000;
        let mut acc = [0.0; 4];
        let mut p = [0.0; 2];
        for _ in 0..n {
            metric.sample_momentum(&mut rng, &mut p);
            acc[0] += p[0] * p[0];
            acc[1] += p[0] * p[1];
            acc[3] += p[1] * p[1];
        }
        for (k, expected) in [(0, m[0]), (1, m[1]), (3, m[3])] {
            let got = acc[k] / n as f64;
            assert!(
                (got - expected).abs() < 0.02 * expected.abs().max(0.2),
                "entry {k}: {got} vs {expected}"
            );
        }
        // Kinetic energy and velocity agree with the matrix.
        let p = [0.3, -1.2];
        let v = {
            let mut v = [0.0; 2];
            metric.velocity(&p, &mut v);
            v
        };
        assert!((v[0] - (2.0 * 0.3 + 0.6 * -1.2)).abs() < 1e-15);
        assert!((metric.kinetic_energy(&p) - 0.5 * (p[0] * v[0] + p[1] * v[1])).abs() < 1e-15);
    }

    #[test]
    fn non_positive_definite_is_refused() {
        assert!(Metric::dense(vec![1.0, 2.0, 2.0, 1.0], 2).is_none());
    }
}
