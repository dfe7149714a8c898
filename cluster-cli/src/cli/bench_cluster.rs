//! `cluster-cli bench-cluster`: measures a cluster of node processes on this machine, which
//! it starts itself (this binary, `node --no-gpu`, on free loopback ports, with a cookie of
//! its own) and stops at the end.
//!
//! - `overhead`: the round trip of a tiny sampling request (one chain, a one-parameter normal,
//!   10 warmup + 10 draws) through a one-node cluster over loopback — submit, placement on
//!   the node's CPU pool, streaming back, outcome — against the same chain run in this process
//!   with `sampler::sample_chains`; the difference is what the cluster adds. The round trip of
//!   a bare call (the member list) is shown for scale.
//! - `hostile` and `tls` (`bench_cluster/security.rs`): a node under a storm of
//!   unauthenticated connections, and TLS against plaintext.
//! - `scaling`: for each model, one job of `--chains` chains on clusters of 1, 2, 4 and 8
//!   nodes of `--cpu-slots` slots each; min bulk ESS per second of wall time (submission to
//!   outcome, warmup included) and the speedup over one node. The same seed gives the same
//!   draws whatever the placement, so the ESS is the same on every cluster size and the
//!   speedup is the ratio of wall times. Each node gets `--cpu-slots` cores: run it where
//!   nodes × slots cores are free.
//! - `remote-gpu` (`bench_cluster/remote_gpu.rs`): a job of N chains on a GPU node over
//!   loopback against the same job on an in-process GPU supervisor, on the same GPU.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use runtime::{
    ClientSettings, ClusterClient, Cookie, DevicePreference, MemberState, SampleRequest, WarmupMode,
};
use sampler::{
    ChainId, ChainSpec, CheckedModel, Limits, NoObserver, RunSummary, SamplerSettings, Seed,
};

use super::cluster::block_on;
use super::{SamplerArgs, default_models_dir, load_model};

mod remote_gpu;
mod security;

/// Arguments of `bench-cluster`.
#[derive(Debug, clap::Args)]
pub struct BenchClusterArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Round trip of a tiny sampling request over loopback vs the same run in-process.
    Overhead {
        /// Measured round trips (after 20 unmeasured ones).
        #[arg(long, default_value_t = 200)]
        repeats: usize,
    },
    /// One node under a storm of unauthenticated connections (idle ones, half-sent 60 MiB
    /// frames): its memory, and a legitimate job's time against the same node idle.
    Hostile {
        /// Idle connections kept open (reopened once closed).
        #[arg(long, default_value_t = 1000)]
        idle: usize,
        /// Connections sending a hello and the start of a 60 MiB frame (reopened once closed).
        #[arg(long, default_value_t = 1000)]
        frames: usize,
        /// Timed jobs in each condition (the median is shown).
        #[arg(long, default_value_t = 5)]
        repeats: usize,
    },
    /// TLS against plaintext: round trip of a tiny job, and draws streamed per second.
    Tls {
        /// Measured round trips of each (in three rounds, each after 10 unmeasured ones).
        #[arg(long, default_value_t = 200)]
        repeats: usize,
        /// Draws per chain of the long job (4 chains).
        #[arg(long, default_value_t = 250_000)]
        draws: u64,
    },
    /// ESS per second with 1, 2, 4 and 8 node processes.
    Scaling {
        /// Model files; default: every `*.json` in models/.
        models: Vec<PathBuf>,
        /// Cluster sizes, in node processes.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        nodes: Vec<usize>,
        /// CPU slots (chains at once) of each node.
        #[arg(long, default_value_t = 2)]
        cpu_slots: u32,
        /// Chains per job.
        #[arg(long, default_value_t = 32)]
        chains: u32,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        sampler: SamplerArgs,
    },
    /// A job of N chains on a GPU node over loopback against the same job run here.
    RemoteGpu(remote_gpu::RemoteGpuArgs),
}

pub fn run(args: BenchClusterArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::CLIENT_DEFAULT);
    match args.what {
        What::Overhead { repeats } => overhead(repeats),
        What::Hostile {
            idle,
            frames,
            repeats,
        } => security::hostile(idle, frames, repeats),
        What::Tls { repeats, draws } => security::tls(repeats, draws),
        What::Scaling {
            models,
            nodes,
            cpu_slots,
            chains,
            seed,
            sampler,
        } => scaling(models, &nodes, cpu_slots, chains, Seed(seed), &sampler),
        What::RemoteGpu(args) => remote_gpu::remote_gpu(args),
    }
}

