//! Remote sampling as a client sees it: the request, the updates streamed while a job runs,
//! and the outcome, assembled from the coordinator's events into the sampler's own
//! [`ChainTrace`]s.
//!
//! Chains are numbered `0..n_chains` and the seed is the job's: a chain that runs again after
//! a failure (anywhere in the cluster) draws from the same random stream, so its draws are
//! the ones it would have produced the first time (on the same kind of device).
//!
//! With [`WarmupMode::Broadcast`] one extra chain, [`WARMUP_CHAIN`], runs the warmup alone
//! (eXMC's warmup-once-then-broadcast). Unlike eXMC, every chain then starts from that chain's
//! final position, not from the initial point, with its step size and metric, and drops
//! `burn_in` draws before keeping `num_draws`: the chains all start at one point, and the
//! burn-in lets their independent random streams pull them apart before draws count (R-hat
//! compares chains, and chains that started together look converged sooner than they are).
//!
//! A client that loses the node it submitted to (its coordinator) keeps the chains it has
//! received whole and submits the others again elsewhere, as a job over that subset with
//! the same seed and settings ([`Failover`]): the [`Assembler`] drops their partial draws
//! and takes them from the new job, so the outcome is the one an undisturbed run gives. A
//! broadcast warmup runs again there, from the same random stream.

use gpu_actor::PrecisionMode;
use sampler::{
    ChainId, ChainTrace, CheckedModel, Limits, Model, ModelError, OutputWriter, SamplerSettings,
    Seed, Tuning,
};

use crate::ids::{JobId, NodeName};
use crate::limits::{Holder, JobLimits, JobShape, LimitExceeded};
use crate::notes::RunNote;
use crate::wire::{WireDevice, WirePoolKind, WireSampleRequest, WireSettings, WireWarmup};

/// The chain number of the warmup chain of [`WarmupMode::Broadcast`]: its own random stream,
/// distinct from every sampling chain's.
pub const WARMUP_CHAIN: ChainId = ChainId(u32::MAX);

/// Most chains in one job.
pub const MAX_CHAINS: u32 = 1 << 20;

/// Draws dropped by default at the start of each chain of [`WarmupMode::Broadcast`].
pub const DEFAULT_BURN_IN: u64 = 100;

/// Where a job's chains may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DevicePreference {
    /// Wherever there is room.
    #[default]
    Any,
    /// CPU sampler pools only.
    Cpu,
    /// GPU workers only.
    Gpu,
}

/// How a job's chains warm up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WarmupMode {
    /// Each chain runs its own warmup (the default).
    #[default]
    Independent,
    /// One chain warms up; all chains start from its final position and tuning, drop
    /// `burn_in` draws, then keep `num_draws` (see the module documentation).
    Broadcast {
        /// Draws dropped at the start of each chain.
        burn_in: u64,
    },
}

/// A sampling job for the cluster.
#[derive(Debug, Clone)]
pub struct SampleRequest {
    /// The model (plain data; it travels as MessagePack and each worker validates it).
    pub model: Model,
    /// How to run each chain (`threads` is ignored: workers run one chain per core).
    pub settings: SamplerSettings,
    /// Chains, numbered `0..n_chains`.
    pub n_chains: u32,
    /// The seed.
    pub seed: Seed,
    /// Where chains may run.
    pub device: DevicePreference,
    /// How chains warm up.
    pub warmup: WarmupMode,
    /// The precision of the chains that run on GPUs (auto by default: f32 where a check
    /// finds it good enough for the model, else f64 or the CPU).
    pub gpu_precision: PrecisionMode,
}

impl SampleRequest {
    /// `n_chains` chains of `model` with `settings` and `seed`, anywhere, each with its own
    /// warmup.
    pub fn new(model: Model, settings: SamplerSettings, n_chains: u32, seed: Seed) -> Self {
        Self {
            model,
            settings,
            n_chains,
            seed,
            device: DevicePreference::Any,
            warmup: WarmupMode::Independent,
            gpu_precision: PrecisionMode::Auto,
        }
    }

    /// What the job will hold where every draw is kept: the client, which keeps what it
    /// asked for. An error when the model does not validate.
    pub fn shape(&self) -> Result<JobShape, ModelError> {
        let model = CheckedModel::new(self.model.clone(), &Limits::default())?;
        let burn_in = match self.warmup {
            WarmupMode::Broadcast { burn_in } => burn_in,
            WarmupMode::Independent => 0,
        };
        Ok(JobShape::new(
            &model,
            &self.settings,
            u64::from(self.n_chains),
            burn_in,
        ))
    }

    /// What writes each draw's reported values from its unconstrained position, for a
    /// client that takes blocks of positions: `None` where the model does not validate.
    pub(crate) fn output_writer(&self) -> Option<OutputWriter> {
        let model = CheckedModel::new(self.model.clone(), &Limits::default()).ok()?;
        Some(OutputWriter::new(model.program()))
    }

    /// Checks the request against `limits` (the caller's: what it can keep; each node checks
    /// its own again), before anything is sized from it or it is sent.
    pub fn check(&self, limits: &JobLimits, holder: &Holder) -> Result<(), RequestError> {
        Ok(limits.check(&self.shape()?, "job", holder)?)
    }

