//! The coordinator endpoint: the remotable face of the job coordinator, in the
//! `coordinator` process group, where clients submit jobs. It decodes each request (fallibly,
//! bounded in size), checks a submitted job (its model decodes and validates, its settings
//! are valid, it is within this node's [`JobLimits`]) and hands it to the local
//! [`Coordinator`](super::Coordinator). A malformed, oversized or invalid request gets a typed
//! [`WireError`] reply, never silence.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use sampler::{CheckedModel, Limits};

use super::CoordinatorMsg;
use super::job::JobSpec;
use crate::discovery::COORDINATOR;
use crate::ids::{NodeName, job_span};
use crate::limits::{Holder, JobLimits, JobShape};
use crate::sampling::{DevicePreference, MAX_CHAINS, WarmupMode};
use crate::wire::{
    self, JobRequest, JobWire, WireDevice, WireError, WireSampleRequest, WireWarmup,
};

/// Longest burn-in of a broadcast warmup.
const MAX_BURN_IN: u64 = 10_000_000;

/// The endpoint behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CoordinatorEndpoint;

/// The endpoint's arguments, which are also its state.
#[derive(Debug, Clone)]
pub(crate) struct EndpointArgs {
    /// This node, for the replies' sender field.
    pub(crate) me: NodeName,
    /// The coordinator requests go to; a new coordinator comes with a new endpoint.
    pub(crate) coordinator: ActorRef<CoordinatorMsg>,
    /// What one job may ask of this node.
    pub(crate) limits: JobLimits,
}

impl Actor for CoordinatorEndpoint {
    type Msg = JobWire;
    type State = EndpointArgs;
    type Arguments = EndpointArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: EndpointArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        COORDINATOR.join(&myself);
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let JobWire::Call(bytes, port) = message;
        let Some(call) = wire::accept::<JobWire>(&bytes, port, &state.me) else {
            return Ok(());
        };
        let span = call.job.map_or_else(tracing::Span::none, job_span);
        let _entered = span.enter();
        let (sender, responder) = (call.sender, call.responder);
        let message = match call.body {
            JobRequest::Submit(submitted) => match check(submitted, &state.limits, &state.me) {
                Ok(spec) => CoordinatorMsg::Submit {
                    client: sender,
                    submission: call.request_id,
                    spec,
                    responder,
                },
                Err(error) => {
                    tracing::info!("refusing a job from {sender}: {error}");
                    responder.send(Err(error));
                    return Ok(());
                }
            },
            JobRequest::Poll {
                job,
                ack,
                wait_ms,
                follow,
            } => CoordinatorMsg::Poll {
                job,
                ack,
                wait_ms,
                follow,
                responder,
            },
            JobRequest::Cancel { job } => CoordinatorMsg::Cancel { job, responder },
        };
        wire::hand_over(&state.coordinator, message, || "coordinator".to_owned());
        Ok(())
    }
}

/// Checks a submitted job: the model decodes and validates here first, so that a bad model
/// is the client's error at once rather than every pool's later, and the job is within
/// `limits` before anything is sized from its numbers.
pub(super) fn check(
    request: WireSampleRequest,
    limits: &JobLimits,
    me: &NodeName,
) -> Result<JobSpec, WireError> {
    let invalid = |what: &str, reason: String| WireError::Invalid {
        what: what.to_owned(),
        reason,
    };
    if request.n_chains == 0 || request.n_chains > MAX_CHAINS {
        return Err(invalid(
            "request",
            format!("{} chains (expected 1 to {MAX_CHAINS})", request.n_chains),
        ));
    }
    if let Some(chains) = &request.chains {
        check_subset(chains, request.n_chains).map_err(|reason| invalid("request", reason))?;
    }
    let settings = request.settings.to_settings(1);
    settings
        .validate()
        .map_err(|error| invalid("settings", error.to_string()))?;
    let warmup = match request.warmup {
        WireWarmup::Independent => WarmupMode::Independent,
        WireWarmup::Broadcast { burn_in } => {
            if burn_in > MAX_BURN_IN {
                return Err(invalid(
                    "request",
                    format!("burn-in of {burn_in} draws (at most {MAX_BURN_IN})"),
                ));
            }
            if settings.num_warmup == 0 {
                return Err(invalid(
                    "request",
                    "a broadcast warmup needs warmup iterations (num_warmup > 0)".to_owned(),
                ));
            }
            WarmupMode::Broadcast { burn_in }
        }
    };
    let model = CheckedModel::from_msgpack(&request.model, &Limits::default())
        .map_err(|error| invalid("model", error.to_string()))?;
    let burn_in = match warmup {
        WarmupMode::Broadcast { burn_in } => burn_in,
        WarmupMode::Independent => 0,
    };
    let shape = JobShape::new(&model, &settings, u64::from(request.n_chains), burn_in);
    limits
        .check(&shape, "job", &Holder::Node(me.to_string()))
        .map_err(|error| error.to_wire())?;
    let fingerprint = fingerprint(&model, &request);
    let model_hash = model.hash();
    Ok(JobSpec {
        model_name: model.name().to_owned(),
        model: Arc::new(request.model),
        settings: request.settings,
        n_chains: request.n_chains,
        seed: request.seed,
        device: match request.device {
            WireDevice::Any => DevicePreference::Any,
            WireDevice::Cpu => DevicePreference::Cpu,
            WireDevice::Gpu => DevicePreference::Gpu,
        },
        warmup,
        chains: request.chains,
        blocks: request.blocks,
        positions: request.blocks && request.positions,
        link: request.link,
        fingerprint,
        model_hash,
    })
}

/// A subset of a job's chains: not empty, no longer than the job, each below `n_chains`,
/// in increasing order (so without duplicates).
fn check_subset(chains: &[u32], n_chains: u32) -> Result<(), String> {
    if chains.is_empty() || chains.len() > n_chains as usize {
        return Err(format!(
            "a subset of {} chains of a job of {n_chains} (expected 1 to {n_chains})",
            chains.len()
        ));
    }
    if let Some(&chain) = chains.iter().find(|&&chain| chain >= n_chains) {
        return Err(format!(
            "chain {chain} in the subset is not one of the job's {n_chains} chains (0 to {})",
            n_chains - 1
        ));
    }
    if let Some(pair) = chains.windows(2).find(|pair| pair[0] >= pair[1]) {
        return Err(format!(
            "chains of a subset must increase: {} comes after {}",
            pair[1], pair[0]
        ));
    }
    Ok(())
}

/// A hash of the request, to tell a retried submission (same request id, same request) from
/// a client that reused a request id for another job: the model's content hash (its
/// MessagePack bytes need not be the same twice) and everything else as encoded.
fn fingerprint(model: &CheckedModel, request: &WireSampleRequest) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    model.hash().0.hash(&mut hasher);
    let rest = (
        &request.settings,
        request.n_chains,
        request.seed,
        request.device,
        request.warmup,
        &request.chains,
    );
    // Plain structs and enums: encoding them cannot fail, and gives the same bytes each time.
    rmp_serde::to_vec_named(&rest)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}
