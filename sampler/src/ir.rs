//! The model IR: plain serde data that describes a Bayesian model, observations included.
//!
//! A [`Model`] is what crosses process and machine boundaries (as JSON or rmp-serde bytes): it
//! holds no closures and nothing process-local. It is checked once by
//! [`crate::CheckedModel::new`] into a [`crate::CheckedModel`], which the rest of the code trusts.
//!
//! The JSON form reads like the model (see `models/*.json`):
//!
//! ```json
//! { "ir_version": 1, "name": "simple",
//!   "data": { "y": { "vector": [1.2, 0.4] } },
//!   "parameters": [ { "name": "mu" }, { "name": "sigma", "constraint": "positive" } ],
//!   "model": [
//!     { "sample": { "value": "mu", "dist": { "normal": { "mu": 0, "sigma": 10 } } } },
//!     { "sample": { "value": "sigma", "dist": { "exponential": { "rate": 1 } } } },
//!     { "sample": { "value": "y", "dist": { "normal": { "mu": "mu", "sigma": "sigma" } } } } ] }
//! ```
//!
//! In an expression a number is a constant, a string names a data item, parameter or
//! transformed parameter, and a one-key object applies an operation: `{"exp": "x"}`,
//! `{"add": ["a", "b"]}`. Version 2 adds `{"concat": [e1, e2]}`, `{"elem": [e, k]}` and
//! `{"slice": [e, start, len]}` (0-based constant positions), expression bounds and affine
//! transforms on parameters (`"lower"`, `"upper"`, `"offset"`, `"multiplier"`), `"dims"`
//! for array and matrix shapes, and the constraints `ordered`, `positive_ordered`, `simplex`,
//! `unit_vector`, `cholesky_factor_corr`, `cholesky_factor_cov`, `corr_matrix` and
//! `cov_matrix` (the last four on parameters with `dims` `[M, N]`). Version 1 files load
//! unchanged.

mod expr_serde;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The IR version this build writes; it reads [`MIN_IR_VERSION`]`..=IR_VERSION`.
pub const IR_VERSION: u32 = 2;

/// The oldest IR version this build reads.
pub const MIN_IR_VERSION: u32 = 1;

/// A whole model: data, parameters, deterministic quantities and log-density statements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Between [`MIN_IR_VERSION`] and [`IR_VERSION`].
    pub ir_version: u32,
    /// A human-readable name, used in reports and output files.
    pub name: String,
    /// Named constants and observations.
    #[serde(default, deserialize_with = "expr_serde::map_without_duplicates")]
    pub data: BTreeMap<String, DataValue>,
    /// The sampled quantities, in the order of the unconstrained vector.
    pub parameters: Vec<Parameter>,
    /// Named deterministic functions of parameters and data; reported with every draw.
    #[serde(default)]
    pub transformed: Vec<Transformed>,
    /// The log-density statements: priors and likelihoods.
    pub model: Vec<Statement>,
}

/// A data item. Integers are kept apart from reals so that index vectors and counts are exact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataValue {
    /// A real scalar.
    Real(f64),
    /// An integer scalar.
    Int(i64),
    /// A real vector.
    Vector(Vec<f64>),
    /// An integer vector (counts, 0/1 outcomes, group indices).
    IntVector(Vec<i64>),
    /// A real matrix, as a list of rows.
    Matrix(Vec<Vec<f64>>),
}

/// A sampled parameter: a scalar or a vector, with a support constraint.
///
/// `lower`/`upper` (expression bounds) and `offset`/`multiplier` (Stan's affine transform)
/// are expressions of data and of *earlier* parameters: scalars, or vectors of the
/// parameter's length. Bounds go only with `constraint: real`; bounds and affine not together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameter {
    /// Its name, unique among data, parameters and transformed parameters.
    pub name: String,
    /// `None` for a scalar, `Some(n)` for a vector of length `n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// The support; sampling happens on the unconstrained scale through a transform.
    #[serde(default)]
    pub constraint: Constraint,
    /// A lower bound: `x = lower + exp(u)` (with `upper` too, a scaled logistic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower: Option<Expr>,
    /// An upper bound: `x = upper - exp(u)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper: Option<Expr>,
    /// Affine offset: `x = offset + multiplier * u` (0 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<Expr>,
    /// Affine multiplier, > 0 (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<Expr>,
    /// The value's shape for output names (`theta[2,1]`), flattened row-major; empty for a
    /// plain scalar or vector. The product equals the length.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims: Vec<usize>,
}

