//! The job coordinator on the wire: a client submits a sampling request to any node's
//! coordinator and follows the job's events (placement, draws as chains progress, finished
//! chains, retries) through long polls.

use std::sync::Arc;

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use super::block::WireDrawBlock;
use super::is_false;
use super::pool::WirePoolKind;
use super::sampling::{WireChainDone, WireDraws, WireSettings, WireTuning};
use super::{Envelope, Service, WireEvent};
use crate::ids::{JobId, NodeName, RequestId};
use crate::link::LinkToken;

/// A coordinator endpoint's cluster message. Wire tag: the variant name (`"Call"`).
#[derive(RactorClusterMessage)]
pub enum JobWire {
    /// An `Envelope<JobRequest>`, answered by an `Envelope<Result<JobReply, WireError>>`.
    #[rpc]
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

impl Service for JobWire {
    type Request = JobRequest;
    type Reply = JobReply;
    const NAME: &'static str = "coordinator";

    fn call(request: Vec<u8>, reply: RpcReplyPort<Vec<u8>>) -> Self {
        Self::Call(request, reply)
    }
}

/// What a client asks a coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobRequest {
    /// Start a job. Idempotent on the envelope's `(sender, request_id)`: a retry after a
    /// timeout gets the same job. Answered by [`JobReply::Submitted`].
    Submit(WireSampleRequest),
    /// The job's events after `ack` (which acknowledges every event up to it); waits up to
    /// `wait_ms` for one when none is ready. Answered by [`JobReply::Events`]. A job whose
    /// client stops polling is cancelled after a while.
    Poll {
        /// The job.
        job: JobId,
        /// The last event received (0: none).
        ack: u64,
        /// Longest wait for a new event, in milliseconds.
        wait_ms: u32,
        /// The events after those the last poll was answered with, rather than after `ack`:
        /// a job link keeps two polls at the node, the next asked before the answer of the
        /// last has arrived (so before the client can acknowledge it). A poll without it
        /// starts from `ack` again.
        #[serde(default, skip_serializing_if = "is_false")]
        follow: bool,
    },
    /// Stop the job everywhere. Answered by [`JobReply::Cancelled`].
    Cancel {
        /// The job.
        job: JobId,
    },
}

impl JobRequest {
    /// The request from `me` in an envelope of a fresh request id (polls are idempotent:
    /// the ack says what the caller has), about the job it names (`job` for a submission).
    pub(crate) fn envelope(self, me: &NodeName, job: JobId) -> Envelope<JobRequest> {
        let job = match &self {
            JobRequest::Cancel { job } | JobRequest::Poll { job, .. } => *job,
            JobRequest::Submit(_) => job,
        };
        Envelope::new(RequestId(crate::ids::fresh_u64()), me, self).with_job(job)
    }
}

/// A sampling request: version 1 of the job format (the envelope carries the version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireSampleRequest {
    /// The model IR as MessagePack (`sampler::Model::to_msgpack`); each node that runs chains
    /// decodes and validates it.
    #[serde(with = "serde_bytes")]
    pub model: Vec<u8>,
    /// How to run each chain.
    pub settings: WireSettings,
    /// Chains, numbered `0..n_chains`.
    pub n_chains: u32,
    /// The seed: with a chain's number, its random stream (a chain run again anywhere draws
    /// the same numbers).
    pub seed: u64,
    /// Where chains may run.
    pub device: WireDevice,
    /// How chains warm up.
    pub warmup: WireWarmup,
    /// Only these chains, in increasing order, each below `n_chains` (they keep their
    /// numbers, so their random streams): a client that lost its coordinator resubmits the
    /// chains it has not received. `None`: every chain. Absent from the bytes when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chains: Option<Vec<u32>>,
    /// The client reads [`WireJobEvent::Block`]: the coordinator forwards blocks of draws as
    /// they came (otherwise it splits them into `Progress` events). Absent from the bytes when
    /// false, as older clients send it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub blocks: bool,
    /// The client polls through a job link (`JobReply::Submitted::link`), its own byte
    /// stream to the coordinator's node, where it can. Absent from the bytes when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub link: bool,
    /// The client reads blocks of unconstrained positions and writes each draw's reported
    /// values itself, from the model it sent ([`WireDrawBlock::positions`]): fewer bytes on
    /// the wire. Only with `blocks`. Absent from the bytes when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub positions: bool,
}

/// Where a job's chains may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireDevice {
    /// Wherever there is room (GPU workers first when there are some).
    Any,
    /// CPU sampler pools only.
    Cpu,
    /// GPU workers only.
    Gpu,
}

/// How a job's chains warm up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireWarmup {
    /// Each chain runs its own warmup.
    Independent,
    /// One chain warms up; every chain then starts from its final position with its step size
    /// and metric, drops `burn_in` draws and keeps `num_draws`.
    Broadcast {
        /// Draws dropped at the start of each chain.
        burn_in: u64,
    },
}

