//! Why a model is refused: [`ModelError`], the offending node's path and its [`Problem`],
//! shared by validation and lowering (neither depends on the other for it).

use std::fmt;

use crate::ir::MIN_IR_VERSION;

/// A model that failed validation: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ModelError {
    /// The offending node, as a path from the model's root.
    pub path: String,
    /// What is wrong with it.
    pub problem: Problem,
}

impl ModelError {
    pub(crate) fn new(path: impl Into<String>, problem: Problem) -> ModelError {
        ModelError {
            path: path.into(),
            problem,
        }
    }
}

/// What is wrong with a model node.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Problem {
    /// The IR version is not the one this build reads.
    #[error(
        "unsupported ir_version {found}; this build reads versions {} to {supported}",
        MIN_IR_VERSION
    )]
    Version {
        /// The version in the input.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A name with characters other than letters, digits and `_`, or too long.
    #[error(
        "`{name}` is not a valid name: use letters, digits and `_`, not starting with a digit, at most {max_len} bytes"
    )]
    BadName {
        /// The name.
        name: String,
        /// The length limit.
        max_len: usize,
    },
    /// A name defined twice.
    #[error("`{name}` is already defined")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// A reference to nothing.
    #[error("unknown name `{name}`{hint}")]
    Unknown {
        /// The name.
        name: String,
        /// A suggestion, or empty.
        hint: String,
    },
    /// A transformed parameter used before its definition.
    #[error("`{name}` is used before it is defined")]
    UsedBeforeDefinition {
        /// The name.
        name: String,
    },
    /// A non-finite number.
    #[error("value {} at position {index} is not finite", Num(*value))]
    NonFinite {
        /// 0-based position in the data item (row-major for a matrix).
        index: usize,
        /// The value.
        value: f64,
    },
    /// An empty vector or matrix, or a vector parameter of size 0.
    #[error("is empty")]
    Empty,
    /// A matrix whose rows differ in length.
    #[error("row {row} has {len} values but row 0 has {expected}")]
    RaggedMatrix {
        /// The row.
        row: usize,
        /// Its length.
        len: usize,
        /// The first row's length.
        expected: usize,
    },
    /// A size over a configured limit.
    #[error("{what} is {value}, over the limit of {limit}")]
    Limit {
        /// What was counted.
        what: &'static str,
        /// The count.
        value: usize,
        /// The limit.
        limit: usize,
    },
    /// Shapes that do not fit together.
    #[error("{0}")]
    Shape(String),
    /// A constant or data argument outside its domain.
    #[error("{arg} must be {requirement}, found {}", Num(*value))]
    ArgumentDomain {
        /// The argument's name.
        arg: String,
        /// What it must be.
        requirement: &'static str,
        /// The offending value.
        value: f64,
    },
    /// Observed data outside the distribution's support.
    #[error(
        "observed value {} at position {index} is outside the support of {dist} ({support})", Num(*value)
    )]
    Support {
        /// The distribution.
        dist: &'static str,
        /// 0-based position in the value.
        index: usize,
        /// The value.
        value: f64,
        /// The support.
        support: &'static str,
    },
    /// Anything else, in words.
    #[error("{0}")]
    Invalid(String),
}

/// An f64 for messages: plain for ordinary magnitudes, scientific for tiny or huge ones
/// (`{}` would print `1e-300` with 300 digits).
pub(crate) struct Num(pub f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let magnitude = self.0.abs();
        if magnitude == 0.0 || !magnitude.is_finite() || (1e-4..1e16).contains(&magnitude) {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:e}", self.0)
        }
    }
}
