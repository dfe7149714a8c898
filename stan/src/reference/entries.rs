//! The functions and distributions the reference lists, each with the argument types its
//! probes use. Elementwise functions come from the host interpreter's own tables
//! ([`crate::host::UNARY_REAL`], [`crate::host::BINARY_REAL`]); the rest are listed here.

use super::probe::Arg::{self, *};

/// A group of functions, in the order the reference shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Elementwise,
    Reductions,
    VectorMatrix,
    Special,
}

impl Group {
    pub const ALL: [Group; 4] = [
        Group::Elementwise,
        Group::Reductions,
        Group::VectorMatrix,
        Group::Special,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Group::Elementwise => "Elementwise",
            Group::Reductions => "Reductions and sizes",
            Group::VectorMatrix => "Vectors, arrays and matrices",
            Group::Special => "Special functions and constants",
        }
    }
}

/// One signature of a function.
#[derive(Debug, Clone)]
pub struct Function {
    pub group: Group,
    pub name: &'static str,
    pub args: Vec<Arg>,
}

/// The domain a probe of an elementwise function of one argument uses.
fn unary_domain(name: &str) -> Arg {
    match name {
        "log" | "log2" | "log10" | "sqrt" | "inv_sqrt" | "lgamma" | "tgamma" | "digamma"
        | "inv" | "inv_square" => Positive,
        "logit" | "log1m" | "asin" | "acos" | "atanh" | "inv_Phi" => Unit,
        "log1m_exp" => Negative,
        "acosh" => AboveOne,
        _ => Real,
    }
}

/// The domains a probe of an elementwise function of two arguments uses.
fn binary_domain(name: &str) -> [Arg; 2] {
    match name {
        "pow" | "lbeta" | "hypot" => [Positive, Positive],
        "log_diff_exp" => [Positive, Unit],
        "lchoose" | "binomial_coefficient_log" => [AboveOne, Unit],
        _ => [Real, Positive],
    }
}

