//! Warmup on the GPU paths: the step size adapts per chain (dual averaging, every transition),
//! the diagonal metric is estimated from the draws of all chains together (pooled) and shared.
//!
//! Why pooled: the metric is the data-hungry part of warmup, d variances from correlated
//! draws; one chain's window of 25 to 100 draws estimates them poorly (Stan regularises
//! towards 1e-3 for that reason), while C chains give C times the draws for the same
//! warmup length, so a short warmup suffices (TFP's cross-chain adaptation, Lao et al.
//! 2020). Every chain samples the same posterior, so one metric fits all; it is
//! fixed after warmup, so the sampling kernel is a valid MCMC kernel. The step size stays per
//! chain, as Stan and nutpie have it: it needs one number per transition, which the kernel
//! updates itself, and lets a chain stuck in a region of high curvature shrink its own.
//!
//! The schedules are sampler's (`adapt/windowed.rs`, `adapt/grad_diag.rs`), run by
//! iteration (Stan's is sampler's `WindowedMetric` itself, fed the pooled moments):
//! * [`StanPooled`]: Stan's 75 / 25·2^k / 50 windows; at each window end the regularised
//!   variance of the window's draws, pooled over chains; then Stan's step-size search and a
//!   dual-averaging restart, in the kernel.
//! * [`NutpiePooled`]: nutpie's `sqrt(Var x / Var ∇ log p)` from foreground and background
//!   estimators, pooled over chains, with nutpie's switch schedule counted in iterations (so
//!   that one window holds as many iterations as nutpie's, of every chain); the metric is
//!   recomputed at each dispatch boundary; nutpie's step-size search after the first change.
//!
//! Robust pooling ([`lp_floor`]): a chain far from where the others are (still on its way
//! to the typical set, or stuck where the shared metric does not suit it) has draws that
//! differ from the others' by far more than the posterior's spread; pooled, a few such
//! chains inflate every coordinate's variance (and so shrink every chain's step size), and
//! the more chains a run has, the more such stragglers it pools. Stan and nutpie, one
//! metric per chain, never mix one chain's transient into another's metric. So the draws
//! whose log density lies far below the chains' median (Tukey's fence on the log density,
//! [`LP_FENCE`] interquartile ranges) are left out of the pooled estimates; the chains
//! themselves run on.
//!
//! Dispatches during warmup end where the schedule needs the host: at window ends, switches,
//! and the start of the step-size-only phase ([`Warmup::boundary`]).

use sampler::{AdaptationKind, Tuning, Welford, WindowOptions, WindowedMetric};

/// How many interquartile ranges of the chains' log densities below their median a draw may
/// lie and still enter the pooled estimates. In the typical set the log density is a
/// constant less half a chi-square with d degrees of freedom, whose interquartile range is
/// about 0.95 sqrt(d): a draw of the posterior falls below the fence with a probability far
/// below 1e-6, while a chain far out in a long direction lies thousands of ranges below.
pub(crate) const LP_FENCE: f64 = 10.0;

/// The log density below which a draw is left out of the pooled estimates, from the chains'
/// log densities at their latest draws (non-finite ones ignored): `LP_FENCE` interquartile
/// ranges (at least 1) below their median; none (`-inf`) with fewer than 8 chains.
pub(crate) fn lp_floor(log_densities: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = log_densities
        .iter()
        .copied()
        .filter(|lp| lp.is_finite())
        .collect();
    if sorted.len() < 8 {
        return f64::NEG_INFINITY;
    }
    sorted.sort_by(f64::total_cmp);
    let at = |fraction: f64| sorted[((sorted.len() - 1) as f64 * fraction).round() as usize];
    let spread = (at(0.75) - at(0.25)).max(1.0);
    at(0.5) - LP_FENCE * spread
}

/// How many interquartile ranges of the chains' log step sizes beyond the quartiles a chain's
/// final step size may lie before the chain counts as a straggler ([`reseats`]); and it must
/// also be more than [`STEP_FACTOR`] from the median.
pub(crate) const STEP_FENCE: f64 = 3.0;

/// See [`STEP_FENCE`].
pub(crate) const STEP_FACTOR: f64 = 2.0;

