//! The GPU supervisor and its workers: jobs run and are reported; a worker whose device
//! thread panics or whose device is lost is restarted, its caller at that moment gets an
//! error and the next job succeeds; too many restarts escalate to the supervisor's parent;
//! a node without a usable adapter samples on the CPU and says so in one line.
//!
//! Each test starts its own supervisor (its own devices). Nothing sleeps: tests wait for
//! events (a first draw, a reply, an actor's exit), each with a deadline.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use gpu_actor::{
    AdapterSelection, CancelToken, Fault, GpuActorError, GpuKernel, GpuSampleRequest,
    GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg, LoadListener, Precision, RanOn, SampleJob,
    SupervisorReport, WorkerId, WorkerLoad, WorkerState, enumerate_adapters,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::RactorMessage;
use sampler::{
    ChainId, ChainSpec, CheckedModel, DrawEvent, Limits, Observer, SamplerSettings, Seed,
};
use supervision::{Backoff, Intensity};
use tokio::sync::{mpsc, oneshot};

/// Deadline of every call and wait; lavapipe compiles pipelines slowly.
const DEADLINE: Duration = Duration::from_secs(120);
const GPU0: WorkerId = WorkerId(0);

fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|value| value == "1")
}

/// `y ~ normal(mu, 1)` with three observations: quick, and the posterior is known.
fn model() -> CheckedModel {
    let mut builder = sampler::ModelBuilder::new("actors_normal");
    let y = builder.data_vector("y", vec![0.4, -1.1, 1.6]);
    let mu = builder.param("mu");
    builder.sample(&y, sampler::Dist::normal(&mu, 1.0));
    CheckedModel::new(builder.build(), &Limits::default()).expect("the model checks")
}

fn request(n_chains: u32, iterations: u64) -> GpuSampleRequest {
    GpuSampleRequest {
        model: model(),
        settings: SamplerSettings {
            num_warmup: iterations,
            num_draws: iterations,
            ..SamplerSettings::default()
        },
        seed: Seed(7),
        chains: (0..n_chains).map(|c| ChainSpec::new(ChainId(c))).collect(),
        kernel: GpuKernel::default(),
        precision: Precision::F32.into(),
    }
}

/// Supervisor arguments with quick restarts, `max_restarts` of them a minute.
fn fast_restarts(max_restarts: u32) -> GpuSupervisorArgs {
    GpuSupervisorArgs {
        intensity: Intensity {
            max_restarts,
            window: Duration::from_secs(60),
        },
        backoff: Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
        },
        ..GpuSupervisorArgs::default()
    }
}

/// A supervisor with GPU workers, or `None` (a skip line) on a machine without an adapter.
async fn start(args: GpuSupervisorArgs) -> Option<ActorRef<GpuSupervisorMsg>> {
    let (supervisor, _handle) = GpuSupervisor::spawn(None, GpuSupervisor, args)
        .await
        .expect("the supervisor starts");
    let report = report(&supervisor).await;
    if report.workers.is_empty() {
        let line = report.fallback.unwrap_or_default();
        assert!(
            !gpu_required(),
            "REQUIRE_GPU=1 but the supervisor has no worker: {line}"
        );
        eprintln!("skipping GPU actor test: {line} (set REQUIRE_GPU=1 to make this a failure)");
        supervisor.stop(None);
        return None;
    }
    Some(supervisor)
}

async fn report(supervisor: &ActorRef<GpuSupervisorMsg>) -> SupervisorReport {
    GpuSupervisor::report(supervisor, DEADLINE)
        .await
        .expect("a report")
}

async fn sample(
    supervisor: &ActorRef<GpuSupervisorMsg>,
    job: SampleJob,
) -> Result<gpu_actor::SampleOutput, GpuActorError> {
    GpuSupervisor::sample(supervisor, job, DEADLINE).await
}

/// Holds the sampling thread at its first draw until released, and says when it got there:
/// a job that is certainly in flight.
struct PauseAtFirstDraw {
    arrived: Mutex<Option<oneshot::Sender<()>>>,
    released: Mutex<bool>,
    release: Condvar,
}

