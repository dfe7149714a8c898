//! A GPU run's stream: the draws of all its chains buffered together and cast to the pool
//! as a few [`WireDrawBlock`]s per flush (one per part of the chains, built side by side,
//! then packed), when the buffer passes [`BLOCK_BYTES`] or every
//! [`FLUSH_INTERVAL`], instead of one event per chain (thousands of chains in lockstep would
//! each flush at every interval, and the per-event costs would bound the stream).
//!
//! The sampler calls `on_draw` from several threads (chains split into contiguous chunks),
//! tens of millions of times in a large run, so a draw touches nothing shared: each chain's
//! buffer has its own lock, never contended, and each thread counts the bytes it buffered
//! locally and adds them to the shared count once per [`COUNT_BATCH`] (a shared counter
//! written at every draw, from every core, cost more than the draws' copies). One thread at a
//! time (the holder of the flush lock) takes every chain's buffered draws and sends them, in
//! order. The others go on buffering while it waits for the coordinator's acknowledgements,
//! up to twice [`BLOCK_BYTES`]; past that they wait for the flush lock too: memory stays
//! bounded.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ractor::ActorRef;
use sampler::{ChainId, DrawEvent, DrawStats, Observer};

use super::{Counts, FLUSH_INTERVAL};
use crate::outbox::Backlog;
use crate::pool::{PoolMsg, RunId};
use crate::wire::{WireDrawBlock, WireTaskEvent};

/// Buffered bytes of draws past which a block is sent.
pub(crate) const BLOCK_BYTES: usize = 8 * 1024 * 1024;

/// Bytes of a GPU task's blocks not yet acknowledged past which its run waits: a constant
/// cap, so that a node's memory for a task stays bounded however many chains it runs, and
/// enough blocks that the GPU rarely waits for the coordinator (twice the coordinator's
/// backlog of a job, `JOB_BACKLOG_BYTES`).
pub(crate) const GPU_TASK_BACKLOG_BYTES: usize = 64 * BLOCK_BYTES;

/// Most parts a flush's walk over the chains is split into ([`BlockStreamer::take_blocks`]),
/// and fewest chains a part has.
const MAX_FLUSH_PARTS: usize = 8;
const MIN_PART_CHAINS: usize = 128;

/// Bytes a thread buffers before it adds them to the shared count (and looks at the clock):
/// small against [`BLOCK_BYTES`] even summed over every core.
const COUNT_BATCH: usize = 64 * 1024;

/// Draws a thread buffers before it looks at the clock, however small they are (a slow
/// stream of small draws still flushes every [`FLUSH_INTERVAL`]).
const CLOCK_BATCH: u32 = 64;

thread_local! {
    /// This thread's bytes and draws not yet added to a streamer's shared count, and the
    /// streamer they belong to (its address; another streamer's leftovers are dropped, the
    /// shared count being an estimate).
    static UNCOUNTED: Cell<(usize, usize, u32)> = const { Cell::new((0, 0, 0)) };
}

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

/// Consecutive draws of one chain and one phase; their values and statistics are the
/// chain buffer's, after those of the segments before it.
struct Segment {
    warmup: bool,
    first: u64,
    draws: usize,
    /// What its draws added to `BlockStreamer::buffered`.
    bytes: usize,
}

/// One chain's buffered draws. A flush copies them into its block and clears the vectors,
/// keeping their room: buffering a draw allocates nothing once the run is under way, and
/// the flushing thread frees nothing the chains' threads allocated.
#[derive(Default)]
struct ChainBuffer {
    segments: Vec<Segment>,
    values: Vec<f64>,
    stats: Vec<DrawStats>,
    /// Iterations done, and as last sent.
    iteration: u64,
    sent_iteration: u64,
    /// Draws of each phase so far (buffered or sent).
    kept_count: u64,
    warmup_count: u64,
    counts: Counts,
}

