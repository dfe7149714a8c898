//! A cluster node: ractor_cluster's `NodeServer` and our supervision tree, started and
//! stopped as one.
//!
//! ```text
//! root                     Supervisor, rest-for-one: each child may depend on its elders
//! ├── node-server          ractor_cluster NodeServer (Isolated, explicit listen address,
//! │                        MAX_FRAME_BYTES): the listener and one NodeSession per peer
//! ├── membership           Membership: peer set, heartbeats, reconnects, NodeUp/NodeDown
//! ├── membership-endpoint  MembershipEndpoint: membership's remotable face (pg "membership")
//! ├── gpu-pool             only on a node with a GPU (`resources.gpus`), like cpu-pool:
//! │   ├── gpu-pool-worker  SamplerPool owning a GpuDevice: batches of up to `gpu_slots`
//! │   │                    chains per dispatch
//! │   └── gpu-pool-endpoint PoolEndpoint (pg "gpu-pool")
//! ├── cpu-pool             Supervisor, rest-for-one, so that a failing pool restarts there
//! │   │                    and not the coordinator below:
//! │   ├── cpu-pool-worker  SamplerPool: one chain per core (`cpu_slots`), on threads of its own
//! │   └── cpu-pool-endpoint PoolEndpoint: the pool's remotable face (pg "cpu-pool")
//! ├── coordinator          Coordinator: placement over the cluster, streaming to clients,
//! │                        re-runs the chains of a worker that fails (a membership Subscriber)
//! └── coordinator-endpoint CoordinatorEndpoint: where clients submit jobs (pg "coordinator")
//! ```
//!
//! Rest-for-one because of those dependencies: if the `NodeServer` restarts, sessions and
//! subscriptions are gone, so everything after it restarts too; a new membership actor comes
//! with a new endpoint (which holds its ref) and a new coordinator (which subscribes); an
//! endpoint holds the ref of the actor before it. Children find their elders through the
//! process-wide registry ([`NODE_SERVER_NAME`], [`MEMBERSHIP_NAME`], ...), which is one reason
//! a process runs one node only (pg is process-global too). The coordinator finds pools
//! through pg, its own node's included, so it does not depend on the pool's supervisor.
//!
//! Shutdown first has membership tell its peers that this node leaves (so they do not try to
//! reconnect), then stops the tree youngest first; the `NodeServer` is stopped last and
//! awaited (without that, ractor_cluster logs a flood of listener errors at exit, notes §5.9).

use std::net::SocketAddr;
use std::time::Duration;

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
    Backend, CPU_POOL_NAME, EndpointArgs as PoolEndpointArgs, GPU_POOL_NAME, PoolArgs,
    PoolEndpoint, PoolMsg, SamplerPool,
};
use crate::sampling::WorkerKind;
use crate::supervisor::{
    Backoff, ChildSpec, Intensity, Restart, Strategy, Supervisor, SupervisorArgs, SupervisorMsg,
    spawn_error_reason,
};
use crate::wire::MAX_FRAME_BYTES;

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
    /// What this node offers (CPU slots, GPUs), as reported to the cluster. With a GPU in
    /// `resources.gpus`, the node runs a GPU pool on the best adapter.
    pub resources: NodeResources,
    /// Chains the GPU pool runs at once, in batches of one task's chains.
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
            gpu_slots: 1024,
            membership: MembershipSettings::default(),
            intensity: Intensity::default(),
            backoff: Backoff::default(),
            shutdown_timeout: Duration::from_secs(5),
            job_lease: Duration::from_secs(30),
            allow_fault_injection: false,
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
            children: children(&settings),
        };
        let (root, handle) = Actor::spawn(Some(ROOT_NAME.to_owned()), Supervisor, args)
            .await
            .map_err(|error| NodeError::Start {
                name: settings.name.clone(),
                listen: settings.listen,
                reason: spawn_error_reason(&error),
            })?;
        tracing::info!(
            "node {} listening on {} (cluster address {})",
            settings.name,
            settings.listen,
            settings.advertise
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

    /// Tells the peers this node leaves, then stops the tree, youngest child first, and waits
    /// for it; the `NodeServer` goes last.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        tracing::info!("node {} shutting down", self.name);
        if let Some(membership) = self.membership() {
            let _ = membership
                .call(MembershipMsg::Leave, Some(self.shutdown_timeout))
                .await;
        }
        // Each child has its own timeout; the tree as a whole gets all of them plus slack.
        let timeout = self.shutdown_timeout * 4;
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

fn children(settings: &NodeSettings) -> Vec<ChildSpec> {
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
            .with_max_inbound_frame_size(MAX_FRAME_BYTES);
            async move {
                let name = Some(NODE_SERVER_NAME.to_owned());
                let (actor, _) = Actor::spawn_linked(name, server, (), supervisor).await?;
                Ok(actor.get_cell())
            }
        })
    };
    let membership = {
        let me = NodeInfo {
            name: settings.name.clone(),
            address: settings.advertise,
            resources: settings.resources.clone(),
        };
        let seeds = settings.seeds.clone();
        let membership_settings = settings.membership.clone();
        ChildSpec::new("membership", Restart::Permanent, move |supervisor| {
            let args =
                ActorRef::<NodeServerMessage>::where_is(NODE_SERVER_NAME).map(|node_server| {
                    MembershipArgs {
                        me: me.clone(),
                        node_server,
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
    let gpu_pool = (!settings.resources.gpus.is_empty()).then(|| pool(settings, WorkerKind::Gpu));
    [node_server, membership, endpoint]
        .into_iter()
        .chain(gpu_pool)
        .chain([
            pool(settings, WorkerKind::Cpu),
            coordinator(settings),
            coordinator_endpoint(settings),
        ])
        .map(|child| child.with_shutdown_timeout(settings.shutdown_timeout))
        .collect()
}

/// A sampler pool (CPU or GPU) and its endpoint, under a supervisor of their own.
fn pool(settings: &NodeSettings, kind: WorkerKind) -> ChildSpec {
    let (name, prefix, backend, slots) = match kind {
        WorkerKind::Cpu => (
            CPU_POOL_NAME,
            "cpu-pool",
            Backend::Cpu,
            settings.resources.cpu_slots,
        ),
        WorkerKind::Gpu => (
            GPU_POOL_NAME,
            "gpu-pool",
            Backend::Gpu(gpu_actor::DeviceOptions::default()),
            settings.gpu_slots,
        ),
    };
    let worker = {
        let args = PoolArgs {
            backend,
            slots,
            allow_fault_injection: settings.allow_fault_injection,
            task_lease: settings.job_lease,
        };
        ChildSpec::actor(
            format!("{prefix}-worker"),
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

fn coordinator(settings: &NodeSettings) -> ChildSpec {
    let args = CoordinatorArgs {
        me: settings.name.clone(),
        client_lease: settings.job_lease,
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
