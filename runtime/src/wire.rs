//! Versioned wire types: every byte that crosses a node boundary is defined in this module.
//!
//! Two layers:
//!
//! 1. **Cluster messages** — one enum per remote-facing actor ([`MembershipWire`],
//!    [`JobWire`] for the job coordinator, [`PoolWire`] for the sampler pools), deriving
//!    `RactorClusterMessage`, with `Vec<u8>` fields only.
//!    ractor_cluster writes the *variant name* as the wire tag: variants are never renamed or
//!    removed (adding one is fine). Their `BytesConvertable` decoding cannot fail, so
//!    ractor_cluster's silent drop of undecodable messages (notes §2.6) never happens to us.
//! 2. **The envelope inside the bytes** — MessagePack (rmp-serde, *named* encoding: structs are
//!    maps keyed by field name, enums are `{variant name: value}`), so a field added later with
//!    `#[serde(default)]` is read by older peers and newer peers alike; field and variant
//!    names are wire tags too. An [`Envelope`] carries the protocol version, a [`RequestId`],
//!    the sender's node name, the [`JobId`] the message is about (optional, so that every
//!    node's log spans name the job) and the typed body. A reply is an `Envelope<Result<Reply,
//!    WireError>>` with the request's id.
//!
//! Sampling results never travel in one piece: workers and coordinators keep them in an
//! outbox of numbered events and callers fetch them with long polls (`Poll { ack, wait_ms }`)
//! that acknowledge what they received. Each event holds at most [`CHUNK_VALUES`] draws'
//! values (about half a MiB), or, from a GPU run, a block of every chain's draws of a few
//! MiB ([`WireDrawBlock`]: raw columns, and one entry of a few dozen bytes per chain, well
//! within the limit even at `sampling::MAX_CHAINS` chains); a poll answer holds at most
//! [`MAX_POLL_REPLY_BYTES`] (or one larger event): far below the frame limit, and the
//! consumer's pace bounds what is in flight (ractor_cluster's writer queue is unbounded,
//! notes §7.7). A poll repeated after a timeout gets the same events.
//!
//! Decoding happens in the receiving actor's handler: bounded in size
//! ([`MAX_ENVELOPE_BYTES`]) and nesting depth, fallible, and answered with a typed
//! [`WireError`]. Encoding refuses bodies over the limit, because one frame over
//! [`MAX_FRAME_BYTES`] would close the whole session to that peer.
//!
//! Wire types are plain data (`String`s for names and addresses); conversion to the checked
//! internal types ([`crate::NodeName`], [`crate::NodeInfo`]) happens at the edge, in the
//! actors that receive them.

mod block;
mod job;
mod local;
mod membership;
mod pool;
mod sampling;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use ractor::{ActorRef, MessagingErr, RpcReplyPort, rpc::CallResult};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::ids::{JobId, NodeName, RequestId};
pub use block::{BlockEntry, WireDrawBlock};
pub use job::{
    JobReply, JobRequest, JobWire, WireDevice, WireJobEvent, WireRetry, WireRunNote,
    WireSampleRequest, WireWarmup,
};
pub use membership::{
    MembershipReply, MembershipRequest, MembershipWire, WireGpu, WireJoinError, WireMember,
    WireMemberState, WireMemberStatus, WireNodeInfo, WireResources, WireTlsProblem,
};
pub use pool::{
    PoolReply, PoolRequest, PoolWire, WireFailure, WireFault, WirePoolKind, WireTask, WireTaskEvent,
};
pub use sampling::{
    WireAdaptation, WireChainDone, WireChainSpec, WireDraws, WireMetric, WirePrecision,
    WireSettings, WireStats, WireTuning,
};

/// The version of the envelope and of every body in this module. Bump it on any change an
/// older peer cannot read; adding an optional field or a variant is not such a change.
pub const PROTOCOL_VERSION: u16 = 2;

/// Whether an optional flag is off: such a flag is left out of the bytes (serde's
/// `skip_serializing_if`), so that a message without it encodes as before the flag.
fn is_false(value: &bool) -> bool {
    !*value
}

/// The largest inbound frame every node accepts (`NodeServer::with_max_inbound_frame_size`).
/// ractor_cluster checks it on the receiving side only and closes the session on a bigger
/// frame, so every node of a cluster must use the same value: this one.
pub const MAX_FRAME_BYTES: u64 = 64 * 1024 * 1024;

/// The largest encoded envelope we send or decode: the frame limit less room for
/// ractor_cluster's own framing (variant tag, length prefixes, protobuf wrapper).
pub const MAX_ENVELOPE_BYTES: usize = 60 * 1024 * 1024;

