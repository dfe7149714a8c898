//! The GPU worker: the one owner of one [`GpuDevice`], running its supervisor's jobs one at
//! a time on a blocking thread so that it keeps answering messages meanwhile.
//!
//! A worker fails (and its supervisor restarts it with a new device) when it sees that its
//! device is unusable: [`GpuError::DeviceThreadGone`] (the device thread panicked),
//! [`GpuError::DeviceLost`], or a [`GpuError::CompileBudget`] spent in a first dispatch (the
//! device's queue is busy compiling until the driver is done: see [`CompileStage`]), from a
//! job or from an injected fault, or when the driver panics on the job's thread. Any other
//! error fails the job only.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorMessage;
use sampler::ChainTrace;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::WorkerId;
use super::error::GpuActorError;
use super::job::{CancelToken, JobObserver, RunNotes, SampleJob};
use super::parts::PartId;
use super::supervisor::{GpuSupervisorMsg, Internal, SupervisorEvent};
use crate::device::{
    AdapterChoice, CompileStage, DeviceOptions, DeviceStats, Fault, GpuDevice, KernelOverrides,
};
use crate::error::GpuError;
use crate::sampling::sample_on_device_with;

/// How long a worker waits for its device thread to take an injected fault or report its
/// counters; the device thread answers between commands, so this bounds one command.
const DEVICE_ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a report waits for the device thread's counters.
const STATS_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a stopping worker waits for its device thread to release the device, kernels
/// still compiling in the background included (a process must not exit while a driver
/// compiles: some crash it).
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(50);

/// The worker behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct GpuWorker;

/// How to start a worker.
#[derive(Debug, Clone)]
pub(super) struct GpuWorkerArgs {
    /// Its name in its supervisor.
    pub(super) id: WorkerId,
    /// The adapter to open, `allow_software` and `poll_timeout`.
    pub(super) options: DeviceOptions,
    /// The longest wait for the device to open.
    pub(super) open_timeout: Duration,
    /// Where results go.
    pub(super) supervisor: ActorRef<GpuSupervisorMsg>,
}

/// A worker's state: its device, the job it runs and those sent while it ran one.
pub(super) struct GpuWorkerState {
    id: WorkerId,
    device: GpuDevice,
    supervisor: ActorRef<GpuSupervisorMsg>,
    running: Option<RunningJob>,
    waiting: VecDeque<(PartId, Box<SampleJob>, CancelToken)>,
}

/// The job on the blocking thread. Dropping it (the worker stops or fails) aborts the job.
struct RunningJob {
    id: PartId,
    abort: CancelToken,
    thread: JoinHandle<()>,
    started: Instant,
}

impl Drop for RunningJob {
    fn drop(&mut self) {
        self.abort.cancel();
    }
}

/// Messages of a worker.
#[derive(RactorMessage)]
pub(super) enum GpuWorkerMsg {
    /// Runs a part of a job (after the one running, if any), stopping when the job's abort
    /// token (the last field) is cancelled; the result goes to the supervisor.
    Run(PartId, Box<SampleJob>, CancelToken),
    /// The worker's adapter, counters and whether it is busy.
    Report(RpcReplyPort<WorkerReport>),
    /// Injects a fault into the device thread. Both faults leave the device unusable, so the
    /// worker fails once it sees their effect.
    InjectFault(Fault, RpcReplyPort<Result<(), GpuActorError>>),
    /// The job's thread finished (sent by that thread).
    Finished(PartId, Result<(Vec<ChainTrace>, RunNotes), JobFailure>),
}

/// A worker as [`GpuWorkerMsg::Report`] describes it.
#[derive(Clone, Debug)]
pub(super) struct WorkerReport {
    /// The device thread's counters; `None` when it did not answer at once (it is busy with
    /// a long command).
    pub(super) stats: Option<DeviceStats>,
}

/// Why a job's thread failed.
#[derive(Debug)]
pub(super) enum JobFailure {
    Device(GpuError),
    Panicked(String),
    /// The model cannot run on this device ([`GpuError::model_unsupported`]): the job, handed
    /// back untouched.
    Unsupported(GpuError, Box<SampleJob>),
}

/// The worker's own failure: the reason its supervisor logs and gives the caller, unless
/// the worker handed its job back before failing (the supervisor may see the failure before
/// the job, and must leave the job to it then).
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub(super) struct WorkerFailure {
    reason: String,
    pub(super) handed_back: bool,
}

impl WorkerFailure {
    fn new(reason: String) -> WorkerFailure {
        WorkerFailure {
            reason,
            handed_back: false,
        }
    }
}