/// Hand-listed signatures: (group, name, arguments).
const LISTED: &[(Group, &str, &[Arg])] = &[
    (Group::Elementwise, "abs", &[Real]),
    (Group::Elementwise, "max", &[Real, Positive]),
    (Group::Elementwise, "min", &[Real, Positive]),
    (Group::Reductions, "sum", &[Vector]),
    (Group::Reductions, "prod", &[Vector]),
    (Group::Reductions, "mean", &[Vector]),
    (Group::Reductions, "variance", &[Vector]),
    (Group::Reductions, "sd", &[Vector]),
    (Group::Reductions, "log_sum_exp", &[Vector]),
    (Group::Reductions, "log_sum_exp", &[Real, Real]),
    (Group::Reductions, "max", &[Vector]),
    (Group::Reductions, "min", &[Vector]),
    (Group::Reductions, "cumulative_sum", &[Vector]),
    (Group::Reductions, "num_elements", &[Vector]),
    (Group::Reductions, "size", &[Vector]),
    (Group::Reductions, "rows", &[Vector]),
    (Group::Reductions, "cols", &[Matrix]),
    (Group::Reductions, "dims", &[Vector]),
    (Group::VectorMatrix, "dot_product", &[Vector, Vector]),
    (Group::VectorMatrix, "dot_self", &[Vector]),
    (Group::VectorMatrix, "squared_distance", &[Vector, Vector]),
    (Group::VectorMatrix, "distance", &[Vector, Vector]),
    (
        Group::VectorMatrix,
        "columns_dot_product",
        &[Matrix, Matrix],
    ),
    (Group::VectorMatrix, "rows_dot_product", &[Matrix, Matrix]),
    (Group::VectorMatrix, "columns_dot_self", &[Matrix]),
    (Group::VectorMatrix, "rows_dot_self", &[Matrix]),
    (Group::VectorMatrix, "softmax", &[Vector]),
    (Group::VectorMatrix, "log_softmax", &[Vector]),
    (Group::VectorMatrix, "rep_vector", &[Real, Lit("3")]),
    (Group::VectorMatrix, "rep_row_vector", &[Real, Lit("3")]),
    (Group::VectorMatrix, "rep_array", &[Real, Lit("3")]),
    (
        Group::VectorMatrix,
        "rep_matrix",
        &[Real, Lit("2"), Lit("3")],
    ),
    (Group::VectorMatrix, "to_vector", &[Vector]),
    (Group::VectorMatrix, "to_vector", &[Reals]),
    (Group::VectorMatrix, "to_row_vector", &[Vector]),
    (Group::VectorMatrix, "to_array_1d", &[Vector]),
    (
        Group::VectorMatrix,
        "to_matrix",
        &[Vector, Lit("3"), Lit("1")],
    ),
    (
        Group::VectorMatrix,
        "linspaced_vector",
        &[Lit("3"), Real, Positive],
    ),
    (
        Group::VectorMatrix,
        "linspaced_row_vector",
        &[Lit("3"), Real, Positive],
    ),
    (
        Group::VectorMatrix,
        "linspaced_array",
        &[Lit("3"), Real, Positive],
    ),
    (Group::VectorMatrix, "zeros_vector", &[Lit("3")]),
    (Group::VectorMatrix, "zeros_row_vector", &[Lit("3")]),
    (Group::VectorMatrix, "ones_vector", &[Lit("3")]),
    (Group::VectorMatrix, "ones_row_vector", &[Lit("3")]),
    (Group::VectorMatrix, "one_hot_vector", &[Lit("3"), Lit("2")]),
    (
        Group::VectorMatrix,
        "one_hot_row_vector",
        &[Lit("3"), Lit("2")],
    ),
    (Group::VectorMatrix, "one_hot_array", &[Lit("3"), Lit("2")]),
    (
        Group::VectorMatrix,
        "one_hot_int_array",
        &[Lit("3"), Lit("2")],
    ),
    (Group::VectorMatrix, "identity_matrix", &[Lit("3")]),
    (Group::VectorMatrix, "diag_matrix", &[Vector]),
    (Group::VectorMatrix, "diagonal", &[Matrix]),
    (Group::VectorMatrix, "add_diag", &[Matrix, Real]),
    (Group::VectorMatrix, "col", &[Matrix, Lit("2")]),
    (Group::VectorMatrix, "row", &[Matrix, Lit("2")]),
    (
        Group::VectorMatrix,
        "block",
        &[Matrix, Lit("1"), Lit("2"), Lit("2"), Lit("2")],
    ),
    (Group::VectorMatrix, "head", &[Vector, Lit("2")]),
    (Group::VectorMatrix, "tail", &[Vector, Lit("2")]),
    (
        Group::VectorMatrix,
        "segment",
        &[Vector, Lit("2"), Lit("2")],
    ),
    (Group::VectorMatrix, "reverse", &[Vector]),
    (Group::VectorMatrix, "append_row", &[Vector, Vector]),
    (Group::VectorMatrix, "append_col", &[RowVector, RowVector]),
    (Group::VectorMatrix, "append_array", &[Reals, Reals]),
    (Group::VectorMatrix, "sort_asc", &[Vector]),
    (Group::VectorMatrix, "sort_desc", &[Vector]),
    (Group::VectorMatrix, "sort_indices_asc", &[Vector]),
    (Group::VectorMatrix, "sort_indices_desc", &[Vector]),
    (Group::VectorMatrix, "rank", &[Vector, Lit("2")]),
    (Group::VectorMatrix, "transpose", &[Matrix]),
    (Group::VectorMatrix, "crossprod", &[Matrix]),
    (Group::VectorMatrix, "tcrossprod", &[Matrix]),
    (
        Group::VectorMatrix,
        "multiply_lower_tri_self_transpose",
        &[CholeskyCorr],
    ),
    (Group::VectorMatrix, "quad_form", &[Cov, Vector]),
    (Group::VectorMatrix, "quad_form_sym", &[Cov, Vector]),
    (Group::VectorMatrix, "quad_form_diag", &[Corr, Vector]),
    (
        Group::VectorMatrix,
        "diag_pre_multiply",
        &[Vector, CholeskyCorr],
    ),
    (Group::VectorMatrix, "diag_post_multiply", &[Matrix, Vector]),
    (Group::VectorMatrix, "cholesky_decompose", &[Cov]),
    (
        Group::VectorMatrix,
        "mdivide_left_tri_low",
        &[CholeskyCov, Vector],
    ),
    (
        Group::VectorMatrix,
        "mdivide_right_tri_low",
        &[RowVector, CholeskyCov],
    ),
    (Group::VectorMatrix, "mdivide_left", &[Cov, Vector]),
    (Group::VectorMatrix, "mdivide_left_spd", &[Cov, Vector]),
    (Group::VectorMatrix, "mdivide_right", &[RowVector, Cov]),
    (Group::VectorMatrix, "mdivide_right_spd", &[RowVector, Cov]),
    (Group::VectorMatrix, "inverse", &[Cov]),
    (Group::VectorMatrix, "inverse_spd", &[Cov]),
    (Group::VectorMatrix, "determinant", &[Cov]),
    (Group::VectorMatrix, "log_determinant", &[Cov]),
    (Group::VectorMatrix, "log_determinant_spd", &[Cov]),
    (Group::VectorMatrix, "trace", &[Cov]),
    (
        Group::VectorMatrix,
        "gp_exp_quad_cov",
        &[Reals, Positive, Positive],
    ),
    (
        Group::VectorMatrix,
        "cov_exp_quad",
        &[Reals, Positive, Positive],
    ),
    (Group::Special, "log_mix", &[Unit, Real, Real]),
    (Group::Special, "log_mix", &[Simplex, Vector]),
    (Group::Special, "choose", &[Int, Int]),
    (Group::Special, "int_step", &[Real]),
    (Group::Special, "is_inf", &[Real]),
    (Group::Special, "is_nan", &[Real]),
    (Group::Special, "to_int", &[Real]),
    (Group::Special, "pi", &[]),
    (Group::Special, "e", &[]),
    (Group::Special, "sqrt2", &[]),
    (Group::Special, "log2", &[]),
    (Group::Special, "log10", &[]),
    (Group::Special, "not_a_number", &[]),
    (Group::Special, "positive_infinity", &[]),
    (Group::Special, "negative_infinity", &[]),
    (Group::Special, "machine_precision", &[]),
];