impl PauseAtFirstDraw {
    fn new() -> (Arc<PauseAtFirstDraw>, oneshot::Receiver<()>) {
        let (arrived, at_first_draw) = oneshot::channel();
        let pause = Arc::new(PauseAtFirstDraw {
            arrived: Mutex::new(Some(arrived)),
            released: Mutex::new(false),
            release: Condvar::new(),
        });
        (pause, at_first_draw)
    }

    fn release(&self) {
        *self.released.lock().expect("lock") = true;
        self.release.notify_all();
    }
}

impl Observer for PauseAtFirstDraw {
    fn on_draw(&self, _event: &DrawEvent) {
        let Some(arrived) = self.arrived.lock().expect("lock").take() else {
            return;
        };
        let _ = arrived.send(());
        let released = self.released.lock().expect("lock");
        // Bounded, so that a broken test cannot hang the sampling thread for ever.
        let _ = self
            .release
            .wait_timeout_while(released, DEADLINE, |released| !*released);
    }
}

/// Starts a job that pauses at its first draw; returns once it is there.
async fn job_in_flight(
    supervisor: &ActorRef<GpuSupervisorMsg>,
    cancel: CancelToken,
) -> (
    Arc<PauseAtFirstDraw>,
    tokio::task::JoinHandle<Result<gpu_actor::SampleOutput, GpuActorError>>,
) {
    let (pause, at_first_draw) = PauseAtFirstDraw::new();
    let mut job = SampleJob::new(request(2, 300)).with_observer(pause.clone());
    job.cancel = cancel;
    let caller = supervisor.clone();
    let running = tokio::spawn(async move { sample(&caller, job).await });
    tokio::time::timeout(DEADLINE, at_first_draw)
        .await
        .expect("the job reaches its first draw in time")
        .expect("the observer says so");
    (pause, running)
}

async fn finished(
    running: tokio::task::JoinHandle<Result<gpu_actor::SampleOutput, GpuActorError>>,
) -> Result<gpu_actor::SampleOutput, GpuActorError> {
    tokio::time::timeout(DEADLINE, running)
        .await
        .expect("the caller is answered in time")
        .expect("the caller's task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_run_a_job_on_a_worker_and_report_it() {
    let Some(supervisor) = start(GpuSupervisorArgs::default()).await else {
        return;
    };
    let before = report(&supervisor).await;
    assert_eq!(before.fallback, None);
    assert!(
        before
            .workers
            .iter()
            .all(|w| w.state == WorkerState::Idle && w.restarts == 0)
    );

    let output = sample(&supervisor, SampleJob::new(request(3, 150)))
        .await
        .expect("the job runs");
    assert_eq!(output.traces.len(), 3);
    for (c, trace) in output.traces.iter().enumerate() {
        assert_eq!(trace.chain, ChainId(c as u32));
        assert_eq!(trace.n_draws(), 150);
    }
    assert!(
        matches!(&output.ran_on, RanOn::Gpu { shares } if shares.len() == 1 && shares[0].worker == GPU0 && shares[0].chains == 3),
        "{:?}",
        output.ran_on
    );

    let after = report(&supervisor).await;
    let worker = &after.workers[0];
    assert_eq!(worker.jobs_completed, 1);
    assert_eq!(worker.state, WorkerState::Idle);
    let stats = worker.stats.expect("an idle worker reports its counters");
    assert!(stats.models_resident >= 1, "{stats:?}");
    assert_eq!((after.queued, after.running), (0, 0));
    supervisor.stop(None);
}

/// A fault injected into an idle worker: the worker is restarted, and the next job (sent at
/// once, so it waits for the restart) succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_restart_a_worker_after_a_fault_and_the_next_job_succeeds() {
    let args = GpuSupervisorArgs {
        ..fast_restarts(10)
    };
    let Some(supervisor) = start(args).await else {
        return;
    };
    for (n, fault) in [Fault::Panic, Fault::LoseDevice].into_iter().enumerate() {
        GpuSupervisor::inject_fault(&supervisor, GPU0, fault, DEADLINE)
            .await
            .expect("the fault is injected");
        let output = sample(&supervisor, SampleJob::new(request(2, 100)))
            .await
            .unwrap_or_else(|err| panic!("the job after {fault:?}: {err}"));
        assert_eq!(output.traces.len(), 2);
        let worker = &report(&supervisor).await.workers[0];
        assert_eq!(worker.restarts, n as u32 + 1, "after {fault:?}");
        assert!(worker.last_failure.is_some());
        assert_eq!(worker.state, WorkerState::Idle);
    }
    supervisor.stop(None);
}

