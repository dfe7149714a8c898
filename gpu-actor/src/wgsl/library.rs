//! The hand-written WGSL of `shaders/`: the only module that loads it, and the closed list
//! of its functions that generated code may call.
//!
//! The files are written for `alias T = f32 | f64`, which the generated prelude defines, so one
//! text serves both precisions; only `sf_exp` and `sf_log` differ (`math_f32.wgsl` uses the
//! GPU's own, `math_f64.wgsl` builds them from arithmetic because f64 transcendentals are
//! wrong on lavapipe).

use sampler::DensityKind;

use super::{KernelKind, Precision};

const MATH_F32: &str = include_str!("../../../shaders/math_f32.wgsl");
const MATH_F64: &str = include_str!("../../../shaders/math_f64.wgsl");
const SPECIAL: &str = include_str!("../../../shaders/special.wgsl");
const DENSITY: &str = include_str!("../../../shaders/density.wgsl");
const LOGP_GRAD: &str = include_str!("../../../shaders/logp_grad.wgsl");
const F64_BUILTINS: &str = include_str!("../../../shaders/f64_builtins.wgsl");
const RNG: &str = include_str!("../../../shaders/rng.wgsl");
const RNG_CHECK: &str = include_str!("../../../shaders/rng_check.wgsl");
const NUTS_STATE: &str = include_str!("../../../shaders/nuts_state.wgsl");
const NUTS: &str = include_str!("../../../shaders/nuts.wgsl");
const NUTS_SEARCH: &str = include_str!("../../../shaders/nuts_search.wgsl");
const FUSED: &str = include_str!("../../../shaders/fused.wgsl");
const NUTS_MOMENTS: &str = include_str!("../../../shaders/nuts_moments.wgsl");
const INTERP: &str = include_str!("../../../shaders/interp.wgsl");

/// The library a generated model needs, in `precision`.
pub(crate) fn model_library(precision: Precision) -> [&'static str; 3] {
    let math = match precision {
        Precision::F32 => MATH_F32,
        Precision::F64 => MATH_F64,
    };
    [math, SPECIAL, DENSITY]
}

/// The interpreter of programs whose tape lives in storage (`interp.rs`), after the model
/// library.
pub(crate) fn interp_library() -> &'static str {
    INTERP
}

/// The hand-written files of `kernel`, after the model.
pub(crate) fn kernel_sources(kernel: KernelKind) -> Vec<&'static str> {
    match kernel {
        KernelKind::LogpGrad => vec![LOGP_GRAD],
        KernelKind::Nuts => vec![RNG, NUTS_STATE, NUTS],
        KernelKind::NutsSearch => vec![RNG, NUTS_STATE, NUTS_SEARCH],
        KernelKind::Fused => vec![FUSED],
    }
}

/// The RNG check's library: math of `precision`, special functions, the RNG and its kernel.
pub(crate) fn rng_check_library(precision: Precision) -> [&'static str; 4] {
    let math = match precision {
        Precision::F32 => MATH_F32,
        Precision::F64 => MATH_F64,
    };
    [math, SPECIAL, RNG, RNG_CHECK]
}

/// The warmup moments kernel (model-independent).
pub(crate) fn nuts_moments_library() -> &'static str {
    NUTS_MOMENTS
}

/// The NUTS kernels' state layout (checked against kernels/layout.rs).
#[cfg(test)]
pub(crate) fn nuts_state_source() -> &'static str {
    NUTS_STATE
}

/// The f64 built-in check (see `GpuDevice::check_f64_builtins`).
pub(crate) fn f64_builtins_source() -> &'static str {
    F64_BUILTINS
}

/// Every library file, for tests that check names against the text.
#[cfg(test)]
pub(crate) fn all_sources() -> [&'static str; 13] {
    [
        INTERP,
        MATH_F32,
        MATH_F64,
        SPECIAL,
        DENSITY,
        LOGP_GRAD,
        F64_BUILTINS,
        RNG,
        RNG_CHECK,
        NUTS_STATE,
        NUTS,
        NUTS_SEARCH,
        FUSED,
    ]
}

/// A library function that generated code calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LibFn {
    Exp,
    Log,
    Log1p,
    Expm1,
    Softplus,
    Logistic,
    Pow,
    SignOrZero,
    /// `ln |Γ(x)|` for any real `x` (MapOp::Lgamma).
    Lgamma,
    /// `ψ(x)`, its derivative.
    Digamma,
    /// `ln Φ(x)` (MapOp::LogPhi).
    LogPhi,
    /// `φ(x) / Φ(x)` from `x` and `ln Φ(x)`, its derivative.
    LogPhiSlope,
    /// `0` where `x >= 0`, `-inf` below (MapOp::LogStep).
    LogStep,
    /// `0.5 / out`, or 0 where `out` is 0: the derivative of `sqrt`.
    SqrtSlope,
    Inf,
    Nan,
    /// One addition of Neumaier's compensated sum: `(sum, error)` as a `vec2<T>` plus a
    /// value ([`super::tape::Sum`]).
    SumAdd,
    /// The total of a compensated sum.
    SumTotal,
    Term(TermFn),
    Kernel(DensityKind),
    /// The interpreter's model function (`shaders/interp.wgsl`).
    InterpLogpGrad,
}

