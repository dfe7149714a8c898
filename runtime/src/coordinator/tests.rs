//! The coordinator's plain parts: placement by capacity, and a job's chains through
//! dispatch, draws, completion, loss and retry, and the broadcast warmup; the poison-job
//! rules (bounded attempts, nodes avoided, quarantine) with scheduling rounds run as the
//! coordinator runs them, over fake pools.

use std::sync::Arc;

use ractor::ActorId;

use super::job::{Job, JobSpec, MAX_ATTEMPTS};
use super::placement::{Capacity, PendingGroup, place, place_groups};
use crate::ids::{JobId, NodeName, RequestId, TaskId};
use crate::notes::MAX_NOTE_BYTES;
use crate::outbox::Waiter;
use crate::sampling::{DevicePreference, PoolKind, WARMUP_CHAIN, WarmupMode};
use crate::wire::{
    Envelope, JobReply, JobWire, Responder, WireChainDone, WireChainSpec, WireDrawBlock, WireDraws,
    WireError, WireFailure, WireJobEvent, WireRunNote, WireSettings, WireStats, WireTaskEvent,
    WireTuning,
};

fn cpu(slots: u32, busy: u32) -> Capacity {
    Capacity::new(node("w"), PoolKind::Cpu, slots, busy)
}

#[test]
fn placement_fills_free_slots_spreading_chains() {
    let mut pools = [cpu(2, 0), cpu(2, 0), cpu(4, 0)];
    assert_eq!(
        place(8, DevicePreference::Any, false, &mut pools),
        [2, 2, 4]
    );
    assert!(pools.iter().all(|w| w.busy == w.slots));

    // Three chains over three idle pools: one each, not three on the biggest.
    let mut pools = [cpu(4, 0), cpu(4, 0), cpu(4, 0)];
    assert_eq!(
        place(3, DevicePreference::Cpu, false, &mut pools),
        [1, 1, 1]
    );

    // More chains than free slots: the rest wait for slots to free up.
    let mut pools = [cpu(2, 1), cpu(2, 0)];
    assert_eq!(place(10, DevicePreference::Any, false, &mut pools), [1, 2]);
}

#[test]
fn placement_of_a_job_with_no_free_slot_anywhere() {
    // Nothing running yet: one dispatch to the least-loaded pool, queued there.
    let mut pools = [cpu(2, 6), cpu(4, 5)];
    assert_eq!(place(10, DevicePreference::Any, false, &mut pools), [0, 4]);
    // Already running: it waits for its own chains to free slots.
    let mut pools = [cpu(2, 6), cpu(4, 5)];
    assert_eq!(place(10, DevicePreference::Any, true, &mut pools), [0, 0]);
}

#[test]
fn placement_sends_many_chains_to_gpu_pools_and_respects_the_preference() {
    let gpu = Capacity::new(node("g"), PoolKind::Gpu, 4096, 0);
    // Not measured yet: the GPU pool gets a share as a probe, the CPU pool its free slots.
    let mut pools = [cpu(2, 0), gpu.clone()];
    assert_eq!(
        place(100, DevicePreference::Any, false, &mut pools),
        [2, 25]
    );
    // The only pool that may run the job gets all of it at once.
    let mut pools = [cpu(2, 0), gpu.clone()];
    assert_eq!(
        place(100, DevicePreference::Gpu, false, &mut pools),
        [0, 100]
    );
    let mut pools = [cpu(2, 0), gpu.clone()];
    assert_eq!(place(100, DevicePreference::Cpu, false, &mut pools), [2, 0]);
    let mut pools = [cpu(2, 0)];
    assert_eq!(place(100, DevicePreference::Gpu, false, &mut pools), [0]);
}

fn measured(mut pool: Capacity, wave_seconds: f64) -> Capacity {
    pool.wave_seconds = Some(wave_seconds);
    pool
}

fn gpu(slots: u32, busy: u32) -> Capacity {
    Capacity::new(node("g"), PoolKind::Gpu, slots, busy)
}

#[test]
fn placement_by_finish_time_sends_a_job_where_it_ends_soonest() {
    // A fast GPU (a wave of up to 4096 chains in 1 s) beside a 2-core pool (0.5 s a wave):
    // the pool can run four chains by the time the GPU has run the rest; two start now.
    let mut pools = [measured(cpu(2, 0), 0.5), measured(gpu(4096, 0), 1.0)];
    assert_eq!(
        place(100, DevicePreference::Any, false, &mut pools),
        [2, 96]
    );
    // A software GPU (14 s a wave) beside a pool that runs all 64 chains in 0.32 s: the
    // software GPU gets nothing.
    let mut pools = [measured(cpu(2, 0), 0.01), measured(gpu(1024, 0), 14.0)];
    assert_eq!(place(64, DevicePreference::Any, false, &mut pools), [2, 0]);
    // Two pools of the same speed share a job evenly, as slots free up.
    let mut pools = [measured(cpu(2, 0), 1.0), measured(cpu(2, 0), 1.0)];
    assert_eq!(place(8, DevicePreference::Cpu, false, &mut pools), [2, 2]);
    // A pool whose one wave outlasts the whole job on the other gets nothing, free slots
    // or not; one that fits a wave in gets it.
    let mut pools = [measured(cpu(2, 0), 1.0), measured(cpu(2, 0), 10.0)];
    assert_eq!(place(8, DevicePreference::Cpu, false, &mut pools), [2, 0]);
    let mut pools = [measured(cpu(2, 0), 1.0), measured(cpu(2, 0), 3.0)];
    assert_eq!(place(8, DevicePreference::Cpu, false, &mut pools), [2, 2]);
    // Queued chains count: a busy fast pool waits its turn behind what it has.
    let mut pools = [measured(cpu(2, 40), 1.0), measured(cpu(2, 0), 4.0)];
    assert_eq!(place(4, DevicePreference::Cpu, false, &mut pools), [0, 2]);
}

#[test]
fn placement_waits_for_a_probe_unless_the_measured_pools_finish_first() {
    let probing = |elapsed: f64| {
        let mut pool = gpu(4096, 0);
        pool.probing = Some(std::time::Duration::from_secs_f64(elapsed));
        pool
    };
    // The pool would need 25 s for the rest; the GPU's probe has run 0.1 s: wait for it.
    let mut pools = [measured(cpu(2, 0), 0.05), probing(0.1)];
    assert_eq!(place(1000, DevicePreference::Any, true, &mut pools), [0, 0]);
    // The probe has run 30 s, longer than the pool needs for everything: go on without it.
    let mut pools = [measured(cpu(2, 0), 0.05), probing(30.0)];
    assert_eq!(place(1000, DevicePreference::Any, true, &mut pools), [2, 0]);
}

