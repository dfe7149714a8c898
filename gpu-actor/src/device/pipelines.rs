//! The pipeline cache: compiled kernels under a typed [`PipelineKey`], built on a miss within
//! a compile budget, and the bind group layouts every kernel of a kind shares.
//!
//! # The compile budget
//!
//! `wgpu::Device::create_compute_pipeline` blocks until the driver has compiled the kernel, and
//! cannot be interrupted. So a build runs on a thread of its own, and the device thread waits
//! for it at most the budget ([`crate::DeviceOptions::compile_budget`]); past it the request
//! fails with [`GpuError::CompileBudget`] and the device thread goes on serving requests. The
//! build is not abandoned: it goes on and its result is kept for the next request of the
//! same pipeline, which waits for it again within its own budget instead of compiling twice.
//! Drivers that compile at a pipeline's first dispatch instead (lavapipe) are caught by the
//! device thread's first dispatch of every new pipeline (`DeviceThread::pipeline`), which has what is
//! left of the budget ([`CompileStage`]). Not all of it: lavapipe also specialises a kernel on
//! the values of its uniform parameters at a dispatch, and where that does not pay it
//! compiles the kernel as it is, again, at its first dispatch with real parameters (the NUTS
//! kernels, whose parameters the first dispatch's zeros make mostly dead code). That
//! compilation happens inside a sampling dispatch, under `DeviceOptions::poll_timeout`, not
//! the budget; generated code is bounded in size, so it is bounded too.

use std::collections::HashMap;
use std::fmt;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use sampler::{ModelHash, Program};

use super::scope::scoped;
use crate::error::GpuError;
use crate::wgsl::{
    self, Binding, DATA_BINDING, FUSED_CONSTS_BINDING, FUSED_OUT_BINDING, FUSED_PARAMS_BINDING,
    FUSED_STATE_BINDING, INDEX_BINDING, IndexChecks, KernelKind, LOGP_GRAD_GRAD_BINDING,
    LOGP_GRAD_LOGP_BINDING, LOGP_GRAD_PARAMS_BINDING, LOGP_GRAD_THETA_BINDING, NUTS_CKPT_BINDING,
    NUTS_CONSTS_BINDING, NUTS_OUT_BINDING, NUTS_PARAMS_BINDING, NUTS_UINT_BINDING,
    NUTS_VEC_BINDING, Precision, SCRATCH_BINDING, ShaderOptions,
};

/// What identifies a compiled kernel: the model, the kernel and how it was generated.
/// The number of chains is not part of it: it is a uniform, read at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PipelineKey {
    /// The model whose program the kernel embeds.
    pub model: ModelHash,
    /// Which kernel.
    pub kernel: KernelKind,
    /// Precision, tape placement and workgroup size.
    pub options: ShaderOptions,
}

impl fmt::Display for PipelineKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, {} tape, {} data, workgroup {}, {} lanes, {} checked) of model {}",
            self.kernel,
            self.options.precision,
            self.options.placement,
            self.options.data,
            self.options.workgroup_size,
            self.options.lanes,
            self.options.checks,
            self.model
        )
    }
}

/// Bind group layouts. Group 0 (the model's data) is the same for every kernel; group 1 is
/// per kernel kind.
pub(crate) struct Layouts {
    pub model: wgpu::BindGroupLayout,
    pub logp_grad: wgpu::BindGroupLayout,
    pub nuts: wgpu::BindGroupLayout,
    pub fused: wgpu::BindGroupLayout,
    logp_grad_pipeline: wgpu::PipelineLayout,
    nuts_pipeline: wgpu::PipelineLayout,
    fused_pipeline: wgpu::PipelineLayout,
}

fn buffer_entry(binding: Binding, ty: wgpu::BufferBindingType) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding: binding.binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn storage(binding: Binding, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    buffer_entry(binding, wgpu::BufferBindingType::Storage { read_only })
}

