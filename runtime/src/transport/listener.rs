//! The accept loop: the `listener` child of a node's tree, started right after the
//! `NodeServer` (rest-for-one: it restarts with it). It binds the node's listen address,
//! subscribes the transport to the `NodeServer`'s events, and runs the loop as a task it
//! owns; each admitted connection's handshake is a task of the loop's, aborted with it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use ractor_cluster::{NodeServerMessage, RactorMessage};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use super::guard::GuardedStream;
use super::io::{Io, answer_and_close};
use super::limits::Refusal;
use super::log::peer_text;
use super::preamble::{self, Hello, LinkHello, PreambleError, Status};
use super::tls::describe_accept_error;
use super::{LogKind, Shared, Ticket, Transport};
use crate::ids::{JobId, NodeName};
use crate::link::{MAX_LINKS_PER_JOB, OpenLink, Refused};

/// The registry name of the listener.
pub(crate) const LISTENER_NAME: &str = "bayes.listener";

/// Refused connections answered at once that may linger (reading the peer's last bytes, so
/// that the close does not reset the answer away); past it they are closed without an answer.
const MAX_LINGERING: usize = 64;

/// The longest wait between two accepts after an error.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The listener behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TransportListener;

/// What the listener starts from.
#[derive(Debug, Clone)]
pub(crate) struct ListenerArgs {
    /// The node's transport.
    pub(crate) transport: Transport,
    /// Where admitted connections go.
    pub(crate) node_server: ActorRef<NodeServerMessage>,
    /// The address to bind.
    pub(crate) listen: SocketAddr,
}

/// The listener takes no messages: the loop is its work.
#[derive(RactorMessage)]
pub(crate) enum ListenerMsg {}

/// The accept loop's task.
pub(crate) struct ListenerState {
    accept: Option<JoinHandle<()>>,
}

