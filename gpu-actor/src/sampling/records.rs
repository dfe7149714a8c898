//! Chain traces as draws come back from the device: the reported values of each draw
//! (computed on the CPU from its unconstrained position), its statistics, and the observer's
//! `on_draw`, on all cores, chains split into contiguous chunks (a trace belongs to one
//! thread).

use sampler::{ChainTrace, DrawEvent, DrawStats, Observer, Tuning};

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
}

/// An empty trace per chain, each with room for `draws` draws and its initial point.
pub(crate) fn empty_traces(
    chains: &[sampler::ChainSpec],
    init: &[Vec<f64>],
    n_columns: usize,
    draws: usize,
) -> Vec<ChainTrace> {
    chains
        .iter()
        .zip(init)
        .map(|(spec, q)| empty_trace(spec.chain, n_columns, draws, q.clone()))
        .collect()
}

/// An empty trace for a chain.
fn empty_trace(
    chain: sampler::ChainId,
    n_columns: usize,
    draws: usize,
    init: Vec<f64>,
) -> ChainTrace {
    ChainTrace {
        chain,
        n_columns,
        warmup_draws: Vec::new(),
        warmup_stats: Vec::new(),
        draws: Vec::with_capacity(draws * n_columns),
        stats: Vec::with_capacity(draws),
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

/// Threads for recording: the machine's cores, fewer for small batches.
pub(crate) fn threads_for(n_chains: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(n_chains.div_ceil(64)).max(1)
}

/// Records the draws `draws_of(c, emit)` hands over for every chain `c` of `traces`: values,
/// statistics, and the observer's call.
pub(crate) fn record<F>(
    traces: &mut [ChainTrace],
    writer: &OutputWriter,
    settings: RecordSettings,
    observer: &dyn Observer,
    draws_of: F,
) where
    F: Fn(usize, &mut dyn FnMut(Draw<'_>)) + Sync,
{
    let n = traces.len();
    let threads = threads_for(n);
    let chunk = n.div_ceil(threads).max(1);
    let draws_of = &draws_of;
    std::thread::scope(|scope| {
        for (k, traces) in traces.chunks_mut(chunk).enumerate() {
            let mut writer = writer.clone();
            scope.spawn(move || {
                let mut values = vec![0.0; writer.n_columns()];
                for (i, trace) in traces.iter_mut().enumerate() {
                    let c = k * chunk + i;
                    draws_of(c, &mut |draw: Draw<'_>| {
                        // A warmup draw not saved has no values (the device may not even
                        // have sent them); the observer gets its statistics.
                        let kept = !draw.warmup || settings.save_warmup;
                        if kept {
                            writer.write(draw.q, &mut values);
                            if draw.warmup {
                                trace.warmup_draws.extend_from_slice(&values);
                                trace.warmup_stats.push(draw.stats);
                            } else {
                                trace.draws.extend_from_slice(&values);
                                trace.stats.push(draw.stats);
                            }
                        }
                        observer.on_draw(&DrawEvent {
                            chain: trace.chain,
                            iteration: draw.iteration,
                            total: settings.total,
                            warmup: draw.warmup,
                            stats: &draw.stats,
                            values: if kept { &values } else { &[] },
                        });
                    });
                }
            });
        }
    });
}
