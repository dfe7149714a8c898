//! `gpu-actor`: the GPU side of the cluster runtime.
//!
//! * [`wgsl`]: the sampler's lowered program as WGSL (log density and gradient of one chain)
//!   and the kernels that run it for many chains; the hand-written WGSL is in `shaders/`.
//! * [`GpuDevice`]: one thread per device owns wgpu's device and queue; a cloneable handle
//!   sends it requests (upload a model, evaluate a batch) and gets [`Pending`] replies.
//! * [`enumerate_adapters`]: what `cluster-cli devices` prints.
//!
//! The actors that supervise devices and the fused-chain kernels build on these (issue 3).

mod actor;
mod device;
mod error;
mod kernels;
mod reply;
mod sampling;
pub mod wgsl;

pub use actor::{
    AdapterSelection, CancelToken, GpuActorError, GpuKernel, GpuSampleRequest, GpuShare,
    GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg, GpuSupervisorState, LoadListener, RanOn,
    SampleJob, SampleOutput, SupervisorReport, WorkerId, WorkerLoad, WorkerState, WorkerStatus,
};
pub use device::{
    AdapterChoice, AdapterFeatures, AdapterLimits, AdapterReport, CompileStage,
    DEFAULT_COMPILE_BUDGET, DeviceKind, DeviceMemory, DeviceOptions, DeviceStats, DrawsOutput,
    F64BuiltinCheck, Fault, GpuDevice, KernelOverrides, KernelPlan, LogpGradBatch, LogpGradRequest,
    ModelKey, PipelineKey, RngSamples, enumerate_adapters,
};
pub use error::{COMPUTES_WRONGLY, CheckedPoint, GpuError, NEEDS_F64};
pub use kernels::{normal_pair, philox4x32_10, uniform24, uniform53};
pub use reply::Pending;
pub use sampling::{
    DEFAULT_FUSED_STEPS, DEFAULT_NUTS_TRANSITIONS, DispatchStats, FusedLeapfrog, GRAD_TOLERANCE,
    GpuRun, LP_TOLERANCE, LeapfrogStart, LeapfrogSteps, LockstepTotals, PATH_WARMUP, Phase,
    PrecisionCheck, PrecisionChoice, PrecisionMode, STEP_COLLAPSE, check_f32, sample_on_device,
    sample_on_device_with,
};
pub use wgsl::{DataPlacement, KernelKind, Precision, ShaderOptions, TapePlacement};