/// The observer of a GPU run.
pub(super) struct BlockStreamer {
    run: RunId,
    pool: ActorRef<PoolMsg>,
    burn_in: u64,
    save_warmup: bool,
    total: u64,
    cancel: Arc<AtomicBool>,
    backlog: Arc<Backlog>,
    index: ChainIndex,
    chains: Vec<(u32, Mutex<ChainBuffer>)>,
    /// Bytes buffered, roughly (what the block will take).
    buffered: AtomicUsize,

    start: Instant,
    /// Nanoseconds from `start` to the last flush.
    last_flush: AtomicU64,
    /// Held by the thread that flushes.
    flush: Mutex<()>,
    /// Nanoseconds the run's threads waited for the backlog to drain, and spent taking
    /// blocks, and the blocks sent: the `runtime::timeline` event at the end of the run.
    waited_ns: AtomicU64,
    taking_ns: AtomicU64,
    blocks: AtomicU64,
}

/// Bytes one draw of `n_values` values adds to a block.
fn draw_bytes(n_values: usize) -> usize {
    8 * n_values + 37
}

impl BlockStreamer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        run: RunId,
        pool: ActorRef<PoolMsg>,
        chains: &[ChainId],
        burn_in: u64,
        save_warmup: bool,
        total: u64,
        cancel: Arc<AtomicBool>,
        backlog: Arc<Backlog>,
    ) -> Self {
        Self {
            run,
            pool,
            burn_in,
            save_warmup,
            total,
            cancel,
            backlog,
            index: ChainIndex::new(chains),
            chains: chains
                .iter()
                .map(|c| (c.0, Mutex::new(ChainBuffer::default())))
                .collect(),
            buffered: AtomicUsize::new(0),

            start: Instant::now(),
            last_flush: AtomicU64::new(0),
            flush: Mutex::new(()),
            waited_ns: AtomicU64::new(0),
            taking_ns: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
        }
    }

    /// What chain `index`'s draws added up to.
    pub(super) fn counts(&self, index: usize) -> Counts {
        self.chains
            .get(index)
            .map(|(_, buffer)| buffer.lock().unwrap_or_else(|p| p.into_inner()).counts)
            .unwrap_or_default()
    }

    /// Everything not sent yet, as the run's last event. Left out of the backlog, like a
    /// chain's last progress event.
    pub(super) fn last_event(&self) -> Option<WireTaskEvent> {
        let _flushing = self.flush.lock().unwrap_or_else(|p| p.into_inner());
        let ms = |ns: &AtomicU64| ns.load(Ordering::Relaxed) as f64 * 1e-6;
        tracing::debug!(
            target: "runtime::timeline",
            run_ms = self.start.elapsed().as_secs_f64() * 1e3,
            backlog_wait_ms = ms(&self.waited_ns),
            take_ms = ms(&self.taking_ns),
            blocks = self.blocks.load(Ordering::Relaxed),
            "GPU run streamed"
        );
        self.take_block()
            .map(|block| WireTaskEvent::Block(Arc::new(block)))
    }

    fn since_start(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn due(&self) -> bool {
        let last = self.last_flush.load(Ordering::Relaxed);
        let interval = u64::try_from(FLUSH_INTERVAL.as_nanos()).unwrap_or(u64::MAX);
        self.since_start().saturating_sub(last) >= interval
    }

    /// Every chain's buffered draws, and progress of chains that advanced, as one block;
    /// `None` when there is nothing to say. The caller holds the flush lock.
    fn take_block(&self) -> Option<WireDrawBlock> {
        let (block, bytes) = self.take_part(&self.chains, 1);
        self.taken(bytes);
        block
    }

    /// [`Self::take_block`] over parts of the chains side by side, each on a thread of its
    /// own: one block per part with something to say, in chain order. A flush walks every
    /// chain's buffer, thousands of scattered reads, so its parts are walked at once.
    ///
    /// Scoped threads, not rayon's pool: the flushing thread is often one of rayon's,
    /// recording a GPU batch, and a rayon thread that waits for its jobs runs others
    /// meanwhile, which may be draws of this run that wait for the flush lock it holds.
    fn take_blocks(&self) -> Vec<WireDrawBlock> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let parts = cores.clamp(1, MAX_FLUSH_PARTS);
        let per_part = self.chains.len().div_ceil(parts).max(MIN_PART_CHAINS);
        let taken: Vec<(Option<WireDrawBlock>, usize)> = if self.chains.len() <= per_part {
            vec![self.take_part(&self.chains, 1)]
        } else {
            std::thread::scope(|scope| {
                let parts: Vec<_> = self
                    .chains
                    .chunks(per_part)
                    .map(|chains| scope.spawn(move || self.take_part(chains, parts)))
                    .collect();
                parts
                    .into_iter()
                    .map(|part| {
                        part.join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                    .collect()
            })
        };
        self.taken(taken.iter().map(|(_, bytes)| bytes).sum());
        taken.into_iter().filter_map(|(block, _)| block).collect()
    }

    /// Notes a flush that took `bytes` of buffered draws.
    fn taken(&self, bytes: usize) {
        self.last_flush.store(self.since_start(), Ordering::Relaxed);
        // Threads may not have counted all of what is taken yet.
        let _ = self
            .buffered
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(bytes))
            });
    }

    /// The block of `chains`' buffered draws and progress (`None`: nothing to say), one of
    /// `parts` parts of a flush, and the bytes of draws it took.
    fn take_part(
        &self,
        chains: &[(u32, Mutex<ChainBuffer>)],
        parts: usize,
    ) -> (Option<WireDrawBlock>, usize) {
        let mut block = WireDrawBlock::new(0, self.total);
        let mut n_columns = None;
        let mut bytes = 0;
        let mut any = false;
        for (chain, buffer) in chains {
            let mut buffer = buffer.lock().unwrap_or_else(|p| p.into_inner());
            if buffer.segments.is_empty() && buffer.iteration == buffer.sent_iteration {
                continue;
            }
            any = true;
            buffer.sent_iteration = buffer.iteration;
            if buffer.segments.is_empty() {
                // Progress only: no draws, at the end of the kept ones so far.
                block.push(*chain, false, buffer.kept_count, buffer.iteration, &[], &[]);
                continue;
            }
            // Every draw of a run has as many values: the first chain with draws says how
            // many, and the block makes room for what was counted as buffered (it grows if
            // more came since).
            let n_columns = *n_columns.get_or_insert_with(|| {
                let width = buffer.values.len() / buffer.stats.len().max(1);
                block.n_columns = u32::try_from(width).unwrap_or(u32::MAX);
                let buffered = self.buffered.load(Ordering::Relaxed);
                block.reserve(chains.len(), buffered / parts / draw_bytes(width));
                width
            });
            let mut at = 0;
            for segment in &buffer.segments {
                let draws = at..at + segment.draws;
                block.push(
                    *chain,
                    segment.warmup,
                    segment.first,
                    buffer.iteration,
                    &buffer.values[draws.start * n_columns..draws.end * n_columns],
                    &buffer.stats[draws],
                );
                at += segment.draws;
                bytes += segment.bytes;
            }
            buffer.segments.clear();
            buffer.values.clear();
            buffer.stats.clear();
        }
        if !any {
            return (None, bytes);
        }
        // On this part's thread, beside the other parts: a pass over what was just copied.
        block.pack();
        (Some(block), bytes)
    }

    /// Counts `bytes` this thread just buffered; whether it is time to look at the shared
    /// count and the clock (once per [`COUNT_BATCH`] bytes or [`CLOCK_BATCH`] draws).
    fn count(&self, bytes: usize) -> bool {
        let me = std::ptr::from_ref(self) as usize;
        UNCOUNTED.with(|uncounted| {
            let (owner, pending, draws) = uncounted.get();
            let (pending, draws) = if owner == me {
                (pending + bytes, draws + 1)
            } else {
                (bytes, 1)
            };
            if pending >= COUNT_BATCH || draws >= CLOCK_BATCH {
                uncounted.set((me, 0, 0));
                self.buffered.fetch_add(pending, Ordering::Relaxed);
                true
            } else {
                uncounted.set((me, pending, draws));
                false
            }
        })
    }

    /// Sends a block when one is due; waits for the flush lock only when the buffer is full.
    fn maybe_flush(&self) {
        let buffered = self.buffered.load(Ordering::Relaxed);
        let guard = if buffered >= 2 * BLOCK_BYTES {
            self.flush.lock().unwrap_or_else(|p| p.into_inner())
        } else if buffered >= BLOCK_BYTES || self.due() {
            match self.flush.try_lock() {
                Ok(guard) => guard,
                Err(_) => return,
            }
        } else {
            return;
        };
        // Another thread may have flushed meanwhile.
        if self.buffered.load(Ordering::Relaxed) < BLOCK_BYTES && !self.due() {
            return;
        }
        let waiting = Instant::now();
        self.backlog
            .wait_below(GPU_TASK_BACKLOG_BYTES, &self.cancel);
        let taking = Instant::now();
        let blocks = self.take_blocks();
        let nanos = |since: Instant, until: Instant| {
            u64::try_from((until - since).as_nanos()).unwrap_or(u64::MAX)
        };
        let now = Instant::now();
        self.waited_ns
            .fetch_add(nanos(waiting, taking), Ordering::Relaxed);
        self.taking_ns
            .fetch_add(nanos(taking, now), Ordering::Relaxed);
        for block in blocks {
            self.blocks.fetch_add(1, Ordering::Relaxed);
            let event = WireTaskEvent::Block(Arc::new(block));
            self.backlog.add(event.estimated_bytes());
            let _ = self.pool.cast(PoolMsg::ChainProgress {
                run: self.run,
                event,
            });
        }
        drop(guard);
    }
}

