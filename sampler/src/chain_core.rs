//! The state one chain's transitions and its adaptation share: the density, metric, step
//! size, random stream and current point, with the few settings they read. Adaptation works
//! on this alone, so it is tested without running a chain.

use crate::eval::LogDensity;
use crate::metric::Metric;
use crate::nuts::{self, NutsOptions, Point, TransitionInfo, Workspace};
use crate::rng::{ChainId, ChainRng};

/// The mutable state of a chain shared by the transition and the adaptation.
pub(crate) struct ChainCore<D> {
    pub chain: ChainId,
    /// The step-size adaptation's target acceptance statistic.
    pub target_accept: f64,
    /// The user's initial step size, where Stan's step-size search starts.
    pub initial_step_size: f64,
    /// Each transition's tree depth and divergence threshold.
    pub nuts: NutsOptions,
    pub density: D,
    pub metric: Metric,
    /// Nominal step size (before jitter).
    pub step_size: f64,
    pub jitter: f64,
    pub rng: ChainRng,
    pub current: Point,
    pub workspace: Workspace,
    /// Scratch for leapfrog steps outside transitions (step-size searches).
    pub workspace_velocity: Vec<f64>,
    pub n_grad_evals: u64,
}

impl<D: LogDensity> ChainCore<D> {
    /// One NUTS transition from the current point, with the step size jittered; its
    /// statistics and the step size it used.
    pub(crate) fn transition(&mut self) -> (TransitionInfo, f64) {
        let step_size = if self.jitter > 0.0 {
            self.step_size * (1.0 + self.jitter * (2.0 * self.rng.uniform() - 1.0))
        } else {
            self.step_size
        };
        let info = nuts::transition(
            &mut self.density,
            &self.metric,
            step_size,
            &self.nuts,
            &mut self.rng,
            &mut self.current,
            &mut self.workspace,
        );
        self.n_grad_evals += u64::from(info.n_leapfrog);
        (info, step_size)
    }
}
