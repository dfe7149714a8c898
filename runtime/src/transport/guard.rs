//! The guard: the stream ractor_cluster gets, which reads whole frames itself until the
//! session authenticates. A frame is ractor_cluster's (`u64` big-endian length, then a
//! protobuf `NetworkMessage`); before authentication one may be at most
//! [`PREAUTH_FRAME_BYTES`](super::PREAUTH_FRAME_BYTES) long and must be a handshake message
//! the peer's side sends, with at most [`MAX_PREAUTH_FRAMES`](super::MAX_PREAUTH_FRAMES) of
//! them. The names in the peer's `Name` (inbound) or `Challenge` (outbound) must be the one
//! its preamble announced, and its connection string short printable ASCII.
//!
//! A frame after the peer's last handshake message is the first message of an authenticated
//! session whose event has not reached us yet: the guard holds its header (nothing
//! allocated, nothing more read) until the session authenticates or the deadline passes.
//!
//! Anything else ends the connection: the guard records why (its drop logs it) and answers
//! end-of-stream, which ractor_cluster takes quietly.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use prost::Message as _;
use ractor_cluster::{BoxRead, BoxWrite, ClusterBidiStream};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::io::Io;
use super::log::peer_text;
use super::preamble::MAX_TEXT_BYTES;
use super::{Connection, MAX_PREAUTH_FRAMES, PREAUTH_FRAME_BYTES};

/// A connection on its way to the `NodeServer`.
pub(crate) struct GuardedStream {
    io: Io,
    closer: Closer,
    deadline: Instant,
}

impl GuardedStream {
    pub(crate) fn new(io: Io, connection: Arc<Connection>, deadline: Instant) -> Self {
        Self {
            io,
            closer: Closer(connection),
            deadline,
        }
    }
}

impl ClusterBidiStream for GuardedStream {
    fn split(self: Box<Self>) -> (BoxRead, BoxWrite) {
        let Self {
            io,
            closer,
            deadline,
        } = *self;
        let (read, write) = io.split();
        (Box::new(GuardedRead::new(read, closer, deadline)), write)
    }

    fn peer_label(&self) -> Option<String> {
        Some(self.closer.0.label())
    }
}

/// Closes the connection's books when the guard goes, whenever that is.
pub(super) struct Closer(pub(super) Arc<Connection>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.closed();
    }
}

enum ReadState {
    /// Reading a frame's length.
    Header { bytes: [u8; 8], have: usize },
    /// Reading a frame of at most `PREAUTH_FRAME_BYTES`.
    Body {
        header: [u8; 8],
        body: Vec<u8>,
        have: usize,
    },
    /// A large frame after the peer's last handshake message: waiting for the session's
    /// authentication before letting it through.
    AwaitAuth { header: [u8; 8] },
    /// Handing bytes already read to ractor_cluster.
    Emit { bytes: Vec<u8>, at: usize },
    /// Authenticated: bytes pass through.
    Passthrough,
    /// Closed by the guard; end of stream from now on.
    Closed,
}

/// The read half of a guarded connection.
pub(super) struct GuardedRead {
    inner: BoxRead,
    deadline: Option<Pin<Box<Sleep>>>,
    state: ReadState,
    frames: u32,
    closer: Closer,
}

