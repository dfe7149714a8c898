//! Runs `shaders/rng.wgsl` on given counters, so that tests can compare the device's
//! random numbers with the CPU's Philox (`crate::philox4x32_10`) and check their
//! distribution.

use std::sync::mpsc;

use super::resources::decode;
use super::scope::scoped;
use crate::error::GpuError;
use crate::wgsl::{Precision, RNG_CHECK_ENTRY, rng_check_source};

/// What the device's generator gave for each counter.
#[derive(Clone, Debug, PartialEq)]
pub struct RngSamples {
    /// Philox4x32-10's four words per counter.
    pub bits: Vec<[u32; 4]>,
    /// `rng_uniform` per counter.
    pub uniform: Vec<f64>,
    /// `rng_normal2`'s two normals per counter.
    pub normal: Vec<(f64, f64)>,
}

pub(crate) fn check_rng(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    poll_timeout: std::time::Duration,
    precision: Precision,
    key: [u32; 2],
    counters: &[[u32; 4]],
) -> Result<RngSamples, GpuError> {
    let n = counters.len();
    let size = precision.size_bytes();
    let bits_bytes = (16 * n.max(1)) as u64;
    let values_bytes = (3 * n.max(1)) as u64 * size;
    let failed = |message: String| GpuError::Device {
        operation: "rng check",
        message,
    };
    let key_block: [u32; 4] = [key[0], key[1], n as u32, 0];
    let counter_words: Vec<u32> = counters.iter().flatten().copied().collect();
    let (staging, submission) = scoped(device, "rng check", || {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("rng check"),
            source: wgpu::ShaderSource::Wgsl(rng_check_source(precision).into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("rng check"),
            layout: None,
            module: &module,
            entry_point: Some(RNG_CHECK_ENTRY),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        let buffer = |label, size: u64, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(16),
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        let key_buffer = buffer("rng key", 16, U::UNIFORM | U::COPY_DST);
        let counter_buffer = buffer("rng counters", bits_bytes, U::STORAGE | U::COPY_DST);
        let bits_buffer = buffer("rng bits", bits_bytes, U::STORAGE | U::COPY_SRC);
        let values_buffer = buffer("rng values", values_bytes, U::STORAGE | U::COPY_SRC);
        let staging = buffer(
            "rng readback",
            bits_bytes + values_bytes,
            U::MAP_READ | U::COPY_DST,
        );
        queue.write_buffer(&key_buffer, 0, bytemuck::cast_slice(&key_block));
        if !counter_words.is_empty() {
            queue.write_buffer(&counter_buffer, 0, bytemuck::cast_slice(&counter_words));
        }
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("rng check"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: key_buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: counter_buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: bits_buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: values_buffer.as_entire_binding(),
                },
            ],
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("rng check"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups((n as u32).div_ceil(64).max(1), 1, 1);
        }
        encoder.copy_buffer_to_buffer(&bits_buffer, 0, &staging, 0, bits_bytes);
        encoder.copy_buffer_to_buffer(&values_buffer, 0, &staging, bits_bytes, values_bytes);
        let submission = queue.submit([encoder.finish()]);
        (staging, submission)
    })?;
    let (mapped_tx, mapped) = mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |result| {
        let _ = mapped_tx.send(result);
    });
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(submission),
            timeout: Some(poll_timeout),
        })
        .map_err(|err| failed(err.to_string()))?;
    mapped
        .try_recv()
        .map_err(|_| failed("the readback was not mapped".into()))?
        .map_err(|err| failed(err.to_string()))?;
    let bytes = {
        let view = staging
            .get_mapped_range(..)
            .map_err(|err| failed(err.to_string()))?;
        view.to_vec()
    };
    staging.unmap();
    let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes[..bits_bytes as usize]);
    let values = decode(&bytes[bits_bytes as usize..], precision);
    Ok(RngSamples {
        bits: (0..n)
            .map(|i| {
                [
                    words[4 * i],
                    words[4 * i + 1],
                    words[4 * i + 2],
                    words[4 * i + 3],
                ]
            })
            .collect(),
        uniform: (0..n).map(|i| values[3 * i]).collect(),
        normal: (0..n)
            .map(|i| (values[3 * i + 1], values[3 * i + 2]))
            .collect(),
    })
}
