//! Validation at the boundary: a decoded [`Model`] becomes a [`CheckedModel`] or a [`ModelError`]
//! that names the offending node (`model[3].sample.dist.normal.sigma: ...`).
//!
//! Checks here are the ones that need no shapes (version, names, data values, sizes);
//! [`crate::lower`] checks shapes, argument domains and data supports while lowering.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

use crate::eval::{Evaluator, Plan};
use crate::ir::{DataValue, DecodeError, IR_VERSION, MIN_IR_VERSION, Model, dims_product};
use crate::limits::Limits;
use crate::lower;
use crate::model_error::{ModelError, Num, Problem};
use crate::program::{Column, Program};

/// A model failed to load: it did not decode, or it decoded and failed validation.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The bytes or text are not a model.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The model is not valid.
    #[error("invalid model: {0}")]
    Invalid(#[from] ModelError),
}

/// A stable 128-bit digest of a model's canonical bytes: the key of compiled artefacts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelHash(pub [u8; 16]);

impl fmt::Display for ModelHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

/// A validated model with its lowered program. Only [`CheckedModel::new`] builds one.
#[derive(Clone, Debug)]
pub struct CheckedModel {
    model: Arc<Model>,
    program: Arc<Program>,
    hash: ModelHash,
    warnings: Vec<String>,
    /// The CPU evaluator's decoding of `program`, made by the first [`Self::evaluator`].
    plan: OnceLock<Arc<Plan>>,
}

impl CheckedModel {
    /// Validates and lowers `model`.
    pub fn new(model: Model, limits: &Limits) -> Result<CheckedModel, ModelError> {
        check_declarations(&model, limits)?;
        let lowered = lower::lower(&model, limits)?;
        let digest = Sha256::digest(model.to_msgpack());
        let mut hash = [0u8; 16];
        hash.copy_from_slice(&digest[..16]);
        Ok(CheckedModel {
            model: Arc::new(model),
            program: Arc::new(lowered.program),
            hash: ModelHash(hash),
            warnings: lowered.warnings,
            plan: OnceLock::new(),
        })
    }

    /// Decodes the JSON form and validates it.
    pub fn from_json(text: &str, limits: &Limits) -> Result<CheckedModel, LoadError> {
        if text.len() > limits.max_model_bytes {
            return Err(DecodeError::TooLarge {
                len: text.len(),
                max: limits.max_model_bytes,
            }
            .into());
        }
        Ok(CheckedModel::new(Model::from_json(text)?, limits)?)
    }

    /// Decodes rmp-serde bytes and validates them.
    pub fn from_msgpack(bytes: &[u8], limits: &Limits) -> Result<CheckedModel, LoadError> {
        let model = Model::from_msgpack(bytes, limits.max_model_bytes)?;
        Ok(CheckedModel::new(model, limits)?)
    }

    /// The source model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.model.name
    }

    /// The lowered program.
    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// The digest of the model's canonical bytes.
    pub fn hash(&self) -> ModelHash {
        self.hash
    }

    /// Length of the unconstrained parameter vector.
    pub fn dim(&self) -> usize {
        self.program.dim
    }

    /// The output columns: parameters, then transformed parameters.
    pub fn columns(&self) -> Vec<Column> {
        self.program.columns()
    }

    /// Non-fatal remarks found while checking (for example a prior whose support does not
    /// match the parameter's constraint).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A fresh CPU evaluator (one per chain); the program is decoded once per model.
    pub fn evaluator(&self) -> Evaluator {
        let plan = self.plan.get_or_init(|| Arc::new(Plan::new(&self.program)));
        Evaluator::with_plan(self.program.clone(), plan.clone())
    }
}

fn valid_name(name: &str, max_len: usize) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && name.len() <= max_len && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_limit(
    path: &str,
    what: &'static str,
    value: usize,
    limit: usize,
) -> Result<(), ModelError> {
    if value > limit {
        return Err(ModelError::new(path, Problem::Limit { what, value, limit }));
    }
    Ok(())
}

