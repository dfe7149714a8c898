//! ractor_cluster's session events as plain values, and what a failed connection means.
//!
//! `NodeEventSubscription` callbacks run synchronously inside the `NodeServer`'s handler, so
//! [`subscribe`] only converts the event and hands it on (a cast or a channel send), never
//! blocks. Observed order (notes §2.3): `Opened` (peer unknown) → `Authenticated` → `Ready`
//! (after the peers exchanged their actors and process groups); any close gives
//! `Disconnected`. A wrong cookie looks, on the dialling side, like `Opened → Disconnected`
//! with no `Authenticated`, after the node's cookie challenge arrived (the transport's guard
//! saw it): [`ConnectError::AuthenticationFailed`]. Refusals before the cookie handshake (a
//! name in use, TLS, busy, throttled) have errors of their own.

use std::net::SocketAddr;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServerMessage, NodeSessionMessage};

use crate::ids::{NodeName, SessionId};
use crate::transport::TlsProblem;

/// What happened to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEventKind {
    /// A TCP connection was handed to the `NodeServer`; the handshake starts.
    Opened,
    /// The cookie handshake succeeded.
    Authenticated,
    /// Actors and process groups are exchanged: the peer's services can be looked up.
    Ready,
    /// The session ended (either side, any reason).
    Disconnected,
}

/// One session event, with what ractor_cluster knew at that point.
#[derive(Debug, Clone)]
pub struct SessionEvent {
    /// What happened.
    pub kind: SessionEventKind,
    /// The session.
    pub session: SessionId,
    /// Whether this node dialled (`client_connect`) rather than accepted.
    pub outbound: bool,
    /// The TCP peer: the address dialled for outbound sessions, an ephemeral port otherwise
    /// (the address part of the connection's transport label).
    pub peer_addr: Option<SocketAddr>,
    /// The peer's node name, once it has sent it and when it is a valid name.
    pub peer: Option<NodeName>,
    /// The address the peer says it listens on (its `hostname:port`), when it is an IP address.
    pub advertised: Option<SocketAddr>,
    /// The `NodeSession` actor; stopping it closes the session.
    pub actor: ActorRef<NodeSessionMessage>,
}

impl SessionEvent {
    pub(crate) fn from_info(kind: SessionEventKind, info: NodeServerSessionInformation) -> Self {
        let (peer, advertised) = match &info.peer_name {
            Some(name) => (name.name.parse().ok(), name.connection_string.parse().ok()),
            None => (None, None),
        };
        Self {
            kind,
            session: SessionId(info.node_id),
            outbound: !info.is_server,
            peer_addr: crate::transport::label_address(&info.peer_addr),
            peer,
            advertised,
            actor: info.actor,
        }
    }
}

struct Forward<F>(F);

impl<F: Fn(SessionEvent) + Send + 'static> NodeEventSubscription for Forward<F> {
    fn node_session_opened(&self, info: NodeServerSessionInformation) {
        (self.0)(SessionEvent::from_info(SessionEventKind::Opened, info));
    }

    fn node_session_disconnected(&self, info: NodeServerSessionInformation) {
        (self.0)(SessionEvent::from_info(
            SessionEventKind::Disconnected,
            info,
        ));
    }

    fn node_session_authenticated(&self, info: NodeServerSessionInformation) {
        (self.0)(SessionEvent::from_info(
            SessionEventKind::Authenticated,
            info,
        ));
    }

    fn node_session_ready(&self, info: NodeServerSessionInformation) {
        (self.0)(SessionEvent::from_info(SessionEventKind::Ready, info));
    }
}

