//! A GPU run's stream: its chains' draws cast to the pool as [`WireDrawBlock`]s, packed, instead of
//! one event per chain (thousands of chains in lockstep would each send at every interval, and the
//! per-event costs would bound the stream).
//!
//! The GPU recording hands its draws over a task at a time ([`Observer::on_batch`]: the draws of a
//! batch of up to 64 chains, each chain's consecutive), tens of thousands of times in a large run,
//! from all cores. The chains are dealt to a few *parts*, runs of [`PART_RUN`] consecutive chains
//! in turn, so that a task's chains fall in one part: each part fills a block of its own under its
//! own lock, and sends it when it passes its share of [`BLOCK_BYTES`]: taken under that lock,
//! packed and sent under the part's sending lock ([`Part`]), while the next block fills. A chain's
//! draws go into its part's block straight from the batch, in the order the batches came: each
//! chain's draws reach the pool in order, and no thread gathers draws from other threads' buffers
//! (a buffer per chain, walked at every flush, cost a cache miss per line of every draw on each
//! side).
//!
//! A chain whose draws are not sent (warmup, unsaved) reports its progress as an entry without
//! draws, at most every [`FLUSH_INTERVAL`]; every part's block goes out at least that often. A part
//! sending waits first for the backlog of blocks not yet acknowledged to fall under
//! [`GPU_TASK_BACKLOG_BYTES`]: the threads filling that part wait with it once its next block is
//! full, and memory stays bounded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use ractor::ActorRef;
use sampler::{ChainDraws, ChainId, DrawBatch, DrawEvent, Observer};

use super::{Counts, FLUSH_INTERVAL};
use crate::outbox::Backlog;
use crate::pool::{PoolMsg, RunId};
use crate::wire::{WireDrawBlock, WireTaskEvent};

/// Bytes of draws the parts together hold before they send (each its share).
pub(crate) const BLOCK_BYTES: usize = 8 * 1024 * 1024;

/// Bytes of a GPU task's blocks not yet acknowledged past which its run waits: a constant
/// cap, so that a node's memory for a task stays bounded however many chains it runs, and
/// enough blocks that the GPU rarely waits for the coordinator (twice the coordinator's
/// backlog of a job, `JOB_BACKLOG_BYTES`).
pub(crate) const GPU_TASK_BACKLOG_BYTES: usize = 64 * BLOCK_BYTES;

/// Fewest bytes of draws a part sends at once.
const MIN_PART_BYTES: usize = 1024 * 1024;

/// Most parts a run's chains are dealt to (one per core, up to this).
const MAX_PARTS: usize = 8;

/// Consecutive chains dealt to one part: a recording task's (the GPU records 64 chains per
/// task), so that a batch's chains fall in one part and take one lock.
const PART_RUN: usize = 64;

/// A chain's place among the run's: an offset when the chains are consecutive (the usual
/// case), a map otherwise.
enum ChainIndex {
    Consecutive { first: u32, len: usize },
    Map(HashMap<ChainId, usize>),
}

impl ChainIndex {
    fn new(chains: &[ChainId]) -> Self {
        let consecutive = chains
            .windows(2)
            .all(|w| w[0].0.checked_add(1) == Some(w[1].0));
        match chains.first() {
            Some(first) if consecutive => ChainIndex::Consecutive {
                first: first.0,
                len: chains.len(),
            },
            _ => ChainIndex::Map(chains.iter().enumerate().map(|(i, &c)| (c, i)).collect()),
        }
    }

    fn get(&self, chain: ChainId) -> Option<usize> {
        match self {
            ChainIndex::Consecutive { first, len } => {
                let index = chain.0.checked_sub(*first)? as usize;
                (index < *len).then_some(index)
            }
            ChainIndex::Map(map) => map.get(&chain).copied(),
        }
    }
}

/// What one chain's draws added up to. Touched once per batch, by the thread recording the
/// chain's task, under its part's lock.
#[derive(Default)]
struct ChainState {
    /// Iterations done, and as last sent.
    iteration: u64,
    sent_iteration: u64,
    /// Nanoseconds from the run's start to the chain's last entry.
    reported_ns: u64,
    /// Draws of each phase sent so far.
    kept_count: u64,
    warmup_count: u64,
    counts: Counts,
}

