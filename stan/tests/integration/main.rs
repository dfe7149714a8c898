//! The `stan` crate's one integration-test binary: posteriordb programs parse, print back
//! and lower (`programs`), log densities against Stan's (`parity`), and reference posteriors
//! (`posteriordb`).

mod parity;
mod posteriordb;
mod programs;
