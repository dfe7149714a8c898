//! NUTS sessions on the device thread: the chain state of `shaders/nuts.wgsl` for N chains,
//! allocated once per sampling run and kept on the device between dispatches. Only draws,
//! their statistics and a few per-chain integers come back; the driver (`crate::sampling`)
//! decides what each dispatch does.

use std::ops::Range;
use std::time::{Duration, Instant};

use super::pipelines::moments_pipeline;
use super::resources::{
    MappedBytes, StagingPool, buffer, check_bytes, decode, decode_into, encode, entry,
};
use super::scope::scoped;
use super::thread::DeviceThread;
use super::{DrawsOutput, KernelOverrides, KernelPlan, ModelKey};
use crate::error::GpuError;
use crate::kernels::layout::{
    NM_CHUNK, NS_O_COUNT, NS_S_COUNT, NS_S_LOGP_SAMP, NS_S_STEP, NS_U_COUNT, NS_U_SEARCH_DIR,
    NS_U_SEARCH_EVALS, NS_V_GSAMP, NS_V_QSAMP, NmParams, NsParams, NsSizes,
};
use crate::wgsl::{KernelKind, Precision, ShaderOptions};

/// A sampling session on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SessionId(pub u64);

/// How to open a NUTS session.
#[derive(Clone, Debug)]
pub(crate) struct NutsOpen {
    pub model: ModelKey,
    pub n_chains: usize,
    pub max_depth: u32,
    /// Most output slots a dispatch may fill.
    pub capacity: usize,
    /// Whether dispatches may record gradients with the draws.
    pub with_grad: bool,
    /// Most output slots a dispatch that records gradients may fill (at most `capacity`).
    pub grad_capacity: usize,
    /// What the caller fixes of the kernels' plan, where sampling dispatches write their
    /// draws included.
    pub overrides: KernelOverrides,
}

/// What sizes a NUTS session's buffers besides its program and plan: [`NutsOpen`]'s numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NutsShape {
    pub n_chains: usize,
    pub max_depth: u32,
    /// Most output slots a dispatch may fill.
    pub capacity: usize,
    /// Whether dispatches may record gradients with the draws.
    pub with_grad: bool,
    /// Most output slots a dispatch that records gradients may fill (at most `capacity`).
    pub grad_capacity: usize,
}

impl NutsShape {
    /// The sizes of the buffers of a session of this shape over `dim` coordinates, on
    /// `lanes` invocations per chain.
    fn sizes(&self, dim: usize, lanes: u32) -> NsSizes {
        NsSizes {
            n: self.n_chains,
            dim,
            max_depth: self.max_depth as usize,
            capacity: self.capacity.max(1),
            with_grad: self.with_grad,
            grad_capacity: self.grad_capacity.min(self.capacity),
            chain_major: lanes > 1,
        }
    }
}

/// An error ([`GpuError::TooLarge`]) for the first buffer of a NUTS session of `shape` over
/// `program` that a device cannot hold under `plan`: a storage buffer larger than
/// `plan.storage_limit`, or the read-back buffer larger than `max_buffer_size`. What
/// opening the session checks, for a caller that sizes its sessions first
/// (`sampling/pieces.rs`).
pub(crate) fn check_session(
    program: &sampler::Program,
    plan: &KernelPlan,
    shape: &NutsShape,
    max_buffer_size: u64,
) -> Result<(), GpuError> {
    let sizes = shape.sizes(program.dim, plan.shader.lanes);
    SessionBytes::of(program, &plan.shader, &sizes).check(plan.storage_limit, max_buffer_size)
}

impl NutsOpen {
    /// The numbers that size the session's buffers.
    pub(crate) fn shape(&self) -> NutsShape {
        NutsShape {
            n_chains: self.n_chains,
            max_depth: self.max_depth,
            capacity: self.capacity,
            with_grad: self.with_grad,
            grad_capacity: self.grad_capacity,
        }
    }
}

/// The starting state of every chain, chain after chain (`q[c * dim + j]`).
#[derive(Clone, Debug)]
pub(crate) struct NutsStart {
    pub q: Vec<f64>,
    pub g: Vec<f64>,
    pub logp: Vec<f64>,
    pub step: Vec<f64>,
}

/// One dispatch of the transition kernel, or of the step-size search.
#[derive(Clone, Debug)]
pub(crate) struct NutsDispatch {
    pub params: NsParams,
    /// New settings and metric (`NS_C_*` then the inverse metric), when they changed.
    pub consts: Option<Vec<f64>>,
    /// Pool the dispatch's draws of a warmup block on the device (`shaders/nuts_moments.wgsl`).
    pub moments: Option<MomentsRequest>,
    /// Read back the draws' values; their statistics always come back.
    pub read_values: bool,
}

impl NutsDispatch {
    /// A dispatch that reads back everything and pools nothing.
    pub(crate) fn plain(params: NsParams, consts: Option<Vec<f64>>) -> NutsDispatch {
        NutsDispatch {
            params,
            consts,
            moments: None,
            read_values: true,
        }
    }
}

/// Which draws the moments kernel pools: those of iterations `block_start..block_start + bins`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MomentsRequest {
    pub block_start: u32,
    pub bins: u32,
    /// Only draws where the chain moved (nutpie's rule); otherwise every draw (Stan's).
    pub usable_only: bool,
    /// Draws whose log density is below this are left out (`f64::NEG_INFINITY`: none).
    pub lp_floor: f64,
}

/// What one dispatch of the transition kernel produced: the output slots as bytes of the
/// session's precision, decoded on demand from the mapped read-back buffer.
#[derive(Debug)]
pub(crate) struct NutsBatch {
    pub sizes: NsSizes,
    pub precision: Precision,
    /// The read-back bytes: the moments kernel's output, the output slots from value
    /// `out_start` on (all of them, or their statistics only) at byte `out_at`, the integers
    /// at the bytes `uint` (4-byte aligned). None for a step-size search.
    bytes: Option<MappedBytes>,
    out_at: usize,
    out_start: usize,
    uint: Range<usize>,
    /// The moments kernel's output, when asked for: per chunk and iteration of the
    /// `moment_bins` asked for, a count; then the means and sums of squared deviations.
    moments: Vec<f64>,
    moment_bins: usize,
    /// From submission to readable results.
    pub elapsed: Duration,
    /// The kernels' own time on the device, where the adapter has timestamps.
    pub kernel_time: Option<Duration>,
}

