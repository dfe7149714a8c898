//! One run on a thread of its own: a single chain on a CPU core (`sample_chains`), or every
//! chain of one task as one job of the node's GPU supervisor (`gpu_actor::GpuSupervisor`,
//! whose worker streams each draw to this run's observer as it comes); either way what the
//! chains produce streams to the pool actor: a CPU chain's in chunks ([`Streamer`]), a GPU
//! run's all chains together, in blocks ([`block`]).
//!
//! Runs use dedicated OS threads, never the async executor: a busy executor would delay
//! heartbeats, and peers would take this node for dead (a GPU run's thread only waits for
//! the supervisor's answer; the draws arrive on the GPU worker's thread, which may wait for
//! acknowledgements). The thread talks to the pool only by casting messages; the pool stops
//! it through a shared flag the samplers poll before every iteration (every dispatch on the
//! GPU), and a GPU run through its job's token as well, which also drops a job still
//! waiting in the supervisor's queue.
//!
//! A run keeps no draws: the samplers hand each to its streamer and forget it
//! (`Observer::keeps_draws`), so a running chain holds one chunk, however long it runs. The
//! streamer counts what it sent, and the chain's report takes its counts from there. When
//! the task's events that the coordinator has not acknowledged pass [`TASK_BACKLOG_BYTES`],
//! the streamer waits for its acknowledgements (or the run's stop flag) before it sends more:
//! a slow coordinator, or a slow client behind it, slows the chains instead of filling this
//! node's memory.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpu_actor::{
    CancelToken, GpuActorError, GpuError, GpuKernel, GpuSampleRequest, GpuSupervisor,
    GpuSupervisorMsg, PrecisionMode, RanOn, SampleJob,
};
use ractor::ActorRef;
use sampler::{
    ChainId, ChainSpec, ChainTrace, CheckedModel, DrawEvent, Observer, SampleError,
    SamplerSettings, Seed, sample_chains,
};

mod block;

use block::{BlockSettings, BlockStreamer};

use super::{GPU_SUPERVISOR_NAME, PoolMsg, RunId};
use crate::outbox::Backlog;
use crate::wire::{CHUNK_VALUES, WireChainDone, WireDraws, WireStats, WireTaskEvent};

/// Longest time between two events of a running chain.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// Longest wait for the GPU supervisor's answer to a task's job. Tasks nobody polls are
/// cancelled by the pool's lease long before; this bounds only a supervisor that never
/// answers.
const GPU_JOB_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Bytes of a task's streamed events not yet acknowledged by its coordinator past which its
/// chains wait: a few dozen streamed events (each at most [`CHUNK_VALUES`] values), so that
/// the next answer is always ready while memory per CPU task stays small.
pub(crate) const TASK_BACKLOG_BYTES: usize = 8 * 1024 * 1024;

/// Everything a run's thread needs.
pub(crate) struct ChainRun {
    pub(crate) run: RunId,
    pub(crate) model: Arc<CheckedModel>,
    pub(crate) settings: Arc<SamplerSettings>,
    pub(crate) seed: Seed,
    /// One chain on a CPU pool; the batch on a GPU pool (all warm-started, or none).
    pub(crate) specs: Vec<ChainSpec>,
    /// Draws dropped at the start of a warm-started chain (one with a tuning).
    pub(crate) burn_in: u64,
    pub(crate) cancel: Arc<AtomicBool>,
    /// The task's events not yet acknowledged (shared by its runs).
    pub(crate) backlog: Arc<Backlog>,
    /// A GPU run: the task's chains go to the node's GPU supervisor; `None`: CPU threads.
    pub(crate) gpu: Option<GpuTarget>,
}

/// What a GPU run needs besides its chains.
pub(crate) struct GpuTarget {
    /// The pool's runtime, on which the run's thread waits for the supervisor's answer.
    pub(crate) runtime: tokio::runtime::Handle,
    /// The job's token; the pool cancels it with the run.
    pub(crate) cancel: CancelToken,
    /// The task's precision (auto unless its job asked).
    pub(crate) precision: PrecisionMode,
    /// Its blocks may carry positions (`WireTask::positions`).
    pub(crate) positions: bool,
}

