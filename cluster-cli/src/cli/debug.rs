//! `cluster-cli debug` (hidden): tools for the multi-process tests. `raw` sends a node a
//! request as raw bytes (garbage, oversized, a bad model, another protocol version) and
//! prints the node's answer; `fault` asks a node's CPU pool to panic, or to abort the node's
//! process whenever it starts a chain from then on (the node must run with
//! `--allow-fault-injection`).
//!
//! A raw request that gets an answer, even an error answer, exits 0 and prints
//! `reply: ...`; no answer at all (a silent drop, a closed session) is an error.

use clap::{Subcommand, ValueEnum};
use runtime::wire::{
    Envelope, JobReply, JobRequest, MAX_ENVELOPE_BYTES, MembershipReply, PoolReply, WireDevice,
    WireError, WireFault, WireSampleRequest, WireSettings, WireWarmup,
};
use runtime::{ClientSettings, ClusterClient, RawService, RequestId};
use sampler::{CheckedModel, Limits, SamplerSettings};
use serde::de::DeserializeOwned;

use super::cluster::{TlsOptions, block_on, resolve};
use crate::cookie::{CookieArgs, Missing};

/// Arguments of `debug`.
#[derive(Debug, clap::Args)]
pub struct DebugArgs {
    #[command(subcommand)]
    command: DebugCommand,
    /// A node of the cluster, HOST:PORT.
    #[arg(
        long,
        global = true,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:4370"
    )]
    cluster: String,
    #[command(flatten)]
    cookie: CookieArgs,
    #[command(flatten)]
    tls: TlsOptions,
}

#[derive(Debug, Subcommand)]
enum DebugCommand {
    /// Send a raw request and print the answer.
    Raw {
        /// The service to send it to.
        #[arg(long, value_enum, default_value_t = ServiceArg::Coordinator)]
        service: ServiceArg,
        /// What to send.
        #[arg(long, value_enum)]
        payload: Payload,
    },
    /// Inject a fault.
    Fault {
        /// The fault.
        #[arg(value_enum)]
        fault: FaultArg,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ServiceArg {
    Membership,
    Coordinator,
    Pool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Payload {
    /// 4 KiB of bytes that are not MessagePack.
    Garbage,
    /// One MiB more than the envelope limit (but under the frame limit).
    Oversized,
    /// A well-formed job whose model is not a model.
    BadModel,
    /// A job in a protocol version nobody speaks.
    BadVersion,
    /// One chain of a small model with 1000000000 draws, as `sample --draws 1000000000` asks
    /// (without the client's own check).
    HugeJob,
}

/// A small valid model, for requests whose content is not the model.
const SMALL_MODEL: &str = r#"{"ir_version": 1, "name": "normal_mean",
  "data": {"y": {"vector": [0.1, -0.3, 0.5]}},
  "parameters": [{"name": "mu"}],
  "model": [{"sample": {"value": "y", "dist": {"normal": {"mu": "mu", "sigma": 1}}}}]}"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FaultArg {
    /// The node's CPU pool panics; its supervisor restarts it.
    PanicPool,
    /// The node's process aborts whenever its CPU pool starts a chain from now on.
    AbortOnRun,
}

pub fn run(args: DebugArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::CLIENT_DEFAULT);
    let address = resolve(&args.cluster)?;
    let mut settings = ClientSettings::new(args.cookie.resolve(Missing::Fail)?);
    settings.tls = args.tls.identity()?;
    block_on(async move {
        let mut client = ClusterClient::connect(address, settings).await?;
        let result = match args.command {
            DebugCommand::Raw { service, payload } => raw(&mut client, service, payload).await,
            DebugCommand::Fault { fault } => {
                let (wire, effect) = match fault {
                    FaultArg::PanicPool => (WireFault::PanicPool, "panics"),
                    FaultArg::AbortOnRun => (WireFault::AbortOnRun, "aborts when a chain starts"),
                };
                client
                    .inject_fault(wire)
                    .await
                    .map(|()| outln!("fault injected: {} {effect}", client.peer()))
                    .map_err(anyhow::Error::from)
            }
        };
        client.close().await;
        result
    })?
}

async fn raw(
    client: &mut ClusterClient,
    service: ServiceArg,
    payload: Payload,
) -> anyhow::Result<()> {
    let bytes = match payload {
        Payload::Garbage => (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 0xc1)
            .collect(),
        Payload::Oversized => vec![0x90; MAX_ENVELOPE_BYTES + (1 << 20)],
        Payload::BadModel => job(client, b"this is not a model".to_vec()).encode()?,
        Payload::BadVersion => {
            let mut envelope = job(client, Vec::new());
            envelope.version += 1;
            envelope.encode()?
        }
        Payload::HugeJob => {
            let model = CheckedModel::from_json(SMALL_MODEL, &Limits::default())?;
            let mut envelope = job(client, model.model().to_msgpack());
            if let JobRequest::Submit(request) = &mut envelope.body {
                request.n_chains = 1;
                request.settings.num_draws = 1_000_000_000;
            }
            envelope.encode()?
        }
    };
    let sent = bytes.len();
    let service = match service {
        ServiceArg::Membership => RawService::Membership,
        ServiceArg::Coordinator => RawService::Coordinator,
        ServiceArg::Pool => RawService::Pool,
    };
    let answer = client.call_raw(service, bytes).await?;
    let text = match service {
        RawService::Membership => describe::<MembershipReply>(&answer),
        RawService::Coordinator => describe::<JobReply>(&answer),
        RawService::Pool => describe::<PoolReply>(&answer),
    };
    outln!("sent {sent} bytes\nreply: {text}");
    Ok(())
}

fn job(client: &ClusterClient, model: Vec<u8>) -> Envelope<JobRequest> {
    let request = WireSampleRequest {
        model,
        settings: WireSettings::from(&SamplerSettings::default()),
        n_chains: 4,
        seed: 1,
        device: WireDevice::Cpu,
        warmup: WireWarmup::Independent,
        chains: None,
        blocks: false,
        link: false,
        positions: false,
    };
    Envelope::new(RequestId(1), client.name(), JobRequest::Submit(request))
}

fn describe<R: DeserializeOwned + std::fmt::Debug>(answer: &[u8]) -> String {
    match Envelope::<Result<R, WireError>>::decode(answer) {
        Ok(envelope) => match envelope.body {
            Ok(body) => format!("ok: {body:?}"),
            Err(error) => format!("error: {error}"),
        },
        Err(error) => format!("undecodable answer: {error}"),
    }
}
