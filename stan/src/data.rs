//! Stan's JSON data format (CmdStan's `json_data_handler`), read against a program's `data`
//! block: types, sizes from the declarations, and declared bounds checked.
//!
//! Rules (CmdStan guide, "JSON format for CmdStan"): one top-level object; matrices and
//! multi-dimensional arrays are nested row-major lists; an `int` must be written without a
//! `.` or an exponent, while a `real` accepts integers and the strings `"Inf"`, `"-Inf"`,
//! `"NaN"`; keys the program does not declare are ignored.

use std::collections::BTreeMap;

use crate::ast::{BaseType, Constraint, Program, SizedType, StmtKind};
use crate::host::{self, Env};
use crate::value::{Value, Values};

/// Most numbers accepted in one data file, summed over all items (2^26), so that a hostile
/// file cannot exhaust memory.
pub const MAX_VALUES: usize = 1 << 26;

/// Longest JSON text accepted, in bytes.
pub const MAX_JSON_BYTES: usize = 1 << 30;

/// The data of one program, by name, as declared.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Data {
    pub values: BTreeMap<String, Value>,
}

/// Why a data file does not fit the program.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    #[error("invalid JSON data: {0}")]
    Json(String),
    #[error("JSON data must be one object of named values")]
    NotAnObject,
    #[error("data file is {len} bytes, over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("data `{name}` is declared but missing from the data file")]
    Missing { name: String },
    #[error("data `{name}`: {problem}")]
    Invalid { name: String, problem: String },
    #[error("data `{name}`: size expression cannot be evaluated: {problem}")]
    Size { name: String, problem: String },
    #[error("data `{name}`: {count} values in all, over the limit of {max}")]
    TooManyValues {
        name: String,
        count: usize,
        max: usize,
    },
    #[error("data `{name}`{position}: value {value} violates the declared constraint {bound}")]
    Constraint {
        name: String,
        position: String,
        value: f64,
        bound: String,
    },
}

/// Reads `json` as data for `program`'s `data` block.
pub fn read_data(program: &Program, json: &str) -> Result<Data, DataError> {
    if json.len() > MAX_JSON_BYTES {
        return Err(DataError::TooLarge {
            len: json.len(),
            max: MAX_JSON_BYTES,
        });
    }
    let root: serde_json::Value =
        serde_json::from_str(json).map_err(|err| DataError::Json(err.to_string()))?;
    let serde_json::Value::Object(object) = root else {
        return Err(DataError::NotAnObject);
    };
    let mut env = Env::new();
    let mut total = 0usize;
    for stmt in program.data.iter().flat_map(|block| &block.stmts) {
        let StmtKind::Decl { ty, vars } = &stmt.kind else {
            continue;
        };
        for var in vars {
            let name = &var.name.name;
            let shape = declared_shape(ty, &env, name)?;
            let count = shape
                .iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .and_then(|n| n.checked_add(total))
                .filter(|&n| n <= MAX_VALUES)
                .ok_or_else(|| DataError::TooManyValues {
                    name: name.clone(),
                    count: shape.iter().fold(1usize, |n, &d| n.saturating_mul(d)),
                    max: MAX_VALUES,
                })?;
            total = count;
            let json = object
                .get(name)
                .ok_or_else(|| DataError::Missing { name: name.clone() })?;
            let value = read_value(json, &shape, ty.base == BaseType::Int, name)?;
            check_constraint(ty, &value, &env, name)?;
            check_structure(ty.base, &value, name)?;
            env.insert(name.clone(), value);
        }
    }
    Ok(Data { values: env })
}

fn invalid(name: &str, problem: impl Into<String>) -> DataError {
    DataError::Invalid {
        name: name.to_owned(),
        problem: problem.into(),
    }
}

/// Array dimensions, then vector or matrix sizes, evaluated over earlier data.
pub(crate) fn declared_shape(
    ty: &SizedType,
    env: &Env,
    name: &str,
) -> Result<Vec<usize>, DataError> {
    // A square matrix type is declared with its one size.
    let square = matches!(
        ty.base,
        BaseType::CholeskyFactorCorr | BaseType::CorrMatrix | BaseType::CovMatrix
    ) || (ty.base == BaseType::CholeskyFactorCov && ty.sizes.len() == 1);
    let sizes = ty.sizes.iter().chain(ty.sizes.last().filter(|_| square));
    ty.array_dims
        .iter()
        .chain(sizes)
        .map(|size| {
            let value = host::eval(size, env).map_err(|err| DataError::Size {
                name: name.to_owned(),
                problem: err.message,
            })?;
            match value.as_int() {
                Some(n) if n >= 0 && (n as u64) <= MAX_VALUES as u64 => Ok(n as usize),
                Some(n) => Err(DataError::Size {
                    name: name.to_owned(),
                    problem: format!("size {n} is negative or over {MAX_VALUES}"),
                }),
                None => Err(DataError::Size {
                    name: name.to_owned(),
                    problem: "a size must be an integer".into(),
                }),
            }
        })
        .collect()
}

