//! Every connection of a node or client, from the socket to ractor_cluster's authenticated
//! session: the accept loop, the dialler, TLS, the preamble and the guard that bounds what an
//! unauthenticated peer may send.
//!
//! ractor_cluster's `NodeServer` runs without a listener of its own (our patch,
//! `vendor/ractor_cluster/PATCHED.md`); connections reach it only through here:
//!
//! - **Accepting** (`listener.rs`, the `listener` child of the node's tree). The accept loop
//!   backs off on errors (`EMFILE` and the like: exponential, at most a second, one log line a
//!   second) and admits a connection only under the caps on unauthenticated connections (per
//!   node, per source address) and outside its address's penalty (failed handshakes double
//!   it, `limits.rs`); others are closed at once with a plaintext [`preamble::Status`]. An
//!   admitted connection gets a task of its own, so one slow peer never holds the loop: TLS
//!   if configured, the preamble ([`preamble`]: the peer's name, refused if a live process
//!   already has it), then the guarded stream goes to the `NodeServer`.
//! - **Dialling** ([`Transport`], for membership and clients): TCP, TLS, the preamble, then the
//!   guarded stream goes to the `NodeServer` (`client_connect_external`); refusals come back as
//!   [`ConnectError`](crate::ConnectError)s that say which.
//! - **The guard** (`guard.rs`). Until its session authenticates, a connection is read frame by
//!   frame by us: frames over [`PREAUTH_FRAME_BYTES`] close it before anything is allocated,
//!   only handshake messages pass, and the names in them must be the one the preamble
//!   announced, so ractor_cluster only ever logs clean names. The whole phase has a deadline
//!   ([`TransportSettings::handshake_deadline`], at most [`MAX_HANDSHAKE_DEADLINE`]).
//!   Authenticated, the guard passes bytes through and ractor_cluster's own frame limit
//!   (`wire::MAX_FRAME_BYTES`) applies.
//!
//! A guard learns that its session authenticated from the `NodeServer`'s events: each
//! connection's `peer_label` is `"{socket address}#{connection id}"`, which the event carries
//! back as its `peer_addr` (`label_address` gives the address part to `session.rs`).
//!
//! Everything an unauthenticated peer sent that reaches a log line goes through
//! [`peer_text`] (escaped, cut to 64 characters), and those lines are rate-limited.

mod dial;
mod guard;
mod io;
mod limits;
mod listener;
mod log;
pub mod preamble;
mod tls;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServerMessage};
use tokio::time::Instant;

use crate::ids::NodeName;
use crate::link::Links;
pub(crate) use dial::Dialled;
/// The stream of a job link (`crate::link`), plain or TLS.
pub(crate) use io::Io as LinkIo;
use limits::Admission;
pub(crate) use listener::{LISTENER_NAME, ListenerArgs, TransportListener};
use log::{LogLimit, held_back};
pub use log::{MAX_LOGGED_CHARS, peer_text};
pub use tls::{TlsError, TlsIdentity, TlsProblem};

/// Largest frame a peer may send before its session authenticates.
pub const PREAUTH_FRAME_BYTES: u64 = 64 * 1024;

/// Frames a peer may send before its session authenticates (the handshake needs three).
pub const MAX_PREAUTH_FRAMES: u32 = 8;

/// The longest handshake deadline a node accepts.
pub const MAX_HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);

/// Bounds on connections before they authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportSettings {
    /// From accepting a connection (or starting to dial) to its session authenticating:
    /// TLS, preamble and cookie handshake. At most [`MAX_HANDSHAKE_DEADLINE`] (a longer one
    /// is cut to it).
    pub handshake_deadline: Duration,
    /// Unauthenticated connections a node holds at once; more are refused as busy.
    pub max_unauthenticated: usize,
    /// Unauthenticated connections a node holds at once from one source address (an IPv6
    /// /64 counts as one); more are refused as busy.
    pub max_unauthenticated_per_address: usize,
    /// Failed handshakes from one address that cost nothing.
    pub penalty_grace: u32,
    /// The penalty after the first failure past the grace: connections from the address are
    /// refused that long. It doubles with each further failure; a success lifts it.
    pub penalty_initial: Duration,
    /// The longest penalty.
    pub penalty_max: Duration,
}

