//! Lowering of parameters: each parameter's change of variables from the unconstrained scale,
//! in declaration order, so that a bound may use earlier parameters.
//!
//! Constant elementwise transforms (`positive`, constant bounds) are one `Constrain`. The others
//! (expression bounds, `offset`/`multiplier`, `ordered`, `positive_ordered`, `simplex`,
//! `unit_vector`) are a `Constrain` with the identity transform followed by ordinary
//! instructions, with the log-Jacobian added by a `Factor` ([`StatementId::JACOBIAN`]): an
//! evaluator needs nothing new for them. The transforms and Jacobians are Stan's (Stan
//! Reference Manual, "Constraint transforms"); the simplex is the stick-breaking transform of
//! Stan 2.35 and earlier.

use super::{Lowerer, Shape, Symbol, Value, shape_error};
use crate::ir::{Constraint, Expr, Parameter};
use crate::program::{
    Inst, MapOp, Operand, Output, SlotId, StatementId, ThetaRef, Transform, ZipOp,
};
use crate::validate::{ModelError, Num, Problem};

impl Lowerer<'_> {
    /// Lowers every parameter, in order, and records its output.
    pub(super) fn parameters(&mut self) -> Result<(), ModelError> {
        let mut offset = 0usize;
        for (i, param) in self.model.parameters.iter().enumerate() {
            let path = format!("parameters[{i}]");
            let len = param.size.unwrap_or(1);
            let shape = match param.size {
                None => Shape::Scalar,
                Some(n) => Shape::Vector(n),
            };
            let n_unconstrained = param.constraint.unconstrained_len(len);
            let theta = ThetaRef {
                offset: offset as u32,
                len: n_unconstrained as u32,
            };
            let value = self.parameter(&path, param, shape, theta)?;
            offset += n_unconstrained;
            self.symbols
                .insert(param.name.clone(), Symbol::Value(value));
            self.program.outputs.push(Output {
                name: param.name.clone(),
                is_parameter: true,
                value: value.operand,
                len: len as u32,
                scalar: param.size.is_none(),
                dims: param.dims.clone(),
            });
        }
        self.program.dim = offset;
        Ok(())
    }

    fn parameter(
        &mut self,
        path: &str,
        param: &Parameter,
        shape: Shape,
        theta: ThetaRef,
    ) -> Result<Value, ModelError> {
        // Bounds and affine arguments first: they may read earlier parameters.
        let bound = |this: &mut Self, expr: &Option<Expr>, name: &str| {
            expr.as_ref()
                .map(|expr| this.transform_arg(&format!("{path}.{name}"), expr, shape))
                .transpose()
        };
        let lower = bound(self, &param.lower, "lower")?;
        let upper = bound(self, &param.upper, "upper")?;
        let offset = bound(self, &param.offset, "offset")?;
        let multiplier = bound(self, &param.multiplier, "multiplier")?;
        if let (Some(lower), Some(upper)) = (&lower, &upper) {
            self.check_bounds_order(&format!("{path}.lower"), lower, upper)?;
        }
        if let Some(multiplier) = &multiplier
            && multiplier.is_constant()
            && let Some(&bad) = self.values(multiplier).iter().find(|m| **m <= 0.0)
        {
            return Err(ModelError::new(
                format!("{path}.multiplier"),
                Problem::ArgumentDomain {
                    arg: "multiplier".into(),
                    requirement: "> 0",
                    value: bad,
                },
            ));
        }

        // A scalar constant bound is a transform of its own; anything else is built below.
        let scalar_const = |value: &Option<Value>| match value {
            Some(Value {
                operand: Operand::Const(c),
                ..
            }) => Some(*c),
            _ => None,
        };
        let (lower_const, upper_const) = (scalar_const(&lower), scalar_const(&upper));
        let transform = match param.constraint {
            Constraint::Real => match (&lower, &upper, lower_const, upper_const) {
                (Some(_), None, Some(l), _) => Transform::Lower(l),
                (None, Some(_), _, Some(u)) => Transform::Upper(u),
                (Some(_), Some(_), Some(l), Some(u)) => Transform::Interval(l, u),
                _ => Transform::Identity,
            },
            Constraint::Positive => Transform::Lower(0.0),
            Constraint::UnitInterval => Transform::Interval(0.0, 1.0),
            Constraint::Lower(lower) => Transform::Lower(lower),
            Constraint::Upper(upper) => Transform::Upper(upper),
            Constraint::Interval { lower, upper } => Transform::Interval(lower, upper),
            Constraint::Ordered
            | Constraint::PositiveOrdered
            | Constraint::Simplex
            | Constraint::UnitVector => Transform::Identity,
        };

        if theta.len == 0 {
            // A simplex of one element: the constant 1, no coordinates.
            let data = self.push_data(path, &[1.0])?;
            return Ok(Value {
                operand: Operand::Data(data),
                shape,
                integer: false,
            });
        }
        let dst = self.alloc(path, theta.len as usize)?;
        self.program.insts.push(Inst::Constrain {
            transform,
            theta,
            dst,
        });
        let u = Value {
            operand: Operand::Slot(dst),
            shape: match param.constraint {
                Constraint::Simplex => Shape::Vector(theta.len as usize),
                _ => shape,
            },
            integer: false,
        };
        match param.constraint {
            Constraint::Ordered => self.ordered(path, u),
            Constraint::PositiveOrdered => self.positive_ordered(path, u),
            Constraint::Simplex => self.simplex(path, u),
            Constraint::UnitVector => self.unit_vector(path, u),
            Constraint::Real if transform == Transform::Identity => {
                match (lower, upper, offset, multiplier) {
                    (Some(lower), None, ..) => self.lower_bounded(path, u, lower),
                    (None, Some(upper), ..) => self.upper_bounded(path, u, upper),
                    (Some(lower), Some(upper), ..) => self.interval(path, u, lower, upper),
                    (None, None, offset, multiplier) => self.affine(path, u, offset, multiplier),
                }
            }
            _ => Ok(u),
        }
    }

    /// A bound or affine argument: a scalar, or a vector of the parameter's length.
    fn transform_arg(
        &mut self,
        path: &str,
        expr: &Expr,
        shape: Shape,
    ) -> Result<Value, ModelError> {
        let value = self.expr(expr, path)?;
        match (value.shape, shape) {
            (Shape::Scalar, _) => Ok(value),
            (Shape::Vector(n), Shape::Vector(m)) if n == m => Ok(value),
            (found, _) => Err(shape_error(
                path,
                format!(
                    "is {}, but the parameter is {}; it must be a scalar or have the parameter's shape",
                    found.describe(),
                    shape.describe()
                ),
            )),
        }
    }

    fn check_bounds_order(
        &self,
        path: &str,
        lower: &Value,
        upper: &Value,
    ) -> Result<(), ModelError> {
        if !(lower.is_constant() && upper.is_constant()) {
            return Ok(()); // Checked by the density at run time: a point outside is a divergence.
        }
        let (lo, hi) = (self.values(lower), self.values(upper));
        for i in 0..lo.len().max(hi.len()) {
            let (l, h) = (lo[i.min(lo.len() - 1)], hi[i.min(hi.len() - 1)]);
            if l >= h {
                return Err(ModelError::new(
                    path,
                    Problem::Invalid(format!(
                        "lower bound {} must be below upper bound {} (element {i})",
                        Num(l),
                        Num(h)
                    )),
                ));
            }
        }
        Ok(())
    }

    /// `x = lower + exp(u)`, log-Jacobian `sum u`.
    fn lower_bounded(&mut self, path: &str, u: Value, lower: Value) -> Result<Value, ModelError> {
        let e = self.map_op(path, MapOp::Exp, u)?;
        let x = self.zip_op(path, ZipOp::Add, lower, e)?;
        self.jacobian(u);
        Ok(x)
    }

    /// `x = upper - exp(u)`, log-Jacobian `sum u`.
    fn upper_bounded(&mut self, path: &str, u: Value, upper: Value) -> Result<Value, ModelError> {
        let e = self.map_op(path, MapOp::Exp, u)?;
        let x = self.zip_op(path, ZipOp::Sub, upper, e)?;
        self.jacobian(u);
        Ok(x)
    }

    /// `x = lower + (upper - lower) logistic(u)`, log-Jacobian
    /// `sum log(upper - lower) + log logistic(u) + log(1 - logistic(u))`, the last two being
    /// `u - 2 softplus(u)`.
    fn interval(
        &mut self,
        path: &str,
        u: Value,
        lower: Value,
        upper: Value,
    ) -> Result<Value, ModelError> {
        let width = self.zip_op(path, ZipOp::Sub, upper, lower)?;
        let s = self.map_op(path, MapOp::Logistic, u)?;
        let scaled = self.zip_op(path, ZipOp::Mul, width, s)?;
        let x = self.zip_op(path, ZipOp::Add, lower, scaled)?;
        let log_width = self.map_op(path, MapOp::Log, width)?;
        self.jacobian_broadcast(path, log_width, u.shape)?;
        let softplus = self.map_op(path, MapOp::Softplus, u)?;
        let twice = self.zip_op(path, ZipOp::Mul, softplus, constant(2.0))?;
        let log_density = self.zip_op(path, ZipOp::Sub, u, twice)?;
        self.jacobian(log_density);
        Ok(x)
    }

    /// `x = offset + multiplier u`, log-Jacobian `sum log |multiplier|`.
    fn affine(
        &mut self,
        path: &str,
        u: Value,
        offset: Option<Value>,
        multiplier: Option<Value>,
    ) -> Result<Value, ModelError> {
        let mut x = u;
        if let Some(multiplier) = multiplier {
            x = self.zip_op(path, ZipOp::Mul, multiplier, x)?;
            let magnitude = self.map_op(path, MapOp::Abs, multiplier)?;
            let log_multiplier = self.map_op(path, MapOp::Log, magnitude)?;
            self.jacobian_broadcast(path, log_multiplier, u.shape)?;
        }
        if let Some(offset) = offset {
            x = self.zip_op(path, ZipOp::Add, offset, x)?;
        }
        Ok(x)
    }

    /// `x_1 = u_1`, `x_k = x_{k-1} + exp(u_k)`; log-Jacobian `sum_{k >= 2} u_k`.
    fn ordered(&mut self, path: &str, u: Value) -> Result<Value, ModelError> {
        let Shape::Vector(n) = u.shape else {
            return Ok(u);
        };
        if n == 1 {
            return Ok(u);
        }
        let first = self.take(u, 0, 1, Shape::Vector(1), path)?;
        let rest = self.take(u, 1, n - 1, Shape::Vector(n - 1), path)?;
        let steps = self.map_op(path, MapOp::Exp, rest)?;
        let joined = self.concat(&[(first, path.to_owned()), (steps, path.to_owned())], path)?;
        let x = self.cumsum(path, joined)?;
        self.jacobian(rest);
        Ok(x)
    }

    /// `x_k = sum_{j <= k} exp(u_j)`; log-Jacobian `sum u`.
    fn positive_ordered(&mut self, path: &str, u: Value) -> Result<Value, ModelError> {
        let steps = self.map_op(path, MapOp::Exp, u)?;
        let x = self.cumsum(path, steps)?;
        self.jacobian(u);
        Ok(x)
    }

    /// `x = u / |u|`; the density gains `-u.u / 2` (Stan's, which makes `u` standard normal).
    fn unit_vector(&mut self, path: &str, u: Value) -> Result<Value, ModelError> {
        let (a, b) = (u.operand, u.operand);
        let squared = self.emit(
            path,
            Shape::Scalar,
            false,
            false,
            Box::new(move |dst| Inst::Dot { a, b, dst }),
        )?;
        let norm = self.map_op(path, MapOp::Sqrt, squared)?;
        let x = self.zip_op(path, ZipOp::Div, u, norm)?;
        let term = self.zip_op(path, ZipOp::Mul, squared, constant(-0.5))?;
        self.jacobian(term);
        Ok(x)
    }

    /// Stan's stick-breaking simplex (Stan <= 2.35) over the K-1 coordinates `u`:
    /// `z_k = logistic(u_k - log(K - k))` (1-based k), `x_k = (1 - sum_{j<k} x_j) z_k`,
    /// `x_K` the rest. With `a = u - log(K - k)`: `log z_k = -softplus(-a_k)`,
    /// `log(1 - z_k) = -softplus(a_k)`, and the stick left before k is
    /// `exp(-sum_{j<k} softplus(a_j))`, so every `log x_k` is a sum of softplus terms. The
    /// log-Jacobian `sum_{k<K} log z_k + log(1 - z_k) + log(stick before k)` equals
    /// `sum_{k<=K} log x_k`.
    fn simplex(&mut self, path: &str, u: Value) -> Result<Value, ModelError> {
        let Shape::Vector(n) = u.shape else {
            return Ok(u);
        };
        let k_total = n + 1;
        let shifts: Vec<f64> = (1..=n).map(|k| ((k_total - k) as f64).ln()).collect();
        let shifts = Value {
            operand: Operand::Data(self.push_data(path, &shifts)?),
            shape: Shape::Vector(n),
            integer: false,
        };
        let a = self.zip_op(path, ZipOp::Sub, u, shifts)?;
        let log_one_minus_z = self.map_op(path, MapOp::Softplus, a)?; // negated
        let minus_a = self.map_op(path, MapOp::Neg, a)?;
        let log_z = self.map_op(path, MapOp::Softplus, minus_a)?; // negated
        let stick_used = self.cumsum(path, log_one_minus_z)?;
        let zero = (constant(0.0), path.to_owned());
        let before = self.concat(&[zero.clone(), (stick_used, path.to_owned())], path)?;
        let own = self.concat(&[(log_z, path.to_owned()), zero], path)?;
        let negated = self.zip_op(path, ZipOp::Add, before, own)?;
        let log_x = self.map_op(path, MapOp::Neg, negated)?;
        let x = self.map_op(path, MapOp::Exp, log_x)?;
        self.jacobian(log_x);
        Ok(x)
    }

    fn map_op(&mut self, path: &str, op: MapOp, a: Value) -> Result<Value, ModelError> {
        let operand = a.operand;
        self.emit(
            path,
            a.shape,
            false,
            a.is_constant(),
            Box::new(move |dst| Inst::Map {
                op,
                a: operand,
                dst,
            }),
        )
    }

    /// An elementwise operation of a scalar or vector with one of the same shape or a scalar.
    fn zip_op(&mut self, path: &str, op: ZipOp, a: Value, b: Value) -> Result<Value, ModelError> {
        let shape = match (a.shape, b.shape) {
            (Shape::Scalar, other) | (other, Shape::Scalar) => other,
            (x, y) if x == y => x,
            (x, y) => {
                return Err(shape_error(
                    path,
                    format!("shapes {} and {} do not fit", x.describe(), y.describe()),
                ));
            }
        };
        let constant = a.is_constant() && b.is_constant();
        let (a, b) = (a.operand, b.operand);
        self.emit(
            path,
            shape,
            false,
            constant,
            Box::new(move |dst| Inst::Zip { op, a, b, dst }),
        )
    }

    fn cumsum(&mut self, path: &str, a: Value) -> Result<Value, ModelError> {
        let operand = a.operand;
        self.emit(
            path,
            a.shape,
            false,
            a.is_constant(),
            Box::new(move |dst: SlotId| Inst::Cumsum { a: operand, dst }),
        )
    }

    /// Adds `sum(term)` to the log density; a constant term is dropped (as constant terms of
    /// statements are).
    fn jacobian(&mut self, term: Value) {
        if !term.is_constant() {
            self.program.insts.push(Inst::Factor {
                a: term.operand,
                source: StatementId::JACOBIAN,
            });
        }
    }

    /// Adds a per-element term that may be a scalar standing for every element of `shape`.
    fn jacobian_broadcast(
        &mut self,
        path: &str,
        term: Value,
        shape: Shape,
    ) -> Result<(), ModelError> {
        let term = match (term.shape, shape.len()) {
            (Shape::Scalar, n) if n > 1 => {
                self.zip_op(path, ZipOp::Mul, term, constant(n as f64))?
            }
            _ => term,
        };
        self.jacobian(term);
        Ok(())
    }
}

/// The elementwise constraint a parameter's values satisfy, for the support warnings of
/// [`super::Lowerer`]; `None` when a bound is an expression (nothing is known before run time).
pub(super) fn support_constraint(param: &Parameter) -> Option<Constraint> {
    let constant = |bound: &Option<Expr>| match bound {
        None => Some(None),
        Some(Expr::Const(c)) => Some(Some(*c)),
        Some(_) => None,
    };
    Some(match param.constraint {
        Constraint::Real => match (constant(&param.lower)?, constant(&param.upper)?) {
            (Some(lower), Some(upper)) => Constraint::Interval { lower, upper },
            (Some(lower), None) => Constraint::Lower(lower),
            (None, Some(upper)) => Constraint::Upper(upper),
            (None, None) => Constraint::Real,
        },
        Constraint::PositiveOrdered => Constraint::Positive,
        Constraint::Simplex => Constraint::UnitInterval,
        other => other,
    })
}

fn constant(value: f64) -> Value {
    Value {
        operand: Operand::Const(value),
        shape: Shape::Scalar,
        integer: false,
    }
}

#[cfg(test)]
mod tests;
