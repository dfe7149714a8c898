//! The device thread: it owns the wgpu objects and runs one command at a time.

use std::collections::HashMap;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use sampler::CheckedModel;

use super::adapters::{AdapterReport, sorted_adapters, vulkan_instance};
use super::fused::{FusedCommand, FusedReply, FusedSession};
use super::nuts::{NutsCommand, NutsReply, NutsSession, SessionId};
use super::pipelines::{self, CompileStage, Layouts, PipelineCache, PipelineKey};
use super::probe::{self, F64BuiltinCheck};
use super::resources::{LogpGradWorkspace, ModelResources, StagingPool, decode, encode};
use super::rng_check::{self, RngSamples};
use super::scope::scoped;
use super::{
    AdapterChoice, DeviceOptions, DeviceStats, Fault, KernelOverrides, KernelPlan, LogpGradBatch,
    LogpGradRequest, ModelKey, Prepare,
};
use crate::error::GpuError;
use crate::reply::{Replier, spin_for};
use crate::wgsl::{IndexChecks, KernelKind, Precision, ShaderOptions};

/// A request to the device thread, with its reply end.
pub(crate) enum Command {
    Upload {
        model: CheckedModel,
        precision: Precision,
        reply: Replier<ModelKey>,
    },
    Unload {
        model: ModelKey,
        reply: Replier<bool>,
    },
    Prepare {
        model: ModelKey,
        kernels: Vec<Prepare>,
        reply: Replier<()>,
    },
    LogpGrad {
        request: LogpGradRequest,
        reply: Replier<LogpGradBatch>,
    },
    Stats {
        reply: Replier<DeviceStats>,
    },
    CheckF64Builtins {
        reply: Replier<F64BuiltinCheck>,
    },
    Fault {
        fault: Fault,
        reply: Replier<()>,
    },
    Nuts {
        command: NutsCommand,
        reply: Replier<NutsReply>,
    },
    Fused {
        command: FusedCommand,
        reply: Replier<FusedReply>,
    },
    CheckRng {
        precision: Precision,
        key: [u32; 2],
        counters: Vec<[u32; 4]>,
        reply: Replier<RngSamples>,
    },
    Shutdown {
        reply: Replier<()>,
    },
}

/// What wgpu's callbacks report, possibly from inside any wgpu call.
enum DeviceEvent {
    Uncaptured(String),
    Lost(String),
}

pub(crate) struct DeviceThread {
    // Field order is drop order: resources before the device, the device before the instance.
    pub(super) nuts_sessions: HashMap<SessionId, NutsSession>,
    pub(super) fused_sessions: HashMap<SessionId, FusedSession>,
    /// NUTS sessions' read-back buffers by size, kept after a session closes for the next
    /// one of the same size (see [`DeviceThread::staging_pool`]).
    staging_pools: HashMap<u64, StagingPool>,
    pub(super) models: HashMap<ModelKey, ModelResources>,
    workspaces: HashMap<PipelineKey, LogpGradWorkspace>,
    pub(super) pipelines: PipelineCache,
    /// The warmup moments kernel per precision (it depends on no model).
    pub(super) moments_pipelines: HashMap<Precision, wgpu::ComputePipeline>,
    pub(super) layouts: Layouts,
    pub(super) queue: wgpu::Queue,
    pub(super) device: wgpu::Device,
    _adapter: wgpu::Adapter,
    _instance: wgpu::Instance,
    report: AdapterReport,
    /// The index checks of kernels whose request leaves them open: the backend's
    /// ([`IndexChecks::default_for`]).
    default_checks: IndexChecks,
    pub(super) limits: wgpu::Limits,
    poll_timeout: Duration,
    compile_budget: Duration,
    /// A first dispatch outlasted the compile budget: the driver's queue is still compiling
    /// it, so dropping the device would wait for that (see `run`).
    compiling: bool,
    events: mpsc::Receiver<DeviceEvent>,
    lost: Option<String>,
    pub(super) stats: DeviceStats,
    next_session: u64,
}

/// The optional features requested when the adapter has them.
fn wanted_features() -> wgpu::Features {
    wgpu::Features::SHADER_F64
        | wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::SUBGROUP
        | wgpu::Features::MAPPABLE_PRIMARY_BUFFERS
}

