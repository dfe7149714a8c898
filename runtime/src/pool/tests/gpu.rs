//! The GPU pool goes through the node's GPU supervisor: a task is one job there (the
//! supervisor counts it, and the streamed draws are the ones the supervisor gives a caller
//! of the same request), and a device lost under a task gives its chains back as worker
//! failures while the supervisor restarts the worker, which then serves the next task.
//! On lavapipe in CI (`XDG_RUNTIME_DIR=/tmp`); skipped on a machine without an adapter
//! unless `REQUIRE_GPU=1`.

use gpu_actor::{
    Fault, GpuKernel, GpuSampleRequest, GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg,
    Precision, SampleJob, SupervisorReport, WorkerId, WorkerState,
};
use supervision::Backoff;

use super::*;

const DEADLINE: Duration = Duration::from_secs(120);

async fn report(supervisor: &ActorRef<GpuSupervisorMsg>) -> SupervisorReport {
    GpuSupervisor::report(supervisor, DEADLINE)
        .await
        .expect("the GPU supervisor reports")
}

/// Polls task `id` once after `ack`: its events, acknowledged.
async fn poll_once(pool: &ActorRef<PoolMsg>, id: u64, ack: &mut u64) -> Vec<WireTaskEvent> {
    let reply = ask(pool, |responder| PoolMsg::Poll {
        sender: me(),
        task: TaskId(id),
        ack: *ack,
        wait_ms: 1000,
        responder,
    })
    .await
    .unwrap();
    let PoolReply::Events { events, .. } = reply else {
        panic!("{reply:?}");
    };
    events
        .into_iter()
        .map(|WireEvent { seq, event }| {
            *ack = seq;
            event
        })
        .collect()
}

