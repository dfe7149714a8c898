//! The lowered model: a flat, straight-line program of vector instructions over a value tape.
//!
//! One [`Program`] is produced per checked model by [`crate::lower`]. Two evaluators run it:
//! the CPU evaluator in [`crate::eval`] (f64, reverse-mode gradient) and the WGSL emitter of
//! `gpu-actor`. Everything an evaluator needs is here as plain numbers:
//!
//! * the *tape*: every instruction writes one slot, a contiguous run of `len` values at
//!   `offset`; a scalar is a slot of length 1. Slots are written once, in program order.
//! * the *data* buffer: observations and constants (real values, integers stored exactly as
//!   f64) shared by all chains; and the *index* buffer: `u32` indices for `Gather`.
//! * the *list* buffer: operands of `Concat`, a [`ListRef`] run per instruction.
//! * operands broadcast: an operand of length 1 stands for a vector of any length.
//!
//! Terms of the log density that do not depend on parameters are dropped, as Stan's `~`
//! statements drop them, so `lp` is defined up to a constant. Parameter-only factors (the
//! normalising terms of a distribution with scalar parameters) are computed once per
//! instruction, not once per element.

use serde::{Deserialize, Serialize};

/// A slot of the value tape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlotId(pub u32);

/// Where a slot lives on the tape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    /// First value.
    pub offset: u32,
    /// Number of values (1 for a scalar).
    pub len: u32,
}

/// A run of the data buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataRef {
    /// First value.
    pub offset: u32,
    /// Number of values (1 for a scalar).
    pub len: u32,
}

/// A row-major matrix in the data buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixRef {
    /// First value.
    pub offset: u32,
    /// Number of rows.
    pub rows: u32,
    /// Number of columns.
    pub cols: u32,
}

/// A run of the index buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRef {
    /// First index.
    pub offset: u32,
    /// Number of indices.
    pub len: u32,
}

/// A run of the operand list buffer ([`Program::lists`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRef {
    /// First operand.
    pub offset: u32,
    /// Number of operands.
    pub len: u32,
}

/// A run of the unconstrained parameter vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThetaRef {
    /// First coordinate.
    pub offset: u32,
    /// Number of coordinates.
    pub len: u32,
}

/// An instruction input. Only slots carry gradients.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Operand {
    /// A value computed from parameters.
    Slot(SlotId),
    /// Data or a folded constant vector.
    Data(DataRef),
    /// A scalar constant.
    Const(f64),
}

/// The change of variables from the unconstrained scale, with its log-Jacobian (Stan's).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Transform {
    /// `x = u`.
    Identity,
    /// `x = lower + exp(u)`, log-Jacobian `u`.
    Lower(f64),
    /// `x = upper - exp(u)`, log-Jacobian `u`.
    Upper(f64),
    /// `x = lower + (upper - lower) logistic(u)`,
    /// log-Jacobian `log(upper - lower) + log(logistic(u)) + log(1 - logistic(u))`.
    Interval(f64, f64),
}

/// Elementwise operations with one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MapOp {
    /// `-a`
    Neg,
    /// `exp(a)`
    Exp,
    /// `ln(a)`
    Log,
    /// `ln(1 + a)`
    Log1p,
    /// `exp(a) - 1`
    Expm1,
    /// `ln(1 + exp(a))`
    Softplus,
    /// `1 / (1 + exp(-a))`
    Logistic,
    /// `sqrt(a)`
    Sqrt,
    /// `|a|`
    Abs,
    /// `ln |Gamma(a)|`
    Lgamma,
    /// `ln Phi(a)`, the standard normal CDF
    LogPhi,
    /// `0` where `a >= 0`, `-inf` where `a < 0`
    LogStep,
}

/// Elementwise operations with two arguments (scalar broadcasting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ZipOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// `a ^ b`
    Pow,
    /// `max(a, b)`; the gradient goes to the selected argument (to `a` on a tie).
    Max,
    /// `min(a, b)`; the gradient goes to the selected argument (to `a` on a tie).
    Min,
}

