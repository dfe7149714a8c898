//! What the `decode_wire` target does with one input: the first byte picks one of the
//! decoders a peer's bytes reach (before authentication: the preamble and the guard's frame
//! check; after: every service's request and reply envelope), the rest is the input.
//!
//! Errors are fine (their messages are rendered, which must not panic either). What decodes
//! must encode again, and that encoding must decode to the same encoding (a fixed point: a
//! NaN in a body makes `==` useless, bytes are not); names and models in it go through the
//! same checks the receiving actor runs.

use runtime::transport::preamble::{Hello, Status};
use runtime::wire::{
    Envelope, JobReply, JobRequest, MembershipReply, MembershipRequest, PoolReply, PoolRequest,
    WireError,
};
use runtime::{MemberStatus, NodeName};
use sampler::CheckedModel;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::LIMITS;

/// Runs the decoder `data[0]` picks on `data[1..]`.
pub fn exercise(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    match selector % 10 {
        0 => {
            if let Some(request) = envelope::<MembershipRequest>(bytes) {
                let _ = format!("{:?}", request.body);
            }
        }
        1 => {
            if let Some(reply) = envelope::<Result<MembershipReply, WireError>>(bytes)
                && let Ok(MembershipReply::Members { members }) = reply.body
            {
                for member in members {
                    let _ = MemberStatus::from_wire(member).map_err(|e| e.to_string());
                }
            }
        }
        2 => {
            if let Some(request) = envelope::<JobRequest>(bytes)
                && let JobRequest::Submit(submitted) = request.body
            {
                model(&submitted.model);
            }
        }
        3 => {
            let _ = envelope::<Result<JobReply, WireError>>(bytes);
        }
        4 => {
            if let Some(request) = envelope::<PoolRequest>(bytes)
                && let PoolRequest::Run(task) = request.body
            {
                model(&task.model);
            }
        }
        5 => {
            let _ = envelope::<Result<PoolReply, WireError>>(bytes);
        }
        6 => match Hello::parse(bytes) {
            Ok(Some((hello, used))) => {
                assert!(used <= bytes.len(), "a hello longer than its bytes");
                let again = hello.encode();
                match Hello::parse(&again) {
                    Ok(Some((same, n))) => {
                        assert_eq!(same, hello, "a hello changed on its way back");
                        assert_eq!(n, again.len());
                    }
                    other => panic!("our own hello does not parse: {other:?}"),
                }
            }
            Ok(None) => {}
            Err(error) => {
                let _ = error.to_string();
            }
        },
        7 => match Status::parse(bytes) {
            Ok(Some((answer, used))) => {
                assert!(used <= bytes.len(), "a status longer than its bytes");
                let _ = format!("{answer:?}");
            }
            Ok(None) => {}
            Err(error) => {
                let _ = error.to_string();
            }
        },
        selector => {
            let peer: NodeName = "peer@127.0.0.1".parse().expect("a valid name");
            let inbound = selector == 8;
            if let Err(why) = runtime::transport::inspect_preauth_frame(bytes, inbound, &peer) {
                assert!(why.len() < 1024, "a refusal that quotes the peer at length");
            }
        }
    }
}

/// Decodes an envelope; what decodes re-encodes to a fixed point and its sender is checked.
fn envelope<T: Serialize + DeserializeOwned>(bytes: &[u8]) -> Option<Envelope<T>> {
    let decoded = match Envelope::<T>::decode(bytes) {
        Ok(decoded) => decoded,
        Err(error) => {
            let _ = error.to_string();
            return None;
        }
    };
    let _ = decoded.sender_name().map_err(|e| e.to_string());
    let once = decoded.encode().ok()?;
    let again = Envelope::<T>::decode(&once).expect("our own encoding decodes");
    let twice = again.encode().expect("what encoded once encodes again");
    assert_eq!(once, twice, "re-encoding is not a fixed point");
    Some(decoded)
}

/// A model as a node receives it: decoded and validated (with the fuzzing limits).
fn model(bytes: &[u8]) {
    if let Err(error) = CheckedModel::from_msgpack(bytes, &LIMITS) {
        let _ = error.to_string();
    }
}
