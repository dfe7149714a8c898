//! ractor_cluster's session events as plain values, and what a failed connection means.
//!
//! `NodeEventSubscription` callbacks run synchronously inside the `NodeServer`'s handler, so
//! [`subscribe`] only converts the event and hands it on (a cast or a channel send), never
//! blocks. Observed order (notes §2.3): `Opened` (peer unknown) → `Authenticated` → `Ready`
//! (after the peers exchanged their actors and process groups); any close gives
//! `Disconnected`. A wrong cookie looks, on the dialling side, like `Opened → Disconnected`
//! with no `Authenticated`: [`ConnectError::AuthenticationFailed`].

use std::net::SocketAddr;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServerMessage, NodeSessionMessage};

use crate::ids::{NodeName, SessionId};

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
    /// The TCP peer: the address dialled for outbound sessions, an ephemeral port otherwise.
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
            peer_addr: info.peer_addr.parse().ok(),
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
    /// The peer closed the connection before the cookie handshake completed.
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
    /// The peer authenticated but runs no membership service (not a cluster node).
    #[error("{address} is not a cluster node (it offers no membership service)")]
    NotAClusterNode {
        /// The node dialled.
        address: SocketAddr,
    },
}