fn read_value(
    json: &serde_json::Value,
    shape: &[usize],
    int: bool,
    name: &str,
) -> Result<Value, DataError> {
    // `shape` is checked against MAX_VALUES, so this capacity is bounded.
    let len: usize = shape.iter().product();
    let mut values = if int {
        Values::Int(Vec::with_capacity(len))
    } else {
        Values::Real(Vec::with_capacity(len))
    };
    collect(json, shape, &mut values, name, &mut String::new())?;
    Ok(Value {
        shape: shape.to_vec(),
        values,
    })
}

fn collect(
    json: &serde_json::Value,
    shape: &[usize],
    out: &mut Values,
    name: &str,
    position: &mut String,
) -> Result<(), DataError> {
    let Some((&dim, rest)) = shape.split_first() else {
        return scalar(json, out, name, position);
    };
    let serde_json::Value::Array(items) = json else {
        return Err(invalid(
            name,
            format!("expected a list of {dim} at {}", at(position)),
        ));
    };
    if items.len() != dim {
        return Err(invalid(
            name,
            format!(
                "expected {dim} elements at {}, found {}",
                at(position),
                items.len()
            ),
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let mark = position.len();
        position.push_str(&format!("[{}]", i + 1));
        collect(item, rest, out, name, position)?;
        position.truncate(mark);
    }
    Ok(())
}

fn at(position: &str) -> String {
    if position.is_empty() {
        "the top level".into()
    } else {
        position.to_owned()
    }
}

fn scalar(
    json: &serde_json::Value,
    out: &mut Values,
    name: &str,
    position: &str,
) -> Result<(), DataError> {
    match out {
        Values::Int(v) => match json.as_i64() {
            Some(i) => v.push(i),
            None => {
                return Err(invalid(
                    name,
                    format!(
                        "declared int, found {json} at {}; an int is written without `.` or exponent",
                        at(position)
                    ),
                ));
            }
        },
        Values::Real(v) => {
            let x = match json {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(s) => match s.as_str() {
                    "Inf" | "+Inf" | "Infinity" | "+Infinity" | "inf" => Some(f64::INFINITY),
                    "-Inf" | "-Infinity" | "-inf" => Some(f64::NEG_INFINITY),
                    "NaN" | "nan" => Some(f64::NAN),
                    _ => None,
                },
                _ => None,
            };
            match x {
                Some(x) => v.push(x),
                None => {
                    return Err(invalid(
                        name,
                        format!("expected a number at {}, found {json}", at(position)),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Stan's tolerance for the checks of constrained data (sums, norms, symmetry).
const STRUCTURE_TOLERANCE: f64 = 1e-8;

/// Checks each array element of constrained-type data (`simplex`, `ordered`, `cov_matrix`,
/// ...) as Stan does when it reads data.
fn check_structure(base: BaseType, value: &Value, name: &str) -> Result<(), DataError> {
    let matrix = matches!(
        base,
        BaseType::CholeskyFactorCorr
            | BaseType::CholeskyFactorCov
            | BaseType::CorrMatrix
            | BaseType::CovMatrix
    );
    let vector = matches!(
        base,
        BaseType::Simplex | BaseType::Ordered | BaseType::PositiveOrdered | BaseType::UnitVector
    );
    if !matrix && !vector {
        return Ok(());
    }
    let inner = if matrix { 2 } else { 1 };
    let (outer, block) = value.shape.split_at(value.shape.len() - inner);
    let len: usize = block.iter().product();
    let values: Vec<f64> = (0..value.len()).map(|i| value.real_at(i)).collect();
    for (k, x) in values
        .chunks(len.max(1))
        .enumerate()
        .take(outer.iter().product())
    {
        let problem = if matrix {
            check_matrix(base, block[0], block[1], x)
        } else {
            check_vector(base, x)
        };
        if let Some(problem) = problem {
            let at = if outer.is_empty() {
                String::new()
            } else {
                format!(" at {}", flat_position(outer, k))
            };
            return Err(invalid(
                name,
                format!("declared {}{at}: {problem}", base.as_str()),
            ));
        }
    }
    Ok(())
}

fn check_vector(base: BaseType, x: &[f64]) -> Option<String> {
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Some(format!("element {} is {}", i + 1, x[i]));
    }
    match base {
        BaseType::Simplex => {
            if let Some(i) = x.iter().position(|&v| v < 0.0) {
                return Some(format!("element {} is negative ({})", i + 1, x[i]));
            }
            let sum: f64 = x.iter().sum();
            ((sum - 1.0).abs() > STRUCTURE_TOLERANCE)
                .then(|| format!("the elements sum to {sum}, not 1"))
        }
        BaseType::Ordered | BaseType::PositiveOrdered => {
            if base == BaseType::PositiveOrdered
                && let Some(i) = x.iter().position(|&v| v < 0.0)
            {
                return Some(format!("element {} is negative ({})", i + 1, x[i]));
            }
            x.windows(2).position(|w| w[1] <= w[0]).map(|i| {
                format!(
                    "not increasing: element {} is {} and element {} is {}",
                    i + 1,
                    x[i],
                    i + 2,
                    x[i + 1]
                )
            })
        }
        _ => {
            let norm2: f64 = x.iter().map(|v| v * v).sum();
            ((norm2 - 1.0).abs() > STRUCTURE_TOLERANCE)
                .then(|| format!("the squared length is {norm2}, not 1"))
        }
    }
}

fn check_matrix(base: BaseType, rows: usize, cols: usize, m: &[f64]) -> Option<String> {
    if let Some(i) = m.iter().position(|v| !v.is_finite()) {
        return Some(format!(
            "element [{},{}] is {}",
            i / cols + 1,
            i % cols + 1,
            m[i]
        ));
    }
    match base {
        BaseType::CholeskyFactorCorr | BaseType::CholeskyFactorCov => {
            if rows < cols {
                return Some(format!("{rows} rows is fewer than {cols} columns"));
            }
            for i in 0..rows {
                for j in 0..cols {
                    let v = m[i * cols + j];
                    if j > i && v != 0.0 {
                        return Some(format!(
                            "not lower triangular: element [{},{}] is {v}",
                            i + 1,
                            j + 1
                        ));
                    }
                    if j == i && v <= 0.0 {
                        return Some(format!(
                            "diagonal element [{0},{0}] is {v}, not positive",
                            i + 1
                        ));
                    }
                }
            }
            if base == BaseType::CholeskyFactorCorr {
                for i in 0..rows {
                    let norm2: f64 = m[i * cols..(i + 1) * cols].iter().map(|v| v * v).sum();
                    if (norm2 - 1.0).abs() > STRUCTURE_TOLERANCE {
                        return Some(format!("row {} has squared length {norm2}, not 1", i + 1));
                    }
                }
            }
            None
        }
        _ => {
            if base == BaseType::CorrMatrix
                && let Some(i) =
                    (0..rows).find(|&i| (m[i * cols + i] - 1.0).abs() > STRUCTURE_TOLERANCE)
            {
                return Some(format!(
                    "diagonal element [{0},{0}] is {1}, not 1",
                    i + 1,
                    m[i * cols + i]
                ));
            }
            // Symmetry, then positive definiteness, as the host's factorisation checks them.
            host::linalg::cholesky(rows, m)
                .err()
                .map(|why| why.replacen("the matrix", "it", 1))
        }
    }
}

fn check_constraint(ty: &SizedType, value: &Value, env: &Env, name: &str) -> Result<(), DataError> {
    let Some(Constraint::Range { lower, upper }) = &ty.constraint else {
        return Ok(());
    };
    let bound = |expr: &Option<crate::ast::Expr>| -> Result<Option<Value>, DataError> {
        expr.as_ref()
            .map(|e| {
                host::eval(e, env).map_err(|err| invalid(name, format!("bound: {}", err.message)))
            })
            .transpose()
    };
    let (lower, upper) = (bound(lower)?, bound(upper)?);
    for i in 0..value.len() {
        let x = value.real_at(i);
        let at_i = |b: &Value| {
            b.real_at(if b.is_scalar() {
                0
            } else {
                i.min(b.len().saturating_sub(1))
            })
        };
        let violated = if let Some(lo) = lower.as_ref().filter(|lo| x.is_nan() || x < at_i(lo)) {
            Some(format!("lower={}", at_i(lo)))
        } else {
            upper
                .as_ref()
                .filter(|hi| x.is_nan() || x > at_i(hi))
                .map(|hi| format!("upper={}", at_i(hi)))
        };
        if let Some(bound) = violated {
            return Err(DataError::Constraint {
                name: name.to_owned(),
                position: flat_position(&value.shape, i),
                value: x,
                bound,
            });
        }
    }
    Ok(())
}

/// `[i,j]` (1-based) for flat position `i` in `shape`; empty for a scalar.
fn flat_position(shape: &[usize], mut i: usize) -> String {
    if shape.is_empty() {
        return String::new();
    }
    let mut parts = vec![0; shape.len()];
    for (part, dim) in parts.iter_mut().zip(shape).rev() {
        *part = i % dim.max(&1) + 1;
        i /= dim.max(&1);
    }
    let parts: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
    format!("[{}]", parts.join(","))
}

#[cfg(test)]
mod tests;
