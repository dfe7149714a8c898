//! Discovery through scoped process groups: each remote-facing actor joins its group in
//! [`SCOPE`], ractor_cluster mirrors the groups of every connected peer, and callers look
//! services up there — again after every restart, because a restarted actor is a new one.
//!
//! A [`Group`] fixes the message type of its members, so that the unchecked
//! `ActorCell -> ActorRef<M>` conversion (ractor cannot check it for remote actors) happens in
//! one place. The next groups (GPU supervisor, CPU sampler pool, job coordinator) are added
//! here next to [`MEMBERSHIP`].

use std::marker::PhantomData;

use ractor::{ActorCell, ActorId, ActorRef, Message};

use crate::ids::SessionId;
use crate::wire::MembershipWire;

/// The pg scope of every group of this runtime.
pub const SCOPE: &str = "bayes-cluster";

/// A process group whose members all take messages of type `M`.
#[derive(Debug)]
pub struct Group<M> {
    name: &'static str,
    message: PhantomData<fn() -> M>,
}

/// Each node's membership endpoint.
pub const MEMBERSHIP: Group<MembershipWire> = Group::new("membership");

impl<M: Message> Group<M> {
    const fn new(name: &'static str) -> Self {
        Self {
            name,
            message: PhantomData,
        }
    }

    /// The group's name in [`SCOPE`].
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Adds a local actor to the group; peers see it once their session is ready.
    /// It leaves the group when it stops.
    pub fn join(&self, actor: &ActorRef<M>) {
        ractor::pg::join_scoped(
            SCOPE.to_owned(),
            self.name.to_owned(),
            vec![actor.get_cell()],
        );
    }

    /// The member reached through `session`, if that peer has one.
    pub fn remote_member(&self, session: SessionId) -> Option<ActorRef<M>> {
        self.members()
            .into_iter()
            .find(|cell| session_of(cell) == Some(session))
            .map(ActorRef::from)
    }

    /// Every remote member, with the session it is reached through.
    pub fn remote_members(&self) -> Vec<(SessionId, ActorRef<M>)> {
        self.members()
            .into_iter()
            .filter_map(|cell| Some((session_of(&cell)?, ActorRef::from(cell))))
            .collect()
    }

    fn members(&self) -> Vec<ActorCell> {
        ractor::pg::get_scoped_members(&SCOPE.to_owned(), &self.name.to_owned())
    }
}

fn session_of(cell: &ActorCell) -> Option<SessionId> {
    match cell.get_id() {
        ActorId::Remote { node_id, .. } => Some(SessionId(node_id)),
        ActorId::Local(_) => None,
    }
}