/// Deepest nesting of maps and arrays a decoder follows (rmp-serde's default is 1024).
const MAX_DEPTH: usize = 64;

/// Most draw values (draws × columns) in one streamed event: about 0.6 MB encoded.
pub const CHUNK_VALUES: usize = 64 * 1024;

/// A poll answer stops adding events past this many (estimated) bytes; it always carries at
/// least one event when one is ready. Large enough that a GPU run's stream of blocks takes
/// few round trips, half the frame limit so that one event over it still fits.
pub const MAX_POLL_REPLY_BYTES: usize = 32 * 1024 * 1024;

/// The common wrapper of every request and reply body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub version: u16,
    /// Chosen by the requester; a reply repeats it.
    pub request_id: RequestId,
    /// The sending node's full name (`short@host`).
    pub sender: String,
    /// The job the message is about, if any: receivers record it in their log spans, so that
    /// one job can be followed across nodes. Absent from the bytes when `None` (older peers
    /// and non-job messages encode exactly as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobId>,
    /// In a request from an actor of the same process: the key of the slot its reply may be
    /// put in rather than encoded (`wire::local`). Absent from the bytes when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_reply: Option<u64>,
    /// The message itself.
    pub body: T,
}

/// One event of a stream fetched by long polls: numbered from 1 without gaps, so that a
/// poll's `ack` names what the caller has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireEvent<E> {
    /// Its number in the stream.
    pub seq: u64,
    /// The event.
    pub event: E,
}

/// The version and request id alone: read first, so that a peer speaking another version
/// gets [`WireError::UnsupportedVersion`] rather than a confusing body error, and so that a
/// refusal can repeat the request id.
#[derive(Deserialize)]
struct Header {
    version: u16,
    #[serde(default)]
    request_id: RequestId,
}

/// A message that could not be sent, read or understood; also sent back as a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum WireError {
    /// Over [`MAX_ENVELOPE_BYTES`].
    #[error(
        "message of {size} bytes exceeds the limit of {limit} bytes: send large data out of band"
    )]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The peer speaks another protocol version.
    #[error(
        "protocol version {found} is not supported (this node speaks version {supported}): run the same release on every node"
    )]
    UnsupportedVersion {
        /// The peer's version.
        found: u16,
        /// Ours.
        supported: u16,
    },
    /// Not a valid envelope or body.
    #[error("malformed message: {reason}")]
    Malformed {
        /// What the decoder said.
        reason: String,
    },
    /// The service is restarting; retry after a moment.
    #[error("the {service} service is restarting; retry")]
    Unavailable {
        /// The service.
        service: String,
    },
    /// A well-formed request whose content is wrong (a model that does not validate,
    /// impossible settings).
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What is wrong (`model`, `settings`, `request`).
        what: String,
        /// Why.
        reason: String,
    },
    /// The request names something the receiver does not have (a job or task that finished
    /// long ago, expired, or belonged to a previous incarnation of a restarted actor).
    #[error("{what} is not known here (finished, expired, or the node restarted)")]
    NotFound {
        /// What was asked for.
        what: String,
    },
    /// No worker in the cluster can run the request.
    #[error("cannot place the job: {reason}")]
    NoCapacity {
        /// Why.
        reason: String,
    },
    /// The receiver does not allow this request.
    #[error("refused: {reason}")]
    Forbidden {
        /// Why, and what would allow it.
        reason: String,
    },
    /// The receiving node drains (it is shutting down): it takes no new job or task.
    #[error("node {node} is draining (shutting down); submit to another member")]
    Draining {
        /// The node.
        node: String,
    },
    /// A request over a limit of the node that received it (`crate::limits`): a job error,
    /// never retried elsewhere. Boxed: the other errors are small.
    #[error("{0}")]
    LimitExceeded(Box<WireLimitExceeded>),
}

/// What [`WireError::LimitExceeded`] says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireLimitExceeded {
    /// The limit.
    pub limit: WireLimit,
    /// What the request asks for (bytes, chains or iterations).
    pub value: u64,
    /// The node's limit.
    pub max: u64,
    /// The node flag that raises the limit (`--max-job-bytes`, ...).
    pub flag: String,
    /// The node's full name.
    pub node: String,
    /// What was checked ("job", "task of 2 chains").
    pub subject: String,
    /// How a byte count comes about ("1 chain x 1000 draws x 25 values"), or empty.
    pub detail: String,
}

impl fmt::Display for WireLimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::limits::LimitExceeded::from_wire(self).fmt(f)
    }
}

