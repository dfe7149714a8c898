//! Lowering of a parsed Stan program plus its data to a `sampler` [`Model`] (IR v1).
//!
//! Covers the linear regressions of posteriordb: `data` and `transformed data` evaluated on
//! the host; `real` and `vector` parameters with constant bounds; transformed parameters as
//! named [`Transformed`] values (so they appear in the output columns); `~` and
//! `target += *_lpdf(...)` as IR `Sample` statements, other `target +=` as `Factor`s.
//! Everything else is refused with an error at the construct's span.
//!
//! Constants: the IR keeps or drops normalising constants the same way for `~` and for
//! `target += *_lpdf`, while Stan drops them only for `~`; log densities therefore match Stan's
//! up to a constant.

mod call;
mod density;
mod exec;
mod expr;
mod params;
mod sym;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sampler::{DataValue, Expr as Ir, IR_VERSION, Model};

use crate::ast::{
    AssignOp, BaseType, Expr, ExprKind, Index, Program, SizedType, Span, Stmt, StmtKind,
};
use crate::data::{self, Data};
use crate::error::render;
use crate::host::{self, Env, HostError};
use crate::value::{Value, Values};

/// A construct that cannot be lowered, at its span.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct LowerError {
    pub span: Span,
    pub message: String,
}

impl LowerError {
    pub fn new(span: Span, message: impl Into<String>) -> LowerError {
        LowerError {
            span,
            message: message.into(),
        }
    }

    /// `file:line:column: error: ...` with the source line and a caret.
    pub fn render(&self, file_name: &str, source: &str) -> String {
        render(file_name, source, self.span, &self.message)
    }
}

impl From<HostError> for LowerError {
    fn from(err: HostError) -> LowerError {
        LowerError::new(err.span, err.message)
    }
}

/// Lowers `program` with its `data` (from [`crate::read_data`]) to an IR model named `name`.
pub fn lower(program: &Program, data: &Data, name: &str) -> Result<Model, LowerError> {
    if let Some(functions) = program
        .functions
        .as_ref()
        .filter(|f| !f.functions.is_empty())
    {
        return Err(LowerError::new(
            functions.span,
            "user-defined functions are not supported yet",
        ));
    }
    // `generated quantities` runs on the host after sampling (`crate::gq`), not in the model.
    let mut lowerer = Lowerer {
        env: data.values.clone(),
        syms: BTreeMap::new(),
        scopes: Vec::new(),
        assignable: BTreeSet::new(),
        decl_spans: HashMap::new(),
        generated_items: HashMap::new(),
        hidden: 0,
        steps: 0,
        model: Model {
            ir_version: IR_VERSION,
            name: name.to_owned(),
            data: BTreeMap::new(),
            parameters: Vec::new(),
            transformed: Vec::new(),
            model: Vec::new(),
        },
        generated: 0,
    };
    if let Some(block) = &program.transformed_data {
        for stmt in &block.stmts {
            lowerer.host_stmt(stmt)?;
        }
    }
    if let Some(block) = &program.parameters {
        lowerer.parameters(block)?;
    }
    if let Some(block) = &program.transformed_parameters {
        lowerer.transformed_parameters(block)?;
    }
    if let Some(block) = &program.model {
        lowerer.model_block(block)?;
    }
    Ok(lowerer.model)
}

pub(crate) struct Lowerer {
    /// Data and transformed data, by name.
    env: Env,
    /// Parameters, transformed parameters and locals that depend on parameters.
    syms: BTreeMap<String, sym::Sym>,
    /// Names declared in each open scope, innermost last.
    scopes: Vec<Vec<String>>,
    /// Variables the current block may assign: its own locals.
    assignable: BTreeSet<String>,
    /// Where each local was declared, for errors at the end of a block.
    decl_spans: HashMap<String, Span>,
    /// Generated data items by content, so repeated constants share one item.
    generated_items: HashMap<(bool, Vec<u64>), String>,
    /// Hidden transformed values made so far (`_t1`, `_t2`, ...).
    hidden: usize,
    /// Statements run so far (see `exec::MAX_STEPS`).
    steps: usize,
    model: Model,
    generated: usize,
}

