//! How a client survives the loss of the node it submitted to: it watches that node while a
//! job runs, knows where else to go, and moves the job there.
//!
//! - **Watching.** A killed node's session closes at once (a `Disconnected` session event);
//!   a stalled one (SIGSTOP, a partition) keeps its TCP connection open for minutes, so the
//!   client also asks the node's membership for the member list every
//!   [`HEARTBEAT_INTERVAL`] and counts the node lost after [`STALL_LIMIT`] without an answer
//!   to anything (a heartbeat or a poll).
//! - **Knowing.** The addresses the client was given, and the members the node reports
//!   (refreshed by each heartbeat): members that are up and not draining first.
//! - **Moving.** [`ClusterClient::relocate`] connects to each candidate in turn and submits
//!   the request there; the first that takes it wins. A node that drains refuses
//!   ([`WireError::Draining`]) and the next one is tried.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::{ClientError, ClusterClient, wait_ready};
use crate::discovery::MEMBERSHIP;
use crate::ids::{JobId, NodeName};
use crate::membership::{MemberState, MemberStatus};
use crate::session::{SessionEvent, SessionEventKind};
use crate::wire::{
    self, CallError, Envelope, MembershipReply, MembershipRequest, WireError, WireSampleRequest,
};

/// Time between two heartbeats (member-list requests) to the node while a job runs.
pub(super) const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);
/// Silence after which the node counts as lost (stalled, partitioned): several heartbeats,
/// so that one slow answer on a busy node is not a loss.
pub(super) const STALL_LIMIT: Duration = Duration::from_secs(3);
/// A member list this recent spares a submission its own round trip to the node (jobs
/// submitted one after another).
pub(super) const FRESH_MEMBERS: Duration = HEARTBEAT_INTERVAL;

/// When the connected node last answered, and when it is asked next.
#[derive(Debug)]
pub(super) struct Liveness {
    pub(super) last_heard: Instant,
    next_heartbeat: Instant,
}

impl Liveness {
    /// Heard from just now.
    pub(super) fn new() -> Self {
        let now = Instant::now();
        Self {
            last_heard: now,
            next_heartbeat: now + HEARTBEAT_INTERVAL,
        }
    }

    pub(super) fn heard(&mut self) {
        self.last_heard = Instant::now();
    }
}

/// Where the client may go: the addresses it was given and the members the cluster reported.
#[derive(Debug, Default)]
pub(super) struct Known {
    given: Vec<SocketAddr>,
    members: Vec<MemberStatus>,
    /// When the current node last answered with its member list.
    refreshed: Option<Instant>,
}

impl Known {
    pub(super) fn given(addresses: &[SocketAddr]) -> Self {
        Self {
            given: addresses.to_vec(),
            members: Vec::new(),
            refreshed: None,
        }
    }

    /// Whether the current node answered with its member list within the last `within`.
    pub(super) fn fresh(&self, within: Duration) -> bool {
        self.refreshed.is_some_and(|at| at.elapsed() < within)
    }

    /// Addresses to try, best first, none of `lost`: members up (or the answering node) and
    /// not draining, then the given addresses, then members being connected. Members down
    /// or draining are left out.
    pub(super) fn candidates(&self, lost: &[(NodeName, SocketAddr)]) -> Vec<SocketAddr> {
        let lost_name = |name: &NodeName| lost.iter().any(|(lost, _)| lost == name);
        // A lost node's addresses: the one dialled and the one it advertised.
        let lost_addresses: Vec<SocketAddr> = lost
            .iter()
            .map(|(_, address)| *address)
            .chain(
                self.members
                    .iter()
                    .filter(|m| lost_name(&m.name))
                    .map(|m| m.address),
            )
            .collect();
        let members = |states: &[MemberState]| {
            self.members
                .iter()
                .filter(|m| states.contains(&m.state) && !lost_name(&m.name))
                .map(|m| m.address)
                .collect::<Vec<_>>()
        };
        let all = members(&[MemberState::Up, MemberState::Local])
            .into_iter()
            .chain(self.given.iter().copied())
            .chain(members(&[MemberState::Connecting]));
        let mut candidates: Vec<SocketAddr> = Vec::new();
        for address in all {
            if !candidates.contains(&address) && !lost_addresses.contains(&address) {
                candidates.push(address);
            }
        }
        candidates
    }
}

/// Whether a failed submission may go to another member: the node is gone, unreachable,
/// restarting or draining (a request the node found invalid would be invalid anywhere).
pub(super) fn may_fail_over(error: &ClientError) -> bool {
    match error {
        ClientError::Connect(_) => true,
        ClientError::Call(CallError::Unreachable { .. } | CallError::Timeout { .. }) => true,
        ClientError::Call(CallError::Refused { error, .. }) => matches!(
            error,
            WireError::Draining { .. } | WireError::Unavailable { .. }
        ),
        _ => false,
    }
}

/// What woke the watch.
enum Woke {
    Event(Option<SessionEvent>),
    Answer(Result<Envelope<MembershipReply>, CallError>),
}

