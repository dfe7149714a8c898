//! A stream of numbered events fetched with long polls: the way results travel back (pool →
//! coordinator → client) without a remotable actor on the caller's side.
//!
//! Events are numbered from 1. A poll names the last event its caller has (`ack`): the
//! outbox drops what is acknowledged and answers with what follows, up to a byte budget.
//! A poll repeated after a timeout ("outcome unknown") names the same `ack` and gets the same
//! events again, so retries are idempotent and nothing is lost. When nothing is ready the
//! poll waits (one [`Waiter`] per stream, answered as soon as an event arrives or at its
//! deadline), which is what streams draws as chains progress.
//!
//! Outboxes are bounded by their consumer's pace: a [`Backlog`] counts the bytes producers
//! made that the consumer has not acknowledged, and producers wait while it is over a budget
//! (a pool's chain threads; a coordinator's drivers stop fetching a job's events the same
//! way while its client is behind). A slow consumer slows the producers down instead of
//! growing memory anywhere.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::wire::WireEvent;

/// How much earlier than its caller's timeout a long poll is answered: room for the answer
/// to travel back.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// Numbered events not yet acknowledged.
#[derive(Debug)]
pub(crate) struct Outbox<E> {
    events: VecDeque<WireEvent<E>>,
    next_seq: u64,
}

impl<E: Clone> Outbox<E> {
    pub(crate) fn new() -> Self {
        Self {
            events: VecDeque::new(),
            next_seq: 1,
        }
    }

    /// Appends an event; returns its number.
    pub(crate) fn push(&mut self, event: E) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.events.push_back(WireEvent { seq, event });
        seq
    }

    /// Drops every event up to `ack`.
    pub(crate) fn ack(&mut self, ack: u64) {
        self.ack_each(ack, |_| {});
    }

    /// Drops every event up to `ack`, handing each to `dropped` first.
    pub(crate) fn ack_each(&mut self, ack: u64, mut dropped: impl FnMut(&E)) {
        while self.events.front().is_some_and(|e| e.seq <= ack) {
            if let Some(event) = self.events.pop_front() {
                dropped(&event.event);
            }
        }
    }

    /// The estimated bytes of the events not yet acknowledged.
    pub(crate) fn unacked_bytes(&self, size: impl Fn(&E) -> usize) -> usize {
        self.events.iter().map(|e| size(&e.event)).sum()
    }

    /// Whether an event after `ack` is ready.
    pub(crate) fn has_after(&self, ack: u64) -> bool {
        self.events.back().is_some_and(|e| e.seq > ack)
    }

    /// The number of the last event pushed (0: none).
    #[cfg(test)]
    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Copies of the events after `ack`, oldest first, until their estimated size reaches
    /// `budget` (at least one when one is ready).
    pub(crate) fn after(
        &self,
        ack: u64,
        budget: usize,
        size: impl Fn(&E) -> usize,
    ) -> Vec<WireEvent<E>> {
        let mut taken = Vec::new();
        let mut bytes = 0;
        for event in self.events.iter().filter(|e| e.seq > ack) {
            if !taken.is_empty() && bytes + size(&event.event) > budget {
                break;
            }
            bytes += size(&event.event);
            taken.push(event.clone());
        }
        taken
    }

    /// Number of unacknowledged events.
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }
}

/// Bytes of a stream's events that producer threads made and its consumer has not
/// acknowledged. The producers add what they make and wait while the count is over their
/// budget; the actor that owns the outbox removes what polls acknowledge. A count too low
/// only lets a producer run a chunk ahead; so whatever is not sure to be acknowledged later
/// is left out of it.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    bytes: Mutex<usize>,
    changed: Condvar,
}

impl Backlog {
    /// A producer made `bytes` more.
    pub(crate) fn add(&self, bytes: usize) {
        let mut count = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        *count = count.saturating_add(bytes);
    }

    /// The consumer acknowledged `bytes`: waiting producers may go on.
    pub(crate) fn remove(&self, bytes: usize) {
        let mut count = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        *count = count.saturating_sub(bytes);
        self.changed.notify_all();
    }

    /// The bytes not acknowledged.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        *self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks while more than `budget` bytes wait for the consumer, until acknowledgements
    /// bring the count down or `stop` is set (whoever sets it calls [`Self::wake`]).
    pub(crate) fn wait_below(&self, budget: usize, stop: &AtomicBool) {
        let mut count = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        while *count > budget && !stop.load(Ordering::Relaxed) {
            count = self.changed.wait(count).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Wakes the waiting producers, to look at their stop flag. The lock makes sure that a
    /// producer that saw the flag unset is already waiting when the notification comes.
    pub(crate) fn wake(&self) {
        let _count = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        self.changed.notify_all();
    }
}

/// A poll waiting for events.
#[derive(Debug)]
pub(crate) struct Waiter<R> {
    /// Where the answer goes.
    pub(crate) reply: R,
    /// The poll's `ack`.
    pub(crate) ack: u64,
    /// When it is answered with no events.
    pub(crate) deadline: Instant,
}

impl<R> Waiter<R> {
    /// A poll that asked to wait `wait_ms`, from a caller that gives up after
    /// `caller_timeout` (when known): it is answered in time for the caller.
    pub(crate) fn new(reply: R, ack: u64, wait_ms: u32, caller_timeout: Option<Duration>) -> Self {
        let mut wait = Duration::from_millis(u64::from(wait_ms));
        if let Some(timeout) = caller_timeout {
            wait = wait.min(timeout.saturating_sub(ANSWER_MARGIN));
        }
        Self {
            reply,
            ack,
            deadline: Instant::now() + wait,
        }
    }
}

#[cfg(test)]
mod tests;
