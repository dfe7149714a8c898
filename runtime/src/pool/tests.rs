//! The CPU pool as an actor in this process (no endpoint, so no process group): its chains'
//! draws are the local sampler's, bit for bit, streamed in order; warm starts drop their
//! burn-in; a task is idempotent, can be cancelled, and unknown tasks are refused.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};
use sampler::{ChainId, ChainSpec, CheckedModel, Limits, NoObserver, SamplerSettings, Seed};

use super::*;
use crate::ids::RequestId;
use crate::wire::{Envelope, WireChainDone, WireEvent};

const MODEL: &str = r#"{"ir_version": 1, "name": "normal_mean",
  "data": {"y": {"vector": [0.1, -0.3, 0.5, 1.2]}},
  "parameters": [{"name": "mu"}, {"name": "s", "constraint": "positive"}],
  "model": [
    {"sample": {"value": "mu", "dist": {"normal": {"mu": 0, "sigma": 10}}}},
    {"sample": {"value": "s", "dist": {"half_normal": {"sigma": 2}}}},
    {"sample": {"value": "y", "dist": {"normal": {"mu": "mu", "sigma": "s"}}}}
  ]}"#;

fn model() -> Arc<CheckedModel> {
    Arc::new(CheckedModel::from_json(MODEL, &Limits::default()).unwrap())
}

fn settings() -> SamplerSettings {
    SamplerSettings {
        num_warmup: 150,
        num_draws: 300,
        threads: 1,
        ..SamplerSettings::default()
    }
}

fn me() -> NodeName {
    "test@127.0.0.1".parse().unwrap()
}

async fn start(slots: u32) -> (ActorRef<PoolMsg>, ractor::concurrency::JoinHandle<()>) {
    let args = PoolArgs {
        backend: Backend::Cpu,
        slots,
        allow_fault_injection: false,
        task_lease: Duration::from_secs(30),
    };
    Actor::spawn(None, SamplerPool, args).await.unwrap()
}

async fn ask(
    pool: &ActorRef<PoolMsg>,
    make: impl FnOnce(Responder<PoolWire>) -> PoolMsg,
) -> Result<PoolReply, WireError> {
    let (port, answer) = ractor::concurrency::oneshot();
    let responder = Responder::new(port.into(), RequestId(1), me());
    assert!(pool.cast(make(responder)).is_ok());
    let bytes = tokio::time::timeout(Duration::from_secs(30), answer)
        .await
        .expect("an answer in time")
        .expect("an answer");
    Envelope::<Result<PoolReply, WireError>>::decode(&bytes)
        .unwrap()
        .body
}

fn task(id: u64, chains: Vec<ChainSpec>, burn_in: u64) -> PreparedTask {
    PreparedTask {
        task: TaskId(id),
        job: JobId(id),
        model: model(),
        settings: settings(),
        seed: Seed(11),
        chains,
        burn_in,
        // Auto would check each GPU task first; these tests compare with f32 runs.
        gpu_precision: gpu_actor::PrecisionMode::F32,
        positions: false,
    }
}

/// Polls until every chain reported; returns each chain's kept draws and its report.
async fn collect(
    pool: &ActorRef<PoolMsg>,
    id: u64,
    n_chains: usize,
) -> Vec<(Vec<f64>, Vec<f64>, WireChainDone)> {
    let mut draws: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); n_chains];
    let mut done: Vec<Option<WireChainDone>> = vec![None; n_chains];
    let mut ack = 0;
    while done.iter().any(Option::is_none) {
        let reply = ask(pool, |responder| PoolMsg::Poll {
            sender: me(),
            task: TaskId(id),
            ack,
            wait_ms: 1000,
            responder,
        })
        .await
        .unwrap();
        let PoolReply::Events { events, .. } = reply else {
            panic!("{reply:?}");
        };
        for WireEvent { seq, event } in events {
            assert_eq!(seq, ack + 1, "events are numbered without gaps");
            ack = seq;
            match event {
                WireTaskEvent::Progress {
                    chain,
                    draws: Some(chunk),
                    ..
                } => {
                    let (values, lp) = &mut draws[chain as usize];
                    assert!(!chunk.warmup);
                    assert_eq!(chunk.first as usize, lp.len(), "chunks join up");
                    values.extend(chunk.values);
                    lp.extend(chunk.stats.lp);
                }
                WireTaskEvent::Progress { .. } => {}
                WireTaskEvent::Block(block) => {
                    for entry in block.entries().expect("a block that checks") {
                        let chunk = block.draws(&entry);
                        let (values, lp) = &mut draws[entry.chain as usize];
                        assert!(!chunk.warmup);
                        assert_eq!(chunk.first as usize, lp.len(), "blocks join up");
                        values.extend(chunk.values);
                        lp.extend(chunk.stats.lp);
                    }
                }
                WireTaskEvent::ChainDone(report) => {
                    let chain = report.chain as usize;
                    done[chain] = Some(report);
                }
                WireTaskEvent::ChainFailed { chain, error, .. } => panic!("chain {chain}: {error}"),
            }
        }
    }
    draws
        .into_iter()
        .zip(done)
        .map(|((values, lp), done)| (values, lp, done.unwrap()))
        .collect()
}