#[cfg(test)]
impl NutsBatch {
    /// A sampling batch of `sizes` in f32 with every output value `value(slot, k, c)`, real
    /// statistic `k` of every draw `0.5 + k / 4` and every integer state and statistic
    /// `draws` (so that each chain made `draws` draws), as the read-back would hold it.
    pub(crate) fn synthetic(
        sizes: NsSizes,
        draws: u32,
        value: impl Fn(usize, usize, usize) -> f32,
    ) -> NutsBatch {
        let mut out = vec![0.0f32; sizes.out()];
        for slot in 0..sizes.capacity {
            for c in 0..sizes.n {
                for k in 0..sizes.width() {
                    out[sizes.out_at(slot, k, c)] = value(slot, k, c);
                }
                for k in 0..NS_O_COUNT {
                    out[sizes.out_stat_at(slot, k, c)] = 0.5 + k as f32 / 4.0;
                }
            }
        }
        let mut bytes: Vec<u8> = bytemuck::cast_slice(&out).to_vec();
        let uint_start = bytes.len();
        bytes.extend(bytemuck::cast_slice(&vec![draws; sizes.uint()]));
        NutsBatch {
            sizes,
            precision: Precision::F32,
            uint: uint_start..bytes.len(),
            bytes: Some(MappedBytes::from_vec(bytes)),
            out_at: 0,
            out_start: 0,
            moments: Vec::new(),
            moment_bins: 0,
            elapsed: Duration::ZERO,
            kernel_time: None,
        }
    }
}

impl NutsBatch {
    /// An integer state role (`NS_U_*`) of every chain, in order.
    pub(crate) fn state_row(&self, role: usize) -> &[u32] {
        let n = self.sizes.n;
        &self.uints()[role * n..(role + 1) * n]
    }

    /// The integer state and statistics (`NsSizes::uint`).
    fn uints(&self) -> &[u32] {
        match &self.bytes {
            Some(bytes) => bytemuck::cast_slice(&bytes[self.uint.clone()]),
            None => &[],
        }
    }

    /// Whether the draws' values came back ([`NutsDispatch::read_values`]).
    pub(crate) fn has_values(&self) -> bool {
        self.out_start == 0
    }

    /// Chunks of [`NM_CHUNK`] chains in the pooled moments.
    pub(crate) fn moment_chunks(&self) -> usize {
        self.sizes.n.div_ceil(NM_CHUNK)
    }

    /// The pooled moments of chunk `chunk`'s draws of iteration `block_start + bin`: their
    /// count, and per draw value its mean and sum of squared deviations
    /// (`[mean_0, m2_0, mean_1, ...]`). Only when the dispatch asked for them.
    pub(crate) fn moments(&self, chunk: usize, bin: usize) -> (f64, &[f64]) {
        let bins = self.moment_bins;
        let width = self.sizes.width();
        let at = chunk * bins + bin;
        let counts = self.moment_chunks() * bins;
        let start = counts + 2 * at * width;
        (self.moments[at], &self.moments[start..start + 2 * width])
    }

    /// Draw value `k` of slot `slot` for the chains `chains`, in order, into `out` (one
    /// contiguous read, or one value per chain where the slots are chain-major). Only in a
    /// batch [`NutsBatch::has_values`].
    pub(crate) fn value_row(&self, slot: usize, k: usize, chains: Range<usize>, out: &mut [f64]) {
        debug_assert!(self.has_values());
        let stride = self.sizes.out_chain_stride(false);
        self.real_row(self.sizes.out_at(slot, k, chains.start), stride, out);
    }

    /// The first `out.len()` draw values of chain `c` in slot `slot`, into `out`: one
    /// contiguous read where the slots are chain-major. Only in a batch
    /// [`NutsBatch::has_values`].
    pub(crate) fn chain_values(&self, slot: usize, c: usize, out: &mut [f64]) {
        debug_assert!(self.has_values());
        let stride = self.sizes.out_value_stride();
        self.real_row(self.sizes.out_at(slot, 0, c), stride, out);
    }

    /// The real statistics (`NS_O_*`) of chain `c` in slot `slot`, into `out`.
    pub(crate) fn chain_stats(&self, slot: usize, c: usize, out: &mut [f64; NS_O_COUNT]) {
        let at = self.sizes.out_stat_at(slot, 0, c) - self.out_start;
        self.real_row(at, self.sizes.out_value_stride(), out);
    }

    /// Real statistic `k` of slot `slot` for the chains `chains`, in order, into `out`.
    pub(crate) fn stat_row(&self, slot: usize, k: usize, chains: Range<usize>, out: &mut [f64]) {
        let at = self.sizes.out_stat_at(slot, k, chains.start) - self.out_start;
        self.real_row(at, self.sizes.out_chain_stride(true), out);
    }

    /// Integer statistic `k` of slot `slot` for the chains `chains`, in order.
    pub(crate) fn stat_u_row(&self, slot: usize, k: usize, chains: Range<usize>) -> &[u32] {
        let at = self.sizes.out_uint_at(slot, k, chains.start);
        &self.uints()[at..at + chains.len()]
    }

    /// `out.len()` reals of the output slots from value index `at` (after `out_start`'s skip),
    /// `stride` values apart.
    fn real_row(&self, at: usize, stride: usize, out: &mut [f64]) {
        if out.is_empty() {
            return;
        }
        let size = self.precision.size_bytes() as usize;
        let all = self.bytes.as_deref().unwrap_or(&[]);
        let from = self.out_at + at * size;
        if stride == 1 {
            decode_into(&all[from..from + out.len() * size], self.precision, out);
            return;
        }
        for (i, value) in out.iter_mut().enumerate() {
            let start = from + i * stride * size;
            decode_into(
                &all[start..start + size],
                self.precision,
                std::slice::from_mut(value),
            );
        }
    }
}

