//! Replies handed over in memory within one process: a call to an actor of this node (a
//! coordinator polling its own node's pool, whose answers are a GPU run's draws) need not
//! encode its reply to bytes only to decode them again.
//!
//! The caller opens a [`Slot`] (a random key, registered here for as long as the call lasts)
//! and names its key in the request (`Envelope::local_reply`); a [`Responder`](super::Responder)
//! that finds the slot open puts the reply envelope in it and sends [`MARKER`] in place of
//! the bytes. Only a caller that opened a slot looks for the marker; a request from another
//! node that names a key finds no slot (keys are random and live only during their call) and
//! is answered with bytes as usual.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// The bytes sent in place of a reply put in its slot.
pub(crate) const MARKER: &[u8] = b"\x00bayes-cluster local reply";

type Slots = HashMap<u64, Option<Box<dyn Any + Send>>>;

static SLOTS: LazyLock<Mutex<Slots>> = LazyLock::new(Mutex::default);

fn slots() -> MutexGuard<'static, Slots> {
    // A map of plain values: usable after a panic elsewhere.
    SLOTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A caller's slot for its reply; closed when dropped.
#[derive(Debug)]
pub(crate) struct Slot(u64);

impl Slot {
    /// Opens a slot under a fresh random key; `None` if the random source fails (the call
    /// then goes by bytes).
    pub(crate) fn open() -> Option<Slot> {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).ok()?;
        let key = u64::from_le_bytes(bytes);
        let mut slots = slots();
        if slots.contains_key(&key) {
            return None;
        }
        slots.insert(key, None);
        Some(Slot(key))
    }

    /// Its key, for the request.
    pub(crate) fn key(&self) -> u64 {
        self.0
    }

    /// The reply put in the slot, if it is a `T`.
    pub(crate) fn take<T: Any>(&self) -> Option<T> {
        let reply = slots().get_mut(&self.0)?.take()?;
        reply.downcast::<T>().ok().map(|reply| *reply)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        slots().remove(&self.0);
    }
}

/// Puts `reply` in the open, empty slot `key`; gives it back if there is none.
pub(crate) fn put<T: Any + Send>(key: u64, reply: T) -> Result<(), T> {
    let mut slots = slots();
    match slots.get_mut(&key) {
        Some(slot @ None) => {
            *slot = Some(Box::new(reply));
            Ok(())
        }
        _ => Err(reply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_takes_one_reply_of_its_type_and_closes_when_dropped() {
        let slot = Slot::open().unwrap();
        let key = slot.key();
        assert_eq!(put(key, 7u32), Ok(()));
        assert_eq!(put(key, 8u32), Err(8), "the slot is full");
        assert_eq!(slot.take::<String>(), None, "another type");
        let slot2 = Slot::open().unwrap();
        put(slot2.key(), 9u32).unwrap();
        assert_eq!(slot2.take::<u32>(), Some(9));
        assert_eq!(slot2.take::<u32>(), None, "taken once");
        drop(slot);
        assert_eq!(put(key, 1u32), Err(1), "a closed slot takes nothing");
        assert_eq!(put(12345, 1u32), Err(1), "nor does a key never opened");
    }
}
