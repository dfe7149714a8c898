//! The host side of kernel (a): the device runs K leapfrog steps per chain per dispatch
//! (`shaders/fused.wgsl`), the CPU builds each chain's NUTS tree from them
//! (`crate::kernels::tree`, the twin of `shaders/nuts.wgsl`).
//!
//! Each chain keeps, for each end of its trajectory, the steps integrated ahead from that end.
//! A subtree consumes them one leaf at a time; when a chain needs a leaf that is not there,
//! it asks for K more from its growing end, and all chains that ask are integrated in one
//! dispatch. Steps integrated beyond where the tree stopped are discarded when the
//! transition ends (the next one draws a new momentum). A dispatch that runs while a chain's
//! other end still has steps ahead leaves them valid: that end has not moved.
//!
//! Warmup is the NUTS kernel's: dual averaging per chain (here on the host), the pooled
//! metric of `adapt.rs` at the same boundaries, and the same step-size searches, their single
//! leapfrog steps run by the same fused kernel.

use std::time::{Duration, Instant};

use sampler::nuts::TransitionInfo;
use sampler::{ChainTrace, DrawStats, Observer, SampleError, Tuning};

use super::adapt::{IterationMoments, LpFloors, Search, Warmup, reseats, start_warmup};
use super::dual::DualAverage;
use super::init::{InitialPoints, initial_points};
use super::records::{Draw, RecordSettings, empty_traces, give_room, record};
use super::{DispatchStats, GpuRun, GpuSampleRequest, Iterations, Phase, max_log_step};
use crate::device::fused::{FusedBatch, FusedCommand, FusedOpen, FusedReply, FusedRun, StepRole};
use crate::device::nuts::SessionId;
use crate::device::{GpuDevice, KernelPlan, ModelKey};
use crate::error::{CheckedPoint, GpuError};
use crate::kernels::philox::{ChainStream, Purpose};
use crate::kernels::tree::{Leaf, Tree};
use crate::wgsl::KernelKind;
use sampler::OutputWriter;

/// Steps integrated ahead from one end of a chain's trajectory: `len` leaves of
/// `3 * dim + 1` values (q, p, g, log p), consumed from `next`.
#[derive(Clone, Debug, Default)]
struct Ahead {
    values: Vec<f64>,
    len: usize,
    next: usize,
}

impl Ahead {
    fn clear(&mut self) {
        self.len = 0;
        self.next = 0;
    }

    fn has_next(&self) -> bool {
        self.next < self.len
    }
}

/// A recorded transition waiting to be written to the trace.
#[derive(Clone, Debug)]
struct Finished {
    q: Vec<f64>,
    g: Vec<f64>,
    stats: DrawStats,
    usable: bool,
    iteration: u64,
}

/// Checks the first draw of the first few chains that have one against the CPU's log density
/// and gradient (`check.rs`); whether any was checked.
fn check_first_draws(
    device: &GpuDevice,
    request: &GpuSampleRequest,
    finished: &[Vec<Finished>],
) -> Result<bool, GpuError> {
    let mut checked = false;
    let firsts = finished
        .iter()
        .enumerate()
        .filter_map(|(c, draws)| draws.first().map(|first| (c, first)))
        .take(super::check::CHECKED_CHAINS);
    for (c, first) in firsts {
        super::check::check_point(
            &device.report().name,
            request.model.program(),
            request.resolved_precision(),
            c,
            CheckedPoint::FirstDraw,
            &first.q,
            first.stats.lp,
            Some(&first.g),
        )?;
        checked = true;
    }
    Ok(checked)
}

struct Chain {
    id: sampler::ChainId,
    tree: Tree,
    stream: ChainStream,
    dual: DualAverage,
    step: f64,
    /// The next transition's iteration.
    iteration: u64,
    ahead: [Ahead; 2],
    finished: Vec<Finished>,
    grad_evals: u64,
}

/// Closes a session when the run ends.
struct SessionGuard<'a> {
    device: &'a GpuDevice,
    id: SessionId,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        let _ = self.device.fused(FusedCommand::Close(self.id)).wait();
    }
}

/// Transitions each chain runs between two recordings of its draws (and the longest warmup
/// block).
const RECORD_EVERY: u64 = 16;

