//! Progress bars for running chains: one per chain for a few chains, one in all for many.

use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sampler::{DrawEvent, Observer};

/// Chains beyond this share one bar.
const MAX_BARS: u32 = 8;

/// An [`Observer`] that draws progress bars on stderr (hidden when stderr is not a terminal).
pub struct ProgressBars {
    _multi: MultiProgress,
    bars: Vec<ProgressBar>,
    divergent: Vec<AtomicU64>,
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
            _multi: multi,
            bars,
            divergent: (0..n_bars).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Removes the bars.
    pub fn finish(&self) {
        for bar in &self.bars {
            bar.finish_and_clear();
        }
    }
}

impl Observer for ProgressBars {
    fn on_draw(&self, event: &DrawEvent) {
        let index = if self.bars.len() == 1 {
            0
        } else {
            event.chain.0 as usize
        };
        let Some(bar) = self.bars.get(index) else {
            return;
        };
        bar.inc(1);
        if event.stats.divergent && !event.warmup {
            self.divergent[index].fetch_add(1, Ordering::Relaxed);
        }
        let phase = if event.warmup { "warmup" } else { "sampling" };
        let divergent = self.divergent[index].load(Ordering::Relaxed);
        if divergent > 0 {
            bar.set_message(format!("{phase}, {divergent} divergent"));
        } else {
            bar.set_message(phase);
        }
    }
}