/// Per-chain results of a step-size search or a snapshot.
#[derive(Clone, Debug)]
pub(crate) struct NutsSnapshot {
    /// Integer state, role-major (`NS_U_*`).
    pub uint: Vec<u32>,
    /// Step sizes.
    pub step: Vec<f64>,
    /// Current points, chain after chain.
    pub q: Vec<f64>,
}

impl NutsSnapshot {
    pub(crate) fn state(&self, role: usize, c: usize) -> u32 {
        self.uint[role * self.step.len() + c]
    }

    pub(crate) fn search_evals(&self, c: usize) -> u32 {
        self.state(NS_U_SEARCH_EVALS, c)
    }

    /// Whether chain `c`'s step-size search ran out of its dispatch's tries and goes on in
    /// the next.
    pub(crate) fn search_under_way(&self, c: usize) -> bool {
        self.state(NS_U_SEARCH_DIR, c) != 0
    }
}

/// Requests of a NUTS session.
pub(crate) enum NutsCommand {
    Open(NutsOpen),
    Start(SessionId, NutsStart),
    Run(SessionId, NutsDispatch),
    /// Submits a transition dispatch behind the session's queued one and answers with that
    /// one's batch ([`NutsReply::Queued`]); [`NutsCommand::Collect`] takes the last.
    Queue(SessionId, NutsDispatch),
    /// The batch of the session's queued dispatch.
    Collect(SessionId),
    Search(SessionId, NutsDispatch),
    Snapshot(SessionId),
    /// Gives each `(chain, from)` pair's `chain` the state of chain `from`: its point, gradient
    /// and every per-chain scalar (log density, step size, dual averaging). Their integer
    /// state (iteration, random stream) stays their own. Between transitions only.
    Reseat(SessionId, Vec<(usize, usize)>),
    Close(SessionId),
}

/// What a [`NutsCommand`] answers.
pub(crate) enum NutsReply {
    Opened(SessionId),
    Done,
    Batch(Box<NutsBatch>),
    /// The batch of the dispatch queued before, if there was one.
    Queued(Option<Box<NutsBatch>>),
    Snapshot(Box<NutsSnapshot>),
}

/// A dispatch on its way through the device, and how to read its batch.
pub(crate) struct Submitted {
    submission: wgpu::SubmissionIndex,
    /// None for a step-size search, which reads nothing back.
    staging: Option<wgpu::Buffer>,
    sizes: NsSizes,
    out_start: usize,
    moments_bytes: u64,
    out_bytes: u64,
    uint_bytes: u64,
    /// Nanoseconds per timestamp tick, where the passes are timed.
    period: Option<f64>,
    passes: u32,
    moment_bins: usize,
    started: Instant,
}

/// A session's buffers and pipelines.
pub(crate) struct NutsSession {
    model: ModelKey,
    sizes: NsSizes,
    precision: Precision,
    nuts: wgpu::ComputePipeline,
    search: wgpu::ComputePipeline,
    moments: MomentsKernel,
    /// Read-back buffers, recycled.
    staging: StagingPool,
    /// Begin and end of the transition and moments passes, where the adapter has timestamps.
    timestamps: Option<Timestamps>,
    grid: (u32, u32),
    params: wgpu::Buffer,
    consts: wgpu::Buffer,
    vec: wgpu::Buffer,
    uint: wgpu::Buffer,
    out: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    /// Where sampling dispatches write their draws: [`DrawsOutput::Mapped`] only where the
    /// read-back buffers can be bound as storage.
    draws: DrawsOutput,
    /// The dispatch submitted by [`NutsCommand::Queue`] and not yet read.
    queued: Option<Submitted>,
    ckpt: wgpu::Buffer,
    scratch: wgpu::Buffer,
}

/// The moments kernel of a session: its pipeline, parameters, output and bindings.
struct MomentsKernel {
    pipeline: wgpu::ComputePipeline,
    params: wgpu::Buffer,
    out: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
}

/// A query set of four timestamps and the buffer it resolves into.
struct Timestamps {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    /// Nanoseconds per tick.
    period: f64,
}

/// Timestamps per dispatch: begin and end of each of two passes.
const TIMESTAMPS: u32 = 4;
const TIMESTAMP_BYTES: u64 = TIMESTAMPS as u64 * 8;

impl Timestamps {
    fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Option<Timestamps> {
        if !device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return None;
        }
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("nuts timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: TIMESTAMPS,
        });
        let resolved = buffer(
            device,
            "nuts timestamps",
            TIMESTAMP_BYTES,
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        );
        Some(Timestamps {
            queries,
            resolved,
            period: f64::from(queue.get_timestamp_period()),
        })
    }

    fn writes(&self, pass: u32) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(2 * pass),
            end_of_pass_write_index: Some(2 * pass + 1),
        }
    }
}

/// The passes' total time from their resolved begin and end ticks, `period` nanoseconds each.
fn pass_time(ticks: &[u64], period: f64) -> Option<Duration> {
    let mut total = 0.0;
    for pass in ticks.chunks_exact(2) {
        // A driver may reset its clock between passes: such a pair says nothing.
        let delta = pass[1].checked_sub(pass[0])?;
        total += delta as f64 * period;
    }
    Some(Duration::from_nanos(total as u64))
}

impl NutsSession {
    pub(crate) fn model(&self) -> ModelKey {
        self.model
    }

    /// The chains' bind group with the draws written into `out`.
    fn bind_group_with_out(
        &self,
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        out: wgpu::BufferBinding<'_>,
    ) -> wgpu::BindGroup {
        chains_bind_group(
            device,
            layout,
            [
                &self.scratch,
                &self.params,
                &self.consts,
                &self.vec,
                &self.ckpt,
                &self.uint,
            ],
            out,
        )
    }
}

