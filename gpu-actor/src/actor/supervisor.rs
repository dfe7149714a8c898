//! The GPU supervisor: the node's gateway for sampling jobs, the supervisor of its GPU
//! workers (one-for-one, permanent, by the rules of [`supervision::Restarts`]), and the CPU
//! fallback when there is no usable adapter. See the parent module for the design.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ractor::concurrency::JoinHandle as TimerHandle;
use ractor::{
    Actor, ActorId, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort, SupervisionEvent,
};
use ractor_cluster::RactorMessage;
use sampler::ChainTrace;
use supervision::{Backoff, Decision, Exit, Intensity, Restart, Restarts, Strategy};
use tokio::time::Instant;

use super::error::GpuActorError;
use super::job::{JobId, RunNotes, SampleJob, SampleOutput};
use super::parts::{self, ActiveJob, Part, PartId, Reply};
use super::shares::{self, Rates};
use super::worker::{GpuWorker, GpuWorkerArgs, GpuWorkerMsg, WorkerFailure};
use super::{WorkerId, cpu};
use crate::device::{AdapterReport, DeviceOptions, DeviceStats, Fault, enumerate_adapters};
use crate::error::GpuError;

/// How long the supervisor waits for a worker's report.
const WORKER_REPORT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a worker may take to stop (abort its job, release its device, after kernels
/// still compiling: see `worker.rs`) before it is killed. Workers stop together.
const WORKER_STOP_TIMEOUT: Duration = Duration::from_secs(55);

/// The supervisor behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuSupervisor;

/// Which adapters get a worker.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum AdapterSelection {
    /// Every hardware adapter; the best software one (lavapipe) when there is no hardware
    /// adapter and `allow_software` is set.
    #[default]
    All,
    /// These positions in [`crate::enumerate_adapters`]'s list.
    Only(Vec<usize>),
    /// None: every job runs on the CPU.
    None,
}

/// How a supervisor starts. Cloneable, so that a parent supervisor can start it again.
#[derive(Clone, Debug)]
pub struct GpuSupervisorArgs {
    /// Which adapters get a worker.
    pub adapters: AdapterSelection,
    /// Whether a software adapter may get a worker: correct, but slower than the CPU
    /// sampler. CI has nothing else.
    pub allow_software: bool,
    /// Longest wait for one GPU submission ([`crate::DeviceOptions::poll_timeout`]).
    pub poll_timeout: Duration,
    /// Longest build of a kernel ([`crate::DeviceOptions::compile_budget`]).
    pub compile_budget: Duration,
    /// Longest wait for the adapter list and for a device to open.
    pub open_timeout: Duration,
    /// Restarts allowed within a window, over all workers; one more and the supervisor
    /// fails (escalation).
    pub intensity: Intensity,
    /// Waits before restarting a worker.
    pub backoff: Backoff,
    /// The fewest chains a worker gets when a job is split over several idle workers: a job
    /// of fewer than twice this runs on one worker.
    pub min_share: usize,
    /// Told every worker's load whenever it changes.
    pub on_load: Option<LoadListener>,
    /// A test hook: open every adapter as if it had no `SHADER_F64`
    /// ([`crate::DeviceOptions::hide_shader_f64`]).
    #[doc(hidden)]
    pub hide_shader_f64: bool,
}

/// Told every worker's load ([`WorkerLoad`], in [`WorkerId`] order) whenever it changes: a
/// node publishes it to its cluster. Called on the supervisor's task: keep it short.
#[derive(Clone)]
pub struct LoadListener(pub Arc<LoadFn>);

/// What a [`LoadListener`] calls.
pub type LoadFn = dyn Fn(&[WorkerLoad]) + Send + Sync;

impl fmt::Debug for LoadListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LoadListener")
    }
}

/// One worker's load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerLoad {
    /// The worker.
    pub worker: WorkerId,
    /// Its adapter's position in [`crate::enumerate_adapters`]'s list.
    pub adapter_index: usize,
    /// Whether it runs, and whether it is busy.
    pub state: WorkerState,
    /// Chains it runs now.
    pub chains: usize,
    /// Parts of jobs it finished (over its restarts).
    pub jobs_completed: u64,
}

impl GpuSupervisor {
    /// The longest the supervisor takes to stop: its workers stop together, each within
    /// its own timeout, then the CPU parts' threads. A parent should give it this long.
    pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);
}

