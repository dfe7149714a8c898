//! The GPU supervisor's restart policy: restart intensity (OTP's `intensity` and `period`)
//! and exponential backoff.
//!
//! `runtime::supervisor` has the same two rules for the node's tree; `gpu-actor` sits below
//! `runtime` and cannot use it, and a supervisor of GPU workers needs only this much of it
//! (one strategy, one kind of child), so the rules are restated here in a few lines.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// When the supervisor restarts a failed worker, and when it gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within `window`, over all workers; one more and the supervisor fails
    /// (escalation).
    pub max_restarts: u32,
    /// The sliding window of `max_restarts`.
    pub window: Duration,
    /// Wait before the first restart in a window; each further restart in the window waits
    /// twice as long as the one before, up to `max_backoff`.
    pub initial_backoff: Duration,
    /// The longest wait before a restart.
    pub max_backoff: Duration,
}

impl Default for RestartPolicy {
    /// 5 restarts a minute, 100 ms doubling up to 5 s: a device that keeps being lost is
    /// given up within a minute, while one lost device a minute is restarted forever.
    fn default() -> RestartPolicy {
        RestartPolicy {
            max_restarts: 5,
            window: Duration::from_secs(60),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }
}

impl RestartPolicy {
    /// The wait before a restart that has `previous` restarts before it in the window.
    pub fn backoff(&self, previous: u32) -> Duration {
        let factor = 2u32.saturating_pow(previous.min(31));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Restarts within the window, oldest first.
#[derive(Debug, Default)]
pub(super) struct RestartHistory {
    times: VecDeque<Instant>,
}

impl RestartHistory {
    /// Records a restart at `now` if the policy allows it and returns how many restarts came
    /// before it in the window; `None` when the limit is reached.
    pub(super) fn admit(&mut self, policy: &RestartPolicy, now: Instant) -> Option<u32> {
        while self
            .times
            .front()
            .is_some_and(|&oldest| now.duration_since(oldest) >= policy.window)
        {
            self.times.pop_front();
        }
        let previous = u32::try_from(self.times.len()).unwrap_or(u32::MAX);
        if previous >= policy.max_restarts {
            return None;
        }
        self.times.push_back(now);
        Some(previous)
    }
}
