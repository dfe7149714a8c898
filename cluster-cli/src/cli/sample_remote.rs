//! `cluster-cli sample --cluster HOST:PORT`: sample on a cluster instead of this machine.
//!
//! The command is a hidden client of the cluster (it never becomes a member): it sends the
//! model and settings to the coordinator of the node at HOST:PORT, which spreads the chains
//! over the cluster's workers, and follows the job: one line on stderr per placement,
//! finished chain and retry, then the usual summary on stdout, with where each chain ran and
//! what was retried. `--device gpu` sends the chains to GPU workers, wherever they are: this
//! machine needs no GPU; the summary's header then says, under its first line, where each
//! GPU node ran its chains, in which precision and why (or why it used its CPU), as the
//! nodes told the coordinator (`JobOutcome::notes`). Ctrl-C cancels the job on the cluster.
//!
//! If that node dies, stalls or drains mid-job, the client resubmits the chains it has not
//! received to another member (one of the `--cluster` addresses, or a member the node
//! reported) and says so; the result is the one an undisturbed run gives.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use anyhow::Context;
use clap::ValueEnum;
use gpu_actor::PrecisionMode;
use runtime::wire::{CallError, WireError};
use runtime::{
    ClientError, ClientSettings, ClusterClient, DEFAULT_BURN_IN, DevicePreference, JobOutcome,
    JobUpdate, LimitExceeded, NodeName, SampleRequest, WARMUP_CHAIN, WarmupMode,
};
use sampler::{ChainId, ChainTrace, CheckedModel, SamplerSettings, Seed};

use super::cluster::{TlsOptions, block_on, resolve};
use super::sample::{hinted, with_hint};
use crate::cookie::{CookieArgs, Missing};

/// The options of `sample` that send it to a cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// Sample on the cluster of the node at HOST:PORT instead of this machine (chains run
    /// where the cluster has room; with --device gpu, on its GPU workers). Repeatable: the
    /// first that answers takes the job; the others, and the members it reports, take it
    /// over if it is lost.
    #[arg(long, value_name = "HOST:PORT")]
    pub cluster: Vec<String>,
    /// With --cluster: each chain runs its own warmup (independent), or one chain warms up
    /// and every chain starts from its final position and tuning (broadcast).
    #[arg(long, value_enum, default_value_t = WarmupArg::Independent)]
    warmup_mode: WarmupArg,
    /// With --warmup-mode broadcast: draws each chain drops before it keeps --draws.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BURN_IN)]
    burn_in: u64,
    #[command(flatten)]
    cookie: CookieArgs,
    #[command(flatten)]
    tls: TlsOptions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WarmupArg {
    Independent,
    Broadcast,
}

/// A finished remote run: the traces, and the lines that go around the summary.
#[derive(Debug)]
pub struct RemoteRun {
    /// One per chain, in chain order.
    pub traces: Vec<ChainTrace>,
    /// The first line (model, chains, draws, seed, time, cluster), then a line per note
    /// on how chains ran (`ran on node NODE: ...`).
    pub header: String,
    /// Where chains ran and what was retried (printed after the summary).
    pub report: String,
}

/// Runs `n_chains` chains of `model` on the cluster at `args.cluster`; `gpu`: GPU workers
/// only (`Some(true)`), CPU pools only (`Some(false)`), or wherever there is room.
pub fn run(
    args: &RemoteArgs,
    model: &CheckedModel,
    settings: &SamplerSettings,
    seed: Seed,
    n_chains: u32,
    gpu: Option<bool>,
    gpu_precision: PrecisionMode,
) -> anyhow::Result<RemoteRun> {
    crate::logging::init(crate::logging::CLIENT_DEFAULT);
    anyhow::ensure!(!args.cluster.is_empty(), "--cluster is missing");
    let addresses = args
        .cluster
        .iter()
        .map(|cluster| resolve(cluster))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cluster = args.cluster.join(",");
    let mut client_settings = ClientSettings::new(args.cookie.resolve(Missing::Fail)?);
    client_settings.tls = args.tls.identity()?;
    let request = SampleRequest {
        model: model.model().clone(),
        settings: settings.clone(),
        n_chains,
        seed,
        device: match gpu {
            Some(true) => DevicePreference::Gpu,
            Some(false) => DevicePreference::Cpu,
            None => DevicePreference::Any,
        },
        gpu_precision,
        warmup: match args.warmup_mode {
            WarmupArg::Independent => WarmupMode::Independent,
            WarmupArg::Broadcast => WarmupMode::Broadcast {
                burn_in: args.burn_in,
            },
        },
    };
    // The client keeps every draw: they must fit here before a node is asked.
    let shape = request
        .shape()
        .with_context(|| format!("{} does not validate", model.name()))?;
    super::limits::check_fits_here(&shape, "job")?;
    let started = Instant::now();
    let outcome = block_on(async move {
        let mut client = ClusterClient::connect_any(&addresses, client_settings).await?;
        let outcome = follow(&mut client, &request).await;
        client.close().await;
        outcome
    })??;
    let nodes: std::collections::BTreeSet<&NodeName> =
        outcome.placements.iter().map(|p| &p.node).collect();
    let mut header = format!(
        "{}: {} chains x {} draws after {} warmup{}, seed {} ({:.2} s on {} nodes of the cluster at {cluster}, job {})\n",
        model.name(),
        n_chains,
        settings.num_draws,
        settings.num_warmup,
        match args.warmup_mode {
            WarmupArg::Independent => String::new(),
            WarmupArg::Broadcast => format!(" once, broadcast with {} burn-in", args.burn_in),
        },
        seed.0,
        started.elapsed().as_secs_f64(),
        nodes.len(),
        outcome.job,
    );
    for note in &outcome.notes {
        let _ = writeln!(
            header,
            "ran on node {}: {}",
            note.node,
            with_hint(&note.text)
        );
    }
    let report = report(&outcome);
    Ok(RemoteRun {
        traces: outcome.traces,
        header,
        report,
    })
}