/// Which chains start sampling from another chain's end of warmup, and from which: the
/// chains whose log density at the end of warmup lies below [`lp_floor`] of all chains' (or
/// is not finite), and those whose final step size is far from the others' ([`STEP_FENCE`],
/// [`STEP_FACTOR`]), each paired `(chain, from)` with a chain that is neither. The donors are
/// spread evenly over those chains, in chain order, so a run's pairs depend on its draws
/// only. None with fewer than 8 chains.
///
/// Why: pooled adaptation leaves a straggler's draws out of the metric (see the module's
/// notes), but a chain still far out when warmup ends would sample from there with a step
/// size tuned where it was: its draws would not be the posterior's for many iterations
/// (a long ridge keeps such a chain for the whole run). A chain that came back late has a
/// step size averaged over where it was, which diverges in the typical set. Warmup's end
/// state is any point and step size the sampler likes, so starting such a chain from
/// another chain's keeps every kernel valid; the chains sample independently from there,
/// each on its own random stream.
pub(crate) fn reseats(last_log_densities: &[f64], steps: &[f64]) -> Vec<(usize, usize)> {
    let floor = lp_floor(last_log_densities);
    if floor == f64::NEG_INFINITY {
        return Vec::new();
    }
    let step_range = step_range(steps);
    let below = |c: usize| {
        let lp = last_log_densities[c];
        let step = steps.get(c).copied().unwrap_or(f64::NAN);
        !(lp >= floor) || !step_range.contains(&step)
    };
    let (stragglers, donors): (Vec<usize>, Vec<usize>) =
        (0..last_log_densities.len()).partition(|&c| below(c));
    if donors.is_empty() {
        return Vec::new();
    }
    stragglers
        .iter()
        .enumerate()
        .map(|(k, &chain)| (chain, donors[k * donors.len() / stragglers.len()]))
        .collect()
}

/// The step sizes a chain may end warmup with and not count as a straggler: from the
/// chains' step sizes (non-positive and non-finite ones ignored), the quartiles of their
/// logarithms widened by [`STEP_FENCE`] interquartile ranges, and at least [`STEP_FACTOR`]
/// either side of the median; every positive step with fewer than 8 chains.
fn step_range(steps: &[f64]) -> std::ops::RangeInclusive<f64> {
    let mut logs: Vec<f64> = steps
        .iter()
        .filter(|step| step.is_finite() && **step > 0.0)
        .map(|step| step.ln())
        .collect();
    if logs.len() < 8 {
        return f64::MIN_POSITIVE..=f64::MAX;
    }
    logs.sort_by(f64::total_cmp);
    let at = |fraction: f64| logs[((logs.len() - 1) as f64 * fraction).round() as usize];
    let (low, median, high) = (at(0.25), at(0.5), at(0.75));
    let fence = STEP_FENCE * (high - low);
    let factor = STEP_FACTOR.ln();
    let lowest = (low - fence).min(median - factor);
    let highest = (high + fence).max(median + factor);
    lowest.exp()..=highest.exp()
}

/// The log-density floors of the warmup blocks read so far: a block pools the draws above
/// the floor of the chains' last draws of the block two before it, the latest one known
/// whether or not the block before it was queued, so runs that queue blocks and runs that do
/// not pool the same draws.
#[derive(Clone, Debug, Default)]
pub(crate) struct LpFloors {
    /// Per block read, in order: its end and its floor.
    floors: Vec<(u64, f64)>,
}

impl LpFloors {
    /// Records the block that ended at `end` from its chains' last log densities.
    pub(crate) fn push(&mut self, end: u64, last_log_densities: &[f64]) {
        self.floors.push((end, lp_floor(last_log_densities)));
    }

    /// The floor for the block that starts at `start` (`-inf`: none yet).
    pub(crate) fn for_block(&self, start: u64) -> f64 {
        self.floors
            .iter()
            .rev()
            .find(|(end, _)| *end < start)
            .map_or(f64::NEG_INFINITY, |(_, floor)| *floor)
    }
}

/// The metric's lower and upper clamp (nutpie's).
const CLAMP: (f64, f64) = (1e-20, 1e20);

