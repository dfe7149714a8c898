//! One NUTS transition, as Stan's `base_nuts.hpp` performs it.
//!
//! Multinomial sampling over the trajectory: uniform-progressive merges inside subtrees, biased
//! progressive at the top level; the generalised no-U-turn criterion (Betancourt 2017,
//! arXiv:1701.02434) on every merged subtree, plus Stan's two extra checks across the two halves
//! of each merge; a subtree that U-turns or diverges is never merged. A leaf diverges when its
//! energy exceeds the initial energy by more than `max_energy_error` (1000); a non-finite energy
//! counts as +inf. `accept_stat` is the mean Metropolis probability over every leapfrog built,
//! including rejected subtrees.
//!
//! All vectors live in a [`Workspace`] allocated once per chain (one scratch set per tree
//! depth), so a transition allocates nothing.

use crate::eval::LogDensity;
use crate::metric::Metric;
use crate::rng::ChainRng;
use crate::special::log_sum_exp;

/// A point in phase space with the log density and gradient at its position.
#[derive(Clone, Debug)]
pub struct Point {
    /// Position (unconstrained).
    pub q: Vec<f64>,
    /// Momentum.
    pub p: Vec<f64>,
    /// Gradient of the log density at `q`.
    pub grad: Vec<f64>,
    /// Log density at `q`.
    pub logp: f64,
    /// Signed number of leapfrog steps from the transition's initial point.
    pub index: i64,
}

impl Point {
    /// A point at the origin of a `dim`-dimensional space.
    pub fn new(dim: usize) -> Point {
        Point {
            q: vec![0.0; dim],
            p: vec![0.0; dim],
            grad: vec![0.0; dim],
            logp: 0.0,
            index: 0,
        }
    }

    /// Copies `other` into `self` without allocating.
    pub fn copy_from(&mut self, other: &Point) {
        self.q.copy_from_slice(&other.q);
        self.p.copy_from_slice(&other.p);
        self.grad.copy_from_slice(&other.grad);
        self.logp = other.logp;
        self.index = other.index;
    }
}

/// Tree-building limits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NutsOptions {
    /// Largest number of trajectory doublings.
    pub max_depth: u32,
    /// Energy error beyond which a leapfrog step is divergent.
    pub max_energy_error: f64,
}

/// What one transition did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransitionInfo {
    /// Mean of `min(1, exp(H0 - H))` over all leapfrog steps (Stan's `accept_stat__`).
    pub accept_stat: f64,
    /// Mean of the symmetric statistic `2 / (1 + exp(|H0 - H|))`, 0 for divergent steps
    /// (nutpie's `mean_tree_accept_sym`).
    pub accept_stat_sym: f64,
    /// Number of leapfrog steps (gradient evaluations).
    pub n_leapfrog: u32,
    /// Number of completed doublings (Stan's `treedepth__`).
    pub depth: u32,
    /// Whether a divergence ended the trajectory.
    pub divergent: bool,
    /// Hamiltonian at the selected point (Stan's `energy__`).
    pub energy: f64,
    /// Signed position of the selected point in the trajectory; 0 means the chain did not move.
    pub index_in_trajectory: i64,
}

/// Per-depth scratch of the recursive tree builder.
#[derive(Clone, Debug)]
struct DepthScratch {
    z_propose_final: Point,
    p_init_end: Vec<f64>,
    p_sharp_init_end: Vec<f64>,
    rho_init: Vec<f64>,
    p_final_beg: Vec<f64>,
    p_sharp_final_beg: Vec<f64>,
    rho_final: Vec<f64>,
}

/// Every vector a transition needs, allocated once.
#[derive(Clone, Debug)]
pub struct Workspace {
    z: Point,
    z_fwd: Point,
    z_bck: Point,
    z_sample: Point,
    z_propose: Point,
    p_fwd_fwd: Vec<f64>,
    p_sharp_fwd_fwd: Vec<f64>,
    p_fwd_bck: Vec<f64>,
    p_sharp_fwd_bck: Vec<f64>,
    p_bck_fwd: Vec<f64>,
    p_sharp_bck_fwd: Vec<f64>,
    p_bck_bck: Vec<f64>,
    p_sharp_bck_bck: Vec<f64>,
    rho: Vec<f64>,
    rho_fwd: Vec<f64>,
    rho_bck: Vec<f64>,
    velocity: Vec<f64>,
    scratch: Vec<DepthScratch>,
}

