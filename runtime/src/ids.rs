//! Typed identifiers: node names, session ids, request ids, supervisor child ids, and the
//! ids of sampling jobs and of the tasks a job is split into.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

/// The longest short name (the part before `@`) a node may have.
pub const MAX_SHORT_NAME_LEN: usize = 64;
/// The longest host part (after `@`) of a node name, as for DNS names.
pub const MAX_HOST_LEN: usize = 253;

/// A node's full name, `short@host` as in Erlang (`a@127.0.0.1`).
///
/// `short` is what `cluster-cli node --name` takes; `host` is the host of the address peers
/// dial. The full name must be unique in a cluster: ractor_cluster uses it to elect one session
/// when two nodes connect to each other at once, and membership keys its peer table on it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeName(String);

/// A string that is not a valid node name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeNameError {
    /// The short name is empty, too long or has a character outside `[A-Za-z0-9_.-]`.
    #[error(
        "invalid node name {name:?}: use 1 to {MAX_SHORT_NAME_LEN} characters from A-Z a-z 0-9 _ . -"
    )]
    Short {
        /// The rejected short name.
        name: String,
    },
    /// The host part is empty, too long, or contains `@`, whitespace or control characters.
    #[error("invalid host {host:?} in a node name")]
    Host {
        /// The rejected host.
        host: String,
    },
    /// A full name without `@`.
    #[error("invalid node name {name:?}: expected short@host, e.g. a@127.0.0.1")]
    MissingHost {
        /// The rejected full name.
        name: String,
    },
}

impl NodeName {
    /// Builds `short@host`, checking both parts.
    pub fn new(short: &str, host: &str) -> Result<Self, NodeNameError> {
        let short_ok = !short.is_empty()
            && short.len() <= MAX_SHORT_NAME_LEN
            && short
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !short_ok {
            return Err(NodeNameError::Short {
                name: short.to_owned(),
            });
        }
        let host_ok = !host.is_empty()
            && host.len() <= MAX_HOST_LEN
            && !host
                .chars()
                .any(|c| c == '@' || c.is_whitespace() || c.is_control());
        if !host_ok {
            return Err(NodeNameError::Host {
                host: host.to_owned(),
            });
        }
        Ok(Self(format!("{short}@{host}")))
    }

    /// The part before `@`.
    pub fn short(&self) -> &str {
        self.0.split_once('@').map_or(&self.0, |(short, _)| short)
    }

    /// The part after `@`.
    pub fn host(&self) -> &str {
        self.0.split_once('@').map_or("", |(_, host)| host)
    }

    /// The full name, `short@host`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for NodeName {
    type Err = NodeNameError;

    /// Parses a full name `short@host`.
    fn from_str(full: &str) -> Result<Self, Self::Err> {
        let (short, host) = full
            .split_once('@')
            .ok_or_else(|| NodeNameError::MissingHost {
                name: full.to_owned(),
            })?;
        Self::new(short, host)
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeName({})", self.0)
    }
}

/// One ractor_cluster session with a peer, as numbered by this node's `NodeServer`.
///
/// The number is local to this node and changes on every reconnect; it is also the `node_id`
/// of the `ActorId::Remote` of every actor reached through that session. Never send it to
/// another node: use [`NodeName`] for a cluster-wide identity.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct SessionId(pub u64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "session {}", self.0)
    }
}

/// A `u64` id newtype, serialised as its number and displayed with `$format`; `fresh` adds
/// `fresh()`, a new id from `fresh_u64`.
macro_rules! u64_id {
    ($(#[$doc:meta])* $name:ident, $format:literal) => {
        $(#[$doc])*
        #[derive(
            Clone,
            Copy,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            Debug,
            Default,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, $format, self.0)
            }
        }
    };
    (fresh $(#[$doc:meta])* $name:ident, $format:literal) => {
        u64_id!($(#[$doc])* $name, $format);

        impl $name {
            /// A new id, unique with overwhelming probability (see `fresh_u64`).
            pub fn fresh() -> Self {
                Self(fresh_u64())
            }
        }
    };
}

u64_id!(
    /// Identifies a request from one node, so that a retry after a timeout ("outcome
    /// unknown") can be recognised: a receiver keys idempotency on `(sender NodeName,
    /// RequestId)`.
    RequestId,
    "request {}"
);

u64_id!(
    fresh
    /// A sampling job, cluster-wide: chosen by the coordinator that runs it, carried in the
    /// envelope of every message about the job (so that each node's log spans name it).
    JobId,
    "{:016x}"
);

/// The log span of everything about `job` on this node: a `job` span naming it, or none when
/// the current span is already one. ractor carries the sender's span with each local
/// message, so a handler of a message about a job often runs inside its span already;
/// requests from other nodes arrive without one, and their endpoints open it from the
/// envelope's job id.
pub(crate) fn job_span(job: JobId) -> tracing::Span {
    let current = tracing::Span::current();
    if current.metadata().is_some_and(|meta| meta.name() == "job") {
        tracing::Span::none()
    } else {
        tracing::info_span!("job", job = %job)
    }
}

u64_id!(
    fresh
    /// Chains of one job sent to one worker in one dispatch; a worker keys its tasks on
    /// `(coordinator NodeName, TaskId)`, so that a repeated dispatch (a retry after a timeout)
    /// starts nothing new, and a coordinator that restarted does not reuse the ids of its
    /// previous incarnation.
    TaskId,
    "{:016x}"
);

/// A 64-bit id that differs between calls, processes and restarts: SplitMix64 of the clock,
/// the process id and a process-wide counter. Not a secret, only distinct.
pub fn fresh_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut z =
        nanos ^ (u64::from(std::process::id()) << 40) ^ count.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Supervisor child ids are the supervision crate's.
pub use supervision::ChildId;

#[cfg(test)]
mod tests;
