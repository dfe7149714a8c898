//! Device buffers: a model's data, uploaded once and kept while the model is loaded, and the
//! per-pipeline batch workspaces, grown on demand and reused by every later batch.

use std::sync::{Arc, Mutex};

use sampler::Program;

use super::pipelines::Layouts;
use super::scope::scoped;
use crate::error::GpuError;
use crate::wgsl::{Precision, ShaderOptions};

/// wgpu refuses empty bindings and a runtime-sized array needs one element: every buffer has
/// at least this many bytes.
const MIN_BUFFER_BYTES: u64 = 16;

/// Values as bytes of `precision` (native endianness, as the device reads them).
pub(crate) fn encode(values: impl Iterator<Item = f64>, precision: Precision) -> Vec<u8> {
    match precision {
        Precision::F32 => values.flat_map(|v| (v as f32).to_ne_bytes()).collect(),
        Precision::F64 => values.flat_map(f64::to_ne_bytes).collect(),
    }
}

/// Bytes of `precision` as values.
pub(crate) fn decode(bytes: &[u8], precision: Precision) -> Vec<f64> {
    let mut values = vec![0.0; bytes.len() / precision.size_bytes() as usize];
    decode_into(bytes, precision, &mut values);
    values
}

/// Bytes of `precision` as values, into `out` (as many as both hold). The precision is
/// matched once, outside the loop, so that each loop is a plain conversion.
pub(crate) fn decode_into(bytes: &[u8], precision: Precision, out: &mut [f64]) {
    match precision {
        Precision::F32 => {
            for (out, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *out = f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
            }
        }
        Precision::F64 => {
            for (out, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
                *out = f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
            }
        }
    }
}

/// A session's read-back (`MAP_READ | COPY_DST`) buffers, all of one size, recycled. A batch
/// keeps its buffer mapped while the driver reads it ([`MappedBytes`]), so the next dispatch
/// copies into another one and the device need not wait for the host to finish reading.
///
/// Only the device thread maps, unmaps or creates these buffers (wgpu's error scopes are
/// per thread): a batch dropped elsewhere hands its buffer back still mapped, and
/// [`StagingPool::take`] unmaps it.
#[derive(Clone, Debug)]
pub(crate) struct StagingPool(Arc<StagingShared>);

#[derive(Debug)]
struct StagingShared {
    bytes: u64,
    usage: wgpu::BufferUsages,
    free: Mutex<Vec<Staging>>,
}

#[derive(Debug)]
struct Staging {
    buffer: wgpu::Buffer,
    mapped: bool,
}

/// Buffers a pool keeps: one being read, one being filled, and one spare.
const POOLED: usize = 3;

impl StagingPool {
    /// A pool of read-back buffers of `bytes` bytes each (none made yet); with `storage`,
    /// kernels may also bind them as storage (the device needs `MAPPABLE_PRIMARY_BUFFERS`).
    pub(crate) fn new(bytes: u64, storage: bool) -> StagingPool {
        let mut usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        if storage {
            usage |= wgpu::BufferUsages::STORAGE;
        }
        StagingPool(Arc::new(StagingShared {
            bytes,
            usage,
            free: Mutex::new(Vec::new()),
        }))
    }

    /// Bytes of each buffer.
    pub(crate) fn bytes(&self) -> u64 {
        self.0.bytes
    }

    /// Whether kernels may bind the buffers as storage.
    pub(crate) fn storage(&self) -> bool {
        self.0.usage.contains(wgpu::BufferUsages::STORAGE)
    }

