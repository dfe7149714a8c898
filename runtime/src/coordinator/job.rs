//! One job as its coordinator tracks it: the state of every chain, the tasks that run them,
//! and the events for the client. Plain code: the actor feeds it what pools report and
//! runs the effects (dispatches, cancels) it asks for.
//!
//! Chains move `Pending → Running(task) → Done`. A task that is lost (its node went down, its
//! pool restarted or stopped answering) sends its unfinished chains back to `Pending` with
//! their attempt incremented and a `Retried` event for the client, who drops their partial
//! draws; chains that finished stay finished. A chain whose worker failed under it (a lost
//! GPU device, a panic: [`WireFailure::Worker`]) goes back the same way, alone; a chain the
//! sampler itself failed fails the job, since it would fail again anywhere. Draws are counted
//! per chain as they pass, and a chain is done only when the count matches what its pool
//! says it sent.
//!
//! **Poison jobs.** A request may kill whatever node runs it; the rules below keep such a job
//! from taking the cluster down, one node after another, while a node that an operator kills
//! stays harmless:
//! - every chain keeps a [`Failure`] per attempt that ended without a result (where, and
//!   what was reported), and runs at most [`MAX_ATTEMPTS`] times: then the job fails with an
//!   error naming the chain, the nodes tried and what each reported;
//! - a chain does not run again on a node where it failed while another node can run it
//!   (`PendingGroup::avoid`);
//! - the chains of a lost task are quarantined: they run again as one task of their own, on a
//!   node that runs nothing else of the job, one such task of the job at a time; a quarantined
//!   task lost again fails the job (a node crash can be bad luck, two in a row are the job's).
//!
//! A pool that refused a task (its answer to `Run` was an error) ran nothing: its chains
//! avoid it and count the attempt, but are not suspect.
//!
//! A job over a subset of its chains (`JobSpec::chains`: a client resubmitting what it did
//! not receive after losing its coordinator) runs only those; the others are `NotAsked`
//! and count as finished. Chains keep their numbers, so their random streams.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use ractor::ActorId;
use sampler::ChainId;
use tokio::time::Instant;

use super::placement::PendingGroup;
use crate::ids::{JobId, NodeName, RequestId, TaskId};
use crate::link::{IN_FLIGHT, LinkToken};
use crate::notes::RunNotes;
use crate::outbox::{Outbox, Waiter};
use crate::sampling::{DevicePreference, PoolKind, WARMUP_CHAIN, WarmupMode};
use crate::wire::{
    JobReply, JobWire, MAX_POLL_REPLY_BYTES, Responder, WireChainSpec, WireDrawBlock, WireFailure,
    WireJobEvent, WirePoolKind, WireRetry, WireSettings, WireTask, WireTaskEvent, WireTuning,
};

/// Attempts a chain gets in all: a chain whose attempts ended this many times without a
/// result (its node lost, its worker failed, its task refused) fails the job.
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// A task lost at most this long before its node was marked down was lost with the node
/// (the task's driver and membership notice a dead peer in either order).
const LOST_WITH_NODE: std::time::Duration = std::time::Duration::from_secs(5);

/// What a job runs: the checked request.
#[derive(Debug, Clone)]
pub(crate) struct JobSpec {
    pub(crate) model_name: String,
    /// The model IR as MessagePack, sent with each dispatch.
    pub(crate) model: std::sync::Arc<Vec<u8>>,
    pub(crate) settings: WireSettings,
    pub(crate) n_chains: u32,
    pub(crate) seed: u64,
    pub(crate) device: DevicePreference,
    pub(crate) warmup: WarmupMode,
    /// Only these chains of `0..n_chains` (increasing, checked by the endpoint); `None`:
    /// every chain. A client that lost its coordinator resubmits its unfinished chains so.
    pub(crate) chains: Option<Vec<u32>>,
    /// The client reads blocks of draws (`WireJobEvent::Block`); otherwise the job splits
    /// its tasks' blocks into per-chain `Progress` events.
    pub(crate) blocks: bool,
    /// The client writes reported values from positions: its tasks' blocks may carry them
    /// (only with `blocks`).
    pub(crate) positions: bool,
    /// The client asked for a job link.
    pub(crate) link: bool,
    /// A hash of the submitted request's bytes: a submission retried with the same request
    /// id must be the same request (see `Coordinator`'s `submit`).
    pub(crate) fingerprint: u64,
    /// The model's hash: what placement's measured speeds are kept under.
    pub(crate) model_hash: sampler::ModelHash,
}

