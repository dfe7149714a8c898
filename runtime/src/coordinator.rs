//! The job coordinator: takes sampling jobs from clients, places their chains on the
//! cluster's pools where the job finishes soonest, streams their events back, and runs
//! again the chains of a pool that fails.
//!
//! - **Placement.** A scheduling round asks every pool (this node's and its peers', through
//!   pg) for its slots and load, and hands pending chains out by expected finish time
//!   (`placement.rs`) from the speeds measured on earlier tasks of the same model
//!   (`rates.rs`); a pool not measured yet gets a probe share first. A round runs when a
//!   job arrives, when chains finish (chains are handed out as slots free up, which balances
//!   chains of unequal length and corrects estimates that were off), when chains must run
//!   again, and every [`TICK`] while chains wait.
//! - **Warmup.** Independent per chain, or warmup-once-then-broadcast: the warmup chain runs
//!   first, then every chain starts from its result (see [`crate::sampling`]).
//! - **Faults.** A task is lost when its node goes down (membership's `NodeDown`: at once for
//!   a killed node, after the heartbeat timeout for a stalled one), when its pool is
//!   unreachable or has forgotten it (a restarted pool), or when its polls time out three
//!   times in a row. Its unfinished chains go back to pending with the same chain number
//!   and seed (so they draw the same random numbers) and run on whatever pool has room,
//!   this node's included; chains that finished are kept. A chain whose worker fails under
//!   it (a pool reports a lost GPU device or a panic) goes back to pending the same way. Each
//!   retry is an event for the client, one info line here, and an entry in the job's final
//!   report.
//! - **Poison jobs.** A job whose chains kill the nodes that run them must not take the
//!   cluster down one node after another: a chain runs at most three times and not again on
//!   a node where it failed while another can run it, and the chains of a lost task are
//!   quarantined, run alone on a node that runs nothing else of the job; a quarantined task
//!   lost again fails the job, naming the chains, the nodes tried and what each reported
//!   (`job.rs`). A single lost node (an operator's kill) costs nothing but the re-run.
//! - **Draining.** When its node drains ([`CoordinatorMsg::Drain`]), the coordinator refuses
//!   new jobs ([`WireError::Draining`]), tells its jobs' clients (a `Draining` event) and
//!   places nothing more on its own node's pools; its jobs go on elsewhere until they finish
//!   or the node leaves. Nothing new goes to a peer that drains either (membership's
//!   `NodeDraining`); its running chains finish there, or run again here when it leaves.
//! - **Streaming.** Each job keeps an outbox of events (placement, draws, finished chains,
//!   retries, the end) that the client fetches with long polls; a job whose client stops
//!   polling for `client_lease` is cancelled. A job's drivers stop fetching while its client
//!   is behind (`remote::JOB_BACKLOG_BYTES`), so that a slow client slows the pools rather
//!   than filling this node's memory.
//!
//! State is plain code in `job.rs`; calls to pools run in tasks the coordinator owns
//! (`remote.rs`). Every log line about a job is inside a `job` span naming it, as on the
//! pools, whose spans take the job id from the envelope.

mod endpoint;
mod job;
mod placement;
mod rates;
mod remote;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorMessage;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use crate::ids::{JobId, NodeName, RequestId, TaskId, job_span};
use crate::link::Links;
use crate::membership::{DownReason, MEMBERSHIP_NAME, MembershipEvent, MembershipMsg, Subscriber};
use crate::outbox::Waiter;
use crate::sampling::{DevicePreference, WarmupMode};
use crate::ticker::Ticker;
use crate::wire::{JobReply, JobWire, PoolWire, Responder, WireError, WireJobEvent, WireTaskEvent};
pub(crate) use endpoint::{CoordinatorEndpoint, EndpointArgs};
use job::{Job, JobSpec};
use placement::{Capacity, place_groups, suits};
use rates::{PoolKey, RateBook, TaskTiming};
use remote::{Driver, PoolView};

/// The name the coordinator registers under (one node per process).
pub(crate) const COORDINATOR_NAME: &str = "bayes.coordinator";