impl Actor for TransportListener {
    type Msg = ListenerMsg;
    type State = ListenerState;
    type Arguments = ListenerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ListenerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let listener = TcpListener::bind(args.listen)
            .await
            .map_err(|error| format!("cannot listen on {}: {error}", args.listen))?;
        args.transport.watch(&args.node_server)?;
        let accept = tokio::spawn(accept_loop(
            Arc::clone(&args.transport.shared),
            args.node_server,
            listener,
            args.listen,
        ));
        Ok(ListenerState {
            accept: Some(accept),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Awaited, so that the port is free when a restarted listener binds it again.
        if let Some(accept) = state.accept.take() {
            accept.abort();
            let _ = accept.await;
        }
        Ok(())
    }
}

async fn accept_loop(
    shared: Arc<Shared>,
    node_server: ActorRef<NodeServerMessage>,
    listener: TcpListener,
    listen: SocketAddr,
) {
    let mut tasks = JoinSet::new();
    let lingering = Arc::new(AtomicUsize::new(0));
    let mut backoff = Duration::ZERO;
    loop {
        while tasks.try_join_next().is_some() {}
        match listener.accept().await {
            Ok((stream, peer)) => {
                backoff = Duration::ZERO;
                accepted(&shared, &node_server, &mut tasks, &lingering, stream, peer);
            }
            Err(error) => {
                // EMFILE and the like: the connection waits in the backlog and the next accept
                // fails at once; wait, longer each time, rather than spin.
                backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_ACCEPT_BACKOFF);
                shared.log(LogKind::Accept, || {
                    format!(
                        "cannot accept connections on {listen}: {error}; retrying in {backoff:?}"
                    )
                });
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

fn accepted(
    shared: &Arc<Shared>,
    node_server: &ActorRef<NodeServerMessage>,
    tasks: &mut JoinSet<()>,
    lingering: &Arc<AtomicUsize>,
    stream: TcpStream,
    peer: SocketAddr,
) {
    let now = Instant::now();
    let _ = stream.set_nodelay(true);
    let ticket = match Ticket::admit(shared, peer.ip(), now) {
        Ok(ticket) => ticket,
        Err(refusal) => {
            let status = match refusal {
                Refusal::Busy { scope, limit } => {
                    shared.log(LogKind::Refused, || {
                        format!(
                            "refused a connection from {peer}: {limit} unauthenticated connections {} already",
                            match scope {
                                preamble::BusyScope::Node => "to this node",
                                preamble::BusyScope::Address => "from its address",
                            }
                        )
                    });
                    Status::Busy {
                        scope,
                        limit: u32::try_from(limit).unwrap_or(u32::MAX),
                    }
                }
                Refusal::Throttled {
                    retry_after,
                    failures,
                } => {
                    shared.log(LogKind::Refused, || {
                        format!(
                            "refused a connection from {peer}: {failures} failed handshakes from {} lately, refused for {retry_after:?} more",
                            peer.ip()
                        )
                    });
                    Status::Throttled {
                        retry_after,
                        failures,
                    }
                }
            };
            // Answered in plaintext at once; a TLS dialler reads it in place of the node's
            // TLS hello. Past MAX_LINGERING the socket is simply dropped.
            if lingering.fetch_add(1, Ordering::AcqRel) < MAX_LINGERING {
                let lingering = Arc::clone(lingering);
                tasks.spawn(async move {
                    answer_and_close(stream, &status.encode()).await;
                    lingering.fetch_sub(1, Ordering::AcqRel);
                });
            } else {
                lingering.fetch_sub(1, Ordering::AcqRel);
            }
            return;
        }
    };
    let deadline = now + shared.settings.handshake_deadline;
    let shared = Arc::clone(shared);
    let node_server = node_server.clone();
    tasks.spawn(async move {
        match tokio::time::timeout_at(deadline, preamble_of(&shared, stream, peer)).await {
            Err(_) => {
                let penalty = ticket.fail();
                shared.log(LogKind::Handshake, || {
                    format!(
                        "closed the connection from {peer} before authentication: no hello within {:?}{}",
                        shared.settings.handshake_deadline,
                        super::penalty_note(peer.ip(), penalty)
                    )
                });
            }
            Ok(Err(Outcome::Failed)) => {
                ticket.fail();
            }
            Ok(Err(Outcome::Closed)) => {}
            Ok(Ok(Opened::Link { io, job, open })) => {
                ticket.succeed();
                crate::link::serve(io, job, peer).await;
                drop(open);
            }
            Ok(Ok(Opened::Session {
                io,
                name,
                incarnation,
            })) => {
                let connection = shared.register(peer, name, incarnation, Some(ticket));
                let stream = GuardedStream::new(io, connection, deadline);
                let _ = node_server.cast(NodeServerMessage::ConnectionOpenedExternal {
                    stream: Box::new(stream),
                    is_server: true,
                });
            }
        }
    });
}

/// A connection past its preamble.
enum Opened {
    /// A cluster session's: to the `NodeServer`, guarded until it authenticates.
    Session {
        io: Io,
        name: NodeName,
        incarnation: u64,
    },
    /// A job link's, its token accepted, counted among its job's links while it is open.
    Link { io: Io, job: JobId, open: OpenLink },
}

/// How a connection ended before the preamble completed.
enum Outcome {
    /// A failed handshake: it counts against the address.
    Failed,
    /// Closed without blame (the peer left, a version or TLS mismatch, a name in use).
    Closed,
}

/// TLS if the node runs it, then the preamble: the dialler's hello, checked, answered.
async fn preamble_of(
    shared: &Shared,
    stream: TcpStream,
    peer: SocketAddr,
) -> Result<Opened, Outcome> {
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(1) => {}
        _ => return Err(Outcome::Closed),
    }
    let tls_record = first[0] == 0x16;
    let mut io = match (&shared.tls, tls_record) {
        (Some(tls), true) => match tls.acceptor().accept(stream).await {
            Ok(stream) => Io::TlsServer(Box::new(stream)),
            Err(error) => {
                shared.log(LogKind::Handshake, || {
                    format!(
                        "TLS handshake with {peer} failed: {}",
                        describe_accept_error(&error)
                    )
                });
                return Err(Outcome::Failed);
            }
        },
        (None, true) => {
            shared.log(LogKind::Handshake, || {
                format!("a TLS connection from {peer}: this node runs without TLS")
            });
            answer_and_close(stream, &Status::TlsUnsupported.encode()).await;
            return Err(Outcome::Closed);
        }
        (Some(_), false) => {
            let mut stream = stream;
            return match read_opening(&mut stream).await {
                Ok(_) => {
                    shared.log(LogKind::Handshake, || {
                        format!(
                            "a plaintext connection from {peer}: this node requires TLS (--tls-cert, --tls-key, --tls-ca)"
                        )
                    });
                    answer_and_close(stream, &Status::TlsRequired.encode()).await;
                    Err(Outcome::Closed)
                }
                Err(problem) => Err(refuse_hello(shared, stream, peer, problem).await),
            };
        }
        (None, false) => Io::Plain(stream),
    };
    let hello = match read_opening(&mut io).await {
        Ok(Opening::Session(hello)) => hello,
        Ok(Opening::Link(hello)) => return open_link(shared, io, peer, hello).await,
        Err(problem) => return Err(refuse_hello(shared, io, peer, problem).await),
    };
    let name = match wire_name(&hello.name) {
        Some(name) => name,
        None => {
            shared.log(LogKind::Handshake, || {
                format!(
                    "closed the connection from {peer}: its hello names {}, not a node name",
                    peer_text(&hello.name)
                )
            });
            answer_and_close(io, &Status::BadHello.encode()).await;
            return Err(Outcome::Failed);
        }
    };
    if let Some(holder) = shared.name_in_use(&name, hello.incarnation) {
        shared.log(LogKind::Handshake, || {
            let holder = if holder.is_empty() {
                "it is this node's own name".to_owned()
            } else {
                format!("a live node connected from {holder} has it")
            };
            format!("refused a connection from {peer} as {name}: that name is in use ({holder})")
        });
        let status = Status::NameInUse {
            name: name.as_str().as_bytes().to_vec(),
            connected_from: holder.into_bytes(),
        };
        answer_and_close(io, &status.encode()).await;
        return Err(Outcome::Closed);
    }
    answer_ok(shared, &mut io).await?;
    Ok(Opened::Session {
        io,
        name,
        incarnation: hello.incarnation,
    })
}

/// Tells the dialler to go on, naming this node.
async fn answer_ok(shared: &Shared, io: &mut Io) -> Result<(), Outcome> {
    let ok = Status::Ok {
        incarnation: shared.incarnation,
        name: shared.name.as_str().as_bytes().to_vec(),
    };
    let written = async {
        io.write_all(&ok.encode()).await?;
        io.flush().await
    };
    written.await.map_err(|_| Outcome::Closed)
}

/// A link hello: its token checked against the node's links, answered.
async fn open_link(
    shared: &Shared,
    mut io: Io,
    peer: SocketAddr,
    hello: LinkHello,
) -> Result<Opened, Outcome> {
    let job = JobId(hello.job);
    let open = match shared.links.open(job, &hello.token) {
        Ok(open) => open,
        Err(refused) => {
            shared.log(LogKind::Handshake, || match refused {
                Refused::UnknownToken => {
                    format!("refused a job link from {peer}: no link of job {job} with that token")
                }
                Refused::TooManyLinks => format!(
                    "refused a job link from {peer}: job {job} has {MAX_LINKS_PER_JOB} links open"
                ),
            });
            answer_and_close(io, &Status::UnknownLink.encode()).await;
            return Err(Outcome::Failed);
        }
    };
    answer_ok(shared, &mut io).await?;
    Ok(Opened::Link { io, job, open })
}

/// Why a hello could not be read.
enum HelloProblem {
    /// The stream ended or failed first.
    Closed,
    /// The bytes are not a hello of this version.
    Bad(PreambleError),
}

/// What a connection opens with.
enum Opening {
    /// A node's or client's hello: a cluster session follows.
    Session(Hello),
    /// A link hello: a job link follows (`crate::link`).
    Link(LinkHello),
}

/// Reads a hello or a link hello, exactly its bytes (nothing the dialler sends after it).
async fn read_opening<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Opening, HelloProblem> {
    let mut bytes = vec![0u8; 6];
    stream
        .read_exact(&mut bytes)
        .await
        .map_err(|_| HelloProblem::Closed)?;
    if bytes[..4] == preamble::LINK_MAGIC {
        LinkHello::parse(&bytes).map_err(HelloProblem::Bad)?;
        bytes.resize(preamble::LINK_HELLO_BYTES, 0);
        stream
            .read_exact(&mut bytes[6..])
            .await
            .map_err(|_| HelloProblem::Closed)?;
        return match LinkHello::parse(&bytes) {
            Ok(Some(hello)) => Ok(Opening::Link(hello)),
            Ok(None) => Err(HelloProblem::Closed),
            Err(error) => Err(HelloProblem::Bad(error)),
        };
    }
    Hello::parse(&bytes).map_err(HelloProblem::Bad)?;
    bytes.resize(15, 0);
    stream
        .read_exact(&mut bytes[6..])
        .await
        .map_err(|_| HelloProblem::Closed)?;
    let name_len = usize::from(bytes[14]);
    bytes.resize(15 + name_len, 0);
    stream
        .read_exact(&mut bytes[15..])
        .await
        .map_err(|_| HelloProblem::Closed)?;
    match Hello::parse(&bytes) {
        Ok(Some((hello, _))) => Ok(Opening::Session(hello)),
        Ok(None) => Err(HelloProblem::Closed),
        Err(error) => Err(HelloProblem::Bad(error)),
    }
}

/// Answers a hello that did not read, and says whether the connection counts as failed.
async fn refuse_hello<S>(
    shared: &Shared,
    stream: S,
    peer: SocketAddr,
    problem: HelloProblem,
) -> Outcome
where
    S: AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    match problem {
        HelloProblem::Closed => Outcome::Closed,
        HelloProblem::Bad(PreambleError::Version { theirs }) => {
            shared.log(LogKind::Handshake, || {
                format!(
                    "refused a connection from {peer}: it speaks preamble version {theirs}, this node {}",
                    preamble::VERSION
                )
            });
            answer_and_close(stream, &Status::VersionMismatch.encode()).await;
            Outcome::Closed
        }
        HelloProblem::Bad(error) => {
            shared.log(LogKind::Handshake, || {
                format!("closed the connection from {peer}: not a cluster peer ({error})")
            });
            drop(stream);
            Outcome::Failed
        }
    }
}

/// A node name as the preamble and the handshake carry it: printable ASCII, a valid name.
pub(crate) fn wire_name(bytes: &[u8]) -> Option<NodeName> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_graphic) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}
