//! The `parameters` block: shapes, constrained types, bounds (constants, data, or earlier
//! parameters) and affine transforms, as IR parameters.

use sampler::{Constraint as IrConstraint, Expr as Ir, Parameter};

use super::expr::describe;
use super::sym::{Sym, Val};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{BaseType, Block, Constraint, Expr, StmtKind};

/// A bound or affine argument: a constant scalar, or an IR expression.
enum Bound {
    Const(f64),
    Ir(Ir),
}

impl Lowerer {
    pub(super) fn parameters(&mut self, block: &Block) -> Result<(), LowerError> {
        for stmt in &block.stmts {
            let StmtKind::Decl { ty, vars } = &stmt.kind else {
                return Err(LowerError::new(
                    stmt.span,
                    "only declarations are allowed in `parameters`",
                ));
            };
            for var in vars {
                let name = &var.name.name;
                if let Some(init) = &var.init {
                    return Err(LowerError::new(
                        init.span,
                        "a parameter cannot have an initial value",
                    ));
                }
                if self.env.contains_key(name) || self.syms.contains_key(name) {
                    return Err(LowerError::new(
                        var.name.span,
                        format!("`{name}` is already declared"),
                    ));
                }
                let mut dims = self.dims_of(ty)?;
                // A square matrix type has one size: `cholesky_factor_corr[K]` is K x K.
                let square = matches!(
                    ty.base,
                    BaseType::CholeskyFactorCorr
                        | BaseType::CholeskyFactorCov
                        | BaseType::CorrMatrix
                        | BaseType::CovMatrix
                );
                if square && ty.sizes.len() == 1 {
                    let k = dims.last().copied().unwrap_or(0);
                    dims.push(k);
                }
                let len: usize = dims.iter().product();
                let special = match ty.base {
                    BaseType::Real | BaseType::Vector | BaseType::RowVector | BaseType::Matrix => {
                        None
                    }
                    BaseType::CholeskyFactorCorr => Some(IrConstraint::CholeskyFactorCorr),
                    BaseType::CholeskyFactorCov => Some(IrConstraint::CholeskyFactorCov),
                    BaseType::CorrMatrix => Some(IrConstraint::CorrMatrix),
                    BaseType::CovMatrix => Some(IrConstraint::CovMatrix),
                    BaseType::Ordered => Some(IrConstraint::Ordered),
                    BaseType::PositiveOrdered => Some(IrConstraint::PositiveOrdered),
                    BaseType::Simplex => Some(IrConstraint::Simplex),
                    BaseType::UnitVector => Some(IrConstraint::UnitVector),
                    BaseType::Int => {
                        return Err(LowerError::new(ty.span, "a parameter cannot be an `int`"));
                    }
                };
                // Arrays of constrained vectors are rows of one parameter; arrays of
                // constrained matrices are not supported.
                if square && !ty.array_dims.is_empty() {
                    return unsupported(
                        ty.span,
                        format!("an array of `{}` parameters", ty.base.as_str()),
                    );
                }
                if special.is_some() && ty.constraint.is_some() {
                    return Err(LowerError::new(
                        ty.span,
                        format!("a `{}` takes no bounds", ty.base.as_str()),
                    ));
                }
                if square
                    && (len == 0
                        || (ty.base != BaseType::CholeskyFactorCov && dims[0] != dims[1])
                        || dims[0] < dims[1])
                {
                    return Err(LowerError::new(
                        ty.span,
                        format!(
                            "a `{}` needs a non-empty square shape (M >= N for \
                             `cholesky_factor_cov[M, N]`), found {dims:?}",
                            ty.base.as_str()
                        ),
                    ));
                }
                if ty.base == BaseType::Simplex && len == 0 {
                    return Err(LowerError::new(
                        ty.span,
                        "a `simplex` needs at least one element",
                    ));
                }
                let mut parameter = Parameter {
                    name: name.clone(),
                    size: (!dims.is_empty()).then_some(len),
                    constraint: special.unwrap_or(IrConstraint::Real),
                    lower: None,
                    upper: None,
                    offset: None,
                    multiplier: None,
                    dims: if dims.len() >= 2 {
                        dims.clone()
                    } else {
                        Vec::new()
                    },
                };
                match &ty.constraint {
                    None => {}
                    Some(Constraint::Range { lower, upper }) => {
                        let lower = self.bound(lower.as_ref(), &dims)?;
                        let upper = self.bound(upper.as_ref(), &dims)?;
                        match (lower, upper) {
                            (None, None) => {}
                            (Some(Bound::Const(0.0)), None) => {
                                parameter.constraint = IrConstraint::Positive;
                            }
                            (Some(Bound::Const(l)), None) => {
                                parameter.constraint = IrConstraint::Lower(l);
                            }
                            (None, Some(Bound::Const(u))) => {
                                parameter.constraint = IrConstraint::Upper(u);
                            }
                            (Some(Bound::Const(l)), Some(Bound::Const(u))) => {
                                parameter.constraint = if l == 0.0 && u == 1.0 {
                                    IrConstraint::UnitInterval
                                } else {
                                    IrConstraint::Interval { lower: l, upper: u }
                                };
                            }
                            (l, u) => {
                                parameter.lower = l.map(Bound::into_ir);
                                parameter.upper = u.map(Bound::into_ir);
                            }
                        }
                    }
                    Some(Constraint::Affine { offset, multiplier }) => {
                        parameter.offset = self.bound(offset.as_ref(), &dims)?.map(Bound::into_ir);
                        parameter.multiplier =
                            self.bound(multiplier.as_ref(), &dims)?.map(Bound::into_ir);
                    }
                }
                self.model.parameters.push(parameter);
                self.syms
                    .insert(name.clone(), Sym::whole(Ir::Ref(name.clone()), dims));
            }
        }
        Ok(())
    }

    /// A bound: a scalar, or a value of the parameter's shape.
    fn bound(&mut self, e: Option<&Expr>, dims: &[usize]) -> Result<Option<Bound>, LowerError> {
        let Some(e) = e else { return Ok(None) };
        let v = self.eval(e)?;
        if !v.dims().is_empty()
            && v.dims().iter().product::<usize>() != dims.iter().product::<usize>()
        {
            return Err(LowerError::new(
                e.span,
                format!(
                    "a bound of {} for a parameter of {}",
                    describe(v.dims()),
                    describe(dims)
                ),
            ));
        }
        if let Val::Known(value, _) = &v
            && let Some(x) = value.as_real()
        {
            return Ok(Some(Bound::Const(x)));
        }
        let (ir, _) = self.whole(v, e.span)?;
        Ok(Some(Bound::Ir(ir)))
    }
}

impl Bound {
    fn into_ir(self) -> Ir {
        match self {
            Bound::Const(x) => Ir::Const(x),
            Bound::Ir(ir) => ir,
        }
    }
}
