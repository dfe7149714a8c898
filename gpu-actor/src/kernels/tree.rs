//! One chain's iterative NUTS transition on the CPU, fed one leapfrog leaf at a time: the
//! tree builder of the fused kernel's driver, and the CPU twin of `shaders/nuts.wgsl`.
//!
//! The algorithm is `nuts.wgsl`'s, line for line (see its header): Stan's transition
//! (`base_nuts.hpp`; Hoffman & Gelman 2014; Betancourt 2017) built iteratively with
//! O(max_depth · d) checkpoints (Phan et al. 2019; Lao et al. 2020), progressive multinomial
//! sampling inside subtrees, Stan's biased progressive sampling at the top, and every U-turn
//! check Stan's recursion makes, in Stan's order. Random numbers are Philox's, named as in the
//! kernel, so the builder needs no generator state. Everything is f64, whatever precision the
//! leaves were computed in.
//!
//! The builder never integrates: [`Tree::growing_end`] says from which point and in which
//! direction it needs the next leaf, and [`Tree::push_leaf`] takes it. So the same code runs
//! on leaves from the GPU (the fused driver) and from a CPU leapfrog (tests against
//! `sampler::nuts`).

use sampler::nuts::TransitionInfo;

use super::philox::{ChainStream, Purpose};

/// The end of the trajectory a subtree grows from: 0 forward, 1 backward.
pub(crate) type End = usize;

/// A phase-space point at one end of the trajectory.
#[derive(Clone, Debug)]
struct EndPoint {
    q: Vec<f64>,
    p: Vec<f64>,
    g: Vec<f64>,
    logp: f64,
    index: i64,
}

/// A candidate point: the subtree's proposal or the transition's sample.
#[derive(Clone, Debug)]
struct Candidate {
    q: Vec<f64>,
    g: Vec<f64>,
    logp: f64,
    energy: f64,
    index: i64,
}

/// A leaf made by one leapfrog step from [`Tree::growing_end`]: position, momentum, and the
/// log density and gradient at that position.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Leaf<'a> {
    pub q: &'a [f64],
    pub p: &'a [f64],
    pub g: &'a [f64],
    pub logp: f64,
}

/// The iterative NUTS state of one chain.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    dim: usize,
    max_depth: u32,
    max_energy_error: f64,
    ends: [EndPoint; 2],
    proposal: Candidate,
    sample: Candidate,
    rho_old: Vec<f64>,
    rho_new: Vec<f64>,
    /// Stan's junction momenta: the old trajectory's end on the side each subtree grows
    /// (see `start_subtree`).
    junction: [Vec<f64>; 2],
    p_start: Vec<Vec<f64>>,
    rsum: Vec<Vec<f64>>,
    p_end: Vec<Vec<f64>>,
    h0: f64,
    lsw: f64,
    lsw_sub: f64,
    sum_metro: f64,
    sum_sym: f64,
    eps: f64,
    iteration: u32,
    depth: u32,
    leaf: u32,
    end: End,
    n_leapfrog: u32,
    divergent: bool,
    active: bool,
}

fn energy(logp: f64, kinetic: f64) -> f64 {
    let h = -logp + kinetic;
    if h.is_finite() { h } else { f64::INFINITY }
}

fn kinetic(minv: &[f64], p: &[f64]) -> f64 {
    0.5 * minv.iter().zip(p).map(|(m, p)| m * p * p).sum::<f64>()
}

impl Tree {
    /// A builder for `dim` coordinates and trees of up to `max_depth` doublings.
    pub(crate) fn new(dim: usize, max_depth: u32, max_energy_error: f64) -> Tree {
        let v = || vec![0.0; dim];
        let end = || EndPoint {
            q: v(),
            p: v(),
            g: v(),
            logp: 0.0,
            index: 0,
        };
        let candidate = || Candidate {
            q: v(),
            g: v(),
            logp: 0.0,
            energy: 0.0,
            index: 0,
        };
        let slots = max_depth as usize + 1;
        Tree {
            dim,
            max_depth,
            max_energy_error,
            ends: [end(), end()],
            proposal: candidate(),
            sample: candidate(),
            rho_old: v(),
            rho_new: v(),
            junction: [v(), v()],
            p_start: vec![v(); slots],
            rsum: vec![v(); slots],
            p_end: vec![v(); slots],
            h0: 0.0,
            lsw: 0.0,
            lsw_sub: f64::NEG_INFINITY,
            sum_metro: 0.0,
            sum_sym: 0.0,
            eps: 0.0,
            iteration: 0,
            depth: 0,
            leaf: 0,
            end: 0,
            n_leapfrog: 0,
            divergent: false,
            active: false,
        }
    }

