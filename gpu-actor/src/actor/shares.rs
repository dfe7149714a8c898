//! How a job's chains are shared among a node's idle GPU workers: in proportion to each
//! worker's measured speed for the job's model, so that the shares finish together.
//!
//! A worker's speed for a model is learned from the shares it finished: chain-iterations per
//! second, smoothed over jobs ([`Rates`]), from its second share of the model on (the first
//! built the kernels). A worker that has not run the model yet counts as fast as the mean of
//! those that have (as fast as any, when none has). Speeds within 10% of each other count
//! as one: equal shares, so that a job's shares keep their sizes from one job to the next. Shares smaller than
//! the supervisor's `min_share` chains are not made: below some size a GPU is not busy, so a
//! second device would add its compile time and no speed.

use std::collections::HashMap;

use sampler::ModelHash;

/// The weight of a new measurement in a worker's rate: the mean of the last few jobs,
/// following a change of clocks or load within a couple of jobs.
const SMOOTHING: f64 = 0.5;
/// Workers whose speeds differ by less than this factor get equal shares.
const SAME_SPEED: f64 = 1.1;
/// Models a worker remembers a rate for; past that it forgets them all (a node serving
/// thousands of distinct models relearns, at worst, one job per model and worker).
const MAX_MODELS: usize = 1024;

/// One worker's measured speed per model, in chain-iterations per second.
#[derive(Clone, Debug, Default)]
pub(super) struct Rates(HashMap<ModelHash, Rate>);

/// A worker's speed for one model.
#[derive(Clone, Copy, Debug)]
enum Rate {
    /// Its first run of the model compiled the kernels: that run's time says little.
    Compiled,
    /// Chain-iterations per second, smoothed.
    Measured(f64),
}

impl Rates {
    /// The speed measured for `model`, if any.
    pub(super) fn get(&self, model: ModelHash) -> Option<f64> {
        match self.0.get(&model) {
            Some(Rate::Measured(rate)) => Some(*rate),
            _ => None,
        }
    }

    /// Learns from a share of `chains` chains of `iterations` each that took `seconds`. The
    /// first share of a model only says that its kernels are built.
    pub(super) fn record(
        &mut self,
        model: ModelHash,
        chains: usize,
        iterations: u64,
        seconds: f64,
    ) {
        let work = chains as f64 * iterations as f64;
        if !(work > 0.0 && seconds > 0.0 && seconds.is_finite()) {
            return;
        }
        let rate = work / seconds;
        if self.0.len() >= MAX_MODELS && !self.0.contains_key(&model) {
            self.0.clear();
        }
        let next = match self.0.get(&model) {
            None => Rate::Compiled,
            Some(Rate::Compiled) => Rate::Measured(rate),
            Some(Rate::Measured(old)) => Rate::Measured(old + SMOOTHING * (rate - old)),
        };
        self.0.insert(model, next);
    }
}

/// Splits `chains` among workers whose measured speeds are `rates` (`None`: not measured),
/// in proportion to speed, into shares of at least `min_share` chains (one share when the
/// job is smaller), using the fastest workers when there are more than shares.
///
/// Returns one count per worker, in the order of `rates`, summing to `chains`; zero for a
/// worker that gets no share. Empty `rates` gives an empty plan.
pub(super) fn plan(chains: usize, rates: &[Option<f64>], min_share: usize) -> Vec<usize> {
    let mut counts = vec![0; rates.len()];
    if rates.is_empty() || chains == 0 {
        return counts;
    }
    let measured: Vec<f64> = rates
        .iter()
        .flatten()
        .copied()
        .filter(|rate| *rate > 0.0 && rate.is_finite())
        .collect();
    let assumed = if measured.is_empty() {
        1.0
    } else {
        measured.iter().sum::<f64>() / measured.len() as f64
    };
    let speed = |rate: Option<f64>| match rate {
        Some(rate) if rate > 0.0 && rate.is_finite() => rate,
        _ => assumed,
    };
    // Speeds within `SAME_SPEED` of each other are one speed measured with noise: equal
    // shares, the same from job to job (a share of another size may need another kernel
    // shape, built anew).
    let (slowest, fastest) = rates.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| {
        (lo.min(speed(r)), hi.max(speed(r)))
    });
    let alike = fastest <= slowest * SAME_SPEED;
    let speed = |rate: Option<f64>| if alike { 1.0 } else { speed(rate) };
    let shares = (chains / min_share.max(1)).clamp(1, rates.len());
    // The fastest `shares` workers; among equals, the first listed.
    let mut order: Vec<usize> = (0..rates.len()).collect();
    order.sort_by(|&a, &b| speed(rates[b]).total_cmp(&speed(rates[a])).then(a.cmp(&b)));
    order.truncate(shares);
    let total: f64 = order.iter().map(|&w| speed(rates[w])).sum();
    // Largest remainders: floors first, then one more chain to the largest fractions.
    let mut fractions = Vec::with_capacity(order.len());
    let mut given = 0;
    for &worker in &order {
        let exact = chains as f64 * speed(rates[worker]) / total;
        let floor = (exact.floor() as usize).min(chains - given);
        counts[worker] = floor;
        given += floor;
        fractions.push((exact - floor as f64, worker));
    }
    fractions.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, worker) in fractions.iter().cycle().take(chains - given) {
        counts[worker] += 1;
    }
    counts
}

#[cfg(test)]
mod tests;