/// Bind group 1 of the NUTS kernels: the tapes, parameters, constants, chains, checkpoints and
/// integers (in that order), and the draws' output.
fn chains_bind_group(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    [scratch, params, consts, vec, ckpt, uint]: [&wgpu::Buffer; 6],
    out: wgpu::BufferBinding<'_>,
) -> wgpu::BindGroup {
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("nuts chains"),
        layout,
        entries: &[
            entry(crate::wgsl::SCRATCH_BINDING.binding, scratch),
            entry(crate::wgsl::NUTS_PARAMS_BINDING.binding, params),
            entry(crate::wgsl::NUTS_CONSTS_BINDING.binding, consts),
            entry(crate::wgsl::NUTS_VEC_BINDING.binding, vec),
            entry(crate::wgsl::NUTS_CKPT_BINDING.binding, ckpt),
            entry(crate::wgsl::NUTS_UINT_BINDING.binding, uint),
            wgpu::BindGroupEntry {
                binding: crate::wgsl::NUTS_OUT_BINDING.binding,
                resource: wgpu::BindingResource::Buffer(out),
            },
        ],
    })
}

/// The session's sizes as a dispatch uses them (its capacity and gradients), or an error
/// when `dispatch` does not fit the session's buffers.
fn dispatch_sizes(
    session: NsSizes,
    dispatch: &NutsDispatch,
    kernel: KernelKind,
) -> Result<NsSizes, GpuError> {
    let params = dispatch.params;
    if params.capacity as usize > session.capacity
        || (params.with_grad == 1
            && (!session.with_grad || params.capacity as usize > session.grad_capacity))
        || params.max_depth as usize > session.max_depth
        || params.n_chains as usize != session.n
        || dispatch
            .moments
            .is_some_and(|m| m.bins > params.capacity || kernel != KernelKind::Nuts)
    {
        return Err(GpuError::Device {
            operation: "nuts dispatch",
            message: format!(
                "dispatch parameters {params:?} (moments {:?}) do not fit the session's buffers {session:?}",
                dispatch.moments
            ),
        });
    }
    let mut sizes = session;
    sizes.capacity = params.capacity as usize;
    sizes.with_grad = params.with_grad == 1;
    sizes.grad_capacity = sizes.capacity;
    Ok(sizes)
}

/// What a dispatch reads back and where it lies in the read-back buffer: the moments, the
/// output slots from `out_from`, the integers, then the timestamps.
#[derive(Clone, Copy, Debug)]
struct ReadBack {
    /// The transition kernel runs (else the step-size search, which reads nothing back).
    transitions: bool,
    /// The moments kernel runs after the transitions.
    with_moments: bool,
    /// Timed passes, where the adapter has timestamps.
    passes: u32,
    /// Bytes of the output slots (0 for a search).
    out_bytes: u64,
    /// The first output value read back: 0, or past the values when only the statistics at
    /// the end of the slots come back.
    out_start: usize,
    /// `out_start` in bytes.
    out_from: u64,
    uint_bytes: u64,
    moments_bytes: u64,
    /// The kernel writes its draws straight into the read-back buffer.
    mapped: bool,
}

impl ReadBack {
    fn plan(
        session: &NutsSession,
        sizes: &NsSizes,
        dispatch: &NutsDispatch,
        kernel: KernelKind,
    ) -> ReadBack {
        let size = session.precision.size_bytes();
        let transitions = kernel == KernelKind::Nuts;
        let out_bytes = if transitions {
            sizes.out() as u64 * size
        } else {
            0
        };
        // Without the values, only the statistics at the end of the slots come back.
        let out_start = if dispatch.read_values {
            0
        } else {
            sizes.capacity * sizes.width() * sizes.n
        };
        let moments_bytes = if dispatch.moments.is_some() {
            sizes.moments() as u64 * size
        } else {
            0
        };
        // A sampling dispatch that reads every value may write its draws straight into the
        // read-back buffer: the slots are at its start, where the copy would put them.
        let mapped = transitions
            && session.draws == DrawsOutput::Mapped
            && dispatch.moments.is_none()
            && out_start == 0
            && out_bytes > 0;
        ReadBack {
            transitions,
            with_moments: dispatch.moments.is_some(),
            passes: 1 + u32::from(dispatch.moments.is_some()),
            out_bytes,
            out_start,
            out_from: out_start as u64 * size,
            uint_bytes: (sizes.uint() * 4) as u64,
            moments_bytes,
            mapped,
        }
    }
}

/// Records the copies of a dispatch's results into `staging`, laid out as `read` says
/// (mapped draws are in place already), and the timestamps' resolution.
fn encode_read_back(
    encoder: &mut wgpu::CommandEncoder,
    session: &NutsSession,
    staging: &wgpu::Buffer,
    read: &ReadBack,
    timestamps: Option<&Timestamps>,
) {
    let queries = 2 * read.passes;
    if let Some(timestamps) = timestamps {
        encoder.resolve_query_set(&timestamps.queries, 0..queries, &timestamps.resolved, 0);
    }
    let mut at = 0;
    // `None`: the kernel wrote these bytes in place.
    let mut copy = |source: Option<&wgpu::Buffer>, from: u64, bytes: u64| {
        if let Some(source) = source {
            encoder.copy_buffer_to_buffer(source, from, staging, at, bytes);
        }
        at += bytes;
    };
    if read.moments_bytes > 0 {
        copy(Some(&session.moments.out), 0, read.moments_bytes);
    }
    copy(
        (!read.mapped).then_some(&session.out),
        read.out_from,
        read.out_bytes - read.out_from,
    );
    copy(Some(&session.uint), 0, read.uint_bytes);
    if let Some(timestamps) = timestamps {
        copy(Some(&timestamps.resolved), 0, u64::from(queries) * 8);
    }
}

/// The pipelines of a session's kernels.
struct NutsPipelines {
    nuts: wgpu::ComputePipeline,
    search: wgpu::ComputePipeline,
    moments: wgpu::ComputePipeline,
}

/// Bytes of a session's buffers.
#[derive(Clone, Copy, Debug)]
struct SessionBytes {
    consts: u64,
    vec: u64,
    ckpt: u64,
    uint: u64,
    out: u64,
    moments: u64,
    /// The chains' tapes (storage placement; else a placeholder's).
    scratch: u64,
    /// One read-back buffer: a dispatch's results or a snapshot, whichever is larger.
    staging: u64,
}