impl GuardedRead {
    pub(super) fn new(inner: BoxRead, closer: Closer, deadline: Instant) -> Self {
        Self {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep_until(deadline))),
            state: ReadState::Header {
                bytes: [0; 8],
                have: 0,
            },
            frames: 0,
            closer,
        }
    }

    fn connection(&self) -> &Connection {
        &self.closer.0
    }

    /// Ends the connection for `reason`: end of stream for ractor_cluster.
    fn close(&mut self, reason: String) -> Poll<std::io::Result<()>> {
        self.connection().fail(reason);
        self.state = ReadState::Closed;
        self.deadline = None;
        Poll::Ready(Ok(()))
    }

    /// The peer closed (or the read failed): end of stream.
    fn peer_closed(&mut self) -> Poll<std::io::Result<()>> {
        self.state = ReadState::Closed;
        self.deadline = None;
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for GuardedRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                ReadState::Passthrough => return Pin::new(&mut this.inner).poll_read(cx, buf),
                ReadState::Closed => return Poll::Ready(Ok(())),
                ReadState::Emit { bytes, at } => {
                    let n = (bytes.len() - *at).min(buf.remaining());
                    buf.put_slice(&bytes[*at..*at + n]);
                    *at += n;
                    if *at == bytes.len() {
                        this.state = if this.closer.0.is_authenticated() {
                            this.deadline = None;
                            ReadState::Passthrough
                        } else {
                            ReadState::Header {
                                bytes: [0; 8],
                                have: 0,
                            }
                        };
                    }
                    return Poll::Ready(Ok(()));
                }
                ReadState::Header { have: 0, .. } if this.closer.0.is_authenticated() => {
                    this.deadline = None;
                    this.state = ReadState::Passthrough;
                    continue;
                }
                _ => {}
            }
            if let Some(deadline) = this.deadline.as_mut()
                && deadline.as_mut().poll(cx).is_ready()
            {
                return this.close("the handshake deadline passed".to_owned());
            }
            match &mut this.state {
                ReadState::Header { bytes, have } => {
                    let mut read = ReadBuf::new(&mut bytes[*have..]);
                    match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(_)) => return this.peer_closed(),
                        Poll::Ready(Ok(())) if read.filled().is_empty() => {
                            return this.peer_closed();
                        }
                        Poll::Ready(Ok(())) => *have += read.filled().len(),
                    }
                    if *have < 8 {
                        continue;
                    }
                    let header = *bytes;
                    let len = u64::from_be_bytes(header);
                    if this.closer.0.final_seen() {
                        // The peer is done with the handshake: what follows is its session,
                        // read once ours authenticates (on a loaded machine the event may
                        // trail several of its messages).
                        this.state = ReadState::AwaitAuth { header };
                    } else if len <= PREAUTH_FRAME_BYTES {
                        this.state = ReadState::Body {
                            header,
                            body: vec![0; len as usize],
                            have: 0,
                        };
                    } else {
                        return this.close(format!(
                            "a frame of {len} bytes (at most {PREAUTH_FRAME_BYTES} before authentication)"
                        ));
                    }
                }
                ReadState::Body { header, body, have } => {
                    if *have < body.len() {
                        let mut read = ReadBuf::new(&mut body[*have..]);
                        match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(Err(_)) => return this.peer_closed(),
                            Poll::Ready(Ok(())) if read.filled().is_empty() => {
                                return this.peer_closed();
                            }
                            Poll::Ready(Ok(())) => *have += read.filled().len(),
                        }
                        if *have < body.len() {
                            continue;
                        }
                    }
                    this.frames += 1;
                    if this.frames > MAX_PREAUTH_FRAMES {
                        return this.close(format!(
                            "more than {MAX_PREAUTH_FRAMES} frames before authentication"
                        ));
                    }
                    if let Err(reason) = inspect(body, &this.closer.0) {
                        return this.close(reason);
                    }
                    let mut bytes = Vec::with_capacity(8 + body.len());
                    bytes.extend_from_slice(header);
                    bytes.extend_from_slice(body);
                    this.state = ReadState::Emit { bytes, at: 0 };
                }
                ReadState::AwaitAuth { header } => {
                    this.closer.0.wait_for_authentication(cx.waker());
                    if !this.closer.0.is_authenticated() {
                        return Poll::Pending;
                    }
                    this.state = ReadState::Emit {
                        bytes: header.to_vec(),
                        at: 0,
                    };
                }
                ReadState::Emit { .. } | ReadState::Passthrough | ReadState::Closed => {}
            }
        }
    }
}