#[test]
fn the_rate_book_learns_per_pool_and_model_and_stays_bounded() {
    use super::rates::{MAX_ENTRIES, PoolKey, RateBook, TaskTiming};
    let key = |short: &str| PoolKey {
        node: node(short),
        kind: PoolKind::Cpu,
    };
    let model = sampler::ModelHash([1; 16]);
    let timing = |pool: PoolKey, model, load| TaskTiming {
        pool,
        model,
        slots: 4,
        load,
        iterations: 2000,
        started: tokio::time::Instant::now(),
    };
    let mut book = RateBook::default();
    assert_eq!(book.wave_seconds(&key("a"), model, 2000), None);
    // 8 chains on 4 slots: two waves in 3 s, so 1.5 s a wave of 2000 iterations.
    book.record(
        &timing(key("a"), model, 8),
        std::time::Duration::from_secs(3),
    );
    let wave = book.wave_seconds(&key("a"), model, 2000).expect("measured");
    assert!((wave - 1.5).abs() < 1e-9, "{wave}");
    // Half the iterations, half the wave.
    let half = book.wave_seconds(&key("a"), model, 1000).expect("measured");
    assert!((half - 0.75).abs() < 1e-9, "{half}");
    // Another model or another pool is not measured by it.
    assert_eq!(
        book.wave_seconds(&key("a"), sampler::ModelHash([2; 16]), 2000),
        None
    );
    assert_eq!(book.wave_seconds(&key("b"), model, 2000), None);
    // A new measurement moves the estimate halfway.
    book.record(
        &timing(key("a"), model, 4),
        std::time::Duration::from_secs_f64(2.5),
    );
    let wave = book.wave_seconds(&key("a"), model, 2000).expect("measured");
    assert!((wave - 2.0).abs() < 1e-9, "{wave}");
    // Bounded: the oldest entries go.
    for n in 0..(MAX_ENTRIES + 10) {
        let pool = key(&format!("n{n}"));
        book.record(&timing(pool, model, 4), std::time::Duration::from_secs(1));
    }
    assert_eq!(book.len(), MAX_ENTRIES);
    assert_eq!(book.wave_seconds(&key("a"), model, 2000), None);
}

fn spec(n_chains: u32, warmup: WarmupMode) -> JobSpec {
    JobSpec {
        fingerprint: 0,
        model_hash: sampler::ModelHash([7; 16]),
        model_name: "m".into(),
        model: Arc::new(vec![1, 2, 3]),
        settings: WireSettings::from(&sampler::SamplerSettings::default()),
        n_chains,
        seed: 7,
        device: DevicePreference::Any,
        warmup,
        chains: None,
        blocks: true,
        positions: false,
        link: false,
    }
}

fn node(short: &str) -> NodeName {
    NodeName::new(short, "127.0.0.1").unwrap()
}

fn new_job(n_chains: u32, warmup: WarmupMode) -> Job {
    Job::new(
        JobId(1),
        node("client"),
        RequestId(1),
        spec(n_chains, warmup),
    )
}

fn draws(first: u64, n: usize, columns: usize) -> WireDraws {
    let mut stats = WireStats::default();
    for i in 0..n {
        stats.push(&sampler::DrawStats {
            lp: -(i as f64),
            accept_stat: 0.9,
            step_size: 0.5,
            tree_depth: 2,
            n_leapfrog: 3,
            divergent: false,
            energy: 1.0,
        });
    }
    WireDraws {
        warmup: false,
        first,
        values: vec![0.5; n * columns],
        stats,
    }
}

fn done(chain: u32, n_draws: u64) -> WireChainDone {
    WireChainDone {
        chain,
        n_columns: 2,
        n_draws,
        n_warmup_draws: 0,
        tuning: WireTuning {
            step_size: 0.5,
            inv_metric: vec![1.0, 2.0],
            dense: false,
        },
        init: vec![0.0, 0.0],
        final_position: vec![0.25, -0.25],
        grad_evals_warmup: 10,
        grad_evals_sampling: 20,
        warmup_seconds: 0.1,
        sampling_seconds: 0.2,
        ran_on: None,
    }
}

fn progress(chain: u32, first: u64, n: usize) -> WireTaskEvent {
    WireTaskEvent::Progress {
        chain,
        iteration: first + n as u64,
        total: 100,
        draws: Some(draws(first, n, 2)),
    }
}

fn events(job: &mut Job) -> Vec<WireJobEvent> {
    let events = job.outbox.after(0, usize::MAX, |_| 1);
    job.outbox.ack(events.last().map_or(0, |e| e.seq));
    events.into_iter().map(|e| e.event).collect()
}

#[test]
fn a_job_runs_its_chains_and_finishes_when_every_draw_arrived() {
    let mut job = new_job(3, WarmupMode::Independent);
    assert_eq!(job.pending().len(), 3);
    let pending = job.pending();
    let (a, b) = (TaskId(10), TaskId(11));
    let task = job.dispatch(
        a,
        ActorId::Local(1),
        node("a"),
        PoolKind::Cpu,
        pending[..2].to_vec(),
    );
    assert_eq!((task.seed, task.burn_in, task.chains.len()), (7, 0, 2));
    job.dispatch(
        b,
        ActorId::Local(2),
        node("b"),
        PoolKind::Cpu,
        pending[2..].to_vec(),
    );
    assert!(!job.has_pending());

    let applied = job.apply(
        a,
        vec![
            progress(0, 0, 4),
            progress(0, 4, 6),
            WireTaskEvent::ChainDone(done(0, 10)),
        ],
    );
    assert_eq!((applied.finished_chains, applied.task_complete), (1, false));
    let applied = job.apply(
        a,
        vec![progress(1, 0, 10), WireTaskEvent::ChainDone(done(1, 10))],
    );
    assert!(applied.task_complete);
    assert!(job.is_running());
    job.apply(
        b,
        vec![progress(2, 0, 10), WireTaskEvent::ChainDone(done(2, 10))],
    );
    assert!(!job.is_running());
    let events = events(&mut job);
    assert!(
        matches!(events.last(), Some(WireJobEvent::Finished { retried }) if retried.is_empty())
    );
    let done_chains: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            WireJobEvent::ChainDone {
                done, attempt: 1, ..
            } => Some(done.chain),
            _ => None,
        })
        .collect();
    assert_eq!(done_chains, [0, 1, 2]);
    assert!(job.is_collected());
}