/// Which limit a [`WireError::LimitExceeded`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireLimit {
    /// Chains per job (`--max-chains`).
    Chains,
    /// Warmup iterations per chain (`--max-warmup`).
    Warmup,
    /// Draws per chain (`--max-draws`).
    Draws,
    /// Bytes of a job's draws and data (`--max-job-bytes`).
    JobBytes,
}

impl<T> Envelope<T> {
    /// A body from `sender`, stamped with our protocol version.
    pub fn new(request_id: RequestId, sender: &NodeName, body: T) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            request_id,
            sender: sender.as_str().to_owned(),
            job: None,
            local_reply: None,
            body,
        }
    }

    /// The same envelope, about `job`.
    pub fn with_job(mut self, job: JobId) -> Self {
        self.job = Some(job);
        self
    }

    /// The sender's name, checked.
    pub fn sender_name(&self) -> Result<NodeName, WireError> {
        self.sender.parse().map_err(|error| WireError::Malformed {
            reason: format!("sender: {error}"),
        })
    }
}

impl<T: Serialize> Envelope<T> {
    /// MessagePack with named fields; refuses results over [`MAX_ENVELOPE_BYTES`].
    ///
    /// Encoded twice: once into a counter, for the size (checked before anything is
    /// allocated), then into a buffer of exactly that size. A poll's answer is tens of MiB
    /// of draws, held as byte columns that the counter only adds up; a buffer grown as it
    /// fills would copy them again and again.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let malformed = |error: rmp_serde::encode::Error| WireError::Malformed {
            reason: error.to_string(),
        };
        let mut counter = ByteCounter(0);
        rmp_serde::encode::write_named(&mut counter, self).map_err(malformed)?;
        check_size(counter.0)?;
        let mut bytes = Vec::with_capacity(counter.0);
        rmp_serde::encode::write_named(&mut bytes, self).map_err(malformed)?;
        Ok(bytes)
    }
}

/// A writer that only counts what is written to it.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(bytes.len());
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<T: DeserializeOwned> Envelope<T> {
    /// Reads an envelope: size first, then the version, then the body.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        check_size(bytes.len())?;
        let header: Header = from_slice(bytes)?;
        if header.version != PROTOCOL_VERSION {
            return Err(WireError::UnsupportedVersion {
                found: header.version,
                supported: PROTOCOL_VERSION,
            });
        }
        from_slice(bytes)
    }
}

fn check_size(size: usize) -> Result<(), WireError> {
    if size > MAX_ENVELOPE_BYTES {
        return Err(WireError::TooLarge {
            size: size as u64,
            limit: MAX_ENVELOPE_BYTES as u64,
        });
    }
    Ok(())
}

fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, WireError> {
    let mut deserializer = rmp_serde::Deserializer::from_read_ref(bytes);
    deserializer.set_max_depth(MAX_DEPTH);
    T::deserialize(&mut deserializer).map_err(|error| WireError::Malformed {
        reason: error.to_string(),
    })
}

/// A remote-facing service: its cluster message enum and the bodies it carries.
///
/// Every service enum has a `Call(Vec<u8>, RpcReplyPort<Vec<u8>>)` variant carrying an
/// `Envelope<Request>` and answered with an `Envelope<Result<Reply, WireError>>`.
pub trait Service: ractor::Message {
    /// What the service is asked.
    type Request: Serialize + DeserializeOwned + Send;
    /// What it answers.
    type Reply: Serialize + DeserializeOwned + Send;
    /// The service's name in errors and logs.
    const NAME: &'static str;
    /// Wraps an encoded request into the service's `Call` variant.
    fn call(request: Vec<u8>, reply: RpcReplyPort<Vec<u8>>) -> Self;
}

/// A remote call that did not produce a reply body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The actor is gone (stopped, or its session closed): re-resolve it and retry.
    #[error("{service} on {peer} is unreachable: {reason}")]
    Unreachable {
        /// The service.
        service: &'static str,
        /// The peer (node name, or address when the name is not known).
        peer: String,
        /// ractor's reason.
        reason: String,
    },
    /// No reply within the timeout. The outcome is unknown: the request may have run.
    #[error("{service} on {peer} did not answer within {timeout:?}")]
    Timeout {
        /// The service.
        service: &'static str,
        /// The peer.
        peer: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The request could not be encoded, or the reply could not be read.
    #[error("{service} on {peer}: {error}")]
    Wire {
        /// The service.
        service: &'static str,
        /// The peer.
        peer: String,
        /// The problem.
        error: WireError,
    },
    /// The peer understood the envelope but refused it (it answered a [`WireError`]).
    #[error("{service} on {peer} refused the request: {error}")]
    Refused {
        /// The service.
        service: &'static str,
        /// The peer.
        peer: String,
        /// The peer's answer.
        error: WireError,
    },
}

