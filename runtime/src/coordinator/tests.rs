//! The coordinator's plain parts: placement by capacity, and a job's chains through
//! dispatch, draws, completion, loss and retry, and the broadcast warmup.

use std::sync::Arc;

use ractor::ActorId;

use super::job::{Job, JobSpec, MAX_ATTEMPTS};
use super::placement::{Capacity, place};
use crate::ids::{JobId, NodeName, RequestId, TaskId};
use crate::sampling::{DevicePreference, WARMUP_CHAIN, WarmupMode, WorkerKind};
use crate::wire::{
    WireChainDone, WireDraws, WireFailure, WireJobEvent, WireSettings, WireStats, WireTaskEvent,
    WireTuning,
};

fn cpu(slots: u32, busy: u32) -> Capacity {
    Capacity {
        kind: WorkerKind::Cpu,
        slots,
        busy,
    }
}

#[test]
fn placement_fills_free_slots_spreading_chains() {
    let mut workers = [cpu(2, 0), cpu(2, 0), cpu(4, 0)];
    assert_eq!(
        place(8, DevicePreference::Any, false, &mut workers),
        [2, 2, 4]
    );
    assert!(workers.iter().all(|w| w.busy == w.slots));

    // Three chains over three idle pools: one each, not three on the biggest.
    let mut workers = [cpu(4, 0), cpu(4, 0), cpu(4, 0)];
    assert_eq!(
        place(3, DevicePreference::Cpu, false, &mut workers),
        [1, 1, 1]
    );

    // More chains than free slots: the rest wait for slots to free up.
    let mut workers = [cpu(2, 1), cpu(2, 0)];
    assert_eq!(
        place(10, DevicePreference::Any, false, &mut workers),
        [1, 2]
    );
}

#[test]
fn placement_of_a_job_with_no_free_slot_anywhere() {
    // Nothing running yet: one dispatch to the least-loaded pool, queued there.
    let mut workers = [cpu(2, 6), cpu(4, 5)];
    assert_eq!(
        place(10, DevicePreference::Any, false, &mut workers),
        [0, 4]
    );
    // Already running: it waits for its own chains to free slots.
    let mut workers = [cpu(2, 6), cpu(4, 5)];
    assert_eq!(place(10, DevicePreference::Any, true, &mut workers), [0, 0]);
}

#[test]
fn placement_sends_many_chains_to_gpu_workers_and_respects_the_preference() {
    let gpu = Capacity {
        kind: WorkerKind::Gpu,
        slots: 4096,
        busy: 0,
    };
    let mut workers = [cpu(2, 0), gpu.clone()];
    assert_eq!(
        place(100, DevicePreference::Any, false, &mut workers),
        [0, 100]
    );
    let mut workers = [cpu(2, 0), gpu.clone()];
    assert_eq!(
        place(100, DevicePreference::Cpu, false, &mut workers),
        [2, 0]
    );
    let mut workers = [cpu(2, 0)];
    assert_eq!(place(100, DevicePreference::Gpu, false, &mut workers), [0]);
}

fn spec(n_chains: u32, warmup: WarmupMode) -> JobSpec {
    JobSpec {
        fingerprint: 0,
        model_name: "m".into(),
        model: Arc::new(vec![1, 2, 3]),
        settings: WireSettings::from(&sampler::SamplerSettings::default()),
        n_chains,
        seed: 7,
        device: DevicePreference::Any,
        warmup,
        chains: None,
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
        WorkerKind::Cpu,
        pending[..2].to_vec(),
    );
    assert_eq!((task.seed, task.burn_in, task.chains.len()), (7, 0, 2));
    job.dispatch(
        b,
        ActorId::Local(2),
        node("b"),
        WorkerKind::Cpu,
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
    job.dispatch(a, ActorId::Local(1), node("a"), WorkerKind::Cpu, pending);
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
    job.dispatch(b, ActorId::Local(2), node("b"), WorkerKind::Cpu, pending);
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
    job.dispatch(a, ActorId::Local(1), node("a"), WorkerKind::Cpu, pending);
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

fn job_with_one_task() -> Job {
    let mut job = new_job(1, WarmupMode::Independent);
    let pending = job.pending();
    job.dispatch(
        TaskId(1),
        ActorId::Local(1),
        node("a"),
        WorkerKind::Cpu,
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

    let mut job = new_job(1, WarmupMode::Independent);
    for attempt in 1..=MAX_ATTEMPTS {
        let pending = job.pending();
        assert_eq!(pending.len(), 1, "attempt {attempt}");
        let task = TaskId(u64::from(attempt));
        job.dispatch(task, ActorId::Local(1), node("a"), WorkerKind::Cpu, pending);
        let lost = job.lose(task, "gone");
        assert_eq!(lost.is_err(), attempt == MAX_ATTEMPTS, "attempt {attempt}");
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
    job.dispatch(gpu, ActorId::Local(1), node("g"), WorkerKind::Gpu, pending);
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
    job.dispatch(cpu, ActorId::Local(2), node("c"), WorkerKind::Cpu, pending);
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
    for attempt in 1..=MAX_ATTEMPTS {
        let pending = job.pending();
        let task = TaskId(u64::from(attempt));
        job.dispatch(task, ActorId::Local(1), node("g"), WorkerKind::Gpu, pending);
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
                    "chain 1 failed 5 times; the last time on g@127.0.0.1: worker failed: on the GPU: device lost"
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
    let task = job.dispatch(w, ActorId::Local(1), node("a"), WorkerKind::Cpu, pending);
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
        WorkerKind::Cpu,
        pending,
    );
    assert_eq!(task.burn_in, 25);
    assert_eq!(task.settings.num_draws, 1000);
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
    let wire = job.dispatch(task, ActorId::Local(1), node("a"), WorkerKind::Cpu, pending);
    assert_eq!(wire.seed, 7);
    // A chain the job does not run is ignored, whatever a worker says.
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

#[test]
fn a_subset_of_chains_is_checked_at_the_endpoint() {
    let spec = super::endpoint::check(request(6, Some(vec![0, 2, 5]))).unwrap();
    assert_eq!((spec.n_chains, spec.count()), (6, 3));
    assert_eq!(super::endpoint::check(request(6, None)).unwrap().count(), 6);
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
        let error = super::endpoint::check(request(6, Some(chains.clone()))).unwrap_err();
        assert!(
            matches!(&error, crate::wire::WireError::Invalid { what, reason }
                if what == "request" && reason.contains(expected)),
            "{chains:?}: {error}"
        );
    }
    // The subset is part of what a retried submission must repeat.
    let whole = super::endpoint::check(request(6, None)).unwrap();
    let part = super::endpoint::check(request(6, Some(vec![1]))).unwrap();
    assert_ne!(whole.fingerprint, part.fingerprint);
}
