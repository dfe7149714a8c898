//! The sampler pools, for any coordinator in the cluster: the CPU pool runs one chain per
//! core, each on a thread of its own; the GPU pool (on a node with a GPU) sends the chains
//! of each task, as one job, to the node's GPU supervisor (`gpu_actor::GpuSupervisor`,
//! registered as [`GPU_SUPERVISOR_NAME`]), the same actor that serves a local
//! `sample --device gpu`: it owns the node's devices, one worker per adapter, and restarts a
//! worker whose device is lost. Both pools speak the same protocol
//! ([`crate::wire::PoolRequest`]) and differ only in how a run starts (`runner.rs`).
//!
//! ```text
//! cpu-pool            Supervisor, rest-for-one (isolates the pool: a pool that fails
//! │                   restarts here, not the node's coordinator)
//! ├── cpu-pool-sampler SamplerPool (CPU): tasks, the queue of chains, the chain threads
//! └── cpu-pool-endpoint PoolEndpoint: pg "cpu-pool"; decodes requests and models
//! gpu-pool            the same for the GPU: pg "gpu-pool"; its sampler owns no device: each
//!                     task is one job of the node's GPU supervisor (a sibling in the tree)
//! ```
//!
//! A coordinator sends a task (chains of one job, [`crate::wire::PoolRequest::Run`]); the
//! pool queues its chains and runs at most `slots` at once (`runner.rs`), and keeps what they
//! stream in the task's [`Outbox`] until the coordinator's polls acknowledge it; past a
//! budget of unacknowledged bytes (the task's [`Backlog`]) its chains wait. A task whose
//! coordinator stops polling for `task_lease` is cancelled. State is the actor's alone: chain
//! threads only cast messages to it, and a pool that restarts has forgotten every task
//! (coordinators see `NotFound` or an unreachable endpoint and run the chains again). A
//! chain whose worker failed under it (a GPU worker that failed or lost its device, a GPU
//! supervisor that is gone, a panic) is reported as [`WireFailure::Worker`], and
//! coordinators run it again; the GPU supervisor restarts its failed worker meanwhile.
//!
//! A pool whose node drains ([`PoolMsg::Drain`]) takes no new task and answers no status
//! (so that no scheduling round counts it); its running chains finish and are polled as
//! usual. A coordinator whose node goes down will never poll its tasks again: they are
//! cancelled at once (membership's `NodeDown`), freeing their slots for the chains that
//! run again elsewhere.

mod endpoint;
mod runner;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gpu_actor::{CancelToken, PrecisionMode};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorMessage;
use sampler::{ChainId, ChainSpec, CheckedModel, SamplerSettings, Seed};
use tokio::time::Instant;

use crate::ids::{JobId, NodeName, TaskId, job_span};
use crate::membership::{MEMBERSHIP_NAME, MembershipEvent, MembershipMsg, Subscriber};
use crate::outbox::{Backlog, Outbox, Waiter};
use crate::sampling::PoolKind;
use crate::ticker::Ticker;
use crate::wire::{
    MAX_POLL_REPLY_BYTES, PoolReply, PoolWire, Responder, WireError, WireFailure, WirePoolKind,
    WireTaskEvent,
};
pub(crate) use endpoint::{EndpointArgs, PoolEndpoint};
use runner::{ChainEnd, ChainRun, GpuTarget, RunOutcome};

/// The name the CPU pool registers under (one node per process).
pub(crate) const CPU_POOL_NAME: &str = "bayes.cpu_pool";
/// The name the GPU pool registers under.
pub(crate) const GPU_POOL_NAME: &str = "bayes.gpu_pool";
/// The name the node's GPU supervisor registers under: the GPU pool looks it up for each
/// task, so that a restarted supervisor serves the next one.
pub(crate) const GPU_SUPERVISOR_NAME: &str = "bayes.gpu_supervisor";

/// How often the pool answers expired polls and drops abandoned tasks.
const TICK: Duration = Duration::from_millis(100);

/// The pool behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SamplerPool;

/// Where a pool runs its chains.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// One chain per thread.
    Cpu,
    /// Each task's chains as one job of the node's GPU supervisor ([`GPU_SUPERVISOR_NAME`]).
    Gpu,
}

