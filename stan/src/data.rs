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
    match ty.base {
        BaseType::Int
        | BaseType::Real
        | BaseType::Vector
        | BaseType::RowVector
        | BaseType::Matrix
        | BaseType::CholeskyFactorCorr
        | BaseType::CholeskyFactorCov
        | BaseType::CorrMatrix
        | BaseType::CovMatrix => {}
        other => {
            return Err(invalid(
                name,
                format!("`{}` data is not supported yet", other.as_str()),
            ));
        }
    }
    // `cov_matrix[K]` and the like are K x K.
    let square = !matches!(
        ty.base,
        BaseType::Int | BaseType::Real | BaseType::Vector | BaseType::RowVector | BaseType::Matrix
    ) && ty.sizes.len() == 1;
    let sizes = ty.sizes.iter().chain(square.then(|| &ty.sizes[0]));
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