/// A part of a run's chains: the block its draws fill, and the lock held while one of its
/// blocks is packed and sent. A sender takes the full block and the sending lock under the
/// block's lock, then lets the block's lock go: the part's next block fills while the last
/// is packed and sent, and its blocks leave in order.
struct Part {
    block: Mutex<WireDrawBlock>,
    sending: Mutex<()>,
}

/// What a GPU run streams.
#[derive(Clone, Copy, Debug)]
pub(super) struct BlockSettings {
    /// Draws dropped at the start of a warm-started chain.
    pub(super) burn_in: u64,
    pub(super) save_warmup: bool,
    /// Iterations of each chain.
    pub(super) total: u64,
    /// Blocks may carry positions (the job's client writes the values): asked of the
    /// recording ([`Observer::wants_positions`]).
    pub(super) positions: bool,
}

/// The observer of a GPU run.
pub(super) struct BlockStreamer {
    run: RunId,
    pool: ActorRef<PoolMsg>,
    burn_in: u64,
    save_warmup: bool,
    total: u64,
    positions: bool,
    cancel: Arc<AtomicBool>,
    backlog: Arc<Backlog>,
    index: ChainIndex,
    /// Each chain's number and state, in the run's order.
    numbers: Vec<u32>,
    chains: Vec<Mutex<ChainState>>,
    /// Each part's block being filled, and its sending.
    parts: Vec<Part>,

    start: Instant,
    /// Nanoseconds from `start` to the last time every part sent its block.
    last_flush: AtomicU64,
    /// Held by the thread that sends every part's block.
    flush: Mutex<()>,
    /// Nanoseconds the run's threads waited for the backlog to drain, and spent packing and
    /// sending blocks, and the blocks sent: the `runtime::timeline` event at the end of the
    /// run.
    waited_ns: AtomicU64,
    sending_ns: AtomicU64,
    blocks: AtomicU64,
}

/// [`FLUSH_INTERVAL`] in nanoseconds, as the run's clock counts.
fn interval_ns() -> u64 {
    u64::try_from(FLUSH_INTERVAL.as_nanos()).unwrap_or(u64::MAX)
}

