//! Our OTP-style supervisor, on ractor's local supervision primitives (`spawn_linked`,
//! `handle_supervisor_evt`).
//!
//! ractor has no restart strategies (its default `handle_supervisor_evt` stops the supervisor
//! when any child exits) and `ractor-supervisor` does not build with the `cluster` feature, so
//! we write the small part we need:
//!
//! - children started in order from [`ChildSpec`]s, stopped in reverse order (graceful
//!   `stop`, then `kill` after the child's `shutdown_timeout`);
//! - restart types [`Restart::Permanent`], [`Restart::Transient`], [`Restart::Temporary`];
//! - strategies [`Strategy::OneForOne`] and [`Strategy::RestForOne`];
//! - restart intensity ([`Intensity`]): one restart too many within the window and the
//!   supervisor stops its children and fails with [`SupervisorError::IntensityExceeded`], which
//!   its own supervisor sees as a failed child (escalation);
//! - exponential [`Backoff`] before each restart, reset as the window empties.
//!
//! The decisions are [`Restarts`]'s (plain code, tested without actors); this actor carries
//! them out. A child that fails to start during a restart counts as another failure of that
//! child.

mod spec;

use std::ops::{Bound, RangeBounds};
use std::time::Duration;

use ractor::concurrency::JoinHandle;
use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort, SpawnErr,
    SupervisionEvent,
};
use ractor_cluster::RactorMessage;
use tokio::time::Instant;

use crate::ids::ChildId;
use crate::restarts::{Backoff, Decision, Exit, Intensity, Restart, Restarts, Strategy};
pub use spec::{ChildSpec, StartFuture};

/// The supervisor behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub struct Supervisor;

/// What a supervisor supervises and how.
#[derive(Debug, Clone)]
pub struct SupervisorArgs {
    /// Which siblings restart with a child that exited.
    pub strategy: Strategy,
    /// Restarts allowed per window before the supervisor gives up and escalates.
    pub intensity: Intensity,
    /// Waits between restarts.
    pub backoff: Backoff,
    /// The children, in start order; ids must be unique.
    pub children: Vec<ChildSpec>,
}

/// The supervisor's state: its children in start order and its recent restarts.
#[derive(Debug)]
pub struct SupervisorState {
    restarts: Restarts,
    children: Vec<Child>,
}

#[derive(Debug)]
struct Child {
    spec: ChildSpec,
    state: ChildState,
    restarts: u32,
}

#[derive(Debug)]
enum ChildState {
    Running(ActorCell),
    /// To be started again: by its own backoff timer, or (a younger sibling under
    /// rest-for-one) together with the elder sibling whose restart is pending.
    Waiting {
        timer: Option<JoinHandle<Result<(), MessagingErr<SupervisorMsg>>>>,
    },
    /// Exited and not to be restarted (a transient child that stopped normally).
    Exited,
}

/// Messages of a supervisor.
#[derive(RactorMessage)]
pub enum SupervisorMsg {
    /// The backoff before restarting this child has elapsed (sent by the supervisor itself).
    Restart(ChildId),
    /// The children in start order.
    Children(RpcReplyPort<Vec<ChildStatus>>),
}

/// A child as [`SupervisorMsg::Children`] reports it.
#[derive(Debug, Clone)]
pub struct ChildStatus {
    /// The child's id.
    pub id: ChildId,
    /// The running instance, if any.
    pub actor: Option<ActorCell>,
    /// How many times it was restarted.
    pub restarts: u32,
}