impl GpuSupervisorArgs {
    /// The default intensity: 5 restarts a minute, so that a device that keeps being lost is
    /// given up within a minute, while one lost device a minute is restarted forever.
    pub const DEFAULT_INTENSITY: Intensity = Intensity {
        max_restarts: 5,
        window: Duration::from_secs(60),
    };
    /// The default backoff: 100 ms, doubling up to 5 s.
    pub const DEFAULT_BACKOFF: Backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(5),
    };
    /// The default [`GpuSupervisorArgs::min_share`]: fewer chains than this leave much of
    /// a data-centre GPU idle, so a second device would add its compile time, not speed.
    pub const DEFAULT_MIN_SHARE: usize = 1024;
}

impl Default for GpuSupervisorArgs {
    fn default() -> GpuSupervisorArgs {
        GpuSupervisorArgs {
            adapters: AdapterSelection::All,
            allow_software: true,
            poll_timeout: crate::DeviceOptions::default().poll_timeout,
            compile_budget: crate::DeviceOptions::default().compile_budget,
            open_timeout: Duration::from_secs(30),
            intensity: GpuSupervisorArgs::DEFAULT_INTENSITY,
            backoff: GpuSupervisorArgs::DEFAULT_BACKOFF,
            min_share: GpuSupervisorArgs::DEFAULT_MIN_SHARE,
            on_load: None,
            hide_shader_f64: false,
        }
    }
}

/// Messages of the GPU supervisor.
#[derive(RactorMessage)]
pub enum GpuSupervisorMsg {
    /// Runs a job: split over the workers idle when its turn comes, in proportion to their
    /// speed for its model (queued, first come first served, while none is idle or while
    /// they restart), or on the CPU when the node has no usable GPU.
    Sample(
        Box<SampleJob>,
        RpcReplyPort<Result<SampleOutput, GpuActorError>>,
    ),
    /// The workers, their state and counters, and the fallback line.
    Report(RpcReplyPort<SupervisorReport>),
    /// Injects a fault into a worker's device (tests); answered once injected.
    InjectFault(WorkerId, Fault, RpcReplyPort<Result<(), GpuActorError>>),
    /// From the supervisor's own workers, threads and timers; callers cannot build one.
    Internal(Internal),
}

/// A message the supervisor gets from its own workers, threads and timers.
pub struct Internal(pub(super) SupervisorEvent);

impl fmt::Debug for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Internal").finish_non_exhaustive()
    }
}

pub(super) enum SupervisorEvent {
    /// A worker finished a part; with `failing`, the worker fails next (its device is
    /// unusable) and must get no other part.
    JobDone {
        worker: WorkerId,
        job: PartId,
        result: Result<(Vec<ChainTrace>, RunNotes), GpuActorError>,
        elapsed: Duration,
        failing: bool,
    },
    /// A worker handed a part back untouched: its device cannot run the model
    /// ([`crate::GpuError::model_unsupported`]). The part runs on the CPU, saying why.
    JobRefused {
        worker: WorkerId,
        job: PartId,
        sample_job: Box<SampleJob>,
        reason: String,
    },
    /// A worker fails next (an injected fault took): it must get no other part.
    Failing(WorkerId),
    /// A part on CPU threads finished.
    CpuJobDone {
        job: PartId,
        result: Result<Vec<ChainTrace>, GpuActorError>,
    },
    /// The backoff before restarting a worker has elapsed.
    Restart(WorkerId),
}

/// What [`GpuSupervisorMsg::Report`] answers.
#[derive(Clone, Debug)]
pub struct SupervisorReport {
    /// One per adapter that got a worker, in [`WorkerId`] order.
    pub workers: Vec<WorkerStatus>,
    /// When there is no worker: the one line that says why, and that jobs run on the CPU.
    pub fallback: Option<String>,
    /// Jobs waiting for a worker.
    pub queued: usize,
    /// Jobs running.
    pub running: usize,
}

/// One worker as the supervisor reports it.
#[derive(Clone, Debug)]
pub struct WorkerStatus {
    /// The worker.
    pub id: WorkerId,
    /// Its adapter.
    pub adapter: AdapterReport,
    /// Whether it runs a job or is being restarted.
    pub state: WorkerState,
    /// Chains it runs now.
    pub chains: usize,
    /// How many times it was restarted.
    pub restarts: u32,
    /// Why it last failed, if it did.
    pub last_failure: Option<String>,
    /// Parts of jobs it finished successfully (over its restarts).
    pub jobs_completed: u64,
    /// Its device thread's counters, when it answered in time (not across restarts).
    pub stats: Option<DeviceStats>,
}

/// A worker's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerState {
    /// Running, without a job.
    Idle,
    /// Running a job.
    Busy,
    /// Failed; waiting for its backoff, or starting again.
    Restarting,
}

