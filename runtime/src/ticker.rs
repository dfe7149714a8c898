//! Periodic messages to an actor (its `Tick`), without bursts after a stall.

use std::time::Duration;

use ractor::{ActorRef, Message};
use tokio::task::JoinHandle;

/// Casts a message to an actor every period, the first one period after [`Ticker::start`],
/// until the actor is gone or the ticker is stopped or dropped. Unlike ractor's
/// `send_interval`, ticks missed while the process was stalled are not fired in a burst when
/// it resumes: a burst would, for one, count several heartbeat misses at once and mark every
/// peer down.
#[derive(Debug)]
pub(crate) struct Ticker(JoinHandle<()>);

impl Ticker {
    /// Starts casting `tick()` to `actor` every `period`.
    pub(crate) fn start<M: Message>(
        actor: &ActorRef<M>,
        period: Duration,
        tick: impl Fn() -> M + Send + 'static,
    ) -> Ticker {
        let actor = actor.clone();
        Ticker(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await; // the first completes at once
            loop {
                ticks.tick().await;
                if actor.cast(tick()).is_err() {
                    break;
                }
            }
        }))
    }

    /// Stops the ticks (also done on drop).
    pub(crate) fn stop(&self) {
        self.0.abort();
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.abort();
    }
}
