//! Device ownership: one OS thread per GPU device owns the wgpu `Instance`, `Adapter`,
//! `Device` and `Queue`; everyone else holds a cheap, cloneable [`GpuDevice`] handle.
//!
//! The handle sends commands over a channel; the device thread runs them one at a time and
//! answers through a one-shot [`Pending`] reply. Blocking `device.poll` only ever runs on
//! that thread, as do wgpu's thread-local error scopes. Requests therefore never block the
//! caller: `.await` the `Pending` in async code (an actor's handler), or [`Pending::wait`] on
//! a plain thread. Only [`GpuDevice::open`] blocks (tens of milliseconds, up to a second on a
//! cold machine): call it from `spawn_blocking` in async code.
//!
//! Failures are values: shader and pipeline creation, uploads and dispatches run in error
//! scopes; wgpu's uncaptured-error handler and device-lost callback are turned into
//! [`GpuError::Uncaptured`] and [`GpuError::DeviceLost`] for the request that saw them (after
//! a loss every request gets `DeviceLost`); a panic of the device thread drops its reply ends,
//! so every caller waiting then, or sending later, gets [`GpuError::DeviceThreadGone`], never a hang.
//! A supervisor restarts the device by opening a new [`GpuDevice`].
//!
//! A model's data is uploaded once per precision ([`GpuDevice::upload_model`], keyed by
//! [`ModelKey`]) and stays on the device until unloaded; pipelines are cached under a typed
//! [`PipelineKey`]; batch buffers are kept per pipeline and grown on demand.

mod adapters;
pub(crate) mod fused;
pub(crate) mod nuts;
mod pipelines;
mod plan;
mod probe;
pub(crate) mod resources;
mod rng_check;
mod scope;
mod thread;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use sampler::{CheckedModel, ModelHash};

use crate::error::GpuError;
use crate::reply::{Pending, reply_channel};
use crate::wgsl::{IndexChecks, KernelKind, Precision, TapePlacement};
use thread::{Command, DeviceThread};

pub use adapters::{
    AdapterFeatures, AdapterLimits, AdapterReport, DeviceKind, DeviceMemory, enumerate_adapters,
};
pub use pipelines::{CompileStage, PipelineKey};
pub use plan::{KernelOverrides, KernelPlan};
pub use probe::F64BuiltinCheck;
pub use rng_check::RngSamples;

use fused::{FusedCommand, FusedReply};
use nuts::{NutsCommand, NutsReply};

/// Which adapter to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AdapterChoice {
    /// The first of [`enumerate_adapters`]: discrete GPUs first, software devices last.
    #[default]
    Best,
    /// A position in [`enumerate_adapters`]'s list.
    Index(usize),
}

/// How to open a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceOptions {
    /// Which adapter.
    pub adapter: AdapterChoice,
    /// Whether a software adapter (lavapipe) may be opened. CI has nothing else.
    pub allow_software: bool,
    /// Longest wait for one submission before the request fails with
    /// [`GpuError::Timeout`] (a watchdog: the device stays usable). lavapipe compiles each new
    /// pipeline on its first dispatch, which can take a second or more.
    pub poll_timeout: Duration,
    /// Longest time a new kernel may take to build, creation and first dispatch together
    /// (drivers compile at either), before the request fails with
    /// [`GpuError::CompileBudget`]. Generated code is bounded in size, so this only catches
    /// a driver that is slow beyond reason; `Duration::MAX` waits for ever.
    pub compile_budget: Duration,
    /// A test and diagnostic hook, not a tuning knob: open the adapter as if it had no
    /// `SHADER_F64` (lavapipe has it), to exercise what f32-only adapters do.
    #[doc(hidden)]
    pub hide_shader_f64: bool,
    /// A test hook, not a tuning knob: `PrecisionMode::Auto`'s check before warmup always
    /// finds f32 good enough here (it still runs, for the CPU path's step size), to exercise
    /// what watches an f32 run the check let through.
    #[doc(hidden)]
    pub pass_precision_check: bool,
}

/// [`DeviceOptions::compile_budget`] by default.
pub const DEFAULT_COMPILE_BUDGET: Duration = Duration::from_secs(20);