/// The pooled moments of one warmup iteration's draws over the chains: positions, and
/// gradients where the schedule uses them. Built in parallel by merging per-chunk moments.
#[derive(Clone, Debug)]
pub(crate) struct IterationMoments {
    pub q: Welford,
    pub g: Welford,
}

impl IterationMoments {
    pub(crate) fn new(dim: usize) -> IterationMoments {
        IterationMoments {
            q: Welford::new(dim, false),
            g: Welford::new(dim, false),
        }
    }

    /// Adds one chain's draw; `g` may be empty when the schedule does not use gradients.
    pub(crate) fn add(&mut self, q: &[f64], g: &[f64]) {
        self.q.add(q);
        if !g.is_empty() {
            self.g.add(g);
        }
    }

    /// Adds moments computed on the device: `count` draws, and per value (the coordinates
    /// of q, then of g when `with_grad`) its mean and sum of squared deviations, interleaved.
    pub(crate) fn merge_device(&mut self, count: u64, values: &[f64], with_grad: bool) {
        let dim = self.q.mean().len();
        let pairs = |from: usize| {
            values[2 * from..2 * (from + dim)]
                .chunks_exact(2)
                .map(|pair| (pair[0], pair[1]))
        };
        self.q.merge_moments(count, pairs(0));
        if with_grad {
            self.g.merge_moments(count, pairs(dim));
        }
    }

    pub(crate) fn merge(&mut self, other: &IterationMoments) {
        self.q.merge(&other.q);
        self.g.merge(&other.g);
    }
}

/// Stan's windowed diagonal metric, pooled over chains.
#[derive(Clone, Debug)]
pub(crate) struct StanPooled {
    metric: WindowedMetric,
    /// The estimate of a window that just ended, for the next boundary.
    pending: Option<Vec<f64>>,
}

/// nutpie's schedule constants (sampler's `GradDiagOptions::default()`).
const EARLY_WINDOW: f64 = 0.3;
const STEP_SIZE_WINDOW: f64 = 0.15;
const EARLY_SWITCH_FREQ: u64 = 10;
const SWITCH_FREQ: u64 = 80;
const WINDOW_GROWTH: f64 = 1.5;

/// nutpie's gradient-based diagonal metric, pooled over chains, windows counted in
/// iterations.
#[derive(Clone, Debug)]
pub(crate) struct NutpiePooled {
    early_end: u64,
    final_window_start: u64,
    window_size: u64,
    draws: Welford,
    grads: Welford,
    draws_background: Welford,
    grads_background: Welford,
    /// Iterations added to the background estimators since the last switch.
    background_iterations: u64,
    first_update_pending: bool,
}

/// Which step-size search the kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Search {
    /// Stan's `init_stepsize`, then a dual-averaging restart.
    Stan,
    /// nutpie's search from 0.1, then a fresh dual average.
    Nutpie,
}

/// What the host does at a dispatch boundary.
#[derive(Clone, Debug, Default)]
pub(crate) struct BoundaryAction {
    /// A new shared inverse metric.
    pub metric: Option<Vec<f64>>,
    /// A step-size search to run after setting it.
    pub search: Option<Search>,
}

/// The warmup of a run and the metric its chains start with: chains that come `tuned` keep
/// their metric and do not adapt, nor do chains with no warmup iterations (unit metric).
pub(crate) fn start_warmup(
    kind: AdaptationKind,
    tuned: Option<&Tuning>,
    num_warmup: u64,
    dim: usize,
    init_q: &[Vec<f64>],
    init_g: &[Vec<f64>],
) -> (Option<Warmup>, Vec<f64>) {
    match (tuned, num_warmup > 0) {
        (Some(tuning), _) => (None, tuning.inv_metric.clone()),
        (None, false) => (None, vec![1.0; dim]),
        (None, true) => {
            let (warmup, metric) = Warmup::new(kind, num_warmup, dim, init_q, init_g);
            (Some(warmup), metric)
        }
    }
}

/// The pooled warmup of one run.
#[derive(Clone, Debug)]
pub(crate) enum Warmup {
    Stan(StanPooled),
    Nutpie(Box<NutpiePooled>),
}