/// The supervisor's state: its workers, queue and running jobs.
pub struct GpuSupervisorState {
    args: GpuSupervisorArgs,
    workers: Vec<Slot>,
    fallback: Option<String>,
    queue: VecDeque<Queued>,
    running: HashMap<JobId, ActiveJob>,
    next_job: u64,
    /// Every worker is a permanent child, restarted one for one.
    restarts: Restarts,
    /// The load last given to [`GpuSupervisorArgs::on_load`].
    published: Vec<WorkerLoad>,
}

impl fmt::Debug for GpuSupervisorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuSupervisorState")
            .field("workers", &self.workers.len())
            .field("fallback", &self.fallback)
            .field("queued", &self.queue.len())
            .field("running", &self.running.len())
            .finish_non_exhaustive()
    }
}

struct Slot {
    id: WorkerId,
    adapter: AdapterReport,
    state: SlotState,
    restarts: u32,
    last_failure: Option<String>,
    jobs_completed: u64,
    /// Its speed per model, over its restarts.
    rates: Rates,
}

enum SlotState {
    Running {
        worker: ActorRef<GpuWorkerMsg>,
        /// The part it runs, and its chains.
        part: Option<(PartId, usize)>,
        /// It said it is failing, or its mailbox is closed: it gets no more parts, and its
        /// exit event is on its way.
        failing: bool,
    },
    Restarting {
        timer: Option<TimerHandle<Result<(), MessagingErr<GpuSupervisorMsg>>>>,
    },
}

impl Slot {
    fn worker(&self) -> Option<&ActorRef<GpuWorkerMsg>> {
        match &self.state {
            SlotState::Running { worker, .. } => Some(worker),
            SlotState::Restarting { .. } => None,
        }
    }

    fn is_idle(&self) -> bool {
        matches!(
            self.state,
            SlotState::Running {
                part: None,
                failing: false,
                ..
            }
        )
    }

    fn load(&self) -> WorkerLoad {
        let (state, chains) = match &self.state {
            SlotState::Running {
                failing: false,
                part,
                ..
            } => match part {
                Some((_, chains)) => (WorkerState::Busy, *chains),
                None => (WorkerState::Idle, 0),
            },
            _ => (WorkerState::Restarting, 0),
        };
        WorkerLoad {
            worker: self.id,
            adapter_index: self.adapter.index,
            state,
            chains,
            jobs_completed: self.jobs_completed,
        }
    }
}

struct Queued {
    id: JobId,
    job: Box<SampleJob>,
    reply: Reply,
}

/// Why the supervisor failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "GPU worker {worker} failed again after {max_restarts} restarts within {window:?}; giving up (last failure: {reason})"
)]
struct IntensityExceeded {
    worker: WorkerId,
    max_restarts: u32,
    window: Duration,
    reason: String,
}

impl Actor for GpuSupervisor {
    type Msg = GpuSupervisorMsg;
    type State = GpuSupervisorState;
    type Arguments = GpuSupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: GpuSupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let listed = list_adapters(args.open_timeout).await;
        let chosen = choose_adapters(&args.adapters, args.allow_software, listed);
        let restarts = Restarts::new(Strategy::OneForOne, args.intensity, args.backoff);
        let mut state = GpuSupervisorState {
            args,
            workers: Vec::new(),
            fallback: None,
            queue: VecDeque::new(),
            running: HashMap::new(),
            next_job: 0,
            restarts,
            published: Vec::new(),
        };
        let mut failures = Vec::new();
        for adapter in chosen.as_deref().unwrap_or_default() {
            let id = WorkerId(u32::try_from(state.workers.len()).unwrap_or(u32::MAX));
            match start_worker(&myself, &state.args, adapter, id).await {
                Ok(worker) => {
                    tracing::info!(worker = %id, adapter = %adapter.name, kind = %adapter.kind, "GPU worker started");
                    state.workers.push(Slot {
                        id,
                        adapter: adapter.clone(),
                        state: SlotState::Running {
                            worker,
                            part: None,
                            failing: false,
                        },
                        restarts: 0,
                        last_failure: None,
                        jobs_completed: 0,
                        rates: Rates::default(),
                    });
                }
                Err(reason) => failures.push(format!("{}: {reason}", adapter.name)),
            }
        }
        if state.workers.is_empty() {
            let why = match chosen {
                Err(why) => why,
                Ok(_) => format!("no GPU adapter could be opened ({})", failures.join("; ")),
            };
            let line = format!("{why}; sampling runs on the CPU");
            tracing::warn!("{line}");
            state.fallback = Some(line);
        } else {
            for failure in &failures {
                tracing::warn!("GPU adapter {failure}; it gets no worker");
            }
        }
        publish_load(&mut state);
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        stop_everything(state, "the GPU supervisor stopped").await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            GpuSupervisorMsg::Sample(job, reply) => {
                submit(state, job, reply);
                dispatch(&myself, state);
            }
            GpuSupervisorMsg::Report(reply) => {
                let _ = reply.send(report(state).await);
            }
            GpuSupervisorMsg::InjectFault(worker, fault, reply) => {
                inject_fault(state, worker, fault, reply);
            }
            GpuSupervisorMsg::Internal(Internal(event)) => match event {
                SupervisorEvent::JobDone {
                    worker,
                    job,
                    result,
                    elapsed,
                    failing,
                } => {
                    job_done(state, worker, job, result, elapsed, failing);
                    dispatch(&myself, state);
                }
                SupervisorEvent::JobRefused {
                    worker,
                    job,
                    sample_job,
                    reason,
                } => {
                    job_refused(&myself, state, worker, job, sample_job, reason);
                    dispatch(&myself, state);
                }
                SupervisorEvent::Failing(worker) => failing(state, worker),
                SupervisorEvent::CpuJobDone { job, result } => {
                    cpu_job_done(state, job, result);
                    dispatch(&myself, state);
                }
                SupervisorEvent::Restart(worker) => restart(&myself, state, worker).await?,
            },
        }
        publish_load(state);
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let exited = match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                let handed_back = error
                    .downcast_ref::<WorkerFailure>()
                    .is_some_and(|failure| failure.handed_back);
                worker_exited(
                    &myself,
                    state,
                    cell.get_id(),
                    error.to_string(),
                    handed_back,
                )
                .await
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let reason = reason.unwrap_or_else(|| "stopped".to_owned());
                worker_exited(&myself, state, cell.get_id(), reason, false).await
            }
            _ => Ok(()),
        };
        publish_load(state);
        exited
    }
}

