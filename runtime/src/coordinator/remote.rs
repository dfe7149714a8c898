//! The coordinator's calls to pools, run as tasks the coordinator owns (aborted when it
//! stops or when it gives a task up): a scheduling round's status queries, and one driver
//! per task that dispatches it and polls its events until every chain reported.
//!
//! Every call has a timeout. A timeout means "outcome unknown": a dispatch is repeated with
//! the same request and task ids (the pool starts nothing new), a poll with the same `ack`
//! (the pool sends the same events again). An unreachable pool, a refusal, or too many
//! timeouts in a row end the driver with [`CoordinatorMsg::TaskLost`]; the coordinator runs
//! the task's unfinished chains elsewhere. A task over the pool node's limits ends it with
//! [`CoordinatorMsg::TaskRefused`] instead: the job fails with the pool's message.
//!
//! While the job's client is more than [`JOB_BACKLOG_BYTES`] behind (events it has not
//! acknowledged), a driver fetches nothing: the pool keeps the task's events, and its chains
//! wait once the pool's own budget is full. It still polls every [`KEEPALIVE`] (discarding
//! the answer), so that the pool does not take the task for abandoned.

use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::CoordinatorMsg;
use crate::discovery::{CPU_POOL, GPU_POOL};
use crate::ids::{JobId, NodeName, RequestId, TaskId};
use crate::sampling::PoolKind;
use crate::wire::{
    self, CallError, Envelope, MAX_POLL_REPLY_BYTES, PoolReply, PoolRequest, PoolWire, WireError,
    WireTask, WireTaskEvent,
};

/// Limit of a status query.
const STATUS_TIMEOUT: Duration = Duration::from_secs(1);
/// Limit of a dispatch (the pool decodes and checks the model before it answers).
const RUN_TIMEOUT: Duration = Duration::from_secs(10);
/// Dispatches tried before the task is given up.
const RUN_ATTEMPTS: u32 = 3;
/// How long a poll waits at the pool for an event.
const POLL_WAIT_MS: u32 = 1000;
/// Limit of a poll: its wait plus room for the answer.
const POLL_TIMEOUT: Duration = Duration::from_secs(3);
/// Polls in a row without an answer before the task is given up (a stalled node is marked
/// down by membership sooner than this).
const POLL_MISSES: u32 = 3;
/// Bytes of a job's events not yet acknowledged by its client past which its drivers stop
/// fetching: several poll answers' worth, so that the client's next answers are ready and
/// the stages between the GPU and the client (pool, driver, coordinator, link, assembly)
/// work side by side rather than in turn.
pub(crate) const JOB_BACKLOG_BYTES: usize = 8 * MAX_POLL_REPLY_BYTES;
/// How often a driver that fetches nothing still polls its pool (well within the pools'
/// task lease).
const KEEPALIVE: Duration = Duration::from_secs(5);

/// A pool seen by a scheduling round.
#[derive(Debug, Clone)]
pub(crate) struct PoolView {
    pub(crate) pool: ActorRef<PoolWire>,
    pub(crate) node: NodeName,
    pub(crate) kind: PoolKind,
    pub(crate) slots: u32,
    pub(crate) busy: u32,
}

/// Asks every pool in the cluster (CPU and GPU) for its capacity; the ones that answer in
/// time.
pub(crate) async fn survey(me: NodeName, request_base: u64) -> Vec<PoolView> {
    let mut queries = JoinSet::new();
    let pools = GPU_POOL
        .all_members()
        .into_iter()
        .chain(CPU_POOL.all_members());
    for (index, (_, pool)) in pools.enumerate() {
        let me = me.clone();
        queries.spawn(async move {
            let envelope = Envelope::new(
                RequestId(request_base + index as u64),
                &me,
                PoolRequest::Status,
            );
            let peer = format!("{:?}", pool.get_id());
            let reply = wire::call(&pool, &peer, &envelope, STATUS_TIMEOUT).await;
            match reply {
                Ok(Envelope {
                    sender,
                    body:
                        PoolReply::Status {
                            kind,
                            slots,
                            running,
                            queued,
                        },
                    ..
                }) => Some(PoolView {
                    pool,
                    node: sender.parse().ok()?,
                    kind: kind.into(),
                    slots,
                    busy: running + queued,
                }),
                Ok(_) => None,
                Err(error) => {
                    tracing::debug!("no status from {peer}: {error}");
                    None
                }
            }
        });
    }
    let mut views = Vec::new();
    while let Some(result) = queries.join_next().await {
        if let Ok(Some(view)) = result {
            views.push(view);
        }
    }
    views
}

/// What a driver needs.
pub(crate) struct Driver {
    pub(crate) coordinator: ActorRef<CoordinatorMsg>,
    pub(crate) me: NodeName,
    pub(crate) pool: ActorRef<PoolWire>,
    pub(crate) node: NodeName,
    pub(crate) task: WireTask,
    /// Request ids of this driver: `base`, `base + 1`, ...
    pub(crate) request_base: u64,
    /// The bytes of the job's events its client has not acknowledged.
    pub(crate) backlog: watch::Receiver<usize>,
}

