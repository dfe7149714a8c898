//! `bench-cluster hostile` and `bench-cluster tls`: what the transport's protections and TLS
//! cost.
//!
//! - `hostile`: one node (2 CPU slots); a 4-chain job of eight_schools_noncentered timed on
//!   it idle, then again while this process keeps `--idle` unauthenticated idle connections
//!   and `--frames` connections that send a hello and the start of a 60 MiB frame open
//!   against it (each reopened a second after the node closes it), from 127.0.0.2 and up,
//!   16 connections per address. The node's resident memory before, at its peak during the
//!   storm, and after; what happened to the connections (refused as busy or throttled,
//!   closed at once, closed at the handshake deadline).
//! - `tls`: two one-node clusters, one plaintext and one with `tls init` certificates,
//!   measured in turn (three rounds, one client at a time): connecting a client, the round trip of a tiny job (as `overhead`), and
//!   the draws per second a long job streams back (4 chains of a one-parameter normal).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use runtime::transport::preamble::{Hello, Status};
use runtime::{
    ClientSettings, ClusterClient, Cookie, DevicePreference, NodeName, SampleRequest, TlsIdentity,
    WarmupMode,
};
use sampler::{CheckedModel, Limits, SamplerSettings, Seed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::{LocalCluster, TINY, percentiles};
use crate::cli::load_model;

/// Connections from one source address: the node's default cap per address.
const PER_ADDRESS: usize = 16;

/// What happened to the storm's connections.
#[derive(Debug, Default)]
struct Tally {
    opened: AtomicU64,
    connect_failed: AtomicU64,
    busy: AtomicU64,
    throttled: AtomicU64,
    closed_at_once: AtomicU64,
    closed_at_deadline: AtomicU64,
    admitted_now: AtomicI64,
    admitted_peak: AtomicI64,
}

pub(super) fn hostile(idle: usize, frames: usize, repeats: usize) -> anyhow::Result<()> {
    let needed = idle + frames + 256;
    if let Some(limit) = open_file_limit()
        && limit < needed as u64
    {
        bail!(
            "this benchmark opens {} connections but may open only {limit} files: run `ulimit -n {needed}` first",
            idle + frames
        );
    }
    let addresses = (idle + frames).div_ceil(PER_ADDRESS);
    if addresses > 250 {
        bail!(
            "at most {} connections (source addresses 127.0.0.2 to 127.0.0.251)",
            250 * PER_ADDRESS
        );
    }
    let model = load_model(Path::new("models/eight_schools_noncentered.json"))
        .context("run from the repository root")?;
    let request = SampleRequest {
        gpu_precision: gpu_actor::PrecisionMode::Auto,
        model: model.model().clone(),
        settings: SamplerSettings {
            threads: 1,
            ..SamplerSettings::default()
        },
        n_chains: 4,
        seed: Seed(1),
        device: DevicePreference::Cpu,
        warmup: WarmupMode::Independent,
    };
    let cluster = LocalCluster::start(1, 2)?;
    let pid = cluster.nodes[0].id();
    let target = cluster.first;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    let mut client = runtime.block_on(cluster.client())?;
    let time_jobs = |client: &mut ClusterClient| {
        runtime.block_on(async {
            let mut times = Vec::new();
            for _ in 0..repeats {
                let start = Instant::now();
                let outcome = client.sample(&request).await?.outcome().await?;
                anyhow::ensure!(outcome.traces.len() == 4);
                times.push(start.elapsed());
            }
            Ok::<_, anyhow::Error>(percentiles(&times).1)
        })
    };
    // One unmeasured job, then the idle node.
    time_jobs(&mut client)?;
    let rss_before = rss_mib(pid);
    let idle_job = time_jobs(&mut client)?;

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let peak = Arc::new(AtomicU64::new(0));
    let watcher = {
        let stop = Arc::clone(&stop);
        let peak = Arc::clone(&peak);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let mut attackers = tokio::task::JoinSet::new();
    for i in 0..idle + frames {
        let from = Ipv4Addr::new(127, 0, 0, 2 + (i / PER_ADDRESS) as u8);
        let sends_frame = i >= idle;
        let stop = Arc::clone(&stop);
        let tally = Arc::clone(&tally);
        attackers.spawn_on(
            attacker(target, from, sends_frame, stop, tally),
            runtime.handle(),
        );
    }
    // Let the storm build up (past one handshake deadline), then time the job in it.
    std::thread::sleep(Duration::from_secs(6));
    let attacked_job = time_jobs(&mut client)?;
    stop.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        // Attackers stop within their next wait (at most the deadline's close and a second).
        let _ = tokio::time::timeout(Duration::from_secs(20), async {
            while attackers.join_next().await.is_some() {}
        })
        .await;
        attackers.abort_all();
    });
    let _ = watcher.join();
    std::thread::sleep(Duration::from_secs(1));
    let rss_after = rss_mib(pid);
    runtime.block_on(client.close());

    let count = |value: &AtomicU64| value.load(Ordering::Relaxed);
    let peak_mib = peak.load(Ordering::Relaxed) / 1024;
    outln!(
        "One node (2 CPU slots), default limits; storm: {idle} idle connections and {frames} sending a hello and the start of a 60 MiB frame, each reopened 1 s after it closed, from {addresses} loopback addresses; job: 4 chains of eight_schools_noncentered (1000 + 1000), median of {repeats}.\n"
    );
    outln!("| | node RSS MiB | 4-chain job s |");
    outln!("|---|---:|---:|");
    outln!(
        "| idle node | {rss_before} | {:.2} |",
        idle_job.as_secs_f64()
    );
    outln!(
        "| under the storm (peak RSS) | {peak_mib} | {:.2} ({:.2}x) |",
        attacked_job.as_secs_f64(),
        attacked_job.as_secs_f64() / idle_job.as_secs_f64()
    );
    outln!("| after the storm | {rss_after} | |");
    outln!(
        "\nconnections opened {}: refused as busy {}, throttled {}, closed at once {}, closed at the handshake deadline {}; at most {} at once without a refusal within 0.5 s; connects that failed {}",
        count(&tally.opened),
        count(&tally.busy),
        count(&tally.throttled),
        count(&tally.closed_at_once),
        count(&tally.closed_at_deadline),
        tally.admitted_peak.load(Ordering::Relaxed),
        count(&tally.connect_failed),
    );
    outln!(
        "goals: RSS under {} MiB (before + 100): {}; job within 1.5x: {}",
        rss_before + 100,
        if peak_mib < rss_before + 100 {
            "met"
        } else {
            "missed"
        },
        if attacked_job.as_secs_f64() <= 1.5 * idle_job.as_secs_f64() {
            "met"
        } else {
            "missed"
        }
    );
    Ok(())
}