/// What a coordinator answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobReply {
    /// The job runs.
    Submitted {
        /// Its id, for polls.
        job: JobId,
        /// Its chains.
        n_chains: u32,
        /// The token that opens the job's link, if the request asked for one and the node
        /// has links. Absent from the bytes when `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        link: Option<LinkToken>,
        /// The coordinator answers polls that follow (`JobRequest::Poll::follow`) in turn,
        /// each after the one before: a link may keep several at the node. False (absent)
        /// from an older node, which answers a waiting poll at once when the next comes: a
        /// link then keeps one.
        #[serde(default, skip_serializing_if = "is_false")]
        follows: bool,
    },
    /// Events after the poll's `ack`, oldest first (none when the wait ran out).
    Events {
        /// The job.
        job: JobId,
        /// The events.
        events: Vec<WireEvent<WireJobEvent>>,
        /// Every note on how the job's chains ran so far (`crate::RunNote`: at most
        /// `MAX_NOTES`, each at most `MAX_NOTE_BYTES`), in every answer: a client that
        /// fails over keeps the ones it had. Absent from the bytes when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<WireRunNote>,
    },
    /// The job is stopped.
    Cancelled {
        /// The job.
        job: JobId,
    },
}

/// What happens to a job, in order. Chain numbers are `u32::MAX` for the warmup chain of
/// [`WireWarmup::Broadcast`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WireJobEvent {
    /// Chains were sent to a pool.
    Placed {
        /// The chains.
        chains: Vec<u32>,
        /// The pool's node.
        node: String,
        /// Its kind (named `worker` on the wire, as before the pools were named so).
        #[serde(rename = "worker")]
        pool: WirePoolKind,
    },
    /// The warmup chain finished: every chain starts from its result.
    WarmupDone {
        /// Where it ran.
        node: String,
        /// The tuning it found.
        tuning: WireTuning,
        /// Its gradient evaluations.
        grad_evals: u64,
        /// Its wall time.
        seconds: f64,
    },
    /// A chain advanced, with its new draws.
    Progress {
        /// The chain.
        chain: u32,
        /// Its attempt (1, then 2 after a retry, ...).
        attempt: u32,
        /// Iterations done.
        iteration: u64,
        /// Iterations in all.
        total: u64,
        /// New draws.
        draws: Option<WireDraws>,
    },
    /// Draws and progress of many chains (only to a client that asked for blocks,
    /// [`WireSampleRequest::blocks`]): each entry is to be read as a `Progress` of its chain,
    /// of the attempt at the same index of `attempts`.
    Block {
        /// Per entry of the block: its chain's attempt.
        attempts: Vec<u32>,
        /// The draws (shared, as in [`super::WireTaskEvent::Block`]).
        block: Arc<WireDrawBlock>,
    },
    /// A chain finished; all its draws came before.
    ChainDone {
        /// Its attempt.
        attempt: u32,
        /// Where it ran.
        node: String,
        /// Its report.
        done: WireChainDone,
    },
    /// Chains that were running on a worker that failed run again: their earlier draws
    /// are void.
    Retried {
        /// The chains.
        chains: Vec<u32>,
        /// The worker's node.
        node: String,
        /// What happened to it.
        reason: String,
        /// Their new attempt.
        attempt: u32,
    },
    /// The coordinator's node drains (it is shutting down): the job goes on there until it
    /// finishes or `grace_ms` pass; then the node leaves and the client resubmits what it has
    /// not received elsewhere.
    Draining {
        /// The coordinator's node.
        node: String,
        /// How long the node waits for its work, in milliseconds.
        grace_ms: u64,
    },
    /// Every chain finished.
    Finished {
        /// Every retry, in order.
        retried: Vec<WireRetry>,
    },
    /// The job failed.
    Failed {
        /// Why.
        error: String,
    },
}

/// A note on how some of a job's chains ran on one node (`crate::RunNote`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRunNote {
    /// The node.
    pub node: String,
    /// What it said (a GPU task's device, precision and why; a fallback to the CPU and why).
    pub text: String,
}

/// One chain run again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRetry {
    /// The chain.
    pub chain: u32,
    /// The node it had been running on.
    pub node: String,
    /// What happened there.
    pub reason: String,
    /// The attempt that followed.
    pub attempt: u32,
}

impl WireJobEvent {
    /// Whether this is the job's last event (it finished or failed).
    pub fn ends_job(&self) -> bool {
        matches!(
            self,
            WireJobEvent::Finished { .. } | WireJobEvent::Failed { .. }
        )
    }

    /// Bytes this takes on the wire, roughly.
    pub fn estimated_bytes(&self) -> usize {
        match self {
            WireJobEvent::Progress { draws, .. } => {
                64 + draws.as_ref().map_or(0, WireDraws::estimated_bytes)
            }
            WireJobEvent::ChainDone { done, .. } => 64 + done.estimated_bytes(),
            WireJobEvent::Block { attempts, block } => 5 * attempts.len() + block.estimated_bytes(),
            WireJobEvent::WarmupDone { tuning, .. } => 128 + 9 * tuning.inv_metric.len(),
            WireJobEvent::Placed { chains, .. } | WireJobEvent::Retried { chains, .. } => {
                128 + 5 * chains.len()
            }
            WireJobEvent::Finished { retried } => 64 + 96 * retried.len(),
            WireJobEvent::Failed { error } => 64 + error.len(),
            WireJobEvent::Draining { node, .. } => 64 + node.len(),
        }
    }
}
