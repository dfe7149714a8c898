//! Where a job's pending chains go: plain arithmetic over the workers a scheduling round saw.
//!
//! GPU workers take many chains per dispatch (their slots are chains per batch); CPU pools
//! take one chain per free core. Chains are handed out one at a time to the worker with the
//! most free slots left, so a job spreads over the cluster by capacity. When every slot is
//! taken (by this job or others) and the job has nothing running, it still gets one
//! dispatch to the least-loaded worker, where it waits in that pool's queue: a job always
//! makes progress, and one that already runs gets more slots as its chains finish.
//!
//! Chains that failed before avoid the nodes where they failed while another node can run
//! them, and quarantined chains run as one task on a node that runs nothing else of their
//! job, whose other chains stay off that node meanwhile (`place_groups`; the rules are in
//! `job.rs`).

use std::collections::BTreeSet;

use crate::ids::NodeName;
use crate::sampling::{DevicePreference, WorkerKind};
use crate::wire::WireChainSpec;

/// A worker as a scheduling round saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Capacity {
    /// Its node.
    pub(crate) node: NodeName,
    /// CPU pool or GPU worker.
    pub(crate) kind: WorkerKind,
    /// Chains it runs at once.
    pub(crate) slots: u32,
    /// Chains running or queued there (by anyone).
    pub(crate) busy: u32,
}

impl Capacity {
    fn free(&self) -> u32 {
        self.slots.saturating_sub(self.busy)
    }

    fn load(&self) -> f64 {
        f64::from(self.busy) / f64::from(self.slots.max(1))
    }
}

/// Whether a worker of `kind` may run chains of a job that prefers `device`.
pub(crate) fn suits(device: DevicePreference, kind: WorkerKind) -> bool {
    match device {
        DevicePreference::Any => true,
        DevicePreference::Cpu => kind == WorkerKind::Cpu,
        DevicePreference::Gpu => kind == WorkerKind::Gpu,
    }
}

/// Splits `n_pending` chains over `workers`: how many each gets (same order as `workers`).
/// Updates each worker's `busy` by what it got, so that the next job of the same round sees
/// the slots taken. `running` tells whether the job has chains running already. (The
/// coordinator places a job's groups of chains with [`place_groups`], which does this for
/// each group over the workers it may use.)
#[cfg(test)]
pub(crate) fn place(
    n_pending: usize,
    device: DevicePreference,
    running: bool,
    workers: &mut [Capacity],
) -> Vec<u32> {
    place_among(n_pending, device, running, workers, |_| true)
}

/// `place` over the workers `allowed` lets in.
fn place_among(
    n_pending: usize,
    device: DevicePreference,
    running: bool,
    workers: &mut [Capacity],
    allowed: impl Fn(&Capacity) -> bool,
) -> Vec<u32> {
    let fits = |worker: &Capacity| suits(device, worker.kind) && allowed(worker);
    let mut counts = vec![0u32; workers.len()];
    let mut left = n_pending;
    // GPU workers first: a batch of many chains is what they are for.
    if device != DevicePreference::Cpu {
        for (index, worker) in workers.iter_mut().enumerate() {
            if worker.kind == WorkerKind::Gpu && allowed(worker) && left > 0 {
                let take = (worker.free() as usize).min(left) as u32;
                counts[index] += take;
                worker.busy += take;
                left -= take as usize;
            }
        }
    }
    while left > 0 {
        let best = workers
            .iter()
            .enumerate()
            .filter(|(_, w)| fits(w) && w.free() > 0)
            .max_by(|(_, a), (_, b)| a.free().cmp(&b.free()).then(b.load().total_cmp(&a.load())))
            .map(|(index, _)| index);
        let Some(index) = best else { break };
        counts[index] += 1;
        workers[index].busy += 1;
        left -= 1;
    }
    let placed: u32 = counts.iter().sum();
    if placed == 0 && left > 0 && !running {
        let least_loaded = workers
            .iter()
            .enumerate()
            .filter(|(_, w)| fits(w))
            .min_by(|(_, a), (_, b)| a.load().total_cmp(&b.load()))
            .map(|(index, _)| index);
        if let Some(index) = least_loaded {
            let take = (workers[index].slots.max(1) as usize).min(left) as u32;
            counts[index] += take;
            workers[index].busy += take;
        }
    }
    counts
}

/// Pending chains of a job that are placed together (see `Job::pending_groups`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingGroup {
    /// The chains.
    pub(crate) chains: Vec<WireChainSpec>,
    /// Quarantined: all of them on one worker, on a node that runs nothing else of the job.
    pub(crate) alone: bool,
    /// Nodes where they failed: used only when no other node has a worker that suits.
    pub(crate) avoid: Vec<NodeName>,
}

/// Splits a job's pending `groups` over `workers`: for each group, how many of its chains
/// each worker gets (same order as `workers`), updating `busy` as `place` does.
/// `running` tells whether the job has chains running, on `nodes_running`;
/// `nodes_quarantined` run its quarantined chains.
pub(crate) fn place_groups(
    groups: &[PendingGroup],
    device: DevicePreference,
    running: bool,
    nodes_running: &[NodeName],
    nodes_quarantined: &[NodeName],
    workers: &mut [Capacity],
) -> Vec<Vec<u32>> {
    let mut running = running;
    let mut busy_nodes: BTreeSet<NodeName> = nodes_running.iter().cloned().collect();
    let mut quarantine: BTreeSet<NodeName> = nodes_quarantined.iter().cloned().collect();
    let mut plan = Vec::with_capacity(groups.len());
    for group in groups {
        let n = group.chains.len();
        // Another node that can run them at all is better than one where they failed.
        let elsewhere = workers
            .iter()
            .any(|w| suits(device, w.kind) && !group.avoid.contains(&w.node));
        let avoided = |w: &Capacity| elsewhere && group.avoid.contains(&w.node);
        let counts = if group.alone {
            let best = workers
                .iter()
                .enumerate()
                .filter(|(_, w)| suits(device, w.kind) && !avoided(w))
                .filter(|(_, w)| !busy_nodes.contains(&w.node))
                .max_by(|(_, a), (_, b)| {
                    a.free().cmp(&b.free()).then(b.load().total_cmp(&a.load()))
                })
                .map(|(index, _)| index);
            let mut counts = vec![0u32; workers.len()];
            if let Some(index) = best {
                counts[index] = n as u32;
                workers[index].busy += n as u32;
                quarantine.insert(workers[index].node.clone());
            }
            counts
        } else {
            place_among(n, device, running, workers, |w| {
                !avoided(w) && !quarantine.contains(&w.node)
            })
        };
        for (worker, &count) in workers.iter().zip(&counts) {
            if count > 0 {
                busy_nodes.insert(worker.node.clone());
                running = true;
            }
        }
        plan.push(counts);
    }
    plan
}