/// The state of one run of kernel (a).
struct Driver<'a> {
    device: &'a GpuDevice,
    request: &'a GpuSampleRequest,
    observer: &'a dyn Observer,
    session: SessionId,
    dim: usize,
    k: usize,
    metric: Vec<f64>,
    metric_dirty: bool,
    chains: Vec<Chain>,
    dispatches: Vec<DispatchStats>,
    writer: OutputWriter,
    traces: Vec<ChainTrace>,
    record: RecordSettings,
    /// Whether a batch's first draws were checked against the CPU (before any is recorded).
    first_draws_checked: bool,
}

fn unexpected() -> GpuError {
    GpuError::Device {
        operation: "fused session",
        message: "the device thread answered a different request".into(),
    }
}

fn kinetic(metric: &[f64], p: &[f64]) -> f64 {
    0.5 * metric.iter().zip(p).map(|(m, p)| m * p * p).sum::<f64>()
}

fn energy(logp: f64, kinetic: f64) -> f64 {
    let h = -logp + kinetic;
    if h.is_finite() { h } else { f64::INFINITY }
}

/// A chain's step-size search in progress (sampler's adapt.rs, as `nuts_search.wgsl`).
#[derive(Clone, Copy, Debug)]
enum SearchState {
    Stan {
        eps: f64,
        forward: Option<bool>,
        attempt: u32,
        loops: u32,
    },
    Nutpie {
        eps: f64,
        forward: Option<bool>,
        loops: u32,
    },
    Done(f64),
    Failed(&'static str),
}

impl SearchState {
    /// A search of kind `kind` from a chain's step size `step`.
    fn start(kind: Search, step: f64) -> SearchState {
        match kind {
            Search::Stan => {
                if step == 0.0 || step > 1e7 || step.is_nan() {
                    SearchState::Done(step)
                } else {
                    SearchState::Stan {
                        eps: step,
                        forward: None,
                        attempt: 0,
                        loops: 0,
                    }
                }
            }
            Search::Nutpie => SearchState::Nutpie {
                eps: 0.1,
                forward: None,
                loops: 0,
            },
        }
    }
}

/// ln 0.8, hard-coded in Stan's init_stepsize.
const LOG_STAN_TARGET: f64 = -0.223_143_551_314_209_7;

/// One round of step-size tries, one leapfrog step per chain: each chain's start (`q`,
/// `p`, `g`, chain-major), step size (0: its search has ended) and starting energy (`h0`).
struct SearchTries {
    q: Vec<f64>,
    p: Vec<f64>,
    g: Vec<f64>,
    eps: Vec<f64>,
    h0: Vec<f64>,
}

impl SearchTries {
    fn new(n: usize, dim: usize) -> SearchTries {
        SearchTries {
            q: vec![0.0; n * dim],
            p: vec![0.0; n * dim],
            g: vec![0.0; n * dim],
            eps: vec![0.0; n],
            h0: vec![0.0; n],
        }
    }
}

impl Driver<'_> {
    fn check_stop(&self) -> Result<(), GpuError> {
        if self.observer.should_stop() {
            return Err(SampleError::Cancelled.into());
        }
        Ok(())
    }

    fn dispatch(&mut self, n_steps: usize, run: FusedRun) -> Result<Box<FusedBatch>, GpuError> {
        let run = FusedRun {
            n_steps,
            metric: self.metric_dirty.then(|| self.metric.clone()),
            ..run
        };
        self.metric_dirty = false;
        match self
            .device
            .fused(FusedCommand::Run(self.session, run))
            .wait()?
        {
            FusedReply::Batch(batch) => Ok(batch),
            _ => Err(unexpected()),
        }
    }

    /// Runs every chain's step-size search to its end, one leapfrog per chain per dispatch.
    fn search(&mut self, kind: Search, first: bool) -> Result<(), GpuError> {
        let mut states: Vec<SearchState> = self
            .chains
            .iter()
            .map(|chain| SearchState::start(kind, chain.step))
            .collect();
        let mut tries = SearchTries::new(self.chains.len(), self.dim);
        while self.plan_tries(&states, &mut tries) {
            let batch = self.dispatch(
                1,
                FusedRun {
                    n_steps: 1,
                    metric: None,
                    eps: tries.eps.clone(),
                    q: tries.q.clone(),
                    p: tries.p.clone(),
                    g: tries.g.clone(),
                },
            )?;
            self.judge_tries(&batch, &tries, &mut states);
        }
        self.end_search(kind, first, states)
    }