/// How often waiting polls expire, leases are checked and waiting chains are placed again.
const TICK: Duration = Duration::from_millis(250);

/// How long a job with chains waiting and none running waits for a suitable pool to
/// appear (a restarting pool, a node joining) before it fails.
const NO_WORKER_GRACE: Duration = Duration::from_secs(10);

/// Request ids of one driver task: a range this wide.
const REQUESTS_PER_DRIVER: u64 = 1 << 32;

/// The coordinator behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Coordinator;

/// What the coordinator starts from.
#[derive(Debug, Clone)]
pub(crate) struct CoordinatorArgs {
    /// This node.
    pub(crate) me: NodeName,
    /// A job whose client did not poll for this long is cancelled.
    pub(crate) client_lease: Duration,
    /// The node's job links: a job whose client asks for one gets a token here.
    pub(crate) links: Links,
}

/// Messages of the coordinator.
#[derive(RactorMessage)]
pub(crate) enum CoordinatorMsg {
    /// A checked job from a client; idempotent on `(client, submission)`.
    Submit {
        client: NodeName,
        submission: RequestId,
        spec: JobSpec,
        responder: Responder<JobWire>,
    },
    /// A client's long poll.
    Poll {
        job: JobId,
        ack: u64,
        wait_ms: u32,
        /// After the events the last poll got (`JobRequest::Poll::follow`).
        follow: bool,
        responder: Responder<JobWire>,
    },
    /// A client stops its job.
    Cancel {
        job: JobId,
        responder: Responder<JobWire>,
    },
    /// Nodes coming and going.
    Membership(MembershipEvent),
    /// A scheduling round's answer.
    Surveyed(Vec<PoolView>),
    /// What a task's driver fetched.
    TaskEvents {
        job: JobId,
        task: TaskId,
        events: Vec<WireTaskEvent>,
    },
    /// A pool accepted a task (its chains count in the pool's own load from now on).
    TaskAccepted { task: TaskId },
    /// A task's driver gave up.
    TaskLost {
        job: JobId,
        task: TaskId,
        reason: String,
        /// The pool refused the task (nothing ran), rather than vanished under it.
        refused: bool,
    },
    /// A pool refused a task over its node's limits: the job fails with its message (the
    /// chains would be as large anywhere else).
    TaskRefused {
        job: JobId,
        task: TaskId,
        error: String,
    },
    /// The coordinator's timer.
    Tick,
    /// The node drains (repeated until it is done): no new jobs, nothing more on this node's
    /// pools; the first one tells every running job's client that the node leaves after
    /// `grace`. Answers how many jobs are not yet collected by their clients.
    Drain {
        grace: Duration,
        reply: RpcReplyPort<u32>,
    },
    /// The node leaves: stop every driver, tell the pools to drop this node's tasks, and
    /// dispatch nothing more (the jobs' clients resubmit elsewhere). Answered once the
    /// pools answered or timed out.
    Leave(RpcReplyPort<()>),
}

impl crate::wire::Answerable<JobWire> for CoordinatorMsg {
    fn into_responder(self) -> Option<Responder<JobWire>> {
        match self {
            CoordinatorMsg::Submit { responder, .. }
            | CoordinatorMsg::Poll { responder, .. }
            | CoordinatorMsg::Cancel { responder, .. } => Some(responder),
            _ => None,
        }
    }
}

