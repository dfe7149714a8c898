//! Remote sampling as a client sees it: the request, the updates streamed while a job runs,
//! and the outcome, assembled from the coordinator's events into the sampler's own
//! [`ChainTrace`]s.
//!
//! Chains are numbered `0..n_chains` and the seed is the job's: a chain that runs again after
//! a failure (anywhere in the cluster) draws from the same random stream, so its draws are
//! the ones it would have produced the first time (on the same kind of device).
//!
//! With [`WarmupMode::Broadcast`] one extra chain, [`WARMUP_CHAIN`], runs the warmup alone
//! (eXMC's warmup-once-then-broadcast). Unlike eXMC, every chain then starts from that chain's
//! final position, not from the initial point, with its step size and metric, and drops
//! `burn_in` draws before keeping `num_draws`: the chains all start at one point, and the
//! burn-in lets their independent random streams pull them apart before draws count (R-hat
//! compares chains, and chains that started together look converged sooner than they are).
//!
//! A client that loses the node it submitted to (its coordinator) keeps the chains it has
//! received whole and submits the others again elsewhere, as a job over that subset with
//! the same seed and settings ([`Failover`]): the [`Assembler`] drops their partial draws
//! and takes them from the new job, so the outcome is the one an undisturbed run gives. A
//! broadcast warmup runs again there, from the same random stream.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use gpu_actor::PrecisionMode;
use rayon::prelude::*;
use sampler::{
    ChainId, ChainTrace, CheckedModel, DrawStats, Limits, Model, ModelError, OutputWriter, Room,
    SamplerSettings, Seed, Tuning,
};

use crate::ids::{JobId, NodeName};
use crate::limits::{Holder, JobLimits, JobShape, LimitExceeded};
use crate::notes::{MAX_NOTES, RunNote, RunNotes};
use crate::wire::{
    BlockEntry, WireChainDone, WireDevice, WireDrawBlock, WireDraws, WireError, WireJobEvent,
    WirePoolKind, WireRetry, WireRunNote, WireSampleRequest, WireSettings, WireWarmup,
};

/// The chain number of the warmup chain of [`WarmupMode::Broadcast`]: its own random stream,
/// distinct from every sampling chain's.
pub const WARMUP_CHAIN: ChainId = ChainId(u32::MAX);

/// Most chains in one job.
pub const MAX_CHAINS: u32 = 1 << 20;

/// Draws dropped by default at the start of each chain of [`WarmupMode::Broadcast`].
pub const DEFAULT_BURN_IN: u64 = 100;

/// Where a job's chains may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DevicePreference {
    /// Wherever there is room.
    #[default]
    Any,
    /// CPU sampler pools only.
    Cpu,
    /// GPU workers only.
    Gpu,
}

/// How a job's chains warm up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WarmupMode {
    /// Each chain runs its own warmup (the default).
    #[default]
    Independent,
    /// One chain warms up; all chains start from its final position and tuning, drop
    /// `burn_in` draws, then keep `num_draws` (see the module documentation).
    Broadcast {
        /// Draws dropped at the start of each chain.
        burn_in: u64,
    },
}

/// A sampling job for the cluster.
#[derive(Debug, Clone)]
pub struct SampleRequest {
    /// The model (plain data; it travels as MessagePack and each worker validates it).
    pub model: Model,
    /// How to run each chain (`threads` is ignored: workers run one chain per core).
    pub settings: SamplerSettings,
    /// Chains, numbered `0..n_chains`.
    pub n_chains: u32,
    /// The seed.
    pub seed: Seed,
    /// Where chains may run.
    pub device: DevicePreference,
    /// How chains warm up.
    pub warmup: WarmupMode,
    /// The precision of the chains that run on GPUs (auto by default: f32 where a check
    /// finds it good enough for the model, else f64 or the CPU).
    pub gpu_precision: PrecisionMode,
}

impl SampleRequest {
    /// `n_chains` chains of `model` with `settings` and `seed`, anywhere, each with its own
    /// warmup.
    pub fn new(model: Model, settings: SamplerSettings, n_chains: u32, seed: Seed) -> Self {
        Self {
            model,
            settings,
            n_chains,
            seed,
            device: DevicePreference::Any,
            warmup: WarmupMode::Independent,
            gpu_precision: PrecisionMode::Auto,
        }
    }

    /// What the job will hold where every draw is kept: the client, which keeps what it
    /// asked for. An error when the model does not validate.
    pub fn shape(&self) -> Result<JobShape, ModelError> {
        let model = CheckedModel::new(self.model.clone(), &Limits::default())?;
        let burn_in = match self.warmup {
            WarmupMode::Broadcast { burn_in } => burn_in,
            WarmupMode::Independent => 0,
        };
        Ok(JobShape::new(
            &model,
            &self.settings,
            u64::from(self.n_chains),
            burn_in,
        ))
    }

