//! Running many chains: the multi-threaded driver.
//!
//! Many chains are the base case: [`sample_chains`] takes a list of chain specifications and
//! runs them on a pool of threads; a single chain is a list of one. Each chain draws from its
//! own random stream ([`crate::ChainRng`]), so results do not depend on the thread count.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::chain::run_chain;
use crate::error::SampleError;
use crate::eval::LogDensity;
use crate::rng::{ChainId, Seed};
use crate::validate::CheckedModel;

use crate::run::{ChainSpec, ChainTrace, Observer, SamplerSettings};

/// Runs `specs` on a pool of threads, each chain with its own density from `make_density`.
/// Traces come back in the order of `specs`.
pub fn sample_chains<D, F>(
    make_density: F,
    settings: &SamplerSettings,
    seed: Seed,
    specs: &[ChainSpec],
    observer: &dyn Observer,
) -> Result<Vec<ChainTrace>, SampleError>
where
    D: LogDensity,
    F: Fn() -> D + Sync,
{
    settings.validate()?;
    let n_threads = match settings.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(specs.len())
    .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<ChainTrace, SampleError>>>> =
        Mutex::new(vec![None; specs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..n_threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(spec) = specs.get(i) else { break };
                    let result = run_chain(make_density(), settings, seed, spec, observer);
                    let failed = result.is_err();
                    if let Ok(mut slots) = results.lock() {
                        slots[i] = Some(result);
                    }
                    if failed {
                        // Stop handing out chains; the error is reported below.
                        next.store(specs.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let slots = results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut traces = Vec::with_capacity(specs.len());
    for slot in slots {
        match slot {
            Some(Ok(trace)) => traces.push(trace),
            Some(Err(err)) => return Err(err),
            None => {}
        }
    }
    if traces.len() != specs.len() {
        // A chain failed and later ones were never started; the first error was returned above
        // unless the failed chain came after every finished one.
        return Err(SampleError::Cancelled);
    }
    Ok(traces)
}

/// Runs `n_chains` chains (numbered 0..n) of a checked model on the CPU.
pub fn sample(
    model: &CheckedModel,
    settings: &SamplerSettings,
    seed: Seed,
    n_chains: u32,
    observer: &dyn Observer,
) -> Result<Vec<ChainTrace>, SampleError> {
    let specs: Vec<ChainSpec> = (0..n_chains).map(|c| ChainSpec::new(ChainId(c))).collect();
    sample_chains(|| model.evaluator(), settings, seed, &specs, observer)
}