    /// Whether anything besides the one holder asking (a session, or a batch's bytes) holds
    /// this pool.
    pub(crate) fn in_use(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    /// An unmapped buffer: a free one, or a new one. On the device thread only.
    pub(crate) fn take(&self, device: &wgpu::Device) -> wgpu::Buffer {
        let free = self.lock().pop();
        match free {
            Some(Staging { buffer, mapped }) => {
                if mapped {
                    buffer.unmap();
                }
                buffer
            }
            None => buffer(device, "readback", self.0.bytes, self.0.usage),
        }
    }

    /// Hands back an unmapped buffer that [`StagingPool::take`] gave.
    pub(crate) fn give(&self, buffer: wgpu::Buffer) {
        self.keep(Staging {
            buffer,
            mapped: false,
        });
    }

    /// `view` of `buffer` (mapped from this pool) as bytes that go back to the pool when
    /// dropped.
    pub(crate) fn hold(&self, buffer: wgpu::Buffer, view: wgpu::BufferView) -> MappedBytes {
        MappedBytes(Box::new(Held {
            view: Some(view),
            buffer: Some(buffer),
            pool: self.clone(),
        }))
    }

    fn keep(&self, staging: Staging) {
        let mut free = self.lock();
        if free.len() < POOLED {
            free.push(staging);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Staging>> {
        self.0.free.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Read-back bytes still in their mapped buffer: no copy out of it. Dropping them hands the
/// buffer back to its [`StagingPool`] (dropping the view is only bookkeeping, no wgpu call).
///
/// The buffer sits behind a `Send + Sync` trait object: every type that holds these bytes
/// (replies, and the channels and futures that carry them) would otherwise make the compiler
/// walk wgpu's internals to prove `Send`, which overflows its recursion limit.
#[derive(Debug)]
pub(crate) struct MappedBytes(Box<dyn MappedView>);

trait MappedView: Send + Sync + std::fmt::Debug {
    fn bytes(&self) -> &[u8];
}

impl std::ops::Deref for MappedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

#[cfg(test)]
impl MappedView for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

#[cfg(test)]
impl MappedBytes {
    /// Bytes that were never mapped, for tests of what reads them.
    pub(crate) fn from_vec(bytes: Vec<u8>) -> MappedBytes {
        MappedBytes(Box::new(bytes))
    }
}

#[derive(Debug)]
struct Held {
    view: Option<wgpu::BufferView>,
    buffer: Option<wgpu::Buffer>,
    pool: StagingPool,
}

impl MappedView for Held {
    fn bytes(&self) -> &[u8] {
        self.view.as_deref().unwrap_or(&[])
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.view = None;
        if let Some(buffer) = self.buffer.take() {
            self.pool.keep(Staging {
                buffer,
                mapped: true,
            });
        }
    }
}

/// Checks a storage buffer's size against the device's limits.
pub(crate) fn check_storage(
    what: &'static str,
    bytes: u64,
    limits: &wgpu::Limits,
) -> Result<(), GpuError> {
    let limit = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    check_bytes(what, bytes, limit)
}

/// Checks a buffer's size against `limit` bytes.
pub(crate) fn check_bytes(what: &'static str, bytes: u64, limit: u64) -> Result<(), GpuError> {
    if bytes > limit {
        return Err(GpuError::TooLarge {
            what,
            needed: bytes,
            limit,
        });
    }
    Ok(())
}

pub(crate) fn buffer(
    device: &wgpu::Device,
    label: &str,
    size: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size
            .max(MIN_BUFFER_BYTES)
            .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT),
        usage,
        mapped_at_creation: false,
    })
}

/// A model's program and its data on the device (bind group 0 of every kernel).
pub(crate) struct ModelResources {
    pub program: Arc<Program>,
    pub bind_group: wgpu::BindGroup,
    /// Kept alive by the bind group too; held here to say who owns them.
    _data: wgpu::Buffer,
    _index: wgpu::Buffer,
}

impl ModelResources {
    pub(crate) fn upload(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layouts: &Layouts,
        limits: &wgpu::Limits,
        program: Arc<Program>,
        precision: Precision,
    ) -> Result<ModelResources, GpuError> {
        let data = encode(crate::wgsl::device_data(&program).into_iter(), precision);
        // The `Gather` indices, then what the generated code reads besides (wgsl's interp.rs).
        let indices = crate::wgsl::device_indices(&program);
        let index: &[u8] = bytemuck::cast_slice(&indices);
        check_storage("the model's data", data.len() as u64, limits)?;
        check_storage("the model's indices", index.len() as u64, limits)?;
        scoped(device, "model upload", || {
            let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
            let data_buffer = buffer(device, "model data", data.len() as u64, usage);
            let index_buffer = buffer(device, "model indices", index.len() as u64, usage);
            write_padded(queue, &data_buffer, &data);
            write_padded(queue, &index_buffer, index);
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("model data"),
                layout: &layouts.model,
                entries: &[
                    entry(crate::wgsl::DATA_BINDING.binding, &data_buffer),
                    entry(crate::wgsl::INDEX_BINDING.binding, &index_buffer),
                ],
            });
            ModelResources {
                program: program.clone(),
                bind_group,
                _data: data_buffer,
                _index: index_buffer,
            }
        })
    }
}

