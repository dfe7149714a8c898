//! `cluster-cli node`: run a cluster node until SIGINT or SIGTERM, then drain it and stop it
//! cleanly: it takes no new work, lets its running chains and jobs finish for up to
//! `--drain-grace` seconds (what is left runs again elsewhere), leaves the cluster and exits
//! with status 0. A second SIGINT or SIGTERM during the drain stops it at once.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use runtime::{GpuPolicy, Node, NodeName, NodeResources, NodeSettings, TransportSettings};
use tokio::signal::unix::{SignalKind, signal};

use super::cluster::{TlsOptions, block_on, resolve};
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
    /// Chains this node runs at once on its CPU [default: one per core]; 0: none (the node
    /// runs no CPU pool).
    #[arg(long)]
    cpu_slots: Option<u32>,
    /// Do not look for GPU adapters.
    #[arg(long)]
    no_gpu: bool,
    /// Run a GPU pool on a software adapter (lavapipe, llvmpipe) when the machine has no
    /// other: correct, but slower than the CPU pool, so by default used only by a node
    /// that runs no CPU pool (`--cpu-slots 0`).
    #[arg(long, conflicts_with_all = ["no_gpu", "no_software_gpu"])]
    software_gpu: bool,
    /// Never run a GPU pool on a software adapter, even with `--cpu-slots 0`.
    #[arg(long, conflicts_with = "no_gpu")]
    no_software_gpu: bool,
    /// Obey test-only fault injection requests (`cluster-cli debug fault`): for tests only.
    #[arg(long)]
    allow_fault_injection: bool,
    /// On SIGINT or SIGTERM, wait up to this many seconds for the running chains and jobs
    /// before leaving (0: leave at once; their chains run again elsewhere).
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    drain_grace: f64,
    /// Connections this node holds at once before they authenticate; more are refused as
    /// busy.
    #[arg(long, value_name = "N", default_value_t = TransportSettings::default().max_unauthenticated)]
    max_unauthenticated: usize,
    /// Of those, connections from one address (an IPv6 /64 counts as one).
    #[arg(long, value_name = "N", default_value_t = TransportSettings::default().max_unauthenticated_per_address)]
    max_unauthenticated_per_address: usize,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    cookie: CookieArgs,
    #[command(flatten)]
    tls: TlsOptions,
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
    let grace = Duration::try_from_secs_f64(args.drain_grace)
        .ok()
        .filter(|grace| *grace <= MAX_DRAIN_GRACE)
        .with_context(|| {
            format!(
                "invalid --drain-grace {}: expected 0 to {} seconds",
                args.drain_grace,
                MAX_DRAIN_GRACE.as_secs()
            )
        })?;
    let cookie = args.cookie.resolve(Missing::Create)?;
    let mut settings = NodeSettings::new(name, args.listen, cookie);
    settings.advertise = advertise;
    settings.seeds = seeds;
    let gpus = match (args.no_gpu, args.software_gpu, args.no_software_gpu) {
        (true, ..) => GpuPolicy::Off,
        (false, true, _) => GpuPolicy::AllowSoftware,
        (false, false, true) => GpuPolicy::Hardware,
        (false, false, false) => GpuPolicy::Auto,
    };
    settings.resources = NodeResources::detect(args.cpu_slots, gpus);
    settings.allow_fault_injection = args.allow_fault_injection;
    settings.tls = args.tls.identity()?;
    settings.transport = TransportSettings {
        max_unauthenticated: args.max_unauthenticated.max(1),
        max_unauthenticated_per_address: args.max_unauthenticated_per_address.max(1),
        ..TransportSettings::default()
    };
    settings.limits = args.limits.limits();
    tracing::info!("{}", super::limits::describe(&settings.limits));
    block_on(serve(settings, grace))?
}

/// The longest `--drain-grace`: a day.
const MAX_DRAIN_GRACE: Duration = Duration::from_secs(24 * 3600);

async fn serve(settings: NodeSettings, grace: Duration) -> anyhow::Result<()> {
    // Handlers first: a signal during startup must not kill the process uncleanly.
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut node = Node::start(settings).await?;
    let signal = tokio::select! {
        _ = interrupt.recv() => "SIGINT",
        _ = terminate.recv() => "SIGTERM",
        error = node.stopped() => return Err(error.into()),
    };
    tracing::info!("{signal}: draining (a second SIGINT or SIGTERM stops at once)");
    tokio::select! {
        _ = node.drain(grace) => {}
        _ = interrupt.recv() => tracing::info!("second signal (SIGINT): stopping now, without draining"),
        _ = terminate.recv() => tracing::info!("second signal (SIGTERM): stopping now, without draining"),
    }
    Ok(node.shutdown().await?)
}