/// Most timings reserved before the first: `--repeats` is the user's number.
const MAX_RESERVED: usize = 1 << 16;

const TINY: &str = r#"{"ir_version": 1, "name": "tiny",
  "parameters": [{"name": "x"}],
  "model": [{"sample": {"value": "x", "dist": {"normal": {"mu": 0, "sigma": 1}}}}]}"#;

fn overhead(repeats: usize) -> anyhow::Result<()> {
    let model = CheckedModel::from_json(TINY, &Limits::default())?;
    let settings = SamplerSettings {
        num_warmup: 10,
        num_draws: 10,
        threads: 1,
        ..SamplerSettings::default()
    };
    let spec = [ChainSpec::new(ChainId(0))];
    let warmups = 20;
    let mut local = Vec::with_capacity(repeats.min(MAX_RESERVED));
    for i in 0..warmups + repeats {
        let start = Instant::now();
        let traces =
            sampler::sample_chains(|| model.evaluator(), &settings, Seed(1), &spec, &NoObserver)?;
        let elapsed = start.elapsed();
        anyhow::ensure!(traces.len() == 1);
        if i >= warmups {
            local.push(elapsed);
        }
    }

    let cluster = LocalCluster::start(1, 1)?;
    let request = SampleRequest {
        gpu_precision: gpu_actor::PrecisionMode::Auto,
        model: model.model().clone(),
        settings: settings.clone(),
        n_chains: 1,
        seed: Seed(1),
        device: DevicePreference::Cpu,
        warmup: WarmupMode::Independent,
    };
    let (remote, bare) = block_on(async {
        let mut client = cluster.client().await?;
        let mut remote = Vec::with_capacity(repeats.min(MAX_RESERVED));
        let mut bare = Vec::with_capacity(repeats.min(MAX_RESERVED));
        for i in 0..warmups + repeats {
            let start = Instant::now();
            let outcome = client.sample(&request).await?.outcome().await?;
            let elapsed = start.elapsed();
            anyhow::ensure!(outcome.traces.len() == 1 && outcome.traces[0].stats.len() == 10);
            let start = Instant::now();
            client.members().await?;
            let members = start.elapsed();
            if i >= warmups {
                remote.push(elapsed);
                bare.push(members);
            }
        }
        client.close().await;
        Ok::<_, anyhow::Error>((remote, bare))
    })??;
    drop(cluster);

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let row = |name: &str, values: &[Duration]| {
        let (p10, p50, p90) = percentiles(values);
        outln!(
            "| {name} | {:.3} | {:.3} | {:.3} |",
            ms(p10),
            ms(p50),
            ms(p90)
        );
    };
    outln!(
        "Tiny request: 1 chain of a 1-parameter normal, 10 warmup + 10 draws; {repeats} runs each (after {warmups} unmeasured); one node process, 1 CPU slot, loopback.\n"
    );
    outln!("| round trip | p10 ms | median ms | p90 ms |");
    outln!("|---|---:|---:|---:|");
    row("in-process `sample_chains`", &local);
    row(
        "over loopback: submit → placement → streamed outcome",
        &remote,
    );
    row("bare call for scale (member list)", &bare);
    let added = ms(percentiles(&remote).1) - ms(percentiles(&local).1);
    outln!("\nadded by the cluster (median difference): {added:.3} ms (goal: under 1 ms)");
    Ok(())
}

fn percentiles(values: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = values.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    (at(0.1), at(0.5), at(0.9))
}

