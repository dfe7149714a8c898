//! A client of the cluster: a "hidden" node (Erlang's term) that connects to one node, talks
//! to its services and leaves, without becoming a member (it runs no membership endpoint, so
//! nodes do not heartbeat it or gossip it). `cluster-cli join`, `status` and
//! `sample --cluster` use it: [`ClusterClient::sample`] submits a job to the node's coordinator
//! and returns a [`ClusterJob`], the stream of its updates and then its outcome.
//!
//! [`ClusterClient::connect`] returns only once the session is ready, which
//! `client_connect`'s `Ok` does not mean (notes §2.2): it waits for the session events, with
//! a deadline, and tells a refused cookie from a network error.
//!
//! Like a node, a client runs a `NodeServer` (ractor_cluster has no client-only mode), one
//! without a listener: it dials through its own [`Transport`] (TLS when
//! [`ClientSettings::tls`] is set) and listens nowhere. One client or node per process.
//!
//! The node a job was submitted to is no single point of failure (`failover.rs`): while a
//! job runs, the client watches its session and asks the node for the member list every
//! `HEARTBEAT_INTERVAL` (a heartbeat), and when the node is lost (its session closed, or
//! nothing answered for `STALL_LIMIT`), it connects to another member it knows and
//! resubmits there the chains it has not received, with the same seed: the outcome is the
//! one an undisturbed run gives.

mod failover;
mod job;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{NodeServer, NodeServerMessage};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cookie::Cookie;
use crate::discovery::{COORDINATOR, CPU_POOL, MEMBERSHIP};
use crate::ids::{JobId, NodeName, RequestId, SessionId};
use crate::link::{IN_FLIGHT, JobLink, LINK_MIN_DRAWS, LinkToken};
use crate::membership::{MemberStatus, NodeInfo};
use crate::sampling::{DevicePreference, PollCounts, SampleRequest};
use crate::session::{self, ConnectError, SessionEvent, SessionEventKind};
use crate::transport::{TlsIdentity, Transport, TransportSettings};
use crate::wire::{
    self, CallError, Envelope, JobReply, JobRequest, MAX_FRAME_BYTES, MembershipReply,
    MembershipRequest, MembershipWire, PoolReply, PoolRequest, Service, WireError, WireFault,
    WireSampleRequest,
};
use failover::{Known, Liveness};
pub use job::ClusterJob;
use supervision::spawn_error_reason;

/// How a client connects.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// The client's own node name; unique, so that nodes keep its session apart from others.
    pub name: NodeName,
    /// The cluster cookie.
    pub cookie: Cookie,
    /// Limit from dialling to a ready session.
    pub connect_timeout: Duration,
    /// Limit of each call.
    pub call_timeout: Duration,
    /// Failovers one job may make (its node lost, its unfinished chains resubmitted to
    /// another member) before it fails.
    pub max_failovers: u32,
    /// TLS to the node (which must run it too); `None`: plaintext.
    pub tls: Option<TlsIdentity>,
    /// Follow a job's events through a job link, a stream of its own to the node that runs
    /// the job, rather than the cluster session (which carries them wherever a link cannot
    /// be opened or fails, and for a job of fewer than `link::LINK_MIN_DRAWS` draws, whose link
    /// would cost it more than it saves).
    pub job_links: bool,
}

impl ClientSettings {
    /// Settings with a name unique to this process, 5 s / 15 s timeouts and 3 failovers.
    pub fn new(cookie: Cookie) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let short = format!("client-{}-{nanos}", std::process::id());
        Self {
            name: NodeName::new(&short, "127.0.0.1").expect("a valid generated name"),
            cookie,
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(15),
            max_failovers: 3,
            tls: None,
            job_links: true,
        }
    }
}

impl From<Cookie> for ClientSettings {
    fn from(cookie: Cookie) -> Self {
        Self::new(cookie)
    }
}

/// A service of a node, for [`ClusterClient::call_raw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawService {
    /// The membership endpoint.
    Membership,
    /// The job coordinator.
    Coordinator,
    /// The CPU sampler pool.
    Pool,
}