    /// What writes each draw's reported values from its unconstrained position, for a
    /// client that takes blocks of positions: `None` where the model does not validate.
    pub(crate) fn output_writer(&self) -> Option<OutputWriter> {
        let model = CheckedModel::new(self.model.clone(), &Limits::default()).ok()?;
        Some(OutputWriter::new(model.program()))
    }

    /// Checks the request against `limits` (the caller's: what it can keep; each node checks
    /// its own again), before anything is sized from it or it is sent.
    pub fn check(&self, limits: &JobLimits, holder: &Holder) -> Result<(), RequestError> {
        Ok(limits.check(&self.shape()?, "job", holder)?)
    }

    /// The request on the wire.
    pub fn to_wire(&self) -> WireSampleRequest {
        WireSampleRequest {
            model: self.model.to_msgpack(),
            settings: WireSettings::from(&self.settings).with_precision(self.gpu_precision),
            n_chains: self.n_chains,
            seed: self.seed.0,
            device: match self.device {
                DevicePreference::Any => WireDevice::Any,
                DevicePreference::Cpu => WireDevice::Cpu,
                DevicePreference::Gpu => WireDevice::Gpu,
            },
            warmup: match self.warmup {
                WarmupMode::Independent => WireWarmup::Independent,
                WarmupMode::Broadcast { burn_in } => WireWarmup::Broadcast { burn_in },
            },
            chains: None,
            blocks: true,
            // The client says so where it can write values from the model (`sample`).
            positions: false,
            link: false,
        }
    }
}

/// Why [`SampleRequest::check`] refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The model does not validate.
    #[error("invalid model: {0}")]
    Model(#[from] ModelError),
    /// The job is over a limit.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
}

/// A kind of worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// A CPU sampler pool.
    Cpu,
    /// A GPU worker.
    Gpu,
}

impl From<WirePoolKind> for PoolKind {
    fn from(kind: WirePoolKind) -> Self {
        match kind {
            WirePoolKind::Cpu => PoolKind::Cpu,
            WirePoolKind::Gpu => PoolKind::Gpu,
        }
    }
}

impl std::fmt::Display for PoolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PoolKind::Cpu => "cpu",
            PoolKind::Gpu => "gpu",
        })
    }
}

/// Something that happened to a running job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobUpdate {
    /// Chains were sent to a pool.
    Placed {
        /// The chains ([`WARMUP_CHAIN`] for the warmup chain).
        chains: Vec<ChainId>,
        /// The pool's node.
        node: NodeName,
        /// The pool's kind.
        pool: PoolKind,
    },
    /// The warmup chain of [`WarmupMode::Broadcast`] finished.
    WarmupDone(WarmupReport),
    /// A chain advanced.
    Progress {
        /// The chain.
        chain: ChainId,
        /// Iterations done.
        iteration: u64,
        /// Iterations in all.
        total: u64,
    },
    /// A chain finished and all its draws arrived.
    ChainDone {
        /// The chain.
        chain: ChainId,
        /// Where it ran.
        node: NodeName,
        /// Its attempt.
        attempt: u32,
    },
    /// Chains run again after their worker failed.
    Retried(Vec<Retry>),
    /// The job's coordinator drains (its node is shutting down): the job goes on there
    /// until it finishes or the node leaves after `grace`; then the client fails over.
    CoordinatorDraining {
        /// The coordinator's node.
        node: NodeName,
        /// How long the node waits for its work before it leaves.
        grace: std::time::Duration,
    },
    /// The client lost the job's coordinator and resubmitted the chains it had not received
    /// to another node.
    FailedOver(Failover),
}

/// A job moved to another coordinator after the client lost the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover {
    /// The node that was lost.
    pub from: NodeName,
    /// What happened to it.
    pub reason: String,
    /// The node that took the chains.
    pub to: NodeName,
    /// The job there.
    pub job: JobId,
    /// The chains resubmitted (every chain not yet received whole).
    pub chains: Vec<ChainId>,
}

/// A chain run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The chain ([`WARMUP_CHAIN`] for the warmup chain).
    pub chain: ChainId,
    /// The node it was running on.
    pub node: NodeName,
    /// What happened there.
    pub reason: String,
    /// The attempt that followed (2 for the first retry).
    pub attempt: u32,
}

/// The warmup chain of [`WarmupMode::Broadcast`].
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupReport {
    /// Where it ran.
    pub node: NodeName,
    /// What it found.
    pub tuning: Tuning,
    /// Its gradient evaluations.
    pub grad_evals: u64,
    /// Its wall time.
    pub seconds: f64,
}