impl DeviceThread {
    /// A loaded model's program and the plan of kernels over `n_chains` of its chains with
    /// `overrides` ([`KernelPlan::resolve`] on this adapter).
    pub(super) fn plan(
        &self,
        model: ModelKey,
        overrides: &KernelOverrides,
        n_chains: usize,
    ) -> Result<(Arc<sampler::Program>, KernelPlan), GpuError> {
        let program = self
            .models
            .get(&model)
            .ok_or(GpuError::ModelNotLoaded { model })?
            .program
            .clone();
        let plan = KernelPlan::resolve(
            &self.report,
            self.default_checks,
            &program,
            model.precision,
            n_chains,
            overrides,
        )?;
        Ok((program, plan))
    }

    /// The cached pipeline of `kernel` over a loaded model's `program`, built on first use
    /// within the compile budget: its creation (`PipelineCache::get_or_build`), then a
    /// dispatch over no chains, which drivers that compile at a pipeline's first dispatch
    /// (lavapipe) spend compiling, with what is left of the budget.
    pub(super) fn pipeline(
        &mut self,
        model: ModelKey,
        program: &sampler::Program,
        kernel: KernelKind,
        options: ShaderOptions,
    ) -> Result<wgpu::ComputePipeline, GpuError> {
        let key = PipelineKey {
            model: model.hash,
            kernel,
            options,
        };
        let started = Instant::now();
        let got = self.pipelines.get_or_build(
            &self.device,
            &self.layouts,
            program,
            key,
            self.compile_budget,
        );
        let (pipeline, built) = match got {
            Ok(got) => got,
            Err(error) => {
                self.stats.pipeline_build_time += started.elapsed();
                return Err(error);
            }
        };
        if built {
            let created = started.elapsed();
            let dispatched = self.first_dispatch(
                model,
                key,
                &pipeline,
                self.compile_budget.saturating_sub(created),
            );
            self.stats.pipeline_build_time += started.elapsed();
            dispatched?;
            tracing::debug!(pipeline = %key, ?created, first_dispatch = ?(started.elapsed() - created), "built a pipeline");
        }
        Ok(pipeline)
    }