/// The caller whose job is running when its worker's device thread panics (or its device is
/// lost) gets an error, never a hang; the worker is restarted and the next job succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_in_flight_callers_get_an_error_when_their_worker_dies() {
    let args = GpuSupervisorArgs {
        ..fast_restarts(10)
    };
    let Some(supervisor) = start(args).await else {
        return;
    };
    for (n, fault) in [Fault::Panic, Fault::LoseDevice].into_iter().enumerate() {
        let (pause, running) = job_in_flight(&supervisor, CancelToken::new()).await;
        GpuSupervisor::inject_fault(&supervisor, GPU0, fault, DEADLINE)
            .await
            .expect("the fault is injected");
        let result = finished(running).await;
        pause.release();
        match result {
            Err(GpuActorError::WorkerFailed { worker, reason, .. }) => {
                assert_eq!(worker, GPU0);
                eprintln!("{fault:?}: the caller was told: {reason}");
            }
            other => panic!("{fault:?}: expected WorkerFailed, got {other:?}"),
        }
        let output = sample(&supervisor, SampleJob::new(request(2, 100)))
            .await
            .unwrap_or_else(|err| panic!("the job after {fault:?}: {err}"));
        assert_eq!(output.traces.len(), 2);
        assert_eq!(report(&supervisor).await.workers[0].restarts, n as u32 + 1);
    }
    supervisor.stop(None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_cancel_a_running_job() {
    let Some(supervisor) = start(GpuSupervisorArgs::default()).await else {
        return;
    };
    let cancel = CancelToken::new();
    let (pause, running) = job_in_flight(&supervisor, cancel.clone()).await;
    cancel.cancel();
    pause.release();
    let result = finished(running).await;
    assert!(
        matches!(result, Err(GpuActorError::Cancelled)),
        "{result:?}"
    );
    // The worker is fine.
    let worker = &report(&supervisor).await.workers[0];
    assert_eq!((worker.state, worker.restarts), (WorkerState::Idle, 0));
    supervisor.stop(None);
}

/// Two workers on the first adapter (a node with two GPUs of one kind), shares of at least
/// `min_share` chains, restarts quick; every change of load goes to the returned channel.
fn two_workers(min_share: usize) -> (GpuSupervisorArgs, mpsc::UnboundedReceiver<Vec<WorkerLoad>>) {
    let (loads, changes) = mpsc::unbounded_channel();
    let args = GpuSupervisorArgs {
        adapters: AdapterSelection::Only(vec![0, 0]),
        min_share,
        on_load: Some(LoadListener(Arc::new(move |load: &[WorkerLoad]| {
            let _ = loads.send(load.to_vec());
        }))),
        ..fast_restarts(10)
    };
    (args, changes)
}

/// Waits for a load that `done` accepts, returning every load seen until then.
async fn load_until(
    changes: &mut mpsc::UnboundedReceiver<Vec<WorkerLoad>>,
    done: impl Fn(&[WorkerLoad]) -> bool,
) -> Vec<Vec<WorkerLoad>> {
    let mut seen = Vec::new();
    loop {
        let load = tokio::time::timeout(DEADLINE, changes.recv())
            .await
            .expect("the load changes in time")
            .expect("the supervisor publishes its load");
        let stop = done(&load);
        seen.push(load);
        if stop {
            return seen;
        }
    }
}

/// A job of enough chains is split over both idle workers: each runs a share, the traces
/// come back in the order of the chains, the posterior is the right one, and the load each
/// worker published while it ran says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_split_a_large_job_over_the_idle_workers() {
    let (args, mut changes) = two_workers(4);
    let Some(supervisor) = start(args).await else {
        return;
    };
    assert_eq!(report(&supervisor).await.workers.len(), 2);
    let n_chains = 8;
    let output = sample(&supervisor, SampleJob::new(request(n_chains, 300)))
        .await
        .expect("the job runs");
    let RanOn::Gpu { shares } = &output.ran_on else {
        panic!("expected GPU shares, got {:?}", output.ran_on);
    };
    let workers: Vec<WorkerId> = shares.iter().map(|share| share.worker).collect();
    assert_eq!(workers, [GPU0, WorkerId(1)], "{shares:?}");
    assert_eq!(
        shares.iter().map(|s| s.chains).sum::<usize>(),
        n_chains as usize
    );
    assert!(shares.iter().all(|share| share.chains >= 4), "{shares:?}");
    assert_eq!(output.traces.len(), n_chains as usize);
    for (c, trace) in output.traces.iter().enumerate() {
        assert_eq!(trace.chain, ChainId(c as u32));
        assert_eq!(trace.n_draws(), 300);
    }
    // mu | y ~ normal(mean(y), 1/sqrt(3)) under the flat prior.
    let columns: Vec<Vec<f64>> = output.traces.iter().map(|t| t.column(0)).collect();
    let chains: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
    let draws: Vec<f64> = columns.concat();
    let mean = draws.iter().sum::<f64>() / draws.len() as f64;
    let mcse = sampler::diagnostics::mcse_mean(&chains);
    let truth = (0.4 - 1.1 + 1.6) / 3.0;
    assert!(
        (mean - truth).abs() < 4.0 * mcse,
        "posterior mean {mean} against {truth}: more than 4 MCSE ({mcse})"
    );

    let seen = load_until(&mut changes, |load| {
        load.iter()
            .all(|w| w.state == WorkerState::Idle && w.jobs_completed == 1)
    })
    .await;
    let busy = seen.iter().any(|load| {
        load.iter().all(|w| w.state == WorkerState::Busy)
            && load.iter().map(|w| w.chains).sum::<usize>() == n_chains as usize
    });
    assert!(busy, "no load had both workers busy with the job: {seen:?}");
    supervisor.stop(None);
}

