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

mod expr;

use std::collections::BTreeMap;

use sampler::{
    Constraint as IrConstraint, DataValue, Expr as Ir, IR_VERSION, Model, Parameter, Statement,
    Transformed,
};

use crate::ast::{
    AssignOp, BaseType, Block, Constraint, Expr, ExprKind, Index, Program, SizedType, Span, Stmt,
    StmtKind,
};
use crate::data::{self, Data};
use crate::error::render;
use crate::host::{self, Env, HostError};
use crate::value::{Value, Values};
use expr::Shape;

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
    if let Some(functions) = &program.functions {
        return Err(LowerError::new(
            functions.span,
            "the `functions` block is not supported yet",
        ));
    }
    if let Some(block) = &program.generated_quantities {
        return Err(LowerError::new(
            block.span,
            "the `generated quantities` block is not supported yet",
        ));
    }
    let mut lowerer = Lowerer {
        env: data.values.clone(),
        syms: BTreeMap::new(),
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
        lowerer.definitions(block, true)?;
    }
    if let Some(block) = &program.model {
        lowerer.definitions(block, false)?;
    }
    Ok(lowerer.model)
}

pub(crate) struct Lowerer {
    /// Data and transformed data, by name.
    env: Env,
    /// Parameters, transformed parameters and model locals: their IR and shape.
    syms: BTreeMap<String, (Ir, Shape)>,
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
        let name = name.unwrap_or_else(|| {
            self.generated += 1;
            format!("_d{}", self.generated)
        });
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

    fn parameters(&mut self, block: &Block) -> Result<(), LowerError> {
        for stmt in &block.stmts {
            let StmtKind::Decl { ty, vars } = &stmt.kind else {
                return unsupported(stmt.span, "a statement in `parameters`");
            };
            let constraint = self.constraint(ty)?;
            for var in vars {
                let shape = self.shape_of(ty, &var.name.name)?;
                let size = match (ty.base, &shape[..]) {
                    (BaseType::Real, []) => None,
                    (BaseType::Real, [n]) | (BaseType::Vector, [n]) => Some(*n),
                    _ => {
                        return unsupported(
                            ty.span,
                            format!("a `{}` parameter of this shape", ty.base.as_str()),
                        );
                    }
                };
                self.model.parameters.push(Parameter {
                    name: var.name.name.clone(),
                    size,
                    constraint,
                    ..Parameter::default()
                });
                let shape = size.map_or(Shape::Scalar, Shape::Vector);
                self.syms.insert(
                    var.name.name.clone(),
                    (Ir::Ref(var.name.name.clone()), shape),
                );
            }
        }
        Ok(())
    }

    fn constraint(&mut self, ty: &SizedType) -> Result<IrConstraint, LowerError> {
        let Some(constraint) = &ty.constraint else {
            return Ok(IrConstraint::Real);
        };
        let Constraint::Range { lower, upper } = constraint else {
            return unsupported(ty.span, "`offset`/`multiplier`");
        };
        let mut bound = |e: &Option<Expr>| -> Result<Option<f64>, LowerError> {
            let Some(e) = e else { return Ok(None) };
            match self.term(e)? {
                expr::Term::Host(v, _) if v.is_scalar() => Ok(Some(v.real_at(0))),
                _ => unsupported(e.span, "a bound that is not a constant scalar"),
            }
        };
        Ok(match (bound(lower)?, bound(upper)?) {
            (Some(0.0), None) => IrConstraint::Positive,
            (Some(l), None) => IrConstraint::Lower(l),
            (None, Some(u)) => IrConstraint::Upper(u),
            (Some(0.0), Some(1.0)) => IrConstraint::UnitInterval,
            (Some(lower), Some(upper)) => IrConstraint::Interval { lower, upper },
            (None, None) => IrConstraint::Real,
        })
    }

    /// `transformed parameters` (`named`: each definition becomes a reported [`Transformed`])
    /// or `model` (locals are inlined).
    fn definitions(&mut self, block: &Block, named: bool) -> Result<(), LowerError> {
        let mut pending: BTreeMap<String, (Shape, Span)> = BTreeMap::new();
        self.definition_stmts(&block.stmts, named, &mut pending)?;
        if let Some((name, (_, span))) = pending.into_iter().next() {
            return Err(LowerError::new(
                span,
                format!("`{name}` is declared but never assigned"),
            ));
        }
        Ok(())
    }

