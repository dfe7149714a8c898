//! Generated quantities of a Stan program, run here once per kept draw after the chains come
//! back (from local threads, the GPU or a cluster alike), appended to each draw after the
//! transformed parameters so that the summary and the Stan CSV show them.
//!
//! Each draw has its own random stream (`stan::HostRng::for_draw`: seed, chain, draw), so
//! the values do not depend on how chains are spread over threads. A draw whose block fails
//! (a `reject`, an invalid distribution argument) gets NaN and is counted in one warning.

use std::collections::BTreeMap;

use sampler::{ChainTrace, Column, Seed};

use crate::cli::Generated;

/// Warmup draws number their streams from here, apart from the kept draws'.
const WARMUP_DRAW_OFFSET: u64 = 1 << 40;

/// Where each parameter and transformed parameter sits in a draw: name and column positions,
/// in the order of `columns`.
fn input_layout(columns: &[Column]) -> Vec<(String, Vec<usize>)> {
    let mut layout: Vec<(String, Vec<usize>)> = Vec::new();
    for (k, column) in columns.iter().enumerate() {
        match layout.iter_mut().find(|(name, _)| *name == column.name) {
            Some((_, positions)) => positions.push(k),
            None => layout.push((column.name.clone(), vec![k])),
        }
    }
    layout
}

/// Failures of one chain: how many draws failed, and the first message.
#[derive(Default)]
struct Failures {
    count: usize,
    first: Option<stan::HostError>,
}

/// Runs the block on every row of `draws` (`n_columns` values each) and returns the rows
/// with the generated values appended.
fn extend_rows(
    generated: &Generated,
    layout: &[(String, Vec<usize>)],
    draws: &[f64],
    n_columns: usize,
    stream: (Seed, u32, u64),
    failures: &mut Failures,
) -> Vec<f64> {
    let n_generated = generated.quantities.columns().len();
    let n_rows = if n_columns == 0 {
        0
    } else {
        draws.len() / n_columns
    };
    let (seed, chain, first_draw) = stream;
    let mut out = Vec::with_capacity(n_rows * (n_columns + n_generated));
    let mut inputs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, row) in draws.chunks(n_columns.max(1)).take(n_rows).enumerate() {
        for (name, positions) in layout {
            let values = inputs.entry(name.clone()).or_default();
            values.clear();
            values.extend(positions.iter().map(|&k| row[k]));
        }
        out.extend_from_slice(row);
        match generated
            .quantities
            .run_draw(&inputs, seed.0, chain, first_draw + i as u64)
        {
            Ok(values) => out.extend(values),
            Err(err) => {
                failures.count += 1;
                failures.first.get_or_insert(err);
                out.extend(std::iter::repeat_n(f64::NAN, n_generated));
            }
        }
    }
    out
}

/// Appends the generated quantities to every draw of `traces` (warmup draws too, when kept)
/// and their columns to `columns`; chains run in parallel on up to `threads` threads (0: one
/// per core).
pub fn append(
    generated: &Generated,
    traces: &mut [ChainTrace],
    columns: &mut Vec<Column>,
    seed: Seed,
    threads: usize,
) {
    let layout = input_layout(columns);
    let new_columns = generated.quantities.columns();
    let n_generated = new_columns.len();
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
    .clamp(1, traces.len().max(1));
    let per_thread = traces.len().div_ceil(threads);
    let failures: Vec<Failures> = std::thread::scope(|scope| {
        let handles: Vec<_> = traces
            .chunks_mut(per_thread.max(1))
            .map(|chunk| {
                let layout = &layout;
                scope.spawn(move || {
                    let mut failures = Failures::default();
                    for trace in chunk {
                        let chain = trace.chain.0;
                        let n_columns = trace.n_columns;
                        trace.draws = extend_rows(
                            generated,
                            layout,
                            &trace.draws,
                            n_columns,
                            (seed, chain, 0),
                            &mut failures,
                        );
                        trace.warmup_draws = extend_rows(
                            generated,
                            layout,
                            &trace.warmup_draws,
                            n_columns,
                            (seed, chain, WARMUP_DRAW_OFFSET),
                            &mut failures,
                        );
                        trace.n_columns = n_columns + n_generated;
                    }
                    failures
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap_or_default())
            .collect()
    });
    columns.extend(new_columns.into_iter().map(|column| Column {
        name: column.name,
        index: column.index,
    }));
    let count: usize = failures.iter().map(|f| f.count).sum();
    if let Some(first) = failures.into_iter().find_map(|f| f.first) {
        errln!(
            "warning: generated quantities failed for {count} draw(s), written as NaN; the first failure:\n{}",
            first.render(&generated.file_name, &generated.source)
        );
    }
}