/// The support of a parameter. Each maps to a transform with a log-Jacobian (Stan's transforms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Constraint {
    /// The whole real line; identity transform.
    #[default]
    Real,
    /// `(0, inf)`; `x = exp(u)`.
    Positive,
    /// `(0, 1)`; `x = logistic(u)`.
    UnitInterval,
    /// `(lower, inf)`; `x = lower + exp(u)`.
    Lower(f64),
    /// `(-inf, upper)`; `x = upper - exp(u)`.
    Upper(f64),
    /// `(lower, upper)`; `x = lower + (upper - lower) logistic(u)`.
    Interval {
        /// The lower bound.
        lower: f64,
        /// The upper bound.
        upper: f64,
    },
    /// An increasing vector: `x_1 = u_1`, `x_k = x_{k-1} + exp(u_k)`.
    Ordered,
    /// A positive increasing vector: `x_k = x_{k-1} + exp(u_k)` from `x_0 = 0`.
    PositiveOrdered,
    /// A vector of `size` K non-negative values summing to 1, from K-1 unconstrained
    /// coordinates by Stan's stick-breaking transform (Stan <= 2.35).
    Simplex,
    /// A vector of unit Euclidean length: `x = u / |u|`, with the density term `-u.u/2`.
    UnitVector,
    /// The lower Cholesky factor of a K x K correlation matrix (`dims` `[K, K]`), from
    /// K(K-1)/2 canonical partial correlations `tanh(u)`, row by row (Stan's transform).
    CholeskyFactorCorr,
    /// A lower-triangular M x N matrix (`dims` `[M, N]`, M >= N) with a positive diagonal:
    /// row by row, the diagonal `exp(u)`, the rest `u` (Stan's transform).
    CholeskyFactorCov,
    /// A K x K correlation matrix `L L^T`, `L` from K(K-1)/2 canonical partial correlations
    /// `tanh(u)` column by column (Stan's transform).
    CorrMatrix,
    /// A K x K covariance matrix `L L^T`, `L` lower-triangular with diagonal `exp(u)`, from
    /// K(K+1)/2 coordinates row by row (Stan's transform).
    CovMatrix,
}

impl Constraint {
    /// Whether the constraint applies to a vector as a whole (and needs `size`); with two or
    /// more `dims` it applies to each row (the last dimension) of an array of vectors.
    pub fn is_vector_transform(self) -> bool {
        matches!(
            self,
            Constraint::Ordered
                | Constraint::PositiveOrdered
                | Constraint::Simplex
                | Constraint::UnitVector
        )
    }

    /// Whether the constraint applies to a matrix as a whole (and needs `dims` `[M, N]`).
    pub fn is_matrix_transform(self) -> bool {
        matches!(
            self,
            Constraint::CholeskyFactorCorr
                | Constraint::CholeskyFactorCov
                | Constraint::CorrMatrix
                | Constraint::CovMatrix
        )
    }

    /// Unconstrained coordinates of a parameter of `len` values under this constraint; a
    /// matrix constraint reads its shape from `dims` (`[M, N]`).
    pub fn unconstrained_len(self, len: usize, dims: &[usize]) -> usize {
        let (m, n) = match dims {
            [m, n] => (*m, *n),
            _ => (len, len),
        };
        match self {
            // With two or more dims, an array of simplexes: one coordinate fewer per row.
            Constraint::Simplex if dims.len() >= 2 => {
                let n = dims.last().copied().unwrap_or(1);
                len / n.max(1) * n.saturating_sub(1)
            }
            Constraint::Simplex => len.saturating_sub(1),
            Constraint::CholeskyFactorCorr | Constraint::CorrMatrix => n * n.saturating_sub(1) / 2,
            Constraint::CovMatrix => n * (n + 1) / 2,
            Constraint::CholeskyFactorCov => n * (n + 1) / 2 + m.saturating_sub(n) * n,
            _ => len,
        }
    }
}

