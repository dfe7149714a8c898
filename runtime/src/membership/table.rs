//! The peer table: membership's state machine as plain code. Time is passed in and effects
//! are returned, so every transition is tested without actors, sockets or clocks.
//!
//! A peer is keyed by its [`NodeName`]; addresses we dial before we know who answers (seeds,
//! gossip, reconnects) are [`Dial`]s keyed by address. A peer's link goes
//! `Connecting` (session ready, first heartbeat sent) → `Up` (it answered) → `Down` (session
//! lost, or `max_missed_heartbeats` heartbeats unanswered in a row) → a reconnect dial with
//! exponential backoff → `Connecting` again, until it has been down for `forget_after`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::time::Instant;

use super::MembershipSettings;
use super::info::{
    DownReason, MemberState, MemberStatus, MembershipEvent, NodeInfo, NodeResources,
};
use crate::ids::{NodeName, SessionId};
use crate::session::ConnectError;

/// What the membership actor must do after a transition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Open a TCP connection to this address (`client_connect`, with a timeout).
    Dial(SocketAddr),
    /// Send heartbeat `seq` to `peer`'s membership endpoint over `session`.
    Heartbeat {
        peer: NodeName,
        session: SessionId,
        seq: u64,
    },
    /// Close this session (stop its `NodeSession`).
    Disconnect {
        session: SessionId,
        reason: &'static str,
    },
    /// Publish to subscribers and log.
    Event(MembershipEvent),
    /// A dial to `address` ended: answer whoever asked to join it.
    JoinOutcome {
        address: SocketAddr,
        result: Result<NodeInfo, ConnectError>,
    },
}

#[derive(Debug)]
pub(crate) struct PeerTable {
    me: NodeInfo,
    settings: MembershipSettings,
    peers: BTreeMap<NodeName, Peer>,
    dials: BTreeMap<SocketAddr, Dial>,
    sessions: BTreeMap<SessionId, Session>,
    next_seq: u64,
}

#[derive(Debug)]
struct Session {
    outbound: bool,
    peer_addr: Option<SocketAddr>,
    peer: Option<NodeName>,
    advertised: Option<SocketAddr>,
    authenticated: bool,
    ready: bool,
}

#[derive(Debug)]
struct Peer {
    /// Where it says it listens; where we redial it.
    address: SocketAddr,
    /// The address we dialled to reach it, when we did (it may differ from `address`).
    dialed: Option<SocketAddr>,
    resources: Option<NodeResources>,
    link: Link,
    was_up: bool,
    /// It said it drains (in its last heartbeat or answer).
    draining: bool,
}

#[derive(Debug)]
enum Link {
    Connecting {
        session: SessionId,
        heartbeat: Heartbeat,
    },
    Up {
        session: SessionId,
        heartbeat: Heartbeat,
    },
    Down {
        since: Instant,
    },
}

#[derive(Debug, Default)]
struct Heartbeat {
    in_flight: Option<u64>,
    misses: u32,
}

#[derive(Debug)]
struct Dial {
    attempt: u32,
    phase: Phase,
    /// Seeds and reconnects are retried with backoff; a gossiped address or a one-off join
    /// gets one attempt (a member others still gossip is tried again at their next answer).
    persistent: bool,
}

#[derive(Debug)]
enum Phase {
    Waiting { at: Instant },
    Connecting { since: Instant },
    Handshaking { session: SessionId, since: Instant },
}

impl Link {
    fn session(&self) -> Option<SessionId> {
        match self {
            Link::Connecting { session, .. } | Link::Up { session, .. } => Some(*session),
            Link::Down { .. } => None,
        }
    }
}

impl PeerTable {
    pub(crate) fn new(me: NodeInfo, settings: MembershipSettings) -> Self {
        Self {
            me,
            settings,
            peers: BTreeMap::new(),
            dials: BTreeMap::new(),
            sessions: BTreeMap::new(),
            next_seq: 0,
        }
    }

    pub(crate) fn me(&self) -> &NodeInfo {
        &self.me
    }