/// Where a chain ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPlacement {
    /// The chain.
    pub chain: ChainId,
    /// The node whose result was kept.
    pub node: NodeName,
    /// Attempts it took (1 without a retry).
    pub attempts: u32,
}

/// A finished job.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    /// The job (after a failover, the one submitted last).
    pub job: JobId,
    /// One trace per chain, in chain order.
    pub traces: Vec<ChainTrace>,
    /// Where each chain ran, in chain order.
    pub placements: Vec<ChainPlacement>,
    /// Every retry, in order (a failover adds one per chain it resubmitted, naming the
    /// lost node).
    pub retried: Vec<Retry>,
    /// Every failover, in order.
    pub failovers: Vec<Failover>,
    /// The warmup chain, with [`WarmupMode::Broadcast`].
    pub warmup: Option<WarmupReport>,
    /// How chains ran, as their nodes said: where a GPU task ran, in which precision and
    /// why, or why a GPU node ran them on its CPU (at most [`MAX_NOTES`], each at most
    /// `MAX_NOTE_BYTES`, each once; across failovers, every coordinator's).
    pub notes: Vec<RunNote>,
    /// From submission to the last event.
    pub wall_seconds: f64,
    /// How the job's polls travelled.
    pub polls: PollCounts,
}

/// How many of a job's polls were answered through its job link and how many through the
/// cluster session (where no link opened, or after one failed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollCounts {
    /// Through the job link.
    pub link: u64,
    /// Through the session.
    pub session: u64,
}

/// Why a job's events did not make an outcome.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AssembleError {
    /// The job failed on the cluster (its `Failed` event).
    Failed(String),
    /// The events broke the protocol (a gap in a chain's draws, a chain number out of range,
    /// a missing chain).
    Protocol(WireError),
}

impl From<WireError> for AssembleError {
    fn from(error: WireError) -> Self {
        AssembleError::Protocol(error)
    }
}

/// A chain being received.
#[derive(Debug, Default)]
struct Partial {
    /// Its attempt in the current job (events of other attempts are void).
    attempt: u32,
    /// Its attempts in the jobs before the last failover.
    earlier_attempts: u32,
    /// Whether the current job runs it (a job resubmitted after a failover runs the
    /// chains the client had not received).
    in_job: bool,
    draws: Vec<f64>,
    stats: Vec<DrawStats>,
    warmup_draws: Vec<f64>,
    warmup_stats: Vec<DrawStats>,
    /// The iteration of its last `Progress` update from a block.
    reported: u64,
    done: Option<(WireChainDone, NodeName)>,
}

/// A chain's `Progress` updates from blocks come at most every this share of its iterations
/// (and at its last one): a block has an entry per chain, often with a single draw, and one
/// update per draw would cost the client more than the draws.
const BLOCK_PROGRESS_STEPS: u64 = 20;

/// One chain's partial and the range of its entries in the blocks' entries ordered by chain.
type ChainGroup<'a> = (&'a mut Partial, Range<usize>);

/// An entry of one of the blocks taken in at once: the block's index, the entry's attempt,
/// the entry.
type Taken = (usize, u32, BlockEntry);

/// Chains a rayon task of [`Assembler::apply_blocks`] takes in at least.
const CHAINS_PER_TASK: usize = 64;

/// Blocks of at least this many bytes of values are taken in on rayon's threads, chain by
/// chain.
const PARALLEL_BLOCK_BYTES: usize = 1 << 18;

/// Builds a job's outcome from its events, checking that every chain's draws arrived whole
/// and in order; across failovers, from the events of each job in turn.
#[derive(Debug)]
pub(crate) struct Assembler {
    job: JobId,
    chains: Vec<Partial>,
    /// Retries of the jobs before the last failover, and the failovers' own entries.
    earlier_retried: Vec<Retry>,
    retried: Vec<Retry>,
    failovers: Vec<Failover>,
    warmup: Option<WarmupReport>,
    /// Every coordinator's notes, kept across failovers.
    notes: RunNotes,
    finished: bool,
    started: Instant,
    /// Room for every chain's kept draws, made ahead of them.
    room: RoomState,
    /// Writes values from blocks of positions, where the client asked for them.
    positions: Option<FromPositions>,
    /// Most draws a chain may bring: what the job asked for (a node that sends more is
    /// refused before the client holds them).
    most: MostDraws,
}

/// Most draws of each phase a chain of the job may bring.
#[derive(Debug, Clone, Copy)]
struct MostDraws {
    kept: u64,
    warmup: u64,
}

