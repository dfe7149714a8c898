//! Where a job's pending chains go: plain arithmetic over the pools a scheduling round saw
//! and what the coordinator measured of them (`rates.rs`).
//!
//! **By expected finish time.** Where the pools that may run a job have been measured on
//! its model, the job's chains are split so that the whole job finishes soonest: each pool
//! runs `slots` chains at once in waves of a measured length, and chains go where the last
//! one finishes earliest (the smallest makespan over the pools' queues). A pool whose
//! single wave takes longer than the job takes elsewhere gets nothing. Only what starts now
//! is sent (a pool's free slots; a GPU pool's slots are the chains one GPU job runs), so
//! later rounds, as chains finish, correct an estimate that was off and balance chains of
//! unequal length.
//!
//! **Pools not measured yet** get a small share first (a probe): a CPU pool its free
//! slots, spread one chain at a time to the pool with the most free slots; a GPU pool
//! part of the job (all of it when it is the only pool that may run the job). While a
//! probe runs, the rest of the job waits for its measurement, unless the measured pools
//! would finish all of it before the probe has even ended. With no measurement at all the
//! probes are the placement.
//!
//! When every slot is taken (by this job or others) and the job has nothing running, it
//! still gets one dispatch to the least-loaded pool, where it waits in that pool's queue:
//! a job always makes progress, and one that already runs gets more as its chains finish.
//!
//! Chains that failed before avoid the nodes where they failed while another node can run
//! them, and quarantined chains run as one task on a node that runs nothing else of their
//! job, whose other chains stay off that node meanwhile (`place_groups`; the rules are in
//! `job.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::ids::NodeName;
use crate::sampling::{DevicePreference, PoolKind};
use crate::wire::WireChainSpec;

/// A pool as a scheduling round saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Capacity {
    /// Its node.
    pub(crate) node: NodeName,
    /// CPU pool or GPU pool.
    pub(crate) kind: PoolKind,
    /// Chains it runs at once.
    pub(crate) slots: u32,
    /// Chains running or queued there (by anyone).
    pub(crate) busy: u32,
    /// Seconds one wave of the job being placed takes there, as measured on its model;
    /// `None`: not measured yet.
    pub(crate) wave_seconds: Option<f64>,
    /// How long the job's chains there have run without a measurement yet (its probe).
    pub(crate) probing: Option<Duration>,
}

impl Capacity {
    /// A pool not measured on any model yet.
    pub(crate) fn new(node: NodeName, kind: PoolKind, slots: u32, busy: u32) -> Capacity {
        Capacity {
            node,
            kind,
            slots,
            busy,
            wave_seconds: None,
            probing: None,
        }
    }

    fn free(&self) -> u32 {
        self.slots.saturating_sub(self.busy)
    }

    /// Chains it can finish within `seconds` (a wave of `wave` seconds each), beyond what it
    /// has already.
    fn chains_within(&self, seconds: f64, wave: f64) -> u64 {
        let waves = (seconds / wave).floor();
        if !waves.is_finite() || waves < 1.0 {
            return 0;
        }
        let total = (waves.min(f64::from(u32::MAX)) as u64) * u64::from(self.slots.max(1));
        total.saturating_sub(u64::from(self.busy))
    }

    /// Seconds until `more` chains have run there, after what it has already.
    fn finish(&self, more: u64, wave: f64) -> f64 {
        let load = u64::from(self.busy) + more;
        load.div_ceil(u64::from(self.slots.max(1))) as f64 * wave
    }

    fn load(&self) -> f64 {
        f64::from(self.busy) / f64::from(self.slots.max(1))
    }
}

/// Whether a pool of `kind` may run chains of a job that prefers `device`.
pub(crate) fn suits(device: DevicePreference, kind: PoolKind) -> bool {
    match device {
        DevicePreference::Any => true,
        DevicePreference::Cpu => kind == PoolKind::Cpu,
        DevicePreference::Gpu => kind == PoolKind::Gpu,
    }
}

