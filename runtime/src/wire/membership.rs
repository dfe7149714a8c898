//! The membership service on the wire: heartbeats with gossip, the member list, remote join
//! and leave.

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use super::Service;
use super::is_false;

/// The membership endpoint's cluster message. Wire tag: the variant name (`"Call"`).
#[derive(RactorClusterMessage)]
pub enum MembershipWire {
    /// An `Envelope<MembershipRequest>`, answered by an
    /// `Envelope<Result<MembershipReply, WireError>>`.
    #[rpc]
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

impl Service for MembershipWire {
    type Request = MembershipRequest;
    type Reply = MembershipReply;
    const NAME: &'static str = "membership";

    fn call(request: Vec<u8>, reply: RpcReplyPort<Vec<u8>>) -> Self {
        Self::Call(request, reply)
    }
}

/// What a node asks another node's membership.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MembershipRequest {
    /// Liveness probe, and gossip: the sender's own description and the members it sees up.
    /// Answered by [`MembershipReply::Heartbeat`].
    Heartbeat {
        /// Echoed in the reply.
        seq: u64,
        /// The sender.
        node: WireNodeInfo,
        /// The members the sender sees up (not itself).
        members: Vec<WireMember>,
    },
    /// The receiver's view of the cluster, itself included. Answered by
    /// [`MembershipReply::Members`].
    Members,
    /// Asks the receiver to join the node at `address` (`host:port`). Answered by
    /// [`MembershipReply::Joined`] or [`MembershipReply::JoinFailed`].
    Join {
        /// The node to join.
        address: String,
    },
    /// The sender is shutting down: mark it left and do not reconnect. Answered by
    /// [`MembershipReply::Left`].
    Leave,
}

/// What a node's membership answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MembershipReply {
    /// The answer to a heartbeat: the same `seq`, the receiver's description and the members
    /// it sees up.
    Heartbeat {
        /// The request's `seq`.
        seq: u64,
        /// The answering node.
        node: WireNodeInfo,
        /// The members it sees up (not itself).
        members: Vec<WireMember>,
    },
    /// Every node the receiver knows, itself first.
    Members {
        /// The nodes.
        members: Vec<WireMemberStatus>,
    },
    /// The receiver joined `node`.
    Joined {
        /// The node it joined.
        node: WireNodeInfo,
    },
    /// The receiver could not join.
    JoinFailed {
        /// Why.
        error: WireJoinError,
    },
    /// Leave acknowledged.
    Left,
}

/// A node's description: who it is, where to dial it, what it offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireNodeInfo {
    /// Full node name, `short@host`.
    pub name: String,
    /// The address peers dial, `host:port`.
    pub address: String,
    /// What it can run.
    pub resources: WireResources,
    /// It drains (shutting down): place nothing new there. Absent from the bytes when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draining: bool,
}

/// What a node can run, and how busy it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireResources {
    /// Chains it runs at once on its CPU cores.
    pub cpu_slots: u32,
    /// Its GPUs.
    pub gpus: Vec<WireGpu>,
    /// Jobs running on it now.
    pub running_jobs: u32,
}

/// One GPU adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireGpu {
    /// Adapter name as the driver reports it.
    pub adapter: String,
    /// Graphics backend (`Vulkan`, ...).
    pub backend: String,
    /// Device memory in bytes, when known.
    pub memory_bytes: Option<u64>,
    /// A software implementation on the CPU (lavapipe, llvmpipe). Absent from the bytes when
    /// false, as from older peers'.
    #[serde(default, skip_serializing_if = "is_false")]
    pub software: bool,
    /// The node runs no GPU pool on it (a software adapter it was not asked to use). Absent
    /// from the bytes when false, as from older peers', whose adapters were all used.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unused: bool,
    /// Chains it runs now. Absent from the bytes when 0, as from older peers'.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chains: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// A member as gossip carries it: enough to dial it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireMember {
    /// Full node name.
    pub name: String,
    /// The address to dial, `host:port`.
    pub address: String,
}

/// One node in a [`MembershipReply::Members`] list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireMemberStatus {
    /// Full node name.
    pub name: String,
    /// The address peers dial.
    pub address: String,
    /// As the answering node sees it.
    pub state: WireMemberState,
    /// Its resources as last reported; `None` before the first heartbeat answer.
    pub resources: Option<WireResources>,
}

/// A member's state as seen by the answering node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireMemberState {
    /// The answering node itself.
    Local,
    /// Answering heartbeats.
    Up,
    /// Being connected (first contact or reconnect).
    Connecting,
    /// Not answering; reconnect attempts continue with backoff.
    Down,
    /// Up, but shutting down: it finishes its running work and takes nothing new.
    Draining,
}

/// Why a join failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireJoinError {
    /// The peer closed the connection during the handshake: almost always a cookie mismatch.
    AuthenticationFailed {
        /// The peer's address.
        address: String,
    },
    /// No connection (refused, unreachable, DNS).
    Unreachable {
        /// The peer's address.
        address: String,
        /// The system's error.
        reason: String,
    },
    /// Connected, but the peer did not become a member in time.
    Timeout {
        /// The peer's address.
        address: String,
        /// How long the node waited, in milliseconds.
        waited_ms: u64,
    },
    /// The address is not `host:port`.
    BadAddress {
        /// The rejected address.
        address: String,
    },
    /// A live process of the cluster already has the joining node's name.
    NameInUse {
        /// The peer's address.
        address: String,
        /// The name.
        name: String,
        /// Where the process holding it is connected from; `None`: the peer itself.
        holder: Option<String>,
    },
    /// The peer holds as many unauthenticated connections as it allows.
    Busy {
        /// The peer's address.
        address: String,
        /// The cap is the one per source address.
        per_address: bool,
        /// The cap.
        limit: u32,
    },
    /// The peer refuses the joining node's address for a while after failed handshakes.
    Throttled {
        /// The peer's address.
        address: String,
        /// How long, in milliseconds.
        retry_after_ms: u64,
        /// Failed handshakes counted.
        failures: u32,
    },
    /// The peer runs TLS, the joining node does not.
    TlsRequired {
        /// The peer's address.
        address: String,
    },
    /// The joining node runs TLS, the peer does not.
    TlsUnsupported {
        /// The peer's address.
        address: String,
    },
    /// The TLS handshake failed.
    Tls {
        /// The peer's address.
        address: String,
        /// What went wrong.
        problem: WireTlsProblem,
    },
    /// The peer speaks another version of the connection preamble.
    VersionMismatch {
        /// The peer's address.
        address: String,
        /// Its version.
        theirs: u16,
    },
}

/// What went wrong in a TLS handshake (`runtime::TlsProblem`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireTlsProblem {
    /// The peer's certificate has expired.
    NodeCertificateExpired,
    /// The peer's certificate is signed by another CA.
    NodeCertificateUnknownIssuer,
    /// The peer's certificate does not name the address dialled.
    NodeCertificateWrongName,
    /// The peer refused the dialler's certificate, which has expired.
    OurCertificateExpired,
    /// The peer refused the dialler's certificate, signed by another CA.
    OurCertificateUnknownIssuer,
    /// The peer refused the dialler's certificate with this TLS alert.
    OurCertificateRefused {
        /// The alert.
        alert: String,
    },
    /// Anything else.
    Other {
        /// The error.
        reason: String,
    },
}