/// What the pool starts from.
#[derive(Debug, Clone)]
pub(crate) struct PoolArgs {
    /// Where chains run.
    pub(crate) backend: Backend,
    /// Chains run at once: CPU threads; on the GPU, the capacity the pool reports (it hands
    /// every task to the GPU supervisor at once, whose workers run one job each at a time).
    pub(crate) slots: u32,
    /// Whether [`crate::wire::PoolRequest::InjectFault`] is obeyed.
    pub(crate) allow_fault_injection: bool,
    /// A task nobody polled for this long is cancelled.
    pub(crate) task_lease: Duration,
}

/// A run of one chain: the key of its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RunId(u64);

/// A task as the endpoint hands it over: checked and decoded.
#[derive(Debug)]
pub(crate) struct PreparedTask {
    pub(crate) task: TaskId,
    pub(crate) job: JobId,
    pub(crate) model: Arc<CheckedModel>,
    pub(crate) settings: SamplerSettings,
    pub(crate) seed: Seed,
    pub(crate) chains: Vec<ChainSpec>,
    pub(crate) burn_in: u64,
    /// The precision of a GPU pool's runs.
    pub(crate) gpu_precision: PrecisionMode,
    /// A GPU pool's blocks may carry positions (`WireTask::positions`).
    pub(crate) positions: bool,
}

/// Messages of the pool.
#[derive(RactorMessage)]
pub(crate) enum PoolMsg {
    /// Capacity and load.
    Status(Responder<PoolWire>),
    /// Run a task (idempotent on `(sender, task)`).
    Run {
        sender: NodeName,
        task: PreparedTask,
        responder: Responder<PoolWire>,
    },
    /// Events of a task after `ack`, waiting up to `wait_ms`.
    Poll {
        sender: NodeName,
        task: TaskId,
        ack: u64,
        wait_ms: u32,
        responder: Responder<PoolWire>,
    },
    /// Stop and forget a task.
    Cancel {
        sender: NodeName,
        task: TaskId,
        responder: Responder<PoolWire>,
    },
    /// Test-only: answer, then panic.
    Panic(Responder<PoolWire>),
    /// Test-only: the running chains (or the next to start) fail as if the device were lost.
    FailRuns(Responder<PoolWire>),
    /// Test-only: the process aborts whenever a chain starts from now on.
    AbortOnRun(Responder<PoolWire>),
    /// From a chain thread: draws and progress.
    ChainProgress { run: RunId, event: WireTaskEvent },
    /// From a run's thread: its end, with its chains' last draws.
    RunFinished { run: RunId, chains: Vec<ChainEnd> },
    /// The pool's timer.
    Tick,
    /// The node drains: no new task, no status answer from now on. Answers the chains not
    /// yet reported (running, queued, or with events not yet acknowledged).
    Drain(RpcReplyPort<u32>),
    /// Nodes coming and going: the tasks of a coordinator whose node is down are cancelled.
    Membership(MembershipEvent),
}

type TaskKey = (NodeName, TaskId);

/// The pool's state.
pub(crate) struct PoolState {
    kind: PoolKind,
    slots: usize,
    allow_fault_injection: bool,
    task_lease: Duration,
    tasks: HashMap<TaskKey, Task>,
    /// Chains waiting for a slot: their task and index in it.
    queue: VecDeque<(TaskKey, usize)>,
    running: HashMap<RunId, Running>,
    next_run: u64,
    /// Test-only ([`PoolMsg::FailRuns`]): the next run to start fails as if the device were
    /// lost.
    fail_next_run: bool,
    /// Test-only ([`PoolMsg::AbortOnRun`]): starting a chain aborts the process.
    abort_on_run: bool,
    /// The node drains: no new task.
    draining: bool,
    ticker: Ticker,
}

impl std::fmt::Debug for PoolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolState")
            .field("slots", &self.slots)
            .field("tasks", &self.tasks.len())
            .field("queued", &self.queue.len())
            .field("running", &self.running.len())
            .finish_non_exhaustive()
    }
}