async fn run_task(pool: &ActorRef<PoolMsg>, task: PreparedTask) {
    let id = task.task;
    let reply = ask(pool, |responder| PoolMsg::Run {
        sender: me(),
        task,
        responder,
    })
    .await;
    assert_eq!(reply, Ok(PoolReply::Accepted { task: id }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gpu_task_is_one_job_of_the_gpu_supervisor_and_survives_a_lost_device() {
    let args = GpuSupervisorArgs {
        backoff: Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
        },
        ..GpuSupervisorArgs::default()
    };
    let (supervisor, supervisor_handle) =
        Actor::spawn(Some(GPU_SUPERVISOR_NAME.to_owned()), GpuSupervisor, args)
            .await
            .expect("the GPU supervisor starts");
    if report(&supervisor).await.workers.is_empty() {
        assert!(
            std::env::var_os("REQUIRE_GPU").is_none_or(|v| v != "1"),
            "REQUIRE_GPU=1 but there is no GPU worker"
        );
        eprintln!("skipped: no GPU adapter (set REQUIRE_GPU=1 to make this a failure)");
        supervisor.stop(None);
        return;
    }
    let args = PoolArgs {
        backend: Backend::Gpu,
        slots: 64,
        allow_fault_injection: false,
        task_lease: Duration::from_secs(30),
    };
    let (pool, handle) = Actor::spawn(None, SamplerPool, args).await.unwrap();

    // Four chains, one job: the supervisor counts one, and the draws streamed are those of
    // the same request sent to the supervisor directly (a batch is reproducible).
    let specs: Vec<ChainSpec> = (0..4).map(|c| ChainSpec::new(ChainId(c))).collect();
    run_task(&pool, task(1, specs.clone(), 0)).await;
    let streamed = collect(&pool, 1, 4).await;
    assert_eq!(report(&supervisor).await.workers[0].jobs_completed, 1);
    let request = GpuSampleRequest {
        model: CheckedModel::clone(&model()),
        settings: SamplerSettings {
            threads: 0,
            ..settings()
        },
        seed: Seed(11),
        chains: specs,
        kernel: GpuKernel::default(),
        precision: Precision::F32.into(),
    };
    let direct = GpuSupervisor::sample(&supervisor, SampleJob::new(request), DEADLINE)
        .await
        .expect("the same job, sent directly");
    for ((values, lp, done), trace) in streamed.iter().zip(&direct.traces) {
        assert_eq!(values, &trace.draws, "chain {}", trace.chain);
        let direct_lp: Vec<f64> = trace.stats.iter().map(|s| s.lp).collect();
        assert_eq!(lp, &direct_lp);
        assert_eq!(done.n_draws, 300);
    }

    // A long task; once its first draws arrived, its worker's device is lost: both chains
    // come back as worker failures (coordinators run them again), and the worker restarts.
    let long = PreparedTask {
        settings: SamplerSettings {
            num_draws: 10_000_000,
            ..settings()
        },
        ..task(2, (0..2).map(|c| ChainSpec::new(ChainId(c))).collect(), 0)
    };
    run_task(&pool, long).await;
    let deadline = Instant::now() + DEADLINE;
    let mut ack = 0;
    let mut injected = false;
    let mut failed = Vec::new();
    while failed.len() < 2 {
        assert!(Instant::now() < deadline, "chains failed: {failed:?}");
        for event in poll_once(&pool, 2, &mut ack).await {
            match event {
                WireTaskEvent::Block(block) if !injected && block.n_draws() > 0 => {
                    GpuSupervisor::inject_fault(
                        &supervisor,
                        WorkerId(0),
                        Fault::LoseDevice,
                        DEADLINE,
                    )
                    .await
                    .expect("the fault is injected");
                    injected = true;
                }
                WireTaskEvent::ChainFailed {
                    chain,
                    error,
                    cause,
                } => {
                    assert_eq!(cause, WireFailure::Worker, "chain {chain}: {error}");
                    assert!(error.contains("failed while running this job"), "{error}");
                    failed.push(chain);
                }
                WireTaskEvent::ChainDone(done) => panic!("chain {} finished", done.chain),
                WireTaskEvent::Progress { .. } | WireTaskEvent::Block(_) => {}
            }
        }
    }
    failed.sort();
    assert_eq!(failed, [0, 1]);
    loop {
        let worker = &report(&supervisor).await.workers[0];
        if worker.restarts == 1 && worker.state == WorkerState::Idle {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the worker did not restart: {worker:?}"
        );
        tokio::task::yield_now().await;
    }

    // The restarted worker serves the next task.
    run_task(&pool, task(3, vec![ChainSpec::new(ChainId(0))], 0)).await;
    let streamed = collect(&pool, 3, 1).await;
    assert_eq!(streamed[0].2.n_draws, 300);
    assert_eq!(report(&supervisor).await.workers[0].jobs_completed, 3);

    // With the warmup saved, each chain's blocks switch from warmup to kept draws: both
    // phases arrive whole, in order, as the supervisor gives them to a direct caller.
    let saving = SamplerSettings {
        save_warmup: true,
        ..settings()
    };
    let specs: Vec<ChainSpec> = (0..3).map(|c| ChainSpec::new(ChainId(c))).collect();
    run_task(
        &pool,
        PreparedTask {
            settings: saving.clone(),
            ..task(4, specs.clone(), 0)
        },
    )
    .await;
    let mut phases = vec![(Vec::new(), Vec::new()); 3];
    let mut reports = vec![None; 3];
    let mut ack = 0;
    while reports.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "task 4 did not finish");
        for event in poll_once(&pool, 4, &mut ack).await {
            match event {
                WireTaskEvent::Block(block) => {
                    for entry in block.entries().expect("a block that checks") {
                        let draws = block.draws(&entry);
                        let (warmup, kept) = &mut phases[entry.chain as usize];
                        let phase: &mut Vec<f64> = if draws.warmup { warmup } else { kept };
                        let n_columns = block.n_columns as usize;
                        assert_eq!(draws.first as usize * n_columns, phase.len(), "joins up");
                        phase.extend(draws.values);
                    }
                }
                WireTaskEvent::ChainDone(done) => {
                    let chain = done.chain as usize;
                    reports[chain] = Some(done);
                }
                event => panic!("{event:?}"),
            }
        }
    }
    let direct = GpuSupervisor::sample(
        &supervisor,
        SampleJob::new(GpuSampleRequest {
            model: CheckedModel::clone(&model()),
            settings: SamplerSettings {
                threads: 0,
                ..saving
            },
            seed: Seed(11),
            chains: specs,
            kernel: GpuKernel::default(),
            precision: Precision::F32.into(),
        }),
        DEADLINE,
    )
    .await
    .expect("the same job, sent directly");
    for ((warmup, kept), trace) in phases.iter().zip(&direct.traces) {
        assert_eq!(warmup, &trace.warmup_draws, "chain {}", trace.chain);
        assert_eq!(kept, &trace.draws, "chain {}", trace.chain);
    }
    // Where the run ran comes once, with one of its chains: the supervisor's own line.
    let notes: Vec<&str> = reports
        .iter()
        .flatten()
        .filter_map(|done| done.ran_on.as_deref())
        .collect();
    assert_eq!(notes, [direct.ran_on.to_string().as_str()]);
    for done in reports.into_iter().flatten() {
        assert_eq!((done.n_warmup_draws, done.n_draws), (150, 300));
    }

    pool.stop(None);
    handle.await.unwrap();
    supervisor.stop(None);
    supervisor_handle.await.unwrap();
}
