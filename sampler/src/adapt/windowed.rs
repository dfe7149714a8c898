//! Stan's windowed metric adaptation (`windowed_adaptation.hpp`, `var_adaptation.hpp`,
//! `covar_adaptation.hpp`): a step-size-only initial buffer, doubling slow windows that estimate
//! the (co)variance of the draws, and a step-size-only terminal buffer.

/// Window sizes, in warmup iterations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowOptions {
    /// Iterations before the first slow window (75).
    pub init_buffer: u64,
    /// Size of the first slow window (25); each next one doubles.
    pub base_window: u64,
    /// Iterations after the last slow window (50).
    pub term_buffer: u64,
}

impl Default for WindowOptions {
    fn default() -> WindowOptions {
        WindowOptions {
            init_buffer: 75,
            base_window: 25,
            term_buffer: 50,
        }
    }
}

/// The window schedule over `num_warmup` iterations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windows {
    num_warmup: u64,
    init_buffer: u64,
    term_buffer: u64,
    window_size: u64,
    next_window_end: u64,
    counter: u64,
    enabled: bool,
}

impl Windows {
    /// Stan's `set_window_params`: with fewer than 20 iterations the metric is not adapted; when
    /// the buffers do not fit, they become 15% / 75% / 10% of warmup.
    pub fn new(num_warmup: u64, options: WindowOptions) -> Windows {
        let (init_buffer, term_buffer, base_window) =
            if options.init_buffer + options.base_window + options.term_buffer > num_warmup {
                let init = (0.15 * num_warmup as f64) as u64;
                let term = (0.1 * num_warmup as f64) as u64;
                (init, term, num_warmup.saturating_sub(init + term))
            } else {
                (
                    options.init_buffer,
                    options.term_buffer,
                    options.base_window,
                )
            };
        Windows {
            num_warmup,
            init_buffer,
            term_buffer,
            window_size: base_window,
            next_window_end: (init_buffer + base_window).saturating_sub(1),
            counter: 0,
            enabled: num_warmup >= 20,
        }
    }

    /// Whether the current iteration's draw feeds the estimator.
    pub fn in_window(&self) -> bool {
        self.enabled
            && self.counter >= self.init_buffer
            && self.counter < self.num_warmup - self.term_buffer
            && self.counter != self.num_warmup
    }

    /// The iteration that ends the current slow window, if the metric is adapted at all.
    pub fn next_window_end(&self) -> Option<u64> {
        self.enabled.then_some(self.next_window_end)
    }

    /// Whether the current iteration ends a slow window.
    pub fn at_window_end(&self) -> bool {
        self.enabled && self.counter == self.next_window_end && self.counter != self.num_warmup
    }