struct Task {
    id: TaskId,
    job: JobId,
    model: Arc<CheckedModel>,
    settings: Arc<SamplerSettings>,
    seed: Seed,
    burn_in: u64,
    gpu_precision: PrecisionMode,
    positions: bool,
    chains: Vec<ChainSpec>,
    /// Chains not yet done or failed.
    unfinished: usize,
    outbox: Outbox<WireTaskEvent>,
    /// The bytes of progress events its runs made that the coordinator has not
    /// acknowledged.
    backlog: Arc<Backlog>,
    waiter: Option<Waiter<Responder<PoolWire>>>,
    last_poll: Instant,
}

/// A run's thread. Dropping it (the pool stops or fails) asks the thread to stop.
struct Running {
    key: TaskKey,
    chains: Vec<ChainId>,
    cancel: Arc<AtomicBool>,
    /// Its task's: a chain waiting on it must see its flag.
    backlog: Arc<Backlog>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Test-only: stopped by an injected fault, its chains fail as if the device were lost.
    injected_fault: bool,
    /// A GPU run's job token: cancels the job in the GPU supervisor's queue too.
    job_cancel: Option<CancelToken>,
}

impl Running {
    /// Asks the run's thread to stop, waking it if it waits for acknowledgements.
    fn stop(&self) {
        self.cancel.store(true, Ordering::Relaxed);
        if let Some(job_cancel) = &self.job_cancel {
            job_cancel.cancel();
        }
        self.backlog.wake();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Actor for SamplerPool {
    type Msg = PoolMsg;
    type State = PoolState;
    type Arguments = PoolArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: PoolArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let ticker = Ticker::start(&myself, TICK, || PoolMsg::Tick);
        let kind = match args.backend {
            Backend::Cpu => PoolKind::Cpu,
            Backend::Gpu => PoolKind::Gpu,
        };
        tracing::debug!("{kind} pool with {} slots", args.slots);
        Ok(PoolState {
            kind,
            slots: args.slots.max(1) as usize,
            allow_fault_injection: args.allow_fault_injection,
            task_lease: args.task_lease,
            tasks: HashMap::new(),
            queue: VecDeque::new(),
            running: HashMap::new(),
            next_run: 0,
            fail_next_run: false,
            abort_on_run: false,
            draining: false,
            ticker,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Membership is an elder of the pool under the rest-for-one root (a pool started
        // alone, in tests, has none).
        if let Some(membership) = ActorRef::<MembershipMsg>::where_is(MEMBERSHIP_NAME) {
            let subscriber = Subscriber::actor(myself, PoolMsg::Membership);
            membership.cast(MembershipMsg::Subscribe(subscriber))?;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.ticker.stop();
        // Chains stop within one iteration of their flag; wait for their threads off the
        // executor.
        let threads: Vec<_> = state
            .running
            .drain()
            .filter_map(|(_, mut running)| running.thread.take())
            .collect();
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            PoolMsg::Status(responder) if state.draining => {
                let node = responder.me().to_string();
                responder.send(Err(WireError::Draining { node }));
            }
            PoolMsg::Status(responder) => responder.send(Ok(status(state))),
            PoolMsg::Run {
                sender,
                task,
                responder,
            } => {
                let job = task.job;
                let span = job_span(job);
                let _entered = span.enter();
                run(&myself, state, sender, task, responder);
            }
            PoolMsg::Poll {
                sender,
                task,
                ack,
                wait_ms,
                responder,
            } => poll(state, (sender, task), ack, wait_ms, responder),
            PoolMsg::Cancel {
                sender,
                task,
                responder,
            } => {
                cancel(state, &(sender, task));
                responder.send(Ok(PoolReply::Cancelled { task }));
            }
            PoolMsg::Panic(responder) => {
                if !state.allow_fault_injection {
                    responder.send(Err(fault_injection_off()));
                } else {
                    responder.send(Ok(PoolReply::FaultInjected));
                    tracing::warn!("fault injection: the cpu pool panics now");
                    panic!("fault injection: the cpu pool panics on request");
                }
            }
            PoolMsg::FailRuns(responder) => {
                if !state.allow_fault_injection {
                    responder.send(Err(fault_injection_off()));
                } else {
                    responder.send(Ok(PoolReply::FaultInjected));
                    fail_runs(state);
                }
            }
            PoolMsg::AbortOnRun(responder) => {
                if !state.allow_fault_injection {
                    responder.send(Err(fault_injection_off()));
                } else {
                    responder.send(Ok(PoolReply::FaultInjected));
                    tracing::warn!("fault injection: the process aborts when a chain starts");
                    state.abort_on_run = true;
                }
            }
            PoolMsg::ChainProgress { run, event } => progress(state, run, event),
            PoolMsg::RunFinished { run, chains } => {
                finished(state, run, chains);
                start_chains(&myself, state);
            }
            PoolMsg::Tick => tick(state),
            PoolMsg::Drain(reply) => {
                if !std::mem::replace(&mut state.draining, true) {
                    tracing::info!("{} pool draining: no new tasks", state.kind);
                }
                let _ = reply.send(unreported(state));
            }
            PoolMsg::Membership(MembershipEvent::NodeDown { node, reason }) => {
                coordinator_down(state, &node, &reason.to_string())
            }
            PoolMsg::Membership(_) => {}
        }
        Ok(())
    }
}

fn fault_injection_off() -> WireError {
    WireError::Forbidden {
        reason: "fault injection is off (start the node with --allow-fault-injection)".to_owned(),
    }
}

/// An injected device loss: the running chains stop and report their worker failed; when
/// none runs, the next run to start does.
fn fail_runs(state: &mut PoolState) {
    tracing::warn!("fault injection: the {} pool's runs fail now", state.kind);
    if state.running.is_empty() {
        state.fail_next_run = true;
    }
    for running in state.running.values_mut() {
        running.injected_fault = true;
        running.stop();
    }
}

fn status(state: &PoolState) -> PoolReply {
    PoolReply::Status {
        kind: match state.kind {
            PoolKind::Cpu => WirePoolKind::Cpu,
            PoolKind::Gpu => WirePoolKind::Gpu,
        },
        slots: state.slots as u32,
        running: busy(state) as u32,
        queued: state.queue.len() as u32,
    }
}

/// Chains running now.
fn busy(state: &PoolState) -> usize {
    state
        .running
        .values()
        .map(|running| running.chains.len())
        .sum()
}

fn run(
    myself: &ActorRef<PoolMsg>,
    state: &mut PoolState,
    sender: NodeName,
    task: PreparedTask,
    responder: Responder<PoolWire>,
) {
    let id = task.task;
    let key = (sender, id);
    if state.tasks.contains_key(&key) {
        // A retry of a dispatch whose answer was lost.
        responder.send(Ok(PoolReply::Accepted { task: id }));
        return;
    }
    if state.draining {
        tracing::info!("refusing task {id} of {}: draining", key.0);
        let node = responder.me().to_string();
        responder.send(Err(WireError::Draining { node }));
        return;
    }
    let chains: Vec<String> = task.chains.iter().map(|c| c.chain.to_string()).collect();
    tracing::info!(
        "running chains {} of {} for {} (task {id})",
        chains.join(","),
        task.model.name(),
        key.0
    );
    for index in 0..task.chains.len() {
        state.queue.push_back((key.clone(), index));
    }
    state.tasks.insert(
        key,
        Task {
            id,
            job: task.job,
            model: task.model,
            settings: Arc::new(task.settings),
            seed: task.seed,
            burn_in: task.burn_in,
            gpu_precision: task.gpu_precision,
            positions: task.positions,
            unfinished: task.chains.len(),
            chains: task.chains,
            outbox: Outbox::new(),
            backlog: Arc::new(Backlog::default()),
            waiter: None,
            last_poll: Instant::now(),
        },
    );
    responder.send(Ok(PoolReply::Accepted { task: id }));
    start_chains(myself, state);
}

/// Starts queued chains: on the CPU one per run while slots are free; on the GPU every
/// task's queued chains as one run at once (one job of the GPU supervisor, which queues the
/// jobs its workers cannot start yet).
fn start_chains(myself: &ActorRef<PoolMsg>, state: &mut PoolState) {
    loop {
        let free = match state.kind {
            PoolKind::Cpu => state.slots.saturating_sub(busy(state)),
            PoolKind::Gpu => usize::MAX,
        };
        if free == 0 {
            return;
        }
        let Some((key, index)) = state.queue.pop_front() else {
            return;
        };
        let mut indices = vec![index];
        if state.kind == PoolKind::Gpu {
            while indices.len() < free
                && let Some((next, next_index)) = state.queue.front()
                && *next == key
            {
                indices.push(*next_index);
                state.queue.pop_front();
            }
        }
        let Some(task) = state.tasks.get_mut(&key) else {
            continue;
        };
        if state.abort_on_run {
            tracing::error!(
                "fault injection: aborting the process as chains of {} start",
                task.job
            );
            std::process::abort();
        }
        let run = RunId(state.next_run);
        state.next_run += 1;
        let specs: Vec<ChainSpec> = indices.iter().map(|&i| task.chains[i].clone()).collect();
        let chains: Vec<ChainId> = specs.iter().map(|spec| spec.chain).collect();
        let cancel = Arc::new(AtomicBool::new(false));
        let gpu = (state.kind == PoolKind::Gpu).then(|| GpuTarget {
            runtime: tokio::runtime::Handle::current(),
            cancel: CancelToken::new(),
            precision: task.gpu_precision,
            positions: task.positions,
        });
        let job_cancel = gpu.as_ref().map(|gpu| gpu.cancel.clone());
        let chain_run = ChainRun {
            run,
            model: Arc::clone(&task.model),
            settings: Arc::clone(&task.settings),
            seed: task.seed,
            specs,
            burn_in: task.burn_in,
            cancel: Arc::clone(&cancel),
            backlog: Arc::clone(&task.backlog),
            gpu,
        };
        match runner::spawn(chain_run, myself.clone()) {
            Ok(thread) => {
                let injected_fault = std::mem::take(&mut state.fail_next_run);
                let running = Running {
                    key,
                    chains,
                    cancel,
                    backlog: Arc::clone(&task.backlog),
                    thread: Some(thread),
                    injected_fault,
                    job_cancel,
                };
                if injected_fault {
                    running.stop();
                }
                state.running.insert(run, running);
            }
            Err(error) => {
                for chain in chains {
                    let error = format!("cannot start a thread for chain {chain}: {error}");
                    tracing::warn!("{error}");
                    task.unfinished = task.unfinished.saturating_sub(1);
                    task.outbox.push(WireTaskEvent::ChainFailed {
                        chain: chain.0,
                        error,
                        cause: WireFailure::Worker,
                    });
                }
                answer_waiter(task);
            }
        }
    }
}

fn poll(
    state: &mut PoolState,
    key: TaskKey,
    ack: u64,
    wait_ms: u32,
    responder: Responder<PoolWire>,
) {
    let Some(task) = state.tasks.get_mut(&key) else {
        responder.send(Err(WireError::NotFound {
            what: format!("task {}", key.1),
        }));
        return;
    };
    task.last_poll = Instant::now();
    // Only progress events and blocks count in the backlog: the runs' threads made them.
    let mut acknowledged = 0;
    task.outbox.ack_each(ack, |event| {
        if let WireTaskEvent::Progress { .. } | WireTaskEvent::Block(_) = event {
            acknowledged += event.estimated_bytes();
        }
    });
    if acknowledged > 0 {
        task.backlog.remove(acknowledged);
    }
    if let Some(old) = task.waiter.take() {
        // A newer poll of the same task replaces the old one (its caller gave up on it).
        answer(key.1, &task.outbox, old);
    }
    let timeout = responder.caller_timeout();
    task.waiter = Some(Waiter::new(responder, ack, wait_ms, timeout));
    answer_waiter(task);
}

fn cancel(state: &mut PoolState, key: &TaskKey) {
    let Some(mut task) = state.tasks.remove(key) else {
        return;
    };
    let _span = tracing::info_span!("job", job = %task.job).entered();
    tracing::info!("task {} of {} cancelled", key.1, key.0);
    if let Some(waiter) = task.waiter.take() {
        answer(key.1, &task.outbox, waiter);
    }
    state.queue.retain(|(queued, _)| queued != key);
    for running in state.running.values().filter(|r| &r.key == key) {
        running.stop();
    }
}

/// Chains not yet reported to their coordinators: running, queued, or done with events not
/// yet acknowledged (one per task).
fn unreported(state: &PoolState) -> u32 {
    let tasks: usize = state
        .tasks
        .values()
        .map(|task| task.unfinished.max(usize::from(task.outbox.len() > 0)))
        .sum();
    tasks as u32
}

/// A coordinator's node is down: nobody will poll its tasks here again.
fn coordinator_down(state: &mut PoolState, node: &NodeName, reason: &str) {
    let keys: Vec<TaskKey> = state
        .tasks
        .keys()
        .filter(|(sender, _)| sender == node)
        .cloned()
        .collect();
    for key in keys {
        tracing::info!("coordinator {node} {reason}: dropping its task {}", key.1);
        cancel(state, &key);
    }
}

fn progress(state: &mut PoolState, run: RunId, event: WireTaskEvent) {
    let Some(running) = state.running.get(&run) else {
        return;
    };
    if let Some(task) = state.tasks.get_mut(&running.key) {
        task.outbox.push(event);
        answer_waiter(task);
    }
}

/// Reports a run's chains.
fn finished(state: &mut PoolState, run: RunId, mut chains: Vec<ChainEnd>) {
    let Some(mut running) = state.running.remove(&run) else {
        return;
    };
    if let Some(thread) = running.thread.take() {
        // Its last act was the cast we are handling: it has returned or is about to.
        let _ = thread.join();
    }
    if running.injected_fault {
        for end in &mut chains {
            end.last = None;
            end.outcome = RunOutcome::WorkerFailed {
                error: "fault injection: the device was lost".to_owned(),
            };
        }
    }
    let Some(task) = state.tasks.get_mut(&running.key) else {
        return;
    };
    for end in chains {
        let (error, cause) = match end.outcome {
            RunOutcome::Done(done) => {
                if let Some(last) = end.last {
                    task.outbox.push(last);
                }
                task.outbox.push(WireTaskEvent::ChainDone(*done));
                task.unfinished = task.unfinished.saturating_sub(1);
                continue;
            }
            RunOutcome::Cancelled => continue,
            RunOutcome::Failed(error) => (error, WireFailure::Sampler),
            RunOutcome::WorkerFailed { error } => (error, WireFailure::Worker),
        };
        let _span = tracing::info_span!("job", job = %task.job).entered();
        tracing::warn!("chain {} failed: {error}", end.chain);
        task.unfinished = task.unfinished.saturating_sub(1);
        task.outbox.push(WireTaskEvent::ChainFailed {
            chain: end.chain.0,
            error,
            cause,
        });
    }
    answer_waiter(task);
}

fn tick(state: &mut PoolState) {
    let now = Instant::now();
    for task in state.tasks.values_mut() {
        let expired = task.waiter.as_ref().is_some_and(|w| w.deadline <= now);
        if expired && let Some(waiter) = task.waiter.take() {
            answer(task.id, &task.outbox, waiter);
        }
    }
    let lease = state.task_lease;
    let abandoned: Vec<TaskKey> = state
        .tasks
        .iter()
        .filter(|(_, task)| task.waiter.is_none() && now.duration_since(task.last_poll) > lease)
        .map(|(key, _)| key.clone())
        .collect();
    for key in abandoned {
        tracing::info!("task {} of {}: no poll for {lease:?}", key.1, key.0);
        cancel(state, &key);
    }
}

/// Answers the task's waiting poll if an event it has not seen is ready.
fn answer_waiter(task: &mut Task) {
    let ready = task
        .waiter
        .as_ref()
        .is_some_and(|w| task.outbox.has_after(w.ack));
    if ready && let Some(waiter) = task.waiter.take() {
        answer(task.id, &task.outbox, waiter);
    }
}

/// Answers a poll with the events after its `ack` (none when the wait ran out).
fn answer(id: TaskId, outbox: &Outbox<WireTaskEvent>, waiter: Waiter<Responder<PoolWire>>) {
    let events = outbox.after(
        waiter.ack,
        MAX_POLL_REPLY_BYTES,
        WireTaskEvent::estimated_bytes,
    );
    waiter
        .reply
        .send(Ok(PoolReply::Events { task: id, events }));
}

#[cfg(test)]
mod tests;
