//! Admission before authentication, as plain code (time passed in): caps on unauthenticated
//! connections per node and per source address, and a penalty per source address for failed
//! handshakes that doubles with each failure.
//!
//! An IPv6 source is counted by its /64 prefix (one host usually holds a whole /64), an
//! IPv4-mapped IPv6 address as the IPv4 address.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use tokio::time::Instant;

use super::TransportSettings;
use super::preamble::BusyScope;

/// Addresses with a penalty remembered at most; past it the ones quiet longest are dropped.
const MAX_PENALTIES: usize = 4096;

/// A penalty is forgotten this long after it ended with no new failure.
const FORGET_PENALTY_AFTER: Duration = Duration::from_secs(600);

/// Why a connection is closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A cap on unauthenticated connections is reached.
    Busy {
        /// Which one.
        scope: BusyScope,
        /// Its value.
        limit: usize,
    },
    /// The address failed handshakes lately; it may try again after `retry_after`.
    Throttled {
        /// Time left of the penalty.
        retry_after: Duration,
        /// Failures counted against the address.
        failures: u32,
    },
}

#[derive(Debug)]
struct Penalty {
    failures: u32,
    until: Instant,
}

/// Counts of unauthenticated connections and penalties, for one node.
#[derive(Debug)]
pub(crate) struct Admission {
    settings: TransportSettings,
    unauthenticated: usize,
    per_address: HashMap<IpAddr, usize>,
    penalties: HashMap<IpAddr, Penalty>,
}

impl Admission {
    pub(crate) fn new(settings: TransportSettings) -> Self {
        Self {
            settings,
            unauthenticated: 0,
            per_address: HashMap::new(),
            penalties: HashMap::new(),
        }
    }

    /// Counts a new connection from `ip` as unauthenticated, or says why it is refused.
    pub(crate) fn admit(&mut self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        let key = address_key(ip);
        if let Some(penalty) = self.penalties.get(&key)
            && penalty.until > now
        {
            return Err(Refusal::Throttled {
                retry_after: penalty.until - now,
                failures: penalty.failures,
            });
        }
        let from_address = self.per_address.get(&key).copied().unwrap_or(0);
        if from_address >= self.settings.max_unauthenticated_per_address {
            return Err(Refusal::Busy {
                scope: BusyScope::Address,
                limit: self.settings.max_unauthenticated_per_address,
            });
        }
        if self.unauthenticated >= self.settings.max_unauthenticated {
            return Err(Refusal::Busy {
                scope: BusyScope::Node,
                limit: self.settings.max_unauthenticated,
            });
        }
        self.unauthenticated += 1;
        *self.per_address.entry(key).or_insert(0) += 1;
        Ok(())
    }

    /// A connection admitted from `ip` is no longer unauthenticated (it authenticated or
    /// closed).
    pub(crate) fn release(&mut self, ip: IpAddr) {
        let key = address_key(ip);
        self.unauthenticated = self.unauthenticated.saturating_sub(1);
        if let Some(count) = self.per_address.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_address.remove(&key);
            }
        }
    }

    /// A handshake from `ip` failed: its penalty grows. Returns the penalty now in force.
    pub(crate) fn failed(&mut self, ip: IpAddr, now: Instant) -> Duration {
        let key = address_key(ip);
        if !self.penalties.contains_key(&key) && self.penalties.len() >= MAX_PENALTIES {
            self.penalties
                .retain(|_, penalty| now < penalty.until + FORGET_PENALTY_AFTER);
            if self.penalties.len() >= MAX_PENALTIES
                && let Some(oldest) = self
                    .penalties
                    .iter()
                    .min_by_key(|(_, penalty)| penalty.until)
                    .map(|(key, _)| *key)
            {
                self.penalties.remove(&oldest);
            }
        }
        let penalty = self.penalties.entry(key).or_insert(Penalty {
            failures: 0,
            until: now,
        });
        if now >= penalty.until + FORGET_PENALTY_AFTER {
            penalty.failures = 0;
        }
        penalty.failures = penalty.failures.saturating_add(1);
        let wait = penalty_after(penalty.failures, &self.settings);
        penalty.until = now + wait;
        wait
    }

    /// A session from `ip` authenticated: its penalty is lifted.
    pub(crate) fn succeeded(&mut self, ip: IpAddr) {
        self.penalties.remove(&address_key(ip));
    }

    /// Unauthenticated connections counted now.
    pub(crate) fn unauthenticated(&self) -> usize {
        self.unauthenticated
    }
}

/// The penalty after `failures` failed handshakes in a row: none for the first
/// `penalty_grace`, then `penalty_initial`, doubling with each further failure, at most
/// `penalty_max`.
pub(crate) fn penalty_after(failures: u32, settings: &TransportSettings) -> Duration {
    let Some(excess) = failures.checked_sub(settings.penalty_grace + 1) else {
        return Duration::ZERO;
    };
    let factor = 1u32.checked_shl(excess.min(31)).unwrap_or(u32::MAX);
    settings
        .penalty_initial
        .checked_mul(factor)
        .unwrap_or(settings.penalty_max)
        .min(settings.penalty_max)
}

/// The key an address is counted under: IPv4 as it is, IPv6 by its /64 prefix.
pub(crate) fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}