    /// Fills `tries` with the next try of each chain whose search goes on (a fresh momentum
    /// per Stan attempt); whether any does.
    fn plan_tries(&self, states: &[SearchState], tries: &mut SearchTries) -> bool {
        let dim = self.dim;
        let mut any = false;
        for (c, state) in states.iter().enumerate() {
            let chain = &self.chains[c];
            let (attempt, step) = match *state {
                SearchState::Stan { eps, attempt, .. } => (attempt, eps),
                // nutpie keeps the first try's momentum for every try.
                SearchState::Nutpie { eps, .. } => (0, eps),
                SearchState::Done(_) | SearchState::Failed(_) => {
                    tries.eps[c] = 0.0;
                    continue;
                }
            };
            any = true;
            let iteration = chain.iteration as u32;
            let rows = c * dim..(c + 1) * dim;
            for block in 0..dim.div_ceil(2) {
                let (a, b) = chain.stream.search_pair(iteration, attempt, block as u32);
                let j = 2 * block;
                tries.p[c * dim + j] = a / self.metric[j].sqrt();
                if j + 1 < dim {
                    tries.p[c * dim + j + 1] = b / self.metric[j + 1].sqrt();
                }
            }
            let (cq, cg, logp) = chain.tree.point();
            tries.q[rows.clone()].copy_from_slice(cq);
            tries.g[rows.clone()].copy_from_slice(cg);
            tries.h0[c] = energy(logp, kinetic(&self.metric, &tries.p[rows]));
            tries.eps[c] = step;
        }
        any
    }

    /// Moves each chain's search on by the energy change of its try in `batch`.
    fn judge_tries(&mut self, batch: &FusedBatch, tries: &SearchTries, states: &mut [SearchState]) {
        let settings = &self.request.settings;
        let mut p1 = vec![0.0; self.dim];
        for (c, state) in states.iter_mut().enumerate() {
            if tries.eps[c] == 0.0 {
                continue;
            }
            self.chains[c].grad_evals += 1;
            batch.copy_to(0, StepRole::P, c, &mut p1);
            let delta = tries.h0[c] - energy(batch.logp(0, c), kinetic(&self.metric, &p1));
            *state = advance_search(
                *state,
                delta,
                settings.target_accept,
                settings.max_energy_error,
            );
        }
    }

    /// Gives each chain the step size its search found, or fails with the first chain's
    /// failure.
    fn end_search(
        &mut self,
        kind: Search,
        first: bool,
        states: Vec<SearchState>,
    ) -> Result<(), GpuError> {
        let search_mu = (10.0 * self.request.settings.initial_step_size).ln();
        for (chain, state) in self.chains.iter_mut().zip(states) {
            let eps = match state {
                SearchState::Done(eps) => eps,
                SearchState::Failed(message) => {
                    return Err(SampleError::StepSize {
                        chain: chain.id,
                        message: message.into(),
                    }
                    .into());
                }
                _ => chain.step,
            };
            chain.step = eps;
            chain.dual.after_search(kind, eps, first, search_mu);
        }
        Ok(())
    }

    /// Runs every chain's transitions until its iteration `limit`; records finished
    /// transitions in `chain.finished`. `adapt`: the first iteration of late warmup and the
    /// last of warmup, while the step size adapts.
    fn advance(
        &mut self,
        limit: u64,
        adapt: Option<(u64, u64)>,
        phase: Phase,
    ) -> Result<(), GpuError> {
        let jitter = self.request.settings.jitter();
        loop {
            let wants: Vec<Option<usize>> = self
                .chains
                .iter_mut()
                .map(|chain| chain.advance(limit, adapt, jitter, &self.metric, self.dim))
                .collect();
            if wants.iter().all(Option::is_none) {
                return Ok(());
            }
            self.integrate_ahead(&wants, phase)?;
        }
    }