/// How a chain of a run ended.
#[derive(Debug, Clone)]
pub(crate) enum RunOutcome {
    /// Its report, burn-in removed; its draws were streamed before.
    Done(Box<WireChainDone>),
    /// It was stopped through its flag.
    Cancelled,
    /// The sampler failed: running the chain again would fail again.
    Failed(String),
    /// The worker under the chain failed (a GPU error, a panic): the chain can run again.
    WorkerFailed { error: String },
}

/// One chain's end: its last draws (not yet streamed) and its outcome.
#[derive(Debug)]
pub(crate) struct ChainEnd {
    pub(crate) chain: ChainId,
    pub(crate) last: Option<WireTaskEvent>,
    pub(crate) outcome: RunOutcome,
}

/// Starts the run's thread; it casts `PoolMsg::ChainProgress` while its chains run and one
/// `PoolMsg::RunFinished` at the end, with every chain's last draws (one message, so that
/// the pool answers a waiting poll once with all of them).
pub(crate) fn spawn(run: ChainRun, pool: ActorRef<PoolMsg>) -> std::io::Result<JoinHandle<()>> {
    let first = run.specs.first().map_or(0, |spec| spec.chain.0);
    let name = match run.specs.len() {
        1 => format!("chain-{first}"),
        n => format!("batch-{first}+{n}"),
    };
    std::thread::Builder::new().name(name).spawn(move || {
        let id = run.run;
        let chains = execute(run, &pool);
        let _ = pool.cast(PoolMsg::RunFinished { run: id, chains });
    })
}

fn execute(run: ChainRun, pool: &ActorRef<PoolMsg>) -> Vec<ChainEnd> {
    let warm = run.specs.first().is_some_and(|spec| spec.tuning.is_some());
    let burn_in = if warm { run.burn_in } else { 0 };
    let mut settings = (*run.settings).clone();
    // A CPU run is one chain; a GPU job that falls back to the CPU gets every core.
    settings.threads = if run.gpu.is_some() {
        0
    } else {
        run.specs.len().max(1)
    };
    settings.num_draws = settings.num_draws.saturating_add(burn_in);
    let total = if warm {
        settings.num_draws
    } else {
        settings.num_warmup.saturating_add(settings.num_draws)
    };
    let chain_ids: Vec<ChainId> = run.specs.iter().map(|spec| spec.chain).collect();
    let stream = match &run.gpu {
        Some(gpu) => Stream::Block(Arc::new(BlockStreamer::new(
            run.run,
            pool.clone(),
            &chain_ids,
            BlockSettings {
                burn_in,
                save_warmup: settings.save_warmup,
                total,
                positions: gpu.positions,
            },
            Arc::clone(&run.cancel),
            Arc::clone(&run.backlog),
        ))),
        None => Stream::Chains(Arc::new(Streamers {
            cancel: Arc::clone(&run.cancel),
            index: chain_ids
                .iter()
                .enumerate()
                .map(|(index, &chain)| (chain, index))
                .collect(),
            streamers: run
                .specs
                .iter()
                .map(|spec| Streamer {
                    run: run.run,
                    chain: spec.chain.0,
                    pool: pool.clone(),
                    burn_in,
                    save_warmup: settings.save_warmup,
                    total,
                    cancel: Arc::clone(&run.cancel),
                    backlog: Arc::clone(&run.backlog),
                    buffer: Mutex::new(Buffer::new()),
                })
                .collect(),
        })),
    };
    let model = &run.model;
    let result = catch_unwind(AssertUnwindSafe(|| match &run.gpu {
        None => sample_chains(
            || model.evaluator(),
            &settings,
            run.seed,
            &run.specs,
            stream.observer().as_ref(),
        )
        .map(|traces| (traces, None))
        .map_err(|error| match error {
            SampleError::Cancelled => None,
            error => Some(RunOutcome::Failed(error.to_string())),
        }),
        Some(gpu) => {
            let request = GpuSampleRequest {
                model: CheckedModel::clone(model),
                settings: settings.clone(),
                seed: run.seed,
                chains: run.specs.clone(),
                kernel: GpuKernel::default(),
                precision: gpu.precision,
            };
            sample_on_gpu(gpu, request, stream.observer())
        }
    }));
    let outcome = |chain: ChainId, trace: Option<ChainTrace>, index: usize| match trace {
        Some(trace) => RunOutcome::Done(Box::new(report(&trace, &stream.counts(index)))),
        None => RunOutcome::WorkerFailed {
            error: format!("the sampler returned no trace for chain {chain}"),
        },
    };
    match result {
        Ok(Ok((traces, mut ran_on))) => {
            let mut traces: HashMap<ChainId, ChainTrace> = traces
                .into_iter()
                .map(|trace| (trace.chain, trace))
                .collect();
            // A GPU run's last block goes with its first finished chain: before every
            // finished chain's report.
            let mut block = match &stream {
                Stream::Block(streamer) => streamer.last_event(),
                Stream::Chains(_) => None,
            };
            run.specs
                .iter()
                .enumerate()
                .map(|(index, spec)| {
                    let mut outcome = outcome(spec.chain, traces.remove(&spec.chain), index);
                    // Where a GPU run ran goes with its first finished chain, once.
                    if let RunOutcome::Done(done) = &mut outcome {
                        done.ran_on = ran_on.take();
                    }
                    let last = match (&outcome, &stream) {
                        (RunOutcome::Done(_), Stream::Chains(streamers)) => {
                            streamers.streamers[index].last_event()
                        }
                        (RunOutcome::Done(_), Stream::Block(_)) => block.take(),
                        _ => None,
                    };
                    ChainEnd {
                        chain: spec.chain,
                        last,
                        outcome,
                    }
                })
                .collect()
        }
        Ok(Err(error)) => every_chain(&run.specs, |_| match &error {
            None => RunOutcome::Cancelled,
            Some(outcome) => outcome.clone(),
        }),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            every_chain(&run.specs, |_| RunOutcome::WorkerFailed {
                error: format!("the sampler panicked: {message}"),
            })
        }
    }
}

