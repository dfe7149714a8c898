//! nutpie's diagonal adaptation (nuts-rs `adapt_strategy.rs`, `transform/adapt/diagonal.rs`):
//! the inverse mass matrix is `sqrt(Var(x) / Var(∇ log p))` per coordinate, the minimiser of
//! the Fisher divergence for a diagonal Gaussian (Seyboldt et al., arXiv:2603.18845). It starts
//! from `1 / |∇ log p(x0)|` and is re-estimated after every warmup draw from a foreground
//! estimator, while a background estimator collects the next window; at each switch the
//! background becomes the foreground. Early windows switch every 10 draws (first 30% of warmup);
//! later windows start at 80 draws and grow by 1.5; the last 15% adapt the step size only.

use super::windowed::Welford;

const CLAMP: (f64, f64) = (1e-20, 1e20);

/// Schedule constants (nuts-rs defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradDiagOptions {
    /// Fraction of warmup with short windows.
    pub early_window: f64,
    /// Fraction of warmup, at the end, that adapts the step size only.
    pub step_size_window: f64,
    /// Draws per window in the early phase.
    pub early_switch_freq: u64,
    /// Draws in the first window of the main phase.
    pub switch_freq: u64,
    /// Growth of main-phase windows.
    pub window_growth: f64,
}

impl Default for GradDiagOptions {
    fn default() -> GradDiagOptions {
        GradDiagOptions {
            early_window: 0.3,
            step_size_window: 0.15,
            early_switch_freq: 10,
            switch_freq: 80,
            window_growth: 1.5,
        }
    }
}

/// Which phase a warmup draw is in, and what the adapter did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GradDiagStep {
    /// The inverse metric changed.
    pub changed: bool,
    /// The draw is in the late phase (the step-size statistic switches to the symmetric one).
    pub late: bool,
    /// The draw is in the final step-size-only window.
    pub final_window: bool,
}

/// The state of the gradient-based diagonal adaptation.
#[derive(Clone, Debug)]
pub struct GradDiag {
    options: GradDiagOptions,
    early_end: u64,
    final_window_start: u64,
    window_size: u64,
    last_update: u64,
    draws: Welford,
    grads: Welford,
    draws_background: Welford,
    grads_background: Welford,
}

impl GradDiag {
    /// Starts from the initial point: returns the adapter and the initial inverse metric
    /// `1 / |∇ log p(x0)|`.
    pub fn new(
        options: GradDiagOptions,
        num_warmup: u64,
        position: &[f64],
        gradient: &[f64],
    ) -> (GradDiag, Vec<f64>) {
        let dim = position.len();
        let step_size_window = (options.step_size_window * num_warmup as f64) as u64;
        let mut adapter = GradDiag {
            options,
            early_end: (options.early_window * num_warmup as f64) as u64,
            final_window_start: num_warmup.saturating_sub(step_size_window),
            window_size: options.switch_freq,
            last_update: 0,
            draws: Welford::new(dim, false),
            grads: Welford::new(dim, false),
            draws_background: Welford::new(dim, false),
            grads_background: Welford::new(dim, false),
        };
        adapter.add(position, gradient);
        let inv_metric = gradient
            .iter()
            .map(|g| {
                let value = 1.0 / g.abs().clamp(CLAMP.0, CLAMP.1);
                if value.is_finite() { value } else { 1.0 }
            })
            .collect();
        (adapter, inv_metric)
    }

    fn add(&mut self, position: &[f64], gradient: &[f64]) {
        self.draws.add(position);
        self.grads.add(gradient);
        self.draws_background.add(position);
        self.grads_background.add(gradient);
    }

    fn switch(&mut self) {
        std::mem::swap(&mut self.draws, &mut self.draws_background);
        std::mem::swap(&mut self.grads, &mut self.grads_background);
        self.draws_background.restart();
        self.grads_background.restart();
    }

    /// Learns from warmup draw `draw` (0-based); `usable` says whether the draw counts (the
    /// chain moved; for a divergent transition, moved more than 4 steps). Updates `inv_metric`
    /// in place when it changes.
    pub fn learn(
        &mut self,
        draw: u64,
        position: &[f64],
        gradient: &[f64],
        usable: bool,
        inv_metric: &mut [f64],
    ) -> GradDiagStep {
        if draw >= self.final_window_start {
            return GradDiagStep {
                changed: false,
                late: true,
                final_window: true,
            };
        }
        let early = draw < self.early_end;
        if !early && draw == self.early_end {
            self.window_size = self.window_size.max(self.draws_background.count());
        }
        let switch_freq = if early {
            self.options.early_switch_freq
        } else {
            self.window_size
        };
        if usable {
            self.add(position, gradient);
        }
        let could_switch = self.draws_background.count() >= switch_freq;
        let next_window_size = if early {
            self.options.early_switch_freq
        } else {
            (self.window_size + 1)
                .max((self.window_size as f64 * self.options.window_growth).round() as u64)
        };
        let late = next_window_size + draw > self.final_window_start;
        let mut force_update = false;
        if could_switch && !late {
            self.switch();
            force_update = true;
            if !early {
                self.window_size = next_window_size;
            }
        }
        let mut changed = false;
        if (force_update || draw - self.last_update >= 1) && self.draws.count() >= 3 {
            for ((m, dv), gv) in inv_metric
                .iter_mut()
                .zip(self.draws.sum_squares())
                .zip(self.grads.sum_squares())
            {
                let value = (dv / gv).sqrt();
                if value.is_finite() && value != 0.0 {
                    *m = value.clamp(CLAMP.0, CLAMP.1);
                }
            }
            changed = true;
            self.last_update = draw;
        }
        GradDiagStep {
            changed,
            late,
            final_window: false,
        }
    }
}
