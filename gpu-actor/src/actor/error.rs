//! The error of every answer of the GPU actors and of every call to them.

use std::time::Duration;

use sampler::SampleError;

use super::WorkerId;
use crate::error::GpuError;

/// Why a job, or a call to the GPU supervisor, failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuActorError {
    /// The device refused or failed the job; the worker is fine and serves the next one.
    #[error("GPU worker {worker} ({adapter}): {error}")]
    Gpu {
        /// The worker.
        worker: WorkerId,
        /// Its adapter's name.
        adapter: String,
        /// The device's error.
        #[source]
        error: GpuError,
    },
    /// The worker running the job failed (its device thread panicked, its device was lost,
    /// or its own code panicked); it is being restarted. The job may be sent again.
    #[error(
        "GPU worker {worker} ({adapter}) failed while running this job and is being restarted: {reason}"
    )]
    WorkerFailed {
        /// The worker.
        worker: WorkerId,
        /// Its adapter's name.
        adapter: String,
        /// The failure as text.
        reason: String,
    },
    /// The request's settings are invalid, or the CPU fallback's sampler failed.
    #[error(transparent)]
    Sampler(#[from] SampleError),
    /// The CPU fallback's sampler panicked (a bug).
    #[error("the CPU sampler panicked: {message}")]
    CpuPanicked {
        /// The panic's message.
        message: String,
    },
    /// The job's [`super::CancelToken`] was cancelled.
    #[error("the sampling job was cancelled")]
    Cancelled,
    /// The supervisor gave up (its workers failed more often than its restart intensity
    /// allows) or is stopping; the job was not run to its end.
    #[error("the GPU supervisor cannot run this job: {reason}")]
    Unavailable {
        /// Why.
        reason: String,
    },
    /// A message names a worker that is not running (unknown, or being restarted).
    #[error("no running GPU worker {worker}")]
    NoWorker {
        /// The worker asked for.
        worker: WorkerId,
    },
    /// No answer within the call's timeout. The outcome is unknown.
    #[error("no answer from the GPU supervisor within {waited:?}")]
    Timeout {
        /// The call's timeout.
        waited: Duration,
    },
    /// The supervisor stopped before answering.
    #[error("the GPU supervisor stopped before answering")]
    NoReply,
    /// The supervisor is not running (a stale reference: look it up again).
    #[error("the GPU supervisor is not running")]
    Unreachable,
}