/// Group 1 of each kernel kind.
fn kernel_group_entries(kernel: KernelKind) -> Vec<wgpu::BindGroupLayoutEntry> {
    let uniform = |binding| buffer_entry(binding, wgpu::BufferBindingType::Uniform);
    match kernel {
        KernelKind::LogpGrad => vec![
            storage(SCRATCH_BINDING, false),
            uniform(LOGP_GRAD_PARAMS_BINDING),
            storage(LOGP_GRAD_THETA_BINDING, true),
            storage(LOGP_GRAD_LOGP_BINDING, false),
            storage(LOGP_GRAD_GRAD_BINDING, false),
        ],
        KernelKind::Nuts | KernelKind::NutsSearch => vec![
            storage(SCRATCH_BINDING, false),
            uniform(NUTS_PARAMS_BINDING),
            storage(NUTS_CONSTS_BINDING, true),
            storage(NUTS_VEC_BINDING, false),
            storage(NUTS_CKPT_BINDING, false),
            storage(NUTS_UINT_BINDING, false),
            storage(NUTS_OUT_BINDING, false),
        ],
        KernelKind::Fused => vec![
            storage(SCRATCH_BINDING, false),
            uniform(FUSED_PARAMS_BINDING),
            storage(FUSED_CONSTS_BINDING, true),
            storage(FUSED_STATE_BINDING, false),
            storage(FUSED_OUT_BINDING, false),
        ],
    }
}

impl Layouts {
    pub(crate) fn new(device: &wgpu::Device) -> Layouts {
        let model = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("model data"),
            entries: &[storage(DATA_BINDING, true), storage(INDEX_BINDING, true)],
        });
        let group = |label, kernel| {
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries: &kernel_group_entries(kernel),
            })
        };
        let logp_grad = group("logp_grad batch", KernelKind::LogpGrad);
        let nuts = group("nuts chains", KernelKind::Nuts);
        let fused = group("fused chains", KernelKind::Fused);
        let pipeline_layout = |label, kernel_group: &wgpu::BindGroupLayout| {
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(&model), Some(kernel_group)],
                immediate_size: 0,
            })
        };
        let logp_grad_pipeline = pipeline_layout("logp_grad", &logp_grad);
        let nuts_pipeline = pipeline_layout("nuts", &nuts);
        let fused_pipeline = pipeline_layout("fused", &fused);
        Layouts {
            model,
            logp_grad,
            nuts,
            fused,
            logp_grad_pipeline,
            nuts_pipeline,
            fused_pipeline,
        }
    }

    /// Group 1's layout of `kernel`.
    fn kernel_group(&self, kernel: KernelKind) -> &wgpu::BindGroupLayout {
        match kernel {
            KernelKind::LogpGrad => &self.logp_grad,
            KernelKind::Nuts | KernelKind::NutsSearch => &self.nuts,
            KernelKind::Fused => &self.fused,
        }
    }

    fn pipeline_layout(&self, kernel: KernelKind) -> &wgpu::PipelineLayout {
        match kernel {
            KernelKind::LogpGrad => &self.logp_grad_pipeline,
            KernelKind::Nuts | KernelKind::NutsSearch => &self.nuts_pipeline,
            KernelKind::Fused => &self.fused_pipeline,
        }
    }
}

/// Where a kernel's build was when the compile budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompileStage {
    /// In `create_compute_pipeline`, on a thread of its own: the device and its queue stay
    /// usable, the compilation goes on in the background, and a later request of the same
    /// pipeline takes its result.
    Creation,
    /// In the pipeline's first dispatch, which drivers that compile lazily (lavapipe) spend
    /// compiling: the device's queue is busy until the compilation ends, so the device is
    /// treated as lost (its worker restarts with a new one; the old one is left to finish).
    FirstDispatch,
}

impl fmt::Display for CompileStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompileStage::Creation => "creating the pipeline",
            CompileStage::FirstDispatch => "compiling at the first dispatch",
        })
    }
}

/// A build's outcome, sent by its thread.
type BuildResult = Result<wgpu::ComputePipeline, GpuError>;

/// Compiled pipelines by key, with hit and miss counts.
#[derive(Default)]
pub(crate) struct PipelineCache {
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
    /// Builds under way on their threads: started ahead ([`PipelineCache::start_build`]) or
    /// past an earlier budget.
    pending: HashMap<PipelineKey, mpsc::Receiver<BuildResult>>,
    /// Every build thread not yet known to have ended, finished or abandoned: dropping the
    /// cache waits for them, so that no thread is inside the driver when the device goes
    /// (or the process exits, which crashes some drivers mid-compile).
    threads: Vec<JoinHandle<()>>,
    pub compiled: u64,
    pub hits: u64,
}

