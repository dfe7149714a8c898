//! `bench-cluster remote-gpu`: a job of N chains on a GPU node, submitted over loopback,
//! against the same job run in this process on the same GPU.
//!
//! - local: the job as `sample --device gpu` runs it: one job of a [`GpuSupervisor`] started
//!   in this process (every chain, the default kernel, f32), its traces kept in memory; wall
//!   time from handing the job to the supervisor to its answer.
//! - remote: one node process of this binary (`node --cpu-slots 0`, its GPU pool on the
//!   hardware adapter, or lavapipe with `--software-gpu`), a [`ClusterClient`] of it in this
//!   process; the same job with [`DevicePreference::Gpu`]; wall time from submission to the
//!   outcome, with every draw streamed back to the client.
//!
//! Fairness: each side first runs one untimed job of every model (the smallest chain count),
//! so that both have opened their device, warmed the driver and built the model's kernels
//! (kept in each GPU worker's pipeline cache); the timed walls then include what a warm
//! kernel cache still costs (uploads, the pipeline lookup, the readback of every draw) but no
//! shader compile on either side. Local and remote alternate, each `--repeats` times per row,
//! and the table has the medians; rows go by chain count (every model's, smallest first), and
//! `--budget` stops starting rows past a time. Beside the walls, the longest chain's own
//! warmup + sampling time as its sampler timed it (remote: on the node) tells the GPU job
//! from what surrounds it (submission, placement, streaming, the client's assembly). The two sides run the same seed on the same kernel, so the
//! draws must be the same: the benchmark compares every chain's log densities and says
//! whether they match. The min bulk ESS is of the last remote outcome (the same draws), and
//! only up to [`MAX_ESS_CHAINS`] chains (beyond, its cost is not worth it here).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use gpu_actor::{
    GpuKernel, GpuSampleRequest, GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg, Precision,
    RanOn, SampleJob,
};
use ractor::{Actor, ActorRef};
use runtime::{
    ClusterClient, DevicePreference, JobOutcome, JobUpdate, PollCounts, PoolKind, SampleRequest,
    WarmupMode,
};
use sampler::{ChainId, ChainSpec, ChainTrace, CheckedModel, RunSummary, SamplerSettings, Seed};

use super::{LocalCluster, block_on};
use crate::cli::{default_models_dir, load_model};

/// Rows with more chains get no ESS.
const MAX_ESS_CHAINS: u32 = 8192;
/// Longest wait for the GPU supervisor's report, and for one job.
const SUPERVISOR_TIMEOUT: Duration = Duration::from_secs(60);
const JOB_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long the node may take to offer its GPU pool after it listens.
const GPU_POOL_WAIT: Duration = Duration::from_secs(60);

/// Arguments of `bench-cluster remote-gpu`.
#[derive(Debug, clap::Args)]
pub(super) struct RemoteGpuArgs {
    /// Models, by name in models/.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "eight_schools_noncentered,logistic"
    )]
    models: Vec<String>,
    /// Chains per job.
    #[arg(long, value_delimiter = ',', default_value = "1024,8192,65536")]
    chains: Vec<u32>,
    /// Warmup iterations per chain.
    #[arg(long, default_value_t = 400)]
    warmup: u64,
    /// Draws kept per chain.
    #[arg(long, default_value_t = 400)]
    draws: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Timed jobs of each side per row (the median is shown).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Start no new row past this many seconds after the warm-up (the table has the rows
    /// done); rows go by chain count, every model's first.
    #[arg(long, value_name = "SECONDS")]
    budget: Option<f64>,
    /// Use a software adapter (lavapipe) on both sides: the node runs with `--software-gpu
    /// --cpu-slots 0`, this process's supervisor allows it. For testing without a GPU.
    #[arg(long)]
    software_gpu: bool,
    /// Poll through the cluster session instead of a job link (the path before job links,
    /// for comparison).
    #[arg(long)]
    session_polls: bool,
}

/// One timed job of a side.
struct Timed {
    wall: Duration,
    traces: Vec<ChainTrace>,
    /// Progress events received (remote only).
    events: usize,
    /// Polls through the job link and through the session (remote only).
    polls: PollCounts,
}