/// Subscribes `forward` to the session events of `node_server` under `id` (a later
/// subscription with the same id replaces this one). `forward` runs inside the
/// `NodeServer`'s handler: it must only cast or send.
pub fn subscribe<F>(
    node_server: &ActorRef<NodeServerMessage>,
    id: &str,
    forward: F,
) -> Result<(), ractor::MessagingErr<NodeServerMessage>>
where
    F: Fn(SessionEvent) + Send + 'static,
{
    node_server.cast(NodeServerMessage::SubscribeToEvents {
        id: id.to_owned(),
        subscription: Box::new(Forward(forward)),
    })
}

/// Why a connection to a node did not become a ready session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The peer closed the connection after its cookie challenge, before the handshake
    /// completed: a cookie mismatch.
    #[error(
        "authentication failed (cookie mismatch?): node at {address} closed the connection during the handshake; use the same cookie on every node"
    )]
    AuthenticationFailed {
        /// The node dialled.
        address: SocketAddr,
    },
    /// No TCP connection, or it broke after authentication.
    #[error("cannot connect to {address}: {reason}")]
    Unreachable {
        /// The node dialled.
        address: SocketAddr,
        /// The system's error.
        reason: String,
    },
    /// Connected, but the session was not ready in time (a stopped or overloaded node).
    #[error("node at {address} did not complete the handshake within {waited:?}")]
    Timeout {
        /// The node dialled.
        address: SocketAddr,
        /// How long we waited.
        waited: Duration,
    },
    /// The peer authenticated but runs no membership service, or does not speak the
    /// cluster's preamble (not a cluster node).
    #[error("{address} is not a cluster node (it offers no membership service)")]
    NotAClusterNode {
        /// The node dialled.
        address: SocketAddr,
    },
    /// A live process of the cluster already has this process's node name.
    #[error(
        "the name {name} is already in use in the cluster ({}); start this node with another --name",
        match holder {
            Some(holder) => format!("a live node connected from {holder}"),
            None => format!("it is the name of the node at {address}"),
        }
    )]
    NameInUse {
        /// The node dialled.
        address: SocketAddr,
        /// The name.
        name: NodeName,
        /// Where the process with that name is connected from, as the node reports it;
        /// `None` when it is the dialled node's own name.
        holder: Option<String>,
    },
    /// The node holds as many unauthenticated connections as it allows.
    #[error(
        "node at {address} is busy: it holds {limit} connections that have not authenticated yet{}; try again later",
        if *per_address { " from this address" } else { "" }
    )]
    Busy {
        /// The node dialled.
        address: SocketAddr,
        /// The cap is the one per source address.
        per_address: bool,
        /// The cap.
        limit: u32,
    },
    /// Too many failed handshakes came from this address lately.
    #[error(
        "node at {address} refuses connections from this address for {retry_after:?} after {failures} failed handshakes (wrong cookie or certificate?)"
    )]
    Throttled {
        /// The node dialled.
        address: SocketAddr,
        /// How long the refusal lasts.
        retry_after: Duration,
        /// Failed handshakes counted.
        failures: u32,
    },
    /// The node runs TLS; this process does not.
    #[error("node at {address} requires TLS: give this command --tls-cert, --tls-key and --tls-ca")]
    TlsRequired {
        /// The node dialled.
        address: SocketAddr,
    },
    /// This process runs TLS; the node does not.
    #[error(
        "node at {address} does not speak TLS: it runs without --tls-cert; use TLS on every node or on none"
    )]
    TlsUnsupported {
        /// The node dialled.
        address: SocketAddr,
    },
    /// The TLS handshake failed.
    #[error("TLS with the node at {address} failed: {problem}")]
    Tls {
        /// The node dialled.
        address: SocketAddr,
        /// Which certificate, and what is wrong with it.
        problem: TlsProblem,
    },
    /// The node speaks another version of the connection preamble.
    #[error(
        "node at {address} speaks connection preamble version {theirs}, this build {}: run the same release everywhere",
        crate::transport::preamble::VERSION
    )]
    VersionMismatch {
        /// The node dialled.
        address: SocketAddr,
        /// Its version.
        theirs: u16,
    },
}