impl JobSpec {
    /// The chains the job runs.
    pub(crate) fn count(&self) -> u32 {
        self.chains
            .as_ref()
            .map_or(self.n_chains, |chains| chains.len() as u32)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChainState {
    Pending,
    Running(TaskId),
    Done,
    /// Not one of the job's chains (a job over a subset).
    NotAsked,
}

/// How an attempt of a chain ended without a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// Its task was lost: the node went down, the pool vanished or stopped answering. The
    /// chain may have killed it.
    Lost,
    /// The worker under it failed (a lost GPU device, a panic) and said so.
    Worker,
    /// The pool refused the task: nothing ran.
    Refused,
}

/// An attempt of a chain that ended without a result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    /// Where it ran.
    pub(crate) node: NodeName,
    /// What was reported (by the worker, the pool, or membership for a lost node).
    pub(crate) what: String,
    pub(crate) kind: FailureKind,
    at: Instant,
}

#[derive(Debug, Clone)]
struct Chain {
    state: ChainState,
    attempt: u32,
    /// Every attempt that ended without a result, oldest first.
    failures: Vec<Failure>,
    /// Lost with a task: the chain runs alone, with the other chains of that task (the
    /// group's key), and a second loss fails the job.
    quarantine: Option<TaskId>,
}

impl Chain {
    fn new() -> Self {
        Self {
            state: ChainState::Pending,
            attempt: 1,
            failures: Vec::new(),
            quarantine: None,
        }
    }

    /// Nodes where the chain failed, each once.
    fn failed_on(&self) -> Vec<NodeName> {
        let nodes: BTreeSet<&NodeName> = self.failures.iter().map(|f| &f.node).collect();
        nodes.into_iter().cloned().collect()
    }
}

/// Chains of the job on one pool.
#[derive(Debug, Clone)]
pub(crate) struct TaskRecord {
    /// The pool's actor (its identity in this process).
    pub(crate) pool: ActorId,
    /// The pool's node.
    pub(crate) node: NodeName,
    /// The chains, [`WARMUP_CHAIN`] included.
    pub(crate) chains: Vec<u32>,
    /// Per chain of the task: kept and warmup draws received.
    received: HashMap<u32, (u64, u64)>,
    /// Its chains are quarantined (they were lost with a task before).
    pub(crate) quarantined: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Finished,
    Failed,
}

/// What a batch of task events did.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Applied {
    /// Chains of the task that finished (their slots are free).
    pub(crate) finished_chains: u32,
    /// Chains of the task whose worker failed: they wait to run again, as described.
    pub(crate) retried_chains: Vec<(u32, String)>,
    /// The task reported all its chains: it can be forgotten.
    pub(crate) task_complete: bool,
    /// A chain failed: the job must fail with this error.
    pub(crate) chain_failed: Option<String>,
    /// The events broke the protocol: the task must be treated as lost, for this reason.
    pub(crate) broken: Option<String>,
}

/// Where broadcast chains start: the warmup chain's final position and tuning.
type WarmStart = (Vec<f64>, WireTuning);

/// A poll waiting for events.
#[derive(Debug)]
struct Parked {
    waiter: Waiter<Responder<JobWire>>,
    /// It follows the answer before it (`JobRequest::Poll::follow`).
    follow: bool,
}

/// A job.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) id: JobId,
    pub(crate) client: NodeName,
    pub(crate) submission: RequestId,
    pub(crate) spec: JobSpec,
    chains: Vec<Chain>,
    /// With [`WarmupMode::Broadcast`]: the warmup chain and, once done, its final position and
    /// tuning.
    warmup: Option<(Chain, Option<WarmStart>)>,
    pub(crate) tasks: HashMap<TaskId, TaskRecord>,
    pub(crate) outbox: Outbox<WireJobEvent>,
    /// The client's parked polls, oldest first: one, or up to [`IN_FLIGHT`] that follow.
    waiters: VecDeque<Parked>,
    /// The token of the job's link, if it has one.
    pub(crate) link: Option<LinkToken>,
    retried: Vec<WireRetry>,
    /// How its chains ran, as their pools said (every poll answer carries them).
    notes: RunNotes,
    pub(crate) last_poll: Instant,
    /// Since when scheduling rounds found no pool that suits the job (while it had
    /// nothing running): pools may be restarting, so the job waits a while first.
    pub(crate) no_pool_since: Option<Instant>,
    phase: Phase,
    /// Time spent answering polls (gathering and encoding their events), and how many: the
    /// `runtime::timeline` event when the job goes.
    answering: std::time::Duration,
    answers: u32,
    /// The last event of the last answer (or its `ack` when it had none): where a poll that
    /// follows starts.
    answered: u64,
}