impl Workspace {
    /// Buffers for a `dim`-dimensional model and trees up to `max_depth`.
    pub fn new(dim: usize, max_depth: u32) -> Workspace {
        let v = || vec![0.0; dim];
        Workspace {
            z: Point::new(dim),
            z_fwd: Point::new(dim),
            z_bck: Point::new(dim),
            z_sample: Point::new(dim),
            z_propose: Point::new(dim),
            p_fwd_fwd: v(),
            p_sharp_fwd_fwd: v(),
            p_fwd_bck: v(),
            p_sharp_fwd_bck: v(),
            p_bck_fwd: v(),
            p_sharp_bck_fwd: v(),
            p_bck_bck: v(),
            p_sharp_bck_bck: v(),
            rho: v(),
            rho_fwd: v(),
            rho_bck: v(),
            velocity: v(),
            scratch: (0..=max_depth)
                .map(|_| DepthScratch {
                    z_propose_final: Point::new(dim),
                    p_init_end: v(),
                    p_sharp_init_end: v(),
                    rho_init: v(),
                    p_final_beg: v(),
                    p_sharp_final_beg: v(),
                    rho_final: v(),
                })
                .collect(),
        }
    }
}

/// Evaluates the log density and gradient at `point.q`.
pub fn evaluate<D: LogDensity>(density: &mut D, point: &mut Point) {
    point.logp = density.logp_grad(&point.q, &mut point.grad);
}

/// The Hamiltonian `-log p(q) + tau(p)`, with NaN mapped to +inf.
fn hamiltonian(metric: &Metric, point: &Point) -> f64 {
    let h = -point.logp + metric.kinetic_energy(&point.p);
    if h.is_nan() { f64::INFINITY } else { h }
}

/// One leapfrog step of signed size `eps` (Stan's `expl_leapfrog`).
pub fn leapfrog<D: LogDensity>(
    density: &mut D,
    metric: &Metric,
    point: &mut Point,
    eps: f64,
    velocity: &mut [f64],
) {
    let half = 0.5 * eps;
    for (p, g) in point.p.iter_mut().zip(&point.grad) {
        *p += half * g;
    }
    metric.velocity(&point.p, velocity);
    for (q, v) in point.q.iter_mut().zip(velocity.iter()) {
        *q += eps * v;
    }
    evaluate(density, point);
    for (p, g) in point.p.iter_mut().zip(&point.grad) {
        *p += half * g;
    }
    point.index += if eps > 0.0 { 1 } else { -1 };
}

/// `a · (r1 + r2)` without materialising the sum.
fn dot_sum(a: &[f64], r1: &[f64], r2: &[f64]) -> f64 {
    a.iter()
        .zip(r1.iter().zip(r2))
        .map(|(a, (x, y))| a * (x + y))
        .sum()
}

/// The generalised no-U-turn criterion for the trajectory whose momentum sum is `r1 + r2`:
/// the trajectory may continue.
fn criterion_sum(p_sharp_minus: &[f64], p_sharp_plus: &[f64], r1: &[f64], r2: &[f64]) -> bool {
    dot_sum(p_sharp_plus, r1, r2) > 0.0 && dot_sum(p_sharp_minus, r1, r2) > 0.0
}

fn add_into(acc: &mut [f64], x: &[f64]) {
    acc.iter_mut().zip(x).for_each(|(a, x)| *a += x);
}

struct Tree<'a, D> {
    density: &'a mut D,
    metric: &'a Metric,
    rng: &'a mut ChainRng,
    step_size: f64,
    h0: f64,
    max_energy_error: f64,
    z: &'a mut Point,
    velocity: &'a mut [f64],
    n_leapfrog: u32,
    sum_metro_prob: f64,
    sum_sym_prob: f64,
    divergent: bool,
}