/// A named deterministic quantity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transformed {
    /// Its name, unique among data, parameters and transformed parameters.
    pub name: String,
    /// Its definition; may use parameters, data and earlier transformed parameters.
    pub value: Expr,
    /// The value's shape for output names, as [`Parameter::dims`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims: Vec<usize>,
    /// An intermediate: computed once and shared by later uses, but not an output column
    /// (front ends use it for common subexpressions).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

/// One term of the log density.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Statement {
    /// `value ~ dist`: a prior when `value` depends on parameters, a likelihood when it is data.
    Sample {
        /// The quantity whose density is added (summed over elements).
        value: Expr,
        /// Its distribution; arguments broadcast against `value`.
        dist: Dist,
    },
    /// `target += sum(value)`: an arbitrary term, for example a user's own Jacobian.
    Factor {
        /// The added quantity.
        value: Expr,
    },
}

/// A distribution. Every argument is an expression: a scalar, or a vector of the value's length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Dist {
    /// Normal(mu, sigma).
    Normal {
        /// Location.
        mu: Expr,
        /// Scale, > 0.
        sigma: Expr,
    },
    /// Normal(0, sigma) restricted to `x >= 0`.
    HalfNormal {
        /// Scale, > 0.
        sigma: Expr,
    },
    /// Exponential(rate).
    Exponential {
        /// Rate, > 0.
        rate: Expr,
    },
    /// Student's t(nu, mu, sigma).
    StudentT {
        /// Degrees of freedom, > 0.
        nu: Expr,
        /// Location.
        mu: Expr,
        /// Scale, > 0.
        sigma: Expr,
    },
    /// Cauchy(mu, sigma).
    Cauchy {
        /// Location.
        mu: Expr,
        /// Scale, > 0.
        sigma: Expr,
    },
    /// Cauchy(0, sigma) restricted to `x >= 0`.
    HalfCauchy {
        /// Scale, > 0.
        sigma: Expr,
    },
    /// LogNormal(mu, sigma): `log x ~ Normal(mu, sigma)`.
    LogNormal {
        /// Location of `log x`.
        mu: Expr,
        /// Scale of `log x`, > 0.
        sigma: Expr,
    },
    /// Gamma(shape, rate).
    Gamma {
        /// Shape alpha, > 0.
        shape: Expr,
        /// Rate beta, > 0.
        rate: Expr,
    },
    /// InverseGamma(shape, scale).
    InverseGamma {
        /// Shape alpha, > 0.
        shape: Expr,
        /// Scale beta, > 0.
        scale: Expr,
    },
    /// Beta(alpha, beta).
    Beta {
        /// > 0.
        alpha: Expr,
        /// > 0.
        beta: Expr,
    },
    /// Uniform(lower, upper).
    Uniform {
        /// Lower bound.
        lower: Expr,
        /// Upper bound, > lower.
        upper: Expr,
    },
    /// Laplace(mu, scale).
    Laplace {
        /// Location.
        mu: Expr,
        /// Scale, > 0.
        scale: Expr,
    },
    /// Bernoulli with success probability `logistic(logit)`; the value is 0/1 data.
    BernoulliLogit {
        /// Log-odds of success.
        logit: Expr,
    },
    /// Binomial(trials, logistic(logit)); the value is integer data in `0..=trials`.
    BinomialLogit {
        /// Number of trials: integer data or constant, >= 0.
        trials: Expr,
        /// Log-odds of success.
        logit: Expr,
    },
    /// Poisson with rate `exp(log_rate)`; the value is non-negative integer data.
    PoissonLog {
        /// Log of the rate.
        log_rate: Expr,
    },
    /// Logistic(mu, sigma).
    Logistic {
        /// Location.
        mu: Expr,
        /// Scale, > 0.
        sigma: Expr,
    },
    /// Weibull(alpha, sigma) over `x >= 0`: `alpha / sigma (x / sigma)^(alpha - 1)
    /// exp(-(x / sigma)^alpha)`.
    Weibull {
        /// Shape, > 0.
        alpha: Expr,
        /// Scale, > 0.
        sigma: Expr,
    },
    /// Chi-square(nu) over `x >= 0`.
    ChiSquare {
        /// Degrees of freedom, > 0.
        nu: Expr,
    },
    /// Bernoulli(p); the value is 0/1 data.
    Bernoulli {
        /// Probability of success, in `[0, 1]`.
        p: Expr,
    },
    /// Binomial(trials, p); the value is integer data in `0..=trials`.
    Binomial {
        /// Number of trials: integer data or constant, >= 0.
        trials: Expr,
        /// Probability of success, in `[0, 1]`.
        p: Expr,
    },
    /// Poisson(rate); the value is non-negative integer data.
    Poisson {
        /// Rate, >= 0.
        rate: Expr,
    },
    /// Stan's `neg_binomial_2(mu, phi)`: mean `mu`, variance `mu + mu^2 / phi`; the value is
    /// non-negative integer data.
    #[serde(rename = "neg_binomial_2")]
    NegBinomial2 {
        /// Mean, > 0.
        mu: Expr,
        /// Precision, > 0.
        phi: Expr,
    },
    /// Stan's `neg_binomial_2_log(eta, phi)`: `neg_binomial_2(exp(eta), phi)`.
    #[serde(rename = "neg_binomial_2_log")]
    NegBinomial2Log {
        /// Log of the mean.
        eta: Expr,
        /// Precision, > 0.
        phi: Expr,
    },
    /// A Gaussian random walk over a vector `x`:
    /// `x[0] ~ Normal(init_mu, init_sigma)`, `x[t] ~ Normal(x[t-1] + drift, sigma)`.
    GaussianRandomWalk {
        /// Step scale, > 0 (scalar).
        sigma: Expr,
        /// Step mean (scalar); 0 when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drift: Option<Expr>,
        /// Mean of the first element (scalar); 0 when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        init_mu: Option<Expr>,
        /// Scale of the first element (scalar); `sigma` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        init_sigma: Option<Expr>,
    },
}

