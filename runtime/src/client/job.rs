//! A submitted job as the client follows it: long polls to the coordinator, events checked
//! and assembled into the sampler's traces.
//!
//! A poll that times out is repeated with the same `ack` (the coordinator sends the same
//! events again); after [`POLL_MISSES`] in a row the job's outcome is unknown and that is the
//! error. Once the job finished, a last poll acknowledges every event so that the coordinator
//! forgets the job at once (it would after its lease otherwise).

use std::collections::VecDeque;
use std::time::Duration;

use tracing::Instrument;

use super::{ClientError, ClusterClient};
use crate::discovery::COORDINATOR;
use crate::ids::{JobId, job_span};
use crate::sampling::{AssembleError, Assembler, JobOutcome, JobUpdate};
use crate::wire::{self, CallError, Envelope, JobReply, JobRequest};

/// How long a poll waits at the coordinator for an event.
const POLL_WAIT_MS: u32 = 1000;
/// Limit of one poll: its wait and room for the answer.
const POLL_TIMEOUT: Duration = Duration::from_secs(6);
/// Polls in a row without an answer before the job counts as lost.
const POLL_MISSES: u32 = 3;

/// A running job: its updates as they come ([`Self::next`]), then its outcome
/// ([`Self::outcome`]).
#[derive(Debug)]
pub struct SampleJob<'a> {
    client: &'a mut ClusterClient,
    job: JobId,
    ack: u64,
    assembler: Assembler,
    updates: VecDeque<JobUpdate>,
    released: bool,
}

impl<'a> SampleJob<'a> {
    pub(super) fn new(client: &'a mut ClusterClient, job: JobId, n_chains: u32) -> Self {
        Self {
            client,
            job,
            ack: 0,
            assembler: Assembler::new(job, n_chains),
            updates: VecDeque::new(),
            released: false,
        }
    }

    /// The job's id (it names the job in every node's log).
    pub fn id(&self) -> JobId {
        self.job
    }

    /// The next update; `None` once the job finished (then [`Self::outcome`] has the
    /// result). A failed job is an error.
    ///
    /// # Cancel safety
    /// Cancel safe: an update fetched but not returned is kept for the next call.
    pub async fn next(&mut self) -> Result<Option<JobUpdate>, ClientError> {
        loop {
            if let Some(update) = self.updates.pop_front() {
                return Ok(Some(update));
            }
            if self.assembler.is_finished() {
                self.release().await;
                return Ok(None);
            }
            // The job's span here too, as on every node that works on it.
            let span = job_span(self.job);
            self.poll().instrument(span).await?;
        }
    }

    /// Waits for the job to finish and returns every chain's trace, where each ran and what
    /// was retried.
    pub async fn outcome(mut self) -> Result<JobOutcome, ClientError> {
        while self.next().await?.is_some() {}
        let job = self.job;
        let peer = self.client.peer.clone();
        self.assembler
            .finish()
            .map_err(|error| client_error(job, peer, error))
    }

    /// Stops the job on the cluster.
    pub async fn cancel(self) -> Result<(), ClientError> {
        let request = JobRequest::Cancel { job: self.job };
        self.call(request, self.client.settings.call_timeout)
            .await
            .map(|_| ())
    }

    async fn poll(&mut self) -> Result<(), ClientError> {
        let mut misses = 0;
        let events = loop {
            let request = JobRequest::Poll {
                job: self.job,
                ack: self.ack,
                wait_ms: POLL_WAIT_MS,
            };
            match self.call(request, POLL_TIMEOUT).await {
                Ok(JobReply::Events { job, events }) if job == self.job => break events,
                // Never apply another job's events to this one.
                Ok(JobReply::Events { job, .. }) => {
                    return Err(ClientError::Wire {
                        peer: self.client.peer.clone(),
                        error: crate::wire::WireError::Invalid {
                            what: "poll answer".to_owned(),
                            reason: format!("events of job {job} for a poll of job {}", self.job),
                        },
                    });
                }
                Ok(other) => return Err(self.client.unexpected(other)),
                Err(ClientError::Call(CallError::Timeout { .. })) if misses + 1 < POLL_MISSES => {
                    misses += 1;
                }
                Err(error) => return Err(error),
            }
        };
        for event in events {
            if event.seq <= self.ack {
                continue;
            }
            self.ack = event.seq;
            match self.assembler.apply(event.event) {
                Ok(updates) => {
                    for update in &updates {
                        log_update(update);
                    }
                    self.updates.extend(updates);
                }
                Err(error) => {
                    return Err(client_error(self.job, self.client.peer.clone(), error));
                }
            }
        }
        Ok(())
    }

    /// Acknowledges every event, so that the coordinator forgets the job now.
    async fn release(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        let request = JobRequest::Poll {
            job: self.job,
            ack: self.ack,
            wait_ms: 0,
        };
        let _ = self.call(request, POLL_TIMEOUT).await;
    }

    async fn call(&self, request: JobRequest, timeout: Duration) -> Result<JobReply, ClientError> {
        let client = &*self.client;
        let endpoint = client.endpoint(&COORDINATOR)?;
        // Polls are idempotent (the ack says what we have): each gets a fresh request id.
        let request_id = crate::ids::RequestId(crate::ids::fresh_u64());
        let envelope = Envelope::new(request_id, &client.settings.name, request).with_job(self.job);
        let reply = wire::call(&endpoint, client.peer.as_str(), &envelope, timeout).await?;
        Ok(reply.body)
    }
}

/// One line per placement, retry and end of warmup (progress and finished chains are
/// debug lines).
fn log_update(update: &JobUpdate) {
    match update {
        JobUpdate::Placed {
            chains,
            node,
            worker,
        } => tracing::info!("{} chains placed on {node} ({worker})", chains.len()),
        JobUpdate::WarmupDone(report) => {
            tracing::info!("warmup done on {}: broadcasting", report.node)
        }
        JobUpdate::Retried(retries) => {
            for retry in retries {
                tracing::info!(
                    "chain {} retried (attempt {}): {}",
                    retry.chain,
                    retry.attempt,
                    retry.reason
                );
            }
        }
        JobUpdate::ChainDone { chain, node, .. } => {
            tracing::debug!("chain {chain} done on {node}")
        }
        JobUpdate::Progress { .. } => {}
    }
}

fn client_error(job: JobId, peer: crate::ids::NodeName, error: AssembleError) -> ClientError {
    match error {
        AssembleError::Failed(error) => ClientError::JobFailed { job, error },
        AssembleError::Protocol(error) => ClientError::Wire { peer, error },
    }
}
