//! What the coordinator has learned of its pools' speed, per model: the seconds one *wave*
//! takes (up to `slots` chains at once: a CPU pool's cores, the chains one GPU job runs), per
//! iteration of a chain, measured on the tasks that finished there.
//!
//! A task of `n` chains sent to a pool that already had `b` chains and ran `slots` at
//! once went through `ceil((b + n) / slots)` waves; its time from dispatch to its last chain
//! over those waves and over its chains' iterations (warmup + draws) is one measurement.
//! Placement (`placement.rs`) predicts a pool's finish time for more chains from it. The
//! book is bounded: past [`MAX_ENTRIES`] pools x models, the oldest entry goes.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use sampler::ModelHash;

use crate::ids::NodeName;
use crate::sampling::PoolKind;

/// Most (pool, model) pairs remembered.
pub(crate) const MAX_ENTRIES: usize = 4096;

/// Weight of a new measurement against what was known (an exponential moving average).
const NEW_WEIGHT: f64 = 0.5;

/// A pool, as placement tells pools apart across scheduling rounds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    pub(crate) node: NodeName,
    pub(crate) kind: PoolKind,
}

/// A task's timing, kept from its dispatch to its end.
#[derive(Debug, Clone)]
pub(crate) struct TaskTiming {
    pub(crate) pool: PoolKey,
    pub(crate) model: ModelHash,
    /// Chains the pool ran at once when the task was sent.
    pub(crate) slots: u32,
    /// Chains there when it was sent, this task's included.
    pub(crate) load: u32,
    /// Iterations of each of its chains (warmup + draws).
    pub(crate) iterations: u64,
    pub(crate) started: tokio::time::Instant,
}

impl TaskTiming {
    /// Seconds per wave per iteration, had the task taken `elapsed`.
    fn per_iteration(&self, elapsed: Duration) -> Option<f64> {
        let waves = self.load.div_ceil(self.slots.max(1)).max(1);
        let value = elapsed.as_secs_f64() / f64::from(waves) / self.iterations.max(1) as f64;
        (value.is_finite() && value > 0.0).then_some(value)
    }
}

/// Measured speeds, per pool and model.
#[derive(Debug, Default)]
pub(crate) struct RateBook {
    per_iteration: HashMap<(PoolKey, ModelHash), f64>,
    /// Keys in the order they were first measured: the oldest goes first.
    order: VecDeque<(PoolKey, ModelHash)>,
}

impl RateBook {
    /// Takes in a task that finished `elapsed` after its dispatch.
    pub(crate) fn record(&mut self, timing: &TaskTiming, elapsed: Duration) {
        let Some(value) = timing.per_iteration(elapsed) else {
            return;
        };
        let key = (timing.pool.clone(), timing.model);
        match self.per_iteration.get_mut(&key) {
            Some(known) => *known = NEW_WEIGHT * value + (1.0 - NEW_WEIGHT) * *known,
            None => {
                if self.order.len() >= MAX_ENTRIES
                    && let Some(oldest) = self.order.pop_front()
                {
                    self.per_iteration.remove(&oldest);
                }
                self.order.push_back(key.clone());
                self.per_iteration.insert(key, value);
            }
        }
    }

    /// Seconds a wave of chains of `iterations` iterations takes on `pool`, if measured.
    pub(crate) fn wave_seconds(
        &self,
        pool: &PoolKey,
        model: ModelHash,
        iterations: u64,
    ) -> Option<f64> {
        self.per_iteration
            .get(&(pool.clone(), model))
            .map(|per| per * iterations.max(1) as f64)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.per_iteration.len()
    }
}
