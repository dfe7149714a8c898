//! `cluster-cli node`: run a cluster node until SIGINT or SIGTERM, then stop it cleanly.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use runtime::{Node, NodeName, NodeResources, NodeSettings};
use tokio::signal::unix::{SignalKind, signal};

use super::cluster::{block_on, resolve};
use super::limits::LimitArgs;
use crate::cookie::{CookieArgs, Missing};

/// Arguments of `node`.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// This node's short name; its full name is NAME@HOST, HOST being the advertised address.
    #[arg(long)]
    name: String,
    /// Address to listen on, with an explicit port.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:4370")]
    listen: SocketAddr,
    /// Address other nodes dial to reach this one [default: --listen].
    #[arg(long, value_name = "HOST:PORT")]
    advertise: Option<SocketAddr>,
    /// Join the node at this address (repeatable); retried with backoff until it answers.
    #[arg(long = "join", value_name = "HOST:PORT")]
    join: Vec<String>,
    /// Chains this node runs at once on its CPU [default: one per core].
    #[arg(long)]
    cpu_slots: Option<u32>,
    /// Do not look for GPU adapters.
    #[arg(long)]
    no_gpu: bool,
    /// Obey test-only fault injection requests (`cluster-cli debug fault`): for tests only.
    #[arg(long)]
    allow_fault_injection: bool,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    cookie: CookieArgs,
}

pub fn run(args: NodeArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::NODE_DEFAULT);
    let advertise = match args.advertise {
        Some(advertise) => advertise,
        None if args.listen.ip().is_unspecified() => bail!(
            "--listen {} accepts connections on every interface: give --advertise HOST:PORT, the address other nodes dial",
            args.listen
        ),
        None => args.listen,
    };
    let name = NodeName::new(&args.name, &advertise.ip().to_string()).context("invalid --name")?;
    let seeds = args
        .join
        .iter()
        .map(|peer| resolve(peer).context("invalid --join"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cookie = args.cookie.resolve(Missing::Create)?;
    let mut settings = NodeSettings::new(name, args.listen, cookie);
    settings.advertise = advertise;
    settings.seeds = seeds;
    settings.resources = NodeResources::detect(args.cpu_slots, !args.no_gpu);
    settings.allow_fault_injection = args.allow_fault_injection;
    settings.limits = args.limits.limits();
    tracing::info!("{}", super::limits::describe(&settings.limits));
    block_on(serve(settings))?
}

async fn serve(settings: NodeSettings) -> anyhow::Result<()> {
    // Handlers first: a signal during startup must not kill the process uncleanly.
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut node = Node::start(settings).await?;
    let crashed = tokio::select! {
        _ = interrupt.recv() => None,
        _ = terminate.recv() => None,
        error = node.stopped() => Some(error),
    };
    match crashed {
        Some(error) => Err(error.into()),
        None => Ok(node.shutdown().await?),
    }
}
