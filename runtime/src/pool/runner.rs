//! One run on a thread of its own: a single chain on a CPU core (`sample_chains`), or a batch
//! of chains of one task on the pool's GPU (`gpu_actor::sample_on_device`); either way what
//! the chains produce streams to the pool actor in chunks, chain by chain.
//!
//! Runs use dedicated OS threads, never the async executor: a busy executor would delay
//! heartbeats, and peers would take this node for dead (and the GPU sampler blocks on its
//! device for the whole run). The thread talks to the pool only by casting messages; the pool
//! stops it through a shared flag the samplers poll before every iteration (every dispatch
//! on the GPU).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpu_actor::{GpuDevice, GpuError, GpuKernel, GpuSampleRequest, Precision};
use ractor::ActorRef;
use sampler::{
    ChainId, ChainSpec, ChainTrace, CheckedModel, DrawEvent, Observer, SampleError,
    SamplerSettings, Seed, sample_chains,
};

use super::{PoolMsg, RunId};
use crate::wire::{CHUNK_VALUES, WireDraws, WireStats, WireTaskEvent};

/// Longest time between two events of a running chain.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

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
    /// The GPU that runs the batch; `None`: CPU threads.
    pub(crate) device: Option<GpuDevice>,
}

/// How a chain of a run ended.
#[derive(Debug, Clone)]
pub(crate) enum RunOutcome {
    /// Its trace, burn-in removed; its draws were streamed before.
    Done(Box<ChainTrace>),
    /// It was stopped through its flag.
    Cancelled,
    /// The sampler failed: running the chain again would fail again.
    Failed(String),
    /// The worker under the chain failed (a GPU error, a panic): the chain can run again.
    WorkerFailed {
        error: String,
        /// The GPU device can no longer be used: the pool must reopen it.
        device_lost: bool,
    },
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
    settings.threads = run.specs.len().max(1);
    settings.num_draws += burn_in;
    let total = if warm {
        settings.num_draws
    } else {
        settings.num_warmup + settings.num_draws
    };
    let streamers = Streamers {
        cancel: Arc::clone(&run.cancel),
        index: run
            .specs
            .iter()
            .enumerate()
            .map(|(index, spec)| (spec.chain, index))
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
                buffer: Mutex::new(Buffer::new()),
            })
            .collect(),
    };
    let model = &run.model;
    let result = catch_unwind(AssertUnwindSafe(|| match &run.device {
        None => sample_chains(
            || model.evaluator(),
            &settings,
            run.seed,
            &run.specs,
            &streamers,
        )
        .map_err(|error| match error {
            SampleError::Cancelled => None,
            error => Some(RunOutcome::Failed(error.to_string())),
        }),
        Some(device) => {
            let request = GpuSampleRequest {
                model: CheckedModel::clone(model),
                settings: settings.clone(),
                seed: run.seed,
                chains: run.specs.clone(),
                kernel: GpuKernel::default(),
                precision: Precision::F32,
            };
            gpu_actor::sample_on_device(device, &request, &streamers).map_err(|error| match error {
                GpuError::Sampler(SampleError::Cancelled) => None,
                GpuError::Sampler(error) => {
                    Some(RunOutcome::Failed(format!("on the GPU: {error}")))
                }
                // Anything else is the device's or its driver's: a CPU pool, or this pool
                // with its device reopened, can run the chains.
                error => Some(RunOutcome::WorkerFailed {
                    device_lost: matches!(
                        error,
                        GpuError::WorkerGone | GpuError::DeviceLost { .. }
                    ),
                    error: format!("on the GPU: {error}"),
                }),
            })
        }
    }));
    let outcome = |chain: ChainId, trace: Option<ChainTrace>| match trace {
        Some(trace) => {
            RunOutcome::Done(Box::new(drop_burn_in(trace, burn_in, settings.save_warmup)))
        }
        None => RunOutcome::WorkerFailed {
            error: format!("the sampler returned no trace for chain {chain}"),
            device_lost: false,
        },
    };
    match result {
        Ok(Ok(traces)) => {
            let mut traces: HashMap<ChainId, ChainTrace> = traces
                .into_iter()
                .map(|trace| (trace.chain, trace))
                .collect();
            run.specs
                .iter()
                .zip(&streamers.streamers)
                .map(|(spec, streamer)| {
                    let outcome = outcome(spec.chain, traces.remove(&spec.chain));
                    let last = match outcome {
                        RunOutcome::Done(_) => streamer.last_event(),
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
                device_lost: false,
            })
        }
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

/// Moves the first `burn_in` draws of a warm-started chain out of the kept draws, with their
/// gradient evaluations and their share of the time. A warm-started chain runs no warmup of
/// its own, so with `save_warmup` its burn-in draws become its warmup draws (the streamer
/// sent them as such).
fn drop_burn_in(mut trace: ChainTrace, burn_in: u64, save_warmup: bool) -> ChainTrace {
    let burn = (burn_in as usize).min(trace.stats.len());
    if burn == 0 {
        return trace;
    }
    let values = burn * trace.n_columns;
    let burned_values: Vec<f64> = trace.draws.drain(..values).collect();
    let burned_stats: Vec<_> = trace.stats.drain(..burn).collect();
    let burned_grads: u64 = burned_stats.iter().map(|s| u64::from(s.n_leapfrog)).sum();
    let share = burned_grads as f64 / (trace.grad_evals_sampling as f64).max(1.0);
    let burned_seconds = trace.sampling_seconds * share.min(1.0);
    trace.grad_evals_warmup += burned_grads;
    trace.grad_evals_sampling = trace.grad_evals_sampling.saturating_sub(burned_grads);
    trace.warmup_seconds += burned_seconds;
    trace.sampling_seconds -= burned_seconds;
    if save_warmup {
        trace.warmup_draws = burned_values;
        trace.warmup_stats = burned_stats;
    }
    trace
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

/// The observer of a run: hands each draw to its chain's [`Streamer`].
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

    fn send(&self, buffer: &mut Buffer) {
        let event = self.event(buffer);
        let _ = self.pool.cast(PoolMsg::ChainProgress {
            run: self.run,
            event,
        });
    }

    /// The draws not sent yet, as the chain's last progress event.
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
        let warmup = event.warmup || event.iteration < self.burn_in;
        if !warmup || self.save_warmup {
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
