//! A submitted job as the client follows it: long polls to the coordinator, events checked
//! and assembled into the sampler's traces, and a failover when the coordinator is lost.
//!
//! A poll that times out is repeated with the same `ack` (the coordinator sends the same
//! events again). The node counts as lost when its session closes, when it stays silent
//! for `STALL_LIMIT` (the client heartbeats it meanwhile, `failover.rs`), when
//! [`POLL_MISSES`] polls in a row time out, or when it no longer knows the job (its
//! coordinator restarted). Then the client keeps the chains it received whole, submits the
//! others to another member as a job over that subset (same seed and settings, so the same
//! draws), and follows that job; at most `ClientSettings::max_failovers` times. Once the job
//! finished, a last poll acknowledges every event so that the coordinator forgets the job
//! at once (it would after its lease otherwise).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use sampler::OutputWriter;
use tracing::Instrument;

use super::{ClientError, ClusterClient, Liveness};
use crate::discovery::COORDINATOR;
use crate::ids::{JobId, NodeName, job_span};
use crate::link::Follow;
use crate::sampling::{AssembleError, Assembler, JobOutcome, JobUpdate, PollCounts};
use crate::wire::{
    self, CallError, Envelope, JobReply, JobRequest, WireError, WireEvent, WireJobEvent,
    WireRunNote, WireSampleRequest, WireWarmup,
};

/// How long a poll waits at the coordinator for an event.
const POLL_WAIT_MS: u32 = 1000;
/// Limit of one poll: its wait and room for the answer.
const POLL_TIMEOUT: Duration = Duration::from_secs(6);
/// Polls in a row without an answer before the coordinator counts as lost.
const POLL_MISSES: u32 = 3;
/// Limit of the cancel sent to a lost coordinator (it may only be stalled: if it comes
/// back, it drops the job rather than run it for nobody).
const CANCEL_TIMEOUT: Duration = Duration::from_millis(250);

/// A running job: its updates as they come ([`Self::next`]), then its outcome
/// ([`Self::outcome`]). It survives the loss of its coordinator (see the module
/// documentation): [`JobUpdate::FailedOver`] says so.
#[derive(Debug)]
pub struct ClusterJob<'a> {
    client: &'a mut ClusterClient,
    /// The request as first submitted: a failover resubmits it over the unfinished chains.
    request: WireSampleRequest,
    job: JobId,
    ack: u64,
    assembler: Assembler,
    updates: VecDeque<JobUpdate>,
    /// Events fetched while the previous ones were applied.
    ahead: Option<Answer>,
    released: bool,
    failovers: u32,
    /// The nodes this job lost: not tried again.
    lost: Vec<(NodeName, SocketAddr)>,
    /// The coordinator said its node drains (it leaves when the job is done or its grace
    /// passes).
    coordinator_draining: bool,
    /// Time spent applying events, and waiting for polls with nothing to apply: the
    /// `runtime::timeline` event at the end of the job.
    applying: Duration,
    waiting: Duration,
    started: std::time::Instant,
}

/// A poll's answer.
#[derive(Debug)]
struct Answer {
    events: Vec<WireEvent<WireJobEvent>>,
    /// Every note on how the job's chains ran so far.
    notes: Vec<WireRunNote>,
}

/// Why a poll gave no events.
enum Interrupted {
    /// The coordinator is lost, for this reason: fail over.
    Lost(String),
    /// An error of the job itself.
    Error(ClientError),
}

impl<'a> ClusterJob<'a> {
    pub(super) fn new(
        client: &'a mut ClusterClient,
        job: JobId,
        request: WireSampleRequest,
        writer: Option<OutputWriter>,
    ) -> Self {
        client.liveness = Liveness::new();
        client.polls = PollCounts::default();
        let settings = &request.settings;
        let burn_in = match request.warmup {
            WireWarmup::Broadcast { burn_in } => burn_in,
            WireWarmup::Independent => 0,
        };
        let mut assembler = Assembler::new(job, request.n_chains)
            .with_room(settings.num_draws)
            .with_most_draws(
                settings.num_draws,
                settings.num_warmup.saturating_add(burn_in),
            );
        if let Some(writer) = writer {
            assembler = assembler.with_positions(writer);
        }
        Self {
            assembler,
            client,
            request,
            job,
            ack: 0,
            updates: VecDeque::new(),
            ahead: None,
            released: false,
            failovers: 0,
            lost: Vec::new(),
            coordinator_draining: false,
            applying: Duration::ZERO,
            waiting: Duration::ZERO,
            started: std::time::Instant::now(),
        }
    }

