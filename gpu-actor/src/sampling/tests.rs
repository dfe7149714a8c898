//! Unit tests of the run statistics and of the recording of draws; the device the tests of
//! `sampling`'s modules open.

use std::time::Duration;

use super::{DispatchStats, GpuRun, LockstepTotals, Phase};
use crate::device::{DeviceOptions, GpuDevice};
use crate::error::GpuError;

/// The first usable adapter; `None` (the test is skipped, saying so) where there is none,
/// unless `REQUIRE_GPU=1` makes that a failure.
pub(super) fn device() -> Option<GpuDevice> {
    match GpuDevice::open(&DeviceOptions::default()) {
        Ok(device) => Some(device),
        Err(err @ GpuError::NoAdapter) if std::env::var("REQUIRE_GPU").as_deref() != Ok("1") => {
            eprintln!("skipping GPU test: {err} (set REQUIRE_GPU=1 to make this a failure)");
            None
        }
        Err(err) => panic!("cannot open a GPU device: {err}"),
    }
}

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
        precision: super::PrecisionChoice {
            precision: crate::Precision::F32,
            reason: "asked".to_owned(),
            f32_chains: 0,
        },
        restarted: Vec::new(),
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
    use super::records::{empty_traces, give_room};
    use sampler::Room;
    let chains: Vec<sampler::ChainSpec> = (0..3)
        .map(|c| sampler::ChainSpec::new(sampler::ChainId(c)))
        .collect();
    let mut traces = empty_traces(&chains, &vec![vec![0.0; 2]; 3], 4);
    // A trace that already has room (the recording made it) keeps its own.
    traces[1].draws.reserve_exact(7);
    let kept = traces[1].draws.capacity();
    give_room(Room::make(3, 4, 10), &mut traces);
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

/// A draw the observer saw: chain, iteration, values.
type SeenDraw = (u32, u64, Vec<f64>);