/// Elementwise densities: `sum_i log p(x_i | params_i)`, parameters broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DensityKind {
    /// params: mu, sigma
    Normal,
    /// params: sigma
    HalfNormal,
    /// params: rate
    Exponential,
    /// params: nu, mu, sigma
    StudentT,
    /// params: mu, sigma
    Cauchy,
    /// params: sigma
    HalfCauchy,
    /// params: mu, sigma
    LogNormal,
    /// params: shape, rate
    Gamma,
    /// params: shape, scale
    InverseGamma,
    /// params: alpha, beta
    Beta,
    /// params: lower, upper
    Uniform,
    /// params: mu, scale
    Laplace,
    /// params: logit (x is 0/1 data)
    BernoulliLogit,
    /// params: trials, logit (x is integer data)
    BinomialLogit,
    /// params: log_rate (x is integer data)
    PoissonLog,
    /// params: mu, sigma
    Logistic,
    /// params: alpha (shape), sigma (scale)
    Weibull,
    /// params: nu
    ChiSquare,
    /// params: p (x is 0/1 data)
    Bernoulli,
    /// params: trials, p (x is integer data)
    Binomial,
    /// params: rate (x is integer data)
    Poisson,
    /// params: mu, phi (x is integer data)
    NegBinomial2,
    /// params: eta (log of mu), phi (x is integer data)
    NegBinomial2Log,
}

impl DensityKind {
    /// Every density kind, for tests and tables.
    pub const ALL: [DensityKind; 23] = [
        DensityKind::Normal,
        DensityKind::HalfNormal,
        DensityKind::Exponential,
        DensityKind::StudentT,
        DensityKind::Cauchy,
        DensityKind::HalfCauchy,
        DensityKind::LogNormal,
        DensityKind::Gamma,
        DensityKind::InverseGamma,
        DensityKind::Beta,
        DensityKind::Uniform,
        DensityKind::Laplace,
        DensityKind::BernoulliLogit,
        DensityKind::BinomialLogit,
        DensityKind::PoissonLog,
        DensityKind::Logistic,
        DensityKind::Weibull,
        DensityKind::ChiSquare,
        DensityKind::Bernoulli,
        DensityKind::Binomial,
        DensityKind::Poisson,
        DensityKind::NegBinomial2,
        DensityKind::NegBinomial2Log,
    ];

    /// Number of parameters the kernel reads.
    pub fn n_params(self) -> usize {
        match self {
            DensityKind::HalfNormal
            | DensityKind::Exponential
            | DensityKind::HalfCauchy
            | DensityKind::BernoulliLogit
            | DensityKind::PoissonLog
            | DensityKind::ChiSquare
            | DensityKind::Bernoulli
            | DensityKind::Poisson => 1,
            DensityKind::StudentT => 3,
            _ => 2,
        }
    }
}

/// Index of a statement of the source model, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StatementId(pub u32);

impl StatementId {
    /// The source of a `Factor` that adds a parameter's log-Jacobian (a transform lowered
    /// to ordinary instructions), not a model statement.
    pub const JACOBIAN: StatementId = StatementId(u32::MAX);
}

