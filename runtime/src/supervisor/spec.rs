//! What a supervisor is told: child specs, restart types, strategy, intensity and backoff.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, SpawnErr};
use tokio::time::Instant;

use crate::ids::ChildId;

/// When a child that exited is started again (OTP's restart types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Always restarted, whatever the reason it exited.
    Permanent,
    /// Restarted only after an abnormal exit (see [`Exit`]).
    Transient,
    /// Never restarted; removed from the supervisor when it exits.
    Temporary,
}

/// Which children a supervisor restarts when one exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Only the child that exited.
    OneForOne,
    /// The child that exited and every child started after it (they are stopped first, in
    /// reverse start order): for children that depend on their elder siblings.
    RestForOne,
}

/// How a child ended, as far as restart decisions go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Stopped (`stop`, with or without a reason).
    Normal,
    /// Failed: a panic or an `Err` from one of its handlers, or killed.
    Abnormal {
        /// The failure as text.
        reason: String,
    },
}

impl Restart {
    /// Whether a child with this restart type is started again after `exit`.
    pub fn restarts_after(self, exit: &Exit) -> bool {
        match self {
            Restart::Permanent => true,
            Restart::Transient => matches!(exit, Exit::Abnormal { .. }),
            Restart::Temporary => false,
        }
    }
}

/// Restart intensity: more than `max_restarts` restarts within `window` and the supervisor
/// gives up, stops its children and fails, so that its own supervisor sees it (escalation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intensity {
    /// Restarts allowed within `window`.
    pub max_restarts: u32,
    /// The sliding window.
    pub window: Duration,
}

impl Default for Intensity {
    /// OTP's default: 3 restarts in 5 seconds.
    fn default() -> Self {
        Self {
            max_restarts: 3,
            window: Duration::from_secs(5),
        }
    }
}

/// Exponential backoff between restarts: the `n`-th restart within the intensity window
/// (counting from 0) waits `min(max, initial * 2^n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Wait before the first restart in a window.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The wait before the restart that has `previous` restarts before it in the window.
    pub fn delay(&self, previous: u32) -> Duration {
        let factor = 2u32.saturating_pow(previous.min(31));
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// Restarts within the intensity window, oldest first.
#[derive(Debug, Default)]
pub(crate) struct RestartHistory {
    times: VecDeque<Instant>,
}

impl RestartHistory {
    /// Records a restart at `now` if the intensity allows it, and returns how many restarts
    /// came before it in the window; `None` when the limit is exceeded.
    pub(crate) fn admit(&mut self, intensity: &Intensity, now: Instant) -> Option<u32> {
        while let Some(&oldest) = self.times.front() {
            if now.duration_since(oldest) >= intensity.window {
                self.times.pop_front();
            } else {
                break;
            }
        }
        let previous = u32::try_from(self.times.len()).unwrap_or(u32::MAX);
        if previous >= intensity.max_restarts {
            return None;
        }
        self.times.push_back(now);
        Some(previous)
    }
}

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
