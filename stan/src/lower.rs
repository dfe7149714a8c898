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
    AssignOp, BaseType, Block, Constraint, Expr, ExprKind, Program, SizedType, Span, Stmt, StmtKind,
};
use crate::data::{self, Data};
use crate::error::render;
use crate::host::{Env, HostError};
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
    // `generated quantities` runs on the host after sampling (`crate::GeneratedQuantities`).
    // `transformed data` runs on the host, once, before anything is lowered.
    let env = crate::gq::transformed_data(program, data)?
        .into_iter()
        .map(|(name, typed)| (name, typed.value))
        .collect();
    let mut lowerer = Lowerer {
        env,
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