/// Records five draws (two of warmup) of each of three chains of a two-parameter model,
/// for an observer that keeps the draws or streams them: what the observer saw, and the
/// traces.
fn record_for(keeps: bool) -> (Vec<SeenDraw>, Vec<sampler::ChainTrace>) {
    use std::sync::Mutex;

    use sampler::{ChainId, ChainSpec, CheckedModel, DrawEvent, DrawStats, Limits, Observer};

    use super::records::{Draw, RecordSettings, empty_traces, record};
    use sampler::OutputWriter;

    struct Seen {
        keeps: bool,
        draws: Mutex<Vec<SeenDraw>>,
    }
    impl Observer for Seen {
        fn on_draw(&self, event: &DrawEvent) {
            let draw = (event.chain.0, event.iteration, event.values.to_vec());
            self.draws.lock().unwrap().push(draw);
        }
        fn keeps_draws(&self) -> bool {
            self.keeps
        }
    }

    let model = CheckedModel::from_json(
        r#"{"ir_version": 1, "name": "two",
          "parameters": [{"name": "a"}, {"name": "b", "constraint": "positive"}],
          "model": [{"sample": {"value": "a", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
                    {"sample": {"value": "b", "dist": {"normal": {"mu": 0, "sigma": 1}}}}]}"#,
        &Limits::default(),
    )
    .unwrap();
    let writer = OutputWriter::new(model.program());
    let chains: Vec<ChainSpec> = (0..3).map(|c| ChainSpec::new(ChainId(c))).collect();
    let mut traces = empty_traces(&chains, &vec![vec![0.0; 2]; 3], writer.n_columns());
    let settings = sampler::SamplerSettings {
        num_warmup: 2,
        num_draws: 3,
        save_warmup: true,
        ..sampler::SamplerSettings::default()
    };
    let observer = Seen {
        keeps,
        draws: Mutex::new(Vec::new()),
    };
    let recording = RecordSettings::new(&settings, &observer);
    assert_eq!(recording.draws, if keeps { 3 } else { 0 });
    record(&mut traces, &writer, recording, &observer, |range, emit| {
        for c in range {
            for i in 0..5u64 {
                let q = [c as f64 + 0.1 * i as f64, -0.5];
                let stats = DrawStats {
                    lp: -(i as f64),
                    ..DrawStats::default()
                };
                let warmup = i < 2;
                emit(
                    c,
                    Draw {
                        q: &q,
                        stats,
                        iteration: i,
                        warmup,
                    },
                );
            }
        }
    });
    let mut seen = observer.draws.into_inner().unwrap();
    seen.sort_by_key(|(chain, iteration, _)| (*chain, *iteration));
    (seen, traces)
}

#[test]
fn a_streaming_observer_gets_every_draw_and_the_traces_keep_none() {
    let (seen_kept, kept) = record_for(true);
    let (seen_streamed, streamed) = record_for(false);
    assert_eq!(seen_kept, seen_streamed, "the observer sees the same draws");
    assert_eq!(seen_streamed.len(), 15);
    assert!(seen_streamed.iter().all(|(_, _, values)| values.len() == 2));
    for (kept, streamed) in kept.iter().zip(&streamed) {
        assert_eq!(kept.n_draws(), 3);
        assert_eq!(kept.warmup_stats.len(), 2);
        assert!(streamed.draws.is_empty() && streamed.stats.is_empty());
        assert!(streamed.warmup_draws.is_empty() && streamed.warmup_stats.is_empty());
        assert_eq!(streamed.draws.capacity(), 0);
    }
}

/// An observer that takes batches of positions gets each draw's unconstrained position
/// (the model's dimension, not its values' width) and no values are written; where the
/// traces keep the draws, values still.
#[test]
fn an_observer_that_takes_positions_gets_them_in_batches() {
    use std::sync::Mutex;

    use sampler::{
        ChainId, ChainSpec, CheckedModel, DrawBatch, DrawStats, Limits, Observer, OutputWriter,
    };

    use super::records::{Draw, RecordSettings, empty_traces, record};

    /// Each batch's kind and width, and its chains' values.
    type SeenBatch = (bool, usize, Vec<(u32, Vec<f64>)>);

    struct Batches {
        keeps: bool,
        seen: Mutex<Vec<SeenBatch>>,
    }
    impl Observer for Batches {
        fn wants_batches(&self) -> bool {
            true
        }
        fn wants_positions(&self) -> bool {
            true
        }
        fn on_batch(&self, batch: &DrawBatch) {
            let chains = batch
                .chains
                .iter()
                .map(|c| (c.chain.0, c.values.to_vec()))
                .collect();
            let seen = (batch.positions, batch.n_columns, chains);
            self.seen.lock().unwrap().push(seen);
        }
        fn keeps_draws(&self) -> bool {
            self.keeps
        }
    }

    let model = CheckedModel::from_json(
        r#"{"ir_version": 1, "name": "two",
          "parameters": [{"name": "a"}, {"name": "b", "constraint": "positive"}],
          "transformed": [{"name": "c", "value": {"add": ["a", "b"]}}],
          "model": [{"sample": {"value": "a", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
                    {"sample": {"value": "b", "dist": {"normal": {"mu": 0, "sigma": 1}}}}]}"#,
        &Limits::default(),
    )
    .unwrap();
    let writer = OutputWriter::new(model.program());
    assert_eq!((writer.dim(), writer.n_columns()), (2, 3));
    let q = |c: usize, i: u64| [c as f64 + 0.1 * i as f64, -0.5];
    for keeps in [false, true] {
        let chains: Vec<ChainSpec> = (0..3).map(|c| ChainSpec::new(ChainId(c))).collect();
        let mut traces = empty_traces(&chains, &vec![vec![0.0; 2]; 3], writer.n_columns());
        let settings = sampler::SamplerSettings {
            num_warmup: 2,
            num_draws: 3,
            ..sampler::SamplerSettings::default()
        };
        let observer = Batches {
            keeps,
            seen: Mutex::new(Vec::new()),
        };
        let recording = RecordSettings::new(&settings, &observer);
        record(&mut traces, &writer, recording, &observer, |range, emit| {
            for c in range {
                for i in 0..5u64 {
                    let warmup = i < 2;
                    let q = q(c, i);
                    let draw = Draw {
                        q: if warmup { &[] } else { &q },
                        stats: DrawStats::default(),
                        iteration: i,
                        warmup,
                    };
                    emit(c, draw);
                }
            }
        });
        let seen = observer.seen.into_inner().unwrap();
        assert!(!seen.is_empty());
        for (positions, n_columns, chains) in seen {
            assert_eq!((positions, n_columns), (!keeps, if keeps { 3 } else { 2 }));
            for (chain, values) in chains {
                let c = chain as usize;
                let expected: Vec<f64> = if keeps {
                    let mut out = vec![0.0; 3];
                    (2..5)
                        .flat_map(|i| {
                            writer.clone().write(&q(c, i), &mut out);
                            out.clone()
                        })
                        .collect()
                } else {
                    (2..5).flat_map(|i| q(c, i)).collect()
                };
                assert_eq!(values, expected, "chain {chain}");
            }
        }
    }
}