/// Why a supervisor failed.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// A child could not be started when the supervisor started.
    #[error("child {child} failed to start: {reason}")]
    StartFailed {
        /// The child.
        child: ChildId,
        /// The spawn error as text.
        reason: String,
    },
    /// Too many restarts within the intensity window.
    #[error(
        "child {child} failed again after {max_restarts} restarts within {window:?}; giving up (last failure: {reason})"
    )]
    IntensityExceeded {
        /// The child whose exit exceeded the intensity.
        child: ChildId,
        /// The limit.
        max_restarts: u32,
        /// The window.
        window: Duration,
        /// Its last exit.
        reason: String,
    },
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = SupervisorState {
            restarts: Restarts::new(args.strategy, args.intensity, args.backoff),
            children: Vec::with_capacity(args.children.len()),
        };
        for spec in args.children {
            match spec.start(myself.get_cell()).await {
                Ok(cell) => state.children.push(Child {
                    spec,
                    state: ChildState::Running(cell),
                    restarts: 0,
                }),
                Err(error) => {
                    stop_children(&mut state, ..).await;
                    return Err(SupervisorError::StartFailed {
                        child: spec.id,
                        reason: spawn_error_reason(&error),
                    }
                    .into());
                }
            }
        }
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        stop_children(state, ..).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Restart(id) => restart(&myself, state, &id).await,
            SupervisorMsg::Children(reply) => {
                let _ = reply.send(children(state));
                Ok(())
            }
        }
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                let exit = Exit::Abnormal {
                    reason: error.to_string(),
                };
                child_exited(&myself, state, cell.get_id(), exit).await
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                child_exited(&myself, state, cell.get_id(), exit_of(reason)).await
            }
            _ => Ok(()),
        }
    }
}

/// The cause of a spawn error, without ractor's "Actor panicked during startup" wrapping
/// (which it also uses for plain `Err`s from `pre_start`), however deeply nested.
pub fn spawn_error_reason(error: &SpawnErr) -> String {
    match error {
        SpawnErr::StartupFailed(cause) => match cause.downcast_ref::<SpawnErr>() {
            Some(inner) => spawn_error_reason(inner),
            None => cause.to_string(),
        },
        other => other.to_string(),
    }
}

/// A stop is normal; a kill (or a cancelled task) is not.
fn exit_of(reason: Option<String>) -> Exit {
    match reason.as_deref() {
        Some(reason @ ("killed" | "actor_task_cancelled")) => Exit::Abnormal {
            reason: reason.to_owned(),
        },
        _ => Exit::Normal,
    }
}

fn children(state: &SupervisorState) -> Vec<ChildStatus> {
    state
        .children
        .iter()
        .map(|child| ChildStatus {
            id: child.spec.id.clone(),
            actor: match &child.state {
                ChildState::Running(cell) => Some(cell.clone()),
                _ => None,
            },
            restarts: child.restarts,
        })
        .collect()
}

async fn child_exited(
    myself: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    id: ActorId,
    exit: Exit,
) -> Result<(), ActorProcessingErr> {
    // Children we stopped ourselves (rest-for-one, shutdown) are no longer `Running` under
    // that id, so their exits land here as unknown and are ignored.
    let Some(index) = state
        .children
        .iter()
        .position(|child| matches!(&child.state, ChildState::Running(cell) if cell.get_id() == id))
    else {
        return Ok(());
    };
    let child = &mut state.children[index];
    if let Exit::Abnormal { reason } = &exit {
        tracing::warn!(child = %child.spec.id, "child failed: {reason}");
    } else {
        tracing::debug!(child = %child.spec.id, "child stopped");
    }
    child.state = ChildState::Waiting { timer: None };
    schedule_restart(myself, state, index, exit).await
}