/// Runs `request` as one job of the node's GPU supervisor, `observer` seeing every draw;
/// blocks this (run's) thread until the supervisor answers. Returns the traces and where
/// they ran ([`ran_on_note`]); `Err(None)`: cancelled.
fn sample_on_gpu(
    gpu: &GpuTarget,
    request: GpuSampleRequest,
    observer: Arc<dyn Observer + Send + Sync>,
) -> Result<(Vec<ChainTrace>, Option<String>), Option<RunOutcome>> {
    let Some(supervisor) = ActorRef::<GpuSupervisorMsg>::where_is(GPU_SUPERVISOR_NAME) else {
        return Err(Some(RunOutcome::WorkerFailed {
            error: "the node's GPU supervisor is not running".to_owned(),
        }));
    };
    let mut job = SampleJob::new(request).with_observer(observer);
    job.cancel = gpu.cancel.clone();
    let answer = gpu
        .runtime
        .block_on(GpuSupervisor::sample(&supervisor, job, GPU_JOB_TIMEOUT));
    match answer {
        Ok(output) => {
            // Where and in which precision, and why (auto's check): the node's log says, and
            // the client is told.
            tracing::info!("{} chains ran on {}", output.traces.len(), output.ran_on);
            let note = ran_on_note(&output.ran_on);
            Ok((output.traces, Some(note)))
        }
        Err(error) => Err(gpu_failure(error)),
    }
}

/// Where a GPU job's chains ran, in which precision and why, as the client reads it (a
/// `RunNote`'s text): `RanOn`'s line, and for chains that ran on the CPU, why.
fn ran_on_note(ran_on: &RanOn) -> String {
    let text = match ran_on {
        RanOn::Gpu { .. } => ran_on.to_string(),
        RanOn::Cpu { reason, .. } | RanOn::Split { reason, .. } => format!("{ran_on}: {reason}"),
    };
    crate::notes::bounded(&text)
}