impl Default for TransportSettings {
    fn default() -> Self {
        Self {
            handshake_deadline: MAX_HANDSHAKE_DEADLINE,
            max_unauthenticated: 256,
            max_unauthenticated_per_address: 16,
            penalty_grace: 3,
            penalty_initial: Duration::from_millis(100),
            penalty_max: Duration::from_secs(30),
        }
    }
}

/// How one process (a node or a client) connects: its name, its TLS identity, its limits,
/// and the connections it holds. Cheap to clone; a node's tree shares one.
#[derive(Clone)]
pub struct Transport {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("name", &self.shared.name)
            .field("tls", &self.shared.tls.is_some())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Shared {
    name: NodeName,
    incarnation: u64,
    settings: TransportSettings,
    tls: Option<TlsIdentity>,
    next_connection: AtomicU64,
    /// The tokens of this node's job links.
    links: Links,
    // A short critical section shared by the accept loop, the handshake tasks, the guards'
    // drops and the `NodeServer`'s synchronous event callback: none of them can wait for an
    // actor's answer there.
    state: Mutex<State>,
}

struct State {
    connections: HashMap<u64, Arc<Connection>>,
    admission: Admission,
    logs: Logs,
}

/// Rate limits of the log lines about unauthenticated peers, per kind.
struct Logs {
    accept: LogLimit,
    refused: LogLimit,
    handshake: LogLimit,
}

/// A kind of log line about unauthenticated peers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LogKind {
    /// The accept loop's errors: one a second.
    Accept,
    /// Connections closed at once (busy, throttled): one a second.
    Refused,
    /// Handshakes that failed: a few a second.
    Handshake,
}

impl Transport {
    /// A transport for the process named `name`.
    pub fn new(name: NodeName, settings: TransportSettings, tls: Option<TlsIdentity>) -> Self {
        let settings = TransportSettings {
            handshake_deadline: settings.handshake_deadline.min(MAX_HANDSHAKE_DEADLINE),
            ..settings
        };
        Self {
            shared: Arc::new(Shared {
                name,
                incarnation: crate::ids::fresh_u64(),
                tls,
                next_connection: AtomicU64::new(1),
                links: Links::default(),
                state: Mutex::new(State {
                    connections: HashMap::new(),
                    admission: Admission::new(settings.clone()),
                    logs: Logs {
                        accept: LogLimit::new(1),
                        refused: LogLimit::new(1),
                        handshake: LogLimit::new(5),
                    },
                }),
                settings,
            }),
        }
    }

    /// Whether connections run TLS.
    pub fn tls(&self) -> bool {
        self.shared.tls.is_some()
    }

    /// The tokens of this node's job links (the coordinator issues them, the listener checks
    /// them).
    pub fn links(&self) -> Links {
        self.shared.links.clone()
    }

    /// Dials a job link to the node at `address` (`crate::link::JobLink::open`).
    pub(crate) async fn dial_link(
        &self,
        address: SocketAddr,
        hello: &preamble::LinkHello,
        deadline: Instant,
    ) -> Result<LinkIo, crate::ConnectError> {
        dial::link(&self.shared, address, hello, deadline).await
    }

    /// Unauthenticated inbound connections held now.
    pub fn unauthenticated(&self) -> usize {
        self.shared.lock().admission.unauthenticated()
    }

    /// Subscribes to `node_server`'s session events, so that guards learn when their session
    /// authenticated. Call it on every start of the `NodeServer` (a new one has no
    /// subscriptions).
    pub(crate) fn watch(
        &self,
        node_server: &ActorRef<NodeServerMessage>,
    ) -> Result<(), ractor::MessagingErr<NodeServerMessage>> {
        node_server.cast(NodeServerMessage::SubscribeToEvents {
            id: "bayes.transport".to_owned(),
            subscription: Box::new(AuthWatch(Arc::downgrade(&self.shared))),
        })
    }