impl MostDraws {
    /// Checks that `n` more draws of a phase (`warmup`), after `had`, stay within the job's.
    fn check(self, warmup: bool, had: usize, n: usize) -> Result<(), String> {
        let most = if warmup { self.warmup } else { self.kept };
        if (had as u64).saturating_add(n as u64) > most {
            let phase = if warmup { "warmup" } else { "kept" };
            return Err(format!(
                "{} {phase} draws arrived, more than the job's {most}",
                had + n
            ));
        }
        Ok(())
    }
}

/// Writes a draw's reported values from its unconstrained position, for blocks of
/// positions ([`WireDrawBlock::positions`]): the model's writer and room for one entry's
/// positions. Cloned for each thread that takes in blocks.
#[derive(Debug, Clone)]
struct FromPositions {
    writer: OutputWriter,
    positions: Vec<f64>,
}

impl FromPositions {
    fn new(writer: OutputWriter) -> Self {
        Self {
            writer,
            positions: Vec::new(),
        }
    }

    /// Appends the values of `entry`'s draws, written from their positions in `block`.
    fn append(&mut self, block: &WireDrawBlock, entry: &BlockEntry, to: &mut Vec<f64>) {
        let (dim, n_columns) = (self.writer.dim(), self.writer.n_columns());
        self.positions.clear();
        block.append_values_of(entry, &mut self.positions);
        let start = to.len();
        to.resize(start + entry.len() * n_columns, 0.0);
        if dim == 0 || n_columns == 0 {
            return;
        }
        let positions = self.positions.chunks_exact(dim);
        for (q, out) in positions.zip(to[start..].chunks_exact_mut(n_columns)) {
            self.writer.write(q, out);
        }
    }
}

/// The room for the kept draws of a job's chains (`sampler::Room`): made on threads of its
/// own once the first block says how many values a draw has, so that appending a large
/// job's draws neither reallocates nor faults fresh pages in on the client's thread.
#[derive(Debug, Default)]
enum RoomState {
    /// No room will be made.
    #[default]
    None,
    /// Room for this many kept draws per chain, once a block says how wide a draw is.
    Wanted(u64),
    /// Being made.
    Making(Room),
}

/// Jobs of fewer values than this (chains x kept draws x values per draw) get no room made:
/// growing their vectors costs little.
const ROOM_MIN_VALUES: u64 = 1 << 22;

impl Assembler {
    pub(crate) fn new(job: JobId, n_chains: u32) -> Self {
        Self {
            job,
            chains: (0..n_chains)
                .map(|_| Partial {
                    attempt: 1,
                    in_job: true,
                    ..Partial::default()
                })
                .collect(),
            earlier_retried: Vec::new(),
            retried: Vec::new(),
            failovers: Vec::new(),
            warmup: None,
            notes: RunNotes::default(),
            finished: false,
            started: Instant::now(),
            room: RoomState::None,
            positions: None,
            most: MostDraws {
                kept: u64::MAX,
                warmup: u64::MAX,
            },
        }
    }

    /// Refuses a chain more than `kept` kept draws or `warmup` warmup draws: the job's.
    pub(crate) fn with_most_draws(mut self, kept: u64, warmup: u64) -> Self {
        self.most = MostDraws { kept, warmup };
        self
    }

    /// Takes in blocks of positions, writing each draw's values with `writer` (the model's):
    /// for a client that asked for them (`WireSampleRequest::positions`).
    pub(crate) fn with_positions(mut self, writer: OutputWriter) -> Self {
        self.positions = Some(FromPositions::new(writer));
        self
    }

    /// Makes room ahead for `draws` kept draws per chain, when a job is large enough for it
    /// to matter.
    pub(crate) fn with_room(mut self, draws: u64) -> Self {
        self.room = RoomState::Wanted(draws);
        self
    }

    /// Starts the room when it is wanted and a block says how wide a draw is (`n_columns`
    /// values); gives it to the chains once it is made.
    fn tend_room(&mut self, n_columns: usize) {
        match &self.room {
            RoomState::Wanted(draws) if n_columns > 0 => {
                let n_chains = self.chains.len();
                let values = (n_chains as u64)
                    .saturating_mul(*draws)
                    .saturating_mul(n_columns as u64);
                self.room = if values >= ROOM_MIN_VALUES {
                    let draws = usize::try_from(*draws).unwrap_or(usize::MAX);
                    RoomState::Making(Room::make(n_chains, n_columns, draws))
                } else {
                    RoomState::None
                };
            }
            RoomState::Making(room) if room.is_ready() => {
                if let RoomState::Making(room) = std::mem::take(&mut self.room) {
                    self.give_room(room);
                }
            }
            _ => {}
        }
    }