/// The medians and checks of one (model, chains) row.
struct Row {
    model: String,
    chains: u32,
    local: Duration,
    remote: Duration,
    /// The longest chain's warmup + sampling seconds as the sampler timed it, of the
    /// median run's side (local; remote, timed on the node).
    local_chain: f64,
    remote_chain: f64,
    /// Tasks (`Placed` updates) the remote job became, and whether all were on GPU workers.
    tasks: usize,
    /// Progress events of the last remote run (each a chunk of one chain's draws, or none).
    events: usize,
    /// The last remote run's polls.
    polls: PollCounts,
    all_gpu: bool,
    same_draws: bool,
    ess: Option<f64>,
}

pub(super) fn remote_gpu(args: RemoteGpuArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.chains.is_empty() && args.chains.iter().all(|&n| n > 0),
        "--chains: counts from 1"
    );
    anyhow::ensure!(args.repeats > 0, "--repeats must be at least 1");
    let models: Vec<CheckedModel> = args
        .models
        .iter()
        .map(|name| {
            let path: PathBuf = default_models_dir().join(format!("{name}.json"));
            load_model(&path)
                .with_context(|| format!("model {name} (run from the repository root)"))
        })
        .collect::<Result<_, _>>()?;
    let settings = SamplerSettings {
        num_warmup: args.warmup,
        num_draws: args.draws,
        threads: 0,
        ..SamplerSettings::default()
    };
    settings.validate()?;
    let largest = *args.chains.iter().max().unwrap_or(&1);
    for model in &models {
        // Both sides' traces of the largest row are held here at once.
        let shape = runtime::JobShape::new(model, &settings, 2 * u64::from(largest), 0);
        crate::cli::limits::check_fits_here(&shape, model.name())?;
    }
    let seed = Seed(args.seed);
    let cluster = LocalCluster::start_gpu(args.software_gpu)?;

    let (rows, adapter) = block_on(async {
        let supervisor_args = GpuSupervisorArgs {
            allow_software: args.software_gpu,
            ..GpuSupervisorArgs::default()
        };
        let (supervisor, handle) = GpuSupervisor::spawn(None, GpuSupervisor, supervisor_args)
            .await
            .context("cannot start the GPU supervisor")?;
        let report = GpuSupervisor::report(&supervisor, SUPERVISOR_TIMEOUT).await?;
        if let Some(line) = report.fallback {
            bail!("no usable GPU here: {line} (a software adapter needs --software-gpu)");
        }
        let mut client = cluster
            .client_with(|settings| settings.job_links = !args.session_polls)
            .await?;
        let measured = measure(&supervisor, &mut client, &models, &settings, seed, &args).await;
        client.close().await;
        supervisor.stop(None);
        let _ = tokio::time::timeout(SUPERVISOR_TIMEOUT, handle).await;
        measured
    })??;
    drop(cluster);

    outln!("{}; GPU: {adapter}\n", machine_line());
    outln!(
        "One node process (`node --cpu-slots 0`{}, loopback) against an in-process GPU supervisor (as `sample --device gpu`), same GPU; {} warmup + {} draws per chain, seed {}, default kernel, f32; wall: local from handing the job to the supervisor to its answer, remote from submission to the outcome with every draw streamed back; both after one untimed job per model (kernels built and cached on each side, so no compile in either wall); median of {} runs each, alternating.\n",
        if args.software_gpu {
            ", --software-gpu"
        } else {
            ""
        },
        settings.num_warmup,
        settings.num_draws,
        seed.0,
        args.repeats
    );
    outln!(
        "| model | chains | local wall s | remote wall s | remote/local | chains' own s, local / remote | tasks | progress events | polls, link / session | same draws | min bulk ESS |"
    );
    outln!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let mut worst: f64 = 0.0;
    for row in &rows {
        let ratio = row.remote.as_secs_f64() / row.local.as_secs_f64();
        worst = worst.max(ratio);
        outln!(
            "| {} | {} | {:.3} | {:.3} | {:.2} | {:.3} / {:.3} | {}{} | {} | {} / {} | {} | {} |",
            row.model,
            row.chains,
            row.local.as_secs_f64(),
            row.remote.as_secs_f64(),
            ratio,
            row.local_chain,
            row.remote_chain,
            row.tasks,
            if row.all_gpu { "" } else { " (not all GPU)" },
            row.events,
            row.polls.link,
            row.polls.session,
            if row.same_draws { "yes" } else { "NO" },
            row.ess
                .map_or_else(|| "–".to_owned(), |ess| format!("{ess:.0}"))
        );
    }
    outln!(
        "\nchains' own s: the longest chain's warmup + sampling time as its sampler timed it (remote: on the node), the GPU job without what is around it (submission, streaming to the client after the last draw); tasks: the remote job's placements; progress events: of the last remote run (each one chain's draws since its last event, or none during warmup)."
    );
    outln!(
        "\nworst remote/local: {worst:.2} (goal: within 1.10): {}",
        if worst <= 1.10 { "met" } else { "missed" }
    );
    Ok(())
}