    /// The request on the wire.
    pub fn to_wire(&self) -> WireSampleRequest {
        WireSampleRequest {
            model: self.model.to_msgpack(),
            settings: WireSettings::from(&self.settings).with_precision(self.gpu_precision),
            n_chains: self.n_chains,
            seed: self.seed.0,
            device: match self.device {
                DevicePreference::Any => WireDevice::Any,
                DevicePreference::Cpu => WireDevice::Cpu,
                DevicePreference::Gpu => WireDevice::Gpu,
            },
            warmup: match self.warmup {
                WarmupMode::Independent => WireWarmup::Independent,
                WarmupMode::Broadcast { burn_in } => WireWarmup::Broadcast { burn_in },
            },
            chains: None,
            blocks: true,
            // The client says so where it can write values from the model (`sample`).
            positions: false,
            link: false,
        }
    }
}

/// Why [`SampleRequest::check`] refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The model does not validate.
    #[error("invalid model: {0}")]
    Model(#[from] ModelError),
    /// The job is over a limit.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
}

/// A kind of worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// A CPU sampler pool.
    Cpu,
    /// A GPU worker.
    Gpu,
}

impl From<WirePoolKind> for PoolKind {
    fn from(kind: WirePoolKind) -> Self {
        match kind {
            WirePoolKind::Cpu => PoolKind::Cpu,
            WirePoolKind::Gpu => PoolKind::Gpu,
        }
    }
}

impl std::fmt::Display for PoolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PoolKind::Cpu => "cpu",
            PoolKind::Gpu => "gpu",
        })
    }
}

/// Something that happened to a running job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobUpdate {
    /// Chains were sent to a pool.
    Placed {
        /// The chains ([`WARMUP_CHAIN`] for the warmup chain).
        chains: Vec<ChainId>,
        /// The pool's node.
        node: NodeName,
        /// The pool's kind.
        pool: PoolKind,
    },
    /// The warmup chain of [`WarmupMode::Broadcast`] finished.
    WarmupDone(WarmupReport),
    /// A chain advanced.
    Progress {
        /// The chain.
        chain: ChainId,
        /// Iterations done.
        iteration: u64,
        /// Iterations in all.
        total: u64,
    },
    /// A chain finished and all its draws arrived.
    ChainDone {
        /// The chain.
        chain: ChainId,
        /// Where it ran.
        node: NodeName,
        /// Its attempt.
        attempt: u32,
    },
    /// Chains run again after their worker failed.
    Retried(Vec<Retry>),
    /// The job's coordinator drains (its node is shutting down): the job goes on there
    /// until it finishes or the node leaves after `grace`; then the client fails over.
    CoordinatorDraining {
        /// The coordinator's node.
        node: NodeName,
        /// How long the node waits for its work before it leaves.
        grace: std::time::Duration,
    },
    /// The client lost the job's coordinator and resubmitted the chains it had not received
    /// to another node.
    FailedOver(Failover),
}

/// A job moved to another coordinator after the client lost the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover {
    /// The node that was lost.
    pub from: NodeName,
    /// What happened to it.
    pub reason: String,
    /// The node that took the chains.
    pub to: NodeName,
    /// The job there.
    pub job: JobId,
    /// The chains resubmitted (every chain not yet received whole).
    pub chains: Vec<ChainId>,
}

/// A chain run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The chain ([`WARMUP_CHAIN`] for the warmup chain).
    pub chain: ChainId,
    /// The node it was running on.
    pub node: NodeName,
    /// What happened there.
    pub reason: String,
    /// The attempt that followed (2 for the first retry).
    pub attempt: u32,
}

/// The warmup chain of [`WarmupMode::Broadcast`].
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupReport {
    /// Where it ran.
    pub node: NodeName,
    /// What it found.
    pub tuning: Tuning,
    /// Its gradient evaluations.
    pub grad_evals: u64,
    /// Its wall time.
    pub seconds: f64,
}

/// Where a chain ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPlacement {
    /// The chain.
    pub chain: ChainId,
    /// The node whose result was kept.
    pub node: NodeName,
    /// Attempts it took (1 without a retry).
    pub attempts: u32,
}

/// A finished job.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    /// The job (after a failover, the one submitted last).
    pub job: JobId,
    /// One trace per chain, in chain order.
    pub traces: Vec<ChainTrace>,
    /// Where each chain ran, in chain order.
    pub placements: Vec<ChainPlacement>,
    /// Every retry, in order (a failover adds one per chain it resubmitted, naming the
    /// lost node).
    pub retried: Vec<Retry>,
    /// Every failover, in order.
    pub failovers: Vec<Failover>,
    /// The warmup chain, with [`WarmupMode::Broadcast`].
    pub warmup: Option<WarmupReport>,
    /// How chains ran, as their nodes said: where a GPU task ran, in which precision and
    /// why, or why a GPU node ran them on its CPU (at most [`crate::notes::MAX_NOTES`], each at most
    /// `MAX_NOTE_BYTES`, each once; across failovers, every coordinator's).
    pub notes: Vec<RunNote>,
    /// From submission to the last event.
    pub wall_seconds: f64,
    /// How the job's polls travelled.
    pub polls: PollCounts,
}

/// How many of a job's polls were answered through its job link and how many through the
/// cluster session (where no link opened, or after one failed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollCounts {
    /// Through the job link.
    pub link: u64,
    /// Through the session.
    pub session: u64,
}

mod assemble;

pub(crate) use assemble::{AssembleError, Assembler};

#[cfg(test)]
mod tests;
