//! Dense linear algebra on the host: products, Cholesky, triangular and general solves.

use super::{HostError, fail};
use crate::ast::Span;
use crate::value::{Elem, Typed};

/// A real matrix view of a vector (column), row vector (row) or matrix: rows, cols, row-major.
pub fn as_matrix(x: &Typed) -> Option<(usize, usize, Vec<f64>)> {
    match (x.elem, x.shape()) {
        (Elem::Vector, &[n]) => Some((n, 1, x.reals())),
        (Elem::RowVector, &[n]) => Some((1, n, x.reals())),
        (Elem::Matrix, &[r, c]) => Some((r, c, x.reals())),
        _ => None,
    }
}

/// A product's value with the type Stan gives it.
fn from_matrix(r: usize, c: usize, v: Vec<f64>, a: Elem, b: Elem) -> Typed {
    match (a, b) {
        (Elem::RowVector, Elem::Vector) => Typed::real(v[0]),
        (Elem::Matrix, Elem::Vector) => Typed::vector(v, Elem::Vector),
        (Elem::RowVector, Elem::Matrix) => Typed::vector(v, Elem::RowVector),
        _ => Typed::matrix(r, c, v),
    }
}

/// `a * b` for matrices and vectors.
pub fn matmul(
    (r, k, a): (usize, usize, &[f64]),
    (k2, c, b): (usize, usize, &[f64]),
) -> Option<Vec<f64>> {
    if k != k2 {
        return None;
    }
    let mut out = vec![0.0; r * c];
    for i in 0..r {
        for l in 0..k {
            let x = a[i * k + l];
            if x == 0.0 {
                continue;
            }
            for j in 0..c {
                out[i * c + j] += x * b[l * c + j];
            }
        }
    }
    Some(out)
}

fn mismatch<T>(what: &str, a: &Typed, b: &Typed, span: Span) -> Result<T, HostError> {
    fail(
        span,
        format!(
            "`{what}` cannot combine {} and {}",
            a.describe(),
            b.describe()
        ),
    )
}

/// `a * b` where neither is a scalar.
pub fn multiply(a: &Typed, b: &Typed, span: Span) -> Result<Typed, HostError> {
    let (Some((r, k, x)), Some((k2, c, y))) = (as_matrix(a), as_matrix(b)) else {
        return mismatch("*", a, b, span);
    };
    if matches!(
        (a.elem, b.elem),
        (Elem::Vector, Elem::Vector | Elem::Matrix)
    ) || matches!(
        (a.elem, b.elem),
        (Elem::RowVector | Elem::Matrix, Elem::RowVector)
    ) {
        return mismatch("*", a, b, span);
    }
    match matmul((r, k, &x), (k2, c, &y)) {
        Some(v) => Ok(from_matrix(r, c, v, a.elem, b.elem)),
        None => mismatch("*", a, b, span),
    }
}

/// The transpose of a row-major `r x c` matrix.
pub fn transpose(r: usize, c: usize, a: &[f64]) -> Vec<f64> {
    let mut t = vec![0.0; r * c];
    for i in 0..r {
        for j in 0..c {
            t[j * r + i] = a[i * c + j];
        }
    }
    t
}

/// Solves `A x = B` for square `A` (`n x n`) and `B` (`n x m`) by Gaussian elimination with
/// partial pivoting; `None` when `A` is singular.
pub fn solve(n: usize, a: &[f64], m: usize, b: &[f64]) -> Option<Vec<f64>> {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    for col in 0..n {
        let pivot =
            (col..n).max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))?;
        if a[pivot * n + col] == 0.0 {
            return None;
        }
        if pivot != col {
            for j in 0..n {
                a.swap(pivot * n + j, col * n + j);
            }
            for j in 0..m {
                b.swap(pivot * m + j, col * m + j);
            }
        }
        for i in col + 1..n {
            let f = a[i * n + col] / a[col * n + col];
            if f == 0.0 {
                continue;
            }
            for j in col..n {
                a[i * n + j] -= f * a[col * n + j];
            }
            for j in 0..m {
                b[i * m + j] -= f * b[col * m + j];
            }
        }
    }
    let mut x = vec![0.0; n * m];
    for j in 0..m {
        for i in (0..n).rev() {
            let mut s = b[i * m + j];
            for l in i + 1..n {
                s -= a[i * n + l] * x[l * m + j];
            }
            x[i * m + j] = s / a[i * n + i];
        }
    }
    Some(x)
}