    /// Moves each chain's draws so far into its room.
    fn give_room(&mut self, room: Room) {
        for (partial, (mut draws, mut stats)) in self.chains.iter_mut().zip(room.take()) {
            if draws.capacity() > partial.draws.capacity() {
                draws.extend_from_slice(&partial.draws);
                stats.extend_from_slice(&partial.stats);
                partial.draws = draws;
                partial.stats = stats;
            }
        }
    }

    /// Waits for the room being made and gives it to the chains.
    #[cfg(test)]
    fn wait_for_room(&mut self) {
        if let RoomState::Making(room) = std::mem::take(&mut self.room) {
            self.give_room(room);
        }
    }

    /// Whether the `Finished` event arrived (or, after a failover, every chain is whole).
    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    /// The chains not yet received whole, in increasing order: what a failover resubmits.
    pub(crate) fn unfinished(&self) -> Vec<u32> {
        (0..self.chains.len() as u32)
            .filter(|&chain| self.chains[chain as usize].done.is_none())
            .collect()
    }

    /// Every chain is whole although the coordinator's `Finished` did not arrive (it was
    /// lost after the last chain): the job is finished here, with the retries seen.
    pub(crate) fn complete_here(&mut self) {
        self.finished = self.unfinished().is_empty();
    }

    /// The job moves from `from`, lost for `reason`, to job `job` on `to`, which runs
    /// `chains` (the [`Self::unfinished`] ones): their partial draws are dropped and they are
    /// taken from the new job's events, attempt 1 there; the chains received whole are kept
    /// and nothing of the new job may touch them. Each resubmitted chain gets a [`Retry`]
    /// naming the lost node.
    pub(crate) fn fail_over(
        &mut self,
        from: NodeName,
        reason: String,
        to: NodeName,
        job: JobId,
        chains: &[u32],
    ) -> Failover {
        let mut retries = Vec::with_capacity(chains.len());
        for partial in &mut self.chains {
            partial.in_job = false;
        }
        for &chain in chains {
            let Some(partial) = self.chains.get_mut(chain as usize) else {
                continue;
            };
            let earlier_attempts = partial.earlier_attempts + partial.attempt;
            *partial = Partial {
                attempt: 1,
                earlier_attempts,
                in_job: true,
                ..Partial::default()
            };
            retries.push(Retry {
                chain: ChainId(chain),
                node: from.clone(),
                reason: format!("entry node lost ({reason}); resubmitted to {to}"),
                attempt: earlier_attempts + 1,
            });
        }
        self.earlier_retried = std::mem::take(&mut self.retried);
        self.earlier_retried.extend(retries);
        self.retried = self.earlier_retried.clone();
        self.job = job;
        self.finished = false;
        let failover = Failover {
            from,
            reason,
            to,
            job,
            chains: chains.iter().map(|&c| ChainId(c)).collect(),
        };
        self.failovers.push(failover.clone());
        failover
    }

    /// Keeps a poll answer's notes (bounded: the first [`MAX_NOTES`] of the answer are
    /// read, each cut and kept once).
    pub(crate) fn note(&mut self, notes: Vec<WireRunNote>) -> Result<(), AssembleError> {
        for note in notes.into_iter().take(MAX_NOTES) {
            let node = node_name(&note.node)?;
            self.notes.add(&node, &note.text);
        }
        Ok(())
    }