/// One storm connection, reopened until `stop`.
async fn attacker(
    target: SocketAddr,
    from: Ipv4Addr,
    sends_frame: bool,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
    let name: NodeName = format!("storm@{from}").parse().expect("a valid name");
    while !stop.load(Ordering::Relaxed) {
        let stream = async {
            let socket = TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((from, 0)))?;
            tokio::time::timeout(Duration::from_secs(3), socket.connect(target))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
        };
        let Ok(mut stream) = stream.await else {
            tally.connect_failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        tally.opened.fetch_add(1, Ordering::Relaxed);
        let opened = Instant::now();
        if sends_frame {
            let _ = stream.write_all(&Hello::new(&name, 1).encode()).await;
        }
        let first = read_some(&mut stream).await;
        let refused = match Status::parse(&first) {
            Ok(Some((answer, _))) => match answer.status {
                Status::Busy { .. } => Some(&tally.busy),
                Status::Throttled { .. } => Some(&tally.throttled),
                _ => None,
            },
            _ => None,
        };
        match refused {
            Some(counter) => {
                counter.fetch_add(1, Ordering::Relaxed);
                let _ = read_to_close(&mut stream).await;
            }
            None => {
                let now = tally.admitted_now.fetch_add(1, Ordering::Relaxed) + 1;
                tally.admitted_peak.fetch_max(now, Ordering::Relaxed);
                if sends_frame {
                    let _ = stream.write_all(&(60u64 << 20).to_be_bytes()).await;
                    let _ = stream.write_all(&[0x0a; 64 * 1024]).await;
                }
                let _ = read_to_close(&mut stream).await;
                tally.admitted_now.fetch_sub(1, Ordering::Relaxed);
                let counter = if opened.elapsed() < Duration::from_secs(1) {
                    &tally.closed_at_once
                } else {
                    &tally.closed_at_deadline
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
        drop(stream);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What the node sends first (a refusal, or its `Ok` status), within a moment; an idle peer
/// that is admitted gets nothing.
async fn read_some(stream: &mut TcpStream) -> Vec<u8> {
    let mut bytes = vec![0u8; 512];
    match tokio::time::timeout(Duration::from_millis(500), stream.read(&mut bytes)).await {
        Ok(Ok(n)) => bytes.truncate(n),
        _ => bytes.clear(),
    }
    bytes
}

/// Reads until the node closes the connection (at most 15 s).
async fn read_to_close(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut sink = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            if stream.read(&mut sink).await? == 0 {
                return Ok(());
            }
        }
    })
    .await
    .unwrap_or(Ok(()))
}

pub(super) fn tls(repeats: usize, draws: u64) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("bench-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    super::super::tls::make(&dir, &[])?;
    let file = |name: &str| dir.join(name).display().to_string();
    let read = |name: &str| std::fs::read(dir.join(name));
    let client_tls = TlsIdentity::from_pem(
        &read("client.pem")?,
        &read("client-key.pem")?,
        &read("ca.pem")?,
    )?;
    let node_args = vec![
        "--tls-cert".to_owned(),
        file("node.pem"),
        "--tls-key".to_owned(),
        file("node-key.pem"),
        "--tls-ca".to_owned(),
        file("ca.pem"),
    ];
    let plain = LocalCluster::start(1, 2)?;
    let secure = LocalCluster::start_with(1, 2, node_args, Some(client_tls))?;
    let _ = std::fs::remove_dir_all(&dir);

    let tiny = CheckedModel::from_json(TINY, &Limits::default())?;
    let round_trip = SampleRequest {
        gpu_precision: gpu_actor::PrecisionMode::Auto,
        model: tiny.model().clone(),
        settings: SamplerSettings {
            num_warmup: 10,
            num_draws: 10,
            threads: 1,
            ..SamplerSettings::default()
        },
        n_chains: 1,
        seed: Seed(1),
        device: DevicePreference::Cpu,
        warmup: WarmupMode::Independent,
    };
    let long = SampleRequest {
        settings: SamplerSettings {
            num_warmup: 100,
            num_draws: draws,
            threads: 1,
            ..SamplerSettings::default()
        },
        n_chains: 4,
        ..round_trip.clone()
    };
    // One client at a time (ractor's process groups are process-wide), the two clusters in
    // turn, three rounds.
    let rounds = 3;
    let warmups = 10;
    let measured = block(async {
        let mut connect = [Vec::new(), Vec::new()];
        let mut trips = [Vec::new(), Vec::new()];
        let mut streamed = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (which, cluster) in [&plain, &secure].into_iter().enumerate() {
                for _ in 0..5 {
                    let mut settings = ClientSettings::new(Cookie::new(&cluster.cookie)?);
                    settings.tls = cluster.client_tls.clone();
                    let start = Instant::now();
                    let client = ClusterClient::connect(cluster.first, settings).await?;
                    connect[which].push(start.elapsed());
                    client.close().await;
                }
                let mut client = cluster.client().await?;
                for i in 0..warmups + repeats.div_ceil(rounds) {
                    let start = Instant::now();
                    let outcome = client.sample(&round_trip).await?.outcome().await?;
                    let elapsed = start.elapsed();
                    anyhow::ensure!(outcome.traces.len() == 1);
                    if i >= warmups {
                        trips[which].push(elapsed);
                    }
                }
                let start = Instant::now();
                let outcome = client.sample(&long).await?.outcome().await?;
                let elapsed = start.elapsed();
                let total: usize = outcome.traces.iter().map(|t| t.stats.len()).sum();
                anyhow::ensure!(total as u64 == 4 * draws);
                // Kept as the wall time per million draws.
                streamed[which].push(Duration::from_secs_f64(
                    elapsed.as_secs_f64() / total as f64 * 1e6,
                ));
                client.close().await;
            }
        }
        Ok::<_, anyhow::Error>((connect, trips, streamed))
    })?;
    let (connect, trips, streamed) = measured?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    outln!(
        "One node process each (2 CPU slots, loopback), plaintext and TLS 1.3 (`tls init` certificates, ECDSA P-256), measured in turn; round trip: 1 chain of a 1-parameter normal, 10 + 10, {} runs; streaming: 4 chains x {draws} draws, {rounds} runs; connect: {} runs.\n",
        rounds * repeats.div_ceil(rounds),
        rounds * 5
    );
    outln!("| | plaintext | TLS | TLS - plaintext |");
    outln!("|---|---:|---:|---:|");
    let row = |name: &str, values: [&[Duration]; 2]| {
        let (_, plain, _) = percentiles(values[0]);
        let (_, secure, _) = percentiles(values[1]);
        outln!(
            "| {name}, median ms | {:.3} | {:.3} | {:+.3} |",
            ms(plain),
            ms(secure),
            ms(secure) - ms(plain)
        );
    };
    row("connect (TCP to ready session)", [&connect[0], &connect[1]]);
    row("tiny job round trip", [&trips[0], &trips[1]]);
    // `streamed` holds the wall time per million draws.
    let rate = |values: &[Duration]| 1e6 / percentiles(values).1.as_secs_f64();
    let (plain_rate, secure_rate) = (rate(&streamed[0]), rate(&streamed[1]));
    outln!(
        "| long job, draws streamed per second (median) | {plain_rate:.0} | {secure_rate:.0} | {:+.1}% |",
        (secure_rate / plain_rate - 1.0) * 100.0
    );
    let added = ms(percentiles(&trips[1]).1) - ms(percentiles(&trips[0]).1);
    outln!(
        "\nround trip added by TLS: {added:.3} ms (goal: within 0.3 ms): {}",
        if added <= 0.3 { "met" } else { "missed" }
    );
    Ok(())
}

fn block<F: Future>(future: F) -> anyhow::Result<F::Output> {
    super::block_on(future)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn rss_mib(pid: u32) -> u64 {
    rss_kib(pid) / 1024
}

/// The soft limit on open files of this process, from `/proc/self/limits`.
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}