/// A failed client operation.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No ready session with the node.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The client's own `NodeServer` did not start.
    #[error("cannot start the client: {reason}")]
    Start {
        /// The failure.
        reason: String,
    },
    /// A call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The node answered something this client does not understand.
    #[error("unexpected answer from {peer}: {answer}")]
    Unexpected {
        /// The node.
        peer: NodeName,
        /// The answer.
        answer: String,
    },
    /// The job failed on the cluster.
    #[error("job {job} failed: {error}")]
    JobFailed {
        /// The job.
        job: JobId,
        /// Why.
        error: String,
    },
    /// The node's answer did not decode.
    #[error("bad answer from {peer}: {error}")]
    Wire {
        /// The node.
        peer: NodeName,
        /// The problem.
        error: WireError,
    },
    /// No member could be reached, or none took the job.
    #[error("no member of the cluster took the job; tried: {}", .tried.join("; "))]
    NoMember {
        /// Each node or address tried, with what happened.
        tried: Vec<String>,
    },
    /// The job lost its coordinator once more than [`ClientSettings::max_failovers`] allows.
    #[error(
        "job {job}: lost {node} ({reason}) after {failovers} failovers; giving up (max_failovers)"
    )]
    TooManyFailovers {
        /// The job (the last one submitted).
        job: JobId,
        /// The node lost last.
        node: NodeName,
        /// What happened to it.
        reason: String,
        /// The failovers made before.
        failovers: u32,
    },
}

/// A connection to one node of the cluster.
#[derive(Debug)]
pub struct ClusterClient {
    settings: ClientSettings,
    address: SocketAddr,
    peer: NodeName,
    session: SessionId,
    node_server: ActorRef<NodeServerMessage>,
    handle: JoinHandle<()>,
    next_request: u64,
    /// The session events of the client's `NodeServer`: how a new session becomes ready,
    /// and how the current one is seen to close.
    events: mpsc::UnboundedReceiver<SessionEvent>,
    /// How sessions are dialled (TLS or not), the first and any after a failover.
    transport: Transport,
    /// Where to go when the node is lost.
    known: Known,
    /// When the node last answered.
    liveness: Liveness,
    /// The link of the job submitted last, while it works.
    link: Option<JobLink>,
    /// How the current job's polls travelled.
    polls: PollCounts,
}

impl ClusterClient {
    /// Connects to the node at `address` and waits until the session is ready and the node's
    /// membership endpoint is visible.
    pub async fn connect(
        address: SocketAddr,
        settings: impl Into<ClientSettings>,
    ) -> Result<Self, ClientError> {
        Self::connect_any(&[address], settings).await
    }

    /// Connects to the first node of `addresses` that answers, in order; the others are
    /// where a job goes too when that node is lost. The error of one address is its own;
    /// with several, it names each and what happened.
    pub async fn connect_any(
        addresses: &[SocketAddr],
        settings: impl Into<ClientSettings>,
    ) -> Result<Self, ClientError> {
        let settings = settings.into();
        let server = NodeServer::new(
            0,
            settings.cookie.reveal().to_owned(),
            settings.name.short().to_owned(),
            settings.name.host().to_owned(),
            None,
            Some(NodeConnectionMode::Isolated),
        )
        .with_listen_addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
        .with_max_inbound_frame_size(MAX_FRAME_BYTES)
        .without_listener();
        let transport = Transport::new(
            settings.name.clone(),
            TransportSettings::default(),
            settings.tls.clone(),
        );
        let (node_server, handle) =
            Actor::spawn(None, server, ())
                .await
                .map_err(|error| ClientError::Start {
                    reason: spawn_error_reason(&error),
                })?;
        let (events, mut received) = mpsc::unbounded_channel();
        let connected = async {
            let start_error = |error: ractor::MessagingErr<_>| ClientError::Start {
                reason: error.to_string(),
            };
            transport.watch(&node_server).map_err(start_error)?;
            session::subscribe(&node_server, "client", move |event| {
                let _ = events.send(event);
            })
            .map_err(start_error)?;
            let mut tried = Vec::new();
            for &address in addresses {
                match wait_ready(
                    &node_server,
                    &transport,
                    address,
                    &mut received,
                    settings.connect_timeout,
                )
                .await
                {
                    Ok((session, peer)) => return Ok((address, session, peer)),
                    Err(error) => tried.push((address, error)),
                }
            }
            Err(match tried.len() {
                1 => ClientError::Connect(tried.remove(0).1),
                _ => ClientError::NoMember {
                    tried: tried
                        .into_iter()
                        .map(|(address, error)| format!("{address}: {error}"))
                        .collect(),
                },
            })
        }
        .await;
        match connected {
            Ok((address, session, peer)) => Ok(Self {
                settings,
                address,
                peer,
                session,
                node_server,
                handle,
                next_request: 0,
                events: received,
                transport,
                known: Known::given(addresses),
                liveness: Liveness::new(),
                link: None,
                polls: PollCounts::default(),
            }),
            Err(error) => {
                stop(&node_server, handle).await;
                Err(error)
            }
        }
    }