    /// Sets the chain's current point (between transitions).
    pub(crate) fn set_point(&mut self, q: &[f64], g: &[f64], logp: f64) {
        self.sample.q.copy_from_slice(q);
        self.sample.g.copy_from_slice(g);
        self.sample.logp = logp;
    }

    /// The chain's current point: position, gradient, log density.
    pub(crate) fn point(&self) -> (&[f64], &[f64], f64) {
        (&self.sample.q, &self.sample.g, self.sample.logp)
    }

    /// The step size of the current (or last) transition, jitter included.
    pub(crate) fn eps(&self) -> f64 {
        self.eps
    }

    /// Whether a transition is under way.
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    /// Starts transition `iteration` with step size `eps` (jitter applied) from the current
    /// point: a fresh momentum, both ends at the point, and the first subtree.
    pub(crate) fn begin(&mut self, stream: &ChainStream, iteration: u32, eps: f64, minv: &[f64]) {
        self.iteration = iteration;
        self.eps = eps;
        let p = &mut self.ends[0].p;
        for block in 0..self.dim.div_ceil(2) {
            let (a, b) = stream.momentum_pair(iteration, block as u32);
            let j = 2 * block;
            p[j] = a / minv[j].sqrt();
            if j + 1 < self.dim {
                p[j + 1] = b / minv[j + 1].sqrt();
            }
        }
        let kin = kinetic(minv, &self.ends[0].p);
        let p0 = self.ends[0].p.clone();
        for end in &mut self.ends {
            end.q.copy_from_slice(&self.sample.q);
            end.g.copy_from_slice(&self.sample.g);
            end.p.copy_from_slice(&p0);
            end.logp = self.sample.logp;
            end.index = 0;
        }
        self.rho_old.copy_from_slice(&p0);
        self.junction[0].copy_from_slice(&p0);
        self.junction[1].copy_from_slice(&p0);
        self.h0 = energy(self.sample.logp, kin);
        self.sample.energy = self.h0;
        self.sample.index = 0;
        self.lsw = 0.0;
        self.depth = 0;
        self.n_leapfrog = 0;
        self.divergent = false;
        self.sum_metro = 0.0;
        self.sum_sym = 0.0;
        self.active = true;
        self.start_subtree(stream);
    }

    fn start_subtree(&mut self, stream: &ChainStream) {
        let u = stream.uniform(self.iteration, Purpose::Direction, self.depth);
        self.end = if u > 0.5 { 0 } else { 1 };
        // Stan's junction momentum on the growing side: the old trajectory's end there
        // (base_nuts.hpp: `p_bck_fwd = p_fwd_fwd` before a forward subtree).
        self.junction[self.end].copy_from_slice(&self.ends[self.end].p);
        self.rho_new.fill(0.0);
        self.lsw_sub = f64::NEG_INFINITY;
        self.leaf = 0;
    }

    /// Where the next leaf grows from: the end's index, its position, momentum and gradient,
    /// and the signed step size.
    pub(crate) fn growing_end(&self) -> (End, &[f64], &[f64], &[f64], f64) {
        let end = &self.ends[self.end];
        let eps = if self.end == 0 { self.eps } else { -self.eps };
        (self.end, &end.q, &end.p, &end.g, eps)
    }

    /// Takes the leaf made by one leapfrog step from [`Tree::growing_end`]. Returns the
    /// transition's statistics when it ends; the new current point is then [`Tree::point`].
    pub(crate) fn push_leaf(
        &mut self,
        leaf: Leaf<'_>,
        stream: &ChainStream,
        minv: &[f64],
    ) -> Option<TransitionInfo> {
        let n = self.leaf;
        let end = self.end;
        {
            let e = &mut self.ends[end];
            e.q.copy_from_slice(leaf.q);
            e.p.copy_from_slice(leaf.p);
            e.g.copy_from_slice(leaf.g);
            e.logp = leaf.logp;
            e.index += if end == 0 { 1 } else { -1 };
        }
        let slot_start = n.count_ones() as usize;
        for (j, &p) in leaf.p.iter().enumerate() {
            let rho_before = self.rho_new[j];
            self.rho_new[j] = rho_before + p;
            if n.is_multiple_of(2) {
                self.p_start[slot_start][j] = p;
                self.rsum[slot_start][j] = rho_before;
                self.p_end[slot_start][j] = p;
            }
        }
        self.n_leapfrog += 1;
        let h = energy(leaf.logp, kinetic(minv, leaf.p));
        let delta = self.h0 - h;
        self.lsw_sub = sampler::log_sum_exp(self.lsw_sub, delta);
        self.sum_metro += if delta > 0.0 { 1.0 } else { delta.exp() };
        if h - self.h0 > self.max_energy_error {
            self.divergent = true;
            return Some(self.finish());
        }
        self.sum_sym += 2.0 / (1.0 + delta.abs().exp());

        let u = stream.uniform(self.iteration, Purpose::Leaf, self.n_leapfrog);
        if u < (delta - self.lsw_sub).exp() {
            let e = &self.ends[end];
            self.proposal.q.copy_from_slice(&e.q);
            self.proposal.g.copy_from_slice(&e.g);
            self.proposal.logp = e.logp;
            self.proposal.energy = h;
            self.proposal.index = e.index;
        }

        let merges = (n + 1).trailing_zeros();
        for j in 0..merges {
            if !self.merge_persists(n, j, minv, j + 1 == merges) {
                return Some(self.finish());
            }
        }
        self.leaf = n + 1;
        if self.leaf == 1 << self.depth {
            return self.top_merge(stream, minv);
        }
        None
    }