/// What a GPU job's failure means for its chains: `None` when it was cancelled.
fn gpu_failure(error: GpuActorError) -> Option<RunOutcome> {
    match error {
        GpuActorError::Cancelled
        | GpuActorError::Sampler(SampleError::Cancelled)
        | GpuActorError::Gpu {
            error: GpuError::Sampler(SampleError::Cancelled),
            ..
        } => None,
        // The sampler's own failure: running the chains again would fail again.
        GpuActorError::Gpu {
            error: GpuError::Sampler(error),
            ..
        } => Some(RunOutcome::Failed(format!("on the GPU: {error}"))),
        GpuActorError::Sampler(error) => Some(RunOutcome::Failed(error.to_string())),
        // Anything else is a worker's, its device's or driver's, or the supervisor's: the
        // chains can run again (on a CPU pool, or here once the worker is restarted).
        error => Some(RunOutcome::WorkerFailed {
            error: format!("on the GPU: {error}"),
        }),
    }
}

fn every_chain(specs: &[ChainSpec], outcome: impl Fn(ChainId) -> RunOutcome) -> Vec<ChainEnd> {
    specs
        .iter()
        .map(|spec| ChainEnd {
            chain: spec.chain,
            last: None,
            outcome: outcome(spec.chain),
        })
        .collect()
}

/// What a chain's streamer saw: the draws it sent of each phase, and the burn-in of a
/// warm-started chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// Kept draws (after the burn-in).
    kept: u64,
    /// Warmup draws sent: with `save_warmup`, the warmup's, or a warm-started chain's
    /// burn-in (it runs no warmup of its own, and its burn-in draws are its warmup draws).
    warmup: u64,
    /// Burn-in draws dropped from the kept ones.
    burned: u64,
    /// Their gradient evaluations.
    burned_grads: u64,
}

impl Counts {
    /// Counts `event`'s draw of a chain whose first `burn_in` kept draws are dropped;
    /// returns its phase (`true`: warmup, burn-in included) when the draw is sent, `None`
    /// when it is not (warmup without `save_warmup`).
    fn observe(&mut self, event: &DrawEvent, burn_in: u64, save_warmup: bool) -> Option<bool> {
        let burned = !event.warmup && event.iteration < burn_in;
        let warmup = event.warmup || burned;
        if burned {
            self.burned += 1;
            self.burned_grads += u64::from(event.stats.n_leapfrog);
        }
        if !warmup {
            self.kept += 1;
        } else if save_warmup {
            self.warmup += 1;
        }
        (!warmup || save_warmup).then_some(warmup)
    }
}

/// A finished chain's report (its trace holds no draws: they were streamed): the draw counts
/// are the streamer's, and the burn-in's gradient evaluations and share of the time move
/// from sampling to warmup.
fn report(trace: &ChainTrace, counts: &Counts) -> WireChainDone {
    let mut done = WireChainDone::from_trace(trace);
    done.n_draws = counts.kept;
    done.n_warmup_draws = counts.warmup;
    if counts.burned > 0 {
        let burned = counts.burned_grads;
        let share = burned as f64 / (trace.grad_evals_sampling as f64).max(1.0);
        let burned_seconds = trace.sampling_seconds * share.min(1.0);
        done.grad_evals_warmup += burned;
        done.grad_evals_sampling = trace.grad_evals_sampling.saturating_sub(burned);
        done.warmup_seconds += burned_seconds;
        done.sampling_seconds -= burned_seconds;
    }
    done
}

/// Draws waiting to be sent, all of one phase.
struct Buffer {
    warmup: bool,
    values: Vec<f64>,
    stats: WireStats,
    /// Draws of each phase sent or buffered so far.
    kept_count: u64,
    warmup_count: u64,
    iteration: u64,
    last_flush: Instant,
    /// Every draw seen so far.
    counts: Counts,
}

impl Buffer {
    fn new() -> Self {
        Self {
            warmup: false,
            values: Vec::new(),
            stats: WireStats::default(),
            kept_count: 0,
            warmup_count: 0,
            iteration: 0,
            last_flush: Instant::now(),
            counts: Counts::default(),
        }
    }

    /// The buffered draws as one chunk, and an empty buffer.
    fn take(&mut self) -> Option<WireDraws> {
        let n = self.stats.lp.len() as u64;
        if n == 0 {
            return None;
        }
        let count = if self.warmup {
            &mut self.warmup_count
        } else {
            &mut self.kept_count
        };
        let first = *count;
        *count += n;
        Some(WireDraws {
            warmup: self.warmup,
            first,
            values: std::mem::take(&mut self.values),
            stats: std::mem::take(&mut self.stats),
        })
    }
}