/// The one- and two-parameter terms of the densities (`term1`/`term2` in dist.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TermFn {
    NegLogScale,
    LogRate,
    NegLgamma,
    NegLogX,
    StudentTNu,
    ShapeLogRate,
    BetaNorm,
    UniformNorm,
    NegShapeLogScale,
    ChiSquareNu,
    NegHalfX,
    NegBinomialChoose,
    MultiplyLog,
}

impl TermFn {
    /// Every term, for tests.
    #[cfg(test)]
    pub(crate) const ALL: [TermFn; 13] = [
        TermFn::NegLogScale,
        TermFn::LogRate,
        TermFn::NegLgamma,
        TermFn::NegLogX,
        TermFn::StudentTNu,
        TermFn::ShapeLogRate,
        TermFn::BetaNorm,
        TermFn::UniformNorm,
        TermFn::NegShapeLogScale,
        TermFn::ChiSquareNu,
        TermFn::NegHalfX,
        TermFn::NegBinomialChoose,
        TermFn::MultiplyLog,
    ];
}

impl LibFn {
    /// The function's name in the WGSL library.
    pub(crate) fn name(self) -> &'static str {
        match self {
            LibFn::Exp => "sf_exp",
            LibFn::Log => "sf_log",
            LibFn::Log1p => "sf_log1p",
            LibFn::Expm1 => "sf_expm1",
            LibFn::Softplus => "sf_softplus",
            LibFn::Logistic => "sf_logistic",
            LibFn::Pow => "sf_pow",
            LibFn::SignOrZero => "sf_sign_or_zero",
            LibFn::Lgamma => "sf_lgamma_real",
            LibFn::Digamma => "sf_digamma_real",
            LibFn::LogPhi => "sf_log_phi",
            LibFn::LogPhiSlope => "sf_log_phi_slope",
            LibFn::LogStep => "sf_log_step",
            LibFn::SqrtSlope => "sf_sqrt_slope",
            LibFn::Inf => "sf_inf",
            LibFn::Nan => "sf_nan",
            LibFn::SumAdd => "sf_sum_add",
            LibFn::SumTotal => "sf_sum_total",
            LibFn::InterpLogpGrad => "it_logp_grad",
            LibFn::Term(term) => match term {
                TermFn::NegLogScale => "dt_neg_log_scale",
                TermFn::LogRate => "dt_log_rate",
                TermFn::NegLgamma => "dt_neg_lgamma",
                TermFn::NegLogX => "dt_neg_log_x",
                TermFn::StudentTNu => "dt_student_t_nu",
                TermFn::ShapeLogRate => "dt_shape_log_rate",
                TermFn::BetaNorm => "dt_beta_norm",
                TermFn::UniformNorm => "dt_uniform_norm",
                TermFn::NegShapeLogScale => "dt_neg_shape_log_scale",
                TermFn::ChiSquareNu => "dt_chi_square_nu",
                TermFn::NegHalfX => "dt_neg_half_x",
                TermFn::NegBinomialChoose => "dt_neg_binomial_choose",
                TermFn::MultiplyLog => "dt_multiply_log",
            },
            LibFn::Kernel(kind) => match kind {
                DensityKind::Normal => "dk_normal",
                DensityKind::HalfNormal => "dk_half_normal",
                DensityKind::Exponential => "dk_exponential",
                DensityKind::StudentT => "dk_student_t",
                DensityKind::Cauchy => "dk_cauchy",
                DensityKind::HalfCauchy => "dk_half_cauchy",
                DensityKind::LogNormal => "dk_log_normal",
                DensityKind::Gamma => "dk_gamma",
                DensityKind::InverseGamma => "dk_inverse_gamma",
                DensityKind::Beta => "dk_beta",
                DensityKind::Uniform => "dk_uniform",
                DensityKind::Laplace => "dk_laplace",
                DensityKind::BernoulliLogit => "dk_bernoulli_logit",
                DensityKind::BinomialLogit => "dk_binomial_logit",
                DensityKind::PoissonLog => "dk_poisson_log",
                DensityKind::Logistic => "dk_logistic",
                DensityKind::Weibull => "dk_weibull",
                DensityKind::ChiSquare => "dk_chi_square",
                DensityKind::Bernoulli => "dk_bernoulli",
                DensityKind::Binomial => "dk_binomial",
                DensityKind::Poisson => "dk_poisson",
                DensityKind::NegBinomial2 => "dk_neg_binomial_2",
                DensityKind::NegBinomial2Log => "dk_neg_binomial_2_log",
            },
        }
    }
}