    /// `nuts.wgsl`'s `ns_merge_persists`: Stan's checks when leaf `n` ends a merge of two
    /// halves of `2^j` leaves.
    fn merge_persists(&mut self, n: u32, j: u32, minv: &[f64], record_end: bool) -> bool {
        let a = n + 1 - (2 << j);
        let slot_a = a.count_ones() as usize;
        let slot_m = slot_a + 1;
        let extra = j > 0;
        let p_n = &self.ends[self.end].p;
        let mut sums = [0.0f64; 6];
        for i in 0..self.dim {
            let m = minv[i];
            let p_a = self.p_start[slot_a][i];
            let rsum_a = self.rsum[slot_a][i];
            let rho = self.rho_new[i];
            let rho_full = rho - rsum_a;
            sums[0] += m * p_a * rho_full;
            sums[1] += m * p_n[i] * rho_full;
            if !extra && record_end {
                self.p_end[slot_a][i] = p_n[i];
            }
            if extra {
                let p_m = self.p_start[slot_m][i];
                let rsum_m = self.rsum[slot_m][i];
                let p_a_end = self.p_end[slot_a][i];
                if record_end {
                    self.p_end[slot_a][i] = p_n[i];
                }
                let rho_left = rsum_m - rsum_a + p_m;
                sums[2] += m * p_a * rho_left;
                sums[3] += m * p_m * rho_left;
                let rho_right = rho - rsum_m + p_a_end;
                sums[4] += m * p_a_end * rho_right;
                sums[5] += m * p_n[i] * rho_right;
            }
        }
        let checked = if extra { 6 } else { 2 };
        sums[..checked].iter().all(|&s| s > 0.0)
    }

    fn top_merge(&mut self, stream: &ChainStream, minv: &[f64]) -> Option<TransitionInfo> {
        self.depth += 1;
        let take = self.lsw_sub > self.lsw
            || stream.uniform(self.iteration, Purpose::Top, self.depth)
                < (self.lsw_sub - self.lsw).exp();
        if take {
            self.sample.q.copy_from_slice(&self.proposal.q);
            self.sample.g.copy_from_slice(&self.proposal.g);
            self.sample.logp = self.proposal.logp;
            self.sample.energy = self.proposal.energy;
            self.sample.index = self.proposal.index;
        }
        self.lsw = sampler::log_sum_exp(self.lsw, self.lsw_sub);
        // `nuts.wgsl`'s checks, with Stan's junction momentum `near` (see there).
        let far = &self.ends[1 - self.end].p;
        let last = &self.ends[self.end].p;
        let first = &self.p_start[0];
        let near = &self.junction[self.end];
        let mut sums = [0.0f64; 6];
        for j in 0..self.dim {
            let m = minv[j];
            let rho_all = self.rho_old[j] + self.rho_new[j];
            sums[0] += m * far[j] * rho_all;
            sums[1] += m * last[j] * rho_all;
            let rho_old_first = self.rho_old[j] + first[j];
            sums[2] += m * far[j] * rho_old_first;
            sums[3] += m * first[j] * rho_old_first;
            let rho_near_new = self.rho_new[j] + near[j];
            sums[4] += m * near[j] * rho_near_new;
            sums[5] += m * last[j] * rho_near_new;
            self.rho_old[j] = rho_all;
        }
        let persist = sums.iter().all(|&s| s > 0.0);
        if !persist || self.depth >= self.max_depth {
            return Some(self.finish());
        }
        self.start_subtree(stream);
        None
    }

    fn finish(&mut self) -> TransitionInfo {
        self.active = false;
        let n = f64::from(self.n_leapfrog.max(1));
        TransitionInfo {
            accept_stat: self.sum_metro / n,
            accept_stat_sym: self.sum_sym / n,
            n_leapfrog: self.n_leapfrog,
            depth: self.depth,
            divergent: self.divergent,
            energy: self.sample.energy,
            index_in_trajectory: self.sample.index,
        }
    }
}
