//! The split of a job's chains over workers, with made-up speeds.

use sampler::ModelHash;

use super::{Rates, plan};

#[test]
fn unmeasured_workers_share_evenly_and_the_first_get_the_remainder() {
    assert_eq!(plan(8192, &[None, None], 1024), [4096, 4096]);
    assert_eq!(plan(10, &[None, None, None], 1), [4, 3, 3]);
    assert_eq!(plan(262_144, &[None; 4], 1024), [65_536; 4]);
}

#[test]
fn shares_follow_measured_speed() {
    // Within 10%: equal shares.
    assert_eq!(plan(8000, &[Some(1.05), Some(1.0)], 100), [4000, 4000]);
    // Three times as fast: three quarters of the chains.
    assert_eq!(plan(8000, &[Some(3.0), Some(1.0)], 100), [6000, 2000]);
    // An unmeasured worker counts as the mean of the measured ones.
    assert_eq!(
        plan(9000, &[Some(4.0), Some(2.0), None], 100),
        [4000, 2000, 3000]
    );
    let counts = plan(1001, &[Some(1.0), Some(2.0), Some(4.0)], 1);
    assert_eq!(counts.iter().sum::<usize>(), 1001);
    assert_eq!(counts, [143, 286, 572]);
}

#[test]
fn small_jobs_are_not_split_below_the_minimum_share() {
    // One share: the fastest worker takes it all.
    assert_eq!(plan(1000, &[Some(1.0), Some(2.0)], 1024), [0, 1000]);
    assert_eq!(plan(1000, &[None, None], 1024), [1000, 0]);
    // Two shares among four workers: the two fastest.
    assert_eq!(
        plan(2048, &[Some(1.0), Some(5.0), Some(2.0), Some(5.0)], 1024),
        [0, 1024, 0, 1024]
    );
    // A minimum share of zero means one chain.
    assert_eq!(plan(3, &[None; 4], 0), [1, 1, 1, 0]);
}

#[test]
fn every_chain_is_given_exactly_once() {
    let speeds = [Some(0.3), None, Some(7.1), Some(1e-9), Some(f64::NAN)];
    for chains in [1, 2, 5, 17, 1023, 65_537] {
        for min_share in [0, 1, 3, 1024] {
            let counts = plan(chains, &speeds, min_share);
            assert_eq!(counts.len(), speeds.len());
            assert_eq!(counts.iter().sum::<usize>(), chains, "{chains} {min_share}");
        }
    }
    assert!(plan(0, &[None], 1).iter().all(|&c| c == 0));
    assert!(plan(5, &[], 1).is_empty());
}

#[test]
fn rates_skip_the_compiling_share_smooth_the_others_and_ignore_empty_ones() {
    let model = ModelHash([1; 16]);
    let mut rates = Rates::default();
    assert_eq!(rates.get(model), None);
    // The first share compiled the kernels: not a measurement.
    rates.record(model, 100, 10, 9.0);
    assert_eq!(rates.get(model), None);
    rates.record(model, 100, 10, 1.0);
    assert_eq!(rates.get(model), Some(1000.0));
    rates.record(model, 100, 10, 0.5);
    assert_eq!(rates.get(model), Some(1500.0));
    rates.record(model, 0, 10, 1.0);
    rates.record(model, 100, 10, 0.0);
    assert_eq!(rates.get(model), Some(1500.0));
    assert_eq!(rates.get(ModelHash([2; 16])), None);
}