/// Asks the restart rules about child `index` (which is `Waiting`) and carries out their
/// decision: leave it, stop its younger siblings and arm its backoff timer, or give up.
async fn schedule_restart(
    myself: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    index: usize,
    exit: Exit,
) -> Result<(), ActorProcessingErr> {
    let count = state.children.len();
    let restart = state.children[index].spec.restart;
    match state
        .restarts
        .child_exited(index, count, restart, &exit, Instant::now())
    {
        Decision::Leave { remove: true } => {
            state.children.remove(index);
            Ok(())
        }
        Decision::Leave { remove: false } => {
            state.children[index].state = ChildState::Exited;
            Ok(())
        }
        Decision::Escalate => {
            let intensity = state.restarts.intensity();
            let error = SupervisorError::IntensityExceeded {
                child: state.children[index].spec.id.clone(),
                max_restarts: intensity.max_restarts,
                window: intensity.window,
                reason: match exit {
                    Exit::Normal => "stopped".to_owned(),
                    Exit::Abnormal { reason } => reason,
                },
            };
            tracing::error!("{error}");
            stop_children(state, ..).await;
            Err(error.into())
        }
        Decision::Restart { delay, siblings } => {
            stop_children(state, siblings).await;
            let child = &mut state.children[index];
            let id = child.spec.id.clone();
            tracing::debug!(child = %id, "restarting in {delay:?}");
            let timer = myself.send_after(delay, move || SupervisorMsg::Restart(id));
            child.state = ChildState::Waiting { timer: Some(timer) };
            Ok(())
        }
    }
}

async fn restart(
    myself: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    id: &ChildId,
) -> Result<(), ActorProcessingErr> {
    let Some(index) = state.children.iter().position(|c| &c.spec.id == id) else {
        return Ok(());
    };
    if !matches!(state.children[index].state, ChildState::Waiting { .. }) {
        return Ok(());
    }
    let last = match state.restarts.strategy() {
        Strategy::OneForOne => index,
        Strategy::RestForOne => {
            // An elder sibling is waiting too: its restart will start this one after it.
            let elder_waiting = state.children[..index]
                .iter()
                .any(|c| matches!(c.state, ChildState::Waiting { .. }));
            if elder_waiting {
                return Ok(());
            }
            state.children.len() - 1
        }
    };
    for position in index..=last {
        let child = &mut state.children[position];
        let ChildState::Waiting { timer } = &mut child.state else {
            continue;
        };
        if let Some(timer) = timer.take() {
            timer.abort();
        }
        match child.spec.start(myself.get_cell()).await {
            Ok(cell) => {
                child.restarts += 1;
                tracing::info!(child = %child.spec.id, restarts = child.restarts, "child restarted");
                child.state = ChildState::Running(cell);
            }
            Err(error) => {
                let reason = spawn_error_reason(&error);
                tracing::warn!(child = %child.spec.id, "child failed to restart: {reason}");
                let exit = Exit::Abnormal {
                    reason: format!("restart failed: {reason}"),
                };
                return schedule_restart(myself, state, position, exit).await;
            }
        }
    }
    Ok(())
}

/// Stops the running children at the positions in `range`, youngest first; each gets its
/// shutdown timeout to stop gracefully before it is killed. Temporary children are removed,
/// the others wait for a restart.
async fn stop_children(state: &mut SupervisorState, range: impl RangeBounds<usize>) {
    let start = match range.start_bound() {
        Bound::Included(&start) => start,
        Bound::Excluded(&start) => start + 1,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&end) => end + 1,
        Bound::Excluded(&end) => end,
        Bound::Unbounded => state.children.len(),
    };
    let range = start.min(state.children.len())..end.min(state.children.len());
    for child in state.children[range.clone()].iter_mut().rev() {
        match std::mem::replace(&mut child.state, ChildState::Waiting { timer: None }) {
            ChildState::Running(cell) => {
                let stopped = cell
                    .stop_and_wait(
                        Some("supervisor shutdown".to_owned()),
                        Some(child.spec.shutdown_timeout),
                    )
                    .await;
                if stopped.is_err() {
                    tracing::warn!(child = %child.spec.id, "child did not stop in {:?}; killing it", child.spec.shutdown_timeout);
                    cell.kill();
                }
            }
            ChildState::Waiting { timer } => {
                if let Some(timer) = timer {
                    timer.abort();
                }
            }
            ChildState::Exited => child.state = ChildState::Exited,
        }
    }
    let mut position = 0;
    state.children.retain(|child| {
        let stopped = range.contains(&position);
        position += 1;
        !stopped || child.spec.restart != Restart::Temporary
    });
}

#[cfg(test)]
mod tests;