    /// Takes in one event; returns what to tell the caller. A `Failed` event, or one that
    /// breaks the stream's rules, is an error.
    pub(crate) fn apply(&mut self, event: WireJobEvent) -> Result<Vec<JobUpdate>, AssembleError> {
        let bad = |reason: String| WireError::Invalid {
            what: "job event".to_owned(),
            reason,
        };
        match event {
            WireJobEvent::Placed { chains, node, pool } => Ok(vec![JobUpdate::Placed {
                chains: chains.into_iter().map(ChainId).collect(),
                node: node_name(&node)?,
                pool: pool.into(),
            }]),
            WireJobEvent::WarmupDone {
                node,
                tuning,
                grad_evals,
                seconds,
            } => {
                let report = WarmupReport {
                    node: node_name(&node)?,
                    tuning: tuning.into(),
                    grad_evals,
                    seconds,
                };
                self.warmup = Some(report.clone());
                Ok(vec![JobUpdate::WarmupDone(report)])
            }
            WireJobEvent::Progress {
                chain,
                attempt,
                iteration,
                total,
                draws,
            } => {
                let most = self.most;
                let partial = self.partial(chain)?;
                if attempt != partial.attempt {
                    return Ok(Vec::new());
                }
                if let Some(draws) = draws {
                    append(partial, draws, most)
                        .map_err(|reason| bad(format!("chain {chain}: {reason}")))?;
                }
                Ok(vec![JobUpdate::Progress {
                    chain: ChainId(chain),
                    iteration,
                    total,
                }])
            }
            WireJobEvent::Block { attempts, block } => self.apply_blocks(&[(attempts, block)]),
            WireJobEvent::ChainDone {
                attempt,
                node,
                done,
            } => {
                let chain = done.chain;
                let node = node_name(&node)?;
                let partial = self.partial(chain)?;
                if attempt != partial.attempt {
                    return Ok(Vec::new());
                }
                let n_columns = done.n_columns as usize;
                if partial.stats.len() as u64 != done.n_draws
                    || partial.draws.len() != partial.stats.len() * n_columns
                    || partial.warmup_stats.len() as u64 != done.n_warmup_draws
                    || partial.warmup_draws.len() != partial.warmup_stats.len() * n_columns
                {
                    return Err(AssembleError::Protocol(bad(format!(
                        "chain {chain} finished with {} draws of {n_columns} values, but {} draws and {} values arrived",
                        done.n_draws,
                        partial.stats.len(),
                        partial.draws.len()
                    ))));
                }
                partial.done = Some((done, node.clone()));
                let attempt = partial.earlier_attempts + attempt;
                Ok(vec![JobUpdate::ChainDone {
                    chain: ChainId(chain),
                    node,
                    attempt,
                }])
            }
            WireJobEvent::Retried {
                chains,
                node,
                reason,
                attempt,
            } => {
                let node = node_name(&node)?;
                let mut retries = Vec::with_capacity(chains.len());
                for chain in chains {
                    let mut earlier_attempts = 0;
                    if ChainId(chain) != WARMUP_CHAIN {
                        let partial = self.partial(chain)?;
                        earlier_attempts = partial.earlier_attempts;
                        *partial = Partial {
                            attempt,
                            earlier_attempts,
                            in_job: true,
                            ..Partial::default()
                        };
                    }
                    retries.push(Retry {
                        chain: ChainId(chain),
                        node: node.clone(),
                        reason: reason.clone(),
                        attempt: earlier_attempts + attempt,
                    });
                }
                self.retried.extend(retries.iter().cloned());
                Ok(vec![JobUpdate::Retried(retries)])
            }
            WireJobEvent::Finished { retried } => {
                // The coordinator's list is authoritative for its job (it also holds retries
                // whose event this client may have seen already), after the earlier jobs'.
                let mut all = self.earlier_retried.clone();
                for retry in retried {
                    let mut retry = retry_from_wire(retry)?;
                    if retry.chain != WARMUP_CHAIN {
                        retry.attempt += self.partial(retry.chain.0)?.earlier_attempts;
                    }
                    all.push(retry);
                }
                self.retried = all;
                self.finished = true;
                Ok(Vec::new())
            }
            WireJobEvent::Failed { error } => Err(AssembleError::Failed(error)),
            WireJobEvent::Draining { node, grace_ms } => Ok(vec![JobUpdate::CoordinatorDraining {
                node: node_name(&node)?,
                grace: std::time::Duration::from_millis(grace_ms),
            }]),
        }
    }

    /// The outcome, once `Finished` arrived and every chain is complete.
    pub(crate) fn finish(self) -> Result<JobOutcome, AssembleError> {
        let mut traces = Vec::with_capacity(self.chains.len());
        let mut placements = Vec::with_capacity(self.chains.len());
        for (index, partial) in self.chains.into_iter().enumerate() {
            let Some((done, node)) = partial.done else {
                return Err(AssembleError::Protocol(WireError::Invalid {
                    what: format!("job {}", self.job),
                    reason: format!("finished without chain {index}"),
                }));
            };
            placements.push(ChainPlacement {
                chain: ChainId(done.chain),
                node,
                attempts: partial.earlier_attempts + partial.attempt,
            });
            traces.push(ChainTrace {
                chain: ChainId(done.chain),
                n_columns: done.n_columns as usize,
                warmup_draws: partial.warmup_draws,
                warmup_stats: partial.warmup_stats,
                draws: partial.draws,
                stats: partial.stats,
                tuning: done.tuning.into(),
                init: done.init,
                final_position: done.final_position,
                grad_evals_warmup: done.grad_evals_warmup,
                grad_evals_sampling: done.grad_evals_sampling,
                warmup_seconds: done.warmup_seconds,
                sampling_seconds: done.sampling_seconds,
            });
        }
        Ok(JobOutcome {
            job: self.job,
            traces,
            placements,
            retried: self.retried,
            failovers: self.failovers,
            warmup: self.warmup,
            notes: self.notes.into_vec(),
            wall_seconds: self.started.elapsed().as_secs_f64(),
            polls: PollCounts::default(),
        })
    }

