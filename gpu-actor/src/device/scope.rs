//! wgpu error scopes as `Result`s: validation, out-of-memory and internal errors of the wgpu
//! calls in a closure become a [`GpuError`] instead of reaching the uncaptured-error handler.
//!
//! Scopes are thread-local and their guards are `!Send`; that is fine, because every wgpu call
//! runs on the device thread.

use crate::error::GpuError;

/// Runs `work` inside error scopes for every error kind; the first error caught wins.
pub(crate) fn scoped<R>(
    device: &wgpu::Device,
    operation: &'static str,
    work: impl FnOnce() -> R,
) -> Result<R, GpuError> {
    let out_of_memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let result = work();
    // Popped innermost first. On native the futures are ready at once.
    let errors = [
        pollster::block_on(validation.pop()),
        pollster::block_on(internal.pop()),
        pollster::block_on(out_of_memory.pop()),
    ];
    match errors.into_iter().flatten().next() {
        None => Ok(result),
        Some(error) => Err(GpuError::Device {
            operation,
            message: error.to_string(),
        }),
    }
}