impl Warmup {
    /// A warmup of `num_warmup` iterations from the chains' initial points and gradients;
    /// returns it with the initial metric.
    pub(crate) fn new(
        kind: AdaptationKind,
        num_warmup: u64,
        dim: usize,
        init_q: &[Vec<f64>],
        init_g: &[Vec<f64>],
    ) -> (Warmup, Vec<f64>) {
        match kind {
            AdaptationKind::Stan => (
                Warmup::Stan(StanPooled {
                    metric: WindowedMetric::new(num_warmup, WindowOptions::default(), dim, false),
                    pending: None,
                }),
                vec![1.0; dim],
            ),
            AdaptationKind::Nutpie => {
                let step_size_window = (STEP_SIZE_WINDOW * num_warmup as f64) as u64;
                let mut nutpie = NutpiePooled {
                    early_end: (EARLY_WINDOW * num_warmup as f64) as u64,
                    final_window_start: num_warmup.saturating_sub(step_size_window),
                    window_size: SWITCH_FREQ,
                    draws: Welford::new(dim, false),
                    grads: Welford::new(dim, false),
                    draws_background: Welford::new(dim, false),
                    grads_background: Welford::new(dim, false),
                    background_iterations: 0,
                    first_update_pending: true,
                };
                // nutpie starts from 1 / |grad log p(x0)|; pooled, from the root mean square
                // of the chains' initial gradients (the same for one chain).
                let mut mean_square = vec![0.0; dim];
                let mut initial = IterationMoments::new(dim);
                for (q, g) in init_q.iter().zip(init_g) {
                    initial.add(q, g);
                    for (m, g) in mean_square.iter_mut().zip(g) {
                        *m += g * g / init_g.len() as f64;
                    }
                }
                nutpie.add(&initial);
                let metric = mean_square
                    .iter()
                    .map(|m| {
                        let value = 1.0 / m.sqrt().clamp(CLAMP.0, CLAMP.1);
                        if value.is_finite() { value } else { 1.0 }
                    })
                    .collect();
                (Warmup::Nutpie(Box::new(nutpie)), metric)
            }
        }
    }

    /// The step-size search before the first transition.
    pub(crate) fn initial_search(&self) -> Search {
        match self {
            Warmup::Stan(_) => Search::Stan,
            Warmup::Nutpie(_) => Search::Nutpie,
        }
    }

    /// The iteration (exclusive) a dispatch starting at `start` must end at, at most
    /// `start + max_len`: where the schedule next needs the host.
    pub(crate) fn boundary(&self, start: u64, max_len: u64, num_warmup: u64) -> u64 {
        let limit = (start + max_len.max(1)).min(num_warmup);
        match self {
            Warmup::Stan(stan) => match stan.metric.next_window_end() {
                Some(end) if end >= start && end < limit => end + 1,
                _ => limit,
            },
            Warmup::Nutpie(nutpie) => {
                let mut end = limit;
                // Switches and phase changes happen at known iterations; stop after them.
                for at in [nutpie.early_end, nutpie.final_window_start] {
                    if at > start && at < end {
                        end = at;
                    }
                }
                if start < nutpie.final_window_start {
                    let early = start < nutpie.early_end;
                    let freq = if early {
                        EARLY_SWITCH_FREQ
                    } else {
                        nutpie.window_size
                    };
                    // The iteration that fills the background window ends the dispatch, if
                    // the windows switch there: not once the next window would run past the
                    // final one (`learn`'s `late`), and never again after that.
                    let switch = start + freq.saturating_sub(nutpie.background_iterations).max(1);
                    let late =
                        nutpie.next_window_size(early) + (switch - 1) > nutpie.final_window_start;
                    if !late {
                        end = end.min(switch);
                    }
                    // nutpie's first metric comes after a draw or two: stop early until then.
                    if nutpie.first_update_pending {
                        end = end.min(start + 1);
                    }
                }
                end.max(start + 1)
            }
        }
    }