#[tokio::test]
async fn a_task_streams_the_local_samplers_draws_and_is_idempotent() {
    let (pool, handle) = start(2).await;
    let specs: Vec<ChainSpec> = (0..3).map(|c| ChainSpec::new(ChainId(c))).collect();
    let reply = ask(&pool, |responder| PoolMsg::Run {
        sender: me(),
        task: task(1, specs.clone(), 0),
        responder,
    })
    .await;
    assert_eq!(reply, Ok(PoolReply::Accepted { task: TaskId(1) }));
    // The same dispatch again (a retry after a timeout) starts nothing new.
    let again = ask(&pool, |responder| PoolMsg::Run {
        sender: me(),
        task: task(1, specs.clone(), 0),
        responder,
    })
    .await;
    assert_eq!(again, Ok(PoolReply::Accepted { task: TaskId(1) }));
    let status = ask(&pool, PoolMsg::Status).await.unwrap();
    assert!(
        matches!(status, PoolReply::Status { slots: 2, running, queued, .. } if running + queued <= 3),
        "{status:?}"
    );

    let streamed = collect(&pool, 1, 3).await;
    let model = model();
    let local = sampler::sample_chains(
        || model.evaluator(),
        &settings(),
        Seed(11),
        &specs,
        &NoObserver,
    )
    .unwrap();
    for ((values, lp, done), trace) in streamed.iter().zip(&local) {
        assert_eq!(values, &trace.draws, "chain {}", trace.chain);
        let local_lp: Vec<f64> = trace.stats.iter().map(|s| s.lp).collect();
        assert_eq!(lp, &local_lp);
        assert_eq!(done.n_draws, 300);
        assert_eq!(done.final_position, trace.final_position);
        assert_eq!(done.tuning.inv_metric, trace.tuning.inv_metric);
    }

    let unknown = ask(&pool, |responder| PoolMsg::Poll {
        sender: me(),
        task: TaskId(99),
        ack: 0,
        wait_ms: 0,
        responder,
    })
    .await;
    assert!(
        matches!(unknown, Err(WireError::NotFound { .. })),
        "{unknown:?}"
    );
    pool.stop(None);
    handle.await.unwrap();
}