/// Whether the device can no longer be used after `error`.
fn is_fatal(error: &GpuError) -> bool {
    matches!(
        error,
        GpuError::DeviceThreadGone
            | GpuError::DeviceLost { .. }
            | GpuError::CompileBudget {
                stage: CompileStage::FirstDispatch,
                ..
            }
    )
}

impl Actor for GpuWorker {
    type Msg = GpuWorkerMsg;
    type State = GpuWorkerState;
    type Arguments = GpuWorkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: GpuWorkerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let device = open_device(args.options, args.open_timeout).await?;
        Ok(GpuWorkerState {
            id: args.id,
            device,
            supervisor: args.supervisor,
            running: None,
            waiting: VecDeque::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Abort the job and wait for its thread (it stops after the device command in
        // progress), then release the device.
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        if let Some(mut running) = state.running.take() {
            running.abort.cancel();
            let _ = tokio::time::timeout_at(deadline, &mut running.thread).await;
        }
        let device = state.device.clone();
        let stopped = tokio::time::timeout_at(
            deadline,
            tokio::task::spawn_blocking(move || device.shutdown()),
        )
        .await;
        if !matches!(stopped, Ok(Ok(Ok(())))) {
            tracing::warn!(worker = %state.id, "the GPU device did not shut down cleanly within {SHUTDOWN_TIMEOUT:?}");
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            GpuWorkerMsg::Run(id, job, job_abort) => {
                state.waiting.push_back((id, job, job_abort));
                start_next(&myself, state);
                Ok(())
            }
            GpuWorkerMsg::Report(reply) => {
                let _ = reply.send(report(state).await);
                Ok(())
            }
            GpuWorkerMsg::InjectFault(fault, reply) => inject_fault(state, fault, reply).await,
            GpuWorkerMsg::Finished(id, result) => {
                finished(state, id, result)?;
                start_next(&myself, state);
                Ok(())
            }
        }
    }
}

/// Opens the device on a blocking thread, waiting at most `timeout`.
async fn open_device(options: DeviceOptions, timeout: Duration) -> Result<GpuDevice, GpuError> {
    let opening = tokio::task::spawn_blocking(move || GpuDevice::open(&options));
    match tokio::time::timeout(timeout, opening).await {
        Ok(Ok(opened)) => opened,
        // A panic while opening: the device thread is gone.
        Ok(Err(_)) => Err(GpuError::DeviceThreadGone),
        // The thread is left to finish; the device it may still open is then dropped.
        Err(_) => Err(GpuError::ReplyTimeout { waited: timeout }),
    }
}

impl GpuWorkerArgs {
    /// The options to open adapter `index` with.
    pub(super) fn device_options(
        index: usize,
        allow_software: bool,
        poll_timeout: Duration,
        compile_budget: Duration,
    ) -> DeviceOptions {
        DeviceOptions {
            adapter: AdapterChoice::Index(index),
            allow_software,
            poll_timeout,
            compile_budget,
            hide_shader_f64: false,
            pass_precision_check: false,
        }
    }
}

fn adapter_name(state: &GpuWorkerState) -> String {
    state.device.report().name.clone()
}

/// Starts the next waiting job on a blocking thread, if none is running.
fn start_next(myself: &ActorRef<GpuWorkerMsg>, state: &mut GpuWorkerState) {
    if state.running.is_some() {
        return;
    }
    let Some((id, job, job_abort)) = state.waiting.pop_front() else {
        return;
    };
    let abort = CancelToken::new();
    let device = state.device.clone();
    let worker = myself.clone();
    let thread_abort = abort.clone();
    let thread = tokio::task::spawn_blocking(move || {
        let observer = JobObserver {
            user: job.observer.as_deref(),
            cancel: &job.cancel,
            job_abort: &job_abort,
            abort: &thread_abort,
        };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            sample_on_device_with(
                &device,
                &job.request,
                &KernelOverrides::default(),
                &observer,
            )
            .map(|run| {
                let notes = RunNotes {
                    precision: run.precision,
                    restarted: run.restarted.len(),
                };
                (run.traces, notes)
            })
        }));
        let result = match result {
            // Nothing was drawn: the job goes back to the supervisor, for the CPU.
            Ok(Err(error)) if error.model_unsupported() => Err(JobFailure::Unsupported(error, job)),
            Ok(traces) => traces.map_err(JobFailure::Device),
            Err(panic) => Err(JobFailure::Panicked(panic_message(panic.as_ref()))),
        };
        // A worker that is gone has had its job answered by the supervisor already.
        let _ = worker.cast(GpuWorkerMsg::Finished(id, result));
    });
    state.running = Some(RunningJob {
        id,
        abort,
        thread,
        started: Instant::now(),
    });
}