/// A part that fails fails its job at once, and the job's other part stops early (its
/// chains would run for many minutes otherwise); the failed worker alone is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_a_failed_part_fails_its_job_and_stops_the_others() {
    let (args, mut changes) = two_workers(1);
    let Some(supervisor) = start(args).await else {
        return;
    };
    let (pause, at_first_draw) = PauseAtFirstDraw::new();
    let job = SampleJob::new(request(2, 1_000_000)).with_observer(pause.clone());
    let caller = supervisor.clone();
    let running = tokio::spawn(async move { sample(&caller, job).await });
    tokio::time::timeout(DEADLINE, at_first_draw)
        .await
        .expect("the job reaches its first draw in time")
        .expect("the observer says so");
    GpuSupervisor::inject_fault(&supervisor, GPU0, Fault::Panic, DEADLINE)
        .await
        .expect("the fault is injected");
    let result = finished(running).await;
    pause.release();
    assert!(
        matches!(&result, Err(GpuActorError::WorkerFailed { worker, .. }) if *worker == GPU0),
        "{result:?}"
    );
    // gpu0 restarts, and gpu1's part stops: both idle again.
    load_until(&mut changes, |load| {
        load[0].state == WorkerState::Restarting
    })
    .await;
    load_until(&mut changes, |load| {
        load.iter().all(|w| w.state == WorkerState::Idle)
    })
    .await;
    let after = report(&supervisor).await;
    let restarts: Vec<u32> = after.workers.iter().map(|w| w.restarts).collect();
    assert_eq!(restarts, [1, 0]);
    assert_eq!((after.queued, after.running), (0, 0));
    let output = sample(&supervisor, SampleJob::new(request(2, 100)))
        .await
        .expect("the next job runs");
    assert_eq!(output.traces.len(), 2);
    supervisor.stop(None);
}

