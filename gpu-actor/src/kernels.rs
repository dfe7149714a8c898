//! The sampling kernels' host side: the chain-state layout they share with
//! `shaders/nuts_state.wgsl` and `shaders/fused.wgsl`, the Philox generator they share with
//! `shaders/rng.wgsl`, and the iterative NUTS tree builder that consumes the fused kernel's
//! steps on the CPU (the twin of `shaders/nuts.wgsl`).

pub(crate) mod layout;
pub(crate) mod philox;
pub(crate) mod tree;

#[cfg(test)]
mod tests;

pub use philox::{normal_pair, philox4x32_10, uniform24, uniform53};