/// Version, names, data values and sizes.
fn check_declarations(model: &Model, limits: &Limits) -> Result<(), ModelError> {
    if !(MIN_IR_VERSION..=IR_VERSION).contains(&model.ir_version) {
        return Err(ModelError::new(
            "ir_version",
            Problem::Version {
                found: model.ir_version,
                supported: IR_VERSION,
            },
        ));
    }
    if model.name.len() > 256 || model.name.chars().any(char::is_control) {
        return Err(ModelError::new(
            "name",
            Problem::Invalid("a model name is at most 256 bytes of printable text".into()),
        ));
    }
    for (path, what, count) in [
        (
            "parameters",
            "the number of parameters",
            model.parameters.len(),
        ),
        (
            "transformed",
            "the number of transformed parameters",
            model.transformed.len(),
        ),
        ("model", "the number of statements", model.model.len()),
    ] {
        check_limit(path, what, count, limits.max_declarations)?;
    }

    let mut seen = HashSet::new();
    let mut declare = |path: String, name: &str| -> Result<(), ModelError> {
        if !valid_name(name, limits.max_name_len) {
            return Err(ModelError::new(
                path,
                Problem::BadName {
                    name: name.to_owned(),
                    max_len: limits.max_name_len,
                },
            ));
        }
        if !seen.insert(name.to_owned()) {
            return Err(ModelError::new(
                path,
                Problem::Duplicate {
                    name: name.to_owned(),
                },
            ));
        }
        Ok(())
    };

    let mut n_values = 0usize;
    for (name, value) in &model.data {
        let path = format!("data.{name}");
        declare(path.clone(), name)?;
        n_values = n_values.saturating_add(check_data(&path, value)?);
        check_limit(
            "data",
            "the number of data values",
            n_values,
            limits.max_data_values,
        )?;
    }
    let mut dim = 0usize;
    for (i, param) in model.parameters.iter().enumerate() {
        let path = format!("parameters[{i}]");
        declare(format!("{path}.name"), &param.name)?;
        if param.size == Some(0) {
            return Err(ModelError::new(format!("{path}.size"), Problem::Empty));
        }
        let len = param.size.unwrap_or(1);
        dim = dim.saturating_add(param.constraint.unconstrained_len(len, &param.dims));
        check_limit(
            &path,
            "the number of unconstrained parameters",
            dim,
            limits.max_dim,
        )?;
        check_constraint(&format!("{path}.constraint"), &param.constraint)?;
        check_parameter(&path, i, model)?;
    }
    for (i, transformed) in model.transformed.iter().enumerate() {
        let path = format!("transformed[{i}]");
        declare(format!("{path}.name"), &transformed.name)?;
        check_dims(&format!("{path}.dims"), &transformed.dims, None)?;
    }
    Ok(())
}

/// The IR v2 fields of parameter `i`: vector constraints on vectors, bounds only on
/// unconstrained reals and not with an affine transform, `dims` that match the size, and
/// bound expressions that read only data and earlier parameters.
fn check_parameter(path: &str, i: usize, model: &Model) -> Result<(), ModelError> {
    use crate::ir::Constraint;
    let param = &model.parameters[i];
    let constraint_name = || serde_json::to_string(&param.constraint).unwrap_or_default();
    if param.constraint.is_vector_transform() && param.size.is_none() {
        return Err(ModelError::new(
            format!("{path}.constraint"),
            Problem::Invalid(format!(
                "parameter `{}`: constraint {} applies to vectors; give it a `size`",
                param.name,
                constraint_name()
            )),
        ));
    }
    if param.constraint.is_matrix_transform() {
        let shape_ok = match param.dims[..] {
            [m, n] => {
                param.size == Some(m * n)
                    && n >= 1
                    && if param.constraint == Constraint::CholeskyFactorCov {
                        m >= n
                    } else {
                        m == n
                    }
            }
            _ => false,
        };
        if !shape_ok {
            return Err(ModelError::new(
                format!("{path}.dims"),
                Problem::Invalid(format!(
                    "parameter `{}`: constraint {} needs `dims` [M, N] (square, or M >= N for \
                     cholesky_factor_cov) and `size` M * N, found dims {:?} and size {:?}",
                    param.name,
                    constraint_name(),
                    param.dims,
                    param.size
                )),
            ));
        }
    }
    let bounds = [("lower", &param.lower), ("upper", &param.upper)];
    let affine = [("offset", &param.offset), ("multiplier", &param.multiplier)];
    let has_bounds = bounds.iter().any(|(_, e)| e.is_some());
    let has_affine = affine.iter().any(|(_, e)| e.is_some());
    if has_bounds && param.constraint != Constraint::Real {
        return Err(ModelError::new(
            path,
            Problem::Invalid(format!(
                "parameter `{}`: `lower`/`upper` go with constraint \"real\" (the default), not {}",
                param.name,
                constraint_name()
            )),
        ));
    }
    if has_affine && param.constraint != Constraint::Real {
        return Err(ModelError::new(
            path,
            Problem::Invalid(format!(
                "parameter `{}`: `offset`/`multiplier` go with constraint \"real\" (the default), not {}",
                param.name,
                constraint_name()
            )),
        ));
    }
    if has_bounds && has_affine {
        return Err(ModelError::new(
            path,
            Problem::Invalid(format!(
                "parameter `{}` has both bounds and an offset/multiplier; use one or the other",
                param.name
            )),
        ));
    }
    check_dims(&format!("{path}.dims"), &param.dims, Some(param.size))?;
    for (field, expr) in bounds.into_iter().chain(affine) {
        let Some(expr) = expr else { continue };
        let mut names = Vec::new();
        referenced_names(expr, &mut names);
        for name in names {
            let later = model.parameters[i..].iter().any(|later| later.name == name);
            let transformed = model.transformed.iter().any(|t| t.name == name);
            let what = if later {
                "a parameter declared at or after it"
            } else if transformed {
                "a transformed parameter"
            } else {
                continue;
            };
            return Err(ModelError::new(
                format!("{path}.{field}"),
                Problem::Invalid(format!(
                    "`{field}` of parameter `{}` uses `{name}`, {what}; it may use only data and earlier parameters",
                    param.name
                )),
            ));
        }
    }
    Ok(())
}