/// Tells [`GpuSupervisorArgs::on_load`] the workers' load, when it changed.
fn publish_load(state: &mut GpuSupervisorState) {
    let Some(listener) = &state.args.on_load else {
        return;
    };
    let load: Vec<WorkerLoad> = state.workers.iter().map(Slot::load).collect();
    if load != state.published {
        (listener.0)(&load);
        state.published = load;
    }
}

/// Lists the adapters on a blocking thread (Vulkan's enumeration can take a while).
async fn list_adapters(timeout: Duration) -> Result<Vec<AdapterReport>, String> {
    let listing = tokio::task::spawn_blocking(enumerate_adapters);
    match tokio::time::timeout(timeout, listing).await {
        Ok(Ok(listed)) => listed.map_err(|error| error.to_string()),
        Ok(Err(panic)) => Err(format!("listing the GPU adapters panicked: {panic}")),
        Err(_) => Err(format!("listing the GPU adapters took over {timeout:?}")),
    }
}

/// The adapters that get a worker, or why there is none.
pub(super) fn choose_adapters(
    selection: &AdapterSelection,
    allow_software: bool,
    listed: Result<Vec<AdapterReport>, String>,
) -> Result<Vec<AdapterReport>, String> {
    if *selection == AdapterSelection::None {
        return Err("GPU sampling is switched off".to_owned());
    }
    let listed = listed?;
    let refuse_software = |adapter: &AdapterReport| {
        GpuError::SoftwareOnly {
            name: adapter.name.clone(),
        }
        .to_string()
    };
    match selection {
        AdapterSelection::None => unreachable!("handled above"),
        AdapterSelection::All => {
            let hardware: Vec<AdapterReport> = listed
                .iter()
                .filter(|adapter| !adapter.is_software())
                .cloned()
                .collect();
            match listed.first() {
                _ if !hardware.is_empty() => Ok(hardware),
                None => Err(GpuError::NoAdapter.to_string()),
                // One worker is enough on the CPU's cores, whatever the number of software
                // adapters.
                Some(best) if allow_software => Ok(vec![best.clone()]),
                Some(best) => Err(refuse_software(best)),
            }
        }
        AdapterSelection::Only(indices) => {
            let mut chosen = Vec::with_capacity(indices.len());
            for &index in indices {
                let adapter = listed.get(index).ok_or(GpuError::AdapterIndex {
                    index,
                    count: listed.len(),
                });
                match adapter {
                    Ok(adapter) if adapter.is_software() && !allow_software => {
                        return Err(refuse_software(adapter));
                    }
                    Ok(adapter) => chosen.push(adapter.clone()),
                    Err(error) => return Err(error.to_string()),
                }
            }
            if chosen.is_empty() {
                return Err("no GPU adapter was selected".to_owned());
            }
            Ok(chosen)
        }
    }
}