    /// Integrates K steps ahead from the growing end of each chain that wants them
    /// (`wants[c]`: which end), in one dispatch.
    fn integrate_ahead(&mut self, wants: &[Option<usize>], phase: Phase) -> Result<(), GpuError> {
        let (n, dim, k) = (self.chains.len(), self.dim, self.k);
        let width = 3 * dim + 1;
        let mut run = FusedRun {
            n_steps: k,
            metric: None,
            eps: vec![0.0; n],
            q: vec![0.0; n * dim],
            p: vec![0.0; n * dim],
            g: vec![0.0; n * dim],
        };
        for (c, want) in wants.iter().enumerate() {
            if want.is_none() {
                continue;
            }
            let (_, q, p, g, eps) = self.chains[c].tree.growing_end();
            run.eps[c] = eps;
            run.q[c * dim..(c + 1) * dim].copy_from_slice(q);
            run.p[c * dim..(c + 1) * dim].copy_from_slice(p);
            run.g[c * dim..(c + 1) * dim].copy_from_slice(g);
        }
        let batch = self.dispatch(k, run)?;
        let mut useful_before = 0;
        for (c, want) in wants.iter().enumerate() {
            let Some(end) = *want else { continue };
            let ahead = &mut self.chains[c].ahead[end];
            ahead.values.resize(k * width, 0.0);
            for step in 0..k {
                let row = &mut ahead.values[step * width..(step + 1) * width];
                batch.copy_to(step, StepRole::Q, c, &mut row[..dim]);
                batch.copy_to(step, StepRole::P, c, &mut row[dim..2 * dim]);
                batch.copy_to(step, StepRole::G, c, &mut row[2 * dim..3 * dim]);
                row[3 * dim] = batch.logp(step, c);
            }
            ahead.len = k;
            ahead.next = 0;
            useful_before += 1;
        }
        self.dispatches.push(DispatchStats {
            phase,
            device_time: batch.elapsed,
            kernel_time: None,
            useful_steps: 0,
            lockstep_steps: (useful_before * k) as u64,
            dispatch_steps: (n * k) as u64,
            draws: 0,
        });
        Ok(())
    }

    /// Takes the finished transitions from the chains, counts their steps, checks the first
    /// draws against the CPU if none were, and records them; the transitions, per chain.
    fn flush(&mut self, warmup: bool) -> Result<Vec<Vec<Finished>>, GpuError> {
        let finished: Vec<Vec<Finished>> = self
            .chains
            .iter_mut()
            .map(|chain| std::mem::take(&mut chain.finished))
            .collect();
        for (trace, done) in self.traces.iter_mut().zip(&finished) {
            let steps: u64 = done.iter().map(|f| u64::from(f.stats.n_leapfrog)).sum();
            if warmup {
                trace.grad_evals_warmup += steps;
            } else {
                trace.grad_evals_sampling += steps;
            }
        }
        if let Some(last) = self.dispatches.last_mut() {
            last.useful_steps += finished
                .iter()
                .flatten()
                .map(|f| u64::from(f.stats.n_leapfrog))
                .sum::<u64>();
            last.draws += finished.iter().map(|f| f.len() as u64).sum::<u64>();
        }
        if !self.first_draws_checked {
            self.first_draws_checked = check_first_draws(self.device, self.request, &finished)?;
        }
        record(
            &mut self.traces,
            &self.writer,
            self.record,
            self.observer,
            |chains, emit| {
                for c in chains {
                    for f in &finished[c] {
                        emit(
                            c,
                            Draw {
                                q: &f.q,
                                stats: f.stats,
                                iteration: f.iteration,
                                warmup,
                            },
                        );
                    }
                }
            },
        );
        Ok(finished)
    }

    /// Warmup: blocks of the schedule, each block's transitions pooled into the metric at its
    /// end, and the step-size searches the boundaries ask for.
    fn warm_up(
        &mut self,
        warmup: &mut Warmup,
        n_warm: u64,
    ) -> Result<Vec<sampler::ChainId>, GpuError> {
        self.search(warmup.initial_search(), true)?;
        // Robust pooling (`adapt.rs`), with the NUTS kernel's rule.
        let mut lp_floors = LpFloors::default();
        let mut iteration = 0;
        let mut last = Vec::new();
        while iteration < n_warm {
            self.check_stop()?;
            let end = warmup.boundary(iteration, RECORD_EVERY, n_warm);
            let late = warmup.late_from(iteration);
            self.advance(end, Some((late, n_warm - 1)), Phase::Warmup)?;
            let finished = self.flush(true)?;
            let floor = lp_floors.for_block(iteration);
            for slot in 0..(end - iteration) as usize {
                let mut moments = IterationMoments::new(self.dim);
                for f in finished.iter().map(|f| &f[slot]) {
                    if warmup.learns_from(f.usable) && f.stats.lp >= floor {
                        moments.add(&f.q, &f.g);
                    }
                }
                warmup.learn(iteration + slot as u64, &moments);
            }
            last = finished
                .iter()
                .map(|f| f.last().map_or(f64::NAN, |f| f.stats.lp))
                .collect();
            lp_floors.push(end, &last);
            let action = warmup.at_boundary(iteration);
            iteration = end;
            if let Some(new) = action.metric {
                for (old, new) in self.metric.iter_mut().zip(new) {
                    if new.is_finite() {
                        *old = new;
                    }
                }
                self.metric_dirty = true;
            }
            if iteration < n_warm
                && let Some(search) = action.search
            {
                self.search(search, false)?;
            }
        }
        Ok(self.reseat(&last))
    }