/// Submits the job and prints its updates until it finishes; Ctrl-C cancels it.
async fn follow(client: &mut ClusterClient, request: &SampleRequest) -> anyhow::Result<JobOutcome> {
    let peer = client.peer().clone();
    let mut job = match client.sample(request).await {
        Ok(job) => job,
        // A node's limit is the user's to change: exit code 2, the node's message.
        Err(ClientError::Call(CallError::Refused {
            error: WireError::LimitExceeded(limit),
            ..
        })) => return Err(LimitExceeded::from_wire(&limit).into()),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("{peer} did not take the job")));
        }
    };
    errln!(
        "job {}: {} chains of {} submitted to {}",
        job.id(),
        request.n_chains,
        request.model.name,
        job.coordinator()
    );
    loop {
        let update = tokio::select! {
            update = job.next() => update.map_err(hinted)?,
            _ = tokio::signal::ctrl_c() => {
                errln!("interrupted: cancelling job {}", job.id());
                let id = job.id();
                job.cancel().await.with_context(|| format!("cannot cancel job {id}"))?;
                anyhow::bail!("job {id} cancelled");
            }
        };
        let Some(update) = update else { break };
        if let Some(line) = describe(&update) {
            errln!("{line}");
        }
    }
    job.outcome().await.map_err(hinted)
}

fn chain_list(chains: &[ChainId]) -> String {
    chains
        .iter()
        .map(|&chain| {
            if chain == WARMUP_CHAIN {
                "warmup".to_owned()
            } else {
                chain.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The stderr line of an update (none for progress).
fn describe(update: &JobUpdate) -> Option<String> {
    match update {
        JobUpdate::Placed { chains, node, pool } => Some(format!(
            "chains {} placed on {node} ({pool})",
            chain_list(chains)
        )),
        JobUpdate::WarmupDone(report) => Some(format!(
            "warmup done on {} in {:.2} s (step size {:.3}); broadcasting",
            report.node, report.seconds, report.tuning.step_size
        )),
        JobUpdate::Progress { .. } => None,
        JobUpdate::ChainDone {
            chain,
            node,
            attempt,
        } => Some(if *attempt > 1 {
            format!("chain {chain} done on {node} (attempt {attempt})")
        } else {
            format!("chain {chain} done on {node}")
        }),
        JobUpdate::Retried(retries) => {
            let chains: Vec<ChainId> = retries.iter().map(|r| r.chain).collect();
            let first = retries.first()?;
            Some(format!(
                "chains {} retried (attempt {}): {}: {}",
                chain_list(&chains),
                first.attempt,
                first.node,
                with_hint(&first.reason)
            ))
        }
        JobUpdate::CoordinatorDraining { node, grace } => Some(format!(
            "entry node {node} is draining: the job goes on there for up to {:.0} s, then continues on another member",
            grace.as_secs_f64()
        )),
        JobUpdate::FailedOver(failover) => Some(format!(
            "entry node {} lost ({}); continuing on {} with {} unfinished chains (job {})",
            failover.from,
            failover.reason,
            failover.to,
            failover.chains.len(),
            failover.job
        )),
    }
}

/// Where chains ran and what was retried.
fn report(outcome: &JobOutcome) -> String {
    let mut by_node: BTreeMap<&NodeName, Vec<ChainId>> = BTreeMap::new();
    for placement in &outcome.placements {
        by_node
            .entry(&placement.node)
            .or_default()
            .push(placement.chain);
    }
    let mut text = String::from("\nchains by node:");
    for (node, chains) in &by_node {
        let _ = write!(text, " {node}: {};", chain_list(chains));
    }
    text.pop();
    text.push('\n');
    let _ = writeln!(
        text,
        "polls: {} through the job link, {} through the session",
        outcome.polls.link, outcome.polls.session
    );
    if outcome.retried.is_empty() {
        text.push_str("retried: none\n");
    }
    for retry in &outcome.retried {
        let finally = outcome
            .placements
            .iter()
            .find(|p| p.chain == retry.chain)
            .map_or_else(String::new, |p| format!(", finished on {}", p.node));
        let chain = if retry.chain == WARMUP_CHAIN {
            "warmup chain".to_owned()
        } else {
            format!("chain {}", retry.chain)
        };
        let _ = writeln!(
            text,
            "retried: {chain} from {} ({}); attempt {}{finally}",
            retry.node,
            with_hint(&retry.reason),
            retry.attempt
        );
    }
    text
}
