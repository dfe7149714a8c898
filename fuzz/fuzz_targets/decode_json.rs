//! Fuzz target: arbitrary bytes, as UTF-8 text, through `CheckedModel::from_json`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sampler::CheckedModel;
use sampler_fuzz::{LIMITS, exercise};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        exercise(data, CheckedModel::from_json(text, &LIMITS));
    }
});
