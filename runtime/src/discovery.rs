//! Discovery through scoped process groups: each remote-facing actor joins its group in
//! [`SCOPE`], ractor_cluster mirrors the groups of every connected peer, and callers look
//! services up there — again after every restart, because a restarted actor is a new one.
//!
//! A [`Group`] fixes the message type of its members, so that the unchecked
//! `ActorCell -> ActorRef<M>` conversion (ractor cannot check it for remote actors) happens in
//! one place.

use std::marker::PhantomData;

use ractor::{ActorCell, ActorId, ActorRef, Message};

use crate::ids::SessionId;
use crate::wire::{JobWire, MembershipWire, PoolWire};

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

/// Each node's CPU sampler pool endpoint.
pub const CPU_POOL: Group<PoolWire> = Group::new("cpu-pool");

/// Each GPU node's GPU sampler pool endpoint (same protocol as [`CPU_POOL`]).
pub const GPU_POOL: Group<PoolWire> = Group::new("gpu-pool");

/// Each node's job coordinator endpoint: where clients submit sampling jobs.
pub const COORDINATOR: Group<JobWire> = Group::new("coordinator");

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

    /// Every member, local ones first; remote ones with the session they are reached
    /// through.
    pub fn all_members(&self) -> Vec<(Option<SessionId>, ActorRef<M>)> {
        let mut members: Vec<_> = self
            .members()
            .into_iter()
            .map(|cell| (session_of(&cell), ActorRef::from(cell)))
            .collect();
        members.sort_by_key(|(session, _)| session.is_some());
        members
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