/// `queue.write_buffer` of `bytes`, padded to the copy alignment (empty writes are skipped).
fn write_padded(queue: &wgpu::Queue, buffer: &wgpu::Buffer, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let align = wgpu::COPY_BUFFER_ALIGNMENT as usize;
    if bytes.len().is_multiple_of(align) {
        queue.write_buffer(buffer, 0, bytes);
    } else {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().next_multiple_of(align), 0);
        queue.write_buffer(buffer, 0, &padded);
    }
}

pub(crate) fn entry(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: buffer.as_entire_binding(),
    }
}

/// The buffers of `logp_grad` batches of up to `capacity` chains (bind group 1).
pub(crate) struct LogpGradWorkspace {
    pub capacity: usize,
    pub params: wgpu::Buffer,
    pub theta: wgpu::Buffer,
    pub logp: wgpu::Buffer,
    pub grad: wgpu::Buffer,
    /// `MAP_READ` copy of log densities then gradients.
    pub staging: wgpu::Buffer,
    pub bind_group: wgpu::BindGroup,
    _scratch: wgpu::Buffer,
}

/// Byte size of `LgParams` in `shaders/logp_grad.wgsl`.
pub(crate) const LOGP_GRAD_PARAMS_BYTES: u64 = 16;

impl LogpGradWorkspace {
    /// The chains of the workspace made for a batch of `n_chains` points: more, so that a
    /// sweep over batch sizes allocates a few times (it grows geometrically).
    pub(crate) fn capacity_for(n_chains: usize) -> usize {
        n_chains.next_power_of_two().max(64)
    }

    /// An error for the first buffer of a workspace of `capacity` chains of `program`, built
    /// with `options`, that is larger than `storage_limit` bytes.
    pub(crate) fn check(
        program: &Program,
        options: &ShaderOptions,
        capacity: usize,
        storage_limit: u64,
    ) -> Result<(), GpuError> {
        let point_bytes = capacity as u64 * program.dim as u64 * options.precision.size_bytes();
        let scratch_bytes = crate::wgsl::scratch_bytes(program, options, capacity);
        check_bytes("the batch's points", point_bytes, storage_limit)?;
        check_bytes(
            "the batch's tapes (storage placement)",
            scratch_bytes,
            storage_limit,
        )
    }

    pub(crate) fn new(
        device: &wgpu::Device,
        layouts: &Layouts,
        limits: &wgpu::Limits,
        program: &Program,
        options: &ShaderOptions,
        capacity: usize,
    ) -> Result<LogpGradWorkspace, GpuError> {
        let size = options.precision.size_bytes();
        let chains = capacity as u64;
        let dim = program.dim as u64;
        let point_bytes = chains * dim * size;
        let logp_bytes = chains * size;
        let scratch_bytes = crate::wgsl::scratch_bytes(program, options, capacity);
        let storage_limit = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        LogpGradWorkspace::check(program, options, capacity, storage_limit)?;
        scoped(device, "batch allocation", || {
            use wgpu::BufferUsages as U;
            let params = buffer(
                device,
                "logp_grad params",
                LOGP_GRAD_PARAMS_BYTES,
                U::UNIFORM | U::COPY_DST,
            );
            let scratch = buffer(device, "logp_grad tapes", scratch_bytes, U::STORAGE);
            let theta = buffer(
                device,
                "logp_grad points",
                point_bytes,
                U::STORAGE | U::COPY_DST,
            );
            let logp = buffer(
                device,
                "logp_grad log densities",
                logp_bytes,
                U::STORAGE | U::COPY_SRC,
            );
            let grad = buffer(
                device,
                "logp_grad gradients",
                point_bytes,
                U::STORAGE | U::COPY_SRC,
            );
            let staging = buffer(
                device,
                "logp_grad readback",
                logp_bytes + point_bytes,
                U::MAP_READ | U::COPY_DST,
            );
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("logp_grad batch"),
                layout: &layouts.logp_grad,
                entries: &[
                    entry(crate::wgsl::SCRATCH_BINDING.binding, &scratch),
                    entry(crate::wgsl::LOGP_GRAD_PARAMS_BINDING.binding, &params),
                    entry(crate::wgsl::LOGP_GRAD_THETA_BINDING.binding, &theta),
                    entry(crate::wgsl::LOGP_GRAD_LOGP_BINDING.binding, &logp),
                    entry(crate::wgsl::LOGP_GRAD_GRAD_BINDING.binding, &grad),
                ],
            });
            LogpGradWorkspace {
                capacity,
                params,
                theta,
                logp,
                grad,
                staging,
                bind_group,
                _scratch: scratch,
            }
        })
    }
}