    /// The job's id (it names the job in every node's log); after a failover, the job on
    /// the new coordinator.
    pub fn id(&self) -> JobId {
        self.job
    }

    /// The node whose coordinator runs the job (another one after a failover).
    pub fn coordinator(&self) -> &NodeName {
        &self.client.peer
    }

    /// The next update; `None` once the job finished (then [`Self::outcome`] has the
    /// result). A failed job is an error.
    ///
    /// # Cancel safety
    /// Cancel safe: an update fetched but not returned is kept for the next call. A
    /// failover cancelled halfway is not: the job may then have been submitted to a node
    /// nobody follows (its lease cancels it).
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
        let (exchange, decode) = self.client.link.as_ref().map_or((0.0, 0.0), |link| {
            let (exchange, decode) = link.timing();
            (exchange.as_secs_f64() * 1e3, decode.as_secs_f64() * 1e3)
        });
        tracing::debug!(
            target: "runtime::timeline",
            job_ms = self.started.elapsed().as_secs_f64() * 1e3,
            apply_ms = self.applying.as_secs_f64() * 1e3,
            wait_ms = self.waiting.as_secs_f64() * 1e3,
            link_exchange_ms = exchange,
            link_decode_ms = decode,
            polls = self.client.polls.link + self.client.polls.session,
            "job assembled"
        );
        let job = self.job;
        let peer = self.client.peer.clone();
        let mut outcome = self
            .assembler
            .finish()
            .map_err(|error| client_error(job, peer, error))?;
        outcome.polls = self.client.polls;
        Ok(outcome)
    }

    /// Stops the job on the cluster.
    pub async fn cancel(self) -> Result<(), ClientError> {
        let request = JobRequest::Cancel { job: self.job };
        self.call(request, self.client.settings.call_timeout)
            .await
            .map(|_| ())
    }

    /// Fetches the next events (or takes the ones fetched ahead) and applies them. While a
    /// batch is applied, the poll for the next one is already out, unless the batch ends the
    /// job: a large job's stream then never waits for the client's assembly.
    async fn poll(&mut self) -> Result<(), ClientError> {
        let waiting = std::time::Instant::now();
        let fetched = match self.ahead.take() {
            Some(events) => Ok(events),
            None => fetch(self.client, self.job, self.ack).await,
        };
        self.waiting += waiting.elapsed();
        let Answer { events, notes } = match fetched {
            Ok(answer) => answer,
            Err(Interrupted::Lost(reason)) => return self.fail_over(reason).await,
            Err(Interrupted::Error(error)) => return Err(error),
        };
        let last = events.last().map_or(self.ack, |e| e.seq.max(self.ack));
        let ends = events.iter().any(|e| e.event.ends_job());
        let job = self.job;
        let peer = self.client.peer.clone();
        let mut applied = Applied {
            assembler: &mut self.assembler,
            updates: &mut self.updates,
            ack: &mut self.ack,
            draining: &mut self.coordinator_draining,
        };
        if events.is_empty() || ends {
            let applying = std::time::Instant::now();
            let result = applied.apply(job, &peer, events, notes);
            self.applying += applying.elapsed();
            return result;
        }
        let mut applying = Duration::ZERO;
        let (ahead, result) = tokio::join!(fetch(self.client, job, last), async {
            let started = std::time::Instant::now();
            let result = applied.apply(job, &peer, events, notes);
            applying = started.elapsed();
            result
        });
        self.applying += applying;
        result?;
        match ahead {
            Ok(answer) => {
                self.ahead = Some(answer);
                Ok(())
            }
            Err(Interrupted::Lost(reason)) => self.fail_over(reason).await,
            Err(Interrupted::Error(error)) => Err(error),
        }
    }

    /// The coordinator is lost: keep the chains received whole, submit the others to
    /// another member, follow that job from now on.
    async fn fail_over(&mut self, reason: String) -> Result<(), ClientError> {
        let from = self.client.peer.clone();
        let reason = if self.coordinator_draining {
            format!("it drained and left: {reason}")
        } else {
            reason
        };
        let chains = self.assembler.unfinished();
        if chains.is_empty() {
            // Every chain arrived; only the coordinator's last word is missing.
            tracing::info!("entry node {from} lost ({reason}) after every chain arrived");
            self.assembler.complete_here();
            return Ok(());
        }
        if self.failovers >= self.client.settings.max_failovers {
            return Err(ClientError::TooManyFailovers {
                job: self.job,
                node: from,
                reason,
                failovers: self.failovers,
            });
        }
        self.failovers += 1;
        self.lost.push((from.clone(), self.client.address));
        let old = (COORDINATOR.remote_member(self.client.session), self.job);
        tracing::info!(
            "entry node {from} lost ({reason}); resubmitting {} unfinished chains",
            chains.len()
        );
        let mut request = self.request.clone();
        request.chains = Some(chains.clone());
        let tried = vec![format!("{from} ({reason})")];
        let job = self
            .client
            .relocate(&request, chains.len() as u32, &self.lost, tried)
            .await?;
        if let (Some(coordinator), old_job) = old {
            let envelope = self.envelope(JobRequest::Cancel { job: old_job });
            let _ = wire::call(&coordinator, from.as_str(), &envelope, CANCEL_TIMEOUT).await;
        }
        let to = self.client.peer.clone();
        tracing::info!(
            "entry node {from} lost ({reason}); continuing on {to} with {} unfinished chains (job {job})",
            chains.len()
        );
        let failover = self.assembler.fail_over(from, reason, to, job, &chains);
        self.job = job;
        self.ack = 0;
        self.released = false;
        self.coordinator_draining = false;
        self.updates.push_back(JobUpdate::FailedOver(failover));
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
            follow: false,
        };
        let _ = self.call(request, POLL_TIMEOUT).await;
    }

    /// An envelope about the job. Polls are idempotent (the ack says what we have): each
    /// gets a fresh request id.
    fn envelope(&self, request: JobRequest) -> Envelope<JobRequest> {
        request.envelope(&self.client.settings.name, self.job)
    }

    async fn call(&self, request: JobRequest, timeout: Duration) -> Result<JobReply, ClientError> {
        let client = &*self.client;
        let endpoint = client.endpoint(&COORDINATOR)?;
        let envelope = self.envelope(request);
        let reply = wire::call(&endpoint, client.peer.as_str(), &envelope, timeout).await?;
        Ok(reply.body)
    }
}