    /// The first iteration whose dual-averaging update uses the symmetric acceptance
    /// statistic (nutpie's late phase), for a dispatch starting at `start`.
    pub(crate) fn late_from(&self, start: u64) -> u64 {
        match self {
            Warmup::Stan(_) => u64::MAX,
            Warmup::Nutpie(nutpie) => {
                if start >= nutpie.final_window_start {
                    return start;
                }
                let next = nutpie.next_window_size(start < nutpie.early_end);
                // late when next + draw > final_window_start.
                (nutpie.final_window_start + 1)
                    .saturating_sub(next)
                    .max(start)
                    .min(nutpie.final_window_start)
            }
        }
    }

    /// Whether a chain's draw enters the estimates: Stan's schedule learns from every draw,
    /// nutpie's only from usable ones (the chain moved: more than 4 steps after a divergence).
    pub(crate) fn learns_from(&self, usable: bool) -> bool {
        usable || !self.usable_only()
    }

    /// Whether only usable draws enter the estimates (nutpie's schedule).
    pub(crate) fn usable_only(&self) -> bool {
        matches!(self, Warmup::Nutpie(_))
    }

    /// Learns from one iteration's draws of every chain, pooled into `moments` (the draws
    /// [`Warmup::learns_from`] accepts).
    pub(crate) fn learn(&mut self, iteration: u64, moments: &IterationMoments) {
        match self {
            Warmup::Stan(stan) => stan.learn(moments),
            Warmup::Nutpie(nutpie) => nutpie.learn(iteration, moments),
        }
    }

    /// Whether the boundary after the iterations `start..end` (this schedule at `start`) may
    /// start a step-size search, which must run before the next dispatch: Stan's at each
    /// window end, nutpie's with its first metric.
    pub(crate) fn may_search_after(&self, start: u64, end: u64) -> bool {
        match self {
            Warmup::Stan(stan) => stan
                .metric
                .next_window_end()
                .is_some_and(|window_end| (start..end).contains(&window_end)),
            Warmup::Nutpie(nutpie) => nutpie.first_update_pending,
        }
    }

    /// This schedule as it will be after learning the iterations `start..end` and their
    /// boundary, for planning the next dispatch before their draws are read: the schedules
    /// count iterations (windows, switches, phases) whatever the draws, so its
    /// [`Warmup::boundary`] and [`Warmup::late_from`] are the real ones'. Its estimates are
    /// not (it learns no draws).
    pub(crate) fn ahead(&self, start: u64, end: u64, dim: usize) -> Warmup {
        let mut ahead = self.clone();
        let nothing = IterationMoments::new(dim);
        for iteration in start..end {
            ahead.learn(iteration, &nothing);
        }
        ahead.at_boundary(start);
        ahead
    }

    /// What to do after the dispatch that ran iterations from `start`.
    pub(crate) fn at_boundary(&mut self, start: u64) -> BoundaryAction {
        match self {
            Warmup::Stan(stan) => stan.take_action(),
            Warmup::Nutpie(nutpie) => nutpie.action(start),
        }
    }
}

impl StanPooled {
    fn learn(&mut self, moments: &IterationMoments) {
        // Stan's estimate and regularisation, with n the pooled count.
        if let Some(metric) = self
            .metric
            .learn_with(|estimator| estimator.merge(&moments.q))
        {
            self.pending = Some(metric);
        }
    }

    fn take_action(&mut self) -> BoundaryAction {
        match self.pending.take() {
            Some(metric) => BoundaryAction {
                metric: metric.iter().all(|v| v.is_finite()).then_some(metric),
                search: Some(Search::Stan),
            },
            None => BoundaryAction::default(),
        }
    }
}

impl NutpiePooled {
    fn add(&mut self, moments: &IterationMoments) {
        self.draws.merge(&moments.q);
        self.grads.merge(&moments.g);
        self.draws_background.merge(&moments.q);
        self.grads_background.merge(&moments.g);
    }

    fn next_window_size(&self, early: bool) -> u64 {
        if early {
            EARLY_SWITCH_FREQ
        } else {
            (self.window_size + 1).max((self.window_size as f64 * WINDOW_GROWTH).round() as u64)
        }
    }