    /// Dials the node at `address` and hands the connection to `node_server` (see
    /// [`Dialled`]); refusals before the cookie handshake come back as errors that say which.
    /// A busy node is tried again until `deadline`.
    pub(crate) async fn dial(
        &self,
        node_server: &ActorRef<NodeServerMessage>,
        address: SocketAddr,
        deadline: Instant,
    ) -> Result<Dialled, crate::ConnectError> {
        dial::dial(&self.shared, node_server, address, deadline).await
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain counters: still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Logs `line` at `warn` if the kind's rate allows it.
    pub(crate) fn log(&self, kind: LogKind, line: impl FnOnce() -> String) {
        let now = Instant::now();
        let allowed = {
            let mut state = self.lock();
            let limit = match kind {
                LogKind::Accept => &mut state.logs.accept,
                LogKind::Refused => &mut state.logs.refused,
                LogKind::Handshake => &mut state.logs.handshake,
            };
            limit.allow(now)
        };
        if let Some(suppressed) = allowed {
            tracing::warn!("{}{}", line(), held_back(suppressed));
        }
    }

    /// Registers a connection about to be handed to the `NodeServer`.
    fn register(
        self: &Arc<Self>,
        peer: SocketAddr,
        peer_name: NodeName,
        peer_incarnation: u64,
        ticket: Option<Ticket>,
    ) -> Arc<Connection> {
        let connection = Arc::new(Connection {
            id: self.next_connection.fetch_add(1, Ordering::Relaxed),
            peer,
            inbound: ticket.is_some(),
            peer_name,
            peer_incarnation,
            authenticated: AtomicBool::new(false),
            progress: Mutex::new(Progress {
                ticket,
                ..Progress::default()
            }),
            shared: Arc::downgrade(self),
        });
        self.lock()
            .connections
            .insert(connection.id, Arc::clone(&connection));
        connection
    }

    /// Who else holds `name`, if a live process other than the one with `incarnation` does:
    /// `Some("")` for this node itself, else where that process is connected from.
    fn name_in_use(&self, name: &NodeName, incarnation: u64) -> Option<String> {
        if *name == self.name {
            return (incarnation != self.incarnation).then(String::new);
        }
        self.lock()
            .connections
            .values()
            .find(|c| {
                c.is_authenticated() && c.peer_name == *name && c.peer_incarnation != incarnation
            })
            .map(|c| c.peer.to_string())
    }

    fn authenticated(&self, id: u64) {
        let connection = self.lock().connections.get(&id).cloned();
        if let Some(connection) = connection {
            connection.mark_authenticated();
        }
    }
}

/// An admitted inbound connection, counted as unauthenticated until dropped (or
/// [`Ticket::succeed`]ed); [`Ticket::fail`] also counts a failed handshake for its address.
pub(crate) struct Ticket {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl Ticket {
    /// Counts a connection from `ip`, or says why it is refused.
    fn admit(shared: &Arc<Shared>, ip: IpAddr, now: Instant) -> Result<Self, limits::Refusal> {
        shared.lock().admission.admit(ip, now)?;
        Ok(Self {
            shared: Arc::clone(shared),
            ip,
        })
    }

    /// The session authenticated: the address's penalty is lifted.
    fn succeed(self) {
        let mut state = self.shared.lock();
        state.admission.succeeded(self.ip);
    }

    /// The handshake failed: the address's penalty grows. Returns the penalty now in force.
    fn fail(self) -> Duration {
        let mut state = self.shared.lock();
        let penalty = state.admission.failed(self.ip, Instant::now());
        drop(state);
        penalty
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.shared.lock().admission.release(self.ip);
    }
}

/// One connection handed to the `NodeServer`, as its guard and the event callback share it.
pub(crate) struct Connection {
    id: u64,
    peer: SocketAddr,
    inbound: bool,
    /// The name the preamble announced (inbound: the dialler's; outbound: the node's).
    peer_name: NodeName,
    peer_incarnation: u64,
    authenticated: AtomicBool,
    progress: Mutex<Progress>,
    shared: Weak<Shared>,
}

#[derive(Default)]
struct Progress {
    /// Woken when the session authenticates (a guard holding a large frame waits for it).
    waker: Option<Waker>,
    /// Inbound: counted as unauthenticated until released.
    ticket: Option<Ticket>,
    /// The peer's last handshake message went by (inbound: its challenge reply; outbound:
    /// the node's acknowledgement).
    final_seen: bool,
    /// Outbound: the node's cookie challenge arrived (so a close after it means the cookie
    /// was refused).
    challenge_seen: bool,
    /// Why the guard closed the connection.
    failure: Option<String>,
    closed: bool,
}

impl Connection {
    /// The `peer_label` the `NodeServer` reports back in its events.
    fn label(&self) -> String {
        format!("{}#{}", self.peer, self.id)
    }

    fn progress(&self) -> MutexGuard<'_, Progress> {
        self.progress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }

    fn mark_authenticated(&self) {
        self.authenticated.store(true, Ordering::Release);
        let (waker, ticket) = {
            let mut progress = self.progress();
            (progress.waker.take(), progress.ticket.take())
        };
        if let Some(ticket) = ticket {
            ticket.succeed();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Registers the task to wake when the session authenticates.
    fn wait_for_authentication(&self, waker: &Waker) {
        self.progress().waker = Some(waker.clone());
    }

    fn final_seen(&self) -> bool {
        self.progress().final_seen
    }

    fn saw_final(&self) {
        self.progress().final_seen = true;
    }

    fn saw_challenge(&self) {
        self.progress().challenge_seen = true;
    }

    fn fail(&self, reason: String) {
        self.progress().failure.get_or_insert(reason);
    }

    /// The guard is gone: the connection is closed. Releases its count, and counts a failed
    /// handshake for the address if it failed before authenticating.
    fn closed(&self) {
        let (ticket, failure, final_seen) = {
            let mut progress = self.progress();
            if progress.closed {
                return;
            }
            progress.closed = true;
            progress.waker = None;
            (
                progress.ticket.take(),
                progress.failure.clone(),
                progress.final_seen,
            )
        };
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        shared.lock().connections.remove(&self.id);
        if self.is_authenticated() {
            return;
        }
        let who = if self.inbound {
            format!("the connection from {}", self.peer)
        } else {
            format!("the connection to {}", self.peer)
        };
        match (ticket, failure) {
            (Some(ticket), Some(reason)) => {
                let penalty = ticket.fail();
                shared.log(LogKind::Handshake, || {
                    format!(
                        "closed {who} before authentication: {reason}{}",
                        penalty_note(self.peer.ip(), penalty)
                    )
                });
            }
            // The cookie challenge was answered, then the session closed: a refused cookie.
            (Some(ticket), None) if final_seen => {
                let penalty = ticket.fail();
                if !penalty.is_zero() {
                    tracing::debug!(
                        "failed handshake from {}{}",
                        self.peer,
                        penalty_note(self.peer.ip(), penalty)
                    );
                }
            }
            (Some(_), None) => {}
            (None, Some(reason)) => shared.log(LogKind::Handshake, || {
                format!("closed {who} before authentication: {reason}")
            }),
            (None, None) => {}
        }
    }
}

/// `"; connections from IP refused for T"`, or nothing without a penalty.
fn penalty_note(ip: IpAddr, penalty: Duration) -> String {
    if penalty.is_zero() {
        String::new()
    } else {
        format!("; connections from {ip} refused for {penalty:?}")
    }
}

/// The guard's check of one frame an unauthenticated peer sent (`inbound`: to this node; else
/// to a dialler), the peer's preamble having announced `peer`: `Err` says why the connection
/// would end. For the fuzz target (`fuzz/`), which reaches no private item.
#[doc(hidden)]
pub fn inspect_preauth_frame(frame: &[u8], inbound: bool, peer: &NodeName) -> Result<(), String> {
    let connection = Connection {
        id: 0,
        peer: SocketAddr::from(([127, 0, 0, 1], 0)),
        inbound,
        peer_name: peer.clone(),
        peer_incarnation: 0,
        authenticated: AtomicBool::new(false),
        progress: Mutex::new(Progress::default()),
        shared: Weak::new(),
    };
    guard::inspect(frame, &connection)
}

/// The socket address in a connection label (`"{address}#{id}"`), or a label that is a bare
/// address.
pub(crate) fn label_address(label: &str) -> Option<SocketAddr> {
    let address = label.rsplit_once('#').map_or(label, |(address, _)| address);
    address.parse().ok()
}

fn label_id(label: &str) -> Option<u64> {
    label.rsplit_once('#')?.1.parse().ok()
}

/// The `NodeServer` subscription that tells guards their session authenticated.
struct AuthWatch(Weak<Shared>);

impl NodeEventSubscription for AuthWatch {
    fn node_session_opened(&self, _: NodeServerSessionInformation) {}

    fn node_session_disconnected(&self, _: NodeServerSessionInformation) {}

    fn node_session_authenticated(&self, info: NodeServerSessionInformation) {
        if let (Some(shared), Some(id)) = (self.0.upgrade(), label_id(&info.peer_addr)) {
            shared.authenticated(id);
        }
    }
}

#[cfg(test)]
mod tests;