/// What applying a poll's events changes of a job, apart from its client (which the poll
/// for the next events uses meanwhile).
struct Applied<'j> {
    assembler: &'j mut Assembler,
    updates: &'j mut VecDeque<JobUpdate>,
    ack: &'j mut u64,
    draining: &'j mut bool,
}

impl Applied<'_> {
    /// Keeps the notes, then applies the events not seen yet, in order.
    fn apply(
        &mut self,
        job: JobId,
        peer: &NodeName,
        events: Vec<WireEvent<WireJobEvent>>,
        notes: Vec<WireRunNote>,
    ) -> Result<(), ClientError> {
        self.assembler
            .note(notes)
            .map_err(|error| client_error(job, peer.clone(), error))?;
        // Consecutive blocks are taken in together (`Assembler::apply_blocks`).
        let mut blocks = Vec::new();
        for event in events {
            if event.seq <= *self.ack {
                continue;
            }
            *self.ack = event.seq;
            match event.event {
                WireJobEvent::Block { attempts, block } => blocks.push((attempts, block)),
                event => {
                    self.take_blocks(job, peer, &mut blocks)?;
                    let updates = self.assembler.apply(event);
                    self.take_updates(job, peer, updates)?;
                }
            }
        }
        self.take_blocks(job, peer, &mut blocks)
    }

    fn take_blocks(
        &mut self,
        job: JobId,
        peer: &NodeName,
        blocks: &mut Vec<(Vec<u32>, std::sync::Arc<wire::WireDrawBlock>)>,
    ) -> Result<(), ClientError> {
        if blocks.is_empty() {
            return Ok(());
        }
        let updates = self.assembler.apply_blocks(blocks);
        blocks.clear();
        self.take_updates(job, peer, updates)
    }

    fn take_updates(
        &mut self,
        job: JobId,
        peer: &NodeName,
        updates: Result<Vec<JobUpdate>, AssembleError>,
    ) -> Result<(), ClientError> {
        let updates = updates.map_err(|error| client_error(job, peer.clone(), error))?;
        for update in &updates {
            if matches!(update, JobUpdate::CoordinatorDraining { .. }) {
                *self.draining = true;
            }
            log_update(update);
        }
        self.updates.extend(updates);
        Ok(())
    }
}