    fn learn(&mut self, draw: u64, moments: &IterationMoments) {
        if draw >= self.final_window_start {
            return;
        }
        let early = draw < self.early_end;
        if !early && draw == self.early_end {
            self.window_size = self.window_size.max(self.background_iterations);
        }
        let switch_freq = if early {
            EARLY_SWITCH_FREQ
        } else {
            self.window_size
        };
        self.add(moments);
        self.background_iterations += 1;
        let could_switch = self.background_iterations >= switch_freq;
        let next_window_size = self.next_window_size(early);
        let late = next_window_size + draw > self.final_window_start;
        if could_switch && !late {
            std::mem::swap(&mut self.draws, &mut self.draws_background);
            std::mem::swap(&mut self.grads, &mut self.grads_background);
            self.draws_background.restart();
            self.grads_background.restart();
            self.background_iterations = 0;
            if !early {
                self.window_size = next_window_size;
            }
        }
    }

    /// After the dispatch of iterations from `start`: the metric from the foreground
    /// estimators (nutpie recomputes it after every draw; here once per dispatch), NaN where a
    /// coordinate keeps its value, and the search after the first change.
    fn action(&mut self, start: u64) -> BoundaryAction {
        if start >= self.final_window_start || self.draws.count() < 3 {
            return BoundaryAction::default();
        }
        let metric: Vec<f64> = self
            .draws
            .sum_squares()
            .iter()
            .zip(self.grads.sum_squares())
            .map(|(dv, gv)| {
                let value = (dv / gv).sqrt();
                if value.is_finite() && value != 0.0 {
                    value.clamp(CLAMP.0, CLAMP.1)
                } else {
                    f64::NAN
                }
            })
            .collect();
        let search = self.first_update_pending.then_some(Search::Nutpie);
        self.first_update_pending = false;
        BoundaryAction {
            metric: Some(metric),
            search,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lengths of the warmup dispatches that `warmup`'s schedule asks for, at most `m`
    /// iterations each, learning from the same draws every iteration.
    fn dispatch_lengths(mut warmup: Warmup, num_warmup: u64, m: u64) -> Vec<u64> {
        let mut moments = IterationMoments::new(2);
        for k in 0..4 {
            let x = f64::from(k) - 1.5;
            moments.add(&[x, 2.0 * x], &[-x, -0.5 * x]);
        }
        let mut lengths = Vec::new();
        let mut start = 0;
        while start < num_warmup {
            let end = warmup.boundary(start, m, num_warmup);
            assert!(end > start && end - start <= m, "{start}..{end}");
            for iteration in start..end {
                warmup.learn(iteration, &moments);
            }
            warmup.at_boundary(start);
            lengths.push(end - start);
            start = end;
        }
        lengths
    }

    #[test]
    fn the_lp_floor_leaves_out_stragglers_only() {
        let typical: Vec<f64> = (0..64).map(|k| -50.0 - 0.05 * f64::from(k)).collect();
        let floor = lp_floor(&typical);
        assert!(typical.iter().all(|&lp| lp >= floor), "{floor}");
        let mut with_stragglers = typical.clone();
        with_stragglers[3] = -5.0e3;
        with_stragglers[40] = f64::NAN;
        let floor = lp_floor(&with_stragglers);
        assert!(floor > -5.0e3 && floor < -60.0, "{floor}");
        // Far from the typical set every chain is a straggler: none is left out.
        let spread: Vec<f64> = (0..64).map(|k| -1e12 * f64::from(k + 1)).collect();
        assert!(spread.iter().all(|&lp| lp >= lp_floor(&spread)));
        assert_eq!(lp_floor(&typical[..7]), f64::NEG_INFINITY);
    }

    #[test]
    fn only_stragglers_are_reseated_each_from_a_chain_above_the_floor() {
        let typical: Vec<f64> = (0..64).map(|k| -50.0 - 0.05 * f64::from(k)).collect();
        let steps: Vec<f64> = (0..64).map(|k| 0.09 + 0.0003 * f64::from(k)).collect();
        assert!(reseats(&typical, &steps).is_empty());
        assert!(reseats(&typical[..7], &steps[..7]).is_empty());
        let mut lps = typical.clone();
        lps[3] = -5.0e3;
        lps[40] = f64::NAN;
        lps[41] = f64::NEG_INFINITY;
        let steps = vec![0.1; 64];
        let pairs = reseats(&lps, &steps);
        let chains: Vec<usize> = pairs.iter().map(|&(chain, _)| chain).collect();
        assert_eq!(chains, [3, 40, 41]);
        let floor = lp_floor(&lps);
        for &(_, from) in &pairs {
            assert!(lps[from] >= floor, "donor {from}");
        }
        // Donors are spread, not all one chain.
        let mut donors: Vec<usize> = pairs.iter().map(|&(_, from)| from).collect();
        donors.dedup();
        assert_eq!(donors.len(), 3);
    }

    #[test]
    fn chains_whose_step_size_is_far_from_the_others_are_reseated() {
        let lps: Vec<f64> = (0..64).map(|k| -50.0 - 0.05 * f64::from(k)).collect();
        let mut steps: Vec<f64> = (0..64).map(|k| 0.09 + 0.0003 * f64::from(k)).collect();
        // Within a factor of 2 of the median: kept, however tight the others are.
        steps[5] = 0.18;
        steps[6] = 0.06;
        steps[9] = 0.394;
        steps[12] = 0.01;
        steps[13] = f64::NAN;
        let pairs = reseats(&lps, &steps);
        let chains: Vec<usize> = pairs.iter().map(|&(chain, _)| chain).collect();
        assert_eq!(chains, [9, 12, 13]);
        for &(_, from) in &pairs {
            assert!(![5, 6, 9, 12, 13].contains(&from), "donor {from}");
        }
    }

    #[test]
    fn nutpie_dispatches_stop_at_switches_and_run_full_length_once_none_come() {
        let q = vec![vec![0.5, -0.5]; 4];
        let g = vec![vec![-0.5, 0.5]; 4];
        let (warmup, _) = Warmup::new(AdaptationKind::Nutpie, 400, 2, &q, &g);
        let lengths = dispatch_lengths(warmup, 400, 16);
        // The first dispatch is one draw (the first metric comes early), then early windows
        // of 10 draws to iteration 120, a window of 80 to 200, no switch after that (the next
        // window would end past iteration 340), and the step-size-only phase.
        let expected: Vec<u64> = [1, 9]
            .into_iter()
            .chain([10; 11])
            .chain([16, 16, 16, 16, 16])
            .chain([16; 8])
            .chain([12])
            .chain([16, 16, 16, 12])
            .collect();
        assert_eq!(lengths, expected);
    }

    /// `Warmup::ahead`, from counts alone, plans the next dispatch exactly as the schedule
    /// does after learning the draws; `may_search_after` warns of every search.
    #[test]
    fn the_schedule_ahead_plans_the_next_dispatch_as_learning_does() {
        let q = vec![vec![0.5, -0.5]; 4];
        let g = vec![vec![-0.5, 0.5]; 4];
        let mut moments = IterationMoments::new(2);
        for k in 0..4 {
            let x = f64::from(k) - 1.5;
            moments.add(&[x, 2.0 * x], &[-x, -0.5 * x]);
        }
        for kind in [AdaptationKind::Nutpie, AdaptationKind::Stan] {
            for (num_warmup, m) in [(400, 16), (1000, 16), (150, 32), (1000, 7)] {
                let (mut warmup, _) = Warmup::new(kind, num_warmup, 2, &q, &g);
                let mut start = 0;
                let mut searches = 0;
                while start < num_warmup {
                    let end = warmup.boundary(start, m, num_warmup);
                    let warned = warmup.may_search_after(start, end);
                    let ahead = warmup.ahead(start, end, 2);
                    for iteration in start..end {
                        warmup.learn(iteration, &moments);
                    }
                    let action = warmup.at_boundary(start);
                    assert!(
                        action.search.is_none() || warned,
                        "{kind:?} {num_warmup}/{m}: unannounced search after {start}..{end}"
                    );
                    searches += usize::from(action.search.is_some());
                    if end < num_warmup {
                        assert_eq!(
                            (ahead.boundary(end, m, num_warmup), ahead.late_from(end)),
                            (warmup.boundary(end, m, num_warmup), warmup.late_from(end)),
                            "{kind:?} {num_warmup}/{m}: the block after {start}..{end}"
                        );
                    }
                    start = end;
                }
                assert!(searches > 0, "{kind:?} {num_warmup}/{m}");
            }
        }
    }
}