impl Default for DeviceOptions {
    fn default() -> DeviceOptions {
        DeviceOptions {
            adapter: AdapterChoice::Best,
            allow_software: true,
            poll_timeout: Duration::from_secs(60),
            compile_budget: DEFAULT_COMPILE_BUDGET,
            hide_shader_f64: false,
            pass_precision_check: false,
        }
    }
}

/// A model's data on one device, in one precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelKey {
    /// The model.
    pub hash: ModelHash,
    /// The precision its data was converted to.
    pub precision: Precision,
}

impl fmt::Display for ModelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.hash, self.precision)
    }
}

/// Where the NUTS kernel writes a sampling dispatch's draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DrawsOutput {
    /// [`DrawsOutput::Mapped`] for chains split across lanes (each chain's draws are one run
    /// of neighbouring words there), else [`DrawsOutput::Copied`]: chains on one invocation
    /// each write scattered words, which mapped memory takes slowly (measurements in
    /// `bench/journal.md`).
    #[default]
    Auto,
    /// Straight into the read-back buffer that the host then maps (wgpu's
    /// `MAPPABLE_PRIMARY_BUFFERS`), where the adapter allows it, else as
    /// [`DrawsOutput::Copied`]: the draws cross to the host while the kernel runs, instead of
    /// in a copy after it that the next dispatch waits for (a copy that grows with the chains
    /// and the draws per dispatch).
    Mapped,
    /// Into device memory, then copied into the read-back buffer.
    Copied,
}

impl DrawsOutput {
    /// [`DrawsOutput::Mapped`] or [`DrawsOutput::Copied`] for kernels of `lanes` invocations
    /// per chain on a device where `mappable` says whether kernels may write read-back
    /// buffers.
    pub(crate) fn resolve(self, lanes: u32, mappable: bool) -> DrawsOutput {
        match self {
            _ if !mappable => DrawsOutput::Copied,
            DrawsOutput::Auto if lanes > 1 => DrawsOutput::Mapped,
            DrawsOutput::Auto => DrawsOutput::Copied,
            chosen => chosen,
        }
    }
}

impl fmt::Display for DrawsOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DrawsOutput::Auto => "auto",
            DrawsOutput::Mapped => "mapped",
            DrawsOutput::Copied => "copied",
        })
    }
}

/// A pipeline to start building before its first request ([`GpuDevice::prepare`]): its
/// kernel, and the overrides and number of chains its request will bring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prepare {
    pub kernel: KernelKind,
    pub overrides: KernelOverrides,
    pub n_chains: usize,
}

/// Log densities and gradients of many chains at once.
#[derive(Clone, Debug, PartialEq)]
pub struct LogpGradRequest {
    /// An uploaded model.
    pub model: ModelKey,
    /// Unconstrained points, chain after chain: `points[c * dim + j]`. The number of chains is
    /// `points.len() / dim`.
    pub points: Vec<f64>,
    /// Where tapes live; `None` for [`TapePlacement::choose`].
    pub placement: Option<TapePlacement>,
    /// Invocations per chain; `None` for the adapter's default (`wgsl::choose_lanes`).
    pub lanes: Option<u32>,
}

/// The answer to a [`LogpGradRequest`], in f64 whatever the precision.
#[derive(Clone, Debug, PartialEq)]
pub struct LogpGradBatch {
    /// Chains evaluated.
    pub n_chains: usize,
    /// Coordinates per chain.
    pub dim: usize,
    /// `log p` of each chain (up to the model's constant, as on the CPU); non-finite outside
    /// the support.
    pub logp: Vec<f64>,
    /// Gradients, chain after chain: `grad[c * dim + j]`.
    pub grad: Vec<f64>,
    /// The placement used.
    pub placement: TapePlacement,
    /// Wall time from submission to the results being readable (upload of the points and
    /// pipeline compilation excluded).
    pub elapsed: Duration,
}

