//! `runtime`: the cluster node (ractor_cluster server, membership, discovery, supervision),
//! its client, and the versioned wire types between nodes.
//!
//! A process runs one [`Node`] (or one [`ClusterClient`]): ractor's process groups and
//! registry are process-wide. Read `../shared/notes/ractor_cluster.md` before changing how
//! nodes talk; `node.rs` documents the supervision tree.

mod client;
mod cookie;
mod discovery;
mod ids;
mod membership;
mod node;
mod session;
pub mod supervisor;
pub mod wire;

pub use client::{ClientError, ClientSettings, ClusterClient};
pub use cookie::{Cookie, CookieError, MAX_COOKIE_LEN};
pub use discovery::{Group, MEMBERSHIP, SCOPE};
pub use ids::{ChildId, NodeName, NodeNameError, RequestId, SessionId};
pub use membership::{
    DownReason, EndpointArgs, GpuInfo, MEMBERSHIP_NAME, MemberState, MemberStatus, Membership,
    MembershipArgs, MembershipEndpoint, MembershipEvent, MembershipMsg, MembershipSettings,
    NodeInfo, NodeResources, Subscriber,
};
pub use node::{NODE_SERVER_NAME, Node, NodeError, NodeSettings, ROOT_NAME};
pub use session::{ConnectError, SessionEvent, SessionEventKind};
pub use supervisor::{
    Backoff, ChildSpec, Intensity, Restart, Strategy, Supervisor, SupervisorArgs, SupervisorError,
    SupervisorMsg,
};
