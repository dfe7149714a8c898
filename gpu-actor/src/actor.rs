//! The GPU actors of a node: a [`GpuSupervisor`], the stable gateway that sampling jobs are
//! sent to, and under it one GPU worker per usable adapter, each the only owner of one
//! [`crate::GpuDevice`]. It is the one path to a node's GPUs: `cluster-cli sample --device
//! gpu` starts one for its run, and a cluster node runs one as a child of its root
//! supervisor (`runtime`'s `node.rs`), to which its GPU pool sends each task's chains as one
//! job.
//!
//! ```text
//! GpuSupervisor        the gateway: job queue, restarts, CPU fallback, report
//! ├── worker gpu0      owns the GpuDevice of adapter 0; one job at a time, on a blocking thread
//! └── worker gpu1      ...
//! ```
//!
//! **Jobs.** A caller sends [`GpuSupervisorMsg::Sample`] with a [`SampleJob`]: a plain-data
//! [`GpuSampleRequest`] (checked model, settings, seed, chain specs, kernel, precision), an
//! optional [`sampler::Observer`] that sees every draw as it happens (progress bars locally;
//! the runtime's forwarder of draws to a remote caller), and a [`CancelToken`]. The supervisor
//! queues jobs, first come first served; when a job's turn comes it splits the job's chains
//! over the workers idle then, in proportion to each one's measured speed for the model,
//! into parts of at least [`GpuSupervisorArgs::min_share`] chains (a smaller job runs on one
//! worker). Each worker runs its part with [`crate::sample_on_device`] on a blocking thread,
//! so it keeps answering messages, and sends the result back to the supervisor, which
//! answers the caller once every part is done, the traces in the order of the chains
//! ([`RanOn::Gpu`] says which worker ran how many). A part that fails fails the job at once
//! and stops its other parts. Each part pools its own chains' warmup (the metric, see
//! `sampling/adapt.rs`): a split job draws differently from the same job on one worker,
//! from the same posterior. The supervisor alone holds callers' reply ports: whatever
//! happens to a worker, its caller gets an answer. Whenever a worker's load changes, the
//! supervisor tells its [`LoadListener`] (a node gossips it, and `status` shows it).
//!
//! **Supervision.** One-for-one: a worker whose device thread panicked or whose device was
//! lost (any [`crate::GpuError::DeviceThreadGone`] or [`crate::GpuError::DeviceLost`] it sees), or
//! whose own code panicked, fails; the caller of its job at that moment gets
//! [`GpuActorError::WorkerFailed`], and the worker is started again, with a new device, after
//! an exponential backoff ([`GpuSupervisorArgs::backoff`]). Queued jobs wait for it. The
//! decisions are the project's one supervision mechanism, [`supervision::Restarts`], with
//! every worker a permanent child restarted one for one. More restarts than
//! [`GpuSupervisorArgs::intensity`] allows within its window, and the supervisor answers every waiting caller with
//! [`GpuActorError::Unavailable`], stops its workers and fails: its own supervisor (the
//! node's tree, in `runtime`) sees the failure (escalation). Callers' references to the
//! supervisor survive worker restarts.
//!
//! **Fallback.** A node without a usable adapter (none listed, only a software one where
//! software devices are refused, none that opens, or GPU use switched off with
//! [`AdapterSelection::None`]) says so in one line, logged once and kept in
//! [`SupervisorReport::fallback`], and the supervisor runs its jobs itself on CPU threads
//! with [`sampler::sample_chains`], one job at a time; the answer says so
//! ([`RanOn::Cpu`]).
//!
//! Every call has a timeout ([`GpuSupervisor::sample`], [`GpuSupervisor::report`],
//! [`GpuSupervisor::inject_fault`]); a timed-out sample cancels its job.

mod cpu;
mod error;
mod job;
mod parts;
mod shares;
mod supervisor;
mod worker;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorRef, MessagingErr};

/// The request a [`SampleJob`] carries, and its kernel choice.
pub use crate::sampling::{GpuKernel, GpuSampleRequest};
pub use error::GpuActorError;
pub use job::{CancelToken, GpuShare, RanOn, SampleJob, SampleOutput};
pub use supervisor::{
    AdapterSelection, GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg, GpuSupervisorState,
    LoadListener, SupervisorReport, WorkerLoad, WorkerState, WorkerStatus,
};

/// Names a worker of a supervisor: its position in the supervisor's list of adapters, the
/// same before and after restarts. Displayed as `gpu0`, `gpu1`, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerId(pub u32);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gpu{}", self.0)
    }
}

/// What a call's outcome was, as far as the caller can tell.
fn call_outcome<T, M>(
    result: Result<CallResult<T>, MessagingErr<M>>,
    timeout: Duration,
) -> Result<T, GpuActorError> {
    match result {
        Ok(CallResult::Success(value)) => Ok(value),
        Ok(CallResult::Timeout) => Err(GpuActorError::Timeout { waited: timeout }),
        Ok(CallResult::SenderError) => Err(GpuActorError::NoReply),
        Err(_) => Err(GpuActorError::Unreachable),
    }
}

impl GpuSupervisor {
    /// Runs `job` through `supervisor` and waits at most `timeout` for its traces.
    ///
    /// # Errors
    ///
    /// The job's own failure ([`GpuActorError::Gpu`], [`GpuActorError::WorkerFailed`],
    /// [`GpuActorError::Sampler`], [`GpuActorError::Cancelled`], ...), or the call's:
    /// [`GpuActorError::Timeout`] (the job is then cancelled, but it may have finished:
    /// the outcome is unknown), [`GpuActorError::NoReply`] or [`GpuActorError::Unreachable`]
    /// (the supervisor stopped: look it up again).
    pub async fn sample(
        supervisor: &ActorRef<GpuSupervisorMsg>,
        job: SampleJob,
        timeout: Duration,
    ) -> Result<SampleOutput, GpuActorError> {
        let cancel = job.cancel.clone();
        let result = supervisor
            .call(
                |reply| GpuSupervisorMsg::Sample(Box::new(job), reply),
                Some(timeout),
            )
            .await;
        let outcome = call_outcome(result, timeout);
        if matches!(outcome, Err(GpuActorError::Timeout { .. })) {
            // Nobody waits for the traces any more: stop computing them.
            cancel.cancel();
        }
        outcome?
    }

    /// The supervisor's workers, their state and counters, and its fallback line.
    ///
    /// # Errors
    ///
    /// [`GpuActorError::Timeout`], [`GpuActorError::NoReply`] or
    /// [`GpuActorError::Unreachable`].
    pub async fn report(
        supervisor: &ActorRef<GpuSupervisorMsg>,
        timeout: Duration,
    ) -> Result<SupervisorReport, GpuActorError> {
        let result = supervisor
            .call(GpuSupervisorMsg::Report, Some(timeout))
            .await;
        call_outcome(result, timeout)
    }

    /// Injects `fault` into the device of `worker` (for tests of the restarts).
    ///
    /// # Errors
    ///
    /// [`GpuActorError::NoWorker`] when that worker is not running, the device's error when
    /// the fault could not be injected, or the call's errors.
    pub async fn inject_fault(
        supervisor: &ActorRef<GpuSupervisorMsg>,
        worker: WorkerId,
        fault: crate::Fault,
        timeout: Duration,
    ) -> Result<(), GpuActorError> {
        let result = supervisor
            .call(
                |reply| GpuSupervisorMsg::InjectFault(worker, fault, reply),
                Some(timeout),
            )
            .await;
        call_outcome(result, timeout)?
    }
}