impl Job {
    pub(crate) fn new(id: JobId, client: NodeName, submission: RequestId, spec: JobSpec) -> Self {
        let warmup = match spec.warmup {
            WarmupMode::Broadcast { .. } => Some((Chain::new(), None)),
            WarmupMode::Independent => None,
        };
        let mut chains: Vec<Chain> = (0..spec.n_chains).map(|_| Chain::new()).collect();
        if let Some(asked) = &spec.chains {
            for chain in &mut chains {
                chain.state = ChainState::NotAsked;
            }
            for &number in asked {
                if let Some(chain) = chains.get_mut(number as usize) {
                    chain.state = ChainState::Pending;
                }
            }
        }
        Self {
            id,
            client,
            submission,
            chains,
            spec,
            warmup,
            tasks: HashMap::new(),
            outbox: Outbox::new(),
            waiters: VecDeque::new(),
            link: None,
            retried: Vec::new(),
            notes: RunNotes::default(),
            last_poll: Instant::now(),
            no_pool_since: None,
            phase: Phase::Running,
            answering: std::time::Duration::ZERO,
            answers: 0,
            answered: 0,
        }
    }

    /// The `runtime::timeline` event of a job that goes: its polls' answering.
    pub(crate) fn log_timeline(&self) {
        tracing::debug!(
            target: "runtime::timeline",
            job = %self.id,
            answers = self.answers,
            answer_ms = self.answering.as_secs_f64() * 1e3,
            "job's polls answered"
        );
    }

    /// Whether the job still runs.
    pub(crate) fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Whether the job ended and the client has every event.
    pub(crate) fn is_collected(&self) -> bool {
        self.phase != Phase::Running && self.outbox.len() == 0
    }

    /// Whether some chain is running.
    pub(crate) fn has_running(&self) -> bool {
        !self.tasks.is_empty()
    }

    /// Whether chains wait to be dispatched (cheaper than [`Self::pending`]).
    pub(crate) fn has_pending(&self) -> bool {
        if !self.is_running() {
            return false;
        }
        match &self.warmup {
            Some((warmup, None)) => warmup.state == ChainState::Pending,
            _ => self.chains.iter().any(|c| c.state == ChainState::Pending),
        }
    }

    /// The chains ready to be dispatched. With broadcast warmup, only the warmup chain until
    /// it is done, then every chain with its result.
    pub(crate) fn pending(&self) -> Vec<WireChainSpec> {
        if !self.is_running() {
            return Vec::new();
        }
        let start = match &self.warmup {
            Some((warmup, None)) => {
                return if warmup.state == ChainState::Pending {
                    vec![WireChainSpec {
                        chain: WARMUP_CHAIN.0,
                        init: None,
                        tuning: None,
                    }]
                } else {
                    Vec::new()
                };
            }
            Some((_, Some((init, tuning)))) => Some((init, tuning)),
            None => None,
        };
        self.chains
            .iter()
            .enumerate()
            .filter(|(_, chain)| chain.state == ChainState::Pending)
            .map(|(index, _)| WireChainSpec {
                chain: index as u32,
                init: start.map(|(init, _)| init.clone()),
                tuning: start.map(|(_, tuning)| tuning.clone()),
            })
            .collect()
    }