/// An expression over constants, data, parameters and transformed parameters.
///
/// Serialised compactly (see the module docs) by hand-written serde code that bounds nesting.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A real constant.
    Const(f64),
    /// A data item, parameter or transformed parameter, by name.
    Ref(String),
    /// An operation with one argument.
    Unary(UnaryOp, Box<Expr>),
    /// An operation with two arguments.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// Scalars and vectors joined into one vector (at least one part). JSON `{"concat": [..]}`.
    Concat(Vec<Expr>),
    /// Element `k` (0-based) of a vector: a scalar. JSON `{"elem": [e, k]}`.
    Elem(Box<Expr>, u32),
    /// `e[start..start + len]` of a vector. JSON `{"slice": [e, start, len]}`.
    Slice(Box<Expr>, u32, u32),
}

/// Operations with one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    /// `-x`, elementwise.
    Neg,
    /// `exp(x)`, elementwise.
    Exp,
    /// `log(x)`, elementwise.
    Log,
    /// `log(1 + x)`, elementwise.
    Log1p,
    /// `exp(x) - 1`, elementwise.
    Expm1,
    /// `log(1 + exp(x))`, elementwise.
    Softplus,
    /// `1 / (1 + exp(-x))`, elementwise.
    Logistic,
    /// `sqrt(x)`, elementwise.
    Sqrt,
    /// `|x|`, elementwise.
    Abs,
    /// The sum of the elements: a scalar.
    Sum,
    /// The running sum: a vector of the same length.
    Cumsum,
    /// `ln |Gamma(x)|`, elementwise.
    Lgamma,
    /// `log(sum(exp(x)))`, computed with the maximum: a scalar.
    LogSumExp,
    /// `log(Phi(x))`, the log of the standard normal CDF, elementwise (stable in both tails).
    LogPhi,
    /// `log(step(x))`: `0` where `x >= 0`, `-inf` where `x < 0`, elementwise; a constraint
    /// check (the gradient is zero).
    LogStep,
}