/// Starts a worker for `adapter`, linked to the supervisor; it opens its device first.
async fn start_worker(
    myself: &ActorRef<GpuSupervisorMsg>,
    args: &GpuSupervisorArgs,
    adapter: &AdapterReport,
    id: WorkerId,
) -> Result<ActorRef<GpuWorkerMsg>, String> {
    let worker_args = GpuWorkerArgs {
        id,
        options: DeviceOptions {
            hide_shader_f64: args.hide_shader_f64,
            ..GpuWorkerArgs::device_options(
                adapter.index,
                args.allow_software,
                args.poll_timeout,
                args.compile_budget,
            )
        },
        open_timeout: args.open_timeout,
        supervisor: myself.clone(),
    };
    match GpuWorker::spawn_linked(None, GpuWorker, worker_args, myself.get_cell()).await {
        Ok((worker, _handle)) => Ok(worker),
        Err(error) => Err(supervision::spawn_error_reason(&error)),
    }
}

fn submit(state: &mut GpuSupervisorState, job: Box<SampleJob>, reply: Reply) {
    if let Err(error) = job.request.settings.validate() {
        let _ = reply.send(Err(error.into()));
        return;
    }
    if job.cancel.is_cancelled() {
        let _ = reply.send(Err(GpuActorError::Cancelled));
        return;
    }
    let id = JobId(state.next_job);
    state.next_job += 1;
    state.queue.push_back(Queued { id, job, reply });
}

/// Hands parts waiting for a worker, then queued jobs, to idle workers; or queued jobs to
/// the CPU when there are no workers.
fn dispatch(myself: &ActorRef<GpuSupervisorMsg>, state: &mut GpuSupervisorState) {
    dispatch_waiting_parts(state);
    while let Some(queued) = state.queue.pop_front() {
        if queued.job.cancel.is_cancelled() {
            let _ = queued.reply.send(Err(GpuActorError::Cancelled));
            continue;
        }
        if state.workers.is_empty() {
            let cpu_busy = state.running.values().any(|job| {
                job.parts
                    .iter()
                    .any(|part| matches!(part, Part::OnCpu { .. }))
            });
            if cpu_busy {
                // One CPU job at a time: each already uses every core.
                state.queue.push_front(queued);
                return;
            }
            let Queued { id, job, reply } = queued;
            let mut active = ActiveJob::new(&job, reply);
            active.parts.push(Part::Waiting(job));
            state.running.insert(id, active);
            start_on_cpu(myself, state, PartId { job: id, index: 0 }, None);
            continue;
        }
        let idle: Vec<usize> = (0..state.workers.len())
            .filter(|&index| state.workers[index].is_idle())
            .collect();
        if idle.is_empty() {
            state.queue.push_front(queued);
            return;
        }
        start_on_gpus(state, queued, &idle);
    }
}

/// Splits a job over the `idle` workers (positions in `state.workers`) by their speed for
/// its model, and sends each its part.
fn start_on_gpus(state: &mut GpuSupervisorState, queued: Queued, idle: &[usize]) {
    let Queued { id, job, reply } = queued;
    let active = ActiveJob::new(&job, reply);
    let rates: Vec<Option<f64>> = idle
        .iter()
        .map(|&index| state.workers[index].rates.get(active.model))
        .collect();
    let counts = shares::plan(job.request.chains.len(), &rates, state.args.min_share);
    let mut chosen: Vec<(usize, usize)> = idle
        .iter()
        .zip(&counts)
        .filter(|(_, count)| **count > 0)
        .map(|(&index, &count)| (index, count))
        .collect();
    if chosen.is_empty() {
        // No chains: the first idle worker answers (its run checks the request).
        chosen.push((idle[0], 0));
    }
    let counts: Vec<usize> = chosen.iter().map(|&(_, count)| count).collect();
    let parts = parts::split(job, &counts);
    if parts.len() > 1 {
        tracing::debug!(job = %id, ?counts, "job split over {} GPU workers", parts.len());
    }
    state.running.insert(id, active);
    for (index, (part, (slot, _))) in parts.into_iter().zip(chosen).enumerate() {
        let part_id = PartId { job: id, index };
        if let Some(active) = state.running.get_mut(&id) {
            active.parts.push(Part::Waiting(Box::new(part)));
        }
        send_part(state, part_id, slot);
    }
}

/// Hands parts whose worker was gone when they were sent to idle workers, oldest job first.
fn dispatch_waiting_parts(state: &mut GpuSupervisorState) {
    let mut waiting: Vec<PartId> = state
        .running
        .iter()
        .flat_map(|(&job, active)| {
            active
                .parts
                .iter()
                .enumerate()
                .filter(|(_, part)| matches!(part, Part::Waiting(_)))
                .map(move |(index, _)| PartId { job, index })
        })
        .collect();
    waiting.sort_by_key(|part| (part.job, part.index));
    for part in waiting {
        let Some(slot) = state.workers.iter().position(Slot::is_idle) else {
            return;
        };
        send_part(state, part, slot);
    }
}