/// The coordinator's state.
pub(crate) struct CoordinatorState {
    me: NodeName,
    client_lease: Duration,
    jobs: HashMap<JobId, Job>,
    /// Jobs in submission order: earlier jobs are placed first.
    order: VecDeque<JobId>,
    /// Submissions by `(client, request id)`: their job and the request's fingerprint.
    submissions: HashMap<(NodeName, RequestId), (JobId, u64)>,
    down: HashSet<NodeName>,
    /// Peers that drain: nothing new goes there.
    draining_nodes: HashSet<NodeName>,
    /// This node drains.
    draining: bool,
    /// This node leaves: nothing is dispatched any more.
    leaving: bool,
    /// Drivers, surveys and cancels; dropping the set aborts them.
    tasks: JoinSet<()>,
    drivers: HashMap<TaskId, AbortHandle>,
    pools: HashMap<ActorId, ActorRef<PoolWire>>,
    /// Chains sent to each pool whose dispatch is not yet acknowledged: a status the
    /// pool sent before it took them does not count them.
    in_flight: HashMap<TaskId, (ActorId, u32)>,
    /// What finished tasks measured of each pool's speed, per model.
    rates: RateBook,
    /// Each running task's job and timing, from its dispatch.
    timings: HashMap<TaskId, (JobId, TaskTiming)>,
    surveying: bool,
    survey_again: bool,
    next_request: u64,
    reported_jobs: Option<u32>,
    /// Per job with drivers: the bytes of its events its client has not acknowledged, which
    /// its drivers watch.
    backlogs: HashMap<JobId, watch::Sender<usize>>,
    links: Links,
    ticker: Ticker,
}

impl std::fmt::Debug for CoordinatorState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorState")
            .field("jobs", &self.jobs.len())
            .field("drivers", &self.drivers.len())
            .finish_non_exhaustive()
    }
}