/// Counters of the device thread's caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeviceStats {
    /// Models whose data is on the device now.
    pub models_resident: usize,
    /// Uploads that transferred data.
    pub models_uploaded: u64,
    /// Uploads of a model already resident (nothing transferred).
    pub model_upload_hits: u64,
    /// Pipelines compiled.
    pub pipelines_compiled: u64,
    /// Time spent building them: creation and first dispatch (where lavapipe compiles), the
    /// builds that outlasted the compile budget included up to the budget.
    pub pipeline_build_time: Duration,
    /// Requests served by an already compiled pipeline.
    pub pipeline_hits: u64,
    /// Batches dispatched.
    pub batches: u64,
}

/// Faults a supervisor's tests inject into a device thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The device thread panics.
    Panic,
    /// The device is destroyed, as if the driver had lost it.
    LoseDevice,
}

/// A handle to one device thread. Cheap to clone; every clone talks to the same thread.
#[derive(Clone)]
pub struct GpuDevice {
    commands: mpsc::Sender<Command>,
    report: Arc<AdapterReport>,
    /// The index checks of kernels whose request leaves them open: the backend's
    /// ([`IndexChecks::default_for`]).
    default_checks: IndexChecks,
    /// [`DeviceOptions::pass_precision_check`].
    pass_precision_check: bool,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuDevice")
            .field("adapter", &self.report.name)
            .finish_non_exhaustive()
    }
}

