//! The sampler pools on the wire: what a job coordinator asks a worker (a node's CPU sampler
//! pool; GPU workers will speak the same protocol), and the events a running task streams
//! back through long polls.

use std::sync::Arc;

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use super::block::WireDrawBlock;
use super::is_false;
use super::sampling::{WireChainDone, WireChainSpec, WireDraws, WireSettings};
use super::{Service, WireEvent};
use crate::ids::{JobId, TaskId};

/// A pool endpoint's cluster message. Wire tag: the variant name (`"Call"`).
#[derive(RactorClusterMessage)]
pub enum PoolWire {
    /// An `Envelope<PoolRequest>`, answered by an `Envelope<Result<PoolReply, WireError>>`.
    #[rpc]
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

impl Service for PoolWire {
    type Request = PoolRequest;
    type Reply = PoolReply;
    const NAME: &'static str = "pool";

    fn call(request: Vec<u8>, reply: RpcReplyPort<Vec<u8>>) -> Self {
        Self::Call(request, reply)
    }
}

/// What a coordinator (or a test client) asks a pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PoolRequest {
    /// What the pool offers and how busy it is. Answered by [`PoolReply::Status`].
    Status,
    /// Run chains. Idempotent: a task id the pool already has (from the same sender) starts
    /// nothing new. Answered by [`PoolReply::Accepted`].
    Run(WireTask),
    /// The task's events after `ack` (which acknowledges every event up to it); waits up to
    /// `wait_ms` for one when none is ready. Answered by [`PoolReply::Events`].
    Poll {
        /// The task.
        task: TaskId,
        /// The last event received (0: none).
        ack: u64,
        /// Longest wait for a new event, in milliseconds.
        wait_ms: u32,
    },
    /// Stop the task's chains and forget it. Answered by [`PoolReply::Cancelled`].
    Cancel {
        /// The task.
        task: TaskId,
    },
    /// Test-only: make the pool fail (refused unless the node runs with
    /// `--allow-fault-injection`). Answered by [`PoolReply::FaultInjected`] before the fault.
    InjectFault(WireFault),
}

/// A fault a test asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireFault {
    /// The pool's worker actor panics while handling a message; its supervisor restarts it.
    PanicPool,
    /// The chains running now (or, when none runs, the next ones to start) fail as if their
    /// device were lost: [`WireFailure::Worker`]. (A real device loss is the GPU
    /// supervisor's to handle: it restarts the worker.)
    FailRuns,
    /// From now on, the node's process aborts as soon as the pool starts a chain, as a
    /// request that kills any node running it would (for tests of poison jobs).
    AbortOnRun,
}

/// What a pool answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PoolReply {
    /// Capacity and load.
    Status {
        /// CPU threads or a GPU device.
        kind: WirePoolKind,
        /// Chains it runs at once.
        slots: u32,
        /// Chains running now.
        running: u32,
        /// Chains waiting for a slot.
        queued: u32,
    },
    /// The task runs (or already ran).
    Accepted {
        /// The task.
        task: TaskId,
    },
    /// Events after the poll's `ack`, oldest first (none when the wait ran out).
    Events {
        /// The task.
        task: TaskId,
        /// The events.
        events: Vec<WireEvent<WireTaskEvent>>,
    },
    /// The task is stopped and forgotten.
    Cancelled {
        /// The task.
        task: TaskId,
    },
    /// The fault will happen next.
    FaultInjected,
}

/// What kind of worker a pool is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WirePoolKind {
    /// One chain per CPU core.
    Cpu,
    /// Many chains per dispatch on a GPU.
    Gpu,
}

/// Chains of one job for one pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireTask {
    /// Chosen by the coordinator; repeated on a retry.
    pub task: TaskId,
    /// The job (also in the envelope, for log spans).
    pub job: JobId,
    /// The model IR as MessagePack (`sampler::Model::to_msgpack`); the pool decodes and
    /// validates it.
    #[serde(with = "serde_bytes")]
    pub model: Vec<u8>,
    /// How to run each chain.
    pub settings: WireSettings,
    /// The job's seed: with a chain's number, its random stream.
    pub seed: u64,
    /// The chains.
    pub chains: Vec<WireChainSpec>,
    /// Draws dropped at the start of chains that come with a tuning (warm starts), before
    /// the `num_draws` kept ones.
    pub burn_in: u64,
    /// The coordinator reads [`WireTaskEvent::Block`]: a GPU pool may stream the task's draws
    /// as blocks. Absent from the bytes when false (older coordinators never get a block).
    #[serde(default, skip_serializing_if = "is_false")]
    pub blocks: bool,
    /// The job's client writes the reported values from the model: a GPU pool's blocks may
    /// carry each draw's unconstrained position instead ([`WireDrawBlock::positions`]).
    /// Absent from the bytes when false (an older pool ignores it and sends values).
    #[serde(default, skip_serializing_if = "is_false")]
    pub positions: bool,
}

/// What a running task reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WireTaskEvent {
    /// A chain advanced, with the draws since its last event (none during warmup unless
    /// `save_warmup`).
    Progress {
        /// The chain.
        chain: u32,
        /// Iterations done (warmup and burn-in included).
        iteration: u64,
        /// Iterations in all.
        total: u64,
        /// New draws.
        draws: Option<WireDraws>,
    },
    /// A chain finished; all its draws were sent before.
    ChainDone(WireChainDone),
    /// Draws and progress of many chains at once (only to a coordinator that asked for
    /// blocks, [`WireTask::blocks`]): each entry is to be read as a `Progress` of its chain.
    /// Shared: an outbox answers every poll with copies of its events, and a block is
    /// megabytes (it encodes as the block itself).
    Block(Arc<WireDrawBlock>),
    /// A chain failed: a sampler error, such as no finite starting point (running it again
    /// would fail again), or its worker's failure (`cause`).
    ChainFailed {
        /// The chain.
        chain: u32,
        /// The sampler's or the worker's error.
        error: String,
        /// What failed. Absent from the bytes for [`WireFailure::Sampler`], so older peers
        /// read what they always read, and read an absent one as that.
        #[serde(default, skip_serializing_if = "WireFailure::is_sampler")]
        cause: WireFailure,
    },
}

/// What made a chain fail: whether running it again can help.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireFailure {
    /// The sampler itself: the same chain fails again wherever it runs.
    #[default]
    Sampler,
    /// The worker under the chain (a lost GPU device, a panic, no thread): the chain can run
    /// again on another worker, or on this one once restarted.
    Worker,
}

impl WireFailure {
    /// Whether this is [`WireFailure::Sampler`] (the default, left out of the bytes).
    pub fn is_sampler(&self) -> bool {
        *self == WireFailure::Sampler
    }
}

impl WireTaskEvent {
    /// Bytes this takes on the wire, roughly.
    pub fn estimated_bytes(&self) -> usize {
        match self {
            WireTaskEvent::Progress { draws, .. } => {
                48 + draws.as_ref().map_or(0, WireDraws::estimated_bytes)
            }
            WireTaskEvent::ChainDone(done) => done.estimated_bytes(),
            WireTaskEvent::Block(block) => block.estimated_bytes(),
            WireTaskEvent::ChainFailed { error, .. } => 48 + error.len(),
        }
    }
}
