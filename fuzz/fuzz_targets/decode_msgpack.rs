//! Fuzz target: arbitrary bytes through `CheckedModel::from_msgpack`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sampler::CheckedModel;
use sampler_fuzz::{LIMITS, exercise};

fuzz_target!(|data: &[u8]| {
    exercise(data, CheckedModel::from_msgpack(data, &LIMITS));
});