    fn definition_stmts(
        &mut self,
        stmts: &[Stmt],
        named: bool,
        pending: &mut BTreeMap<String, (Shape, Span)>,
    ) -> Result<(), LowerError> {
        for stmt in stmts {
            match &stmt.kind {
                StmtKind::Decl { ty, vars } => {
                    if ty.constraint.is_some() {
                        return unsupported(
                            ty.span,
                            "a constraint on a transformed parameter or local",
                        );
                    }
                    let dims = self.shape_of(ty, "")?;
                    let shape = match (ty.base, &dims[..]) {
                        (BaseType::Real, []) => Shape::Scalar,
                        (BaseType::Vector, [n]) | (BaseType::Real, [n]) => Shape::Vector(*n),
                        _ => {
                            return unsupported(
                                ty.span,
                                format!("a local `{}` of this shape", ty.base.as_str()),
                            );
                        }
                    };
                    for var in vars {
                        match &var.init {
                            Some(init) => self.define(&var.name.name, shape, init, named)?,
                            None => {
                                pending.insert(var.name.name.clone(), (shape, var.name.span));
                            }
                        }
                    }
                }
                StmtKind::Assign {
                    lhs,
                    op: AssignOp::Assign,
                    rhs,
                } if lhs.indices.is_empty() => {
                    let Some((shape, _)) = pending.remove(&lhs.name.name) else {
                        return unsupported(
                            lhs.span,
                            format!("assigning `{}` again or outside its block", lhs.name.name),
                        );
                    };
                    self.define(&lhs.name.name, shape, rhs, named)?;
                }
                StmtKind::Tilde {
                    lhs,
                    distribution,
                    args,
                    truncation,
                } => {
                    if let Some(t) = truncation {
                        return unsupported(t.span, "truncation");
                    }
                    let (value, _) = self.ir(lhs)?;
                    let dist = self.dist(&distribution.name, args, distribution.span)?;
                    self.model.model.push(Statement::Sample { value, dist });
                }
                StmtKind::TargetPlus(e) => match &e.kind {
                    ExprKind::CondCall { name, args } if !args.is_empty() => {
                        if !["_lpdf", "_lupdf", "_lpmf", "_lupmf"]
                            .iter()
                            .any(|s| name.name.ends_with(s))
                        {
                            return unsupported(e.span, format!("`{}` in `target +=`", name.name));
                        }
                        let (value, _) = self.ir(&args[0])?;
                        let dist = self.dist(&name.name, &args[1..], name.span)?;
                        self.model.model.push(Statement::Sample { value, dist });
                    }
                    _ => {
                        let (value, _) = self.ir(e)?;
                        self.model.model.push(Statement::Factor { value });
                    }
                },
                StmtKind::Block(inner) => self.definition_stmts(inner, named, pending)?,
                StmtKind::Empty | StmtKind::Print(_) => {}
                _ => return unsupported(stmt.span, "this statement outside `transformed data`"),
            }
        }
        Ok(())
    }

    fn define(
        &mut self,
        name: &str,
        shape: Shape,
        value: &Expr,
        named: bool,
    ) -> Result<(), LowerError> {
        let (mut ir, found) = self.ir(value)?;
        match (shape, found) {
            (a, b) if a == b => {}
            // A scalar broadcasts to the declared vector.
            (Shape::Vector(_), Shape::Scalar) => {
                ir = Ir::Binary(
                    sampler::BinaryOp::Add,
                    Box::new(ir),
                    Box::new(self.zeros(shape)),
                );
            }
            (a, b) => {
                return Err(LowerError::new(
                    value.span,
                    format!("`{name}` is declared as {a:?} but assigned {b:?}"),
                ));
            }
        }
        if named {
            self.model.transformed.push(Transformed {
                name: name.to_owned(),
                value: ir,
                dims: Vec::new(),
            });
            self.syms
                .insert(name.to_owned(), (Ir::Ref(name.to_owned()), shape));
        } else {
            self.syms.insert(name.to_owned(), (ir, shape));
        }
        Ok(())
    }

    fn zeros(&mut self, shape: Shape) -> Ir {
        match shape {
            Shape::Vector(n) => self.data_item(None, DataValue::Vector(vec![0.0; n])),
            _ => Ir::Const(0.0),
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