/// Every function signature the reference lists, grouped, elementwise ones first.
pub fn functions() -> Vec<Function> {
    let mut out: Vec<Function> = crate::host::UNARY_REAL
        .iter()
        .map(|&(name, _)| Function {
            group: Group::Elementwise,
            name,
            args: vec![unary_domain(name)],
        })
        .chain(crate::host::BINARY_REAL.iter().map(|&(name, _)| Function {
            group: Group::Elementwise,
            name,
            args: binary_domain(name).to_vec(),
        }))
        .collect();
    out.extend(LISTED.iter().map(|&(group, name, args)| Function {
        group,
        name,
        args: args.to_vec(),
    }));
    out
}

/// A distribution: its outcome and parameter types, and whether Stan defines its CDFs and
/// its `_rng` (and with which arguments, where they are not the parameters).
#[derive(Debug, Clone, Copy)]
pub struct Distribution {
    pub name: &'static str,
    pub outcome: Arg,
    pub args: &'static [Arg],
    pub cdf: bool,
    pub rng: bool,
    /// The `_rng`'s arguments where they differ from `args` (a size first).
    pub rng_args: Option<&'static [Arg]>,
}

impl Distribution {
    /// `lpmf` for integer outcomes, `lpdf` otherwise.
    pub fn discrete(&self) -> bool {
        matches!(self.outcome, Int | Binary | Categories)
    }
}

const fn dist(name: &'static str, outcome: Arg, args: &'static [Arg]) -> Distribution {
    Distribution {
        name,
        outcome,
        args,
        cdf: true,
        rng: true,
        rng_args: None,
    }
}

/// A distribution without CDFs in Stan.
const fn no_cdf(name: &'static str, outcome: Arg, args: &'static [Arg]) -> Distribution {
    Distribution {
        cdf: false,
        ..dist(name, outcome, args)
    }
}

pub const DISTRIBUTIONS: &[Distribution] = &[
    dist("normal", Real, &[Real, Positive]),
    dist("std_normal", Real, &[]),
    Distribution {
        rng: false,
        ..no_cdf("normal_id_glm", Vector, &[Matrix, Real, Vector, Positive])
    },
    dist("student_t", Real, &[Positive, Real, Positive]),
    dist("cauchy", Real, &[Real, Positive]),
    dist("double_exponential", Real, &[Real, Positive]),
    dist("logistic", Real, &[Real, Positive]),
    dist("lognormal", Positive, &[Real, Positive]),
    dist("chi_square", Positive, &[Positive]),
    dist("inv_chi_square", Positive, &[Positive]),
    dist("exponential", Positive, &[Positive]),
    dist("gamma", Positive, &[Positive, Positive]),
    dist("inv_gamma", Positive, &[Positive, Positive]),
    dist("weibull", Positive, &[Positive, Positive]),
    dist("beta", Unit, &[Positive, Positive]),
    dist("uniform", Unit, &[Negative, Positive]),
    dist("bernoulli", Binary, &[Unit]),
    dist("bernoulli_logit", Binary, &[Real]),
    dist("binomial", Int, &[Int, Unit]),
    dist("binomial_logit", Int, &[Int, Real]),
    dist("poisson", Int, &[Positive]),
    dist("poisson_log", Int, &[Real]),
    dist("neg_binomial_2", Int, &[Positive, Positive]),
    dist("neg_binomial_2_log", Int, &[Real, Positive]),
    no_cdf("categorical", Categories, &[Simplex]),
    no_cdf("categorical_logit", Categories, &[Vector]),
    no_cdf("ordered_logistic", Int, &[Real, Ordered]),
    no_cdf("dirichlet", Simplex, &[PositiveVector]),
    no_cdf("multi_normal", Vector, &[Vector, Cov]),
    no_cdf("multi_normal_cholesky", Vector, &[Vector, CholeskyCov]),
    Distribution {
        rng_args: Some(&[Int, Positive]),
        ..no_cdf("lkj_corr_cholesky", CholeskyCorr, &[Positive])
    },
    Distribution {
        rng_args: Some(&[Int, Positive]),
        ..no_cdf("lkj_corr", Corr, &[Positive])
    },
    no_cdf("wishart", Cov, &[AboveOne, Cov]),
];
