//! Membership: who is in the cluster, who is alive, and who wants to know.
//!
//! ractor_cluster gives us authenticated sessions and nothing else (no liveness, no
//! reconnect, notes §3), so the [`Membership`] actor does the rest:
//!
//! - **Peer set.** It dials the seeds it is given (`--join`, [`MembershipMsg::Join`]) and the
//!   members its peers gossip in their heartbeat answers, so nodes mesh; it accepts inbound
//!   sessions too. A session becomes a member only when the peer runs a membership endpoint
//!   (`cluster-cli join`/`status` clients do not).
//! - **Liveness.** Every `heartbeat_interval` it calls each peer's endpoint
//!   ([`crate::wire::MembershipRequest::Heartbeat`]). `max_missed_heartbeats` missed in a row
//!   (a `SIGSTOP`ped or partitioned node keeps its TCP session open for minutes) mark the
//!   peer down and close its session.
//! - **Reconnect.** A down peer is redialled with exponential backoff (`reconnect_backoff`)
//!   until it comes back or has been down for `forget_after`. A peer that leaves on purpose
//!   ([`crate::wire::MembershipRequest::Leave`], sent on shutdown) is not redialled.
//! - **Events.** [`MembershipEvent::NodeUp`] / [`MembershipEvent::NodeDown`] go to every
//!   [`Subscriber`] (the job coordinator re-runs a down node's chains), and one `info` line
//!   per event goes to the log.
//!
//! The state machine is plain code in `table.rs`; this file runs its effects (dials,
//! heartbeat calls, disconnects) as tasks owned by the actor's state, aborted when it stops.
//! [`MembershipEndpoint`] is the remotable face: it decodes requests and hands them here.

mod endpoint;
mod info;
mod outbound;
mod table;

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::{NodeServerMessage, NodeSessionMessage, RactorMessage};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::discovery::MEMBERSHIP;
use crate::ids::{NodeName, SessionId};
use crate::session::{self, ConnectError, SessionEvent, SessionEventKind};
use crate::ticker::Ticker;
use crate::transport::Transport;
use crate::wire::{self, Envelope, MembershipReply, MembershipRequest, MembershipWire, Responder};
pub use endpoint::{EndpointArgs, MembershipEndpoint};
pub use info::{
    DownReason, GpuInfo, GpuPolicy, MemberState, MemberStatus, MembershipEvent, NodeInfo,
    NodeResources,
};
use info::{member_from_wire, member_to_wire};
use supervision::Backoff;
use table::{Effect, PeerTable};

/// The name the membership actor registers under (one node per process).
pub const MEMBERSHIP_NAME: &str = "bayes.membership";

/// Membership timing.
#[derive(Debug, Clone)]
pub struct MembershipSettings {
    /// Time between two heartbeats to a peer.
    pub heartbeat_interval: Duration,
    /// Heartbeats missed in a row before a peer is marked down: a stalled node is detected
    /// after about `heartbeat_interval * max_missed_heartbeats`.
    pub max_missed_heartbeats: u32,
    /// Limit of one TCP connect.
    pub connect_timeout: Duration,
    /// Limit from an open TCP connection to a ready session (cookie handshake and actor
    /// exchange); a node that accepts connections but never answers hits it.
    pub handshake_timeout: Duration,
    /// Waits between reconnect attempts to a down peer or an unreachable seed.
    pub reconnect_backoff: Backoff,
    /// A peer down this long is forgotten: no more reconnect attempts.
    pub forget_after: Duration,
    /// How long a [`MembershipMsg::Join`] with a reply port waits for the peer to come up.
    pub join_timeout: Duration,
    /// How long the leave notices sent on shutdown may take.
    pub leave_timeout: Duration,
}

impl Default for MembershipSettings {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_millis(500),
            max_missed_heartbeats: 3,
            connect_timeout: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(3),
            reconnect_backoff: Backoff {
                initial: Duration::from_millis(500),
                max: Duration::from_secs(5),
            },
            forget_after: Duration::from_secs(600),
            join_timeout: Duration::from_secs(10),
            leave_timeout: Duration::from_millis(500),
        }
    }
}

/// Receives membership events: an actor (through a conversion into its message type) or a
/// channel. Dropped when delivery fails (the receiver is gone).
pub struct Subscriber(Box<dyn Fn(MembershipEvent) -> bool + Send>);

impl Subscriber {
    /// Events cast to `actor` as `convert(event)`.
    pub fn actor<M, F>(actor: ActorRef<M>, convert: F) -> Self
    where
        M: ractor::Message,
        F: Fn(MembershipEvent) -> M + Send + 'static,
    {
        Self(Box::new(move |event| actor.cast(convert(event)).is_ok()))
    }