/// Splits `n_pending` chains over `pools`: how many each gets (same order as `pools`).
/// Updates each pool's `busy` by what it got, so that the next job of the same round sees
/// the slots taken. `running` tells whether the job has chains running already. (The
/// coordinator places a job's groups of chains with [`place_groups`], which does this for
/// each group over the pools it may use.)
#[cfg(test)]
pub(crate) fn place(
    n_pending: usize,
    device: DevicePreference,
    running: bool,
    pools: &mut [Capacity],
) -> Vec<u32> {
    place_among(n_pending, device, running, pools, |_| true)
}

/// `place` over the pools `allowed` lets in.
fn place_among(
    n_pending: usize,
    device: DevicePreference,
    running: bool,
    pools: &mut [Capacity],
    allowed: impl Fn(&Capacity) -> bool,
) -> Vec<u32> {
    let fits = |pool: &Capacity| suits(device, pool.kind) && allowed(pool);
    let suitable: Vec<usize> = (0..pools.len()).filter(|&i| fits(&pools[i])).collect();
    let mut counts = vec![0u32; pools.len()];
    let mut left = n_pending;
    // Probes: a share for each pool not measured yet, GPU pools first (a batch of many
    // chains is what they are for).
    let unmeasured: Vec<usize> = suitable
        .iter()
        .copied()
        .filter(|&i| pools[i].wave_seconds.is_none() && pools[i].probing.is_none())
        .collect();
    let share = if suitable.len() <= 1 {
        n_pending
    } else {
        n_pending.div_ceil(2 * suitable.len()).max(1)
    };
    for &index in &unmeasured {
        if pools[index].kind == PoolKind::Gpu && left > 0 {
            let take = (pools[index].free() as usize).min(share);
            give(&mut counts, pools, index, take, &mut left);
        }
    }
    while left > 0 {
        let best = unmeasured
            .iter()
            .copied()
            .filter(|&i| pools[i].kind == PoolKind::Cpu && pools[i].free() > 0)
            .max_by(|&a, &b| {
                let (a, b) = (&pools[a], &pools[b]);
                a.free().cmp(&b.free()).then(b.load().total_cmp(&a.load()))
            });
        let Some(index) = best else { break };
        give(&mut counts, pools, index, 1, &mut left);
    }
    // The rest by expected finish time over the measured pools.
    let measured: Vec<usize> = suitable
        .iter()
        .copied()
        .filter(|&i| pools[i].wave_seconds.is_some())
        .collect();
    if left > 0 && !measured.is_empty() {
        let plan = split_by_finish_time(left as u64, &measured, pools);
        let makespan = measured
            .iter()
            .zip(&plan)
            .filter(|&(_, &m)| m > 0)
            .map(|(&i, &m)| pools[i].finish(m, wave(&pools[i])))
            .fold(0.0, f64::max);
        // A probe still running that has not yet taken as long as the measured pools
        // would for all of it: wait for its measurement.
        let wait = suitable.iter().any(|&i| {
            pools[i].wave_seconds.is_none()
                && pools[i].probing.is_some_and(|d| d.as_secs_f64() < makespan)
        });
        if !wait {
            for (&index, &m) in measured.iter().zip(&plan) {
                let now = (m as usize).min(pools[index].free() as usize);
                give(&mut counts, pools, index, now, &mut left);
            }
        }
    }
    let placed: u32 = counts.iter().sum();
    if placed == 0 && left > 0 && !running {
        let least_loaded = suitable
            .iter()
            .copied()
            .min_by(|&a, &b| pools[a].load().total_cmp(&pools[b].load()));
        if let Some(index) = least_loaded {
            let take = pools[index].slots.max(1) as usize;
            give(&mut counts, pools, index, take, &mut left);
        }
    }
    counts
}

/// Hands `take` more chains (at most `left`) to pool `index`.
fn give(counts: &mut [u32], pools: &mut [Capacity], index: usize, take: usize, left: &mut usize) {
    let take = take.min(*left) as u32;
    counts[index] += take;
    pools[index].busy += take;
    *left -= take as usize;
}

/// A pool's measured wave, or never.
fn wave(pool: &Capacity) -> f64 {
    pool.wave_seconds.unwrap_or(f64::INFINITY)
}