    /// Runs `pipeline` over no chains (one workgroup whose invocations all return at once)
    /// and waits for it at most `left`. Past that, the device's queue is still compiling, and
    /// the error's stage says so ([`CompileStage::FirstDispatch`]).
    fn first_dispatch(
        &mut self,
        model: ModelKey,
        key: PipelineKey,
        pipeline: &wgpu::ComputePipeline,
        left: Duration,
    ) -> Result<(), GpuError> {
        let model_group = &self
            .models
            .get(&model)
            .ok_or(GpuError::ModelNotLoaded { model })?
            .bind_group;
        let kernel_group = pipelines::probe_group(&self.device, &self.layouts, key.kernel);
        let submission = scoped(&self.device, "first dispatch", || {
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("first dispatch"),
                });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("first dispatch"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, model_group, &[]);
                pass.set_bind_group(1, &kernel_group, &[]);
                pass.dispatch_workgroups(1, 1, 1);
            }
            self.queue.submit([encoder.finish()])
        })?;
        match self.device.poll(wgpu::PollType::Wait {
            submission_index: Some(submission),
            timeout: Some(left),
        }) {
            Ok(_) => Ok(()),
            Err(wgpu::PollError::Timeout) => {
                tracing::warn!(pipeline = %key, budget = ?self.compile_budget, "a pipeline's first dispatch outlasted the compile budget");
                self.compiling = true;
                Err(GpuError::CompileBudget {
                    key,
                    budget: self.compile_budget,
                    stage: CompileStage::FirstDispatch,
                })
            }
            Err(err) => Err(GpuError::Device {
                operation: "poll",
                message: err.to_string(),
            }),
        }
    }

    /// The dispatch grid of `n_chains` chains of kernels built with `options`
    /// (`options.lanes` invocations each).
    pub(super) fn chain_grid(
        &self,
        n_chains: usize,
        options: &ShaderOptions,
    ) -> Result<(u32, u32), GpuError> {
        dispatch_grid(
            n_chains * options.lanes as usize,
            options.workgroup_size,
            self.limits.max_compute_workgroups_per_dimension,
        )
    }

    /// Opens the chosen adapter. Runs on the device thread.
    pub(crate) fn start(options: &DeviceOptions) -> Result<DeviceThread, GpuError> {
        let instance = vulkan_instance();
        let adapters = sorted_adapters(&instance);
        let count = adapters.len();
        let index = match options.adapter {
            AdapterChoice::Best => 0,
            AdapterChoice::Index(index) => index,
        };
        let Some(adapter) = adapters.into_iter().nth(index) else {
            return Err(if count == 0 {
                GpuError::NoAdapter
            } else {
                GpuError::AdapterIndex { index, count }
            });
        };
        let mut report = AdapterReport::new(index, &adapter);
        let mut features = adapter.features() & wanted_features();
        if options.hide_shader_f64 {
            report.features.shader_f64 = false;
            features.remove(wgpu::Features::SHADER_F64);
        }
        let default_checks = IndexChecks::default_for(adapter.get_info().backend);
        if report.is_software() && !options.allow_software {
            return Err(GpuError::SoftwareOnly { name: report.name });
        }
        // The adapter's own limits: wgpu's defaults cap storage bindings at 128 MiB.
        let limits = adapter.limits();
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("gpu-actor"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) =
            pollster::block_on(adapter.request_device(&descriptor)).map_err(|err| {
                GpuError::RequestDevice {
                    adapter: report.name.clone(),
                    message: err.to_string(),
                }
            })?;
        let (events_tx, events) = mpsc::channel();
        let uncaptured = events_tx.clone();
        // The default handler panics; ours reports the error to the request that caused it.
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            let _ = uncaptured.send(DeviceEvent::Uncaptured(error.to_string()));
        }));
        device.set_device_lost_callback(move |reason, message| {
            let _ = events_tx.send(DeviceEvent::Lost(format!("{reason:?}: {message}")));
        });
        let layouts = Layouts::new(&device);
        Ok(DeviceThread {
            nuts_sessions: HashMap::new(),
            staging_pools: HashMap::new(),
            fused_sessions: HashMap::new(),
            models: HashMap::new(),
            workspaces: HashMap::new(),
            pipelines: PipelineCache::default(),
            moments_pipelines: HashMap::new(),
            layouts,
            queue,
            device,
            _adapter: adapter,
            _instance: instance,
            report,
            default_checks,
            limits,
            poll_timeout: options.poll_timeout,
            compile_budget: options.compile_budget,
            compiling: false,
            events,
            lost: None,
            stats: DeviceStats::default(),
            next_session: 0,
        })
    }

    pub(super) fn new_session_id(&mut self) -> SessionId {
        self.next_session += 1;
        SessionId(self.next_session)
    }

    pub(crate) fn report(&self) -> &AdapterReport {
        &self.report
    }

    /// The index checks of kernels whose request leaves them open.
    pub(crate) fn default_checks(&self) -> IndexChecks {
        self.default_checks
    }

    /// Serves commands until shutdown or until every handle is gone.
    pub(crate) fn run(mut self, commands: mpsc::Receiver<Command>) {
        while let Some(command) = self.next_command(&commands) {
            match command {
                Command::Upload {
                    model,
                    precision,
                    reply,
                } => reply.send(self.guarded(|t| t.upload(&model, precision))),
                Command::Unload { model, reply } => {
                    reply.send(self.guarded(|t| Ok(t.unload(model))))
                }
                Command::Prepare {
                    model,
                    kernels,
                    reply,
                } => reply.send(self.guarded(|t| t.prepare(model, &kernels))),
                Command::LogpGrad { request, reply } => {
                    reply.send(self.guarded(|t| t.logp_grad(&request)))
                }
                Command::Stats { reply } => reply.send(Ok(self.stats())),
                Command::CheckF64Builtins { reply } => reply.send(self.guarded(|t| {
                    t.check_precision(Precision::F64)?;
                    probe::check_f64_builtins(&t.device, &t.queue, t.poll_timeout)
                })),
                Command::Fault { fault, reply } => reply.send(self.guarded(|t| t.fault(fault))),
                Command::Nuts { command, reply } => reply.send(self.guarded(|t| t.nuts(command))),
                Command::Fused { command, reply } => reply.send(self.guarded(|t| t.fused(command))),
                Command::CheckRng {
                    precision,
                    key,
                    counters,
                    reply,
                } => reply.send(self.guarded(|t| {
                    t.check_precision(precision)?;
                    rng_check::check_rng(
                        &t.device,
                        &t.queue,
                        t.poll_timeout,
                        precision,
                        key,
                        &counters,
                    )
                })),
                Command::Shutdown { reply } => {
                    // Release every wgpu object before answering; but a device whose queue
                    // is still compiling an abandoned first dispatch is leaked instead:
                    // dropping it waits for the compilation (lavapipe joins its queue
                    // thread), which is what the budget was for. It ends with the process.
                    if self.compiling {
                        tracing::warn!("leaving a GPU device behind that is still compiling");
                        std::mem::forget(self);
                    } else {
                        drop(self);
                    }
                    reply.send(Ok(()));
                    return;
                }
            }
        }
    }

    /// The next command, checked for without sleeping for up to [`COMMAND_SPIN`] first on a
    /// hardware adapter (a driver's next dispatch comes a fraction of a millisecond after its
    /// last reply); None once every handle is gone.
    fn next_command(&self, commands: &mpsc::Receiver<Command>) -> Option<Command> {
        let spin = if self.report.is_software() {
            Duration::ZERO
        } else {
            COMMAND_SPIN
        };
        let received = spin_for(spin, || match commands.try_recv() {
            Ok(command) => Some(Some(command)),
            Err(mpsc::TryRecvError::Disconnected) => Some(None),
            Err(mpsc::TryRecvError::Empty) => None,
        });
        received.unwrap_or_else(|| commands.recv().ok())
    }

    /// Runs `work` and turns device events seen meanwhile into its error.
    fn guarded<R>(
        &mut self,
        work: impl FnOnce(&mut DeviceThread) -> Result<R, GpuError>,
    ) -> Result<R, GpuError> {
        for message in self.drain_events() {
            tracing::warn!(%message, "GPU error outside any request");
        }
        if let Some(reason) = &self.lost {
            return Err(GpuError::DeviceLost {
                reason: reason.clone(),
            });
        }
        let result = work(self);
        let uncaptured = self.drain_events();
        if let Some(reason) = &self.lost {
            return Err(GpuError::DeviceLost {
                reason: reason.clone(),
            });
        }
        match (result, uncaptured.into_iter().next()) {
            (Ok(_), Some(message)) => Err(GpuError::Uncaptured { message }),
            (result, _) => result,
        }
    }

    /// Collects pending events: records a loss, returns uncaptured errors.
    fn drain_events(&mut self) -> Vec<String> {
        let mut uncaptured = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            match event {
                DeviceEvent::Uncaptured(message) => uncaptured.push(message),
                DeviceEvent::Lost(reason) => {
                    tracing::error!(%reason, "GPU device lost");
                    self.lost.get_or_insert(reason);
                }
            }
        }
        uncaptured
    }

    fn stats(&self) -> DeviceStats {
        DeviceStats {
            models_resident: self.models.len(),
            pipelines_compiled: self.pipelines.compiled,
            pipeline_hits: self.pipelines.hits,
            ..self.stats
        }
    }

    fn check_precision(&self, precision: Precision) -> Result<(), GpuError> {
        if precision == Precision::F64
            && !self.device.features().contains(wgpu::Features::SHADER_F64)
        {
            return Err(GpuError::F64Unsupported {
                adapter: self.report.name.clone(),
            });
        }
        Ok(())
    }

    fn upload(&mut self, model: &CheckedModel, precision: Precision) -> Result<ModelKey, GpuError> {
        self.check_precision(precision)?;
        let key = ModelKey {
            hash: model.hash(),
            precision,
        };
        if self.models.contains_key(&key) {
            self.stats.model_upload_hits += 1;
            return Ok(key);
        }
        let resources = ModelResources::upload(
            &self.device,
            &self.queue,
            &self.layouts,
            &self.limits,
            model.program().clone(),
            precision,
        )?;
        self.models.insert(key, resources);
        self.stats.models_uploaded += 1;
        Ok(key)
    }

    fn unload(&mut self, model: ModelKey) -> bool {
        let same =
            |key: &PipelineKey| key.model == model.hash && key.options.precision == model.precision;
        self.workspaces.retain(|key, _| !same(key));
        self.nuts_sessions
            .retain(|_, session| session.model() != model);
        self.fused_sessions
            .retain(|_, session| session.model() != model);
        self.pipelines.remove_model(model.hash, model.precision);
        self.models.remove(&model).is_some()
    }

    fn fault(&mut self, fault: Fault) -> Result<(), GpuError> {
        match fault {
            Fault::Panic => panic!("injected fault: the GPU device thread panics"),
            Fault::LoseDevice => {
                self.device.destroy();
                // The device-lost callback runs from a poll.
                let _ = self.device.poll(wgpu::PollType::Poll);
                Ok(())
            }
        }
    }

    /// Starts the builds of `kernels` that are neither built nor under way
    /// ([`super::GpuDevice::prepare`]).
    fn prepare(&mut self, model: ModelKey, kernels: &[Prepare]) -> Result<(), GpuError> {
        for prepare in kernels {
            let (program, plan) = self.plan(model, &prepare.overrides, prepare.n_chains)?;
            let key = PipelineKey {
                model: model.hash,
                kernel: prepare.kernel,
                options: plan.shader,
            };
            self.pipelines
                .start_build(&self.device, &self.layouts, &program, key)?;
        }
        Ok(())
    }

    /// Log densities and gradients of a batch of points: the plan of the request's kernel,
    /// its pipeline and workspace, one dispatch, and its results read back.
    fn logp_grad(&mut self, request: &LogpGradRequest) -> Result<LogpGradBatch, GpuError> {
        let (program, plan) = self.logp_grad_plan(request)?;
        let options = plan.shader;
        let batch = LogpGradShape {
            n_chains: request.points.len() / program.dim,
            dim: program.dim,
            precision: request.model.precision,
        };
        let key = PipelineKey {
            model: request.model.hash,
            kernel: KernelKind::LogpGrad,
            options,
        };
        let grid = self.chain_grid(batch.n_chains, &options)?;
        let pipeline = self.pipeline(request.model, &program, KernelKind::LogpGrad, options)?;
        self.reserve_workspace(key, &program, batch.n_chains)?;
        // Dim-major on the device: coordinate j of chain c at j * n_chains + c.
        let points = encode(
            crate::kernels::layout::transposed(&request.points, batch.n_chains, batch.dim)
                .into_iter(),
            batch.precision,
        );
        let started = Instant::now();
        let (submission, staging) =
            self.submit_logp_grad(request.model, key, &pipeline, grid, &points, batch)?;
        self.stats.batches += 1;
        let values = self.read_logp_grad(key, &staging, batch, submission)?;
        let elapsed = started.elapsed();
        let (logp, grad) = batch.chain_major(&values);
        Ok(LogpGradBatch {
            n_chains: batch.n_chains,
            dim: batch.dim,
            logp,
            grad,
            placement: options.placement,
            elapsed,
        })
    }

    /// The program and kernel plan of `request`; an error for points that are not whole
    /// chains, or a model whose gradient does not fit under the loop limit.
    fn logp_grad_plan(
        &self,
        request: &LogpGradRequest,
    ) -> Result<(Arc<sampler::Program>, KernelPlan), GpuError> {
        let overrides = KernelOverrides::logp_grad(request.placement, request.lanes);
        let (program, plan) = self.plan(request.model, &overrides, 0)?;
        let dim = program.dim;
        let len = request.points.len();
        if dim == 0 || len == 0 || !len.is_multiple_of(dim) {
            return Err(GpuError::BadPoints { len, dim });
        }
        if let Some(limit) = plan.loop_limit {
            crate::wgsl::LoopBudget::check_logp_grad(&program, limit).map_err(|exceeded| {
                GpuError::LoopLimit {
                    adapter: self.report.name.clone(),
                    exceeded,
                }
            })?;
        }
        Ok((program, plan))
    }

    /// Makes the workspace of pipeline `key` hold at least `n_chains` chains.
    fn reserve_workspace(
        &mut self,
        key: PipelineKey,
        program: &sampler::Program,
        n_chains: usize,
    ) -> Result<(), GpuError> {
        if self
            .workspaces
            .get(&key)
            .is_some_and(|workspace| workspace.capacity >= n_chains)
        {
            return Ok(());
        }
        let capacity = LogpGradWorkspace::capacity_for(n_chains);
        self.workspaces.remove(&key);
        let workspace = LogpGradWorkspace::new(
            &self.device,
            &self.layouts,
            &self.limits,
            program,
            &key.options,
            capacity,
        )?;
        self.workspaces.insert(key, workspace);
        Ok(())
    }

    /// Writes the encoded `points` into the workspace of pipeline `key`, dispatches the
    /// kernel over `grid` and copies its results into the workspace's read-back buffer,
    /// which it returns with the submission.
    fn submit_logp_grad(
        &self,
        model: ModelKey,
        key: PipelineKey,
        pipeline: &wgpu::ComputePipeline,
        grid: (u32, u32),
        points: &[u8],
        batch: LogpGradShape,
    ) -> Result<(wgpu::SubmissionIndex, wgpu::Buffer), GpuError> {
        let (Some(workspace), Some(resources)) =
            (self.workspaces.get(&key), self.models.get(&model))
        else {
            return Err(GpuError::ModelNotLoaded { model });
        };
        let mut params = [0u32; 4];
        params[0] = batch.n_chains as u32;
        let submission = scoped(&self.device, "logp_grad dispatch", || {
            self.queue
                .write_buffer(&workspace.params, 0, bytemuck::cast_slice(&params));
            self.queue.write_buffer(&workspace.theta, 0, points);
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("logp_grad"),
                });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("logp_grad"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, &resources.bind_group, &[]);
                pass.set_bind_group(1, &workspace.bind_group, &[]);
                pass.dispatch_workgroups(grid.0, grid.1, 1);
            }
            let (logp_bytes, grad_bytes) = (batch.logp_bytes(), batch.grad_bytes());
            let staging = &workspace.staging;
            encoder.copy_buffer_to_buffer(&workspace.logp, 0, staging, 0, logp_bytes);
            encoder.copy_buffer_to_buffer(&workspace.grad, 0, staging, logp_bytes, grad_bytes);
            self.queue.submit([encoder.finish()])
        })?;
        Ok((submission, workspace.staging.clone()))
    }

    /// The bytes of a batch's results in `staging`, the read-back buffer of pipeline `key`'s
    /// workspace, after `submission`.
    fn read_logp_grad(
        &mut self,
        key: PipelineKey,
        staging: &wgpu::Buffer,
        batch: LogpGradShape,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>, GpuError> {
        let total = batch.logp_bytes() + batch.grad_bytes();
        match self.read_back(staging, total, submission) {
            Ok(values) => Ok(values),
            Err(err) => {
                // A timed-out batch may still write its buffers: never reuse them.
                self.workspaces.remove(&key);
                Err(err)
            }
        }
    }

    /// Waits for `submission` with the watchdog.
    pub(super) fn wait_for(&self, submission: wgpu::SubmissionIndex) -> Result<(), GpuError> {
        match self.device.poll(wgpu::PollType::Wait {
            submission_index: Some(submission),
            timeout: Some(self.poll_timeout),
        }) {
            Ok(_) => Ok(()),
            Err(wgpu::PollError::Timeout) => Err(GpuError::Timeout {
                waited: self.poll_timeout,
            }),
            Err(err) => Err(GpuError::Device {
                operation: "poll",
                message: err.to_string(),
            }),
        }
    }

    /// The read-back buffers of `bytes` bytes each, shared with earlier sessions of that size:
    /// allocating tens of megabytes of mappable memory costs a hardware adapter's host as
    /// much as a few dispatches. Pools that no open session uses and of another size are dropped,
    /// so that the device thread keeps at most one idle size.
    ///
    /// Where the device has `MAPPABLE_PRIMARY_BUFFERS`, the buffers are also storage, so that a
    /// kernel can write its draws straight into one ([`crate::DrawsOutput::Mapped`]).
    pub(super) fn staging_pool(&mut self, bytes: u64) -> StagingPool {
        let storage = self
            .device
            .features()
            .contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS);
        self.staging_pools
            .retain(|&size, pool| size == bytes || pool.in_use());
        self.staging_pools
            .entry(bytes)
            .or_insert_with(|| StagingPool::new(bytes, storage))
            .clone()
    }

    /// Maps `staging` after `submission`, waits with the watchdog, and copies its bytes out.
    pub(super) fn read_back(
        &self,
        staging: &wgpu::Buffer,
        bytes: u64,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>, GpuError> {
        let view = self.map_read(staging, bytes, submission)?;
        let copy = view.to_vec();
        drop(view);
        staging.unmap();
        Ok(copy)
    }

    /// Maps the first `bytes` of `staging` for reading once `submission` is done, waiting
    /// with the watchdog, and returns the view; the caller unmaps.
    ///
    /// Dispatches are waited for by polling without blocking for up to [`spin_wait`]: a
    /// blocking wait costs a thread sleep and wake-up, tens to hundreds of microseconds, which
    /// is most of the round trip of a small dispatch and a tenth of the host's time between
    /// two of a sampling run's. Longer ones then block as usual.
    pub(super) fn map_read(
        &self,
        staging: &wgpu::Buffer,
        bytes: u64,
        submission: wgpu::SubmissionIndex,
    ) -> Result<wgpu::BufferView, GpuError> {
        let (mapped_tx, mapped) = mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, 0..bytes, move |result| {
            let _ = mapped_tx.send(result);
        });
        let poll_error = |err: wgpu::PollError| GpuError::Device {
            operation: "poll",
            message: err.to_string(),
        };
        let map_error = |message: String| GpuError::Device {
            operation: "readback",
            message,
        };
        let spun = spin_for(spin_wait(&self.report), || {
            match self.device.poll(wgpu::PollType::Poll) {
                Err(err) => Some(Err(poll_error(err))),
                Ok(_) => mapped.try_recv().ok().map(Ok),
            }
        });
        let outcome = match spun.transpose()? {
            Some(outcome) => outcome,
            None => {
                match self.device.poll(wgpu::PollType::Wait {
                    submission_index: Some(submission),
                    timeout: Some(self.poll_timeout),
                }) {
                    Ok(_) => {}
                    Err(wgpu::PollError::Timeout) => {
                        return Err(GpuError::Timeout {
                            waited: self.poll_timeout,
                        });
                    }
                    Err(err) => return Err(poll_error(err)),
                }
                mapped.try_recv().map_err(|_| {
                    map_error("the buffer was not mapped after the submission finished".into())
                })?
            }
        };
        outcome.map_err(|err| map_error(err.to_string()))?;
        staging
            .get_mapped_range(0..bytes)
            .map_err(|err| map_error(err.to_string()))
    }
}