impl SessionBytes {
    /// The buffers of a session of `sizes` over `program`, built with `options`.
    fn of(program: &sampler::Program, options: &ShaderOptions, sizes: &NsSizes) -> SessionBytes {
        let size = options.precision.size_bytes();
        let bytes = |values: usize| values as u64 * size;
        let uint = sizes.uint() as u64 * 4;
        let out = bytes(sizes.out_room());
        let moments = bytes(sizes.moments_room());
        let snapshot =
            bytes((program.dim + NS_S_COUNT) * sizes.n) + NS_U_COUNT as u64 * 4 * sizes.n as u64;
        SessionBytes {
            consts: bytes(sizes.consts()),
            vec: bytes(sizes.vec()),
            ckpt: bytes(sizes.ckpt()),
            uint,
            out,
            moments,
            scratch: crate::wgsl::scratch_bytes(program, options, sizes.n),
            staging: (moments + out + uint + TIMESTAMP_BYTES).max(snapshot),
        }
    }

    /// An error for the first buffer larger than the device binds (`storage_limit`), or
    /// a read-back buffer larger than it holds (`max_buffer_size`).
    fn check(&self, storage_limit: u64, max_buffer_size: u64) -> Result<(), GpuError> {
        for (what, needed) in [
            ("the chains' state", self.vec),
            ("the chains' U-turn checkpoints", self.ckpt),
            ("the output slots", self.out),
            ("the chains' integer state", self.uint),
            ("the warmup moments", self.moments),
            ("the chains' tapes (storage placement)", self.scratch),
        ] {
            check_bytes(what, needed, storage_limit)?;
        }
        check_bytes("the read-back buffer", self.staging, max_buffer_size)
    }
}

/// What a session is made of besides its device buffers.
struct SessionParts {
    model: ModelKey,
    sizes: NsSizes,
    bytes: SessionBytes,
    pipelines: NutsPipelines,
    staging: StagingPool,
    grid: (u32, u32),
    draws: DrawsOutput,
}

impl NutsSession {
    /// Creates the buffers and bind groups of a session made of `parts`.
    fn allocate(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layout: &wgpu::BindGroupLayout,
        parts: SessionParts,
    ) -> NutsSession {
        use wgpu::BufferUsages as U;
        let bytes = parts.bytes;
        let rw = U::STORAGE | U::COPY_DST | U::COPY_SRC;
        let params = buffer(device, "nuts params", 64, U::UNIFORM | U::COPY_DST);
        let consts = buffer(
            device,
            "nuts consts",
            bytes.consts,
            U::STORAGE | U::COPY_DST,
        );
        let vec = buffer(device, "nuts chains", bytes.vec, rw);
        let ckpt = buffer(device, "nuts checkpoints", bytes.ckpt, U::STORAGE);
        let uint = buffer(device, "nuts integers", bytes.uint, rw);
        let out = buffer(device, "nuts draws", bytes.out, rw);
        let scratch = buffer(device, "nuts tapes", bytes.scratch, U::STORAGE);
        let bind_group = chains_bind_group(
            device,
            layout,
            [&scratch, &params, &consts, &vec, &ckpt, &uint],
            out.as_entire_buffer_binding(),
        );
        let moments =
            MomentsKernel::new(device, parts.pipelines.moments, &out, &uint, bytes.moments);
        NutsSession {
            model: parts.model,
            sizes: parts.sizes,
            precision: parts.model.precision,
            nuts: parts.pipelines.nuts,
            search: parts.pipelines.search,
            moments,
            staging: parts.staging,
            timestamps: Timestamps::new(device, queue),
            grid: parts.grid,
            params,
            consts,
            vec,
            uint,
            out,
            bind_group,
            draws: parts.draws,
            queued: None,
            ckpt,
            scratch,
        }
    }
}

impl MomentsKernel {
    /// The moments kernel `pipeline` over a session's draws `out` and integers `uint`, with
    /// an output of `bytes`.
    fn new(
        device: &wgpu::Device,
        pipeline: wgpu::ComputePipeline,
        out: &wgpu::Buffer,
        uint: &wgpu::Buffer,
        bytes: u64,
    ) -> MomentsKernel {
        use wgpu::BufferUsages as U;
        let params = buffer(device, "nuts moments params", 32, U::UNIFORM | U::COPY_DST);
        let moments = buffer(device, "nuts moments", bytes, U::STORAGE | U::COPY_SRC);
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("nuts moments"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                entry(0, &params),
                entry(1, out),
                entry(2, uint),
                entry(3, &moments),
            ],
        });
        MomentsKernel {
            pipeline,
            params,
            out: moments,
            bind_group,
        }
    }
}

impl DeviceThread {
    pub(super) fn nuts(&mut self, command: NutsCommand) -> Result<NutsReply, GpuError> {
        match command {
            NutsCommand::Open(open) => self.nuts_open(&open).map(NutsReply::Opened),
            NutsCommand::Start(id, start) => self.nuts_start(id, &start).map(|()| NutsReply::Done),
            NutsCommand::Run(id, dispatch) => self
                .nuts_dispatch(id, &dispatch, KernelKind::Nuts)
                .map(|batch| NutsReply::Batch(Box::new(batch))),
            NutsCommand::Queue(id, dispatch) => self
                .nuts_queue(id, &dispatch)
                .map(|batch| NutsReply::Queued(batch.map(Box::new))),
            NutsCommand::Collect(id) => self
                .nuts_take_queued(id)
                .map(|batch| NutsReply::Batch(Box::new(batch))),
            NutsCommand::Search(id, dispatch) => {
                self.nuts_dispatch(id, &dispatch, KernelKind::NutsSearch)?;
                self.nuts_snapshot(id)
                    .map(|snapshot| NutsReply::Snapshot(Box::new(snapshot)))
            }
            NutsCommand::Snapshot(id) => self
                .nuts_snapshot(id)
                .map(|snapshot| NutsReply::Snapshot(Box::new(snapshot))),
            NutsCommand::Reseat(id, pairs) => {
                self.nuts_reseat(id, &pairs).map(|()| NutsReply::Done)
            }
            NutsCommand::Close(id) => {
                if let Some(session) = self.nuts_sessions.remove(&id)
                    && let Some(staging) = session.queued.and_then(|queued| queued.staging)
                {
                    // Unmapped: it is only read after a wait, which never came.
                    session.staging.give(staging);
                }
                Ok(NutsReply::Done)
            }
        }
    }

