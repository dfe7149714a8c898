//! A cluster node: ractor_cluster's `NodeServer` and our supervision tree, started and
//! stopped as one.
//!
//! ```text
//! root                     Supervisor, rest-for-one: each child may depend on its elders
//! ├── node-server          ractor_cluster NodeServer (Isolated, no listener of its own,
//! │                        MAX_FRAME_BYTES): one NodeSession per peer
//! ├── listener             TransportListener: binds the listen address, the accept loop,
//! │                        pre-authentication limits, TLS, the preamble (`transport`)
//! ├── membership           Membership: peer set, heartbeats, reconnects, NodeUp/NodeDown
//! ├── membership-endpoint  MembershipEndpoint: membership's remotable face (pg "membership")
//! ├── gpu-pool             only on a node with a GPU in use (`resources.gpus`: a software
//! │                        adapter only if asked), like cpu-pool:
//! │   ├── gpu-pool-sampler SamplerPool: each task's chains as one job of the `gpu` child
//! │   │                    (reports `gpu_slots` of capacity; owns no device)
//! │   └── gpu-pool-endpoint PoolEndpoint (pg "gpu-pool")
//! ├── cpu-pool             Supervisor, rest-for-one, so that a failing pool restarts there
//! │   │                    and not the coordinator below (none with `cpu_slots` 0):
//! │   ├── cpu-pool-sampler SamplerPool: one chain per core (`cpu_slots`), on threads of its own
//! │   └── cpu-pool-endpoint PoolEndpoint: the pool's remotable face (pg "cpu-pool")
//! ├── coordinator          Coordinator: placement over the cluster, streaming to clients,
//! │                        re-runs the chains of a worker that fails (a membership Subscriber)
//! ├── coordinator-endpoint CoordinatorEndpoint: where clients submit jobs (pg "coordinator")
//! └── gpu                  GpuSupervisor (gpu-actor), with gpu-pool: the node's one path to
//!     ├── worker gpu0      its GPUs; one worker per usable adapter, the only owner of its
//!     └── worker gpu1 ...  device, restarted when its device is lost or its thread panics
//! ```
//!
//! Rest-for-one because of those dependencies: if the `NodeServer` restarts, sessions and
//! subscriptions are gone, so everything after it restarts too (the listener subscribes the
//! transport to the new one); a new membership actor comes
//! with a new endpoint (which holds its ref) and a new coordinator (which subscribes); an
//! endpoint holds the ref of the actor before it. Children find their elders through the
//! process-wide registry ([`NODE_SERVER_NAME`], [`MEMBERSHIP_NAME`], ...), which is one reason
//! a process runs one node only (pg is process-global too). The coordinator finds pools
//! through pg, its own node's included, so it does not depend on the pool's supervisor.
//! The GPU supervisor comes last: nothing holds its ref (the GPU pool looks it up by name
//! for each task), so when it gives up and restarts, no sibling restarts with it; it
//! restarts its own workers by the same rules (`supervision::Restarts`) as this tree.
//!
//! Shutdown first has the coordinator drop its tasks on the workers (it dispatches nothing
//! more), then membership tell its peers that this node leaves (so they do not try to
//! reconnect), then stops the tree youngest first; the `NodeServer` is stopped last and
//! awaited (without that, ractor_cluster logs a flood of listener errors at exit, notes §5.9).
//!
//! A graceful stop drains first ([`Node::drain`]): membership tells the peers that this node
//! drains (they place nothing new here), the coordinator refuses new jobs and tells its
//! jobs' clients, the pools take no new task and answer no status; then the node waits,
//! up to a grace period, until its pools have reported every chain and its coordinator's
//! jobs are done and collected. What is left at the deadline runs again elsewhere: the
//! peers' coordinators re-run this node's chains when it leaves, and the clients of its
//! jobs resubmit their unfinished chains to another member.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gpu_actor::{
    AdapterSelection, GpuSupervisor, GpuSupervisorArgs, GpuSupervisorMsg, LoadListener, WorkerLoad,
};
use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorRef, SpawnErr};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{NodeServer, NodeServerMessage};