/// The node's tree, as the runtime builds it: a parent that sees its children exit.
struct Parent;

#[derive(RactorMessage)]
enum ParentMsg {}

impl Actor for Parent {
    type Msg = ParentMsg;
    type State = mpsc::UnboundedSender<String>;
    type Arguments = (
        GpuSupervisorArgs,
        oneshot::Sender<ActorRef<GpuSupervisorMsg>>,
        mpsc::UnboundedSender<String>,
    );

    async fn pre_start(
        &self,
        myself: ActorRef<ParentMsg>,
        (args, started, exits): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (child, _) =
            GpuSupervisor::spawn_linked(None, GpuSupervisor, args, myself.get_cell()).await?;
        let _ = started.send(child);
        Ok(exits)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<ParentMsg>,
        event: SupervisionEvent,
        exits: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(_, error) => {
                let _ = exits.send(format!("failed: {error}"));
            }
            SupervisionEvent::ActorTerminated(_, _, reason) => {
                let _ = exits.send(format!("stopped: {reason:?}"));
            }
            _ => {}
        }
        Ok(())
    }
}

/// One restart allowed: the second fault makes the supervisor give up and fail, so that its
/// parent sees it; callers waiting at that moment are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_supervisor_escalates_when_restarts_exceed_its_policy() {
    let args = GpuSupervisorArgs { ..fast_restarts(1) };
    let (started, child) = oneshot::channel();
    let (exits_tx, mut exits) = mpsc::unbounded_channel();
    let (parent, _) = Parent::spawn(None, Parent, (args, started, exits_tx))
        .await
        .expect("the parent starts");
    let supervisor = child.await.expect("the supervisor started");
    if report(&supervisor).await.workers.is_empty() {
        assert!(!gpu_required(), "REQUIRE_GPU=1 but no GPU worker");
        eprintln!("skipping GPU actor test: no usable GPU adapter");
        parent.stop(None);
        return;
    }
    GpuSupervisor::inject_fault(&supervisor, GPU0, Fault::Panic, DEADLINE)
        .await
        .expect("the first fault");
    sample(&supervisor, SampleJob::new(request(1, 50)))
        .await
        .expect("the job after the first restart");

    let (pause, running) = job_in_flight(&supervisor, CancelToken::new()).await;
    GpuSupervisor::inject_fault(&supervisor, GPU0, Fault::Panic, DEADLINE)
        .await
        .expect("the second fault");
    let exit = tokio::time::timeout(DEADLINE, exits.recv())
        .await
        .expect("the parent hears of it in time")
        .expect("an exit");
    pause.release();
    assert!(
        exit.starts_with("failed:") && exit.contains("giving up"),
        "{exit}"
    );
    assert!(finished(running).await.is_err());
    let after = GpuSupervisor::report(&supervisor, DEADLINE).await;
    assert!(
        matches!(after, Err(GpuActorError::Unreachable)),
        "{after:?}"
    );
    parent.stop(None);
}