    pub(crate) fn set_running_jobs(&mut self, running_jobs: u32) {
        self.me.resources.running_jobs = running_jobs;
    }

    pub(crate) fn set_gpu_load(&mut self, load: &[(usize, u32)]) {
        self.me.resources.set_gpu_load(load);
    }

    /// This node drains: its heartbeats and answers say so from now on.
    pub(crate) fn set_draining(&mut self) {
        self.me.draining = true;
    }

    /// Every node this node knows, itself first, then by name.
    pub(crate) fn members(&self) -> Vec<MemberStatus> {
        let me = MemberStatus {
            name: self.me.name.clone(),
            address: self.me.address,
            state: if self.me.draining {
                MemberState::Draining
            } else {
                MemberState::Local
            },
            resources: Some(self.me.resources.clone()),
        };
        let peers = self.peers.iter().map(|(name, peer)| MemberStatus {
            name: name.clone(),
            address: peer.address,
            state: match peer.link {
                Link::Connecting { .. } => MemberState::Connecting,
                Link::Up { .. } if peer.draining => MemberState::Draining,
                Link::Up { .. } => MemberState::Up,
                Link::Down { .. } => MemberState::Down,
            },
            resources: peer.resources.clone(),
        });
        std::iter::once(me).chain(peers).collect()
    }

    /// The peers that answer heartbeats, as gossip carries them.
    pub(crate) fn up_members(&self) -> Vec<(NodeName, SocketAddr)> {
        self.peers
            .iter()
            .filter(|(_, peer)| matches!(peer.link, Link::Up { .. }))
            .map(|(name, peer)| (name.clone(), peer.address))
            .collect()
    }