/// The shape of one batch of the log-density kernel.
#[derive(Clone, Copy, Debug)]
struct LogpGradShape {
    n_chains: usize,
    dim: usize,
    precision: Precision,
}

impl LogpGradShape {
    /// Bytes of the log densities, first in the read-back buffer.
    fn logp_bytes(&self) -> u64 {
        self.n_chains as u64 * self.precision.size_bytes()
    }

    /// Bytes of the gradients, after the log densities, coordinate after coordinate.
    fn grad_bytes(&self) -> u64 {
        self.logp_bytes() * self.dim as u64
    }

    /// The log densities and the gradients, chain after chain, from the read-back bytes.
    fn chain_major(&self, bytes: &[u8]) -> (Vec<f64>, Vec<f64>) {
        let (n_chains, dim) = (self.n_chains, self.dim);
        let values = decode(bytes, self.precision);
        let (logp, grad_dim_major) = values.split_at(n_chains);
        // Read in order, written a chain's coordinates apart: faster this way round than in
        // blocks (0.12 against 0.56 ms for 8192 chains of 21 coordinates on the 2-core
        // development machine).
        let mut grad = vec![0.0; n_chains * dim];
        for (j, column) in grad_dim_major.chunks_exact(n_chains).enumerate() {
            for (c, &g) in column.iter().enumerate() {
                grad[c * dim + j] = g;
            }
        }
        (logp.to_vec(), grad)
    }
}