use crate::cookie::Cookie;
use crate::coordinator::{
    COORDINATOR_NAME, Coordinator, CoordinatorArgs, CoordinatorEndpoint, CoordinatorMsg,
    EndpointArgs as CoordinatorEndpointArgs,
};
use crate::ids::NodeName;
use crate::limits::JobLimits;
use crate::membership::{
    EndpointArgs, MEMBERSHIP_NAME, MemberStatus, Membership, MembershipArgs, MembershipEndpoint,
    MembershipMsg, MembershipSettings, NodeInfo, NodeResources,
};
use crate::pool::{
    Backend, CPU_POOL_NAME, EndpointArgs as PoolEndpointArgs, GPU_POOL_NAME, GPU_SUPERVISOR_NAME,
    PoolArgs, PoolEndpoint, PoolMsg, SamplerPool,
};
use crate::sampling::PoolKind;
use crate::transport::{
    LISTENER_NAME, ListenerArgs, TlsIdentity, Transport, TransportListener, TransportSettings,
};
use crate::wire::MAX_FRAME_BYTES;
use supervision::{
    Backoff, ChildSpec, Intensity, Restart, Strategy, Supervisor, SupervisorArgs, SupervisorMsg,
    spawn_error_reason,
};

/// How often a drain checks whether the node's work is done.
const DRAIN_CHECK: Duration = Duration::from_millis(100);
/// Limit of one drain check's calls to the pools and the coordinator.
const DRAIN_CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Limit of the GPU supervisor's report when the node starts (it asks its workers).
const GPU_REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// From the start of the drain to its end.
    pub waited: Duration,
    /// Chains of this node's pools not yet reported to their coordinators (0: every
    /// chain here finished and was collected).
    pub chains_left: u32,
    /// Jobs of this node's coordinator not yet finished and collected by their clients.
    pub jobs_left: u32,
}

impl DrainReport {
    /// Whether the node's work was done before the grace period ran out.
    pub fn is_complete(&self) -> bool {
        self.chains_left == 0 && self.jobs_left == 0
    }
}

/// The registry name of the node's `NodeServer`.
pub const NODE_SERVER_NAME: &str = "bayes.node_server";
/// The registry name of the root supervisor.
pub const ROOT_NAME: &str = "bayes.root";

/// Everything a node needs to start. Only `cluster-cli` fills it from arguments and files.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    /// Full name, `short@host`; unique in the cluster.
    pub name: NodeName,
    /// Where the `NodeServer` listens. An explicit address (never all interfaces by default)
    /// with an explicit port: ractor_cluster cannot tell us a port the OS chose.
    pub listen: SocketAddr,
    /// The address peers dial, gossiped to them: `listen` unless behind NAT or listening on
    /// an unspecified address.
    pub advertise: SocketAddr,
    /// The cluster cookie.
    pub cookie: Cookie,
    /// Nodes to join at start; retried with backoff until they answer.
    pub seeds: Vec<SocketAddr>,
    /// What this node offers (CPU slots, GPUs), as reported to the cluster. With a GPU
    /// `in_use` in `resources.gpus`, the node runs a GPU pool on it.
    pub resources: NodeResources,
    /// Chains the GPU pool reports it takes at once (coordinators place by it); each task's
    /// chains run as one job of the node's GPU supervisor, so this is as many as a GPU
    /// runs in one job, not a batch size.
    pub gpu_slots: u32,
    /// Heartbeat, reconnect and join timing.
    pub membership: MembershipSettings,
    /// Restart intensity of the root supervisor; exceeded, the node stops.
    pub intensity: Intensity,
    /// Backoff between restarts of the root supervisor's children.
    pub backoff: Backoff,
    /// How long each child may take to stop gracefully on shutdown.
    pub shutdown_timeout: Duration,
    /// A job whose client stops polling, and a task whose coordinator stops polling, is
    /// cancelled after this long.
    pub job_lease: Duration,
    /// Obey test-only fault injection requests (`PoolRequest::InjectFault`).
    pub allow_fault_injection: bool,
    /// Limits on connections before they authenticate (caps, deadline, penalties).
    pub transport: TransportSettings,
    /// TLS for every connection, both ways, with mutual authentication; `None`: plaintext.
    pub tls: Option<TlsIdentity>,
    /// What one job may ask of this node, checked by its coordinator for whole jobs and by
    /// its pools for the tasks they are sent (from any coordinator).
    pub limits: JobLimits,
}