/// Warms both sides, then times every row.
async fn measure(
    supervisor: &ActorRef<GpuSupervisorMsg>,
    client: &mut ClusterClient,
    models: &[CheckedModel],
    settings: &SamplerSettings,
    seed: Seed,
    args: &RemoteGpuArgs,
) -> anyhow::Result<(Vec<Row>, String)> {
    let smallest = *args.chains.iter().min().unwrap_or(&1);
    let mut adapter = String::new();
    for model in models {
        let (output, ran_on) = local_job(supervisor, model, settings, seed, smallest).await?;
        drop(output);
        adapter = ran_on;
        warm_remote(client, model, settings, seed, smallest).await?;
        errln!(
            "warmed up: {} ({smallest} chains) on both sides",
            model.name()
        );
    }
    let mut rows = Vec::new();
    let started = Instant::now();
    let over = |started: Instant| {
        args.budget
            .is_some_and(|budget| started.elapsed().as_secs_f64() > budget)
    };
    for &chains in &args.chains {
        for model in models {
            if over(started) {
                errln!("budget spent: {} x {chains} not run", model.name());
                continue;
            }
            let mut local = Vec::with_capacity(args.repeats);
            let mut remote = Vec::with_capacity(args.repeats);
            let mut same_draws = true;
            let mut tasks = 0;
            let mut events = 0;
            let mut polls = PollCounts::default();
            let mut all_gpu = true;
            let mut last_remote = Vec::new();
            let mut local_chain = Vec::with_capacity(args.repeats);
            let mut remote_chain = Vec::with_capacity(args.repeats);
            for _ in 0..args.repeats {
                let (mine, _) = local_job(supervisor, model, settings, seed, chains).await?;
                let (theirs, placed) =
                    remote_job(client, model, settings, seed, chains, DevicePreference::Gpu)
                        .await?;
                same_draws &= same(&mine.traces, &theirs.traces);
                tasks = placed.len();
                events = theirs.events;
                polls = theirs.polls;
                all_gpu &= placed.iter().all(|&kind| kind == PoolKind::Gpu);
                let (mine_chain, theirs_chain) = (longest(&mine.traces), longest(&theirs.traces));
                errln!(
                    "{} x {chains}: local {:.3} s (chains {mine_chain:.3} s), remote {:.3} s (chains {theirs_chain:.3} s on the node), {} tasks, {} progress events",
                    model.name(),
                    mine.wall.as_secs_f64(),
                    theirs.wall.as_secs_f64(),
                    placed.len(),
                    theirs.events
                );
                local_chain.push(Duration::from_secs_f64(mine_chain));
                remote_chain.push(Duration::from_secs_f64(theirs_chain));
                local.push(mine.wall);
                remote.push(theirs.wall);
                last_remote = theirs.traces;
            }
            let ess = (chains <= MAX_ESS_CHAINS).then(|| {
                RunSummary::new(
                    &model.columns(),
                    model.program().n_parameter_columns(),
                    &last_remote,
                    settings,
                )
                .min_ess_bulk()
            });
            rows.push(Row {
                model: model.name().to_owned(),
                chains,
                local: median(&mut local),
                remote: median(&mut remote),
                local_chain: median(&mut local_chain).as_secs_f64(),
                remote_chain: median(&mut remote_chain).as_secs_f64(),
                tasks,
                events,
                polls,
                all_gpu,
                same_draws,
                ess,
            });
        }
    }
    Ok((rows, adapter))
}