    /// Starts the chains that end warmup far below the others (`last_lp`: each chain's log
    /// density at its last warmup draw) or with a step size far from theirs from other
    /// chains' points, step sizes and dual averaging (`adapt::reseats`); the chains
    /// restarted.
    fn reseat(&mut self, last_lp: &[f64]) -> Vec<sampler::ChainId> {
        let steps: Vec<f64> = self.chains.iter().map(|chain| chain.step).collect();
        let pairs = reseats(last_lp, &steps);
        for &(c, from) in &pairs {
            let donor = &self.chains[from];
            let (q, g, logp) = donor.tree.point();
            let (q, g) = (q.to_vec(), g.to_vec());
            let (step, dual) = (donor.step, donor.dual);
            let chain = &mut self.chains[c];
            chain.tree.set_point(&q, &g, logp);
            chain.step = step;
            chain.dual = dual;
        }
        if !pairs.is_empty() {
            tracing::info!(
                chains = pairs.len(),
                "chains far from the others at the end of warmup (log density or step size) sample from where others ended it"
            );
        }
        pairs.iter().map(|&(c, _)| self.chains[c].id).collect()
    }

    /// The tuning warmup left in each trace, and its gradient evaluations (the initial
    /// points' and searches' included).
    fn end_warmup(&mut self) {
        for (trace, chain) in self.traces.iter_mut().zip(&self.chains) {
            trace.grad_evals_warmup = chain.grad_evals - trace.grad_evals_sampling;
            trace.tuning = Tuning {
                step_size: chain.step,
                inv_metric: self.metric.clone(),
                dense: false,
            };
        }
    }

    /// Sampling: iterations `from..total`, recorded every `RECORD_EVERY`.
    fn sample(&mut self, from: u64, total: u64) -> Result<(), GpuError> {
        let mut limit = from;
        while limit < total {
            self.check_stop()?;
            limit = (limit + RECORD_EVERY).min(total);
            self.advance(limit, None, Phase::Sampling)?;
            self.flush(false)?;
        }
        Ok(())
    }
}

impl Chain {
    /// The step size of the transition just finished (jitter included).
    fn tree_eps(&self) -> f64 {
        self.tree.eps()
    }

    /// Runs the chain's transitions on the leaves it has ahead until its iteration `limit`
    /// (`adapt` as for `Driver::advance`; `dim` values a point); the end of the trajectory that needs more leaves,
    /// or `None` when the chain reached `limit`.
    fn advance(
        &mut self,
        limit: u64,
        adapt: Option<(u64, u64)>,
        jitter: f64,
        metric: &[f64],
        dim: usize,
    ) -> Option<usize> {
        let width = 3 * dim + 1;
        loop {
            if !self.tree.is_active() {
                if self.iteration >= limit {
                    return None;
                }
                self.begin_transition(jitter, metric);
            }
            let (end, ..) = self.tree.growing_end();
            let ahead = &mut self.ahead[end];
            if !ahead.has_next() {
                return Some(end);
            }
            let at = ahead.next * width;
            ahead.next += 1;
            let values = &ahead.values[at..at + width];
            let leaf = Leaf {
                q: &values[..dim],
                p: &values[dim..2 * dim],
                g: &values[2 * dim..3 * dim],
                logp: values[3 * dim],
            };
            if let Some(info) = self.tree.push_leaf(leaf, &self.stream, metric) {
                self.end_transition(&info, adapt);
            }
        }
    }

    /// Starts the next transition: its step size (jittered), no steps ahead, a new tree.
    fn begin_transition(&mut self, jitter: f64, metric: &[f64]) {
        let iteration = self.iteration as u32;
        let eps = if jitter > 0.0 {
            let u = self.stream.uniform(iteration, Purpose::Jitter, 0);
            self.step * (1.0 + jitter * (2.0 * u - 1.0))
        } else {
            self.step
        };
        self.ahead[0].clear();
        self.ahead[1].clear();
        self.tree.begin(&self.stream, iteration, eps, metric);
    }