impl<D: LogDensity> Tree<'_, D> {
    /// Stan's `build_tree`: extends the trajectory from `self.z` by `2^depth` steps.
    #[allow(clippy::too_many_arguments)]
    fn build(
        &mut self,
        depth: u32,
        scratch: &mut [DepthScratch],
        z_propose: &mut Point,
        p_sharp_beg: &mut [f64],
        p_sharp_end: &mut [f64],
        rho: &mut [f64],
        p_beg: &mut [f64],
        p_end: &mut [f64],
        log_sum_weight: &mut f64,
        sign: f64,
    ) -> bool {
        if depth == 0 {
            leapfrog(
                self.density,
                self.metric,
                self.z,
                sign * self.step_size,
                self.velocity,
            );
            self.n_leapfrog += 1;
            let h = hamiltonian(self.metric, self.z);
            if h - self.h0 > self.max_energy_error {
                self.divergent = true;
            }
            let delta = self.h0 - h;
            *log_sum_weight = log_sum_exp(*log_sum_weight, delta);
            self.sum_metro_prob += if delta > 0.0 { 1.0 } else { delta.exp() };
            if !self.divergent {
                self.sum_sym_prob += 2.0 / (1.0 + delta.abs().exp());
            }
            z_propose.copy_from(self.z);
            self.metric.velocity(&self.z.p, p_sharp_beg);
            p_sharp_end.copy_from_slice(p_sharp_beg);
            add_into(rho, &self.z.p);
            p_beg.copy_from_slice(&self.z.p);
            p_end.copy_from_slice(&self.z.p);
            return !self.divergent;
        }

        let Some((s, deeper)) = scratch.split_first_mut() else {
            return false;
        };

        // The initial subtree.
        let mut log_sum_weight_init = f64::NEG_INFINITY;
        s.rho_init.fill(0.0);
        let valid_init = self.build(
            depth - 1,
            deeper,
            z_propose,
            p_sharp_beg,
            &mut s.p_sharp_init_end,
            &mut s.rho_init,
            p_beg,
            &mut s.p_init_end,
            &mut log_sum_weight_init,
            sign,
        );
        if !valid_init {
            return false;
        }

        // The final subtree.
        s.z_propose_final.copy_from(self.z);
        let mut log_sum_weight_final = f64::NEG_INFINITY;
        s.rho_final.fill(0.0);
        let valid_final = self.build(
            depth - 1,
            deeper,
            &mut s.z_propose_final,
            &mut s.p_sharp_final_beg,
            p_sharp_end,
            &mut s.rho_final,
            &mut s.p_final_beg,
            p_end,
            &mut log_sum_weight_final,
            sign,
        );
        if !valid_final {
            return false;
        }

        // Multinomial sample from the merged subtree: uniform-progressive.
        let log_sum_weight_subtree = log_sum_exp(log_sum_weight_init, log_sum_weight_final);
        *log_sum_weight = log_sum_exp(*log_sum_weight, log_sum_weight_subtree);
        if log_sum_weight_final > log_sum_weight_subtree {
            z_propose.copy_from(&s.z_propose_final);
        } else {
            let accept_prob = (log_sum_weight_final - log_sum_weight_subtree).exp();
            if self.rng.uniform() < accept_prob {
                z_propose.copy_from(&s.z_propose_final);
            }
        }

        // U-turn across the merged subtree and between its halves.
        let persist = criterion_sum(p_sharp_beg, p_sharp_end, &s.rho_init, &s.rho_final)
            && criterion_sum(
                p_sharp_beg,
                &s.p_sharp_final_beg,
                &s.rho_init,
                &s.p_final_beg,
            )
            && criterion_sum(
                &s.p_sharp_init_end,
                p_sharp_end,
                &s.rho_final,
                &s.p_init_end,
            );
        add_into(rho, &s.rho_init);
        add_into(rho, &s.rho_final);
        persist
    }
}