/// One instruction. Each either writes its `dst` slot or adds to the log density.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Inst {
    /// `dst = transform(theta[range])`; adds the log-Jacobian to the density.
    Constrain {
        /// The change of variables.
        transform: Transform,
        /// The unconstrained coordinates.
        theta: ThetaRef,
        /// The constrained values.
        dst: SlotId,
    },
    /// `dst[i] = op(a[i])`.
    Map {
        /// The operation.
        op: MapOp,
        /// The argument.
        a: Operand,
        /// The result, of `a`'s length.
        dst: SlotId,
    },
    /// `dst[i] = op(a[i], b[i])`, a length-1 operand broadcasting.
    Zip {
        /// The operation.
        op: ZipOp,
        /// First argument.
        a: Operand,
        /// Second argument.
        b: Operand,
        /// The result, of the longer argument's length.
        dst: SlotId,
    },
    /// `dst = sum_i a[i]`.
    Sum {
        /// The summed vector.
        a: Operand,
        /// A scalar slot.
        dst: SlotId,
    },
    /// `dst[i] = sum_{j <= i} a[j]`.
    Cumsum {
        /// The summed vector.
        a: Operand,
        /// The running sums.
        dst: SlotId,
    },
    /// `dst = sum_i a[i] b[i]`.
    Dot {
        /// First vector.
        a: Operand,
        /// Second vector, of the same length.
        b: Operand,
        /// A scalar slot.
        dst: SlotId,
    },
    /// `dst = m v` for a data matrix `m`.
    Matvec {
        /// The matrix.
        m: MatrixRef,
        /// A vector of `m.cols` values.
        v: Operand,
        /// A vector of `m.rows` values.
        dst: SlotId,
    },
    /// `dst[i] = a[idx[i]]`.
    Gather {
        /// The source vector.
        a: Operand,
        /// The indices, each `< len(a)`.
        idx: IndexRef,
        /// A vector of `idx.len` values.
        dst: SlotId,
    },
    /// `lp += sum_i log p(x[i] | params[..][i])`.
    Density {
        /// The distribution.
        kind: DensityKind,
        /// The value.
        x: Operand,
        /// The parameters; the first [`DensityKind::n_params`] are read.
        params: [Operand; 3],
        /// Number of elements (the value's length).
        len: u32,
        /// The source statement.
        source: StatementId,
    },
    /// `lp += log p(x)` for a Gaussian random walk (all parameters scalar).
    RandomWalk {
        /// The walk, a vector.
        x: Operand,
        /// Step scale.
        sigma: Operand,
        /// Step mean.
        drift: Operand,
        /// Mean of `x[0]`.
        init_mu: Operand,
        /// Scale of `x[0]`.
        init_sigma: Operand,
        /// The source statement.
        source: StatementId,
    },
    /// `dst` = the operands `lists[parts]` one after another (a scalar operand gives one
    /// value, a vector its length).
    Concat {
        /// The operands, in order.
        parts: ListRef,
        /// A vector of the summed lengths.
        dst: SlotId,
    },
    /// `dst = log(sum_i exp(a[i]))`, computed with the maximum.
    LogSumExp {
        /// The vector.
        a: Operand,
        /// A scalar slot.
        dst: SlotId,
    },
    /// `lp += sum_i a[i]`.
    Factor {
        /// The added values.
        a: Operand,
        /// The source statement.
        source: StatementId,
    },
}

impl Inst {
    /// The operands it reads (a density's first [`DensityKind::n_params`] parameters).
    /// A `Concat`'s operands are in the program's list buffer: see [`Program::reads`].
    pub fn reads(&self) -> Vec<Operand> {
        match *self {
            Inst::Constrain { .. } | Inst::Concat { .. } => Vec::new(),
            Inst::Map { a, .. }
            | Inst::Sum { a, .. }
            | Inst::Cumsum { a, .. }
            | Inst::Gather { a, .. }
            | Inst::LogSumExp { a, .. }
            | Inst::Factor { a, .. } => vec![a],
            Inst::Zip { a, b, .. } | Inst::Dot { a, b, .. } => vec![a, b],
            Inst::Matvec { v, .. } => vec![v],
            Inst::Density {
                kind, x, params, ..
            } => std::iter::once(x)
                .chain(params[..kind.n_params()].iter().copied())
                .collect(),
            Inst::RandomWalk {
                x,
                sigma,
                drift,
                init_mu,
                init_sigma,
                ..
            } => vec![x, sigma, drift, init_mu, init_sigma],
        }
    }

    /// The slot it writes, if any (densities and factors add to the log density instead).
    pub fn writes(&self) -> Option<SlotId> {
        match *self {
            Inst::Constrain { dst, .. }
            | Inst::Map { dst, .. }
            | Inst::Zip { dst, .. }
            | Inst::Sum { dst, .. }
            | Inst::Cumsum { dst, .. }
            | Inst::Dot { dst, .. }
            | Inst::Matvec { dst, .. }
            | Inst::Gather { dst, .. }
            | Inst::Concat { dst, .. }
            | Inst::LogSumExp { dst, .. } => Some(dst),
            Inst::Density { .. } | Inst::RandomWalk { .. } | Inst::Factor { .. } => None,
        }
    }
}

/// A named output column: a parameter or transformed parameter element on the constrained scale.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// The parameter's name.
    pub name: String,
    /// Position in the flattened (row-major) value, 0-based; `None` for a scalar.
    pub index: Option<usize>,
    /// The value's shape when it has one (arrays, matrices); empty for a scalar or a plain
    /// vector. With two or more dims the column is named by its multi-index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims: Vec<usize>,
}