    /// Opens a session: its kernels' plan and pipelines, the sizes of its buffers checked
    /// against the device's limits, then the buffers.
    fn nuts_open(&mut self, open: &NutsOpen) -> Result<SessionId, GpuError> {
        let (program, plan) = self.plan(open.model, &open.overrides, open.n_chains)?;
        let options = plan.shader;
        let pipelines = self.nuts_pipelines(open.model, &program, options)?;
        let sizes = open.shape().sizes(program.dim, options.lanes);
        let grid = self.chain_grid(open.n_chains, &options)?;
        let bytes = SessionBytes::of(&program, &options, &sizes);
        bytes.check(plan.storage_limit, self.limits.max_buffer_size)?;
        let staging = self.staging_pool(bytes.staging);
        // The plan's, unless this pool's buffers cannot be bound as storage.
        let draws = plan.draws.resolve(options.lanes, staging.storage());
        let parts = SessionParts {
            model: open.model,
            sizes,
            bytes,
            pipelines,
            staging,
            grid,
            draws,
        };
        let (device, queue, layout) = (&self.device, &self.queue, &self.layouts.nuts);
        let session = scoped(device, "nuts session allocation", || {
            NutsSession::allocate(device, queue, layout, parts)
        })?;
        let id = self.new_session_id();
        self.nuts_sessions.insert(id, session);
        Ok(id)
    }

    /// The pipelines of a session's kernels over `program` built with `options`: the
    /// transitions, the step-size search, and the warmup moments kernel of their precision.
    fn nuts_pipelines(
        &mut self,
        model: ModelKey,
        program: &sampler::Program,
        options: ShaderOptions,
    ) -> Result<NutsPipelines, GpuError> {
        let precision = model.precision;
        let nuts = self.pipeline(model, program, KernelKind::Nuts, options)?;
        let search = self.pipeline(model, program, KernelKind::NutsSearch, options)?;
        let moments = match self.moments_pipelines.get(&precision) {
            Some(pipeline) => pipeline.clone(),
            None => {
                let pipeline = moments_pipeline(&self.device, precision)?;
                self.moments_pipelines.insert(precision, pipeline.clone());
                pipeline
            }
        };
        Ok(NutsPipelines {
            nuts,
            search,
            moments,
        })
    }

    fn nuts_session(&self, id: SessionId) -> Result<&NutsSession, GpuError> {
        let session = self
            .nuts_sessions
            .get(&id)
            .ok_or(GpuError::SessionGone { session: id.0 })?;
        if !self.models.contains_key(&session.model) {
            return Err(GpuError::ModelNotLoaded {
                model: session.model,
            });
        }
        Ok(session)
    }

    fn nuts_session_mut(&mut self, id: SessionId) -> Result<&mut NutsSession, GpuError> {
        self.nuts_session(id)?;
        self.nuts_sessions
            .get_mut(&id)
            .ok_or(GpuError::SessionGone { session: id.0 })
    }