    /// Events sent on a channel.
    pub fn channel(sender: UnboundedSender<MembershipEvent>) -> Self {
        Self(Box::new(move |event| sender.send(event).is_ok()))
    }

    fn deliver(&self, event: MembershipEvent) -> bool {
        (self.0)(event)
    }
}

impl fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Subscriber")
    }
}

/// The membership behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub struct Membership;

/// What membership starts from.
#[derive(Debug, Clone)]
pub struct MembershipArgs {
    /// This node.
    pub me: NodeInfo,
    /// The node's `NodeServer`, for dialling and session events.
    pub node_server: ActorRef<NodeServerMessage>,
    /// How the node dials (TLS, preamble, guard).
    pub transport: Transport,
    /// Nodes to join at start, and to keep trying until they answer.
    pub seeds: Vec<SocketAddr>,
    /// Timing.
    pub settings: MembershipSettings,
}

/// Membership's state: the peer table and the work in flight.
#[derive(Debug)]
pub struct MembershipState {
    table: PeerTable,
    node_server: ActorRef<NodeServerMessage>,
    transport: Transport,
    settings: MembershipSettings,
    subscribers: Vec<Subscriber>,
    waiters: Vec<JoinWaiter>,
    session_actors: HashMap<SessionId, ActorRef<NodeSessionMessage>>,
    /// Dials and heartbeat calls in flight; dropping the set aborts them.
    tasks: JoinSet<()>,
    ticker: Ticker,
    next_request: u64,
}

#[derive(Debug)]
struct JoinWaiter {
    address: SocketAddr,
    deadline: Instant,
    started: Instant,
    reply: JoinReply,
}

#[derive(Debug)]
enum JoinReply {
    Local(RpcReplyPort<Result<NodeInfo, ConnectError>>),
    Remote(Responder<MembershipWire>),
}

/// Messages of the membership actor.
#[derive(RactorMessage)]
pub enum MembershipMsg {
    /// Connect to the node at `address`. Without a reply port it is a seed, retried with
    /// backoff until it answers; with one, a single attempt answered once the node is up, when
    /// the attempt fails, or after `join_timeout`.
    Join {
        /// The node to join.
        address: SocketAddr,
        /// Where to answer, if anywhere.
        reply: Option<RpcReplyPort<Result<NodeInfo, ConnectError>>>,
    },
    /// The member list, this node first.
    Members(RpcReplyPort<Vec<MemberStatus>>),
    /// Delivers `NodeUp` for every node already up, then every event.
    Subscribe(Subscriber),
    /// This node's running-job count, gossiped with heartbeats (from the job coordinator).
    SetRunningJobs(u32),
    /// The chains each of this node's GPUs runs now, `(position in its resources' gpus,
    /// chains)`, gossiped with heartbeats (from the GPU supervisor).
    SetGpuLoad(Vec<(usize, u32)>),
    /// This node drains (it is shutting down): its heartbeats and answers say so, and peers
    /// place nothing new here ([`MembershipEvent::NodeDraining`] on their side).
    SetDraining,
    /// The node is shutting down: tell every up peer, so that they do not reconnect. Answered
    /// when they acknowledged or `leave_timeout` passed. (Not on a restart by the supervisor:
    /// peers keep this node then, and its sessions are adopted again.)
    Leave(RpcReplyPort<()>),
    /// A request from a peer, decoded by the [`MembershipEndpoint`].
    Remote {
        /// The request.
        request: Envelope<MembershipRequest>,
        /// Where the answer goes.
        responder: Responder<MembershipWire>,
    },
    /// Membership's own bookkeeping (session events, timer, task results).
    Internal(Internal),
}

/// Messages membership sends itself; opaque outside this module.
pub struct Internal(InternalMsg);

enum InternalMsg {
    Session(SessionEvent),
    Tick,
    DialFailed {
        address: SocketAddr,
        error: ConnectError,
    },
    HeartbeatAnswered {
        peer: NodeName,
        session: SessionId,
        seq: u64,
        answer: Result<(NodeInfo, Vec<(NodeName, SocketAddr)>), String>,
    },
}

fn internal(message: InternalMsg) -> MembershipMsg {
    MembershipMsg::Internal(Internal(message))
}

