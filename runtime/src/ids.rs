//! Typed identifiers: node names, session ids, request ids and supervisor child ids.

use std::fmt;
use std::str::FromStr;

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

/// Identifies a request from one node, so that a retry after a timeout ("outcome unknown") can
/// be recognised: a receiver keys idempotency on `(sender NodeName, RequestId)`.
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
pub struct RequestId(pub u64);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "request {}", self.0)
    }
}

/// Names a child of a supervisor (`membership`, `gpu`, ...), unique among its siblings.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ChildId(String);

impl ChildId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ChildId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

impl fmt::Display for ChildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests;
