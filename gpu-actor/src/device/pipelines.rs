//! The pipeline cache: compiled kernels under a typed [`PipelineKey`], built on a miss, and the
//! bind group layouts every kernel of a kind shares.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

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

impl Layouts {
    pub(crate) fn new(device: &wgpu::Device) -> Layouts {
        let model = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("model data"),
            entries: &[storage(DATA_BINDING, true), storage(INDEX_BINDING, true)],
        });
        let logp_grad = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("logp_grad batch"),
            entries: &[
                storage(SCRATCH_BINDING, false),
                buffer_entry(LOGP_GRAD_PARAMS_BINDING, wgpu::BufferBindingType::Uniform),
                storage(LOGP_GRAD_THETA_BINDING, true),
                storage(LOGP_GRAD_LOGP_BINDING, false),
                storage(LOGP_GRAD_GRAD_BINDING, false),
            ],
        });
        let uniform = |binding| buffer_entry(binding, wgpu::BufferBindingType::Uniform);
        let nuts = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("nuts chains"),
            entries: &[
                storage(SCRATCH_BINDING, false),
                uniform(NUTS_PARAMS_BINDING),
                storage(NUTS_CONSTS_BINDING, true),
                storage(NUTS_VEC_BINDING, false),
                storage(NUTS_CKPT_BINDING, false),
                storage(NUTS_UINT_BINDING, false),
                storage(NUTS_OUT_BINDING, false),
            ],
        });
        let fused = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("fused chains"),
            entries: &[
                storage(SCRATCH_BINDING, false),
                uniform(FUSED_PARAMS_BINDING),
                storage(FUSED_CONSTS_BINDING, true),
                storage(FUSED_STATE_BINDING, false),
                storage(FUSED_OUT_BINDING, false),
            ],
        });
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

    fn pipeline_layout(&self, kernel: KernelKind) -> &wgpu::PipelineLayout {
        match kernel {
            KernelKind::LogpGrad => &self.logp_grad_pipeline,
            KernelKind::Nuts | KernelKind::NutsSearch => &self.nuts_pipeline,
            KernelKind::Fused => &self.fused_pipeline,
        }
    }
}

/// Compiled pipelines by key, with hit and miss counts.
#[derive(Default)]
pub(crate) struct PipelineCache {
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
    pub compiled: u64,
    pub hits: u64,
}

impl PipelineCache {
    /// The pipeline for `key`, generating and compiling it on a miss. Shader and pipeline
    /// creation run inside error scopes, so a bad shader is an error value, never a panic.
    pub(crate) fn get_or_build(
        &mut self,
        device: &wgpu::Device,
        layouts: &Layouts,
        program: &Program,
        key: PipelineKey,
    ) -> Result<&wgpu::ComputePipeline, GpuError> {
        match self.pipelines.entry(key) {
            Entry::Occupied(entry) => {
                self.hits += 1;
                Ok(entry.into_mut())
            }
            Entry::Vacant(entry) => {
                let pipeline = build(device, layouts, program, key)?;
                self.compiled += 1;
                Ok(entry.insert(pipeline))
            }
        }
    }

    /// Drops every pipeline of `model` in `precision`.
    pub(crate) fn remove_model(&mut self, model: ModelHash, precision: Precision) {
        self.pipelines
            .retain(|key, _| key.model != model || key.options.precision != precision);
    }
}

fn build(
    device: &wgpu::Device,
    layouts: &Layouts,
    program: &Program,
    key: PipelineKey,
) -> Result<wgpu::ComputePipeline, GpuError> {
    let source = wgsl::kernel_source(program, key.kernel, &key.options)?;
    let started = std::time::Instant::now();
    let label = key.to_string();
    let pipeline = scoped(device, "pipeline creation", || {
        let module = shader_module(device, &label, source, key.options.checks);
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(layouts.pipeline_layout(key.kernel)),
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

/// The warmup moments kernel in `precision` (`shaders/nuts_moments.wgsl`): one per worker and
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