    /// Keeps the transition just finished and, while the step size adapts, moves the dual
    /// averaging on.
    fn end_transition(&mut self, info: &TransitionInfo, adapt: Option<(u64, u64)>) {
        self.grad_evals += u64::from(info.n_leapfrog);
        let step_used = self.tree_eps();
        let (q, g, logp) = self.tree.point();
        self.finished.push(Finished {
            q: q.to_vec(),
            g: g.to_vec(),
            stats: DrawStats {
                lp: logp,
                accept_stat: info.accept_stat,
                step_size: step_used,
                tree_depth: info.depth,
                n_leapfrog: info.n_leapfrog,
                divergent: info.divergent,
                energy: info.energy,
            },
            usable: if info.divergent {
                info.index_in_trajectory.abs() > 4
            } else {
                info.index_in_trajectory != 0
            },
            iteration: self.iteration,
        });
        if let Some((late_from, last)) = adapt {
            let stat = if self.iteration >= late_from {
                info.accept_stat_sym
            } else {
                info.accept_stat
            };
            self.step = self.dual.update(stat);
            if self.iteration == last {
                self.step = self.dual.averaged();
            }
        }
        self.iteration += 1;
    }
}

/// One try of a step-size search: its energy change `delta` moves the state on.
fn advance_search(
    state: SearchState,
    delta: f64,
    target: f64,
    max_energy_error: f64,
) -> SearchState {
    match state {
        SearchState::Stan {
            eps,
            forward,
            attempt,
            loops,
        } => advance_stan_search(eps, forward, attempt, loops, delta),
        SearchState::Nutpie {
            eps,
            forward,
            loops,
        } => advance_nutpie_search(eps, forward, loops, delta, target, max_energy_error),
        done => done,
    }
}

/// One try of Stan's search (`init_stepsize`): double or halve the step size until the
/// acceptance crosses 0.8.
fn advance_stan_search(
    eps: f64,
    forward: Option<bool>,
    attempt: u32,
    loops: u32,
    delta: f64,
) -> SearchState {
    let Some(forward) = forward else {
        return SearchState::Stan {
            eps,
            forward: Some(delta > LOG_STAN_TARGET),
            attempt: attempt + 1,
            loops,
        };
    };
    if (forward && !(delta > LOG_STAN_TARGET)) || (!forward && !(delta < LOG_STAN_TARGET)) {
        return SearchState::Done(eps);
    }
    let eps = if forward { 2.0 * eps } else { 0.5 * eps };
    if eps > 1e7 {
        return SearchState::Failed(
            "the step size grew past 1e7: the posterior may be improper (check the priors)",
        );
    }
    if eps == 0.0 {
        return SearchState::Failed(
            "no acceptably small step size: the model may be misspecified or its gradient wrong",
        );
    }
    if loops + 1 >= 2000 {
        return SearchState::Done(eps);
    }
    SearchState::Stan {
        eps,
        forward: Some(forward),
        attempt: attempt + 1,
        loops: loops + 1,
    }
}

/// One try of nutpie's search: double or halve the step size until the acceptance
/// statistic crosses `target`, from the same momentum every try.
fn advance_nutpie_search(
    eps: f64,
    forward: Option<bool>,
    loops: u32,
    delta: f64,
    target: f64,
    max_energy_error: f64,
) -> SearchState {
    if !delta.is_finite() || -delta > max_energy_error {
        return SearchState::Done(0.1);
    }
    let stat = delta.min(0.0).exp();
    let Some(forward) = forward else {
        return SearchState::Nutpie {
            eps,
            forward: Some(stat > target),
            loops,
        };
    };
    let done = if forward {
        stat <= target || eps > 1e5
    } else {
        stat >= target || eps < 1e-10
    };
    if done {
        return SearchState::Done(eps);
    }
    if loops + 1 >= 100 {
        return SearchState::Done(0.1);
    }
    SearchState::Nutpie {
        eps: if forward { 2.0 * eps } else { 0.5 * eps },
        forward: Some(forward),
        loops: loops + 1,
    }
}