/// Calls `service` with `request`, waits at most `timeout`, and decodes the reply.
///
/// ractor reports a remote timeout as either `Timeout` or `SenderError` (notes §2.7); both
/// become [`CallError::Timeout`]: the outcome is unknown, and a retry must reuse `request_id`.
pub async fn call<S: Service>(
    service: &ActorRef<S>,
    peer: &str,
    envelope: &Envelope<S::Request>,
    timeout: Duration,
) -> Result<Envelope<S::Reply>, CallError> {
    let peer = peer.to_owned();
    let wire = |error| CallError::Wire {
        service: S::NAME,
        peer: peer.clone(),
        error,
    };
    // A call within this process: the reply may come in memory, not as bytes.
    let slot = if service.get_id().is_local() {
        local::Slot::open()
    } else {
        None
    };
    let bytes = match &slot {
        Some(slot) => Envelope {
            version: envelope.version,
            request_id: envelope.request_id,
            sender: envelope.sender.clone(),
            job: envelope.job,
            local_reply: Some(slot.key()),
            body: &envelope.body,
        }
        .encode(),
        None => envelope.encode(),
    }
    .map_err(wire)?;
    let reply = service
        .call(|port| S::call(bytes, port), Some(timeout))
        .await
        .map_err(|error: MessagingErr<S>| CallError::Unreachable {
            service: S::NAME,
            peer: peer.clone(),
            reason: error.to_string(),
        })?;
    let bytes = match reply {
        CallResult::Success(bytes) => bytes,
        CallResult::Timeout | CallResult::SenderError => {
            return Err(CallError::Timeout {
                service: S::NAME,
                peer,
                timeout,
            });
        }
    };
    if let Some(slot) = slot
        && bytes == local::MARKER
    {
        let reply = slot
            .take::<Envelope<Result<S::Reply, WireError>>>()
            .ok_or_else(|| {
                wire(WireError::Malformed {
                    reason: "a local reply marker without its reply".to_owned(),
                })
            })?;
        return reply_from_envelope::<S>(reply, peer);
    }
    reply_from_bytes::<S>(&bytes, &peer)
}

/// The answer of a call to service `S` from `peer`, as its bytes came (through the session
/// or a job link).
pub(crate) fn reply_from_bytes<S: Service>(
    bytes: &[u8],
    peer: &str,
) -> Result<Envelope<S::Reply>, CallError> {
    let peer = peer.to_owned();
    let reply = Envelope::<Result<S::Reply, WireError>>::decode(bytes).map_err(|error| {
        CallError::Wire {
            service: S::NAME,
            peer: peer.clone(),
            error,
        }
    })?;
    reply_from_envelope::<S>(reply, peer)
}

/// The answer of a call to service `S` from `peer`, as its envelope came.
fn reply_from_envelope<S: Service>(
    reply: Envelope<Result<S::Reply, WireError>>,
    peer: String,
) -> Result<Envelope<S::Reply>, CallError> {
    match reply.body {
        Ok(body) => Ok(Envelope {
            version: reply.version,
            request_id: reply.request_id,
            sender: reply.sender,
            job: reply.job,
            local_reply: None,
            body,
        }),
        Err(error) => Err(CallError::Refused {
            service: S::NAME,
            peer,
            error,
        }),
    }
}

/// The answering side of a call to service `S`: replies with the request's id and this
/// node's name.
pub struct Responder<S> {
    port: RpcReplyPort<Vec<u8>>,
    request_id: RequestId,
    job: Option<JobId>,
    /// The request's `Envelope::local_reply`.
    local_reply: Option<u64>,
    me: NodeName,
    service: PhantomData<fn() -> S>,
}

impl<S: Service> fmt::Debug for Responder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("service", &S::NAME)
            .field("request_id", &self.request_id)
            .finish_non_exhaustive()
    }
}

impl<S: Service> Responder<S> {
    /// Answers the request `request_id` through `port`.
    pub fn new(port: RpcReplyPort<Vec<u8>>, request_id: RequestId, me: NodeName) -> Self {
        Self {
            port,
            request_id,
            job: None,
            local_reply: None,
            me,
            service: PhantomData,
        }
    }

    /// The reply goes in memory to the caller's slot `key` when it is open there (a caller
    /// in this process: `wire::local`).
    pub fn with_local_reply(mut self, key: Option<u64>) -> Self {
        self.local_reply = key;
        self
    }