impl Drop for PipelineCache {
    fn drop(&mut self) {
        for thread in self.threads.drain(..) {
            // A panic was already reported to the build's receiver as a disconnection.
            let _ = thread.join();
        }
    }
}

impl PipelineCache {
    /// The pipeline for `key` and whether it was built now, generating and compiling it on a
    /// miss (or waiting for a build that outlasted an earlier budget), for at most `budget`.
    /// Shader and pipeline creation run inside error scopes, so a bad shader is an error
    /// value, never a panic.
    pub(crate) fn get_or_build(
        &mut self,
        device: &wgpu::Device,
        layouts: &Layouts,
        program: &Program,
        key: PipelineKey,
        budget: Duration,
    ) -> Result<(wgpu::ComputePipeline, bool), GpuError> {
        if let Some(pipeline) = self.pipelines.get(&key) {
            self.hits += 1;
            return Ok((pipeline.clone(), false));
        }
        let build = match self.pending.remove(&key) {
            Some(build) => build,
            None => self.spawn_build(device, layouts, program, key)?,
        };
        // A zero budget waits for nothing: only a build already done is taken.
        let received = if budget.is_zero() {
            build.try_recv().map_err(|err| match err {
                mpsc::TryRecvError::Empty => mpsc::RecvTimeoutError::Timeout,
                mpsc::TryRecvError::Disconnected => mpsc::RecvTimeoutError::Disconnected,
            })
        } else {
            build.recv_timeout(budget)
        };
        match received {
            Ok(result) => {
                let pipeline = result?;
                self.compiled += 1;
                self.pipelines.insert(key, pipeline.clone());
                Ok((pipeline, true))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                tracing::warn!(pipeline = %key, ?budget, "a pipeline outlasted the compile budget; it goes on compiling in the background");
                self.pending.insert(key, build);
                Err(GpuError::CompileBudget {
                    key,
                    budget,
                    stage: CompileStage::Creation,
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(GpuError::Pipeline {
                key,
                message: "the thread that compiled it panicked".into(),
            }),
        }
    }

    /// Starts building `key` on a thread of its own unless it is built or under way; a later
    /// [`PipelineCache::get_or_build`] takes the result.
    pub(crate) fn start_build(
        &mut self,
        device: &wgpu::Device,
        layouts: &Layouts,
        program: &Program,
        key: PipelineKey,
    ) -> Result<(), GpuError> {
        if self.pipelines.contains_key(&key) || self.pending.contains_key(&key) {
            return Ok(());
        }
        let build = self.spawn_build(device, layouts, program, key)?;
        self.pending.insert(key, build);
        Ok(())
    }

    /// Generates `key`'s WGSL here and compiles it on a new thread, which sends the result.
    fn spawn_build(
        &mut self,
        device: &wgpu::Device,
        layouts: &Layouts,
        program: &Program,
        key: PipelineKey,
    ) -> Result<mpsc::Receiver<BuildResult>, GpuError> {
        let source = wgsl::kernel_source(program, key.kernel, &key.options)?;
        let device = device.clone();
        let layout = layouts.pipeline_layout(key.kernel).clone();
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("gpu-compile".into())
            .spawn(move || {
                // The receiver may be gone (the device thread stopped): nothing to do then.
                let _ = sender.send(build(&device, &layout, source, key));
            })
            .map_err(|err| GpuError::Spawn {
                message: err.to_string(),
            })?;
        self.threads.retain(|thread| !thread.is_finished());
        self.threads.push(thread);
        Ok(receiver)
    }

    /// Drops every pipeline of `model` in `precision` (builds still running finish on their
    /// own and are dropped).
    pub(crate) fn remove_model(&mut self, model: ModelHash, precision: Precision) {
        let other = |key: &PipelineKey| key.model != model || key.options.precision != precision;
        self.pipelines.retain(|key, _| other(key));
        self.pending.retain(|key, _| other(key));
    }
}

/// Creates `key`'s pipeline from `source`. Runs on a build thread; error scopes belong to the
/// thread that pushes them, so the device thread's requests see none of its errors.
fn build(
    device: &wgpu::Device,
    layout: &wgpu::PipelineLayout,
    source: String,
    key: PipelineKey,
) -> BuildResult {
    let started = std::time::Instant::now();
    let label = key.to_string();
    let pipeline = scoped(device, "pipeline creation", || {
        let module = shader_module(device, &label, source, key.options.checks);
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(layout),
            module: &module,
            entry_point: Some(key.kernel.entry_point()),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        })
    })
    .map_err(|err| match err {
        GpuError::Device { message, .. } => GpuError::Pipeline { key, message },
        other => other,
    })?;
    tracing::debug!(pipeline = %key, elapsed = ?started.elapsed(), "compiled a pipeline");
    Ok(pipeline)
}

/// Bytes of each buffer of [`probe_group`]: more than any kernel's uniform parameters.
const PROBE_BUFFER_BYTES: u64 = 4096;

/// Group 1 for a dispatch of `kernel` over no chains: zeroed buffers (so `n_chains` is 0 and
/// every invocation returns after `g_stage_data`), one per binding.
pub(crate) fn probe_group(
    device: &wgpu::Device,
    layouts: &Layouts,
    kernel: KernelKind,
) -> wgpu::BindGroup {
    let entries = kernel_group_entries(kernel);
    let buffers: Vec<wgpu::Buffer> = entries
        .iter()
        .map(|_| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("first dispatch"),
                size: PROBE_BUFFER_BYTES,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::UNIFORM,
                mapped_at_creation: false,
            })
        })
        .collect();
    let bindings: Vec<wgpu::BindGroupEntry> = entries
        .iter()
        .zip(&buffers)
        .map(|(entry, buffer)| wgpu::BindGroupEntry {
            binding: entry.binding,
            resource: buffer.as_entire_binding(),
        })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("first dispatch"),
        layout: layouts.kernel_group(kernel),
        entries: &bindings,
    })
}

