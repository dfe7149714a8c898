//! The wire format, pinned: round trips of every body, exact bytes of reference envelopes,
//! and the errors a bad, foreign or oversized message gets.

use std::time::Duration;

use ractor::message::SerializedMessage;
use ractor::{Actor, ActorProcessingErr, ActorRef, Message};
use serde::{Deserialize, Serialize};

use super::*;

fn sender() -> NodeName {
    "a@127.0.0.1".parse().unwrap()
}

fn node_info() -> WireNodeInfo {
    WireNodeInfo {
        name: "b@127.0.0.1".into(),
        address: "127.0.0.1:4371".into(),
        resources: WireResources {
            cpu_slots: 16,
            gpus: vec![
                WireGpu {
                    adapter: "NVIDIA H100".into(),
                    backend: "Vulkan".into(),
                    memory_bytes: Some(80 << 30),
                    software: false,
                    unused: false,
                    chains: 0,
                },
                WireGpu {
                    adapter: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
                    backend: "Vulkan".into(),
                    memory_bytes: None,
                    software: true,
                    unused: true,
                    chains: 0,
                },
            ],
            running_jobs: 2,
        },
        draining: false,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn round_trip<T>(body: T)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug + Clone,
{
    let envelope = Envelope::new(RequestId(7), &sender(), body);
    let bytes = envelope.encode().unwrap();
    assert_eq!(Envelope::<T>::decode(&bytes).unwrap(), envelope);
    // Counted, then written into a buffer of that size: the same bytes as in one pass.
    assert_eq!(bytes, rmp_serde::to_vec_named(&envelope).unwrap());
    assert_eq!(bytes.capacity(), bytes.len(), "sized once");
}

#[test]
fn every_membership_body_round_trips() {
    let member = WireMember {
        name: "c@10.0.0.3".into(),
        address: "10.0.0.3:4370".into(),
    };
    for request in [
        MembershipRequest::Heartbeat {
            seq: u64::MAX,
            node: node_info(),
            members: vec![member.clone()],
        },
        MembershipRequest::Members,
        MembershipRequest::Join {
            address: "10.0.0.3:4370".into(),
        },
        MembershipRequest::Leave,
    ] {
        round_trip(request);
    }
    let replies: Vec<Result<MembershipReply, WireError>> = vec![
        Ok(MembershipReply::Heartbeat {
            seq: 1,
            node: node_info(),
            members: vec![member],
        }),
        Ok(MembershipReply::Members {
            members: vec![WireMemberStatus {
                name: "b@127.0.0.1".into(),
                address: "127.0.0.1:4371".into(),
                state: WireMemberState::Down,
                resources: None,
            }],
        }),
        Ok(MembershipReply::Joined { node: node_info() }),
        Ok(MembershipReply::JoinFailed {
            error: WireJoinError::AuthenticationFailed {
                address: "10.0.0.3:4370".into(),
            },
        }),
        Ok(MembershipReply::Left),
        Err(WireError::UnsupportedVersion {
            found: 2,
            supported: 1,
        }),
        Err(WireError::TooLarge { size: 9, limit: 8 }),
    ];
    for reply in replies {
        round_trip(reply);
    }
}

/// These bytes are what version-2 peers send; a change here breaks mixed clusters.
#[test]
fn envelope_bytes_are_pinned() {
    let members = Envelope::new(RequestId(7), &sender(), MembershipRequest::Members)
        .encode()
        .unwrap();
    assert_eq!(hex(&members), PINNED_MEMBERS);

    let heartbeat = Envelope::new(
        RequestId(1),
        &sender(),
        MembershipRequest::Heartbeat {
            seq: 3,
            node: WireNodeInfo {
                name: "a@127.0.0.1".into(),
                address: "127.0.0.1:4370".into(),
                resources: WireResources {
                    cpu_slots: 2,
                    gpus: vec![],
                    running_jobs: 0,
                },
                draining: false,
            },
            members: vec![],
        },
    )
    .encode()
    .unwrap();
    assert_eq!(hex(&heartbeat), PINNED_HEARTBEAT);
}

// {"version": 1, "request_id": 7, "sender": "a@127.0.0.1", "body": "Members"}
const PINNED_MEMBERS: &str = "84a776657273696f6e02aa726571756573745f696407a673656e646572ab61403132372e302e302e31a4626f6479a74d656d62657273";
// {"version": 2, "request_id": 1, "sender": "a@127.0.0.1", "body": {"Heartbeat": {"seq": 3,
//  "node": {"name": "a@127.0.0.1", "address": "127.0.0.1:4370", "resources": {"cpu_slots": 2,
//  "gpus": [], "running_jobs": 0}}, "members": []}}}
const PINNED_HEARTBEAT: &str = concat!(
    "84a776657273696f6e02aa726571756573745f696401a673656e646572ab61403132372e302e302e31a4626f",
    "647981a948656172746265617483a373657103a46e6f646583a46e616d65ab61403132372e302e302e31a761",
    "646472657373ae3132372e302e302e313a34333730a97265736f757263657383a96370755f736c6f747302a4",
    "6770757390ac72756e6e696e675f6a6f627300a76d656d6265727390",
);

/// A GPU as peers without `software`, `unused` and `chains` send and read it.
#[test]
fn gpus_of_older_peers_read_as_hardware_in_use_and_idle_and_ours_keep_their_bytes() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct OldGpu {
        adapter: String,
        backend: String,
        memory_bytes: Option<u64>,
    }
    let old = OldGpu {
        adapter: "NVIDIA H100".into(),
        backend: "Vulkan".into(),
        memory_bytes: Some(80 << 30),
    };
    let bytes = rmp_serde::to_vec_named(&old).unwrap();
    let read: WireGpu = rmp_serde::from_slice(&bytes).unwrap();
    assert!(
        !read.software && !read.unused && read.chains == 0,
        "{read:?}"
    );
    assert_eq!(rmp_serde::to_vec_named(&read).unwrap(), bytes);
    let software = WireGpu {
        software: true,
        unused: true,
        chains: 4096,
        ..read
    };
    let bytes = rmp_serde::to_vec_named(&software).unwrap();
    assert_eq!(rmp_serde::from_slice::<OldGpu>(&bytes).unwrap(), old);
    assert_eq!(rmp_serde::from_slice::<WireGpu>(&bytes).unwrap(), software);
}

#[test]
fn a_newer_peer_with_extra_fields_is_still_understood() {
    #[derive(Serialize)]
    struct FutureEnvelope {
        version: u16,
        request_id: u64,
        sender: String,
        body: &'static str,
        trace_id: u64,
    }
    let bytes = rmp_serde::to_vec_named(&FutureEnvelope {
        version: PROTOCOL_VERSION,
        request_id: 5,
        sender: "z@h".into(),
        body: "Members",
        trace_id: 99,
    })
    .unwrap();
    let envelope = Envelope::<MembershipRequest>::decode(&bytes).unwrap();
    assert_eq!(envelope.body, MembershipRequest::Members);
    assert_eq!(envelope.request_id, RequestId(5));
}

#[test]
fn another_protocol_version_is_refused_by_name() {
    let mut envelope = Envelope::new(RequestId(1), &sender(), MembershipRequest::Members);
    envelope.version = PROTOCOL_VERSION + 1;
    let bytes = rmp_serde::to_vec_named(&envelope).unwrap();
    let error = Envelope::<MembershipRequest>::decode(&bytes).unwrap_err();
    assert_eq!(
        error,
        WireError::UnsupportedVersion {
            found: PROTOCOL_VERSION + 1,
            supported: PROTOCOL_VERSION
        }
    );
    assert!(
        error
            .to_string()
            .contains("run the same release on every node")
    );
}

#[test]
fn garbage_and_deep_nesting_are_malformed_not_panics() {
    for bytes in [
        vec![],
        vec![0xc1],
        b"not msgpack at all".to_vec(),
        vec![0xdd, 0xff, 0xff, 0xff, 0xff],
    ] {
        let error = Envelope::<MembershipRequest>::decode(&bytes).unwrap_err();
        assert!(matches!(error, WireError::Malformed { .. }), "{error:?}");
    }
    // 10 000 nested one-element arrays: refused by the depth limit, no stack overflow.
    let mut deep = vec![0x91; 10_000];
    deep.push(0xc0);
    let error = Envelope::<MembershipRequest>::decode(&deep).unwrap_err();
    assert!(matches!(error, WireError::Malformed { .. }), "{error:?}");

    let wrong_sender = Envelope {
        sender: "no host".into(),
        ..Envelope::new(RequestId(1), &sender(), MembershipRequest::Members)
    };
    assert!(matches!(
        wrong_sender.sender_name(),
        Err(WireError::Malformed { .. })
    ));
}

#[test]
fn oversized_messages_are_refused_both_ways() {
    let big = vec![0u8; MAX_ENVELOPE_BYTES + 1];
    assert_eq!(
        Envelope::<MembershipRequest>::decode(&big).unwrap_err(),
        WireError::TooLarge {
            size: big.len() as u64,
            limit: MAX_ENVELOPE_BYTES as u64
        }
    );
    let body = MembershipRequest::Join {
        address: "x".repeat(MAX_ENVELOPE_BYTES),
    };
    let error = Envelope::new(RequestId(1), &sender(), body)
        .encode()
        .unwrap_err();
    assert!(matches!(error, WireError::TooLarge { .. }), "{error:?}");
    const { assert!(MAX_ENVELOPE_BYTES as u64 + 1024 * 1024 < MAX_FRAME_BYTES) };
}

/// The cluster message layout ractor_cluster puts on the wire: tag "Call", one
/// length-prefixed argument holding our envelope unchanged.
#[tokio::test]
async fn membership_wire_tag_and_argument_layout() {
    let (port, _reply) = ractor::concurrency::oneshot();
    let envelope = vec![1u8, 2, 3];
    let serialized = MembershipWire::Call(envelope.clone(), port.into())
        .serialize()
        .unwrap();
    let SerializedMessage::Call { variant, args, .. } = serialized else {
        panic!("expected a call");
    };
    assert_eq!(variant, "Call");
    assert_eq!(args, [0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]);
}

/// A local echo service: answers heartbeats, refuses what it cannot read.
struct Echo;

impl Actor for Echo {
    type Msg = MembershipWire;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Self::Msg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        MembershipWire::Call(bytes, port): Self::Msg,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let me: NodeName = "echo@h".parse().unwrap();
        match Envelope::<MembershipRequest>::decode(&bytes) {
            Ok(envelope) => {
                let reply = match envelope.body {
                    MembershipRequest::Heartbeat { seq, node, .. } => MembershipReply::Heartbeat {
                        seq,
                        node,
                        members: vec![],
                    },
                    _ => MembershipReply::Left,
                };
                Responder::<MembershipWire>::new(port, envelope.request_id, me)
                    .with_local_reply(envelope.local_reply)
                    .send(Ok(reply));
            }
            Err(error) => refuse::<MembershipWire>(port, &bytes, &me, error),
        }
        Ok(())
    }
}

