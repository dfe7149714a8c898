//! The pool endpoint: the remotable face of a sampler pool, in the `cpu-pool` or `gpu-pool`
//! process group. It decodes each request (fallibly, bounded in size), decodes and validates the
//! model of a task (keeping the last few, since a job sends its model with each dispatch),
//! checks it against this node's [`JobLimits`], and hands the checked task to the local
//! [`SamplerPool`](super::SamplerPool). What it cannot read or accept it answers with a typed
//! [`WireError`]; a task over a limit gets [`WireError::LimitExceeded`], which fails the job
//! rather than sending the chains elsewhere.

use std::collections::VecDeque;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use sampler::{ChainSpec, CheckedModel, Limits, Seed};

use super::{PoolMsg, PreparedTask};
use crate::discovery::{CPU_POOL, GPU_POOL};
use crate::ids::{NodeName, job_span};
use crate::limits::{Holder, JobLimits, JobShape};
use crate::sampling::{MAX_CHAINS, PoolKind};
use crate::wire::{self, PoolRequest, PoolWire, Responder, WireError, WireFault, WireTask};

/// Decoded models kept for the next dispatch of the same job.
const CACHED_MODELS: usize = 4;

/// The endpoint behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PoolEndpoint;

/// The endpoint's arguments.
#[derive(Debug, Clone)]
pub(crate) struct EndpointArgs {
    /// This node, for the replies' sender field.
    pub(crate) me: NodeName,
    /// The pool requests go to; a new pool comes with a new endpoint (rest-for-one).
    pub(crate) pool: ActorRef<PoolMsg>,
    /// The pool's kind: its process group, and what it accepts.
    pub(crate) kind: PoolKind,
    /// What one task may ask of this node.
    pub(crate) limits: JobLimits,
}

/// The endpoint's state.
#[derive(Debug)]
pub(crate) struct EndpointState {
    me: NodeName,
    pool: ActorRef<PoolMsg>,
    kind: PoolKind,
    limits: JobLimits,
    models: ModelCache,
}

