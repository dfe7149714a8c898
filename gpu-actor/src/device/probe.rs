//! The f64 built-in check: does this driver compute WGSL's own f64 `exp` and `log`
//! correctly? naga passes them to GLSL.std.450 instructions that are only defined for 16- and
//! 32-bit floats: lavapipe silently returns garbage, and NVIDIA's compiler (driver 580.159)
//! fails ("NVVM compilation failed") and the device is lost. Our kernels never call them; a
//! faster kernel could on a driver where they are right, so this measures.

use std::sync::mpsc;

use super::resources::{decode, encode};
use super::scope::scoped;
use crate::error::GpuError;
use crate::wgsl::{F64_BUILTINS_ENTRY, Precision, f64_builtins_source};

/// Largest relative errors of WGSL's own f64 `exp` and `log` against the CPU (Rust's, within
/// 1 ulp) over points spread over `[-20, 20]`. Our own (`sf_exp`, `sf_log`) are checked by
/// every f64 parity test instead.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct F64BuiltinCheck {
    /// Points evaluated.
    pub points: usize,
    /// WGSL's `exp` on f64.
    pub exp: f64,
    /// WGSL's `log` on f64.
    pub log: f64,
}

const POINTS: usize = 1024;

fn relative_error(got: f64, expected: f64) -> f64 {
    if got == expected {
        0.0
    } else {
        // NaN or garbage counts as a total failure.
        let error = (got - expected).abs() / expected.abs().max(f64::MIN_POSITIVE);
        if error.is_nan() { f64::INFINITY } else { error }
    }
}

pub(crate) fn check_f64_builtins(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    poll_timeout: std::time::Duration,
) -> Result<F64BuiltinCheck, GpuError> {
    let inputs: Vec<f64> = (0..POINTS)
        .map(|i| -20.0 + 40.0 * (i as f64 + 0.37) / POINTS as f64)
        .collect();
    let input_bytes = encode(inputs.iter().copied(), Precision::F64);
    let output_len = (2 * POINTS * 8) as u64;
    let (output, staging, submission) = scoped(device, "f64 built-in check", || {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("f64 built-ins"),
            source: wgpu::ShaderSource::Wgsl(f64_builtins_source().into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("f64 built-ins"),
            layout: None,
            module: &module,
            entry_point: Some(F64_BUILTINS_ENTRY),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        let buffer = |label, size, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        let input = buffer(
            "f64 inputs",
            input_bytes.len() as u64,
            U::STORAGE | U::COPY_DST,
        );
        let output = buffer("f64 outputs", output_len, U::STORAGE | U::COPY_SRC);
        let staging = buffer("f64 readback", output_len, U::MAP_READ | U::COPY_DST);
        queue.write_buffer(&input, 0, &input_bytes);
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("f64 built-ins"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: output.as_entire_binding(),
                },
            ],
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("f64 built-ins"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups((POINTS as u32).div_ceil(64), 1, 1);
        }
        encoder.copy_buffer_to_buffer(&output, 0, &staging, 0, output_len);
        let submission = queue.submit([encoder.finish()]);
        (output, staging, submission)
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
        .map_err(|err| GpuError::Device {
            operation: "f64 built-in check",
            message: err.to_string(),
        })?;
    let failed = |message: String| GpuError::Device {
        operation: "f64 built-in check",
        message,
    };
    mapped
        .try_recv()
        .map_err(|_| failed("the readback was not mapped".into()))?
        .map_err(|err| failed(err.to_string()))?;
    let values = {
        let view = staging
            .get_mapped_range(..)
            .map_err(|err| failed(err.to_string()))?;
        decode(&view, Precision::F64)
    };
    staging.unmap();
    drop(output);
    let mut check = F64BuiltinCheck {
        points: POINTS,
        exp: 0.0,
        log: 0.0,
    };
    for (x, got) in inputs.iter().zip(values.chunks_exact(2)) {
        check.exp = check.exp.max(relative_error(got[0], x.exp()));
        check.log = check.log.max(relative_error(got[1], (x.abs() + 0.5).ln()));
    }
    Ok(check)
}