#[tokio::test]
async fn call_and_responder_carry_ids_and_errors() {
    let (echo, handle) = Actor::spawn(None, Echo, ()).await.unwrap();
    let request = Envelope::new(
        RequestId(42),
        &sender(),
        MembershipRequest::Heartbeat {
            seq: 9,
            node: node_info(),
            members: vec![],
        },
    );
    let reply = call(&echo, "echo@h", &request, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(reply.request_id, RequestId(42));
    assert_eq!(reply.sender, "echo@h");
    assert!(matches!(
        reply.body,
        MembershipReply::Heartbeat { seq: 9, .. }
    ));

    // An envelope from a future version is refused with a typed error, and keeps its id.
    let mut future = Envelope::new(RequestId(43), &sender(), MembershipRequest::Members);
    future.version = 99;
    let bytes = rmp_serde::to_vec_named(&future).unwrap();
    let answer = echo
        .call(
            |port| MembershipWire::Call(bytes, port),
            Some(Duration::from_secs(5)),
        )
        .await
        .unwrap()
        .unwrap();
    let answer = Envelope::<Result<MembershipReply, WireError>>::decode(&answer).unwrap();
    assert_eq!(answer.request_id, RequestId(43));
    assert_eq!(
        answer.body,
        Err(WireError::UnsupportedVersion {
            found: 99,
            supported: PROTOCOL_VERSION
        })
    );

    // A request that names an open slot is answered in memory; one that names a key no
    // caller of this process opened (as another node's could) gets bytes.
    let ask = |local_reply| {
        let mut request = Envelope::new(RequestId(44), &sender(), MembershipRequest::Members);
        request.local_reply = local_reply;
        let bytes = request.encode().unwrap();
        echo.call(
            |port| MembershipWire::Call(bytes, port),
            Some(Duration::from_secs(5)),
        )
    };
    let slot = local::Slot::open().unwrap();
    let answer = ask(Some(slot.key())).await.unwrap().unwrap();
    assert_eq!(answer, local::MARKER);
    let reply = slot
        .take::<Envelope<Result<MembershipReply, WireError>>>()
        .unwrap();
    assert_eq!(
        (reply.request_id, reply.body),
        (RequestId(44), Ok(MembershipReply::Left))
    );
    let closed = slot.key();
    drop(slot);
    let answer = ask(Some(closed)).await.unwrap().unwrap();
    let answer = Envelope::<Result<MembershipReply, WireError>>::decode(&answer).unwrap();
    assert_eq!(answer.body, Ok(MembershipReply::Left));

    echo.stop(None);
    handle.await.unwrap();
    let error = call(&echo, "echo@h", &request, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Unreachable { .. }), "{error:?}");
}