impl Column {
    /// The 0-based multi-index of the element (one entry for a vector), empty for a scalar.
    pub fn multi_index(&self) -> Vec<usize> {
        let Some(flat) = self.index else {
            return Vec::new();
        };
        if self.dims.len() < 2 {
            return vec![flat];
        }
        let mut rest = flat;
        let mut out = vec![0; self.dims.len()];
        for (k, &dim) in self.dims.iter().enumerate().rev() {
            let dim = dim.max(1);
            out[k] = rest % dim;
            rest /= dim;
        }
        out
    }

    /// The element's 1-based indices joined by `separator` (`2,1` or `2.1`), or `None` for
    /// a scalar.
    pub fn indices_1based(&self, separator: &str) -> Option<String> {
        self.index?;
        Some(
            self.multi_index()
                .iter()
                .map(|i| (i + 1).to_string())
                .collect::<Vec<_>>()
                .join(separator),
        )
    }
}

impl std::fmt::Display for Column {
    /// Stan's summary style: `z[1]` for the first element (1-based), `theta[2,1]` for an
    /// element of a matrix or 2-D array.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.indices_1based(",") {
            None => f.write_str(&self.name),
            Some(indices) => write!(f, "{}[{indices}]", self.name),
        }
    }
}

/// What one output quantity reads: a parameter or transformed parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Output {
    /// Its name.
    pub name: String,
    /// Whether it is a sampled parameter (as opposed to a transformed parameter).
    pub is_parameter: bool,
    /// Where its values are after a forward pass.
    pub value: Operand,
    /// Its length (1 for a scalar).
    pub len: u32,
    /// Whether it is a scalar (as opposed to a vector of length 1).
    pub scalar: bool,
    /// Its shape for column names (see [`Column::dims`]); empty for a scalar or vector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims: Vec<usize>,
}

/// The lowered model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Length of the unconstrained parameter vector.
    pub dim: usize,
    /// The tape layout, indexed by [`SlotId`].
    pub slots: Vec<Slot>,
    /// Total tape length.
    pub tape_len: usize,
    /// Real data and folded constants.
    pub data: Vec<f64>,
    /// Indices for `Gather`.
    pub index: Vec<u32>,
    /// Operands of `Concat` instructions.
    #[serde(default)]
    pub lists: Vec<Operand>,
    /// The instructions, in execution order.
    pub insts: Vec<Inst>,
    /// Parameters then transformed parameters, in declaration order.
    pub outputs: Vec<Output>,
}

impl Program {
    /// The tape range of a slot.
    pub fn slot(&self, id: SlotId) -> Slot {
        self.slots[id.0 as usize]
    }

    /// The operands of a list run.
    pub fn list(&self, parts: ListRef) -> &[Operand] {
        &self.lists[parts.offset as usize..(parts.offset + parts.len) as usize]
    }

    /// The operands an instruction reads, `Concat`'s list included.
    pub fn reads(&self, inst: &Inst) -> Vec<Operand> {
        match *inst {
            Inst::Concat { parts, .. } => self.list(parts).to_vec(),
            _ => inst.reads(),
        }
    }

    /// Length of an operand (1 for constants).
    pub fn len_of(&self, operand: Operand) -> usize {
        match operand {
            Operand::Slot(id) => self.slot(id).len as usize,
            Operand::Data(data) => data.len as usize,
            Operand::Const(_) => 1,
        }
    }

    /// The output columns, in order: every element of every parameter, then of every
    /// transformed parameter.
    pub fn columns(&self) -> Vec<Column> {
        self.outputs
            .iter()
            .flat_map(|output| {
                (0..output.len as usize).map(move |i| Column {
                    name: output.name.clone(),
                    index: (!output.scalar).then_some(i),
                    dims: if output.dims.len() > 1 {
                        output.dims.clone()
                    } else {
                        Vec::new()
                    },
                })
            })
            .collect()
    }

    /// Number of output columns that are parameters (they come first).
    pub fn n_parameter_columns(&self) -> usize {
        self.outputs
            .iter()
            .filter(|output| output.is_parameter)
            .map(|output| output.len as usize)
            .sum()
    }
}
