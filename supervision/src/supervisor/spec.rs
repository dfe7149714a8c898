//! A child as a supervisor is told about it: its id, restart type, stop timeout and how to
//! start it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, SpawnErr};

use crate::ids::ChildId;
use crate::restarts::Restart;

/// The future a child spec's start function returns: the started, linked child.
pub type StartFuture = Pin<Box<dyn Future<Output = Result<ActorCell, SpawnErr>> + Send>>;

type StartFn = Arc<dyn Fn(ActorCell) -> StartFuture + Send + Sync>;

/// One child of a supervisor: how to start it (linked to the supervisor's cell, which the
/// start function receives) and when to restart it.
#[derive(Clone)]
pub struct ChildSpec {
    /// Unique among its siblings; used in logs and errors.
    pub id: ChildId,
    /// When it is restarted.
    pub restart: Restart,
    /// How long a graceful stop may take before the child is killed.
    pub shutdown_timeout: Duration,
    start: StartFn,
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("id", &self.id)
            .field("restart", &self.restart)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    /// The default graceful-stop timeout.
    pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

    /// A child started by `start(supervisor_cell)`, which must link the child to that cell
    /// (`Actor::spawn_linked`).
    pub fn new<F, Fut>(id: impl Into<ChildId>, restart: Restart, start: F) -> Self
    where
        F: Fn(ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        Self {
            id: id.into(),
            restart,
            shutdown_timeout: Self::DEFAULT_SHUTDOWN_TIMEOUT,
            start: Arc::new(move |supervisor| Box::pin(start(supervisor))),
        }
    }

    /// A child actor, spawned linked under `name` (registered in ractor's process-wide
    /// registry when `Some`) with the behaviour and arguments `make` returns on every start.
    pub fn actor<A, F>(
        id: impl Into<ChildId>,
        restart: Restart,
        name: Option<&str>,
        make: F,
    ) -> Self
    where
        A: Actor,
        F: Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    {
        let name = name.map(str::to_owned);
        Self::new(id, restart, move |supervisor| {
            let (behaviour, args) = make();
            let name = name.clone();
            async move {
                let (actor, _handle) = A::spawn_linked(name, behaviour, args, supervisor).await?;
                Ok(actor.get_cell())
            }
        })
    }

    /// Replaces the graceful-stop timeout.
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    pub(crate) fn start(&self, supervisor: ActorCell) -> StartFuture {
        (self.start)(supervisor)
    }
}
