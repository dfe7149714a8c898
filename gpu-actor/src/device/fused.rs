//! Fused-kernel sessions on the device thread: `shaders/fused.wgsl`'s buffers for N chains
//! and up to K steps, allocated once per sampling run. Each dispatch uploads the points to
//! integrate from and reads back every step's state.

use std::time::{Duration, Instant};

use super::nuts::SessionId;
use super::resources::{buffer, check_bytes, encode, entry};
use super::scope::scoped;
use super::thread::DeviceThread;
use super::{KernelOverrides, KernelPlan, ModelKey};
use crate::error::GpuError;
use crate::kernels::layout::FuParams;
use crate::wgsl::{KernelKind, Precision};

/// How to open a fused session.
#[derive(Clone, Debug)]
pub(crate) struct FusedOpen {
    pub model: ModelKey,
    pub n_chains: usize,
    /// Most steps a dispatch may run.
    pub max_steps: usize,
    pub overrides: KernelOverrides,
}

/// One dispatch: every chain integrates `n_steps` steps from its point (chain after chain:
/// `q[c * dim + j]`) with its signed step size; a step size of 0 leaves a chain idle.
#[derive(Clone, Debug)]
pub(crate) struct FusedRun {
    pub n_steps: usize,
    /// The diagonal inverse metric, when it changed.
    pub metric: Option<Vec<f64>>,
    pub eps: Vec<f64>,
    pub q: Vec<f64>,
    pub p: Vec<f64>,
    pub g: Vec<f64>,
}

/// Every step's state, as bytes of the session's precision.
#[derive(Clone, Debug)]
pub(crate) struct FusedBatch {
    pub n: usize,
    pub dim: usize,
    pub n_steps: usize,
    pub precision: Precision,
    values: Vec<u8>,
    /// From submission to readable results (upload excluded).
    pub elapsed: Duration,
}

/// Which vector of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepRole {
    Q = 0,
    P = 1,
    G = 2,
}

impl FusedBatch {
    fn real(&self, index: usize) -> f64 {
        match self.precision {
            Precision::F32 => {
                let b = &self.values[4 * index..4 * index + 4];
                f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            }
            Precision::F64 => {
                let b = &self.values[8 * index..8 * index + 8];
                f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            }
        }
    }

    /// Coordinate `j` of `role` after step `k` (0-based) of chain `c`.
    pub(crate) fn at(&self, k: usize, role: StepRole, j: usize, c: usize) -> f64 {
        self.real(((k * 3 + role as usize) * self.dim + j) * self.n + c)
    }

    /// The log density after step `k` of chain `c`.
    pub(crate) fn logp(&self, k: usize, c: usize) -> f64 {
        self.real((self.n_steps * 3 * self.dim + k) * self.n + c)
    }

    /// Copies `role` after step `k` of chain `c` into `out`.
    pub(crate) fn copy_to(&self, k: usize, role: StepRole, c: usize, out: &mut [f64]) {
        for (j, value) in out.iter_mut().enumerate() {
            *value = self.at(k, role, j, c);
        }
    }
}

/// Requests of a fused session.
pub(crate) enum FusedCommand {
    Open(FusedOpen),
    Run(SessionId, FusedRun),
    Close(SessionId),
}

/// What a [`FusedCommand`] answers.
pub(crate) enum FusedReply {
    Opened(SessionId),
    Batch(Box<FusedBatch>),
    Done,
}

pub(crate) struct FusedSession {
    model: ModelKey,
    n: usize,
    dim: usize,
    max_steps: usize,
    precision: Precision,
    pipeline: wgpu::ComputePipeline,
    grid: (u32, u32),
    params: wgpu::Buffer,
    /// The steps per chain that `params` holds, so that it is written only when it changes.
    params_steps: Option<usize>,
    consts: wgpu::Buffer,
    state: wgpu::Buffer,
    out: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    _scratch: wgpu::Buffer,
}

/// An error ([`GpuError::TooLarge`]) for the first buffer of a fused session of `n_chains`
/// chains of `program`, dispatches of up to `max_steps` steps, that a device cannot hold
/// under `plan` (its read-back buffer is as large as the steps'). What opening the session
/// checks, for a caller that sizes its sessions first (`sampling/pieces.rs`).
pub(crate) fn check_session(
    program: &sampler::Program,
    plan: &KernelPlan,
    n_chains: usize,
    max_steps: usize,
) -> Result<(), GpuError> {
    let bytes = |values: usize| values as u64 * plan.shader.precision.size_bytes();
    let point_values = (3 * program.dim + 1) * n_chains;
    for (what, needed) in [
        ("the fused kernel's points", bytes(point_values)),
        (
            "the fused kernel's steps",
            bytes(max_steps.max(1) * point_values),
        ),
        (
            "the chains' tapes (storage placement)",
            crate::wgsl::scratch_bytes(program, &plan.shader, n_chains),
        ),
    ] {
        check_bytes(what, needed, plan.storage_limit)?;
    }
    Ok(())
}

impl FusedSession {
    pub(crate) fn model(&self) -> ModelKey {
        self.model
    }
}

impl DeviceThread {
    pub(super) fn fused(&mut self, command: FusedCommand) -> Result<FusedReply, GpuError> {
        match command {
            FusedCommand::Open(open) => self.fused_open(&open).map(FusedReply::Opened),
            FusedCommand::Run(id, run) => self
                .fused_run(id, &run)
                .map(|batch| FusedReply::Batch(Box::new(batch))),
            FusedCommand::Close(id) => {
                self.fused_sessions.remove(&id);
                Ok(FusedReply::Done)
            }
        }
    }