/// A sampler's chain failure is the bytes version-1 peers always sent; a worker's failure
/// adds a field older peers skip (they fail the job, as they always did).
#[test]
fn chain_failure_causes_keep_older_peers_reading() {
    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    enum OlderEvent {
        ChainFailed { chain: u32, error: String },
    }
    let older = OlderEvent::ChainFailed {
        chain: 3,
        error: "no finite starting point".into(),
    };
    let sampler = WireTaskEvent::ChainFailed {
        chain: 3,
        error: "no finite starting point".into(),
        cause: WireFailure::Sampler,
    };
    let older_bytes = rmp_serde::to_vec_named(&older).unwrap();
    assert_eq!(rmp_serde::to_vec_named(&sampler).unwrap(), older_bytes);
    let read: WireTaskEvent = rmp_serde::from_slice(&older_bytes).unwrap();
    assert_eq!(read, sampler);

    let worker = WireTaskEvent::ChainFailed {
        chain: 3,
        error: "on the GPU: device lost".into(),
        cause: WireFailure::Worker,
    };
    let bytes = rmp_serde::to_vec_named(&worker).unwrap();
    assert_eq!(
        rmp_serde::from_slice::<WireTaskEvent>(&bytes).unwrap(),
        worker
    );
    assert_eq!(
        rmp_serde::from_slice::<OlderEvent>(&bytes).unwrap(),
        OlderEvent::ChainFailed {
            chain: 3,
            error: "on the GPU: device lost".into(),
        }
    );
    round_trip(PoolRequest::InjectFault(WireFault::FailRuns));
    round_trip(PoolRequest::InjectFault(WireFault::AbortOnRun));
}

