//! Dual-averaging step-size adaptation (Hoffman & Gelman 2014, Algorithm 6; Stan's
//! `stepsize_adaptation.hpp`), with nutpie's optional cap on the step size.

/// Dual-averaging settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualAverageOptions {
    /// Target acceptance statistic (delta).
    pub target: f64,
    /// Shrinkage (gamma).
    pub gamma: f64,
    /// Iteration offset (t0).
    pub t0: f64,
    /// Decay of the averaging weights (kappa).
    pub kappa: f64,
}

impl Default for DualAverageOptions {
    fn default() -> DualAverageOptions {
        DualAverageOptions {
            target: 0.8,
            gamma: 0.05,
            t0: 10.0,
            kappa: 0.75,
        }
    }
}

/// The dual-averaging state.
#[derive(Clone, Debug, PartialEq)]
pub struct DualAverage {
    options: DualAverageOptions,
    /// Log of the largest step size allowed (nutpie caps at π; Stan has no cap).
    max_log_step: f64,
    mu: f64,
    counter: f64,
    s_bar: f64,
    x: f64,
    x_bar: f64,
}

impl DualAverage {
    /// A fresh state shrinking towards `mu = log(10 * step_size)`.
    pub fn new(options: DualAverageOptions, step_size: f64, max_step_size: f64) -> DualAverage {
        DualAverage {
            options,
            max_log_step: max_step_size.ln(),
            mu: (10.0 * step_size).ln(),
            counter: 0.0,
            s_bar: 0.0,
            x: step_size.ln(),
            x_bar: step_size.ln(),
        }
    }

    /// The settings this state was made with.
    pub fn options(&self) -> DualAverageOptions {
        self.options
    }

    /// Stan's `set_mu`.
    pub fn set_mu(&mut self, mu: f64) {
        self.mu = mu;
    }

    /// Stan's `restart`: forgets the history, keeps `mu`.
    pub fn restart(&mut self) {
        self.counter = 0.0;
        self.s_bar = 0.0;
        self.x_bar = 0.0;
    }

    /// Learns from one transition's acceptance statistic; returns the next step size.
    pub fn update(&mut self, accept_stat: f64) -> f64 {
        let accept_stat = if accept_stat.is_nan() {
            0.0
        } else {
            accept_stat.min(1.0)
        };
        self.counter += 1.0;
        let eta = 1.0 / (self.counter + self.options.t0);
        self.s_bar = (1.0 - eta) * self.s_bar + eta * (self.options.target - accept_stat);
        self.x = (self.mu - self.s_bar * self.counter.sqrt() / self.options.gamma)
            .min(self.max_log_step);
        let x_eta = self.counter.powf(-self.options.kappa);
        self.x_bar = (1.0 - x_eta) * self.x_bar + x_eta * self.x;
        self.x.exp()
    }

    /// The current (exploring) step size.
    pub fn current(&self) -> f64 {
        self.x.exp()
    }

    /// The averaged step size, used after warmup.
    pub fn averaged(&self) -> f64 {
        self.x_bar.exp()
    }
}