/// The next events of `job` after `ack`, while watching its coordinator's node.
async fn fetch(client: &mut ClusterClient, job: JobId, ack: u64) -> Result<Answer, Interrupted> {
    let mut misses = 0;
    loop {
        let Some(coordinator) = COORDINATOR.remote_member(client.session) else {
            let session = client.session;
            return Err(Interrupted::Lost(
                if crate::discovery::MEMBERSHIP
                    .remote_member(session)
                    .is_none()
                {
                    "connection lost".to_owned()
                } else {
                    "its coordinator is gone".to_owned()
                },
            ));
        };
        let peer = client.peer.to_string();
        let answer = match client.link.take() {
            Some(mut link) if link.job() == job => {
                // The link's task polls ahead and decodes answers while the caller applies
                // the last one.
                let me = client.settings.name.clone();
                let follow = || Follow {
                    ack,
                    wait_ms: POLL_WAIT_MS,
                    timeout: POLL_TIMEOUT,
                    me,
                    peer: peer.clone(),
                };
                let next = tokio::select! {
                    next = link.next(follow) => Ok(next),
                    reason = client.watch() => Err(reason),
                };
                let next = match next {
                    Ok(next) => next,
                    Err(reason) => {
                        client.link = Some(link);
                        return Err(Interrupted::Lost(reason));
                    }
                };
                match next {
                    Some(Ok(answer)) => {
                        client.link = Some(link);
                        client.polls.link += 1;
                        answer
                    }
                    Some(Err(failed)) => {
                        // The same poll again, through the session.
                        tracing::info!(
                            "job link to {peer} lost ({failed}): polling through the session"
                        );
                        continue;
                    }
                    // The link followed the job to its end: any later poll goes through the
                    // session.
                    None => continue,
                }
            }
            _ => {
                let request = JobRequest::Poll {
                    job,
                    ack,
                    wait_ms: POLL_WAIT_MS,
                    follow: false,
                };
                let envelope = request.envelope(&client.settings.name, job);
                let call = wire::call(&coordinator, &peer, &envelope, POLL_TIMEOUT);
                let answer = tokio::select! {
                    answer = call => answer,
                    reason = client.watch() => return Err(Interrupted::Lost(reason)),
                };
                client.polls.session += 1;
                answer
            }
        };
        let reply = match answer {
            Ok(reply) => reply.body,
            Err(CallError::Timeout { .. }) if misses + 1 < POLL_MISSES => {
                misses += 1;
                continue;
            }
            Err(CallError::Timeout { .. }) => {
                return Err(Interrupted::Lost(format!(
                    "{POLL_MISSES} polls in a row unanswered"
                )));
            }
            Err(CallError::Unreachable { reason, .. }) => {
                return Err(Interrupted::Lost(format!(
                    "its coordinator is unreachable: {reason}"
                )));
            }
            Err(CallError::Refused {
                error: WireError::NotFound { .. } | WireError::Unavailable { .. },
                ..
            }) => {
                return Err(Interrupted::Lost(
                    "its coordinator restarted and lost the job".to_owned(),
                ));
            }
            Err(error) => return Err(Interrupted::Error(error.into())),
        };
        client.liveness.heard();
        return match reply {
            JobReply::Events {
                job: of,
                events,
                notes,
            } if of == job => Ok(Answer { events, notes }),
            // Never apply another job's events to this one.
            JobReply::Events { job: of, .. } => Err(Interrupted::Error(ClientError::Wire {
                peer: client.peer.clone(),
                error: WireError::Invalid {
                    what: "poll answer".to_owned(),
                    reason: format!("events of job {of} for a poll of job {job}"),
                },
            })),
            other => Err(Interrupted::Error(client.unexpected(other))),
        };
    }
}

/// One line per placement, retry, end of warmup, drain and failover (progress and finished
/// chains are debug lines).
fn log_update(update: &JobUpdate) {
    match update {
        JobUpdate::Placed { chains, node, pool } => {
            tracing::info!("{} chains placed on {node} ({pool})", chains.len())
        }
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
        JobUpdate::CoordinatorDraining { node, grace } => tracing::info!(
            "entry node {node} is draining: the job goes on there for up to {grace:?}"
        ),
        // Logged where it happens.
        JobUpdate::FailedOver(_) | JobUpdate::Progress { .. } => {}
    }
}

fn client_error(job: JobId, peer: crate::ids::NodeName, error: AssembleError) -> ClientError {
    match error {
        AssembleError::Failed(error) => ClientError::JobFailed { job, error },
        AssembleError::Protocol(error) => ClientError::Wire { peer, error },
    }
}