/// A request over a subset of chains, a draining coordinator's event and refusal, a draining
/// member: all round trip, and a request for every chain is the bytes version-1 peers
/// always sent (and a node that does not drain says nothing of it).
#[test]
fn failover_and_drain_bodies_keep_older_peers_reading() {
    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct OlderRequest {
        #[serde(with = "serde_bytes")]
        model: Vec<u8>,
        settings: WireSettings,
        n_chains: u32,
        seed: u64,
        device: WireDevice,
        warmup: WireWarmup,
    }
    let older = OlderRequest {
        model: vec![1, 2, 3],
        settings: WireSettings::from(&sampler::SamplerSettings::default()),
        n_chains: 8,
        seed: 5,
        device: WireDevice::Cpu,
        warmup: WireWarmup::Independent,
    };
    let every = WireSampleRequest {
        model: older.model.clone(),
        settings: older.settings.clone(),
        n_chains: 8,
        seed: 5,
        device: WireDevice::Cpu,
        warmup: WireWarmup::Independent,
        chains: None,
        blocks: false,
        link: false,
        positions: false,
    };
    let older_bytes = rmp_serde::to_vec_named(&older).unwrap();
    assert_eq!(rmp_serde::to_vec_named(&every).unwrap(), older_bytes);
    assert_eq!(
        rmp_serde::from_slice::<WireSampleRequest>(&older_bytes).unwrap(),
        every
    );
    let subset = WireSampleRequest {
        chains: Some(vec![1, 5, 7]),
        ..every
    };
    round_trip(JobRequest::Submit(subset.clone()));
    round_trip(JobRequest::Submit(WireSampleRequest {
        blocks: true,
        link: true,
        positions: true,
        ..subset
    }));
    let mut block = crate::wire::WireDrawBlock::new(1, 20);
    block.push(3, false, 5, 12, &[0.5], &[sampler::DrawStats::default()]);
    round_trip(WireJobEvent::Block {
        attempts: vec![2],
        block: block.clone().into(),
    });
    round_trip(crate::wire::WireTaskEvent::Block(block.clone().into()));
    // A block of positions says so; one of values encodes as before the flag.
    let values_bytes = rmp_serde::to_vec_named(&block).unwrap();
    assert!(!values_bytes.windows(9).any(|w| w == b"positions"));
    block.positions = true;
    round_trip(crate::wire::WireTaskEvent::Block(block.into()));
    round_trip(WireJobEvent::Draining {
        node: "a@127.0.0.1".into(),
        grace_ms: 30_000,
    });
    round_trip(Err::<JobReply, _>(WireError::Draining {
        node: "a@127.0.0.1".into(),
    }));
    round_trip(MembershipReply::Members {
        members: vec![WireMemberStatus {
            name: "b@127.0.0.1".into(),
            address: "127.0.0.1:4371".into(),
            state: WireMemberState::Draining,
            resources: None,
        }],
    });
    let draining = WireNodeInfo {
        draining: true,
        ..node_info()
    };
    round_trip(MembershipRequest::Heartbeat {
        seq: 1,
        node: draining,
        members: vec![],
    });
}