    /// The node this client is connected to.
    pub fn peer(&self) -> &NodeName {
        &self.peer
    }

    /// The cluster as the node sees it, the node itself first.
    pub async fn members(&mut self) -> Result<Vec<MemberStatus>, ClientError> {
        match self.call(MembershipRequest::Members).await? {
            MembershipReply::Members { members } => members
                .into_iter()
                .map(MemberStatus::from_wire)
                .collect::<Result<_, _>>()
                .map_err(|error| ClientError::Wire {
                    peer: self.peer.clone(),
                    error,
                }),
            other => Err(self.unexpected(other)),
        }
    }

    /// Asks the node to join the node at `address`; answers once that node is up (or the
    /// attempt failed, or the node's join timeout passed).
    pub async fn join(&mut self, address: SocketAddr) -> Result<NodeInfo, ClientError> {
        let request = MembershipRequest::Join {
            address: address.to_string(),
        };
        match self.call(request).await? {
            MembershipReply::Joined { node } => {
                NodeInfo::from_wire(node).map_err(|error| ClientError::Wire {
                    peer: self.peer.clone(),
                    error,
                })
            }
            MembershipReply::JoinFailed { error } => {
                Err(ConnectError::from_wire(error, address).into())
            }
            other => Err(self.unexpected(other)),
        }
    }