/// How a run streams: chain by chain (a CPU run), or in blocks of all its chains (a GPU
/// run, `block`).
enum Stream {
    Chains(Arc<Streamers>),
    Block(Arc<BlockStreamer>),
}

impl Stream {
    fn observer(&self) -> Arc<dyn Observer + Send + Sync> {
        match self {
            Stream::Chains(streamers) => Arc::clone(streamers) as _,
            Stream::Block(streamer) => Arc::clone(streamer) as _,
        }
    }

    /// What the run's chain at `index` of its specs streamed.
    fn counts(&self, index: usize) -> Counts {
        match self {
            Stream::Chains(streamers) => streamers
                .streamers
                .get(index)
                .map(Streamer::counts)
                .unwrap_or_default(),
            Stream::Block(streamer) => streamer.counts(index),
        }
    }
}

/// The observer of a CPU run: hands each draw to its chain's [`Streamer`].
struct Streamers {
    cancel: Arc<AtomicBool>,
    index: HashMap<ChainId, usize>,
    streamers: Vec<Streamer>,
}

impl Observer for Streamers {
    fn on_draw(&self, event: &DrawEvent) {
        if let Some(&index) = self.index.get(&event.chain) {
            self.streamers[index].on_draw(event);
        }
    }

    fn should_stop(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    fn keeps_draws(&self) -> bool {
        false
    }
}

/// One chain's draws: buffered and cast to the pool in chunks of at most [`CHUNK_VALUES`]
/// values, at least every [`FLUSH_INTERVAL`].
struct Streamer {
    run: RunId,
    chain: u32,
    pool: ActorRef<PoolMsg>,
    burn_in: u64,
    save_warmup: bool,
    total: u64,
    cancel: Arc<AtomicBool>,
    backlog: Arc<Backlog>,
    buffer: Mutex<Buffer>,
}

impl Streamer {
    fn event(&self, buffer: &mut Buffer) -> WireTaskEvent {
        buffer.last_flush = Instant::now();
        WireTaskEvent::Progress {
            chain: self.chain,
            iteration: buffer.iteration,
            total: self.total,
            draws: buffer.take(),
        }
    }

    /// Sends the buffered draws once the coordinator has acknowledged enough of the task's
    /// earlier events (or the run stops).
    fn send(&self, buffer: &mut Buffer) {
        self.backlog.wait_below(TASK_BACKLOG_BYTES, &self.cancel);
        let event = self.event(buffer);
        self.backlog.add(event.estimated_bytes());
        let _ = self.pool.cast(PoolMsg::ChainProgress {
            run: self.run,
            event,
        });
    }

    /// What the chain's draws added up to.
    fn counts(&self) -> Counts {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner()).counts
    }

    /// The draws not sent yet, as the chain's last progress event. Left out of the backlog:
    /// the pool may drop it (an injected fault), and a count too low is harmless.
    fn last_event(&self) -> Option<WireTaskEvent> {
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        (!buffer.stats.lp.is_empty()).then(|| self.event(&mut buffer))
    }
}

impl Streamer {
    fn on_draw(&self, event: &DrawEvent) {
        // One thread at a time calls it for a chain (the chain's thread on the CPU, the one
        // that holds its trace on the GPU): the lock is never contended.
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        buffer.iteration = event.iteration + 1;
        let sent = buffer.counts.observe(event, self.burn_in, self.save_warmup);
        if let Some(warmup) = sent {
            if buffer.warmup != warmup && !buffer.stats.lp.is_empty() {
                self.send(&mut buffer);
            }
            buffer.warmup = warmup;
            buffer.values.extend_from_slice(event.values);
            buffer.stats.push(event.stats);
        }
        if buffer.values.len() + event.values.len() > CHUNK_VALUES
            || buffer.last_flush.elapsed() >= FLUSH_INTERVAL
        {
            self.send(&mut buffer);
        }
    }
}
