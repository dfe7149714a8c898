//! Chain traces as draws come back from the device: the reported values of each draw
//! (computed on the CPU from its unconstrained position), its statistics, and the observer's
//! `on_draw`, on all cores (rayon's pool), chains split into contiguous chunks (a trace
//! belongs to one task). An observer that streams the draws (`Observer::keeps_draws` is
//! false) gets them and the traces keep none: no room is made for them.

use std::ops::Range;

use rayon::prelude::*;
use sampler::{ChainTrace, DrawEvent, DrawStats, Observer, Room, SamplerSettings, Tuning};

use super::outputs::OutputWriter;

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

/// Records the draws `draws_of(chains, emit)` hands over for the chains of `traces`: values,
/// statistics, and the observer's call. Each task asks for a contiguous range of chains;
/// `draws_of` emits `(c, draw)` in any order across chains, each chain's draws in order (a
/// batch laid out chain-contiguously is best read slot by slot, all chains of the range at
/// once).
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
    // Tasks on rayon's pool: its threads outlive the call, so a batch pays no thread start.
    traces
        .par_chunks_mut(CHAINS_PER_TASK)
        .enumerate()
        .for_each_init(
            || (writer.clone(), vec![0.0; writer.n_columns()]),
            |(writer, values), (k, traces)| {
                let start = k * CHAINS_PER_TASK;
                draws_of(start..start + traces.len(), &mut |c, draw: Draw<'_>| {
                    let trace = &mut traces[c - start];
                    // A warmup draw not saved has no values (the device may not even have sent
                    // them); the observer gets its statistics.
                    let kept = !draw.warmup || settings.save_warmup;
                    if kept {
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
                    observer.on_draw(&DrawEvent {
                        chain: trace.chain,
                        iteration: draw.iteration,
                        total: settings.total,
                        warmup: draw.warmup,
                        stats: &draw.stats,
                        values: if kept { values } else { &[] },
                    });
                });
            },
        );
}
