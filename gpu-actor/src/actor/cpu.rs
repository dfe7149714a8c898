//! The CPU fallback: a job run by [`sampler::sample_chains`] on this node's cores, for nodes
//! without a usable GPU. Blocking: the supervisor calls it on a blocking thread.

use std::panic::AssertUnwindSafe;

use sampler::ChainTrace;

use super::error::GpuActorError;
use super::job::{CancelToken, JobObserver, SampleJob};

/// Runs `job`'s chains on CPU threads (`settings.threads`, 0 for one per core). A panic of the
/// sampler becomes an error, so that the caller is always answered.
pub(super) fn sample(
    job: &SampleJob,
    abort: &CancelToken,
) -> Result<Vec<ChainTrace>, GpuActorError> {
    let request = &job.request;
    let observer = JobObserver {
        user: job.observer.as_deref(),
        cancel: &job.cancel,
        job_abort: abort,
        abort,
    };
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        sampler::sample_chains(
            || request.model.evaluator(),
            &request.settings,
            request.seed,
            &request.chains,
            &observer,
        )
    }));
    match result {
        Ok(traces) => Ok(traces?),
        Err(panic) => Err(GpuActorError::CpuPanicked {
            message: super::worker::panic_message(panic.as_ref()),
        }),
    }
}
