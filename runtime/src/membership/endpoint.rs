//! The membership endpoint: the remotable face of membership, in the `membership` process
//! group. It decodes each request (fallibly, bounded in size) and hands it to the local
//! [`Membership`](super::Membership) actor, which answers through the [`Responder`]; what it
//! cannot read it refuses with a typed [`WireError`](crate::wire::WireError).
//!
//! A separate actor because a remotable actor's messages must all be serializable, while
//! membership also takes local-only messages (session events, subscribers, reply ports).

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::MembershipMsg;
use crate::discovery::MEMBERSHIP;
use crate::ids::NodeName;
use crate::wire::{self, Envelope, MembershipRequest, MembershipWire, Responder};

/// The endpoint behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub struct MembershipEndpoint;

/// The endpoint's arguments, which are also its state.
#[derive(Debug, Clone)]
pub struct EndpointArgs {
    /// This node, for the replies' sender field.
    pub me: NodeName,
    /// The membership actor requests go to. The endpoint is started after it under a
    /// rest-for-one supervisor, so a new membership actor always comes with a new endpoint.
    pub membership: ActorRef<MembershipMsg>,
}

impl Actor for MembershipEndpoint {
    type Msg = MembershipWire;
    type State = EndpointArgs;
    type Arguments = EndpointArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: EndpointArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        MEMBERSHIP.join(&myself);
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let MembershipWire::Call(bytes, port) = message;
        match Envelope::<MembershipRequest>::decode(&bytes) {
            Ok(request) => forward(state, request, port),
            Err(error) => {
                tracing::debug!("refusing a membership request: {error}");
                wire::refuse::<MembershipWire>(port, &bytes, &state.me, error);
            }
        }
        Ok(())
    }
}

fn forward(
    state: &EndpointArgs,
    request: Envelope<MembershipRequest>,
    port: ractor::RpcReplyPort<Vec<u8>>,
) {
    let responder = Responder::new(port, request.request_id, state.me.clone())
        .with_local_reply(request.local_reply);
    let message = MembershipMsg::Remote { request, responder };
    wire::hand_over(&state.membership, message, || "membership".to_owned());
}

impl wire::Answerable<MembershipWire> for MembershipMsg {
    fn into_responder(self) -> Option<Responder<MembershipWire>> {
        match self {
            MembershipMsg::Remote { responder, .. } => Some(responder),
            _ => None,
        }
    }
}
