//! Why sampling fails: the one error type of the samplers, shared by the chain, its
//! adaptation and the thread pool.

use crate::rng::ChainId;

/// Why sampling failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SampleError {
    /// The settings are invalid.
    #[error("invalid sampler settings: {0}")]
    Settings(String),
    /// No finite starting point was found.
    #[error("chain {chain}: no finite starting point after {attempts} attempts: {reason}")]
    Init {
        /// The chain.
        chain: ChainId,
        /// Points tried.
        attempts: u32,
        /// What was not finite.
        reason: String,
    },
    /// The step-size search failed.
    #[error("chain {chain}: {message}")]
    StepSize {
        /// The chain.
        chain: ChainId,
        /// What happened.
        message: String,
    },
    /// An observer asked to stop.
    #[error("sampling was cancelled")]
    Cancelled,
}