    fn compute_next_window(&mut self) {
        let last_end = self.num_warmup - self.term_buffer - 1;
        if self.next_window_end == last_end {
            return;
        }
        self.window_size *= 2;
        self.next_window_end = self.counter + self.window_size;
        if self.next_window_end != last_end {
            let next_boundary = self.next_window_end + 2 * self.window_size;
            if next_boundary >= self.num_warmup - self.term_buffer {
                self.next_window_end = last_end;
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn advance_for_test(&mut self) -> bool {
        self.advance()
    }

    /// Moves to the next iteration; returns whether a window just ended (call after reading
    /// [`Windows::in_window`] and [`Windows::at_window_end`] for this iteration).
    fn advance(&mut self) -> bool {
        let ended = self.at_window_end();
        if ended {
            self.compute_next_window();
        }
        self.counter += 1;
        ended
    }
}

/// Welford's running mean and (co)variance.
#[derive(Clone, Debug, PartialEq)]
pub struct Welford {
    dim: usize,
    dense: bool,
    count: u64,
    mean: Vec<f64>,
    /// Sum of squared deviations: the diagonal, or the full matrix row-major.
    m2: Vec<f64>,
    delta: Vec<f64>,
}

impl Welford {
    /// An empty estimator of a diagonal (`dense = false`) or full covariance.
    pub fn new(dim: usize, dense: bool) -> Welford {
        Welford {
            dim,
            dense,
            count: 0,
            mean: vec![0.0; dim],
            m2: vec![0.0; if dense { dim * dim } else { dim }],
            delta: vec![0.0; dim],
        }
    }

    /// A diagonal estimator that has seen `count` samples with mean `mean` and sums of squared
    /// deviations `m2` (moments computed elsewhere, to be merged).
    pub fn from_moments(count: u64, mean: Vec<f64>, m2: Vec<f64>) -> Welford {
        assert_eq!(
            mean.len(),
            m2.len(),
            "mean and m2 must have the same length"
        );
        Welford {
            dim: mean.len(),
            dense: false,
            count,
            delta: vec![0.0; mean.len()],
            mean,
            m2,
        }
    }

    /// Adds `count` samples of a diagonal estimator whose means and sums of squared
    /// deviations are `moments` (`(mean, m2)` per coordinate), without building an estimator
    /// of them: [`Welford::merge`]'s diagonal case.
    pub fn merge_moments(&mut self, count: u64, moments: impl IntoIterator<Item = (f64, f64)>) {
        debug_assert!(!self.dense);
        if count == 0 {
            return;
        }
        if self.count == 0 {
            for ((mean, m2), (mean_b, m2_b)) in self.mean.iter_mut().zip(&mut self.m2).zip(moments)
            {
                *mean = mean_b;
                *m2 = m2_b;
            }
            self.count = count;
            return;
        }
        let (na, nb) = (self.count as f64, count as f64);
        let n = na + nb;
        let weight = na * nb / n;
        for ((mean, m2), (mean_b, m2_b)) in self.mean.iter_mut().zip(&mut self.m2).zip(moments) {
            let delta = mean_b - *mean;
            *m2 += m2_b + delta * delta * weight;
            *mean += delta * (nb / n);
        }
        self.count += count;
    }

    /// Forgets every sample.
    pub fn restart(&mut self) {
        self.count = 0;
        self.mean.fill(0.0);
        self.m2.fill(0.0);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds one sample.
    pub fn add(&mut self, x: &[f64]) {
        self.count += 1;
        let n = self.count as f64;
        for ((delta, mean), &x) in self.delta.iter_mut().zip(&mut self.mean).zip(x) {
            *delta = x - *mean;
            *mean += *delta / n;
        }
        if self.dense {
            let d = self.dim;
            for (i, (&x, mean)) in x.iter().zip(&self.mean).enumerate() {
                let after_i = x - mean;
                for (m2, delta) in self.m2[i * d..(i + 1) * d].iter_mut().zip(&self.delta) {
                    *m2 += after_i * delta;
                }
            }
        } else {
            for ((m2, delta), (&x, mean)) in self
                .m2
                .iter_mut()
                .zip(&self.delta)
                .zip(x.iter().zip(&self.mean))
            {
                *m2 += delta * (x - mean);
            }
        }
    }

    /// The mean of the samples.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The sum of squared deviations (diagonal or full); divide by `count - 1` for the variance.
    pub fn sum_squares(&self) -> &[f64] {
        &self.m2
    }

    /// Adds every sample `other` has seen (Chan, Golub & LeVeque's pairwise update): the same
    /// estimate as adding them one by one, up to rounding. Both must have the same shape.
    pub fn merge(&mut self, other: &Welford) {
        debug_assert!(self.dim == other.dim && self.dense == other.dense);
        if other.count == 0 {
            return;
        }
        if !self.dense {
            let moments = other.mean.iter().copied().zip(other.m2.iter().copied());
            self.merge_moments(other.count, moments);
            return;
        }
        if self.count == 0 {
            self.clone_from(other);
            return;
        }
        let (na, nb) = (self.count as f64, other.count as f64);
        let n = na + nb;
        for ((delta, mean), &mean_b) in self.delta.iter_mut().zip(&self.mean).zip(&other.mean) {
            *delta = mean_b - mean;
        }
        let weight = na * nb / n;
        let d = self.dim;
        for (k, (m2, m2_b)) in self.m2.iter_mut().zip(&other.m2).enumerate() {
            *m2 += m2_b + self.delta[k / d] * self.delta[k % d] * weight;
        }
        for (mean, delta) in self.mean.iter_mut().zip(&self.delta) {
            *mean += delta * (nb / n);
        }
        self.count += other.count;
    }
}

/// Stan's metric learner: feeds draws through the windows and, at each window end, returns
/// the regularised estimate `(n / (n + 5)) Σ + 1e-3 (5 / (n + 5)) I`.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowedMetric {
    windows: Windows,
    estimator: Welford,
}

impl WindowedMetric {
    /// The iteration that ends the current slow window, if the metric is adapted at all.
    pub fn next_window_end(&self) -> Option<u64> {
        self.windows.next_window_end()
    }

    /// A learner for `num_warmup` iterations in `dim` dimensions.
    pub fn new(num_warmup: u64, options: WindowOptions, dim: usize, dense: bool) -> WindowedMetric {
        WindowedMetric {
            windows: Windows::new(num_warmup, options),
            estimator: Welford::new(dim, dense),
        }
    }

    /// Learns from the draw of one warmup iteration; returns a new inverse metric (diagonal or
    /// row-major dense) when a window ended.
    pub fn learn(&mut self, q: &[f64]) -> Option<Vec<f64>> {
        self.learn_with(|estimator| estimator.add(q))
    }

    /// Learns from one warmup iteration whose draws `add` puts into the estimator (several
    /// chains' draws pooled, for example), as [`WindowedMetric::learn`] does with one.
    pub fn learn_with(&mut self, add: impl FnOnce(&mut Welford)) -> Option<Vec<f64>> {
        if self.windows.in_window() {
            add(&mut self.estimator);
        }
        if !self.windows.advance() {
            return None;
        }
        let n = self.estimator.count() as f64;
        let dim = self.estimator.dim;
        let mut metric: Vec<f64> = self
            .estimator
            .sum_squares()
            .iter()
            .map(|s| s / (n - 1.0))
            .collect();
        let weight = n / (n + 5.0);
        let shrink = 1e-3 * (5.0 / (n + 5.0));
        for (k, value) in metric.iter_mut().enumerate() {
            let on_diagonal = !self.estimator.dense || k / dim == k % dim;
            *value = weight * *value + if on_diagonal { shrink } else { 0.0 };
        }
        self.estimator.restart();
        Some(metric)
    }
}