/// Sends waiting part `part_id` to the idle worker at `slot`. A worker that died an instant
/// ago leaves the part waiting for the next idle worker (its exit event restarts it).
fn send_part(state: &mut GpuSupervisorState, part_id: PartId, slot: usize) {
    let Some(active) = state.running.get_mut(&part_id.job) else {
        return;
    };
    let abort = active.abort.clone();
    let Some((part, job)) = active.take_waiting(part_id.index) else {
        return;
    };
    let chains = job.request.chains.len();
    let slot = &mut state.workers[slot];
    let SlotState::Running {
        worker,
        part: running,
        failing,
    } = &mut slot.state
    else {
        *part = Part::Waiting(job);
        return;
    };
    let lost = match worker.cast(GpuWorkerMsg::Run(part_id, job, abort)) {
        Ok(()) => {
            *running = Some((part_id, chains));
            *part = Part::OnGpu {
                worker: slot.id,
                adapter: slot.adapter.name.clone(),
                chains,
            };
            false
        }
        Err(error) => {
            *failing = true;
            match error {
                MessagingErr::SendErr(GpuWorkerMsg::Run(_, job, _)) => {
                    *part = Part::Waiting(job);
                    false
                }
                _ => true,
            }
        }
    };
    if lost {
        active.fail(GpuActorError::Unavailable {
            reason: "the GPU worker is gone".to_owned(),
        });
    }
}

/// Runs waiting part `part_id` on CPU threads: the node has no usable GPU (`reason` `None`)
/// or a worker refused it.
fn start_on_cpu(
    myself: &ActorRef<GpuSupervisorMsg>,
    state: &mut GpuSupervisorState,
    part_id: PartId,
    reason: Option<String>,
) {
    let Some(active) = state.running.get_mut(&part_id.job) else {
        return;
    };
    let abort = active.abort.clone();
    let Some((part, job)) = active.take_waiting(part_id.index) else {
        return;
    };
    let chains = job.request.chains.len();
    let supervisor = myself.clone();
    let thread = tokio::task::spawn_blocking(move || {
        let result = cpu::sample(&job, &abort);
        let event = SupervisorEvent::CpuJobDone {
            job: part_id,
            result,
        };
        // A supervisor that stopped has answered the caller already.
        let _ = supervisor.cast(GpuSupervisorMsg::Internal(Internal(event)));
    });
    *part = Part::OnCpu {
        thread,
        reason,
        chains,
    };
}

/// Forgets job `id` once nothing of it is left to wait for, answering its caller when every
/// part is done.
fn settle(state: &mut GpuSupervisorState, id: JobId) {
    let fallback = state.fallback.as_deref();
    if let Some(active) = state.running.get_mut(&id)
        && active.settle(fallback)
    {
        state.running.remove(&id);
    }
}

fn job_done(
    state: &mut GpuSupervisorState,
    worker: WorkerId,
    part: PartId,
    result: Result<(Vec<ChainTrace>, RunNotes), GpuActorError>,
    elapsed: Duration,
    failing: bool,
) {
    let Some(slot) = state.workers.iter_mut().find(|slot| slot.id == worker) else {
        return;
    };
    if let SlotState::Running {
        part: current,
        failing: worker_failing,
        ..
    } = &mut slot.state
        && current.is_some_and(|(id, _)| id == part)
    {
        let chains = current.take().map_or(0, |(_, chains)| chains);
        *worker_failing |= failing;
        if result.is_ok() {
            slot.jobs_completed += 1;
            if let Some(active) = state.running.get(&part.job) {
                let seconds = elapsed.as_secs_f64();
                slot.rates
                    .record(active.model, chains, active.iterations, seconds);
            }
        }
    }
    // Absent when the worker's exit was seen first and answered the caller.
    if let Some(active) = state.running.get_mut(&part.job) {
        let (result, notes) = match result {
            Ok((traces, notes)) => (Ok(traces), Some(notes)),
            Err(error) => (Err(error), None),
        };
        active.part_finished(part.index, result, notes);
        settle(state, part.job);
    }
}

