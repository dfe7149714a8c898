//! `runtime`: the cluster node (ractor_cluster server, membership, discovery, supervision),
//! its client, and the versioned wire types between nodes.
//!
//! A process runs one [`Node`] (or one [`ClusterClient`]): ractor's process groups and
//! registry are process-wide. A node runs sampling jobs for clients
//! ([`ClusterClient::sample`]): its coordinator spreads the chains over every node's CPU
//! sampler pool and runs again those of a node that fails. `transport.rs` documents how
//! nodes talk (what ractor_cluster gives and what we add before it); `node.rs` documents
//! the supervision tree.

mod client;
mod cookie;
mod coordinator;
mod discovery;
mod ids;
mod limits;
mod link;
mod membership;
mod node;
mod notes;
mod outbox;
mod pool;
mod sampling;
mod session;
mod ticker;
pub mod transport;
pub mod wire;

pub use client::{ClientError, ClientSettings, ClusterClient, ClusterJob, RawService};
pub use cookie::{Cookie, CookieError, MAX_COOKIE_LEN};
pub use discovery::{COORDINATOR, CPU_POOL, GPU_POOL, Group, MEMBERSHIP, SCOPE};
pub use ids::{ChildId, JobId, NodeName, NodeNameError, RequestId, SessionId, TaskId};
pub use limits::{
    DEFAULT_MAX_ITERATIONS, DEFAULT_MEMORY_BYTES, Holder, JobLimits, JobShape, Limit,
    LimitExceeded, STAT_VALUES, format_bytes,
};
pub use link::{LinkToken, MAX_REPLY_BYTES as MAX_LINK_REPLY_BYTES};
pub use membership::{
    DownReason, EndpointArgs, GpuInfo, GpuPolicy, MEMBERSHIP_NAME, MemberState, MemberStatus,
    Membership, MembershipArgs, MembershipEndpoint, MembershipEvent, MembershipMsg,
    MembershipSettings, NodeInfo, NodeResources, Subscriber,
};
pub use node::{DrainReport, NODE_SERVER_NAME, Node, NodeError, NodeSettings, ROOT_NAME};
pub use notes::{MAX_NOTE_BYTES, MAX_NOTES, RunNote};
pub use sampling::{
    ChainPlacement, DEFAULT_BURN_IN, DevicePreference, Failover, JobOutcome, JobUpdate, MAX_CHAINS,
    PollCounts, PoolKind, RequestError, Retry, SampleRequest, WARMUP_CHAIN, WarmupMode,
    WarmupReport,
};
pub use session::{ConnectError, SessionEvent, SessionEventKind};
/// The node's tree is built with the one supervision mechanism of the project.
pub use supervision::{
    Backoff, ChildSpec, Intensity, Restart, Strategy, Supervisor, SupervisorArgs, SupervisorError,
    SupervisorMsg,
};
pub use transport::{TlsError, TlsIdentity, TlsProblem, Transport, TransportSettings};
