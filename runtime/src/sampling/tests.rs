//! Assembling a job's outcome from its events: draws in chunks, retries, gaps, failures.

use super::*;
use crate::wire::{WireStats, WireTuning};

fn draws(first: u64, values: &[f64]) -> WireDraws {
    let mut stats = WireStats::default();
    for &value in values {
        stats.push(&DrawStats {
            lp: value,
            accept_stat: 0.8,
            step_size: 0.3,
            tree_depth: 1,
            n_leapfrog: 1,
            divergent: false,
            energy: 0.0,
        });
    }
    WireDraws {
        warmup: false,
        first,
        values: values.to_vec(),
        stats,
    }
}

fn progress(chain: u32, attempt: u32, first: u64, values: &[f64]) -> WireJobEvent {
    WireJobEvent::Progress {
        chain,
        attempt,
        iteration: first + values.len() as u64,
        total: 3,
        draws: Some(draws(first, values)),
    }
}

fn done(chain: u32, attempt: u32, n_draws: u64, node: &str) -> WireJobEvent {
    WireJobEvent::ChainDone {
        attempt,
        node: node.into(),
        done: WireChainDone {
            chain,
            n_columns: 1,
            n_draws,
            n_warmup_draws: 0,
            tuning: WireTuning {
                step_size: 0.3,
                inv_metric: vec![1.0],
                dense: false,
            },
            init: vec![0.0],
            final_position: vec![1.0],
            grad_evals_warmup: 5,
            grad_evals_sampling: 3,
            warmup_seconds: 0.0,
            sampling_seconds: 0.0,
        },
    }
}

#[test]
fn chunks_and_retries_make_whole_traces() {
    let mut assembler = Assembler::new(JobId(9), 2);
    let events = vec![
        WireJobEvent::Placed {
            chains: vec![0, 1],
            node: "a@h".into(),
            worker: WireWorkerKind::Cpu,
        },
        progress(0, 1, 0, &[1.0, 2.0]),
        progress(1, 1, 0, &[9.0]),
        progress(0, 1, 2, &[3.0]),
        done(0, 1, 3, "a@h"),
        WireJobEvent::Retried {
            chains: vec![1],
            node: "a@h".into(),
            reason: "a@h down".into(),
            attempt: 2,
        },
        // A late chunk of the first attempt is ignored.
        progress(1, 1, 1, &[9.5]),
        progress(1, 2, 0, &[4.0, 5.0, 6.0]),
        done(1, 2, 3, "b@h"),
    ];
    let mut updates = Vec::new();
    for event in events {
        updates.extend(assembler.apply(event).unwrap());
    }
    assert!(matches!(updates[0], JobUpdate::Placed { .. }));
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, JobUpdate::Retried(r) if r[0].chain == ChainId(1)))
    );
    assert!(!assembler.is_finished());
    let retried = vec![WireRetry {
        chain: 1,
        node: "a@h".into(),
        reason: "a@h down".into(),
        attempt: 2,
    }];
    assembler.apply(WireJobEvent::Finished { retried }).unwrap();
    let outcome = assembler.finish().unwrap();
    assert_eq!(outcome.traces[0].draws, [1.0, 2.0, 3.0]);
    assert_eq!(outcome.traces[1].draws, [4.0, 5.0, 6.0]);
    assert_eq!(outcome.traces[1].stats.len(), 3);
    assert_eq!(outcome.placements[1].node.as_str(), "b@h");
    assert_eq!(outcome.placements[1].attempts, 2);
    assert_eq!(outcome.retried.len(), 1);
}

#[test]
fn gaps_missing_chains_and_failures_are_errors() {
    let mut assembler = Assembler::new(JobId(9), 1);
    assembler.apply(progress(0, 1, 0, &[1.0])).unwrap();
    assert!(matches!(
        assembler.apply(progress(0, 1, 2, &[1.0])),
        Err(AssembleError::Protocol(_))
    ));
    assert!(matches!(
        assembler.apply(done(0, 1, 5, "a@h")),
        Err(AssembleError::Protocol(_))
    ));
    assert!(matches!(
        assembler.apply(progress(3, 1, 0, &[1.0])),
        Err(AssembleError::Protocol(_))
    ));
    assert_eq!(
        assembler.apply(WireJobEvent::Failed {
            error: "boom".into()
        }),
        Err(AssembleError::Failed("boom".into()))
    );
    let mut assembler = Assembler::new(JobId(9), 2);
    assembler.apply(progress(0, 1, 0, &[1.0])).unwrap();
    assembler.apply(done(0, 1, 1, "a@h")).unwrap();
    assembler
        .apply(WireJobEvent::Finished { retried: vec![] })
        .unwrap();
    assert!(matches!(
        assembler.finish(),
        Err(AssembleError::Protocol(_))
    ));
}

#[test]
fn a_request_is_checked_against_the_callers_limits_before_it_is_sent() {
    let text = include_str!("../../../models/eight_schools_noncentered.json");
    let model = sampler::CheckedModel::from_json(text, &sampler::Limits::default())
        .unwrap()
        .model()
        .clone();
    let settings = SamplerSettings {
        num_warmup: 1000,
        num_draws: 1_000_000_000,
        ..SamplerSettings::default()
    };
    let mut request = SampleRequest::new(model, settings, 1, Seed(1));
    let shape = request.shape().unwrap();
    assert_eq!(shape.columns, 18);
    let limits = JobLimits::memory(16_000_000_000);
    let error = request.check(&limits, &Holder::Machine).unwrap_err();
    assert_eq!(
        error.to_string(),
        "job needs 200.0 GB (1 chain x 1000000000 draws x 25 values), over this machine's \
         available memory of 16.0 GB: lower --draws/--chains"
    );
    // A broadcast burn-in counts as warmup; a job that fits passes.
    request.settings.num_draws = 1000;
    request.warmup = WarmupMode::Broadcast { burn_in: 100 };
    assert_eq!(request.shape().unwrap().warmup, 1100);
    assert_eq!(request.check(&limits, &Holder::Machine), Ok(()));
    // Chains are bounded even when the job keeps nothing.
    request.n_chains = u32::MAX;
    request.settings.num_draws = 0;
    let error = request.check(&limits, &Holder::Caller).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("job asks for 4294967295 chains, over the limit of"),
        "{error}"
    );
}
