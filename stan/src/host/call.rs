//! Built-in functions on the host: elementwise math, reductions, container constructors,
//! linear algebra and distributions, by Stan's names and signatures.

use super::dist;
use super::expr::{Sel, map_real, select, zip_real};
use super::linalg::{as_matrix, cholesky, log_abs_det, matmul, solve, solve_lower, transpose};
use super::math::{self, lgamma};
use super::stmt::column_major;
use super::{HostError, Interp, fail};
use crate::ast::Span;
use crate::data::MAX_VALUES;
use crate::value::{Elem, Typed, Value, Values};

/// A named elementwise function of one argument.
type Unary = (&'static str, fn(f64) -> f64);
/// A named elementwise function of two arguments.
type Binary = (&'static str, fn(f64, f64) -> f64);

/// Elementwise real functions of one argument (vectorised over any container), by name; the
/// Stan reference (`crate::reference`) lists them from here.
pub(crate) const UNARY_REAL: &[Unary] = &[
    ("exp", f64::exp),
    ("exp2", f64::exp2),
    ("log", f64::ln),
    ("log2", f64::log2),
    ("log10", f64::log10),
    ("log1p", f64::ln_1p),
    ("expm1", f64::exp_m1),
    ("sqrt", f64::sqrt),
    ("cbrt", f64::cbrt),
    ("square", |x| x * x),
    ("inv", |x| 1.0 / x),
    ("inv_sqrt", |x| 1.0 / x.sqrt()),
    ("inv_square", |x| 1.0 / (x * x)),
    ("inv_logit", math::inv_logit),
    ("logit", math::logit),
    ("log_inv_logit", math::log_inv_logit),
    ("log1m_inv_logit", math::log1m_inv_logit),
    ("log1m", |x| (-x).ln_1p()),
    ("log1p_exp", math::log1p_exp),
    ("log1m_exp", math::log1m_exp),
    ("lgamma", lgamma),
    ("tgamma", math::tgamma),
    ("digamma", math::digamma),
    ("fabs", f64::abs),
    ("floor", f64::floor),
    ("ceil", f64::ceil),
    ("round", f64::round),
    ("trunc", f64::trunc),
    ("sin", f64::sin),
    ("cos", f64::cos),
    ("tan", f64::tan),
    ("asin", f64::asin),
    ("acos", f64::acos),
    ("atan", f64::atan),
    ("sinh", f64::sinh),
    ("cosh", f64::cosh),
    ("tanh", f64::tanh),
    ("asinh", f64::asinh),
    ("acosh", f64::acosh),
    ("atanh", f64::atanh),
    ("erf", math::erf),
    ("erfc", math::erfc),
    ("Phi", math::phi),
    ("Phi_approx", math::phi_approx),
    ("inv_Phi", math::inv_phi),
    ("step", |x| if x < 0.0 { 0.0 } else { 1.0 }),
    ("inv_cloglog", |x| 1.0 - (-x.exp()).exp()),
];

/// Elementwise real functions of two arguments (a scalar broadcasts), by name.
pub(crate) const BINARY_REAL: &[Binary] = &[
    ("pow", f64::powf),
    ("fmin", f64::min),
    ("fmax", f64::max),
    ("fdim", |a, b| (a - b).max(0.0)),
    ("fmod", |a, b| a % b),
    ("hypot", f64::hypot),
    ("atan2", f64::atan2),
    ("log_diff_exp", math::log_diff_exp),
    ("lbeta", math::lbeta),
    ("lchoose", math::lchoose),
    ("binomial_coefficient_log", math::lchoose),
];

fn unary_real(name: &str) -> Option<fn(f64) -> f64> {
    UNARY_REAL.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
}

fn binary_real(name: &str) -> Option<fn(f64, f64) -> f64> {
    BINARY_REAL
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, f)| f)
}

fn size(n: i64, span: Span) -> Result<usize, HostError> {
    if n < 0 || n as u64 > MAX_VALUES as u64 {
        return fail(span, format!("size {n} is negative or too large"));
    }
    Ok(n as usize)
}

fn int_arg(x: &Typed, what: &str, span: Span) -> Result<i64, HostError> {
    x.value.as_int().ok_or_else(|| HostError {
        span,
        message: format!("{what} must be an int, not {}", x.describe()),
    })
}

fn real_arg(x: &Typed, what: &str, span: Span) -> Result<f64, HostError> {
    x.value.as_real().ok_or_else(|| HostError {
        span,
        message: format!("{what} must be a scalar, not {}", x.describe()),
    })
}

fn matrix_arg(x: &Typed, name: &str, span: Span) -> Result<(usize, usize, Vec<f64>), HostError> {
    match as_matrix(x) {
        Some(m) if x.elem == Elem::Matrix => Ok(m),
        _ => fail(
            span,
            format!("`{name}` needs a matrix, not {}", x.describe()),
        ),
    }
}

