//! `gpu-actor`: the GPU side of the cluster runtime.
//!
//! * [`wgsl`]: the sampler's lowered program as WGSL (log density and gradient of one chain)
//!   and the kernels that run it for many chains; the hand-written WGSL is in `shaders/`.
//! * [`GpuDevice`]: one thread per device owns wgpu's device and queue; a cloneable handle
//!   sends it requests (upload a model, evaluate a batch) and gets [`Pending`] replies.
//! * [`enumerate_adapters`]: what `cluster-cli devices` prints.
//!
//! The actors that supervise devices and the fused-chain kernels build on these (issue 3).

mod device;
mod error;
mod reply;
pub mod wgsl;

pub use device::{
    AdapterChoice, AdapterFeatures, AdapterLimits, AdapterReport, DeviceKind, DeviceMemory,
    DeviceOptions, DeviceStats, F64BuiltinCheck, Fault, GpuDevice, LogpGradBatch, LogpGradRequest,
    ModelKey, PipelineKey, enumerate_adapters,
};
pub use error::GpuError;
pub use reply::Pending;
pub use wgsl::{KernelKind, Precision, ShaderOptions, TapePlacement};
