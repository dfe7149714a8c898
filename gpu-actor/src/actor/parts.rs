//! A job as the supervisor runs it: its chains split into parts, one per GPU worker (or on
//! the CPU), and the caller's answer assembled once every part is done, or sent at the
//! first part that fails.

use std::fmt;
use std::sync::Arc;

use ractor::RpcReplyPort;
use sampler::{ChainTrace, ModelHash};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::WorkerId;
use super::error::GpuActorError;
use super::job::{CancelToken, GpuShare, JobId, RanOn, RunNotes, SampleJob, SampleOutput};
use crate::sampling::PrecisionChoice;
use crate::wgsl::Precision;

pub(super) type Reply = RpcReplyPort<Result<SampleOutput, GpuActorError>>;

/// A part of a job: a run of its chains, on one worker or on the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct PartId {
    pub(super) job: JobId,
    pub(super) index: usize,
}

impl fmt::Display for PartId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} part {}", self.job, self.index)
    }
}

/// Where a part is.
pub(super) enum Part {
    /// Waiting for a worker: the one it was sent to was gone.
    Waiting(Box<SampleJob>),
    /// On a worker.
    OnGpu {
        worker: WorkerId,
        adapter: String,
        chains: usize,
    },
    /// On CPU threads: the node has no usable GPU (`reason` `None`) or a worker refused it.
    OnCpu {
        thread: JoinHandle<()>,
        reason: Option<String>,
        chains: usize,
    },
    /// Finished; `on` is where it ran.
    Done { traces: Vec<ChainTrace>, on: Ran },
    /// Failed or stopped; the caller has had its answer.
    Ended,
}

/// Where a finished part ran.
pub(super) enum Ran {
    Gpu(GpuShare),
    Cpu {
        chains: usize,
        reason: Option<String>,
    },
}

/// A job whose parts run.
pub(super) struct ActiveJob {
    /// Taken when the caller is answered.
    reply: Option<Reply>,
    /// The caller's token.
    pub(super) cancel: CancelToken,
    /// Stops every part: one failed, or the supervisor stops. Parts see it through their
    /// observer, workers and CPU threads alike.
    pub(super) abort: CancelToken,
    /// For the workers' rates.
    pub(super) model: ModelHash,
    /// Iterations of every chain, warmup included where it runs.
    pub(super) iterations: u64,
    started: Instant,
    pub(super) parts: Vec<Part>,
}

impl ActiveJob {
    pub(super) fn new(job: &SampleJob, reply: Reply) -> ActiveJob {
        let request = &job.request;
        let warmup = request.chains.iter().all(|chain| chain.tuning.is_none());
        let iterations = request.settings.num_draws
            + if warmup {
                request.settings.num_warmup
            } else {
                0
            };
        ActiveJob {
            reply: Some(reply),
            cancel: job.cancel.clone(),
            abort: CancelToken::new(),
            model: request.model.hash(),
            iterations,
            started: Instant::now(),
            parts: Vec::new(),
        }
    }

    /// Whether the caller still waits.
    pub(super) fn answered(&self) -> bool {
        self.reply.is_none()
    }

    /// Part `index`'s job, if the part waits for a runner, and the part, `Ended` until the
    /// caller places it.
    pub(super) fn take_waiting(&mut self, index: usize) -> Option<(&mut Part, Box<SampleJob>)> {
        let part = self.parts.get_mut(index)?;
        match std::mem::replace(part, Part::Ended) {
            Part::Waiting(job) => Some((part, job)),
            other => {
                *part = other;
                None
            }
        }
    }

    /// Part `index` finished with `result`.
    pub(super) fn part_finished(
        &mut self,
        index: usize,
        result: Result<Vec<ChainTrace>, GpuActorError>,
        notes: Option<RunNotes>,
    ) {
        let answered = self.answered();
        let Some(part) = self.parts.get_mut(index) else {
            return;
        };
        let on = match std::mem::replace(part, Part::Ended) {
            Part::OnGpu {
                worker,
                adapter,
                chains,
            } => {
                // A worker's part that finished well always says.
                let notes = notes.unwrap_or_else(|| RunNotes {
                    precision: PrecisionChoice {
                        precision: Precision::F32,
                        reason: "unknown".to_owned(),
                        f32_chains: 0,
                    },
                    restarted: 0,
                });
                Ran::Gpu(GpuShare {
                    worker,
                    adapter,
                    chains,
                    precision: notes.precision,
                    restarted: notes.restarted,
                })
            }
            Part::OnCpu { reason, chains, .. } => Ran::Cpu { chains, reason },
            // Answered already (its worker's exit was seen first).
            other => {
                *part = other;
                return;
            }
        };
        match result {
            Ok(traces) if !answered => *part = Part::Done { traces, on },
            Ok(_) => {}
            Err(error) => self.fail(error),
        }
    }