#[test]
fn a_lost_task_reruns_only_its_unfinished_chains() {
    let mut job = new_job(2, WarmupMode::Independent);
    let pending = job.pending();
    let a = TaskId(1);
    job.dispatch(a, ActorId::Local(1), node("a"), PoolKind::Cpu, pending);
    job.apply(
        a,
        vec![
            progress(0, 0, 10),
            WireTaskEvent::ChainDone(done(0, 10)),
            progress(1, 0, 3),
        ],
    );
    events(&mut job);

    assert_eq!(job.lose(a, "a@127.0.0.1 down: connection lost"), Ok(true));
    assert_eq!(job.lose(a, "again"), Ok(false));
    let pending = job.pending();
    assert_eq!(pending.iter().map(|c| c.chain).collect::<Vec<_>>(), [1]);
    let events_after_loss = events(&mut job);
    assert_eq!(
        events_after_loss,
        [WireJobEvent::Retried {
            chains: vec![1],
            node: "a@127.0.0.1".into(),
            reason: "a@127.0.0.1 down: connection lost".into(),
            attempt: 2,
        }]
    );

    // Late events of the lost task are ignored; the new attempt counts draws from zero.
    let b = TaskId(2);
    job.dispatch(b, ActorId::Local(2), node("b"), PoolKind::Cpu, pending);
    job.apply(
        a,
        vec![progress(1, 3, 7), WireTaskEvent::ChainDone(done(1, 10))],
    );
    assert!(job.is_running());
    job.apply(
        b,
        vec![progress(1, 0, 10), WireTaskEvent::ChainDone(done(1, 10))],
    );
    assert!(!job.is_running());
    let events = events(&mut job);
    assert!(events.iter().any(
        |e| matches!(e, WireJobEvent::ChainDone { attempt: 2, node, .. } if node == "b@127.0.0.1")
    ));
    let Some(WireJobEvent::Finished { retried }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(retried.len(), 1);
    assert_eq!((retried[0].chain, retried[0].attempt), (1, 2));
}

#[test]
fn draws_that_do_not_join_up_or_do_not_add_up_break_the_task() {
    let mut job = new_job(1, WarmupMode::Independent);
    let pending = job.pending();
    let a = TaskId(1);
    job.dispatch(a, ActorId::Local(1), node("a"), PoolKind::Cpu, pending);
    let applied = job.apply(a, vec![progress(0, 0, 4), progress(0, 5, 4)]);
    assert!(
        applied
            .broken
            .unwrap()
            .contains("draws from 5 arrived after 4")
    );

    let mut job = job_with_one_task();
    let applied = job.apply(
        TaskId(1),
        vec![progress(0, 0, 4), WireTaskEvent::ChainDone(done(0, 10))],
    );
    assert!(
        applied
            .broken
            .unwrap()
            .contains("10 draws announced, 4 received")
    );
}

/// A block of the draws `(chain, first, n)`: the same draws as `progress` makes.
fn block(entries: &[(u32, u64, usize)]) -> WireTaskEvent {
    let mut block = WireDrawBlock::new(2, 100);
    for &(chain, first, n) in entries {
        let draws = draws(first, n, 2);
        let stats: Vec<_> = draws.stats.rows().collect();
        block.push(chain, false, first, first + n as u64, &draws.values, &stats);
    }
    WireTaskEvent::Block(block.into())
}

/// One GPU task of every chain of a job of 3, which takes `events`; the job's events.
fn gpu_job_events(blocks: bool, events_of_task: Vec<WireTaskEvent>) -> Vec<WireJobEvent> {
    let mut job = new_job(3, WarmupMode::Independent);
    job.spec.blocks = blocks;
    let pending = job.pending();
    job.dispatch(
        TaskId(1),
        ActorId::Local(1),
        node("g"),
        PoolKind::Gpu,
        pending,
    );
    let applied = job.apply(TaskId(1), events_of_task);
    assert_eq!(applied.broken, None);
    assert!(!job.is_running());
    events(&mut job)
}

#[test]
fn a_block_updates_chains_as_their_progress_events_do() {
    let done_all = || (0..3).map(|c| WireTaskEvent::ChainDone(done(c, 10)));
    let per_chain: Vec<_> = [
        (0, 0, 4),
        (1, 0, 4),
        (2, 0, 4),
        (0, 4, 6),
        (1, 4, 6),
        (2, 4, 6),
    ]
    .into_iter()
    .map(|(chain, first, n)| progress(chain, first, n))
    .chain(done_all())
    .collect();
    let blocks: Vec<_> = [
        block(&[(0, 0, 4), (1, 0, 4), (2, 0, 4)]),
        block(&[(0, 4, 6), (1, 4, 6), (2, 4, 6)]),
    ]
    .into_iter()
    .chain(done_all())
    .collect();
    // A client that does not read blocks gets exactly the per-chain events.
    let reference = gpu_job_events(false, per_chain);
    assert_eq!(gpu_job_events(false, blocks.clone()), reference);
    // One that does gets the blocks, each entry with its chain's attempt, and the same
    // events besides.
    let forwarded = gpu_job_events(true, blocks.clone());
    let mut sent_blocks = blocks.into_iter().filter_map(|e| match e {
        WireTaskEvent::Block(block) => Some(block),
        _ => None,
    });
    let mut split = Vec::new();
    for event in forwarded {
        match event {
            WireJobEvent::Block { attempts, block } => {
                assert_eq!(Some(&block), sent_blocks.next().as_ref());
                let entries = block.entries().unwrap();
                assert_eq!(attempts, vec![1; entries.len()]);
                split.extend(entries.iter().map(|entry| WireJobEvent::Progress {
                    chain: entry.chain,
                    attempt: 1,
                    iteration: entry.iteration,
                    total: block.total,
                    draws: Some(block.draws(entry)),
                }));
            }
            event => split.push(event),
        }
    }
    assert_eq!(split, reference);
}

#[test]
fn a_block_drops_chains_no_longer_running_in_its_task() {
    let mut job = new_job(3, WarmupMode::Independent);
    let pending = job.pending();
    let gpu = TaskId(1);
    job.dispatch(gpu, ActorId::Local(1), node("g"), PoolKind::Gpu, pending);
    job.apply(
        gpu,
        vec![block(&[(0, 0, 2), (1, 0, 2), (2, 0, 2)]), device_lost(1)],
    );
    events(&mut job);
    // Chain 1 runs again elsewhere: its late draws from this task are void.
    let applied = job.apply(gpu, vec![block(&[(0, 2, 3), (1, 2, 3), (2, 2, 3)])]);
    assert_eq!(applied.broken, None);
    let events = events(&mut job);
    let WireTaskEvent::Block(expected) = block(&[(0, 2, 3), (2, 2, 3)]) else {
        unreachable!()
    };
    let [WireJobEvent::Block { attempts, block }] = &events[..] else {
        panic!("{events:?}");
    };
    let chains: Vec<_> = block.entries().unwrap().iter().map(|e| e.chain).collect();
    assert_eq!((chains, attempts.clone()), (vec![0, 2], vec![1, 1]));
    assert_eq!(block, &expected);
}

#[test]
fn a_block_that_does_not_check_or_join_up_breaks_the_task() {
    let check = |events: Vec<WireTaskEvent>, reason: &str| {
        let mut job = job_with_one_task();
        let broken = job.apply(TaskId(1), events).broken.unwrap();
        assert!(broken.contains(reason), "{broken}");
    };
    check(
        vec![block(&[(0, 0, 4)]), block(&[(0, 5, 4)])],
        "draws from 5 arrived after 4",
    );
    check(
        vec![progress(0, 0, 4), block(&[(0, 3, 4)])],
        "draws from 3 arrived after 4",
    );
    check(
        vec![block(&[(0, 0, 4), (7, 0, 1)])],
        "chain 7, not in the task",
    );
    let mut malformed = block(&[(0, 0, 4)]);
    if let WireTaskEvent::Block(block) = &mut malformed {
        std::sync::Arc::make_mut(block).lp.truncate(8);
    }
    check(vec![malformed], "block column lp");
    check(
        vec![block(&[(0, 0, 4)]), WireTaskEvent::ChainDone(done(0, 10))],
        "10 draws announced, 4 received",
    );
}

/// A job whose client reads positions asks its tasks for them and forwards their blocks of
/// positions; one whose client does not, breaks the task that sends it such a block.
#[test]
fn blocks_of_positions_go_only_to_a_client_that_asked_for_them() {
    let positions = || {
        let WireTaskEvent::Block(mut block) = block(&[(0, 0, 4)]) else {
            unreachable!()
        };
        std::sync::Arc::make_mut(&mut block).positions = true;
        WireTaskEvent::Block(block)
    };
    for asked in [true, false] {
        let mut job = new_job(1, WarmupMode::Independent);
        job.spec.positions = asked;
        let pending = job.pending();
        let task = job.dispatch(
            TaskId(1),
            ActorId::Local(1),
            node("g"),
            PoolKind::Gpu,
            pending,
        );
        assert_eq!(task.positions, asked);
        let applied = job.apply(TaskId(1), vec![positions()]);
        if asked {
            assert_eq!(applied.broken, None);
            let forwarded = events(&mut job);
            assert!(
                forwarded
                    .iter()
                    .any(|e| matches!(e, WireJobEvent::Block { block, .. } if block.positions)),
                "{forwarded:?}"
            );
        } else {
            let broken = applied.broken.unwrap();
            assert!(broken.contains("a block of positions"), "{broken}");
        }
    }
}

fn job_with_one_task() -> Job {
    let mut job = new_job(1, WarmupMode::Independent);
    let pending = job.pending();
    job.dispatch(
        TaskId(1),
        ActorId::Local(1),
        node("a"),
        PoolKind::Cpu,
        pending,
    );
    job
}

#[test]
fn a_failed_chain_fails_the_job_and_too_many_losses_too() {
    let mut job = job_with_one_task();
    let applied = job.apply(
        TaskId(1),
        vec![WireTaskEvent::ChainFailed {
            chain: 0,
            error: "no finite starting point".into(),
            cause: WireFailure::Sampler,
        }],
    );
    assert_eq!(
        applied.chain_failed.as_deref(),
        Some("chain 0 failed on a@127.0.0.1: no finite starting point")
    );
    let tasks = job.fail(applied.chain_failed.unwrap());
    assert_eq!(tasks.len(), 1);
    assert!(matches!(
        events(&mut job).last(),
        Some(WireJobEvent::Failed { .. })
    ));

    // Refusals ran nothing, but they count: a chain no pool takes fails in the end.
    let mut job = new_job(1, WarmupMode::Independent);
    for attempt in 1..=MAX_ATTEMPTS {
        let pending = job.pending();
        assert_eq!(pending.len(), 1, "attempt {attempt}");
        let task = TaskId(u64::from(attempt));
        job.dispatch(task, ActorId::Local(1), node("a"), PoolKind::Cpu, pending);
        let refused = job.refuse(task, "the pool is draining");
        assert_eq!(
            refused.is_err(),
            attempt == MAX_ATTEMPTS,
            "attempt {attempt}"
        );
    }
}

fn device_lost(chain: u32) -> WireTaskEvent {
    WireTaskEvent::ChainFailed {
        chain,
        error: "on the GPU: device lost".into(),
        cause: WireFailure::Worker,
    }
}

#[test]
fn a_chain_whose_worker_failed_runs_again_alone_and_finished_chains_are_kept() {
    let mut job = new_job(3, WarmupMode::Independent);
    let pending = job.pending();
    let gpu = TaskId(1);
    job.dispatch(gpu, ActorId::Local(1), node("g"), PoolKind::Gpu, pending);
    // Chain 0 finished before the device was lost under chains 1 and 2.
    let applied = job.apply(
        gpu,
        vec![
            progress(0, 0, 10),
            WireTaskEvent::ChainDone(done(0, 10)),
            progress(1, 0, 4),
            device_lost(1),
            device_lost(2),
        ],
    );
    assert_eq!(applied.finished_chains, 1);
    assert!(applied.task_complete && applied.chain_failed.is_none());
    assert_eq!(
        applied.retried_chains,
        [
            (1, "worker failed: on the GPU: device lost".to_owned()),
            (2, "worker failed: on the GPU: device lost".to_owned()),
        ]
    );
    assert!(job.is_running());
    let retried: Vec<_> = events(&mut job)
        .into_iter()
        .filter_map(|e| match e {
            WireJobEvent::Retried {
                chains, attempt, ..
            } => Some((chains, attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(retried, [(vec![1], 2), (vec![2], 2)]);

    // The same chains, same numbers, on a CPU pool: the job completes.
    let pending = job.pending();
    assert_eq!(pending.iter().map(|c| c.chain).collect::<Vec<_>>(), [1, 2]);
    let cpu = TaskId(2);
    job.dispatch(cpu, ActorId::Local(2), node("c"), PoolKind::Cpu, pending);
    job.apply(
        cpu,
        vec![
            progress(1, 0, 10),
            WireTaskEvent::ChainDone(done(1, 10)),
            progress(2, 0, 10),
            WireTaskEvent::ChainDone(done(2, 10)),
        ],
    );
    assert!(!job.is_running());
    let Some(WireJobEvent::Finished { retried }) = events(&mut job).pop() else {
        panic!("the job did not finish");
    };
    let retried: Vec<_> = retried.iter().map(|r| (r.chain, r.attempt)).collect();
    assert_eq!(retried, [(1, 2), (2, 2)]);
}

#[test]
fn a_chain_whose_worker_keeps_failing_fails_the_job_naming_it_and_the_cause() {
    let mut job = new_job(2, WarmupMode::Independent);
    let nodes = ["g", "h", "g"];
    for (attempt, short) in (1..=MAX_ATTEMPTS).zip(nodes) {
        let pending = job.pending();
        let task = TaskId(u64::from(attempt));
        job.dispatch(task, ActorId::Local(1), node(short), PoolKind::Gpu, pending);
        let mut events = vec![device_lost(1)];
        if attempt == 1 {
            events.insert(0, WireTaskEvent::ChainDone(done(0, 0)));
        }
        let applied = job.apply(task, events);
        if attempt < MAX_ATTEMPTS {
            assert!(applied.chain_failed.is_none(), "attempt {attempt}");
        } else {
            assert_eq!(
                applied.chain_failed.as_deref(),
                Some(
                    "chain 1 failed on every node tried: g@127.0.0.1 (worker failed: on the GPU: device lost), h@127.0.0.1 (worker failed: on the GPU: device lost), g@127.0.0.1 (worker failed: on the GPU: device lost); the job is stopped"
                )
            );
        }
    }
}

#[test]
fn broadcast_warmup_runs_one_chain_then_starts_every_chain_from_it() {
    let mut job = new_job(3, WarmupMode::Broadcast { burn_in: 25 });
    let pending = job.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].chain, WARMUP_CHAIN.0);
    let w = TaskId(1);
    let task = job.dispatch(w, ActorId::Local(1), node("a"), PoolKind::Cpu, pending);
    assert_eq!((task.settings.num_draws, task.burn_in), (0, 0));
    assert!(!job.has_pending());

    let mut warmed = done(WARMUP_CHAIN.0, 0);
    warmed.final_position = vec![1.5, -2.5];
    job.apply(w, vec![WireTaskEvent::ChainDone(warmed)]);
    assert!(job.is_running());
    let events = events(&mut job);
    assert!(
        matches!(&events[1], WireJobEvent::WarmupDone { grad_evals: 30, .. }),
        "{events:?}"
    );

    let pending = job.pending();
    assert_eq!(pending.len(), 3);
    for chain in &pending {
        assert_eq!(chain.init.as_deref(), Some(&[1.5, -2.5][..]));
        assert_eq!(chain.tuning.as_ref().unwrap().inv_metric, [1.0, 2.0]);
    }
    let task = job.dispatch(
        TaskId(2),
        ActorId::Local(1),
        node("a"),
        PoolKind::Cpu,
        pending,
    );
    assert_eq!(task.burn_in, 25);
    assert_eq!(task.settings.num_draws, 1000);
}

/// A fake cluster of CPU pools for the poison-job rules: scheduling rounds as the
/// coordinator runs them (`Job::pending_groups`, then `place_groups`, then `Job::dispatch`).
struct Fake {
    /// Node, slots.
    pools: Vec<(NodeName, u32)>,
    next_task: u64,
}

/// A dispatch of a round: the task, its node, its chains.
type Dispatch = (TaskId, NodeName, Vec<u32>);

impl Fake {
    fn new(nodes: &[(&str, u32)]) -> Self {
        Self {
            pools: nodes.iter().map(|&(n, slots)| (node(n), slots)).collect(),
            next_task: 1,
        }
    }

    /// The node goes down: its pool is seen no more.
    fn remove(&mut self, short: &str) {
        self.pools.retain(|(n, _)| *n != node(short));
    }

    fn round(&mut self, job: &mut Job) -> Vec<Dispatch> {
        let groups = job.pending_groups();
        let mut capacity: Vec<Capacity> = self
            .pools
            .iter()
            .map(|(node, slots)| {
                let busy = job
                    .tasks
                    .values()
                    .filter(|r| &r.node == node)
                    .map(|r| r.chains.len() as u32)
                    .sum();
                Capacity::new(node.clone(), PoolKind::Cpu, *slots, busy)
            })
            .collect();
        let plan = place_groups(
            &groups,
            DevicePreference::Any,
            job.has_running(),
            &job.nodes_running(),
            &job.nodes_quarantined(),
            &mut capacity,
        );
        let mut dispatched = Vec::new();
        for (group, counts) in groups.into_iter().zip(plan) {
            let mut chains = group.chains;
            for (index, count) in counts.into_iter().enumerate() {
                if count == 0 {
                    continue;
                }
                let part: Vec<_> = chains.drain(..count as usize).collect();
                let numbers = part.iter().map(|c| c.chain).collect();
                let task = TaskId(self.next_task);
                self.next_task += 1;
                let node = self.pools[index].0.clone();
                let pool = ActorId::Local(index as u64);
                job.dispatch(task, pool, node.clone(), PoolKind::Cpu, part);
                dispatched.push((task, node, numbers));
            }
        }
        dispatched
    }
}

/// Every chain of `dispatch` finishes, with 10 draws.
fn complete(job: &mut Job, dispatch: &Dispatch) {
    let events = dispatch
        .2
        .iter()
        .flat_map(|&c| [progress(c, 0, 10), WireTaskEvent::ChainDone(done(c, 10))])
        .collect();
    let applied = job.apply(dispatch.0, events);
    assert!(applied.task_complete, "{applied:?}");
}

fn on<'a>(dispatches: &'a [Dispatch], short: &str) -> &'a Dispatch {
    dispatches
        .iter()
        .find(|d| d.1 == node(short))
        .unwrap_or_else(|| panic!("nothing on {short}: {dispatches:?}"))
}

#[test]
fn a_lost_task_s_chains_run_alone_and_a_second_loss_fails_the_job() {
    let mut cluster = Fake::new(&[("a", 3), ("b", 2), ("c", 2)]);
    let mut job = new_job(8, WarmupMode::Independent);
    let first = cluster.round(&mut job);
    assert_eq!(first.len(), 3, "{first:?}");
    let (on_a, on_b) = (on(&first, "a").clone(), on(&first, "b").clone());
    assert_eq!(on_b.2.len(), 2);
    // b's driver sees the pool vanish before membership marks b down.
    assert_eq!(job.lose(on_b.0, "its pool is gone"), Ok(true));
    job.node_down(&node("b"), "node lost: connection lost");
    cluster.remove("b");
    let groups = job.pending_groups();
    assert!(groups[0].alone, "{groups:?}");
    assert_eq!(groups[0].avoid, [node("b")]);
    let suspects: Vec<u32> = groups[0].chains.iter().map(|c| c.chain).collect();
    assert_eq!(suspects, on_b.2);

    // a and c run chains of the job: the suspects wait for a node that runs none.
    assert_eq!(cluster.round(&mut job), []);
    complete(&mut job, &on_a);
    let second = cluster.round(&mut job);
    assert_eq!(second, [(second[0].0, node("a"), suspects.clone())]);
    // The job's last pending chain stays off a (which has a free slot), and c is full.
    assert_eq!(cluster.round(&mut job), []);

    // a goes down under them too: the job fails, naming them, the nodes and the causes.
    let error = job
        .lose(second[0].0, "node lost: connection lost")
        .unwrap_err();
    assert_eq!(
        error,
        format!(
            "chains {}, {} failed on every node tried: b@127.0.0.1 (node lost: connection lost), a@127.0.0.1 (node lost: connection lost); the job is stopped so that it cannot take down more nodes",
            suspects[0], suspects[1]
        )
    );
}

#[test]
fn an_operator_kill_during_a_job_loses_nothing_and_the_job_completes() {
    let mut cluster = Fake::new(&[("a", 2), ("b", 2), ("c", 2)]);
    let mut job = new_job(6, WarmupMode::Independent);
    let first = cluster.round(&mut job);
    let on_b = on(&first, "b").clone();
    // One of b's chains finished before b was killed.
    let (kept, lost) = (on_b.2[0], on_b.2[1]);
    job.apply(
        on_b.0,
        vec![
            progress(kept, 0, 10),
            WireTaskEvent::ChainDone(done(kept, 10)),
            progress(lost, 0, 3),
        ],
    );
    assert_eq!(job.lose(on_b.0, "node lost: connection lost"), Ok(true));
    cluster.remove("b");
    assert_eq!(cluster.round(&mut job), []);
    complete(&mut job, on(&first, "c"));
    let again = cluster.round(&mut job);
    assert_eq!(again, [(again[0].0, node("c"), vec![lost])]);
    complete(&mut job, on(&first, "a"));
    assert_eq!(cluster.round(&mut job), []);
    complete(&mut job, &again[0]);
    assert!(!job.is_running() && !job.has_pending());

    let events = events(&mut job);
    let done: Vec<(u32, u32, String)> = events
        .iter()
        .filter_map(|e| match e {
            WireJobEvent::ChainDone {
                done,
                attempt,
                node,
            } => Some((done.chain, *attempt, node.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(done.len(), 6, "{done:?}");
    assert!(done.contains(&(kept, 1, "b@127.0.0.1".into())));
    assert!(done.contains(&(lost, 2, "c@127.0.0.1".into())));
    let retried: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, WireJobEvent::Retried { .. }))
        .collect();
    assert_eq!(
        retried,
        [&WireJobEvent::Retried {
            chains: vec![lost],
            node: "b@127.0.0.1".into(),
            reason: "node lost: connection lost".into(),
            attempt: 2,
        }]
    );
    let Some(WireJobEvent::Finished { retried }) = events.last() else {
        panic!("{events:?}");
    };
    let retried: Vec<_> = retried.iter().map(|r| (r.chain, r.attempt)).collect();
    assert_eq!(retried, [(lost, 2)]);
}

#[test]
fn quarantined_tasks_of_a_job_run_one_at_a_time() {
    let mut cluster = Fake::new(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)]);
    let mut job = new_job(3, WarmupMode::Independent);
    let first = cluster.round(&mut job);
    assert_eq!(first.len(), 3, "{first:?}");
    for lost in &first[..2] {
        assert_eq!(job.lose(lost.0, "node lost: connection lost"), Ok(true));
        cluster.pools.retain(|(n, _)| *n != lost.1);
    }
    // Two groups wait; the first runs on the one node free of the job, the second waits
    // for it although another node is free then.
    let second = cluster.round(&mut job);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0].2, first[0].2);
    complete(&mut job, &first[2]);
    assert_eq!(cluster.round(&mut job), []);
    complete(&mut job, &second[0]);
    let third = cluster.round(&mut job);
    assert_eq!(third.len(), 1, "{third:?}");
    assert_eq!(third[0].2, first[1].2);
    complete(&mut job, &third[0]);
    assert!(!job.is_running());
}