    /// The pending chains as the scheduler places them: the oldest quarantined group first
    /// (only while no quarantined task of the job runs), then the chains that failed before,
    /// grouped by the nodes they avoid, then the rest.
    pub(crate) fn pending_groups(&self) -> Vec<PendingGroup> {
        let quarantine_running = self.tasks.values().any(|record| record.quarantined);
        let mut quarantined: Vec<(TaskId, PendingGroup)> = Vec::new();
        let mut others: Vec<PendingGroup> = Vec::new();
        for spec in self.pending() {
            let Some(chain) = self.chain(spec.chain) else {
                continue;
            };
            let avoid = chain.failed_on();
            if let Some(key) = chain.quarantine {
                match quarantined.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, group)) => {
                        group.chains.push(spec);
                        for node in avoid {
                            if !group.avoid.contains(&node) {
                                group.avoid.push(node);
                            }
                        }
                    }
                    None => quarantined.push((
                        key,
                        PendingGroup {
                            chains: vec![spec],
                            alone: true,
                            avoid,
                        },
                    )),
                }
                continue;
            }
            match others.iter_mut().find(|group| group.avoid == avoid) {
                Some(group) => group.chains.push(spec),
                None => others.push(PendingGroup {
                    chains: vec![spec],
                    alone: false,
                    avoid,
                }),
            }
        }
        // Fresh chains last: the ones that failed before have waited longer.
        others.sort_by_key(|group| group.avoid.is_empty());
        quarantined.sort_by_key(|(key, _)| *key);
        let first = quarantined
            .into_iter()
            .next()
            .filter(|_| !quarantine_running)
            .map(|(_, group)| group);
        first.into_iter().chain(others).collect()
    }

    /// Nodes running chains of the job.
    pub(crate) fn nodes_running(&self) -> Vec<NodeName> {
        let nodes: BTreeSet<&NodeName> = self.tasks.values().map(|r| &r.node).collect();
        nodes.into_iter().cloned().collect()
    }

    /// Nodes running quarantined chains of the job.
    pub(crate) fn nodes_quarantined(&self) -> Vec<NodeName> {
        let nodes: BTreeSet<&NodeName> = self
            .tasks
            .values()
            .filter(|r| r.quarantined)
            .map(|r| &r.node)
            .collect();
        nodes.into_iter().cloned().collect()
    }

    /// Records chains sent to a pool as task `task`; returns what to send it.
    pub(crate) fn dispatch(
        &mut self,
        task: TaskId,
        pool: ActorId,
        node: NodeName,
        kind: PoolKind,
        chains: Vec<WireChainSpec>,
    ) -> WireTask {
        let numbers: Vec<u32> = chains.iter().map(|c| c.chain).collect();
        let mut quarantined = false;
        for &number in &numbers {
            if let Some(chain) = self.chain_mut(number) {
                chain.state = ChainState::Running(task);
                quarantined |= chain.quarantine.is_some();
            }
        }
        let mut settings = self.spec.settings.clone();
        let mut burn_in = match self.spec.warmup {
            WarmupMode::Broadcast { burn_in } => burn_in,
            WarmupMode::Independent => 0,
        };
        if numbers == [WARMUP_CHAIN.0] {
            settings.num_draws = 0;
            settings.save_warmup = false;
            burn_in = 0;
        }
        self.outbox.push(WireJobEvent::Placed {
            chains: numbers.clone(),
            node: node.to_string(),
            pool: match kind {
                PoolKind::Cpu => WirePoolKind::Cpu,
                PoolKind::Gpu => WirePoolKind::Gpu,
            },
        });
        self.tasks.insert(
            task,
            TaskRecord {
                pool,
                node,
                received: numbers.iter().map(|&chain| (chain, (0, 0))).collect(),
                chains: numbers,
                quarantined,
            },
        );
        self.answer_waiters();
        WireTask {
            task,
            job: self.id,
            model: self.spec.model.as_ref().clone(),
            settings,
            seed: self.spec.seed,
            chains,
            burn_in,
            blocks: true,
            positions: self.spec.positions,
        }
    }

    /// Takes in what task `task` reported.
    pub(crate) fn apply(&mut self, task: TaskId, events: Vec<WireTaskEvent>) -> Applied {
        let mut applied = Applied::default();
        for event in events {
            let Some(record) = self.tasks.get(&task) else {
                break;
            };
            let node = record.node.clone();
            match event {
                WireTaskEvent::Progress {
                    chain,
                    iteration,
                    total,
                    draws,
                } => {
                    let Some(attempt) = self.running_attempt(chain, task) else {
                        continue;
                    };
                    if let Some(draws) = &draws {
                        let counts = self
                            .tasks
                            .get_mut(&task)
                            .map(|r| r.received.entry(chain).or_default());
                        let Some((kept, warmup)) = counts else { break };
                        let count = if draws.warmup { warmup } else { kept };
                        if draws.first != *count {
                            applied.broken = Some(format!(
                                "chain {chain}: draws from {} arrived after {count}",
                                draws.first
                            ));
                            return applied;
                        }
                        *count += draws.stats.lp.len() as u64;
                    }
                    if ChainId(chain) != WARMUP_CHAIN {
                        self.outbox.push(WireJobEvent::Progress {
                            chain,
                            attempt,
                            iteration,
                            total,
                            draws,
                        });
                    }
                }
                WireTaskEvent::Block(block) => {
                    if let Err(reason) = self.apply_block(task, block) {
                        applied.broken = Some(reason);
                        return applied;
                    }
                }
                WireTaskEvent::ChainDone(mut done) => {
                    let chain = done.chain;
                    let Some(attempt) = self.running_attempt(chain, task) else {
                        continue;
                    };
                    let received = self
                        .tasks
                        .get(&task)
                        .and_then(|r| r.received.get(&chain).copied())
                        .unwrap_or_default();
                    let (kept, warmup) = received;
                    let streamed_warmup =
                        ChainId(chain) == WARMUP_CHAIN || warmup == done.n_warmup_draws;
                    if kept != done.n_draws || !streamed_warmup {
                        applied.broken = Some(format!(
                            "chain {chain}: {} draws announced, {kept} received",
                            done.n_draws
                        ));
                        return applied;
                    }
                    applied.finished_chains += 1;
                    // Kept with the job, not forwarded with the chain.
                    if let Some(text) = done.ran_on.take() {
                        self.notes.add(&node, &text);
                    }
                    if ChainId(chain) == WARMUP_CHAIN {
                        if let Some((warmup, result)) = &mut self.warmup {
                            warmup.state = ChainState::Done;
                            *result = Some((done.final_position.clone(), done.tuning.clone()));
                        }
                        self.outbox.push(WireJobEvent::WarmupDone {
                            node: node.to_string(),
                            tuning: done.tuning,
                            grad_evals: done.grad_evals_warmup + done.grad_evals_sampling,
                            seconds: done.warmup_seconds + done.sampling_seconds,
                        });
                    } else {
                        if let Some(state) = self.chain_mut(chain) {
                            state.state = ChainState::Done;
                        }
                        self.outbox.push(WireJobEvent::ChainDone {
                            attempt,
                            node: node.to_string(),
                            done,
                        });
                    }
                }
                WireTaskEvent::ChainFailed {
                    chain,
                    error,
                    cause,
                } => {
                    if self.running_attempt(chain, task).is_none() {
                        continue;
                    }
                    if cause == WireFailure::Sampler {
                        let which = chain_name(chain);
                        applied.chain_failed = Some(format!("{which} failed on {node}: {error}"));
                        return applied;
                    }
                    let reason = format!("worker failed: {error}");
                    if let Some(state) = self.chain_mut(chain) {
                        state.state = ChainState::Pending;
                    }
                    let again = vec![chain];
                    if let Err(error) = self.retry(again, &node, &reason, FailureKind::Worker) {
                        applied.chain_failed = Some(error);
                        return applied;
                    }
                    applied.retried_chains.push((chain, reason));
                }
            }
        }
        if let Some(record) = self.tasks.get(&task) {
            let complete = record
                .chains
                .iter()
                .all(|&c| self.chain_state(c) != Some(ChainState::Running(task)));
            if complete {
                self.tasks.remove(&task);
                applied.task_complete = true;
            }
        }
        if self.is_running() && self.is_complete() {
            self.phase = Phase::Finished;
            self.outbox.push(WireJobEvent::Finished {
                retried: self.retried.clone(),
            });
        }
        self.answer_waiters();
        applied
    }

    /// Task `task` is lost: its unfinished chains run again, quarantined. Returns `false` for
    /// a task the job does not know (already finished or lost), and an error when a chain ran
    /// out of attempts or was lost a second time in quarantine.
    pub(crate) fn lose(&mut self, task: TaskId, reason: &str) -> Result<bool, String> {
        self.end_task(task, reason, FailureKind::Lost)
    }

    /// The pool refused task `task`: its chains run again elsewhere. Returns as
    /// [`Self::lose`] does.
    pub(crate) fn refuse(&mut self, task: TaskId, reason: &str) -> Result<bool, String> {
        self.end_task(task, reason, FailureKind::Refused)
    }

    fn end_task(&mut self, task: TaskId, reason: &str, kind: FailureKind) -> Result<bool, String> {
        let Some(record) = self.tasks.remove(&task) else {
            return Ok(false);
        };
        let mut again = Vec::new();
        for &number in &record.chains {
            let Some(chain) = self.chain_mut(number) else {
                continue;
            };
            if chain.state != ChainState::Running(task) {
                continue;
            }
            chain.state = ChainState::Pending;
            again.push(number);
        }
        let suspects: Vec<u32> = again
            .iter()
            .copied()
            .filter(|&c| self.chain(c).is_some_and(|c| c.quarantine.is_some()))
            .collect();
        self.retry(again.clone(), &record.node, reason, kind)?;
        if kind == FailureKind::Lost {
            if !suspects.is_empty() {
                // Lost twice: the job takes nodes down with it.
                return Err(self.poison_error(&suspects));
            }
            for &number in &again {
                if let Some(chain) = self.chain_mut(number) {
                    chain.quarantine = Some(task);
                }
            }
        }
        Ok(true)
    }

    /// Node `node` went down for `reason`: chains whose task on it was lost a moment before
    /// (by their driver, first to notice) were lost with the node, and their last failure
    /// says so.
    pub(crate) fn node_down(&mut self, node: &NodeName, reason: &str) {
        let now = Instant::now();
        let chains = self
            .chains
            .iter_mut()
            .chain(self.warmup.iter_mut().map(|(c, _)| c));
        for chain in chains {
            if let Some(last) = chain.failures.last_mut()
                && last.kind == FailureKind::Lost
                && &last.node == node
                && now.duration_since(last.at) <= LOST_WITH_NODE
            {
                last.what = reason.to_owned();
            }
        }
    }

    /// Chains that were running on `node` and are pending again, for `reason`: their next
    /// attempt, a failure on record, a `Retried` event and entries of the final report. An
    /// error naming them when one ran out of attempts.
    fn retry(
        &mut self,
        again: Vec<u32>,
        node: &NodeName,
        reason: &str,
        kind: FailureKind,
    ) -> Result<(), String> {
        let mut attempt = 0;
        let mut exhausted = Vec::new();
        let at = Instant::now();
        for &number in &again {
            if let Some(chain) = self.chain_mut(number) {
                chain.attempt += 1;
                chain.failures.push(Failure {
                    node: node.clone(),
                    what: reason.to_owned(),
                    kind,
                    at,
                });
                attempt = attempt.max(chain.attempt);
                if chain.attempt > MAX_ATTEMPTS {
                    exhausted.push(number);
                }
            }
        }
        if again.is_empty() {
            return Ok(());
        }
        for &chain in &again {
            self.retried.push(WireRetry {
                chain,
                node: node.to_string(),
                reason: reason.to_owned(),
                attempt,
            });
        }
        self.outbox.push(WireJobEvent::Retried {
            chains: again,
            node: node.to_string(),
            reason: reason.to_owned(),
            attempt,
        });
        self.answer_waiters();
        if !exhausted.is_empty() {
            return Err(self.poison_error(&exhausted));
        }
        Ok(())
    }

    /// The error that stops a job whose `chains` failed wherever they ran: the chains, the
    /// nodes tried and what each reported.
    fn poison_error(&self, chains: &[u32]) -> String {
        let mut tried: Vec<&Failure> = Vec::new();
        for chain in chains.iter().filter_map(|&c| self.chain(c)) {
            for failure in &chain.failures {
                let seen = tried.iter().any(|t| {
                    t.node == failure.node && t.what == failure.what && t.at == failure.at
                });
                if !seen {
                    tried.push(failure);
                }
            }
        }
        tried.sort_by_key(|failure| failure.at);
        let names = match chains {
            [chain] => chain_name(*chain),
            chains => {
                let numbers: Vec<String> = chains.iter().map(u32::to_string).collect();
                format!("chains {}", numbers.join(", "))
            }
        };
        let tried: Vec<String> = tried
            .iter()
            .map(|failure| format!("{} ({})", failure.node, failure.what))
            .collect();
        let lost = chains
            .iter()
            .filter_map(|&c| self.chain(c))
            .flat_map(|c| &c.failures)
            .any(|failure| failure.kind == FailureKind::Lost);
        format!(
            "{names} failed on every node tried: {}; the job is stopped{}",
            tried.join(", "),
            if lost {
                " so that it cannot take down more nodes"
            } else {
                ""
            }
        )
    }

    /// Ends the job with `error`; returns its tasks, to be cancelled.
    pub(crate) fn fail(&mut self, error: String) -> Vec<(TaskId, TaskRecord)> {
        if self.phase == Phase::Running {
            self.phase = Phase::Failed;
            self.outbox.push(WireJobEvent::Failed { error });
            self.answer_waiters();
        }
        self.tasks.drain().collect()
    }

    /// Forgets the job's tasks (its coordinator leaves; the job's client resubmits what it
    /// did not receive elsewhere); returns them, to be cancelled.
    pub(crate) fn take_tasks(&mut self) -> Vec<(TaskId, TaskRecord)> {
        self.tasks.drain().collect()
    }

    /// The tasks running on `node`.
    pub(crate) fn tasks_on(&self, node: &NodeName) -> Vec<TaskId> {
        self.tasks
            .iter()
            .filter(|(_, record)| &record.node == node)
            .map(|(task, _)| *task)
            .collect()
    }

    /// The coordinator's node drains: tells the client (the job goes on until it finishes or
    /// the node leaves after `grace`).
    pub(crate) fn notify_draining(&mut self, node: &NodeName, grace: std::time::Duration) {
        if !self.is_running() {
            return;
        }
        self.outbox.push(WireJobEvent::Draining {
            node: node.to_string(),
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        });
        self.answer_waiters();
    }

    /// A poll from the client: acknowledges, then answers now or waits. A poll that
    /// follows (`JobRequest::Poll::follow`) waits behind those parked (up to [`IN_FLIGHT`]
    /// in all: one more has the oldest answered at once) and is answered with the events
    /// after those of the answer before it; any other poll has the parked ones answered at
    /// once and starts from its `ack`.
    pub(crate) fn poll(&mut self, ack: u64, follow: bool, waiter: Waiter<Responder<JobWire>>) {
        self.last_poll = Instant::now();
        self.outbox.ack(ack);
        let keep = if follow { IN_FLIGHT - 1 } else { 0 };
        while self.waiters.len() > keep {
            if let Some(old) = self.waiters.pop_front() {
                self.answer(old);
            }
        }
        self.waiters.push_back(Parked { waiter, follow });
        self.answer_waiters();
    }

    /// Whether a poll is parked.
    pub(crate) fn has_waiter(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Answers every parked poll with no events: the client has the last one.
    pub(crate) fn release_waiters(&mut self) {
        for parked in self.waiters.drain(..) {
            parked.waiter.reply.send(Ok(JobReply::Events {
                job: self.id,
                events: Vec::new(),
                notes: Vec::new(),
            }));
        }
    }

    /// Answers the waiting polls whose wait ran out (by `now`), oldest first.
    pub(crate) fn expire_waiters(&mut self, now: Instant) {
        while self
            .waiters
            .front()
            .is_some_and(|parked| parked.waiter.deadline <= now)
        {
            if let Some(parked) = self.waiters.pop_front() {
                self.answer(parked);
            }
        }
    }

    /// Answers the parked polls, oldest first, while there are events for them.
    fn answer_waiters(&mut self) {
        while let Some(parked) = self.waiters.front() {
            if !self.outbox.has_after(self.from(parked)) {
                return;
            }
            if let Some(parked) = self.waiters.pop_front() {
                self.answer(parked);
            }
        }
    }

    /// Where `parked`'s answer starts: after its `ack`, or after the last answer's events
    /// for a poll that follows.
    fn from(&self, parked: &Parked) -> u64 {
        if parked.follow {
            parked.waiter.ack.max(self.answered)
        } else {
            parked.waiter.ack
        }
    }

    /// Answers `waiter` with the events after its `ack`. The answer is encoded on a blocking
    /// thread where there is a runtime: a large one takes milliseconds, and the coordinator
    /// takes in the pools' draws meanwhile.
    fn answer(&mut self, parked: Parked) {
        let started = std::time::Instant::now();
        let from = self.from(&parked);
        let events = self
            .outbox
            .after(from, MAX_POLL_REPLY_BYTES, WireJobEvent::estimated_bytes);
        self.answered = events.last().map_or(from, |event| event.seq);
        let waiter = parked.waiter;
        let reply = JobReply::Events {
            job: self.id,
            events,
            notes: self.notes.to_wire(),
        };
        let send = move || waiter.reply.send(Ok(reply));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(send)),
            Err(_) => send(),
        }
        self.answering += started.elapsed();
        self.answers += 1;
    }

    fn is_complete(&self) -> bool {
        self.chains
            .iter()
            .all(|c| matches!(c.state, ChainState::Done | ChainState::NotAsked))
    }

    fn chain_mut(&mut self, number: u32) -> Option<&mut Chain> {
        if ChainId(number) == WARMUP_CHAIN {
            self.warmup.as_mut().map(|(chain, _)| chain)
        } else {
            self.chains.get_mut(number as usize)
        }
    }

    fn chain(&self, number: u32) -> Option<&Chain> {
        if ChainId(number) == WARMUP_CHAIN {
            self.warmup.as_ref().map(|(chain, _)| chain)
        } else {
            self.chains.get(number as usize)
        }
    }

    fn chain_state(&self, number: u32) -> Option<ChainState> {
        self.chain(number).map(|chain| chain.state)
    }

    /// The attempt of chain `number` if it is running as part of `task`.
    /// Takes in a block of draws of task `task` as the `Progress` events of its entries:
    /// the same checks (each chain's draws join up), the entries of chains no longer running
    /// there dropped, the warmup chain's not forwarded. An error breaks the task: a block
    /// that does not check, or names a chain not in the task.
    fn apply_block(&mut self, task: TaskId, block: Arc<WireDrawBlock>) -> Result<(), String> {
        if block.positions && !self.spec.positions {
            return Err("a block of positions, which the job's client does not read".to_owned());
        }
        let entries = block.entries()?;
        // Each entry's attempt first (chains are read-only here), then one pass over the
        // task's counts: a block has an entry per chain, thousands of them.
        let running: Vec<Option<u32>> = entries
            .iter()
            .map(|entry| self.running_attempt(entry.chain, task))
            .collect();
        let Some(record) = self.tasks.get_mut(&task) else {
            return Ok(());
        };
        let mut keep = Vec::with_capacity(entries.len());
        let mut attempts = Vec::with_capacity(entries.len());
        for (index, (entry, attempt)) in entries.iter().zip(running).enumerate() {
            let chain = entry.chain;
            let Some((kept, warmup)) = record.received.get_mut(&chain) else {
                return Err(format!("a block names chain {chain}, not in the task"));
            };
            let Some(attempt) = attempt else { continue };
            let count = if entry.warmup { warmup } else { kept };
            if entry.first != *count {
                return Err(format!(
                    "chain {chain}: draws from {} arrived after {count}",
                    entry.first
                ));
            }
            *count += entry.len() as u64;
            if ChainId(chain) != WARMUP_CHAIN {
                keep.push(index);
                attempts.push(attempt);
            }
        }
        if keep.is_empty() {
            return Ok(());
        }
        if !self.spec.blocks {
            for (&index, attempt) in keep.iter().zip(attempts) {
                let entry = &entries[index];
                self.outbox.push(WireJobEvent::Progress {
                    chain: entry.chain,
                    attempt,
                    iteration: entry.iteration,
                    total: block.total,
                    draws: (!entry.is_empty()).then(|| block.draws(entry)),
                });
            }
            return Ok(());
        }
        let block = if keep.len() == entries.len() {
            block
        } else {
            Arc::new(block.select(&entries, &keep))
        };
        self.outbox.push(WireJobEvent::Block { attempts, block });
        Ok(())
    }

    fn running_attempt(&self, number: u32, task: TaskId) -> Option<u32> {
        let chain = self.chain(number)?;
        (chain.state == ChainState::Running(task)).then_some(chain.attempt)
    }
}

/// How errors name a chain.
fn chain_name(chain: u32) -> String {
    if ChainId(chain) == WARMUP_CHAIN {
        "the warmup chain".to_owned()
    } else {
        format!("chain {chain}")
    }
}