    /// The peers that are up and drain.
    pub(crate) fn draining_nodes(&self) -> Vec<NodeName> {
        self.peers
            .iter()
            .filter(|(_, peer)| peer.draining && matches!(peer.link, Link::Up { .. }))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The session of a connected peer.
    pub(crate) fn session_of(&self, name: &NodeName) -> Option<SessionId> {
        self.peers.get(name).and_then(|peer| peer.link.session())
    }

    /// The peers that are up, described as in a `NodeUp` event.
    pub(crate) fn up_nodes(&self) -> Vec<NodeInfo> {
        self.peers
            .iter()
            .filter(|(_, peer)| matches!(peer.link, Link::Up { .. }))
            .map(|(name, peer)| self.info(name, peer))
            .collect()
    }

    /// The up member at `address`, if any.
    pub(crate) fn up_at(&self, address: SocketAddr) -> Option<NodeInfo> {
        if address == self.me.address {
            return Some(self.me.clone());
        }
        self.peers
            .iter()
            .find(|(_, peer)| {
                matches!(peer.link, Link::Up { .. })
                    && (peer.address == address || peer.dialed == Some(address))
            })
            .map(|(name, peer)| self.info(name, peer))
    }

    fn info(&self, name: &NodeName, peer: &Peer) -> NodeInfo {
        NodeInfo {
            name: name.clone(),
            address: peer.address,
            resources: peer.resources.clone().unwrap_or_default(),
            draining: peer.draining,
        }
    }

    /// Connect to `address` now: any backoff is reset. A `persistent` join (a seed) is
    /// retried until it succeeds; otherwise the first outcome ends it.
    pub(crate) fn join(
        &mut self,
        address: SocketAddr,
        persistent: bool,
        now: Instant,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        if let Some(node) = self.up_at(address) {
            out.push(Effect::JoinOutcome {
                address,
                result: Ok(node),
            });
            return out;
        }
        let dial = self.dials.entry(address).or_insert(Dial {
            attempt: 0,
            phase: Phase::Waiting { at: now },
            persistent,
        });
        dial.persistent |= persistent;
        if let Phase::Waiting { at } = &mut dial.phase {
            dial.attempt = 0;
            *at = now;
        }
        self.start_due_dials(now, &mut out);
        out
    }

    /// A dial failed before its session opened (no connection, or the node refused it before
    /// the cookie handshake: `error` says which).
    pub(crate) fn dial_failed(
        &mut self,
        address: SocketAddr,
        error: ConnectError,
        now: Instant,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        if matches!(
            self.dials.get(&address),
            Some(Dial {
                phase: Phase::Connecting { .. },
                ..
            })
        ) {
            self.retry_later(address, error, now, &mut out);
        }
        out
    }

    pub(crate) fn session_opened(
        &mut self,
        session: SessionId,
        outbound: bool,
        peer_addr: Option<SocketAddr>,
        now: Instant,
    ) {
        self.sessions.insert(
            session,
            Session {
                outbound,
                peer_addr,
                peer: None,
                advertised: None,
                authenticated: false,
                ready: false,
            },
        );
        if let (true, Some(address)) = (outbound, peer_addr)
            && let Some(dial) = self.dials.get_mut(&address)
            && matches!(dial.phase, Phase::Connecting { .. })
        {
            dial.phase = Phase::Handshaking {
                session,
                since: now,
            };
        }
    }

    pub(crate) fn session_authenticated(&mut self, session: SessionId, peer: Option<NodeName>) {
        if let Some(entry) = self.sessions.get_mut(&session) {
            entry.authenticated = true;
            entry.peer = peer;
        }
    }

    /// A session is ready; `has_endpoint` says whether the peer runs a membership endpoint
    /// (cluster nodes do, `cluster-cli join`/`status` clients do not).
    pub(crate) fn session_ready(
        &mut self,
        session: SessionId,
        peer: Option<NodeName>,
        advertised: Option<SocketAddr>,
        has_endpoint: bool,
        now: Instant,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        let entry = self.sessions.entry(session).or_insert(Session {
            outbound: false,
            peer_addr: None,
            peer: None,
            advertised: None,
            authenticated: true,
            ready: false,
        });
        entry.authenticated = true;
        entry.ready = true;
        entry.peer = peer.clone().or(entry.peer.take());
        entry.advertised = advertised.or(entry.advertised);
        let dialed = entry.outbound.then_some(entry.peer_addr).flatten();
        let address = entry.advertised.or(dialed).or(entry.peer_addr);
        if let Some(dialed) = dialed {
            self.dials.remove(&dialed);
        }
        let Some(name) = entry.peer.clone() else {
            return out;
        };
        if name == self.me.name {
            out.push(Effect::Disconnect {
                session,
                reason: "connected to itself",
            });
            return out;
        }
        if !has_endpoint {
            if let Some(address) = dialed {
                out.push(Effect::JoinOutcome {
                    address,
                    result: Err(ConnectError::NotAClusterNode { address }),
                });
            }
            return out;
        }
        let Some(address) = address else {
            return out;
        };
        self.adopt(name, session, address, dialed, now, &mut out);
        out
    }

    /// Makes `session` the link to `name` and sends it a heartbeat.
    fn adopt(
        &mut self,
        name: NodeName,
        session: SessionId,
        address: SocketAddr,
        dialed: Option<SocketAddr>,
        now: Instant,
        out: &mut Vec<Effect>,
    ) {
        let seq = self.next_seq();
        let peer = self.peers.entry(name.clone()).or_insert(Peer {
            address,
            dialed,
            resources: None,
            link: Link::Down { since: now },
            was_up: false,
            draining: false,
        });
        peer.dialed = dialed.or(peer.dialed);
        match &mut peer.link {
            // ractor_cluster elected a new session for a peer that is up: keep it up.
            Link::Up {
                session: current, ..
            } => *current = session,
            link => {
                *link = Link::Connecting {
                    session,
                    heartbeat: Heartbeat {
                        in_flight: Some(seq),
                        misses: 0,
                    },
                };
                out.push(Effect::Heartbeat {
                    peer: name,
                    session,
                    seq,
                });
            }
        }
        let address = peer.address;
        self.dials.remove(&address);
    }

    pub(crate) fn session_disconnected(&mut self, session: SessionId, now: Instant) -> Vec<Effect> {
        let mut out = Vec::new();
        let closed = self.sessions.remove(&session);
        let authenticated = closed.as_ref().is_some_and(|entry| entry.authenticated);
        if let Some(Session {
            outbound: false,
            authenticated: false,
            peer_addr,
            ..
        }) = &closed
        {
            let from = peer_addr.map_or_else(|| "an unknown address".to_owned(), |a| a.to_string());
            tracing::warn!(
                "a connection from {from} closed before authenticating (cookie mismatch?)"
            );
        }
        let handshaking = self
            .dials
            .iter()
            .find_map(|(address, dial)| match dial.phase {
                Phase::Handshaking { session: s, .. } if s == session => Some(*address),
                _ => None,
            });
        if let Some(address) = handshaking {
            let error = if authenticated {
                ConnectError::Unreachable {
                    address,
                    reason: "the connection closed right after authentication".to_owned(),
                }
            } else {
                ConnectError::AuthenticationFailed { address }
            };
            self.retry_later(address, error, now, &mut out);
        }
        let peer = self
            .peers
            .iter()
            .find(|(_, peer)| peer.link.session() == Some(session))
            .map(|(name, _)| name.clone());
        if let Some(name) = peer {
            self.go_down(&name, DownReason::ConnectionLost, now, &mut out);
        }
        out
    }

    /// The answer to heartbeat `seq`: the peer's description and the members it sees up, or
    /// why there is none.
    pub(crate) fn heartbeat_answered(
        &mut self,
        name: &NodeName,
        session: SessionId,
        seq: u64,
        answer: Result<(NodeInfo, Vec<(NodeName, SocketAddr)>), String>,
        now: Instant,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        let max_missed = self.settings.max_missed_heartbeats;
        let Some(peer) = self.peers.get_mut(name) else {
            return out;
        };
        let (Link::Connecting {
            session: s,
            heartbeat,
        }
        | Link::Up {
            session: s,
            heartbeat,
        }) = &mut peer.link
        else {
            return out;
        };
        if *s != session || heartbeat.in_flight != Some(seq) {
            return out;
        }
        heartbeat.in_flight = None;
        let (node, members) = match answer {
            Ok((node, members)) if &node.name == name => (node, members),
            Ok(_) | Err(_) => {
                heartbeat.misses += 1;
                let missed = heartbeat.misses;
                if missed >= max_missed {
                    self.heartbeat_timeout(name, session, missed, now, &mut out);
                }
                return out;
            }
        };
        heartbeat.misses = 0;
        peer.address = node.address;
        peer.resources = Some(node.resources.clone());
        let starts_draining = node.draining && !peer.draining;
        peer.draining = node.draining;
        if let Link::Connecting { heartbeat, .. } = &mut peer.link {
            peer.link = Link::Up {
                session,
                heartbeat: std::mem::take(heartbeat),
            };
            out.push(Effect::Event(MembershipEvent::NodeUp {
                node: node.clone(),
                reconnected: peer.was_up,
            }));
            peer.was_up = true;
            let dialed = peer.dialed.filter(|dialed| *dialed != peer.address);
            for address in std::iter::once(peer.address).chain(dialed) {
                out.push(Effect::JoinOutcome {
                    address,
                    result: Ok(node.clone()),
                });
            }
        }
        if starts_draining {
            out.push(Effect::Event(MembershipEvent::NodeDraining {
                node: name.clone(),
            }));
        }
        self.learn(&members, now, &mut out);
        out
    }

    /// A heartbeat from `node`, reached through `session`: learn what it gossips, and adopt
    /// its session if we did not know it runs a membership endpoint.
    pub(crate) fn heartbeat_received(
        &mut self,
        node: &NodeInfo,
        members: &[(NodeName, SocketAddr)],
        now: Instant,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        match self.peers.get_mut(&node.name) {
            Some(peer) if matches!(peer.link, Link::Up { .. }) => {
                peer.resources = Some(node.resources.clone());
                if node.draining && !peer.draining {
                    out.push(Effect::Event(MembershipEvent::NodeDraining {
                        node: node.name.clone(),
                    }));
                }
                peer.draining = node.draining;
            }
            Some(peer) if matches!(peer.link, Link::Connecting { .. }) => {}
            _ => {
                let session = self.sessions.iter().find_map(|(id, s)| {
                    (s.ready && s.peer.as_ref() == Some(&node.name)).then_some(*id)
                });
                match session {
                    Some(session) => {
                        let dialed = self.sessions[&session]
                            .outbound
                            .then_some(self.sessions[&session].peer_addr)
                            .flatten();
                        self.adopt(
                            node.name.clone(),
                            session,
                            node.address,
                            dialed,
                            now,
                            &mut out,
                        );
                    }
                    None => self.learn(&[(node.name.clone(), node.address)], now, &mut out),
                }
            }
        }
        self.learn(members, now, &mut out);
        out
    }

    /// `name` announced that it is shutting down: forget it, do not reconnect.
    pub(crate) fn left(&mut self, name: &NodeName) -> Vec<Effect> {
        let mut out = Vec::new();
        if let Some(peer) = self.peers.remove(name) {
            self.dials.remove(&peer.address);
            if matches!(peer.link, Link::Up { .. }) {
                out.push(Effect::Event(MembershipEvent::NodeDown {
                    node: name.clone(),
                    reason: DownReason::Left,
                }));
            }
        }
        out
    }

    /// Periodic work, every heartbeat interval: heartbeats and their misses, due dials,
    /// handshake deadlines, forgetting long-dead peers.
    pub(crate) fn tick(&mut self, now: Instant) -> Vec<Effect> {
        let mut out = Vec::new();
        let forget_after = self.settings.forget_after;
        let forgotten: Vec<(NodeName, SocketAddr)> = self
            .peers
            .iter()
            .filter(|(_, peer)| {
                matches!(peer.link, Link::Down { since } if now.duration_since(since) >= forget_after)
            })
            .map(|(name, peer)| (name.clone(), peer.address))
            .collect();
        for (name, address) in forgotten {
            tracing::info!("forgetting node {name}: down for {forget_after:?}");
            self.peers.remove(&name);
            self.dials.remove(&address);
        }
        let names: Vec<NodeName> = self.peers.keys().cloned().collect();
        for name in names {
            self.tick_peer(&name, now, &mut out);
        }
        self.check_handshakes(now, &mut out);
        self.start_due_dials(now, &mut out);
        out
    }

    fn tick_peer(&mut self, name: &NodeName, now: Instant, out: &mut Vec<Effect>) {
        let seq = self.next_seq();
        let max_missed = self.settings.max_missed_heartbeats;
        let Some(peer) = self.peers.get_mut(name) else {
            return;
        };
        let (Link::Connecting { session, heartbeat } | Link::Up { session, heartbeat }) =
            &mut peer.link
        else {
            return;
        };
        let session = *session;
        if heartbeat.in_flight.is_none() {
            heartbeat.in_flight = Some(seq);
            out.push(Effect::Heartbeat {
                peer: name.clone(),
                session,
                seq,
            });
            return;
        }
        heartbeat.misses += 1;
        let missed = heartbeat.misses;
        if missed >= max_missed {
            self.heartbeat_timeout(name, session, missed, now, out);
        }
    }

    fn heartbeat_timeout(
        &mut self,
        name: &NodeName,
        session: SessionId,
        missed: u32,
        now: Instant,
        out: &mut Vec<Effect>,
    ) {
        out.push(Effect::Disconnect {
            session,
            reason: "heartbeat timeout",
        });
        let after = self.settings.heartbeat_interval * missed;
        self.go_down(
            name,
            DownReason::HeartbeatTimeout { missed, after },
            now,
            out,
        );
    }

    /// Marks `name` down, publishes it if it was up, and schedules a reconnect.
    fn go_down(
        &mut self,
        name: &NodeName,
        reason: DownReason,
        now: Instant,
        out: &mut Vec<Effect>,
    ) {
        let Some(peer) = self.peers.get_mut(name) else {
            return;
        };
        let was_up = matches!(peer.link, Link::Up { .. });
        peer.link = Link::Down { since: now };
        // Whoever answers at its address next says for itself whether it drains.
        peer.draining = false;
        let address = peer.address;
        if was_up {
            out.push(Effect::Event(MembershipEvent::NodeDown {
                node: name.clone(),
                reason,
            }));
        }
        let first_wait = self.settings.reconnect_backoff.delay(0);
        self.dials.entry(address).or_insert(Dial {
            attempt: 1,
            phase: Phase::Waiting {
                at: now + first_wait,
            },
            persistent: true,
        });
    }

    /// Adds a dial for every gossiped member we neither know nor dial.
    fn learn(&mut self, members: &[(NodeName, SocketAddr)], now: Instant, out: &mut Vec<Effect>) {
        let mut added = false;
        for (name, address) in members {
            if *name == self.me.name
                || *address == self.me.address
                || self.peers.contains_key(name)
                || self.dials.contains_key(address)
            {
                continue;
            }
            tracing::debug!(node = %name, "learned of node {name} at {address}");
            self.dials.insert(
                *address,
                Dial {
                    attempt: 0,
                    phase: Phase::Waiting { at: now },
                    persistent: false,
                },
            );
            added = true;
        }
        if added {
            self.start_due_dials(now, out);
        }
    }

    fn start_due_dials(&mut self, now: Instant, out: &mut Vec<Effect>) {
        let connected: Vec<SocketAddr> = self
            .peers
            .values()
            .filter(|peer| peer.link.session().is_some())
            .flat_map(|peer| std::iter::once(peer.address).chain(peer.dialed))
            .collect();
        self.dials.retain(|address, _| !connected.contains(address));
        for (address, dial) in &mut self.dials {
            if matches!(dial.phase, Phase::Waiting { at } if at <= now) {
                dial.phase = Phase::Connecting { since: now };
                out.push(Effect::Dial(*address));
            }
        }
    }

    fn check_handshakes(&mut self, now: Instant, out: &mut Vec<Effect>) {
        let limit = self.settings.handshake_timeout;
        let connect_limit = self.settings.connect_timeout + limit;
        let expired: Vec<(SocketAddr, Option<SessionId>, std::time::Duration)> = self
            .dials
            .iter()
            .filter_map(|(address, dial)| match dial.phase {
                Phase::Handshaking { session, since } if now.duration_since(since) >= limit => {
                    Some((*address, Some(session), now.duration_since(since)))
                }
                // The connect task answers within `connect_timeout`; this is a safety net in
                // case its session never announced itself.
                Phase::Connecting { since } if now.duration_since(since) >= connect_limit => {
                    Some((*address, None, now.duration_since(since)))
                }
                _ => None,
            })
            .collect();
        for (address, session, waited) in expired {
            if let Some(session) = session {
                out.push(Effect::Disconnect {
                    session,
                    reason: "handshake timeout",
                });
            }
            self.retry_later(address, ConnectError::Timeout { address, waited }, now, out);
        }
    }

    /// A dial failed: report it, then wait before the next attempt or give up.
    fn retry_later(
        &mut self,
        address: SocketAddr,
        error: ConnectError,
        now: Instant,
        out: &mut Vec<Effect>,
    ) {
        let Some(dial) = self.dials.get_mut(&address) else {
            return;
        };
        if dial.persistent {
            let wait = self.settings.reconnect_backoff.delay(dial.attempt);
            if dial.attempt == 0 {
                tracing::warn!("cannot join {address}: {error}; retrying in {wait:?}");
            } else {
                tracing::debug!("cannot reach {address}: {error}; retrying in {wait:?}");
            }
            dial.attempt = dial.attempt.saturating_add(1);
            dial.phase = Phase::Waiting { at: now + wait };
        } else {
            tracing::debug!("cannot reach {address}: {error}");
            self.dials.remove(&address);
        }
        out.push(Effect::JoinOutcome {
            address,
            result: Err(error),
        });
    }

    fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }
}

#[cfg(test)]
mod tests;