#[test]
fn a_chain_never_runs_again_where_it_failed_while_another_node_can_run_it() {
    let mut cluster = Fake::new(&[("a", 4), ("b", 2), ("c", 1)]);
    let mut job = new_job(1, WarmupMode::Independent);
    let mut tried = Vec::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let dispatched = cluster.round(&mut job);
        assert_eq!(dispatched.len(), 1, "{dispatched:?}");
        let (task, node, _) = &dispatched[0];
        tried.push(node.to_string());
        let applied = job.apply(*task, vec![device_lost(0)]);
        assert_eq!(applied.chain_failed.is_some(), attempt == MAX_ATTEMPTS);
        assert!(job.pending_groups().iter().all(|g| !g.alone));
    }
    // The most free slots first, then never the same node twice.
    assert_eq!(tried, ["a@127.0.0.1", "b@127.0.0.1", "c@127.0.0.1"]);

    // Where no other node can run it, the node where it failed runs it again (a single
    // node's restarted pool), within the bound.
    let mut cluster = Fake::new(&[("a", 4)]);
    let mut job = new_job(1, WarmupMode::Independent);
    let first = cluster.round(&mut job);
    job.apply(first[0].0, vec![device_lost(0)]);
    let second = cluster.round(&mut job);
    assert_eq!(second[0].1, node("a"));
    complete(&mut job, &second[0]);
    assert!(!job.is_running());
}

