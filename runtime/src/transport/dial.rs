//! The dialler, for membership and clients alike: TCP with a deadline, TLS if configured,
//! the preamble, then the guarded stream to the `NodeServer`. A refusal before the cookie
//! handshake comes back as the [`ConnectError`] that names it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::guard::GuardedStream;
use super::io::{Io, Recorder};
use super::listener::wire_name;
use super::log::peer_text;
use super::preamble::{self, Answer, Hello, LinkHello, Status};
use super::tls::{TlsProblem, classify_dial_error, server_name};
use super::{Connection, Shared};
use crate::session::ConnectError;

/// The first wait before dialling a busy node again.
const BUSY_RETRY: Duration = Duration::from_millis(50);

/// A connection handed to the `NodeServer`. Its session goes on asynchronously; once it
/// closed without authenticating, [`Dialled::refused`] says why.
#[derive(Clone)]
pub(crate) struct Dialled(Arc<Connection>);

impl Dialled {
    /// Why the session closed before it authenticated: a refused cookie if the node's
    /// challenge had arrived, else what the guard saw, else a close during the handshake.
    pub(crate) fn refused(&self, address: SocketAddr) -> ConnectError {
        let progress = self.0.progress();
        if progress.challenge_seen {
            return ConnectError::AuthenticationFailed { address };
        }
        let reason = match &progress.failure {
            Some(failure) => format!("the connection was closed before authentication: {failure}"),
            None => "the node closed the connection before its cookie challenge".to_owned(),
        };
        ConnectError::Unreachable { address, reason }
    }
}

pub(super) async fn dial(
    shared: &Arc<Shared>,
    node_server: &ActorRef<NodeServerMessage>,
    address: SocketAddr,
    deadline: Instant,
) -> Result<Dialled, ConnectError> {
    let started = Instant::now();
    let mut wait = BUSY_RETRY;
    loop {
        match attempt(shared, node_server, address, started, deadline).await {
            Err(ConnectError::Busy { .. }) if Instant::now() + wait < deadline => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(1));
            }
            outcome => return outcome,
        }
    }
}

async fn attempt(
    shared: &Arc<Shared>,
    node_server: &ActorRef<NodeServerMessage>,
    address: SocketAddr,
    started: Instant,
    deadline: Instant,
) -> Result<Dialled, ConnectError> {
    let hello = Hello::new(&shared.name, shared.incarnation).encode();
    let (io, incarnation, name) = open(shared, address, &hello, started, deadline).await?;
    let Some(name) = wire_name(&name) else {
        return Err(ConnectError::Unreachable {
            address,
            reason: format!("the node gave the invalid name {}", peer_text(&name)),
        });
    };
    let connection = shared.register(address, name, incarnation, None);
    let stream = GuardedStream::new(io, Arc::clone(&connection), deadline);
    ractor_cluster::client_connect_external(node_server, Box::new(stream))
        .await
        .map_err(|error| ConnectError::Unreachable {
            address,
            reason: format!("this process's node server is gone: {error}"),
        })?;
    Ok(Dialled(connection))
}

/// Dials a job link (`crate::link`): TCP, TLS if configured, the link hello; the stream once
/// the node accepted the token.
pub(super) async fn link(
    shared: &Arc<Shared>,
    address: SocketAddr,
    hello: &LinkHello,
    deadline: Instant,
) -> Result<Io, ConnectError> {
    let (io, _, _) = open(shared, address, &hello.encode(), Instant::now(), deadline).await?;
    Ok(io)
}