/// A worker handed back a part whose model its device cannot run: the worker is free again,
/// and the part runs on the CPU (the node's cores, as the fallback without GPUs) with
/// `reason`.
fn job_refused(
    myself: &ActorRef<GpuSupervisorMsg>,
    state: &mut GpuSupervisorState,
    worker: WorkerId,
    part: PartId,
    sample_job: Box<SampleJob>,
    reason: String,
) {
    if let Some(slot) = state.workers.iter_mut().find(|slot| slot.id == worker)
        && let SlotState::Running { part: current, .. } = &mut slot.state
        && current.is_some_and(|(id, _)| id == part)
    {
        *current = None;
    }
    // Absent, or answered, when the worker's exit was seen first.
    let Some(active) = state.running.get_mut(&part.job) else {
        return;
    };
    let answered = active.answered();
    let Some(slot) = active.parts.get_mut(part.index) else {
        return;
    };
    if answered {
        *slot = Part::Ended;
        settle(state, part.job);
        return;
    }
    tracing::info!(%part, %reason, "sampling on the CPU instead");
    *slot = Part::Waiting(sample_job);
    start_on_cpu(myself, state, part, Some(reason));
}

/// A worker announced its failure: no part goes to it until it is restarted.
fn failing(state: &mut GpuSupervisorState, worker: WorkerId) {
    if let Some(slot) = state.workers.iter_mut().find(|slot| slot.id == worker)
        && let SlotState::Running { failing, .. } = &mut slot.state
    {
        *failing = true;
    }
}

fn cpu_job_done(
    state: &mut GpuSupervisorState,
    part: PartId,
    result: Result<Vec<ChainTrace>, GpuActorError>,
) {
    if let Some(active) = state.running.get_mut(&part.job) {
        active.part_finished(part.index, result, None);
        settle(state, part.job);
    }
}

async fn report(state: &GpuSupervisorState) -> SupervisorReport {
    let mut workers = Vec::with_capacity(state.workers.len());
    for slot in &state.workers {
        let load = slot.load();
        let stats = match &slot.state {
            SlotState::Running {
                worker,
                failing: false,
                ..
            } => {
                let answer = worker
                    .call(GpuWorkerMsg::Report, Some(WORKER_REPORT_TIMEOUT))
                    .await;
                match answer {
                    Ok(ractor::rpc::CallResult::Success(report)) => report.stats,
                    _ => None,
                }
            }
            _ => None,
        };
        workers.push(WorkerStatus {
            id: slot.id,
            adapter: slot.adapter.clone(),
            state: load.state,
            chains: load.chains,
            restarts: slot.restarts,
            last_failure: slot.last_failure.clone(),
            jobs_completed: slot.jobs_completed,
            stats,
        });
    }
    SupervisorReport {
        workers,
        fallback: state.fallback.clone(),
        queued: state.queue.len(),
        running: state.running.len(),
    }
}

fn inject_fault(
    state: &mut GpuSupervisorState,
    worker: WorkerId,
    fault: Fault,
    reply: RpcReplyPort<Result<(), GpuActorError>>,
) {
    let running = state
        .workers
        .iter()
        .find(|slot| slot.id == worker)
        .and_then(|slot| match &slot.state {
            SlotState::Running {
                worker,
                failing: false,
                ..
            } => Some(worker),
            _ => None,
        });
    let reply = match running {
        Some(actor) => match actor.cast(GpuWorkerMsg::InjectFault(fault, reply)) {
            Ok(()) => return,
            Err(MessagingErr::SendErr(GpuWorkerMsg::InjectFault(_, reply))) => reply,
            Err(_) => return,
        },
        None => reply,
    };
    let _ = reply.send(Err(GpuActorError::NoWorker { worker }));
}

/// A worker exited: the caller of its part's job gets an error (and the job's other parts
/// stop), unless the worker `handed_back` its part first (the part then waits for its
/// `JobRefused`, which runs it on the CPU), and it is restarted after its backoff (or the
/// supervisor gives up).
async fn worker_exited(
    myself: &ActorRef<GpuSupervisorMsg>,
    state: &mut GpuSupervisorState,
    actor: ActorId,
    reason: String,
    handed_back: bool,
) -> Result<(), ActorProcessingErr> {
    let Some(index) = state
        .workers
        .iter()
        .position(|slot| slot.worker().is_some_and(|w| w.get_id() == actor))
    else {
        return Ok(());
    };
    let slot = &mut state.workers[index];
    tracing::warn!(worker = %slot.id, adapter = %slot.adapter.name, "GPU worker failed: {reason}");
    let part = match std::mem::replace(&mut slot.state, SlotState::Restarting { timer: None }) {
        SlotState::Running { part, .. } => part.map(|(id, _)| id),
        _ => None,
    };
    slot.last_failure = Some(reason.clone());
    let error = GpuActorError::WorkerFailed {
        worker: slot.id,
        adapter: slot.adapter.name.clone(),
        reason,
    };
    if let Some(part) = part.filter(|_| !handed_back)
        && let Some(active) = state.running.get_mut(&part.job)
    {
        active.part_finished(part.index, Err(error), None);
        settle(state, part.job);
    }
    schedule_restart(myself, state, index).await
}