impl NodeSettings {
    /// Settings with defaults: advertise the listen address, no seeds, one CPU slot, no GPU.
    pub fn new(name: NodeName, listen: SocketAddr, cookie: Cookie) -> Self {
        Self {
            name,
            listen,
            advertise: listen,
            cookie,
            seeds: Vec::new(),
            resources: NodeResources {
                cpu_slots: 1,
                gpus: Vec::new(),
                running_jobs: 0,
            },
            gpu_slots: 65536,
            membership: MembershipSettings::default(),
            intensity: Intensity::default(),
            backoff: Backoff::default(),
            shutdown_timeout: Duration::from_secs(5),
            job_lease: Duration::from_secs(30),
            allow_fault_injection: false,
            transport: TransportSettings::default(),
            tls: None,
            limits: JobLimits::default(),
        }
    }
}

/// Why a node did not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The tree could not be started (most often: the listen address is in use).
    #[error("cannot start node {name} on {listen}: {reason}")]
    Start {
        /// The node.
        name: NodeName,
        /// Its listen address.
        listen: SocketAddr,
        /// The failure.
        reason: String,
    },
    /// The listen address has port 0.
    #[error("node {name}: listen address {listen} needs an explicit port")]
    NoPort {
        /// The node.
        name: NodeName,
        /// The address given.
        listen: SocketAddr,
    },
    /// The root supervisor gave up (restart intensity exceeded); its error is in the log.
    #[error("node {name} stopped: its supervision tree gave up (see the error logged above)")]
    Crashed {
        /// The node.
        name: NodeName,
    },
    /// A graceful shutdown did not finish in time.
    #[error("node {name} did not stop within {timeout:?}")]
    ShutdownTimeout {
        /// The node.
        name: NodeName,
        /// The limit.
        timeout: Duration,
    },
}

/// A running node.
#[derive(Debug)]
pub struct Node {
    name: NodeName,
    root: ActorRef<SupervisorMsg>,
    handle: JoinHandle<()>,
    shutdown_timeout: Duration,
}

impl Node {
    /// Starts the `NodeServer` and the tree; returns once every child is started (the
    /// listener is bound). Joining the seeds continues in the background.
    pub async fn start(settings: NodeSettings) -> Result<Self, NodeError> {
        if settings.listen.port() == 0 {
            return Err(NodeError::NoPort {
                name: settings.name,
                listen: settings.listen,
            });
        }
        let args = SupervisorArgs {
            strategy: Strategy::RestForOne,
            intensity: settings.intensity,
            backoff: settings.backoff,
            children: children(
                &settings,
                &Transport::new(
                    settings.name.clone(),
                    settings.transport.clone(),
                    settings.tls.clone(),
                ),
            ),
        };
        let (root, handle) = Actor::spawn(Some(ROOT_NAME.to_owned()), Supervisor, args)
            .await
            .map_err(|error| NodeError::Start {
                name: settings.name.clone(),
                listen: settings.listen,
                reason: spawn_error_reason(&error),
            })?;
        log_gpus().await;
        tracing::info!(
            "node {} listening on {} (cluster address {}{})",
            settings.name,
            settings.listen,
            settings.advertise,
            if settings.tls.is_some() { ", TLS" } else { "" }
        );
        Ok(Self {
            name: settings.name,
            root,
            handle,
            shutdown_timeout: settings.shutdown_timeout,
        })
    }

    /// This node's name.
    pub fn name(&self) -> &NodeName {
        &self.name
    }

    /// The current membership actor (a new one after each restart).
    pub fn membership(&self) -> Option<ActorRef<MembershipMsg>> {
        ActorRef::where_is(MEMBERSHIP_NAME)
    }

    /// The member list as this node sees it; `None` if membership is restarting or does not
    /// answer within `timeout`.
    pub async fn members(&self, timeout: Duration) -> Option<Vec<MemberStatus>> {
        let membership = self.membership()?;
        membership
            .call(MembershipMsg::Members, Some(timeout))
            .await
            .ok()?
            .success_or(())
            .ok()
    }

    /// Resolves when the tree stops by itself, which only happens when the root supervisor
    /// gives up. Cancel safe.
    pub async fn stopped(&mut self) -> NodeError {
        let _ = (&mut self.handle).await;
        NodeError::Crashed {
            name: self.name.clone(),
        }
    }