/// TCP, TLS if configured, `hello`, and the node's answer: the stream, the node's
/// incarnation and name when it accepted.
async fn open(
    shared: &Arc<Shared>,
    address: SocketAddr,
    hello: &[u8],
    started: Instant,
    deadline: Instant,
) -> Result<(Io, u64, Vec<u8>), ConnectError> {
    let timeout = || ConnectError::Timeout {
        address,
        waited: started.elapsed(),
    };
    let unreachable = |reason: String| ConnectError::Unreachable { address, reason };
    let tcp = tokio::time::timeout_at(deadline, TcpStream::connect(address))
        .await
        .map_err(|_| timeout())?
        .map_err(|error| unreachable(error.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let (mut io, recorded) = match &shared.tls {
        None => (Io::Plain(tcp), None),
        Some(tls) => {
            let (recorder, seen) = Recorder::new(tcp);
            let connect = tls.connector().connect(server_name(address.ip()), recorder);
            match tokio::time::timeout_at(deadline, connect).await {
                Err(_) => return Err(timeout()),
                Ok(Ok(stream)) => (Io::TlsClient(Box::new(stream)), Some(seen)),
                Ok(Err(error)) => {
                    // A plaintext answer in place of the node's TLS hello: a refusal.
                    if let Some(answer) = recorded_status(&seen) {
                        return Err(refusal(shared, address, answer));
                    }
                    return Err(tls_failure(address, &error));
                }
            }
        }
    };
    let sent = async {
        io.write_all(hello).await?;
        io.flush().await
    };
    // A node that refuses at once may close before reading the hello: read its answer anyway.
    let sent = tokio::time::timeout_at(deadline, sent)
        .await
        .map_err(|_| timeout())?;
    let answer = match tokio::time::timeout_at(deadline, read_status(&mut io)).await {
        Err(_) => return Err(timeout()),
        Ok(Ok(answer)) => answer,
        Ok(Err(StatusProblem::Bad)) => return Err(ConnectError::NotAClusterNode { address }),
        Ok(Err(StatusProblem::Io(error))) => {
            if recorded.is_some()
                && let Some(problem) = classify_dial_error(&error)
            {
                return Err(ConnectError::Tls { address, problem });
            }
            let reason = match sent {
                Err(sent) => sent.to_string(),
                Ok(()) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                    "the node closed the connection before answering".to_owned()
                }
                Ok(()) => error.to_string(),
            };
            return Err(unreachable(reason));
        }
    };
    match answer.status {
        Status::Ok { incarnation, name } => Ok((io, incarnation, name)),
        _ => Err(refusal(shared, address, answer)),
    }
}

/// A refusal status as the error it means.
fn refusal(shared: &Shared, address: SocketAddr, answer: Answer) -> ConnectError {
    match answer.status {
        Status::NameInUse {
            name: _,
            connected_from,
        } => ConnectError::NameInUse {
            address,
            name: shared.name.clone(),
            holder: (!connected_from.is_empty()).then(|| {
                std::str::from_utf8(&connected_from)
                    .ok()
                    .and_then(|text| text.parse::<SocketAddr>().ok())
                    .map_or_else(|| peer_text(&connected_from), |at| at.to_string())
            }),
        },
        Status::Busy { scope, limit } => ConnectError::Busy {
            address,
            per_address: scope == preamble::BusyScope::Address,
            limit,
        },
        Status::Throttled {
            retry_after,
            failures,
        } => ConnectError::Throttled {
            address,
            retry_after,
            failures,
        },
        Status::TlsRequired => ConnectError::TlsRequired { address },
        Status::TlsUnsupported => ConnectError::TlsUnsupported { address },
        Status::VersionMismatch => ConnectError::VersionMismatch {
            address,
            theirs: answer.version,
        },
        Status::BadHello => ConnectError::Unreachable {
            address,
            reason: "the node refused our hello (not a valid node name?)".to_owned(),
        },
        Status::UnknownLink => ConnectError::Unreachable {
            address,
            reason: "the node has no link for that job (finished, or its coordinator restarted)"
                .to_owned(),
        },
        Status::Ok { .. } => ConnectError::NotAClusterNode { address },
    }
}

fn tls_failure(address: SocketAddr, error: &std::io::Error) -> ConnectError {
    match classify_dial_error(error) {
        Some(problem) => ConnectError::Tls { address, problem },
        None if error.kind() == std::io::ErrorKind::UnexpectedEof => ConnectError::Tls {
            address,
            problem: TlsProblem::Other {
                reason: "the node closed the connection during the TLS handshake".to_owned(),
            },
        },
        None => ConnectError::Tls {
            address,
            problem: TlsProblem::Other {
                reason: error.to_string(),
            },
        },
    }
}

/// The status a node wrote in plaintext where a TLS dialler expected its TLS hello.
fn recorded_status(seen: &Mutex<Vec<u8>>) -> Option<Answer> {
    let seen = seen.lock().ok()?;
    if !preamble::starts_with_magic(&seen) {
        return None;
    }
    Status::parse(&seen)
        .ok()
        .flatten()
        .map(|(answer, _)| answer)
}

enum StatusProblem {
    Io(std::io::Error),
    /// Not a status of ours: not a cluster node.
    Bad,
}

/// Reads a status, exactly its bytes.
async fn read_status<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Answer, StatusProblem> {
    let mut bytes = vec![0u8; 9];
    stream
        .read_exact(&mut bytes)
        .await
        .map_err(StatusProblem::Io)?;
    let len = usize::from(u16::from_be_bytes([bytes[7], bytes[8]]));
    if Status::parse(&bytes).is_err() || len > preamble::MAX_STATUS_PAYLOAD {
        return Err(StatusProblem::Bad);
    }
    bytes.resize(9 + len, 0);
    stream
        .read_exact(&mut bytes[9..])
        .await
        .map_err(StatusProblem::Io)?;
    match Status::parse(&bytes) {
        Ok(Some((answer, _))) => Ok(answer),
        Ok(None) => Err(StatusProblem::Io(std::io::ErrorKind::UnexpectedEof.into())),
        Err(_) => Err(StatusProblem::Bad),
    }
}