#[test]
fn a_refused_task_s_chains_go_elsewhere_and_are_not_suspect() {
    let mut cluster = Fake::new(&[("a", 2), ("b", 1)]);
    let mut job = new_job(1, WarmupMode::Independent);
    let first = cluster.round(&mut job);
    assert_eq!(first[0].1, node("a"));
    assert_eq!(job.refuse(first[0].0, "a@127.0.0.1 is draining"), Ok(true));
    let groups = job.pending_groups();
    assert_eq!(groups.len(), 1);
    assert!(!groups[0].alone);
    assert_eq!(groups[0].avoid, [node("a")]);
    let second = cluster.round(&mut job);
    assert_eq!(second[0].1, node("b"));
    // Lost there: its first loss, so it is quarantined now, not failed.
    assert_eq!(
        job.lose(second[0].0, "node lost: connection lost"),
        Ok(true)
    );
    assert!(job.pending_groups()[0].alone);
}

#[test]
fn placement_keeps_quarantined_chains_alone_and_off_the_nodes_they_avoid() {
    let chains = |numbers: &[u32]| -> Vec<_> {
        numbers
            .iter()
            .map(|&chain| crate::wire::WireChainSpec {
                chain,
                init: None,
                tuning: None,
            })
            .collect()
    };
    let on = |short: &str, busy: u32| Capacity::new(node(short), PoolKind::Cpu, 4, busy);
    let groups = [
        PendingGroup {
            chains: chains(&[0, 1]),
            alone: true,
            avoid: vec![node("b")],
        },
        PendingGroup {
            chains: chains(&[2, 3, 4]),
            alone: false,
            avoid: Vec::new(),
        },
    ];
    // a runs the job, b is where the suspects were lost: they go to c, the rest not to c.
    let mut pools = [on("a", 1), on("b", 0), on("c", 0)];
    let plan = place_groups(
        &groups,
        DevicePreference::Any,
        true,
        &[node("a")],
        &[],
        &mut pools,
    );
    assert_eq!(plan, [vec![0, 0, 2], vec![1, 2, 0]]);

    // No node free of the job but the avoided one: they wait, the rest is placed.
    let mut pools = [on("a", 1), on("b", 0)];
    let plan = place_groups(
        &groups,
        DevicePreference::Any,
        true,
        &[node("a")],
        &[],
        &mut pools,
    );
    assert_eq!(plan, [vec![0, 0], vec![1, 2]]);

    // Only the avoided node exists: it runs them (alone).
    let mut pools = [on("b", 0)];
    let plan = place_groups(&groups, DevicePreference::Any, false, &[], &[], &mut pools);
    assert_eq!(plan, [vec![2], vec![0]]);
}