/// How long the device thread polls without sleeping before it blocks, as CUDA's default
/// schedule spins while the host has cores to spare: a dispatch's length on a hardware
/// adapter (tens of milliseconds at most in a sampling run), and 0.5 ms on a software one,
/// whose dispatches run on the same cores as the polling thread.
pub(crate) fn spin_wait(report: &AdapterReport) -> Duration {
    if report.is_software() {
        Duration::from_micros(500)
    } else {
        Duration::from_millis(50)
    }
}

/// The most the device thread polls for its next command without sleeping.
const COMMAND_SPIN: Duration = Duration::from_millis(2);

/// Workgroups `(x, y)` for `invocations` invocations (chains times lanes):
/// one-dimensional up to the per-dimension limit, then two-dimensional (the kernel computes
/// the invocation `(y * n_x + x) * size + local`, and its chain from that).
pub(crate) fn dispatch_grid(
    invocations: usize,
    workgroup_size: u32,
    max_per_dimension: u32,
) -> Result<(u32, u32), GpuError> {
    let groups = (invocations as u64).div_ceil(u64::from(workgroup_size.max(1)));
    let max = u64::from(max_per_dimension.max(1));
    let x = groups.clamp(1, max);
    let y = groups.div_ceil(x).max(1);
    if y > max || invocations > u32::MAX as usize {
        return Err(GpuError::TooLarge {
            what: "a dispatch of that many chains",
            needed: groups,
            limit: max * max,
        });
    }
    Ok((x as u32, y as u32))
}
