//! A sampling job as callers submit it, its cancellation, and what comes back.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sampler::{ChainTrace, DrawBatch, DrawEvent, Observer};

use super::WorkerId;
use crate::sampling::{GpuSampleRequest, PrecisionChoice};

/// Cancels a job: running chains stop at their next iteration (or, on the GPU, after the
/// dispatch in progress), and the caller gets [`super::GpuActorError::Cancelled`]. Clones
/// share the flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels every job holding a clone of this token.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A job for the [`super::GpuSupervisor`].
///
/// The request is plain data that can cross nodes; the observer and the token are this
/// process's: a remote caller's node builds them where the job runs (the observer forwarding
/// draws to the caller, the token tied to the caller's request id).
pub struct SampleJob {
    /// What to sample.
    pub request: GpuSampleRequest,
    /// Sees every draw of every chain as it is produced, on the sampling thread: keep
    /// `on_draw` short. Its `should_stop` cancels the job, like the token.
    pub observer: Option<Arc<dyn Observer + Send + Sync>>,
    /// Cancels the job.
    pub cancel: CancelToken,
}

impl SampleJob {
    /// A job with no observer and a fresh token.
    pub fn new(request: GpuSampleRequest) -> SampleJob {
        SampleJob {
            request,
            observer: None,
            cancel: CancelToken::new(),
        }
    }

    /// The same job, reporting its draws to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn Observer + Send + Sync>) -> SampleJob {
        self.observer = Some(observer);
        self
    }
}

impl fmt::Debug for SampleJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SampleJob")
            .field("model", &self.request.model.name())
            .field("chains", &self.request.chains.len())
            .field("kernel", &self.request.kernel)
            .field("precision", &self.request.precision)
            .field("observer", &self.observer.is_some())
            .field("cancel", &self.cancel)
            .finish()
    }
}

/// Where a job ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RanOn {
    /// On GPU workers, each running a share of the chains (one share unless the job was
    /// large enough to split over several idle workers).
    Gpu {
        /// The shares, in the order of the chains.
        shares: Vec<GpuShare>,
    },
    /// On CPU threads ([`sampler::sample_chains`]), because the node has no usable GPU or
    /// because the GPU refused the model.
    Cpu {
        /// The supervisor's fallback line (why there is no usable GPU), or why the GPU
        /// refused the model ([`crate::GpuError::model_unsupported`]).
        reason: String,
        /// Whether a GPU worker refused the model (the node has a usable GPU).
        refused: bool,
    },
    /// Partly on GPU workers, partly on the CPU: one of the workers the job was split over
    /// refused the model (a node with GPUs of different kinds).
    Split {
        /// The shares that ran on GPU workers.
        shares: Vec<GpuShare>,
        /// Chains that ran on the CPU.
        cpu_chains: usize,
        /// Why the worker refused them.
        reason: String,
    },
}

/// The chains of a job one GPU worker ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuShare {
    /// The worker.
    pub worker: WorkerId,
    /// Its adapter's name.
    pub adapter: String,
    /// How many chains.
    pub chains: usize,
    /// The precision they ran in, and why.
    pub precision: PrecisionChoice,
    /// How many of them ended warmup far below the others and started sampling from another
    /// chain's point.
    pub restarted: usize,
}

/// What a worker's finished run says of itself besides its draws.
#[derive(Clone, Debug)]
pub(crate) struct RunNotes {
    /// The precision the chains ran in, and why.
    pub precision: PrecisionChoice,
    /// How many chains started sampling from another chain's point.
    pub restarted: usize,
}

impl fmt::Display for RanOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RanOn::Gpu { shares } => write_shares(f, shares),
            RanOn::Cpu { refused: false, .. } => f.write_str("CPU (no usable GPU)"),
            RanOn::Cpu { refused: true, .. } => f.write_str("CPU (the GPU refused the model)"),
            RanOn::Split {
                shares, cpu_chains, ..
            } => {
                write_shares(f, shares)?;
                write!(f, " and CPU ({cpu_chains} chains a GPU refused)")
            }
        }
    }
}

/// `GPU gpu0 (NVIDIA H200) f32 (auto: ...)` for one share; `GPUs gpu0 (NVIDIA H200, 4096
/// chains) f64 (...), gpu1 (...)` for several; then the chains restarted after warmup, if
/// any.
fn write_shares(f: &mut fmt::Formatter<'_>, shares: &[GpuShare]) -> fmt::Result {
    let restarted: usize = shares.iter().map(|share| share.restarted).sum();
    match shares {
        [share] => write!(
            f,
            "GPU {} ({}) {}",
            share.worker, share.adapter, share.precision
        )?,
        shares => {
            f.write_str("GPUs ")?;
            for (i, share) in shares.iter().enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                write!(
                    f,
                    "{sep}{} ({}, {} chains) {}",
                    share.worker, share.adapter, share.chains, share.precision
                )?;
            }
        }
    }
    if restarted > 0 {
        write!(
            f,
            "; {restarted} chains ended warmup far from the others (log density or step size) and sampled from where other chains ended it"
        )?;
    }
    Ok(())
}

/// A finished job.
#[derive(Clone, Debug)]
pub struct SampleOutput {
    /// One trace per chain, in the order of the request's chain specs.
    pub traces: Vec<ChainTrace>,
    /// Where it ran.
    pub ran_on: RanOn,
    /// From the start of the job on its workers to the end of its last part (time in the
    /// queue excluded).
    pub elapsed: Duration,
}

/// The observer a job's chains report to: the caller's, stopped by the caller's token, the
/// caller's `should_stop`, the job's abort (another part failed, or the supervisor stops),
/// or the runner's own (a worker that stops).
pub(super) struct JobObserver<'a> {
    pub(super) user: Option<&'a (dyn Observer + Send + Sync)>,
    pub(super) cancel: &'a CancelToken,
    pub(super) job_abort: &'a CancelToken,
    pub(super) abort: &'a CancelToken,
}

impl Observer for JobObserver<'_> {
    fn on_draw(&self, event: &DrawEvent) {
        if let Some(user) = self.user {
            user.on_draw(event);
        }
    }

    fn wants_batches(&self) -> bool {
        self.user.is_some_and(|user| user.wants_batches())
    }

    fn wants_positions(&self) -> bool {
        self.user.is_some_and(|user| user.wants_positions())
    }

    fn on_batch(&self, batch: &DrawBatch) {
        if let Some(user) = self.user {
            user.on_batch(batch);
        }
    }

    fn should_stop(&self) -> bool {
        if self.user.is_some_and(|user| user.should_stop()) {
            // The caller's observer stopping the job is a cancellation by the caller.
            self.cancel.cancel();
        }
        self.cancel.is_cancelled() || self.job_abort.is_cancelled() || self.abort.is_cancelled()
    }

    fn keeps_draws(&self) -> bool {
        // A caller that streams the draws (a node's pool) keeps none: neither do the traces.
        self.user.is_none_or(|user| user.keeps_draws())
    }
}

/// A job's number in its supervisor, unique for the supervisor's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct JobId(pub(super) u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.0)
    }
}