    /// Stops taking work and waits, up to `grace`, for the work this node has (see the module
    /// documentation); returns what was left. Call [`Self::shutdown`] next. Cancel safe:
    /// the node keeps draining (it takes no new work) until it shuts down.
    pub async fn drain(&self, grace: Duration) -> DrainReport {
        let started = tokio::time::Instant::now();
        let deadline = started + grace;
        tracing::info!(
            "node {} draining: no new jobs or chains; waiting up to {grace:?} for the running ones",
            self.name
        );
        let mut last = None;
        // What the coordinator tells its clients: the grace left (all of it, the first time).
        let mut left_to_wait = grace;
        loop {
            let left = drain_check(left_to_wait).await;
            let report = DrainReport {
                waited: started.elapsed(),
                chains_left: left.0,
                jobs_left: left.1,
            };
            if report.is_complete() {
                tracing::info!(
                    "node {} drained in {:.2} s",
                    self.name,
                    report.waited.as_secs_f64()
                );
                return report;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::info!(
                    "node {} drain grace of {grace:?} over with {} chains and {} jobs left: they run again elsewhere",
                    self.name,
                    report.chains_left,
                    report.jobs_left
                );
                return report;
            }
            if last != Some(left) {
                tracing::info!(
                    "draining: {} chains running here, {} jobs coordinated here",
                    left.0,
                    left.1
                );
                last = Some(left);
            }
            tokio::time::sleep_until((tokio::time::Instant::now() + DRAIN_CHECK).min(deadline))
                .await;
            left_to_wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        }
    }

    /// Stops the coordinator's work on other nodes, tells the peers this node leaves, then
    /// stops the tree, youngest child first, and waits for it; the `NodeServer` goes last.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        tracing::info!("node {} shutting down", self.name);
        // The coordinator first: it stops dispatching, and its tasks on other nodes stop.
        if let Some(coordinator) = ActorRef::<CoordinatorMsg>::where_is(COORDINATOR_NAME) {
            let _ = coordinator
                .call(CoordinatorMsg::Leave, Some(self.shutdown_timeout))
                .await;
        }
        if let Some(membership) = self.membership() {
            let _ = membership
                .call(MembershipMsg::Leave, Some(self.shutdown_timeout))
                .await;
        }
        // Each child has its own timeout; the tree as a whole gets all of them plus slack,
        // and the GPU supervisor's own.
        let timeout = self.shutdown_timeout * 4 + GpuSupervisor::STOP_TIMEOUT;
        self.root
            .stop_and_wait(Some("shutdown".to_owned()), Some(timeout))
            .await
            .map_err(|_| NodeError::ShutdownTimeout {
                name: self.name.clone(),
                timeout,
            })?;
        tracing::info!("node {} stopped", self.name);
        Ok(())
    }
}

/// Says which GPUs the node's GPU supervisor runs (`gpu pool on ...`), or why none.
async fn log_gpus() {
    let Some(supervisor) = ActorRef::<GpuSupervisorMsg>::where_is(GPU_SUPERVISOR_NAME) else {
        return;
    };
    match GpuSupervisor::report(&supervisor, GPU_REPORT_TIMEOUT).await {
        Ok(report) if report.workers.is_empty() => tracing::warn!(
            "gpu pool without a GPU: {}",
            report.fallback.unwrap_or_default()
        ),
        Ok(report) => {
            let workers: Vec<String> = report
                .workers
                .iter()
                .map(|worker| format!("{} {}", worker.id, worker.adapter.name))
                .collect();
            tracing::info!(
                "gpu pool on {} (the GPU supervisor's workers)",
                workers.join(", ")
            );
        }
        Err(error) => tracing::warn!("the GPU supervisor did not report: {error}"),
    }
}

/// Puts every part of the node in drain mode (again: a restarted actor starts afresh) and
/// counts what is left: chains not yet reported by the pools, jobs not yet collected from
/// the coordinator. A part that does not answer counts as busy.
async fn drain_check(grace: Duration) -> (u32, u32) {
    if let Some(membership) = ActorRef::<MembershipMsg>::where_is(MEMBERSHIP_NAME) {
        let _ = membership.cast(MembershipMsg::SetDraining);
    }
    let mut chains = 0;
    for name in [CPU_POOL_NAME, GPU_POOL_NAME] {
        let Some(pool) = ActorRef::<PoolMsg>::where_is(name) else {
            continue;
        };
        chains += match pool.call(PoolMsg::Drain, Some(DRAIN_CALL_TIMEOUT)).await {
            Ok(ractor::rpc::CallResult::Success(left)) => left,
            _ => 1,
        };
    }
    let jobs = match ActorRef::<CoordinatorMsg>::where_is(COORDINATOR_NAME) {
        Some(coordinator) => {
            let drain = |reply| CoordinatorMsg::Drain { grace, reply };
            match coordinator.call(drain, Some(DRAIN_CALL_TIMEOUT)).await {
                Ok(ractor::rpc::CallResult::Success(left)) => left,
                _ => 1,
            }
        }
        None => 0,
    };
    (chains, jobs)
}

