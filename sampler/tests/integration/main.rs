//! Integration tests of the `sampler` crate: Stan parity of the benchmark models, posterior
//! correctness of the whole sampler, and the benchmark model files.

mod common;
mod decode_robustness;
mod posterior;
mod sbc;
mod stan_parity;