impl Actor for Membership {
    type Msg = MembershipMsg;
    type State = MembershipState;
    type Arguments = MembershipArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: MembershipArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let me = myself.clone();
        session::subscribe(&args.node_server, MEMBERSHIP_NAME, move |event| {
            let _ = me.cast(internal(InternalMsg::Session(event)));
        })?;
        let ticker = Ticker::start(&myself, args.settings.heartbeat_interval, || {
            internal(InternalMsg::Tick)
        });
        let mut state = MembershipState {
            table: PeerTable::new(args.me, args.settings.clone()),
            node_server: args.node_server,
            transport: args.transport,
            settings: args.settings,
            subscribers: Vec::new(),
            waiters: Vec::new(),
            session_actors: HashMap::new(),
            tasks: JoinSet::new(),
            ticker,
            next_request: 0,
        };
        for seed in args.seeds {
            let effects = state.table.join(seed, true, Instant::now());
            apply(&myself, &mut state, effects);
        }
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // After a restart, the sessions opened before it are ours to adopt.
        let sessions = ractor::call_t!(state.node_server, NodeServerMessage::GetSessions, 1000)?;
        for info in sessions.into_values() {
            for kind in [
                SessionEventKind::Opened,
                SessionEventKind::Authenticated,
                SessionEventKind::Ready,
            ] {
                on_session(&myself, state, SessionEvent::from_info(kind, info.clone()));
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.ticker.stop();
        state.tasks.abort_all();
        let _ = state
            .node_server
            .cast(NodeServerMessage::UnsubscribeToEvents(
                MEMBERSHIP_NAME.to_owned(),
            ));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            MembershipMsg::Join { address, reply } => {
                join(&myself, state, address, reply.map(JoinReply::Local))
            }
            MembershipMsg::Members(reply) => {
                let _ = reply.send(state.table.members());
            }
            MembershipMsg::Subscribe(subscriber) => subscribe(state, subscriber),
            MembershipMsg::SetRunningJobs(running_jobs) => {
                state.table.set_running_jobs(running_jobs)
            }
            MembershipMsg::SetGpuLoad(load) => state.table.set_gpu_load(&load),
            MembershipMsg::SetDraining => state.table.set_draining(),
            MembershipMsg::Leave(reply) => {
                outbound::leave(state).await;
                let _ = reply.send(());
            }
            MembershipMsg::Remote { request, responder } => {
                remote(&myself, state, request, responder)
            }
            MembershipMsg::Internal(Internal(message)) => match message {
                InternalMsg::Session(event) => on_session(&myself, state, event),
                InternalMsg::Tick => tick(&myself, state),
                InternalMsg::DialFailed { address, error } => {
                    let effects = state.table.dial_failed(address, error, Instant::now());
                    apply(&myself, state, effects);
                }
                InternalMsg::HeartbeatAnswered {
                    peer,
                    session,
                    seq,
                    answer,
                } => {
                    let effects =
                        state
                            .table
                            .heartbeat_answered(&peer, session, seq, answer, Instant::now());
                    apply(&myself, state, effects);
                }
            },
        }
        Ok(())
    }
}

fn join(
    myself: &ActorRef<MembershipMsg>,
    state: &mut MembershipState,
    address: SocketAddr,
    reply: Option<JoinReply>,
) {
    let now = Instant::now();
    let persistent = reply.is_none();
    if let Some(reply) = reply {
        state.waiters.push(JoinWaiter {
            address,
            deadline: now + state.settings.join_timeout,
            started: now,
            reply,
        });
    }
    let effects = state.table.join(address, persistent, now);
    apply(myself, state, effects);
}

fn subscribe(state: &mut MembershipState, subscriber: Subscriber) {
    let alive = state.table.up_nodes().into_iter().all(|node| {
        subscriber.deliver(MembershipEvent::NodeUp {
            node,
            reconnected: false,
        })
    }) && state
        .table
        .draining_nodes()
        .into_iter()
        .all(|node| subscriber.deliver(MembershipEvent::NodeDraining { node }));
    if alive {
        state.subscribers.push(subscriber);
    }
}

fn on_session(myself: &ActorRef<MembershipMsg>, state: &mut MembershipState, event: SessionEvent) {
    let now = Instant::now();
    tracing::debug!(session = %event.session, peer = ?event.peer, "session {:?}", event.kind);
    let effects = match event.kind {
        SessionEventKind::Opened => {
            state.session_actors.insert(event.session, event.actor);
            state
                .table
                .session_opened(event.session, event.outbound, event.peer_addr, now);
            Vec::new()
        }
        SessionEventKind::Authenticated => {
            state.session_actors.insert(event.session, event.actor);
            state.table.session_authenticated(event.session, event.peer);
            Vec::new()
        }
        SessionEventKind::Ready => {
            state.session_actors.insert(event.session, event.actor);
            let has_endpoint = MEMBERSHIP.remote_member(event.session).is_some();
            state.table.session_ready(
                event.session,
                event.peer,
                event.advertised,
                has_endpoint,
                now,
            )
        }
        SessionEventKind::Disconnected => {
            state.session_actors.remove(&event.session);
            state.table.session_disconnected(event.session, now)
        }
    };
    apply(myself, state, effects);
}

