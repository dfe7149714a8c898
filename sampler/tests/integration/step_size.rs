//! The step size of each transition: the tuned one, as Stan samples by default
//! (`stepsize_jitter = 0`), whatever the adaptation; drawn from `step_size * (1 ± jitter)`
//! only when a jitter is asked for.

use sampler::{AdaptationKind, ChainTrace, NoObserver, SamplerSettings, Seed, sample};

use crate::common::bench_model;

fn run(adaptation: AdaptationKind, step_size_jitter: Option<f64>) -> Vec<ChainTrace> {
    let model = bench_model("eight_schools_noncentered");
    let settings = SamplerSettings {
        num_warmup: 150,
        num_draws: 200,
        adaptation,
        step_size_jitter,
        threads: 2,
        ..SamplerSettings::default()
    };
    sample(&model, &settings, Seed(3), 2, &NoObserver).expect("the chains run")
}

#[test]
fn no_jitter_by_default_for_every_adaptation() {
    for adaptation in [AdaptationKind::Stan, AdaptationKind::Nutpie] {
        for trace in run(adaptation, None) {
            let tuned = trace.tuning.step_size;
            assert!(
                trace.stats.iter().all(|s| s.step_size == tuned),
                "{adaptation:?}, chain {}: step sizes vary around {tuned}",
                trace.chain.0
            );
        }
    }
}

#[test]
fn an_explicit_jitter_varies_the_step_size_within_its_bounds() {
    let jitter = 0.1;
    for adaptation in [AdaptationKind::Stan, AdaptationKind::Nutpie] {
        for trace in run(adaptation, Some(jitter)) {
            let tuned = trace.tuning.step_size;
            let ratios: Vec<f64> = trace.stats.iter().map(|s| s.step_size / tuned).collect();
            assert!(
                ratios
                    .iter()
                    .all(|r| (1.0 - jitter..=1.0 + jitter).contains(r)),
                "{adaptation:?}: a step size outside (1 ± {jitter}) x {tuned}: {ratios:?}"
            );
            // 200 uniform draws over the whole interval: both ends' tenths are reached.
            assert!(ratios.iter().any(|r| *r < 1.0 - 0.8 * jitter), "{ratios:?}");
            assert!(ratios.iter().any(|r| *r > 1.0 + 0.8 * jitter), "{ratios:?}");
        }
    }
}