fn children(settings: &NodeSettings, transport: &Transport) -> Vec<ChildSpec> {
    let node_server = {
        let settings = settings.clone();
        ChildSpec::new("node-server", Restart::Permanent, move |supervisor| {
            let server = NodeServer::new(
                settings.listen.port(),
                settings.cookie.reveal().to_owned(),
                settings.name.short().to_owned(),
                settings.name.host().to_owned(),
                None,
                Some(NodeConnectionMode::Isolated),
            )
            .with_listen_addr(settings.listen.ip())
            .with_max_inbound_frame_size(MAX_FRAME_BYTES)
            .without_listener();
            async move {
                let name = Some(NODE_SERVER_NAME.to_owned());
                let (actor, _) = Actor::spawn_linked(name, server, (), supervisor).await?;
                Ok(actor.get_cell())
            }
        })
    };
    let listener = {
        let transport = transport.clone();
        let listen = settings.listen;
        ChildSpec::new("listener", Restart::Permanent, move |supervisor| {
            let args =
                ActorRef::<NodeServerMessage>::where_is(NODE_SERVER_NAME).map(|node_server| {
                    ListenerArgs {
                        transport: transport.clone(),
                        node_server,
                        listen,
                    }
                });
            async move {
                let args = args.ok_or_else(|| not_running(NODE_SERVER_NAME))?;
                let name = Some(LISTENER_NAME.to_owned());
                let (actor, _) =
                    Actor::spawn_linked(name, TransportListener, args, supervisor).await?;
                Ok(actor.get_cell())
            }
        })
    };
    let membership = {
        let me = NodeInfo {
            name: settings.name.clone(),
            address: settings.advertise,
            resources: settings.resources.clone(),
            draining: false,
        };
        let seeds = settings.seeds.clone();
        let membership_settings = settings.membership.clone();
        let transport = transport.clone();
        ChildSpec::new("membership", Restart::Permanent, move |supervisor| {
            let args =
                ActorRef::<NodeServerMessage>::where_is(NODE_SERVER_NAME).map(|node_server| {
                    MembershipArgs {
                        me: me.clone(),
                        node_server,
                        transport: transport.clone(),
                        seeds: seeds.clone(),
                        settings: membership_settings.clone(),
                    }
                });
            async move {
                let args = args.ok_or_else(|| not_running(NODE_SERVER_NAME))?;
                let name = Some(MEMBERSHIP_NAME.to_owned());
                let (actor, _) = Actor::spawn_linked(name, Membership, args, supervisor).await?;
                Ok(actor.get_cell())
            }
        })
    };
    let endpoint = {
        let me = settings.name.clone();
        ChildSpec::new(
            "membership-endpoint",
            Restart::Permanent,
            move |supervisor| {
                let args = ActorRef::<MembershipMsg>::where_is(MEMBERSHIP_NAME).map(|membership| {
                    EndpointArgs {
                        me: me.clone(),
                        membership,
                    }
                });
                async move {
                    let args = args.ok_or_else(|| not_running(MEMBERSHIP_NAME))?;
                    let (actor, _) =
                        Actor::spawn_linked(None, MembershipEndpoint, args, supervisor).await?;
                    Ok(actor.get_cell())
                }
            },
        )
    };
    let gpu_pool = settings
        .resources
        .gpu_in_use()
        .is_some()
        .then(|| pool(settings, PoolKind::Gpu));
    // No CPU slots: the node coordinates (and runs its GPU pool, if any) but samples nothing
    // on its CPU.
    let cpu_pool = (settings.resources.cpu_slots > 0).then(|| pool(settings, PoolKind::Cpu));
    [node_server, listener, membership, endpoint]
        .into_iter()
        .chain(gpu_pool)
        .chain(cpu_pool)
        .chain([
            coordinator(settings, transport),
            coordinator_endpoint(settings),
        ])
        .map(|child| child.with_shutdown_timeout(settings.shutdown_timeout))
        // Its workers may wait for kernels still compiling before they release their devices.
        .chain(gpu_supervisor(settings).map(|child| {
            child.with_shutdown_timeout(settings.shutdown_timeout.max(GpuSupervisor::STOP_TIMEOUT))
        }))
        .collect()
}