/// Sends a finished job's result to the supervisor; fails the worker when the device is
/// unusable.
fn finished(
    state: &mut GpuWorkerState,
    id: PartId,
    result: Result<(Vec<ChainTrace>, RunNotes), JobFailure>,
) -> Result<(), ActorProcessingErr> {
    let Some(running) = state.running.take_if(|running| running.id == id) else {
        return Ok(());
    };
    // The thread's last act was to send this message: nothing is left to wait for.
    let elapsed = running.started.elapsed();
    drop(running);
    let adapter = adapter_name(state);
    if let Err(JobFailure::Unsupported(error, job)) = result {
        let reason = error.to_string();
        if is_fatal(&error) {
            // Before the job comes back, so that no other job is sent here meanwhile.
            let failing = SupervisorEvent::Failing(state.id);
            let _ = state
                .supervisor
                .cast(GpuSupervisorMsg::Internal(Internal(failing)));
        }
        let event = SupervisorEvent::JobRefused {
            worker: state.id,
            job: id,
            sample_job: job,
            reason: reason.clone(),
        };
        let _ = state
            .supervisor
            .cast(GpuSupervisorMsg::Internal(Internal(event)));
        // A compile budget spent in a first dispatch leaves the device busy compiling.
        if is_fatal(&error) {
            return Err(WorkerFailure {
                reason,
                handed_back: true,
            }
            .into());
        }
        return Ok(());
    }
    let (result, failure) = match result {
        Ok(traces) => (Ok(traces), None),
        Err(JobFailure::Device(error)) if is_fatal(&error) => {
            let reason = error.to_string();
            (
                Err(GpuActorError::WorkerFailed {
                    worker: state.id,
                    adapter,
                    reason: reason.clone(),
                }),
                Some(reason),
            )
        }
        Err(JobFailure::Device(error)) => (
            Err(GpuActorError::Gpu {
                worker: state.id,
                adapter,
                error,
            }),
            None,
        ),
        Err(JobFailure::Unsupported(..)) => unreachable!("handed back above"),
        Err(JobFailure::Panicked(message)) => {
            let reason = format!("the sampling driver panicked: {message}");
            (
                Err(GpuActorError::WorkerFailed {
                    worker: state.id,
                    adapter,
                    reason: reason.clone(),
                }),
                Some(reason),
            )
        }
    };
    let event = SupervisorEvent::JobDone {
        worker: state.id,
        job: id,
        result,
        elapsed,
        failing: failure.is_some(),
    };
    // A supervisor that is gone takes its workers with it.
    let _ = state
        .supervisor
        .cast(GpuSupervisorMsg::Internal(Internal(event)));
    match failure {
        Some(reason) => Err(WorkerFailure::new(reason).into()),
        None => Ok(()),
    }
}

async fn report(state: &GpuWorkerState) -> WorkerReport {
    let stats = tokio::time::timeout(STATS_TIMEOUT, state.device.stats())
        .await
        .ok()
        .and_then(Result::ok);
    WorkerReport { stats }
}

async fn inject_fault(
    state: &mut GpuWorkerState,
    fault: Fault,
    reply: RpcReplyPort<Result<(), GpuActorError>>,
) -> Result<(), ActorProcessingErr> {
    let injected =
        match tokio::time::timeout(DEVICE_ANSWER_TIMEOUT, state.device.inject_fault(fault)).await {
            Ok(result) => result,
            Err(_) => Err(GpuError::ReplyTimeout {
                waited: DEVICE_ANSWER_TIMEOUT,
            }),
        };
    let outcome = match injected {
        // The fault took: the device thread is gone or its device lost.
        Ok(()) => Ok(None),
        Err(error) if is_fatal(&error) => Ok(Some(error.to_string())),
        Err(error) => Err(GpuActorError::Gpu {
            worker: state.id,
            adapter: adapter_name(state),
            error,
        }),
    };
    match outcome {
        Ok(failure) => {
            // Before the caller hears of it, so that the jobs it sends next wait for the
            // restart instead of coming here.
            let failing = SupervisorEvent::Failing(state.id);
            let _ = state
                .supervisor
                .cast(GpuSupervisorMsg::Internal(Internal(failing)));
            let _ = reply.send(Ok(()));
            let reason = match failure {
                Some(reason) => reason,
                None => format!("injected fault {fault:?}"),
            };
            Err(WorkerFailure::new(reason).into())
        }
        Err(error) => {
            let _ = reply.send(Err(error));
            Ok(())
        }
    }
}

pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
