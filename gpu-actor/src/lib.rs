//! `gpu-actor`: the GPU supervisor and worker actors that own the wgpu device, translate the
//! sampler's lowered program to WGSL and run fused-chain kernels.
//!
//! Not built yet (issue 3); the crate exists so that the dependency direction
//! sampler <- gpu-actor <- runtime <- cluster-cli is fixed from the start.