fn scaling(
    models: Vec<PathBuf>,
    sizes: &[usize],
    cpu_slots: u32,
    n_chains: u32,
    seed: Seed,
    sampler: &SamplerArgs,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !sizes.is_empty() && sizes.iter().all(|&n| n > 0),
        "--nodes: sizes from 1"
    );
    let paths = if models.is_empty() {
        let dir = default_models_dir();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| {
                format!(
                    "cannot list {} (run from the repository root)",
                    dir.display()
                )
            })?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        paths
    } else {
        models
    };
    let models: Vec<CheckedModel> = paths
        .iter()
        .map(|p| load_model(p))
        .collect::<Result<_, _>>()?;
    let settings = sampler.settings(1);
    settings.validate()?;
    for model in &models {
        // The client keeps every draw.
        let shape = runtime::JobShape::new(model, &settings, u64::from(n_chains), 0);
        super::limits::check_fits_here(&shape, model.name())?;
    }
    // results[model][size] = (ess per second, wall seconds, nodes used)
    let mut results = vec![Vec::new(); models.len()];
    for &size in sizes {
        let cluster = LocalCluster::start(size, cpu_slots)?;
        let measured = block_on(async {
            let mut client = cluster.client().await?;
            let mut rows = Vec::new();
            for model in &models {
                let request = SampleRequest {
                    gpu_precision: gpu_actor::PrecisionMode::Auto,
                    model: model.model().clone(),
                    settings: settings.clone(),
                    n_chains,
                    seed,
                    device: DevicePreference::Cpu,
                    warmup: WarmupMode::Independent,
                };
                let start = Instant::now();
                let outcome = client.sample(&request).await?.outcome().await?;
                let wall = start.elapsed().as_secs_f64();
                let summary = RunSummary::new(
                    &model.columns(),
                    model.program().n_parameter_columns(),
                    &outcome.traces,
                    &settings,
                );
                let used: BTreeSet<_> = outcome.placements.iter().map(|p| p.node.clone()).collect();
                errln!(
                    "{} nodes, {}: {wall:.2} s, min bulk ESS {:.0}, chains on {} nodes",
                    size,
                    model.name(),
                    summary.min_ess_bulk(),
                    used.len()
                );
                rows.push((summary.min_ess_bulk() / wall, wall, used.len()));
            }
            client.close().await;
            Ok::<_, anyhow::Error>(rows)
        })??;
        drop(cluster);
        for (result, row) in results.iter_mut().zip(measured) {
            result.push(row);
        }
    }

    outln!(
        "{n_chains} chains x ({} warmup + {} draws), seed {}, {cpu_slots} CPU slots per node; min bulk ESS per second of wall time (submission to outcome, warmup included); speedup over {} node(s).\n",
        settings.num_warmup,
        settings.num_draws,
        seed.0,
        sizes[0]
    );
    let header: Vec<String> = sizes
        .iter()
        .map(|n| format!("{n} nodes: ESS/s (speedup)"))
        .collect();
    outln!("| model | {} |", header.join(" | "));
    outln!("|---|{}", "---:|".repeat(sizes.len()));
    for (model, row) in models.iter().zip(&results) {
        let base = row[0].0;
        let cells: Vec<String> = row
            .iter()
            .map(|(ess, wall, _)| format!("{ess:.0} ({:.2}x, {wall:.1} s)", ess / base))
            .collect();
        outln!("| {} | {} |", model.name(), cells.join(" | "));
    }
    Ok(())
}

/// Node processes of this binary on loopback, killed when dropped.
struct LocalCluster {
    nodes: Vec<Child>,
    first: SocketAddr,
    cookie: String,
    config: PathBuf,
    size: usize,
    /// The device arguments of every `node` (`--no-gpu --cpu-slots N`, or a GPU node's).
    device_args: Vec<String>,
    /// Extra arguments of every `node` (TLS flags, limits).
    node_args: Vec<String>,
    /// The client's TLS identity, when the nodes run TLS.
    client_tls: Option<runtime::TlsIdentity>,
}

impl LocalCluster {
    fn start(size: usize, cpu_slots: u32) -> anyhow::Result<Self> {
        Self::start_with(size, cpu_slots, Vec::new(), None)
    }

    /// One node whose only pool is its GPU's (`--cpu-slots 0`): the hardware adapter, or a
    /// software one with `software`.
    fn start_gpu(software: bool) -> anyhow::Result<Self> {
        let mut device_args = vec!["--cpu-slots".to_owned(), "0".to_owned()];
        if software {
            device_args.push("--software-gpu".to_owned());
        }
        Self::launch(1, device_args, Vec::new(), None)
    }

    /// [`Self::start`] with extra node arguments and a client TLS identity.
    fn start_with(
        size: usize,
        cpu_slots: u32,
        node_args: Vec<String>,
        client_tls: Option<runtime::TlsIdentity>,
    ) -> anyhow::Result<Self> {
        let device_args = vec![
            "--no-gpu".to_owned(),
            "--cpu-slots".to_owned(),
            cpu_slots.to_string(),
        ];
        Self::launch(size, device_args, node_args, client_tls)
    }