#[tokio::test]
async fn a_warm_start_drops_its_burn_in_and_a_cancelled_task_is_forgotten() {
    let (pool, handle) = start(1).await;
    let model = model();
    let warm = sampler::sample_chains(
        || model.evaluator(),
        &SamplerSettings {
            num_draws: 0,
            ..settings()
        },
        Seed(11),
        &[ChainSpec::new(ChainId(u32::MAX))],
        &NoObserver,
    )
    .unwrap()
    .remove(0);
    let spec = ChainSpec {
        chain: ChainId(0),
        init: Some(warm.final_position.clone()),
        tuning: Some(warm.tuning.clone()),
    };
    ask(&pool, |responder| PoolMsg::Run {
        sender: me(),
        task: task(2, vec![spec.clone()], 40),
        responder,
    })
    .await
    .unwrap();
    let streamed = collect(&pool, 2, 1).await;
    let longer = SamplerSettings {
        num_draws: 340,
        ..settings()
    };
    let local = sampler::sample_chains(
        || model.evaluator(),
        &longer,
        Seed(11),
        &[spec],
        &NoObserver,
    )
    .unwrap()
    .remove(0);
    let (values, _, done) = &streamed[0];
    assert_eq!(done.n_draws, 300);
    assert_eq!(values[..], local.draws[40 * local.n_columns..]);
    let burned: u64 = local.stats[..40]
        .iter()
        .map(|s| u64::from(s.n_leapfrog))
        .sum();
    assert_eq!(done.grad_evals_warmup, local.grad_evals_warmup + burned);

    // A long task, cancelled: polls then say it is unknown.
    let long = PreparedTask {
        settings: SamplerSettings {
            num_draws: 1_000_000,
            ..settings()
        },
        ..task(3, vec![ChainSpec::new(ChainId(0))], 0)
    };
    ask(&pool, |responder| PoolMsg::Run {
        sender: me(),
        task: long,
        responder,
    })
    .await
    .unwrap();
    let cancelled = ask(&pool, |responder| PoolMsg::Cancel {
        sender: me(),
        task: TaskId(3),
        responder,
    })
    .await;
    assert_eq!(cancelled, Ok(PoolReply::Cancelled { task: TaskId(3) }));
    let gone = ask(&pool, |responder| PoolMsg::Poll {
        sender: me(),
        task: TaskId(3),
        ack: 0,
        wait_ms: 0,
        responder,
    })
    .await;
    assert!(matches!(gone, Err(WireError::NotFound { .. })));
    // The cancelled chain's thread stops and frees its slot; stopping the pool joins it.
    pool.stop(None);
    tokio::time::timeout(Duration::from_secs(30), handle)
        .await
        .expect("the pool stops")
        .unwrap();
}

/// A model whose draws are large (a thousand values): its stream outgrows the pool's budget
/// of unacknowledged events within a fraction of a second.
const WIDE: &str = r#"{"ir_version": 1, "name": "wide",
  "parameters": [{"name": "x", "size": 1000}],
  "model": [{"sample": {"value": "x", "dist": {"normal": {"mu": 0, "sigma": 1}}}}]}"#;

#[tokio::test]
async fn a_chain_waits_while_its_coordinator_is_behind_and_loses_nothing() {
    let (pool, handle) = start(1).await;
    let model = Arc::new(CheckedModel::from_json(WIDE, &Limits::default()).unwrap());
    let settings = SamplerSettings {
        num_warmup: 50,
        num_draws: 3000,
        threads: 1,
        ..SamplerSettings::default()
    };
    // About 27 MB of draws: three times the budget of unacknowledged events.
    let streamed_bytes = 3000 * (9 * 1000 + 47);
    assert!(streamed_bytes > 3 * runner::TASK_BACKLOG_BYTES);
    let spec = ChainSpec::new(ChainId(0));
    let task = PreparedTask {
        model: Arc::clone(&model),
        settings: settings.clone(),
        ..task(4, vec![spec.clone()], 0)
    };
    ask(&pool, |responder| PoolMsg::Run {
        sender: me(),
        task,
        responder,
    })
    .await
    .unwrap();
    // Nobody polls: the chain fills the budget and waits (unchecked, it would be done long
    // before this: 3000 draws of this model take a fraction of a second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = ask(&pool, PoolMsg::Status).await.unwrap();
    assert!(
        matches!(status, PoolReply::Status { running: 1, .. }),
        "the chain still runs, waiting for acknowledgements: {status:?}"
    );
    // Polls acknowledge, the chain goes on, and every draw arrives as the sampler made it.
    let streamed = collect(&pool, 4, 1).await;
    let local = sampler::sample_chains(
        || model.evaluator(),
        &settings,
        Seed(11),
        &[spec],
        &NoObserver,
    )
    .unwrap()
    .remove(0);
    let (values, lp, done) = &streamed[0];
    assert_eq!(done.n_draws, 3000);
    assert!(values == &local.draws, "the same draws");
    assert_eq!(lp.len(), 3000);
    assert_eq!(done.grad_evals_sampling, local.grad_evals_sampling);
    pool.stop(None);
    handle.await.unwrap();
}

mod gpu;
