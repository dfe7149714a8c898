//! [`Pending`]: the reply to a request sent to the device thread, awaitable from async code
//! or waited for from a plain thread.
//!
//! A one-shot channel with a `Mutex` + `Condvar` for blocking waits and a `Waker` for
//! futures. If the device thread drops the reply end without answering (it panicked or shut
//! down), the caller gets [`GpuError::DeviceThreadGone`] instead of hanging.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::GpuError;

struct State<T> {
    value: Option<Result<T, GpuError>>,
    /// The reply end is gone; with no value, that means no answer will come.
    closed: bool,
    waker: Option<Waker>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // No code panics while holding the lock, so a poisoned one still holds valid state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The device thread's end: answer once, or drop to say "no answer".
pub(crate) struct Replier<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Replier<T> {
    pub(crate) fn send(self, value: Result<T, GpuError>) {
        self.shared.lock().value = Some(value);
        // Drop closes and wakes.
    }
}

impl<T> Drop for Replier<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.shared.lock();
            state.closed = true;
            state.waker.take()
        };
        self.shared.ready.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The reply to a request: `.await` it in async code, or [`Pending::wait`] on a thread.
///
/// # Cancel safety
///
/// Dropping a `Pending` does not cancel the request: the device thread still runs it and
/// its result is discarded. Requests are therefore safe to abandon (after a timeout, say),
/// but not free.
#[must_use = "a request's result is only seen by waiting for its reply"]
pub struct Pending<T> {
    shared: Arc<Shared<T>>,
}

/// A connected reply pair.
pub(crate) fn reply_channel<T>() -> (Replier<T>, Pending<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            value: None,
            closed: false,
            waker: None,
        }),
        ready: Condvar::new(),
    });
    (
        Replier {
            shared: shared.clone(),
        },
        Pending { shared },
    )
}

impl<T> Pending<T> {
    /// A reply that is already known (for example a request that could not be sent).
    pub(crate) fn ready(value: Result<T, GpuError>) -> Pending<T> {
        let (replier, pending) = reply_channel();
        replier.send(value);
        pending
    }

    fn take(state: &mut State<T>) -> Option<Result<T, GpuError>> {
        match state.value.take() {
            Some(value) => Some(value),
            None if state.closed => Some(Err(GpuError::DeviceThreadGone)),
            None => None,
        }
    }

    /// Blocks the calling thread until the reply arrives. Do not call it on an async
    /// executor's thread: `.await` the `Pending` there instead.
    pub fn wait(self) -> Result<T, GpuError> {
        let mut state = self.shared.lock();
        loop {
            if let Some(value) = Self::take(&mut state) {
                return value;
            }
            state = self
                .shared
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Like [`Pending::wait`], but first checks for the reply without sleeping for up to
    /// `spin`: a sleeping thread takes tens to hundreds of microseconds to wake, which a
    /// driver that sends the next dispatch as soon as one is back pays on every dispatch.
    pub fn wait_spinning(self, spin: Duration) -> Result<T, GpuError> {
        match spin_for(spin, || Self::take(&mut self.shared.lock())) {
            Some(value) => value,
            None => self.wait(),
        }
    }

    /// Like [`Pending::wait`], but gives up after `timeout` with [`GpuError::ReplyTimeout`].
    pub fn wait_timeout(self, timeout: Duration) -> Result<T, GpuError> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if let Some(value) = Self::take(&mut state) {
                return value;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(GpuError::ReplyTimeout { waited: timeout });
            }
            state = self
                .shared
                .ready
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T, GpuError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.shared.lock();
        match Self::take(&mut state) {
            Some(value) => Poll::Ready(value),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Calls `poll` without sleeping until it gives a value or `spin` has passed (`None`): the
/// spin-waits of the device thread and of its callers, which a sleep and wake-up would cost
/// tens to hundreds of microseconds each.
pub(crate) fn spin_for<R>(spin: Duration, mut poll: impl FnMut() -> Option<R>) -> Option<R> {
    let until = Instant::now() + spin;
    while Instant::now() < until {
        if let Some(value) = poll() {
            return Some(value);
        }
        std::hint::spin_loop();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_value_is_received() {
        let (replier, pending) = reply_channel();
        std::thread::spawn(move || replier.send(Ok(7)));
        assert_eq!(pending.wait().ok(), Some(7));
    }

    #[test]
    fn a_dropped_replier_means_the_worker_is_gone() {
        let (replier, pending) = reply_channel::<u32>();
        std::thread::spawn(move || drop(replier));
        assert!(matches!(pending.wait(), Err(GpuError::DeviceThreadGone)));
    }

    #[test]
    fn waiting_has_a_deadline() {
        let (_replier, pending) = reply_channel::<u32>();
        let result = pending.wait_timeout(Duration::from_millis(20));
        assert!(matches!(result, Err(GpuError::ReplyTimeout { .. })));
    }

    #[test]
    fn a_pending_reply_is_a_future() {
        let (replier, pending) = reply_channel();
        std::thread::spawn(move || replier.send(Ok("done")));
        assert_eq!(pollster::block_on(pending).ok(), Some("done"));
    }
}