fn square_arg(x: &Typed, name: &str, span: Span) -> Result<(usize, Vec<f64>), HostError> {
    let (r, c, v) = matrix_arg(x, name, span)?;
    if r != c {
        return fail(span, format!("`{name}` needs a square matrix, not {r}x{c}"));
    }
    Ok((r, v))
}

fn vec_arg(x: &Typed, name: &str, span: Span) -> Result<Vec<f64>, HostError> {
    match (x.elem, x.shape().len()) {
        (Elem::Vector | Elem::RowVector, 1) | (Elem::Scalar, 1) => Ok(x.reals()),
        _ => fail(
            span,
            format!("`{name}` needs a vector, not {}", x.describe()),
        ),
    }
}

/// A value of `shape` filled with `x` (an int stays an int) and element type `elem`.
fn filled(x: &Typed, outer: &[usize], elem: Elem) -> Result<Typed, HostError> {
    let mut shape = outer.to_vec();
    shape.extend_from_slice(x.shape());
    let copies: usize = outer.iter().product();
    let values = match &x.value.values {
        Values::Int(v) => Values::Int(v.repeat(copies)),
        Values::Real(v) => Values::Real(v.repeat(copies)),
    };
    Ok(Typed::new(Value { shape, values }, elem))
}

fn sort(v: &mut [f64]) {
    v.sort_by(f64::total_cmp);
}

fn sd_of(v: &[f64]) -> f64 {
    variance_of(v).sqrt()
}

fn variance_of(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)
}

fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Points of a `gp_*_cov` argument: an array of reals (1-D points) or of vectors.
fn points(x: &Typed) -> Vec<Vec<f64>> {
    match (x.elem, x.shape()) {
        (Elem::Scalar, [_]) => x.reals().into_iter().map(|p| vec![p]).collect(),
        (Elem::Vector | Elem::RowVector, &[n, k]) => {
            let v = x.reals();
            (0..n).map(|i| v[i * k..(i + 1) * k].to_vec()).collect()
        }
        _ => vec![x.reals()],
    }
}

