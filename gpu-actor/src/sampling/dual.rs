//! Dual averaging of one chain's step size on the host, for the fused kernel's driver: the
//! same arithmetic as `ns_dual_average` of `shaders/nuts.wgsl` and sampler's `DualAverage`
//! (Hoffman & Gelman 2014, Algorithm 6; Stan's `stepsize_adaptation.hpp`).

use super::adapt::Search;

const GAMMA: f64 = 0.05;
const T0: f64 = 10.0;
const KAPPA: f64 = 0.75;

/// One chain's dual-averaging state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DualAverage {
    pub target: f64,
    pub max_log_step: f64,
    pub mu: f64,
    pub count: f64,
    pub s_bar: f64,
    pub x: f64,
    pub x_bar: f64,
}

impl DualAverage {
    pub(crate) fn new(target: f64, max_log_step: f64) -> DualAverage {
        DualAverage {
            target,
            max_log_step,
            mu: 0.0,
            count: 0.0,
            s_bar: 0.0,
            x: 0.0,
            x_bar: 0.0,
        }
    }

    /// The state after a step-size search found `eps`, as `nuts_search_main` leaves it:
    /// Stan's start (fresh, mu from the user's step size), Stan's restart, or nutpie's fresh
    /// dual average.
    pub(crate) fn after_search(&mut self, search: Search, eps: f64, first: bool, search_mu: f64) {
        self.mu = (10.0 * eps).ln();
        match (search, first) {
            (Search::Stan, true) => {
                self.x = eps.ln();
                self.x_bar = self.x;
                self.mu = search_mu;
            }
            (Search::Stan, false) => self.x_bar = 0.0,
            (Search::Nutpie, _) => {
                self.x = eps.ln();
                self.x_bar = self.x;
            }
        }
        self.count = 0.0;
        self.s_bar = 0.0;
    }

    /// Learns from one transition's statistic; returns the next step size.
    pub(crate) fn update(&mut self, accept_stat: f64) -> f64 {
        let stat = if accept_stat.is_nan() {
            0.0
        } else {
            accept_stat.min(1.0)
        };
        self.count += 1.0;
        let eta = 1.0 / (self.count + T0);
        self.s_bar = (1.0 - eta) * self.s_bar + eta * (self.target - stat);
        self.x = (self.mu - self.s_bar * self.count.sqrt() / GAMMA).min(self.max_log_step);
        let x_eta = (-KAPPA * self.count.ln()).exp();
        self.x_bar = (1.0 - x_eta) * self.x_bar + x_eta * self.x;
        self.x.exp()
    }

    /// The averaged step size, used after warmup.
    pub(crate) fn averaged(&self) -> f64 {
        self.x_bar.exp()
    }
}