    fn nuts_start(&mut self, id: SessionId, start: &NutsStart) -> Result<(), GpuError> {
        let session = self.nuts_session(id)?;
        let sizes = session.sizes;
        let (n, dim) = (sizes.n, sizes.dim);
        if start.q.len() != n * dim
            || start.g.len() != n * dim
            || start.logp.len() != n
            || start.step.len() != n
        {
            return Err(GpuError::BadPoints {
                len: start.q.len(),
                dim,
            });
        }
        let size = session.precision.size_bytes();
        let block =
            |values: &[f64]| encode(sizes.role_block(values).into_iter(), session.precision);
        let q = block(&start.q);
        let g = block(&start.g);
        let logp = encode(start.logp.iter().copied(), session.precision);
        let step = encode(start.step.iter().copied(), session.precision);
        let queue = &self.queue;
        let device = &self.device;
        scoped(device, "nuts start", || {
            let at = |index: usize| index as u64 * size;
            queue.write_buffer(&session.vec, at(sizes.vec_at(NS_V_QSAMP, 0, 0)), &q);
            queue.write_buffer(&session.vec, at(sizes.vec_at(NS_V_GSAMP, 0, 0)), &g);
            queue.write_buffer(&session.vec, at(sizes.scalar_at(NS_S_LOGP_SAMP, 0)), &logp);
            queue.write_buffer(&session.vec, at(sizes.scalar_at(NS_S_STEP, 0)), &step);
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("nuts start"),
            });
            encoder.clear_buffer(&session.uint, 0, None);
            queue.submit([encoder.finish()]);
        })
    }

    fn nuts_dispatch(
        &mut self,
        id: SessionId,
        dispatch: &NutsDispatch,
        kernel: KernelKind,
    ) -> Result<NutsBatch, GpuError> {
        let submitted = self.nuts_submit(id, dispatch, kernel)?;
        self.nuts_collect(id, submitted)
    }

    /// Submits `dispatch` behind the session's queued one, then waits for that one (if any)
    /// and returns its batch: the device always has the next dispatch when one ends.
    fn nuts_queue(
        &mut self,
        id: SessionId,
        dispatch: &NutsDispatch,
    ) -> Result<Option<NutsBatch>, GpuError> {
        let submitted = self.nuts_submit(id, dispatch, KernelKind::Nuts)?;
        let session = self.nuts_session_mut(id)?;
        match session.queued.replace(submitted) {
            Some(previous) => self.nuts_collect(id, previous).map(Some),
            None => Ok(None),
        }
    }

    /// The batch of the session's queued dispatch, once it is done.
    fn nuts_take_queued(&mut self, id: SessionId) -> Result<NutsBatch, GpuError> {
        let session = self.nuts_session_mut(id)?;
        let queued = session.queued.take().ok_or(GpuError::Device {
            operation: "nuts collect",
            message: "the session has no queued dispatch".into(),
        })?;
        self.nuts_collect(id, queued)
    }

    /// Checks `dispatch` against the session, writes its parameters and submits the
    /// transition kernel (or the search), the moments kernel and the copies into a read-back
    /// buffer; returns without waiting.
    fn nuts_submit(
        &mut self,
        id: SessionId,
        dispatch: &NutsDispatch,
        kernel: KernelKind,
    ) -> Result<Submitted, GpuError> {
        let session = self.nuts_session(id)?;
        let sizes = dispatch_sizes(session.sizes, dispatch, kernel)?;
        let read = ReadBack::plan(session, &sizes, dispatch, kernel);
        let timestamps = session.timestamps.as_ref().filter(|_| read.transitions);
        let consts = dispatch
            .consts
            .as_ref()
            .map(|values| encode(values.iter().copied(), session.precision));
        let started = Instant::now();
        let (submission, staging) = scoped(&self.device, "nuts dispatch", || {
            // A free read-back buffer: the last batches' may still be mapped for the driver
            // or waiting to be read.
            let staging = (read.out_bytes > 0).then(|| session.staging.take(&self.device));
            self.write_nuts_params(session, &sizes, dispatch, consts.as_deref());
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("nuts"),
                });
            self.encode_nuts_passes(
                &mut encoder,
                session,
                &sizes,
                &read,
                staging.as_ref(),
                timestamps,
            );
            if let Some(staging) = &staging {
                encode_read_back(&mut encoder, session, staging, &read, timestamps);
            }
            (self.queue.submit([encoder.finish()]), staging)
        })?;
        let period = timestamps.map(|t| t.period);
        self.stats.batches += 1;
        Ok(Submitted {
            submission,
            staging,
            sizes,
            out_start: read.out_start,
            moments_bytes: read.moments_bytes,
            out_bytes: read.out_bytes - read.out_from,
            uint_bytes: read.uint_bytes,
            period,
            passes: read.passes,
            moment_bins: dispatch.moments.map_or(0, |m| m.bins as usize),
            started,
        })
    }

    /// Writes a dispatch's parameters, its constants (when they changed) and the moments
    /// kernel's parameters (when it runs).
    fn write_nuts_params(
        &self,
        session: &NutsSession,
        sizes: &NsSizes,
        dispatch: &NutsDispatch,
        consts: Option<&[u8]>,
    ) {
        let params = dispatch.params;
        self.queue
            .write_buffer(&session.params, 0, bytemuck::bytes_of(&params));
        if let Some(consts) = consts {
            self.queue.write_buffer(&session.consts, 0, consts);
        }
        if let Some(moments) = dispatch.moments {
            let moments_params = NmParams {
                n_chains: params.n_chains,
                width: sizes.width() as u32,
                capacity: params.capacity,
                block_start: moments.block_start,
                bins: moments.bins,
                usable_only: u32::from(moments.usable_only),
                chain_major: u32::from(sizes.chain_major),
                // f32's lowest means none (nuts_moments.wgsl).
                lp_floor_bits: (moments.lp_floor.max(f64::from(f32::MIN)) as f32).to_bits(),
            };
            self.queue.write_buffer(
                &session.moments.params,
                0,
                bytemuck::bytes_of(&moments_params),
            );
        }
    }

    /// Records the transition (or search) pass and, when the dispatch pools moments, the
    /// moments pass; a mapped sampling dispatch writes its draws straight into `staging`.
    fn encode_nuts_passes(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        session: &NutsSession,
        sizes: &NsSizes,
        read: &ReadBack,
        staging: Option<&wgpu::Buffer>,
        timestamps: Option<&Timestamps>,
    ) {
        let mapped_group = staging.filter(|_| read.mapped).map(|staging| {
            session.bind_group_with_out(
                &self.device,
                &self.layouts.nuts,
                wgpu::BufferBinding {
                    buffer: staging,
                    offset: 0,
                    size: wgpu::BufferSize::new(read.out_bytes),
                },
            )
        });
        let pipeline = if read.transitions {
            &session.nuts
        } else {
            &session.search
        };
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("nuts"),
                timestamp_writes: timestamps.map(|t| t.writes(0)),
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &self.models[&session.model].bind_group, &[]);
            pass.set_bind_group(1, mapped_group.as_ref().unwrap_or(&session.bind_group), &[]);
            pass.dispatch_workgroups(session.grid.0, session.grid.1, 1);
        }
        if read.with_moments {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("nuts moments"),
                timestamp_writes: timestamps.map(|t| t.writes(1)),
            });
            pass.set_pipeline(&session.moments.pipeline);
            pass.set_bind_group(0, &session.moments.bind_group, &[]);
            let values = sizes
                .width()
                .min(self.limits.max_compute_workgroups_per_dimension as usize);
            pass.dispatch_workgroups(sizes.n.div_ceil(NM_CHUNK) as u32, values.max(1) as u32, 1);
        }
    }

    /// Waits for `submitted` and maps its read-back buffer as its batch.
    fn nuts_collect(&self, id: SessionId, submitted: Submitted) -> Result<NutsBatch, GpuError> {
        let session = self.nuts_session(id)?;
        let precision = session.precision;
        let Submitted {
            submission,
            staging,
            sizes,
            out_start,
            moments_bytes,
            out_bytes,
            uint_bytes,
            period,
            passes,
            moment_bins,
            started,
        } = submitted;
        let Some(staging) = staging else {
            self.wait_for(submission)?;
            return Ok(NutsBatch {
                sizes,
                precision,
                bytes: None,
                out_at: 0,
                out_start: 0,
                uint: 0..0,
                moments: Vec::new(),
                moment_bins: 0,
                elapsed: started.elapsed(),
                kernel_time: None,
            });
        };
        let ticks_bytes = period.map_or(0, |_| u64::from(2 * passes) * 8);
        let out_end = moments_bytes + out_bytes;
        let uint_end = out_end + uint_bytes;
        // The draws and statistics (tens of megabytes at thousands of chains) are read where
        // they were mapped, while the next dispatch copies into another buffer; only the
        // short parts are copied out here.
        let view = self.map_read(&staging, uint_end + ticks_bytes, submission)?;
        let moments = decode(&view[..moments_bytes as usize], precision);
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&view[uint_end as usize..]);
        let kernel_time = period.and_then(|period| pass_time(&ticks, period));
        let uint = out_end as usize..uint_end as usize;
        if bytemuck::try_cast_slice::<u8, u32>(&view[uint.clone()]).is_err() {
            return Err(GpuError::Device {
                operation: "readback",
                message: "the mapped read-back memory is not aligned for 32-bit integers".into(),
            });
        }
        Ok(NutsBatch {
            sizes,
            precision,
            bytes: Some(session.staging.hold(staging, view)),
            out_at: moments_bytes as usize,
            out_start,
            uint,
            moments,
            moment_bins,
            elapsed: started.elapsed(),
            kernel_time,
        })
    }

    fn nuts_snapshot(&mut self, id: SessionId) -> Result<NutsSnapshot, GpuError> {
        let session = self.nuts_session(id)?;
        let sizes = session.sizes;
        let (n, dim) = (sizes.n, sizes.dim);
        let size = session.precision.size_bytes();
        let q_bytes = (dim * n) as u64 * size;
        let scalar_bytes = (NS_S_COUNT * n) as u64 * size;
        let uint_bytes = (NS_U_COUNT * n) as u64 * 4;
        debug_assert!(q_bytes + scalar_bytes + uint_bytes <= session.staging.bytes());
        let (submission, staging) = scoped(&self.device, "nuts snapshot", || {
            let staging = session.staging.take(&self.device);
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("nuts snapshot"),
                });
            let at = |index: usize| index as u64 * size;
            encoder.copy_buffer_to_buffer(
                &session.vec,
                at(sizes.vec_at(NS_V_QSAMP, 0, 0)),
                &staging,
                0,
                q_bytes,
            );
            encoder.copy_buffer_to_buffer(
                &session.vec,
                at(sizes.scalar_at(0, 0)),
                &staging,
                q_bytes,
                scalar_bytes,
            );
            encoder.copy_buffer_to_buffer(
                &session.uint,
                0,
                &staging,
                q_bytes + scalar_bytes,
                uint_bytes,
            );
            (self.queue.submit([encoder.finish()]), staging)
        })?;
        let precision = session.precision;
        let pool = session.staging.clone();
        let bytes = self.read_back(&staging, q_bytes + scalar_bytes + uint_bytes, submission)?;
        pool.give(staging);
        let q_block = decode(&bytes[..q_bytes as usize], precision);
        let scalars = decode(
            &bytes[q_bytes as usize..(q_bytes + scalar_bytes) as usize],
            precision,
        );
        let uint = bytemuck::pod_collect_to_vec(&bytes[(q_bytes + scalar_bytes) as usize..]);
        let q = sizes.chains_of_block(&q_block);
        let row = |role: usize| scalars[role * n..(role + 1) * n].to_vec();
        Ok(NutsSnapshot {
            uint,
            step: row(NS_S_STEP),
            q,
        })
    }

    /// Copies chain `from`'s point, gradient and scalars over chain `chain`'s, for each pair
    /// (`NutsCommand::Reseat`): the current points and gradients (two adjacent vector roles)
    /// and the scalar block are read back, patched here and written again. Once per run, so
    /// the round trip is cheap next to the run.
    fn nuts_reseat(&mut self, id: SessionId, pairs: &[(usize, usize)]) -> Result<(), GpuError> {
        let session = self.nuts_session(id)?;
        let sizes = session.sizes;
        let (n, dim) = (sizes.n, sizes.dim);
        if let Some((chain, from)) = pairs.iter().find(|(chain, from)| *chain >= n || *from >= n) {
            return Err(GpuError::Device {
                operation: "nuts reseat",
                message: format!("chain {chain} or {from} is not one of the session's {n}"),
            });
        }
        if pairs.is_empty() {
            return Ok(());
        }
        debug_assert_eq!(NS_V_GSAMP, NS_V_QSAMP + 1);
        let size = session.precision.size_bytes() as usize;
        let vec_start = sizes.vec_at(NS_V_QSAMP, 0, 0);
        let vec_len = 2 * dim * n;
        let scalar_start = sizes.scalar_at(0, 0);
        let scalar_len = NS_S_COUNT * n;
        let bytes = ((vec_len + scalar_len) * size) as u64;
        let (submission, staging) = scoped(&self.device, "nuts reseat", || {
            let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("nuts reseat"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("nuts reseat"),
                });
            let vec_bytes = (vec_len * size) as u64;
            encoder.copy_buffer_to_buffer(
                &session.vec,
                (vec_start * size) as u64,
                &staging,
                0,
                vec_bytes,
            );
            encoder.copy_buffer_to_buffer(
                &session.vec,
                (scalar_start * size) as u64,
                &staging,
                vec_bytes,
                (scalar_len * size) as u64,
            );
            (self.queue.submit([encoder.finish()]), staging)
        })?;
        let mut state = self.read_back(&staging, bytes, submission)?;
        staging.destroy();
        let (vectors, scalars) = state.split_at_mut(vec_len * size);
        let copy = |values: &mut [u8], to: usize, from: usize| {
            values.copy_within(from * size..(from + 1) * size, to * size);
        };
        for &(chain, from) in pairs {
            for role in [NS_V_QSAMP, NS_V_GSAMP] {
                for j in 0..dim {
                    let at = |c| sizes.vec_at(role, j, c) - vec_start;
                    copy(vectors, at(chain), at(from));
                }
            }
            for role in 0..NS_S_COUNT {
                let at = |c| sizes.scalar_at(role, c) - scalar_start;
                copy(scalars, at(chain), at(from));
            }
        }
        scoped(&self.device, "nuts reseat", || {
            self.queue
                .write_buffer(&session.vec, (vec_start * size) as u64, vectors);
            self.queue
                .write_buffer(&session.vec, (scalar_start * size) as u64, scalars);
        })
    }
}