/// Dispatches the task, then polls it until all its chains reported; tells the coordinator
/// what happens. Cancel safe: aborting it leaves the task to the pool's lease.
pub(crate) async fn drive(mut driver: Driver) {
    let job = driver.task.job;
    let task = driver.task.task;
    let n_chains = driver.task.chains.len();
    let lost = |reason: String| CoordinatorMsg::TaskLost {
        job,
        task,
        reason,
        refused: false,
    };
    let mut next_request = driver.request_base;
    let run = Envelope::new(
        RequestId(next_request),
        &driver.me,
        PoolRequest::Run(driver.task),
    )
    .with_job(job);
    next_request += 1;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match wire::call(&driver.pool, driver.node.as_str(), &run, RUN_TIMEOUT).await {
            Ok(_) => {
                let _ = driver
                    .coordinator
                    .cast(CoordinatorMsg::TaskAccepted { task });
                break;
            }
            Err(CallError::Timeout { .. }) if attempt < RUN_ATTEMPTS => continue,
            Err(CallError::Refused {
                error: error @ WireError::LimitExceeded(_),
                ..
            }) => {
                let error = error.to_string();
                let _ = driver
                    .coordinator
                    .cast(CoordinatorMsg::TaskRefused { job, task, error });
                return;
            }
            Err(error) => {
                // An answer that says no: the pool ran nothing (a forgotten task is another
                // matter, see `describe`).
                let refused = matches!(
                    &error,
                    CallError::Refused { error, .. } if !matches!(error, WireError::NotFound { .. })
                );
                let _ = driver.coordinator.cast(CoordinatorMsg::TaskLost {
                    job,
                    task,
                    reason: describe(&error),
                    refused,
                });
                return;
            }
        }
    }
    drop(run);

    let mut ack = 0;
    let mut misses = 0;
    let mut reported = 0;
    while reported < n_chains {
        let keepalive = !client_caught_up(&mut driver.backlog).await;
        let poll = Envelope::new(
            RequestId(next_request),
            &driver.me,
            PoolRequest::Poll {
                task,
                ack,
                wait_ms: if keepalive { 0 } else { POLL_WAIT_MS },
            },
        )
        .with_job(job);
        next_request += 1;
        match wire::call(&driver.pool, driver.node.as_str(), &poll, POLL_TIMEOUT).await {
            Ok(Envelope {
                body: PoolReply::Events { events, .. },
                ..
            }) => {
                misses = 0;
                if keepalive {
                    // The same events come again with the next poll.
                    continue;
                }
                let Some(last) = events.last().map(|e| e.seq) else {
                    continue;
                };
                ack = last;
                let events: Vec<WireTaskEvent> = events.into_iter().map(|e| e.event).collect();
                reported += events
                    .iter()
                    .filter(|e| {
                        matches!(
                            e,
                            WireTaskEvent::ChainDone(_) | WireTaskEvent::ChainFailed { .. }
                        )
                    })
                    .count();
                let message = CoordinatorMsg::TaskEvents { job, task, events };
                if driver.coordinator.cast(message).is_err() {
                    return;
                }
            }
            Ok(other) => {
                let _ = driver.coordinator.cast(lost(format!(
                    "{} answered a poll with {:?}",
                    driver.node, other.body
                )));
                return;
            }
            Err(CallError::Timeout { .. }) if misses + 1 < POLL_MISSES => misses += 1,
            Err(error) => {
                let _ = driver.coordinator.cast(lost(describe(&error)));
                return;
            }
        }
    }
    // Every chain reported: let the pool forget the task now rather than at its lease.
    let cancel = Envelope::new(
        RequestId(next_request),
        &driver.me,
        PoolRequest::Cancel { task },
    )
    .with_job(job);
    let _ = wire::call(&driver.pool, driver.node.as_str(), &cancel, STATUS_TIMEOUT).await;
}

/// Waits while the job's client is more than [`JOB_BACKLOG_BYTES`] behind, at most
/// [`KEEPALIVE`]; whether it caught up (a job that is gone counts as caught up: its driver is
/// about to be aborted).
async fn client_caught_up(backlog: &mut watch::Receiver<usize>) -> bool {
    if *backlog.borrow() <= JOB_BACKLOG_BYTES {
        return true;
    }
    let caught_up = backlog.wait_for(|&bytes| bytes <= JOB_BACKLOG_BYTES);
    tokio::time::timeout(KEEPALIVE, caught_up).await.is_ok()
}

/// Tells a pool to drop a task the coordinator gave up on (best effort: the pool may be
/// gone; its lease would drop the task anyway).
pub(crate) async fn cancel(
    me: NodeName,
    pool: ActorRef<PoolWire>,
    node: NodeName,
    job: JobId,
    task: TaskId,
    request: u64,
) {
    let envelope =
        Envelope::new(RequestId(request), &me, PoolRequest::Cancel { task }).with_job(job);
    let _ = wire::call(&pool, node.as_str(), &envelope, STATUS_TIMEOUT).await;
}

/// A lost task's reason, in the words the retry report uses (which names the node).
fn describe(error: &CallError) -> String {
    match error {
        CallError::Refused {
            error: WireError::NotFound { .. },
            ..
        } => "its pool restarted and lost the chains".to_owned(),
        CallError::Unreachable { .. } => "its pool is gone".to_owned(),
        CallError::Timeout { .. } => "its pool stopped answering".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