    /// Answers the caller with `error` (its cancellation, if it cancelled) and stops the
    /// other parts.
    pub(super) fn fail(&mut self, error: GpuActorError) {
        self.abort.cancel();
        for part in &mut self.parts {
            if matches!(part, Part::Waiting(_) | Part::Done { .. }) {
                *part = Part::Ended;
            }
        }
        if let Some(reply) = self.reply.take() {
            let error = if self.cancel.is_cancelled() {
                GpuActorError::Cancelled
            } else {
                error
            };
            let _ = reply.send(Err(error));
        }
    }

    /// Answers the caller once every part is done; true when nothing of the job is left to
    /// wait for (the supervisor forgets it then). `fallback` is the supervisor's line for a
    /// job that ran on the CPU for want of a GPU.
    pub(super) fn settle(&mut self, fallback: Option<&str>) -> bool {
        if self.reply.is_some() && self.parts.iter().all(|p| matches!(p, Part::Done { .. })) {
            let mut traces = Vec::new();
            let mut ran = Vec::with_capacity(self.parts.len());
            for part in std::mem::take(&mut self.parts) {
                if let Part::Done { traces: part, on } = part {
                    traces.extend(part);
                    ran.push(on);
                }
            }
            let output = SampleOutput {
                traces,
                ran_on: ran_on(ran, fallback),
                elapsed: self.started.elapsed(),
            };
            if let Some(reply) = self.reply.take() {
                let _ = reply.send(Ok(output));
            }
            return true;
        }
        self.answered()
            && !self
                .parts
                .iter()
                .any(|p| matches!(p, Part::OnGpu { .. } | Part::OnCpu { .. }))
    }

    /// The CPU threads of the job's parts, to wait for.
    pub(super) fn cpu_threads(&mut self) -> Vec<JoinHandle<()>> {
        let mut threads = Vec::new();
        for part in &mut self.parts {
            if let Part::OnCpu { .. } = part
                && let Part::OnCpu { thread, .. } = std::mem::replace(part, Part::Ended)
            {
                threads.push(thread);
            }
        }
        threads
    }

    /// Answers the caller with `reason` at once, stops every part.
    pub(super) fn stop(&mut self, reason: &str) {
        self.fail(GpuActorError::Unavailable {
            reason: reason.to_owned(),
        });
    }
}

/// Where a job ran, from where its parts ran.
fn ran_on(parts: Vec<Ran>, fallback: Option<&str>) -> RanOn {
    let mut shares = Vec::new();
    let mut cpu_chains = 0;
    let mut refused = None;
    for part in parts {
        match part {
            Ran::Gpu(share) => shares.push(share),
            Ran::Cpu { chains, reason } => {
                cpu_chains += chains;
                refused = refused.or(reason);
            }
        }
    }
    match (shares.is_empty(), cpu_chains) {
        (false, 0) => RanOn::Gpu { shares },
        (true, _) => RanOn::Cpu {
            refused: refused.is_some(),
            reason: refused.unwrap_or_else(|| fallback.unwrap_or_default().to_owned()),
        },
        (false, cpu_chains) => RanOn::Split {
            shares,
            cpu_chains,
            reason: refused.unwrap_or_default(),
        },
    }
}

/// Splits `job` into parts of `counts` chains each (in order; the counts sum to the job's
/// chains). The parts share the caller's observer and token; every part's chains keep their
/// numbers, and with them their random streams.
pub(super) fn split(mut job: Box<SampleJob>, counts: &[usize]) -> Vec<SampleJob> {
    if counts.len() <= 1 {
        return vec![*job];
    }
    let mut chains = std::mem::take(&mut job.request.chains).into_iter();
    counts
        .iter()
        .map(|&count| {
            let mut request = job.request.clone();
            request.chains = chains.by_ref().take(count).collect();
            SampleJob {
                request,
                observer: job.observer.as_ref().map(Arc::clone),
                cancel: job.cancel.clone(),
            }
        })
        .collect()
}
