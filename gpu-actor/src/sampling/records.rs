//! Chain traces as draws come back from the device: the reported values of each draw
//! (computed on the CPU from its unconstrained position), its statistics, and the observer's
//! `on_draw` (or, where it takes them, one `on_batch` per task), on all cores (rayon's pool),
//! chains split into contiguous chunks (a trace belongs to one task). An observer that
//! streams the draws (`Observer::keeps_draws` is false) gets them and the traces keep none:
//! no room is made for them. One that takes positions (`Observer::wants_positions`) gets
//! batches of positions, and no values are written.

use std::ops::Range;

use rayon::prelude::*;
use sampler::{
    ChainDraws, ChainTrace, DrawBatch, DrawEvent, DrawStats, Observer, Room, SamplerSettings,
    Tuning,
};

use sampler::OutputWriter;

/// One draw of one chain, as a batch decoder hands it over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Draw<'a> {
    /// The unconstrained position (may be empty for a warmup draw not saved).
    pub q: &'a [f64],
    pub stats: DrawStats,
    /// 0-based iteration, warmup included (as the CPU sampler counts).
    pub iteration: u64,
    pub warmup: bool,
}

/// What every draw shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordSettings {
    pub save_warmup: bool,
    /// Total iterations, warmup included (the observer's `total`).
    pub total: u64,
    /// Draws after warmup, each trace's room for them (0 when the traces keep none).
    pub draws: usize,
    /// Whether the traces keep the draws.
    pub keep: bool,
}

impl RecordSettings {
    /// The recording of a run with `settings` for `observer`.
    pub(crate) fn new(settings: &SamplerSettings, observer: &dyn Observer) -> RecordSettings {
        let keep = observer.keeps_draws();
        RecordSettings {
            save_warmup: settings.save_warmup,
            total: settings.num_warmup.saturating_add(settings.num_draws),
            draws: if keep {
                usize::try_from(settings.num_draws).unwrap_or(usize::MAX)
            } else {
                0
            },
            keep,
        }
    }
}

/// An empty trace per chain with its initial point. Room for the draws is made by [`Room`]
/// while the device runs warmup, or else by [`record`] with the first of them.
pub(crate) fn empty_traces(
    chains: &[sampler::ChainSpec],
    init: &[Vec<f64>],
    n_columns: usize,
) -> Vec<ChainTrace> {
    chains
        .iter()
        .zip(init)
        .map(|(spec, q)| empty_trace(spec.chain, n_columns, q.clone()))
        .collect()
}

/// Gives each trace that has none yet (before sampling: their draws are empty) its room for
/// the draws after warmup, made by `room` (`sampler::Room`) on threads of their own while the
/// device ran warmup: thousands of chains' traces are gigabytes, one thread before warmup
/// kept the device waiting for them, and the recording tasks, allocating in parallel with the
/// first batch, took longer still. A chain without room (a thread of the room panicked) gets
/// it from [`record`].
pub(crate) fn give_room(room: Room, traces: &mut [ChainTrace]) {
    for (trace, (draws, stats)) in traces.iter_mut().zip(room.take()) {
        if trace.draws.capacity() == 0 && trace.stats.capacity() == 0 {
            trace.draws = draws;
            trace.stats = stats;
        }
    }
}

/// An empty trace for a chain.
fn empty_trace(chain: sampler::ChainId, n_columns: usize, init: Vec<f64>) -> ChainTrace {
    ChainTrace {
        chain,
        n_columns,
        warmup_draws: Vec::new(),
        warmup_stats: Vec::new(),
        draws: Vec::new(),
        stats: Vec::new(),
        tuning: Tuning {
            step_size: 0.0,
            inv_metric: Vec::new(),
            dense: false,
        },
        init,
        final_position: Vec::new(),
        grad_evals_warmup: 0,
        grad_evals_sampling: 0,
        warmup_seconds: 0.0,
        sampling_seconds: 0.0,
    }
}

/// Chains per recording task: enough work to be worth a hand-over to another core.
const CHAINS_PER_TASK: usize = 64;

/// One chain's draws of a batch, gathered for an observer that takes batches
/// (`Observer::wants_batches`): what a `ChainDraws` lends.
#[derive(Default)]
struct Staged {
    first_iteration: u64,
    n_warmup: usize,
    stats: Vec<DrawStats>,
    values: Vec<f64>,
}

impl Staged {
    /// Whether `draw` continues what is staged: the next iteration, and no warmup draw after
    /// a kept one.
    fn continues(&self, draw: &Draw<'_>) -> bool {
        self.stats.is_empty()
            || (draw.iteration == self.first_iteration + self.stats.len() as u64
                && (!draw.warmup || self.n_warmup == self.stats.len()))
    }