/// Locks `mutex`, whose data stays usable after a panic elsewhere (counts and buffers).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl BlockStreamer {
    pub(super) fn new(
        run: RunId,
        pool: ActorRef<PoolMsg>,
        chains: &[ChainId],
        settings: BlockSettings,
        cancel: Arc<AtomicBool>,
        backlog: Arc<Backlog>,
    ) -> Self {
        let BlockSettings {
            burn_in,
            save_warmup,
            total,
            positions,
        } = settings;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let parts = cores
            .clamp(1, MAX_PARTS)
            .min(chains.len().div_ceil(PART_RUN).max(1));
        Self {
            run,
            pool,
            burn_in,
            save_warmup,
            total,
            positions,
            cancel,
            backlog,
            index: ChainIndex::new(chains),
            numbers: chains.iter().map(|c| c.0).collect(),
            chains: chains.iter().map(|_| Mutex::default()).collect(),
            parts: (0..parts)
                .map(|_| Part {
                    block: Mutex::new(WireDrawBlock::new(0, total)),
                    sending: Mutex::new(()),
                })
                .collect(),

            start: Instant::now(),
            last_flush: AtomicU64::new(0),
            flush: Mutex::new(()),
            waited_ns: AtomicU64::new(0),
            sending_ns: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
        }
    }

    /// What chain `index`'s draws added up to.
    pub(super) fn counts(&self, index: usize) -> Counts {
        self.chains
            .get(index)
            .map(|state| lock(state).counts)
            .unwrap_or_default()
    }

    /// Everything not sent yet: every part's block but the last sent as usual, the last
    /// returned as the run's last event (left out of the backlog, like a chain's last
    /// progress event), each chain's last iteration reported.
    pub(super) fn last_event(&self) -> Option<WireTaskEvent> {
        let _flushing = lock(&self.flush);
        let ms = |ns: &AtomicU64| ns.load(Ordering::Relaxed) as f64 * 1e-6;
        tracing::debug!(
            target: "runtime::timeline",
            run_ms = self.start.elapsed().as_secs_f64() * 1e3,
            backlog_wait_ms = ms(&self.waited_ns),
            send_ms = ms(&self.sending_ns),
            blocks = self.blocks.load(Ordering::Relaxed),
            "GPU run streamed"
        );
        let mut last = None;
        for (p, part) in self.parts.iter().enumerate() {
            let mut block = lock(&part.block);
            // The part's blocks being sent go first.
            let _sending = lock(&part.sending);
            for index in (0..self.chains.len()).filter(|&i| self.part_of(i) == p) {
                let mut state = lock(&self.chains[index]);
                if state.iteration != state.sent_iteration {
                    state.sent_iteration = state.iteration;
                    let (kept, iteration) = (state.kept_count, state.iteration);
                    block.push(self.numbers[index], false, kept, iteration, &[], &[]);
                }
            }
            if block.n_entries() == 0 {
                continue;
            }
            let mut taken = self.take(&mut block);
            taken.pack();
            if let Some(earlier) = last.replace(taken) {
                self.wait_for_room();
                self.send(earlier);
            }
        }
        last.map(|block| WireTaskEvent::Block(Arc::new(block)))
    }

    /// The part chain `index` belongs to.
    fn part_of(&self, index: usize) -> usize {
        (index / PART_RUN) % self.parts.len()
    }

    fn since_start(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn due(&self, now: u64) -> bool {
        let last = self.last_flush.load(Ordering::Relaxed);
        now.saturating_sub(last) >= interval_ns()
    }

    /// Adds `draws`, chain `index`'s, to its part's `block`: an entry per run of draws sent
    /// in one phase, or, when none is sent and the chain last reported over a
    /// [`FLUSH_INTERVAL`] ago, an entry of its progress only.
    fn add(
        &self,
        block: &mut WireDrawBlock,
        index: usize,
        draws: &ChainDraws,
        n_columns: usize,
        now: u64,
    ) {
        let mut state = lock(&self.chains[index]);
        let chain = self.numbers[index];
        let iteration = draws.first_iteration + draws.stats.len() as u64;
        state.iteration = iteration;
        // Where draw `i`'s values start among the batch's.
        let offset = |i: usize| {
            let skipped = if draws.warmup_values {
                0
            } else {
                i.min(draws.n_warmup)
            };
            (i - skipped) * n_columns
        };
        let mut sent_any = false;
        // The run of draws being gathered: its phase and its first draw.
        let mut run: Option<(bool, usize)> = None;
        let mut flush_run = |state: &mut ChainState, run: Option<(bool, usize)>, end: usize| {
            let Some((warmup, start)) = run else { return };
            let count = if warmup {
                &mut state.warmup_count
            } else {
                &mut state.kept_count
            };
            let values = offset(start)..offset(start) + (end - start) * n_columns;
            // A batch whose values do not cover what the settings send (not what the GPU
            // recording hands over) loses those draws: the coordinator finds the gap.
            let Some(values) = draws.values.get(values) else {
                debug_assert!(false, "a batch without the values of draws it sends");
                return;
            };
            let first = *count;
            *count += (end - start) as u64;
            block.push(
                chain,
                warmup,
                first,
                iteration,
                values,
                &draws.stats[start..end],
            );
        };
        for (i, stats) in draws.stats.iter().enumerate() {
            let event = DrawEvent {
                chain: draws.chain,
                iteration: draws.first_iteration + i as u64,
                total: self.total,
                warmup: i < draws.n_warmup,
                stats,
                values: &[],
            };
            let sent = state.counts.observe(&event, self.burn_in, self.save_warmup);
            match (run, sent) {
                (Some((phase, _)), Some(warmup)) if phase == warmup => {}
                (_, sent) => {
                    flush_run(&mut state, run, i);
                    run = sent.map(|warmup| (warmup, i));
                }
            }
            sent_any |= sent.is_some();
        }
        flush_run(&mut state, run, draws.stats.len());
        if sent_any {
            state.sent_iteration = iteration;
            state.reported_ns = now;
        } else if now.saturating_sub(state.reported_ns) >= interval_ns() {
            state.sent_iteration = iteration;
            state.reported_ns = now;
            block.push(chain, false, state.kept_count, iteration, &[], &[]);
        }
    }

    /// The part's block, its place taken by an empty one.
    fn take(&self, block: &mut WireDrawBlock) -> WireDrawBlock {
        // Room for as much as the last one took: a block is filled without reallocating.
        let mut empty = WireDrawBlock::new(block.n_columns as usize, self.total);
        empty.positions = block.positions;
        empty.reserve(block.n_entries(), block.n_draws());
        std::mem::replace(block, empty)
    }

    /// Waits for the backlog of blocks not yet acknowledged to have room.
    fn wait_for_room(&self) {
        self.backlog
            .wait_below(GPU_TASK_BACKLOG_BYTES, &self.cancel);
    }

    /// Sends `block` (the caller waited for room).
    fn send(&self, block: WireDrawBlock) {
        self.blocks.fetch_add(1, Ordering::Relaxed);
        let event = WireTaskEvent::Block(Arc::new(block));
        self.backlog.add(event.estimated_bytes());
        let _ = self.pool.cast(PoolMsg::ChainProgress {
            run: self.run,
            event,
        });
    }

    /// Sends `part`'s block, whose lock the caller hands over (see [`Part`]): the block is
    /// taken, then packed and sent once the backlog has room, under the part's sending lock
    /// only. Times the wait for the backlog and the rest.
    fn send_part(&self, part: &Part, mut block: MutexGuard<'_, WireDrawBlock>) {
        if block.n_entries() == 0 {
            return;
        }
        let _sending = lock(&part.sending);
        let mut taken = self.take(&mut block);
        drop(block);
        let waiting = Instant::now();
        self.wait_for_room();
        let sending = Instant::now();
        taken.pack();
        self.send(taken);
        let nanos = |since: Instant, until: Instant| {
            u64::try_from((until - since).as_nanos()).unwrap_or(u64::MAX)
        };
        let now = Instant::now();
        self.waited_ns
            .fetch_add(nanos(waiting, sending), Ordering::Relaxed);
        self.sending_ns
            .fetch_add(nanos(sending, now), Ordering::Relaxed);
    }

    /// Every part's block, when one is due; only one thread at a time, the others go on.
    fn maybe_flush(&self, now: u64) {
        if !self.due(now) {
            return;
        }
        let Ok(_flushing) = self.flush.try_lock() else {
            return;
        };
        if !self.due(self.since_start()) {
            return;
        }
        for part in &self.parts {
            self.send_part(part, lock(&part.block));
        }
        self.last_flush.store(self.since_start(), Ordering::Relaxed);
    }
}

