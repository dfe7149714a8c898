//! Integration tests of the `sampler` crate: Stan parity of the benchmark models, posterior
//! correctness of the whole sampler, and the benchmark model files.

mod common;
mod stan_parity;