/// One job of the in-process supervisor; the adapter it ran on (an error if not a GPU).
async fn local_job(
    supervisor: &ActorRef<GpuSupervisorMsg>,
    model: &CheckedModel,
    settings: &SamplerSettings,
    seed: Seed,
    chains: u32,
) -> anyhow::Result<(Timed, String)> {
    let request = GpuSampleRequest {
        model: model.clone(),
        settings: settings.clone(),
        seed,
        chains: (0..chains).map(|c| ChainSpec::new(ChainId(c))).collect(),
        kernel: GpuKernel::default(),
        precision: Precision::F32.into(),
    };
    let start = Instant::now();
    let output = GpuSupervisor::sample(supervisor, SampleJob::new(request), JOB_TIMEOUT).await?;
    let wall = start.elapsed();
    let adapter = match &output.ran_on {
        RanOn::Gpu { .. } => output.ran_on.to_string(),
        RanOn::Cpu { reason, .. } | RanOn::Split { reason, .. } => {
            bail!("the local job ran on the CPU: {reason}")
        }
    };
    anyhow::ensure!(output.traces.len() == chains as usize);
    Ok((
        Timed {
            wall,
            traces: output.traces,
            events: 0,
            polls: PollCounts::default(),
        },
        adapter,
    ))
}

/// One job through the client, followed to its outcome; the kind of worker of each task.
async fn remote_job(
    client: &mut ClusterClient,
    model: &CheckedModel,
    settings: &SamplerSettings,
    seed: Seed,
    chains: u32,
    device: DevicePreference,
) -> anyhow::Result<(Timed, Vec<PoolKind>)> {
    let request = SampleRequest {
        // As the local run it is compared with.
        gpu_precision: gpu_actor::PrecisionMode::F32,
        model: model.model().clone(),
        settings: settings.clone(),
        n_chains: chains,
        seed,
        device,
        warmup: WarmupMode::Independent,
    };
    let start = Instant::now();
    let mut job = client.sample(&request).await?;
    let mut placed = Vec::new();
    let mut events = 0;
    while let Some(update) = job.next().await? {
        match update {
            JobUpdate::Placed { pool, .. } => placed.push(pool),
            JobUpdate::Progress { .. } => events += 1,
            _ => {}
        }
    }
    let outcome: JobOutcome = job.outcome().await?;
    let wall = start.elapsed();
    anyhow::ensure!(
        outcome.traces.len() == chains as usize && outcome.retried.is_empty(),
        "the remote job came back with {} traces and {} retries",
        outcome.traces.len(),
        outcome.retried.len()
    );
    Ok((
        Timed {
            wall,
            traces: outcome.traces,
            events,
            polls: outcome.polls,
        },
        placed,
    ))
}

/// The untimed first remote job of a model, once the node offers its GPU pool (it opens its
/// device after it listens: until then a GPU job finds no worker).
async fn warm_remote(
    client: &mut ClusterClient,
    model: &CheckedModel,
    settings: &SamplerSettings,
    seed: Seed,
    chains: u32,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + GPU_POOL_WAIT;
    loop {
        match remote_job(client, model, settings, seed, chains, DevicePreference::Gpu).await {
            Ok((_, placed)) if placed.iter().all(|&kind| kind == PoolKind::Gpu) => return Ok(()),
            Ok(_) => bail!("the node ran GPU chains on a CPU pool"),
            Err(error) if Instant::now() < deadline => {
                errln!("waiting for the node's GPU pool: {error:#}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error.context("the node offered no GPU pool")),
        }
    }
}

/// The longest chain's warmup and sampling time, as its sampler timed it.
fn longest(traces: &[ChainTrace]) -> f64 {
    traces
        .iter()
        .map(|t| t.warmup_seconds + t.sampling_seconds)
        .fold(0.0, f64::max)
}

/// Whether both sides drew the same: every chain's log densities and tree sizes.
fn same(local: &[ChainTrace], remote: &[ChainTrace]) -> bool {
    local.len() == remote.len()
        && local.iter().zip(remote).all(|(a, b)| {
            a.chain == b.chain
                && a.stats.len() == b.stats.len()
                && a.stats
                    .iter()
                    .zip(&b.stats)
                    .all(|(x, y)| x.lp.to_bits() == y.lp.to_bits() && x.n_leapfrog == y.n_leapfrog)
        })
}

/// The median (of an even count, the mean of the middle two).
fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2
    }
}

/// Host name, CPU model, cores and memory of this machine.
fn machine_line() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = crate::cli::limits::machine_memory().map_or_else(String::new, |m| {
        format!(", {:.0} GiB", m.total as f64 / (1u64 << 30) as f64)
    });
    format!("machine: {host}, {cpu}, {cores} cores{memory}")
}