fn unsupported<T>(span: Span, what: impl std::fmt::Display) -> Result<T, LowerError> {
    Err(LowerError::new(
        span,
        format!("{what} is not supported yet"),
    ))
}

impl Lowerer {
    /// Adds a data item: under the variable's own name, or a generated `_dN` (Stan names
    /// cannot start with `_`, so generated names never clash).
    fn data_item(&mut self, name: Option<String>, value: DataValue) -> Ir {
        let key = match (&name, &value) {
            (None, DataValue::Vector(v)) => Some((false, v.iter().map(|x| x.to_bits()).collect())),
            (None, DataValue::IntVector(v)) => Some((true, v.iter().map(|&x| x as u64).collect())),
            _ => None,
        };
        if let Some(key) = &key
            && let Some(existing) = self.generated_items.get(key)
        {
            return Ir::Ref(existing.clone());
        }
        let name = name.unwrap_or_else(|| {
            self.generated += 1;
            format!("_d{}", self.generated)
        });
        if let Some(key) = key {
            self.generated_items.insert(key, name.clone());
        }
        self.model.data.entry(name.clone()).or_insert(value);
        Ir::Ref(name)
    }

    fn shape_of(&self, ty: &SizedType, name: &str) -> Result<Vec<usize>, LowerError> {
        data::declared_shape(ty, &self.env, name)
            .map_err(|err| LowerError::new(ty.span, err.to_string()))
    }

    /// One statement of `transformed data`, run on the host.
    fn host_stmt(&mut self, stmt: &Stmt) -> Result<(), LowerError> {
        match &stmt.kind {
            StmtKind::Decl { ty, vars } => {
                for var in vars {
                    let shape = self.shape_of(ty, &var.name.name)?;
                    let value = match &var.init {
                        Some(init) => conform(host::eval(init, &self.env)?, ty, &shape, init.span)?,
                        None => blank(ty, shape),
                    };
                    self.env.insert(var.name.name.clone(), value);
                }
                Ok(())
            }
            StmtKind::Assign { lhs, op, rhs } => {
                let Some(current) = self.env.get(&lhs.name.name).cloned() else {
                    return Err(LowerError::new(
                        lhs.span,
                        format!("unknown name `{}`", lhs.name.name),
                    ));
                };
                let mut positions = Vec::new();
                for index in lhs.indices.iter().flatten() {
                    let Index::Single(e) = index else {
                        return unsupported(lhs.span, "assignment to a slice");
                    };
                    positions.push(
                        host::eval(e, &self.env)?.as_int().ok_or_else(|| {
                            LowerError::new(e.span, "an index must be an integer")
                        })?,
                    );
                }
                let old = host::index(&current, &positions, lhs.span)?;
                let mut new = host::eval(rhs, &self.env)?;
                if *op != AssignOp::Assign {
                    let bin = match op {
                        AssignOp::Add => crate::ast::BinaryOp::Add,
                        AssignOp::Sub => crate::ast::BinaryOp::Sub,
                        AssignOp::Mul => crate::ast::BinaryOp::Mul,
                        AssignOp::Div => crate::ast::BinaryOp::Div,
                        AssignOp::EltMul => crate::ast::BinaryOp::EltMul,
                        AssignOp::EltDiv | AssignOp::Assign => crate::ast::BinaryOp::EltDiv,
                    };
                    let mut env = Env::new();
                    env.insert("a".into(), old.clone());
                    env.insert("b".into(), new);
                    let var = |n: &str| Expr {
                        kind: ExprKind::Var(crate::ast::Ident {
                            name: n.into(),
                            span: stmt.span,
                        }),
                        span: stmt.span,
                    };
                    let combined = Expr {
                        kind: ExprKind::Binary {
                            op: bin,
                            lhs: Box::new(var("a")),
                            rhs: Box::new(var("b")),
                        },
                        span: stmt.span,
                    };
                    new = host::eval(&combined, &env)?;
                }
                if new.len() != old.len() && !new.is_scalar() {
                    return Err(LowerError::new(
                        stmt.span,
                        format!("assigning {} values to {} places", new.len(), old.len()),
                    ));
                }
                store(
                    self.env.get_mut(&lhs.name.name).expect("looked up above"),
                    &positions,
                    &new,
                    stmt.span,
                )
            }
            StmtKind::For {
                var,
                lower,
                upper,
                body,
            } => {
                let (Some(lo), Some(hi)) = (
                    host::eval(lower, &self.env)?.as_int(),
                    host::eval(upper, &self.env)?.as_int(),
                ) else {
                    return Err(LowerError::new(stmt.span, "loop bounds must be integers"));
                };
                if hi.saturating_sub(lo) > data::MAX_VALUES as i64 {
                    return Err(LowerError::new(stmt.span, "loop runs too many times"));
                }
                for i in lo..=hi {
                    self.env.insert(var.name.clone(), Value::int(i));
                    self.host_stmt(body)?;
                }
                self.env.remove(&var.name);
                Ok(())
            }
            StmtKind::Block(stmts) => stmts.iter().try_for_each(|s| self.host_stmt(s)),
            StmtKind::Empty | StmtKind::Print(_) => Ok(()),
            _ => unsupported(stmt.span, "this statement in `transformed data`"),
        }
    }
}