#[test]
fn a_job_over_a_subset_runs_those_chains_with_their_numbers_and_finishes_with_them() {
    let mut spec = spec(6, WarmupMode::Independent);
    spec.chains = Some(vec![1, 4]);
    assert_eq!(spec.count(), 2);
    let mut job = Job::new(JobId(2), node("client"), RequestId(1), spec);
    let pending = job.pending();
    let numbers: Vec<u32> = pending.iter().map(|c| c.chain).collect();
    assert_eq!(numbers, [1, 4]);
    let task = TaskId(3);
    let wire = job.dispatch(task, ActorId::Local(1), node("a"), PoolKind::Cpu, pending);
    assert_eq!(wire.seed, 7);
    // A chain the job does not run is ignored, whatever a pool says.
    job.apply(
        task,
        vec![progress(0, 0, 10), WireTaskEvent::ChainDone(done(0, 10))],
    );
    assert!(job.is_running());
    job.apply(
        task,
        vec![progress(1, 0, 10), WireTaskEvent::ChainDone(done(1, 10))],
    );
    assert!(job.is_running());
    job.apply(
        task,
        vec![progress(4, 0, 10), WireTaskEvent::ChainDone(done(4, 10))],
    );
    assert!(!job.is_running());
    let events = events(&mut job);
    let done_chains: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            WireJobEvent::ChainDone { done, .. } => Some(done.chain),
            _ => None,
        })
        .collect();
    assert_eq!(done_chains, [1, 4]);
    assert!(matches!(events.last(), Some(WireJobEvent::Finished { .. })));
}