    fn launch(
        size: usize,
        device_args: Vec<String>,
        node_args: Vec<String>,
        client_tls: Option<runtime::TlsIdentity>,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find this executable")?;
        let cookie = format!("BENCH{:016x}", runtime_nonce());
        let config = std::env::temp_dir().join(format!(
            "bench-cluster-{}-{:x}",
            std::process::id(),
            runtime_nonce()
        ));
        std::fs::create_dir_all(&config)?;
        let mut cluster = Self {
            nodes: Vec::new(),
            first: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            cookie,
            config,
            size,
            device_args,
            node_args,
            client_tls,
        };
        for index in 0..size {
            let address = cluster.spawn(&exe, index)?;
            if index == 0 {
                cluster.first = address;
            }
        }
        Ok(cluster)
    }

    /// Starts node `index`, joining the first; returns its address once it listens.
    fn spawn(&mut self, exe: &PathBuf, index: usize) -> anyhow::Result<SocketAddr> {
        for _ in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port();
            let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            // The timeline events asked of this process (`RUST_LOG=...timeline=debug`) are
            // asked of the nodes too, and their lines copied to this process's stderr.
            let timeline: Vec<String> = std::env::var("RUST_LOG")
                .unwrap_or_default()
                .split(',')
                .filter(|directive| directive.contains("::timeline"))
                .map(str::to_owned)
                .collect();
            let mut filter = "info,ractor=error,ractor_cluster=error".to_owned();
            for directive in &timeline {
                filter.push(',');
                filter.push_str(directive);
            }
            let mut command = Command::new(exe);
            command
                .args([
                    "node",
                    "--name",
                    &format!("n{index}"),
                    "--listen",
                    &address.to_string(),
                ])
                .args(&self.device_args)
                .args(&self.node_args)
                .env("BAYES_CLUSTER_COOKIE", &self.cookie)
                .env("XDG_CONFIG_HOME", &self.config)
                .env("RUST_LOG", &filter)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            if index > 0 {
                command.arg("--join").arg(self.first.to_string());
            }
            let mut child = command.spawn().context("cannot start a node")?;
            let stderr = child.stderr.take().context("node stderr")?;
            let echo = !timeline.is_empty();
            let (lines, received) = mpsc::channel();
            // Reads the node's log to its end (so the pipe never fills); the thread ends
            // when the node exits.
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if echo && line.contains("::timeline") {
                        eprintln!("n{index}: {line}");
                    }
                    let _ = lines.send(line);
                }
            });
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut log = Vec::new();
            let listening = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match received.recv_timeout(left) {
                    Ok(line) if line.contains("listening on") => break true,
                    Ok(line) => log.push(line),
                    Err(_) => break false,
                }
            };
            self.nodes.push(child);
            if listening {
                return Ok(address);
            }
            if let Some(mut child) = self.nodes.pop() {
                let _ = child.kill();
                let _ = child.wait();
            }
            if !log.iter().any(|line| line.contains("in use")) {
                bail!("node n{index} did not start:\n{}", log.join("\n"));
            }
        }
        bail!("node n{index} found no free port")
    }

    /// A client of the first node, once it sees every node up.
    async fn client(&self) -> anyhow::Result<ClusterClient> {
        self.client_with(|_| {}).await
    }

    /// [`Self::client`] with its settings changed by `edit`.
    async fn client_with(
        &self,
        edit: impl FnOnce(&mut ClientSettings),
    ) -> anyhow::Result<ClusterClient> {
        let mut settings = ClientSettings::new(Cookie::new(&self.cookie)?);
        settings.tls = self.client_tls.clone();
        edit(&mut settings);
        let mut client = ClusterClient::connect(self.first, settings).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let members = client.members().await?;
            let up = members
                .iter()
                .filter(|m| matches!(m.state, MemberState::Local | MemberState::Up))
                .count();
            if up == self.size {
                return Ok(client);
            }
            if Instant::now() > deadline {
                bail!("only {up} of {} nodes joined within 30 s", self.size);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for child in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.config);
    }
}

fn runtime_nonce() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}