/// `A \ b`.
pub fn divide_left(a: &Typed, b: &Typed, span: Span) -> Result<Typed, HostError> {
    let (Some((n, n2, x)), Some((k, m, y))) = (as_matrix(a), as_matrix(b)) else {
        return mismatch("\\", a, b, span);
    };
    if a.elem != Elem::Matrix || n != n2 || k != n || b.elem == Elem::RowVector {
        return mismatch("\\", a, b, span);
    }
    match solve(n, &x, m, &y) {
        Some(v) if b.elem == Elem::Vector => Ok(Typed::vector(v, Elem::Vector)),
        Some(v) => Ok(Typed::matrix(n, m, v)),
        None => fail(span, "`\\`: the matrix is singular"),
    }
}

/// `b / A` = `b * inverse(A)`.
pub fn divide_right(b: &Typed, a: &Typed, span: Span) -> Result<Typed, HostError> {
    let (Some((n, n2, x)), Some((m, k, y))) = (as_matrix(a), as_matrix(b)) else {
        return mismatch("/", b, a, span);
    };
    if a.elem != Elem::Matrix || n != n2 || k != n || b.elem == Elem::Vector {
        return mismatch("/", b, a, span);
    }
    // x B = y  <=>  A' x' = y'
    let at = transpose(n, n, &x);
    let yt = transpose(m, n, &y);
    match solve(n, &at, m, &yt) {
        Some(v) => {
            let out = transpose(n, m, &v);
            if b.elem == Elem::RowVector {
                Ok(Typed::vector(out, Elem::RowVector))
            } else {
                Ok(Typed::matrix(m, n, out))
            }
        }
        None => fail(span, "`/`: the matrix is singular"),
    }
}

/// The lower Cholesky factor of a symmetric positive-definite matrix, or why not.
pub fn cholesky(n: usize, a: &[f64]) -> Result<Vec<f64>, String> {
    for i in 0..n {
        for j in 0..i {
            let (x, y) = (a[i * n + j], a[j * n + i]);
            if (x - y).abs() > 1e-8 * x.abs().max(y.abs()).max(1.0) {
                return Err(format!(
                    "the matrix is not symmetric: m[{},{}] = {x} but m[{},{}] = {y}",
                    i + 1,
                    j + 1,
                    j + 1,
                    i + 1
                ));
            }
        }
    }
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d <= 0.0 || d.is_nan() {
            return Err("the matrix is not positive definite".into());
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    Ok(l)
}

/// Solves `L x = B` for lower-triangular `L` (`n x n`), `B` `n x m`.
pub fn solve_lower(n: usize, l: &[f64], m: usize, b: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; n * m];
    for j in 0..m {
        for i in 0..n {
            let mut s = b[i * m + j];
            for k in 0..i {
                s -= l[i * n + k] * x[k * m + j];
            }
            x[i * m + j] = s / l[i * n + i];
        }
    }
    x
}

/// `log |det A|` and the sign of the determinant, by LU with partial pivoting.
pub fn log_abs_det(n: usize, a: &[f64]) -> (f64, f64) {
    let mut a = a.to_vec();
    let mut sign = 1.0;
    let mut log_det = 0.0;
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap_or(col);
        if a[pivot * n + col] == 0.0 {
            return (f64::NEG_INFINITY, 0.0);
        }
        if pivot != col {
            for j in 0..n {
                a.swap(pivot * n + j, col * n + j);
            }
            sign = -sign;
        }
        let p = a[col * n + col];
        if p < 0.0 {
            sign = -sign;
        }
        log_det += p.abs().ln();
        for i in col + 1..n {
            let f = a[i * n + col] / p;
            for j in col..n {
                a[i * n + j] -= f * a[col * n + j];
            }
        }
    }
    (log_det, sign)
}
