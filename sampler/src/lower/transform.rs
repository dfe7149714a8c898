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
use crate::model_error::{ModelError, Num, Problem};
use crate::program::{
    IndexRef, Inst, MapOp, Operand, Output, SlotId, StatementId, ThetaRef, Transform, ZipOp,
};

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
            let n_unconstrained = param.constraint.unconstrained_len(len, &param.dims);
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
            | Constraint::UnitVector
            | Constraint::CholeskyFactorCorr
            | Constraint::CholeskyFactorCov
            | Constraint::CorrMatrix
            | Constraint::CovMatrix => Transform::Identity,
        };

        if theta.len == 0 {
            // Simplexes of one element: the constant 1, no coordinates.
            let data = self.push_data(path, &vec![1.0; shape.len()])?;
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
                c if c.is_matrix_transform() => Shape::Vector(theta.len as usize),
                _ => shape,
            },
            integer: false,
        };
        if let Some((rows, n)) = rows_of(param) {
            // An array of constrained vectors: each row (the last dimension) on its own.
            let per_row = param.constraint.unconstrained_len(n, &[]);
            let mut parts = Vec::with_capacity(rows);
            for r in 0..rows {
                let u_row = self.take(u, r * per_row, per_row, Shape::Vector(per_row), path)?;
                let x_row = match param.constraint {
                    Constraint::Ordered => self.ordered(path, u_row)?,
                    Constraint::PositiveOrdered => self.positive_ordered(path, u_row)?,
                    Constraint::Simplex => self.simplex(path, u_row)?,
                    _ => self.unit_vector(path, u_row)?,
                };
                parts.push((x_row, path.to_owned()));
            }
            return self.concat(&parts, path);
        }
        match param.constraint {
            Constraint::Ordered => self.ordered(path, u),
            Constraint::PositiveOrdered => self.positive_ordered(path, u),
            Constraint::Simplex => self.simplex(path, u),
            Constraint::UnitVector => self.unit_vector(path, u),
            Constraint::CholeskyFactorCorr => {
                let (x, _) = self.cholesky_corr(path, u, matrix_side(param), true)?;
                Ok(x)
            }
            Constraint::CholeskyFactorCov => {
                let (m, n) = matrix_shape(param);
                self.cholesky_cov(path, u, m, n, false)
            }
            Constraint::CorrMatrix => self.corr_matrix(path, u, matrix_side(param)),
            Constraint::CovMatrix => {
                let k = matrix_side(param);
                let l = self.cholesky_cov(path, u, k, k, true)?;
                self.lower_self_transpose(path, l, k, false)
            }
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

    /// Canonical partial correlations `z = tanh(u) = 2 logistic(2u) - 1` and
    /// `log(1 - z^2) = 2 log 2 - softplus(2u) - softplus(-2u)` (stable for large `|u|`).
    fn cpcs(&mut self, path: &str, u: Value) -> Result<(Value, Value), ModelError> {
        let two_u = self.zip_op(path, ZipOp::Mul, u, constant(2.0))?;
        let s = self.map_op(path, MapOp::Logistic, two_u)?;
        let twice = self.zip_op(path, ZipOp::Mul, s, constant(2.0))?;
        let z = self.zip_op(path, ZipOp::Sub, twice, constant(1.0))?;
        let plus = self.map_op(path, MapOp::Softplus, two_u)?;
        let minus_two_u = self.map_op(path, MapOp::Neg, two_u)?;
        let minus = self.map_op(path, MapOp::Softplus, minus_two_u)?;
        let sum = self.zip_op(path, ZipOp::Add, plus, minus)?;
        let w = self.zip_op(
            path,
            ZipOp::Sub,
            constant(2.0 * std::f64::consts::LN_2),
            sum,
        )?;
        Ok((z, w))
    }

    /// Stan's `cholesky_corr_constrain` over K(K-1)/2 coordinates `u`, row by row: with
    /// `z = tanh(u)`, `L_11 = 1`, `L_i1 = z_i1`, `L_ij = z_ij sqrt(1 - sum_{k<j} L_ik^2)`,
    /// `L_ii = sqrt(1 - sum_{k<i} L_ik^2)`. Since `1 - sum_{k<j} L_ik^2 =
    /// prod_{k<j} (1 - z_ik^2)`, every square root is `exp(cumsum(log(1 - z^2)) / 2)`. The
    /// log-Jacobian (with `jacobian`) is `sum log(1 - z^2) + sum_{i, 2<=j<i} log(1 -
    /// sum_{k<j} L_ik^2) / 2`; `w = log(1 - z^2)` is returned for other Jacobians.
    fn cholesky_corr(
        &mut self,
        path: &str,
        u: Value,
        k: usize,
        jacobian: bool,
    ) -> Result<(Value, Value), ModelError> {
        let (z, w) = self.cpcs(path, u)?;
        if jacobian {
            self.jacobian(w);
        }
        let own = |v: Value| (v, path.to_owned());
        let mut parts = vec![own(constant(1.0))];
        if k > 1 {
            parts.push(own(self.zeros(path, k - 1)?));
        }
        let mut pos = 0;
        for i in 1..k {
            let zi = self.take(z, pos, i, Shape::Vector(i), path)?;
            let wi = self.take(w, pos, i, Shape::Vector(i), path)?;
            let sums = self.cumsum(path, wi)?;
            let first = self.take(zi, 0, 1, Shape::Scalar, path)?;
            parts.push(own(first));
            if i > 1 {
                let before = self.take(sums, 0, i - 1, Shape::Vector(i - 1), path)?;
                let half = self.zip_op(path, ZipOp::Mul, before, constant(0.5))?;
                if jacobian {
                    self.jacobian(half);
                }
                let scale = self.map_op(path, MapOp::Exp, half)?;
                let rest = self.take(zi, 1, i - 1, Shape::Vector(i - 1), path)?;
                parts.push(own(self.zip_op(path, ZipOp::Mul, rest, scale)?));
            }
            let total = self.take(sums, i - 1, 1, Shape::Scalar, path)?;
            let half_total = self.zip_op(path, ZipOp::Mul, total, constant(0.5))?;
            parts.push(own(self.map_op(path, MapOp::Exp, half_total)?));
            if i + 1 < k {
                parts.push(own(self.zeros(path, k - 1 - i)?));
            }
            pos += i;
        }
        Ok((self.concat(&parts, path)?, w))
    }

    /// Stan's `corr_matrix_constrain`: canonical partial correlations column by column
    /// (`read_corr_L`), which give the same factor as [`Self::cholesky_corr`] with the
    /// coordinates reordered, then `L L^T`. Log-Jacobian: `sum log(1 - z^2) (1 + (K - j - 2)
    /// / 2)` over the correlations of column `j` (0-based).
    fn corr_matrix(&mut self, path: &str, u: Value, k: usize) -> Result<Value, ModelError> {
        // Column-major position of each row-major strictly-lower element.
        let mut column_major = vec![0usize; k * k];
        let mut pos = 0;
        for j in 0..k {
            for i in j + 1..k {
                column_major[i * k + j] = pos;
                pos += 1;
            }
        }
        let mut order = Vec::with_capacity(pos);
        let mut weights = Vec::with_capacity(pos);
        for i in 1..k {
            for j in 0..i {
                order.push(column_major[i * k + j]);
                weights.push(1.0 + 0.5 * (k as f64 - j as f64 - 2.0));
            }
        }
        let n = order.len();
        let u = self.gather(path, u, &order, Shape::Vector(n))?;
        let (l, w) = self.cholesky_corr(path, u, k, false)?;
        let weights = Value {
            operand: Operand::Data(self.push_data(path, &weights)?),
            shape: Shape::Vector(n),
            integer: false,
        };
        let weighted = self.zip_op(path, ZipOp::Mul, w, weights)?;
        self.jacobian(weighted);
        self.lower_self_transpose(path, l, k, true)
    }

    /// Stan's `cholesky_factor_constrain` over the coordinates `u`, row by row: the strictly
    /// lower elements as they are, the diagonal `exp(u)`, zeros above; rows past the N-th are
    /// full. Log-Jacobian `sum u_diag`; with `cov`, Stan's `cov_matrix_constrain` Jacobian
    /// for `L L^T` instead, `sum_k (K - k + 1) u_diag_k` (0-based k; its constant
    /// `K log 2` is left out as constants are).
    fn cholesky_cov(
        &mut self,
        path: &str,
        u: Value,
        m: usize,
        n: usize,
        cov: bool,
    ) -> Result<Value, ModelError> {
        let Shape::Vector(len) = u.shape else {
            return Ok(u);
        };
        // Source: u, then exp of the diagonal, then 0; each output element picks from it.
        let mut diag = Vec::with_capacity(n);
        let mut picks = Vec::with_capacity(m * n);
        let mut pos = 0;
        for i in 0..m {
            for j in 0..n {
                if i < n && j == i {
                    picks.push(len + diag.len());
                    diag.push(pos);
                    pos += 1;
                } else if j < i || i >= n {
                    picks.push(pos);
                    pos += 1;
                } else {
                    picks.push(len + n);
                }
            }
        }
        let diag_u = self.gather(path, u, &diag, Shape::Vector(n))?;
        if cov {
            let weights: Vec<f64> = (0..n).map(|k| (n - k + 1) as f64).collect();
            let weights = Value {
                operand: Operand::Data(self.push_data(path, &weights)?),
                shape: Shape::Vector(n),
                integer: false,
            };
            let weighted = self.zip_op(path, ZipOp::Mul, diag_u, weights)?;
            self.jacobian(weighted);
        } else {
            self.jacobian(diag_u);
        }
        let diag_x = self.map_op(path, MapOp::Exp, diag_u)?;
        let source = self.concat(
            &[
                (u, path.to_owned()),
                (diag_x, path.to_owned()),
                (constant(0.0), path.to_owned()),
            ],
            path,
        )?;
        self.gather(path, source, &picks, Shape::Vector(m * n))
    }

    /// `L L^T` of a lower-triangular K x K `l` (row-major): one dot product of row prefixes
    /// per element of the lower triangle, mirrored; with `unit_diagonal` the diagonal is the
    /// constant 1 (a correlation matrix).
    fn lower_self_transpose(
        &mut self,
        path: &str,
        l: Value,
        k: usize,
        unit_diagonal: bool,
    ) -> Result<Value, ModelError> {
        let mut lower: Vec<Value> = Vec::with_capacity(k * (k + 1) / 2);
        for i in 0..k {
            for j in 0..=i {
                if i == j && unit_diagonal {
                    lower.push(constant(1.0));
                    continue;
                }
                let a = self.take(l, i * k, j + 1, Shape::Vector(j + 1), path)?;
                let b = self.take(l, j * k, j + 1, Shape::Vector(j + 1), path)?;
                let (a, b) = (a.operand, b.operand);
                lower.push(self.emit(
                    path,
                    Shape::Scalar,
                    false,
                    false,
                    Box::new(move |dst| Inst::Dot { a, b, dst }),
                )?);
            }
        }
        let at = |i: usize, j: usize| {
            let (i, j) = if j > i { (j, i) } else { (i, j) };
            lower[i * (i + 1) / 2 + j]
        };
        let mut parts = Vec::with_capacity(k * k);
        for i in 0..k {
            for j in 0..k {
                parts.push((at(i, j), path.to_owned()));
            }
        }
        self.concat(&parts, path)
    }

    /// `n` zeros.
    fn zeros(&mut self, path: &str, n: usize) -> Result<Value, ModelError> {
        if n == 1 {
            return Ok(constant(0.0));
        }
        Ok(Value {
            operand: Operand::Data(self.push_data(path, &vec![0.0; n])?),
            shape: Shape::Vector(n),
            integer: false,
        })
    }

    /// `value[positions]` as one `Gather`.
    fn gather(
        &mut self,
        path: &str,
        value: Value,
        positions: &[usize],
        shape: Shape,
    ) -> Result<Value, ModelError> {
        let index_len = self.program.index.len();
        let idx = IndexRef {
            offset: index_len as u32,
            len: positions.len() as u32,
        };
        self.program
            .index
            .extend(positions.iter().map(|&i| i as u32));
        let a = value.operand;
        let result = self.emit(
            path,
            shape,
            value.integer,
            value.is_constant(),
            Box::new(move |dst| Inst::Gather { a, idx, dst }),
        );
        if value.is_constant() {
            self.program.index.truncate(index_len);
        }
        result
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

/// `(rows, n)` of an array of constrained vectors (a vector constraint with two or more
/// `dims`; the last is the vector's length), `None` otherwise.
fn rows_of(param: &Parameter) -> Option<(usize, usize)> {
    let (&n, outer) = param.dims.split_last()?;
    (param.constraint.is_vector_transform() && !outer.is_empty())
        .then(|| (outer.iter().product(), n))
}

/// K of a K x K matrix parameter.
fn matrix_side(param: &Parameter) -> usize {
    matrix_shape(param).1
}

/// `[M, N]` of a matrix parameter (checked by validation).
fn matrix_shape(param: &Parameter) -> (usize, usize) {
    match param.dims[..] {
        [m, n] => (m, n),
        _ => (param.size.unwrap_or(1), 1),
    }
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