/// Checks one frame a peer sent before authenticating; `Err` says why it ends the connection.
pub(crate) fn inspect(frame: &[u8], connection: &Connection) -> Result<(), String> {
    let message = NetworkMessage::decode(frame)
        .map_err(|error| format!("a malformed frame ({})", peer_text(error.to_string())))?;
    match message.kind {
        Some(Kind::Auth(AuthenticationMessage { msg: Some(auth) })) => {
            match (connection.inbound, auth) {
                (true, Auth::Name(name)) => {
                    check_names(&name.name, &name.connection_string, connection)
                }
                (true, Auth::ClientStatus(_)) | (false, Auth::ServerStatus(_)) => Ok(()),
                (true, Auth::ClientChallenge(_)) | (false, Auth::ServerAck(_)) => {
                    connection.saw_final();
                    Ok(())
                }
                (false, Auth::ServerChallenge(challenge)) => {
                    check_names(&challenge.name, &challenge.connection_string, connection)?;
                    connection.saw_challenge();
                    Ok(())
                }
                (true, _) => Err("a handshake message only a node's side sends".to_owned()),
                (false, _) => Err("a handshake message only a dialler's side sends".to_owned()),
            }
        }
        Some(Kind::Node(_) | Kind::Control(_)) if connection.final_seen() => Ok(()),
        Some(Kind::Node(_) | Kind::Control(_)) => {
            Err("a cluster message before the handshake".to_owned())
        }
        Some(Kind::Auth(AuthenticationMessage { msg: None })) | None => {
            Err("an empty message".to_owned())
        }
    }
}

fn check_names(name: &str, connection_string: &str, connection: &Connection) -> Result<(), String> {
    if name != connection.peer_name.as_str() {
        return Err(format!(
            "its handshake names {}, its preamble {}",
            peer_text(name),
            connection.peer_name
        ));
    }
    let clean = !connection_string.is_empty()
        && connection_string.len() <= MAX_TEXT_BYTES
        && connection_string.bytes().all(|b| b.is_ascii_graphic());
    if !clean {
        return Err(format!(
            "its handshake gives the address {}",
            peer_text(connection_string)
        ));
    }
    Ok(())
}

// Mirrors of the few fields of ractor_cluster's protocol (`vendor/ractor_cluster/src/protocol/
// *.proto`) that the guard reads; prost skips the others.

/// `meta.NetworkMessage`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NetworkMessage {
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    pub(crate) kind: Option<Kind>,
}

/// `meta.NetworkMessage.message`: the node and control messages are kept as bytes.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Kind {
    #[prost(message, tag = "1")]
    Auth(AuthenticationMessage),
    #[prost(bytes = "vec", tag = "2")]
    Node(Vec<u8>),
    #[prost(bytes = "vec", tag = "3")]
    Control(Vec<u8>),
}

/// `auth.AuthenticationMessage`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AuthenticationMessage {
    #[prost(oneof = "Auth", tags = "1, 2, 3, 4, 5, 6")]
    pub(crate) msg: Option<Auth>,
}

/// `auth.AuthenticationMessage.msg`: the messages whose content the guard does not read are
/// kept as bytes.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Auth {
    #[prost(message, tag = "1")]
    Name(NameMessage),
    #[prost(bytes = "vec", tag = "2")]
    ServerStatus(Vec<u8>),
    #[prost(bytes = "vec", tag = "3")]
    ClientStatus(Vec<u8>),
    #[prost(message, tag = "4")]
    ServerChallenge(Challenge),
    #[prost(bytes = "vec", tag = "5")]
    ClientChallenge(Vec<u8>),
    #[prost(bytes = "vec", tag = "6")]
    ServerAck(Vec<u8>),
}

/// `auth.NameMessage` (name and connection string).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NameMessage {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "3")]
    pub(crate) connection_string: String,
}

/// `auth.Challenge` (name and connection string).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Challenge {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "4")]
    pub(crate) connection_string: String,
}