impl GpuDevice {
    /// Starts a device thread and opens the chosen adapter on it. Blocks until the device is
    /// open: call it from `spawn_blocking` in async code.
    ///
    /// # Errors
    ///
    /// [`GpuError::NoAdapter`] (one clear line) when Vulkan has no adapter;
    /// [`GpuError::AdapterIndex`], [`GpuError::SoftwareOnly`], [`GpuError::RequestDevice`]
    /// or [`GpuError::Spawn`] otherwise.
    pub fn open(options: &DeviceOptions) -> Result<GpuDevice, GpuError> {
        let (commands, receiver) = mpsc::channel();
        let (ready, opened) = reply_channel();
        let options = *options;
        let thread = std::thread::Builder::new()
            .name("gpu-device".into())
            .spawn(move || match DeviceThread::start(&options) {
                Ok(device_thread) => {
                    ready.send(Ok((
                        device_thread.report().clone(),
                        device_thread.default_checks(),
                    )));
                    device_thread.run(receiver);
                }
                Err(err) => ready.send(Err(err)),
            })
            .map_err(|err| GpuError::Spawn {
                message: err.to_string(),
            })?;
        let (report, default_checks) = opened.wait()?;
        tracing::info!(adapter = %report.name, kind = %report.kind, "opened a GPU device");
        Ok(GpuDevice {
            commands,
            report: Arc::new(report),
            default_checks,
            pass_precision_check: options.pass_precision_check,
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// The plan of kernels over `n_chains` chains of `program` in `precision` on this
    /// device: what `overrides` fixes, else the defaults ([`KernelPlan`]). What
    /// [`crate::sample_on_device_with`] runs with the same arguments.
    ///
    /// # Errors
    ///
    /// [`GpuError::SubgroupUnsupported`] for chains split across lanes on an adapter without
    /// subgroup operations.
    pub fn kernel_plan(
        &self,
        program: &sampler::Program,
        precision: Precision,
        n_chains: usize,
        overrides: &KernelOverrides,
    ) -> Result<KernelPlan, GpuError> {
        KernelPlan::resolve(
            &self.report,
            self.default_checks,
            program,
            precision,
            n_chains,
            overrides,
        )
    }

    /// The adapter this device runs on.
    pub fn report(&self) -> &AdapterReport {
        &self.report
    }

    /// How long a caller that sends dispatches back to back should poll for each reply
    /// before sleeping: what the device thread itself polls ([`thread::spin_wait`]).
    pub(crate) fn spin_wait(&self) -> std::time::Duration {
        thread::spin_wait(&self.report)
    }

    /// [`DeviceOptions::pass_precision_check`].
    pub(crate) fn passes_precision_check(&self) -> bool {
        self.pass_precision_check
    }

    /// Whether kernels of `precision` can run here.
    pub fn supports(&self, precision: Precision) -> bool {
        match precision {
            Precision::F32 => true,
            Precision::F64 => self.report.features.shader_f64,
        }
    }

    fn send<T>(&self, make: impl FnOnce(crate::reply::Replier<T>) -> Command) -> Pending<T> {
        let (replier, pending) = reply_channel();
        match self.commands.send(make(replier)) {
            Ok(()) => pending,
            // The command (and its replier) came back: the thread is gone.
            Err(_) => Pending::ready(Err(GpuError::DeviceThreadGone)),
        }
    }

    /// Uploads `model`'s data in `precision`, once: uploading a resident model again is
    /// free. The key names the model in later requests.
    pub fn upload_model(&self, model: &CheckedModel, precision: Precision) -> Pending<ModelKey> {
        let model = model.clone();
        self.send(|reply| Command::Upload {
            model,
            precision,
            reply,
        })
    }

    /// Frees a model's data, pipelines and batch buffers. Answers whether it was resident.
    pub fn unload_model(&self, model: ModelKey) -> Pending<bool> {
        self.send(|reply| Command::Unload { model, reply })
    }

    /// Starts building the pipelines of `kernels` over an uploaded model, each on a thread of
    /// its own, and answers once they are under way; the requests that use them then wait
    /// for their builds. A run's kernels so compile side by side instead of one after
    /// another, each at its first request.
    pub(crate) fn prepare(&self, model: ModelKey, kernels: Vec<Prepare>) -> Pending<()> {
        self.send(|reply| Command::Prepare {
            model,
            kernels,
            reply,
        })
    }

    /// Log densities and gradients of a batch of chains ([`crate::KernelKind::LogpGrad`]).
    /// The first request of a pipeline compiles it.
    pub fn logp_grad(&self, request: LogpGradRequest) -> Pending<LogpGradBatch> {
        self.send(|reply| Command::LogpGrad { request, reply })
    }

    /// The device thread's counters.
    pub fn stats(&self) -> Pending<DeviceStats> {
        self.send(|reply| Command::Stats { reply })
    }

    /// Runs WGSL's own f64 `exp` and `log` and compares them with the CPU: whether this
    /// driver's f64 built-ins can be trusted. [`GpuError::F64Unsupported`] without
    /// `SHADER_F64`.
    ///
    /// A driver may refuse the shader by losing the device (NVIDIA 580.159 does): run it on a
    /// device of its own, never on one that serves requests.
    pub fn check_f64_builtins(&self) -> Pending<F64BuiltinCheck> {
        self.send(|reply| Command::CheckF64Builtins { reply })
    }

    /// Runs the sampling kernels' random number generator (`shaders/rng.wgsl`) on the given
    /// Philox counters with the key `key` (a seed's low and high words), in `precision`.
    pub fn check_rng(
        &self,
        precision: Precision,
        key: [u32; 2],
        counters: Vec<[u32; 4]>,
    ) -> Pending<RngSamples> {
        self.send(|reply| Command::CheckRng {
            precision,
            key,
            counters,
            reply,
        })
    }

    /// A request to a NUTS session (`crate::sampling`'s kernel b).
    pub(crate) fn nuts(&self, command: NutsCommand) -> Pending<NutsReply> {
        self.send(|reply| Command::Nuts { command, reply })
    }

    /// A request to a fused session (`crate::sampling`'s kernel a).
    pub(crate) fn fused(&self, command: FusedCommand) -> Pending<FusedReply> {
        self.send(|reply| Command::Fused { command, reply })
    }

    /// Injects a fault, for tests of supervisors.
    pub fn inject_fault(&self, fault: Fault) -> Pending<()> {
        self.send(|reply| Command::Fault { fault, reply })
    }

    /// Stops the device thread after the requests already sent, releases the device, and
    /// waits for the thread to end. Other handles then get [`GpuError::DeviceThreadGone`].
    /// Blocks: call it from `spawn_blocking` in async code.
    pub fn shutdown(&self) -> Result<(), GpuError> {
        let stopped = self.send(|reply| Command::Shutdown { reply }).wait();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // A panic of the thread has already been reported as DeviceThreadGone.
            let _ = thread.join();
        }
        match stopped {
            Ok(()) | Err(GpuError::DeviceThreadGone) => Ok(()),
            Err(err) => Err(err),
        }
    }
}
