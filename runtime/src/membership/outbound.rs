//! Membership's calls to the network. Dials and heartbeats are tasks in the state's `JoinSet`
//! (aborted when membership stops) whose results come back as messages; leave notices are
//! awaited on shutdown.

use std::net::SocketAddr;

use ractor::ActorRef;
use tokio::task::JoinSet;

use super::info::member_from_wire;
use super::{InternalMsg, MembershipMsg, MembershipState, gossip, internal};
use crate::discovery::MEMBERSHIP;
use crate::ids::{NodeName, RequestId, SessionId};
use crate::membership::NodeInfo;
use crate::wire::{self, Envelope, MembershipReply, MembershipRequest, WireError};

/// Dials `address` through the node's transport (TCP, TLS, preamble); what happens next comes
/// as session events. A refusal before the cookie handshake (unreachable, a name in use, TLS,
/// busy, throttled) comes back as `DialFailed`.
pub(super) fn dial(
    myself: &ActorRef<MembershipMsg>,
    state: &mut MembershipState,
    address: SocketAddr,
) {
    let node_server = state.node_server.clone();
    let transport = state.transport.clone();
    let myself = myself.clone();
    let limit = state.settings.connect_timeout;
    state.tasks.spawn(async move {
        let deadline = tokio::time::Instant::now() + limit;
        if let Err(error) = transport.dial(&node_server, address, deadline).await {
            let _ = myself.cast(internal(InternalMsg::DialFailed { address, error }));
        }
    });
}

pub(super) fn send_heartbeat(
    myself: &ActorRef<MembershipMsg>,
    state: &mut MembershipState,
    peer: NodeName,
    session: SessionId,
    seq: u64,
) {
    let Some(endpoint) = MEMBERSHIP.remote_member(session) else {
        let answer = Err("no membership endpoint on the session".to_owned());
        let _ = myself.cast(internal(InternalMsg::HeartbeatAnswered {
            peer,
            session,
            seq,
            answer,
        }));
        return;
    };
    let envelope = Envelope::new(
        next_request(state),
        &state.table.me().name,
        MembershipRequest::Heartbeat {
            seq,
            node: state.table.me().to_wire(),
            members: gossip(&state.table),
        },
    );
    // Let a stalled call end once the peer would be down anyway.
    let timeout = state.settings.heartbeat_interval * state.settings.max_missed_heartbeats;
    let myself = myself.clone();
    state.tasks.spawn(async move {
        let answer = match wire::call(&endpoint, peer.as_str(), &envelope, timeout).await {
            Ok(reply) => heartbeat_answer(reply.body, seq),
            Err(error) => Err(error.to_string()),
        };
        let _ = myself.cast(internal(InternalMsg::HeartbeatAnswered {
            peer,
            session,
            seq,
            answer,
        }));
    });
}

fn heartbeat_answer(
    reply: MembershipReply,
    seq: u64,
) -> Result<(NodeInfo, Vec<(NodeName, SocketAddr)>), String> {
    let MembershipReply::Heartbeat {
        seq: answered,
        node,
        members,
    } = reply
    else {
        return Err(format!("unexpected answer to a heartbeat: {reply:?}"));
    };
    if answered != seq {
        return Err(format!("heartbeat {seq} answered as {answered}"));
    }
    let node = NodeInfo::from_wire(node).map_err(|e| e.to_string())?;
    let members = members
        .iter()
        .map(member_from_wire)
        .collect::<Result<_, WireError>>()
        .map_err(|e| e.to_string())?;
    Ok((node, members))
}

fn next_request(state: &mut MembershipState) -> RequestId {
    state.next_request += 1;
    RequestId(state.next_request)
}

/// Tells every up peer that this node is leaving, so that they do not reconnect; the notices
/// go out together and each is bounded by `leave_timeout`.
pub(super) async fn leave(state: &mut MembershipState) {
    let mut calls = JoinSet::new();
    for (name, _) in state.table.up_members() {
        let Some(endpoint) = state
            .table
            .session_of(&name)
            .and_then(|session| MEMBERSHIP.remote_member(session))
        else {
            continue;
        };
        let envelope = Envelope::new(
            next_request(state),
            &state.table.me().name,
            MembershipRequest::Leave,
        );
        let timeout = state.settings.leave_timeout;
        calls.spawn(async move {
            if let Err(error) = wire::call(&endpoint, name.as_str(), &envelope, timeout).await {
                tracing::debug!("leave notice to {name} failed: {error}");
            }
        });
    }
    while calls.join_next().await.is_some() {}
}