fn tick(myself: &ActorRef<MembershipMsg>, state: &mut MembershipState) {
    while state.tasks.try_join_next().is_some() {}
    let now = Instant::now();
    let (expired, waiting) = std::mem::take(&mut state.waiters)
        .into_iter()
        .partition(|waiter| waiter.deadline <= now);
    state.waiters = waiting;
    for waiter in expired {
        let error = ConnectError::Timeout {
            address: waiter.address,
            waited: now.duration_since(waiter.started),
        };
        answer_join(waiter.reply, Err(error));
    }
    let effects = state.table.tick(now);
    apply(myself, state, effects);
}

fn remote(
    myself: &ActorRef<MembershipMsg>,
    state: &mut MembershipState,
    request: Envelope<MembershipRequest>,
    responder: Responder<MembershipWire>,
) {
    let now = Instant::now();
    match request.body {
        MembershipRequest::Heartbeat { seq, node, members } => {
            let parsed = NodeInfo::from_wire(node).and_then(|node| {
                let members = members
                    .iter()
                    .map(member_from_wire)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((node, members))
            });
            let (node, members) = match parsed {
                Ok(parsed) => parsed,
                Err(error) => return responder.send(Err(error)),
            };
            let effects = state.table.heartbeat_received(&node, &members, now);
            responder.send(Ok(MembershipReply::Heartbeat {
                seq,
                node: state.table.me().to_wire(),
                members: gossip(&state.table),
            }));
            apply(myself, state, effects);
        }
        MembershipRequest::Members => responder.send(Ok(MembershipReply::Members {
            members: state.table.members().iter().map(|m| m.to_wire()).collect(),
        })),
        MembershipRequest::Join { address } => match address.parse() {
            Ok(address) => join(myself, state, address, Some(JoinReply::Remote(responder))),
            Err(_) => responder.send(Ok(MembershipReply::JoinFailed {
                error: wire::WireJoinError::BadAddress { address },
            })),
        },
        MembershipRequest::Leave => match request.sender_name() {
            Ok(name) => {
                let effects = state.table.left(&name);
                responder.send(Ok(MembershipReply::Left));
                apply(myself, state, effects);
            }
            Err(error) => responder.send(Err(error)),
        },
    }
}

fn gossip(table: &PeerTable) -> Vec<wire::WireMember> {
    table
        .up_members()
        .iter()
        .map(|(name, address)| member_to_wire(name, *address))
        .collect()
}

fn apply(myself: &ActorRef<MembershipMsg>, state: &mut MembershipState, effects: Vec<Effect>) {
    for effect in effects {
        match effect {
            Effect::Dial(address) => outbound::dial(myself, state, address),
            Effect::Heartbeat { peer, session, seq } => {
                outbound::send_heartbeat(myself, state, peer, session, seq)
            }
            Effect::Disconnect { session, reason } => {
                if let Some(actor) = state.session_actors.get(&session) {
                    tracing::debug!(%session, "closing session: {reason}");
                    actor.stop(Some(reason.to_owned()));
                }
            }
            Effect::Event(event) => publish(state, event),
            Effect::JoinOutcome { address, result } => {
                let (done, waiting) = std::mem::take(&mut state.waiters)
                    .into_iter()
                    .partition(|waiter| waiter.address == address);
                state.waiters = waiting;
                for waiter in done {
                    answer_join(waiter.reply, result.clone());
                }
            }
        }
    }
}

fn publish(state: &mut MembershipState, event: MembershipEvent) {
    match &event {
        MembershipEvent::NodeUp {
            node,
            reconnected: false,
        } => tracing::info!(
            "node {} joined ({}; {} cpu slots, {} gpus)",
            node.name,
            node.address,
            node.resources.cpu_slots,
            node.resources.gpus.len()
        ),
        MembershipEvent::NodeUp {
            node,
            reconnected: true,
        } => tracing::info!("node {} reconnected ({})", node.name, node.address),
        MembershipEvent::NodeDraining { node } => {
            tracing::info!("node {node} is draining: placing nothing new there")
        }
        MembershipEvent::NodeDown {
            node,
            reason: DownReason::Left,
        } => tracing::info!("node {node} left the cluster"),
        MembershipEvent::NodeDown { node, reason } => {
            tracing::info!("node {node} down: {reason}")
        }
    }
    state
        .subscribers
        .retain(|subscriber| subscriber.deliver(event.clone()));
}

fn answer_join(reply: JoinReply, result: Result<NodeInfo, ConnectError>) {
    match reply {
        JoinReply::Local(port) => {
            let _ = port.send(result);
        }
        JoinReply::Remote(responder) => responder.send(Ok(match result {
            Ok(node) => MembershipReply::Joined {
                node: node.to_wire(),
            },
            Err(error) => MembershipReply::JoinFailed {
                error: error.to_wire(),
            },
        })),
    }
}