/// Compiles the kernels, finds the initial points and opens a session of `k` steps per
/// dispatch on the device.
fn open_session(
    device: &GpuDevice,
    key: ModelKey,
    request: &GpuSampleRequest,
    plan: &KernelPlan,
    k: usize,
) -> Result<(InitialPoints, SessionId), GpuError> {
    let n = request.chains.len();
    super::prepare(device, key, [(KernelKind::Fused, n)], plan)?;
    let init = initial_points(
        device,
        key,
        &request.model,
        &request.settings,
        request.seed,
        &request.chains,
    )?;
    let open = FusedOpen {
        model: key,
        n_chains: n,
        max_steps: k,
        overrides: plan.pinned(),
    };
    let session = match device.fused(FusedCommand::Open(open)).wait()? {
        FusedReply::Opened(id) => id,
        _ => return Err(unexpected()),
    };
    Ok((init, session))
}

/// Each chain at its initial point, with its step size and random stream.
fn start_chains(request: &GpuSampleRequest, init: &InitialPoints) -> Vec<Chain> {
    let settings = &request.settings;
    let dim = request.model.program().dim;
    request
        .chains
        .iter()
        .enumerate()
        .map(|(c, spec)| {
            let mut tree = Tree::new(dim, settings.max_depth, settings.max_energy_error);
            tree.set_point(&init.q[c], &init.g[c], init.logp[c]);
            Chain {
                id: spec.chain,
                tree,
                stream: ChainStream::new(request.seed.0, spec.chain.0),
                dual: DualAverage::new(settings.target_accept, max_log_step(settings.adaptation)),
                step: spec
                    .tuning
                    .as_ref()
                    .map_or(settings.initial_step_size, |t| t.step_size),
                iteration: 0,
                ahead: [Ahead::default(), Ahead::default()],
                finished: Vec::new(),
                grad_evals: init.grad_evals[c],
            }
        })
        .collect()
}

pub(super) fn run(
    device: &GpuDevice,
    key: ModelKey,
    request: &GpuSampleRequest,
    plan: &KernelPlan,
    steps_per_dispatch: u32,
    observer: &dyn Observer,
) -> Result<GpuRun, GpuError> {
    let settings = &request.settings;
    let program = request.model.program();
    let n = request.chains.len();
    let Iterations {
        warmup: n_warm,
        total,
    } = Iterations::of(request)?;
    // A device that caps loop iterations per invocation runs fewer steps per dispatch.
    let k = match super::loop_budget(device, program, settings.max_depth, plan)? {
        Some(budget) => (steps_per_dispatch as usize).min(budget.fused_steps as usize),
        None => steps_per_dispatch as usize,
    };
    let warmup_started = Instant::now();
    let (init, session) = open_session(device, key, request, plan, k)?;
    let _guard = SessionGuard {
        device,
        id: session,
    };
    let (mut warmup, metric) = start_warmup(
        settings.adaptation,
        request.chains[0].tuning.as_ref(),
        n_warm,
        program.dim,
        &init.q,
        &init.g,
    );
    let writer = OutputWriter::new(program);
    let traces = empty_traces(&request.chains, &init.q, writer.n_columns());
    let record = RecordSettings::new(settings, observer);
    let room = sampler::Room::make(n, writer.n_columns(), record.draws);
    let mut driver = Driver {
        device,
        request,
        observer,
        session,
        dim: program.dim,
        k,
        metric,
        metric_dirty: true,
        chains: start_chains(request, &init),
        dispatches: Vec::new(),
        writer,
        traces,
        record,
        first_draws_checked: false,
    };
    let restarted = match warmup.as_mut() {
        Some(warmup) => driver.warm_up(warmup, n_warm)?,
        None => Vec::new(),
    };
    let warmup_time = warmup_started.elapsed();
    driver.end_warmup();
    let sampling_started = Instant::now();
    give_room(room, &mut driver.traces);
    driver.sample(n_warm, total)?;
    let sampling_time = sampling_started.elapsed();
    for (trace, chain) in driver.traces.iter_mut().zip(&driver.chains) {
        trace.final_position = chain.tree.point().0.to_vec();
        trace.warmup_seconds = warmup_time.as_secs_f64();
        trace.sampling_seconds = sampling_time.as_secs_f64();
    }
    Ok(GpuRun {
        traces: driver.traces,
        dispatches: driver.dispatches,
        warmup_time,
        init_time: Duration::ZERO,
        search_time: Duration::ZERO,
        sampling_time,
        queued_warmup_dispatches: 0,
        precision: super::PrecisionChoice::asked(request.resolved_precision()),
        restarted,
    })
}