    fn push(&mut self, draw: &Draw<'_>, values: Option<&[f64]>) {
        if self.stats.is_empty() {
            self.first_iteration = draw.iteration;
            self.n_warmup = 0;
        }
        self.n_warmup += usize::from(draw.warmup);
        self.stats.push(draw.stats);
        if let Some(values) = values {
            self.values.extend_from_slice(values);
        }
    }

    fn lend(&self, chain: sampler::ChainId, save_warmup: bool) -> ChainDraws<'_> {
        ChainDraws {
            chain,
            first_iteration: self.first_iteration,
            n_warmup: self.n_warmup,
            stats: &self.stats,
            warmup_values: save_warmup,
            values: &self.values,
        }
    }

    fn clear(&mut self) {
        self.stats.clear();
        self.values.clear();
    }
}

/// Records the draws `draws_of(chains, emit)` hands over for the chains of `traces`: values,
/// statistics, and the observer's call. Each task asks for a contiguous range of chains;
/// `draws_of` emits `(c, draw)` in any order across chains, each chain's draws in order (a
/// batch laid out chain-contiguously is best read slot by slot, all chains of the range at
/// once). An observer that takes batches gets the task's draws in one `on_batch`, chain by
/// chain, once the task has them all.
pub(crate) fn record<F>(
    traces: &mut [ChainTrace],
    writer: &OutputWriter,
    settings: RecordSettings,
    observer: &dyn Observer,
    draws_of: F,
) where
    F: Fn(Range<usize>, &mut dyn FnMut(usize, Draw<'_>)) + Sync,
{
    let draws_of = &draws_of;
    let batches = observer.wants_batches();
    // Batches of positions where the observer takes them and the traces keep nothing; a
    // position that is its values goes as values (the receiver has nothing to write).
    let positions = batches && !settings.keep && observer.wants_positions();
    let (batch_columns, labelled_positions) = if positions {
        (writer.dim(), !writer.values_are_positions())
    } else {
        (writer.n_columns(), false)
    };
    let batch = |chains: &[ChainDraws<'_>]| {
        if !chains.is_empty() {
            observer.on_batch(&DrawBatch {
                total: settings.total,
                n_columns: batch_columns,
                positions: labelled_positions,
                chains,
            });
        }
    };
    // Tasks on rayon's pool: its threads outlive the call, so a batch pays no thread start.
    traces
        .par_chunks_mut(CHAINS_PER_TASK)
        .enumerate()
        .for_each_init(
            || {
                let values = vec![0.0; writer.n_columns()];
                (writer.clone(), values, Vec::<Staged>::new())
            },
            |(writer, values, staged), (k, traces)| {
                let start = k * CHAINS_PER_TASK;
                if batches {
                    staged.resize_with(traces.len(), Staged::default);
                    staged.iter_mut().for_each(Staged::clear);
                }
                draws_of(start..start + traces.len(), &mut |c, draw: Draw<'_>| {
                    let trace = &mut traces[c - start];
                    // A warmup draw not saved has no values (the device may not even have sent
                    // them); the observer gets its statistics.
                    let kept = !draw.warmup || settings.save_warmup;
                    if kept && !positions {
                        writer.write(draw.q, values);
                        if !settings.keep {
                            // Streamed by the observer, below.
                        } else if draw.warmup {
                            trace.warmup_draws.extend_from_slice(values);
                            trace.warmup_stats.push(draw.stats);
                        } else {
                            if trace.draws.capacity() == 0 {
                                trace.draws.reserve_exact(settings.draws * values.len());
                                trace.stats.reserve_exact(settings.draws);
                            }
                            trace.draws.extend_from_slice(values);
                            trace.stats.push(draw.stats);
                        }
                    }
                    if batches {
                        let stage = &mut staged[c - start];
                        if !stage.continues(&draw) {
                            // Not what a batch hands over; what came before goes first.
                            batch(&[stage.lend(trace.chain, settings.save_warmup)]);
                            stage.clear();
                        }
                        let sent = if positions { draw.q } else { &values[..] };
                        stage.push(&draw, kept.then_some(sent));
                        return;
                    }
                    observer.on_draw(&DrawEvent {
                        chain: trace.chain,
                        iteration: draw.iteration,
                        total: settings.total,
                        warmup: draw.warmup,
                        stats: &draw.stats,
                        values: if kept { values } else { &[] },
                    });
                });
                if batches {
                    let chains: Vec<ChainDraws<'_>> = staged
                        .iter()
                        .zip(traces.iter())
                        .filter(|(stage, _)| !stage.stats.is_empty())
                        .map(|(stage, trace)| stage.lend(trace.chain, settings.save_warmup))
                        .collect();
                    batch(&chains);
                }
            },
        );
}