impl Observer for BlockStreamer {
    fn on_draw(&self, event: &DrawEvent) {
        // An unsaved warmup draw (draw by draw while auto precision watches warmup) is not
        // sent: its chain's state only, and its part's lock only when its progress is due.
        if event.warmup
            && !self.save_warmup
            && let Some(index) = self.index.get(event.chain)
        {
            let now = self.since_start();
            let quiet = {
                let mut state = lock(&self.chains[index]);
                let quiet = now.saturating_sub(state.reported_ns) < interval_ns();
                if quiet {
                    state.iteration = event.iteration + 1;
                    state.counts.observe(event, self.burn_in, self.save_warmup);
                }
                quiet
            };
            if quiet {
                self.maybe_flush(now);
                return;
            }
        }
        let stats = std::slice::from_ref(event.stats);
        let draws = ChainDraws {
            chain: event.chain,
            first_iteration: event.iteration,
            n_warmup: usize::from(event.warmup),
            stats,
            warmup_values: !event.values.is_empty(),
            values: event.values,
        };
        self.on_batch(&DrawBatch {
            total: event.total,
            n_columns: event.values.len(),
            positions: false,
            chains: &[draws],
        });
    }

    fn wants_batches(&self) -> bool {
        true
    }

    fn wants_positions(&self) -> bool {
        self.positions
    }