    /// Submits a sampling job to the node's coordinator, which spreads its chains over the
    /// cluster. The returned [`ClusterJob`] yields updates as chains progress, then the
    /// outcome (every chain's draws, where each ran, what was retried).
    ///
    /// A submission that times out is sent again with the same request id (the coordinator
    /// starts the job once). A node that drains or is gone passes the job to the next member
    /// the client knows (the addresses of [`Self::connect_any`], then the members the node
    /// reports); while the job runs, a lost node does the same with the chains not yet
    /// received (see [`ClusterJob`]).
    pub async fn sample(&mut self, request: &SampleRequest) -> Result<ClusterJob<'_>, ClientError> {
        let mut wire = request.to_wire();
        let settings = &request.settings;
        let per_chain = if settings.save_warmup {
            settings.num_draws.saturating_add(settings.num_warmup)
        } else {
            settings.num_draws
        };
        let draws = u64::from(request.n_chains).saturating_mul(per_chain);
        wire.link = self.settings.job_links && draws >= LINK_MIN_DRAWS;
        // GPU pools send positions, and the values are written here, from the model (a job
        // for CPU pools gets values: no model is lowered for it here).
        let writer = match request.device {
            DevicePreference::Cpu => None,
            DevicePreference::Any | DevicePreference::Gpu => request.output_writer(),
        };
        wire.positions = writer.is_some();
        // A node that does not answer now (stalled) is not asked to take the job; one that
        // sent its member list a moment ago answers.
        let answering = self.known.fresh(failover::FRESH_MEMBERS) || self.refresh_members().await;
        let submitted = if answering {
            self.submit(&wire, request.n_chains).await
        } else {
            Err(ClientError::Connect(ConnectError::Unreachable {
                address: self.address,
                reason: format!("no answer within {:?}", failover::STALL_LIMIT),
            }))
        };
        let job = match submitted {
            Ok(job) => job,
            Err(error) if failover::may_fail_over(&error) => {
                let lost = (self.peer.clone(), self.address);
                tracing::info!(
                    "{} did not take the job ({error}); trying another member",
                    lost.0
                );
                let tried = vec![format!("{} ({error})", lost.0)];
                self.relocate(&wire, request.n_chains, &[lost], tried)
                    .await?
            }
            Err(error) => return Err(error),
        };
        let _span = crate::ids::job_span(job).entered();
        tracing::info!(
            "{} chains of {} submitted to {}",
            request.n_chains,
            request.model.name,
            self.peer
        );
        Ok(ClusterJob::new(self, job, wire, writer))
    }

    /// Submits `request` to the node's coordinator, which must answer that it runs
    /// `expected` chains; a fresh request id, sent again on a timeout.
    async fn submit(
        &mut self,
        request: &WireSampleRequest,
        expected: u32,
    ) -> Result<JobId, ClientError> {
        self.link = None;
        let request_id = self.request_id();
        let envelope = Envelope::new(
            request_id,
            &self.settings.name,
            JobRequest::Submit(request.clone()),
        );
        let mut attempt = 0;
        let reply = loop {
            attempt += 1;
            let endpoint = self.endpoint(&COORDINATOR)?;
            match wire::call(
                &endpoint,
                self.peer.as_str(),
                &envelope,
                self.settings.call_timeout,
            )
            .await
            {
                Ok(reply) => break reply.body,
                Err(CallError::Timeout { .. }) if attempt < SUBMIT_ATTEMPTS => continue,
                Err(error) => return Err(error.into()),
            }
        };
        match reply {
            JobReply::Submitted {
                job,
                n_chains,
                link,
                follows,
            } if n_chains == expected => {
                if let Some(token) = link {
                    // An older node answers a waiting poll when the next comes: one at a
                    // time there.
                    let in_flight = if follows { IN_FLIGHT } else { 1 };
                    self.open_link(job, &token, in_flight).await;
                }
                Ok(job)
            }
            other => Err(self.unexpected(other)),
        }
    }

    /// Opens `job`'s link with `token`, to keep `in_flight` polls at the node; without one,
    /// its events come through the session.
    async fn open_link(&mut self, job: JobId, token: &LinkToken, in_flight: usize) {
        let deadline = tokio::time::Instant::now() + self.settings.connect_timeout;
        let link = JobLink::open(&self.transport, self.address, job, token, deadline).await;
        match link.map(|link| link.in_flight(in_flight)) {
            Ok(link) => self.link = Some(link),
            Err(error) => {
                tracing::info!(
                    "no job link to {} ({error}): polling through the session",
                    self.peer
                )
            }
        }
    }

    /// Test-only: asks the connected node's CPU pool for a fault (refused unless the node
    /// runs with fault injection allowed).
    pub async fn inject_fault(&mut self, fault: WireFault) -> Result<(), ClientError> {
        let endpoint = self.endpoint(&CPU_POOL)?;
        let envelope = Envelope::new(
            self.request_id(),
            &self.settings.name,
            PoolRequest::InjectFault(fault),
        );
        let reply = wire::call(
            &endpoint,
            self.peer.as_str(),
            &envelope,
            self.settings.call_timeout,
        )
        .await?;
        match reply.body {
            PoolReply::FaultInjected => Ok(()),
            other => Err(self.unexpected(other)),
        }
    }

    /// Sends `bytes` as they are to a service of the connected node and returns the answer's
    /// bytes (an `Envelope<Result<Reply, WireError>>`): for tests of what nodes do with
    /// malformed requests.
    pub async fn call_raw(
        &mut self,
        service: RawService,
        bytes: Vec<u8>,
    ) -> Result<Vec<u8>, ClientError> {
        let timeout = self.settings.call_timeout;
        match service {
            RawService::Membership => self.raw(&MEMBERSHIP, bytes, timeout).await,
            RawService::Coordinator => self.raw(&COORDINATOR, bytes, timeout).await,
            RawService::Pool => self.raw(&CPU_POOL, bytes, timeout).await,
        }
    }

    /// This client's node name (the `sender` of its envelopes).
    pub fn name(&self) -> &NodeName {
        &self.settings.name
    }

    /// Closes the session and stops the client's `NodeServer`.
    pub async fn close(self) {
        stop(&self.node_server, self.handle).await;
    }

    async fn raw<S: Service>(
        &mut self,
        group: &crate::discovery::Group<S>,
        bytes: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, ClientError> {
        let endpoint = self.endpoint(group)?;
        let reply = endpoint
            .call(|port| S::call(bytes, port), Some(timeout))
            .await
            .map_err(|error| CallError::Unreachable {
                service: S::NAME,
                peer: self.peer.to_string(),
                reason: error.to_string(),
            })?;
        match reply {
            ractor::rpc::CallResult::Success(bytes) => Ok(bytes),
            _ => Err(CallError::Timeout {
                service: S::NAME,
                peer: self.peer.to_string(),
                timeout,
            }
            .into()),
        }
    }

    fn request_id(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    /// The node's member of `group`, looked up again on every call (a restarted service is
    /// a new actor).
    fn endpoint<M: ractor::Message>(
        &self,
        group: &crate::discovery::Group<M>,
    ) -> Result<ActorRef<M>, ClientError> {
        group.remote_member(self.session).ok_or_else(|| {
            ConnectError::Unreachable {
                address: self.address,
                reason: format!(
                    "the node offers no {} service (the session closed?)",
                    group.name()
                ),
            }
            .into()
        })
    }

    async fn call(&mut self, request: MembershipRequest) -> Result<MembershipReply, ClientError> {
        let endpoint = self.endpoint::<MembershipWire>(&MEMBERSHIP)?;
        let envelope = Envelope::new(self.request_id(), &self.settings.name, request);
        let reply = wire::call(
            &endpoint,
            self.peer.as_str(),
            &envelope,
            self.settings.call_timeout,
        )
        .await?;
        Ok(reply.body)
    }

    fn unexpected(&self, answer: impl std::fmt::Debug) -> ClientError {
        ClientError::Unexpected {
            peer: self.peer.clone(),
            answer: format!("{answer:?}"),
        }
    }
}

/// Submissions sent before a timeout is an error.
const SUBMIT_ATTEMPTS: u32 = 3;

/// Dials `address` through `transport` and follows its session to `Ready`, then checks it
/// offers membership.
async fn wait_ready(
    node_server: &ActorRef<NodeServerMessage>,
    transport: &Transport,
    address: SocketAddr,
    events: &mut mpsc::UnboundedReceiver<SessionEvent>,
    limit: Duration,
) -> Result<(SessionId, NodeName), ConnectError> {
    let started = Instant::now();
    let deadline = started + limit;
    let timeout = || ConnectError::Timeout {
        address,
        waited: started.elapsed(),
    };
    let dialled = transport.dial(node_server, address, deadline).await?;
    let mut session = None;
    let mut authenticated = false;
    loop {
        let event = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) | Err(_) => return Err(timeout()),
        };
        let ours = match session {
            None if event.kind == SessionEventKind::Opened
                && event.outbound
                && event.peer_addr == Some(address) =>
            {
                session = Some(event.session);
                true
            }
            Some(id) => id == event.session,
            None => false,
        };
        if !ours {
            continue;
        }
        match event.kind {
            SessionEventKind::Opened => {}
            SessionEventKind::Authenticated => authenticated = true,
            SessionEventKind::Ready => {
                let Some(peer) = event.peer else {
                    return Err(ConnectError::NotAClusterNode { address });
                };
                if MEMBERSHIP.remote_member(event.session).is_none() {
                    return Err(ConnectError::NotAClusterNode { address });
                }
                return Ok((event.session, peer));
            }
            SessionEventKind::Disconnected if authenticated => {
                return Err(ConnectError::Unreachable {
                    address,
                    reason: "the node closed the connection".to_owned(),
                });
            }
            SessionEventKind::Disconnected => return Err(dialled.refused(address)),
        }
    }
}

async fn stop(node_server: &ActorRef<NodeServerMessage>, handle: JoinHandle<()>) {
    let _ = node_server
        .stop_and_wait(Some("client done".to_owned()), Some(Duration::from_secs(5)))
        .await;
    let _ = handle.await;
}