/// A sampler pool (CPU or GPU) and its endpoint, under a supervisor of their own.
fn pool(settings: &NodeSettings, kind: PoolKind) -> ChildSpec {
    let (name, prefix, backend, slots) = match kind {
        PoolKind::Cpu => (
            CPU_POOL_NAME,
            "cpu-pool",
            Backend::Cpu,
            settings.resources.cpu_slots,
        ),
        PoolKind::Gpu => (GPU_POOL_NAME, "gpu-pool", Backend::Gpu, settings.gpu_slots),
    };
    let worker = {
        let args = PoolArgs {
            backend,
            slots,
            allow_fault_injection: settings.allow_fault_injection,
            task_lease: settings.job_lease,
        };
        ChildSpec::actor(
            format!("{prefix}-sampler"),
            Restart::Permanent,
            Some(name),
            move || (SamplerPool, args.clone()),
        )
    };
    let endpoint = {
        let me = settings.name.clone();
        let limits = settings.limits;
        ChildSpec::new(
            format!("{prefix}-endpoint"),
            Restart::Permanent,
            move |supervisor| {
                let args = ActorRef::<PoolMsg>::where_is(name).map(|pool| PoolEndpointArgs {
                    me: me.clone(),
                    pool,
                    kind,
                    limits,
                });
                async move {
                    let args = args.ok_or_else(|| not_running(name))?;
                    let (actor, _) =
                        Actor::spawn_linked(None, PoolEndpoint, args, supervisor).await?;
                    Ok(actor.get_cell())
                }
            },
        )
    };
    let args = SupervisorArgs {
        strategy: Strategy::RestForOne,
        intensity: settings.intensity,
        backoff: settings.backoff,
        children: [worker, endpoint]
            .into_iter()
            .map(|child| child.with_shutdown_timeout(settings.shutdown_timeout))
            .collect(),
    };
    ChildSpec::actor(prefix, Restart::Permanent, None, move || {
        (Supervisor, args.clone())
    })
}

/// The node's GPU supervisor, on a node with a GPU in use: every hardware adapter gets a
/// worker; a software one (the one in use) only when it was allowed, as the node's GPU
/// policy says (`--software-gpu`). Its workers' load goes to membership, which gossips it.
fn gpu_supervisor(settings: &NodeSettings) -> Option<ChildSpec> {
    let in_use = settings.resources.gpu_in_use()?;
    let publish = |load: &[WorkerLoad]| {
        let load = load
            .iter()
            .map(|worker| {
                let chains = u32::try_from(worker.chains).unwrap_or(u32::MAX);
                (worker.adapter_index, chains)
            })
            .collect();
        if let Some(membership) = ActorRef::<MembershipMsg>::where_is(MEMBERSHIP_NAME) {
            let _ = membership.cast(MembershipMsg::SetGpuLoad(load));
        }
    };
    let args = GpuSupervisorArgs {
        adapters: AdapterSelection::All,
        allow_software: in_use.software,
        on_load: Some(LoadListener(Arc::new(publish))),
        ..GpuSupervisorArgs::default()
    };
    Some(ChildSpec::actor(
        "gpu",
        Restart::Permanent,
        Some(GPU_SUPERVISOR_NAME),
        move || (GpuSupervisor, args.clone()),
    ))
}

fn coordinator(settings: &NodeSettings, transport: &Transport) -> ChildSpec {
    let args = CoordinatorArgs {
        me: settings.name.clone(),
        client_lease: settings.job_lease,
        links: transport.links(),
    };
    ChildSpec::actor(
        "coordinator",
        Restart::Permanent,
        Some(COORDINATOR_NAME),
        move || (Coordinator, args.clone()),
    )
}

fn coordinator_endpoint(settings: &NodeSettings) -> ChildSpec {
    let me = settings.name.clone();
    let limits = settings.limits;
    ChildSpec::new(
        "coordinator-endpoint",
        Restart::Permanent,
        move |supervisor| {
            let args = ActorRef::<CoordinatorMsg>::where_is(COORDINATOR_NAME).map(|coordinator| {
                CoordinatorEndpointArgs {
                    me: me.clone(),
                    coordinator,
                    limits,
                }
            });
            async move {
                let args = args.ok_or_else(|| not_running(COORDINATOR_NAME))?;
                let (actor, _) =
                    Actor::spawn_linked(None, CoordinatorEndpoint, args, supervisor).await?;
                Ok(actor.get_cell())
            }
        },
    )
}

fn not_running(name: &str) -> SpawnErr {
    SpawnErr::StartupFailed(format!("{name} is not running").into())
}

#[cfg(test)]
mod tests;