#[test]
fn a_draining_coordinator_tells_running_jobs_once_they_are_told() {
    let mut job = new_job(1, WarmupMode::Independent);
    job.notify_draining(&node("a"), std::time::Duration::from_secs(30));
    assert_eq!(
        events(&mut job),
        [WireJobEvent::Draining {
            node: "a@127.0.0.1".into(),
            grace_ms: 30_000
        }]
    );
    job.fail("cancelled".into());
    events(&mut job);
    job.notify_draining(&node("a"), std::time::Duration::from_secs(30));
    assert_eq!(events(&mut job), []);
}

fn request(n_chains: u32, chains: Option<Vec<u32>>) -> crate::wire::WireSampleRequest {
    let model = sampler::CheckedModel::from_json(
        r#"{"ir_version": 1, "name": "m", "parameters": [{"name": "mu"}],
            "model": [{"sample": {"value": "mu", "dist": {"normal": {"mu": 0, "sigma": 1}}}}]}"#,
        &sampler::Limits::default(),
    )
    .unwrap();
    let mut request = crate::sampling::SampleRequest::new(
        model.model().clone(),
        sampler::SamplerSettings::default(),
        n_chains,
        sampler::Seed(3),
    )
    .to_wire();
    request.chains = chains;
    request
}

/// The endpoint's check with no limits in the way.
fn check(request: crate::wire::WireSampleRequest) -> Result<JobSpec, crate::wire::WireError> {
    super::endpoint::check(request, &crate::limits::JobLimits::default(), &node("a"))
}

#[test]
fn a_subset_of_chains_is_checked_at_the_endpoint() {
    let spec = check(request(6, Some(vec![0, 2, 5]))).unwrap();
    assert_eq!((spec.n_chains, spec.count()), (6, 3));
    assert_eq!(check(request(6, None)).unwrap().count(), 6);
    for (chains, expected) in [
        (vec![], "a subset of 0 chains of a job of 6"),
        (
            vec![0, 1, 2, 3, 4, 5, 5],
            "a subset of 7 chains of a job of 6",
        ),
        (
            vec![1, 6],
            "chain 6 in the subset is not one of the job's 6 chains",
        ),
        (vec![u32::MAX], "chain 4294967295 in the subset"),
        (vec![2, 2], "must increase: 2 comes after 2"),
        (vec![3, 1], "must increase: 1 comes after 3"),
    ] {
        let error = check(request(6, Some(chains.clone()))).unwrap_err();
        assert!(
            matches!(&error, crate::wire::WireError::Invalid { what, reason }
                if what == "request" && reason.contains(expected)),
            "{chains:?}: {error}"
        );
    }
    // The subset is part of what a retried submission must repeat.
    let whole = check(request(6, None)).unwrap();
    let part = check(request(6, Some(vec![1]))).unwrap();
    assert_ne!(whole.fingerprint, part.fingerprint);
}