    /// Takes in the blocks of consecutive `Block` events (each with its entries' attempts),
    /// in order: every block is checked first, then each chain's entries are taken in, in
    /// the order they came. Where the blocks hold at least [`PARALLEL_BLOCK_BYTES`] of values,
    /// the chains take theirs in side by side on rayon's threads: one pass for all of a
    /// poll's blocks, not one per block (each pass wakes every thread of the pool).
    pub(crate) fn apply_blocks(
        &mut self,
        blocks: &[(Vec<u32>, Arc<WireDrawBlock>)],
    ) -> Result<Vec<JobUpdate>, AssembleError> {
        let bad = |reason: String| WireError::Invalid {
            what: "job event".to_owned(),
            reason,
        };
        let mut taken = Vec::new();
        let mut bytes = 0;
        for (b, (attempts, block)) in blocks.iter().enumerate() {
            let entries = block.entries().map_err(bad)?;
            let n_columns = self.values_per_draw(block).map_err(bad)?;
            self.tend_room(n_columns);
            if attempts.len() != entries.len() {
                return Err(AssembleError::Protocol(bad(format!(
                    "a block of {} entries with {} attempts",
                    entries.len(),
                    attempts.len()
                ))));
            }
            bytes += block.values.len();
            taken.extend(
                entries
                    .into_iter()
                    .zip(attempts)
                    .map(|(entry, &attempt)| (b, attempt, entry)),
            );
        }
        let most = self.most;
        let apply = |partial: &mut Partial,
                     positions: &mut Option<FromPositions>,
                     &(b, attempt, ref entry): &Taken| {
            apply_entry(
                partial,
                attempt,
                &blocks[b].1,
                entry,
                positions.as_mut(),
                most,
            )
            .map_err(&bad)
        };
        let mut positions = self.positions.clone();
        if bytes < PARALLEL_BLOCK_BYTES {
            let mut updates = Vec::with_capacity(taken.len());
            for item in &taken {
                let partial = self.partial(item.2.chain)?;
                updates.extend(apply(partial, &mut positions, item)?);
            }
            return Ok(updates);
        }
        let (order, groups) = self.chain_groups(&taken)?;
        // Each group is one chain's: the chains' draws are appended side by side.
        let applied: Vec<Result<Vec<JobUpdate>, WireError>> = groups
            .into_par_iter()
            // Runs of chains per task: each task clones the writer of positions.
            .with_min_len(CHAINS_PER_TASK)
            .map_init(
                || positions.clone(),
                |positions, (partial, range)| {
                    let mut updates = Vec::new();
                    for &i in &order[range] {
                        updates.extend(apply(partial, positions, &taken[i])?);
                    }
                    Ok(updates)
                },
            )
            .collect();
        let mut updates = Vec::new();
        for result in applied {
            updates.extend(result?);
        }
        Ok(updates)
    }

    /// Values per draw of `block`'s chains: its own width, or, for a block of positions,
    /// the model's values; an error for positions the client did not ask for, or of another
    /// dimension than the model's.
    fn values_per_draw(&self, block: &WireDrawBlock) -> Result<usize, String> {
        if !block.positions {
            return Ok(block.n_columns as usize);
        }
        let Some(positions) = &self.positions else {
            return Err("a block of positions, which this client did not ask for".to_owned());
        };
        let dim = positions.writer.dim();
        if block.n_columns as usize != dim {
            return Err(format!(
                "a block of positions of {} coordinates for a model of dimension {dim}",
                block.n_columns
            ));
        }
        Ok(positions.writer.n_columns())
    }

    /// The entries' order by chain (each chain's in the order they came: a GPU task's
    /// blocks hold several rounds of its chains) and, in that order, each chain's partial
    /// with the range of its entries, so that the chains can take in their draws side by
    /// side; an error for a chain the job does not run.
    fn chain_groups(
        &mut self,
        taken: &[Taken],
    ) -> Result<(Vec<usize>, Vec<ChainGroup<'_>>), WireError> {
        for (_, _, entry) in taken {
            self.partial(entry.chain)?;
        }
        let chain_of = |i: usize| taken[i].2.chain as usize;
        let mut order: Vec<usize> = (0..taken.len()).collect();
        // Stable: a chain's entries keep their order.
        order.sort_by_key(|&i| chain_of(i));
        let mut groups = Vec::new();
        let mut rest: &mut [Partial] = &mut self.chains;
        let mut next_chain = 0;
        let mut start = 0;
        while start < order.len() {
            let chain = chain_of(order[start]);
            let end = start
                + order[start..]
                    .iter()
                    .take_while(|&&i| chain_of(i) == chain)
                    .count();
            let tail = std::mem::take(&mut rest).split_at_mut(chain - next_chain).1;
            let (partial, tail) = tail.split_first_mut().expect("checked by partial()");
            groups.push((partial, start..end));
            rest = tail;
            next_chain = chain + 1;
            start = end;
        }
        Ok((order, groups))
    }