impl Actor for Coordinator {
    type Msg = CoordinatorMsg;
    type State = CoordinatorState;
    type Arguments = CoordinatorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: CoordinatorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let ticker = Ticker::start(&myself, TICK, || CoordinatorMsg::Tick);
        // The jobs of an earlier coordinator are gone, and so are their links.
        args.links.clear();
        Ok(CoordinatorState {
            me: args.me,
            client_lease: args.client_lease,
            jobs: HashMap::new(),
            order: VecDeque::new(),
            submissions: HashMap::new(),
            down: HashSet::new(),
            draining_nodes: HashSet::new(),
            draining: false,
            leaving: false,
            tasks: JoinSet::new(),
            drivers: HashMap::new(),
            pools: HashMap::new(),
            in_flight: HashMap::new(),
            rates: RateBook::default(),
            timings: HashMap::new(),
            surveying: false,
            survey_again: false,
            next_request: 1,
            reported_jobs: None,
            backlogs: HashMap::new(),
            links: args.links,
            ticker,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Membership is an elder sibling under the rest-for-one root: it runs, and a new one
        // comes with a new coordinator.
        let membership = ActorRef::<MembershipMsg>::where_is(MEMBERSHIP_NAME)
            .ok_or("membership is not running")?;
        let subscriber = Subscriber::actor(myself, CoordinatorMsg::Membership);
        membership.cast(MembershipMsg::Subscribe(subscriber))?;
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.ticker.stop();
        state.tasks.abort_all();
        state.links.clear();
        let running = state.jobs.values().filter(|job| job.is_running()).count();
        if running > 0 {
            tracing::warn!(
                "coordinator stopping with {running} jobs running; their clients will see them fail"
            );
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
            CoordinatorMsg::Submit {
                client,
                submission,
                spec,
                responder,
            } => submit(&myself, state, client, submission, spec, responder),
            CoordinatorMsg::Poll {
                job,
                ack,
                wait_ms,
                follow,
                responder,
            } => poll(state, job, ack, wait_ms, follow, responder),
            CoordinatorMsg::Cancel { job, responder } => {
                if state.jobs.contains_key(&job) {
                    fail_job(state, job, "cancelled by the client".to_owned());
                    remove_job(state, job);
                    responder.send(Ok(JobReply::Cancelled { job }));
                } else {
                    responder.send(Err(not_found(job)));
                }
            }
            CoordinatorMsg::Membership(event) => membership(&myself, state, event),
            CoordinatorMsg::Surveyed(views) => surveyed(&myself, state, views),
            CoordinatorMsg::TaskEvents { job, task, events } => {
                task_events(&myself, state, job, task, events)
            }
            CoordinatorMsg::TaskAccepted { task, .. } => {
                state.in_flight.remove(&task);
            }
            CoordinatorMsg::TaskLost {
                job,
                task,
                reason,
                refused,
            } => {
                state.drivers.remove(&task);
                state.in_flight.remove(&task);
                lose_task(&myself, state, job, task, &reason, refused);
            }
            CoordinatorMsg::TaskRefused { job, task, error } => {
                state.drivers.remove(&task);
                state.in_flight.remove(&task);
                state.timings.remove(&task);
                fail_job(state, job, error);
            }
            CoordinatorMsg::Tick => tick(&myself, state),
            CoordinatorMsg::Drain { grace, reply } => {
                drain(state, grace);
                let _ = reply.send(state.jobs.len() as u32);
            }
            CoordinatorMsg::Leave(reply) => {
                leave(state).await;
                let _ = reply.send(());
            }
        }
        report_running_jobs(state);
        report_backlogs(state);
        Ok(())
    }
}

fn not_found(job: JobId) -> WireError {
    WireError::NotFound {
        what: format!("job {job}"),
    }
}

fn submit(
    myself: &ActorRef<CoordinatorMsg>,
    state: &mut CoordinatorState,
    client: NodeName,
    submission: RequestId,
    spec: JobSpec,
    responder: Responder<JobWire>,
) {
    let n_chains = spec.n_chains;
    if let Some(&(job, fingerprint)) = state.submissions.get(&(client.clone(), submission)) {
        let responder = responder.with_job(Some(job));
        if fingerprint != spec.fingerprint {
            // Not a retry: the client reused a request id for another request. Answering
            // with the earlier job would hand it that job's events.
            let _span = job_span(job).entered();
            tracing::info!(
                "refusing a submission from {client}: request id {submission} is job {job}'s"
            );
            responder.send(Err(WireError::Invalid {
                what: "request".to_owned(),
                reason: format!(
                    "{submission} of {client} was already used for job {job}, a different request: send each submission with a fresh request id"
                ),
            }));
            return;
        }
        // A retried submission whose answer was lost: the job it started.
        let (n_chains, link) = state.jobs.get(&job).map_or((spec.count(), None), |job| {
            (job.spec.count(), job.link.clone())
        });
        responder.send(Ok(JobReply::Submitted {
            job,
            n_chains,
            link,
            follows: true,
        }));
        return;
    }
    if state.draining {
        tracing::info!("refusing a job from {client}: this node is draining");
        responder.send(Err(WireError::Draining {
            node: state.me.to_string(),
        }));
        return;
    }
    let job = JobId::fresh();
    let _span = job_span(job).entered();
    let subset = match &spec.chains {
        Some(chains) => format!(" (only {} of them: a resubmission)", chains.len()),
        None => String::new(),
    };
    tracing::info!(
        "{n_chains} chains{subset} of {} for {client} (seed {}, {}, device {})",
        spec.model_name,
        spec.seed,
        match spec.warmup {
            WarmupMode::Independent => "independent warmup".to_owned(),
            WarmupMode::Broadcast { burn_in } =>
                format!("warmup once then broadcast, burn-in {burn_in}"),
        },
        match spec.device {
            DevicePreference::Any => "any",
            DevicePreference::Cpu => "cpu",
            DevicePreference::Gpu => "gpu",
        }
    );
    state
        .submissions
        .insert((client.clone(), submission), (job, spec.fingerprint));
    let link = if spec.link {
        state.links.issue(job)
    } else {
        None
    };
    let mut record = Job::new(job, client, submission, spec);
    record.link = link.clone();
    let n_chains = record.spec.count();
    state.jobs.insert(job, record);
    state.order.push_back(job);
    responder.with_job(Some(job)).send(Ok(JobReply::Submitted {
        job,
        n_chains,
        link,
        follows: true,
    }));
    schedule(myself, state);
}

fn poll(
    state: &mut CoordinatorState,
    id: JobId,
    ack: u64,
    wait_ms: u32,
    follow: bool,
    responder: Responder<JobWire>,
) {
    let Some(job) = state.jobs.get_mut(&id) else {
        responder.send(Err(not_found(id)));
        return;
    };
    let timeout = responder.caller_timeout();
    job.poll(ack, follow, Waiter::new(responder, ack, wait_ms, timeout));
    if job.is_collected() {
        // The client has the final event: empty answers now, and the job is done.
        job.release_waiters();
        remove_job(state, id);
    }
}

fn membership(
    myself: &ActorRef<CoordinatorMsg>,
    state: &mut CoordinatorState,
    event: MembershipEvent,
) {
    match event {
        MembershipEvent::NodeUp { node, .. } => {
            state.down.remove(&node.name);
            state.draining_nodes.remove(&node.name);
            schedule(myself, state);
        }
        MembershipEvent::NodeDraining { node } => {
            state.draining_nodes.insert(node);
        }
        MembershipEvent::NodeDown { node, reason } => {
            // A node that left on purpose (it drained) did not crash under its chains: they
            // run again elsewhere, not quarantined.
            let left = matches!(reason, DownReason::Left);
            let reason = format!("node lost: {reason}");
            state.draining_nodes.remove(&node);
            state.down.insert(node.clone());
            // Tasks whose driver saw the node vanish first were lost with it too.
            for job in state.jobs.values_mut() {
                job.node_down(&node, &reason);
            }
            let lost: Vec<(JobId, TaskId)> = state
                .jobs
                .values()
                .flat_map(|job| job.tasks_on(&node).into_iter().map(|task| (job.id, task)))
                .collect();
            for (job, task) in lost {
                if let Some(driver) = state.drivers.remove(&task) {
                    driver.abort();
                }
                lose_task(myself, state, job, task, &reason, left);
            }
        }
    }
}

/// Starts a scheduling round if chains wait (or marks one to follow the round in flight).
fn schedule(myself: &ActorRef<CoordinatorMsg>, state: &mut CoordinatorState) {
    if state.leaving {
        return;
    }
    let waiting = state.jobs.values().any(Job::has_pending);
    if !waiting {
        return;
    }
    if state.surveying {
        state.survey_again = true;
        return;
    }
    state.surveying = true;
    let me = state.me.clone();
    let base = take_requests(state);
    let myself = myself.clone();
    state.tasks.spawn(async move {
        let views = remote::survey(me, base).await;
        let _ = myself.cast(CoordinatorMsg::Surveyed(views));
    });
}

fn take_requests(state: &mut CoordinatorState) -> u64 {
    let base = state.next_request;
    state.next_request += REQUESTS_PER_DRIVER;
    base
}

fn surveyed(myself: &ActorRef<CoordinatorMsg>, state: &mut CoordinatorState, views: Vec<PoolView>) {
    state.surveying = false;
    if state.leaving {
        return;
    }
    let views: Vec<PoolView> = views
        .into_iter()
        .filter(|view| {
            let draining = state.draining_nodes.contains(&view.node)
                || (state.draining && view.node == state.me);
            !state.down.contains(&view.node) && !draining
        })
        .collect();
    let mut capacity: Vec<Capacity> = views
        .iter()
        .map(|view| {
            let id = view.pool.get_id();
            let in_flight: u32 = state
                .in_flight
                .values()
                .filter(|(pool, _)| *pool == id)
                .map(|(_, chains)| chains)
                .sum();
            Capacity::new(
                view.node.clone(),
                view.kind,
                view.slots,
                view.busy + in_flight,
            )
        })
        .collect();
    let order: Vec<JobId> = state.order.iter().copied().collect();
    for id in order {
        let Some(job) = state.jobs.get_mut(&id) else {
            continue;
        };
        let groups = job.pending_groups();
        if groups.is_empty() {
            continue;
        }
        // GPU pools adapt a diagonal metric only.
        let dense = job.spec.settings.metric == crate::wire::WireMetric::Dense;
        let device = match job.spec.device {
            DevicePreference::Any if dense => DevicePreference::Cpu,
            device => device,
        };
        let impossible = dense && device == DevicePreference::Gpu;
        if !views.iter().any(|view| suits(device, view.kind)) || impossible {
            // A pool that is restarting is missing from a round or two: fail only when no
            // suitable pool was seen for a while.
            let since = *job.no_pool_since.get_or_insert_with(Instant::now);
            if !job.has_running() && (impossible || since.elapsed() >= NO_WORKER_GRACE) {
                let error = match device {
                    DevicePreference::Gpu if dense => {
                        "GPU pools adapt a diagonal metric only: use --metric diag, or CPU pools"
                    }
                    DevicePreference::Gpu => {
                        "no GPU pool in the cluster (a node runs none on a software adapter unless started with --software-gpu or --cpu-slots 0)"
                    }
                    DevicePreference::Cpu if job.spec.device == DevicePreference::Any => {
                        "no CPU pool in the cluster answered (a dense metric cannot run on GPU pools)"
                    }
                    _ => "no pool in the cluster answered",
                };
                tracing::warn!(job = %id, "{error}");
                fail_job(state, id, error.to_owned());
            }
            continue;
        }
        job.no_pool_since = None;
        let iterations = job_iterations(&job.spec);
        for pool in &mut capacity {
            let key = PoolKey {
                node: pool.node.clone(),
                kind: pool.kind,
            };
            pool.wave_seconds = state
                .rates
                .wave_seconds(&key, job.spec.model_hash, iterations);
            pool.probing = state
                .timings
                .values()
                .filter(|(of, timing)| *of == id && timing.pool == key)
                .map(|(_, timing)| timing.started.elapsed())
                .max();
        }
        let plan = place_groups(
            &groups,
            device,
            job.has_running(),
            &job.nodes_running(),
            &job.nodes_quarantined(),
            &mut capacity,
        );
        for (group, counts) in groups.into_iter().zip(plan) {
            let mut chains = group.chains;
            for ((view, pool), count) in views.iter().zip(&capacity).zip(counts) {
                if count == 0 {
                    continue;
                }
                let part: Vec<_> = chains.drain(..count as usize).collect();
                dispatch(myself, state, id, view, pool.busy, part);
            }
        }
    }
    if std::mem::take(&mut state.survey_again) {
        schedule(myself, state);
    }
}

/// Iterations of each of a job's chains, as most of them run: warmup and draws, or the
/// burn-in and draws after a broadcast warmup.
fn job_iterations(spec: &JobSpec) -> u64 {
    match spec.warmup {
        WarmupMode::Broadcast { burn_in } => burn_in + spec.settings.num_draws,
        WarmupMode::Independent => spec.settings.num_warmup + spec.settings.num_draws,
    }
}

/// Sends `chains` of job `id` to the pool of `view`, which has `load` chains with them.
fn dispatch(
    myself: &ActorRef<CoordinatorMsg>,
    state: &mut CoordinatorState,
    id: JobId,
    view: &PoolView,
    load: u32,
    chains: Vec<crate::wire::WireChainSpec>,
) {
    let request_base = take_requests(state);
    let Some(job) = state.jobs.get_mut(&id) else {
        return;
    };
    let task = TaskId::fresh();
    state
        .in_flight
        .insert(task, (view.pool.get_id(), chains.len() as u32));
    let warmup_only = chains.len() == 1 && chains[0].chain == crate::sampling::WARMUP_CHAIN.0;
    let iterations = if warmup_only {
        job.spec.settings.num_warmup
    } else {
        job_iterations(&job.spec)
    };
    state.timings.insert(
        task,
        (
            id,
            TaskTiming {
                pool: PoolKey {
                    node: view.node.clone(),
                    kind: view.kind,
                },
                model: job.spec.model_hash,
                slots: view.slots,
                load,
                iterations,
                started: Instant::now(),
            },
        ),
    );
    let numbers: Vec<String> = chains.iter().map(|c| chain_label(c.chain)).collect();
    let wire_task = job.dispatch(
        task,
        view.pool.get_id(),
        view.node.clone(),
        view.kind,
        chains,
    );
    // The driver's own span: its calls and messages carry it to the pools and back.
    let span = tracing::info_span!("job", job = %id);
    span.in_scope(|| {
        tracing::info!(
            "chains {} on {} ({}, task {task})",
            numbers.join(","),
            view.node,
            view.kind
        )
    });
    state.pools.insert(view.pool.get_id(), view.pool.clone());
    let backlog = state
        .backlogs
        .entry(id)
        .or_insert_with(|| watch::channel(0).0)
        .subscribe();
    let driver = Driver {
        coordinator: myself.clone(),
        me: state.me.clone(),
        pool: view.pool.clone(),
        node: view.node.clone(),
        task: wire_task,
        request_base,
        backlog,
    };
    let handle = state.tasks.spawn(remote::drive(driver).instrument(span));
    state.drivers.insert(task, handle);
}

fn chain_label(chain: u32) -> String {
    if sampler::ChainId(chain) == crate::sampling::WARMUP_CHAIN {
        "warmup".to_owned()
    } else {
        chain.to_string()
    }
}

fn task_events(
    myself: &ActorRef<CoordinatorMsg>,
    state: &mut CoordinatorState,
    id: JobId,
    task: TaskId,
    events: Vec<WireTaskEvent>,
) {
    let Some(job) = state.jobs.get_mut(&id) else {
        return;
    };
    let was_running = job.is_running();
    let applied = job.apply(task, events);
    let finished = was_running && !job.is_running();
    if applied.task_complete {
        state.drivers.remove(&task);
        if let Some((_, timing)) = state.timings.remove(&task) {
            state.rates.record(&timing, timing.started.elapsed());
        }
    }
    if let Some(error) = applied.chain_failed {
        fail_job(state, id, error);
        return;
    }
    if let Some(reason) = applied.broken {
        if let Some(driver) = state.drivers.remove(&task) {
            driver.abort();
        }
        lose_task(myself, state, id, task, &reason, false);
        return;
    }
    if finished && let Some(job) = state.jobs.get(&id) {
        let _span = job_span(id).entered();
        tracing::info!("finished: {} chains for {}", job.spec.count(), job.client);
    }
    for (chain, reason) in &applied.retried_chains {
        let _span = job_span(id).entered();
        tracing::info!("retrying chain {}: {reason}", chain_label(*chain));
    }
    if applied.finished_chains > 0 || !applied.retried_chains.is_empty() {
        schedule(myself, state);
    }
}

/// A task lost (or `refused` by its pool, or on a node that left on purpose: nothing there
/// crashed under its chains, which are not suspect): its unfinished chains run again under
/// the job's rules, or the job fails.
fn lose_task(
    myself: &ActorRef<CoordinatorMsg>,
    state: &mut CoordinatorState,
    id: JobId,
    task: TaskId,
    reason: &str,
    refused: bool,
) {
    state.timings.remove(&task);
    let Some(job) = state.jobs.get_mut(&id) else {
        return;
    };
    let record = job.tasks.get(&task).cloned();
    let lost = if refused {
        job.refuse(task, reason)
    } else {
        job.lose(task, reason)
    };
    let _span = job_span(id).entered();
    match lost {
        Ok(false) => return,
        Ok(true) => {
            if let Some(record) = &record {
                let chains: Vec<String> = record.chains.iter().map(|&c| chain_label(c)).collect();
                tracing::info!(
                    "retrying chains {} of {}: {reason}",
                    chains.join(","),
                    record.node
                );
            }
        }
        Err(error) => {
            tracing::warn!("{error}");
            fail_job(state, id, error);
        }
    }
    if let Some(record) = record {
        cancel_task(state, id, task, record.pool, record.node);
    }
    schedule(myself, state);
}

/// Tells a pool to drop a task (best effort), in a task of our own.
fn cancel_task(
    state: &mut CoordinatorState,
    job: JobId,
    task: TaskId,
    pool: ActorId,
    node: NodeName,
) {
    let Some(pool) = state.pools.get(&pool).cloned() else {
        return;
    };
    let me = state.me.clone();
    let request = take_requests(state);
    state
        .tasks
        .spawn(remote::cancel(me, pool, node, job, task, request));
}

/// Ends a job with `error` and cancels its tasks.
fn fail_job(state: &mut CoordinatorState, id: JobId, error: String) {
    let Some(job) = state.jobs.get_mut(&id) else {
        return;
    };
    if job.is_running() {
        let _span = job_span(id).entered();
        tracing::info!("failed: {error}");
    }
    for (task, record) in job.fail(error) {
        if let Some(driver) = state.drivers.remove(&task) {
            driver.abort();
        }
        state.in_flight.remove(&task);
        state.timings.remove(&task);
        cancel_task(state, id, task, record.pool, record.node);
    }
}

fn remove_job(state: &mut CoordinatorState, id: JobId) {
    state.links.revoke(id);
    if let Some(job) = state.jobs.remove(&id) {
        job.log_timeline();
        state
            .submissions
            .remove(&(job.client.clone(), job.submission));
    }
    state.order.retain(|&job| job != id);
}

fn tick(myself: &ActorRef<CoordinatorMsg>, state: &mut CoordinatorState) {
    while state.tasks.try_join_next().is_some() {}
    let now = Instant::now();
    let lease = state.client_lease;
    let mut abandoned = Vec::new();
    for job in state.jobs.values_mut() {
        job.expire_waiters(now);
        if !job.has_waiter() && now.duration_since(job.last_poll) > lease {
            abandoned.push(job.id);
        }
    }
    for id in abandoned {
        let _span = job_span(id).entered();
        tracing::info!("no poll from its client for {lease:?}: cancelled");
        fail_job(state, id, format!("no poll from the client for {lease:?}"));
        remove_job(state, id);
    }
    schedule(myself, state);
}

/// This node drains: refuse new jobs from now on, and tell the running jobs' clients once.
fn drain(state: &mut CoordinatorState, grace: Duration) {
    if std::mem::replace(&mut state.draining, true) {
        return;
    }
    let running = state.jobs.values().filter(|job| job.is_running()).count();
    tracing::info!(
        "draining: refusing new jobs; {running} running jobs go on until they finish or the node leaves"
    );
    for job in state.jobs.values_mut() {
        job.notify_draining(&state.me, grace);
    }
}

/// This node leaves: its drivers stop and the pools drop its tasks now, rather than run
/// chains nobody will collect (their clients resubmit them elsewhere).
async fn leave(state: &mut CoordinatorState) {
    state.leaving = true;
    let mut cancels = JoinSet::new();
    let mut records = Vec::new();
    for job in state.jobs.values_mut() {
        records.extend(
            job.take_tasks()
                .into_iter()
                .map(|(task, record)| (job.id, task, record)),
        );
    }
    for (job, task, record) in records {
        if let Some(driver) = state.drivers.remove(&task) {
            driver.abort();
        }
        state.in_flight.remove(&task);
        state.timings.remove(&task);
        let Some(pool) = state.pools.get(&record.pool).cloned() else {
            continue;
        };
        let request = take_requests(state);
        cancels.spawn(remote::cancel(
            state.me.clone(),
            pool,
            record.node,
            job,
            task,
            request,
        ));
    }
    if !cancels.is_empty() {
        tracing::info!("leaving: {} tasks dropped on their pools", cancels.len());
    }
    while cancels.join_next().await.is_some() {}
}

/// Tells each job's drivers how far behind its client is (a job that is gone: its drivers
/// were aborted, and its sender goes).
fn report_backlogs(state: &mut CoordinatorState) {
    let jobs = &state.jobs;
    state.backlogs.retain(|id, backlog| {
        let Some(job) = jobs.get(id) else {
            return false;
        };
        let bytes = job.outbox.unacked_bytes(WireJobEvent::estimated_bytes);
        backlog.send_if_modified(|old| std::mem::replace(old, bytes) != bytes);
        true
    });
}

/// Tells membership how many jobs run here (gossiped with heartbeats, shown by `status`).
fn report_running_jobs(state: &mut CoordinatorState) {
    let running = state.jobs.values().filter(|job| job.is_running()).count() as u32;
    if state.reported_jobs == Some(running) {
        return;
    }
    if let Some(membership) = ActorRef::<MembershipMsg>::where_is(MEMBERSHIP_NAME) {
        let _ = membership.cast(MembershipMsg::SetRunningJobs(running));
        state.reported_jobs = Some(running);
    }
}

#[cfg(test)]
mod tests;