/// Arms the restart timer of worker `index` (which is `Restarting`), or gives up when the
/// restart intensity is exceeded.
async fn schedule_restart(
    myself: &ActorRef<GpuSupervisorMsg>,
    state: &mut GpuSupervisorState,
    index: usize,
) -> Result<(), ActorProcessingErr> {
    let exit = Exit::Abnormal {
        reason: state.workers[index]
            .last_failure
            .clone()
            .unwrap_or_default(),
    };
    let count = state.workers.len();
    let decision =
        state
            .restarts
            .child_exited(index, count, Restart::Permanent, &exit, Instant::now());
    let delay = match decision {
        Decision::Restart { delay, .. } => delay,
        // A permanent child is always restarted, or the supervisor gives up.
        Decision::Leave { .. } | Decision::Escalate => {
            let slot = &state.workers[index];
            let intensity = state.restarts.intensity();
            let error = IntensityExceeded {
                worker: slot.id,
                max_restarts: intensity.max_restarts,
                window: intensity.window,
                reason: slot.last_failure.clone().unwrap_or_default(),
            };
            tracing::error!("{error}");
            stop_everything(state, &error.to_string()).await;
            return Err(error.into());
        }
    };
    let id = state.workers[index].id;
    tracing::debug!(worker = %id, "restarting in {delay:?}");
    let timer = myself.send_after(delay, move || {
        GpuSupervisorMsg::Internal(Internal(SupervisorEvent::Restart(id)))
    });
    state.workers[index].state = SlotState::Restarting { timer: Some(timer) };
    Ok(())
}

async fn restart(
    myself: &ActorRef<GpuSupervisorMsg>,
    state: &mut GpuSupervisorState,
    id: WorkerId,
) -> Result<(), ActorProcessingErr> {
    let Some(index) = state.workers.iter().position(|slot| slot.id == id) else {
        return Ok(());
    };
    if !matches!(state.workers[index].state, SlotState::Restarting { .. }) {
        return Ok(());
    }
    let adapter = state.workers[index].adapter.clone();
    match start_worker(myself, &state.args, &adapter, id).await {
        Ok(worker) => {
            let slot = &mut state.workers[index];
            slot.state = SlotState::Running {
                worker,
                part: None,
                failing: false,
            };
            slot.restarts += 1;
            tracing::info!(worker = %id, adapter = %adapter.name, restarts = slot.restarts, "GPU worker restarted");
            dispatch(myself, state);
            Ok(())
        }
        Err(reason) => {
            tracing::warn!(worker = %id, adapter = %adapter.name, "GPU worker failed to restart: {reason}");
            state.workers[index].last_failure = Some(format!("restart failed: {reason}"));
            schedule_restart(myself, state, index).await
        }
    }
}

/// Answers every waiting and running job with `reason`, stops the workers (each aborts its
/// part and releases its device) and waits for the CPU parts' threads.
async fn stop_everything(state: &mut GpuSupervisorState, reason: &str) {
    for queued in state.queue.drain(..) {
        let _ = queued.reply.send(Err(GpuActorError::Unavailable {
            reason: reason.to_owned(),
        }));
    }
    let mut threads = Vec::new();
    for (_, mut active) in state.running.drain() {
        active.stop(reason);
        threads.extend(active.cpu_threads());
    }
    let mut stopping = tokio::task::JoinSet::new();
    for slot in state.workers.iter_mut().rev() {
        match std::mem::replace(&mut slot.state, SlotState::Restarting { timer: None }) {
            SlotState::Running { worker, .. } => {
                let (id, reason) = (slot.id, reason.to_owned());
                stopping.spawn(async move {
                    let stopped = worker
                        .stop_and_wait(Some(reason), Some(WORKER_STOP_TIMEOUT))
                        .await;
                    if stopped.is_err() {
                        tracing::warn!(worker = %id, "GPU worker did not stop within {WORKER_STOP_TIMEOUT:?}; killing it");
                        worker.kill();
                    }
                });
            }
            SlotState::Restarting { timer } => {
                if let Some(timer) = timer {
                    timer.abort();
                }
            }
        }
    }
    let deadline = Instant::now() + GpuSupervisor::STOP_TIMEOUT;
    let _ = tokio::time::timeout_at(deadline, stopping.join_all()).await;
    for thread in threads {
        // The chains stop at their next iteration.
        let _ = tokio::time::timeout_at(deadline, thread).await;
    }
}