/// `dims` entries are positive and, when `size` is known, multiply to the value's length
/// (`Some(None)` is a scalar, which takes no dims). A transformed parameter's length is known
/// only when lowered, which checks it there.
fn check_dims(path: &str, dims: &[usize], size: Option<Option<usize>>) -> Result<(), ModelError> {
    if dims.is_empty() {
        return Ok(());
    }
    if dims.contains(&0) {
        return Err(ModelError::new(
            path,
            Problem::Invalid(format!("dims {dims:?} has a zero entry")),
        ));
    }
    match size {
        Some(None) => Err(ModelError::new(
            path,
            Problem::Invalid("a scalar parameter takes no dims (give a `size`)".into()),
        )),
        Some(Some(len)) if dims_product(dims) != Some(len) => Err(ModelError::new(
            path,
            Problem::Invalid(format!("dims {dims:?} do not multiply to the size {len}")),
        )),
        _ => Ok(()),
    }
}

/// Every name an expression refers to.
fn referenced_names<'e>(expr: &'e crate::ir::Expr, out: &mut Vec<&'e str>) {
    use crate::ir::Expr;
    match expr {
        Expr::Const(_) => {}
        Expr::Ref(name) => out.push(name),
        Expr::Unary(_, arg) | Expr::Elem(arg, _) | Expr::Slice(arg, _, _) => {
            referenced_names(arg, out)
        }
        Expr::Binary(_, lhs, rhs) => {
            referenced_names(lhs, out);
            referenced_names(rhs, out);
        }
        Expr::Concat(parts) => parts.iter().for_each(|part| referenced_names(part, out)),
    }
}

fn check_constraint(path: &str, constraint: &crate::ir::Constraint) -> Result<(), ModelError> {
    use crate::ir::Constraint;
    let bad = |what: &str| Err(ModelError::new(path, Problem::Invalid(what.to_owned())));
    match *constraint {
        Constraint::Lower(bound) | Constraint::Upper(bound) if !bound.is_finite() => {
            bad("the bound must be finite")
        }
        Constraint::Interval { lower, upper } if !(lower.is_finite() && upper.is_finite()) => {
            bad("both bounds must be finite")
        }
        Constraint::Interval { lower, upper } if lower >= upper => Err(ModelError::new(
            path,
            Problem::Invalid(format!(
                "lower bound {} must be below upper bound {}",
                Num(lower),
                Num(upper)
            )),
        )),
        _ => Ok(()),
    }
}

/// Checks finiteness and shape; returns the number of values.
fn check_data(path: &str, value: &DataValue) -> Result<usize, ModelError> {
    let finite = |values: &[f64]| -> Result<(), ModelError> {
        match values.iter().position(|v| !v.is_finite()) {
            Some(index) => Err(ModelError::new(
                path,
                Problem::NonFinite {
                    index,
                    value: values[index],
                },
            )),
            None => Ok(()),
        }
    };
    match value {
        DataValue::Real(v) => finite(std::slice::from_ref(v)).map(|()| 1),
        DataValue::Int(_) => Ok(1),
        DataValue::Vector(values) => {
            if values.is_empty() {
                return Err(ModelError::new(path, Problem::Empty));
            }
            finite(values).map(|()| values.len())
        }
        DataValue::IntVector(values) => {
            if values.is_empty() {
                return Err(ModelError::new(path, Problem::Empty));
            }
            Ok(values.len())
        }
        DataValue::Matrix(rows) => {
            let Some(first) = rows.first() else {
                return Err(ModelError::new(path, Problem::Empty));
            };
            if first.is_empty() {
                return Err(ModelError::new(path, Problem::Empty));
            }
            let mut count = 0usize;
            for (row, values) in rows.iter().enumerate() {
                if values.len() != first.len() {
                    return Err(ModelError::new(
                        path,
                        Problem::RaggedMatrix {
                            row,
                            len: values.len(),
                            expected: first.len(),
                        },
                    ));
                }
                if let Some(col) = values.iter().position(|v| !v.is_finite()) {
                    return Err(ModelError::new(
                        path,
                        Problem::NonFinite {
                            index: row * first.len() + col,
                            value: values[col],
                        },
                    ));
                }
                count = count.saturating_add(values.len());
            }
            Ok(count)
        }
    }
}

#[cfg(test)]
mod tests;