/// With no adapter to use, the supervisor says why in one line and runs jobs on the CPU,
/// with the CPU sampler's exact draws.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_fall_back_to_the_cpu_without_a_usable_adapter() {
    let args = GpuSupervisorArgs {
        adapters: AdapterSelection::None,
        ..GpuSupervisorArgs::default()
    };
    let (supervisor, _) = GpuSupervisor::spawn(None, GpuSupervisor, args)
        .await
        .expect("the supervisor starts");
    let before = report(&supervisor).await;
    assert!(before.workers.is_empty());
    let line = before.fallback.expect("a fallback line");
    assert!(!line.contains('\n') && line.contains("CPU"), "{line}");

    let job = SampleJob::new(request(3, 200));
    let expected = crate::support::cpu_traces(&job.request);
    let output = sample(&supervisor, job)
        .await
        .expect("the job runs on the CPU");
    assert_eq!(
        output.ran_on,
        RanOn::Cpu {
            reason: line,
            refused: false
        }
    );
    assert_eq!(output.traces.len(), expected.len());
    for (cpu, fallback) in expected.iter().zip(&output.traces) {
        // Everything but the timings.
        assert_eq!(
            (&fallback.draws, &fallback.stats, &fallback.tuning),
            (&cpu.draws, &cpu.stats, &cpu.tuning)
        );
    }

    // Invalid settings are refused before running.
    let mut bad = request(1, 10);
    bad.settings.target_accept = 1.5;
    let refused = sample(&supervisor, SampleJob::new(bad)).await;
    assert!(
        matches!(refused, Err(GpuActorError::Sampler(_))),
        "{refused:?}"
    );
    supervisor.stop(None);
}

/// Refusing software devices: on a machine whose only adapter is lavapipe (CI), that is "no
/// usable adapter", said in one line, and jobs run on the CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_refusing_software_devices_leaves_lavapipe_only_machines_on_the_cpu() {
    let args = GpuSupervisorArgs {
        allow_software: false,
        ..GpuSupervisorArgs::default()
    };
    let (supervisor, _) = GpuSupervisor::spawn(None, GpuSupervisor, args)
        .await
        .expect("the supervisor starts");
    let report = report(&supervisor).await;
    let hardware = enumerate_adapters()
        .map(|adapters| adapters.iter().any(|a| !a.is_software()))
        .unwrap_or(false);
    if hardware {
        assert!(!report.workers.is_empty(), "{report:?}");
        assert!(report.workers.iter().all(|w| !w.adapter.is_software()));
    } else {
        let line = report.fallback.expect("a fallback line");
        assert!(!line.contains('\n'), "{line}");
        eprintln!("fallback line: {line}");
        let output = sample(&supervisor, SampleJob::new(request(1, 50)))
            .await
            .expect("the job runs on the CPU");
        assert!(matches!(output.ran_on, RanOn::Cpu { .. }));
    }
    supervisor.stop(None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_answer_for_unknown_workers_and_stopped_supervisors() {
    let (supervisor, handle) =
        GpuSupervisor::spawn(None, GpuSupervisor, GpuSupervisorArgs::default())
            .await
            .expect("the supervisor starts");
    let unknown =
        GpuSupervisor::inject_fault(&supervisor, WorkerId(99), Fault::Panic, DEADLINE).await;
    assert!(
        matches!(
            unknown,
            Err(GpuActorError::NoWorker {
                worker: WorkerId(99)
            })
        ),
        "{unknown:?}"
    );
    supervisor.stop(None);
    tokio::time::timeout(DEADLINE, handle)
        .await
        .expect("the supervisor stops in time")
        .expect("cleanly");
    let after = sample(&supervisor, SampleJob::new(request(1, 10))).await;
    assert!(
        matches!(after, Err(GpuActorError::Unreachable)),
        "{after:?}"
    );
}

/// A job whose kernel does not compile within the budget runs on the CPU instead, and the
/// answer says why; the worker serves the next job (which goes the same way here: a zero
/// budget compiles nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_run_a_job_over_the_compile_budget_on_the_cpu() {
    let args = GpuSupervisorArgs {
        compile_budget: Duration::ZERO,
        ..fast_restarts(10)
    };
    let Some(supervisor) = start(args).await else {
        return;
    };
    for _ in 0..2 {
        let output = sample(&supervisor, SampleJob::new(request(2, 50)))
            .await
            .expect("the job runs on the CPU");
        assert_eq!(output.traces.len(), 2);
        match &output.ran_on {
            RanOn::Cpu {
                reason,
                refused: true,
            } => assert!(reason.contains("compile budget"), "{reason}"),
            other => panic!("not refused: {other:?}"),
        }
    }
    supervisor.stop(None);
}
