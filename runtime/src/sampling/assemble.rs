//! A job's outcome built from its events ([`Assembler`]): each chain's draws checked to
//! arrive whole and in order (chunks and blocks join up, chain numbers in range, no chain
//! past the job's draws), blocks taken in on rayon's threads, blocks of positions written
//! into values with the model's writer, and the chains received whole kept across failovers.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use sampler::{ChainId, ChainTrace, DrawStats, OutputWriter, Room};

use super::{
    ChainPlacement, Failover, JobOutcome, JobUpdate, PollCounts, Retry, WARMUP_CHAIN, WarmupReport,
};
use crate::ids::{JobId, NodeName};
use crate::notes::{MAX_NOTES, RunNotes};
use crate::wire::{
    BlockEntry, WireChainDone, WireDrawBlock, WireDraws, WireError, WireJobEvent, WireRetry,
    WireRunNote,
};

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

impl Partial {
    /// The values and statistics of a phase (warmup or kept), once `n` more draws from
    /// `first` are checked to follow those received and to stay within the job's (`most`).
    fn phase(
        &mut self,
        warmup: bool,
        first: u64,
        n: usize,
        most: MostDraws,
    ) -> Result<(&mut Vec<f64>, &mut Vec<DrawStats>), String> {
        let (values, stats) = if warmup {
            (&mut self.warmup_draws, &mut self.warmup_stats)
        } else {
            (&mut self.draws, &mut self.stats)
        };
        if first != stats.len() as u64 {
            return Err(format!(
                "draws from {first} arrived after {} draws",
                stats.len()
            ));
        }
        most.check(warmup, stats.len(), n)?;
        Ok((values, stats))
    }
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
    if n == 0 || !draws.values.len().is_multiple_of(n) {
        return Err(format!(
            "{} values do not make {n} draws",
            draws.values.len()
        ));
    }
    let (values, stats) = partial.phase(draws.warmup, draws.first, n, most)?;
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
    let (values, stats) = partial.phase(entry.warmup, entry.first, entry.len(), most)?;
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
