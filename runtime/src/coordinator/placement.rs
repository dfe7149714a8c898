//! Where a job's pending chains go: plain arithmetic over the workers a scheduling round saw.
//!
//! GPU workers take many chains per dispatch (their slots are chains per batch); CPU pools
//! take one chain per free core. Chains are handed out one at a time to the worker with the
//! most free slots left, so a job spreads over the cluster by capacity. When every slot is
//! taken (by this job or others) and the job has nothing running, it still gets one
//! dispatch to the least-loaded worker, where it waits in that pool's queue: a job always
//! makes progress, and one that already runs gets more slots as its chains finish.

use crate::sampling::{DevicePreference, WorkerKind};

/// A worker as a scheduling round saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Capacity {
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
/// the slots taken. `running` tells whether the job has chains running already.
pub(crate) fn place(
    n_pending: usize,
    device: DevicePreference,
    running: bool,
    workers: &mut [Capacity],
) -> Vec<u32> {
    let mut counts = vec![0u32; workers.len()];
    let mut left = n_pending;
    // GPU workers first: a batch of many chains is what they are for.
    if device != DevicePreference::Cpu {
        for (index, worker) in workers.iter_mut().enumerate() {
            if worker.kind == WorkerKind::Gpu && left > 0 {
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
            .filter(|(_, w)| suits(device, w.kind) && w.free() > 0)
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
            .filter(|(_, w)| suits(device, w.kind))
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
