//! Unit tests of the run statistics.

use std::time::Duration;

use super::{DispatchStats, GpuRun, LockstepTotals, Phase};

fn dispatch(phase: Phase, steps: &[u64], width: usize) -> DispatchStats {
    // As the NUTS driver counts: a group's lanes busy while any lane is.
    let lockstep = steps
        .chunks(width)
        .map(|group| group.len() as u64 * group.iter().copied().max().unwrap_or(0))
        .sum();
    DispatchStats {
        phase,
        device_time: Duration::ZERO,
        kernel_time: None,
        useful_steps: steps.iter().sum(),
        lockstep_steps: lockstep,
        dispatch_steps: steps.len() as u64 * steps.iter().copied().max().unwrap_or(0),
        draws: steps.len() as u64,
    }
}

fn run(dispatches: Vec<DispatchStats>) -> GpuRun {
    GpuRun {
        traces: Vec::new(),
        dispatches,
        warmup_time: Duration::ZERO,
        init_time: Duration::ZERO,
        search_time: Duration::ZERO,
        sampling_time: Duration::ZERO,
        queued_warmup_dispatches: 0,
    }
}

#[test]
fn lockstep_totals_count_waiting_lanes_per_group_and_per_dispatch() {
    // Two groups of two lanes: (3, 1) runs 6 lane-steps, (2, 2) runs 4; 8 useful.
    let run = run(vec![
        dispatch(Phase::Warmup, &[3, 1, 2, 2], 2),
        dispatch(Phase::Sampling, &[1, 1, 1, 5], 2),
    ]);
    let warmup = run.lockstep(Some(Phase::Warmup));
    assert_eq!(
        warmup,
        LockstepTotals {
            dispatches: 1,
            useful_steps: 8,
            lockstep_steps: 10,
            dispatch_steps: 12,
        }
    );
    assert_eq!(warmup.efficiency(), 0.8);
    assert!((warmup.dispatch_efficiency() - 8.0 / 12.0).abs() < 1e-15);
    let all = run.lockstep(None);
    assert_eq!(all.dispatches, 2);
    assert_eq!(all.useful_steps, 16);
    assert_eq!(all.lockstep_steps, 10 + 2 + 10);
    assert_eq!(all.dispatch_steps, 12 + 20);
}

#[test]
fn lockstep_efficiency_is_one_without_waiting_and_nan_without_work() {
    let even = run(vec![dispatch(Phase::Sampling, &[4; 64], 32)]).lockstep(None);
    assert_eq!(even.efficiency(), 1.0);
    assert_eq!(even.dispatch_efficiency(), 1.0);
    // One chain in a group of 32 lanes waits for nobody.
    let alone = run(vec![dispatch(Phase::Sampling, &[7], 32)]).lockstep(None);
    assert_eq!(alone.efficiency(), 1.0);
    assert!(run(Vec::new()).lockstep(None).efficiency().is_nan());
}

#[test]
fn room_made_during_warmup_goes_to_traces_without_any() {
    use super::records::{Room, empty_traces};
    let chains: Vec<sampler::ChainSpec> = (0..3)
        .map(|c| sampler::ChainSpec::new(sampler::ChainId(c)))
        .collect();
    let mut traces = empty_traces(&chains, &vec![vec![0.0; 2]; 3], 4);
    // A trace that already has room (the recording made it) keeps its own.
    traces[1].draws.reserve_exact(7);
    let kept = traces[1].draws.capacity();
    Room::make(3, 4, 10).give(&mut traces);
    assert!(traces[0].draws.capacity() >= 40 && traces[0].stats.capacity() >= 10);
    assert!(traces[2].draws.capacity() >= 40 && traces[2].stats.capacity() >= 10);
    assert_eq!(traces[1].draws.capacity(), kept);
    assert!(
        traces
            .iter()
            .all(|trace| trace.draws.is_empty() && trace.stats.is_empty())
    );
}

#[test]
fn auto_draws_output_maps_split_chains_where_the_device_allows() {
    use crate::DrawsOutput::{Auto, Copied, Mapped};
    assert_eq!(Auto.resolve(32, true), Mapped);
    assert_eq!(Auto.resolve(2, true), Mapped);
    assert_eq!(Auto.resolve(1, true), Copied);
    assert_eq!(Mapped.resolve(1, true), Mapped);
    assert_eq!(Copied.resolve(32, true), Copied);
    for output in [Auto, Mapped, Copied] {
        assert_eq!(output.resolve(32, false), Copied, "{output}");
    }
}