    /// A chain of the current job.
    fn partial(&mut self, chain: u32) -> Result<&mut Partial, WireError> {
        let n_chains = self.chains.len();
        let job = self.job;
        match self.chains.get_mut(chain as usize) {
            Some(partial) if partial.in_job => Ok(partial),
            Some(_) => Err(WireError::Invalid {
                what: "job event".to_owned(),
                reason: format!(
                    "chain {chain} is not one of job {job}'s (it was received whole before a failover)"
                ),
            }),
            None => Err(WireError::Invalid {
                what: "job event".to_owned(),
                reason: format!("chain {chain} is not one of the job's {n_chains} chains"),
            }),
        }
    }
}

/// Appends streamed draws to a chain, checking that they follow the ones received.
fn append(partial: &mut Partial, draws: WireDraws, most: MostDraws) -> Result<(), String> {
    let n = draws
        .stats
        .len_checked()
        .ok_or("statistics columns of different lengths")?;
    let (values, stats) = if draws.warmup {
        (&mut partial.warmup_draws, &mut partial.warmup_stats)
    } else {
        (&mut partial.draws, &mut partial.stats)
    };
    if draws.first != stats.len() as u64 {
        return Err(format!(
            "draws from {} arrived after {} draws",
            draws.first,
            stats.len()
        ));
    }
    if n == 0 || !draws.values.len().is_multiple_of(n) {
        return Err(format!(
            "{} values do not make {n} draws",
            draws.values.len()
        ));
    }
    most.check(draws.warmup, stats.len(), n)?;
    values.extend_from_slice(&draws.values);
    stats.extend(draws.stats.rows());
    Ok(())
}

/// Takes in one entry of a block for its chain's `partial` (skipped when it belongs to
/// another `attempt`): its draws, and a `Progress` update when one is due.
fn apply_entry(
    partial: &mut Partial,
    attempt: u32,
    block: &WireDrawBlock,
    entry: &BlockEntry,
    positions: Option<&mut FromPositions>,
    most: MostDraws,
) -> Result<Option<JobUpdate>, String> {
    if attempt != partial.attempt {
        return Ok(None);
    }
    let chain = entry.chain;
    append_entry(partial, block, entry, positions, most)
        .map_err(|reason| format!("chain {chain}: {reason}"))?;
    let step = (block.total / BLOCK_PROGRESS_STEPS).max(1);
    let due =
        entry.iteration >= partial.reported.saturating_add(step) || entry.iteration >= block.total;
    if due && entry.iteration > partial.reported {
        partial.reported = entry.iteration;
        return Ok(Some(JobUpdate::Progress {
            chain: ChainId(chain),
            iteration: entry.iteration,
            total: block.total,
        }));
    }
    Ok(None)
}

/// Appends the draws of a block's entry, their values read from the block's columns in
/// place, or written from the positions there (checked by `Assembler::values_per_draw`).
fn append_entry(
    partial: &mut Partial,
    block: &WireDrawBlock,
    entry: &BlockEntry,
    positions: Option<&mut FromPositions>,
    most: MostDraws,
) -> Result<(), String> {
    let (values, stats) = if entry.warmup {
        (&mut partial.warmup_draws, &mut partial.warmup_stats)
    } else {
        (&mut partial.draws, &mut partial.stats)
    };
    if entry.first != stats.len() as u64 {
        return Err(format!(
            "draws from {} arrived after {} draws",
            entry.first,
            stats.len()
        ));
    }
    most.check(entry.warmup, stats.len(), entry.len())?;
    match positions {
        Some(positions) if block.positions => positions.append(block, entry, values),
        _ if block.positions => return Err("positions without the model's writer".to_owned()),
        _ => block.append_values_of(entry, values),
    }
    stats.extend(block.stats_of(entry));
    Ok(())
}

fn node_name(name: &str) -> Result<NodeName, WireError> {
    name.parse().map_err(|error| WireError::Malformed {
        reason: format!("node name: {error}"),
    })
}

fn retry_from_wire(retry: WireRetry) -> Result<Retry, WireError> {
    Ok(Retry {
        chain: ChainId(retry.chain),
        node: node_name(&retry.node)?,
        reason: retry.reason,
        attempt: retry.attempt,
    })
}

#[cfg(test)]
mod tests;
