//! Progress bars for running chains: one per chain for a few chains, one in all for many.
//!
//! A GPU run reports thousands of chains' draws from the threads of its driver, millions of
//! events in all: the shared bar counts them with atomics and redraws every
//! [`AGGREGATE_STRIDE`] draws, so that a draw costs an atomic add, not a formatted message.

use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sampler::{DrawEvent, Observer};

/// Chains beyond this share one bar.
const MAX_BARS: u32 = 8;
/// Draws between two updates of the shared bar.
const AGGREGATE_STRIDE: u64 = 1024;

/// An [`Observer`] that draws progress bars on stderr (hidden when stderr is not a terminal).
pub struct ProgressBars {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
    divergent: Vec<AtomicU64>,
    /// Whether one bar counts the draws of every chain.
    shared: bool,
    /// Draws of all chains so far, for the shared bar.
    done: AtomicU64,
    /// Draws of all chains in all.
    total: u64,
}

impl ProgressBars {
    /// Bars for `n_chains` chains of `iterations` iterations each.
    pub fn new(n_chains: u32, iterations: u64, quiet: bool) -> ProgressBars {
        let target = if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let multi = MultiProgress::with_draw_target(target);
        let style = ProgressStyle::with_template(
            "{prefix:>9} [{bar:30}] {pos:>6}/{len:6} {msg} ({elapsed} < {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let (n_bars, per_bar) = if n_chains <= MAX_BARS {
            (n_chains, iterations)
        } else {
            (1, iterations * u64::from(n_chains))
        };
        let bars = (0..n_bars)
            .map(|i| {
                let bar = multi.add(ProgressBar::new(per_bar));
                bar.set_style(style.clone());
                bar.set_prefix(if n_bars == 1 && n_chains > 1 {
                    format!("{n_chains} chains")
                } else {
                    format!("chain {i}")
                });
                bar.set_message("warmup");
                bar
            })
            .collect();
        ProgressBars {
            multi,
            bars,
            divergent: (0..n_bars).map(|_| AtomicU64::new(0)).collect(),
            shared: n_chains > MAX_BARS,
            done: AtomicU64::new(0),
            total: iterations * u64::from(n_chains),
        }
    }

    /// Prints a line on stderr above the bars (whether or not they are shown).
    pub fn println(&self, line: &str) {
        self.multi.suspend(|| errln!("{line}"));
    }

    /// Removes the bars.
    pub fn finish(&self) {
        for bar in &self.bars {
            bar.finish_and_clear();
        }
    }
}

/// The bar's message: the phase and the divergences so far.
fn message(warmup: bool, divergent: u64) -> String {
    let phase = if warmup { "warmup" } else { "sampling" };
    if divergent > 0 {
        format!("{phase}, {divergent} divergent")
    } else {
        phase.to_owned()
    }
}

impl Observer for ProgressBars {
    fn on_draw(&self, event: &DrawEvent) {
        let diverged = event.stats.divergent && !event.warmup;
        if self.shared {
            if diverged {
                self.divergent[0].fetch_add(1, Ordering::Relaxed);
            }
            let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
            if done.is_multiple_of(AGGREGATE_STRIDE) || done == self.total {
                let bar = &self.bars[0];
                bar.set_position(done);
                bar.set_message(message(
                    event.warmup,
                    self.divergent[0].load(Ordering::Relaxed),
                ));
            }
            return;
        }
        let index = event.chain.0 as usize;
        let Some(bar) = self.bars.get(index) else {
            return;
        };
        bar.inc(1);
        if diverged {
            self.divergent[index].fetch_add(1, Ordering::Relaxed);
        }
        bar.set_message(message(
            event.warmup,
            self.divergent[index].load(Ordering::Relaxed),
        ));
    }
}