/// The GPU's precision travels in the settings: absent for auto (the bytes of a peer that
/// predates it, which then means auto), present and round-tripping otherwise.
#[test]
fn settings_carry_the_gpu_precision_absent_for_auto() {
    use gpu_actor::PrecisionMode;
    let plain = WireSettings::from(&sampler::SamplerSettings::default());
    let auto = plain.clone().with_precision(PrecisionMode::Auto);
    assert_eq!(
        rmp_serde::to_vec_named(&auto).unwrap(),
        rmp_serde::to_vec_named(&plain).unwrap()
    );
    assert_eq!(plain.precision_mode(), PrecisionMode::Auto);
    for mode in [PrecisionMode::F32, PrecisionMode::F64] {
        let settings = plain.clone().with_precision(mode);
        let bytes = rmp_serde::to_vec_named(&settings).unwrap();
        let back: WireSettings = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back.precision_mode(), mode);
    }
}

/// A poll answer without notes and a chain's report without `ran_on` are the bytes peers
/// that predate them send, and with them they round trip.
#[test]
fn run_notes_are_absent_from_the_bytes_when_there_are_none() {
    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    enum OlderReply {
        Events {
            job: JobId,
            events: Vec<WireEvent<WireJobEvent>>,
        },
    }
    let older = OlderReply::Events {
        job: JobId(3),
        events: vec![],
    };
    let plain = JobReply::Events {
        job: JobId(3),
        events: vec![],
        notes: vec![],
    };
    let older_bytes = rmp_serde::to_vec_named(&older).unwrap();
    assert_eq!(rmp_serde::to_vec_named(&plain).unwrap(), older_bytes);
    assert_eq!(
        rmp_serde::from_slice::<JobReply>(&older_bytes).unwrap(),
        plain
    );
    round_trip(JobReply::Events {
        job: JobId(3),
        events: vec![],
        notes: vec![WireRunNote {
            node: "g@127.0.0.1".into(),
            text: "GPU gpu0 (llvmpipe) f64 (auto: f32 is off by 3.2 in a trajectory)".into(),
        }],
    });

    let done = WireChainDone {
        chain: 1,
        n_columns: 1,
        n_draws: 2,
        n_warmup_draws: 0,
        tuning: WireTuning {
            step_size: 0.5,
            inv_metric: vec![1.0],
            dense: false,
        },
        init: vec![0.0],
        final_position: vec![1.0],
        grad_evals_warmup: 3,
        grad_evals_sampling: 4,
        warmup_seconds: 0.5,
        sampling_seconds: 0.25,
        ran_on: None,
    };
    let bytes = rmp_serde::to_vec_named(&done).unwrap();
    assert!(!bytes.windows(6).any(|w| w == b"ran_on"));
    let noted = WireChainDone {
        ran_on: Some("CPU (the GPU refused the model): ...".into()),
        ..done
    };
    round_trip(PoolReply::Events {
        task: crate::ids::TaskId(2),
        events: vec![WireEvent {
            seq: 1,
            event: WireTaskEvent::ChainDone(noted),
        }],
    });
}

/// A node that answers follow polls in turn says so with its job; an older one's answer
/// (no such field) reads as not following, and a new answer without it has the old bytes.
#[test]
fn a_submitted_job_says_whether_its_coordinator_follows() {
    #[derive(Serialize)]
    enum OlderReply {
        Submitted { job: JobId, n_chains: u32 },
    }
    let older = rmp_serde::to_vec_named(&OlderReply::Submitted {
        job: JobId(3),
        n_chains: 4,
    })
    .unwrap();
    let not_following = JobReply::Submitted {
        job: JobId(3),
        n_chains: 4,
        link: None,
        follows: false,
    };
    assert_eq!(
        rmp_serde::from_slice::<JobReply>(&older).unwrap(),
        not_following
    );
    assert_eq!(rmp_serde::to_vec_named(&not_following).unwrap(), older);
    round_trip(JobReply::Submitted {
        job: JobId(3),
        n_chains: 4,
        link: None,
        follows: true,
    });
}
