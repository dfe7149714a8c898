//! Writes the seed corpus of the `decode_wire` target (`fuzz/corpus_seed/decode_wire/`): one
//! valid input per decoder, each starting with the byte that picks it (see `src/wire.rs`).
//! Run from the repository root: `cargo run --manifest-path fuzz/Cargo.toml --example
//! wire_seeds`.

use std::path::Path;

use runtime::transport::preamble::{Hello, Status};
use runtime::wire::{
    Envelope, JobReply, JobRequest, MembershipReply, MembershipRequest, PoolReply, PoolRequest,
    WireError,
};
use runtime::{JobId, NodeName, RequestId, SampleRequest, TaskId};
use sampler::{Model, SamplerSettings, Seed};

fn main() {
    let dir = Path::new("fuzz/corpus_seed/decode_wire");
    std::fs::create_dir_all(dir).expect("the seed directory");
    let me: NodeName = "a@127.0.0.1".parse().expect("a valid name");
    let model_json = std::fs::read_to_string("models/eight_schools_noncentered.json")
        .expect("run from the repository root");
    let model = Model::from_json(&model_json).expect("a valid model");
    let request = SampleRequest::new(model, SamplerSettings::default(), 4, Seed(1)).to_wire();
    let seeds: Vec<(&str, u8, Vec<u8>)> = vec![
        ("members", 0, bytes(&me, MembershipRequest::Members)),
        ("leave", 0, bytes(&me, MembershipRequest::Leave)),
        (
            "members-reply",
            1,
            bytes(&me, Ok::<_, WireError>(MembershipReply::Members { members: Vec::new() })),
        ),
        ("submit", 2, bytes(&me, JobRequest::Submit(request.clone()))),
        (
            "poll",
            2,
            bytes(&me, JobRequest::Poll { job: JobId(3), ack: 2, wait_ms: 1000, follow: false }),
        ),
        (
            "submitted",
            3,
            bytes(&me, Ok::<_, WireError>(JobReply::Submitted { job: JobId(3), n_chains: 4, link: None, follows: true })),
        ),
        (
            "refused",
            3,
            bytes(
                &me,
                Err::<JobReply, _>(WireError::Invalid {
                    what: "request".into(),
                    reason: "no".into(),
                }),
            ),
        ),
        ("status", 4, bytes(&me, PoolRequest::Status)),
        (
            "pool-poll",
            4,
            bytes(&me, PoolRequest::Poll { task: TaskId(5), ack: 0, wait_ms: 100 }),
        ),
        (
            "pool-cancel",
            4,
            bytes(&me, PoolRequest::Cancel { task: TaskId(5) }),
        ),
        (
            "pool-refused",
            5,
            bytes(&me, Err::<PoolReply, _>(WireError::NotFound { what: "task".into() })),
        ),
        ("hello", 6, Hello::new(&me, 42).encode()),
        ("status-ok", 7, Status::TlsRequired.encode()),
        // The guard's frames, protobuf by hand: NetworkMessage { auth: AuthenticationMessage
        // { name: NameMessage { name, connection_string } } } to a node, and the node's
        // Challenge { name, challenge, connection_string } to a dialler.
        (
            "preauth-name",
            8,
            field(1, &field(1, &[field(1, PEER), field(3, ADDRESS)].concat())),
        ),
        (
            "preauth-challenge",
            9,
            field(
                1,
                &field(4, &[field(1, PEER), vec![3 << 3, 42], field(4, ADDRESS)].concat()),
            ),
        ),
    ];
    for (name, selector, body) in seeds {
        let mut input = vec![selector];
        input.extend_from_slice(&body);
        std::fs::write(dir.join(name), input).expect("a seed file");
    }
}

/// The name the fuzz target's guard expects a peer to announce (see `src/wire.rs`).
const PEER: &[u8] = b"peer@127.0.0.1";
const ADDRESS: &[u8] = b"127.0.0.1:4000";

/// One length-delimited protobuf field (wire type 2) of fewer than 128 bytes.
fn field(tag: u8, body: &[u8]) -> Vec<u8> {
    let len = u8::try_from(body.len()).expect("a short field");
    assert!(len < 128, "a one-byte length");
    [vec![tag << 3 | 2, len], body.to_vec()].concat()
}

fn bytes<T: serde::Serialize>(me: &NodeName, body: T) -> Vec<u8> {
    Envelope::new(RequestId(7), me, body)
        .encode()
        .expect("a small envelope encodes")
}