    fn fused_open(&mut self, open: &FusedOpen) -> Result<SessionId, GpuError> {
        let (program, plan) = self.plan(open.model, &open.overrides, open.n_chains)?;
        let options = plan.shader;
        let precision = open.model.precision;
        let pipeline = self.pipeline(open.model, &program, KernelKind::Fused, options)?;
        let (n, dim, max_steps) = (open.n_chains, program.dim, open.max_steps.max(1));
        let grid = self.chain_grid(n, &options)?;
        let size = precision.size_bytes();
        let bytes = |values: usize| values as u64 * size;
        let out_values = max_steps * (3 * dim + 1) * n;
        let scratch_bytes = crate::wgsl::scratch_bytes(&program, &options, n);
        check_session(&program, &plan, n, max_steps)?;
        let layout = &self.layouts.fused;
        let device = &self.device;
        let session = scoped(device, "fused session allocation", || {
            use wgpu::BufferUsages as U;
            let params = buffer(device, "fused params", 16, U::UNIFORM | U::COPY_DST);
            let consts = buffer(device, "fused consts", bytes(dim), U::STORAGE | U::COPY_DST);
            let state = buffer(
                device,
                "fused points",
                bytes((3 * dim + 1) * n),
                U::STORAGE | U::COPY_DST,
            );
            let out = buffer(
                device,
                "fused steps",
                bytes(out_values),
                U::STORAGE | U::COPY_SRC,
            );
            let scratch = buffer(device, "fused tapes", scratch_bytes, U::STORAGE);
            let staging = buffer(
                device,
                "fused readback",
                bytes(out_values),
                U::MAP_READ | U::COPY_DST,
            );
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("fused chains"),
                layout,
                entries: &[
                    entry(crate::wgsl::SCRATCH_BINDING.binding, &scratch),
                    entry(crate::wgsl::FUSED_PARAMS_BINDING.binding, &params),
                    entry(crate::wgsl::FUSED_CONSTS_BINDING.binding, &consts),
                    entry(crate::wgsl::FUSED_STATE_BINDING.binding, &state),
                    entry(crate::wgsl::FUSED_OUT_BINDING.binding, &out),
                ],
            });
            FusedSession {
                model: open.model,
                n,
                dim,
                max_steps,
                precision,
                pipeline,
                grid,
                params,
                params_steps: None,
                consts,
                state,
                out,
                staging,
                bind_group,
                _scratch: scratch,
            }
        })?;
        let id = self.new_session_id();
        self.fused_sessions.insert(id, session);
        Ok(id)
    }

    fn fused_run(&mut self, id: SessionId, run: &FusedRun) -> Result<FusedBatch, GpuError> {
        let session = self
            .fused_sessions
            .get_mut(&id)
            .ok_or(GpuError::SessionGone { session: id.0 })?;
        let model = self
            .models
            .get(&session.model)
            .ok_or(GpuError::ModelNotLoaded {
                model: session.model,
            })?;
        let (n, dim) = (session.n, session.dim);
        if run.n_steps == 0
            || run.n_steps > session.max_steps
            || run.eps.len() != n
            || run.q.len() != n * dim
            || run.p.len() != n * dim
            || run.g.len() != n * dim
            || run.metric.as_ref().is_some_and(|m| m.len() != dim)
        {
            return Err(GpuError::BadPoints {
                len: run.q.len(),
                dim,
            });
        }
        let precision = session.precision;
        let size = precision.size_bytes();
        fn dim_major(values: &[f64], n: usize, dim: usize) -> impl Iterator<Item = f64> + '_ {
            (0..dim).flat_map(move |j| (0..n).map(move |c| values[c * dim + j]))
        }
        // One write per run: the points, then the step sizes.
        let state = encode(
            dim_major(&run.q, n, dim)
                .chain(dim_major(&run.p, n, dim))
                .chain(dim_major(&run.g, n, dim))
                .chain(run.eps.iter().copied()),
            precision,
        );
        let metric = run
            .metric
            .as_ref()
            .map(|m| encode(m.iter().copied(), precision));
        let params = FuParams {
            n_chains: n as u32,
            n_steps: run.n_steps as u32,
            pad: [0; 2],
        };
        let out_bytes = (run.n_steps * (3 * dim + 1) * n) as u64 * size;
        let started = Instant::now();
        let submission = scoped(&self.device, "fused dispatch", || {
            if session.params_steps != Some(run.n_steps) {
                self.queue
                    .write_buffer(&session.params, 0, bytemuck::bytes_of(&params));
                session.params_steps = Some(run.n_steps);
            }
            if let Some(metric) = &metric {
                self.queue.write_buffer(&session.consts, 0, metric);
            }
            self.queue.write_buffer(&session.state, 0, &state);
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("fused"),
                });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("fused"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&session.pipeline);
                pass.set_bind_group(0, &model.bind_group, &[]);
                pass.set_bind_group(1, &session.bind_group, &[]);
                pass.dispatch_workgroups(session.grid.0, session.grid.1, 1);
            }
            encoder.copy_buffer_to_buffer(&session.out, 0, &session.staging, 0, out_bytes);
            self.queue.submit([encoder.finish()])
        })?;
        self.stats.batches += 1;
        let staging = session.staging.clone();
        let values = self.read_back(&staging, out_bytes, submission)?;
        Ok(FusedBatch {
            n,
            dim,
            n_steps: run.n_steps,
            precision,
            values,
            elapsed: started.elapsed(),
        })
    }
}