/// Runs one NUTS transition from `current` (position, gradient and log density set); on
/// return `current` holds the selected point. `workspace` must match the dimension and depth.
#[allow(clippy::too_many_arguments)]
pub fn transition<D: LogDensity>(
    density: &mut D,
    metric: &Metric,
    step_size: f64,
    options: &NutsOptions,
    rng: &mut ChainRng,
    current: &mut Point,
    workspace: &mut Workspace,
) -> TransitionInfo {
    let Workspace {
        z,
        z_fwd,
        z_bck,
        z_sample,
        z_propose,
        p_fwd_fwd,
        p_sharp_fwd_fwd,
        p_fwd_bck,
        p_sharp_fwd_bck,
        p_bck_fwd,
        p_sharp_bck_fwd,
        p_bck_bck,
        p_sharp_bck_bck,
        rho,
        rho_fwd,
        rho_bck,
        velocity,
        scratch,
    } = workspace;

    current.index = 0;
    metric.sample_momentum(rng, &mut current.p);
    z.copy_from(current);
    z_fwd.copy_from(z);
    z_bck.copy_from(z);
    z_sample.copy_from(z);
    z_propose.copy_from(z);

    p_fwd_fwd.copy_from_slice(&z.p);
    metric.velocity(&z.p, p_sharp_fwd_fwd);
    p_fwd_bck.copy_from_slice(&z.p);
    p_sharp_fwd_bck.copy_from_slice(p_sharp_fwd_fwd);
    p_bck_fwd.copy_from_slice(&z.p);
    p_sharp_bck_fwd.copy_from_slice(p_sharp_fwd_fwd);
    p_bck_bck.copy_from_slice(&z.p);
    p_sharp_bck_bck.copy_from_slice(p_sharp_fwd_fwd);
    rho.copy_from_slice(&z.p);

    let h0 = hamiltonian(metric, z);
    let mut log_sum_weight = 0.0; // log(exp(H0 - H0))
    let mut depth = 0;
    let mut tree = Tree {
        density,
        metric,
        rng,
        step_size,
        h0,
        max_energy_error: options.max_energy_error,
        z,
        velocity,
        n_leapfrog: 0,
        sum_metro_prob: 0.0,
        sum_sym_prob: 0.0,
        divergent: false,
    };

    while depth < options.max_depth {
        rho_fwd.fill(0.0);
        rho_bck.fill(0.0);
        let mut log_sum_weight_subtree = f64::NEG_INFINITY;
        let valid_subtree = if tree.rng.uniform() > 0.5 {
            // Extend forward: the existing trajectory becomes the backward part, and its
            // forward end the backward part's inner end.
            tree.z.copy_from(z_fwd);
            rho_bck.copy_from_slice(rho);
            p_bck_fwd.copy_from_slice(p_fwd_fwd);
            p_sharp_bck_fwd.copy_from_slice(p_sharp_fwd_fwd);
            let valid = tree.build(
                depth,
                scratch,
                z_propose,
                p_sharp_fwd_bck,
                p_sharp_fwd_fwd,
                rho_fwd,
                p_fwd_bck,
                p_fwd_fwd,
                &mut log_sum_weight_subtree,
                1.0,
            );
            z_fwd.copy_from(tree.z);
            valid
        } else {
            // Extend backward: the existing trajectory becomes the forward part, and its
            // backward end the forward part's inner end.
            tree.z.copy_from(z_bck);
            rho_fwd.copy_from_slice(rho);
            p_fwd_bck.copy_from_slice(p_bck_bck);
            p_sharp_fwd_bck.copy_from_slice(p_sharp_bck_bck);
            let valid = tree.build(
                depth,
                scratch,
                z_propose,
                p_sharp_bck_fwd,
                p_sharp_bck_bck,
                rho_bck,
                p_bck_fwd,
                p_bck_bck,
                &mut log_sum_weight_subtree,
                -1.0,
            );
            z_bck.copy_from(tree.z);
            valid
        };
        if !valid_subtree {
            break;
        }
        depth += 1;

        // Biased progressive sampling at the top level.
        if log_sum_weight_subtree > log_sum_weight {
            z_sample.copy_from(z_propose);
        } else {
            let accept_prob = (log_sum_weight_subtree - log_sum_weight).exp();
            if tree.rng.uniform() < accept_prob {
                z_sample.copy_from(z_propose);
            }
        }
        log_sum_weight = log_sum_exp(log_sum_weight, log_sum_weight_subtree);

        // U-turn over the whole trajectory and between the old and new parts.
        let persist = criterion_sum(p_sharp_bck_bck, p_sharp_fwd_fwd, rho_bck, rho_fwd)
            && criterion_sum(p_sharp_bck_bck, p_sharp_fwd_bck, rho_bck, p_fwd_bck)
            && criterion_sum(p_sharp_bck_fwd, p_sharp_fwd_fwd, rho_fwd, p_bck_fwd);
        for ((r, b), f) in rho.iter_mut().zip(rho_bck.iter()).zip(rho_fwd.iter()) {
            *r = b + f;
        }
        if !persist {
            break;
        }
    }

    let n_leapfrog = tree.n_leapfrog;
    let divergent = tree.divergent;
    let accept_stat = tree.sum_metro_prob / f64::from(n_leapfrog.max(1));
    let accept_stat_sym = tree.sum_sym_prob / f64::from(n_leapfrog.max(1));
    current.copy_from(z_sample);
    TransitionInfo {
        accept_stat,
        accept_stat_sym,
        n_leapfrog,
        depth,
        divergent,
        energy: hamiltonian(metric, current),
        index_in_trajectory: current.index,
    }
}

#[cfg(test)]
mod tests;