/// The warmup moments kernel in `precision` (`shaders/nuts_moments.wgsl`): one per device thread and
/// precision, whatever the model. Its bindings are its own (group 0).
pub(crate) fn moments_pipeline(
    device: &wgpu::Device,
    precision: Precision,
) -> Result<wgpu::ComputePipeline, GpuError> {
    scoped(device, "moments pipeline creation", || {
        let module = shader_module(
            device,
            "nuts moments",
            wgsl::nuts_moments_source(precision),
            IndexChecks::All,
        );
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("nuts moments"),
            layout: None,
            module: &module,
            entry_point: Some(wgsl::NUTS_MOMENTS_ENTRY),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        })
    })
}

/// The shader module of a kernel, with the array checks `checks` asks for and without
/// wgpu's loop bounding. wgpu bounds every loop with a 64-bit counter in case a shader never
/// ends; in our kernels that counter sits in every loop over coordinates and defeats the
/// driver's unrolling (on the H100, a fused leapfrog step of eight schools spent most of its
/// instructions on the counters and the index arithmetic they keep from folding).
#[allow(unsafe_code)]
fn shader_module(
    device: &wgpu::Device,
    label: &str,
    source: String,
    checks: IndexChecks,
) -> wgpu::ShaderModule {
    let mut runtime = match checks {
        IndexChecks::All => wgpu::ShaderRuntimeChecks::checked(),
        IndexChecks::Buffers => wgpu::ShaderRuntimeChecks::unchecked(),
    };
    runtime.force_loop_bounding = false;
    let descriptor = wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    };
    // SAFETY: loops: the kernels' loops are `for` loops over constants or uniforms
    // (coordinates, tape slots, transitions and leaves, each bounded by the dispatch's
    // capacity, iteration end and step budget and by `2^max_depth` leaves per tree), and the
    // NUTS state machine's `loop` ends when one of those bounds is reached; every run of the
    // test suite drives them to their ends. Were one to hang regardless, the device thread
    // stops waiting after its poll timeout and the request gets an error. Indices, with
    // `IndexChecks::Buffers` (chosen only on Vulkan, whose robust buffer access wgpu enables
    // and which keeps every storage access inside its buffer): every index into a local or
    // workgroup array is in range by construction (`IndexChecks` says why), and the
    // integration tests require the same draws with and without the checks.
    unsafe { device.create_shader_module_trusted(descriptor, runtime) }
}