    fn on_batch(&self, batch: &DrawBatch) {
        let now = self.since_start();
        let mut held: Option<(usize, MutexGuard<'_, WireDrawBlock>)> = None;
        for draws in batch.chains {
            let Some(index) = self.index.get(draws.chain) else {
                continue;
            };
            let part = self.part_of(index);
            if !matches!(&held, Some((p, _)) if *p == part) {
                if let Some((p, block)) = held.take() {
                    self.send_if_full(p, block);
                }
                held = Some((part, lock(&self.parts[part].block)));
            }
            let n_columns = u32::try_from(batch.n_columns).unwrap_or(u32::MAX);
            let with_values = draws.stats.len() > draws.n_warmup || draws.warmup_values;
            // A block's draws are of one kind and width: draws of another (positions after
            // values, once auto precision's verdict passed) wait for the block to go.
            while with_values
                && let Some((p, block)) = held.take_if(|(_, block)| {
                    block.n_draws() > 0
                        && (block.positions, block.n_columns) != (batch.positions, n_columns)
                })
            {
                self.send_part(&self.parts[p], block);
                held = Some((part, lock(&self.parts[part].block)));
            }
            let Some((_, block)) = held.as_mut() else {
                continue;
            };
            // The first batch with values sets the block's kind and width.
            if block.n_draws() == 0 && batch.n_columns > 0 {
                block.n_columns = n_columns;
                block.positions = batch.positions;
            }
            self.add(block, index, draws, batch.n_columns, now);
        }
        if let Some((p, block)) = held {
            self.send_if_full(p, block);
        }
        self.maybe_flush(now);
    }

    fn should_stop(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    fn keeps_draws(&self) -> bool {
        false
    }
}

impl BlockStreamer {
    /// Sends a part's block once it passes its share of [`BLOCK_BYTES`] (at least
    /// [`MIN_PART_BYTES`]): the parts together send about as often as one block would,
    /// so a short run streams as it goes rather than all at its end.
    fn send_if_full(&self, part: usize, block: MutexGuard<'_, WireDrawBlock>) {
        let share = (BLOCK_BYTES / self.parts.len()).max(MIN_PART_BYTES);
        if block.estimated_bytes() >= share {
            self.send_part(&self.parts[part], block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ractor::{Actor, ActorProcessingErr};
    use sampler::DrawStats;

    type Sent = Arc<Mutex<Vec<Arc<WireDrawBlock>>>>;

    /// An actor of the pool's messages that keeps the blocks it gets.
    struct Sink;

    impl Actor for Sink {
        type Msg = PoolMsg;
        type State = Sent;
        type Arguments = Sent;

        async fn pre_start(
            &self,
            _: ActorRef<PoolMsg>,
            sent: Sent,
        ) -> Result<Sent, ActorProcessingErr> {
            Ok(sent)
        }

        async fn handle(
            &self,
            _: ActorRef<PoolMsg>,
            message: PoolMsg,
            sent: &mut Sent,
        ) -> Result<(), ActorProcessingErr> {
            if let PoolMsg::ChainProgress {
                event: WireTaskEvent::Block(block),
                ..
            } = message
            {
                lock(sent).push(block);
            }
            Ok(())
        }
    }

    /// Every block `streamer` sent to the sink, then its last one (`last_event`), once the
    /// sink took every cast and stopped.
    async fn every_block(
        streamer: &BlockStreamer,
        sink: ActorRef<PoolMsg>,
        handle: tokio::task::JoinHandle<()>,
        sent: &Sent,
    ) -> Vec<Arc<WireDrawBlock>> {
        let last = streamer.last_event();
        let Some(WireTaskEvent::Block(last)) = last else {
            panic!("a last block: {last:?}");
        };
        sink.drain_and_wait(None).await.unwrap();
        handle.await.unwrap();
        let mut blocks = lock(sent).clone();
        blocks.push(last);
        blocks
    }

    /// Values per draw: enough that the first test's draws fill several blocks.
    const N_COLUMNS: usize = 64;

    /// A draw's values: its chain and iteration, and columns that are no f32s.
    fn values(chain: u32, iteration: u64) -> Vec<f64> {
        let mut values = vec![f64::from(chain), iteration as f64];
        values.extend((2..N_COLUMNS).map(|k| 0.1 * k as f64 + iteration as f64));
        values
    }

    fn stats(chain: u32, iteration: u64) -> DrawStats {
        DrawStats {
            lp: -f64::from(chain),
            n_leapfrog: u32::try_from(iteration).unwrap_or(u32::MAX),
            ..DrawStats::default()
        }
    }

    /// Each chain's draws, every block's entries read in the order they came: the values of
    /// its kept draws and of its warmup ones, and its last iteration. Checks that each
    /// chain's draws join up (each entry's first draw is the count before it).
    fn read(blocks: &[Arc<WireDrawBlock>]) -> HashMap<u32, (Vec<f64>, Vec<f64>, u64)> {
        let mut chains: HashMap<u32, (Vec<f64>, Vec<f64>, u64)> = HashMap::new();
        for block in blocks {
            for entry in block.entries().unwrap() {
                let (kept, warmup, iteration) = chains.entry(entry.chain).or_default();
                let to = if entry.warmup { warmup } else { kept };
                assert_eq!(
                    entry.first as usize * N_COLUMNS,
                    to.len(),
                    "chain {}",
                    entry.chain
                );
                block.append_values_of(&entry, to);
                assert!(entry.iteration >= *iteration, "chain {}", entry.chain);
                *iteration = entry.iteration;
                for stats in block.stats_of(&entry) {
                    assert_eq!(stats.lp, -f64::from(entry.chain));
                }
            }
        }
        chains
    }

    /// Batches of draws from many threads at once, tasks of 64 chains as the GPU records
    /// them, each chain's draws in order: every chain's kept draws reach the pool once, in
    /// order, and every chain's last iteration; unsaved warmup draws are not sent, but
    /// their chains' progress is.
    #[tokio::test]
    async fn batches_from_many_threads_reach_the_pool_whole_and_in_order() {
        use rayon::prelude::*;
        let sent = Sent::default();
        let (sink, handle) = Actor::spawn(None, Sink, Arc::clone(&sent)).await.unwrap();
        // Not a multiple of the task size, and more than the parts.
        let n_chains = 9 * PART_RUN as u32 + 17;
        let chains: Vec<ChainId> = (0..n_chains).map(ChainId).collect();
        // About 26 MB of kept draws: several blocks of every part.
        let (warmup, kept, per_batch) = (6u64, 80u64, 7u64);
        let total = warmup + kept;
        let streamer = Arc::new(BlockStreamer::new(
            RunId(3),
            sink.clone(),
            &chains,
            BlockSettings {
                burn_in: 0,
                save_warmup: false,
                total,
                positions: false,
            },
            Arc::new(AtomicBool::new(false)),
            Arc::new(Backlog::default()),
        ));
        let recorder = Arc::clone(&streamer);
        let recording = std::thread::spawn(move || {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(16)
                .build()
                .unwrap();
            let mut from = 0;
            while from < total {
                let to = (from + per_batch).min(total);
                pool.install(|| {
                    chains.par_chunks(64).for_each(|task| {
                        let staged: Vec<(Vec<DrawStats>, Vec<f64>)> = task
                            .iter()
                            .map(|chain| {
                                let stats = (from..to).map(|i| stats(chain.0, i)).collect();
                                let values = (from.max(warmup)..to)
                                    .flat_map(|i| values(chain.0, i))
                                    .collect();
                                (stats, values)
                            })
                            .collect();
                        let lent: Vec<ChainDraws> = task
                            .iter()
                            .zip(&staged)
                            .map(|(&chain, (stats, values))| ChainDraws {
                                chain,
                                first_iteration: from,
                                n_warmup: warmup.saturating_sub(from).min(to - from) as usize,
                                stats,
                                warmup_values: false,
                                values,
                            })
                            .collect();
                        recorder.on_batch(&DrawBatch {
                            total,
                            n_columns: N_COLUMNS,
                            positions: false,
                            chains: &lent,
                        });
                    });
                });
                from = to;
            }
        });
        recording.join().unwrap();
        let blocks = every_block(&streamer, sink, handle, &sent).await;
        assert!(blocks.len() > 2, "{} blocks", blocks.len());
        let chains = read(&blocks);
        assert_eq!(chains.len(), n_chains as usize);
        for (chain, (kept_values, warmup_values, iteration)) in chains {
            let expected: Vec<f64> = (warmup..total).flat_map(|i| values(chain, i)).collect();
            assert_eq!(kept_values, expected, "chain {chain}");
            assert!(warmup_values.is_empty());
            assert_eq!(iteration, total, "chain {chain}'s last iteration");
            let counts = streamer.counts(chain as usize);
            assert_eq!((counts.kept, counts.warmup), (kept, 0));
        }
    }

    /// Draws one at a time (`on_draw`, as a chain on the CPU inside a GPU run gives them, or
    /// auto precision's watch of warmup), warmup saved or not, join up as batches do, and
    /// every chain's last iteration is reported.
    #[tokio::test]
    async fn single_draws_join_up_with_warmup_saved_or_not() {
        for save_warmup in [true, false] {
            let sent = Sent::default();
            let (sink, handle) = Actor::spawn(None, Sink, Arc::clone(&sent)).await.unwrap();
            let chains: Vec<ChainId> = (5..9).map(ChainId).collect();
            let streamer = BlockStreamer::new(
                RunId(1),
                sink.clone(),
                &chains,
                BlockSettings {
                    burn_in: 0,
                    save_warmup,
                    total: 10,
                    positions: false,
                },
                Arc::new(AtomicBool::new(false)),
                Arc::new(Backlog::default()),
            );
            for iteration in 0..10 {
                for &chain in &chains {
                    let stats = stats(chain.0, iteration);
                    let warmup = iteration < 4;
                    let values = values(chain.0, iteration);
                    streamer.on_draw(&DrawEvent {
                        chain,
                        iteration,
                        total: 10,
                        warmup,
                        stats: &stats,
                        values: if warmup && !save_warmup { &[] } else { &values },
                    });
                }
            }
            let blocks = every_block(&streamer, sink, handle, &sent).await;
            let read = read(&blocks);
            assert_eq!(read.len(), chains.len());
            for (chain, (kept, warmup, iteration)) in read {
                let of = |range: std::ops::Range<u64>| -> Vec<f64> {
                    range.flat_map(|i| values(chain, i)).collect()
                };
                let saved = if save_warmup { of(0..4) } else { Vec::new() };
                assert_eq!((kept, warmup, iteration), (of(4..10), saved, 10));
            }
        }
    }

    /// Batches of values, then of positions (auto precision's verdict passed between two
    /// recordings): each block holds draws of one kind and width, and every chain's draws
    /// join up across them.
    #[tokio::test]
    async fn values_and_positions_go_in_blocks_of_their_own() {
        let sent = Sent::default();
        let (sink, handle) = Actor::spawn(None, Sink, Arc::clone(&sent)).await.unwrap();
        let chains: Vec<ChainId> = (0..2).map(ChainId).collect();
        let settings = BlockSettings {
            burn_in: 0,
            save_warmup: false,
            total: 4,
            positions: true,
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let backlog = Arc::new(Backlog::default());
        let streamer =
            BlockStreamer::new(RunId(1), sink.clone(), &chains, settings, cancel, backlog);
        assert!(streamer.wants_positions());
        let stats = [DrawStats::default(); 2];
        for (first, positions, n_columns) in [(0u64, false, 3), (2, true, 2)] {
            let values: Vec<f64> = (0..2 * n_columns).map(|k| k as f64 + 0.5).collect();
            let lent: Vec<ChainDraws> = chains
                .iter()
                .map(|&chain| ChainDraws {
                    chain,
                    first_iteration: first,
                    n_warmup: 0,
                    stats: &stats,
                    warmup_values: false,
                    values: &values,
                })
                .collect();
            streamer.on_batch(&DrawBatch {
                total: 4,
                n_columns,
                positions,
                chains: &lent,
            });
        }
        let blocks = every_block(&streamer, sink, handle, &sent).await;
        let mut seen = Vec::new();
        for block in &blocks {
            for entry in block.entries().unwrap().iter().filter(|e| !e.is_empty()) {
                let values: Vec<f64> = block.values_of(entry).collect();
                assert_eq!(values.len(), entry.len() * block.n_columns as usize);
                seen.push((entry.chain, entry.first, block.positions, block.n_columns));
            }
        }
        seen.sort();
        assert_eq!(
            seen,
            [
                (0, 0, false, 3),
                (0, 2, true, 2),
                (1, 0, false, 3),
                (1, 2, true, 2)
            ]
        );
    }
}