/// Operations with two arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    /// `a + b`, elementwise with scalar broadcasting.
    Add,
    /// `a - b`, elementwise with scalar broadcasting.
    Sub,
    /// `a * b`, elementwise with scalar broadcasting.
    Mul,
    /// `a / b`, elementwise with scalar broadcasting.
    Div,
    /// `a ^ b`, elementwise with scalar broadcasting.
    Pow,
    /// The inner product of two vectors of equal length: a scalar.
    Dot,
    /// A data matrix (first) times a vector (second).
    Matvec,
    /// `a[idx[i]]` for each `i`: the first argument is a vector, the second integer data
    /// (0-based indices).
    Gather,
    /// `max(a, b)`, elementwise with scalar broadcasting.
    Max,
    /// `min(a, b)`, elementwise with scalar broadcasting.
    Min,
}

impl UnaryOp {
    /// Every unary operation, for tests and documentation.
    pub const ALL: [UnaryOp; 15] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Expm1,
        UnaryOp::Softplus,
        UnaryOp::Logistic,
        UnaryOp::Sqrt,
        UnaryOp::Abs,
        UnaryOp::Sum,
        UnaryOp::Cumsum,
        UnaryOp::Lgamma,
        UnaryOp::LogSumExp,
        UnaryOp::LogPhi,
        UnaryOp::LogStep,
    ];

    /// The key of this operation in the JSON form.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Softplus => "softplus",
            UnaryOp::Logistic => "logistic",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Sum => "sum",
            UnaryOp::Cumsum => "cumsum",
            UnaryOp::Lgamma => "lgamma",
            UnaryOp::LogSumExp => "log_sum_exp",
            UnaryOp::LogPhi => "log_phi",
            UnaryOp::LogStep => "log_step",
        }
    }
}

impl BinaryOp {
    /// Every binary operation, for tests and documentation.
    pub const ALL: [BinaryOp; 10] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Dot,
        BinaryOp::Matvec,
        BinaryOp::Gather,
        BinaryOp::Max,
        BinaryOp::Min,
    ];

    /// The key of this operation in the JSON form.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Dot => "dot",
            BinaryOp::Matvec => "matvec",
            BinaryOp::Gather => "gather",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
        }
    }
}