/// Polls `job` after `ack` without waiting: the answer's events (acknowledged) and notes.
fn poll_now(job: &mut Job, ack: &mut u64) -> (Vec<WireJobEvent>, Vec<WireRunNote>) {
    let (port, mut answer) = ractor::concurrency::oneshot();
    let responder = Responder::<JobWire>::new(port.into(), RequestId(2), node("c"));
    job.poll(*ack, false, Waiter::new(responder, *ack, 0, None));
    job.expire_waiters(tokio::time::Instant::now());
    let bytes = answer.try_recv().expect("an answer");
    let reply = Envelope::<Result<JobReply, WireError>>::decode(&bytes).unwrap();
    let Ok(JobReply::Events { events, notes, .. }) = reply.body else {
        panic!("{:?}", reply.body);
    };
    *ack = events.last().map_or(*ack, |e| e.seq);
    (events.into_iter().map(|e| e.event).collect(), notes)
}

#[test]
fn a_job_keeps_its_pools_notes_once_cut_and_answers_every_poll_with_them() {
    let mut job = new_job(3, WarmupMode::Independent);
    let pending = job.pending();
    let (a, b) = (TaskId(1), TaskId(2));
    let gpu = |job: &mut Job, task: TaskId, short, chains: &[WireChainSpec]| {
        job.dispatch(
            task,
            ActorId::Local(task.0),
            node(short),
            PoolKind::Gpu,
            chains.to_vec(),
        );
    };
    gpu(&mut job, a, "g", &pending[..2]);
    gpu(&mut job, b, "h", &pending[2..]);
    let text = "GPU gpu0 (llvmpipe) f32 (auto: f32 agrees with f64)";
    let noted = |chain, text: &str| {
        WireTaskEvent::ChainDone(WireChainDone {
            ran_on: Some(text.to_owned()),
            ..done(chain, 10)
        })
    };
    // The same note from two chains of node g (two runs of one task) is kept once.
    job.apply(
        a,
        vec![
            progress(0, 0, 10),
            noted(0, text),
            progress(1, 0, 10),
            noted(1, text),
        ],
    );
    let mut ack = 0;
    let (events, notes) = poll_now(&mut job, &mut ack);
    assert_eq!(
        notes,
        [WireRunNote {
            node: node("g").to_string(),
            text: text.to_owned(),
        }]
    );
    // Forwarded without it: the notes travel beside the events.
    let forwarded: Vec<Option<&String>> = events
        .iter()
        .filter_map(|e| match e {
            WireJobEvent::ChainDone { done, .. } => Some(done.ran_on.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(forwarded, [None, None]);

    // Node h's note, too long, is cut; the answer after it still carries g's.
    let long = format!(
        "CPU (the GPU refused the model): {}",
        "é".repeat(MAX_NOTE_BYTES)
    );
    job.apply(b, vec![progress(2, 0, 10), noted(2, &long)]);
    let (events, notes) = poll_now(&mut job, &mut ack);
    assert!(matches!(events.last(), Some(WireJobEvent::Finished { .. })));
    let texts: Vec<(&str, usize)> = notes
        .iter()
        .map(|n| (n.node.as_str(), n.text.len()))
        .collect();
    assert_eq!(texts[0], ("g@127.0.0.1", text.len()));
    assert_eq!(texts[1].0, "h@127.0.0.1");
    assert!(texts[1].1 <= MAX_NOTE_BYTES && texts[1].1 > MAX_NOTE_BYTES - 4);
    assert!(
        notes[1]
            .text
            .starts_with("CPU (the GPU refused the model): é")
    );
    assert_eq!(texts.len(), 2);
}

/// Parks a poll of `job` after `ack` (one that follows, or not): where its answer comes.
fn park(job: &mut Job, ack: u64, follow: bool) -> ractor::concurrency::OneshotReceiver<Vec<u8>> {
    let (port, answer) = ractor::concurrency::oneshot();
    let responder = Responder::<JobWire>::new(port.into(), RequestId(2), node("c"));
    job.poll(ack, follow, Waiter::new(responder, ack, 60_000, None));
    answer
}

/// The numbers of the events a parked poll was answered with; `None` while it waits.
fn answered(answer: &mut ractor::concurrency::OneshotReceiver<Vec<u8>>) -> Option<Vec<u64>> {
    let bytes = answer.try_recv().ok()?;
    let reply = Envelope::<Result<JobReply, WireError>>::decode(&bytes).unwrap();
    let Ok(JobReply::Events { events, .. }) = reply.body else {
        panic!("{:?}", reply.body);
    };
    Some(events.iter().map(|e| e.seq).collect())
}

/// A job link keeps several polls at the coordinator: the second waits behind the first and
/// is answered after the first's events, never with them again; one past the link's limit
/// answers the oldest at once; a poll that does not follow answers every parked one and
/// starts from its own ack.
#[test]
fn polls_that_follow_wait_in_turn_and_start_after_the_answer_before() {
    let mut job = new_job(2, WarmupMode::Independent);
    let mut ack = 0;
    poll_now(&mut job, &mut ack);
    let event = |job: &mut Job| job.notify_draining(&node("a"), std::time::Duration::from_secs(9));
    let mut first = park(&mut job, ack, false);
    let mut second = park(&mut job, ack, true);
    assert_eq!(answered(&mut first), None, "nothing to answer with yet");
    assert_eq!(answered(&mut second), None);
    event(&mut job);
    assert_eq!(answered(&mut first), Some(vec![ack + 1]));
    assert_eq!(answered(&mut second), None, "it follows the first's answer");
    event(&mut job);
    assert_eq!(answered(&mut second), Some(vec![ack + 2]));
    // Up to IN_FLIGHT wait; one more that follows has the oldest answered, with nothing
    // new.
    let mut parked: Vec<_> = (0..=crate::link::IN_FLIGHT)
        .map(|_| park(&mut job, ack, true))
        .collect();
    assert_eq!(answered(&mut parked[0]), Some(vec![]));
    for answer in &mut parked[1..] {
        assert_eq!(answered(answer), None);
    }
    // A poll that does not follow (the client lost its link) starts from its ack: the events
    // the link's polls got come again.
    let mut again = park(&mut job, ack, false);
    for answer in &mut parked[1..] {
        assert_eq!(answered(answer), Some(vec![]));
    }
    assert_eq!(answered(&mut again), Some(vec![ack + 1, ack + 2]));
}