impl ClusterClient {
    /// Resolves, with the reason, once the connected node is lost: its session closed, its
    /// membership is unreachable, or nothing answered for [`STALL_LIMIT`]. Meanwhile it
    /// heartbeats the node (the member list, kept for a failover).
    ///
    /// # Cancel safety
    /// Cancel safe: what it learnt (answers, members) is kept; a heartbeat in flight is
    /// dropped and the next one goes at its time.
    pub(super) async fn watch(&mut self) -> String {
        loop {
            let silent_until = self.liveness.last_heard + STALL_LIMIT;
            let now = Instant::now();
            if now >= silent_until {
                let silent = now.duration_since(self.liveness.last_heard);
                return format!("no answer for {:.1} s", silent.as_secs_f64());
            }
            let wake = self.liveness.next_heartbeat.min(silent_until);
            let event = tokio::select! {
                event = self.events.recv() => Some(event),
                () = tokio::time::sleep_until(wake) => None,
            };
            if let Some(event) = event {
                if let Some(reason) = self.closed(event) {
                    return reason;
                }
                continue;
            }
            if Instant::now() < self.liveness.next_heartbeat {
                continue;
            }
            self.liveness.next_heartbeat = Instant::now() + HEARTBEAT_INTERVAL;
            let Some(membership) = MEMBERSHIP.remote_member(self.session) else {
                return "its session closed".to_owned();
            };
            let envelope = Envelope::new(
                self.request_id(),
                &self.settings.name,
                MembershipRequest::Members,
            );
            let peer = self.peer.to_string();
            let timeout = silent_until
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(100));
            let call = wire::call(&membership, &peer, &envelope, timeout);
            let woke = tokio::select! {
                answer = call => Woke::Answer(answer),
                event = self.events.recv() => Woke::Event(event),
            };
            match woke {
                Woke::Event(event) => {
                    if let Some(reason) = self.closed(event) {
                        return reason;
                    }
                }
                Woke::Answer(Ok(reply)) => {
                    self.liveness.heard();
                    self.learn(reply.body);
                }
                Woke::Answer(Err(CallError::Unreachable { reason, .. })) => {
                    return format!("unreachable: {reason}");
                }
                // A timeout: the silence check above decides.
                Woke::Answer(Err(_)) => {}
            }
        }
    }

    /// Whether a session event means the node is lost, and why.
    fn closed(&self, event: Option<SessionEvent>) -> Option<String> {
        match event {
            None => Some("the client's session events stopped".to_owned()),
            Some(event)
                if event.session == self.session
                    && event.kind == SessionEventKind::Disconnected =>
            {
                Some("connection lost".to_owned())
            }
            Some(_) => None,
        }
    }

    /// Keeps the member list of a heartbeat's answer.
    fn learn(&mut self, reply: MembershipReply) {
        if let MembershipReply::Members { members } = reply {
            let members: Result<Vec<_>, _> =
                members.into_iter().map(MemberStatus::from_wire).collect();
            if let Ok(members) = members {
                self.known.members = members;
                self.known.refreshed = Some(Instant::now());
            }
        }
    }

    /// Asks the node for its member list, to know where to go if it is lost; whether it
    /// answered within [`STALL_LIMIT`].
    pub(super) async fn refresh_members(&mut self) -> bool {
        let Some(membership) = MEMBERSHIP.remote_member(self.session) else {
            return false;
        };
        let envelope = Envelope::new(
            self.request_id(),
            &self.settings.name,
            MembershipRequest::Members,
        );
        let peer = self.peer.to_string();
        match wire::call(&membership, &peer, &envelope, STALL_LIMIT).await {
            Ok(reply) => {
                self.liveness.heard();
                self.learn(reply.body);
                true
            }
            Err(_) => false,
        }
    }

    /// Connects to `address` instead of the current node.
    async fn dial(&mut self, address: SocketAddr) -> Result<(), ClientError> {
        let (session, peer) = wait_ready(
            &self.node_server,
            &self.transport,
            address,
            &mut self.events,
            self.settings.connect_timeout,
        )
        .await?;
        self.address = address;
        self.known.refreshed = None;
        self.link = None;
        self.session = session;
        self.peer = peer;
        self.liveness = Liveness::new();
        Ok(())
    }

    /// Submits `request` (which runs `expected` chains) to the first member that takes it,
    /// none of `lost`: connects to each candidate in turn. The error names every node tried
    /// (`tried` holds those tried before) and what happened.
    pub(super) async fn relocate(
        &mut self,
        request: &WireSampleRequest,
        expected: u32,
        lost: &[(NodeName, SocketAddr)],
        mut tried: Vec<String>,
    ) -> Result<JobId, ClientError> {
        for address in self.known.candidates(lost) {
            if let Err(error) = self.dial(address).await {
                tried.push(format!("{address} ({error})"));
                continue;
            }
            match self.submit(request, expected).await {
                Ok(job) => {
                    self.refresh_members().await;
                    return Ok(job);
                }
                Err(error) => tried.push(format!("{} at {address} ({error})", self.peer)),
            }
        }
        Err(ClientError::NoMember { tried })
    }
}

#[cfg(test)]
mod tests;