impl Interp<'_> {
    /// Calls the built-in `name`.
    pub(super) fn call(
        &mut self,
        name: &str,
        args: &[Typed],
        span: Span,
    ) -> Result<Typed, HostError> {
        let functions = self.functions;
        if let Some(def) = functions.callee(name) {
            return self.call_user_value(def, args, span);
        }
        for suffix in ["lpdf", "lpmf", "lupdf", "lupmf", "lcdf", "lccdf", "cdf"] {
            if let Some(family) = name.strip_suffix(suffix).and_then(|f| f.strip_suffix('_')) {
                return match dist::log_density(name, family, suffix, args, span)? {
                    Some(value) => Ok(value),
                    None => fail(span, format!("`{name}` is not supported on the host yet")),
                };
            }
        }
        if let Some(family) = name.strip_suffix("_rng") {
            let Some(rng) = self.rng.as_deref_mut() else {
                return fail(
                    span,
                    format!(
                        "`{name}` is only available in generated quantities and transformed data"
                    ),
                );
            };
            return match dist::random(name, family, args, rng, span)? {
                Some(value) => Ok(value),
                None => fail(span, format!("`{name}` is not supported yet")),
            };
        }
        // `log2()` and `log10()` are also constants.
        if let Some(f) = unary_real(name).filter(|_| !args.is_empty()) {
            let [x] = args else {
                return fail(span, format!("`{name}` takes one argument"));
            };
            return Ok(map_real(x, f));
        }
        if let Some(f) = binary_real(name) {
            let [a, b] = args else {
                return fail(span, format!("`{name}` takes two arguments"));
            };
            return zip_real(a, b, name, span, f);
        }
        self.call_other(name, args, span)
    }

    fn call_other(&mut self, name: &str, args: &[Typed], span: Span) -> Result<Typed, HostError> {
        let real = Typed::real;
        Ok(match (name, args) {
            // Constants.
            ("pi", []) => real(std::f64::consts::PI),
            ("e", []) => real(std::f64::consts::E),
            ("sqrt2", []) => real(std::f64::consts::SQRT_2),
            ("log2", []) => real(std::f64::consts::LN_2),
            ("log10", []) => real(std::f64::consts::LN_10),
            ("not_a_number", []) => real(f64::NAN),
            ("positive_infinity", []) => real(f64::INFINITY),
            ("negative_infinity", []) => real(f64::NEG_INFINITY),
            ("machine_precision", []) => real(f64::EPSILON),

            // Scalars.
            ("abs", [x]) if x.is_int() => match &x.value.values {
                Values::Int(v) => Typed::new(
                    Value {
                        shape: x.shape().to_vec(),
                        values: Values::Int(v.iter().map(|i| i.abs()).collect()),
                    },
                    x.elem,
                ),
                Values::Real(_) => unreachable!("checked int"),
            },
            ("abs", [x]) => map_real(x, f64::abs),
            ("int_step", [x]) => {
                Typed::int(i64::from(real_arg(x, "`int_step`'s argument", span)? > 0.0))
            }
            ("is_inf", [x]) => Typed::int(i64::from(
                real_arg(x, "`is_inf`'s argument", span)?.is_infinite(),
            )),
            ("is_nan", [x]) => Typed::int(i64::from(
                real_arg(x, "`is_nan`'s argument", span)?.is_nan(),
            )),
            ("to_int", [x]) if x.is_int() => x.clone(),
            ("to_int", [x]) => {
                let v = x.reals();
                let mut out = Vec::with_capacity(v.len());
                for y in v {
                    if !(y.is_finite() && y.abs() < 2_147_483_648.0) {
                        return fail(span, format!("`to_int`: {y} does not fit an int"));
                    }
                    out.push(y.trunc() as i64);
                }
                Typed::new(
                    Value {
                        shape: x.shape().to_vec(),
                        values: Values::Int(out),
                    },
                    x.elem,
                )
            }
            ("choose", [n, k]) => {
                let (n, k) = (int_arg(n, "n", span)?, int_arg(k, "k", span)?);
                if n < 0 || k < 0 {
                    return fail(span, "`choose` needs non-negative arguments");
                }
                if k > n {
                    Typed::int(0)
                } else {
                    Typed::int(math::lchoose(n as f64, k as f64).exp().round() as i64)
                }
            }
            ("log_sum_exp", [a, b]) if a.is_scalar() && b.is_scalar() => {
                real(math::log_sum_exp2(a.real_at(0), b.real_at(0)))
            }
            ("log_mix", [theta, a, b]) if theta.is_scalar() => {
                let t = theta.real_at(0);
                real(math::log_sum_exp2(
                    t.ln() + a.real_at(0),
                    (-t).ln_1p() + b.real_at(0),
                ))
            }
            ("log_mix", [theta, lps]) => {
                let t = theta.reals();
                let l = lps.reals();
                if t.len() != l.len() {
                    return fail(span, "`log_mix`: sizes differ");
                }
                let terms: Vec<f64> = t.iter().zip(&l).map(|(t, l)| t.ln() + l).collect();
                real(math::log_sum_exp(&terms))
            }
            ("min" | "max", [a, b]) if a.is_scalar() && b.is_scalar() => {
                let pick_max = name == "max";
                match (a.value.as_int(), b.value.as_int()) {
                    (Some(x), Some(y)) => Typed::int(if pick_max { x.max(y) } else { x.min(y) }),
                    _ => {
                        let (x, y) = (a.real_at(0), b.real_at(0));
                        real(if x.is_nan() || y.is_nan() {
                            f64::NAN
                        } else if pick_max {
                            x.max(y)
                        } else {
                            x.min(y)
                        })
                    }
                }
            }

            // Reductions.
            ("min" | "max", [x]) => {
                let pick_max = name == "max";
                match &x.value.values {
                    Values::Int(v) => match if pick_max {
                        v.iter().max()
                    } else {
                        v.iter().min()
                    } {
                        Some(&m) => Typed::int(m),
                        None => return fail(span, format!("`{name}` of an empty int array")),
                    },
                    Values::Real(v) => {
                        let init = if pick_max {
                            f64::NEG_INFINITY
                        } else {
                            f64::INFINITY
                        };
                        real(v.iter().fold(init, |m, &y| {
                            if m.is_nan() || y.is_nan() {
                                f64::NAN
                            } else if pick_max {
                                m.max(y)
                            } else {
                                m.min(y)
                            }
                        }))
                    }
                }
            }
            ("sum", [x]) => match &x.value.values {
                Values::Int(v) => Typed::int(v.iter().sum()),
                Values::Real(v) => real(v.iter().sum()),
            },
            ("prod", [x]) => match &x.value.values {
                Values::Int(v) => Typed::int(v.iter().product()),
                Values::Real(v) => real(v.iter().product()),
            },
            ("mean", [x]) => {
                if x.is_empty() {
                    return fail(span, "`mean` of an empty container");
                }
                real(x.reals().iter().sum::<f64>() / x.len() as f64)
            }
            ("variance" | "sd", [x]) => {
                if x.len() < 2 {
                    return fail(span, format!("`{name}` needs at least two elements"));
                }
                let v = x.reals();
                real(if name == "sd" {
                    sd_of(&v)
                } else {
                    variance_of(&v)
                })
            }
            ("log_sum_exp", [x]) => real(math::log_sum_exp(&x.reals())),
            ("num_elements", [x]) => Typed::int(x.len() as i64),
            ("size", [x]) => {
                if x.is_scalar() {
                    Typed::int(1)
                } else if x.array_rank() > 0 {
                    Typed::int(x.shape()[0] as i64)
                } else {
                    Typed::int(x.len() as i64)
                }
            }
            ("dims", [x]) => Typed::new(
                Value {
                    shape: vec![x.shape().len()],
                    values: Values::Int(x.shape().iter().map(|&d| d as i64).collect()),
                },
                Elem::Scalar,
            ),
            ("rows", [x]) => Typed::int(match (x.elem, x.shape()) {
                (Elem::RowVector, _) => 1,
                (_, [r, ..]) => *r as i64,
                _ => return fail(span, "`rows` needs a vector or matrix"),
            }),
            ("cols", [x]) => Typed::int(match (x.elem, x.shape()) {
                (Elem::Vector, _) => 1,
                (Elem::RowVector, [n]) => *n as i64,
                (Elem::Matrix, [_, c]) => *c as i64,
                _ => return fail(span, "`cols` needs a vector or matrix"),
            }),

            // Constructors.
            ("rep_vector" | "rep_row_vector", [x, n]) => {
                let n = size(int_arg(n, "the size", span)?, span)?;
                let x = real_arg(x, "the value", span)?;
                let elem = if name == "rep_vector" {
                    Elem::Vector
                } else {
                    Elem::RowVector
                };
                Typed::vector(vec![x; n], elem)
            }
            ("rep_array", [x, dims @ ..]) if !dims.is_empty() && dims.len() <= 3 => {
                let mut outer = Vec::new();
                for d in dims {
                    outer.push(size(int_arg(d, "a size", span)?, span)?);
                }
                if outer
                    .iter()
                    .product::<usize>()
                    .saturating_mul(x.len().max(1))
                    > MAX_VALUES
                {
                    return fail(span, "`rep_array`: too many values");
                }
                filled(x, &outer, x.elem)?
            }
            ("rep_matrix", [x, m, n]) if x.is_scalar() => {
                let (m, n) = (
                    size(int_arg(m, "rows", span)?, span)?,
                    size(int_arg(n, "cols", span)?, span)?,
                );
                Typed::matrix(m, n, vec![x.real_at(0); m * n])
            }
            ("rep_matrix", [v, n]) => {
                let n = size(int_arg(n, "the count", span)?, span)?;
                let x = vec_arg(v, name, span)?;
                if v.elem == Elem::RowVector {
                    Typed::matrix(n, x.len(), x.repeat(n))
                } else {
                    let k = x.len();
                    let mut out = Vec::with_capacity(k * n);
                    for &xi in &x {
                        out.extend(std::iter::repeat_n(xi, n));
                    }
                    Typed::matrix(k, n, out)
                }
            }
            ("to_vector" | "to_row_vector", [x]) => {
                let elem = if name == "to_vector" {
                    Elem::Vector
                } else {
                    Elem::RowVector
                };
                Typed::vector(column_major(x), elem)
            }
            ("to_array_1d", [x]) => {
                let values = if x.elem == Elem::Matrix && x.array_rank() == 0 {
                    Values::Real(column_major(x))
                } else {
                    x.value.values.clone()
                };
                let len = x.len();
                Typed::new(
                    Value {
                        shape: vec![len],
                        values,
                    },
                    Elem::Scalar,
                )
            }
            ("to_matrix", [x]) if x.elem == Elem::Matrix && x.array_rank() == 0 => x.clone(),
            ("to_matrix", [x]) if x.elem == Elem::Scalar && x.shape().len() == 2 => {
                Typed::matrix(x.shape()[0], x.shape()[1], x.reals())
            }
            ("to_matrix", [x]) if x.elem == Elem::RowVector && x.shape().len() == 2 => {
                Typed::matrix(x.shape()[0], x.shape()[1], x.reals())
            }
            ("to_matrix", [x]) if matches!(x.elem, Elem::Vector) => {
                Typed::matrix(x.len(), 1, x.reals())
            }
            ("to_matrix", [x]) if matches!(x.elem, Elem::RowVector) => {
                Typed::matrix(1, x.len(), x.reals())
            }
            ("to_matrix", [x, m, n]) => {
                let (m, n) = (
                    size(int_arg(m, "rows", span)?, span)?,
                    size(int_arg(n, "cols", span)?, span)?,
                );
                let v = column_major(x);
                if v.len() != m * n {
                    return fail(
                        span,
                        format!("`to_matrix`: {} values for a {m}x{n} matrix", v.len()),
                    );
                }
                // Column-major fill.
                Typed::matrix(m, n, transpose(n, m, &v))
            }
            ("linspaced_vector" | "linspaced_row_vector" | "linspaced_array", [n, lo, hi]) => {
                let n = size(int_arg(n, "the size", span)?, span)?;
                let (lo, hi) = (real_arg(lo, "lower", span)?, real_arg(hi, "upper", span)?);
                let v: Vec<f64> = (0..n)
                    .map(|i| {
                        if n == 1 {
                            hi
                        } else {
                            lo + (hi - lo) * i as f64 / (n - 1) as f64
                        }
                    })
                    .collect();
                match name {
                    "linspaced_vector" => Typed::vector(v, Elem::Vector),
                    "linspaced_row_vector" => Typed::vector(v, Elem::RowVector),
                    _ => Typed::real_array(vec![n], v),
                }
            }
            (
                "one_hot_int_array" | "one_hot_array" | "one_hot_vector" | "one_hot_row_vector",
                [n, k],
            ) => {
                let n = size(int_arg(n, "the size", span)?, span)?;
                let k = int_arg(k, "the position", span)?;
                let k = super::expr::check_index(k, n, span)?;
                let mut v = vec![0.0; n];
                v[k] = 1.0;
                match name {
                    "one_hot_int_array" => Typed::new(
                        Value {
                            shape: vec![n],
                            values: Values::Int(v.iter().map(|&x| x as i64).collect()),
                        },
                        Elem::Scalar,
                    ),
                    "one_hot_array" => Typed::real_array(vec![n], v),
                    "one_hot_vector" => Typed::vector(v, Elem::Vector),
                    _ => Typed::vector(v, Elem::RowVector),
                }
            }
            ("zeros_vector" | "ones_vector" | "zeros_row_vector" | "ones_row_vector", [n]) => {
                let n = size(int_arg(n, "the size", span)?, span)?;
                let x = if name.starts_with("ones") { 1.0 } else { 0.0 };
                let elem = if name.ends_with("row_vector") {
                    Elem::RowVector
                } else {
                    Elem::Vector
                };
                Typed::vector(vec![x; n], elem)
            }
            ("identity_matrix", [n]) => {
                let n = size(int_arg(n, "the size", span)?, span)?;
                let mut m = vec![0.0; n * n];
                (0..n).for_each(|i| m[i * n + i] = 1.0);
                Typed::matrix(n, n, m)
            }
            ("diag_matrix", [v]) => {
                let v = vec_arg(v, name, span)?;
                let n = v.len();
                let mut m = vec![0.0; n * n];
                (0..n).for_each(|i| m[i * n + i] = v[i]);
                Typed::matrix(n, n, m)
            }
            ("diagonal", [m]) => {
                let (r, c, v) = matrix_arg(m, name, span)?;
                Typed::vector((0..r.min(c)).map(|i| v[i * c + i]).collect(), Elem::Vector)
            }
            ("add_diag", [m, d]) => {
                let (n, mut v) = square_arg(m, name, span)?;
                for i in 0..n {
                    v[i * n + i] += d.real_at(if d.is_scalar() { 0 } else { i });
                }
                Typed::matrix(n, n, v)
            }
            ("col", [m, j]) => {
                let j = int_arg(j, "the column", span)?;
                select(
                    m,
                    &[
                        Sel::Many((0..m.shape()[0]).collect()),
                        Sel::One(super::expr::check_index(
                            j,
                            *m.shape().get(1).unwrap_or(&0),
                            span,
                        )?),
                    ],
                    span,
                )?
            }
            ("row", [m, i]) => {
                let i = int_arg(i, "the row", span)?;
                select(
                    m,
                    &[Sel::One(super::expr::check_index(i, m.shape()[0], span)?)],
                    span,
                )?
            }
            ("block", [m, i, j, r, c]) => {
                let (rows, cols, _) = matrix_arg(m, name, span)?;
                let (i, j) = (int_arg(i, "row", span)?, int_arg(j, "column", span)?);
                let (r, c) = (
                    size(int_arg(r, "rows", span)?, span)?,
                    size(int_arg(c, "cols", span)?, span)?,
                );
                let ri = super::expr::check_index(i, rows, span)?;
                let cj = super::expr::check_index(j, cols, span)?;
                if ri + r > rows || cj + c > cols {
                    return fail(span, "`block` runs past the matrix");
                }
                select(
                    m,
                    &[
                        Sel::Many((ri..ri + r).collect()),
                        Sel::Many((cj..cj + c).collect()),
                    ],
                    span,
                )?
            }
            ("head" | "tail", [x, n]) => {
                let n = size(int_arg(n, "the count", span)?, span)?;
                let len = x.shape().first().copied().unwrap_or(0);
                if n > len {
                    return fail(span, format!("`{name}`: {n} elements of {len}"));
                }
                let range: Vec<usize> = if name == "head" {
                    (0..n).collect()
                } else {
                    (len - n..len).collect()
                };
                select(x, &[Sel::Many(range)], span)?
            }
            ("segment", [x, i, n]) => {
                let len = x.shape().first().copied().unwrap_or(0);
                let i = super::expr::check_index(int_arg(i, "the start", span)?, len, span)?;
                let n = size(int_arg(n, "the count", span)?, span)?;
                if i + n > len {
                    return fail(span, "`segment` runs past the end");
                }
                select(x, &[Sel::Many((i..i + n).collect())], span)?
            }
            ("reverse", [x]) => {
                let len = x.shape().first().copied().unwrap_or(0);
                select(x, &[Sel::Many((0..len).rev().collect())], span)?
            }
            ("append_row" | "append_col", [a, b]) => append(name, a, b, span)?,
            ("append_array", [a, b]) => {
                if a.shape()[1..] != b.shape()[1..] {
                    return fail(span, "`append_array`: element sizes differ");
                }
                let mut shape = a.shape().to_vec();
                shape[0] += b.shape()[0];
                let values = match (&a.value.values, &b.value.values) {
                    (Values::Int(x), Values::Int(y)) => {
                        Values::Int([x.clone(), y.clone()].concat())
                    }
                    _ => Values::Real([a.reals(), b.reals()].concat()),
                };
                Typed::new(Value { shape, values }, a.elem)
            }
            ("sort_asc" | "sort_desc", [x]) => {
                let mut out = x.clone();
                match &mut out.value.values {
                    Values::Int(v) => v.sort(),
                    Values::Real(v) => sort(v),
                }
                if name == "sort_desc" {
                    match &mut out.value.values {
                        Values::Int(v) => v.reverse(),
                        Values::Real(v) => v.reverse(),
                    }
                }
                out
            }
            ("sort_indices_asc" | "sort_indices_desc" | "rank", args @ [x, ..]) => {
                let v = x.reals();
                let mut idx: Vec<usize> = (0..v.len()).collect();
                idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
                if name == "sort_indices_desc" {
                    idx.sort_by(|&i, &j| v[j].total_cmp(&v[i]));
                }
                if name == "rank" {
                    let [_, s] = args else {
                        return fail(span, "`rank` takes a container and a position");
                    };
                    let s =
                        super::expr::check_index(int_arg(s, "the position", span)?, v.len(), span)?;
                    Typed::int(v.iter().filter(|&&y| y < v[s]).count() as i64)
                } else {
                    Typed::new(
                        Value {
                            shape: vec![idx.len()],
                            values: Values::Int(idx.iter().map(|&i| i as i64 + 1).collect()),
                        },
                        Elem::Scalar,
                    )
                }
            }
            ("cumulative_sum", [x]) => {
                let mut out = x.clone();
                match &mut out.value.values {
                    Values::Int(v) => {
                        for i in 1..v.len() {
                            v[i] += v[i - 1];
                        }
                    }
                    Values::Real(v) => {
                        for i in 1..v.len() {
                            v[i] += v[i - 1];
                        }
                    }
                }
                out
            }
            ("softmax" | "log_softmax", [x]) => {
                let v = vec_arg(x, name, span)?;
                let norm = math::log_sum_exp(&v);
                let out = v
                    .iter()
                    .map(|y| {
                        if name == "softmax" {
                            (y - norm).exp()
                        } else {
                            y - norm
                        }
                    })
                    .collect();
                Typed::vector(out, Elem::Vector)
            }

            // Linear algebra.
            ("dot_product", [a, b]) => {
                let (x, y) = (a.reals(), b.reals());
                if x.len() != y.len() || a.shape().len() != 1 || b.shape().len() != 1 {
                    return fail(span, "`dot_product` needs two vectors of one size");
                }
                real(x.iter().zip(&y).map(|(p, q)| p * q).sum())
            }
            ("dot_self", [a]) => real(vec_arg(a, name, span)?.iter().map(|x| x * x).sum()),
            ("squared_distance" | "distance", [a, b]) => {
                let (x, y) = (a.reals(), b.reals());
                if x.len() != y.len() {
                    return fail(span, format!("`{name}`: sizes differ"));
                }
                let d = squared_distance(&x, &y);
                real(if name == "distance" { d.sqrt() } else { d })
            }
            ("columns_dot_product" | "rows_dot_product", [a, b]) => {
                let (Some((r, c, x)), Some((r2, c2, y))) = (as_matrix(a), as_matrix(b)) else {
                    return fail(span, format!("`{name}` needs vectors or matrices"));
                };
                if (r, c) != (r2, c2) {
                    return fail(span, format!("`{name}`: sizes differ"));
                }
                if name == "columns_dot_product" {
                    let v = (0..c)
                        .map(|j| (0..r).map(|i| x[i * c + j] * y[i * c + j]).sum())
                        .collect();
                    Typed::vector(v, Elem::RowVector)
                } else {
                    let v = (0..r)
                        .map(|i| (0..c).map(|j| x[i * c + j] * y[i * c + j]).sum())
                        .collect();
                    Typed::vector(v, Elem::Vector)
                }
            }
            ("columns_dot_self" | "rows_dot_self", [a]) => {
                return self.call_other(
                    if name == "columns_dot_self" {
                        "columns_dot_product"
                    } else {
                        "rows_dot_product"
                    },
                    &[a.clone(), a.clone()],
                    span,
                );
            }
            ("transpose", [a]) => super::expr::transpose(a, span)?,
            ("crossprod" | "tcrossprod", [a]) => {
                let (r, c, x) = matrix_arg(a, name, span)?;
                let t = transpose(r, c, &x);
                if name == "crossprod" {
                    Typed::matrix(c, c, matmul((c, r, &t), (r, c, &x)).expect("sizes agree"))
                } else {
                    Typed::matrix(r, r, matmul((r, c, &x), (c, r, &t)).expect("sizes agree"))
                }
            }
            ("multiply_lower_tri_self_transpose", [a]) => {
                let (r, c, mut x) = matrix_arg(a, name, span)?;
                for i in 0..r {
                    for j in i + 1..c {
                        x[i * c + j] = 0.0;
                    }
                }
                let t = transpose(r, c, &x);
                Typed::matrix(r, r, matmul((r, c, &x), (c, r, &t)).expect("sizes agree"))
            }
            ("quad_form", [a, b]) => {
                let (n, x) = square_arg(a, name, span)?;
                let Some((k, m, y)) = as_matrix(b) else {
                    return fail(span, "`quad_form` needs a vector or matrix");
                };
                if k != n {
                    return fail(span, "`quad_form`: sizes differ");
                }
                let ay = matmul((n, n, &x), (k, m, &y)).expect("sizes agree");
                let yt = transpose(k, m, &y);
                let out = matmul((m, k, &yt), (n, m, &ay)).expect("sizes agree");
                if b.elem == Elem::Vector {
                    real(out[0])
                } else {
                    Typed::matrix(m, m, out)
                }
            }
            ("quad_form_diag", [a, v]) => {
                let (n, mut x) = square_arg(a, name, span)?;
                let d = vec_arg(v, name, span)?;
                if d.len() != n {
                    return fail(span, "`quad_form_diag`: sizes differ");
                }
                for i in 0..n {
                    for j in 0..n {
                        x[i * n + j] *= d[i] * d[j];
                    }
                }
                Typed::matrix(n, n, x)
            }
            ("diag_pre_multiply" | "diag_post_multiply", [a, b]) => {
                let (v, m) = if name == "diag_pre_multiply" {
                    (a, b)
                } else {
                    (b, a)
                };
                let d = vec_arg(v, name, span)?;
                let (r, c, mut x) = matrix_arg(m, name, span)?;
                let pre = name == "diag_pre_multiply";
                if d.len() != if pre { r } else { c } {
                    return fail(span, format!("`{name}`: sizes differ"));
                }
                for i in 0..r {
                    for j in 0..c {
                        x[i * c + j] *= if pre { d[i] } else { d[j] };
                    }
                }
                Typed::matrix(r, c, x)
            }
            ("cholesky_decompose", [a]) => {
                let (n, x) = square_arg(a, name, span)?;
                let l = cholesky(n, &x).map_err(|e| HostError {
                    span,
                    message: format!("`cholesky_decompose`: {e}"),
                })?;
                Typed::matrix(n, n, l)
            }
            ("mdivide_left_tri_low", [l, b]) => {
                let (n, mut x) = square_arg(l, name, span)?;
                for i in 0..n {
                    for j in i + 1..n {
                        x[i * n + j] = 0.0;
                    }
                }
                let Some((k, m, y)) = as_matrix(b).filter(|_| b.elem != Elem::RowVector) else {
                    return fail(
                        span,
                        "`mdivide_left_tri_low` needs a vector or matrix on the right",
                    );
                };
                if k != n {
                    return fail(span, "`mdivide_left_tri_low`: sizes differ");
                }
                let out = solve_lower(n, &x, m, &y);
                if b.elem == Elem::Vector {
                    Typed::vector(out, Elem::Vector)
                } else {
                    Typed::matrix(n, m, out)
                }
            }
            ("mdivide_right_tri_low", [b, l]) => {
                let (n, mut x) = square_arg(l, name, span)?;
                for i in 0..n {
                    for j in i + 1..n {
                        x[i * n + j] = 0.0;
                    }
                }
                // b L^{-1} = (L'^{-1} b')'; solve with L' upper via the general solver.
                let Some((m, k, y)) = as_matrix(b).filter(|_| b.elem != Elem::Vector) else {
                    return fail(
                        span,
                        "`mdivide_right_tri_low` needs a row vector or matrix on the left",
                    );
                };
                if k != n {
                    return fail(span, "`mdivide_right_tri_low`: sizes differ");
                }
                let lt = transpose(n, n, &x);
                let yt = transpose(m, n, &y);
                let Some(out) = solve(n, &lt, m, &yt) else {
                    return fail(span, "`mdivide_right_tri_low`: the matrix is singular");
                };
                let out = transpose(n, m, &out);
                if b.elem == Elem::RowVector {
                    Typed::vector(out, Elem::RowVector)
                } else {
                    Typed::matrix(m, n, out)
                }
            }
            ("mdivide_left" | "mdivide_left_spd", [a, b]) => {
                super::linalg::divide_left(a, b, span)?
            }
            ("mdivide_right" | "mdivide_right_spd", [b, a]) => {
                super::linalg::divide_right(b, a, span)?
            }
            ("inverse" | "inverse_spd", [a]) => {
                let (n, x) = square_arg(a, name, span)?;
                let mut id = vec![0.0; n * n];
                (0..n).for_each(|i| id[i * n + i] = 1.0);
                match solve(n, &x, n, &id) {
                    Some(v) => Typed::matrix(n, n, v),
                    None => return fail(span, "`inverse`: the matrix is singular"),
                }
            }
            ("determinant", [a]) => {
                let (n, x) = square_arg(a, name, span)?;
                let (log_det, sign) = log_abs_det(n, &x);
                real(sign * log_det.exp())
            }
            ("log_determinant" | "log_determinant_spd", [a]) => {
                let (n, x) = square_arg(a, name, span)?;
                real(log_abs_det(n, &x).0)
            }
            ("trace", [a]) => {
                let (n, x) = square_arg(a, name, span)?;
                real((0..n).map(|i| x[i * n + i]).sum())
            }
            ("gp_exp_quad_cov" | "cov_exp_quad", [x, alpha, rho]) => {
                let p = points(x);
                let (alpha, rho) = (real_arg(alpha, "alpha", span)?, real_arg(rho, "rho", span)?);
                let n = p.len();
                let mut k = vec![0.0; n * n];
                for i in 0..n {
                    for j in 0..n {
                        k[i * n + j] = alpha
                            * alpha
                            * (-squared_distance(&p[i], &p[j]) / (2.0 * rho * rho)).exp();
                    }
                }
                Typed::matrix(n, n, k)
            }
            _ => {
                return fail(
                    span,
                    format!(
                        "`{name}` with argument(s) ({}) is not supported on the host yet",
                        args.iter()
                            .map(Typed::describe)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        })
    }
}

/// `append_row(a, b)` / `append_col(a, b)` for vectors, row vectors, matrices and scalars.
fn append(name: &str, a: &Typed, b: &Typed, span: Span) -> Result<Typed, HostError> {
    let as_block = |x: &Typed, row: bool| -> Option<(usize, usize, Vec<f64>)> {
        if x.is_scalar() {
            Some((1, 1, vec![x.real_at(0)]))
        } else {
            let _ = row;
            as_matrix(x)
        }
    };
    let row = name == "append_row";
    let (Some((r1, c1, x)), Some((r2, c2, y))) = (as_block(a, row), as_block(b, row)) else {
        return fail(
            span,
            format!("`{name}` needs vectors, row vectors or matrices"),
        );
    };
    if row {
        if c1 != c2 {
            return fail(span, "`append_row`: column counts differ");
        }
        let v = [x, y].concat();
        let vector_like = c1 == 1 && a.elem != Elem::Matrix && b.elem != Elem::Matrix;
        Ok(if vector_like {
            Typed::vector(v, Elem::Vector)
        } else {
            Typed::matrix(r1 + r2, c1, v)
        })
    } else {
        if r1 != r2 {
            return fail(span, "`append_col`: row counts differ");
        }
        let c = c1 + c2;
        let mut v = Vec::with_capacity(r1 * c);
        for i in 0..r1 {
            v.extend_from_slice(&x[i * c1..(i + 1) * c1]);
            v.extend_from_slice(&y[i * c2..(i + 1) * c2]);
        }
        let row_like = r1 == 1 && a.elem != Elem::Matrix && b.elem != Elem::Matrix;
        Ok(if row_like {
            Typed::vector(v, Elem::RowVector)
        } else {
            Typed::matrix(r1, c, v)
        })
    }
}
