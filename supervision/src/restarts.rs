//! The restart decisions of a supervisor, as plain code (no actors, no timers): which
//! children come back after one exits, after how long, and when the supervisor gives up.
//!
//! The rules are OTP's: restart types ([`Restart`]), strategies ([`Strategy`]), restart
//! intensity ([`Intensity`]: one restart too many within the window and the supervisor
//! escalates), and an exponential [`Backoff`] before each restart that starts again from its
//! initial wait as the window empties. [`Restarts`] applies them; every supervisor of the
//! project (the generic [`crate::Supervisor`], `gpu-actor`'s GPU supervisor) asks it and
//! only carries its answer out.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use tokio::time::Instant;

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

impl Strategy {
    /// The positions of the siblings that stop and restart with the child at `index`, of
    /// `count` children in start order: none, or every younger one.
    pub fn siblings(self, index: usize, count: usize) -> Range<usize> {
        let after = (index + 1).min(count);
        match self {
            Strategy::OneForOne => after..after,
            Strategy::RestForOne => after..count.max(after),
        }
    }
}

/// Restart intensity: more than `max_restarts` restarts within `window` and the supervisor
/// gives up, stops its children and fails, so that its own supervisor sees it (escalation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intensity {
    /// Restarts allowed within `window`, over all children.
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

/// What a supervisor does about a child that exited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The child is not started again: a temporary child leaves the supervisor's list
    /// (`remove`), a transient one that stopped normally stays listed as exited.
    Leave {
        /// Whether the child leaves the list.
        remove: bool,
    },
    /// The siblings in `siblings` stop (youngest first); after `delay`, the child and then
    /// those siblings start again, in start order.
    Restart {
        /// The backoff.
        delay: Duration,
        /// Positions of the siblings restarted with the child.
        siblings: Range<usize>,
    },
    /// One restart too many within the window: the supervisor stops every child and fails.
    Escalate,
}

/// One supervisor's restart rules and its recent restarts.
#[derive(Debug, Clone)]
pub struct Restarts {
    strategy: Strategy,
    intensity: Intensity,
    backoff: Backoff,
    /// Restarts within the intensity window, oldest first.
    history: VecDeque<Instant>,
}

impl Restarts {
    /// Rules with no restart yet.
    pub fn new(strategy: Strategy, intensity: Intensity, backoff: Backoff) -> Restarts {
        Restarts {
            strategy,
            intensity,
            backoff,
            history: VecDeque::new(),
        }
    }

    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The intensity (for the error a supervisor fails with when it escalates).
    pub fn intensity(&self) -> Intensity {
        self.intensity
    }

    /// The child at `index` of `count` children (in start order), of type `restart`, exited
    /// at `now` with `exit`; a child that fails to start again counts as another abnormal
    /// exit. A restart is recorded in the window when one is decided.
    pub fn child_exited(
        &mut self,
        index: usize,
        count: usize,
        restart: Restart,
        exit: &Exit,
        now: Instant,
    ) -> Decision {
        if !restart.restarts_after(exit) {
            return Decision::Leave {
                remove: restart == Restart::Temporary,
            };
        }
        match self.admit(now) {
            Some(previous) => Decision::Restart {
                delay: self.backoff.delay(previous),
                siblings: self.strategy.siblings(index, count),
            },
            None => Decision::Escalate,
        }
    }

    /// Records a restart at `now` if the intensity allows it, and returns how many restarts
    /// came before it in the window; `None` when the limit is exceeded.
    fn admit(&mut self, now: Instant) -> Option<u32> {
        while self
            .history
            .front()
            .is_some_and(|&oldest| now.duration_since(oldest) >= self.intensity.window)
        {
            self.history.pop_front();
        }
        let previous = u32::try_from(self.history.len()).unwrap_or(u32::MAX);
        if previous >= self.intensity.max_restarts {
            return None;
        }
        self.history.push_back(now);
        Some(previous)
    }
}

#[cfg(test)]
mod tests;