/// How many of `n` chains each of the `measured` pools gets so that the last one finishes
/// soonest: the smallest time by which they can run all `n` (bisection over a monotone
/// count), then each pool, quickest wave first, up to what it finishes by then.
fn split_by_finish_time(n: u64, measured: &[usize], pools: &[Capacity]) -> Vec<u64> {
    let within = |seconds: f64| -> u64 {
        measured
            .iter()
            .map(|&i| pools[i].chains_within(seconds, wave(&pools[i])))
            .fold(0u64, u64::saturating_add)
    };
    // One pool alone can run them all by `high`.
    let mut high = measured
        .iter()
        .map(|&i| pools[i].finish(n, wave(&pools[i])))
        .fold(f64::INFINITY, f64::min);
    let mut low = 0.0;
    for _ in 0..100 {
        let mid = 0.5 * (low + high);
        if within(mid) >= n {
            high = mid;
        } else {
            low = mid;
        }
        if high - low <= high * 1e-9 {
            break;
        }
    }
    let mut order: Vec<usize> = (0..measured.len()).collect();
    order.sort_by(|&a, &b| wave(&pools[measured[a]]).total_cmp(&wave(&pools[measured[b]])));
    let mut plan = vec![0u64; measured.len()];
    let mut left = n;
    for k in order {
        let pool = &pools[measured[k]];
        let take = pool.chains_within(high, wave(pool)).min(left);
        plan[k] = take;
        left -= take;
    }
    plan
}

/// Pending chains of a job that are placed together (see `Job::pending_groups`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingGroup {
    /// The chains.
    pub(crate) chains: Vec<WireChainSpec>,
    /// Quarantined: all of them on one pool, on a node that runs nothing else of the job.
    pub(crate) alone: bool,
    /// Nodes where they failed: used only when no other node has a pool that suits.
    pub(crate) avoid: Vec<NodeName>,
}

/// Splits a job's pending `groups` over `pools`: for each group, how many of its chains
/// each pool gets (same order as `pools`), updating `busy` as `place` does.
/// `running` tells whether the job has chains running, on `nodes_running`;
/// `nodes_quarantined` run its quarantined chains.
pub(crate) fn place_groups(
    groups: &[PendingGroup],
    device: DevicePreference,
    running: bool,
    nodes_running: &[NodeName],
    nodes_quarantined: &[NodeName],
    pools: &mut [Capacity],
) -> Vec<Vec<u32>> {
    let mut running = running;
    let mut busy_nodes: BTreeSet<NodeName> = nodes_running.iter().cloned().collect();
    let mut quarantine: BTreeSet<NodeName> = nodes_quarantined.iter().cloned().collect();
    let mut plan = Vec::with_capacity(groups.len());
    for group in groups {
        let n = group.chains.len();
        // Another node that can run them at all is better than one where they failed.
        let elsewhere = pools
            .iter()
            .any(|w| suits(device, w.kind) && !group.avoid.contains(&w.node));
        let avoided = |w: &Capacity| elsewhere && group.avoid.contains(&w.node);
        let counts = if group.alone {
            let best = pools
                .iter()
                .enumerate()
                .filter(|(_, w)| suits(device, w.kind) && !avoided(w))
                .filter(|(_, w)| !busy_nodes.contains(&w.node))
                .max_by(|(_, a), (_, b)| {
                    a.free().cmp(&b.free()).then(b.load().total_cmp(&a.load()))
                })
                .map(|(index, _)| index);
            let mut counts = vec![0u32; pools.len()];
            if let Some(index) = best {
                counts[index] = n as u32;
                pools[index].busy += n as u32;
                quarantine.insert(pools[index].node.clone());
            }
            counts
        } else {
            place_among(n, device, running, pools, |w| {
                !avoided(w) && !quarantine.contains(&w.node)
            })
        };
        for (pool, &count) in pools.iter().zip(&counts) {
            if count > 0 {
                busy_nodes.insert(pool.node.clone());
                running = true;
            }
        }
        plan.push(counts);
    }
    plan
}