impl Observer for BlockStreamer {
    fn on_draw(&self, event: &DrawEvent) {
        let mut added = 0;
        let Some(index) = self.index.get(event.chain) else {
            return;
        };
        {
            let mut buffer = self.chains[index]
                .1
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            buffer.iteration = event.iteration + 1;
            let sent = buffer.counts.observe(event, self.burn_in, self.save_warmup);
            if let Some(warmup) = sent {
                let count = if warmup {
                    &mut buffer.warmup_count
                } else {
                    &mut buffer.kept_count
                };
                let first = *count;
                *count += 1;
                let joins = buffer.segments.last().is_some_and(|s| s.warmup == warmup);
                if !joins {
                    buffer.segments.push(Segment {
                        warmup,
                        first,
                        draws: 0,
                        bytes: 0,
                    });
                }
                let bytes = draw_bytes(event.values.len());
                buffer.values.extend_from_slice(event.values);
                buffer.stats.push(*event.stats);
                if let Some(segment) = buffer.segments.last_mut() {
                    segment.draws += 1;
                    segment.bytes += bytes;
                }

                added = bytes;
            }
        }
        if self.count(added) {
            self.maybe_flush();
        }
    }

    fn should_stop(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    fn keeps_draws(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ractor::{Actor, ActorProcessingErr};

    /// An actor of the pool's messages that drops them: the streamer needs somewhere to
    /// send, the test reads the blocks it takes.
    struct Sink;

    impl Actor for Sink {
        type Msg = PoolMsg;
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<PoolMsg>, (): ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }

    /// A flush walked in parts gives blocks that, one after another, hold every chain's
    /// draws once, in chain order, as a flush in one part does.
    #[tokio::test]
    async fn a_flush_in_parts_takes_every_chains_draws_once_in_order() {
        let (sink, handle) = Actor::spawn(None, Sink, ()).await.unwrap();
        let n_chains = 3 * MIN_PART_CHAINS as u32 + 17;
        let chains: Vec<ChainId> = (0..n_chains).map(ChainId).collect();
        let streamer = |run| {
            BlockStreamer::new(
                RunId(run),
                sink.clone(),
                &chains,
                0,
                false,
                10,
                Arc::new(AtomicBool::new(false)),
                Arc::new(Backlog::default()),
            )
        };
        let (parts, whole) = (streamer(1), streamer(2));
        for streamer in [&parts, &whole] {
            // No flush of its own while the test feeds it, however slow the machine.
            streamer.last_flush.store(u64::MAX / 2, Ordering::Relaxed);
            for iteration in 0..2 {
                for &chain in &chains {
                    let values = [f64::from(chain.0), iteration as f64];
                    let stats = DrawStats {
                        lp: -f64::from(chain.0),
                        ..DrawStats::default()
                    };
                    streamer.on_draw(&DrawEvent {
                        chain,
                        iteration,
                        total: 10,
                        warmup: false,
                        stats: &stats,
                        values: &values,
                    });
                }
            }
        }
        let blocks = parts.take_blocks();
        if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
            assert!(blocks.len() > 1, "{} blocks", blocks.len());
        }
        let one = whole.take_block().expect("draws to send");
        let mut seen = Vec::new();
        for block in &blocks {
            for entry in block.entries().unwrap() {
                let values: Vec<f64> = block.values_of(&entry).collect();
                let chain = f64::from(entry.chain);
                assert_eq!(values, [chain, 0.0, chain, 1.0], "chain {}", entry.chain);
                seen.push(entry.chain);
            }
        }
        assert_eq!(seen, (0..n_chains).collect::<Vec<_>>());
        let whole_entries: Vec<u32> = one.entries().unwrap().iter().map(|e| e.chain).collect();
        assert_eq!(whole_entries, seen);
        assert!(parts.take_blocks().is_empty(), "nothing is taken twice");
        sink.stop(None);
        handle.await.unwrap();
    }

    /// Draws recorded on rayon's pool, as a GPU batch's are, flush many times over without
    /// a thread waiting on itself (a flush that ran its parts on rayon's pool could, while it
    /// waited for them, take up another draw of the run, which then waited for the flush
    /// lock the same thread held).
    #[tokio::test]
    async fn draws_recorded_on_rayons_pool_flush_without_deadlock() {
        use rayon::prelude::*;
        let (sink, handle) = Actor::spawn(None, Sink, ()).await.unwrap();
        let n_chains = 2053;
        let chains: Vec<ChainId> = (0..n_chains).map(ChainId).collect();
        let streamer = Arc::new(BlockStreamer::new(
            RunId(3),
            sink.clone(),
            &chains,
            0,
            false,
            40,
            Arc::new(AtomicBool::new(false)),
            Arc::new(Backlog::default()),
        ));
        let (done, finished) = std::sync::mpsc::channel();
        let recorder = Arc::clone(&streamer);
        std::thread::spawn(move || {
            // About 70 MB of draws: several flushes at 2 x BLOCK_BYTES, under the backlog.
            let values = vec![0.5; 100];
            // As many threads as a GPU node has cores, however few this machine has.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(16)
                .build()
                .unwrap();
            for iteration in 0..40 {
                pool.install(|| {
                    chains.par_iter().for_each(|&chain| {
                        recorder.on_draw(&DrawEvent {
                            chain,
                            iteration,
                            total: 40,
                            warmup: false,
                            stats: &DrawStats::default(),
                            values: &values,
                        });
                    });
                });
            }
            let _ = done.send(());
        });
        let recorded = finished.recv_timeout(std::time::Duration::from_secs(120));
        assert!(recorded.is_ok(), "the draws' threads deadlocked");
        assert!(
            streamer.blocks.load(Ordering::Relaxed) > 1,
            "flushed as it went"
        );
        sink.stop(None);
        handle.await.unwrap();
    }
}
