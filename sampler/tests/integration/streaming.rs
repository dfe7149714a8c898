//! An observer that streams the draws (`Observer::keeps_draws` is false) gets every draw,
//! warmup draws included when saved, bit for bit the draws a kept trace holds, and the
//! traces come back without them: a streamed chain allocates the same however long it runs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sampler::{
    ChainId, ChainSpec, ChainTrace, DrawEvent, Observer, SamplerSettings, Seed, sample_chains,
};

use crate::common::bench_model;

/// One chain's draws as they happened: warmup values, kept values, kept lp.
type Seen = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Collects the draws as they happen, per chain.
struct Streaming {
    keeps: bool,
    chains: Mutex<Vec<Seen>>,
}

impl Observer for Streaming {
    fn on_draw(&self, event: &DrawEvent) {
        let mut chains = self.chains.lock().unwrap();
        let (warmup, kept, lp) = &mut chains[event.chain.0 as usize];
        if event.warmup {
            warmup.extend_from_slice(event.values);
        } else {
            kept.extend_from_slice(event.values);
            lp.push(event.stats.lp);
        }
    }

    fn keeps_draws(&self) -> bool {
        self.keeps
    }
}

fn run(keeps: bool) -> (Vec<ChainTrace>, Vec<Seen>) {
    let model = bench_model("eight_schools_noncentered");
    let settings = SamplerSettings {
        num_warmup: 100,
        num_draws: 150,
        save_warmup: true,
        threads: 2,
        ..SamplerSettings::default()
    };
    let specs: Vec<ChainSpec> = (0..3).map(|c| ChainSpec::new(ChainId(c))).collect();
    let observer = Streaming {
        keeps,
        chains: Mutex::new(vec![Default::default(); specs.len()]),
    };
    let traces = sample_chains(|| model.evaluator(), &settings, Seed(7), &specs, &observer)
        .expect("the chains run");
    (traces, observer.chains.into_inner().unwrap())
}

#[test]
fn a_streaming_observer_gets_every_draw_and_the_traces_keep_none() {
    let (kept, seen_kept) = run(true);
    let (streamed, seen_streamed) = run(false);
    assert_eq!(seen_kept, seen_streamed, "the same draws either way");
    for ((kept, streamed), (warmup, draws, lp)) in kept.iter().zip(&streamed).zip(&seen_streamed) {
        assert_eq!(&kept.warmup_draws, warmup);
        assert_eq!(&kept.draws, draws);
        let kept_lp: Vec<f64> = kept.stats.iter().map(|s| s.lp).collect();
        assert_eq!(&kept_lp, lp);
        assert_eq!(kept.n_draws(), 150);
        assert!(streamed.draws.is_empty() && streamed.stats.is_empty());
        assert!(streamed.warmup_draws.is_empty() && streamed.warmup_stats.is_empty());
        assert_eq!(streamed.draws.capacity(), 0, "no room reserved");
        // Everything else is the same.
        assert_eq!(streamed.tuning, kept.tuning);
        assert_eq!(streamed.init, kept.init);
        assert_eq!(streamed.final_position, kept.final_position);
        assert_eq!(streamed.grad_evals_warmup, kept.grad_evals_warmup);
        assert_eq!(streamed.grad_evals_sampling, kept.grad_evals_sampling);
    }
}

/// Bytes a chain's thread allocates from its start (`keeps_draws`, asked on the chain's
/// thread before anything else) to its last draw.
struct Allocations {
    keeps: bool,
    total: u64,
    start: AtomicU64,
    end: AtomicU64,
}

impl Observer for Allocations {
    fn on_draw(&self, event: &DrawEvent) {
        if event.iteration + 1 == self.total {
            self.end
                .store(crate::bytes_allocated_on_this_thread(), Ordering::Relaxed);
        }
    }

    fn keeps_draws(&self) -> bool {
        self.start
            .store(crate::bytes_allocated_on_this_thread(), Ordering::Relaxed);
        self.keeps
    }
}

fn allocated(keeps: bool, num_draws: u64) -> u64 {
    let model = bench_model("eight_schools_noncentered");
    let settings = SamplerSettings {
        num_warmup: 100,
        num_draws,
        threads: 1,
        ..SamplerSettings::default()
    };
    let observer = Allocations {
        keeps,
        total: 100 + num_draws,
        start: AtomicU64::new(0),
        end: AtomicU64::new(0),
    };
    sample_chains(
        || model.evaluator(),
        &settings,
        Seed(3),
        &[ChainSpec::new(ChainId(0))],
        &observer,
    )
    .expect("the chain runs");
    observer.end.load(Ordering::Relaxed) - observer.start.load(Ordering::Relaxed)
}

#[test]
fn a_streamed_chain_allocates_the_same_however_many_draws_it_runs() {
    let (short, long) = (allocated(false, 200), allocated(false, 5000));
    assert_eq!(
        short, long,
        "a streamed chain's memory does not grow with its draws"
    );
    // Kept, the draws take room (18 values and the statistics per draw).
    let kept = allocated(true, 5000);
    assert!(kept >= long + 5000 * 18 * 8, "{kept} bytes against {long}");
}