    /// The reply names `job` too.
    pub fn with_job(mut self, job: Option<JobId>) -> Self {
        self.job = job;
        self
    }

    /// The answering node.
    pub fn me(&self) -> &NodeName {
        &self.me
    }

    /// How long the caller waits for the answer, when it said (a remote caller's timeout
    /// travels with the call): a long poll must answer well before it.
    pub fn caller_timeout(&self) -> Option<Duration> {
        self.port.get_timeout()
    }

    /// Sends the reply. A reply too large to send becomes a [`WireError::TooLarge`]; a caller
    /// that gave up (timeout) is not an error.
    pub fn send(self, body: Result<S::Reply, WireError>) {
        let stamp = |body| {
            let envelope = Envelope::new(self.request_id, &self.me, body);
            match self.job {
                Some(job) => envelope.with_job(job),
                None => envelope,
            }
        };
        let body = match self.local_reply {
            Some(key) => match local::put(key, stamp(body)) {
                Ok(()) => {
                    if self.port.send(local::MARKER.to_vec()).is_err() {
                        tracing::debug!(request = %self.request_id, "caller gone before the reply");
                    }
                    return;
                }
                Err(envelope) => envelope.body,
            },
            None => body,
        };
        let bytes = stamp(body)
            .encode()
            .or_else(|error| stamp(Err(error)).encode());
        match bytes {
            Ok(bytes) => {
                if self.port.send(bytes).is_err() {
                    tracing::debug!(request = %self.request_id, "caller gone before the reply");
                }
            }
            Err(error) => {
                tracing::warn!(request = %self.request_id, "cannot encode a reply: {error}")
            }
        }
    }
}

/// Answers a request to `S` whose envelope could not be read, repeating its request id when
/// the header was readable (0 otherwise).
pub fn refuse<S: Service>(
    port: RpcReplyPort<Vec<u8>>,
    request: &[u8],
    me: &NodeName,
    error: WireError,
) {
    let request_id = from_slice::<Header>(request).map_or(RequestId(0), |h| h.request_id);
    Responder::<S>::new(port, request_id, me.clone()).send(Err(error));
}

/// A local actor's message that may carry the [`Responder`] of a remote call to `S`.
pub(crate) trait Answerable<S: Service> {
    /// The responder, if the message answers a remote call.
    fn into_responder(self) -> Option<Responder<S>>;
}

/// Hands `message` from an endpoint to the local actor behind it; when that actor is gone,
/// the remote caller gets [`WireError::Unavailable`] naming `service` at once, rather than
/// waiting for its timeout.
pub(crate) fn hand_over<S: Service, M: ractor::Message + Answerable<S>>(
    actor: &ractor::ActorRef<M>,
    message: M,
    service: impl FnOnce() -> String,
) {
    if let Err(ractor::MessagingErr::SendErr(message)) = actor.cast(message)
        && let Some(responder) = message.into_responder()
    {
        responder.send(Err(WireError::Unavailable { service: service() }));
    }
}

/// A call that arrived for service `S`, decoded, with the way to answer it.
pub struct Incoming<S: Service> {
    /// The caller's request id.
    pub request_id: RequestId,
    /// The job the call is about, if any.
    pub job: Option<JobId>,
    /// The calling node.
    pub sender: NodeName,
    /// What is asked.
    pub body: S::Request,
    /// Answers the call (tagged with `job`).
    pub responder: Responder<S>,
}

/// Decodes a call to service `S` (the bytes of its `Call` variant). A malformed envelope or
/// sender is answered here with its error and gives `None`: the handler goes on with its next
/// message.
pub fn accept<S: Service>(
    bytes: &[u8],
    port: RpcReplyPort<Vec<u8>>,
    me: &NodeName,
) -> Option<Incoming<S>> {
    let request = match Envelope::<S::Request>::decode(bytes) {
        Ok(request) => request,
        Err(error) => {
            tracing::info!(
                "refusing a {} request of {} bytes: {error}",
                S::NAME,
                bytes.len()
            );
            refuse::<S>(port, bytes, me, error);
            return None;
        }
    };
    let responder = Responder::new(port, request.request_id, me.clone())
        .with_job(request.job)
        .with_local_reply(request.local_reply);
    match request.sender_name() {
        Ok(sender) => Some(Incoming {
            request_id: request.request_id,
            job: request.job,
            sender,
            body: request.body,
            responder,
        }),
        Err(error) => {
            responder.send(Err(error));
            None
        }
    }
}

#[cfg(test)]
mod tests;