impl Dist {
    /// The key of this distribution in the JSON form.
    pub fn name(&self) -> &'static str {
        match self {
            Dist::Normal { .. } => "normal",
            Dist::HalfNormal { .. } => "half_normal",
            Dist::Exponential { .. } => "exponential",
            Dist::StudentT { .. } => "student_t",
            Dist::Cauchy { .. } => "cauchy",
            Dist::HalfCauchy { .. } => "half_cauchy",
            Dist::LogNormal { .. } => "log_normal",
            Dist::Gamma { .. } => "gamma",
            Dist::InverseGamma { .. } => "inverse_gamma",
            Dist::Beta { .. } => "beta",
            Dist::Uniform { .. } => "uniform",
            Dist::Laplace { .. } => "laplace",
            Dist::BernoulliLogit { .. } => "bernoulli_logit",
            Dist::BinomialLogit { .. } => "binomial_logit",
            Dist::PoissonLog { .. } => "poisson_log",
            Dist::GaussianRandomWalk { .. } => "gaussian_random_walk",
            Dist::Logistic { .. } => "logistic",
            Dist::Weibull { .. } => "weibull",
            Dist::ChiSquare { .. } => "chi_square",
            Dist::Bernoulli { .. } => "bernoulli",
            Dist::Binomial { .. } => "binomial",
            Dist::Poisson { .. } => "poisson",
            Dist::NegBinomial2 { .. } => "neg_binomial_2",
            Dist::NegBinomial2Log { .. } => "neg_binomial_2_log",
        }
    }

    /// The arguments with their names, in declaration order; absent optional ones are left out.
    pub fn args(&self) -> Vec<(&'static str, &Expr)> {
        match self {
            Dist::Normal { mu, sigma }
            | Dist::Cauchy { mu, sigma }
            | Dist::LogNormal { mu, sigma } => vec![("mu", mu), ("sigma", sigma)],
            Dist::HalfNormal { sigma } | Dist::HalfCauchy { sigma } => vec![("sigma", sigma)],
            Dist::Exponential { rate } => vec![("rate", rate)],
            Dist::StudentT { nu, mu, sigma } => vec![("nu", nu), ("mu", mu), ("sigma", sigma)],
            Dist::Gamma { shape, rate } => vec![("shape", shape), ("rate", rate)],
            Dist::InverseGamma { shape, scale } => vec![("shape", shape), ("scale", scale)],
            Dist::Beta { alpha, beta } => vec![("alpha", alpha), ("beta", beta)],
            Dist::Uniform { lower, upper } => vec![("lower", lower), ("upper", upper)],
            Dist::Laplace { mu, scale } => vec![("mu", mu), ("scale", scale)],
            Dist::BernoulliLogit { logit } => vec![("logit", logit)],
            Dist::BinomialLogit { trials, logit } => vec![("trials", trials), ("logit", logit)],
            Dist::PoissonLog { log_rate } => vec![("log_rate", log_rate)],
            Dist::Logistic { mu, sigma } => vec![("mu", mu), ("sigma", sigma)],
            Dist::Weibull { alpha, sigma } => vec![("alpha", alpha), ("sigma", sigma)],
            Dist::ChiSquare { nu } => vec![("nu", nu)],
            Dist::Bernoulli { p } => vec![("p", p)],
            Dist::Binomial { trials, p } => vec![("trials", trials), ("p", p)],
            Dist::Poisson { rate } => vec![("rate", rate)],
            Dist::NegBinomial2 { mu, phi } => vec![("mu", mu), ("phi", phi)],
            Dist::NegBinomial2Log { eta, phi } => vec![("eta", eta), ("phi", phi)],
            Dist::GaussianRandomWalk {
                sigma,
                drift,
                init_mu,
                init_sigma,
            } => {
                let mut args = vec![("sigma", sigma)];
                for (name, arg) in [
                    ("drift", drift),
                    ("init_mu", init_mu),
                    ("init_sigma", init_sigma),
                ] {
                    if let Some(arg) = arg {
                        args.push((name, arg));
                    }
                }
                args
            }
        }
    }
}

impl Model {
    /// Parses the JSON form.
    pub fn from_json(text: &str) -> Result<Model, DecodeError> {
        serde_json::from_str(text).map_err(|err| DecodeError::Json(err.to_string()))
    }

    /// Writes the JSON form (pretty-printed).
    pub fn to_json(&self) -> String {
        // Serialising plain data to a String cannot fail: every map key is a string.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Parses rmp-serde (MessagePack) bytes, refusing inputs over `max_bytes`.
    pub fn from_msgpack(bytes: &[u8], max_bytes: usize) -> Result<Model, DecodeError> {
        if bytes.len() > max_bytes {
            return Err(DecodeError::TooLarge {
                len: bytes.len(),
                max: max_bytes,
            });
        }
        let mut deserializer = rmp_serde::Deserializer::from_read_ref(bytes);
        // Our own depth limit bounds expressions; this bounds everything else (and anything
        // skipped), well below what a thread's stack holds.
        deserializer.set_max_depth(2 * expr_serde::MAX_EXPR_DEPTH + 32);
        Model::deserialize(&mut deserializer).map_err(|err| DecodeError::Msgpack(err.to_string()))
    }

    /// Writes rmp-serde (MessagePack) bytes, with field names so that the format can grow.
    pub fn to_msgpack(&self) -> Vec<u8> {
        // Writing to a Vec cannot fail for plain data.
        rmp_serde::to_vec_named(self).unwrap_or_default()
    }
}

/// Failure to decode a model from its serialised form.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The JSON text is malformed or does not match the IR.
    #[error("invalid model JSON: {0}")]
    Json(String),
    /// The MessagePack bytes are malformed or do not match the IR.
    #[error("invalid model bytes: {0}")]
    Msgpack(String),
    /// The input is over the size limit.
    #[error("model is {len} bytes, over the limit of {max} bytes")]
    TooLarge {
        /// The input's length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// The product of `dims`, or `None` when it overflows.
pub(crate) fn dims_product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

#[cfg(test)]
mod tests;