impl Actor for PoolEndpoint {
    type Msg = PoolWire;
    type State = EndpointState;
    type Arguments = EndpointArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: EndpointArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        match args.kind {
            PoolKind::Cpu => CPU_POOL.join(&myself),
            PoolKind::Gpu => GPU_POOL.join(&myself),
        }
        Ok(EndpointState {
            me: args.me,
            pool: args.pool,
            kind: args.kind,
            limits: args.limits,
            models: ModelCache::default(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let PoolWire::Call(bytes, port) = message;
        let Some(call) = wire::accept::<PoolWire>(&bytes, port, &state.me) else {
            return Ok(());
        };
        let span = call.job.map_or_else(tracing::Span::none, job_span);
        let _entered = span.enter();
        let (sender, responder) = (call.sender, call.responder);
        let message = match call.body {
            PoolRequest::Status => PoolMsg::Status(responder),
            PoolRequest::Run(task) => match prepare(
                task,
                state.kind,
                &state.limits,
                &state.me,
                &mut state.models,
            ) {
                Ok(task) => PoolMsg::Run {
                    sender,
                    task,
                    responder,
                },
                Err(error) => {
                    tracing::info!("refusing a task from {sender}: {error}");
                    responder.send(Err(error));
                    return Ok(());
                }
            },
            PoolRequest::Poll { task, ack, wait_ms } => PoolMsg::Poll {
                sender,
                task,
                ack,
                wait_ms,
                responder,
            },
            PoolRequest::Cancel { task } => PoolMsg::Cancel {
                sender,
                task,
                responder,
            },
            PoolRequest::InjectFault(WireFault::PanicPool) => PoolMsg::Panic(responder),
            PoolRequest::InjectFault(WireFault::FailRuns) => PoolMsg::FailRuns(responder),
            PoolRequest::InjectFault(WireFault::AbortOnRun) => PoolMsg::AbortOnRun(responder),
        };
        wire::hand_over(&state.pool, message, || format!("{} pool", state.kind));
        Ok(())
    }
}

impl wire::Answerable<PoolWire> for PoolMsg {
    fn into_responder(self) -> Option<Responder<PoolWire>> {
        match self {
            PoolMsg::Status(responder)
            | PoolMsg::Panic(responder)
            | PoolMsg::FailRuns(responder)
            | PoolMsg::AbortOnRun(responder)
            | PoolMsg::Run { responder, .. }
            | PoolMsg::Poll { responder, .. }
            | PoolMsg::Cancel { responder, .. } => Some(responder),
            PoolMsg::ChainProgress { .. }
            | PoolMsg::RunFinished { .. }
            | PoolMsg::Tick
            | PoolMsg::Drain(_)
            | PoolMsg::Membership(_) => None,
        }
    }
}

/// Checks a task: its model decodes and validates, its settings are valid, its chains fit
/// the model, and it is within this node's limits (counted as if every chain of the task
/// kept its draws: a GPU batch holds them in host memory).
fn prepare(
    task: WireTask,
    kind: PoolKind,
    limits: &JobLimits,
    me: &NodeName,
    models: &mut ModelCache,
) -> Result<PreparedTask, WireError> {
    let invalid = |what: &str, reason: String| WireError::Invalid {
        what: what.to_owned(),
        reason,
    };
    let model = models
        .get_or_decode(task.model)
        .map_err(|reason| invalid("model", reason))?;
    let settings = task.settings.to_settings(1);
    settings
        .validate()
        .map_err(|error| invalid("settings", error.to_string()))?;
    if kind == PoolKind::Gpu && settings.metric == sampler::MetricKind::Dense {
        return Err(invalid(
            "settings",
            "GPU workers adapt a diagonal metric only (a dense metric runs on CPU pools)"
                .to_owned(),
        ));
    }
    if task.chains.is_empty() || task.chains.len() > MAX_CHAINS as usize + 1 {
        return Err(invalid(
            "task",
            format!("{} chains (expected 1 to {MAX_CHAINS})", task.chains.len()),
        ));
    }
    let n_chains = task.chains.len() as u64;
    let subject = match n_chains {
        1 => "task of 1 chain".to_owned(),
        n => format!("task of {n} chains"),
    };
    let shape = JobShape::new(&model, &settings, n_chains, task.burn_in);
    limits
        .check(&shape, &subject, &Holder::Node(me.to_string()))
        .map_err(|error| error.to_wire())?;
    let dim = model.dim();
    let chains: Vec<ChainSpec> = task.chains.into_iter().map(ChainSpec::from).collect();
    for spec in &chains {
        if let Some(init) = &spec.init
            && init.len() != dim
        {
            return Err(invalid(
                "task",
                format!(
                    "chain {}: initial point of {} values for a model of dimension {dim}",
                    spec.chain,
                    init.len()
                ),
            ));
        }
    }
    Ok(PreparedTask {
        task: task.task,
        job: task.job,
        model,
        settings,
        seed: Seed(task.seed),
        chains,
        burn_in: task.burn_in,
        gpu_precision: task.settings.precision_mode(),
        positions: task.positions,
    })
}

/// The last few models decoded, keyed by their exact bytes.
#[derive(Debug, Default)]
struct ModelCache {
    entries: VecDeque<(Vec<u8>, Arc<CheckedModel>)>,
}

impl ModelCache {
    fn get_or_decode(&mut self, bytes: Vec<u8>) -> Result<Arc<CheckedModel>, String> {
        if let Some(position) = self.entries.iter().position(|(b, _)| *b == bytes) {
            let entry = self.entries.remove(position).expect("the position exists");
            let model = Arc::clone(&entry.1);
            self.entries.push_front(entry);
            return Ok(model);
        }
        let model = Arc::new(
            CheckedModel::from_msgpack(&bytes, &Limits::default()).map_err(|e| e.to_string())?,
        );
        self.entries.push_front((bytes, Arc::clone(&model)));
        self.entries.truncate(CACHED_MODELS);
        Ok(model)
    }
}
