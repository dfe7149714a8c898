//! The error of every device operation: one enum, messages in lowercase with the values
//! involved and, where there is one, what the user can do.

use std::time::Duration;

use crate::device::{CompileStage, ModelKey, PipelineKey};
use crate::wgsl::{CodegenError, LoopLimitExceeded};

/// The start of [`GpuError::NeedsF64`]'s message: what a program finds in a reason it is
/// given as a string (`RanOn::Cpu`) to tell this refusal from others.
pub const NEEDS_F64: &str = "the model needs f64 on the GPU";

/// What [`GpuError::DensityMismatch`]'s message says after the adapter's name: what a program
/// finds in a reason it is given as a string to add how to sample on the CPU.
pub const COMPUTES_WRONGLY: &str = "computes this model's log density wrongly";

/// Why a GPU operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// Vulkan lists no adapter at all.
    #[error(
        "no GPU adapter: Vulkan found no devices (install mesa-vulkan-drivers for a software device)"
    )]
    NoAdapter,
    /// [`crate::AdapterChoice::Index`] out of range.
    #[error("no GPU adapter {index}: Vulkan lists {count} (see `cluster-cli devices`)")]
    AdapterIndex {
        /// The index asked for.
        index: usize,
        /// How many adapters there are.
        count: usize,
    },
    /// Only a software adapter was found and the options refuse one.
    #[error(
        "no hardware GPU adapter: only the software device {name} was found, and software devices are not allowed"
    )]
    SoftwareOnly {
        /// The software adapter's name.
        name: String,
    },
    /// `request_device` failed.
    #[error("cannot open GPU adapter {adapter}: {message}")]
    RequestDevice {
        /// The adapter's name.
        adapter: String,
        /// wgpu's reason.
        message: String,
    },
    /// f64 asked of an adapter without `SHADER_F64`.
    #[error("GPU adapter {adapter} has no f64 support (SHADER_F64); use f32")]
    F64Unsupported {
        /// The adapter's name.
        adapter: String,
    },
    /// `PrecisionMode::Auto` found that f32 does not compute the model well enough for NUTS
    /// (the check before warmup, or an f32 warmup whose step size collapsed), and the adapter
    /// has no f64: a supervisor samples on the CPU instead, saying why. The message starts
    /// with [`NEEDS_F64`]: a program that prints it may add how to insist on f32.
    #[error(
        "{} ({found}) and GPU adapter {adapter} has no f64 support (SHADER_F64)",
        NEEDS_F64
    )]
    NeedsF64 {
        /// The adapter's name.
        adapter: String,
        /// What the check found.
        found: String,
    },
    /// A chain split across invocations was asked of an adapter without subgroup operations.
    #[error("GPU adapter {adapter} has no subgroup operations (SUBGROUP); use 1 lane per chain")]
    SubgroupUnsupported {
        /// The adapter's name.
        adapter: String,
    },
    /// The program cannot be translated to WGSL.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// The driver or wgpu refused a generated shader or pipeline: a bug in the generator or
    /// the driver, with the pipeline that failed.
    #[error("GPU pipeline {key} failed to build: {message}")]
    Pipeline {
        /// The pipeline.
        key: PipelineKey,
        /// wgpu's message.
        message: String,
    },
    /// Building a kernel took longer than [`crate::DeviceOptions::compile_budget`]. The
    /// request fails; the compilation goes on in the background (see [`CompileStage`] for
    /// what that leaves behind). The model runs on the CPU instead
    /// ([`GpuError::model_unsupported`]).
    #[error(
        "compiling GPU kernel {key} took longer than the compile budget of {budget:?} ({stage})"
    )]
    CompileBudget {
        /// The pipeline: its model, kernel and shader options.
        key: PipelineKey,
        /// The budget it outlasted.
        budget: Duration,
        /// Where it was when the budget ran out.
        stage: CompileStage,
    },
    /// A request names a model that was not uploaded to this device.
    #[error("model {model} is not loaded on this GPU device; upload it first")]
    ModelNotLoaded {
        /// The model asked for.
        model: ModelKey,
    },
    /// The points of a batch do not fill whole chains.
    #[error(
        "a batch of points has {len} values, which is not a positive multiple of the model's dimension {dim}"
    )]
    BadPoints {
        /// Values given.
        len: usize,
        /// Values per chain.
        dim: usize,
    },
    /// A buffer or dispatch over a device limit.
    #[error("{what} needs {needed}, over the device limit of {limit}")]
    TooLarge {
        /// What was sized.
        what: &'static str,
        /// Its size (bytes or workgroups).
        needed: u64,
        /// The limit.
        limit: u64,
    },
    /// A wgpu call inside an error scope failed.
    #[error("GPU {operation} failed: {message}")]
    Device {
        /// What was done.
        operation: &'static str,
        /// wgpu's message.
        message: String,
    },
    /// The device did not finish a submission within the configured time.
    #[error("the GPU did not finish within {waited:?} (DeviceOptions::poll_timeout)")]
    Timeout {
        /// How long it waited.
        waited: Duration,
    },
    /// The device was lost (driver reset, `destroy`, hardware fault); the worker must be
    /// restarted.
    #[error("the GPU device was lost: {reason}")]
    DeviceLost {
        /// wgpu's reason and message.
        reason: String,
    },
    /// wgpu reported an error outside any error scope during the request.
    #[error("GPU error outside an error scope: {message}")]
    Uncaptured {
        /// wgpu's message.
        message: String,
    },
    /// The device thread is gone: it panicked or was shut down.
    #[error("the GPU device thread stopped (it panicked or was shut down)")]
    DeviceThreadGone,
    /// The device thread could not be started.
    #[error("cannot start the GPU device thread: {message}")]
    Spawn {
        /// The OS error.
        message: String,
    },
    /// A sampling request names a session the device thread no longer has (its model was
    /// unloaded, or the device was restarted).
    #[error("sampling session {session} is gone from this GPU device (its model was unloaded)")]
    SessionGone {
        /// The session's number.
        session: u64,
    },
    /// The sampler refused the request or failed (settings, initial points, step size,
    /// cancellation).
    #[error(transparent)]
    Sampler(#[from] sampler::SampleError),
    /// The model needs more loop iterations per leapfrog step than the adapter runs per
    /// invocation (lavapipe's cap, `wgsl/cost.rs`): it cannot run there correctly.
    #[error("GPU adapter {adapter} cannot run this model: {exceeded} (the CPU sampler runs it)")]
    LoopLimit {
        /// The adapter's name.
        adapter: String,
        /// The estimate and the limit.
        exceeded: LoopLimitExceeded,
    },
    /// The GPU's log density or gradient at a chain's first point, or its log density at the
    /// chain's first draw, disagrees with the CPU's: the device computes this model wrongly,
    /// and the run stops. The message contains [`COMPUTES_WRONGLY`] and names no flag: a
    /// program that prints it may add how to sample on the CPU.
    #[error(
        "GPU adapter {adapter} {}: at chain {chain}'s {point} {what} (checked against the CPU); sample it on the CPU and report the model",
        COMPUTES_WRONGLY
    )]
    DensityMismatch {
        /// The adapter's name.
        adapter: String,
        /// The chain (index in the request).
        chain: usize,
        /// Which of the chain's points was checked.
        point: CheckedPoint,
        /// What differs, with both values and the tolerance.
        what: String,
    },
    /// A reply did not arrive in time ([`crate::Pending::wait_timeout`]); the request may
    /// still complete.
    #[error("no reply from the GPU device thread within {waited:?}")]
    ReplyTimeout {
        /// How long the caller waited.
        waited: Duration,
    },
}

/// Which point of a chain a [`GpuError::DensityMismatch`] was found at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckedPoint {
    /// Its initial point, before sampling (the `logp_grad` kernel's log density and gradient).
    Initial,
    /// Its first draw (the sampling kernel's log density).
    FirstDraw,
}

impl std::fmt::Display for CheckedPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CheckedPoint::Initial => "first point",
            CheckedPoint::FirstDraw => "first draw",
        })
    }
}

impl GpuError {
    /// Whether the model cannot run on this adapter, though it runs on the CPU: a caller that
    /// may choose runs it there instead, with this error's message as the reason. So does a
    /// model whose kernels this adapter did not compile within the budget.
    pub fn model_unsupported(&self) -> bool {
        matches!(
            self,
            GpuError::LoopLimit { .. } | GpuError::CompileBudget { .. } | GpuError::NeedsF64 { .. }
        )
    }
}