/// A declared variable before assignment: NaN for reals (as Stan), 0 for ints.
fn blank(ty: &SizedType, shape: Vec<usize>) -> Value {
    // The shape was checked against MAX_VALUES by `declared_shape`.
    let len = shape.iter().product();
    let values = if ty.base == BaseType::Int {
        Values::Int(vec![0; len])
    } else {
        Values::Real(vec![f64::NAN; len])
    };
    Value { shape, values }
}

/// `value` as a variable of type `ty` and `shape` (an int converts to real; sizes must match).
fn conform(value: Value, ty: &SizedType, shape: &[usize], span: Span) -> Result<Value, LowerError> {
    if value.shape != shape {
        return Err(LowerError::new(
            span,
            format!(
                "value of size {:?} for a declaration of size {shape:?}",
                value.shape
            ),
        ));
    }
    match (ty.base, value.values) {
        (BaseType::Int, Values::Real(_)) => Err(LowerError::new(span, "a real value for an `int`")),
        (BaseType::Int, values) => Ok(Value {
            shape: value.shape,
            values,
        }),
        (_, values) => {
            let v = Value {
                shape: value.shape,
                values,
            };
            Ok(Value {
                shape: v.shape.clone(),
                values: Values::Real(v.reals()),
            })
        }
    }
}

/// Writes `new` into `target` at `positions` (1-based; a prefix of the dimensions).
fn store(target: &mut Value, positions: &[i64], new: &Value, span: Span) -> Result<(), LowerError> {
    let mut offset = 0usize;
    let mut stride: usize = target.shape.iter().product();
    for (dim, &pos) in target.shape.iter().zip(positions) {
        stride /= (*dim).max(1);
        offset += (pos as usize - 1) * stride;
    }
    let len = stride;
    match &mut target.values {
        Values::Real(v) => {
            for i in 0..len {
                v[offset + i] = new.real_at(if new.is_scalar() { 0 } else { i });
            }
        }
        Values::Int(v) => {
            let Values::Int(n) = &new.values else {
                return Err(LowerError::new(span, "a real value assigned to an `int`"));
            };
            for i in 0..len {
                v[offset + i] = n[if new.is_scalar() { 0 } else { i }];
            }
        }
    }
    Ok(())
}
